"""Loops that bound themselves keep no iteration cap and no cancel poll (`vyre.lower.loops`),
loads that give the same value on every trip are read once before the loop
(`vyre.lower.printer.Printer.hoist`), and products and quotients that cannot be subnormal
are not flushed (`vyre.lower.floats.no_subnormal`): the generated code changes, the bytes
do not (S6, S9, S21, S31). Expected values come from Python and numpy."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vyre.drivers.cuda.codegen import generate as cuda_source
from vyre.drivers.opencl.codegen import generate as opencl_source
from vyre.ir import Expr, Node
from vyre.ir import expr as E
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import BinOp, DataType, UnOp
from vyre.lower.floats import no_subnormal
from vyre.lower.loops import POLL_TRIPS
from vyre.lower.plan import lower

U, I, F = DataType.U32, DataType.I32, DataType.F32
GX = Expr.gid_x()
C, N_ = Expr.var("c"), Expr.var("n")


def _counting(cond: E.Expr, body: list, cap: int = 1000) -> Program:
    """out[gid] = the trips a while loop over ``cond`` makes (``c`` counts them)."""
    return Program.wrapped(
        [BufferDecl.read("lim", 0, U), BufferDecl.output("out", 1, U)], 64,
        [Node.let_bind("c", Expr.u32(0)), Node.let_bind("n", Expr.u32(0)),
         Node.while_(cond, body, cap), Node.store("out", GX, N_)])


def _verdicts(program: Program):
    plan = lower(program)
    from vyre.ir.node import Loop, While, walk_nodes

    loops = [n for n in walk_nodes(plan.program.body) if isinstance(n, Loop | While)]
    return plan, loops


# ---- the iteration cap ---------------------------------------------------------------------


def _escape() -> Program:
    """while c < 300 (cap 1000): stop early where 3 * trips reaches lim[gid]."""
    body = [Node.if_((N_ * 3).ge(Expr.load("lim", GX)), [Node.break_()]),
            Node.assign("n", N_ + 1), Node.assign("c", C + 1)]
    return _counting(C.lt(Expr.u32(300)), body)


def test_a_while_counting_to_a_literal_within_its_cap_counts_no_trips():
    plan, (loop,) = _verdicts(_escape())
    assert not plan.loops.capped(loop) and not plan.loops.polls(loop)
    assert not plan.uses_ctl and plan.stoppable   # no error bit can be set, nothing to poll
    for source in (cuda_source(_escape())[1], opencl_source(_escape())[1]):
        kernel = source.split("vyre_phase_0")[1]
        assert "vy_w" not in kernel and "vy_trips" not in kernel and "VY_ERR" not in kernel


def test_the_loop_without_its_cap_gives_the_same_bytes(backend):
    lim = np.array([0, 1, 3, 4, 300, 899, 900, 901, 2**32 - 1] * 8, np.uint32)
    got = np.frombuffer(backend.dispatch(_escape(), [lim])[0], np.uint32)
    want = [min(300, -(-int(v) // 3)) for v in lim]
    assert got.tolist() == want


@pytest.mark.parametrize("case", ["increment under an if", "continue before the increment",
                                  "two increments", "bound past the cap", "bound unknown",
                                  "counter may wrap", "decrement", "step zero"])
def test_a_counter_the_loop_may_not_advance_keeps_the_cap(case):
    inc = Node.assign("c", C + 1)
    keep = Node.assign("n", N_ + 1)
    body, cond = [keep, inc], C.lt(Expr.u32(300))
    if case == "increment under an if":
        body = [keep, Node.if_(N_.lt(Expr.load("lim", GX)), [inc])]
    elif case == "continue before the increment":
        body = [keep, Node.if_(N_.lt(Expr.load("lim", GX)), [Node.continue_()]), inc]
    elif case == "two increments":
        body = [keep, inc, Node.if_(N_.lt(Expr.u32(5)), [Node.assign("c", C + 2)])]
    elif case == "bound past the cap":
        cond = C.lt(Expr.u32(1001))
    elif case == "bound unknown":
        cond = C.lt(Expr.load("lim", GX))
    elif case == "counter may wrap":
        cond = C.le(Expr.u32(0xFFFFFFFF))
        body = [keep, Node.assign("c", C + 2)]
    elif case == "decrement":
        body = [keep, Node.assign("c", C - 1)]
    elif case == "step zero":
        body = [keep, Node.assign("c", C + 0)]
    plan, (loop,) = _verdicts(_counting(cond, body))
    assert plan.loops.capped(loop) and plan.uses_ctl
    assert "vy_w" in cuda_source(_counting(cond, body))[1]


def test_a_continue_after_the_increment_or_in_a_nested_loop_still_counts():
    inner = Node.loop("k", Expr.u32(0), Expr.u32(4), [Node.continue_()])
    body = [inner, Node.assign("c", C + 1), Node.if_(N_.lt(Expr.u32(3)), [Node.continue_()]),
            Node.assign("n", N_ + 1)]
    plan, loops = _verdicts(_counting(C.lt(Expr.u32(300)), body))
    assert not plan.loops.capped(loops[0])


def test_a_conjunct_or_a_flipped_comparison_bounds_the_loop():
    other = Expr.load("lim", GX).gt(N_)
    for cond in (E.Bin(BinOp.AND, other, C.lt(Expr.u32(300))), Expr.u32(299).ge(C)):
        plan, (loop,) = _verdicts(_counting(cond, [Node.assign("n", N_ + 1), Node.assign("c", C + 1)]))
        assert not plan.loops.capped(loop)


def test_the_cap_is_kept_exactly_where_the_bound_meets_it():
    body = [Node.assign("n", N_ + 1), Node.assign("c", C + 1)]
    at, (loop,) = _verdicts(_counting(C.lt(Expr.u32(1000)), body, cap=1000))
    past, (loop2,) = _verdicts(_counting(C.le(Expr.u32(1000)), body, cap=1000))
    assert not at.loops.capped(loop) and past.loops.capped(loop2)


def test_a_while_over_its_cap_still_fails(backend):
    from vyre.driver.errors import DispatchFailed

    body = [Node.assign("n", N_ + 1), Node.assign("c", C + 1)]
    with pytest.raises(DispatchFailed) as err:
        backend.dispatch(_counting(C.lt(Expr.u32(1001)), body), [np.zeros(64, np.uint32)])
    assert err.value.reason == "loop_limit"


# ---- the cancel poll -----------------------------------------------------------------------


def _nested(outer: E.Expr, inner: E.Expr) -> Program:
    return Program.wrapped(
        [BufferDecl.read("lim", 0, U, 1), BufferDecl.output("out", 1, U, 64)], 64,
        [Node.let_bind("n", Expr.u32(0)),
         Node.loop("i", Expr.u32(0), outer, [Node.loop("j", Expr.u32(0), inner, [Node.assign("n", N_ + 1)])]),
         Node.store("out", GX, N_)])


def test_loops_of_bounded_work_poll_no_cancel_word():
    plan, (outer, inner) = _verdicts(_nested(Expr.u32(16), Expr.u32(60)))   # 16 * 61 trips
    assert not plan.loops.polls(outer) and not plan.loops.polls(inner)
    assert not plan.uses_ctl and plan.stoppable
    assert "vy_trips" not in cuda_source(_nested(Expr.u32(16), Expr.u32(60)))[1]


def test_the_loop_around_bounded_work_polls_when_the_total_is_long():
    plan, (outer, inner) = _verdicts(_nested(Expr.u32(32), Expr.u32(60)))   # 32 * 61 > 1024
    assert plan.loops.polls(outer) and not plan.loops.polls(inner)
    assert plan.uses_ctl and plan.stoppable
    unknown, (o2, i2) = _verdicts(_nested(Expr.load("lim", 0), Expr.u32(POLL_TRIPS)))
    assert unknown.loops.polls(o2) and not unknown.loops.polls(i2)


def test_a_loop_of_unknown_length_polls():
    plan, (outer, inner) = _verdicts(_nested(Expr.u32(2), Expr.load("lim", 0)))
    assert plan.loops.polls(outer) and plan.loops.polls(inner) and plan.stoppable


def test_bounded_nested_loops_give_the_same_bytes(backend):
    got = backend.dispatch(_nested(Expr.u32(16), Expr.u32(60)), [np.array([7], np.uint32)])[0]
    assert np.frombuffer(got, np.uint32).tolist() == [16 * 60] * 64


# ---- loop-invariant loads ------------------------------------------------------------------


def _summing(index: E.Expr, trips: E.Expr, store_to_a: bool = False) -> Program:
    """out[gid] = sum over `trips` trips of a[index] + t (t the trip)."""
    body = [Node.assign("s", Expr.var("s") + Expr.load("a", index) + Expr.var("t"))]
    if store_to_a:
        body.append(Node.store("a", Expr.u32(1000), Expr.var("s")))
    return Program.wrapped(
        [BufferDecl.read_write("a", 0, U) if store_to_a else BufferDecl.read("a", 0, U),
         BufferDecl.read("k", 1, U, 1), BufferDecl.output("out", 2, U)], 64,
        [Node.let_bind("s", Expr.u32(0)), Node.let_bind("q", GX * 2),
         Node.loop("t", Expr.u32(0), trips, body), Node.store("out", GX, Expr.var("s"))])


def _loaded_inside(source: str, buffer: str) -> bool:
    kernel = source.split("vyre_phase_0")[1]
    head = kernel.index("for (uint v_t")
    return f"b_{buffer}[" in kernel[head:]


@pytest.mark.parametrize("index", [Expr.var("q"), GX + Expr.load("k", 0), Expr.var("q") // Expr.u32(3)])
def test_an_invariant_load_is_read_once_before_the_loop(index):
    source = cuda_source(_summing(index, Expr.load("k", 0)))[1]
    assert not _loaded_inside(source, "a") and not _loaded_inside(source, "k")


@pytest.mark.parametrize("case", ["index uses the trip", "buffer is written", "signed division"])
def test_a_load_that_may_change_stays_in_the_loop(case):
    index = Expr.var("q")
    if case == "index uses the trip":
        index = Expr.var("q") + Expr.var("t")
    elif case == "signed division":   # may set the division error: only where the program does
        index = E.Cast(U, E.Cast(I, Expr.var("q")) // Expr.i32(3))
    program = _summing(index, Expr.load("k", 0), store_to_a=case == "buffer is written")
    assert _loaded_inside(cuda_source(program)[1], "a")


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_hoisted_loads_give_the_same_bytes_in_and_out_of_range(backend, trips):
    """Out of range the load gives zero (S6), and a loop of no trips reads nothing."""
    a = (np.arange(100, dtype=np.uint32) * 7 + 1)
    k = np.array([trips], np.uint32)
    got = np.frombuffer(backend.dispatch(_summing(Expr.var("q"), Expr.load("k", 0)), [a, k])[0], np.uint32)
    want = [sum((int(a[2 * g]) if 2 * g < 100 else 0) + t for t in range(trips)) for g in range(100)]
    assert got.tolist() == want


# ---- flushes that cannot matter ------------------------------------------------------------


def _f32(x: float) -> E.Lit:
    return Expr.f32(x)


def test_no_subnormal_results_of_large_literal_products_and_reciprocal_roots():
    x = Expr.var("x")
    root = E.Un(UnOp.SQRT, x)
    assert no_subnormal(_f32(2.0) * x) and no_subnormal(x * _f32(-1.0)) and no_subnormal(_f32(np.inf) * x)
    assert not no_subnormal(_f32(0.5) * x) and not no_subnormal(x * x) and not no_subnormal(E.Lit(F, 0x7FC00000) * x)
    assert no_subnormal(_f32(1.0) / root) and no_subnormal(_f32(2.0 ** -62) / root) and no_subnormal(E.Un(UnOp.RECIPROCAL, root))
    assert not no_subnormal(_f32(2.0 ** -63) / root) and not no_subnormal(_f32(1.0) / x)
    assert not no_subnormal(E.Un(UnOp.RECIPROCAL, x)) and not no_subnormal(x / root)


def _ftz(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float32)
    return np.where(np.abs(v) < np.float32(2.0 ** -126), np.copysign(np.float32(0), v), v).astype(np.float32)


def _products() -> Program:
    """out = (c * x) * y, for a literal c (S9: operands flushed, IEEE products, flushed)."""
    x, y = Expr.load("x", GX), Expr.load("y", GX)
    return Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.read("y", 1, F), BufferDecl.output("o2", 2, F),
                            BufferDecl.output("oh", 3, F), BufferDecl.output("r", 4, F)], 64,
                           [Node.store("o2", GX, _f32(2.0) * x * y), Node.store("oh", GX, _f32(0.5) * x * y),
                            Node.store("r", GX, _f32(1.0) / E.Un(UnOp.SQRT, x))])


def _window_operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    """x, y whose exact product 2*x*y lies just below 2**-126 and rounds up to it, plus
    subnormal, zero, huge and special operands."""
    rng = np.random.default_rng(5)
    xs, ys = [], []
    tiny = 2.0 ** -126
    while len(xs) < n // 2:
        x = np.float32(rng.uniform(1.0, 2.0))
        y = np.float32(tiny / (2.0 * float(x)))
        for _ in range(4):
            exact = 2.0 * float(x) * float(y)
            if exact < tiny and np.float32(2.0) * x * y == np.float32(tiny):
                xs.append(x), ys.append(y)
                break
            y = np.nextafter(y, np.float32(0)) if exact >= tiny else np.nextafter(y, np.float32(1))
    sub = np.float32(2.0 ** -130)
    specials = [(sub, np.float32(3.0)), (np.float32(3.0), sub), (np.float32(0), np.float32(5)),
                (np.float32(-0.0), np.float32(5)), (np.float32(3e38), np.float32(2)), (np.float32(np.inf), np.float32(0)),
                (np.float32(np.nan), np.float32(1)), (np.float32(2.0 ** -125), np.float32(0.5)),
                (np.float32(-(2.0 ** -126)), np.float32(0.75)), (np.float32(1e-30), np.float32(-1e-10))]
    while len(xs) < n:
        a, b = specials[len(xs) % len(specials)]
        xs.append(a), ys.append(b)
    return np.array(xs, np.float32), np.array(ys, np.float32)


def _results_of(source: str, call: str) -> list[str]:
    return re.findall(r"const float (t\d+) = " + re.escape(call), source)


def test_products_by_a_literal_and_reciprocal_roots_flush_only_where_they_must():
    source = opencl_source(_products())[1]
    two, half = _results_of(source, "VY_FMUL(VY_U2F(0x40000000u)"), _results_of(source, "VY_FMUL(VY_U2F(0x3F000000u)")
    roots = _results_of(source, "VY_FDIV(VY_U2F(0x3F800000u)")
    assert two and half and roots
    # 0.5 * x may be subnormal: flushed before the next product; 2 * x and 1/sqrt(x) never are
    assert all(f"vy_daz({t})" in source for t in half)
    assert not any(f"vy_daz({t})" in source or f"vy_canon({t})" in source for t in two + roots)
    assert all(f"vy_cnan({t})" in source for t in roots)   # a NaN payload is still canonicalised


def test_products_and_reciprocal_roots_give_the_canonical_bytes(backend):
    x, y = _window_operands(64)
    with np.errstate(all="ignore"):
        two = _ftz(_ftz(np.float32(2.0) * _ftz(x)) * _ftz(y))
        half = _ftz(_ftz(np.float32(0.5) * _ftz(x)) * _ftz(y))
        r = _ftz(np.float32(1.0) / np.sqrt(_ftz(x)).astype(np.float32))
    want = [np.where(np.isnan(v), np.float32(np.nan), v).astype(np.float32).view(np.uint32) for v in (two, half, r)]
    for w in want:
        w[np.isnan(w.view(np.float32))] = 0x7FC00000
    got = backend.dispatch(_products(), [x, y])
    for g, w in zip(got, want):
        assert np.frombuffer(g, np.uint32).tolist() == w.tolist()


# ---- chunked polls -------------------------------------------------------------------------


def _sum_loop(var_type: DataType, lo: int, hi: int, extra: list | None = None) -> Program:
    """out[0] = the (wrapping) sum of the loop variable over [lo, k + hi), k an input 0."""
    lit = Expr.u32 if var_type is U else Expr.i32
    to = Expr.load("k", 0) + Expr.u32(hi) if var_type is U else E.Cast(I, Expr.load("k", 0)) + Expr.i32(hi)
    add = Expr.var("s") + (Expr.var("i") if var_type is U else E.Cast(U, Expr.var("i")))
    return Program.wrapped(
        [BufferDecl.read("k", 0, U, 1), BufferDecl.output("out", 1, U, 1)], 1,
        [Node.let_bind("s", Expr.u32(0)),
         Node.loop("i", lit(lo), to, [*(extra or []), Node.assign("s", add)]),
         Node.store("out", Expr.u32(0), Expr.var("s"))])


def test_a_long_loop_polls_once_per_chunk_of_trips():
    source = cuda_source(_sum_loop(U, 0, 5000))[1].split("vyre_phase_0")[1]
    assert "vy_trips += " in source and "++vy_trips" not in source
    with_break = _sum_loop(U, 0, 5000, [Node.if_(Expr.var("i").eq(Expr.u32(7)), [Node.break_()])])
    assert "++vy_trips" in cuda_source(with_break)[1]   # a chunk's loop would leave only the chunk


@pytest.mark.parametrize("var_type, lo, hi", [(U, 0, 1023), (U, 0, 1024), (U, 0, 1025), (U, 7, 5000),
                                              (U, 9, 3), (I, -1500, 1700), (I, -(2**31), -(2**31) + 2100)])
def test_chunked_loops_make_every_trip(backend, var_type, lo, hi):
    skip_thirds = [Node.if_((Expr.var("s") % Expr.u32(3)).eq(Expr.u32(1)), [Node.continue_()])]
    program = _sum_loop(var_type, lo, hi, skip_thirds)
    s = 0
    for i in range(lo, hi):
        if s % 3 == 1:
            continue
        s = (s + i) & 0xFFFFFFFF
    got = backend.dispatch(program, [np.zeros(1, np.uint32)])[0]
    assert np.frombuffer(got, np.uint32).tolist() == [s]


def test_a_loop_to_the_minimum_of_a_bound_and_a_buffer_length_reads_it_without_a_check(backend):
    """``loop(i, r0, min(r0 + c, buf_len(a)))`` (a run clipped to the buffer's end, either
    operand order): ``a[i]`` is in bounds, ``b[i]`` keeps its check (under a flag: b as long as a); the values are S6's."""
    for flip in (False, True):
        r0 = Expr.var("r0")
        clip = Expr.min(E.BufLen("a"), r0 + Expr.u32(700)) if flip else Expr.min(r0 + Expr.u32(700), E.BufLen("a"))
        program = Program.wrapped(
            [BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U), BufferDecl.output("out", 2, U, 4)], 4,
            [Node.let_bind("r0", Expr.gid_x() * Expr.u32(700)), Node.let_bind("s", Expr.u32(0)),
             Node.loop("i", r0, clip, [
                 Node.assign("s", Expr.var("s") + Expr.load("a", Expr.var("i")) * Expr.load("b", Expr.var("i")))]),
             Node.store("out", Expr.gid_x(), Expr.var("s"))])
        source = cuda_source(program)[1]
        assert "b_a[v_i]" in source and "(v_i < n_a)" not in source and "n_a <= n_b;" in source \
            and "|| v_i < n_b) ? b_b[v_i]" in source   # checked unless b is as long as a (`Printer.unswitch`)
        a = np.arange(1, 2000, dtype=np.uint32)      # 1999: the third run is clipped, the fourth empty
        b = np.arange(5, 1505, dtype=np.uint32)      # shorter: its loads past 1500 give zero (S6)
        want = [sum(int(a[i]) * (int(b[i]) if i < b.size else 0) for i in range(g * 700, min(g * 700 + 700, a.size)))
                & 0xFFFFFFFF for g in range(4)]
        got = backend.dispatch(program, [a, b])[0]
        assert np.frombuffer(got, np.uint32).tolist() == want


def test_a_loop_over_blocks_to_a_shifted_buffer_length_reads_each_block_without_a_check(backend):
    """``loop(w, w0, min(w0 + c, buf_len(a) >> 2))`` (whole blocks of 4, clipped to the
    buffer's end): ``a[(w << 2) + k]`` for ``k < 4`` is in bounds; ``a[(w << 2) + 4]`` (the
    next block), ``a[(w << 1) + 1]`` (another shift) and ``b[(w << 2) + k]`` keep their checks;
    the values are S6's."""
    w = Expr.var("w")
    loads = [Expr.load("a", (w << 2) + k) for k in range(4)]
    program = Program.wrapped(
        [BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U), BufferDecl.output("out", 2, U, 4)], 4,
        [Node.let_bind("w0", Expr.gid_x() * Expr.u32(100)), Node.let_bind("s", Expr.u32(0)),
         Node.loop("w", Expr.var("w0"), Expr.min(Expr.var("w0") + Expr.u32(100), E.BufLen("a") >> 2), [
             Node.assign("s", Expr.var("s") + (loads[0] + loads[1]) * (loads[2] + loads[3])
                         + Expr.load("a", (w << 2) + 4) + Expr.load("a", (w << 1) + 1)
                         + Expr.load("b", (w << 2) + 3))]),
         Node.store("out", Expr.gid_x(), Expr.var("s"))])
    source = cuda_source(program)[1]
    assert len(re.findall(r"b_a\[t\d+\]", source)) == 6 and len(re.findall(r"< n_a\)", source)) == 2
    assert len(re.findall(r"< n_b\)", source)) == 1
    a = np.arange(1, 1003, dtype=np.uint32)      # 1002: 250 whole blocks, the third run clipped
    b = np.arange(7, 907, dtype=np.uint32)       # shorter: its loads past 900 give zero (S6)

    def at(x: np.ndarray, i: int) -> int:
        return int(x[i]) if i < x.size else 0

    want = [sum((at(a, 4 * q) + at(a, 4 * q + 1)) * (at(a, 4 * q + 2) + at(a, 4 * q + 3)) + at(a, 4 * q + 4)
                + at(a, 2 * q + 1) + at(b, 4 * q + 3) for q in range(g * 100, min(g * 100 + 100, a.size // 4)))
            & 0xFFFFFFFF for g in range(4)]
    assert np.frombuffer(backend.dispatch(program, [a, b])[0], np.uint32).tolist() == want


def test_a_loop_to_a_buffer_length_reads_it_without_a_check(backend):
    program = Program.wrapped(
        [BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U), BufferDecl.output("out", 2, U, 1)], 1,
        [Node.let_bind("s", Expr.u32(0)),
         Node.loop("i", Expr.u32(2), E.BufLen("a"), [
             Node.assign("s", Expr.var("s") + Expr.load("a", Expr.var("i")) * Expr.load("b", Expr.var("i")))]),
         Node.store("out", Expr.u32(0), Expr.var("s"))])
    source = cuda_source(program)[1]
    assert "b_a[v_i]" in source and "(v_i < n_a)" not in source and "n_a <= n_b;" in source \
        and "|| v_i < n_b) ? b_b[v_i]" in source   # checked unless b is as long as a (`Printer.unswitch`)
    a = np.arange(1, 3000, dtype=np.uint32)
    b = np.arange(5, 1005, dtype=np.uint32)   # shorter: its loads past 1000 give zero (S6)
    want = sum(int(a[i]) * int(b[i]) for i in range(2, 1000)) & 0xFFFFFFFF
    assert np.frombuffer(backend.dispatch(program, [a, b])[0], np.uint32).tolist() == [want]


def _clipped_loops() -> list[Program]:
    """Loops bounded by a buffer's length, by the minimum of a bound and it (either order),
    and by blocks of it (``buf_len(a) >> 3``): what `Printer.unswitch` and the block proofs
    of `vyre.lower.ranges` meet."""
    r0 = Expr.var("r0")
    ends = [E.BufLen("a"), Expr.min(r0 + Expr.u32(700), E.BufLen("a")), Expr.min(E.BufLen("a"), r0 + Expr.u32(700))]
    progs = []
    for end in ends:
        progs.append(Program.wrapped(
            [BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U), BufferDecl.output("out", 2, U, 4)], 4,
            [Node.let_bind("r0", Expr.gid_x() * Expr.u32(700)), Node.let_bind("s", Expr.u32(0)),
             Node.loop("i", r0, end, [
                 Node.assign("s", Expr.var("s") + Expr.load("a", Expr.var("i")) * Expr.load("b", Expr.var("i")))]),
             Node.store("out", Expr.gid_x(), Expr.var("s"))]))
    blocks = E.BufLen("a") >> Expr.u32(3)
    progs.append(Program.wrapped(
        [BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U), BufferDecl.output("out", 2, U, 1)], 1,
        [Node.let_bind("s", Expr.u32(0)),
         Node.loop("i", Expr.u32(0), blocks, [
             Node.assign("s", Expr.var("s") + Expr.load("a", (Expr.var("i") << Expr.u32(3)) + Expr.u32(7))
                         * Expr.load("b", Expr.var("i")))]),
         Node.store("out", Expr.u32(0), Expr.var("s"))]))
    return progs


def test_loops_bounded_by_buffer_lengths_print_cuda_that_nvrtc_compiles() -> None:
    """Without a GPU: the CUDA of every such loop names only the kernel's own counts (an
    unswitch flag once printed a bound's tuple, ``n_('a', 0)``) and NVRTC compiles it."""
    compiler = pytest.importorskip("vyre.drivers.cuda.compiler")
    for program in _clipped_loops():
        source = cuda_source(program)[1]
        assert "n_(" not in source, source
        try:
            compiler.compile_ptx(source, "sm_90")
        except ImportError as exc:   # no NVRTC on this machine
            pytest.skip(str(exc))
