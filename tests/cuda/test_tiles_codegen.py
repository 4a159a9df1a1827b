"""CUDA code for load_tile without a GPU (NVRTC only): a load_tile is ``cp.async`` copies
(16-byte chunks, zero-filled past the valid prefix) between barriers; vyre.lib.matmul's k
loop (tiles feeding a matmul_acc) is a pipeline of as many stages as the device's shared
memory holds, declared in dynamic shared memory past 48 KiB; without the tensor-core path
(sm < 80 or VYRE_CUDA_TENSOR_CORES=0) there is no cp.async at all. VYRE_REQUIRE_NVRTC=1 turns
a missing NVRTC into a failure."""

from __future__ import annotations

import importlib

from vyre.ir import DataType

from helpers import nvrtc

D = DataType
MM = importlib.import_module("vyre.lib.matmul")
H100 = 227 * 1024


def _tile_program():
    from semantics.test_load_tile import tile_program

    return tile_program(D.U32)


def test_a_load_tile_is_cp_async_between_barriers() -> None:
    compiler = nvrtc()
    from semantics.test_load_tile import tile_program
    from vyre.drivers.cuda.codegen import generate

    for t in (D.I8, D.U8, D.I16, D.U32, D.F32, D.U64):   # every element size assembles
        assert compiler.compile_cubin(generate(tile_program(t))[1], "sm_90")[:4] == b"\x7fELF", t

    plan, source = generate(_tile_program())
    assert plan.native_tiles and "vy_tile<uint, 5, 12, 32>" in source
    ptx = compiler.compile_ptx(source, "sm_80")
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 0" in ptx
    plan, source = generate(_tile_program(), tensor_cores=False)
    assert not plan.native_tiles and "cp.async" not in compiler.compile_ptx(source, "sm_80")


def test_the_lib_k_loop_is_a_pipeline_in_dynamic_shared_memory() -> None:
    compiler = nvrtc()
    from vyre.drivers.cuda import tiles
    from vyre.drivers.cuda.codegen import generate

    prog = MM.program(D.I8, D.I8, MM.CUDA_BYTES)
    plan, source = generate(prog, shared_limit=H100)
    lay = tiles.layout(plan, H100)
    t = MM.CUDA_BYTES
    stages = {p.stages for p in lay.pipelines.values()}
    (k,) = stages   # as many as fit beside the 128 KiB accumulator tile, at most 4
    assert k == min(4, (H100 - 4 * t.bm * t.bn) // (t.bm * t.bk + t.bn * t.bk)) >= 2
    assert lay.dynamic and tiles.dynamic_bytes(plan, H100) == lay.total <= H100
    assert lay.counts == {"wa": k * t.bm * t.bk, "wb": k * t.bn * t.bk, "wd": t.bm * t.bn}
    assert lay.swizzled == {"wa", "wb"}   # rows of a power of two of 16-byte chunks
    assert "extern __shared__" in source and f"vy_cp_wait<{k - 2}>();" in source
    ptx = compiler.compile_ptx(source, "sm_90")
    assert f"cp.async.wait_group {k - 2}" in ptx and "mma.sync.aligned.m16n8k32" in ptx
    # with 48 KiB (no opt-in) the same loop has no room for stages: one load_tile at a time
    plan, source = generate(MM.program(D.U32, D.U32, MM.Tiles(32, 32, 32, 64)))
    lay = tiles.layout(plan, tiles.STATIC_LIMIT)
    assert {p.stages for p in lay.pipelines.values()} == {4} and not lay.dynamic   # small arrays: 4 fit
    plan, source = generate(prog)
    assert not tiles.layout(plan, tiles.STATIC_LIMIT).pipelines and "vy_cp_wait<0>();" in source


def test_a_loop_that_touches_the_tiles_elsewhere_is_not_pipelined() -> None:
    from vyre.drivers.cuda import tiles
    from vyre.drivers.cuda.codegen import generate
    from vyre.ir import BufferDecl, Expr, Node, Program

    def prog(extra):
        body = [Node.loop("kt", Expr.u32(0), Expr.u32(4), [
                    Node.load_tile("wa", "a", Expr.var("kt") * 64, Expr.u32(32), 16, 32, Expr.u32(16), Expr.u32(32)),
                    Node.load_tile("wb", "b", Expr.var("kt") * 32, Expr.u32(32), 8, 32, Expr.u32(8), Expr.u32(32)),
                    Node.matmul_acc("wd", "wa", "wb", 16, 8, 32)]),
                *extra,
                Node.if_(Expr.lid_x().lt(Expr.u32(128)), [Node.store("o", Expr.lid_x(), Expr.load("wd", Expr.lid_x()))])]
        return Program.wrapped([BufferDecl.read("a", 0, D.I8), BufferDecl.read("b", 1, D.I8),
                                BufferDecl.output("o", 2, D.I32, 128), BufferDecl.workgroup("wa", 512, D.I8),
                                BufferDecl.workgroup("wb", 256, D.I8), BufferDecl.workgroup("wd", 128, D.I32)],
                               32, body)

    plan, _ = generate(prog([]))
    assert tiles.layout(plan, H100).pipelines
    plan, _ = generate(prog([Node.if_(Expr.lid_x().eq(0), [Node.store("o", Expr.u32(0), Expr.bitcast(
        D.I32, Expr.cast(D.U32, Expr.load("wa", Expr.u32(0)))))])]))
    assert not tiles.layout(plan, H100).pipelines   # wa read after the loop: its stages would show
