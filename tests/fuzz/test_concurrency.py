"""Concurrency: 32 threads over every entry point of every backend, with timeouts, asserting
bytes and error isolation; and several processes compiling and dispatching against one cache
directory while another process corrupts it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from vyre import reference
from vyre.driver import Batch, DispatchConfig, DispatchFailed, persistent
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import GX, require_cancellable, run_threads, slow_program, spin_trips

I = DataType.I32


def _prog(k: int) -> Program:
    # i32 division: a zero divisor is an error of that dispatch only
    return Program.wrapped([BufferDecl.read("a", 0, I), BufferDecl.read("d", 1, I, 1), BufferDecl.output("o", 2, I)], 64,
                           [Node.store("o", GX, (Expr.load("a", GX) * Expr.i32(k)) // Expr.load("d", 0))])


def test_32_threads_every_entry_point_bytes_and_error_isolation(backend):
    require_cancellable(backend)
    a = np.arange(2000, dtype=np.int32) - 1000
    ok_d, bad_d = np.array([7], np.int32), np.array([0], np.int32)
    slow_in = [np.arange(1 << 12, dtype=np.uint32), np.array([spin_trips(backend)], np.uint32)]
    failures: list[str] = []
    counts = {"ok": 0, "err": 0, "timeout": 0}
    lock = threading.Lock()

    def entry(name, prog, ins, cfg=None):
        b = backend
        if name == "sync":
            return b.dispatch(prog, ins, cfg)
        if name == "timed":
            return b.dispatch_borrowed_timed(prog, ins, cfg).outputs
        if name == "async":
            return b.dispatch_async(prog, ins, cfg).await_result()
        if name == "pipeline":
            return P.compile(b, prog).dispatch(ins, cfg)
        res = [b.allocate_resident(x.nbytes) for x in ins] + [b.allocate_resident(ins[0].nbytes)]
        try:
            for r, x in zip(res, ins):
                b.upload_resident(r, x)
            if name == "resident":
                b.dispatch_resident_timed(prog, res, cfg)
            elif name == "bound":
                h = persistent.bind(b, prog, res, cfg)
                h.run()
                h.release()
            else:
                Batch(b).add(prog, res, cfg).run()
            return [b.read_resident(res[-1])]
        finally:
            for r in res:
                b.free_resident(r)

    names = ["sync", "timed", "async", "pipeline", "resident", "bound", "batch"]

    def worker(t: int):
        rng = np.random.default_rng(t)
        for it in range(6):
            name = names[(t + it) % len(names)]
            k = int(rng.integers(1, 50))
            try:
                if it % 3 == 2 and name in ("sync", "timed", "async", "resident"):
                    try:
                        t0 = time.perf_counter()
                        entry(name, slow_program(), slow_in, DispatchConfig(timeout=0.05))
                        raise AssertionError(f"{name}: no timeout after {time.perf_counter() - t0:.3f} s")
                    except DispatchFailed:
                        with lock:
                            counts["timeout"] += 1
                    continue
                bad = (t + it) % 4 == 0
                ins = [a, bad_d if bad else ok_d]
                try:
                    got = entry(name, _prog(k), ins)
                    if bad:
                        raise AssertionError(f"{name}: a division by zero was lost")
                    want = reference.run(_prog(k), ins)
                    if got != want:
                        raise AssertionError(f"{name}: wrong bytes")
                    with lock:
                        counts["ok"] += 1
                except DispatchFailed as err:
                    if not bad or "division" not in str(err):
                        raise AssertionError(f"{name}: spurious error {err}") from None
                    with lock:
                        counts["err"] += 1
            except Exception as exc:  # anything else is a finding too
                with lock:
                    failures.append(f"{type(exc).__name__}: {exc}")

    run_threads(worker, [(t,) for t in range(32)], timeout=300)
    assert not failures, failures[:5]
    assert counts["ok"] and counts["err"] and counts["timeout"]


CHILD = r"""
import os, sys, numpy as np
from vyre.driver import acquire
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
b = acquire(sys.argv[1])
gx = Expr.gid_x()
for k in range(int(sys.argv[2]), int(sys.argv[2]) + 6):
    p = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                        [Node.store("o", gx, Expr.load("a", gx) * (1000 + k % 3) + k % 3)])
    a = np.arange(300, dtype=np.uint32)
    out = np.frombuffer(b.dispatch(p, [a])[0], np.uint32)
    assert (out == a * (1000 + k % 3) + k % 3).all(), k
print("ok")
"""

CORRUPTOR = r"""
import os, sys, time, random
root = sys.argv[1]
rng = random.Random(0)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                data = bytearray(open(p, 'rb').read())
                if data and rng.random() < 0.5:
                    data[rng.randrange(len(data))] ^= 0xFF
                    open(p, 'wb').write(data[: rng.randrange(len(data) + 1)])
                elif rng.random() < 0.2:
                    os.unlink(p)
            except OSError:
                pass
    time.sleep(0.01)
"""


@pytest.mark.parametrize("backend_id", ["opencl", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_processes_share_a_cache_directory_while_it_is_corrupted(backend_id, tmp_path):
    from conftest import get_backend

    get_backend(backend_id)
    env = dict(os.environ, VYRE_CACHE_DIR=str(tmp_path / "cache"), VYRE_KEY_DIR=str(tmp_path / "keys"))
    cwd = Path(__file__).parent.parent.parent
    corruptor = subprocess.Popen([sys.executable, "-c", CORRUPTOR, str(tmp_path / "cache"), "20"], env=env)
    try:
        kids = [subprocess.Popen([sys.executable, "-c", CHILD, backend_id, str(i)], env=env, cwd=cwd,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
        for kid in kids:
            out, err = kid.communicate(timeout=240)
            assert kid.returncode == 0 and "ok" in out, err[-2000:]
    finally:
        corruptor.kill()
        corruptor.wait()
