"""`DispatchConfig`: the frozen per-call options bag.

Every field is checked for type and range when the config is built: a bad value is an
`InvalidProgram` with a Fix, never a raw TypeError/ValueError later. Only fields that change
generated code (``ulp_budget``, ``workgroup_override``, ``specialization``) enter pipeline
cache keys (`code_key`).

``profile`` names a dispatch profile from `PROFILES` (the seeds' per-call tuning hint):
``"default"``, ``"latency"`` (never autotune: the first dispatch is as fast as the rest) or
``"throughput"`` (autotune the workgroup size where the program allows it, whatever
``VYRE_AUTOTUNER`` says). ``speculation`` (`SpeculationMode`, or its string ``"auto"``,
``"force"``, ``"disable"``; None means AUTO) picks the path of `vyre.driver.speculate.dispatch_prefilter_confirm`;
it never changes generated code. ``cooperative=True`` asks for a single-launch grid barrier; backends
without one refuse it (`UnsupportedFeature`) instead of silently splitting the launch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from .errors import InvalidProgram
from .speculate import SpeculationMode

MAX_TIMEOUT_S = 7 * 24 * 3600.0   # a week: anything longer is a mistake, not a deadline
MAX_AXIS = 2**32 - 1
PROFILES = ("default", "latency", "throughput")


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np

            if isinstance(value, np.integer):
                value = int(value)
            else:
                raise TypeError
        except TypeError:
            raise InvalidProgram(f"DispatchConfig.{name}={value!r} is not an integer.",
                                 f"pass {name} as an int in {lo}..{hi}.") from None
    if not lo <= value <= hi:
        raise InvalidProgram(f"DispatchConfig.{name}={value!r} is outside {lo}..{hi}.",
                             f"pass {name} as an int in {lo}..{hi}.")
    return value


def _triple(name: str, value: Any, allow_zero: bool) -> tuple[int, int, int] | None:
    if value is None:
        return None
    lo = 0 if allow_zero else 1
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = (value, 1, 1)
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise InvalidProgram(f"DispatchConfig.{name}={value!r} is not three sizes.",
                             f"pass {name}=(x, y, z) with integers >= {lo}, or None.")
    items = tuple(value)
    if len(items) != 3:
        raise InvalidProgram(f"DispatchConfig.{name}={value!r} has {len(items)} axes, not 3.",
                             f"pass {name}=(x, y, z) with integers >= {lo}, or None.")
    return tuple(_int(f"{name}[{i}]", v, lo, MAX_AXIS) for i, v in enumerate(items))  # type: ignore[return-value]


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
    speculation: SpeculationMode = SpeculationMode.AUTO

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.specialization is not None:
            from .specialization import SpecMap

            set_(self, "specialization", SpecMap.of(self.specialization) or None)
        set_(self, "workgroup_override", _triple("workgroup_override", self.workgroup_override, False))
        set_(self, "grid_override", _triple("grid_override", self.grid_override, True))
        set_(self, "dispatch_grid", _triple("dispatch_grid", self.dispatch_grid, True))
        if self.grid_override is not None and self.dispatch_grid is not None:
            raise InvalidProgram("DispatchConfig sets both grid_override and dispatch_grid.",
                                 "set one: grid_override counts workgroups, dispatch_grid "
                                 "counts invocations.")
        if type(self.fixpoint_iterations) is not int or self.fixpoint_iterations != 1:
            if type(self.fixpoint_iterations) is int and self.fixpoint_iterations < 1:
                raise InvalidProgram(
                    f"DispatchConfig.fixpoint_iterations={self.fixpoint_iterations!r}; 0 iterations "
                    "would never run the program.", "use fixpoint_iterations >= 1 (1 = one dispatch).")
            set_(self, "fixpoint_iterations", _int("fixpoint_iterations", self.fixpoint_iterations, 1, 1 << 20))
        if self.timeout is not None:
            t = self.timeout
            if isinstance(t, bool) or not isinstance(t, int | float):
                raise InvalidProgram(f"DispatchConfig.timeout={t!r} is not a number of seconds.",
                                     "pass a timeout in seconds (a float > 0), or None.")
            if not (math.isfinite(t) and 0 < t <= MAX_TIMEOUT_S):
                raise InvalidProgram(f"DispatchConfig.timeout={t!r} is not in (0, {MAX_TIMEOUT_S:g}] s.",
                                     "pass a finite timeout in seconds > 0, or None for no limit.")
            set_(self, "timeout", float(t))
        for name, hi in (("ulp_budget", 1 << 24), ("max_output_bytes", 1 << 62),
                         ("dispatch_elements", MAX_AXIS)):
            v = getattr(self, name)
            if v is not None:
                set_(self, name, _int(name, v, 0, hi))
        if self.profile is not None and self.profile not in PROFILES:
            raise InvalidProgram(f"DispatchConfig.profile={self.profile!r} is not a known profile.",
                                 f"use one of {', '.join(PROFILES)}, or None.")
        if self.label is not None and not isinstance(self.label, str):
            raise InvalidProgram(f"DispatchConfig.label={self.label!r} is not a str.",
                                 "pass a short string label, or None.")
        if type(self.speculation) is not SpeculationMode:
            set_(self, "speculation", SpeculationMode.AUTO if self.speculation is None
                 else SpeculationMode.of(self.speculation))
        if not isinstance(self.cooperative, bool):
            raise InvalidProgram(f"DispatchConfig.cooperative={self.cooperative!r} is not a bool.",
                                 "pass cooperative=True or False.")

    def code_key(self) -> tuple:
        """The fields that change generated code: part of every pipeline cache key."""
        key = self.__dict__.get("_code_key")
        if key is None:
            spec = self.specialization.digest() if self.specialization else None
            key = (self.ulp_budget, self.workgroup_override, spec)
            object.__setattr__(self, "_code_key", key)
        return key

    @property
    def plain(self) -> bool:
        """No rule beyond the input checks applies (the fast path)."""
        return self.timeout is None and self.fixpoint_iterations == 1 and self.max_output_bytes is None

    def with_(self, **changes: Any) -> DispatchConfig:
        """This config with the named fields changed (checked like a new one)."""
        return replace(self, **changes)


DEFAULT = DispatchConfig()

