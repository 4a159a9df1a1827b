"""Building many programs at once in worker processes (warm-up and conformance, issue 24).

A device that can compile without itself offers a `Compiler` (`Device.compiler()`): a small
picklable object whose ``build(program)`` returns what `Device.compile` would keep (the
kernel's `Kernel.meta` and the target binary), e.g. CUDA C through NVRTC for one
architecture. `build_job` runs in a worker: it decodes the program from its wire form,
validates it (and its effective form for the config), builds it and adds what the engine
records with every artifact (atomics, bound buffers in binding order, fingerprint). The
parent hands each result to `EngineBackend.adopt`, which checks the backend's refusals and
writes the artifact cache, so the program's first dispatch loads the binary as in a later
process: what a worker built passed the same validation the engine applies.

Workers are spawned (no CUDA context or OpenCL queue is inherited), and a worker that dies
or a build that fails only means that program is built on its first dispatch instead.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol

from vyre.ir import wire
from vyre.ir.errors import VyreError
from vyre.ir.fingerprint import fingerprint
from vyre.ir.launch import effective_program, uses_atomics
from vyre.ir.program import Program

from ..config import DEFAULT, DispatchConfig
from ..validation import VALIDATION_CACHE

log = logging.getLogger("vyre.engine")


class Compiler(Protocol):
    """Builds validated, effective programs for one device without the device. It may also
    have ``build_many(programs) -> list[(meta, binary) | None]``, building several programs
    in one compiler invocation (`build_batch` uses it)."""

    def build(self, program: Program) -> tuple[dict[str, Any], bytes]:
        """(`Kernel.meta`, target binary) of ``program``; raises when it cannot."""
        ...


#: programs a worker builds per compiler invocation where the compiler can batch (NVRTC's
#: fixed cost per call is about half of a small program's: 4 per call cut its CPU ~22%)
BATCH = 4


def _effective(data: bytes, config: DispatchConfig | None) -> tuple[Program, Program] | None:
    """(program, effective program) decoded from ``data``, both validated; None if not."""
    try:
        program = wire.decode(data)
        VALIDATION_CACHE.require_valid(program)
        eff = effective_program(program, config or DEFAULT)
        if eff is not program:
            VALIDATION_CACHE.require_valid(eff)
        return program, eff
    except Exception:   # VyreError: its dispatch reports it
        return None


def _recorded(program: Program, eff: Program, built: tuple[dict, bytes]) -> tuple[dict, bytes]:
    """A build with what the engine records with every artifact (`EngineBackend._lookup`)."""
    meta, binary = built
    meta["atomics"] = uses_atomics(eff)
    meta["bound"] = [b.name for b in eff.facts.bound]
    meta["fingerprint"] = fingerprint(program).hex()
    return meta, binary


def build_job(compiler: Compiler, data: bytes, config: DispatchConfig | None) -> tuple[dict, bytes] | None:
    """A worker's build of the program encoded as ``data`` under ``config``: (meta, binary)
    for `EngineBackend.adopt`, or None when it does not validate or does not build (its
    dispatch then reports why, in the caller's process)."""
    got = _effective(data, config)
    if got is None:
        return None
    try:
        return _recorded(*got, compiler.build(got[1]))
    except Exception:   # a compiler's refusal or failure: built on dispatch instead
        return None


def build_batch(compiler: Compiler, items: list[tuple[bytes, DispatchConfig | None]]) -> list[tuple[dict, bytes] | None]:
    """`build_job` of several programs, in one compiler invocation where the compiler has
    ``build_many`` (a batch it cannot build is built program by program)."""
    many = getattr(compiler, "build_many", None)
    if many is None or len(items) < 2:
        return [build_job(compiler, data, config) for data, config in items]
    progs = [_effective(data, config) for data, config in items]
    valid = [p for p in progs if p is not None]
    try:
        built = iter(many([eff for _, eff in valid]))
    except Exception:
        return [build_job(compiler, data, config) for data, config in items]
    out: list[tuple[dict, bytes] | None] = []
    for p in progs:
        b = None if p is None else next(built)
        out.append(None if b is None or p is None else _recorded(*p, b))
    return out


MAX_WORKERS = 32   # a default never spawns more (a container may see the host's CPU count)


def cpus() -> int:
    """CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(jobs: int, workers: int | None = None) -> int:
    """How many worker processes ``jobs`` builds get: ``workers``, or one per CPU (at most
    `MAX_WORKERS`), and at most one per job (1: build in this process)."""
    return max(1, min(workers or min(cpus(), MAX_WORKERS), jobs))


def pool(workers: int) -> ProcessPoolExecutor:
    """A pool of spawned workers (no device state is inherited)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def run_jobs(fn: Callable[..., Any], jobs: list[tuple], workers: int | None = None) -> Iterator[Any]:
    """``fn(*job)`` for every job, in order, in a pool of spawned workers (in this process
    when one worker suffices). Yields results as they come in, so the caller overlaps its own
    work with the workers'."""
    n = workers_for(len(jobs), workers)
    if n == 1:
        for job in jobs:
            yield fn(*job)
        return
    chunk = max(1, min(8, len(jobs) // (4 * n)))
    ex = pool(n)
    try:
        yield from ex.map(fn, *zip(*jobs), chunksize=chunk)
    finally:   # also when the caller stops early (an error, Ctrl-C): queued jobs are dropped
        ex.shutdown(wait=False, cancel_futures=True)


def batched(items: list, size: int = BATCH) -> list[list]:
    """``items`` in consecutive groups of ``size``."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def encode_all(items: Iterable[tuple[Program, DispatchConfig | None]]) -> list[tuple[bytes, DispatchConfig | None]]:
    """The (wire form, config) of each program, for `build_job` (a program that cannot be
    encoded is skipped by building an empty job that fails validation)."""
    out = []
    for program, config in items:
        try:
            out.append((wire.encode(program), config))
        except (VyreError, Exception):
            out.append((b"", config))
    return out
