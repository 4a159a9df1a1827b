"""Shadow diffing, observability counters, migration registry, binding plans."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import reference
from vyre.driver import (
    BindingPlan,
    BindingRole,
    DivergenceError,
    InvalidProgram,
    ShadowedPipeline,
    migration,
    observability,
)
from vyre.driver import pipeline as P
from vyre.driver.shadow import assert_exhaustive_byte_identity, compare_outputs
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, UnOp

from helpers import MockBackend, prog


class OffByOne(MockBackend, external=True):
    def id(self):
        return "off_by_one"

    def dispatch(self, program, inputs, config=None):
        out = reference.run(program, inputs, config)
        if np.asarray(inputs[0]).nbytes > 8:
            b = bytearray(out[0])
            b[9] ^= 1
            out[0] = bytes(b)
        return out


def ref_runner(inputs, config=None):
    return reference.run(prog(), inputs, config)


def test_shadow_raises_on_the_first_differing_byte():
    shadow = ShadowedPipeline(P.compile(OffByOne(), prog()), ref_runner)
    shadow.dispatch([np.arange(2, dtype=np.uint32)])
    with pytest.raises(DivergenceError) as err:
        shadow.dispatch([np.arange(4, dtype=np.uint32)])
    ev = err.value.event
    assert (ev.buffer_index, ev.buffer_name, ev.offset) == (0, "o", 9)
    assert ev.main_bytes != ev.reference_bytes and "Fix:" in str(err.value)


def test_shadow_records_and_samples_deterministically():
    events = []
    shadow = ShadowedPipeline(P.compile(OffByOne(), prog()), ref_runner, sample_rate=0.25, mode="record",
                              on_event=events.append)
    for _ in range(8):
        shadow.dispatch([np.arange(4, dtype=np.uint32)])
    assert shadow.dispatches == 8 and shadow.compared == 2 and len(events) == 2 == len(shadow.events)


def test_exhaustive_identity_helper():
    cases = [[np.arange(n, dtype=np.uint32)] for n in (1, 2)]
    assert assert_exhaustive_byte_identity(P.compile(MockBackend(), prog()), ref_runner, cases) == 2
    with pytest.raises(DivergenceError):
        assert_exhaustive_byte_identity(P.compile(OffByOne(), prog()), ref_runner, cases + [[np.arange(4, dtype=np.uint32)]])


def test_transcendental_outputs_compare_byte_for_byte():
    """S13: correctly rounded math leaves no ULP budget: one ULP is a divergence."""
    gx = Expr.gid_x()
    p = Program.wrapped([BufferDecl.read("a", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)], 4,
                        [Node.store("o", gx, Expr.un(UnOp.EXP, Expr.load("a", gx)))])
    a = np.float32([1.0]).view(np.uint32)
    assert compare_outputs(p, [(a + 1).astype(np.uint32).tobytes()], [a.tobytes()]) is not None
    assert compare_outputs(p, [a.tobytes()], [a.tobytes()]) is None


def test_observability_counts_dispatches_and_exports(backend):
    observability.reset()
    seen = []
    observability.set_trace_hook(seen.append)
    try:
        backend.dispatch(prog(), [b"\0" * 8])
        with pytest.raises(InvalidProgram):
            backend.dispatch(prog(), [b"\0" * 3])
    finally:
        observability.set_trace_hook(None)
    bid = backend.id()
    snap = observability.snapshot()[bid]
    assert snap["dispatches"] == 2 and snap["errors"] == 1 and sum(snap["latency_buckets_ns"].values()) == 2
    text = observability.prometheus_text()
    assert f'vyre_dispatches_total{{backend="{bid}"}} 2' in text and "vyre_dispatch_seconds_bucket" in text
    assert [e.ok for e in seen] == [True, False]


def test_migration_registry_and_semver():
    migration.deprecate("vyre.old_thing", "0.1.0", "0.3.0", "vyre.new_thing")
    d = migration.deprecation_diagnostic("vyre.old_thing")
    assert d.code == "D001" and "Fix: use vyre.new_thing" in d.message
    assert migration.deprecation_diagnostic("nothing") is None
    with pytest.warns(DeprecationWarning):
        migration.warn_if_deprecated("vyre.old_thing")
    assert migration.is_compatible("0.1.0", "0.1.5") and not migration.is_compatible("0.1.0", "0.2.0")
    assert migration.is_compatible("1.2.0", "1.9.1") and not migration.is_compatible("1.2.0", "1.1.0")


def test_binding_plan_orders_by_binding_and_validates_inputs():
    p = Program.wrapped([BufferDecl.output("o", 5, DataType.U32), BufferDecl.read("a", 2, DataType.U32, 4),
                         BufferDecl.read_write("rw", 3, DataType.F32), BufferDecl.workgroup("w", 8, DataType.U32)],
                        4, [])
    plan = BindingPlan.of(p)
    assert [(s.name, s.role) for s in plan.slots] == [("a", BindingRole.INPUT), ("rw", BindingRole.INPUT_OUTPUT),
                                                      ("o", BindingRole.OUTPUT), ("w", BindingRole.SHARED)]
    assert plan.slots[0].static_byte_len == 16
    assert plan.validate_inputs(p, [b"\0" * 16, b"\0" * 8]) == [16, 8]
    for bad in ([b"\0" * 16], [b"\0" * 12, b""], [b"\0" * 16, b"\0" * 3]):
        with pytest.raises(InvalidProgram, match="Fix:"):
            plan.validate_inputs(p, bad)


def test_a_batch_is_counted_as_its_dispatches():
    from vyre.driver import observability as obs

    events = []
    obs.set_trace_hook(events.append)
    try:
        before = obs.snapshot().get("batch-test", {}).get("dispatches", 0)
        obs.record_dispatches("batch-test", 3, 2_000, True, ("a", "b", "c"))
        obs.record_dispatches("batch-test", 2, 7_000, False, ("z",))
    finally:
        obs.set_trace_hook(None)
    snap = obs.snapshot()["batch-test"]
    assert snap["dispatches"] - before == 5 and snap["errors"] >= 2
    assert [(e.wall_ns, e.ok, e.label) for e in events] == [
        (2_000, True, "a"), (2_000, True, "b"), (2_000, True, "c"), (7_000, False, "z"), (7_000, False, "z")]
