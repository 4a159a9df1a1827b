"""Specialization: replace named constants (`Expr.spec`) by literal values.

`spec_constants(program)` lists them; `specialize(program, values)` substitutes the given
values (converted to each constant's declared type, range-checked) and the defaults for the
rest. The reference and every driver apply it before execution, so a specialized program
means exactly the program with those literals written in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import expr as E
from .errors import ExecutionError, VyreError
from .program import Program
from .rewrite import map_program
from .types import DataType


def spec_constants(program: Program) -> dict[str, E.Spec]:
    """The specialization constants of ``program`` by name (first use of each; a fact of the
    program, `vyre.ir.facts`)."""
    return dict(program.facts.specs)


def _literal(spec: E.Spec, value: Any) -> E.Lit:
    if isinstance(value, E.Lit):
        if value.dtype is not spec.dtype:
            raise ExecutionError("inputs", f"specialization {spec.name!r} is {spec.dtype.value}, got a {value.dtype.value}.",
                            f"pass a {spec.dtype.value} value for {spec.name!r}.")
        return value
    try:
        if spec.dtype.is_float:
            return E.Expr.lit(spec.dtype, float(value))
        if spec.dtype is DataType.BOOL:
            return E.Expr.bool_(bool(value))
        if isinstance(value, float | bool):
            raise TypeError(type(value).__name__)
        return E.Expr.lit(spec.dtype, int(value))
    except (TypeError, ValueError, VyreError) as exc:
        raise ExecutionError("inputs", f"specialization {spec.name!r} ({spec.dtype.value}) cannot take {value!r} ({exc}).",
                        "pass an integer in range for integer constants, a number for float ones, a bool for bool.") from None


def specialize(program: Program, values: Mapping[str, Any] | None) -> Program:
    specs = spec_constants(program)
    if not specs:
        if values:
            unknown = ", ".join(sorted(values))
            raise ExecutionError("inputs", f"specialization values for {unknown}, but the program has no "
                            "specialization constants.", "remove them from DispatchConfig.specialization.")
        return program
    values = dict(values or {})
    unknown = sorted(set(values) - set(specs))
    if unknown:
        raise ExecutionError("inputs", f"unknown specialization constant(s) {', '.join(unknown)}; the program has "
                        f"{', '.join(sorted(specs))}.", "pass only constants the program declares.")
    lits = {name: _literal(spec, values[name]) if name in values else E.Lit(spec.dtype, spec.bits)
            for name, spec in specs.items()}

    def fn(e: E.Expr) -> E.Expr:
        return lits[e.name] if isinstance(e, E.Spec) else e

    return map_program(program, fn)
