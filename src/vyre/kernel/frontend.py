"""Python source to IR: the AST of a ``@vyre.kernel`` or ``@vyre.func`` function becomes a
`Program` (or a `Function`). Nothing is traced: control flow on device values becomes IR
control flow.

Supported: arithmetic, comparisons (chained too), bit operations, ``and``/``or``/``not``
(both sides evaluated), conditional expressions (`select`), locals (declared where first
assigned; one type each), ``x[i]`` loads and ``x[i] = v`` stores, augmented assignment,
``if``/``elif``/``else``, ``for i in range(...)`` (a literal positive step), ``while`` (capped
at the kernel's ``max_iterations``), ``break``/``continue``, a bare ``return`` in a kernel and
one final ``return value`` in a function, calls of `vyre.kernel.intrinsics` and of other
``@vyre.func`` functions, casts written as ``u32(x)``, ``abs``/``min``/``max``/``len``, and
module-level numbers as constants. ``/`` divides floats and ``//`` integers; ``%`` is C's
remainder (the sign of the dividend).

Anything else raises `KernelError`, which names the file and line of the user's source and
ends in a Fix.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

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
from vyre.ir.limits import MAX_DEPTH
from vyre.ir.typecheck import TypeFault, infer

from . import intrinsics as K
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
_BINARY_INTRINSICS = {"hypot": BinOp.HYPOT, "mul_high": BinOp.MUL_HIGH, "rotl": BinOp.ROTATE_LEFT, "rotr": BinOp.ROTATE_RIGHT,
                      "sat_add": BinOp.SATURATING_ADD, "sat_sub": BinOp.SATURATING_SUB}
_ATOMICS = {"atomic_add": AtomicOp.ADD, "atomic_or": AtomicOp.OR, "atomic_and": AtomicOp.AND,
            "atomic_xor": AtomicOp.XOR, "atomic_min": AtomicOp.MIN, "atomic_max": AtomicOp.MAX,
            "atomic_exchange": AtomicOp.EXCHANGE}


# integer operators `constant` folds (shared()/local() counts written as expressions)
_CONST_FOLD = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
               ast.FloorDiv: lambda a, b: a // b, ast.Pow: lambda a, b: a ** b}


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


class KernelError(VyreError):
    """A kernel's Python source uses something the frontend does not compile; the message
    starts with ``file:line``."""


class Source:
    """A Python function's source, parsed once, with its globals for name lookups."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        try:
            lines, self.first = inspect.getsourcelines(fn)
            self.file = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError):
            raise KernelError(f"the source of {getattr(fn, '__name__', fn)!r} is not available.",
                              "define kernels in a .py file (or a notebook cell), not with exec/lambda.") from None
        self.text = textwrap.dedent("".join(lines))
        tree = ast.parse(self.text)
        self.node = next(n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        self.globals = dict(fn.__globals__)
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.globals[name] = cell.cell_contents
                except ValueError:
                    pass
        try:
            self.annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:
            raise self.error(self.node, f"the annotations of {fn.__name__!r} do not evaluate ({exc}).",
                             "annotate with names vyre.kernel exports (In, Out, Scalar, u32, f32, ...).") from None

    def error(self, node: ast.AST, message: str, fix: str) -> KernelError:
        line = self.first + getattr(node, "lineno", 1) - 1
        return KernelError(f"{self.file}:{line}: {message}", fix)


class _Scope:
    """What the translator knows about names and buffers while it walks a body."""

    def __init__(self) -> None:
        self.types: dict[str, DataType] = {}
        self.buffers: dict[str, BufferDecl] = {}
        self.functions: dict[str, Function] = {}

    def buffer(self, name: str) -> BufferDecl | None:
        return self.buffers.get(name)

    def function(self, name: str) -> Function | None:
        return self.functions.get(name)


class Translator:
    """One function body to IR statements."""

    def __init__(self, src: Source, scope: _Scope, in_function: bool, max_iterations: int,
                 func_resolver: Callable[[Any], Function]) -> None:
        self.src, self.scope, self.in_function = src, scope, in_function
        self.max_iterations = max_iterations
        self.resolve_func = func_resolver
        self.hoisted: list[Node] = []      # lets of locals first assigned in a nested block
        self.declared: set[str] = set(scope.types)
        self.depth = 0
        self.counter = 0
        self.result: Expr | None = None

    def err(self, node: ast.AST, message: str, fix: str) -> KernelError:
        # IR-level fixes, in the kernel's own spelling
        fix = fix.replace("cast one operand with Expr.cast", "cast one operand (e.g. i32(x), f32(x))")
        fix = fix.replace("Expr.cast(DataType.", "(").replace("cast it with Expr.cast", "cast it")
        return self.src.error(node, message, fix)

    # ---- types -------------------------------------------------------------------------
    def type_of(self, e: Expr, node: ast.AST) -> DataType:
        try:
            return infer(e, self.scope.types, self.scope)
        except TypeFault as f:
            raise self.err(node, f.message, f.fix) from None

    # ---- statements ----------------------------------------------------------------------
    def body(self, stmts: list[ast.stmt]) -> list[Node]:
        out: list[Node] = []
        for i, s in enumerate(stmts):
            if self.in_function and isinstance(s, ast.Return):
                if self.depth or i != len(stmts) - 1:
                    raise self.err(s, "a return before the end of a function.",
                                   "compute the result in a local and return it once, at the end.")
                if s.value is not None:
                    self.result = self.expr(s.value)
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
        from vyre.ir.weak import Resolver

        height = _height(s)
        if height > MAX_DEPTH:   # refused before the recursive walk could overflow Python's stack
            raise self.err(s, f"this statement's expression nests {height} levels deep (the limit is "
                           f"{MAX_DEPTH}).", "split it: bind parts to locals (t = a + b) and combine those.")
        try:   # weak literals take their types now, so checks see the final types
            nodes = [Resolver(self.scope).stmt(n, dict(self.scope.types)) for n in self._stmt(s)]
        except KernelError:
            raise
        except VyreError as err:
            raise self.err(s, err.message, err.fix) from None
        self.check(nodes, s)
        return nodes

    def check(self, nodes: list[Node], s: ast.stmt) -> None:
        """Type-check what one Python statement became, so a type error names its line."""
        from vyre.ir import node as N

        for n in nodes:
            try:
                for e in N.node_exprs(n):
                    infer(e, self.scope.types, self.scope)
                if isinstance(n, N.Assign):
                    t, want = infer(n.value, self.scope.types, self.scope), self.scope.types.get(n.name)
                    if want is not None and t is not want and not getattr(n.value, "_w", False):
                        raise TypeFault("V003", f"{n.name!r} is {want.value} but is assigned a {t.value}.",
                                        f"give {n.name!r} one type: initialise it with that type's value "
                                        f"(e.g. 0.0 for f32) or cast with {want.value}(...).")
                if isinstance(n, N.Store):
                    decl = self.scope.buffer(n.buffer)
                    t = infer(n.value, self.scope.types, self.scope)
                    if decl is not None and t is not decl.dtype.value_type and not getattr(n.value, "_w", False):
                        raise TypeFault("V003", f"storing a {t.value} into {n.buffer!r} "
                                        f"({decl.dtype.value}).", f"cast it: {decl.dtype.value_type.value}(...).")
            except TypeFault as f:
                raise self.err(s, f.message, f.fix) from None

    def _stmt(self, s: ast.stmt) -> list[Node]:
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
            cond = self.expr(s.test)
            return [Node.if_(cond, self.nested(s.body), self.nested(s.orelse))]
        if isinstance(s, ast.For):
            return self.for_range(s)
        if isinstance(s, ast.While):
            if s.orelse:
                raise self.err(s, "while ... else.", "set a flag before break and test it after the loop.")
            cond = self.expr(s.test)
            return [Node.while_(cond, self.nested(s.body), self.max_iterations)]
        if isinstance(s, ast.Break):
            return [Node.break_()]
        if isinstance(s, ast.Continue):
            return [Node.continue_()]
        if isinstance(s, ast.Return):
            if s.value is not None:
                raise self.err(s, "a kernel returns no value.", "store results into an Out[...] buffer.")
            return [Node.return_()]
        raise self.err(s, f"{type(s).__name__} statements are not supported in kernels.",
                       "use assignments, if/for/while, stores and calls (see vyre.kernel.frontend).")

    def annotation(self, node: ast.expr, where: ast.AST) -> DataType:
        obj = self.lookup(node)
        if not isinstance(obj, DataType):
            raise self.err(where, f"annotation {ast.unparse(node)!r} is not a vyre type.",
                           "annotate locals with u32, i32, f32, ... from vyre.kernel.")
        return obj

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"k{self.counter}_{hint}"

    def assign(self, target: ast.expr, value: ast.expr, node: ast.AST, cast: DataType | None = None) -> list[Node]:
        if isinstance(target, ast.Tuple):
            if not isinstance(value, ast.Tuple) or len(value.elts) != len(target.elts):
                raise self.err(node, "tuple assignment needs a tuple of the same length.",
                               "assign a, b = x, y with as many values as names.")
            temps, out = [], []
            for v in value.elts:   # evaluate every value first (a, b = b, a swaps)
                e = self.expr(v)
                tmp = self.fresh("t")
                self.scope.types[tmp] = self.type_of(e, v)
                self.declared.add(tmp)
                out.append(Node.let_bind(tmp, e))
                temps.append(tmp)
            for t, tmp in zip(target.elts, temps):
                out += self.assign_expr(t, Expr.var(tmp), node)
            return out
        call = value.func if isinstance(value, ast.Call) else None
        if call is not None and self.lookup_quiet(call) in (K.shared, K.local):
            return self.allocate(target, value, node)
        e = self.expr(value)
        if cast is not None:
            e = _typed_literal(value, cast) or Expr.cast(cast, e)
        return self.assign_expr(target, e, node)

    def assign_expr(self, target: ast.expr, e: Expr, node: ast.AST) -> list[Node]:
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.scope.buffers:
                raise self.err(node, f"{name!r} is a buffer; it cannot be rebound.", f"store into it: {name}[i] = ...")
            if name in self.declared:
                return [Node.assign(name, e)]
            t = self.type_of(e, node)
            self.scope.types[name] = t
            self.declared.add(name)
            if self.depth == 0:
                return [Node.let_bind(name, e)]
            # first assigned in a nested block: declared at the top (Python's function scope)
            self.hoisted.append(Node.let_bind(name, _zero(t)))
            return [Node.assign(name, e)]
        if isinstance(target, ast.Subscript):
            buf = self.buffer_name(target.value)
            return [Node.store(buf, self.expr(target.slice), e)]
        raise self.err(node, f"cannot assign to {ast.unparse(target)!r}.", "assign to a name or to buf[i].")

    def aug_assign(self, s: ast.AugAssign) -> list[Node]:
        op = self.binop(s.op, s)
        if isinstance(s.target, ast.Name):
            if s.target.id not in self.declared:
                raise self.err(s, f"{s.target.id!r} is updated before it is assigned.", f"assign {s.target.id} first.")
            value = self.arith(op, Expr.var(s.target.id), self.expr(s.value), s)
            return [Node.assign(s.target.id, value)]
        if isinstance(s.target, ast.Subscript):
            buf = self.buffer_name(s.target.value)
            out: list[Node] = []
            index = self.expr(s.target.slice)
            if not isinstance(index, E.Var | E.Lit | E.WeakLit | E.Id):
                tmp = self.fresh("i")
                self.scope.types[tmp] = self.type_of(index, s)
                self.declared.add(tmp)
                out.append(Node.let_bind(tmp, index))
                index = Expr.var(tmp)
            value = self.arith(op, Expr.load(buf, index), self.expr(s.value), s)
            return out + [Node.store(buf, index, value)]
        raise self.err(s, f"cannot update {ast.unparse(s.target)!r}.", "update a name or buf[i].")

    def allocate(self, target: ast.expr, value: ast.Call, node: ast.AST) -> list[Node]:
        kind = self.lookup(value.func)
        if self.depth or self.in_function or not isinstance(target, ast.Name):
            raise self.err(node, f"{kind.name}() outside the top level of a kernel.",
                           f"write `name = {kind.name}(dtype, count)` at the top of the kernel body.")
        if len(value.args) != 2:
            raise self.err(node, f"{kind.name}() takes (dtype, count).", f"write {kind.name}(f32, 256).")
        dtype = self.lookup(value.args[0])
        count = self.constant(value.args[1])
        if not isinstance(dtype, DataType) or not isinstance(count, int) or count <= 0:
            raise self.err(node, f"{kind.name}({ast.unparse(value.args[0])}, {ast.unparse(value.args[1])}) "
                           "needs a vyre type and a positive constant count.", f"write {kind.name}(f32, 256).")
        name = target.id
        maker = BufferDecl.workgroup if kind is K.shared else BufferDecl.local
        self.scope.buffers[name] = maker(name, count, dtype)
        return []

    def for_range(self, s: ast.For) -> list[Node]:
        it = s.iter
        if s.orelse or not isinstance(s.target, ast.Name) or not (
                isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
            raise self.err(s, "only `for name in range(...)` loops are compiled.",
                           "write for i in range(n) / range(a, b) / range(a, b, step); use while otherwise.")
        args = [self.expr(a) for a in it.args]
        if not 1 <= len(args) <= 3:
            raise self.err(s, "range() takes 1 to 3 arguments.", "write range(n) or range(a, b[, step]).")
        lo, hi = (args[0], args[1]) if len(args) > 1 else (E.WeakLit(0), args[0])
        step = 1
        if len(args) == 3:
            step = self.constant(it.args[2])
            if not isinstance(step, int) or step <= 0:
                raise self.err(s, "range() with a step that is not a positive constant.",
                               "use a literal positive step, or a while loop.")
        var = s.target.id
        if var in self.declared:
            raise self.err(s, f"the loop variable {var!r} is already a local.", "use a fresh name for the loop variable.")
        t = self.type_of(lo, s) if not isinstance(lo, E.WeakLit) else (
            self.type_of(hi, s) if not isinstance(hi, E.WeakLit) else DataType.U32)
        if step == 1:
            self.scope.types[var] = t
            self.declared.add(var)
            body = self.nested(s.body)
            self.declared.discard(var)
            return [Node.loop(var, lo, hi, body)]
        # range(a, b, s): k over [0, ceil((b - a) / s)), var = a + k * s
        k = self.fresh("k")
        trips = Expr.select(Expr.bin(BinOp.GT, hi, lo), (hi - lo + (step - 1)) // step, 0)
        self.scope.types[var] = t
        self.scope.types[k] = t
        self.declared |= {var, k}
        body = [Node.let_bind(var, lo + Expr.var(k) * step)] + self.nested(s.body)
        self.declared -= {var, k}
        return [Node.loop(k, E.WeakLit(0), trips, body)]

    def call_stmt(self, node: ast.expr) -> list[Node]:
        if not isinstance(node, ast.Call):
            raise self.err(node, "an expression whose value is unused.", "assign it, store it, or remove it.")
        fn = self.lookup(node.func)
        if fn is K.barrier:
            return [Node.barrier()]
        if fn is K.grid_sync:
            if self.depth or self.in_function:
                raise self.err(node, "grid_sync() inside control flow or a function.",
                               "call grid_sync() at the top level of the kernel body.")
            return [Node.barrier(MemoryOrdering.GRID_SYNC)]
        e = self.expr(node, discard=True)
        return [Node.expr(e)]

    # ---- expressions ----------------------------------------------------------------------
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
            raise self.err(node, f"name {node.id!r} is not defined.", "define it, or import it from vyre.kernel.")
        if isinstance(node, ast.Attribute):
            base = self.lookup(node.value)
            if not hasattr(base, node.attr):
                raise self.err(node, f"{ast.unparse(node)!r} does not exist.", "check the name.")
            return getattr(base, node.attr)
        raise self.err(node, f"{ast.unparse(node)!r} is not a name.", "call functions by name.")

    def constant(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.constant(node.operand)
            return -v if isinstance(v, int | float) else None
        if isinstance(node, ast.Name | ast.Attribute) and not (isinstance(node, ast.Name) and node.id in self.declared):
            v = self.lookup_quiet(node)
            return v if isinstance(v, int | float) and not isinstance(v, bool) else None
        if isinstance(node, ast.BinOp) and type(node.op) in _CONST_FOLD:   # local(u32, 1 << 10)
            a, b = self.constant(node.left), self.constant(node.right)
            if type(a) is int and type(b) is int and (0 <= b < 64 or type(node.op) not in (ast.LShift, ast.Pow)):
                try:
                    return _CONST_FOLD[type(node.op)](a, b)
                except ZeroDivisionError:
                    return None
        return None

    def buffer_name(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name) and node.id in self.scope.buffers:
            return node.id
        raise self.err(node, f"{ast.unparse(node)!r} is not a buffer.", "index a buffer parameter or an array "
                       "from shared()/local().")

    def binop(self, op: ast.operator, node: ast.AST) -> Any:
        if isinstance(op, ast.Div | ast.FloorDiv):
            return op
        if type(op) not in _BINOPS:
            raise self.err(node, f"the operator {type(op).__name__} is not supported.",
                           "use + - * / // % & | ^ << >> (there is no ** or @).")
        return _BINOPS[type(op)]

    def arith(self, op: Any, left: Expr, right: Expr, node: ast.AST) -> Expr:
        if isinstance(op, ast.Div | ast.FloorDiv):
            t = _peek(self, left, node) or _peek(self, right, node)
            if t is not None and isinstance(op, ast.Div) and not t.is_float:
                raise self.err(node, f"`/` on {t.value} values.", "use // for integer division, or cast to f32.")
            if t is not None and isinstance(op, ast.FloorDiv) and t.is_float:
                raise self.err(node, f"`//` on {t.value} values.", "use floor(a / b) for floats.")
            return Expr.bin(BinOp.DIV, left, right)
        return Expr.bin(op, left, right)

    def expr(self, node: ast.expr, discard: bool = False) -> Expr:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return Expr.bool_(node.value)
            if isinstance(node.value, int | float):
                return E.coerce(node.value)
            raise self.err(node, f"the constant {node.value!r} is not a number.", "use numbers and bools.")
        if isinstance(node, ast.Name):
            if node.id in self.declared:
                return Expr.var(node.id)
            if node.id in self.scope.buffers:
                raise self.err(node, f"the buffer {node.id!r} is used as a value.", f"index it: {node.id}[i].")
            v = self.constant(node)
            if v is not None:
                return E.coerce(v)
            raise self.err(node, f"{node.id!r} is not a local, a parameter or a numeric constant.",
                           "assign it first, or make it a module-level number.")
        if isinstance(node, ast.Attribute):
            v = self.constant(node)
            if v is not None:
                return E.coerce(v)
            raise self.err(node, f"{ast.unparse(node)!r} is not a numeric constant.", "use numbers.")
        if isinstance(node, ast.BinOp):
            return self.arith(self.binop(node.op, node), self.expr(node.left), self.expr(node.right), node)
        if isinstance(node, ast.UnaryOp):
            v = self.expr(node.operand)
            if isinstance(node.op, ast.USub):
                if isinstance(v, E.WeakLit):
                    return E.WeakLit(-v.value)
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
            out = None
            for op, a, b in zip(node.ops, parts, parts[1:]):
                if type(op) not in _CMPS:
                    raise self.err(node, f"the comparison {type(op).__name__} is not supported.",
                                   "compare with == != < <= > >=.")
                c = Expr.bin(_CMPS[type(op)], a, b)
                out = c if out is None else Expr.bin(BinOp.AND, out, c)
            return out  # type: ignore[return-value]
        if isinstance(node, ast.IfExp):
            return Expr.select(self.expr(node.test), self.expr(node.body), self.expr(node.orelse))
        if isinstance(node, ast.Subscript):
            return Expr.load(self.buffer_name(node.value), self.expr(node.slice))
        if isinstance(node, ast.Call):
            return self.call(node, discard)
        raise self.err(node, f"{type(node).__name__} expressions are not supported in kernels.",
                       "use arithmetic, comparisons, indexing and calls.")

    def call(self, node: ast.Call, discard: bool) -> Expr:
        if node.keywords:
            raise self.err(node, "keyword arguments in a kernel call.", "pass arguments by position.")
        fn = self.lookup(node.func)
        args = node.args
        x = self.expr
        if isinstance(fn, DataType):
            if len(args) != 1:
                raise self.err(node, f"{fn.value}(x) takes one value.", f"write {fn.value}(x).")
            lit = _typed_literal(args[0], fn)
            return lit if lit is not None else Expr.cast(fn, x(args[0]))
        if isinstance(fn, K.Intrinsic):
            name = fn.name
            if name in ("gid", "lid", "wgid"):
                axis = self.constant(args[0]) if args else 0
                if axis not in (0, 1, 2):
                    raise self.err(node, f"{name}() axis must be the constant 0, 1 or 2.", f"write {name}(0).")
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
                    raise self.err(node, "bitcast(dtype, x) needs a vyre type first.", "write bitcast(u32, x).")
                return Expr.bitcast(t, x(args[1]))
            if name in _ATOMICS or name == "atomic_cas":
                self.arity(node, 4 if name == "atomic_cas" else 3)
                buf = self.buffer_name(args[0])
                if name == "atomic_cas":
                    return Expr.atomic(AtomicOp.COMPARE_EXCHANGE, buf, x(args[1]), x(args[3]), x(args[2]))
                return Expr.atomic(_ATOMICS[name], buf, x(args[1]), x(args[2]))
            raise self.err(node, f"{name}() is not an expression here.",
                           f"call {name}() as a statement, or at the top of the kernel.")
        if fn is abs:
            self.arity(node, 1)
            return Expr.un(UnOp.ABS, x(args[0]))
        if fn is min or fn is max:
            if len(args) < 2:
                raise self.err(node, f"{fn.__name__}() of fewer than two values.", "pass two or more values.")
            out = x(args[0])
            for a in args[1:]:
                out = Expr.bin(BinOp.MIN if fn is min else BinOp.MAX, out, x(a))
            return out
        if fn is len:
            self.arity(node, 1)
            return Expr.buf_len(self.buffer_name(args[0]))
        func = getattr(fn, "__vyre_func__", None)
        if func is not None:
            f = self.resolve_func(func)
            if len(args) != len(f.params):
                raise self.err(node, f"{f.name}() takes {len(f.params)} argument(s), got {len(args)}.",
                               "pass one value per parameter.")
            if f.result is None and not discard:
                raise self.err(node, f"{f.name}() returns no value.", "call it as a statement.")
            return Expr.call(f.name, *(x(a) for a in args))
        raise self.err(node, f"{ast.unparse(node.func)!r} cannot be called in a kernel.",
                       "call vyre.kernel device functions, @vyre.func functions, casts like u32(x), "
                       "abs, min, max or len.")

    def arity(self, node: ast.Call, n: int) -> None:
        if len(node.args) != n:
            name = ast.unparse(node.func)
            raise self.err(node, f"{name}() takes {n} argument(s), got {len(node.args)}.",
                           f"see help(vyre.kernel.{name.split('.')[-1]}).")


def _peek(tr: Translator, e: Expr, node: ast.AST) -> DataType | None:
    if getattr(e, "_w", False):
        return None
    try:
        return infer(e, tr.scope.types, tr.scope)
    except TypeFault:
        return None


def _typed_literal(node: ast.expr, t: DataType) -> Expr | None:
    """``u64(5)`` / ``f16(0.5)``: a literal of that type (not a cast of a weak literal)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        value = -v if isinstance(v, int | float) and not isinstance(v, bool) else None
    elif isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        value = node.value
    else:
        return None
    if value is None or t.storage_only or t is DataType.BOOL:
        return None
    if isinstance(value, float) and not t.is_float:
        return None
    return Expr.lit(t, value)


def _zero(t: DataType) -> Expr:
    return Expr.bool_(False) if t is DataType.BOOL else Expr.lit(t, 0)


# ---- kernels and functions ---------------------------------------------------------------
def build_function(fn: Callable, resolve: Callable[[Any], Function], max_iterations: int,
                   functions: dict[str, Function] | None = None) -> Function:
    """A ``@vyre.func`` function as an IR `Function` (parameters typed by annotation)."""
    src = Source(fn)
    scope = _Scope()
    if functions is not None:
        scope.functions = functions   # the kernel's: calls between functions type-check
    params = []
    for a in src.node.args.args:
        t = src.annotations.get(a.arg)
        if not isinstance(t, DataType) or t.storage_only:
            raise src.error(a, f"parameter {a.arg!r} of a vyre function needs a value type annotation.",
                            f"annotate it: {a.arg}: u32 (or i32, f32, u64, ...).")
        params.append((a.arg, t))
        scope.types[a.arg] = t
    _refuse_extra_args(src)
    tr = Translator(src, scope, True, max_iterations, resolve)
    body = tr.body(src.node.body)
    ret = src.annotations.get("return")
    result = tr.result
    if ret is not None and ret is not type(None) and result is None:
        raise src.error(src.node, f"{fn.__name__} is annotated to return {ret} but returns nothing.",
                        "end it with `return value`.")
    if isinstance(ret, DataType) and result is not None:
        lit = None
        if isinstance(result, E.WeakLit):
            lit = Expr.lit(ret, result.value)
        result = lit or result
    return Function.define(fn.__name__, params, tr.hoisted + body, result)


def build_program(fn: Callable, workgroup_size: int | tuple[int, ...], max_iterations: int) -> tuple[Program, list]:
    """A ``@vyre.kernel`` function as a `Program`, and its parameters in call order as
    ``(name, BufferSpec | ScalarSpec)``."""
    src = Source(fn)
    scope = _Scope()
    params: list[tuple[str, Any]] = []
    buffers: list[BufferDecl] = []
    prologue: list[Node] = []
    for i, a in enumerate(src.node.args.args):
        spec = src.annotations.get(a.arg)
        if isinstance(spec, BufferSpec):
            decl = {"read": BufferDecl.read, "output": BufferDecl.output,
                    "read_write": BufferDecl.read_write}[spec.access](a.arg, i, spec.dtype, spec.count)
            scope.buffers[a.arg] = decl
            buffers.append(decl)
        elif isinstance(spec, ScalarSpec):
            hidden = f"scalar_{a.arg}"
            decl = BufferDecl.read(hidden, i, spec.dtype, 1)
            scope.buffers[hidden] = decl
            buffers.append(decl)
            scope.types[a.arg] = spec.dtype
            prologue.append(Node.let_bind(a.arg, Expr.load(hidden, 0)))
        else:
            raise src.error(a, f"kernel parameter {a.arg!r} has no In/Out/InOut/Scalar annotation.",
                            f"annotate it, e.g. {a.arg}: In[f32] or {a.arg}: Scalar[u32].")
        params.append((a.arg, spec))
    _refuse_extra_args(src)
    functions: dict[int, Function] = {}
    order: list[Function] = []

    building: set[int] = set()

    def resolve(py_fn: Any) -> Function:
        key = id(py_fn)
        if key in building:
            raise KernelError(f"{py_fn.__name__} calls itself (directly or through other functions).",
                              "write the recursion as a loop.")
        if key not in functions:
            building.add(key)
            f = build_function(py_fn, resolve, max_iterations, scope.functions)
            building.discard(key)
            functions[key] = f
            order.append(f)
            scope.functions[f.name] = f
        return functions[key]

    tr = Translator(src, scope, False, max_iterations, resolve)
    body = tr.body(src.node.body)
    all_buffers = buffers + [b for b in scope.buffers.values() if not b.is_bound]
    program = Program.wrapped(all_buffers, workgroup_size, prologue + tr.hoisted + body, order)
    names = [f.name for f in order]
    if len(set(names)) != len(names):
        raise src.error(src.node, "two different @vyre.func functions share a name.", "rename one of them.")
    return program, params


def _refuse_extra_args(src: Source) -> None:
    a = src.node.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        raise src.error(src.node, "kernels and vyre functions take plain positional parameters only.",
                        "remove *args, **kwargs, keyword-only parameters and defaults.")
