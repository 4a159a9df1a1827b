"""N-D buffers (issue 25): ``In[f32, :, :]`` or a rank taken from the body's indexing,
``x[y, x]``, ``x.shape[k]``, ``h, w = x.shape``, ``len(x)``; outputs with a declared or
inferred shape; ``dim=`` launches; results come back with their shape. The IR stays 1-D:
indices are flattened row-major, and an index outside its axis is out of bounds (S6)."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre.kernel import In, KernelError, Out, f32, gid, i32, u32


@vyre.kernel(workgroup_size=(8, 8))
def _shift(img: In[f32, :, :], out: Out[f32, :, :]):
    x = gid(0)
    y = gid(1)
    h, w = img.shape
    if y < h and x < w:
        out[y, x] = img[i32(y) - 1, x] + img[y, i32(x) + 1]    # off the edge reads 0 (S6)


def test_2d_indexing_shapes_and_dim_launch(backend):
    img = np.arange(13 * 11, dtype=np.float32).reshape(13, 11)
    got = _shift(img, dim=(11, 13), backend=backend)
    up = np.vstack([np.zeros((1, 11), np.float32), img[:-1]])
    right = np.hstack([img[:, 1:], np.zeros((13, 1), np.float32)])
    assert got.shape == (13, 11) and got.tolist() == (up + right).tolist()


@vyre.kernel
def _transpose(a: In[u32], o: Out[u32]):
    i = gid()
    rows = a.shape[0]
    cols = a.shape[1]
    if i < len(a) * cols:
        o[i % cols, i // cols] = a[i // cols, i % cols]
    if i == 0:
        o[rows + 5, 0] = 99          # outside axis 0: dropped, never wraps into another row


def test_rank_inferred_from_the_body_and_output_shape(backend):
    a = np.arange(15, dtype=np.uint32).reshape(3, 5)
    got = _transpose(a, shape=(5, 3), backend=backend)
    assert got.shape == (5, 3) and got.tolist() == a.T.tolist()


@vyre.kernel
def _fixed(o: Out[u32, 4, 3]):
    i = gid()
    if i < 12:
        o[i // 3, i % 3] = i * 10 + 1


def test_declared_shapes(backend):
    got = _fixed(backend=backend, elements=12)
    assert got.shape == (4, 3) and got.reshape(-1).tolist() == [i * 10 + 1 for i in range(12)]


@vyre.kernel
def _scale(x: In[f32], o: Out[f32]):
    i = gid()
    o[i] = x[i] * 2.0


def test_elementwise_kernels_return_the_inputs_shape(backend):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = _scale(x, backend=backend)
    assert got.shape == (2, 3, 4) and got.tolist() == (x * 2).tolist()
    assert _scale(np.asfortranarray(x), backend=backend).tolist() == (x * 2).tolist()


def test_shape_errors():
    with pytest.raises(KernelError) as err:
        _shift(np.ones(4, np.float32), dim=(4, 1), backend="reference")
    assert err.value.code == "K014"
    with pytest.raises(KernelError) as err:
        _transpose(np.ones((2, 2), np.uint32), backend="reference", shape=(2, 2, 2))
    assert err.value.code == "K014"
    with pytest.raises(KernelError) as err:
        _fixed(backend="reference", dim=(12,), grid=1)
    assert err.value.code == "K021"
