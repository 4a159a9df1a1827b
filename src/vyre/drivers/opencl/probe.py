"""Build a large OpenCL C source in a child process first (``python -m
vyre.drivers.opencl.probe`` reads the source on stdin).

PoCL's compiler can crash the whole process (SIGSEGV in ``clGetProgramInfo(
CL_PROGRAM_BINARIES)``) on very long straight-line kernels, which no exception handler
catches; on Dask that kills worker after worker. So a source of more than
`PROBE_STATEMENTS` statements is built by a child first, exactly as the driver builds it
(`Runtime.build`, which also stores the binary in vyre's disk cache, so the parent then
loads it instead of compiling again). A child that dies of a signal becomes a vyre error
with a Fix; the parent never runs the build that crashed.

Measured on PoCL 3.1 (LLVM 15), 2 shared cores, cold caches: straight-line kernels of 14,000
and 20,000 arithmetic statements build in about 15 to 20 s and give the reference's bytes
(tests/test_hardening3.py runs the 14,000 one). Build time grows much faster with loads and
stores: 1,000 stores took 10 s, 4,000 took 70 s, and 14,000 stores or 14,000 loads did not
finish within 600 s; such a build ends at `PROBE_TIMEOUT_S` with `KernelCompileFailed`."""

from __future__ import annotations

import os
import subprocess
import sys

from vyre.driver.errors import KernelCompileFailed, UnsupportedFeature

ID = "opencl"
PROBE_STATEMENTS = 4096   # lowered statements past which a build is tried in a child first
PROBE_TIMEOUT_S = 900.0
SPLIT_FIX = ("split the program into several smaller programs (fewer statements each), or "
             "run it on another backend (cuda, wgpu, reference).")


def build_in_child(source: str, statements: int) -> None:
    """Build ``source`` in a child process; raise a vyre error if the child does not
    survive it (the caller then must not build it in-process)."""
    try:
        done = subprocess.run([sys.executable, "-m", "vyre.drivers.opencl.probe"], input=source.encode(),
                              capture_output=True, timeout=PROBE_TIMEOUT_S, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        raise KernelCompileFailed(f"the OpenCL compiler did not finish a kernel of {statements} statements "
                                  f"within {PROBE_TIMEOUT_S:.0f} s.", SPLIT_FIX, backend=ID) from None
    except OSError as exc:
        raise KernelCompileFailed(f"could not start a process to build a kernel of {statements} statements "
                                  f"({exc}).", "free memory or processes, or " + SPLIT_FIX, backend=ID) from None
    if done.returncode < 0:
        raise UnsupportedFeature(f"a kernel of {statements} statements (the OpenCL compiler crashed with "
                                 f"signal {-done.returncode} building it)", ID, SPLIT_FIX)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        raise KernelCompileFailed(f"building a kernel of {statements} statements failed in a child "
                                  f"process: {tail[0][:500]}", SPLIT_FIX, backend=ID)


def main() -> None:
    from .runtime import Runtime

    Runtime().build(sys.stdin.read())


if __name__ == "__main__":
    main()
