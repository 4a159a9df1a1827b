"""The tuner: only workgroup-size-agnostic programs are tuned, tuned dispatches give the
reference's bytes, results persist per device, a corrupt cache means retuning."""

from __future__ import annotations

import numpy as np

from vyre.driver import DispatchConfig, tuner
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

from helpers import GX, run_checked

U, I = DataType.U32, DataType.I32


def saxpy(wg: int = 8) -> Program:
    return Program.wrapped([BufferDecl.read("x", 0, U), BufferDecl.output("o", 1, U)], wg,
                           [Node.let_bind("v", Expr.load("x", GX)),
                            Node.if_(Expr.var("v").gt(5), [Node.store("o", GX, Expr.var("v") * 3)])])


def test_only_size_agnostic_programs_are_tunable():
    assert tuner.tunable(saxpy())
    uses_lid = Program.wrapped(saxpy().buffers, 8, [Node.store("o", GX, Expr.lid_x())])
    shifted = Program.wrapped(saxpy().buffers, 8, [Node.store("o", GX + 1, 1)])
    atomic = Program.wrapped([BufferDecl.read_write("x", 0, U)], 8, [Node.expr(Expr.atomic(AtomicOp.ADD, "x", 0, 1))])
    idiv = Program.wrapped([BufferDecl.read("x", 0, I), BufferDecl.output("o", 1, I)], 8,
                           [Node.let_bind("d", Expr.load("x", GX)), Node.store("o", GX, Expr.i32(7) / Expr.var("d"))])
    for p in (uses_lid, shifted, atomic, idiv):
        assert not tuner.tunable(p)
    assert not tuner.tunable(saxpy(), DispatchConfig(grid_override=(1, 1, 1)))


def test_tuned_dispatch_matches_reference_and_persists(opencl, monkeypatch, tmp_path):
    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VYRE_AUTOTUNER", "on")
    x = np.arange(5000, dtype=np.uint32)
    first = tuner.tune(opencl, saxpy(), [x], repeats=2)
    assert not first.from_cache and set(first.timings_ns) == set(tuner.candidates(opencl.device_profile()))
    assert first.best[0] in first.timings_ns
    assert tuner.tune(opencl, saxpy(), [x]).from_cache
    assert tuner.tuned_config(opencl, saxpy(), [x], None).workgroup_override == first.best
    run_checked(opencl, saxpy(), [x])  # goes through the tuner: bytes unchanged


def test_corrupt_tuning_cache_means_retuning(opencl, monkeypatch, tmp_path):
    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    cache = tuner.cache_for(opencl)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_text("{corrupt")
    cache._data = None
    result = tuner.tune(opencl, saxpy(), [np.arange(100, dtype=np.uint32)], repeats=1)
    assert not result.from_cache


def test_tuner_is_off_by_default(opencl, monkeypatch):
    monkeypatch.delenv("VYRE_AUTOTUNER", raising=False)
    cfg = tuner.tuned_config(opencl, saxpy(), [np.arange(10, dtype=np.uint32)], None)
    assert cfg is None
