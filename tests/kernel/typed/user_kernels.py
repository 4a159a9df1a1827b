"""A kernel file as a user writes it; `test_kernel_mypy.py` checks it with mypy (no errors)."""

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
