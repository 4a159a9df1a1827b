"""Random valid, terminating, race-free programs: a plain seeded generator
(`random_program`) and a hypothesis strategy (`programs`) over it.

Generated programs use divergent `if`s, bounded loops, `while_` loops with `break_` and
`continue_`, early returns, workgroup memory behind top-level barriers, commuting atomics,
grid_sync phases (some starting with an `indirect_dispatch` an earlier phase wrote), matmul_acc
on workgroup arrays, local arrays, functions, exact float atomics (ADD, MIN or MAX statements
into f32/f16/bf16 buffers, S36), and every value type: u32, i32, f32, bool, u64, i64, f16, bf16, with
u8/i16 storage. Every invocation writes outputs only at its own index, reads inputs anywhere
(out-of-bounds included) and reads workgroup memory only between barriers, so the result is
the same on every conforming backend.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from vyre.ir import (
    AtomicOp,
    BinOp,
    BufferDecl,
    DataType,
    Expr,
    Function,
    MemoryOrdering,
    Node,
    Program,
    UnOp,
)
from vyre.ir.types import (
    COMPARISONS,
    FLOAT_ONLY_UN,
    FLOAT_PREDICATES,
    INT_ONLY_BIN,
    INT_ONLY_UN,
    LOGICAL,
    TRANSCENDENTAL,
)

from .witness import typed_inputs, witness_words

U, I, F, B = DataType.U32, DataType.I32, DataType.F32, DataType.BOOL
U64, I64, H, BH = DataType.U64, DataType.I64, DataType.F16, DataType.BF16
IN = {U: "in_u", I: "in_i", F: "in_f", U64: "in_u64", I64: "in_i64", H: "in_h", BH: "in_bh"}
OUT = {U: "out_u", I: "out_i", F: "out_f", U64: "out_u64", I64: "out_i64", H: "out_h", BH: "out_bh"}
BASIC = [U, I, F]
WIDE = [U64, I64, H, BH]
FLOATS = (F, H, BH)
SIGNED = (I, I64)
SAME_SIZE = {U: (U, I, F), I: (U, I, F), F: (U, I, F), U64: (U64, I64), I64: (U64, I64), H: (H, BH, U),
             BH: (H, BH, U)}
ARITH = [BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MOD, BinOp.MIN, BinOp.MAX, BinOp.ABS_DIFF]
ARITH_F = sorted((o for o in TRANSCENDENTAL if isinstance(o, BinOp)), key=lambda o: o.value)  # float only, S13
INT_BIN = sorted(INT_ONLY_BIN, key=lambda o: o.value)
CMP = sorted(COMPARISONS, key=lambda o: o.value)
UN_INT = sorted(INT_ONLY_UN, key=lambda o: o.value) + [UnOp.NEGATE, UnOp.ABS, UnOp.SIGN]
UN_F = sorted(FLOAT_ONLY_UN - FLOAT_PREDICATES, key=lambda o: o.value) + [UnOp.NEGATE, UnOp.ABS, UnOp.SIGN] \
    + sorted((o for o in TRANSCENDENTAL if isinstance(o, UnOp)), key=lambda o: o.value)   # correctly rounded (S13)


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
    types: bool = True       # u64/i64/f16/bf16 values, u8/i16 storage
    wide: tuple[DataType, ...] = tuple(WIDE)   # which of u64/i64/f16/bf16 `types` brings
    narrow: bool = True                        # whether `types` brings u8/i16 storage
    functions: bool = True
    whiles: bool = True
    locals: bool = True
    indirect: bool = True
    matmul: bool = True      # matmul_acc on workgroup arrays (then no early returns: V039)
    tile_loads: bool = True  # load_tile of an input into a workgroup array (likewise, S38)
    float_atomics: bool = True   # exact float atomic ADD/MIN/MAX statements (S36)
    # features a backend refuses by design (see `options_for`): "f32_div", "f32_mod", "fma",
    # "sqrt", "reciprocal", and the transcendentals by name ("exp", "sin", ...)
    excluded: frozenset[str] = frozenset()
    # at most this many calls of correctly rounded functions per program (None: any number);
    # `options_for` sets it where each call is expensive to compile (see there)
    max_transcendentals: int | None = None
    # the share of programs that may call correctly rounded functions at all (the others get
    # none); drawn from a stream of its own, so the programs that may are as they were
    transcendental_share: float = 1.0


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
    types: list[DataType] = field(default_factory=lambda: list(BASIC))
    functions: list = field(default_factory=list)   # (name, param types, result type)
    in_function: bool = False
    in_loop: bool = False
    local: bool = False
    facc: dict[DataType, str] = field(default_factory=dict)   # float type -> its S36 buffer
    float_op: AtomicOp = AtomicOp.ADD
    transcendentals: int = 0          # correctly rounded calls generated so far

    def math_left(self) -> bool:
        cap = self.opts.max_transcendentals
        return cap is None or self.transcendentals < cap

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
    if t is H or t is BH:
        bits = int(witness_words(t, 1 + r.randint(0, 30), r.randint(0, 9999))[-1]) & 0xFFFF
        return Expr.f16_from_bits(bits) if t is H else Expr.bf16_from_bits(bits)
    word = int(witness_words(U, 1 + r.randint(0, 30), r.randint(0, 9999))[-1])
    if t.is_wide:
        word = (word << 32) | int(witness_words(U, 1 + r.randint(0, 30), r.randint(0, 9999))[-1])
        return Expr.u64(word) if t is U64 else Expr.i64(word - (1 << 64) if word >> 63 else word)
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
        if t is U and ctx.opts.types and ctx.opts.narrow:
            choices += ["narrow"]
        if t is I and ctx.opts.types and ctx.opts.narrow:
            choices += ["narrow"]
        if t is U and ctx.local:
            choices += ["local"]
        if ctx.functions and not ctx.in_function and any(rt is t for _, _, rt in ctx.functions):
            choices += ["call"]
        pick = r.choice(choices)
        if pick == "narrow":
            return Expr.load("in_b8" if t is U else "in_s16", _index(ctx, depth))
        if pick == "local":
            return Expr.load("loc", _expr(ctx, U, 0) % Expr.u32(6))   # 4 elements: some OOB
        if pick == "call":
            name, params, _ = r.choice([f for f in ctx.functions if f[2] is t])
            return Expr.call(name, *(_expr(ctx, pt, max(0, depth - 1)) for pt in params))
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
            return Expr.buf_len(IN[r.choice(ctx.types)])
        return _lit(ctx, t)
    d = depth - 1
    if t is B:
        k = r.random()
        if k < 0.5:
            ot = r.choice(ctx.types)
            return Expr.bin(r.choice(CMP), _expr(ctx, ot, d), _expr(ctx, ot, d))
        if k < 0.7:
            return Expr.bin(r.choice(sorted(LOGICAL, key=lambda o: o.value)), _expr(ctx, B, d), _expr(ctx, B, d))
        if k < 0.8:
            return Expr.un(UnOp.LOGICAL_NOT, _expr(ctx, B, d))
        if k < 0.9:
            ft = r.choice([x for x in ctx.types if x in FLOATS])
            return Expr.un(r.choice(sorted(FLOAT_PREDICATES, key=lambda o: o.value)), _expr(ctx, ft, d))
        return Expr.cast(B, _expr(ctx, r.choice(ctx.types), d))
    k = r.random()
    if k < 0.45:
        ops = ARITH + (INT_BIN if t not in FLOATS else [o for o in ARITH_F if o.value not in ctx.opts.excluded
                                                        and ctx.math_left()])
        if t in FLOATS:
            ops = [o for o in ops if not (o is BinOp.DIV and "f32_div" in ctx.opts.excluded)
                   and not (o is BinOp.MOD and "f32_mod" in ctx.opts.excluded)]
        op = r.choice(ops)
        ctx.transcendentals += op in TRANSCENDENTAL
        left, right = _expr(ctx, t, d), _expr(ctx, t, d)
        if t in SIGNED and op in (BinOp.DIV, BinOp.MOD):  # keep signed division defined
            zero, minus = (Expr.i32(0), Expr.i32(-1)) if t is I else (Expr.i64(0), Expr.i64(-1))
            bad = right.eq(zero).or_(right.eq(minus))
            right = Expr.select(bad, Expr.i32(7) if t is I else Expr.i64(7), right)
        if op in (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT) and r.random() < 0.5:
            right = _expr(ctx, r.choice([x for x in ctx.types if x.is_integer]), d)
        return Expr.bin(op, left, right)
    if k < 0.6:
        un_f = [o for o in UN_F if o.value not in ctx.opts.excluded and (o not in TRANSCENDENTAL or ctx.math_left())]
        op = r.choice(un_f if t in FLOATS else UN_INT)
        ctx.transcendentals += op in TRANSCENDENTAL
        return Expr.un(op, _expr(ctx, t, d))
    if k < 0.7:
        return Expr.select(_expr(ctx, B, d), _expr(ctx, t, d), _expr(ctx, t, d))
    if k < 0.82:
        return Expr.cast(t, _expr(ctx, r.choice([*ctx.types, B]), d))
    if k < 0.9:
        return Expr.bitcast(t, _expr(ctx, r.choice([x for x in SAME_SIZE[t] if x in ctx.types]), d))
    if t in FLOATS and k < 0.96 and "fma" not in ctx.opts.excluded:
        return Expr.fma(_expr(ctx, t, d), _expr(ctx, t, d), _expr(ctx, t, d))
    return _expr(ctx, t, 0)


def _stmts(ctx: _Ctx, depth: int, count: int, top: bool) -> list[Node]:
    r = ctx.rng
    out: list[Node] = []
    for _ in range(count):
        k = r.random()
        t = r.choice(ctx.types)
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
            body = _loop_body(ctx, depth)
            ctx.loops.discard(var)
            ctx.scopes.pop()
            out.append(Node.loop(var, Expr.u32(lo), Expr.u32(lo) + trips, body))
        elif k < 0.87 and depth < ctx.opts.max_depth and ctx.opts.whiles:
            # a counter that advances first thing: it always ends below its cap
            var = ctx.fresh("c")
            bound = _expr(ctx, U, 1) % Expr.u32(5)
            ctx.scopes.append({var: U})
            ctx.loops.add(var)
            body = [Node.assign(var, Expr.var(var) + Expr.u32(1))] + _loop_body(ctx, depth)
            ctx.loops.discard(var)
            ctx.scopes.pop()
            out += [Node.let_bind(var, Expr.u32(0)),
                    Node.while_(Expr.var(var).lt(bound), body, max_iterations=8)]
        elif k < 0.89 and ctx.local:
            out.append(Node.store("loc", _expr(ctx, U, 1) % Expr.u32(6), _expr(ctx, U, 2)))
        elif k < 0.9 and ctx.opts.atomics:
            op = ctx.atomic_op  # one op kind per program: different kinds do not commute
            out.append(Node.expr(Expr.atomic(op, "acc", _expr(ctx, U, 1) % Expr.u32(5), _expr(ctx, U, 2))))
        elif k < 0.93 and ctx.opts.returns and not top and not ctx.opts.grid_sync and not ctx.in_function:
            out.append(Node.if_(_expr(ctx, B, 1), [Node.return_()]))
        elif k < 0.97 and ctx.facc:
            # S36: a statement of its own, one op kind per program, some indices out of bounds
            ft = r.choice(sorted(ctx.facc, key=lambda d: d.value))
            out.append(Node.expr(Expr.atomic(ctx.float_op, ctx.facc[ft], _expr(ctx, U, 1) % Expr.u32(7),
                                             _expr(ctx, ft, 2))))
        else:
            out.append(Node.store(OUT[t], Expr.gid_x(), _expr(ctx, t, 1)))
    return out


def _loop_body(ctx: _Ctx, depth: int) -> list[Node]:
    """A loop body, sometimes with a divergent break or continue."""
    r = ctx.rng
    # the jump's condition sees only what is visible before the body (it may go first)
    jump = None
    if ctx.opts.whiles and r.random() < 0.4:
        jump = Node.if_(_expr(ctx, B, 1), [Node.break_() if r.random() < 0.5 else Node.continue_()])
    saved, ctx.in_loop = ctx.in_loop, True
    body = _stmts(ctx, depth + 1, r.randint(1, 3), False)
    ctx.in_loop = saved
    if jump is not None:
        body.insert(r.randint(0, len(body)), jump)
    return body


def _functions(ctx: _Ctx) -> list[Function]:
    """One or two functions over random types, made before the body that calls them."""
    r = ctx.rng
    out = []
    for j in range(r.randint(1, 2)):
        params = [(f"p{k}", r.choice(ctx.types)) for k in range(r.randint(1, 3))]
        result = r.choice(ctx.types)
        saved = ctx.scopes, ctx.in_function, ctx.loops
        ctx.scopes, ctx.in_function, ctx.loops = [dict(params)], True, set()
        body = _stmts(ctx, 1, r.randint(0, 3), False)
        res = _expr(ctx, result, 2)
        ctx.scopes, ctx.in_function, ctx.loops = saved
        out.append(Function.define(f"fn{j}", params, body, res))
        ctx.functions.append((f"fn{j}", [t for _, t in params], result))
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
    mm_rng = random.Random(seed * 7919 + 26)   # its own stream: other programs stay as they were
    use_mm = use_wg and opts.matmul and mm_rng.random() < 0.5
    lt_rng = random.Random(seed * 7919 + 38)   # likewise for load_tile
    use_lt = use_wg and opts.tile_loads and lt_rng.random() < 0.5
    if use_mm or use_lt:
        opts.returns = False
    if opts.transcendental_share < 1.0 and random.Random(seed * 104729 + 13).random() >= opts.transcendental_share:
        opts.max_transcendentals = 0
    ctx = _Ctx(rng, opts, wg, n)
    ctx.atomic_op = rng.choice([AtomicOp.ADD, AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR,
                                AtomicOp.MIN, AtomicOp.MAX])
    buffers = [BufferDecl.read("in_u", 0, U), BufferDecl.read("in_i", 1, I), BufferDecl.read("in_f", 2, F),
               BufferDecl.output("out_u", 3, U, n), BufferDecl.output("out_i", 4, I, n),
               BufferDecl.output("out_f", 5, F, n), BufferDecl.read_write("acc", 6, U, 5)]
    extended = opts.types and rng.random() < 0.5
    wide = [t for t in WIDE if t in opts.wide]
    if extended:
        ctx.types = BASIC + wide
        buffers += [BufferDecl.read(IN[t], 10 + i, t) for i, t in enumerate(WIDE) if t in wide]
        buffers += [BufferDecl.output(OUT[t], 20 + i, t, n) for i, t in enumerate(WIDE) if t in wide]
        if opts.narrow:
            buffers += [BufferDecl.read("in_b8", 30, DataType.U8), BufferDecl.read("in_s16", 31, DataType.I16),
                        BufferDecl.output("out_b8", 32, DataType.U8, n)]
    else:
        opts.types = False
    if opts.locals and rng.random() < 0.3:
        ctx.local = True
        buffers.append(BufferDecl.local("loc", 4, U))
    # float atomics are decided by a generator of their own: programs without them are the
    # ones earlier versions made from the same seed
    frng = random.Random(seed * 7919 + 17)
    if opts.float_atomics and frng.random() < 0.35:
        ctx.float_op = frng.choice([AtomicOp.ADD, AtomicOp.ADD, AtomicOp.MIN, AtomicOp.MAX])
        for t in FLOATS:
            if t in ctx.types and (t is F or frng.random() < 0.5):
                ctx.facc[t] = "facc" + ("" if t is F else f"_{t.value}")
    functions = _functions(ctx) if opts.functions and rng.random() < 0.3 else []
    body: list[Node] = []
    body += _stmts(ctx, 0, rng.randint(1, opts.max_stmts), True)
    if extended and opts.narrow:
        body.append(Node.store("out_b8", Expr.gid_x(), _expr(ctx, U, 2)))
    if use_wg:
        buffers.append(BufferDecl.workgroup("tile", wg, U))
        shift = rng.randint(1, max(1, wg - 1))
        name = ctx.fresh("w")
        body += [Node.store("tile", Expr.lid_x(), _expr(ctx, U, 2)), Node.barrier(),
                 Node.let_bind(name, Expr.load("tile", (Expr.lid_x() + Expr.u32(shift)) % Expr.u32(wg))),
                 Node.barrier(), Node.store("out_u", Expr.gid_x(), Expr.var(name) ^ Expr.load("out_u", Expr.gid_x()))]
        ctx.scopes[-1][name] = U
    if use_mm:
        body += _matmul(ctx, mm_rng, buffers)
    if use_lt:
        body += _load_tile(ctx, lt_rng, buffers, n)
    if use_sync:
        buffers.append(BufferDecl.output("out_g", 7, U, n))
        indirect = opts.indirect and rng.random() < 0.5
        if indirect:   # phase 0 writes the grid of phase 1 (the grid covering n, or more)
            buffers.append(BufferDecl.output("grid", 8, U, 3))
            body.append(Node.if_(Expr.gid_x().eq(Expr.u32(0)), [
                Node.store("grid", Expr.u32(0), Expr.u32(-(-n // wg) + rng.randint(0, 2))),
                Node.store("grid", Expr.u32(1), Expr.u32(1)), Node.store("grid", Expr.u32(2), Expr.u32(1))]))
        body += [Node.barrier(MemoryOrdering.GRID_SYNC)]
        if indirect:
            body.append(Node.indirect_dispatch("grid", 0))
        body += [Node.store("out_g", Expr.gid_x(),
                            Expr.load("out_u", (Expr.gid_x() + Expr.u32(rng.randint(1, 9))) % Expr.u32(n))
                            + Expr.load("acc", Expr.u32(0)))]
        ctx.scopes = [{}]
        # after a grid_sync, read `acc` only: its atomics all finished in the previous phase
    body += _stmts(ctx, 0, rng.randint(0, 2), True) if not use_sync else []
    facc = sorted(ctx.facc.items(), key=lambda kv: kv[1])
    buffers += [BufferDecl.read_write(name, 40 + j, t, 5) for j, (t, name) in enumerate(facc)]
    program = Program.wrapped(buffers, wg, body, functions)
    inputs = [witness_words(U, n, seed * 3 + 1), witness_words(I, n, seed * 3 + 2),
              witness_words(F, n, seed * 3 + 3), witness_words(U, 5, seed * 3 + 4)]
    if extended:
        inputs += [witness_words(t, n, seed * 7 + 1 + i) for i, t in enumerate(WIDE) if t in wide]
        if opts.narrow:
            inputs += [witness_words(DataType.U8, n, seed * 7 + 5), witness_words(DataType.I16, n, seed * 7 + 6)]
    inputs += [witness_words(t, 5, seed * 11 + j) for j, (t, _) in enumerate(facc)]
    return program, typed_inputs(program, inputs)


def _matmul(ctx: _Ctx, rng: random.Random, buffers: list[BufferDecl]) -> list[Node]:
    """A matmul_acc (S37) on workgroup arrays filled by the invocations (each slot by one),
    its result xor-ed into ``out_u``."""
    pairs = [(DataType.I8, DataType.U8), (DataType.U8, DataType.U8), (DataType.I8, DataType.I8), (U, U), (I, U)]
    ta, tb = rng.choice(pairs)
    td = rng.choice([U, I])
    m, n, k = rng.choice([1, 3, 16]), rng.choice([1, 5, 8]), rng.choice([1, 4, 32, 37])
    wg = ctx.wg
    out: list[Node] = []
    for name, t, count in (("mma", ta, m * k), ("mmb", tb, n * k), ("mmd", td, m * n)):
        buffers.append(BufferDecl.workgroup(name, count, t))
        q, e = ctx.fresh("q"), ctx.fresh("e")
        out.append(Node.loop(q, Expr.u32(0), Expr.u32(-(-count // wg)), [
            Node.let_bind(e, Expr.var(q) * wg + Expr.lid_x()),
            Node.if_(Expr.var(e).lt(Expr.u32(count)),
                     [Node.store(name, Expr.var(e), _expr(ctx, t.value_type, 2) +
                                 Expr.cast(t.value_type, Expr.var(e) * 0x9E3779B1))])]))
    out.append(Node.matmul_acc("mmd", "mma", "mmb", m, n, k))
    got = Expr.load("mmd", Expr.lid_x() % Expr.u32(m * n))
    if td is I:
        got = Expr.bitcast(U, got)
    out.append(Node.store("out_u", Expr.gid_x(), got ^ Expr.load("out_u", Expr.gid_x())))
    return out


def _load_tile(ctx: _Ctx, rng: random.Random, buffers: list[BufferDecl], n: int) -> list[Node]:
    """A load_tile (S38) of one of the program's inputs into a workgroup array: offsets from
    the workgroup id, strides and limits that may reach past the input's end or wrap, one
    element of the tile xor-ed into ``out_u``."""
    inputs = [b for b in buffers if b.access.value == "read" and b.name.startswith("in_")]
    src = rng.choice(inputs)
    t = src.dtype
    rows, cols = rng.choice([1, 2, 3, 5]), rng.choice([1, 3, 4, 8, 16])
    count = rows * cols
    buffers.append(BufferDecl.workgroup("ltw", count, t))
    g = Expr.wgid_x()
    offset = g * Expr.u32(rng.choice([0, 1, 3, cols, 16])) + Expr.u32(rng.choice([0, 1, 5, n - 1, 2**32 - 3]))
    stride = Expr.u32(rng.choice([0, 1, cols, cols + 3, 16, n]))
    rows_in = Expr.u32(rng.choice([0, 1, rows, rows + 2]))
    cols_in = Expr.u32(rng.choice([cols, cols + 1, 2])) - (g % Expr.u32(2) if rng.random() < 0.5 else Expr.u32(0))
    got = Expr.load("ltw", (Expr.lid_x() * Expr.u32(rng.choice([1, 7]))) % Expr.u32(count))
    vt = t.value_type
    if vt.is_float:
        bits = Expr.bitcast(DataType.U32, got) if vt.size == 4 else Expr.cast(DataType.U32, Expr.bitcast(
            DataType.U64 if vt.size == 8 else DataType.U32, got))
    else:
        bits = got if vt is U else Expr.cast(U, got)
    return [Node.load_tile("ltw", src.name, offset, stride, rows, cols, rows_in, cols_in),
            Node.store("out_u", Expr.gid_x(), bits ^ Expr.load("out_u", Expr.gid_x()))]


#: correctly rounded functions that random programs leave out on a CPU wgpu adapter
SLOW_ON_CPU_ADAPTERS = frozenset({"pow", "atan2"})


def options_for(backend, base: GenOptions | None = None) -> GenOptions:
    """``base`` narrowed to what ``backend`` runs: what its ``supported_ops()`` leaves out, and
    f32 division and remainder where a probe dispatch is refused (`UnsupportedFeature`)."""
    from vyre.driver import UnsupportedFeature
    from vyre.ir.ops import all_op_ids

    opts = GenOptions(**vars(base or GenOptions()))
    missing = all_op_ids() - set(backend.supported_ops())
    excluded = set(opts.excluded)
    if "vyre.expr.fma" in missing:
        excluded.add("fma")
    for op in ("sqrt", "reciprocal", *(o.value for o in TRANSCENDENTAL)):
        if f"vyre.un_op.{op}" in missing or f"vyre.bin_op.{op}" in missing:
            excluded.add(op)
    opts.wide = tuple(t for t in opts.wide if f"vyre.dtype.{t.value}" not in missing)
    opts.narrow = opts.narrow and not any(f"vyre.dtype.{t.value}" in missing for t in (DataType.U8, DataType.I16))
    if not opts.wide and not opts.narrow:
        opts.types = False
    if any(op.startswith("vyre.expr.call") for op in missing):
        opts.functions = False
    for key, op in (("f32_div", BinOp.DIV), ("f32_mod", BinOp.MOD)):
        probe = Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.output("o", 1, F)], 1,
                                [Node.store("o", Expr.gid_x(), Expr.bin(op, Expr.load("a", Expr.gid_x()),
                                                                        Expr.f32(3.0)))])
        try:
            backend.dispatch(probe, [np.ones(1, np.float32)])
        except UnsupportedFeature:
            excluded.add(key)
    opts.excluded = frozenset(excluded)
    if backend.id() == "wgpu" and backend.device.software_adapter():
        # WGSL runs each correctly rounded call as thousands of u32 operations (float64 in
        # software), and a CPU adapter (lavapipe) compiles a kernel in time that grows faster
        # than its size: one call in a quarter of the programs keeps a random run short there
        # (200 programs still call each function a few times), and pow and
        # atan2 (which carry a second, double-double evaluation: 7 to 130 s a kernel there,
        # most of a random run's time) are left to their own wgpu tests
        # (tests/semantics/test_crmath_pow_atan2.py; every function is tested whole in
        # tests/semantics/test_crmath.py). A GPU adapter gets every function.
        cap = opts.max_transcendentals
        opts.max_transcendentals = 1 if cap is None else min(cap, 1)
        opts.transcendental_share = min(opts.transcendental_share, 0.25)
        opts.excluded = opts.excluded | SLOW_ON_CPU_ADAPTERS
    return opts


def programs(opts: GenOptions | None = None):
    """Hypothesis strategy of (program, inputs) pairs."""
    from hypothesis import strategies as st

    return st.integers(min_value=0, max_value=2**32 - 1).map(lambda s: random_program(s, opts))
