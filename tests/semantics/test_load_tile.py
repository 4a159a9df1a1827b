"""load_tile (S38): a tile of a row-major matrix into a workgroup array, zero outside the
limits and past the end of the source, u32 indices wrapping. Expected values from numpy
index arithmetic written here; the reference, OpenCL (PoCL) and wgpu (lavapipe) give the same
bytes; invalid forms have a code and a Fix; the wire form round-trips."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, validate, wire
from vyre.reference import run

D = DataType
R, C, WG = 5, 12, 32
GROUPS = 3
# (type, offset base, stride, rows_in, cols_in): aligned chunks, odd offsets and strides,
# partial limits, rows and columns past the end of the source, limits larger than the tile
CASES = [
    (D.I8, 0, 16, 5, 12), (D.I8, 3, 13, 4, 7), (D.U8, 7, 40, 9, 30), (D.U32, 0, 12, 5, 12),
    (D.U32, 5, 7, 2, 11), (D.F32, 1, 20, 5, 3), (D.U64, 2, 12, 3, 12), (D.I16, 9, 31, 5, 12),
    (D.I32, 60, 16, 5, 12),   # most of the tile past the end of the source
]
SRC = 100   # elements of the source


def tile_program(t: DataType, rows: int = R, cols: int = C, wg: int = WG) -> Program:
    """Each workgroup loads the tile at offset prm[0] + wgid * prm[1] (stride prm[2], limits
    prm[3] and prm[4] - wgid) and writes it out whole at wgid * rows * cols."""
    prm = [Expr.load("prm", Expr.u32(i)) for i in range(5)]
    g = Expr.wgid_x()
    n = rows * cols
    body = [Node.let_bind("st", prm[2]),
            Node.load_tile("w", "s", prm[0] + g * prm[1], Expr.var("st"), rows, cols, prm[3], prm[4] - g),
            Node.loop("q", Expr.u32(0), Expr.u32(-(-n // wg)), [
                Node.let_bind("e", Expr.var("q") * wg + Expr.lid_x()),
                Node.if_(Expr.var("e").lt(Expr.u32(n)),
                         [Node.store("o", g * n + Expr.var("e"), Expr.load("w", Expr.var("e")))])])]
    return Program.wrapped([BufferDecl.read("s", 0, t), BufferDecl.read("prm", 1, D.U32, 8),
                            BufferDecl.output("o", 2, t, GROUPS * n), BufferDecl.workgroup("w", n, t)], wg, body)


def source(t: DataType, rng) -> np.ndarray:
    return rng.integers(0, 256, SRC * t.size, dtype=np.uint8).view(t.numpy)


def expected(src: np.ndarray, off: int, step: int, stride: int, rin: int, cin: int,
             rows: int = R, cols: int = C) -> np.ndarray:
    out = np.zeros((GROUPS, rows, cols), src.dtype)
    for g in range(GROUPS):
        for r in range(rows):
            for c in range(cols):
                i = (off + g * step + r * stride + c) % 2**32
                if r < rin and c < cin - g and i < src.size:
                    out[g, r, c] = src[i]
    return out.reshape(-1)


def _params(*v: int) -> np.ndarray:
    return np.array([x % 2**32 for x in v] + [0] * (8 - len(v)), np.uint32)


CFG = DispatchConfig(grid_override=(GROUPS, 1, 1))


@pytest.mark.parametrize("t, off, stride, rin, cin", CASES, ids=lambda v: getattr(v, "value", str(v)))
def test_reference_is_the_numpy_tile(t, off, stride, rin, cin) -> None:
    src = source(t, np.random.default_rng(off * 31 + stride))
    got = run(tile_program(t), [src, _params(off, 4, stride, rin, cin)], CFG)[0]
    assert got == expected(src, off, 4, stride, rin, cin).tobytes()


def test_indices_wrap_past_2_32() -> None:
    """offset near 2**32: the elements whose u32 index wraps read the start of the source."""
    src = source(D.U32, np.random.default_rng(3))
    off = 2**32 - 6
    got = run(tile_program(D.U32), [src, _params(off, 1, 16, R, C)], CFG)[0]
    assert got == expected(src, off, 1, 16, R, C).tobytes()


@pytest.mark.parametrize("backend_id", ["opencl", "wgpu"])
def test_backends_give_the_references_bytes(backend_id: str, monkeypatch) -> None:
    from conftest import get_backend

    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp")
    be = get_backend(backend_id)
    rng = np.random.default_rng(5)
    for t, off, stride, rin, cin in [*CASES, (D.U32, 2**32 - 6, 16, R, C)]:
        if t.is_wide and backend_id == "wgpu":
            continue   # (u64 buffers are u32 pairs there: covered by the op matrix, not this shape)
        src = source(t, rng)
        ins = [src, _params(off, 4, stride, rin, cin)]
        assert be.dispatch(tile_program(t), ins, CFG) == run(tile_program(t), ins, CFG), (backend_id, t, off)


def _prog(body, dst=D.U32, src=D.U32, count=60, src_decl=None) -> Program:
    return Program.wrapped([src_decl or BufferDecl.read("s", 0, src), BufferDecl.output("o", 1, D.U32, 1),
                            BufferDecl.workgroup("w", count, dst)], 32, body)


LT = Node.load_tile("w", "s", Expr.u32(0), Expr.u32(12), 5, 12, Expr.u32(5), Expr.u32(12))


@pytest.mark.parametrize("program, code", [
    (_prog([LT], dst=D.I32), "V042"),                                            # element types differ
    (_prog([LT], count=59), "V042"),                                             # dst too small
    (_prog([Node.load_tile("w", "s", Expr.u32(0), Expr.u32(1), 0, 4, Expr.u32(1), Expr.u32(1))]), "V042"),
    (_prog([Node.load_tile("w", "s", Expr.lid_x(), Expr.u32(1), 5, 12, Expr.u32(1), Expr.u32(1))]), "V042"),
    (_prog([Node.load_tile("s", "s", Expr.u32(0), Expr.u32(1), 5, 12, Expr.u32(1), Expr.u32(1))]), "V042"),
    (_prog([Node.load_tile("w", "nope", Expr.u32(0), Expr.u32(1), 5, 12, Expr.u32(1), Expr.u32(1))]), "V001"),
    (_prog([Node.if_(Expr.lid_x().lt(3), [LT])]), "V039"),                        # divergent
    (_prog([LT, Node.if_(Expr.lid_x().eq(0), [Node.return_()])]), "V039"),       # a program that returns
    (_prog([Node.load_tile("w", "s", Expr.f32(1.0), Expr.u32(1), 5, 12, Expr.u32(1), Expr.u32(1))]), "V003"),
])
def test_invalid_load_tile_has_a_code_and_a_fix(program: Program, code: str) -> None:
    diags = validate(program)
    assert code in [d.code for d in diags], diags
    assert all("Fix:" in d.message for d in diags)


def test_valid_forms_validate_and_round_trip_the_wire() -> None:
    p = tile_program(D.I8)
    assert validate(p) == []
    assert wire.decode(wire.encode(p)) == p
    assert validate(_prog([Node.if_(Expr.wgid_x().eq(0), [LT])])) == []   # uniform branch
