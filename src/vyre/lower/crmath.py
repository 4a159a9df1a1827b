"""Correctly rounded f32 transcendentals for C-family targets (CUDA C, OpenCL C with fp64).

One algorithm per function, written once here as C source and used by every C-family
printer through two hooks: `HELPER` (the device function an op is printed as) and `prelude`
(the helpers and tables a program needs). Method (after CORE-MATH's binary32 functions):
argument reduction and a polynomial evaluated in float64 with IEEE basic operations only
(+ - * / sqrt, exact conversions, bit operations), so both targets compute the same doubles
(the printers forbid contraction: CUDA ``--fmad=false``, OpenCL ``FP_CONTRACT OFF``), and
every double is within `DEVICE_EPS` relative error of the exact value (measured on 2^16+
inputs per function by tests/semantics/test_crmath.py, all under 2^-50).

Rounding that double to f32 is correct unless it lies within DEVICE_EPS of a rounding
boundary (a midpoint between neighbouring f32 values, the overflow threshold or the flush
threshold). `vym_finish_<f>` tests that on the double's bits (one in about 2^20 inputs
fails the test) and then searches the function's table of hard cases
(`crmath_hard_cases.json`, from scripts/crmath_hard_cases.py, which runs the reference's
rounding test over every f32 input): an input found there gets the table's result; any
other input's exact value is farther than 2^-47 = 2 DEVICE_EPS from every boundary (the
reference flags at 2^-46 with float64 values within 2^-50), so its double rounds correctly.
hypot needs no table: near a boundary it compares x^2 + y^2 with the boundary's square
exactly.

Range reduction of sin/cos/tan is exact for every f32 (Payne-Hanek with 64-bit integers:
`VY_UMULHI64`, no 128-bit type), using 192 bits of 2/pi from the exponent's position.

A port to targets without float64 (WGSL) would keep the same reductions, tables and
hard-case lookups and evaluate the polynomials in double-f32 or in fixed point on u32 limbs
(u64 products emulated), with its own error bound in place of DEVICE_EPS and the bit test
done on the limbs.
"""

from __future__ import annotations

import functools
import json
import pathlib
import struct

import mpmath

from vyre.ir.types import BinOp, UnOp

DEVICE_EPS = 2.0 ** -48   # relative error bound of every helper's double result
HARD_CASES = pathlib.Path(__file__).with_name("crmath_hard_cases.json")

# the device function each correctly rounded op is printed as
HELPER: dict[UnOp | BinOp, str] = {
    UnOp.EXP: "vym_exp", UnOp.EXP2: "vym_exp2", UnOp.LOG: "vym_log", UnOp.LOG2: "vym_log2",
    UnOp.SIN: "vym_sin", UnOp.COS: "vym_cos", UnOp.TAN: "vym_tan", UnOp.TANH: "vym_tanh",
    UnOp.SINH: "vym_sinh", UnOp.COSH: "vym_cosh", UnOp.EXPM1: "vym_expm1", UnOp.LOG1P: "vym_log1p",
    UnOp.ATAN: "vym_atan", UnOp.ASIN: "vym_asin", UnOp.ACOS: "vym_acos", UnOp.CBRT: "vym_cbrt",
    UnOp.ERF: "vym_erf", BinOp.HYPOT: "vym_hypot",
}
# helper blocks each function's code calls (emitted once, in this order)
_NEEDS: dict[UnOp | BinOp, tuple[str, ...]] = {
    UnOp.EXP: ("exp_d",), UnOp.EXP2: ("exp_d",), UnOp.LOG: ("log_d",), UnOp.LOG2: ("log_d",),
    UnOp.SIN: ("trig",), UnOp.COS: ("trig",), UnOp.TAN: ("trig",), UnOp.TANH: ("exp_d",),
    UnOp.SINH: ("exp_d",), UnOp.COSH: ("exp_d",), UnOp.EXPM1: ("exp_d",), UnOp.LOG1P: ("log_d",),
    UnOp.ATAN: ("atan",), UnOp.ASIN: ("atan",), UnOp.ACOS: ("atan",), UnOp.CBRT: (),
    UnOp.ERF: ("erf",), BinOp.HYPOT: (),
}


def _h(v: mpmath.mpf | float) -> str:
    """A double constant as an exact C hex literal."""
    return float(v).hex()


def _split(v: mpmath.mpf, bits: int) -> tuple[float, float]:
    """v as hi (``bits`` significant bits) + lo (the rest rounded to double)."""
    with mpmath.workprec(bits):
        hi = mpmath.mpf(v)
    with mpmath.workprec(200):
        return float(hi), float(v - hi)


@functools.cache
def hard_cases() -> dict[str, list[tuple[int, int]]]:
    """Per function name: sorted (input bits, correctly rounded output bits)."""
    raw = json.loads(HARD_CASES.read_text())
    return {k: [(int(a, 16), int(b, 16)) for a, b in (p.split(":") for p in v)] for k, v in raw.items()}


_COMMON = r"""
#if defined(__OPENCL_VERSION__)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define VYM_TABLE __constant
#define VYM_L2D(x) as_double((vy_u64)(x))
#define VYM_D2L(x) as_ulong(x)
#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define VYM_TABLE static __device__ const
#define VYM_L2D(x) __longlong_as_double((long long)(x))
#define VYM_D2L(x) ((vy_u64)__double_as_longlong(x))
#else   /* a host C target */
#define VYM_TABLE static const
VY_FN double vym_l2d(vy_u64 u) { double d; __builtin_memcpy(&d, &u, 8); return d; }
VY_FN vy_u64 vym_d2l(double d) { vy_u64 u; __builtin_memcpy(&u, &d, 8); return u; }
#define VYM_L2D(x) vym_l2d((vy_u64)(x))
#define VYM_D2L(x) vym_d2l(x)
#endif
// Correctly rounded f32 transcendentals (vyre.lower.crmath). Doubles are computed with
// basic IEEE operations only, so every target gets the same ones.
VY_FN double vym_pow2i(int m) { return VYM_L2D(((vy_u64)(1023 + m)) << 52); }  // 2^m, |m| < 1023
// y rounded once to f32 (nearest even, overflow to infinity), then flushed (S9): results
// below 2^-126 never go through a hardware conversion (ftz conversions may differ)
VY_FN float vym_round(double y) {
    double a = y < 0.0 ? -y : y;
    if (y == 0.0) return (float)y;                // keeps the zero's sign
    if (a < 0x1p-126) {
        float r = a >= 0x1.fffffep-127 ? 0x1p-126f : 0.0f;
        return y < 0.0 ? -r : r;
    }
    return (float)y;
}
VY_FN float vym_nan(void) { return VY_U2F(VY_NAN_BITS); }
"""


def _lookup(name: str) -> str:
    """The finishing function of one op: round the double, unless it lies within DEVICE_EPS
    of a rounding boundary (tested on its bits); then the hard-case table decides: an input
    in it gets the table's result, any other rounds its double (its exact value is farther
    than 2^-47 from every boundary, so the double rounds the same way)."""
    cases = hard_cases().get(name, [])
    if not cases:
        return f"VY_FN float vym_finish_{name}(double y, uint xb) {{ return vym_round(y); }}\n"
    keys = ",".join(f"0x{a:08x}u" for a, _ in cases)
    vals = ",".join(f"0x{b:08x}u" for _, b in cases)
    n = len(cases)
    steps = "".join(f"    t = a + {1 << k} < {n - 1} ? a + {1 << k} : {n - 1}; a = vym_hk_{name}[t] <= xb ? t : a;\n"
                    for k in reversed(range(n.bit_length())))
    return f"""VYM_TABLE uint vym_hk_{name}[{n}] = {{{keys}}};
VYM_TABLE uint vym_hv_{name}[{n}] = {{{vals}}};
VY_FN float vym_finish_{name}(double y, uint xb) {{
    // a normal result whose low 29 bits (of the 52 an f32 drops) are more than DEVICE_EPS |y|
    // (under 32 of their units) from the half-way pattern rounds as the exact value does
    double ay = y < 0.0 ? -y : y;
    vy_i64 h = (vy_i64)(VYM_D2L(y) & (vy_u64)0x1FFFFFFF) - (vy_i64)0x10000000;
    if (ay >= 0x1p-126 && (h > (vy_i64)40 || h < (vy_i64)-40)) return (float)y;
    int a = 0, t;                                // loop-free binary search of the sorted inputs
{steps}    return vym_hk_{name}[a] == xb ? VY_U2F(vym_hv_{name}[a]) : vym_round(y);
}}
"""


def _poly(var: str, coeffs: list[mpmath.mpf]) -> str:
    """Horner form of sum(c_i var^i) with double hex literals."""
    out = _h(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        out = f"{_h(c)} + {var} * ({out})"
    return out


@functools.cache
def _exp_d() -> str:
    """e^x and 2^x cores: x = (k/64) ln 2 + r, |r| <= ln2/128, 2^(j/64) from a table,
    degree-6 Taylor polynomial (truncation < 2^-60); about 2^-51 relative error."""
    with mpmath.workprec(200):
        ln2 = mpmath.log(2)
        hi, lo = _split(ln2 / 64, 38)            # k * hi exact for |k| < 2^15
        exp_c = [1 / mpmath.factorial(i) for i in range(7)]
        exp2_c = [ln2 ** i / mpmath.factorial(i) for i in range(7)]
        em1_c = [1 / mpmath.factorial(i) for i in range(1, 17)]
        tbl = ",".join(_h(mpmath.power(2, mpmath.mpf(j) / 64)) for j in range(64))
        inv = _h(64 / ln2)
    return f"""VYM_TABLE double vym_exp_t[64] = {{{tbl}}};
// 2^(k/64) * p for an integer |k| < 2^15
VY_FN double vym_scale(int ki, double p) {{
    int j = ki & 63;
    return vym_pow2i((ki - j) / 64) * (vym_exp_t[j] * p);
}}
// e^x for -160 < x < 100
VY_FN double vym_exp_d(double x) {{
    double s = x * {inv} + 0x1.8p52;              // k = nearest integer (even on ties), in s's low bits
    double k = s - 0x1.8p52;
    double r = (x - k * {_h(hi)}) - k * {_h(lo)};
    return vym_scale((int)(uint)VYM_D2L(s), {_poly("r", exp_c)});
}}
// 2^x for an f32 x, -160 < x < 160 (x * 64 and its fraction are exact)
VY_FN double vym_exp2_d(double x) {{
    double t = x * 64.0;
    double s = t + 0x1.8p52;
    double r = (t - (s - 0x1.8p52)) * 0x1p-6;
    return vym_scale((int)(uint)VYM_D2L(s), {_poly("r", exp2_c)});
}}
// e^y - 1 for -160 < y < 100 (Taylor on |y| < 1/2, where exp would cancel)
VY_FN double vym_expm1_d(double y) {{
    if (y > -0.5 && y < 0.5) return y * ({_poly("y", em1_c)});
    return vym_exp_d(y) - 1.0;
}}
"""


@functools.cache
def _log_d() -> str:
    """ln x = e ln2 - ln c_i + ln(1 + z), z = m c_i - 1 exact (c_i an f32 near 1/m on the
    mantissa's top 7 bits), |z| < 2^-7, degree-8 series; c_0 = 1 and c_127 = 1/2 make x
    next to 1 exact-relative. Returns ln(x) as hi + lo parts, about 2^-51 relative."""
    c, lc_hi, lc_lo = [], [], []
    with mpmath.workprec(200):
        ln2 = mpmath.log(2)
        for i in range(128):
            ci = 1.0 if i == 0 else 0.5 if i == 127 else _f32(1 / (1 + (mpmath.mpf(i) + 0.5) / 128))
            v = -mpmath.log(ci) - (ln2 if i >= 53 else 0)
            h, lo_ = _split(v, 53)
            c.append(_h(ci))
            lc_hi.append(_h(h))
            lc_lo.append(_h(lo_))
        l2hi, l2lo = _split(ln2, 44)
        series = [mpmath.mpf((-1) ** (i + 1)) / i for i in range(2, 9)]
        inv_ln2 = _h(1 / ln2)
    return f"""VYM_TABLE double vym_log_c[128] = {{{",".join(c)}}};
VYM_TABLE double vym_log_h[128] = {{{",".join(lc_hi)}}};
VYM_TABLE double vym_log_l[128] = {{{",".join(lc_lo)}}};
VY_FN double vym_log1p_s(double z) {{ return z + z * z * ({_poly("z", series)}); }}   // |z| < 2^-7
// ln(x) = e + t for a positive normal f32 x: *e = e' ln2 (split), t the rest; also e'
VY_FN double vym_log_parts(float x, int* ee, double* lo) {{
    uint b = VY_F2U(x);
    uint i = (b >> 16) & 127u;
    int e = (int)(b >> 23) - 127 + (i >= 53u ? 1 : 0);
    double m = (double)VY_U2F((b & 0x007FFFFFu) | 0x3F800000u);
    double z = m * vym_log_c[i] - 1.0;
    double p = vym_log1p_s(z);
    *ee = e;
    *lo = p + vym_log_l[i];
    return vym_log_h[i];
}}
VY_FN double vym_log_d(float x) {{
    int e; double lo;
    double h = vym_log_parts(x, &e, &lo);
    return ((double)e * {_h(l2hi)} + h) + ((double)e * {_h(l2lo)} + lo);
}}
// ln(u) for a positive normal double u: m split in 24 + 29 bits so m c_i - 1 stays exact
VY_FN double vym_log_dd(double u) {{
    vy_u64 b = VYM_D2L(u);
    uint i = (uint)(b >> 45) & 127u;
    int e = (int)(b >> 52) - 1023 + (i >= 53u ? 1 : 0);
    double m = VYM_L2D((b & (vy_u64)0x000FFFFFFFFFFFFF) | (vy_u64)0x3FF0000000000000);
    double mh = VYM_L2D(VYM_D2L(m) & ~(vy_u64)0x1FFFFFFF);
    double c = vym_log_c[i];
    double z = (mh * c - 1.0) + (m - mh) * c;
    return ((double)e * {_h(l2hi)} + vym_log_h[i]) + ((double)e * {_h(l2lo)} + (vym_log1p_s(z) + vym_log_l[i]));
}}
VY_FN double vym_log2_d(float x) {{
    int e; double lo;
    double h = vym_log_parts(x, &e, &lo);
    return (double)e + (h + lo) * {inv_ln2};
}}
"""


def _f32(v: mpmath.mpf) -> float:
    """v rounded to the nearest f32 (as a Python float)."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


@functools.cache
def _trig() -> str:
    """sin/cos/tan: r = x - q pi/2 exactly reduced (|x| < pi/4: r = x; else Payne-Hanek on
    192 bits of 2/pi), Taylor polynomials on |r| <= pi/4 (truncation < 2^-54)."""
    with mpmath.workprec(600):
        two_over_pi = 2 / mpmath.pi
        words = ["0x00000000u"]                 # one zero word: windows may start before bit 1
        f = two_over_pi
        for _ in range(12):
            f *= 2 ** 32
            w = int(mpmath.floor(f))
            words.append(f"0x{w:08x}u")
            f -= w
        pio2 = _h(mpmath.pi / 2)
        sin_c = [mpmath.mpf((-1) ** k) / mpmath.factorial(2 * k + 1) for k in range(1, 8)]
        cos_c = [mpmath.mpf((-1) ** k) / mpmath.factorial(2 * k) for k in range(1, 9)]
    return f"""VYM_TABLE uint vym_2opi[{len(words)}] = {{{",".join(words)}}};
VY_FN vy_u64 vym_2opi_w(int g) {{   // bits g .. g+63 of the padded 2/pi stream
    int k = g >> 5, sh = g & 31;
    vy_u64 a = ((vy_u64)vym_2opi[k] << 32) | (vy_u64)vym_2opi[k + 1];
    return (a << sh) | ((vy_u64)vym_2opi[k + 2] >> (32 - sh));
}}
// |x| = q pi/2 + r, |r| <= pi/4 (+ a rounding), for a finite |x| (an f32 as double)
VY_FN double vym_reduce(float ax, int* q) {{
    if (ax < 0.785398f) {{ *q = 0; return (double)ax; }}
    uint b = VY_F2U(ax);
    int e = (int)(b >> 23) - 150;                 // ax = m 2^e, m a 24-bit integer
    vy_u64 m = (vy_u64)((b & 0x007FFFFFu) | 0x00800000u);
    int g = e - 2 + 32;                           // bit b_(e-1) of 2/pi, after the pad word
    vy_u64 w0 = vym_2opi_w(g), w1 = vym_2opi_w(g + 64), w2 = vym_2opi_w(g + 128);
    // P = m (w0 w1 w2); x 2/pi mod 4 = P 2^-190: bits 191..64 of P
    vy_u64 h2 = VY_UMULHI64(m, w2);
    vy_u64 l1 = m * w1, h1 = VY_UMULHI64(m, w1);
    vy_u64 l0 = m * w0;
    vy_u64 p1 = h2 + l1;
    vy_u64 p2 = h1 + l0 + (p1 < h2 ? (vy_u64)1 : (vy_u64)0);
    int quad = (int)(p2 >> 62);
    vy_u64 fh = (p2 << 2) | (p1 >> 62), fl = p1 << 2;   // fraction, 128 bits
    double sgn = 1.0;
    if (fh >> 63) {{                               // fraction >= 1/2: next quadrant, negative r
        quad += 1; sgn = -1.0;
        fh = ~fh; fl = ~fl + (vy_u64)1; if (fl == (vy_u64)0) fh += (vy_u64)1;
    }}
    int n = 0;
    if (fh == (vy_u64)0) {{ fh = fl; fl = (vy_u64)0; n = 64; }}
    int s = (int)VY_CLZ64(fh);
    if (s > 0) fh = (fh << s) | (fl >> (64 - s));
    *q = quad & 3;
    return sgn * ((double)fh * vym_pow2i(-64 - n - s)) * {pio2};
}}
VY_FN double vym_sin_p(double r) {{ double z = r * r; return r + r * z * ({_poly("z", sin_c)}); }}
VY_FN double vym_cos_p(double r) {{ double z = r * r; return 1.0 + z * ({_poly("z", cos_c)}); }}
"""


@functools.cache
def _atan() -> str:
    """atan(v) = atan(k/64) + atan(t), t = (v - k/64) / (1 + v k/64), |t| <= 1/128, for
    0 <= v <= 1 (v - k/64 exact); |x| > 1 through pi/2 - atan(1/|x|). Series through t^9
    (truncation < 2^-66); about 2^-51 relative."""
    with mpmath.workprec(200):
        parts = [_split(mpmath.atan(mpmath.mpf(k) / 64), 53) for k in range(65)]
        hi = ",".join(_h(h) for h, _ in parts)
        lo = ",".join(_h(lo_) for _, lo_ in parts)
        series = [mpmath.mpf((-1) ** k) / (2 * k + 1) for k in range(1, 5)]
        p_hi, p_lo = _split(mpmath.pi / 2, 53)
    return f"""VYM_TABLE double vym_atan_h[65] = {{{hi}}};
VYM_TABLE double vym_atan_l[65] = {{{lo}}};
VY_FN double vym_atan_d(double x) {{          // any double, infinities included
    double a = x < 0.0 ? -x : x;
    bool inv = a > 1.0;
    double v = inv ? 1.0 / a : a;
    double s = v * 64.0 + 0x1.8p52;               // nearest integer k, in s's low bits
    double c = (s - 0x1.8p52) * 0x1p-6;
    double t = (v - c) / (1.0 + v * c);
    double z = t * t;
    int ki = (int)(uint)VYM_D2L(s);
    ki = ki < 0 ? 0 : (ki > 64 ? 64 : ki);        // 0..64 (a NaN never reaches here)
    double r = vym_atan_h[ki] + ((t + t * z * ({_poly("z", series)})) + vym_atan_l[ki]);
    if (inv) r = ({_h(p_hi)} - r) + {_h(p_lo)};
    return x < 0.0 ? -r : r;
}}
"""


@functools.cache
def _erf() -> str:
    """erf(a), 0 <= a < 6: odd series below 1/16; else the degree-12 Taylor polynomial of erf
    at the centre c of a's 1/16-wide interval (mpmath's coefficients), d = a - c exact,
    |d| <= 1/32 (truncation < 2^-58 relative)."""
    deg = 12
    with mpmath.workprec(80):
        rows = []
        for k in range(96):
            c = (mpmath.mpf(k) + 0.5) / 16
            g = 2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-c * c)   # erf^(n) = g (-1)^(n-1) H_(n-1)
            h = [mpmath.mpf(1), 2 * c]                             # Hermite: H_(n+1) = 2c H_n - 2n H_(n-1)
            while len(h) < deg:
                h.append(2 * c * h[-1] - 2 * (len(h) - 1) * h[-2])
            rows.append(_h(mpmath.erf(c)))
            rows.extend(_h(g * (-1) ** (n - 1) * h[n - 1] / mpmath.factorial(n)) for n in range(1, deg + 1))
        s0 = [2 / mpmath.sqrt(mpmath.pi) * mpmath.mpf(-1) ** n / (mpmath.factorial(n) * (2 * n + 1))
              for n in range(7)]
    horner = f"vym_erf_t[o + {deg}]"
    for i in reversed(range(deg)):
        horner = f"vym_erf_t[o + {i}] + d * ({horner})"
    return f"""VYM_TABLE double vym_erf_t[{len(rows)}] = {{{",".join(rows)}}};
VY_FN double vym_erf_d(double a) {{
    if (a < 0.0625) {{ double z = a * a; return a * ({_poly("z", s0)}); }}
    int k = (int)(a * 16.0);
    k = k > 95 ? 95 : k;
    double d = a - ((double)k + 0.5) * 0.0625;
    int o = k * {deg + 1};
    return {horner};
}}
"""


_FUNCS: dict[UnOp | BinOp, str] = {
    UnOp.EXP: """VY_FN float vym_exp(float x) {
    if (vy_isnan(x)) return vym_nan();
    if (x > 100.0f) return VY_U2F(0x7F800000u);
    if (x < -110.0f) return 0.0f;
    return vym_finish_exp(vym_exp_d((double)x), VY_F2U(x));
}
""",
    UnOp.EXP2: """VY_FN float vym_exp2(float x) {
    if (vy_isnan(x)) return vym_nan();
    if (x >= 128.0f) return VY_U2F(0x7F800000u);
    if (x < -152.0f) return 0.0f;
    return vym_finish_exp2(vym_exp2_d((double)x), VY_F2U(x));
}
""",
    UnOp.LOG: """VY_FN float vym_log(float x) {
    if (vy_isnan(x) || x < 0.0f) return vym_nan();
    if (x == 0.0f) return VY_U2F(0xFF800000u);
    if (vy_isinf(x)) return x;
    return vym_finish_log(vym_log_d(x), VY_F2U(x));
}
""",
    UnOp.LOG2: """VY_FN float vym_log2(float x) {
    if (vy_isnan(x) || x < 0.0f) return vym_nan();
    if (x == 0.0f) return VY_U2F(0xFF800000u);
    if (vy_isinf(x)) return x;
    return vym_finish_log2(vym_log2_d(x), VY_F2U(x));
}
""",
    UnOp.SIN: """VY_FN double vym_sin_y(float x) {
    int q; double r = vym_reduce(VY_U2F(VY_F2U(x) & 0x7FFFFFFFu), &q);
    double y = (q & 1) ? vym_cos_p(r) : vym_sin_p(r);
    if (q & 2) y = -y;
    return (VY_F2U(x) >> 31) ? -y : y;
}
VY_FN float vym_sin(float x) {
    if (vy_isnan(x) || vy_isinf(x)) return vym_nan();
    return vym_finish_sin(vym_sin_y(x), VY_F2U(x));
}
""",
    UnOp.COS: """VY_FN double vym_cos_y(float x) {
    int q; double r = vym_reduce(VY_U2F(VY_F2U(x) & 0x7FFFFFFFu), &q);
    q = (q + 1) & 3;
    double y = (q & 1) ? vym_cos_p(r) : vym_sin_p(r);
    return (q & 2) ? -y : y;
}
VY_FN float vym_cos(float x) {
    if (vy_isnan(x) || vy_isinf(x)) return vym_nan();
    return vym_finish_cos(vym_cos_y(x), VY_F2U(x));
}
""",
    UnOp.TAN: """VY_FN double vym_tan_y(float x) {
    int q; double r = vym_reduce(VY_U2F(VY_F2U(x) & 0x7FFFFFFFu), &q);
    double s = vym_sin_p(r), c = vym_cos_p(r);
    double y = (q & 1) ? -c / s : s / c;
    return (VY_F2U(x) >> 31) ? -y : y;
}
VY_FN float vym_tan(float x) {
    if (vy_isnan(x) || vy_isinf(x)) return vym_nan();
    return vym_finish_tan(vym_tan_y(x), VY_F2U(x));
}
""",
    UnOp.TANH: """VY_FN double vym_tanh_y(float x) {
    float ax = VY_U2F(VY_F2U(x) & 0x7FFFFFFFu);
    double y;
    if (ax >= 10.0f) y = 1.0;
    else { double e = vym_expm1_d(2.0 * (double)ax); y = e / (e + 2.0); }
    return (VY_F2U(x) >> 31) ? -y : y;
}
VY_FN float vym_tanh(float x) {
    if (vy_isnan(x)) return vym_nan();
    return vym_finish_tanh(vym_tanh_y(x), VY_F2U(x));
}
""",
    UnOp.SINH: """VY_FN double vym_sinh_y(float x) {
    double a = (double)VY_U2F(VY_F2U(x) & 0x7FFFFFFFu);
    double e = vym_expm1_d(a);
    double y = 0.5 * (e + e / (e + 1.0));
    return (VY_F2U(x) >> 31) ? -y : y;
}
VY_FN float vym_sinh(float x) {
    if (x == 0.0f) return x;                     // keeps the zero's sign
    if (vy_isnan(x)) return vym_nan();
    if (VY_U2F(VY_F2U(x) & 0x7FFFFFFFu) >= 90.0f) return VY_U2F((VY_F2U(x) & 0x80000000u) | 0x7F800000u);
    return vym_finish_sinh(vym_sinh_y(x), VY_F2U(x));
}
""",
    UnOp.COSH: """VY_FN double vym_cosh_y(float x) {
    double e = vym_exp_d((double)VY_U2F(VY_F2U(x) & 0x7FFFFFFFu));
    return 0.5 * (e + 1.0 / e);
}
VY_FN float vym_cosh(float x) {
    if (vy_isnan(x)) return vym_nan();
    if (VY_U2F(VY_F2U(x) & 0x7FFFFFFFu) >= 90.0f) return VY_U2F(0x7F800000u);
    return vym_finish_cosh(vym_cosh_y(x), VY_F2U(x));
}
""",
    UnOp.EXPM1: """VY_FN double vym_expm1_y(float x) {
    return x < -110.0f ? -1.0 : vym_expm1_d((double)x);
}
VY_FN float vym_expm1(float x) {
    if (x == 0.0f) return x;                     // keeps the zero's sign
    if (vy_isnan(x)) return vym_nan();
    if (x > 100.0f) return VY_U2F(0x7F800000u);
    return vym_finish_expm1(vym_expm1_y(x), VY_F2U(x));
}
""",
    UnOp.LOG1P: """VY_FN double vym_log1p_y(float x) {
    double d = (double)x;
    if (d > -0x1p-7 && d < 0x1p-7) return vym_log1p_s(d);
    return vym_log_dd(1.0 + d);                  // 1 + d exact below 2^52 (above: harmless)
}
VY_FN float vym_log1p(float x) {
    if (x == 0.0f) return x;                     // keeps the zero's sign
    if (vy_isnan(x) || x < -1.0f) return vym_nan();
    if (x == -1.0f) return VY_U2F(0xFF800000u);
    if (vy_isinf(x)) return x;
    return vym_finish_log1p(vym_log1p_y(x), VY_F2U(x));
}
""",
    UnOp.ATAN: """VY_FN double vym_atan_y(float x) { return vym_atan_d((double)x); }
VY_FN float vym_atan(float x) {
    if (x == 0.0f) return x;                     // keeps the zero's sign
    if (vy_isnan(x)) return vym_nan();
    return vym_finish_atan(vym_atan_y(x), VY_F2U(x));
}
""",
    UnOp.ASIN: """VY_FN double vym_asin_y(float x) {   // atan(x / sqrt((1 - x)(1 + x))); +-1: +-pi/2
    double d = (double)x;
    return vym_atan_d(d / sqrt((1.0 - d) * (1.0 + d)));
}
VY_FN float vym_asin(float x) {
    if (x == 0.0f) return x;                     // keeps the zero's sign
    if (vy_isnan(x) || x > 1.0f || x < -1.0f) return vym_nan();
    return vym_finish_asin(vym_asin_y(x), VY_F2U(x));
}
""",
    UnOp.ACOS: """VY_FN double vym_acos_y(float x) {   // 2 atan(sqrt((1 - x) / (1 + x))); -1: pi
    double d = (double)x;
    return 2.0 * vym_atan_d(sqrt((1.0 - d) / (1.0 + d)));
}
VY_FN float vym_acos(float x) {
    if (vy_isnan(x) || x > 1.0f || x < -1.0f) return vym_nan();
    return vym_finish_acos(vym_acos_y(x), VY_F2U(x));
}
""",
    UnOp.CBRT: """VY_FN double vym_cbrt_y(float x) {   // x normal, nonzero: m 2^(3q + r), Newton on [1, 8)
    uint b = VY_F2U(x) & 0x7FFFFFFFu;
    int e = (int)(b >> 23) - 127;
    int q = (e >= 0 ? e : e - 2) / 3;
    int r = e - 3 * q;
    float vf = VY_U2F((b & 0x007FFFFFu) | 0x3F800000u) * (float)(1 << r);
    double v = (double)vf;
    double y = (double)VY_U2F(VY_F2U(vf) / 3u + 0x2A5137A0u);   // within about 6%
    y = y - (y * y * y - v) / (3.0 * y * y);
    y = y - (y * y * y - v) / (3.0 * y * y);
    y = y - (y * y * y - v) / (3.0 * y * y);
    y = y - (y * y * y - v) / (3.0 * y * y);
    y = y * vym_pow2i(q);
    return (VY_F2U(x) >> 31) ? -y : y;
}
VY_FN float vym_cbrt(float x) {
    if (vy_isnan(x)) return vym_nan();
    if (x == 0.0f || vy_isinf(x)) return x;
    return vym_finish_cbrt(vym_cbrt_y(x), VY_F2U(x));
}
""",
    UnOp.ERF: """VY_FN double vym_erf_y(float x) {
    float ax = VY_U2F(VY_F2U(x) & 0x7FFFFFFFu);
    double y = ax >= 6.0f ? 1.0 : vym_erf_d((double)ax);   // 1 - erf(6) < 2^-55
    return (VY_F2U(x) >> 31) ? -y : y;
}
VY_FN float vym_erf(float x) {
    if (x == 0.0f) return x;                     // keeps the zero's sign
    if (vy_isnan(x)) return vym_nan();
    return vym_finish_erf(vym_erf_y(x), VY_F2U(x));
}
""",
    BinOp.HYPOT: """// sqrt(x^2 + y^2): squares exact, their sum s + e exact (two-sum), sqrt within 2^-52;
// near a rounding boundary the exact sum decides against the boundary's square (exact too)
VY_FN float vym_hypot(float x, float y) {
    if (vy_isinf(x) || vy_isinf(y)) return VY_U2F(0x7F800000u);
    if (vy_isnan(x) || vy_isnan(y)) return vym_nan();
    double a = (double)x, b = (double)y;
    double p = a * a, q = b * b;
    double s = p + q;
    double bb = s - p;
    double e = (p - (s - bb)) + (q - bb);
    double r = sqrt(s);
    if (r == 0.0) return 0.0f;
    if (r >= 0x1p128) return VY_U2F(0x7F800000u);
    vy_i64 h = (vy_i64)(VYM_D2L(r) & (vy_u64)0x1FFFFFFF) - (vy_i64)0x10000000;
    if (h > (vy_i64)40 || h < (vy_i64)-40) return (float)r;    // r >= max(|x|, |y|) >= 2^-126
    float f = (float)r;
    uint fb = VY_F2U(f);
    double fv = fb == 0x7F800000u ? 0x1p128 : (double)f;
    uint ob = r >= fv ? fb + 1u : fb - 1u;
    double ov = ob == 0x7F800000u ? 0x1p128 : (double)VY_U2F(ob);
    double m = 0.5 * (fv + ov);                  // the boundary: 25 bits, m * m exact
    double d = (s - m * m) + e;                  // sign of (x^2 + y^2 - m^2), exactly
    uint lo = fb < ob ? fb : ob, hi = fb < ob ? ob : fb;
    return VY_U2F(d > 0.0 ? hi : (d < 0.0 ? lo : ((lo & 1u) ? hi : lo)));
}
""",
}
# the double each helper rounds (tests measure its error against DEVICE_EPS)
DOUBLE: dict[UnOp, str] = {
    UnOp.EXP: "vym_exp_d((double)x)", UnOp.EXP2: "vym_exp2_d((double)x)", UnOp.LOG: "vym_log_d(x)",
    UnOp.LOG2: "vym_log2_d(x)", UnOp.SIN: "vym_sin_y(x)", UnOp.COS: "vym_cos_y(x)",
    UnOp.TAN: "vym_tan_y(x)", UnOp.TANH: "vym_tanh_y(x)",
    **{op: f"{name}_y(x)" for op, name in HELPER.items()
       if isinstance(op, UnOp) and op not in (UnOp.EXP, UnOp.EXP2, UnOp.LOG, UnOp.LOG2, UnOp.SIN,
                                              UnOp.COS, UnOp.TAN, UnOp.TANH)},
}
_BLOCKS = {"exp_d": _exp_d, "log_d": _log_d, "trig": _trig, "atan": _atan, "erf": _erf}


def prelude(ops: frozenset[UnOp] | set[UnOp]) -> str:
    """C source of the helpers (and their tables) for the given ops; '' when none.
    Needs the shared prelude's ``vy_isnan``/``vy_isinf`` and ``VY_NAN_BITS``."""
    used = [op for op in HELPER if op in ops]
    if not used:
        return ""
    parts = [_COMMON]
    for block in dict.fromkeys(b for op in used for b in _NEEDS[op]):
        parts.append(_BLOCKS[block]())
    for op in used:
        if isinstance(op, UnOp):   # hypot decides its hard cases exactly, without a table
            parts.append(_lookup(op.value))
        parts.append(_FUNCS[op])
    return "\n".join(parts)
