"""`vyre demo --backend wgpu` as a user runs it (a subprocess, the real CLI): fma and sqrt on
wgpu, byte-identical to the reference, with the values numpy gives."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import numpy as np

from conftest import get_backend


def test_vyre_demo_runs_on_wgpu():
    get_backend("wgpu")     # skips where there is no adapter
    r = subprocess.run([sys.executable, "-m", "vyre", "demo", "--backend", "wgpu"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"}, timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "ran on wgpu" in r.stdout and "byte-identical to the reference" in r.stdout
    a, b, got = (np.array(ast.literal_eval(next(line for line in r.stdout.splitlines() if line.startswith(k))
                                           .rsplit("= ", 1)[1]), np.float32) for k in ("a ", "b ", "out "))
    assert a.size == b.size == got.size == 8
    # fma(a, b, sqrt(a)) on these small values: the product and the f32 sqrt are exact in
    # float64, and so is their sum; one rounding to f32
    want = (a.astype(np.float64) * b.astype(np.float64) + np.sqrt(a).astype(np.float64)).astype(np.float32)
    assert np.array_equal(got, want)
