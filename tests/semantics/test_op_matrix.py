"""Every operator on every value type it accepts (u32, i32, f32, bool, u64, i64, f16, bf16 and
the narrow storage types u8, i8, u16, i16), over all pairs of boundary values (NaN payloads,
±inf, subnormals, ±0, MIN/MAX, ...) and seeded random pairs: each backend must give the
reference's bytes (rows S1-S12, S25-S28 of docs/semantics.md, all at once). Transcendentals
are correctly rounded, so byte identical too (S13).

The cells of one value type run as one kernel (`_type_program`): a kernel per cell made the
matrix a few hundred shader compiles, which dominate on lavapipe. A refusal fails the test
(tests/conftest.py skips only the documented hardware refusals)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vyre import reference
from vyre.conform.witness import edges, typed_inputs, witness_words
from vyre.driver import DispatchConfig, UnsupportedFeature
from vyre.driver.shadow import compare_outputs
from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program, UnOp
from vyre.ir.typecheck import TypeFault, bin_result, un_result
from vyre.ir.types import TRANSCENDENTAL

from helpers import as_u32, map_program, run_checked

TYPES = [DataType.U32, DataType.I32, DataType.F32, DataType.BOOL, DataType.U64, DataType.I64, DataType.F16,
         DataType.BF16, DataType.U8, DataType.I8, DataType.U16, DataType.I16]
RANDOM_PAIRS = 256      # seeded random pairs added to the boundary pairs of each type
# signed types whose x / 0 (and, 32/64-bit, MIN / -1) is a dispatch error (S3): tested separately
_SIGNED_MIN = {DataType.I32: -(1 << 31), DataType.I64: -(1 << 63)}
_SIGNED = {DataType.I32, DataType.I64, DataType.I8, DataType.I16}


def _word(t: DataType):
    """The unsigned dtype test values of type ``t`` are written in (bool: u32 words)."""
    return np.uint32 if t is DataType.BOOL else t.storage


def _valid_bin(types=TYPES):
    for op in BinOp:
        for t in types:
            try:
                yield op, t, bin_result(op, t, t)
            except TypeFault:
                continue


def _valid_un(types=TYPES):
    for op in UnOp:
        if op in TRANSCENDENTAL:
            continue
        for t in types:
            try:
                yield op, t, un_result(op, t)
            except TypeFault:
                continue


def _pairs(t: DataType, seed: int = 5):
    """All pairs of ``t``'s boundary values, then `RANDOM_PAIRS` seeded random pairs."""
    e = edges(t)
    a, b = (np.array(v, dtype=_word(t)) for v in zip(*itertools.product(e, e)))
    k = len(e)
    ra = witness_words(t, k + RANDOM_PAIRS, seed)[k:].astype(_word(t))
    rb = witness_words(t, k + RANDOM_PAIRS, seed + 1)[k:].astype(_word(t))
    return np.concatenate([a, ra]), np.concatenate([b, rb])


def _cells(t: DataType) -> dict[DataType, list[tuple[BinOp | UnOp, DataType]]]:
    """The non-transcendental cells of value type ``t``, grouped by result type (one output
    buffer each, in this order)."""
    out: dict[DataType, list] = {}
    for op, ty, rt in _valid_bin([t]):
        if op not in TRANSCENDENTAL:
            out.setdefault(rt, []).append((op, ty))
    for op, ty, rt in _valid_un([t]):
        out.setdefault(rt, []).append((op, ty))
    return out


def _guard(t: DataType, op, a: Expr, b: Expr) -> Expr | None:
    """Where a signed division or remainder is defined (S3's errors are tested separately)."""
    if t not in _SIGNED or op not in (BinOp.DIV, BinOp.MOD):
        return None
    wide = DataType.I64 if t is DataType.I64 else DataType.I32   # i8/i16 load as i32
    ok = b.ne(Expr.lit(wide, 0))
    if t in _SIGNED_MIN:
        bad = Expr.bin(BinOp.AND, a.eq(Expr.lit(wide, _SIGNED_MIN[t])), b.eq(Expr.lit(wide, -1)))
        ok = Expr.bin(BinOp.AND, ok, Expr.un(UnOp.LOGICAL_NOT, bad))
    return ok


def _type_program(t: DataType, n: int) -> Program:
    """One kernel for every cell of ``t``: invocation i computes every operation on input pair
    i and stores cell k's result at element k*n + i of its result type's output buffer."""
    gx = Expr.gid_x()
    a, b = Expr.var("a"), Expr.var("b")
    bufs = [BufferDecl.read("x", 0, t, n), BufferDecl.read("y", 1, t, n)]
    body: list[Node] = [Node.let_bind("a", Expr.load("x", gx)), Node.let_bind("b", Expr.load("y", gx))]
    for j, (rt, cells) in enumerate(_cells(t).items()):
        out = f"o_{rt.value}"
        bufs.append(BufferDecl.output(out, 2 + j, rt, len(cells) * n))
        for k, (op, _) in enumerate(cells):
            value = Expr.bin(op, a, b) if isinstance(op, BinOp) else Expr.un(op, a)
            store = Node.store(out, Expr.u32(k * n) + gx, value)
            ok = _guard(t, op, a, b)
            body.append(store if ok is None else Node.if_(ok, [store]))
    return Program.wrapped(bufs, 64, [Node.if_(gx.lt(Expr.u32(n)), body)])


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.value)
def test_every_operator_matches_reference_on_boundary_and_random_pairs(backend, t):
    a, b = _pairs(t)
    n = a.size
    program = _type_program(t, n)
    config = DispatchConfig(grid_override=(-(-n // 64), 1, 1))
    inputs = typed_inputs(program, [a, b])
    want = reference.run(program, inputs, config)
    got = backend.dispatch(program, inputs, config)
    bad = []
    for cells, g, w in zip(_cells(t).values(), got, want, strict=True):
        g, w = (np.frombuffer(x, np.uint8).reshape(len(cells), n, -1) for x in (g, w))
        for k, (op, _) in enumerate(cells):
            diff = np.flatnonzero((g[k] != w[k]).any(axis=1))
            if diff.size:
                i = diff[0]
                bad.append(f"{op.value}: {diff.size} of {n} differ, first a=0x{int(a[i]):x} b=0x{int(b[i]):x}: "
                           f"got {g[k, i].tobytes().hex()} want {w[k, i].tobytes().hex()}")
    assert not bad, f"{backend.id()} on {t.value}:\n" + "\n".join(bad)
    assert sum(len(c) for c in _cells(t).values()) > 0


_BIN_TRANSCENDENTAL = [(op, t, rt) for op, t, rt in _valid_bin() if op in TRANSCENDENTAL]


@pytest.mark.parametrize(("op", "t", "rt"), _BIN_TRANSCENDENTAL, ids=lambda v: getattr(v, "value", v))
def test_binary_transcendental_matches_reference_on_boundary_and_random_pairs(backend, op, t, rt):
    """hypot, pow and atan2 (each a large function on WGSL: a kernel of their own)."""
    a, b = _pairs(t)
    program = map_program([t, t], rt, lambda x, y: Expr.bin(op, x, y), wg=64)
    run_checked(backend, program, [a, b])


_UN_TRANSCENDENTAL = sorted((o for o in TRANSCENDENTAL if isinstance(o, UnOp)), key=lambda o: o.value)


@pytest.mark.parametrize("t", [DataType.F16, DataType.BF16], ids=lambda v: v.value)
def test_unary_transcendentals_on_half_types(backend, t):
    """Every unary transcendental on f16/bf16 (S27: the correctly rounded f32 result, rounded
    once), all in one kernel (f32: test_transcendentals_byte_identical). Not on wgpu: there each
    is a large function and this kernel compiles for minutes on lavapipe; wgpu runs the same
    f32 functions (test_crmath.py) behind the half widening and rounding that the batched
    matrix tests, and test_crmath.py's test_half_forms_round_the_f32_result_once runs exp and
    sin on f16/bf16 there."""
    if backend.id() == "wgpu":
        pytest.skip("17 correctly rounded functions in one WGSL kernel compile for minutes on lavapipe")
    a, _ = _pairs(t)
    k = len(_UN_TRANSCENDENTAL)
    program = Program.wrapped(
        [BufferDecl.read("x", 0, t, a.size), BufferDecl.output("o", 1, t, k * a.size)], 64,
        [Node.if_(Expr.gid_x().lt(Expr.u32(a.size)),
                  [Node.store("o", Expr.u32(j * a.size) + Expr.gid_x(), Expr.un(op, Expr.load("x", Expr.gid_x())))
                   for j, op in enumerate(_UN_TRANSCENDENTAL)])])
    run_checked(backend, program, [a], DispatchConfig(grid_override=(-(-a.size // 64), 1, 1)))


def _accepts(op, t: DataType) -> bool:
    try:
        bin_result(op, t, t) if isinstance(op, BinOp) else un_result(op, t)
    except TypeFault:
        return False
    return True


def test_the_matrix_covers_every_cell():
    """Every (operation, value type) the type rules accept is a cell of the tests above, except
    the f32 unary transcendentals (test_transcendentals_byte_identical)."""
    every = {(op, t) for t in DataType for op in [*BinOp, *UnOp] if _accepts(op, t)}
    batched = {(op, t) for t in TYPES for cells in _cells(t).values() for op, _ in cells}
    covered = batched | {(op, t) for op, t, _ in _BIN_TRANSCENDENTAL}
    assert len(every) == 415
    covered |= {(op, t) for op in _UN_TRANSCENDENTAL for t in (DataType.F16, DataType.BF16)}
    assert every - covered == {(op, DataType.F32) for op in _UN_TRANSCENDENTAL}


# casts between value types (u8/i8/u16/i16 are storage types: their loads are u32/i32 values)
CAST_TYPES = [t for t in TYPES if t.size >= 4 or t.is_half]


@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda v: v.value)
@pytest.mark.parametrize("dst", CAST_TYPES, ids=lambda v: v.value)
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
    except UnsupportedFeature as exc:   # name the function in the failure
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
