"""What the driver enforces for every backend, around every dispatch: the output byte
budget (``max_output_bytes``), the wall-clock ``timeout`` (with cooperative cancellation),
``fixpoint_iterations`` and the observability counters. Backends never re-implement these.

`enforced(fn)` wraps a backend's ``dispatch``/``dispatch_borrowed`` (and a pipeline's
``dispatch``) when the class is defined; nested calls (a default method delegating to
another) are enforced once, at the outermost call.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from vyre.ir.errors import VyreError

from . import observability
from .config import DEFAULT, DispatchConfig
from .errors import BackendError, DispatchFailed, InvalidProgram, from_foundation
from .program_walks import input_sizes

_state = threading.local()
_cancel: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "vyre_cancel", default=None)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cancel_requested() -> bool:
    """True once the dispatch running in this context passed its timeout. Long-running
    backends poll it and abort with `DispatchFailed`."""
    ev = _cancel.get()
    return ev is not None and ev.is_set()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="vyre-timeout")
        return _pool


def run_with_timeout(fn: Callable[[], Any], timeout: float, backend: str) -> Any:
    event = threading.Event()

    def body() -> Any:
        _cancel.set(event)
        return fn()

    ctx = contextvars.copy_context()
    future = _executor().submit(ctx.run, body)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        event.set()
        raise DispatchFailed(
            f"dispatch did not finish within its {timeout} s timeout and was cancelled.",
            "raise DispatchConfig.timeout, or dispatch less work per call.", backend=backend) from None


def output_bytes(program, nbytes: Sequence[int], config: DispatchConfig) -> int:
    from .program_walks import launch_for_sizes

    launch = launch_for_sizes(program, nbytes, config)
    counts = dict(launch.counts)
    return sum(counts[b.name] * b.dtype.size for b in program.outputs)


def check_output_budget(program, nbytes: Sequence[int], config: DispatchConfig, backend: str) -> None:
    if config.max_output_bytes is None:
        return
    need = output_bytes(program, nbytes, config)
    if need > config.max_output_bytes:
        raise InvalidProgram(
            f"dispatch would produce {need} output bytes, over max_output_bytes="
            f"{config.max_output_bytes}.", "raise DispatchConfig.max_output_bytes or shrink the "
            "outputs (declare smaller counts or pass smaller inputs).", backend=backend)


def fixpoint(call: Callable[[list], list], program, inputs: list, iterations: int) -> list:
    """Re-dispatch up to ``iterations`` times, feeding READ_WRITE outputs back as inputs,
    until they stop changing."""
    ins = list(program.inputs)
    outs_list = list(program.outputs)
    pairs = [(i, outs_list.index(d)) for i, d in enumerate(ins) if d.is_output]
    outs = call(inputs)
    for _ in range(iterations - 1):
        changed = False
        nxt = list(inputs)
        for i, j in pairs:
            if bytes(memoryview(outs[j])) != bytes(memoryview(inputs[i]).cast("B")):
                changed = True
            nxt[i] = outs[j]
        if not changed:
            break
        inputs = nxt
        outs = call(inputs)
    return outs


def enforce(backend_id: str, program, inputs: Sequence[Any], config: DispatchConfig | None,
            call: Callable[[list, DispatchConfig], list]) -> list:
    """Run ``call(inputs, config)`` under the driver's per-dispatch rules."""
    config = DEFAULT if config is None else config
    if not isinstance(config, DispatchConfig):
        raise InvalidProgram(f"config is a {type(config).__name__}, not a DispatchConfig.",
                             "pass vyre.driver.DispatchConfig(...) or None.", backend=backend_id)
    if getattr(_state, "depth", 0):
        return call(list(inputs), config)
    _state.depth = 1
    started = time.perf_counter_ns()
    ok = False
    try:
        inputs = list(inputs)
        if config.max_output_bytes is not None:
            check_output_budget(program, input_sizes(inputs, backend_id), config, backend_id)
        if config.timeout is None and config.fixpoint_iterations == 1 and config.max_output_bytes is None:
            try:  # the common case: nothing to enforce but the error mapping
                outputs = call(inputs, config)
            except BackendError:
                raise
            except VyreError as err:
                raise from_foundation(err, backend_id) from None
            ok = True
            return outputs

        def run() -> list:
            _state.depth = 1
            try:
                if config.fixpoint_iterations > 1:
                    return fixpoint(lambda ins: call(ins, config), program, inputs,
                                    config.fixpoint_iterations)
                return call(inputs, config)
            finally:
                _state.depth = 0

        try:
            outputs = run_with_timeout(run, config.timeout, backend_id) if config.timeout else run()
        except BackendError:
            raise
        except VyreError as err:
            raise from_foundation(err, backend_id) from None
        if config.max_output_bytes is not None:
            total = sum(len(memoryview(o).cast("B")) for o in outputs)
            if total > config.max_output_bytes:
                raise InvalidProgram(f"backend returned {total} output bytes, over "
                                     f"max_output_bytes={config.max_output_bytes}.",
                                     "raise DispatchConfig.max_output_bytes.", backend=backend_id)
        ok = True
        return outputs
    finally:
        _state.depth = 0
        observability.record_dispatch(backend_id, time.perf_counter_ns() - started, ok,
                                      config.label)


def enforced(fn: Callable) -> Callable:
    """Decorate ``VyreBackend.dispatch``-shaped methods (self, program, inputs, config)."""
    if getattr(fn, "__vyre_enforced__", False):
        return fn

    @functools.wraps(fn)
    def wrapper(self, program, inputs, config=None):
        return enforce(self.id(), program, inputs, config,
                       lambda ins, cfg: fn(self, program, ins, cfg))

    wrapper.__vyre_enforced__ = True  # type: ignore[attr-defined]
    return wrapper


def enforced_pipeline(fn: Callable) -> Callable:
    """Decorate ``CompiledPipeline.dispatch``-shaped methods (self, inputs, config)."""
    if getattr(fn, "__vyre_enforced__", False):
        return fn

    @functools.wraps(fn)
    def wrapper(self, inputs, config=None):
        return enforce(self.backend_id(), self.program, inputs, config,
                       lambda ins, cfg: fn(self, ins, cfg))

    wrapper.__vyre_enforced__ = True  # type: ignore[attr-defined]
    return wrapper
