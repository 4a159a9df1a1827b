"""Reference interpreter behaviour beyond the semantics table: input errors with Fix,
execution limits, exact workgroup ordering under batching, and elementwise programs
checked against a direct numpy computation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vyre import reference
from vyre.ir import (
    AtomicOp,
    BufferDecl,
    DataType,
    ExecutionError,
    Expr,
    Node,
    Program,
    ValidationError,
)
from vyre.reference import interp

from helpers import GX, as_u32

U = DataType.U32


def add_one() -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 4,
                           [Node.store("o", GX, Expr.load("a", GX) + 1)])


@pytest.mark.parametrize("inputs", [[], [b"1234", b"5678"]])
def test_wrong_number_of_inputs(inputs):
    with pytest.raises(ExecutionError, match="Fix:") as err:
        reference.run(add_one(), inputs)
    assert err.value.kind == "inputs"


def test_input_length_not_a_multiple_of_the_element_size():
    with pytest.raises(ExecutionError, match="multiple of"):
        reference.run(add_one(), [b"12345"])


def test_static_input_with_the_wrong_size():
    p = Program.wrapped([BufferDecl.read("a", 0, U, 4), BufferDecl.output("o", 1, U, 4)], 4,
                        [Node.store("o", GX, Expr.load("a", GX))])
    with pytest.raises(ExecutionError, match="declared with 4"):
        reference.run(p, [np.zeros(3, np.uint32)])


def test_invalid_program_and_non_program():
    bad = Program.wrapped([BufferDecl.read("a", 0, U)], 4, [Node.store("a", GX, 1)])
    with pytest.raises(ValidationError, match="V008"):
        reference.run(bad, [b"\0" * 4])
    with pytest.raises(ExecutionError, match="Fix:"):
        reference.run("not a program", [])  # type: ignore[arg-type]


def test_inputs_accept_bytes_memoryview_and_numpy():
    a = np.arange(6, dtype=np.uint32)
    want = reference.run(add_one(), [a])
    assert reference.run(add_one(), [a.tobytes()]) == want
    assert reference.run(add_one(), [memoryview(a.tobytes())]) == want
    assert reference.run(add_one(), [bytearray(a.tobytes())]) == want


def test_i32_division_by_zero_is_an_execution_error():
    p = Program.wrapped([BufferDecl.read("a", 0, DataType.I32), BufferDecl.output("o", 1, DataType.I32)], 1,
                        [Node.store("o", GX, Expr.i32(7) / Expr.load("a", GX))])
    with pytest.raises(ExecutionError, match="Fix:") as err:
        reference.run(p, [np.array([3, 0], np.int32)])
    assert err.value.kind == "division"


def test_loop_trip_cap():
    p = Program.wrapped([BufferDecl.output("o", 0, U, 1)], 1,
                        [Node.loop("i", Expr.u32(0), Expr.u32(interp.MAX_LOOP_TRIPS + 1), [])])
    with pytest.raises(ExecutionError, match="2\\*\\*20") as err:
        reference.run(p, [])
    assert err.value.kind == "limit"


def test_should_stop_cancels_between_statements():
    with pytest.raises(ExecutionError, match="cancelled"):
        reference.run(add_one(), [np.zeros(8, np.uint32)], should_stop=lambda: True)


def test_cross_workgroup_race_is_replayed_in_workgroup_order(monkeypatch):
    """S14: later workgroups win; batching must not change that (the batch is replayed)."""
    body = [Node.store("o", 0, Expr.wgid_x()), Node.store("o", 1, Expr.load("o", 0) + 100)]
    p = Program.wrapped([BufferDecl.output("o", 0, U, 2)], 2, body)
    from vyre.driver import DispatchConfig

    out = as_u32(reference.run(p, [], DispatchConfig(grid_override=(5, 1, 1)))[0])
    assert list(out) == [4, 104]


def test_batched_and_sequential_execution_agree():
    body = [Node.expr(Expr.atomic(AtomicOp.ADD, "h", Expr.load("a", GX) % 4, 1)),
            Node.store("o", GX, Expr.load("a", GX) * 2)]
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read_write("h", 1, U, 4), BufferDecl.output("o", 2, U)],
                        8, body)
    a = np.arange(200, dtype=np.uint32)
    batched = reference.run(p, [a, np.zeros(4, np.uint32)])
    old = interp.MAX_BATCH_LANES
    try:
        interp.MAX_BATCH_LANES = 1  # one workgroup per batch: the plain sequential order
        sequential = reference.run(p, [a, np.zeros(4, np.uint32)])
    finally:
        interp.MAX_BATCH_LANES = old
    assert batched == sequential


U32S = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=300)
OPS = {
    "add": (lambda a, b: a + b, lambda a, b: (a + b) & 0xFFFFFFFF),
    "mul": (lambda a, b: a * b, lambda a, b: (a * b) & 0xFFFFFFFF),
    "xor_shift": (lambda a, b: a ^ (b << 3), lambda a, b: a ^ ((b << (3 & 31)) & 0xFFFFFFFF)),
    "div": (lambda a, b: a / b, lambda a, b: np.where(b == 0, 0xFFFFFFFF, a // np.where(b == 0, 1, b))),
    "min_sub": (lambda a, b: a.min(b) - 7, lambda a, b: (np.minimum(a, b) - 7) & 0xFFFFFFFF),
}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(OPS)), U32S, st.integers(1, 64))
def test_elementwise_reference_equals_numpy(name, values, wg):
    build, numpy_fn = OPS[name]
    a = np.array(values, dtype=np.uint64)
    b = a[::-1].copy()
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read("b", 1, U), BufferDecl.output("o", 2, U)], wg,
                        [Node.store("o", GX, build(Expr.load("a", GX), Expr.load("b", GX)))])
    got = as_u32(reference.run(p, [a.astype(np.uint32), b.astype(np.uint32)])[0])
    assert np.array_equal(got, np.asarray(numpy_fn(a, b)).astype(np.uint32))


def test_vectorised_interpreter_does_not_loop_per_invocation():
    """A 2^16-invocation program runs statement-by-statement, not lane-by-lane: the number of
    evaluated expression nodes does not grow with the invocation count."""
    calls = {"n": 0}
    real = interp.Machine.eval

    def counting(self, e, idx, discard=False):
        calls["n"] += 1
        return real(self, e, idx, discard)

    interp.Machine.eval = counting  # type: ignore[method-assign]
    try:
        reference.run(add_one(), [np.zeros(16, np.uint32)])
        small = calls["n"]
        calls["n"] = 0
        reference.run(add_one(), [np.zeros(1 << 16, np.uint32)])
        assert calls["n"] == small
    finally:
        interp.Machine.eval = real  # type: ignore[method-assign]
