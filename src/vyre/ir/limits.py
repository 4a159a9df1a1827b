"""Structural limits of the IR, shared by construction, the validator and the wire decoder.

`MAX_DEPTH` caps the height of every expression and statement tree. It is enforced when a
node is built (and when wire bytes are decoded), so every recursive walk of a Program —
encoding, canonical form, fingerprint, ``==``/``hash``, validation, lowering, printing, the
reference — stays far inside Python's recursion limit: a deep tree is refused with a Fix,
never a RecursionError.
"""

from __future__ import annotations

MAX_DEPTH = 256           # height of any expression/statement tree (leaves are 1)
MAX_STMT_NESTING = 64     # nesting of statement bodies a valid program may use (V012)
MAX_NODES = 100_000       # statements in a valid program (V013)
MAX_BUFFERS = 64          # buffer declarations in a valid program (V013)
MAX_NAME_BYTES = 256      # UTF-8 bytes of any name on the wire


def too_deep(height: int, what: str):
    """The error for a tree over `MAX_DEPTH` (raised by the constructors)."""
    from .errors import VyreError

    return VyreError(f"{what} nests {height} levels deep (the limit is {MAX_DEPTH}).",
                     "bind sub-expressions to locals with Node.let_bind, or split deep control "
                     "flow into sequential statements.")
