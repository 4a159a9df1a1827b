"""Every ``VYRE_*`` environment variable, read in one place.

`SETTINGS` is the table (name, default, meaning) that docs/settings.md and ``vyre doctor``
print; `get(name)` reads one, at call time (so tests and long-lived processes see changes).
Nothing else in vyre reads ``os.environ`` for a ``VYRE_*`` name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    meaning: str


SETTINGS: tuple[Setting, ...] = (
    Setting("VYRE_BACKEND", "", "Force a backend id (cuda, opencl, reference) for "
            "acquire_preferred_dispatch_backend(), routing and @vyre.kernel calls."),
    Setting("VYRE_CACHE_DIR", "(platformdirs user cache)/vyre", "Where compiled kernels, pipeline "
            "artifacts and generated sources are kept."),
    Setting("VYRE_KEY_DIR", "(platformdirs user config)/vyre", "Where the key that authenticates "
            "cache files (a keyed MAC) lives."),
    Setting("VYRE_AUTOTUNER", "off", "on/1/true: measure workgroup sizes for size-agnostic programs "
            "and keep the fastest (the bytes never change)."),
    Setting("VYRE_ROUTE_REFERENCE", "0", "1: let the router pick the CPU reference when no other "
            "backend can run a program."),
    Setting("VYRE_OPENCL_DEVICE", "", "Substring of the OpenCL platform or device name to use "
            "(default: the first GPU, else the first device)."),
    Setting("VYRE_OPENCL_ZERO_COPY", "1", "0: never map host memory on OpenCL devices with unified "
            "memory (always copy)."),
    Setting("VYRE_DASK_SCHEDULER", "", "Address of a Dask scheduler for the dask backend (default: "
            "start a LocalCluster with one worker per local device)."),
    Setting("VYRE_DASK_WORKERS", "", "Workers of the dask backend's LocalCluster (default: one per CUDA "
            "GPU, else 2)."),
    Setting("VYRE_REQUIRE_OPENCL", "0", "1 (tests): a missing OpenCL platform fails the run instead "
            "of skipping the OpenCL tests (CI sets it)."),
    Setting("VYRE_CUDA_TENSOR_CORES", "1", "0: run matmul_acc (and so vyre.lib.matmul) as scalar loops "
            "on CUDA instead of on the tensor cores (IMMA), e.g. to compare; the bytes are the same. "
            "Read when a CUDA backend is created."),
    Setting("VYRE_LOG", "", "debug, info or warning: print vyre's log at that level to stderr "
            "(compiles, disk-cache loads, in-memory cache hits, routing, kernel timings); it is the "
            "`logging` logger 'vyre', which an application may configure itself instead."),
)
_BY_NAME = {s.name: s for s in SETTINGS}


def get(name: str) -> str | None:
    """The variable's value, or None when unset or empty."""
    if name not in _BY_NAME:
        raise KeyError(f"{name} is not a vyre setting (see vyre.driver.settings.SETTINGS)")
    value = os.environ.get(name, "").strip()
    return value or None


def flag(name: str, default: bool = False) -> bool:
    """A boolean setting: on/1/true/yes, or off/0/false/no."""
    value = get(name)
    if value is None:
        return default
    return value.lower() in ("1", "on", "true", "yes")


def configure_logging() -> None:
    """Apply ``VYRE_LOG``: send the 'vyre' logger's records at that level to stderr (once; an
    application that configured the logger itself keeps its handlers). An unknown level is
    reported on stderr and ignored."""
    import logging

    value = get("VYRE_LOG")
    if value is None:
        return
    level = logging.getLevelName(value.upper())
    logger = logging.getLogger("vyre")
    if not isinstance(level, int):
        logging.getLogger("vyre.settings").warning(
            "VYRE_LOG=%s is not a logging level; use debug, info or warning.", value)
        return
    logger.setLevel(level)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("vyre %(levelname)s: %(message)s"))
        logger.addHandler(handler)


def table_markdown() -> str:
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | {s.default or '(unset)'} | {s.meaning} |" for s in SETTINGS]
    return "\n".join(rows)
