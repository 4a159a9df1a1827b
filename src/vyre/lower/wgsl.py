"""WGSL emission, beside the C-family emitter and sharing its plan (`vyre.lower.plan`), range
analysis (`vyre.lower.ranges`) and canonicalisation placement (`vyre.lower.floats`).

WGSL leaves several things to the implementation or defines them its own way; the printed
code produces the reference's bits anyway:

* integer division and remainder by zero, and i32 MIN / -1: explicit helpers (WGSL returns
  the dividend), with the i32 fault reported through the control block as on every target;
* shift amounts are masked with ``& 31`` explicitly;
* every load, store and atomic is bounds-checked in code (WGSL's robust access may clamp
  an out-of-bounds index to a valid element instead of giving zero);
* NaN tests use the bits (implementations may assume no NaNs in float comparisons), and
  f32 canonicalisation is placed exactly as for C;
* float-to-integer conversions saturate in code; workgroup memory is zeroed in code;
* f32 literals reach the code through a zero the compiler cannot see, so no float helper is
  constant-folded (lavapipe folded ``sign(0.0)`` to ``-0.0``); float arithmetic sees only
  finite non-zero operands (NaNs, infinities and zero signs are decided on the bits), since
  implementations may assume there are no NaNs or infinities.

f32 division, fmod, sqrt, reciprocal (WGSL allows 2.5 ULP) and ``fma`` (WGSL does not
promise one rounding) are rewritten before planning into exact integer algorithms
(`vyre.lower.legalize`, the features in `LACKS`), and u64/i64 values become pairs of u32
words (`vyre.lower.legalize.int64`; drivers scale those buffers' count words by
`word_scale`), and u8/i8/u16/i16 storage is packed into u32 words
(`vyre.lower.legalize.narrow`), and f16/bf16 values are their bits in u32 through integer
helpers (`vyre.lower.legalize.half`): `legalized`. What WGSL still cannot give exactly is
refused before printing (`refusals`): the transcendentals, 64-bit atomics and subgroup
operations.
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.typecheck import bin_result, infer, un_result
from vyre.ir.types import AtomicOp, BinOp, Builtin, DataType, MemoryOrdering, UnOp

from .floats import (
    CANON,
    FLUSHED,
    RAW,
    Flags,
    flags_of,
    numeric_only_buffers,
    var_flags,
)
from .legalize import Feature, legalize
from .legalize.half import HALF, HalfRefusal, lower_half
from .legalize.int64 import Int64Refusal, lower_int64
from .legalize.narrow import NARROW, lower_narrow
from .plan import KernelPlan
from .printer import Printer
from .ranges import Ranges

WT = {DataType.U32: "u32", DataType.I32: "i32", DataType.F32: "f32", DataType.BOOL: "bool"}
_INEXACT_BIN = {BinOp.DIV: "f32 division", BinOp.MOD: "f32 remainder (fmod)"}
# what WGSL lacks and `vyre.lower.legalize` rewrites (drivers legalize before planning)
LACKS = frozenset({Feature.F32_DIV, Feature.F32_MOD, Feature.F32_SQRT, Feature.F32_RECIPROCAL,
                   Feature.FMA})


class WgslRefusal(Exception):
    """The program needs something WGSL cannot give exactly (the reason is the message)."""


def legalized(program):
    """The Program WGSL prints for ``program``: 64-bit integers as u32 pairs
    (`vyre.lower.legalize.int64`) and the float operations in `LACKS` as exact integer
    helpers. Raises `WgslRefusal` for what the pair lowering refuses."""
    try:
        program = lower_int64(lower_narrow(lower_half(program)))
    except (Int64Refusal, HalfRefusal) as exc:
        raise WgslRefusal(str(exc)) from None
    return legalize(program, LACKS)


# 64-bit integers run as u32 pairs, u8/i8/u16/i16 storage packed in u32 words
# and f16/bf16 as u32 bits through integer helpers
_PAIRED = set(WT) | {DataType.U64, DataType.I64} | set(NARROW) | set(HALF)


def refusals(program) -> list[str]:
    """Why WGSL cannot give this program the reference's bytes, as far as the program's
    text says (f32 division, fmod, sqrt, reciprocal and fma are legalized first, `LACKS`)."""
    why: list[str] = []
    for t in sorted({b.dtype for b in program.buffers} - _PAIRED, key=lambda d: d.value):
        why.append(f"{t.value} buffers (no {t.value} storage type in core WGSL)")
    wide = {b.name for b in program.buffers if b.dtype in (DataType.U64, DataType.I64)}
    for e in N.program_exprs(program):
        if isinstance(e, E.Lit | E.Cast | E.Bitcast | E.Spec) and e.dtype not in _PAIRED:
            why.append(f"{e.dtype.value} values (not in core WGSL)")
        elif isinstance(e, E.Atomic) and e.buffer in wide:
            why.append("64-bit atomics (core WGSL has no 64-bit atomics)")
        elif isinstance(e, E.Un) and e.op.value in ("exp", "log", "exp2", "log2", "sin", "cos", "tan", "tanh"):
            why.append(f"{e.op.value} (WGSL's accuracy is outside the ULP budget)")
        elif isinstance(e, E.Subgroup):
            why.append("subgroup operations (not in core WGSL)")
    return sorted(set(why))


PRELUDE = r"""
const VY_NAN_BITS: u32 = 0x7FC00000u;
fn vy_daz(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    return bitcast<f32>(select(b, b & 0x80000000u, (b & 0x7F800000u) == 0u));
}
fn vy_cnan(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    return bitcast<f32>(select(b, VY_NAN_BITS, (b & 0x7FFFFFFFu) > 0x7F800000u));
}
fn vy_canon(x: f32) -> f32 { return vy_cnan(vy_daz(x)); }
fn vy_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7FFFFFFFu) > 0x7F800000u; }
fn vy_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7FFFFFFFu) == 0x7F800000u; }
// ordered comparisons on the bits, so no NaN ever reaches a float comparison
fn vy_flt(a: f32, b: f32) -> bool {
    if (vy_isnan(a) || vy_isnan(b)) { return false; }
    let x = bitcast<u32>(a);
    let y = bitcast<u32>(b);
    if (((x | y) & 0x7FFFFFFFu) == 0u) { return false; }
    let sx = (x >> 31u) == 1u;
    let sy = (y >> 31u) == 1u;
    if (sx != sy) { return sx; }
    if (sx) { return x > y; }
    return x < y;
}
fn vy_feq(a: f32, b: f32) -> bool {
    if (vy_isnan(a) || vy_isnan(b)) { return false; }
    let x = bitcast<u32>(a);
    let y = bitcast<u32>(b);
    return x == y || ((x | y) & 0x7FFFFFFFu) == 0u;
}
fn vy_fmin(a: f32, b: f32) -> f32 {
    if (vy_isnan(a) || vy_isnan(b)) { return bitcast<f32>(VY_NAN_BITS); }
    if (vy_flt(a, b)) { return a; }
    if (vy_flt(b, a)) { return b; }
    return select(b, a, (bitcast<u32>(a) & 0x80000000u) != 0u);
}
fn vy_fmax(a: f32, b: f32) -> f32 {
    if (vy_isnan(a) || vy_isnan(b)) { return bitcast<f32>(VY_NAN_BITS); }
    if (vy_flt(b, a)) { return a; }
    if (vy_flt(a, b)) { return b; }
    return select(a, b, (bitcast<u32>(a) & 0x80000000u) != 0u);
}
fn vy_fsign(a: f32) -> f32 {
    if (vy_isnan(a)) { return a; }
    if (vy_flt(0.0, a)) { return 1.0; }
    if (vy_flt(a, 0.0)) { return -1.0; }
    return a;
}
// Arithmetic sees only finite, non-zero operands: WGSL implementations may assume there are no
// NaNs or infinities (and may fold x - x to 0), so those cases and the zeros' signs are
// decided on the bits; the hardware's correctly rounded + and * do the rest.
fn vy_special(x: u32) -> bool { return (x & 0x7F800000u) == 0x7F800000u; }
fn vy_nanbits(x: u32) -> bool { return (x & 0x7FFFFFFFu) > 0x7F800000u; }
fn vy_fadd(a: f32, b: f32) -> f32 {
    let x = bitcast<u32>(a);
    let y = bitcast<u32>(b);
    if (vy_special(x) || vy_special(y)) {
        if (vy_nanbits(x) || vy_nanbits(y)) { return bitcast<f32>(VY_NAN_BITS); }
        if (vy_special(x) && vy_special(y) && ((x ^ y) & 0x80000000u) != 0u) { return bitcast<f32>(VY_NAN_BITS); }
        return bitcast<f32>(select(y, x, vy_special(x)));
    }
    if ((x & 0x7FFFFFFFu) == 0u) { return bitcast<f32>(select(y, x & y, (y & 0x7FFFFFFFu) == 0u)); }
    if ((y & 0x7FFFFFFFu) == 0u) { return a; }
    if ((x ^ y) == 0x80000000u) { return 0.0; }
    return a + b;
}
fn vy_fsub(a: f32, b: f32) -> f32 { return vy_fadd(a, bitcast<f32>(bitcast<u32>(b) ^ 0x80000000u)); }
fn vy_fmul(a: f32, b: f32) -> f32 {
    let x = bitcast<u32>(a);
    let y = bitcast<u32>(b);
    let sign = (x ^ y) & 0x80000000u;
    let zx = (x & 0x7FFFFFFFu) == 0u;
    let zy = (y & 0x7FFFFFFFu) == 0u;
    if (vy_special(x) || vy_special(y)) {
        if (vy_nanbits(x) || vy_nanbits(y) || zx || zy) { return bitcast<f32>(VY_NAN_BITS); }
        return bitcast<f32>(sign | 0x7F800000u);
    }
    if (zx || zy) { return bitcast<f32>(sign); }
    let r = a * b;
    if ((bitcast<u32>(r) & 0x7F800000u) != 0u) { return r; }
    return vy_fmul_tiny(a, b, sign);
}
// A zero or subnormal product of normal operands: how the device rounded it is not known
// (NVIDIA's Vulkan driver gave 0 where the reference rounds up to the smallest normal, S9),
// and S9 flushes every subnormal result. Decide on the exact product: it rounds to 2^-126 iff
// |a*b| >= 2^-126 - 2^-150 (the tie goes to the even 2^-126). Both |a| and |b| are below 1
// here, so |a|*2^64 is exact and normal. It is formed on the exponent bits, not by a float
// multiply (NVIDIA's compiler reassociated (|a|*2^64)*|b| into the flushed (|a|*|b|)*2^64).
// The product of the scaled values is formed exactly as p + e from 12-bit halves split by
// masking (each partial product is exact, so a fused multiply-add anywhere gives the same e).
fn vy_fmul_tiny(a: f32, b: f32, sign: u32) -> f32 {
    let x = bitcast<f32>((bitcast<u32>(a) & 0x7FFFFFFFu) + (64u << 23u));
    let y = bitcast<f32>(bitcast<u32>(b) & 0x7FFFFFFFu);
    let p = x * y;
    let xh = bitcast<f32>(bitcast<u32>(x) & 0xFFFFF000u);
    let yh = bitcast<f32>(bitcast<u32>(y) & 0xFFFFF000u);
    let xl = x - xh;
    let yl = y - yh;
    let e = (((xh * yh - p) + xh * yl) + xl * yh) + xl * yl;
    let t = bitcast<f32>(0x207FFFFFu);
    let up = p > t || (p == t && e >= 0.0);
    return bitcast<f32>(select(sign, sign | 0x00800000u, up));
}
fn vy_small(x: f32) -> bool { return (bitcast<u32>(x) & 0x7FFFFFFFu) < 0x4B000000u; }
fn vy_floor(x: f32) -> f32 { return select(x, floor(x), vy_small(x)); }
fn vy_ceil(x: f32) -> f32 { return select(x, ceil(x), vy_small(x)); }
fn vy_trunc(x: f32) -> f32 { return select(x, trunc(x), vy_small(x)); }
fn vy_fround(a: f32) -> f32 {
    if (!vy_small(a)) { return a; }
    let t = trunc(a);
    let d = a - t;
    if (d >= 0.5) { return t + 1.0; }
    if (d <= -0.5) { return t - 1.0; }
    return t;
}
fn vy_f2u(x: f32) -> u32 {
    if (vy_isnan(x) || !vy_flt(0.0, x)) { return 0u; }
    if (!vy_flt(x, 4294967296.0)) { return 0xFFFFFFFFu; }
    return u32(x);
}
fn vy_f2i(x: f32) -> i32 {
    if (vy_isnan(x)) { return 0i; }
    if (!vy_flt(-2147483648.0, x)) { return bitcast<i32>(0x80000000u); }
    if (!vy_flt(x, 2147483648.0)) { return 0x7FFFFFFFi; }
    return i32(x);
}
fn vy_udiv(a: u32, b: u32) -> u32 { return select(a / max(b, 1u), 0xFFFFFFFFu, b == 0u); }
fn vy_umod(a: u32, b: u32) -> u32 { return select(a % max(b, 1u), 0u, b == 0u); }
// i32 division and remainder on the magnitudes, in u32: NVIDIA's Vulkan driver gave wrong
// signs for signed `/` and `%` (S3; conform bin.div.i32, bin.mod.i32).
fn vy_mag(a: i32) -> u32 { return select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i); }
fn vy_idiv(a: i32, b: i32) -> i32 {
    if (b == 0i || (a == bitcast<i32>(0x80000000u) && b == -1i)) { atomicOr(&vy_ctl[0], 1u); return 0i; }
    let q = vy_mag(a) / vy_mag(b);
    return bitcast<i32>(select(q, 0u - q, (a < 0i) != (b < 0i)));
}
fn vy_imod(a: i32, b: i32) -> i32 {
    if (b == 0i || (a == bitcast<i32>(0x80000000u) && b == -1i)) { atomicOr(&vy_ctl[0], 1u); return 0i; }
    let r = vy_mag(a) % vy_mag(b);
    return bitcast<i32>(select(r, 0u - r, a < 0i));
}
fn vy_rotl(a: u32, b: u32) -> u32 { let s = b & 31u; return select((a << s) | (a >> (32u - s)), a, s == 0u); }
fn vy_rotr(a: u32, b: u32) -> u32 { let s = b & 31u; return select((a >> s) | (a << (32u - s)), a, s == 0u); }
fn vy_ctz(x: u32) -> u32 { return select(countTrailingZeros(x), 32u, x == 0u); }
fn vy_bswap(x: u32) -> u32 { return (x >> 24u) | ((x >> 8u) & 0xFF00u) | ((x << 8u) & 0xFF0000u) | (x << 24u); }
fn vy_usat_add(a: u32, b: u32) -> u32 { let s = a + b; return select(s, 0xFFFFFFFFu, s < a); }
fn vy_umulhi(a: u32, b: u32) -> u32 {
    let al = a & 0xFFFFu; let ah = a >> 16u; let bl = b & 0xFFFFu; let bh = b >> 16u;
    let ll = al * bl; let lh = al * bh; let hl = ah * bl; let hh = ah * bh;
    let mid = (ll >> 16u) + (lh & 0xFFFFu) + (hl & 0xFFFFu);
    return hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
}
fn vy_smulhi(a: i32, b: i32) -> i32 {
    var h = vy_umulhi(bitcast<u32>(a), bitcast<u32>(b));
    if (a < 0i) { h = h - bitcast<u32>(b); }
    if (b < 0i) { h = h - bitcast<u32>(a); }
    return bitcast<i32>(h);
}
fn vy_usat_mul(a: u32, b: u32) -> u32 { return select(a * b, 0xFFFFFFFFu, vy_umulhi(a, b) != 0u); }
fn vy_isat_add(a: i32, b: i32) -> i32 {
    let w = bitcast<i32>(bitcast<u32>(a) + bitcast<u32>(b));
    if ((a < 0i) == (b < 0i) && (w < 0i) != (a < 0i)) { return select(0x7FFFFFFFi, bitcast<i32>(0x80000000u), a < 0i); }
    return w;
}
fn vy_isat_sub(a: i32, b: i32) -> i32 {
    let w = bitcast<i32>(bitcast<u32>(a) - bitcast<u32>(b));
    if ((a < 0i) != (b < 0i) && (w < 0i) != (a < 0i)) { return select(0x7FFFFFFFi, bitcast<i32>(0x80000000u), a < 0i); }
    return w;
}
fn vy_isat_mul(a: i32, b: i32) -> i32 {
    let lo = bitcast<i32>(bitcast<u32>(a) * bitcast<u32>(b));
    let hi = vy_smulhi(a, b);
    if (hi == select(0i, -1i, lo < 0i)) { return lo; }
    return select(0x7FFFFFFFi, bitcast<i32>(0x80000000u), (a < 0i) != (b < 0i));
}
fn vy_u2f(x: u32) -> f32 {
    // WGSL may round an inexact conversion either way: convert two exact halves instead and
    // let the one (correctly rounded) addition round to nearest even
    return f32(x >> 8u) * 256.0 + f32(x & 0xFFu);
}
fn vy_i2f(x: i32) -> f32 {
    let m = select(bitcast<u32>(x), 0u - bitcast<u32>(x), x < 0i);
    let r = vy_u2f(m);
    return select(r, -r, x < 0i);
}
"""


class WgslEmitter(Printer):
    """One plan to WGSL source (32-bit types only; see `refusals`)."""

    def __init__(self, plan: KernelPlan) -> None:
        self.plan = plan
        self.program = plan.program
        self.lines: list[str] = []
        self.tmp = 0
        self.indent = 1
        self.scope: list[dict[str, DataType]] = [{}]
        self.flushed = numeric_only_buffers(self.program)
        self.vars = var_flags(self.program, False, self.flushed)
        self.ranges = Ranges(self.program)
        self.alive = False
        self.cancel = False
        self.atomic_buffers = {e.buffer for e in N.walk_exprs(self.program.body) if isinstance(e, E.Atomic)}

    # ---- helpers ---------------------------------------------------------------------------
    def fresh(self, t: DataType, value: str) -> str:
        self.tmp += 1
        name = f"t{self.tmp}"
        self.out(f"let {name}: {WT[t]} = {value};")
        return name

    def count(self, buffer: str) -> str:
        decl = self.program.buffer(buffer)
        if not decl.is_bound:
            return f"{decl.count}u"
        return f"vy_n[{self.plan.param_index(buffer)}]"

    def operand(self, v: str, f: Flags) -> str:
        return self.fresh(DataType.F32, f"vy_daz({v})") if f.sub else v

    def observed(self, v: str, f: Flags) -> str:
        if f.raw or not (f.sub or f.nan):
            return v
        fn = "vy_canon" if f.sub and f.nan else ("vy_cnan" if f.nan else "vy_daz")
        return self.fresh(DataType.F32, f"{fn}({v})")

    def _flags(self, e: E.Expr, *operands: Flags) -> Flags:
        merged = CANON
        for f in operands:
            merged = merged | f
        probe = E.Var("__vyre_operand__")
        shape = E.Bin(e.op, probe, probe) if isinstance(e, E.Bin) else E.Un(e.op, probe) if isinstance(e, E.Un) else e
        return flags_of(shape, {"__vyre_operand__": merged}, False, {"__vyre_operand__": DataType.F32}, self.program)

    # ---- expressions -----------------------------------------------------------------------
    def word_load(self, buffer: str, i: str) -> str:
        p = self.ptr(buffer)
        if buffer in self.atomic_buffers:
            return f"{'bitcast<u32>(' if self.program.buffer(buffer).dtype is DataType.I32 else '('}atomicLoad(&{p}[{i}]))"
        return f"{p}[{i}]"

    def from_word(self, word: str, t: DataType) -> str:
        if t is DataType.U32:
            return word
        if t is DataType.I32:
            return self.fresh(t, f"bitcast<i32>({word})")
        if t is DataType.F32:
            return self.fresh(t, f"bitcast<f32>({word})")
        return self.fresh(t, f"{word} != 0u")

    def to_word(self, v: str, t: DataType) -> str:
        if t is DataType.F32 or t is DataType.I32:
            return f"bitcast<u32>({v})"
        if t is DataType.BOOL:
            return f"select(0u, 1u, {v})"
        return v

    def expr(self, e: E.Expr) -> tuple[str, DataType, Flags]:
        if isinstance(e, E.Spec):
            return self.expr(E.Lit(e.dtype, e.bits))
        if isinstance(e, E.Lit):
            t = e.dtype
            if t is DataType.U32:
                return f"{e.bits}u", t, CANON
            if t is DataType.I32:
                return f"bitcast<i32>({e.bits}u)", t, CANON
            if t is DataType.F32:   # opaque to the compiler: it folds float helpers on constants wrongly
                return f"bitcast<f32>(0x{e.bits:08X}u ^ vy_z)", t, CANON
            return ("true" if e.bits else "false"), t, CANON
        if isinstance(e, E.Var):
            t = self.lookup(e.name)
            return f"v_{e.name}", t, self.vars.get(e.name, CANON) if t is DataType.F32 else CANON
        if isinstance(e, E.BufLen):
            return self.count(e.buffer), DataType.U32, CANON
        if isinstance(e, E.Id):
            name = {Builtin.GID: "vy_gid", Builtin.LID: "vy_lid", Builtin.WGID: "vy_wgid"}[e.kind]
            return f"{name}.{'xyz'[e.axis]}", DataType.U32, CANON
        if isinstance(e, E.Load):
            t = self.program.buffer(e.buffer).dtype
            loaded = (FLUSHED if e.buffer in self.flushed else RAW) if t is DataType.F32 else CANON
            i, _, _ = self.expr(e.index)
            if self.ranges.in_bounds(e.buffer, e.index):
                word = self.fresh(DataType.U32, self.word_load(e.buffer, i))
            else:
                safe = self.fresh(DataType.U32, f"select(0u, {i}, {i} < {self.count(e.buffer)})")
                word = self.fresh(DataType.U32, f"select(0u, {self.word_load(e.buffer, safe)}, "
                                                f"{i} < {self.count(e.buffer)})")
            return self.from_word(word, t), t, loaded
        if isinstance(e, E.Bin):
            return self.binary(e)
        if isinstance(e, E.Un):
            return self.unary(e)
        if isinstance(e, E.Select):
            c, _, _ = self.expr(e.cond)
            a, t, fa = self.expr(e.if_true)
            b, _, fb = self.expr(e.if_false)
            if t is DataType.F32 and fa.raw != fb.raw:
                a, b = (a, self.observed(b, fb)) if fa.raw else (self.observed(a, fa), b)
                return self.fresh(t, f"select({b}, {a}, {c})"), t, RAW
            return self.fresh(t, f"select({b}, {a}, {c})"), t, fa | fb
        if isinstance(e, E.Cast):
            return self.cast(e)
        if isinstance(e, E.Bitcast):
            v, t, f = self.expr(e.value)
            d = e.dtype
            if d is t:
                return v, t, f
            if t is DataType.F32:
                v = self.observed(v, f)
            return self.fresh(d, f"bitcast<{WT[d]}>({v})"), d, RAW if d is DataType.F32 else CANON
        if isinstance(e, E.Atomic):
            return self.atomic(e)
        raise NotImplementedError(type(e).__name__)  # refused before printing (refusals)

    def binary(self, e: E.Bin) -> tuple[str, DataType, Flags]:
        a, ta, fa = self.expr(e.left)
        b, tb, fb = self.expr(e.right)
        rt = bin_result(e.op, ta, tb)
        op = e.op
        fresh = lambda s: self.fresh(rt, s)  # noqa: E731
        if ta is DataType.BOOL:
            sym = {BinOp.EQ: "==", BinOp.NE: "!=", BinOp.AND: "&&", BinOp.OR: "||"}[op]
            return fresh(f"{a} {sym} {b}"), rt, CANON
        if ta is DataType.F32:
            if op in _INEXACT_BIN:
                raise WgslRefusal(_INEXACT_BIN[op] + " (WGSL allows 2.5 ULP)")
            a, b = self.operand(a, fa), self.operand(b, fb)
            cmp = {BinOp.EQ: f"vy_feq({a}, {b})", BinOp.NE: f"!vy_feq({a}, {b})",
                   BinOp.LT: f"vy_flt({a}, {b})", BinOp.GT: f"vy_flt({b}, {a})",
                   BinOp.LE: f"(vy_flt({a}, {b}) || vy_feq({a}, {b}))",
                   BinOp.GE: f"(vy_flt({b}, {a}) || vy_feq({a}, {b}))"}
            if op in cmp:
                return fresh(cmp[op]), rt, CANON
            body = {BinOp.ADD: f"vy_fadd({a}, {b})", BinOp.SUB: f"vy_fsub({a}, {b})",
                    BinOp.MUL: f"vy_fmul({a}, {b})",
                    BinOp.MIN: f"vy_fmin({a}, {b})", BinOp.MAX: f"vy_fmax({a}, {b})",
                    BinOp.ABS_DIFF: f"bitcast<f32>(bitcast<u32>(vy_fsub({a}, {b})) & 0x7FFFFFFFu)"}[op]
            return fresh(body), rt, self._flags(e, fa, fb)
        cmp_i = {BinOp.EQ: "==", BinOp.NE: "!=", BinOp.LT: "<", BinOp.GT: ">", BinOp.LE: "<=", BinOp.GE: ">="}
        if op in cmp_i:
            return fresh(f"{a} {cmp_i[op]} {b}"), rt, CANON
        if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
            s = f"(bitcast<u32>({b}) & 31u)"
            if op is BinOp.SHR:
                return fresh(f"{a} >> {s}"), rt, CANON
            ua = a if ta is DataType.U32 else f"bitcast<u32>({a})"
            body = {BinOp.SHL: f"{ua} << {s}", BinOp.ROTATE_LEFT: f"vy_rotl({ua}, {s})",
                    BinOp.ROTATE_RIGHT: f"vy_rotr({ua}, {s})"}[op]
            return fresh(body if ta is DataType.U32 else f"bitcast<i32>({body})"), rt, CANON
        if ta is DataType.U32:
            body = {BinOp.ADD: f"{a} + {b}", BinOp.SUB: f"{a} - {b}", BinOp.MUL: f"{a} * {b}",
                    BinOp.DIV: f"vy_udiv({a}, {b})", BinOp.MOD: f"vy_umod({a}, {b})",
                    BinOp.BITAND: f"{a} & {b}", BinOp.BITOR: f"{a} | {b}", BinOp.BITXOR: f"{a} ^ {b}",
                    BinOp.MIN: f"min({a}, {b})", BinOp.MAX: f"max({a}, {b})",
                    BinOp.ABS_DIFF: f"select({b} - {a}, {a} - {b}, {a} > {b})",
                    BinOp.SATURATING_ADD: f"vy_usat_add({a}, {b})",
                    BinOp.SATURATING_SUB: f"select(0u, {a} - {b}, {a} > {b})",
                    BinOp.SATURATING_MUL: f"vy_usat_mul({a}, {b})",
                    BinOp.MUL_HIGH: f"vy_umulhi({a}, {b})"}[op]
            return fresh(body), rt, CANON
        ua, ub = f"bitcast<u32>({a})", f"bitcast<u32>({b})"
        body = {BinOp.ADD: f"bitcast<i32>({ua} + {ub})", BinOp.SUB: f"bitcast<i32>({ua} - {ub})",
                BinOp.MUL: f"bitcast<i32>({ua} * {ub})", BinOp.DIV: f"vy_idiv({a}, {b})",
                BinOp.MOD: f"vy_imod({a}, {b})", BinOp.BITAND: f"{a} & {b}", BinOp.BITOR: f"{a} | {b}",
                BinOp.BITXOR: f"{a} ^ {b}", BinOp.MIN: f"min({a}, {b})", BinOp.MAX: f"max({a}, {b})",
                BinOp.ABS_DIFF: f"bitcast<i32>(select({ub} - {ua}, {ua} - {ub}, {a} > {b}))",
                BinOp.SATURATING_ADD: f"vy_isat_add({a}, {b})", BinOp.SATURATING_SUB: f"vy_isat_sub({a}, {b})",
                BinOp.SATURATING_MUL: f"vy_isat_mul({a}, {b})", BinOp.MUL_HIGH: f"vy_smulhi({a}, {b})"}[op]
        return fresh(body), rt, CANON

    def unary(self, e: E.Un) -> tuple[str, DataType, Flags]:
        a, t, fa = self.expr(e.operand)
        rt = un_result(e.op, t)
        op = e.op
        if t is DataType.BOOL:
            return self.fresh(rt, f"!{a}"), rt, CANON
        if t is DataType.F32:
            if op is UnOp.IS_NAN:
                return self.fresh(rt, f"vy_isnan({a})"), rt, CANON
            if op is UnOp.IS_INF:
                return self.fresh(rt, f"vy_isinf({a})"), rt, CANON
            if op is UnOp.IS_FINITE:
                return self.fresh(rt, f"!vy_isnan({a}) && !vy_isinf({a})"), rt, CANON
            if op not in (UnOp.TRUNC, UnOp.ROUND):
                a = self.operand(a, fa)
            body = {UnOp.NEGATE: f"bitcast<f32>(bitcast<u32>({a}) ^ 0x80000000u)",
                    UnOp.ABS: f"bitcast<f32>(bitcast<u32>({a}) & 0x7FFFFFFFu)",
                    UnOp.FLOOR: f"vy_floor({a})", UnOp.CEIL: f"vy_ceil({a})",
                    UnOp.TRUNC: f"vy_trunc({a})", UnOp.ROUND: f"vy_fround({a})",
                    UnOp.SIGN: f"vy_fsign({a})"}[op]
            return self.fresh(rt, body), rt, self._flags(e, fa)
        u = a if t is DataType.U32 else f"bitcast<u32>({a})"
        back = (lambda s: s) if t is DataType.U32 else (lambda s: f"bitcast<i32>({s})")
        if op is UnOp.NEGATE:
            return self.fresh(rt, back(f"0u - {u}")), rt, CANON
        if op is UnOp.BITNOT:
            return self.fresh(rt, f"~{a}"), rt, CANON
        if op is UnOp.ABS:
            return self.fresh(rt, a if t is DataType.U32 else back(f"select({u}, 0u - {u}, {a} < 0i)")), rt, CANON
        if op is UnOp.SIGN:
            body = f"select(0u, 1u, {a} != 0u)" if t is DataType.U32 else f"select(select(0i, -1i, {a} < 0i), 1i, {a} > 0i)"
            return self.fresh(rt, body), rt, CANON
        body = {UnOp.POPCOUNT: f"countOneBits({u})", UnOp.CLZ: f"countLeadingZeros({u})",
                UnOp.CTZ: f"vy_ctz({u})", UnOp.REVERSE_BITS: f"reverseBits({u})",
                UnOp.BYTE_SWAP: f"vy_bswap({u})"}[op]
        return self.fresh(rt, back(body)), rt, CANON

    def cast(self, e: E.Cast) -> tuple[str, DataType, Flags]:
        v, t, f = self.expr(e.value)
        d = e.dtype
        if d is t:
            return v, t, f
        if d is DataType.BOOL:
            if t is DataType.F32:
                return self.fresh(d, f"(bitcast<u32>({self.operand(v, f)}) & 0x7FFFFFFFu) != 0u"), d, CANON
            return self.fresh(d, f"{v} != {'0u' if t is DataType.U32 else '0i'}"), d, CANON
        if t is DataType.BOOL:
            one, zero = {DataType.U32: ("1u", "0u"), DataType.I32: ("1i", "0i"), DataType.F32: ("1.0", "0.0")}[d]
            return self.fresh(d, f"select({zero}, {one}, {v})"), d, CANON
        if d is DataType.F32:
            return self.fresh(d, f"{'vy_u2f' if t is DataType.U32 else 'vy_i2f'}({v})"), d, CANON
        if t is DataType.F32:
            return self.fresh(d, f"{'vy_f2u' if d is DataType.U32 else 'vy_f2i'}({v})"), d, CANON
        return self.fresh(d, f"bitcast<{WT[d]}>({v})"), d, CANON

    def atomic(self, e: E.Atomic) -> tuple[str, DataType, Flags]:
        i, _, _ = self.expr(e.index)
        v, t, _ = self.expr(e.value)
        x = self.expr(e.expected)[0] if e.expected is not None else None
        p = f"&{self.ptr(e.buffer)}[{i}]"
        name = {AtomicOp.ADD: "atomicAdd", AtomicOp.OR: "atomicOr", AtomicOp.AND: "atomicAnd",
                AtomicOp.XOR: "atomicXor", AtomicOp.MIN: "atomicMin", AtomicOp.MAX: "atomicMax",
                AtomicOp.EXCHANGE: "atomicExchange"}.get(e.op)
        call = f"atomicCompareExchangeWeak({p}, {x}, {v}).old_value" if name is None else f"{name}({p}, {v})"
        if e.op is AtomicOp.COMPARE_EXCHANGE:   # a weak CAS may fail spuriously: retry until it decides
            self.tmp += 1
            r = f"vy_cas{self.tmp}"
            self.out(f"var {r}: {WT[t]} = {'0u' if t is DataType.U32 else '0i'};")
            guard = "true" if self.ranges.in_bounds(e.buffer, e.index) else f"{i} < {self.count(e.buffer)}"
            self.out(f"if ({guard}) {{ loop {{ let c = atomicCompareExchangeWeak({p}, {x}, {v}); "
                     f"{r} = c.old_value; if (c.exchanged || c.old_value != {x}) {{ break; }} }} }}")
            return r, t, CANON
        if self.ranges.in_bounds(e.buffer, e.index):
            return self.fresh(t, call), t, CANON
        self.tmp += 1
        r = f"vy_a{self.tmp}"
        self.out(f"var {r}: {WT[t]} = {'0u' if t is DataType.U32 else '0i'};")
        self.out(f"if ({i} < {self.count(e.buffer)}) {{ {r} = {call}; }}")
        return r, t, CANON

    # ---- statements --------------------------------------------------------------------------
    def block(self, body, guarded: bool = False) -> None:
        self.scope.append({})
        saved = dict(self.ranges.env)
        returned = False
        for n in body:
            self.stmt(n, guarded or returned)
            if self.alive and any(isinstance(s, N.Return) for s in N.walk_nodes((n,))):
                returned = True
        self.ranges.env = saved
        self.scope.pop()

    def bind_value(self, name: str, v: str, t: DataType, f: Flags) -> str:
        if t is DataType.F32 and self.vars.get(name, CANON).raw:
            return self.observed(v, f)
        return v

    def stmt(self, n: N.Node, guarded: bool) -> None:
        has_barrier = any(isinstance(s, N.Barrier) for s in N.walk_nodes((n,)))
        if guarded and isinstance(n, N.Let):
            t = infer(n.value, self.visible(), self.program)
            self.scope[-1][n.name] = t
            self.out(f"var v_{n.name}: {WT[t]};")
            self.open("if (vy_alive)")
            self.stmt(N.Assign(n.name, n.value), False)
            self.close()
            return
        if guarded and not has_barrier:
            self.open("if (vy_alive)")
            self.stmt(n, False)
            self.close()
            return
        if isinstance(n, N.Let):
            v, t, f = self.expr(n.value)
            self.scope[-1][n.name] = t
            if t is DataType.U32:
                self.ranges.bind(n.name, self.ranges.of(n.value))
            self.out(f"var v_{n.name}: {WT[t]} = {self.bind_value(n.name, v, t, f)};")
        elif isinstance(n, N.Assign):
            v, t, f = self.expr(n.value)
            self.out(f"v_{n.name} = {self.bind_value(n.name, v, t, f)};")
        elif isinstance(n, N.Store):
            i, _, _ = self.expr(n.index)
            v, t, f = self.expr(n.value)
            if t is DataType.F32:
                v = self.operand(v, f) if n.buffer in self.flushed else self.observed(v, f)
            word = self.to_word(v, t)
            p = self.ptr(n.buffer)
            if n.buffer in self.atomic_buffers:
                signed = self.program.buffer(n.buffer).dtype is DataType.I32
                st = f"atomicStore(&{p}[{i}], {'bitcast<i32>(' + word + ')' if signed else word});"
            else:
                st = f"{p}[{i}] = {word};"
            if self.ranges.in_bounds(n.buffer, n.index):
                self.out(st)
            else:
                self.out(f"if ({i} < {self.count(n.buffer)}) {{ {st} }}")
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
            self.open(f"for (var v_{n.var}: {WT[t]} = {lo}; v_{n.var} < {hi}; v_{n.var}++)")
            if self.cancel:
                self.out("vy_trips++;")
                self.out("if ((vy_trips & 1023u) == 0u && atomicLoad(&vy_ctl[1]) != 0u) { return; }")
            saved = dict(self.ranges.env)
            if t is DataType.U32:
                self.ranges.bind(n.var, self.ranges.loop(n.var, n.from_, n.to))
            self.block(n.body, guarded or (self.alive and any(isinstance(s, N.Return) for s in N.walk_nodes((n,)))))
            self.ranges.env = saved
            self.close()
            self.scope.pop()
        elif isinstance(n, N.While):
            self.tmp += 1
            count = f"vy_w{self.tmp}"
            self.out(f"var {count}: u32 = 0u;")
            self.open("loop")
            if self.alive and any(isinstance(s, N.Return) for s in N.walk_nodes((n,))) and not has_barrier:
                self.out("if (!vy_alive) { break; }")
            c, _, _ = self.expr(n.cond)
            self.out(f"if (!{c}) {{ break; }}")
            cap = min(n.max_iterations, 0xFFFFFFFF)
            self.out(f"if ({count} == {cap}u) {{ atomicOr(&vy_ctl[0], 2u); break; }}")
            self.out(f"{count}++;")
            if self.cancel:
                self.out("vy_trips++;")
                self.out("if ((vy_trips & 1023u) == 0u && atomicLoad(&vy_ctl[1]) != 0u) { return; }")
            saved = dict(self.ranges.env)
            self.block(n.body, guarded or (self.alive and any(isinstance(s, N.Return) for s in N.walk_nodes((n,)))))
            self.ranges.env = saved
            self.close()
        elif isinstance(n, N.Break):
            self.out("break;")
        elif isinstance(n, N.Continue):
            self.out("continue;")
        elif isinstance(n, N.Block | N.Region):
            self.open("")
            self.block(n.body, guarded)
            self.close()
        elif isinstance(n, N.Return):
            self.out("vy_alive = false;" if self.alive else "return;")
        elif isinstance(n, N.Barrier):
            if n.ordering is MemoryOrdering.SEQ_CST:
                self.out("storageBarrier();")
                self.out("workgroupBarrier();")
        elif isinstance(n, N.Eval):
            self.expr(n.value)
        elif isinstance(n, N.IndirectDispatch):
            pass

    # ---- module --------------------------------------------------------------------------------
    def kernel(self, index: int, body) -> str:
        self.lines = []
        self.indent = 1
        self.tmp = 0
        self.scope = [{}]
        self.ranges.env = {}
        self.alive = self.plan.has_barrier and any(isinstance(n, N.Return) for n in N.walk_nodes(body))
        self.cancel = bool(self.plan.cancel_checked and self.plan.cancel_checked[index])
        wx, wy, wz = self.program.workgroup_size
        for loc in self.program.local_buffers:
            self.out(f"var l_{loc.name}: array<u32, {loc.count}>;")
        if self.plan.workgroup:
            self.out("let vy_lin: u32 = vy_lid.x + " f"{wx}u * (vy_lid.y + {wy}u * vy_lid.z);")
            for w in self.plan.workgroup:
                zero = "atomicStore(&w_{0}[z], 0u)" if w.name in self.atomic_buffers else "w_{0}[z] = 0u"
                if w.name in self.atomic_buffers and w.dtype is DataType.I32:
                    zero = "atomicStore(&w_{0}[z], 0i)"
                self.out(f"for (var z: u32 = vy_lin; z < {w.count}u; z += {wx * wy * wz}u) {{ {zero.format(w.name)}; }}")
            self.out("workgroupBarrier();")
        # a zero the compiler cannot see: f32 literals are xored with it, so no float
        # operation on constants is folded at compile time (where signed zeros and NaNs have
        # been seen to come out differently)
        nb = len(self.plan.bound)
        self.lines[0:0] = ["    " + x for x in (
            f"let vy_z: u32 = vy_n[{nb}];",
            # a grid over the adapter's per-axis limit is launched folded (the driver writes
            # the logical grid to vy_n[nb + 1..3], 0 when unfolded): the workgroup's linear
            # index over the launched grid gives its logical id, and gid stays the flat id
            "var vy_wgid: vec3<u32> = vy_wgp;",
            f"let vy_fold: u32 = vy_n[{nb + 1}];",
            "if (vy_fold != 0u) {",
            "    let vy_l: u32 = vy_wgp.x + vy_nwg.x * (vy_wgp.y + vy_nwg.y * vy_wgp.z);",
            f"    let vy_gy: u32 = vy_n[{nb + 2}];",
            "    vy_wgid = vec3<u32>(vy_l % vy_fold, (vy_l / vy_fold) % vy_gy, vy_l / (vy_fold * vy_gy));",
            f"    if (vy_wgid.z >= vy_n[{nb + 3}]) {{ return; }}",
            "}",
            f"let vy_gid: vec3<u32> = vy_wgid * vec3<u32>({wx}u, {wy}u, {wz}u) + vy_lid;")]
        if self.alive:
            self.out("var vy_alive: bool = true;")
        if self.cancel:
            self.out("var vy_trips: u32 = 0u;")
        self.block(body)
        head = (f"@compute @workgroup_size({wx}, {wy}, {wz})\nfn {self.plan.entries[index]}("
                "@builtin(local_invocation_id) vy_lid: vec3<u32>, @builtin(workgroup_id) vy_wgp: vec3<u32>, "
                "@builtin(num_workgroups) vy_nwg: vec3<u32>)")
        return head + " {\n" + "\n".join(self.lines) + "\n}\n"

    def module(self) -> str:
        decls = []
        for k, b in enumerate(self.plan.bound):
            access = "read" if not b.writable else "read_write"
            elem = "u32"
            if b.name in self.atomic_buffers:
                elem = "atomic<i32>" if b.dtype is DataType.I32 else "atomic<u32>"
            decls.append(f"@group(0) @binding({k}) var<storage, {access}> b_{b.name}: array<{elem}>;")
        n = len(self.plan.bound)
        decls.append(f"@group(0) @binding({n}) var<storage, read> vy_n: array<u32>;")
        decls.append(f"@group(0) @binding({n + 1}) var<storage, read_write> vy_ctl: array<atomic<u32>, 2>;")
        for w in self.plan.workgroup:
            elem = "u32"
            if w.name in self.atomic_buffers:
                elem = "atomic<i32>" if w.dtype is DataType.I32 else "atomic<u32>"
            decls.append(f"var<workgroup> w_{w.name}: array<{elem}, {w.count}>;")
        kernels = [self.kernel(i, body) for i, body in enumerate(self.plan.phases)]
        return "// generated by vyre (WGSL)\n" + "\n".join(decls) + "\n" + PRELUDE + "\n" + "\n".join(kernels)


def emit_wgsl(plan: KernelPlan) -> str:
    """Complete WGSL module of a plan (check `refusals` first)."""
    return WgslEmitter(plan).module()
