"""Apply the legalization rewrites: find the uses of each lacking feature (typed, so an f32
division is told from an integer one), replace each by a call of the feature's helper
function, and declare the helpers (before the program's own functions, which may call them).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.errors import VyreError
from vyre.ir.program import Function, Program
from vyre.ir.rewrite import with_children
from vyre.ir.typecheck import TypeFault, infer
from vyre.ir.types import BinOp, DataType, UnOp

from . import f32_div, f32_fma, f32_mod, f32_sqrt
from .walk import walk_body, walk_function

F = DataType.F32


class Feature(enum.Enum):
    """What a target may lack; each has one rewrite."""

    F32_DIV = "f32 division"
    F32_MOD = "f32 remainder (fmod)"
    F32_SQRT = "f32 sqrt"
    F32_RECIPROCAL = "f32 reciprocal"
    FMA = "fma"


# feature -> (helpers it declares, in dependency order)
HELPERS: dict[Feature, tuple[Callable[[], Function], ...]] = {
    Feature.F32_DIV: (f32_div.div_function,),
    Feature.F32_RECIPROCAL: (f32_div.div_function,),
    Feature.F32_MOD: (f32_mod.mod_function,),
    Feature.F32_SQRT: (f32_sqrt.sqrt_function,),
    Feature.FMA: (f32_fma.fma_function,),
}


def _feature(e: E.Expr, scope: dict[str, DataType], program: Program) -> Feature | None:
    """The feature ``e`` (an original expression) uses at its root, if any."""
    if isinstance(e, E.Fma):
        return Feature.FMA
    if isinstance(e, E.Bin) and e.op in (BinOp.DIV, BinOp.MOD):
        if infer(e.left, scope, program) is F:
            return Feature.F32_DIV if e.op is BinOp.DIV else Feature.F32_MOD
    elif (isinstance(e, E.Un) and e.op in (UnOp.SQRT, UnOp.RECIPROCAL)
          and infer(e.operand, scope, program) is F):
        return Feature.F32_SQRT if e.op is UnOp.SQRT else Feature.F32_RECIPROCAL
    return None


def _replace(feature: Feature, e: E.Expr) -> E.Expr:
    """``e`` (with its operands already rewritten) through its feature's helper."""
    if feature is Feature.F32_DIV:
        return f32_div.divide(e.left, e.right)
    if feature is Feature.F32_RECIPROCAL:
        return f32_div.reciprocal(e.operand)
    if feature is Feature.F32_MOD:
        return f32_mod.remainder(e.left, e.right)
    if feature is Feature.F32_SQRT:
        return f32_sqrt.sqrt(e.operand)
    return f32_fma.fma(e.a, e.b, e.c)


class _Walker:
    def __init__(self, program: Program, lacks: frozenset[Feature]) -> None:
        self.p = program
        self.lacks = lacks
        self.used: set[Feature] = set()

    def expr(self, e: E.Expr, scope: dict[str, DataType]) -> E.Expr:
        kids = E.children(e)
        new = with_children(e, [self.expr(k, scope) for k in kids]) if kids else e
        try:
            feature = _feature(e, scope, self.p)
        except TypeFault:   # an ill-typed program is left for validation to report
            return new
        if feature is None or feature not in self.lacks:
            return new
        self.used.add(feature)
        return _replace(feature, new)

    def stmt(self, n: N.Node, scope: dict[str, DataType]) -> list[N.Node] | None:
        return None     # statements are walked generically (`walk`)


def needs(program: Program) -> set[Feature]:
    """The legalizable features ``program`` uses."""
    w = _Walker(program, frozenset(Feature))
    _walk_all(w, program)
    return w.used


def _walk_all(w: _Walker, program: Program) -> tuple[tuple[N.Node, ...], tuple[Function, ...]]:
    functions = tuple(walk_function(f, w) for f in program.functions)
    return walk_body(program.body, {}, w), functions


def legalize(program: Program, lacks: Iterable[Feature]) -> Program:
    """``program`` with every use of a feature in ``lacks`` rewritten; unchanged (the same
    object) when it uses none."""
    w = _Walker(program, frozenset(lacks))
    body, functions = _walk_all(w, program)
    if not w.used:
        return program
    taken = {f.name for f in program.functions}
    helpers: list[Function] = []
    for feature in Feature:             # a stable order
        if feature in w.used:
            for make in HELPERS[feature]:
                fn = make()
                if fn.name in taken:
                    if any(h.name == fn.name for h in helpers):
                        continue
                    raise VyreError(f"the program declares a function named {fn.name!r}, which "
                                    "vyre's legalization needs.", "rename that function.")
                taken.add(fn.name)
                helpers.append(fn)
    return Program(program.buffers, program.workgroup_size, body, tuple(helpers) + functions)
