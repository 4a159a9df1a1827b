"""What users would write instead (issue 24): a @vyre.kernel saxpy (out = x * 2.5 + y, f32) on
device arrays against the same computation as a CuPy ElementwiseKernel, a CuPy RawKernel,
torch and Triton; per-call wall time, synchronous (each call returns finished results).

* at 1M elements: vyre on CuPy and on torch arrays, and on numpy arrays against CuPy doing
  what a user would (``asarray`` of both inputs, the kernel, ``.get()``);
* a sweep of the per-call cost over array sizes 2^10 .. 2^24 (launch-bound to bandwidth-bound),
  plotted by benchmarks/plot.py (docs/img/cuda_device_arrays.png).

CuPy's ElementwiseKernel and torch may contract ``x * 2.5 + y`` into an FMA (vyre never does),
so their bytes can differ in the last bit; the RawKernel uses the same IEEE intrinsics as vyre.
"""

from __future__ import annotations

import numpy as np

import vyre
from vyre.driver import acquire
from vyre.kernel import In, Out, f32, gid

from _common import args, emit, interleaved_median_us

N = 1 << 20
SWEEP = [1 << k for k in range(10, 25, 2)]
RAW = r'''extern "C" __global__ void saxpy(const float* x, const float* y, float* out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fadd_rn(__fmul_rn(x[i], 2.5f), y[i]);
}'''


@vyre.kernel
def saxpy(x: In[f32], y: In[f32], out: Out[f32]):
    i = gid()
    out[i] = x[i] * 2.5 + y[i]


def _triton():
    """The Triton saxpy and its launcher, or None where Triton is not installed."""
    try:
        import triton
        import triton.language as tl
    except Exception:
        return None

    @triton.jit
    def tsaxpy(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.5 + tl.load(y_ptr + offs, mask=m), mask=m)

    def run(tx, ty, to, n):
        tsaxpy[(triton.cdiv(n, 1024),)](tx, ty, to, n, BLOCK=1024)

    return run


def variants_at(n: int, b, cp, torch, ek, rk, triton_run) -> dict:
    """The device-array variants at ``n`` elements (every one synchronous)."""
    rng = np.random.default_rng(n)
    hx, hy = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y = cp.asarray(hx), cp.asarray(hy)
    tx, ty = torch.as_tensor(hx, device="cuda"), torch.as_tensor(hy, device="cuda")
    stream = cp.cuda.get_current_stream()
    got = saxpy(x, y, backend=b)   # numpy: two roundings, as vyre (no subnormals arise here)
    assert isinstance(got, cp.ndarray) and got.get().tobytes() == (hx * np.float32(2.5) + hy).tobytes()
    grid = ((n + 255) // 256,)
    nn = np.uint32(n)

    def raw():
        out = cp.empty_like(x)
        rk(grid, (256,), (x, y, out, nn))
        stream.synchronize()
        return out

    assert raw().get().tobytes() == got.get().tobytes()
    out = {
        "vyre_cupy": lambda: saxpy(x, y, backend=b),
        "cupy_elementwise": lambda: (ek(x, y), stream.synchronize()),
        "cupy_rawkernel": raw,
        "torch": lambda: (tx * 2.5 + ty, torch.cuda.synchronize()),
    }
    if triton_run is not None:
        def tri():
            to = torch.empty_like(tx)
            triton_run(tx, ty, to, n)
            torch.cuda.synchronize()
            return to

        tri()
        out["triton"] = tri
    return out


def main() -> None:
    a = args(__doc__)
    import cupy as cp
    import torch

    b = acquire("cuda")
    ek = cp.ElementwiseKernel("float32 x, float32 y", "float32 out", "out = x * 2.5f + y", "saxpy_ek")
    rk = cp.RawKernel(RAW, "saxpy")
    triton_run = _triton()
    rounds, per_round = (3, 30) if a.quick else (10, 200)

    # ---- 1M elements: device arrays, torch tensors, numpy arrays ----
    hx = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    hy = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    x, y = cp.asarray(hx), cp.asarray(hy)
    tx, ty = torch.as_tensor(hx, device="cuda"), torch.as_tensor(hy, device="cuda")
    want = saxpy(hx, hy, backend=b)
    assert want.tobytes() == saxpy(hx, hy, backend="reference").tobytes()
    assert saxpy(x, y, backend=b).get().tobytes() == want.tobytes()
    assert np.allclose(ek(x, y).get(), want, rtol=1e-6, atol=1e-6)   # CuPy may contract x*2.5+y into an FMA
    tgot = saxpy(tx, ty, backend=b)
    assert isinstance(tgot, torch.Tensor) and tgot.is_cuda and tgot.cpu().numpy().tobytes() == want.tobytes()
    stream = cp.cuda.get_current_stream()

    def cupy_roundtrip():   # what a CuPy user does with numpy data: upload, run, download
        return ek(cp.asarray(hx), cp.asarray(hy)).get()

    variants = {
        "vyre_kernel_device_us": lambda: saxpy(x, y, backend=b),
        "cupy_elementwise_us": lambda: (ek(x, y), stream.synchronize()),
        "torch_us": lambda: (tx * 2.5 + ty, torch.cuda.synchronize()),
        "vyre_kernel_torch_us": lambda: saxpy(tx, ty, backend=b),
        "vyre_kernel_host_us": lambda: saxpy(hx, hy, backend=b),
        "cupy_host_roundtrip_us": cupy_roundtrip,
    }
    res = interleaved_median_us(variants, rounds=5 if a.quick else 10, per_round=20 if a.quick else 100)
    res["ratio_vyre_device_vs_cupy_elementwise"] = res["vyre_kernel_device_us"] / res["cupy_elementwise_us"]
    res["ratio_vyre_device_vs_torch"] = res["vyre_kernel_device_us"] / res["torch_us"]
    res["ratio_vyre_host_vs_cupy_roundtrip"] = res["vyre_kernel_host_us"] / res["cupy_host_roundtrip_us"]
    res["elements"] = N

    # ---- per-call cost vs array size ----
    sweep: dict[str, list[float]] = {"elements": []}
    for n in SWEEP[:4] if a.quick else SWEEP:
        got = interleaved_median_us(variants_at(n, b, cp, torch, ek, rk, triton_run), rounds=rounds,
                                    per_round=per_round if n <= 1 << 20 else max(10, per_round // 4))
        sweep["elements"].append(n)
        for k, v in got.items():
            sweep.setdefault(f"{k}_us", []).append(v)
    res["sweep"] = sweep
    emit("cuda_device_arrays", res, a.json)


if __name__ == "__main__":
    main()
