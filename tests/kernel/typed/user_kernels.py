"""A kernel file as a user writes it; `test_kernel_mypy.py` checks it with mypy (no errors).
The N-D and fixed-size annotations below the marker need `vyre.kernel.mypy_plugin`."""

from __future__ import annotations

import vyre
from vyre.kernel import In, Out, Scalar, f32, gid, i32, select, sqrt, u32


@vyre.func
def norm(a: f32, b: f32) -> f32:
    return sqrt(a * a + b * b)


@vyre.kernel
def saxpy(x: In[f32], y: In[f32], out: Out[f32], a: Scalar[f32]) -> None:
    i = gid()
    if i < len(x):
        out[i] = a * x[i] + y[i]


@vyre.kernel(workgroup_size=64)
def clamp(x: In[i32], out: Out[u32], hi: Scalar[i32]) -> None:
    i = gid()
    v = select(x[i] > hi, hi, x[i])
    out[i] = u32(v)


# ---- N-D and fixed-size buffers (mypy plugin vyre.kernel.mypy_plugin)


@vyre.kernel(workgroup_size=(8, 8))
def blur(img: In[f32, :, :], out: Out[f32, :, :]) -> None:
    x = gid(0)
    y = gid(1)
    h, w = img.shape
    if y < h and x < w:
        out[y, x] = (img[y, x] + img[y, x + 1]) * 0.5


@vyre.kernel(workgroup_size=32)
def first32(x: In[u32, 32], out: Out[u32, 32], tile: Out[u32, 4, 8]) -> None:
    i = gid()
    out[i] = x[i] * 2
    tile[i // 8, i % 8] = x[i]
