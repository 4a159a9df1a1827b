"""Program identities, cached per Program object:

* `fingerprint(program)`: 32-byte blake3 of the canonical wire form. Equal fingerprints mean
  equal outputs for equal inputs on every entry point (the key of pipelines, tuner and
  routing entries).
* `identity(program)`: 32-byte blake3 of the exact wire form, as built. The validation cache
  uses it, because canonicalisation may erase differences that decide validity (a block
  around a grid_sync barrier) even though it never erases one that changes the bytes of a
  valid program.
"""

from __future__ import annotations

import blake3

from .program import Program

_ATTR = "_vyre_fingerprint"
_EXACT = "_vyre_identity"


def fingerprint(program: Program) -> bytes:
    cached = program.__dict__.get(_ATTR)
    if cached is None:
        from .wire import encode

        cached = blake3.blake3(encode(program, canonical=True)).digest()
        program.__dict__[_ATTR] = cached
    return cached


def identity(program: Program) -> bytes:
    cached = program.__dict__.get(_EXACT)
    if cached is None:
        from .wire import encode

        cached = blake3.blake3(encode(program)).digest()
        program.__dict__[_EXACT] = cached
    return cached


def short(fp: bytes) -> str:
    """First 16 hex digits: enough to name a program in logs and cache paths."""
    return fp.hex()[:16]
