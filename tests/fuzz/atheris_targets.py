"""Coverage-guided fuzz targets (atheris) for everything that reads untrusted bytes: the wire
decoder, and the files the CLI reads (repro files, certificates, disk-cache entries, tuner and
routing tables). Run one as ``python atheris_targets.py TARGET -max_total_time=N``.

Invariant: a target either accepts the bytes or raises `VyreError` (with a Fix); any other
exception, a crash or a hang is a finding.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["vyre"]):
    from vyre.conform import load_repro, verify_certificate
    from vyre.driver.pipeline import disk as D
    from vyre.driver.routing import Router
    from vyre.driver.tuner import TuningCache
    from vyre.ir import VyreError, wire

SCRATCH = Path(tempfile.mkdtemp(prefix="vyre-fuzz-"))
os.environ.setdefault("VYRE_KEY_DIR", str(SCRATCH / "keys"))
SEED_PROGRAM = None


def _seed() -> bytes:
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program

    gx = Expr.gid_x()
    p = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                        [Node.let_bind("x", Expr.load("a", gx)),
                         Node.if_(Expr.var("x").lt(5), [Node.store("o", gx, Expr.var("x") * 3)])])
    return wire.encode(p)


def wire_decode(data: bytes) -> None:
    try:
        p = wire.decode(data)
    except VyreError:
        return
    wire.encode(p)  # whatever decodes must encode again


def wire_mutated(data: bytes) -> None:
    """Mutations of a valid program, checksum fixed up so the decoder's structure is reached."""
    import struct

    import blake3

    base = bytearray(SEED)
    if len(data) < 2:
        return
    for i in range(0, len(data) - 1, 2):
        pos = wire.HEADER + data[i] % (len(base) - wire.HEADER)
        base[pos] = data[i + 1]
    body = bytes(base[wire.HEADER:])
    blob = base[:4] + struct.pack("<HH", wire.VERSION, 0) + blake3.blake3(body).digest() + body
    wire_decode(bytes(blob))


def repro_file(data: bytes) -> None:
    path = SCRATCH / "repro.json"
    path.write_bytes(data)
    try:
        load_repro(path)
    except VyreError:
        pass


def certificate(data: bytes) -> None:
    try:
        cert = json.loads(data)
    except (ValueError, RecursionError):
        return
    if isinstance(cert, dict):
        ok, why = verify_certificate(cert)
        assert isinstance(ok, bool) and isinstance(why, str)


def cache_entry(data: bytes) -> None:
    cache = D.DiskCache("fuzz", root=SCRATCH)
    path = cache._path(b"key")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    assert cache.get(b"key") is None or isinstance(cache.get(b"key"), bytes)


def tables(data: bytes) -> None:
    path = SCRATCH / "table.json"
    path.write_bytes(data)
    Router(path)._load([])
    cache = TuningCache(b"\0" * 32, root=SCRATCH)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_bytes(data)
    cache._load()


TARGETS = {f.__name__: f for f in (wire_decode, wire_mutated, repro_file, certificate, cache_entry, tables)}
SEED = _seed()
_NAMES = list(TARGETS)


def every(data: bytes) -> None:
    """All targets in one coverage-guided process: the first byte picks the target."""
    if data:
        TARGETS[_NAMES[data[0] % len(_NAMES)]](data[1:])


TARGETS_AND_ALL = {**TARGETS, "all": every}

if __name__ == "__main__":
    atheris.Setup([sys.argv[0], *sys.argv[2:]], TARGETS_AND_ALL[sys.argv[1]])
    atheris.Fuzz()
