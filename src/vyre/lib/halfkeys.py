"""16-bit float sort keys (f16, bf16) as u32 order keys, and back.

Owns how `vyre.lib.radix` sorts 16-bit float keys, which arrive packed two to a u32 word:
one pass (`order_program`) gives every element the u32 whose integer order is the IEEE
totalOrder of its bits (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN, as for f32 keys:
a negative key's 16 bits inverted, a positive key's with bit 15 set), the radix sort sorts
those, and one pass (`bits_program`) turns the sorted keys back into the 16-bit bits, one per
u32 word (what `vyre.lib.arrays.result` hands back as the caller's 16-bit type). Bits move and
nothing is computed on a float, so every key comes back as it was, NaN payloads and
subnormals included.
"""

from __future__ import annotations

import functools

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from .kernels import GID, N, element, prm

U = DataType.U32
HALF_KEYS = (DataType.F16, DataType.BF16)


@functools.cache
def order_program(dtype: DataType, wg: int) -> Program:
    """``keys[i]``: the totalOrder key of 16-bit float ``x[i]`` (``x`` packed words)."""
    i = GID
    b = Expr.var("b")
    key = Expr.select((b & 0x8000).ne(Expr.u32(0)), ~b & 0xFFFF, b | 0x8000)
    return Program.wrapped([BufferDecl.read("x", 0, U), prm(1), BufferDecl.output("keys", 2, U)], wg,
                           [Node.if_(i.lt(N), [Node.let_bind("b", element("x", dtype, i)),
                                               Node.store("keys", i, key)])])


@functools.cache
def bits_program(wg: int) -> Program:
    """``bits[i]``: the 16-bit float bits whose `order_program` key is ``keys[i]``."""
    i = GID
    k = Expr.var("k")
    bits = Expr.select((k & 0x8000).ne(Expr.u32(0)), k & 0x7FFF, ~k & 0xFFFF)
    return Program.wrapped([BufferDecl.read("keys", 0, U), prm(1), BufferDecl.output("bits", 2, U)], wg,
                           [Node.if_(i.lt(N), [Node.let_bind("k", Expr.load("keys", i)),
                                               Node.store("bits", i, bits)])])


__all__ = ["HALF_KEYS", "bits_program", "order_program"]
