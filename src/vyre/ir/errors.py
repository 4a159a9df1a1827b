"""The root of vyre's error family: every error a user can hit ends in ``Fix: ...``.

Owns `VyreError` and the foundation-level errors (validation, wire decoding, execution).
The driver layer's `BackendError` family derives from `VyreError` too, so a user can catch
one type for everything vyre raises.
"""

from __future__ import annotations


class VyreError(Exception):
    """An error with an actionable remediation. ``str(err)`` always ends in ``Fix: <fix>``."""

    def __init__(self, message: str, fix: str) -> None:
        self.message = message.rstrip()
        self.fix = fix.strip()
        super().__init__(f"{self.message} Fix: {self.fix}")


class ValidationError(VyreError):
    """A Program failed `vyre.validate`; `.diagnostics` holds every finding."""

    def __init__(self, diagnostics: list) -> None:  # list[Diagnostic]
        self.diagnostics = list(diagnostics)
        lines = "; ".join(f"{d.code} at {d.location}: {d.message}" for d in self.diagnostics[:8])
        more = len(self.diagnostics) - 8
        if more > 0:
            lines += f"; and {more} more"
        super().__init__(
            f"invalid program ({len(self.diagnostics)} diagnostic(s)): {lines}.",
            "correct the program as each diagnostic says, then validate again with vyre.validate().",
        )


class WireError(VyreError):
    """Bytes that are not a valid vyre wire-form Program."""

    def __init__(self, message: str, fix: str = "pass bytes produced by vyre.ir.wire.encode() "
                 "of a compatible vyre version; re-encode the program if the file was damaged.") -> None:
        super().__init__(message, fix)


class ExecutionError(VyreError):
    """A Program (or its inputs) cannot be executed as asked: the reference's run-time errors.

    ``kind`` is one of ``"inputs"`` (wrong count or size of input buffers), ``"division"``
    (i32 division/remainder by zero or MIN/-1), ``"limit"`` (a documented execution cap).
    """

    def __init__(self, kind: str, message: str, fix: str) -> None:
        self.kind = kind
        super().__init__(message, fix)
