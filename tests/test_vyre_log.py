"""VYRE_LOG=debug prints vyre's log (kernel build, engine compile or disk-cache load,
in-memory pipeline-cache hits, routing, run time) to stderr; unset it prints nothing (and a
warm dispatch does not even ask the logger); an unknown level is reported and ignored."""

from __future__ import annotations

import os
import subprocess
import sys

KERNEL = """
import numpy as np, vyre
from vyre.kernel import In, Out, u32, gid

@vyre.kernel
def inc(x: In[u32], o: Out[u32]):
    i = gid()
    o[i] = x[i] + 1

assert inc(np.arange(4, dtype=np.uint32), backend="reference").tolist() == [1, 2, 3, 4]
assert inc(np.arange(4, dtype=np.uint32), backend="reference").tolist() == [1, 2, 3, 4]
"""


def _run(tmp_path, level: str | None) -> str:
    path = tmp_path / "k.py"
    path.write_text(KERNEL)
    env = {k: v for k, v in os.environ.items() if k != "VYRE_LOG"}
    env["VYRE_CACHE_DIR"] = str(tmp_path / "cache")
    if level is not None:
        env["VYRE_LOG"] = level
    done = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def test_debug_log_names_the_build_the_compile_and_the_run(tmp_path):
    err = _run(tmp_path, "debug")
    assert "vyre DEBUG: vyre.kernel: compiled inc to IR" in err
    assert "vyre DEBUG: vyre.engine: reference: program" in err and "built (interpreter)" in err
    assert "inc ran on reference" in err
    assert "vyre DEBUG: vyre.engine: reference: program" in err and "from the in-memory pipeline cache" in err


def test_no_log_unless_asked_and_unknown_levels_are_reported(tmp_path):
    assert "vyre DEBUG" not in _run(tmp_path, None)
    assert "VYRE_LOG=loud is not a logging level" in _run(tmp_path, "loud")


def test_a_warm_dispatch_does_not_ask_the_logger_when_debug_is_off(monkeypatch):
    """With debug off, a pipeline-cache hit touches neither ``isEnabledFor`` nor ``debug``."""
    import logging

    import numpy as np

    from vyre.driver import acquire
    from vyre.driver.engine import core
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program

    p = Program.wrapped([BufferDecl.read("x", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                        [Node.store("o", Expr.gid(0), Expr.load("x", Expr.gid(0)) + Expr.u32(7))])
    b = acquire("reference")
    x = np.arange(3, dtype=np.uint32)
    old = core.log.level
    core.log.setLevel(logging.WARNING)
    try:
        assert b.dispatch_arrays(p, [x], None)[0].tolist() == [7, 8, 9]   # compiles (reads the level)
        asked: list[str] = []
        monkeypatch.setattr(core.log, "isEnabledFor", lambda level: asked.append("isEnabledFor") or False)
        monkeypatch.setattr(core.log, "debug", lambda *a, **k: asked.append("debug"))
        hits = b.pipeline_cache_snapshot().hits
        assert b.dispatch_arrays(p, [x], None)[0].tolist() == [7, 8, 9]
        assert asked == [] and b.pipeline_cache_snapshot().hits == hits + 1, asked
    finally:
        core.log.setLevel(old)
