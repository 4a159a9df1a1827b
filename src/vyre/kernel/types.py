"""What kernel parameters and locals are declared with: buffer annotations (`In`, `Out`,
`InOut`), uniform scalars (`Scalar`), the element types under short names, and the arrays a
kernel allocates (`shared`, `local`).

``x: In[f32]`` is a read-only buffer of f32, ``out: Out[f32]`` an output (zeroed, sized by
the launch), ``acc: InOut[u32]`` a buffer read and written, ``n: Scalar[u32]`` one value the
caller passes as a Python number. ``Out[f32, 1024]`` and ``In[u32, 4]`` fix the element count.
"""

from __future__ import annotations

from dataclasses import dataclass

from vyre.ir import DataType

bool_ = DataType.BOOL
u8, i8, u16, i16 = DataType.U8, DataType.I8, DataType.U16, DataType.I16
u32, i32, u64, i64 = DataType.U32, DataType.I32, DataType.U64, DataType.I64
f16, bf16, f32 = DataType.F16, DataType.BF16, DataType.F32


@dataclass(frozen=True)
class BufferSpec:
    """A buffer parameter: its access ("read", "output", "read_write"), element type and
    static element count (0: sized by the call)."""

    access: str
    dtype: DataType
    count: int = 0


@dataclass(frozen=True)
class ScalarSpec:
    """A uniform scalar parameter (passed to the kernel as a one-element buffer)."""

    dtype: DataType


def _spec(access: str, item: object) -> BufferSpec:
    dtype, count = (item if isinstance(item, tuple) else (item, 0))
    if not isinstance(dtype, DataType) or not isinstance(count, int) or count < 0:
        from vyre.ir import VyreError

        raise VyreError(f"{access} buffer annotation [{item!r}] is not [dtype] or [dtype, count].",
                        "write e.g. In[f32] or Out[u32, 1024] with the types vyre.kernel exports.")
    return BufferSpec(access, dtype, count)


class In:
    """``In[dtype]`` / ``In[dtype, count]``: a buffer the kernel reads."""

    def __class_getitem__(cls, item: object) -> BufferSpec:
        return _spec("read", item)


class Out:
    """``Out[dtype]`` / ``Out[dtype, count]``: a buffer the kernel writes (starts zeroed)."""

    def __class_getitem__(cls, item: object) -> BufferSpec:
        return _spec("output", item)


class InOut:
    """``InOut[dtype]``: a buffer the kernel reads and writes (starts with the input)."""

    def __class_getitem__(cls, item: object) -> BufferSpec:
        return _spec("read_write", item)


class Scalar:
    """``Scalar[dtype]``: one uniform value the caller passes as a number."""

    def __class_getitem__(cls, item: object) -> ScalarSpec:
        if not isinstance(item, DataType) or item.storage_only:
            from vyre.ir import VyreError

            raise VyreError(f"Scalar[{item!r}] needs a value type.", "write e.g. Scalar[u32] or Scalar[f32].")
        return ScalarSpec(item)


__all__ = ["BufferSpec", "In", "InOut", "Out", "Scalar", "ScalarSpec", "bf16", "bool_", "f16", "f32",
           "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
