"""The small typed language vyre's correctly rounded math is written in, once, for every target.

An algorithm is Python that builds typed expressions and statements; printers turn it into
target code: `vyre.lower.crmath.c` prints C (CUDA C, OpenCL C, host C) with native float64
and 64-bit integers, `vyre.lower.crmath.wgsl` prints WGSL, where every float64 and 64-bit
integer operation becomes a call of a software helper (`vyre.lower.crmath.soft`, written in
this same language on u32 words only). Each operation below has one meaning (IEEE 754
binary64 round-to-nearest-even for float64, C's for integers), so every target performs the
same sequence of operations on the same values and gets the same bits.

How a function is written::

    from vyre.lower.crmath.dsl import F32, F64, U32, function, table

    HALVES = table("vym_halves", F64, lambda: [0.5 ** k for k in range(8)])

    @function(F64, x=F64, k=U32)          # result type, then the parameters in order
    def vym_example(b, x, k):             # the target name is the Python name
        y = b.let(x * x + 1.0, "y")       # a named local; Python numbers take the other
        with b.if_(x.lt(0.0)):            # operand's type; operators build expressions
            b.ret(-y)
        b.ret(y * HALVES[k & 7])

    @function(F32, x=F32)
    def vym_caller(b, x):
        b.ret(vym_example(x.to(F64), x.bits() & 3).to(F32))   # a call is an expression

Types: `F64 F32 U64 I64 U32 I32 BOOL`. Operators: ``+ - *`` (same type, no F32 arithmetic:
f32 values are only compared, converted and moved; unsigned integers wrap, signed ones must
not overflow, as in C); ``/`` (F64; U32 by a value that is never zero; I32 C's truncating
division by a literal other than 0 and -1); unary ``-`` (F64, F32: the sign flip; I32/I64:
must not overflow);
``& | ^ ~`` (integers; on BOOL: logical and, or, not); ``<< >>`` (integers, the amount a
U32/I32 taken modulo the width; ``>>`` is arithmetic on I32/I64); comparisons are methods
``.lt .le .gt .ge .eq .ne`` (IEEE for floats: false on NaN except ``ne``). A float NaN's
bits (sign, payload) are not defined: targets differ, so algorithms may test for NaN but
must not depend on its bits. Conversions:
``v.to(T)`` (C's cast: exact where it can be, float64 -> f32 and 64-bit integer -> float64 round
to nearest even, float -> integer truncates and must be in range), ``v.bits()`` (the same
bits as the integer/float of the same width), ``v.hi()``/``v.lo()`` (the u32 words of a
64-bit value) and `pair` (a 64-bit value from its words). Functions: `select` (both arms are
evaluated: use ``if_`` for expensive arms), `sqrt`, `fma` (float64 ``a * b + c``: fused in the C
family only, see its docstring), `mulhi` (high word of the product),
`clz` (leading zeros; 0 gives the width).

Statements go through the `Block` ``b`` handed to the function: ``b.let(v, name)`` (a local;
a call of a function with several results gives a tuple of locals), ``b.var``/``b.set``
(mutable locals), ``with b.if_(c):`` / ``with b.else_():``, ``b.choose(c, then, orelse)`` (a
local computed by only the chosen arm), ``b.ret(*values)``; the body must end in a return.
Tables are read-only module constants (`table`; ``T[i]``, or ``T.row(i, w)`` for ``w``
consecutive entries at once, which ``b.let`` unpacks); a `Lookup` is a constant map from u32
keys to u32 values (``L.get(x, default)``; the hard cases). A function's body and a table's
values are built on first use; every target prints the functions, tables and lookups that the
requested ones reach, callees first (`closure`). Loops are deliberately absent: the generated
code is loop-free (lavapipe limits the loop trips of an invocation). The printers know no
function by name: a new function is a new Python definition (`vyre.lower.crmath.functions`
shows the whole vocabulary in use, with `finisher` for the correct-rounding step).

``cold=True`` marks a function the C family keeps out of line (``VYM_COLD``: not inlined into
its callers), for the rarely taken path of an entry point, so the hot loops that call the
entry stay small; it changes no value (WGSL prints it as any other function).

``soft=True`` marks a function written with 32-bit operations only (u32/i32/bool plus
``hi``/``lo``/`pair`, `select` and calls of other such functions): the WGSL printer implements the
64-bit operations with them, so they may not use a 64-bit operation themselves.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BOOL", "F32", "F64", "I32", "I64", "U32", "U64", "Block", "Function", "If", "Let", "Lookup",
    "Ret", "Set", "Table", "Ty", "Val", "bits64", "clz", "closure", "f32", "f64", "function", "i32", "lit",
    "fma", "lookup", "mulhi", "pair", "select", "sqrt", "table", "u32", "u64",
]


class Ty(enum.Enum):
    """A value type of the language."""

    F64 = "f64"
    F32 = "f32"
    U64 = "u64"
    I64 = "i64"
    U32 = "u32"
    I32 = "i32"
    BOOL = "bool"

    @property
    def is_float(self) -> bool:
        return self in (Ty.F64, Ty.F32)

    @property
    def is_int(self) -> bool:
        return self in (Ty.U64, Ty.I64, Ty.U32, Ty.I32)

    @property
    def signed(self) -> bool:
        return self in (Ty.I64, Ty.I32)

    @property
    def wide(self) -> bool:
        return self in (Ty.F64, Ty.U64, Ty.I64)

    @property
    def width(self) -> int:
        return 64 if self.wide else 32

    @property
    def bits_type(self) -> Ty:
        """The type with the same bits: F64 <-> U64, F32 <-> U32 (others: itself)."""
        return {Ty.F64: Ty.U64, Ty.U64: Ty.F64, Ty.F32: Ty.U32, Ty.U32: Ty.F32}.get(self, self)


F64, F32, U64, I64, U32, I32, BOOL = Ty.F64, Ty.F32, Ty.U64, Ty.I64, Ty.U32, Ty.I32, Ty.BOOL

# ---- expressions ---------------------------------------------------------------------------
# op -> operand count; every printer implements each (op, types) the builders below accept
ARITH = ("add", "sub", "mul", "div")
BITS = ("and", "or", "xor", "shl", "shr")
CMP = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC = ("land", "lor")
OPS = {
    "lit": 0, "ref": 0, "call": -1, "index": 1, "row": 1, "lookup": 2, "field": 1,
    **{o: 2 for o in ARITH + BITS + CMP + LOGIC},
    "neg": 1, "not": 1, "lnot": 1, "sqrt": 1, "mulhi": 2, "clz": 1, "fma": 3,
    "select": 3, "cvt": 1, "bits": 1, "hi": 1, "lo": 1, "pair": 2,
}
# conversions `Val.to` accepts (source, destination): C casts
CONVERSIONS = frozenset({
    (F32, F64), (F64, F32), (I32, F64), (U32, F64), (U64, F64), (F64, I32),
    (U32, I32), (I32, U32), (U32, U64), (I32, I64), (U64, U32), (I64, I32), (U64, I64), (I64, U64),
    (BOOL, U32), (BOOL, I32),
})
SOFT_OK = frozenset({U32, I32, BOOL})   # value types a soft function computes with


@dataclass(frozen=True)
class Tup:
    """The type of several values: a function's results, or a table row (``row``)."""

    types: tuple[Ty, ...]
    row: bool = False


class Val:
    """A typed expression. ``op`` names the operation (`OPS`), ``args`` its operands,
    ``data`` what the op needs besides: a literal's Python value, a local's name, the
    `Function` of a call, the `Table` read, a conversion's target type, a field number."""

    __slots__ = ("args", "data", "op", "ty")

    def __init__(self, op: str, ty: Ty | Tup, args: tuple[Val, ...] = (), data: Any = None) -> None:
        self.op, self.ty, self.args, self.data = op, ty, args, data
        _check_soft(self)

    def __repr__(self) -> str:
        return f"Val({self.op}, {getattr(self.ty, 'value', self.ty)}, {self.data!r})"

    # arithmetic
    def __add__(self, o: Operand) -> Val: return _arith("add", self, o)
    def __radd__(self, o: Operand) -> Val: return _arith("add", o, self)
    def __sub__(self, o: Operand) -> Val: return _arith("sub", self, o)
    def __rsub__(self, o: Operand) -> Val: return _arith("sub", o, self)
    def __mul__(self, o: Operand) -> Val: return _arith("mul", self, o)
    def __rmul__(self, o: Operand) -> Val: return _arith("mul", o, self)
    def __truediv__(self, o: Operand) -> Val: return _div(self, o)
    def __rtruediv__(self, o: Operand) -> Val: return _div(o, self)

    def __neg__(self) -> Val:
        if self.ty not in (F64, F32, I32, I64):
            raise TypeError(f"negation of {self.ty}")
        return Val("neg", self.ty, (self,))

    # bits (and logic on BOOL)
    def __and__(self, o: Operand) -> Val: return _bit("and", self, o)
    def __rand__(self, o: Operand) -> Val: return _bit("and", o, self)
    def __or__(self, o: Operand) -> Val: return _bit("or", self, o)
    def __ror__(self, o: Operand) -> Val: return _bit("or", o, self)
    def __xor__(self, o: Operand) -> Val: return _bit("xor", self, o)
    def __rxor__(self, o: Operand) -> Val: return _bit("xor", o, self)
    def __lshift__(self, o: Operand) -> Val: return _shift("shl", self, o)
    def __rshift__(self, o: Operand) -> Val: return _shift("shr", self, o)
    def __rlshift__(self, o: Operand) -> Val: return _shift("shl", _lit_like(o, self), self)

    def __invert__(self) -> Val:
        if self.ty is BOOL:
            return Val("lnot", BOOL, (self,))
        if not self.ty.is_int:
            raise TypeError(f"~ of {self.ty}")
        return Val("not", self.ty, (self,))

    def __bool__(self) -> bool:
        raise TypeError("a vyre.lower.crmath value has no Python truth value: use b.if_ or select")

    # comparisons (IEEE for floats)
    def lt(self, o: Operand) -> Val: return _cmp("lt", self, o)
    def le(self, o: Operand) -> Val: return _cmp("le", self, o)
    def gt(self, o: Operand) -> Val: return _cmp("gt", self, o)
    def ge(self, o: Operand) -> Val: return _cmp("ge", self, o)
    def eq(self, o: Operand) -> Val: return _cmp("eq", self, o)
    def ne(self, o: Operand) -> Val: return _cmp("ne", self, o)

    # conversions and words
    def to(self, ty: Ty) -> Val:
        """C's cast to ``ty`` (see `CONVERSIONS`)."""
        if ty is self.ty:
            return self
        if (self.ty, ty) not in CONVERSIONS:
            raise TypeError(f"no conversion {self.ty} -> {ty}")
        return Val("cvt", ty, (self,), ty)

    def bits(self) -> Val:
        """The same bits as the other type of this width (F64 <-> U64, F32 <-> U32)."""
        if self.ty.bits_type is self.ty:
            raise TypeError(f"bits() of {self.ty}")
        return Val("bits", self.ty.bits_type, (self,))

    def hi(self) -> Val:
        """The high u32 word of a 64-bit value."""
        _need(self.ty.wide, f"hi() of {self.ty}")
        return Val("hi", U32, (self,))

    def lo(self) -> Val:
        """The low u32 word of a 64-bit value."""
        _need(self.ty.wide, f"lo() of {self.ty}")
        return Val("lo", U32, (self,))


Operand = Val | int | float | bool


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise TypeError(what)


def bits64(x: float) -> int:
    """The IEEE bits of the float64 ``x`` (a printer's view of a literal)."""
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _f32_exact(v: float) -> bool:
    return math.isnan(v) or struct.unpack("f", struct.pack("f", v))[0] == v


def lit(ty: Ty, value: int | float | bool) -> Val:
    """A literal of ``ty`` (checked: integers in range, f32 values exactly representable)."""
    if ty is BOOL:
        return Val("lit", BOOL, data=bool(value))
    if ty.is_float:
        v = float(value)
        if ty is F32 and not _f32_exact(v):
            raise ValueError(f"{value!r} is not an f32 value")
        if isinstance(value, int) and float(v) != value:
            raise ValueError(f"{value!r} is not exactly a double")
        return Val("lit", ty, data=v)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer for {ty}")
    lo, hi = (-(1 << (ty.width - 1)), 1 << (ty.width - 1)) if ty.signed else (0, 1 << ty.width)
    if not lo <= value < hi:
        raise ValueError(f"{value} does not fit {ty}")
    return Val("lit", ty, data=value)


def f64(v: float) -> Val: return lit(F64, v)
def f32(v: float) -> Val: return lit(F32, v)
def u32(v: int) -> Val: return lit(U32, v)
def i32(v: int) -> Val: return lit(I32, v)
def u64(v: int) -> Val: return lit(U64, v)


def _lit_like(o: Operand, like: Val) -> Val:
    """``o`` as a value of ``like``'s type (a Python number becomes a literal)."""
    if isinstance(o, Val):
        if o.ty is not like.ty:
            raise TypeError(f"operands of different types: {o.ty} and {like.ty}")
        return o
    if isinstance(o, bool) and like.ty is not BOOL:
        raise TypeError("a Python bool where a number is wanted")
    return lit(like.ty, o)


def _pair_of(a: Operand, b: Operand) -> tuple[Val, Val]:
    if isinstance(a, Val):
        return a, _lit_like(b, a)
    if isinstance(b, Val):
        return _lit_like(a, b), b
    raise TypeError("at least one operand must be a value")


def _arith(op: str, a: Operand, b: Operand) -> Val:
    x, y = _pair_of(a, b)
    if x.ty is F32 or x.ty is BOOL:
        raise TypeError(f"{op} on {x.ty} (f32 values are only compared, converted and moved)")
    return Val(op, x.ty, (x, y))


def _div(a: Operand, b: Operand) -> Val:
    x, y = _pair_of(a, b)
    if x.ty is F64:
        return Val("div", F64, (x, y))
    if (x.ty is U32 and y.op != "lit") or (x.ty in (U32, I32) and y.op == "lit" and y.data not in (0, -1)):
        return Val("div", x.ty, (x, y))
    raise TypeError(f"division of {x.ty} (U32: by a value that is never 0; I32: by a literal "
                    "other than 0 and -1)")


def _bit(op: str, a: Operand, b: Operand) -> Val:
    x, y = _pair_of(a, b)
    if x.ty is BOOL and op in ("and", "or"):
        return Val("land" if op == "and" else "lor", BOOL, (x, y))
    if not x.ty.is_int:
        raise TypeError(f"{op} on {x.ty}")
    return Val(op, x.ty, (x, y))


def _shift(op: str, a: Val, amount: Operand) -> Val:
    if not a.ty.is_int:
        raise TypeError(f"shift of {a.ty}")
    s = amount if isinstance(amount, Val) else lit(U32, amount)
    if s.ty not in (U32, I32):
        raise TypeError(f"shift amount of type {s.ty}")
    if s.op == "lit" and not 0 <= s.data < a.ty.width:
        raise ValueError(f"shift by {s.data} of a {a.ty.width}-bit value")
    return Val(op, a.ty, (a, s))


def _cmp(op: str, a: Operand, b: Operand) -> Val:
    x, y = _pair_of(a, b)
    if x.ty is BOOL and op not in ("eq", "ne"):
        raise TypeError(f"{op} on bool")
    return Val(op, BOOL, (x, y))


def select(cond: Val, if_true: Operand, if_false: Operand) -> Val:
    """``if_true`` where ``cond`` holds, else ``if_false`` (both evaluated)."""
    _need(isinstance(cond, Val) and cond.ty is BOOL, "select needs a bool condition")
    a, b = _pair_of(if_true, if_false)
    return Val("select", a.ty, (cond, a, b))


def sqrt(x: Val) -> Val:
    """The correctly rounded square root of a float64."""
    _need(x.ty is F64, f"sqrt of {x.ty}")
    return Val("sqrt", F64, (x,))


def fma(a: Val, b: Operand, c: Operand) -> Val:
    """a * b + c of float64s: the one op whose doubles differ between targets. The C family
    rounds once (C's ``fma``: one DFMA on a GPU, where a multiply and an add are two
    instructions); WGSL rounds twice (``vyd_mul_add``: the product, then the sum, as the
    expression ``a * b + c``). An algorithm may use it only where both doubles are within
    `DEVICE_EPS` of the exact value (tests measure the fused one; the unfused one is the
    algorithm as it was before fma existed, measured and proven then): then both round to the
    same f32, by the rounding test and the hard cases."""
    x, y = _pair_of(a, b)
    y2, z = _pair_of(y, c)
    _need(x.ty is F64 and y2.ty is F64 and z.ty is F64, f"fma of {x.ty}")
    return Val("fma", F64, (x, y2, z))


def mulhi(a: Val, b: Operand) -> Val:
    """The high word of the full product of two unsigned values (U32 or U64)."""
    x, y = _pair_of(a, b)
    _need(x.ty in (U32, U64), f"mulhi of {x.ty}")
    return Val("mulhi", x.ty, (x, y))


def clz(a: Val) -> Val:
    """Leading zero bits of a U32 or U64 (the width for 0), as a U32."""
    _need(a.ty in (U32, U64), f"clz of {a.ty}")
    return Val("clz", U32, (a,))


def pair(ty: Ty, hi: Operand, lo: Operand) -> Val:
    """The 64-bit value of type ``ty`` whose u32 words are ``hi`` and ``lo``."""
    _need(ty.wide, f"pair of {ty}")
    h = hi if isinstance(hi, Val) else u32(hi)
    lw = lo if isinstance(lo, Val) else u32(lo)
    _need(h.ty is U32 and lw.ty is U32, "pair takes u32 words")
    return Val("pair", ty, (h, lw))


# ---- statements ------------------------------------------------------------------------------
@dataclass
class Let:
    """A local ``name`` (of ``value``'s type); ``mutable`` ones may be `Set` later."""

    name: str
    value: Val
    mutable: bool = False


@dataclass
class Set:
    name: str
    value: Val


@dataclass
class If:
    cond: Val
    then: list[Stmt]
    orelse: list[Stmt] | None = None


@dataclass
class Ret:
    values: tuple[Val, ...]


Stmt = Let | Set | If | Ret


class Block:
    """The statements of a function under construction (handed to its Python body)."""

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.names = {n for n, _ in fn.params}
        self.types: dict[str, Ty | Tup] = dict(fn.params)
        self.mutable: set[str] = set()
        self.stack: list[list[Stmt]] = [[]]

    @property
    def stmts(self) -> list[Stmt]:
        return self.stack[0]

    def _fresh(self, name: str) -> str:
        base, k = name, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def _emit(self, s: Stmt) -> None:
        self.stack[-1].append(s)

    def let(self, value: Operand, name: str = "t") -> Any:
        """A local holding ``value``; a call with several results gives a tuple of locals."""
        v = value if isinstance(value, Val) else _as_val(value)
        n = self._fresh(name)
        self._emit(Let(n, v))
        self.types[n] = v.ty
        ref = Val("ref", v.ty, data=n)
        if isinstance(v.ty, Tup):
            _need(v.op in ("call", "row"), "several values come from a call or a table row")
            return tuple(Val("field", t, (ref,), k) for k, t in enumerate(v.ty.types))
        return ref

    def var(self, value: Operand, name: str = "v") -> Val:
        """A mutable local (change it with `set`)."""
        v = value if isinstance(value, Val) else _as_val(value)
        _need(isinstance(v.ty, Ty), "a mutable local of a multi-result call")
        n = self._fresh(name)
        self._emit(Let(n, v, mutable=True))
        self.types[n] = v.ty
        self.mutable.add(n)
        return Val("ref", v.ty, data=n)

    def set(self, var: Val, value: Operand) -> None:
        _need(var.op == "ref" and var.data in self.mutable, "set() needs a local made by var()")
        self._emit(Set(var.data, _lit_like(value, var)))

    @contextmanager
    def _nested(self) -> Iterator[list[Stmt]]:
        """The statements written inside a ``with`` block, collected in a fresh list."""
        body: list[Stmt] = []
        self.stack.append(body)
        try:
            yield body
        finally:
            self.stack.pop()

    @contextmanager
    def if_(self, cond: Val) -> Iterator[None]:
        _need(isinstance(cond, Val) and cond.ty is BOOL, "if_ needs a bool condition")
        with self._nested() as body:
            yield
        self._emit(If(cond, body))

    @contextmanager
    def else_(self) -> Iterator[None]:
        last = self.stack[-1][-1] if self.stack[-1] else None
        _need(isinstance(last, If) and last.orelse is None, "else_ must follow an if_ block")
        with self._nested() as body:
            yield
        last.orelse = body   # type: ignore[union-attr]

    def choose(self, cond: Val, then: Callable[[], Operand], orelse: Callable[[], Operand],
               name: str = "c") -> Val:
        """A mutable local that is ``then()`` where ``cond`` holds, else ``orelse()``: only
        the chosen arm is computed (an if/else, unlike `select`)."""
        _need(isinstance(cond, Val) and cond.ty is BOOL, "choose needs a bool condition")
        with self._nested() as body:
            a = _as_val(then())
        out = self.var(_zero(a.ty), name)   # type: ignore[arg-type]
        body.append(Set(out.data, a))
        self._emit(If(cond, body))
        with self.else_():
            self.set(out, orelse())
        return out

    def ret(self, *values: Operand) -> None:
        want = self.fn.result.types if isinstance(self.fn.result, Tup) else (self.fn.result,)
        _need(len(values) == len(want), f"{self.fn.name} returns {len(want)} values")
        vals = tuple(v if isinstance(v, Val) else lit(t, v) for v, t in zip(values, want))
        for v, t in zip(vals, want):
            _need(v.ty is t, f"{self.fn.name} returns {t}, not {v.ty}")
        self._emit(Ret(vals))


def _as_val(v: Operand) -> Val:
    if isinstance(v, Val):
        return v
    raise TypeError(f"{v!r}: give Python numbers a type (f64(...), u32(...), ...)")


def _zero(ty: Ty) -> Val:
    return lit(ty, False if ty is BOOL else (0.0 if ty.is_float else 0))


def _ends_in_return(stmts: list[Stmt]) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, Ret):
        return True
    return isinstance(last, If) and last.orelse is not None and \
        _ends_in_return(last.then) and _ends_in_return(last.orelse)


# ---- functions and tables ---------------------------------------------------------------------
_BUILDING: list[Function] = []   # the soft function whose body is being built, if any


def _check_soft(v: Val) -> None:
    if not _BUILDING or not _BUILDING[-1].soft:
        return
    if v.op == "call" and not v.data.soft:
        raise TypeError(f"{_BUILDING[-1].name} is soft: it may call only soft functions, not {v.data.name}")
    if v.op == "bits" and v.ty in (F32, U32):
        return
    if v.op not in ("ref", "field", "call", "hi", "lo", "pair", "select"):
        tys = [v.ty, *(a.ty for a in v.args)]
        if any(isinstance(t, Ty) and t not in SOFT_OK for t in tys):
            raise TypeError(f"{_BUILDING[-1].name} is soft: {v.op} on {v.ty} is a 64-bit operation")


class Function:
    """A function of the language: ``name`` (the target name), result type(s), parameters;
    its body is built on first use by calling ``build(block, *params)``."""

    def __init__(self, name: str, result: Ty | Sequence[Ty], params: tuple[tuple[str, Ty], ...],
                 build: Callable[..., None], soft: bool = False, doc: str | None = None,
                 cold: bool = False) -> None:
        self.name = name
        self.cold = cold
        self.result: Ty | Tup = result if isinstance(result, Ty) else Tup(tuple(result))
        self.params = params
        self.soft = soft
        self.doc = doc
        self._build = build
        self._body: list[Stmt] | None = None

    def __repr__(self) -> str:
        return f"Function({self.name})"

    @property
    def body(self) -> list[Stmt]:
        if self._body is None:
            b = Block(self)
            args = [Val("ref", t, data=n) for n, t in self.params]
            _BUILDING.append(self)
            try:
                self._build(b, *args)
            finally:
                _BUILDING.pop()
            if not _ends_in_return(b.stmts):
                raise TypeError(f"{self.name} must end in a return")
            self._body = b.stmts
        return self._body

    def __call__(self, *args: Operand) -> Val:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments")
        vals = []
        for a, (n, t) in zip(args, self.params):
            v = a if isinstance(a, Val) else lit(t, a)
            _need(v.ty is t, f"{self.name}({n}) wants {t}, got {v.ty}")
            vals.append(v)
        return Val("call", self.result, tuple(vals), self)


def function(result: Ty | Sequence[Ty], *, soft: bool = False, cold: bool = False,
             **params: Ty) -> Callable[[Callable[..., None]], Function]:
    """Decorator: the Python function ``build(b, *params)`` becomes a `Function` named after
    it, with ``result`` (a type, or a tuple of types for several results) and ``params``."""
    def wrap(build: Callable[..., None]) -> Function:
        return Function(build.__name__, result, tuple(params.items()), build, soft, build.__doc__, cold)
    return wrap


class Table:
    """A read-only table (module constant) of one type; ``values`` is computed on first use.
    ``shared``: read once per evaluation on the common path, so a CUDA kernel that evaluates
    it in a loop keeps a copy in shared memory (`vyre.lower.crmath.c`, `VYM_SH`)."""

    def __init__(self, name: str, ty: Ty, values: Callable[[], Sequence[int | float]],
                 shared: bool = False) -> None:
        self.name, self.ty, self.shared = name, ty, shared
        self._values = values
        self._cache: tuple[int | float, ...] | None = None

    def __repr__(self) -> str:
        return f"Table({self.name})"

    @property
    def values(self) -> tuple[int | float, ...]:
        if self._cache is None:
            vals = tuple(self._values())
            for v in vals:
                lit(self.ty, v)   # range and exactness checks
            self._cache = vals
        return self._cache

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: Operand) -> Val:
        k = i if isinstance(i, Val) else i32(i)
        _need(k.ty in (U32, I32), f"table index of type {k.ty}")
        return Val("index", self.ty, (k,), self)

    def row(self, i: Operand, width: int) -> Val:
        """Entries ``i * width`` .. ``i * width + width - 1`` (a table of rows): ``b.let`` of it
        gives the ``width`` values."""
        k = i if isinstance(i, Val) else i32(i)
        _need(k.ty in (U32, I32), f"table index of type {k.ty}")
        _need(width > 0 and len(self.values) % width == 0, f"{self.name} has no rows of {width}")
        return Val("row", Tup((self.ty,) * width, row=True), (k,), (self, width))


def table(name: str, ty: Ty, values: Callable[[], Sequence[int | float]], shared: bool = False) -> Table:
    """A `Table` named ``name`` of type ``ty`` whose entries ``values()`` gives (``shared``:
    see `Table`)."""
    return Table(name, ty, values, shared)


class Lookup:
    """A read-only map from u32 keys to u32 values (``pairs()``: (key, value), any order):
    ``get(x, default)`` is the value of key ``x``, or ``default`` where ``x`` is no key. C
    prints a loop-free binary search of the sorted keys; WGSL the same search with the keys
    in the code (a decision tree), since lavapipe runs arrays indexed at run time slowly."""

    def __init__(self, name: str, pairs: Callable[[], Sequence[tuple[int, int]]]) -> None:
        self.name = name
        self._pairs = pairs
        self._cache: tuple[tuple[int, int], ...] | None = None

    def __repr__(self) -> str:
        return f"Lookup({self.name})"

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """(key, value), sorted by key, keys distinct."""
        if self._cache is None:
            got = tuple(sorted(self._pairs()))
            keys = [k for k, _ in got]
            if len(set(keys)) != len(keys) or any(not 0 <= v < 1 << 32 for p in got for v in p):
                raise ValueError(f"{self.name}: keys must be distinct u32 values, values u32")
            self._cache = got
        return self._cache

    def get(self, x: Val, default: Operand) -> Val:
        _need(x.ty is U32, "lookup keys are u32")
        return Val("lookup", U32, (x, _lit_like(default, x)), self)


def lookup(name: str, pairs: Callable[[], Sequence[tuple[int, int]]]) -> Lookup:
    """A `Lookup` named ``name`` of the (key, value) pairs ``pairs()`` gives."""
    return Lookup(name, pairs)


# ---- walking ------------------------------------------------------------------------------------
def stmt_vals(stmts: Iterable[Stmt]) -> Iterator[Val]:
    """The top-level expressions of statements (recursing into if blocks)."""
    for s in stmts:
        if isinstance(s, Let | Set):
            yield s.value
        elif isinstance(s, If):
            yield s.cond
            yield from stmt_vals(s.then)
            yield from stmt_vals(s.orelse or [])
        else:
            yield from s.values


def subexprs(v: Val) -> Iterator[Val]:
    """``v`` and every expression under it (pre-order)."""
    stack = [v]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(x.args))


Item = Function | Table | Lookup


def uses(fn: Function) -> list[Item]:
    """The functions, tables and lookups ``fn``'s body refers to, in order of first reference."""
    seen: dict[int, Item] = {}
    for top in stmt_vals(fn.body):
        for x in subexprs(top):
            ref = x.data[0] if x.op == "row" else x.data
            if x.op in ("call", "index", "row", "lookup") and id(ref) not in seen:
                seen[id(ref)] = ref
    return list(seen.values())


def closure(roots: Iterable[Function], extra: Callable[[Function], Iterable[Function]] | None = None,
            substitutes: Mapping[int, Function] | None = None) -> list[Item]:
    """Every function, table and lookup the roots reach, each after what it uses. ``extra(fn)``
    adds dependencies a printer introduces (the software helpers of 64-bit operations);
    ``substitutes`` (by id) are functions a printer prints in place of others of the same name
    and signature (WGSL's exp family: `vyre.lower.crmath.functions.exp_family`)."""
    order: list[Item] = []
    state: dict[int, int] = {}

    def visit(x: Item) -> None:
        if substitutes is not None and isinstance(x, Function):
            x = substitutes.get(id(x), x)
        k = state.get(id(x))
        if k == 2:
            return
        if k == 1:
            raise ValueError(f"{x} calls itself")
        state[id(x)] = 1
        if isinstance(x, Function):
            deps = uses(x)
            if extra is not None:
                deps = list(extra(x)) + deps
            for d in deps:
                visit(d)
        state[id(x)] = 2
        order.append(x)

    for r in roots:
        visit(r)
    return order

