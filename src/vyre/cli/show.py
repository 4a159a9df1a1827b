"""Readable text of a Program (for `vyre inspect` and `vyre demo`)."""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import Program


def expr_text(e: E.Expr) -> str:
    if isinstance(e, E.Lit):
        v = e.value
        return f"{v!r}{e.dtype.value}" if e.dtype.value != "bool" else str(v).lower()
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.Load):
        return f"{e.buffer}[{expr_text(e.index)}]"
    if isinstance(e, E.BufLen):
        return f"len({e.buffer})"
    if isinstance(e, E.Id):
        return f"{e.kind.value}.{'xyz'[e.axis]}"
    if isinstance(e, E.Bin):
        return f"{e.op.value}({expr_text(e.left)}, {expr_text(e.right)})"
    if isinstance(e, E.Un):
        return f"{e.op.value}({expr_text(e.operand)})"
    if isinstance(e, E.Select):
        return f"select({expr_text(e.cond)}, {expr_text(e.if_true)}, {expr_text(e.if_false)})"
    if isinstance(e, E.Cast):
        return f"{e.dtype.value}({expr_text(e.value)})"
    if isinstance(e, E.Bitcast):
        return f"bitcast<{e.dtype.value}>({expr_text(e.value)})"
    if isinstance(e, E.Fma):
        return f"fma({expr_text(e.a)}, {expr_text(e.b)}, {expr_text(e.c)})"
    if isinstance(e, E.Atomic):
        extra = f", expected={expr_text(e.expected)}" if e.expected is not None else ""
        return f"atomic_{e.op.value}({e.buffer}[{expr_text(e.index)}], {expr_text(e.value)}{extra})"
    if isinstance(e, E.Call):
        return f"{e.function}({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, E.Spec):
        return f"spec {e.name}: {e.dtype.value}"
    return repr(e)


def body_text(body, indent: int = 1) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    for n in body:
        if isinstance(n, N.Let):
            out.append(f"{pad}let {n.name} = {expr_text(n.value)}")
        elif isinstance(n, N.Assign):
            out.append(f"{pad}{n.name} = {expr_text(n.value)}")
        elif isinstance(n, N.Store):
            out.append(f"{pad}{n.buffer}[{expr_text(n.index)}] = {expr_text(n.value)}")
        elif isinstance(n, N.If):
            out.append(f"{pad}if {expr_text(n.cond)}:")
            out += body_text(n.then, indent + 1)
            if n.otherwise:
                out.append(f"{pad}else:")
                out += body_text(n.otherwise, indent + 1)
        elif isinstance(n, N.Loop):
            out.append(f"{pad}for {n.var} in [{expr_text(n.from_)}, {expr_text(n.to)}):")
            out += body_text(n.body, indent + 1)
        elif isinstance(n, N.Block | N.Region):
            out.append(f"{pad}{'region ' + n.name if isinstance(n, N.Region) else 'block'}:")
            out += body_text(n.body, indent + 1)
        elif isinstance(n, N.Return):
            out.append(f"{pad}return")
        elif isinstance(n, N.Barrier):
            out.append(f"{pad}barrier({n.ordering.value})")
        elif isinstance(n, N.Eval):
            out.append(f"{pad}{expr_text(n.value)}")
        elif isinstance(n, N.While):
            out.append(f"{pad}while {expr_text(n.cond)} (at most {n.max_iterations}):")
            out += body_text(n.body, indent + 1)
        elif isinstance(n, N.Break | N.Continue):
            out.append(f"{pad}{'break' if isinstance(n, N.Break) else 'continue'}")
        elif isinstance(n, N.IndirectDispatch):
            out.append(f"{pad}indirect_dispatch(grid = {n.buffer}[{n.offset}:{n.offset + 3}])")
    return out


def program_text(p: Program) -> str:
    lines = [f"program workgroup_size={p.workgroup_size}"]
    for b in p.buffers:
        where = f"binding {b.binding}" if b.binding is not None else b.access.value
        lines.append(f"  buffer {b.name}: {b.access.value} {b.dtype.value}[{b.count or '*'}] ({where})")
    for f in p.functions:
        params = ", ".join(f"{n}: {t.value}" for n, t in f.params)
        lines.append(f"  function {f.name}({params}):")
        lines += body_text(f.body, 2)
        if f.result is not None:
            lines.append(f"    result {expr_text(f.result)}")
    lines.append("  body:")
    lines += body_text(p.body, 2)
    return "\n".join(lines)
