"""NVRTC: CUDA C -> cubin for one architecture, through cuda.bindings.nvrtc.

Needs no GPU (CI compiles every generated kernel with it). Results are cached on disk by
vyre's `DiskCache`, keyed by source, architecture, options and NVRTC version, so a second
process loads the cubin without running NVRTC.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import blake3

from vyre.driver.errors import BackendUnavailable, KernelCompileFailed
from vyre.driver.install import install_hint
from vyre.driver.pipeline import DiskCache, cache_root

ID = "cuda"
OPTIONS = ("--fmad=false", "--ftz=true", "--prec-div=true", "--prec-sqrt=true", "-std=c++17")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise BackendUnavailable(ID, f"NVRTC is not importable ({exc}).",
                                 f"{install_hint('cuda')} (cuda-bindings and nvidia-cuda-nvrtc).") from None
    return nvrtc


def _check(nvrtc, result) -> tuple:
    err, *rest = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{err!r}")
    return tuple(rest)


def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    try:
        major, minor = _check(nvrtc, nvrtc.nvrtcVersion())
    except Exception as exc:  # libnvrtc missing
        raise BackendUnavailable(ID, f"NVRTC library not loadable ({exc}).",
                                 "pip install nvidia-cuda-nvrtc matching cuda-bindings.") from None
    return int(major), int(minor)


def _save_source(source: str) -> str:
    folder = cache_root() / "cuda-src"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{blake3.blake3(source.encode()).hexdigest()[:16]}.cu"
    path.write_text(source)
    return str(path)


def compile_cubin(source: str, arch: str, name: str = "vyre.cu") -> bytes:
    """Compile ``source`` to a cubin for ``arch`` (e.g. ``"sm_90"``); raises
    `KernelCompileFailed` with NVRTC's log and the saved source path."""
    return _compile(source, arch, name, ptx=False)


def compile_ptx(source: str, arch: str, name: str = "vyre.cu") -> str:
    """The PTX NVRTC makes of ``source`` for ``arch`` (``"sm_90"`` compiles for
    ``compute_90``), with the options cubins get: what tests read to see which instructions a
    kernel uses (``mma.sync`` for IMMA) without a GPU."""
    return _compile(source, arch.replace("sm_", "compute_"), name, ptx=True).rstrip(b"\0").decode()


def _compile(source: str, arch: str, name: str, ptx: bool) -> bytes:
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in OPTIONS)]
    (prog,) = _check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []))
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            (size,) = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog))
            log = b" " * size
            _check(nvrtc, nvrtc.nvrtcGetProgramLog(prog, log))
            text = log.decode(errors="replace").strip()
            path = _save_source(source)
            raise KernelCompileFailed(
                f"NVRTC failed for {arch}: {text[:2000]} (source: {path})",
                "this is a vyre code-generation bug: report it with the source file; meanwhile "
                "run on another backend.", backend=ID, log=text, source_path=path)
        get_size, get = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if ptx else \
            (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        (size,) = _check(nvrtc, get_size(prog))
        out = b" " * size
        _check(nvrtc, get(prog, out))
        return out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _compile_quietly(source: str, arch: str) -> bytes | None:
    """A pool worker's compile: the cubin, or None when NVRTC fails (the dispatch that needs
    it compiles again in the caller's process and raises the error there)."""
    try:
        return compile_cubin(source, arch)
    except Exception:
        return None


def compile_many(sources: Sequence[str], arch: str, workers: int | None = None) -> list[bytes | None]:
    """Compile ``sources`` to cubins for ``arch`` in parallel: NVRTC runs one compile per
    process (spawned, so no CUDA context is inherited), up to ``workers`` (default: the CPU
    count) at a time. None for a source NVRTC refused."""
    if not sources:
        return []
    workers = max(1, min(workers or os.cpu_count() or 1, len(sources)))
    if workers == 1:
        return [_compile_quietly(s, arch) for s in sources]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        return list(pool.map(_compile_quietly, sources, [arch] * len(sources),
                             chunksize=max(1, len(sources) // (4 * workers))))


class CubinCache:
    """Disk cache of cubins keyed by (source, arch, options, NVRTC version)."""

    def __init__(self) -> None:
        self.disk = DiskCache("cuda")
        self.version = nvrtc_version()
        self.compiled = self.loaded = 0

    def key(self, source: str, arch: str) -> bytes:
        return blake3.blake3(f"{arch}|{' '.join(OPTIONS)}|nvrtc{self.version}|".encode()
                             + source.encode()).digest()

    def precompile(self, sources: Sequence[str], arch: str, workers: int | None = None) -> int:
        """Compile every source not already on disk, in parallel (`compile_many`), and store
        the cubins: the dispatches that need them load them from disk. Returns how many were
        compiled."""
        todo = {self.key(s, arch): s for s in sources}
        todo = {k: s for k, s in todo.items() if self.disk.get(k) is None}
        built = compile_many(list(todo.values()), arch, workers)
        for key, cubin in zip(todo, built):
            if cubin is not None:
                self.disk.put(key, cubin)
        done = sum(c is not None for c in built)
        self.compiled += done
        return done

    def get_or_compile(self, source: str, arch: str) -> tuple[bytes, str]:
        key = self.key(source, arch)
        cubin = self.disk.get(key)
        if cubin is not None:
            self.loaded += 1
            return cubin, "disk"
        cubin = compile_cubin(source, arch)
        self.disk.put(key, cubin)
        self.compiled += 1
        return cubin, "nvrtc"
