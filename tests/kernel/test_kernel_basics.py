"""`@vyre.kernel`: Python functions compiled to Programs. Kernels give the same bytes as their
builder twins on every backend, results come back as writable arrays, and anything the
frontend does not compile is a `KernelError` naming the user's line and ending in a Fix."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre import examples as X
from vyre.cli.bench import saxpy_program
from vyre.examples import kernels as KX
from vyre.ir import VyreError
from vyre.kernel import In, InOut, KernelError, Out, Scalar, f32, gid, i32, u32


def test_saxpy_kernel_is_its_builder_twin(backend):
    x = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
    y = np.random.default_rng(2).standard_normal(5000).astype(np.float32)
    got = KX.saxpy(x, y, backend=backend)
    want = backend.dispatch(saxpy_program(), [x, y])[0]
    assert got.tobytes() == want
    assert got.dtype == np.float32 and got.flags.writeable


def test_sha256_kernel_matches_hashlib_and_the_builder_version(backend):
    rng = np.random.default_rng(3)
    msgs = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, 200, 60)]
    msgs += [b"", b"abc", b"x" * 64, b"y" * 119]
    ins = X.sha256_bytes_inputs(msgs)
    got = KX.sha256(*ins, backend=backend, elements=8 * len(msgs), grid=-(-len(msgs) // 64))
    assert np.array_equal(got, X.sha256_bytes_expected(msgs))
    builder = backend.dispatch(X.sha256_bytes(), ins, X.sha256_bytes_config(len(msgs)))[0]
    assert got.tobytes() == builder


def test_pow_spellings_build_one_op():
    """``a ** b``, Python's ``pow(a, b)`` and ``vyre.kernel.pow(a, b)`` are the same correctly
    rounded POW (S13)."""
    from vyre.ir import BinOp
    from vyre.ir import node as N

    @vyre.kernel
    def k1(x: In[f32], y: In[f32], o: Out[f32]):
        o[gid()] = x[gid()] ** y[gid()]

    @vyre.kernel
    def k2(x: In[f32], y: In[f32], o: Out[f32]):
        o[gid()] = pow(x[gid()], y[gid()])

    @vyre.kernel
    def k3(x: In[f32], y: In[f32], o: Out[f32]):
        o[gid()] = vyre.kernel.pow(x[gid()], y[gid()])

    assert k1.program.body == k2.program.body == k3.program.body
    assert any(getattr(e, "op", None) is BinOp.POW for e in N.program_exprs(k1.program))


def test_pow_and_atan2_kernels_are_their_builder_twins(backend):
    """One call of each (each is a large function on WGSL); a wgpu that refuses them says so
    in kernel words."""
    from kernel.support import run
    from vyre.drivers.wgpu.backend import REFUSED_OPS
    from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program

    @vyre.kernel
    def polar(x: In[f32], y: In[f32], r: Out[f32], t: Out[f32]):
        i = gid()
        r[i] = x[i] ** y[i]
        t[i] = vyre.kernel.atan2(y[i], x[i])

    rng = np.random.default_rng(6)
    x, y = (rng.standard_normal(3000).astype(np.float32) * 4 for _ in range(2))
    got = run(polar, backend, x, y, refused_on=("wgpu",) if "vyre.bin_op.pow" in REFUSED_OPS else ())
    if got is None:
        return
    F, gx = DataType.F32, Expr.gid_x()
    lx, ly = Expr.load("x", gx), Expr.load("y", gx)
    twin = Program.wrapped(
        [BufferDecl.read("x", 0, F), BufferDecl.read("y", 1, F), BufferDecl.output("r", 2, F),
         BufferDecl.output("t", 3, F)], 64,
        [Node.store("r", gx, Expr.bin(BinOp.POW, lx, ly)), Node.store("t", gx, Expr.bin(BinOp.ATAN2, ly, lx))])
    want = vyre.reference.run(twin, [x, y])
    assert got[0].tobytes() == want[0] and got[1].tobytes() == want[1]


def test_histogram_kernel_with_shared_memory_atomics_and_a_scalar(backend):
    data = np.random.default_rng(4).integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
    h = KX.histogram(data, 16, backend=backend, grid=-(-data.size // (256 * 16)))
    assert np.array_equal(h, np.bincount(data & 255, minlength=256))


def test_inout_out_and_grid_indexing(backend):
    x = np.array([0x01020304, 0xAABBCCDD], np.uint32)
    got = KX.byteswap_words(x, backend=backend)
    assert got.tolist() == [0x04030201, 0xDDCCBBAA] and x.tolist() == [0x01020304, 0xAABBCCDD]
    dst = np.empty(2, np.uint32)
    assert KX.byteswap_words[(1,)](x, backend=backend, out=dst) is dst
    assert dst.tolist() == [0x04030201, 0xDDCCBBAA]


@vyre.kernel(workgroup_size=32)
def _mixed(a: In[i32], out: Out[i32], n: Scalar[i32]):
    i = gid()
    acc = i32(0)
    for k in range(0, 10, 3):           # 0, 3, 6, 9
        acc += i32(k)
    j = 0
    while True:
        j += 1
        if j > 5:
            break
        if j % 2 == 0:
            continue
        acc += i32(j)                   # 1 + 3 + 5
    if a[i] < 0 and n > 0:
        out[i] = -a[i] * n + acc
    elif a[i] == 0:
        out[i] = acc
    else:
        out[i] = a[i] // 2 if a[i] > 10 else a[i] % 3


def test_control_flow_and_scalars(backend):
    a = np.arange(-20, 40, dtype=np.int32)
    got = _mixed(a, 3, backend=backend)
    acc = 18 + 9
    want = [(-v * 3 + acc) if v < 0 else acc if v == 0 else (v // 2 if v > 10 else v % 3) for v in a]
    assert got.tolist() == want


def test_arguments_are_checked():
    with pytest.raises(VyreError, match="astype"):
        KX.saxpy(np.ones(4, np.float64), np.ones(4, np.float32), backend="reference")
    with pytest.raises(VyreError, match="takes 2 argument"):
        KX.saxpy(np.ones(4, np.float32), backend="reference")
    with pytest.raises(VyreError, match="Fix:"):
        _mixed(np.ones(4, np.int32), 2**40, backend="reference")
    with pytest.raises(VyreError, match="inside kernels"):
        KX.big_s0(3)


def _compile(src: str):
    ns: dict = {}
    import linecache
    import textwrap

    name = f"<kernel-test-{abs(hash(src))}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    exec(compile(textwrap.dedent(src), name, "exec"), {"vyre": vyre, "In": In, "Out": Out, "InOut": InOut,
                                                      "f32": f32, "u32": u32, "gid": gid}, ns)
    return next(v for v in ns.values() if isinstance(v, vyre.kernel.Kernel)).program


@pytest.mark.parametrize("body, words", [
    ("    out[gid()] = x[gid()] @ x[gid()]\n", "MatMult"),
    ("    out[gid()] = f32(u32(x[gid()]) ** 2)\n", "a float function"),
    ("    out[gid()] = [v for v in range(3)][0]\n", "is not a buffer"),
    ("    with open('f'):\n        pass\n", "With"),
    ("    out[gid()] = u32(x[gid()]) / 2\n", "use // for integer division"),
    ("    y = 1\n    y = 2.5\n    out[gid()] = x[gid()]\n", "float literal"),
    ("    y = 1\n    y = x[0]\n    out[gid()] = x[gid()]\n", "one type"),
    ("    out[gid()] = undefined_thing(1)\n", "not defined"),
    ("    out[gid()] = x\n", "used as a value"),
    ("    for i in [1, 2]:\n        pass\n", "range"),
    ("    return 5\n", "returns no value"),
])
def test_unsupported_source_names_the_line_and_the_fix(body, words):
    src = "@vyre.kernel\ndef bad(x: In[f32], out: Out[f32]):\n    i = 0\n" + body
    with pytest.raises(KernelError) as err:
        _compile(src)
    text = str(err.value)
    assert words in text and "Fix:" in text and (":4:" in text or ":5:" in text)


def test_missing_annotation_and_recursion_are_refused():
    with pytest.raises(KernelError, match="annotation"):
        _compile("@vyre.kernel\ndef bad(x, out: Out[f32]):\n    out[gid()] = 1.0\n")

    @vyre.func
    def loop_forever(n: u32) -> u32:
        return loop_forever(n)

    @vyre.kernel
    def uses(out: Out[u32]):
        out[gid()] = loop_forever(3)

    with pytest.raises(KernelError, match="calls itself"):
        _ = uses.program


def test_source_shows_the_generated_code():
    assert "__kernel" in KX.saxpy.source("opencl")


def test_the_reference_source_is_the_programs_readable_text():
    """``str(program)`` is a short indented text (not the dataclass repr), and it is what
    ``kernel.source('reference')`` returns."""
    text = KX.saxpy.source("reference")
    assert text == str(KX.saxpy.program) and "Program(" not in text and "BufferDecl" not in text
    lines = text.splitlines()
    assert lines[0] == "program workgroup_size=(256, 1, 1)", text
    assert "  buffer x: read f32[*] (binding 0)" in lines and "  buffer out: output f32[*] (binding 2)" in lines
    assert lines[lines.index("  body:") + 1:] == ["    let i = gid.x", "    out[i] = add(mul(x[i], 2.5f32), y[i])"]
    assert repr(KX.saxpy.program).startswith("Program(buffers=")
