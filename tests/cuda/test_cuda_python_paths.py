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
from vyre.kernel import In, InOut, Out, Scalar, f32, gid, u32

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


def test_capability_answers_are_the_device_attributes(fake):
    """Every capability query, pinned against the stand-in device's attributes (sm_90, the
    properties of tests/cuda/fake_cuda.py) and what the driver declares beside them."""
    import blake3

    from vyre.driver.validation import default_supported_ops

    b, fc, _ = fake
    p = fc._Props
    assert (b.id(), b.version(), b.supported_ops()) == ("cuda", vyre.__version__, default_supported_ops())
    assert (b.supports_subgroup_ops(), b.supports_tensor_cores(), b.supports_async_compute(),
            b.supports_speculation()) == (True, True, True, True)   # sm_90, warps of 32
    assert not (b.supports_f16() or b.supports_bf16() or b.supports_indirect_dispatch()
                or b.supports_grid_sync() or b.supports_persistent_thread_dispatch() or b.is_distributed())
    assert b.max_workgroup_size() == (p.max_block_dim_x, p.max_block_dim_y, p.max_block_dim_z)
    assert b.max_compute_invocations_per_workgroup() == p.max_threads_per_block
    assert b.max_compute_workgroups_per_dimension() == min(p.max_grid_dim_x, p.max_grid_dim_y, p.max_grid_dim_z)
    assert b.max_grid_size() == (min(p.max_grid_dim_x, 2**31 - 1), p.max_grid_dim_y, p.max_grid_dim_z)
    assert b.max_invocations_per_dispatch() == 2**40
    assert (b.subgroup_size(), b.max_storage_buffer_bytes()) == (p.warp_size, 80 << 30)
    prof = b.device_profile()
    assert (prof.backend, prof.has_shared_memory, prof.has_mul_high, prof.has_subgroup_shuffle) == \
        ("cuda", True, True, True)
    assert (prof.max_shared_memory_bytes, prof.compute_units, prof.l2_cache_bytes, prof.regs_per_thread_max,
            prof.shared_memory_bank_count, prof.shared_memory_bank_width_bytes, prof.subgroup_size) == \
        (p.max_shared_memory_per_block_optin, p.multiprocessor_count, p.l2_cache_size, 255, 32, 4, 32)
    assert prof.mem_bw_gbps == int(2 * p.memory_clock_rate * 1e3 * (p.global_memory_bus_width / 8) / 1e9)
    assert prof.device_name == "fake H100 (no GPU: tests/cuda/fake_cuda.py) (sm_90)"
    nvrtc = b.device.rt.cubins.version
    assert b.device_fingerprint() == blake3.blake3(
        f"fake H100 (no GPU: tests/cuda/fake_cuda.py)|sm_90|13000|nvrtc{nvrtc}".encode()).digest()
    lim = b.limits()
    assert (lim.max_grid, lim.max_invocations_per_dispatch, lim.max_buffer_bytes) == \
        (b.max_grid_size(), 2**40, 80 << 30)


def test_without_tensor_cores_the_fingerprint_says_scalar_matmul(fake, monkeypatch):
    from vyre.drivers.cuda.backend import CudaBackend

    monkeypatch.setenv("VYRE_CUDA_TENSOR_CORES", "0")
    b = CudaBackend()
    try:
        assert not b.supports_tensor_cores()
        assert b.device_fingerprint() == fake[0].device_fingerprint() + b"|scalar-matmul"
    finally:
        b.shutdown()


# ---- the warm path of dispatch_device (issue 24): a call of an earlier call's signature runs
# its plan; every check still refuses, and what depends on the data is read again

def _warm(b, cupy, n=256, **kw):
    x, y = _arrays(cupy, n)
    for _ in range(2):
        b.dispatch_device(_saxpy.program, [x, y], **kw)
    assert _plans(b, _saxpy) == 1
    return x, y


def _plans(b, kernel):
    """How many warm plans the kernel's pipeline holds (the calls above made one)."""
    return len(b.compile_native(kernel.program).warm)


class _Strided:
    """A device array whose interface says it is every other element of a larger array."""

    def __init__(self, base):
        self.base = base
        cai = dict(base.__cuda_array_interface__)
        cai["shape"], cai["strides"] = (base.size // 2,), (8,)
        self.__cuda_array_interface__ = cai


@pytest.mark.parametrize("alloc, reason", [
    ("size", "input_size"), ("host", "input_device"), ("input", "input_device"), ("dtype", "input_dtype")])
def test_warm_calls_check_what_the_allocator_returns(fake, alloc, reason):
    b, _, cupy = fake
    x, y = _warm(b, cupy, alloc=lambda n, dt: cupy.empty(n // 4, np.float32))
    bad = {"size": lambda n, dt: cupy.empty(n // 4 + 1, np.float32),
           "host": lambda n, dt: np.empty(n // 4, np.float32),
           "input": lambda n, dt: y,
           "dtype": lambda n, dt: cupy.empty(n // 4, np.int32)}[alloc]
    with pytest.raises(InvalidInput) as err:
        b.dispatch_device(_saxpy.program, [x, y], alloc=bad)
    assert err.value.reason == reason and "Fix:" in str(err.value)


def test_warm_calls_check_their_inputs(fake):
    b, _, cupy = fake
    x, y = _warm(b, cupy)
    with pytest.raises(InvalidInput) as err:   # another dtype: another signature, the full check
        b.dispatch_device(_saxpy.program, [x, cupy.empty(256, np.int32)])
    assert err.value.reason == "input_dtype"
    with pytest.raises(InvalidInput) as err:
        b.dispatch_device(_saxpy.program, [x, _Strided(cupy.empty(512, np.float32))])
    assert err.value.reason == "input_layout"
    bad = _Strided(cupy.empty(256, np.float32))
    bad.__cuda_array_interface__ = dict(y.__cuda_array_interface__, data=None)   # same layout, no pointer
    with pytest.raises(InvalidInput) as err:
        b.dispatch_device(_saxpy.program, [x, bad])
    assert err.value.reason == "input_type" and "malformed" in str(err.value)
    with pytest.raises(InvalidInput) as err:
        b.dispatch_device(_saxpy.program, [x, y, y])
    assert err.value.reason == "input_count"


def test_warm_calls_pass_each_calls_own_pointers_and_wait_for_its_streams(fake, monkeypatch):
    b, fk, cupy = fake
    import cuda.bindings.driver as cu
    import cuda.core as cc

    _warm(b, cupy)
    seen, recorded = [], []
    real = cc.launch
    monkeypatch.setattr(cc, "launch", lambda s, cfg, k, *args: (seen.append(args), real(s, cfg, k, *args)))
    monkeypatch.setattr(cu, "cuEventRecord", lambda ev, stream: (recorded.append(stream), (fk.OK,))[1])
    x, y = _arrays(cupy)
    x.stream = 7
    type(x).__cuda_array_interface__ = property(
        lambda a: dict(fk.DeviceArray.__cuda_array_interface__.fget(a), stream=getattr(a, "stream", 1)))
    try:
        outs = b.dispatch_device(_saxpy.program, [x, y])
    finally:
        del type(x).__cuda_array_interface__
    assert seen[-1][0] == x.ptr and seen[-1][1] == y.ptr and seen[-1][2].handle == outs[0].ptr
    assert recorded == [7, 1]


def test_warm_calls_stage_host_inputs_of_each_call(fake):
    """A host input beside device arrays (a Scalar's words) is staged on every call: the
    buffer the kernel reads holds this call's value."""
    import ctypes

    import cuda.core as cc

    @vyre.kernel
    def scaled(a: Scalar[f32], x: In[f32], out: Out[f32]):
        out[gid()] = a * x[gid()]

    b, _, cupy = fake
    x = cupy.empty(64, np.float32)
    seen = []
    real = cc.launch
    try:
        cc.launch = lambda s, cfg, k, *args: (seen.append(args), real(s, cfg, k, *args))
        for value in (1.5, 2.5, -3.0):
            scaled(value, x, backend=b)
            got = np.frombuffer((ctypes.c_uint8 * 4).from_address(seen[-1][0].handle), np.float32)[0]
            assert got == np.float32(value)
        assert _plans(b, scaled) == 1
    finally:
        cc.launch = real


def test_warm_calls_copy_read_write_inputs_and_stop_after_shutdown(fake):
    from vyre.driver import DispatchFailed

    @vyre.kernel
    def bump(x: InOut[u32]):
        x[gid()] = x[gid()] + 1

    b, fk, cupy = fake
    for k in range(3):
        x = cupy.asarray(fk.DeviceArray(np.arange(k, k + 64, dtype=np.uint32)))
        out = b.dispatch_device(bump.program, [x])[0]   # no kernel runs: the output is the copy
        got = cupy.asarray(out)
        assert out.ptr != x.ptr and got.get().tolist() == list(range(k, k + 64))
    assert _plans(b, bump) == 1
    b.shutdown()
    with pytest.raises(DispatchFailed, match="shut down"):
        b.dispatch_device(bump.program, [x])


def test_staged_dispatches_upload_each_calls_words(fake, monkeypatch):
    """The synchronous staged path (every buffer small, host inputs): the buffer the kernel
    reads holds this call's words, every call."""
    import ctypes

    import cuda.core as cc

    b, _, _ = fake
    seen = []
    real = cc.launch
    monkeypatch.setattr(cc, "launch", lambda s, cfg, k, *args: (seen.append(args), real(s, cfg, k, *args)))
    x = np.zeros(256, np.float32)
    for k in range(3):
        x[:] = np.arange(256, dtype=np.float32) * (k + 1)
        out = b.dispatch_arrays(_saxpy.program, [x, x])[0]
        assert out.dtype == np.float32 and out.shape == (256,)
        for arg in seen[-1][:2]:
            got = np.frombuffer((ctypes.c_uint8 * 1024).from_address(arg.handle), np.float32)
            assert got.tobytes() == x.tobytes()
