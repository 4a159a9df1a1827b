"""The dispatch engine's guarantees, one regression test per fault of the engine issue, on
every backend: cache identity, lifecycle (freed buffers, recovery), timeouts that stop the
kernel, an honest surface, per-dispatch error flags, and the key properties."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vyre import reference
from vyre.conform.generator import random_program
from vyre.driver import (
    DeviceLost,
    DispatchConfig,
    DispatchFailed,
    InvalidProgram,
    UnsupportedFeature,
    persistent,
)
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, MemoryOrdering, Node, Program, fingerprint
from vyre.ir.types import SubgroupOp

from helpers import GX, as_u32, require_cancellable, spin_trips

U, I = DataType.U32, DataType.I32


def _sub(order) -> Program:
    decls = {"a": BufferDecl.read("a", 0, U), "b": BufferDecl.read("b", 1, U), "o": BufferDecl.output("o", 2, U)}
    return Program.wrapped([decls[n] for n in order], 4,
                           [Node.store("o", GX, Expr.load("a", GX) - Expr.load("b", GX))])


def test_declaration_order_gives_distinct_pipelines_and_right_bytes(backend):
    """Fault 1: `[b, a, o]` then `[a, b, o]` shared a pipeline and the second got the first's bytes."""
    first, second = _sub("bao"), _sub("abo")
    assert P.compile(backend, first) is not P.compile(backend, second)
    a, b = np.array([10, 20, 30, 40], np.uint32), np.array([1, 2, 3, 4], np.uint32)
    assert list(as_u32(backend.dispatch(first, [a, b])[0])) == [2**32 - 9, 2**32 - 18, 2**32 - 27, 2**32 - 36]
    assert list(as_u32(backend.dispatch(second, [a, b])[0])) == [9, 18, 27, 36]


def test_validation_is_never_shared_with_a_valid_look_alike(backend):
    """Fault 1b: a grid_sync inside a block (V016) ran because its canonical twin (the block
    spliced away) had validated."""
    body = [Node.store("o", GX, 1), Node.barrier(MemoryOrdering.GRID_SYNC), Node.store("o", GX, 2)]
    valid = Program.wrapped([BufferDecl.output("o", 0, U, 8)], 4, body)
    nested = Program.wrapped([BufferDecl.output("o", 0, U, 8)], 4,
                             [body[0], Node.block([body[1]]), body[2]])
    assert fingerprint(valid) == fingerprint(nested)   # same meaning where both were valid
    if backend.supports_grid_sync() or backend.id() != "reference":
        backend.dispatch(valid, [])
    with pytest.raises(InvalidProgram, match="V016"):
        backend.dispatch(nested, [])


def test_freeing_a_held_buffer_then_launching_is_an_error_not_a_crash(backend):
    """Fault 5: free a resident buffer a bound dispatch holds, then launch it."""
    p = Program.wrapped([BufferDecl.read_write("x", 0, U)], 64, [Node.store("x", GX, Expr.load("x", GX) + 1)])
    r = backend.allocate_resident(4 * 256)
    backend.upload_resident(r, np.zeros(256, np.uint32))
    bound = backend.bind_resident(p, [r])
    handle = persistent.bind(backend, p, [r])
    bound.run()
    backend.free_resident(r)
    assert r.freed and r.handle is not None      # held: released only with its last holder
    for launch in (bound.launch, bound.run, handle.run):
        with pytest.raises(InvalidProgram, match="freed"):
            launch()
    with pytest.raises(InvalidProgram, match="freed"):
        backend.dispatch_resident_timed(p, [r])
    bound.release()
    handle.release()
    assert r.handle is None                        # the device memory went with the last holder


def test_try_recover_invalidates_every_cache_of_device_handles(backend):
    """Fault 6: `pipeline.compile` kept serving pipelines compiled before the recovery."""
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 4,
                        [Node.store("o", GX, Expr.load("a", GX) ^ 0x77)])
    old = P.compile(backend, p)
    try:
        backend.try_recover()
    except UnsupportedFeature:
        pytest.skip(f"{backend.id()} has no recovery")
    a = np.arange(8, dtype=np.uint32)
    with pytest.raises(DeviceLost, match="compile the program again"):
        old.dispatch([a])
    fresh = P.compile(backend, p)
    assert fresh is not old and fresh.dispatch([a]) == reference.run(p, [a])


def test_timeout_cancels_the_kernel_instead_of_leaving_it_running(backend):
    """Fault 7: on OpenCL a timed-out kernel kept running and `flush()` waited for it."""
    require_cancellable(backend)
    body = [Node.let_bind("acc", Expr.load("a", GX)),
            Node.loop("i", Expr.u32(0), Expr.load("trips", 0), [Node.assign("acc", Expr.var("acc") * 3 + 1)]),
            Node.store("out", GX, Expr.var("acc"))]
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read("trips", 1, U, 1),
                         BufferDecl.output("out", 2, U)], 256, body)
    a = np.arange(1 << 14, dtype=np.uint32)
    backend.compile_native(p)   # the kernel times out, not its build (which the timeout bounds too)
    with pytest.raises(DispatchFailed, match="timeout"):
        backend.dispatch(p, [a, np.array([spin_trips(backend)], np.uint32)], DispatchConfig(timeout=0.1))
    if backend.device.cancellable:
        assert backend.runaway == []   # the kernel noticed its cancel word and stopped
    backend.flush()
    assert backend.dispatch(p, [a[:64], np.array([2], np.uint32)]) == \
        reference.run(p, [a[:64], np.array([2], np.uint32)])


def test_supported_ops_lists_only_what_runs(backend):
    """Fault 8a: OpenCL listed subgroup ops it then refused."""
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 32,
                        [Node.store("o", GX, Expr.subgroup_reduce(SubgroupOp.REDUCE_ADD, Expr.load("a", GX)))])
    listed = "vyre.subgroup.reduce_add" in backend.supported_ops()
    assert listed == backend.supports_subgroup_ops()
    a = np.arange(64, dtype=np.uint32)
    if listed:
        assert backend.dispatch(p, [a]) == reference.run(p, [a])
    else:
        with pytest.raises(UnsupportedFeature, match="subgroup"):
            backend.dispatch(p, [a])


def test_cooperative_and_profile_are_honoured_or_refused(backend):
    """Fault 8b: `cooperative=True` "ran" on OpenCL, which has no grid barrier."""
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 4,
                        [Node.store("o", GX, Expr.load("a", GX) + 1)])
    a = np.arange(8, dtype=np.uint32)
    if backend.supports_grid_sync():
        assert backend.dispatch(p, [a], DispatchConfig(cooperative=True)) == reference.run(p, [a])
    else:
        with pytest.raises(UnsupportedFeature, match="cooperative"):
            backend.dispatch(p, [a], DispatchConfig(cooperative=True))
    for profile in ("default", "latency", "throughput"):
        assert backend.dispatch(p, [a], DispatchConfig(profile=profile)) == reference.run(p, [a])
    with pytest.raises(InvalidProgram, match="profile"):
        DispatchConfig(profile="fast")


def test_error_flags_belong_to_each_dispatch(backend):
    """Hardening fault 1: a dividing-by-zero bound dispatch in one thread made clean dispatches
    in other threads fail, and lost its own error."""
    div = Program.wrapped([BufferDecl.read_write("x", 0, I)], 64,
                          [Node.store("x", GX, Expr.load("x", GX) // Expr.load("x", 0))])
    clean = Program.wrapped([BufferDecl.read("a", 0, I), BufferDecl.output("o", 1, I)], 64,
                            [Node.store("o", GX, Expr.load("a", GX) // Expr.i32(3))])
    r = backend.allocate_resident(4 * 64)
    backend.upload_resident(r, np.zeros(64, np.int32))
    bound = backend.bind_resident(div, [r])
    a = np.arange(64, dtype=np.int32)
    want = reference.run(clean, [a])
    errors = {"lost": 0, "spurious": 0}

    def faulty():
        for _ in range(40):
            try:
                bound.run()
                errors["lost"] += 1
            except DispatchFailed:
                pass

    def good():
        for _ in range(40):
            try:
                assert backend.dispatch(clean, [a]) == want
            except DispatchFailed:
                errors["spurious"] += 1

    threads = [threading.Thread(target=faulty)] + [threading.Thread(target=good) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bound.release()
    backend.free_resident(r)
    assert errors == {"lost": 0, "spurious": 0}


# ---------------------------------------------------------------------------- key properties
def _permuted(p: Program, rng: random.Random) -> Program:
    bufs = list(p.buffers)
    rng.shuffle(bufs)
    return Program(tuple(bufs), p.workgroup_size, p.body, p.functions)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 2**31))
def test_permuting_declarations_changes_the_key_exactly_when_it_changes_the_meaning(seed, shuffle):
    p, _ = random_program(seed)
    q = _permuted(p, random.Random(shuffle))
    bound_order = lambda prog: [b.name for b in prog.buffers if not b.is_workgroup]  # noqa: E731
    assert (fingerprint(p) == fingerprint(q)) == (bound_order(p) == bound_order(q))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 2**31))
def test_equal_keys_give_equal_outputs(seed, shuffle):
    """Pipelines, validation, tuner and routing are keyed by the fingerprint: two programs with
    one key must give one result on every input."""
    p, inputs = random_program(seed)
    rng = random.Random(shuffle)
    q = _permuted(p, rng)
    if fingerprint(p) != fingerprint(q):
        # reorder the inputs to follow the permuted declarations: the meaning then matches,
        # so a backend may not serve one from the other's cache (the keys differ)
        return
    assert reference.run(p, inputs) == reference.run(q, inputs)


def test_an_allocation_failure_sheds_cached_shapes_and_retries_once():
    """Cached shapes keep their device buffers; when the device runs out, the engine drops
    them (not the one in use) and tries once more, with the same bytes."""
    import weakref

    from vyre.driver import DeviceOutOfMemory
    from vyre.drivers.reference.backend import ReferenceBackend, ReferenceDevice

    class SmallDevice(ReferenceDevice):
        budget = 3 * 4 * 4096 + 64    # one shape's three buffers fit, two do not

        def __init__(self) -> None:
            self.live, self.trims = 0, 0

        def alloc(self, nbytes: int) -> np.ndarray:
            if self.live + nbytes > self.budget:
                raise DeviceOutOfMemory(nbytes, self.budget - self.live, backend="reference")
            buf = super().alloc(nbytes)
            self.live += buf.nbytes
            weakref.finalize(buf, self._gone, buf.nbytes)
            return buf

        def _gone(self, n: int) -> None:
            self.live -= n

        def trim(self) -> None:
            self.trims += 1

    backend = ReferenceBackend()
    backend.device = SmallDevice()
    prog = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32),
                            BufferDecl.output("o", 2, DataType.U32)], 64,
                           [Node.store("o", GX, Expr.load("a", GX) + Expr.load("b", GX))])
    for n in (4096, 4000, 4096):
        a = np.arange(n, dtype=np.uint32)
        assert backend.dispatch(prog, [a, a])[0] == (a + a).tobytes()
    assert backend.device.trims >= 1
    with pytest.raises(DeviceOutOfMemory, match="Fix:"):    # one shape alone too big: a clear error
        a = np.zeros(8192, np.uint32)
        backend.dispatch(prog, [a, a])


def test_large_host_buffers_copied_directly_give_the_same_bytes_on_every_entry_point(backend):
    """Issue 24: calls that wait for their dispatch upload large inputs from the caller's
    memory and read large outputs straight into the returned arrays (no staging copy); bytes,
    arrays and the caller's untouched input are as on the staged path. The output sizes
    straddle DIRECT_BYTES (one small output staged, one large read directly)."""
    from vyre.driver.engine.core import DIRECT_BYTES

    n = DIRECT_BYTES // 4 + 5
    prog = Program.wrapped([BufferDecl.read_write("x", 0, U), BufferDecl.output("big", 1, U),
                            BufferDecl.output("small", 2, U).with_count(7)], 64,
                           [Node.store("big", GX, Expr.load("x", GX) * 3 + 1),
                            Node.store("x", GX, Expr.load("x", GX) + 5),
                            Node.store("small", GX, GX)])
    x = np.arange(n, dtype=np.uint32) * 7
    before = x.copy()
    want = reference.run(prog, [x])
    assert [o.tobytes() for o in backend.dispatch_arrays(prog, [x])] == want
    assert backend.dispatch(prog, [x]) == want
    assert backend.dispatch_async(prog, [x]).await_result() == want
    assert backend.dispatch(prog, [x], DispatchConfig(timeout=60.0)) == want
    assert np.array_equal(x, before)
    assert want[1] == ((before * 3 + 1) & 0xFFFFFFFF).astype(np.uint32).tobytes()


def test_the_engine_provides_the_interface_resident_dispatches_declare(backend):
    """`vyre.driver.engine.resident` reaches the engine only through `Engine` and `Pipeline`
    (an import-linter contract keeps it from importing the engine's module): every member
    they declare is there, on every backend."""
    from vyre.driver.engine import memory  # resident buffers: the same, plus own and limits
    from vyre.driver.engine.resident import Engine, Pipeline

    prog = Program.wrapped([BufferDecl.read_write("x", 0, DataType.U32)], 64,
                           [Node.store("x", GX, Expr.load("x", GX) + 1)])
    assert isinstance(backend, Engine) and isinstance(backend.compile_native(prog), Pipeline)
    assert isinstance(backend, memory.Engine)
