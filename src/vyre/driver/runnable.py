"""Whether a backend can run a program: the one place that decides it.

`refusals(program, backend)` lists every reason a backend cannot run a program, each a
`Refusal` that can become the error a dispatch raises. Routing and ``vyre backends
--explain`` read the reasons (`vyre.driver.registry.why_not`); the engine raises the first
one before it builds anything. The checks read the program's facts (`vyre.ir.facts`) and the
backend's declared capabilities, then the backend's own target checks (`VyreBackend.refuse`),
so routing never promises a program that the dispatch then refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vyre.ir.program import Program

from .errors import BackendError, LimitExceeded, UnsupportedFeature

if TYPE_CHECKING:
    from .backend import VyreBackend


@dataclass(frozen=True)
class Refusal:
    """One reason a backend cannot run a program. ``limit`` names the `LimitExceeded`
    reason for limit refusals (None: an unsupported feature)."""

    reason: str          # short, for routing tables and --explain
    message: str         # the error's message
    fix: str
    limit: str | None = None
    error_override: BackendError | None = None   # the target's own error, raised as is

    def error(self, backend: str) -> BackendError:
        """The error a dispatch of the program raises for this refusal."""
        if self.error_override is not None:
            return self.error_override
        if self.limit is not None:
            return LimitExceeded(self.limit, self.message, self.fix, backend=backend)
        return UnsupportedFeature(self.message, backend, self.fix)


def refusals(program: Program, backend: VyreBackend) -> list[Refusal]:
    """Every reason ``backend`` cannot run ``program`` (empty: it can)."""
    facts = program.facts
    out: list[Refusal] = []
    missing = sorted(facts.op_set - backend.supported_ops())
    if missing:
        out.append(Refusal(f"unsupported ops: {', '.join(missing)}", f"ops {', '.join(missing)}",
                           "run this program on a backend whose supported_ops() has them "
                           "(`vyre backends --explain FILE` says which)."))
    wg, mx = program.workgroup_size, tuple(backend.max_workgroup_size())
    most = backend.max_compute_invocations_per_workgroup()
    if any(a > b for a, b in zip(wg, mx)) or program.invocations_per_workgroup > most:
        reason = (f"workgroup size {wg} exceeds {mx}" if any(a > b for a, b in zip(wg, mx)) else
                  f"{program.invocations_per_workgroup} invocations per workgroup exceed {most}")
        out.append(Refusal(reason, f"workgroup size {wg} exceeds this device's {mx} per axis / "
                           f"{most} invocations.", "use a smaller workgroup size (DispatchConfig."
                           "workgroup_override).", limit="workgroup_size"))
    if facts.subgroup_ops and not backend.supports_subgroup_ops():
        out.append(Refusal("needs subgroup operations", "subgroup operations",
                           "run it on a backend with subgroup support (cuda, reference), or "
                           "rewrite it with workgroup memory and barriers."))
    shared, limit = facts.workgroup_bytes, backend.device_profile().max_shared_memory_bytes
    if shared and shared > limit:
        out.append(Refusal(f"{shared} bytes of workgroup memory exceed {limit}",
                           f"{shared} bytes of workgroup memory exceed this device's {limit}.",
                           "use smaller workgroup buffers.", limit="shared_memory"))
    if not out:
        try:
            backend.refuse(program)
        except BackendError as err:
            reason = err.message.removeprefix(f"[{backend.id()}] ")
            out.append(Refusal(reason.removesuffix(" is not supported by this backend."),
                               err.message, err.fix or "", error_override=err))
    return out
