"""`validate(program) -> list[Diagnostic]`: every rule a Program must satisfy before any
backend (the reference included) executes it. Empty list = valid.

Codes are stable (part of the API; docs/semantics.md lists them). Each diagnostic has a
location path (``body[2].then[0]``) and a message ending in ``Fix: ...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import expr as E
from . import node as N
from .limits import MAX_BUFFERS, MAX_NODES
from .limits import MAX_STMT_NESTING as MAX_DEPTH
from .program import Program
from .structure import structural_faults
from .typecheck import TypeFault, infer
from .types import Builtin, DataType, MemoryOrdering

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

CODES: dict[str, str] = {
    "V001": "unknown buffer",
    "V002": "unknown variable",
    "V003": "type mismatch",
    "V004": "assignment to an undeclared variable",
    "V005": "assignment to a loop variable",
    "V006": "barrier under non-uniform control flow",
    "V007": "atomic on a non-integer buffer",
    "V008": "write to a read-only buffer",
    "V009": "workgroup size axis not positive",
    "V010": "duplicate binding",
    "V011": "static out-of-bounds index",
    "V012": "nesting too deep",
    "V013": "program too large",
    "V014": "duplicate buffer name",
    "V015": "variable redeclared while visible",
    "V016": "grid_sync not at the top level",
    "V017": "return in a program with grid_sync",
    "V018": "variable used across grid_sync",
    "V019": "malformed buffer declaration",
    "V022": "invalid builtin axis",
    "V025": "invalid identifier",
    "V026": "specialization constant declared with two types or defaults",
    "V027": "subgroup operation under non-uniform control flow",
    "V028": "return in a program with subgroup operations",
    "V029": "literal out of range or not canonical",
    "V030": "malformed program object",
}


@dataclass(frozen=True)
class Diagnostic:
    code: str
    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.code} at {self.location}: {self.message}"


def validate(program: Program) -> list[Diagnostic]:
    return _Validator(program).run()


class _Validator:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.out: list[Diagnostic] = []
        self.nodes = 0
        self.nonuniform: set[str] = set()
        self.phase_dead: set[str] = set()

    def add(self, code: str, loc: str, message: str, fix: str) -> None:
        self.out.append(Diagnostic(code, loc, f"{message} Fix: {fix}"))

    def run(self) -> list[Diagnostic]:
        faults = structural_faults(self.p)
        for code, loc, message, fix in faults:
            self.add(code, loc, message, fix)
        if any(code == "V030" for code, *_ in faults):
            return self.out  # the remaining rules assume a well-formed tree
        self.buffers()
        wg = self.p.workgroup_size
        if len(wg) != 3 or any((not isinstance(v, int)) or v <= 0 for v in wg):
            self.add("V009", "workgroup_size", f"workgroup size {wg} has an axis <= 0.",
                     "give every axis a positive size, e.g. (64, 1, 1).")
        self.nonuniform = self.uniformity()
        has_grid_sync = any(isinstance(n, N.Barrier) and n.ordering is MemoryOrdering.GRID_SYNC
                            for n in N.walk_nodes(self.p.body))
        self.block(self.p.body, "body", {}, set(), True, 0, top=True, grid=has_grid_sync)
        self.specs()
        self.subgroups()
        return self.out

    def subgroups(self) -> None:
        uses = any(isinstance(e, E.Subgroup) for e in N.walk_exprs(self.p.body))
        if not uses:
            return
        if any(isinstance(n, N.Return) for n in N.walk_nodes(self.p.body)):
            self.add("V028", "body", "return_ in a program that uses subgroup operations.",
                     "guard the remaining work with Node.if_ instead: every lane of a subgroup must "
                     "reach each subgroup operation.")
        self._subgroup_uniform(self.p.body, "body", True)

    def _subgroup_uniform(self, body, loc: str, uniform: bool) -> None:
        for i, n in enumerate(body):
            here = f"{loc}[{i}]"
            if not uniform and any(isinstance(e, E.Subgroup) for root in N.node_exprs(n) for e in E.walk(root)):
                self.add("V027", here, "subgroup operation under control flow that differs between "
                         "invocations.", "move it out of the divergent if/loop (every lane of the "
                         "subgroup must take part).")
            if isinstance(n, N.If):
                u = uniform and self.uniform_expr(n.cond, self.nonuniform)
                self._subgroup_uniform(n.then, f"{here}.then", u)
                self._subgroup_uniform(n.otherwise, f"{here}.otherwise", u)
            elif isinstance(n, N.Loop):
                u = uniform and self.uniform_expr(n.from_, self.nonuniform) and self.uniform_expr(n.to, self.nonuniform)
                self._subgroup_uniform(n.body, f"{here}.body", u)
            elif isinstance(n, N.Block | N.Region):
                self._subgroup_uniform(n.body, f"{here}.body", uniform)

    def specs(self) -> None:
        seen: dict[str, E.Spec] = {}
        for e in N.walk_exprs(self.p.body):
            if not isinstance(e, E.Spec):
                continue
            if not isinstance(e.name, str) or not NAME.match(e.name):
                self.add("V025", "body", f"specialization name {e.name!r} is not an identifier.",
                         "use letters, digits and underscores.")
            elif e.name in seen and seen[e.name] != e:
                self.add("V026", "body", f"specialization constant {e.name!r} appears with "
                         "different types or defaults.", "declare it once and reuse that Expr.")
            seen.setdefault(e.name, e)

    # ---- declarations --------------------------------------------------------------
    def buffers(self) -> None:
        if len(self.p.buffers) > MAX_BUFFERS:
            self.add("V013", "buffers", f"{len(self.p.buffers)} buffers (limit {MAX_BUFFERS}).",
                     "split the program or pack data into fewer buffers.")
        names: set[str] = set()
        bindings: dict[int, str] = {}
        for i, b in enumerate(self.p.buffers):
            loc = f"buffers[{i}]"
            if not isinstance(b.name, str) or not NAME.match(b.name):
                self.add("V025", loc, f"buffer name {b.name!r} is not an identifier.",
                         "use letters, digits and underscores (not starting with a digit), at most 64.")
            if b.name in names:
                self.add("V014", loc, f"buffer {b.name!r} is declared twice.", "rename one of them.")
            names.add(b.name)
            if not isinstance(b.dtype, DataType) or not isinstance(b.count, int) or b.count < 0 \
                    or b.count > 0xFFFFFFFF:
                self.add("V019", loc, f"buffer {b.name!r} has an invalid dtype or count.",
                         "use a vyre DataType and a count in 0..2**32-1 (0 = runtime-sized).")
                continue
            if b.is_workgroup:
                if b.count <= 0:
                    self.add("V019", loc, f"workgroup buffer {b.name!r} has count 0.",
                             "give workgroup buffers a static element count.")
                if b.binding is not None:
                    self.add("V019", loc, f"workgroup buffer {b.name!r} has a binding.",
                             "declare it with BufferDecl.workgroup(name, count, dtype).")
                continue
            if not isinstance(b.binding, int) or b.binding < 0:
                self.add("V019", loc, f"buffer {b.name!r} has no valid binding number.",
                         "give each non-workgroup buffer a distinct binding >= 0.")
            elif b.binding in bindings:
                self.add("V010", loc, f"binding {b.binding} is used by {bindings[b.binding]!r} "
                         f"and {b.name!r}.", "give each buffer its own binding number.")
            else:
                bindings[b.binding] = b.name

    # ---- uniformity ----------------------------------------------------------------
    def uniform_expr(self, e: E.Expr, nonuniform: set[str]) -> bool:
        for sub in E.walk(e):
            if isinstance(sub, E.Id) and sub.kind is not Builtin.WGID:
                return False
            if isinstance(sub, E.Atomic):
                return False
            if isinstance(sub, E.Subgroup) and sub.op.value != "size":
                return False
            if isinstance(sub, E.Var) and sub.name in nonuniform:
                return False
            if isinstance(sub, E.Load):
                decl = self.p.buffer(sub.buffer)
                if decl is None or decl.writable:
                    return False
        return True

    def uniformity(self) -> set[str]:
        nonuniform: set[str] = set()
        while True:
            before = len(nonuniform)
            self._mark(self.p.body, True, nonuniform)
            if len(nonuniform) == before:
                return nonuniform

    def _mark(self, body, uniform: bool, nu: set[str]) -> None:
        for n in body:
            if isinstance(n, N.Let | N.Assign):
                if not (uniform and self.uniform_expr(n.value, nu)):
                    nu.add(n.name)
            elif isinstance(n, N.If):
                u = uniform and self.uniform_expr(n.cond, nu)
                self._mark(n.then, u, nu)
                self._mark(n.otherwise, u, nu)
            elif isinstance(n, N.Loop):
                u = uniform and self.uniform_expr(n.from_, nu) and self.uniform_expr(n.to, nu)
                if not u:
                    nu.add(n.var)
                self._mark(n.body, u, nu)
            elif isinstance(n, N.Block | N.Region):
                self._mark(n.body, uniform, nu)

    # ---- statements ----------------------------------------------------------------
    def block(self, body, loc: str, scope: dict[str, DataType], loops: set[str], uniform: bool,
              depth: int, top: bool = False, grid: bool = False) -> None:
        if depth > MAX_DEPTH:
            self.add("V012", loc, f"statements nest deeper than {MAX_DEPTH}.",
                     "flatten the control flow or split the program.")
            return
        scope = dict(scope)
        for i, n in enumerate(body):
            here = f"{loc}[{i}]"
            self.nodes += 1
            if self.nodes == MAX_NODES + 1:
                self.add("V013", here, f"program has more than {MAX_NODES} statements.",
                         "split it into several programs.")
            if self.nodes > MAX_NODES:
                return
            self.stmt(n, here, scope, loops, uniform, depth, top, grid)

    def expr(self, e: E.Expr, loc: str, scope: dict[str, DataType], want: DataType | None = None,
             what: str = "expression") -> DataType | None:
        for sub in E.walk(e):
            if isinstance(sub, E.Var) and sub.name in self.phase_dead and sub.name not in scope:
                self.add("V018", loc, f"{sub.name!r} was declared before a grid_sync and used after it.",
                         "locals do not survive grid_sync (each phase is a separate dispatch); "
                         "recompute the value or pass it through a buffer.")
                return None
        try:
            t = infer(e, scope, self.p)
        except TypeFault as f:
            self.add(f.code, loc, f.message, f.fix)
            return None
        if want is not None and t is not want:
            self.add("V003", loc, f"{what} is {t.value}, expected {want.value}.",
                     f"cast it with Expr.cast(DataType.{want.name}, ...).")
        self.static_oob(e, loc)
        return t

    def static_oob(self, e: E.Expr, loc: str) -> None:
        for sub in E.walk(e):
            if isinstance(sub, E.Load | E.Atomic):
                self._check_oob(sub.buffer, sub.index, loc)

    def _check_oob(self, buffer: str, index: E.Expr, loc: str) -> None:
        decl = self.p.buffer(buffer)
        if decl is None or decl.count == 0 or not isinstance(index, E.Lit):
            return
        if index.dtype is DataType.U32 and index.bits >= decl.count:
            self.add("V011", loc, f"index {index.bits} is past the end of {buffer!r} "
                     f"(count {decl.count}).", "use an index below the buffer's count, "
                     "or enlarge the buffer.")

    def stmt(self, n: N.Node, loc: str, scope: dict[str, DataType], loops: set[str],
             uniform: bool, depth: int, top: bool, grid: bool) -> None:
        if isinstance(n, N.Let):
            if not isinstance(n.name, str) or not NAME.match(n.name):
                self.add("V025", loc, f"variable name {n.name!r} is not an identifier.",
                         "use letters, digits and underscores.")
                return
            if n.name in scope:
                self.add("V015", loc, f"{n.name!r} is already declared in an enclosing scope.",
                         "pick a new name, or use Node.assign to update it.")
            t = self.expr(n.value, loc, scope, what=f"value of {n.name!r}")
            scope[n.name] = t if t is not None else DataType.U32
        elif isinstance(n, N.Assign):
            if n.name not in scope:
                self.add("V004", loc, f"assignment to {n.name!r}, which is not declared here.",
                         f"declare it first with Node.let_bind({n.name!r}, ...).")
                self.expr(n.value, loc, scope)
                return
            if n.name in loops:
                self.add("V005", loc, f"assignment to loop variable {n.name!r}.",
                         "copy it into a new local with let_bind and change that.")
            self.expr(n.value, loc, scope, scope[n.name], what=f"value assigned to {n.name!r}")
        elif isinstance(n, N.Store):
            decl = self.p.buffer(n.buffer)
            if decl is None:
                self.add("V001", loc, f"store to undeclared buffer {n.buffer!r}.",
                         "declare the buffer in Program.wrapped(buffers=...).")
                return
            if not decl.writable:
                self.add("V008", loc, f"store to read-only buffer {n.buffer!r}.",
                         "declare it read_write or output.")
            self.expr(n.index, loc, scope, DataType.U32, "store index")
            self._check_oob(n.buffer, n.index, loc)
            self.expr(n.value, loc, scope, decl.dtype, f"value stored to {n.buffer!r}")
        elif isinstance(n, N.If):
            self.expr(n.cond, loc, scope, DataType.BOOL, "if condition")
            u = uniform and self.uniform_expr(n.cond, self.nonuniform)
            self.block(n.then, f"{loc}.then", scope, loops, u, depth + 1, grid=grid)
            self.block(n.otherwise, f"{loc}.otherwise", scope, loops, u, depth + 1, grid=grid)
        elif isinstance(n, N.Loop):
            if not isinstance(n.var, str) or not NAME.match(n.var):
                self.add("V025", loc, f"loop variable {n.var!r} is not an identifier.",
                         "use letters, digits and underscores.")
                return
            if n.var in scope:
                self.add("V015", loc, f"loop variable {n.var!r} is already declared.",
                         "pick a fresh name for the loop variable.")
            lo = self.expr(n.from_, loc, scope, what="loop start")
            hi = self.expr(n.to, loc, scope, what="loop end")
            if lo is not None and hi is not None and (lo is not hi or not lo.is_integer):
                self.add("V003", loc, f"loop bounds are {lo.value} and {hi.value}.",
                             "make both bounds u32 or both i32.")
            inner = dict(scope)
            inner[n.var] = lo if lo is not None and lo.is_integer else DataType.U32
            u = uniform and self.uniform_expr(n.from_, self.nonuniform) and \
                self.uniform_expr(n.to, self.nonuniform)
            self.block(n.body, f"{loc}.body", inner, loops | {n.var}, u, depth + 1, grid=grid)
        elif isinstance(n, N.Block | N.Region):
            self.block(n.body, f"{loc}.body", scope, loops, uniform, depth + 1, grid=grid)
        elif isinstance(n, N.Return):
            if grid:
                self.add("V017", loc, "return_ in a program that uses grid_sync.",
                         "guard the remaining work with Node.if_ instead of returning early.")
        elif isinstance(n, N.Barrier):
            if not isinstance(n.ordering, MemoryOrdering):
                self.add("V003", loc, "barrier ordering is not a MemoryOrdering.",
                         "use MemoryOrdering.SEQ_CST or MemoryOrdering.GRID_SYNC.")
            elif n.ordering is MemoryOrdering.GRID_SYNC:
                if not top:
                    self.add("V016", loc, "grid_sync inside nested control flow.",
                             "place grid_sync barriers only at the top level of the program body.")
                else:
                    self.phase_dead |= set(scope)
                    scope.clear()
            elif not uniform:
                self.add("V006", loc, "barrier under control flow that differs between invocations.",
                         "move the barrier out of the divergent if/loop, or make its condition "
                         "depend only on uniform values (literals, buf_len, wgid, uniform locals).")
        elif isinstance(n, N.Eval):
            self.expr(n.value, loc, scope)
        else:
            self.add("V003", loc, f"unknown statement kind {type(n).__name__}.",
                     "build statements with the vyre.ir.Node constructors.")


def check(program: Program) -> None:
    """Raise `ValidationError` if ``program`` has any diagnostic."""
    from .errors import ValidationError

    diags = validate(program)
    if diags:
        raise ValidationError(diags)
