"""Random valid, terminating, race-free programs: a plain seeded generator
(`random_program`) and a hypothesis strategy (`programs`) over it.

Generated programs use divergent `if`s, bounded loops, early returns, workgroup memory
behind top-level barriers, commuting atomics and grid_sync phases. Every invocation writes
outputs only at its own index, reads inputs anywhere (out-of-bounds included) and reads
workgroup memory only between barriers, so the result is the same on every conforming
backend. Transcendentals are left out (their results may differ by the ULP budget).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from vyre.ir import AtomicOp, BinOp, BufferDecl, DataType, Expr, MemoryOrdering, Node, Program, UnOp
from vyre.ir.types import (
    COMPARISONS,
    FLOAT_ONLY_UN,
    FLOAT_PREDICATES,
    INT_ONLY_BIN,
    INT_ONLY_UN,
    LOGICAL,
)

from .witness import typed_inputs, witness_words

U, I, F, B = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
IN = {U: "in_u", I: "in_i", F: "in_f"}
OUT = {U: "out_u", I: "out_i", F: "out_f"}
ARITH = [BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MOD, BinOp.MIN, BinOp.MAX, BinOp.ABS_DIFF]
INT_BIN = sorted(INT_ONLY_BIN, key=lambda o: o.value)
CMP = sorted(COMPARISONS, key=lambda o: o.value)
UN_INT = sorted(INT_ONLY_UN, key=lambda o: o.value) + [UnOp.NEGATE, UnOp.ABS, UnOp.SIGN]
UN_F = sorted(FLOAT_ONLY_UN - FLOAT_PREDICATES, key=lambda o: o.value) + [UnOp.NEGATE, UnOp.ABS, UnOp.SIGN]


@dataclass
class GenOptions:
    max_stmts: int = 6
    max_depth: int = 3
    expr_depth: int = 3
    loops: bool = True
    workgroup: bool = True
    atomics: bool = True
    grid_sync: bool = True
    returns: bool = True


@dataclass
class _Ctx:
    rng: random.Random
    opts: GenOptions
    wg: int
    n: int
    scopes: list[dict[str, DataType]] = field(default_factory=lambda: [{}])
    loops: set[str] = field(default_factory=set)
    counter: int = 0
    uniform: bool = True
    atomic_op: AtomicOp = AtomicOp.ADD

    def visible(self, t: DataType) -> list[str]:
        return [n for s in self.scopes for n, vt in s.items() if vt is t]

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


def _lit(ctx: _Ctx, t: DataType) -> Expr:
    r = ctx.rng
    if t is B:
        return Expr.bool_(r.random() < 0.5)
    if t is F:
        bits = int(witness_words(F, 1 + r.randint(0, 40), r.randint(0, 9999))[-1])
        return Expr.f32_from_bits(bits)
    word = int(witness_words(U, 1 + r.randint(0, 30), r.randint(0, 9999))[-1])
    return Expr.u32(word) if t is U else Expr.i32(word - (1 << 32) if word & 0x80000000 else word)


def _index(ctx: _Ctx, depth: int) -> Expr:
    r = ctx.rng.random()
    if r < 0.45:
        return Expr.gid_x()
    if r < 0.6:
        return Expr.gid_x() + Expr.u32(ctx.rng.randint(1, 5))
    if r < 0.7:
        return Expr.u32(ctx.rng.randint(0, ctx.n + 4))
    return _expr(ctx, U, depth - 1) % Expr.u32(ctx.n + 3)


def _expr(ctx: _Ctx, t: DataType, depth: int) -> Expr:
    r = ctx.rng
    if depth <= 0 or r.random() < 0.25:
        choices = ["lit"]
        if ctx.visible(t):
            choices += ["var", "var"]
        if t in IN:
            choices += ["load", "load"]
        if t is U:
            choices += ["gid", "lid", "wgid", "len"]
        pick = r.choice(choices)
        if pick == "var":
            return Expr.var(r.choice(ctx.visible(t)))
        if pick == "load":
            return Expr.load(IN[t], _index(ctx, depth))
        if pick == "gid":
            return Expr.gid_x()
        if pick == "lid":
            return Expr.lid_x()
        if pick == "wgid":
            return Expr.wgid_x()
        if pick == "len":
            return Expr.buf_len(IN[r.choice([U, I, F])])
        return _lit(ctx, t)
    d = depth - 1
    if t is B:
        k = r.random()
        if k < 0.5:
            ot = r.choice([U, I, F])
            return Expr.bin(r.choice(CMP), _expr(ctx, ot, d), _expr(ctx, ot, d))
        if k < 0.7:
            return Expr.bin(r.choice(sorted(LOGICAL, key=lambda o: o.value)), _expr(ctx, B, d), _expr(ctx, B, d))
        if k < 0.8:
            return Expr.un(UnOp.LOGICAL_NOT, _expr(ctx, B, d))
        if k < 0.9:
            return Expr.un(r.choice(sorted(FLOAT_PREDICATES, key=lambda o: o.value)), _expr(ctx, F, d))
        return Expr.cast(B, _expr(ctx, r.choice([U, I, F]), d))
    k = r.random()
    if k < 0.45:
        ops = ARITH + (INT_BIN if t is not F else [])
        op = r.choice(ops)
        left, right = _expr(ctx, t, d), _expr(ctx, t, d)
        if t is I and op in (BinOp.DIV, BinOp.MOD):  # keep i32 division defined
            bad = right.eq(Expr.i32(0)).or_(right.eq(Expr.i32(-1)))
            right = Expr.select(bad, Expr.i32(7), right)
        if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT) and r.random() < 0.5:
            right = _expr(ctx, r.choice([U, I]), d)
        return Expr.bin(op, left, right)
    if k < 0.6:
        return Expr.un(r.choice(UN_F if t is F else UN_INT), _expr(ctx, t, d))
    if k < 0.7:
        return Expr.select(_expr(ctx, B, d), _expr(ctx, t, d), _expr(ctx, t, d))
    if k < 0.82:
        return Expr.cast(t, _expr(ctx, r.choice([U, I, F, B]), d))
    if k < 0.9:
        return Expr.bitcast(t, _expr(ctx, r.choice([x for x in (U, I, F)]), d))
    if t is F and k < 0.96:
        return Expr.fma(_expr(ctx, F, d), _expr(ctx, F, d), _expr(ctx, F, d))
    return _expr(ctx, t, 0)


def _stmts(ctx: _Ctx, depth: int, count: int, top: bool) -> list[Node]:
    r = ctx.rng
    out: list[Node] = []
    for _ in range(count):
        k = r.random()
        t = r.choice([U, I, F])
        if k < 0.25:
            name = ctx.fresh()
            out.append(Node.let_bind(name, _expr(ctx, t, ctx.opts.expr_depth)))
            ctx.scopes[-1][name] = t
        elif k < 0.35 and [v for v in ctx.visible(t) if v not in ctx.loops]:
            name = r.choice([v for v in ctx.visible(t) if v not in ctx.loops])
            out.append(Node.assign(name, _expr(ctx, t, ctx.opts.expr_depth)))
        elif k < 0.6:
            out.append(Node.store(OUT[t], Expr.gid_x(), _expr(ctx, t, ctx.opts.expr_depth)))
        elif k < 0.75 and depth < ctx.opts.max_depth:
            cond = _expr(ctx, B, 2)
            ctx.scopes.append({})
            then = _stmts(ctx, depth + 1, r.randint(1, 3), False)
            ctx.scopes.pop()
            ctx.scopes.append({})
            other = _stmts(ctx, depth + 1, r.randint(0, 2), False)
            ctx.scopes.pop()
            out.append(Node.if_(cond, then, other))
        elif k < 0.85 and depth < ctx.opts.max_depth and ctx.opts.loops:
            var = ctx.fresh("i")
            lo = r.randint(0, 3)
            trips = _expr(ctx, U, 1) & Expr.u32(3) if r.random() < 0.5 else Expr.u32(r.randint(0, 4))
            ctx.scopes.append({var: U})
            ctx.loops.add(var)
            body = _stmts(ctx, depth + 1, r.randint(1, 3), False)
            ctx.loops.discard(var)
            ctx.scopes.pop()
            out.append(Node.loop(var, Expr.u32(lo), Expr.u32(lo) + trips, body))
        elif k < 0.9 and ctx.opts.atomics:
            op = ctx.atomic_op  # one op kind per program: different kinds do not commute
            out.append(Node.expr(Expr.atomic(op, "acc", _expr(ctx, U, 1) % Expr.u32(5), _expr(ctx, U, 2))))
        elif k < 0.93 and ctx.opts.returns and not top and not ctx.opts.grid_sync:
            out.append(Node.if_(_expr(ctx, B, 1), [Node.return_()]))
        else:
            out.append(Node.store(OUT[t], Expr.gid_x(), _expr(ctx, t, 1)))
    return out


def random_program(seed: int, opts: GenOptions | None = None) -> tuple[Program, list[np.ndarray]]:
    """A random program and its inputs, fully determined by ``seed``."""
    rng = random.Random(seed)
    opts = opts or GenOptions()
    opts = GenOptions(**vars(opts))
    wg = rng.choice([1, 4, 8, 32, 64])
    n = rng.choice([1, 5, 17, 64, 100, 257])
    use_wg = opts.workgroup and rng.random() < 0.3
    use_sync = opts.grid_sync and rng.random() < 0.2
    opts.grid_sync = use_sync
    ctx = _Ctx(rng, opts, wg, n)
    ctx.atomic_op = rng.choice([AtomicOp.ADD, AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR,
                                AtomicOp.MIN, AtomicOp.MAX])
    buffers = [BufferDecl.read("in_u", 0, U), BufferDecl.read("in_i", 1, I), BufferDecl.read("in_f", 2, F),
               BufferDecl.output("out_u", 3, U, n), BufferDecl.output("out_i", 4, I, n),
               BufferDecl.output("out_f", 5, F, n), BufferDecl.read_write("acc", 6, U, 5)]
    body: list[Node] = []
    body += _stmts(ctx, 0, rng.randint(1, opts.max_stmts), True)
    if use_wg:
        buffers.append(BufferDecl.workgroup("tile", wg, U))
        shift = rng.randint(1, max(1, wg - 1))
        name = ctx.fresh("w")
        body += [Node.store("tile", Expr.lid_x(), _expr(ctx, U, 2)), Node.barrier(),
                 Node.let_bind(name, Expr.load("tile", (Expr.lid_x() + Expr.u32(shift)) % Expr.u32(wg))),
                 Node.barrier(), Node.store("out_u", Expr.gid_x(), Expr.var(name) ^ Expr.load("out_u", Expr.gid_x()))]
        ctx.scopes[-1][name] = U
    if use_sync:
        buffers.append(BufferDecl.output("out_g", 7, U, n))
        body += [Node.barrier(MemoryOrdering.GRID_SYNC),
                 Node.store("out_g", Expr.gid_x(),
                            Expr.load("out_u", (Expr.gid_x() + Expr.u32(rng.randint(1, 9))) % Expr.u32(n))
                            + Expr.load("acc", Expr.u32(0)))]
        ctx.scopes = [{}]
        # after a grid_sync, read `acc` only: its atomics all finished in the previous phase
    body += _stmts(ctx, 0, rng.randint(0, 2), True) if not use_sync else []
    program = Program.wrapped(buffers, wg, body)
    inputs = [witness_words(U, n, seed * 3 + 1), witness_words(I, n, seed * 3 + 2),
              witness_words(F, n, seed * 3 + 3), witness_words(U, 5, seed * 3 + 4)]
    return program, typed_inputs(program, inputs)


def programs(opts: GenOptions | None = None):
    """Hypothesis strategy of (program, inputs) pairs."""
    from hypothesis import strategies as st

    return st.integers(min_value=0, max_value=2**32 - 1).map(lambda s: random_program(s, opts))
