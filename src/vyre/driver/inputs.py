"""The one recipe that turns what a caller passes into the bytes a buffer receives.

Every entry point of every backend reaches its inputs through `check_inputs` (typed
buffers) or `raw_words` (untyped resident uploads); nothing else converts caller data.

Accepted, per input buffer (declaration order):

* a numpy array whose dtype is the buffer's element type (little-endian, C-contiguous, any
  shape; BOOL buffers take u32/i32 words);
* ``bytes``, ``bytearray`` or a contiguous ``memoryview``: raw little-endian bytes;
* a device array (``__cuda_array_interface__``, or ``__dlpack__`` on a GPU) whose dtype is the
  buffer's, on backends that read device memory (`Device.device_input`);
* a CPU ``__dlpack__`` producer (torch CPU tensors, jax CPU arrays), read through numpy.

Anything else — a wrong dtype, a big-endian or strided array, a list, None, a scalar — is an
`InvalidInput` with a stable ``reason`` and a Fix naming the conversion to make. Host inputs
come back as 1-D little-endian arrays that may alias the caller's memory (the engine copies
them into staging before returning from any call): u32 words when the length is whole words,
else bytes (narrow element types); device inputs as `DeviceInput`. `dlpack_dtype` reads a
DLPack producer's element type for callers that check arguments before a backend sees them.
"""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import DataType

from .errors import InvalidInput

_LITTLE = sys.byteorder == "little"
_NATIVE = "=<|" if _LITTLE else "<|"
_WANT = {DataType.U32: ("u4",), DataType.I32: ("i4",), DataType.F32: ("f4",),
         DataType.BOOL: ("u4", "i4"), DataType.U64: ("u8",), DataType.I64: ("i8",),
         DataType.U8: ("u1",), DataType.I8: ("i1",), DataType.U16: ("u2",), DataType.I16: ("i2",),
         DataType.F16: ("f2", "u2"), DataType.BF16: ("u2",)}
_NP_NAME = {DataType.U32: "np.uint32", DataType.I32: "np.int32", DataType.F32: "np.float32",
            DataType.BOOL: "np.uint32", DataType.U64: "np.uint64", DataType.I64: "np.int64",
            DataType.U8: "np.uint8", DataType.I8: "np.int8", DataType.U16: "np.uint16",
            DataType.I16: "np.int16", DataType.F16: "np.float16",
            DataType.BF16: "np.uint16 (the bfloat16 bits)"}
_DLPACK_CPU = 1
_U4 = np.dtype("<u4")


class DeviceInput:
    """A device array bound to one buffer: ``value`` is the caller's object (kept alive),
    ``ptr``/``nbytes`` its memory as the backend resolved it, ``stream`` the producer's
    stream the dispatch must be ordered after (None: nothing to wait for; the engine orders
    its queue after it when it enqueues the dispatch, `Device.order_after`)."""

    __slots__ = ("nbytes", "ptr", "stream", "value")

    def __init__(self, value: Any, ptr: int, nbytes: int, stream: Any = None) -> None:
        self.value, self.ptr, self.nbytes, self.stream = value, ptr, nbytes, stream


Input = np.ndarray | DeviceInput   # host words, or a device array


def _typestr_ok(decl: BufferDecl, kind: str, itemsize: int) -> bool:
    return f"{kind}{itemsize}" in _WANT[decl.dtype]


def array_library(x: Any) -> str:
    """The top-level package of ``x``'s type: "numpy", "cupy", "torch", "builtins", ..."""
    return type(x).__module__.split(".")[0]


# DLPack's C structs (dlpack.h, ABI 0.x/1.x): the legacy capsule "dltensor" holds a
# DLManagedTensor, whose first member is this DLTensor
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}   # kDLInt, kDLUInt, kDLFloat, kDLBool
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype, _capsule_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


def dlpack_dtype(x: Any) -> np.dtype | None:
    """The element dtype of a ``__dlpack__`` producer on any device, read from the capsule it
    hands out without consuming it (the capsule's own destructor releases it), and asking for
    no stream synchronisation (``stream=-1``; a producer that refuses that is asked without
    one). None when the producer gives no readable capsule or an element type numpy has no
    dtype for (bfloat16, complex, vectors): the backend's own check decides those."""
    try:
        try:
            capsule = x.__dlpack__(stream=-1)
        except Exception:
            capsule = x.__dlpack__()
        if not _capsule_valid(capsule, b"dltensor"):
            return None
        dt = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dtype
        code, bits, lanes = int(dt.code), int(dt.bits), int(dt.lanes)
    except Exception:
        return None
    kind = _DL_KINDS.get(code)
    if kind is None or lanes != 1 or bits % 8:
        return None
    try:
        return np.dtype(f"<{kind}{bits // 8}" if kind != "b" else "?")
    except TypeError:
        return None


def convert_hint(x: Any, dtype: DataType, name: str = "x") -> str:
    """The call that converts ``x`` to ``dtype``'s element type in the caller's own array
    library: ``x.to(torch.float32)`` for torch, ``x.astype(cupy.float32)`` for CuPy,
    ``x.astype(np.float32)`` otherwise (the one recipe for every dtype Fix)."""
    np_name, _, note = _NP_NAME[dtype].partition(" ")
    short = np_name.removeprefix("np.")
    mod = array_library(x)
    if mod == "torch":
        call = f"{name}.to(torch.{short})"
    elif mod == "cupy":
        call = f"{name}.astype(cupy.{short})"
    else:
        call = f"{name}.astype({np_name})"
    return f"{call} {note}".rstrip()


def _fix_dtype(decl: BufferDecl, source: Any) -> str:
    raw = " (or the raw bytes: x.tobytes())" if array_library(source) in ("numpy", "builtins") else ""
    return f"pass {convert_hint(source, decl.dtype)}{raw}"


def check_dtype(decl: BufferDecl, dt: np.dtype, where: str, backend: str | None, source: Any = None) -> None:
    """Refuse an array dtype that is not ``decl``'s element type, or not little-endian.
    ``source``: the caller's array (its library names the conversion in the Fix)."""
    if not _typestr_ok(decl, dt.kind, dt.itemsize) or dt.fields is not None:
        raise InvalidInput("input_dtype", f"{where} is a {dt} array but {decl.name!r} holds "
                           f"{decl.dtype.value}.", _fix_dtype(decl, source), backend=backend)
    if dt.byteorder not in _NATIVE:
        raise InvalidInput("input_byteorder", f"{where} is big-endian ({dt.str}).",
                           f"pass x.astype('<{dt.kind}{dt.itemsize}') (vyre buffers are "
                           "little-endian).", backend=backend)


def _flat(x: np.ndarray) -> np.ndarray:
    """A contiguous array as u32 words when its length is whole words, else as bytes."""
    flat = x.reshape(-1)
    if flat.dtype == _U4:
        return flat
    if x.nbytes % 4:
        return flat.view(np.uint8)
    return flat.view(np.uint8).view(_U4)


def _from_numpy(decl: BufferDecl, x: np.ndarray, where: str, backend: str | None,
                source: Any = None) -> np.ndarray:
    check_dtype(decl, x.dtype, where, backend, x if source is None else source)
    if not x.flags.c_contiguous:
        raise InvalidInput("input_layout", f"{where} is not C-contiguous (strides {x.strides}).",
                           "pass np.ascontiguousarray(x).", backend=backend)
    return _flat(x)


def _raw(x: Any, where: str, backend: str | None) -> np.ndarray:
    try:
        mv = memoryview(x)
    except TypeError:
        raise InvalidInput("input_type", f"{where} is a {type(x).__name__}, not bytes-like.",
                           "pass a numpy array, bytes, bytearray or a contiguous memoryview.",
                           backend=backend) from None
    if not mv.c_contiguous:
        raise InvalidInput("input_layout", f"{where} is a non-contiguous memoryview.",
                           "pass bytes(view) or a contiguous array.", backend=backend)
    raw = np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)
    return raw if raw.size % 4 else raw.view("<u4")


def raw_words(x: Any, where: str = "data", backend: str | None = None,
              device_ok: bool = False) -> np.ndarray | None:
    """Untyped bytes (resident uploads): any contiguous numpy array or bytes-like object as
    little-endian u32 words (bytes when the length is not whole words). Returns None for a
    device array when ``device_ok``."""
    if type(x) is np.ndarray or isinstance(x, np.ndarray):
        if x.dtype.byteorder not in _NATIVE or x.dtype.hasobject:
            raise InvalidInput("input_dtype", f"{where} is a {x.dtype} array.",
                               "pass little-endian numeric data.", backend=backend)
        if not x.flags.c_contiguous:
            raise InvalidInput("input_layout", f"{where} is not C-contiguous.",
                               "pass np.ascontiguousarray(x).", backend=backend)
        return _flat(x)
    if isinstance(x, bytes | bytearray | memoryview):
        return _raw(x, where, backend)
    if hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
        if device_ok:
            return None
        raise InvalidInput("input_device", f"{where} is a device array ({type(x).__name__}).",
                           "copy it to the host first (x.get() / x.cpu().numpy()).", backend=backend)
    raise InvalidInput("input_type", f"{where} is a {type(x).__name__}, not bytes-like.",
                       "pass a numpy array, bytes, bytearray or a contiguous memoryview.",
                       backend=backend)


# verdicts of `cai_span` for layouts already checked: (element type, typestr, shape, strides)
# -> nbytes (a warm call with the same kind of array repeats no parsing; only what passed)
_SPANS: dict[tuple, int] = {}
_SPANS_MAX = 4096


def cai_span(decl: BufferDecl | None, x: Any, where: str, backend: str | None,
             cai: dict | None = None) -> tuple[int, int]:
    """(pointer, nbytes) of a C-contiguous ``__cuda_array_interface__`` array whose typestr
    matches ``decl`` (any 32-bit type when ``decl`` is None). ``cai``: the interface when the
    caller has read it already (it is read once per call: CuPy builds it on every read)."""
    if cai is None:
        cai = x.__cuda_array_interface__
    try:
        key = (None if decl is None else decl.dtype, cai["typestr"], cai["shape"], cai.get("strides"))
        nbytes = _SPANS.get(key)
        if nbytes is not None:
            return int(cai["data"][0]), nbytes
    except (KeyError, TypeError, AttributeError):   # unhashable or malformed: the full check says
        key = None
    try:
        shape = tuple(int(s) for s in cai["shape"])
        dt = np.dtype(cai["typestr"])
        ptr = int(cai["data"][0])
    except (KeyError, TypeError, ValueError):
        raise InvalidInput("input_type", f"{where} has a malformed __cuda_array_interface__.",
                           "pass a CuPy array or a torch CUDA tensor.", backend=backend) from None
    if decl is not None:
        check_dtype(decl, dt, where, backend, x)
    strides = cai.get("strides")
    if strides is not None:
        expect, acc = [], dt.itemsize
        for dim in reversed(shape):
            expect.append(acc)
            acc *= dim
        if tuple(reversed(expect)) != tuple(strides) and math.prod(shape) > 1:
            raise InvalidInput("input_layout", f"{where} is a non-contiguous device array.",
                               "pass a contiguous array (x.contiguous() / cupy.ascontiguousarray(x)).",
                               backend=backend)
    nbytes = math.prod(shape) * dt.itemsize
    if key is not None:
        if len(_SPANS) >= _SPANS_MAX:
            _SPANS.clear()
        _SPANS[key] = nbytes
    return ptr, nbytes


def check_input(decl: BufferDecl, x: Any, where: str, backend: str | None,
                device_input: Any = None) -> Input:
    """The input for one buffer. ``device_input(decl, x, where, cai)`` resolves device arrays
    (``cai``: the ``__cuda_array_interface__`` read here, or None for a DLPack producer) on
    backends that read device memory (None: device arrays are refused)."""
    if type(x) is np.ndarray:
        return _from_numpy(decl, x, where, backend)
    if isinstance(x, bytes | bytearray | memoryview):
        return _raw(x, where, backend)
    if isinstance(x, np.ndarray):  # subclasses (np.memmap, ...)
        return _from_numpy(decl, np.asarray(x), where, backend)
    cai = getattr(x, "__cuda_array_interface__", None)   # read once (CuPy builds it per read)
    if cai is None and hasattr(x, "__dlpack__"):
        try:
            dev_type = int(x.__dlpack_device__()[0])
        except Exception:
            dev_type = -1
        if dev_type == _DLPACK_CPU:
            try:
                arr = np.from_dlpack(x)
            except Exception as exc:
                raise InvalidInput("input_type", f"{where} ({type(x).__name__}) could not be read "
                                   f"through DLPack ({exc}).", "pass a numpy array.",
                                   backend=backend) from None
            return _from_numpy(decl, arr, where, backend, x)
    elif cai is None:
        hint = "pass np.asarray(x, dtype=...) for the buffer's type" if isinstance(x, list | tuple) \
            else "pass a numpy array, bytes, bytearray or a contiguous memoryview"
        raise InvalidInput("input_type", f"{where} is a {type(x).__name__}, not an array or bytes.",
                           hint + ".", backend=backend)
    if device_input is None:
        raise InvalidInput("input_device", f"{where} is a device array ({type(x).__name__}); "
                           f"the {backend} backend reads host memory.",
                           "copy it to the host (x.get() / x.cpu().numpy()) or use the cuda "
                           "backend.", backend=backend)
    return device_input(decl, x, where, cai)


def accepted_dtypes(decl: BufferDecl) -> frozenset[np.dtype]:
    """The numpy dtypes an input of ``decl`` may have (native little-endian only)."""
    return frozenset(np.dtype("<" + t) for t in _WANT[decl.dtype])


class InputChecker:
    """`check_inputs` specialised for one program: the declarations, accepted dtypes and
    error locations are computed once, and the common cases (right-typed contiguous numpy
    arrays; device arrays) cost a few attribute reads per input."""

    __slots__ = ("backend", "decls", "device_input", "fast", "where")

    def __init__(self, program: Program, backend: str | None, device_input: Any = None) -> None:
        self.decls = program.inputs
        # the dtype object a 1-D array of each input has in the common case (builtin dtypes
        # are singletons, so an identity test suffices; anything else takes the full check)
        self.fast = tuple(np.dtype("<" + _WANT[d.dtype][0]) for d in self.decls)
        self.where = tuple(f"input {i} ({d.name!r})" for i, d in enumerate(self.decls))
        self.backend, self.device_input = backend, device_input

    def __call__(self, inputs: Any) -> list[Input]:
        decls = self.decls
        if (type(inputs) is not list and type(inputs) is not tuple) or len(inputs) != len(decls):
            return check_inputs(decls, inputs, self.backend, self.device_input)
        out: list[Input] = []
        for x, dt, d, where in zip(inputs, self.fast, decls, self.where):
            if type(x) is np.ndarray and x.dtype is dt and x.ndim == 1 and x.flags.c_contiguous:
                out.append(x if dt is _U4 else _flat(x))
            else:
                out.append(check_input(d, x, where, self.backend, self.device_input))
        return out


def check_inputs(decls: tuple[BufferDecl, ...], inputs: Any, backend: str | None,
                 device_input: Any = None) -> list[Input]:
    """Check every input against its declaration (count, type, dtype, byte order, layout)."""
    if isinstance(inputs, np.ndarray | bytes | bytearray | memoryview | str) or \
            not isinstance(inputs, Sequence):
        raise InvalidInput("input_type", f"inputs must be a list (one value per input buffer), got "
                           f"{type(inputs).__name__}.", "pass [x, y, ...] in declaration order "
                           f"({', '.join(b.name for b in decls) or 'no inputs'}).", backend=backend)
    if len(inputs) != len(decls):
        raise InvalidInput("input_count", f"the program takes {len(decls)} input(s) "
                           f"({', '.join(b.name for b in decls) or 'none'}) but {len(inputs)} were given.",
                           "pass one value per READ/READ_WRITE buffer, in declaration order.",
                           backend=backend)
    return [check_input(d, x, f"input {i} ({d.name!r})", backend, device_input)
            for i, (d, x) in enumerate(zip(decls, inputs))]
