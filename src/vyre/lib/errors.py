"""The errors of `vyre.lib`: one `LibError` with a stable code per mistake a caller can make.

Errors a backend raises (a type it cannot run, a device failure) arrive unchanged as the
driver layer's `BackendError` family; both derive from `vyre.VyreError` and end in ``Fix:``.
"""

from __future__ import annotations

from vyre.ir import VyreError

CODES = {
    "L001": "unsupported dtype (not one the primitive takes, or two arrays that must match)",
    "L002": "bad shape (a multi-dimensional array where a vector belongs, or mismatched lengths)",
    "L003": "empty input where the result has no identity (min or max of nothing)",
    "L004": "an index or a value outside the range the primitive allows",
    "L005": "a bad argument (a size, a count, a workgroup size, an unknown name)",
}


class LibError(VyreError):
    """A caller's mistake in a `vyre.lib` call. ``code`` is one of `CODES`."""

    def __init__(self, code: str, message: str, fix: str) -> None:
        if code not in CODES:
            raise ValueError(f"unknown vyre.lib error code {code!r}")
        self.code = code
        super().__init__(f"[{code}] {message}", fix)


__all__ = ["CODES", "LibError"]
