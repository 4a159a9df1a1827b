"""`DispatchConfig`: the frozen per-call options bag.

Only fields that change generated code (``ulp_budget``, ``workgroup_override``,
``specialization``) enter pipeline cache keys (`code_key`). Invalid values are rejected at construction with a Fix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .errors import InvalidProgram


def _triple(name: str, value: Any, allow_zero: bool) -> tuple[int, int, int] | None:
    if value is None:
        return None
    try:
        t = tuple(int(v) for v in value)
    except TypeError:
        t = (int(value), 1, 1)
    if len(t) != 3 or any(v < (0 if allow_zero else 1) for v in t):
        lo = "non-negative" if allow_zero else "positive"
        raise InvalidProgram(f"DispatchConfig.{name}={value!r} is not three {lo} sizes.",
                             f"pass {name}=(x, y, z) with {lo} integers, or None.")
    return t  # type: ignore[return-value]


@dataclass(frozen=True)
class DispatchConfig:
    profile: str | None = None
    ulp_budget: int | None = None
    timeout: float | None = None
    label: str | None = None
    max_output_bytes: int | None = None
    workgroup_override: tuple[int, int, int] | None = None
    grid_override: tuple[int, int, int] | None = None
    dispatch_elements: int | None = None
    dispatch_grid: tuple[int, int, int] | None = None
    fixpoint_iterations: int = 1
    cooperative: bool = False
    specialization: Any = None  # SpecMap (a plain dict is converted)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.specialization is not None:
            from .specialization import SpecMap

            spec = self.specialization
            set_(self, "specialization", spec if isinstance(spec, SpecMap) else SpecMap(spec) or None)
        set_(self, "workgroup_override", _triple("workgroup_override", self.workgroup_override, False))
        set_(self, "grid_override", _triple("grid_override", self.grid_override, True))
        set_(self, "dispatch_grid", _triple("dispatch_grid", self.dispatch_grid, True))
        if self.grid_override is not None and self.dispatch_grid is not None:
            raise InvalidProgram("DispatchConfig sets both grid_override and dispatch_grid.",
                                 "set one: grid_override counts workgroups, dispatch_grid "
                                 "counts invocations.")
        if not isinstance(self.fixpoint_iterations, int) or self.fixpoint_iterations < 1:
            raise InvalidProgram(
                f"DispatchConfig.fixpoint_iterations={self.fixpoint_iterations!r}; 0 iterations "
                "would never run the program.", "use fixpoint_iterations >= 1 (1 = one dispatch).")
        if self.timeout is not None and not self.timeout > 0:
            raise InvalidProgram(f"DispatchConfig.timeout={self.timeout!r} is not positive.",
                                 "pass a timeout in seconds > 0, or None for no limit.")
        for name in ("ulp_budget", "max_output_bytes", "dispatch_elements"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 0):
                raise InvalidProgram(f"DispatchConfig.{name}={v!r} is not a non-negative integer.",
                                     f"pass {name} as an int >= 0, or None.")

    def code_key(self) -> tuple:
        """The fields that change generated code: part of every pipeline cache key."""
        spec = self.specialization.digest() if self.specialization else None
        return (self.ulp_budget, self.workgroup_override, spec)

    def with_(self, **changes: Any) -> DispatchConfig:
        return replace(self, **changes)


DEFAULT = DispatchConfig()


def default_ulp_budget(op_name: str) -> int:
    """Documented default ULP budget of each transcendental (docs/semantics.md)."""
    return {"exp": 4, "exp2": 4, "log": 4, "log2": 4, "sin": 4, "cos": 4, "tan": 8,
            "tanh": 8}.get(op_name, 0)
