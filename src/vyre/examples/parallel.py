"""Workgroup-parallel building blocks: a privatised histogram, a workgroup scan and a
workgroup bitonic sort. Each is the textbook shared-memory algorithm, so it can be compared
with the same algorithm hand-written in CUDA C."""

from __future__ import annotations

import numpy as np

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

U = DataType.U32


def histogram_privatised(bins: int = 256, wg: int = 256, per_invocation: int = 16) -> Program:
    """``out[b] = #{i : data[i] % bins == b}`` (``bins`` a power of two, at most ``wg``):
    each workgroup counts ``wg * per_invocation`` values into workgroup memory with atomics,
    then adds its counts to ``out`` with one global atomic per bin. Launch with
    `histogram_grid`."""
    if bins & (bins - 1) or bins > wg:
        raise ValueError("bins must be a power of two no larger than the workgroup")
    lid, block = Expr.lid_x(), Expr.wgid_x() * (wg * per_invocation)
    i = block + Expr.var("j") * wg + lid
    body = [
        Node.loop("j", Expr.u32(0), Expr.u32(per_invocation), [
            Node.if_(i.lt(Expr.buf_len("data")), [
                Node.expr(Expr.atomic(AtomicOp.ADD, "local", Expr.load("data", i) & (bins - 1), Expr.u32(1)))]),
        ]),
        Node.barrier(),
        Node.if_(lid.lt(bins), [Node.expr(Expr.atomic(AtomicOp.ADD, "out", lid, Expr.load("local", lid)))]),
    ]
    return Program.wrapped([BufferDecl.read("data", 0, U), BufferDecl.output("out", 1, U, bins),
                            BufferDecl.workgroup("local", bins, U)], wg, body)


def histogram_grid(n: int, wg: int = 256, per_invocation: int = 16) -> tuple[int, int, int]:
    return (-(-n // (wg * per_invocation)), 1, 1)


def histogram_expected(data: np.ndarray, bins: int = 256) -> np.ndarray:
    return np.bincount(data & (bins - 1), minlength=bins).astype(np.uint32)


def scan_workgroup(wg: int = 256) -> Program:
    """Inclusive prefix sum (wrapping u32) of each ``wg``-element block of ``data``
    (Hillis-Steele in workgroup memory: log2(wg) steps, two barriers each)."""
    lid, gid = Expr.lid_x(), Expr.gid_x()
    body = [Node.store("s", lid, Expr.load("data", gid)), Node.barrier()]
    offset = 1
    while offset < wg:
        body += [Node.let_bind(f"t{offset}", Expr.select(lid.ge(offset), Expr.load("s", lid - offset), Expr.u32(0))),
                 Node.barrier(),
                 Node.store("s", lid, Expr.load("s", lid) + Expr.var(f"t{offset}")),
                 Node.barrier()]
        offset *= 2
    body.append(Node.store("out", gid, Expr.load("s", lid)))
    return Program.wrapped([BufferDecl.read("data", 0, U), BufferDecl.output("out", 1, U),
                            BufferDecl.workgroup("s", wg, U)], wg, body)


def scan_expected(data: np.ndarray, wg: int = 256) -> np.ndarray:
    n = data.size
    pad = np.zeros(-(-n // wg) * wg, np.uint64)
    pad[:n] = data
    return (np.cumsum(pad.reshape(-1, wg), axis=1) % 2**32).astype(np.uint32).ravel()[:n]


def bitonic_sort_workgroup(wg: int = 512) -> Program:
    """Sorts each ``wg``-element block of ``data`` ascending (``wg`` a power of two): the
    bitonic network in workgroup memory, one compare-exchange per invocation and step."""
    if wg & (wg - 1):
        raise ValueError("the workgroup size must be a power of two")
    lid, gid = Expr.lid_x(), Expr.gid_x()
    body = [Node.store("s", lid, Expr.load("data", gid)), Node.barrier()]
    k = 2
    step = 0
    while k <= wg:
        j = k // 2
        while j >= 1:
            partner = lid ^ j
            mine, theirs = Expr.load("s", lid), Expr.load("s", partner)
            ascending = (lid & k).eq(0)
            lower = lid.lt(partner)
            # keep the smaller value where (ascending and lower) or (descending and upper)
            keep_min = ascending.eq(lower)
            body += [Node.let_bind(f"v{step}", Expr.select(keep_min, mine.min(theirs), mine.max(theirs))),
                     Node.barrier(),
                     Node.store("s", lid, Expr.var(f"v{step}")),
                     Node.barrier()]
            step += 1
            j //= 2
        k *= 2
    body.append(Node.store("out", gid, Expr.load("s", lid)))
    return Program.wrapped([BufferDecl.read("data", 0, U), BufferDecl.output("out", 1, U),
                            BufferDecl.workgroup("s", wg, U)], wg, body)


def bitonic_expected(data: np.ndarray, wg: int = 512) -> np.ndarray:
    n = data.size
    assert n % wg == 0, "bitonic blocks are whole workgroups"
    return np.sort(data.reshape(-1, wg), axis=1).ravel()
