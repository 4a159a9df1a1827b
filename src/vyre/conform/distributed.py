"""Distributed conformance: the corpus and the random programs sharded over the workers of a
Dask cluster (``local``: an embedded LocalCluster, else a scheduler address). Each worker runs
its own best local backend against the reference; the results merge into one report per
backend id, certified like a local run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .corpus import corpus
from .runner import BackendReport, CaseResult, run_backend


def conform_shard(entries: list[str], seeds: list[int], seed: int) -> dict[str, Any]:
    """Run on a worker: corpus entries (by name) and random programs (by seed) on the
    worker's own backend against the reference; the report as plain data."""
    from vyre.drivers.dask.worker import local_backend

    b = local_backend()
    wanted = set(entries)
    picked = [e for e in corpus() if e.name in wanted]
    report = run_backend(b, entries=picked, random_seeds=seeds, seed=seed, minimise_budget=5.0,
                         workers=1)   # a Dask worker: the cluster is the parallelism
    return {"backend": b.id(), "version": b.version(), "device": b.device_fingerprint().hex(),
            "results": [vars(r) for r in report.results]}


def run_cluster(address: str, *, random: int = 0, seed: int = 0, shard_size: int = 25,
                progress: Callable[[int], None] | None = None) -> tuple[list[BackendReport], int]:
    """(one merged report per backend the workers ran, workers used)."""
    from vyre.drivers.dask.cluster import connect
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
