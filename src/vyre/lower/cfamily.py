"""C-family source emission shared by the OpenCL C and CUDA C printers.

The emitter flattens every expression into typed temporaries in evaluation order (C leaves
operand order unspecified; vyre does not), applies the semantics of docs/semantics.md
explicitly (bounds-checked loads and stores, f32 canonicalisation, integer edge cases,
saturating float->int casts, wrap-around i32 arithmetic done on u32) and prints through a
`Dialect`, which spells the target's qualifiers, builtins, barriers and atomics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.errors import VyreError
from vyre.ir.typecheck import bin_result, infer, un_result
from vyre.ir.types import (
    SUBGROUP_REDUCTIONS,
    AtomicOp,
    BinOp,
    Builtin,
    DataType,
    MemoryOrdering,
    SubgroupOp,
    UnOp,
)

from .floats import (
    CANON,
    FLUSHED,
    RAW,
    Flags,
    flags_of,
    hardware_bin,
    hardware_un,
    numeric_only_buffers,
    result_flags,
    var_flags,
)
from .plan import KernelPlan
from .printer import Printer
from .ranges import Ranges

# C types of values, and of stored elements (by size); 16-bit floats are held as their bits
CT = {DataType.U32: "uint", DataType.I32: "int", DataType.F32: "float", DataType.BOOL: "bool",
      DataType.U64: "vy_u64", DataType.I64: "vy_i64", DataType.F16: "vy_u16", DataType.BF16: "vy_u16"}
UT = {DataType.U32: "uint", DataType.I32: "uint", DataType.U64: "vy_u64", DataType.I64: "vy_u64"}
ST = {1: "vy_u8", 2: "vy_u16", 4: "uint", 8: "vy_u64"}
ERR_DIVISION, ERR_LOOP_LIMIT = 1, 2   # control-block error bits (vyre.driver.errors.CTL_ERRORS)


@dataclass(frozen=True)
class Dialect:
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
    barrier: str
    builtin: Callable[[Builtin, int], str]
    atomic: Callable[[AtomicOp, str, str, str | None, bool, bool], str]  # (op, ptr, val, expected, signed, wide)
    fn: dict[str, str]                            # math/intrinsic function names
    # (op, C type, value, lane, linear-lid expr) -> C expression; None: no subgroup support
    subgroup: Callable[[SubgroupOp, str, str | None, str | None, str], str] | None = None
    # the target's flush-to-zero forms of the operations in vyre.lower.floats.HW_FTZ_* flush
    # subnormal inputs and results exactly as S9 does (then they need no explicit flush)
    hw_ftz: bool = False
    # 128-bit access of 4 u32 words at element index i of a word pointer (None: no vector form)
    vload4: Callable[[str, str], str] | None = None           # (ptr, i) -> uint4 expression
    vstore4: Callable[[str, str, str], str] | None = None     # (ptr, i, uint4 expr) -> statement
    make4: Callable[[list[str]], str] | None = None            # four u32 expressions -> uint4


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
    if (b == 0 || (a == (int)0x80000000u && b == -1)) { VY_ERR(ctl, 1u); return 0; }
    return a / b;
}
VY_FN int vy_imod(int a, int b, VY_GPTR ctl) {
    if (b == 0 || (a == (int)0x80000000u && b == -1)) { VY_ERR(ctl, 1u); return 0; }
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

# 64-bit integers (only emitted when a program uses them)
PRELUDE64 = r"""
#define VY_I64_MIN ((vy_i64)0x8000000000000000ull)
#define VY_I64_MAX ((vy_i64)0x7FFFFFFFFFFFFFFFull)
VY_FN vy_u64 vy_udiv64(vy_u64 a, vy_u64 b) { return b == 0ull ? 0xFFFFFFFFFFFFFFFFull : a / b; }
VY_FN vy_u64 vy_umod64(vy_u64 a, vy_u64 b) { return b == 0ull ? 0ull : a % b; }
VY_FN vy_i64 vy_idiv64(vy_i64 a, vy_i64 b, VY_GPTR ctl) {
    if (b == 0 || (a == VY_I64_MIN && b == -1)) { VY_ERR(ctl, 1u); return 0; }
    return a / b;
}
VY_FN vy_i64 vy_imod64(vy_i64 a, vy_i64 b, VY_GPTR ctl) {
    if (b == 0 || (a == VY_I64_MIN && b == -1)) { VY_ERR(ctl, 1u); return 0; }
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


_CMP = {BinOp.EQ: "==", BinOp.NE: "!=", BinOp.LT: "<", BinOp.GT: ">", BinOp.LE: "<=", BinOp.GE: ">="}
_BOOL_SYM = {BinOp.EQ: "==", BinOp.NE: "!=", BinOp.AND: "&&", BinOp.OR: "||"}
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


class _Emitter(Printer):
    def __init__(self, plan: KernelPlan, d: Dialect) -> None:
        self.plan, self.d = plan, d
        self.program = plan.program
        self.lines: list[str] = []
        self.tmp = 0
        self.indent = 1
        self.scope: list[dict[str, DataType]] = [{}]
        self.alive = False  # inside the "alive" scheme (a barrier program that may return)
        self.cancel = False  # loops poll the cancel word (kernels without barriers)
        self.hw = d.hw_ftz
        self.flushed = numeric_only_buffers(self.program)   # f32 workgroup memory flushed at store
        self.vars = var_flags(self.program, self.hw, self.flushed)   # what each f32 local may hold
        self.ranges = Ranges(self.program)
        # the elementwise vector form: each lane's body sees its own gid.x and the words of
        # the vector-loaded and vector-stored buffers (see `vector_kernel`)
        self.gid_x: str | None = None
        self.lane_loads: dict[str, str] = {}
        self.lane_stores: dict[str, str] = {}

    # ---- output helpers ----------------------------------------------------------------
    def fresh(self, t: DataType, value: str) -> str:
        return self.fresh_c(CT[t], value)

    def fresh_of(self, t: DataType):
        """`fresh` with its type bound."""
        ctype = CT[t]
        return lambda value: self.fresh_c(ctype, value)

    def fresh_c(self, ctype: str, value: str) -> str:
        self.tmp += 1
        name = f"t{self.tmp}"
        self.out(f"const {ctype} {name} = {value};")
        return name

    def count(self, buffer: str) -> str:
        decl = self.program.buffer(buffer)
        if not decl.is_bound:
            return f"{decl.count}u"
        return f"n_{buffer}"

    # ---- f32 canonicalisation where it is observable (vyre.lower.floats) ---------------
    def operand(self, v: str, f: Flags, hardware: bool) -> str:
        """``v`` as the operand of a numeric operation: subnormals flushed, unless the
        target's hardware form of the operation flushes them itself."""
        if f.sub and not (hardware and self.hw):
            return self.fresh(DataType.F32, f"vy_daz({v})")
        return v

    def observed(self, v: str, f: Flags) -> str:
        """``v`` where its bits become visible (a store, a bitcast, a local that may also hold
        raw bits): raw bits as they are, results of arithmetic canonical."""
        if f.raw or not (f.sub or f.nan):
            return v
        fn = "vy_canon" if f.sub and f.nan else ("vy_cnan" if f.nan else "vy_daz")
        return self.fresh(DataType.F32, f"{fn}({v})")

    # ---- expressions: returns (C operand, type, f32 flags) ------------------------------
    def expr(self, e: E.Expr) -> tuple[str, DataType, Flags]:
        fn = self.d.fn
        if isinstance(e, E.Spec):  # drivers specialize first; a leftover takes its default
            return self.expr(E.Lit(e.dtype, e.bits))
        if isinstance(e, E.Lit):
            t = e.dtype
            if t is DataType.U32:
                return f"{e.bits}u", t, CANON
            if t is DataType.I32:
                return f"((int){e.bits}u)", t, CANON
            if t is DataType.F32:
                return f"VY_U2F(0x{e.bits:08X}u)", t, CANON
            if t.is_wide:
                return f"(({CT[t]})0x{e.bits:016X}ull)", t, CANON
            if t.is_half:
                return f"((vy_u16)0x{e.bits:04X}u)", t, CANON
            return ("true" if e.bits else "false"), t, CANON
        if isinstance(e, E.Var):
            t = self.lookup(e.name)
            return f"v_{e.name}", t, self.vars.get(e.name, CANON) if t is DataType.F32 else CANON
        if isinstance(e, E.BufLen):
            return self.count(e.buffer), DataType.U32, CANON
        if isinstance(e, E.Id):
            if self.gid_x is not None and e.kind is Builtin.GID and e.axis == 0:
                return self.gid_x, DataType.U32, CANON
            return self.d.builtin(e.kind, e.axis), DataType.U32, CANON
        if isinstance(e, E.Load):
            t = self.program.buffer(e.buffer).dtype
            if e.buffer in self.lane_loads and e.index == _GX:
                word = self.lane_loads[e.buffer]
                return self.from_word(word, t), t, RAW if t is DataType.F32 else CANON
            loaded = (FLUSHED if e.buffer in self.flushed else RAW) if t is DataType.F32 else CANON
            i, _, _ = self.expr(e.index)
            st = ST[t.size]
            if self.ranges.in_bounds(e.buffer, e.index):
                word = self.fresh_c(st, f"{self.ptr(e.buffer)}[{i}]")
            else:
                word = self.fresh_c(st, f"({i} < {self.count(e.buffer)}) ? {self.ptr(e.buffer)}[{i}] : ({st})0")
            return self.from_word(word, t), t.value_type, loaded
        if isinstance(e, E.Bin):
            return self.binary(e)
        if isinstance(e, E.Un):
            return self.unary(e)
        if isinstance(e, E.Select):
            c, _, _ = self.expr(e.cond)
            a, t, fa = self.expr(e.if_true)
            b, _, fb = self.expr(e.if_false)
            if t is DataType.F32 and fa.raw != fb.raw:  # raw bits win: the other arm canonical
                a, b = (a, self.observed(b, fb)) if fa.raw else (self.observed(a, fa), b)
                return self.fresh(t, f"{c} ? {a} : {b}"), t, RAW
            return self.fresh(t, f"{c} ? {a} : {b}"), t, fa | fb
        if isinstance(e, E.Cast):
            return self.cast(e)
        if isinstance(e, E.Bitcast):
            v, t, f = self.expr(e.value)
            d = e.dtype
            if d is t or (t.is_half and d.is_half):
                return v, d, f
            if d is DataType.F32:
                return self.fresh(d, f"VY_U2F((uint){v})"), d, RAW
            if t is DataType.F32:
                return self.fresh(d, f"({CT[d]})VY_F2U({self.observed(v, f)})"), d, CANON
            if d.is_half:
                return self.fresh(d, f"(vy_u16)((uint){v} & 0xFFFFu)"), d, CANON
            return self.fresh(d, f"({CT[d]}){v}"), d, CANON
        if isinstance(e, E.Fma):
            parts = [self.expr(x) for x in (e.a, e.b, e.c)]
            t = parts[0][1]
            if t.is_half:
                parts = [self.widen(v, t) for v, _, _ in parts]
            a, b, c = (self.operand(v, f, False) for v, _, f in parts)
            r = self.fresh(DataType.F32, f"{fn['fma']}({a}, {b}, {c})")
            if t.is_half:
                return self.narrow(r, t), t, CANON
            return r, DataType.F32, result_flags(self.hw, rounded=True, hardware=False)
        if isinstance(e, E.Atomic):
            return self.atomic(e)
        if isinstance(e, E.Subgroup):
            return self.subgroup(e)
        raise TypeError(type(e).__name__)

    def subgroup(self, e: E.Subgroup) -> tuple[str, DataType, Flags]:
        if self.d.subgroup is None:
            raise VyreError(f"the {self.d.name} printer has no subgroup operations.",
                            "run subgroup programs on a backend that supports them.")
        v = t = None
        vf = CANON
        if e.value is not None:
            v, t, vf = self.expr(e.value)
        lane = self.expr(e.lane)[0] if e.lane is not None else None
        rt = t if e.op in SUBGROUP_REDUCTIONS or e.op is SubgroupOp.SHUFFLE else DataType.U32
        wx, wy, _ = self.program.workgroup_size
        b = self.d.builtin
        lin = f"({b(Builtin.LID, 0)} + {wx}u * ({b(Builtin.LID, 1)} + {wy}u * {b(Builtin.LID, 2)}))"
        flags = vf if e.op is SubgroupOp.SHUFFLE and rt is DataType.F32 else CANON
        return self.fresh(rt, self.d.subgroup(e.op, CT[rt], v, lane, lin)), rt, flags

    def from_word(self, word: str, t: DataType) -> str:
        """A stored element of type ``t`` as its value (narrow integers widen)."""
        if t in (DataType.U32, DataType.U64) or t.is_half:
            return word
        if t is DataType.F32:
            return self.fresh(t, f"VY_U2F({word})")
        if t is DataType.BOOL:
            return self.fresh(t, f"{word} != 0u")
        if t in (DataType.U8, DataType.U16):
            return self.fresh(DataType.U32, f"(uint){word}")
        if t in (DataType.I8, DataType.I16):
            return self.fresh(DataType.I32, f"(int)(vy_i{t.bits}){word}")
        return self.fresh(t, f"({CT[t]}){word}")

    @staticmethod
    def to_word(v: str, t: DataType, stored: DataType | None = None) -> str:
        """A value of type ``t`` as an element of type ``stored`` (narrow stores keep the
        low bits)."""
        st = ST[(stored or t).size]
        if t is DataType.F32:
            return f"VY_F2U({v})"
        if t is DataType.BOOL:
            return f"({v} ? 1u : 0u)"
        return f"({st}){v}"

    # ---- 16-bit floats: exact widening to f32, one rounding back -----------------------
    def widen(self, v: str, t: DataType) -> tuple[str, DataType, Flags]:
        if t is DataType.F16:   # never subnormal as f32; NaN canonical
            return self.fresh(DataType.F32, f"vy_h2f({v})"), DataType.F32, CANON
        return self.fresh(DataType.F32, f"vy_bf2f({v})"), DataType.F32, Flags(False, True, True)

    def narrow(self, v: str, t: DataType) -> str:
        """Round an f32 result once (the helpers canonicalise NaN and flush subnormals)."""
        return self.fresh(t, f"{'vy_f2h' if t is DataType.F16 else 'vy_f2bf'}({v})")

    def binary(self, e: E.Bin) -> tuple[str, DataType, Flags]:
        a, ta, fa = self.expr(e.left)
        b, tb, fb = self.expr(e.right)
        rt = bin_result(e.op, ta, tb)
        op = e.op
        fresh = self.fresh_of(rt)
        if ta is DataType.BOOL:
            return fresh(f"{a} {_BOOL_SYM[op]} {b}"), rt, CANON
        cmp = _CMP
        if ta.is_half:   # widen exactly, the f32 operation, round once
            (a, _, fa), (b, _, fb) = self.widen(a, ta), self.widen(b, ta)
            r, _, _ = self.float_bin(e, op, a, fa, b, fb, DataType.BOOL if op in cmp else DataType.F32)
            return (r, rt, CANON) if op in cmp else (self.narrow(r, ta), rt, CANON)
        if ta is DataType.F32:
            return self.float_bin(e, op, a, fa, b, fb, rt)
        if op in cmp:
            return fresh(f"{a} {cmp[op]} {b}"), rt, CANON
        wide = ta.is_wide
        ut = UT[ta]
        if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
            s = f"((uint){b} & {ta.bits - 1}u)"
            if op is BinOp.SHR:
                return fresh(f"{a} >> {s}"), rt, CANON  # signed: arithmetic shift
            ua = f"({ut}){a}"
            sfx = "64" if wide else ""
            body = {BinOp.SHL: f"{ua} << {s}", BinOp.ROTATE_LEFT: f"vy_rotl{sfx}({ua}, {s})",
                    BinOp.ROTATE_RIGHT: f"vy_rotr{sfx}({ua}, {s})"}[op]
            return fresh(f"({CT[rt]})({body})"), rt, CANON
        if not ta.is_signed:
            wide_sfx = "64" if wide else ""
            if op is BinOp.MUL_HIGH and not wide:
                return fresh(f"(uint)(((vy_u64){a} * (vy_u64){b}) >> 32)"), rt, CANON
            return fresh(_UNSIGNED[op].format(a=a, b=b, s=wide_sfx, zero="0ull" if wide else "0u")), rt, CANON
        table = _SIGNED64 if wide else _SIGNED32
        return fresh(table[op].format(a=a, b=b, ct=CT[ta], ut=ut)), rt, CANON

    def float_bin(self, e: E.Bin, op: BinOp, a: str, fa: Flags, b: str, fb: Flags,
                  rt: DataType) -> tuple[str, DataType, Flags]:
        """An f32 binary operation on lowered operands (`vyre.lower.floats` decides flushes)."""
        hardware = hardware_bin(e)
        a, b = self.operand(a, fa, hardware), self.operand(b, fb, hardware)
        if op in _CMP:
            return self.fresh(DataType.BOOL, f"{a} {_CMP[op]} {b}"), DataType.BOOL, CANON
        flags = self._flags(e, fa, fb)
        f = self.d.fn
        body = {BinOp.ADD: f"VY_FADD({a}, {b})", BinOp.SUB: f"VY_FSUB({a}, {b})",
                BinOp.MUL: f"VY_FMUL({a}, {b})", BinOp.DIV: f"VY_FDIV({a}, {b})",
                BinOp.MOD: f"{f['fmod']}({a}, {b})",
                BinOp.MIN: f"vy_fmin({a}, {b})", BinOp.MAX: f"vy_fmax({a}, {b})",
                BinOp.ABS_DIFF: f"{f['fabs']}(VY_FSUB({a}, {b}))"}[op]
        return self.fresh(DataType.F32, body), DataType.F32, flags

    def _flags(self, e: E.Expr, *operands: Flags) -> Flags:
        """The result flags of a float operation (one rule set: vyre.lower.floats)."""
        merged = CANON
        for f in operands:
            merged = merged | f
        return flags_of(_Opaque.of(e, merged), {_Opaque.NAME: merged}, self.hw, {_Opaque.NAME: DataType.F32},
                        self.program)

    def unary(self, e: E.Un) -> tuple[str, DataType, Flags]:
        a, t, fa = self.expr(e.operand)
        rt = un_result(e.op, t)
        if t is DataType.BOOL:
            return self.fresh(rt, f"!{a}"), rt, CANON
        if t.is_half:
            w, _, fw = self.widen(a, t)
            r, _, _ = self.float_un(e, w, fw, DataType.F32 if rt is t else rt)
            return (self.narrow(r, t) if rt is t else r), rt, CANON
        if t is DataType.F32:
            return self.float_un(e, a, fa, rt)
        op, f = e.op, self.d.fn
        ct, ut = CT[t], UT[t]
        wide = t.is_wide
        u = f"({ut}){a}"
        if op is UnOp.NEGATE:
            return self.fresh(rt, f"({ct})({'0ull' if wide else '0u'} - {u})"), rt, CANON
        if op is UnOp.BITNOT:
            return self.fresh(rt, f"~{a}"), rt, CANON
        if op is UnOp.ABS:
            return self.fresh(rt, a if not t.is_signed else
                              f"{a} < 0 ? ({ct})({'0ull' if wide else '0u'} - {u}) : {a}"), rt, CANON
        if op is UnOp.SIGN:
            body = f"{a} != 0 ? ({ct})1 : ({ct})0" if not t.is_signed else \
                f"{a} > 0 ? ({ct})1 : ({a} < 0 ? ({ct})-1 : ({ct})0)"
            return self.fresh(rt, body), rt, CANON
        if wide:
            body = {UnOp.POPCOUNT: f"(vy_u64)VY_POPC64({u})", UnOp.CLZ: f"(vy_u64)VY_CLZ64({u})",
                    UnOp.CTZ: f"vy_ctz64({u})", UnOp.REVERSE_BITS: f"vy_brev64({u})",
                    UnOp.BYTE_SWAP: f"vy_bswap64({u})"}[op]
        else:
            body = {UnOp.POPCOUNT: f"(uint){f['popcount']}({u})", UnOp.CLZ: f"(uint){f['clz']}({u})",
                    UnOp.CTZ: f"vy_ctz({u})", UnOp.REVERSE_BITS: f"{f['brev']}({u})",
                    UnOp.BYTE_SWAP: f"vy_bswap({u})"}[op]
        return self.fresh(rt, f"({ct}){body}"), rt, CANON

    def float_un(self, e: E.Un, a: str, fa: Flags, rt: DataType) -> tuple[str, DataType, Flags]:
        """An f32 unary operation on a lowered operand."""
        op, f = e.op, self.d.fn
        if op is UnOp.IS_NAN:
            return self.fresh(rt, f"vy_isnan({a})"), rt, CANON
        if op is UnOp.IS_INF:
            return self.fresh(rt, f"vy_isinf({a})"), rt, CANON
        if op is UnOp.IS_FINITE:
            return self.fresh(rt, f"!vy_isnan({a}) && !vy_isinf({a})"), rt, CANON
        if op not in (UnOp.TRUNC, UnOp.ROUND):  # those give the flushed answer anyway
            a = self.operand(a, fa, hardware_un(e))
        body = {UnOp.NEGATE: f"-{a}", UnOp.ABS: f"{f['fabs']}({a})", UnOp.SQRT: f"{f['sqrt']}({a})",
                UnOp.FLOOR: f"vy_floor({a})", UnOp.CEIL: f"vy_ceil({a})",
                UnOp.TRUNC: f"vy_trunc({a})", UnOp.ROUND: f"vy_fround({a})",
                UnOp.SIGN: f"vy_fsign({a})", UnOp.RECIPROCAL: f"VY_FDIV(1.0f, {a})"}.get(op)
        if body is None:
            body = f"{f[op.value]}({a})"
        return self.fresh(DataType.F32, body), DataType.F32, self._flags(e, fa)

    def cast(self, e: E.Cast) -> tuple[str, DataType, Flags]:
        v, t, f = self.expr(e.value)
        d = e.dtype
        if d is t:
            return v, t, f
        if t.is_half:   # through its exact f32 value
            if d.is_half:
                w, _, fw = self.widen(v, t)
                return self.narrow(self.operand(w, fw, False), d), d, CANON
            v, t, f = self.widen(v, t)
            if d is DataType.F32:
                return v, d, f
        if d is DataType.BOOL:
            if t is DataType.F32:
                # flushed in code: `x != 0.0f` may be compiled as a test of the bits, which
                # sees a subnormal as non-zero (the H100 did: conform random/11000220)
                return self.fresh(d, f"{self.operand(v, f, False)} != 0.0f"), d, CANON
            return self.fresh(d, f"{v} != 0"), d, CANON
        if t is DataType.BOOL:
            if d.is_half:
                return self.fresh(d, f"{v} ? (vy_u16)0x{0x3C00 if d is DataType.F16 else 0x3F80:04X}u : (vy_u16)0u"), d, CANON
            one, zero = ("1.0f", "0.0f") if d is DataType.F32 else (f"({CT[d]})1", f"({CT[d]})0")
            return self.fresh(d, f"{v} ? {one} : {zero}"), d, CANON
        if d.is_half and t is DataType.F32:
            return self.narrow(self.operand(v, f, False), d), d, CANON
        if d is DataType.BF16:   # an integer, rounded once
            if t.is_signed:
                m = f"({v} < 0 ? (vy_u64)0ull - (vy_u64)(vy_i64){v} : (vy_u64)(vy_i64){v})"
                return self.fresh(d, f"vy_mag2bf({m}, {v} < 0 ? 0x8000u : 0u)"), d, CANON
            return self.fresh(d, f"vy_mag2bf((vy_u64){v}, 0u)"), d, CANON
        if d is DataType.F32 or d is DataType.F16:
            key = {DataType.U32: "u2f", DataType.I32: "i2f"}.get(t)
            conv = f"{self.d.fn[key]}({v})" if key else f"{'VY_U64_F' if t is DataType.U64 else 'VY_I64_F'}({v})"
            r = self.fresh(DataType.F32, conv)
            return (r, d, CANON) if d is DataType.F32 else (self.narrow(r, d), d, CANON)
        if t is DataType.F32:  # truncation toward zero: a subnormal gives 0 either way
            fn = {DataType.U32: "vy_f2u", DataType.I32: "vy_f2i", DataType.U64: "vy_f2ul",
                  DataType.I64: "vy_f2l"}[d]
            return self.fresh(d, f"{fn}({v})"), d, CANON
        return self.fresh(d, f"({CT[d]}){v}"), d, CANON

    def atomic(self, e: E.Atomic) -> tuple[str, DataType, Flags]:
        i, _, _ = self.expr(e.index)
        v, t, _ = self.expr(e.value)
        x = self.expr(e.expected)[0] if e.expected is not None else None
        decl = self.program.buffer(e.buffer)
        signed = t.is_signed
        cast_t = CT[t]
        ptr_t = self.d.local_ptr if decl.is_workgroup else self.d.global_ptr
        ptr = f"({ptr_t.format(t=cast_t)})&{self.ptr(e.buffer)}[{i}]"
        call = self.d.atomic(e.op, ptr, f"({cast_t}){v}", None if x is None else f"({cast_t}){x}",
                             signed, t.is_wide)
        if self.ranges.in_bounds(e.buffer, e.index):
            return self.fresh(t, f"({CT[t]}){call}"), t, CANON
        return self.fresh(t, f"({i} < {self.count(e.buffer)}) ? ({CT[t]}){call} : ({CT[t]})0"), t, CANON

    # ---- statements --------------------------------------------------------------------
    def block(self, body: tuple[N.Node, ...], guarded: bool = False) -> None:
        self.scope.append({})
        saved = dict(self.ranges.env)
        returned = False
        for n in body:
            self.stmt(n, guarded or returned)
            if self.alive and _contains_return(n):
                returned = True
        self.ranges.env = saved
        self.scope.pop()

    def bind_value(self, name: str, v: str, t: DataType, f: Flags) -> str:
        """The C value a local receives: arithmetic results are canonicalised only when the
        local may also hold raw bits (its value is then observable as is)."""
        if t is DataType.F32 and self.vars.get(name, CANON).raw:
            return self.observed(v, f)
        return v

    def stmt(self, n: N.Node, guarded: bool) -> None:
        if guarded and isinstance(n, N.Let):
            # declare outside the guard so later statements see it; assign inside
            t = infer(n.value, self.visible(), self.program)
            self.scope[-1][n.name] = t
            self.out(f"{CT[t]} v_{n.name} = ({CT[t]})0;")
            self.open("if (vy_alive)")
            self.stmt(N.Assign(n.name, n.value), False)
            self.close()
            return
        if guarded and not _contains_barrier(n):
            self.open("if (vy_alive)")
            self.stmt(n, False)
            self.close()
            return
        if isinstance(n, N.Let):
            v, t, f = self.expr(n.value)
            self.scope[-1][n.name] = t
            if t is DataType.U32:
                self.ranges.bind(n.name, self.ranges.of(n.value))
            self.out(f"{CT[t]} v_{n.name} = {self.bind_value(n.name, v, t, f)};")
        elif isinstance(n, N.Assign):
            v, t, f = self.expr(n.value)
            self.out(f"v_{n.name} = {self.bind_value(n.name, v, t, f)};")
        elif isinstance(n, N.Store):
            if n.buffer in self.lane_stores and n.index == _GX:
                v, t, f = self.expr(n.value)
                word = self.to_word(self.observed(v, f) if t is DataType.F32 else v, t)
                self.out(f"{self.lane_stores[n.buffer]} = {word};")
                return
            i, _, _ = self.expr(n.index)
            v, t, f = self.expr(n.value)
            if t is DataType.F32:  # bits kept, or flushed into memory whose bits nobody sees
                v = self.operand(v, f, False) if n.buffer in self.flushed else self.observed(v, f)
            word = self.to_word(v, t, self.program.buffer(n.buffer).dtype)
            if self.ranges.in_bounds(n.buffer, n.index):
                self.out(f"{self.ptr(n.buffer)}[{i}] = {word};")
            else:
                self.out(f"if ({i} < {self.count(n.buffer)}) {self.ptr(n.buffer)}[{i}] = {word};")
        elif isinstance(n, N.If):
            c, _, _ = self.expr(n.cond)
            self.open(f"if ({c})")
            self.block(n.then, guarded)
            self.close()
            if n.otherwise:
                self.open("else")
                self.block(n.otherwise, guarded)
                self.close()
        elif isinstance(n, N.Loop):
            lo, t, _ = self.expr(n.from_)
            hi, _, _ = self.expr(n.to)
            self.scope.append({n.var: t})
            self.open(f"for ({CT[t]} v_{n.var} = {lo}; v_{n.var} < {hi}; v_{n.var}++)")
            if self.cancel:  # every 1024 trips: stop if the engine cancelled the dispatch
                self.out("if ((++vy_trips & 1023u) == 0u && VY_CANCELLED(vy_ctl)) return;")
            saved = dict(self.ranges.env)
            if t is DataType.U32:
                self.ranges.bind(n.var, self.ranges.loop(n.var, n.from_, n.to))
            # a return inside the body must also skip the body's earlier statements on
            # later trips: guard the whole body
            self.block(n.body, guarded or (self.alive and _contains_return(n)))
            self.ranges.env = saved
            self.close()
            self.scope.pop()
        elif isinstance(n, N.While):
            self.tmp += 1
            count = f"vy_w{self.tmp}"
            ct = "uint" if n.max_iterations <= 0xFFFFFFFF else "vy_u64"
            self.open("")
            self.out(f"{ct} {count} = 0u;")
            self.open("for (;;)")
            if self.alive and _contains_return(n) and not _contains_barrier(n):
                self.out("if (!vy_alive) break;")   # a returned lane leaves, as in the reference
            c, _, _ = self.expr(n.cond)
            self.out(f"if (!{c}) break;")
            self.out(f"if ({count} == {n.max_iterations}u) {{ VY_ERR(vy_ctl, {ERR_LOOP_LIMIT}u); break; }}")
            self.out(f"{count}++;")
            if self.cancel:
                self.out("if ((++vy_trips & 1023u) == 0u && VY_CANCELLED(vy_ctl)) return;")
            saved = dict(self.ranges.env)
            self.block(n.body, guarded or (self.alive and _contains_return(n)))
            self.ranges.env = saved
            self.close()
            self.close()
        elif isinstance(n, N.Break):
            self.out("break;")
        elif isinstance(n, N.Continue):
            self.out("continue;")
        elif isinstance(n, N.IndirectDispatch):
            pass  # the engine reads the grid before launching this phase
        elif isinstance(n, N.Block | N.Region):
            self.open("")
            self.block(n.body, guarded)
            self.close()
        elif isinstance(n, N.Return):
            self.out("vy_alive = false;" if self.alive else "return;")
        elif isinstance(n, N.Barrier):
            if n.ordering is MemoryOrdering.SEQ_CST:
                self.out(self.d.barrier)
        elif isinstance(n, N.Eval):
            self.expr(n.value)

    # ---- kernels -----------------------------------------------------------------------
    def kernel(self, index: int, body: tuple[N.Node, ...]) -> str:
        self.lines = []
        self.indent = 1
        self.tmp = 0
        self.scope = [{}]
        self.ranges.env = {}
        self.alive = self.plan.has_barrier and any(isinstance(n, N.Return) for n in N.walk_nodes(body))
        self.cancel = bool(self.plan.cancel_checked and self.plan.cancel_checked[index])
        params = [(self.d.readonly_param if not b.writable else self.d.global_param).format(t=ST[b.dtype.size])
                  + f" b_{b.name}" for b in self.plan.bound]
        params += [f"uint n_{b.name}" for b in self.plan.bound]
        if self.plan.vector > 1:
            params.append("uint vy_gx")
        params.append(self.d.global_param.format(t="uint") + " vy_ctl")
        for w in self.plan.workgroup:
            self.out(self.d.local_array.format(t=ST[w.dtype.size], name=f"w_{w.name}", count=w.count))
        for loc in self.program.local_buffers:   # per invocation, zeroed in every phase
            self.out(f"{ST[loc.dtype.size]} l_{loc.name}[{loc.count}];")
            self.out(f"for (uint z = 0u; z < {loc.count}u; z++) l_{loc.name}[z] = ({ST[loc.dtype.size]})0;")
        if self.plan.workgroup:
            wx, wy, wz = self.program.workgroup_size
            lin = (f"({self.d.builtin(Builtin.LID, 0)} + {wx}u * ({self.d.builtin(Builtin.LID, 1)} "
                   f"+ {wy}u * {self.d.builtin(Builtin.LID, 2)}))")
            self.out(f"const uint vy_lin = {lin};")
            for w in self.plan.workgroup:
                self.out(f"for (uint z = vy_lin; z < {w.count}u; z += {wx * wy * wz}u) "
                         f"w_{w.name}[z] = ({ST[w.dtype.size]})0;")
            self.out(self.d.barrier)
        if self.alive:
            self.out("bool vy_alive = true;")
        if self.cancel:
            self.out("uint vy_trips = 0u;")
        if self.plan.vector > 1:
            self.vector_kernel(body)
        else:
            self.block(body)
        head = f"{self.d.kernel} {self.plan.entries[index]}({', '.join(params)})"
        return head + " {\n" + "\n".join(self.lines) + "\n}\n"

    def vector_kernel(self, body: tuple[N.Node, ...]) -> None:
        """Four consecutive invocations per thread: 128-bit loads and stores when all four
        elements are in range (and the pointers aligned), else the four one at a time. Either
        way exactly the invocations gid.x < vy_gx run, each with its own gid.x."""
        w = self.plan.vector
        self.out(f"const uint vy_base = {w}u * {self.d.builtin(Builtin.GID, 0)};")
        vec = sorted(self.plan.vector_loads | self.plan.vector_stores)
        cond = [f"vy_base + {w}u <= vy_gx"] + [f"vy_base + {w}u <= {self.count(b)}" for b in vec]
        cond += [f"(((size_t){self.ptr(b)}) & 15) == 0" for b in vec]
        self.open(f"if ({' && '.join(cond)})")
        for b in sorted(self.plan.vector_loads):
            self.out(f"const uint4 vy_{b} = {self.d.vload4(self.ptr(b), 'vy_base')};")
        comps = "xyzw"
        for b in sorted(self.plan.vector_stores):
            self.out(f"uint {', '.join(f'vs_{b}_{j}' for j in range(w))};")
        for j in range(w):
            self.gid_x = self.fresh(DataType.U32, f"vy_base + {j}u")
            self.lane_loads = {b: f"vy_{b}.{comps[j]}" for b in self.plan.vector_loads}
            self.lane_stores = {b: f"vs_{b}_{j}" for b in self.plan.vector_stores}
            self.open("")
            self.block(body)
            self.close()
        for b in sorted(self.plan.vector_stores):
            parts = [f"vs_{b}_{j}" for j in range(w)]
            self.out(self.d.vstore4(self.ptr(b), "vy_base", self.d.make4(parts)))
        self.lane_loads, self.lane_stores = {}, {}
        self.close()
        self.open("else")
        self.open(f"for (uint vy_j = 0u; vy_j < {w}u; vy_j++)")
        self.gid_x = "vy_gid"
        self.out("const uint vy_gid = vy_base + vy_j;")
        self.open("if (vy_gid < vy_gx)")
        self.block(body)
        self.close()
        self.close()
        self.close()
        self.gid_x = None


class _Opaque:
    """Stands in for an already-lowered operand when asking `flags_of` for a result's flags."""

    NAME = "__vyre_operand__"

    # a float literal operand stays a literal: whether the compiler knows an operand decides
    # whether hardware flushes may be relied on (`hardware_bin`, `hardware_un`)
    KNOWN = E.Lit(DataType.F32, 0x3F800000)

    @staticmethod
    def of(e: E.Expr, merged: Flags) -> E.Expr:
        v = E.Var(_Opaque.NAME)

        def stand_in(k: E.Expr) -> E.Expr:
            return _Opaque.KNOWN if isinstance(k, E.Lit) and k.dtype.is_float else v

        if isinstance(e, E.Bin):
            return E.Bin(e.op, stand_in(e.left), stand_in(e.right))
        if isinstance(e, E.Un):
            return E.Un(e.op, stand_in(e.operand))
        return e


_GX = E.Expr.gid_x()


def _contains_return(n: N.Node) -> bool:
    return any(isinstance(s, N.Return) for s in N.walk_nodes((n,)))


def _contains_barrier(n: N.Node) -> bool:
    return any(isinstance(s, N.Barrier) for s in N.walk_nodes((n,)))


def emit_source(plan: KernelPlan, dialect: Dialect) -> str:
    """Complete target source: header, shared prelude (plus the 64-bit and 16-bit float
    helpers when the program uses those types), one kernel per phase."""
    em = _Emitter(plan, dialect)
    kernels = [em.kernel(i, body) for i, body in enumerate(plan.phases)]
    preludes = [dialect.header, PRELUDE]
    if plan.uses_wide or plan.uses_half:
        preludes.append(PRELUDE64)
    if plan.uses_half:
        preludes.append(PRELUDE16)
    return "\n".join([*preludes, *kernels])
