"""S36: float atomic ADD / MIN / MAX on f32, f16 and bf16 buffers, on every backend.

Expected values come from an independent model (tests/float_model.py: ``math.fsum``, Python
fractions and comparisons). Every backend's bytes must equal the model's, whatever the order of the
contributions, the workgroup size and the grid."""

from __future__ import annotations

import numpy as np
import pytest

from float_model import model, model_add, model_minmax, round_once
from vyre import reference
from vyre.driver import DispatchConfig, InvalidProgram, LimitExceeded
from vyre.ir import (
    AtomicOp,
    BufferDecl,
    DataType,
    Expr,
    Function,
    MemoryOrdering,
    Node,
    Program,
    validate,
)

from helpers import GX

F, H, BF, U = DataType.F32, DataType.F16, DataType.BF16, DataType.U32
FLOATS = (F, H, BF)


# ---------------------------------------------------------------------------- data
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 6e-8, -6e-8,
                    3.0e38, -3.0e38, 65504.0, -65504.0, 1.0, -1.0], np.float32)


def bits_of(t: DataType, x: np.ndarray) -> np.ndarray:
    """f32 values as ``t`` bits (f16: numpy's rounding; bf16: the upper half)."""
    if t is F:
        return x.astype(np.float32).view(np.uint32)
    if t is H:
        with np.errstate(over="ignore"):
            return x.astype(np.float16).view(np.uint16)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def values(rng, n: int, kind: str) -> np.ndarray:
    """``n`` f32 values: "finite" (wide exponents, huge cancellation, zeros, subnormals) or
    "specials" (also infinities and NaNs, with payloads)."""
    wide = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120, n))).astype(np.float32)
    big = rng.choice(np.array([3.0e38, -3.0e38, 1.5e38, -1.5e38], np.float32), n)
    small = rng.choice(SPECIAL[[0, 1, 5, 6, 7, 8, 9, 14, 15]], n)
    pick = rng.integers(0, 3, n)
    x = np.where(pick == 0, wide, np.where(pick == 1, big, small)).astype(np.float32)
    if kind == "specials":
        sp = rng.random(n) < 0.02
        x[sp] = rng.choice(SPECIAL, int(sp.sum()))
        payload = rng.random(n) < 0.005
        x.view(np.uint32)[payload] = 0x7F800001 + rng.integers(0, 1 << 22, int(payload.sum())).astype(np.uint32)
    return x


def program(t: DataType, op: AtomicOp, wg, count: int = 0) -> Program:
    """``out[ix[i]] op= x[i]`` for every ``i < len(x)``, as a statement."""
    i = GX
    return Program.wrapped(
        [BufferDecl.read("x", 0, t), BufferDecl.read("ix", 1, U), BufferDecl.read_write("out", 2, t, count)], wg,
        [Node.if_(i.lt(Expr.buf_len("x")), [Node.expr(Expr.atomic(op, "out", Expr.load("ix", i), Expr.load("x", i)))])])


def host(t: DataType, bits: np.ndarray) -> np.ndarray:
    """``t`` bits as the host array a ``t`` buffer takes (bf16: its raw u16 words)."""
    return bits.view({F: np.float32, H: np.float16, BF: np.uint16}[t])


def run(backend, p: Program, ins: list, config=None) -> list[bytes]:
    got = backend.dispatch(p, ins, config)
    assert got == reference.run(p, ins, config), "differs from the reference"
    return got


def storage(t: DataType) -> type:
    return np.uint32 if t is F else np.uint16


# ---------------------------------------------------------------------------- S36 rows
@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.value)
@pytest.mark.parametrize("op", [AtomicOp.ADD, AtomicOp.MIN, AtomicOp.MAX], ids=lambda o: o.value)
def test_S36_float_atomics_equal_the_exact_model(backend, t, op):
    """Adversarial values (zeros of both signs, subnormals, infinities, NaNs with payloads,
    huge cancellation) into odd-sized targets, at workgroup sizes 1, 37 or 256: the model's
    bytes on every backend; elements without a contribution keep their bits."""
    k = FLOATS.index(t) + [AtomicOp.ADD, AtomicOp.MIN, AtomicOp.MAX].index(op)
    rng = np.random.default_rng(k)
    wg = (256, 1, 37)[k % 3]            # every type and every op meets each workgroup size
    for n, slots, kind in ((301, 7, "specials"), (1999, 61, "finite"), (4099, 131, "specials")):
        x = bits_of(t, values(rng, n, kind))
        ix = rng.integers(0, slots + 3, n).astype(np.uint32)          # a few out of bounds (S6)
        init = bits_of(t, values(rng, slots, kind))
        init[-1] = 0x7F800123 if t is F else 0x7D01                   # untouched NaN payload: kept
        ix[ix == slots - 1] = 0
        got = run(backend, program(t, op, wg), [host(t, x), ix, host(t, init)])[0]
        want = model(op, t, init, ix, x).astype(storage(t))
        assert np.array_equal(np.frombuffer(got, storage(t)), want), (wg, n, kind)


def test_S36_huge_cancellation_is_exact(backend):
    """1e30 + 1 - 1e30 is 1 (a float sum in order gives 0), +max and -max cancel, and an exact
    zero total is +0 even from -0 contributions (S34)."""
    x = np.array([1e30, 1.0, -1e30, 3.4e38, 3.4e38, -3.4e38, -3.4e38, 2.0**-126, -0.0, -0.0], np.float32)
    ix = np.array([0, 0, 0, 1, 1, 1, 1, 1, 2, 2], np.uint32)
    init = np.array([0.0, 0.0, -0.0], np.float32)
    got = np.frombuffer(run(backend, program(F, AtomicOp.ADD, 256), [x, ix, init])[0], np.float32)
    assert got.tolist() == [1.0, 2.0**-126, 0.0] and not np.signbit(got[2])


def test_S36_one_million_contributions_identical_bytes_whatever_the_order(backend):
    """The issue's test: 1M contributions to 1K slots (wgpu: 256K), shuffled between runs,
    give identical bytes equal to math.fsum's exact sum rounded once."""
    rng = np.random.default_rng(23)
    n = (1 << 18) if backend.id() == "wgpu" else (1 << 20)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    ix = rng.integers(0, 1000, n).astype(np.uint32)
    init = rng.standard_normal(1000).astype(np.float32)
    p = program(F, AtomicOp.ADD, 256)
    order = np.argsort(ix, kind="stable")              # exact sums per slot from sorted groups
    starts = np.flatnonzero(np.r_[True, ix[order][1:] != ix[order][:-1]])
    want = init.view(np.uint32).copy()
    for s, group in zip(ix[order][starts], np.split(x[order].astype(np.float64), starts[1:])):
        want[s] = round_once(F, [float(init[s]), *group.tolist()])
    outs = set()
    for _ in range(2):
        perm = rng.permutation(n)
        outs.add(backend.dispatch(p, [x[perm], ix[perm], init])[0])
    assert len(outs) == 1
    assert np.array_equal(np.frombuffer(outs.pop(), np.uint32), want)


def test_S36_min_max_nan_and_signed_zeros(backend):
    """S10 on the initial value and every contribution: NaN wins, -0 is below +0."""
    x = np.array([0.0, -0.0, 5.0, np.nan, -0.0, 0.0, 2.0], np.float32)
    ix = np.array([0, 0, 1, 1, 2, 2, 3], np.uint32)
    init = np.array([0.0, 1.0, 0.0, -0.0], np.float32)
    lo = np.frombuffer(run(backend, program(F, AtomicOp.MIN, 1), [x, ix, init])[0], np.uint32)
    hi = np.frombuffer(run(backend, program(F, AtomicOp.MAX, 37), [x, ix, init])[0], np.uint32)
    assert lo.tolist() == [0x80000000, 0x7FC00000, 0x80000000, 0x80000000]
    assert hi.tolist() == [0x00000000, 0x7FC00000, 0x00000000, 0x40000000]


def test_S36_grid_smaller_than_the_target_3d_workgroups_functions_and_early_returns(backend):
    """The final rounding covers every element whatever the dispatch's grid (a grid_override
    of 5 workgroups for 3000 elements) and workgroup shape; contributions come from a
    function, from invocations that end early (return_) and from a loop."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(40).astype(np.float32)
    ix = rng.integers(0, 3000, 40).astype(np.uint32)
    init = np.zeros(3000, np.float32)
    j = Expr.var("j")
    acc = Function.define("acc", [("k", U)], [   # MAX: the grid logic is the same for every op
        Node.expr(Expr.atomic(AtomicOp.MAX, "out", Expr.load("ix", Expr.var("k")), Expr.load("x", Expr.var("k"))))])
    p = Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.read("ix", 1, U), BufferDecl.read_write("out", 2, F)],
                        (4, 3, 2), [
                            Node.if_(Expr.gid_y().ne(0).or_(Expr.gid_z().ne(0)), [Node.return_()]),
                            Node.loop("k", Expr.u32(0), Expr.u32(2), [
                                Node.let_bind("j", Expr.gid_x() * 2 + Expr.var("k")),
                                Node.if_(j.lt(Expr.buf_len("x")), [Node.call("acc", j)])])], [acc])
    got = run(backend, p, [x, ix, init], DispatchConfig(grid_override=(5, 1, 1)))[0]
    assert np.array_equal(np.frombuffer(got, np.uint32),
                          model_minmax(AtomicOp.MAX, F, init.view(np.uint32), ix, x.view(np.uint32)))


def test_S36_across_grid_sync_phases_into_two_buffers(backend):
    """Contributions from every phase, into two buffers of two kinds: each rounded once when
    the dispatch ends."""
    i = GX
    body = [Node.if_(i.lt(Expr.buf_len("x")), [Node.expr(Expr.atomic(AtomicOp.ADD, "a", i % 13, Expr.load("x", i)))]),
            Node.barrier(MemoryOrdering.GRID_SYNC),
            Node.if_(i.lt(Expr.buf_len("x")), [
                Node.expr(Expr.atomic(AtomicOp.ADD, "a", (i * 7) % 13, Expr.load("x", i))),
                Node.expr(Expr.atomic(AtomicOp.MAX, "m", i % 5, Expr.load("x", i)))])]
    p = Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.output("a", 1, F, 13), BufferDecl.output("m", 2, F, 5)],
                        32, body)
    x = np.random.default_rng(3).standard_normal(500).astype(np.float32)
    a, m = run(backend, p, [x])
    idx = np.arange(500)
    slots = np.r_[idx % 13, (idx * 7) % 13].astype(np.uint32)
    assert np.array_equal(np.frombuffer(a, np.uint32),
                          model_add(F, np.zeros(13, np.uint32), slots, np.r_[x, x].view(np.uint32)))
    assert np.array_equal(np.frombuffer(m, np.uint32),
                          model_minmax(AtomicOp.MAX, F, np.zeros(5, np.uint32), (idx % 5).astype(np.uint32),
                                       x.view(np.uint32)))


def test_S36_after_an_indirect_dispatch(backend):
    """A phase whose grid an earlier phase wrote (S32) contributes; the final rounding still
    covers every element (the engine reads the indirect grid, then launches the final phase)."""
    i = GX
    p = Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.output("grid", 1, U, 3),
                         BufferDecl.output("m", 2, F, 300)], 16, [
        Node.if_(i.eq(0), [Node.store("grid", 0, Expr.u32(3)), Node.store("grid", 1, Expr.u32(1)),
                           Node.store("grid", 2, Expr.u32(1))]),
        Node.barrier(MemoryOrdering.GRID_SYNC), Node.indirect_dispatch("grid", 0),
        Node.expr(Expr.atomic(AtomicOp.MIN, "m", i * 7, Expr.load("x", i)))])
    x = np.random.default_rng(8).standard_normal(100).astype(np.float32)
    got = run(backend, p, [x], DispatchConfig(dispatch_elements=16))[1]
    lanes = np.arange(48)
    want = model_minmax(AtomicOp.MIN, F, np.zeros(300, np.uint32), (lanes * 7).astype(np.uint32),
                        x[:48].view(np.uint32))
    assert np.array_equal(np.frombuffer(got, np.uint32), want)


def test_S36_resident_async_and_timed_dispatches_agree(backend):
    """Every entry point gives the same bytes: the hidden scratch is zeroed for each dispatch."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(3000).astype(np.float32)
    ix = rng.integers(0, 50, 3000).astype(np.uint32)
    init = rng.standard_normal(50).astype(np.float32)
    p = program(F, AtomicOp.ADD, 256)
    want = backend.dispatch(p, [x, ix, init])[0]
    assert backend.dispatch_async(p, [x, ix, init]).await_result()[0] == want
    assert backend.dispatch_borrowed_timed(p, [x, ix, init]).outputs[0] == want
    res = [backend.allocate_resident(a.nbytes) for a in (x, ix, init)]
    for r, a in zip(res, (x, ix, init)):
        backend.upload_resident(r, a)
    bound = backend.bind_resident(p, res)
    bound.run()
    assert backend.read_resident(res[2]) == want
    backend.upload_resident(res[2], init)
    bound.run()                                     # again: the scratch starts from zero
    assert backend.read_resident(res[2]) == want
    bound.release()


def test_S36_kernels_reload_from_the_disk_cache(opencl):
    """A kernel loaded from the artifact cache keeps its hidden scratch."""
    p = program(F, AtomicOp.ADD, 256)
    rng = np.random.default_rng(2)
    x, ix, init = rng.standard_normal(500).astype(np.float32), rng.integers(0, 9, 500).astype(np.uint32), \
        np.zeros(9, np.float32)
    want = opencl.dispatch(p, [x, ix, init])[0]
    opencl._pipes.clear()
    p2 = program(F, AtomicOp.ADD, 256)             # a new object: no pipeline attached
    pipe = opencl.compile_native(p2)
    assert pipe.built_from == "disk" and pipe.kernel.scratch == ((2, 45),)
    assert opencl.dispatch(p2, [x, ix, init])[0] == want


def test_S36_too_large_an_accumulator_is_refused_before_allocation(opencl):
    p = Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.output("out", 1, F)], 64,
                        [Node.expr(Expr.atomic(AtomicOp.ADD, "out", GX, Expr.load("x", GX)))])
    with pytest.raises(LimitExceeded) as err:
        opencl.dispatch(p, [np.zeros(4, np.float32)], DispatchConfig(dispatch_elements=1 << 26))
    assert "accumulator" in str(err.value) and "Fix:" in str(err.value)


# ---------------------------------------------------------------------------- refusals
def _bufs(*extra):
    return [BufferDecl.read("x", 0, F), BufferDecl.output("out", 1, F, 8), *extra]


ATOMIC = Expr.atomic(AtomicOp.ADD, "out", GX % 8, Expr.load("x", GX))
REFUSED = {
    "value in a let": ("V040", [Node.let_bind("old", ATOMIC)]),
    "value stored": ("V040", [Node.store("o2", GX, ATOMIC)], [BufferDecl.output("o2", 2, F, 8)]),
    "nested in another atomic": ("V040", [Node.expr(Expr.atomic(AtomicOp.ADD, "o2", GX % 8, ATOMIC))],
                                 [BufferDecl.output("o2", 2, F, 8)]),
    "in a condition": ("V040", [Node.if_(ATOMIC.gt(Expr.f32(0.0)), [])]),
    "function result": ("V040", [Node.let_bind("r", Expr.call("f"))], [], [Function.define("f", [], [], ATOMIC)]),
    "xor": ("V007", [Node.expr(Expr.atomic(AtomicOp.XOR, "out", GX % 8, Expr.load("x", GX)))]),
    "exchange": ("V007", [Node.expr(Expr.atomic(AtomicOp.EXCHANGE, "out", GX % 8, Expr.load("x", GX)))]),
    "compare_exchange": ("V007", [Node.expr(Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "out", GX % 8,
                                                        Expr.load("x", GX), Expr.f32(0.0)))]),
    "workgroup buffer": ("V007", [Node.expr(Expr.atomic(AtomicOp.ADD, "w", GX % 8, Expr.load("x", GX)))],
                         [BufferDecl.workgroup("w", 8, F)]),
    "local array": ("V007", [Node.expr(Expr.atomic(AtomicOp.MAX, "l", GX % 8, Expr.load("x", GX)))],
                    [BufferDecl.local("l", 8, F)]),
    "read-only buffer": ("V008", [Node.expr(Expr.atomic(AtomicOp.ADD, "x", GX, Expr.f32(1.0)))]),
    "loaded in the dispatch": ("V041", [Node.expr(ATOMIC), Node.store("o2", GX, Expr.load("out", GX % 8))],
                               [BufferDecl.output("o2", 2, F, 8)]),
    "loaded in a later phase": ("V041", [Node.expr(ATOMIC), Node.barrier(MemoryOrdering.GRID_SYNC),
                                         Node.store("o2", GX, Expr.load("out", GX % 8))],
                                [BufferDecl.output("o2", 2, F, 8)]),
    "stored in the dispatch": ("V041", [Node.store("out", GX % 8, Expr.f32(1.0)), Node.expr(ATOMIC)]),
    "add and max": ("V041", [Node.expr(ATOMIC),
                             Node.expr(Expr.atomic(AtomicOp.MAX, "out", GX % 8, Expr.load("x", GX)))]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_S36_refusals_have_stable_codes_on_every_backend(backend, case):
    code, body, *more = REFUSED[case]
    extra = more[0] if more else []
    functions = more[1] if len(more) > 1 else []
    p = Program.wrapped(_bufs(*extra), 8, body, functions)
    diags = validate(p)
    assert code in {d.code for d in diags} and all("Fix:" in d.message for d in diags)
    with pytest.raises(InvalidProgram) as err:
        backend.dispatch(p, [np.zeros(8, np.float32)])
    assert code in {d.code for d in err.value.diagnostics}


def test_S36_buf_len_of_the_target_is_allowed_and_other_buffers_are_free():
    p = Program.wrapped(_bufs(BufferDecl.output("o2", 2, F, 8)), 8,
                        [Node.expr(Expr.atomic(AtomicOp.ADD, "out", GX % Expr.buf_len("out"), Expr.load("x", GX))),
                         Node.store("o2", GX, Expr.load("x", GX))])
    assert validate(p) == []
