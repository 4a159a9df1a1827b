"""NVRTC: CUDA C -> cubin for one architecture, through cuda.bindings.nvrtc.

Needs no GPU (CI compiles every generated kernel with it). Results are cached on disk by
vyre's `DiskCache`, keyed by source, architecture, options and NVRTC version, so a second
process loads the cubin without running NVRTC. `CudaCompiler` builds programs in worker
processes (`vyre.driver.engine.farm`: warm-up and conformance).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import blake3

from vyre.driver.engine.device import Kernel
from vyre.driver.errors import BackendUnavailable, KernelCompileFailed
from vyre.driver.install import install_hint
from vyre.driver.pipeline import DiskCache, cache_root
from vyre.ir.program import Program

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


@dataclass(frozen=True)
class CudaCompiler:
    """`vyre.driver.engine.farm.Compiler` for one architecture: CUDA C through NVRTC, in
    any process (it needs no GPU), with what `CudaDevice.compile` records."""

    arch: str
    tensor_cores: bool = False   # matmul_acc on IMMA (the device's `CudaDevice.tensor_cores`)
    shared_limit: int = 48 * 1024   # shared memory a block may have (the device's opt-in limit)

    def build(self, program: Program) -> tuple[dict, bytes]:
        from .codegen import generate

        plan, source = generate(program, self.tensor_cores, self.shared_limit)
        return (kernel_of(None, plan, source, "compiled", self.shared_limit).meta(plan.entries),
                compile_cubin(source, self.arch))

    def build_many(self, programs: list[Program]) -> list[tuple[dict, bytes] | None]:
        """Several programs in one NVRTC invocation (`batch_source`): each gets the whole
        cubin, its entries renamed apart. If the batch does not compile, each program is
        compiled alone (None for one that fails: its dispatch reports why)."""
        from .codegen import generate

        gens = [generate(p, self.tensor_cores, self.shared_limit) for p in programs]
        try:
            source, entries = batch_source(gens)
            cubin = compile_cubin(source, self.arch)
        except Exception:
            out: list[tuple[dict, bytes] | None] = []
            for plan, src in gens:
                try:
                    out.append((kernel_of(None, plan, src, "compiled", self.shared_limit).meta(plan.entries),
                                compile_cubin(src, self.arch)))
                except Exception:
                    out.append(None)
            return out
        return [(kernel_of(None, plan, src, "compiled", self.shared_limit).meta(names), cubin)
                for (plan, src), names in zip(gens, entries)]


def batch_source(gens: list[tuple[Any, str]]) -> tuple[str, list[tuple[str, ...]]]:
    """One translation unit of several generated sources: each in its own namespace, its
    entry points renamed apart (``<entry>__b<i>``: extern "C" names ignore namespaces) and
    its macros undefined after it. Returns the source and each program's entry names."""
    parts, entries = [], []
    for i, (plan, src) in enumerate(gens):
        names = tuple(f"{e}__b{i}" for e in plan.entries)
        for old, new in zip(plan.entries, names):
            src = re.sub(rf"\b{re.escape(old)}\b", new, src)
        undef = "".join(f"#undef {m}\n" for m in dict.fromkeys(re.findall(r"^\s*#\s*define\s+(\w+)", src, re.M)))
        parts.append(f"namespace vy_batch{i} {{\n{src}\n}}\n{undef}")
        entries.append(names)
    return "".join(parts), entries


def kernel_of(handles: Any, plan: Any, source: str, built_from: str, shared_limit: int) -> Kernel:
    """The engine's `Kernel` of a lowered plan and its source (``handles``: the loaded entry
    points, one per phase), printed for a device whose blocks may have ``shared_limit`` bytes
    of shared memory (`tiles.dynamic_bytes`: what its launches ask for)."""
    from .tiles import dynamic_bytes

    return Kernel(handles, plan.uses_ctl, plan.fully_written, built_from, source, plan.stoppable,
                  plan.vector, Kernel.indirect_of(plan), Kernel.scratch_of(plan),
                  dynamic_bytes(plan, shared_limit))


class CubinCache:
    """Disk cache of cubins keyed by (source, arch, options, NVRTC version)."""

    def __init__(self) -> None:
        self.disk = DiskCache("cuda")
        self.version = nvrtc_version()
        self.compiled = self.loaded = 0

    def key(self, source: str, arch: str) -> bytes:
        return blake3.blake3(f"{arch}|{' '.join(OPTIONS)}|nvrtc{self.version}|".encode()
                             + source.encode()).digest()

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
