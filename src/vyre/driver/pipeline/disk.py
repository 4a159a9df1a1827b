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


MAX_ENTRY_BYTES = 256 * 1024 * 1024   # no kernel binary is this large: a bigger file is not ours
MAX_SMALL_FILE_BYTES = 16 * 1024 * 1024


def read_capped(path: Path, cap: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of at most ``cap`` bytes; None if it is
    missing. Raises OSError (a miss for callers) for anything else: a FIFO, a device, a
    directory or a file over the cap is never opened for reading."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a regular file")
    if st.st_size > cap:
        raise OSError(f"{path} is {st.st_size} bytes (over the {cap}-byte cap)")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
            raise OSError(f"{path} is not a regular file")
        chunks, left = [], cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise OSError(f"{path} grew over the {cap}-byte cap while being read")
    return data


def read_small_file(path: Path, what: str) -> str | None:
    """A small text file (tuner and routing tables), or None when missing or unreadable
    (logged): never a hang on a FIFO, never a huge read."""
    try:
        data = read_capped(path, MAX_SMALL_FILE_BYTES)
    except OSError as exc:
        log.warning("vyre: %s %s unreadable (%s); ignoring it", what, path, exc)
        return None
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("vyre: %s %s is not UTF-8; ignoring it", what, path)
        return None


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
            data = read_capped(path, MAX_ENTRY_BYTES)
            if data is None:
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
