"""vyre.driver — the substrate-neutral driver layer (the seeds' vyre-driver).

Owns the frozen backend contract, errors, DispatchConfig, the registry and routing, the
pipeline cache (in-process and on disk), shadow diffing, speculative dispatch, binding plans,
program walks, validation, diagnostics, observability and migration. It never touches a device, never
imports a concrete driver or a vendor module, and reaches the reference only through
callables handed to it.
"""

from . import (
    batch,
    binding,
    diagnostics,
    engine,
    fusion,
    inputs,
    migration,
    observability,
    persistent,
    pipeline,
    program_walks,
    registry,
    routing,
    settings,
    shadow,
    specialization,
    speculate,
    subgroup,
    tuner,
    validation,
)
from .backend import CompiledPipeline, PassthroughPipeline, Resource, VyreBackend
from .batch import Batch
from .binding import BindingPlan, BindingRole
from .capability import BackendCapability, DeviceProfile
from .config import DispatchConfig
from .errors import (
    CATALOGUE,
    BackendError,
    BackendUnavailable,
    CooperativeResidencyExceeded,
    DeviceLost,
    DeviceOutOfMemory,
    DispatchFailed,
    InvalidInput,
    InvalidProgram,
    KernelCompileFailed,
    LimitExceeded,
    Other,
    PoisonedLock,
    UnknownBackend,
    UnsupportedFeature,
    ValidationFailed,
)
from .pending import PendingDispatch, ReadyPending, TimedDispatchResult
from .program_walks import OutputBindingLayout
from .registry import (
    BackendRegistration,
    acquire,
    acquire_preferred_dispatch_backend,
    backend_registration,
    can_run,
    core_supported_ops,
    register,
    registered_backends,
    registered_backends_by_precedence,
    unregister,
)
from .shadow import DivergenceError, DivergenceEvent, ShadowedPipeline
from .speculate import (
    AdaptiveSpeculator,
    SpeculationMode,
    SpeculationReport,
    SpeculativeDispatchPlan,
    dispatch_prefilter_confirm,
)

__all__ = [
    "CATALOGUE", "Batch", "BackendCapability", "BackendError", "BackendUnavailable", "UnknownBackend", "BackendRegistration", "BindingPlan",
    "BindingRole", "CompiledPipeline", "CooperativeResidencyExceeded", "DeviceLost",
    "DeviceOutOfMemory", "DeviceProfile", "DispatchConfig", "DispatchFailed", "DivergenceError",
    "DivergenceEvent", "InvalidProgram", "KernelCompileFailed", "Other", "OutputBindingLayout",
    "PassthroughPipeline", "PendingDispatch", "PoisonedLock", "ReadyPending", "Resource",
    "ShadowedPipeline", "TimedDispatchResult", "UnsupportedFeature", "ValidationFailed",
    "VyreBackend", "acquire", "acquire_preferred_dispatch_backend", "backend_registration",
    "batch", "binding", "fusion", "persistent", "routing", "specialization", "subgroup", "tuner", "can_run", "core_supported_ops", "engine", "inputs", "InvalidInput", "LimitExceeded", "diagnostics", "migration",
    "observability", "pipeline", "program_walks", "register", "registered_backends",
    "registered_backends_by_precedence", "registry", "shadow", "unregister", "validation",
    "AdaptiveSpeculator", "SpeculationMode", "SpeculationReport", "SpeculativeDispatchPlan",
    "dispatch_prefilter_confirm", "speculate",
]

settings.configure_logging()   # VYRE_LOG, applied once when the driver layer loads
