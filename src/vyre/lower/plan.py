"""The backend-neutral kernel plan: what every code generator needs to know about a
validated Program before printing target source.

A plan fixes the kernel ABI (bound buffers in binding order, one u32 element count per bound
buffer, then the dispatch's control block ``vy_ctl``: word 0 holds the error bits
(`vyre.driver.errors.CTL_ERRORS`: a signed division fault, a while loop over its cap),
word 1 the cancel flag the engine raises on a timeout), the phases (top-level grid_sync splits the program
into kernels launched in sequence), the workgroup arrays, and whether an invocation can end
early in a program with barriers (then it must keep reaching barriers: the "alive" scheme).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.inline import inline
from vyre.ir.kinds import kind_of
from vyre.ir.program import BufferDecl, Program
from vyre.ir.types import MemoryOrdering

from .accumulate import Scratch, accumulate
from .legalize.matmul import Keep, expand_matmul
from .legalize.tile import Keep as TileKeep
from .legalize.tile import expand_tiles
from .loops import LoopFacts, analyse

ENTRY = "vyre_phase_{}"


@dataclass(frozen=True)
class KernelPlan:
    program: Program
    bound: tuple[BufferDecl, ...]        # kernel buffer params, binding order
    workgroup: tuple[BufferDecl, ...]    # per-workgroup arrays
    phases: tuple[tuple[N.Node, ...], ...]
    needs_error_flag: bool               # i32 DIV/MOD present: errors reported via a flag word
    has_barrier: bool
    uses_transcendentals: bool
    fully_written: frozenset[str] = frozenset()  # outputs stored at gid.x by every lane (ProgramFacts)
    cancel_checked: tuple[bool, ...] = ()  # per phase: loops poll vy_ctl[1] (no barrier there)
    # elementwise vector form: each invocation runs the body for `vector` consecutive gid.x
    # (4: 128-bit loads/stores of `vector_loads`/`vector_stores` when aligned and in range),
    # and the kernel takes the logical global x size as one more count word (vy_gx)
    vector: int = 1
    vector_loads: frozenset[str] = frozenset()
    vector_stores: frozenset[str] = frozenset()
    uses_wide: bool = False              # u64/i64 values: the 64-bit helpers are emitted
    uses_half: bool = False              # f16/bf16 values: the 16-bit float helpers too
    wide_atomics: bool = False           # 64-bit atomics (a device capability)
    # per phase: (buffer, word offset) of an indirect_dispatch grid, or None
    indirect: tuple[tuple[str, int] | None, ...] = ()
    phase_loops: tuple[bool, ...] = ()     # per phase: whether it has a loop
    # which loops keep the while cap and the cancel poll (`vyre.lower.loops`)
    loops: LoopFacts = field(default_factory=LoopFacts)
    native_matmul: bool = False          # matmul_acc statements left for the target to print
    native_tiles: bool = False           # load_tile statements left for the target to print
    # hidden u32 buffers of float atomics (S36, `vyre.lower.accumulate`), bound last in this
    # order; when any, the last phase finalises their targets over a grid of its own
    scratch: tuple[Scratch, ...] = ()
    # the vector form's lanes as a loop the target's compiler vectorises, the correctly
    # rounded functions of `vyre.lower.crmath.LANE_HELPER` on their branch-free common path
    # there, and the lanes that leave it run again after (`vyre.lower.cfamily.lane_loop_ops`)
    lane_loop: bool = False

    @property
    def stoppable(self) -> bool:
        """Every phase with a loop of unbounded work polls the cancel word (phases without
        such loops end soon anyway): a cancelled dispatch of this plan stops."""
        long = self.loops.polling or self.phase_loops
        return all(checked or not loops for checked, loops in zip(self.cancel_checked, long))

    @property
    def uses_ctl(self) -> bool:
        """Whether a kernel reads or writes its control block (else the driver need not reset
        or read it back)."""
        return self.needs_error_flag or any(self.cancel_checked)

    def skips_zero_fill(self, name: str, count: int, global_x: int) -> bool:
        """True when every element of output ``name`` is overwritten by the dispatch, so the
        driver need not zero it first (S18 still holds: no element keeps a stale value)."""
        return name in self.fully_written and global_x >= count

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(ENTRY.format(i) for i in range(len(self.phases)))

    def param_index(self, name: str) -> int:
        for i, b in enumerate(self.bound):
            if b.name == name:
                return i
        raise KeyError(name)


MAX_VECTOR_STATEMENTS = 64
# the vector form runs four invocations one after another in each thread: it pays for
# streaming kernels (one 128-bit access for four) but not where loops do the work, where it
# leaves a quarter of the threads to hide latency (an n-body step of 16K bodies ran on 4K)
MAX_VECTOR_TRIPS = 64


def _vector_form(program: Program) -> tuple[frozenset[str], frozenset[str]] | None:
    """(buffers loaded at gid.x, buffers stored at gid.x) when the program may run four
    consecutive invocations per thread without any change of meaning: one phase, no
    barriers, workgroup memory, atomics, subgroups or early returns, gid.x the only id, a 1-D
    workgroup, and a small body (and, `lower` checks, few loop trips: `MAX_VECTOR_TRIPS`).
    Loads of READ buffers at exactly gid.x become vector loads;
    OUTPUT buffers stored exactly once, unconditionally at top level at gid.x and never read,
    become vector stores. Everything else stays a scalar access of its invocation."""
    if program.workgroup_buffers or program.local_buffers or program.workgroup_size[1:] != (1, 1):
        return None
    if any(b.dtype.size != 4 for b in program.buffers):   # uint4 = four 32-bit elements
        return None
    nodes = list(N.walk_nodes(program.body))
    if len(nodes) > MAX_VECTOR_STATEMENTS or \
            any(isinstance(n, N.Barrier | N.Return | N.While | N.IndirectDispatch) for n in nodes):
        return None
    gx = E.Expr.gid_x()
    loads: set[str] = set()
    read: set[str] = set()
    for e in N.walk_exprs(program.body):
        if isinstance(e, E.Atomic) or kind_of(e).subgroup or (isinstance(e, E.Id) and e != gx):
            return None
        if isinstance(e, E.Load | E.BufLen):
            read.add(e.buffer)
        if isinstance(e, E.Load) and e.index == gx and program.buffer(e.buffer).access.value == "read":
            loads.add(e.buffer)
    stored = [n.buffer for n in nodes if isinstance(n, N.Store)]
    top = [n.buffer for n in program.body if isinstance(n, N.Store) and n.index == gx]
    stores = {b for b in top if stored.count(b) == 1 and b not in read
              and program.buffer(b).access.value == "output"}
    if not loads and not stores:
        return None
    return frozenset(loads), frozenset(stores)


def propagate_ids(program: Program) -> Program:
    """Replace each local that is bound once to an invocation id (``i = gid()``) and never
    reassigned by the id itself, so the plan sees ``out[gid.x]`` (the vector form and the
    zero-fill skip look for exactly that). The id is pure: the meaning cannot change."""
    lets: dict[str, list[E.Expr]] = {}
    assigned: set[str] = set()
    for n in N.walk_nodes(program.body):
        if isinstance(n, N.Let):
            lets.setdefault(n.name, []).append(n.value)
        elif isinstance(n, N.Assign):
            assigned.add(n.name)
        elif isinstance(n, N.Loop):
            assigned.add(n.var)
    ids = {name: vals[0] for name, vals in lets.items()
           if len(vals) == 1 and isinstance(vals[0], E.Id) and name not in assigned}
    if not ids:
        return program
    from vyre.ir.rewrite import map_body

    def sub(e: E.Expr) -> E.Expr:
        return ids[e.name] if isinstance(e, E.Var) and e.name in ids else e

    return Program(program.buffers, program.workgroup_size, map_body(program.body, sub), program.functions)


def lower(program: Program, vector: bool = False,
          legalize: Callable[[Program], Program] | None = None, matmul: Keep | None = None,
          tiles: TileKeep | None = None) -> KernelPlan:
    """Plan the kernels of a *validated* program (``vector``: the target can emit the
    elementwise vector form, see `_vector_form`). Float atomics are rewritten onto u32
    atomics first (`vyre.lower.accumulate`), then the target's ``legalize`` rewrite runs, if
    any. Functions are inlined (`vyre.ir.inline`): the plan's program has none. Each
    matmul_acc becomes scalar loops (`vyre.lower.legalize.matmul`) unless
    ``matmul(program, statement)`` says the target prints it itself (`Syntax.matmul`); a
    matmul_acc left acts as a barrier here. Each load_tile likewise becomes a scalar copy
    (`vyre.lower.legalize.tile`) unless ``tiles(program, statement)`` claims it (`Syntax.tile`)."""
    acc = accumulate(program)
    program = acc.program if legalize is None else legalize(acc.program)
    program = expand_tiles(expand_matmul(propagate_ids(inline(program)), matmul), tiles)
    phases: list[list[N.Node]] = [[]]
    for n in program.body:
        if isinstance(n, N.Barrier) and n.ordering is MemoryOrdering.GRID_SYNC:
            phases.append([])
        else:
            phases[-1].append(n)
    facts = program.facts   # of the inlined program: one walk, shared with every later stage
    native = bool(facts.matmul) or facts.tile_loads
    # A kernel can only run long in a loop; where no barrier needs every lane to arrive, its
    # loops poll the cancel word so a timed-out dispatch stops instead of running on. Loops
    # of bounded work need not poll, nor whiles that cannot reach their cap count trips
    # (`vyre.lower.loops`).
    if len(phases) == 1:   # the program's facts are the phase's
        loops, barriers = (facts.loops,), (facts.barrier or facts.grid_sync or native,)
    else:
        walks = [list(N.walk_nodes(p)) for p in phases]
        loops = tuple(any(isinstance(n, N.Loop | N.While) for n in w) for w in walks)
        barriers = tuple(any(kind_of(n).syncs for n in w) for w in walks)
    verdicts = analyse(program, tuple(tuple(p) for p in phases)) if facts.loops else LoopFacts()
    long = verdicts.polling or loops
    cancel = tuple(lp and not b for lp, b in zip(long, barriers))
    form = _vector_form(program) if vector and len(phases) == 1 and verdicts.work <= MAX_VECTOR_TRIPS else None
    indirect = tuple((p[0].buffer, p[0].offset) if p and isinstance(p[0], N.IndirectDispatch) else None
                     for p in phases)
    return KernelPlan(program, facts.bound, program.workgroup_buffers, tuple(tuple(p) for p in phases),
                      facts.division or any(verdicts.capping), facts.barrier or native, facts.transcendental,
                      facts.fully_written, cancel,
                      4 if form else 1, *(form or (frozenset(), frozenset())),
                      uses_wide=facts.uses_wide, uses_half=facts.uses_half,
                      wide_atomics=facts.wide_atomics, indirect=indirect, phase_loops=loops,
                      loops=verdicts, native_matmul=bool(facts.matmul), native_tiles=facts.tile_loads,
                      scratch=acc.scratch)
