"""On-disk cache for compiled artifacts (kernel binaries), shared by every driver.

Location: ``$VYRE_CACHE_DIR`` or the platform cache dir (platformdirs) + ``/<namespace>``.
Each entry is one file: ``VYRC``, u32 format version, 32-byte blake3 of the key, 32-byte
blake3 of the payload, u64 payload length, payload. Writes go to a temp file in the same
directory and are renamed into place (atomic). Reads verify everything: a truncated,
corrupt or foreign entry is a miss plus a logged warning (and the file is removed), never a
crash. No pickle: payloads are bytes. A size cap evicts least-recently-used entries.
"""

from __future__ import annotations

import logging
import os
import struct
import tempfile
import threading
from pathlib import Path

import blake3

log = logging.getLogger("vyre.cache")

MAGIC = b"VYRC"
FORMAT = 1
_HEAD = struct.Struct("<4sI32s32sQ")
DEFAULT_CAP_BYTES = 512 * 1024 * 1024


def cache_root() -> Path:
    env = os.environ.get("VYRE_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("vyre", appauthor=False))


class DiskCache:
    def __init__(self, namespace: str, root: Path | None = None,
                 cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.dir = (root or cache_root()) / namespace
        self.cap_bytes = cap_bytes
        self.hits = self.misses = self.corrupt = 0
        self._lock = threading.Lock()

    def _path(self, key: bytes) -> Path:
        return self.dir / f"{blake3.blake3(key).hexdigest()[:40]}.bin"

    def get(self, key: bytes) -> bytes | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self.misses += 1
            return None
        except OSError as exc:
            log.warning("vyre cache: cannot read %s (%s); treating as a miss", path, exc)
            self.misses += 1
            return None
        payload = self._verify(data, key)
        if payload is None:
            self.corrupt += 1
            self.misses += 1
            log.warning("vyre cache: entry %s is corrupt or foreign; ignored and removed", path)
            try:
                path.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(path)  # recency for LRU eviction
        except OSError:
            pass
        self.hits += 1
        return payload

    @staticmethod
    def _verify(data: bytes, key: bytes) -> bytes | None:
        if len(data) < _HEAD.size:
            return None
        magic, fmt, key_hash, body_hash, length = _HEAD.unpack_from(data)
        if magic != MAGIC or fmt != FORMAT or len(data) != _HEAD.size + length:
            return None
        payload = data[_HEAD.size:]
        if key_hash != blake3.blake3(key).digest() or body_hash != blake3.blake3(payload).digest():
            return None
        return payload

    def put(self, key: bytes, payload: bytes) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            head = _HEAD.pack(MAGIC, FORMAT, blake3.blake3(key).digest(),
                              blake3.blake3(payload).digest(), len(payload))
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-", suffix=".bin")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(head)
                    f.write(payload)
                os.replace(tmp, self._path(key))
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as exc:
            log.warning("vyre cache: cannot write to %s (%s); continuing without it", self.dir, exc)
            return
        self._evict()

    def _evict(self) -> None:
        with self._lock:
            try:
                entries = [(p.stat().st_mtime, p.stat().st_size, p) for p in self.dir.glob("*.bin")]
            except OSError:
                return
            total = sum(s for _, s, _ in entries)
            for _, size, p in sorted(entries):
                if total <= self.cap_bytes:
                    break
                try:
                    p.unlink()
                    total -= size
                except OSError:
                    pass

    def clear(self) -> None:
        for p in self.dir.glob("*.bin"):
            try:
                p.unlink()
            except OSError:
                pass
