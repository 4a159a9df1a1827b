"""The BackendError catalogue is frozen; every error's text ends in a Fix."""

from __future__ import annotations

from vyre.driver import CATALOGUE, BackendError
from vyre.driver import errors as E
from vyre.ir import VyreError


def test_code_catalogue_is_frozen():
    assert {c: cls.kind for c, cls in CATALOGUE.items()} == {
        1001: "DeviceOutOfMemory", 1002: "UnsupportedFeature", 1003: "PoisonedLock",
        1004: "KernelCompileFailed", 1005: "DispatchFailed", 1006: "InvalidProgram",
        1007: "CooperativeResidencyExceeded", 1008: "DeviceLost", 1999: "Other"}


def test_every_error_ends_in_fix_and_is_a_vyre_error():
    samples = [
        E.DeviceOutOfMemory(1 << 30, 1 << 20, backend="x"), E.UnsupportedFeature("f16", "x"),
        E.PoisonedLock("lock poisoned.", "restart.", backend="x"),
        E.KernelCompileFailed("bad.", "report it.", log="log"), E.DispatchFailed("failed.", "retry."),
        E.InvalidProgram("invalid.", "fix it."), E.CooperativeResidencyExceeded("too big.", "shrink."),
        E.DeviceLost("lost.", "recover."), E.Other("other.", "do this."),
        E.BackendUnavailable("x", "missing.", "install it."),
    ]
    for err in samples:
        assert isinstance(err, BackendError) and isinstance(err, VyreError)
        text = str(err)
        assert "Fix: " in text and text.rstrip().endswith(".") and text.split("Fix: ")[-1].strip()
    assert samples[0].requested == 1 << 30 and samples[0].available == 1 << 20
    assert E.ValidationFailed is E.InvalidProgram
