"""CUDA code for matmul_acc without a GPU (NVRTC only): on the tensor-core path the PTX holds
``mma.sync.aligned.m16n8k32.row.col.s32.<a>.<b>.s32`` with the operands' signedness (u8
planes for u32/i32), and where cuobjdump is installed the sm_90 SASS holds IMMA; with
``tensor_cores=False``, or a block that is not whole warps, there is no mma at all (the
scalar loops of vyre.lower.legalize.matmul). VYRE_REQUIRE_NVRTC=1 turns a missing NVRTC into
a failure."""

from __future__ import annotations

import importlib
import shutil
import subprocess

import pytest

from vyre.conform.corpus import corpus, matmul_acc_program
from vyre.ir import DataType

from helpers import nvrtc

D = DataType
MM = importlib.import_module("vyre.lib.matmul")
PTX_TYPE = {D.I8: "s8", D.U8: "u8", D.U32: "u8", D.I32: "u8"}


def _programs():
    for e in corpus():   # blocks of whole warps (48 lanes: scalar loops, tested below)
        if e.program.facts.matmul and e.program.invocations_per_workgroup % 32 == 0:
            yield e.name, e.program
    for words in (False, True):
        t = MM.tiles("cuda", words)
        for ta, tb in ([(D.U32, D.U32), (D.I32, D.I32)] if words else [(D.I8, D.U8), (D.U8, D.I8), (D.I8, D.I8)]):
            yield f"lib {ta.value}x{tb.value}", MM.program(ta, tb, t)


@pytest.mark.parametrize("name, program", list(_programs()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_tensor_core_path_emits_mma_sync_with_the_operand_types(name, program) -> None:
    compiler = nvrtc()
    from vyre.drivers.cuda.codegen import generate

    (ta, tb), = program.facts.matmul
    ptx = compiler.compile_ptx(generate(program)[1], "sm_90")
    want = f"mma.sync.aligned.m16n8k32.row.col.s32.{PTX_TYPE[ta]}.{PTX_TYPE[tb]}.s32"
    assert want in ptx, name
    assert "mma" not in compiler.compile_ptx(generate(program, tensor_cores=False)[1], "sm_90")


def test_a_block_that_is_not_whole_warps_gets_scalar_loops() -> None:
    compiler = nvrtc()
    from vyre.drivers.cuda.codegen import generate

    p = matmul_acc_program(D.I8, D.I8, D.I32, 5, 7, 37, 48)
    plan, source = generate(p)
    assert not plan.native_matmul and "vy_imma" not in source
    assert "mma" not in compiler.compile_ptx(source, "sm_90")


def test_sass_holds_imma_where_cuobjdump_is_installed(tmp_path) -> None:
    compiler = nvrtc()
    from vyre.drivers.cuda.codegen import generate

    if shutil.which("cuobjdump") is None:
        pytest.skip("cuobjdump (with nvdisasm) is not on PATH")
    for ta, tb, op in [(D.I8, D.U8, "IMMA.16832.S8.U8"), (D.U32, D.U32, "IMMA.16832.U8.U8")]:
        cubin = tmp_path / "k.cubin"
        cubin.write_bytes(compiler.compile_cubin(generate(MM.program(ta, tb, MM.tiles("cuda", ta is D.U32)))[1],
                                                 "sm_90"))
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, timeout=120).stdout
        assert op in sass


def test_whole_byte_tiles_read_fragments_with_ldmatrix_on_sm80_and_sm90() -> None:
    """A matmul_acc of whole warp tiles (vyre.lib.matmul's CUDA byte tile shape, k = 240 an
    odd multiple of 16) reads its fragments with ldmatrix .x4 and its last 16 k with .x2; a
    shape with edges keeps the scalar fragment loads."""
    compiler = nvrtc()
    from vyre.drivers.cuda.codegen import generate

    t = MM.tiles("cuda", False)
    source = generate(matmul_acc_program(D.I8, D.U8, D.I32, t.bm, t.bn, t.bk, t.threads))[1]
    for arch in ("sm_80", "sm_90"):
        ptx = compiler.compile_ptx(source, arch)
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx, arch
        assert ("ldmatrix.sync.aligned.m8n8.x2.shared.b16" in ptx) == (t.bk % 32 == 16), arch
    edges = matmul_acc_program(D.I8, D.I8, D.I32, 33, 17, 70, 96)
    assert "ldmatrix" not in compiler.compile_ptx(generate(edges)[1], "sm_90")


# the opt-in shared memory per block of an A100 (sm_80) and an H100 (sm_90)
OPTIN = {"sm_80": 163 * 1024, "sm_90": 227 * 1024}


@pytest.mark.parametrize("tile", ["CUDA_BYTES", "CUDA_WORDS"])
def test_the_cuda_tiles_build_for_sm80_and_sm90(tile: str) -> None:
    """vyre.lib.matmul's CUDA tiles (and the transpose before them) assemble with each
    device's shared memory (ptxas runs in NVRTC for a cubin), and take no more of it than
    the device has."""
    compiler = nvrtc()
    from vyre.drivers.cuda import tiles
    from vyre.drivers.cuda.codegen import generate

    words = tile == "CUDA_WORDS"
    ta, tb = (D.U32, D.U32) if words else (D.I8, D.U8)
    for arch, limit in OPTIN.items():
        t = MM.tiles("cuda", words, limit)
        assert t == getattr(MM, tile) or (arch == "sm_80" and t in MM.CUDA_BYTES_SMALLER)
        for prog in (MM.program(ta, tb, t), MM.transpose_program(tb)):
            plan, source = generate(prog, shared_limit=limit)
            assert tiles.layout(plan, limit).total <= limit, (tile, arch)
            assert compiler.compile_cubin(source, arch)[:4] == b"\x7fELF", (tile, arch)


def _k_loop(*extra, bound=None) -> tuple:
    """A k loop as vyre.lib.matmul builds it (copy, matmul_acc) with ``extra`` statements in
    its body and ``bound`` (default: a local set before it) as its end."""
    from vyre.ir import Expr, Node

    mma = Node.matmul_acc("wd", "wa", "wb", 32, 16, 32)
    end = Expr.var("pk") if bound is None else bound
    loop = Node.loop("kt", Expr.u32(0), end, [Node.store("wa", Expr.var("kt"), Expr.u32(1)), mma, *extra])
    return loop, mma


def test_a_matmul_acc_keeps_its_accumulators_in_registers_only_where_nothing_else_in_the_loop_needs_d() -> None:
    from vyre.drivers.cuda import imma
    from vyre.ir import Expr, Node

    loop, mma = _k_loop()
    assert imma._keeps_registers(loop, mma)
    assert not imma._keeps_registers(loop, mma, returns=True)                     # a program that returns
    for extra in ([Node.store("wd", Expr.u32(0), Expr.u32(1))],                    # d stored in the loop
                  [Node.store("wa", Expr.u32(0), Expr.load("wd", Expr.u32(0)))],  # d loaded in the loop
                  [Node.matmul_acc("wd", "wa", "wb", 32, 16, 32)],                # a second matmul_acc on d
                  [Node.if_(Expr.var("kt").lt(Expr.u32(3)), [Node.break_()])],    # not every trip
                  [Node.let_bind("pk", Expr.u32(2))]):                            # the bound rebound inside
        loop, mma = _k_loop(*extra)
        assert not imma._keeps_registers(loop, mma), extra
    loop, mma = _k_loop(bound=Expr.load("prm", Expr.u32(0)))                      # a bound read from memory
    assert not imma._keeps_registers(loop, mma)


@pytest.mark.parametrize("words", [False, True])
def test_the_lib_tiles_keep_their_accumulators_in_registers(words: bool, monkeypatch) -> None:
    """vyre.lib.matmul's k loop qualifies: the kernel declares the register array, loads it on
    the first trip, stores it on the last, and calls no vy_imma8/vy_imma32 (which load and
    store d around every matmul_acc); with imma.RESIDENT_ACCUMULATORS off it does."""
    from vyre.drivers.cuda import imma
    from vyre.drivers.cuda.codegen import generate

    ta = D.U32 if words else D.I8
    program = MM.program(ta, ta, MM.tiles("cuda", words))
    kernel = generate(program)[1].split('extern "C"')[1]
    step = "vy_res32<" if words else "vy_res8<"
    assert "uint vy_racc0[" in kernel and step in kernel and "vy_res_get<" in kernel and "vy_res_put<" in kernel
    assert "vy_imma" not in kernel
    monkeypatch.setattr(imma, "RESIDENT_ACCUMULATORS", False)
    kernel = generate(program)[1].split('extern "C"')[1]
    assert "vy_racc0" not in kernel and ("vy_imma32<" if words else "vy_imma8<") in kernel
