"""Differential testing: hypothesis-generated programs (divergent control flow, loops,
early returns, workgroup memory and barriers, atomics, grid_sync) give the reference's bytes
on every available backend.

Each program is a compile on OpenCL, wgpu and CUDA, so there the tests take a smaller sample
(tests/sample.py; ``VYRE_TEST_SAMPLE=full`` takes the whole one): `make test` also runs
`vyre conform` on OpenCL (200 random programs) and wgpu (100), the same generator over more programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vyre.conform.generator import GenOptions, options_for, random_program

from helpers import run_checked
from sample import examples

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
DEEP = GenOptions(max_stmts=3, max_depth=4, workgroup=False, grid_sync=False, atomics=False)


def _check_generated(backend, options: GenOptions | None, whole: int, compiled: int) -> None:
    """Generated programs within what ``backend`` runs give the reference's bytes there:
    ``whole`` of them, ``compiled`` where each is a compile (the options are narrowed to the
    backend once, not per example)."""
    opts = options_for(backend, options)

    @settings(max_examples=examples(backend, whole, compiled), deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(SEEDS)
    def check(seed):
        program, inputs = random_program(seed, opts)
        run_checked(backend, program, inputs)

    check()


def test_generated_programs_match_reference(backend):
    _check_generated(backend, None, 40, 12)


def test_deeply_divergent_elementwise_programs_match_reference(backend):
    _check_generated(backend, DEEP, 25, 8)


def test_generator_programs_are_valid_and_deterministic():
    from vyre.conform.generator import random_program
    from vyre.ir import fingerprint, validate

    for seed in range(200):
        p, ins = random_program(seed)
        assert validate(p) == [], seed
        q, ins2 = random_program(seed)
        assert fingerprint(p) == fingerprint(q)
        assert all(x.tobytes() == y.tobytes() for x, y in zip(ins, ins2))
    pytest.importorskip("hypothesis")
