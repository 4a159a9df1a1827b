"""The CUDA driver on a real GPU: capabilities against device attributes, async, timing,
resident buffers, caching, device arrays in place, errors and recovery. All `gpu`."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from vyre import reference
from vyre.driver import (
    DeviceLost,
    DeviceOutOfMemory,
    DispatchConfig,
    DispatchFailed,
    InvalidInput,
    InvalidProgram,
)
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import GX, as_u32, lcg, slow_program

pytestmark = pytest.mark.gpu
U = DataType.U32


def _inc() -> Program:
    return Program.wrapped([BufferDecl.read_write("x", 0, U)], 64,
                           [Node.store("x", GX, Expr.load("x", GX) + 1)])


def test_capabilities_match_device_attributes(cuda):
    import cuda.core as cc

    dev = cc.Device(0)
    p = dev.properties
    assert cuda.max_workgroup_size() == (p.max_block_dim_x, p.max_block_dim_y, p.max_block_dim_z)
    assert cuda.max_compute_invocations_per_workgroup() == p.max_threads_per_block
    assert cuda.subgroup_size() == p.warp_size == 32
    prof = cuda.device_profile()
    assert prof.compute_units == p.multiprocessor_count
    assert prof.l2_cache_bytes == p.l2_cache_size
    # what a block may have once its kernel opts in (vyre declares arrays past 48 KiB in
    # dynamic shared memory and raises the kernel's limit: vyre.drivers.cuda.tiles)
    assert prof.max_shared_memory_bytes == p.max_shared_memory_per_block_optin > p.max_shared_memory_per_block
    assert prof.mem_bw_gbps == int(2 * p.memory_clock_rate * 1e3 * p.global_memory_bus_width / 8 / 1e9)
    assert cuda.max_storage_buffer_bytes() > 1 << 30
    assert cuda.supports_subgroup_ops() is True  # warp intrinsics are emitted (tests/semantics/test_subgroups.py)
    assert cuda.supports_async_compute() is True
    assert cuda.supports_grid_sync() is False     # grid_sync runs as one launch per phase


def test_dispatch_async_returns_before_the_kernel_finishes(cuda):
    p = slow_program()
    a = np.arange(1 << 16, dtype=np.uint32)
    trips = np.array([20_000_000], np.uint32)  # ~0.1 s of dependent integer math per lane
    cuda.dispatch(p, [a[:256], np.array([1], np.uint32)])  # compile outside the timed part
    t = time.perf_counter()
    pending = cuda.dispatch_async(p, [a, trips])
    returned = time.perf_counter() - t
    assert not pending.is_ready()
    out = pending.await_result()
    waited = time.perf_counter() - t
    assert pending.is_ready()
    assert returned < waited / 4
    assert np.array_equal(as_u32(out[0])[:512], lcg(a[:512], 20_000_000))


def test_timed_dispatch_reports_device_time(cuda):
    p = slow_program()
    r = cuda.dispatch_borrowed_timed(p, [np.arange(4096, dtype=np.uint32), np.array([20_000], np.uint32)])
    assert r.device_ns is not None and 0 < r.device_ns <= r.wall_ns
    assert r.enqueue_ns is not None and r.wait_ns is not None


def test_timeout_is_honoured(cuda):
    p = slow_program()
    a = np.arange(1 << 18, dtype=np.uint32)
    cuda.dispatch(p, [a[:256], np.array([1], np.uint32)])
    with pytest.raises(DispatchFailed, match="timeout"):
        cuda.dispatch(p, [a, np.array([60_000_000], np.uint32)], DispatchConfig(timeout=0.05))
    cuda.flush()


def test_resident_buffers_and_bound_dispatch(cuda, opencl_or_none):
    x = np.arange(1000, dtype=np.uint32)
    res = cuda.allocate_resident(x.nbytes)
    cuda.upload_resident(res, x)
    timed = cuda.dispatch_resident_timed(_inc(), [res])
    assert timed.device_ns and timed.outputs == []
    bound = cuda.bind_resident(_inc(), [res])
    for _ in range(10):
        bound.launch()
    bound.run()
    assert np.array_equal(as_u32(cuda.read_resident(res)), x + 12)
    if opencl_or_none is not None:
        with pytest.raises(InvalidProgram):
            opencl_or_none.upload_resident(res, x)
    cuda.free_resident(res)
    with pytest.raises(InvalidProgram):
        cuda.read_resident(res)


def test_compiled_pipeline_is_cached_and_identical(cuda):
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U)], 128,
                        [Node.store("out", GX, Expr.load("a", GX) * 7 + 3)])
    a = np.arange(5000, dtype=np.uint32)
    pipe = P.compile(cuda, p)
    assert pipe.native
    before = cuda.pipeline_cache_snapshot()
    assert P.compile(cuda, p) is pipe
    assert pipe.dispatch([a]) == cuda.dispatch(p, [a]) == reference.run(p, [a])
    assert cuda.pipeline_cache_snapshot().hits > before.hits


def test_second_process_loads_cubin_from_disk_without_nvrtc(cuda, tmp_path):
    code = (
        "import numpy as np, vyre.driver as d\n"
        "from vyre.ir import *\n"
        "gx = Expr.gid_x()\n"
        "p = Program.wrapped([BufferDecl.read('a',0,DataType.U32), BufferDecl.output('o',1,DataType.U32)], 64,"
        " [Node.store('o', gx, Expr.load('a', gx) ^ 0x5A5A)])\n"
        "b = d.acquire('cuda')\n"
        "pipe = b.compile_native(p)\n"
        "print(pipe.built_from, b.device.rt.cubins.compiled)\n")
    env = dict(os.environ, VYRE_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.split() == ["nvrtc", "1"]
    assert second.stdout.split() == ["disk", "0"]


def _add(t) -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, t), BufferDecl.read_write("b", 1, t), BufferDecl.output("out", 2, t)],
                           64, [Node.store("out", GX, Expr.load("a", GX) + Expr.load("b", GX)),
                                Node.store("b", GX, Expr.u32(0) if t is U else Expr.i32(0))])


def test_cuda_array_inputs_are_used_in_place(cuda):
    cp = pytest.importorskip("cupy")
    p = _add(U)
    a = cp.arange(3000, dtype=cp.uint32)
    b = cp.full(3000, 5, dtype=cp.uint32)
    _, out = cuda.dispatch(p, [a, b])
    assert np.array_equal(as_u32(out), np.arange(3000, dtype=np.uint32) + 5)
    assert int(b[0]) == 5  # a READ_WRITE device input is copied, never modified in place
    torch = pytest.importorskip("torch")
    t = torch.arange(3000, dtype=torch.int32, device="cuda")
    tb = torch.full((3000,), 5, dtype=torch.int32, device="cuda")
    _, out = cuda.dispatch(_add(DataType.I32), [t, tb])
    assert np.array_equal(np.frombuffer(out, np.int32), np.arange(3000, dtype=np.int32) + 5)
    with pytest.raises(InvalidInput) as err:   # an int32 tensor for a u32 buffer is refused
        cuda.dispatch(p, [t, b])
    assert err.value.reason == "input_dtype" and "Fix:" in str(err.value)


class _DLPackOnly:
    """A device array that only speaks DLPack (as JAX arrays do)."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *args, **kwargs):
        return self.x.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_dlpack_only_device_arrays_are_read_in_place(cuda):
    cp = pytest.importorskip("cupy")
    p = _add(U)
    a = _DLPackOnly(cp.arange(1000, dtype=cp.uint32))
    b = cp.full(1000, 2, dtype=cp.uint32)
    _, out = cuda.dispatch(p, [a, b])
    assert np.array_equal(as_u32(out), np.arange(1000, dtype=np.uint32) + 2)
    with pytest.raises(InvalidInput, match="input 0"):
        cuda.dispatch(p, [_DLPackOnly(cp.arange(1000, dtype=cp.float32)), b])


def test_batches_replay_as_one_cuda_graph(cuda):
    from vyre.driver import Batch

    p = _inc()
    res = cuda.allocate_resident(4 * 256)
    cuda.upload_resident(res, np.zeros(256, np.uint32))
    batch = Batch(cuda)
    for _ in range(10):
        batch.add(p, [res])
    assert batch.native
    batch.run()
    batch.run()
    assert (as_u32(cuda.read_resident(res)) == 20).all()
    cuda.free_resident(res)
    with pytest.raises(InvalidProgram, match="freed"):
        batch.run()


def test_out_of_memory_names_requested_and_available(cuda):
    free, total = cuda.device.rt.mem_info()
    hog = cuda.allocate_resident(int(free * 0.6))
    try:
        ask = int(free * 0.6)
        with pytest.raises(DeviceOutOfMemory) as err:
            cuda.allocate_resident(ask)
        assert err.value.requested >= ask
        assert err.value.available is not None and err.value.available < ask
        assert "Fix:" in str(err.value)
    finally:
        cuda.free_resident(hog)
    with pytest.raises(InvalidProgram, match="outside"):   # more than the device has at all
        cuda.allocate_resident(total + 1)


def test_recovery_invalidates_old_pipelines(cuda):
    p = _inc()
    old = cuda.compile_native(p)
    cuda.try_recover()
    with pytest.raises(DeviceLost):
        old.dispatch([np.zeros(4, np.uint32)])
    assert not cuda.device_lost()
    out = cuda.dispatch(p, [np.zeros(4, np.uint32)])
    assert list(as_u32(out[0])) == [1, 1, 1, 1]


def test_flush_and_prepare(cuda):
    cuda.prepare()
    cuda.dispatch_async(_inc(), [np.zeros(64, np.uint32)])
    cuda.flush()
