"""Cross-dispatch fusion: decide whether a producer -> consumer pair may run as one program,
and build that program.

Legal pairs are elementwise: no workgroup memory, barriers, atomics or lid/wgid; every store
indexed by gid.x; the producer writes the linked intermediate once, unconditionally, at the
top level, never reads it and never returns early; the consumer reads the intermediate only at
gid.x. The fused program computes the intermediate into a local and gives the consumer
``select(gid.x < count, value, 0)`` in place of its load: exactly what it would have read,
out-of-bounds rule included, without the write and re-read of the intermediate buffer.
Concrete drivers compile the fused Program like any other.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vyre.ir import expr as E
from vyre.ir import kinds
from vyre.ir import node as N
from vyre.ir.kinds import NODE_KINDS, UnknownKind, kind_of
from vyre.ir.program import BufferDecl, Program
from vyre.ir.rewrite import map_expr
from vyre.ir.types import Builtin, DataType

from .errors import InvalidProgram


class FusionReject(enum.Enum):
    WORKGROUP_MISMATCH = "workgroup sizes differ"
    INVOCATION_CAP = "workgroup exceeds the backend's invocation cap"
    SHARED_MEMORY_BUDGET = "workgroup memory exceeds the backend's budget"
    OUTPUT_CONSUMED_ELSEWHERE = "the intermediate is read by something besides the consumer"
    NO_FLOW = "no producer output feeds a consumer input"
    NOT_ELEMENTWISE = "a program is not elementwise in the way fusion requires"


@dataclass(frozen=True)
class FusionCaps:
    max_invocations_per_workgroup: int
    max_shared_memory_bytes: int

    @staticmethod
    def of(backend) -> FusionCaps:
        return FusionCaps(backend.max_compute_invocations_per_workgroup(),
                          backend.device_profile().max_shared_memory_bytes)


@dataclass(frozen=True)
class FusionDecision:
    accepted: bool
    reason: FusionReject | None = None
    detail: str = ""

    def __bool__(self) -> bool:
        return self.accepted


@dataclass(frozen=True)
class Fused:
    """The fused program and how the original inputs and outputs map onto it."""

    program: Program
    producer_inputs: tuple[int, ...]    # fused input position of each producer input
    consumer_inputs: tuple[int | None, ...]  # ... of each consumer input (None: the intermediate)
    producer_outputs: tuple[int | None, ...]  # fused output position (None: the intermediate)
    consumer_outputs: tuple[int, ...]

    def inputs(self, producer_inputs: Sequence[Any], consumer_inputs: Sequence[Any]) -> list[Any]:
        out: list[Any] = [None] * len(self.program.inputs)
        for pos, x in zip(self.producer_inputs, producer_inputs):
            out[pos] = x
        for pos, x in zip(self.consumer_inputs, consumer_inputs):
            if pos is not None:
                out[pos] = x
        return out

    def consumer_results(self, outputs: Sequence[Any]) -> list[Any]:
        return [outputs[i] for i in self.consumer_outputs]


def _elementwise_problem(p: Program, who: str) -> str | None:
    if p.workgroup_buffers:
        return f"the {who} uses workgroup memory"
    if p.local_buffers or p.functions:
        return f"the {who} uses local arrays or functions"
    if any(isinstance(n, N.While | N.IndirectDispatch) for n in N.walk_nodes(p.body)):
        return f"the {who} has a while loop or an indirect dispatch"
    for n in N.walk_nodes(p.body):
        if isinstance(n, N.Barrier):
            return f"the {who} has a barrier ({n.ordering.value})"
        if kind_of(n).syncs:   # waits for its workgroup, as a barrier does
            return f"the {who} has a {kind_of(n).name} statement (it waits for the workgroup)"
        if isinstance(n, N.Store) and n.index != E.Expr.gid_x():
            return f"the {who} stores {n.buffer!r} at an index other than gid.x"
    for e in N.walk_exprs(p.body):
        if isinstance(e, E.Atomic):
            return f"the {who} uses atomics"
        if kind_of(e).subgroup:
            return f"the {who} uses subgroup operations"
        if isinstance(e, E.Id) and e.kind is not Builtin.GID:
            return f"the {who} uses {e.kind.value}"
    return None


def _link(producer: Program, consumer: Program, link: dict[str, str] | None) -> tuple[str, str] | None:
    if link:
        (c_in, p_out), = link.items()
        p, c = producer.buffer(p_out), consumer.buffer(c_in)
        if p is None or c is None or not p.is_output or c.is_output or p.dtype is not c.dtype:
            return None
        return c_in, p_out
    for c in consumer.inputs:
        p = producer.buffer(c.name)
        if p is not None and p.is_output and not c.is_output and p.dtype is c.dtype:
            return c.name, p.name
    return None


def decide(producer: Program, consumer: Program, caps: FusionCaps, *,
           link: dict[str, str] | None = None, consumed_elsewhere: frozenset[str] = frozenset()) -> FusionDecision:
    """Whether ``producer`` then ``consumer`` may be fused (``link``: {consumer input: producer
    output}; by default the same name). ``consumed_elsewhere`` names producer outputs someone
    else still reads."""
    if producer.workgroup_size != consumer.workgroup_size:
        return FusionDecision(False, FusionReject.WORKGROUP_MISMATCH,
                              f"{producer.workgroup_size} vs {consumer.workgroup_size}")
    if producer.invocations_per_workgroup > caps.max_invocations_per_workgroup:
        return FusionDecision(False, FusionReject.INVOCATION_CAP,
                              f"{producer.invocations_per_workgroup} > {caps.max_invocations_per_workgroup}")
    shared = producer.facts.workgroup_bytes + consumer.facts.workgroup_bytes
    if shared > caps.max_shared_memory_bytes:
        return FusionDecision(False, FusionReject.SHARED_MEMORY_BUDGET,
                              f"{shared} > {caps.max_shared_memory_bytes} bytes")
    linked = _link(producer, consumer, link)
    if linked is None:
        return FusionDecision(False, FusionReject.NO_FLOW, "no consumer input matches a producer output")
    c_in, p_out = linked
    if p_out in consumed_elsewhere:
        return FusionDecision(False, FusionReject.OUTPUT_CONSUMED_ELSEWHERE, p_out)
    for prog, who in ((producer, "producer"), (consumer, "consumer")):
        problem = _elementwise_problem(prog, who)
        if problem:
            return FusionDecision(False, FusionReject.NOT_ELEMENTWISE, problem)
    if producer.buffer(p_out).access.value != "output":
        return FusionDecision(False, FusionReject.NOT_ELEMENTWISE, f"{p_out!r} is read_write in the producer")
    if any(isinstance(n, N.Return) for n in N.walk_nodes(producer.body)):
        return FusionDecision(False, FusionReject.NOT_ELEMENTWISE, "the producer can return early")
    stores = [n for n in N.walk_nodes(producer.body) if isinstance(n, N.Store) and n.buffer == p_out]
    top = [n for n in producer.body if isinstance(n, N.Store) and n.buffer == p_out]
    if len(stores) != 1 or len(top) != 1:
        return FusionDecision(False, FusionReject.NOT_ELEMENTWISE,
                              f"the producer must store {p_out!r} exactly once, unconditionally")
    if any(isinstance(e, E.Load | E.BufLen) and e.buffer == p_out for e in N.walk_exprs(producer.body)):
        return FusionDecision(False, FusionReject.NOT_ELEMENTWISE, f"the producer reads {p_out!r}")
    for e in N.walk_exprs(consumer.body):
        if isinstance(e, E.Load) and e.buffer == c_in and e.index != E.Expr.gid_x():
            return FusionDecision(False, FusionReject.NOT_ELEMENTWISE,
                                  f"the consumer reads {c_in!r} at an index other than gid.x")
        if isinstance(e, E.BufLen) and e.buffer == c_in:
            return FusionDecision(False, FusionReject.NOT_ELEMENTWISE, f"the consumer asks buf_len({c_in!r})")
    return FusionDecision(True)


def _named(k: kinds.Kind) -> tuple[tuple[str, kinds.Role], ...]:
    """The fields of kind ``k`` that fusion renames: locals read and buffers."""
    return tuple((f.name, f.role) for f in k.fields if f.role in (kinds.LOCAL, kinds.BUFFER))


_NAMED = {k.cls: _named(k) for k in kinds.EXPR_KINDS}


class _Rename:
    def __init__(self, prefix: str, buffers: dict[str, str], replace_load: tuple[str, E.Expr] | None = None) -> None:
        self.prefix, self.buffers, self.replace_load = prefix, buffers, replace_load

    def expr(self, e: E.Expr) -> E.Expr:
        def fn(x: E.Expr) -> E.Expr:
            if self.replace_load and type(x) is E.Load and x.buffer == self.replace_load[0]:
                return self.replace_load[1]  # already in fused names: not mapped again
            named = _NAMED.get(type(x))
            if named is None:
                raise UnknownKind(x)
            if not named:
                return x
            return replace(x, **{f: self.prefix + getattr(x, f) if role == kinds.LOCAL else
                                 self.buffers[getattr(x, f)] for f, role in named})

        return map_expr(e, fn)

    def body(self, body: tuple[N.Node, ...], intermediate: str | None = None, local: str = "") -> tuple[N.Node, ...]:
        """``body`` renamed; a store to ``intermediate`` becomes ``let local = value``. One
        rule per statement kind (`RENAME`); a kind `decide` rejects, or an unknown one, raises."""
        out: list[N.Node] = []
        for n in body:
            rule = RENAME.get(type(n))
            if rule is None:
                raise UnknownKind(n)
            out.append(rule(self, n, intermediate, local))
        return tuple(out)

    def _store(self, n: N.Store, intermediate: str | None, local: str) -> N.Node:
        if n.buffer == intermediate:
            return N.Let(local, self.expr(n.value))
        return self.field(n, intermediate, local)

    def field(self, n: N.Node, intermediate: str | None, local: str) -> N.Node:
        """``n`` renamed by its row (`vyre.ir.kinds`): locals get the prefix, buffers their
        fused names, expressions and bodies are renamed, everything else is kept."""
        k = kind_of(n)
        out = []
        for f in k.fields:
            v = getattr(n, f.name)
            if f.role in (kinds.DECLARES, kinds.BINDS, kinds.LOCAL):
                v = self.prefix + v
            elif f.role == kinds.BUFFER:
                v = self.buffers[v]
            elif f.role == kinds.EXPR:
                v = self.expr(v)
            elif f.role == kinds.OPT:
                v = None if v is None else self.expr(v)
            elif f.role == kinds.ARGS:
                v = tuple(self.expr(a) for a in v)
            elif f.role == kinds.BODY:
                v = self.body(v)   # the intermediate store is top-level (`decide`)
            out.append(v)
        return k.cls(*out)


R = _Rename
# per statement kind, its renamed form in the fused program: by its row (`_Rename.field`), a
# store to the intermediate buffer by its own rule (tests/ir/test_kind_tables.py: every kind is
# here or in `RENAME_REJECTED`, the kinds `decide` never lets into a fused pair:
# `_elementwise_problem`: while loops, indirect dispatches and every kind that waits for the
# workgroup, `Kind.syncs`)
RENAME_REJECTED = frozenset({N.While, N.IndirectDispatch} | {k.cls for k in NODE_KINDS if k.syncs})
RENAME: dict[type, Callable[[_Rename, Any, str | None, str], N.Node]] = {
    **{k.cls: R.field for k in NODE_KINDS if k.cls not in RENAME_REJECTED}, N.Store: R._store}


def fuse(producer: Program, consumer: Program, caps: FusionCaps, *, link: dict[str, str] | None = None,
         consumed_elsewhere: frozenset[str] = frozenset()) -> Fused:
    """The fused program of an accepted pair; raises `InvalidProgram` with the reason otherwise."""
    d = decide(producer, consumer, caps, link=link, consumed_elsewhere=consumed_elsewhere)
    if not d:
        raise InvalidProgram(f"cannot fuse: {d.reason.value} ({d.detail}).",
                             "dispatch the two programs one after the other.")
    c_in, p_out = _link(producer, consumer, link)  # type: ignore[misc]
    inter = producer.buffer(p_out)
    pnames = {b.name: f"p_{b.name}" for b in producer.buffers}
    cnames = {b.name: f"c_{b.name}" for b in consumer.buffers}
    chosen = [(pnames, b) for b in producer.inputs]
    chosen += [(cnames, b) for b in consumer.inputs if b.name != c_in]
    chosen += [(pnames, b) for b in producer.outputs if b.name != p_out and not b.is_input]
    chosen += [(cnames, b) for b in consumer.outputs if not b.is_input]
    decls = [BufferDecl(names[b.name], i, b.access, b.dtype, b.count) for i, (names, b) in enumerate(chosen)]
    if inter.count:
        n_inter: E.Expr = E.Expr.u32(inter.count)
    else:
        runtime = [pnames[b.name] for b in producer.inputs if b.count == 0]
        if not runtime:
            raise InvalidProgram(f"the intermediate {p_out!r} has no size to fuse with.",
                                 "declare its count.")
        n_inter = E.BufLen(runtime[0])
        for name in runtime[1:]:
            n_inter = E.Expr.max(n_inter, E.BufLen(name))
    local = "fused_intermediate"
    zero = E.Expr.f32(0.0) if inter.dtype is DataType.F32 else (
        E.Expr.bool_(False) if inter.dtype is DataType.BOOL else E.Lit(inter.dtype, 0))
    replacement = E.Select(E.Expr.gid_x().lt(n_inter), E.Var(local), zero)
    body = _Rename("p_", pnames).body(producer.body, p_out, local) + \
        _Rename("c_", cnames, (c_in, replacement)).body(consumer.body)
    fused = Program(tuple(decls), producer.workgroup_size, body)
    ins = [b.name for b in fused.inputs]
    outs = [b.name for b in fused.outputs]
    return Fused(fused,
                 tuple(ins.index(pnames[b.name]) for b in producer.inputs),
                 tuple(None if b.name == c_in else ins.index(cnames[b.name]) for b in consumer.inputs),
                 tuple(None if b.name == p_out else outs.index(pnames[b.name]) for b in producer.outputs),
                 tuple(outs.index(cnames[b.name]) for b in consumer.outputs))


def run_pair(backend, producer: Program, consumer: Program, producer_inputs: Sequence[Any],
             consumer_inputs: Sequence[Any], config=None, *, link: dict[str, str] | None = None,
             consumed_elsewhere: frozenset[str] = frozenset()) -> tuple[list, FusionDecision]:
    """Run ``producer`` then ``consumer`` (whose linked input is the producer's output),
    fused into one dispatch when legal; returns the consumer's outputs and the decision."""
    decision = decide(producer, consumer, FusionCaps.of(backend), link=link,
                      consumed_elsewhere=consumed_elsewhere)
    grid_free = config is None or (config.grid_override is None and config.dispatch_grid is None
                                   and config.dispatch_elements is None)
    if decision and grid_free:
        f = fuse(producer, consumer, FusionCaps.of(backend), link=link, consumed_elsewhere=consumed_elsewhere)
        outs = backend.dispatch(f.program, f.inputs(producer_inputs, consumer_inputs), config)
        return f.consumer_results(outs), decision
    c_in, p_out = _link(producer, consumer, link) or (None, None)
    p_outs = backend.dispatch(producer, producer_inputs, config)
    inter = p_outs[[b.name for b in producer.outputs].index(p_out)] if p_out else None
    ins = [inter if b.name == c_in else x for b, x in zip(consumer.inputs, consumer_inputs)]
    return backend.dispatch(consumer, ins, config), decision


__all__ = ["FusionCaps", "FusionDecision", "FusionReject", "Fused", "decide", "fuse", "run_pair"]
