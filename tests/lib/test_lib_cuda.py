"""vyre.lib on CUDA. Without a GPU: one Program of each code shape the library builds (at the
CUDA defaults; the other builders share these fragments) compiles through NVRTC to an sm_90 cubin. With one (`gpu`): CuPy and torch arrays in,
the same kind out, the same bytes as numpy input; intermediates stay on the device."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import vyre.lib as L
from vyre.driver.errors import BackendUnavailable
from vyre.ir import BinOp, DataType, superacc
from vyre.lib import (
    columns,
    compaction,
    halfkeys,
    histograms,
    radix,
    reduce,
    scan,
    scatter,
    segmented,
)

D = DataType


def _programs():
    wg = 256
    yield "tree f16 min keys", reduce.tree_program(D.F16, BinOp.MIN, wg, True, True)
    yield "tree u32 sum merged", reduce.tree_program(D.U32, BinOp.ADD, wg, True, True, 8, merge=True)
    yield "exact f32 columns", reduce.exact_program(D.F32, columns.LAYOUT, superacc.F32, wg, False, 4)
    yield "exact f16 columns final", reduce.exact_program(D.F16, columns.LAYOUT, superacc.F16, wg, True, 4)
    yield "exact digits final f16", reduce.exact_program("digits", superacc.SUM, superacc.F16, wg, True)
    yield "exact dot", reduce.exact_program("dot", superacc.DOT, superacc.F32, wg, False)
    yield "scatter f32", scatter.scatter_program(D.F32, D.I64, wg)
    yield "finish f32", scatter.finish_program(D.F32, wg)
    yield "scatter f16 64-bit atomics", scatter.wide_scatter_program(D.F16, D.I64, wg)
    yield "finish bf16 64-bit words", scatter.wide_finish_program(D.BF16, wg)
    yield "chunk sums u32", scan.chunk_sums_program(D.U32, wg, 8)
    yield "chunk scan u64", scan.chunk_scan_program(D.U64, wg, 16, True)
    yield "float block scan", scan.float_block_scan_program(D.F32, 128, 8, False)
    yield "edges f16", histograms.edges_program(D.F16, wg, 0)
    yield "sort scatter f32 descending", radix.scatter_program(D.F32, D.U32, wg, 8, True)
    yield "sort count i64", radix.count_program(D.I64, wg, 8)
    yield "sort scatter i64 keys u64 values", radix.scatter_program(D.I64, D.U64, 128, 16)
    yield "compact partition", compaction.compact_program(D.F32, wg, True)
    yield "segment exact f32", segmented.segment_program(D.F32, BinOp.ADD, wg)
    yield "unique keys bf16", compaction.unique_key_program(D.BF16, wg)
    yield "half sort keys f16", halfkeys.order_program(D.F16, wg)
    yield "half sort bits", halfkeys.bits_program(wg)


def test_every_kind_of_library_program_compiles_with_nvrtc():
    try:
        from vyre.drivers.cuda import compiler
        from vyre.drivers.cuda.codegen import generate

        compiler.nvrtc_version()
    except BackendUnavailable as err:
        if os.environ.get("VYRE_REQUIRE_NVRTC") == "1":
            pytest.fail(f"NVRTC is required here but unavailable: {err}")
        pytest.skip(f"NVRTC unavailable: {err}")
    for name, program in _programs():
        assert compiler.compile_cubin(generate(program)[1], "sm_90")[:4] == b"\x7fELF", name


@pytest.mark.gpu
def test_device_arrays_in_give_device_arrays_out(cuda):
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(50)
    x = (rng.standard_normal(1 << 20) * np.exp2(rng.integers(-30, 30, 1 << 20))).astype(np.float32)
    u = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    idx = rng.integers(0, 1000, 1 << 20).astype(np.uint32)
    cx, cu, ci = cupy.asarray(x), cupy.asarray(u), cupy.asarray(idx)
    got = L.sum(cx, backend=cuda)
    assert isinstance(got, cupy.ndarray) and got.get().tobytes() == L.sum(x, backend="reference").tobytes()
    assert L.cumsum(cu, backend=cuda).get().tobytes() == np.cumsum(u, dtype=np.uint32).tobytes()
    assert L.sort(cu, backend=cuda).get().tobytes() == np.sort(u).tobytes()
    m = 1 << 16
    added = L.index_add(cupy.zeros(1000, cupy.float32), ci[:m], cx[:m], backend=cuda)
    assert isinstance(added, cupy.ndarray)
    want = [np.float32(math.fsum(x[:m][idx[:m] == s].astype(np.float64))) for s in range(1000)]
    assert added.get().tobytes() == np.array(want, np.float32).tobytes()
    assert L.bincount(cu & 255, 256, backend=cuda).get().tobytes() == \
        np.bincount(u & 255, minlength=256).astype(np.uint32).tobytes()


@pytest.mark.gpu
def test_each_argument_comes_back_as_its_own_kind(cuda):
    """Device keys with host values, and host 16-bit float keys (sorted through device
    passes): each result is the kind of the argument it stands for (values as numpy here,
    which once came back as a bare device buffer)."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(52)
    u = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    vals = rng.integers(0, 2**31, 5000).astype(np.int32)
    order = np.argsort(u, kind="stable")
    keys, got = L.sort(cupy.asarray(u), vals, backend=cuda)
    assert isinstance(keys, cupy.ndarray) and keys.get().tobytes() == u[order].tobytes()
    assert isinstance(got, np.ndarray) and got.tobytes() == vals[order].tobytes()
    h = rng.integers(0, 2**16, 5000, dtype=np.uint32).astype(np.uint16)
    okey = np.where(h >> 15 == 1, ~h & 0xFFFF, h | 0x8000).astype(np.uint32)
    order = np.argsort(okey, kind="stable")
    hk, hv = L.sort(h.view(np.float16), vals, backend=cuda)
    assert isinstance(hv, np.ndarray) and hk.tobytes() == h[order].tobytes() and hv.tobytes() == vals[order].tobytes()
    tv, ti = L.top_k(h.view(np.float16), 5, backend=cuda)
    top = np.argsort(~okey, kind="stable")[:5]
    assert isinstance(ti, np.ndarray) and tv.tobytes() == h[top].tobytes() and ti.tolist() == top.tolist()


@pytest.mark.gpu
def test_torch_tensors_in_give_torch_tensors_out(cuda):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(51)
    x = rng.standard_normal(100_003).astype(np.float32)
    t = torch.from_numpy(x).cuda()
    got = L.sum(t, backend=cuda)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    assert got.cpu().numpy().tobytes() == L.sum(x, backend="reference").tobytes()
    bf = torch.from_numpy(x).to(torch.bfloat16).cuda()
    assert L.sum(bf, backend=cuda).cpu().view(torch.int16).numpy().tobytes() == \
        L.sum(bf.cpu(), backend="reference").view(torch.int16).numpy().tobytes()
    assert torch.equal(L.cumsum(t, backend=cuda).cpu(), torch.from_numpy(L.cumsum(x, backend="reference")))
