"""vyre.driver.hostbytes: a fresh bytes object filled through its view, independent of
every other, and refused where CPython shares its objects (0 and 1 bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver import hostbytes


@pytest.mark.parametrize("n", [2, 3, 4096, 1 << 20, (1 << 20) + 5])
def test_fresh_bytes_hold_what_was_written_into_their_view(n):
    out, view = hostbytes.fresh(n)
    other, oview = hostbytes.fresh(n)
    assert type(out) is bytes and len(out) == n and view.nbytes == n and view.flags.writeable
    assert view.ctypes.data % 16 == 0
    want = (np.arange(n) * 7 % 251).astype(np.uint8)
    view[:] = want
    oview[:] = 1
    del view, oview
    assert out == want.tobytes() and other == b"\x01" * n
    assert hash(out) == hash(want.tobytes())


@pytest.mark.parametrize("n", [0, 1])
def test_fresh_refuses_the_shared_small_objects(n):
    with pytest.raises(ValueError):
        hostbytes.fresh(n)


def test_the_view_keeps_the_bytes_alive():
    """A view outliving every other reference to its bytes object (a dispatch abandoned while
    the device still holds the view) writes into live storage, not freed memory."""
    import gc

    out, view = hostbytes.fresh(1 << 22)
    first = id(out)
    del out
    gc.collect()
    view[:] = 7                       # freed storage would be unmapped here (1 MiB and up)
    owner = view.base.obj._owner      # view -> memoryview -> ctypes array -> the bytes
    assert view[::4096].tolist() == [7] * 1024 and id(owner) == first
