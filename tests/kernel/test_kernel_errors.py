"""Kernel errors speak the user's language (issue 25; issue 28 items 11 and 13): every error
has a stable K code from `vyre.kernel.CODES`, names the Python ``file:line`` (validator
findings included) and ends in a Fix in kernel words; generated names never collide with the
user's; a kernel compiles the source it had when it was decorated."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import vyre
from kernel.support import compile_source
from vyre.kernel import CODES, KernelError

ROOT = Path(__file__).resolve().parents[2]
IR_WORDS = ("Expr.", "Node.", "DataType.", "BufferDecl", "DispatchConfig", "let_bind", "grid_override")


def _error(src: str) -> KernelError:
    ns = compile_source(src)
    k = next(v for v in ns.values() if isinstance(v, vyre.kernel.Kernel))
    with pytest.raises(KernelError) as err:
        _ = k.program
    return err.value


def test_every_code_raised_is_in_the_table_and_documented():
    used = set()
    for path in (ROOT / "src/vyre/kernel").glob("*.py"):
        used |= set(re.findall(r'"(K\d{3})"', path.read_text()))
    assert used <= set(CODES), used - set(CODES)
    doc = (ROOT / "docs/kernels.md").read_text()
    assert all(code in doc for code in CODES), [c for c in CODES if c not in doc]


BAD = [
    ("o[i] = x[i] @ x[i]", "K003", "MatMult"),
    ("o[i] = f32(u32(x[i]) ** 2)", "K004", "a float function"),
    ("o[i] = math.pow(x[i], 2.0)", "K009", "vyre.kernel.pow"),
    ("o[i] = math.atan2(x[i], 1.0)", "K009", "vyre.kernel.atan2"),
    ("o[i] = math.sqrt(x[i])", "K009", "vyre.kernel.sqrt"),
    ("o[i] = np.exp(x[i])", "K009", "vyre.kernel.exp"),
    ("o[i] = u32(x[i]) / 2", "K004", "//"),
    ("x[i] = 1.0", "K015", "read-only"),
    ("o[i] = x[-1]", "K014", "len(x) - 1"),
    ("o[i] = x[i, 0] + x[i]", "K014", "2 axis"),
    ("o[i] = x", "K008", "index it"),
    ("o[i] = nothing", "K007", "assign it first"),
    ("y = 1\ny = 2.5", "K005", "float literal"),
    ("while x[i]:\n    pass", "K004", "!= 0"),
    ("o[i] = x[i] + i", "K004", "cast one operand"),
    ("o[i] = u8(x[i])", "K004", "storage type"),
    ("for k in [1, 2]:\n    pass", "K011", "range"),
    ("t = shared(f32, 0)", "K012", "shared(f32, 256)"),
    ("o[i] = x[0:2]", "K014", "slices"),
    ("o[i] = x.shape", "K014", "x.shape[0]"),
    ("old = atomic_add(o, i, x[i])", "K016", "statement of its own"),          # S36
    ("o[i] = atomic_max(o, i, x[i])", "K016", "read o after the kernel"),
    ("atomic_add(o, i, x[i])\no[i] = 1.0", "K015", "later dispatch"),
    ("atomic_add(o, i, x[i])\natomic_max(o, i, x[i])", "K015", "its own buffer"),
    ("atomic_or(o, i, x[i])", "K004", "ADD, MIN and MAX"),
]


@pytest.mark.parametrize("line, code, words", BAD, ids=[b[1] + ":" + b[0][:20] for b in BAD])
def test_errors_have_a_code_a_line_and_a_fix_in_kernel_words(line, code, words):
    body = line.replace("\n", "\n    ")
    err = _error(f"import math\nimport numpy as np\n\n\n@vyre.kernel\ndef bad(x: In[f32], o: Out[f32]):\n"
                 f"    i = gid()\n    {body}\n")
    text = str(err)
    assert err.code == code, text
    assert words in text, text
    assert re.match(r"<kernel-src-\d+>:\d+: \[K\d{3}\] ", text), text
    line_no = int(text.split(":")[1])
    assert line_no >= 8, text                  # the statement's own line, not the def
    assert not any(w in err.fix for w in IR_WORDS), err.fix


def test_validator_findings_name_the_python_line():
    err = _error("""
        @vyre.kernel(workgroup_size=64)
        def bad(x: In[u32], o: Out[u32]):
            i = gid()
            if x[i] > 0:
                o[i] = 1
                barrier()
    """)
    assert err.code == "K015" and ":7:" in str(err) and "barrier" in str(err)


def test_generated_names_never_collide_with_the_users():
    ns = compile_source("""
        @vyre.kernel
        def names(a: In[u32], o: Out[u32], n: Scalar[u32], n_value: In[u32]):
            i = gid()
            tuple_ = 1
            tuple = 2
            trip = 3
            index = 4
            start = 5
            x, y = a[i], n
            y, x = x, y
            o[i + 0] += x + y + tuple_ + tuple + trip + index + start + n_value[0]
            for k in range(start, 9, 2):
                o[i] += u32(k)
    """)
    got = ns["names"](np.ones(2, np.uint32), 5, np.full(2, 7, np.uint32), backend="reference")
    assert got.tolist() == [5 + 1 + 1 + 2 + 3 + 4 + 5 + 7 + 5 + 7] * 2


def test_a_kernel_compiles_the_source_it_had_when_decorated(tmp_path, monkeypatch):
    path = tmp_path / "user_kernel_mod.py"
    path.write_text("import vyre\nfrom vyre.kernel import In, Out, u32, gid\n\n"
                    "@vyre.kernel\ndef k(x: In[u32], o: Out[u32]):\n    o[gid()] = x[gid()] + 1\n")
    spec = importlib.util.spec_from_file_location("user_kernel_mod", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "user_kernel_mod", mod)
    spec.loader.exec_module(mod)
    path.write_text(path.read_text().replace("+ 1", "+ 100"))
    import linecache

    linecache.checkcache(str(path))
    assert mod.k(np.zeros(3, np.uint32), backend="reference").tolist() == [1, 1, 1]


def test_recursion_and_missing_annotations():
    err = _error("""
        @vyre.kernel
        def bad(x, o: Out[f32]):
            o[gid()] = 1.0
    """)
    assert err.code == "K006"
    ns = compile_source("""
        @vyre.func
        def again(n: u32) -> u32:
            return again(n)

        @vyre.kernel
        def uses(o: Out[u32]):
            o[gid()] = again(3)

        @vyre.kernel
        def fine(x: In[f32], o: Out[f32]):
            o[gid()] = x[gid()]
    """)
    with pytest.raises(KernelError) as e:
        _ = ns["uses"].program
    assert e.value.code == "K013" and "calls itself" in str(e.value)


def test_each_error_names_the_line_it_is_about():
    """A statement's error names that statement's line; an error about the function as a whole
    (its signature, annotations, a call's arguments, a backend's error during a call) names
    the ``def`` line; a wrong decorator argument names the decorator's line; a recursive
    ``@vyre.func`` names the recursive call."""
    ns = compile_source("""
        @vyre.kernel(
            workgroup_size=64)
        def stmt(x: In[f32], o: Out[f32]):
            i = gid()
            o[i] = x[i] + "s"

        @vyre.kernel
        def ann(x: In[f32], o: "Out[f33]"):
            o[gid()] = 1.0

        @vyre.kernel
        def star(x: In[f32], *rest):
            pass

        @vyre.func
        def again(n: u32) -> u32:
            m = n + 1
            return again(m)

        @vyre.kernel
        def uses(o: Out[u32]):
            o[gid()] = again(3)

        @vyre.kernel
        def fine(x: In[f32], o: Out[f32]):
            o[gid()] = x[gid()]
    """)

    def line(k, *args):
        with pytest.raises(KernelError) as err:
            k(*args, backend="reference")
        return int(str(err.value).split(":")[1]), err.value.code

    one = np.ones(4, np.float32)
    assert line(ns["stmt"], one) == (6, "K003")        # the statement
    assert line(ns["ann"], one) == (9, "K006")         # the annotations: the def line
    assert line(ns["star"], one) == (13, "K006")       # the signature: the def line
    assert line(ns["uses"]) == (19, "K013")            # the recursive call
    assert line(ns["fine"]) == (26, "K020")            # a call's arguments: the def line
    with pytest.raises(KernelError) as err:            # the decorator's own argument: its line
        vyre.kernel(workgroup_size=0)(ns["stmt"].fn)
    assert str(err.value).startswith(f"{ns['stmt'].fn.__code__.co_filename}:2: [K021]"), str(err.value)


def test_deep_expressions_are_an_error_not_a_crash():
    terms = " + ".join(["x[i]"] * 1200)
    err = _error(f"""
        @vyre.kernel
        def deep(x: In[f32], o: Out[f32]):
            i = gid()
            o[i] = {terms}
    """)
    assert err.code in ("K003", "K015")


_SPIN = """
    @vyre.func
    def settle(k: u32) -> u32:
        while k > 1:
            k = k // 2
        return k

    @vyre.kernel(max_iterations=8)
    def spin(x: In[u32], o: Out[u32]):
        i = gid()
        k = x[i]
        while k > 0:
            k = k + 1
        o[i] = settle(k)

    @vyre.kernel(max_iterations=8)
    def spin_once(x: In[u32], o: Out[u32]):
        i = gid()
        k = x[i]
        while k > 0:
            k = k + 1
        o[i] = k
"""


def test_a_while_loop_over_its_cap_names_its_python_line(backend):
    """The loop_limit failure of a dispatch (every backend) keeps its class and reason, starts
    with the while loop's own file:line (warm calls too) and says how to raise the cap in
    kernel words; with several while loops it names the def line and lists them."""
    from vyre.driver.errors import DispatchFailed

    ns = compile_source(_SPIN)
    x = np.ones(4, np.uint32)
    for _ in range(2):     # the second call runs the warm plan
        with pytest.raises(DispatchFailed) as err:
            ns["spin_once"](x, backend=backend)
        text = str(err.value)
        assert err.value.reason == "loop_limit" and err.value.code == 1005, text
        assert re.match(r"<kernel-src-\d+>:20: \[\w+\] a while loop reached its cap of 8 trips", text), text
        assert "@vyre.kernel(max_iterations=n)" in err.value.fix, text
    if backend.id() != "reference":
        return
    with pytest.raises(DispatchFailed) as err:
        ns["spin"](x, backend=backend)
    text = str(err.value)
    assert re.match(r"<kernel-src-\d+>:9: ", text), text           # the kernel's def line
    assert re.search(r"\(the while loops are at <kernel-src-\d+>:4, <kernel-src-\d+>:12\)\. Fix", text), text


def test_a_signed_division_by_zero_names_its_python_line():
    """A signed division by zero while the kernel runs names the line of the kernel's only
    signed // or %, or the def line and every such line (unsigned ones cannot fault); the
    Fix is in kernel words."""
    from vyre.driver.errors import DispatchFailed

    ns = compile_source("""
        @vyre.kernel
        def divide(x: In[i32], o: Out[i32]):
            i = gid()
            o[i] = 7 // x[i] + i32(u32(i) // 2)

        @vyre.kernel
        def divide2(x: In[i32], o: Out[i32]):
            i = gid()
            q = 7 // x[i]
            o[i] = q + 9 % x[i]
    """)
    bad = np.array([1, 0], np.int32)
    with pytest.raises(DispatchFailed) as err:
        ns["divide"](bad, backend="reference")
    text = str(err.value)
    assert err.value.reason == "division" and re.match(r"<kernel-src-\d+>:5: \[reference\] ", text), text
    assert "d if d != 0 else 1" in err.value.fix and not any(w in err.value.fix for w in IR_WORDS), text
    with pytest.raises(DispatchFailed) as err:
        ns["divide2"](bad, backend="reference")
    text = str(err.value)
    assert re.match(r"<kernel-src-\d+>:8: ", text), text
    assert re.search(r"\(the signed // and % are at <kernel-src-\d+>:10, <kernel-src-\d+>:11\)\. Fix", text), text


def test_kernel_source_names_the_kernels_line_when_code_generation_fails():
    """kernel.source(backend): a backend's error while generating code names the def line
    and keeps its class."""
    from vyre.driver.errors import KernelCompileFailed

    from helpers import MockBackend

    class NoCompiler(MockBackend):
        def generated_source(self, program):
            raise KernelCompileFailed("the compiler crashed.", "report it.", backend="mock")

    ns = compile_source("""
        @vyre.kernel(workgroup_size=1)
        def plus(x: In[u32], o: Out[u32]):
            o[gid()] = x[gid()] + 1
    """)
    with pytest.raises(KernelCompileFailed) as err:
        ns["plus"].source(NoCompiler())
    assert re.match(r"<kernel-src-\d+>:3: \[mock\] the compiler crashed\. Fix: report it\.$", str(err.value)), \
        str(err.value)


def test_device_functions_called_from_python_are_k017_at_the_calls_line():
    """gid() or a @vyre.func called from ordinary Python is K017 naming the line of that call
    (it was a VyreError without a code); in a kernel's annotation it stays K006."""
    ns = compile_source("""
        @vyre.func
        def twice(v: u32) -> u32:
            return v * 2

        def host():
            return gid()

        def host_func():
            return twice(3)
    """)
    for fn, line, words in ((ns["host"], 7, "vyre.kernel.gid()"), (ns["host_func"], 10, "twice, a @vyre.func,")):
        with pytest.raises(KernelError) as err:
            fn()
        text = str(err.value)
        assert err.value.code == "K017" and re.match(rf"<kernel-src-\d+>:{line}: \[K017\] {re.escape(words)} ", text)
        assert text.endswith("to compute on the host use numpy."), text
