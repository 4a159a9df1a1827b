"""``DispatchConfig.timeout`` bounds the build of a program not compiled yet (issue 28, item 6;
`vyre.driver.engine.timed_build`): the dispatch fails with the timed-out `DispatchFailed`
at its deadline, the engine's lock is free, and the same program dispatched later without a
timeout gives the reference's bytes (numpy's here). Small programs build in a helper thread
whose result the next dispatch takes; large ones, where the device has a compiler (OpenCL,
CUDA), in a worker process the deadline kills."""

from __future__ import annotations

import os
import random
import threading
import time

import numpy as np
import pytest

from conftest import get_backend
from vyre.driver import DispatchConfig
from vyre.driver.engine import EngineBackend, timed_build
from vyre.driver.errors import DispatchFailed
from vyre.drivers.reference.backend import ReferenceDevice
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

U = DataType.U32
GX = Expr.gid_x()
SLACK_S = 0.5   # past the deadline: waking up and raising, on a loaded 2-core machine


def _stores(n: int) -> tuple[Program, int]:
    """o[gx * n + i] = a[gx] * 3 + salt + i: n stores, a salt no compiler has cached."""
    salt = random.randrange(1 << 30)
    body = [Node.store("o", GX * n + i, Expr.load("a", GX) * 3 + (salt + i)) for i in range(n)]
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U, 64 * n)], 64, body), salt


def _want(a: np.ndarray, n: int, salt: int) -> bytes:
    lanes = a.astype(np.uint64)[:, None] * 3 + salt + np.arange(n, dtype=np.uint64)[None, :]
    return (lanes % 2**32).astype(np.uint32).tobytes()


def _times_out(b, p, inputs, timeout: float, stopped: bool) -> None:
    started = time.monotonic()
    after = "was stopped" if stopped else "goes on in the background"
    with pytest.raises(DispatchFailed, match=rf"within its {timeout} s timeout: building its kernel.*{after}.*Fix:"):
        b.dispatch(p, inputs, DispatchConfig(timeout=timeout))
    assert time.monotonic() - started < timeout + SLACK_S + (1.5 if stopped else 0)
    assert b.lock.acquire(blocking=False)   # no engine lock is left held
    b.lock.release()


class _SlowBuild(ReferenceDevice):
    """The reference, with a build that takes ``delay`` seconds (counted)."""

    def __init__(self, delay: float) -> None:
        self.delay, self.builds = delay, 0

    def build(self, program: Program):
        self.builds += 1
        time.sleep(self.delay)
        return super().build(program)


def test_a_slow_build_times_out_and_the_next_dispatch_takes_it():
    dev = _SlowBuild(0.8)
    b = EngineBackend(dev)
    p, salt = _stores(2)
    a = np.arange(64, dtype=np.uint32)
    _times_out(b, p, [a], 0.1, stopped=False)
    other, other_salt = _stores(1)          # the engine is free meanwhile (no lock held)
    dev.delay = 0.0
    assert b.dispatch(other, [a]) == [_want(a, 1, other_salt)]
    assert b.dispatch(p, [a]) == [_want(a, 2, salt)]       # waits for the build left running
    assert dev.builds == 2                                   # p's was not started again
    assert b.dispatch(p, [a], DispatchConfig(timeout=5)) == [_want(a, 2, salt)]   # cached now


def test_a_build_that_fails_after_the_timeout_reports_its_error_to_the_next_dispatch():
    class _Failing(_SlowBuild):
        def build(self, program):
            time.sleep(self.delay)
            raise RuntimeError("no kernel")

    b = EngineBackend(_Failing(0.5))
    p, _ = _stores(1)
    a = np.arange(64, dtype=np.uint32)
    _times_out(b, p, [a], 0.05, stopped=False)
    with pytest.raises(DispatchFailed, match=r"reference interpreter failed: RuntimeError: no kernel.*Fix:"):
        b.dispatch(p, [a])


def test_dispatches_without_a_timeout_build_in_the_calling_thread():
    seen = []

    class _Where(ReferenceDevice):
        def build(self, program):
            seen.append(threading.current_thread())
            return super().build(program)

    b = EngineBackend(_Where())
    p, salt = _stores(1)
    a = np.arange(64, dtype=np.uint32)
    assert b.dispatch(p, [a]) == [_want(a, 1, salt)] and seen == [threading.current_thread()]


def test_opencl_build_in_a_helper_thread(opencl):
    p, salt = _stores(8)      # PoCL: about 0.5 s to build
    a = np.arange(64, dtype=np.uint32)
    _times_out(opencl, p, [a], 0.02, stopped=False)
    assert opencl.dispatch(p, [a]) == [_want(a, 8, salt)]


def test_wgpu_build_in_a_helper_thread():
    b = get_backend("wgpu")
    # lavapipe: about 0.1 s to build (the WGSL is printed before the clock runs, by `refuse`),
    # and about 1.5 s more in the first launch, where llvmpipe compiles the shader itself
    p, salt = _stores(64)
    a = np.arange(64, dtype=np.uint32)
    _times_out(b, p, [a], 0.005, stopped=False)
    assert b.dispatch(p, [a]) == [_want(a, 64, salt)]


@pytest.fixture
def workers(monkeypatch):
    """Every timed build of a device with a compiler goes to a worker (not only large ones);
    the workers started are recorded."""
    started = []
    real = timed_build.subprocess.Popen

    def popen(*args, **kwargs):
        proc = real(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(timed_build, "OUT_OF_PROCESS_STATEMENTS", 1)
    monkeypatch.setattr(timed_build.subprocess, "Popen", popen)
    return started


COMPILERS = [pytest.param("opencl", id="opencl"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend_id", COMPILERS)
def test_a_build_in_a_worker_is_stopped_at_the_deadline(backend_id, workers):
    b = get_backend(backend_id)
    p, salt = _stores(8)
    a = np.arange(64, dtype=np.uint32)
    _times_out(b, p, [a], 0.3, stopped=True)      # a worker needs seconds to import alone
    assert len(workers) == 1 and workers[0].poll() is not None    # killed, and reaped
    assert b.dispatch(p, [a]) == [_want(a, 8, salt)]              # built here, without a timeout
    assert len(workers) == 1


@pytest.mark.parametrize("backend_id", COMPILERS)
def test_a_build_in_a_worker_gives_the_bytes(backend_id, workers):
    b = get_backend(backend_id)
    p, salt = _stores(8)
    a = np.arange(64, dtype=np.uint32)
    assert b.dispatch(p, [a], DispatchConfig(timeout=300)) == [_want(a, 8, salt)]
    assert len(workers) == 1 and workers[0].returncode == 0
    assert b.compile_native(p).built_from == "compiled"


def test_a_long_program_on_opencl_stops_building_at_its_deadline(opencl):
    """Issue 28's case at the real threshold: a straight-line program past
    `OUT_OF_PROCESS_STATEMENTS` (PoCL needs about 20 s for it) under ``timeout=1`` fails at
    the deadline, and its worker's whole process group (OpenCL's probe child too) is gone."""
    started = []
    real = timed_build.subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real(*args, **kwargs))
        return started[-1]

    n = timed_build.OUT_OF_PROCESS_STATEMENTS + 100
    body = [Node.let_bind("y0", Expr.load("a", GX))]
    body += [Node.let_bind(f"y{i}", Expr.var(f"y{i - 1}") * 3 + (i + random.randrange(1 << 20)))
             for i in range(1, n)]
    body.append(Node.store("o", GX, Expr.var(f"y{n - 1}")))
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64, body)
    a = np.arange(64, dtype=np.uint32)
    opencl.refuse(p)    # validation and the target's checks, before the clock
    mp = pytest.MonkeyPatch()
    mp.setattr(timed_build.subprocess, "Popen", popen)
    try:
        _times_out(opencl, p, [a], 1.0, stopped=True)
    finally:
        mp.undo()
    assert len(started) == 1
    for _ in range(100):
        try:
            os.killpg(started[0].pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    else:
        pytest.fail("a process of the killed worker's group is still alive")


EXIT_CHILD = r"""
import random, sys, numpy as np
from vyre.driver import acquire, DispatchConfig, DispatchFailed
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
gx, salt = Expr.gid_x(), random.randrange(1 << 30)
body = [Node.store("o", gx * 8 + i, Expr.load("a", gx) * 3 + (salt + i)) for i in range(8)]
p = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32, 512)], 64, body)
try:
    acquire(sys.argv[1]).dispatch(p, [np.arange(64, dtype=np.uint32)], DispatchConfig(timeout=0.005))
except DispatchFailed as err:
    print("timed out" if "building its kernel" in str(err) else err)
"""


def test_exit_waits_for_builds_left_running():
    """The exit hook joins the helper threads of builds that timed-out dispatches left
    running (at most `EXIT_WAIT_S`)."""
    from concurrent.futures import Future

    fut: Future = Future()
    timed_build._start(fut, lambda: time.sleep(0.3) or "built")
    assert not fut.done()
    timed_build._wait_at_exit()
    assert fut.result(0) == "built" and not timed_build._RUNNING


def test_a_process_exits_cleanly_while_a_timed_out_build_runs():
    """A fresh process whose dispatch timed out in its build exits with status 0 (once, a
    PoCL compiler still running at exit aborted one: "terminate called without an active
    exception"; exit now waits for it)."""
    backend_id = "opencl"
    import os
    import subprocess
    import sys
    from pathlib import Path

    get_backend(backend_id)   # skips where it is unavailable
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", EXIT_CHILD, backend_id], capture_output=True, text=True,
                          timeout=120, env=env)
    assert (done.returncode, done.stdout.strip()) == (0, "timed out"), done.stderr[-2000:]
