"""1,000 tiny dispatches (x[i] += 1 over 1024 u32, resident) one by one vs recorded once as a
`vyre.driver.Batch` (a captured CUDA graph) and replayed, side by side in one run."""

from __future__ import annotations

import time

import numpy as np

import vyre.driver as d
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit

N, K = 1024, 1000


def main() -> None:
    a = args(__doc__)
    rounds = 3 if a.quick else 7
    b = d.acquire("cuda")
    gx = Expr.gid_x()
    prog = Program.wrapped([BufferDecl.read_write("x", 0, DataType.U32)], 64,
                           [Node.store("x", gx, Expr.load("x", gx) + 1)])
    r = b.allocate_resident(N * 4)
    b.upload_resident(r, np.zeros(N, np.uint32))
    bound = b.bind_resident(prog, [r])
    batch = d.Batch(b)
    for _ in range(K):
        batch.add(prog, [r])
    t = time.perf_counter()
    batch.compile()
    record_ms = (time.perf_counter() - t) * 1e3
    s = b.device.rt.stream
    one, graph = [], []
    for _ in range(rounds):
        t = time.perf_counter_ns()
        for _ in range(K):
            bound.launch()
        s.sync()
        one.append((time.perf_counter_ns() - t) / K / 1e3)
        t = time.perf_counter_ns()
        batch.run()
        graph.append((time.perf_counter_ns() - t) / K / 1e3)
    total = np.frombuffer(b.read_resident(r), np.uint32)
    assert (total == 2 * K * rounds).all(), total[:4]
    res = {"dispatches": K, "native_graph": batch.native, "record_ms": record_ms,
           "one_by_one_us_per_dispatch": float(np.median(one)),
           "batched_graph_us_per_dispatch": float(np.median(graph))}
    res["speedup"] = res["one_by_one_us_per_dispatch"] / res["batched_graph_us_per_dispatch"]
    emit("cuda_graphs", res, a.json)


if __name__ == "__main__":
    main()
