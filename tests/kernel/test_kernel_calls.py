"""Calling kernels (issue 25 "no silent paths", issue 28 item 10): every argument and launch
option is checked; a wrong one is a KernelError with a stable code naming the kernel's def
line — never a bare exception, a silent conversion, or a partial launch."""

from __future__ import annotations

import ctypes
import decimal
import re

import numpy as np
import pytest

import vyre
from vyre.kernel import In, KernelError, Out, Scalar, atomic_add, f32, gid, u32, u64


@vyre.kernel
def _add(a: In[f32], b: In[f32], o: Out[f32]):
    i = gid()
    o[i] = a[i] + b[i]


@vyre.kernel
def _copy(a: In[u32], o: Out[u32]):
    i = gid()
    o[i] = a[i]


@vyre.kernel
def _put(o: Out[f32, 1], v: Scalar[f32]):
    o[0] = v


@vyre.kernel
def _put_u(o: Out[u32, 1], v: Scalar[u32]):
    o[0] = v


@vyre.kernel(workgroup_size=(8, 8))
def _square(o: Out[u32]):
    o[gid(1) * 16 + gid(0)] = 1


@vyre.kernel
def _fill(o: Out[u32]):
    i = gid()
    o[i] = i


@vyre.kernel
def _lookup(t: In[u32, 4], x: In[u32], o: Out[u32]):
    i = gid()
    o[i] = t[x[i] & 3]


ONES = np.ones(8, np.float32)
IR_WORDS = ("BufferDecl", "DispatchConfig", "dispatch_elements", "with_count", "count=")


def _code(fn, *args, **kw) -> str:
    with pytest.raises(KernelError) as err:
        fn(*args, **kw)
    text = str(err.value)
    assert "Fix:" in text and "test_kernel_calls.py:" in text, text
    return err.value.code


@pytest.mark.parametrize("value", [[1.5, 2.7], [-1], [1e20], ["a"], [[1], [2, 3]], [True, None]])
def test_lists_are_checked_like_arrays(value):
    assert _code(_copy, value, backend="reference") == "K020"


def test_good_lists_and_nd_lists_pass():
    assert _copy([1, 2, 2**32 - 1], backend="reference").tolist() == [1, 2, 2**32 - 1]
    assert _add([[1.5, 2]], [[0.5, 1]], backend="reference").tolist() == [[2.0, 3.0]]
    assert _code(_add, [1e300], [1.0], backend="reference") == "K020"


@pytest.mark.parametrize("kw", [
    {"grid": 1.5}, {"grid": (1, 1, 1, 5)}, {"grid": "abc"}, {"grid": -1}, {"grid": True},
    {"elements": "abc"}, {"elements": 1.7}, {"elements": -1},
    {"config": "abc", "grid": 1}, {"backend": 5}, {"backend": "opencll"},
    {"dim": (0.5,)}, {"dim": 4, "grid": 1}, {"shape": "x"},
])
def test_launch_options_are_checked(kw):
    kw.setdefault("backend", "reference")
    assert _code(_add, ONES, ONES, **kw) == "K021"


def test_numpy_integers_are_fine_launch_values():
    assert _add(ONES, ONES, grid=np.int64(1), elements=np.uint32(8), backend="reference").tolist() == [2.0] * 8


def test_backend_ids_get_a_did_you_mean():
    with pytest.raises(KernelError, match="did you mean 'opencl'"):
        _add(ONES, ONES, backend="opencll")


@pytest.mark.parametrize("value", ["5", b"5", None, [5], 2**32, -1, 1.5, complex(1, 0), 10**400])
def test_unsigned_scalars_are_checked(value):
    assert _code(_put_u, value, backend="reference") == "K020"


@pytest.mark.parametrize("value", ["nan", 10**400, 1e300, "1.0"])
def test_float_scalars_are_checked(value):
    assert _code(_put, value, backend="reference") == "K020"


def test_float_scalars_accept_numbers_and_decimals():
    assert _put(decimal.Decimal("1.5"), backend="reference").tolist() == [1.5]
    assert np.isinf(_put(decimal.Decimal("Infinity"), backend="reference")[0])
    assert _put(np.float32(2.5), backend="reference").tolist() == [2.5]
    assert _put_u(np.uint64(7), backend="reference").tolist() == [7]


def test_workgroup_size_and_decorator_arguments_are_checked():
    for bad in ("abc", 0, (1, 1, 1, 1), 2.5, (0, 4)):
        with pytest.raises(KernelError) as err:
            vyre.kernel(workgroup_size=bad)(_add.fn)
        assert err.value.code == "K021"
    with pytest.raises(KernelError) as err:
        vyre.kernel(max_iterations=0)(_add.fn)
    assert err.value.code == "K021"


def test_lambdas_are_refused_when_decorated():
    with pytest.raises(KernelError) as err:
        vyre.kernel(lambda x: None)
    assert err.value.code == "K001"
    f = lambda x: None  # noqa: E731
    with pytest.raises(KernelError):
        vyre.func(f)


def test_a_lambda_on_a_continuation_line_is_a_coded_error_at_its_line():
    import inspect

    here = inspect.currentframe().f_lineno
    with pytest.raises(KernelError) as err:
        vyre.kernel(
            lambda x: None)
    assert err.value.code == "K001" and "Fix:" in str(err.value)
    assert str(err.value).startswith(f"{__file__}:{here + 3}: [K001]"), str(err.value)
    with pytest.raises(KernelError) as err:
        vyre.kernel(workgroup_size=64)(
            lambda x: None)
    assert err.value.code == "K001" and err.value.where == f"{__file__}:{here + 8}"


def test_inputs_of_different_lengths_are_refused_unless_elements_says_so():
    assert _code(_add, np.ones(3, np.float32), np.ones(4, np.float32), backend="reference") == "K023"
    got = _add(np.ones(3, np.float32), np.ones(4, np.float32), elements=4, backend="reference")
    assert got.tolist() == [2, 2, 2, 1]


def test_a_multi_axis_workgroup_without_a_grid_is_refused_not_sliced():
    assert _code(_square, elements=256, backend="reference") == "K021"
    assert _square(elements=256, dim=(16, 16), backend="reference").tolist() == [1] * 256
    assert _square(elements=256, grid=(2, 2), backend="reference").tolist() == [1] * 256


@pytest.mark.parametrize("make", [
    lambda: np.zeros((4, 4), np.float32)[:, ::2].T,      # non-contiguous, transposed
    lambda: np.zeros(16, np.float32)[::2],                 # strided
    lambda: np.asfortranarray(np.zeros((2, 4), np.float32)),
])
def test_out_writes_into_any_writable_layout(make):
    dst = make()
    a = np.arange(8, dtype=np.float32)
    assert _add(a, a, out=dst, backend="reference") is dst
    assert dst.reshape(-1).tolist() == (a + a).tolist() or np.array_equal(dst, (a + a).reshape(dst.shape))


def test_out_refuses_what_it_cannot_fill():
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    for bad in (ro, np.zeros(7, np.float32), np.zeros(8, np.float64), [0.0] * 8):
        assert _code(_add, ONES, ONES, out=bad, backend="reference") == "K022"


def test_wrong_dtypes_say_how_to_convert():
    with pytest.raises(KernelError, match=r"astype\(np.float32\)") as err:
        _add(np.ones(8), ONES, backend="reference")
    assert err.value.code == "K020"


def test_the_preferred_backend_is_routed_and_logged(monkeypatch, caplog):
    """Without backend= the call runs on the first backend by precedence that can run the
    kernel; when a preferred one that is here cannot, one log line says where it runs and why."""
    import logging

    from vyre.driver import BackendError, acquire
    from vyre.kernel import launch

    here = []
    for bid in ("opencl", "wgpu"):
        try:
            acquire(bid)
            here.append(bid)
        except BackendError:
            pass
    if len(here) < 2:
        pytest.skip("needs opencl and wgpu")
    monkeypatch.setattr(launch, "_ROUTES", {})
    monkeypatch.setattr(launch, "_CHECKED", {})
    real = launch.refusal
    monkeypatch.setattr(launch, "refusal", lambda b, p: "uses exp()" if b.id() != "wgpu" else real(b, p))
    a = np.arange(8, dtype=np.float32)
    with caplog.at_level(logging.INFO, logger="vyre.kernel"):
        assert _add(a, a).tolist() == (a + a).tolist()
    assert list(launch._ROUTES.values()) == ["wgpu"]
    assert any("runs on wgpu" in r.message and "opencl cannot run it: uses exp()" in r.message
               for r in caplog.records)
    monkeypatch.setattr(launch, "_ROUTES", {})
    monkeypatch.setattr(launch, "refusal", real)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="vyre.kernel"):
        _add(a, a)
    assert list(launch._ROUTES.values()) != ["wgpu"] and not caplog.records


def test_an_output_nothing_sizes_is_refused_in_kernel_words():
    """A kernel whose only buffer is a runtime-sized Out, called without elements=: a K021 at
    the kernel's def line whose Fix names elements= and Out[u32, n] (not the IR builders)."""
    for kw in ({}, {"dim": 64}):
        with pytest.raises(KernelError) as err:
            _fill(backend="opencl", **kw)
        text = str(err.value)
        assert err.value.code == "K021" and "test_kernel_calls.py:" in text, text
        assert "elements=n" in err.value.fix and "Out[u32, n]" in err.value.fix, text
        assert not any(w in text for w in IR_WORDS), text
    assert "dim=" in text
    assert _fill(elements=5, backend="opencl").tolist() == list(range(5))


def test_a_fixed_length_input_of_another_length_is_refused_in_kernel_words():
    x = np.arange(3, dtype=np.uint32)
    assert _code(_lookup, np.arange(5, dtype=np.uint32), x, backend="reference") == "K014"
    assert _code(_lookup, np.arange(5, dtype=np.uint32).tobytes(), x, backend="reference") == "K014"
    with pytest.raises(KernelError) as err:
        _lookup([1, 2, 3], x, backend="reference")
    assert "In[u32, 4]" in str(err.value) and not any(w in str(err.value) for w in IR_WORDS)
    assert _lookup(np.array([7, 8, 9, 10], np.uint32), x, backend="reference").tolist() == [7, 8, 9]


def _fake_device_array(module: str, typestr: str):
    """A stand-in for a CUDA array of ``module`` (torch/cupy are not installed here): only
    the interface the call reads before anything touches device memory."""
    cls = type("Tensor" if module == "torch" else "ndarray", (), {"__module__": module})
    x = cls()
    x.__cuda_array_interface__ = {"shape": (8,), "typestr": typestr, "data": (0, False), "version": 3}
    x.dtype, x.shape, x.device = np.dtype(typestr), (8,), "cuda:0"
    return x


@pytest.mark.parametrize(("module", "fix"), [("torch", "x.to(torch.float32)"), ("cupy", "x.astype(cupy.float32)")])
def test_device_arrays_of_the_wrong_dtype_are_refused_in_their_library_words(module, fix):
    """A CUDA array (``__cuda_array_interface__``) of another dtype is refused by the call,
    before any backend sees it, with the conversion in the caller's own library."""
    x = _fake_device_array(module, "<f8")
    with pytest.raises(KernelError) as err:
        _add(x, ONES, backend="reference")
    assert err.value.code == "K020" and f"pass {fix.replace('x.', 'a.')}" in err.value.fix, str(err.value)
    assert "float64" in str(err.value) and "astype(np." not in str(err.value)


class _DLTensor(ctypes.Structure):   # dlpack.h's DLTensor, spelled here independently of vyre
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype, _new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_DLTENSOR = ctypes.create_string_buffer(b"dltensor")


class _GpuDLPack:
    """A stand-in for a GPU array that speaks DLPack only (no ``__cuda_array_interface__``,
    no numpy): a real DLPack capsule describing 8 elements of ``(code, bits)`` on CUDA
    device 0 at an address nobody reads (the call checks it before any backend sees it)."""

    def __init__(self, code: int, bits: int) -> None:
        self.shape_c = (ctypes.c_int64 * 1)(8)
        self.managed = _DLManaged(_DLTensor(0x1000, 2, 0, 1, code, bits, 1, self.shape_c, None, 0))
        self.streams: list = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _new_capsule(ctypes.addressof(self.managed), ctypes.addressof(_DLTENSOR), None)

    def __dlpack_device__(self):
        return (2, 0)


def test_dlpack_only_gpu_arrays_of_the_wrong_dtype_are_refused_at_the_call():
    """A GPU array with only ``__dlpack__`` (jax and the like) of another dtype is a K020
    naming the parameter, read from its capsule before any backend sees it (without asking
    the producer for a stream handshake); one of the right dtype goes on to the backend,
    whose refusal names the kernel's def line."""
    from vyre.driver.errors import InvalidInput

    f64 = _GpuDLPack(2, 64)
    with pytest.raises(KernelError) as err:
        _add(f64, ONES, backend="reference")
    text = str(err.value)
    assert err.value.code == "K020" and "'a'" in text and "float64" in text and "f32" in text, text
    assert err.value.fix.startswith("pass a.astype(np.float32)") and f64.streams == [-1], text
    assert _code(_add, ONES, _GpuDLPack(0, 32), backend="reference") == "K020"     # i32
    with pytest.raises(InvalidInput) as refused:
        _add(_GpuDLPack(2, 32), ONES, backend="reference")
    assert refused.value.reason == "input_device" and refused.value.where == _add._build().where, str(refused.value)
    assert str(refused.value).startswith(f"{_add._build().where}: [reference] ")
    from vyre.driver.inputs import dlpack_dtype

    assert [dlpack_dtype(np.zeros(2, t)) for t in (np.float16, np.int8, np.uint64, np.bool_)] == \
        [np.float16, np.int8, np.uint64, np.bool_]             # numpy's own capsules (CPU)
    assert dlpack_dtype(_GpuDLPack(4, 16)) is None and dlpack_dtype(object()) is None   # bfloat16: no numpy name


class _DLPackOnly:
    """A real GPU array seen through DLPack only (as jax arrays are): no
    ``__cuda_array_interface__``, no ``dtype``, not of a library vyre knows."""

    def __init__(self, x) -> None:
        self._x = x

    def __dlpack__(self, *args, **kw):
        return self._x.__dlpack__(*args, **kw)

    def __dlpack_device__(self):
        return self._x.__dlpack_device__()


@pytest.mark.gpu
def test_dlpack_only_gpu_arrays_on_cuda(cuda):
    """On the GPU: a DLPack-only CuPy array of the wrong dtype is the call's K020 naming the
    parameter; of the right dtype it is read in place and the result is right."""
    cp = pytest.importorskip("cupy")
    a = cp.arange(8, dtype=cp.float32)
    got = _add(_DLPackOnly(a), _DLPackOnly(a * 2), backend=cuda)
    assert cp.asarray(got).get().tolist() == (np.arange(8) * 3.0).tolist()
    with pytest.raises(KernelError) as err:
        _add(_DLPackOnly(a), _DLPackOnly(a.astype(cp.float64)), backend=cuda)
    assert err.value.code == "K020" and "'b'" in str(err.value) and "float64" in str(err.value), str(err.value)


@pytest.mark.parametrize(("module", "fix"), [("torch", "x.to(torch.float32)"), ("cupy", "x.astype(cupy.float32)"),
                                             ("numpy", "x.astype(np.float32)")])
def test_the_drivers_dtype_fix_names_the_callers_library(module, fix):
    from vyre.driver.errors import InvalidInput
    from vyre.driver.inputs import cai_span, check_input

    decl = _add.program.inputs[0]
    with pytest.raises(InvalidInput) as err:
        if module == "numpy":
            check_input(decl, np.ones(8), "input 0", "reference")
        else:
            cai_span(decl, _fake_device_array(module, "<f8"), "input 0", "cuda")
    assert err.value.reason == "input_dtype" and f"Fix: pass {fix}" in str(err.value), str(err.value)


def test_a_backend_with_only_id_and_dispatch_runs_kernels_through_the_contract_defaults():
    """The kernel call and vyre.lib call the VyreBackend contract directly: an external
    backend that defines only id() and dispatch() gets the defaults (dispatch_arrays copies
    the bytes once, generated_source None, no device arrays), warm calls included; an object
    that is not a backend is refused with a code."""
    from vyre.lib.errors import LibError
    from vyre.lib.runner import Runner

    from helpers import MockBackend

    @vyre.kernel(workgroup_size=1)     # the contract's default limits: one invocation per workgroup
    def add1(a: In[f32], b: In[f32], o: Out[f32]):
        i = gid()
        o[i] = a[i] + b[i]

    mock = MockBackend()
    a = np.arange(5, dtype=np.float32)
    for _ in range(2):     # the second call runs the warm plan
        got = add1(a, a, backend=mock)
        assert got.dtype == np.float32 and got.tolist() == (a + a).tolist() and got.flags.writeable
    assert mock.calls == 2
    assert add1.source(mock) == str(add1.program)
    assert Runner(mock).device is False
    with pytest.raises(LibError) as err:
        Runner(object())
    assert err.value.code == "L005"
    assert _code(_add, a, a, backend=object()) == "K021"


@vyre.kernel
def _count64(x: In[u32], o: Out[u64, 4]):
    i = gid()
    if i < len(x):
        atomic_add(o, x[i] % 4, 1)


def test_a_backend_that_cannot_run_a_kernel_says_why_in_kernel_words():
    """backend='wgpu' for a kernel with 64-bit atomics (core WGSL has none) is K024 in the
    author's words (no op ids, no FILE to pass), naming the kernel's line and a backend that
    runs it; that backend gives the right counts."""
    from conftest import get_backend
    from vyre.kernel.launch import KernelRefused

    wgpu = get_backend("wgpu")
    x = np.arange(10, dtype=np.uint32)
    with pytest.raises(KernelRefused) as err:
        _count64(x, backend=wgpu)
    text = str(err.value)
    assert err.value.kernel_code == "K024" and "64-bit atomics" in text and _count64._build().where in text, text
    assert "vyre." not in text and "FILE" not in text, text
    alt = re.search(r"pass backend='(\w+)' \(it runs this kernel\)", err.value.fix)
    assert alt and alt.group(1) != "wgpu", text
    assert _count64(x, backend=alt.group(1)).tolist() == [3, 3, 2, 2]
