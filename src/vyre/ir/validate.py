"""`validate(program) -> list[Diagnostic]`: every rule a Program must satisfy before any
backend (the reference included) executes it. Empty list = valid.

Codes are stable (part of the API; docs/semantics.md lists them). Each diagnostic has a
location path (``body[2].then[0]``) and a message ending in ``Fix: ...``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import expr as E
from . import node as N
from .facts import facts_of
from .kinds import EXPR_KINDS, JUMPS, KIND, LOOPS, WRITES_LOCAL
from .limits import MAX_BUFFERS, MAX_NODES
from .limits import MAX_STMT_NESTING as MAX_DEPTH
from .program import Program
from .structure import structural_faults
from .typecheck import TypeFault, call_check, infer
from .types import VALUE_TYPES, Builtin, DataType, MemoryOrdering, SubgroupOp

MAX_LOCAL_ELEMENTS = 4096   # per local array: private memory is per invocation
# matmul_acc operand types: bytes (u8/i8, any mix) or words (u32/i32); d is a word type
MATMUL_BYTES = frozenset({DataType.U8, DataType.I8})
MATMUL_WORDS = frozenset({DataType.U32, DataType.I32})


def _local_name(name: str) -> bool:
    """An identifier a program may give a local (``__vy`` is the inliner's prefix)."""
    return bool(NAME.match(name)) and not name.startswith("__vy")


def jumps(body) -> bool:
    """Whether ``body`` breaks or continues the loop it belongs to (not a nested loop)."""
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, JUMPS):
            return True
        if isinstance(n, LOOPS):
            continue
        for _, sub in N.node_bodies(n):
            stack.extend(sub)
    return False


def _all_nodes(program: Program, body=None, where: str = "body"):
    """(statement, location) for every statement of the body (or of ``body``, located at
    ``where``), in pre-order."""
    body = program.body if body is None else body
    stack = [(n, f"{where}[{i}]") for i, n in reversed(list(enumerate(body)))]
    while stack:
        n, loc = stack.pop()
        yield n, loc
        for label, sub in reversed(N.node_bodies(n)):
            stack.extend((s, f"{loc}.{label}[{j}]") for j, s in reversed(list(enumerate(sub))))


NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

CODES: dict[str, str] = {
    "V001": "unknown buffer",
    "V002": "unknown variable",
    "V003": "type mismatch",
    "V004": "assignment to an undeclared variable",
    "V005": "assignment to a loop variable",
    "V006": "barrier under non-uniform control flow",
    "V007": "atomic on a buffer that does not take it (float buffers: ADD, MIN, MAX only)",
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
    "V032": "unknown, duplicate or badly called function",
    "V033": "recursive function",
    "V034": "break or continue outside a loop",
    "V035": "statement not allowed in a function",
    "V036": "while loop without a valid iteration cap",
    "V037": "misplaced or invalid indirect_dispatch",
    "V038": "invalid matmul_acc (arrays, types or shape)",
    "V039": "matmul_acc or load_tile that not every invocation of the workgroup reaches",
    "V040": "the value of a float atomic is used",
    "V041": "a float-atomic buffer is also loaded, stored or given atomics of another kind",
    "V042": "invalid load_tile (arrays, types, shape, or a value that differs between invocations)",
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
        self.in_loop = False        # break/continue allowed here
        self.in_function = False    # validating a function body
        self.broken_decls = False   # a buffer's dtype or count is not even of the right kind

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
        f = self.facts()
        # which locals differ between invocations matters only to barriers and subgroups
        if f.barrier or f.subgroups or f.matmul:
            self.nonuniform = self.uniformity()
        self.block(self.p.body, "body", {}, set(), True, 0, top=True, grid=f.grid_sync)
        self.functions()
        if f.indirect:
            self.indirect()
        if f.specs:
            self.specs()
        if f.subgroups:
            self.subgroups(f.returns)
        if f.matmul:
            self.matmuls(f.returns)
        if f.float_atomics:
            self.float_atomics()
        return self.out

    def facts(self) -> _Needs:
        """Which of the program-wide checks apply, read from the program's facts (one walk,
        cached on the program for every later stage). Declarations too broken to derive
        facts from (V019) make every check apply, each finding out for itself."""
        if any(not isinstance(b.dtype, DataType) or not isinstance(b.count, int) for b in self.p.buffers):
            self.broken_decls = True
            body = self.p.body
            return _Needs(True, any(isinstance(n, N.Barrier) and n.ordering is MemoryOrdering.GRID_SYNC
                                    for n in N.walk_nodes(body)), True, True,
                          any(_in_subgroup(e) for e in N.walk_exprs(body)),
                          any(isinstance(n, N.Return) for n in N.walk_nodes(body)),
                          any(isinstance(n, N.MatMulAcc | N.LoadTile) for n in N.walk_nodes(body)),
                          False)   # float atomics need sane declarations (V019 refuses anyway)
        facts = facts_of(self.p)
        return _Needs(facts.barrier, facts.grid_sync, facts.indirect, bool(facts.specs),
                      bool(facts.subgroup_ops), facts.returns, bool(facts.matmul) or facts.tile_loads,
                      facts.float_atomics)

    # ---- float atomics (S36) ---------------------------------------------------------------
    def float_atomics(self) -> None:
        """A float atomic is a statement of its own (its value would expose the order the
        contributions arrived in: V040), and its buffer is touched by nothing else in the
        dispatch but float atomics of that one kind and ``buf_len`` (V041)."""
        p = self.p
        targets = {b.name for b in p.buffers if b.dtype.is_float}
        ops: dict[str, dict] = {}    # buffer -> {op: first location}
        mixed: list[tuple[str, str, str]] = []   # (location, buffer, what)
        used: list[tuple[str, E.Atomic]] = []
        sites = list(_all_nodes(p))
        for i, f in enumerate(p.functions):
            sites += list(_all_nodes(p, f.body, f"functions[{i}].body"))
        roots = [(loc, root, isinstance(n, N.Eval) and n.value is root)
                 for n, loc in sites for root in N.node_exprs(n)]
        roots += [(f"functions[{i}].result", f.result, False) for i, f in enumerate(p.functions)
                  if f.result is not None]
        for n, loc in sites:
            if isinstance(n, N.Store) and n.buffer in targets:
                mixed.append((loc, n.buffer, "stored to"))
        for loc, root, statement in roots:
            for e in E.walk(root):
                if isinstance(e, E.Atomic) and e.buffer in targets:
                    ops.setdefault(e.buffer, {}).setdefault(e.op, loc)
                    if not (statement and e is root):
                        used.append((loc, e))
                elif isinstance(e, E.Load) and e.buffer in targets:
                    mixed.append((loc, e.buffer, "loaded"))
        for loc, e in used:
            self.add("V040", loc, f"the value of atomic {e.op.name} on float buffer {e.buffer!r} is used.",
                     "make the float atomic a statement of its own (Node.expr(Expr.atomic(...)); in a "
                     "kernel, a line `atomic_add(buf, i, v)`) and read the buffer after the dispatch: "
                     "its old value would depend on the order the invocations ran in (S36).")
        for loc, name, what in mixed:
            if name in ops:
                self.add("V041", loc, f"buffer {name!r} gets float atomics and is also {what} in the "
                         "same dispatch.", "read or write it in a later dispatch (its exact total is "
                         "rounded once when the dispatch ends, S36), or accumulate into a separate "
                         "buffer.")
        for name, seen in ops.items():
            if len(seen) > 1:
                kinds = sorted(op.name for op in seen)
                self.add("V041", list(seen.values())[1], f"buffer {name!r} gets float atomics of several "
                         f"kinds ({', '.join(kinds)}).", "give each kind of float accumulation (ADD, "
                         "MIN, MAX) its own buffer: mixed, the result would depend on the order.")

    # ---- functions ---------------------------------------------------------------------
    def functions(self) -> None:
        seen: set[str] = set()
        for i, f in enumerate(self.p.functions):
            loc = f"functions[{i}]"
            if not NAME.match(f.name):
                self.add("V025", loc, f"function name {f.name!r} is not an identifier.",
                         "use letters, digits and underscores.")
            if f.name in seen:
                self.add("V032", loc, f"function {f.name!r} is declared twice.", "rename one of them.")
            seen.add(f.name)
            scope: dict[str, DataType] = {}
            for pname, ptype in f.params:
                if not _local_name(pname):
                    self.add("V025", loc, f"parameter name {pname!r} is not an identifier.",
                             "use letters, digits and underscores.")
                if pname in scope:
                    self.add("V015", loc, f"parameter {pname!r} appears twice.", "rename one of them.")
                if ptype not in VALUE_TYPES:
                    self.add("V003", loc, f"parameter {pname!r} has the storage-only type {ptype.value}.",
                             "declare it u32 or i32 (loads of narrow types widen to those).")
                scope[pname] = ptype
            self.in_function = True
            inner = dict(scope)
            self.block(f.body, f"{loc}.body", inner, set(), False, 0, scope_out=inner)
            if f.result is not None:
                self.expr(f.result, f"{loc}.result", inner, what="function result")
            self.in_function = False
        if not self.recursion() and not self.broken_decls:   # (V019 refuses the program anyway)
            self.inlined_size()

    def inlined_size(self) -> None:
        from .inline import INLINE_FIX, inlined_statements

        if inlined_statements(self.p) > MAX_NODES:
            self.add("V013", "functions", f"inlining every function call makes more than {MAX_NODES} "
                     "statements.", INLINE_FIX)

    def recursion(self) -> bool:
        calls: dict[str, set[str]] = {}
        for f in self.p.functions:
            found = {e.function for body in (f.body,) for e in N.walk_exprs(body) if isinstance(e, E.Call)}
            if f.result is not None:
                found |= {e.function for e in E.walk(f.result) if isinstance(e, E.Call)}
            calls[f.name] = found
        state: dict[str, int] = {}   # 1: on the walk's path, 2: done
        for root in calls:             # an iterative depth-first walk: chains of any length
            if state.get(root):
                continue
            path, stack = [root], [iter(sorted(calls[root]))]
            state[root] = 1
            while stack:
                callee = next(stack[-1], None)
                if callee is None:
                    state[path.pop()] = 2
                    stack.pop()
                elif state.get(callee) == 1:
                    cycle = " -> ".join(path[path.index(callee):] + [callee])
                    self.add("V033", "functions", f"functions call each other in a cycle: {cycle}.",
                             "rewrite the recursion as a loop (while_ with an iteration cap).")
                    return True
                elif not state.get(callee) and callee in calls:
                    state[callee] = 1
                    path.append(callee)
                    stack.append(iter(sorted(calls[callee])))
        return False

    def indirect(self) -> None:
        body = self.p.body
        for n, loc in ((n, loc) for n, loc in _all_nodes(self.p)):
            if not isinstance(n, N.IndirectDispatch):
                continue
            top = loc.startswith("body[") and loc.count("[") == 1
            i = int(loc[5:-1]) if top else -1
            ok_place = top and (i == 0 or (isinstance(body[i - 1], N.Barrier) and
                                           body[i - 1].ordering is MemoryOrdering.GRID_SYNC))
            if not ok_place:
                self.add("V037", loc, "indirect_dispatch is not at the start of a phase.",
                         "place it first in the program body or right after a grid_sync barrier.")
            decl = self.p.buffer(n.buffer)
            if decl is None or not decl.is_bound or decl.dtype is not DataType.U32:
                self.add("V037", loc, f"indirect_dispatch reads {n.buffer!r}, which is not a declared "
                         "u32 input or output buffer.", "read the grid from a u32 buffer bound to the "
                         "dispatch.")
            elif n.offset < 0 or (decl.count and n.offset + 3 > decl.count):
                self.add("V037", loc, f"indirect_dispatch reads words {n.offset}..{n.offset + 2} of "
                         f"{n.buffer!r} (count {decl.count}).", "use an offset with three words "
                         "inside the buffer.")

    def subgroups(self, returns: bool) -> None:
        """V028/V027 for a program that uses subgroup operations (``returns``: it has a
        return_ statement)."""
        if returns:
            self.add("V028", "body", "return_ in a program that uses subgroup operations.",
                     "guard the remaining work with Node.if_ instead: every lane of a subgroup must "
                     "reach each subgroup operation.")
        self._subgroup_uniform(self.p.body, "body", True)

    def _subgroup_uniform(self, body, loc: str, uniform: bool) -> None:
        for i, n in enumerate(body):
            here = f"{loc}[{i}]"
            if not uniform and any(_in_subgroup(e) for root in N.node_exprs(n) for e in E.walk(root)):
                self.add("V027", here, "subgroup operation under control flow that differs between "
                         "invocations.", "move it out of the divergent if/loop (every lane of the "
                         "subgroup must take part).")
            bodies = N.node_bodies(n)
            if bodies:
                u = self.inner_uniform(n, uniform, self.nonuniform)
                for label, sub in bodies:
                    self._subgroup_uniform(sub, f"{here}.{label}", u)

    def matmuls(self, returns: bool) -> None:
        """V039 for a program that uses matmul_acc or load_tile (``returns``: it has a return_
        statement)."""
        if returns:
            self.add("V039", "body", "return_ in a program that uses matmul_acc or load_tile.",
                     "guard the remaining work with Node.if_ instead: every invocation of the "
                     "workgroup must reach each matmul_acc and load_tile.")

    def specs(self) -> None:
        seen: dict[str, E.Spec] = {}
        for e in N.program_exprs(self.p):
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
            if not b.is_bound:
                kind = "workgroup buffer" if b.is_workgroup else "local array"
                maker = "workgroup" if b.is_workgroup else "local"
                if b.count <= 0:
                    self.add("V019", loc, f"{kind} {b.name!r} has count 0.",
                             f"give {kind}s a static element count.")
                if b.binding is not None:
                    self.add("V019", loc, f"{kind} {b.name!r} has a binding.",
                             f"declare it with BufferDecl.{maker}(name, count, dtype).")
                if b.is_local and b.count > MAX_LOCAL_ELEMENTS:
                    self.add("V019", loc, f"local array {b.name!r} has {b.count} elements (limit "
                             f"{MAX_LOCAL_ELEMENTS}).", "use a workgroup buffer or a global buffer "
                             "for large scratch.")
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
        """Whether ``e`` has one value across the workgroup's invocations (given the locals
        known to differ): every node of it is uniform by its kind's rule (`_UNIFORM`; kinds
        not there are uniform when their operands are)."""
        rules = _UNIFORM
        for sub in E.walk(e):
            rule = rules.get(type(sub))
            if rule is not None and not rule(self, sub, nonuniform):
                return False
        return True

    def inner_uniform(self, n: N.Node, uniform: bool, nu: set[str]) -> bool:
        """Whether the bodies of ``n`` run uniformly (and the locals it writes are uniform):
        it runs uniformly, its expressions are uniform, and, for a loop, no invocation
        leaves or restarts it early."""
        return uniform and all(self.uniform_expr(e, nu) for e in N.node_exprs(n)) and \
            not (isinstance(n, LOOPS) and any(jumps(sub) for _, sub in N.node_bodies(n)))

    def uniformity(self) -> set[str]:
        nonuniform: set[str] = set()
        while True:
            before = len(nonuniform)
            self._mark(self.p.body, True, nonuniform)
            if len(nonuniform) == before:
                return nonuniform

    def _mark(self, body, uniform: bool, nu: set[str]) -> None:
        for n in body:
            writes = WRITES_LOCAL[type(n)]
            bodies = N.node_bodies(n)
            if not writes and not bodies:
                continue
            u = self.inner_uniform(n, uniform, nu)
            if not u:
                nu.update(getattr(n, f) for f in writes)
            for _, sub in bodies:
                self._mark(sub, u, nu)

    # ---- statements ----------------------------------------------------------------
    def block(self, body, loc: str, scope: dict[str, DataType], loops: set[str], uniform: bool,
              depth: int, top: bool = False, grid: bool = False, in_loop: bool = False,
              scope_out: dict[str, DataType] | None = None) -> None:
        if depth > MAX_DEPTH:
            self.add("V012", loc, f"statements nest deeper than {MAX_DEPTH}.",
                     "flatten the control flow or split the program.")
            return
        scope = scope_out if scope_out is not None else dict(scope)
        saved, self.in_loop = self.in_loop, in_loop
        for i, n in enumerate(body):
            here = f"{loc}[{i}]"
            self.nodes += 1
            if self.nodes == MAX_NODES + 1:
                self.add("V013", here, f"program has more than {MAX_NODES} statements.",
                         "split it into several programs.")
            if self.nodes > MAX_NODES:
                break
            self.stmt(n, here, scope, loops, uniform, depth, top, grid)
        self.in_loop = saved

    def expr(self, e: E.Expr, loc: str, scope: dict[str, DataType], want: DataType | None = None,
             what: str = "expression") -> DataType | None:
        for sub in E.walk(e):
            if isinstance(sub, E.Var) and sub.name in self.phase_dead and sub.name not in scope:
                self.add("V018", loc, f"{sub.name!r} was declared before a grid_sync and used after it.",
                         "locals do not survive grid_sync (each phase is a separate dispatch); "
                         "recompute the value or pass it through a buffer.")
                return None
        if self.in_function and any(_in_subgroup(sub) for sub in E.walk(e)):
            self.add("V035", loc, "subgroup operation inside a function.",
                     "compute it in the program body and pass the value as an argument.")
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
        rule = _STMT.get(type(n))
        if rule is None:
            self.add("V003", loc, f"unknown statement kind {type(n).__name__}.",
                     "build statements with the vyre.ir.Node constructors.")
            return
        rule(self, n, _At(loc, scope, loops, uniform, depth, top, grid))

    # ---- one rule per statement kind (the table `_STMT`) -----------------------------
    def _let(self, n: N.Let, at: _At) -> None:
        loc, scope = at.loc, at.scope
        if not isinstance(n.name, str) or not _local_name(n.name):
            self.add("V025", loc, f"variable name {n.name!r} is not an identifier (or uses the "
                     "reserved prefix __vy).", "use letters, digits and underscores.")
            return
        if n.name in scope:
            self.add("V015", loc, f"{n.name!r} is already declared in an enclosing scope.",
                     "pick a new name, or use Node.assign to update it.")
        t = self.expr(n.value, loc, scope, what=f"value of {n.name!r}")
        scope[n.name] = t if t is not None else DataType.U32

    def _assign(self, n: N.Assign, at: _At) -> None:
        loc, scope = at.loc, at.scope
        if n.name not in scope:
            self.add("V004", loc, f"assignment to {n.name!r}, which is not declared here.",
                     f"declare it first with Node.let_bind({n.name!r}, ...).")
            self.expr(n.value, loc, scope)
            return
        if n.name in at.loops:
            self.add("V005", loc, f"assignment to loop variable {n.name!r}.",
                     "copy it into a new local with let_bind and change that.")
        self.expr(n.value, loc, scope, scope[n.name], what=f"value assigned to {n.name!r}")

    def _store(self, n: N.Store, at: _At) -> None:
        loc, scope = at.loc, at.scope
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
        self.expr(n.value, loc, scope, decl.dtype.value_type, f"value stored to {n.buffer!r}")

    def _if(self, n: N.If, at: _At) -> None:
        loc, scope = at.loc, at.scope
        self.expr(n.cond, loc, scope, DataType.BOOL, "if condition")
        u = at.uniform and self.uniform_expr(n.cond, self.nonuniform)
        self.block(n.then, f"{loc}.then", scope, at.loops, u, at.depth + 1, grid=at.grid, in_loop=self.in_loop)
        self.block(n.otherwise, f"{loc}.otherwise", scope, at.loops, u, at.depth + 1, grid=at.grid,
                   in_loop=self.in_loop)

    def _loop(self, n: N.Loop, at: _At) -> None:
        loc, scope = at.loc, at.scope
        if not isinstance(n.var, str) or not _local_name(n.var):
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
        u = at.uniform and self.uniform_expr(n.from_, self.nonuniform) and \
            self.uniform_expr(n.to, self.nonuniform) and not jumps(n.body)
        self.block(n.body, f"{loc}.body", inner, at.loops | {n.var}, u, at.depth + 1, grid=at.grid,
                   in_loop=True)

    def _while(self, n: N.While, at: _At) -> None:
        loc, scope = at.loc, at.scope
        self.expr(n.cond, loc, scope, DataType.BOOL, "while condition")
        cap = n.max_iterations
        if not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= 0xFFFFFFFF:
            self.add("V036", loc, f"while loop cap {cap!r} is not in 1..2**32-1.",
                     "pass max_iterations=n, the most iterations any invocation may need.")
        u = at.uniform and self.uniform_expr(n.cond, self.nonuniform) and not jumps(n.body)
        self.block(n.body, f"{loc}.body", scope, at.loops, u, at.depth + 1, grid=at.grid, in_loop=True)

    def _jump(self, n: N.Break | N.Continue, at: _At) -> None:
        if not self.in_loop:
            what = "break_" if isinstance(n, N.Break) else "continue_"
            self.add("V034", at.loc, f"{what} outside a loop.",
                     "use it inside Node.loop or Node.while_ (to end the invocation use return_).")

    def _indirect(self, n: N.IndirectDispatch, at: _At) -> None:
        if self.in_function:   # its place and buffer: `indirect`
            self.add("V035", at.loc, "indirect_dispatch inside a function.",
                     "place it at the start of a phase of the program body.")

    def _whole_workgroup(self, what: str, at: _At) -> None:
        """V035 / V039 for a statement the whole workgroup executes together."""
        if self.in_function:
            self.add("V035", at.loc, f"{what} inside a function.",
                     "place it in the program body, where the whole workgroup reaches it.")
        elif not at.uniform:
            self.add("V039", at.loc, f"{what} under control flow that differs between invocations.",
                     "move it out of the divergent if/loop: every invocation of the workgroup must "
                     "reach it (it acts as a barrier).")

    def _matmul(self, n: N.MatMulAcc, at: _At) -> None:
        loc = at.loc
        self._whole_workgroup("matmul_acc", at)
        decls = {}
        for role, name in (("d", n.d), ("a", n.a), ("b", n.b)):
            decl = self.p.buffer(name)
            if decl is None:
                self.add("V001", loc, f"matmul_acc {role}={name!r} is not a declared buffer.",
                         "declare it with BufferDecl.workgroup(name, count, dtype).")
                return
            if not decl.is_workgroup:
                self.add("V038", loc, f"matmul_acc {role}={name!r} is a {decl.access.value} buffer, not a "
                         "workgroup array.", "copy the tile into a BufferDecl.workgroup array first "
                         "(vyre.lib.matmul does this for whole matrices).")
                return
            decls[role] = decl
        d, a, b = decls["d"], decls["a"], decls["b"]
        if n.d in (n.a, n.b):
            self.add("V038", loc, f"matmul_acc writes {n.d!r}, which it also reads as an operand.",
                     "accumulate into a separate workgroup array.")
        ta, tb, td = a.dtype, b.dtype, d.dtype
        narrow = ta in MATMUL_BYTES and tb in MATMUL_BYTES
        wide = ta in MATMUL_WORDS and tb in MATMUL_WORDS
        if not (narrow or wide) or td not in MATMUL_WORDS:
            self.add("V038", loc, f"matmul_acc of {ta.value} x {tb.value} into {td.value}.",
                     "use u8/i8 operands (any mix) or u32/i32 operands, with a u32 or i32 "
                     "accumulator d.")
        shape = (n.m, n.n, n.k)
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in shape):
            self.add("V038", loc, f"matmul_acc shape m={n.m}, n={n.n}, k={n.k} has a size below 1.",
                     "give m, n and k as positive ints.")
            return
        for role, decl, need, what in (("d", d, n.m * n.n, "m*n"), ("a", a, n.m * n.k, "m*k"),
                                       ("b", b, n.n * n.k, "n*k")):
            if need > decl.count:
                self.add("V038", loc, f"matmul_acc needs {what} = {need} elements of {role}={decl.name!r}, "
                         f"which has {decl.count}.", f"declare {decl.name!r} with at least {need} "
                         "elements, or use a smaller tile.")

    def _tile(self, n: N.LoadTile, at: _At) -> None:
        loc, scope = at.loc, at.scope
        self._whole_workgroup("load_tile", at)
        for what, e in (("offset", n.offset), ("stride", n.stride), ("rows_in", n.rows_in), ("cols_in", n.cols_in)):
            self.expr(e, loc, scope, DataType.U32, f"load_tile {what}")
            if not self.uniform_expr(e, self.nonuniform):
                self.add("V042", loc, f"load_tile {what} can differ between the invocations of a workgroup.",
                         "compute it from workgroup_id, constants and values every invocation shares "
                         "(not local_id or a per-invocation load).")
        dst, src = self.p.buffer(n.dst), self.p.buffer(n.src)
        for role, name, decl in (("dst", n.dst, dst), ("src", n.src, src)):
            if decl is None:
                self.add("V001", loc, f"load_tile {role}={name!r} is not a declared buffer.",
                         "declare it in Program.wrapped(buffers=...).")
                return
        if not dst.is_workgroup:
            self.add("V042", loc, f"load_tile dst={n.dst!r} is a {dst.access.value} buffer, not a workgroup array.",
                     "declare the destination with BufferDecl.workgroup(name, count, dtype).")
        if not src.is_bound:
            self.add("V042", loc, f"load_tile src={n.src!r} is not a caller-backed buffer.",
                     "copy from a read, read_write or output buffer (copy workgroup arrays with stores).")
        if src.dtype is not dst.dtype:
            self.add("V042", loc, f"load_tile copies {src.dtype.value} elements into a {dst.dtype.value} array.",
                     "give the destination array the source buffer's element type.")
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in (n.rows, n.cols)):
            self.add("V042", loc, f"load_tile shape {n.rows}x{n.cols} has a size below 1.",
                     "give rows and cols as positive ints.")
        elif n.rows * n.cols > dst.count:
            self.add("V042", loc, f"load_tile needs rows*cols = {n.rows * n.cols} elements of {n.dst!r}, "
                     f"which has {dst.count}.", f"declare {n.dst!r} with at least {n.rows * n.cols} "
                     "elements, or load a smaller tile.")

    def _block(self, n: N.Block | N.Region, at: _At) -> None:
        self.block(n.body, f"{at.loc}.body", at.scope, at.loops, at.uniform, at.depth + 1, grid=at.grid,
                   in_loop=self.in_loop)

    def _return(self, n: N.Return, at: _At) -> None:
        if self.in_function:
            self.add("V035", at.loc, "return_ inside a function.",
                     "end the function by reaching its end; its result is the `result` expression.")
        elif at.grid:
            self.add("V017", at.loc, "return_ in a program that uses grid_sync.",
                     "guard the remaining work with Node.if_ instead of returning early.")

    def _barrier(self, n: N.Barrier, at: _At) -> None:
        loc = at.loc
        if self.in_function:
            self.add("V035", loc, "barrier inside a function.",
                     "place barriers in the program body, between calls.")
        elif not isinstance(n.ordering, MemoryOrdering):
            self.add("V003", loc, "barrier ordering is not a MemoryOrdering.",
                     "use MemoryOrdering.SEQ_CST or MemoryOrdering.GRID_SYNC.")
        elif n.ordering is MemoryOrdering.GRID_SYNC:
            if not at.top:
                self.add("V016", loc, "grid_sync inside nested control flow.",
                         "place grid_sync barriers only at the top level of the program body.")
            else:
                self.phase_dead |= set(at.scope)
                at.scope.clear()
        elif not at.uniform:
            self.add("V006", loc, "barrier under control flow that differs between invocations.",
                     "move the barrier out of the divergent if/loop, or make its condition "
                     "depend only on uniform values (literals, buf_len, wgid, uniform locals).")

    def _eval(self, n: N.Eval, at: _At) -> None:
        loc, scope = at.loc, at.scope
        if isinstance(n.value, E.Call):
            try:
                call_check(n.value, scope, self.p)
            except TypeFault as f:
                self.add(f.code, loc, f.message, f.fix)
            for a in n.value.args:
                self.expr(a, loc, scope)
        else:
            self.expr(n.value, loc, scope)


class _Needs(NamedTuple):
    """What the program uses that the program-wide checks look at (`_Validator.facts`)."""

    barrier: bool
    grid_sync: bool
    indirect: bool
    specs: bool
    subgroups: bool
    returns: bool
    matmul: bool
    float_atomics: bool


class _At(NamedTuple):
    """Where a statement is validated: its location, the visible locals (mutable: a `let`
    adds to them), the loop variables, whether control flow is uniform there, its nesting
    depth, whether it is at the top level, whether the program uses grid_sync."""

    loc: str
    scope: dict[str, DataType]
    loops: set[str]
    uniform: bool
    depth: int
    top: bool
    grid: bool


def _in_subgroup(e: E.Expr) -> bool:
    """Whether ``e`` is an operation of the subgroup (`Kind.subgroup`); a malformed value
    is none (the structural check reports it)."""
    k = KIND.get(type(e))
    return k is not None and k.subgroup


V = _Validator
# the rule of each statement kind (tests/ir/test_kind_tables.py: every kind has one)
_STMT: dict[type, Callable[[_Validator, Any, _At], None]] = {
    N.Let: V._let, N.Assign: V._assign, N.Store: V._store, N.If: V._if, N.Loop: V._loop,
    N.While: V._while, N.Break: V._jump, N.Continue: V._jump, N.IndirectDispatch: V._indirect,
    N.MatMulAcc: V._matmul, N.LoadTile: V._tile,
    N.Block: V._block, N.Region: V._block, N.Return: V._return, N.Barrier: V._barrier, N.Eval: V._eval,
}
# expression kinds that can differ between invocations, each with the rule saying when
# (every other kind is uniform when its operands are: `UNIFORM_BY_OPERANDS`)
_UNIFORM: dict[type, Callable[[_Validator, Any, set[str]], bool]] = {
    E.Id: lambda v, e, nu: e.kind is Builtin.WGID,
    E.Atomic: lambda v, e, nu: False,
    E.Subgroup: lambda v, e, nu: e.op is SubgroupOp.SIZE,
    E.Call: lambda v, e, nu: False,
    E.Var: lambda v, e, nu: e.name not in nu,
    E.Load: lambda v, e, nu: (d := v.p.buffer(e.buffer)) is not None and not d.writable,
}
# a pure kind (`Kind.pure`: no memory, no effect, no other invocation) without a rule: its
# operands decide; an impure kind needs a rule here (tests/ir/test_kind_tables.py)
UNIFORM_BY_OPERANDS = frozenset(k.cls for k in EXPR_KINDS if k.pure) - _UNIFORM.keys()


def check(program: Program) -> None:
    """Raise `ValidationError` if ``program`` has any diagnostic."""
    from .errors import ValidationError

    diags = validate(program)
    if diags:
        raise ValidationError(diags)
