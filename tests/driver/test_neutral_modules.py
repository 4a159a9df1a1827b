"""Neutral decision helpers: capability records, diagnostics shaping,
and the lowering's zero-fill analysis that both compiled drivers rely on."""

from __future__ import annotations

from vyre.driver import BackendCapability, UnsupportedFeature, diagnostics
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, validate
from vyre.lower.plan import lower

from helpers import GX, MockBackend

U = DataType.U32


def test_backend_capability_reads_the_backend_queries():
    cap = BackendCapability.of(MockBackend())
    assert cap.backend == "mock" and cap.max_workgroup_size == (1, 1, 1) and cap.features == frozenset()
    assert "vyre.node.store" in cap.supported_ops and cap.subgroup_size is None


def test_diagnostics_shape_validation_and_errors():
    bad = Program.wrapped([BufferDecl.read("a", 0, U)], 4, [Node.store("a", GX, 1)])
    diags = diagnostics.from_validation(validate(bad))
    assert diags[0].code == "V008" and "Fix:" in diags[0].render()
    err = diagnostics.from_error(UnsupportedFeature("f16", "x"), "x")
    assert err.code == "1002" and "Fix:" in diagnostics.render_all([err])


def _out(body) -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 4, body)


def test_zero_fill_is_skipped_only_for_fully_overwritten_unread_outputs():
    full = lower(_out([Node.store("o", GX, Expr.load("a", GX))]))
    assert full.skips_zero_fill("o", 100, 100) and not full.skips_zero_fill("o", 100, 64)
    for body in ([Node.if_(GX.lt(3), [Node.store("o", GX, 1)])],                      # conditional
                 [Node.store("o", GX + 1, 1)],                                          # not gid.x
                 [Node.if_(GX.eq(0), [Node.return_()]), Node.store("o", GX, 1)],        # after a return
                 [Node.store("o", GX, Expr.load("o", GX) + 1)],                         # reads stale bytes
                 [Node.store("o", GX, 1), Node.expr(Expr.atomic(AtomicOp.ADD, "o", 0, 1))]):
        assert not lower(_out(body)).skips_zero_fill("o", 100, 100), body


def test_program_walks_layouts_counts_and_indices():
    from vyre.driver import program_walks as W
    from vyre.driver.dispatch_shape import dispatch_shape

    p = Program.wrapped([BufferDecl.output("o", 3, U, 5), BufferDecl.read("a", 1, U), BufferDecl.read_write("rw", 0, U)],
                        4, [Node.store("o", GX, Expr.load("a", GX))])
    launch = W.launch_for(p, [b"\0" * 28, b"\0" * 12])
    assert W.output_buffer_indices(p) == [0, 2]
    assert W.element_size(p, "a") == 4
    assert [(o.name, o.element_count, o.byte_len) for o in W.output_layouts(p, launch)] == [("o", 5, 20), ("rw", 3, 12)]
    assert W.count_words(p, launch) == [3, 7, 5] == list(dispatch_shape(p, launch).counts)
