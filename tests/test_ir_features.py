"""The IR that real programs need (issue 13): 64-bit integers, f16/bf16, narrow storage, byte
swap, local arrays, functions, while/break/continue, indirect dispatch and weak literals.

Every case runs on every backend byte-identical to the reference (`run_checked`), and the
reference is checked against what nobody here wrote: Python integers, numpy float16, exact
rational rounding (`fractions`), hashlib and numpy's Philox.
"""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
import pytest

from vyre import examples as X
from vyre import reference
from vyre.driver import DispatchConfig, DispatchFailed
from vyre.ir import (
    AtomicOp,
    BinOp,
    BufferDecl,
    DataType,
    Expr,
    Function,
    Node,
    Program,
    UnOp,
    VyreError,
    validate,
    wire,
)
from vyre.ir.errors import ExecutionError, WireError
from vyre.ir.expr import OperandError, WeakLit

from helpers import GX, run_checked

T = DataType
U, I, U64, I64, F16, BF16 = T.U32, T.I32, T.U64, T.I64, T.F16, T.BF16
v = Expr.var
M64 = (1 << 64) - 1


def _map(in_types, out_type, fn, wg=64):
    bufs = [BufferDecl.read(f"x{i}", i, t) for i, t in enumerate(in_types)]
    bufs.append(BufferDecl.output("out", len(in_types), out_type))
    return Program.wrapped(bufs, wg, [Node.store("out", GX, fn(*(Expr.load(f"x{i}", GX) for i in range(len(in_types)))))])


def _u64_values(n: int, seed: int) -> np.ndarray:
    edges = [0, 1, 2, 3, 63, 64, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63,
             (1 << 63) + 1, M64 - 1, M64]
    rng = np.random.default_rng(seed)
    rand = rng.integers(0, 2**64, n - len(edges), dtype=np.uint64)
    return np.concatenate([np.array(edges, dtype=np.uint64), rand])


# ---------------------------------------------------------------------------- real programs
def test_sha256_of_raw_bytes_with_local_array_functions_and_while(backend):
    rng = np.random.default_rng(5)
    msgs = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, 300, 150)]
    msgs += [b"", b"abc", b"a" * 55, b"b" * 56, b"c" * 63, b"d" * 64, b"e" * 65, b"f" * 119, b"g" * 1000]
    out = run_checked(backend, X.sha256_bytes(), X.sha256_bytes_inputs(msgs), X.sha256_bytes_config(len(msgs)))
    assert np.array_equal(np.frombuffer(out[0], np.uint32), X.sha256_bytes_expected(msgs))


def test_functions_survive_a_workgroup_override_and_specialization(backend):
    msgs = [b"", b"abc", b"q" * 200]
    cfg = DispatchConfig(dispatch_elements=8 * len(msgs), dispatch_grid=(len(msgs), 1, 1),
                         workgroup_override=(32, 1, 1))
    out = run_checked(backend, X.sha256_bytes(), X.sha256_bytes_inputs(msgs), cfg)
    assert np.array_equal(np.frombuffer(out[0], np.uint32), X.sha256_bytes_expected(msgs))
    scale = Function.define("scale", [("x", U)], [], v("x") * Expr.spec("k", U, 3))
    prog = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64,
                           [Node.store("o", GX, Expr.call("scale", Expr.load("a", GX)))], [scale])
    a = np.arange(100, dtype=np.uint32)
    out = run_checked(backend, prog, [a], DispatchConfig(specialization={"k": 5}))
    assert np.array_equal(np.frombuffer(out[0], np.uint32), a * 5)


@pytest.mark.parametrize("counter", [(0, 0, 0, 0), (M64 - 5, 7, 0, 0), (M64, M64, M64 - 1, 9)])
def test_philox4x64_matches_numpy(backend, counter):
    key = (0x0123456789ABCDEF, 0xFEDCBA9876543210)
    blocks = 500
    out = run_checked(backend, X.philox4x64(), [X.philox_state(key, counter)],
                      DispatchConfig(dispatch_elements=4 * blocks))
    assert np.array_equal(np.frombuffer(out[0], np.uint64), X.philox_expected(key, counter, blocks))


# ---------------------------------------------------------------------------- 64-bit integers
_U64_OPS = {
    BinOp.ADD: lambda a, b: (a + b) & M64, BinOp.SUB: lambda a, b: (a - b) & M64,
    BinOp.MUL: lambda a, b: (a * b) & M64, BinOp.DIV: lambda a, b: a // b if b else M64,
    BinOp.MOD: lambda a, b: a % b if b else 0, BinOp.MUL_HIGH: lambda a, b: (a * b) >> 64,
    BinOp.SHL: lambda a, b: (a << (b & 63)) & M64, BinOp.SHR: lambda a, b: a >> (b & 63),
    BinOp.ROTATE_LEFT: lambda a, b: ((a << (b & 63)) | (a >> ((64 - (b & 63)) & 63))) & M64 if b & 63 else a,
    BinOp.SATURATING_ADD: lambda a, b: min(a + b, M64), BinOp.SATURATING_SUB: lambda a, b: max(a - b, 0),
    BinOp.SATURATING_MUL: lambda a, b: min(a * b, M64), BinOp.ABS_DIFF: lambda a, b: abs(a - b),
    BinOp.MIN: min, BinOp.MAX: max,
}


@pytest.mark.parametrize("op", list(_U64_OPS), ids=lambda o: o.value)
def test_u64_operations_match_python_integers(backend, op):
    a, b = _u64_values(300, 1), _u64_values(300, 2)[::-1].copy()
    out = run_checked(backend, _map([U64, U64], U64, lambda x, y: Expr.bin(op, x, y)), [a, b])
    want = [_U64_OPS[op](int(x), int(y)) for x, y in zip(a, b)]
    assert np.frombuffer(out[0], np.uint64).tolist() == want


def _s64(x: int) -> int:
    return x - (1 << 64) if x >> 63 else x


_I64_OPS = {
    BinOp.ADD: lambda a, b: _s64((a + b) & M64), BinOp.MUL: lambda a, b: _s64((a * b) & M64),
    BinOp.MUL_HIGH: lambda a, b: (a * b) >> 64, BinOp.SHR: lambda a, b: a >> (b & 63),
    BinOp.SATURATING_ADD: lambda a, b: max(min(a + b, 2**63 - 1), -2**63),
    BinOp.SATURATING_SUB: lambda a, b: max(min(a - b, 2**63 - 1), -2**63),
    BinOp.SATURATING_MUL: lambda a, b: max(min(a * b, 2**63 - 1), -2**63),
    BinOp.DIV: lambda a, b: int(Fraction(a, b)) if b else None, BinOp.MIN: min, BinOp.MAX: max,
}


@pytest.mark.parametrize("op", list(_I64_OPS), ids=lambda o: o.value)
def test_i64_operations_match_python_integers(backend, op):
    a = _u64_values(320, 3).view(np.int64)   # whole workgroups: no lane divides an OOB zero
    b = _u64_values(320, 4)[::-1].copy().view(np.int64)
    if op is BinOp.DIV:   # no faulting pairs here (see test_signed_division_faults_...)
        b = np.where((b == 0) | ((a == -2**63) & (b == -1)), 7, b)
    out = run_checked(backend, _map([I64, I64], I64, lambda x, y: Expr.bin(op, x, y)), [a, b])
    want = [_I64_OPS[op](int(x), int(y)) for x, y in zip(a, b)]
    assert np.frombuffer(out[0], np.int64).tolist() == want


@pytest.mark.parametrize("op", [UnOp.POPCOUNT, UnOp.CLZ, UnOp.CTZ, UnOp.REVERSE_BITS, UnOp.BYTE_SWAP,
                                UnOp.NEGATE, UnOp.BITNOT], ids=lambda o: o.value)
def test_u64_unary_operations(backend, op):
    a = _u64_values(200, 5)
    out = run_checked(backend, _map([U64], U64, lambda x: Expr.un(op, x)), [a])
    ref = {UnOp.POPCOUNT: lambda x: bin(x).count("1"), UnOp.CLZ: lambda x: 64 - x.bit_length(),
           UnOp.CTZ: lambda x: (x & -x).bit_length() - 1 if x else 64,
           UnOp.REVERSE_BITS: lambda x: int(f"{x:064b}"[::-1], 2),
           UnOp.BYTE_SWAP: lambda x: int.from_bytes(x.to_bytes(8, "little"), "big"),
           UnOp.NEGATE: lambda x: -x & M64, UnOp.BITNOT: lambda x: ~x & M64}[op]
    assert np.frombuffer(out[0], np.uint64).tolist() == [ref(int(x)) for x in a]


def test_byte_swap_u32_matches_numpy(backend):
    a = _u64_values(100, 6).astype(np.uint32)
    out = run_checked(backend, _map([U], U, lambda x: x.byte_swap()), [a])
    assert np.array_equal(np.frombuffer(out[0], np.uint32), a.byteswap())


def test_signed_division_faults_are_one_error_everywhere(backend):
    prog = _map([I64, I64], I64, lambda x, y: x / y)
    a, b = np.array([5, -2**63, 9], np.int64), np.array([2, -1, 3], np.int64)
    with pytest.raises(ExecutionError) as ref_err:
        reference.run(prog, [a, b])
    assert ref_err.value.kind == "division"
    with pytest.raises(DispatchFailed) as err:
        backend.dispatch(prog, [a, b])
    assert err.value.reason == "division"


# ---------------------------------------------------------------------------- 16-bit floats
ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_f16_arithmetic_is_numpys_float16(backend, op):
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 16, 20000, dtype=np.uint32).astype(np.uint16)
    b = rng.integers(0, 1 << 16, 20000, dtype=np.uint32).astype(np.uint16)
    out = run_checked(backend, _map([F16, F16], F16, lambda x, y: Expr.bin(BinOp(op), x, y)), [a, b])
    got = np.frombuffer(out[0], np.float16)
    with np.errstate(all="ignore"):   # numpy float16 ops: float32 compute, one rounding
        want = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](
            a.view(np.float16), b.view(np.float16))
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.all(got.view(np.uint16)[nan] == 0x7E00)   # the canonical f16 NaN
    assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def test_f16_sqrt_and_casts_over_every_bit_pattern(backend):
    prog = Program.wrapped([BufferDecl.read("x", 0, F16), BufferDecl.output("s", 1, F16),
                            BufferDecl.output("f", 2, T.F32), BufferDecl.output("b", 3, BF16),
                            BufferDecl.output("i", 4, I)], 64, [
        Node.store("s", GX, Expr.load("x", GX).sqrt()),
        Node.store("f", GX, Expr.cast(T.F32, Expr.load("x", GX))),
        Node.store("b", GX, Expr.cast(BF16, Expr.load("x", GX))),
        Node.store("i", GX, Expr.cast(I, Expr.load("x", GX)))])
    s, f, _, i = run_checked(backend, prog, [ALL16])
    x = ALL16.view(np.float16)
    nan = np.isnan(x)
    wide = np.frombuffer(f, np.float32)
    assert np.array_equal(wide[~nan], x[~nan].astype(np.float32))        # exact widening
    assert np.all(np.frombuffer(f, np.uint32)[nan] == 0x7FC00000)
    with np.errstate(all="ignore"):
        want = np.sqrt(x)
    ok = ~np.isnan(want)
    assert np.array_equal(np.frombuffer(s, np.uint16)[ok], want.view(np.uint16)[ok])
    trunc = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0, posinf=2**31 - 1, neginf=-2**31))
    assert np.array_equal(np.frombuffer(i, np.int32), trunc.astype(np.int32))


def _round_exact(value: Fraction, frac_bits: int, bias: int, flush_subnormal: bool) -> int:
    """Round a rational once, to nearest even, to a binary format (reference oracle)."""
    sign = 0x8000 if value < 0 else 0
    a = abs(value)
    if a == 0:
        return sign
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q_exp = max(e, 1 - bias) - frac_bits
    q = round(a / Fraction(2) ** q_exp)
    if q >= 1 << (frac_bits + 1):
        q //= 2
        q_exp += 1
    if q < 1 << frac_bits:
        return sign if flush_subnormal else sign | q
    biased = q_exp + frac_bits + bias
    exp_all = (1 << (15 - frac_bits)) - 1
    if biased >= exp_all:
        return sign | (exp_all << frac_bits)
    return sign | (biased << frac_bits) | (q - (1 << frac_bits))


@pytest.mark.parametrize("src", [U, I, U64, I64])
def test_integer_to_bf16_and_f16_rounds_once(backend, src):
    vals = _u64_values(400, 8)
    if src in (U, I):
        vals = vals.astype(np.uint32)
    vals = vals.view(src.host)
    prog = Program.wrapped([BufferDecl.read("x", 0, src), BufferDecl.output("b", 1, BF16),
                            BufferDecl.output("h", 2, F16), BufferDecl.output("f", 3, T.F32)], 64, [
        Node.store("b", GX, Expr.cast(BF16, Expr.load("x", GX))),
        Node.store("h", GX, Expr.cast(F16, Expr.load("x", GX))),
        Node.store("f", GX, Expr.cast(T.F32, Expr.load("x", GX)))])
    b, h, f = run_checked(backend, prog, [vals])
    assert np.frombuffer(b, np.uint16).tolist() == [_round_exact(Fraction(int(x)), 7, 127, True) for x in vals]
    assert np.frombuffer(h, np.uint16).tolist() == [_round_exact(Fraction(int(x)), 10, 15, False) for x in vals]
    want_f = [struct.unpack("<I", struct.pack("<f", float(Fraction(int(x)))))[0] if abs(int(x)) < 2**53
              else None for x in vals]
    got_f = np.frombuffer(f, np.uint32).tolist()
    assert all(w is None or w == g for w, g in zip(want_f, got_f))


def test_bf16_arithmetic_rounds_the_f32_result_once(backend):
    rng = np.random.default_rng(9)
    a = np.concatenate([ALL16, rng.integers(0, 1 << 16, 5000, dtype=np.uint32).astype(np.uint16)])
    b = np.concatenate([ALL16[::-1], rng.integers(0, 1 << 16, 5000, dtype=np.uint32).astype(np.uint16)])
    prog = _map([BF16, BF16], BF16, lambda x, y: x * y + x)
    out = run_checked(backend, prog, [a, b])
    got = np.frombuffer(out[0], np.uint16)
    for i in range(0, a.size, 97):   # an exact oracle on a sample
        x, y = (struct.unpack("<f", struct.pack("<I", int(w) << 16))[0] for w in (a[i], b[i]))
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        # flush bf16 subnormal operands (S9), one rounding per operation
        x = 0.0 if abs(x) < 2**-126 else x
        y = 0.0 if abs(y) < 2**-126 else y
        p = _round_exact(Fraction(x) * Fraction(y), 7, 127, True)
        pf = struct.unpack("<f", struct.pack("<I", p << 16))[0]
        if not np.isfinite(pf):
            continue
        r = _round_exact(Fraction(pf) + Fraction(x), 7, 127, True) if pf + x != 0 else None
        if r is not None:
            assert int(got[i]) == r, (i, hex(a[i]), hex(b[i]))


# ---------------------------------------------------------------------------- narrow storage
@pytest.mark.parametrize("t", [T.U8, T.I8, T.U16, T.I16])
def test_narrow_loads_widen_and_stores_keep_the_low_bits(backend, t):
    x = (np.arange(1003) * 97 % 65536).astype(np.uint64).astype(t.host)   # an odd byte length
    vt = t.value_type
    prog = Program.wrapped([BufferDecl.read("x", 0, t), BufferDecl.output("w", 1, vt),
                            BufferDecl.output("n", 2, t)], 64, [
        Node.store("w", GX, Expr.load("x", GX)),
        Node.store("n", GX, Expr.load("x", GX) * 3 + 1000)])
    w, n = run_checked(backend, prog, [x])
    assert np.array_equal(np.frombuffer(w, vt.host), x.astype(vt.host))
    assert np.array_equal(np.frombuffer(n, t.host), (x.astype(np.int64) * 3 + 1000).astype(t.host))


# ---------------------------------------------------------------------------- local arrays, functions
def test_local_arrays_start_zeroed_and_follow_the_oob_rule(backend):
    prog = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U),
                            BufferDecl.local("tmp", 8, U)], 64, [
        Node.store("tmp", GX % 8, Expr.load("a", GX)),
        Node.store("tmp", 8 + GX, 99),                          # out of bounds: no effect
        Node.let_bind("s", 0),
        Node.loop("k", 0, 10, [Node.assign("s", v("s") + Expr.load("tmp", v("k")) * (v("k") + 1))]),
        Node.store("o", GX, v("s"))])
    a = np.arange(300, dtype=np.uint32) * 11
    out = run_checked(backend, prog, [a])
    gx = np.arange(300)
    assert np.array_equal(np.frombuffer(out[0], np.uint32), (a * ((gx % 8) + 1)).astype(np.uint32))


def test_calls_keep_left_to_right_order(backend):
    """An atomic evaluated before a call, a call that increments the same counter: the
    inliner must not move the call before the atomic."""
    bump = Function.define("bump", [("k", U)], [
        Node.let_bind("old", Expr.atomic(AtomicOp.ADD, "c", 0, v("k")))], result=v("old") * 2)
    prog = Program.wrapped([BufferDecl.read_write("c", 0, U, 1), BufferDecl.output("o", 1, U, 1)], 1, [
        Node.store("o", 0, Expr.atomic(AtomicOp.ADD, "c", 0, 5) * 100 + Expr.call("bump", 3)
                   + Expr.load("c", 0) * 10000),
        Node.call("bump", Expr.call("bump", 1))], [bump])
    c, o = run_checked(backend, prog, [np.array([1], np.uint32)], DispatchConfig(grid_override=(1, 1, 1)))
    # c: 1 -> 6 (atomic) -> 9 (bump 3) ; then bump(1): 9 -> 10, returns 18 ; bump(18): 10 -> 28
    assert np.frombuffer(c, np.uint32).tolist() == [28]
    assert np.frombuffer(o, np.uint32).tolist() == [1 * 100 + 6 * 2 + 9 * 10000]


def test_while_with_break_and_continue_counts_collatz_steps(backend):
    body = [
        Node.let_bind("x", Expr.cast(U64, Expr.load("a", GX))),
        Node.let_bind("steps", 0),
        Node.let_bind("odd", 0),
        Node.while_(Expr.bool_(True), [
            Node.if_(v("x").le(1), [Node.break_()]),
            Node.assign("steps", v("steps") + 1),
            Node.if_((v("x") & 1).eq(0), [Node.assign("x", v("x") >> 1), Node.continue_()]),
            Node.assign("odd", v("odd") + 1),
            Node.assign("x", v("x") * 3 + 1),
        ], max_iterations=1000),
        Node.store("o", GX, v("steps") * 1000 + v("odd"))]
    prog = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64, body)
    a = np.arange(1, 2001, dtype=np.uint32)

    def collatz(n):
        steps = odd = 0
        while n > 1:
            steps += 1
            if n % 2:
                odd += 1
                n = 3 * n + 1
            else:
                n //= 2
        return steps * 1000 + odd

    out = run_checked(backend, prog, [a])
    assert np.frombuffer(out[0], np.uint32).tolist() == [collatz(int(n)) for n in a]


def test_error_precedence_is_the_same_everywhere(backend):
    """A division fault and a loop over its cap in one dispatch: `division` is reported."""
    prog = Program.wrapped([BufferDecl.read("a", 0, I), BufferDecl.output("o", 1, I)], 64, [
        Node.let_bind("n", Expr.i32(0)),
        Node.while_(v("n").lt(Expr.load("a", GX)), [Node.assign("n", v("n") + 1)], 10),
        Node.store("o", GX, 100 / Expr.load("a", GX))])
    a = np.arange(-5, 60, dtype=np.int32)
    with pytest.raises(ExecutionError) as ref_err:
        reference.run(prog, [a])
    with pytest.raises(DispatchFailed) as err:
        backend.dispatch(prog, [a])
    assert ref_err.value.kind == err.value.reason == "division"


# ---------------------------------------------------------------------------- weak literals
def test_weak_literals_take_their_contexts_type():
    p = Program.wrapped([BufferDecl.read("a", 0, I64), BufferDecl.output("o", 1, F16),
                         BufferDecl.output("u", 2, T.U8)], 64, [
        Node.let_bind("x", Expr.load("a", GX) + 1),              # i64
        Node.let_bind("k", 3),                                   # u32 (no context)
        Node.let_bind("neg", -2),                                # i32
        Node.let_bind("big", 2**40),                             # u64
        Node.let_bind("y", 1 << v("k")),                         # u32 from k
        Node.store("o", GX, 0.5),                                # f16 from the buffer
        Node.store("u", GX, 300),                                # u32 (u8 buffers store u32 values)
        Node.let_bind("z", Expr.select(v("x").gt(0), v("x"), -1))])
    assert validate(p) == []
    lits = [e for n in p.body for e in __import__("vyre.ir.node", fromlist=["x"]).walk_exprs([n])
            if type(e).__name__ == "Lit"]
    types = {(e.dtype, e.value) for e in lits}
    assert {(I64, 1), (U, 3), (I, -2), (U64, 2**40), (U, 1), (F16, 0.5), (U, 300), (I64, -1)} <= types
    assert not any(isinstance(e, WeakLit) for n in p.body for e in __import__("vyre.ir.node", fromlist=["x"]).walk_exprs([n]))


def test_weak_literals_that_do_not_fit_are_refused_with_a_fix():
    a = Expr.load("a", GX)
    with pytest.raises(VyreError, match="Fix:"):
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 1,
                        [Node.store("o", GX, a + (-1))])
    with pytest.raises(VyreError, match="Fix:"):
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 1,
                        [Node.store("o", GX, a * 1.5)])
    with pytest.raises(VyreError, match="Fix:"):
        Program.wrapped([BufferDecl.read("a", 0, I), BufferDecl.output("o", 1, I)], 1,
                        [Node.store("o", GX, a + 2**40)])


def test_operators_on_python_and_numpy_values():
    k = v("k")
    assert (1 << k).left == WeakLit(1) and (8 >> k).op is BinOp.SHR and (7 // k).op is BinOp.DIV
    assert (np.uint64(5) + k).left == Expr.u64(5)
    assert (np.float32(1.5) * k).left == Expr.f32(1.5)
    for bad in ("x", None, [1], object()):
        with pytest.raises(OperandError, match="Fix:"):
            k + bad
    with pytest.raises(OperandError, match="Fix:"):
        k ** 2
    with pytest.raises(TypeError, match="Fix:"):   # OperandError is a TypeError too
        k @ k


# ---------------------------------------------------------------------------- wire, validation
def test_wire_round_trips_every_new_kind_and_reads_version_1():
    p = X.sha256_bytes()
    assert wire.decode(wire.encode(p)) == p
    q = X.philox4x64()
    assert wire.decode(wire.encode(q, canonical=True)) == __import__("vyre.ir", fromlist=["x"]).canonicalize(q)
    old = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64,
                          [Node.store("o", GX, Expr.load("a", GX) + Expr.u32(1))])
    raw = bytearray(wire.encode(old))
    raw[4:6] = (1).to_bytes(2, "little")            # the same bytes as version 1 wrote them
    assert wire.decode(bytes(raw)) == old
    raw[4:6] = (3).to_bytes(2, "little")
    with pytest.raises(WireError, match="upgrade vyre"):
        wire.decode(bytes(raw))


def _codes(p):
    return {d.code for d in validate(p)}


def test_new_validation_codes():
    buf = [BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)]
    f = Function.define("f", [("x", U)], [], v("x"))
    assert "V032" in _codes(Program.wrapped(buf, 1, [Node.store("o", GX, Expr.call("g", 1))]))
    assert "V032" in _codes(Program.wrapped(buf, 1, [Node.store("o", GX, Expr.call("f", 1, 2))], [f]))
    rec_a = Function.define("ra", [("x", U)], [], Expr.call("rb", v("x")))
    rec_b = Function.define("rb", [("x", U)], [], Expr.call("ra", v("x")))
    assert "V033" in _codes(Program.wrapped(buf, 1, [Node.store("o", GX, Expr.call("ra", 1))], [rec_a, rec_b]))
    assert "V034" in _codes(Program.wrapped(buf, 1, [Node.break_()]))
    bad_fn = Function.define("h", [("x", U)], [Node.barrier()], v("x"))
    assert "V035" in _codes(Program.wrapped(buf, 1, [Node.store("o", GX, Expr.call("h", 1))], [bad_fn]))
    assert "V036" in _codes(Program.wrapped(buf, 1, [Node.while_(Expr.bool_(False), [], 0)]))
    assert "V037" in _codes(Program.wrapped(buf, 1, [Node.store("o", GX, 1), Node.indirect_dispatch("a", 0)]))
    assert "V007" in _codes(Program.wrapped(buf + [BufferDecl.local("l", 4, U)], 1,
                                            [Node.expr(Expr.atomic(AtomicOp.ADD, "l", 0, 1))]))
    assert "V025" in _codes(Program.wrapped(buf, 1, [Node.let_bind("__vy1_x", 1)]))
    barrier_in_while = Program.wrapped(buf, 1, [Node.while_(GX.lt(3), [Node.barrier()], 4)])
    assert "V006" in _codes(barrier_in_while)


def test_reference_oob_and_loop_cap_errors_are_execution_errors():
    prog = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 1, [
        Node.let_bind("n", 0), Node.while_(Expr.bool_(True), [Node.assign("n", v("n") + 1)], 3),
        Node.store("o", GX, v("n"))])
    with pytest.raises(ExecutionError) as err:
        reference.run(prog, [np.zeros(4, np.uint32)])
    assert err.value.kind == "loop_limit" and "Fix:" in str(err.value)
