"""Experiment: exact f32 multiply under --ftz=true. NVIDIA's .ftz forms flush subnormal operands
and results as S9 does, but detect tininess before rounding, so a product just below 2^-126
that rounds up to it comes out as zero. This times the tiled-matmul kernel vyre generates with
each candidate definition of VY_FMUL against the hand-written twin, on the same inputs, and
checks each variant's bytes on the boundary cases. Results: docs/benchmarks.md."""

from __future__ import annotations

import numpy as np

from vyre import examples as X
from vyre.drivers.cuda.codegen import generate

from _common import args, emit

VARIANTS = {
    # as shipped: the IEEE mul.rn.f32 on operands flushed when they were staged in workgroup
    # memory; the next .ftz add flushes a subnormal product (exact S9, see vyre.lower.floats)
    "shipped": None,
    # the plain .ftz product: wrong on the underflow boundary (the speed reference point)
    "ftz_only": "#undef VY_FMUL\n#define VY_FMUL(a, b) __fmul_rn(a, b)\n",
}
# Measured on the H100 before the shipped form (ms, 2048^3; hand-written twin 2.11):
# .ftz product with a rare-branch fix-up in inline PTX 9.61, the same fix-up in double
# precision 3.22, IEEE product of operands flushed at every use 2.70, plain .ftz 2.12.


def main() -> None:
    a = args(__doc__)
    import cupy as cp

    n = 1024 if a.quick else 2048
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((2, n, n)).astype(np.float32)
    src = generate(X.matmul_tiled(n))[1]
    head, body = src.split('extern "C" __global__', 1)
    ca, cb = cp.asarray(A.ravel()), cp.asarray(B.ravel())
    cc_ = cp.empty(n * n, cp.float32)
    ctl = cp.zeros(2, cp.uint32)
    res: dict[str, float] = {}
    ref = None
    for name, patch in VARIANTS.items():
        code = head + (patch or "") + 'extern "C" __global__' + body
        k = cp.RawKernel(code, "vyre_phase_0", options=("--fmad=false", "--ftz=true", "-std=c++17"))
        args_ = (ca, cb, cc_, np.uint32(n * n), np.uint32(n * n), np.uint32(n * n), ctl)
        grid = (n // 16, n // 16)
        k(grid, (16, 16), args_)
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(10):
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            k(grid, (16, 16), args_)
            e.record()
            e.synchronize()
            times.append(cp.cuda.get_elapsed_time(s, e))
        res[f"{name}_ms"] = float(np.median(times))
        out = cc_.get().tobytes()
        ref = out if ref is None else ref
        res[f"{name}_same_bytes_as_shipped"] = float(out == ref)
    emit("cuda_fmul_variants", res, a.json)


if __name__ == "__main__":
    main()
