"""Runs each atheris target (tests/fuzz/atheris_targets.py) for a fixed time, coverage-guided,
and fails on any finding (an exception other than VyreError, a crash or a hang). The targets
share one process and one budget (VYRE_FUZZ_SECONDS): the first byte of each input picks the
target, so adding one (the kernel frontend) adds no time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris", reason="atheris is a test dependency (make test installs it)")

HERE = Path(__file__).parent
SECONDS = int(os.environ.get("VYRE_FUZZ_SECONDS", "30"))


def test_atheris_every_untrusted_reader(tmp_path):
    """One coverage-guided process over all targets (the first byte picks one)."""
    target = "all"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    env = dict(os.environ, VYRE_KEY_DIR=str(tmp_path / "keys"), VYRE_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, str(HERE / "atheris_targets.py"), target, f"-max_total_time={SECONDS}",
         "-timeout=10", "-rss_limit_mb=2048", "-max_len=4096", str(corpus)],
        capture_output=True, text=True, timeout=SECONDS + 120, env=env)
    runs = re.findall(r"Done (\d+) runs", done.stderr)
    assert done.returncode == 0 and runs, done.stderr[-3000:]
    print(f"atheris: {runs[-1]} inputs over 7 readers (the kernel frontend included) in {SECONDS} s")
