"""Arrays in, arrays out: what `vyre.lib` accepts and how results come back.

Owns the one conversion between a caller's array (numpy, CuPy, torch; anything with
``__cuda_array_interface__`` or ``__dlpack__``) and what a dispatch takes, and back to the
caller's kind. A numpy or CPU torch array becomes a host numpy array (16-bit floats as their
bits, packed in u32 words so every backend reads them); a CUDA array stays on the device for
backends that read device memory and is copied to the host for the others. Results come back
as the kind of the first array argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.inputs import array_library
from vyre.ir import DataType

from .errors import LibError

_NP_TO_DT = {np.dtype(np.uint32): DataType.U32, np.dtype(np.int32): DataType.I32,
             np.dtype(np.uint64): DataType.U64, np.dtype(np.int64): DataType.I64,
             np.dtype(np.float32): DataType.F32, np.dtype(np.float16): DataType.F16,
             np.dtype(np.uint8): DataType.U8, np.dtype(np.int8): DataType.I8,
             np.dtype(np.uint16): DataType.U16, np.dtype(np.int16): DataType.I16}
NUMERIC = (DataType.U32, DataType.I32, DataType.U64, DataType.I64, DataType.F32, DataType.F16,
           DataType.BF16)
# 8- and 16-bit integers (S26 storage: a load widens to u32/i32): the reductions take them
NARROW = (DataType.U8, DataType.I8, DataType.U16, DataType.I16)


@dataclass
class Arr:
    """One argument: ``kind`` ("numpy", "torch", "cupy", "device"), its element ``dtype``, its
    length ``n``, and ``data``: a 1-D numpy array (host) or the caller's device array."""

    kind: str
    dtype: DataType
    n: int
    data: Any
    on_device: bool
    original: Any

    def source(self) -> Any:
        """What a pass reads: the array itself, 16-bit floats as packed u32 words (on the
        device too), an empty host array as one zero element (buffers are never empty)."""
        if self.on_device:
            return _device_packed(self) if self.dtype.is_half else self.data
        if self.dtype.is_half:
            return packed_words(self.data)
        return self.data if self.n else np.zeros(1, self.data.dtype)

    def host(self) -> np.ndarray:
        """The elements as a host numpy array (16-bit floats: their uint16 bits)."""
        if not self.on_device:
            return self.data
        x = self.original
        if self.kind == "torch":
            return _torch_host(x.detach().cpu())
        if self.kind == "cupy":
            return _np_bits(x.get().reshape(-1))
        raise LibError("L001", f"cannot read a {type(x).__name__} back to the host.",
                       "pass a numpy, CuPy or torch array.")


def _device_packed(a: Arr) -> Any:
    """A device array of 16-bit floats as u32 words (padded with a zero to an even length)."""
    x = a.data
    if a.kind == "cupy":
        import cupy

        bits = x.reshape(-1).view(cupy.uint16)
        if bits.size % 2:
            bits = cupy.concatenate([bits, cupy.zeros(1, cupy.uint16)])
        return bits.view(cupy.uint32)
    import torch

    if not hasattr(torch, "uint32"):
        raise LibError("L001", "16-bit float torch tensors on the device need torch >= 2.3 (uint32 views).",
                       "upgrade torch, or pass x.float() / a CuPy array.")
    bits = x.reshape(-1).view(torch.int16)
    if bits.numel() % 2:
        bits = torch.cat([bits, torch.zeros(1, dtype=torch.int16, device=bits.device)])
    return bits.view(torch.uint32)


def _np_bits(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.float16 or a.dtype.name == "bfloat16":
        return a.view(np.uint16)
    return a


def _torch_host(t: Any) -> np.ndarray:
    import torch

    t = t.contiguous().reshape(-1)
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype == torch.float16:
        return t.numpy().view(np.uint16)
    return t.numpy()


def _torch_dtype(t: Any) -> DataType | None:
    return next((d for d in (*NUMERIC, *NARROW) if torch_dtype(d) == t.dtype), None)


def as_arr(x: Any, name: str) -> Arr:
    """Classify one argument; refuse what no primitive takes (L001/L002)."""
    mod = array_library(x)
    if mod == "torch":
        dt = _torch_dtype(x)
        if dt is None:
            raise LibError("L001", f"{name} is a torch tensor of {x.dtype}.",
                           "pass uint32/int32/int64/float32/float16/bfloat16 data (8- and 16-bit "
                           "integers for sum, min and max).")
        _vector(x.dim(), tuple(x.shape), name)
        if x.is_cuda:
            return Arr("torch", dt, int(x.numel()), x.contiguous(), True, x)
        return Arr("torch", dt, int(x.numel()), _torch_host(x), False, x)
    if mod == "cupy":
        dt = _np_dtype(np.dtype(x.dtype), name)
        _vector(x.ndim, tuple(x.shape), name)
        import cupy

        return Arr("cupy", dt, int(x.size), cupy.ascontiguousarray(x), True, x)
    if isinstance(x, np.ndarray):
        dt = _np_dtype(x.dtype, name)
        _vector(x.ndim, x.shape, name)
        a = np.ascontiguousarray(x).reshape(-1)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        return Arr("numpy", dt, int(a.size), _np_bits(a), False, x)
    if isinstance(x, list | tuple):
        raise LibError("L001", f"{name} is a Python {type(x).__name__}.",
                       "pass np.asarray(values, dtype=...) with the element type you mean.")
    raise LibError("L001", f"{name} is a {type(x).__name__}, not an array.",
                   "pass a numpy, CuPy or torch array.")


def _np_dtype(dt: np.dtype, name: str) -> DataType:
    got = _NP_TO_DT.get(dt)   # the common case first: numpy's name lookup is slow
    if got is not None:
        return got
    if dt.name == "bfloat16":
        return DataType.BF16
    got = _NP_TO_DT.get(dt.newbyteorder("=")) if dt.byteorder in "<>" else None
    if got is None:
        raise LibError("L001", f"{name} is a {dt} array.",
                       "pass uint32, int32, uint64, int64, float32 or float16 data (bfloat16 "
                       "through torch or ml_dtypes; 8- and 16-bit integers for sum, min and max).")
    return got


def _vector(ndim: int, shape: tuple, name: str) -> None:
    if ndim != 1:
        raise LibError("L002", f"{name} has shape {shape}; vyre.lib primitives take 1-D arrays.",
                       "pass x.ravel() (or x.reshape(-1)) for the elements in order.")


def require(a: Arr, allowed: tuple[DataType, ...], what: str) -> None:
    if a.dtype not in allowed:
        raise LibError("L001", f"{what} does not take {a.dtype.value} data.",
                       f"pass one of {', '.join(d.value for d in allowed)}.")


def packed_words(bits16: np.ndarray) -> np.ndarray:
    """16-bit values as little-endian u32 words (two per word, zero-padded)."""
    if bits16.size % 2:
        bits16 = np.concatenate([bits16, np.zeros(1, np.uint16)])
    return np.ascontiguousarray(bits16).view(np.uint32) if bits16.size else np.zeros(1, np.uint32)


def host_dtype(dt: DataType) -> np.dtype:
    """The numpy dtype of a host result of ``dt`` (bf16: its uint16 bits, or ml_dtypes')."""
    return np.dtype(np.float16) if dt is DataType.F16 else np.dtype(dt.host)


def to_kind(values: np.ndarray, like: Arr, dtype: DataType) -> Any:
    """A host result (numpy, 16-bit floats as their bits) as ``like``'s kind."""
    bits = values.astype(dtype.storage, copy=False) if dtype.is_half else values
    if like.kind == "torch":
        import torch

        if dtype is DataType.BF16:
            t = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)
        elif dtype is DataType.F16:
            t = torch.from_numpy(bits.view(np.float16).copy())
        else:
            t = torch.from_numpy(np.ascontiguousarray(bits).copy())
        return t.to(like.original.device) if like.on_device else t
    if dtype is DataType.F16:
        bits = bits.view(np.float16)
    elif dtype is DataType.BF16:
        original = getattr(like.original, "dtype", None)
        if original is not None and getattr(original, "name", "") == "bfloat16":
            bits = bits.view(original)
    if like.kind == "cupy":
        import cupy

        return cupy.asarray(bits)
    return bits


def device_like(out: Any, like: Arr, dtype: DataType) -> Any:
    """A device result (a `DeviceOutput`) as ``like``'s kind, without a copy."""
    if like.kind == "cupy":
        import cupy

        a = cupy.asarray(out)
        return a.view(cupy.float16) if dtype is DataType.F16 else a
    if like.kind == "torch":
        import torch

        t = torch.as_tensor(out, device=like.original.device)
        if dtype is DataType.BF16:
            return t.view(torch.bfloat16)
        if dtype is DataType.F16:
            return t.view(torch.float16)
        return t
    return out


def torch_dtype(dtype: DataType) -> Any:
    """The torch dtype of ``dtype``'s elements (16-bit floats: their own)."""
    import torch

    return {DataType.U32: getattr(torch, "uint32", None), DataType.I32: torch.int32, DataType.I64: torch.int64,
            DataType.U64: getattr(torch, "uint64", None), DataType.F32: torch.float32,
            DataType.F16: torch.float16, DataType.BF16: torch.bfloat16, DataType.U8: torch.uint8,
            DataType.I8: torch.int8, DataType.U16: getattr(torch, "uint16", None),
            DataType.I16: torch.int16}[dtype]


def device_cast(values: Any, like: Arr, dtype: DataType) -> Any:
    """u32/i32 values on the device (in range) as the caller's 8- or 16-bit integers."""
    if like.kind == "cupy":
        return values.astype(dtype.host)
    return values.to(torch_dtype(dtype))


def device_half(words: Any, like: Arr, dtype: DataType) -> Any:
    """u32 words on the device, each holding 16-bit float bits, as the caller's 16-bit array."""
    if like.kind == "cupy":
        import cupy

        return words.astype(cupy.uint16).view(cupy.float16 if dtype is DataType.F16 else cupy.uint16)
    import torch

    low = words.view(torch.int32).to(torch.int16)
    return low.view(torch.float16 if dtype is DataType.F16 else torch.bfloat16)


def result(out: Any, like: Arr, dtype: DataType, n: int) -> Any:
    """The first ``n`` elements of a pass's output as ``like``'s kind: a host array (16-bit
    floats held one per u32 word) or a device buffer, without a copy where possible. A pass's
    host output is a fresh writable array (`Runner.run`): it is handed over as it is when all
    of it is the result, and copied only when the result is a part of it (the rest is freed)."""
    if isinstance(out, np.ndarray):
        vals = out[:n]
        if dtype.is_half:
            vals = vals.astype(np.uint16)
        elif n < out.size or not out.flags.writeable:
            vals = vals.copy()
        return to_kind(vals, like, dtype)
    if dtype.is_half:
        return device_half(device_like(out, like, DataType.U32), like, dtype)[:n]
    return device_like(out, like, dtype)[:n]


def scalar(result: Any, like: Arr, dtype: DataType) -> Any:
    """A one-element result as the caller's scalar: a numpy scalar, or a 0-d CuPy/torch array."""
    if like.kind == "numpy" and isinstance(result, np.ndarray):
        return result.reshape(-1)[0]
    return result.reshape(())


__all__ = ["NARROW", "NUMERIC", "Arr", "as_arr", "device_cast", "device_half", "device_like", "host_dtype", "packed_words", "require", "result",
           "scalar", "to_kind", "torch_dtype"]
