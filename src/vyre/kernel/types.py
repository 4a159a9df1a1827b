"""What kernel parameters and locals are declared with: buffer annotations (`In`, `Out`,
`InOut`), uniform scalars (`Scalar`), the element types under short names, and the arrays a
kernel allocates (`shared`, `local`).

``x: In[f32]`` is a read-only buffer of f32, ``out: Out[f32]`` an output (zeroed, sized by
the launch), ``acc: InOut[u32]`` a buffer read and written, ``n: Scalar[u32]`` one value the
caller passes as a Python number. ``Out[f32, 1024]`` and ``In[u32, 4]`` fix the element count.
N-D buffers: ``In[f32, :, :]`` is a 2-D buffer whose shape comes from the array passed,
``Out[f32, 16, 16]`` a 2-D output of a fixed shape (a plain ``In[f32]`` indexed as ``x[i, j]``
in the body is 2-D too). The IR stays 1-D: `vyre.kernel.frontend` flattens N-D indexing.
To mypy a buffer is `_Buffer` of its element type; the axes after it need the plugin
`vyre.kernel.mypy_plugin` (a slice or an integer is not a type).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vyre.ir import DataType

if TYPE_CHECKING:   # what a type checker sees: numbers, and buffers indexable like arrays
    from typing import Annotated, Any, Generic, TypeVar

    _T = TypeVar("_T")

    class bool_(int): ...
    class u8(int): ...
    class i8(int): ...
    class u16(int): ...
    class i16(int): ...
    class u32(int): ...
    class i32(int): ...
    class u64(int): ...
    class i64(int): ...
    class f16(float): ...
    class bf16(float): ...
    class f32(float): ...
else:
    bool_ = DataType.BOOL
    u8, i8, u16, i16 = DataType.U8, DataType.I8, DataType.U16, DataType.I16
    u32, i32, u64, i64 = DataType.U32, DataType.I32, DataType.U64, DataType.I64
    f16, bf16, f32 = DataType.F16, DataType.BF16, DataType.F32


@dataclass(frozen=True)
class BufferSpec:
    """A buffer parameter: its access ("read", "output", "read_write"), element type and
    extents per axis (``dims``; 0: taken from the call). ``ndim_declared`` says whether the
    annotation fixed the number of axes (``In[f32]`` does not: the body may index it N-D)."""

    access: str
    dtype: DataType
    dims: tuple[int, ...] = (0,)
    ndim_declared: bool = False

    @property
    def count(self) -> int:
        """The static element count (0: sized by the call)."""
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def ndim(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class ScalarSpec:
    """A uniform scalar parameter (passed to the kernel as a one-element buffer)."""

    dtype: DataType


def _spec(access: str, item: object) -> BufferSpec:
    parts = item if isinstance(item, tuple) else (item,)
    dtype, axes = parts[0], parts[1:]
    dims: list[int] = []
    ok = isinstance(dtype, DataType) and len(axes) <= 8
    for a in axes:
        if isinstance(a, slice) and a == slice(None):
            dims.append(0)
        elif isinstance(a, int) and not isinstance(a, bool) and a > 0:
            dims.append(a)
        else:
            ok = False
    if not ok:
        from .errors import KernelError

        name = {"read": "In", "output": "Out", "read_write": "InOut"}[access]
        raise KernelError(f"{name}[{item!r}] is not a buffer annotation.",
                          f"write {name}[f32] (1-D, sized by the call), {name}[f32, 1024] (a fixed "
                          f"count), {name}[f32, :, :] (2-D, shape from the array) or {name}[f32, 16, 16].",
                          "K006")
    return BufferSpec(access, dtype, tuple(dims) or (0,), bool(axes))


if TYPE_CHECKING:
    class _Buffer(Generic[_T]):
        shape: tuple[int, ...]

        def __getitem__(self, index: Any) -> _T: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...
        def __len__(self) -> int: ...

    class In(_Buffer[_T]): ...
    class Out(_Buffer[_T]): ...
    class InOut(_Buffer[_T]): ...

    Scalar = Annotated[_T, "vyre.kernel.Scalar"]


class In:  # type: ignore[no-redef]
    """``In[dtype]`` / ``In[dtype, count]``: a buffer the kernel reads."""

    def __class_getitem__(cls, item: object) -> BufferSpec:
        return _spec("read", item)


class Out:  # type: ignore[no-redef]
    """``Out[dtype]`` / ``Out[dtype, count]``: a buffer the kernel writes (starts zeroed)."""

    def __class_getitem__(cls, item: object) -> BufferSpec:
        return _spec("output", item)


class InOut:  # type: ignore[no-redef]
    """``InOut[dtype]``: a buffer the kernel reads and writes (starts with the input)."""

    def __class_getitem__(cls, item: object) -> BufferSpec:
        return _spec("read_write", item)


class Scalar:  # type: ignore[no-redef]
    """``Scalar[dtype]``: one uniform value the caller passes as a number."""

    def __class_getitem__(cls, item: object) -> ScalarSpec:
        if not isinstance(item, DataType) or item.storage_only:
            from .errors import KernelError

            raise KernelError(f"Scalar[{item!r}] needs a value type.", "write e.g. Scalar[u32] or Scalar[f32].",
                              "K006")
        return ScalarSpec(item)


__all__ = ["BufferSpec", "In", "InOut", "Out", "Scalar", "ScalarSpec", "bf16", "bool_", "f16", "f32",
           "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
