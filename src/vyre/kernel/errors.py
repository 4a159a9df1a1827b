"""The kernel frontend's error: `KernelError`, with a stable code from `CODES`.

Every error raised for a ``@vyre.kernel`` — while compiling its Python source or while
calling it — is a `KernelError` whose text starts with the user's ``file:line``, then
``[Kxxx]``, and ends in ``Fix: ...`` in kernel words. The line is the one the error is about:
a statement's (a recursive call's); the ``def`` line for the function as a whole (parameters,
annotations, a call's arguments); the decorator's line for a wrong decorator argument. `CODES` is the table of codes (a test checks that every code
raised is in it and documented in docs/kernels.md).

A backend's error while a kernel runs (a while loop over its cap, a signed division by zero,
a device array a backend cannot read, ...) keeps its `BackendError` class and stable code;
`located` gives it the kernel's ``file:line`` (the line of the while loop or signed division
that can fail, when there is one) and a Fix in kernel words. `kernel_words` is the one table of IR-builder words in kernel
words, for the frontend's and the call's errors alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vyre.driver.errors import BackendError
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
    "K017": "a device function or intrinsic called from ordinary Python (they run inside kernels only)",
    "K020": "a call with the wrong number of arguments, or an argument of the wrong kind",
    "K021": "a launch option (grid, dim, elements, config, backend, workgroup_size) that is invalid",
    "K022": "an out= array that cannot receive an output",
    "K023": "input buffers of different lengths",
    "K024": "no backend can run the kernel as asked",
}


_FIXES = (   # IR-builder words in messages from vyre.ir and the backends, in kernel words
    ("cast one operand with Expr.cast", "cast one operand (e.g. i32(x), f32(x))"),
    ("cast it with Expr.cast(DataType.", "cast it with ("),
    ("cast the index with Expr.cast(DataType.U32, ...)", "cast the index: u32(i)"),
    ("Expr.cast(DataType.", "("), ("cast it with Expr.cast", "cast it"),
    ("Node.let_bind", "an assignment"), ("BufferDecl.output(..., count=n)", "Out[dtype, n]"),
    ("DispatchConfig(dispatch_elements=n)", "elements=n in the call"),
    ("Expr.u64(...), Expr.i32(...)", "u64(...), i32(...)"),
    ("MemoryOrdering.GRID_SYNC", "grid_sync()"), ("DispatchConfig.grid_override", "grid="),
    ("call it as a statement with Node.call", "call it as a statement"),
    # the dispatch errors of vyre.ir.errors.DISPATCH_ERRORS
    ("select(d.eq(0), 1, d)", "d if d != 0 else 1"), ("x/0 is all ones and x%0 is 0", "x // 0 is all "
                                                      "ones and x % 0 is 0"),
    ("raise the while loop's max_iterations", "raise the cap, @vyre.kernel(max_iterations=n)"),
    ("run this program on", "pass backend= one of"),
)


def kernel_words(text: str) -> str:
    """A Fix from `vyre.ir` or a backend in the words of a kernel's author."""
    for a, b in _FIXES:
        text = text.replace(a, b)
    return text


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


def called_on_host(what: str, fix: str) -> KernelError:
    """K017 for ``what`` (an intrinsic or a ``@vyre.func``) called from ordinary Python, naming
    the ``file:line`` of that call (the frame two above this one: the caller of ``__call__``)."""
    import sys

    frame = sys._getframe(2)
    return KernelError(f"{what} runs inside kernels only; it was called from ordinary Python.", fix, "K017",
                       f"{frame.f_code.co_filename}:{frame.f_lineno}")


_SITES = {"loop_limit": "the while loops", "division": "the signed // and %"}


def located(err: BackendError, where: str, sites: Mapping[str, Sequence[str]] | None = None,
            cap: int = 0) -> BackendError:
    """``err`` (raised by a backend while a kernel ran) as the same class with the same code and
    attributes, its text starting with ``where`` (the kernel's ``def`` line) and its Fix in
    kernel words. A dispatch error (``err.reason``) whose statements ``sites`` knows (reason ->
    their ``file:line``: while loops, signed divisions) starts with the line of the only one,
    or lists them; a ``loop_limit`` failure says the cap ``cap``. An error that names
    ``where`` already is returned as it is."""
    if not where or where in err.message:
        return err
    message, fix = err.message, kernel_words(err.fix)
    reason: str = getattr(err, "reason", None) or ""
    lines = (sites or {}).get(reason, ())
    if len(lines) == 1:
        where = lines[0]
    elif lines:
        message = f"{message.rstrip('.')} ({_SITES[reason]} are at {', '.join(lines)})."
    if reason == "loop_limit":
        message = message.replace("its max_iterations", f"its cap of {cap} trips (max_iterations)")
    new = BackendError.__new__(type(err))
    new.__dict__.update(err.__dict__)
    VyreError.__init__(new, f"{where}: {message}", fix)
    new.where = where  # type: ignore[attr-defined]
    return new


__all__ = ["CODES", "KernelError", "called_on_host", "kernel_words", "located"]
