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


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """``"did you mean 'opencl'? "`` when ``word`` is close to one of ``choices``, else ``""``
    (the one did-you-mean every error text uses)."""
    import difflib

    near = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {near[0]!r}? " if near else ""


class ValidationError(VyreError):
    """A Program failed `vyre.validate`; `.diagnostics` holds every finding."""

    def __init__(self, diagnostics: list) -> None:  # list[Diagnostic]
        self.diagnostics = list(diagnostics)
        message, fix = summarize(self.diagnostics)
        super().__init__(message, fix)


def summarize(diagnostics: list) -> tuple[str, str]:
    """(message, fix) for a list of diagnostics: each finding without its own Fix, then the
    first finding's Fix — so the text carries exactly one ``Fix:``."""
    parts = [str(d.message).split(" Fix: ", 1) for d in diagnostics]
    lines = "; ".join(f"{d.code} at {d.location}: {p[0]}" for d, p in zip(diagnostics[:8], parts))
    more = len(diagnostics) - 8
    if more > 0:
        lines += f"; and {more} more"
    first_fix = parts[0][1].rstrip(".") if parts and len(parts[0]) > 1 else "correct the program"
    return (f"invalid program ({len(diagnostics)} diagnostic(s)): {lines}",
            f"{first_fix} (vyre.validate() lists every diagnostic with its own fix).")


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


# Errors a running dispatch reports through its control block (docs/semantics.md): reason ->
# (the bit it sets in the error word, word 0 of the block, by an atomic OR; message; fix), in
# the order they are reported when several are set. The one place these bits are spelled: the
# code generators, the engine and the reference read them from here.
DISPATCH_ERRORS: dict[str, tuple[int, str, str]] = {
    "division": (1, "signed integer division or remainder by zero (or of the most negative value "
                 "by -1) in the dispatch.", "guard the divisor (e.g. select(d.eq(0), 1, d)) or use "
                 "an unsigned type, whose x/0 is all ones and x%0 is 0."),
    "loop_limit": (2, "a while loop reached its max_iterations with its condition still true.",
                   "raise the while loop's max_iterations, or make its condition fail sooner "
                   "(every invocation must leave the loop within the cap)."),
    # set only by generated code on devices that end loops on their own (vyre.lower.wgsl)
    "device_loops": (4, "the device stopped a loop before the program left it: this driver ends every "
                     "invocation's loops after a fixed number of trips in all (Mesa's llvmpipe/lavapipe: "
                     "65,535), so the results would be short.",
                     "run this program on the opencl, cuda or reference backend, or make each "
                     "invocation do fewer loop trips (spread the work over more invocations)."),
}
CTL_ERRORS: dict[str, int] = {reason: bit for reason, (bit, _, _) in DISPATCH_ERRORS.items()}


def dispatch_error(reason: str) -> ExecutionError:
    """The reference's error for a dispatch error ``reason`` (a key of `DISPATCH_ERRORS`)."""
    _, message, fix = DISPATCH_ERRORS[reason]
    return ExecutionError(reason, message, fix)
