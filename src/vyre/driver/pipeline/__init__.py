"""Pipeline plumbing: `compile(backend, program, config) -> Pipeline`.

`compile` validates once (validation cache keyed by fingerprint), then uses the backend's
`compile_native` or a passthrough pipeline, and caches the result in-process under a
`PipelineKey` (backend id + version, device fingerprint, program fingerprint, code-affecting
config). `snapshot()` reports hits and misses; `explain_miss()` says which key component
differed from the nearest cached entry. `DiskCache` is the on-disk artifact cache drivers use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.ir.program import Program

from ..backend import CompiledPipeline, PassthroughPipeline, VyreBackend
from ..config import DEFAULT, DispatchConfig
from ..errors import InvalidProgram
from ..pending import PendingDispatch, TimedDispatchResult
from ..validation import VALIDATION_CACHE
from .disk import DiskCache, cache_root
from .key import PipelineKey

__all__ = ["DiskCache", "NativeCache", "Pipeline", "PipelineCacheSnapshot", "PipelineKey", "cache_root",
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

    @property
    def program(self) -> Program:
        return self.compiled.program

    def _cfg(self, config: DispatchConfig | None) -> DispatchConfig:
        if config is None:
            return self.config
        if config.code_key() != self.config.code_key():
            raise InvalidProgram(
                "dispatch config changes code-affecting fields (ulp_budget/workgroup_override) "
                "of a compiled pipeline.", "compile the program again with that config.",
                backend=self.key.backend_id)
        return config

    def dispatch(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list[bytes]:
        return self.compiled.dispatch(inputs, self._cfg(config))

    def dispatch_timed(self, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> TimedDispatchResult:
        return self.compiled.dispatch_timed(inputs, self._cfg(config))

    def dispatch_async(self, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> PendingDispatch:
        return self.compiled.dispatch_async(inputs, self._cfg(config))

    __call__ = dispatch


_lock = threading.Lock()
_cache: OrderedDict[PipelineKey, Pipeline] = OrderedDict()
_stats = {"hits": 0, "misses": 0}
CAPACITY = 1024


def key_for(backend: VyreBackend, program: Program, config: DispatchConfig | None = None) -> PipelineKey:
    config = config or DEFAULT
    from vyre.ir.fingerprint import fingerprint

    return PipelineKey(backend.id(), backend.version(), backend.device_fingerprint(),
                       fingerprint(program), config.code_key())


def compile(backend: VyreBackend, program: Program, config: DispatchConfig | None = None) -> Pipeline:
    config = config or DEFAULT
    VALIDATION_CACHE.require_valid(program, backend.id())
    key = key_for(backend, program, config)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            _stats["hits"] += 1
            return hit
    native = backend.compile_native_shared(program, config)
    compiled = native if native is not None else PassthroughPipeline(backend, program, config)
    pipe = Pipeline(key, backend, compiled, native is not None, config)
    with _lock:
        _stats["misses"] += 1
        _cache[key] = pipe
        if len(_cache) > CAPACITY:
            _cache.popitem(last=False)
    return pipe


class NativeCache:
    """A driver's own cache of compiled pipelines, keyed by program fingerprint and
    code-affecting config; it validates each program once before building and counts hits
    and misses for `pipeline_cache_snapshot()`."""

    def __init__(self, backend_id: str) -> None:
        self.backend_id = backend_id
        self.entries: dict[tuple, Any] = {}
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def get_or_build(self, program: Program, config: DispatchConfig, build) -> Any:
        from vyre.ir.fingerprint import fingerprint

        key = (fingerprint(program), config.code_key())
        hit = self.entries.get(key)
        if hit is not None:
            self.hits += 1
            return hit
        VALIDATION_CACHE.require_valid(program, self.backend_id)
        with self._lock:
            hit = self.entries.get(key)
            if hit is None:
                hit = self.entries[key] = build()
                self.misses += 1
        return hit

    def snapshot(self) -> PipelineCacheSnapshot:
        return PipelineCacheSnapshot(self.hits, self.misses, len(self.entries), len(self.entries))

    def clear(self) -> None:
        self.entries.clear()


def snapshot() -> PipelineCacheSnapshot:
    with _lock:
        return PipelineCacheSnapshot(_stats["hits"], _stats["misses"], len(_cache),
                                     sum(1 for p in _cache.values() if p.native))


def clear(backend_id: str | None = None) -> None:
    """Forget cached pipelines (of one backend, or all)."""
    with _lock:
        for k in [k for k in _cache if backend_id is None or k.backend_id == backend_id]:
            del _cache[k]


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
