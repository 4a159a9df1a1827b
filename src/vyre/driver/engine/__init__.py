"""The dispatch engine: one recipe for every entry point of every compiled backend.

``core``      `EngineBackend` (the contract's entry points as template methods) and
              `EnginePipeline` (a compiled program).
``resident``  `Bound` (resident dispatches with packed arguments) and `EngineBatch`.
``memory``    resident buffers: allocate, upload, read back, free.
``artifacts`` compiled programs on disk, loaded without validation or lowering.
``farm``      many programs built at once in worker processes (`precompile`).
``timed_build`` builds bounded by the dispatch's ``timeout`` (a killed worker, or a helper
              thread whose result the next dispatch takes).
``plan``      `Prepared` (shape, limits, copies and staging per input-size set) and `Limits`.
``device``    `Device`, the small interface a concrete driver implements (build, alloc,
              upload, download, zero, pack, launch, fence, wait, errors).

A new backend is a `Device` subclass whose `capabilities()` record names it and declares what
it runs (the engine answers every capability query from that record); ``EngineBackend(device)``
is the backend. The rules (validation, input checks, limits, budgets, timeouts, fixpoint,
counters, error flags, lifecycle) come with the engine.
"""

from .core import EngineBackend, EnginePipeline
from .device import Cancelled, Ctl, Device, HostBuffer, Kernel
from .plan import Limits, Prepared
from .resident import Bound, EngineBatch

__all__ = ["Bound", "Cancelled", "Ctl", "Device", "EngineBackend", "EngineBatch", "EnginePipeline",
           "HostBuffer", "Kernel", "Limits", "Prepared"]
