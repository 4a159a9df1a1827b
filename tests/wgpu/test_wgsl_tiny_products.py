"""WGSL's `vy_fmul_tiny` (vyre.lower.wgsl): the f32 product of normal operands whose device
result was zero or subnormal is decided in integers on the exact product (S9: it rounds to
the smallest normal iff |a*b| >= 2^-126 - 2^-150, else it is flushed to a signed zero).
NVIDIA's Vulkan compiler rewrote the earlier float form, so the helper is run here directly,
on every product near that bound, against exact rationals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import wgsl_runner
from vyre.lower.wgsl import PRELUDE

# the helper alone (it calls no other helper; the rest of the prelude needs the control buffer)
HELPER = PRELUDE[PRELUDE.index("fn vy_fmul_tiny("):]
HELPER = HELPER[:HELPER.index("\n}\n") + 3]
BODY = ("bitcast<u32>(vy_fmul_tiny(bitcast<f32>(a0), bitcast<f32>(a1), (a0 ^ a1) & 0x80000000u))")
BOUND = Fraction(2) ** -126 - Fraction(2) ** -150


def _expected(x: int, y: int) -> int:
    """The S9 result of the f32 product of bit patterns x and y, known to be below 2^-126."""
    sign = (x ^ y) & 0x80000000
    if not (x >> 23) & 0xFF or not (y >> 23) & 0xFF:   # a subnormal operand is flushed
        return sign
    v = abs(Fraction(float(np.uint32(x).view(np.float32))) * Fraction(float(np.uint32(y).view(np.float32))))
    return sign | (0x00800000 if v >= BOUND else 0)


def _cases() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    n = 4000
    # |a| < 1 keeps b = 2^-126 / a normal; the exponents are spread over 60 binades
    a = np.ldexp(rng.uniform(0.5, 1.0, n), -rng.integers(0, 60, n)).astype(np.float32)
    # b's neighbours around 2^-126 / a put a*b within a few ulps of the bound, on both sides
    b = (np.float64(2.0**-126) / a.astype(np.float64)).astype(np.float32).view(np.uint32)
    b = b + rng.integers(-3, 2, n).astype(np.uint32)
    tiny = [abs(Fraction(float(p)) * Fraction(float(q))) < Fraction(2) ** -126
            for p, q in zip(a.tolist(), b.view(np.float32).tolist())]
    a, b = a[tiny], b[tiny]
    sa = rng.integers(0, 2, a.size).astype(np.uint32) << 31
    sb = rng.integers(0, 2, a.size).astype(np.uint32) << 31
    x, y = a.view(np.uint32) | sa, b | sb
    # far below the bound, the exact tie (2^24 - 1) * 2^-150, and subnormal operands
    far = np.array([0x00800000, 0x3F000000, 0x01000000, 0x00FFFFFF], np.uint32)
    farb = np.array([0x00800000, 0x00800000, 0x3E800000, 0x3F000000], np.uint32)
    tie = np.array([0x3F7FFFFF], np.uint32)    # (1 - 2^-24) * 2^-126 is the bound itself: rounds up
    tieb = np.array([0x00800000], np.uint32)
    sub = np.array([0x00000001, 0x3F800000], np.uint32)
    subb = np.array([0x3F800000, 0x00400000], np.uint32)
    return np.concatenate([x, far, tie, sub]), np.concatenate([y, farb, tieb, subb])


def test_wgpu_tiny_products_round_on_the_exact_product():
    x, y = _cases()
    src = wgsl_runner.kernel(HELPER, BODY, 2, in_words=1, out_words=1)
    got = wgsl_runner.run(src, [x, y], x.size, out_words=1)
    want = np.array([_expected(int(p), int(q)) for p, q in zip(x, y)], np.uint32)
    assert (want == 0x00800000).sum() + (want == 0x80800000).sum() > 500   # both outcomes are exercised
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(x[i]), hex(y[i]), hex(got[i]), hex(want[i])) for i in bad[:8]]
