"""Shared fixtures: the backends available here, each checked against the reference.

`backend` is parametrised over every dispatching backend that can start on this machine.
OpenCL must start in CI (VYRE_REQUIRE_OPENCL=1): there a missing PoCL fails the run instead
of skipping. CUDA tests carry the `gpu` marker and skip with the reason when no device is
present.
"""

from __future__ import annotations

import os
import re

import pytest

from vyre.driver import BackendError, UnsupportedFeature, acquire

_STATE: dict[str, object] = {}

# VYRE_WGPU_LOST_LOG=PATH (the device runs, `scripts/gpu-check wgpu`): after each test, every live
# wgpu device is probed (a 4-byte buffer); the first test after which one is lost goes to
# PATH.<pid> with wgpu's words, and the shared backend is recovered so later tests run normally
_LOST_LOG = os.environ.get("VYRE_WGPU_LOST_LOG")
if _LOST_LOG:
    _SEEN_LOST: set[int] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(item: pytest.Item) -> None:
        import sys

        mod = sys.modules.get("vyre.drivers.wgpu.backend")
        if mod is None:
            return
        for dev in list(mod._LIVE):
            if id(dev.device) in _SEEN_LOST:
                continue
            try:
                dev.device.create_buffer(size=4, usage=dev.usage).destroy()
            except Exception as exc:
                _SEEN_LOST.add(id(dev.device))
                with open(f"{_LOST_LOG}.{os.getpid()}", "a") as f:
                    f.write(f"{item.nodeid}\n{' '.join(str(exc).split())}\n\n")
        shared = _STATE.get("wgpu")
        if shared is not None and not isinstance(shared, BackendError) and id(shared.device.device) in _SEEN_LOST:
            shared.try_recover()


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


def _hardware_reasons() -> re.Pattern:
    """One reason of a wgpu refusal that docs/wgpu.md documents as hardware: 64-bit atomics,
    subgroup operations or per-invocation arrays past 8 KiB, in each wording it reaches a test
    in (the WGSL refusal, the driver's missing-op and capability refusals, and the kernel-words
    forms of those)."""
    from vyre.ir.ops import all_op_ids
    from vyre.lower.wgsl import HARDWARE_REFUSALS

    names = sorted(op.removeprefix("vyre.subgroup.") for op in all_op_ids() if op.startswith("vyre.subgroup."))
    op = rf"(?:vyre\.subgroup\.(?:{'|'.join(names)})|(?:{'|'.join(names)})\(\))"
    fixed = "|".join(re.escape(r) for r in sorted(HARDWARE_REFUSALS))
    return re.compile(rf"(?:(?:{fixed})(?:: \d+ bytes once legalized)?|(?:needs )?subgroup operations|(?:ops|unsupported ops:|uses) {op}(?:, {op})*)")


_KERNEL_WORDS = re.compile(r"\[K024\] the wgpu backend cannot run the kernel at .*?: (.*)\.")


def documented_refusal(err: UnsupportedFeature) -> bool:
    """Whether ``err`` is a wgpu refusal whose every reason is a documented hardware refusal."""
    if getattr(err, "backend", None) != "wgpu":
        return False
    what = err.message.removeprefix("[wgpu] ").removesuffix(" is not supported by this backend.")
    kernel = _KERNEL_WORDS.fullmatch(what)
    if kernel is not None:
        what = kernel.group(1)
    pattern = _hardware_reasons()
    return all(pattern.fullmatch(r) for r in what.split("; "))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    # wgpu refuses 64-bit atomics and subgroup operations (the adapter lacks them; listed in
    # supported_ops() and docs/wgpu.md): a test whose program needs them is skipped there, with
    # the refusal as the reason. Every other refusal, on any backend, fails the test.
    try:
        return (yield)
    except UnsupportedFeature as err:
        if documented_refusal(err):
            pytest.skip(f"wgpu refuses this program (hardware): {err.message}")
        raise
