"""Integer matmul on the tensor cores (vyre.lib.matmul's Program, matmul_acc on IMMA), one run:

* i8 x i8 -> i32 GEMM 8192^3 in TOPS, side by side with torch._int_mm (cuBLASLt), whose bytes
  it must equal (no i32 overflow at this size: |sum| <= 8192 * 128^2 < 2^31);
* u32 x u32 -> u32 wrapping GEMM 4096^3 through byte planes (ten u8 IMMA products per tile),
  against vyre's own SIMT u32 matmul: the same Program with VYRE_CUDA_TENSOR_CORES=0, whose
  matmul_acc runs as scalar loops; the two must give the same bytes;
* first, on smaller shapes that are not multiples of the tiles: CUDA equal to numpy's int64
  product reduced mod 2^32 and byte-identical to the reference interpreter.

Device time from CUDA events on resident buffers (dispatch_resident_timed), median of REPS.
Usage: python benchmarks/cuda_imma.py [--quick] [--json out.json]   (about 30 s on an H100)
"""

from __future__ import annotations

import importlib
import os
import time

import numpy as np

import vyre.driver as d
import vyre.lib as L
from vyre.driver import DispatchConfig
from vyre.ir import DataType
from vyre.ir.launch import resolve
from vyre.lib.runner import params

from _common import args, emit

MM = importlib.import_module("vyre.lib.matmul")
REPS = 7


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
            reps: int = REPS) -> tuple[float, bytes]:
    """vyre.lib.matmul's own Program and launch (as `matmul` builds them) on resident buffers."""
    m, k = a.shape
    n = bm.shape[1]
    t = MM.tiles("cuda", words)
    packed = not words and k % 4 == 0 and n % 4 == 0
    prog = MM.program(ta, tb, packed, t)
    tiles_n = -(-n // t.bn)
    cfg = DispatchConfig(grid_override=(-(-m // t.bm) * tiles_n, 1, 1), dispatch_elements=m * n)
    src = [a.reshape(-1), bm.reshape(-1)]
    if packed:
        src = [s.view(np.int32) for s in src]
    return timed(b, prog, [*src, params(m, n, k, tiles_n)], cfg, reps)


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


def main() -> None:
    a = args(__doc__)
    res: dict = {}
    t0 = time.perf_counter()
    try:   # whatever was measured is written, also when a check fails
        b = d.acquire("cuda")
        res["device"] = b.device_profile().device_name
        res["tensor_cores"] = b.supports_tensor_cores()
        assert res["tensor_cores"], "this device does not run matmul_acc on IMMA (sm_80+ needed)"
        rng = np.random.default_rng(26)
        res.update(check_small(b, rng))

        # ---- i8 GEMM vs torch._int_mm (cuBLASLt) ----
        n = 4096 if a.quick else 8192
        A, B = full(rng, np.int8, (n, n)), full(rng, np.int8, (n, n))
        ms, out = lib_run(b, DataType.I8, DataType.I8, A, B, False)
        ops = 2 * n ** 3
        res.update(i8_n=n, i8_vyre_ms=ms, i8_vyre_tops=ops / ms / 1e9)
        try:
            torch_ms, ref = torch_int_mm(A, B)
        except Exception as exc:   # an older torch without _int_mm: vyre's figure still stands
            res["i8_torch_int_mm"] = f"unavailable: {exc}"[:200]
        else:
            same = np.frombuffer(out, np.int32)[:n * n].tobytes() == ref.tobytes()
            res.update(i8_torch_int_mm_ms=torch_ms, i8_torch_int_mm_tops=ops / torch_ms / 1e9,
                       i8_equal_to_torch=same, ratio_i8_vyre_vs_torch=torch_ms / ms)
            assert same, "i8 GEMM: vyre differs from torch._int_mm"
        del A, B, out

        # ---- u32 wrapping GEMM: byte planes on IMMA vs vyre's SIMT (scalar matmul_acc) ----
        n = 2048 if a.quick else 4096
        A, B = full(rng, np.uint32, (n, n)), full(rng, np.uint32, (n, n))
        ms, out = lib_run(b, DataType.U32, DataType.U32, A, B, True)
        ops = 2 * n ** 3
        res.update(u32_n=n, u32_imma_ms=ms, u32_imma_tops=ops / ms / 1e9)
        from vyre.drivers.cuda.backend import CudaBackend

        os.environ["VYRE_CUDA_TENSOR_CORES"] = "0"
        try:
            simt = CudaBackend(0)
        finally:
            del os.environ["VYRE_CUDA_TENSOR_CORES"]
        assert not simt.supports_tensor_cores()
        simt_ms, simt_out = lib_run(simt, DataType.U32, DataType.U32, A, B, True, reps=3)
        simt.shutdown()
        same = out[:4 * n * n] == simt_out[:4 * n * n]
        res.update(u32_simt_ms=simt_ms, u32_simt_tops=ops / simt_ms / 1e9, u32_equal_to_simt=same,
                   ratio_u32_imma_vs_simt=simt_ms / ms)
        assert same, "u32 GEMM: the IMMA byte planes differ from the SIMT loops"
    finally:
        res["wall_s"] = time.perf_counter() - t0
        emit("cuda_imma", res, a.json)


if __name__ == "__main__":
    main()
