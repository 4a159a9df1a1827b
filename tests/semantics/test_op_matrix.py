"""Every operator on every type it accepts, over all pairs of boundary values (NaN payloads,
±inf, subnormals, ±0, MIN/MAX, ...): each backend must give the reference's bytes (rows
S1-S12 of docs/semantics.md, all at once). Transcendentals are correctly rounded, so byte
identical too (S13)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vyre import reference
from vyre.conform.witness import edges
from vyre.driver import DispatchConfig, UnsupportedFeature
from vyre.driver.shadow import compare_outputs
from vyre.ir import BinOp, DataType, Expr, UnOp
from vyre.ir.typecheck import TypeFault, bin_result, un_result
from vyre.ir.types import TRANSCENDENTAL

from helpers import as_u32, map_program, run_checked

TYPES = [DataType.U32, DataType.I32, DataType.F32, DataType.BOOL, DataType.U64, DataType.I64, DataType.F16,
         DataType.BF16]


def _word(t: DataType):
    """The unsigned dtype test values of type ``t`` are written in (bool: u32 words)."""
    return np.uint32 if t is DataType.BOOL else t.storage


def _valid_bin():
    for op in BinOp:
        for t in TYPES:
            try:
                yield op, t, bin_result(op, t, t)
            except TypeFault:
                continue


def _valid_un():
    for op in UnOp:
        if op in TRANSCENDENTAL:
            continue
        for t in TYPES:
            try:
                yield op, t, un_result(op, t)
            except TypeFault:
                continue


def _pairs(t: DataType):
    e = edges(t)
    a, b = zip(*itertools.product(e, e))
    return np.array(a, dtype=_word(t)), np.array(b, dtype=_word(t))


@pytest.mark.parametrize(("op", "t", "rt"), list(_valid_bin()), ids=lambda v: getattr(v, "value", v))
def test_binary_operator_matches_reference_on_boundary_pairs(backend, op, t, rt):
    a, b = _pairs(t)
    if t in (DataType.I32, DataType.I64) and op in (BinOp.DIV, BinOp.MOD):
        ai, bi = a.view(t.numpy), b.view(t.numpy)
        keep = (bi != 0) & ~((ai == np.iinfo(t.numpy).min) & (bi == -1))  # S3 errors: tested separately
        a, b = a[keep], b[keep]
    # wg 1: no padding lanes, whose out-of-bounds loads (zero) would divide by zero
    program = map_program([t, t], rt, lambda x, y: Expr.bin(op, x, y), wg=1)
    run_checked(backend, program, [a, b])


@pytest.mark.parametrize(("op", "t", "rt"), list(_valid_un()), ids=lambda v: getattr(v, "value", v))
def test_unary_operator_matches_reference_on_boundary_values(backend, op, t, rt):
    x = np.array(edges(t) * 2, dtype=_word(t))
    program = map_program([t], rt, lambda v: Expr.un(op, v))
    run_checked(backend, program, [x])


@pytest.mark.parametrize("src", TYPES, ids=lambda v: v.value)
@pytest.mark.parametrize("dst", TYPES, ids=lambda v: v.value)
def test_casts_match_reference(backend, src, dst):
    """S12, S28: f32->int truncates and saturates, NaN->0; int->f32 rounds to nearest even."""
    extra = [0x4F7FFFFF, 0x4F800000, 0xCF000001, 0x3F7FFFFF, 0xBF7FFFFF, 16777217, 0xFFFFFF7F,
             0x5F000000, 0x5F800000, 0xDF000000, 0xDF000001]
    if src.is_wide:
        extra = [0x0000000100000001, 0x0020000020000001, 0xFFFFFF7FFFFFFFFF, 0x8000008000000001]
    elif src.is_half:
        extra = [0x3555, 0x7BFF, 0x0001, 0x8001, 0x5A00, 0xDA01]
    x = np.array(edges(src) + extra, dtype=_word(src))
    program = map_program([src], dst, lambda v: Expr.cast(dst, v))
    run_checked(backend, program, [x])


@pytest.mark.parametrize("dst", [DataType.U32, DataType.I32, DataType.F32], ids=lambda v: v.value)
def test_bitcasts_keep_bits(backend, dst):
    """S9: bit casts leave NaN payloads and subnormals alone."""
    x = np.array(edges(DataType.F32), dtype=np.uint32)
    out = run_checked(backend, map_program([DataType.F32], dst, lambda v: Expr.bitcast(dst, v)), [x])
    assert (as_u32(out[0]) == x).all()


def test_fma_rounds_once_and_matches_reference(backend):
    """S8: fma has a single rounding; a*b+c without fma rounds twice."""
    rng = np.random.default_rng(7)
    e = np.array(edges(DataType.F32), dtype=np.uint32)
    tri = np.array(list(itertools.product(e[:12], e[:12], e[:12])), dtype=np.uint32).T
    rand = rng.standard_normal((3, 3000)).astype(np.float32).view(np.uint32)
    a, b, c = (np.concatenate([tri[i], rand[i]]) for i in range(3))
    run_checked(backend, map_program([DataType.F32] * 3, DataType.F32, Expr.fma), [a, b, c])
    # a case where the two differ: (1+2^-12)^2 - 1
    x = np.float32(1 + 2**-12)
    fused = reference.run(map_program([DataType.F32] * 3, DataType.F32, Expr.fma),
                          [np.array([x]), np.array([x]), np.array([-1], np.float32)])
    split = reference.run(map_program([DataType.F32] * 3, DataType.F32, lambda p, q, r: p * q + r),
                          [np.array([x]), np.array([x]), np.array([-1], np.float32)])
    assert np.frombuffer(fused[0], np.float32)[0] == np.float32(2**-11 + 2**-24)
    assert np.frombuffer(split[0], np.float32)[0] == np.float32(2**-11)


@pytest.mark.parametrize("op", sorted((o for o in TRANSCENDENTAL if isinstance(o, UnOp)), key=lambda o: o.value),
                         ids=lambda o: o.value)
def test_transcendentals_byte_identical(backend, op):
    """S13: correctly rounded, so byte-identical to the reference on every backend."""
    rng = np.random.default_rng(3)
    x = np.concatenate([np.array(edges(DataType.F32), np.uint32).view(np.float32),
                        rng.uniform(-20, 20, 500).astype(np.float32),
                        rng.uniform(0.001, 4, 200).astype(np.float32)])
    # wg=64: the program tests/semantics/test_crmath.py compiles too (one compile per session)
    program = map_program([DataType.F32], DataType.F32, lambda v: Expr.un(op, v), wg=64)
    try:
        got = backend.dispatch(program, [x])
    except UnsupportedFeature as exc:   # conftest would skip a wgpu refusal
        pytest.fail(f"{backend.id()} refused {op.value}: {exc}")
    want = reference.run(program, [x])
    event = compare_outputs(program, got, want, backend.id())
    assert event is None, event.describe()
    assert as_u32(got[0]).size == x.size


@pytest.mark.parametrize("t", [DataType.U32, DataType.I32, DataType.F32], ids=lambda v: v.value)
def test_operators_on_literals_survive_constant_folding(backend, t):
    """The same operators with literal operands: target compilers fold these at build time
    (PoCL's LLVM once folded ceil(NaN) to garbage), and folding must not change the bytes."""
    from vyre.ir import BufferDecl, Node, Program

    lits = [Expr.bitcast(t, Expr.u32(w)) if t is not DataType.U32 else Expr.u32(w) for w in edges(t)]
    if t is DataType.F32:
        lits = [Expr.f32_from_bits(w) for w in edges(t)]
    stores = []
    k = 0
    for op, ty, rt in _valid_un():
        if ty is not t:
            continue
        for lit in lits:
            v = Expr.un(op, lit)
            stores.append(Node.store("out", Expr.u32(k), Expr.bitcast(DataType.U32, v)
                                     if rt is not DataType.BOOL else Expr.cast(DataType.U32, v)))
            k += 1
    for op, ty, rt in _valid_bin():
        if ty is not t or (t is DataType.I32 and op in (BinOp.DIV, BinOp.MOD)):
            continue
        pairs = list(zip(lits, lits[3:] + lits[:3]))
        if op in TRANSCENDENTAL:   # hypot: a large function on WGSL; one literal pair (its values: test_crmath)
            pairs = pairs[:1]
        for a, b in pairs:
            v = Expr.bin(op, a, b)
            stores.append(Node.store("out", Expr.u32(k), Expr.bitcast(DataType.U32, v)
                                     if rt is not DataType.BOOL else Expr.cast(DataType.U32, v)))
            k += 1
    program = Program.wrapped([BufferDecl.output("out", 0, DataType.U32, k)], 1, stores)
    run_checked(backend, program, [], DispatchConfig(grid_override=(1, 1, 1)))
