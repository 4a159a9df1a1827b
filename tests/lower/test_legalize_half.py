"""`vyre.lower.legalize.half`: f16/bf16 as u32 bits through integer helpers gives the
original Program's bytes on the reference for every operator, fma and cast (random bit
patterns, so subnormal, NaN and overflow cases are all hit; S27, S28). The op x type matrix
(tests/semantics/test_op_matrix.py) runs the same on wgpu."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vyre import reference
from vyre.conform.witness import edges
from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program, UnOp
from vyre.ir.typecheck import TypeFault, bin_result, un_result
from vyre.ir.types import TRANSCENDENTAL
from vyre.lower.legalize.half import HALF, lower_half

D = DataType


def program(tin, tout, make, n: int) -> Program:
    gx = Expr.gid_x()
    bufs = [BufferDecl.read(f"x{i}", i, t, n) for i, t in enumerate(tin)]
    bufs.append(BufferDecl.output("out", len(tin), tout, n))
    return Program.wrapped(bufs, 1, [Node.store("out", gx, make(*[Expr.load(f"x{i}", gx) for i in range(len(tin))]))])


def same(p: Program, ins) -> None:
    q = lower_half(p)
    assert not any(b.dtype in HALF for b in q.buffers)
    assert reference.run(q, ins) == reference.run(p, ins)


@pytest.mark.parametrize("t", HALF, ids=lambda t: t.value)
def test_operators_match_reference(t):
    rng = np.random.default_rng(16)
    vals = np.array(edges(t) + list(rng.integers(0, 2**16, 30)), np.uint16)
    a, b = (np.array(v, np.uint16).view(t.host) for v in zip(*itertools.product(vals, vals)))
    for op in BinOp:
        try:
            res = bin_result(op, t, t)
        except TypeFault:
            continue
        same(program([t, t], res, lambda x, y, op=op: Expr.bin(op, x, y), len(a)), [a, b])
    for op in UnOp:
        if op in TRANSCENDENTAL:
            continue
        try:
            res = un_result(op, t)
        except TypeFault:
            continue
        same(program([t], res, lambda x, op=op: Expr.un(op, x), len(vals)), [vals.view(t.host)])
    tri = [rng.integers(0, 2**16, 2000).astype(np.uint16).view(t.host) for _ in range(3)]
    same(program([t] * 3, t, Expr.fma, 2000), tri)


@pytest.mark.parametrize("t", HALF, ids=lambda t: t.value)
def test_casts_match_reference(t):
    rng = np.random.default_rng(17)
    vals = np.array(edges(t) + list(rng.integers(0, 2**16, 200)), np.uint16).view(t.host)
    for dst in (D.U32, D.I32, D.F32, D.BOOL, D.U64, D.I64, D.F16, D.BF16):
        same(program([t], dst, lambda x, dst=dst: Expr.cast(dst, x), len(vals)), [vals])
    for src in (D.U32, D.I32, D.F32, D.BOOL, D.U64, D.I64):
        words = np.uint64 if src.is_wide else np.uint32
        special = [0, 1, 255, 256, 257, 383, 384, 385, 511, 65504, 65519, 65520, 0x80000000, 0xFFFFFFFF,
                   0x33800000, 0x33000001, 0x387FC000, 0x477FF000, 0x477FEFFF, 0x7F7FFFFF, 0x00400000]
        xs = np.concatenate([rng.integers(0, np.iinfo(words).max, 1500, dtype=words), np.array(special, words)])
        x = xs.view(np.float32) if src is D.F32 else xs if src is D.BOOL else xs.view(src.numpy)
        same(program([src], t, lambda y: Expr.cast(t, y), len(xs)), [x])
