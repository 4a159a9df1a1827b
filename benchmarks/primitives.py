"""vyre.lib primitives side by side with what users would call instead, on the same data in
one run: on CUDA, torch and CuPy (device arrays in, device arrays out); on any other backend
(PoCL here), numpy on the host. Every vyre result is checked against the reference library's
before it is timed (the exact float sum against math.fsum rounded once).

    python benchmarks/primitives.py --backend opencl --size 22 --json benchmarks/results/primitives_pocl.json
    python benchmarks/primitives.py --backend cuda --size 28 --json $OUT/primitives_h100.json

Figures: GB/s (bytes read + written once, per call), Gkeys/s for sorts, and for every pair the
ratio vyre / theirs (above 1: vyre is faster). ``--only`` picks cases (comma-separated). Each
case records ``check``: "ok", or what differed (the other cases still run). ``seconds``: the
whole run.

Timing (`timed`): two warm-up calls, then ``--reps`` calls each followed by a device
synchronisation, with Python's garbage collector paused; the median is the figure, and
``vyre_min_s``/``vyre_max_s`` show the spread. Before each case the previous case's arrays are
dropped and CuPy's and torch's pools emptied (`release`), so that a case times the same
whatever ran before it (the u32 scan read 11.7 ms here once against 4.6 ms in a plain
synchronised loop, with one warm-up, five calls, the collector running and earlier cases'
1 GiB arrays cached in the pools).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import vyre.lib as L
from vyre.driver import acquire

from _common import emit

CASES = ("f32_sum", "u32_sum", "u32_scan", "sort_u32", "sort_kv", "histogram256", "scatter_add")


def timed(fn: Callable[[], Any], sync: Callable[[], Any], reps: int, warm: int = 2) -> list[float]:
    """Seconds of each of ``reps`` calls, each followed by ``sync``, after ``warm`` warm-up
    calls (the first call at a new size grows memory pools; modules load lazily), with
    Python's cyclic garbage collector paused (as `timeit` does: a collection inside one call
    would be timed, and it frees device memory at an arbitrary call)."""
    for _ in range(warm):
        fn()
        sync()
    out = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            sync()
            out.append(time.perf_counter() - t)
    finally:
        if enabled:
            gc.enable()
    return out


class Host:
    """numpy on the host (the comparison on CPU backends)."""

    name = "numpy"

    def __init__(self) -> None:
        self.sync = lambda: None

    def release(self) -> None:
        gc.collect()

    def put(self, a: np.ndarray) -> Any:
        return a

    def zeros(self, n: int) -> Any:
        return np.zeros(n, np.float32)

    def get(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def full_check(self, case: str, got: Any, d: dict) -> str | None:
        """The checks at full size need a device library (numpy is too slow there)."""
        return None

    def theirs(self, case: str, d: dict) -> dict[str, Callable[[], Any]]:
        if case == "f32_sum":
            return {"numpy.sum": lambda: np.sum(d["x"])}
        if case == "u32_sum":
            return {"numpy.sum": lambda: np.sum(d["x"], dtype=np.uint32)}
        if case == "u32_scan":
            return {"numpy.cumsum": lambda: np.cumsum(d["x"], dtype=np.uint32)}
        if case == "sort_u32":
            return {"numpy.sort(stable)": lambda: np.sort(d["x"], kind="stable")}
        if case == "sort_kv":
            return {"numpy.argsort+take": lambda: (lambda o: (d["x"][o], d["v"][o]))(np.argsort(d["x"], kind="stable"))}
        if case == "histogram256":
            return {"numpy.bincount": lambda: np.bincount(d["x"], minlength=256)}
        if case == "scatter_add":
            def add_at() -> Any:
                t = np.zeros(d["bins"], np.float32)
                np.add.at(t, d["i"], d["v"])
                return t
            return {"numpy.add.at": add_at}
        raise KeyError(case)


class Gpu:
    """torch and CuPy on the device (whichever are installed)."""

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError:
            cupy = None
        try:
            import torch
        except ImportError:
            torch = None
        self.cupy, self.torch = cupy, torch
        if cupy is None and torch is None:
            raise SystemExit("the cuda comparison needs torch or cupy")
        self.name = "torch/cupy"

    def sync(self) -> None:
        if self.cupy is not None:
            self.cupy.cuda.Device().synchronize()
        if self.torch is not None:
            self.torch.cuda.synchronize()

    def release(self) -> None:
        """Give back what earlier cases left cached (CuPy's and torch's pools), so that each
        case starts from the same device memory whatever ran before it."""
        gc.collect()
        self.sync()
        if self.cupy is not None:
            self.cupy.get_default_memory_pool().free_all_blocks()
        if self.torch is not None:
            self.torch.cuda.empty_cache()

    def put(self, a: np.ndarray) -> Any:
        if self.cupy is not None:
            return self.cupy.asarray(a)
        return self.torch.from_numpy(a).cuda()

    def zeros(self, n: int) -> Any:
        """An f32 target made on the device (as torch.zeros(..., device="cuda") is)."""
        if self.cupy is not None:
            return self.cupy.zeros(n, self.cupy.float32)
        return self.torch.zeros(n, device="cuda")

    def get(self, a: Any) -> np.ndarray:
        if hasattr(a, "get"):
            return a.get()
        return a.cpu().numpy()

    def full_check(self, case: str, got: Any, d: dict) -> str | None:
        """vyre's full-size result against CuPy's (integer cases; the exact float sum and the
        scatter-add are checked against math.fsum)."""
        cp = self.cupy
        if cp is None or case not in ("u32_sum", "u32_scan", "sort_u32", "sort_kv", "histogram256"):
            return None
        x = cp.asarray(d["host"]["x"])
        if case == "u32_sum":
            ok = int(cp.asarray(got)) == int(x.sum(dtype=cp.uint32))
        elif case == "u32_scan":
            ok = bool(cp.array_equal(cp.asarray(got), cp.cumsum(x, dtype=cp.uint32)))
        elif case == "sort_u32":
            ok = bool(cp.array_equal(cp.asarray(got), cp.sort(x)))
        elif case == "sort_kv":
            # (key, index) pairs are distinct: any sort of them is the stable order
            order = cp.argsort((x.astype(cp.uint64) << 32) | cp.arange(x.size, dtype=cp.uint64))
            v = cp.asarray(d["host"]["v"])
            ok = bool(cp.array_equal(cp.asarray(got[0]), x[order]) and cp.array_equal(cp.asarray(got[1]), v[order]))
        else:
            ok = bool(cp.array_equal(cp.asarray(got), cp.bincount(x, minlength=256).astype(cp.uint32)))
        return "ok" if ok else "FAILED (differs from CuPy at full size)"

    def _t(self, a: np.ndarray, dtype: Any = None) -> Any:
        t = self.torch.from_numpy(a if a.dtype != np.uint32 else a.view(np.int32)).cuda()
        return t if dtype is None else t.to(dtype)

    def theirs(self, case: str, d: dict) -> dict[str, Callable[[], Any]]:
        out: dict[str, Callable[[], Any]] = {}
        cp, th = self.cupy, self.torch
        h = d["host"]
        if th is not None:
            tx = self._t(h["x"]) if "x" in h else None
            if case == "f32_sum":
                out["torch.sum"] = lambda: tx.sum()
            elif case == "u32_sum":
                out["torch.sum(int32)"] = lambda: tx.sum()
            elif case == "u32_scan":
                out["torch.cumsum(int32)"] = lambda: th.cumsum(tx, 0)
            elif case == "sort_u32":
                out["torch.sort(int32)"] = lambda: th.sort(tx)
                out["torch.sort(int32, stable)"] = lambda: th.sort(tx, stable=True)
            elif case == "sort_kv":
                tv = self._t(h["v"])
                out["torch.sort(stable)+gather"] = lambda: (lambda r: tv[r[1]])(th.sort(tx, stable=True))
            elif case == "histogram256":
                tf = tx.float()
                out["torch.histc(float)"] = lambda: th.histc(tf, bins=256, min=0, max=255)
                out["torch.bincount"] = lambda: th.bincount(tx.long(), minlength=256)
            elif case == "scatter_add":
                ti, tv = self._t(h["i"]).long(), self._t(h["v"])

                def index_add(deterministic: bool) -> Any:
                    th.use_deterministic_algorithms(deterministic)
                    try:
                        return th.zeros(d["bins"], device="cuda").index_add_(0, ti, tv)
                    finally:
                        th.use_deterministic_algorithms(False)
                out["torch.index_add_"] = lambda: index_add(False)
                out["torch.index_add_(deterministic)"] = lambda: index_add(True)
        if cp is not None:
            cx = cp.asarray(h["x"]) if "x" in h else None
            if case == "f32_sum":
                out["cupy.sum"] = lambda: cx.sum()
            elif case == "u32_sum":
                out["cupy.sum(uint32)"] = lambda: cx.sum(dtype=cp.uint32)
            elif case == "u32_scan":
                out["cupy.cumsum(uint32)"] = lambda: cp.cumsum(cx, dtype=cp.uint32)
            elif case == "sort_u32":
                out["cupy.sort"] = lambda: cp.sort(cx)
            elif case == "sort_kv":
                cv = cp.asarray(h["v"])
                out["cupy.argsort+take"] = lambda: (lambda o: (cx[o], cv[o]))(cp.argsort(cx))
            elif case == "histogram256":
                out["cupy.bincount"] = lambda: cp.bincount(cx, minlength=256)
        return out


def data(case: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if case == "f32_sum":
        # a wide exponent range: where the exact sum and a pairwise sum differ
        return {"x": (rng.standard_normal(n, np.float32) * np.exp2(rng.integers(-40, 40, n)).astype(np.float32))}
    if case in ("u32_sum", "u32_scan", "sort_u32"):
        return {"x": rng.integers(0, 2**32, n, dtype=np.uint32)}
    if case == "sort_kv":
        return {"x": rng.integers(0, 2**32, n, dtype=np.uint32), "v": rng.integers(0, 2**32, n, dtype=np.uint32)}
    if case == "histogram256":
        return {"x": rng.integers(0, 256, n, dtype=np.uint32)}
    if case == "scatter_add":
        m = max(1, n >> 4)
        return {"i": rng.integers(0, 1 << 16, m, dtype=np.uint32), "v": rng.standard_normal(m, np.float32)}
    raise KeyError(case)


def bytes_moved(case: str, n: int) -> float:
    return {"f32_sum": 4 * n, "u32_sum": 4 * n, "u32_scan": 8 * n, "sort_u32": 8 * n, "sort_kv": 16 * n,
            "histogram256": 4 * n, "scatter_add": 8 * max(1, n >> 4)}[case]


def check(case: str, got: Any, d: dict[str, np.ndarray], side: Any) -> None:
    """vyre's answer against numpy (or math.fsum), before anything is timed."""
    if case == "f32_sum":
        want = np.float32(math.fsum(d["x"].astype(np.float64)))
        assert np.float32(side.get(got)).tobytes() == want.tobytes(), "exact sum != math.fsum"
    elif case == "u32_sum":
        assert np.uint32(side.get(got)) == np.sum(d["x"], dtype=np.uint32)
    elif case == "u32_scan":
        assert np.array_equal(side.get(got), np.cumsum(d["x"], dtype=np.uint32))
    elif case == "sort_u32":
        assert np.array_equal(side.get(got), np.sort(d["x"]))
    elif case == "sort_kv":
        o = np.argsort(d["x"], kind="stable")
        assert np.array_equal(side.get(got[0]), d["x"][o]) and np.array_equal(side.get(got[1]), d["v"][o])
    elif case == "histogram256":
        assert np.array_equal(side.get(got), np.bincount(d["x"], minlength=256))
    elif case == "scatter_add":
        # each bin: math.fsum rounded once (spot check 64 bins; the tests check them all)
        out = side.get(got)
        for b in range(0, 1 << 16, 1024):
            assert np.float32(math.fsum(d["v"][d["i"] == b].astype(np.float64))) == out[b]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--size", type=int, default=22, help="log2 of the element count")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    started = time.perf_counter()
    backend = acquire(a.backend)
    n = 1 << a.size
    side: Any = Gpu() if a.backend == "cuda" else Host()
    rng = np.random.default_rng(0)
    results: dict[str, Any] = {"backend": a.backend, "device": repr(backend), "elements": n, "cases": {},
                               # the host's 1-minute load when the run starts (other work on a
                               # shared machine slows a CPU device's worker threads most)
                               "load_average_1min": os.getloadavg()[0]}
    for case in a.only.split(","):
        side.release()      # nothing of the previous case stays alive or cached
        host = data(case, n, rng)
        d = {k: side.put(v) for k, v in host.items()}
        d["host"], d["bins"] = host, 1 << 16
        def call(d: dict = d) -> Any:
            return {
                "f32_sum": lambda: L.sum(d["x"], backend=backend),
                "u32_sum": lambda: L.sum(d["x"], backend=backend),
                "u32_scan": lambda: L.cumsum(d["x"], backend=backend),
                "sort_u32": lambda: L.sort(d["x"], backend=backend),
                "sort_kv": lambda: L.sort(d["x"], d["v"], backend=backend),
                "histogram256": lambda: L.bincount(d["x"], 256, backend=backend),
                "scatter_add": lambda: L.index_add(side.zeros(1 << 16), d["i"], d["v"], backend=backend),
            }[case]()

        ours: Callable[[], Any] = call
        # the result is checked on at most 2**24 elements (the host models are slow beyond)
        small = {k: v[: 1 << 24] for k, v in host.items()} if n > 1 << 24 and case != "scatter_add" else host
        row: dict[str, Any] = {}
        try:
            check(case, call({k: side.put(v) for k, v in small.items()}) if small is not host else ours(), small, side)
            row["check"] = "ok"
        except AssertionError as exc:      # recorded, and the other cases still run
            row["check"] = f"FAILED: {exc}"
        moved = bytes_moved(case, n)
        keys = n if case.startswith("sort") else None
        each = timed(ours, side.sync, a.reps)
        t = statistics.median(each)
        full = side.full_check(case, ours(), d)
        if full is not None:
            row["check_full_size"] = full
        row["vyre_s"] = t
        row["vyre_min_s"], row["vyre_max_s"] = min(each), max(each)
        row["vyre_GBps"] = moved / t / 1e9
        if keys:
            row["vyre_Gkeys"] = keys / t / 1e9
        for name, fn in side.theirs(case, {**d, "bins": 1 << 16}).items():
            try:
                tt = statistics.median(timed(fn, side.sync, a.reps))
            except Exception as exc:          # a library that refuses (e.g. deterministic index_add_)
                row[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:200]
                continue
            row[f"{name}_s"] = tt
            row[f"{name}_GBps"] = moved / tt / 1e9
            if keys:
                row[f"{name}_Gkeys"] = keys / tt / 1e9
            row[f"vyre_over_{name}"] = tt / t
        results["cases"][case] = row
        print(case, {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
        del host, d, small, ours, call, full      # `release` can then free them
    results["seconds"] = time.perf_counter() - started
    emit("primitives", results, a.json)


if __name__ == "__main__":
    main()
