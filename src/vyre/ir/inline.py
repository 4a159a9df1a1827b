"""Function inlining: a Program with functions becomes one without, for code generators.

Each call is replaced, where it stands, by its function's body: the arguments bound to fresh
locals, the body with every local renamed (``__vy<k>_<name>``, a prefix programs may not
use), and the result bound to a fresh local that replaces the call. Evaluation order is kept
exactly: when an operand evaluated *before* a call could observe what the call does (it reads
memory or has an effect), it is first bound to a temporary, so the call's body still runs
after it. A ``while_`` whose condition calls a function becomes a loop that evaluates the
condition at the top of each iteration, with the same iteration cap and the same error.

Functions are flattened once each, callees before callers (`vyre.ir.typecheck.callees_first`):
a call then copies its function's already call-free body with fresh names, so a call chain
of any length is never walked by recursion. Inlining multiplies code (a function calling
the previous one twice doubles at each level), so `inlined_statements` counts what inlining
would produce without doing it; past `MAX_NODES` the program is refused (V013 in
`vyre.ir.validate`, and here as a last guard) instead of being expanded.

The reference interpreter executes calls directly; the conformance suite checks both agree.
"""

from __future__ import annotations

import re

from . import expr as E
from . import node as N
from .errors import VyreError
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
from .limits import MAX_NODES
from .program import Function, Program
from .typecheck import callees_first
from .types import BinOp, UnOp

PREFIX = "__vy"
_FRESH = re.compile(r"__vy\d+_")
INLINE_FIX = ("call the large functions fewer times (bind a result to a local with "
              "Node.let_bind and reuse it), or split the work into several programs.")
# kinds whose value a call cannot change (the pure ones of `vyre.ir.kinds`)
_STABLE = tuple(k.cls for k in EXPR_KINDS if k.pure and k.built)


def _has_call(e: E.Expr) -> bool:
    return any(isinstance(x, E.Call) for x in E.walk(e))


def _stable(e: E.Expr) -> bool:
    """Evaluates to the same value before or after a call (reads no memory, no effect):
    a call cannot change the caller's locals, only memory."""
    return all(isinstance(x, _STABLE) for x in E.walk(e))


def _calls(e: E.Expr) -> list[str]:
    return [x.function for x in E.walk(e) if isinstance(x, E.Call)]


def inlined_statements(program: Program) -> int:
    """How many statements ``program`` has once every call is inlined (an upper bound,
    counted per function, callees first, without expanding anything; capped just past
    `MAX_NODES`, so a program that would expand exponentially costs no more to count).
    Read from the program's facts (statements and calls per body): no walk of its own."""
    cap = MAX_NODES + 1
    facts = program.facts
    index = {id(f): k for k, f in enumerate(program.functions, 1)}
    size: dict[str, int] = {}

    def count(k: int) -> int:
        total = facts.body_statements[k]
        for name in facts.body_calls[k]:
            fn = program.function(name)
            total += size.get(name, 0) + (len(fn.params) if fn is not None else 0) + 3
            if total >= cap:
                return cap
        return min(total, cap)

    for f in callees_first(program.functions, program):
        size[f.name] = count(index[id(f)])
    return count(0)


def call_depth(program: Program) -> int:
    """How deeply the program's calls nest (0: no calls; a chain of n functions each
    calling the previous one, called from the body, is n)."""
    depth: dict[str, int] = {}
    for f in callees_first(program.functions, program):
        exprs = [*N.walk_exprs(tuple(f.body)), *([] if f.result is None else E.walk(f.result))]
        depth[f.name] = 1 + max((depth.get(x.function, 0) for x in exprs if isinstance(x, E.Call)), default=0)
    return max((depth.get(x.function, 0) for x in N.walk_exprs(tuple(program.body)) if isinstance(x, E.Call)),
               default=0)


class _Inliner:
    def __init__(self, program: Program) -> None:
        self.p = program
        # fresh names count on from an earlier inlining's (a legalize step may add functions
        # to a program inlined before: its names must not be reused)
        self.k = program.facts.fresh_base
        # every function's body and result with its own calls inlined (callees first)
        self.flat: dict[str, tuple[tuple[N.Node, ...], E.Expr | None]] = {}
        for f in callees_first(program.functions, program):
            body = self.body(f.body)
            result = f.result
            if result is not None:
                pre, result = self.expr(result)
                body += pre
            self.flat[f.name] = (tuple(body), result)

    def fresh(self, name: str) -> str:
        """A fresh local for ``name`` (an inlined copy's name keeps only its original part,
        so names do not grow with the depth of a call chain)."""
        self.k += 1
        m = _FRESH.match(name)
        return f"{PREFIX}{self.k}_{name[m.end():] if m else name}"

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
        flat_body, flat_result = self.flat[name]
        names: dict[str, str] = {}
        stmts: list[N.Node] = []
        for (pname, _), arg in zip(fn.params, args):
            names[pname] = self.fresh(pname)
            stmts.append(N.Let(names[pname], arg))
        body, top = _rename(flat_body, names, self)
        stmts += body
        if flat_result is None:
            return stmts, None
        out = self.fresh("ret")
        return stmts + [N.Let(out, _rename_expr(flat_result, top))], E.Var(out)

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
    if inlined_statements(program) > MAX_NODES:
        raise VyreError(f"inlining the program's function calls would make more than {MAX_NODES} "
                        "statements (V013).", INLINE_FIX)
    inl = _Inliner(program)
    return Program(program.buffers, program.workgroup_size, tuple(inl.body(program.body)))
