"""ProgramFacts: what every later stage asks about a Program, computed in one walk and
cached on the Program.

Drivers, the engine, the registry, the planner and the code generators all need the same
few facts (bound buffers in binding order, workgroup and local bytes, the ops used, the
buffers touched by atomics, whether there are barriers, loops, divisions, transcendentals,
subgroup operations, matrix multiply-accumulates, the outputs every lane overwrites). Each
is derived here, once per Program object, and read through ``program.facts`` (or
`facts_of`). Nothing else recomputes them: a fact written twice will diverge.

The walk covers the program body and every function body and result (a function is part of
the program whether or not a call reaches it: facts are conservative there). `fully_written`
then reads the body's top-level statements (in a program with a return statement, their
contents up to the first one holding it). A Program is
immutable, so the cached facts never go stale.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import expr as E
from . import node as N
from .kinds import EXPR_KINDS, OP_MEMBER
from .ops import OpId, expr_ops, node_op
from .types import TRANSCENDENTAL, BinOp, DataType, MemoryOrdering, SubgroupOp, UnOp

if TYPE_CHECKING:
    from .program import BufferDecl, Program


@dataclass(frozen=True)
class ProgramFacts:
    """The facts of one Program (see the module docstring). Built by `facts_of`."""

    bound: tuple[BufferDecl, ...]         # caller-backed buffers, binding order (the kernel ABI)
    workgroup_bytes: int                  # workgroup memory per workgroup
    local_bytes: int                      # per-invocation arrays, per invocation
    ops: tuple[OpId, ...]                 # every OpId used, once, in first-use order
    atomic_buffers: frozenset[str]        # buffers an atomic touches
    float_atomic_buffers: frozenset[str]  # f32/f16/bf16 buffers an atomic touches (S36)
    wide_atomics: bool                    # an atomic on a 64-bit buffer
    read: frozenset[str]                  # buffers loaded or touched by an atomic
    types: frozenset[DataType]            # every type a buffer, literal, cast, bitcast,
                                          # specialization constant or function parameter names
    division: bool                        # any DIV/MOD (a signed division may fault)
    transcendentals: frozenset[UnOp | BinOp]          # the correctly rounded ops used (S13)
    looped_transcendentals: frozenset[UnOp | BinOp]   # those evaluated inside a Loop or While
    subgroup_ops: frozenset[SubgroupOp]
    barrier: bool                         # a workgroup barrier (not a grid sync)
    grid_sync: bool
    loops: bool                           # any Loop or While
    while_loop: bool                      # a While (its iteration cap may fault)
    indirect: bool                        # an IndirectDispatch statement
    returns: bool                         # a Return statement (an invocation may end early)
    matmul: frozenset[tuple[DataType, DataType]]  # (a, b) element types of each matmul_acc
    tile_loads: bool                      # a LoadTile statement (copies a tile into workgroup memory)
    specs: tuple[tuple[str, E.Spec], ...]  # specialization constants: first use of each name
    statements: int                       # statements of the body and every function body
    body_statements: tuple[int, ...]      # per body (`N.program_bodies` order): its statements
    body_calls: tuple[tuple[str, ...], ...]  # per body: the functions its calls name (a
                                          # function's result included), once per call
    assigned: frozenset[str]              # locals some Assign statement writes
    stored: frozenset[str]                # buffers some Store statement writes
    fresh_base: int                       # the largest k of a local named ``__vy<k>_...`` (an
                                          # earlier inlining's), 0 if none: `vyre.ir.inline`
    fully_written: frozenset[str]         # outputs every lane overwrites at gid.x (`fully_written`)

    @functools.cached_property
    def op_set(self) -> frozenset[OpId]:
        """`ops` as a set, for membership tests."""
        return frozenset(self.ops)

    @property
    def transcendental(self) -> bool:
        """Whether a correctly rounded op (S13) is used."""
        return bool(self.transcendentals)

    @property
    def atomics(self) -> bool:
        """Whether any atomic operation is used."""
        return bool(self.atomic_buffers)

    @property
    def float_atomics(self) -> bool:
        """Whether any atomic accumulates into a float buffer (S36)."""
        return bool(self.float_atomic_buffers)

    @property
    def uses_wide(self) -> bool:
        """Whether a 64-bit integer type appears."""
        return any(t.is_wide for t in self.types)

    @property
    def uses_half(self) -> bool:
        """Whether f16 or bf16 appears."""
        return any(t.is_half for t in self.types)


def facts_of(program: Program) -> ProgramFacts:
    """The facts of ``program``, computed on first use and cached on it."""
    cached = program.__dict__.get("_vyre_facts")
    if cached is None:
        cached = _compute(program)
        program.__dict__["_vyre_facts"] = cached
    return cached


class _Acc:
    """What one walk accumulates (the per-kind rules below write into it)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.ops: dict[OpId, None] = {}   # insertion-ordered set
        self.types: set[DataType] = set()
        self.atomic: set[str] = set()
        self.float_atomic: set[str] = set()
        self.read: set[str] = set()
        self.specs: dict[str, E.Spec] = {}
        self.flags: set[str] = set()      # the boolean facts that hold
        self.assigned: set[str] = set()
        self.stored: set[str] = set()
        self.fresh = 0
        self.matmul: set[tuple[DataType, DataType]] = set()


_FRESH = re.compile(r"__vy(\d+)_")
_GID_X = E.Expr.gid_x()


def _declares(a: _Acc, name: str) -> None:
    if name.startswith("__vy") and (m := _FRESH.match(name)):
        a.fresh = max(a.fresh, int(m.group(1)))


def _barrier(a: _Acc, n: N.Barrier) -> None:
    a.flags.add("grid_sync" if n.ordering is MemoryOrdering.GRID_SYNC else "barrier")


def _matmul(a: _Acc, n: N.MatMulAcc) -> None:
    da, db = a.program.buffer(n.a), a.program.buffer(n.b)
    if da is not None and db is not None:
        a.matmul.add((da.dtype, db.dtype))


def _atomic(a: _Acc, e: E.Atomic) -> None:
    a.read.add(e.buffer)
    a.atomic.add(e.buffer)
    decl = a.program.buffer(e.buffer)
    if decl is not None and decl.dtype.is_wide:
        a.flags.add("wide_atomics")
    if decl is not None and decl.dtype.is_float:
        a.float_atomic.add(e.buffer)


def _typed(a: _Acc, e: Any) -> None:
    a.types.add(e.dtype)
    a.ops[f"vyre.dtype.{e.dtype.value}"] = None


def _spec(a: _Acc, e: E.Spec) -> None:
    a.types.add(e.dtype)
    a.specs.setdefault(e.name, e)


#: the statement kinds that set a fact (every other kind adds only its op id)
NODE_FACTS: dict[type, Callable[[_Acc, Any], None]] = {
    N.Barrier: _barrier,
    N.Loop: lambda a, n: (a.flags.add("loops"), _declares(a, n.var)),
    N.Let: lambda a, n: _declares(a, n.name),
    N.While: lambda a, n: a.flags.update(("loops", "while_loop")),
    N.IndirectDispatch: lambda a, n: a.flags.add("indirect"),
    N.Return: lambda a, n: a.flags.add("returns"),
    N.Assign: lambda a, n: a.assigned.add(n.name),
    N.Store: lambda a, n: a.stored.add(n.buffer),
    N.MatMulAcc: _matmul,
    N.LoadTile: lambda a, n: (a.read.add(n.src), a.flags.add("tile_loads")),
}
#: the expression kinds that set a fact
EXPR_FACTS: dict[type, Callable[[_Acc, Any], None]] = {
    E.Bin: lambda a, e: a.flags.add("division") if e.op in (BinOp.DIV, BinOp.MOD) else None,
    E.Load: lambda a, e: a.read.add(e.buffer),
    E.Atomic: _atomic,
    E.Spec: _spec,
}
# a kind naming a value type (a literal, a cast, a bit cast: a `dtype` field of type
# DataType, by its row) adds the type and its op id
EXPR_FACTS.update({k.cls: _typed for k in EXPR_KINDS if k.cls not in EXPR_FACTS
                   and any(f.name == "dtype" and f.type is DataType for f in k.fields)})


def _compute(program: Program) -> ProgramFacts:
    a = _Acc(program)
    ops = a.ops
    wg_bytes = local_bytes = 0
    bound = []
    for b in program.buffers:
        ops[f"vyre.dtype.{b.dtype.value}"] = None
        a.types.add(b.dtype)
        if b.is_workgroup:
            ops["vyre.buffer.workgroup"] = None
            wg_bytes += b.count * b.dtype.size
        elif b.is_local:
            ops["vyre.buffer.local"] = None
            local_bytes += b.count * b.dtype.size
        else:
            bound.append(b)
    bound.sort(key=lambda b: b.binding)
    roots: list[tuple[int, E.Expr]] = []    # (the body it belongs to, an expression root)
    node_rule = NODE_FACTS.get
    sizes: list[int] = []
    for k, body in enumerate(N.program_bodies(program)):
        size = 0
        for node in N.walk_nodes(body):
            size += 1
            ops[node_op(node)] = None
            rule = node_rule(type(node))
            if rule is not None:
                rule(a, node)
            roots.extend((k, r) for r in N.node_exprs(node))
        sizes.append(size)
    for k, f in enumerate(program.functions, 1):
        for _, ptype in f.params:
            ops[f"vyre.dtype.{ptype.value}"] = None
            a.types.add(ptype)
        if f.result is not None:
            roots.append((k, f.result))
    calls: list[list[str]] = [[] for _ in sizes]
    expr_rule = EXPR_FACTS.get
    for k, root in roots:
        for e in E.walk(root):
            for op in expr_ops(e):
                ops[op] = None
            rule = expr_rule(type(e))
            if rule is not None:
                rule(a, e)
            if type(e) is E.Call:
                calls[k].append(e.function)
    has = a.flags.__contains__
    read = frozenset(a.read)
    crops = frozenset(m for op in ops if (m := OP_MEMBER.get(op)) is not None and m in TRANSCENDENTAL)
    looped = frozenset(e.op for body in N.program_bodies(program) for n in N.walk_nodes(body)
                       if isinstance(n, N.Loop | N.While) for e in N.walk_exprs(n.body)
                       if isinstance(e, E.Un | E.Bin) and e.op in TRANSCENDENTAL) if crops and has("loops") else frozenset()
    return ProgramFacts(
        bound=tuple(bound), workgroup_bytes=wg_bytes, local_bytes=local_bytes, ops=tuple(ops),
        atomic_buffers=frozenset(a.atomic), float_atomic_buffers=frozenset(a.float_atomic),
        wide_atomics=has("wide_atomics"), read=read,
        types=frozenset(a.types), division=has("division"),
        transcendentals=crops, looped_transcendentals=looped,
        subgroup_ops=frozenset(m for op in ops if isinstance(m := OP_MEMBER.get(op), SubgroupOp)),
        barrier=has("barrier"), grid_sync=has("grid_sync"),
        loops=has("loops"), while_loop=has("while_loop"), indirect=has("indirect"),
        returns=has("returns"), matmul=frozenset(a.matmul),
        tile_loads=has("tile_loads"), specs=tuple(a.specs.items()), statements=sum(sizes),
        body_statements=tuple(sizes), body_calls=tuple(tuple(c) for c in calls),
        assigned=frozenset(a.assigned), stored=frozenset(a.stored), fresh_base=a.fresh,
        fully_written=_fully_written(program, read, has("returns")))


def _fully_written(program: Program, read: frozenset[str], returns: bool) -> frozenset[str]:
    """OUTPUT buffers that a top-level, unconditional ``store(buf, gid.x, v)`` writes before
    any statement that can end an invocation early, and that the program never reads (no load,
    no atomic): every lane with gid.x < count then writes its own element and no stale value
    can be observed, so a grid covering ``count`` may skip zeroing the buffer first. Only the
    top-level statements are looked at, and only a program with a return (``returns``) has
    their contents searched, up to the first one holding it."""
    out = set()
    for n in program.body:
        if returns and any(type(s) is N.Return for s in N.walk_nodes((n,))):
            break
        if type(n) is N.Store and n.index == _GID_X:
            decl = program.buffer(n.buffer)
            if decl is not None and decl.access.value == "output" and n.buffer not in read:
                out.add(n.buffer)
    return frozenset(out)
