"""Builds bounded by the dispatch's ``DispatchConfig.timeout`` (issue 28, item 6).

A dispatch with a timeout whose program is not compiled yet never waits for the build past
that timeout; `EngineBackend._build` builds it one of two ways:

* **In a worker process** (`in_worker`), where the device has a `Compiler`
  (`Device.compiler()`: NVRTC for CUDA, a context of the worker's own for OpenCL) and the
  program is large (`OUT_OF_PROCESS_STATEMENTS` statements or more once inlined). The worker
  (``python -m vyre.driver.engine.timed_build``: no ``__main__`` of the caller's is imported
  again) runs in a process group of its own, which is killed at the deadline with everything
  it started (OpenCL's probe child included), so the build really stops: no CPU or memory
  stays in use. The binary it returns is loaded with `Device.load`.
* **In a helper thread** (`InFlight.run`), otherwise (wgpu has no `Compiler`; small programs
  everywhere). The caller stops waiting at the deadline; the build cannot be stopped and
  finishes in the background, without the engine's lock, alongside later dispatches. Its
  result (or its error) is kept: the next dispatch of the same effective program waits for it
  instead of building again, with or without a timeout. Interpreter exit waits for such
  builds (at most `EXIT_WAIT_S`): a compiler running while the process exits can abort it.

Why the size: a fresh worker imports vyre and the vendor's compiler and pays the compiler's
first-build cost before it builds anything (measured on PoCL, 2 shared cores under load:
about 2 s of imports plus 2 to 3 s for the first small kernel, against under 1 s for a warm
in-process build of the same kernel), so it only pays for programs whose builds run for many
seconds or minutes and grow to gigabytes (PoCL: 14,000 statements about 20 s; issue 28's
call chains). Dispatches without a timeout build in the calling thread exactly as before,
unless a timed-out dispatch left the same program's build running.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from vyre.ir import wire
from vyre.ir.fingerprint import identity
from vyre.ir.inline import inlined_statements
from vyre.ir.program import Program

log = logging.getLogger("vyre.engine")
#: inlined statements from which a timed build runs in a worker process that the deadline
#: kills (where the device has a `Compiler`); smaller programs build in a helper thread
OUT_OF_PROCESS_STATEMENTS = 4096
#: the directory holding the ``vyre`` package, for the worker's import path
_SRC = str(Path(__file__).resolve().parents[3])


class BuildTimedOut(Exception):
    """The build did not finish before the dispatch's deadline. ``stopped``: the build was
    killed (a worker); else it goes on in the background and the next dispatch of the
    program uses it."""

    def __init__(self, stopped: bool) -> None:
        super().__init__("build timed out")
        self.stopped = stopped


#: how long interpreter exit waits for builds that timed-out dispatches left running: a
#: compiler still running while the process exits can abort it (PoCL did: "terminate called
#: without an active exception")
EXIT_WAIT_S = 60.0
_RUNNING: set[threading.Thread] = set()
_RUNNING_LOCK = threading.Lock()


def _fill(fut: Future, fn: Callable[[], Any]) -> None:
    try:
        fut.set_result(fn())
    except BaseException as exc:   # the waiting dispatch maps it, as the in-thread build would
        fut.set_exception(exc)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(threading.current_thread())


def _start(fut: Future, fn: Callable[[], Any]) -> None:
    """Run ``fn`` for ``fut`` in a helper thread that interpreter exit waits for (at most
    `EXIT_WAIT_S`). The exit hook is registered again at every such build, so it runs before
    every hook registered earlier (the wgpu driver's stops its device's poll thread)."""
    thread = threading.Thread(target=_fill, args=(fut, fn), name="vyre-build", daemon=True)
    with _RUNNING_LOCK:
        atexit.unregister(_wait_at_exit)
        atexit.register(_wait_at_exit)
        _RUNNING.add(thread)
    try:
        thread.start()
    except BaseException as exc:   # no thread to be had: the waiting dispatch reports it
        with _RUNNING_LOCK:
            _RUNNING.discard(thread)
        fut.set_exception(exc)


def _wait_at_exit() -> None:
    limit = time.monotonic() + EXIT_WAIT_S
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for thread in running:
        thread.join(max(0.0, limit - time.monotonic()))


class InFlight:
    """Builds running in helper threads, by key (the effective program's identity), until a
    dispatch has taken their result."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._builds: dict[Any, Future] = {}

    def __bool__(self) -> bool:
        return bool(self._builds)

    def run(self, key: Any, fn: Callable[[], Any], timeout: float | None) -> Any:
        """``fn()``'s result: from the build of ``key`` already running, else from a new one
        in a helper thread; waits at most ``timeout`` seconds (None: until it ends). Raises
        what ``fn`` raised, or `BuildTimedOut` (the build goes on, kept under ``key``)."""
        with self._lock:
            fut = self._builds.get(key)
            if fut is None:
                fut = self._builds[key] = Future()
                _start(fut, fn)
        try:
            return fut.result(timeout)
        except FutureTimeout:
            raise BuildTimedOut(stopped=False) from None
        finally:
            if fut.done():
                with self._lock:
                    if self._builds.get(key) is fut:
                        del self._builds[key]

    def waiting(self, key: Any) -> bool:
        """True while a build of ``key`` runs or waits to be taken."""
        return key in self._builds


def in_worker(compiler: Any, data: bytes, config: Any, timeout: float) -> tuple[dict, bytes] | None:
    """`vyre.driver.engine.farm.build_job` of the program encoded as ``data`` in a fresh
    worker process, killed with its process group after ``timeout`` seconds (then
    `BuildTimedOut`). None when the worker could not build it (the caller builds it itself,
    which reports why)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, env.get("PYTHONPATH", "")) if p)
    payload = pickle.dumps((compiler, data, config))
    try:
        proc = subprocess.Popen([sys.executable, "-m", "vyre.driver.engine.timed_build"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    except OSError:
        return None
    try:
        out, _ = proc.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise BuildTimedOut(stopped=True) from None
    except BaseException:
        _kill(proc)
        raise
    if proc.returncode != 0 or not out:
        return None
    try:
        got = pickle.loads(out)   # our own worker's answer, on its own pipe
    except Exception:
        return None
    return got if isinstance(got, tuple) and len(got) == 2 else None


def build(device: Any, inflight: InFlight, program: Program, timeout: float | None,
          backend: str) -> tuple[Any, Any, Any]:
    """``device.compile(program)`` (a `Device`) within ``timeout``: a large program in a worker
    process the deadline kills, where the device has a `Compiler`; else in a helper thread
    (``inflight``), or the build of ``program`` already running there. Raises what the build
    raised, or `BuildTimedOut`."""
    key = identity(program)
    if timeout is not None and not inflight.waiting(key) and \
            inlined_statements(program) >= OUT_OF_PROCESS_STATEMENTS:
        compiler = device.compiler()
        if compiler is not None:
            started = time.monotonic()
            got = in_worker(compiler, wire.encode(program), None, timeout)
            if got is not None:
                meta, binary = got
                try:
                    return dataclasses.replace(device.load(meta, binary), built_from="compiled"), meta, binary
                except Exception as exc:   # built here instead, which reports any real fault
                    log.warning("vyre %s: cannot load a kernel built in a worker (%s); building it here",
                                backend, exc)
            timeout = max(0.0, timeout - (time.monotonic() - started))
    return inflight.run(key, lambda: device.compile(program), timeout)


def _kill(proc: subprocess.Popen) -> None:
    """Kill the worker's process group (the worker and every process it started)."""
    killpg = getattr(os, "killpg", None)   # POSIX; elsewhere the worker alone is killed
    if killpg is not None:
        try:
            killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    proc.kill()
    proc.communicate()


def _main() -> None:
    """The worker: read (compiler, wire bytes, config), write `build_job`'s result."""
    from .farm import build_job

    compiler, data, config = pickle.loads(sys.stdin.buffer.read())
    result = build_job(compiler, data, config)
    sys.stdout.buffer.write(pickle.dumps(result))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _main()
