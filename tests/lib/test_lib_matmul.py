"""vyre.lib.matmul (docs/primitives.md, S37): integer matrix products, exact mod 2**32, the same
bytes on every backend. Expected values: numpy int64 products (which wrap mod 2**64, so their
residue mod 2**32 is exact) reduced mod 2**32."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import vyre.lib as L
from vyre.driver.errors import UnsupportedFeature
from vyre.lib import LibError

MM = importlib.import_module("vyre.lib.matmul")
PAIRS = [(np.int8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8), (np.uint32, np.uint32),
         (np.int32, np.int32)]
# (m, k, n): one element; tiles of every backend; edges in every dimension; k % 4 != 0 and
# n % 4 != 0 (the unpacked byte path)
SHAPES = [(1, 1, 1), (64, 160, 64), (37, 70, 45), (65, 40, 12), (100, 33, 7), (3, 200, 129)]


def _full(rng, dt, shape) -> np.ndarray:
    info = np.iinfo(dt)
    return rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=np.int64).astype(dt)


def _want(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)


def _result_type(ta) -> np.dtype:
    return np.dtype(np.int32) if np.dtype(ta).itemsize == 1 else np.dtype(ta)


@pytest.mark.parametrize("ta, tb", PAIRS, ids=lambda t: np.dtype(t).name)
def test_reference_matmul_is_the_int64_product_mod_2_32(ta, tb) -> None:
    rng = np.random.default_rng(26)
    for m, k, n in SHAPES:
        a, b = _full(rng, ta, (m, k)), _full(rng, tb, (k, n))
        got = L.matmul(a, b, backend="reference")
        assert got.shape == (m, n) and got.dtype == _result_type(ta)
        assert np.array_equal(got.view(np.uint32), _want(a, b)), (m, k, n)


@pytest.mark.parametrize("backend_id", ["opencl", "wgpu"])
def test_every_backend_gives_the_same_bytes(backend_id: str, monkeypatch) -> None:
    from conftest import get_backend

    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp")
    be = get_backend(backend_id)
    rng = np.random.default_rng(27)
    for ta, tb in PAIRS:
        for m, k, n in SHAPES[1:]:
            a, b = _full(rng, ta, (m, k)), _full(rng, tb, (k, n))
            got = L.matmul(a, b, backend=be)
            assert got.dtype == _result_type(ta) and got.tobytes() == _want(a, b).tobytes(), (ta, tb, m, k, n)


def test_workgroup_tiles_do_not_change_a_bit() -> None:
    """The CUDA tiles (MM.CUDA_BYTES and MM.CUDA_WORDS, and others benchmarks time beside
    them) on the reference give numpy's bytes through both passes (the transpose of b, then
    the tiled product): the tiling never shows. k spans several slices of each and ends inside
    one; m and n end inside a tile."""
    from vyre.driver import DispatchConfig
    from vyre.ir import DataType
    from vyre.lib.runner import params
    from vyre.reference import run

    rng = np.random.default_rng(28)
    m, k, n = 70, 500, 68
    for ta, tb, dta, dtb in [(np.int8, np.uint8, DataType.I8, DataType.U8), (np.uint32, np.uint32, DataType.U32, DataType.U32)]:
        a, b = _full(rng, ta, (m, k)), _full(rng, tb, (k, n))
        words = dta is DataType.U32
        assert MM.tiles("cuda", words) == (MM.CUDA_WORDS if words else MM.CUDA_BYTES)
        tn = -(-n // MM.TR)
        cfg = DispatchConfig(grid_override=(-(-k // MM.TR) * tn, 1, 1), dispatch_elements=k * n)
        bt = run(MM.transpose_program(dtb), [b.reshape(-1), params(k, n, 0, tn)], cfg)[0]
        assert np.frombuffer(bt, tb)[:k * n].tobytes() == np.ascontiguousarray(b.T).tobytes()
        for t in ([MM.CUDA_WORDS, MM.SMALL, MM.Tiles(64, 64, 64, 128)] if words else
                  [MM.CUDA_BYTES, MM.SMALL, MM.Tiles(128, 128, 64, 256), MM.Tiles(64, 64, 80, 128)]):
            tiles_n = -(-n // t.bn)
            cfg = DispatchConfig(grid_override=(-(-m // t.bm) * tiles_n, 1, 1), dispatch_elements=m * n)
            out = run(MM.program(dta, dtb, t), [a.reshape(-1), np.frombuffer(bt, tb)[:k * n],
                                                params(m, n, k, tiles_n)], cfg)[0]
            assert np.frombuffer(out, np.uint32)[:m * n].tobytes() == _want(a, b).tobytes(), (ta, t)


def test_empty_dimensions_give_zeros_of_the_shape() -> None:
    assert L.matmul(np.zeros((3, 0), np.int8), np.zeros((0, 4), np.int8), backend="reference").tolist() == [[0] * 4] * 3
    out = L.matmul(np.zeros((0, 5), np.uint32), np.zeros((5, 2), np.uint32), backend="reference")
    assert out.shape == (0, 2) and out.dtype == np.uint32


@pytest.mark.parametrize("a, b, code", [
    (np.zeros((2, 3), np.int8), np.zeros((4, 2), np.int8), "L002"),          # inner sizes differ
    (np.zeros(3, np.int8), np.zeros((3, 2), np.int8), "L002"),               # a vector
    (np.zeros((2, 3), np.int8), np.zeros((3, 2), np.uint32), "L001"),        # bytes x words
    (np.zeros((2, 3), np.uint32), np.zeros((3, 2), np.int32), "L001"),       # two word types
    (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), "L001"),    # floats
    ([[1, 2]], np.zeros((2, 2), np.int8), "L001"),                           # a list
])
def test_bad_arguments_are_lib_errors_with_a_fix(a, b, code: str) -> None:
    with pytest.raises(LibError) as err:
        L.matmul(a, b, backend="reference")
    assert err.value.code == code and "Fix:" in str(err.value)


def test_matrices_of_2_32_elements_are_refused_before_anything_is_copied() -> None:
    big = np.broadcast_to(np.int8(1), (70_000, 70_000))     # a view: nothing allocated
    with pytest.raises(LibError) as err:
        L.matmul(big, np.broadcast_to(np.int8(1), (70_000, 8)), backend="reference")
    assert err.value.code == "L004" and "Fix:" in str(err.value)


def test_asking_for_tensor_cores_where_there_are_none_is_refused_with_a_fix() -> None:
    with pytest.raises(UnsupportedFeature) as err:
        L.matmul(np.ones((2, 2), np.int8), np.ones((2, 2), np.int8), backend="reference", tensor_cores=True)
    assert "Fix:" in str(err.value) and "8.0" in str(err.value)


@pytest.mark.parametrize("backend_id", ["reference", "opencl", "wgpu"])
def test_no_backend_here_reports_tensor_cores(backend_id: str, monkeypatch) -> None:
    from conftest import get_backend

    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp")
    assert get_backend(backend_id).supports_tensor_cores() is False


def test_dask_gives_the_same_bytes() -> None:
    pytest.importorskip("distributed")
    import os

    from vyre.driver import acquire

    os.environ.setdefault("VYRE_DASK_WORKERS", "2")
    be = acquire("dask")
    rng = np.random.default_rng(29)
    a, b = _full(rng, np.int8, (37, 70)), _full(rng, np.uint8, (70, 45))
    assert L.matmul(a, b, backend=be).tobytes() == _want(a, b).tobytes()
    assert be.supports_tensor_cores() is False
