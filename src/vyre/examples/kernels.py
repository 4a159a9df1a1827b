"""The examples written with the `vyre.kernel` decorator: the same algorithms as the builder
versions next to them (tests check they give the same bytes on every backend)."""

from __future__ import annotations

import vyre
from vyre.kernel import (
    In,
    InOut,
    Out,
    Scalar,
    atomic_add,
    barrier,
    byte_swap,
    f32,
    gid,
    lid,
    local,
    rotr,
    shared,
    u8,
    u32,
    u64,
)


@vyre.kernel
def saxpy(x: In[f32], y: In[f32], out: Out[f32]):
    """out = 2.5 x + y (the builder twin: `vyre.cli.bench.saxpy_program`)."""
    i = gid()
    out[i] = x[i] * 2.5 + y[i]


@vyre.kernel(workgroup_size=256)
def histogram(data: In[u32], hist: Out[u32, 256], per_invocation: Scalar[u32]):
    """A 256-bin histogram of the low byte, privatised in workgroup memory."""
    local_hist = shared(u32, 256)
    t = lid()
    base = gid() * per_invocation
    for k in range(per_invocation):
        if base + k < len(data):
            atomic_add(local_hist, data[base + k] & 255, 1)
    barrier()
    atomic_add(hist, t, local_hist[t])


@vyre.func
def big_s0(x: u32) -> u32:
    return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22)


@vyre.func
def big_s1(x: u32) -> u32:
    return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25)


@vyre.func
def small_s0(x: u32) -> u32:
    return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3)


@vyre.func
def small_s1(x: u32) -> u32:
    return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10)


@vyre.kernel(workgroup_size=64)
def sha256(data: In[u8], offsets: In[u32], lengths: In[u32], k: In[u32, 64], digests: Out[u32]):
    """SHA-256 of many messages of any length, one per invocation (the builder twin:
    `vyre.examples.sha256_bytes`): padding on the device, a 64-word local schedule."""
    w = local(u32, 64)
    m = gid()
    if m >= len(lengths):
        return
    off = offsets[m]
    n = lengths[m]
    nblocks = (n + 9 + 63) // 64
    total = nblocks * 64
    bits = u64(n) << 3
    h0, h1, h2, h3 = u32(0x6A09E667), u32(0xBB67AE85), u32(0x3C6EF372), u32(0xA54FF53A)
    h4, h5, h6, h7 = u32(0x510E527F), u32(0x9B05688C), u32(0x1F83D9AB), u32(0x5BE0CD19)
    blk = 0
    while blk < nblocks:
        for t in range(16):
            word = 0
            for j in range(4):
                p = blk * 64 + t * 4 + j
                b = 0
                if p < n:
                    b = data[off + p]
                elif p == n:
                    b = 0x80
                elif p >= total - 8:
                    b = u32((bits >> ((7 - (p - (total - 8))) * 8)) & 255)
                word = (word << 8) | b
            w[t] = word
        for t in range(16, 64):
            w[t] = w[t - 16] + small_s0(w[t - 15]) + w[t - 7] + small_s1(w[t - 2])
        a, b_, c, d, e, f, g, h = h0, h1, h2, h3, h4, h5, h6, h7
        for t in range(64):
            t1 = h + big_s1(e) + ((e & f) ^ (~e & g)) + k[t] + w[t]
            t2 = big_s0(a) + ((a & b_) ^ (a & c) ^ (b_ & c))
            h, g, f, e, d, c, b_, a = g, f, e, d + t1, c, b_, a, t1 + t2
        h0, h1, h2, h3 = h0 + a, h1 + b_, h2 + c, h3 + d
        h4, h5, h6, h7 = h4 + e, h5 + f, h6 + g, h7 + h
        blk += 1
    digests[m * 8 + 0] = h0
    digests[m * 8 + 1] = h1
    digests[m * 8 + 2] = h2
    digests[m * 8 + 3] = h3
    digests[m * 8 + 4] = h4
    digests[m * 8 + 5] = h5
    digests[m * 8 + 6] = h6
    digests[m * 8 + 7] = h7


@vyre.kernel
def byteswap_words(x: InOut[u32]):
    """Big-endian words to little-endian in place."""
    i = gid()
    if i < len(x):
        x[i] = byte_swap(x[i])


@vyre.kernel(workgroup_size=256)
def mandelbrot(out: Out[u32], width: Scalar[u32], height: Scalar[u32], max_iter: Scalar[u32]):
    """Escape-time iteration counts of the Mandelbrot set over [-2, 1] x [-1.5, 1.5]: a
    compute-heavy, embarrassingly parallel program (``elements=width*height``)."""
    i = gid()
    if i >= width * height:
        return
    cx = f32(i % width) * (3.0 / f32(width)) - 2.0
    cy = f32(i // width) * (3.0 / f32(height)) - 1.5
    x = 0.0
    y = 0.0
    n = u32(0)
    while n < max_iter and x * x + y * y <= 4.0:
        t = x * x - y * y + cx
        y = 2.0 * x * y + cy
        x = t
        n += 1
    out[i] = n
