"""The IR's public construction API: names, immutability, structural equality, op ids."""

from __future__ import annotations

import pytest

import vyre
from vyre.ir import (
    AtomicOp,
    Bin,
    BinOp,
    BufferDecl,
    DataType,
    Expr,
    MemoryOrdering,
    Node,
    Program,
    UnOp,
    VyreError,
    all_op_ids,
    program_ops,
)
from vyre.ir.expr import WeakLit


def _prog(k: int = 2) -> Program:
    gx = Expr.gid_x()
    return Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                           [Node.store("o", gx, Expr.load("a", gx) * k)])


def test_import_vyre_alone_exposes_ir_reference_and_validate():
    assert vyre.ir.Program is Program
    assert callable(vyre.reference.run)
    assert vyre.validate(_prog()) == []


def test_every_enum_member_listed_in_the_design_exists():
    assert {d.name for d in DataType} == {"BOOL", "U32", "I32", "F32", "U64", "I64", "U8", "I8",
                                          "U16", "I16", "F16", "BF16"}
    for name in ["ADD", "SUB", "MUL", "DIV", "MOD", "BITAND", "BITOR", "BITXOR", "SHL", "SHR", "EQ", "NE", "LT", "GT", "LE", "GE", "AND", "OR", "MIN", "MAX", "ABS_DIFF", "SATURATING_ADD", "SATURATING_SUB", "SATURATING_MUL", "ROTATE_LEFT", "ROTATE_RIGHT", "MUL_HIGH"]:
        assert hasattr(BinOp, name)
    for name in ["NEGATE", "BITNOT", "LOGICAL_NOT", "POPCOUNT", "CLZ", "CTZ", "REVERSE_BITS", "ABS", "SQRT", "FLOOR", "CEIL", "ROUND", "TRUNC", "SIGN", "IS_NAN", "IS_INF", "IS_FINITE", "RECIPROCAL", "EXP", "LOG", "EXP2", "LOG2", "SIN", "COS", "TAN", "TANH"]:
        assert hasattr(UnOp, name)
    assert {a.name for a in AtomicOp} == {"ADD", "OR", "AND", "XOR", "MIN", "MAX", "EXCHANGE", "COMPARE_EXCHANGE"}
    assert {m.name for m in MemoryOrdering} >= {"SEQ_CST", "GRID_SYNC"}


def test_named_helpers_methods_and_operators_build_the_same_nodes():
    a, b = Expr.var("a"), Expr.var("b")
    assert Expr.add(a, b) == a.add(b) == a + b == Expr.bin(BinOp.ADD, a, b) == Bin(BinOp.ADD, a, b)
    assert Expr.bitxor(a, b) == a ^ b
    assert Expr.lt(a, b) == a.lt(b)
    assert Expr.sqrt(a) == a.sqrt() == Expr.un(UnOp.SQRT, a)
    assert a + 1 == Expr.add(a, WeakLit(1))          # typed when the Program is built
    assert 1.5 * a == Expr.mul(WeakLit(1.5), a)
    assert -a == Expr.un(UnOp.NEGATE, a) and ~a == Expr.un(UnOp.BITNOT, a)
    assert Expr.and_(a, b).op is BinOp.AND and Expr.logical_not(a).op is UnOp.LOGICAL_NOT


def test_expressions_have_no_truth_value():
    with pytest.raises(TypeError, match="Fix:"):
        bool(Expr.var("a").lt(1))


def test_literals_check_their_range():
    with pytest.raises(VyreError, match="Fix:"):
        Expr.u32(-1)
    with pytest.raises(VyreError):
        Expr.i32(2**31)
    assert Expr.i32(-1).bits == 0xFFFFFFFF and Expr.i32(-1).value == -1


def test_f32_literals_are_canonical_at_construction():
    assert Expr.f32(float("nan")).bits == 0x7FC00000
    assert Expr.f32_from_bits(0xFFC00001).bits == 0x7FC00000
    assert Expr.f32_from_bits(0x80000001).bits == 0x80000000
    assert Expr.f32(float("nan")) == Expr.f32(float("nan"))  # bits, so NaN literals compare equal


def test_programs_are_immutable_hashable_and_structurally_equal():
    p, q = _prog(), _prog()
    assert p == q and hash(p) == hash(q) and p is not q
    assert p != _prog(3)
    with pytest.raises(AttributeError):
        p.workgroup_size = (1, 1, 1)  # type: ignore[misc]
    assert {p: 1}[q] == 1


def test_buffer_roles_and_with_count():
    r = BufferDecl.read("a", 0, DataType.U32)
    assert r.with_count(8).count == 8 and r.count == 0
    p = Program.wrapped([BufferDecl.output("o", 2, DataType.U32), BufferDecl.read_write("rw", 1, DataType.U32),
                         r, BufferDecl.workgroup("w", 4, DataType.U32)], 8, [])
    assert [b.name for b in p.inputs] == ["rw", "a"]
    assert [b.name for b in p.outputs] == ["o", "rw"]
    assert p.workgroup_size == (8, 1, 1)


def test_program_ops_lists_each_used_op_once():
    gx = Expr.gid_x()
    p = Program.wrapped([BufferDecl.read_write("a", 0, DataType.U32)], 8,
                        [Node.store("a", gx, Expr.load("a", gx) + 1),
                         Node.expr(Expr.atomic(AtomicOp.ADD, "a", 0, 1)), Node.barrier()])
    ops = list(program_ops(p))
    assert len(ops) == len(set(ops))
    for op in ("vyre.node.store", "vyre.expr.load", "vyre.bin_op.add", "vyre.expr.gid", "vyre.atomic.add",
               "vyre.node.barrier.seq_cst", "vyre.dtype.u32"):
        assert op in ops
    assert set(ops) <= all_op_ids()
    assert set(p.ops()) == set(ops)
