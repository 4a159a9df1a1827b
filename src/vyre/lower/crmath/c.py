"""The C printer of `vyre.lower.crmath.dsl`: CUDA C, OpenCL C (with fp64) and host C.

Every operation is C's own on native ``double``, ``float`` and 64-bit integers, printed as
one expression per statement of the language, so the doubles are exactly those of the
algorithm as written (the targets forbid contraction: CUDA ``--fmad=false``, OpenCL
``FP_CONTRACT OFF``, host gcc ``-ffp-contract=off``). Shift amounts that are not literals are
masked to the width (the language's rule; in range they are unchanged). The target's
header provides ``uint``, ``vy_u64``/``vy_i64``, ``VY_FN``, ``VY_F2U``/``VY_U2F``, ``VY_CLZ``,
``VY_CLZ64`` and ``VY_UMULHI64``; `COMMON` adds the float64 bit casts, the table qualifier and
``VYM_COLD`` (an out-of-line function: a `Function` with ``cold``), ``VYM_D2F`` (float64 ->
f32, round to nearest even) and ``VYM_F2D`` (f32 -> float64): IEEE's conversions; on CUDA
inline PTX without the flush ``--ftz=true`` would add (every conversion the functions make is
of 0, a normal f32, or a double of at least 2^-126 in magnitude, where the two agree).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from contextvars import ContextVar

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
)

CT = {F64: "double", F32: "float", U64: "vy_u64", I64: "vy_i64", U32: "uint", I32: "int", BOOL: "bool"}

COMMON = r"""
#if defined(__OPENCL_VERSION__)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define VYM_TABLE __constant
#define VYM_COLD static __attribute__((noinline))
#define VYM_D2F(x) ((float)(x))
#define VYM_F2D(x) ((double)(x))
#define VYM_RCP(x) (1.0 / (x))
#define VYM_K(i, x) (x)
#define VYM_L2D(x) as_double((vy_u64)(x))
#define VYM_D2L(x) as_ulong(x)
#define VYM_PAIR(h, l) as_double((vy_u64)(h) << 32 | (vy_u64)(l))
#define VYM_IDX(t, i) ((t)[i])
#define VYM_SH(t, i) VYM_IDX(t, i)
#define VYM_FABS(x) fabs(x)
#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define VYM_TABLE static __device__ const
#define VYM_COLD static __device__ __noinline__
// float64 <-> f32 as IEEE's conversions, without the flush --ftz=true adds (an operand flush
// before cvt.f64.f32, a fix-up after cvt.rn.f32.f64): the functions convert no subnormal f32
// and no double below 2^-126 but zero, where the two agree
static __device__ __forceinline__ float vym_d2f(double x) { float r; asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x)); return r; }
static __device__ __forceinline__ double vym_f2d(float x) { double r; asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x)); return r; }
// 1/x within 2^-22 (MUFU.RCP64H): a seed `vym_rcp` refines, where 1.0 / x is a division routine
static __device__ __forceinline__ double vym_rcp_approx(double x) { double r; asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(x)); return r; }
#define VYM_D2F(x) vym_d2f(x)
#define VYM_F2D(x) vym_f2d(x)
#define VYM_RCP(x) vym_rcp_approx(x)
#define VYM_K(i, x) vym_k[i]
#define VYM_L2D(x) __longlong_as_double((long long)(x))
#define VYM_D2L(x) ((vy_u64)__double_as_longlong(x))
// a double of two words as one register pair (no move of the low word into place)
#define VYM_PAIR(h, l) __hiloint2double((int)(h), (int)(l))
// t[i] for an index below 2^32: the address as one 32x32->64 multiply-add (mad.wide.u32:
// LEA + LEA.HI.X where C's sign-extended index took a shift, a mask and a 64-bit add), loaded
// through the read-only cache
template <typename T> static __device__ __forceinline__ T vym_idx(const T* t, uint i) {
    const T* a; asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(a) : "r"(i), "n"((int)sizeof(T)), "l"(t)); return __ldg(a); }
#define VYM_IDX(t, i) vym_idx(t, (uint)(i))
// a table read once per evaluation: from the block's shared copy where the kernel made one
// (VYM_SHARED_TABLES: vyre.drivers.cuda.codegen, kernels that evaluate it in a loop)
#if defined(VYM_SHARED_TABLES)
#define VYM_SH(t, i) t##_s[i]
#else
#define VYM_SH(t, i) VYM_IDX(t, i)
#endif
#define VYM_FABS(x) fabsf(x)
#else   /* a host C target */
#define VYM_TABLE static const
#define VYM_COLD static __attribute__((noinline))
#define VYM_D2F(x) ((float)(x))
#define VYM_F2D(x) ((double)(x))
#define VYM_RCP(x) (1.0 / (x))
#define VYM_K(i, x) (x)
VY_FN double vym_l2d(vy_u64 u) { double d; __builtin_memcpy(&d, &u, 8); return d; }
VY_FN vy_u64 vym_d2l(double d) { vy_u64 u; __builtin_memcpy(&u, &d, 8); return u; }
#define VYM_L2D(x) vym_l2d((vy_u64)(x))
#define VYM_D2L(x) vym_d2l(x)
#define VYM_PAIR(h, l) vym_l2d((vy_u64)(h) << 32 | (vy_u64)(l))
#define VYM_IDX(t, i) ((t)[i])
#define VYM_SH(t, i) VYM_IDX(t, i)
#define VYM_FABS(x) __builtin_fabsf(x)
#endif
// Correctly rounded f32 transcendentals (vyre.lower.crmath), printed from one algorithm per
// function; doubles are computed with basic IEEE operations only, so every target gets the same.
"""

# names a local must not take in C, OpenCL C or CUDA C++ (printed with a trailing underscore)
_RESERVED = frozenset(["auto", "bool", "break", "case", "char", "const", "constant", "continue", "default", "do", "double", "else", "enum", "extern", "false", "float", "for", "global", "goto", "half", "if", "inline", "int", "kernel", "local", "long", "private", "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "true", "typedef", "uint", "ulong", "ushort", "uchar", "union", "unsigned", "void", "volatile", "while", "class", "new", "delete", "this", "template", "typename", "namespace", "operator", "private", "public", "protected", "sqrt", "exp", "log", "sin", "cos", "tan", "pow", "floor", "ceil", "trunc", "round", "min", "max", "abs", "select"])


def name(n: str) -> str:
    """A local's C name."""
    return f"{n}_" if n in _RESERVED else n


# C operator precedence (higher binds tighter)
_BIN = {"mul": ("*", 13), "div": ("/", 13), "add": ("+", 12), "sub": ("-", 12),
        "shl": ("<<", 11), "shr": (">>", 11), "lt": ("<", 10), "le": ("<=", 10), "gt": (">", 10),
        "ge": (">=", 10), "eq": ("==", 9), "ne": ("!=", 9), "and": ("&", 8), "xor": ("^", 7),
        "or": ("|", 6), "land": ("&&", 5), "lor": ("||", 4)}
_BITWISE = ("and", "or", "xor", "shl", "shr")
_UNARY, _PRIMARY = 15, 16


def c_type(t: Ty | Tup, fn: Function | None = None) -> str:
    if isinstance(t, Tup):
        assert fn is not None
        return f"{fn.name}_r"
    return CT[t]


def hexfloat(x: float) -> str:
    """An exact C hex literal of a double, trailing zeros trimmed (``0x1.8p+52``)."""
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    text = float(x).hex()
    mant, exp = text.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}"


# functions of the language the C family prints as its own operation (computing the same
# value on every argument the functions pass them), and does not define
NATIVE = {"vym_plain_f32": "VYM_D2F", "vym_rcp_seed": "VYM_RCP", "vym_fabs": "VYM_FABS"}

# the float64 constants of the source being printed: value bits -> (index in ``vym_k``, value)
_POOL: ContextVar[dict[int, tuple[int, float]] | None] = ContextVar("vym_pool", default=None)


def literal(v: Val) -> tuple[str, int]:
    """A literal's C text and precedence. A float64 whose low word is not zero (one that no
    instruction takes as an immediate) is ``VYM_K(i, literal)``: on CUDA entry ``i`` of the
    ``__constant__`` array ``vym_k`` (an operand from the constant bank, loaded once into a
    uniform register, where a literal costs two register moves at every use: 10 of the 65
    instructions of exp's loop body on sm_90), elsewhere the literal itself."""
    t, x = v.ty, v.data
    if t is BOOL:
        return ("true" if x else "false"), _PRIMARY
    pool = _POOL.get()
    if t is F64 and pool is not None and bits64(x) & 0xFFFFFFFF:
        i, _ = pool.setdefault(bits64(x), (len(pool), x))
        return f"VYM_K({i}, {hexfloat(x)})", _PRIMARY
    if t is F64 or t is F32:
        text = hexfloat(x) + ("f" if t is F32 else "")
        return text, (_UNARY if text.startswith("-") else _PRIMARY)
    if t is U32:
        return (f"{x}u" if x < 4096 else f"0x{x:X}u"), _PRIMARY
    if t is I32:
        if x == -(1 << 31):
            return "(int)0x80000000u", _UNARY
        return str(x), (_UNARY if x < 0 else _PRIMARY)
    if t is U64:
        return f"((vy_u64)0x{x:X}ull)", _PRIMARY
    return f"((vy_i64)0x{x & ((1 << 64) - 1):X}ull)", _PRIMARY


def expr(v: Val) -> tuple[str, int]:
    """C text of an expression and its precedence."""
    op, a = v.op, v.args
    if op == "lit":
        return literal(v)
    if op == "ref":
        return name(v.data), _PRIMARY
    if op == "field":
        if a[0].ty.row:
            return f"{wrap(a[0], _PRIMARY)}[{v.data}]", _PRIMARY
        return f"{wrap(a[0], _PRIMARY)}.v{v.data}", _PRIMARY
    if op == "call":
        return f"{NATIVE.get(v.data.name, v.data.name)}({', '.join(expr(x)[0] for x in a)})", _PRIMARY
    if op == "index":
        return f"{'VYM_SH' if v.data.shared else 'VYM_IDX'}({v.data.name}, {expr(a[0])[0]})", _PRIMARY
    if op == "lookup":
        return f"{v.data.name}({expr(a[0])[0]}, {expr(a[1])[0]})", _PRIMARY
    if op in _BIN:
        sym, p = _BIN[op]
        left, right = a
        if op in _BITWISE:   # operands of bit operations parenthesised unless simple
            ls = wrap(left, p if left.op == op and op not in ("shl", "shr") else _UNARY)
            rs = wrap(right, _UNARY)
        else:
            ls, rs = wrap(left, p), wrap(right, p + 1)
        if op in ("shl", "shr") and right.op != "lit":
            rs = f"({wrap(right, _UNARY)} & {v.ty.width - 1})"
        return f"{ls} {sym} {rs}", p
    if op == "neg":
        return f"-{wrap(a[0], _UNARY + 1)}", _UNARY
    if op == "not":
        return f"~{wrap(a[0], _UNARY)}", _UNARY
    if op == "lnot":
        return f"!{wrap(a[0], _UNARY)}", _UNARY
    if op == "sqrt":
        return f"sqrt({expr(a[0])[0]})", _PRIMARY
    if op == "fma":
        return f"fma({', '.join(expr(x)[0] for x in a)})", _PRIMARY
    if op == "select":
        return f"{wrap(a[0], 4)} ? {_arm(a[1], 4)} : {_arm(a[2], 3)}", 3
    if op == "cvt":
        if v.ty is F32:
            return f"VYM_D2F({expr(a[0])[0]})", _PRIMARY
        if v.ty is F64 and a[0].ty is F32:
            return f"VYM_F2D({expr(a[0])[0]})", _PRIMARY
        return f"({CT[v.ty]}){wrap(a[0], _UNARY)}", _UNARY
    if op == "bits":
        fn = {F64: "VYM_L2D", U64: "VYM_D2L", F32: "VY_U2F", U32: "VY_F2U"}[v.ty]
        return f"{fn}({expr(a[0])[0]})", _PRIMARY
    if op in ("hi", "lo"):
        w = f"VYM_D2L({expr(a[0])[0]})" if a[0].ty is F64 else wrap(a[0], _UNARY)
        return (f"(uint)({w} >> 32)" if op == "hi" else f"(uint){w}"), _UNARY
    if op == "pair":
        if v.ty is F64:
            return f"VYM_PAIR({expr(a[0])[0]}, {expr(a[1])[0]})", _PRIMARY
        bits = f"(vy_u64){wrap(a[0], _UNARY)} << 32 | (vy_u64){wrap(a[1], _UNARY)}"
        return (f"({bits})", _PRIMARY) if v.ty is U64 else (f"(vy_i64)({bits})", _UNARY)
    if op == "mulhi":
        if v.ty is U64:
            return f"VY_UMULHI64({expr(a[0])[0]}, {expr(a[1])[0]})", _PRIMARY
        return f"(uint)((vy_u64){wrap(a[0], _UNARY)} * (vy_u64){wrap(a[1], _UNARY)} >> 32)", _UNARY
    if op == "clz":
        return f"(uint){'VY_CLZ64' if a[0].ty is U64 else 'VY_CLZ'}({expr(a[0])[0]})", _UNARY
    raise ValueError(f"the C printer has no case for {op}")


def _arm(v: Val, prec: int) -> str:
    """An arm of a select: a float64 literal stays a literal (from ``vym_k`` sm_90 loads both
    halves of each arm under a predicate: 18 constant loads in sin's polynomial, which ran
    35% slower than with immediates)."""
    if v.op == "lit" and v.ty is F64:
        text = hexfloat(v.data)
        return f"({text})" if text.startswith("-") else text
    return wrap(v, prec)


def wrap(v: Val, prec: int) -> str:
    """``v``'s text, parenthesised unless it binds at least as tightly as ``prec``."""
    text, p = expr(v)
    return text if p >= prec else f"({text})"


def _stmts(stmts: list[Stmt], fn: Function, types: dict[str, Ty | Tup], depth: int) -> list[str]:
    pad = "    " * depth
    out: list[str] = []
    for s in stmts:
        if isinstance(s, Let) and s.value.op == "row":   # a local array of the row's entries
            t, w = s.value.data
            i = wrap(s.value.args[0], 13)
            vals = ", ".join(f"{t.name}[{i} * {w}{f' + {k}' if k else ''}]" for k in range(w))
            out.append(f"{pad}{CT[t.ty]} {name(s.name)}[{w}] = {{{vals}}};")
        elif isinstance(s, Let):
            types[s.name] = s.value.ty
            callee = s.value.data if isinstance(s.value.ty, Tup) else None
            out.append(f"{pad}{c_type(s.value.ty, callee)} {name(s.name)} = {expr(s.value)[0]};")
        elif isinstance(s, Set):
            out.append(f"{pad}{name(s.name)} = {expr(s.value)[0]};")
        elif isinstance(s, If):
            out.append(f"{pad}if ({expr(s.cond)[0]}) {{")
            out.extend(_stmts(s.then, fn, types, depth + 1))
            if s.orelse:
                out.append(f"{pad}}} else {{")
                out.extend(_stmts(s.orelse, fn, types, depth + 1))
            out.append(f"{pad}}}")
        elif isinstance(s, Ret):
            if len(s.values) == 1:
                out.append(f"{pad}return {expr(s.values[0])[0]};")
            else:
                vals = ", ".join(expr(x)[0] for x in s.values)
                out.append(f"{pad}{{ {fn.name}_r vy_r = {{{vals}}}; return vy_r; }}")
    return out


def function_source(fn: Function) -> str:
    """One function (with its result struct when it has several results)."""
    head = ""
    if fn.doc:
        head = "".join(f"// {line.strip()}\n" for line in fn.doc.strip().splitlines())
    if isinstance(fn.result, Tup):
        fields = " ".join(f"{CT[t]} v{k};" for k, t in enumerate(fn.result.types))
        head += f"typedef struct {{ {fields} }} {fn.name}_r;\n"
    params = ", ".join(f"{CT[t]} {name(n)}" for n, t in fn.params)
    lines = [f"{head}{'VYM_COLD' if fn.cold else 'VY_FN'} {c_type(fn.result, fn)} {fn.name}({params}) {{",
             *_stmts(fn.body, fn, dict(fn.params), 1), "}"]
    return "\n".join(lines)


def table_source(t: Table) -> str:
    """The table; a `Table.shared` one with its shared-memory copy's declaration (CUDA, where
    the kernel makes one: `VYM_SH`)."""
    if t.ty is F64:
        vals = ",".join(hexfloat(v) for v in t.values)
    elif t.ty is U32:
        vals = ",".join(f"0x{v:08x}u" for v in t.values)
    else:
        vals = ",".join(literal(Val("lit", t.ty, data=v))[0] for v in t.values)
    out = f"VYM_TABLE {CT[t.ty]} {t.name}[{len(t.values)}] = {{{vals}}};"
    if t.shared:
        out += f"\n#if defined(VYM_SHARED_TABLES)\n__shared__ {CT[t.ty]} {t.name}_s[{len(t.values)}];\n#endif"
    return out


def shared_tables(roots: Iterable[Function]) -> list[Table]:
    """The `Table.shared` tables the roots reach (what a kernel that defines
    VYM_SHARED_TABLES copies into shared memory first)."""
    return [t for t in closure(roots) if isinstance(t, Table) and t.shared]


def lookup_source(m: Lookup) -> str:
    """The key and value tables and the loop-free binary search of the sorted keys."""
    keys = ",".join(f"0x{k:08x}u" for k, _ in m.pairs)
    vals = ",".join(f"0x{v:08x}u" for _, v in m.pairs)
    n = len(m.pairs)
    if n == 0:
        return f"VY_FN uint {m.name}(uint x, uint d) {{ return d; }}"
    steps = "".join(f"    t = a + {1 << k} < {n - 1} ? a + {1 << k} : {n - 1}; a = {m.name}_k[t] <= x ? t : a;\n"
                    for k in reversed(range(n.bit_length())))
    return (f"VYM_TABLE uint {m.name}_k[{n}] = {{{keys}}};\n"
            f"VYM_TABLE uint {m.name}_v[{n}] = {{{vals}}};\n"
            f"VY_FN uint {m.name}(uint x, uint d) {{   // the value of key x, else d\n"
            f"    int a = 0, t;\n{steps}    return {m.name}_k[a] == x ? {m.name}_v[a] : d;\n}}")


def source(roots: Iterable[Function], common: bool = True) -> str:
    """C source of the roots and everything they reach (callees first), after `COMMON` and
    (CUDA) the ``vym_k`` constants they use (`literal`)."""
    pool: dict[int, tuple[int, float]] = {}
    token = _POOL.set(pool)
    try:
        parts = []
        for item in closure(roots):
            if isinstance(item, Function):
                if item.name not in NATIVE:
                    parts.append(function_source(item))
            elif isinstance(item, Lookup):
                parts.append(lookup_source(item))
            else:
                parts.append(table_source(item))
    finally:
        _POOL.reset(token)
    head = [COMMON] if common else []
    if pool:
        vals = ",".join(hexfloat(x) for _, x in pool.values())
        head.append("#if defined(__CUDACC__) || defined(__CUDACC_RTC__)\n"
                    f"__constant__ double vym_k[{len(pool)}] = {{{vals}}};\n#endif")
    return "\n".join(head + parts) + "\n"
