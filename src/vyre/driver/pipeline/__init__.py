"""Pipeline plumbing: `compile(backend, program, config) -> Pipeline`.

`compile` looks the program up by its exact identity first (a program compiled before needs
no validation and no canonical form). On a miss the backend's `compile_native` runs first:
an engine backend validates there, or loads a kernel built in an earlier process from its disk
cache with no validation at all (the entry exists only because validation passed); a backend
without native compilation gets the validation cache and a passthrough pipeline. The result
is cached in-process under a `PipelineKey` (backend id + version, device fingerprint, program
fingerprint — which keeps buffer declaration order —, code-affecting config), so programs
built differently but meaning the same share one pipeline. `snapshot()` reports hits and misses;
`explain_miss()` says which key component differed from the nearest cached entry. `clear()`
forgets a backend's pipelines (its `try_recover` and `shutdown` call it). `DiskCache` is the
on-disk artifact cache drivers use.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.ir.program import Program

from ..backend import CompiledPipeline, PassthroughPipeline, VyreBackend
from ..bounded import lru
from ..config import DEFAULT, DispatchConfig
from ..errors import InvalidProgram
from ..pending import PendingDispatch, TimedDispatchResult
from ..validation import VALIDATION_CACHE
from .disk import DiskCache, cache_root
from .key import PipelineKey

__all__ = ["DiskCache", "Pipeline", "PipelineCacheSnapshot", "PipelineKey", "cache_root",
           "clear", "compile", "explain_miss", "key_for", "snapshot"]


@dataclass(frozen=True)
class PipelineCacheSnapshot:
    hits: int
    misses: int
    entries: int
    native: int = 0


@dataclass(eq=False)
class Pipeline:
    """A compiled per-program handle. `dispatch` is bit-identical to ``backend.dispatch``."""

    key: PipelineKey
    backend: VyreBackend
    compiled: CompiledPipeline
    native: bool
    config: DispatchConfig

    def __repr__(self) -> str:
        return (f"<Pipeline {self.key.backend_id} program={self.key.program_fingerprint.hex()[:12]} "
                f"native={self.native}>")

    @property
    def program(self) -> Program:
        return self.compiled.program

    def _cfg(self, config: DispatchConfig | None) -> DispatchConfig:
        if config is None:
            return self.config
        if not isinstance(config, DispatchConfig):
            raise InvalidProgram(f"config is a {type(config).__name__}, not a DispatchConfig.",
                                 "pass vyre.driver.DispatchConfig(...) or None.",
                                 backend=self.key.backend_id)
        if config.code_key() != self.config.code_key():
            raise InvalidProgram(
                "dispatch config changes code-affecting fields (ulp_budget/workgroup_override/"
                "specialization) of a compiled pipeline.", "compile the program again with that config.",
                backend=self.key.backend_id)
        return config

    def dispatch(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list[bytes]:
        return self.compiled.dispatch(inputs, self._cfg(config))

    def dispatch_borrowed(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list[bytes]:
        return self.compiled.dispatch_borrowed(inputs, self._cfg(config))

    def dispatch_timed(self, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> TimedDispatchResult:
        return self.compiled.dispatch_timed(inputs, self._cfg(config))

    def dispatch_async(self, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> PendingDispatch:
        return self.compiled.dispatch_async(inputs, self._cfg(config))

    def dispatch_resident_timed(self, resources: Sequence[Any],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        """Run on resident buffers (engine backends; others go through the backend)."""
        native = getattr(self.compiled, "dispatch_resident_timed", None)
        if native is not None:
            return native(resources, self._cfg(config))
        return self.backend.dispatch_resident_timed(self.program, resources, self._cfg(config))

    __call__ = dispatch


_lock = threading.Lock()
CAPACITY = 1024
_cache = lru(CAPACITY)   # PipelineKey -> Pipeline (shared by every thread under _lock)
_exact = lru(CAPACITY)   # by exact identity: no validation
_stats = {"hits": 0, "misses": 0}


def key_for(backend: VyreBackend, program: Program, config: DispatchConfig | None = None) -> PipelineKey:
    config = config or DEFAULT
    from vyre.ir.fingerprint import fingerprint

    return PipelineKey(backend.id(), backend.version(), backend.device_fingerprint(),
                       fingerprint(program), config.code_key())


def compile(backend: VyreBackend, program: Program, config: DispatchConfig | None = None) -> Pipeline:
    config = config or DEFAULT
    if not isinstance(config, DispatchConfig):
        raise InvalidProgram(f"config is a {type(config).__name__}, not a DispatchConfig.",
                             "pass vyre.driver.DispatchConfig(...) or None.", backend=backend.id())
    if not isinstance(program, Program):
        raise InvalidProgram(f"expected a vyre Program, got {type(program).__name__}.",
                             "build one with vyre.ir.Program.wrapped(...).", backend=backend.id())
    from vyre.ir.fingerprint import identity

    exact = (backend.id(), backend.version(), backend.device_fingerprint(), identity(program),
             config.code_key())
    with _lock:
        hit = _exact.get(exact)
        if hit is not None:
            _stats["hits"] += 1
            return hit
    native = backend.compile_native_shared(program, config)   # validates, or loads from disk
    if native is None:
        VALIDATION_CACHE.require_valid(program, backend.id())
    key = key_for(backend, program, config)   # the program is valid now
    with _lock:
        pipe = _cache.get(key)
        if pipe is not None:     # the same meaning, built differently: share its pipeline
            _stats["hits"] += 1
        else:
            compiled = native if native is not None else PassthroughPipeline(backend, program, config)
            pipe = _cache[key] = Pipeline(key, backend, compiled, native is not None, config)
            _stats["misses"] += 1
        _exact[exact] = pipe
    return pipe


def snapshot() -> PipelineCacheSnapshot:
    with _lock:
        return PipelineCacheSnapshot(_stats["hits"], _stats["misses"], len(_cache),
                                     sum(1 for p in _cache.values() if p.native))


def clear(backend_id: str | None = None, backend: VyreBackend | None = None) -> None:
    """Forget cached pipelines: all, one backend id's, or one backend instance's."""
    with _lock:
        for table in (_cache, _exact):
            for k in [k for k, p in table.items()
                      if (backend_id is None or p.key.backend_id == backend_id)
                      and (backend is None or p.backend is backend)]:
                del table[k]


def explain_miss(backend: VyreBackend, program: Program, config: DispatchConfig | None = None) -> str:
    """Why `compile` would miss (or that it would hit), naming the differing key parts."""
    key = key_for(backend, program, config)
    with _lock:
        if key in _cache:
            return "hit: an identical pipeline is cached."
        keys = list(_cache)
    if not keys:
        return "miss: the pipeline cache is empty."
    nearest = min(keys, key=lambda k: len(key.differences(k)))
    diff = key.differences(nearest)
    return (f"miss: the nearest cached pipeline ({nearest.backend_id}, program "
            f"{nearest.program_fingerprint.hex()[:16]}) differs in {', '.join(diff)}.")
