"""The CUDA driver's Python paths without a GPU (issue 24): cuda.core, the driver API and CuPy
are the stand-ins of tests/cuda/fake_cuda.py (no kernel computes anything), so these tests
check what vyre does around a launch: outputs in the caller's own arrays and their checks,
one stream wait per producer stream, raw pointers as arguments. Kernel results are checked
on the GPU (tests/cuda/test_device_arrays.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre.driver import InvalidInput
from vyre.kernel import In, Out, f32, gid

pytest.importorskip("cuda.bindings.nvrtc")


@vyre.kernel
def _saxpy(x: In[f32], y: In[f32], out: Out[f32]):
    i = gid()
    out[i] = x[i] * 2.5 + y[i]


@pytest.fixture
def fake(monkeypatch):
    """(a CudaBackend over the stand-ins, the stand-in module, the fake cupy module); the
    real modules come back afterwards and the cuda driver imported under the stand-ins is
    forgotten."""
    import cuda.bindings.nvrtc  # the real one, imported before the driver module is replaced

    cuda = sys.modules["cuda"]
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import fake_cuda
    finally:
        sys.path.pop(0)
    mods = fake_cuda.modules()
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(cuda.bindings, "driver", mods["cuda.bindings.driver"], raising=False)
    monkeypatch.setattr(cuda, "core", mods["cuda.core"], raising=False)
    cupy = fake_cuda.fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    drivers = [m for m in sys.modules if m.startswith("vyre.drivers.cuda")]
    for name in drivers:
        monkeypatch.delitem(sys.modules, name)
    from vyre.drivers.cuda.backend import CudaBackend

    b = CudaBackend()
    yield b, fake_cuda, cupy
    b.shutdown()
    for name in [m for m in sys.modules if m.startswith("vyre.drivers.cuda")]:
        if name not in drivers:
            del sys.modules[name]


def _arrays(cupy, n=256):
    return cupy.empty(n, np.float32), cupy.empty(n, np.float32)


def test_kernel_calls_on_cupy_arrays_return_arrays_of_cupys_own_allocator(fake):
    b, _, cupy = fake
    x, y = _arrays(cupy)
    first = _saxpy(x, y, backend=b)
    second = _saxpy(x, y, backend=b)   # the warm call: its plan
    assert type(first) is cupy.ndarray and type(second) is cupy.ndarray
    assert first is not second and first.ptr != second.ptr
    assert first.shape == (256,) and first.dtype == np.float32


def test_an_allocator_returning_the_wrong_size_is_refused(fake):
    b, _, cupy = fake
    x, y = _arrays(cupy)
    with pytest.raises(InvalidInput) as err:
        b.dispatch_device(_saxpy.program, [x, y], alloc=lambda n, dt: cupy.empty(n // 4 + 1, np.float32))
    assert err.value.reason == "input_size" and "Fix:" in str(err.value)


def test_an_allocator_returning_host_memory_is_refused(fake):
    b, _, cupy = fake
    x, y = _arrays(cupy)
    with pytest.raises(InvalidInput) as err:
        b.dispatch_device(_saxpy.program, [x, y], alloc=lambda n, dt: np.empty(n // 4, np.float32))
    assert err.value.reason == "input_device"


def test_an_allocator_returning_an_input_is_refused(fake):
    b, _, cupy = fake
    x, y = _arrays(cupy)
    with pytest.raises(InvalidInput, match="overlaps input 1") as err:
        b.dispatch_device(_saxpy.program, [x, y], alloc=lambda n, dt: y)
    assert err.value.reason == "input_device"


def test_an_allocator_of_the_wrong_dtype_is_refused(fake):
    b, _, cupy = fake
    x, y = _arrays(cupy)
    with pytest.raises(InvalidInput) as err:
        b.dispatch_device(_saxpy.program, [x, y], alloc=lambda n, dt: cupy.empty(n // 4, np.int32))
    assert err.value.reason == "input_dtype"


def test_a_dispatch_waits_once_per_producer_stream(fake, monkeypatch):
    b, fk, cupy = fake
    import cuda.bindings.driver as cu

    recorded = []
    monkeypatch.setattr(cu, "cuEventRecord", lambda ev, stream: (recorded.append(stream), (fk.OK,))[1])
    x, y = _arrays(cupy)   # every CuPy array names the legacy default stream (1)
    _saxpy(x, y, backend=b)
    recorded.clear()
    _saxpy(x, y, backend=b)
    assert recorded == [1]   # inputs and output: one producer stream, one wait


def test_device_inputs_are_passed_to_the_launch_as_pointers(fake, monkeypatch):
    b, _, cupy = fake
    import cuda.core as cc

    seen = []
    real = cc.launch
    monkeypatch.setattr(cc, "launch", lambda s, cfg, k, *args: (seen.append(args), real(s, cfg, k, *args)))
    x, y = _arrays(cupy)
    b.dispatch_device(_saxpy.program, [x, y])
    args = seen[-1]
    assert args[0] == x.ptr and args[1] == y.ptr   # the caller's memory, in place, as addresses


def test_an_allocator_that_runs_out_of_memory_is_a_vyre_error(fake):
    from vyre.driver import DeviceOutOfMemory

    b, _, cupy = fake
    x, y = _arrays(cupy)

    def oom(nbytes, dtype):
        raise MemoryError("Out of memory allocating 1,024 bytes")

    with pytest.raises(DeviceOutOfMemory) as err:
        b.dispatch_device(_saxpy.program, [x, y], alloc=oom)
    assert "Fix:" in str(err.value)
