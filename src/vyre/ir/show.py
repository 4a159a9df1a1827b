"""Readable text of a Program (``str(program)``, `vyre inspect`, `vyre demo`,
``kernel.source('reference')``): each kind's text is its display form in the one list of
kinds (`vyre.ir.kinds`); this module only lays it out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import expr as E
from .kinds import BODY, kind_of

if TYPE_CHECKING:
    from .program import Program


def expr_text(e: E.Expr) -> str:
    return kind_of(e).show(e, expr_text)


def body_text(body, indent: int = 1) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    for n in body:
        kind = kind_of(n)
        out.append(f"{pad}{kind.show(n, expr_text)}")
        for f in kind.fields:
            if f.role != BODY:
                continue
            sub = getattr(n, f.name)
            if f.label is not None:
                if not sub:
                    continue
                out.append(f"{pad}{f.label}")
            out += body_text(sub, indent + 1)
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
