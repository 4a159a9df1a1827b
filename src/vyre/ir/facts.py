"""ProgramFacts: what every later stage asks about a Program, computed in one walk and
cached on the Program.

Drivers, the engine, the registry, the planner and the code generators all need the same
few facts (bound buffers in binding order, workgroup and local bytes, the ops used, the
buffers touched by atomics, whether there are barriers, loops, divisions, transcendentals,
subgroup operations). Each is derived here, once per Program object, and read through
``program.facts`` (or `facts_of`). Nothing else recomputes them: a fact written twice will
diverge.

The walk covers the program body and every function body and result (a function is part of
the program whether or not a call reaches it: facts are conservative there). A Program is
immutable, so the cached facts never go stale.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import expr as E
from . import node as N
from .ops import OpId, expr_ops, node_op
from .types import TRANSCENDENTAL, BinOp, DataType, MemoryOrdering, SubgroupOp

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
    wide_atomics: bool                    # an atomic on a 64-bit buffer
    read: frozenset[str]                  # buffers loaded or touched by an atomic
    types: frozenset[DataType]            # every type a buffer, literal, cast or bitcast names
    division: bool                        # any DIV/MOD (a signed division may fault)
    transcendental: bool
    subgroup_ops: frozenset[SubgroupOp]
    barrier: bool                         # a workgroup barrier (not a grid sync)
    grid_sync: bool
    loops: bool                           # any Loop or While
    while_loop: bool                      # a While (its iteration cap may fault)
    indirect: bool                        # an IndirectDispatch statement
    returns: bool                         # a Return statement (an invocation may end early)
    specs: tuple[tuple[str, E.Spec], ...]  # specialization constants: first use of each name

    @functools.cached_property
    def op_set(self) -> frozenset[OpId]:
        """`ops` as a set, for membership tests."""
        return frozenset(self.ops)

    @property
    def atomics(self) -> bool:
        """Whether any atomic operation is used."""
        return bool(self.atomic_buffers)

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


def _compute(program: Program) -> ProgramFacts:
    ops: dict[OpId, None] = {}   # insertion-ordered set
    types: set[DataType] = set()
    wg_bytes = local_bytes = 0
    bound = []
    for b in program.buffers:
        ops[f"vyre.dtype.{b.dtype.value}"] = None
        types.add(b.dtype)
        if b.is_workgroup:
            ops["vyre.buffer.workgroup"] = None
            wg_bytes += b.count * b.dtype.size
        elif b.is_local:
            ops["vyre.buffer.local"] = None
            local_bytes += b.count * b.dtype.size
        else:
            bound.append(b)
    bound.sort(key=lambda b: b.binding)
    barrier = grid_sync = loops = while_loop = indirect = returns = False
    roots: list[E.Expr] = []
    for body in N.program_bodies(program):
        for node in N.walk_nodes(body):
            ops[node_op(node)] = None
            t = type(node)
            if t is N.Barrier:
                if node.ordering is MemoryOrdering.GRID_SYNC:
                    grid_sync = True
                else:
                    barrier = True
            elif t is N.Loop:
                loops = True
            elif t is N.While:
                loops = while_loop = True
            elif t is N.IndirectDispatch:
                indirect = True
            elif t is N.Return:
                returns = True
            roots.extend(N.node_exprs(node))
    for f in program.functions:
        for _, ptype in f.params:
            ops[f"vyre.dtype.{ptype.value}"] = None
        if f.result is not None:
            roots.append(f.result)
    division = transcendental = wide_atomics = False
    atomic: set[str] = set()
    read: set[str] = set()
    subgroups: set[SubgroupOp] = set()
    specs: dict[str, E.Spec] = {}
    by_name = program.buffer
    for root in roots:
        for e in E.walk(root):
            for op in expr_ops(e):
                ops[op] = None
            t = type(e)
            if t is E.Bin:
                division = division or e.op in (BinOp.DIV, BinOp.MOD)
                transcendental = transcendental or e.op in TRANSCENDENTAL
            elif t is E.Un:
                transcendental = transcendental or e.op in TRANSCENDENTAL
            elif t is E.Load:
                read.add(e.buffer)
            elif t is E.Atomic:
                read.add(e.buffer)
                atomic.add(e.buffer)
                decl = by_name(e.buffer)
                wide_atomics = wide_atomics or (decl is not None and decl.dtype.is_wide)
            elif t is E.Subgroup:
                subgroups.add(e.op)
            elif t is E.Spec:
                types.add(e.dtype)
                specs.setdefault(e.name, e)
            elif t is E.Lit or t is E.Cast or t is E.Bitcast:
                types.add(e.dtype)
                ops[f"vyre.dtype.{e.dtype.value}"] = None
    return ProgramFacts(
        bound=tuple(bound), workgroup_bytes=wg_bytes, local_bytes=local_bytes, ops=tuple(ops),
        atomic_buffers=frozenset(atomic), wide_atomics=wide_atomics, read=frozenset(read),
        types=frozenset(types), division=division, transcendental=transcendental,
        subgroup_ops=frozenset(subgroups), barrier=barrier, grid_sync=grid_sync, loops=loops,
        while_loop=while_loop, indirect=indirect, returns=returns, specs=tuple(specs.items()))
