"""Fresh `bytes` objects that a dispatch fills before anyone else sees them.

`dispatch` returns each output as `bytes`. Building them with ``ndarray.tobytes()`` copies the
output once more into newly faulted pages: 45 ms of a 16M-element PoCL dispatch that ran its
kernel in 11-17 ms. CPython builds a bytes object of unknown contents the same way C extensions
do (``PyBytes_FromStringAndSize(NULL, n)``, then fill it), and `fresh` exposes that: a zero-copy
device (`Device.zero_copy`) writes the output straight into the new object's storage. The view
must be dropped before the bytes object is handed out; until then nothing else holds it, so no
one sees it change (its hash is not computed yet).

A large object's pages are asked for as transparent huge pages (``madvise``, Linux), as numpy
does for its arrays: filling 64 MiB of fresh bytes took 35 ms in 4 KiB page faults and 12 ms
with huge pages (numpy's own array: 12 ms)."""

from __future__ import annotations

import ctypes
import sys

import numpy as np

_new = ctypes.pythonapi.PyBytes_FromStringAndSize
_new.restype = ctypes.py_object
_new.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
_data = ctypes.pythonapi.PyBytes_AsString
_data.restype = ctypes.c_void_p
_data.argtypes = [ctypes.py_object]

HUGE = 1 << 21                   # a transparent huge page (x86-64, arm64 with 4 KiB pages)
_MADV_HUGEPAGE = 14


def _madvise() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_advise = _madvise()


def fresh(nbytes: int) -> tuple[bytes, np.ndarray]:
    """A new bytes object of ``nbytes`` (> 1) bytes, contents undefined, and a writable uint8
    array over its storage (16-byte aligned: whole u32 words)."""
    if nbytes < 2:   # CPython shares the empty and one-byte objects
        raise ValueError("fresh bytes need at least 2 bytes")
    out = _new(None, nbytes)
    addr = _data(out)
    lo, hi = -(-addr // HUGE) * HUGE, (addr + nbytes) // HUGE * HUGE
    if _advise is not None and hi - lo >= 2 * HUGE:   # advice only: its failure changes nothing
        _advise(lo, hi - lo, _MADV_HUGEPAGE)  # type: ignore[operator]
    raw = (ctypes.c_ubyte * nbytes).from_address(addr)
    raw._owner = out   # type: ignore[attr-defined]  # the view keeps the object's storage alive
    return out, np.ctypeslib.as_array(raw)
