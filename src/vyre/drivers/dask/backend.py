"""`DaskBackend`: a dispatch split by workgroup ranges across Dask workers, merged into the
reference's bytes.

Per dispatch: the rules every entry point applies (validation, input checks, launch sizes,
the config) run here first, with the same errors as every backend. Then the partition
decision (`vyre.driver.partition`) says whether the grid may be split; if so, the program
with a workgroup offset input is sent once per program (its wire bytes scattered to every
worker and cached by fingerprint there), the inputs are scattered once, each worker runs its
ranges on its own best backend (compiled once per worker), and the outputs merge by range or
by folding commutative atomics. Otherwise one worker runs the whole dispatch, and the
decision's reasons are kept (`last_decision`).

Dask does the scheduling, the transfers and the fault tolerance: a worker lost mid-dispatch
has its tasks re-run on the others (the inputs were broadcast, so every worker holds them).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError
from dataclasses import replace
from typing import Any

import numpy as np

import vyre
from vyre.driver import VyreBackend
from vyre.driver.bounded import fifo
from vyre.driver.capability import Capabilities, DeviceProfile, answer_queries
from vyre.driver.config import DEFAULT, DispatchConfig
from vyre.driver.errors import (
    CATALOGUE,
    BackendError,
    BackendUnavailable,
    DispatchFailed,
    from_foundation,
)
from vyre.driver.inputs import check_inputs
from vyre.driver.install import install_hint
from vyre.driver.partition import PartitionDecision, decide, merge, offset_program, owned, split
from vyre.driver.validation import VALIDATION_CACHE, default_supported_ops
from vyre.ir import VyreError
from vyre.ir.fingerprint import fingerprint
from vyre.ir.inline import inline
from vyre.ir.launch import effective_program, resolve
from vyre.ir.program import Program

ID = "dask"
POLL_S = 0.25
CLOSE_TIMEOUT_S = 10   # how often a waiting dispatch checks that the scheduler is still there
CLUSTER_FIX = ("check that the Dask scheduler and workers are running (a worker that keeps dying "
               "may be out of memory); then dispatch again, or call backend.shutdown() and "
               "vyre.driver.acquire('dask') for a fresh client.")


def cluster_failure(exc: BaseException) -> DispatchFailed:
    """The vyre error for anything the cluster raised (killed workers, a lost scheduler,
    closed connections): never a bare Dask or socket exception."""
    return DispatchFailed(f"the Dask cluster failed during the dispatch ({type(exc).__name__}: "
                          f"{str(exc)[:300] or 'no detail'}).", CLUSTER_FIX, backend=ID)


@answer_queries
class DaskBackend(VyreBackend):
    """Dispatches partitioned over a Dask cluster; its capabilities (``caps``) are what every
    worker's backend runs, read from the workers once, when the backend is made."""

    def __init__(self) -> None:
        try:
            import distributed  # noqa: F401
        except ImportError as exc:
            raise BackendUnavailable(ID, f"dask.distributed is not installed ({exc}).",
                                     f"{install_hint('dask')}.") from None
        from .cluster import connect

        try:
            self.client, self.cluster = connect()
        except Exception as exc:
            raise BackendUnavailable(ID, f"no Dask cluster could be reached or started ({exc}).",
                                     "check VYRE_DASK_SCHEDULER, or unset it for a LocalCluster.") from None
        self._lock = threading.Lock()
        self._wires = fifo(64)   # fingerprint -> scattered wire bytes
        self._decisions: dict[bytes, tuple[PartitionDecision, Program, Program]] = {}
        self._workers: list[dict[str, Any]] | None = None
        self.last_decision: PartitionDecision | None = None
        self._closed = False
        try:
            self.caps = self._capabilities()
        except Exception as exc:
            self.shutdown()
            raise BackendUnavailable(ID, f"the Dask workers could not describe their backends ({exc}).",
                                     "check that the workers start (VYRE_DASK_SCHEDULER, VYRE_DASK_WORKERS) "
                                     "and that each can acquire a vyre backend.") from None

    @property
    def closed(self) -> bool:
        """True after `shutdown()`: `vyre.driver.acquire('dask')` then makes a new client."""
        return self._closed

    # ---- capabilities --------------------------------------------------------------------------
    def workers(self) -> list[dict[str, Any]]:
        """What each worker runs on (backend id, device, pid), asked once."""
        if self._workers is None:
            from .worker import describe

            info = self.client.run(describe)
            self._workers = [dict(v, address=k) for k, v in sorted(info.items())]
        return self._workers

    def _capabilities(self) -> Capabilities:
        """What every worker runs: the ops all of them run, the smallest of their limits
        (workgroup memory included)."""
        ws = self.workers()
        ops = frozenset.intersection(*(frozenset(w["ops"]) for w in ws)) if ws else frozenset()
        names = ", ".join(f"{w['backend']}: {w['device']}" for w in ws)
        shared = min(w["max_shared"] for w in ws)   # workgroup memory every worker has
        profile = DeviceProfile(
            backend=ID, max_workgroup_size=tuple(min(w["max_wg"][i] for w in ws) for i in range(3)),  # type: ignore[arg-type]
            max_invocations_per_workgroup=min(w["max_inv"] for w in ws),
            max_storage_buffer_binding_size=min(w["max_buffer"] for w in ws),
            max_shared_memory_bytes=shared, has_shared_memory=shared > 0,
            device_name=f"{len(ws)} Dask workers ({names})")
        # speculation: fused prefilter/confirm programs run as written (tests/test_literal_search.py)
        return Capabilities(ID, vyre.__version__, profile, unsupported_ops=default_supported_ops() - ops,
                            speculation=True, distributed=True,
                            max_workgroups_per_dimension=min(w["max_groups"] for w in ws))

    # ---- the rules, then the split ------------------------------------------------------------
    def _prepare(self, program: Program, config: DispatchConfig) -> tuple[PartitionDecision, Program, Program]:
        if not isinstance(program, Program):
            from vyre.driver.errors import InvalidProgram

            raise InvalidProgram(f"expected a vyre Program, got {type(program).__name__}.",
                                 "build one with vyre.ir.Program.wrapped(...) or @vyre.kernel.", backend=ID)
        VALIDATION_CACHE.require_valid(program, ID)
        try:
            eff = effective_program(program, config)
        except VyreError as err:
            raise from_foundation(err, ID) from None
        key = fingerprint(eff)
        hit = self._decisions.get(key)
        if hit is None:   # decided on the inlined program; workers get the program as written
            hit = (decide(inline(eff)), eff, offset_program(eff))
            with self._lock:   # dispatches from many threads trim it together
                self._decisions[key] = hit
                while len(self._decisions) > 256:
                    self._decisions.pop(next(iter(self._decisions)))
        return hit

    def _wire(self, program: Program) -> tuple[str, Any]:
        """The program's fingerprint and its wire bytes, scattered to every worker once."""
        from vyre.ir import wire

        fp = fingerprint(program)
        with self._lock:
            fut = self._wires.get(fp)
            if fut is None:
                fut = self.client.scatter(wire.encode(program), broadcast=True, hash=False)
                self._wires[fp] = fut
        return fp.hex(), fut

    def dispatch(self, program: Program, inputs: Any, config: DispatchConfig | None = None) -> list[bytes]:
        if self._closed:
            raise DispatchFailed("the dask backend was shut down.", "acquire it again.", backend=ID)
        cfg = DEFAULT if config is None else config
        if not isinstance(cfg, DispatchConfig):
            from vyre.driver.errors import InvalidProgram

            raise InvalidProgram(f"config is a {type(cfg).__name__}, not a DispatchConfig.",
                                 "pass vyre.driver.DispatchConfig(...).", backend=ID)
        decision, flat, offset = self._prepare(program, cfg)
        self.last_decision = decision
        ins = check_inputs(flat.inputs, inputs, ID)
        data = [bytes(memoryview(x).cast("B")) for x in ins]
        try:
            launch = resolve(flat, [len(d) for d in data], cfg)
        except VyreError as err:
            raise from_foundation(err, ID) from None
        self._check_scheduler()
        try:
            try:
                return self._run(decision, flat, offset, data, launch, cfg)
            except CancelledError:
                # data this backend scattered earlier (a program's wire bytes) was lost with
                # the workers that held it: scatter again, once
                with self._lock:
                    self._wires.clear()
                self._check_scheduler()
                return self._run(decision, flat, offset, data, launch, cfg)
        except BackendError:
            raise
        except Exception as exc:   # KilledWorker, CancelledError, CommClosedError, OSError, ...
            raise cluster_failure(exc) from None

    def _check_scheduler(self) -> None:
        status = getattr(self.client, "status", "running")
        if status != "running":
            raise DispatchFailed(f"the Dask scheduler is not reachable (client status {status!r}).",
                                 CLUSTER_FIX, backend=ID)

    def _run(self, decision: PartitionDecision, flat: Program, offset: Program, data: list[bytes],
             launch: Any, cfg: DispatchConfig) -> list[bytes]:
        n_workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        gx, gy, gz = launch.grid
        if not decision.partitionable or n_workers < 2 or gx < 2:
            fp, wire = self._wire(flat)
            return self._gather([self.client.submit(_run, fp, wire, data, cfg, pure=False)], cfg.timeout)[0]
        ranges = split(gx, n_workers)
        fp, wire = self._wire(offset)
        shared = self.client.scatter(data, broadcast=True, hash=False)
        counts = dict(launch.counts)
        futures = []
        for w0, w1 in ranges:
            part = replace(cfg, grid_override=(w1 - w0, gy, gz), dispatch_grid=None)
            cuts = [None if c is None else (c[0] * d.dtype.size, c[1] * d.dtype.size)
                    for c, d in zip(owned(flat, decision, w0, w1, counts), flat.outputs)]
            futures.append(self.client.submit(_run_part, fp, wire, shared, w0, part, cuts, pure=False))
        partials = self._gather(futures, cfg.timeout)
        initial = {d.name: data[flat.inputs.index(d)] for d in flat.outputs if d.is_input}
        return merge(flat, decision, ranges, partials, initial, counts)

    def _gather(self, futures: list, timeout: float | None = None) -> list[list[bytes]]:
        """The futures' results. Waits in short steps, checking the scheduler between them, so
        a lost scheduler is reported at once instead of after Dask's reconnect timeouts."""
        limit = None if timeout is None else time.monotonic() + timeout
        pause, checked = 0.001, time.monotonic()
        while not all(f.done() for f in futures):
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
            if time.monotonic() - checked > POLL_S:
                checked = time.monotonic()
                self._check_scheduler()
            if limit is not None and time.monotonic() > limit:
                self.client.cancel(futures)
                raise DispatchFailed(f"dispatch did not finish within its {timeout} s timeout and was "
                                     "cancelled.", "raise DispatchConfig.timeout, or dispatch less work "
                                     "per call.", backend=ID)
        out = []
        for status, value in self.client.gather(futures):
            if status != "ok":
                code, message, fix, reason, _ = value
                cls = CATALOGUE.get(code, DispatchFailed)
                err = BackendError.__new__(cls)
                BackendError.__init__(err, message.split("] ", 1)[-1] if message.startswith("[") else message,
                                      fix, backend=ID)
                if reason is not None:
                    err.reason = reason  # type: ignore[attr-defined]
                raise err
            out.append(value)
        return out

    # ---- lifecycle ----------------------------------------------------------------------------
    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        alive = getattr(self.client, "status", "running") == "running"
        try:   # bounded: a client whose scheduler is gone would wait out Dask's own timeouts
            self.client.close(timeout=CLOSE_TIMEOUT_S if alive else 1)
        except Exception:
            pass
        try:
            if self.cluster is not None:
                self.cluster.close(timeout=CLOSE_TIMEOUT_S if alive else 2)
        except Exception:
            pass


def _run(fp: str, wire: bytes, data: list[bytes], cfg: DispatchConfig) -> tuple[str, Any]:
    from .worker import run

    return run(fp, wire, data, cfg)


def _run_part(fp: str, wire: bytes, data: list[bytes], w0: int, cfg: DispatchConfig,
              cuts: list[tuple[int, int] | None]) -> tuple[str, Any]:
    """One partition: its outputs cut to the bytes it owns (whole for combine merges)."""
    from .worker import run

    status, value = run(fp, wire, list(data) + [np.array([w0], dtype=np.uint32).tobytes()], cfg)
    if status == "ok":
        value = [v if c is None else v[c[0]:c[1]] for v, c in zip(value, cuts)]
    return status, value


__all__ = ["DaskBackend"]
