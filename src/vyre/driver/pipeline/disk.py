"""On-disk cache for compiled artifacts (kernel binaries), shared by every driver.

Location: ``$VYRE_CACHE_DIR`` or the platform cache dir (platformdirs) + ``/<namespace>``.
Each entry is one file: ``VYRC``, u32 format version, 32-byte blake3 of the key, 32-byte
keyed blake3 (a MAC) of key and payload, u64 payload length, payload. The MAC key is 32
random bytes kept outside the cache directory (`mac_key`), so an entry someone wrote with
valid plain checksums is still refused: a forged kernel binary is never handed to a driver,
which could crash on it. Writes go to a temp file in the same directory and are renamed into
place (atomic). Reads open regular files only, up to a size cap, and verify everything: a
truncated, corrupt, forged or foreign entry is a miss plus a logged warning (and the file is
removed), never a crash or a hang. No pickle: payloads are bytes. A size cap evicts
least-recently-used entries.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import tempfile
import threading
from pathlib import Path

import blake3

from .. import settings
from ..atomic_file import write_atomic

log = logging.getLogger("vyre.cache")

MAGIC = b"VYRC"
FORMAT = 2
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


_key_lock = threading.Lock()
_keys: dict[str, bytes] = {}


def _user_dir(kind: str) -> Path:
    """platformdirs' ``user_config_dir``/``user_cache_dir`` for "vyre". On Linux it is the
    XDG rule, applied here without importing platformdirs (whose import is most of a disk
    cache hit's cost in a fresh process): ``$XDG_CONFIG_HOME`` or ``~/.config`` (``CACHE``,
    ``~/.cache``), then ``vyre``."""
    if sys.platform.startswith("linux") and "ANDROID_DATA" not in os.environ:
        base = os.environ.get(f"XDG_{kind.upper()}_HOME", "")
        if not base.strip():
            base = os.path.expanduser(f"~/.{kind}")
        return Path(base) / "vyre"
    import platformdirs

    find = platformdirs.user_config_dir if kind == "config" else platformdirs.user_cache_dir
    return Path(find("vyre", appauthor=False))


def key_dir() -> Path:
    """Where the MAC key lives: ``$VYRE_KEY_DIR`` or the platform config dir (not the cache)."""
    env = settings.get("VYRE_KEY_DIR")
    if env:
        return Path(env)
    return _user_dir("config")


def mac_key() -> bytes | None:
    """This user's 32-byte cache MAC key, created (mode 0600) on first use; None when it can
    be neither read nor created (the disk cache is then off, with a warning)."""
    folder = key_dir()
    path = folder / "cache.key"
    with _key_lock:
        hit = _keys.get(str(path))
        if hit is not None:
            return hit
        try:
            data = read_capped(path, 64)
            if data is None or len(data) != 32:
                folder.mkdir(parents=True, exist_ok=True)
                fresh = os.urandom(32)
                fd, tmp = tempfile.mkstemp(dir=folder, prefix=".key-")
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(fresh)
                    os.chmod(tmp, 0o600)
                    if data is None:
                        try:
                            os.link(tmp, path)      # first writer wins; others read its key
                        except FileExistsError:
                            pass
                    else:
                        os.replace(tmp, path)       # a damaged key file: replace it
                finally:
                    try:
                        os.unlink(tmp)
                    except FileNotFoundError:
                        pass
                data = read_capped(path, 64)
            if data is None or len(data) != 32:
                raise OSError("the key file is not 32 bytes")
        except OSError as exc:
            log.warning("vyre cache: no MAC key in %s (%s); the disk cache is off", folder, exc)
            return None
        _keys[str(path)] = data
        return data


def cache_root() -> Path:
    """``$VYRE_CACHE_DIR`` or the platform cache dir."""
    env = settings.get("VYRE_CACHE_DIR")
    if env:
        return Path(env)
    return _user_dir("cache")


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
        secret = mac_key()
        if secret is None:
            self.misses += 1
            return None
        try:
            data = read_capped(path, MAX_ENTRY_BYTES)
            if data is None:
                self.misses += 1
                return None
        except OSError as exc:
            log.warning("vyre cache: cannot read %s (%s); treating as a miss", path, exc)
            self.misses += 1
            return None
        payload = self._verify(data, key, secret)
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
    def _mac(secret: bytes, key: bytes, payload: bytes) -> bytes:
        h = blake3.blake3(key=secret)
        h.update(len(key).to_bytes(8, "little") + key)
        h.update(payload)
        return h.digest()

    @staticmethod
    def _verify(data: bytes, key: bytes, secret: bytes) -> bytes | None:
        if len(data) < _HEAD.size:
            return None
        magic, fmt, key_hash, mac, length = _HEAD.unpack_from(data)
        if magic != MAGIC or fmt != FORMAT or len(data) != _HEAD.size + length:
            return None
        payload = data[_HEAD.size:]
        if key_hash != blake3.blake3(key).digest() or mac != DiskCache._mac(secret, key, payload):
            return None
        return payload

    def put(self, key: bytes, payload: bytes) -> None:
        secret = mac_key()
        if secret is None:
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            head = _HEAD.pack(MAGIC, FORMAT, blake3.blake3(key).digest(),
                              self._mac(secret, key, payload), len(payload))
            write_atomic(self._path(key), head + payload)
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
