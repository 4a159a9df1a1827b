"""The exp family's per-evaluation tables in shared memory on CUDA
(`vyre.drivers.cuda.codegen.shared_math_tables`): chosen only for a program that evaluates
those functions in a loop, in blocks of 128 threads or more, with no workgroup arrays of its
own; the source then copies them once per block and reads them there, compiles with NVRTC,
and (on the GPU) gives the reference's bytes on hard cases and special values."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import reference
from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program, UnOp
from vyre.lower.crmath import hard_cases

from helpers import nvrtc

F = DataType.F32
GX = Expr.gid_x()
EXP_FAMILY = ["exp", "exp2", "tanh", "sinh", "cosh", "expm1"]


def _looped(ops: list[UnOp | BinOp], wg: int = 256, workgroup: bool = False) -> Program:
    """out[4 i + j] = f(x[4 i + j]) for j < 4 in a loop (pow: x^y)."""
    k = GX * 4 + Expr.var("j")
    x = Expr.load("x", k)
    vals = [Expr.bin(op, x, Expr.load("y", k)) if isinstance(op, BinOp) else Expr.un(op, x) for op in ops]
    acc = vals[0]
    for v in vals[1:]:
        acc = acc + v
    decls = [BufferDecl.read("x", 0, F), BufferDecl.read("y", 1, F), BufferDecl.output("o", 2, F)]
    body = [Node.loop("j", Expr.u32(0), Expr.u32(4), [Node.store("o", k, acc)])]
    if workgroup:
        decls.append(BufferDecl.workgroup("w", 4, DataType.U32))
    return Program.wrapped(decls, wg, body)


def _tables(prog: Program) -> list[str]:
    from vyre.drivers.cuda.codegen import generate, shared_math_tables

    return [name for name, _, _ in shared_math_tables(generate(prog)[0])]


@pytest.mark.parametrize("name", EXP_FAMILY)
def test_a_looped_exp_family_function_reads_its_tables_from_shared_memory(name):
    assert _tables(_looped([UnOp(name)])) == ["vym_exp_ta"]     # e^y - 1's table stays global


def test_the_tables_are_kept_global_where_a_copy_would_not_pay():
    looped_exp = _looped([UnOp.EXP])
    assert _tables(looped_exp) == ["vym_exp_ta"]
    assert _tables(_looped([BinOp.POW])) == ["vym_exp_ta"]             # pow's 2^t
    assert _tables(_looped([UnOp.SIN, UnOp.LOG])) == []                # no such table
    assert _tables(_looped([UnOp.EXP], wg=64)) == []                   # small blocks
    assert _tables(_looped([UnOp.EXP], workgroup=True)) == []          # shared memory of its own
    flat = Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.output("o", 1, F)], 256,
                           [Node.store("o", GX, Expr.un(UnOp.EXP, Expr.load("x", GX)))])
    assert _tables(flat) == []                                         # one evaluation a thread


def test_the_shared_copy_is_declared_made_and_compiled():
    from vyre.drivers.cuda.codegen import generate

    src = generate(_looped([UnOp.TANH, UnOp.EXP2]))[1]
    assert "#define VYM_SHARED_TABLES" in src
    assert "__shared__ double vym_exp_ta_s[1024];" in src and "vym_expm1_t_s" not in src
    head = src[src.index("vyre_phase_0("):]
    copy, barrier, loop = head.index("vym_exp_ta_s[vy_t] = vym_exp_ta[vy_t]"), head.index("__syncthreads();"), head.index("v_j")
    assert copy < barrier < loop
    flat = generate(_looped([UnOp.EXP], wg=64))[1]
    assert "#define VYM_SHARED_TABLES" not in flat and "vym_exp_ta_s[vy_t]" not in flat
    compiler = nvrtc()
    for s in (src, flat):
        assert compiler.compile_cubin(s, "sm_90")[:4] == b"\x7fELF"


def _inputs(names: list[str], n: int) -> np.ndarray:
    rng = np.random.default_rng(36)
    odd = [0x7F800000, 0xFF800000, 0x7FC00000, 0, 0x80000000, 0x42AE8000, 0xC2AE8000, 0x42C80000,
           0xC2DC0000, 0x3F800000, 0x41200000, 0xC1200000]
    hard = [k for name in names for k, _ in hard_cases().get(name, [])]
    x = rng.uniform(-100, 100, n).astype(np.float32).view(np.uint32)
    fill = np.array(odd + hard, np.uint32)[: n]
    x[: fill.size] = fill
    return x.view(np.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("ops", [[UnOp(n)] for n in EXP_FAMILY] + [[BinOp.POW]], ids=lambda o: o[0].value)
def test_the_shared_tables_give_the_reference_bytes_on_cuda(cuda, ops):
    n = 256 * 4 * 8
    x = _inputs([o.value for o in ops], n)
    y = np.random.default_rng(7).uniform(-3, 3, n).astype(np.float32)
    prog = _looped(ops)
    assert _tables(prog)
    assert cuda.dispatch(prog, [x, y]) == reference.run(prog, [x, y])
