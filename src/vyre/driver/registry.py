"""Backend discovery, precedence and acquisition.

Backends register through `importlib.metadata` entry points in the group ``vyre.backends``;
each entry point names a `BackendRegistration`. Loading registrations imports only the
driver package's ``__init__`` (no vendor module, no device): the ``factory`` runs on
`acquire`. `register()` adds one in-process (plugins, tests). Ordering by precedence is
ascending and stable, and is part of the public API.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from vyre.ir.errors import did_you_mean
from vyre.ir.program import Program

from . import settings
from .backend import VyreBackend
from .errors import BackendError, BackendUnavailable, Other, UnknownBackend, UnsupportedFeature
from .validation import default_supported_ops

log = logging.getLogger("vyre.registry")
GROUP = "vyre.backends"
ENV_BACKEND = "VYRE_BACKEND"


@dataclass(frozen=True)
class BackendRegistration:
    id: str
    precedence: int
    factory: str | Callable[[], VyreBackend] = field(compare=False)
    reference_oracle: bool = False
    dispatches: bool = True
    supported_ops: frozenset[str] | None = None  # None: every core op
    summary: str = ""
    requires: str = ""  # what must be installed; shown by `vyre doctor`
    implicit: bool = True  # may acquire_preferred/routing pick it (False: only when named)

    def make(self) -> VyreBackend:
        fn = self.factory
        if isinstance(fn, str):
            module, _, attr = fn.partition(":")
            fn = getattr(importlib.import_module(module), attr)
        return fn()


class RegistryError(Other):
    pass


_lock = threading.RLock()
_registrations: dict[str, BackendRegistration] | None = None
_instances: dict[str, VyreBackend] = {}
_extra: dict[str, BackendRegistration] = {}


_broken: dict[str, str] = {}


def _discover() -> dict[str, BackendRegistration]:
    found: dict[str, BackendRegistration] = {}
    sources: dict[str, str] = {}
    _broken.clear()
    for ep in importlib.metadata.entry_points(group=GROUP):
        try:
            reg = ep.load()
        except Exception as exc:  # a broken plugin must not hide the others: report it
            _broken[ep.name] = (f"entry point {ep.value} failed to load: {exc!r}. Fix: fix or "
                                f"uninstall the package providing {ep.value}.")
            log.warning("vyre: %s", _broken[ep.name])
            continue
        if not isinstance(reg, BackendRegistration):
            _broken[ep.name] = (f"entry point {ep.value} is not a BackendRegistration. Fix: point "
                                "the vyre.backends entry point at a BackendRegistration.")
            log.warning("vyre: %s", _broken[ep.name])
            continue
        if reg.id in found and sources[reg.id] != ep.value:
            raise RegistryError(f"backend id {reg.id!r} is registered twice ({sources[reg.id]} and "
                                f"{ep.value}).", "uninstall one of the two packages, or give one "
                                "backend another id.")
        found[reg.id] = reg
        sources[reg.id] = ep.value
    return found


def _all() -> dict[str, BackendRegistration]:
    global _registrations
    with _lock:
        if _registrations is None:
            _registrations = _discover()
        merged = dict(_registrations)
        merged.update(_extra)
        return merged


def broken_registrations() -> dict[str, str]:
    """Entry points that could not be loaded, with why (shown by `vyre backends`/`doctor`)."""
    _all()
    return dict(_broken)


def register(reg: BackendRegistration) -> BackendRegistration:
    """Register a backend in this process. Duplicate ids fail loudly."""
    with _lock:
        if reg.id in _all():
            raise RegistryError(f"backend id {reg.id!r} is already registered.",
                                "choose a unique id, or unregister() the existing one first.")
        _extra[reg.id] = reg
    return reg


def unregister(backend_id: str) -> None:
    with _lock:
        _extra.pop(backend_id, None)
        inst = _instances.pop(backend_id, None)
    if inst is not None:
        try:
            inst.shutdown()
        except BackendError:
            pass


def registered_backends() -> list[BackendRegistration]:
    """Every registration, in id order."""
    return [r for _, r in sorted(_all().items())]


def registered_backends_by_precedence() -> list[BackendRegistration]:
    """Every registration in ascending precedence (ties by id): a stable, public order."""
    return sorted(_all().values(), key=lambda r: (r.precedence, r.id))


def unknown_backend_fix(backend_id: str) -> str:
    """The Fix for a backend id nothing is registered under: the closest id, then them all."""
    ids = sorted(_all())
    return f"{did_you_mean(backend_id, ids)}use one of {', '.join(ids) or 'none'} (`vyre backends` lists them)."


def backend_registration(backend_id: str) -> BackendRegistration:
    reg = _all().get(backend_id)
    if reg is None:
        raise UnknownBackend(backend_id, unknown_backend_fix(backend_id))
    return reg


def acquire(backend_id: str) -> VyreBackend:
    """The process-wide instance of backend ``backend_id``: created (and `prepare`d) on first
    use, and created anew after it was shut down."""
    with _lock:
        inst = _instances.get(backend_id)
        if inst is not None and not getattr(inst, "closed", False):
            return inst
        reg = backend_registration(backend_id)
        try:
            inst = reg.make()
            inst.prepare()
        except BackendError:
            raise
        except Exception as exc:
            raise BackendUnavailable(
                backend_id, f"{type(exc).__name__}: {exc}.",
                f"install what it needs ({reg.requires or 'see `vyre doctor`'}), or pick another "
                "backend with VYRE_BACKEND.") from exc
        _instances[backend_id] = inst
        return inst


def release(backend_id: str) -> None:
    """Shut down and forget the process-wide instance (the next `acquire` makes a new one)."""
    with _lock:
        inst = _instances.pop(backend_id, None)
    if inst is not None:
        inst.shutdown()


def acquire_preferred_dispatch_backend(program: Program | None = None) -> VyreBackend:
    """The best available dispatching backend: ``VYRE_BACKEND`` if set; for a given
    ``program``, the routing decision (ops, capabilities, measured timings); else the first
    by precedence that starts. Never a reference oracle unless named explicitly."""
    named = settings.get(ENV_BACKEND)
    if named:
        return acquire(named.strip())
    if program is not None:
        from .routing import Router

        return Router().acquire_for(program)
    failures: list[str] = []
    for reg in registered_backends_by_precedence():
        if reg.reference_oracle or not reg.dispatches or not reg.implicit:
            continue
        try:
            return acquire(reg.id)
        except BackendError as err:
            failures.append(f"{reg.id}: {err}")
    listing = "; ".join(failures) or "no dispatching backend is registered"
    raise UnsupportedFeature(
        f"no dispatch backend could be acquired ({listing})", "vyre",
        "install a backend's requirements (`vyre doctor` says what each needs), or set "
        "VYRE_BACKEND=reference to run on the CPU reference explicitly.")


def core_supported_ops() -> frozenset[str]:
    """The ops the reference executes: every op of the IR."""
    return default_supported_ops()


def why_not(program: Program, backend: VyreBackend) -> list[str]:
    """Reasons ``backend`` cannot run ``program`` (empty: it can)."""
    from .runnable import refusals

    return [r.reason for r in refusals(program, backend)]


def can_run(program: Program, backend: VyreBackend) -> bool:
    """Whether ``backend`` executes ``program``: its ops and its capability limits."""
    return not why_not(program, backend)
