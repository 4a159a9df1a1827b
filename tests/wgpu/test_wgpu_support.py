"""wgpu's supported_ops() and refusals tell the truth: it leaves out only the subgroup
operations, refuses only those and 64-bit atomics (with a Fix naming a backend that runs
them), runs the correctly rounded transcendentals, and conformance generates programs with
every type and every transcendental for it (on a CPU adapter every one but pow and atan2,
whose kernels compile there for many seconds each)."""

from __future__ import annotations

import pytest

from conftest import get_backend
from vyre.conform.generator import SLOW_ON_CPU_ADAPTERS, WIDE, options_for
from vyre.driver import UnsupportedFeature
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, UnOp
from vyre.ir.ops import all_op_ids
from vyre.ir.types import TRANSCENDENTAL


@pytest.fixture
def wgpu():
    return get_backend("wgpu")


def test_supported_ops_leave_out_only_subgroups(wgpu):
    missing = all_op_ids() - set(wgpu.supported_ops())
    assert missing == {op for op in all_op_ids() if op.startswith("vyre.subgroup.")}
    assert all(f"vyre.{'un' if isinstance(op, UnOp) else 'bin'}_op.{op.value}" in wgpu.supported_ops()
               for op in TRANSCENDENTAL)


@pytest.mark.parametrize("t", [DataType.U64, DataType.I64], ids=lambda t: t.value)
def test_64_bit_atomics_are_refused_with_a_fix(wgpu, t):
    p = Program.wrapped([BufferDecl.output("o", 0, t, 4)], 1,
                        [Node.expr(Expr.atomic(AtomicOp.ADD, "o", Expr.gid_x(), Expr.lit(t, 1)))])
    with pytest.raises(UnsupportedFeature, match="64-bit atomics") as err:
        wgpu.dispatch(p, [])
    assert "cuda" in str(err.value) and "Fix:" in str(err.value)


def test_conformance_generates_every_type_for_wgpu(wgpu):
    opts = options_for(wgpu)
    assert opts.types and opts.narrow and set(opts.wide) == set(WIDE)
    assert not {"f32_div", "f32_mod", "fma", "sqrt", "reciprocal"} & set(opts.excluded)
    left_out = {op.value for op in TRANSCENDENTAL} & set(opts.excluded)
    if wgpu.device.software_adapter():
        # a CPU adapter compiles pow's and atan2's kernels for many seconds each: its random
        # programs leave them to their own tests and carry one correctly rounded call each
        assert left_out == SLOW_ON_CPU_ADAPTERS == {"pow", "atan2"} and opts.max_transcendentals == 1
        assert opts.transcendental_share == 0.25
    else:
        assert not left_out


def test_a_transcendental_share_leaves_the_other_programs_as_they_were():
    """Programs that may call correctly rounded functions are the ones they were without a
    share (its draw has a stream of its own); the others call none, and every function still
    appears in a 200-program run."""
    from vyre.conform.generator import GenOptions, random_program
    from vyre.ir import fingerprint

    full, shared = GenOptions(), GenOptions(transcendental_share=0.25)
    names = {op.value for op in TRANSCENDENTAL}
    allowed, seen = 0, set()
    for seed in range(200):
        p, _ = random_program(seed, shared)
        used = {o.rsplit(".", 1)[-1] for o in p.facts.op_set} & names
        q, _ = random_program(seed, full)
        if fingerprint(p) == fingerprint(q):
            allowed += 1
        else:
            assert not used, seed
        seen |= used
    assert 25 <= allowed <= 100 and len(seen) >= 12, (allowed, sorted(seen))
