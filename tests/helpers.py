"""Test helpers: build tiny programs and compare a backend's bytes with the reference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vyre import reference
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

GX = Expr.gid_x()


def words(values, dtype=np.uint32) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def as_u32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype="<u4")


def as_i32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype="<i4")


def as_f32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype="<f4")


def map_program(in_types: Sequence[DataType], out_type: DataType, make_value, wg: int = 8) -> Program:
    """out[gid] = make_value(load(x0, gid), load(x1, gid), ...)."""
    bufs = [BufferDecl.read(f"x{i}", i, t) for i, t in enumerate(in_types)]
    bufs.append(BufferDecl.output("out", len(in_types), out_type))
    args = [Expr.load(f"x{i}", GX) for i in range(len(in_types))]
    return Program.wrapped(bufs, wg, [Node.store("out", GX, make_value(*args))])


def run_checked(backend, program: Program, inputs: Sequence, config=None) -> list[bytes]:
    """Run on ``backend``, assert byte identity with the reference, return the bytes."""
    expected = reference.run(program, inputs, config)
    got = backend.dispatch(program, inputs, config)
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            x, y = as_u32(a), as_u32(b)
            bad = np.flatnonzero(x != y) if len(x) == len(y) else []
            raise AssertionError(
                f"{backend.id()} output {i} differs from the reference at elements {list(bad[:8])}: "
                f"got {[hex(v) for v in x[bad[:8]]]} expected {[hex(v) for v in y[bad[:8]]]}")
    return got
