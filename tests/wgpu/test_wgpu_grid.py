"""wgpu: grids over the adapter's 65,535 workgroups per axis are launched folded onto more
axes, and gid/wgid stay the logical ids the program expects (S19), with barriers and
workgroup memory intact; a dispatch that reuses a bound kernel with a smaller grid is
unfolded again."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_backend
from vyre import reference
from vyre.driver import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

gx = Expr.gid_x()


@pytest.fixture
def wgpu():
    return get_backend("wgpu")


def test_saxpy_past_65535_workgroups(wgpu):
    p = Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.read("y", 1, DataType.F32),
                         BufferDecl.output("o", 2, DataType.F32)], 64,
                        [Node.store("o", gx, Expr.f32(2.0) * Expr.load("x", gx) + Expr.load("y", gx))])
    n = 65536 * 64 + 7                      # 65,537 workgroups of 64
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    out = np.frombuffer(wgpu.dispatch(p, [x, y])[0], np.float32)
    assert (out == np.float32(2) * x + y).all()
    small = np.arange(100, dtype=np.float32)       # the same kernel unfolded again
    assert np.frombuffer(wgpu.dispatch(p, [small, small])[0], np.float32).tolist() == (3 * small).tolist()


@pytest.mark.parametrize("grid", [(70000, 1, 1), (3, 70000, 1), (2, 2, 66000)])
def test_folded_ids_match_reference(wgpu, grid):
    """Every id builtin, a workgroup barrier and workgroup memory on a folded grid."""
    wg = 2
    total = grid[0] * grid[1] * grid[2] * wg
    flat = (Expr.gid_z() * (grid[1] * wg) + Expr.gid_y()) * (grid[0] * wg) + gx
    body = [Node.store("tile", Expr.lid_x(), Expr.wgid_x() + Expr.wgid_y() * 3 + Expr.wgid_z() * 5),
            Node.barrier(),
            Node.store("o", flat, Expr.load("tile", Expr.u32(1) - Expr.lid_x()) * 7 + Expr.lid_x()
                       + Expr.gid_y() * 11 + Expr.gid_z() * 13)]
    p = Program.wrapped([BufferDecl.output("o", 0, DataType.U32, total), BufferDecl.workgroup("tile", wg, DataType.U32)],
                        (wg, 1, 1), body)
    cfg = DispatchConfig(grid_override=grid)
    assert wgpu.dispatch(p, [], cfg) == reference.run(p, [], cfg)
