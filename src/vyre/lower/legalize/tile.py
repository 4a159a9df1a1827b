"""load_tile as plain scalar loops: the form every target prints (CUDA prints asynchronous
copies instead where `vyre.drivers.cuda.tiles` claims it, sm_80 and newer).

``load_tile(dst, src, offset, stride, rows, cols, rows_in, cols_in)`` becomes a workgroup
barrier (no invocation may still read ``dst``), then each invocation (linear local id ``l`` of
``W``) copying the elements ``e = l, l + W, ...`` below ``rows*cols``::

    r = e / cols, c = e % cols
    dst[e] = src[offset + r*stride + c]   if r < rows_in and c < cols_in
    dst[e] = 0                            otherwise

then a barrier again (every element is in place before anything reads it). Loads and stores
move bits unchanged (S9), and a load past the end of ``src`` reads 0 (S6), so this is the
reference's copy on any workgroup size. The locals are named ``__vylt<c>_...``, a prefix
programs may not use (V025).
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import Program

from .walk import expand_statements, workgroup_slots

Keep = Callable[[Program, N.Node], bool]


def scalar_copy(program: Program, n: N.LoadTile, c: int) -> list[N.Node]:
    """The statements that do ``n`` with a scalar loop (module docstring); ``c`` makes the
    local names unique."""
    X, S = E.Expr, N.Node
    prefix = f"__vylt{c}_"
    v = {s: f"{prefix}{s}" for s in ("off", "st", "rin", "cin", "e", "r", "c")}
    var = {s: X.var(name) for s, name in v.items()}
    cols = X.u32(n.cols)
    zero = X.lit(program.buffer(n.dst).dtype.value_type, 0)
    inside = var["r"].lt(var["rin"]).and_(var["c"].lt(var["cin"]))
    element = [
        S.let_bind(v["r"], var["e"] / cols),
        S.let_bind(v["c"], var["e"] % cols),
        S.if_(inside, [S.store(n.dst, var["e"], X.load(n.src, var["off"] + var["r"] * var["st"] + var["c"]))],
              [S.store(n.dst, var["e"], zero)]),
    ]
    lets = [S.let_bind(v["off"], n.offset), S.let_bind(v["st"], n.stride),
            S.let_bind(v["rin"], n.rows_in), S.let_bind(v["cin"], n.cols_in)]
    return workgroup_slots(program, prefix, n.rows * n.cols, lets, element)


def expand_tiles(program: Program, keep: Keep | None = None) -> Program:
    """``program`` with every load_tile that ``keep`` does not claim as scalar loops; the same
    object when there is none to expand. A load_tile is only in the program body (V035)."""
    if not program.facts.tile_loads:
        return program
    return expand_statements(program, N.LoadTile, scalar_copy, keep)
