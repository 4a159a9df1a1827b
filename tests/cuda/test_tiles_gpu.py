"""load_tile on the GPU (`gpu`): the cp.async copies give the reference's bytes (S38) for every
case of tests/semantics/test_load_tile.py (aligned chunks, odd offsets and strides that take
the element-by-element path, partial limits, the end of the source, indices that wrap) and for
a device array whose pointer is not 16-byte aligned; vyre.lib.matmul's pipelined k loop in
224 KiB of dynamic shared memory gives numpy's product (tests/cuda/test_imma_gpu.py covers
its shapes)."""

from __future__ import annotations

import numpy as np
import pytest

from semantics.test_load_tile import CASES, CFG, C, R, _params, expected, source, tile_program
from vyre.ir import DataType
from vyre.reference import run

pytestmark = pytest.mark.gpu
D = DataType


def test_every_case_gives_the_references_bytes(cuda) -> None:
    rng = np.random.default_rng(11)
    for t, off, stride, rin, cin in [*CASES, (D.U32, 2**32 - 6, 16, R, C), (D.I8, 2**32 - 20, 16, R, C)]:
        src = source(t, rng)
        ins = [src, _params(off, 4, stride, rin, cin)]
        got = cuda.dispatch(tile_program(t), ins, CFG)
        assert got == run(tile_program(t), ins, CFG), (t, off, stride)
        assert got[0] == expected(src, off, 4, stride, rin, cin).tobytes(), (t, off, stride)


def test_a_source_pointer_that_is_not_16_byte_aligned_copies_element_by_element(cuda) -> None:
    cupy = pytest.importorskip("cupy")
    src = source(D.I8, np.random.default_rng(2))
    dev = cupy.asarray(np.concatenate([np.zeros(1, np.int8), src]))[1:]   # 1 byte past an aligned start
    assert dev.data.ptr % 16 == 1
    prm = _params(0, 16, 16, R, C)
    outs = cuda.dispatch_device(tile_program(D.I8), [dev, prm], CFG)
    got = cupy.asnumpy(cupy.asarray(outs[0])).tobytes()
    assert got == expected(src, 0, 16, 16, R, C).tobytes()


def test_the_lib_byte_tile_runs_in_dynamic_shared_memory(cuda) -> None:
    import importlib

    import vyre.lib as L

    MM = importlib.import_module("vyre.lib.matmul")
    if not cuda.supports_tensor_cores():
        pytest.skip("no IMMA / cp.async on this device")
    from vyre.drivers.cuda import tiles

    kernel, _, _ = cuda.device.compile(MM.program(D.I8, D.I8, MM.CUDA_BYTES))
    assert kernel.shared_bytes > 48 * 1024
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (300, 700), dtype=np.int64).astype(np.int8)
    b = rng.integers(-128, 128, (700, 520), dtype=np.int64).astype(np.int8)
    want = ((a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)
    assert L.matmul(a, b, backend=cuda).view(np.uint32).tobytes() == want.tobytes()
    assert tiles.STATIC_LIMIT == 48 * 1024
