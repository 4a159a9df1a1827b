"""Warm kernel calls (issue 24): a call whose arguments have the kinds, dtypes and shapes of an
earlier one runs its kept plan, and is exactly the full call: the same bytes and shapes,
every data-dependent check repeated, and the backend, route and VYRE_BACKEND honoured when
they change. Expected values come from numpy."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import vyre
from vyre.driver import registry
from vyre.kernel import In, KernelError, Out, Scalar, f32, gid, u32


@vyre.kernel
def _scale(a: In[f32], s: Scalar[f32], o: Out[f32]):
    i = gid()
    o[i] = a[i] * s


@vyre.kernel
def _offset(a: In[u32], k: Scalar[u32], o: Out[u32]):
    i = gid()
    o[i] = a[i] + k


def _plans(kernel) -> dict:
    return kernel._build().__dict__.get("_vyre_plans", {})


def test_a_warm_call_gives_the_bytes_and_shapes_of_the_first():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    first = _scale(a, 2.0, backend="reference")
    second = _scale(a, 2.0, backend="reference")
    assert len(_plans(_scale)) >= 1
    want = (a * np.float32(2.0)).tobytes()
    assert first.shape == second.shape == (3, 4) and first.tobytes() == second.tobytes() == want
    second[0, 0] = 99            # each call returns its own arrays
    assert first[0, 0] == 0.0


def test_a_warm_call_reads_the_data_of_this_call():
    a = np.ones(64, dtype=np.uint32)
    assert _offset(a, 1, backend="reference").tolist() == [2] * 64
    a[:] = 7
    assert _offset(a, 3, backend="reference").tolist() == [10] * 64


@pytest.mark.parametrize("bad", [2**32, -1, 1.5, "3"])
def test_a_warm_call_checks_its_scalars_again(bad):
    a = np.zeros(8, dtype=np.uint32)
    _offset(a, 1, backend="reference")
    _offset(a, 1, backend="reference")
    with pytest.raises(KernelError) as err:
        _offset(a, bad, backend="reference")
    assert err.value.code == "K020"


def test_a_call_with_another_dtype_or_length_is_checked_in_full():
    a = np.arange(16, dtype=np.uint32)
    _offset(a, 1, backend="reference")
    with pytest.raises(KernelError, match=r"astype\(np.uint32\)"):
        _offset(a.astype(np.int64), 1, backend="reference")
    b = np.arange(40, dtype=np.uint32)
    assert _offset(b, 5, backend="reference").tolist() == (b + 5).tolist()


def test_a_strided_array_is_copied_on_every_warm_call():
    base = np.arange(64, dtype=np.float32)
    view = base[::2]
    assert _scale(view, 1.0, backend="reference").tolist() == view.tolist()
    base[:] = -1
    assert _scale(view, 1.0, backend="reference").tolist() == [-1.0] * 32


def test_a_backend_shut_down_between_warm_calls_is_acquired_again(monkeypatch):
    monkeypatch.setattr(registry, "_instances", {})   # this test's own instances
    a = np.arange(8, dtype=np.uint32)
    _offset(a, 1, backend="reference")
    old = registry.acquire("reference")
    registry.release("reference")
    assert old.closed
    assert _offset(a, 2, backend="reference").tolist() == (a + 2).tolist()
    assert registry.acquire("reference") is not old


def test_vyre_backend_set_between_warm_calls_is_honoured(monkeypatch, caplog):
    a = np.arange(8, dtype=np.uint32)
    monkeypatch.setenv("VYRE_BACKEND", "reference")
    _offset(a, 1)
    _offset(a, 1)
    monkeypatch.delenv("VYRE_BACKEND")
    with caplog.at_level(logging.DEBUG, logger="vyre.kernel"):
        got = _offset(a, 4)
    assert got.tolist() == (a + 4).tolist()
    ran = [r.getMessage() for r in caplog.records if "ran on" in r.getMessage()]
    assert ran and "ran on reference" not in ran[-1]   # routed again: never the oracle implicitly
