"""How much of a random sample a test takes on a backend (docs/testing.md).

On OpenCL, wgpu and CUDA every new program is a compile (a second or more on PoCL and
lavapipe, where `make test` runs), so random tests there take a smaller sample: fewer generated
programs, workgroup sizes from a small fixed set. The reference interprets (a new program
costs nothing) and keeps the whole sample. ``VYRE_TEST_SAMPLE=full`` gives every backend the
whole sample (`make test-full`).
"""

from __future__ import annotations

import os

FULL = os.environ.get("VYRE_TEST_SAMPLE", "") == "full"


def small(backend) -> bool:
    """Whether ``backend`` (an object or an id) takes the smaller sample: it compiles each new
    program and ``VYRE_TEST_SAMPLE`` is not ``full``."""
    backend_id = backend if isinstance(backend, str) else backend.id()
    return not FULL and backend_id != "reference"


def examples(backend, whole: int, compiled: int) -> int:
    """Examples of a generated-program test on ``backend``: ``whole`` where programs are cheap
    (or the full sample is asked for), else ``compiled``."""
    return compiled if small(backend) else whole


__all__ = ["FULL", "examples", "small"]
