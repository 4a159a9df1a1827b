"""Partition legality: may one dispatch be split by workgroup ranges (along x) across devices
and the outputs merged into the reference's bytes? An inspectable decision with reasons, like
the fusion decisions (`vyre.driver.fusion`).

A program is partitioned only when every output is merged exactly:

* ``range``: every store to the buffer is at ``gid.x * k + j`` with ``0 <= j < k`` provable
  (range analysis), and nothing reads it — workgroups ``[w0, w1)`` own elements
  ``[w0 * wg_x * k, w1 * wg_x * k)``: the merge takes each partition's own range;
* ``combine``: the buffer is touched only by commutative integer atomics (ADD, OR, AND, XOR,
  MIN, MAX) of one kind whose results are unused (a histogram) — the merge folds the partial
  buffers (wrapping addition for ADD) onto the initial contents.

Anything else keeps the dispatch on one device, with the reason recorded: grid_sync (a
phase reads what every workgroup wrote), indirect dispatch, outputs read by the program,
stores not provably owned by the storing workgroup (racy or cross-workgroup), float atomics
(S36: rounded once over the whole dispatch) or non-commutative atomics, atomics whose old value is used, a y/z grid or a ``gid.y``/``gid.z``
dependence (partitions split x only).

`Partition.offset_program` gives the program each partition runs: the same program with its
``wgid.x`` (and so ``gid.x``) offset by a workgroup count read from one extra input buffer, so
each device compiles it once for every partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import BufferDecl, Program
from vyre.ir.rewrite import map_program
from vyre.ir.types import AtomicOp, BinOp, Builtin, DataType

OFFSET_BUFFER = "vy_partition_offset"
COMBINING = {AtomicOp.ADD, AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR, AtomicOp.MIN, AtomicOp.MAX}


@dataclass(frozen=True)
class Merge:
    """How one output's partial results become the whole: ``kind`` is "range" (``stride``
    elements per invocation) or "combine" (``op`` folds the partial buffers)."""

    buffer: str
    kind: str
    stride: int = 1
    op: AtomicOp | None = None


@dataclass
class PartitionDecision:
    """Whether a program may be split by workgroup ranges, how each output merges, and why
    not when it may not."""

    partitionable: bool
    merges: dict[str, Merge] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    def explain(self) -> str:
        if self.partitionable:
            parts = ", ".join(f"{m.buffer}: {m.kind}" + (f" x{m.stride}" if m.kind == "range" else f" {m.op.value}")
                              for m in self.merges.values())
            return f"partitionable by workgroup ranges ({parts})"
        return "runs on one device: " + "; ".join(self.reasons)


def _affine(e: E.Expr, lets: dict[str, E.Expr], depth: int = 0) -> tuple[int, int, int] | None:
    """``e`` as ``k * gid.x + [lo, hi]`` (k >= 0, u32, no wrap), or None."""
    if depth > 32:
        return None
    if isinstance(e, E.Id) and e.kind is Builtin.GID and e.axis == 0:
        return (1, 0, 0)
    if isinstance(e, E.Lit) and e.dtype is DataType.U32:
        return (0, e.bits, e.bits)
    if isinstance(e, E.Id) and e.kind is Builtin.LID:
        return None
    if isinstance(e, E.Var) and e.name in lets:
        return _affine(lets[e.name], lets, depth + 1)
    if isinstance(e, E.Bin):
        a, b = _affine(e.left, lets, depth + 1), _affine(e.right, lets, depth + 1)
        if a is None or b is None:
            return None
        if e.op is BinOp.ADD:
            return (a[0] + b[0], a[1] + b[1], a[2] + b[2])
        if e.op is BinOp.MUL:
            if a[0] == 0 and a[1] == a[2]:
                a, b = b, a
            if b[0] == 0 and b[1] == b[2]:
                c = b[1]
                return (a[0] * c, a[1] * c, a[2] * c)
        if e.op is BinOp.MOD and a[0] == 0 and b[0] == 0 and b[1] == b[2] and b[1] > 0:
            return (0, 0, min(a[2], b[1] - 1))
        if e.op is BinOp.BITAND and a[0] == 0 and b[0] == 0:
            return (0, 0, min(a[2], b[2]))
    return None


def decide(program: Program) -> PartitionDecision:
    """The partition decision for ``program`` (see the module docstring); functions are
    inlined first (`vyre.ir.inline`), so their stores and atomics count."""
    from vyre.ir.inline import inline

    program = inline(program)
    d = PartitionDecision(False)
    why = d.reasons
    facts = program.facts   # of the inlined program: its body only
    nodes = list(N.walk_nodes(program.body))
    if facts.grid_sync:
        why.append("grid_sync: a later phase reads what every workgroup wrote")
    if facts.indirect:
        why.append("an indirect dispatch sets a phase's grid")
    exprs = list(N.walk_exprs(program.body))
    if any(isinstance(e, E.Id) and e.axis != 0 and e.kind is not Builtin.LID for e in exprs):
        why.append("the program uses gid/wgid on y or z (partitions split x only)")
    lets: dict[str, E.Expr] = {}
    assigned = facts.assigned
    for n in nodes:
        if isinstance(n, N.Let) and n.name not in assigned:
            lets[n.name] = n.value if n.name not in lets else E.Var("__vy_rebound__")
    outputs = {b.name: b for b in program.outputs}
    loaded = {e.buffer for e in exprs if isinstance(e, E.Load)} & set(outputs)   # buf_len is the same everywhere
    atomics: dict[str, set] = {}
    used_atomic = set()
    for n in nodes:
        for root in N.node_exprs(n):
            for e in E.walk(root):
                if isinstance(e, E.Atomic):
                    atomics.setdefault(e.buffer, set()).add(e.op)
                    if not (isinstance(n, N.Eval) and n.value is e):
                        used_atomic.add(e.buffer)
    stores: dict[str, list[E.Expr]] = {}
    for n in nodes:
        if isinstance(n, N.Store):
            stores.setdefault(n.buffer, []).append(n.index)
    for name in outputs:
        if name in loaded and name not in atomics:
            why.append(f"{name!r} is read by the program (a partition could read another's elements)")
            continue
        if name in atomics:
            ops = atomics[name]
            if outputs[name].dtype.is_float:
                why.append(f"float atomics on {name!r}: their exact total is rounded once over the whole "
                           "dispatch (S36), so partial results cannot be merged")
            elif name in stores or name in loaded:
                why.append(f"{name!r} mixes atomics with loads or stores")
            elif name in used_atomic:
                why.append(f"the old values of atomics on {name!r} are used")
            elif len(ops) != 1 or not ops <= COMBINING:
                why.append(f"{name!r} has atomics of several kinds or non-commutative ones ({sorted(o.value for o in ops)})")
            else:
                d.merges[name] = Merge(name, "combine", op=next(iter(ops)))
            continue
        strides = set()
        for index in stores.get(name, []):
            aff = _affine(index, lets)
            if aff is None or aff[0] == 0 or not 0 <= aff[1] <= aff[2] < aff[0]:
                why.append(f"a store to {name!r} at {_short(index)} is not provably owned by the storing "
                           "invocation (gid.x * k + j with 0 <= j < k)")
                break
            strides.add(aff[0])
        else:
            if len(strides) > 1:
                why.append(f"stores to {name!r} use several strides ({sorted(strides)})")
            else:
                d.merges[name] = Merge(name, "range", stride=strides.pop() if strides else 1)
    d.partitionable = not why
    return d


def _short(e: E.Expr) -> str:
    text = repr(e)
    return text if len(text) < 60 else text[:57] + "..."


def offset_program(program: Program) -> Program:
    """``program`` with ``wgid.x`` and ``gid.x`` offset by a workgroup count read from one
    extra read buffer (`OFFSET_BUFFER`, declared last, one u32)."""
    wg = program.workgroup_size[0]
    off = E.Load(OFFSET_BUFFER, E.Expr.u32(0))

    def shift(e: E.Expr) -> E.Expr:
        if isinstance(e, E.Id) and e.axis == 0 and e.kind is Builtin.WGID:
            return E.Bin(BinOp.ADD, e, off)
        if isinstance(e, E.Id) and e.axis == 0 and e.kind is Builtin.GID:
            return E.Bin(BinOp.ADD, e, E.Bin(BinOp.MUL, off, E.Expr.u32(wg)))
        return e

    binding = max((b.binding for b in program.buffers if b.binding is not None), default=-1) + 1
    extra = BufferDecl.read(OFFSET_BUFFER, binding, DataType.U32, 1)
    shifted = map_program(program, shift)
    return Program(program.buffers + (extra,), program.workgroup_size, shifted.body, shifted.functions)


def split(workgroups: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous, nearly equal workgroup ranges covering ``[0, workgroups)``."""
    parts = max(1, min(parts, workgroups))
    bounds = [workgroups * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i] < bounds[i + 1]]


def owned(program: Program, decision: PartitionDecision, w0: int, w1: int,
          counts: dict[str, int]) -> list[tuple[int, int] | None]:
    """Per output, the element range workgroups ``[w0, w1)`` own (a range merge), or None
    (a combine merge needs the whole partial buffer). A partition returns only these."""
    wg = program.workgroup_size[0]
    out: list[tuple[int, int] | None] = []
    for decl in program.outputs:
        m = decision.merges[decl.name]
        if m.kind != "range":
            out.append(None)
            continue
        n = counts[decl.name]
        lo, hi = min(w0 * wg * m.stride, n), min(w1 * wg * m.stride, n)
        out.append((lo, hi))
    return out


def merge(program: Program, decision: PartitionDecision, ranges: list[tuple[int, int]],
          partials: list[list[bytes]], initial: dict[str, bytes], counts: dict[str, int]) -> list[bytes]:
    """The outputs of the whole dispatch from each partition's outputs (in ``ranges`` order):
    for range merges each partition's owned elements (`owned`), for combine merges its whole
    partial buffer. ``initial`` holds the starting bytes of READ_WRITE outputs (OUTPUT ones
    start at zero); ``counts`` the element count of every output."""
    out: list[bytes] = []
    for i, decl in enumerate(program.outputs):
        m = decision.merges[decl.name]
        dt = np.dtype(decl.dtype.storage)
        n = counts[decl.name]
        if m.kind == "range":
            whole = np.frombuffer(initial[decl.name], dt).copy() if decl.name in initial else np.zeros(n, dt)
            for (w0, w1), part in zip(ranges, partials):
                lo, hi = owned(program, decision, w0, w1, counts)[i]  # type: ignore[misc]
                if lo < hi:
                    whole[lo:hi] = np.frombuffer(part[i], dt)
            out.append(whole.tobytes())
            continue
        first = np.frombuffer(partials[0][i], dt)
        base = np.frombuffer(initial.get(decl.name, b""), dt) if decl.name in initial else np.zeros_like(first)
        acc = base.copy()
        for part in partials:
            x = np.frombuffer(part[i], dt)
            if m.op is AtomicOp.ADD:
                acc = acc + (x - base)            # unsigned wrap-around arithmetic
            elif m.op is AtomicOp.XOR:
                acc = acc ^ (x ^ base)
            elif m.op is AtomicOp.OR:
                acc = acc | x
            elif m.op is AtomicOp.AND:
                acc = acc & x
            else:
                view = np.dtype(decl.dtype.numpy)
                a, b = acc.view(view), x.view(view)
                acc = (np.minimum(a, b) if m.op is AtomicOp.MIN else np.maximum(a, b)).view(dt)
        out.append(np.ascontiguousarray(acc).tobytes())
    return out
