"""One decision of "can this backend run it" (vyre.driver.runnable): routing's answer and the
dispatch's agree on every corpus program and on every backend, and a refusal is the error the
dispatch raises."""

from __future__ import annotations

import pytest

from vyre.conform.corpus import corpus
from vyre.driver import BackendError, LimitExceeded, UnsupportedFeature, can_run
from vyre.driver.registry import why_not
from vyre.driver.runnable import refusals
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

ENTRIES = corpus()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_routing_and_dispatch_agree(backend, entry):
    ok = can_run(entry.program, backend)
    try:
        backend.dispatch(entry.program, entry.inputs)
    except (UnsupportedFeature, LimitExceeded) as err:
        assert not ok, f"routing said {backend.id()} runs {entry.name}, the dispatch refused: {err}"
        assert str(refusals(entry.program, backend)[0].error(backend.id())) == str(err)
        return
    except BackendError:
        pass   # a dispatch-time error of the inputs, not a refusal
    assert ok, f"routing refused {entry.name} on {backend.id()}: {why_not(entry.program, backend)}"


def test_a_limit_refusal_is_the_limit_error(backend):
    big = (backend.max_workgroup_size()[0] + 1, 1, 1)
    p = Program.wrapped([BufferDecl.output("o", 0, DataType.U32)], big,
                        [Node.store("o", Expr.gid_x(), Expr.u32(1))])
    reasons = refusals(p, backend)
    assert reasons and reasons[0].limit == "workgroup_size"
    with pytest.raises(LimitExceeded, match="workgroup size") as err:
        backend.dispatch(p, [])
    assert err.value.reason == "workgroup_size"
