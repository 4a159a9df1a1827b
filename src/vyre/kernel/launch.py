"""Calling a kernel: Python values in, numpy arrays out.

``saxpy(x, y)`` passes one value per In/InOut/Scalar parameter (Out parameters are made by
the call), dispatches on the first backend by precedence that can run the program (or
``backend=``) and returns the outputs — Out and InOut buffers in parameter order — as
writable numpy arrays of their declared dtype and shape (one array, or a tuple). ``out=``
gives arrays to write them into (any writable layout).

Launch options: ``grid=`` workgroups per axis (``saxpy[grid](x, y)`` too); ``dim=``
invocations per axis (Warp's ``dim``: the grid is derived from the workgroup size);
``elements=`` the element count of runtime-sized outputs (and of the default 1-D launch);
``shape=`` the shape of runtime-sized N-D outputs. Every argument is checked here; a wrong
one is a `KernelError` naming the kernel's ``def`` line. A backend's error during the call
(a while loop over its cap, an argument it cannot read, ...) keeps its class and names the
line too (`vyre.kernel.errors.located`).
"""

from __future__ import annotations

import decimal
import importlib
import logging
import math
import numbers
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from vyre.driver.backend import VyreBackend
from vyre.driver.errors import BackendError, UnsupportedFeature
from vyre.driver.inputs import array_library, convert_hint, dlpack_dtype
from vyre.ir import DataType, Program, VyreError

from .errors import KernelError, located
from .types import BufferSpec, ScalarSpec

log = logging.getLogger("vyre.kernel")
_ROUTES: dict[bytes, str] = {}
_PREFERRED: dict[str, Any] = {}
_LOCK = threading.Lock()
_F32_EDGE = (2 - 2.0 ** -24) * 2.0 ** 127


def _int(value: Any) -> int | None:
    """An integer argument (Python or numpy integer, not bool), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def axes(value: Any, what: str, lo: int, where: str) -> tuple[int, int, int]:
    """``grid=``/``dim=``: an integer or 1 to 3 integers >= ``lo``, as three axes."""
    items = [value] if _int(value) is not None else (
        list(value) if isinstance(value, tuple | list) else None)
    bad = items is None or not 1 <= len(items) <= 3 or any(_int(v) is None or int(v) < lo for v in items)
    if bad or any(int(v) > 2**31 - 1 for v in items or ()):
        raise KernelError(f"{what}={value!r} is not 1 to 3 integers >= {lo} (and below 2**31).",
                          f"pass {what}=n or {what}=(x, y) / (x, y, z) with whole numbers.", "K021", where)
    got = tuple(int(v) for v in items)  # type: ignore[union-attr]
    return (got + (1, 1, 1))[:3]  # type: ignore[return-value]


def check_workgroup(value: Any, where: str) -> tuple[int, ...]:
    """``@vyre.kernel(workgroup_size=...)``: an integer or 1 to 3 positive integers."""
    items = [value] if _int(value) is not None else (
        list(value) if isinstance(value, tuple | list) else None)
    if items is None or not 1 <= len(items) <= 3 or any(_int(v) is None or not 1 <= int(v) <= 1024
                                                        for v in items):
        raise KernelError(f"workgroup_size={value!r} is not 1 to 3 integers in 1..1024.",
                          "pass workgroup_size=256 or workgroup_size=(16, 16).", "K021", where)
    return tuple(int(v) for v in items)


def resolve_backend(backend: Any, program: Program | None = None, where: str = "") -> Any:
    """The backend object a call runs on: ``backend=`` (an id or a backend), ``VYRE_BACKEND``,
    or the first backend by precedence that can run ``program`` (logged when a preferred one
    that is here cannot). Without a ``program`` (callers such as `vyre.lib`): the id
    acquired, or the preferred dispatch backend."""
    from vyre.driver import acquire, settings

    if program is None:
        from vyre.driver import acquire_preferred_dispatch_backend

        if backend is None:
            with _LOCK:
                b = _PREFERRED.get("preferred")
                if b is None or getattr(b, "closed", False):
                    b = _PREFERRED["preferred"] = acquire_preferred_dispatch_backend()
            return b
        return acquire(backend) if isinstance(backend, str) else backend
    from vyre.driver.registry import (
        registered_backends,
        registered_backends_by_precedence,
        unknown_backend_fix,
    )

    if backend is None:
        named = settings.get("VYRE_BACKEND")
        if named:
            backend = named.strip()
    if isinstance(backend, str):
        ids = [r.id for r in registered_backends()]
        if backend not in ids:
            raise KernelError(f"there is no backend {backend!r}.", unknown_backend_fix(backend), "K021", where)
        return _explicit(acquire(backend), program, where)
    if backend is not None:
        if not isinstance(backend, VyreBackend):
            raise KernelError(f"backend={backend!r} is not a backend id or backend object.",
                              "pass an id such as 'opencl', or an object from vyre.driver.acquire(id).",
                              "K021", where)
        return _explicit(backend, program, where)
    from vyre.ir import fingerprint

    key = fingerprint(program)
    with _LOCK:
        chosen = _ROUTES.get(key)
    if chosen is not None:
        return acquire(chosen)
    reasons: list[str] = []
    refused: list[str] = []
    for reg in registered_backends_by_precedence():
        if reg.reference_oracle or not reg.dispatches or not reg.implicit:
            continue
        try:
            b = acquire(reg.id)
        except BackendError as err:
            reasons.append(f"{reg.id}: unavailable ({err.message})")
            continue
        why = refusal(b, program)
        if why:
            reasons.append(f"{reg.id}: {why}")
            refused.append(f"{reg.id} cannot run it: {why}")
            continue
        if refused:   # a preferred backend that is here cannot run this kernel: say so
            log.info("vyre.kernel: the kernel at %s runs on %s (%s)", where, reg.id, "; ".join(refused))
        log.debug("vyre.kernel: routed to %s", reg.id)
        with _LOCK:
            _ROUTES[key] = reg.id
        return b
    raise KernelError(f"no backend can run this kernel ({'; '.join(reasons) or 'none is registered'}).",
                      "install a backend that can (`vyre doctor`), change the kernel, or pass "
                      "backend='reference' to run it on the CPU reference.", "K024", where)


def _explicit(b: Any, program: Program, where: str) -> Any:
    """A backend the caller named: refused in kernel words when it cannot run the program."""
    why = refusal(b, program)
    if not why:
        return b
    try:
        alt = resolve_backend(None, program, where).id()
        fix = f"pass backend={alt!r} (it runs this kernel), or leave backend= out to route it."
    except VyreError:
        fix = "pass backend='reference' (the CPU reference runs every kernel)."
    raise KernelRefused(b.id(), f"the {b.id()} backend cannot run the kernel at {where}: {why}.", fix)


def plain(text: str) -> str:
    """A backend's refusal in a kernel author's words: op ids become what the kernel wrote
    (``vyre.un_op.exp`` -> ``exp()``, ``vyre.dtype.u64`` -> ``u64 values``)."""
    import re

    text = text.replace("unsupported ops: ", "uses ")
    text = re.sub(r"vyre\.dtype\.(\w+)", r"\1 values", text)
    text = re.sub(r"vyre\.(?:un_op|bin_op|expr|atomic|subgroup)\.(\w+)", r"\1()", text)
    return re.sub(r"vyre\.[\w.]+\.(\w+)", r"\1", text)


class KernelRefused(UnsupportedFeature):
    """The backend named for a kernel call cannot run it: an `UnsupportedFeature` (code 1002)
    whose text is in kernel words and names a backend that can (``kernel_code`` K024)."""

    kernel_code = "K024"

    def __init__(self, backend: str, message: str, fix: str) -> None:
        self.name = message
        BackendError.__init__(self, f"[K024] {message}", fix, backend=backend)


_CHECKED: dict[tuple[str, bytes], str] = {}


def refusal(b: Any, program: Program) -> str:
    """Why backend ``b`` cannot run ``program``, in kernel words ('' if it can; cached)."""
    from vyre.driver.registry import why_not
    from vyre.ir import fingerprint

    key = (b.id(), fingerprint(program))
    with _LOCK:
        got = _CHECKED.get(key)
    if got is None:
        why = why_not(program, b)
        if not why:
            try:   # target checks, then code generation (where some refusals happen)
                b.refuse(program)
                b.generated_source(program)
            except UnsupportedFeature as err:
                why = [err.message.removeprefix(f"[{b.id()}] ").removesuffix(" is not supported by this backend.")]
        got = plain("; ".join(why))
        with _LOCK:
            _CHECKED[key] = got
    return got


def _host_array(value: Any, dtype: DataType, where: str, name: str) -> Any:
    """A numpy array of the buffer's dtype (any shape; the caller flattens it), or a device
    array / DLPack producer of the buffer's dtype as given (the backend checks the rest)."""
    want = np.dtype(dtype.host)
    mod = array_library(value)
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        try:
            got = np.dtype(cai["typestr"])
        except (KeyError, TypeError, ValueError):
            return value    # malformed: the backend refuses it
        if got != want:
            raise _wrong_dtype(value, f"a {mod} {got} device array", dtype, where, name)
        return value
    if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
        on_cpu = False
        try:
            on_cpu = int(value.__dlpack_device__()[0]) == 1
        except Exception:
            pass
        if not on_cpu:
            got = dlpack_dtype(value)   # None: not readable here; the backend's check decides
            if got is not None and got != want:
                raise _wrong_dtype(value, f"a {mod} {got} device array", dtype, where, name)
            return value
        try:
            arr = np.from_dlpack(value)
        except Exception:
            return value
        if arr.dtype != want:
            raise _wrong_dtype(value, f"a {mod} {arr.dtype} array", dtype, where, name)
        return arr
    if isinstance(value, np.ndarray):
        if value.dtype != want:
            raise _wrong_dtype(value, f"a {value.dtype} array", dtype, where, name)
        return value
    if isinstance(value, list | tuple):
        return _from_list(value, dtype, want, where, name)
    if isinstance(value, bytes | bytearray | memoryview):
        return value
    raise KernelError(f"argument {name!r} is a {type(value).__name__}, not an array.",
                      f"pass a numpy array of {dtype.value} (or a CuPy/torch array on the cuda backend).",
                      "K020", where)


def _wrong_dtype(value: Any, what: str, dtype: DataType, where: str, name: str) -> KernelError:
    """K020 for an array of another dtype: the Fix converts it in the caller's library."""
    return KernelError(f"argument {name!r} is {what}; the kernel declares {dtype.value}.",
                       f"pass {convert_hint(value, dtype, name)} (vyre never converts dtypes silently).",
                       "K020", where)


def _from_list(value: Any, dtype: DataType, want: np.dtype, where: str, name: str) -> np.ndarray:
    """A list checked like an array: numbers of the right kind that fit ``dtype``."""
    def refuse(why: str) -> KernelError:
        return KernelError(f"argument {name!r} is a list that is not {dtype.value} data ({why}).",
                           f"pass numbers that fit {dtype.value}, or np.array(..., dtype=np.{want.name}).",
                           "K020", where)

    try:
        raw = np.array(value, dtype=object)
    except ValueError:
        raise refuse("ragged nesting") from None
    flat = raw.reshape(-1)
    if raw.ndim and any(isinstance(v, list | tuple | np.ndarray) for v in flat):
        raise refuse("ragged nesting")
    is_int = not dtype.is_float and dtype is not DataType.BOOL
    for v in flat:
        if isinstance(v, bool | np.bool_):
            if dtype is not DataType.BOOL and not is_int:
                raise refuse(f"{v!r} is a bool")
            continue
        if is_int:
            if not isinstance(v, numbers.Integral):
                raise refuse(f"{v!r} is not an integer")
            info = np.iinfo(want)
            if not info.min <= int(v) <= info.max:
                raise refuse(f"{v!r} is outside {info.min}..{info.max}")
        else:
            if not isinstance(v, numbers.Real):
                raise refuse(f"{v!r} is not a number")
            try:
                f = float(v)
            except OverflowError:
                raise refuse(f"{v!r} overflows {dtype.value}") from None
            with np.errstate(over="ignore"):
                wide = float(np.asarray(f, dtype=want))
            if math.isfinite(f) and math.isinf(wide):
                raise refuse(f"{v!r} overflows {dtype.value}")
    try:
        return np.asarray(raw.tolist() if raw.ndim else raw.item(), dtype=want).reshape(raw.shape)
    except (ValueError, OverflowError, TypeError) as exc:
        raise refuse(str(exc)) from None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "..." + text[-6:]


def _scalar(value: Any, spec: ScalarSpec, where: str, name: str) -> np.ndarray:
    t = spec.dtype
    fix = f"pass a Python or numpy number that fits {t.value}."
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, str | bytes) or not isinstance(value, numbers.Number | decimal.Decimal) or \
            isinstance(value, complex | np.complexfloating):
        raise KernelError(f"argument {name!r} = {_short(value)} is not a number.", fix, "K020", where)
    num: Any = value   # a real number now (numbers.Number or Decimal, not complex)
    try:
        if t is DataType.BOOL:
            return np.array([1 if value else 0], dtype=np.uint32)
        if t.is_float:
            f = float(num)
            with np.errstate(over="ignore"):
                out = np.array([f], dtype=t.host)
            if math.isfinite(f) and not math.isfinite(float(out[0])):
                raise OverflowError(f"it overflows {t.value}")
            return out
        if isinstance(value, float | np.floating | decimal.Decimal) and not (
                math.isfinite(float(value)) and float(value).is_integer()):
            raise ValueError("not an integer")
        info = np.iinfo(t.host)
        v = int(num)
        if not info.min <= v <= info.max:
            raise ValueError(f"outside {info.min}..{info.max}")
        return np.array([v], dtype=t.host)
    except (TypeError, ValueError, OverflowError, decimal.InvalidOperation) as exc:
        raise KernelError(f"argument {name!r} = {_short(value)} is not a {t.value} ({exc}).", fix, "K020",
                          where) from None


def _on_device(x: Any) -> bool:
    if hasattr(x, "__cuda_array_interface__"):
        return True
    if hasattr(x, "__dlpack_device__") and not isinstance(x, np.ndarray):
        try:
            return int(x.__dlpack_device__()[0]) != 1   # 1: kDLCPU
        except Exception:
            return False
    return False


def _like(example: Any, out: Any) -> Any:
    """A `DeviceOutput` as the caller's array type (no copy): CuPy or torch, else the
    `DeviceOutput` itself (it has ``__cuda_array_interface__``). Only for outputs the backend
    allocated: CuPy and torch callers get outputs from their own allocator (`_allocator`)."""
    mod = array_library(example)
    if mod == "cupy":
        cupy = importlib.import_module("cupy")   # optional: no stubs needed

        return cupy.asarray(out)
    if mod == "torch":
        torch = importlib.import_module("torch")

        return torch.as_tensor(out, device=example.device)
    return out


def _allocator(example: Any) -> Any:
    """``alloc(nbytes, dtype)`` for `dispatch_device` in the caller's array library, so the
    outputs come back as its own arrays from its own pool (no wrapping, and freed by the
    library that knows which stream last used them): CuPy arrays on the current device, torch
    tensors on the example's device; None for other device arrays."""
    mod = array_library(example)
    if mod == "cupy":
        cupy = importlib.import_module("cupy")   # optional: no stubs needed

        empty = cupy.empty

        def alloc(nbytes: int, dtype: DataType) -> Any:
            host = _HOST[dtype]
            return empty(nbytes // host.itemsize, host)

        return alloc
    if mod == "torch" and getattr(example, "is_cuda", False):
        torch = importlib.import_module("torch")

        device = example.device
        kinds: dict[DataType, Any] = {}

        def talloc(nbytes: int, dtype: DataType) -> Any:
            t = kinds.get(dtype)
            if t is None:
                t = kinds[dtype] = torch.from_numpy(np.empty(0, _HOST[dtype])).dtype
            return torch.empty(nbytes // _HOST[dtype].itemsize, dtype=t, device=device)

        return talloc
    return None


_HOST = {t: np.dtype(t.host) for t in DataType}


def _config(config: Any, fields: dict[str, Any], where: str) -> Any:
    from vyre.driver import DispatchConfig

    if config is not None and not isinstance(config, DispatchConfig):
        raise KernelError(f"config={config!r} is not a DispatchConfig.",
                          "pass vyre.driver.DispatchConfig(...) or leave config out.", "K021", where)
    try:
        if config is not None:
            return replace(config, **fields) if fields else config
        return DispatchConfig(**fields) if fields else None
    except VyreError as err:
        raise KernelError(err.message, err.fix, "K021", where) from None


def _length(arr: Any, dtype: DataType) -> int | None:
    """The element count of an argument: its shape's product, or whole elements of raw bytes
    (None when the bytes are not whole elements: the backend refuses those)."""
    if isinstance(arr, bytes | bytearray | memoryview):
        n = memoryview(arr).nbytes
        return n // dtype.size if n % dtype.size == 0 else None
    shape = getattr(arr, "shape", None)
    return None if shape is None else math.prod(tuple(shape))


def _check_sized(params: Sequence[tuple[str, Any]], name: str, where: str, has_dim: bool) -> None:
    """Refuse a call that leaves a runtime-sized 1-D output without a length: no ``elements=``
    and no runtime-sized input whose length it could take."""
    if any(isinstance(s, BufferSpec) and s.access != "output" and not s.count for _, s in params):
        return
    unsized = [(p, s) for p, s in params if isinstance(s, BufferSpec) and s.access == "output" and not s.count]
    if not unsized:
        return
    pname, spec = unsized[0]
    also = " (dim= sets the invocations, not the length)" if has_dim else ""
    raise KernelError(f"the output {pname!r} of {name}() is runtime-sized and no input gives it a length{also}.",
                      f"pass elements=n with the call, or declare its length: {pname}: Out[{spec.dtype.value}, n].",
                      "K021", where)


def _call_slow(built: Any, name: str, args: Sequence[Any], key: tuple | None, *, out: Any = None,
               grid: Any = None, elements: Any = None, backend: Any = None, config: Any = None,
               dim: Any = None, shape: Any = None) -> Any:
    """A call with every check spelled out; when ``key`` is given (the call can be planned),
    its data-independent results are kept as a `_Plan` under that key."""
    program, params, where = built.program, built.params, built.where
    takes = [(n, s) for n, s in params if not (isinstance(s, BufferSpec) and s.access == "output")]
    if len(args) != len(takes):
        raise KernelError(f"{name}() takes {len(takes)} argument(s) ({', '.join(n for n, _ in takes)}), "
                          f"got {len(args)}.", "pass one value per In/InOut/Scalar parameter, in order "
                          "(Out parameters are returned).", "K020", where)
    fields: dict[str, Any] = {}
    if grid is not None:
        fields["grid_override"] = axes(grid, "grid", 0, where)
    if dim is not None:
        if grid is not None:
            raise KernelError("both grid= and dim= are given.", "pass one: dim= counts invocations, grid= "
                              "workgroups.", "K021", where)
        fields["dispatch_grid"] = axes(dim, "dim", 0, where)
    if elements is not None:
        n = _int(elements)
        if n is None or not 0 <= n <= 2**32 - 1:
            raise KernelError(f"elements={elements!r} is not a whole number in 0..2**32-1.",
                              "pass elements=n, the element count of the runtime-sized outputs.", "K021", where)
        fields["dispatch_elements"] = n
    if shape is not None:
        shape = tuple(shape) if isinstance(shape, tuple | list) else (shape,)
        if not shape or any(_int(v) is None or int(v) < 0 for v in shape):
            raise KernelError(f"shape={shape!r} is not a tuple of whole numbers.",
                              "pass shape=(h, w), the shape of the runtime-sized N-D outputs.", "K021", where)
        shape = tuple(int(v) for v in shape)
    wg = program.workgroup_size
    if (wg[1] > 1 or wg[2] > 1) and grid is None and dim is None and \
            (config is None or (config.grid_override is None and config.dispatch_grid is None)):
        raise KernelError(f"{name} has a {wg[0]}x{wg[1]}x{wg[2]} workgroup but the call gives no grid.",
                          "pass dim=(width, height) (invocations per axis) or grid=(x, y) (workgroups).",
                          "K021", where)
    inputs: list[Any] = []
    ins_shapes: dict[str, tuple[int, ...]] = {}
    runtime_1d: list[tuple[str, int, tuple[int, ...]]] = []
    for (pname, spec), value in zip(takes, args):
        if isinstance(spec, ScalarSpec):
            inputs.append(_scalar(value, spec, where, pname))
            continue
        arr = _host_array(value, spec.dtype, where, pname)
        shp = tuple(getattr(arr, "shape", ()) or ())
        if spec.ndim > 1:
            if len(shp) != spec.ndim:
                raise KernelError(f"argument {pname!r} has {len(shp)} axis/axes; the kernel indexes it with "
                                  f"{spec.ndim}.", f"pass a {spec.ndim}-D array (reshape it).", "K014", where)
            if spec.count and shp != spec.dims:
                raise KernelError(f"argument {pname!r} has shape {shp}; the kernel declares {spec.dims}.",
                                  f"pass an array of shape {spec.dims}.", "K014", where)
            ins_shapes[pname] = shp
        elif spec.count and (length := _length(arr, spec.dtype)) not in (None, spec.count):
            ann = "In" if spec.access == "read" else "InOut"
            raise KernelError(f"argument {pname!r} has {length} elements; the kernel declares "
                              f"{spec.count} ({pname}: {ann}[{spec.dtype.value}, {spec.count}]).",
                              f"pass exactly {spec.count} elements, or declare it {ann}[{spec.dtype.value}] "
                              "to take any length.", "K014", where)
        elif isinstance(arr, np.ndarray) and not spec.count:
            runtime_1d.append((pname, arr.size, shp))
        if isinstance(arr, np.ndarray):
            arr = np.ascontiguousarray(arr).reshape(-1)
        inputs.append(arr)
    if elements is None and len({n for _, n, _ in runtime_1d}) > 1:
        listing = ", ".join(f"{p} has {n}" for p, n, _ in runtime_1d)
        raise KernelError(f"the inputs have different lengths ({listing}); the missing values would read as 0.",
                          "pass inputs of one length, declare a fixed count (In[u32, 256]) for tables, or "
                          "pass elements=n to say how many elements the launch covers.", "K023", where)
    # the shapes of N-D outputs: declared, shape=, or the first N-D input of the same rank
    out_shapes: dict[str, tuple[int, ...]] = {}
    for pname, spec in params:
        if not isinstance(spec, BufferSpec) or spec.access == "read":
            continue
        if spec.access == "read_write" and pname in ins_shapes:
            out_shapes[pname] = ins_shapes[pname]
        elif spec.count:
            out_shapes[pname] = spec.dims if spec.ndim > 1 else (spec.count,)
        elif spec.ndim > 1:
            got = shape or next((s for s in ins_shapes.values() if len(s) == spec.ndim), None)
            if got is None or len(got) != spec.ndim:
                raise KernelError(f"the {spec.ndim}-D output {pname!r} has no shape.",
                                  f"pass shape=({', '.join('n' * spec.ndim)}), or declare it: "
                                  f"Out[{spec.dtype.value}, 16, 16].", "K014", where)
            out_shapes[pname] = got
            count = int(np.prod(got))
            if "dispatch_elements" in fields and fields["dispatch_elements"] != count:
                raise KernelError(f"elements={fields['dispatch_elements']} differs from the output shape {got}.",
                                  "pass one of them.", "K021", where)
            fields["dispatch_elements"] = count
    for pname in built.shaped:
        shp = out_shapes.get(pname) or ins_shapes[pname]
        if any(v > 2**32 - 1 for v in shp):
            raise KernelError(f"{pname!r} has an axis over 2**32-1.", "split the array.", "K014", where)
        inputs.append(np.array(shp, dtype=np.uint32))
    cfg = _config(config, fields, where)
    if cfg is None or cfg.dispatch_elements is None:
        _check_sized(params, name, where, dim is not None)
    b = resolve_backend(backend, program, where)
    device = next((x for x in inputs if _on_device(x)), None)
    start = time.perf_counter()
    flat_shape = runtime_1d[0][2] if runtime_1d and len(runtime_1d[0][2]) > 1 and \
        len({s for _, _, s in runtime_1d}) == 1 else None
    plan = None
    if key is not None:
        plan = _Plan.make(built, name, takes, args, inputs, backend, b, cfg, device, out_shapes, flat_shape)
    if device is not None and out is None and b.reads_device_arrays():
        # device inputs: the outputs stay on the device, as the caller's array type
        alloc = _allocator(device)
        outs = b.dispatch_device(program, inputs, cfg, alloc=alloc) if alloc is not None else \
            [_like(device, o) for o in b.dispatch_device(program, inputs, cfg)]
        if plan is not None and key is not None:
            plan.device, plan.alloc = True, alloc
            _keep(built, key, plan)
        return outs[0] if len(outs) == 1 else tuple(outs)
    raw = b.dispatch_arrays(program, inputs, cfg)   # one copy out of the staging
    log.debug("vyre.kernel: %s ran on %s in %.3f ms", name, b.id(), (time.perf_counter() - start) * 1e3)
    arrays = []
    shapes: list[tuple[int, ...] | None] = []
    for a, d in zip(raw, program.outputs):
        want = out_shapes.get(d.name)
        if want is not None and len(want) > 1 and int(np.prod(want)) == a.size:
            shapes.append(want)
        elif flat_shape is not None and int(np.prod(flat_shape)) == a.size:
            shapes.append(flat_shape)     # an elementwise kernel given N-D arrays
        else:
            shapes.append(None)
        arrays.append(a if shapes[-1] is None else a.reshape(shapes[-1]))
    if plan is not None and key is not None and out is None:
        plan.shapes = tuple(shapes)
        _keep(built, key, plan)
    if out is not None:
        targets = list(out) if isinstance(out, list | tuple) else [out]
        if len(targets) != len(arrays):
            raise KernelError(f"out= has {len(targets)} array(s); {name}() has {len(arrays)} output(s).",
                              "pass one array per Out/InOut parameter, in order.", "K022", where)
        for t, a, d in zip(targets, arrays, program.outputs):
            if not isinstance(t, np.ndarray) or t.dtype != a.dtype or t.size != a.size or not t.flags.writeable:
                raise KernelError(f"out= array for {d.name!r} must be a writable {a.dtype} array of {a.size} "
                                  f"elements (got {getattr(t, 'dtype', type(t).__name__)}, "
                                  f"{getattr(t, 'size', '?')} elements).",
                                  f"allocate it with np.empty({a.shape}, np.{a.dtype.name}).", "K022", where)
            np.copyto(t, a.reshape(t.shape))   # any layout: strided views are written in place
        arrays = targets
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


# ---- warm calls -------------------------------------------------------------------------------
# A call whose arguments have the same kinds, dtypes and shapes as an earlier one that passed
# every check (and the same launch options) has the same check results, launch shape, config,
# backend and output shapes: only what depends on the data is done again (scalar values are
# checked and converted, device arrays are read by the backend, whose checks run on every
# call). The backend is re-validated cheaply: not shut down, and for a routed call the same
# route and VYRE_BACKEND.

def _np_sig(a: np.ndarray) -> tuple:
    return (np.ndarray, a.dtype, a.shape, a.flags.c_contiguous)


def _type_sig(a: Any) -> type:
    return type(a)


def _device_sig(a: Any) -> tuple:
    return (type(a), a.dtype, a.shape)


def _torch_sig(a: Any) -> tuple:
    return (type(a), a.dtype, a.shape, a.device)


def _sig_for(t: type) -> Any:
    """How a warm call recognises an argument of type ``t``: a function of the argument that
    captures everything the checks of `_call_slow` read from it, or None (never planned)."""
    if t is np.ndarray:
        return _np_sig
    if t in (int, float, bool) or issubclass(t, np.generic | decimal.Decimal):
        return _type_sig
    mod = t.__module__.split(".")[0]
    if mod == "cupy" and t.__name__ == "ndarray":
        return _device_sig
    if mod == "torch" and t.__name__ == "Tensor":
        return _torch_sig
    return None


_SIGS: dict[type, Any] = {}
_NO = object()
PLANS_PER_KERNEL = 64


def _call_key(args: Sequence[Any], grid: Any, elements: Any, backend: Any, config: Any, dim: Any,
              shape: Any) -> tuple | None:
    """The plan key of a call, or None when it cannot be planned (an argument of another
    kind, or an unhashable launch option)."""
    parts: list[Any] = [backend if backend is None or type(backend) is str else id(backend),
                        grid, elements, config, dim, shape]
    for a in args:
        sig = _SIGS.get(type(a), _NO)
        if sig is _NO:
            sig = _SIGS[type(a)] = _sig_for(type(a))
        if sig is None:
            return None
        parts.append(sig(a))
    return tuple(parts)


def _plans(built: Any) -> dict:
    plans = built.__dict__.get("_vyre_plans")
    if plans is None:
        plans = built.__dict__["_vyre_plans"] = {}
    return plans


def _keep(built: Any, key: tuple, plan: _Plan) -> None:
    plans = _plans(built)
    if len(plans) >= PLANS_PER_KERNEL:
        plans.clear()
    plans[key] = plan


class _Plan:
    """What a call with one argument signature needs besides the data (see above)."""

    __slots__ = ("alloc", "backend", "cfg", "convs", "device", "extra", "fp", "name", "named",
                 "program", "route", "shapes", "where")
    alloc: Any                  # the caller's allocator for device outputs (None: DeviceOutputs)
    backend: Any
    cfg: Any                    # the DispatchConfig every such call uses
    convs: tuple[tuple[int, ScalarSpec | None, str], ...]   # arguments converted on each call
    device: bool                # outputs stay on the device
    extra: tuple[np.ndarray, ...]   # the hidden N-D extents, fixed by the shapes
    fp: bytes | None            # the program's fingerprint, for a routed call
    name: str
    named: str | None           # VYRE_BACKEND when planned (a routed call)
    program: Program
    route: bool                 # no backend= given: the route is re-checked
    shapes: tuple[tuple[int, ...] | None, ...]   # host outputs' shapes
    where: str

    @staticmethod
    def make(built: Any, name: str, takes: list, args: Sequence[Any], inputs: list, backend: Any, b: Any,
             cfg: Any, device: Any, out_shapes: dict, flat_shape: Any) -> _Plan | None:
        from vyre.driver import settings

        if type(b).__module__.startswith("vyre.drivers.dask"):
            return None   # its routing decisions are the cluster's
        plan = _Plan()
        plan.program, plan.name, plan.where, plan.backend, plan.cfg = built.program, name, built.where, b, cfg
        plan.route = backend is None
        plan.named = settings.get("VYRE_BACKEND") if backend is None else None
        plan.fp = None
        if backend is None and plan.named is None:
            from vyre.ir import fingerprint

            plan.fp = fingerprint(built.program)
            with _LOCK:
                if _ROUTES.get(plan.fp) != b.id():
                    return None
        convs: list[tuple[int, ScalarSpec | None, str]] = []
        for i, ((pname, spec), a) in enumerate(zip(takes, args)):
            if isinstance(spec, ScalarSpec):
                convs.append((i, spec, pname))
            elif type(a) is np.ndarray and (a.ndim != 1 or not a.flags.c_contiguous):
                convs.append((i, None, pname))
            elif type(a) is not np.ndarray and _on_device(a) is False:
                return None   # a CPU tensor: converted by the full path only
        plan.convs = tuple(convs)
        plan.extra = tuple(inputs[len(takes):])   # the N-D extents: fixed by the shapes
        for x in plan.extra:
            x.flags.writeable = False
        plan.device, plan.alloc, plan.shapes = False, None, ()
        return plan

    def run(self, args: Sequence[Any]) -> Any:
        """The call, or `_NO` when the plan no longer holds (the caller takes the full path)."""
        b = self.backend
        if getattr(b, "closed", False):
            return _NO
        if self.route:
            from vyre.driver import settings

            if settings.get("VYRE_BACKEND") != self.named or \
                    (self.fp is not None and _ROUTES.get(self.fp) != b.id()):
                return _NO
        inputs = list(args)
        for i, spec, pname in self.convs:
            if spec is None:
                inputs[i] = np.ascontiguousarray(args[i]).reshape(-1)
            else:
                inputs[i] = _scalar(args[i], spec, self.where, pname)
        if self.extra:
            inputs.extend(self.extra)
        if self.device:
            if self.alloc is not None:
                outs = b.dispatch_device(self.program, inputs, self.cfg, alloc=self.alloc)
            else:
                example = next(x for x in inputs if _on_device(x))
                outs = [_like(example, o) for o in b.dispatch_device(self.program, inputs, self.cfg)]
            return outs[0] if len(outs) == 1 else tuple(outs)
        debug = log.isEnabledFor(logging.DEBUG)
        start = time.perf_counter() if debug else 0.0
        raw = b.dispatch_arrays(self.program, inputs, self.cfg)
        if debug:
            log.debug("vyre.kernel: %s ran on %s in %.3f ms", self.name, b.id(),
                      (time.perf_counter() - start) * 1e3)
        arrays = [a if s is None else a.reshape(s) for a, s in zip(raw, self.shapes)]
        return arrays[0] if len(arrays) == 1 else tuple(arrays)


def call(built: Any, name: str, args: Sequence[Any], *, out: Any = None, grid: Any = None,
         elements: Any = None, backend: Any = None, config: Any = None, dim: Any = None,
         shape: Any = None) -> Any:
    """Run ``built`` (a `vyre.kernel.frontend.Built`) with ``args``; see the module docstring.
    A warm call (same argument kinds, dtypes and shapes, same options) runs its `_Plan`.
    A backend's error names the kernel's line (`located`)."""
    try:
        key = None
        if out is None:
            key = _call_key(args, grid, elements, backend, config, dim, shape)
            if key is not None:
                try:
                    plan = _plans(built).get(key)
                except TypeError:   # an unhashable option (a list grid=, a config holding a dict)
                    plan = key = None
                if plan is not None:
                    got = plan.run(args)
                    if got is not _NO:
                        return got
        return _call_slow(built, name, args, key, out=out, grid=grid, elements=elements, backend=backend,
                          config=config, dim=dim, shape=shape)
    except BackendError as err:
        raise located(err, built.where, built.sites, built.max_iterations).with_traceback(
            err.__traceback__) from err.__cause__
