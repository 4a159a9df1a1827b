"""The dask backend under faults (issue 28, item 15): random programs with workers killed
during the dispatch and a scheduler that goes away. Every outcome is the reference's bytes
or a vyre error with a Fix — never a bare Dask, socket or asyncio exception, never a hang.
Hypothesis draws the programs and the fault schedule; examples are few, CI time is small."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vyre import reference
from vyre.driver import DispatchFailed, acquire
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, VyreError

from helpers import run_threads

pytest.importorskip("distributed")

U = DataType.U32
GX = Expr.gid_x()


@pytest.fixture(scope="module")
def dask_backend():
    os.environ.setdefault("VYRE_DASK_WORKERS", "2")
    b = acquire("dask")
    yield b
    b.shutdown()


def _spin(k: int, trips: int) -> Program:
    body = [Node.let_bind("acc", Expr.load("a", GX) + k),
            Node.loop("i", 0, trips, [Node.assign("acc", Expr.var("acc") * 1664525 + 1013904223)]),
            Node.store("o", GX, Expr.var("acc"))]
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64, body)


def _kill_workers(backend, times: int, every: float, stop: threading.Event) -> None:
    for _ in range(times):
        if stop.wait(every):
            return
        try:
            pids = backend.client.run(os.getpid).values()
        except Exception:   # the cluster is between workers: try again on the next round
            continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _settle(backend) -> None:
    """Wait until the nannies restarted the workers (the next example starts clean)."""
    limit = time.monotonic() + 60
    while time.monotonic() < limit:
        if len(backend.client.scheduler_info().get("workers", {})) >= 2:
            backend._workers = None
            return
        time.sleep(0.2)


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(k=st.integers(0, 2**32 - 1), n=st.sampled_from([1, 63, 64, 4097, 1 << 15]),
       kills=st.integers(0, 3), every=st.sampled_from([0.05, 0.2, 0.5]))
def test_random_dispatches_under_worker_kills_give_bytes_or_vyre_errors(dask_backend, k, n, kills, every):
    p = _spin(k, 2000)
    a = (np.arange(n, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    stop = threading.Event()
    killer = threading.Thread(target=_kill_workers, args=(dask_backend, kills, every, stop),
                              daemon=True)
    killer.start()
    try:
        got = dask_backend.dispatch(p, [a])
        assert got == reference.run(p, [a])
    except VyreError as err:
        assert "Fix:" in str(err) and kills > 0, err
    finally:
        stop.set()
        killer.join(30)   # it waits at most `every` between rounds, then one client.run
        assert not killer.is_alive(), "the worker killer did not stop within 30 s (a hang)"
        _settle(dask_backend)
    # whatever happened, the backend still works
    small = np.arange(8, dtype=np.uint32)
    assert dask_backend.dispatch(p, [small]) == reference.run(p, [small])


def test_decisions_are_trimmed_safely_from_many_threads(dask_backend):
    errors: list[str] = []

    def work(t: int) -> None:
        try:
            for i in range(150):
                p = Program.wrapped([BufferDecl.output("o", 0, U, 4)], 4, [Node.store("o", GX, t * 1000 + i)])
                dask_backend._prepare(p, __import__("vyre.driver.config", fromlist=["DEFAULT"]).DEFAULT)
        except Exception as exc:  # pragma: no cover - the failure being tested
            errors.append(f"{type(exc).__name__}: {exc}")

    run_threads(work, [(t,) for t in range(8)], timeout=120)
    assert errors == [] and len(dask_backend._decisions) <= 256


def _close_scheduler(backend) -> None:
    backend.cluster.sync(backend.cluster.scheduler.close)


@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 2**32 - 1), n=st.sampled_from([1, 256, 4097]), warm=st.booleans(),
       delay=st.sampled_from([None, 0.0, 0.2]))
def _dead_scheduler_schedule(k: int, n: int, warm: bool, delay: float | None) -> None:
    """One example: a cluster whose scheduler closes before a dispatch (``delay`` None) or
    ``delay`` seconds into one; the dispatch gives the reference's bytes (it finished first)
    or a prompt vyre error with a Fix; then ``acquire`` gives a fresh, working client."""
    b = acquire("dask")   # the previous example's fresh client, or a new cluster
    if b.cluster is None:
        pytest.skip("VYRE_DASK_SCHEDULER names an external scheduler: not ours to stop")
    p = _spin(k, 5000)
    a = (np.arange(n, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    if warm:   # the workers already hold the program and its decision
        assert b.dispatch(p, [a[:8]]) == reference.run(p, [a[:8]])
    closer = None
    if delay is None:
        _close_scheduler(b)
    else:
        closer = threading.Timer(delay, _close_scheduler, args=(b,))
        closer.daemon = True
        closer.start()
    started = time.monotonic()
    try:
        assert b.dispatch(p, [a]) == reference.run(p, [a]) and delay is not None
    except DispatchFailed as err:
        assert "Fix:" in str(err), err
    finally:
        if closer is not None:
            closer.join(30)
            assert not closer.is_alive(), "closing the scheduler did not finish within 30 s (a hang)"
    assert time.monotonic() - started < 20 + (delay or 0)   # Dask alone retries for 30 s, then raises bare errors
    b.shutdown()
    assert b.closed
    fresh = acquire("dask")
    assert fresh is not b and not fresh.closed
    assert fresh.dispatch(p, [a[:8]]) == reference.run(p, [a[:8]])


def test_a_dead_scheduler_is_a_prompt_vyre_error_and_acquire_gives_a_fresh_client(monkeypatch):
    from vyre.driver import registry

    monkeypatch.setenv("VYRE_DASK_WORKERS", "1")   # each example starts a cluster: the smallest

    try:
        _dead_scheduler_schedule()
    finally:
        fresh = registry._instances.pop("dask", None)
        if fresh is not None:
            fresh.shutdown()
