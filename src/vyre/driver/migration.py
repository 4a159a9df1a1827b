"""Deprecation and semver registries: names that are going away, what replaces them, and
whether a backend's version satisfies what a certificate or caller requires."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from .diagnostics import BackendDiagnostic, Severity


@dataclass(frozen=True)
class Deprecation:
    name: str
    since: str
    removed_in: str
    replacement: str


_REGISTRY: dict[str, Deprecation] = {}


def deprecate(name: str, since: str, removed_in: str, replacement: str) -> Deprecation:
    d = Deprecation(name, since, removed_in, replacement)
    _REGISTRY[name] = d
    return d


def deprecation(name: str) -> Deprecation | None:
    return _REGISTRY.get(name)


def deprecation_diagnostic(name: str, backend: str = "vyre") -> BackendDiagnostic | None:
    d = _REGISTRY.get(name)
    if d is None:
        return None
    return BackendDiagnostic(backend, Severity.WARNING, "D001", name,
                             f"{name} is deprecated since {d.since} and is removed in "
                             f"{d.removed_in}. Fix: use {d.replacement}.")


def warn_if_deprecated(name: str) -> None:
    diag = deprecation_diagnostic(name)
    if diag is not None:
        warnings.warn(diag.message, DeprecationWarning, stacklevel=3)


_SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int] | None:
    m = _SEMVER.match(text or "")
    return tuple(int(g) for g in m.groups()) if m else None  # type: ignore[return-value]


def is_compatible(required: str, actual: str) -> bool:
    """Semver compatibility: same major (or, for 0.x, same minor) and actual >= required."""
    r, a = parse_version(required), parse_version(actual)
    if r is None or a is None:
        return False
    if r[0] == 0:
        return a[:2] == r[:2] and a >= r
    return a[0] == r[0] and a >= r
