"""The kernel frontend's error: `KernelError`, with a stable code from `CODES`.

Every error raised for a ``@vyre.kernel`` — while compiling its Python source or while
calling it — is a `KernelError` whose text starts with the user's ``file:line`` (the line of
the statement, or the kernel's ``def`` line for call-side errors), then ``[Kxxx]``, and ends
in ``Fix: ...`` in kernel words. `CODES` is the table of codes (a test checks that every code
raised is in it and documented in docs/kernels.md).
"""

from __future__ import annotations

from vyre.ir import VyreError

CODES: dict[str, str] = {
    "K001": "the kernel's source is not available (lambda, exec, interactive prompt)",
    "K002": "a Python statement the kernel language does not compile",
    "K003": "a Python expression the kernel language does not compile",
    "K004": "operand or value types that do not match",
    "K005": "a literal its type cannot hold",
    "K006": "a parameter annotation that is not a kernel type",
    "K007": "a name that is not a local, parameter or numeric constant",
    "K008": "a buffer used as a value, rebound, or indexed wrongly",
    "K009": "a call of something that is not a device function",
    "K010": "wrong arguments to a device function",
    "K011": "control flow the kernel language refuses (return, grid_sync, range forms)",
    "K012": "shared()/local() arrays declared wrongly",
    "K013": "a recursive @vyre.func",
    "K014": "an N-D shape or index that does not fit the buffer",
    "K015": "the program the kernel compiles to is invalid (a vyre.validate diagnostic)",
    "K016": "the value of a float atomic used (it would depend on the order invocations ran in)",
    "K020": "a call with the wrong number of arguments, or an argument of the wrong kind",
    "K021": "a launch option (grid, dim, elements, config, backend, workgroup_size) that is invalid",
    "K022": "an out= array that cannot receive an output",
    "K023": "input buffers of different lengths",
    "K024": "no backend can run the kernel as asked",
}


class KernelError(VyreError):
    """A kernel's source, or a call of it, that vyre refuses. ``code`` is one of `CODES`;
    ``where`` is ``file:line`` (empty when unknown); the text is ``where: [code] message
    Fix: fix``."""

    def __init__(self, message: str, fix: str, code: str = "K002", where: str = "") -> None:
        if code not in CODES:  # pragma: no cover - a frontend bug, caught by the code-table test
            raise ValueError(f"unknown kernel error code {code}")
        self.code, self.where = code, where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}[{code}] {message}", fix)


__all__ = ["CODES", "KernelError"]
