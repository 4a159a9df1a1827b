"""Bounded caches: the one place the driver layer's size-limited tables come from.

Every cache of the driver layer and the drivers is a `cachetools` cache, so their eviction
rules are written once (by cachetools), not as hand-made `OrderedDict` bookkeeping:

* `lru` — least recently used goes first; lookups update the order, so callers share it
  under a lock (the pipeline cache, the validation cache, loaded CUDA modules);
* `fifo` — the oldest entry goes first; lookups never write, so a hot path may read it
  without a lock while writers hold one (the engine's pipelines and shapes). ``on_evict``
  is called with each value the cache pushes out or `clear` empties, so a table that owns
  device objects releases them in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cachetools import FIFOCache, LRUCache


class _Fifo(FIFOCache):
    """A FIFOCache that hands every value it drops to ``on_evict``."""

    def __init__(self, maxsize: int, on_evict: Callable[[Any], None] | None = None) -> None:
        super().__init__(maxsize)
        self._on_evict = on_evict

    def get(self, key: Any, default: Any = None) -> Any:
        """One lookup (cachetools' ``get`` tests membership, then reads: a writer between the
        two would make a lock-free reader raise)."""
        try:
            return self[key]
        except KeyError:
            return default

    def popitem(self) -> tuple[Any, Any]:
        key, value = super().popitem()
        if self._on_evict is not None:
            self._on_evict(value)
        return key, value

    def clear(self) -> None:
        """Empty the cache oldest first, each value through ``on_evict``."""
        while True:
            try:
                self.popitem()
            except KeyError:
                return


def lru(maxsize: int) -> LRUCache:
    """A least-recently-used cache of at most ``maxsize`` entries (lookups reorder it)."""
    return LRUCache(maxsize)


def fifo(maxsize: int, on_evict: Callable[[Any], None] | None = None) -> FIFOCache:
    """An oldest-first cache of at most ``maxsize`` entries whose lookups never write;
    ``on_evict(value)`` runs for each value evicted or cleared."""
    return _Fifo(maxsize, on_evict)
