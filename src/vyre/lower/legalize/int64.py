"""u64/i64 on targets with only 32-bit integers: every 64-bit value becomes a pair of u32
words ``(lo, hi)`` (S25), every 64-bit buffer a u32 buffer of two little-endian words per
element.

A 64-bit local ``x`` becomes the u32 locals ``x`` (low word) and ``x_vylhi``; a parameter
likewise. An operation becomes a call of a helper (`vyre.lower.legalize.int64_ops` builds
their bodies) that returns the low word and leaves the high word in a per-invocation scratch
array (``vyl_hi``) at a slot owned by that call site; the caller reads the slot right after
the call, within the same argument list, so nothing else can write it in between and every
operand is still evaluated once, left to right (S22). A function with a 64-bit result does
the same with a slot of its own. Loads and stores of element ``i`` touch words ``2i`` and
``2i+1`` only when ``i`` is below the element count (S6), and ``buf_len`` gives elements.

Drivers must give a 64-bit buffer's count word in u32 words (`word_scale`): the count is
``buf_len(name) >> 1`` here. A 64-bit loop runs a u32 counter (`_Lowering._s_loop`).
Refused (`Int64Refusal`): 64-bit atomics, subgroup operations on 64-bit values, 16-bit float
casts of 64-bit values and more than `MAX_SLOTS` 64-bit operations in one program (each
call site owns a word of a per-invocation array).
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.kinds import kind_of
from vyre.ir.program import BufferDecl, Function, Program
from vyre.ir.rewrite import with_children
from vyre.ir.typecheck import TypeFault, body_scope, infer
from vyre.ir.types import BinOp, DataType, UnOp

from . import int64_ops as K
from .build import Body, U, u
from .walk import walk_body, walk_function

SCRATCH = "vyl_hi"
HI = "_vylhi"
WIDE = (DataType.U64, DataType.I64)
MAX_SLOTS = 4096   # 64-bit operations per program: a u32 word of private memory each
Pair = tuple[E.Expr, E.Expr]


class Int64Refusal(Exception):
    """What the pair lowering cannot do (the message names it)."""


def uses_int64(program: Program) -> bool:
    """Whether ``program`` has 64-bit integer buffers or values (a fact of the program)."""
    return not program.facts.types.isdisjoint(WIDE)


def word_scale(program: Program) -> dict[str, int]:
    """Bound buffers whose count word a driver must multiply (u32 words per element)."""
    return {b.name: 2 for b in program.bound_buffers if b.dtype in WIDE}


_BIN2 = {  # op -> (unsigned builder, signed builder) of (b, al, ah, bl, bh) -> pair
    BinOp.ADD: (K.add, K.add), BinOp.SUB: (K.sub, K.sub), BinOp.MUL: (K.mul, K.mul),
    BinOp.DIV: (K.div_u, K.div_s), BinOp.MOD: (K.mod_u, K.mod_s),
    BinOp.BITAND: (lambda b, al, ah, bl, bh: (al & bl, ah & bh),) * 2,
    BinOp.BITOR: (lambda b, al, ah, bl, bh: (al | bl, ah | bh),) * 2,
    BinOp.BITXOR: (lambda b, al, ah, bl, bh: (al ^ bl, ah ^ bh),) * 2,
    BinOp.MIN: (lambda b, *a: K.min_max(b, *a, False, True), lambda b, *a: K.min_max(b, *a, True, True)),
    BinOp.MAX: (lambda b, *a: K.min_max(b, *a, False, False), lambda b, *a: K.min_max(b, *a, True, False)),
    BinOp.ABS_DIFF: (lambda b, *a: K.abs_diff(b, *a, False), lambda b, *a: K.abs_diff(b, *a, True)),
    BinOp.SATURATING_ADD: (lambda b, *a: K.sat_add(b, *a, False), lambda b, *a: K.sat_add(b, *a, True)),
    BinOp.SATURATING_SUB: (lambda b, *a: K.sat_sub(b, *a, False), lambda b, *a: K.sat_sub(b, *a, True)),
    BinOp.SATURATING_MUL: (lambda b, *a: K.sat_mul(b, *a, False), lambda b, *a: K.sat_mul(b, *a, True)),
    BinOp.MUL_HIGH: (K.mul_high_u, K.mul_high_s),
}
_SHIFT = {  # op -> (unsigned, signed) of (b, al, ah, amount) -> pair
    BinOp.SHL: (K.shl, K.shl),
    BinOp.SHR: (lambda b, al, ah, s: K.shr(b, al, ah, s, False), lambda b, al, ah, s: K.shr(b, al, ah, s, True)),
    BinOp.ROTATE_LEFT: (K.rotl, K.rotl), BinOp.ROTATE_RIGHT: (K.rotr, K.rotr),
}
_CMP = {BinOp.EQ, BinOp.NE, BinOp.LT, BinOp.GT, BinOp.LE, BinOp.GE}
_UN = {  # op -> (unsigned, signed) of (b, al, ah) -> pair
    UnOp.NEGATE: (K.negate, K.negate),
    UnOp.BITNOT: (lambda b, al, ah: (~al, ~ah),) * 2,
    UnOp.POPCOUNT: (lambda b, al, ah: (E.Un(UnOp.POPCOUNT, al) + E.Un(UnOp.POPCOUNT, ah), u(0)),) * 2,
    UnOp.CLZ: (K.clz, K.clz), UnOp.CTZ: (K.ctz, K.ctz),
    UnOp.REVERSE_BITS: (lambda b, al, ah: (E.Un(UnOp.REVERSE_BITS, ah), E.Un(UnOp.REVERSE_BITS, al)),) * 2,
    UnOp.BYTE_SWAP: (lambda b, al, ah: (E.Un(UnOp.BYTE_SWAP, ah), E.Un(UnOp.BYTE_SWAP, al)),) * 2,
    UnOp.ABS: (lambda b, al, ah: (al, ah), K.abs_s),
    UnOp.SIGN: (lambda b, al, ah: K.sign(b, al, ah, False), lambda b, al, ah: K.sign(b, al, ah, True)),
}


class _Lowering:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.wide_bufs = {b.name for b in program.buffers if b.dtype in WIDE}
        self.helpers: dict[str, Function] = {}
        self.slots = 0
        self.fn_slot: dict[str, int] = {}
        self.tmp = 0

    # ---- helpers -------------------------------------------------------------------------
    def slot(self) -> int:
        self.slots += 1
        return self.slots - 1

    def helper(self, name: str, nargs: int, build: Callable, pair: bool) -> str:
        if name not in self.helpers:
            params = ((("k", U),) if pair else ()) + tuple((f"arg{i}", U) for i in range(nargs))
            b = Body(params)
            args = [E.Var(n) for n, _ in params[1 if pair else 0:]]
            out = build(b, *args)
            if pair:
                lo = b.let(out[0], "lo")
                b.add(N.Store(SCRATCH, E.Var("k"), out[1]))
                out = lo
            self.helpers[name] = b.function(name, out)
        return name

    def call_pair(self, name: str, nargs: int, build: Callable, args: list[E.Expr]) -> Pair:
        self.helper(name, nargs, build, True)
        k = self.slot()
        return E.Call(name, (u(k), *args)), E.Load(SCRATCH, u(k))

    def call(self, name: str, nargs: int, build: Callable, args: list[E.Expr]) -> E.Expr:
        self.helper(name, nargs, build, False)
        return E.Call(name, tuple(args))

    def fresh(self) -> str:
        self.tmp += 1
        return f"vyl_t{self.tmp}"

    # ---- expressions ---------------------------------------------------------------------
    def type(self, e: E.Expr, scope: dict[str, DataType]) -> DataType:
        return infer(e, scope, self.p)

    def pair(self, e: E.Expr, scope: dict[str, DataType]) -> Pair:
        """The (lo, hi) words of a 64-bit expression."""
        t = self.type(e, scope)
        rule = _PAIR.get(type(e))
        if rule is None:
            raise Int64Refusal(f"{type(e).__name__} of type {t.value}")
        return getattr(self, rule)(e, scope, t)

    def _p_lit(self, e: E.Lit | E.Spec, scope, t) -> Pair:
        """A literal, or a specialization constant left unspecialized: its default (as
        the printers do; drivers specialize first)."""
        return u(e.bits & 0xFFFFFFFF), u(e.bits >> 32)

    def _p_var(self, e: E.Var, scope, t) -> Pair:
        return E.Var(e.name), E.Var(e.name + HI)

    def _p_load(self, e: E.Load, scope, t) -> Pair:
        buf = e.buffer

        def load(b: Body, i: E.Expr) -> Pair:
            ok = b.let(i.lt(E.BufLen(buf) >> 1), "ok")
            w = b.let(i << 1, "w")
            return E.Select(ok, E.Load(buf, w), u(0)), E.Select(ok, E.Load(buf, w + 1), u(0))

        return self.call_pair(f"vyl64_load_{buf}", 1, load, [self.expr(e.index, scope)])

    def _p_bin(self, e: E.Bin, scope, t) -> Pair:
        sg = t is DataType.I64
        tag = "s" if sg else "u"
        if e.op in _SHIFT:
            al, ah = self.pair(e.left, scope)
            amt = self.word(e.right, scope)
            return self.call_pair(f"vyl64_{e.op.value}_{tag}", 3, _SHIFT[e.op][sg], [al, ah, amt])
        build = _BIN2.get(e.op)
        if build is None:
            raise Int64Refusal(f"{e.op.value} on {t.value}")
        return self.call_pair(f"vyl64_{e.op.value}_{tag}", 4, build[sg],
                              [*self.pair(e.left, scope), *self.pair(e.right, scope)])

    def _p_un(self, e: E.Un, scope, t) -> Pair:
        sg = t is DataType.I64
        build = _UN.get(e.op)
        if build is None:
            raise Int64Refusal(f"{e.op.value} on {t.value}")
        return self.call_pair(f"vyl64_{e.op.value}_{'s' if sg else 'u'}", 2, build[sg],
                              [*self.pair(e.operand, scope)])

    def _p_select(self, e: E.Select, scope, t) -> Pair:
        c = self.expr(e.cond, scope)
        args = [*self.pair(e.if_true, scope), *self.pair(e.if_false, scope)]
        name = "vyl64_select"
        if name not in self.helpers:
            b = Body((("k", U), ("c", DataType.BOOL), *((f"arg{i}", U) for i in range(4))))
            lo = b.let(E.Select(E.Var("c"), E.Var("arg0"), E.Var("arg2")), "lo")
            b.add(N.Store(SCRATCH, E.Var("k"), E.Select(E.Var("c"), E.Var("arg1"), E.Var("arg3"))))
            self.helpers[name] = b.function(name, lo)
        k = self.slot()
        return E.Call(name, (u(k), c, *args)), E.Load(SCRATCH, u(k))

    def _p_cast(self, e: E.Cast | E.Bitcast, scope, t) -> Pair:
        src = self.type(e.value, scope)
        if src in WIDE:
            return self.pair(e.value, scope)
        v = self.expr(e.value, scope)
        if e.dtype is not t or isinstance(e, E.Bitcast):
            raise Int64Refusal(f"bitcast from {src.value} to {t.value}")
        tag = "s" if t is DataType.I64 else "u"
        if src is DataType.U32:
            return v, u(0)
        if src is DataType.BOOL:
            return E.Cast(U, v), u(0)
        if src is DataType.I32:
            return self.call_pair("vyl64_from_i32", 1, K.from_i32, [E.Bitcast(U, v)])
        if src is DataType.F32:
            sg = t is DataType.I64
            return self.call_pair(f"vyl64_from_f32_{tag}", 1, lambda b, x: K.from_f32(b, x, sg), [E.Bitcast(U, v)])
        raise Int64Refusal(f"casts from {src.value} to {t.value}")

    def _p_call(self, e: E.Call, scope, t) -> Pair:
        return E.Call(e.function, tuple(self.args(e, scope))), E.Load(SCRATCH, u(self.fn_slot[e.function]))

    def _p_atomic(self, e: E.Atomic, scope, t) -> Pair:
        raise Int64Refusal("64-bit atomics (this adapter has no 64-bit atomics)")

    def word(self, e: E.Expr, scope) -> E.Expr:
        """A shift amount: the low word of a 64-bit one."""
        if self.type(e, scope) in WIDE:
            return self.pair(e, scope)[0]
        x = self.expr(e, scope)
        return x if self.type(e, scope) is DataType.U32 else E.Bitcast(U, x)

    def args(self, e: E.Call, scope) -> list[E.Expr]:
        out: list[E.Expr] = []
        for a in e.args:
            if self.type(a, scope) in WIDE:
                out.extend(self.pair(a, scope))
            else:
                out.append(self.expr(a, scope))
        return out

    def expr(self, e: E.Expr, scope: dict[str, DataType]) -> E.Expr:
        """A non-64-bit expression, its 64-bit parts lowered."""
        rule = _EXPR.get(type(e))
        if rule is None and kind_of(e).subgroup:   # what its row says it does
            rule = "_e_subgroup"
        if rule is not None:
            done = getattr(self, rule)(e, scope)
            if done is not None:
                return done
        kids = E.children(e)
        if not kids:
            return e
        return with_children(e, [self.expr(k, scope) for k in kids])

    def _e_bin(self, e: E.Bin, scope) -> E.Expr | None:
        lt = self.type(e.left, scope)
        if lt in WIDE and e.op in _CMP:
            sg = lt is DataType.I64
            args = [*self.pair(e.left, scope), *self.pair(e.right, scope)]
            if e.op in (BinOp.EQ, BinOp.NE):
                r = self.call("vyl64_eq", 4, K.eq, args)
                return r if e.op is BinOp.EQ else E.Un(UnOp.LOGICAL_NOT, r)
            if e.op in (BinOp.GT, BinOp.LE):        # b < a
                args = args[2:] + args[:2]
            r = self.call(f"vyl64_lt_{'s' if sg else 'u'}", 4, K.lt_s if sg else K.lt_u, args)
            return r if e.op in (BinOp.LT, BinOp.GT) else E.Un(UnOp.LOGICAL_NOT, r)
        if lt not in WIDE and e.op in _SHIFT and self.type(e.right, scope) in WIDE:
            return E.Bin(e.op, self.expr(e.left, scope), self.pair(e.right, scope)[0])
        return None

    def _e_cast(self, e: E.Cast | E.Bitcast, scope) -> E.Expr | None:
        src = self.type(e.value, scope)
        if src not in WIDE:
            return None
        al, ah = self.pair(e.value, scope)
        if e.dtype is DataType.U32:
            return al
        if e.dtype is DataType.I32:
            return E.Bitcast(DataType.I32, al)
        if e.dtype is DataType.BOOL:
            return self.call("vyl64_nonzero", 2, lambda b, lo, hi: (lo | hi).ne(u(0)), [al, ah])
        if e.dtype is DataType.F32:
            sg = src is DataType.I64
            bits = self.call(f"vyl64_to_f32_{'s' if sg else 'u'}", 2, lambda b, lo, hi: K.to_f32(b, lo, hi, sg),
                             [al, ah])
            return E.Bitcast(DataType.F32, bits)
        raise Int64Refusal(f"casts from {src.value} to {e.dtype.value}")

    def _e_buflen(self, e: E.BufLen, scope) -> E.Expr | None:
        return E.BufLen(e.buffer) >> 1 if e.buffer in self.wide_bufs else None

    def _e_call(self, e: E.Call, scope) -> E.Expr | None:
        return E.Call(e.function, tuple(self.args(e, scope)))

    def _e_subgroup(self, e: E.Expr, scope) -> E.Expr | None:
        if any(self.type(k, scope) in WIDE for k in E.children(e)):
            raise Int64Refusal("subgroup operations on 64-bit values")
        return None

    def _e_atomic(self, e: E.Atomic, scope) -> E.Expr | None:
        if e.buffer in self.wide_bufs:
            raise Int64Refusal("64-bit atomics (this adapter has no 64-bit atomics)")
        return None

    # ---- statements (the walk, `walk`, asks `stmt` first) ------------------------------------
    def stmt(self, n: N.Node, scope: dict[str, DataType]) -> list[N.Node] | None:
        rule = _STMT.get(type(n))
        return None if rule is None else getattr(self, rule)(n, scope)

    def _s_local(self, n: N.Let | N.Assign, scope) -> list[N.Node] | None:
        if self.type(n.value, scope) not in WIDE:
            return None
        lo, hi = self.pair(n.value, scope)
        return [type(n)(n.name, lo), type(n)(n.name + HI, hi)]

    def _s_store(self, n: N.Store, scope) -> list[N.Node] | None:
        if n.buffer not in self.wide_bufs:
            return None
        i = self.fresh()
        out: list[N.Node] = [N.Let(i, self.expr(n.index, scope))]
        lo, hi = self.pair(n.value, scope)
        vl, vh = self.fresh(), self.fresh()
        out += [N.Let(vl, lo), N.Let(vh, hi)]
        w = E.Var(i) << 1
        out.append(N.If(E.Var(i).lt(E.BufLen(n.buffer) >> 1),
                        (N.Store(n.buffer, w, E.Var(vl)), N.Store(n.buffer, w + 1, E.Var(vh)))))
        return out

    def _s_loop(self, n: N.Loop, scope) -> list[N.Node] | None:
        """A 64-bit loop runs a u32 counter over its trip count (S21: bounds evaluated once;
        ``to - from`` trips when ``from < to`` in the loop's type), binding the 64-bit
        variable ``from + counter`` first in each trip. A count over 2^32 - 1 stops there
        (no device runs that many trips of one loop)."""
        t = self.type(n.from_, scope)
        if t not in WIDE:
            return None
        lo, hi, count, k = (self.fresh() for _ in range(4))
        first, last = E.Var(lo), E.Var(hi)
        distance = E.Bitcast(DataType.U64, last) - E.Bitcast(DataType.U64, first)
        trips = E.Select(first.lt(last), distance.min(E.Expr.lit(DataType.U64, 0xFFFFFFFF)),
                         E.Expr.lit(DataType.U64, 0))
        loop = N.Loop(k, u(0), E.Var(count), (N.Let(n.var, first + E.Cast(t, E.Var(k))), *n.body))
        return list(walk_body((N.Let(lo, n.from_), N.Let(hi, n.to), N.Let(count, E.Cast(U, trips)), loop),
                              scope, self))

    def _s_eval(self, n: N.Eval, scope) -> list[N.Node] | None:
        if self.type(n.value, scope) not in WIDE:
            return None
        return [N.Eval(self.pair(n.value, scope)[0])]

    def function(self, f: Function) -> Function:
        params: list[tuple[str, DataType]] = []
        for name, t in f.params:
            params += [(name, U), (name + HI, U)] if t in WIDE else [(name, t)]
        if f.result is None:
            return walk_function(f, self, params)
        inner = body_scope(f.body, dict(f.params), self.p)
        if infer(f.result, inner, self.p) not in WIDE:
            return walk_function(f, self, params)
        lo, hi = self.pair(f.result, inner)
        r = self.fresh()
        done = walk_function(f, self, params, result=E.Var(r))
        tail = (N.Let(r, lo), N.Store(SCRATCH, u(self.fn_slot[f.name]), hi))
        return Function(done.name, done.params, done.body + tail, done.result)


# how each kind is lowered (names of `_Lowering` methods)
_PAIR = {E.Lit: "_p_lit", E.Spec: "_p_lit", E.Var: "_p_var", E.Load: "_p_load", E.Bin: "_p_bin", E.Un: "_p_un",
         E.Select: "_p_select", E.Cast: "_p_cast", E.Bitcast: "_p_cast", E.Call: "_p_call",
         E.Atomic: "_p_atomic"}
# (a kind not here: an operation of the subgroup, `Kind.subgroup`, is `_e_subgroup`; every
# other is rebuilt with its operands lowered)
_EXPR = {E.Bin: "_e_bin", E.Cast: "_e_cast", E.Bitcast: "_e_cast", E.BufLen: "_e_buflen", E.Call: "_e_call",
         E.Atomic: "_e_atomic"}
_STMT = {N.Let: "_s_local", N.Assign: "_s_local", N.Store: "_s_store", N.Loop: "_s_loop", N.Eval: "_s_eval"}


def lower_int64(program: Program) -> Program:
    """``program`` with every 64-bit integer as a pair of u32 words (see the module doc)."""
    if not uses_int64(program):
        return program
    lw = _Lowering(program)
    for f in program.functions:
        if f.result is not None:
            try:
                t = infer(f.result, body_scope(f.body, dict(f.params), program), program)
            except TypeFault:
                continue
            if t in WIDE:
                lw.fn_slot[f.name] = lw.slot()
    functions = [lw.function(f) for f in program.functions]
    body = walk_body(program.body, {}, lw)
    buffers = [BufferDecl(b.name, b.binding, b.access, U, 2 * b.count) if b.dtype in WIDE else b
               for b in program.buffers]
    if lw.slots:
        if lw.slots > MAX_SLOTS:
            raise Int64Refusal(f"{lw.slots} 64-bit operations in one program (at most {MAX_SLOTS} on this target)")
        if program.buffer(SCRATCH) is not None:
            raise Int64Refusal(f"a buffer named {SCRATCH!r}")
        buffers.append(BufferDecl.local(SCRATCH, lw.slots, U))
    return Program(tuple(buffers), program.workgroup_size, body, tuple(lw.helpers.values()) + tuple(functions))
