"""A hypothesis state machine over the public API, on every available backend: programs
(valid and broken), configs, inputs (right, wrong and hostile), resident buffers, bound
dispatches, batches and lifecycle calls, in random order.

Invariant: every call gives the reference's bytes or raises a documented error — a
`VyreError` whose text ends in a Fix — and never another exception, a crash or a hang.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conftest import get_backend
from vyre import reference
from vyre.conform.generator import GenOptions, random_program
from vyre.driver import Batch, DispatchConfig, persistent
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, VyreError
from vyre.ir import expr as E

FIX = re.compile(r"Fix: \S")
SMALL = GenOptions(max_stmts=4, max_depth=2, expr_depth=2)
CASES = {"count": 0, "errors": 0}


def _bad_program(kind: int) -> Program:
    gx = Expr.gid_x()
    return [
        Program.wrapped([BufferDecl.read("a", 0, DataType.U32)], 4, [Node.store("a", gx, 1)]),   # V008
        Program.wrapped([BufferDecl.output("o", 0, DataType.U32, 4)], 4, [Node.store("o", gx, E.Lit(DataType.U32, 2**33))]),
        Program((BufferDecl.output("o", 0, DataType.U32, 4),), (0, 1, 1), ()),                      # V009
        Program((), (4, 1, 1), ("junk",)),                                                           # V030
    ][kind % 4]


def _bad_input(kind: int, good: np.ndarray):
    return [good.astype(np.float64), good.astype(">u4"), None, "abc", [1, 2, 3], good[::2] if good.size > 1 else 7,
            np.array([object()]), b"\x00\x01\x02"][kind % 8]


class ApiMachine(RuleBasedStateMachine):
    backend_id = "reference"

    @initialize()
    def setup(self):
        self.b = get_backend(self.backend_id)
        self.programs: list[tuple[Program, list]] = []
        self.resources: list = []
        self.bounds: list = []

    def _expect(self, fn, want=None):
        CASES["count"] += 1
        try:
            got = fn()
        except VyreError as err:
            CASES["errors"] += 1
            assert FIX.search(str(err)), f"error without a Fix: {err!r}"
            return None
        if want is not None:
            assert got == want
        return got

    @rule(seed=st.integers(0, 2**30))
    def new_program(self, seed):
        p, ins = random_program(seed, SMALL)
        self.programs.append((p, ins))
        self.programs = self.programs[-6:]

    @precondition(lambda self: self.programs)
    @rule(i=st.integers(0, 5), entry=st.sampled_from(["sync", "timed", "async", "pipeline", "into"]),
          timeout=st.sampled_from([None, 30.0]), fix=st.sampled_from([1, 1, 3]))
    def dispatch(self, i, entry, timeout, fix):
        p, ins = self.programs[i % len(self.programs)]
        cfg = DispatchConfig(timeout=timeout, fixpoint_iterations=fix)
        try:
            want = reference.run(p, ins, cfg) if fix == 1 else None
        except VyreError:
            want = None
        b = self.b
        fns = {"sync": lambda: b.dispatch(p, ins, cfg),
               "timed": lambda: b.dispatch_borrowed_timed(p, ins, cfg).outputs,
               "async": lambda: b.dispatch_async(p, ins, cfg).await_result(),
               "pipeline": lambda: P.compile(b, p).dispatch(ins, cfg),
               "into": lambda: (lambda out: (b.dispatch_borrowed_into(p, ins, cfg, out), out)[1])([])}
        self._expect(fns[entry], want)

    @precondition(lambda self: self.programs)
    @rule(i=st.integers(0, 5), j=st.integers(0, 64), kind=st.integers(0, 7))
    def dispatch_bad_input(self, i, j, kind):
        p, ins = self.programs[i % len(self.programs)]
        if not ins:
            return
        bad = list(ins)
        bad[j % len(ins)] = _bad_input(kind, np.asarray(ins[j % len(ins)]))
        self._expect(lambda: self.b.dispatch(p, bad))

    @rule(kind=st.integers(0, 3))
    def dispatch_bad_program(self, kind):
        self._expect(lambda: self.b.dispatch(_bad_program(kind), []))

    @rule(n=st.sampled_from([0, 4, 64, 4096, -1, "8", None]))
    def allocate(self, n):
        r = self._expect(lambda: self.b.allocate_resident(n))
        if r is not None:
            self.resources.append(r)

    @precondition(lambda self: self.resources)
    @rule(i=st.integers(0, 64), data=st.sampled_from(["right", "short", "list", "f64"]))
    def upload(self, i, data):
        r = self.resources[i % len(self.resources)]
        n = r.byte_len // 4
        value = {"right": np.arange(n, dtype=np.uint32), "short": np.zeros(max(0, n - 1), np.uint32),
                 "list": list(range(n)), "f64": np.zeros(n, np.float64)}[data]
        self._expect(lambda: self.b.upload_resident(r, value))

    @precondition(lambda self: self.resources)
    @rule(i=st.integers(0, 64))
    def free(self, i):
        r = self.resources[i % len(self.resources)]
        self._expect(lambda: self.b.free_resident(r))

    @precondition(lambda self: self.resources)
    @rule(i=st.integers(0, 64), how=st.sampled_from(["timed", "bind", "persistent", "batch"]))
    def resident(self, i, how):
        r = self.resources[i % len(self.resources)]
        gx = Expr.gid_x()
        p = Program.wrapped([BufferDecl.read_write("x", 0, DataType.U32)], 64,
                            [Node.store("x", gx, Expr.load("x", gx) * 3 + 1)])
        b = self.b

        def go():
            if how == "timed":
                return b.dispatch_resident_timed(p, [r])
            if how == "bind":
                bound = b.bind_resident(p, [r])
                self.bounds.append(bound)
                return bound.run()
            if how == "persistent":
                return persistent.bind(b, p, [r]).run()
            return Batch(b).add(p, [r]).add(p, [r]).run()

        self._expect(go)

    @precondition(lambda self: self.bounds)
    @rule(i=st.integers(0, 64), op=st.sampled_from(["launch", "run", "release"]))
    def use_bound(self, i, op):
        bound = self.bounds[i % len(self.bounds)]
        self._expect(getattr(bound, op))

    @rule()
    def lifecycle(self):
        self._expect(self.b.flush)
        self._expect(self.b.prepare)
        assert self.b.device_lost() is False

    @invariant()
    def still_dispatches(self):
        if not hasattr(self, "b"):
            return
        gx = Expr.gid_x()
        p = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 4,
                            [Node.store("o", gx, Expr.load("a", gx) ^ 0x5A5A)])
        a = np.arange(9, dtype=np.uint32)
        assert self.b.dispatch(p, [a]) == reference.run(p, [a])

    def teardown(self):
        for bound in getattr(self, "bounds", []):
            bound.release()
        for r in getattr(self, "resources", []):
            if not r.freed:
                self.b.free_resident(r)


@pytest.mark.parametrize("backend_id", ["reference", "opencl", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_public_api_state_machine(backend_id):
    get_backend(backend_id)
    machine = type(f"ApiMachine_{backend_id}", (ApiMachine,), {"backend_id": backend_id})
    run = machine.TestCase
    run.settings = settings(max_examples=25, stateful_step_count=25, deadline=None,
                            suppress_health_check=list(HealthCheck))
    before = CASES["count"]
    run("runTest").runTest()
    print(f"{backend_id}: {CASES['count'] - before} API calls checked")
