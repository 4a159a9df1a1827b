"""`vyre.validate`: one test per diagnostic code; every message ends in a Fix."""

from __future__ import annotations

import pytest

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, MemoryOrdering, Node, Program, validate
from vyre.ir.validate import CODES

U, F = DataType.U32, DataType.F32
GX = Expr.gid_x()


def codes(p: Program) -> set[str]:
    diags = validate(p)
    for d in diags:
        assert "Fix:" in d.message and d.location
    return {d.code for d in diags}


def prog(body, buffers=None, wg=(8, 1, 1)) -> Program:
    buffers = buffers or [BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U, 16),
                          BufferDecl.read("f", 2, F), BufferDecl.workgroup("w", 8, U)]
    return Program(tuple(buffers), wg, tuple(body))


CASES = {
    "V001": [Node.store("nope", GX, 1)],
    "V002": [Node.store("o", GX, Expr.var("ghost"))],
    "V003": [Node.store("o", GX, Expr.load("f", GX))],
    "V004": [Node.assign("x", 1)],
    "V005": [Node.loop("i", Expr.u32(0), Expr.u32(4), [Node.assign("i", 2)])],
    "V006": [Node.if_(GX.lt(3), [Node.barrier()])],
    "V007": [Node.expr(Expr.atomic(AtomicOp.XOR, "f", 0, Expr.f32(1.0)))],
    "V008": [Node.store("a", GX, 1)],
    "V011": [Node.store("o", Expr.u32(16), 1)],
    "V015": [Node.let_bind("x", 1), Node.let_bind("x", 2)],
    "V016": [Node.if_(Expr.bool_(True), [Node.barrier(MemoryOrdering.GRID_SYNC)])],
    "V017": [Node.return_(), Node.barrier(MemoryOrdering.GRID_SYNC)],
    "V018": [Node.let_bind("x", 1), Node.barrier(MemoryOrdering.GRID_SYNC), Node.store("o", GX, Expr.var("x"))],
    "V022": [Node.store("o", Expr.gid(3), 1)],
    "V025": [Node.let_bind("not an identifier", 1)],
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_is_reported_with_its_code(code):
    assert code in codes(prog(CASES[code]))


def test_zero_workgroup_axis():
    assert "V009" in codes(prog([], wg=(0, 1, 1)))


def test_duplicate_bindings_and_names():
    assert "V010" in codes(prog([], [BufferDecl.read("a", 0, U), BufferDecl.read("b", 0, U)]))
    assert "V014" in codes(prog([], [BufferDecl.read("a", 0, U), BufferDecl.read("a", 1, U)]))


def test_malformed_workgroup_buffer():
    assert "V019" in codes(prog([], [BufferDecl("w", None, BufferDecl.workgroup("w", 1, U).access, U, 0)]))


def test_nesting_and_size_limits():
    body = [Node.store("o", GX, 1)]
    for _ in range(70):
        body = [Node.block(body)]
    assert "V012" in codes(prog(body))
    assert "V013" in codes(prog([Node.store("o", GX, 1)] * 100_001))


def test_uniform_barrier_is_fine_and_uniform_locals_count():
    body = [Node.let_bind("n", Expr.buf_len("a")),
            Node.if_(Expr.var("n").gt(3), [Node.barrier()]),
            Node.loop("i", Expr.u32(0), Expr.var("n"), [Node.barrier()]),
            Node.if_(Expr.wgid_x().eq(0), [Node.barrier()])]
    assert codes(prog(body)) == set()
    assert "V006" in codes(prog([Node.let_bind("x", GX), Node.if_(Expr.var("x").gt(1), [Node.barrier()])]))


def test_valid_program_has_no_diagnostics_and_codes_are_documented():
    assert validate(prog([Node.store("o", GX, Expr.load("a", GX) + 1)])) == []
    from pathlib import Path

    doc = Path("docs/semantics.md").read_text()
    for code in CODES:
        assert f"| {code} |" in doc
