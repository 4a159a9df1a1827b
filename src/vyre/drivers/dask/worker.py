"""What runs inside a Dask worker: its local backend, the programs it has decoded (by
fingerprint, from wire bytes scattered once per program), and the partition tasks.

Results travel back as plain data: output bytes, or an error tuple the client turns back
into the same `BackendError` (exceptions with keyword-only arguments do not pickle)."""

from __future__ import annotations

import os
import threading
from typing import Any

_STATE: dict[str, Any] = {"backend": None, "programs": {}}
_LOCK = threading.Lock()


def local_backend() -> Any:
    """This worker's backend: ``VYRE_BACKEND`` or the preferred local one (acquired once)."""
    with _LOCK:
        b = _STATE["backend"]
        if b is None:
            from vyre.driver import acquire_preferred_dispatch_backend

            b = _STATE["backend"] = acquire_preferred_dispatch_backend()
        return b


def describe() -> dict[str, Any]:
    """This worker's backend id, device and supported ops (for the client's capabilities)."""
    b = local_backend()
    return {"backend": b.id(), "device": b.device_profile().device_name, "pid": os.getpid(),
            "ops": sorted(b.supported_ops()), "max_buffer": b.max_storage_buffer_bytes(),
            "max_wg": list(b.max_workgroup_size()), "max_inv": b.max_compute_invocations_per_workgroup(),
            "max_groups": b.max_compute_workgroups_per_dimension(),
            "max_shared": b.device_profile().max_shared_memory_bytes,
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _program(fp: str, wire: bytes) -> Any:
    programs = _STATE["programs"]
    p = programs.get(fp)
    if p is None:
        from vyre.ir import wire as W

        p = programs[fp] = W.decode(wire)
        if len(programs) > 256:
            programs.pop(next(iter(programs)))
    return p


def run(fp: str, wire: bytes, inputs: list[bytes], config: Any) -> tuple[str, Any]:
    """Dispatch a program on this worker's backend: ("ok", outputs) or ("error", details)."""
    from vyre.driver import BackendError

    try:
        b = local_backend()
        return "ok", b.dispatch(_program(fp, wire), inputs, config)
    except BackendError as err:
        return "error", (err.code, err.message, err.fix, getattr(err, "reason", None), type(err).__name__)


def pin_gpu(index: int) -> None:
    """Give this worker process one GPU (before anything initialises CUDA)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(index)
