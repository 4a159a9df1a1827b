"""Statements of the IR: immutable, hashable, structurally compared.

`Node` is the base class and the builder namespace (``Node.store(...)``, ``Node.if_(...)``);
each statement kind is a frozen dataclass. Bodies are tuples of nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .expr import Expr, coerce
from .limits import MAX_DEPTH, too_deep
from .types import MemoryOrdering

# what `vyre.ir` exports from here: Node and every statement kind (a new kind is added here)
__all__ = ["Assign", "Barrier", "Block", "Break", "Continue", "Eval", "If", "IndirectDispatch", "Let", "LoadTile",
           "Loop", "MatMulAcc", "Node", "Region", "Return", "Store", "While"]


class Node:
    __slots__ = ()

    def __post_init__(self) -> None:
        h = 0
        weak = False
        for e in node_exprs(self):
            h = max(h, getattr(e, "_h", 1))
            weak = weak or getattr(e, "_w", False)
        for _, body in node_bodies(self):
            if isinstance(body, tuple | list):  # malformed bodies are the validator's (V030)
                for n in body:
                    h = max(h, getattr(n, "_h", 1))
                    weak = weak or getattr(n, "_w", False)
        h += 1
        if h > MAX_DEPTH:
            raise too_deep(h, "statement")
        object.__setattr__(self, "_h", h)
        if weak:  # holds a WeakLit: the Program resolves it when built
            object.__setattr__(self, "_w", True)

    @property
    def height(self) -> int:
        """The depth of this statement's tree (capped when built: `vyre.ir.limits`)."""
        return getattr(self, "_h", 1)

    @staticmethod
    def let_bind(name: str, value: Any) -> Let:
        """Declare a new local ``name`` initialised to ``value`` (its type is the value's)."""
        return Let(name, coerce(value))

    @staticmethod
    def assign(name: str, value: Any) -> Assign:
        """Overwrite an existing local declared with `let_bind`."""
        return Assign(name, coerce(value))

    @staticmethod
    def store(buffer: str, index: Any, value: Any) -> Store:
        """Write ``value`` to element ``index`` of ``buffer`` (dropped when out of bounds, S5)."""
        return Store(buffer, coerce(index), coerce(value))

    @staticmethod
    def if_(cond: Any, then: Iterable[Node], otherwise: Iterable[Node] = ()) -> If:
        """Run ``then`` where ``cond`` holds, else ``otherwise``."""
        return If(coerce(cond), tuple(then), tuple(otherwise))

    @staticmethod
    def loop(var: str, from_: Any, to: Any, body: Iterable[Node]) -> Loop:
        """``for var in [from_, to)`` (bounds evaluated once on entry; step 1)."""
        return Loop(var, coerce(from_), coerce(to), tuple(body))

    @staticmethod
    def while_(cond: Any, body: Iterable[Node], max_iterations: int) -> While:
        """Run ``body`` while ``cond`` holds (checked before each iteration). An invocation
        whose condition still holds after ``max_iterations`` iterations fails the dispatch
        with a `loop_limit` error (no backend runs away)."""
        return While(coerce(cond), tuple(body), max_iterations)

    @staticmethod
    def break_() -> Break:
        """Leave the innermost loop (`loop` or `while_`)."""
        return Break()

    @staticmethod
    def continue_() -> Continue:
        """Go to the next iteration of the innermost loop."""
        return Continue()

    @staticmethod
    def call(function: str, *args: Any) -> Eval:
        """Call a function for its effects (its result, if any, is dropped)."""
        from .expr import Call

        return Eval(Call(function, tuple(coerce(a) for a in args)))

    @staticmethod
    def indirect_dispatch(buffer: str, offset: Any = 0) -> IndirectDispatch:
        """Start a phase whose grid (workgroups per axis) is the three u32 words
        ``buffer[offset:offset+3]``, read when the phase starts: an earlier phase (before a
        grid_sync) or the caller writes them. Only at the start of the program or right
        after a grid_sync."""
        return IndirectDispatch(buffer, int(offset))

    @staticmethod
    def matmul_acc(d: str, a: str, b: str, m: int, n: int, k: int) -> MatMulAcc:
        """``d += a · bᵀ`` on workgroup arrays, by the whole workgroup together: for every
        ``i < m``, ``j < n``, ``d[i*n + j] += sum(a[i*k + p] * b[j*k + p] for p < k)``,
        wrapping mod 2**32. ``a`` (m x k) and ``b`` (n x k: its rows are the columns of the
        right-hand matrix) are both u8/i8 or both u32/i32; ``d`` (m x n) is u32 or i32. Every
        invocation of the workgroup must reach it (as a barrier); it orders memory as a
        barrier before and after. On CUDA sm_80+ it runs on the tensor cores (IMMA)."""
        return MatMulAcc(d, a, b, int(m), int(n), int(k))

    @staticmethod
    def load_tile(dst: str, src: str, offset: Any, stride: Any, rows: int, cols: int,
                  rows_in: Any, cols_in: Any) -> LoadTile:
        """Copy a ``rows`` x ``cols`` tile of the row-major matrix in buffer ``src`` into the
        workgroup array ``dst`` (row-major, ``cols`` elements a row), by the whole workgroup
        together: for every ``r < rows``, ``c < cols``, ``dst[r*cols + c] =
        src[offset + r*stride + c]`` (u32 index arithmetic, wrapping; an index past the end of
        ``src`` reads 0, S6) where ``r < rows_in`` and ``c < cols_in``, and 0 elsewhere (the
        edges of a matrix that is not a multiple of the tile). ``offset``, ``stride``,
        ``rows_in`` and ``cols_in`` are u32 expressions with the same value in every
        invocation of the workgroup; ``src`` and ``dst`` have one element type. Every
        invocation must reach it; it orders memory as a barrier before and after. On CUDA
        sm_80+ it is an asynchronous copy (``cp.async``), and a loop of tile loads feeding a
        matmul_acc runs as a multi-stage pipeline."""
        return LoadTile(dst, src, coerce(offset), coerce(stride), int(rows), int(cols), coerce(rows_in),
                        coerce(cols_in))

    @staticmethod
    def block(body: Iterable[Node]) -> Block:
        """A sequence of statements with its own scope."""
        return Block(tuple(body))

    @staticmethod
    def region(name: str, body: Iterable[Node]) -> Region:
        """A named block: behaves as `block`, and names its statements in diagnostics."""
        return Region(name, tuple(body))

    @staticmethod
    def return_() -> Return:
        """End this invocation (it no longer takes part in barriers)."""
        return Return()

    @staticmethod
    def barrier(ordering: MemoryOrdering = MemoryOrdering.SEQ_CST) -> Barrier:
        """Wait for every invocation of the workgroup; makes workgroup memory writes visible."""
        return Barrier(ordering)

    @staticmethod
    def expr(value: Expr) -> Eval:
        """Evaluate an expression for its effects (an atomic whose old value is unused)."""
        return Eval(coerce(value))


@dataclass(frozen=True)
class Let(Node):
    name: str
    value: Expr


@dataclass(frozen=True)
class Assign(Node):
    name: str
    value: Expr


@dataclass(frozen=True)
class Store(Node):
    buffer: str
    index: Expr
    value: Expr


@dataclass(frozen=True)
class If(Node):
    cond: Expr
    then: tuple[Node, ...]
    otherwise: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Loop(Node):
    var: str
    from_: Expr
    to: Expr
    body: tuple[Node, ...]


@dataclass(frozen=True)
class While(Node):
    cond: Expr
    body: tuple[Node, ...]
    max_iterations: int


@dataclass(frozen=True)
class Break(Node):
    pass


@dataclass(frozen=True)
class Continue(Node):
    pass


@dataclass(frozen=True)
class IndirectDispatch(Node):
    """The grid of the phase this statement starts comes from ``buffer[offset:offset+3]``."""

    buffer: str
    offset: int


@dataclass(frozen=True)
class MatMulAcc(Node):
    """``d[i*n + j] += sum_p a[i*k + p] * b[j*k + p]`` (mod 2**32) over workgroup arrays,
    by the whole workgroup (`Node.matmul_acc`)."""

    d: str
    a: str
    b: str
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class LoadTile(Node):
    """``dst[r*cols + c] = src[offset + r*stride + c]`` where ``r < rows_in``, ``c < cols_in``,
    else 0, for the ``rows`` x ``cols`` tile, by the whole workgroup (`Node.load_tile`)."""

    dst: str
    src: str
    offset: Expr
    stride: Expr
    rows: int
    cols: int
    rows_in: Expr
    cols_in: Expr


@dataclass(frozen=True)
class Block(Node):
    body: tuple[Node, ...]


@dataclass(frozen=True)
class Region(Node):
    name: str
    body: tuple[Node, ...]


@dataclass(frozen=True)
class Return(Node):
    pass


@dataclass(frozen=True)
class Barrier(Node):
    ordering: MemoryOrdering = MemoryOrdering.SEQ_CST


@dataclass(frozen=True)
class Eval(Node):
    value: Expr


# filled from the one list of kinds (`vyre.ir.kinds`, imported first by `vyre.ir`)
_EXPRS: dict[type, Any] = {}
_BODIES: dict[type, Any] = {}


def node_exprs(node: Node) -> tuple[Expr, ...]:
    """Expressions a statement evaluates directly (not those of nested statements)."""
    get = _EXPRS.get(type(node))
    return () if get is None else get(node)   # not an IR kind: the validator reports it


def node_bodies(node: Node) -> tuple[tuple[str, tuple[Node, ...]], ...]:
    """Nested statement lists with their location labels."""
    get = _BODIES.get(type(node))
    return () if get is None else get(node)


def walk_exprs(body: Iterable[Node]):
    """Every expression of every statement in ``body`` (nested ones included), pre-order."""
    from .expr import walk

    for n in walk_nodes(body):
        for root in node_exprs(n):
            yield from walk(root)


def program_bodies(program) -> list[tuple[Node, ...]]:  # program: Program
    """The statement lists of a program: its body, then each function's body."""
    out = [program.body]
    out.extend(f.body for f in program.functions)
    return out


def program_exprs(program):
    """Every expression of a program: its body's, its functions' bodies' and results'."""
    from .expr import walk

    for body in program_bodies(program):
        yield from walk_exprs(body)
    for f in program.functions:
        if f.result is not None:
            yield from walk(f.result)


def walk_nodes(body: Iterable[Node]):
    """Pre-order traversal of every statement in a body, nested ones included."""
    stack = list(reversed(tuple(body)))
    while stack:
        n = stack.pop()
        yield n
        for _, sub in reversed(node_bodies(n)):
            stack.extend(reversed(sub))
