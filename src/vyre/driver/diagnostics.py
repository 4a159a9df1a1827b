"""Backend diagnostic shaping: one record type for what validators, compilers and drivers
report, rendered the same way by the CLI and the conformance runner."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True)
class BackendDiagnostic:
    backend: str
    severity: Severity
    code: str
    location: str
    message: str  # ends in "Fix: ..." for errors and warnings

    def render(self) -> str:
        return f"{self.severity.value}[{self.code}] {self.backend} {self.location}: {self.message}"


def from_validation(diags: Iterable, backend: str = "ir") -> list[BackendDiagnostic]:
    """Lift `vyre.ir.Diagnostic`s into backend diagnostics."""
    return [BackendDiagnostic(backend, Severity.ERROR, d.code, d.location, d.message) for d in diags]


def from_error(err: Exception, backend: str, location: str = "dispatch") -> BackendDiagnostic:
    code = str(getattr(err, "code", "E"))
    return BackendDiagnostic(backend, Severity.ERROR, code, location, str(err))


def render_all(diags: Iterable[BackendDiagnostic]) -> str:
    return "\n".join(d.render() for d in diags)
