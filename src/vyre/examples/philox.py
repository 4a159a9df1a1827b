"""Philox4x64-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the bit
generator behind ``numpy.random.Philox``, written with u64 values and ``mul_high``: one
counter block per invocation. `philox_expected` is numpy's own stream, so the test checks the
kernel against a library nobody here wrote.

Inputs: ``state`` (u64 x 6: the 256-bit counter, low word first, then the 128-bit key).
Output: ``out`` (u64, 4 words per block). Block ``i`` encrypts counter + 1 + i — numpy
advances its counter before each block — with the 256-bit counter's carries.
"""

from __future__ import annotations

import numpy as np

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

U64 = DataType.U64
M0, M1 = 0xD2E7470EE14C6C93, 0xCA5A826395121157
W0, W1 = 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B
ROUNDS = 10
v = Expr.var


def philox4x64() -> Program:
    i = Expr.gid_x()
    body = [
        Node.if_(i.ge(Expr.buf_len("out") // 4), [Node.return_()]),
        # counter + 1 + i, with the carry through all four words
        Node.let_bind("step", Expr.cast(U64, i) + 1),
        Node.let_bind("c0", Expr.load("state", 0) + v("step")),
        Node.let_bind("carry", Expr.cast(U64, v("c0").lt(v("step")))),
        Node.let_bind("c1", Expr.load("state", 1) + v("carry")),
        Node.assign("carry", Expr.cast(U64, v("carry").eq(1).and_(v("c1").eq(0)))),
        Node.let_bind("c2", Expr.load("state", 2) + v("carry")),
        Node.assign("carry", Expr.cast(U64, v("carry").eq(1).and_(v("c2").eq(0)))),
        Node.let_bind("c3", Expr.load("state", 3) + v("carry")),
        Node.let_bind("k0", Expr.load("state", 4)),
        Node.let_bind("k1", Expr.load("state", 5)),
        Node.loop("r", 0, ROUNDS, [
            Node.if_(v("r").gt(0), [Node.assign("k0", v("k0") + Expr.u64(W0)),
                                    Node.assign("k1", v("k1") + Expr.u64(W1))]),
            Node.let_bind("hi0", Expr.u64(M0).mul_high(v("c0"))),
            Node.let_bind("lo0", Expr.u64(M0) * v("c0")),
            Node.let_bind("hi1", Expr.u64(M1).mul_high(v("c2"))),
            Node.let_bind("lo1", Expr.u64(M1) * v("c2")),
            Node.assign("c0", v("hi1") ^ v("c1") ^ v("k0")),
            Node.assign("c1", v("lo1")),
            Node.assign("c2", v("hi0") ^ v("c3") ^ v("k1")),
            Node.assign("c3", v("lo0")),
        ]),
        *[Node.store("out", i * 4 + j, v(f"c{j}")) for j in range(4)],
    ]
    return Program.wrapped([BufferDecl.read("state", 0, U64, 6), BufferDecl.output("out", 1, U64)],
                           64, body)


def philox_state(key: tuple[int, int], counter: tuple[int, int, int, int] = (0, 0, 0, 0)) -> np.ndarray:
    return np.array([*counter, *key], dtype=np.uint64)


def philox_expected(key: tuple[int, int], counter: tuple[int, int, int, int], blocks: int) -> np.ndarray:
    """numpy's Philox stream for that key and counter: ``4 * blocks`` u64 words."""
    k = int(key[0]) | (int(key[1]) << 64)
    c = sum(int(x) << (64 * j) for j, x in enumerate(counter))
    gen = np.random.Philox(key=k, counter=c)
    return gen.random_raw(4 * blocks).astype(np.uint64)
