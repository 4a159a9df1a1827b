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

from ..pipeline.disk import DiskCache

log = logging.getLogger("vyre.cache")
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
