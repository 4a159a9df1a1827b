"""CI without a GPU still compiles every generated CUDA kernel: all conformance-corpus
programs and a batch of random programs go through NVRTC to sm_90 cubins. A codegen error
fails here on every commit. (VYRE_REQUIRE_NVRTC=1, set by .ci/run, turns a missing NVRTC
into a failure instead of a skip.)"""

from __future__ import annotations

import os

import pytest

from vyre.conform.corpus import corpus
from vyre.conform.generator import random_program
from vyre.driver import pipeline as P
from vyre.driver.errors import KernelCompileFailed
from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program, UnOp, fingerprint

from helpers import nvrtc


def _sources():
    from vyre.drivers.cuda.codegen import generate

    for e in corpus():
        yield e.name, generate(e.program)[1]
    for seed in range(40):
        yield f"random/{seed}", generate(random_program(seed)[0])[1]


def test_every_corpus_and_random_program_compiles_to_sm90_cubin():
    compiler = nvrtc()
    failures = []
    count = 0
    for name, source in _sources():
        try:
            cubin = compiler.compile_cubin(source, "sm_90")
            assert cubin[:4] == b"\x7fELF", name
        except KernelCompileFailed as err:
            failures.append(f"{name}: {err.log[:500]}")
        count += 1
    assert count > 190
    assert not failures, "\n".join(failures)


def test_nvrtc_failure_reports_log_and_source_path():
    compiler = nvrtc()
    with pytest.raises(KernelCompileFailed) as err:
        compiler.compile_cubin('extern "C" __global__ void k() { undefined_thing(); }', "sm_90")
    assert "undefined_thing" in err.value.log
    assert err.value.source_path and os.path.exists(err.value.source_path)
    assert "Fix:" in str(err.value)


def test_cubin_cache_hits_disk_without_nvrtc(tmp_path, monkeypatch):
    compiler = nvrtc()
    from vyre.drivers.cuda.codegen import generate

    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    src = generate(corpus()[0].program)[1]
    first = compiler.CubinCache()
    cubin, how = first.get_or_compile(src, "sm_90")
    assert how == "nvrtc"
    second = compiler.CubinCache()
    monkeypatch.setattr(compiler, "compile_cubin", lambda *a, **k: pytest.fail("NVRTC called on a disk hit"))
    again, how = second.get_or_compile(src, "sm_90")
    assert how == "disk" and again == cubin


def test_programs_built_in_worker_processes_give_the_serial_cubins():
    """Issue 24: warm-up and conformance build in a pool (`vyre.driver.engine.farm`): each
    worker validates, lowers and compiles; the cubin is NVRTC's for the same source, and a
    program that does not validate is left to its dispatch (None)."""
    compiler = nvrtc()
    from vyre.driver.engine import farm
    from vyre.drivers.cuda.codegen import generate
    from vyre.ir import wire

    programs = [random_program(seed)[0] for seed in range(4)]
    broken = Program.wrapped([BufferDecl.output("o", 0, DataType.U32)], 64,
                             [Node.store("nope", Expr.gid_x(), Expr.u32(1))])
    jobs = [(compiler.CudaCompiler("sm_90"), wire.encode(p), None) for p in [*programs, broken]]
    got = list(farm.run_jobs(farm.build_job, jobs, workers=2))
    assert got[-1] is None
    for p, (meta, cubin) in zip(programs, got):
        plan, source = generate(p, tensor_cores=False)   # (the compiler's default above)
        assert cubin == compiler.compile_cubin(source, "sm_90")
        assert meta["entries"] == list(plan.entries) and meta["source"] == source
        assert meta["bound"] == [b.name for b in p.facts.bound] and meta["fingerprint"] == fingerprint(p).hex()


def test_a_batch_of_programs_compiles_into_one_cubin_with_entries_renamed_apart():
    """Several programs per NVRTC call (its fixed cost is about half of a small program's);
    a program that does not validate is left out (None) and the others still build."""
    compiler = nvrtc()
    from vyre.driver.engine import farm
    from vyre.ir import wire

    programs = [random_program(seed)[0] for seed in range(10, 13)]
    broken = Program.wrapped([BufferDecl.output("o", 0, DataType.U32)], 64,
                             [Node.store("nope", Expr.gid_x(), Expr.u32(1))])
    items = [(wire.encode(p), None) for p in [programs[0], broken, *programs[1:]]]
    got = farm.build_batch(compiler.CudaCompiler("sm_90"), items)
    assert got[1] is None
    built = [g for g in got if g is not None]
    assert len(built) == 3 and len({cubin for _, cubin in built}) == 1   # one NVRTC call, one cubin
    names = [n for meta, _ in built for n in meta["entries"]]
    assert len(set(names)) == len(names) and all(n.encode() in built[0][1] for n in names)


@pytest.mark.gpu
def test_precompile_then_dispatch_loads_from_disk(cuda):
    from vyre.conform.runner import diverges

    programs = [random_program(seed)[0] for seed in range(100, 108)]
    assert cuda.precompile(programs) >= 1
    before = cuda.device.rt.cubins.compiled
    for seed in range(100, 108):
        p, inputs = random_program(seed)
        assert diverges(cuda, p, inputs, None) is None
        assert P.compile(cuda, p).compiled.built_from == "disk"   # loaded: built by a worker
    assert cuda.device.rt.cubins.compiled == before            # no dispatch ran NVRTC


@pytest.mark.parametrize("t", [DataType.I32, DataType.I64], ids=lambda t: t.value)
def test_signed_abs_reaches_ptx_without_an_abs_instruction(t):
    """|x| of a signed integer wraps at INT_MIN (S1). NVVM turned `x < 0 ? 0 - x : x` into
    abs.s32/abs.s64, which ptxas takes as non-negative: `saturating_add(abs(x), x)` of
    INT64_MIN folded its saturation to INT64_MAX (conform random/7001179 on the H100). The
    CUDA form keeps the negation opaque, so no abs instruction may reach the PTX."""
    compiler = nvrtc()
    from vyre.drivers.cuda.codegen import generate

    g = Expr.gid_x()
    x = Expr.load("x", g)
    prog = Program.wrapped([BufferDecl.read("x", 0, t), BufferDecl.output("o", 1, t)], 32,
                           [Node.store("o", g, Expr.bin(BinOp.SATURATING_ADD, Expr.un(UnOp.ABS, x), x))])
    ptx = compiler.compile_ptx(generate(prog)[1], "sm_90")
    assert "abs.s32" not in ptx and "abs.s64" not in ptx
    assert "neg.s" in ptx   # the opaque negation is there
