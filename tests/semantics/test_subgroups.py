"""S24, subgroups: hand-checked on every backend that reports supports_subgroup_ops();
refused with a Fix on those that do not; CUDA's lowering really emits warp intrinsics."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver import UnsupportedFeature
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, SubgroupOp, validate

from helpers import GX, as_f32, as_i32, as_u32, map_program, run_checked

U, I, F = DataType.U32, DataType.I32, DataType.F32


def _needs(backend):
    if not backend.supports_subgroup_ops():
        p = map_program([U], U, lambda x: Expr.subgroup_reduce(SubgroupOp.REDUCE_ADD, x), wg=64)
        with pytest.raises(UnsupportedFeature, match="Fix:"):
            backend.dispatch(p, [np.zeros(64, np.uint32)])
        pytest.skip(f"{backend.id()} reports no subgroup ops (and refuses them, checked)")
    assert backend.subgroup_size() == 32


def test_S24_reductions(backend):
    _needs(backend)
    a = (np.arange(128, dtype=np.uint32) * 2654435761) & 0xFFFFFFFF
    groups = a.reshape(4, 32)
    for op, fn in ((SubgroupOp.REDUCE_ADD, lambda g: g.sum(dtype=np.uint64) & 0xFFFFFFFF),
                   (SubgroupOp.REDUCE_MAX, np.max), (SubgroupOp.REDUCE_XOR, np.bitwise_xor.reduce),
                   (SubgroupOp.REDUCE_AND, np.bitwise_and.reduce)):
        out = as_u32(run_checked(backend, map_program([U], U, lambda x, op=op: Expr.subgroup_reduce(op, x), wg=64), [a])[0])
        assert list(out) == [int(fn(groups[i // 32])) for i in range(128)]
    s = a.view(np.int32)
    out = as_i32(run_checked(backend, map_program([I], I, lambda x: Expr.subgroup_reduce(SubgroupOp.REDUCE_MIN, x), wg=64), [s])[0])
    assert list(out) == [int(s.reshape(4, 32)[i // 32].min()) for i in range(128)]


def test_S24_shuffle_moves_bits_and_ballot_sets_lane_bits(backend):
    _needs(backend)
    f = np.array([0xFFC00001, 0x00000001] * 32, np.uint32)  # NaN payload and a subnormal survive
    out = as_u32(run_checked(backend, map_program([F], F, lambda x: Expr.subgroup_shuffle(x, Expr.subgroup_local_id() + 33), wg=64), [f])[0])
    assert list(out) == [int(f[(i // 32) * 32 + (i % 32 + 33) % 32]) for i in range(64)]
    a = np.arange(64, dtype=np.uint32)
    out = as_u32(run_checked(backend, map_program([U], U, lambda x: Expr.subgroup_ballot(x.lt(40)), wg=64), [a])[0])
    assert list(out) == [0xFFFFFFFF] * 32 + [0x000000FF] * 32
    out = as_u32(run_checked(backend, map_program([U], U, lambda x: Expr.subgroup_local_id() + Expr.subgroup_size() * 100 + x * 0, wg=64), [a])[0])
    assert list(out) == [3200 + (i % 32) for i in range(64)]
    assert as_f32(np.zeros(1, np.float32).tobytes()).size == 1


def test_subgroup_validation_rules():
    red = Expr.subgroup_reduce(SubgroupOp.REDUCE_ADD, Expr.load("a", GX))
    bufs = [BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)]
    divergent = Program.wrapped(bufs, 64, [Node.if_(GX.lt(3), [Node.store("o", GX, red)])])
    early = Program.wrapped(bufs, 64, [Node.if_(GX.lt(3), [Node.return_()]), Node.store("o", GX, red)])
    floats = Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.output("o", 1, F)], 64,
                             [Node.store("o", GX, Expr.subgroup_reduce(SubgroupOp.REDUCE_ADD, Expr.load("a", GX)))])
    assert "V027" in {d.code for d in validate(divergent)}
    assert "V028" in {d.code for d in validate(early)}
    assert "V003" in {d.code for d in validate(floats)}
    assert validate(Program.wrapped(bufs, 64, [Node.store("o", GX, red)])) == []


def test_cuda_lowering_emits_warp_intrinsics():
    from vyre.drivers.cuda.codegen import generate

    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64,
                        [Node.store("o", GX, Expr.subgroup_reduce(SubgroupOp.REDUCE_ADD, Expr.load("a", GX))
                                    + Expr.subgroup_shuffle(Expr.load("a", GX), 3)
                                    + Expr.subgroup_ballot(Expr.load("a", GX).gt(1)))])
    src = generate(p)[1]
    for intrinsic in ("__reduce_add_sync", "__shfl_sync", "__ballot_sync"):
        assert intrinsic in src
