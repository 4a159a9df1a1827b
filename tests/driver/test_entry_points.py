"""The entry-point matrix: every entry point of the contract, on every backend, under every
rule, gives the reference's bytes or the same error (type, code and reason).

Entry points: sync, borrowed, timed, into, async, borrowed async, pipeline, pipeline async,
resident (dispatch_resident_timed), bound (bind_resident), persistent (persistent.bind) and
batch. Scenarios: plain, timeout, max_output_bytes, fixpoint, wrong dtype, input mutated after
the call, and two programs that differ only in declaration order.
"""

from __future__ import annotations

import numpy as np
import pytest

from vyre import reference
from vyre.driver import (
    Batch,
    DispatchConfig,
    DispatchFailed,
    InvalidInput,
    InvalidProgram,
    persistent,
)
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, MemoryOrdering, Node, Program
from vyre.ir.launch import resolve

from helpers import GX, require_cancellable, spin_trips

U = DataType.U32

# ---------------------------------------------------------------------------- entry points
# Each takes (backend, program, inputs, config) and returns the outputs as bytes. The resident
# family allocates one resident buffer per non-workgroup buffer, uploads the inputs, runs and
# reads the outputs back.


def _resident(backend, program, inputs, config, run):
    cfg = config or DispatchConfig()
    sizes = [np.asarray(x).nbytes for x in inputs]
    counts = dict(resolve(program, sizes, cfg).counts)
    decls = [b for b in program.buffers if b.is_bound]
    ins = dict(zip((b.name for b in program.inputs), inputs))
    res = []
    try:
        for b in decls:
            r = backend.allocate_resident(counts[b.name] * b.dtype.size)
            res.append(r)
            if b.name in ins:
                backend.upload_resident(r, ins[b.name])
        run(res, cfg)
        return [backend.read_resident(r) for b, r in zip(decls, res) if b.is_output]
    finally:
        for r in res:
            backend.free_resident(r)


def _bound(backend, program, inputs, config):
    def run(res, cfg):
        bound = backend.bind_resident(program, res, cfg)
        try:
            bound.run_timed(cfg)
        finally:
            bound.release()
    return _resident(backend, program, inputs, config, run)


def _persistent(backend, program, inputs, config):
    def run(res, cfg):
        handle = persistent.bind(backend, program, res, cfg)
        handle.run()
        handle.release()
    return _resident(backend, program, inputs, config, run)


def _batch(backend, program, inputs, config):
    return _resident(backend, program, inputs, config,
                     lambda res, cfg: Batch(backend).add(program, res, cfg).run())


def _into(backend, program, inputs, config):
    out: list = ["stale"]
    backend.dispatch_borrowed_into(program, inputs, config, out)
    return out


def _arrays(backend, program, inputs, config):
    got = backend.dispatch_arrays(program, inputs, config)
    for a, d in zip(got, program.outputs):   # writable arrays of the outputs' host dtypes
        assert isinstance(a, np.ndarray) and a.flags.writeable and a.dtype == d.dtype.host
    return got


def _pipe(config):
    return None if config is None else DispatchConfig(workgroup_override=config.workgroup_override,
                                                      specialization=config.specialization)


ENTRY_POINTS = {
    "sync": lambda b, p, i, c: b.dispatch(p, i, c),
    "borrowed": lambda b, p, i, c: b.dispatch_borrowed(p, i, c),
    "timed": lambda b, p, i, c: b.dispatch_borrowed_timed(p, i, c).outputs,
    "into": _into,
    "arrays": _arrays,
    "async": lambda b, p, i, c: b.dispatch_async(p, i, c),
    "borrowed_async": lambda b, p, i, c: b.dispatch_borrowed_async(p, i, c),
    "pipeline": lambda b, p, i, c: P.compile(b, p, _pipe(c)).dispatch(i, c),
    "pipeline_async": lambda b, p, i, c: P.compile(b, p, _pipe(c)).dispatch_async(i, c),
    "resident": lambda b, p, i, c: _resident(b, p, i, c, lambda res, cfg: b.dispatch_resident_timed(p, res, cfg)),
    "bound": _bound,
    "persistent": _persistent,
    "batch": _batch,
}
RESIDENT = {"resident", "bound", "persistent", "batch"}


def call(name, backend, program, inputs, config=None, mutate=None):
    """Run an entry point; ``mutate()`` runs after the call returns and before an async
    result is awaited (the call must not read the caller's memory any more)."""
    got = ENTRY_POINTS[name](backend, program, inputs, config)
    if mutate is not None:
        mutate()
    if hasattr(got, "await_result"):
        got = got.await_result()
    return [bytes(memoryview(x)) for x in got]


def outcome(fn):
    """(bytes, None) or (None, (type, code, reason)) for a call."""
    try:
        return fn(), None
    except (InvalidProgram, DispatchFailed) as err:
        return None, (type(err).__name__, err.code, getattr(err, "reason", None))


# ---------------------------------------------------------------------------- programs
def affine() -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U),
                            BufferDecl.output("o", 2, U)], 64,
                           [Node.store("o", GX, Expr.load("a", GX) * 3 + Expr.load("b", GX))])


def spin() -> Program:
    """Every lane runs `trips` dependent steps: long enough that a 0.2 s timeout expires."""
    body = [Node.let_bind("acc", Expr.load("a", GX)),
            Node.loop("i", Expr.u32(0), Expr.load("trips", 0),
                      [Node.assign("acc", Expr.var("acc") * 1664525 + 1013904223)]),
            Node.store("out", GX, Expr.var("acc"))]
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read("trips", 1, U, 1),
                            BufferDecl.output("out", 2, U)], 256, body)


def saturate() -> Program:
    x = Expr.load("x", GX)
    return Program.wrapped([BufferDecl.read_write("x", 0, U)], 4,
                           [Node.store("x", GX, Expr.select(x.lt(10), x + 1, x))])


def twins() -> tuple[Program, Program]:
    body = [Node.store("o", GX, Expr.load("a", GX) - Expr.load("b", GX))]
    first = Program.wrapped([BufferDecl.read("b", 1, U), BufferDecl.read("a", 0, U),
                             BufferDecl.output("o", 2, U)], 4, body)
    second = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U),
                              BufferDecl.output("o", 2, U)], 4, body)
    return first, second


def mixed_widths() -> Program:
    """u8 in (an odd byte length), u16 and u64 out: buffers that are not whole words."""
    x = Expr.load("x", GX)
    return Program.wrapped([BufferDecl.read("x", 0, DataType.U8), BufferDecl.output("h", 1, DataType.U16),
                            BufferDecl.output("w", 2, DataType.U64)], 64,
                           [Node.store("h", GX, x * 257 + 1),
                            Node.store("w", GX, (Expr.cast(DataType.U64, x) << 40) | Expr.cast(DataType.U64, GX))])


def capped() -> Program:
    """A while loop whose cap some invocations exceed (and a division some of them fault)."""
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64, [
        Node.let_bind("n", 0),
        Node.while_(Expr.var("n").lt(Expr.load("a", GX)), [Node.assign("n", Expr.var("n") + 1)], 50),
        Node.store("o", GX, Expr.var("n"))])


def indirect() -> Program:
    """Phase 0 writes the grid of phase 1."""
    return Program.wrapped([BufferDecl.read("n", 0, U, 1), BufferDecl.read_write("g", 1, U, 3),
                            BufferDecl.output("o", 2, U, 300)], 32, [
        Node.if_(GX.eq(0), [Node.store("g", 0, (Expr.load("n", 0) + 31) // 32), Node.store("g", 1, 1),
                            Node.store("g", 2, 1)]),
        Node.barrier(MemoryOrdering.GRID_SYNC),
        Node.indirect_dispatch("g", 0),
        Node.if_(GX.lt(Expr.load("n", 0)), [Node.store("o", GX, GX * 3 + 1)])])


A = np.arange(1000, dtype=np.uint32) * 7
B = np.arange(1000, dtype=np.uint32)[::-1].copy()

entry = pytest.mark.parametrize("name", sorted(ENTRY_POINTS))


@entry
def test_plain(backend, name):
    assert call(name, backend, affine(), [A, B]) == reference.run(affine(), [A, B])


@entry
def test_buffers_that_are_not_whole_words(backend, name):
    x = (np.arange(1001) * 37 % 256).astype(np.uint8)
    assert call(name, backend, mixed_widths(), [x]) == reference.run(mixed_widths(), [x])


@entry
def test_loop_limit_fails_every_entry_point_the_same_way(backend, name):
    a = np.arange(100, dtype=np.uint32)
    _, err = outcome(lambda: call(name, backend, capped(), [a]))
    assert err == ("DispatchFailed", 1005, "loop_limit")
    ok = [np.minimum(a, 50)]
    assert call(name, backend, capped(), ok) == reference.run(capped(), ok)


@entry
def test_indirect_dispatch(backend, name):
    cfg = DispatchConfig(grid_override=(1, 1, 1))
    for n in (0, 1, 33, 300):
        ins = [np.array([n], np.uint32), np.zeros(3, np.uint32)]
        assert call(name, backend, indirect(), ins, cfg) == reference.run(indirect(), ins, cfg)
    direct = Program.wrapped([BufferDecl.read("g", 0, U, 3), BufferDecl.output("o", 1, U, 4)], 32,
                             [Node.indirect_dispatch("g", 0), Node.store("o", GX, GX)])
    ins = [np.array([2**31, 1, 1], np.uint32)]   # one workgroup more than any axis may have
    _, err = outcome(lambda: call(name, backend, direct, ins, cfg))
    assert err == ("DispatchFailed", 1005, "indirect")


@entry
def test_timeout_stops_every_entry_point_the_same_way(backend, name):
    require_cancellable(backend)
    a = np.arange(1 << 14, dtype=np.uint32)
    trips = np.array([spin_trips(backend)], np.uint32)
    backend.compile_native(spin())   # the kernel times out, not its build (which the timeout bounds too)
    _, err = outcome(lambda: call(name, backend, spin(), [a, trips], DispatchConfig(timeout=0.2)))
    assert err == ("DispatchFailed", 1005, None)
    # the backend is not wedged: the next dispatch runs and is right
    small = [a[:512], np.array([3], np.uint32)]
    assert call(name, backend, spin(), small) == reference.run(spin(), small)


@entry
def test_max_output_bytes(backend, name):
    _, err = outcome(lambda: call(name, backend, affine(), [A, B], DispatchConfig(max_output_bytes=3999)))
    assert err == ("InvalidProgram", 1006, None)
    ok = call(name, backend, affine(), [A, B], DispatchConfig(max_output_bytes=4000))
    assert ok == reference.run(affine(), [A, B])


@entry
def test_fixpoint(backend, name):
    x = np.array([0, 5, 20, 7], np.uint32)
    got = call(name, backend, saturate(), [x], DispatchConfig(fixpoint_iterations=100))
    assert list(np.frombuffer(got[0], np.uint32)) == [10, 10, 20, 10]


@entry
def test_wrong_dtype_is_refused(backend, name):
    if name in RESIDENT:
        # resident buffers are untyped bytes (any little-endian array uploads as its bytes);
        # what is not bytes is refused at upload, the same way on every backend
        r = backend.allocate_resident(16)
        try:
            for bad, reason in ((A[:4].astype(">u4"), "input_dtype"), (np.repeat(A[:4], 2)[::2], "input_layout"),
                                ([1, 2, 3, 4], "input_type"), (None, "input_type"), (A[:3], "input_size"),
                                (np.array([object()] * 4), "input_dtype")):
                _, err = outcome(lambda bad=bad: backend.upload_resident(r, bad))
                assert err == ("InvalidInput", 1006, reason), bad
        finally:
            backend.free_resident(r)
        return
    for bad, reason in ((A.astype(np.float64), "input_dtype"), (A.astype(np.int32), "input_dtype"),
                        (A.astype(">u4"), "input_byteorder"), (np.repeat(A, 2)[::2], "input_layout"),
                        (A.tolist(), "input_type"), (None, "input_type"), (5, "input_type"),
                        (np.array([object()] * 4), "input_dtype")):
        _, err = outcome(lambda bad=bad: call(name, backend, affine(), [bad, B]))
        assert err == ("InvalidInput", 1006, reason), (bad if not isinstance(bad, np.ndarray) else bad.dtype)


@entry
def test_input_mutated_after_the_call(backend, name):
    a, b = A.copy(), B.copy()
    want = reference.run(affine(), [a, b])

    def mutate():
        a[:] = 0xFFFFFFFF
        b[:] = 12345

    assert call(name, backend, affine(), [a, b], mutate=mutate) == want


@entry
def test_programs_differing_only_in_declaration_order(backend, name):
    a, b = np.array([10, 20, 30, 40], np.uint32), np.array([1, 2, 3, 4], np.uint32)
    for prog in twins():
        assert call(name, backend, prog, [a, b]) == reference.run(prog, [a, b])
    assert list(np.frombuffer(call(name, backend, twins()[1], [a, b])[0], np.uint32)) == [9, 18, 27, 36]


def test_error_codes_and_reasons_are_the_same_on_every_backend(backend):
    """One bad input, one error, whatever the backend: the matrix above pins type, code and
    reason per entry point; here the text carries a Fix too."""
    with pytest.raises(InvalidInput) as err:
        backend.dispatch(affine(), [A.astype(np.float32), B])
    assert err.value.reason == "input_dtype" and "Fix: pass x.astype(np.uint32)" in str(err.value)
