"""vyre.lower.crmath.dsl and its printers: every operation of the language on every type it
accepts prints to host C (gcc) and to WGSL (wgpu on lavapipe) with the same results, which
for integer operations are also checked against numpy / Python integers (float64 operations
are checked against the hardware in test_crmath_soft.py); the module docstring's example
runs; type errors are caught when a function is built."""

from __future__ import annotations

import fractions
import shutil

import numpy as np
import pytest
from crmath_soft_cases import HostC, wgsl

from vyre.lower.crmath import dsl
from vyre.lower.crmath.dsl import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    U32,
    U64,
    clz,
    function,
    lookup,
    mulhi,
    pair,
    select,
    sqrt,
    table,
)

M32 = 0xFFFFFFFF
TBL = table("t_tbl", U32, lambda: [(k * 2654435761) & M32 for k in range(40)])
DTBL = table("t_dtbl", F64, lambda: [k / 7 for k in range(12)])
LK = lookup("t_lookup", lambda: [(k * 977 + 5, k * 3 + 1) for k in range(50)])


# Each case: (a function of two u32 words a, b returning u64 bits, numpy oracle of (a, b) or None)
@function(U64, a=U32, b=U32)
def t_u32(bk, a, b):
    s = bk.let(b & 31, "s")
    r = (a + b) ^ (a - b) * 3 ^ (a * b) ^ (a / (b | 1)) ^ (a & ~b) ^ (a | b) ^ (a << s) ^ (a >> s)
    r = r ^ mulhi(a, b) ^ clz(a) ^ (a / 7)
    bits = (a.lt(b).to(U32) | a.le(b).to(U32) << 1 | a.gt(b).to(U32) << 2 | a.ge(b).to(U32) << 3
            | a.eq(b).to(U32) << 4 | a.ne(b).to(U32) << 5)
    bk.ret(pair(U64, select(a.lt(b), a, b) ^ bits, r))


def o_u32(a, b):
    a64, b64 = a.astype(np.uint64), b.astype(np.uint64)
    m = np.uint64(M32)
    s = b64 & np.uint64(31)
    r = ((a64 + b64) & m) ^ (((a64 - b64) & m) * np.uint64(3) & m) ^ ((a64 * b64) & m) ^ (a64 // (b64 | np.uint64(1)))
    r ^= (a64 & ~b64 & m) ^ (a64 | b64) ^ ((a64 << s) & m) ^ (a64 >> s)
    r ^= ((a64 * b64) >> np.uint64(32)) ^ np.array([32 - int(v).bit_length() for v in a], np.uint64) ^ (a64 // np.uint64(7))
    bits = ((a < b).astype(np.uint64) | (a <= b).astype(np.uint64) << np.uint64(1) | (a > b).astype(np.uint64) << np.uint64(2)
            | (a >= b).astype(np.uint64) << np.uint64(3) | (a == b).astype(np.uint64) << np.uint64(4)
            | (a != b).astype(np.uint64) << np.uint64(5))
    return ((np.minimum(a64, b64) ^ bits) << np.uint64(32)) | r


@function(U64, a=U32, b=U32)
def t_i32(bk, a, b):
    x = bk.let((a >> 4).to(I32) - 0x4000000, "x")       # no overflow below
    y = bk.let((b >> 8).to(I32) - 0x400000, "y")
    r = (x + y) ^ (x - y) ^ (x / 3) ^ (x / -7) ^ -x ^ (x >> (b & 31)) ^ (x & y) ^ (x | ~y)
    bits = (x.lt(y).to(I32) | x.le(y).to(I32) << 1 | x.gt(y).to(I32) << 2 | x.ge(y).to(I32) << 3
            | x.eq(y).to(I32) << 4 | x.ne(y).to(I32) << 5)
    w = bk.let(x.to(I64), "w")
    bk.ret(pair(U64, (w >> 40).to(I32).to(U32) ^ bits.to(U32), (r ^ (x * 5)).to(U32)))


def o_i32(a, b):
    x = (a >> 4).astype(np.int64) - 0x4000000
    y = (b >> 8).astype(np.int64) - 0x400000
    r = (x + y) ^ (x - y) ^ np.trunc(x / 3).astype(np.int64) ^ np.trunc(x / -7).astype(np.int64) ^ -x
    r ^= (x >> (b & 31).astype(np.int64)) ^ (x & y) ^ (x | ~y) ^ (x * 5)
    bits = ((x < y) | (x <= y) << 1 | (x > y) << 2 | (x >= y) << 3 | (x == y) << 4 | (x != y) << 5).astype(np.int64)
    hi = ((x >> 40) ^ bits) & M32
    return (hi.astype(np.uint64) << np.uint64(32)) | (r & M32).astype(np.uint64)


@function(U64, a=U32, b=U32)
def t_u64(bk, a, b):
    x = bk.let(pair(U64, a, b), "x")
    y = bk.let(pair(U64, b ^ 0x5A5A5A5A, a * 3), "y")
    r = (x + y) ^ (x - y) ^ (x * y) ^ mulhi(x, y) ^ (x << (a & 63)) ^ (x >> (b & 63)) ^ (x & ~y) ^ (x | y)
    bits = (x.lt(y).to(U32) | x.le(y).to(U32) << 1 | x.gt(y).to(U32) << 2 | x.ge(y).to(U32) << 3
            | x.eq(y).to(U32) << 4 | x.ne(y).to(U32) << 5 | clz(x >> (a & 63)) << 8)
    bk.ret(r ^ bits.to(U64) ^ (x.to(U32).to(U64) << 7))


def o_u64(a, b):
    out = []
    for p, q in zip(a.tolist(), b.tolist()):
        M = (1 << 64) - 1
        x, y = (p << 32) | q, ((q ^ 0x5A5A5A5A) << 32) | ((p * 3) & M32)
        r = ((x + y) & M) ^ ((x - y) & M) ^ ((x * y) & M) ^ ((x * y) >> 64) ^ ((x << (p & 63)) & M) ^ (x >> (q & 63))
        r ^= (x & ~y & M) ^ (x | y)
        bits = (x < y) | (x <= y) << 1 | (x > y) << 2 | (x >= y) << 3 | (x == y) << 4 | (x != y) << 5
        bits |= (64 - (x >> (p & 63)).bit_length()) << 8
        out.append(r ^ bits ^ ((x & M32) << 7))
    return np.array(out, np.uint64)


@function(U64, a=U32, b=U32)
def t_i64(bk, a, b):
    x = bk.let(pair(I64, a, b), "x")
    y = bk.let(pair(I64, b, a), "y")
    r = (x + y) ^ (x - y) ^ (x >> (a & 63)) ^ (x << (b & 63)) ^ (x & ~y) ^ (x | y)
    r = r ^ select(x.eq(pair(I64, 0x80000000, 0)), y, -x)
    bits = (x.lt(y).to(U32) | x.le(y).to(U32) << 1 | x.gt(y).to(U32) << 2 | x.ge(y).to(U32) << 3
            | x.eq(y).to(U32) << 4 | x.ne(y).to(U32) << 5)
    bk.ret(r.to(U64) ^ pair(U64, x.to(I32).to(U32), bits))


def o_i64(a, b):
    out = []
    for p, q in zip(a.tolist(), b.tolist()):
        M = (1 << 64) - 1
        sx = lambda v: v - (1 << 64) if v >> 63 else v   # noqa: E731
        x, y = sx((p << 32) | q), sx((q << 32) | p)
        r = ((x + y) & M) ^ ((x - y) & M) ^ ((x >> (p & 63)) & M) ^ ((x << (q & 63)) & M) ^ (x & ~y & M) ^ ((x | y) & M)
        r ^= (y if x == -(1 << 63) else -x) & M
        bits = (x < y) | (x <= y) << 1 | (x > y) << 2 | (x >= y) << 3 | (x == y) << 4 | (x != y) << 5
        out.append(r ^ ((x & M32) << 32 | bits))
    return np.array(out, np.uint64)


def cn(v):
    """A float64's bits with every NaN as one pattern (the language leaves a NaN's bits open:
    x86 gives 0xFFF8..., CUDA 0x7FFF..., the software float64 0x7FF8...)."""
    return select(v.ne(v), dsl.u64(0x7FF8000000000000), v.bits())


@function(U64, a=U32, b=U32)
def t_f64(bk, a, b):
    x = bk.let(pair(F64, a, b), "x")
    y = bk.let(pair(F64, b, a ^ 0x80000000), "y")
    r = cn(x + y) ^ cn(x - y) ^ cn(x * y) ^ cn(x / y) ^ cn(sqrt(x)) ^ (-x).bits()
    bits = (x.lt(y).to(U32) | x.le(y).to(U32) << 1 | x.gt(y).to(U32) << 2 | x.ge(y).to(U32) << 3
            | x.eq(y).to(U32) << 4 | x.ne(y).to(U32) << 5)
    small = bk.let(select(x.lt(1e9) & x.gt(-1e9), x, y * 0.0), "small")   # in range of i32 (NaN: 0 * NaN)
    n = select(small.eq(small), small, dsl.f64(0.0)).to(I32)
    f = bk.let(x.to(F32), "f")
    conv = select(f.ne(f), dsl.u32(0x7FC00000), f.bits()) ^ n.to(U32) ^ b.to(F64).hi() ^ (a.to(I32)).to(F64).lo() ^ x.hi() ^ y.lo()
    bk.ret(r ^ pair(U64, bits, conv) ^ select(x.lt(y), x, y).bits() ^ (x.bits() >> 3).to(F64).bits())


@function(U64, a=U32, b=U32)
def t_f32(bk, a, b):
    x, y = a.bits(), b.bits()
    bits = (x.lt(y).to(U32) | x.le(y).to(U32) << 1 | x.gt(y).to(U32) << 2 | x.ge(y).to(U32) << 3
            | x.eq(y).to(U32) << 4 | x.ne(y).to(U32) << 5)
    bk.ret(pair(U64, (-x).bits() ^ select(x.lt(y), x, y).bits(), bits) ^ x.to(F64).bits())


@function((U32, F64), k=U32)
def t_two(bk, k):
    """several results"""
    with bk.if_(k.gt(5)):
        bk.ret(k * 2, DTBL[k & 7])
    bk.ret(k, dsl.f64(-1.5))


@function(U64, a=U32, b=U32)
def t_control(bk, a, b):
    v = bk.var(a, "v")
    with bk.if_(b.lt(0x80000000)):
        bk.set(v, v ^ TBL[b & 31])
    with bk.else_():
        bk.set(v, v + LK.get(b & 0xFFFF, 77))
    c = bk.choose((a & 1).eq(0), lambda: v * 3, lambda: v + 9, "c")
    k, d = bk.let(t_two(a & 7), "kd")
    r0, r1, r2 = bk.let(DTBL.row(a & 3, 3), "row")
    flag = bk.let((a.gt(b) & ~b.eq(0)) | a.eq(7), "flag")
    bk.ret(pair(U64, c ^ k ^ flag.to(U32) ^ flag.eq(b.gt(3)).to(U32), d.lo() ^ r0.hi() ^ r1.lo() ^ r2.hi()))


CASES = [(t_u32, o_u32), (t_i32, o_i32), (t_u64, o_u64), (t_i64, o_i64), (t_f64, None), (t_f32, None),
         (t_control, None)]


@pytest.fixture(scope="module")
def host():
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this machine")
    return HostC([fn for fn, _ in CASES])


def _operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    edges = np.array([0, 1, 2, 5, 7, 31, 32, 63, 64, 0x7FFFFFFF, 0x80000000, M32, 0x3FF00000, 0x7FF00000,
                      0x7F800000, 0x80800000, 0x00800000], np.uint64)
    a, b = np.meshgrid(edges, edges)
    ra = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    rb = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    rb[::4] = ra[::4]
    return np.concatenate([a.ravel(), ra]), np.concatenate([b.ravel(), rb])


@pytest.mark.parametrize(("fn", "oracle"), CASES, ids=lambda v: getattr(v, "name", "oracle"))
def test_every_operation_prints_the_same_in_c_and_wgsl(host, fn, oracle):
    a, b = _operands(4096)
    c = host(fn, a, b)
    w = wgsl(fn, a, b)
    assert np.array_equal(c, w), [(hex(int(x)), hex(int(y)), hex(int(p)), hex(int(q)))
                                  for x, y, p, q in zip(a[c != w][:4], b[c != w][:4], c[c != w][:4], w[c != w][:4])]
    if oracle is not None:
        assert np.array_equal(c, oracle(a, b))


def test_the_docstring_example_runs(host):
    """The module docstring's example, as written there, on both targets."""
    text = dsl.__doc__.split("How a function is written::")[1].split("Types:")[0]
    code = "\n".join(line[4:] for line in text.splitlines())
    ns: dict = {}
    exec(code, ns)
    fn = ns["vym_caller"]
    x = np.linspace(-4, 4, 257, dtype=np.float32).view(np.uint32).astype(np.uint64)
    c = HostC([fn])(fn, x)
    assert np.array_equal(c, wgsl(fn, x))
    xs = x.astype(np.uint32).view(np.float32).astype(np.float64)
    want = np.where(xs < 0, -(xs * xs + 1), (xs * xs + 1) * 0.5 ** (x.astype(np.uint32) & 3))
    assert np.array_equal(c.astype(np.uint32), want.astype(np.float32).view(np.uint32))


def test_type_errors_are_caught_when_building():
    x32, x64 = dsl.Val("ref", F32, data="x"), dsl.Val("ref", F64, data="y")
    u = dsl.Val("ref", U32, data="u")
    with pytest.raises(TypeError):
        _ = x64 + u                          # different types
    with pytest.raises(TypeError):
        _ = x32 * x32                        # no f32 arithmetic
    with pytest.raises(TypeError):
        _ = dsl.Val("ref", I32, data="i") / dsl.Val("ref", I32, data="j")   # i32 only by a literal
    with pytest.raises(ValueError):
        _ = u << 32                          # literal shift beyond the width
    with pytest.raises(ValueError):
        dsl.f32(0.1)                         # not an f32 value
    with pytest.raises(TypeError):
        bool(u.lt(1))                        # no Python truth value

    @function(F64, soft=True, a=F64)
    def t_bad_soft(bk, a):
        bk.ret(a + a)                        # a 64-bit operation in a soft function

    with pytest.raises(TypeError, match="soft"):
        _ = t_bad_soft.body

    @function(U32, a=U32)
    def t_no_return(bk, a):
        with bk.if_(a.eq(0)):
            bk.ret(a)

    with pytest.raises(TypeError, match="must end in a return"):
        _ = t_no_return.body


def test_bool_values_print_in_both_targets(host):
    assert BOOL.value == "bool" and t_control.name == "t_control"


@function(F64, a=F64, b=F64, c=F64)
def t_fma(b_, a, m, c):
    b_.ret(dsl.fma(a, m, c))


def test_fma_is_fused_in_c_and_unfused_in_wgsl(host):
    """The one op whose doubles differ by target (dsl.fma): C rounds a * b + c once, WGSL
    twice (vyd_mul_add), so products with a low part that the sum keeps tell them apart."""
    rng = np.random.default_rng(31)
    a = 1.0 + rng.integers(1, 1 << 27, 4096) * 2.0 ** -27        # 28 bits: a * b needs 55
    m = 1.0 + rng.integers(1, 1 << 27, 4096) * 2.0 ** -27
    c = -(a * m)                                                   # fused: the product's low part
    bits = [np.ascontiguousarray(v).view(np.uint64) for v in (a, m, c)]
    fused = np.array([float(fractions.Fraction(x) * fractions.Fraction(y) + fractions.Fraction(z))
                      for x, y, z in zip(a, m, c)])
    with np.errstate(all="ignore"):
        unfused = a * m + c
    assert np.count_nonzero(fused != unfused) > 2000
    assert np.array_equal(HostC([t_fma])(t_fma, *bits), fused.view(np.uint64))
    assert np.array_equal(wgsl(t_fma, *(v[:1024] for v in bits)), unfused[:1024].view(np.uint64))


@function(U32, y=F64)
def t_plain(b_, y):
    from vyre.lower.crmath.functions import plain_f32

    ok, r = plain_f32(b_, y)
    b_.ret(select(ok, r.bits(), dsl.u32(0xFFFFFFFF)))


def test_plain_f32_rounds_as_the_conversion_where_it_claims_to():
    """functions.plain_f32: on the doubles it accepts (normal f32 range or the overflow, low 29
    bits more than 40 units from half-way) its bits are the IEEE conversion's; it refuses the
    rest (sub-normal results, |y| >= 2^128, near ties) and NaN."""
    rng = np.random.default_rng(32)
    f = rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        d = f.astype(np.float64).view(np.uint64) + rng.integers(0, 1 << 29, f.size, dtype=np.uint64)
    edges = np.array([2.0 ** -126, 2.0 ** -126 * (1 - 2.0 ** -30), 2.0 ** 128, 2.0 ** 128 * (1 - 2.0 ** -30),
                      np.float64(np.finfo(np.float32).max), np.inf, np.nan, 0.0, -0.0, 1.0 + 2.0 ** -24,
                      1.0 + 2.0 ** -24 + 2.0 ** -47]).view(np.uint64)
    d = np.concatenate([d, edges, edges | np.uint64(1 << 63)])
    got = HostC([t_plain])(t_plain, d)
    y = d.view(np.float64)
    low = (d & np.uint64(0x1FFFFFFF)).astype(np.int64) - (1 << 28)
    with np.errstate(all="ignore"):
        ok = (np.abs(y) >= 2.0 ** -126) & (np.abs(y) < 2.0 ** 128) & (np.abs(low) > 40)
        want = y.astype(np.float32).view(np.uint32).astype(np.uint64)
    assert ok.sum() > 60000
    assert np.array_equal(got[ok], want[ok])
    assert np.all(got[~ok] == 0xFFFFFFFF)


def test_wgsl_prints_its_own_exp_family_in_place_of_the_c_familys():
    """One description of the exp family at two table sizes (`functions.exp_family`): the C
    family prints 1024 entries, WGSL the 128-entry substitutes (lavapipe compiles a table as a
    decision tree), each with the name and signature of the function it replaces; nothing else
    is substituted."""
    from vyre.ir import UnOp
    from vyre.lower.crmath import functions as F
    from vyre.lower.crmath import prelude, wgsl_prelude

    assert set(F.EXP_FAMILY) == {"vym_scale", "vym_exp_d", "vym_exp2_d", "vym_expm1_d", "vym_expm1_2d"}
    for f in F.EXP_FAMILY.values():
        sub = F.WGSL_SUBSTITUTES[id(f)]
        assert sub is not f and (sub.name, sub.params, sub.result) == (f.name, f.params, f.result)
    assert len(F.WGSL_SUBSTITUTES) == len(F.EXP_FAMILY)
    ops = {UnOp.EXP, UnOp.TANH, UnOp.COSH}
    c, w = prelude(ops), wgsl_prelude(ops)
    assert f"vym_exp_ta[{1 << F.LG_EXP}]" in c and f"vym_expm1_t[{1 << F.LG_EXP}]" in c
    assert "fn vym_exp_ta(" in w and "fn vym_expm1_t(" in w
    assert f"i < {1 << (F.LG_EXP_WGSL - 1)}u" in w and f"i < {1 << (F.LG_EXP - 1)}u" not in w
    items = dsl.closure(F.ENTRY.values(), substitutes=F.WGSL_SUBSTITUTES)
    assert not any(x is f for x in items for f in F.EXP_FAMILY.values())


def test_every_wgsl_function_and_table_is_printed_once_whatever_ops_meet():
    """Functions of the WGSL exp family reached from several ops are one family: each
    function and table is defined once (five families, one per substitute, gave exp + tanh
    two vym_exp_ta and naga refused the module), for every pair of correctly rounded ops and
    for all of them together; the C prelude likewise."""
    import itertools
    import re

    from vyre.lower.crmath import HELPER, prelude, wgsl_prelude

    ops = list(HELPER)

    def once(text: str, pattern: str) -> None:
        names = re.findall(pattern, text, re.M)
        dup = {n for n in names if names.count(n) > 1}
        assert not dup, dup

    for some in [*itertools.combinations(ops, 2), tuple(ops)]:
        once(wgsl_prelude(set(some)), r"^fn (\w+)\(")
    once(prelude(set(ops)), r"^(?:VY_FN|VYM_COLD) \w+ (\w+)\(")
