"""The parity matrix: corpus + random programs on each backend against the reference, with
divergences minimised into self-contained repro files and a certificate per backend.

The reference is reached directly here (conform sits above the driver layer). A backend
that reports a capability but fails the rows that need it fails; a missing capability is a
skip with its reason, never silent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import blake3
import numpy as np

import vyre
from vyre import reference
from vyre.driver import BackendError, DispatchConfig, VyreBackend
from vyre.driver.shadow import DivergenceEvent, compare_outputs
from vyre.ir import VyreError, fingerprint, validate, wire
from vyre.ir import node as N
from vyre.ir.errors import DISPATCH_ERRORS
from vyre.ir.program import Program

from .corpus import CorpusEntry, corpus
from .generator import random_program
from .witness import digest

CAPABILITY_CHECKS: dict[str, Callable[[VyreBackend], bool]] = {
    "subgroup_ops": lambda b: b.supports_subgroup_ops(),
}


@dataclass
class CaseResult:
    name: str
    status: str                 # "pass", "fail", "skip", "error"
    detail: str = ""
    repro: str | None = None
    seconds: float = 0.0


@dataclass
class BackendReport:
    backend: str
    version: str
    device_fingerprint: str
    results: list[CaseResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return self.count("fail") == 0 and self.count("error") == 0


class ConformInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_backend`: ``report`` holds the cases that finished (a partial
    certificate can be written from it: ``certificate(report, ..., partial=True)``)."""

    def __init__(self, report: BackendReport) -> None:
        super().__init__(f"interrupted after {len(report.results)} case(s) on {report.backend}")
        self.report = report


def _config(entry_grid: tuple[int, int, int] | None) -> DispatchConfig | None:
    return DispatchConfig(grid_override=entry_grid) if entry_grid else None


def reference_result(program: Program, inputs: Sequence[Any], config: DispatchConfig | None) -> tuple:
    """What the reference does with a dispatch: ("ok", outputs) or ("error", error type name,
    error kind). Plain data: workers compute it for `run_backend`."""
    try:
        return ("ok", reference.run(program, inputs, config))
    except VyreError as e:
        return ("error", type(e).__name__, getattr(e, "kind", None))


def diverges(backend: VyreBackend, program: Program, inputs: Sequence[Any],
             config: DispatchConfig | None, want: tuple | None = None) -> DivergenceEvent | str | None:
    """A divergence event, an error text where exactly one side failed, or None. ``want``:
    the `reference_result` when it was computed already."""
    ref_err = got_err = None
    ref_code = got_code = None
    ref = want if want is not None else reference_result(program, inputs, config)
    if ref[0] == "error":
        ref_err, ref_code = ref[1], ref[2]
    try:
        got = backend.dispatch(program, inputs, config)
    except BackendError as e:
        got_err = f"{type(e).__name__}: {e}"
        got_code = getattr(e, "reason", None)
    if ref_err or got_err:
        if ref_err and got_err:
            # both refuse: the same error where the semantics name one (a control-block error:
            # a division fault, a while loop over its cap; an indirect grid out of range), else
            # any refusal agrees
            if (ref_code in DISPATCH_ERRORS or ref_code == "indirect") and got_code != ref_code:
                return f"reference failed with {ref_code}; backend failed with {got_code or got_err}"
            return None
        return f"reference {'failed: ' + ref_err if ref_err else 'succeeded'}; backend " \
               f"{'failed: ' + got_err if got_err else 'succeeded'}"
    return compare_outputs(program, got, ref[1], backend.id())


# ------------------------------------------------------------------------- minimiser
def _variants(body: tuple[N.Node, ...]) -> Iterable[tuple[N.Node, ...]]:
    """Smaller bodies: drop a statement, or splice a compound statement's body in its place."""
    for i in range(len(body)):
        yield body[:i] + body[i + 1:]
    for i, n in enumerate(body):
        for _, sub in N.node_bodies(n):
            if sub:
                yield body[:i] + sub + body[i + 1:]
        for label, sub in N.node_bodies(n)[1:]:   # an alternative body (an else) dropped
            if sub:
                yield body[:i] + (replace(n, **{label: ()}),) + body[i + 1:]
        for label, sub in N.node_bodies(n):       # (a body's label is its field's name)
            for smaller in _variants(sub):
                yield body[:i] + (replace(n, **{label: smaller}),) + body[i + 1:]


def minimise(backend: VyreBackend, program: Program, inputs: list[np.ndarray],
             config: DispatchConfig | None, budget_s: float = 60.0) -> tuple[Program, list[np.ndarray]]:
    """Greedy shrink of the body, then of the inputs, keeping the divergence."""
    deadline = time.monotonic() + budget_s
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for body in _variants(program.body):
            if time.monotonic() > deadline:
                break
            cand = Program(program.buffers, program.workgroup_size, body, program.functions)
            if validate(cand):
                continue
            if diverges(backend, cand, inputs, config):
                program, changed = cand, True
                break
    for i, x in enumerate(inputs):
        decl = program.inputs[i]
        while decl.count == 0 and len(x) > 1 and time.monotonic() < deadline:
            half = x[: len(x) // 2]
            trial = inputs[:i] + [half] + inputs[i + 1:]
            if not diverges(backend, program, trial, config):
                break
            inputs, x = trial, half
    return program, inputs


def write_repro(path: Path, backend: VyreBackend, program: Program, inputs: Sequence[Any],
                config: DispatchConfig | None, detail: str) -> Path:
    data = {
        "vyre": vyre.__version__, "backend": backend.id(), "backend_version": backend.version(),
        "program_wire": wire.encode(program).hex(), "fingerprint": fingerprint(program).hex(),
        "inputs": [bytes(memoryview(np.ascontiguousarray(x)).cast("B")).hex() for x in inputs],
        "grid_override": list(config.grid_override) if config and config.grid_override else None,
        "divergence": detail,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


def load_repro(path: Path) -> tuple[str, Program, list[bytes], DispatchConfig | None]:
    try:
        data = json.loads(Path(path).read_text())
        program = wire.decode(bytes.fromhex(data["program_wire"]))
        inputs = [bytes.fromhex(h) for h in data["inputs"]]
        grid = data.get("grid_override")
        return data["backend"], program, inputs, _config(tuple(grid) if grid else None)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VyreError(f"{path} is not a vyre repro file ({exc}).",
                        "pass a file written by `vyre conform` (conform-repros/*.json).") from None


# ------------------------------------------------------------------------- the matrix
def _refusal(backend: VyreBackend, program: Program, config) -> str | None:
    """The backend's reason for refusing the program (`UnsupportedFeature` when it is
    compiled), or None when it runs it."""
    from vyre.driver import UnsupportedFeature
    from vyre.driver import pipeline as P

    try:
        P.compile(backend, program, config)
    except UnsupportedFeature as exc:
        return f"refused by design: {exc.message}"
    except Exception:
        return None   # any other problem shows up, with its detail, in the comparison
    return None

def _check(backend: VyreBackend, name: str, program: Program, inputs: list, config,
           repro_dir: Path | None, minimise_budget: float, want: tuple | None = None) -> CaseResult:
    t = time.perf_counter()
    try:
        refused = _refusal(backend, program, config)
        if refused is not None:   # refused by design, with the reason: a skip, as for capabilities
            return CaseResult(name, "skip", refused, seconds=time.perf_counter() - t)
        d = diverges(backend, program, inputs, config, want)
    except Exception as exc:  # a crash is a failure of the backend, recorded, never fatal
        return CaseResult(name, "error", f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - t)
    if d is None:
        return CaseResult(name, "pass", seconds=time.perf_counter() - t)
    detail = d if isinstance(d, str) else d.describe()
    repro = None
    if repro_dir is not None:
        small, small_inputs = minimise(backend, program, list(inputs), config, minimise_budget)
        fname = f"{backend.id()}-{name.replace('/', '_')}.json"
        repro = str(write_repro(repro_dir / fname, backend, small, small_inputs, config, detail))
    return CaseResult(name, "fail", detail, repro, time.perf_counter() - t)


#: below this many programs a run stays in this process (a pool's start costs seconds)
POOL_MIN = 48


def _prepare(cases: list[tuple], compiler: Any, opts: Any) -> list[tuple]:
    """A worker's share of a few cases: each program (a random one from its seed, or
    decoded), the reference's result, and the backend's build of them where the backend has a
    compiler (`vyre.driver.engine.farm`, several per compiler call). One (wire form, inputs,
    reference result, build) per case."""
    from vyre.driver.engine.farm import build_batch

    out = []
    for kind, payload, inputs, config in cases:
        if kind == "seed":
            program, inputs = random_program(payload, opts)
            data = wire.encode(program)
        else:
            data = payload
            program = wire.decode(data)
        out.append((data, inputs, reference_result(program, inputs, config), config))
    built = build_batch(compiler, [(d, c) for d, _, _, c in out]) if compiler is not None else [None] * len(out)
    return [(d, i, w, b) for (d, i, w, _), b in zip(out, built)]


def run_backend(backend: VyreBackend, *, random: int = 0, seed: int = 0,
                entries: list[CorpusEntry] | None = None, repro_dir: Path | None = None,
                progress: Callable[[str], None] | None = None,
                minimise_budget: float = 60.0, random_seeds: list[int] | None = None,
                workers: int | None = None) -> BackendReport:
    """The corpus (or ``entries``) and random programs on ``backend`` against the reference.
    Random programs are seeds ``seed * 1_000_003 + i`` for ``i < random``, or exactly
    ``random_seeds`` (a shard of a distributed run).

    From `POOL_MIN` programs on, ``workers`` processes (default: one per CPU; 1: none) make
    the random programs, run the reference on every case and build each program for the
    backend where its device can build elsewhere, while this process dispatches and compares
    each case as its result comes in. Ctrl-C raises `ConformInterrupted` with the cases that
    finished."""
    report = BackendReport(backend.id(), backend.version(), backend.device_fingerprint().hex())
    try:
        _run_backend(backend, report, random, seed, entries, repro_dir, progress, minimise_budget,
                     random_seeds, workers)
    except ConformInterrupted:
        raise
    except KeyboardInterrupt:
        raise ConformInterrupted(report) from None
    return report


def _run_backend(backend: VyreBackend, report: BackendReport, random: int, seed: int,
                 entries: list[CorpusEntry] | None, repro_dir: Path | None,
                 progress: Callable[[str], None] | None, minimise_budget: float,
                 random_seeds: list[int] | None, workers: int | None) -> None:
    from vyre.driver.engine import farm

    from .generator import options_for

    picked = [e for e in (entries if entries is not None else corpus())]
    seeds = random_seeds if random_seeds is not None else [seed * 1_000_003 + i for i in range(random)]
    opts = options_for(backend) if seeds else None
    runnable = [e for e in picked if not e.requires or CAPABILITY_CHECKS[e.requires](backend)]
    n = farm.workers_for(len(runnable) + len(seeds), workers)
    if n > 1 and len(runnable) + len(seeds) >= POOL_MIN:
        try:
            _run_pooled(backend, report, picked, seeds, seed, opts, n, repro_dir, progress, minimise_budget)
            return
        except (OSError, RuntimeError, AssertionError) as exc:   # no pool here (a daemonic worker): serially
            import logging

            logging.getLogger("vyre.conform").info("vyre conform: no worker pool (%s); running serially", exc)
            report.results.clear()
    randoms = [(s, *random_program(s, opts)) for s in seeds]
    # build every program at once first (in parallel where the backend can), then run them
    backend.precompile([(e.program, _config(e.grid_override)) for e in runnable] + [p for _, p, _ in randoms])
    for e in picked:
        if e.requires and not CAPABILITY_CHECKS[e.requires](backend):
            report.results.append(CaseResult(e.name, "skip", f"backend lacks {e.requires}"))
        else:
            report.results.append(_check(backend, e.name, e.program, e.inputs(seed), _config(e.grid_override),
                                         repro_dir, minimise_budget))
        if progress:
            progress(e.name)
    for s, program, inputs in randoms:
        report.results.append(_check(backend, f"random/{s}", program, inputs, None, repro_dir,
                                     minimise_budget))
        if progress:
            progress(f"random/{s}")


def _run_pooled(backend: VyreBackend, report: BackendReport, picked: list[CorpusEntry], seeds: list[int],
                seed: int, opts: Any, workers: int, repro_dir: Path | None,
                progress: Callable[[str], None] | None, minimise_budget: float) -> None:
    """`run_backend` with its cases prepared by ``workers`` processes (`_prepare`)."""
    from vyre.driver.engine import farm

    device = getattr(backend, "device", None)
    compiler = device.compiler() if device is not None and callable(getattr(device, "compiler", None)) else None
    cases: list[tuple[str, Any, Any]] = []   # (name, corpus entry or seed (None: skipped), config or what lacks)
    work = []
    for e in picked:
        if e.requires and not CAPABILITY_CHECKS[e.requires](backend):
            cases.append((e.name, None, e.requires))
            continue
        config = _config(e.grid_override)
        cases.append((e.name, e, config))
        work.append(("wire", wire.encode(e.program), e.inputs(seed), config))
    for s in seeds:
        cases.append((f"random/{s}", s, None))
        work.append(("seed", s, None, None))
    jobs = [(group, compiler, opts) for group in farm.batched(work)]
    results = (case for group in farm.run_jobs(_prepare, jobs, workers) for case in group)
    for name, source, config in cases:
        if source is None:
            report.results.append(CaseResult(name, "skip", f"backend lacks {config}"))
        else:
            data, inputs, want, built = next(results)
            program = source.program if isinstance(source, CorpusEntry) else wire.decode(data)
            if built is not None and callable(getattr(backend, "adopt", None)):
                backend.adopt(program, config, *built)
            report.results.append(_check(backend, name, program, inputs, config, repro_dir, minimise_budget, want))
        if progress:
            progress(name)


# ------------------------------------------------------------------------- certificates
def corpus_digest(entries: list[CorpusEntry] | None = None) -> str:
    h = blake3.blake3()
    for e in entries if entries is not None else corpus():
        h.update(e.name.encode() + b"\0" + fingerprint(e.program))
    return h.hexdigest()


def witness_digest(entries: list[CorpusEntry] | None = None, seed: int = 0) -> str:
    return digest([e.inputs(seed) for e in (entries if entries is not None else corpus())])


def certificate(report: BackendReport, *, random: int, seed: int, partial: bool = False) -> dict:
    """The signed summary of a run. ``partial``: the run was interrupted (its counts are the
    cases that finished; a partial certificate never verifies as passed)."""
    body = {
        "backend": report.backend, "backend_version": report.version,
        "device_fingerprint": report.device_fingerprint, "vyre": vyre.__version__,
        "wire_version": wire.VERSION, "corpus_digest": corpus_digest(), "witness_digest": witness_digest(seed=seed),
        "random_programs": random, "seed": seed,
        "counts": {s: report.count(s) for s in ("pass", "fail", "skip", "error")},
        "skips": {r.name: r.detail for r in report.results if r.status == "skip"},
        "failures": [asdict(r) for r in report.results if r.status in ("fail", "error")],
        "passed": report.ok and not partial,
    }
    if partial:
        body["partial"] = True
    body["digest"] = blake3.blake3(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return body


def verify_certificate(cert: dict, backend: VyreBackend | None = None) -> tuple[bool, str]:
    """Check the digest, that corpus and wire version match this vyre and, given a backend,
    that the certificate is for that backend: same id, version and device fingerprint."""
    try:
        body = {k: v for k, v in cert.items() if k != "digest"}
        want = blake3.blake3(json.dumps(body, sort_keys=True).encode()).hexdigest()
    except (TypeError, AttributeError):
        return False, "not a certificate object"
    if cert.get("digest") != want:
        return False, "digest mismatch: the certificate was altered"
    if cert.get("wire_version") != wire.VERSION:
        return False, f"wire version {cert.get('wire_version')} differs from this vyre's {wire.VERSION}"
    if cert.get("corpus_digest") != corpus_digest():
        return False, "corpus differs from this vyre's corpus: re-certify"
    if cert.get("partial"):
        return False, "the certificate is partial (its run was interrupted): re-run vyre conform"
    if not cert.get("passed"):
        return False, "certificate records failures"
    if backend is not None:
        for field_, have in (("backend", backend.id()), ("backend_version", backend.version()),
                             ("device_fingerprint", backend.device_fingerprint().hex())):
            if cert.get(field_) != have:
                return False, (f"the certificate's {field_} {cert.get(field_)!r} is not this "
                               f"backend's {have!r}: re-certify on this device")
    return True, "valid"


def oob_report(entries: list[CorpusEntry] | None = None) -> list[str]:
    """Corpus programs that rely on out-of-bounds masking."""
    return [e.name for e in (entries if entries is not None else corpus()) if e.oob]
