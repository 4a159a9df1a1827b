"""One test (or more) per row of docs/semantics.md, with hand-checked expected values, on
every available backend (each result is also compared byte for byte with the reference)."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver import DispatchConfig, DispatchFailed
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, MemoryOrdering, Node, Program

from helpers import GX, as_f32, as_i32, as_u32, map_program, run_checked

U, I, F, B = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
NAN = 0x7FC00000


def f32_bits(*vals) -> np.ndarray:
    return np.array(vals, dtype=np.float32).view(np.uint32)


def test_S1_integer_add_sub_mul_negate_wrap(backend):
    p = map_program([U, U], U, lambda a, b: (a + b) ^ (a * b) ^ (a - b))
    a, b = np.array([0xFFFFFFFF, 0x80000000, 7], np.uint32), np.array([2, 0x80000000, 9], np.uint32)
    out = as_u32(run_checked(backend, p, [a, b])[0])
    assert list(out) == [int(x) for x in ((a + b) ^ (a * b) ^ (a - b))]
    p = map_program([I], I, lambda a: -a)
    out = as_i32(run_checked(backend, p, [np.array([-(2**31), 5], np.int32)])[0])
    assert list(out) == [-(2**31), -5]


def test_S1_saturating_and_mul_high(backend):
    p = map_program([I, I], I, lambda a, b: a.saturating_add(b))
    out = as_i32(run_checked(backend, p, [np.array([2**31 - 1, -(2**31)], np.int32),
                                          np.array([5, -5], np.int32)])[0])
    assert list(out) == [2**31 - 1, -(2**31)]
    p = map_program([U, U], U, lambda a, b: a.mul_high(b))
    out = as_u32(run_checked(backend, p, [np.array([0xFFFFFFFF], np.uint32), np.array([0xFFFFFFFF], np.uint32)])[0])
    assert out[0] == 0xFFFFFFFE


def test_S2_u32_division_by_zero(backend):
    p = map_program([U, U], U, lambda a, b: (a / b) + (a % b))
    out = as_u32(run_checked(backend, p, [np.array([7, 7], np.uint32), np.array([0, 2], np.uint32)])[0])
    assert list(out) == [0xFFFFFFFF, 3 + 1]


def test_S3_i32_division_truncates(backend):
    p = map_program([I, I], I, lambda a, b: a / b, wg=1)
    out = as_i32(run_checked(backend, p, [np.array([-7, 7], np.int32), np.array([2, -2], np.int32)])[0])
    assert list(out) == [-3, -3]
    p = map_program([I, I], I, lambda a, b: a % b, wg=1)
    out = as_i32(run_checked(backend, p, [np.array([-7, 7], np.int32), np.array([2, -2], np.int32)])[0])
    assert list(out) == [-1, 1]


@pytest.mark.parametrize(("a", "b"), [(5, 0), (-(2**31), -1)])
def test_S3_i32_division_errors_are_dispatch_failures(backend, a, b):
    p = map_program([I, I], I, lambda x, y: x / y, wg=1)
    with pytest.raises(DispatchFailed) as err:
        backend.dispatch(p, [np.array([a], np.int32), np.array([b], np.int32)])
    assert str(err.value).rstrip().split("Fix:")[-1].strip()


def test_S4_shift_amount_masked_and_i32_shr_arithmetic(backend):
    p = map_program([U, U], U, lambda a, b: (a << b) ^ (a >> b))
    out = as_u32(run_checked(backend, p, [np.array([1, 0x80000000], np.uint32), np.array([33, 63], np.uint32)])[0])
    assert list(out) == [(1 << 1) ^ (1 >> 1), (0) ^ 1]
    p = map_program([I, U], I, lambda a, b: a >> b)
    out = as_i32(run_checked(backend, p, [np.array([-8], np.int32), np.array([1], np.uint32)])[0])
    assert out[0] == -4
    p = map_program([U, U], U, lambda a, b: a.rotate_left(b))
    out = as_u32(run_checked(backend, p, [np.array([0x80000001], np.uint32), np.array([33], np.uint32)])[0])
    assert out[0] == 0x00000003


def test_S5_bool_nonzero_word_loads_true_and_stores_as_one(backend):
    p = map_program([B], B, lambda a: a.logical_not().logical_not())
    out = as_u32(run_checked(backend, p, [np.array([0, 1, 2, 0xFFFFFFFF], np.uint32)])[0])
    assert list(out) == [0, 1, 1, 1]


def test_S6_out_of_bounds_load_zero_store_ignored_atomic_zero(backend):
    body = [
        Node.store("out", GX, Expr.load("a", GX + 100)),           # OOB load -> 0
        Node.store("out", GX + 1000, Expr.u32(9)),                  # OOB store ignored
        Node.store("old", GX, Expr.atomic(AtomicOp.ADD, "acc", GX + 50, Expr.u32(1))),
    ]
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U),
                         BufferDecl.read_write("acc", 2, U, 4), BufferDecl.output("old", 3, U, 4)], 4, body)
    out, acc, old = run_checked(backend, p, [np.arange(4, dtype=np.uint32) + 1, np.full(4, 7, np.uint32)])
    assert list(as_u32(out)) == [0, 0, 0, 0]
    assert list(as_u32(acc)) == [7, 7, 7, 7]
    assert list(as_u32(old)) == [0, 0, 0, 0]


def test_S7_f32_correctly_rounded_div_and_sqrt(backend):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(4096).astype(np.float32)
    b = rng.standard_normal(4096).astype(np.float32)
    out = as_f32(run_checked(backend, map_program([F, F], F, lambda x, y: x / y), [a, b])[0])
    assert np.array_equal(out, a / b)
    out = as_f32(run_checked(backend, map_program([F], F, lambda x: x.sqrt()), [np.abs(a)])[0])
    assert np.array_equal(out, np.sqrt(np.abs(a)))


def test_S8_no_contraction(backend):
    x = np.array([1 + 2**-12], np.float32)
    p = map_program([F, F, F], F, lambda a, b, c: a * b + c)
    out = as_f32(run_checked(backend, p, [x, x, np.array([-1], np.float32)])[0])
    assert out[0] == np.float32(2**-11)  # a fused multiply-add would give 2^-11 + 2^-24


def test_S9_nan_canonicalised_and_subnormals_flushed_by_arithmetic(backend):
    x = np.array([0xFFC00001, 0x00000001, 0x80000005, 0x3F800000], np.uint32)
    p = map_program([F], F, lambda a: a * 1.0)
    out = as_u32(run_checked(backend, p, [x])[0])
    assert list(out) == [NAN, 0x00000000, 0x80000000, 0x3F800000]


def test_S9_loads_stores_select_bitcast_keep_bits(backend):
    x = np.array([0xFFC00001, 0x00000001], np.uint32)
    p = map_program([F], F, lambda a: Expr.select(Expr.bool_(True), a, a))
    assert list(as_u32(run_checked(backend, p, [x])[0])) == list(x)


def test_S10_min_max_nan_and_signed_zero(backend):
    a, b = f32_bits(np.nan, -0.0, 0.0, 1.0), f32_bits(1.0, 0.0, -0.0, np.nan)
    mn = as_u32(run_checked(backend, map_program([F, F], F, lambda x, y: x.min(y)), [a, b])[0])
    mx = as_u32(run_checked(backend, map_program([F, F], F, lambda x, y: x.max(y)), [a, b])[0])
    assert list(mn) == [NAN, 0x80000000, 0x80000000, NAN]
    assert list(mx) == [NAN, 0x00000000, 0x00000000, NAN]


def test_S11_nan_comparisons_false_except_ne(backend):
    a, b = f32_bits(np.nan), f32_bits(1.0)
    for op, want in [("lt", 0), ("gt", 0), ("le", 0), ("ge", 0), ("eq", 0), ("ne", 1)]:
        p = map_program([F, F], B, lambda x, y, op=op: getattr(x, op)(y))
        assert as_u32(run_checked(backend, p, [a, b])[0])[0] == want


def test_S12_float_to_int_truncates_saturates_nan_zero(backend):
    x = np.array([-1.5, 2.9, 1e20, -1e20, np.nan, 4294967040.0], np.float32)
    u = as_u32(run_checked(backend, map_program([F], U, lambda a: Expr.cast(U, a)), [x])[0])
    i = as_i32(run_checked(backend, map_program([F], I, lambda a: Expr.cast(I, a)), [x])[0])
    assert list(u) == [0, 2, 0xFFFFFFFF, 0, 0, 4294967040]
    assert list(i) == [-1, 2, 2**31 - 1, -(2**31), 0, 2**31 - 1]


def test_S12_round_half_away_from_zero(backend):
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997], np.float32)
    out = as_f32(run_checked(backend, map_program([F], F, lambda a: a.round()), [x])[0])
    assert list(out) == [1.0, 2.0, 3.0, -1.0, -3.0, 0.0]


def test_S14_racy_store_highest_lane_wins_in_reference(reference_backend):
    p = Program.wrapped([BufferDecl.output("out", 0, U, 1)], 8, [Node.store("out", 0, Expr.lid_x())])
    out = reference_backend.dispatch(p, [], DispatchConfig(grid_override=(1, 1, 1)))
    assert as_u32(out[0])[0] == 7


def _reduction(wg: int) -> Program:
    body = [Node.store("tmp", Expr.lid_x(), Expr.load("a", GX)), Node.barrier()]
    steps = []
    s = wg // 2
    while s:
        steps += [Node.if_(Expr.lid_x().lt(s), [Node.store("tmp", Expr.lid_x(),
                  Expr.load("tmp", Expr.lid_x()) + Expr.load("tmp", Expr.lid_x() + s))]), Node.barrier()]
        s //= 2
    body += steps + [Node.if_(Expr.lid_x().eq(0), [Node.store("out", Expr.wgid_x(), Expr.load("tmp", 0))])]
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U, 4),
                            BufferDecl.workgroup("tmp", wg, U)], wg, body)


def test_S15_barrier_and_workgroup_memory_reduction(backend):
    a = np.arange(256, dtype=np.uint32) * 3
    out = as_u32(run_checked(backend, _reduction(64), [a])[0])
    assert list(out) == [int(v) for v in a.reshape(4, 64).sum(1)]


def test_S15_returned_invocations_do_not_block_barriers(backend):
    body = [Node.if_(Expr.lid_x().ge(6), [Node.return_()]),
            Node.store("tmp", Expr.lid_x(), Expr.lid_x() + 1), Node.barrier(),
            Node.store("out", GX, Expr.load("tmp", (Expr.lid_x() + 1) % 8))]
    p = Program.wrapped([BufferDecl.output("out", 0, U, 8), BufferDecl.workgroup("tmp", 8, U)], 8, body)
    out = as_u32(run_checked(backend, p, [])[0])
    assert list(out) == [2, 3, 4, 5, 6, 0, 0, 0]


def test_S16_grid_sync_phases_see_all_previous_writes(backend):
    n = 64
    body = [Node.store("mid", GX, GX * 2), Node.barrier(MemoryOrdering.GRID_SYNC),
            Node.store("out", GX, Expr.load("mid", (GX + 17) % n))]
    p = Program.wrapped([BufferDecl.output("mid", 0, U, n), BufferDecl.output("out", 1, U, n)], 8, body)
    _, out = run_checked(backend, p, [])
    assert list(as_u32(out)) == [((i + 17) % n) * 2 for i in range(n)]


def test_S17_commutative_atomics_final_memory(backend):
    n = 1000
    body = [Node.expr(Expr.atomic(AtomicOp.ADD, "hist", Expr.load("a", GX) % 8, 1)),
            Node.expr(Expr.atomic(AtomicOp.MAX, "top", 0, Expr.load("a", GX)))]
    p = Program.wrapped([BufferDecl.read("a", 0, U, n), BufferDecl.read_write("hist", 1, U, 8),
                         BufferDecl.read_write("top", 2, U, 1)], 50, body)
    a = (np.arange(n, dtype=np.uint32) * 7919) % 1009
    hist, top = run_checked(backend, p, [a, np.zeros(8, np.uint32), np.zeros(1, np.uint32)])
    assert list(as_u32(hist)) == list(np.bincount(a % 8, minlength=8))
    assert as_u32(top)[0] == a.max()


def test_S17_atomic_returns_old_value_uncontended(backend):
    body = [Node.store("old", GX, Expr.atomic(AtomicOp.EXCHANGE, "buf", GX, GX + 100)),
            Node.store("cas", GX, Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "buf", GX, Expr.u32(7), GX + 100))]
    p = Program.wrapped([BufferDecl.read_write("buf", 0, U), BufferDecl.output("old", 1, U),
                         BufferDecl.output("cas", 2, U)], 4, body)
    buf, old, cas = run_checked(backend, p, [np.arange(8, dtype=np.uint32)])
    assert list(as_u32(old)) == list(range(8))
    assert list(as_u32(cas)) == [i + 100 for i in range(8)]
    assert list(as_u32(buf)) == [7] * 8


def test_S18_outputs_workgroup_memory_start_zero(backend):
    body = [Node.store("out", GX, Expr.load("out", GX) + Expr.load("tmp", Expr.lid_x()))]
    p = Program.wrapped([BufferDecl.output("out", 0, U, 16), BufferDecl.workgroup("tmp", 4, U)], 4, body)
    assert list(as_u32(run_checked(backend, p, [])[0])) == [0] * 16


def test_S19_default_grid_and_overrides(backend):
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U)], 4,
                        [Node.store("out", GX, Expr.wgid_x() * 1000 + Expr.lid_x() + 1)])
    a = np.zeros(10, np.uint32)
    out = as_u32(run_checked(backend, p, [a])[0])
    assert list(out) == [1, 2, 3, 4, 1001, 1002, 1003, 1004, 2001, 2002]
    out = as_u32(run_checked(backend, p, [a], DispatchConfig(grid_override=(1, 1, 1)))[0])
    assert list(out) == [1, 2, 3, 4] + [0] * 6
    out = as_u32(run_checked(backend, p, [a], DispatchConfig(workgroup_override=(2, 1, 1)))[0])
    assert list(out) == [1, 2, 1001, 1002, 2001, 2002, 3001, 3002, 4001, 4002]


def test_S19_multi_axis_ids(backend):
    body = [Node.store("out", Expr.gid_y() * 8 + Expr.gid_x(), Expr.gid_y() * 100 + Expr.gid_x())]
    p = Program.wrapped([BufferDecl.output("out", 0, U, 32)], (4, 2, 1), body)
    out = as_u32(run_checked(backend, p, [], DispatchConfig(dispatch_grid=(8, 4, 1)))[0])
    assert list(out) == [y * 100 + x for y in range(4) for x in range(8)]


def test_S20_runtime_sized_output_follows_largest_runtime_input(backend):
    p = map_program([U], U, lambda a: a + 1)
    out = run_checked(backend, p, [np.arange(37, dtype=np.uint32)])
    assert len(out[0]) == 37 * 4


def test_S21_loop_and_return(backend):
    body = [Node.let_bind("acc", Expr.u32(0)),
            Node.loop("i", Expr.u32(0), Expr.load("a", GX), [Node.assign("acc", Expr.var("acc") + Expr.var("i"))]),
            Node.if_(Expr.var("acc").gt(10), [Node.return_()]),
            Node.store("out", GX, Expr.var("acc") + 1)]
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U)], 4, body)
    out = as_u32(run_checked(backend, p, [np.array([0, 1, 3, 5, 6], np.uint32)])[0])
    assert list(out) == [1, 1, 4, 11, 0]


def test_S22_left_to_right_evaluation_of_atomics(backend):
    at = Expr.atomic(AtomicOp.ADD, "c", GX, Expr.u32(1))
    body = [Node.store("out", GX, (at << 8) | at)]
    p = Program.wrapped([BufferDecl.read_write("c", 0, U), BufferDecl.output("out", 1, U)], 2, body)
    _, out = run_checked(backend, p, [np.array([5, 9], np.uint32)])
    assert list(as_u32(out)) == [(5 << 8) | 6, (9 << 8) | 10]


@pytest.mark.parametrize("t, lo, hi, want", [
    (DataType.U64, 2**64 - 4, 2, []),                                   # unsigned: from > to
    (DataType.U64, 2**64 - 4, 2**64 - 1, [2**64 - 4, 2**64 - 3, 2**64 - 2]),
    (DataType.I64, -2**63, -2**63 + 3, [-2**63, -2**63 + 1, -2**63 + 2]),
    (DataType.I64, 2**63 - 2, -5, []),
    (DataType.U32, 2**32 - 2, 3, []),
    (DataType.I32, -2, 2, [-2, -1, 0, 1]),
], ids=["u64-wrapped-from", "u64-top", "i64-bottom", "i64-backwards", "u32-wrapped-from", "i32-signed"])
def test_S21_loop_bounds_in_their_own_type(backend, t, lo, hi, want):
    """[from, to) compares in the bounds' type: a u64 bound past 2^63 is a large unsigned
    number, never a negative one (Python ints are the model)."""
    body = [Node.loop("i", Expr.lit(t, lo), Expr.lit(t, hi),
                      [Node.store("out", Expr.cast(DataType.U32, Expr.var("i") - Expr.lit(t, lo)), Expr.var("i"))])]
    p = Program.wrapped([BufferDecl.output("out", 0, t, 4)], 1, body)
    out = np.frombuffer(run_checked(backend, p, [])[0], t.numpy)
    assert [int(v) for v in out[:len(want)]] == want and not out[len(want):].any()
