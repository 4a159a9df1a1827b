"""The WGSL printer of `vyre.lower.crmath.dsl`.

WGSL has no float64 and no 64-bit integers, and may treat float arithmetic loosely (no NaNs,
infinities or subnormals promised). So this printer keeps every value in integer types: a
float64 or 64-bit integer is a ``vec2<u32>`` (x: low word, y: high word), an f32 is its u32
bits, and each float64, 64-bit or f32 operation is a call of the software helper that
implements it (`vyre.lower.crmath.soft`, printed by this same printer). Those helpers perform
IEEE binary64 operations exactly, so the printed WGSL computes the same doubles as the C
targets and rounds them to the same f32 bits, except the language's ``fma``, printed unfused
(``vyd_mul_add``; `vyre.lower.crmath.dsl.fma` says why the f32 results still agree). A table
is a function of its index and a lookup a function of its key (binary decision trees with the
entries in the code, `table_source`, `lookup_source`); locals are printed as ``v_<name>`` (no
clash with WGSL's reserved words).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from . import soft
from .dsl import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    U32,
    U64,
    Function,
    If,
    Let,
    Lookup,
    Ret,
    Set,
    Stmt,
    Table,
    Tup,
    Ty,
    Val,
    bits64,
    closure,
    stmt_vals,
    subexprs,
)

WT = {F64: "vec2<u32>", U64: "vec2<u32>", I64: "vec2<u32>", F32: "u32", U32: "u32", I32: "i32", BOOL: "bool"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|", "xor": "^",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "land": "&&", "lor": "||"}
_SWAP = {"gt": "lt", "ge": "le"}


def _helper(v: Val) -> tuple[Function, tuple[Val, ...], bool] | None:
    """The software helper implementing ``v`` (function, its arguments, negate the result)."""
    op, a = v.op, v.args
    t = a[0].ty if a else v.ty
    if op in ("lt", "le", "gt", "ge", "eq", "ne") and t in (F64, F32, U64, I64):
        if t in (U64, I64) and op in ("eq", "ne"):
            return None
        fam = {F64: "vyd", F32: "vyf", U64: "vyu", I64: "vyi"}[t]
        name, args, neg = _SWAP.get(op, op), a, False
        if op in _SWAP:
            args = (a[1], a[0])
        if op == "ne":
            name, neg = "eq", True
        return getattr(soft, f"{fam}_{name}"), args, neg
    if t is F64 and op in ("add", "sub", "mul", "div", "sqrt", "neg"):
        return getattr(soft, f"vyd_{op}"), a, False
    if op == "fma":                 # unfused: dsl.fma says why the f32 results agree
        return soft.vyd_mul_add, a, False
    if t in (U64, I64) and op in ("add", "sub", "mul"):
        return getattr(soft, f"vyu_{op}"), a, False
    if t is I64 and op == "neg":
        return soft.vyu_sub, (Val("lit", I64, data=0), a[0]), False
    if t in (U64, I64) and op in ("shl", "shr"):
        fn = soft.vyi_shr if (op == "shr" and t is I64) else getattr(soft, f"vyu_{op}")
        return fn, a, False
    if op == "mulhi":
        return (soft.vyu_mulhi if t is U64 else soft.vyu_mulhi32), a, False
    if op == "clz" and t is U64:
        return soft.vyu_clz, a, False
    if op == "cvt":
        key = (t, v.ty)
        fn = {(F32, F64): soft.vyd_from_f32, (F64, F32): soft.vyd_to_f32, (I32, F64): soft.vyd_from_i32,
              (U32, F64): soft.vyd_from_u32, (U64, F64): soft.vyd_from_u64, (F64, I32): soft.vyd_to_i32,
              (I32, I64): soft.vyi_from_i32}.get(key)
        return (fn, a, False) if fn is not None else None
    return None


def helpers(fn: Function) -> list[Function]:
    """The software helpers ``fn``'s body needs."""
    out: dict[int, Function] = {}
    for top in stmt_vals(fn.body):
        for x in subexprs(top):
            h = _helper(x)
            if h is not None and h[0] is not fn:
                out.setdefault(id(h[0]), h[0])
    return list(out.values())


def _lit(v: Val) -> str:
    t, x = v.ty, v.data
    if t is BOOL:
        return "true" if x else "false"
    if t is U32:
        return f"{x}u"
    if t is I32:
        return f"{x}i" if x != -(1 << 31) else "bitcast<i32>(0x80000000u)"
    if t is F32:
        return f"0x{_bits32(x):08x}u"
    bits = bits64(x) if t is F64 else x & ((1 << 64) - 1)
    return f"vec2<u32>(0x{bits & 0xFFFFFFFF:08x}u, 0x{bits >> 32:08x}u)"


def _bits32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def expr(v: Val) -> str:
    """WGSL text of an expression (fully parenthesised)."""
    op, a = v.op, v.args
    h = _helper(v)
    if h is not None:
        fn, args, neg = h
        texts = [expr(x) for x in args]
        if op in ("shl", "shr") and args[1].ty is I32:   # the helpers take a u32 amount
            texts[1] = f"bitcast<u32>({texts[1]})"
        call = f"{fn.name}({', '.join(texts)})"
        return f"(!{call})" if neg else call
    if op == "lit":
        return _lit(v)
    if op == "ref":
        return f"v_{v.data}"
    if op == "field":
        return f"{expr(a[0])}.v{v.data}"
    if op == "call":
        return f"{v.data.name}({', '.join(expr(x) for x in a)})"
    if op in ("index", "row"):
        i = expr(a[0])
        i = i if a[0].ty is U32 else f"bitcast<u32>({i})"
        if op == "row":
            t, w = v.data
            return f"{t.name}_row{w}({i})"
        return f"{v.data.name}({i})"
    if op == "lookup":
        return f"{v.data.name}({expr(a[0])}, {expr(a[1])})"
    t = a[0].ty if a else v.ty
    if op in ("eq", "ne") and t in (U64, I64):
        return f"{'all' if op == 'eq' else 'any'}({expr(a[0])} {_INFIX[op]} {expr(a[1])})"
    if op in ("shl", "shr"):
        s = a[1]
        amount = f"{s.data}u" if s.op == "lit" else \
            f"({expr(s) if s.ty is U32 else f'bitcast<u32>({expr(s)})'} & 31u)"
        return f"({expr(a[0])} {'<<' if op == 'shl' else '>>'} {amount})"
    if op in _INFIX:
        return f"({expr(a[0])} {_INFIX[op]} {expr(a[1])})"
    if op == "neg":
        if t is F32:
            return f"({expr(a[0])} ^ 0x80000000u)"
        return f"(-{expr(a[0])})"
    if op == "not":
        return f"(~{expr(a[0])})"
    if op == "lnot":
        return f"(!{expr(a[0])})"
    if op == "select":
        return f"select({expr(a[2])}, {expr(a[1])}, {expr(a[0])})"
    if op == "clz":
        return f"countLeadingZeros({expr(a[0])})"
    if op == "bits":
        return expr(a[0])                   # f32 are their bits; 64-bit values are words
    if op == "hi":
        return f"{expr(a[0])}.y"
    if op == "lo":
        return f"{expr(a[0])}.x"
    if op == "pair":
        return f"vec2<u32>({expr(a[1])}, {expr(a[0])})"
    if op == "cvt":
        return _convert(v, t)
    raise ValueError(f"the WGSL printer has no case for {op} on {t}")


def _convert(v: Val, t: Ty) -> str:
    x, d = expr(v.args[0]), v.ty
    if (t, d) in ((U64, I64), (I64, U64)):
        return x
    if t is U32 and d is I32:
        return f"bitcast<i32>({x})"
    if t is I32 and d is U32:
        return f"bitcast<u32>({x})"
    if t is U32 and d is U64:
        return f"vec2<u32>({x}, 0u)"
    if t is U64 and d is U32:
        return f"{x}.x"
    if t is I64 and d is I32:
        return f"bitcast<i32>({x}.x)"
    if t is BOOL:
        return f"select({'0u, 1u' if d is U32 else '0i, 1i'}, {x})"
    raise ValueError(f"the WGSL printer has no conversion {t} -> {d}")


def _type(t: Ty | Tup, fn: Function | None = None) -> str:
    if isinstance(t, Tup):
        assert fn is not None
        return f"{fn.name}_r"
    return WT[t]


def _stmts(stmts: list[Stmt], fn: Function, depth: int) -> list[str]:
    pad = "    " * depth
    out: list[str] = []
    for s in stmts:
        if isinstance(s, Let):
            kw = "var" if s.mutable else "let"
            if isinstance(s.value.ty, Tup):
                out.append(f"{pad}{kw} v_{s.name} = {expr(s.value)};")
            else:
                out.append(f"{pad}{kw} v_{s.name}: {WT[s.value.ty]} = {expr(s.value)};")
        elif isinstance(s, Set):
            out.append(f"{pad}v_{s.name} = {expr(s.value)};")
        elif isinstance(s, If):
            out.append(f"{pad}if ({expr(s.cond)}) {{")
            out.extend(_stmts(s.then, fn, depth + 1))
            if s.orelse:
                out.append(f"{pad}}} else {{")
                out.extend(_stmts(s.orelse, fn, depth + 1))
            out.append(f"{pad}}}")
        elif isinstance(s, Ret):
            if len(s.values) == 1:
                out.append(f"{pad}return {expr(s.values[0])};")
            else:
                out.append(f"{pad}return {fn.name}_r({', '.join(expr(x) for x in s.values)});")
    return out


def function_source(fn: Function) -> str:
    head = ""
    if fn.doc:
        head = "".join(f"// {line.strip()}\n" for line in fn.doc.strip().splitlines())
    if isinstance(fn.result, Tup):
        fields = ", ".join(f"v{k}: {WT[t]}" for k, t in enumerate(fn.result.types))
        head += f"struct {fn.name}_r {{ {fields} }}\n"
    params = ", ".join(f"v_{n}: {WT[t]}" for n, t in fn.params)
    return "\n".join([f"{head}fn {fn.name}({params}) -> {_type(fn.result, fn)} {{",
                      *_stmts(fn.body, fn, 1), "}"])


def _tree(lines: list[str], n: int, leaf, test, depth: int = 1) -> None:
    """A balanced decision tree over ``n`` leaves: ``test(mid)`` is the condition for the
    lower half, ``leaf(k)`` the statement of leaf ``k``."""
    def rec(lo: int, hi: int, d: int) -> None:
        pad = "    " * d
        if hi - lo == 1:
            lines.append(f"{pad}{leaf(lo)}")
            return
        mid = (lo + hi) // 2
        lines.append(f"{pad}if ({test(mid)}) {{")
        rec(lo, mid, d + 1)
        lines.append(f"{pad}}}")
        rec(mid, hi, d)
    rec(0, n, depth)


def table_source(t: Table, indexed: bool, rows: Iterable[int]) -> str:
    """A table as functions of the index (``name(i)``, ``name_row<w>(i)``): binary decision
    trees with the entries as leaves. lavapipe compiles constant arrays indexed at run time in
    time that grows much faster than their size, and runs them slowly; a tree of a few thousand
    leaves compiles in about a second. In-range indices only, as in C."""
    leaves = [_lit(Val("lit", t.ty, data=v)) for v in t.values]
    out = []
    if indexed:
        lines = [f"fn {t.name}(i: u32) -> {WT[t.ty]} {{"]
        _tree(lines, len(leaves), lambda k: f"return {leaves[k]};", lambda mid: f"i < {mid}u")
        out.append("\n".join([*lines, "}"]))
    for w in sorted(set(rows)):
        fields = ", ".join(f"v{k}: {WT[t.ty]}" for k in range(w))
        lines = [f"struct {t.name}_r{w} {{ {fields} }}", f"fn {t.name}_row{w}(i: u32) -> {t.name}_r{w} {{"]
        _tree(lines, len(leaves) // w,
              lambda r, w=w: f"return {t.name}_r{w}({', '.join(leaves[r * w:(r + 1) * w])});",
              lambda mid: f"i < {mid}u")
        out.append("\n".join([*lines, "}"]))
    return "\n".join(out)


def lookup_source(m: Lookup) -> str:
    """The binary search of the sorted keys with the keys in the code: ``name(x, d)`` is the
    value of key x, else d."""
    pairs = m.pairs
    lines = [f"fn {m.name}(x: u32, d: u32) -> u32 {{"]
    if not pairs:
        return "\n".join([*lines, "    return d;", "}"])
    _tree(lines, len(pairs), lambda k: f"return select(d, {pairs[k][1]}u, x == {pairs[k][0]}u);",
          lambda mid: f"x < {pairs[mid][0]}u")
    return "\n".join([*lines, "}"])


def source(roots: Iterable[Function]) -> str:
    """WGSL of the roots and everything they reach, software helpers included (callees first)."""
    parts = ["// Correctly rounded f32 transcendentals (vyre.lower.crmath): float64 in software on u32 words"]
    from .functions import WGSL_SUBSTITUTES

    items = closure(roots, extra=helpers, substitutes=WGSL_SUBSTITUTES)
    indexed: set[int] = set()
    rows: dict[int, set[int]] = {}
    for fn in items:
        if isinstance(fn, Function):
            for top in stmt_vals(fn.body):
                for x in subexprs(top):
                    if x.op == "index":
                        indexed.add(id(x.data))
                    elif x.op == "row":
                        rows.setdefault(id(x.data[0]), set()).add(x.data[1])
    for item in items:
        if isinstance(item, Function):
            parts.append(function_source(item))
        elif isinstance(item, Lookup):
            parts.append(lookup_source(item))
        else:
            parts.append(table_source(item, id(item) in indexed, rows.get(id(item), ())))
    return "\n".join(parts) + "\n"
