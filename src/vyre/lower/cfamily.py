"""The C family's syntax record (`CSyntax`), shared by the CUDA C and OpenCL C targets, for
the one printer walk (`vyre.lower.printer`).

A C-family target is one `CSyntax` instance: its ``header`` (typedefs and the ``VY_*``
macros the preludes use), its qualifiers, builtins, barrier and atomics. The preludes here
hold the helpers every C-family kernel shares (S9 canonicalisation, saturating float->int
casts, integer edge cases, wrap-around i32 arithmetic done on u32; 64-bit and 16-bit float
helpers only when a program uses those types).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.types import AtomicOp, BinOp, Builtin, DataType, SubgroupOp, UnOp

from . import crmath
from .floats import CANON, Flags
from .plan import KernelPlan
from .printer import emit
from .syntax import CMP, ERR_DIVISION, Syntax, error_bits

if TYPE_CHECKING:
    from .printer import Printer

__all__ = ["CSyntax", "emit_source", "ERR_DIVISION"]

F32, U32, BOOL = DataType.F32, DataType.U32, DataType.BOOL
# C types of values, and of stored elements (by size); 16-bit floats are held as their bits
CT = {DataType.U32: "uint", DataType.I32: "int", DataType.F32: "float", DataType.BOOL: "bool",
      DataType.U64: "vy_u64", DataType.I64: "vy_i64", DataType.F16: "vy_u16", DataType.BF16: "vy_u16"}
UT = {DataType.U32: "uint", DataType.I32: "uint", DataType.U64: "vy_u64", DataType.I64: "vy_u64"}
ST = {1: "vy_u8", 2: "vy_u16", 4: "uint", 8: "vy_u64"}

PRELUDE = r"""
#define VY_NAN_BITS 0x7FC00000u
// Canonicalisation (S9), branch-free so vectorising compilers keep lanes together:
// vy_daz flushes a subnormal to zero of its sign, vy_cnan gives NaN the canonical payload,
// vy_canon does both. vyre.lower.floats decides where each is needed.
VY_FN float vy_daz(float x) {
    uint b = VY_F2U(x);
    return VY_U2F((b & 0x7F800000u) == 0u ? (b & 0x80000000u) : b);
}
VY_FN float vy_cnan(float x) {
    uint b = VY_F2U(x);
    return VY_U2F((b & 0x7FFFFFFFu) > 0x7F800000u ? VY_NAN_BITS : b);
}
VY_FN float vy_canon(float x) { return vy_cnan(vy_daz(x)); }
VY_FN bool vy_isnan(float x) { return (VY_F2U(x) & 0x7FFFFFFFu) > 0x7F800000u; }
VY_FN bool vy_isinf(float x) { return (VY_F2U(x) & 0x7FFFFFFFu) == 0x7F800000u; }
VY_FN float vy_fmin(float a, float b) {
    if (vy_isnan(a) || vy_isnan(b)) return VY_U2F(VY_NAN_BITS);
    if (a < b) return a;
    if (b < a) return b;
    return (VY_F2U(a) & 0x80000000u) ? a : b;
}
VY_FN float vy_fmax(float a, float b) {
    if (vy_isnan(a) || vy_isnan(b)) return VY_U2F(VY_NAN_BITS);
    if (a > b) return a;
    if (b > a) return b;
    return (VY_F2U(a) & 0x80000000u) ? b : a;
}
VY_FN float vy_fsign(float a) {
    if (vy_isnan(a)) return a;
    if (a > 0.0f) return 1.0f;
    if (a < 0.0f) return -1.0f;
    return a;
}
// Rounding builtins only see |x| < 2^23; anything else (larger, inf, NaN) is already
// integral or passes through. PoCL's LLVM folds ceil/floor/trunc of a NaN constant to garbage.
VY_FN bool vy_small(float x) { return (VY_F2U(x) & 0x7FFFFFFFu) < 0x4B000000u; }
VY_FN float vy_floor(float x) { return vy_small(x) ? VY_FLOOR(x) : x; }
VY_FN float vy_ceil(float x) { return vy_small(x) ? VY_CEIL(x) : x; }
VY_FN float vy_trunc(float x) { return vy_small(x) ? VY_TRUNC(x) : x; }
VY_FN float vy_fround(float a) {
    if (!vy_small(a)) return a;
    float t = VY_TRUNC(a);
    float d = a - t;
    if (d >= 0.5f) return t + 1.0f;
    if (d <= -0.5f) return t - 1.0f;
    return t;
}
VY_FN uint vy_f2u(float x) {
    if (vy_isnan(x) || x <= 0.0f) return 0u;
    if (x >= 4294967296.0f) return 0xFFFFFFFFu;
    return (uint)x;
}
VY_FN int vy_f2i(float x) {
    if (vy_isnan(x)) return 0;
    if (x <= -2147483648.0f) return (int)0x80000000u;
    if (x >= 2147483648.0f) return 0x7FFFFFFF;
    return (int)x;
}
VY_FN uint vy_udiv(uint a, uint b) { return b == 0u ? 0xFFFFFFFFu : a / b; }
VY_FN uint vy_umod(uint a, uint b) { return b == 0u ? 0u : a % b; }
VY_FN int vy_idiv(int a, int b, VY_GPTR ctl) {
    if (b == 0 || (a == (int)0x80000000u && b == -1)) { VY_ERR(ctl, VY_E_DIVISION); return 0; }
    return a / b;
}
VY_FN int vy_imod(int a, int b, VY_GPTR ctl) {
    if (b == 0 || (a == (int)0x80000000u && b == -1)) { VY_ERR(ctl, VY_E_DIVISION); return 0; }
    return a % b;
}
VY_FN uint vy_rotl(uint a, uint b) { uint s = b & 31u; return s == 0u ? a : (a << s) | (a >> (32u - s)); }
VY_FN uint vy_rotr(uint a, uint b) { uint s = b & 31u; return s == 0u ? a : (a >> s) | (a << (32u - s)); }
VY_FN uint vy_ctz(uint x) { return x == 0u ? 32u : 31u - (uint)VY_CLZ(x & (0u - x)); }
VY_FN uint vy_brev(uint x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
    return (x >> 16) | (x << 16);
}
VY_FN uint vy_usat_add(uint a, uint b) { uint s = a + b; return s < a ? 0xFFFFFFFFu : s; }
VY_FN uint vy_usat_mul(uint a, uint b) { vy_u64 p = (vy_u64)a * (vy_u64)b; return p > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint)p; }
VY_FN int vy_isat(vy_i64 v) { return v > 2147483647ll ? 0x7FFFFFFF : (v < -2147483648ll ? (int)0x80000000u : (int)v); }
VY_FN uint vy_bswap(uint x) { return (x >> 24) | ((x >> 8) & 0xFF00u) | ((x << 8) & 0xFF0000u) | (x << 24); }
"""
PRELUDE = error_bits(PRELUDE)

# 64-bit integers (only emitted when a program uses them)
PRELUDE64 = r"""
#define VY_I64_MIN ((vy_i64)0x8000000000000000ull)
#define VY_I64_MAX ((vy_i64)0x7FFFFFFFFFFFFFFFull)
VY_FN vy_u64 vy_udiv64(vy_u64 a, vy_u64 b) { return b == 0ull ? 0xFFFFFFFFFFFFFFFFull : a / b; }
VY_FN vy_u64 vy_umod64(vy_u64 a, vy_u64 b) { return b == 0ull ? 0ull : a % b; }
VY_FN vy_i64 vy_idiv64(vy_i64 a, vy_i64 b, VY_GPTR ctl) {
    if (b == 0 || (a == VY_I64_MIN && b == -1)) { VY_ERR(ctl, VY_E_DIVISION); return 0; }
    return a / b;
}
VY_FN vy_i64 vy_imod64(vy_i64 a, vy_i64 b, VY_GPTR ctl) {
    if (b == 0 || (a == VY_I64_MIN && b == -1)) { VY_ERR(ctl, VY_E_DIVISION); return 0; }
    return a % b;
}
VY_FN vy_u64 vy_rotl64(vy_u64 a, uint b) { uint s = b & 63u; return s == 0u ? a : (a << s) | (a >> (64u - s)); }
VY_FN vy_u64 vy_rotr64(vy_u64 a, uint b) { uint s = b & 63u; return s == 0u ? a : (a >> s) | (a << (64u - s)); }
VY_FN vy_u64 vy_ctz64(vy_u64 x) { return x == 0ull ? 64ull : (vy_u64)(63u - (uint)VY_CLZ64(x & (0ull - x))); }
VY_FN vy_u64 vy_brev64(vy_u64 x) { return ((vy_u64)vy_brev((uint)x) << 32) | (vy_u64)vy_brev((uint)(x >> 32)); }
VY_FN vy_u64 vy_bswap64(vy_u64 x) { return ((vy_u64)vy_bswap((uint)x) << 32) | (vy_u64)vy_bswap((uint)(x >> 32)); }
VY_FN vy_u64 vy_usat_add64(vy_u64 a, vy_u64 b) { vy_u64 s = a + b; return s < a ? 0xFFFFFFFFFFFFFFFFull : s; }
VY_FN vy_u64 vy_usat_mul64(vy_u64 a, vy_u64 b) { return VY_UMULHI64(a, b) != 0ull ? 0xFFFFFFFFFFFFFFFFull : a * b; }
VY_FN vy_i64 vy_isat_add64(vy_i64 a, vy_i64 b) {
    vy_i64 w = (vy_i64)((vy_u64)a + (vy_u64)b);
    if ((a < 0) == (b < 0) && (w < 0) != (a < 0)) return a < 0 ? VY_I64_MIN : VY_I64_MAX;
    return w;
}
VY_FN vy_i64 vy_isat_sub64(vy_i64 a, vy_i64 b) {
    vy_i64 w = (vy_i64)((vy_u64)a - (vy_u64)b);
    if ((a < 0) != (b < 0) && (w < 0) != (a < 0)) return a < 0 ? VY_I64_MIN : VY_I64_MAX;
    return w;
}
VY_FN vy_i64 vy_isat_mul64(vy_i64 a, vy_i64 b) {
    vy_i64 lo = (vy_i64)((vy_u64)a * (vy_u64)b);
    vy_i64 hi = VY_SMULHI64(a, b);
    if (hi == (lo < 0 ? -1 : 0)) return lo;
    return ((a < 0) != (b < 0)) ? VY_I64_MIN : VY_I64_MAX;
}
VY_FN vy_u64 vy_f2ul(float x) {
    if (vy_isnan(x) || x <= 0.0f) return 0ull;
    if (x >= 18446744073709551616.0f) return 0xFFFFFFFFFFFFFFFFull;
    return (vy_u64)x;
}
VY_FN vy_i64 vy_f2l(float x) {
    if (vy_isnan(x)) return 0;
    if (x <= -9223372036854775808.0f) return VY_I64_MIN;
    if (x >= 9223372036854775808.0f) return VY_I64_MAX;
    return (vy_i64)x;
}
"""
PRELUDE64 = error_bits(PRELUDE64)

# 16-bit floats: values are their bits; integer-only conversions, the same on every target
PRELUDE16 = r"""
VY_FN float vy_h2f(vy_u16 h) {      // exact; NaN -> canonical NaN
    uint s = ((uint)h & 0x8000u) << 16;
    uint e = ((uint)h >> 10) & 0x1Fu;
    uint m = (uint)h & 0x3FFu;
    if (e == 0x1Fu) return VY_U2F(m != 0u ? VY_NAN_BITS : (s | 0x7F800000u));
    if (e == 0u) {
        if (m == 0u) return VY_U2F(s);
        uint sh = (uint)VY_CLZ(m) - 21u;           // normalise the subnormal (an f32 normal)
        return VY_U2F(s | ((113u - sh) << 23) | (((m << sh) & 0x3FFu) << 13));
    }
    return VY_U2F(s | ((e + 112u) << 23) | (m << 13));
}
VY_FN vy_u16 vy_f2h(float f) {      // round to nearest even; NaN -> 0x7E00; f32 subnormal -> 0
    uint x = VY_F2U(f);
    uint s = (x >> 16) & 0x8000u;
    uint a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (vy_u16)0x7E00u;
    if (a >= 0x477FF000u) return (vy_u16)(s | 0x7C00u);
    if (a >= 0x38800000u) {
        uint r = a - 0x38000000u;
        r = r + 0x0FFFu + ((r >> 13) & 1u);
        return (vy_u16)(s | (r >> 13));
    }
    if (a < 0x33000000u) return (vy_u16)s;
    uint e = a >> 23;
    uint m = (a & 0x7FFFFFu) | 0x800000u;
    uint sh = 126u - e;
    uint q = m >> sh;
    uint rem = m & ((1u << sh) - 1u);
    uint hf = 1u << (sh - 1u);
    if (rem > hf || (rem == hf && (q & 1u) != 0u)) q += 1u;
    return (vy_u16)(s | q);
}
VY_FN float vy_bf2f(vy_u16 h) { return VY_U2F((uint)h << 16); }   // exact; canonicalised where used
VY_FN vy_u16 vy_f2bf(float f) {     // round to nearest even; NaN -> 0x7FC0; subnormal -> 0
    uint x = VY_F2U(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (vy_u16)0x7FC0u;
    if ((x & 0x7F800000u) == 0u) x &= 0x80000000u;
    return (vy_u16)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}
VY_FN vy_u16 vy_mag2bf(vy_u64 m, uint sign) {   // an integer magnitude, rounded once to bf16
    if (m == 0ull) return (vy_u16)sign;
    uint n = 64u - (uint)VY_CLZ64(m);
    if (n <= 8u) return (vy_u16)(sign | ((126u + n) << 7) | (((uint)m << (8u - n)) & 0x7Fu));
    uint sh = n - 8u;
    vy_u64 q = m >> sh;
    vy_u64 rem = m & ((1ull << sh) - 1ull);
    vy_u64 hf = 1ull << (sh - 1u);
    if (rem > hf || (rem == hf && (q & 1ull) != 0ull)) q += 1ull;
    uint e = 134u + sh;
    if (q == 256ull) { q = 128ull; e += 1u; }
    return (vy_u16)(sign | (e << 7) | ((uint)q & 0x7Fu));
}
"""


# Integer binary operations as templates, formatted for the one operation printed ({a}, {b}
# operands; {s} "64" for 64-bit helpers; {ct}/{ut} the signed/unsigned C types)
_UNSIGNED = {
    BinOp.ADD: "{a} + {b}", BinOp.SUB: "{a} - {b}", BinOp.MUL: "{a} * {b}",
    BinOp.DIV: "vy_udiv{s}({a}, {b})", BinOp.MOD: "vy_umod{s}({a}, {b})",
    BinOp.BITAND: "{a} & {b}", BinOp.BITOR: "{a} | {b}", BinOp.BITXOR: "{a} ^ {b}",
    BinOp.MIN: "{a} < {b} ? {a} : {b}", BinOp.MAX: "{a} > {b} ? {a} : {b}",
    BinOp.ABS_DIFF: "{a} > {b} ? {a} - {b} : {b} - {a}",
    BinOp.SATURATING_ADD: "vy_usat_add{s}({a}, {b})",
    BinOp.SATURATING_SUB: "{a} > {b} ? {a} - {b} : {zero}",
    BinOp.SATURATING_MUL: "vy_usat_mul{s}({a}, {b})",
    BinOp.MUL_HIGH: "VY_UMULHI{s}({a}, {b})",
}
_SIGNED_COMMON = {
    BinOp.ADD: "({ct})(({ut}){a} + ({ut}){b})", BinOp.SUB: "({ct})(({ut}){a} - ({ut}){b})",
    BinOp.MUL: "({ct})(({ut}){a} * ({ut}){b})", BinOp.BITAND: "{a} & {b}",
    BinOp.BITOR: "{a} | {b}", BinOp.BITXOR: "{a} ^ {b}",
    BinOp.MIN: "{a} < {b} ? {a} : {b}", BinOp.MAX: "{a} > {b} ? {a} : {b}",
    BinOp.ABS_DIFF: "({ct})({a} > {b} ? ({ut}){a} - ({ut}){b} : ({ut}){b} - ({ut}){a})",
}
_SIGNED64 = {
    BinOp.DIV: "vy_idiv64({a}, {b}, vy_ctl)", BinOp.MOD: "vy_imod64({a}, {b}, vy_ctl)",
    BinOp.SATURATING_ADD: "vy_isat_add64({a}, {b})", BinOp.SATURATING_SUB: "vy_isat_sub64({a}, {b})",
    BinOp.SATURATING_MUL: "vy_isat_mul64({a}, {b})", BinOp.MUL_HIGH: "VY_SMULHI64({a}, {b})",
    **_SIGNED_COMMON,
}
_SIGNED32 = {
    BinOp.DIV: "vy_idiv({a}, {b}, vy_ctl)", BinOp.MOD: "vy_imod({a}, {b}, vy_ctl)",
    BinOp.SATURATING_ADD: "vy_isat((vy_i64){a} + (vy_i64){b})",
    BinOp.SATURATING_SUB: "vy_isat((vy_i64){a} - (vy_i64){b})",
    BinOp.SATURATING_MUL: "vy_isat((vy_i64){a} * (vy_i64){b})",
    BinOp.MUL_HIGH: "(int)(((vy_i64){a} * (vy_i64){b}) >> 32)",
    **_SIGNED_COMMON,
}


_F32_BIN = {BinOp.ADD: "VY_FADD({a}, {b})", BinOp.SUB: "VY_FSUB({a}, {b})", BinOp.MUL: "VY_FMUL({a}, {b})",
            BinOp.DIV: "VY_FDIV({a}, {b})", BinOp.MOD: "{fmod}({a}, {b})", BinOp.MIN: "vy_fmin({a}, {b})",
            BinOp.MAX: "vy_fmax({a}, {b})", BinOp.ABS_DIFF: "{fabs}(VY_FSUB({a}, {b}))"}
_F32_UN = {UnOp.NEGATE: "-{a}", UnOp.ABS: "{fabs}({a})", UnOp.SQRT: "{sqrt}({a})",
           UnOp.FLOOR: "vy_floor({a})", UnOp.CEIL: "vy_ceil({a})", UnOp.TRUNC: "vy_trunc({a})",
           UnOp.ROUND: "vy_fround({a})", UnOp.SIGN: "vy_fsign({a})"}   # RECIPROCAL: `reciprocal`
_ONE = "VY_U2F(0x3F800000u)"   # the f32 literal 1.0 as `CSyntax.lit` spells it
_F2I = {DataType.U32: "vy_f2u", DataType.I32: "vy_f2i", DataType.U64: "vy_f2ul", DataType.I64: "vy_f2l"}


@dataclass(frozen=True)
class CSyntax(Syntax):
    """How a C-family target spells things. ``header`` must define: the ``uint`` type,
    ``vy_u64``/``vy_i64``, ``vy_u8``/``vy_i8``/``vy_u16``/``vy_i16``, ``VY_FN`` (helper
    qualifier), ``VY_GPTR`` (global word pointer), ``VY_ERR(ctl, bit)`` (atomic OR into the
    control block's error word), ``VY_CLZ64``/``VY_POPC64``, ``VY_UMULHI64``/``VY_SMULHI64``,
    ``VY_U64_F``/``VY_I64_F`` (64-bit integer to f32, round to nearest even),
    ``VY_F2U``/``VY_U2F`` (bit casts), ``VY_FADD``/``VY_FSUB``/``VY_FMUL``/``VY_FDIV``
    (correctly rounded, never contracted), ``VY_TRUNC``/``VY_FLOOR``/``VY_CEIL``, ``VY_CLZ``,
    ``VY_CANCELLED(ctl)`` (a volatile read of the control block's cancel word)."""

    name: str
    header: str                                   # target typedefs and macro definitions
    kernel: str                                   # kernel qualifier(s), e.g. "__kernel void"
    global_param: str                             # pointer parameter type for a bound buffer ("{t}")
    readonly_param: str                           # ... for a READ buffer (never written)
    local_array: str                              # "{t}", "{name}" and "{count}" placeholders
    local_ptr: str                                # pointer type into workgroup memory
    global_ptr: str                               # pointer type into global memory (atomics)
    barrier_line: str
    builtins: Callable[[Builtin, int], str]
    atomics: Callable[[AtomicOp, str, str, str | None, bool, bool], str]  # (op, ptr, val, expected, signed, wide)
    fn: dict[str, str]                            # math/intrinsic function names ("rcp", "iabs", "iabs64" optional)
    # (op, C type, value, lane, linear-lid expr) -> C expression; None: no subgroup support
    subgroup_ops: Callable[[SubgroupOp, str, str | None, str | None, str], str] | None = None
    # the target's flush-to-zero forms of the operations in vyre.lower.floats.HW_FTZ_* flush
    # subnormal inputs and results exactly as S9 does (then they need no explicit flush)
    hw_ftz: bool = False
    # 128-bit access of 4 u32 words at element index i of a word pointer (None: no vector form)
    vload4: Callable[[str, str], str] | None = None           # (ptr, i) -> uint4 expression
    vstore4: Callable[[str, str, str], str] | None = None     # (ptr, i, uint4 expr) -> statement
    make4: Callable[[list[str]], str] | None = None            # four u32 expressions -> uint4
    # scalar bit-exact helpers in the prelude (a host C target may leave out what it lacks)
    preludes: tuple[str, ...] = ()
    daz: str = "vy_daz"   # the flush (`Syntax.daz`); the header may define a faster one
    # a target's own matmul_acc: (printer, statement) -> lines, and the helpers those lines
    # call (emitted when the plan leaves a matmul_acc to the target); None: scalar loops
    matmul_native: Callable[[Printer, N.Node], list[str]] | None = None
    matmul_prelude: str = ""
    # a target's own load_tile likewise (emitted when the plan leaves a load_tile to the target)
    tile_native: Callable[[Printer, N.Node], list[str]] | None = None
    tile_prelude: str = ""
    unswitch_loads: bool = False   # `Syntax.unswitch_loads`

    types = CT
    # the last kernel parameter, where the cancel word has one of its own ('': ``vy_ctl[1]``)
    cancel_param = ""
    cancel_poll = ("if ((++vy_trips & 1023u) == 0u && VY_CANCELLED(vy_ctl)) return;",)
    chunk_poll = ("vy_trips += {n};",
                  "if (vy_trips >= 1024u) {{ vy_trips &= 1023u; if (VY_CANCELLED(vy_ctl)) return; }}")

    @property
    def barrier(self) -> tuple[str, ...]:   # type: ignore[override]
        return (self.barrier_line,)

    @property
    def subgroups(self) -> bool:   # type: ignore[override]
        return self.subgroup_ops is not None

    @property
    def vector(self) -> bool:   # type: ignore[override]
        return self.vload4 is not None

    # ---- declarations and statements ----------------------------------------------------
    def var(self, name: str, type_: str, init: str | None) -> str:
        return f"{type_} {name} = {init if init is not None else f'({type_})0'};"

    def temp(self, name: str, type_: str, value: str) -> str:
        return f"const {type_} {name} = {value};"

    def inline(self, head: str, *stmts: str) -> str:
        return f"{head} {stmts[0]}" if len(stmts) == 1 else f"{head} {{ {' '.join(stmts)} }}"

    def error(self, bit: int) -> str:
        return f"VY_ERR(vy_ctl, {bit}u);"

    def while_open(self, p: Printer, decls: list[str]) -> None:
        p.open("")
        for d in decls:
            p.out(d)
        p.open("for (;;)")

    def while_close(self, p: Printer) -> None:
        p.close()
        p.close()

    # ---- values -----------------------------------------------------------------------------
    def lit(self, t: DataType, bits: int) -> str:
        if t is U32:
            return f"{bits}u"
        if t is DataType.I32:
            return f"((int){bits}u)"
        if t is F32:
            return f"VY_U2F(0x{bits:08X}u)"
        if t.is_wide:
            return f"(({CT[t]})0x{bits:016X}ull)"
        if t.is_half:
            return f"((vy_u16)0x{bits:04X}u)"
        return "true" if bits else "false"

    def builtin(self, kind: Builtin, axis: int) -> str:
        return self.builtins(kind, axis)

    def count(self, p: Printer, buffer: str) -> str:
        return f"n_{buffer}"

    def load(self, p: Printer, buffer: str, i: str, in_bounds: bool | str) -> str:
        st = ST[p.program.buffer(buffer).dtype.size]
        if in_bounds is True:
            return p.fresh_as(st, f"{p.ptr(buffer)}[{i}]")
        check = f"{i} < {p.count(buffer)}" if in_bounds is False else f"{in_bounds} || {i} < {p.count(buffer)}"
        return p.fresh_as(st, f"({check}) ? {p.ptr(buffer)}[{i}] : ({st})0")

    def from_word(self, p: Printer, word: str, t: DataType) -> str:
        """A stored element of type ``t`` as its value (narrow integers widen)."""
        if t in (U32, DataType.U64) or t.is_half:
            return word
        if t is F32:
            return p.fresh(t, f"VY_U2F({word})")
        if t is BOOL:
            return p.fresh(t, f"{word} != 0u")
        if t in (DataType.U8, DataType.U16):
            return p.fresh(U32, f"(uint){word}")
        if t in (DataType.I8, DataType.I16):
            return p.fresh(DataType.I32, f"(int)(vy_i{t.bits}){word}")
        return p.fresh(t, f"({CT[t]}){word}")

    def to_word(self, v: str, t: DataType, stored: DataType | None = None) -> str:
        """A value of type ``t`` as an element of type ``stored`` (narrow stores keep the
        low bits)."""
        if t is F32:
            return f"VY_F2U({v})"
        if t is BOOL:
            return f"({v} ? 1u : 0u)"
        return f"({ST[(stored or t).size]}){v}"

    def store(self, p: Printer, buffer: str, i: str, word: str) -> str:
        return f"{p.ptr(buffer)}[{i}] = {word};"

    def select(self, c: str, a: str, b: str) -> str:
        return f"{c} ? {a} : {b}"

    def bitcast(self, v: str, t: DataType, d: DataType) -> str:
        if d is F32:
            return f"VY_U2F((uint){v})"
        if t is F32:
            return f"({CT[d]})VY_F2U({v})"
        if d.is_half:
            return f"(vy_u16)((uint){v} & 0xFFFFu)"
        return f"({CT[d]}){v}"

    # ---- operations -------------------------------------------------------------------------
    def int_bin(self, op: BinOp, t: DataType, rt: DataType, a: str, b: str) -> str:
        wide, ut = t.is_wide, UT[t]
        if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
            s = f"((uint){b} & {t.bits - 1}u)"
            if op is BinOp.SHR:
                return f"{a} >> {s}"  # signed: arithmetic shift
            ua = f"({ut}){a}"
            sfx = "64" if wide else ""
            body = {BinOp.SHL: f"{ua} << {s}", BinOp.ROTATE_LEFT: f"vy_rotl{sfx}({ua}, {s})",
                    BinOp.ROTATE_RIGHT: f"vy_rotr{sfx}({ua}, {s})"}[op]
            return f"({CT[rt]})({body})"
        if not t.is_signed:
            if op is BinOp.MUL_HIGH and not wide:
                return f"(uint)(((vy_u64){a} * (vy_u64){b}) >> 32)"
            return _UNSIGNED[op].format(a=a, b=b, s="64" if wide else "", zero="0ull" if wide else "0u")
        return (_SIGNED64 if wide else _SIGNED32)[op].format(a=a, b=b, ct=CT[t], ut=ut)

    def int_un(self, op: UnOp, t: DataType, a: str) -> str:
        ct, wide = CT[t], t.is_wide
        u = f"({UT[t]}){a}"
        zero = "0ull" if wide else "0u"
        if op is UnOp.NEGATE:
            return f"({ct})({zero} - {u})"
        if op is UnOp.BITNOT:
            return f"~{a}"
        if op is UnOp.ABS:
            if not t.is_signed:
                return a
            own = self.fn.get("iabs64" if wide else "iabs")   # a target whose compiler misreads the idiom
            return f"({ct}){own}({a})" if own else f"{a} < 0 ? ({ct})({zero} - {u}) : {a}"
        if op is UnOp.SIGN:
            return f"{a} != 0 ? ({ct})1 : ({ct})0" if not t.is_signed else \
                f"{a} > 0 ? ({ct})1 : ({a} < 0 ? ({ct})-1 : ({ct})0)"
        f = self.fn
        if wide:
            body = {UnOp.POPCOUNT: f"(vy_u64)VY_POPC64({u})", UnOp.CLZ: f"(vy_u64)VY_CLZ64({u})",
                    UnOp.CTZ: f"vy_ctz64({u})", UnOp.REVERSE_BITS: f"vy_brev64({u})",
                    UnOp.BYTE_SWAP: f"vy_bswap64({u})"}[op]
        else:
            body = {UnOp.POPCOUNT: f"(uint){f['popcount']}({u})", UnOp.CLZ: f"(uint){f['clz']}({u})",
                    UnOp.CTZ: f"vy_ctz({u})", UnOp.REVERSE_BITS: f"{f['brev']}({u})",
                    UnOp.BYTE_SWAP: f"vy_bswap({u})"}[op]
        return f"({ct}){body}"

    def f32_cmp(self, op: BinOp, a: str, b: str) -> str:
        return f"{a} {CMP[op]} {b}"

    def f32_bin(self, op: BinOp, a: str, b: str) -> str:
        if op is BinOp.DIV and a == _ONE and "rcp" in self.fn:   # 1 / x: the same rounding
            return self.reciprocal(b)
        body = _F32_BIN.get(op)   # else a correctly rounded function (S13): vyre.lower.crmath
        return body.format(a=a, b=b, **self.fn) if body is not None else f"{crmath.HELPER[op]}({a}, {b})"

    def reciprocal(self, a: str) -> str:
        """The correctly rounded ``1 / a``: the target's reciprocal function (``fn["rcp"]``)
        where it has one, else its division."""
        rcp = self.fn.get("rcp")
        return f"{rcp}({a})" if rcp else f"VY_FDIV(1.0f, {a})"

    def f32_un(self, op: UnOp, a: str) -> str:
        if op is UnOp.RECIPROCAL:
            return self.reciprocal(a)
        body = _F32_UN.get(op)    # else a correctly rounded function (S13): vyre.lower.crmath
        return body.format(a=a, **self.fn) if body is not None else f"{crmath.HELPER[op]}({a})"

    def cast(self, p: Printer, v: str, t: DataType, f: Flags, d: DataType) -> tuple[str, DataType, Flags]:
        if t.is_half:   # through its exact f32 value
            if d.is_half:
                w, _, fw = self.widen(p, v, t)
                return self.narrow(p, p.operand(w, fw, False), d), d, CANON
            v, t, f = self.widen(p, v, t)
            if d is F32:
                return v, d, f
        if d is BOOL:
            if t is F32:
                # flushed in code: `x != 0.0f` may be compiled as a test of the bits, which
                # sees a subnormal as non-zero (the H100 did: conform random/11000220)
                return p.fresh(d, f"{p.operand(v, f, False)} != 0.0f"), d, CANON
            return p.fresh(d, f"{v} != 0"), d, CANON
        if t is BOOL:
            if d.is_half:
                return p.fresh(d, f"{v} ? (vy_u16)0x{0x3C00 if d is DataType.F16 else 0x3F80:04X}u : (vy_u16)0u"), d, CANON
            one, zero = ("1.0f", "0.0f") if d is F32 else (f"({CT[d]})1", f"({CT[d]})0")
            return p.fresh(d, f"{v} ? {one} : {zero}"), d, CANON
        if d.is_half and t is F32:
            return self.narrow(p, p.operand(v, f, False), d), d, CANON
        if d is DataType.BF16:   # an integer, rounded once
            if t.is_signed:
                m = f"({v} < 0 ? (vy_u64)0ull - (vy_u64)(vy_i64){v} : (vy_u64)(vy_i64){v})"
                return p.fresh(d, f"vy_mag2bf({m}, {v} < 0 ? 0x8000u : 0u)"), d, CANON
            return p.fresh(d, f"vy_mag2bf((vy_u64){v}, 0u)"), d, CANON
        if d is F32 or d is DataType.F16:
            key = {U32: "u2f", DataType.I32: "i2f"}.get(t)
            conv = f"{self.fn[key]}({v})" if key else f"{'VY_U64_F' if t is DataType.U64 else 'VY_I64_F'}({v})"
            r = p.fresh(F32, conv)
            return (r, d, CANON) if d is F32 else (self.narrow(p, r, d), d, CANON)
        if t is F32:  # truncation toward zero: a subnormal gives 0 either way
            return p.fresh(d, f"{_F2I[d]}({v})"), d, CANON
        return p.fresh(d, f"({CT[d]}){v}"), d, CANON

    def fma(self, a: str, b: str, c: str) -> str:
        return f"{self.fn['fma']}({a}, {b}, {c})"

    def widen(self, p: Printer, v: str, t: DataType) -> tuple[str, DataType, Flags]:
        if t is DataType.F16:   # never subnormal as f32; NaN canonical
            return p.fresh(F32, f"vy_h2f({v})"), F32, CANON
        return p.fresh(F32, f"vy_bf2f({v})"), F32, Flags(False, True, True)

    def narrow(self, p: Printer, v: str, t: DataType) -> str:
        """Round an f32 result once (the helpers canonicalise NaN and flush subnormals)."""
        return p.fresh(t, f"{'vy_f2h' if t is DataType.F16 else 'vy_f2bf'}({v})")

    def atomic(self, p: Printer, e: E.Atomic, i: str, v: str, t: DataType, x: str | None) -> str:
        ct = CT[t]
        ptr_t = self.local_ptr if p.program.buffer(e.buffer).is_workgroup else self.global_ptr
        ptr = f"({ptr_t.format(t=ct)})&{p.ptr(e.buffer)}[{i}]"
        call = self.atomics(e.op, ptr, f"({ct}){v}", None if x is None else f"({ct}){x}", t.is_signed, t.is_wide)
        if p.ranges.in_bounds(e.buffer, e.index):
            return p.fresh(t, f"({ct}){call}")
        return p.fresh(t, f"({i} < {p.count(e.buffer)}) ? ({ct}){call} : ({ct})0")

    def subgroup(self, op: SubgroupOp, ctype: str, value: str | None, lane: str | None, lin: str) -> str:
        assert self.subgroup_ops is not None
        return self.subgroup_ops(op, ctype, value, lane, lin)

    def matmul(self, p: Printer, n: N.Node) -> None:
        if self.matmul_native is None:
            super().matmul(p, n)
            return
        for line in self.matmul_native(p, n):
            p.out(line)

    def tile(self, p: Printer, n: N.Node) -> None:
        if self.tile_native is None:
            super().tile(p, n)
            return
        for line in self.tile_native(p, n):
            p.out(line)

    # ---- kernels ------------------------------------------------------------------------------
    def workgroup_counts(self, p: Printer) -> dict[str, int]:
        """The elements each workgroup array takes in the kernel (a target may give an array
        more, `CudaSyntax`): all of them are declared and zeroed."""
        return {w.name: w.count for w in p.plan.workgroup}

    def zeroed_counts(self, p: Printer) -> dict[str, int]:
        """The elements of each workgroup array the kernel zeroes first (a target may leave
        out arrays that are written whole before any read, `CudaSyntax`)."""
        return self.workgroup_counts(p)

    def workgroup_declarations(self, p: Printer) -> list[str]:
        counts = self.workgroup_counts(p)
        return [self.local_array.format(t=ST[w.dtype.size], name=f"w_{w.name}", count=counts[w.name])
                for w in p.plan.workgroup]

    def prologue(self, p: Printer, index: int) -> None:
        plan = p.plan
        for line in self.workgroup_declarations(p):
            p.out(line)
        for loc in p.program.local_buffers:   # per invocation, zeroed in every phase
            st = ST[loc.dtype.size]
            p.out(f"{st} l_{loc.name}[{loc.count}];")
            p.out(f"for (uint z = 0u; z < {loc.count}u; z++) l_{loc.name}[z] = ({st})0;")
        if plan.workgroup:
            wx, wy, wz = p.program.workgroup_size
            p.out(f"const uint vy_lin = {p.lin()};")
            counts = self.zeroed_counts(p)
            for w in plan.workgroup:
                if not counts[w.name]:
                    continue
                p.out(f"for (uint z = vy_lin; z < {counts[w.name]}u; z += {wx * wy * wz}u) "
                      f"w_{w.name}[z] = ({ST[w.dtype.size]})0;")
            p.out(self.barrier_line)

    def kernel_head(self, p: Printer, index: int) -> str:
        plan = p.plan
        params = [(self.readonly_param if not b.writable else self.global_param).format(t=ST[b.dtype.size])
                  + f" b_{b.name}" for b in plan.bound]
        params += [f"uint n_{b.name}" for b in plan.bound]
        if plan.vector > 1:
            params.append("uint vy_gx")
        params.append(self.global_param.format(t="uint") + " vy_ctl")
        if self.cancel_param:
            params.append(self.cancel_param)
        return f"{self.kernel} {plan.entries[index]}({', '.join(params)})"

    def _lanes_in_range(self, p: Printer, aligned: bool) -> None:
        """The vector form's head: this invocation's first gid.x (``vy_base``), and an if
        opened on all of its lanes being in range (``aligned``: and the vector-accessed
        buffers 16-byte aligned)."""
        plan = p.plan
        w = plan.vector
        p.out(f"const uint vy_base = {w}u * {self.builtins(Builtin.GID, 0)};")
        vec = sorted(plan.vector_loads | plan.vector_stores)
        cond = [f"vy_base + {w}u <= vy_gx"] + [f"vy_base + {w}u <= {p.count(b)}" for b in vec]
        if aligned:
            cond += [f"(((size_t){p.ptr(b)}) & 15) == 0" for b in vec]
        p.open(f"if ({' && '.join(cond)})")

    def _lanes_one_at_a_time(self, p: Printer, body: tuple) -> None:
        """The vector form's else branch: each lane below ``vy_gx`` alone, with its own gid.x."""
        p.open("else")
        p.open(f"for (uint vy_j = 0u; vy_j < {p.plan.vector}u; vy_j++)")
        p.gid_x = "vy_gid"
        p.out("const uint vy_gid = vy_base + vy_j;")
        p.open("if (vy_gid < vy_gx)")
        p.block(body)
        p.close()
        p.close()
        p.close()
        p.gid_x = None

    def lane_loop(self, p: Printer, body: tuple) -> None:
        """The vector form's lanes as a loop (`KernelPlan.lane_loop`), when all of them are in
        range: each lane's body with the functions of `crmath.LANE_HELPER` on their common
        path (each entry's name is defined as its lane function for the loop, which sets the
        lane's bit of ``vy_slow`` where the entry would have left that path), then the body
        again, as written, for those lanes only. The stores of the vector form go to outputs
        that the body never reads (`lane_loop_ops`), so a lane run twice stores what the second
        run computes. Else the lanes one at a time, as `vector_body` does."""
        plan = p.plan
        w = plan.vector
        self._lanes_in_range(p, aligned=False)
        p.out("uint vy_slow = 0u;")
        names = [crmath.LANE_HELPER[op] for op in sorted(lane_loop_ops(plan), key=lambda o: o.value)]
        for entry, lane in names:
            p.out(f"#define {entry}(x) vy_lane_f32({lane}(x), &vy_s)")
        p.out(f"#pragma clang loop vectorize(enable) vectorize_width({LANE_WIDTH})")
        p.open(f"for (uint vy_j = 0u; vy_j < {w}u; vy_j++)")
        p.gid_x = "vy_gid"
        p.out("const uint vy_gid = vy_base + vy_j;")
        p.out("uint vy_s = 0u;")
        p.lane_loads = {b: f"{p.ptr(b)}[vy_gid]" for b in plan.vector_loads}
        p.lane_stores = {b: f"{p.ptr(b)}[vy_gid]" for b in plan.vector_stores}
        p.open("")
        p.block(body)
        p.close()
        p.out("vy_slow |= vy_s << vy_j;")
        p.close()
        for entry, _ in names:
            p.out(f"#undef {entry}")
        p.open("if (vy_slow != 0u)")
        p.open(f"for (uint vy_j = 0u; vy_j < {w}u; vy_j++)")
        p.out("const uint vy_gid = vy_base + vy_j;")
        p.open("if ((vy_slow >> vy_j) & 1u)")
        p.block(body)
        p.close()
        p.close()
        p.close()
        p.lane_loads, p.lane_stores = {}, {}
        p.close()
        self._lanes_one_at_a_time(p, body)

    def vector_body(self, p: Printer, body: tuple) -> None:
        """Four consecutive invocations per thread: 128-bit loads and stores when all four
        elements are in range (and the pointers aligned), else the four one at a time. Either
        way exactly the invocations gid.x < vy_gx run, each with its own gid.x."""
        if p.plan.lane_loop:
            self.lane_loop(p, body)
            return
        assert self.vload4 is not None and self.vstore4 is not None and self.make4 is not None
        plan = p.plan
        w = plan.vector
        self._lanes_in_range(p, aligned=True)
        for b in sorted(plan.vector_loads):
            p.out(f"const uint4 vy_{b} = {self.vload4(p.ptr(b), 'vy_base')};")
        for b in sorted(plan.vector_stores):
            p.out(f"uint {', '.join(f'vs_{b}_{j}' for j in range(w))};")
        for j in range(w):
            p.gid_x = p.fresh(U32, f"vy_base + {j}u")
            p.lane_loads = {b: f"vy_{b}.{'xyzw'[j]}" for b in plan.vector_loads}
            p.lane_stores = {b: f"vs_{b}_{j}" for b in plan.vector_stores}
            p.open("")
            p.block(body)
            p.close()
        for b in sorted(plan.vector_stores):
            p.out(self.vstore4(p.ptr(b), "vy_base", self.make4([f"vs_{b}_{j}" for j in range(w)])))
        p.lane_loads, p.lane_stores = {}, {}
        p.close()
        self._lanes_one_at_a_time(p, body)

    def module(self, p: Printer, kernels: list[str]) -> str:
        preludes = [self.header, PRELUDE, *self.preludes]
        if p.plan.uses_wide or p.plan.uses_half:
            preludes.append(PRELUDE64)
        if p.plan.uses_half:
            preludes.append(PRELUDE16)
        if p.plan.native_matmul:
            preludes.append(self.matmul_prelude)
        if p.plan.native_tiles:
            preludes.append(self.tile_prelude)
        if p.plan.uses_transcendentals:
            ops = p.plan.program.facts.transcendentals
            preludes.append(self.crmath_head(p))
            preludes.append(crmath.lane_prelude(ops) + LANE_PRELUDE if p.plan.lane_loop else crmath.prelude(ops))
        return "\n".join([*preludes, *kernels])

    def crmath_head(self, p: Printer) -> str:
        """What goes right before the correctly rounded functions (CUDA: VYM_SHARED_TABLES,
        where the kernels copy the tables those functions read into shared memory)."""
        return ""


# the lane loop's vector width: 8 doubles (one AVX-512 register; LLVM splits it where vectors
# are narrower). PoCL 3.1 on a Skylake-AVX512 VM chose 4 by itself: exp's 16M elements took
# 22 ms in the kernel, 13-15 ms at 8
LANE_WIDTH = 8

# a lane function's f32, its "left the common path" bit or-ed into the lane's flag word (the
# lane function is pure and inlined: its two uses of ``r`` compute it once)
LANE_PRELUDE = """VY_FN float vy_lane_f32_(float r, bool ok, uint* s) { *s |= ok ? 0u : 1u; return r; }
#define vy_lane_f32(r, s) vy_lane_f32_((r).v0, (r).v1, (s))
"""


def lane_loop_ops(plan: KernelPlan) -> frozenset:
    """The ops of `crmath.LANE_HELPER` in a vector-form plan whose lanes may run as a loop
    (`KernelPlan.lane_loop`): every store of the body is a vector store (an output at gid.x
    that the body never reads), so running a lane's body again changes nothing but what it
    stores. Empty when there are none or the plan has no such form."""
    if plan.vector <= 1 or not plan.uses_transcendentals:
        return frozenset()
    if plan.program.facts.stored - plan.vector_stores:   # (one phase: the program's facts are its)
        return frozenset()
    return frozenset(op for op in plan.program.facts.transcendentals if op in crmath.LANE_HELPER)


def emit_source(plan: KernelPlan, syntax: CSyntax) -> str:
    """Complete target source: header, shared prelude (plus the 64-bit and 16-bit float
    helpers when the program uses those types), one kernel per phase."""
    return emit(plan, syntax)
