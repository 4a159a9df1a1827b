"""Python source to IR: the AST of a ``@vyre.kernel`` or ``@vyre.func`` function becomes a
`Program` (or a `Function`). Nothing is traced: control flow on device values becomes IR
control flow.

Supported: arithmetic, comparisons (chained too), bit operations, ``and``/``or``/``not``
(both sides evaluated), conditional expressions (`select`), locals (declared where first
assigned; one type each), ``x[i]`` loads and ``x[i] = v`` stores, augmented assignment,
``if``/``elif``/``else``, ``for i in range(...)`` (a literal positive step), ``while`` (capped
at the kernel's ``max_iterations``), ``break``/``continue``, a bare ``return`` in a kernel and
one final ``return value`` in a function (or none), calls of `vyre.kernel.intrinsics` and of other
``@vyre.func`` functions, casts written as ``u32(x)``, ``abs``/``min``/``max``/``len``, and
module-level numbers as constants. ``/`` divides floats and ``//`` integers; ``%`` is C's
remainder (the sign of the dividend).

Anything else raises `KernelError`, which names the file and line of the user's source and
ends in a Fix.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.ir import (
    AtomicOp,
    BinOp,
    BufferDecl,
    DataType,
    Expr,
    Function,
    MemoryOrdering,
    Node,
    Program,
    UnOp,
    VyreError,
)
from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.limits import MAX_DEPTH
from vyre.ir.typecheck import TypeFault, call_check, infer
from vyre.ir.weak import Resolver

from . import intrinsics as K
from .errors import KernelError, kernel_words
from .types import BufferSpec, ScalarSpec

_BINOPS = {ast.Add: BinOp.ADD, ast.Sub: BinOp.SUB, ast.Mult: BinOp.MUL, ast.Mod: BinOp.MOD,
           ast.BitAnd: BinOp.BITAND, ast.BitOr: BinOp.BITOR, ast.BitXor: BinOp.BITXOR,
           ast.LShift: BinOp.SHL, ast.RShift: BinOp.SHR}
_CMPS = {ast.Eq: BinOp.EQ, ast.NotEq: BinOp.NE, ast.Lt: BinOp.LT, ast.Gt: BinOp.GT, ast.LtE: BinOp.LE,
         ast.GtE: BinOp.GE}
_UNARY_INTRINSICS = {"sqrt": UnOp.SQRT, "floor": UnOp.FLOOR, "ceil": UnOp.CEIL, "trunc": UnOp.TRUNC,
                     "exp": UnOp.EXP, "log": UnOp.LOG, "exp2": UnOp.EXP2, "log2": UnOp.LOG2,
                     "sin": UnOp.SIN, "cos": UnOp.COS, "tan": UnOp.TAN, "tanh": UnOp.TANH,
                     "sinh": UnOp.SINH, "cosh": UnOp.COSH, "expm1": UnOp.EXPM1, "log1p": UnOp.LOG1P,
                     "atan": UnOp.ATAN, "asin": UnOp.ASIN, "acos": UnOp.ACOS, "cbrt": UnOp.CBRT,
                     "erf": UnOp.ERF,
                     "isnan": UnOp.IS_NAN, "isinf": UnOp.IS_INF, "popcount": UnOp.POPCOUNT,
                     "clz": UnOp.CLZ, "ctz": UnOp.CTZ, "reverse_bits": UnOp.REVERSE_BITS,
                     "byte_swap": UnOp.BYTE_SWAP}
_BINARY_INTRINSICS = {"hypot": BinOp.HYPOT, "pow": BinOp.POW, "atan2": BinOp.ATAN2, "mul_high": BinOp.MUL_HIGH, "rotl": BinOp.ROTATE_LEFT, "rotr": BinOp.ROTATE_RIGHT,
                      "sat_add": BinOp.SATURATING_ADD, "sat_sub": BinOp.SATURATING_SUB}
_ATOMICS = {"atomic_add": AtomicOp.ADD, "atomic_or": AtomicOp.OR, "atomic_and": AtomicOp.AND,
            "atomic_xor": AtomicOp.XOR, "atomic_min": AtomicOp.MIN, "atomic_max": AtomicOp.MAX,
            "atomic_exchange": AtomicOp.EXCHANGE}


def _height(root: ast.AST) -> int:
    """Height of the expressions under a statement (an iterative walk: any depth is safe);
    nested statements are measured when they are translated."""
    best = 0
    stack = [(child, 1) for child in ast.iter_child_nodes(root) if isinstance(child, ast.expr)]
    while stack:
        node, h = stack.pop()
        best = max(best, h)
        stack.extend((child, h + 1) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))
    return best


# id(obj) -> (obj, "file:line") of what the statements of one kernel build became: their IR
# statements (a validator finding's IR path is mapped back to its line) and the signed
# divisions among their expressions (a dispatch's division fault names them); the object is
# kept so an id is never reused while the build runs
Lines = dict[int, tuple[Node | Expr, str]]


class Captured:
    """A function's source text, captured when the decorator runs (a file edited after import
    does not change the kernel), or the `KernelError` saying why there is none."""

    def __init__(self, fn: Callable) -> None:
        name = getattr(fn, "__name__", repr(fn))
        self.error: KernelError | None = None
        self.file, self.first, self.text = "<unknown>", 1, ""
        if name == "<lambda>" or not inspect.isfunction(fn):
            code = getattr(fn, "__code__", None)   # a lambda's own line, even on a continuation line
            where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""
            self.error = KernelError(f"{name} is not a def function; kernels are compiled from a "
                                     "function's source.", "write the kernel with `def name(...):` "
                                     "in a .py file or a notebook cell.", "K001", where)
            return
        try:
            lines, self.first = inspect.getsourcelines(fn)
            self.file = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError):
            self.error = KernelError(f"the source of {name!r} is not available.",
                                     "define kernels in a .py file (or a notebook cell), not with exec "
                                     "or at the interactive prompt.", "K001")
            return
        self.text = textwrap.dedent("".join(lines))

    def where(self, lineno: int = 1) -> str:
        return f"{self.file}:{self.first + lineno - 1}"


def capture(fn: Callable) -> Captured:
    """The source of ``fn`` now (cached on the function: a kernel and a func share it)."""
    got = getattr(fn, "__vyre_source__", None)
    if isinstance(got, Captured):
        return got
    got = Captured(fn)
    try:
        fn.__vyre_source__ = got  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass
    return got


class Source:
    """A Python function's captured source, parsed once, with its globals for name lookups."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        cap = capture(fn)
        if cap.error is not None:
            raise cap.error
        self.first, self.file, self.text = cap.first, cap.file, cap.text
        try:
            tree = ast.parse(self.text)
        except SyntaxError:
            raise KernelError(f"the source of {fn.__name__!r} does not parse on its own.",
                              "define the kernel with `def` at the start of its own lines.", "K001",
                              cap.where()) from None
        node = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
        if node is None:
            raise KernelError(f"{fn.__name__!r} is not defined with `def`.",
                              "write the kernel with `def name(...):`.", "K001", cap.where())
        self.node = node
        self.names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
            {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        self.globals = dict(fn.__globals__)
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.globals[name] = cell.cell_contents
                except ValueError:
                    pass
        try:
            self.annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:   # a VyreError too: an intrinsic called in an annotation (K017), ...
            if isinstance(exc, KernelError) and exc.code != "K017":
                raise
            text = exc.message.partition("] ")[2] if isinstance(exc, KernelError) else \
                exc.message if isinstance(exc, VyreError) else str(exc)
            raise self.error(self.node, f"the annotations of {fn.__name__!r} do not evaluate ({text}).",
                             "annotate with names vyre.kernel exports (In, Out, Scalar, u32, f32, ...).",
                             "K006") from None

    def where(self, node: ast.AST | None = None) -> str:
        return f"{self.file}:{self.first + getattr(node, 'lineno', 1) - 1}"

    def error(self, node: ast.AST, message: str, fix: str, code: str = "K002") -> KernelError:
        return KernelError(message, kernel_words(fix), code, self.where(node))


class _Scope:
    """What the translator knows about names and buffers while it walks a body."""

    def __init__(self) -> None:
        self.types: dict[str, DataType] = {}
        self.buffers: dict[str, BufferDecl] = {}
        self.functions: dict[str, Function] = {}
        self.shapes: dict[str, tuple[Expr, ...]] = {}     # N-D buffers: the extent of each axis

    def buffer(self, name: str) -> BufferDecl | None:
        return self.buffers.get(name)

    def function(self, name: str) -> Function | None:
        return self.functions.get(name)


_CONST_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b, ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b, ast.RShift: lambda a, b: a >> b}
_F32_MAX = float(np.finfo(np.float32).max)
_F32_EDGE = (2 - 2.0 ** -24) * 2.0 ** 127       # a float from here up rounds to inf in f32
_NO_INDEX = 0xFFFFFFFF     # never in bounds (no buffer has 2**32 elements): S6 applies
_UNSIGNED = {DataType.I32: DataType.U32, DataType.U32: DataType.U32, DataType.I64: DataType.U64,
             DataType.U64: DataType.U64}


class Translator:
    """One function body to IR statements."""

    def __init__(self, src: Source, scope: _Scope, in_function: bool, max_iterations: int,
                 func_resolver: Callable[..., Function], names: set[str],
                 lines: Lines, phase_lets: list[Node] | None = None,
                 alias: dict[str, str] | None = None) -> None:
        self.src, self.scope, self.in_function = src, scope, in_function
        self.max_iterations = max_iterations
        self.resolve_func = func_resolver
        self.names = names                  # every name in use: generated names avoid them
        self.lines = lines                  # id(node) -> (node, "file:line"): see `Lines`
        self.phase_lets = list(phase_lets or [])   # re-declared at the start of every phase
        self.alias = dict(alias or {})      # a function's buffer parameters -> the kernel's buffers
        self.hoisted: list[Node] = []      # lets of locals first assigned in a nested block
        self.base = {n.name for n in self.phase_lets if isinstance(n, N.Let)}
        self.declared: set[str] = set(scope.types) | self.base
        self.dead: set[str] = set()         # locals of an earlier grid_sync phase
        self.depth = 0
        self.result: Expr | None = None
        self.result_node: ast.AST | None = None

    def err(self, node: ast.AST, message: str, fix: str, code: str = "K002") -> KernelError:
        return self.src.error(node, message, fix, code)

    def fresh(self, hint: str) -> str:
        """A local name no user name, buffer or earlier generated name uses."""
        name = unique(hint, self.names | set(self.scope.types) | set(self.scope.buffers))
        self.names.add(name)
        return name

    # ---- types -------------------------------------------------------------------------
    def resolve(self, e: Expr, want: DataType | None, node: ast.AST) -> Expr:
        """``e`` with its weak literals typed from context (`vyre.ir.weak`, one recipe)."""
        if not getattr(e, "_w", False):
            return e
        try:
            return Resolver(self.scope).expr(e, want, dict(self.scope.types))
        except VyreError as err:
            raise self.err(node, err.message, err.fix, "K005") from None

    def type_of(self, e: Expr, node: ast.AST) -> DataType:
        try:
            return infer(e, self.scope.types, self.scope)
        except TypeFault as f:
            raise self.err(node, f.message, f.fix, "K004") from None

    def typed(self, e: Expr, node: ast.AST, want: DataType | None = None) -> tuple[Expr, DataType]:
        e = self.resolve(e, want, node)
        return e, self.type_of(e, node)

    # ---- statements ----------------------------------------------------------------------
    def top(self, stmts: list[ast.stmt]) -> list[Node]:
        """A kernel body: phases split by grid_sync(), each starting with the scalar and shape
        locals and the locals first assigned in a nested block of that phase."""
        out: list[Node] = []
        phase: list[Node] = []
        for s in stmts:
            if self._is_grid_sync(s):
                barrier = Node.barrier(MemoryOrdering.GRID_SYNC)
                out += self.phase_lets + self.hoisted + phase + [barrier]
                self.lines[id(barrier)] = (barrier, self.src.where(s))
                self.hoisted, phase = [], []
                self.dead |= self.declared - self.base
                self.declared = set(self.base)
                continue
            phase.extend(self.stmt(s))
        return out + self.phase_lets + self.hoisted + phase

    def _is_grid_sync(self, s: ast.stmt) -> bool:
        return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
            self.lookup_quiet(s.value.func) is K.grid_sync

    def body(self, stmts: list[ast.stmt]) -> list[Node]:
        out: list[Node] = []
        for i, s in enumerate(stmts):
            if self.in_function and isinstance(s, ast.Return):
                if self.depth or i != len(stmts) - 1:
                    raise self.err(s, "a return before the end of a function.",
                                   "compute the result in a local and return it once, at the end.", "K011")
                if s.value is not None:
                    self.result = self.expr(s.value)
                    self.result_node = s
                continue
            out.extend(self.stmt(s))
        return out

    def nested(self, stmts: list[ast.stmt]) -> list[Node]:
        self.depth += 1
        try:
            return self.body(stmts)
        finally:
            self.depth -= 1

    def stmt(self, s: ast.stmt) -> list[Node]:
        height = _height(s)
        if height > MAX_DEPTH:   # refused before the recursive walk could overflow Python's stack
            raise self.err(s, f"this statement's expression nests {height} levels deep (the limit is "
                           f"{MAX_DEPTH}).", "split it: bind parts to locals (t = a + b) and combine those.",
                           "K003")
        try:
            nodes = self._stmt(s)
            resolver = Resolver(self.scope)
            nodes = [resolver.stmt(n, dict(self.scope.types)) for n in nodes]
        except KernelError:
            raise
        except VyreError as err:
            raise self.err(s, err.message, err.fix, "K005") from None
        except RecursionError:
            raise self.err(s, "an expression nested too deeply to compile.",
                           "split it into several assignments.", "K003") from None
        self.check(nodes, s)
        where = self.src.where(s)
        for n in nodes:
            self.lines.setdefault(id(n), (n, where))
        return nodes

    def check(self, nodes: list[Node], s: ast.stmt) -> None:
        """Type-check what one Python statement became, so a type error names its line; a
        float literal that overflows its type is refused here too."""
        for n in nodes:
            try:
                for e in N.node_exprs(n):
                    if isinstance(n, N.Eval) and isinstance(e, E.Call):   # a call for its effects:
                        call_check(e, self.scope.types, self.scope)     # with a result or without
                    else:
                        infer(e, self.scope.types, self.scope)
                    for sub in E.walk(e):
                        if isinstance(sub, E.Bin) and sub.op in (BinOp.DIV, BinOp.MOD) and \
                                infer(sub.left, self.scope.types, self.scope).is_signed:
                            self.lines.setdefault(id(sub), (sub, self.src.where(s)))   # may fault (S3)
                        if isinstance(sub, E.Lit) and sub.dtype.is_float and not self._literal_ok(sub):
                            raise TypeFault("K005", f"a float literal overflows {sub.dtype.value} "
                                            f"(it would be {sub.value}).",
                                            f"use a value within {sub.dtype.value}'s range.")
                if isinstance(n, N.Assign):
                    t, want = infer(n.value, self.scope.types, self.scope), self.scope.types.get(n.name)
                    if want is not None and t is not want:
                        raise TypeFault("V003", f"{n.name!r} is {want.value} but is assigned a {t.value}.",
                                        f"give {n.name!r} one type: initialise it with that type's value "
                                        f"(e.g. 0.0 for f32) or cast with {want.value}(...).")
                if isinstance(n, N.Store):
                    decl = self.scope.buffer(n.buffer)
                    t = infer(n.value, self.scope.types, self.scope)
                    if decl is not None and t is not decl.dtype.value_type:
                        raise TypeFault("V003", f"storing a {t.value} into {self.user_name(n.buffer)!r} "
                                        f"({decl.dtype.value}).", f"cast it: {decl.dtype.value_type.value}(...).")
            except TypeFault as f:
                code = f.code if f.code.startswith("K") else "K004"
                raise self.err(s, f.message, f.fix, code) from None

    def _literal_ok(self, lit: E.Lit) -> bool:
        v = lit.value
        return not (isinstance(v, float) and math.isinf(v)) or self.allow_inf

    allow_inf = False

    def user_name(self, buffer: str) -> str:
        for a, b in self.alias.items():
            if b == buffer:
                return a
        return buffer

    def _stmt(self, s: ast.stmt) -> list[Node]:
        self.allow_inf = any(isinstance(c, ast.Name | ast.Attribute) and
                             isinstance(self.constant(c), float) and math.isinf(self.constant(c))
                             for c in ast.walk(s) if isinstance(c, ast.Name | ast.Attribute))
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                return []   # a docstring
            return self.call_stmt(s.value)
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise self.err(s, "chained assignment (a = b = ...).", "assign each name on its own line.")
            return self.assign(s.targets[0], s.value, s)
        if isinstance(s, ast.AnnAssign):
            if s.value is None:
                raise self.err(s, "a declaration without a value.", "give the local a value: x: f32 = 0.0")
            t = self.annotation(s.annotation, s)
            return self.assign(s.target, s.value, s, cast=t)
        if isinstance(s, ast.AugAssign):
            return self.aug_assign(s)
        if isinstance(s, ast.If):
            cond = self.cond(s.test)
            return [Node.if_(cond, self.nested(s.body), self.nested(s.orelse))]
        if isinstance(s, ast.For):
            return self.for_range(s)
        if isinstance(s, ast.While):
            if s.orelse:
                raise self.err(s, "while ... else.", "set a flag before break and test it after the loop.")
            cond = self.cond(s.test)
            return [Node.while_(cond, self.nested(s.body), self.max_iterations)]
        if isinstance(s, ast.Break):
            return [Node.break_()]
        if isinstance(s, ast.Continue):
            return [Node.continue_()]
        if isinstance(s, ast.Return):
            if s.value is not None:
                raise self.err(s, "a kernel returns no value.", "store results into an Out[...] buffer.", "K011")
            return [Node.return_()]
        raise self.err(s, f"{type(s).__name__} statements are not supported in kernels.",
                       "use assignments, if/for/while, stores and calls (docs/kernels.md lists what "
                       "a kernel may contain).")

    def cond(self, node: ast.expr) -> Expr:
        e, t = self.typed(self.expr(node), node, DataType.BOOL)
        if t is not DataType.BOOL:
            raise self.err(node, f"the condition {ast.unparse(node)!r} is a {t.value}, not a bool.",
                           f"compare it: {ast.unparse(node)} != 0", "K004")
        return e

    def annotation(self, node: ast.expr, where: ast.AST) -> DataType:
        obj = self.lookup(node)
        if not isinstance(obj, DataType) or obj.storage_only:
            raise self.err(where, f"annotation {ast.unparse(node)!r} is not a vyre value type.",
                           "annotate locals with u32, i32, u64, i64, f32, f16, bf16 or bool_ from "
                           "vyre.kernel.", "K006")
        return obj

    def assign(self, target: ast.expr, value: ast.expr, node: ast.AST, cast: DataType | None = None) -> list[Node]:
        if isinstance(target, ast.Tuple):
            if isinstance(value, ast.Attribute) and value.attr == "shape":
                exprs: list[tuple[Expr, ast.AST]] = [(e, value) for e in self.shape_of(value.value, node)]
            elif isinstance(value, ast.Tuple):
                exprs = [(self.expr(v), v) for v in value.elts]
            else:
                raise self.err(node, "tuple assignment needs a tuple of the same length.",
                               "assign a, b = x, y with as many values as names (or h, w = img.shape).")
            if len(exprs) != len(target.elts):
                raise self.err(node, f"{len(target.elts)} names are assigned {len(exprs)} values.",
                               "assign as many values as names.")
            temps: list[str] = []
            out: list[Node] = []
            for e, v in exprs:   # evaluate every value first (a, b = b, a swaps)
                e, t = self.typed(e, v)
                tmp = self.fresh("tuple")
                self.scope.types[tmp] = t
                self.declared.add(tmp)
                out.append(Node.let_bind(tmp, e))
                temps.append(tmp)
            for t_node, tmp in zip(target.elts, temps):
                out += self.assign_expr(t_node, Expr.var(tmp), node)
            return out
        if isinstance(value, ast.Call) and self.lookup_quiet(value.func) in (K.shared, K.local):
            return self.allocate(target, value, node)
        if cast is not None:
            lit = self.typed_literal(value, cast, node)
            if lit is not None:
                e = lit
            else:
                e, t = self.typed(self.expr(value), node, cast)
                if t is not cast:
                    e = Expr.cast(cast, e)
            return self.assign_expr(target, e, node)
        return self.assign_expr(target, self.expr(value), node)

    def assign_expr(self, target: ast.expr, e: Expr, node: ast.AST) -> list[Node]:
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.scope.buffers or name in self.alias:
                raise self.err(node, f"{name!r} is a buffer; it cannot be rebound.",
                               f"store into it: {name}[i] = ...", "K008")
            if name in self.declared:
                return [Node.assign(name, self.resolve(e, self.scope.types[name], node))]
            e, t = self.typed(e, node)
            self.scope.types[name] = t
            self.declared.add(name)
            self.dead.discard(name)
            if self.depth == 0:
                return [Node.let_bind(name, e)]
            # first assigned in a nested block: declared at the top of its phase (Python's
            # function scope)
            self.hoisted.append(Node.let_bind(name, _zero(t)))
            return [Node.assign(name, e)]
        if isinstance(target, ast.Subscript):
            buf = self.buffer_name(target.value)
            index = self.index(buf, target.slice, node)
            return [Node.store(buf, index, self.store_value(buf, e, node))]
        raise self.err(node, f"cannot assign to {ast.unparse(target)!r}.", "assign to a name or to buf[i].")

    def store_value(self, buf: str, e: Expr, node: ast.AST) -> Expr:
        """The value stored to ``buf``: typed from the buffer; an i32 into a u8/u16 buffer or a
        u32 into an i8/i16 one keeps its low bits (S26)."""
        decl = self.scope.buffers[buf]
        want = decl.dtype.value_type
        e, t = self.typed(e, node, want)
        if decl.dtype.storage_only and t is not want and t in (DataType.U32, DataType.I32):
            return Expr.cast(want, e)
        return e

    def aug_assign(self, s: ast.AugAssign) -> list[Node]:
        op = self.binop(s.op, s)
        if isinstance(s.target, ast.Name):
            name = s.target.id
            if name not in self.declared:
                self._dead_check(s.target)
                raise self.err(s, f"{name!r} is updated before it is assigned.", f"assign {name} first.", "K007")
            value = self.arith(op, Expr.var(name), self.expr(s.value), s)
            return [Node.assign(name, self.resolve(value, self.scope.types[name], s))]
        if isinstance(s.target, ast.Subscript):
            buf = self.buffer_name(s.target.value)
            out: list[Node] = []
            index = self.index(buf, s.target.slice, s)
            if not isinstance(index, E.Var | E.Lit | E.Id):
                tmp = self.fresh("index")
                self.scope.types[tmp] = DataType.U32
                self.declared.add(tmp)
                out.append(Node.let_bind(tmp, index))
                index = Expr.var(tmp)
            value = self.arith(op, Expr.load(buf, index), self.expr(s.value), s)
            return out + [Node.store(buf, index, self.store_value(buf, value, s))]
        raise self.err(s, f"cannot update {ast.unparse(s.target)!r}.", "update a name or buf[i].")

    def allocate(self, target: ast.expr, value: ast.Call, node: ast.AST) -> list[Node]:
        kind = self.lookup(value.func)
        if self.depth or self.in_function or not isinstance(target, ast.Name):
            raise self.err(node, f"{kind.name}() outside the top level of a kernel.",
                           f"write `name = {kind.name}(dtype, count)` at the top of the kernel body.", "K012")
        if len(value.args) != 2:
            raise self.err(node, f"{kind.name}() takes (dtype, count).", f"write {kind.name}(f32, 256).", "K012")
        dtype = self.lookup(value.args[0])
        count = self.constant(value.args[1])
        if not isinstance(dtype, DataType) or not isinstance(count, int) or count <= 0:
            raise self.err(node, f"{kind.name}({ast.unparse(value.args[0])}, {ast.unparse(value.args[1])}) "
                           "needs a vyre type and a positive constant count.", f"write {kind.name}(f32, 256).",
                           "K012")
        name = target.id
        if name in self.scope.buffers or name in self.declared:
            raise self.err(node, f"{name!r} is already a buffer or a local.", "give the array its own name.",
                           "K012")
        maker = BufferDecl.workgroup if kind is K.shared else BufferDecl.local
        self.scope.buffers[name] = maker(name, count, dtype)
        return []

    def for_range(self, s: ast.For) -> list[Node]:
        it = s.iter
        if s.orelse or not isinstance(s.target, ast.Name) or not (
                isinstance(it, ast.Call) and self.lookup_quiet(it.func) is range):
            raise self.err(s, "only `for name in range(...)` loops are compiled.",
                           "write for i in range(n) / range(a, b) / range(a, b, step); use while otherwise.",
                           "K011")
        if not 1 <= len(it.args) <= 3 or it.keywords:
            raise self.err(s, "range() takes 1 to 3 arguments.", "write range(n) or range(a, b[, step]).", "K011")
        raw = [self.expr(a) for a in it.args[:2]]
        lo, hi = (raw[0], raw[1]) if len(raw) > 1 else (E.WeakLit(0), raw[0])
        step = 1
        if len(it.args) == 3:
            step = self.constant(it.args[2])
            if not isinstance(step, int) or isinstance(step, bool) or step == 0:
                raise self.err(s, "range() with a step that is not a non-zero integer constant.",
                               "use a literal step (e.g. range(0, n, 4) or range(n, 0, -1)), or a while loop.",
                               "K011")
        var = s.target.id
        if var in self.declared or var in self.scope.buffers:
            raise self.err(s, f"the loop variable {var!r} is already a local.",
                           "use a fresh name for the loop variable.", "K011")
        t = self.range_type(s, lo, hi)
        lo, hi = self.resolve(lo, t, s), self.resolve(hi, t, s)
        for e in (lo, hi):
            if self.type_of(e, s) is not t:
                raise self.err(s, f"range() bounds have different types ({self.type_of(lo, s).value} and "
                               f"{self.type_of(hi, s).value}).", f"cast one: range({t.value}(a), b).", "K004")
        if step == 1:
            self.scope.types[var] = t
            self.declared.add(var)
            body = self.nested(s.body)
            self.declared.discard(var)
            return [Node.loop(var, lo, hi, body)]
        # range(a, b, s): k over [0, trips), var = a + k*s. The trip count is computed in the
        # unsigned type of the bounds' width, so b - a never wraps (issue 28 item 12).
        out: list[Node] = []
        bounds = []
        for e, hint in ((lo, "start"), (hi, "stop")):
            if not isinstance(e, E.Lit | E.Var):
                tmp = self.fresh(hint)
                self.scope.types[tmp] = t
                self.declared.add(tmp)
                out.append(Node.let_bind(tmp, e))
                e = Expr.var(tmp)
            bounds.append(e)
        lo, hi = bounds
        ut = _UNSIGNED[t]
        first, last = (hi, lo) if step > 0 else (lo, hi)
        span = Expr.bin(BinOp.SUB, Expr.cast(ut, first), Expr.cast(ut, last))
        size = abs(step)
        trips = Expr.select(Expr.bin(BinOp.GT, first, last),
                            Expr.bin(BinOp.ADD, Expr.bin(BinOp.DIV, Expr.bin(BinOp.SUB, span, Expr.lit(ut, 1)),
                                                         Expr.lit(ut, size)), Expr.lit(ut, 1)),
                            Expr.lit(ut, 0))
        k = self.fresh("trip")
        self.scope.types[var] = t
        self.scope.types[k] = ut
        self.declared |= {var, k}
        offset = Expr.bin(BinOp.MUL, Expr.cast(t, Expr.var(k)), Expr.lit(t, size))
        value = Expr.bin(BinOp.ADD if step > 0 else BinOp.SUB, lo, offset)
        body = [Node.let_bind(var, value)] + self.nested(s.body)
        self.declared -= {var, k}
        return out + [Node.loop(k, Expr.lit(ut, 0), trips, body)]

    def range_type(self, s: ast.For, lo: Expr, hi: Expr) -> DataType:
        resolver = Resolver(self.scope)
        types = dict(self.scope.types)
        t = resolver.peek(lo, types) or resolver.peek(hi, types)
        if t is None:   # only literals: u32, or i32 when a bound is negative (as Python counts)
            values = [e.value for e in (lo, hi) if isinstance(e, E.WeakLit)]
            neg = any(v < 0 for v in values)
            big = any(abs(v) > (0x7FFFFFFF if neg else 0xFFFFFFFF) for v in values)
            t = (DataType.I64 if big else DataType.I32) if neg else (DataType.U64 if big else DataType.U32)
        if t not in _UNSIGNED:
            raise self.err(s, f"range() over {t.value} values.", "loop over integers (u32, i32, u64, i64).",
                           "K004")
        return t

    def call_stmt(self, node: ast.expr) -> list[Node]:
        if not isinstance(node, ast.Call):
            raise self.err(node, "an expression whose value is unused.", "assign it, store it, or remove it.",
                           "K003")
        fn = self.lookup(node.func)
        if fn is K.barrier:
            return [Node.barrier()]
        if fn is K.grid_sync:
            raise self.err(node, "grid_sync() inside control flow or a function.",
                           "call grid_sync() at the top level of the kernel body.", "K011")
        e = self.expr(node, discard=True)
        return [Node.expr(e)]

    # ---- names ----------------------------------------------------------------------------
    def lookup_quiet(self, node: ast.expr) -> Any:
        try:
            return self.lookup(node)
        except KernelError:
            return None

    def lookup(self, node: ast.expr) -> Any:
        """The Python object a name or attribute chain names in the kernel's globals."""
        if isinstance(node, ast.Name):
            if node.id in self.src.globals:
                return self.src.globals[node.id]
            import builtins

            if hasattr(builtins, node.id):
                return getattr(builtins, node.id)
            raise self.err(node, f"name {node.id!r} is not defined.", "define it, or import it from vyre.kernel.",
                           "K007")
        if isinstance(node, ast.Attribute):
            base = self.lookup(node.value)
            if not hasattr(base, node.attr):
                raise self.err(node, f"{ast.unparse(node)!r} does not exist.", "check the name.", "K007")
            return getattr(base, node.attr)
        raise self.err(node, f"{ast.unparse(node)!r} is not a name.", "call functions by name.", "K009")

    def constant(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.constant(node.operand)
            return -v if isinstance(v, int | float) and not isinstance(v, bool) else None
        if isinstance(node, ast.BinOp) and type(node.op) in _CONST_OPS:   # 2**30, 1 << 20, N - 1
            a, b = self.constant(node.left), self.constant(node.right)
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
                if isinstance(node.op, ast.Pow | ast.LShift | ast.RShift) and not 0 <= b <= 128:
                    return None
                if isinstance(node.op, ast.FloorDiv | ast.Mod) and b == 0:
                    return None
                return _CONST_OPS[type(node.op)](a, b)
            return None
        if isinstance(node, ast.Name | ast.Attribute) and not (
                isinstance(node, ast.Name) and (node.id in self.declared or node.id in self.dead)):
            v = self.lookup_quiet(node)
            if isinstance(v, np.integer | np.floating):
                v = v.item()
            return v if isinstance(v, int | float) and not isinstance(v, bool) else None
        return None

    def buffer_name(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name) and node.id in self.alias:
            return self.alias[node.id]
        if isinstance(node, ast.Name) and node.id in self.scope.buffers and not self.in_function:
            return node.id
        raise self.err(node, f"{ast.unparse(node)!r} is not a buffer.", "index a buffer parameter or an array "
                       "from shared()/local().", "K008")

    def _dead_check(self, node: ast.Name) -> None:
        if node.id in self.dead:
            raise self.err(node, f"{node.id!r} was assigned before grid_sync(); locals do not survive it "
                           "(each phase runs as its own launch).",
                           f"assign {node.id} again after grid_sync() (e.g. i = gid()), or pass the value "
                           "through a buffer.", "K011")

    # ---- indexing and shapes ----------------------------------------------------------------
    def shape_of(self, node: ast.expr, where: ast.AST) -> tuple[Expr, ...]:
        buf = self.buffer_name(node)
        shape = self.scope.shapes.get(buf)
        if shape is None:
            return (Expr.buf_len(buf),)
        return shape

    def index(self, buf: str, node: ast.expr, where: ast.AST) -> Expr:
        """``buf[node]`` as one u32 index: N-D indices flattened row-major; an index outside
        its axis (a negative one included) is out of bounds (S6)."""
        if isinstance(node, ast.Slice) or (isinstance(node, ast.Tuple) and
                                           any(isinstance(p, ast.Slice) for p in node.elts)):
            raise self.err(where, "slices are not supported in kernels.", "index one element at a time: x[i].",
                           "K014")
        parts = list(node.elts) if isinstance(node, ast.Tuple) else [node]
        shape = self.scope.shapes.get(buf)
        ndim = 1 if shape is None else len(shape)
        if len(parts) != ndim:
            raise self.err(where, f"{self.user_name(buf)!r} has {ndim} axis/axes but is indexed with "
                           f"{len(parts)}.", f"index it with {ndim} value(s): "
                           f"{self.user_name(buf)}[{', '.join('ijk'[:ndim]) if ndim <= 3 else '...'}].", "K014")
        idx = [self.index_part(p, where) for p in parts]
        if shape is None:
            return idx[0]
        flat = idx[0]
        inside = Expr.bin(BinOp.LT, idx[0], shape[0])
        for k in range(1, ndim):
            flat = Expr.bin(BinOp.ADD, Expr.bin(BinOp.MUL, flat, shape[k]), idx[k])
            inside = Expr.bin(BinOp.AND, inside, Expr.bin(BinOp.LT, idx[k], shape[k]))
        return Expr.select(inside, flat, Expr.u32(_NO_INDEX))

    def index_part(self, node: ast.expr, where: ast.AST) -> Expr:
        v = self.constant(node)
        if isinstance(v, int) and v < 0:
            raise self.err(where, f"the negative index {v}: kernels do not count from the end.",
                           "index from the start, e.g. x[len(x) - 1].", "K014")
        e, t = self.typed(self.expr(node), node, DataType.U32)
        if t is DataType.U32:
            return e
        if t is DataType.I32:
            return Expr.select(Expr.bin(BinOp.GE, e, Expr.i32(0)), Expr.cast(DataType.U32, e), Expr.u32(_NO_INDEX))
        if t in (DataType.U64, DataType.I64):
            ok = Expr.bin(BinOp.LE, e, Expr.lit(t, _NO_INDEX))
            if t is DataType.I64:
                ok = Expr.bin(BinOp.AND, Expr.bin(BinOp.GE, e, Expr.lit(t, 0)), ok)
            return Expr.select(ok, Expr.cast(DataType.U32, e), Expr.u32(_NO_INDEX))
        raise self.err(where, f"the index {ast.unparse(node)!r} is a {t.value}.",
                       "index with an integer (u32, i32, u64 or i64): e.g. u32(x).", "K004")

    # ---- expressions ----------------------------------------------------------------------
    def binop(self, op: ast.operator, node: ast.AST) -> Any:
        if isinstance(op, ast.Div | ast.FloorDiv | ast.Pow):
            return op
        if type(op) not in _BINOPS:
            raise self.err(node, f"the operator {type(op).__name__} is not supported.",
                           "use + - * / // % ** & | ^ << >> (there is no @).", "K003")
        return _BINOPS[type(op)]

    def arith(self, op: Any, left: Expr, right: Expr, node: ast.AST) -> Expr:
        if isinstance(op, ast.Pow):   # pow, correctly rounded (S13): floats only
            t = Resolver(self.scope).peek(left, dict(self.scope.types)) \
                or Resolver(self.scope).peek(right, dict(self.scope.types))
            if t is not None and not t.is_float:
                raise self.err(node, f"`**` on {t.value} values: it is pow, a float function.",
                               "cast to f32 (f32(a) ** b), or multiply (a * a) for an integer power.", "K004")
            return Expr.bin(BinOp.POW, left, right)
        if isinstance(op, ast.Div | ast.FloorDiv):
            resolver = Resolver(self.scope)
            types = dict(self.scope.types)
            t = resolver.peek(left, types) or resolver.peek(right, types)
            if t is not None and isinstance(op, ast.Div) and not t.is_float:
                raise self.err(node, f"`/` on {t.value} values.", "use // for integer division, or cast to f32.",
                               "K004")
            if t is not None and isinstance(op, ast.FloorDiv) and t.is_float:
                raise self.err(node, f"`//` on {t.value} values.", "use floor(a / b) for floats.", "K004")
            return Expr.bin(BinOp.DIV, left, right)
        return Expr.bin(op, left, right)

    def literal(self, value: int | float, node: ast.AST) -> Expr:
        if isinstance(value, float) and math.isfinite(value) and abs(value) >= _F32_EDGE:
            raise self.err(node, f"the literal {value!r} does not fit any vyre float type (f32 holds up to "
                           f"{_F32_MAX:.7g}).", "use a smaller value.", "K005")
        try:
            return E.coerce(value)
        except VyreError as err:
            raise self.err(node, err.message, err.fix, "K005") from None

    def expr(self, node: ast.expr, discard: bool = False) -> Expr:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return Expr.bool_(node.value)
            if isinstance(node.value, int | float):
                return self.literal(node.value, node)
            raise self.err(node, f"the constant {node.value!r} is not a number.", "use numbers and bools.", "K003")
        if isinstance(node, ast.Name):
            if node.id in self.declared:
                return Expr.var(node.id)
            self._dead_check(node)
            if node.id in self.scope.buffers or node.id in self.alias:
                raise self.err(node, f"the buffer {node.id!r} is used as a value.", f"index it: {node.id}[i].",
                               "K008")
            v = self.constant(node)
            if v is not None:
                return self.literal(v, node)
            raise self.err(node, f"{node.id!r} is not a local, a parameter or a numeric constant.",
                           "assign it first, or make it a module-level number.", "K007")
        if isinstance(node, ast.Attribute):
            if node.attr == "shape" and isinstance(node.value, ast.Name) and (
                    node.value.id in self.scope.buffers or node.value.id in self.alias):
                raise self.err(node, f"{ast.unparse(node)} is a tuple, not a value.",
                               f"read one extent, {ast.unparse(node)}[0], or unpack it: h, w = "
                               f"{ast.unparse(node)}.", "K014")
            v = self.constant(node)
            if v is not None:
                return self.literal(v, node)
            raise self.err(node, f"{ast.unparse(node)!r} is not a numeric constant.", "use numbers.", "K007")
        if isinstance(node, ast.BinOp):
            v = self.constant(node)
            if isinstance(v, int) and -(2**63) <= v < 2**64:
                return self.literal(v, node)
            return self.arith(self.binop(node.op, node), self.expr(node.left), self.expr(node.right), node)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub) and isinstance(self.constant(node), int | float):
                return self.literal(self.constant(node), node)
            v = self.expr(node.operand)
            if isinstance(node.op, ast.USub):
                return Expr.un(UnOp.NEGATE, v)
            if isinstance(node.op, ast.UAdd):
                return v
            if isinstance(node.op, ast.Invert):
                return Expr.un(UnOp.BITNOT, v)
            return Expr.un(UnOp.LOGICAL_NOT, v)
        if isinstance(node, ast.BoolOp):
            op = BinOp.AND if isinstance(node.op, ast.And) else BinOp.OR
            parts = [self.expr(v) for v in node.values]
            out = parts[0]
            for p in parts[1:]:
                out = Expr.bin(op, out, p)
            return out
        if isinstance(node, ast.Compare):
            parts = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
            found: Expr | None = None
            for cmp, a, b in zip(node.ops, parts, parts[1:]):
                if type(cmp) not in _CMPS:
                    raise self.err(node, f"the comparison {type(cmp).__name__} is not supported.",
                                   "compare with == != < <= > >=.", "K003")
                c = Expr.bin(_CMPS[type(cmp)], a, b)
                found = c if found is None else Expr.bin(BinOp.AND, found, c)
            assert found is not None   # ast.Compare has at least one comparison
            return found
        if isinstance(node, ast.IfExp):
            return Expr.select(self.expr(node.test), self.expr(node.body), self.expr(node.orelse))
        if isinstance(node, ast.Subscript):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                shape = self.shape_of(base.value, node)
                k = self.constant(node.slice)
                if not isinstance(k, int) or not -len(shape) <= k < len(shape):
                    raise self.err(node, f"{ast.unparse(node)}: the axis must be a constant below {len(shape)}.",
                                   f"write {ast.unparse(base)}[0] .. [{len(shape) - 1}].", "K014")
                return shape[k]
            buf = self.buffer_name(base)
            return Expr.load(buf, self.index(buf, node.slice, node))
        if isinstance(node, ast.Call):
            return self.call(node, discard)
        raise self.err(node, f"{type(node).__name__} expressions are not supported in kernels.",
                       "use arithmetic, comparisons, indexing and calls.", "K003")

    def typed_literal(self, node: ast.expr, t: DataType, where: ast.AST) -> Expr | None:
        """``u64(5)`` / ``f16(0.5)``: a literal of that type (refused if it does not fit)."""
        value = self.constant(node)
        if not isinstance(value, int | float) or isinstance(value, bool) or t.storage_only or t is DataType.BOOL:
            return None
        if isinstance(value, float) and not t.is_float:
            return None
        self.literal(value, where)
        try:
            lit = Expr.lit(t, value)
        except VyreError as err:
            raise self.err(where, f"{t.value}({value!r}): {err.message}", f"use a value that fits {t.value}.",
                           "K005") from None
        if isinstance(value, float) and math.isfinite(value) and math.isinf(lit.value):
            raise self.err(where, f"the literal {value!r} overflows {t.value}.",
                           f"use a value within {t.value}'s range.", "K005")
        return lit

    def call(self, node: ast.Call, discard: bool) -> Expr:
        if node.keywords:
            raise self.err(node, "keyword arguments in a kernel call.", "pass arguments by position.", "K010")
        fn = self.lookup(node.func)
        args = node.args
        x = self.expr
        if isinstance(fn, DataType):
            if len(args) != 1:
                raise self.err(node, f"{fn.value}(x) takes one value.", f"write {fn.value}(x).", "K010")
            if fn.storage_only:
                raise self.err(node, f"{fn.value} is a storage type: values are never {fn.value}.",
                               f"store into a {fn.value} buffer directly, or mask: x & 0xFF.", "K004")
            lit = self.typed_literal(args[0], fn, node)
            if lit is not None:
                return lit
            inner, t = self.typed(x(args[0]), node)
            return inner if t is fn else Expr.cast(fn, inner)
        if isinstance(fn, K.Intrinsic):
            return self.intrinsic(fn, node, discard)
        if fn is abs:
            self.arity(node, 1)
            return Expr.un(UnOp.ABS, x(args[0]))
        if fn is min or fn is max:
            if len(args) < 2:
                raise self.err(node, f"{fn.__name__}() of fewer than two values.", "pass two or more values.",
                               "K010")
            out = x(args[0])
            for a in args[1:]:
                out = Expr.bin(BinOp.MIN if fn is min else BinOp.MAX, out, x(a))
            return out
        if fn is pow:   # Python's pow(a, b), as a ** b: the correctly rounded POW (S13)
            self.arity(node, 2)
            return self.arith(ast.Pow(), x(args[0]), x(args[1]), node)
        if fn is len:
            self.arity(node, 1)
            return self.shape_of(args[0], node)[0]
        func = getattr(fn, "__vyre_func__", None)
        if func is not None:
            return self.call_func(func, node, discard)
        name = getattr(fn, "__name__", None)
        if isinstance(name, str) and name in K.ALL:
            raise self.err(node, f"{ast.unparse(node.func)} is host Python; it cannot run in a kernel.",
                           f"call vyre.kernel.{name} (from vyre.kernel import {name}).", "K009")
        raise self.err(node, f"{ast.unparse(node.func)!r} cannot be called in a kernel.",
                       "call vyre.kernel device functions, @vyre.func functions, casts like u32(x), "
                       "abs, min, max, pow or len.", "K009")

    def intrinsic(self, fn: K.Intrinsic, node: ast.Call, discard: bool) -> Expr:
        name, args, x = fn.name, node.args, self.expr
        if name in ("gid", "lid", "wgid"):
            axis = self.constant(args[0]) if args else 0
            if axis not in (0, 1, 2) or len(args) > 1:
                raise self.err(node, f"{name}() axis must be the constant 0, 1 or 2.", f"write {name}(0).", "K010")
            return {"gid": Expr.gid, "lid": Expr.lid, "wgid": Expr.wgid}[name](axis)
        if name in _UNARY_INTRINSICS:
            self.arity(node, 1)
            return Expr.un(_UNARY_INTRINSICS[name], x(args[0]))
        if name in _BINARY_INTRINSICS:
            self.arity(node, 2)
            return Expr.bin(_BINARY_INTRINSICS[name], x(args[0]), x(args[1]))
        if name == "select":
            self.arity(node, 3)
            return Expr.select(x(args[0]), x(args[1]), x(args[2]))
        if name == "fma":
            self.arity(node, 3)
            return Expr.fma(x(args[0]), x(args[1]), x(args[2]))
        if name == "bitcast":
            self.arity(node, 2)
            t = self.lookup(args[0])
            if not isinstance(t, DataType):
                raise self.err(node, "bitcast(dtype, x) needs a vyre type first.", "write bitcast(u32, x).", "K010")
            inner, _ = self.typed(x(args[1]), node)
            return Expr.bitcast(t, inner)
        if name in _ATOMICS or name == "atomic_cas":
            self.arity(node, 4 if name == "atomic_cas" else 3)
            buf = self.buffer_name(args[0])
            want = self.scope.buffers[buf].dtype
            if want.is_float and not discard:
                raise self.err(node, f"{name}() on the {want.value} buffer {buf!r} gives no value: float "
                               "atomics accumulate exactly, and their old value would depend on the order "
                               "the invocations ran in.", f"call {name}(...) as a statement of its own and "
                               f"read {buf} after the kernel (the exact result is there when it ends).", "K016")
            idx = self.index(buf, args[1], node)
            val = self.resolve(x(args[3] if name == "atomic_cas" else args[2]), want, node)
            if name == "atomic_cas":
                return Expr.atomic(AtomicOp.COMPARE_EXCHANGE, buf, idx, val, self.resolve(x(args[2]), want, node))
            return Expr.atomic(_ATOMICS[name], buf, idx, val)
        raise self.err(node, f"{name}() is not an expression here.",
                       f"call {name}() as a statement, or at the top of the kernel.", "K011")

    def call_func(self, func: Any, node: ast.Call, discard: bool) -> Expr:
        src = Source(func)
        bufs, values = [], []
        for a, p in zip(node.args, src.node.args.args):
            if isinstance(src.annotations.get(p.arg), BufferSpec):
                bufs.append(self.buffer_name(a))
            else:
                values.append(a)
        f = self.resolve_func(func, tuple(bufs), self.src.where(node))
        if len(node.args) != len(src.node.args.args):
            raise self.err(node, f"{func.__name__}() takes {len(src.node.args.args)} argument(s), "
                           f"got {len(node.args)}.", "pass one value per parameter.", "K010")
        if f.result is None and not discard:
            raise self.err(node, f"{func.__name__}() returns no value.", "call it as a statement.", "K010")
        args = []
        for (pname, pt), a in zip(f.params, values):
            e, t = self.typed(self.expr(a), a, pt)
            if t is not pt:
                raise self.err(node, f"argument {pname!r} of {func.__name__}() is a {t.value}; it takes a "
                               f"{pt.value}.", f"cast it: {pt.value}({ast.unparse(a)}).", "K004")
            args.append(e)
        return Expr.call(f.name, *args)

    def arity(self, node: ast.Call, n: int) -> None:
        if len(node.args) != n:
            name = ast.unparse(node.func)
            raise self.err(node, f"{name}() takes {n} argument(s), got {len(node.args)}.",
                           f"see help(vyre.kernel.{name.split('.')[-1]}).", "K010")


def unique(hint: str, taken: set[str]) -> str:
    """``hint``, or ``hint_2``, ``hint_3``, ...: the first name not in ``taken`` (added to it)."""
    name, n = hint, 1
    while name in taken:
        n += 1
        name = f"{hint}_{n}"
    taken.add(name)
    return name


def _zero(t: DataType) -> Expr:
    return Expr.bool_(False) if t is DataType.BOOL else Expr.lit(t, 0)


# ---- kernels and functions ---------------------------------------------------------------
@dataclass
class Built:
    """A compiled kernel: its Program, its parameters in call order (``(name, BufferSpec |
    ScalarSpec)``, N-D ranks resolved), the N-D parameters whose runtime shape the call
    passes (a hidden u32 buffer of the extents each, in binding order after the parameters),
    the ``file:line`` of its ``def``, and of the statements (its own and its functions') that
    can fail a dispatch, per reason (`_sites`), with the while loops' cap ``max_iterations``."""

    program: Program
    params: list[tuple[str, Any]]
    shaped: list[str] = field(default_factory=list)
    where: str = ""
    sites: dict[str, tuple[str, ...]] = field(default_factory=dict)
    max_iterations: int = 0


def _ranks(src: Source, params: dict[str, BufferSpec]) -> dict[str, int]:
    """The rank of each buffer parameter: declared, or how the body indexes it (``x[i, j]``,
    ``x.shape[1]``, ``h, w = x.shape``)."""
    seen: dict[str, int] = {}
    for n in ast.walk(src.node):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in params \
                and isinstance(n.slice, ast.Tuple):
            seen[n.value.id] = max(seen.get(n.value.id, 1), len(n.slice.elts))
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "shape" \
                and isinstance(n.value.value, ast.Name) and n.value.value.id in params \
                and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, int):
            seen[n.value.value.id] = max(seen.get(n.value.value.id, 1), n.slice.value + 1)
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple) and \
                isinstance(n.value, ast.Attribute) and n.value.attr == "shape" and \
                isinstance(n.value.value, ast.Name) and n.value.value.id in params:
            seen[n.value.value.id] = max(seen.get(n.value.value.id, 1), len(n.targets[0].elts))
    out = {}
    for name, spec in params.items():
        out[name] = spec.ndim if spec.ndim_declared else seen.get(name, 1)
    return out


def build_function(fn: Callable, resolve: Callable[..., Function], max_iterations: int,
                   kernel_scope: _Scope, bound: tuple[str, ...], ir_name: str,
                   lines: Lines) -> Function:
    """A ``@vyre.func`` function as an IR `Function` (value parameters typed by annotation;
    buffer parameters — ``In[...]``/``Out[...]``/``InOut[...]`` — bound to the kernel's
    buffers or arrays named in ``bound``, one Function per binding)."""
    src = Source(fn)
    scope = _Scope()
    scope.functions = kernel_scope.functions   # the kernel's: calls between functions type-check
    params, alias = [], {}
    given = iter(bound)
    for a in src.node.args.args:
        t = src.annotations.get(a.arg)
        if isinstance(t, BufferSpec):
            real = next(given)
            decl = kernel_scope.buffers[real]
            if decl.dtype is not t.dtype:
                raise src.error(a, f"parameter {a.arg!r} is {t.dtype.value}; the kernel passes {real!r} "
                                f"({decl.dtype.value}).", f"annotate it with the buffer's type: {decl.dtype.value}.",
                                "K004")
            alias[a.arg] = real
            scope.buffers[real] = decl
            if real in kernel_scope.shapes:
                scope.shapes[real] = kernel_scope.shapes[real]
            continue
        if not isinstance(t, DataType) or t.storage_only:
            raise src.error(a, f"parameter {a.arg!r} of a vyre function needs a type annotation.",
                            f"annotate it: {a.arg}: u32 (or i32, f32, u64, ...), or {a.arg}: In[u32] for a "
                            "buffer or array.", "K006")
        params.append((a.arg, t))
        scope.types[a.arg] = t
    for real in kernel_scope.shapes:   # N-D extents are kernel locals; functions read their own
        if real in scope.shapes:
            raise src.error(src.node, f"{fn.__name__} takes the N-D buffer {real!r}.",
                            "pass N-D buffers to functions as the flat index you compute in the kernel, "
                            "or index them in the kernel.", "K014")
    _refuse_extra_args(src)
    tr = Translator(src, scope, True, max_iterations, resolve, set(src.names), lines, alias=alias)
    body = tr.body(src.node.body)
    ret = src.annotations.get("return")
    result = tr.result
    if ret is not None and ret is not type(None) and result is None:
        raise src.error(src.node, f"{fn.__name__} is annotated to return {ret} but returns nothing.",
                        "end it with `return value`.", "K011")
    if result is not None:
        where = tr.result_node or src.node
        want = ret if isinstance(ret, DataType) else None
        result, t = tr.typed(result, where, want)
        if want is not None and t is not want:
            raise src.error(where, f"{fn.__name__} returns a {t.value}; it is annotated {want.value}.",
                            f"cast the result: return {want.value}(...).", "K004")
    return Function.define(ir_name, params, tr.hoisted + body, result)


def build_program(fn: Callable, workgroup_size: int | tuple[int, ...], max_iterations: int) -> Built:
    """A ``@vyre.kernel`` function as a `Program` plus what calling it needs (`Built`)."""
    src = Source(fn)
    scope = _Scope()
    params: list[tuple[str, Any]] = []
    buffers: list[BufferDecl] = []
    prologue: list[Node] = []
    names = set(src.names)
    specs = {a.arg: src.annotations.get(a.arg) for a in src.node.args.args}
    ranks = _ranks(src, {k: v for k, v in specs.items() if isinstance(v, BufferSpec)})
    shaped: list[tuple[str, int]] = []
    for i, a in enumerate(src.node.args.args):
        spec = specs[a.arg]
        if isinstance(spec, BufferSpec):
            if not spec.ndim_declared and ranks[a.arg] > 1:
                spec = BufferSpec(spec.access, spec.dtype, (0,) * ranks[a.arg], True)
            maker = {"read": BufferDecl.read, "output": BufferDecl.output,
                     "read_write": BufferDecl.read_write}[spec.access]
            decl = maker(a.arg, i, spec.dtype, spec.count)
            scope.buffers[a.arg] = decl
            buffers.append(decl)
            if spec.ndim > 1:
                shaped.append((a.arg, spec.ndim))
        elif isinstance(spec, ScalarSpec):
            hidden = unique(f"{a.arg}_value", names)
            decl = BufferDecl.read(hidden, i, spec.dtype, 1)
            scope.buffers[hidden] = decl
            buffers.append(decl)
            scope.types[a.arg] = spec.dtype
            prologue.append(Node.let_bind(a.arg, Expr.load(hidden, 0)))
        else:
            raise src.error(a, f"kernel parameter {a.arg!r} has no In/Out/InOut/Scalar annotation.",
                            f"annotate it, e.g. {a.arg}: In[f32] or {a.arg}: Scalar[u32].", "K006")
        params.append((a.arg, spec))
    passed: list[str] = []
    for name, ndim in shaped:
        spec = dict(params)[name]
        extents: list[Expr] = []
        if spec.count:       # a fixed shape: constants
            extents = [Expr.u32(d) for d in spec.dims]
        else:
            hidden = unique(f"{name}_shape", names)
            decl = BufferDecl.read(hidden, len(params) + len(passed), DataType.U32, ndim)
            scope.buffers[hidden] = decl
            buffers.append(decl)
            passed.append(name)
            for k in range(ndim):
                local = unique(f"{name}_extent{k}", names)
                prologue.append(Node.let_bind(local, Expr.load(hidden, k)))
                scope.types[local] = DataType.U32
                extents.append(Expr.var(local))
        scope.shapes[name] = tuple(extents)
    _refuse_extra_args(src)
    functions: dict[tuple[int, tuple[str, ...]], Function] = {}
    order: list[Function] = []
    building: set[int] = set()
    lines: Lines = {}

    def resolve(py_fn: Any, bound: tuple[str, ...] = (), where: str = "") -> Function:
        """The IR function of ``py_fn`` (with buffer parameters ``bound``), built once;
        ``where``: the ``file:line`` of the call being translated (a recursive call is refused
        there)."""
        key = (id(py_fn), bound)
        if id(py_fn) in building:
            raise KernelError(f"{py_fn.__name__} calls itself (directly or through other functions).",
                              "write the recursion as a loop.", "K013", where or capture(py_fn).where())
        if key not in functions:
            building.add(id(py_fn))
            ir_name = unique(py_fn.__name__ if not bound else f"{py_fn.__name__}_{'_'.join(bound)}", names)
            try:
                f = build_function(py_fn, resolve, max_iterations, scope, bound, ir_name, lines)
            finally:
                building.discard(id(py_fn))
            functions[key] = f
            order.append(f)
            scope.functions[f.name] = f
        return functions[key]

    tr = Translator(src, scope, False, max_iterations, resolve, names, lines, prologue)
    body = tr.top(src.node.body)
    all_buffers = buffers + [b for b in scope.buffers.values() if not b.is_bound]
    program = Program.wrapped(all_buffers, workgroup_size, body, order)
    _validate(program, lines, src)
    return Built(program, params, passed, src.where(src.node), _sites(lines), max_iterations)


def _sites(lines: Lines) -> dict[str, tuple[str, ...]]:
    """The ``file:line`` of the statements that can fail a dispatch, per dispatch-error reason
    (`vyre.ir.errors.DISPATCH_ERRORS`), in source order: while loops (``loop_limit``) and
    signed ``//`` and ``%`` (``division``)."""
    def order(where: str) -> tuple[str, int]:
        file, _, line = where.rpartition(":")
        return file, int(line)

    def found(kind: type) -> tuple[str, ...]:
        return tuple(sorted({w for obj, w in lines.values() if isinstance(obj, kind)}, key=order))

    return {"loop_limit": found(N.While), "division": found(E.Bin)}


def _validate(program: Program, lines: Lines, src: Source) -> None:
    """`vyre.validate` the program now; a diagnostic names the Python line its IR path came from."""
    from vyre.ir import validate

    diags = validate(program)
    if not diags:
        return
    found = []
    for d in diags:
        where = _line_of(program, d.location, lines) or src.where(src.node)
        message, _, fix = str(d.message).partition(" Fix: ")
        found.append((where, d.code, message, fix))
    where, code, message, fix = found[0]
    more = "".join(f"; {w}: {c} {m}" for w, c, m, _ in found[1:4])
    raise KernelError(f"{message} ({code}){more}", kernel_words(fix or "correct the kernel."), "K015", where)


def _line_of(program: Program, location: str, lines: Lines) -> str | None:
    """The ``file:line`` of the statement at an IR path like ``body[3].then[0]``."""
    import re

    steps = re.findall(r"(\w+)\[(\d+)\]", location)
    found = None
    current: Any = program
    for label, idx in steps:
        try:
            if label == "functions":
                current = program.functions[int(idx)]
                continue
            seq = getattr(current, "otherwise" if label == "otherwise" else label)
            current = seq[int(idx)]
        except (AttributeError, IndexError, TypeError):
            break
        if id(current) in lines and lines[id(current)][0] is current:
            found = lines[id(current)][1]
    return found


def _refuse_extra_args(src: Source) -> None:
    a = src.node.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        raise src.error(src.node, "kernels and vyre functions take plain positional parameters only.",
                        "remove *args, **kwargs, keyword-only parameters and defaults.", "K006")
