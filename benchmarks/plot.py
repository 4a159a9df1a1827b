"""Plots of the recorded benchmark results (benchmarks/results/*.json) for docs/benchmarks.md:
`python benchmarks/plot.py` writes PNGs into docs/img/ (needs `pip install 'vyre[docs]'`)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "img"


def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())["results"]


def bars(ax, groups: list[str], series: dict[str, list[float]], ylabel: str, log: bool = False) -> None:
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, values, width, label=label)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(frameon=False)
    ax.grid(axis="y", alpha=0.3)


def cuda_kernels() -> None:
    r = load("cuda_kernels")
    names = [n for n in ("matmul", "histogram", "scan", "sort", "sha256", "mandelbrot", "nbody") if f"{n}_vyre_ms" in r]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    series = {"vyre": [r[f"{n}_vyre_ms"] for n in names], "hand-written CUDA C": [r[f"{n}_hand_ms"] for n in names],
              "torch": [r.get(f"{n}_torch_ms", float("nan")) for n in names]}
    bars(ax, names, series, "ms (log)", log=True)
    ax.set_title("Generated kernels vs the same algorithm by hand (H100)")
    fig.tight_layout()
    fig.savefig(OUT / "cuda_kernels.png", dpi=120)


def dispatch() -> None:
    r = load("cuda_dispatch")
    labels = ["vyre bound", "raw cuda.core", "CuPy RawKernel", "torch add_", "Triton"]
    keys = ["vyre_bound_launch_us", "raw_cuda_core_launch_us", "cupy_rawkernel_us", "torch_add__us", "triton_launch_us"]
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.barh(labels[::-1], [r[k] for k in keys][::-1], color="tab:blue")
    ax.set_xlabel("µs per launch of a tiny kernel (H100)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(OUT / "cuda_dispatch.png", dpi=120)


def cluster() -> None:
    r = load("dask_cluster_gpus")
    fig, ax = plt.subplots(figsize=(5, 3))
    labels = ["cuda backend", "dask, 1 GPU", "dask, 2 GPUs"]
    ax.bar(labels, [r["local_cuda_s"], r["one_gpu_s"], r["two_gpus_s"]], color=["tab:gray", "tab:blue", "tab:green"])
    ax.set_ylabel("s")
    ax.set_title(f"Mandelbrot {r['mandelbrot_size']}², {r['mandelbrot_iters']} iterations (two H200s)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(OUT / "dask_mandelbrot.png", dpi=120)


def wgpu() -> None:
    """vyre over hand-written WGSL per kernel, for each recorded adapter. The GPU runs (H100
    2026-11-24, H200 2026-11-22) timed each call with its host transfers; the lavapipe run
    (2026-11-26) times kernels apart from transfers at smaller sizes: the labels say so."""
    runs = {"H100 via Vulkan (with transfers)": load("wgpu_kernels_h100_vulkan"),
            "H200 via Vulkan (with transfers)": load("wgpu_kernels_h200_vulkan")}
    if (RESULTS / "wgpu_kernels_lavapipe.json").exists():
        runs["lavapipe, 2-core VM (kernel only)"] = load("wgpu_kernels_lavapipe")
    names = ["ew_u32", "ew_f32", "ew_fdiv", "ew_u64_add", "ew_u64_mul", "matmul"]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bars(ax, ["u32", "f32", "f32 a / b", "u64 add", "u64 mul", "matmul"],
         {k: [r.get(f"ratio_{n}_vyre_vs_hand", float("nan")) for n in names] for k, r in runs.items()},
         "vyre / hand-written WGSL")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "wgpu_ratios.png", dpi=120)


def primitives() -> None:
    """vyre.lib speed over the fastest comparison per primitive (above 1: vyre is faster), for
    each recorded run (primitives_*.json)."""
    runs = {p.stem.split("_", 1)[1]: json.loads(p.read_text())["results"]["cases"]
            for p in sorted(RESULTS.glob("primitives_*.json"))}
    if not runs:
        return
    cases = sorted({c for r in runs.values() for c in r})
    series = {}
    for name, r in runs.items():
        series[name] = [min((v for k, v in r[c].items() if k.startswith("vyre_over_")), default=0.0)
                        if c in r else 0.0 for c in cases]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bars(ax, cases, series, "vyre / fastest other (speed)", log=True)
    ax.axhline(1, color="k", lw=0.8)
    ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    fig.savefig(OUT / "primitives.png", dpi=120)


def cuda_math() -> None:
    """Correctly rounded math vs CUDA's own functions (benchmarks/cuda_math.py), when recorded."""
    if not (RESULTS / "cuda_math.json").exists():
        return
    r = load("cuda_math")
    names = ["exp", "log", "sin", "tanh"]
    fig, ax = plt.subplots(figsize=(6, 3))
    bars(ax, names, {"memory-bound (2^28 f32)": [r[f"{n}_memory_ratio"] for n in names],
                     "compute-bound (64 per thread)": [r[f"{n}_compute_ratio"] for n in names]},
         "vyre / CUDA expf, logf, ...")
    ax.axhline(1.25, color="tab:blue", lw=0.8, ls="--")
    ax.axhline(3.0, color="tab:orange", lw=0.8, ls="--")
    fig.tight_layout()
    fig.savefig(OUT / "cuda_math.png", dpi=120)


def cuda_imma() -> None:
    """Integer GEMMs on the tensor cores (benchmarks/cuda_imma.py): i8 8192^3 in TOPS for each
    tile timed beside torch._int_mm, and the u32 byte planes against vyre's SIMT form."""
    if not (RESULTS / "cuda_imma.json").exists():
        return
    r = load("cuda_imma")
    tiles = r.get("i8_tiles", {})
    names = [*tiles, "torch._int_mm"]
    tops = [row["tops"] for row in tiles.values()] + [r.get("i8_torch_int_mm_tops", 0.0)]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.2), gridspec_kw={"width_ratios": [3, 1]})
    ax.bar(range(len(names)), tops, color=["tab:blue"] * len(tiles) + ["tab:gray"])
    ax.set_xticks(range(len(names)), names, rotation=25, ha="right", fontsize=7)
    ax.axhline(600, color="tab:orange", lw=0.8, ls="--")
    ax.set_ylabel("TOPS (i8 8192^3, H100)")
    u32 = r.get("u32_tiles", {})
    bx.bar(range(len(u32)), [row.get("ratio_vs_simt", 0.0) for row in u32.values()])
    bx.set_xticks(range(len(u32)), list(u32), rotation=25, ha="right", fontsize=7)
    bx.axhline(10, color="tab:orange", lw=0.8, ls="--")
    bx.set_ylabel("u32 4096^3: x vyre SIMT")
    fig.tight_layout()
    fig.savefig(OUT / "cuda_imma.png", dpi=120)


def device_arrays() -> None:
    """Per-call cost of a saxpy vs array size (benchmarks/cuda_device_arrays.py's sweep): vyre
    on CuPy arrays against what users would write instead, when recorded."""
    if not (RESULTS / "cuda_device_arrays.json").exists():
        return
    sweep = load("cuda_device_arrays").get("sweep")
    if not sweep:
        return
    labels = {"vyre_cupy_us": "vyre (@vyre.kernel, CuPy arrays)", "cupy_elementwise_us": "CuPy ElementwiseKernel",
              "cupy_rawkernel_us": "CuPy RawKernel", "torch_us": "torch", "triton_us": "Triton"}
    n = sweep["elements"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label in labels.items():
        if key in sweep:
            ax.plot(n, sweep[key], marker="o", label=label, lw=2 if key == "vyre_cupy_us" else 1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("elements (f32)")
    ax.set_ylabel("µs per synchronous call")
    ax.set_title("saxpy per call vs array size (H100)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "cuda_device_arrays.png", dpi=120)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for fn in (cuda_kernels, dispatch, cluster, wgpu, primitives, cuda_math, cuda_imma, device_arrays):
        fn()
        print("wrote", fn.__name__)


if __name__ == "__main__":
    main()
