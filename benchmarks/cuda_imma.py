"""Integer matmul on the tensor cores (vyre.lib.matmul's Program, matmul_acc on IMMA), one run:

* i8 x i8 -> i32 GEMM 8192^3 in TOPS, side by side with torch._int_mm (cuBLASLt), whose bytes
  it must equal (no i32 overflow at this size: |sum| <= 8192 * 128^2 < 2^31);
* u32 x u32 -> u32 wrapping GEMM 4096^3 through byte planes (ten u8 IMMA products per tile),
  against vyre's own SIMT u32 matmul: the same Program with VYRE_CUDA_TENSOR_CORES=0, whose
  matmul_acc runs as scalar loops; the two must give the same bytes;
* first, on smaller shapes that are not multiples of the tiles: CUDA equal to numpy's int64
  product reduced mod 2^32 and byte-identical to the reference interpreter.

Side by side in the same run: every tile of `I8_TILES` and `U32_TILES` (the first is what
vyre.lib.matmul uses, the second an earlier one, `i8_tiles` / `u32_tiles` in the results), each
checked against torch._int_mm (i8) or the SIMT bytes (u32), and against 256 entries computed in
int64 by numpy. Every one of them keeps its accumulators in registers across the k loop
(imma.RESIDENT_ACCUMULATORS); in a second process with its own kernel cache, the tiles before
(`BEFORE`) with that off, which is the code before it (`--form shared-d`:
`i8_shared_d`, `u32_shared_d`). ``--form narrow`` also turns off imma.WIDE_SHARED_ACCESS (4-byte
shared accesses, no ldmatrix: the form before that).

Device time from CUDA events on resident buffers (dispatch_resident_timed), median of REPS.
Usage: python benchmarks/cuda_imma.py [--quick] [--json out.json] [--form shared-d|narrow] [--no-ab]
(about 2 minutes on an H100, most of it NVRTC compiling the ~20 kernels)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import vyre.driver as d
import vyre.lib as L
from vyre.driver import DispatchConfig
from vyre.ir import DataType
from vyre.ir.launch import resolve
from vyre.lib.runner import params

from _common import emit

MM = importlib.import_module("vyre.lib.matmul")
REPS = 7
T = MM.Tiles
I8_TILES = [MM.CUDA_BYTES, T(128, 256, 128, 512), T(128, 256, 64, 512), T(256, 128, 128, 256), T(128, 256, 64, 256),
            T(256, 128, 128, 512)]
U32_TILES = [MM.CUDA_WORDS, T(64, 64, 64, 128), T(128, 64, 32, 256), T(64, 64, 32, 256)]
# what the second process times with the accumulators in workgroup memory
BEFORE = {"i8": MM.CUDA_BYTES, "u32": MM.CUDA_WORDS}


def label(t) -> str:
    return f"{t.bm}x{t.bn}x{t.bk}/{t.threads}"


def sampled_exact(a: np.ndarray, b: np.ndarray, out: np.ndarray, rng, count: int = 256) -> bool:
    """``count`` random entries of ``out`` (u32 bits) equal numpy's int64 dot products mod 2^32."""
    rows, cols = rng.integers(0, a.shape[0], count), rng.integers(0, b.shape[1], count)
    exact = np.einsum("ij,ji->i", a[rows].astype(np.int64), b[:, cols].astype(np.int64)) & 0xFFFFFFFF
    return bool(np.array_equal(out[rows, cols].astype(np.uint32), exact.astype(np.uint32)))


def full(rng: np.random.Generator, dt, shape) -> np.ndarray:
    info = np.iinfo(dt)
    return rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=np.int64).astype(dt)


def want(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)


def check_small(b, rng) -> dict:
    """CUDA == numpy int64 mod 2^32 == the reference, on edge shapes of each operand type."""
    out = {}
    for ta, tb, shape, ref_shape in [(np.int8, np.int8, (515, 772, 260), (70, 100, 36)),
                                     (np.uint8, np.int8, (129, 333, 67), (33, 37, 21)),
                                     (np.uint32, np.uint32, (300, 513, 190), (45, 70, 33)),
                                     (np.int32, np.int32, (64, 96, 65), (17, 40, 9))]:
        name = f"{np.dtype(ta).name}x{np.dtype(tb).name}"
        m, k, n = shape
        x, y = full(rng, ta, (m, k)), full(rng, tb, (k, n))
        got = L.matmul(x, y, backend=b)
        assert got.view(np.uint32).tobytes() == want(x, y).tobytes(), f"{name}: CUDA differs from numpy"
        m, k, n = ref_shape
        x, y = full(rng, ta, (m, k)), full(rng, tb, (k, n))
        cu, ref = L.matmul(x, y, backend=b), L.matmul(x, y, backend="reference")
        assert cu.tobytes() == ref.tobytes() == want(x, y).tobytes(), f"{name}: CUDA differs from the reference"
        out[f"exact_{name}"] = True
    return out


def timed(b, program, inputs: list[np.ndarray], cfg: DispatchConfig, reps: int = REPS) -> tuple[float, bytes]:
    """(median device ms, output bytes) of ``program`` on resident buffers."""
    counts = dict(resolve(program, [x.nbytes for x in inputs], cfg).counts)
    decls = [x for x in program.buffers if not x.is_workgroup]
    ins = dict(zip((x.name for x in program.inputs), inputs))
    res = []
    for decl in decls:
        r = b.allocate_resident(-(-counts[decl.name] * decl.dtype.size // 4) * 4)
        if decl.name in ins:
            b.upload_resident(r, ins[decl.name])
        res.append(r)
    pipe = d.pipeline.compile(b, program, DispatchConfig())
    pipe.dispatch_resident_timed(res, cfg)
    times = [pipe.dispatch_resident_timed(res, cfg).device_ns for _ in range(reps)]
    out = b.read_resident(res[[x.name for x in decls].index(program.outputs[0].name)])
    for r in res:
        b.free_resident(r)
    return float(np.median(times)) / 1e6, out


def lib_run(b, ta: DataType, tb: DataType, a: np.ndarray, bm: np.ndarray, words: bool,
            reps: int = REPS, t=None) -> tuple[float, bytes, float]:
    """vyre.lib.matmul's own two Programs and launches (as `matmul` builds them) on resident
    buffers, with its tiles or ``t``: (median device ms of both passes, output bytes, the
    transpose's share in ms)."""
    m, k = a.shape
    n = bm.shape[1]
    t = t or MM.tiles("cuda", words)
    tn = -(-n // MM.TR)
    cfg = DispatchConfig(grid_override=(-(-k // MM.TR) * tn, 1, 1), dispatch_elements=k * n)
    tr_ms, bt = timed(b, MM.transpose_program(tb), [bm.reshape(-1), params(k, n, 0, tn)], cfg, reps)
    tiles_n = -(-n // t.bn)
    cfg = DispatchConfig(grid_override=(-(-m // t.bm) * tiles_n, 1, 1), dispatch_elements=m * n)
    bt_arr = np.frombuffer(bt, bm.dtype)[:k * n]
    ms, out = timed(b, MM.program(ta, tb, t), [a.reshape(-1), bt_arr, params(m, n, k, tiles_n)], cfg, reps)
    return ms + tr_ms, out, tr_ms


def call_ms(A: np.ndarray, B: np.ndarray) -> float:
    """Median device ms of the whole `vyre.lib.matmul` call on torch CUDA tensors (both passes
    and the Python between them), CUDA events around it."""
    import torch

    ta, tb = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    L.matmul(ta, tb)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(REPS):
        start.record()
        L.matmul(ta, tb)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return float(np.median(samples))


def torch_int_mm(A: np.ndarray, B: np.ndarray) -> tuple[float, np.ndarray]:
    """(median device ms, result) of torch._int_mm (cuBLASLt's int8 GEMM, i32 out)."""
    import torch

    ta, tb = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    ref = torch._int_mm(ta, tb)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for i in range(REPS + 1):
        start.record()
        torch._int_mm(ta, tb)
        end.record()
        end.synchronize()
        if i:
            samples.append(start.elapsed_time(end))
    return float(np.median(samples)), ref.cpu().numpy()


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", type=Path, default=None, help="write results here")
    ap.add_argument("--quick", action="store_true", help="smaller matrices")
    ap.add_argument("--form", choices=("wide", "shared-d", "narrow"), default="wide",
                    help="shared-d: imma.RESIDENT_ACCUMULATORS off (d loaded and stored by every "
                         "matmul_acc); narrow: imma.WIDE_SHARED_ACCESS off too (4-byte shared accesses); "
                         "both time the tiles of BEFORE only, results as i8_<form>/u32_<form>")
    ap.add_argument("--no-ab", action="store_true", help="skip the second process (--form shared-d)")
    return ap.parse_args()


def i8_gemm(b, rng, n: int, tiles: list, res: dict, prefix: str = "i8") -> None:
    """The i8 GEMM n^3 with each of ``tiles`` beside torch._int_mm; the first tile's figures
    also as ``<prefix>_vyre_*``."""
    A, B = full(rng, np.int8, (n, n)), full(rng, np.int8, (n, n))
    ops = 2 * n ** 3
    try:
        torch_ms, ref = torch_int_mm(A, B)
    except Exception as exc:   # an older torch without _int_mm: vyre's figures still stand
        res[f"{prefix}_torch_int_mm"] = f"unavailable: {exc}"[:200]
        ref = None
    else:
        res.update({f"{prefix}_torch_int_mm_ms": torch_ms, f"{prefix}_torch_int_mm_tops": ops / torch_ms / 1e9})
    table = res.setdefault(f"{prefix}_tiles", {})
    for i, t in enumerate(tiles):
        ms, out, tr_ms = lib_run(b, DataType.I8, DataType.I8, A, B, False, t=t)
        got = np.frombuffer(out, np.int32)[:n * n].reshape(n, n)
        row = {"ms": ms, "tops": ops / ms / 1e9, "transpose_ms": tr_ms, "sampled_exact": sampled_exact(A, B, got, rng)}
        if ref is not None:
            row["equal_to_torch"] = got.tobytes() == ref.tobytes()
            row["ratio_vs_torch"] = torch_ms / ms
        table[label(t)] = row
        if i == 0:
            res.update({f"{prefix}_n": n, f"{prefix}_vyre_ms": ms, f"{prefix}_vyre_tops": row["tops"],
                        f"{prefix}_tile": label(t), f"{prefix}_transpose_ms": tr_ms})
            try:   # the whole call on torch tensors (both passes, the Python between)
                cms = call_ms(A, B)
                res.update({f"{prefix}_call_ms": cms, f"{prefix}_call_tops": ops / cms / 1e9})
            except Exception as exc:
                res[f"{prefix}_call"] = f"unavailable: {exc}"[:200]
            if ref is not None:
                res.update({f"{prefix}_equal_to_torch": row["equal_to_torch"],
                            f"ratio_{prefix}_vyre_vs_torch": row["ratio_vs_torch"]})
        assert row["sampled_exact"], f"i8 GEMM {label(t)}: vyre differs from numpy's int64 entries"
        assert ref is None or row["equal_to_torch"], f"i8 GEMM {label(t)}: vyre differs from torch._int_mm"


def u32_gemm(b, rng, n: int, tiles: list, res: dict, prefix: str = "u32", simt: bool = True) -> None:
    """The u32 wrapping GEMM n^3 with each of ``tiles`` (byte planes on IMMA), and with
    ``simt`` vyre's SIMT form beside them (VYRE_CUDA_TENSOR_CORES=0: matmul_acc as scalar
    loops), whose bytes each must equal; the first tile's figures also as ``<prefix>_imma_*``."""
    A, B = full(rng, np.uint32, (n, n)), full(rng, np.uint32, (n, n))
    ops = 2 * n ** 3
    simt_ms = simt_out = None
    if simt:
        from vyre.drivers.cuda.backend import CudaBackend

        os.environ["VYRE_CUDA_TENSOR_CORES"] = "0"
        try:
            scalar = CudaBackend(0)
        finally:
            del os.environ["VYRE_CUDA_TENSOR_CORES"]
        assert not scalar.supports_tensor_cores()
        simt_ms, simt_out, _ = lib_run(scalar, DataType.U32, DataType.U32, A, B, True, reps=3)
        # the SIMT form of the earlier tile too: the Program is the same on both paths, so
        # the tiles move the SIMT baseline as well
        earlier_ms, earlier_out, _ = lib_run(scalar, DataType.U32, DataType.U32, A, B, True, reps=3, t=tiles[1])
        res[f"{prefix}_simt_tiles"] = {label(tiles[0]): simt_ms, label(tiles[1]): earlier_ms,
                                       "equal": earlier_out[:4 * n * n] == simt_out[:4 * n * n]}
        scalar.shutdown()
        simt_out = simt_out[:4 * n * n]
        res.update({f"{prefix}_simt_ms": simt_ms, f"{prefix}_simt_tops": ops / simt_ms / 1e9,
                    f"{prefix}_simt_sampled_exact": sampled_exact(
                        A, B, np.frombuffer(simt_out, np.uint32).reshape(n, n), rng)})
    table = res.setdefault(f"{prefix}_tiles", {})
    for i, t in enumerate(tiles):
        ms, out, tr_ms = lib_run(b, DataType.U32, DataType.U32, A, B, True, t=t)
        out = out[:4 * n * n]
        row = {"ms": ms, "tops": ops / ms / 1e9, "transpose_ms": tr_ms,
               "sampled_exact": sampled_exact(A, B, np.frombuffer(out, np.uint32).reshape(n, n), rng)}
        if simt_out is not None:
            row.update(equal_to_simt=out == simt_out, ratio_vs_simt=simt_ms / ms)
        table[label(t)] = row
        if i == 0:
            res.update({f"{prefix}_n": n, f"{prefix}_tile": label(t), f"{prefix}_imma_ms": ms,
                        f"{prefix}_imma_tops": row["tops"]})
            if simt_out is not None:
                res.update({f"{prefix}_equal_to_simt": row["equal_to_simt"],
                            f"ratio_{prefix}_imma_vs_simt": row["ratio_vs_simt"]})
        assert row["sampled_exact"], f"u32 GEMM {label(t)}: differs from numpy's int64 entries"
        assert simt_out is None or row["equal_to_simt"], f"u32 GEMM {label(t)}: the IMMA byte planes differ from the SIMT loops"


def earlier_in_another_process(quick: bool, form: str = "shared-d") -> dict:
    """This benchmark with ``--form form``, in a child process with its own kernel cache (the
    disk cache keys kernels by program, not by the imma switches)."""
    prefix = form.replace("-", "_")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{prefix}.json"
        cmd = [sys.executable, __file__, "--form", form, "--json", str(out), *(["--quick"] if quick else [])]
        env = dict(os.environ, VYRE_CACHE_DIR=str(Path(tmp) / "cache"))
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        got = json.loads(out.read_text()).get("results", {}) if out.exists() else {}
        got = {k: v for k, v in got.items() if prefix in k}
        if run.returncode:
            got[f"{prefix}_failed"] = run.stderr[-600:]
        return got


def main() -> None:
    a = arguments()
    res: dict = {}
    t0 = time.perf_counter()
    i8_n, u32_n = (4096, 2048) if a.quick else (8192, 4096)
    try:   # whatever was measured is written, also when a check fails
        if a.form != "wide":
            from vyre.drivers.cuda import imma

            imma.RESIDENT_ACCUMULATORS = False
            imma.WIDE_SHARED_ACCESS = a.form != "narrow"
            b = d.acquire("cuda")
            rng = np.random.default_rng(26)
            prefix = a.form.replace("-", "_")
            i8_gemm(b, rng, i8_n, [BEFORE["i8"]], res, prefix=f"i8_{prefix}")
            u32_gemm(b, rng, u32_n, [BEFORE["u32"]], res, prefix=f"u32_{prefix}", simt=False)
            return
        b = d.acquire("cuda")
        res["device"] = b.device_profile().device_name
        res["tensor_cores"] = b.supports_tensor_cores()
        assert res["tensor_cores"], "this device does not run matmul_acc on IMMA (sm_80+ needed)"
        rng = np.random.default_rng(26)
        res.update(check_small(b, rng))
        # i8 GEMM vs torch._int_mm (cuBLASLt), each tile
        i8_gemm(b, rng, i8_n, I8_TILES, res)
        # u32 wrapping GEMM: byte planes on IMMA vs vyre's SIMT (scalar matmul_acc)
        u32_gemm(b, rng, u32_n, U32_TILES, res)
        if not a.no_ab:   # the earlier form (d in workgroup memory), the earlier tiles, same checks
            res.update(earlier_in_another_process(a.quick))
    finally:
        res["wall_s"] = time.perf_counter() - t0
        emit("cuda_imma", res, a.json)


if __name__ == "__main__":
    main()
