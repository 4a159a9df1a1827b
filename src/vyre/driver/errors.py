"""The `BackendError` family: the one error type every backend emits.

Codes are stable and frozen (tests/driver/test_errors.py freezes the catalogue). ``str(err)``
always ends in ``Fix: <remediation>``. `BackendError` derives from `vyre.ir.VyreError`, so
``except VyreError`` catches everything vyre raises.
"""

from __future__ import annotations

from vyre.ir.errors import VyreError


class BackendError(VyreError):
    """Base of the family. ``code`` is the stable numeric code, ``kind`` its name."""

    code = 1999
    kind = "Other"

    def __init__(self, message: str, fix: str, *, backend: str | None = None) -> None:
        self.backend = backend
        prefix = f"[{backend}] " if backend else ""
        super().__init__(f"{prefix}{message}", fix)


class DeviceOutOfMemory(BackendError):
    code, kind = 1001, "DeviceOutOfMemory"

    def __init__(self, requested: int, available: int | None, *, backend: str | None = None,
                 fix: str | None = None) -> None:
        self.requested, self.available = requested, available
        have = "unknown" if available is None else f"{available} bytes"
        super().__init__(
            f"device allocation of {requested} bytes failed ({have} available).",
            fix or "dispatch smaller inputs, free resident buffers with free_resident(), or use a "
            "device with more memory.", backend=backend)


class UnsupportedFeature(BackendError):
    code, kind = 1002, "UnsupportedFeature"

    def __init__(self, name: str, backend: str, fix: str | None = None) -> None:
        self.name = name
        super().__init__(
            f"{name} is not supported by this backend.",
            fix or f"use a backend that supports {name} (`vyre backends` lists their "
            "capabilities), or avoid the feature.", backend=backend)


class BackendUnavailable(UnsupportedFeature):
    """A registered backend could not start here (missing package, device or driver)."""

    def __init__(self, backend: str, reason: str, fix: str) -> None:
        self.name = f"backend {backend}"
        BackendError.__init__(self, f"backend {backend!r} is unavailable: {reason}", fix,
                              backend=backend)


class PoisonedLock(BackendError):
    code, kind = 1003, "PoisonedLock"


class KernelCompileFailed(BackendError):
    code, kind = 1004, "KernelCompileFailed"

    def __init__(self, message: str, fix: str, *, backend: str | None = None,
                 log: str = "", source_path: str | None = None) -> None:
        self.log, self.source_path = log, source_path
        super().__init__(message, fix, backend=backend)


class DispatchFailed(BackendError):
    code, kind = 1005, "DispatchFailed"


class InvalidProgram(BackendError):
    """The program, its inputs or the dispatch config is invalid (validation failure)."""

    code, kind = 1006, "InvalidProgram"

    def __init__(self, message: str, fix: str, *, backend: str | None = None,
                 diagnostics: list | None = None) -> None:
        self.diagnostics = list(diagnostics or [])
        super().__init__(message, fix, backend=backend)


ValidationFailed = InvalidProgram


class InvalidInput(InvalidProgram):
    """An input (or resident upload) does not match what its buffer declares. ``reason`` is a
    stable string: input_count, input_type, input_dtype, input_byteorder, input_layout,
    input_size, input_device."""

    REASONS = ("input_count", "input_type", "input_dtype", "input_byteorder", "input_layout",
               "input_size", "input_device")

    def __init__(self, reason: str, message: str, fix: str, *, backend: str | None = None) -> None:
        self.reason = reason
        super().__init__(message, fix, backend=backend)


class LimitExceeded(InvalidProgram):
    """A dispatch asks for more than the backend declares it can do (``reason``: invocations,
    workgroup_size, grid, shared_memory, buffer_bytes, output_bytes). Raised before anything
    is allocated."""

    def __init__(self, reason: str, message: str, fix: str, *, backend: str | None = None) -> None:
        self.reason = reason
        super().__init__(message, fix, backend=backend)


class CooperativeResidencyExceeded(BackendError):
    code, kind = 1007, "CooperativeResidencyExceeded"


class DeviceLost(BackendError):
    code, kind = 1008, "DeviceLost"


class Other(BackendError):
    code, kind = 1999, "Other"


def i32_division_failed(backend: str) -> DispatchFailed:
    """The error every driver raises when its kernel's error flag reports an i32 division
    by zero or MIN / -1 (semantics row S3)."""
    return DispatchFailed("i32 division or remainder by zero (or -2147483648 / -1) in the dispatch.",
                          "guard the divisor (e.g. select(d.eq(0), 1, d)) or use u32, whose x/0 is "
                          "0xFFFFFFFF and x%0 is 0.", backend=backend)


def check_upload_size(nbytes: int, resource_len: int, backend: str) -> None:
    if nbytes != resource_len:
        raise InvalidProgram(f"upload of {nbytes} bytes into a {resource_len}-byte resident buffer.",
                             "upload exactly the allocated size.", backend=backend)


CATALOGUE: dict[int, type[BackendError]] = {
    cls.code: cls for cls in (DeviceOutOfMemory, UnsupportedFeature, PoisonedLock,
                              KernelCompileFailed, DispatchFailed, InvalidProgram,
                              CooperativeResidencyExceeded, DeviceLost, Other)
}


def from_foundation(err: VyreError, backend: str | None = None) -> BackendError:
    """Map a foundation error (validation, execution) to its BackendError kind."""
    from vyre.ir.errors import ExecutionError, ValidationError

    if isinstance(err, BackendError):
        return err
    if isinstance(err, ValidationError):
        return InvalidProgram(err.message, err.fix, backend=backend, diagnostics=err.diagnostics)
    if isinstance(err, ExecutionError) and err.kind == "inputs":
        return InvalidProgram(err.message, err.fix, backend=backend)
    return DispatchFailed(err.message, err.fix, backend=backend)
