"""The one printer walk of `vyre.lower`: a kernel plan to target source, for every target.

The walk flattens every expression into typed temporaries in evaluation order (C leaves
operand order unspecified; vyre does not) and applies the semantics of docs/semantics.md
explicitly: bounds-checked loads and stores (S6), f32 canonicalisation where it is observable
(`vyre.lower.floats`), the "alive" scheme for barrier programs that return, while-loop caps
and cancel polls. How anything is spelled is the target's syntax record
(`vyre.lower.syntax.Syntax`). Per-kind dispatch is tables keyed by IR kind (`EXPRS`,
`NODES`, and `INVARIANT` for hoisting loads out of loops); a kind in none raises (tests check
each against every kind of `vyre.ir`).

Names in generated code: ``b_`` bound buffers, ``w_`` workgroup, ``l_`` per-invocation
arrays, ``v_`` locals, ``t<n>`` temporaries, ``vy_`` everything vyre adds.
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.errors import VyreError
from vyre.ir.kinds import UnknownKind
from vyre.ir.program import Program
from vyre.ir.typecheck import bin_result, infer, un_result
from vyre.ir.types import (
    SUBGROUP_REDUCTIONS,
    TRANSCENDENTAL,
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
    no_subnormal,
    numeric_only_buffers,
    var_flags,
)
from .loops import POLL_TRIPS, breaks
from .plan import KernelPlan
from .ranges import Ranges
from .syntax import BOOL_SYM, CMP, ERR_DEVICE_LOOPS, ERR_LOOP_LIMIT, PREDICATES, Syntax

F32, U32, BOOL = DataType.F32, DataType.U32, DataType.BOOL
_GX = E.Expr.gid_x()
Value = tuple[str, DataType, Flags]   # (target operand, type, f32 flags)


class Printer:
    """One plan printed through one syntax record (`emit`)."""

    def __init__(self, plan: KernelPlan, syntax: Syntax) -> None:
        self.plan, self.s = plan, syntax
        self.program: Program = plan.program
        self.lines: list[str] = []
        self.tmp = 0
        self.indent = 1
        self.scope: list[dict[str, DataType]] = [{}]
        self.alive = False   # inside the "alive" scheme (a barrier program that may return)
        self.cancel = False  # loops poll the cancel word (kernels without barriers)
        self.hw = syntax.hw_ftz
        self.flushed = numeric_only_buffers(self.program)   # f32 workgroup memory flushed at store
        self.flushed_ops = syntax.flushed_results
        self.vars = var_flags(self.program, self.hw, self.flushed, self.flushed_ops)   # what each f32 local may hold
        self.ranges = Ranges(self.program)
        self.atomic_buffers = self.program.facts.atomic_buffers
        # the elementwise vector form: each lane's body sees its own gid.x and the words of
        # the vector-loaded and vector-stored buffers (`Syntax.vector_body`)
        self.gid_x: str | None = None
        self.lane_loads: dict[str, str] = {}
        self.lane_stores: dict[str, str] = {}
        self.loops: list[str] = []   # with `Syntax.checked_loops`: the done flag of each open loop
        self.checked = 0
        # loads printed once before the loops they are invariant in (`hoist`)
        self.hoisted: dict[E.Load, Value] = {}
        # (loop variable, buffer) -> a flag printed before the loop: true when the buffer is at
        # least as long as the one bounding the loop (`unswitch`)
        self.within: dict[tuple[str, str], str] = {}
        self.written = self.atomic_buffers | self.program.facts.stored

    # ---- output -------------------------------------------------------------------------------
    def out(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def open(self, head: str) -> None:
        self.out(head + " {")
        self.indent += 1

    def close(self) -> None:
        self.indent -= 1
        self.out("}")

    def fresh(self, t: DataType, value: str) -> str:
        return self.fresh_as(self.s.types[t], value)

    def fresh_as(self, type_: str, value: str) -> str:
        self.tmp += 1
        name = f"t{self.tmp}"
        self.out(self.s.temp(name, type_, value))
        return name

    def name(self, prefix: str) -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    # ---- names ----------------------------------------------------------------------------------
    def lookup(self, name: str) -> DataType:
        for frame in reversed(self.scope):
            if name in frame:
                return frame[name]
        raise KeyError(name)

    def visible(self) -> dict[str, DataType]:
        return {k: v for f in self.scope for k, v in f.items()}

    def ptr(self, buffer: str) -> str:
        decl = self.program.buffer(buffer)
        if decl.is_workgroup:
            return f"w_{buffer}"
        return f"l_{buffer}" if decl.is_local else f"b_{buffer}"

    def count(self, buffer: str) -> str:
        decl = self.program.buffer(buffer)
        return self.s.count(self, buffer) if decl.is_bound else f"{decl.count}u"

    def lin(self) -> str:
        """The linear local invocation index."""
        wx, wy, _ = self.program.workgroup_size
        b = self.s.builtin
        return f"({b(Builtin.LID, 0)} + {wx}u * ({b(Builtin.LID, 1)} + {wy}u * {b(Builtin.LID, 2)}))"

    # ---- f32 canonicalisation where it is observable (vyre.lower.floats) ---------------------
    def operand(self, v: str, f: Flags, hardware: bool = False) -> str:
        """``v`` as the operand of a numeric operation: subnormals flushed, unless the
        target's hardware form of the operation flushes them itself."""
        if f.sub and not (hardware and self.hw):
            return self.fresh(F32, f"{self.s.daz}({v})")
        return v

    def observed(self, v: str, f: Flags) -> str:
        """``v`` where its bits become visible (a store, a bitcast, a local that may also hold
        raw bits): raw bits as they are, results of arithmetic canonical."""
        if f.raw or not (f.sub or f.nan):
            return v
        fn = "vy_canon" if f.sub and f.nan else ("vy_cnan" if f.nan else self.s.daz)
        return self.fresh(F32, f"{fn}({v})")

    def flags(self, e: E.Expr, *operands: Flags) -> Flags:
        """The result flags of a float operation (one rule set: vyre.lower.floats)."""
        merged = CANON
        for f in operands:
            merged = merged | f
        f = flags_of(_Opaque.of(e), {_Opaque.NAME: merged}, self.hw, {_Opaque.NAME: F32}, self.program,
                     flushed_ops=self.flushed_ops)
        # what only the operands' own form shows (a square root divisor)
        return Flags(f.raw, False, f.nan) if f.sub and no_subnormal(e) else f

    # ---- expressions ------------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> Value:
        fn = EXPRS.get(type(e))
        if fn is None:
            raise TypeError(f"the printer has no case for {type(e).__name__}")
        return fn(self, e)

    def spec(self, e: E.Spec) -> Value:   # drivers specialize first; a leftover takes its default
        return self.expr(E.Lit(e.dtype, e.bits))

    def lit(self, e: E.Lit) -> Value:
        return self.s.lit(e.dtype, e.bits), e.dtype, CANON

    def var(self, e: E.Var) -> Value:
        t = self.lookup(e.name)
        return f"v_{e.name}", t, self.vars.get(e.name, CANON) if t is F32 else CANON

    def buflen(self, e: E.BufLen) -> Value:
        return self.count(e.buffer), U32, CANON

    def id(self, e: E.Id) -> Value:
        if self.gid_x is not None and e.kind is Builtin.GID and e.axis == 0:
            return self.gid_x, U32, CANON
        return self.s.builtin(e.kind, e.axis), U32, CANON

    def load(self, e: E.Load) -> Value:
        if self.hoisted and e in self.hoisted:
            return self.hoisted[e]
        t = self.program.buffer(e.buffer).dtype
        if e.buffer in self.lane_loads and e.index == _GX:
            return self.s.from_word(self, self.lane_loads[e.buffer], t), t, RAW if t is F32 else CANON
        loaded = (FLUSHED if e.buffer in self.flushed else RAW) if t is F32 else CANON
        i, _, _ = self.expr(e.index)
        ok: bool | str = self.ranges.in_bounds(e.buffer, e.index)
        if not ok and self.within and isinstance(e.index, E.Var):
            ok = self.within.get((e.index.name, e.buffer), False)
        word = self.s.load(self, e.buffer, i, ok)
        return self.s.from_word(self, word, t), t.value_type, loaded

    def select(self, e: E.Select) -> Value:
        c, _, _ = self.expr(e.cond)
        a, t, fa = self.expr(e.if_true)
        b, _, fb = self.expr(e.if_false)
        if t is F32 and fa.raw != fb.raw:  # raw bits win: the other arm canonical
            a, b = (a, self.observed(b, fb)) if fa.raw else (self.observed(a, fa), b)
            return self.fresh(t, self.s.select(c, a, b)), t, RAW
        return self.fresh(t, self.s.select(c, a, b)), t, fa | fb

    def bitcast(self, e: E.Bitcast) -> Value:
        v, t, f = self.expr(e.value)
        d = e.dtype
        if d is t or (t.is_half and d.is_half):
            return v, d, f
        if t is F32:
            v = self.observed(v, f)
        return self.fresh(d, self.s.bitcast(v, t, d)), d, RAW if d is F32 else CANON

    def cast(self, e: E.Cast) -> Value:
        v, t, f = self.expr(e.value)
        if e.dtype is t:
            return v, t, f
        return self.s.cast(self, v, t, f, e.dtype)

    def binary(self, e: E.Bin) -> Value:
        if self.s.f32_mul_add and e.op is BinOp.ADD:
            fused = self.mul_add(e)
            if fused is not None:
                return fused
        a, ta, fa = self.expr(e.left)
        b, tb, fb = self.expr(e.right)
        rt = bin_result(e.op, ta, tb)
        op = e.op
        if ta is BOOL:
            return self.fresh(rt, f"{a} {BOOL_SYM[op]} {b}"), rt, CANON
        if ta.is_half:   # widen exactly, the f32 operation, round once
            (a, _, fa), (b, _, fb) = self.s.widen(self, a, ta), self.s.widen(self, b, ta)
            r, _, _ = self.float_bin(e, a, fa, b, fb)
            return (r, rt, CANON) if op in CMP else (self.s.narrow(self, r, ta), rt, CANON)
        if ta is F32:
            return self.float_bin(e, a, fa, b, fb)
        if op in CMP:
            return self.fresh(rt, f"{a} {CMP[op]} {b}"), rt, CANON
        return self.fresh(rt, self.s.int_bin(op, ta, rt, a, b)), rt, CANON

    def mul_add(self, e: E.Bin) -> Value | None:
        """``x + a*b`` (or ``a*b + x``) on f32 through the target's `Syntax.f32_mul_add`, which
        gives exactly the two rounded operations' result (one check where the target checks
        each), operands evaluated in the order the two operations evaluate them. None when
        ``e`` is not that (other types, a product already computed)."""
        mul = next((m for m in (e.right, e.left) if isinstance(m, E.Bin) and m.op is BinOp.MUL), None)
        if mul is None or mul in self.hoisted \
                or infer(mul, self.visible(), self.program) is not F32:
            return None
        x_e = e.left if mul is e.right else e.right
        if mul is e.right:
            x, _, fx = self.expr(x_e)
        a, _, fa = self.expr(mul.left)
        b, _, fb = self.expr(mul.right)
        if mul is e.left:
            x, _, fx = self.expr(x_e)
        hw_mul = hardware_bin(mul)
        a, b = self.operand(a, fa, hw_mul), self.operand(b, fb, hw_mul)
        x = self.operand(x, fx, hardware_bin(e))
        fp = self.flags(mul, fa, fb)
        return self.fresh(F32, self.s.f32_mul_add.format(x=x, a=a, b=b)), F32, self.flags(e, fx, fp)

    def float_bin(self, e: E.Bin, a: str, fa: Flags, b: str, fb: Flags) -> Value:
        """An f32 binary operation on lowered operands (`vyre.lower.floats` decides flushes)."""
        hardware = hardware_bin(e)
        a, b = self.operand(a, fa, hardware), self.operand(b, fb, hardware)
        if e.op in CMP:
            return self.fresh(BOOL, self.s.f32_cmp(e.op, a, b)), BOOL, CANON
        return self.fresh(F32, self.s.f32_bin(e.op, a, b)), F32, self.flags(e, fa, fb)

    def unary(self, e: E.Un) -> Value:
        a, t, fa = self.expr(e.operand)
        rt = un_result(e.op, t)
        if t is BOOL:
            return self.fresh(rt, f"!{a}"), rt, CANON
        if t.is_half:
            w, _, fw = self.s.widen(self, a, t)
            r, _, _ = self.float_un(e, w, fw, F32 if rt is t else rt)
            return (self.s.narrow(self, r, t) if rt is t else r), rt, CANON
        if t is F32:
            return self.float_un(e, a, fa, rt)
        return self.fresh(rt, self.s.int_un(e.op, t, a)), rt, CANON

    def float_un(self, e: E.Un, a: str, fa: Flags, rt: DataType) -> Value:
        """An f32 unary operation on a lowered operand."""
        if e.op in PREDICATES:
            return self.fresh(rt, PREDICATES[e.op].format(a=a)), rt, CANON
        if e.op not in (UnOp.TRUNC, UnOp.ROUND):  # those give the flushed answer anyway
            a = self.operand(a, fa, hardware_un(e))
        return self.fresh(F32, self.s.f32_un(e.op, a)), F32, self.flags(e, fa)

    def fma(self, e: E.Fma) -> Value:
        parts = [self.expr(x) for x in (e.a, e.b, e.c)]
        t = parts[0][1]
        if t.is_half:
            parts = [self.s.widen(self, v, t) for v, _, _ in parts]
        a, b, c = (self.operand(v, f, False) for v, _, f in parts)
        r = self.fresh(F32, self.s.fma(a, b, c))
        if t.is_half:
            return self.s.narrow(self, r, t), t, CANON
        return r, F32, self.flags(e)

    def atomic(self, e: E.Atomic) -> Value:
        i, _, _ = self.expr(e.index)
        v, t, _ = self.expr(e.value)
        x = self.expr(e.expected)[0] if e.expected is not None else None
        return self.s.atomic(self, e, i, v, t, x), t, CANON

    def subgroup(self, e: E.Subgroup) -> Value:
        if not self.s.subgroups:
            raise VyreError(f"the {self.s.name} printer has no subgroup operations.",
                            "run subgroup programs on a backend that supports them.")
        v = t = None
        vf = CANON
        if e.value is not None:
            v, t, vf = self.expr(e.value)
        lane = self.expr(e.lane)[0] if e.lane is not None else None
        rt = t if e.op in SUBGROUP_REDUCTIONS or e.op is SubgroupOp.SHUFFLE else U32
        flags = vf if e.op is SubgroupOp.SHUFFLE and rt is F32 else CANON
        return self.fresh(rt, self.s.subgroup(e.op, self.s.types[rt], v, lane, self.lin())), rt, flags

    def not_printed(self, e: E.Expr) -> Value:
        raise TypeError(f"{type(e).__name__} reaches no printer: {NOT_PRINTED[type(e)]}")

    # ---- statements ----------------------------------------------------------------------------
    def block(self, body: tuple[N.Node, ...], guarded: bool = False) -> None:
        self.scope.append({})
        saved = dict(self.ranges.env)
        returned = False
        for n in body:
            self.stmt(n, guarded or returned)
            if self.alive and _contains(n, N.Return):
                returned = True
        self.ranges.env = saved
        self.scope.pop()

    def stmt(self, n: N.Node, guarded: bool) -> None:
        if guarded and isinstance(n, N.Let):
            # declare outside the guard so later statements see it; assign inside
            t = infer(n.value, self.visible(), self.program)
            self.scope[-1][n.name] = t
            self.out(self.s.var(f"v_{n.name}", self.s.types[t], None))
            self.open("if (vy_alive)")
            self.stmt(N.Assign(n.name, n.value), False)
            self.close()
            return
        if guarded and not _contains(n, N.Barrier):
            self.open("if (vy_alive)")
            self.stmt(n, False)
            self.close()
            return
        fn = NODES.get(type(n))
        if fn is None:
            raise TypeError(f"the printer has no case for {type(n).__name__}")
        fn(self, n, guarded)

    def bind_value(self, name: str, v: str, t: DataType, f: Flags) -> str:
        """The value a local receives: arithmetic results are canonicalised only when the
        local may also hold raw bits (its value is then observable as is)."""
        if t is F32 and self.vars.get(name, CANON).raw:
            return self.observed(v, f)
        return v

    def let(self, n: N.Let, guarded: bool) -> None:
        v, t, f = self.expr(n.value)
        self.scope[-1][n.name] = t
        if t is U32:
            self.ranges.bind(n.name, self.ranges.of(n.value))
        self.out(self.s.var(f"v_{n.name}", self.s.types[t], self.bind_value(n.name, v, t, f)))

    def assign(self, n: N.Assign, guarded: bool) -> None:
        v, t, f = self.expr(n.value)
        self.out(f"v_{n.name} = {self.bind_value(n.name, v, t, f)};")

    def store(self, n: N.Store, guarded: bool) -> None:
        if n.buffer in self.lane_stores and n.index == _GX:
            v, t, f = self.expr(n.value)
            word = self.s.to_word(self.observed(v, f) if t is F32 else v, t)
            self.out(f"{self.lane_stores[n.buffer]} = {word};")
            return
        i, _, _ = self.expr(n.index)
        v, t, f = self.expr(n.value)
        if t is F32:  # bits kept, or flushed into memory whose bits nobody sees
            v = self.operand(v, f, False) if n.buffer in self.flushed else self.observed(v, f)
        st = self.s.store(self, n.buffer, i, self.s.to_word(v, t, self.program.buffer(n.buffer).dtype))
        if self.ranges.in_bounds(n.buffer, n.index):
            self.out(st)
        else:
            self.out(self.s.inline(f"if ({i} < {self.count(n.buffer)})", st))

    def if_(self, n: N.If, guarded: bool) -> None:
        c, _, _ = self.expr(n.cond)
        self.open(f"if ({c})")
        self.block(n.then, guarded)
        self.close()
        if n.otherwise:
            self.open("else")
            self.block(n.otherwise, guarded)
            self.close()

    def poll(self, n: N.Loop | N.While) -> None:
        # every 1024 trips: stop if the engine cancelled the dispatch (loops of bounded work
        # need not: vyre.lower.loops)
        if self.cancel and self.plan.loops.polls(n):
            for line in self.s.cancel_poll:
                self.out(line)

    def loop_body(self, n: N.Loop | N.While, guarded: bool) -> None:
        # a return inside the body must also skip the body's earlier statements on later
        # trips: guard the whole body
        self.block(n.body, guarded or (self.alive and _contains(n, N.Return)))

    # ---- loop-invariant loads ---------------------------------------------------------------
    def hoist(self, n: N.Loop | N.While) -> dict[E.Load, Value]:
        """Print, before loop ``n``, every load in it that gives the same value on every trip,
        with its bounds check, and use that value inside (returns the map to restore after
        the loop). A load qualifies when no statement of the program writes its buffer (no
        store, no atomic: nothing else in the dispatch can change it) and its index changes
        with no trip: only locals declared outside the loop and never assigned in it, ids,
        literals, lengths and such loads, and no operation with an effect (atomics, subgroup
        operations, signed division, which may set the error flag). A load has no effect of
        its own (S6: out of range it gives zero), so reading it once, even when the loop makes
        no trip or never reaches it, gives the same bytes."""
        saved = self.hoisted
        changing = {n.var} if isinstance(n, N.Loop) else set()
        for s in N.walk_nodes(n.body):
            if isinstance(s, N.Let | N.Assign):
                changing.add(s.name)
            elif isinstance(s, N.Loop):
                changing.add(s.var)
        invariant = _Invariance(self, changing)
        found: dict[E.Load, None] = {}

        def collect(e: E.Expr) -> None:   # children first: an index's loads before the load
            for k in E.children(e):
                collect(k)
            if isinstance(e, E.Load) and e not in found and e not in self.hoisted and invariant(e):
                found[e] = None

        roots = [x for s in N.walk_nodes(n.body) for x in N.node_exprs(s)]
        for root in ([n.cond] if isinstance(n, N.While) else []) + roots:
            collect(root)
        if found:
            self.hoisted = dict(saved)
            for e in found:
                self.hoisted[e] = self.expr(e)
        return saved

    def loop(self, n: N.Loop, guarded: bool) -> None:
        saved = self.hoist(n)
        within = self.within
        self.within = self.unswitch(n)
        lo, t, _ = self.expr(n.from_)
        hi, _, _ = self.expr(n.to)
        self.scope.append({n.var: t})
        name = f"v_{n.var}"
        head = self.s.var(name, self.s.types[t], lo)[:-1]
        done = self.checked_open()
        if done is None and self.chunked(n, t):
            # the cancel poll once per chunk of up to POLL_TRIPS trips, outside an inner loop
            # with one exit (which the compiler can unroll), not on every trip
            u = "" if t is U32 else f"({self.s.types[U32]})"   # i32: the distance in u32
            self.open(f"for ({head}; {name} < {hi};)")
            left = self.fresh(U32, f"{u}{hi} - {u}{name}")
            trips = self.fresh(U32, f"{left} < {POLL_TRIPS}u ? {left} : {POLL_TRIPS}u")
            for line in self.s.chunk_poll:
                self.out(line.format(n=trips))
            end = self.fresh(t, f"{name} + {trips}" if t is U32 else f"({self.s.types[t]})({u}{name} + {trips})")
            self.open(f"for (; {name} < {end}; {name}++)")
            self.loop_trip(n, guarded, t)
            self.close()
        elif done is None:
            self.open(f"for ({head}; {name} < {hi}; {name}++)")
            self.poll(n)
            self.loop_trip(n, guarded, t)
        else:   # the condition inside, so that leaving through it is seen; innermost loops
            # run `Syntax.unroll` trips per back edge (a device may limit back edges)
            k = self.unrolled(n)
            self.open(f"for ({head}; ; {name}++)")
            for j in range(k):
                if j:
                    self.out(f"{name}++;")
                self.out(self.s.inline(f"if (!({name} < {hi}))", f"{done} = true;", "break;"))
                if not j:
                    self.poll(n)
                if k > 1:
                    self.open("")
                self.loop_trip(n, guarded, t)
                if k > 1:
                    self.close()
        self.close()
        self.checked_close(done)
        self.scope.pop()
        self.hoisted = saved
        self.within = within

    def unswitch(self, n: N.Loop) -> dict[tuple[str, str], str]:
        """`within` for the body of loop ``n``. Its variable stays below the count of the buffer
        bounding the loop (`Ranges.bounding_buffer`), so a load of another buffer at exactly that
        variable is in bounds whenever that buffer is at least as long: one flag printed before
        the loop says so for all such buffers, and their checks read ``flag || i < n``, the same
        bytes (S6), on which the compiler can version the loop (checks gone from the copy that
        runs when the flag holds). Only where the syntax spells such a check
        (`Syntax.unswitch_loads`); loads of a nested loop over the same name are its own."""
        within = {k: v for k, v in self.within.items() if k[0] != n.var}
        bounding = self.ranges.bounding_buffer(n.to)
        if not self.s.unswitch_loads or bounding is None or bounding[1] != 0:
            return within   # (a loop over blocks, to buf_len(b) >> s, is left as it is)
        bound = bounding[0]
        found: dict[str, None] = {}
        stack = list(n.body)
        while stack:
            s = stack.pop()
            if isinstance(s, N.Let | N.Assign) and s.name == n.var:
                return within   # the variable changes: not bounded by the loop's end
            if isinstance(s, N.Loop) and s.var == n.var:
                exprs: tuple[E.Expr, ...] = (s.from_, s.to)
            else:
                exprs = N.node_exprs(s)
                for _, sub in N.node_bodies(s):
                    stack.extend(sub)
            for x in exprs:
                for e in E.walk(x):
                    if isinstance(e, E.Load) and isinstance(e.index, E.Var) and e.index.name == n.var \
                            and e.buffer != bound and not self.program.buffer(e.buffer).count:
                        found[e.buffer] = None
        if not found:
            return within
        have = self.s.count(self, bound)
        flag = self.name("vy_in")
        cond = " && ".join(f"{have} <= {self.s.count(self, b)}" for b in sorted(found))
        self.out(self.s.temp(flag, self.s.types[BOOL], cond))
        within.update({(n.var, b): flag for b in found})
        return within

    def chunked(self, n: N.Loop, t: DataType) -> bool:
        """Whether a polling `loop` runs as chunks of at most `POLL_TRIPS` trips with one poll
        each (`Syntax.chunk_poll`): a 32-bit loop variable (the trips left fit in a u32) and
        no `break_` of its own (the chunk's loop would leave only the chunk)."""
        return bool(self.s.chunk_poll) and self.cancel and self.plan.loops.polls(n) \
            and t in (U32, DataType.I32) and not breaks(n.body)

    def loop_trip(self, n: N.Loop, guarded: bool, t: DataType) -> None:
        saved = dict(self.ranges.env)
        if t is U32:
            self.ranges.bind(n.var, self.ranges.loop(n.var, n.from_, n.to))
        self.ranges.below[n.var] = self.ranges.bounding_buffer(n.to)
        self.loop_body(n, guarded)
        self.ranges.env = saved

    def while_(self, n: N.While, guarded: bool) -> None:
        saved = self.hoist(n)
        # a loop whose condition fails before its cap (vyre.lower.loops) counts no trips
        capped = self.plan.loops.capped(n)
        count = self.name("vy_w") if capped else ""
        done = self.checked_open()
        # trips so far, in 32-bit words: a second word where the cap does not fit in one
        # (the inliner's cap + 1 of a loop whose condition calls a function)
        wide = n.max_iterations > 0xFFFFFFFF
        decls = [self.s.var(w, self.s.types[U32], "0u") for w in (count, count + "h")[:1 + wide]] if capped else []
        self.s.while_open(self, decls)
        leave = ("break;",) if done is None else (f"{done} = true;", "break;")
        cap = n.max_iterations
        at_cap = f"{count} == {cap & 0xFFFFFFFF}u" + (f" && {count}h == {cap >> 32}u" if wide else "")
        flag = "" if done is None else f"{done} = true; "
        k = self.unrolled(n) if done is not None else 1
        for j in range(k):   # every copy is one whole trip: a `continue` starts the next at the top
            if self.alive and _contains(n, N.Return) and not _contains(n, N.Barrier):
                self.out(self.s.inline("if (!vy_alive)", *leave))   # a returned lane leaves, as in the reference
            c, _, _ = self.expr(n.cond)
            self.out(self.s.inline(f"if (!{c})", *leave))
            if capped:
                self.out(f"if ({at_cap}) {{ {self.s.error(ERR_LOOP_LIMIT)} {flag}break; }}")
                self.out(f"{count}++;")
                if wide:
                    self.out(self.s.inline(f"if ({count} == 0u)", f"{count}h++;"))
            if not j:
                self.poll(n)
            if k > 1:
                self.open("")
            saved = dict(self.ranges.env)
            self.loop_body(n, guarded)
            self.ranges.env = saved
            if k > 1:
                self.close()
        self.s.while_close(self)
        self.checked_close(done)
        self.hoisted = saved

    def unrolled(self, n: N.Loop | N.While) -> int:
        """Trips per back edge of a checked loop: for an innermost loop `Syntax.unroll`, or up
        to 32 while the copies stay within about 256 IR nodes. A loop whose body calls a
        correctly rounded function (S13) is not copied: each call is thousands of operations
        of target code (on WGSL, float64 in software), and compile time grows faster than
        code size; such a loop runs one trip per back edge."""
        if any(isinstance(s, N.Loop | N.While) for s in N.walk_nodes(n.body)):
            return 1
        if any(isinstance(e, E.Un | E.Bin) and e.op in TRANSCENDENTAL for e in N.walk_exprs(n.body)):
            return 1
        size = sum(1 for _ in N.walk_nodes(n.body)) + sum(1 for _ in N.walk_exprs(n.body))
        return max(self.s.unroll, min(32, 256 // max(size, 1)))

    def checked_open(self) -> str | None:
        """With `Syntax.checked_loops`: a flag set on every way the program leaves the loop
        (its name), so a loop the device stopped is reported after it (`checked_close`).
        Mesa's llvmpipe ends every loop of an invocation after 65,535 loop back edges in all,
        whatever the loops (nesting or chunking does not help): a loop it ends leaves the
        flag unset. A loop of exactly 65,535 trips is reported too: its last exit test
        comes after the 65,535th back edge."""
        if not self.s.checked_loops:
            return None
        self.checked += 1   # its own count: temporaries keep their numbers
        done = f"vy_d{self.checked}"
        self.out(self.s.var(done, self.s.types[BOOL], "false"))
        self.loops.append(done)
        return done

    def checked_close(self, done: str | None) -> None:
        if done is not None:
            self.loops.pop()
            live = " && vy_alive" if self.alive else ""
            self.out(self.s.inline(f"if (!{done}{live})", self.s.error(ERR_DEVICE_LOOPS)))

    def break_(self, n: N.Break, guarded: bool) -> None:
        if self.loops:
            self.out(f"{self.loops[-1]} = true;")
        self.out("break;")

    def continue_(self, n: N.Continue, guarded: bool) -> None:
        self.out("continue;")

    def nothing(self, n: N.Node, guarded: bool) -> None:
        """IndirectDispatch: the engine reads the grid before launching the phase."""

    def scoped(self, n: N.Block | N.Region, guarded: bool) -> None:
        self.open("")
        self.block(n.body, guarded)
        self.close()

    def return_(self, n: N.Return, guarded: bool) -> None:
        self.out("vy_alive = false;" if self.alive else "return;")

    def barrier(self, n: N.Barrier, guarded: bool) -> None:
        if n.ordering is MemoryOrdering.SEQ_CST:   # a grid_sync splits phases (vyre.lower.plan)
            for line in self.s.barrier:
                self.out(line)

    def eval(self, n: N.Eval, guarded: bool) -> None:
        self.expr(n.value)

    def matmul(self, n: N.MatMulAcc, guarded: bool) -> None:
        """A matmul_acc the plan left to the target (`Syntax.matmul`; every other target gets
        it as scalar loops before printing, `vyre.lower.legalize.matmul`)."""
        self.s.matmul(self, n)

    def tile(self, n: N.LoadTile, guarded: bool) -> None:
        """A load_tile the plan left to the target (`Syntax.tile`; every other target gets it
        as a scalar copy before printing, `vyre.lower.legalize.tile`)."""
        self.s.tile(self, n)

    # ---- kernels ---------------------------------------------------------------------------------
    def kernel(self, index: int, body: tuple[N.Node, ...]) -> str:
        self.lines = []
        self.indent = 1
        self.tmp = self.checked = 0
        self.scope = [{}]
        self.ranges.env = {}
        self.alive = self.plan.has_barrier and any(isinstance(n, N.Return) for n in N.walk_nodes(body))
        self.cancel = bool(self.plan.cancel_checked and self.plan.cancel_checked[index])
        self.s.prologue(self, index)
        if self.alive:
            self.out(self.s.var("vy_alive", self.s.types[BOOL], "true"))
        if self.cancel:
            self.out(self.s.var("vy_trips", self.s.types[U32], "0u"))
        if self.plan.vector > 1:
            self.s.vector_body(self, body)
        else:
            self.block(body)
        return self.s.kernel_head(self, index) + " {\n" + "\n".join(self.lines) + "\n}\n"


def _contains(n: N.Node, kind: type) -> bool:
    return any(isinstance(s, kind) for s in N.walk_nodes((n,)))


class _Opaque:
    """Stands in for an already-lowered operand when asking `flags_of` for a result's flags."""

    NAME = "__vyre_operand__"

    @staticmethod
    def of(e: E.Expr) -> E.Expr:
        v = E.Var(_Opaque.NAME)

        def stand_in(k: E.Expr) -> E.Expr:
            # a float literal operand stays itself: whether the compiler knows an operand
            # decides whether hardware flushes may be relied on (`hardware_bin`,
            # `hardware_un`), and its magnitude may rule out a subnormal result (`no_subnormal`)
            return k if isinstance(k, E.Lit) and k.dtype.is_float else v

        if isinstance(e, E.Bin):
            return E.Bin(e.op, stand_in(e.left), stand_in(e.right))
        if isinstance(e, E.Un):
            return E.Un(e.op, stand_in(e.operand))
        return e


class _Invariance:
    """Whether an expression gives the same value on every trip of one loop (`Printer.hoist`):
    one rule per kind (`INVARIANT`), memoised; an unknown kind raises."""

    def __init__(self, printer: Printer, changing: set[str]) -> None:
        self.p, self.changing = printer, changing
        self.visible = printer.visible()
        self.stable: dict[E.Expr, bool] = {}

    def __call__(self, e: E.Expr) -> bool:
        if e not in self.stable:
            rule = INVARIANT.get(type(e))
            if rule is None:
                raise UnknownKind(e)
            self.stable[e] = rule(self, e)
        return self.stable[e]

    def operands(self, e: E.Expr) -> bool:
        return all(self(k) for k in E.children(e))

    def var(self, e: E.Var) -> bool:
        return e.name not in self.changing

    def never(self, e: E.Expr) -> bool:
        return False

    def load(self, e: E.Load) -> bool:
        if not self.operands(e):
            return False
        p = self.p
        return p.program.buffer(e.buffer).is_bound and e.buffer not in p.written and \
            not (e.buffer in p.lane_loads and e.index == _GX)

    def bin(self, e: E.Bin) -> bool:   # a signed division may set the error flag
        if not self.operands(e):
            return False
        if e.op in (BinOp.DIV, BinOp.MOD):
            return not infer(e.left, self.visible, self.p.program).is_signed
        return True


V = _Invariance
# per expression kind, whether it is loop-invariant (tests/ir/test_kind_tables.py: every kind):
# effects and other invocations never are (atomics, subgroup operations); calls and weak
# literals are never printed (`NOT_PRINTED`)
INVARIANT: dict[type, Callable[[_Invariance, E.Expr], bool]] = {
    E.Var: V.var, E.Load: V.load, E.Bin: V.bin,
    E.Atomic: V.never, E.Subgroup: V.never, E.Call: V.never, E.WeakLit: V.never,
    E.Lit: V.operands, E.Spec: V.operands, E.BufLen: V.operands, E.Id: V.operands, E.Un: V.operands,
    E.Select: V.operands, E.Cast: V.operands, E.Bitcast: V.operands, E.Fma: V.operands,
}

EXPRS: dict[type, Callable[[Printer, E.Expr], Value]] = {
    E.Spec: Printer.spec, E.Lit: Printer.lit, E.Var: Printer.var, E.BufLen: Printer.buflen,
    E.Id: Printer.id, E.Load: Printer.load, E.Bin: Printer.binary, E.Un: Printer.unary,
    E.Select: Printer.select, E.Cast: Printer.cast, E.Bitcast: Printer.bitcast, E.Fma: Printer.fma,
    E.Atomic: Printer.atomic, E.Subgroup: Printer.subgroup,
    E.Call: Printer.not_printed, E.WeakLit: Printer.not_printed,
}
# kinds a plan never holds (printing one is a bug upstream)
NOT_PRINTED = {E.Call: "functions are inlined before printing (vyre.ir.inline)",
               E.WeakLit: "weak literals are typed when the Program is built"}
NODES: dict[type, Callable[[Printer, N.Node, bool], None]] = {
    N.Let: Printer.let, N.Assign: Printer.assign, N.Store: Printer.store, N.If: Printer.if_,
    N.Loop: Printer.loop, N.While: Printer.while_, N.Break: Printer.break_,
    N.Continue: Printer.continue_, N.IndirectDispatch: Printer.nothing, N.Block: Printer.scoped,
    N.Region: Printer.scoped, N.Return: Printer.return_, N.Barrier: Printer.barrier, N.Eval: Printer.eval,
    N.MatMulAcc: Printer.matmul, N.LoadTile: Printer.tile,
}


def emit(plan: KernelPlan, syntax: Syntax) -> str:
    """Complete target source of a plan: one kernel per phase, in the record's module."""
    p = Printer(plan, syntax)
    return syntax.module(p, [p.kernel(i, body) for i, body in enumerate(plan.phases)])
