"""Elementwise meaning of every operator, on numpy arrays: the normative implementation of
docs/semantics.md's integer, bool and f32 rows.

Float rule: every operand and result of f32 arithmetic is canonicalised (NaN ->
0x7FC00000, subnormal -> signed zero); loads, stores, select and bit casts leave values
alone. f16 and bf16 values are their 16 bits (uint16 arrays): an operation widens its
operands exactly to f32, applies the f32 rule and rounds the result once. Integers are
u32/i32/u64/i64 arrays (narrow storage types widen on load). Functions return
``(values, error_mask)`` only where an operation can fail (signed division); the
interpreter turns a set error on a live lane into the dispatch's error.
"""

from __future__ import annotations

import numpy as np

from vyre.ir.types import TRANSCENDENTAL, AtomicOp, BinOp, DataType, UnOp

from . import crmath

U32, I32, F32, BOOL = np.uint32, np.int32, np.float32, np.bool_
NAN_BITS = np.uint32(0x7FC00000)
I32_MIN = -(2**31)


def canon(x: np.ndarray) -> np.ndarray:
    """Canonical f32: NaN -> 0x7FC00000, subnormal -> signed zero."""
    b = np.ascontiguousarray(x, dtype=F32).view(U32)
    exp = b & np.uint32(0x7F800000)
    nan = (exp == 0x7F800000) & ((b & np.uint32(0x007FFFFF)) != 0)
    out = np.where(nan, NAN_BITS, np.where(exp == 0, b & np.uint32(0x80000000), b))
    return out.astype(U32, copy=False).view(F32)


def _u(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(U32)


def _i(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.int32)


def _clz(x: np.ndarray) -> np.ndarray:
    _, e = np.frexp(x.astype(np.float64))
    return (32 - e).astype(U32)


def _popcount(x: np.ndarray) -> np.ndarray:
    x = x.astype(U32)
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * np.uint32(0x01010101)) >> 24).astype(U32)


def _reverse(x: np.ndarray) -> np.ndarray:
    x = x.astype(U32)
    x = ((x >> 1) & 0x55555555) | ((x & 0x55555555) << 1)
    x = ((x >> 2) & 0x33333333) | ((x & 0x33333333) << 2)
    x = ((x >> 4) & 0x0F0F0F0F) | ((x & 0x0F0F0F0F) << 4)
    x = ((x >> 8) & 0x00FF00FF) | ((x & 0x00FF00FF) << 8)
    return ((x >> 16) | (x << 16)).astype(U32)


def fmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """f32 MIN on canonical operands: NaN if either is NaN; min(-0, +0) = -0."""
    nan = np.isnan(a) | np.isnan(b)
    tie = np.where(np.signbit(a), a, b)
    r = np.where(a < b, a, np.where(b < a, b, tie))
    return np.where(nan, np.float32(np.nan), r).astype(F32)


def fmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    nan = np.isnan(a) | np.isnan(b)
    tie = np.where(np.signbit(a), b, a)
    r = np.where(a > b, a, np.where(b > a, b, tie))
    return np.where(nan, np.float32(np.nan), r).astype(F32)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correctly rounded f32 fma on canonical operands (result not yet canonicalised).

    a*b is exact in f64; the f64 sum s = p + c has an exact error term (TwoSum). Rounding s
    to f32 differs from rounding p + c exactly only when s lies on an f32 midpoint, where the
    error's sign breaks the tie.
    """
    p = a.astype(np.float64) * b.astype(np.float64)
    cc = c.astype(np.float64)
    s = p + cc
    bb = s - p
    err = (p - (s - bb)) + (cc - bb)
    r = s.astype(F32)
    finite = np.isfinite(s) & np.isfinite(r)
    toward = np.where(s > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
    nb = np.nextafter(r, toward.astype(F32))
    mid = finite & (s != r.astype(np.float64)) & \
        (s == (r.astype(np.float64) + nb.astype(np.float64)) * 0.5) & (err != 0)
    if mid.any():
        adj = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
        s = np.where(mid, adj, s)
        r = s.astype(F32)
    # inf*0 or inf-inf: f64 gives NaN just as f32 would.
    return r


def binop(op: BinOp, t: DataType, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Apply ``op`` to operands of type ``t``. Returns (result, signed-division-error-mask
    or None)."""
    with np.errstate(all="ignore"):
        if t is DataType.F32:
            return _fbin(op, canon(a), canon(b)), None
        if t.is_half:  # exact widening, the f32 rule, one rounding
            r = _fbin(op, widen(t, a), widen(t, b))
            return (r if r.dtype == np.bool_ else narrow(t, r)), None
        if t is DataType.BOOL:
            a, b = a.astype(BOOL), b.astype(BOOL)
            return {BinOp.EQ: a == b, BinOp.NE: a != b, BinOp.AND: a & b, BinOp.OR: a | b}[op], None
        if t.is_signed:
            return _ibin(op, a.astype(t.numpy), b, t.bits)
        return _ubin(op, a.astype(t.numpy), b, t.bits), None


def _unsigned(bits: int) -> type:
    return np.uint64 if bits == 64 else U32


def _signed(bits: int) -> type:
    return np.int64 if bits == 64 else np.int32


def _shift_amount(b: np.ndarray, bits: int) -> np.ndarray:
    ut = _unsigned(bits)
    raw = np.ascontiguousarray(b).view(np.uint64 if b.dtype.itemsize == 8 else U32)
    return (raw & (bits - 1)).astype(ut)


def umul_high(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """High half of the unsigned product of two ``bits``-wide operands."""
    if bits == 32:
        return ((a.astype(np.uint64) * b.astype(np.uint64)) >> np.uint64(32)).astype(U32)
    m = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a, b = a.astype(np.uint64), b.astype(np.uint64)
    al, ah, bl, bh = a & m, a >> s32, b & m, b >> s32
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> s32) + (lh & m) + (hl & m)
    return hh + (lh >> s32) + (hl >> s32) + (mid >> s32)


def _ubin(op: BinOp, a: np.ndarray, b: np.ndarray, bits: int = 32) -> np.ndarray:
    ut = _unsigned(bits)
    top = ut(np.iinfo(ut).max)
    if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
        s = _shift_amount(b, bits)
        if op is BinOp.SHL:
            return (a << s).astype(ut)
        if op is BinOp.SHR:
            return (a >> s).astype(ut)
        back = (ut(bits) - s) & ut(bits - 1)
        left = (a << s) | (a >> back)
        right = (a >> s) | (a << back)
        return np.where(s == 0, a, left if op is BinOp.ROTATE_LEFT else right).astype(ut)
    b = b.astype(ut)
    match op:
        case BinOp.ADD: return a + b
        case BinOp.SUB: return a - b
        case BinOp.MUL: return a * b
        case BinOp.DIV: return np.where(b == 0, top, a // np.where(b == 0, 1, b).astype(ut)).astype(ut)
        case BinOp.MOD: return np.where(b == 0, ut(0), a % np.where(b == 0, 1, b).astype(ut)).astype(ut)
        case BinOp.BITAND: return a & b
        case BinOp.BITOR: return a | b
        case BinOp.BITXOR: return a ^ b
        case BinOp.EQ: return a == b
        case BinOp.NE: return a != b
        case BinOp.LT: return a < b
        case BinOp.GT: return a > b
        case BinOp.LE: return a <= b
        case BinOp.GE: return a >= b
        case BinOp.MIN: return np.minimum(a, b)
        case BinOp.MAX: return np.maximum(a, b)
        case BinOp.ABS_DIFF: return np.where(a > b, a - b, b - a).astype(ut)
        case BinOp.SATURATING_ADD:
            r = (a + b).astype(ut)
            return np.where(r < a, top, r).astype(ut)
        case BinOp.SATURATING_SUB: return np.where(a > b, a - b, 0).astype(ut)
        case BinOp.SATURATING_MUL:
            return np.where(umul_high(a, b, bits) != 0, top, a * b).astype(ut)
        case BinOp.MUL_HIGH: return umul_high(a, b, bits)
    raise ValueError(f"{op} on u{bits}")


def _ibin(op: BinOp, a: np.ndarray, b: np.ndarray, bits: int = 32) -> tuple[np.ndarray, np.ndarray | None]:
    st, ut = _signed(bits), _unsigned(bits)
    lo, hi = np.iinfo(st).min, np.iinfo(st).max
    ua = np.ascontiguousarray(a).view(ut)
    if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
        s = _shift_amount(b, bits)
        if op is BinOp.SHR:
            return (a >> s.astype(st)).astype(st), None
        return _ubin(op, ua, s, bits).view(st), None
    b = b.astype(st)
    ub = np.ascontiguousarray(b).view(ut)
    if op in (BinOp.DIV, BinOp.MOD):
        bad = (b == 0) | ((a == lo) & (b == -1))
        bb = np.where(bad, 1, b).astype(st)
        q = a // bb                                      # floor; C truncates toward zero
        q = np.where(((a % bb) != 0) & ((a < 0) != (bb < 0)), q + 1, q).astype(st)
        r = q if op is BinOp.DIV else (a - q * bb).astype(st)
        return np.where(bad, 0, r).astype(st), bad
    if op in (BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.BITAND, BinOp.BITOR, BinOp.BITXOR):
        return _ubin(op, ua, ub, bits).view(st), None
    match op:
        case BinOp.EQ: r = a == b
        case BinOp.NE: r = a != b
        case BinOp.LT: r = a < b
        case BinOp.GT: r = a > b
        case BinOp.LE: r = a <= b
        case BinOp.GE: r = a >= b
        case BinOp.MIN: r = np.minimum(a, b)
        case BinOp.MAX: r = np.maximum(a, b)
        case BinOp.ABS_DIFF: r = np.where(a > b, ua - ub, ub - ua).astype(ut).view(st)
        case BinOp.SATURATING_ADD | BinOp.SATURATING_SUB:
            w = (ua + ub if op is BinOp.SATURATING_ADD else ua - ub).astype(ut).view(st)
            bneg = (b < 0) if op is BinOp.SATURATING_ADD else (b >= 0)
            over = ((a < 0) == bneg) & ((w < 0) != (a < 0))   # operands agree, result flips
            r = np.where(over, np.where(a < 0, st(lo), st(hi)), w).astype(st)
        case BinOp.SATURATING_MUL | BinOp.MUL_HIGH:
            h = smul_high(a, b, bits)
            if op is BinOp.MUL_HIGH:
                r = h
            else:
                low = (ua * ub).astype(ut).view(st)
                fits = h == np.where(low < 0, st(-1), st(0))
                r = np.where(fits, low, np.where((a < 0) != (b < 0), st(lo), st(hi))).astype(st)
        case _: raise ValueError(f"{op} on i{bits}")
    return r, None


def smul_high(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """High half of the signed product (two's complement) of two ``bits``-wide operands."""
    st, ut = _signed(bits), _unsigned(bits)
    if bits == 32:
        return ((a.astype(np.int64) * b.astype(np.int64)) >> 32).astype(np.int32)
    ua, ub = np.ascontiguousarray(a).view(ut), np.ascontiguousarray(b).view(ut)
    h = umul_high(ua, ub, bits)
    h = h - np.where(a < 0, ub, ut(0)) - np.where(b < 0, ua, ut(0))
    return h.astype(ut).view(st)


def _fbin(op: BinOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    match op:
        case BinOp.ADD: return canon(a + b)
        case BinOp.SUB: return canon(a - b)
        case BinOp.MUL: return canon(a * b)
        case BinOp.DIV: return canon(a / b)
        case BinOp.MOD: return canon(np.fmod(a, b))
        case BinOp.MIN: return canon(fmin(a, b))
        case BinOp.MAX: return canon(fmax(a, b))
        case BinOp.ABS_DIFF: return canon(np.abs(canon(a - b)))
        case BinOp.HYPOT: return canon(crmath.hypot(a, b))   # correctly rounded (S13)
        case BinOp.POW: return canon(crmath.pow_(a, b))
        case BinOp.ATAN2: return canon(crmath.atan2(a, b))
        case BinOp.EQ: return a == b
        case BinOp.NE: return a != b
        case BinOp.LT: return a < b
        case BinOp.GT: return a > b
        case BinOp.LE: return a <= b
        case BinOp.GE: return a >= b
    raise ValueError(f"{op} on f32")


def unop(op: UnOp, t: DataType, a: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if t is DataType.BOOL:
            return ~a.astype(BOOL)
        if t is DataType.F32:
            return _fun(op, canon(a))
        if t.is_half:
            r = _fun(op, widen(t, a))
            return r if r.dtype == np.bool_ else narrow(t, r)
        bits = t.bits
        ut = _unsigned(bits)
        u = np.ascontiguousarray(a.astype(t.numpy)).view(ut)
        match op:
            case UnOp.NEGATE: r = (ut(0) - u).astype(ut)
            case UnOp.BITNOT: r = ~u
            case UnOp.POPCOUNT: r = _split(u, bits, lambda lo, hi: _popcount(lo) + _popcount(hi), _popcount)
            case UnOp.CLZ: r = _split(u, bits, lambda lo, hi: np.where(hi == 0, 32 + _clz(lo), _clz(hi)), _clz)
            case UnOp.CTZ:
                r = _split(u, bits, lambda lo, hi: np.where(lo == 0, 32 + _ctz(hi), _ctz(lo)), _ctz)
            case UnOp.REVERSE_BITS:
                r = _split(u, bits, lambda lo, hi: (_reverse(lo).astype(np.uint64) << np.uint64(32))
                           | _reverse(hi).astype(np.uint64), _reverse)
            case UnOp.BYTE_SWAP: r = u.byteswap()
            case UnOp.ABS:
                r = u if not t.is_signed else np.where(a.astype(t.numpy) < 0, ut(0) - u, u).astype(ut)
            case UnOp.SIGN:
                if not t.is_signed:
                    r = (u != 0).astype(ut)
                else:
                    r = np.ascontiguousarray(np.sign(a.astype(t.numpy)).astype(t.numpy)).view(ut)
            case _: raise ValueError(f"{op} on {t}")
        return np.ascontiguousarray(r.astype(ut)).view(t.numpy)


def _split(u: np.ndarray, bits: int, wide, narrow_fn) -> np.ndarray:
    """Apply a 32-bit bit-counting function to a 32-bit operand, or combine its results on
    the two halves of a 64-bit one (``wide(lo, hi)``)."""
    if bits == 32:
        return narrow_fn(u)
    lo = (u & np.uint64(0xFFFFFFFF)).astype(U32)
    hi = (u >> np.uint64(32)).astype(U32)
    return np.asarray(wide(lo, hi)).astype(np.uint64)


def _ctz(x: np.ndarray) -> np.ndarray:
    x = x.astype(U32)
    return np.where(x == 0, np.uint32(32), _clz(x & (np.uint32(0) - x)) ^ np.uint32(31)).astype(U32)


def _fun(op: UnOp, a: np.ndarray) -> np.ndarray:
    match op:
        case UnOp.NEGATE: return canon(-a)
        case UnOp.ABS: return canon(np.abs(a))
        case UnOp.SQRT: return canon(np.sqrt(a))
        case UnOp.FLOOR: return canon(np.floor(a))
        case UnOp.CEIL: return canon(np.ceil(a))
        case UnOp.TRUNC: return canon(np.trunc(a))
        case UnOp.ROUND:
            t = np.trunc(a)
            r = np.where(np.abs(a - t) >= np.float32(0.5), t + np.sign(a), t).astype(F32)
            return canon(r)
        case UnOp.SIGN:
            return canon(np.where(a > 0, np.float32(1), np.where(a < 0, np.float32(-1), a)).astype(F32))
        case UnOp.IS_NAN: return np.isnan(a)
        case UnOp.IS_INF: return np.isinf(a)
        case UnOp.IS_FINITE: return np.isfinite(a)
        case UnOp.RECIPROCAL: return canon(np.float32(1) / a)
    if op in TRANSCENDENTAL:   # correctly rounded, then flushed (S13)
        return crmath.evaluate(op, a)
    raise ValueError(f"{op} on f32")


# ---- 16-bit floats: exact widening, one rounding ------------------------------------------
F16_NAN = np.uint16(0x7E00)
BF16_NAN = np.uint16(0x7FC0)


def widen(t: DataType, bits: np.ndarray) -> np.ndarray:
    """The canonical f32 value of f16/bf16 bits (exact; NaN canonical; a bf16 subnormal,
    an f32 subnormal, flushes as every f32 operand does)."""
    b = np.ascontiguousarray(bits).astype(np.uint16)
    if t is DataType.F16:
        return canon(b.view(np.float16).astype(F32))
    return canon((b.astype(U32) << np.uint32(16)).view(F32))


def narrow(t: DataType, x: np.ndarray) -> np.ndarray:
    """Canonical f32 values rounded once, to nearest even, to f16/bf16 bits (NaN canonical;
    overflow to infinity; f16 keeps subnormal results, bf16 results are never subnormal)."""
    x = canon(np.asarray(x, dtype=F32))
    nan = np.isnan(x)
    if t is DataType.F16:
        with np.errstate(all="ignore"):   # overflow to infinity is the rule
            r = x.astype(np.float16).view(np.uint16)
        return np.where(nan, F16_NAN, r).astype(np.uint16)
    b = x.view(U32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint16)
    return np.where(nan, BF16_NAN, r).astype(np.uint16)


def int_to_bf16(a: np.ndarray, signed: bool) -> np.ndarray:
    """Integers rounded once, to nearest even, to bf16 bits (8 significant bits)."""
    a = np.asarray(a)
    wide = a.astype(np.int64 if signed else np.uint64)
    neg = wide < 0 if signed else np.zeros(wide.shape, dtype=bool)
    mag = np.where(neg, np.uint64(0) - wide.view(np.uint64) if signed else 0,
                   wide.view(np.uint64) if signed else wide).astype(np.uint64)
    n = np.where(mag == 0, 0, _bit_length(mag)).astype(np.int64)
    shift = np.maximum(n - 8, 0).astype(np.uint64)
    q = mag >> shift
    rem = mag - (q << shift)
    half = np.where(shift > 0, np.uint64(1) << np.maximum(shift, np.uint64(1)) - np.uint64(1), np.uint64(0))
    up = (shift > 0) & ((rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1)))
    q = q + up.astype(np.uint64)
    value = np.ldexp(q.astype(np.float64), shift.astype(np.int64))   # exact: q has <= 9 bits
    bits = (value.astype(F32).view(U32) >> np.uint32(16)).astype(np.uint16)
    return np.where(neg, bits | np.uint16(0x8000), bits).astype(np.uint16)


def _bit_length(x: np.ndarray) -> np.ndarray:
    hi = (x >> np.uint64(32)).astype(U32)
    lo = (x & np.uint64(0xFFFFFFFF)).astype(U32)
    return np.where(hi != 0, 64 - _clz(hi).astype(np.int64), 32 - _clz(lo).astype(np.int64))


def _float_to_int(dst: DataType, x: np.ndarray) -> np.ndarray:
    """Canonical f32 values to an integer type: truncate toward zero, saturate, NaN -> 0."""
    t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=1e300, neginf=-1e300))
    info = np.iinfo(dst.numpy)
    if dst.bits == 64:  # 2**64 and 2**63 are not below the limits as float64 can say
        over = t >= float(info.max) + 1.0
        under = t < float(info.min)
        safe = np.where(over | under, 0, t)
        r = safe.astype(dst.numpy)
        return np.where(over, info.max, np.where(under, info.min, r)).astype(dst.numpy)
    return np.clip(t, info.min, info.max).astype(dst.numpy)


_ONE = {DataType.F16: 0x3C00, DataType.BF16: 0x3F80}


def cast(dst: DataType, src: DataType, a: np.ndarray) -> np.ndarray:
    """Value conversion (see `Expr.cast` and docs/semantics.md, "casts")."""
    if dst is src:
        return a
    with np.errstate(all="ignore"):
        if src.is_float:
            x = canon(a) if src is DataType.F32 else widen(src, a)
            if dst is DataType.BOOL:
                return x != 0
            if dst is DataType.F32:
                return x
            if dst.is_half:
                return narrow(dst, x)
            return _float_to_int(dst, x)
        if dst is DataType.BOOL:
            return a != 0
        if src is DataType.BOOL:
            if dst.is_half:
                return np.where(a.astype(BOOL), np.uint16(_ONE[dst]), np.uint16(0)).astype(np.uint16)
            return a.astype(dst.numpy)
        # from an integer
        if dst is DataType.F32:
            return a.astype(F32)          # correctly rounded (round to nearest even)
        if dst is DataType.F16:
            return narrow(dst, a.astype(F32))   # exact: f16 overflows before f32 rounds
        if dst is DataType.BF16:
            return int_to_bf16(a, src.is_signed)
        return a.astype(dst.numpy)        # integers: modulo 2**bits, sign-extending


def bitcast(dst: DataType, a: np.ndarray, src: DataType | None = None) -> np.ndarray:
    """Reinterpret bits; 16-bit floats to u32 zero-extend, u32 to a 16-bit float keeps the
    low 16 bits."""
    a = np.ascontiguousarray(a)
    if a.dtype.itemsize == dst.numpy.itemsize:
        return a.view(dst.numpy)
    if dst.is_half:
        return (a.view(U32) & np.uint32(0xFFFF)).astype(np.uint16)
    return a.astype(dst.numpy)


def atomic_combine(op: AtomicOp, t: DataType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The associative combine of an atomic read-modify-write (not EXCHANGE/CAS)."""
    match op:
        case AtomicOp.ADD:
            ut = _unsigned(t.bits)
            return (np.ascontiguousarray(a).view(ut) + np.ascontiguousarray(b).view(ut)).view(t.numpy)
        case AtomicOp.OR: return a | b
        case AtomicOp.AND: return a & b
        case AtomicOp.XOR: return a ^ b
        case AtomicOp.MIN: return np.minimum(a, b)
        case AtomicOp.MAX: return np.maximum(a, b)
    raise ValueError(op)


# ---- float atomics (S36): exact, order-independent accumulation --------------------------
# A canonical finite f32 is m * 2**(s - 149) with an integer m < 2**24 and 0 <= s <= 253: as
# an integer in units of 2**-149 it is m << s. Sums of such integers are kept in radix-2**16
# digits held in int64 (each term adds at most 2**39 to one digit, so a batch of up to 2**23
# terms cannot overflow before the digits are carried).
_DIGITS = 22                   # 2**352 > 2**32 terms of the largest value (2**277)
_BATCH = 1 << 23
# the target formats: (significand bits, the lowest kept bit in units of 2**-149, flushes)
_FORMAT = {DataType.F32: (24, 0, True), DataType.F16: (11, 125, False), DataType.BF16: (8, 16, True)}


def f32_bits_of(t: DataType, bits: np.ndarray) -> np.ndarray:
    """The f32 bits of the exact value of ``t`` bits (f16 widens exactly, keeping its
    subnormals; bf16 is the upper half of an f32)."""
    if t is DataType.F32:
        return np.ascontiguousarray(bits).view(U32)
    if t is DataType.F16:
        return np.ascontiguousarray(bits).astype(np.uint16).view(np.float16).astype(F32).view(U32)
    return np.ascontiguousarray(bits).astype(U32) << np.uint32(16)


def _carry(acc: np.ndarray) -> None:
    """Carry every digit into [0, 2**16); the signed rest stays in the top digit."""
    for k in range(acc.shape[1] - 1):
        acc[:, k + 1] += acc[:, k] >> 16
        acc[:, k] &= 0xFFFF


def _exact_sums(group: np.ndarray, bits: np.ndarray, groups: int) -> tuple[np.ndarray, ...]:
    """Per group: (negative, carried digits of |sum|, any NaN, any +inf, any -inf) of the
    canonical f32 ``bits`` (subnormals are zeros, S9)."""
    e = ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
    frac = (bits & np.uint32(0x7FFFFF)).astype(np.int64)
    neg = (bits >> np.uint32(31)).astype(bool)
    special = e == 255
    nan, inf = np.zeros(groups, bool), special & (frac == 0)
    nan[group[special & (frac != 0)]] = True
    pinf, ninf = np.zeros(groups, bool), np.zeros(groups, bool)
    pinf[group[inf & ~neg]] = True
    ninf[group[inf & neg]] = True
    live = (e > 0) & ~special
    g, s, m = group[live], e[live] - 1, frac[live] | (1 << 23)
    term = np.where(neg[live], -1, 1) * (m << (s & 15))
    acc = np.zeros((groups, _DIGITS), np.int64)
    flat = acc.reshape(-1)
    cell = g * _DIGITS + (s >> 4)
    for lo in range(0, term.size, _BATCH):
        np.add.at(flat, cell[lo:lo + _BATCH], term[lo:lo + _BATCH])
        _carry(acc)
    negative = acc[:, -1] < 0
    acc[negative] = -acc[negative]
    _carry(acc)
    return negative, acc, nan, pinf, ninf


def _round_digits(acc: np.ndarray, negative: np.ndarray, t: DataType) -> np.ndarray:
    """The bits of ``t`` nearest (ties to even, gradual underflow, then S9's flush where
    ``t`` flushes) to each row of non-negative carried digits, in units of 2**-149."""
    p, lowest, flushes = _FORMAT[t]
    rows = np.arange(acc.shape[0])
    nz = acc != 0
    top = np.where(nz.any(axis=1), acc.shape[1] - 1 - np.argmax(nz[:, ::-1], axis=1), -1)
    _, length = np.frexp(acc[rows, np.maximum(top, 0)].astype(np.float64))   # exact below 2**53
    P = 16 * np.maximum(top, 0) + np.maximum(length.astype(np.int64) - 1, 0)  # the leading one
    L = np.maximum(P - (p - 1), lowest)                 # the kept lsb
    below = np.maximum(L - 1, 0)                        # the round bit's position (L >= 1)
    q0, r0 = below >> 4, below & 15
    pad = np.concatenate([acc, np.zeros((acc.shape[0], 3), np.int64)], axis=1)
    window = (pad[rows, q0] | (pad[rows, q0 + 1] << 16) | (pad[rows, q0 + 2] << 32)) >> r0
    ones = np.cumsum(nz, axis=1)                        # non-zero digits at or below each
    sticky = np.where(q0 > 0, ones[rows, np.maximum(q0 - 1, 0)] > 0, False) | \
        ((acc[rows, q0] & ((np.int64(1) << r0) - 1)) != 0)
    exact = L == 0                                      # f32 subnormal range: nothing is lost
    mant = np.where(exact, window, window >> 1)
    half = np.where(exact, 0, window & 1).astype(bool)
    mant = mant + (half & (sticky | ((mant & 1) == 1)))
    value = np.ldexp(mant.astype(np.float64), L - 149)
    value = np.where(top < 0, 0.0, value)
    with np.errstate(over="ignore"):
        if t is DataType.F16:
            out = value.astype(np.float16).view(np.uint16).astype(U32)
        else:
            f = value.astype(F32)
            if flushes:
                f = np.where(np.abs(f) < np.float32(2.0**-126), np.float32(0), f)
            out = f.view(U32) >> np.uint32(16 if t is DataType.BF16 else 0)
    sign = np.uint32(1 << (t.bits - 1))
    return np.where(negative & (top >= 0), out | sign, out).astype(U32)


def _reduce_minmax(op: AtomicOp, group: np.ndarray, bits: np.ndarray, groups: int) -> np.ndarray:
    """S10 MIN/MAX of each group of canonical f32 ``bits``: NaN if any is NaN, -0 below +0."""
    x = bits.view(F32).astype(np.float64)
    nan = np.zeros(groups, bool)
    nan[group[np.isnan(x)]] = True
    fill = np.inf if op is AtomicOp.MIN else -np.inf
    best = np.full(groups, fill)
    (np.minimum if op is AtomicOp.MIN else np.maximum).at(best, group, np.where(np.isnan(x), fill, x))
    zero = (x == 0) & ~np.isnan(x)
    negz = np.zeros(groups, bool)
    posz = np.zeros(groups, bool)
    negz[group[zero & np.signbit(x)]] = True
    posz[group[zero & ~np.signbit(x)]] = True
    signed = negz if op is AtomicOp.MIN else ~posz           # MIN prefers -0, MAX +0
    out = np.where(best == 0, np.where(signed, -0.0, 0.0), best).astype(F32).view(U32)
    return np.where(nan, NAN_BITS, out).astype(U32)


def float_accumulate(op: AtomicOp, t: DataType, initial: np.ndarray, slots: np.ndarray,
                     values: np.ndarray) -> np.ndarray:
    """S36: the storage bits of float buffer ``initial`` (type ``t``) after the in-bounds
    float atomics ``op`` of a dispatch added ``values`` (bits of ``t``) at ``slots``.
    Every slot with a contribution becomes, for ADD, the S34 sum of its initial value and
    its contributions; for MIN/MAX, their S10 minimum/maximum (canonical). Others keep their
    bits."""
    out = np.array(initial, copy=True)
    if slots.size == 0:
        return out
    touched, group = np.unique(slots, return_inverse=True)
    n = touched.size
    terms = np.concatenate([f32_bits_of(t, values), f32_bits_of(t, initial[touched])])
    group = np.concatenate([group.reshape(-1), np.arange(n)])
    terms = canon(terms.view(F32)).view(U32)   # S9 (f16 values are f32 normals: kept)
    if op is AtomicOp.ADD:
        negative, acc, nan, pinf, ninf = _exact_sums(group, terms, n)
        res = _round_digits(acc, negative, t)
        inf_bits = np.uint32(_INF_OF[t])
        sign = np.uint32(1 << (t.bits - 1))
        res = np.where(pinf, inf_bits, res)
        res = np.where(ninf, inf_bits | sign, res)
        res = np.where(nan | (pinf & ninf), np.uint32(_NAN_OF[t]), res)
    elif op in (AtomicOp.MIN, AtomicOp.MAX):
        res = _reduce_minmax(op, group, terms, n)
        if t is not DataType.F32:
            res = narrow(t, res.view(F32)).astype(U32)   # exact: the result is one of the values
    else:
        raise ValueError(op)
    out[touched] = res.astype(out.dtype)
    return out


_NAN_OF = {DataType.F32: 0x7FC00000, DataType.F16: 0x7E00, DataType.BF16: 0x7FC0}
_INF_OF = {DataType.F32: 0x7F800000, DataType.F16: 0x7C00, DataType.BF16: 0x7F80}
