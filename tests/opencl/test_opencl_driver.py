"""The OpenCL driver on a real OpenCL implementation (PoCL in CI): capabilities against
the device query, non-blocking async, profiling, resident buffers, caching, inspection."""

from __future__ import annotations

import time

import numpy as np
import pytest

from vyre import reference
from vyre.driver import InvalidProgram
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import GX, as_u32, check_lcg_closed_form, lcg, slow_program

U = DataType.U32


def test_lcg_helper_is_right():
    check_lcg_closed_form()


def test_capabilities_match_the_device_query(opencl):
    import pyopencl as cl

    d = opencl.device.rt.device
    assert opencl.max_compute_invocations_per_workgroup() == d.max_work_group_size
    assert opencl.max_workgroup_size() == tuple(min(s, d.max_work_group_size) for s in d.max_work_item_sizes[:3])
    assert opencl.max_storage_buffer_bytes() == d.max_mem_alloc_size
    prof = opencl.device_profile()
    assert prof.max_shared_memory_bytes == d.local_mem_size
    assert prof.compute_units == d.max_compute_units
    assert opencl.supports_subgroup_ops() is False  # no subgroup intrinsics are emitted
    assert opencl.supports_f16() is False           # the IR has no f16 type yet
    assert opencl.supports_async_compute() is True
    assert opencl.device.rt.info.correct_div_sqrt == bool(d.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
    # vyre.lib's per-invocation-run forms follow the device type, not the backend id
    assert opencl.caps.serial_workgroups is bool(d.type & cl.device_type.CPU)


def test_lib_serial_forms_follow_the_capabilities_record(opencl, reference_backend):
    from dataclasses import replace

    from vyre.lib import runner

    assert runner.Runner(opencl).serial is opencl.caps.serial_workgroups
    assert runner.Runner(reference_backend).serial is False

    class GpuLike:   # an OpenCL GPU: the same backend id, a record without serial workgroups
        caps = replace(opencl.caps, serial_workgroups=False)

    assert runner.serial(GpuLike()) is False
    assert runner.serial(object()) is False


def test_dispatch_async_returns_before_a_long_kernel_finishes(opencl):
    p = slow_program()
    a = np.arange(1 << 13, dtype=np.uint32)
    opencl.dispatch(p, [a[:256], np.array([1], np.uint32)])  # build first
    trips = 40_000
    t = time.perf_counter()
    pending = opencl.dispatch_async(p, [a, np.array([trips], np.uint32)])
    returned = time.perf_counter() - t
    assert not pending.is_ready()
    out = pending.await_result()
    waited = time.perf_counter() - t
    assert pending.is_ready() and returned < waited / 4
    assert np.array_equal(as_u32(out[0]), lcg(a, trips))


def test_timed_dispatch_fills_device_ns_from_profiling_events(opencl):
    r = opencl.dispatch_borrowed_timed(slow_program(), [np.arange(1024, dtype=np.uint32), np.array([500], np.uint32)])
    assert r.device_ns and 0 < r.device_ns <= r.wall_ns


def test_resident_buffers(opencl, reference_backend):
    p = Program.wrapped([BufferDecl.read_write("x", 0, U), BufferDecl.output("o", 1, U)], 8,
                        [Node.store("o", GX, Expr.load("x", GX) * 2), Node.store("x", GX, Expr.load("x", GX) + 1)])
    x = np.arange(100, dtype=np.uint32)
    rx, ro = opencl.allocate_resident(x.nbytes), opencl.allocate_resident(x.nbytes)
    opencl.upload_resident(rx, x)
    for _ in range(3):
        t = opencl.dispatch_resident_timed(p, [rx, ro])
        assert t.outputs == [] and t.device_ns
    assert np.array_equal(as_u32(opencl.read_resident(rx)), x + 3)
    assert np.array_equal(as_u32(opencl.read_resident(ro)), (x + 2) * 2)
    with pytest.raises(InvalidProgram, match="does not belong"):
        reference_backend.own(rx)
    with pytest.raises(InvalidProgram, match="upload exactly"):
        opencl.upload_resident(rx, x[:5])
    small = opencl.allocate_resident(8)
    with pytest.raises(InvalidProgram, match="holds 8 bytes"):
        opencl.dispatch_resident_timed(p, [rx, small])
    for r in (rx, ro, small):
        opencl.free_resident(r)


def test_compile_native_is_a_real_cached_pipeline(opencl):
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 32,
                        [Node.store("o", GX, Expr.load("a", GX).rotate_left(7) ^ 0xABCDEF)])
    pipe = P.compile(opencl, p)
    assert pipe.native and P.compile(opencl, p) is pipe
    a = np.arange(777, dtype=np.uint32)
    assert pipe.dispatch([a]) == opencl.dispatch(p, [a]) == reference.run(p, [a])
    snap = opencl.pipeline_cache_snapshot()
    assert snap.hits >= 1 and snap.misses >= 1


def test_program_binaries_come_from_vyres_disk_cache(opencl, tmp_path, monkeypatch):
    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    from vyre.driver.pipeline import DiskCache

    opencl.device.rt.disk = DiskCache("opencl")
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 16,
                        [Node.store("o", GX, Expr.load("a", GX) * 12345)])
    first = opencl.device.build(p)
    second = opencl.device.build(p)
    assert (first.built_from, second.built_from) == ("compiled", "disk")
    a = np.arange(50, dtype=np.uint32)
    assert opencl.dispatch(p, [a]) == reference.run(p, [a])


def test_generated_source_is_inspectable(opencl):
    src = opencl.generated_source(slow_program())
    assert "__kernel void vyre_phase_0" in src and "FP_CONTRACT OFF" in src


def _counting_wraps(opencl, monkeypatch) -> list:
    """(writable, address, nbytes) of every host array the engine wraps on this device."""
    seen: list = []
    dev = opencl.device
    wrap = dev.wrap_host

    def counted(array, writable):
        seen.append((writable, array.ctypes.data, array.nbytes))
        return wrap(array, writable)

    monkeypatch.setattr(dev, "wrap_host", counted)
    return seen


def test_zero_copy_large_host_arrays_give_the_reference_bytes(opencl, monkeypatch):
    """On a host-unified device (PoCL) a call that waits uses large host arrays in place:
    the caller's read-only input is read where it is, a READ_WRITE input is still copied
    (never written), outputs are written into fresh zeroed arrays (an element no invocation
    writes is 0) that later calls never reuse. Bytes as the reference's on every entry point."""
    from vyre.driver.engine.core import DIRECT_BYTES

    if not opencl.device.zero_copy:
        pytest.skip("this OpenCL device does not share host memory")
    seen = _counting_wraps(opencl, monkeypatch)
    n = DIRECT_BYTES // 4 + 37
    half = Expr.u32(n // 2)
    prog = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read_write("x", 1, U),
                            BufferDecl.output("big", 2, U), BufferDecl.output("small", 3, U).with_count(5)], 64,
                           [Node.if_(GX.lt(half), [Node.store("big", GX, Expr.load("a", GX) * 3 + Expr.load("x", GX))]),
                            Node.store("x", GX, Expr.load("x", GX) + 5), Node.store("small", GX, GX)])
    a = np.arange(n, dtype=np.uint32) * 7
    x = np.arange(n, dtype=np.uint32)
    a0, x0 = a.copy(), x.copy()
    want = reference.run(prog, [a, x])
    first = opencl.dispatch_arrays(prog, [a, x])
    assert [o.tobytes() for o in first] == want
    # a is read in place; big and x's output written in place (x is copied into that array
    # first: the caller's x is never wrapped)
    assert (False, a.ctypes.data, a.nbytes) in seen and (True, first[0].ctypes.data, n * 4) in seen
    assert (True, first[1].ctypes.data, n * 4) in seen and len(seen) == 3
    assert all(ptr != x.ctypes.data for _, ptr, _ in seen)
    big = first[1]   # outputs in declaration order: x, big, small
    assert big[1 : n // 2].all() and not big[n // 2:].any()
    second = opencl.dispatch_arrays(prog, [a + 1, x])
    assert second[1].tobytes() != big.tobytes() and [o.tobytes() for o in first] == want
    assert opencl.dispatch(prog, [a, x]) == want
    assert np.array_equal(a, a0) and np.array_equal(x, x0)


def test_zero_copy_dispatch_writes_large_outputs_into_the_bytes_it_returns(opencl, monkeypatch):
    """`dispatch` on a host-unified device: a large output of whole words is written in place
    into the bytes object it returns (`vyre.driver.hostbytes`: no copy after the kernel), a
    padded narrow output (u8, a length that is not whole words) is copied out of its words,
    an output no invocation fully writes is zero where unwritten, and each call returns fresh
    objects that later calls leave alone. Bytes as the reference's and as dispatch_arrays'."""
    from vyre.driver.engine.core import DIRECT_BYTES

    if not opencl.device.zero_copy:
        pytest.skip("this OpenCL device does not share host memory")
    seen = _counting_wraps(opencl, monkeypatch)
    n = DIRECT_BYTES // 4 + 37
    nb = 4 * n + 3                      # u8 output: not whole words
    prog = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("full", 1, U),
                            BufferDecl.output("part", 2, U), BufferDecl.output("narrow", 3, DataType.U8).with_count(nb)],
                           64, [Node.store("full", GX, Expr.load("a", GX) * 3),
                                Node.if_(GX.lt(Expr.u32(n // 3)), [Node.store("part", GX, GX + 1)]),
                                Node.store("narrow", GX, GX)])
    a = np.arange(n, dtype=np.uint32) * 7
    want = reference.run(prog, [a])
    first = opencl.dispatch(prog, [a])
    assert first == want and all(type(o) is bytes for o in first)
    assert [o.tobytes() for o in opencl.dispatch_arrays(prog, [a])] == want
    def at(o: bytes) -> int:
        return np.frombuffer(o, np.uint8).ctypes.data

    # the two whole-word outputs were the kernel's buffers; the narrow one was copied out
    assert (True, at(first[0]), n * 4) in seen and (True, at(first[1]), n * 4) in seen
    assert all(ptr != at(first[2]) for _, ptr, _ in seen)
    second = opencl.dispatch(prog, [a + 1])
    assert first == want and second[0] != first[0] and second[0] == reference.run(prog, [a + 1])[0]
    assert not np.frombuffer(first[1], np.uint32)[n // 3:].any()


def test_zero_copy_never_reads_the_callers_array_after_an_async_call_returns(opencl, monkeypatch):
    """dispatch_async returns before the kernel runs: it stages its large inputs at call time
    (wraps nothing), so writing the caller's array afterwards changes nothing."""
    from vyre.driver.engine.core import DIRECT_BYTES

    seen = _counting_wraps(opencl, monkeypatch)
    p = slow_program()
    a = np.arange(DIRECT_BYTES // 4 * 2, dtype=np.uint32)
    trips = np.array([200], np.uint32)
    want = lcg(a, 200)
    pending = opencl.dispatch_async(p, [a, trips])
    a[:] = 0xFFFFFFFF
    assert np.array_equal(as_u32(pending.await_result()[0]), want) and seen == []
    a[:] = np.arange(a.size, dtype=np.uint32)
    assert np.array_equal(as_u32(opencl.dispatch_arrays(p, [a, trips])[0].tobytes()), want)
    assert seen or not opencl.device.zero_copy


def _lane_inputs(name: str) -> np.ndarray:
    """Bits of f32 inputs that leave exp's or tanh's common path (specials, subnormals, the
    ends of the fast range, the hard cases) mixed into ordinary ones, 16-lane blocks with one,
    several or no such lanes, and a length that leaves a partial block."""
    from vyre.lower.crmath import hard_cases

    rng = np.random.default_rng(21)
    odd = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0, 0x80000000, 1, 0x807FFFFF,
           0x42AE8000, 0xC2AE8000, 0x42AE7FFF, 0xC2AE7FFF, 0x42C80000, 0xC2DC0000, 0x1E3CE508,
           *(k for k, _ in hard_cases()[name])]
    x = rng.uniform(-90, 90, 16 * 64 + 5).astype(np.float32).view(np.uint32)
    x[16:16 + len(odd)] = odd                       # blocks where most lanes leave the path
    x[16 * 40 + 7] = 0x7FC00000                      # one lane of a block
    x[-3:] = odd[:3]                                 # the partial block
    return x


@pytest.mark.parametrize("name", ["exp", "tanh"])
def test_lane_loop_gives_the_reference_bytes(opencl, name):
    """Elementwise exp/tanh print their lanes as a vectorisable loop (`KernelPlan.lane_loop`)
    with the slow path run afterwards for the lanes that need it; a program that reads what
    it stores keeps the plain vector form. Both give the reference's bytes."""
    from vyre.ir import UnOp

    op = UnOp(name)
    x = _lane_inputs(name)
    p = Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)], 256,
                        [Node.store("o", GX, Expr.un(op, Expr.load("x", GX)) * 2.0)])
    assert "#pragma clang loop vectorize(enable)" in opencl.generated_source(p)
    assert opencl.dispatch(p, [x.view(np.float32)]) == reference.run(p, [x.view(np.float32)])
    inplace = Program.wrapped([BufferDecl.read_write("x", 0, DataType.F32)], 256,
                              [Node.store("x", GX, Expr.un(op, Expr.load("x", GX)))])
    assert "vectorize(enable)" not in opencl.generated_source(inplace)
    assert opencl.dispatch(inplace, [x.view(np.float32)]) == reference.run(inplace, [x.view(np.float32)])
