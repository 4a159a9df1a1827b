"""The `BackendError` family: the one error type every backend emits.

Codes are stable and frozen (tests/driver/test_errors.py freezes the catalogue). ``str(err)``
always ends in ``Fix: <remediation>``. `BackendError` derives from `vyre.ir.VyreError`, so
``except VyreError`` catches everything vyre raises.
"""

from __future__ import annotations

from vyre.ir.errors import CTL_ERRORS, DISPATCH_ERRORS, VyreError


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


class UnknownBackend(UnsupportedFeature):
    """No backend is registered under the id asked for (the Fix offers the closest id)."""

    def __init__(self, backend: str, fix: str) -> None:
        self.name = f"backend {backend!r}"
        BackendError.__init__(self, f"there is no backend {backend!r}.", fix, backend="vyre")


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


# Bits of a dispatch's control-block error word (word 0), in the order they are reported when
# several are set: every kernel sets them with an atomic OR, the reference records them, and
# the engine raises the first set one, so every backend reports the same error. Spelled once,
# in `vyre.ir.errors.DISPATCH_ERRORS`.
_CTL_MESSAGES = {reason: (message, fix) for reason, (_, message, fix) in DISPATCH_ERRORS.items()}


def ctl_failure(word: int, backend: str) -> DispatchFailed:
    """The error for a non-zero control-block error word (`CTL_ERRORS`); ``reason`` names it."""
    for reason, bit in CTL_ERRORS.items():
        if word & bit:
            message, fix = _CTL_MESSAGES[reason]
            err = DispatchFailed(message, fix, backend=backend)
            err.reason = reason  # type: ignore[attr-defined]
            return err
    return DispatchFailed(f"the kernel reported error word 0x{word:x}.",
                          "this is a vyre bug: report it with the program.", backend=backend)


def indirect_failed(message: str, fix: str, backend: str | None = None) -> DispatchFailed:
    """An indirect_dispatch grid the device cannot launch (``reason == "indirect"``)."""
    err = DispatchFailed(message, fix, backend=backend)
    err.reason = "indirect"  # type: ignore[attr-defined]
    return err


def timed_out(timeout: float | None, backend: str) -> DispatchFailed:
    """A dispatch that did not finish within its ``DispatchConfig.timeout`` (cancelled)."""
    return DispatchFailed(f"dispatch did not finish within its {timeout} s timeout and was "
                          "cancelled.", "raise DispatchConfig.timeout, or dispatch less work per call.",
                          backend=backend)


def build_timed_out(timeout: float | None, backend: str, stopped: bool) -> DispatchFailed:
    """A dispatch whose program's build did not finish within its ``DispatchConfig.timeout``
    (`vyre.driver.engine.timed_build`): the build was killed (``stopped``) or goes on in the
    background for the next dispatch of the program."""
    after = "was stopped" if stopped else "goes on in the background (the next dispatch of the program uses it)"
    return DispatchFailed(f"dispatch did not finish within its {timeout} s timeout: building its kernel "
                          f"took longer, and {after}.",
                          "raise DispatchConfig.timeout, or build the program before dispatching it with a "
                          "timeout (backend.compile_native(program) or backend.precompile([program])).",
                          backend=backend)


def i32_division_failed(backend: str) -> DispatchFailed:
    """The error for a division fault (semantics row S3)."""
    return ctl_failure(CTL_ERRORS["division"], backend)


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
    if isinstance(err, ExecutionError) and err.kind in CTL_ERRORS:
        return ctl_failure(CTL_ERRORS[err.kind], backend or "")
    if isinstance(err, ExecutionError) and err.kind == "indirect":
        return indirect_failed(err.message, err.fix, backend)
    return DispatchFailed(err.message, err.fix, backend=backend)
