"""Ten kernels written as a user would (issue 25), on every backend, checked against numpy
/ Python. Where a backend refuses a kernel by design, the call must be refused with K024 in
kernel words (wgpu refuses none of these now: it runs f32 division and the correctly rounded
transcendentals with the reference's bytes)."""

from __future__ import annotations

import numpy as np

import vyre
from kernel.support import run
from vyre.kernel import (
    In,
    Out,
    Scalar,
    atomic_add,
    barrier,
    exp,
    f16,
    f32,
    gid,
    i32,
    lid,
    shared,
    sqrt,
    u32,
    u64,
)

RNG = np.random.default_rng(25)


@vyre.kernel
def stencil(x: In[f32], out: Out[f32]):
    i = gid()
    if i < len(x):
        out[i] = x[i32(i) - 1] * 0.25 + x[i] * 0.5 + x[i + 1] * 0.25


def test_stencil(backend):
    x = RNG.random(1001, dtype=np.float32)
    p = np.pad(x, 1)
    want = p[:-2] * np.float32(0.25) + p[1:-1] * np.float32(0.5) + p[2:] * np.float32(0.25)
    assert np.allclose(run(stencil, backend, x), want, rtol=1e-6)


@vyre.kernel(workgroup_size=64)
def softmax_rows(x: In[f32, :, :], out: Out[f32, :, :]):
    row = gid()
    n = x.shape[1]
    if row < x.shape[0]:
        m = x[row, 0]
        for j in range(n):
            m = max(m, x[row, j])
        s = 0.0
        for j in range(n):
            s += exp(x[row, j] - m)
        for j in range(n):
            out[row, j] = exp(x[row, j] - m) / s


def test_softmax(backend):
    x = RNG.standard_normal((37, 19)).astype(np.float32)
    got = run(softmax_rows, backend, x)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert np.allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@vyre.kernel(workgroup_size=64)
def block_scan(x: In[u32], out: Out[u32]):
    tile = shared(u32, 64)
    t = lid()
    tile[t] = x[gid()]
    barrier()
    step = 1
    while step < 64:
        v = tile[t - step] if t >= step else 0
        barrier()
        tile[t] += v
        barrier()
        step *= 2
    out[gid()] = tile[t]


def test_inclusive_scan_per_workgroup(backend):
    x = RNG.integers(0, 1000, 256, dtype=np.uint32)
    want = np.cumsum(x.reshape(4, 64), axis=1).reshape(-1)
    assert run(block_scan, backend, x).tolist() == want.tolist()


@vyre.kernel
def histogram(data: In[u32], bins: Out[u32, 32]):
    i = gid()
    if i < len(data):
        atomic_add(bins, data[i] % 32, 1)


def test_histogram(backend):
    data = RNG.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    assert run(histogram, backend, data, elements=5000).tolist() == np.bincount(data % 32, minlength=32).tolist()


@vyre.kernel(workgroup_size=(8, 8))
def mandelbrot(out: Out[u32, 24, 32], iters: Scalar[u32]):
    px = gid(0)
    py = gid(1)
    cr = f32(px) * 0.09375 - 2.0
    ci = f32(py) * 0.09375 - 1.125
    zr = 0.0
    zi = 0.0
    k = u32(0)
    while k < iters and zr * zr + zi * zi <= 4.0:
        t = zr * zr - zi * zi + cr
        zi = 2.0 * zr * zi + ci
        zr = t
        k += 1
    out[py, px] = k


def _mandelbrot_numpy(iters: int) -> np.ndarray:
    f = np.float32
    out = np.zeros((24, 32), np.uint32)
    for py in range(24):
        for px in range(32):
            cr, ci = f(px) * f(0.09375) - f(2), f(py) * f(0.09375) - f(1.125)
            zr = zi = f(0)
            k = 0
            while k < iters and zr * zr + zi * zi <= f(4):
                zr, zi = zr * zr - zi * zi + cr, f(2) * zr * zi + ci
                k += 1
            out[py, px] = k
    return out


def test_mandelbrot(backend):
    got = run(mandelbrot, backend, 50, dim=(32, 24), elements=24 * 32)
    want = _mandelbrot_numpy(50)
    assert got.shape == (24, 32) and np.mean(got == want) > 0.99    # fma contraction may differ at edges


@vyre.kernel
def fnv1a(words: In[u32], out: Out[u32]):
    i = gid()
    h = u32(0x811C9DC5)
    w = words[i]
    for b in range(4):
        h = (h ^ ((w >> (8 * b)) & 0xFF)) * 0x01000193
    out[i] = h


def test_fnv1a_hash(backend):
    words = RNG.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32)
    want = []
    for w in words.tolist():
        h = 0x811C9DC5
        for byte in int(w).to_bytes(4, "little"):
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
        want.append(h)
    assert run(fnv1a, backend, words).tolist() == want


@vyre.func
def splitmix(z: u64) -> u64:
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    return z ^ (z >> 31)


@vyre.func
def half_lerp(a: f16, b: f16, t: f16) -> f16:
    return a + (b - a) * t


@vyre.kernel
def mix64(seeds: In[u64], a: In[f16], b: In[f16], out: Out[u64], mid: Out[f16]):
    i = gid()
    out[i] = splitmix(seeds[i] + 0x9E3779B97F4A7C15)
    mid[i] = half_lerp(a[i], b[i], 0.5)


def test_u64_and_f16_functions(backend):
    seeds = RNG.integers(0, 2**63, 100, dtype=np.uint64)
    a = RNG.random(100).astype(np.float16)
    b = RNG.random(100).astype(np.float16)
    got = run(mix64, backend, seeds, a, b)
    if got is None:
        return
    m = (1 << 64) - 1
    want = []
    for s in seeds.tolist():
        z = (s + 0x9E3779B97F4A7C15) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        want.append(z ^ (z >> 31))
    assert got[0].tolist() == want
    assert got[1].tolist() == (a + (b - a) * np.float16(0.5)).tolist()


@vyre.kernel(workgroup_size=(8, 8))
def box_blur(img: In[f32, :, :], out: Out[f32, :, :]):
    x = gid(0)
    y = gid(1)
    h, w = img.shape
    if y < h and x < w:
        acc = 0.0
        for dy in range(-1, 2):
            for dx in range(-1, 2):
                acc += img[i32(y) + dy, i32(x) + dx]
        out[y, x] = acc * 0.11111111


def test_2d_blur(backend):
    img = RNG.random((21, 34), dtype=np.float32)
    got = run(box_blur, backend, img, dim=(34, 21))
    p = np.pad(img, 1)
    want = sum(p[1 + dy:22 + dy, 1 + dx:35 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)) * np.float32(0.11111111)
    assert got.shape == (21, 34) and np.allclose(got, want, rtol=1e-5)


@vyre.kernel
def nbody_accel(px: In[f32], py: In[f32], m: In[f32], ax: Out[f32], ay: Out[f32]):
    i = gid()
    n = len(px)
    if i < n:
        fx = 0.0
        fy = 0.0
        for j in range(n):
            dx = px[j] - px[i]
            dy = py[j] - py[i]
            r2 = dx * dx + dy * dy + 0.01
            inv = 1.0 / (r2 * sqrt(r2))
            fx += m[j] * dx * inv
            fy += m[j] * dy * inv
        ax[i] = fx
        ay[i] = fy


def test_nbody(backend):
    n = 64
    px, py, m = (RNG.random(n, dtype=np.float32) for _ in range(3))
    got = run(nbody_accel, backend, px, py, m)
    if got is None:
        return
    dx = px[None, :].astype(np.float64) - px[:, None]
    dy = py[None, :].astype(np.float64) - py[:, None]
    r2 = dx * dx + dy * dy + 0.01
    inv = 1.0 / (r2 * np.sqrt(r2))
    assert np.allclose(got[0], (m * dx * inv).sum(1), rtol=1e-4, atol=1e-4)
    assert np.allclose(got[1], (m * dy * inv).sum(1), rtol=1e-4, atol=1e-4)


@vyre.kernel
def kmeans_assign(pts: In[f32, :, :], centers: In[f32, :, :], label: Out[u32]):
    i = gid()
    if i < pts.shape[0]:
        best = u32(0)
        best_d = 3.0e38
        for c in range(centers.shape[0]):
            d = 0.0
            for k in range(pts.shape[1]):
                t = pts[i, k] - centers[c, k]
                d += t * t
            if d < best_d:
                best_d = d
                best = c
        label[i] = best


def test_kmeans_assignment(backend):
    pts = RNG.random((500, 3), dtype=np.float32)
    centers = RNG.random((7, 3), dtype=np.float32)
    got = run(kmeans_assign, backend, pts, centers, elements=500)
    d = ((pts[:, None, :].astype(np.float64) - centers[None]) ** 2).sum(-1)
    want = d.argmin(1)
    assert np.mean(got == want) > 0.99
