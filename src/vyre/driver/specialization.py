"""Backend-neutral specialization values: `SpecValue` (a typed 32-bit value) and `SpecMap`
(an immutable, ordered, hashable map of them). A `SpecMap` in
``DispatchConfig.specialization`` is code-affecting: its digest is part of every pipeline
cache key, so one program with two spec values compiles to two pipelines."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import blake3

from vyre.ir import expr as E
from vyre.ir.errors import VyreError
from vyre.ir.types import DataType


def _bad(what: str) -> VyreError:
    from .errors import InvalidProgram

    return InvalidProgram(f"DispatchConfig.{what}.",
                          "pass specialization={name: value} with str names and bool/int/float values.")


@dataclass(frozen=True)
class SpecValue:
    dtype: DataType
    bits: int

    @staticmethod
    def u32(v: int) -> SpecValue:
        return SpecValue(DataType.U32, E.Expr.u32(v).bits)

    @staticmethod
    def i32(v: int) -> SpecValue:
        return SpecValue(DataType.I32, E.Expr.i32(v).bits)

    @staticmethod
    def f32(v: float) -> SpecValue:
        return SpecValue(DataType.F32, E.Expr.f32(v).bits)

    @staticmethod
    def bool_(v: bool) -> SpecValue:
        return SpecValue(DataType.BOOL, int(bool(v)))

    @staticmethod
    def infer(v: Any) -> SpecValue:
        if isinstance(v, SpecValue):
            return v
        if isinstance(v, E.Lit):
            return SpecValue(v.dtype, v.bits)
        if isinstance(v, bool):
            return SpecValue.bool_(v)
        if isinstance(v, int):
            return SpecValue.u32(v) if v >= 0 else SpecValue.i32(v)
        if isinstance(v, float):
            return SpecValue.f32(v)
        try:
            import numpy as np

            if isinstance(v, np.bool_ | np.integer | np.floating):
                return SpecValue.infer(v.item())
        except ImportError:  # pragma: no cover
            pass
        raise TypeError(type(v).__name__)

    @property
    def literal(self) -> E.Lit:
        return E.Lit(self.dtype, self.bits)


class SpecMap(Mapping[str, E.Lit]):
    """name -> value, sorted by name; maps to IR literals for `vyre.ir.specialize`."""

    __slots__ = ("_items",)

    def __init__(self, values: Mapping[str, Any] | None = None, **kw: Any) -> None:
        merged = {**(values or {}), **kw}
        items = []
        for k, v in merged.items():
            if not isinstance(k, str):
                raise _bad(f"specialization name {k!r} is not a str")
            try:
                items.append((k, SpecValue.infer(v)))
            except (TypeError, ValueError, OverflowError, VyreError) as exc:
                raise _bad(f"specialization {k!r}={v!r} is not a bool, int or float ({exc})") from None
        self._items = tuple(sorted(items))

    @staticmethod
    def of(value: Any) -> SpecMap:
        """A SpecMap from a SpecMap or a mapping; anything else is refused with a Fix."""
        if isinstance(value, SpecMap):
            return value
        if not isinstance(value, Mapping):
            raise _bad(f"specialization={value!r} is not a mapping")
        return SpecMap(value)

    def __getitem__(self, key: str) -> E.Lit:
        for k, v in self._items:
            if k == key:
                return v.literal
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpecMap) and other._items == self._items

    def __repr__(self) -> str:
        return f"SpecMap({dict((k, v.literal.value) for k, v in self._items)})"

    def digest(self) -> str:
        return blake3.blake3(repr(self._items).encode()).hexdigest()
