"""u8/i8/u16/i16 storage (S26) on targets with only 32-bit words: each such buffer becomes a
u32 buffer holding four (two) little-endian elements per word.

A load of element ``i`` reads word ``i >> 2`` (``i >> 1``) and extracts its byte (half),
zero-extended for u8/u16 and sign-extended for i8/i16; out of bounds (``i`` not below the
element count, S6) it gives 0. A store clears and then sets only its own byte with an
atomic AND and an atomic OR on the word, so two invocations storing into the same word never
lose each other's bytes; a per-invocation local array is private, so there a plain
read-modify-write does. ``buf_len`` stays in elements: a static buffer's count is written
in, and drivers keep passing a runtime-sized buffer's element count (the printed bounds
check on the word index is then looser than the buffer, and the element check here keeps
every access inside it).
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import BufferDecl, Function, Program
from vyre.ir.rewrite import map_expr
from vyre.ir.types import AtomicOp, BufferAccess, DataType

from .build import Body, I, U, u
from .walk import walk_body, walk_function

NARROW = (DataType.U8, DataType.I8, DataType.U16, DataType.I16)


def uses_narrow(program: Program) -> bool:
    return any(b.dtype in NARROW for b in program.buffers)


class _Narrow:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.decls = {b.name: b for b in program.buffers if b.dtype in NARROW}
        self.helpers: dict[str, Function] = {}
        self.tmp = 0

    def count(self, name: str) -> E.Expr:
        d = self.decls[name]
        return u(d.count) if d.count else E.BufLen(name)

    def geometry(self, name: str, i: E.Expr) -> tuple[E.Expr, E.Expr, int]:
        """(word index, bit shift, element mask) of element ``i``."""
        size = self.decls[name].dtype.size
        if size == 1:
            return i >> 2, (i & 3) << 3, 0xFF
        return i >> 1, (i & 1) << 4, 0xFFFF

    def load(self, name: str) -> str:
        fn = f"vyln_load_{name}"
        if fn not in self.helpers:
            t = self.decls[name].dtype
            b = Body((("i", U),))
            i = b.arg(0)
            w, sh, mask = self.geometry(name, i)
            word = b.let(E.Select(i.lt(self.count(name)), E.Load(name, w), u(0)), "w")
            v = b.let((word >> sh) & mask, "v")
            if t.is_signed:
                k = 32 - 8 * t.size
                result: E.Expr = E.Bitcast(I, v << k) >> k
            else:
                result = v
            self.helpers[fn] = b.function(fn, result)
        return fn

    def expr(self, e: E.Expr, scope=None) -> E.Expr:
        def fix(x: E.Expr) -> E.Expr:
            if isinstance(x, E.Load) and x.buffer in self.decls:
                return E.Call(self.load(x.buffer), (x.index,))
            if isinstance(x, E.BufLen) and x.buffer in self.decls:
                return self.count(x.buffer)
            return x

        return map_expr(e, fix)

    def store(self, n: N.Store) -> list[N.Node]:
        d = self.decls[n.buffer]
        self.tmp += 1
        i, v = f"vyln_i{self.tmp}", f"vyln_v{self.tmp}"
        out: list[N.Node] = [N.Let(i, self.expr(n.index))]
        value = self.expr(n.value)
        out.append(N.Let(v, value if not d.dtype.is_signed else E.Bitcast(U, value)))
        w, sh, mask = self.geometry(n.buffer, E.Var(i))
        bits = (E.Var(v) & mask) << sh
        if d.access is BufferAccess.LOCAL:      # private: no other invocation shares the word
            write: tuple[N.Node, ...] = (N.Store(n.buffer, w, (E.Load(n.buffer, w) & ~(u(mask) << sh)) | bits),)
        else:
            write = (N.Eval(E.Atomic(AtomicOp.AND, n.buffer, w, ~(u(mask) << sh))),
                     N.Eval(E.Atomic(AtomicOp.OR, n.buffer, w, bits)))
        out.append(N.If(E.Var(i).lt(self.count(n.buffer)), write))
        return out

    # the walk (`walk`) asks these
    def stmt(self, n: N.Node, scope) -> list[N.Node] | None:
        return self.store(n) if isinstance(n, N.Store) and n.buffer in self.decls else None


def lower_narrow(program: Program) -> Program:
    """``program`` with its u8/i8/u16/i16 buffers packed into u32 words (module doc)."""
    if not uses_narrow(program):
        return program
    lw = _Narrow(program)
    functions = tuple(walk_function(f, lw) for f in program.functions)
    body = walk_body(program.body, {}, lw)
    buffers = tuple(BufferDecl(b.name, b.binding, b.access, U, -(-b.count * b.dtype.size // 4))
                    if b.dtype in NARROW else b for b in program.buffers)
    return Program(buffers, program.workgroup_size, body, tuple(lw.helpers.values()) + functions)
