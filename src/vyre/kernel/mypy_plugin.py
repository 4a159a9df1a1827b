"""A mypy plugin for kernel files: N-D and fixed-size buffer annotations type-check.

``In[f32]`` type-checks without it. ``In[f32, :, :]`` and ``Out[u32, 32]`` are not types to
mypy (a slice, an integer), so mypy needs this plugin for them; enable it in the project's
mypy configuration::

    [tool.mypy]
    plugins = ["vyre.kernel.mypy_plugin"]

Each ``In``/``Out``/``InOut`` annotation becomes the buffer type of its element type (what
``In[f32]`` is); the axes after it must be ``:`` or positive integers, as at run time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.types import AnyType, RawExpressionType, Type, TypeOfAny

_BUFFERS = {f"vyre.kernel.types.{n}" for n in ("In", "Out", "InOut")}


def _axis_ok(arg: Type) -> bool:
    """A positive integer, or ``:`` (mypy reads a slice as an expression with no value; so it
    reads other non-type expressions too, which the kernel frontend refuses at run time)."""
    if not isinstance(arg, RawExpressionType):
        return False
    if arg.base_type_name == "builtins.int":
        return isinstance(arg.literal_value, int) and arg.literal_value > 0
    return arg.literal_value is None and arg.base_type_name == "typing.Any"


def _buffer(fullname: str, ctx: AnalyzeTypeContext) -> Type:
    t = ctx.type
    name = fullname.rsplit(".", 1)[-1]
    if not t.args:
        ctx.api.fail(f'"{name}" needs an element type, e.g. {name}[f32]', ctx.context)
        return AnyType(TypeOfAny.from_error)
    for arg in t.args[1:]:
        if not _axis_ok(arg):
            ctx.api.fail(f'{name}[...] axes are ":" or positive integers, e.g. {name}[f32, :, :] or '
                         f"{name}[f32, 16, 16]", ctx.context)
            return AnyType(TypeOfAny.from_error)
    return ctx.api.named_type(fullname, [ctx.api.analyze_type(t.args[0])])


class _KernelPlugin(Plugin):
    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        return functools.partial(_buffer, fullname) if fullname in _BUFFERS else None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point."""
    return _KernelPlugin
