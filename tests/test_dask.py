"""The dask backend on a real LocalCluster (two worker processes, each on its own best local
backend): partitioned and unpartitioned programs give the reference's bytes, the partition
decision says why, a worker killed mid-dispatch costs nothing but time, and conformance runs
sharded over the workers."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from vyre import examples as X
from vyre import reference
from vyre.cli.bench import saxpy_program
from vyre.driver import (
    DispatchConfig,
    DispatchFailed,
    InvalidInput,
    acquire,
    acquire_preferred_dispatch_backend,
)
from vyre.driver.partition import decide, split
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, MemoryOrdering, Node, Program

U = DataType.U32
GX = Expr.gid_x()

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def dask_backend():
    os.environ.setdefault("VYRE_DASK_WORKERS", "2")
    b = acquire("dask")
    yield b
    b.shutdown()


def _prog(body, *bufs, wg=64):
    return Program.wrapped(list(bufs), wg, body)


# ---------------------------------------------------------------------------- decisions (no cluster)
def test_partition_decisions_say_why():
    assert decide(saxpy_program()).merges["out"].kind == "range"
    assert decide(X.sha256_bytes()).merges["digests"].stride == 8          # through its functions
    assert decide(X.histogram_privatised()).merges["out"].op is AtomicOp.ADD
    assert decide(X.philox4x64()).partitionable
    a, o = BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)
    cases = {
        "grid_sync": [Node.store("o", GX, 1), Node.barrier(MemoryOrdering.GRID_SYNC), Node.store("o", GX, 2)],
        "not provably owned": [Node.store("o", GX + 1, Expr.load("a", GX))],
        "read by the program": [Node.store("o", GX, Expr.load("o", GX) + 1)],
        "old values": [Node.store("o", GX, 0), Node.expr(Expr.atomic(AtomicOp.ADD, "a2", 0, 1))],
        "y or z": [Node.store("o", GX, Expr.gid_y())],
        "float atomics": [Node.store("o", GX, 1), Node.expr(Expr.atomic(AtomicOp.ADD, "f", GX % 4, Expr.f32(0.5)))],
    }
    for why, body in cases.items():
        bufs = [a, o] if why != "old values" else [a, o, BufferDecl.read_write("a2", 2, U, 4)]
        if why == "float atomics":
            bufs = [a, o, BufferDecl.output("f", 2, DataType.F32, 4)]
        if why == "old values":
            body = [Node.store("o", GX, Expr.atomic(AtomicOp.ADD, "a2", 0, 1))]
        d = decide(_prog(body, *bufs))
        assert not d.partitionable and why in d.explain(), (why, d.explain())
    assert split(10, 3) == [(0, 3), (3, 6), (6, 10)] and split(1, 4) == [(0, 1)]


# ---------------------------------------------------------------------------- the cluster
def test_is_distributed_and_never_picked_implicitly(dask_backend):
    assert dask_backend.is_distributed() and len(dask_backend.workers()) == 2
    assert acquire_preferred_dispatch_backend().id() != "dask"


def test_partitioned_programs_give_the_reference_bytes(dask_backend):
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((2, 50_000)).astype(np.float32)
    assert dask_backend.dispatch(saxpy_program(), [x, y]) == reference.run(saxpy_program(), [x, y])
    assert dask_backend.last_decision.partitionable
    msgs = X.random_messages(3000, seed=9) + [b"", b"a" * 200]
    ins = X.sha256_bytes_inputs(msgs)
    got = dask_backend.dispatch(X.sha256_bytes(), ins, X.sha256_bytes_config(len(msgs)))
    assert np.array_equal(np.frombuffer(got[0], np.uint32), X.sha256_bytes_expected(msgs))
    data = rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32)
    cfg = DispatchConfig(grid_override=X.histogram_grid(data.size))
    got = dask_backend.dispatch(X.histogram_privatised(), [data], cfg)
    assert np.array_equal(np.frombuffer(got[0], np.uint32), X.histogram_expected(data))
    state = X.philox_state((3, 4), (2**64 - 2, 0, 0, 0))
    got = dask_backend.dispatch(X.philox4x64(), [state], DispatchConfig(dispatch_elements=4 * 5000))
    assert np.array_equal(np.frombuffer(got[0], np.uint64), X.philox_expected((3, 4), (2**64 - 2, 0, 0, 0), 5000))


def test_unpartitioned_programs_run_whole_and_errors_match(dask_backend):
    a = np.arange(4096, dtype=np.uint32)
    body = [Node.store("o", GX, Expr.load("a", GX) * 3), Node.barrier(MemoryOrdering.GRID_SYNC),
            Node.store("p", GX, Expr.load("o", (GX + 1) % 4096))]
    p = _prog(body, BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U), BufferDecl.output("p", 2, U))
    assert dask_backend.dispatch(p, [a]) == reference.run(p, [a])
    assert "grid_sync" in dask_backend.last_decision.explain()
    div = _prog([Node.store("o", GX, 100 / Expr.load("a", GX))], BufferDecl.read("a", 0, DataType.I32),
                BufferDecl.output("o", 1, DataType.I32))
    with pytest.raises(DispatchFailed) as err:
        dask_backend.dispatch(div, [np.arange(-3, 300, dtype=np.int32)])
    assert err.value.reason == "division"
    with pytest.raises(InvalidInput):
        dask_backend.dispatch(saxpy_program(), [a, a])          # u32 arrays for f32 buffers


def test_float_atomics_run_whole_on_one_worker_with_the_exact_bytes(dask_backend):
    """S36: a dispatch with float atomics is not split (its total is rounded once) and gives
    the reference's bytes, equal to math.fsum's exact sum rounded once, whatever the order."""
    from float_model import model_add

    rng = np.random.default_rng(36)
    n, slots = 50_000, 100
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    ix = rng.integers(0, slots, n).astype(np.uint32)
    p = _prog([Node.if_(GX.lt(Expr.buf_len("x")),
                        [Node.expr(Expr.atomic(AtomicOp.ADD, "out", Expr.load("ix", GX), Expr.load("x", GX)))])],
              BufferDecl.read("x", 0, DataType.F32), BufferDecl.read("ix", 1, U),
              BufferDecl.output("out", 2, DataType.F32, slots), wg=256)
    perm = rng.permutation(n)
    got = dask_backend.dispatch(p, [x[perm], ix[perm]])
    assert "float atomics on 'out'" in dask_backend.last_decision.explain()
    assert got == reference.run(p, [x, ix])
    assert np.array_equal(np.frombuffer(got[0], np.uint32),
                          model_add(DataType.F32, np.zeros(slots, np.uint32), ix, x.view(np.uint32)))


def test_a_worker_killed_mid_dispatch_changes_nothing_but_time(dask_backend):
    trips = 3000
    body = [Node.let_bind("acc", Expr.load("a", GX)),
            Node.loop("i", 0, trips, [Node.assign("acc", Expr.var("acc") * 1664525 + 1013904223)]),
            Node.store("o", GX, Expr.var("acc"))]
    p = _prog(body, BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U), wg=64)
    a = np.arange(1 << 17, dtype=np.uint32)
    want = reference.run(p, [a])
    result: dict = {}
    worker = dask_backend.workers()[1]
    t = threading.Thread(target=lambda: result.setdefault("out", dask_backend.dispatch(p, [a])))
    t.start()
    time.sleep(0.6)
    os.kill(worker["pid"], signal.SIGKILL)       # the nanny restarts it; its tasks re-run elsewhere
    t.join(240)
    assert result.get("out") == want
    dask_backend._workers = None                 # the restarted worker has a new pid


def test_distributed_conformance_shards_over_the_workers():
    from vyre.conform.distributed import run_cluster

    reports, workers = run_cluster("local", random=12, seed=5)
    assert workers == 2 and reports
    assert all(r.ok for r in reports), [(x.name, x.detail) for r in reports for x in r.results if x.status == "fail"]
    assert sum(len(r.results) for r in reports) >= 12


def test_every_contract_entry_point_gives_the_same_bytes_and_errors(dask_backend):
    """dispatch, borrowed, timed, into, async and a compiled pipeline: the same bytes as the
    reference, and the same error for a wrong-dtype input, on a partitioned program."""
    from vyre.driver import pipeline as P

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 20_000)).astype(np.float32)
    prog = saxpy_program()
    want = reference.run(prog, [x, y])
    into: list[bytes] = []
    dask_backend.dispatch_borrowed_into(prog, [x, y], None, into)
    pending = dask_backend.dispatch_async(prog, [x, y])
    x_before = x.copy()
    x[:] = 0                                      # changing the input after the call changes nothing
    got = {"dispatch": dask_backend.dispatch(prog, [x_before, y]),
           "borrowed": dask_backend.dispatch_borrowed(prog, [x_before, y]),
           "timed": dask_backend.dispatch_borrowed_timed(prog, [x_before, y]).outputs,
           "into": into, "async": pending.await_result(120),
           "pipeline": P.compile(dask_backend, prog).dispatch([x_before, y])}
    assert {k: v == want for k, v in got.items()} == dict.fromkeys(got, True)
    bad = [x_before.astype(np.float64), y]
    calls = [lambda: dask_backend.dispatch(prog, bad), lambda: dask_backend.dispatch_borrowed(prog, bad),
             lambda: dask_backend.dispatch_async(prog, bad).await_result(60),
             lambda: P.compile(dask_backend, prog).dispatch(bad)]
    for call in calls:
        with pytest.raises(InvalidInput, match="Fix:"):
            call()


def test_program_bytes_lost_on_the_cluster_are_sent_again(dask_backend):
    """The wire bytes scattered once per program can be lost with the workers holding them
    (a restart): the dispatch scatters them again instead of failing."""
    x = np.arange(5000, dtype=np.float32)
    want = reference.run(saxpy_program(), [x, x])
    assert dask_backend.dispatch(saxpy_program(), [x, x]) == want
    dask_backend.client.cancel(list(dask_backend._wires.values()))
    assert dask_backend.dispatch(saxpy_program(), [x, x]) == want


def test_capabilities_are_what_every_worker_runs():
    """The record is read from the workers' descriptions: the ops all of them run and the
    smallest of each limit (no cluster: two described workers)."""
    from vyre.drivers.dask.backend import DaskBackend

    b = object.__new__(DaskBackend)
    b._workers = [
        {"backend": "opencl", "device": "cpu", "ops": ["vyre.bin_op.add", "vyre.bin_op.sub"], "max_buffer": 1 << 30,
         "max_wg": [1024, 64, 64], "max_inv": 1024, "max_groups": 65535, "max_shared": 65536},
        {"backend": "reference", "device": "numpy", "ops": ["vyre.bin_op.add", "vyre.un_op.sin"], "max_buffer": 1 << 20,
         "max_wg": [256, 256, 8], "max_inv": 4096, "max_groups": 2**31 - 1, "max_shared": 16384},
    ]
    b.caps = b._capabilities()
    assert b.supported_ops() == frozenset({"vyre.bin_op.add"})
    assert b.max_workgroup_size() == (256, 64, 8) and b.max_compute_invocations_per_workgroup() == 1024
    assert b.max_storage_buffer_bytes() == 1 << 20 and b.max_compute_workgroups_per_dimension() == 65535
    assert b.is_distributed() and b.supports_speculation() and not b.supports_async_compute()
    assert b.subgroup_size() is None and b.id() == "dask"
    assert b.device_profile().device_name == "2 Dask workers (opencl: cpu, reference: numpy)"
    assert b.device_profile().max_shared_memory_bytes == 16384 and b.device_profile().has_shared_memory
