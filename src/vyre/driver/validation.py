"""Program-level preconditions shared by every backend: the default supported-op set and a
successful-validation cache keyed by each program's exact identity (`vyre.ir.fingerprint.
identity`: the wire form as built, so two programs that canonicalise alike but differ in
validity never share an entry). Limits are checked by the engine (`vyre.driver.engine`)."""

from __future__ import annotations

import functools
import threading

from vyre.ir.fingerprint import identity
from vyre.ir.ops import all_op_ids
from vyre.ir.program import Program
from vyre.ir.validate import Diagnostic, validate

from .bounded import lru
from .errors import InvalidProgram


@functools.cache
def default_supported_ops() -> frozenset[str]:
    """Every OpId of the IR: what the reference executes (`core_supported_ops`)."""
    return all_op_ids()


class ValidationCache:
    """Remembers programs that validated, so a hot path validates each program once."""

    def __init__(self, capacity: int = 4096) -> None:
        self._ok = lru(capacity)
        self._lock = threading.Lock()
        self.capacity = capacity
        self.hits = self.misses = 0

    def require_valid(self, program: Program, backend: str | None = None) -> bytes:
        """Validate ``program`` (once per exact identity); return that identity."""
        try:
            fp = identity(program)
        except Exception:  # a structurally broken object cannot even be encoded
            _raise(validate(program) or [Diagnostic(
                "V030", "program", "the program cannot be encoded. Fix: build it with the vyre.ir "
                "constructors.")], backend)
        with self._lock:
            if fp in self._ok:
                self._ok[fp]          # a lookup refreshes the entry's recency
                self.hits += 1
                return fp
        diags = validate(program)
        if diags:
            _raise(diags, backend)
        with self._lock:
            self.misses += 1
            self._ok[fp] = None
        return fp


def _raise(diags: list, backend: str | None) -> None:
    from vyre.ir.errors import summarize

    message, fix = summarize(diags)
    raise InvalidProgram(message, fix, backend=backend, diagnostics=diags)


VALIDATION_CACHE = ValidationCache()

