"""The generated sources of a fixed program set are pinned (tests/lower/golden/sources.json):
the CUDA C, OpenCL C and WGSL text of every conformance-corpus program (with its tuner
variants) and of fixed random programs, each as the sha256 of its text (a refusal's error
text where the target refuses it), made by ``scripts/dump-sources --update-baseline``.

A codegen change that alters any of them fails here with the list of programs whose source
changed. When the change is meant, refresh the file with that command and commit it with the
change (``scripts/dump-sources DIR`` on both trees and ``diff -r`` show the texts)."""

from __future__ import annotations

from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_LOADER = SourceFileLoader("dump_sources", str(ROOT / "scripts" / "dump-sources"))
DUMP = module_from_spec(spec_from_loader("dump_sources", _LOADER))
_LOADER.exec_module(DUMP)
CODEGEN = {"cuda": "vyre.drivers.cuda.codegen", "opencl": "vyre.drivers.opencl.codegen",
           "wgsl": "vyre.drivers.wgpu.backend"}


def test_the_baseline_covers_every_target_and_the_corpus():
    from vyre.conform.corpus import corpus

    stored = DUMP.stored_baseline()
    assert set(CODEGEN) == set(DUMP.TARGETS)
    for target in DUMP.TARGETS:
        assert {f"{target}:corpus/{e.name}" for e in corpus()} <= stored.keys(), target
    for target, kind in (("cuda", "random"), ("opencl", "random"), ("wgsl", "random-wgpu")):
        names = {k for k in stored if k.startswith(f"{target}:{kind}/") and "@" not in k}
        assert len(names) == len(DUMP.BASELINE_SEEDS), target
    assert all(len(v) == 32 and int(v, 16) >= 0 for v in stored.values())


@pytest.mark.parametrize("target", sorted(CODEGEN))
def test_generated_sources_match_the_baseline(target):
    pytest.importorskip(CODEGEN[target])   # printing needs no device, only the driver's module
    stored = {k: v for k, v in DUMP.stored_baseline().items() if k.startswith(f"{target}:")}
    now = DUMP.baseline_digests((target,))
    diff = DUMP.changes(stored, now)
    assert not diff, (f"{len(diff)} generated {target} sources differ from the baseline:\n  "
                      + "\n  ".join(diff[:40]) + ("\n  ..." if len(diff) > 40 else "")
                      + f"\nIf the codegen change is meant, refresh it: {DUMP.REFRESH}")


def test_a_changed_source_is_named():
    """`changes` names every changed, new and missing program (the test's own message)."""
    assert DUMP.changes({"cuda:a": "1", "cuda:b": "2", "cuda:c": "3"},
                        {"cuda:a": "1", "cuda:b": "9", "cuda:d": "4"}) == \
        ["changed cuda:b", "new     cuda:d", "gone    cuda:c"]
