"""Program builders shared by the primitives: element sources and grid-stride passes.

Owns how a pass reads its input (typed elements, or 16-bit floats packed two to a u32 word so
every backend reads them; several loads in flight per invocation, `rounds`), the parameter
block every grid-stride pass takes (``prm = [n, invocations, per_invocation, extra]``), the
workgroup tree reduction and scan, and the padded layout of a tile in workgroup memory. Each
builder is cached: a primitive's Programs are built once per shape of their parameters (never
per input length), so each is compiled once per backend.
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node

U = DataType.U32
GID, LID, WGID = Expr.gid_x(), Expr.lid_x(), Expr.wgid_x()
N, T, PER, EXTRA = (Expr.load("prm", k) for k in range(4))


def index_ok(index_t: DataType, raw: Expr) -> Expr:
    """Whether an index value ``raw`` of type ``index_t`` lies in ``[0, S)``, ``S = prm[3]``
    (`EXTRA`): the one range rule of scatter-add and gather."""
    if index_t is DataType.U32:
        return raw.lt(EXTRA)
    if index_t is DataType.I32:
        return raw.ge(Expr.i32(0)).and_(Expr.bitcast(DataType.U32, raw).lt(EXTRA))
    return raw.ge(Expr.lit(index_t, 0)).and_(raw.lt(Expr.cast(index_t, EXTRA)))


def prm(binding: int) -> BufferDecl:
    return BufferDecl.read("prm", binding, U, 4)


def element(buf: str, dtype: DataType, index: Expr) -> Expr:
    """Element ``index`` of ``buf``: its value, or for a 16-bit float (held packed in u32
    words) its bits as a u32."""
    if dtype.is_half:
        return (Expr.load(buf, index >> 1) >> ((index & 1) * 16)) & 0xFFFF
    return Expr.load(buf, index)


def storage(dtype: DataType) -> DataType:
    """The buffer type a source of ``dtype`` is declared with (16-bit floats: packed u32)."""
    return U if dtype.is_half else dtype


def grid_stride(body: Callable[[Expr], list[Node]], idx: str = "idx") -> list[Node]:
    """Run ``body(index)`` for this invocation's items ``gid + j * T`` below ``N``."""
    i = Expr.var(idx)
    return [Node.loop("j", Expr.u32(0), PER, [
        Node.let_bind(idx, GID + Expr.var("j") * T),
        Node.if_(i.lt(N), body(i)),
    ])]


def runs(body: Callable[[Expr], list[Node]], idx: str = "idx") -> list[Node]:
    """Run ``body(index)`` for this invocation's run of ``PER`` consecutive items ``gid * PER +
    j`` below ``N`` (`grid_stride`'s order for CPUs, where an invocation streams its own run
    through the cache). The caller keeps ``T * PER`` below 2**32."""
    i = Expr.var(idx)
    return [Node.let_bind(f"{idx}_0", GID * PER), Node.loop("j", Expr.u32(0), PER, [
        Node.let_bind(idx, Expr.var(f"{idx}_0") + Expr.var("j")),
        Node.if_(i.lt(N), body(i)),
    ])]


def rounds(first: Expr, step: Expr | int, count: Expr, unroll: int, value: Callable[[Expr], Expr],
           fill: Expr | None, body: Callable[[list[Expr]], list[Node]], p: str = "item") -> list[Node]:
    """Items ``first + (j * unroll + u) * step`` for ``j < count``, ``u < unroll``, a round of
    ``unroll`` at a time. Each round first binds every item (``value(index)``, or ``fill`` at
    or past N: loads are bounds-checked, so a value past the end is safe to read) and only
    then runs ``body(items)``: the loads of a round are independent, so a GPU keeps them in
    flight together (one load per loop trip left a thread waiting on each in turn). ``fill``
    None: the value past the end is what a load past the end gives (zero), which the caller
    knows to be right (its buffer holds exactly N items and zero adds nothing)."""
    r = Expr.var(f"{p}_r")
    nodes: list[Node] = [Node.let_bind(f"{p}_r", first + Expr.var(f"{p}_j") * (step * unroll))]
    items: list[Expr] = []
    for u in range(unroll):
        idx = r + step * u if u else r
        nodes.append(Node.let_bind(f"{p}{u}", value(idx) if fill is None else Expr.select(idx.lt(N), value(idx), fill)))
        items.append(Expr.var(f"{p}{u}"))
    return [Node.loop(f"{p}_j", Expr.u32(0), count, nodes + body(items))]


def strided_rounds(unroll: int, value: Callable[[Expr], Expr], fill: Expr | None,
                   body: Callable[[list[Expr]], list[Node]], p: str = "item") -> list[Node]:
    """`rounds` over this invocation's grid-stride items ``gid + (j * unroll + u) * T``
    (``PER`` = ceil(N / (T * unroll)) rounds): each warp-wide load is coalesced. The caller
    keeps ``N + T * unroll`` below 2**32 (`rounds_fit`)."""
    return rounds(GID, T, PER, unroll, value, fill, body, p)


def run_rounds(unroll: int, value: Callable[[Expr], Expr], fill: Expr | None,
               body: Callable[[list[Expr]], list[Node]], p: str = "item") -> list[Node]:
    """`rounds` over this invocation's own run of ``PER * unroll`` consecutive items from
    ``gid * PER * unroll`` (`strided_rounds`' share for CPUs, where an invocation streams its
    own run through the cache); the same `rounds_fit` bound."""
    return rounds(GID * (PER * unroll), 1, PER, unroll, value, fill, body, p)


def clipped_run(buf: str, unroll: int, value: Callable[[Expr], Expr], body: Callable[[list[Expr]], list[Node]],
                p: str = "item") -> list[Node]:
    """`run_rounds`' share (``PER * unroll`` consecutive items from ``gid * PER * unroll``;
    ``unroll`` a power of two) with no bounds check: a loop over the run's whole blocks of
    ``unroll`` items, clipped to ``buf_len(buf) >> log2(unroll)``, whose ``unroll`` loads
    `vyre.lower.ranges` proves in bounds and which ``body`` gets together (independent
    operations side by side: PoCL's "loops" work-group method runs no loop vectoriser, so a
    loop of one load a trip waits on its accumulator each trip), then the items past the
    buffer's last whole block (only in the run that holds its end) one at a time, a loop to
    ``min(end, buf_len(buf))``. Only for a pass whose ``buf`` holds exactly its N items; the
    same `rounds_fit` bound."""
    s = unroll.bit_length() - 1
    assert unroll == 1 << s, unroll
    w, w0, r0, t = Expr.var(f"{p}_w"), Expr.var(f"{p}_w0"), Expr.var(f"{p}_r0"), Expr.var(f"{p}_t")
    block = [Node.let_bind(f"{p}{u}", value((w << s) + u)) for u in range(unroll)]
    whole = (Expr.buf_len(buf) >> s) << s
    return [Node.let_bind(f"{p}_w0", GID * PER), Node.let_bind(f"{p}_r0", w0 << s),
            Node.loop(f"{p}_w", w0, Expr.min(w0 + PER, Expr.buf_len(buf) >> s),
                      block + body([Expr.var(f"{p}{u}") for u in range(unroll)])),
            Node.loop(f"{p}_t", Expr.max(r0, whole), Expr.min(r0 + (PER << s), Expr.buf_len(buf)), body([value(t)]))]


def share_rounds(serial: bool, unroll: int, value: Callable[[Expr], Expr], fill: Expr | None,
                 body: Callable[[list[Expr]], list[Node]], p: str = "item") -> list[Node]:
    """This invocation's share of a grid pass: `run_rounds` where ``serial`` (a serial
    backend, `vyre.lib.runner.serial`, a CPU device), else `strided_rounds`."""
    return (run_rounds if serial else strided_rounds)(unroll, value, fill, body, p)


def balanced(items: list[Expr], combine: Callable[[Expr, Expr], Expr]) -> Expr:
    """``items`` combined as a balanced tree (independent operations side by side)."""
    while len(items) > 1:
        items = [combine(items[k], items[k + 1]) if k + 1 < len(items) else items[k]
                 for k in range(0, len(items), 2)]
    return items[0]


def rounds_fit(n: int, invocations: int, unroll: int) -> bool:
    """Whether `strided_rounds` indices stay below 2**32 for ``n`` items."""
    return n + invocations * unroll < 2**32


def tree(shared: str, wg: int, combine: Callable[[Expr, Expr], Expr]) -> list[Node]:
    """Combine ``shared[0..wg)`` into ``shared[0]`` (any workgroup size: a pairwise tree over
    the next power of two, skipping missing partners). Ends with a barrier."""
    return pairwise(wg, lambda partner, h: [
        Node.store(shared, LID, combine(Expr.load(shared, LID), Expr.load(shared, partner)))])


def pairwise(wg: int, fold: Callable[[Expr, int], list[Node]]) -> list[Node]:
    """The steps of a pairwise tree over the workgroup's lanes (the next power of two, skipping
    missing partners): ``fold(partner, h)`` gives the statements that fold lane ``partner`` =
    ``lid + h`` into lane ``lid``; a barrier before the first step and after each."""
    out: list[Node] = [Node.barrier()]
    h = 1
    while h * 2 < wg:
        h *= 2
    while h >= 1:
        partner = LID + h
        out += [Node.if_(LID.lt(h).and_(partner.lt(wg)), fold(partner, h)), Node.barrier()]
        h //= 2
    return out


def pad32(i: Expr) -> Expr:
    """A tile word's place in workgroup memory: one spare word after every 32, so that both
    ``j * wg + lid`` (coalesced) and ``lid * items + k`` (an invocation's own run of
    consecutive elements) hit 32 different banks."""
    return i + (i >> 5)


def lane_words(wg: int, items: int) -> list[Node]:
    """Locals for `padded` and `own`: this invocation's padded lane (``lid_p``) and the padded
    start of its run of ``items`` consecutive tile words (``own_p``). Bind once, at the top."""
    return [Node.let_bind("lid_p", LID + (LID >> 5)), Node.let_bind("own_p", pad32(LID * items))]


def padded(c: int) -> Expr:
    """``pad32(c + lid)`` for a constant ``c``: when ``c`` is a multiple of 32 the constant
    part folds into an address offset."""
    if c % 32 == 0:
        return Expr.var("lid_p") + (c + (c >> 5))
    return pad32(Expr.u32(c) + LID)


def own(k: int, items: int) -> Expr:
    """``pad32(lid * items + k)``: when ``items`` divides 32 the run never crosses a pad word,
    so it is ``own_p + k``."""
    if 32 % items == 0:
        return Expr.var("own_p") + k
    return pad32(LID * items + k)


def ping_pong_scan(shared: str, wg: int, dtype: DataType) -> tuple[list[Node], Expr, Expr]:
    """Inclusive scan of ``shared[0..wg)`` (Hillis-Steele between the two halves of
    ``shared``, ``2 * wg`` long: one barrier a step; starts with a barrier). Returns the
    nodes, this invocation's inclusive prefix and the total (both valid until ``shared`` is
    written again)."""
    out: list[Node] = [Node.barrier()]
    src, h = 0, 1
    while h < wg:
        dst = wg - src
        cur = Expr.load(shared, Expr.u32(src) + LID)
        out += [Node.store(shared, Expr.u32(dst) + LID, cur + Expr.select(
            LID.ge(h), Expr.load(shared, Expr.u32(src) + LID - h), Expr.lit(dtype, 0))), Node.barrier()]
        src, h = dst, h * 2
    return out, Expr.load(shared, Expr.u32(src) + LID), Expr.load(shared, Expr.u32(src + wg - 1))


def f16_to_f32_bits(h: Expr) -> Expr:
    """The f32 bits of the f16 bits ``h`` (a u32), exactly, with integer operations only
    (so backends without 16-bit types convert too)."""
    e, f = (h >> 10) & 0x1F, h & 0x3FF
    sign = (h & 0x8000) << 16
    p = Expr.u32(31) - f.clz()                      # the leading bit of a subnormal's fraction
    sub = ((p + 103) << 23) | ((f << (Expr.u32(23) - p)) & 0x7FFFFF)
    normal = ((e + 112) << 23) | (f << 13)
    special = Expr.u32(0x7F800000) | (f << 13)
    return sign | Expr.select(e.eq(Expr.u32(31)), special,
                              Expr.select(e.eq(Expr.u32(0)), Expr.select(f.eq(Expr.u32(0)), Expr.u32(0), sub), normal))


def binop(op: BinOp) -> Callable[[Expr, Expr], Expr]:
    return lambda a, b: Expr.bin(op, a, b)


__all__ = ["EXTRA", "GID", "LID", "N", "PER", "T", "WGID", "balanced", "binop", "clipped_run", "element", "f16_to_f32_bits", "grid_stride",
           "lane_words", "own", "pad32", "padded", "pairwise", "ping_pong_scan", "prm", "rounds", "rounds_fit", "run_rounds", "runs", "share_rounds", "storage", "strided_rounds", "tree"]
