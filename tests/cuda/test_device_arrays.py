"""Device arrays on the cuda backend: CuPy and torch inputs are read in place and the
outputs stay on the device (no host round trip), as the caller's array type, with the same
bytes as the host path."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre.kernel import In, InOut, Out, f32, gid, i32

pytestmark = pytest.mark.gpu


@vyre.kernel
def _saxpy(x: In[f32], y: In[f32], out: Out[f32]):
    i = gid()
    out[i] = x[i] * 2.5 + y[i]


@vyre.kernel
def _bump(x: InOut[i32]):
    i = gid()
    if i < len(x):
        x[i] = x[i] * 3 + 1


def test_cupy_in_cupy_out_same_bytes(cuda):
    cp = pytest.importorskip("cupy")
    hx = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    hy = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    got = _saxpy(cp.asarray(hx), cp.asarray(hy), backend=cuda)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32 and got.shape == (100_003,)
    assert got.get().tobytes() == _saxpy(hx, hy, backend=cuda).tobytes()
    assert got.get().tobytes() == _saxpy(hx, hy, backend="reference").tobytes()


def test_torch_in_torch_out_and_inout_never_writes_the_callers_array(cuda):
    torch = pytest.importorskip("torch")
    x = torch.arange(1000, dtype=torch.int32, device="cuda")
    before = x.clone()
    got = _bump(x, backend=cuda)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    assert torch.equal(x, before)   # InOut outputs are fresh buffers, the input is untouched
    assert np.array_equal(got.cpu().numpy(), np.arange(1000, dtype=np.int32) * 3 + 1)


def test_dispatch_device_outputs_expose_cuda_array_interface(cuda):
    cp = pytest.importorskip("cupy")
    outs = cuda.dispatch_device(_saxpy.program, [cp.ones(10, cp.float32), cp.zeros(10, cp.float32)])
    (o,) = outs
    cai = o.__cuda_array_interface__
    assert cai["shape"] == (10,) and cai["typestr"] == "<f4"
    assert cp.asarray(o).get().tolist() == [2.5] * 10
