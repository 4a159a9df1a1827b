"""Float atomics (S36) for compiled targets: an IR -> IR rewrite onto u32 atomics.

A program whose float buffers take ``atomic(ADD / MIN / MAX)`` statements becomes one that
only uses u32 atomics, so every target (WGSL included, which has neither float nor 64-bit
atomics) runs it, with the reference's bytes:

* each float-atomic buffer ``T`` gets a hidden u32 *scratch* buffer (`Scratch`: ``words``
  u32 words per element of ``T``), bound after the program's own buffers. The engine sizes
  it from ``T``'s element count, zeroes it before every dispatch and never returns it
  (`vyre.driver.engine.plan.Prepared`);
* ``ADD``: each contribution is decoded and added to its element's superaccumulator (S34's
  recipe, `vyre.ir.superacc`): two or three u32 atomic adds of 16-bit chunks, a carry on a
  wrap, and an atomic OR of a flags word for NaN, infinities and zeros (a zero changes no
  digit but makes the element *contributed*, see S36). Integer addition is associative, so
  the final words are the same whatever the order;
* ``MIN``/``MAX``: a contribution becomes an order-preserving u32 key (canonicalised per S9;
  -0 below +0; NaN the largest key, since NaN wins either way) and takes a u32 atomic MAX
  (MIN stores inverted keys, so the zeroed scratch means "no contribution" for both);
* a final phase (after a grid_sync) gives one invocation to each element of the largest
  target: an element with a contribution becomes, for ADD, its initial value plus the exact
  total, rounded once (`superacc.round_digits`); for MIN/MAX the S10 minimum/maximum of its
  initial value and the decoded key. The engine launches that phase over its own grid
  (one invocation per element, whatever the dispatch's grid: `Kernel.scratch`).

Validation (V040, V041) guarantees what the rewrite relies on: every float atomic is a
statement of its own, and its buffer is neither loaded nor stored in the dispatch and takes
one kind of float atomic. Functions are inlined first (`vyre.ir.inline`) so every float
atomic is a statement of the body. A program without float atomics is returned unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir import superacc as sa
from vyre.ir.inline import inline
from vyre.ir.kinds import NODE_MAP
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import AtomicOp, DataType, MemoryOrdering

U, I, F = DataType.U32, DataType.I32, DataType.F32
PREFIX = "__vyfa"     # locals of the rewrite (user locals may not start with __vy: V025)
FLAG_ZERO = 8          # a zero was added (the element is contributed; no digit changes)
KEY_NAN = 0xFFFFFFFF   # the key of a NaN: larger than every other, for MIN and MAX alike
ADD_WORDS = sa.slot_words(sa.SUM)


@dataclass(frozen=True)
class Scratch:
    """A hidden u32 buffer: ``words`` u32 words per element of float buffer ``target``."""

    name: str
    target: str
    words: int


@dataclass(frozen=True)
class Accumulation:
    """The rewritten program and its hidden buffers (bound, in this order, after the
    program's own); ``scratch`` is empty when the program has no float atomics."""

    program: Program
    scratch: tuple[Scratch, ...] = ()


def _u(x: int) -> E.Expr:
    return E.Expr.u32(x)


def _v(name: str) -> E.Expr:
    return E.Expr.var(name)


def _ops(program: Program, targets: frozenset[str]) -> dict[str, AtomicOp]:
    ops: dict[str, AtomicOp] = {}
    for e in N.program_exprs(program):
        if isinstance(e, E.Atomic) and e.buffer in targets:
            ops.setdefault(e.buffer, e.op)
    return ops


def _flush(bits: E.Expr) -> E.Expr:
    """S9 on f32 bits: a subnormal becomes the zero of its sign."""
    return E.Expr.select((bits & 0x7F800000).eq(_u(0)), bits & 0x80000000, bits)


def _f32_bits(t: DataType, value: E.Expr) -> E.Expr:
    """The f32 bits of a float value of type ``t`` (f16/bf16 widen exactly, S28)."""
    return E.Expr.bitcast(U, value if t is F else E.Expr.cast(F, value))


def _key(op: AtomicOp, bits: str) -> E.Expr:
    """The u32 key of canonical f32 ``bits`` whose maximum is the S10 MAX (for MIN: the
    inverted key, whose maximum is the MIN); NaN is `KEY_NAN` for both."""
    b = _v(bits)
    order = E.Expr.select((b >> 31).eq(_u(1)), ~b, b | 0x80000000)   # -0 below +0
    key = order if op is AtomicOp.MAX else ~order
    return E.Expr.select((b & 0x7FFFFFFF).gt(_u(0x7F800000)), _u(KEY_NAN), key)


def _contribute(op: AtomicOp, e: E.Atomic, t: DataType, scratch: str, p: str) -> list[N.Node]:
    """The statements that replace ``Node.expr(e)``: index, then value (S22), then, in
    bounds (S6), the u32 atomics."""
    i = _v(f"{p}_i")
    head = [N.Node.let_bind(f"{p}_i", e.index)]
    if op is AtomicOp.ADD:
        head.append(N.Node.let_bind(f"{p}_x", E.Expr.bitcast(U, e.value)))
        m, flags = _v(f"{p}_m"), _v(f"{p}_flags")
        body = [*sa.DECODE[t](_v(f"{p}_x"), p),
                N.Node.let_bind(f"{p}_fz", E.Expr.select(m.eq(_u(0)), flags | FLAG_ZERO, flags)),
                *sa.atomic_add_value(scratch, i * ADD_WORDS, m, _u(0), _v(f"{p}_s"), _v(f"{p}_neg"),
                                     _v(f"{p}_fz"), f"{p}c", sa.SUM)]
    else:
        head.append(N.Node.let_bind(f"{p}_x", _flush(_f32_bits(t, e.value))))
        body = [N.Node.expr(E.Expr.atomic(AtomicOp.MAX, scratch, i, _key(op, f"{p}_x")))]
    return [*head, N.Node.if_(i.lt(E.Expr.buf_len(e.buffer)), body)]


def _finalise(op: AtomicOp, target: str, t: DataType, scratch: str, acc: str, slot: E.Expr,
              p: str) -> list[N.Node]:
    """Element ``slot`` of ``target``, if it was contributed: its S36 result."""
    if op is AtomicOp.ADD:   # once per element: loops rather than unrolled code (compile time)
        base, touched = _v(f"{p}_base"), _v(f"{p}_touched")
        span = sa.SUM.digits + 2
        bits = E.Expr.bitcast(U, E.Expr.load(target, slot))
        body = [*sa.load_slot(acc, scratch, base, sa.SUM, f"{p}l", looped=True),
                *sa.DECODE[t](bits, f"{p}t"),
                *sa.add_local(acc, _v(f"{p}t_m"), _u(0), _v(f"{p}t_s"), _v(f"{p}t_neg"), f"{p}c", sa.SUM),
                *sa.normalise(acc, span, f"{p}n", looped=True),
                *sa.round_digits(acc, span, _v(f"{p}l_flags") | _v(f"{p}t_flags"), sa.SUM, sa.FORMATS[t],
                                 f"{p}_r", f"{p}rd", looped=True),
                N.Node.store(target, slot, E.Expr.bitcast(t, _v(f"{p}_r")))]
        return [N.Node.let_bind(f"{p}_base", slot * ADD_WORDS),
                N.Node.let_bind(f"{p}_touched", _u(0)),   # any word set: a contribution came
                N.Node.loop(f"{p}_w", _u(0), _u(ADD_WORDS), [
                    N.Node.assign(f"{p}_touched", touched | E.Expr.load(scratch, base + _v(f"{p}_w")))]),
                N.Node.if_(touched.ne(_u(0)), body)]
    key = _v(f"{p}_k")
    order = key if op is AtomicOp.MAX else ~key
    bits = E.Expr.select((order >> 31).eq(_u(1)), order & 0x7FFFFFFF, ~order)
    value = E.Expr.bitcast(F, E.Expr.select(key.eq(_u(KEY_NAN)), _u(0x7FC00000), bits))
    initial = E.Expr.load(target, slot)
    if t is not F:
        initial = E.Expr.cast(F, initial)
    best = initial.min(value) if op is AtomicOp.MIN else initial.max(value)   # S10
    return [N.Node.let_bind(f"{p}_k", E.Expr.load(scratch, slot)),
            N.Node.if_(key.ne(_u(0)), [N.Node.store(target, slot, best if t is F else E.Expr.cast(t, best))])]


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def accumulate(program: Program) -> Accumulation:
    """``program`` with its float atomics rewritten onto u32 atomics and a final phase (see
    the module docstring); unchanged when it has none. ``program`` must be valid."""
    targets = program.facts.float_atomic_buffers
    if not targets:
        return Accumulation(program)
    program = inline(program)
    ops = _ops(program, targets)
    taken = {b.name for b in program.buffers}
    binding = max((b.binding for b in program.buffers if b.binding is not None), default=-1) + 1
    scratch: list[Scratch] = []
    decls: list[BufferDecl] = []
    for j, name in enumerate(sorted(ops)):
        s = Scratch(_fresh(f"vy_acc_{name}", taken), name, ADD_WORDS if ops[name] is AtomicOp.ADD else 1)
        scratch.append(s)
        decls.append(BufferDecl.output(s.name, binding + j, U))
    of = {s.target: s for s in scratch}
    dtype = {b.name: b.dtype for b in program.buffers}
    sites = [0]

    def site(e: E.Atomic) -> N.Node:
        sites[0] += 1
        return N.Node.block(_contribute(e.op, e, dtype[e.buffer], of[e.buffer].name, f"{PREFIX}{sites[0]}"))

    def body(nodes: tuple[N.Node, ...]) -> tuple[N.Node, ...]:
        out = []
        for n in nodes:
            if isinstance(n, N.Eval) and isinstance(n.value, E.Atomic) and n.value.buffer in targets:
                out.append(site(n.value))
            else:
                mapper = NODE_MAP.get(type(n))
                out.append(n if mapper is None else mapper(n, lambda e: e, body))
        return tuple(out)

    acc = _fresh("vy_acc_digits", taken)
    if any(op is AtomicOp.ADD for op in ops.values()):
        decls.append(BufferDecl.local(acc, sa.SUM.digits + 2, I))
    wx, wy, _ = program.workgroup_size
    lane: E.Expr = E.Expr.lid_x()
    if wy > 1:
        lane = lane + E.Expr.lid_y() * wx
    if program.workgroup_size[2] > 1:
        lane = lane + E.Expr.lid_z() * (wx * wy)
    slot = f"{PREFIX}_slot"
    final: list[N.Node] = [N.Node.barrier(MemoryOrdering.GRID_SYNC),
                           N.Node.let_bind(slot, E.Expr.wgid_x() * program.invocations_per_workgroup + lane)]
    for k, s in enumerate(scratch):
        final.append(N.Node.if_(_v(slot).lt(E.Expr.buf_len(s.target)),
                                _finalise(ops[s.target], s.target, dtype[s.target], s.name, acc, _v(slot),
                                          f"{PREFIX}f{k}")))
    rewritten = Program(program.buffers + tuple(decls), program.workgroup_size, body(program.body) + tuple(final))
    return Accumulation(rewritten, tuple(scratch))


__all__ = ["ADD_WORDS", "Accumulation", "Scratch", "accumulate"]
