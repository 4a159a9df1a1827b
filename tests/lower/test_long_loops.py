"""Long loops make every trip, on every backend (issue 28 item 1), or fail with an error.

Mesa's llvmpipe (lavapipe, the wgpu adapter here) ends every loop of a shader invocation
once the invocation has taken 65,535 loop back edges in all, whatever the loops are (nesting
or splitting a loop does not help: the count is one per invocation). The generated WGSL runs
4 to 32 trips of an innermost loop per back edge, and checks how each loop was left: a loop
the device stops fails the dispatch with ``device_loops``, never returns short results.
Expected counts come from Python; the reference interpreter (6 s per 100,000 trips) is left
out.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_backend
from vyre.driver.errors import DispatchFailed
from vyre.ir import Expr, Node
from vyre.ir.program import BufferDecl, Function, Program
from vyre.ir.types import DataType

U = DataType.U32
BACKENDS = ["opencl", "wgpu", pytest.param("cuda", marks=pytest.mark.gpu)]
LAVAPIPE_LIMIT = 65_534   # trips one invocation of lavapipe completes (its limiter: 65,535 back edges)


def _count(body) -> Program:
    return Program.wrapped([BufferDecl.output("o", 0, U, 1)], 1,
                           [Node.let_bind("c", Expr.u32(0)), *body, Node.store("o", Expr.u32(0), Expr.var("c"))])


def _inc() -> Node:
    return Node.assign("c", Expr.var("c") + Expr.u32(1))


def _run(backend, program: Program) -> int:
    return int(np.frombuffer(backend.dispatch(program, [])[0], np.uint32)[0])


def _loop(trips: int) -> Program:
    return _count([Node.loop("i", Expr.u32(0), Expr.u32(trips), [_inc()])])


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("trips", [LAVAPIPE_LIMIT, 65_535, 65_536, 100_000, 1_048_576])
def test_a_counted_loop_makes_every_trip(name, trips):
    assert _run(get_backend(name), _loop(trips)) == trips


@pytest.mark.parametrize("name", BACKENDS)
def test_a_loop_longer_than_the_device_runs_fails_never_short(name):
    backend = get_backend(name)
    try:
        got = _run(backend, _loop(3_000_000))
    except DispatchFailed as err:   # lavapipe: 3,000,000 trips of a tiny body are 93,750 back edges
        assert backend.id() == "wgpu" and err.reason == "device_loops", err
        assert "Fix:" in str(err)
        return
    assert got == 3_000_000


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("outer, inner", [(200, 200), (300, 300), (2, 50_000)])
def test_nested_loops_make_every_trip(name, outer, inner):
    body = [Node.loop("j", Expr.u32(0), Expr.u32(outer), [Node.loop("i", Expr.u32(0), Expr.u32(inner), [_inc()])])]
    assert _run(get_backend(name), _count(body)) == outer * inner


@pytest.mark.parametrize("name", BACKENDS)
def test_unrolled_trips_keep_break_continue_and_the_loop_variable(name):
    """Every unrolled copy is one whole trip: continue starts the next, break leaves."""
    body = [Node.loop("i", Expr.u32(0), Expr.u32(100_003), [
        Node.if_((Expr.var("i") % Expr.u32(3)).eq(Expr.u32(0)), [Node.continue_()]),
        Node.if_(Expr.var("i").eq(Expr.u32(100_000)), [Node.break_()]),
        Node.assign("c", Expr.var("c") + Expr.var("i"))])]
    want = sum(i for i in range(100_000) if i % 3) & 0xFFFFFFFF
    assert _run(get_backend(name), _count(body)) == want


def _while(need: int, cap: int) -> Program:
    return _count([Node.while_(Expr.var("c").lt(Expr.u32(need)), [_inc()], cap)])


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("need", [500, 70_000])
def test_a_while_loop_under_its_cap_makes_every_trip(name, need):
    assert _run(get_backend(name), _while(need, 100_000)) == need


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("need, cap", [(1_001, 1_000), (100_001, 100_000)])
def test_a_while_loop_over_its_cap_fails_never_returns_bytes(name, need, cap):
    backend = get_backend(name)
    with pytest.raises(DispatchFailed) as err:
        backend.dispatch(_while(need, cap), [])
    assert err.value.reason == "loop_limit"


@pytest.mark.parametrize("name", ["reference", "opencl", "wgpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_while_whose_condition_calls_at_the_largest_cap(name):
    """Its inlined form counts to the cap + 1 = 2**32: a second counter word on every target
    (one rule for C and WGSL)."""
    backend = get_backend(name)
    below = Function.define("below", [("x", U)], [], Expr.var("x").lt(Expr.u32(5)))
    program = Program.wrapped([BufferDecl.output("o", 0, U, 1)], 1, [
        Node.let_bind("c", Expr.u32(0)),
        Node.while_(Expr.call("below", Expr.var("c")), [_inc()], 0xFFFFFFFF),
        Node.store("o", Expr.u32(0), Expr.var("c"))], [below])
    assert _run(backend, program) == 5
