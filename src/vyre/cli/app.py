"""The `vyre` command.

Output rules: every piece of text that is not ours (errors, program text, generated source,
device names, paths) is escaped, so square brackets print as they are; source is soft-wrapped
(piped output is never hard-wrapped); user errors go to stderr with exit code 2 and no
traceback.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

import vyre
from vyre.driver.install import install_hint
from vyre.ir import VyreError, fingerprint, validate, wire

app = typer.Typer(help="vyre: portable GPU compute with byte-identical results on every backend.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
cache_app = typer.Typer(help="The compiled-kernel cache: where it is, what it holds, clearing it.",
                        no_args_is_help=True)
app.add_typer(cache_app, name="cache")
console = Console(soft_wrap=True)
errors = Console(stderr=True, soft_wrap=True)


def _fail(err: Exception, code: int = 2) -> None:
    errors.print(f"[red]error:[/red] {escape(str(err))}")
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        console.print(f"vyre {escape(vyre.__version__)}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """vyre: portable GPU compute with byte-identical results on every backend."""


def demo_program():
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program

    gx = Expr.gid_x()
    return Program.wrapped(
        [BufferDecl.read("a", 0, DataType.F32), BufferDecl.read("b", 1, DataType.F32),
         BufferDecl.output("out", 2, DataType.F32)], 64,
        [Node.let_bind("x", Expr.load("a", gx)), Node.let_bind("y", Expr.load("b", gx)),
         Node.store("out", gx, Expr.fma(Expr.var("x"), Expr.var("y"), Expr.var("x").sqrt()))])


@app.command()
def demo(save: Path | None = typer.Option(None, help="also write the program's wire form here"),
         backend: str | None = typer.Option(None, help="backend id (default: the preferred one)")) -> None:
    """Build a small program, validate it, run it on the preferred backend and check its bytes
    against the CPU reference."""
    from vyre import reference
    from vyre.driver import BackendError, acquire, acquire_preferred_dispatch_backend

    p = demo_program()
    console.print(escape(str(p)), highlight=False)
    diags = validate(p)
    console.print(f"validation: {escape(str(diags)) if diags else 'ok'}")
    console.print(f"fingerprint: {fingerprint(p).hex()}")
    a = np.arange(8, dtype=np.float32)
    b = np.full(8, 0.5, dtype=np.float32)
    want = reference.run(p, [a, b])[0]
    try:
        be = acquire(backend) if backend else acquire_preferred_dispatch_backend()
        got = be.dispatch(p, [a, b])[0]
    except BackendError as exc:
        _fail(exc)
    out = np.frombuffer(got, dtype=np.float32)
    console.print(f"a   = {a.tolist()}\nb   = {b.tolist()}\nout = fma(a, b, sqrt(a)) = {out.tolist()}")
    where = escape(f"{be.id()} ({be.device_profile().device_name or 'ready'})")
    if got != want:
        _fail(VyreError(f"{be.id()} gave different bytes from the reference.",
                        "report it with `vyre conform --backend " + be.id() + "` output."), 1)
    console.print(f"ran on {where}: [green]byte-identical to the reference[/green]")
    if save:
        save.write_bytes(wire.encode(p))
        console.print(f"wrote {escape(str(save))} ({save.stat().st_size} bytes)")


@app.command()
def inspect(file: Path, backend: str | None = typer.Option(None, help="print this backend's generated source")) -> None:
    """Print a wire-encoded program readably, with its fingerprint and diagnostics."""
    try:
        p = wire.decode(file.read_bytes())
    except OSError as exc:
        _fail(VyreError(f"cannot read {file}: {exc}.", "pass the path of a file written by wire.encode()."))
    except VyreError as exc:
        _fail(exc)
    console.print(escape(str(p)), highlight=False)
    console.print(f"fingerprint: {fingerprint(p).hex()}")
    diags = validate(p)
    for d in diags:
        console.print(f"[yellow]{escape(str(d))}[/yellow]")
    if not diags:
        console.print("diagnostics: none")
    if backend:
        from vyre.driver import BackendError, acquire

        try:
            b = acquire(backend)
            src = b.generated_source(p)
        except BackendError as exc:
            _fail(exc)
        if src is None:
            _fail(VyreError(f"backend {backend} does not generate source.", "use opencl or cuda."))
        console.print(src, highlight=False, markup=False)
    if diags:
        raise typer.Exit(1)


@app.command()
def backends(explain: Path | None = typer.Option(None, help="say which backends can run this wire file")) -> None:
    """List registered backends: precedence, availability (or why not), version, capabilities."""
    from vyre.driver import BackendError, acquire, registered_backends_by_precedence
    from vyre.driver.registry import broken_registrations, why_not

    program = None
    if explain is not None:
        try:
            program = wire.decode(explain.read_bytes())
        except OSError as exc:
            _fail(VyreError(f"cannot read {explain}: {exc.strerror or exc}.",
                            "pass the path of a file written by vyre.ir.wire.encode()."))
        except VyreError as exc:
            _fail(exc)
        from vyre.ir import ValidationError

        diags = validate(program)
        if diags:     # an invalid program: no backend runs it, so none is named
            _fail(ValidationError(diags))
    t = Table(title="vyre backends")
    for col in ("id", "prec.", "available", "version", "capabilities"):
        t.add_column(col, overflow="fold")
    notes: list[str] = []     # long reasons go under the table, so it reads at 80 columns

    def note(text: str) -> str:
        notes.append(text)
        return f"see [{len(notes)}]"

    for reg in registered_backends_by_precedence():
        try:
            b = acquire(reg.id)
        except BackendError as exc:
            t.add_row(reg.id, str(reg.precedence), f"[red]no[/red], {escape(note(str(exc)))}", "-", "-")
            continue
        caps = [f"wg≤{b.max_compute_invocations_per_workgroup()}", f"mem≤{b.max_storage_buffer_bytes() >> 20}MiB"]
        caps += [n for n, f in (("async", b.supports_async_compute), ("grid_sync", b.supports_grid_sync),
                                ("subgroups", b.supports_subgroup_ops)) if f()]
        avail = "[green]yes[/green]" + (" (reference oracle)" if reg.reference_oracle else "")
        if program is not None:
            reasons = why_not(program, b)
            avail += "; runs program" if not reasons else f"; cannot run it, {escape(note('; '.join(reasons)))}"
        t.add_row(reg.id, str(reg.precedence), avail + f"\n{escape(b.device_profile().device_name)}",
                  escape(b.version()), escape(", ".join(caps)))
    for name, why in broken_registrations().items():
        t.add_row(escape(name), "-", f"[red]broken[/red], {escape(note(str(why)))}", "-", "-")
    console.print(t)
    for i, text in enumerate(notes, 1):
        console.print(escape(f"[{i}] {text}"), highlight=False)
    if program is not None:
        from vyre.driver.routing import Router

        console.print(escape(Router().choose(program).explain()), highlight=False)


@app.command()
def doctor() -> None:
    """What is installed, what each backend needs, and the fix for each missing piece."""
    from vyre.driver import BackendError, acquire, registered_backends_by_precedence, settings
    from vyre.driver.pipeline import cache_root

    console.print(f"vyre {escape(vyre.__version__)} on Python {platform.python_version()} ({sys.platform})")
    console.print(f"cache dir: {escape(str(cache_root()))}")
    for dist in ("numpy", "blake3", "platformdirs", "pyopencl", "cuda-core", "cuda-bindings",
                 "nvidia-cuda-nvrtc", "wgpu", "dask", "distributed"):
        try:
            state = f"{importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            state = "[yellow]not installed[/yellow]"
        console.print(f"  {dist:18} {state}")
    vendors = os.environ.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
    if os.path.isdir(vendors):
        icds = sorted(f for f in os.listdir(vendors) if f.endswith(".icd"))
    else:
        icds = [Path(vendors).name] if os.path.isfile(vendors) else []
    hint = "[yellow]none[/yellow] (Debian: apt-get install pocl-opencl-icd ocl-icd-libopencl1)"
    console.print(f"  OpenCL ICDs in {escape(vendors)}: {escape(', '.join(icds)) if icds else hint}")
    console.print(f"  nvidia-smi         {'found' if shutil.which('nvidia-smi') else 'not found'}")
    for s in settings.SETTINGS:
        value = settings.get(s.name)
        if value is not None:
            console.print(f"  {s.name} = {escape(value)}")
    for reg in registered_backends_by_precedence():
        try:
            b = acquire(reg.id)
            console.print(f"[green]✓[/green] {reg.id}: {escape(b.device_profile().device_name or 'ready')}")
        except BackendError as exc:
            console.print(f"[red]✗[/red] {reg.id}: {escape(str(exc))}\n    needs: {escape(str(reg.requires))}")


@app.command()
def conform(
    backend: list[str] = typer.Option([], help="backend id(s); default: every available dispatching backend"),
    random: int = typer.Option(0, min=0, help="random programs per backend"),
    seed: int = typer.Option(0, help="seed for witnesses and random programs"),
    json_out: Path | None = typer.Option(None, "--json", help="write the report as JSON"),
    cert_dir: Path = typer.Option(Path("conform-certs"), help="where certificates go"),
    repro_dir: Path = typer.Option(Path("conform-repros"), help="where minimised repros go"),
    replay: Path | None = typer.Option(None, help="re-run one repro file"),
    verify: Path | None = typer.Option(None, help="verify a certificate file"),
    oob_report: bool = typer.Option(False, help="list corpus programs relying on out-of-bounds masking"),
    cluster: str | None = typer.Option(None, help="shard the run over a Dask cluster: 'local' or a "
                                       "scheduler address (each worker runs its own best backend)"),
    workers: int = typer.Option(0, min=0, help="processes that make the random programs, run the "
                                "reference and build the kernels (0: one per CPU; 1: none)"),
) -> None:
    """Run the corpus and random programs on each backend against the reference."""
    from vyre.conform import (
        ConformInterrupted,
        diverges,
        load_repro,
        run_backend,
        verify_certificate,
    )
    from vyre.conform import oob_report as oob
    from vyre.conform.corpus import corpus
    from vyre.driver import BackendError, acquire, registered_backends_by_precedence

    if verify:
        try:
            cert = json.loads(verify.read_text())
            live = acquire(backend[0]) if backend else None
            ok, why = verify_certificate(cert, live)
        except (OSError, ValueError) as exc:
            _fail(VyreError(f"cannot read certificate {verify}: {exc}.", "pass a JSON certificate from `vyre conform`."))
        except BackendError as exc:
            _fail(exc)
        console.print(f"{'[green]valid[/green]' if ok else '[red]invalid[/red]'}: {escape(str(why))}")
        raise typer.Exit(0 if ok else 1)
    if oob_report:
        for name in oob():
            console.print(name)
        return
    if replay:
        try:
            bid, program, inputs, config = load_repro(replay)
            b = acquire(backend[0] if backend else bid)
        except (VyreError, BackendError) as exc:
            _fail(exc)
        d = diverges(b, program, inputs, config)
        if d is None:
            console.print(f"[green]no divergence[/green] on {b.id()}")
            return
        console.print(f"[red]divergence[/red] on {b.id()}: {escape(d if isinstance(d, str) else d.describe())}")
        raise typer.Exit(1)
    if cluster:
        _conform_cluster(cluster, random, seed, cert_dir, json_out)
        return
    ids = backend or [r.id for r in registered_backends_by_precedence() if not r.reference_oracle and r.implicit]
    reports, failed = [], False
    summary = Table(title="vyre conform")
    for col in ("backend", "pass", "fail", "error", "skip", "certificate"):
        summary.add_column(col)
    total = len(corpus()) + random
    every = max(1, total // 20)
    for bid in ids:
        try:
            b = acquire(bid)
        except BackendError as exc:
            if backend:
                _fail(exc)
            console.print(f"[yellow]skip[/yellow] {bid}: {escape(str(exc))}")
            continue
        done = [0]

        def step(name: str, bar: Progress, task: Any, bid: str = bid, done: list[int] = done) -> None:
            done[0] += 1
            bar.advance(task)
            if not console.is_terminal and (done[0] % every == 0 or done[0] == total):
                console.print(escape(f"{bid}: {done[0]}/{total} ({name})"), highlight=False)

        try:
            with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
                task = bar.add_task(f"{bid}", total=total)
                report = run_backend(b, random=random, seed=seed, repro_dir=repro_dir, workers=workers or None,
                                     progress=lambda name, bar=bar, task=task: step(name, bar, task))
        except KeyboardInterrupt as exc:   # leave what finished: the table and the certificates
            partial = exc.report if isinstance(exc, ConformInterrupted) else None
            if partial is None:
                summary.add_row(bid, "-", "-", "-", "-", f"interrupted after {done[0]}/{total}")
            else:   # the interrupted backend's counts so far, and a certificate marked partial
                _, cpath = _write_certificate(partial, cert_dir, random, seed, partial=True)
                _summary_row(summary, partial, f"interrupted after {len(partial.results)}/{total}: "
                             f"{escape(str(cpath))}")
            console.print(summary)
            errors.print(f"interrupted: {len(reports)} backend(s) finished; their certificates are in "
                         f"{escape(str(cert_dir))}" + ("" if partial is None else
                                                       f" ({escape(bid)}'s is marked partial)"))
            raise typer.Exit(130) from None
        cert, cpath = _write_certificate(report, cert_dir, random, seed)
        _summary_row(summary, report, escape(str(cpath)))
        for r in report.results:
            if r.status in ("fail", "error"):
                console.print(f"[red]{r.status}[/red] {bid} {escape(r.name)}: {escape(str(r.detail))}"
                              + (f"\n  repro: {escape(str(r.repro))}" if r.repro else ""))
        failed |= not report.ok
        reports.append({"certificate": cert, "results": [vars(r) for r in report.results]})
    console.print(summary)
    if json_out:
        json_out.write_text(json.dumps(reports, indent=1))
    if not reports:
        _fail(VyreError("no backend could be checked.", "install a backend (`vyre doctor`)."))
    raise typer.Exit(1 if failed else 0)


def _write_certificate(report: Any, cert_dir: Path, random: int, seed: int,
                       partial: bool = False) -> tuple[dict, Path]:
    """The certificate and where it went: ``cert_dir/<backend>.json`` (``<backend>.partial.json``
    for an interrupted run, so a finished run's certificate is not replaced)."""
    from vyre.conform import certificate

    cert = certificate(report, random=random, seed=seed, partial=partial)
    cert_dir.mkdir(parents=True, exist_ok=True)
    cpath = cert_dir / f"{report.backend}{'.partial' if partial else ''}.json"
    cpath.write_text(json.dumps(cert, indent=1))
    return cert, cpath


def _summary_row(summary: Table, report: Any, last: str) -> None:
    summary.add_row(report.backend, *(str(report.count(s)) for s in ("pass", "fail", "error", "skip")), last)


def _conform_cluster(address: str, random: int, seed: int, cert_dir: Path, json_out: Path | None) -> None:
    from vyre.conform.corpus import corpus

    try:
        from vyre.conform.distributed import run_cluster
    except ImportError as exc:
        _fail(VyreError(f"dask.distributed is not installed ({exc}).", f"{install_hint('dask')}."))
    total = len(corpus()) + random
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"cluster {escape(address)}", total=total)
        try:
            reports, workers = run_cluster(address, random=random, seed=seed,
                                           progress=lambda n: bar.advance(task, n))
        except OSError as exc:
            _fail(VyreError(f"cannot reach the Dask cluster {address} ({exc}).",
                            "pass 'local' or a scheduler address (tcp://host:8786)."))
    summary = Table(title=f"vyre conform on {workers} Dask worker(s)")
    for col in ("backend", "pass", "fail", "error", "skip", "certificate"):
        summary.add_column(col)
    failed = False
    out = []
    for report in reports:
        cert, cpath = _write_certificate(report, cert_dir, random, seed)
        _summary_row(summary, report, escape(str(cpath)))
        for r in report.results:
            if r.status in ("fail", "error"):
                console.print(f"[red]{r.status}[/red] {report.backend} {escape(r.name)}: {escape(str(r.detail))}")
        failed |= not report.ok
        out.append({"certificate": cert, "results": [vars(r) for r in report.results]})
    console.print(summary)
    if json_out:
        json_out.write_text(json.dumps(out, indent=1))
    raise typer.Exit(1 if failed or not reports else 0)


@app.command()
def bench(backend: list[str] = typer.Option([], help="backend ids (default: all available)"),
          elements: int = typer.Option(1 << 20, min=1, help="elements for the throughput case"),
          repeats: int = typer.Option(20, min=1, help="timed repetitions (median reported)"),
          json_out: Path | None = typer.Option(None, "--json")) -> None:
    """Side-by-side dispatch latency and elementwise throughput of the available backends."""
    from vyre.driver import BackendError

    from .bench import run_bench

    try:
        rows = run_bench(backend, elements, repeats)
    except BackendError as exc:
        _fail(exc)
    if not rows:
        _fail(VyreError("no backend could be measured.", "install a backend (`vyre doctor` says how)."))
    t = Table(title=f"vyre bench ({elements} elements, median of {repeats})")
    for col in ("backend", "tiny dispatch µs", "elementwise ms", "GB/s", "device ms"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["backend"], f"{r['tiny_us']:.1f}", f"{r['elementwise_ms']:.2f}", f"{r['gbps']:.2f}",
                  "-" if r["device_ms"] is None else f"{r['device_ms']:.3f}")
    console.print(t)
    if json_out:
        json_out.write_text(json.dumps(rows, indent=1))


@cache_app.command("info")
def cache_info() -> None:
    """Where the cache is and what it holds."""
    from vyre.driver.pipeline import cache_root

    root = cache_root()
    files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
    size = sum(p.stat().st_size for p in files)
    console.print(f"cache dir: {escape(str(root))}")
    kinds: dict[str, int] = {}
    for p in files:
        top = p.relative_to(root).parts[0]
        kinds[top] = kinds.get(top, 0) + 1
    for kind, n in sorted(kinds.items()):
        console.print(f"  {escape(kind)}: {n} file(s)")
    console.print(f"{len(files)} file(s), {size / 1e6:.2f} MB")


@cache_app.command("clear")
def cache_clear() -> None:
    """Delete every cached kernel and artifact (they are rebuilt on demand)."""
    from vyre.driver.pipeline import cache_root

    root = cache_root()
    n = sum(1 for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
    shutil.rmtree(root, ignore_errors=True)
    console.print(f"removed {n} file(s) from {escape(str(root))}")


def main() -> None:
    """The console entry point: user errors print to stderr with exit code 2, no traceback."""
    from vyre.driver import BackendError

    try:
        app()
    except (VyreError, BackendError) as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        sys.exit(2)
    except RecursionError:
        errors.print("[red]error:[/red] the input nests too deeply for vyre. Fix: flatten the program.")
        sys.exit(2)
