"""Autotuning of workgroup sizes, shared by the compiled drivers.

Only programs whose meaning cannot depend on the workgroup size are tuned ("tunable": no
lid/wgid, workgroup memory, barriers or atomics, every store at gid.x, a 1-D workgroup and
no grid overrides), so a tuned dispatch gives the same bytes as the default one. Candidates
come from the device profile (multiples of the subgroup size up to the invocation cap); each
is timed best-of-N with the backend's own timing (device_ns where it has one) and the winner
is kept in a persistent cache keyed by program fingerprint + device fingerprint. A corrupt
cache file, or an entry that is not one of the current candidates, means retuning (with a
warning), never a crash. ``VYRE_AUTOTUNER=on|off`` (default off); ``DispatchConfig(profile=
"throughput")`` tunes whatever the variable says and ``profile="latency"`` never does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.fingerprint import fingerprint
from vyre.ir.kinds import kind_of
from vyre.ir.program import Program
from vyre.ir.types import Builtin

from . import settings
from .atomic_file import write_atomic
from .capability import DeviceProfile
from .config import DEFAULT, DispatchConfig
from .pipeline.disk import cache_root

log = logging.getLogger("vyre.tuner")
ENV = "VYRE_AUTOTUNER"
SIZES = (32, 64, 128, 256, 512, 1024)


def enabled() -> bool:
    return settings.flag(ENV)


def tunable(program: Program, config: DispatchConfig | None = None) -> bool:
    config = config or DEFAULT
    if config.workgroup_override or config.grid_override or config.dispatch_grid:
        return False
    if program.workgroup_size[1:] != (1, 1) or program.workgroup_buffers:
        return False
    if _has_i32_division(program.body, {}, program):
        return False  # padding lanes (their number depends on the size) could divide by zero
    for n in N.walk_nodes(program.body):
        if isinstance(n, N.Barrier):
            return False
        if isinstance(n, N.Store) and n.index != E.Expr.gid_x():
            return False
        for root in N.node_exprs(n):
            for e in E.walk(root):
                if isinstance(e, E.Atomic) or kind_of(e).subgroup or \
                        (isinstance(e, E.Id) and (e.kind is not Builtin.GID or e.axis)):
                    return False
    return True


def _has_i32_division(body, scope: dict, program: Program) -> bool:
    from vyre.ir.typecheck import infer
    from vyre.ir.types import BinOp, DataType

    scope = dict(scope)
    for n in body:
        for root in N.node_exprs(n):
            for e in E.walk(root):
                if isinstance(e, E.Bin) and e.op in (BinOp.DIV, BinOp.MOD) and \
                        infer(e.left, scope, program) is DataType.I32:
                    return True
        if isinstance(n, N.Let):
            scope[n.name] = infer(n.value, scope, program)
        elif isinstance(n, N.Loop):
            inner = {**scope, n.var: infer(n.from_, scope, program)}
            if _has_i32_division(n.body, inner, program):
                return True
        else:
            for _, sub in N.node_bodies(n):
                if _has_i32_division(sub, scope, program):
                    return True
    return False


def candidates(profile: DeviceProfile) -> list[int]:
    step = profile.subgroup_size or 1
    cap = min(profile.max_invocations_per_workgroup, profile.max_workgroup_size[0])
    return [s for s in SIZES if s <= cap and s % step == 0] or [1]


@dataclass
class TuneResult:
    best: tuple[int, int, int]
    timings_ns: dict[int, float]
    from_cache: bool


class TuningCache:
    def __init__(self, device_fingerprint: bytes, root: Path | None = None) -> None:
        self.path = (root or cache_root()) / "tuner" / f"{device_fingerprint.hex()[:24]}.json"
        self._data: dict[str, list[int]] | None = None

    def _load(self) -> dict[str, list[int]]:
        if self._data is None:
            from .pipeline.disk import read_small_file

            self._data = {}
            text = read_small_file(self.path, "tuner cache")
            if text is not None:
                try:
                    raw = json.loads(text)
                    if not isinstance(raw, dict):
                        raise ValueError("not an object")
                    for k, v in raw.items():
                        if isinstance(v, list) and len(v) == 3 and all(type(x) is int for x in v):
                            self._data[k] = v
                        else:
                            log.warning("vyre tuner: ignoring malformed entry %r in %s", k, self.path)
                except (ValueError, TypeError, RecursionError) as exc:
                    log.warning("vyre tuner: cache %s unreadable (%s); retuning", self.path, exc)
        return self._data

    def get(self, program: Program, allowed: list[int] | None = None) -> tuple[int, int, int] | None:
        v = self._load().get(fingerprint(program).hex())
        if not v:
            return None
        if v[1:] != [1, 1] or (allowed is not None and v[0] not in allowed):
            log.warning("vyre tuner: stored workgroup size %s is not a candidate here; retuning", v)
            return None
        return tuple(v)  # type: ignore[return-value]

    def put(self, program: Program, best: tuple[int, int, int]) -> None:
        data = self._load()
        data[fingerprint(program).hex()] = list(best)
        try:
            write_atomic(self.path, json.dumps(data))   # a unique temp file: processes never clobber
        except OSError as exc:
            log.warning("vyre tuner: cannot write %s (%s)", self.path, exc)


_caches: dict[bytes, TuningCache] = {}


def cache_for(backend: Any) -> TuningCache:
    fp = backend.device_fingerprint()
    c = _caches.get(fp)
    if c is None or c.path.parent.parent != cache_root():
        c = _caches[fp] = TuningCache(fp)
    return c


def tune(backend: Any, program: Program, inputs: Sequence[Any], config: DispatchConfig | None = None,
         repeats: int = 5) -> TuneResult:
    """Time every candidate workgroup size on ``inputs``; keep and return the best."""
    config = config or DEFAULT
    cache = cache_for(backend)
    sizes = candidates(backend.device_profile())
    hit = cache.get(program, sizes)
    if hit is not None:
        return TuneResult(hit, {}, True)
    timings: dict[int, float] = {}
    for size in sizes:
        cfg = config.with_(workgroup_override=(size, 1, 1))
        backend.dispatch(program, inputs, cfg)  # compile + warm
        best = None
        for _ in range(repeats):
            r = backend.dispatch_borrowed_timed(program, inputs, cfg)
            t = r.device_ns if r.device_ns is not None else r.wall_ns
            best = t if best is None else min(best, t)
        timings[size] = float(best)
    winner = min(timings, key=timings.get)
    result = (winner, 1, 1)
    cache.put(program, result)
    return TuneResult(result, timings, False)


def tuned_config(backend: Any, program: Program, inputs: Sequence[Any],
                 config: DispatchConfig | None, force: bool = False) -> DispatchConfig | None:
    """The config a driver should dispatch with: the tuned workgroup size when the tuner is
    on (or ``force``) and the program is tunable, else ``config`` unchanged."""
    if not (force or enabled()) or not tunable(program, config):
        return config
    return (config or DEFAULT).with_(workgroup_override=tune(backend, program, inputs, config).best)
