"""f16 and bf16 (S27, S28) on targets without 16-bit floats: a 16-bit float value becomes
the u32 holding its 16 bits (upper bits zero), a 16-bit float buffer a u16 buffer (which
`vyre.lower.legalize.narrow` then packs into words).

Every operation widens its operands exactly to f32 (integer helpers: an f16 subnormal
becomes an f32 normal; a bf16 is its bits shifted up, flushed like any f32 operand), applies
the f32 operation (legalized further where the target needs it) and rounds the result once
to the 16-bit type with an integer helper: to nearest even, overflow to infinity, NaN to
0x7E00 (f16) or 0x7FC0 (bf16); f16 keeps subnormal results, bf16 never has them.
Comparisons and predicates use the exact f32 values. Integers become f16 through f32 (exact
below 2^24; everything larger is infinity in f16 anyway) and bf16 through one rounding to 8
significant bits. Bit casts move the 16 bits (u32 -> half keeps the low 16).
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.kinds import kind_of
from vyre.ir.program import BufferDecl, Function, Program
from vyre.ir.rewrite import with_children
from vyre.ir.typecheck import infer
from vyre.ir.types import FLOAT_PREDICATES, DataType, UnOp

from .build import ABS, FRAC, HIDDEN, INF, NAN, SIGN, Body, U, all_, any_, sel, u
from .walk import walk_body, walk_function

H, BH, F = DataType.F16, DataType.BF16, DataType.F32
HALF = (H, BH)
ONE = {H: 0x3C00, BH: 0x3F80}


class HalfRefusal(Exception):
    """What this lowering cannot do (the message names it)."""


def uses_half(program: Program) -> bool:
    """Whether ``program`` names f16 or bf16 anywhere (a fact of the program)."""
    return not program.facts.types.isdisjoint(HALF)


def _rnd(b: Body, m: E.Expr, s: E.Expr) -> E.Expr:
    """``m >> s`` rounded to nearest even (1 <= s <= 31)."""
    q = b.let(m >> s, "q")
    g = (m >> (s - 1)) & 1
    st = sel((m & ((u(1) << (s - 1)) - 1)).ne(u(0)), 1, 0)
    return q + (g & (st | q) & 1)


def widen_f16() -> Function:
    b = Body((("h", U),))
    h = b.arg(0)
    s = b.let((h & 0x8000) << 16, "s")
    e = b.let((h >> 10) & 31, "e")
    f = b.let(h & 0x3FF, "f")
    p = b.let(u(31) - E.Un(UnOp.CLZ, f), "p")
    sub = s | ((p + 103) << 23) | ((f << (u(23) - p)) & FRAC)
    normal = s | ((e + 112) << 23) | (f << 13)
    special = sel(f.eq(u(0)), s | INF, NAN)
    zero_or_sub = sel(f.eq(u(0)), s, sub)
    return b.function("vylh_widen_f16", sel(e.eq(u(31)), special, sel(e.eq(u(0)), zero_or_sub, normal)))


def narrow_f16() -> Function:
    b = Body((("x", U),))
    x = b.arg(0)
    a = b.let(x & ABS, "a")
    s = b.let((x >> 16) & 0x8000, "s")
    e = b.let(a >> 23, "e")
    m = b.let((a & FRAC) | HIDDEN, "m")
    normal = b.let(e.ge(u(113)), "nrm")
    shift = b.let(sel(normal, 13, sel(e.ge(u(101)), u(126) - e, 25)), "sh")
    r = b.let(_rnd(b, m, shift), "r")
    packed = b.let(sel(normal, ((e - 113) << 10) + r, r), "pk")
    mag = sel(packed.ge(u(0x7C00)), 0x7C00, packed)
    result = sel(a.gt(u(INF)), 0x7E00, sel(e.eq(u(0)), s, s | mag))
    return b.function("vylh_narrow_f16", result)


def widen_bf16() -> Function:
    b = Body((("h", U),))
    x = b.let(b.arg(0) << 16, "x")
    flushed = sel((x & INF).eq(u(0)), x & SIGN, x)
    return b.function("vylh_widen_bf16", sel((x & ABS).gt(u(INF)), NAN, flushed))


def narrow_bf16() -> Function:
    b = Body((("x", U),))
    x0 = b.arg(0)
    x = b.let(sel((x0 & INF).eq(u(0)), x0 & SIGN, x0), "x")
    r = (x + 0x7FFF + ((x >> 16) & 1)) >> 16
    return b.function("vylh_narrow_bf16", sel((x & ABS).gt(u(INF)), 0x7FC0, r))


def int_to_bf16(src: DataType) -> Function:
    """An integer of type ``src`` rounded once to bf16 bits (8 significant bits)."""
    ut = DataType.U64 if src.is_wide else U
    lit = E.Expr.u64 if src.is_wide else E.Expr.u32
    b = Body((("v", src),))
    v = b.arg(0)
    if src.is_signed:
        neg = b.let(v.lt(E.Expr.lit(src, 0)), "neg")
        raw = b.let(E.Bitcast(ut, v), "raw")
        mag = b.let(E.Select(neg, lit(0) - raw, raw), "mag")
    else:
        neg = b.let(E.Expr.bool_(False), "neg")
        mag = b.let(v, "mag")
    n = b.let(lit(src.bits) - E.Un(UnOp.CLZ, mag), "n")
    shift = b.let(E.Select(n.gt(lit(8)), n - lit(8), lit(0)), "sh")
    q = b.let(mag >> shift, "q")
    rem = b.let(mag - (q << shift), "rem")
    pos = b.let(shift.gt(lit(0)), "pos")
    half = b.let(E.Select(pos, lit(1) << (shift - lit(1)), lit(0)), "half")
    up = all_(pos, any_(rem.gt(half), all_(rem.eq(half), (q & lit(1)).eq(lit(1)))))
    q2 = b.let(E.Cast(U, q + E.Cast(ut, up)), "q2")
    bits = b.let(E.Bitcast(U, E.Cast(F, q2)) + (E.Cast(U, shift) << 23), "bits")
    mag16 = sel(q2.eq(u(0)), 0, bits >> 16)
    return b.function(f"vylh_{src.value}_to_bf16", mag16 | sel(neg, 0x8000, 0))


class _Half:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.helpers: dict[str, Function] = {}

    def helper(self, make, *args) -> str:
        fn = make(*args)
        self.helpers.setdefault(fn.name, fn)
        return fn.name

    def type(self, e: E.Expr, scope) -> DataType:
        return infer(e, scope, self.p)

    def widen(self, t: DataType, bits: E.Expr) -> E.Expr:
        name = self.helper(widen_f16 if t is H else widen_bf16)
        return E.Bitcast(F, E.Call(name, (bits,)))

    def narrow(self, t: DataType, value: E.Expr) -> E.Expr:
        name = self.helper(narrow_f16 if t is H else narrow_bf16)
        return E.Call(name, (E.Bitcast(U, value),))

    def wide(self, e: E.Expr, scope) -> E.Expr:
        """The f32 value of a 16-bit float expression."""
        return self.widen(self.type(e, scope), self.expr(e, scope))

    def expr(self, e: E.Expr, scope) -> E.Expr:
        rule = _EXPR.get(type(e))
        if rule is None:   # a kind with no rule of its own: what its row says it does
            k = kind_of(e)
            rule = "_arith" if k.arith else "_subgroup" if k.subgroup else None
        if rule is not None:
            done = getattr(self, rule)(e, scope, self.type(e, scope))
            if done is not None:
                return done
        kids = E.children(e)
        if not kids:
            return e
        return with_children(e, [self.expr(k, scope) for k in kids])

    def _lit(self, e: E.Lit, scope, t) -> E.Expr | None:
        return u(e.bits) if t in HALF else None

    def _spec(self, e: E.Spec, scope, t) -> E.Expr | None:
        """One left unspecialized: its default's bits (as the printers do; drivers specialize
        first)."""
        return u(e.bits) if t in HALF else None

    def _bin(self, e: E.Bin, scope, t) -> E.Expr | None:
        if self.type(e.left, scope) not in HALF:
            return None
        r = E.Bin(e.op, self.wide(e.left, scope), self.wide(e.right, scope))
        return self.narrow(t, r) if t in HALF else r

    def _un(self, e: E.Un, scope, t) -> E.Expr | None:
        if self.type(e.operand, scope) not in HALF:
            return None
        r = E.Un(e.op, self.wide(e.operand, scope))
        return r if e.op in FLOAT_PREDICATES else self.narrow(t, r)

    def _arith(self, e: E.Expr, scope, t) -> E.Expr | None:
        """Arithmetic on 16-bit floats (fma): its operands widened, its result rounded once."""
        if t not in HALF:
            return None
        return self.narrow(t, with_children(e, [self.wide(k, scope) for k in E.children(e)]))

    def _cast(self, e: E.Cast, scope, t) -> E.Expr | None:
        src = self.type(e.value, scope)
        x = self.expr(e.value, scope)
        if src is t:
            return x
        if src in HALF:
            w = self.widen(src, x)
            return self.narrow(t, w) if t in HALF else w if t is F else E.Cast(t, w)
        if t not in HALF:
            return None
        if src is F:
            return self.narrow(t, x)
        if src is DataType.BOOL:
            return sel(x, ONE[t], 0)
        if t is H:
            return self.narrow(t, E.Cast(F, x))
        return E.Call(self.helper(int_to_bf16, src), (x,))

    def _bitcast(self, e: E.Bitcast, scope, t) -> E.Expr | None:
        src = self.type(e.value, scope)
        if t in HALF and src not in HALF:       # u32 -> half: the low 16 bits
            return self.expr(e.value, scope) & 0xFFFF
        if t in HALF or src in HALF:            # half <-> half, half -> u32 (zero-extended)
            return self.expr(e.value, scope)
        return None

    def _atomic(self, e: E.Atomic, scope, t) -> E.Expr | None:
        if t in HALF:   # `vyre.lower.plan.lower` runs accumulate first
            raise HalfRefusal("16-bit float atomics left for this rewrite (rewrite them onto u32 atomics "
                              "with vyre.lower.accumulate first)")
        return None

    def _subgroup(self, e: E.Expr, scope, t) -> E.Expr | None:
        if t in HALF:
            raise HalfRefusal("subgroup operations on 16-bit floats")
        return None

    def stmt(self, n: N.Node, scope) -> list[N.Node] | None:
        return None     # statements are walked generically (`walk`)

    def function(self, f: Function) -> Function:
        return walk_function(f, self, tuple((name, U if t in HALF else t) for name, t in f.params))


# how each kind is lowered (names of `_Half` methods); a kind not here is lowered by its row
# (`Kind.arith`: `_arith`; `Kind.subgroup`: `_subgroup`) or else rebuilt as it is: it moves
# 16-bit values as their bits (loads, selects, locals)
_EXPR = {E.Lit: "_lit", E.Spec: "_spec", E.Bin: "_bin", E.Un: "_un", E.Cast: "_cast",
         E.Bitcast: "_bitcast", E.Atomic: "_atomic"}


def lower_half(program: Program) -> Program:
    """``program`` with f16/bf16 values as u32 bits and their buffers as u16 (module doc)."""
    if not uses_half(program):
        return program
    lw = _Half(program)
    functions = tuple(lw.function(f) for f in program.functions)
    body = walk_body(program.body, {}, lw)
    buffers = tuple(BufferDecl(b.name, b.binding, b.access, DataType.U16, b.count) if b.dtype in HALF else b
                    for b in program.buffers)
    return Program(buffers, program.workgroup_size, body, tuple(lw.helpers.values()) + functions)
