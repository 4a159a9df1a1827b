"""Routing picks a backend per program (ops, capabilities, persisted timings); persistent
bindings replay resident dispatches without re-packing; the work-queue ring model."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vyre.driver import (
    BackendRegistration,
    acquire_preferred_dispatch_backend,
    register,
    unregister,
)
from vyre.driver.persistent import GenericBinding, QueueFull, WorkQueue, bind
from vyre.driver.routing import Router
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import GX, MockBackend, as_u32, prog

U = DataType.U32


class Wide(MockBackend, external=True):
    def id(self):
        return "wide"

    def max_workgroup_size(self):
        return (1024, 1024, 64)

    def max_compute_invocations_per_workgroup(self):
        return 1024


def test_router_prefers_precedence_then_measured_timings(tmp_path, monkeypatch, opencl):
    monkeypatch.delenv("VYRE_BACKEND", raising=False)
    register(BackendRegistration("wide", 1, Wide))  # best precedence of all
    try:
        router = Router(tmp_path / "t.json")
        d = router.choose(prog())
        assert d.backend == "wide" and "precedence" in d.reasons["wide"]
        assert "reference oracle" in d.reasons["reference"]
        times = router.measure(prog(), [np.arange(64, dtype=np.uint32)])
        assert set(times) >= {"wide", "opencl"}
        d2 = Router(tmp_path / "t.json").choose(prog())   # a new router reads the persisted timings
        assert d2.backend == min(times, key=times.get) and "measured" in d2.reasons[d2.backend]
        # the default router (nothing measured in this test's cache dir) follows precedence
        assert acquire_preferred_dispatch_backend(prog()).id() == "wide"
    finally:
        unregister("wide")


def test_router_skips_backends_that_cannot_run_the_program(tmp_path, opencl):
    big = Program.wrapped([BufferDecl.output("o", 0, U, 8)], 8192, [Node.store("o", GX, 1)])
    d = Router(tmp_path / "t.json").choose(big)
    assert d.backend != "opencl" and "cannot run it" in d.reasons["opencl"]


def test_corrupt_timings_are_ignored(tmp_path, opencl):
    path = tmp_path / "t.json"
    path.write_text("{not json")
    assert Router(path).choose(prog()).backend is not None


def test_persistent_binding_replays_without_repacking(opencl):
    p = Program.wrapped([BufferDecl.read_write("x", 0, U)], 64, [Node.store("x", GX, Expr.load("x", GX) * 3 + 1)])
    r = opencl.allocate_resident(4 * 100)
    opencl.upload_resident(r, np.zeros(100, np.uint32))
    bound = bind(opencl, p, [r])
    assert not isinstance(bound, GenericBinding)
    for _ in range(4):
        bound.launch()
    bound.run()
    want = 0
    for _ in range(5):
        want = want * 3 + 1
    assert (as_u32(opencl.read_resident(r)) == want).all()


def test_generic_binding_for_backends_without_native_packing():
    assert isinstance(bind(MockBackend(), prog(), []), GenericBinding)


def test_work_queue_is_a_fifo_ring():
    q = WorkQueue(3)
    assert q.claim() is None
    assert [q.enqueue(i) for i in "abc"] == [0, 1, 2]
    with pytest.raises(QueueFull, match="Fix:"):
        q.enqueue("d")
    slot, item = q.claim()
    assert (slot, item) == (0, "a")
    with pytest.raises(QueueFull):
        q.enqueue("d")  # slot 0 is claimed, not done
    q.done(slot)
    assert q.enqueue("d") == 0
    assert [q.claim()[1] for _ in range(3)] == ["b", "c", "d"]
    with pytest.raises(Exception, match="not claimed"):
        q.done(5)
    q.done(slot)  # slot 0 holds "d", claimed above
    with pytest.raises(Exception, match="not claimed"):
        q.done(slot)  # ... and can be marked done only once


def test_work_queue_across_threads_processes_each_item_once():
    q = WorkQueue(8)
    seen, lock = [], threading.Lock()
    stop = threading.Event()

    def worker():
        while not stop.is_set() or len(q):
            got = q.claim()
            if got is None:
                continue
            with lock:
                seen.append(got[1])
            q.done(got[0])

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    sent = 0
    while sent < 500:
        try:
            q.enqueue(sent)
            sent += 1
        except QueueFull:
            pass
    stop.set()
    for t in threads:
        t.join(timeout=10)
    assert sorted(seen) == list(range(500))
