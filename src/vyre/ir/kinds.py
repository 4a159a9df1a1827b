"""The one list of IR kinds: every Expr kind and every Node kind, with its fields and their
roles, its op ids, its display form and its wire tag.

Everything structural is derived from this list: the children of an expression and the
expressions and bodies of a statement (`vyre.ir.expr.children`, `vyre.ir.node.node_exprs`,
`node_bodies`), rebuilding (`vyre.ir.rewrite`), the op ids (`vyre.ir.ops`), the structural
check (`vyre.ir.structure`), the renaming walks (`vyre.ir.inline`) and the default text
(`vyre.ir.show`). Per-kind semantics (typing, validation, the reference interpreter, the
printers) are tables keyed by kind; tests/ir/test_kind_tables.py checks that each table
covers every kind of this list, or names the kind in its exemption set.

A new kind: add its dataclass to expr.py or node.py (and its name to that module's
``__all__``), one `Kind` here, its encoder and decoder in wire.py, and one entry in each
semantic table that concerns it (typecheck and float flags for expressions, validate, the
reference interpreter, the printer): at most 8 files, plus a legalization that really
rewrites it. Every other module reads the row (``pure``, ``loop``, ``jump``, ``subgroup``,
``syncs``, ``arith``, the field roles, the op ids) or `ProgramFacts`, never the kind's name;
tests/ir/test_kind_tables.py holds each kind to its budget of files (``scripts/count-ladders
--files``). Wire tags are append-only: never reuse or renumber one.

Field roles:

========== ==========================================================================
EXPR       a sub-expression
OPT        a sub-expression or None
ARGS       a tuple of sub-expressions (call arguments)
BODY       a tuple of statements
DECLARES   a local the statement declares, visible after it (`Let.name`)
BINDS      a local bound for the statement's bodies only (`Loop.var`)
LOCAL      a local read or written (`Var.name`, `Assign.name`)
BUFFER     a buffer name
FUNCTION   a function name
LABEL      a name for diagnostics only (`Region.name`)
SPEC_NAME  a specialization constant's name
ENUM       a member of the enum class given as the field's type (ops, dtypes, builtins)
LIT_TYPE   a literal's DataType (checked together with its BITS)
BITS       a literal's bit pattern
INT        a plain int (an axis, an offset, an iteration cap)
NUMBER     a Python number (a weak literal's value)
========== ==========================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from operator import attrgetter
from typing import Any

from . import expr as E
from . import node as N
from .types import AtomicOp, BinOp, Builtin, DataType, MemoryOrdering, SubgroupOp, UnOp


class Role(Enum):
    """What a field of a kind holds (the table in the module docstring)."""

    EXPR = "expr"
    OPT = "expr?"
    ARGS = "args"
    BODY = "body"
    DECLARES = "declares"
    BINDS = "binds"
    LOCAL = "local"
    BUFFER = "buffer"
    FUNCTION = "function"
    LABEL = "label"
    SPEC_NAME = "spec"
    ENUM = "enum"
    LIT_TYPE = "lit_type"
    BITS = "bits"
    INT = "int"
    NUMBER = "number"


EXPR, OPT, ARGS, BODY = Role.EXPR, Role.OPT, Role.ARGS, Role.BODY
DECLARES, BINDS, LOCAL = Role.DECLARES, Role.BINDS, Role.LOCAL
BUFFER, FUNCTION, LABEL, SPEC_NAME = Role.BUFFER, Role.FUNCTION, Role.LABEL, Role.SPEC_NAME
ENUM, LIT_TYPE, BITS, INT, NUMBER = Role.ENUM, Role.LIT_TYPE, Role.BITS, Role.INT, Role.NUMBER
NAMES = frozenset({DECLARES, BINDS, LOCAL, BUFFER, FUNCTION, LABEL, SPEC_NAME})


@dataclass(frozen=True)
class Field:
    """One field of a kind: its name, its role (the table above) and, for ENUM and plain
    fields, the Python type its value must have. ``label``: the line `show` prints before a
    body (None: none; a labelled empty body is not shown)."""

    name: str
    role: Role
    type: Any = None
    label: str | None = None


@dataclass(frozen=True)
class Kind:
    """One IR kind. ``ops``: its op ids, as templates whose ``{field}`` is replaced by that
    ENUM field's value. ``wire``: its fields in wire order (None: dataclass order).
    ``show(x, text)``: its text (a statement's header line), ``text`` rendering
    sub-expressions. ``built``: whether a built Program may hold it (weak literals are
    resolved when the Program is built). ``pure``, ``loop``, ``jump``, ``subgroup``,
    ``syncs``, ``arith``: see the fields; modules outside the kind's homes read these
    instead of naming kinds, so they stay right for a kind they have never heard of."""

    cls: type
    fields: tuple[Field, ...]
    ops: tuple[str, ...]
    tag: int | None
    show: Callable[[Any, Callable[[E.Expr], str]], str]
    wire: tuple[str, ...] | None = None
    built: bool = True
    pure: bool = True       # reads no memory, has no effect, talks to no other invocation
    loop: bool = False      # its bodies are a loop: the target of break/continue
    jump: bool = False      # leaves or restarts the innermost loop (break, continue)
    # talks to the other invocations of its subgroup: every lane must reach it (uniform
    # control flow), it is never fused, vectorised or padded, and a target without subgroup
    # operations refuses it
    subgroup: bool = False
    # waits for every invocation of the workgroup (a barrier): the invocations of a kernel
    # holding one cannot stop polling on their own, nor be fused or padded
    syncs: bool = False
    # computes a number from its operands' values in their type (16-bit floats widen its
    # operands to f32 and round its result once: vyre.lower.legalize.half)
    arith: bool = False

    @property
    def name(self) -> str:
        return self.cls.__name__

    @property
    def is_expr(self) -> bool:
        return issubclass(self.cls, E.Expr)

    def roles(self, *roles: Role) -> tuple[str, ...]:
        """Names of the fields with one of ``roles``, in field order."""
        return tuple(f.name for f in self.fields if f.role in roles)

    @property
    def wire_order(self) -> tuple[str, ...]:
        return self.wire if self.wire is not None else tuple(f.name for f in self.fields)


def _f(name: str, role: Role, type_: Any = None, label: str | None = None) -> Field:
    if type_ is None:
        type_ = str if role in NAMES else int if role == INT else None
    return Field(name, role, type_, label)


def _lit_text(e: E.Lit, _text: Callable[[E.Expr], str]) -> str:
    v = e.value
    return f"{v!r}{e.dtype.value}" if e.dtype is not DataType.BOOL else str(v).lower()


def _atomic_text(e: E.Atomic, t: Callable[[E.Expr], str]) -> str:
    extra = f", expected={t(e.expected)}" if e.expected is not None else ""
    return f"atomic_{e.op.value}({e.buffer}[{t(e.index)}], {t(e.value)}{extra})"


def _subgroup_text(e: E.Subgroup, t: Callable[[E.Expr], str]) -> str:
    return f"subgroup_{e.op.value}({', '.join(t(x) for x in (e.value, e.lane) if x is not None)})"


B = BODY
EXPR_KINDS: tuple[Kind, ...] = (
    Kind(E.Lit, (_f("dtype", LIT_TYPE, DataType), _f("bits", BITS)), ("vyre.expr.literal",), 1, _lit_text),
    Kind(E.Var, (_f("name", LOCAL),), ("vyre.expr.var",), 2, lambda e, t: e.name),
    Kind(E.Load, (_f("buffer", BUFFER), _f("index", EXPR)), ("vyre.expr.load",), 3,
         lambda e, t: f"{e.buffer}[{t(e.index)}]", pure=False),
    Kind(E.BufLen, (_f("buffer", BUFFER),), ("vyre.expr.buf_len",), 4, lambda e, t: f"len({e.buffer})"),
    Kind(E.Id, (_f("kind", ENUM, Builtin), _f("axis", INT)), ("vyre.expr.{kind}",), 5,
         lambda e, t: f"{e.kind.value}.{'xyz'[e.axis]}"),
    Kind(E.Bin, (_f("op", ENUM, BinOp), _f("left", EXPR), _f("right", EXPR)), ("vyre.bin_op.{op}",), 6,
         lambda e, t: f"{e.op.value}({t(e.left)}, {t(e.right)})", arith=True),
    Kind(E.Un, (_f("op", ENUM, UnOp), _f("operand", EXPR)), ("vyre.un_op.{op}",), 7,
         lambda e, t: f"{e.op.value}({t(e.operand)})", arith=True),
    Kind(E.Select, (_f("cond", EXPR), _f("if_true", EXPR), _f("if_false", EXPR)), ("vyre.expr.select",), 8,
         lambda e, t: f"select({t(e.cond)}, {t(e.if_true)}, {t(e.if_false)})"),
    Kind(E.Cast, (_f("dtype", ENUM, DataType), _f("value", EXPR)), ("vyre.expr.cast",), 9,
         lambda e, t: f"{e.dtype.value}({t(e.value)})"),
    Kind(E.Bitcast, (_f("dtype", ENUM, DataType), _f("value", EXPR)), ("vyre.expr.bitcast",), 10,
         lambda e, t: f"bitcast<{e.dtype.value}>({t(e.value)})"),
    Kind(E.Fma, (_f("a", EXPR), _f("b", EXPR), _f("c", EXPR)), ("vyre.expr.fma",), 11,
         lambda e, t: f"fma({t(e.a)}, {t(e.b)}, {t(e.c)})", arith=True),
    Kind(E.Atomic, (_f("op", ENUM, AtomicOp), _f("buffer", BUFFER), _f("index", EXPR), _f("value", EXPR),
                    _f("expected", OPT)), ("vyre.expr.atomic", "vyre.atomic.{op}"), 12, _atomic_text,
         pure=False),
    Kind(E.Spec, (_f("name", SPEC_NAME), _f("dtype", LIT_TYPE, DataType), _f("bits", BITS)),
         ("vyre.expr.spec",), 13, lambda e, t: f"spec {e.name}: {e.dtype.value}"),
    Kind(E.Subgroup, (_f("op", ENUM, SubgroupOp), _f("value", OPT), _f("lane", OPT)),
         ("vyre.subgroup.{op}",), 14, _subgroup_text, pure=False, subgroup=True),
    Kind(E.Call, (_f("function", FUNCTION), _f("args", ARGS)), ("vyre.expr.call",), 15,
         lambda e, t: f"{e.function}({', '.join(t(a) for a in e.args)})", pure=False),
    Kind(E.WeakLit, (_f("value", NUMBER),), (), None, lambda e, t: f"{e.value!r}", built=False),
)
NODE_KINDS: tuple[Kind, ...] = (
    Kind(N.Let, (_f("name", DECLARES), _f("value", EXPR)), ("vyre.node.let_bind",), 1,
         lambda n, t: f"let {n.name} = {t(n.value)}"),
    Kind(N.Assign, (_f("name", LOCAL), _f("value", EXPR)), ("vyre.node.assign",), 2,
         lambda n, t: f"{n.name} = {t(n.value)}"),
    Kind(N.Store, (_f("buffer", BUFFER), _f("index", EXPR), _f("value", EXPR)), ("vyre.node.store",), 3,
         lambda n, t: f"{n.buffer}[{t(n.index)}] = {t(n.value)}"),
    Kind(N.If, (_f("cond", EXPR), _f("then", B), _f("otherwise", B, label="else:")), ("vyre.node.if",), 4,
         lambda n, t: f"if {t(n.cond)}:"),
    Kind(N.Loop, (_f("var", BINDS), _f("from_", EXPR), _f("to", EXPR), _f("body", B)), ("vyre.node.loop",), 5,
         lambda n, t: f"for {n.var} in [{t(n.from_)}, {t(n.to)}):", loop=True),
    Kind(N.Block, (_f("body", B),), ("vyre.node.block",), 6, lambda n, t: "block:"),
    Kind(N.Region, (_f("name", LABEL), _f("body", B)), ("vyre.node.region",), 7, lambda n, t: f"region {n.name}:"),
    Kind(N.Return, (), ("vyre.node.return",), 8, lambda n, t: "return"),
    Kind(N.Barrier, (_f("ordering", ENUM, MemoryOrdering),), ("vyre.node.barrier.{ordering}",), 9,
         lambda n, t: f"barrier({n.ordering.value})", syncs=True),
    Kind(N.Eval, (_f("value", EXPR),), ("vyre.node.eval",), 10, lambda n, t: t(n.value)),
    Kind(N.While, (_f("cond", EXPR), _f("body", B), _f("max_iterations", INT)), ("vyre.node.while",), 11,
         lambda n, t: f"while {t(n.cond)} (at most {n.max_iterations}):", wire=("cond", "max_iterations", "body"), loop=True),
    Kind(N.Break, (), ("vyre.node.break",), 12, lambda n, t: "break", jump=True),
    Kind(N.Continue, (), ("vyre.node.continue",), 13, lambda n, t: "continue", jump=True),
    Kind(N.IndirectDispatch, (_f("buffer", BUFFER), _f("offset", INT)), ("vyre.node.indirect_dispatch",), 14,
         lambda n, t: f"indirect_dispatch(grid = {n.buffer}[{n.offset}:{n.offset + 3}])"),
    Kind(N.MatMulAcc, (_f("d", BUFFER), _f("a", BUFFER), _f("b", BUFFER), _f("m", INT), _f("n", INT),
                       _f("k", INT)), ("vyre.node.matmul_acc",), 15,
         lambda n, t: f"matmul_acc {n.d}[{n.m}x{n.n}] += {n.a}[{n.m}x{n.k}] * {n.b}[{n.n}x{n.k}]^T",
         syncs=True),
    Kind(N.LoadTile, (_f("dst", BUFFER), _f("src", BUFFER), _f("offset", EXPR), _f("stride", EXPR),
                      _f("rows", INT), _f("cols", INT), _f("rows_in", EXPR), _f("cols_in", EXPR)),
         ("vyre.node.load_tile",), 16,
         lambda n, t: (f"load_tile {n.dst}[{n.rows}x{n.cols}] = {n.src}[{t(n.offset)} + r*{t(n.stride)} + c] "
                       f"(r < {t(n.rows_in)}, c < {t(n.cols_in)}; else 0)"),
         pure=False, syncs=True),
)
KINDS: tuple[Kind, ...] = EXPR_KINDS + NODE_KINDS
KIND: dict[type, Kind] = {k.cls: k for k in KINDS}
KIND_BY_TAG: dict[tuple[str, int], Kind] = {("expr" if k.is_expr else "node", k.tag): k
                                           for k in KINDS if k.tag is not None}
LOOPS: tuple[type, ...] = tuple(k.cls for k in NODE_KINDS if k.loop)
JUMPS: tuple[type, ...] = tuple(k.cls for k in NODE_KINDS if k.jump)
# per statement kind: the fields naming a local it writes (declared, bound or assigned)
WRITES_LOCAL: dict[type, tuple[str, ...]] = {k.cls: k.roles(DECLARES, BINDS, LOCAL) for k in NODE_KINDS}
EXPR_CLASSES: tuple[type, ...] = tuple(k.cls for k in EXPR_KINDS)
NODE_CLASSES: tuple[type, ...] = tuple(k.cls for k in NODE_KINDS)


def kind_of(x: Any) -> Kind:
    """The kind of an IR object; `UnknownKind` when it is not one."""
    k = KIND.get(type(x))
    if k is None:
        raise UnknownKind(x)
    return k


class UnknownKind(TypeError):
    """An object that is no IR kind reached a walk over the IR (a TypeError: it is a
    programming error, never a user's; the validator reports malformed programs first)."""

    def __init__(self, x: Any) -> None:
        super().__init__(f"{type(x).__name__} is not an IR kind (vyre.ir.kinds lists them).")


def check_table(table: Any, family: tuple[Kind, ...], exempt: frozenset[type] = frozenset(),
                name: str = "table") -> None:
    """Raise AssertionError unless ``table`` holds exactly the kinds of ``family`` not in
    ``exempt`` (tests call this for every per-kind table)."""
    want = {k.cls for k in family} - set(exempt)
    have = set(table)
    missing = sorted(c.__name__ for c in want - have)
    extra = sorted(c.__name__ for c in have - want)
    assert not missing and not extra, f"{name}: missing {missing}, unexpected {extra}"


# ---------------------------------------------------------------- derived: op ids
def _expand(k: Kind) -> dict[Any, tuple[str, ...]] | tuple[str, ...]:
    """A kind's op ids: a constant tuple, or a dict from its ENUM field's member to a tuple."""
    keyed = [f for f in k.fields if f.role == ENUM and any("{" + f.name + "}" in o for o in k.ops)]
    if not keyed:
        return k.ops
    (f,) = keyed
    return {m: tuple(o.replace("{" + f.name + "}", m.value) for o in k.ops) for m in f.type}


def _op_getter(k: Kind) -> Callable[[Any], tuple[str, ...]]:
    table = _expand(k)
    if isinstance(table, tuple):
        return lambda x, _t=table: _t
    (f,) = [f for f in k.fields if f.role == ENUM and any("{" + f.name + "}" in o for o in k.ops)]
    get = attrgetter(f.name)
    return lambda x, _t=table, _g=get: _t[_g(x)]


OP_IDS: dict[type, Callable[[Any], tuple[str, ...]]] = {k.cls: _op_getter(k) for k in KINDS if k.ops}


def _op_members() -> dict[str, Enum]:
    """Op id -> the ENUM member it names, for the op ids a member's value is part of
    (``vyre.subgroup.shuffle`` -> SubgroupOp.SHUFFLE): what a program's op ids say it uses."""
    out: dict[str, Enum] = {}
    for k in KINDS:
        for f in k.fields:
            if f.role == ENUM:
                for o in k.ops:
                    if "{" + f.name + "}" in o:
                        out.update({o.replace("{" + f.name + "}", m.value): m for m in f.type})
    return out


OP_MEMBER: dict[str, Enum] = _op_members()


def kind_op_ids() -> frozenset[str]:
    """Every op id some kind can have."""
    out: set[str] = set()
    for k in KINDS:
        t = _expand(k)
        out.update(*(t.values() if isinstance(t, dict) else (t,)))
    return frozenset(out)


# ---------------------------------------------------------------- derived: structure
def _compile(name: str, args: str, body: str, cls: type) -> Callable:
    """A function ``name(args)`` returning ``body`` (an expression over the kind's class
    ``C``), made from the list's field names as dataclasses makes ``__init__``: the walks
    every pass makes stay as fast as hand-written code."""
    scope: dict[str, Any] = {}
    exec(f"def {name}({args}):\n    return {body}\n", {"C": cls}, scope)
    return scope[name]


def _children_getter(k: Kind) -> Callable[[Any], tuple]:
    parts = [(f.name, f.role) for f in k.fields if f.role in (EXPR, OPT, ARGS)]
    roles = {r for _, r in parts}
    names = [n for n, _ in parts]
    if not parts:
        return lambda e: ()
    if roles == {EXPR}:
        return _compile(f"children_{k.name}", "e", f"({', '.join(f'e.{n}' for n in names)},)", k.cls)
    terms = [f"(e.{n},)" if r == EXPR else f"(() if e.{n} is None else (e.{n},))" if r == OPT else
             f"(e.{n} if isinstance(e.{n}, tuple) else ())" for n, r in parts]
    return _compile(f"children_{k.name}", "e", " + ".join(terms), k.cls)


def _bodies_getter(k: Kind) -> Callable[[Any], tuple]:
    """``(label, body)`` pairs of a statement's bodies, in field order."""
    names = k.roles(BODY)
    if not names:
        return lambda n: ()
    return _compile(f"bodies_{k.name}", "n", f"({''.join(f'({a!r}, n.{a}), ' for a in names)})", k.cls)


def _rebuilder(k: Kind) -> Callable[[Any, Any], Any]:
    """``rebuild(x, kids)``: ``x`` with its sub-expressions (children order) replaced."""
    parts, i = [], 0
    for f in k.fields:
        if f.role == EXPR:
            parts.append(f"kids[{i}]")
            i += 1
        elif f.role == OPT:   # present ones take the next child, in field order
            parts.append(f"(None if x.{f.name} is None else kids[{i} + _n])")
            parts[-1] = parts[-1].replace("_n", " + ".join(
                [f"(x.{g.name} is not None)" for g in k.fields[:k.fields.index(f)] if g.role == OPT] or ["0"]))
        elif f.role == ARGS:  # the rest
            parts.append(f"tuple(kids[{i}:])")
        else:
            parts.append(f"x.{f.name}")
    return _compile(f"rebuild_{k.name}", "x, kids", f"C({', '.join(parts)})", k.cls)


def _node_mapper(k: Kind) -> Callable[[Any, Callable, Callable], Any] | None:
    """``map(n, fn, body)``: ``n`` with ``fn`` applied to its expressions and ``body`` to
    its bodies (None: a kind with neither, which maps to itself)."""
    if not k.roles(EXPR, OPT, ARGS, BODY):
        return None
    parts = []
    for f in k.fields:
        v = f"n.{f.name}"
        parts.append(f"fn({v})" if f.role == EXPR else f"body({v})" if f.role == BODY else
                     f"(None if {v} is None else fn({v}))" if f.role == OPT else
                     f"tuple(fn(a) for a in {v})" if f.role == ARGS else v)
    return _compile(f"map_{k.name}", "n, fn, body", f"C({', '.join(parts)})", k.cls)


CHILDREN: dict[type, Callable[[Any], tuple]] = {k.cls: _children_getter(k) for k in EXPR_KINDS}
REBUILD: dict[type, Callable[[Any, Any], Any]] = {k.cls: _rebuilder(k) for k in EXPR_KINDS
                                                  if k.roles(EXPR, OPT, ARGS)}
NODE_EXPRS: dict[type, Callable[[Any], tuple]] = {k.cls: _children_getter(k) for k in NODE_KINDS}
NODE_BODIES: dict[type, Callable[[Any], tuple]] = {k.cls: _bodies_getter(k) for k in NODE_KINDS}
NODE_MAP: dict[type, Callable] = {k.cls: m for k in NODE_KINDS if (m := _node_mapper(k)) is not None}


def _check_fields() -> None:
    """Each kind lists exactly its dataclass's fields, in order (constructors are positional)."""
    for k in KINDS:
        have = tuple(f.name for f in fields(k.cls))
        if have != tuple(f.name for f in k.fields) or sorted(k.wire_order) != sorted(have):
            raise AssertionError(f"vyre.ir.kinds: {k.name} lists {[f.name for f in k.fields]}, "
                                 f"its dataclass has {list(have)}")


_check_fields()
E._KIDS.update(CHILDREN)
N._EXPRS.update(NODE_EXPRS)
N._BODIES.update(NODE_BODIES)
