"""Reference interpreter throughput: a 1,048,576-invocation elementwise program (load, 10
arithmetic ops, store) and a 256-invocation-workgroup shared-memory reduction, in
invocation-statements per second, against per-invocation execution of the same programs
(the interpreter run one invocation at a time, and a hand-written Python loop)."""

from __future__ import annotations

import time

import numpy as np

from vyre import reference
from vyre.driver import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.reference import interp

from _common import args, emit

N = 1 << 20
GX = Expr.gid_x()
U = DataType.U32


def elementwise() -> tuple[Program, int]:
    x = Expr.var("x")
    ops = [x * 3, x + 7, x ^ 0x5A5A5A5A, x >> 3, x * x, x - 11, x | 0x100, x.rotate_left(5), x & 0xFFFFFF, x + 1]
    body = [Node.let_bind("x", Expr.load("a", GX))] + [Node.assign("x", e) for e in ops] + \
        [Node.store("o", GX, x)]
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 256, body), len(body)


def reduction() -> tuple[Program, int]:
    body = [Node.store("t", Expr.lid_x(), Expr.load("a", GX)), Node.barrier()]
    s = 128
    while s:
        body += [Node.if_(Expr.lid_x().lt(s), [Node.store("t", Expr.lid_x(),
                 Expr.load("t", Expr.lid_x()) + Expr.load("t", Expr.lid_x() + s))]), Node.barrier()]
        s //= 2
    body.append(Node.if_(Expr.lid_x().eq(0), [Node.store("o", Expr.wgid_x(), Expr.load("t", 0))]))
    stmts = 2 + 8 * 3 + 2  # each level: if + its store + barrier; the final if + store
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U, N // 256),
                            BufferDecl.workgroup("t", 256, U)], 256, body), stmts


def python_loop(a: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    for i, v in enumerate(a.tolist()):
        x = v
        x = (x * 3) & 0xFFFFFFFF
        x = (x + 7) & 0xFFFFFFFF
        x ^= 0x5A5A5A5A
        x >>= 3
        x = (x * x) & 0xFFFFFFFF
        x = (x - 11) & 0xFFFFFFFF
        x |= 0x100
        x = ((x << 5) | (x >> 27)) & 0xFFFFFFFF
        x &= 0xFFFFFF
        x = (x + 1) & 0xFFFFFFFF
        out[i] = x
    return out


def per_invocation(program: Program, a: np.ndarray, count: int) -> float:
    """Seconds per invocation when the interpreter runs one invocation at a time."""
    single = Program(program.buffers, (1, 1, 1), program.body)
    old = interp.MAX_BATCH_LANES
    interp.MAX_BATCH_LANES = 1
    try:
        t = time.perf_counter()
        reference.run(single, [a[:count]], DispatchConfig(grid_override=(count, 1, 1)))
        return (time.perf_counter() - t) / count
    finally:
        interp.MAX_BATCH_LANES = old


def main() -> None:
    a_ = args(__doc__)
    a = np.random.default_rng(0).integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    res: dict[str, float] = {"invocations": N}
    for name, (program, stmts) in (("elementwise", elementwise()), ("reduction", reduction())):
        reference.run(program, [a[:4096]])
        t = time.perf_counter()
        out = reference.run(program, [a])
        dt = time.perf_counter() - t
        res[f"{name}_seconds"] = dt
        res[f"{name}_statements"] = stmts
        res[f"{name}_inv_stmts_per_s"] = N * stmts / dt
        if name == "reduction":
            assert np.array_equal(np.frombuffer(out[0], np.uint32), a.reshape(-1, 256).sum(1, dtype=np.uint64).astype(np.uint32))
    n_single = 2000 if a_.quick else 8000
    res["elementwise_per_invocation_interp_s"] = per_invocation(elementwise()[0], a, n_single) * N
    res["ratio_vs_per_invocation_interp"] = res["elementwise_per_invocation_interp_s"] / res["elementwise_seconds"]
    t = time.perf_counter()
    want = python_loop(a[:100_000])
    res["elementwise_python_loop_s"] = (time.perf_counter() - t) * N / 100_000
    res["ratio_vs_python_loop"] = res["elementwise_python_loop_s"] / res["elementwise_seconds"]
    got = np.frombuffer(reference.run(elementwise()[0], [a[:100_000]])[0], np.uint32)
    assert np.array_equal(got, want)
    emit("reference_interp", res, a_.json)


if __name__ == "__main__":
    main()
