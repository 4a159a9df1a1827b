"""Function inlining: a Program with functions becomes one without, for code generators.

Each call is replaced, where it stands, by its function's body: the arguments bound to fresh
locals, the body with every local renamed (``__vy<k>_<name>``, a prefix programs may not
use), and the result bound to a fresh local that replaces the call. Evaluation order is kept
exactly: when an operand evaluated *before* a call could observe what the call does (it reads
memory or has an effect), it is first bound to a temporary, so the call's body still runs
after it. A ``while_`` whose condition calls a function becomes a loop that evaluates the
condition at the top of each iteration, with the same iteration cap and the same error.

The reference interpreter executes calls directly; the conformance suite checks both agree.
"""

from __future__ import annotations

from . import expr as E
from . import node as N
from .kinds import (
    ARGS,
    BINDS,
    BODY,
    DECLARES,
    EXPR,
    EXPR_KINDS,
    LOCAL,
    NODE_KINDS,
    NODE_MAP,
    OPT,
    Role,
    kind_of,
)
from .program import Function, Program
from .types import BinOp, UnOp

PREFIX = "__vy"
# kinds whose value a call cannot change (the pure ones of `vyre.ir.kinds`)
_STABLE = tuple(k.cls for k in EXPR_KINDS if k.pure and k.built)


def _has_call(e: E.Expr) -> bool:
    return any(isinstance(x, E.Call) for x in E.walk(e))


def _stable(e: E.Expr) -> bool:
    """Evaluates to the same value before or after a call (reads no memory, no effect):
    a call cannot change the caller's locals, only memory."""
    return all(isinstance(x, _STABLE) for x in E.walk(e))


class _Inliner:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.k = 0

    def fresh(self, name: str) -> str:
        self.k += 1
        return f"{PREFIX}{self.k}_{name}"

    # ---- expressions: (statements to run first, the expression) --------------------------
    def expr(self, e: E.Expr) -> tuple[list[N.Node], E.Expr]:
        if not _has_call(e):
            return [], e
        if isinstance(e, E.Call):
            pre, args = self.seq(list(e.args))
            more, result = self.call(e.function, args)
            assert result is not None  # validated: a call used as a value has a result
            return pre + more, result
        from .rewrite import with_children

        pre, kids = self.seq(list(E.children(e)))
        return pre, with_children(e, kids)

    def seq(self, parts: list[E.Expr]) -> tuple[list[N.Node], list[E.Expr]]:
        """Operands evaluated left to right: an earlier one that a later call could change is
        bound to a temporary first."""
        out: list[E.Expr] = []
        pre: list[N.Node] = []
        for i, part in enumerate(parts):
            p, x = self.expr(part)
            later_call = any(_has_call(q) for q in parts[i + 1:])
            if later_call and not _stable(x):
                tmp = self.fresh("t")
                p = p + [N.Let(tmp, x)]
                x = E.Var(tmp)
            pre += p
            out.append(x)
        return pre, out

    def call(self, name: str, args: list[E.Expr]) -> tuple[list[N.Node], E.Expr | None]:
        """The statements that run function ``name`` on ``args`` (already evaluated, in
        order) and the expression of its result. Every local is fresh, so the body needs no
        block of its own: its result local stays visible after it."""
        fn: Function = self.p.function(name)  # type: ignore[assignment]
        names: dict[str, str] = {}
        stmts: list[N.Node] = []
        for (pname, _), arg in zip(fn.params, args):
            names[pname] = self.fresh(pname)
            stmts.append(N.Let(names[pname], arg))
        body, top = _rename(fn.body, names, self)
        stmts += self.body(body)
        if fn.result is None:
            return stmts, None
        pre, result = self.expr(_rename_expr(fn.result, top))
        out = self.fresh("ret")
        return stmts + pre + [N.Let(out, result)], E.Var(out)

    # ---- statements ----------------------------------------------------------------------
    def body(self, nodes) -> list[N.Node]:
        out: list[N.Node] = []
        for n in nodes:
            out.extend(self.stmt(n))
        return out

    def stmt(self, n: N.Node) -> list[N.Node]:
        t = type(n)
        if t is N.Eval and isinstance(n.value, E.Call):   # a call for its effects
            pre, args = self.seq(list(n.value.args))
            return pre + self.call(n.value.function, args)[0]
        if t is N.While:   # the body first, then the condition (calls in it: `while_call`)
            body = tuple(self.body(n.body))
            if not _has_call(n.cond):
                return [N.While(n.cond, body, n.max_iterations)]
            return self.while_call(n, body)
        mapper = NODE_MAP.get(t)
        if mapper is None:
            kind_of(n)            # no expressions, no bodies: kept (anything else raises)
            return [n]
        # its expressions evaluated in order (calls hoisted before it), then its bodies
        exprs = N.node_exprs(n)
        if len(exprs) == 1:
            pre, x = self.expr(exprs[0])
            xs = [x]
        else:
            pre, xs = self.seq(list(exprs))
        it = iter(xs)
        return pre + [mapper(n, lambda e: next(it), lambda b: tuple(self.body(b)))]

    def while_call(self, n: N.While, body: tuple[N.Node, ...]) -> list[N.Node]:
        """``while c`` where ``c`` calls: evaluate it at the top of each iteration. The
        iteration count is kept in a local; when it reaches the cap with ``c`` still true, a
        one-iteration ``while_(true, cap=1)`` raises the same loop_limit error."""
        count = self.fresh("n")
        pre, c = self.expr(n.cond)
        true = E.Expr.bool_(True)
        head = [*pre,
                N.If(E.Un(UnOp.LOGICAL_NOT, c), (N.Break(),)),
                N.If(E.Bin(BinOp.EQ, E.Var(count), E.Expr.u32(n.max_iterations)),
                     (N.While(true, (), 1), N.Break())),
                N.Assign(count, E.Bin(BinOp.ADD, E.Var(count), E.Expr.u32(1)))]
        return [N.Let(count, E.Expr.u32(0)),
                N.While(true, tuple(head) + body, n.max_iterations + 1)]


def _rename_expr(e: E.Expr, names: dict[str, str]) -> E.Expr:
    from .rewrite import map_expr

    def rename(x: E.Expr) -> E.Expr:
        plan = _READS_LOCAL.get(type(x))
        if plan is None:
            return x
        if len(plan) == 1:    # a variable
            new = names.get(getattr(x, plan[0][0]))
            return x if new is None else type(x)(new)
        vals = [getattr(x, f) for f, _ in plan]
        if not any(v in names for v, (_, local) in zip(vals, plan) if local):
            return x
        return type(x)(*(names.get(v, v) if local else v for v, (_, local) in zip(vals, plan)))

    return map_expr(e, rename)


def _rename(body, names: dict[str, str], inl: _Inliner) -> tuple[tuple[N.Node, ...], dict[str, str]]:
    """``body`` with every local it declares renamed (fresh names, per call), and the
    names visible at its end (what a function's result reads). Which fields declare, bind
    or use a local comes from the one list of kinds (`vyre.ir.kinds`)."""
    names = dict(names)
    out: list[N.Node] = []
    for n in body:
        plan = _PLAN.get(type(n))
        if plan is None:
            kind_of(n)      # raises: not an IR kind
        if not plan:        # no fields: nothing to rename
            out.append(n)
            continue
        inner = names
        args = []
        declared = -1
        for i, (name, role) in enumerate(plan):
            v = getattr(n, name)
            if role is EXPR or role is OPT or role is ARGS:
                v = _rename_role(v, role, names)
            elif role == LOCAL:
                v = names.get(v, v)
            elif role == BINDS:            # visible in the statement's bodies only
                inner = dict(names)
                inner[v] = v = inl.fresh(v)
            elif role == DECLARES:         # visible after the statement
                declared = i
            args.append(v)
        for i, (_, role) in enumerate(plan):
            if role == BODY:
                args[i] = _rename(args[i], inner, inl)[0]
            elif i == declared:
                names[args[i]] = args[i] = inl.fresh(args[i])
        # an inlined copy keeps no labels: a region becomes a block
        out.append(N.Block(args[-1]) if type(n) is N.Region else type(n)(*args))
    return tuple(out), names


def _rename_role(v, role: Role, names: dict[str, str]):
    if role == EXPR:
        return _rename_expr(v, names)
    if role == OPT:
        return None if v is None else _rename_expr(v, names)
    return tuple(_rename_expr(a, names) for a in v)


# expression kinds that read a local: (field, whether it names the local) for each field
_READS_LOCAL = {k.cls: tuple((f.name, f.role == LOCAL) for f in k.fields) for k in EXPR_KINDS if k.roles(LOCAL)}
_PLAN = {k.cls: tuple((f.name, f.role) for f in k.fields) for k in NODE_KINDS}


def inline(program: Program) -> Program:
    """``program`` with every call inlined and no functions (unchanged when it has none)."""
    if not program.functions:
        return program
    inl = _Inliner(program)
    return Program(program.buffers, program.workgroup_size, tuple(inl.body(program.body)))
