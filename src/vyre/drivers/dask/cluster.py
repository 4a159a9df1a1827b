"""The cluster the dask backend talks to: ``VYRE_DASK_SCHEDULER`` when set, else an embedded
`LocalCluster` with one worker process per local CUDA GPU (each pinned to its GPU through
``CUDA_VISIBLE_DEVICES`` before CUDA starts), or two CPU workers without GPUs
(``VYRE_DASK_WORKERS`` overrides the count)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from vyre.driver import settings

CONNECT_TIMEOUT_S = 10


def local_gpus() -> int:
    """CUDA GPUs on this host, from ``nvidia-smi -L`` (no CUDA initialisation here)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class PinGPU(WorkerPlugin):
    """Worker ``i`` of a LocalCluster gets GPU ``i mod gpus``."""

    def __init__(self, gpus: int) -> None:
        self.gpus = gpus

    def setup(self, worker: Any) -> None:
        from .worker import pin_gpu

        try:
            index = int(worker.name)
        except (TypeError, ValueError):
            return
        if self.gpus:
            pin_gpu(index % self.gpus)


def connect(address: str | None = None) -> tuple[Any, Any]:
    """(client, cluster or None) for ``address`` (None: VYRE_DASK_SCHEDULER; empty or unset:
    an embedded LocalCluster, which is ours to close)."""
    from distributed import Client, LocalCluster

    address = settings.get("VYRE_DASK_SCHEDULER") if address is None else address
    if address:   # a scheduler that does not answer is an error within CONNECT_TIMEOUT_S
        return Client(address, set_as_default=False, timeout=CONNECT_TIMEOUT_S), None
    gpus = local_gpus()
    n = int(settings.get("VYRE_DASK_WORKERS") or (gpus or 2))
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=50)
    client = Client(cluster, set_as_default=False)
    client.register_plugin(PinGPU(gpus), name="vyre-pin-gpu")
    return client, cluster
