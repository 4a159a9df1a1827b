"""Compiled programs on disk, keyed so that a program built in any earlier process is loaded
without validation, lowering or compilation.

The key is the program's exact identity (its wire form as built), the code-affecting config,
the backend and its device fingerprint, and a hash of the source of every module that decides
the generated code (the IR, the lowering and the driver package). Validation and lowering are
deterministic functions of those, so a hit can skip them: the entry was written only after
this very program validated and compiled. An entry is the kernel's metadata (JSON) and the
target binary, in the MAC-verified `DiskCache`; anything unreadable is a miss.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import struct
from pathlib import Path
from typing import Any

import blake3

from vyre.ir.program import Program

from ..pipeline.disk import DiskCache

log = logging.getLogger("vyre.cache")
_engine_log = logging.getLogger("vyre.engine")
FORMAT = 1


@functools.cache
def source_fingerprint(*modules: str) -> bytes:
    """blake3 over the source files of ``modules`` (packages: every .py inside)."""
    h = blake3.blake3()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            h.update(name.encode())
            continue
        root = Path(spec.origin)
        files = sorted(root.parent.rglob("*.py")) if root.name == "__init__.py" else [root]
        for f in files:
            h.update(str(f.relative_to(root.parent)).encode())
            h.update(f.read_bytes())
    return h.digest()


class ArtifactCache:
    """One backend's compiled programs on disk (see the module docstring)."""

    #: entries this process wrote, kept in memory too (a warm-up's programs are dispatched
    #: right after it: no disk read and checksum for them)
    RECENT = 2048

    def __init__(self, backend: str, version: str, device_fingerprint: bytes, codegen: tuple[str, ...]) -> None:
        self.disk = DiskCache(f"{backend}-programs")
        self.prefix = blake3.blake3(
            f"{backend}|{version}|{FORMAT}|".encode() + device_fingerprint
            + source_fingerprint("vyre.ir", "vyre.lower", *codegen)).digest()
        self.recent: dict[bytes, bytes] = {}

    def key(self, identity: bytes, code_key: tuple) -> bytes:
        return self.prefix + identity + repr(code_key).encode()

    def get(self, key: bytes) -> tuple[dict[str, Any], bytes] | None:
        blob = self.recent.get(key)
        if blob is None:
            blob = self.disk.get(key)
        if blob is None:
            return None
        try:
            (n,) = struct.unpack_from("<I", blob)
            meta = json.loads(blob[4:4 + n])
            if not isinstance(meta, dict):
                raise ValueError("metadata is not an object")
            return meta, blob[4 + n:]
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            log.warning("vyre cache: unreadable program entry (%s); rebuilding", exc)
            return None

    def put(self, key: bytes, meta: dict[str, Any], artifact: bytes) -> None:
        head = json.dumps(meta, sort_keys=True).encode()
        blob = struct.pack("<I", len(head)) + head + artifact
        if len(self.recent) >= self.RECENT:
            self.recent.clear()
        self.recent[key] = blob
        self.disk.put(key, blob)


def load_program(art: ArtifactCache, akey: bytes, device: Any, program: Program,
                 config: Any, backend: str) -> tuple[Program, Any] | None:
    """(effective program, kernel) that ``device`` (a `Device`) built for this exact program
    in an earlier process, from ``art`` under ``akey``; None on a miss. No validation,
    lowering or compilation (the entry exists only because they passed). The effective
    program keeps the source body: after compilation only its buffers, workgroup size,
    whether it uses atomics and its bound buffers in binding order matter, and the last two
    are recorded with the kernel (so its dispatches walk no IR either)."""
    hit = art.get(akey)
    if hit is None:
        return None
    meta, binary = hit
    try:
        kernel = device.load(meta, binary)
    except Exception as exc:
        _engine_log.warning("vyre cache: cannot load a cached program for %s (%s); rebuilding", backend, exc)
        return None
    wg = config.workgroup_override or program.workgroup_size
    eff = program if wg == program.workgroup_size else Program(program.buffers, wg, program.body, program.functions)
    eff.__dict__["_vyre_atomics"] = bool(meta.get("atomics", True))
    bound = meta.get("bound")
    if isinstance(bound, list) and sorted(map(str, bound)) == sorted(b.name for b in eff.bound_buffers):
        eff.__dict__["_vyre_bound"] = tuple(bound)   # binding order, recorded with the kernel
    fp = meta.get("fingerprint")
    if isinstance(fp, str) and len(fp) == 64 and "_vyre_fingerprint" not in program.__dict__:
        # recorded with the kernel of this exact program: its canonical form need not be
        # built again (the entry's key is the exact identity, its payload checksummed)
        program.__dict__["_vyre_fingerprint"] = bytes.fromhex(fp)
    return eff, kernel
