"""tests/conftest.py skips a test on a wgpu refusal only when every reason is a documented
hardware refusal (64-bit atomics, subgroup operations, private arrays past 8 KiB), in each wording a refusal reaches a
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


def _private(words: int) -> Program:
    """Each invocation fills a private array of ``words`` u32s and reads one back at run time."""
    gx, k = Expr.gid_x(), Expr.var("k")
    u = DataType.U32
    return Program.wrapped([BufferDecl.output("o", 0, u, 5), BufferDecl.local("t", words, u)], 1, [
        Node.loop("k", 0, words, [Node.store("t", k, k * 3 + gx)]),
        Node.store("o", gx, Expr.load("t", (gx * 7) % words))])


def test_private_arrays_past_the_limit_are_refused_before_the_driver_sees_them(wgpu):
    """NVIDIA's Vulkan driver loses the device creating a pipeline with a 16 KiB private array
    (vyre.lower.wgsl.PRIVATE_LIMIT_BYTES): wgpu accepts 8 KiB per invocation and refuses more,
    on every adapter, with the documented reason, in routing and in dispatch alike. (A small
    array runs here; lavapipe takes minutes to compile an 8 KiB one, which NVIDIA's driver
    ran in scripts/probe-wgpu-private-memory.)"""
    from vyre.lower.wgsl import PRIVATE, PRIVATE_LIMIT_BYTES

    words = PRIVATE_LIMIT_BYTES // 4
    got = np.frombuffer(wgpu.dispatch(_private(16), [])[0], np.uint32)
    gx = np.arange(5)
    assert np.array_equal(got, ((gx * 7) % 16 * 3 + gx).astype(np.uint32))
    wgpu.refuse(_private(words))               # at the limit: accepted (nothing is built)
    for fn in (lambda: wgpu.refuse(_private(words + 1)), lambda: wgpu.dispatch(_private(words + 1), [])):
        err = _refusal(fn)
        assert PRIVATE in err.message and documented_refusal(err), err.message
        assert "Fix: keep per-invocation arrays under 8 KiB" in str(err)
    assert not wgpu.device_lost()
