"""OpenCL device objects: device selection, context and profiling queue, program builds
(with vyre's on-disk binary cache), buffers, launches and error mapping. Only this module
and backend.py import pyopencl."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass

import blake3
import numpy as np
import pyopencl as cl

from vyre.driver import settings
from vyre.driver.errors import (
    BackendUnavailable,
    DeviceOutOfMemory,
    DispatchFailed,
    KernelCompileFailed,
)
from vyre.driver.pipeline import DiskCache, cache_root

from .codegen import BASE_OPTIONS, CORRECT_DIV_SQRT

ID = "opencl"
_OOM = {"MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_RESOURCES", "OUT_OF_HOST_MEMORY"}


# PoCL's default work-group method ("loopvec") miscompiles straight-line kernels with many
# barriers: PoCL 3.1 (Debian 12) on an AMD EPYC host sorted a 32-wide bitonic network
# (hand-written, 10 barrier pairs) wrongly, while the "loops" method and -cl-opt-disable gave
# numpy's order (tests/test_examples.py::test_workgroup_bitonic_sort_matches_numpy_sort).
# PoCL reads the method once, when its platform starts, so it is set before the first
# clGetPlatformIDs; a value the user set is kept. Other OpenCL platforms ignore it.
POCL_WORK_GROUP_METHOD = "loops"


def _pocl_work_group_method() -> str:
    return os.environ.setdefault("POCL_WORK_GROUP_METHOD", POCL_WORK_GROUP_METHOD)


def pick_device() -> cl.Device:
    """``VYRE_OPENCL_DEVICE`` (index or name substring), else the first GPU, else the first
    device of any platform."""
    _pocl_work_group_method()
    try:
        devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    except cl.Error as exc:
        raise BackendUnavailable(ID, f"no OpenCL platform ({exc}).",
                                 "install an OpenCL ICD (Debian: apt-get install pocl-opencl-icd "
                                 "ocl-icd-libopencl1) or a GPU vendor's OpenCL driver.") from None
    if not devices:
        raise BackendUnavailable(ID, "no OpenCL device found.",
                                 "install an OpenCL ICD (Debian: apt-get install pocl-opencl-icd "
                                 "ocl-icd-libopencl1).")
    want = settings.get("VYRE_OPENCL_DEVICE")
    if want:
        if want.isdigit() and int(want) < len(devices):
            return devices[int(want)]
        for d in devices:
            if want.lower() in d.name.lower():
                return d
        raise BackendUnavailable(ID, f"VYRE_OPENCL_DEVICE={want!r} matches none of "
                                 f"{[d.name for d in devices]}.", "set it to an index or a name "
                                 "substring of a listed device, or unset it.")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


def error_name(exc: cl.Error) -> str:
    code = getattr(exc, "code", None)
    try:
        return cl.status_code.to_string(code) if code is not None else type(exc).__name__
    except Exception:
        return str(code)


@dataclass
class DeviceInfo:
    name: str
    platform: str
    driver: str
    max_workgroup_size: int
    max_item_sizes: tuple[int, int, int]
    max_alloc: int
    global_mem: int
    local_mem: int
    compute_units: int
    extensions: frozenset[str]
    correct_div_sqrt: bool
    host_unified: bool
    cpu: bool                      # CL_DEVICE_TYPE_CPU: a workgroup's invocations run in turn


class Runtime:
    def __init__(self) -> None:
        self.device = pick_device()
        d = self.device
        try:
            self.context = cl.Context([d])
            self.queue = self.new_queue()
        except cl.Error as exc:
            raise BackendUnavailable(ID, f"cannot open {d.name}: {error_name(exc)}.",
                                     "check the OpenCL driver installation (`clinfo`).") from None
        sizes = tuple(d.max_work_item_sizes) + (1, 1, 1)
        self.info = DeviceInfo(
            name=d.name, platform=d.platform.name, driver=d.driver_version,
            max_workgroup_size=int(d.max_work_group_size),
            max_item_sizes=tuple(int(s) for s in sizes[:3]),  # type: ignore[arg-type]
            max_alloc=int(d.max_mem_alloc_size), global_mem=int(d.global_mem_size),
            local_mem=int(d.local_mem_size), compute_units=int(d.max_compute_units),
            extensions=frozenset(d.extensions.split()),
            correct_div_sqrt=bool(d.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT),
            host_unified=bool(d.host_unified_memory) and settings.flag("VYRE_OPENCL_ZERO_COPY", True),
            cpu=bool(d.type & cl.device_type.CPU))
        self.options = list(BASE_OPTIONS) + ([CORRECT_DIV_SQRT] if self.info.correct_div_sqrt else [])
        self.disk = DiskCache("opencl")
        wg_method = _pocl_work_group_method() if "portable" in self.info.platform.lower() else ""
        self.fingerprint = blake3.blake3(
            f"{self.info.platform}|{self.info.name}|{self.info.driver}|{cl.VERSION}|{wg_method}".encode()).digest()
        self.zero = np.zeros(1, dtype=np.uint32)

    def new_queue(self) -> cl.CommandQueue:
        """An in-order profiling queue (a fresh one replaces a queue whose work was abandoned)."""
        return cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)

    # ---- programs ----------------------------------------------------------------------
    def _key(self, source: str) -> bytes:
        return blake3.blake3(self.fingerprint + "|".join(self.options).encode() + source.encode()).digest()

    def cached(self, source: str) -> bool:
        """True when the disk cache holds a binary of ``source``."""
        return self.disk.get(self._key(source)) is not None

    def build(self, source: str) -> tuple[cl.Program, str]:
        """Build ``source``; returns the program and how (``disk`` or ``compiled``)."""
        key = self._key(source)
        binary = self.disk.get(key)
        if binary is not None:
            try:
                prg = cl.Program(self.context, [self.device], [binary]).build(options=self.options)
                return prg, "disk"
            except cl.Error:
                pass  # a binary the driver no longer accepts: rebuild from source
        try:
            with warnings.catch_warnings():  # PoCL's clang notes (unused temporaries) are noise
                warnings.simplefilter("ignore", cl.CompilerWarning)
                prg = cl.Program(self.context, source).build(options=self.options, cache_dir=False)
        except cl.Error as exc:
            path = self.save_source(source)
            log = _build_log(exc)
            io = _disk_problem(log)
            if io is not None:
                err = DispatchFailed(f"the OpenCL compiler could not write its files on {self.info.name} "
                                     f"(an I/O error, not a problem of the program: {io}).",
                                     "free disk space (PoCL writes kernels under $TMPDIR and "
                                     "~/.cache/pocl), or point TMPDIR and POCL_CACHE_DIR somewhere "
                                     "writable; then dispatch again.", backend=ID)
                err.reason = "io"  # type: ignore[attr-defined]
                raise err from None
            raise KernelCompileFailed(
                f"OpenCL C build failed on {self.info.name}: {log[:2000]} (source: {path})",
                "this is a vyre code-generation bug: report it with the source file; meanwhile "
                "run on another backend.", backend=ID, log=log, source_path=str(path)) from None
        try:
            self.disk.put(key, bytes(prg.binaries[0]))
        except cl.Error:
            pass
        return prg, "compiled"

    def save_source(self, source: str) -> str:
        """Where a failing kernel's source was kept (or why it could not be)."""
        try:
            folder = cache_root() / "opencl-src"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{blake3.blake3(source.encode()).hexdigest()[:16]}.cl"
            path.write_text(source)
            return str(path)
        except OSError as exc:
            return f"not saved: {exc}"

    # ---- memory ------------------------------------------------------------------------
    def buffer(self, nbytes: int) -> cl.Buffer:
        try:
            return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=max(4, nbytes))
        except cl.Error as exc:
            raise self.oom_or_fail(exc, nbytes) from None

    def oom_or_fail(self, exc: cl.Error, nbytes: int = 0):
        name = error_name(exc)
        if name in _OOM or isinstance(exc, cl.MemoryError):
            return DeviceOutOfMemory(nbytes, self.info.global_mem, backend=ID)
        return DispatchFailed(f"OpenCL error {name}: {exc}.", "check the device and inputs; "
                              "`vyre doctor` reports the OpenCL setup.", backend=ID)

    def fail(self, exc: BaseException):
        if isinstance(exc, MemoryError):
            return DeviceOutOfMemory(0, None, backend=ID, fix="the host ran out of memory: "
                                     "dispatch smaller inputs.")
        return DispatchFailed(f"OpenCL driver error {type(exc).__name__}: {exc}.",
                              "check the device and inputs; `vyre doctor` reports the OpenCL setup.",
                              backend=ID)


def _disk_problem(log: str) -> OSError | None:
    """Why files cannot be written here (a full disk, a file-size limit), when a build failed
    without any compiler diagnostic; None when writing works or the compiler reported errors."""
    if "error:" in log.lower():
        return None
    import tempfile

    folders = [tempfile.gettempdir(), os.environ.get("POCL_CACHE_DIR") or
               os.path.join(os.path.expanduser("~"), ".cache", "pocl")]
    for folder in folders:
        try:
            os.makedirs(folder, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder) as f:
                f.write(b"\0" * (1 << 16))
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            return exc
    return None


def _build_log(exc: Exception) -> str:
    text = str(exc)
    return text.strip() or "no build log"


def now_ns() -> int:
    return time.perf_counter_ns()
