"""A driver is a Device plus a `Capabilities` record: the engine answers every capability
query of the contract from it (the table is complete), and the reference driver is built that
way (no Backend subclass)."""

from __future__ import annotations

import inspect

from vyre.driver import VyreBackend, acquire
from vyre.driver.capability import CAPABILITY_QUERIES, Capabilities, DeviceProfile
from vyre.driver.engine import EngineBackend
from vyre.drivers.reference.backend import ReferenceDevice

# contract methods that are not capability queries (dispatch, lifecycle, resources, ...)
NOT_QUERIES = {
    "dispatch", "dispatch_borrowed", "dispatch_borrowed_timed", "dispatch_borrowed_into",
    "dispatch_arrays", "dispatch_device", "dispatch_async", "dispatch_borrowed_async",
    "allocate_resident", "upload_resident", "free_resident", "dispatch_resident_timed",
    "bind_resident", "compile_native", "compile_native_shared", "pipeline_cache_snapshot",
    "compile_batch", "prepare", "flush", "shutdown", "device_lost", "try_recover", "refuse",
    "generated_source", "reads_device_arrays", "device_fingerprint", "precompile",
    "own",
}


def test_every_capability_query_is_answered_from_the_record():
    queries = {n for n, _ in inspect.getmembers(VyreBackend, inspect.isfunction) if not n.startswith("_")}
    assert queries - NOT_QUERIES == set(CAPABILITY_QUERIES)


class _Recorded(ReferenceDevice):
    def capabilities(self) -> Capabilities:
        prof = DeviceProfile(backend="recorded", supports_f16=True, supports_tensor_cores=True,
                             max_workgroup_size=(7, 5, 3), max_invocations_per_workgroup=35,
                             max_storage_buffer_binding_size=123, subgroup_size=16,
                             max_shared_memory_bytes=99, device_name="test device")
        return Capabilities("recorded", "9.9", prof, unsupported_ops=frozenset({"vyre.un_op.sin"}),
                            async_compute=True, speculation=True, grid_sync=True,
                            max_workgroups_per_dimension=11, max_invocations_per_dispatch=77,
                            fingerprint=b"fp")


def test_the_engine_reads_the_record():
    b = EngineBackend(_Recorded())
    assert (b.id(), b.version()) == ("recorded", "9.9")
    assert "vyre.un_op.sin" not in b.supported_ops() and "vyre.un_op.cos" in b.supported_ops()
    assert b.supports_f16() and b.supports_tensor_cores() and not b.supports_bf16()
    assert b.supports_async_compute() and b.supports_speculation() and b.supports_grid_sync()
    assert not b.supports_subgroup_ops() and not b.is_distributed()
    assert b.max_workgroup_size() == (7, 5, 3) and b.max_compute_invocations_per_workgroup() == 35
    assert b.max_compute_workgroups_per_dimension() == 11 and b.max_invocations_per_dispatch() == 77
    assert b.max_grid_size() == (11, 11, 11) and b.limits().max_grid == (11, 11, 11)   # no max_grid given
    assert b.max_storage_buffer_bytes() == 123 and b.subgroup_size() == 16
    assert b.device_profile().device_name == "test device" and b.device_fingerprint() == b"fp"
    assert b.limits().max_shared_memory_bytes == 99


def test_the_reference_driver_is_a_device_and_a_record():
    b = acquire("reference")
    assert type(b) is EngineBackend and isinstance(b.device, ReferenceDevice)
    assert b.caps is not None and b.supports_grid_sync() and b.supports_subgroup_ops()
    assert b.subgroup_size() == 32 and b.device_profile().has_shared_memory


ENGINE_LIMITS = {"max_grid_size", "max_invocations_per_dispatch", "device_fingerprint"}


def test_no_driver_answers_a_capability_query_itself():
    """Every driver declares its capabilities in one record (`Device.capabilities`, dask's
    `_capabilities`): no class in src/vyre/drivers defines a method answering a query."""
    import ast
    from pathlib import Path

    import vyre.drivers

    answered = set(CAPABILITY_QUERIES) | ENGINE_LIMITS
    found = []
    for path in sorted(Path(vyre.drivers.__file__).parent.rglob("*.py")):
        for cls in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)):
            found += [f"{path.name}:{cls.name}.{f.name}" for f in cls.body
                      if isinstance(f, ast.FunctionDef) and f.name in answered]
    assert found == []


def test_no_driver_subclasses_the_engine():
    """A driver is a `Device` and nothing else (`EngineBackend`'s docstring): what depends on
    the program or on the vendor's lifecycle is a device hook (`refuse`, `attach`, `lost`,
    `renew`), so no class in src/vyre/drivers derives from `EngineBackend`, and every engine
    driver's registered factory is a plain function returning ``EngineBackend(device)``."""
    import ast
    from pathlib import Path

    import vyre.drivers
    from vyre.driver.registry import registered_backends

    found = []
    for path in sorted(Path(vyre.drivers.__file__).parent.rglob("*.py")):
        for cls in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)):
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in cls.bases}
            if "EngineBackend" in bases:
                found.append(f"{path.relative_to(path.parents[2])}:{cls.name}")
    assert found == []
    engine = [r for r in registered_backends() if isinstance(r.factory, str) and
              r.factory.startswith("vyre.drivers.") and r.id != "dask"]
    assert {r.id for r in engine} >= {"reference", "opencl", "wgpu", "cuda"}
    for reg in engine:
        module, name = reg.factory.split(":")
        src = Path(vyre.drivers.__file__).parent.joinpath(*module.split(".")[2:]).with_suffix(".py")
        tree = ast.parse(src.read_text())
        target = {t.id: ast.unparse(a.value) for a in tree.body if isinstance(a, ast.Assign)
                  for t in a.targets if isinstance(t, ast.Name)}.get(name, name)
        fn = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == target]
        assert fn, f"{reg.id}: its factory {reg.factory} is no function of {src.name}"
        assert ast.unparse(fn[0].body[-1]).startswith("return EngineBackend("), reg.id


def test_engine_drivers_are_plain_engines(backend):
    """The backends a dispatch gets are `EngineBackend` itself, their device hooks wired."""
    b = backend
    assert type(b) is EngineBackend
    assert b.device_lost() is False and b.refuse.__func__ is EngineBackend.refuse
