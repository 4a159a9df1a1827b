"""`fingerprint(program)`: 32-byte blake3 of the canonical wire form (cached per Program)."""

from __future__ import annotations

import blake3

from .program import Program

_ATTR = "_vyre_fingerprint"


def fingerprint(program: Program) -> bytes:
    cached = program.__dict__.get(_ATTR)
    if cached is None:
        from .wire import encode

        cached = blake3.blake3(encode(program, canonical=True)).digest()
        program.__dict__[_ATTR] = cached
    return cached


def short(fp: bytes) -> str:
    """First 16 hex digits: enough to name a program in logs and cache paths."""
    return fp.hex()[:16]
