"""Elementwise meaning of every operator, on numpy arrays: the normative implementation of
docs/semantics.md's integer, bool and f32 rows.

Float rule: every operand and result of float arithmetic is canonicalised (NaN ->
0x7FC00000, subnormal -> signed zero); loads, stores, select and bit casts leave values
alone. Functions return ``(values, error_mask)`` only where an operation can fail (i32
division); the interpreter turns a set error on a live lane into an ExecutionError.
"""

from __future__ import annotations

import numpy as np

from vyre.ir.types import AtomicOp, BinOp, DataType, UnOp

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
    """Apply ``op`` to operands of type ``t``. Returns (result, i32-error-mask-or-None)."""
    with np.errstate(all="ignore"):
        if t is DataType.F32:
            return _fbin(op, canon(a), canon(b)), None
        if t is DataType.BOOL:
            a, b = a.astype(BOOL), b.astype(BOOL)
            return {BinOp.EQ: a == b, BinOp.NE: a != b, BinOp.AND: a & b, BinOp.OR: a | b}[op], None
        if t is DataType.U32:
            return _ubin(op, a.astype(U32), b), None
        return _ibin(op, a.astype(np.int32), b)


def _shift_amount(b: np.ndarray) -> np.ndarray:
    return (_u(b.astype(b.dtype)) & np.uint32(31)).astype(U32)


def _ubin(op: BinOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
        s = _shift_amount(b)
        if op is BinOp.SHL:
            return a << s
        if op is BinOp.SHR:
            return a >> s
        left = (a << s) | (a >> ((np.uint32(32) - s) & np.uint32(31)))
        right = (a >> s) | (a << ((np.uint32(32) - s) & np.uint32(31)))
        return np.where(s == 0, a, left if op is BinOp.ROTATE_LEFT else right).astype(U32)
    b = b.astype(U32)
    match op:
        case BinOp.ADD: return a + b
        case BinOp.SUB: return a - b
        case BinOp.MUL: return a * b
        case BinOp.DIV: return np.where(b == 0, np.uint32(0xFFFFFFFF), a // np.where(b == 0, 1, b).astype(U32)).astype(U32)
        case BinOp.MOD: return np.where(b == 0, np.uint32(0), a % np.where(b == 0, 1, b).astype(U32)).astype(U32)
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
        case BinOp.ABS_DIFF: return np.where(a > b, a - b, b - a).astype(U32)
        case BinOp.SATURATING_ADD: return np.minimum(a.astype(np.uint64) + b, 0xFFFFFFFF).astype(U32)
        case BinOp.SATURATING_SUB: return np.where(a > b, a - b, 0).astype(U32)
        case BinOp.SATURATING_MUL: return np.minimum(a.astype(np.uint64) * b.astype(np.uint64), 0xFFFFFFFF).astype(U32)
        case BinOp.MUL_HIGH: return ((a.astype(np.uint64) * b.astype(np.uint64)) >> np.uint64(32)).astype(U32)
    raise ValueError(f"{op} on u32")


def _ibin(op: BinOp, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
        s = _shift_amount(b)
        if op is BinOp.SHR:
            return (a >> s.astype(np.int32)).astype(np.int32), None
        return _ubin(op, _u(a), s).view(np.int32), None
    b = b.astype(np.int32)
    if op in (BinOp.DIV, BinOp.MOD):
        bad = (b == 0) | ((a == I32_MIN) & (b == -1))
        a64 = a.astype(np.int64)
        b64 = np.where(bad, 1, b).astype(np.int64)
        q = np.abs(a64) // np.abs(b64) * np.sign(a64) * np.sign(b64)
        r = q if op is BinOp.DIV else a64 - q * b64
        return np.where(bad, 0, r).astype(np.int32), bad
    if op in (BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.BITAND, BinOp.BITOR, BinOp.BITXOR):
        return _ubin(op, _u(a), _u(b)).view(np.int32), None
    match op:
        case BinOp.EQ: r = a == b
        case BinOp.NE: r = a != b
        case BinOp.LT: r = a < b
        case BinOp.GT: r = a > b
        case BinOp.LE: r = a <= b
        case BinOp.GE: r = a >= b
        case BinOp.MIN: r = np.minimum(a, b)
        case BinOp.MAX: r = np.maximum(a, b)
        case BinOp.ABS_DIFF:
            r = (np.abs(a.astype(np.int64) - b) & 0xFFFFFFFF).astype(U32).view(np.int32)
        case BinOp.SATURATING_ADD: r = np.clip(a.astype(np.int64) + b, I32_MIN, 2**31 - 1).astype(np.int32)
        case BinOp.SATURATING_SUB: r = np.clip(a.astype(np.int64) - b, I32_MIN, 2**31 - 1).astype(np.int32)
        case BinOp.SATURATING_MUL: r = np.clip(a.astype(np.int64) * b, I32_MIN, 2**31 - 1).astype(np.int32)
        case BinOp.MUL_HIGH: r = ((a.astype(np.int64) * b) >> 32).astype(np.int32)
        case _: raise ValueError(f"{op} on i32")
    return r, None


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
        case BinOp.EQ: return a == b
        case BinOp.NE: return a != b
        case BinOp.LT: return a < b
        case BinOp.GT: return a > b
        case BinOp.LE: return a <= b
        case BinOp.GE: return a >= b
    raise ValueError(f"{op} on f32")


_TRANSCENDENTAL = {UnOp.EXP: np.exp, UnOp.LOG: np.log, UnOp.EXP2: np.exp2, UnOp.LOG2: np.log2,
                   UnOp.SIN: np.sin, UnOp.COS: np.cos, UnOp.TAN: np.tan, UnOp.TANH: np.tanh}


def unop(op: UnOp, t: DataType, a: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if t is DataType.BOOL:
            return ~a.astype(BOOL)
        if t is DataType.F32:
            return _fun(op, canon(a))
        u = _u(a.astype(t.numpy))
        match op:
            case UnOp.NEGATE: r = (np.uint32(0) - u).astype(U32)
            case UnOp.BITNOT: r = ~u
            case UnOp.POPCOUNT: r = _popcount(u)
            case UnOp.CLZ: r = _clz(u)
            case UnOp.CTZ: r = np.where(u == 0, np.uint32(32), _clz(u & (np.uint32(0) - u)) ^ np.uint32(31)).astype(U32)
            case UnOp.REVERSE_BITS: r = _reverse(u)
            case UnOp.ABS:
                r = u if t is DataType.U32 else _u(np.abs(a.astype(np.int32)))
            case UnOp.SIGN:
                if t is DataType.U32:
                    r = (u != 0).astype(U32)
                else:
                    r = _u(np.sign(a.astype(np.int32)).astype(np.int32))
            case _: raise ValueError(f"{op} on {t}")
        return r.view(t.numpy)


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
    fn = _TRANSCENDENTAL.get(op)
    if fn is None:
        raise ValueError(f"{op} on f32")
    return canon(fn(a.astype(np.float64)).astype(F32))


def cast(dst: DataType, src: DataType, a: np.ndarray) -> np.ndarray:
    """Value conversion (see `Expr.cast`)."""
    if dst is src:
        return a
    with np.errstate(all="ignore"):
        if dst is DataType.BOOL:
            return (canon(a) != 0) if src is DataType.F32 else (a != 0)
        if src is DataType.BOOL:
            return a.astype(dst.numpy)
        if dst is DataType.F32:
            return a.astype(F32)
        if src is DataType.F32:
            x = canon(a).astype(np.float64)
            t = np.trunc(np.nan_to_num(x, nan=0.0, posinf=1e300, neginf=-1e300))
            if dst is DataType.U32:
                return np.clip(t, 0, 4294967295).astype(U32)
            return np.clip(t, I32_MIN, 2**31 - 1).astype(np.int32)
        return np.ascontiguousarray(a).view(dst.numpy)  # u32 <-> i32: same bits


def bitcast(dst: DataType, a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(dst.numpy)


def atomic_combine(op: AtomicOp, t: DataType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The associative combine of an atomic read-modify-write (not EXCHANGE/CAS)."""
    match op:
        case AtomicOp.ADD: return (_u(a) + _u(b)).view(t.numpy)
        case AtomicOp.OR: return a | b
        case AtomicOp.AND: return a & b
        case AtomicOp.XOR: return a ^ b
        case AtomicOp.MIN: return np.minimum(a, b)
        case AtomicOp.MAX: return np.maximum(a, b)
    raise ValueError(op)
