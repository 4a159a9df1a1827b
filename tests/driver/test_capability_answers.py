"""Every capability query of every backend here, pinned against what the vendor reports
(pyopencl's device query, wgpu's adapter limits, the reference's own constants and the
host's memory): the answers the engine reads from each driver's `Capabilities` record are
the ones the drivers gave before they had one. CUDA's are pinned against the stand-in
device in tests/cuda/test_cuda_python_paths.py."""

from __future__ import annotations

import os

import pytest

from conftest import get_backend
from vyre import __version__
from vyre.driver.validation import default_supported_ops

SUBGROUP_OPS = frozenset(op for op in default_supported_ops() if op.startswith("vyre.subgroup."))
U32_MAX = 2**32 - 1
I32_MAX = 2**31 - 1


def _answers(b) -> dict:
    """Each query of the contract (and the engine's limits) as the backend answers it."""
    return {
        "id": b.id(), "version": b.version(), "ops": b.supported_ops(),
        "subgroups": b.supports_subgroup_ops(), "f16": b.supports_f16(), "bf16": b.supports_bf16(),
        "tensor_cores": b.supports_tensor_cores(), "async": b.supports_async_compute(),
        "indirect": b.supports_indirect_dispatch(), "speculation": b.supports_speculation(),
        "persistent": b.supports_persistent_thread_dispatch(), "grid_sync": b.supports_grid_sync(),
        "distributed": b.is_distributed(), "max_wg": b.max_workgroup_size(),
        "max_inv": b.max_compute_invocations_per_workgroup(),
        "max_groups": b.max_compute_workgroups_per_dimension(), "max_grid": b.max_grid_size(),
        "max_dispatch": b.max_invocations_per_dispatch(), "subgroup_size": b.subgroup_size(),
        "max_buffer": b.max_storage_buffer_bytes(),
    }


def _flags(*on: str) -> dict:
    """Every flag of `_answers`, True for those named."""
    names = ("subgroups", "f16", "bf16", "tensor_cores", "async", "indirect", "speculation",
             "persistent", "grid_sync", "distributed")
    return {n: n in on for n in names}


def test_reference_answers():
    from vyre.reference.interp import MAX_BATCH_LANES, MAX_WORKGROUP_WORDS

    b = get_backend("reference")
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert _answers(b) == _flags("subgroups", "speculation", "grid_sync") | {
        "id": "reference", "version": __version__, "ops": default_supported_ops(),
        "max_wg": (1 << 16,) * 3, "max_inv": MAX_BATCH_LANES, "max_groups": I32_MAX,
        "max_grid": (I32_MAX,) * 3, "max_dispatch": U32_MAX, "subgroup_size": 32,
        "max_buffer": min(4 * U32_MAX, host // 4)}
    prof = b.device_profile()
    assert (prof.backend, prof.has_subgroup_shuffle, prof.has_shared_memory, prof.has_mul_high) == \
        ("reference", True, True, True)
    assert (prof.max_shared_memory_bytes, prof.subgroup_size, prof.device_name) == \
        (4 * MAX_WORKGROUP_WORDS, 32, "numpy (host CPU)")
    assert b.limits().max_shared_memory_bytes == 4 * MAX_WORKGROUP_WORDS


def test_opencl_answers(opencl):
    d = opencl.device.rt.device   # pyopencl's own query of the device
    wg = d.max_work_group_size
    assert _answers(opencl) == _flags("async", "speculation") | {
        "id": "opencl", "version": __version__, "ops": default_supported_ops() - SUBGROUP_OPS,
        "max_wg": tuple(min(s, wg) for s in d.max_work_item_sizes[:3]), "max_inv": wg,
        "max_groups": I32_MAX, "max_grid": (I32_MAX,) * 3, "max_dispatch": U32_MAX,
        "subgroup_size": None, "max_buffer": d.max_mem_alloc_size}
    prof = opencl.device_profile()
    assert (prof.backend, prof.has_shared_memory, prof.has_mul_high, prof.has_subgroup_shuffle) == \
        ("opencl", True, True, False)
    assert (prof.max_shared_memory_bytes, prof.compute_units, prof.subgroup_size, prof.device_name) == \
        (d.local_mem_size, d.max_compute_units, 0, f"{d.name} ({d.platform.name})")
    assert opencl.device_fingerprint() == opencl.device.rt.fingerprint


def test_wgpu_answers():
    import blake3

    b = get_backend("wgpu")
    lim, info = b.device.adapter.limits, b.device.adapter.info   # wgpu's own report of the adapter
    assert _answers(b) == _flags("async", "speculation") | {
        "id": "wgpu", "version": __version__, "ops": default_supported_ops() - SUBGROUP_OPS,
        "max_wg": (lim["max-compute-workgroup-size-x"], lim["max-compute-workgroup-size-y"],
                   lim["max-compute-workgroup-size-z"]),
        "max_inv": lim["max-compute-invocations-per-workgroup"],
        "max_groups": lim["max-compute-workgroups-per-dimension"],
        "max_grid": (I32_MAX,) * 3,   # larger grids are folded onto more axes
        "max_dispatch": U32_MAX, "subgroup_size": None,
        "max_buffer": min(lim["max-storage-buffer-binding-size"], lim["max-buffer-size"])}
    prof = b.device_profile()
    assert (prof.backend, prof.has_shared_memory, prof.has_mul_high, prof.has_subgroup_shuffle) == \
        ("wgpu", True, True, False)
    assert (prof.max_shared_memory_bytes, prof.device_name) == \
        (lim["max-compute-workgroup-storage-size"], f"{info['device']} via {info['backend_type']}")
    text = f"wgpu|{info.get('device')}|{info.get('backend_type')}|{info.get('driver_description')}"
    assert b.device_fingerprint() == blake3.blake3(text.encode()).digest()


@pytest.mark.parametrize("backend_id", ["reference", "opencl", "wgpu"])
def test_limits_are_the_answers(backend_id):
    b = get_backend(backend_id)
    lim = b.limits()
    assert (lim.max_workgroup_size, lim.max_invocations_per_workgroup, lim.max_grid,
            lim.max_invocations_per_dispatch, lim.max_buffer_bytes) == \
        (b.max_workgroup_size(), b.max_compute_invocations_per_workgroup(), b.max_grid_size(),
         b.max_invocations_per_dispatch(), b.max_storage_buffer_bytes())
    assert lim.max_shared_memory_bytes == b.device_profile().max_shared_memory_bytes
