"""Independent models of the primitives (plain Python and numpy, never vyre): what each
vyre.lib call must return, bit for bit."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

# (precision, emin, flushes subnormal results (S9), NaN bits, bits)
FORMATS = {"f32": (24, -126, True, 0x7FC00000, 32), "f16": (11, -14, False, 0x7E00, 16),
           "bf16": (8, -126, True, 0x7FC0, 16)}


def to_float(bits: int, fmt: str) -> float:
    """The value of float bits (subnormals kept: canonicalise first)."""
    if fmt == "f32":
        return float(np.array([bits], np.uint32).view(np.float32)[0])
    if fmt == "f16":
        return float(np.array([bits], np.uint16).view(np.float16)[0])
    return float(np.array([bits << 16], np.uint32).view(np.float32)[0])


def canonical(bits: int, fmt: str) -> int:
    """S9/S27/S28 on an operand: f32 and bf16 subnormals become signed zeros."""
    if fmt == "f32" and (bits >> 23) & 0xFF == 0:
        return bits & 0x80000000
    if fmt == "bf16" and (bits >> 7) & 0xFF == 0:
        return bits & 0x8000
    return bits


def round_exact(value: Fraction, fmt: str) -> int:
    """The bits of ``value`` rounded once to nearest even (gradual underflow, overflow to
    infinity), then S9's flush for f32/bf16; a zero is +0."""
    p, emin, flush, _, _ = FORMATS[fmt]
    if value == 0:
        return 0
    sign = value < 0
    a = -value if sign else value
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    lsb = max(e - (p - 1), emin - (p - 1))
    m = round(a / Fraction(2) ** lsb)          # Fraction rounds half to even
    r = float(m * Fraction(2) ** lsb) if m * Fraction(2) ** lsb < Fraction(2) ** 128 else float("inf")
    if flush and 0 < r < 2.0 ** emin:
        r = 0.0
    r = -r if sign else r
    if fmt == "f32":
        return int(np.array([r], np.float32).view(np.uint32)[0])
    if fmt == "f16":
        with np.errstate(over="ignore"):
            return int(np.array([r], np.float16).view(np.uint16)[0])
    return int(np.array([r], np.float32).view(np.uint32)[0]) >> 16


def exact_sum_bits(bits: list[int], fmt: str) -> int:
    """S34: the exact sum of the canonicalised values rounded once; NaN if any NaN or both
    infinities, else the infinity."""
    vals = [to_float(canonical(b, fmt), fmt) for b in bits]
    return _specials(vals, fmt) if _special(vals) else round_exact(sum((Fraction(v) for v in vals), Fraction(0)), fmt)


def exact_dot_bits(xs: list[int], ys: list[int]) -> int:
    prods, exact = [], Fraction(0)
    for a, b in zip(xs, ys):
        x, y = to_float(canonical(a, "f32"), "f32"), to_float(canonical(b, "f32"), "f32")
        if np.isnan(x) or np.isnan(y) or (np.isinf(x) and y == 0) or (np.isinf(y) and x == 0):
            prods.append(float("nan"))
        elif np.isinf(x) or np.isinf(y):
            prods.append(x * y)
        else:
            exact += Fraction(x) * Fraction(y)
    return _specials(prods, "f32") if _special(prods) else round_exact(exact, "f32")


def _special(vals: list[float]) -> bool:
    return any(np.isnan(v) or np.isinf(v) for v in vals)


def _specials(vals: list[float], fmt: str) -> int:
    nan = FORMATS[fmt][3]
    if any(np.isnan(v) for v in vals) or (float("inf") in vals and float("-inf") in vals):
        return nan
    inf = {"f32": 0x7F800000, "f16": 0x7C00, "bf16": 0x7F80}[fmt]
    sign = {"f32": 0x80000000, "f16": 0x8000, "bf16": 0x8000}[fmt]
    return inf if float("inf") in vals else inf | sign


def float_minmax_bits(bits: list[int], fmt: str, want_min: bool) -> int:
    """S10: NaN if any NaN; -0 below +0; operands canonicalised."""
    cb = [canonical(b, fmt) for b in bits]
    vals = [to_float(b, fmt) for b in cb]
    if any(np.isnan(v) for v in vals):
        return FORMATS[fmt][3]
    key = [(v, 0 if np.signbit(v) else 1) for v in vals]
    pick = min(range(len(cb)), key=lambda i: key[i]) if want_min else max(range(len(cb)), key=lambda i: key[i])
    return cb[pick]


def adversarial_f32(rng: np.random.Generator, n: int, specials: bool = True) -> np.ndarray:
    """f32 bits mixing ordinary values, huge cancelling pairs, ±0, subnormals, extremes and
    (with ``specials``) infinities and NaNs."""
    pool = [rng.standard_normal(n).astype(np.float32).view(np.uint32),
            (rng.standard_normal(n) * 1e30).astype(np.float32).view(np.uint32),
            rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),      # any bits
            np.full(n, 0x80000000, np.uint32), np.zeros(n, np.uint32),
            rng.integers(1, 0x800000, n).astype(np.uint32),                      # subnormals
            np.full(n, 0x7F7FFFFF, np.uint32), np.full(n, 0xFF7FFFFF, np.uint32), # ±max
            np.full(n, 0x00800000, np.uint32)]                                   # min normal
    pick = rng.integers(0, len(pool), n)
    out = np.choose(pick, pool).astype(np.uint32)
    if not specials:
        exp = (out >> 23) & 0xFF
        out = np.where(exp == 255, out & 0x807FFFFF, out).astype(np.uint32)
    return out


def order_key(k: np.ndarray) -> np.ndarray:
    """The unsigned integer whose order is the key order (f32: IEEE totalOrder; signed
    integers: the sign bit flipped). numpy only: the model of every sort, top-k and unique."""
    if k.dtype == np.float32:
        b = k.view(np.uint32)
        return np.where(b >> 31 == 1, ~b, b | np.uint32(0x80000000)).astype(np.uint32)
    if k.dtype.kind == "i":
        return (k.view(np.dtype(f"u{k.itemsize}")) ^ (1 << (8 * k.itemsize - 1))).astype(f"u{k.itemsize}")
    return k


_CANONICAL_NAN = {"f32": 0x7FC00000, "f16": 0x7E00, "bf16": 0x7FC0}


def float_unique_model(bits: np.ndarray, fmt: str) -> np.ndarray:
    """numpy's unique of float bits (f32 bits, or 16-bit floats' widened exactly to f32 bits)
    by a stable sort: the distinct values ascending, -0 and +0 one value (the first zero of
    the input), one canonical NaN at the end."""
    x = bits.view(np.float32)
    s = np.sort(x, kind="stable")                     # NaNs last; -0 == +0 keep input order
    keep = np.ones(s.size, bool)
    keep[1:] = s[1:] != s[:-1]
    nan = np.isnan(s)
    out = s[keep & ~nan].view(np.uint32)
    if fmt != "f32":
        out = (out >> 16).astype(np.uint16) if fmt == "bf16" else \
            out.view(np.float32).astype(np.float16).view(np.uint16)
    if nan.any():
        out = np.append(out, out.dtype.type(_CANONICAL_NAN[fmt]))
    return out
