"""Static types of expressions: the one typing rule set shared by the validator, the
reference interpreter and the lowering.

`infer(expr, scope, program)` returns the DataType or raises `TypeFault` with a message
and a fix; the validator turns faults into diagnostics. Each expression kind's typing is in
three tables here, keyed by kind (tests/ir/test_kind_tables.py checks they are complete):
`_INFER` (its type), `PEEK` and `CONTEXT` (what it tells weak literals, `vyre.ir.weak`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import expr as E
from .types import (
    COMPARISONS,
    FLOAT_ONLY_BIN,
    FLOAT_ONLY_UN,
    FLOAT_PREDICATES,
    INT_ONLY_BIN,
    INT_ONLY_UN,
    LOGICAL,
    SHIFTS,
    SUBGROUP_REDUCTIONS,
    TRANSCENDENTAL,
    AtomicOp,
    BinOp,
    DataType,
    SubgroupOp,
    UnOp,
)

B, U, I, F = DataType.BOOL, DataType.U32, DataType.I32, DataType.F32
#: the atomics a float buffer takes (S36: exact, order-independent, value unused)
FLOAT_ATOMICS = frozenset({AtomicOp.ADD, AtomicOp.MIN, AtomicOp.MAX})


class TypeFault(Exception):
    def __init__(self, code: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.code, self.message, self.fix = code, message, fix


def bin_result(op: BinOp, lt: DataType, rt: DataType) -> DataType:
    if op in SHIFTS:
        if not (lt.is_integer and rt.is_integer):
            raise TypeFault("V003", f"{op.name} needs integer operands, got {lt.value} and {rt.value}.",
                            "cast the operands to an integer type (u32, i32, u64 or i64).")
        return lt
    if lt is not rt:
        raise TypeFault("V003", f"{op.name} operands differ in type: {lt.value} vs {rt.value}.",
                        "cast one operand with Expr.cast so both have the same type.")
    if op in LOGICAL:
        if lt is not B:
            raise TypeFault("V003", f"{op.name} needs bool operands, got {lt.value}.",
                            "compare the values first (e.g. x.ne(0)) or use BITAND/BITOR for bits.")
        return B
    if op in COMPARISONS:
        if lt is B and op not in (BinOp.EQ, BinOp.NE):
            raise TypeFault("V003", f"{op.name} is not defined on bool.",
                            "cast the bools to u32 to order them.")
        return B
    if lt is B:
        raise TypeFault("V003", f"{op.name} is not defined on bool.",
                        "use AND/OR for bools, or cast to u32.")
    if op in FLOAT_ONLY_BIN and not lt.is_float:
        raise TypeFault("V003", f"{op.name} needs float operands, got {lt.value}.",
                        "cast the operands to f32 (Expr.cast).")
    if op in INT_ONLY_BIN and not lt.is_integer:
        raise TypeFault("V003", f"{op.name} needs integer operands, got {lt.value}.",
                        "cast the operands to an integer type (or Expr.bitcast for the bits).")
    return lt


def un_result(op: UnOp, t: DataType) -> DataType:
    if op is UnOp.LOGICAL_NOT:
        if t is not B:
            raise TypeFault("V003", f"LOGICAL_NOT needs bool, got {t.value}.",
                            "compare first (x.eq(0)) or use BITNOT for integers.")
        return B
    if t is B:
        raise TypeFault("V003", f"{op.name} is not defined on bool.", "cast the bool to u32 first.")
    if op in INT_ONLY_UN and not t.is_integer:
        raise TypeFault("V003", f"{op.name} needs an integer operand, got {t.value}.",
                        "bitcast the float to an integer type to work on its bits.")
    if (op in FLOAT_ONLY_UN or op in TRANSCENDENTAL) and not t.is_float:
        raise TypeFault("V003", f"{op.name} needs a float operand, got {t.value}.",
                        "cast the operand to f32 first.")
    if op in FLOAT_PREDICATES:
        return B
    return t


_BITCAST_SIZE = {U: 4, I: 4, F: 4, DataType.U64: 8, DataType.I64: 8, DataType.F16: 2,
                 DataType.BF16: 2}


def bitcast_ok(src: DataType, dst: DataType) -> bool:
    """Same-size value types, or a 16-bit float to/from u32 (zero-extended / low bits)."""
    a, b = _BITCAST_SIZE.get(src), _BITCAST_SIZE.get(dst)
    if a is None or b is None:
        return False
    return a == b or {src, dst} in ({DataType.F16, U}, {DataType.BF16, U})


def infer(expr: E.Expr, scope: Mapping[str, DataType], program) -> DataType:
    """Type of ``expr`` given visible locals ``scope``; raises TypeFault."""
    rule = _INFER.get(type(expr))
    if rule is None:
        raise TypeFault("V003", f"unknown expression kind {type(expr).__name__}.",
                        "build expressions with the vyre.ir.Expr constructors.")
    return rule(expr, scope, program)


Scope = Mapping[str, DataType]


def _t_literal(expr: E.Lit | E.Spec, scope: Scope, program) -> DataType:
    return expr.dtype


def _t_weak(expr: E.WeakLit, scope: Scope, program) -> DataType:  # only before a Program resolves it
    return E.default_literal(expr.value).dtype


def _t_var(expr: E.Var, scope: Scope, program) -> DataType:
    t = scope.get(expr.name)
    if t is None:
        raise TypeFault("V002", f"variable {expr.name!r} is not declared here.",
                        f"declare it first with Node.let_bind({expr.name!r}, ...) in an enclosing scope.")
    return t


def _decl(expr: E.Load | E.BufLen | E.Atomic, program):
    decl = program.buffer(expr.buffer)
    if decl is None:
        raise TypeFault("V001", f"buffer {expr.buffer!r} is not declared.",
                        "add a BufferDecl for it to Program.wrapped(buffers=...).")
    return decl


def _t_buf_len(expr: E.BufLen, scope: Scope, program) -> DataType:
    _decl(expr, program)
    return U


def _t_load(expr: E.Load, scope: Scope, program) -> DataType:
    decl = _decl(expr, program)
    _index(infer(expr.index, scope, program))
    return decl.dtype.value_type


def _t_atomic(expr: E.Atomic, scope: Scope, program) -> DataType:
    decl = _decl(expr, program)
    _index(infer(expr.index, scope, program))
    if decl.dtype.is_float:
        if expr.op not in FLOAT_ATOMICS:
            raise TypeFault("V007", f"atomic {expr.op.name} on float buffer {expr.buffer!r} "
                            f"({decl.dtype.value}).", "float buffers take atomic ADD, MIN and MAX only "
                            "(exact, S36); for bit operations use a u32 buffer and bitcast the values.")
        if decl.is_workgroup:
            raise TypeFault("V007", f"float atomic on workgroup buffer {expr.buffer!r}.",
                            "accumulate floats into an output or read_write buffer (S36: the exact "
                            "total is rounded once when the dispatch ends), or use an integer "
                            "workgroup buffer.")
    elif decl.dtype not in (U, I, DataType.U64, DataType.I64):
        raise TypeFault("V007", f"atomic on buffer {expr.buffer!r} of type {decl.dtype.value}.",
                        "atomics need a u32, i32, u64 or i64 buffer (or ADD, MIN or MAX on an f32, f16 "
                        "or bf16 buffer).")
    if decl.is_local:
        raise TypeFault("V007", f"atomic on local array {expr.buffer!r}.",
                        "a local array is private to its invocation: use load and store.")
    if not decl.writable:
        raise TypeFault("V008", f"atomic on read-only buffer {expr.buffer!r}.",
                        "declare it read_write, output or workgroup.")
    vt = infer(expr.value, scope, program)
    if vt is not decl.dtype:
        raise TypeFault("V003", f"atomic value is {vt.value}, buffer is {decl.dtype.value}.",
                        "cast the value to the buffer's type.")
    if (expr.op is AtomicOp.COMPARE_EXCHANGE) != (expr.expected is not None):
        raise TypeFault("V003", "COMPARE_EXCHANGE needs `expected`; other atomics take none.",
                        "pass expected= only with AtomicOp.COMPARE_EXCHANGE.")
    if expr.expected is not None and infer(expr.expected, scope, program) is not decl.dtype:
        raise TypeFault("V003", "atomic `expected` differs from the buffer type.",
                        "cast `expected` to the buffer's type.")
    return decl.dtype


def _t_id(expr: E.Id, scope: Scope, program) -> DataType:
    if expr.axis not in (0, 1, 2):
        raise TypeFault("V022", f"{expr.kind.value} axis {expr.axis} is not 0, 1 or 2.",
                        "use axis 0 (x), 1 (y) or 2 (z).")
    return U


def _t_bin(expr: E.Bin, scope: Scope, program) -> DataType:
    return bin_result(expr.op, infer(expr.left, scope, program), infer(expr.right, scope, program))


def _t_un(expr: E.Un, scope: Scope, program) -> DataType:
    return un_result(expr.op, infer(expr.operand, scope, program))


def _t_select(expr: E.Select, scope: Scope, program) -> DataType:
    c = infer(expr.cond, scope, program)
    if c is not B:
        raise TypeFault("V003", f"select condition is {c.value}, not bool.",
                        "compare it (e.g. x.ne(0)) to get a bool.")
    a, b = infer(expr.if_true, scope, program), infer(expr.if_false, scope, program)
    if a is not b:
        raise TypeFault("V003", f"select branches differ: {a.value} vs {b.value}.",
                        "cast one branch so both have the same type.")
    return a


def _t_cast(expr: E.Cast, scope: Scope, program) -> DataType:
    infer(expr.value, scope, program)
    if expr.dtype.storage_only:
        raise TypeFault("V003", f"cast to {expr.dtype.value}, a storage-only type.",
                        "cast to u32/i32 (a store to a u8/u16/i8/i16 buffer keeps the low bits).")
    return expr.dtype


def _t_bitcast(expr: E.Bitcast, scope: Scope, program) -> DataType:
    t = infer(expr.value, scope, program)
    if t is B or expr.dtype is B:
        raise TypeFault("V003", "bitcast to or from bool is not defined.",
                        "use Expr.cast for bool conversions.")
    if not bitcast_ok(t, expr.dtype):
        raise TypeFault("V003", f"bitcast from {t.value} to {expr.dtype.value}: the sizes differ.",
                        "bitcast between types of one size (16-bit floats also to/from u32), "
                        "or use Expr.cast to convert the value.")
    return expr.dtype


def _t_subgroup(expr: E.Subgroup, scope: Scope, program) -> DataType:
    if expr.op in (SubgroupOp.LOCAL_ID, SubgroupOp.SIZE):
        return U
    vt = infer(expr.value, scope, program)
    if expr.op in SUBGROUP_REDUCTIONS:
        if vt not in (U, I):
            raise TypeFault("V003", f"subgroup {expr.op.value} needs u32 or i32, got {vt.value}.",
                            "reduce 32-bit integers (float reductions would depend on lane order).")
        return vt
    if expr.op is SubgroupOp.BALLOT:
        if vt is not B:
            raise TypeFault("V003", f"subgroup ballot needs a bool, got {vt.value}.", "compare first.")
        return U
    if vt not in (U, I, F):
        raise TypeFault("V003", f"subgroup shuffle of a {vt.value}.",
                        "shuffle 32-bit values (cast bools to u32; split 64-bit values in two).")
    _index(infer(expr.lane, scope, program))
    return vt


def _t_fma(expr: E.Fma, scope: Scope, program) -> DataType:
    types = [infer(part, scope, program) for part in (expr.a, expr.b, expr.c)]
    if not types[0].is_float or any(t is not types[0] for t in types):
        raise TypeFault("V003", f"fma operands are {', '.join(t.value for t in types)}.",
                        "give all three operands one float type (f32, f16 or bf16).")
    return types[0]


def _t_call(expr: E.Call, scope: Scope, program) -> DataType:
    return call_result(expr, scope, program)


# the typing rule of each expression kind (tests/ir/test_kind_tables.py: every kind has one)
_INFER: dict[type, Callable[[Any, Scope, Any], DataType]] = {
    E.Lit: _t_literal, E.Spec: _t_literal, E.WeakLit: _t_weak, E.Var: _t_var, E.Load: _t_load,
    E.BufLen: _t_buf_len, E.Atomic: _t_atomic, E.Id: _t_id, E.Bin: _t_bin, E.Un: _t_un,
    E.Select: _t_select, E.Cast: _t_cast, E.Bitcast: _t_bitcast, E.Subgroup: _t_subgroup,
    E.Fma: _t_fma, E.Call: _t_call,
}


def call_result(expr: E.Call, scope: Mapping[str, DataType], program) -> DataType:
    """Check a call's arguments against its function; its result type (the call must have
    one: use `Node.call` for a function without a result)."""
    t = call_check(expr, scope, program)
    if t is None:
        raise TypeFault("V003", f"function {expr.function!r} has no result, but its call is used "
                        "as a value.", "call it as a statement with Node.call, or give it a result.")
    return t


def call_check(expr: E.Call, scope: Mapping[str, DataType], program) -> DataType | None:
    fn = program.function(expr.function) if hasattr(program, "function") else None
    if fn is None:
        raise TypeFault("V032", f"call of undeclared function {expr.function!r}.",
                        "declare it with Function.define(...) in Program.wrapped(functions=...).")
    if len(expr.args) != len(fn.params):
        raise TypeFault("V032", f"{expr.function!r} takes {len(fn.params)} argument(s), got "
                        f"{len(expr.args)}.", "pass one argument per parameter.")
    for (pname, ptype), arg in zip(fn.params, expr.args):
        t = infer(arg, scope, program)
        if t is not ptype:
            raise TypeFault("V003", f"argument {pname!r} of {expr.function!r} is {t.value}, "
                            f"expected {ptype.value}.", f"cast it with Expr.cast(DataType.{ptype.name}, ...).")
    return function_type(fn, program)


def function_type(fn, program) -> DataType | None:
    """The result type of a function (None: no result), cached on the program. Every
    function it calls is typed first, callees before callers (`callees_first`), so typing
    a long call chain never recurses along it; a function in a call cycle (V033) sees "no
    result" for the call that closes it. Nothing is left cached if typing is interrupted."""
    cache = program.__dict__.setdefault("_vyre_fn_types", {})
    if fn.name in cache:
        return cache[fn.name]
    try:
        for f in callees_first([fn], program):
            if f.name not in cache:
                cache[f.name] = None   # a call closing a cycle sees "no result"
                cache[f.name] = _result_type(f, program)
    except BaseException:
        program.__dict__.pop("_vyre_fn_types", None)   # no half-typed functions left behind
        raise
    return cache[fn.name]


def _result_type(fn, program) -> DataType | None:
    if fn.result is None:
        return None
    try:
        return infer(fn.result, body_scope(fn.body, dict(fn.params), program), program)
    except TypeFault:
        return None


def callees_first(roots, program) -> list:
    """The functions ``roots`` and every function they reach through calls, each after the
    functions it calls (an iterative depth-first walk: a call chain of any length is never
    walked by recursion; cycles, V033, are cut where they close)."""
    from . import node as N

    lookup = getattr(program, "function", None)
    order: list = []
    state: dict[str, int] = {}   # 1: on the walk's path, 2: placed in ``order``
    stack = [(f, None) for f in reversed(list(roots))]
    while stack:
        f, callees = stack[-1]
        if callees is None:
            if state.get(f.name):
                stack.pop()
                continue
            state[f.name] = 1
            try:
                found = [e.function for e in N.walk_exprs(tuple(f.body)) if isinstance(e, E.Call)]
                if f.result is not None:
                    found += [e.function for e in E.walk(f.result) if isinstance(e, E.Call)]
            except Exception:   # a malformed body: validation reports it
                found = []
            callees = [g for g in (lookup(n) if lookup else None for n in dict.fromkeys(found))
                       if g is not None and not state.get(g.name)]
            stack[-1] = (f, callees)
        if callees:
            stack.append((callees.pop(), None))
        else:
            stack.pop()
            state[f.name] = 2
            order.append(f)
    return order


def body_scope(body, scope: dict[str, DataType], program) -> dict[str, DataType]:
    """The locals a body's top level declares (what a function's result may name)."""
    from . import node as N

    scope = dict(scope)
    for n in body:
        if isinstance(n, N.Let):
            try:
                scope[n.name] = infer(n.value, scope, program)
            except TypeFault:
                scope[n.name] = U
    return scope


def _index(t: DataType) -> None:
    if t is not U:
        raise TypeFault("V003", f"buffer index is {t.value}, not u32.",
                        "cast the index with Expr.cast(DataType.U32, ...).")


# ---- weak literals (`vyre.ir.weak`): what each kind tells the literals among its operands -----
# ``r`` is the weak.Resolver: ``r.peek(e, scope)`` the type of ``e`` as far as its non-weak
# parts decide it, ``r.expr(e, want, scope)`` ``e`` with its weak literals typed for ``want``.
_PREDICATES = frozenset({UnOp.IS_NAN, UnOp.IS_INF, UnOp.IS_FINITE, UnOp.LOGICAL_NOT})


def _peek_bin(r: Any, e: E.Bin, scope: dict[str, DataType]) -> DataType | None:
    if e.op in COMPARISONS or e.op in LOGICAL:
        return B
    if e.op in SHIFTS:
        return r.peek(e.left, scope)
    return r.peek(e.left, scope) or r.peek(e.right, scope)


def _peek_un(r: Any, e: E.Un, scope: dict[str, DataType]) -> DataType | None:
    return B if e.op in _PREDICATES else r.peek(e.operand, scope)


def _peek_select(r: Any, e: E.Select, scope: dict[str, DataType]) -> DataType | None:
    return r.peek(e.if_true, scope) or r.peek(e.if_false, scope)


def _peek_fma(r: Any, e: E.Fma, scope: dict[str, DataType]) -> DataType | None:
    return r.peek(e.a, scope) or r.peek(e.b, scope) or r.peek(e.c, scope)


def _peek_convert(r: Any, e: E.Cast | E.Bitcast, scope: dict[str, DataType]) -> DataType | None:
    return e.dtype


def _peek_memory(r: Any, e: E.Load | E.Atomic, scope: dict[str, DataType]) -> DataType | None:
    decl = r.p.buffer(e.buffer)
    return None if decl is None else decl.dtype.value_type


def _peek_call(r: Any, e: E.Call, scope: dict[str, DataType]) -> DataType | None:
    fn = r.p.function(e.function)
    return None if fn is None else function_type(fn, r.p)


def _peek_subgroup(r: Any, e: E.Subgroup, scope: dict[str, DataType]) -> DataType | None:
    return r.peek(e.value, scope) if e.value is not None else U


def _c_weak(r: Any, e: E.WeakLit, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    return r.literal(e.value, want)


def _c_bin(r: Any, e: E.Bin, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    x = r.expr
    if e.op in SHIFTS:
        left = x(e.left, want or r.peek(e.right, scope), scope)
        return E.Bin(e.op, left, x(e.right, r.peek(left, scope), scope))
    if e.op in LOGICAL:
        return E.Bin(e.op, x(e.left, B, scope), x(e.right, B, scope))
    t = r.peek(e.left, scope) or r.peek(e.right, scope)
    if t is None and e.op not in COMPARISONS:
        t = want
    return E.Bin(e.op, x(e.left, t, scope), x(e.right, t, scope))


def _c_un(r: Any, e: E.Un, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    t = r.peek(e.operand, scope)
    if t is None and e.op not in _PREDICATES:
        t = want
    return E.Un(e.op, r.expr(e.operand, B if e.op is UnOp.LOGICAL_NOT else t, scope))


def _c_select(r: Any, e: E.Select, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    x = r.expr
    t = r.peek(e.if_true, scope) or r.peek(e.if_false, scope) or want
    return E.Select(x(e.cond, B, scope), x(e.if_true, t, scope), x(e.if_false, t, scope))


def _c_fma(r: Any, e: E.Fma, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    x = r.expr
    t = r.peek(e, scope) or want
    return E.Fma(x(e.a, t, scope), x(e.b, t, scope), x(e.c, t, scope))


def _c_convert(r: Any, e: E.Cast | E.Bitcast, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    return type(e)(e.dtype, r.expr(e.value, None, scope))


def _c_load(r: Any, e: E.Load, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    return E.Load(e.buffer, r.expr(e.index, U, scope))


def _c_atomic(r: Any, e: E.Atomic, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    x = r.expr
    decl = r.p.buffer(e.buffer)
    t = None if decl is None else decl.dtype
    return E.Atomic(e.op, e.buffer, x(e.index, U, scope), x(e.value, t, scope),
                    None if e.expected is None else x(e.expected, t, scope))


def _c_subgroup(r: Any, e: E.Subgroup, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    x = r.expr
    return E.Subgroup(e.op, None if e.value is None else x(e.value, want, scope),
                      None if e.lane is None else x(e.lane, U, scope))


def _c_call(r: Any, e: E.Call, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
    fn = r.p.function(e.function)
    params = [t for _, t in fn.params] if fn is not None and len(fn.params) == len(e.args) \
        else [None] * len(e.args)
    return E.Call(e.function, tuple(r.expr(a, t, scope) for a, t in zip(e.args, params)))


# the type a kind's own parts give it; leaves (`LEAVES`) hold no weak literal and are
# typed by `infer`
PEEK: dict[type, Callable[..., DataType | None]] = {
    E.Bin: _peek_bin, E.Un: _peek_un, E.Select: _peek_select, E.Fma: _peek_fma, E.Cast: _peek_convert,
    E.Bitcast: _peek_convert, E.Load: _peek_memory, E.Atomic: _peek_memory, E.Call: _peek_call,
    E.Subgroup: _peek_subgroup}
# the type a kind asks of its operands (a weak literal: the literal it becomes)
CONTEXT: dict[type, Callable[..., E.Expr]] = {
    E.WeakLit: _c_weak, E.Bin: _c_bin, E.Un: _c_un, E.Select: _c_select, E.Fma: _c_fma,
    E.Cast: _c_convert, E.Bitcast: _c_convert, E.Load: _c_load, E.Atomic: _c_atomic,
    E.Subgroup: _c_subgroup, E.Call: _c_call}
