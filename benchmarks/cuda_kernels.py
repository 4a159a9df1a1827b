"""Generated kernels against the same algorithm hand-written in CUDA C (CuPy RawKernel, the
same exact-rounding intrinsics, same launch shape) and against what a user would pick instead
(torch), side by side in one run on one device. Device time from CUDA events, median of N.

Kernels: tiled f32 matmul 2048 (16x16 tiles), workgroup-privatised histogram of 2^26 values,
workgroup scan of 2^24, workgroup bitonic sort of 2^24 (512-element blocks), SHA-256 of 2^20
one-block messages, Mandelbrot escape times over 4096^2 points (at most 256 iterations, a
`while` loop with `break`, written with `@vyre.kernel`), and an n-body step (the f32
acceleration of each of 16K bodies from all of them: sqrt and reciprocal). Loop kernels'
twins use the same IEEE operations (no contraction, the same NVRTC flags as vyre, so the same
flushes); the benchmark checks both give the same bytes before timing. Also: the time to a
first dispatch of the ~700-statement SHA-256 program in a fresh process, cold and with the
disk cache filled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import vyre
import vyre.driver as d
from vyre import examples as X
from vyre.driver import DispatchConfig
from vyre.drivers.cuda.compiler import OPTIONS as VYRE_NVRTC  # the loop twins get vyre's flags
from vyre.kernel import In, Out, f32, gid, sqrt, u32

from _common import args, emit

REPS = 15

MATMUL = r'''extern "C" __global__ void mm(const float* a, const float* b, float* c, unsigned n) {
    __shared__ float As[16][16]; __shared__ float Bs[16][16];
    unsigned tx = threadIdx.x, ty = threadIdx.y;
    unsigned row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (unsigned t = 0; t < n / 16; t++) {
        As[ty][tx] = a[row * n + t * 16 + tx];
        Bs[ty][tx] = b[(t * 16 + ty) * n + col];
        __syncthreads();
        for (unsigned k = 0; k < 16; k++) acc = __fadd_rn(acc, __fmul_rn(As[ty][k], Bs[k][tx]));
        __syncthreads();
    }
    c[row * n + col] = acc;
}'''

HIST = r'''extern "C" __global__ void hist(const unsigned* data, unsigned* out, unsigned n) {
    __shared__ unsigned local[256];
    local[threadIdx.x] = 0; __syncthreads();
    unsigned base = blockIdx.x * 256 * 16;
    for (unsigned j = 0; j < 16; j++) {
        unsigned i = base + j * 256 + threadIdx.x;
        if (i < n) atomicAdd(&local[data[i] & 255u], 1u);
    }
    __syncthreads();
    atomicAdd(&out[threadIdx.x], local[threadIdx.x]);
}'''

SCAN = r'''extern "C" __global__ void scan(const unsigned* data, unsigned* out, unsigned n) {
    __shared__ unsigned s[256];
    unsigned lid = threadIdx.x, gid = blockIdx.x * 256 + lid;
    s[lid] = gid < n ? data[gid] : 0u; __syncthreads();
    for (unsigned off = 1; off < 256; off *= 2) {
        unsigned t = lid >= off ? s[lid - off] : 0u; __syncthreads();
        s[lid] += t; __syncthreads();
    }
    if (gid < n) out[gid] = s[lid];
}'''

BITONIC = r'''extern "C" __global__ void bsort(const unsigned* data, unsigned* out) {
    __shared__ unsigned s[512];
    unsigned lid = threadIdx.x, gid = blockIdx.x * 512 + lid;
    s[lid] = data[gid]; __syncthreads();
    for (unsigned k = 2; k <= 512; k *= 2) for (unsigned j = k / 2; j >= 1; j /= 2) {
        unsigned p = lid ^ j, mine = s[lid], theirs = s[p];
        bool keep_min = ((lid & k) == 0) == (lid < p);
        unsigned v = keep_min ? min(mine, theirs) : max(mine, theirs);
        __syncthreads(); s[lid] = v; __syncthreads();
    }
    out[gid] = s[lid];
}'''

SHA = r'''__device__ __forceinline__ unsigned rotr(unsigned x, unsigned n) { return (x >> n) | (x << (32 - n)); }
__constant__ unsigned K[64] = {K_WORDS};
extern "C" __global__ void sha(const unsigned* blocks, unsigned* digests, unsigned m) {
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= m) return;
    unsigned w[64];
    for (int t = 0; t < 16; t++) w[t] = blocks[g * 16 + t];
    for (int t = 16; t < 64; t++) {
        unsigned s0 = rotr(w[t-15], 7) ^ rotr(w[t-15], 18) ^ (w[t-15] >> 3);
        unsigned s1 = rotr(w[t-2], 17) ^ rotr(w[t-2], 19) ^ (w[t-2] >> 10);
        w[t] = w[t-16] + s0 + w[t-7] + s1;
    }
    unsigned a=0x6a09e667, b=0xbb67ae85, c=0x3c6ef372, d=0xa54ff53a, e=0x510e527f, f=0x9b05688c, gg=0x1f83d9ab, h=0x5be0cd19;
    #pragma unroll
    for (int t = 0; t < 64; t++) {
        unsigned t1 = h + (rotr(e,6) ^ rotr(e,11) ^ rotr(e,25)) + ((e & f) ^ (~e & gg)) + K[t] + w[t];
        unsigned t2 = (rotr(a,2) ^ rotr(a,13) ^ rotr(a,22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = gg; gg = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    unsigned* o = digests + g * 8;
    o[0]=a+0x6a09e667; o[1]=b+0xbb67ae85; o[2]=c+0x3c6ef372; o[3]=d+0xa54ff53a;
    o[4]=e+0x510e527f; o[5]=f+0x9b05688c; o[6]=gg+0x1f83d9ab; o[7]=h+0x5be0cd19;
}'''.replace("K_WORDS", ", ".join(str(k) for k in X.sha256.K))


# ---- loop kernels, written as users write them, and their hand-written twins ----


@vyre.kernel
def mandelbrot(cx: In[f32], cy: In[f32], out: Out[u32]):
    i = gid()
    x = 0.0
    y = 0.0
    n = u32(0)
    while n < 256:
        x2 = x * x
        y2 = y * y
        if x2 + y2 > 4.0:
            break
        y = 2.0 * x * y + cy[i]
        x = x2 - y2 + cx[i]
        n += 1
    out[i] = n


MANDEL = r'''extern "C" __global__ void mandel(const float* __restrict__ cx, const float* __restrict__ cy,
                                  unsigned* __restrict__ out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = cx[i], b = cy[i], x = 0.0f, y = 0.0f;
    unsigned k = 0;
    while (k < 256u) {
        float x2 = __fmul_rn(x, x), y2 = __fmul_rn(y, y);
        if (__fadd_rn(x2, y2) > 4.0f) break;
        y = __fadd_rn(__fmul_rn(__fmul_rn(2.0f, x), y), b);
        x = __fadd_rn(__fsub_rn(x2, y2), a);
        k++;
    }
    out[i] = k;
}'''


@vyre.kernel
def nbody(px: In[f32], py: In[f32], pz: In[f32], m: In[f32], ax: Out[f32], ay: Out[f32], az: Out[f32]):
    i = gid()
    sx = 0.0
    sy = 0.0
    sz = 0.0
    for j in range(len(px)):
        dx = px[j] - px[i]
        dy = py[j] - py[i]
        dz = pz[j] - pz[i]
        d2 = dx * dx + dy * dy + dz * dz + 0.01
        inv = 1.0 / sqrt(d2)
        s = m[j] * (inv * inv * inv)
        sx = sx + dx * s
        sy = sy + dy * s
        sz = sz + dz * s
    ax[i] = sx
    ay[i] = sy
    az[i] = sz


NBODY = r'''extern "C" __global__ void nbody(const float* __restrict__ px, const float* __restrict__ py,
        const float* __restrict__ pz, const float* __restrict__ m, float* __restrict__ ax,
        float* __restrict__ ay, float* __restrict__ az, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = px[i], yi = py[i], zi = pz[i], sx = 0.0f, sy = 0.0f, sz = 0.0f;
    for (unsigned j = 0; j < n; j++) {
        float dx = __fsub_rn(px[j], xi), dy = __fsub_rn(py[j], yi), dz = __fsub_rn(pz[j], zi);
        float d2 = __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), __fmul_rn(dz, dz)), 0.01f);
        float inv = __frcp_rn(__fsqrt_rn(d2));
        float s = __fmul_rn(m[j], __fmul_rn(__fmul_rn(inv, inv), inv));
        sx = __fadd_rn(sx, __fmul_rn(dx, s));
        sy = __fadd_rn(sy, __fmul_rn(dy, s));
        sz = __fadd_rn(sz, __fmul_rn(dz, s));
    }
    ax[i] = sx; ay[i] = sy; az[i] = sz;
}'''


def torch_mandelbrot(torch, cx, cy):
    """The same escape count with whole-array torch operations (no contraction: one kernel
    per operation)."""
    x, y = torch.zeros_like(cx), torch.zeros_like(cy)
    n = torch.zeros(cx.shape, dtype=torch.int32, device=cx.device)
    for _ in range(256):
        x2, y2 = x * x, y * y
        alive = (x2 + y2) <= 4.0
        n += alive
        y = torch.where(alive, 2.0 * x * y + cy, y)
        x = torch.where(alive, x2 - y2 + cx, x)
    return n


def median_ms(fn, sync) -> float:
    fn()
    sync()
    import cupy as cp

    times = []
    for _ in range(REPS):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(times))


def vyre_ms(b, program, host_inputs, config, out_count, outputs: int = 1) -> tuple[float, bytes]:
    """Device time of the kernel on resident buffers (dispatch_resident_timed, median), and
    the first ``out_count`` elements of each of its first ``outputs`` outputs."""
    from vyre.ir.launch import resolve

    cfg = config or DispatchConfig()
    counts = dict(resolve(program, [x.nbytes for x in host_inputs], cfg).counts)
    decls = [x for x in program.buffers if not x.is_workgroup]
    res, ins = [], dict(zip((x.name for x in program.inputs), host_inputs))
    for decl in decls:
        r = b.allocate_resident(counts[decl.name] * 4)
        if decl.name in ins:
            b.upload_resident(r, ins[decl.name])
        res.append(r)
    pipe = d.pipeline.compile(b, program, DispatchConfig(workgroup_override=cfg.workgroup_override))
    pipe.dispatch_resident_timed(res, cfg)
    times = [pipe.dispatch_resident_timed(res, cfg).device_ns for _ in range(REPS)]
    names = [x.name for x in decls]
    out = b"".join(b.read_resident(res[names.index(o.name)])[: out_count * 4] for o in program.outputs[:outputs])
    for r in res:
        b.free_resident(r)
    return float(np.median(times)) / 1e6, out


def first_dispatch_ms(cache: str) -> tuple[float, float]:
    """From calling dispatch with a built program on a started backend to its result."""
    code = ("import time, numpy as np\n"
            "import vyre.driver as d\nfrom vyre import examples as X\n"
            "b = d.acquire('cuda')\nmsgs = X.random_messages(64)\nblocks = X.pad_messages(msgs)\n"
            "p = X.sha256_blocks()\nt = time.perf_counter()\n"
            "pipe = b.compile_native(p)\nc = time.perf_counter()\n"
            "out = pipe.dispatch([blocks], X.sha256_config(64))\n"
            "ms = (time.perf_counter() - t) * 1e3\n"
            "assert np.array_equal(np.frombuffer(out[0], np.uint32), X.digests_expected(msgs))\n"
            "print((c - t) * 1e3, ms)\n")
    env = dict(os.environ, VYRE_CACHE_DIR=cache)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    compile_ms, total_ms = (float(x) for x in done.stdout.split()[-2:])
    return compile_ms, total_ms


def main() -> None:
    a = args(__doc__)
    import cupy as cp
    import torch

    res: dict[str, float] = {}
    b = d.acquire("cuda")
    sync = cp.cuda.Device().synchronize
    rng = np.random.default_rng(0)
    opts = ("--fmad=false", "-std=c++17")

    # ---- tiled matmul 2048 ----
    n = 1024 if a.quick else 2048
    A, B = rng.standard_normal((2, n, n)).astype(np.float32)
    ms, out = vyre_ms(b, X.matmul_tiled(n), [A.ravel(), B.ravel()],
                      DispatchConfig(grid_override=X.matmul_grid(n)), n * n)
    k = cp.RawKernel(MATMUL, "mm", options=opts)
    ca, cb, cc_ = cp.asarray(A.ravel()), cp.asarray(B.ravel()), cp.empty(n * n, cp.float32)
    hand = median_ms(lambda: k((n // 16, n // 16), (16, 16), (ca, cb, cc_, np.uint32(n))), sync)
    assert out == cc_.get().tobytes(), "matmul: vyre and the hand-written kernel differ"
    ta, tb = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    res.update(matmul_vyre_ms=ms, matmul_hand_ms=hand, matmul_torch_ms=median_ms(lambda: ta @ tb, sync))

    # ---- histogram 2^26 ----
    n = 1 << (24 if a.quick else 26)
    data = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    ms, out = vyre_ms(b, X.histogram_privatised(), [data], DispatchConfig(grid_override=X.histogram_grid(n)), 256)
    assert np.array_equal(np.frombuffer(out, np.uint32), X.histogram_expected(data))
    k = cp.RawKernel(HIST, "hist", options=opts)
    cd, co = cp.asarray(data), cp.zeros(256, cp.uint32)

    def hist_hand():
        co.fill(0)
        k((X.histogram_grid(n)[0],), (256,), (cd, co, np.uint32(n)))

    td = torch.from_numpy(data.view(np.int32)).cuda()
    res.update(histogram_vyre_ms=ms, histogram_hand_ms=median_ms(hist_hand, sync),
               histogram_torch_ms=median_ms(lambda: torch.bincount(td & 255, minlength=256), sync))

    # ---- workgroup scan 2^24 ----
    n = 1 << (22 if a.quick else 24)
    data = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    ms, out = vyre_ms(b, X.scan_workgroup(), [data], None, n)
    assert np.array_equal(np.frombuffer(out, np.uint32), X.scan_expected(data))
    k = cp.RawKernel(SCAN, "scan", options=opts)
    cd, co = cp.asarray(data), cp.empty(n, cp.uint32)
    td = torch.from_numpy(data.view(np.int32)).cuda().view(-1, 256)
    res.update(scan_vyre_ms=ms, scan_hand_ms=median_ms(lambda: k((n // 256,), (256,), (cd, co, np.uint32(n))), sync),
               scan_torch_ms=median_ms(lambda: torch.cumsum(td, dim=1), sync))

    # ---- workgroup bitonic sort 2^24 ----
    ms, out = vyre_ms(b, X.bitonic_sort_workgroup(512), [data], None, n)
    assert np.array_equal(np.frombuffer(out, np.uint32), X.bitonic_expected(data, 512))
    k = cp.RawKernel(BITONIC, "bsort", options=opts)
    tdl = torch.from_numpy(data.astype(np.int64)).cuda().view(-1, 512)
    res.update(sort_vyre_ms=ms, sort_hand_ms=median_ms(lambda: k((n // 512,), (512,), (cd, co)), sync),
               sort_torch_ms=median_ms(lambda: torch.sort(tdl, dim=1), sync))

    # ---- SHA-256 of 2^20 messages ----
    m = 1 << (18 if a.quick else 20)
    msgs = X.random_messages(m, seed=1)
    blocks = X.pad_messages(msgs)
    ms, out = vyre_ms(b, X.sha256_blocks(), [blocks], X.sha256_config(m), 8 * m)
    assert np.array_equal(np.frombuffer(out, np.uint32), X.digests_expected(msgs))
    k = cp.RawKernel(SHA, "sha", options=opts)
    cbk, cdg = cp.asarray(blocks), cp.empty(8 * m, cp.uint32)
    res.update(sha256_vyre_ms=ms, sha256_hand_ms=median_ms(lambda: k((m // 64,), (64,), (cbk, cdg, np.uint32(m))), sync))

    # ---- Mandelbrot 4096^2, <= 256 iterations (while / break) ----
    side = 2048 if a.quick else 4096
    cols, rows = np.meshgrid(np.arange(side, dtype=np.float32), np.arange(side, dtype=np.float32))
    cx = (np.float32(-2.0) + cols * np.float32(3.0 / side)).astype(np.float32).ravel()
    cy = (np.float32(-1.5) + rows * np.float32(3.0 / side)).astype(np.float32).ravel()
    n = side * side
    ms, out = vyre_ms(b, mandelbrot.program, [cx, cy], None, n)
    k = cp.RawKernel(MANDEL, "mandel", options=VYRE_NVRTC)
    ccx, ccy, cco = cp.asarray(cx), cp.asarray(cy), cp.empty(n, cp.uint32)
    hand = median_ms(lambda: k((n // 256,), (256,), (ccx, ccy, cco, np.uint32(n))), sync)
    assert out == cco.get().tobytes(), "mandelbrot: vyre and the hand-written kernel differ"
    tcx, tcy = torch.from_numpy(cx).cuda(), torch.from_numpy(cy).cuda()
    same = np.array_equal(torch_mandelbrot(torch, tcx, tcy).cpu().numpy().view(np.uint32), np.frombuffer(out, np.uint32))
    res.update(mandelbrot_torch_same_counts=float(same), mandelbrot_vyre_ms=ms, mandelbrot_hand_ms=hand,
               mandelbrot_torch_ms=median_ms(lambda: torch_mandelbrot(torch, tcx, tcy), sync))

    # ---- n-body step, 16K bodies ----
    n = 4096 if a.quick else 16384
    pos = rng.standard_normal((3, n)).astype(np.float32)
    mass = rng.uniform(0.5, 1.0, n).astype(np.float32)
    ms, out = vyre_ms(b, nbody.program, [pos[0], pos[1], pos[2], mass], None, n, outputs=3)
    k = cp.RawKernel(NBODY, "nbody", options=VYRE_NVRTC)
    cpx, cpy, cpz, cm = (cp.asarray(v) for v in (pos[0], pos[1], pos[2], mass))
    cax, cay, caz = (cp.empty(n, cp.float32) for _ in range(3))
    hand = median_ms(lambda: k((n // 256,), (256,), (cpx, cpy, cpz, cm, cax, cay, caz, np.uint32(n))), sync)
    assert out == b"".join(v.get().tobytes() for v in (cax, cay, caz)), "n-body: vyre and the hand-written kernel differ"
    res.update(nbody_vyre_ms=ms, nbody_hand_ms=hand)

    for name in ("matmul", "histogram", "scan", "sort", "sha256", "mandelbrot", "nbody"):
        res[f"ratio_{name}_vyre_vs_hand"] = res[f"{name}_vyre_ms"] / res[f"{name}_hand_ms"]

    # ---- build time of a ~700-statement program in a fresh process ----
    with tempfile.TemporaryDirectory() as cache:
        res["sha256_compile_cold_ms"], res["sha256_first_dispatch_cold_ms"] = first_dispatch_ms(cache)
        res["sha256_compile_disk_hit_ms"], res["sha256_first_dispatch_disk_hit_ms"] = first_dispatch_ms(cache)
    t = time.perf_counter()
    from vyre.ir import validate

    p = X.sha256_blocks()
    validate(p)
    res["sha256_statements"] = sum(1 for _ in __import__("vyre").ir.node.walk_nodes(p.body))
    res["sha256_build_and_validate_ms"] = (time.perf_counter() - t) * 1e3
    emit("cuda_kernels", res, a.json)


if __name__ == "__main__":
    main()
