"""Device arrays on the cuda backend: CuPy and torch inputs are read in place and the
outputs stay on the device (no host round trip), as the caller's array type, with the same
bytes as the host path."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre.kernel import In, InOut, Out, f32, gid, i32, u8

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


@vyre.kernel
def _low_bytes(x: In[i32], o: Out[u8]):
    i = gid()
    o[i] = x[i] - 1


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


def test_warm_cupy_calls_give_fresh_arrays_of_cupys_pool_with_the_same_bytes(cuda):
    cp = pytest.importorskip("cupy")
    hx = np.random.default_rng(2).standard_normal(4099).astype(np.float32)
    hy = np.random.default_rng(3).standard_normal(4099).astype(np.float32)
    x, y = cp.asarray(hx), cp.asarray(hy)
    want = _saxpy(hx, hy, backend="reference").tobytes()
    got = [_saxpy(x, y, backend=cuda) for _ in range(3)]    # the first call plans, the others run it
    assert all(type(g) is cp.ndarray and g.base is None for g in got)   # CuPy's own arrays, no wrapper
    assert len({g.data.ptr for g in got}) == 3
    assert all(g.get().tobytes() == want for g in got)
    x[:] = 0   # the data of each call is read again
    assert _saxpy(x, y, backend=cuda).get().tobytes() == _saxpy(np.zeros_like(hx), hy, backend="reference").tobytes()


def test_narrow_outputs_of_an_odd_length_land_in_cupy_arrays_exactly(cuda):
    cp = pytest.importorskip("cupy")
    hx = np.arange(-3, 1000, dtype=np.int32)   # 1003 u8 outputs: not whole words
    got = _low_bytes(cp.asarray(hx), backend=cuda)
    assert type(got) is cp.ndarray and got.dtype == cp.uint8 and got.shape == (1003,)
    assert got.get().tolist() == ((hx - 1) & 0xFF).tolist()


def test_read_output_reads_a_device_output_in_place(cuda):
    """`read_output`: any byte range of a `dispatch_device` output, the same bytes as the
    host path; a range outside it, or an object that is no output of this backend, is
    InvalidInput (never a read of other memory)."""
    from vyre.driver import InvalidInput

    hx = np.arange(1001, dtype=np.float32)
    hy = np.full(1001, 0.5, np.float32)
    (out,) = cuda.dispatch_device(_saxpy.program, [hx, hy])
    want = np.frombuffer(cuda.dispatch(_saxpy.program, [hx, hy])[0], np.uint8)
    assert cuda.read_output(out, 0, out.nbytes).tobytes() == want.tobytes()
    for off, n in [(0, 4), (4000, 4), (12, 17), (out.nbytes - 1, 1), (out.nbytes, 0)]:
        assert cuda.read_output(out, off, n).tobytes() == want[off:off + n].tobytes()
    for off, n in [(out.nbytes - 3, 4), (-1, 4), (0, out.nbytes + 1)]:
        with pytest.raises(InvalidInput):
            cuda.read_output(out, off, n)
    with pytest.raises(InvalidInput):
        cuda.read_output(np.zeros(4, np.uint8), 0, 4)
