"""IR -> IR legalization: a Program using a feature a target lacks becomes an equivalent
Program (the reference's bytes) that uses only what every target has: u32/i32/f32/bool
values, f32 ``+ - *``, comparisons, integer and bit operations, bitcasts.

Each feature is one module with the exact algorithm and its proof sketch in its docstring;
`vyre.lower.legalize.rewrite` applies them. Targets name what they lack (`Feature`) and call
`legalize(program, lacks)`; the result runs on the reference like any Program, which is how
the rewrites are tested (tests/lower/test_legalize.py).
"""

from __future__ import annotations

from .rewrite import Feature, legalize, needs

__all__ = ["Feature", "legalize", "needs"]
