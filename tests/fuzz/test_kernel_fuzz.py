"""Fuzzing the kernel frontend and its call path (hypothesis).

* Generated kernel sources: small Python kernels over random element types, locals, weak
  literals (huge, negative, fractional), operators, calls, branches and loops. Each either
  builds or is refused with a `KernelError` that has a stable code, names a line of the
  generated file and ends in a Fix. A kernel that builds runs on the reference and on
  OpenCL (PoCL) and both give the same bytes, or both refuse with the same error code.
* Generated call arguments: one valid kernel called with random arrays, lists, scalars,
  grids, element counts, backends and ``out=`` arrays. Every call either returns exactly
  the independent numpy answer or raises a `VyreError` ending in a Fix: never another
  exception.
"""

from __future__ import annotations

import decimal
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kernel.support import compile_source
from vyre.driver import acquire
from vyre.ir import VyreError
from vyre.kernel import CODES, KernelError

TYPES = ["u32", "i32", "f32", "u64", "i64", "f16", "u8", "i16"]
SCALARS = ["u32", "i32", "f32"]
HOST = {"u32": np.uint32, "i32": np.int32, "f32": np.float32, "u64": np.uint64, "i64": np.int64,
        "f16": np.float16, "u8": np.uint8, "i16": np.int16}
N = 37                                  # odd: a partial workgroup

LITERALS = st.sampled_from(["0", "1", "3", "-2", "7", "255", "65536", "2**31", "2**40", "-2**31", "0.5",
                            "-1.5", "1e30", "1e300", "3.0", "True"])
BINOPS = st.sampled_from(["+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>", "/"])
CMPS = st.sampled_from(["<", "<=", "==", "!=", ">", ">="])
CASTS = st.sampled_from(["u32", "i32", "f32", "u64", "i64", "f16"])
FUNCS1 = st.sampled_from(["abs", "sqrt", "floor", "popcount", "exp", "-", "~"])
FUNCS2 = st.sampled_from(["min", "max"])


@st.composite
def exprs(draw, names: tuple[str, ...], depth: int = 0) -> str:
    leaves = ["a[i]", "b[i]", "a[i]", "n", *names, *names]
    kind = draw(st.integers(0, 6 if depth < 3 else 1))
    if kind == 6 and draw(st.booleans()):
        kind = 0
    if kind == 0:
        return draw(st.sampled_from(leaves))
    if kind == 1:
        return draw(LITERALS)
    if kind in (2, 3):
        return f"({draw(exprs(names, depth + 1))} {draw(BINOPS)} {draw(exprs(names, depth + 1))})"
    if kind == 4:
        f = draw(FUNCS1)
        inner = draw(exprs(names, depth + 1))
        return f"({f}{inner})" if f in "-~" else f"{f}({inner})"
    if kind == 5:
        return f"{draw(FUNCS2)}({draw(exprs(names, depth + 1))}, {draw(exprs(names, depth + 1))})"
    return f"{draw(CASTS)}({draw(exprs(names, depth + 1))})"


@st.composite
def conds(draw, names: tuple[str, ...]) -> str:
    c = f"{draw(exprs(names, 2))} {draw(CMPS)} {draw(exprs(names, 2))}"
    if draw(st.booleans()):
        c += f" {draw(st.sampled_from(['and', 'or']))} {draw(exprs(names, 2))} {draw(CMPS)} {draw(LITERALS)}"
    return c


@st.composite
def bodies(draw, names: tuple[str, ...], indent: str, depth: int = 0) -> tuple[list[str], tuple[str, ...]]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 5 if depth < 2 else 2))
        if kind <= 1 or not names:
            name = draw(st.sampled_from(["v0", "v1", "v2"]))
            lines.append(f"{indent}{name} = {draw(exprs(names))}")
            names = tuple(dict.fromkeys((*names, name)))
        elif kind == 2:
            lines.append(f"{indent}{draw(st.sampled_from(names))} += {draw(exprs(names))}")
        elif kind == 3:
            inner, _ = draw(bodies(names, indent + "    ", depth + 1))
            lines.append(f"{indent}if {draw(conds(names))}:")
            lines += inner
            if draw(st.booleans()):
                other, _ = draw(bodies(names, indent + "    ", depth + 1))
                lines += [f"{indent}else:", *other]
        elif kind == 4:
            lo, hi = draw(st.integers(-3, 3)), draw(st.integers(-3, 6))
            step = draw(st.sampled_from(["", ", 2", ", -1", ", 3"]))
            inner, _ = draw(bodies(names, indent + "    ", depth + 1))
            lines.append(f"{indent}for q in range({lo}, {hi}{step}):")
            lines += inner
        else:
            lines.append(f"{indent}out[i] = {draw(exprs(names))}")
    return lines, names


@st.composite
def kernels(draw) -> tuple[str, tuple[str, str, str, str]]:
    if draw(st.integers(0, 9)) < 7:                 # mostly one element type: more kernels build
        ta = tb = to = draw(st.sampled_from(TYPES))
    else:
        ta, tb, to = (draw(st.sampled_from(TYPES)) for _ in range(3))
    tn = ta if ta in SCALARS and draw(st.integers(0, 3)) else draw(st.sampled_from(SCALARS))
    body, names = draw(bodies((), "    "))
    src = "\n".join([
        f"@vyre.kernel(workgroup_size={draw(st.sampled_from([1, 8, 32, 64]))})",
        f"def k(a: In[{ta}], b: In[{tb}], out: Out[{to}], n: Scalar[{tn}]):",
        "    i = gid()",
        *body,
        f"    out[i] = {draw(exprs(names))}",
    ]) + "\n"
    return src, (ta, tb, to, tn)


def _inputs(types: tuple[str, str, str, str]) -> list:
    rng = np.random.default_rng(5)
    ta, tb, _, tn = types
    arrays = []
    for t in (ta, tb):
        h = HOST[t]
        if np.issubdtype(h, np.floating):
            arrays.append((rng.standard_normal(N) * 100).astype(h))
        else:
            info = np.iinfo(h)
            arrays.append(rng.integers(info.min, info.max, N, dtype=h, endpoint=True))
    scalar = {"u32": 3, "i32": -3, "f32": 1.25}[tn]
    return [*arrays, scalar]


def _outcome(kernel, backend, ins):
    try:
        return ("ok", kernel(*ins, backend=backend).tobytes())
    except VyreError as e:
        assert "Fix:" in str(e), str(e)
        return ("error", getattr(e, "code", None))


@pytest.fixture(scope="module")
def backends():
    return acquire("reference"), acquire("opencl")


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernels())
def test_generated_kernels_build_or_refuse_and_backends_agree(backends, case):
    src, types = case
    try:
        ns = compile_source(src)
        k = ns["k"]
        _ = k.program
    except KernelError as e:
        event(f"refused {e.code}")
        text = str(e)
        assert e.code in CODES, text
        assert "Fix:" in text and re.search(r"<kernel-src-\d+>:\d+", text), text
        return
    except VyreError as e:
        assert "Fix:" in str(e), str(e)
        return
    ins = _inputs(types)
    ref, ocl = (_outcome(k, b, ins) for b in backends)
    event(f"built, {ref[0]}")
    assert ref == ocl, src


# ---------------------------------------------------------------------------- call arguments
_SAXPY = compile_source("""
@vyre.kernel(workgroup_size=32)
def saxpy(x: In[f32], y: In[f32], out: Out[f32], s: Scalar[f32]):
    i = gid()
    out[i] = x[i] * s + y[i]
""")["saxpy"]

ARRAYS = st.one_of(
    st.builds(lambda n: (np.arange(n) * 0.37 - 5).astype(np.float32), st.sampled_from([0, 1, 37, 64])),
    st.builds(lambda n: (np.arange(n) * 0.37 - 5).astype(np.float32), st.sampled_from([0, 1, 37, 64])),
    st.builds(lambda n, dt: np.arange(n).astype(dt), st.integers(0, 70),
              st.sampled_from([np.float32, np.float64, np.int32, np.uint32, np.float16, np.int64, bool])),
    st.builds(lambda n: np.arange(2 * n, dtype=np.float32)[::2], st.integers(0, 40)),        # strided
    st.builds(lambda n: np.arange(n * 2, dtype=np.float32).reshape(n, 2), st.integers(0, 8)),  # 2-D
    st.lists(st.one_of(st.floats(allow_nan=True), st.integers(-2**70, 2**70), st.text(max_size=2)),
             max_size=6),
    st.lists(st.lists(st.floats(-1, 1), max_size=3), max_size=3),                            # ragged
    st.sampled_from([None, "abc", 3, 2.5, b"\x00\x01", object()]),
)
SCALARS_ARG = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**500, 2**500),
                        st.sampled_from(["5", "nan", None, decimal.Decimal("Infinity"), decimal.Decimal("1.5"),
                                         np.float64(2.0), np.int64(3), True, np.float32(0.5), [1.0], 1j]))
GRIDS = st.one_of(st.none(), st.none(), st.none(), st.integers(-2, 5), st.floats(-1, 3), st.sampled_from(
    [(1,), (1, 1), (1, 1, 1), (1, 1, 1, 5), np.int64(1), "abc", (2.5,), (-1,), [], (2**40,)]))
ELEMENTS = st.one_of(st.none(), st.none(), st.none(), st.integers(-3, 80), st.sampled_from([1.7, "abc", np.int64(5), 2**33, True]))
BACKENDS = st.sampled_from(["reference", "opencl", "reference", "opencl", None, "openc", 5, "nope"])


def _s9(v):
    """docs/semantics.md S9 on f32 values: subnormals flush to a zero of their sign, every NaN
    is the canonical quiet NaN 0x7FC00000."""
    v = np.asarray(v, np.float32).copy()
    v[np.abs(v) < np.finfo(np.float32).tiny] *= np.float32(0)
    bits = v.view(np.uint32)
    bits[np.isnan(v)] = 0x7FC00000
    return v


def _expected(x, y, s):
    """x * s + y in f32 with S9 after every operation (no contraction): an independent model."""
    with np.errstate(all="ignore"):
        return _s9(_s9(_s9(x) * _s9(np.float32(s))) + _s9(y))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(x=ARRAYS, y=ARRAYS, s=SCALARS_ARG, grid=GRIDS, elements=ELEMENTS, backend=BACKENDS,
       out=st.sampled_from([None, "f32", "f64", "strided", "short"]))
def test_random_call_arguments_give_the_answer_or_a_vyre_error(monkeypatch, x, y, s, grid, elements, backend,
                                                              out):
    monkeypatch.setenv("VYRE_BACKEND", "reference")
    n = len(x) if isinstance(x, np.ndarray) and x.ndim == 1 else 0
    dst = {"f32": lambda: np.full(n, 7, np.float32), "f64": lambda: np.zeros(n, np.float64),
           "strided": lambda: np.zeros(2 * n, np.float32)[::2], "short": lambda: np.zeros(max(n - 1, 0), np.float32),
           None: lambda: None}[out]()
    try:
        got = _SAXPY(x, y, s, grid=grid, elements=elements, backend=backend, out=dst)
    except VyreError as e:
        assert "Fix:" in str(e), str(e)
        event(f"refused {getattr(e, 'code', '?')}")
        return
    event("ran")
    # it ran: the inputs were numbers of one length (arrays of f32, or lists of plain numbers)
    xs, ys = (_as_f32(v) for v in (x, y))
    assert xs is not None and ys is not None, (x, y)
    if grid is None and elements is None:
        assert xs.size == ys.size
        assert np.asarray(got).tobytes() == _expected(xs, ys, s).tobytes()
    if dst is not None:
        assert got is dst


def _as_f32(v):
    """The f32 vector vyre may accept for an In[f32] argument, or None."""
    if isinstance(v, np.ndarray):
        return v.reshape(-1) if v.dtype == np.float32 else None
    if isinstance(v, list):                      # plain numbers, nested rectangularly
        try:
            a = np.array(v)
        except ValueError:                       # ragged
            return None
        if a.dtype.kind not in "iuf" and a.size:
            return None
        with np.errstate(over="ignore"):
            return a.astype(np.float64).astype(np.float32).reshape(-1)
    return None
