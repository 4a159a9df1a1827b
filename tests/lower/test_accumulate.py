"""`vyre.lower.accumulate`, the float-atomic rewrite (S36), as an IR -> IR transform: its
result is a Program with u32 atomics only (its locals use the reserved prefix ``__vy``, so no
user local collides with them), and run on the reference (with its hidden
scratch declared as static outputs, as the engine sizes them) it gives the bytes the
reference gives the original program."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import reference
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir.launch import resolve
from vyre.lower.accumulate import ADD_WORDS, accumulate
from vyre.reference import execute

from helpers import GX

F, H, BF, U = DataType.F32, DataType.F16, DataType.BF16, DataType.U32


def _program(t: DataType, op: AtomicOp, slots: int = 11) -> Program:
    return Program.wrapped([BufferDecl.read("x", 0, t), BufferDecl.read("ix", 1, U),
                            BufferDecl.read_write("out", 2, t, slots)], 16,
                           [Node.if_(GX.lt(Expr.buf_len("x")),
                                     [Node.expr(Expr.atomic(op, "out", Expr.load("ix", GX), Expr.load("x", GX)))])])


def test_a_program_without_float_atomics_is_returned_as_it_is():
    p = Program.wrapped([BufferDecl.output("o", 0, U, 4)], 4, [Node.expr(Expr.atomic(AtomicOp.ADD, "o", 0, 1))])
    acc = accumulate(p)
    assert acc.program is p and acc.scratch == ()


@pytest.mark.parametrize("t", [F, H, BF], ids=lambda t: t.value)
@pytest.mark.parametrize("op", [AtomicOp.ADD, AtomicOp.MIN, AtomicOp.MAX], ids=lambda o: o.value)
def test_the_rewrite_means_what_the_float_atomics_mean(t, op):
    p = _program(t, op)
    acc = accumulate(p)
    (s,) = acc.scratch
    assert (s.target, s.words) == ("out", ADD_WORDS if op is AtomicOp.ADD else 1)
    q = acc.program
    assert not q.facts.float_atomics and q.facts.atomic_buffers == {s.name}
    assert q.buffer(s.name).dtype is U and len(q.body) == len(p.body) + 3   # + grid_sync, slot, final
    # the engine's sizing of the hidden buffer, written in as a static count
    sized = Program(tuple(b.with_count(s.words * 11) if b.name == s.name else b for b in q.buffers),
                    q.workgroup_size, q.body, q.functions)
    rng = np.random.default_rng(7)
    raw = rng.standard_normal(500).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, -3e38], np.float32)
    raw[rng.integers(0, 500, 60)] = rng.choice(special, 60)
    if t is F:
        x, init = raw, rng.standard_normal(11).astype(np.float32)
    elif t is H:
        with np.errstate(over="ignore"):
            x, init = raw.astype(np.float16), rng.standard_normal(11).astype(np.float16)
    else:
        x = (raw.view(np.uint32) >> 16).astype(np.uint16)
        init = (rng.standard_normal(11).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    ix = rng.integers(0, 13, 500).astype(np.uint32)
    want = reference.run(p, [x, ix, init])[0]
    assert _run_unchecked(sized, [x, ix, init])["out"].tobytes() == want


def _run_unchecked(program: Program, inputs: list) -> dict:
    """The reference's execution of ``program`` without its validation (the rewrite's
    locals use the reserved prefix)."""
    launch = resolve(program, [a.nbytes for a in inputs])
    counts = dict(launch.counts)
    memory = {d.name: np.frombuffer(a.tobytes(), d.dtype.storage).copy() for d, a in zip(program.inputs, inputs)}
    memory |= {d.name: np.zeros(counts[d.name], d.dtype.storage) for d in program.buffers
               if d.access.value == "output"}
    execute(program, launch, memory)
    return memory
