"""load_tile on CUDA (sm_80 and newer): asynchronous copies (``cp.async``), multi-stage
pipelines, and workgroup memory past 48 KiB.

Owns the CUDA form of `vyre.ir.node.LoadTile` and when it is used (`claims`); everywhere else
a load_tile is the scalar copy of `vyre.lower.legalize.tile`, with the same bytes.

**One load_tile** is a barrier, 16-byte ``cp.async`` copies of the tile's chunks (the copy
itself zero-fills what lies past ``rows_in`` x ``cols_in`` or past the end of ``src``: its
source size is the chunk's valid prefix), a wait for them, and a barrier. A chunk needs the
source pointer, ``offset`` and ``stride`` 16-byte aligned, checked at run time (once, the same
in every thread); otherwise, and where an index of the tile would wrap past 2**32, the tile is
copied element by element, synchronously, with the same bytes.

**A pipeline** (`pipelines`): a counted loop whose body is exactly some load_tile statements
followed by one matmul_acc reading their destinations, where those arrays are named nowhere
else in the program and the tiles' offsets and limits are pure expressions of the loop
variable and locals from before the loop. Then the loop runs ``stages`` trips of copies ahead:
each destination has ``stages`` copies (stage ``(v - from) % stages`` for trip ``v``); the
first trip issues the copies of trips ``from .. from+stages-2``; every trip waits until its own
copies have landed (``cp.async.wait_group stages-2``) and meets the workgroup at a barrier
(one barrier a trip: every warp is then past the matmul_acc of the trip before), issues the
copies of trip ``v + stages - 1`` into the stage that matmul_acc read, and its matmul_acc reads
its own stage; only the last trip's matmul_acc ends with a barrier. The
offsets of a later trip are the statement's own expressions printed with the loop variable
rebound to that trip in a nested scope. So the tensor cores of trip ``v`` overlap the copies
of the next ``stages - 1`` trips, and the bytes are those of the loop as written.

**Workgroup memory** (`layout`): ``stages`` multiplies the pipelined arrays; the most stages
(at most `MAX_STAGES`) whose total fits the device's opt-in limit are used. A kernel whose
arrays take more than `STATIC_LIMIT` bytes declares them in dynamic shared memory (``extern
__shared__``) and its launch asks for that many bytes (`vyre.driver.engine.device.Kernel.
shared_bytes`; the CUDA device raises the function's limit when it loads it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.kinds import BINDS, kind_of
from vyre.ir.program import Program
from vyre.ir.typecheck import TypeFault, infer
from vyre.ir.types import DataType

from . import imma

if TYPE_CHECKING:
    from vyre.lower.plan import KernelPlan
    from vyre.lower.printer import Printer

STATIC_LIMIT = 48 * 1024   # static __shared__ per block: more needs dynamic shared memory
MAX_STAGES = 4

PRELUDE = r"""
// ---- load_tile as asynchronous copies (vyre.drivers.cuda.tiles) ----
// 16 bytes from global src to shared dst, of which the first `bytes` are read (0..16) and the
// rest zero-filled; vy_cp16_all: all 16 read
static __device__ __forceinline__ void vy_cp16(void* dst, const void* src, uint bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void vy_cp16_all(void* dst, const void* src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src) : "memory");
}
static __device__ __forceinline__ void vy_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void vy_cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }
%SWIZZLE%
// dst (ROWS x COLS elements of type S; SW: swizzled rows, vy_swz) = the tile of src (count
// elements) at offset + r * stride + c, for r < rin and c < cin, 0 elsewhere and past the end
// of src (S6), u32 indices wrapping; by the T threads of the block (lin: this thread). Whole
// 16-byte chunks are copied asynchronously where src, offset and stride are 16-byte aligned
// and no index wraps (the caller commits and waits): with no test per chunk where the whole
// tile lies inside the limits and src, else each chunk reads its valid prefix. Otherwise the
// elements are copied now.
template <typename S, int ROWS, int COLS, int T, bool SW = false>
static __device__ __forceinline__ void vy_tile(S* dst, const S* src, uint count, uint off, uint stride,
                                               uint rin, uint cin, uint lin) {
    constexpr uint ES = (uint)sizeof(S), CH = 16u / ES, P = (uint)COLS * ES;
    unsigned char* const base = (unsigned char*)dst;
    if constexpr (P % 16u == 0u) {
        const bool aligned = ((((size_t)src) | (size_t)(off * ES) | (size_t)(stride * ES)) & 15u) == 0u;
        const unsigned long long last = (unsigned long long)off + (unsigned long long)(ROWS - 1) * stride + (COLS - 1);
        if (aligned && last <= 0xFFFFFFFFull) {
            constexpr uint PER = (uint)COLS / CH, TOTAL = (uint)ROWS * PER;
            if (rin >= (uint)ROWS && cin >= (uint)COLS && last < (unsigned long long)count) {
                #pragma unroll
                for (uint q = 0u; q < (TOTAL + T - 1u) / T; q++) {
                    const uint e = q * (uint)T + lin;
                    if (TOTAL % T == 0u || e < TOTAL) {
                        const uint r = e / PER, c = (e % PER) * CH;
                        uint at;
                        if constexpr (SW) at = vy_swz<P>(r, c * ES); else at = (r * (uint)COLS + c) * ES;
                        vy_cp16_all(base + at, src + (off + r * stride + c));
                    }
                }
                return;
            }
            #pragma unroll
            for (uint q = 0u; q < (TOTAL + T - 1u) / T; q++) {
                const uint e = q * (uint)T + lin;
                if (TOTAL % T == 0u || e < TOTAL) {
                    const uint r = e / PER, c = (e % PER) * CH;
                    const uint i = off + r * stride + c;
                    uint n = 0u;
                    if (r < rin && c < cin && i < count) n = min(min(cin - c, count - i), CH);
                    uint at;
                    if constexpr (SW) at = vy_swz<P>(r, c * ES); else at = (r * (uint)COLS + c) * ES;
                    vy_cp16(base + at, n ? (const void*)(src + i) : (const void*)src, n * ES);
                }
            }
            return;
        }
    }
    // element by element, B elements of a thread at a time: their loads in flight together
    constexpr uint B = 8u;
    #pragma unroll 1
    for (uint e0 = 0u; e0 < (uint)(ROWS * COLS); e0 += B * (uint)T) {
        S v[B];
        #pragma unroll
        for (uint j = 0u; j < B; j++) {
            const uint e = e0 + j * (uint)T + lin, r = e / (uint)COLS, c = e % (uint)COLS, x = off + r * stride + c;
            v[j] = (e < (uint)(ROWS * COLS) && r < rin && c < cin && x < count) ? src[x] : (S)0;
        }
        #pragma unroll
        for (uint j = 0u; j < B; j++) {
            const uint e = e0 + j * (uint)T + lin, r = e / (uint)COLS, c = e % (uint)COLS;
            if (e < (uint)(ROWS * COLS)) {
                if constexpr (SW) *(S*)(base + vy_swz<P>(r, c * ES)) = v[j];
                else dst[e] = v[j];
            }
        }
    }
}
""".replace("%SWIZZLE%", imma.SWIZZLE)


def claims(program: Program, n: N.Node) -> bool:
    """Whether this load_tile is printed as asynchronous copies (always, on sm_80+: the
    caller passes this only there)."""
    return True


@dataclass(frozen=True)
class Pipeline:
    """A loop of tile loads feeding one matmul_acc (module docstring)."""

    loop: N.Node   # a counted loop
    tiles: tuple[N.LoadTile, ...]
    stages: int


@dataclass(frozen=True)
class Layout:
    """Workgroup memory of a plan's kernels: each array's element count (its stages
    included) and byte offset, the total, and whether it is dynamic shared memory."""

    counts: dict[str, int]
    offsets: dict[str, int]
    total: int
    dynamic: bool
    pipelines: dict[int, Pipeline]   # by id of the loop and of each of its load_tile statements
    swizzled: frozenset[str] = frozenset()   # arrays stored with swizzled rows (`_swizzles`)
    # each pipelined array's loop variable: its current stage is ``vy_stage_<variable>``
    stage_of: dict[str, str] = field(default_factory=dict)
    # pipelined arrays each trip's tile writes whole before its matmul_acc reads them: the
    # kernel need not zero them first
    whole: frozenset[str] = frozenset()


def _candidate(program: Program, loop: N.Node) -> tuple[N.LoadTile, ...] | None:
    """The load_tile statements of ``loop`` when it has the pipeline's shape, else None: a
    counted loop (its kind's row: a loop that binds its variable) from a u32 constant, whose
    body is load_tile statements and then one matmul_acc reading their arrays
    (`imma.operands`)."""
    k = kind_of(loop)
    if not (k.loop and k.roles(BINDS)) or len(loop.body) < 2:
        return None
    *head, last = loop.body
    ops = imma.operands(last)
    if ops is None or not all(isinstance(s, N.LoadTile) for s in head):
        return None
    tiles = tuple(head)
    dsts = [t.dst for t in tiles]
    d, a, b = ops
    if len(set(dsts)) != len(dsts) or not set(dsts) <= {a, b} or d in dsts:
        return None
    try:   # (the stage arithmetic is in u32, from a start that names no local)
        if infer(loop.from_, {}, program) is not DataType.U32:
            return None
    except TypeFault:
        return None
    for root in (loop.to, *(e for t in tiles for e in (t.offset, t.stride, t.rows_in, t.cols_in))):
        if any(not kind_of(x).pure for x in E.walk(root)):
            return None
    mine = set(map(id, tiles)) | {id(last)}
    for s in N.walk_nodes(program.body):
        if id(s) not in mine and s is not loop and imma.buffers_named(s) & set(dsts):
            return None
    return tiles


def _bytes(counts: dict[str, int], program: Program) -> tuple[dict[str, int], int]:
    offsets, at = {}, 0
    for w in program.workgroup_buffers:
        offsets[w.name] = at
        at += -(-counts[w.name] * w.dtype.size // 16) * 16
    return offsets, at


def _layout(plan: KernelPlan, limit: int) -> Layout:
    program = plan.program
    base = {w.name: w.count for w in program.workgroup_buffers}
    found: list[tuple[N.Node, tuple[N.LoadTile, ...]]] = []
    if plan.native_tiles:
        for phase in plan.phases:
            for s in N.walk_nodes(phase):
                tiles = _candidate(program, s)
                if tiles is not None:
                    found.append((s, tiles))
    piped = {t.dst for _, tiles in found for t in tiles}
    stages = next((k for k in range(MAX_STAGES, 1, -1)
                   if _bytes({n: c * (k if n in piped else 1) for n, c in base.items()}, program)[1] <= limit), 1)
    if stages == 1:   # no room for two stages: every load_tile is copied on its own
        found, piped = [], set()
    pipelines: dict[int, Pipeline] = {}
    for loop, tiles in found:
        p = Pipeline(loop, tiles, stages)
        pipelines[id(loop)] = p
        pipelines.update({id(t): p for t in tiles})
    counts = {n: c * (stages if n in piped else 1) for n, c in base.items()}
    offsets, total = _bytes(counts, program)
    staged = [(loop, t) for loop, tiles in found for t in tiles]
    swizzled = frozenset(t.dst for loop, t in staged if _swizzles(program, t, loop.body[-1]))
    whole = frozenset(t.dst for _, t in staged if t.rows * t.cols == program.buffer(t.dst).count)
    return Layout(counts, offsets, total, total > STATIC_LIMIT, pipelines, swizzled,
                  {t.dst: loop.var for loop, t in staged}, whole)


def _swizzles(program: Program, t: N.LoadTile, mm: N.Node) -> bool:
    """Whether a pipelined array is stored with swizzled rows (vy_swz: no bank conflicts for
    the matmul_acc's 16-byte fragment reads): only the tile writes it and only the matmul_acc
    reads it (a pipeline's arrays), with rows of the matmul_acc's k elements, a power of two
    of 16-byte chunks."""
    pitch = t.cols * program.buffer(t.dst).dtype.size
    chunks = pitch // 16
    return t.cols == mm.k and pitch % 16 == 0 and chunks & (chunks - 1) == 0


def layout(plan: KernelPlan, limit: int) -> Layout:
    """The workgroup memory of ``plan``'s kernels on a device whose blocks may have ``limit``
    bytes of it (module docstring); computed once per plan."""
    key = (id(plan), limit)
    got = _LAYOUTS.get(key)
    if got is not None and got[0] is plan:
        return got[1]
    lay = _layout(plan, limit)
    if len(_LAYOUTS) > 64:
        _LAYOUTS.clear()
    _LAYOUTS[key] = (plan, lay)
    return lay


_LAYOUTS: dict[tuple[int, int], tuple[KernelPlan, Layout]] = {}


def limit_of(p: Printer) -> int:
    """The shared memory a block may have on the device the printer's syntax is for."""
    return getattr(p.s, "shared_limit", STATIC_LIMIT)


def dynamic_bytes(plan: KernelPlan, limit: int) -> int:
    """The dynamic shared memory a launch of ``plan``'s kernels asks for (0: static)."""
    lay = layout(plan, limit)
    return lay.total if lay.dynamic else 0


def declarations(p: Printer) -> list[str]:
    """The lines declaring the kernel's workgroup arrays (static, or pointers into dynamic
    shared memory)."""
    from vyre.lower.cfamily import ST

    lay = layout(p.plan, limit_of(p))
    out = []
    if lay.dynamic:
        out.append("extern __shared__ __align__(16) unsigned char vy_smem[];")
    for w in p.plan.workgroup:
        t = ST[w.dtype.size]
        if lay.dynamic:
            out.append(f"{t}* const w_{w.name} = ({t}*)(vy_smem + {lay.offsets[w.name]});")
        else:
            out.append(f"__shared__ __align__(16) {t} w_{w.name}[{lay.counts[w.name]}];")
    return out


def operand(p: Printer, name: str) -> str:
    """The pointer a matmul_acc reads array ``name`` through: its current stage where a
    pipeline fills it."""
    var = layout(p.plan, limit_of(p)).stage_of.get(name)
    if var is None:
        return p.ptr(name)
    return f"({p.ptr(name)} + vy_stage_{var} * {p.program.buffer(name).count}u)"


def swizzled(p: Printer, name: str) -> bool:
    """Whether workgroup array ``name`` is stored with swizzled rows (its readers pass it on)."""
    return name in layout(p.plan, limit_of(p)).swizzled


def fed(p: Printer, mm: N.Node) -> str | None:
    """Where matmul_acc ``mm`` ends a pipeline's loop, the condition of its closing barrier
    (the loop's last trip: within the loop the barrier after each trip's wait orders the
    stages, and before the matmul_acc, its tiles' barrier), else None."""
    lay = layout(p.plan, limit_of(p))
    for pipe in lay.pipelines.values():
        if pipe.loop.body[-1] is mm:
            v = pipe.loop.var
            return f"v_{v} + 1u == vy_end_{v}"
    return None


def _issue(p: Printer, t: N.LoadTile, stage: str | None) -> None:
    """The copies of one tile (into ``stage`` of its array; None: not pipelined)."""
    from vyre.lower.cfamily import ST

    dst = p.program.buffer(t.dst)
    off, _, _ = p.expr(t.offset)
    stride, _, _ = p.expr(t.stride)
    rin, _, _ = p.expr(t.rows_in)
    cin, _, _ = p.expr(t.cols_in)
    to = p.ptr(t.dst) if stage is None else f"{p.ptr(t.dst)} + ({stage}) * {dst.count}u"
    threads = p.program.invocations_per_workgroup
    sw = ", true" if t.dst in layout(p.plan, limit_of(p)).swizzled else ""
    p.out(f"vy_tile<{ST[dst.dtype.size]}, {t.rows}, {t.cols}, {threads}{sw}>({to}, {p.ptr(t.src)}, "
          f"{p.count(t.src)}, {off}, {stride}, {rin}, {cin}, {p.lin()});")


def _trip(p: Printer, pipe: Pipeline, trip: str, end: str) -> None:
    """Issue (and commit) the copies of trip ``trip`` (a C expression) when it is below ``end``:
    the loop variable rebound in a nested scope, its stage ``(trip - from) % stages``."""
    v = pipe.loop.var
    at = p.name("vy_trip")
    p.out(f"const uint {at} = {trip};")   # (not in the scope that rebinds v: its initializer would read itself)
    p.open("")
    p.out(f"const uint v_{v} = {at};")
    p.open(f"if (v_{v} < {end})")
    first, _, _ = p.expr(pipe.loop.from_)
    stage = f"(v_{v} - {first}) % {pipe.stages}u"
    for t in pipe.tiles:
        _issue(p, t, stage)
    p.close()
    p.close()
    p.out("vy_cp_commit();")


def call(p: Printer, n: N.Node) -> list[str]:
    """The lines of one load_tile (printed through ``p``; returns none of its own)."""
    assert isinstance(n, N.LoadTile)
    pipe = layout(p.plan, limit_of(p)).pipelines.get(id(n))
    if pipe is None:
        p.out("__syncthreads();")
        p.open("")
        _issue(p, n, None)
        p.close()
        p.out("vy_cp_commit();")
        p.out("vy_cp_wait<0>();")
        p.out("__syncthreads();")
        return []
    if n is not pipe.tiles[0]:
        return []   # issued with the pipeline's first tile
    v = pipe.loop.var
    first, _, _ = p.expr(pipe.loop.from_)
    end, _, _ = p.expr(pipe.loop.to)
    p.out(f"const uint vy_end_{v} = {end};")
    p.out(f"const uint vy_stage_{v} = (v_{v} - {first}) % {pipe.stages}u;")
    p.open(f"if (v_{v} == {first})")   # the first trip: the copies of the trips before the steady state
    for s in range(pipe.stages - 1):
        _trip(p, pipe, f"{first} + {s}u", f"vy_end_{v}")
    p.close()
    # this trip's copies landed (the later trips' may still be in flight), and every warp is
    # past the matmul_acc of the trip before: its stage takes the copies of trip v + stages - 1
    p.out(f"vy_cp_wait<{pipe.stages - 2}>();")
    p.out("__syncthreads();")
    _trip(p, pipe, f"v_{v} + {pipe.stages - 1}u", f"vy_end_{v}")
    return []
