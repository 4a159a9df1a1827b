"""write_atomic: concurrent writers of one file never leave a mix, a shared temp name or a
stray temporary file (the tuner and the router wrote through one fixed '.tmp' before)."""

from __future__ import annotations

import threading

import pytest

from vyre.driver.atomic_file import write_atomic


def test_concurrent_writers_and_readers_see_whole_files(tmp_path):
    path = tmp_path / "sub" / "timings.json"
    payloads = [bytes([i]) * (4096 + i) for i in range(8)]
    seen: set[bytes] = set()
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.add(path.read_bytes())
            except FileNotFoundError:
                pass

    def writer(p):
        for _ in range(100):
            write_atomic(path, p)

    r = threading.Thread(target=reader)
    r.start()
    ws = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    stop.set()
    r.join()
    assert seen and seen <= set(payloads)
    assert path.read_bytes() in payloads
    assert [p.name for p in path.parent.iterdir()] == ["timings.json"]   # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "t.json"
    write_atomic(path, "old")

    with pytest.raises(TypeError):
        write_atomic(path, 12345)   # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]
    write_atomic(path, "new", mode=0o600)
    assert path.read_text() == "new" and (path.stat().st_mode & 0o777) == 0o600
