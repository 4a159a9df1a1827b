"""Seeded random draws for the vyre.lib property tests: sizes and workgroup sizes.

Every test draws from its own generator, seeded by the session seed and the test's name, so a
failure replays: each assertion message carries ``seed=...``; rerun with
``VYRE_LIB_SEED=<seed>``. Without it the seed is fixed, so `make test` is the same run every
time (and its compiled programs come from the caches); ``VYRE_LIB_SEED=random`` draws a new
seed to explore.

Each draw is small on purpose: on OpenCL and wgpu every new workgroup size (or program shape)
is a compile, so a test draws one workgroup size from a fixed set (`WORKGROUP_SIZES`) and a
handful of sizes that always include the adversarial ones (0, 1, a prime, 2**k - 1 and
2**k + 1).
"""

from __future__ import annotations

import os
import random
import zlib

import numpy as np

_ASKED = os.environ.get("VYRE_LIB_SEED", "")
SEED = random.SystemRandom().randrange(2**31) if _ASKED == "random" else int(_ASKED or 20261126)
_PRIMES = [p for p in range(2, 6000) if all(p % d for d in range(2, int(p**0.5) + 1))]


def rng_for(name: str) -> np.random.Generator:
    """The generator of one test (``name``: its name and parameters)."""
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def sizes(rng: np.random.Generator, cap: int = 5000) -> list[int]:
    """0, 1, a prime, 2**k - 1 and 2**k + 1 (one random k), all at most ``cap``."""
    k = int(rng.integers(2, max(3, cap.bit_length() - 1)))
    prime = int(rng.choice([p for p in _PRIMES if p <= cap]))
    return sorted({0, 1, prime, 2**k - 1, min(cap, 2**k + 1)})


#: the workgroup sizes a test draws from: one invocation, a prime, a size that is not a power
#: of two, two common ones and WebGPU's guaranteed 256. A fixed set, so that the passes one
#: primitive shares with another (a scan inside a sort, a sort inside unique) are compiled
#: once per size for the whole suite, not once per test (each compile costs ~0.5-1 s on PoCL)
WORKGROUP_SIZES = (1, 7, 32, 64, 100, 256)


def workgroup_size(rng: np.random.Generator, most: int = 256) -> int:
    """One workgroup size of `WORKGROUP_SIZES` up to ``most`` (WebGPU guarantees 256)."""
    return int(rng.choice([w for w in WORKGROUP_SIZES if w <= most]))


def tag(**what: object) -> str:
    """An assertion message naming the draw and the seed that replays it."""
    return ", ".join(f"{k}={v}" for k, v in what.items()) + f", seed={SEED}"


def take_form(monkeypatch, backend, serial: bool) -> None:
    """Makes vyre.lib take its serial form (``serial``: each invocation its own run, what
    `vyre.lib.runner.serial` picks on PoCL) or its GPU form on ``backend``. The serial form is
    not taken on wgpu: no wgpu adapter takes it in use, its Programs' bytes are checked on the
    reference, OpenCL and CUDA, lavapipe compiles its long per-invocation loops slowly, and
    wgpu refuses its exact sums (more than 8 KiB of per-invocation arrays)."""
    import pytest

    from vyre.lib import runner

    if serial and backend.id() == "wgpu":
        pytest.skip("the serial form of vyre.lib runs on serial backends (PoCL); wgpu never takes it")
    monkeypatch.setattr(runner, "serial", lambda _backend: serial)


__all__ = ["SEED", "WORKGROUP_SIZES", "rng_for", "sizes", "tag", "take_form", "workgroup_size"]
