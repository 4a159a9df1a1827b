"""Differential testing: hypothesis-generated programs (divergent control flow, loops,
early returns, workgroup memory and barriers, atomics, grid_sync) give the reference's bytes
on every available backend."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vyre.conform.generator import GenOptions, options_for, random_program

from helpers import run_checked

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
DEEP = GenOptions(max_stmts=3, max_depth=4, workgroup=False, grid_sync=False, atomics=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(SEEDS)
def test_generated_programs_match_reference(backend, seed):
    program, inputs = random_program(seed, options_for(backend))   # within what the backend runs
    run_checked(backend, program, inputs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(SEEDS)
def test_deeply_divergent_elementwise_programs_match_reference(backend, seed):
    program, inputs = random_program(seed, options_for(backend, DEEP))
    run_checked(backend, program, inputs)


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
