"""What every source printer of `vyre.lower` shares, whatever the target language: indented
lines, the scope of locals, and the names buffers take in generated code (``b_`` bound,
``w_`` workgroup, ``l_`` per-invocation)."""

from __future__ import annotations

from vyre.ir.program import Program
from vyre.ir.types import DataType


class Printer:
    program: Program
    lines: list[str]
    indent: int
    scope: list[dict[str, DataType]]

    def out(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def open(self, head: str) -> None:
        self.out(head + " {")
        self.indent += 1

    def close(self) -> None:
        self.indent -= 1
        self.out("}")

    def lookup(self, name: str) -> DataType:
        for frame in reversed(self.scope):
            if name in frame:
                return frame[name]
        raise KeyError(name)

    def visible(self) -> dict[str, DataType]:
        return {k: v for f in self.scope for k, v in f.items()}

    def ptr(self, buffer: str) -> str:
        decl = self.program.buffer(buffer)
        if decl.is_workgroup:
            return f"w_{buffer}"
        return f"l_{buffer}" if decl.is_local else f"b_{buffer}"
