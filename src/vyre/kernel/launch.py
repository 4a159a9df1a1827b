"""Calling a kernel: Python values in, numpy arrays out.

``saxpy(x, y)`` passes one value per In/InOut/Scalar parameter (Out parameters are made by
the call), dispatches on the preferred backend (or ``backend=``) and returns the outputs —
Out and InOut buffers in parameter order — as writable numpy arrays of their declared dtype
(one array, or a tuple). ``out=`` gives arrays to write them into. ``saxpy[grid](x, y)`` or
``grid=`` sets the workgroups per axis; ``elements=`` the element count of runtime-sized
outputs (and the default grid).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from vyre.ir import DataType, Program, VyreError

from .types import BufferSpec, ScalarSpec

_PREFERRED: dict[str, Any] = {}
_LOCK = threading.Lock()


def resolve_backend(backend: Any) -> Any:
    """A backend object: given, acquired by id, or the preferred dispatch backend (cached)."""
    from vyre.driver import acquire, acquire_preferred_dispatch_backend

    if backend is None:
        with _LOCK:
            b = _PREFERRED.get("preferred")
            if b is None or getattr(b, "_closed", False):
                b = _PREFERRED["preferred"] = acquire_preferred_dispatch_backend()
        return b
    if isinstance(backend, str):
        return acquire(backend)
    return backend


def _host_array(value: Any, dtype: DataType, where: str) -> Any:
    """A numpy array of the buffer's dtype, or a device array / DLPack producer as given
    (the backend checks those)."""
    if hasattr(value, "__cuda_array_interface__") or (hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray)):
        return value
    if isinstance(value, np.ndarray):
        want = np.dtype(dtype.host)
        if value.dtype != want:
            raise VyreError(f"{where} is a {value.dtype} array; the kernel declares {dtype.value}.",
                            f"pass x.astype(np.{want.name}) (vyre never converts dtypes silently).")
        return np.ascontiguousarray(value)
    if isinstance(value, list | tuple):
        return np.asarray(value, dtype=dtype.host)
    if isinstance(value, bytes | bytearray | memoryview):
        return value
    raise VyreError(f"{where} is a {type(value).__name__}, not an array.",
                    f"pass a numpy array of {dtype.value} (or a CuPy/torch array on the cuda backend).")


def _scalar(value: Any, spec: ScalarSpec, where: str) -> np.ndarray:
    t = spec.dtype
    try:
        if t is DataType.BOOL:
            return np.array([1 if value else 0], dtype=np.uint32)
        if t.is_float:
            return np.array([float(value)], dtype=t.host)
        if isinstance(value, float) and not float(value).is_integer():
            raise ValueError("not an integer")
        info = np.iinfo(t.host)
        v = int(value)
        if not info.min <= v <= info.max:
            raise ValueError(f"outside {info.min}..{info.max}")
        return np.array([v], dtype=t.host)
    except (TypeError, ValueError) as exc:
        raise VyreError(f"{where} = {value!r} is not a {t.value} ({exc}).",
                        f"pass a number that fits {t.value}.") from None


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
    """A device output as the caller's array type (no copy): CuPy or torch, else the
    `DeviceOutput` itself (it has ``__cuda_array_interface__``)."""
    mod = type(example).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        return cupy.asarray(out)
    if mod == "torch":
        import torch

        return torch.as_tensor(out, device=example.device)
    return out


def call(program: Program, params: list[tuple[str, Any]], name: str, args: Sequence[Any], *,
         out: Any = None, grid: tuple[int, ...] | int | None = None, elements: int | None = None,
         backend: Any = None, config: Any = None) -> Any:
    from vyre.driver import DispatchConfig

    takes = [(n, s) for n, s in params if not (isinstance(s, BufferSpec) and s.access == "output")]
    if len(args) != len(takes):
        raise VyreError(f"{name}() takes {len(takes)} argument(s) ({', '.join(n for n, _ in takes)}), "
                        f"got {len(args)}.", "pass one value per In/InOut/Scalar parameter, in order "
                        "(Out parameters are returned).")
    inputs = []
    for (pname, spec), value in zip(takes, args):
        where = f"{name}() argument {pname!r}"
        inputs.append(_scalar(value, spec, where) if isinstance(spec, ScalarSpec)
                      else _host_array(value, spec.dtype, where))
    b = resolve_backend(backend)
    fields: dict[str, Any] = {}
    if grid is not None:
        g = (grid,) if isinstance(grid, int) else tuple(grid)
        fields["grid_override"] = (g + (1, 1, 1))[:3]
    if elements is not None:
        fields["dispatch_elements"] = int(elements)
    if config is not None:
        cfg = replace(config, **fields) if fields else config
    else:
        cfg = DispatchConfig(**fields) if fields else None
    device = next((x for x in inputs if _on_device(x)), None)
    if device is not None and out is None and b.reads_device_arrays():
        # device inputs: the outputs stay on the device, as the caller's array type
        outs = b.dispatch_device(program, inputs, cfg)
        arrays = [_like(device, o) for o in outs]
        return arrays[0] if len(arrays) == 1 else tuple(arrays)
    arrays = b.dispatch_arrays(program, inputs, cfg)   # one copy out of the staging
    if out is not None:
        targets = list(out) if isinstance(out, list | tuple) else [out]
        if len(targets) != len(arrays):
            raise VyreError(f"out= has {len(targets)} array(s); {name}() has {len(arrays)} output(s).",
                            "pass one array per Out/InOut parameter, in order.")
        for t, a, d in zip(targets, arrays, program.outputs):
            if not isinstance(t, np.ndarray) or t.dtype != a.dtype or t.size != a.size or not t.flags.writeable:
                raise VyreError(f"out= array for {d.name!r} must be a writable {a.dtype} array of {a.size} "
                                f"elements (got {getattr(t, 'dtype', type(t).__name__)}).",
                                "allocate it with np.empty(n, dtype) of the output's size.")
            np.copyto(t.reshape(-1), a)
        arrays = targets
    return arrays[0] if len(arrays) == 1 else tuple(arrays)
