"""The conformance runner: a correct backend passes, a deliberately broken one is caught,
minimised and replayable; certificates verify; capability skips are explicit."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from vyre import reference
from vyre.conform import (
    certificate,
    corpus,
    diverges,
    load_repro,
    oob_report,
    run_backend,
    verify_certificate,
)
from vyre.conform.runner import _variants, corpus_digest
from vyre.ir import BinOp, wire
from vyre.ir import expr as E
from vyre.ir import node as N

from helpers import MockBackend


class WrongXor(MockBackend, external=True):
    """Computes BITXOR as BITOR: a realistic codegen bug."""

    def id(self):
        return "wrong_xor"

    def dispatch(self, program, inputs, config=None):
        return reference.run(_swap(program), inputs, config)


def _swap(program):
    from vyre.ir import node as N
    from vyre.ir.program import Program

    def ex(e):
        if isinstance(e, E.Bin):
            op = BinOp.BITOR if e.op is BinOp.BITXOR else e.op
            return E.Bin(op, ex(e.left), ex(e.right))
        for cls, fields in ((E.Un, ("operand",)), (E.Load, ("index",)), (E.Cast, ("value",)),
                            (E.Bitcast, ("value",)), (E.Select, ("cond", "if_true", "if_false")),
                            (E.Fma, ("a", "b", "c"))):
            if isinstance(e, cls):
                return dataclasses.replace(e, **{f: ex(getattr(e, f)) for f in fields})
        return e

    def st(n):
        if isinstance(n, N.Store):
            return N.Store(n.buffer, ex(n.index), ex(n.value))
        if isinstance(n, N.Let | N.Assign):
            return type(n)(n.name, ex(n.value))
        if isinstance(n, N.If):
            return N.If(ex(n.cond), tuple(map(st, n.then)), tuple(map(st, n.otherwise)))
        if isinstance(n, N.Loop):
            return N.Loop(n.var, n.from_, n.to, tuple(map(st, n.body)))
        if isinstance(n, N.Block | N.Region):
            return N.Block(tuple(map(st, n.body)))
        return n

    return Program(program.buffers, program.workgroup_size, tuple(map(st, program.body)), program.functions)


def test_reference_backend_passes_the_whole_corpus(reference_backend):
    report = run_backend(reference_backend, random=5)
    assert report.ok and report.count("pass") == len(corpus()) + 5


def test_broken_backend_is_caught_minimised_and_replayable(tmp_path):
    entries = [e for e in corpus() if e.name in ("bin.bitxor.u32", "bin.add.u32")]
    report = run_backend(WrongXor(), entries=entries, random=12, seed=8, repro_dir=tmp_path, minimise_budget=20)
    fails = [r for r in report.results if r.status == "fail"]
    assert any(r.name == "bin.bitxor.u32" for r in fails)
    assert any(r.name.startswith("random/") for r in fails)
    assert not report.ok
    for r in fails:
        backend_id, program, inputs, config = load_repro(r.repro)
        assert backend_id == "wrong_xor"
        assert diverges(WrongXor(), program, inputs, config) is not None
        assert diverges(MockBackend(), program, inputs, config) is None
    random_fail = next(r for r in fails if r.name.startswith("random/"))
    small = load_repro(random_fail.repro)[1]
    from vyre.conform.generator import random_program

    original = random_program(int(random_fail.name.split("/")[1]))[0]
    assert len(wire.encode(small)) < len(wire.encode(original))


def test_certificates_verify_and_detect_tampering(reference_backend):
    entries = corpus()[:5]
    report = run_backend(reference_backend, entries=entries)
    cert = certificate(report, random=0, seed=0)
    assert cert["corpus_digest"] == corpus_digest() and cert["wire_version"] == wire.VERSION
    ok, why = verify_certificate(json.loads(json.dumps(cert)))
    assert ok, why
    cert["counts"]["pass"] += 1
    assert verify_certificate(cert) == (False, "digest mismatch: the certificate was altered")


def test_missing_capability_is_an_explicit_skip(opencl, reference_backend):
    entries = [e for e in corpus() if e.requires == "subgroup_ops"]
    assert len(entries) >= 10
    report = run_backend(opencl, entries=entries)
    assert all(r.status == "skip" and "subgroup_ops" in r.detail for r in report.results)
    assert run_backend(reference_backend, entries=entries).count("pass") == len(entries)


def test_oob_report_lists_programs_relying_on_masking():
    names = oob_report()
    assert "oob.load_store" in names and "oob.padding_lanes" in names and "bin.add.u32" not in names


def test_witness_sets_contain_boundary_values():
    from vyre.conform.witness import witness_words
    from vyre.ir import DataType

    w = witness_words(DataType.F32, 64, 0)
    for bits in (0x7FC00000, 0xFF800000, 0x00000001, 0x80000000):
        assert bits in w
    assert np.array_equal(w, witness_words(DataType.F32, 64, 0))


def test_a_pooled_run_gives_the_serial_results(monkeypatch, opencl_or_none, reference_backend):
    """Issue 24: from POOL_MIN programs on, workers make the random programs, run the
    reference and build each program (where the device has a compiler); the report is the
    serial run's, case for case, and a worker's build is loaded instead of built again."""
    from vyre.conform import runner

    backend = opencl_or_none or reference_backend
    entries = corpus()[:6] + [e for e in corpus() if e.requires == "subgroup_ops"][:1]
    monkeypatch.setattr(runner, "POOL_MIN", 4)
    pooled = run_backend(backend, entries=entries, random=6, seed=3, workers=2)
    serial = run_backend(backend, entries=entries, random=6, seed=3, workers=1)
    assert [(r.name, r.status, r.detail) for r in pooled.results] == \
        [(r.name, r.status, r.detail) for r in serial.results]
    assert pooled.count("pass") >= 12
    if opencl_or_none is not None:   # the first random program's kernel came from a worker
        from vyre.conform.generator import random_program
        from vyre.driver import pipeline as P

        assert P.compile(backend, random_program(3 * 1_000_003)[0]).compiled.built_from == "disk"


def test_generator_emits_every_correctly_rounded_function_of_two_operands():
    """S13: the random programs the backends are compared on use hypot, pow and atan2."""
    from vyre.conform.generator import random_program
    from vyre.ir import node as N
    from vyre.ir.types import TRANSCENDENTAL

    seen = {e.op for s in range(60) for e in N.program_exprs(random_program(s)[0]) if isinstance(e, E.Bin)}
    assert {op for op in TRANSCENDENTAL if isinstance(op, BinOp)} <= seen


def test_minimiser_variants_keep_each_statements_kind():
    """A shrunk body stays in its statement (a while loop stays a while loop, a region keeps
    its name), and an if may lose its else."""
    inner = (N.Assign("x", E.Var("y")), N.Break())
    body = (N.While(E.Var("c"), inner, 4), N.Region("r", inner), N.If(E.Var("c"), inner, inner))
    variants = list(_variants(body))
    kinds = {type(n) for v in variants for n in v if not isinstance(n, N.Assign | N.Break)}
    assert kinds == {N.While, N.Region, N.If}
    assert (N.While(E.Var("c"), (N.Break(),), 4), *body[1:]) in variants
    assert (*body[:2], N.If(E.Var("c"), inner, ())) in variants
    assert all(n.name == "r" for v in variants for n in v if isinstance(n, N.Region))
