"""The frozen contract: a MockBackend with only `id` + `dispatch` proves every default; a
FullBackend overriding everything proves each override is reachable; sealing holds."""

from __future__ import annotations

import inspect
import re
import time
from pathlib import Path

import numpy as np
import pytest

from vyre import reference
from vyre.driver import (
    CompiledPipeline,
    DeviceProfile,
    DispatchConfig,
    DispatchFailed,
    InvalidProgram,
    PendingDispatch,
    ReadyPending,
    Resource,
    TimedDispatchResult,
    UnsupportedFeature,
    VyreBackend,
    core_supported_ops,
)
from vyre.driver.backend import PassthroughPipeline, SealedContractError
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import GX, MockBackend, prog

U = DataType.U32
_SEED_PATH = Path("../shared/seeds/vyre_backend.rs")
SEED = _SEED_PATH.read_text() if _SEED_PATH.exists() else ""


def test_every_seed_method_exists_with_snake_case_names():
    # trait methods are the lines that start with "    fn " (doc-comment examples are "/// ...")
    names = set(re.findall(r"^    fn (\w+)\(", SEED, re.M)) - {"__vyre_backend_sealed"} if SEED else set()
    expected = {"id", "version", "supported_ops", "dispatch", "dispatch_borrowed", "dispatch_borrowed_timed",
                "dispatch_borrowed_into", "allocate_resident", "upload_resident", "free_resident",
                "dispatch_resident_timed", "compile_native", "compile_native_shared", "pipeline_cache_snapshot",
                "dispatch_async", "dispatch_borrowed_async", "supports_subgroup_ops", "supports_f16",
                "supports_bf16", "supports_tensor_cores", "supports_async_compute", "supports_indirect_dispatch",
                "supports_speculation", "supports_persistent_thread_dispatch", "supports_grid_sync",
                "is_distributed", "max_workgroup_size", "max_compute_workgroups_per_dimension",
                "max_compute_invocations_per_workgroup", "subgroup_size", "max_storage_buffer_bytes",
                "device_profile", "prepare", "flush", "shutdown", "device_lost", "try_recover"}
    assert names == expected or not SEED
    for name in expected:
        assert callable(getattr(VyreBackend, name)), name
    assert VyreBackend.__abstractmethods__ == frozenset({"id", "dispatch"})


def test_mock_backend_gets_every_conservative_default():
    m = MockBackend()
    assert m.version() == "unspecified"
    assert m.supported_ops() == core_supported_ops()
    for q in ("supports_subgroup_ops", "supports_f16", "supports_bf16", "supports_tensor_cores",
              "supports_async_compute", "supports_indirect_dispatch", "supports_speculation",
              "supports_persistent_thread_dispatch", "supports_grid_sync", "is_distributed"):
        assert getattr(m, q)() is False, q
    assert m.max_workgroup_size() == (1, 1, 1)
    assert m.max_compute_workgroups_per_dimension() == 1
    assert m.max_compute_invocations_per_workgroup() == 1
    assert m.subgroup_size() is None
    assert m.max_storage_buffer_bytes() == 0
    prof = m.device_profile()
    assert isinstance(prof, DeviceProfile) and prof.backend == "mock" and prof.max_native_int_width == 32
    assert m.pipeline_cache_snapshot() is None
    assert m.compile_native(prog()) is None and m.compile_native_shared(prog()) is None
    assert m.prepare() is None and m.flush() is None and m.shutdown() is None
    assert m.device_lost() is False
    for call in (lambda: m.try_recover(), lambda: m.allocate_resident(4),
                 lambda: m.upload_resident(None, b""), lambda: m.free_resident(None),
                 lambda: m.dispatch_resident_timed(prog(), [])):
        with pytest.raises(UnsupportedFeature, match="Fix:"):
            call()


def test_vyre_additions_are_declared_with_defaults():
    """bind_resident, dispatch_device, reads_device_arrays and generated_source are part of the
    contract (no duck typing): a backend with only id + dispatch gets working defaults."""
    from vyre.driver.persistent import GenericBinding, bind

    m = MockBackend()
    assert m.generated_source(prog()) is None
    assert m.reads_device_arrays() is False
    with pytest.raises(UnsupportedFeature, match="Fix:"):
        m.dispatch_device(prog(), [np.arange(4, dtype=np.uint32)])
    binding = bind(m, prog(), [])
    assert isinstance(binding, GenericBinding)
    with pytest.raises(UnsupportedFeature, match="Fix:"):   # it goes through dispatch_resident_timed
        binding.run()


def test_mock_backend_wrappers_delegate_to_dispatch():
    m = MockBackend()
    a = np.arange(5, dtype=np.uint32)
    want = reference.run(prog(), [a])
    assert m.dispatch_borrowed(prog(), [memoryview(a.tobytes())]) == want
    timed = m.dispatch_borrowed_timed(prog(), [a])
    assert isinstance(timed, TimedDispatchResult) and timed.outputs == want and timed.wall_ns > 0
    assert timed.device_ns is None and timed.enqueue_ns is None and timed.wait_ns is None
    out = ["stale"]
    m.dispatch_borrowed_into(prog(), [a], None, out)
    assert out == want
    for pending in (m.dispatch_async(prog(), [a]), m.dispatch_borrowed_async(prog(), [a])):
        assert isinstance(pending, ReadyPending) and pending.is_ready() and pending.await_result() == want
    assert m.calls == 5


class FullPipeline(CompiledPipeline, external=True):
    def __init__(self, program):
        self._p = program

    @property
    def program(self):
        return self._p

    def backend_id(self):
        return "full"

    def dispatch(self, inputs, config=None):
        return reference.run(self._p, inputs, config)


class _Later(PendingDispatch):
    def __init__(self, outputs):
        self.outputs, self.polls = outputs, 0

    def is_ready(self):
        self.polls += 1
        return self.polls > 1

    def await_result(self, timeout=None):
        return self.outputs


class FullBackend(VyreBackend, external=True):
    def __init__(self):
        self.hits = []
        self.store: dict[int, bytes] = {}

    def id(self): return "full"
    def version(self): return "9.9.9"
    def supported_ops(self): return frozenset({"vyre.node.store"})
    def dispatch(self, program, inputs, config=None): return reference.run(program, inputs, config)
    def dispatch_borrowed(self, program, inputs, config=None):
        self.hits.append("borrowed")
        return self.dispatch(program, inputs, config)
    def dispatch_borrowed_timed(self, program, inputs, config=None):
        return TimedDispatchResult(self.dispatch(program, inputs, config), 5, 3, 1, 2)
    def dispatch_borrowed_into(self, program, inputs, config, outputs):
        outputs[:] = ["into"]
    def allocate_resident(self, n): return Resource("full", id(self), n)
    def upload_resident(self, r, data): self.store[self.own(r).serial] = bytes(data)
    def free_resident(self, r): self.own(r).freed = True
    def dispatch_resident_timed(self, program, resources, config=None):
        return TimedDispatchResult([self.store[r.serial] for r in resources], 1, 1)
    def compile_native(self, program, config=None): return FullPipeline(program)
    def compile_native_shared(self, program, config=None):
        self.hits.append("shared")
        return FullPipeline(program)
    def pipeline_cache_snapshot(self):
        from vyre.driver.pipeline import PipelineCacheSnapshot
        return PipelineCacheSnapshot(1, 2, 3)
    def dispatch_async(self, program, inputs, config=None): return _Later(self.dispatch(program, inputs, config))
    def dispatch_borrowed_async(self, program, inputs, config=None): return _Later(["b"])
    def supports_subgroup_ops(self): return True
    def supports_f16(self): return True
    def supports_bf16(self): return True
    def supports_tensor_cores(self): return True
    def supports_async_compute(self): return True
    def supports_indirect_dispatch(self): return True
    def supports_speculation(self): return True
    def supports_persistent_thread_dispatch(self): return True
    def supports_grid_sync(self): return True
    def is_distributed(self): return True
    def max_workgroup_size(self): return (64, 8, 2)
    def max_compute_workgroups_per_dimension(self): return 999
    def max_compute_invocations_per_workgroup(self): return 512
    def subgroup_size(self): return 32
    def max_storage_buffer_bytes(self): return 1 << 20
    def device_profile(self): return DeviceProfile("full", compute_units=7)
    def prepare(self): self.hits.append("prepare")
    def flush(self): self.hits.append("flush")
    def shutdown(self): self.hits.append("shutdown")
    def device_lost(self): return True
    def try_recover(self): self.hits.append("recover")


def test_full_backend_reaches_every_override():
    f = FullBackend()
    a = np.arange(3, dtype=np.uint32)
    assert f.version() == "9.9.9" and f.supported_ops() == {"vyre.node.store"}
    assert f.dispatch_borrowed(prog(), [a]) == reference.run(prog(), [a]) and f.hits == ["borrowed"]
    assert f.dispatch_borrowed_timed(prog(), [a]).device_ns == 3
    out: list = []
    f.dispatch_borrowed_into(prog(), [a], None, out)
    assert out == ["into"]
    r = f.allocate_resident(8)
    f.upload_resident(r, b"12345678")
    assert f.dispatch_resident_timed(prog(), [r]).outputs == [b"12345678"]
    f.free_resident(r)
    with pytest.raises(InvalidProgram, match="freed"):
        f.upload_resident(r, b"")
    assert isinstance(f.compile_native(prog()), FullPipeline)
    f.compile_native_shared(prog())
    assert f.pipeline_cache_snapshot().entries == 3
    p = f.dispatch_async(prog(), [a])
    assert not p.is_ready() and p.is_ready()
    assert f.dispatch_borrowed_async(prog(), [a]).await_result() == ["b"]
    assert all(getattr(f, q)() for q in ("supports_subgroup_ops", "supports_f16", "supports_bf16",
                                         "supports_tensor_cores", "supports_async_compute",
                                         "supports_indirect_dispatch", "supports_speculation",
                                         "supports_persistent_thread_dispatch", "supports_grid_sync",
                                         "is_distributed", "device_lost"))
    assert (f.max_workgroup_size(), f.max_compute_workgroups_per_dimension(),
            f.max_compute_invocations_per_workgroup(), f.subgroup_size(), f.max_storage_buffer_bytes()) == \
        ((64, 8, 2), 999, 512, 32, 1 << 20)
    assert f.device_profile().compute_units == 7
    f.prepare(), f.flush(), f.shutdown(), f.try_recover()
    assert f.hits[-4:] == ["prepare", "flush", "shutdown", "recover"]


def test_resources_refuse_another_backend():
    f, g = FullBackend(), FullBackend()
    r = f.allocate_resident(4)
    with pytest.raises(InvalidProgram, match="does not belong"):
        g.upload_resident(r, b"1234")


def test_sealed_without_opt_in_fails_with_fix():
    with pytest.raises(SealedContractError, match="external=True"):
        class Rogue(VyreBackend):
            def id(self): return "rogue"
            def dispatch(self, p, i, c=None): return []
    with pytest.raises(SealedContractError, match="Fix:"):
        class RoguePipe(CompiledPipeline):
            pass

    class Child(MockBackend):  # inherits the parent's opt-in
        pass

    assert Child().id() == "mock"


def test_passthrough_pipeline_is_bit_identical():
    m = MockBackend()
    pipe = PassthroughPipeline(m, prog(), None)
    a = np.arange(9, dtype=np.uint32)
    assert pipe.dispatch([a]) == m.dispatch(prog(), [a])
    assert pipe.dispatch_timed([a]).outputs == m.dispatch(prog(), [a])


def test_max_output_bytes_is_refused_before_anything_runs(backend):
    a = np.arange(100, dtype=np.uint32)
    with pytest.raises(InvalidProgram, match="max_output_bytes"):
        backend.dispatch(prog(), [a], DispatchConfig(max_output_bytes=399))
    assert len(backend.dispatch(prog(), [a], DispatchConfig(max_output_bytes=400))[0]) == 400


def test_reference_driver_is_cancelled_cooperatively(reference_backend):
    big = np.zeros(1 << 18, np.uint32)
    body = [Node.let_bind("x", Expr.load("a", GX))] + [Node.assign("x", Expr.var("x") * 3 + 1)] * 400 + \
        [Node.store("o", GX, Expr.var("x"))]
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 64, body)
    t = time.perf_counter()
    with pytest.raises(DispatchFailed, match="timeout"):
        reference_backend.dispatch(p, [big], DispatchConfig(timeout=0.05))
    assert time.perf_counter() - t < 1.0


def test_fixpoint_iterations_feed_read_write_outputs_back(backend):
    p = Program.wrapped([BufferDecl.read_write("x", 0, U)], 4,
                        [Node.store("x", GX, Expr.select(Expr.load("x", GX).lt(10), Expr.load("x", GX) + 1,
                                                         Expr.load("x", GX)))])
    out = backend.dispatch(p, [np.array([0, 5, 20], np.uint32)], DispatchConfig(fixpoint_iterations=100))
    assert list(np.frombuffer(out[0], np.uint32)) == [10, 10, 20]


def test_dispatch_config_rejects_invalid_values_with_fix():
    for kwargs in ({"fixpoint_iterations": 0}, {"workgroup_override": (0, 1, 1)}, {"timeout": -1},
                   {"max_output_bytes": -5}, {"grid_override": (1, 1, 1), "dispatch_grid": (1, 1, 1)}):
        with pytest.raises(InvalidProgram, match="Fix:"):
            DispatchConfig(**kwargs)
    c = DispatchConfig(label="x", timeout=1.0)
    assert c.code_key() == DispatchConfig().code_key()
    assert DispatchConfig(ulp_budget=2).code_key() != c.code_key()
    with pytest.raises(AttributeError):
        c.label = "y"  # type: ignore[misc]
    assert "profile" in inspect.signature(DispatchConfig).parameters
