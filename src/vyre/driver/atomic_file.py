"""Writing a file so that readers see the old or the new bytes, never a mix: `write_atomic`.

The bytes go to a uniquely named temporary file in the target's directory (`tempfile.mkstemp`,
so two processes never share one), which then replaces the target in one `os.replace`; the
temporary file is removed on any failure. The tuner's and router's JSON files and the disk
cache's entries are written through it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path | str, data: bytes | str, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (``mode``: the file's permissions). Raises
    `OSError` as the underlying calls do (a full disk, a read-only directory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
