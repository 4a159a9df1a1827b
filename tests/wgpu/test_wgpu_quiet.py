"""wgpu outside `make`: no "XDG_RUNTIME_DIR is invalid" noise from Mesa on stderr (issue 25),
and a usable XDG_RUNTIME_DIR of the user's own is left alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CODE = """
import numpy as np, os
from vyre.driver import acquire
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
gx = Expr.gid_x()
p = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                    [Node.store("o", gx, Expr.load("a", gx) + 1)])
out = acquire("wgpu").dispatch(p, [np.arange(4, dtype=np.uint32)])[0]
assert np.frombuffer(out, np.uint32).tolist() == [1, 2, 3, 4]
print(os.environ["XDG_RUNTIME_DIR"])
"""


def _run(env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=120)
    if "unavailable" in done.stderr:
        pytest.skip("wgpu unavailable here")
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_no_runtime_dir_noise_without_one():
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    done = _run(env)
    assert "XDG_RUNTIME_DIR" not in done.stderr, done.stderr
    made = done.stdout.split()[-1]
    assert os.path.isdir(made) and (os.stat(made).st_mode & 0o777) == 0o700


def test_a_usable_runtime_dir_is_left_alone(tmp_path):
    mine = tmp_path / "run"
    mine.mkdir(mode=0o700)
    done = _run(dict(os.environ, XDG_RUNTIME_DIR=str(mine)))
    assert done.stdout.split()[-1] == str(mine)
