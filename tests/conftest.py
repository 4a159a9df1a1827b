"""Shared fixtures: the backends available here, each checked against the reference.

`backend` is parametrised over every dispatching backend that can start on this machine.
OpenCL must start in CI (VYRE_REQUIRE_OPENCL=1): there a missing PoCL fails the run instead
of skipping. CUDA tests carry the `gpu` marker and skip with the reason when no device is
present.
"""

from __future__ import annotations

import os

import pytest

from vyre.driver import BackendError, UnsupportedFeature, acquire

_STATE: dict[str, object] = {}


def _try(backend_id: str):
    if backend_id not in _STATE:
        try:
            _STATE[backend_id] = acquire(backend_id)
        except BackendError as err:
            _STATE[backend_id] = err
    return _STATE[backend_id]


def get_backend(backend_id: str):
    got = _try(backend_id)
    if isinstance(got, BackendError):
        if backend_id == "opencl" and os.environ.get("VYRE_REQUIRE_OPENCL") == "1":
            pytest.fail(f"OpenCL is required here (VYRE_REQUIRE_OPENCL=1) but unavailable: {got}")
        pytest.skip(f"{backend_id} backend unavailable: {got}")
    return got


BACKENDS = [
    pytest.param("reference", id="reference"),
    pytest.param("opencl", id="opencl"),
    pytest.param("wgpu", id="wgpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return get_backend(request.param)


@pytest.fixture
def opencl():
    return get_backend("opencl")


@pytest.fixture
def cuda():
    return get_backend("cuda")


@pytest.fixture
def reference_backend():
    return get_backend("reference")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # every test session writes compiled artifacts into its own temporary cache directory
    root = tmp_path_factory.getbasetemp() / "vyre-cache"
    monkeypatch.setenv("VYRE_CACHE_DIR", str(root))
    monkeypatch.setenv("VYRE_KEY_DIR", str(tmp_path_factory.getbasetemp() / "vyre-keys"))


@pytest.fixture
def opencl_or_none():
    got = _try("opencl")
    return None if isinstance(got, BackendError) else got


# Backends that refuse an op or type on purpose (documented, listed in supported_ops()):
# a test whose program needs it is skipped on them, with the refusal as the reason. Any other
# backend raising UnsupportedFeature fails the test.
REFUSING_BACKENDS = {"wgpu"}


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    try:
        return (yield)
    except UnsupportedFeature as err:
        if getattr(err, "backend", None) in REFUSING_BACKENDS:
            pytest.skip(f"{err.backend} refuses this program by design: {err.message}")
        raise
