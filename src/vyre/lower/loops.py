"""Which loops are provably short, so generated code keeps a `while_`'s iteration cap and the
cancel-word poll only where they can matter.

S31 caps every `while_` (`max_iterations`): an invocation whose condition still holds after
that many trips leaves the loop and the dispatch fails with ``loop_limit``. Loops of kernels
without barriers poll the cancel word every `POLL_TRIPS` trips, so a timed-out dispatch stops
(docs/semantics.md, "What a timeout guarantees"). Both cost instructions on every trip, and
neither is needed where the program bounds the loop itself:

* a `while_` runs at most ``ceil((hi + 1) / c)`` trips when a conjunct of its condition is
  ``v < K`` or ``v <= K`` (either way round) on a u32 local ``v`` that the body raises by a
  literal ``c >= 1`` on every trip that stays in the loop — one top-level ``v = v + c``, no
  other assignment to ``v`` in the body and no ``continue`` of this loop before it — where
  `vyre.lower.ranges` bounds ``K`` (``hi`` is the largest ``v`` that enters a trip) and
  ``hi + c`` cannot wrap. When that is within ``max_iterations``, the condition fails before
  the cap is reached, so the cap is never checked (`LoopFacts.uncapped`).
* a `loop` runs ``to - from`` trips (its bounds are evaluated once, S21); a `while_` never
  more than its cap.
* a loop whose trips, times one plus the trips of the loops nested in it, stay within
  `POLL_TRIPS` is bounded work, like straight-line code: it need not poll
  (`LoopFacts.unpolled`). The loops around it still poll, so a cancelled kernel still stops
  within `POLL_TRIPS` polled trips plus bounded work per trip.

The analysis is context-free (each name's range comes from its only binding in the whole
program, `Ranges`), so a loop's verdict depends only on the loop: the plan computes it once
(`analyse`) and both the plan (does a phase use its control block? can it be stopped?) and
the printer read the same `LoopFacts`. In a program with barriers and `return_`, loops that
contain a return are left alone (a returned invocation skips the rest of the body: the
"alive" scheme of `vyre.lower.printer`).
"""

from __future__ import annotations

from dataclasses import dataclass

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import Program
from vyre.ir.typecheck import infer
from vyre.ir.types import BinOp, DataType

from .ranges import FULL, U32_MAX, Ranges

# the cancel poll's interval in trips (the printed polls test ``vy_trips & 1023``)
POLL_TRIPS = 1024
_FLIP = {BinOp.GT: BinOp.LT, BinOp.GE: BinOp.LE, BinOp.LT: BinOp.LT, BinOp.LE: BinOp.LE}


@dataclass(frozen=True)
class LoopFacts:
    """Verdicts on a plan's loops, by node identity (`id`) of the `Loop`/`While` nodes of the
    plan's program, and per phase whether any loop still polls or keeps its cap. The empty
    default keeps every cap and every poll."""

    uncapped: frozenset[int] = frozenset()   # whiles whose cap can never be reached
    unpolled: frozenset[int] = frozenset()   # loops of bounded work: no cancel poll
    polling: tuple[bool, ...] = ()           # per phase: a loop that polls (when it may)
    capping: tuple[bool, ...] = ()           # per phase: a while that keeps its cap
    work: int = 0                            # loop trips an invocation makes at most (`work_bound`)

    def capped(self, n: N.While) -> bool:
        return id(n) not in self.uncapped

    def polls(self, n: N.Loop | N.While) -> bool:
        return id(n) not in self.unpolled


def analyse(program: Program, phases: tuple[tuple[N.Node, ...], ...]) -> LoopFacts:
    """The verdicts for every loop of an inlined, validated program split into ``phases``."""
    ranges, u32 = _bindings(program)
    alive = program.facts.barrier and program.facts.returns
    uncapped: set[int] = set()
    unpolled: set[int] = set()
    polling: list[bool] = []
    capping: list[bool] = []
    work = sum(work_bound(n, ranges, u32, alive) for phase in phases for n in _child_loops(phase))
    for phase in phases:
        polls = caps = False
        for n in N.walk_nodes(phase):
            if not isinstance(n, N.Loop | N.While):
                continue
            if isinstance(n, N.While):
                t = trip_bound(n, ranges, u32, alive)
                if t is not None and t <= n.max_iterations:
                    uncapped.add(id(n))
                else:
                    caps = True
            if work_bound(n, ranges, u32, alive) <= POLL_TRIPS:
                unpolled.add(id(n))
            else:
                polls = True
        polling.append(polls)
        capping.append(caps)
    return LoopFacts(frozenset(uncapped), frozenset(unpolled), tuple(polling), tuple(capping), work)


def trip_bound(n: N.Loop | N.While, ranges: Ranges, u32: frozenset[str], alive: bool = False) -> int | None:
    """The most trips one entry of ``n`` can make (a `while_`'s cap not counted), or None
    when nothing bounds it."""
    if isinstance(n, N.Loop):
        lo, hi = ranges.of(n.from_)[0], ranges.of(n.to)
        return None if n.var not in u32 or hi == FULL else max(0, hi[1] - lo)
    if alive and any(isinstance(s, N.Return) for s in N.walk_nodes(n.body)):
        return None
    bounds = [t for c in _conjuncts(n.cond) if (t := _counted(c, n.body, ranges, u32)) is not None]
    return min(bounds) if bounds else None


def work_bound(n: N.Loop | N.While, ranges: Ranges, u32: frozenset[str], alive: bool = False) -> int:
    """Trips of ``n`` times one plus the work of the loops nested in it (a `while_` makes at
    most its cap); `U32_MAX` and more mean unbounded for polling purposes."""
    t = trip_bound(n, ranges, u32, alive)
    if isinstance(n, N.While):
        t = n.max_iterations if t is None else min(t, n.max_iterations)
    elif t is None:
        return U32_MAX + 1
    inner = sum(work_bound(m, ranges, u32, alive) for m in _child_loops(n.body))
    return t * (1 + inner)


def _bindings(program: Program) -> tuple[Ranges, frozenset[str]]:
    """`Ranges` whose environment holds every u32 name bound once in the whole program (one
    `let_bind` or one loop variable, never assigned: its range holds wherever it is visible),
    and the names every binding of which is a u32."""
    ranges = Ranges(program)
    seen: dict[str, list[DataType]] = {}
    order: list[N.Let | N.Loop] = []

    def visit(body: tuple[N.Node, ...], scope: dict[str, DataType]) -> None:
        scope = dict(scope)
        for n in body:
            if isinstance(n, N.Let):
                scope[n.name] = infer(n.value, scope, program)
                seen.setdefault(n.name, []).append(scope[n.name])
                order.append(n)
            elif isinstance(n, N.Loop):
                t = infer(n.from_, scope, program)
                seen.setdefault(n.var, []).append(t)
                order.append(n)
                visit(n.body, {**scope, n.var: t})
            else:
                for _, sub in N.node_bodies(n):
                    visit(sub, scope)

    visit(program.body, {})
    u32 = frozenset(name for name, ts in seen.items() if all(t is DataType.U32 for t in ts))
    for n in order:   # in program order: a binding before the lets that read it
        name = n.name if isinstance(n, N.Let) else n.var
        if name not in u32 or len(seen[name]) != 1:
            continue
        if isinstance(n, N.Let):
            r = ranges.of(n.value)
            ranges.bind(name, None if r == FULL else r)
        else:
            ranges.bind(name, ranges.loop(name, n.from_, n.to))
    return ranges, u32


def _conjuncts(e: E.Expr):
    if isinstance(e, E.Bin) and e.op is BinOp.AND:
        yield from _conjuncts(e.left)
        yield from _conjuncts(e.right)
    else:
        yield e


def _counted(cond: E.Expr, body: tuple[N.Node, ...], ranges: Ranges, u32: frozenset[str]) -> int | None:
    """Trips bound by a counter conjunct ``v < K`` / ``v <= K`` (or ``K > v`` / ``K >= v``)
    on a u32 local ``v``."""
    if not (isinstance(cond, E.Bin) and cond.op in _FLIP):
        return None
    v, k = (cond.left, cond.right) if cond.op in (BinOp.LT, BinOp.LE) else (cond.right, cond.left)
    if not (isinstance(v, E.Var) and v.name in u32):
        return None
    kr = ranges.of(k)
    if kr == FULL:
        return None
    top = kr[1] - 1 if _FLIP[cond.op] is BinOp.LT else kr[1]   # the largest v entering a trip
    if top < 0:
        return 0
    step = _step(v.name, body)
    if step is None or top + step > U32_MAX:   # v + c would wrap below K
        return None
    return top // step + 1


def _step(name: str, body: tuple[N.Node, ...]) -> int | None:
    """``c`` when the body's only assignment to ``name`` is a top-level ``name = name + c``
    (a u32 literal ``c >= 1``) that every trip staying in the loop reaches."""
    assigns = [n for n in N.walk_nodes(body) if isinstance(n, N.Assign) and n.name == name]
    if len(assigns) != 1:
        return None
    at = next((i for i, s in enumerate(body) if s is assigns[0]), None)
    if at is None or _continues(body[:at]):
        return None
    v = assigns[0].value
    if not (isinstance(v, E.Bin) and v.op is BinOp.ADD):
        return None
    lit = v.right if v.left == E.Var(name) else v.left if v.right == E.Var(name) else None
    if not (isinstance(lit, E.Lit) and lit.dtype is DataType.U32 and lit.bits >= 1):
        return None
    return lit.bits


def _continues(body: tuple[N.Node, ...]) -> bool:
    """Whether ``body`` holds a `continue_` of the loop it is in (not of a nested loop)."""
    return _own(body, N.Continue)


def breaks(body: tuple[N.Node, ...]) -> bool:
    """Whether ``body`` holds a `break_` of the loop it is in (not of a nested loop)."""
    return _own(body, N.Break)


def _own(body: tuple[N.Node, ...], kind: type) -> bool:
    for s in body:
        if isinstance(s, kind):
            return True
        if not isinstance(s, N.Loop | N.While) and any(_own(sub, kind) for _, sub in N.node_bodies(s)):
            return True
    return False


def _child_loops(body: tuple[N.Node, ...]):
    """The outermost loops nested in ``body``."""
    for s in body:
        if isinstance(s, N.Loop | N.While):
            yield s
        else:
            for _, sub in N.node_bodies(s):
                yield from _child_loops(sub)
