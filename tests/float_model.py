"""An independent model of S36/S34 for tests: ``math.fsum`` of the exact values of the
terms (a double, correctly rounded), then rounded once to the target format with Python's
exact `fractions.Fraction`, the tie decided by the sign of ``fsum(terms - d)`` (the only
case where rounding the double could differ from rounding the exact sum); MIN/MAX by Python
comparisons. Nothing here comes from vyre but its DataType names."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from vyre.ir import AtomicOp, DataType

F, H, BF, U = DataType.F32, DataType.F16, DataType.BF16, DataType.U32
FLOATS = (F, H, BF)
# (significand bits, exponent of the smallest normal, largest exponent, flushes subnormals)
FORMAT = {F: (24, -126, 127, True), H: (11, -14, 15, False), BF: (8, -126, 127, True)}
NAN_BITS = {F: 0x7FC00000, H: 0x7E00, BF: 0x7FC0}


def to_float(t: DataType, bits: int) -> float:
    """The exact value of ``t`` bits, canonicalised per S9 (f32/bf16 subnormals: signed
    zero; f16 subnormals kept, S27)."""
    if t is F:
        x = float(np.array([bits], np.uint32).view(np.float32)[0])
    elif t is H:
        x = float(np.array([bits], np.uint16).view(np.float16)[0])
    else:
        x = float(np.array([bits << 16], np.uint32).view(np.float32)[0])
    if t is not H and x != 0 and math.isfinite(x) and abs(x) < 2.0**-126:
        x = math.copysign(0.0, x)
    return x


def to_bits(t: DataType, x: float) -> int:
    """The bits of a value exactly representable in ``t`` (or an infinity, a signed zero)."""
    if t is H:
        return int(np.array([x], np.float16).view(np.uint16)[0])
    b = int(np.array([x], np.float32).view(np.uint32)[0])
    return b >> 16 if t is BF else b


def round_once(t: DataType, terms: list[float]) -> int:
    """S34: the exact sum of finite ``terms`` rounded once to ``t`` (nearest even, gradual
    underflow, then S9's flush), +0 for an exact zero total."""
    p, emin, emax, flushes = FORMAT[t]
    d = math.fsum(terms)
    if d == 0.0:
        return 0                      # terms are multiples of 2**-149: d == 0 only if the sum is
    resid = math.fsum([*terms, -d])   # the exact sum minus d, correctly rounded: its sign is exact
    sign = -1 if d < 0 else 1
    a = Fraction(abs(d))
    e = math.frexp(abs(d))[1] - 1     # 2**e <= |d| < 2**(e+1)
    lsb = Fraction(2) ** max(e - (p - 1), emin - (p - 1))
    q = a / lsb
    n = math.floor(q)
    rest = q - n
    up = rest > Fraction(1, 2) or (rest == Fraction(1, 2) and (
        sign * resid > 0 or (resid == 0 and n % 2 == 1)))
    value = (n + up) * lsb
    if value >= Fraction(2) ** (emax + 1):
        return to_bits(t, sign * math.inf)
    if flushes and value < Fraction(2) ** emin:
        return to_bits(t, math.copysign(0.0, sign))
    return to_bits(t, sign * float(value))


def model_add(t: DataType, initial: np.ndarray, slots: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.array(initial, copy=True)
    groups: dict[int, list[int]] = {}
    for s, v in zip(slots.tolist(), values.tolist()):
        groups.setdefault(s, []).append(v)
    for s, vals in groups.items():
        if s >= out.size:
            continue                              # S6: no effect
        xs = [to_float(t, int(out[s]))] + [to_float(t, v) for v in vals]
        if any(math.isnan(x) for x in xs) or (math.inf in xs and -math.inf in xs):
            out[s] = NAN_BITS[t]
        elif math.inf in xs or -math.inf in xs:
            out[s] = to_bits(t, math.inf if math.inf in xs else -math.inf)
        else:
            out[s] = round_once(t, xs)
    return out


def model_minmax(op: AtomicOp, t: DataType, initial: np.ndarray, slots: np.ndarray,
                 values: np.ndarray) -> np.ndarray:
    out = np.array(initial, copy=True)
    groups: dict[int, list[int]] = {}
    for s, v in zip(slots.tolist(), values.tolist()):
        groups.setdefault(s, []).append(v)
    pick = min if op is AtomicOp.MIN else max
    for s, vals in groups.items():
        if s >= out.size:
            continue
        xs = [to_float(t, int(out[s]))] + [to_float(t, v) for v in vals]
        if any(math.isnan(x) for x in xs):
            out[s] = NAN_BITS[t]
        else:   # S10: -0 below +0
            out[s] = to_bits(t, pick(xs, key=lambda x: (x, math.copysign(1.0, x))))
    return out


def model(op: AtomicOp, t: DataType, initial, slots, values) -> np.ndarray:
    f = model_add if op is AtomicOp.ADD else (lambda *a: model_minmax(op, *a))
    return f(t, initial, slots, values)


