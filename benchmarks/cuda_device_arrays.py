"""Device arrays in, device arrays out: a @vyre.kernel saxpy over 1M f32 CuPy arrays (no host
round trip) against the same computation as a CuPy ElementwiseKernel, torch, and vyre's host
path. Per-call wall time, synchronous (each call returns finished results)."""

from __future__ import annotations

import numpy as np

import vyre
from vyre.driver import acquire
from vyre.kernel import In, Out, f32, gid

from _common import args, emit, interleaved_median_us

N = 1 << 20


@vyre.kernel
def saxpy(x: In[f32], y: In[f32], out: Out[f32]):
    i = gid()
    out[i] = x[i] * 2.5 + y[i]


def main() -> None:
    a = args(__doc__)
    import cupy as cp
    import torch

    b = acquire("cuda")
    hx = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    hy = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    x, y = cp.asarray(hx), cp.asarray(hy)
    tx, ty = torch.as_tensor(hx, device="cuda"), torch.as_tensor(hy, device="cuda")
    ek = cp.ElementwiseKernel("float32 x, float32 y", "float32 out", "out = x * 2.5f + y", "saxpy_ek")
    want = saxpy(hx, hy, backend=b)
    got = saxpy(x, y, backend=b)
    assert isinstance(got, cp.ndarray) and got.get().tobytes() == want.tobytes()
    assert np.allclose(ek(x, y).get(), want, rtol=1e-6, atol=1e-6)   # CuPy fuses x*2.5+y into an FMA; vyre never does
    tgot = saxpy(tx, ty, backend=b)
    assert isinstance(tgot, torch.Tensor) and tgot.is_cuda
    variants = {
        "vyre_kernel_device_us": lambda: saxpy(x, y, backend=b),
        "cupy_elementwise_us": lambda: (ek(x, y), cp.cuda.get_current_stream().synchronize()),
        "torch_us": lambda: (tx * 2.5 + ty, torch.cuda.synchronize()),
        "vyre_kernel_torch_us": lambda: saxpy(tx, ty, backend=b),
        "vyre_kernel_host_us": lambda: saxpy(hx, hy, backend=b),
    }
    res = interleaved_median_us(variants, rounds=5 if a.quick else 10, per_round=50 if a.quick else 200)
    res["ratio_vyre_device_vs_cupy_elementwise"] = res["vyre_kernel_device_us"] / res["cupy_elementwise_us"]
    res["elements"] = N
    emit("cuda_device_arrays", res, a.json)


if __name__ == "__main__":
    main()
