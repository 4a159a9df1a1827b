"""Discovery, precedence, acquisition and routing helpers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vyre.driver import (
    BackendRegistration,
    UnsupportedFeature,
    acquire,
    acquire_preferred_dispatch_backend,
    backend_registration,
    can_run,
    register,
    registered_backends,
    registered_backends_by_precedence,
    unregister,
)
from vyre.driver import registry as R
from vyre.ir import BufferDecl, DataType, Program

from helpers import MockBackend, prog


def test_importing_vyre_and_listing_registrations_touches_no_device_or_vendor_module():
    code = ("import sys, json, vyre, vyre.driver as d\n"
            "regs = [(r.id, r.precedence, r.reference_oracle) for r in d.registered_backends_by_precedence()]\n"
            "vendor = sorted(m for m in sys.modules if m.split('.')[0] in ('pyopencl', 'cuda', 'cupy', 'torch', 'wgpu', 'dask', 'distributed'))\n"
            "print(json.dumps({'regs': regs, 'vendor': vendor}))\n")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out["vendor"] == []
    assert [r[0] for r in out["regs"]] == ["cuda", "opencl", "wgpu", "dask", "reference"]
    assert out["regs"][-1] == ["reference", 900, True]


def test_precedence_order_is_ascending_and_stable():
    regs = registered_backends_by_precedence()
    assert [r.precedence for r in regs] == sorted(r.precedence for r in regs)
    assert backend_registration("cuda").precedence == 5
    assert {r.id for r in registered_backends()} >= {"cuda", "opencl", "reference"}


def test_duplicate_ids_fail_loudly():
    with pytest.raises(R.RegistryError, match="Fix:"):
        register(BackendRegistration("reference", 1, MockBackend))


def test_register_acquire_and_unregister_a_plugin():
    register(BackendRegistration("mock", 10_000, MockBackend))
    try:
        assert acquire("mock") is acquire("mock")
        assert acquire("mock").dispatch(prog(), [b"\1\0\0\0"]) == [b"\2\0\0\0"]
    finally:
        unregister("mock")
    with pytest.raises(UnsupportedFeature, match="Fix:"):
        acquire("mock")


def test_preferred_backend_never_picks_the_reference_implicitly(monkeypatch):
    for reg in registered_backends():
        monkeypatch.setitem(R._instances, reg.id, None) if False else None
    monkeypatch.delenv("VYRE_BACKEND", raising=False)
    failing = {r.id: r for r in registered_backends()}
    monkeypatch.setattr(R, "_all", lambda: {k: BackendRegistration(k, v.precedence, _broken, v.reference_oracle)
                                            for k, v in failing.items()})
    monkeypatch.setattr(R, "_instances", {})
    with pytest.raises(UnsupportedFeature) as err:
        acquire_preferred_dispatch_backend()
    text = str(err.value)
    assert "cuda:" in text and "opencl:" in text and "reference:" not in text
    assert text.rstrip().endswith("explicitly.") and "VYRE_BACKEND=reference" in text


def _broken():
    raise RuntimeError("no device here")


def test_vyre_backend_environment_variable_overrides(monkeypatch):
    monkeypatch.setenv("VYRE_BACKEND", "reference")
    assert acquire_preferred_dispatch_backend().id() == "reference"


def test_can_run_checks_ops_and_limits():
    m = MockBackend()  # max workgroup (1,1,1)
    assert not can_run(prog(), m)
    assert R.why_not(prog(), m)
    ref = acquire("reference")
    assert can_run(prog(), ref)
    big = Program.wrapped([BufferDecl.workgroup("w", 1 << 29, DataType.U32)], 1, [])
    assert not can_run(big, ref)


def test_an_unknown_backend_id_gets_a_did_you_mean():
    """acquire() of an id nothing is registered under says so (not 'is not supported by this
    backend') and offers the closest id; it is still an UnsupportedFeature (code 1002)."""
    from vyre.driver import UnknownBackend

    with pytest.raises(UnknownBackend) as err:
        acquire("opencll")
    text = str(err.value)
    assert isinstance(err.value, UnsupportedFeature) and err.value.code == 1002
    assert "there is no backend 'opencll'" in text and "Fix: did you mean 'opencl'?" in text, text
    assert "not supported by this backend" not in text
    with pytest.raises(UnknownBackend) as err:
        backend_registration("zzzzzz")
    assert "did you mean" not in str(err.value) and "reference" in err.value.fix
