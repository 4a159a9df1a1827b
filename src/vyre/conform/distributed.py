"""Distributed conformance: the corpus and the random programs sharded over the workers of a
Dask cluster (``local``: an embedded LocalCluster, else a scheduler address). Each worker runs
its own best local backend against the reference; the results merge into one report per
backend id, certified like a local run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .corpus import corpus
from .runner import BackendReport, CaseResult


def run_cluster(address: str, *, random: int = 0, seed: int = 0, shard_size: int = 25,
                progress: Callable[[int], None] | None = None) -> tuple[list[BackendReport], int]:
    """(one merged report per backend the workers ran, workers used)."""
    from vyre.drivers.dask.cluster import connect
    from vyre.drivers.dask.worker import conform_shard

    client, cluster = connect("" if address == "local" else address)
    try:
        n_workers = len(client.scheduler_info().get("workers", {}))
        names = [e.name for e in corpus()]
        seeds = [seed * 1_000_003 + i for i in range(random)]
        shards = [(names[i:i + shard_size], []) for i in range(0, len(names), shard_size)]
        shards += [([], seeds[i:i + shard_size]) for i in range(0, len(seeds), shard_size)]
        from distributed import as_completed

        futures = {client.submit(conform_shard, e, s, seed, pure=False): len(e) + len(s) for e, s in shards}
        reports: dict[str, BackendReport] = {}
        for fut in as_completed(list(futures), loop=client.loop):
            data: dict[str, Any] = fut.result()
            rep = reports.setdefault(data["backend"], BackendReport(data["backend"], data["version"], data["device"]))
            rep.results.extend(CaseResult(**r) for r in data["results"])
            if progress:
                progress(futures[fut])
        return list(reports.values()), n_workers
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
