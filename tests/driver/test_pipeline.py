"""Pipeline compile cache (in-process, explain_miss) and the on-disk artifact cache."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from vyre.driver import DispatchConfig
from vyre.driver import pipeline as P
from vyre.driver.pipeline import DiskCache
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import MockBackend, prog


def test_compile_caches_by_key_and_reports_hits():
    m = MockBackend()
    P.clear()
    before = P.snapshot()
    p1 = P.compile(m, prog())
    p2 = P.compile(m, prog())
    assert p1 is p2 and not p1.native
    snap = P.snapshot()
    assert snap.hits == before.hits + 1 and snap.misses == before.misses + 1
    a = np.arange(4, dtype=np.uint32)
    assert p1.dispatch([a]) == m.dispatch(prog(), [a])
    assert P.compile(m, prog(), DispatchConfig(label="only a label")) is p1  # not code-affecting


def test_explain_miss_names_the_differing_component():
    m = MockBackend()
    P.clear()
    assert "empty" in P.explain_miss(m, prog())
    P.compile(m, prog())
    assert P.explain_miss(m, prog()).startswith("hit")
    assert "code_config" in P.explain_miss(m, prog(), DispatchConfig(ulp_budget=3))
    other = Program.wrapped(prog().buffers, 8, prog().body)
    assert "program_fingerprint" in P.explain_miss(m, other)


def test_code_affecting_dispatch_config_must_match_the_compiled_one():
    from vyre.driver import InvalidProgram

    pipe = P.compile(MockBackend(), prog())
    try:
        pipe.dispatch([b"\0" * 4], DispatchConfig(workgroup_override=(2, 1, 1)))
    except InvalidProgram as err:
        assert "compile the program again" in str(err)
    else:
        raise AssertionError("expected InvalidProgram")


def test_invalid_programs_are_refused_at_compile():
    from vyre.driver import InvalidProgram

    bad = Program.wrapped([BufferDecl.read("a", 0, DataType.U32)], 4, [Node.store("a", Expr.gid_x(), 1)])
    try:
        P.compile(MockBackend(), bad)
    except InvalidProgram as err:
        assert err.diagnostics and err.diagnostics[0].code == "V008"
    else:
        raise AssertionError("expected InvalidProgram")


def test_disk_cache_round_trip_and_atomic_files(tmp_path):
    c = DiskCache("t", root=tmp_path)
    assert c.get(b"k") is None
    c.put(b"k", b"payload")
    assert c.get(b"k") == b"payload"
    assert not list((tmp_path / "t").glob(".tmp-*"))
    assert c.hits == 1 and c.misses == 1


def test_corrupt_truncated_or_foreign_entries_are_misses_with_a_warning(tmp_path, caplog):
    c = DiskCache("t", root=tmp_path)
    c.put(b"k", b"payload" * 10)
    path = next((tmp_path / "t").glob("*.bin"))
    caplog.set_level(logging.WARNING, logger="vyre.cache")
    for damage in (lambda d: d[:-3], lambda d: d[:10], lambda d: d[:-1] + bytes([d[-1] ^ 1]), lambda d: b"junk"):
        c.put(b"k", b"payload" * 10)
        path.write_bytes(damage(path.read_bytes()))
        assert c.get(b"k") is None
    c.put(b"other", b"x")
    other = next(p for p in (tmp_path / "t").glob("*.bin") if p != path)
    path.write_bytes(other.read_bytes())  # a valid entry for another key, renamed: foreign
    assert c.get(b"k") is None
    assert "corrupt or foreign" in caplog.text


def test_size_cap_evicts_least_recently_used(tmp_path):
    import os
    import time

    c = DiskCache("t", root=tmp_path, cap_bytes=1 << 20)
    now = time.time()
    for i in range(5):
        c.put(bytes([i]), bytes(900))
        os.utime(c._path(bytes([i])), (now + i, now + i))
    c.cap_bytes = 3000
    c._evict()
    kept = [i for i in range(5) if c.get(bytes([i])) is not None]
    assert kept == [2, 3, 4]


def test_unwritable_cache_is_not_fatal(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    c = DiskCache("t", root=blocker)
    c.put(b"k", b"v")
    assert c.get(b"k") is None


def test_a_disk_hit_in_a_fresh_process_neither_validates_nor_canonicalises(tmp_path):
    """The second process loads the kernel its first process built: no validation, no
    canonical form (the fingerprint comes with the cached kernel), the same bytes."""
    import os
    import subprocess
    import sys

    code = r"""
import sys
import numpy as np
import pytest
import vyre.examples.sha256 as S
from vyre.driver import acquire, pipeline as P
b = acquire("opencl")
if sys.argv[1] == "second":
    import vyre.ir.canonical, vyre.ir.validate
    def boom(*a, **k):
        raise AssertionError("validated or canonicalised on a disk hit")
    vyre.ir.validate.validate = vyre.ir.canonical.canonicalize = boom
    import vyre.driver.validation as V
    V.validate = boom
msgs = S.random_messages(8, 3)
pipe = P.compile(b, S.sha256_blocks())
out = pipe.dispatch([S.pad_messages(msgs)], S.sha256_config(8))[0]
assert out == S.digests_expected(msgs).tobytes()
print(pipe.compiled.kernel.built_from)
"""
    env = dict(os.environ, VYRE_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code, which], env=env, capture_output=True, text=True,
                           timeout=120) for which in ("first", "second")]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    assert runs[1].stdout.split()[-1] == "disk"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG rule is Linux's")
@pytest.mark.parametrize("env", [{}, {"XDG_CONFIG_HOME": "/x/conf", "XDG_CACHE_HOME": "/x/cache"},
                                 {"XDG_CONFIG_HOME": " ", "XDG_CACHE_HOME": ""}])
def test_default_cache_and_key_dirs_are_platformdirs_without_importing_it(monkeypatch, env):
    """Issue 24: importing platformdirs was most of a disk-cache hit in a fresh process."""
    import platformdirs

    from vyre.driver.pipeline import disk

    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "VYRE_CACHE_DIR", "VYRE_KEY_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert str(disk.key_dir()) == platformdirs.user_config_dir("vyre", appauthor=False)
    assert str(disk.cache_root()) == platformdirs.user_cache_dir("vyre", appauthor=False)
