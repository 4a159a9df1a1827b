"""Specialization constants: defaults, baked values, one pipeline per value set, each
byte-identical to the reference with the same config; wire and validation support."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver import DispatchConfig, InvalidProgram
from vyre.driver import pipeline as P
from vyre.driver.specialization import SpecMap, SpecValue
from vyre.ir import (
    BufferDecl,
    DataType,
    Expr,
    Node,
    Program,
    fingerprint,
    spec_constants,
    validate,
    wire,
)

from helpers import GX, as_u32, run_checked

U, F = DataType.U32, DataType.F32


def prog() -> Program:
    k = Expr.spec("K", U, 3)
    s = Expr.spec("S", F, 0.5)
    return Program.wrapped([BufferDecl.read("x", 0, U), BufferDecl.output("o", 1, U), BufferDecl.output("f", 2, F)], 64,
                           [Node.store("o", GX, Expr.load("x", GX) * k + k),
                            Node.store("f", GX, Expr.cast(F, Expr.load("x", GX)) * s)])


def test_defaults_apply_without_specialization(backend):
    x = np.arange(10, dtype=np.uint32)
    o, f = run_checked(backend, prog(), [x])
    assert list(as_u32(o)) == list(x * 3 + 3)
    assert np.array_equal(np.frombuffer(f, np.float32), x.astype(np.float32) * 0.5)


def test_two_spec_values_make_two_pipelines_each_correct(backend):
    x = np.arange(100, dtype=np.uint32)
    c5, c7 = DispatchConfig(specialization={"K": 5}), DispatchConfig(specialization=SpecMap(K=7, S=2.0))
    p5, p7 = P.compile(backend, prog(), c5), P.compile(backend, prog(), c7)
    assert p5 is not p7 and "code_config" in p5.key.differences(p7.key)
    assert list(as_u32(run_checked(backend, prog(), [x], c5)[0])) == list(x * 5 + 5)
    o, f = run_checked(backend, prog(), [x], c7)
    assert list(as_u32(o)) == list(x * 7 + 7)
    assert np.array_equal(np.frombuffer(f, np.float32), x.astype(np.float32) * 2.0)
    assert p5.dispatch([x], c5) == run_checked(backend, prog(), [x], c5)


def test_generated_code_has_the_value_baked_in(opencl):
    from vyre.ir import specialize

    src = opencl.generated_source(specialize(prog(), {"K": 123457}))
    assert "123457u" in src


def test_bad_specialization_values_are_refused(reference_backend):
    x = np.arange(4, dtype=np.uint32)
    for bad in ({"K": 1.5}, {"NOPE": 1}, {"K": -1}):
        with pytest.raises(InvalidProgram, match="Fix:"):
            reference_backend.dispatch(prog(), [x], DispatchConfig(specialization=bad))


def test_spec_constants_round_trip_and_validate():
    p = prog()
    assert wire.decode(wire.encode(p)) == p and validate(p) == []
    assert set(spec_constants(p)) == {"K", "S"}
    clash = Program.wrapped(p.buffers, 64, [*p.body, Node.store("o", GX, Expr.spec("K", U, 4))])
    assert "V026" in {d.code for d in validate(clash)}
    assert fingerprint(p) != fingerprint(clash)


def test_spec_map_is_ordered_hashable_and_typed():
    a, b = SpecMap(A=1, B=-2), SpecMap({"B": -2, "A": 1})
    assert a == b and hash(a) == hash(b) and a.digest() == b.digest() and list(a) == ["A", "B"]
    assert SpecValue.infer(-2).dtype is DataType.I32 and SpecValue.infer(2.5).dtype is F
