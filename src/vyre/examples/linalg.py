"""Dense linear algebra: the shared-memory tiled f32 matrix product."""

from __future__ import annotations

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

F, U = DataType.F32, DataType.U32


def matmul_tiled(n: int, tile: int = 16) -> Program:
    """``c = a @ b`` for ``n x n`` row-major f32 matrices (``n`` a multiple of ``tile``): each
    ``tile x tile`` workgroup stages a tile of ``a`` and of ``b`` in workgroup memory per step,
    then accumulates ``tile`` products per invocation. Products and sums round separately
    (no contraction), as numpy's float32 dot does not guarantee: compare with the same
    algorithm, or with float64 within rounding."""
    tx, ty = Expr.lid_x(), Expr.lid_y()
    row = Expr.wgid_y() * tile + ty
    col = Expr.wgid_x() * tile + tx
    k = Expr.var("k")
    body = [
        Node.let_bind("acc", Expr.f32(0.0)),
        Node.loop("t", Expr.u32(0), Expr.u32(n // tile), [
            Node.store("As", ty * tile + tx, Expr.load("a", row * n + Expr.var("t") * tile + tx)),
            Node.store("Bs", ty * tile + tx, Expr.load("b", (Expr.var("t") * tile + ty) * n + col)),
            Node.barrier(),
            Node.loop("k", Expr.u32(0), Expr.u32(tile), [
                Node.assign("acc", Expr.var("acc") + Expr.load("As", ty * tile + k) * Expr.load("Bs", k * tile + tx)),
            ]),
            Node.barrier(),
        ]),
        Node.store("c", row * n + col, Expr.var("acc")),
    ]
    return Program.wrapped([BufferDecl.read("a", 0, F, n * n), BufferDecl.read("b", 1, F, n * n),
                            BufferDecl.output("c", 2, F, n * n), BufferDecl.workgroup("As", tile * tile, F),
                            BufferDecl.workgroup("Bs", tile * tile, F)], (tile, tile, 1), body)


def matmul_grid(n: int, tile: int = 16) -> tuple[int, int, int]:
    """The workgroup grid `matmul_tiled` needs (``DispatchConfig(grid_override=...)``)."""
    return (n // tile, n // tile, 1)


