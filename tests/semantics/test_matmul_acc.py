"""matmul_acc (docs/semantics.md S37): ``d += a · bᵀ`` on workgroup arrays, wrapping mod 2**32.

Expected values are Python integers (exact products and sums, reduced mod 2**32), never vyre.
The reference defines the bytes; OpenCL (PoCL) and wgpu (lavapipe) print the scalar loops of
vyre.lower.legalize.matmul and must give the same bytes, on workgroup sizes that are and are
not whole warps and on shapes that are not multiples of any tile."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.conform.corpus import matmul_acc_program
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, show, validate, wire
from vyre.ir import node as N
from vyre.reference import run

D = DataType
COMBOS = [(D.I8, D.I8, D.I32), (D.I8, D.U8, D.I32), (D.U8, D.I8, D.U32), (D.U8, D.U8, D.I32),
          (D.U32, D.U32, D.U32), (D.I32, D.I32, D.I32), (D.U32, D.I32, D.I32)]
SHAPES = [(1, 1, 1, 32), (16, 8, 32, 32), (5, 7, 37, 48), (33, 17, 70, 96)]


def _full(rng, t: DataType, size: int) -> np.ndarray:
    info = np.iinfo(t.host)
    return rng.integers(int(info.min), int(info.max), size=size, endpoint=True, dtype=np.int64).astype(t.host)


def _expected(a, b, d, m, n, k, groups) -> np.ndarray:
    out = []
    for g in range(groups):
        A = [int(v) for v in a[g * m * k:(g + 1) * m * k]]
        B = [int(v) for v in b[g * n * k:(g + 1) * n * k]]
        Dv = [int(v) for v in d[g * m * n:(g + 1) * m * n]]
        for i in range(m):
            for j in range(n):
                s = Dv[i * n + j] + sum(A[i * k + p] * B[j * k + p] for p in range(k))
                out.append(s % 2**32)
    return np.array(out, dtype=np.uint64).astype(np.uint32)


@pytest.mark.parametrize("ta, tb, td", COMBOS, ids=lambda t: t.value)
@pytest.mark.parametrize("m, n, k, wg", SHAPES, ids=lambda v: str(v))
def test_reference_matmul_acc_is_the_exact_product_mod_2_32(ta, tb, td, m, n, k, wg) -> None:
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    groups = 3
    p = matmul_acc_program(ta, tb, td, m, n, k, wg)
    a, b, d = _full(rng, ta, groups * m * k), _full(rng, tb, groups * n * k), _full(rng, td, groups * m * n)
    got = np.frombuffer(run(p, [a, b, d], _grid(groups))[0], np.uint32)
    # the runtime-sized output is as long as the longest input; the rest stays zero
    assert np.array_equal(got[:groups * m * n], _expected(a, b, d, m, n, k, groups))
    assert not got[groups * m * n:].any()


@pytest.mark.parametrize("backend_id", ["opencl", "wgpu"])
def test_backends_give_the_references_bytes(backend_id: str, monkeypatch) -> None:
    from conftest import get_backend

    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp")
    be = get_backend(backend_id)
    rng = np.random.default_rng(7)
    # each (types, shape) is a kernel to compile: a spread of both (the scalar loops are one
    # rewrite for every type; tests/lib/test_lib_matmul.py adds the library's programs)
    for (ta, tb, td), (m, n, k, wg) in [(COMBOS[0], SHAPES[2]), (COMBOS[2], SHAPES[3]), (COMBOS[4], SHAPES[2]),
                                        (COMBOS[6], SHAPES[3]), (COMBOS[1], SHAPES[1])]:
        p = matmul_acc_program(ta, tb, td, m, n, k, wg)
        ins = [_full(rng, ta, 2 * m * k), _full(rng, tb, 2 * n * k), _full(rng, td, 2 * m * n)]
        assert be.dispatch(p, ins, _grid(2)) == run(p, ins, _grid(2)), (ta, tb, td, m, n, k, wg)


def test_only_workgroups_that_reach_it_accumulate() -> None:
    """A uniform branch on wgid: workgroup 1 skips the matmul and writes its d unchanged."""
    bufs = [BufferDecl.read("A", 0, D.I8, 4), BufferDecl.read("B", 1, D.I8, 4), BufferDecl.output("O", 2, D.I32, 2),
            BufferDecl.workgroup("wa", 2, D.I8), BufferDecl.workgroup("wb", 2, D.I8),
            BufferDecl.workgroup("wd", 1, D.I32)]
    lid, wg = Expr.lid_x(), Expr.wgid_x()
    body = [Node.if_(lid.lt(2), [Node.store("wa", lid, Expr.load("A", wg * 2 + lid)),
                                 Node.store("wb", lid, Expr.load("B", wg * 2 + lid))]),
            Node.store("wd", Expr.u32(0), Expr.i32(5)),
            Node.if_(wg.eq(0), [Node.matmul_acc("wd", "wa", "wb", 1, 1, 2)]),
            Node.if_(lid.eq(0), [Node.store("O", wg, Expr.load("wd", Expr.u32(0)))])]
    p = Program.wrapped(bufs, 32, body)
    assert validate(p) == []
    out = np.frombuffer(run(p, [np.array([2, -3, 4, 5], np.int8), np.array([7, 11, 1, 1], np.int8)],
                            _grid(2))[0], np.int32)
    assert out.tolist() == [5 + 2 * 7 - 3 * 11, 5]


def _grid(x: int):
    from vyre.driver import DispatchConfig

    return DispatchConfig(grid_override=(x, 1, 1))


# ---- validation ------------------------------------------------------------------------------
def _prog(body, a=D.I8, b=D.I8, d=D.I32, counts=(8, 8, 4), access=None, wg=32, extra=()):
    bufs = [BufferDecl.workgroup("wa", counts[0], a), BufferDecl.workgroup("wb", counts[1], b),
            BufferDecl.workgroup("wd", counts[2], d), BufferDecl.output("o", 0, D.U32, 1), *extra]
    if access is not None:
        bufs[0] = access
    return Program.wrapped(bufs, wg, body)


MM = Node.matmul_acc("wd", "wa", "wb", 2, 2, 4)


@pytest.mark.parametrize("program, code", [
    (_prog([MM], a=D.U32, b=D.U8), "V038"),                                   # bytes x words
    (_prog([MM], d=D.F32), "V038"),                                           # float accumulator
    (_prog([MM], a=D.I16, b=D.I16), "V038"),
    (_prog([MM], counts=(7, 8, 4)), "V038"),                                  # a too small for m*k
    (_prog([MM], counts=(8, 8, 3)), "V038"),                                  # d too small
    (_prog([Node.matmul_acc("wd", "wa", "wb", 0, 2, 4)]), "V038"),            # empty shape
    (_prog([Node.matmul_acc("wa", "wa", "wb", 2, 2, 4)], d=D.I8), "V038"),    # writes an operand
    (_prog([MM], access=BufferDecl.read("wa", 1, D.I8, 8)), "V038"),          # not workgroup memory
    (_prog([Node.matmul_acc("wd", "nope", "wb", 2, 2, 4)]), "V001"),
    (_prog([Node.if_(Expr.lid_x().lt(3), [MM])]), "V039"),                    # divergent
    (_prog([MM, Node.if_(Expr.lid_x().eq(0), [Node.return_()])]), "V039"),   # a program that returns
])
def test_invalid_matmul_acc_has_a_code_and_a_fix(program: Program, code: str) -> None:
    diags = validate(program)
    assert code in [d.code for d in diags], diags
    assert all("Fix:" in d.message for d in diags)


def test_valid_forms_validate() -> None:
    for a, b, d in COMBOS:
        assert validate(_prog([MM], a=a, b=b, d=d, counts=(8, 8, 4))) == []
    assert validate(_prog([Node.if_(Expr.wgid_x().eq(0), [MM])])) == []   # uniform branch


def test_matmul_acc_in_a_function_is_refused() -> None:
    from vyre.ir import Function

    f = Function("f", (), (MM,), None)
    p = Program.wrapped([BufferDecl.workgroup("wa", 8, D.I8), BufferDecl.workgroup("wb", 8, D.I8),
                         BufferDecl.workgroup("wd", 4, D.I32), BufferDecl.output("o", 0, D.U32, 1)],
                        32, [Node.call("f")], functions=[f])
    assert "V035" in [d.code for d in validate(p)]


def test_wire_round_trip_text_and_facts() -> None:
    p = matmul_acc_program(D.U8, D.I8, D.I32, 5, 7, 37, 48)
    assert wire.decode(wire.encode(p)) == p
    assert wire.decode(wire.encode(p, canonical=True)) == wire.decode(wire.encode(p, canonical=True))
    text = "\n".join(show.body_text(p.body))
    assert "matmul_acc wd[5x7] += wa[5x37] * wb[7x37]^T" in text
    assert p.facts.matmul == frozenset({(D.U8, D.I8)})
    assert "vyre.node.matmul_acc" in p.facts.ops
    assert [n for n in N.walk_nodes(p.body) if isinstance(n, N.MatMulAcc)]


@pytest.mark.parametrize("ta, tb, td", COMBOS, ids=lambda t: t.value)
def test_the_scalar_loops_every_target_prints_run_like_the_statement(ta, tb, td, monkeypatch) -> None:
    """vyre.lower.legalize.matmul's rewrite, run on the reference, gives the statement's bytes
    (the targets print exactly these loops). Its locals use the prefix reserved for vyre's
    own rewrites (V025 for a user's program), so it runs here without that check."""
    import vyre.reference
    from vyre.lower.legalize.matmul import expand_matmul

    rng = np.random.default_rng(11)
    for m, n, k, wg in SHAPES:
        p = matmul_acc_program(ta, tb, td, m, n, k, wg)
        loops = expand_matmul(p)
        assert not loops.facts.matmul
        assert {(d.code, "__vymm" in d.message) for d in validate(loops)} == {("V025", True)}
        ins = [_full(rng, ta, 2 * m * k), _full(rng, tb, 2 * n * k), _full(rng, td, 2 * m * n)]
        want = run(p, ins, _grid(2))
        with monkeypatch.context() as mp:
            mp.setattr(vyre.reference, "_check", lambda program: None)
            assert run(loops, ins, _grid(2)) == want
