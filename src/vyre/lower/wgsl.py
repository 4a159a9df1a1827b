"""The WGSL syntax record (`WgslSyntax`) for the one printer walk (`vyre.lower.printer`).

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
  implementations may assume there are no NaNs or infinities;
* every loop records how it was left (`Syntax.checked_loops`): Mesa's llvmpipe (lavapipe)
  ends every loop of an invocation once the invocation has made 65,535 loop trips in all,
  whatever the loops are; such a loop sets the ``device_loops`` error instead of giving
  short results.

f32 division, fmod, sqrt, reciprocal (WGSL allows 2.5 ULP) and ``fma`` (WGSL does not
promise one rounding) are rewritten before planning into exact integer algorithms
(`vyre.lower.legalize`, the features in `LACKS`), and u64/i64 values become pairs of u32
words (`vyre.lower.legalize.int64`; drivers scale those buffers' count words by
`word_scale`), and u8/i8/u16/i16 storage is packed into u32 words
(`vyre.lower.legalize.narrow`), and f16/bf16 values are their bits in u32 through integer
helpers (`vyre.lower.legalize.half`): `legalized`. The correctly rounded transcendentals (S13)
are vyre.lower.crmath's functions printed for WGSL (`crmath.wgsl_prelude`: the same float64
algorithm, float64 in software on u32 words), so they give the bits the other targets give.
What WGSL still cannot give is refused before printing (`refusals`): 64-bit atomics and
subgroup operations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.kinds import EXPR_KINDS, Kind, UnknownKind
from vyre.ir.program import Program
from vyre.ir.types import AtomicOp, BinOp, Builtin, DataType, UnOp

from . import crmath
from .floats import CANON, Flags
from .legalize import Feature, legalize
from .legalize.half import HALF, HalfRefusal, lower_half
from .legalize.int64 import Int64Refusal, lower_int64
from .legalize.matmul import expand_matmul
from .legalize.narrow import NARROW, lower_narrow
from .legalize.tile import expand_tiles
from .plan import KernelPlan, lower
from .printer import emit
from .syntax import ERR_DEVICE_LOOPS, Syntax, error_bits

if TYPE_CHECKING:
    from .printer import Printer

U32, I32, F32, BOOL = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
WT = {U32: "u32", I32: "i32", F32: "f32", BOOL: "bool"}
_INEXACT_BIN = {BinOp.DIV: "f32 division", BinOp.MOD: "f32 remainder (fmod)"}
# what WGSL lacks and `vyre.lower.legalize` rewrites (drivers legalize before planning)
LACKS = frozenset({Feature.F32_DIV, Feature.F32_MOD, Feature.F32_SQRT, Feature.F32_RECIPROCAL,
                   Feature.FMA})


class WgslRefusal(Exception):
    """The program needs something WGSL cannot give exactly (the reason is the message);
    ``change`` is how the program itself could avoid it, where it can."""

    def __init__(self, reason: str, change: str = "") -> None:
        super().__init__(reason)
        self.change = change


def legalized(program: Program) -> Program:
    """The Program WGSL prints for ``program``: matmul_acc and load_tile as scalar loops
    (`vyre.lower.legalize.matmul`, `vyre.lower.legalize.tile`, before narrow storage is packed), 64-bit integers as u32 pairs
    (`vyre.lower.legalize.int64`) and the float operations in `LACKS` as exact integer
    helpers. Raises `WgslRefusal` for what the pair lowering refuses."""
    try:
        program = lower_int64(lower_narrow(lower_half(expand_tiles(expand_matmul(program)))))
    except (Int64Refusal, HalfRefusal) as exc:
        raise WgslRefusal(str(exc)) from None
    return legalize(program, LACKS)


# 64-bit integers run as u32 pairs, u8/i8/u16/i16 storage packed in u32 words
# and f16/bf16 as u32 bits through integer helpers
_PAIRED = set(WT) | {DataType.U64, DataType.I64} | set(NARROW) | set(HALF)


# What core WGSL physically lacks: the only refusals (docs/wgpu.md's table), each reason as
# `refusals` words it (tests match these texts exactly).
ATOMIC64 = "64-bit atomics (core WGSL has no 64-bit atomics)"
SUBGROUP = "subgroup operations (not in core WGSL)"
# Per-invocation (function-scope) arrays are private memory, which WebGPU does not bound. NVIDIA's
# Vulkan driver (580.159) loses the device while creating the pipeline of a shader with a 16 KiB
# array and runs one of 8 KiB (scripts/probe-wgpu-private-memory on the H100); lavapipe runs
# both. One limit for every adapter, so a program is refused alike everywhere, before the
# driver sees it.
PRIVATE_LIMIT_BYTES = 8192
PRIVATE = f"more than {PRIVATE_LIMIT_BYTES} bytes of per-invocation arrays (NVIDIA's Vulkan driver loses the device)"
HARDWARE_REFUSALS = frozenset({ATOMIC64, SUBGROUP, PRIVATE})


def _r_value(e, wide: set[str]) -> str | None:
    return None if e.dtype in _PAIRED else f"{e.dtype.value} values (not in core WGSL)"


def _r_atomic(e: E.Atomic, wide: set[str]) -> str | None:
    return ATOMIC64 if e.buffer in wide else None


def _r_subgroup(e: E.Expr, wide: set[str]) -> str | None:
    return SUBGROUP


def _r_none(e, wide: set[str]) -> str | None:
    return None


def _refusal(k: Kind) -> Callable[[Any, set[str]], str | None]:
    """What kind ``k`` can make WGSL refuse, read from its row: a typed value (a field of
    type DataType), an operation of the subgroup, an atomic (on a 64-bit buffer), or nothing."""
    if k.cls is E.Atomic:
        return _r_atomic
    if k.subgroup:
        return _r_subgroup
    if any(f.type is DataType and f.name == "dtype" for f in k.fields):
        return _r_value
    return _r_none


# what each expression kind can make WGSL refuse (every kind of a built program: a new one is
# decided by its row, `_refusal`; tests/ir/test_kind_tables.py checks the table covers the list)
REFUSE = {k.cls: _refusal(k) for k in EXPR_KINDS if k.built}


def refusals(program: Program) -> list[str]:
    """Why WGSL cannot give this program the reference's bytes, as far as the program's
    text says (f32 division, fmod, sqrt, reciprocal and fma are legalized first, `LACKS`)."""
    why: list[str] = []
    for t in sorted({b.dtype for b in program.buffers} - _PAIRED, key=lambda d: d.value):
        why.append(f"{t.value} buffers (no {t.value} storage type in core WGSL)")
    wide = {b.name for b in program.buffers if b.dtype in (DataType.U64, DataType.I64)}
    for e in N.program_exprs(program):
        rule = REFUSE.get(type(e))
        if rule is None:
            raise UnknownKind(e)
        reason = rule(e, wide)
        if reason is not None:
            why.append(reason)
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
// A normal result of normal operands is the hardware's correctly rounded one: that common case
// costs one range test. Every other case (a special or zero operand, a zero, subnormal,
// infinite or NaN result) is decided on the operands' bits in the `_slow` form. Neither ever
// returns a subnormal (S9 flushes it to a zero of its sign), so the printer need not flush
// their results before using them (`WgslSyntax.flushed_results`).
fn vy_normal(r: f32) -> bool { return (bitcast<u32>(r) & 0x7F800000u) - 0x00800000u < 0x7F000000u; }
fn vy_fadd(a: f32, b: f32) -> f32 {
    let r = a + b;
    if (vy_normal(r)) { return r; }
    return vy_fadd_slow(a, b);
}
fn vy_fadd_slow(a: f32, b: f32) -> f32 {
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
    return vy_daz(a + b);
}
// x + a*b with both operations rounded (never fused: the product is opaque): when the
// product and the sum are both normal, each is the hardware's correctly rounded result, as in
// vy_fmul and vy_fadd; every other case goes through them.
fn vy_fmla(x: f32, a: f32, b: f32) -> f32 {
    let p = a * b;
    let s = x + vy_opaque(p);
    if (vy_normal(p) && vy_normal(s)) { return s; }
    return vy_fadd(x, vy_fmul(a, b));
}
fn vy_fsub(a: f32, b: f32) -> f32 { return vy_fadd(a, bitcast<f32>(bitcast<u32>(b) ^ 0x80000000u)); }
// A product never reaches an addition as the multiplication's own result: the compiler may
// contract a*b + c into a fused multiply-add (NVIDIA's Vulkan driver did, in a dot product
// loop), which rounds once. xor with the zero it cannot see (vy_z) hides where it came from.
fn vy_opaque(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ vy_z); }
fn vy_fmul(a: f32, b: f32) -> f32 { return vy_opaque(vy_fmul_raw(a, b)); }
fn vy_fmul_raw(a: f32, b: f32) -> f32 {
    let r = a * b;
    if (vy_normal(r)) { return r; }
    return vy_fmul_slow(a, b);
}
fn vy_fmul_slow(a: f32, b: f32) -> f32 {
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
// A zero or subnormal product of nonzero operands: how the device rounded it is not known
// (NVIDIA's Vulkan driver gave 0 where the reference rounds up to the smallest normal, S9),
// and S9 flushes every subnormal result. Decide on the exact product, in integers only (the
// NVIDIA compiler rewrote an earlier float form: it reassociated (|a|*2^64)*|b| into the
// flushed (|a|*|b|)*2^64, and later dropped the rounding-up case of the float error term).
// The product rounds to 2^-126 iff |a*b| >= 2^-126 - 2^-150 (the tie goes to the even 2^-126).
// With P = ma*mb the product of the 24-bit significands (P < 2^48) and |a*b| = P*2^(ea+eb-300),
// that is P >> k >= 2^24 - 1 for k = 150 - ea - eb (exact: the bound is a multiple of 2^k).
// P is formed as hi:lo u32 words from 12-bit halves (each partial product is below 2^25).
fn vy_fmul_tiny(a: f32, b: f32, sign: u32) -> f32 {
    let x = bitcast<u32>(a);
    let y = bitcast<u32>(b);
    let ea = (x >> 23u) & 0xFFu;
    let eb = (y >> 23u) & 0xFFu;
    if (ea == 0u || eb == 0u) { return bitcast<f32>(sign); }   // a subnormal operand is flushed (S9)
    let ma = (x & 0x7FFFFFu) | 0x800000u;
    let mb = (y & 0x7FFFFFu) | 0x800000u;
    let ah = ma >> 12u;
    let al = ma & 0xFFFu;
    let bh = mb >> 12u;
    let bl = mb & 0xFFFu;
    let hh = ah * bh;
    let mid = ah * bl + al * bh;
    let ll = al * bl;
    let lo1 = ll + (mid << 12u);
    let lo = lo1 + (hh << 24u);
    let hi = (hh >> 8u) + (mid >> 20u) + select(0u, 1u, lo1 < ll) + select(0u, 1u, lo < lo1);
    let e = ea + eb;
    if (e >= 150u) { return bitcast<f32>(sign | 0x00800000u); }   // P >> k >= 2^46 for k <= 0 (not reached)
    let k = 150u - e;
    if (k > 24u) { return bitcast<f32>(sign); }
    let up = (hi >> k) != 0u || ((lo >> k) | (hi << (32u - k))) >= 0xFFFFFFu;
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
    if (b == 0i || (a == bitcast<i32>(0x80000000u) && b == -1i)) { atomicOr(&vy_ctl[0], VY_E_DIVISION); return 0i; }
    let q = vy_mag(a) / vy_mag(b);
    return bitcast<i32>(select(q, 0u - q, (a < 0i) != (b < 0i)));
}
fn vy_imod(a: i32, b: i32) -> i32 {
    if (b == 0i || (a == bitcast<i32>(0x80000000u) && b == -1i)) { atomicOr(&vy_ctl[0], VY_E_DIVISION); return 0i; }
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
PRELUDE = error_bits(PRELUDE)


_F32_CMP = {BinOp.EQ: "vy_feq({a}, {b})", BinOp.NE: "!vy_feq({a}, {b})", BinOp.LT: "vy_flt({a}, {b})",
            BinOp.GT: "vy_flt({b}, {a})", BinOp.LE: "(vy_flt({a}, {b}) || vy_feq({a}, {b}))",
            BinOp.GE: "(vy_flt({b}, {a}) || vy_feq({a}, {b}))"}
_F32_BIN = {BinOp.ADD: "vy_fadd({a}, {b})", BinOp.SUB: "vy_fsub({a}, {b})", BinOp.MUL: "vy_fmul({a}, {b})",
            BinOp.MIN: "vy_fmin({a}, {b})", BinOp.MAX: "vy_fmax({a}, {b})",
            BinOp.ABS_DIFF: "bitcast<f32>(bitcast<u32>(vy_fsub({a}, {b})) & 0x7FFFFFFFu)"}
_F32_UN = {UnOp.NEGATE: "bitcast<f32>(bitcast<u32>({a}) ^ 0x80000000u)",
           UnOp.ABS: "bitcast<f32>(bitcast<u32>({a}) & 0x7FFFFFFFu)", UnOp.FLOOR: "vy_floor({a})",
           UnOp.CEIL: "vy_ceil({a})", UnOp.TRUNC: "vy_trunc({a})", UnOp.ROUND: "vy_fround({a})",
           UnOp.SIGN: "vy_fsign({a})"}
# integer operations ({ua}/{ub}: the operands' bits as u32)
_U32_BIN = {BinOp.ADD: "{a} + {b}", BinOp.SUB: "{a} - {b}", BinOp.MUL: "{a} * {b}",
            BinOp.DIV: "vy_udiv({a}, {b})", BinOp.MOD: "vy_umod({a}, {b})",
            BinOp.BITAND: "{a} & {b}", BinOp.BITOR: "{a} | {b}", BinOp.BITXOR: "{a} ^ {b}",
            BinOp.MIN: "min({a}, {b})", BinOp.MAX: "max({a}, {b})",
            BinOp.ABS_DIFF: "select({b} - {a}, {a} - {b}, {a} > {b})",
            BinOp.SATURATING_ADD: "vy_usat_add({a}, {b})", BinOp.SATURATING_SUB: "select(0u, {a} - {b}, {a} > {b})",
            BinOp.SATURATING_MUL: "vy_usat_mul({a}, {b})", BinOp.MUL_HIGH: "vy_umulhi({a}, {b})"}
_I32_BIN = {BinOp.ADD: "bitcast<i32>({ua} + {ub})", BinOp.SUB: "bitcast<i32>({ua} - {ub})",
            BinOp.MUL: "bitcast<i32>({ua} * {ub})", BinOp.DIV: "vy_idiv({a}, {b})",
            BinOp.MOD: "vy_imod({a}, {b})", BinOp.BITAND: "{a} & {b}", BinOp.BITOR: "{a} | {b}",
            BinOp.BITXOR: "{a} ^ {b}", BinOp.MIN: "min({a}, {b})", BinOp.MAX: "max({a}, {b})",
            BinOp.ABS_DIFF: "bitcast<i32>(select({ub} - {ua}, {ua} - {ub}, {a} > {b}))",
            BinOp.SATURATING_ADD: "vy_isat_add({a}, {b})", BinOp.SATURATING_SUB: "vy_isat_sub({a}, {b})",
            BinOp.SATURATING_MUL: "vy_isat_mul({a}, {b})", BinOp.MUL_HIGH: "vy_smulhi({a}, {b})"}
_ATOMIC = {AtomicOp.ADD: "atomicAdd", AtomicOp.OR: "atomicOr", AtomicOp.AND: "atomicAnd",
           AtomicOp.XOR: "atomicXor", AtomicOp.MIN: "atomicMin", AtomicOp.MAX: "atomicMax",
           AtomicOp.EXCHANGE: "atomicExchange"}
_ZERO = {U32: "0u", I32: "0i"}


# the pipeline-overridable constant that turns on the folded-grid prologue: false in the
# pipelines a driver makes first, so the compiler drops the prologue where no grid is folded
FOLDED = "vy_folded"


def vy_n(i: int) -> str:
    """The WGSL expression of count word ``i``."""
    return f"vy_n[{i}]"




class WgslSyntax(Syntax):
    """WGSL (32-bit types only; see `refusals`). Bound buffers are ``array<u32>`` (or
    ``atomic<...>`` where the program uses atomics on them), element counts are read from
    the ``vy_n`` binding after them, and ``vy_ctl`` is the control block."""

    name = "wgsl"
    types = WT
    barrier = ("storageBarrier();", "workgroupBarrier();")
    cancel_poll = ("vy_trips++;", "if ((vy_trips & 1023u) == 0u && atomicLoad(&vy_ctl[1]) != 0u) { return; }")
    checked_loops = True
    unroll = 4   # lavapipe: at least 4 x 65,534 trips of an innermost loop
    # vy_fadd, vy_fsub and vy_fmul flush a subnormal result themselves (the prelude)
    flushed_results = frozenset({BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.ABS_DIFF})
    f32_mul_add = "vy_fmla({x}, {a}, {b})"

    # ---- declarations and statements ------------------------------------------------------
    def var(self, name: str, type_: str, init: str | None) -> str:
        return f"var {name}: {type_};" if init is None else f"var {name}: {type_} = {init};"

    def temp(self, name: str, type_: str, value: str) -> str:
        return f"let {name}: {type_} = {value};"

    def inline(self, head: str, *stmts: str) -> str:
        return f"{head} {{ {' '.join(stmts)} }}"

    def error(self, bit: int) -> str:
        return f"atomicOr(&vy_ctl[0], {bit}u);"

    def while_open(self, p: Printer, decls: list[str]) -> None:
        for d in decls:
            p.out(d)
        p.open("loop")

    def while_close(self, p: Printer) -> None:
        p.close()

    # ---- values -----------------------------------------------------------------------------
    def lit(self, t: DataType, bits: int) -> str:
        if t is U32:
            return f"{bits}u"
        if t is I32:
            return f"bitcast<i32>({bits}u)"
        if t is F32:   # opaque to the compiler: it folds float helpers on constants wrongly
            return f"bitcast<f32>(0x{bits:08X}u ^ vy_z)"
        return "true" if bits else "false"

    def builtin(self, kind: Builtin, axis: int) -> str:
        return {Builtin.GID: "vy_gid", Builtin.LID: "vy_lid", Builtin.WGID: "vy_wgid"}[kind] + "." + "xyz"[axis]

    def count(self, p: Printer, buffer: str) -> str:
        return vy_n(p.plan.param_index(buffer))

    def word(self, p: Printer, buffer: str, i: str) -> str:
        ptr = p.ptr(buffer)
        if buffer in p.atomic_buffers:
            signed = p.program.buffer(buffer).dtype is I32
            return f"{'bitcast<u32>(' if signed else '('}atomicLoad(&{ptr}[{i}]))"
        return f"{ptr}[{i}]"

    def load(self, p: Printer, buffer: str, i: str, in_bounds: bool) -> str:
        if in_bounds:
            return p.fresh(U32, self.word(p, buffer, i))
        n = p.count(buffer)
        safe = p.fresh(U32, f"select(0u, {i}, {i} < {n})")
        return p.fresh(U32, f"select(0u, {self.word(p, buffer, safe)}, {i} < {n})")

    def from_word(self, p: Printer, word: str, t: DataType) -> str:
        if t is U32:
            return word
        if t is I32 or t is F32:
            return p.fresh(t, f"bitcast<{WT[t]}>({word})")
        return p.fresh(t, f"{word} != 0u")

    def to_word(self, v: str, t: DataType, stored: DataType | None = None) -> str:
        if t is F32 or t is I32:
            return f"bitcast<u32>({v})"
        if t is BOOL:
            return f"select(0u, 1u, {v})"
        return v

    def store(self, p: Printer, buffer: str, i: str, word: str) -> str:
        ptr = p.ptr(buffer)
        if buffer in p.atomic_buffers:
            signed = p.program.buffer(buffer).dtype is I32
            return f"atomicStore(&{ptr}[{i}], {'bitcast<i32>(' + word + ')' if signed else word});"
        return f"{ptr}[{i}] = {word};"

    def select(self, c: str, a: str, b: str) -> str:
        return f"select({b}, {a}, {c})"

    def bitcast(self, v: str, t: DataType, d: DataType) -> str:
        return f"bitcast<{WT[d]}>({v})"

    # ---- operations -------------------------------------------------------------------------
    def int_bin(self, op: BinOp, t: DataType, rt: DataType, a: str, b: str) -> str:
        u = t is U32
        ua, ub = (a, b) if u else (f"bitcast<u32>({a})", f"bitcast<u32>({b})")
        if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT):
            s = f"(bitcast<u32>({b}) & 31u)"
            if op is BinOp.SHR:
                return f"{a} >> {s}"
            body = {BinOp.SHL: f"{ua} << {s}", BinOp.ROTATE_LEFT: f"vy_rotl({ua}, {s})",
                    BinOp.ROTATE_RIGHT: f"vy_rotr({ua}, {s})"}[op]
            return body if u else f"bitcast<i32>({body})"
        return (_U32_BIN if u else _I32_BIN)[op].format(a=a, b=b, ua=ua, ub=ub)

    def int_un(self, op: UnOp, t: DataType, a: str) -> str:
        u = t is U32
        ua = a if u else f"bitcast<u32>({a})"
        back = "{}" if u else "bitcast<i32>({})"
        if op is UnOp.NEGATE:
            return back.format(f"0u - {ua}")
        if op is UnOp.BITNOT:
            return f"~{a}"
        if op is UnOp.ABS:
            return a if u else back.format(f"select({ua}, 0u - {ua}, {a} < 0i)")
        if op is UnOp.SIGN:
            return f"select(0u, 1u, {a} != 0u)" if u else f"select(select(0i, -1i, {a} < 0i), 1i, {a} > 0i)"
        return back.format({UnOp.POPCOUNT: f"countOneBits({ua})", UnOp.CLZ: f"countLeadingZeros({ua})",
                            UnOp.CTZ: f"vy_ctz({ua})", UnOp.REVERSE_BITS: f"reverseBits({ua})",
                            UnOp.BYTE_SWAP: f"vy_bswap({ua})"}[op])

    def f32_cmp(self, op: BinOp, a: str, b: str) -> str:
        return _F32_CMP[op].format(a=a, b=b)

    def f32_bin(self, op: BinOp, a: str, b: str) -> str:
        if op in crmath.HELPER:   # correctly rounded (S13): f32 values as their bits
            return f"bitcast<f32>({crmath.HELPER[op]}(bitcast<u32>({a}), bitcast<u32>({b})))"
        if op in _INEXACT_BIN:
            raise WgslRefusal(_INEXACT_BIN[op] + " (WGSL allows 2.5 ULP)")
        if op not in _F32_BIN:
            raise WgslRefusal(f"f32 {op.value} (refused: see vyre.lower.wgsl.refusals)")
        return _F32_BIN[op].format(a=a, b=b)

    def f32_un(self, op: UnOp, a: str) -> str:
        if op in crmath.HELPER:   # correctly rounded (S13): f32 values as their bits
            return f"bitcast<f32>({crmath.HELPER[op]}(bitcast<u32>({a})))"
        if op not in _F32_UN:
            raise WgslRefusal(f"f32 {op.value} (refused: see vyre.lower.wgsl.refusals)")
        return _F32_UN[op].format(a=a)

    def cast(self, p: Printer, v: str, t: DataType, f: Flags, d: DataType) -> tuple[str, DataType, Flags]:
        if d is BOOL:
            if t is F32:
                return p.fresh(d, f"(bitcast<u32>({p.operand(v, f)}) & 0x7FFFFFFFu) != 0u"), d, CANON
            return p.fresh(d, f"{v} != {_ZERO[t]}"), d, CANON
        if t is BOOL:
            one, zero = {U32: ("1u", "0u"), I32: ("1i", "0i"), F32: ("1.0", "0.0")}[d]
            return p.fresh(d, f"select({zero}, {one}, {v})"), d, CANON
        if d is F32:
            return p.fresh(d, f"{'vy_u2f' if t is U32 else 'vy_i2f'}({v})"), d, CANON
        if t is F32:
            return p.fresh(d, f"{'vy_f2u' if d is U32 else 'vy_f2i'}({v})"), d, CANON
        return p.fresh(d, f"bitcast<{WT[d]}>({v})"), d, CANON

    def fma(self, a: str, b: str, c: str) -> str:
        raise WgslRefusal("fma (WGSL does not promise a single rounding)")

    def widen(self, p: Printer, v: str, t: DataType) -> tuple[str, DataType, Flags]:
        raise WgslRefusal(f"{t.value} values (not in core WGSL)")

    narrow = widen   # type: ignore[assignment]

    def atomic(self, p: Printer, e: E.Atomic, i: str, v: str, t: DataType, x: str | None) -> str:
        ptr = f"&{p.ptr(e.buffer)}[{i}]"
        cas = e.op is AtomicOp.COMPARE_EXCHANGE
        in_bounds = p.ranges.in_bounds(e.buffer, e.index)
        if in_bounds and not cas:
            return p.fresh(t, f"{_ATOMIC[e.op]}({ptr}, {v})")
        r = p.name("vy_cas" if cas else "vy_a")
        p.out(self.var(r, WT[t], _ZERO[t]))
        guard = "true" if in_bounds else f"{i} < {p.count(e.buffer)}"
        if cas:   # a weak CAS may fail spuriously: retry until it decides (a loop: checked)
            p.out(f"if ({guard}) {{ var {r}d = false; loop {{ let c = atomicCompareExchangeWeak({ptr}, {x}, {v}); "
                  f"{r} = c.old_value; if (c.exchanged || c.old_value != {x}) {{ {r}d = true; break; }} }} "
                  f"if (!{r}d) {{ {self.error(ERR_DEVICE_LOOPS)} }} }}")
        else:
            p.out(f"if ({guard}) {{ {r} = {_ATOMIC[e.op]}({ptr}, {v}); }}")
        return r

    # ---- kernels ------------------------------------------------------------------------------
    def prologue(self, p: Printer, index: int) -> None:
        # a zero the compiler cannot see: f32 literals are xored with it, so no float
        # operation on constants is folded at compile time (where signed zeros and NaNs have
        # been seen to come out differently)
        nb = len(p.plan.bound)
        wx, wy, wz = p.program.workgroup_size
        p.out(f"vy_z = {vy_n(nb)};")
        # a grid over the adapter's per-axis limit is launched folded (the driver writes the
        # logical grid to vy_n[nb + 1..3] and launches the pipelines made with the FOLDED
        # override true): the workgroup's linear index over the launched grid gives its
        # logical id, and gid stays the flat id. Elsewhere the compiler drops this block.
        for line in ("var vy_wgid: vec3<u32> = vy_wgp;",
                     f"if ({FOLDED}) {{",
                     f"    let vy_fold: u32 = {vy_n(nb + 1)};",
                     "    let vy_l: u32 = vy_wgp.x + vy_nwg.x * (vy_wgp.y + vy_nwg.y * vy_wgp.z);",
                     f"    let vy_gy: u32 = {vy_n(nb + 2)};",
                     f"    if ((vy_gy | {vy_n(nb + 3)}) == 1u) {{",   # a 1-D logical grid: no division
                     "        if (vy_l >= vy_fold) { return; }",
                     "        vy_wgid = vec3<u32>(vy_l, 0u, 0u);",
                     "    } else {",
                     "        vy_wgid = vec3<u32>(vy_l % vy_fold, (vy_l / vy_fold) % vy_gy, vy_l / (vy_fold * vy_gy));",
                     f"        if (vy_wgid.z >= {vy_n(nb + 3)}) {{ return; }}",
                     "    }",
                     "}",
                     f"let vy_gid: vec3<u32> = vy_wgid * vec3<u32>({wx}u, {wy}u, {wz}u) + vy_lid;"):
            p.out(line)
        for loc in p.program.local_buffers:
            p.out(f"var l_{loc.name}: array<u32, {loc.count}>;")
        if p.plan.workgroup:
            p.out(f"let vy_lin: u32 = vy_lid.x + {wx}u * (vy_lid.y + {wy}u * vy_lid.z);")
            for w in p.plan.workgroup:
                zero = f"w_{w.name}[z] = 0u"
                if w.name in p.atomic_buffers:
                    zero = f"atomicStore(&w_{w.name}[z], {'0i' if w.dtype is I32 else '0u'})"
                p.out(f"for (var z: u32 = vy_lin; z < {w.count}u; z += {wx * wy * wz}u) {{ {zero}; }}")
            p.out("workgroupBarrier();")

    def kernel_head(self, p: Printer, index: int) -> str:
        wx, wy, wz = p.program.workgroup_size
        return (f"@compute @workgroup_size({wx}, {wy}, {wz})\nfn {p.plan.entries[index]}("
                "@builtin(local_invocation_id) vy_lid: vec3<u32>, @builtin(workgroup_id) vy_wgp: vec3<u32>, "
                "@builtin(num_workgroups) vy_nwg: vec3<u32>)")

    def module(self, p: Printer, kernels: list[str]) -> str:
        decls = []
        for k, b in enumerate(p.plan.bound):
            access = "read" if not b.writable else "read_write"
            decls.append(f"@group(0) @binding({k}) var<storage, {access}> b_{b.name}: array<{self.element(p, b)}>;")
        n = len(p.plan.bound)
        decls.append(f"@group(0) @binding({n}) var<storage, read> vy_n: array<u32>;")
        decls.append(f"@group(0) @binding({n + 1}) var<storage, read_write> vy_ctl: array<atomic<u32>, 2>;")
        decls.append(f"override {FOLDED}: bool = false;")
        decls.append("var<private> vy_z: u32;   // zero, set by each kernel from its count words")
        for w in p.plan.workgroup:
            decls.append(f"var<workgroup> w_{w.name}: array<{self.element(p, w)}, {w.count}>;")
        math = ""
        if p.plan.uses_transcendentals:
            math = crmath.wgsl_prelude(p.plan.program.facts.transcendentals)
        return "// generated by vyre (WGSL)\n" + "\n".join(decls) + "\n" + PRELUDE + "\n" + math + "\n".join(kernels)

    @staticmethod
    def element(p: Printer, b) -> str:
        if b.name in p.atomic_buffers:
            return "atomic<i32>" if b.dtype is I32 else "atomic<u32>"
        return "u32"


WGSL = WgslSyntax()


def emit_wgsl(plan: KernelPlan) -> str:
    """Complete WGSL module of a plan (check `refusals` first)."""
    return emit(plan, WGSL)


def generate(program: Program) -> tuple[KernelPlan, str]:
    """Plan and WGSL module of a validated program that `refusals` accepts, legalized first
    (`legalized`; `WgslRefusal` for what legalizing or printing refuses). A program with loops reports through the control
    block: the device may stop a loop (`ERR_DEVICE_LOOPS`)."""
    plan = lower(program, vector=False, legalize=legalized)
    if plan.program.facts.local_bytes > PRIVATE_LIMIT_BYTES:
        raise WgslRefusal(f"{PRIVATE}: {plan.program.facts.local_bytes} bytes once legalized",
                          f"keep per-invocation arrays under {PRIVATE_LIMIT_BYTES // 1024} KiB (workgroup "
                          "memory or a buffer instead)")
    if any(plan.phase_loops) and not plan.needs_error_flag:
        plan = replace(plan, needs_error_flag=True)
    return plan, emit_wgsl(plan)
