"""matmul_acc and vyre.lib.matmul on the GPU (`gpu`): the tensor-core path is what runs (the
compiled module's PTX holds mma.sync, its SASS IMMA where cuobjdump is installed) and it is
exact: 4,096 random full-range 16x8x32 tiles of each operand type, shapes that are not
multiples of any tile, and whole warp tiles (ldmatrix fragments, k an odd multiple of 16,
rotated accumulator pairs) give numpy's int64 products reduced mod 2**32 (S37), as does
vyre.lib.matmul on numpy, CuPy and torch inputs. `supports_tensor_cores()` is True exactly
where this path is used (sm_80+, VYRE_CUDA_TENSOR_CORES unset); with the variable at 0 the
scalar loops give the same bytes and the capability is False."""

from __future__ import annotations

import importlib
import shutil
import subprocess

import numpy as np
import pytest

import vyre.lib as L
from vyre.conform import run_backend
from vyre.conform.corpus import corpus, matmul_acc_program
from vyre.driver import DispatchConfig
from vyre.ir import DataType

pytestmark = pytest.mark.gpu
D = DataType
MM = importlib.import_module("vyre.lib.matmul")
COMBOS = [(D.I8, D.I8, D.I32), (D.I8, D.U8, D.I32), (D.U8, D.I8, D.U32), (D.U8, D.U8, D.I32),
          (D.U32, D.U32, D.U32), (D.I32, D.U32, D.I32)]
TILE = (16, 8, 32, 32)       # one m16n8k32 tile per workgroup, 4,096 workgroups
EDGES = [(33, 17, 70, 96), (80, 24, 64, 64), (5, 7, 37, 64)]
# whole warp tiles: ldmatrix fragments (k = 48 and 80: the .x2 tail), rotated accumulator pairs
WHOLE = [(64, 64, 48, 128), (32, 32, 80, 64), (64, 64, 64, 128)]
LIB_SHAPES = [(1, 1, 1), (64, 160, 64), (300, 517, 130), (256, 1024, 256), (129, 33, 200)]
LIB_PAIRS = [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint32, np.uint32),
             (np.int32, np.int32)]


def _imma(cuda):
    if not cuda.supports_tensor_cores():
        pytest.skip(f"no IMMA on this device ({cuda.device.rt.facts.arch}) or VYRE_CUDA_TENSOR_CORES=0")


def _full(rng, dt, size) -> np.ndarray:
    info = np.iinfo(dt)
    return rng.integers(int(info.min), int(info.max), size=size, endpoint=True, dtype=np.int64).astype(dt)


_PRECOMPILED: set[int] = set()


@pytest.fixture
def compiled(cuda):
    """Every program of this module, compiled in parallel once, up front."""
    if id(cuda) in _PRECOMPILED:
        return True
    _PRECOMPILED.add(id(cuda))
    programs = [(matmul_acc_program(ta, tb, td, *s), None) for ta, tb, td in COMBOS for s in [TILE, *EDGES, *WHOLE]]
    for ta, tb in LIB_PAIRS:
        dta, dtb = MM._NP[np.dtype(ta)], MM._NP[np.dtype(tb)]
        words = dta in MM.WORDS
        programs.append((MM.program(dta, dtb, MM.tiles("cuda", words)), None))
        programs.append((MM.transpose_program(dtb), None))
    cuda.precompile(programs)
    return True


def test_tensor_cores_are_reported_exactly_on_sm80_and_newer(cuda):
    assert cuda.supports_tensor_cores() == (cuda.device.rt.facts.compute_capability >= (8, 0))
    assert cuda.device_profile().supports_tensor_cores == cuda.supports_tensor_cores()


def test_the_compiled_module_uses_imma(cuda, tmp_path):
    _imma(cuda)
    from vyre.drivers.cuda import compiler

    for ta, tb, ptx_op, sass_op in [
            (D.I8, D.U8, "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32", "IMMA.16832.S8.U8"),
            (D.U32, D.U32, "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32", "IMMA.16832.U8.U8")]:
        kernel, _, cubin = cuda.device.compile(MM.program(ta, tb, MM.tiles("cuda", ta is D.U32)))
        ptx = compiler.compile_ptx(kernel.source, cuda.device.rt.facts.arch)
        assert ptx_op in ptx
        # vyre.lib.matmul's byte tiles are whole warp tiles: fragments by ldmatrix
        assert ("ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx) == (ta is not D.U32)
        if shutil.which("cuobjdump"):
            path = tmp_path / "k.cubin"
            path.write_bytes(cubin)
            sass = subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True, text=True,
                                  timeout=120).stdout
            assert sass_op in sass, sass[:2000]


@pytest.mark.parametrize("ta, tb, td", COMBOS, ids=lambda t: t.value)
def test_random_full_range_tiles_and_edge_shapes_are_exact(cuda, compiled, ta, tb, td):
    _imma(cuda)
    rng = np.random.default_rng(2600 + COMBOS.index((ta, tb, td)))
    for (m, n, k, wg), groups in [(TILE, 4096), *((s, 64) for s in [*EDGES, *WHOLE])]:
        p = matmul_acc_program(ta, tb, td, m, n, k, wg)
        a, b, d = (_full(rng, ta.host, groups * m * k), _full(rng, tb.host, groups * n * k),
                   _full(rng, td.host, groups * m * n))
        out = cuda.dispatch(p, [a, b, d], DispatchConfig(grid_override=(groups, 1, 1)))[0]
        got = np.frombuffer(out, np.uint32)[:groups * m * n].reshape(groups, m, n)
        A = a.astype(np.int64).reshape(groups, m, k)
        B = b.astype(np.int64).reshape(groups, n, k)
        want = (np.einsum("gik,gjk->gij", A, B) + d.astype(np.int64).reshape(groups, m, n)) & 0xFFFFFFFF
        assert np.array_equal(got, want.astype(np.uint32)), (m, n, k, wg)


def test_the_matmul_corpus_entries_pass_conformance(cuda, compiled):
    entries = [e for e in corpus() if e.program.facts.matmul]
    report = run_backend(cuda, entries=entries)
    assert report.ok and report.count("pass") == len(entries)


@pytest.mark.parametrize("ta, tb", LIB_PAIRS, ids=lambda t: np.dtype(t).name)
def test_lib_matmul_on_cuda_is_the_int64_product_mod_2_32(cuda, compiled, ta, tb):
    rng = np.random.default_rng(2700)
    for m, k, n in LIB_SHAPES:
        a, b = _full(rng, ta, (m, k)), _full(rng, tb, (k, n))
        got = L.matmul(a, b, backend=cuda, tensor_cores=cuda.supports_tensor_cores() or None)
        want = ((a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)
        assert got.shape == (m, n) and got.view(np.uint32).tobytes() == want.tobytes(), (m, k, n)


def test_lib_matmul_takes_cupy_and_torch_and_returns_the_same_kind(cuda, compiled):
    rng = np.random.default_rng(2800)
    a, b = _full(rng, np.int8, (129, 200)), _full(rng, np.int8, (200, 68))
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    ran = 0
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        got = L.matmul(cupy.asarray(a), cupy.asarray(b), backend=cuda)
        assert isinstance(got, cupy.ndarray) and got.shape == (129, 68)
        assert np.array_equal(cupy.asnumpy(got), want)
        ran += 1
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        got = L.matmul(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), backend=cuda)
        assert got.is_cuda and got.dtype == torch.int32 and tuple(got.shape) == (129, 68)
        assert np.array_equal(got.cpu().numpy(), want)
        got = L.matmul(torch.from_numpy(a), torch.from_numpy(b), backend=cuda)   # CPU tensors
        assert not got.is_cuda and np.array_equal(got.numpy(), want)
        ran += 1
    if not ran:
        pytest.skip("neither CuPy nor torch with CUDA is installed")


def test_scalar_loops_when_tensor_cores_are_off_give_the_same_bytes(cuda, compiled, monkeypatch):
    from vyre.drivers.cuda.backend import CudaBackend

    monkeypatch.setenv("VYRE_CUDA_TENSOR_CORES", "0")
    off = CudaBackend(int(cuda.device.rt.dev.device_id))
    try:
        assert off.supports_tensor_cores() is False
        assert off.device_fingerprint() != cuda.device_fingerprint()
        rng = np.random.default_rng(2900)
        for ta, tb in [(np.int8, np.uint8), (np.uint32, np.uint32)]:
            a, b = _full(rng, ta, (129, 70)), _full(rng, tb, (70, 33))
            assert L.matmul(a, b, backend=off).tobytes() == L.matmul(a, b, backend=cuda).tobytes()
    finally:
        off.shutdown()
