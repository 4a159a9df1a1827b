"""Structural check of a Program object: every field of every declaration, statement and
expression has the type the IR defines, and every literal fits its type.

`structural_faults(program)` walks the tree iteratively and never raises: the validator runs
it first, so a malformed object (a string dtype, a float workgroup size, a literal of the wrong
Python type) is reported as a diagnostic with a Fix instead of a raw TypeError from whatever
walk touched it first.
"""

from __future__ import annotations

from typing import Any

from . import expr as E
from .kinds import ARGS, BITS, BODY, EXPR, INT, KINDS, LIT_TYPE, NUMBER, OPT
from .program import BufferDecl, Function, Program
from .types import BufferAccess, DataType

# field name -> what its value must be, per kind a built Program may hold (the one list of
# kinds, `vyre.ir.kinds`): EXPR, OPT, BODY, ARGS, int, or a Python type; literal types and
# bits are checked together by `literal_fault`
_EXPR, _OPT_EXPR, _BODY, _ARGS = EXPR, OPT, BODY, ARGS
_SPEC: dict[type, dict[str, Any]] = {
    k.cls: {f.name: (f.role if f.role in (EXPR, OPT, BODY, ARGS) else int if f.role == INT else f.type)
            for f in k.fields if f.role not in (LIT_TYPE, BITS, NUMBER)}
    for k in KINDS if k.built}
_FIELDS = {k.cls: tuple(f.name for f in k.fields) for k in KINDS if k.built}
_LITERALS = tuple(k.cls for k in KINDS if k.built and k.roles(BITS))
_CANONICAL = {DataType.F32: E.canonical_f32_bits, DataType.F16: E.canonical_f16_bits,
              DataType.BF16: E.canonical_bf16_bits}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def literal_fault(dtype: Any, bits: Any) -> tuple[str, str] | None:
    """(code, why) when a literal's (dtype, bits) is not a valid IR literal, or None:
    V030 for the wrong Python types, V029 for a value its type cannot hold."""
    if not isinstance(dtype, DataType) or not _is_int(bits):
        return "V030", f"literal ({dtype!r}, {bits!r}) needs a DataType and an int bit pattern"
    if dtype.storage_only:
        return "V029", f"{dtype.value} is a storage-only type: it has no literals"
    top = 1 if dtype is DataType.BOOL else (1 << dtype.bits) - 1
    if not 0 <= bits <= top:
        return "V029", f"{dtype.value} literal bits {bits} are outside 0..{top}"
    canon = _CANONICAL.get(dtype)
    if canon is not None and canon(bits) != bits:
        return "V029", (f"{dtype.value} literal 0x{bits:x} is not canonical (see docs/semantics.md: "
                        "canonical NaN, flushed subnormals)")
    return None


def structural_faults(program: Any) -> list[tuple[str, str, str, str]]:
    """(code, location, message, fix) for each structural fault; empty when well formed."""
    out: list[tuple[str, str, str, str]] = []
    fix = "build it with the vyre.ir constructors (Expr.*, Node.*, BufferDecl.*, Program.wrapped)."
    if not isinstance(program, Program):
        return [("V030", "program", f"expected a Program, got {type(program).__name__}.", fix)]
    buffers = program.buffers
    if not isinstance(buffers, tuple):
        out.append(("V030", "buffers", f"buffers is a {type(buffers).__name__}, not a tuple.", fix))
        buffers = buffers if isinstance(buffers, list) else ()
    for i, b in enumerate(buffers):
        loc = f"buffers[{i}]"
        if not isinstance(b, BufferDecl):
            out.append(("V030", loc, f"a {type(b).__name__} where a BufferDecl belongs.", fix))
            continue
        if not isinstance(b.name, str):
            out.append(("V030", loc, f"buffer name {b.name!r} is not a str.", fix))
        if not isinstance(b.access, BufferAccess):
            out.append(("V030", loc, f"access {b.access!r} is not a BufferAccess.", fix))
        if not isinstance(b.dtype, DataType):
            out.append(("V030", loc, f"dtype {b.dtype!r} is not a DataType.", fix))
        if not _is_int(b.count):
            out.append(("V030", loc, f"count {b.count!r} is not an int.", fix))
        if b.binding is not None and not _is_int(b.binding):
            out.append(("V030", loc, f"binding {b.binding!r} is not an int.", fix))
    wg = program.workgroup_size
    if not isinstance(wg, tuple) or len(wg) != 3 or not all(_is_int(v) for v in wg):
        out.append(("V030", "workgroup_size", f"workgroup size {wg!r} is not three ints.",
                    "pass an int or three ints to Program.wrapped."))
    stack: list[tuple[Any, str, bool]] = []
    functions = program.functions
    if not isinstance(functions, tuple):
        out.append(("V030", "functions", f"functions is a {type(functions).__name__}, not a tuple.", fix))
        functions = functions if isinstance(functions, list) else ()
    for i, f in enumerate(functions):
        loc = f"functions[{i}]"
        if not isinstance(f, Function):
            out.append(("V030", loc, f"a {type(f).__name__} where a Function belongs.", fix))
            continue
        if not isinstance(f.name, str):
            out.append(("V030", loc, f"function name {f.name!r} is not a str.", fix))
        if not isinstance(f.params, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], DataType)
                for p in f.params):
            out.append(("V030", f"{loc}.params", "params must be a tuple of (name, DataType) pairs.", fix))
        if not isinstance(f.body, tuple):
            out.append(("V030", f"{loc}.body", f"a {type(f.body).__name__} where a statement tuple belongs.", fix))
        else:
            stack.extend((n, f"{loc}.body[{j}]", False) for j, n in enumerate(f.body))
        if f.result is not None:
            stack.append((f.result, f"{loc}.result", True))
    if not isinstance(program.body, tuple):
        out.append(("V030", "body", f"body is a {type(program.body).__name__}, not a tuple.", fix))
        if not isinstance(program.body, list):
            return out
    stack.extend((n, f"body[{i}]", False) for i, n in enumerate(program.body))
    while stack and len(out) < 64:
        obj, loc, is_expr = stack.pop()
        spec = _SPEC.get(type(obj))
        want = "expression" if is_expr else "statement"
        if spec is None or isinstance(obj, E.Expr) != is_expr:
            out.append(("V030", loc, f"a {type(obj).__name__} where an {want} belongs.", fix))
            continue
        for name in _FIELDS[type(obj)]:
            kind = spec.get(name)
            v = getattr(obj, name)
            where = f"{loc}.{name}"
            if kind == _EXPR or (kind == _OPT_EXPR and v is not None):
                stack.append((v, where, True))
            elif kind == _ARGS:
                if not isinstance(v, tuple):
                    out.append(("V030", where, f"a {type(v).__name__} where an argument tuple belongs.", fix))
                else:
                    stack.extend((a, f"{where}[{j}]", True) for j, a in enumerate(v))
            elif kind == _BODY:
                if not isinstance(v, tuple):
                    out.append(("V030", where, f"a {type(v).__name__} where a statement tuple belongs.", fix))
                if isinstance(v, tuple | list):
                    stack.extend((n, f"{where}[{j}]", False) for j, n in enumerate(v))
            elif kind is int:
                if not _is_int(v):
                    out.append(("V030", where, f"{v!r} is not an int.", fix))
            elif isinstance(kind, type) and not isinstance(v, kind):
                out.append(("V030", where, f"{v!r} is not a {kind.__name__}.", fix))
        if isinstance(obj, _LITERALS):
            fault = literal_fault(obj.dtype, obj.bits)
            if fault:
                out.append((fault[0], loc, fault[1] + ".", "build literals with Expr.u32/i32/f32/bool_, "
                            "which range-check and canonicalise."))
    return out
