"""The conformance corpus: named programs covering every IR op, data type and semantics row,
each with witness inputs (boundary values + seeded random values).

Entries carry the semantics rows they exercise, whether they rely on out-of-bounds masking,
and the capability they need (if any). Every output is compared byte for byte.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from vyre.ir import (
    AtomicOp,
    BinOp,
    BufferDecl,
    DataType,
    Expr,
    MemoryOrdering,
    Node,
    Program,
    UnOp,
)
from vyre.ir.typecheck import TypeFault, bin_result, un_result
from vyre.ir.types import TRANSCENDENTAL

from .witness import edges, typed_inputs, witness_words

U, I, F, B = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
GX = Expr.gid_x()
TYPES = [U, I, F, B]


@dataclass(frozen=True)
class CorpusEntry:
    name: str
    program: Program
    make_inputs: Callable[[int], list[np.ndarray]] = field(compare=False)
    rows: tuple[str, ...] = ()
    oob: bool = False           # relies on out-of-bounds masking (S6)
    requires: str | None = None  # capability the backend must report
    grid_override: tuple[int, int, int] | None = None

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        return typed_inputs(self.program, self.make_inputs(seed))


def _map(in_types, out_type, make, wg=64) -> Program:
    bufs = [BufferDecl.read(f"x{i}", i, t) for i, t in enumerate(in_types)]
    bufs.append(BufferDecl.output("out", len(in_types), out_type))
    args = [Expr.load(f"x{i}", GX) for i in range(len(in_types))]
    return Program.wrapped(bufs, wg, [Node.store("out", GX, make(*args))])


def _pair_inputs(t: DataType, guard_i32_div: bool = False):
    def make(seed: int) -> list[np.ndarray]:
        e = edges(t)
        a, b = (np.array(v, dtype=np.uint32) for v in zip(*itertools.product(e, e)))
        ra, rb = witness_words(t, 64, seed), witness_words(t, 64, seed + 1)
        a, b = np.concatenate([a, ra]), np.concatenate([b, rb])
        if guard_i32_div:
            ai, bi = a.view(np.int32), b.view(np.int32)
            keep = (bi != 0) & ~((ai == -(2**31)) & (bi == -1))
            a, b = a[keep], b[keep]
        return [a, b]
    return make


def _unary_inputs(t: DataType):
    return lambda seed: [np.concatenate([np.array(edges(t), np.uint32), witness_words(t, 64, seed)])]


def _elementwise() -> list[CorpusEntry]:
    out = []
    for op in BinOp:
        for t in TYPES:
            try:
                rt = bin_result(op, t, t)
            except TypeFault:
                continue
            guard = t is I and op in (BinOp.DIV, BinOp.MOD)
            out.append(CorpusEntry(f"bin.{op.value}.{t.value}",
                                   _map([t, t], rt, lambda x, y, op=op: Expr.bin(op, x, y), wg=1 if guard else 64),
                                   _pair_inputs(t, guard), ("S13",) if op in TRANSCENDENTAL else
                                   ("S1", "S2", "S3", "S4", "S7", "S9", "S10", "S11")))
    for op in UnOp:
        for t in TYPES:
            try:
                rt = un_result(op, t)
            except TypeFault:
                continue
            out.append(CorpusEntry(f"un.{op.value}.{t.value}", _map([t], rt, lambda x, op=op: Expr.un(op, x)),
                                   _unary_inputs(t), ("S13",) if op in TRANSCENDENTAL else ("S1", "S7", "S9", "S12")))
    for src, dst in itertools.product([U, I, F, B], repeat=2):
        out.append(CorpusEntry(f"cast.{src.value}.{dst.value}", _map([src], dst, lambda x, d=dst: Expr.cast(d, x)),
                               _unary_inputs(src), ("S12",)))
    for src, dst in itertools.product([U, I, F], repeat=2):
        out.append(CorpusEntry(f"bitcast.{src.value}.{dst.value}",
                               _map([src], dst, lambda x, d=dst: Expr.bitcast(d, x)), _unary_inputs(src), ("S9",)))
    out.append(CorpusEntry("fma.f32", _map([F, F, F], F, Expr.fma),
                           lambda s: [witness_words(F, 300, s + k) for k in range(3)], ("S8",)))
    out.append(CorpusEntry("no_contraction.f32", _map([F, F, F], F, lambda a, b, c: a * b + c),
                           lambda s: [witness_words(F, 300, s + k) for k in range(3)], ("S8",)))
    out.append(CorpusEntry("select.f32", _map([F, F, U], F, lambda a, b, c: Expr.select(c.gt(9), a, b)),
                           lambda s: [witness_words(F, 100, s), witness_words(F, 100, s + 1),
                                      witness_words(U, 100, s + 2)], ("S9",)))
    return out


def _structured() -> list[CorpusEntry]:
    out = []
    n = 256

    def red(wg: int) -> Program:
        body = [Node.store("tmp", Expr.lid_x(), Expr.load("a", GX)), Node.barrier()]
        s = wg // 2
        while s:
            body += [Node.if_(Expr.lid_x().lt(s), [Node.store("tmp", Expr.lid_x(),
                     Expr.load("tmp", Expr.lid_x()) + Expr.load("tmp", Expr.lid_x() + s))]), Node.barrier()]
            s //= 2
        body.append(Node.if_(Expr.lid_x().eq(0), [Node.store("out", Expr.wgid_x(), Expr.load("tmp", 0))]))
        return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U, n // wg),
                                BufferDecl.workgroup("tmp", wg, U)], wg, body)

    for wg in (32, 64, 256):
        out.append(CorpusEntry(f"reduce.workgroup.{wg}", red(wg), lambda s: [witness_words(U, n, s)],
                               ("S15", "S18")))
    out.append(CorpusEntry(
        "barrier.after_return",
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U), BufferDecl.workgroup("t", 16, U)], 16,
                        [Node.if_(Expr.load("a", GX).gt(0x80000000), [Node.return_()]),
                         Node.store("t", Expr.lid_x(), Expr.load("a", GX)), Node.barrier(),
                         Node.store("out", GX, Expr.load("t", (Expr.lid_x() + 3) % 16))]),
        lambda s: [witness_words(U, 64, s)], ("S15", "S21")))
    out.append(CorpusEntry(
        "grid_sync.rotate",
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("mid", 1, U), BufferDecl.output("out", 2, U)], 32,
                        [Node.store("mid", GX, Expr.load("a", GX) * 3), Node.barrier(MemoryOrdering.GRID_SYNC),
                         Node.store("out", GX, Expr.load("mid", (GX + 77) % Expr.buf_len("a")))]),
        lambda s: [witness_words(U, 300, s)], ("S16",)))
    out.append(CorpusEntry(
        "atomics.histogram",
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.read_write("h", 1, U, 16)], 64,
                        [Node.if_(GX.lt(Expr.buf_len("a")),
                                  [Node.expr(Expr.atomic(AtomicOp.ADD, "h", Expr.load("a", GX) % 16, 1))])]),
        lambda s: [witness_words(U, 1000, s), np.zeros(16, np.uint32)], ("S17",)))
    for op in (AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR, AtomicOp.MIN, AtomicOp.MAX):
        for t in (U, I):
            out.append(CorpusEntry(
                f"atomics.{op.value}.{t.value}",
                Program.wrapped([BufferDecl.read("a", 0, t), BufferDecl.read_write("acc", 1, t, 4)], 32,
                                [Node.expr(Expr.atomic(op, "acc", GX % 4, Expr.load("a", GX)))]),
                lambda s, t=t: [witness_words(t, 200, s), witness_words(t, 4, s + 9)], ("S17", "S6"), oob=True))
    for op in (AtomicOp.ADD, AtomicOp.MIN, AtomicOp.MAX):   # exact float atomics (S36)
        for t in (F, DataType.F16, DataType.BF16):
            out.append(CorpusEntry(
                f"atomics.float.{op.value}.{t.value}",
                Program.wrapped([BufferDecl.read("a", 0, t), BufferDecl.read("k", 1, U),
                                 BufferDecl.read_write("acc", 2, t, 7)], 32,
                                [Node.if_(GX.lt(Expr.buf_len("a")),
                                          [Node.expr(Expr.atomic(op, "acc", Expr.load("k", GX) % 9, Expr.load("a", GX)))])]),
                lambda s, t=t: [witness_words(t, 300, s), witness_words(U, 300, s + 5), witness_words(t, 7, s + 9)],
                ("S36", "S34", "S10", "S6"), oob=True))
    out.append(CorpusEntry(
        "atomics.exchange_cas_uncontended",
        Program.wrapped([BufferDecl.read_write("buf", 0, U), BufferDecl.output("old", 1, U), BufferDecl.output("cas", 2, U)], 32,
                        [Node.store("old", GX, Expr.atomic(AtomicOp.EXCHANGE, "buf", GX, GX + 5)),
                         Node.store("cas", GX, Expr.atomic(AtomicOp.COMPARE_EXCHANGE, "buf", GX, GX * 2, GX + 5))]),
        lambda s: [witness_words(U, 100, s)], ("S17",)))
    out.append(CorpusEntry(
        "atomics.workgroup_counter",
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U), BufferDecl.workgroup("c", 1, U)], 64,
                        [Node.expr(Expr.atomic(AtomicOp.ADD, "c", 0, Expr.load("a", GX) & 0xFF)), Node.barrier(),
                         Node.store("out", GX, Expr.load("c", 0))]),
        lambda s: [witness_words(U, 256, s)], ("S17", "S15", "S18")))
    out.append(CorpusEntry(
        "oob.load_store",
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U, 64)], 64,
                        [Node.store("out", GX, Expr.load("a", GX * 3)), Node.store("out", GX + 1000, 7)]),
        lambda s: [witness_words(U, 50, s)], ("S6",), oob=True))
    out.append(CorpusEntry(
        "oob.padding_lanes",
        _map([F, F], F, lambda a, b: a + b, wg=64),
        lambda s: [witness_words(F, 37, s), witness_words(F, 37, s + 1)], ("S6", "S19"), oob=True))
    out.append(CorpusEntry(
        "loop.triangular_return",
        Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("out", 1, U)], 16,
                        [Node.let_bind("acc", Expr.u32(0)),
                         Node.loop("i", Expr.u32(0), Expr.load("a", GX) & 31,
                                   [Node.assign("acc", Expr.var("acc") * 3 + Expr.var("i")),
                                    Node.if_(Expr.var("acc").gt(5000), [Node.return_()])]),
                         Node.store("out", GX, Expr.var("acc"))]),
        lambda s: [witness_words(U, 100, s)], ("S21",)))
    out.append(CorpusEntry(
        "ids.multi_axis",
        Program.wrapped([BufferDecl.output("out", 0, U, 8 * 6 * 2)], (4, 3, 2),
                        [Node.store("out", (Expr.gid_z() * 6 + Expr.gid_y()) * 8 + Expr.gid_x(),
                                    Expr.wgid_x() * 1000000 + Expr.wgid_y() * 10000 + Expr.lid_z() * 100 + Expr.lid_x())]),
        lambda s: [], ("S19",), grid_override=(2, 2, 1)))
    out.append(CorpusEntry(
        "bool.storage",
        _map([B, U], B, lambda a, b: a.and_(b.ne(0)).or_(a.logical_not())),
        lambda s: [witness_words(B, 64, s), witness_words(U, 64, s + 1)], ("S5",)))
    out.append(CorpusEntry(
        "eval_order.atomics",
        Program.wrapped([BufferDecl.read_write("c", 0, U), BufferDecl.output("out", 1, U)], 8,
                        [Node.store("out", GX, (Expr.atomic(AtomicOp.ADD, "c", GX, 1) << 16)
                                    - Expr.atomic(AtomicOp.ADD, "c", GX, 3))]),
        lambda s: [witness_words(U, 40, s)], ("S22",)))
    return out


def _subgroups() -> list[CorpusEntry]:
    from vyre.ir import SubgroupOp
    from vyre.ir.types import SUBGROUP_REDUCTIONS

    out = []
    for op in sorted(SUBGROUP_REDUCTIONS, key=lambda o: o.value):
        for t in (U, I):
            out.append(CorpusEntry(f"subgroup.{op.value}.{t.value}",
                                   _map([t], t, lambda x, op=op: Expr.subgroup_reduce(op, x)),
                                   lambda s, t=t: [witness_words(t, 256, s)], ("S24",), requires="subgroup_ops"))
    out.append(CorpusEntry("subgroup.shuffle.f32",
                           _map([F], F, lambda x: Expr.subgroup_shuffle(x, Expr.subgroup_local_id() * 7 + 3)),
                           lambda s: [witness_words(F, 256, s)], ("S24", "S9"), requires="subgroup_ops"))
    out.append(CorpusEntry("subgroup.ballot",
                           _map([U], U, lambda x: Expr.subgroup_ballot(x.gt(0x80000000))),
                           lambda s: [witness_words(U, 256, s)], ("S24",), requires="subgroup_ops"))
    out.append(CorpusEntry("subgroup.ids",
                           _map([U], U, lambda x: Expr.subgroup_local_id() * 100 + Expr.subgroup_size() + x * 0),
                           lambda s: [witness_words(U, 256, s)], ("S24",), requires="subgroup_ops"))
    del SubgroupOp
    return out


def matmul_acc_program(ta: DataType, tb: DataType, td: DataType, m: int, n: int, k: int,
                       wg: int) -> Program:
    """Workgroup ``g`` copies its slices of ``A`` (m x k), ``B`` (n x k) and ``D`` (m x n) into
    workgroup arrays, runs ``matmul_acc`` (whose own barriers order the copies, S37) and
    writes ``d`` to ``O[g*m*n ...]``; a 1-D workgroup of ``wg`` invocations."""
    lid, g = Expr.lid_x(), Expr.wgid_x()

    def copy(src: str, dst: str, count: int, tag: str, out: bool = False) -> Node:
        e = Expr.var(f"{tag}e")
        store = Node.store(src, g * count + e, Expr.load(dst, e)) if out else \
            Node.store(dst, e, Expr.load(src, g * count + e))
        return Node.loop(f"{tag}q", Expr.u32(0), Expr.u32(-(-count // wg)), [
            Node.let_bind(f"{tag}e", Expr.var(f"{tag}q") * wg + lid),
            Node.if_(e.lt(Expr.u32(count)), [store])])

    bufs = [BufferDecl.read("A", 0, ta), BufferDecl.read("B", 1, tb), BufferDecl.read("D", 2, td),
            BufferDecl.output("O", 3, td), BufferDecl.workgroup("wa", m * k, ta),
            BufferDecl.workgroup("wb", n * k, tb), BufferDecl.workgroup("wd", m * n, td)]
    body = [copy("A", "wa", m * k, "a"), copy("B", "wb", n * k, "b"), copy("D", "wd", m * n, "d"),
            Node.matmul_acc("wd", "wa", "wb", m, n, k), copy("O", "wd", m * n, "o", out=True)]
    return Program.wrapped(bufs, wg, body)


def _matmuls() -> list[CorpusEntry]:
    """matmul_acc (S37) over three workgroups: byte and word operands, shapes that are and are
    not whole tiles, workgroups that are and are not whole warps."""
    out = []
    groups = 3
    for ta, tb, td, (m, n, k, wg) in [
            (DataType.I8, DataType.I8, I, (16, 8, 32, 32)), (DataType.I8, DataType.U8, I, (33, 17, 70, 96)),
            (DataType.U8, DataType.U8, U, (5, 7, 37, 48)), (U, U, U, (33, 17, 70, 96)),
            (I, U, I, (16, 8, 32, 32)), (U, I, U, (5, 7, 37, 48))]:
        def make(seed: int, ta=ta, tb=tb, td=td, m=m, n=n, k=k) -> list[np.ndarray]:
            return [witness_words(ta, groups * m * k, seed), witness_words(tb, groups * n * k, seed + 1),
                    witness_words(td, groups * m * n, seed + 2)]
        out.append(CorpusEntry(f"matmul_acc.{ta.value}.{tb.value}.{m}x{n}x{k}.wg{wg}",
                               matmul_acc_program(ta, tb, td, m, n, k, wg), make, ("S37",),
                               grid_override=(groups, 1, 1)))
    return out


def load_tile_program(t: DataType, rows: int, cols: int, wg: int) -> Program:
    """Workgroup ``g`` loads the rows x cols tile of ``S`` at offset ``P[0] + g * P[1]``
    (stride ``P[2]``, limits ``P[3]`` rows and ``P[4] - g`` columns, S38) into a workgroup
    array and writes the whole array to ``O[g*rows*cols ...]``."""
    prm = [Expr.load("P", Expr.u32(i)) for i in range(5)]
    g, lid = Expr.wgid_x(), Expr.lid_x()
    n = rows * cols
    e = Expr.var("e")
    body = [Node.load_tile("w", "S", prm[0] + g * prm[1], prm[2], rows, cols, prm[3], prm[4] - g),
            Node.loop("q", Expr.u32(0), Expr.u32(-(-n // wg)), [
                Node.let_bind("e", Expr.var("q") * wg + lid),
                Node.if_(e.lt(Expr.u32(n)), [Node.store("O", g * n + e, Expr.load("w", e))])])]
    return Program.wrapped([BufferDecl.read("S", 0, t), BufferDecl.read("P", 1, U, 8),
                            BufferDecl.output("O", 2, t), BufferDecl.workgroup("w", n, t)], wg, body)


def tiled_matmul_program(t: DataType, m: int, n: int, k: int, wg: int) -> Program:
    """``O`` (M x N, i32/u32) = ``A`` (M x K) · ``Bt`` (N x K)ᵀ with shapes ``P[0..2]`` = M, N, K:
    one workgroup per m x n output tile, whose k loop is two load_tile statements and a
    matmul_acc (the loop a CUDA pipeline runs), the tile then written out (S37, S38)."""
    td = I if t in (DataType.I8, DataType.U8) else t
    pm, pn, pk = (Expr.load("P", Expr.u32(i)) for i in range(3))
    g, lid = Expr.wgid_x(), Expr.lid_x()
    r0, c0, kt = Expr.var("r0"), Expr.var("c0"), Expr.var("kt")
    tiles_n = (Expr.var("pn") + (n - 1)) / n
    e = Expr.var("e")
    r, c = e / n, e % n
    body = [Node.let_bind("pm", pm), Node.let_bind("pn", pn), Node.let_bind("pk", pk),
            Node.let_bind("r0", (g / tiles_n) * m), Node.let_bind("c0", (g % tiles_n) * n),
            Node.loop("kt", Expr.u32(0), (Expr.var("pk") + (k - 1)) / k, [
                Node.load_tile("wa", "A", r0 * Expr.var("pk") + kt * k, Expr.var("pk"), m, k,
                               Expr.var("pm") - r0, Expr.var("pk") - kt * k),
                Node.load_tile("wb", "Bt", c0 * Expr.var("pk") + kt * k, Expr.var("pk"), n, k,
                               Expr.var("pn") - c0, Expr.var("pk") - kt * k),
                Node.matmul_acc("wd", "wa", "wb", m, n, k)]),
            Node.loop("q", Expr.u32(0), Expr.u32(-(-(m * n) // wg)), [
                Node.let_bind("e", Expr.var("q") * wg + lid),
                Node.if_(e.lt(Expr.u32(m * n)).and_((r0 + r).lt(Expr.var("pm"))).and_((c0 + c).lt(Expr.var("pn"))),
                         [Node.store("O", (r0 + r) * Expr.var("pn") + c0 + c, Expr.load("wd", e))])])]
    bufs = [BufferDecl.read("A", 0, t), BufferDecl.read("Bt", 1, t), BufferDecl.read("P", 2, U, 4),
            BufferDecl.output("O", 3, td), BufferDecl.workgroup("wa", m * k, t),
            BufferDecl.workgroup("wb", n * k, t), BufferDecl.workgroup("wd", m * n, td)]
    return Program.wrapped(bufs, wg, body)


def _tiles() -> list[CorpusEntry]:
    """load_tile (S38) over three workgroups: element types of every size, offsets and strides
    that are and are not 16-byte aligned, partial limits, the end of the source, indices that
    wrap past 2**32; and k loops of tile loads feeding a matmul_acc (a CUDA pipeline), with
    edges in every dimension."""
    out = []
    groups = 3
    for t, (rows, cols, wg), prm in [
            (DataType.I8, (5, 32, 32), (0, 32, 32, 5, 32)), (DataType.U8, (5, 12, 32), (3, 4, 13, 4, 7)),
            (DataType.I16, (4, 8, 64), (8, 16, 24, 9, 30)), (U, (5, 12, 32), (5, 4, 7, 2, 11)),
            (F, (4, 8, 32), (0, 8, 8, 4, 8)), (I, (5, 12, 32), (60, 4, 16, 5, 12)),
            (DataType.U64, (3, 6, 32), (2, 2, 12, 3, 6)), (U, (5, 12, 32), (2**32 - 6, 1, 16, 5, 12))]:
        def make(seed: int, t=t, prm=prm) -> list[np.ndarray]:
            return [witness_words(t, 100, seed), np.array([*prm, 0, 0, 0], np.uint32)]
        out.append(CorpusEntry(f"load_tile.{t.value}.{rows}x{cols}.at{prm[0]}.stride{prm[2]}",
                               load_tile_program(t, rows, cols, wg), make, ("S38", "S6"), oob=True,
                               grid_override=(groups, 1, 1)))
    for t, (m, n, k, wg), (pm, pn, pk) in [(DataType.I8, (32, 32, 32, 64), (70, 45, 100)),
                                           (DataType.U8, (32, 32, 64, 64), (64, 64, 192)),
                                           (U, (32, 32, 16, 64), (40, 33, 50))]:
        tiles = -(-pm // m) * -(-pn // n)

        def make(seed: int, t=t, pm=pm, pn=pn, pk=pk) -> list[np.ndarray]:
            return [witness_words(t, pm * pk, seed), witness_words(t, pn * pk, seed + 1),
                    np.array([pm, pn, pk, 0], np.uint32)]
        out.append(CorpusEntry(f"load_tile.matmul.{t.value}.{m}x{n}x{k}.{pm}x{pn}x{pk}",
                               tiled_matmul_program(t, m, n, k, wg), make, ("S37", "S38"),
                               grid_override=(tiles, 1, 1)))
    return out


def corpus() -> list[CorpusEntry]:
    """Every corpus entry, in a stable order."""
    return _elementwise() + _structured() + _subgroups() + _matmuls() + _tiles()


def corpus_by_name() -> dict[str, CorpusEntry]:
    return {e.name: e for e in corpus()}
