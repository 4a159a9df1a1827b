"""One regression test per fault of the hardening issue: every bad input, fault and race gets
a documented error (a `VyreError` whose text ends in a Fix) or the right bytes, on every
backend where it applies. Fault numbers follow the issue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from vyre import reference
from vyre.driver import (
    DispatchConfig,
    DispatchFailed,
    InvalidInput,
    InvalidProgram,
    acquire,
    registry,
)
from vyre.driver.pipeline import DiskCache
from vyre.driver.pipeline import disk as D
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, VyreError, validate, wire
from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.types import BufferAccess

from helpers import GX, require_cancellable, slow_program, spin_trips

U, I, F = DataType.U32, DataType.I32, DataType.F32


def _copy(n: int = 0) -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U, n)], 64,
                           [Node.store("o", GX, Expr.load("a", GX) + 1)])


# ---- 2, 8: limits are checked before anything is allocated or launched -----------------------
@pytest.mark.parametrize("config", [DispatchConfig(grid_override=(65536, 65536, 1)),
                                    DispatchConfig(grid_override=(4096, 4096, 4096))],
                         ids=["65536x65536", "4096^3"])
def test_02_huge_grids_are_refused_before_launch(backend, config):
    with pytest.raises(InvalidProgram, match="Fix:") as err:
        backend.dispatch(_copy(), [np.arange(64, dtype=np.uint32)], config)
    assert err.value.reason in ("invocations", "grid")


def test_08_memory_bombs_are_refused_before_allocation(backend):
    a = np.arange(4, dtype=np.uint32)
    huge_out = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U, 2**32 - 1)], 1,
                               [Node.store("o", GX, 1)])
    # 16 GiB of output: over the reference's and PoCL's declared buffer limits; on a GPU with
    # more memory it is a legal (if large) dispatch, so only the refusal path is checked here
    if backend.max_storage_buffer_bytes() < 4 * (2**32 - 1):
        with pytest.raises(InvalidProgram, match="Fix:"):
            backend.dispatch(huge_out, [a])
    # 2**32 invocations on one axis (gid is a u32) is refused on every backend
    with pytest.raises(InvalidProgram, match="Fix:") as err:
        backend.dispatch(_copy(), [a], DispatchConfig(dispatch_elements=2**32 - 1))
    assert err.value.reason == "grid"
    for wg in ((65536, 65536, 1), (2**32 - 1, 1, 1)):
        with pytest.raises(InvalidProgram, match="Fix:"):
            backend.dispatch(Program.wrapped(_copy().buffers, wg, _copy().body), [a])
    with pytest.raises(InvalidProgram, match="dispatch_elements"):
        DispatchConfig(dispatch_elements=2**36)
    big_shared = Program.wrapped([BufferDecl.output("o", 0, U, 4), BufferDecl.workgroup("w", 2**28, U)], 4,
                                 [Node.store("w", Expr.lid_x(), 1), Node.store("o", GX, Expr.load("w", 0))])
    with pytest.raises(InvalidProgram, match="workgroup memory"):
        backend.dispatch(big_shared, [])


# ---- 3, 22: timeouts never wedge the backend or the process -----------------------------------
def test_03_repeated_timeouts_leave_every_backend_usable(backend, reference_backend):
    require_cancellable(backend)
    p = slow_program()
    a = np.arange(1 << 13, dtype=np.uint32)
    backend.compile_native(p)   # the kernel times out, not its build (which the timeout bounds too)
    for _ in range(5):
        with pytest.raises(DispatchFailed, match="timeout"):
            backend.dispatch(p, [a, np.array([spin_trips(backend)], np.uint32)], DispatchConfig(timeout=0.05))
    small = [a[:64], np.array([2], np.uint32)]
    assert reference_backend.dispatch(p, small, DispatchConfig(timeout=3)) == reference.run(p, small)
    assert backend.dispatch(p, small, DispatchConfig(timeout=3)) == reference.run(p, small)


def test_03_a_process_exits_promptly_after_a_timeout(backend):
    code = (
        "import sys, numpy as np; sys.path.insert(0, 'tests')\n"
        "from helpers import slow_program\n"
        "from vyre.driver import acquire, DispatchConfig, DispatchFailed\n"
        f"b = acquire({backend.id()!r})\n"
        "a = np.arange(1 << 13, dtype=np.uint32)\n"
        "b.compile_native(slow_program())\n"   # the kernel times out, not its build
        "try:\n"
        f"    b.dispatch(slow_program(), [a, np.array([{spin_trips(backend)}], np.uint32)], DispatchConfig(timeout=0.05))\n"
        "except DispatchFailed:\n"
        "    print('timed out')\n")
    # a hang here (the old fixed thread pool waited for "cancelled" work) fails the test
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent.parent, env=dict(os.environ))
    assert done.returncode == 0 and "timed out" in done.stdout, done.stderr


# ---- 4, 5: cache files are opened safely --------------------------------------------------------
def test_04_a_forged_but_checksummed_cache_entry_is_refused(tmp_path, monkeypatch):
    import blake3

    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    cache = DiskCache("forge")
    cache.put(b"k", b"\x7fELF" + b"x" * 4000)
    assert cache.get(b"k") is not None
    path = cache._path(b"k")
    half = b"\x7fELF" + b"x" * 1998        # a truncated binary, re-checksummed in the old format
    head = D._HEAD.pack(D.MAGIC, D.FORMAT, blake3.blake3(b"k").digest(), blake3.blake3(half).digest(), len(half))
    path.write_bytes(head + half)
    assert cache.get(b"k") is None and cache.corrupt == 1 and not path.exists()


def test_05_fifos_and_huge_files_in_place_of_entries_are_misses(tmp_path, monkeypatch):
    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(D, "MAX_ENTRY_BYTES", 1 << 16)
    cache = DiskCache("fifo")
    fifo = cache._path(b"fifo")
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    assert cache.get(b"fifo") is None            # never opened: a read would block forever
    big = cache._path(b"big")
    with open(big, "wb") as f:
        f.truncate(1 << 20)                        # sparse: over the cap without using disk
    assert cache.get(b"big") is None
    (tmp_path / "tuner").mkdir()
    os.mkfifo(tmp_path / "tuner" / "x.json")
    assert D.read_small_file(tmp_path / "tuner" / "x.json", "tuner cache") is None


# ---- 6: one async handle awaited from several threads -------------------------------------------
def test_06_an_async_handle_can_be_awaited_from_many_threads(backend):
    a = np.arange(4096, dtype=np.uint32)
    pending = backend.dispatch_async(_copy(), [a])
    results, errors = [], []

    def wait():
        try:
            results.append(pending.await_result())
        except Exception as exc:  # pragma: no cover - the failure being tested
            errors.append(exc)

    threads = [threading.Thread(target=wait) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 8 and all(r == results[0] for r in results)
    assert results[0] == reference.run(_copy(), [a])


# ---- 7: literal ranges are validated, so backends cannot disagree -----------------------------
def test_07_out_of_range_and_non_canonical_literals_are_invalid(backend):
    for lit in (E.Lit(U, 2**40), E.Lit(F, 0x7F800001), E.Lit(DataType.BOOL, 2), E.Lit(I, -1)):
        p = Program.wrapped([BufferDecl.output("o", 0, lit.dtype, 4)], 4, [Node.store("o", GX, lit)])
        assert [d.code for d in validate(p)] == ["V029"]
        with pytest.raises(InvalidProgram, match="V029"):
            backend.dispatch(p, [])
    with pytest.raises(VyreError, match="Fix:"):
        Expr.u32(2**40)


# ---- 9: a full disk or unwritable cache never breaks a build -----------------------------------
def test_09_an_unwritable_cache_directory_still_builds(backend, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("VYRE_CACHE_DIR", str(blocker / "cache"))
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 8,
                        [Node.store("o", GX, Expr.load("a", GX) * 77 + 5)])
    a = np.arange(16, dtype=np.uint32)
    assert backend.dispatch(p, [a]) == reference.run(p, [a])


# ---- 10: tuner and routing tables with absurd values are misses ------------------------------
def test_10_absurd_tuner_and_routing_files_are_ignored(opencl, tmp_path, monkeypatch):
    from vyre.driver import tuner
    from vyre.driver.routing import Router
    from vyre.ir import fingerprint

    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VYRE_AUTOTUNER", "on")
    p = _copy()
    cache = tuner.cache_for(opencl)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    a = np.arange(512, dtype=np.uint32)
    for bad in ("[Infinity, 1, 1]", "[0, 1, 1]", "[-64, 1, 1]", "[1000000, 1, 1]", '"x"', "{"):
        cache.path.write_text(f'{{"{fingerprint(p).hex()}": {bad}}}')
        cache._data = None
        assert opencl.dispatch(p, [a]) == reference.run(p, [a])
    path = tmp_path / "routing.json"
    path.write_text(json.dumps({fingerprint(p).hex(): {"opencl": int("9" * 400), "reference": 1e400}}))
    assert Router(path).choose(p).backend is not None


# ---- 11: DispatchConfig checks every field ----------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"timeout": "5"}, {"timeout": float("nan")}, {"timeout": float("inf")}, {"timeout": 1e10},
    {"workgroup_override": (float("nan"), 1, 1)}, {"workgroup_override": (None, 1, 1)},
    {"grid_override": (float("inf"), 1, 1)}, {"grid_override": "abc"},
    {"specialization": {"a": "abc"}}, {"specialization": {"a": None}}, {"specialization": [1, 2]},
    {"specialization": "abc"}, {"specialization": {1: 2}}, {"fixpoint_iterations": 1.5},
    {"fixpoint_iterations": True}, {"max_output_bytes": -1}, {"label": 5}, {"cooperative": "yes"},
    {"profile": "fast"}, {"ulp_budget": 2.5}])
def test_11_dispatch_config_refuses_bad_fields_with_a_fix(kwargs):
    with pytest.raises(InvalidProgram, match="Fix:"):
        DispatchConfig(**kwargs)


# ---- 12, 21: malformed Program objects are InvalidProgram on every backend --------------------
MALFORMED = [
    Program((BufferDecl("o", 0, BufferAccess.OUTPUT, DataType.U32, -1),), (4, 1, 1), ()),
    Program((BufferDecl("o", 0, "output", DataType.U32, 4),), (4, 1, 1), ()),
    Program((BufferDecl("o", 0, BufferAccess.OUTPUT, "u32", 4),), (4, 1, 1), ()),
    Program((BufferDecl("o", "0", BufferAccess.OUTPUT, DataType.U32, 4),), (4, 1, 1), ()),
    Program((), (4.0, 1, 1), ()),
    Program((), ("4", 1, 1), ()),
    Program((), (4, 1), ()),
    Program([], (4, 1, 1), [N.Return()]),
    Program((), (4, 1, 1), ("store",)),
    Program((BufferDecl.output("o", 0, U, 4),), (4, 1, 1), (N.Store("o", E.Lit(U, "1"), E.Lit(U, 1)),)),
    Program((BufferDecl.output("o", 0, U, 4),), (4, 1, 1), (N.Store("o", E.Id("gid", 0), E.Lit(U, 1)),)),
    Program((BufferDecl.output("o", 0, U, 4),), (4, 1, 1), (N.Store("o", E.Id(E.Builtin.GID, "x"), E.Lit(U, 1)),)),
    Program((BufferDecl.output("o", 0, U, 4),), (4, 1, 1), (N.Store("o", 0, 1),)),
    Program((BufferDecl.output("o", 0, U, 4),), (4, 1, 1), (N.If(E.Lit(DataType.BOOL, 1), [N.Return()], None),)),
    "not a program", None,
]


@pytest.mark.parametrize("program", MALFORMED, ids=[f"m{i}" for i in range(len(MALFORMED))])
def test_12_malformed_programs_are_invalid_everywhere(backend, program):
    with pytest.raises(InvalidProgram, match="Fix:"):
        backend.dispatch(program, [])
    if isinstance(program, Program):
        assert validate(program)


# ---- 13: bad inputs (covered per entry point in tests/driver/test_entry_points.py) -------------
def test_13_bad_inputs_are_invalid_input(backend):
    for bad in (None, 5, "abc", [np.zeros(4, np.uint32)] * 2, {"a": 1}):
        with pytest.raises(InvalidInput, match="Fix:"):
            backend.dispatch(_copy(), bad)


# ---- 14: deep nesting is refused at construction and on the wire ------------------------------
def test_14_deep_trees_are_refused_with_a_fix_not_a_recursion_error():
    e = Expr.u32(1)
    with pytest.raises(VyreError, match="nests"):
        for _ in range(400):
            e = e + 1
    ok = Expr.u32(1)
    for _ in range(200):
        ok = ok + 1
    p = Program.wrapped([BufferDecl.output("o", 0, U, 4)], 4, [Node.store("o", GX, ok)])
    data = wire.encode(p)
    assert wire.decode(data) == p and hash(p) == hash(wire.decode(data))
    from vyre.ir.fingerprint import fingerprint

    assert fingerprint(p) == fingerprint(wire.decode(data))
    # a hand-made wire body nested past the limit
    deep = bytearray()
    for _ in range(400):
        deep += bytes([wire.X_UN, wire.UNOPS.index(E.UnOp.NEGATE)])
    deep += bytes([wire.X_LIT, 1, 1])
    body = bytearray()
    wire._section(body, wire.S_WORKGROUP, bytearray([4, 1, 1]))
    wire._section(body, wire.S_BUFFERS, bytearray([0]))
    tree = bytearray([1, wire.N_EVAL]) + deep
    wire._section(body, wire.S_BODY, tree)
    import struct

    import blake3

    blob = wire.MAGIC + struct.pack("<HH", wire.VERSION, 0) + blake3.blake3(bytes(body)).digest() + bytes(body)
    with pytest.raises(VyreError, match="nest"):
        wire.decode(blob)


# ---- 15: resident-buffer arguments ----------------------------------------------------------
def test_15_bad_resident_arguments_are_backend_errors(backend):
    for bad in ("64", None, 6.5, True, -1):
        with pytest.raises(InvalidProgram, match="Fix:"):
            backend.allocate_resident(bad)
    r = backend.allocate_resident(16)
    for bad, reason in ((b"123", "input_size"), ("abcd", "input_type"), (object(), "input_type"),
                        (np.zeros(3, np.uint32), "input_size")):
        with pytest.raises(InvalidInput) as err:
            backend.upload_resident(r, bad)
        assert err.value.reason == reason
    backend.free_resident(r)
    with pytest.raises(InvalidProgram, match="freed"):
        backend.read_resident(r)


# ---- 16: shutdown ------------------------------------------------------------------------------
def test_16_acquire_after_shutdown_gives_a_working_backend(backend):
    bid = backend.id()
    fresh = acquire(bid)
    if fresh is backend:
        fresh.shutdown()
    with pytest.raises(DispatchFailed, match="acquire"):
        fresh.dispatch(_copy(), [np.arange(4, dtype=np.uint32)])
    again = acquire(bid)
    assert again is not fresh and not again.closed
    a = np.arange(8, dtype=np.uint32)
    assert again.dispatch(_copy(), [a]) == reference.run(_copy(), [a])
    from conftest import _STATE

    _STATE[bid] = again   # later tests use the live instance
    registry._instances[bid] = again


# ---- 18: certificates bind the backend and device ---------------------------------------------
def test_18_certificates_are_refused_for_another_backend_or_device(reference_backend, opencl):
    from vyre.conform import certificate, run_backend, verify_certificate
    from vyre.conform.corpus import corpus

    report = run_backend(reference_backend, entries=corpus()[:3])
    cert = certificate(report, random=0, seed=0)
    cert["passed"] = True
    body = {k: v for k, v in cert.items() if k != "digest"}
    import blake3

    cert["digest"] = blake3.blake3(json.dumps(body, sort_keys=True).encode()).hexdigest()
    ok, why = verify_certificate(cert, opencl)
    assert not ok and "backend" in why
    forged = dict(body, device_fingerprint="00" * 32)
    forged["digest"] = blake3.blake3(json.dumps(forged, sort_keys=True).encode()).hexdigest()
    ok, why = verify_certificate(forged, reference_backend)
    assert not ok and "device_fingerprint" in why


# ---- 19: zero-size work ----------------------------------------------------------------------
def test_19_zero_size_work_gives_empty_or_zeroed_outputs(backend):
    empty = np.zeros(0, np.uint32)
    assert backend.dispatch(_copy(), [empty]) == reference.run(_copy(), [empty]) == [b""]
    a = np.arange(8, dtype=np.uint32)
    for config in (DispatchConfig(dispatch_elements=0), DispatchConfig(grid_override=(0, 1, 1)),
                   DispatchConfig(dispatch_grid=(0, 0, 0))):
        assert backend.dispatch(_copy(8), [a], config) == reference.run(_copy(8), [a], config)
    pend = [backend.dispatch_async(_copy(), [a[:n]]) for n in (0, 3, 0, 8)]
    assert [p.await_result() for p in pend] == [reference.run(_copy(), [a[:n]]) for n in (0, 3, 0, 8)]


def test_14_the_deepest_buildable_program_runs_everywhere(backend):
    """A tree at the height limit goes through every walk: encode, decode, fingerprint, ==,
    hash, validation, lowering, printing and execution, without a RecursionError."""
    from vyre.ir.limits import MAX_DEPTH
    from vyre.ir.show import program_text

    x = Expr.load("a", GX)
    for i in range(MAX_DEPTH - 3):
        x = (x + i) if i % 2 else (x ^ i)
    p = Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)], 8, [Node.store("o", GX, x)])
    q = wire.decode(wire.encode(p))
    assert q == p and hash(q) == hash(p) and validate(q) == []
    assert "o[gid.x]" in program_text(q)
    a = np.arange(16, dtype=np.uint32)
    assert backend.dispatch(q, [a]) == reference.run(p, [a])
