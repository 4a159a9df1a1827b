"""tests/conftest.py skips a test on a wgpu refusal only when every reason is a documented
hardware refusal (64-bit atomics, subgroup operations), in each wording a refusal reaches a
test in: raw dispatch, routing's missing ops, and kernel words. Any other refusal fails."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import documented_refusal, get_backend
from vyre.driver import UnsupportedFeature
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, SubgroupOp


@pytest.fixture
def wgpu():
    return get_backend("wgpu")


def _refusal(fn) -> UnsupportedFeature:
    with pytest.raises(UnsupportedFeature) as err:
        fn()
    return err.value


def _atomic64() -> Program:
    return Program.wrapped([BufferDecl.output("o", 0, DataType.U64, 4)], 1,
                           [Node.expr(Expr.atomic(AtomicOp.ADD, "o", Expr.gid_x(), Expr.lit(DataType.U64, 1)))])


def _subgroup() -> Program:
    gx = Expr.gid_x()
    return Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 32,
                           [Node.store("o", gx, Expr.subgroup_reduce(SubgroupOp.REDUCE_ADD, Expr.load("a", gx)))])


def test_hardware_refusals_are_documented(wgpu):
    assert documented_refusal(_refusal(lambda: wgpu.dispatch(_atomic64(), [])))
    assert documented_refusal(_refusal(lambda: wgpu.dispatch(_subgroup(), [np.ones(32, np.uint32)])))
    assert documented_refusal(_refusal(lambda: wgpu.refuse(_subgroup())))


def test_kernel_word_refusals_are_matched(wgpu):
    """What a named-backend kernel call raises (`vyre.kernel.launch._explicit`)."""
    from vyre.kernel.launch import _explicit

    for program in (_atomic64(), _subgroup()):
        err = _refusal(lambda p=program: _explicit(wgpu, p, "k.py:3"))
        assert err.message.startswith("[wgpu] [K024]") and documented_refusal(err), err.message


def test_other_refusals_are_not_documented(wgpu):
    for what in ("f32 division (WGSL allows 2.5 ULP)", "64-bit loop variables", "9 bound buffers",
                 "64-bit atomics (core WGSL has no 64-bit atomics); 64-bit loop variables"):
        assert not documented_refusal(UnsupportedFeature(what, "wgpu"))
    assert not documented_refusal(UnsupportedFeature("subgroup operations", "opencl"))
    assert documented_refusal(UnsupportedFeature("ops vyre.subgroup.ballot, vyre.subgroup.shuffle", "wgpu"))
