"""Stable LSD radix sort: ``sort(keys, values=None)`` and ``argsort(keys)``.

Keys: u32, i32, u64, i64, f32, f16 and bf16 (IEEE totalOrder of the bits: -NaN < -inf < ... <
-0 < +0 < ... < +inf < +NaN; sorting moves bits and does no arithmetic, so subnormals keep
their place and their bits; 16-bit floats are sorted as u32 order keys, `vyre.lib.halfkeys`). Each pass sorts by 8 bits of the order key (signed keys with the sign
bit flipped; negative floats with every bit flipped): 4 passes for 32-bit keys, 8 for 64-bit.
A pass is three steps, none waiting on another workgroup:

1. `count_program`: each workgroup counts the digits of its chunk of consecutive tiles
   (workgroup-memory atomics), digit-major, so that
2. one exclusive scan (`vyre.lib.scan`) gives every workgroup its first place for every digit;
3. `scatter_program`: each workgroup takes its tiles in order. A tile is loaded coalesced
   into workgroup memory and sorted there by the digit, stably, in two 4-bit rounds (each
   invocation ranks its consecutive elements in its own column of 16 counters, one scan of
   the 16 x wg counters gives every element its place; the tile's digit counts ride along
   in the second scan's upper 16 bits); then the tile is stored coalesced, each run of
   equal digits after the workgroup's running place for that digit.

Equal keys keep their order (stable). Elements past the end are given the key whose digit is
the last in every pass, so they sort after the tile's real elements and are never stored.

On serial backends (`vyre.lib.runner.serial`, a CPU device: PoCL, whose workgroups run their invocations one
after another on a CPU core) a pass is the same three steps over each invocation's own run of
consecutive elements, with neither atomics nor barriers: `serial_count_program` counts a run's
digits in private counters, and `serial_scatter_program` moves the run's elements in order,
each to its digit's next place.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

from .arrays import Arr, as_arr, host_dtype, require, result, to_kind
from .errors import LibError
from .halfkeys import HALF_KEYS, bits_program, order_program
from .kernels import GID, LID, WGID, N, lane_words, pad32, ping_pong_scan, rounds
from .runner import Runner, params
from .scan import _int_scan

U = DataType.U32
KEY_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64, DataType.F32)
VALUE_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64, DataType.F32)
RADIX_BITS = 8
BUCKETS = 1 << RADIX_BITS
NIBBLES = 16            # a pass sorts a tile in two rounds of 4 bits
COUNT_UNROLL = 8        # loads in flight per invocation while counting
# workgroups of a pass on CUDA: enough that the last wave is a small part of the pass, few
# enough that the digit counts (256 per workgroup) stay small
_GROUPS = {"cuda": 4096}
# the parameters of both passes: [N, chunk, rounds, groups, shift, tiles per workgroup]
CHUNK, ROUNDS, GROUPS, SHIFT, PER = (Expr.load("prm", k) for k in range(1, 6))


def _held(key_t: DataType) -> DataType:
    """The unsigned type a pass holds a key's order bits in (u32, or u64 for 64-bit keys)."""
    return DataType.U64 if key_t.bits == 64 else U


def _ones(key_t: DataType, value: int) -> Expr:
    return Expr.u64(value) if key_t.bits == 64 else Expr.u32(value)


def _order(key_t: DataType, key: Expr, descending: bool) -> Expr:
    """The unsigned bits whose integer order is the key order (IEEE totalOrder for f32: -NaN
    first, +NaN last), every bit inverted for a descending sort (equal keys still keep their
    order). Bits move and nothing is computed on a float, so every key comes back as it was
    (`_key`)."""
    top = 1 << (key_t.bits - 1)
    ones = (1 << key_t.bits) - 1
    flip = ones if descending else 0
    bits = key if key_t in (U, DataType.U64) else Expr.bitcast(_held(key_t), key)
    if key_t is DataType.F32:   # negative: every bit flipped; positive: the sign bit set
        neg = (bits >> 31).eq(Expr.u32(1))
        return bits ^ Expr.select(neg, Expr.u32(ones ^ flip), Expr.u32(top ^ flip))
    mask = (top if key_t.is_signed else 0) ^ flip
    return bits ^ _ones(key_t, mask) if mask else bits


def _key(key_t: DataType, okey: Expr, descending: bool) -> Expr:
    """The key whose `_order` bits are ``okey``."""
    top = 1 << (key_t.bits - 1)
    ones = (1 << key_t.bits) - 1
    flip = ones if descending else 0
    if key_t is DataType.F32:   # the order's top bit is set for a positive key
        pos = ((okey ^ Expr.u32(flip)) >> 31).eq(Expr.u32(1))
        return Expr.bitcast(key_t, okey ^ Expr.select(pos, Expr.u32(top ^ flip), Expr.u32(ones ^ flip)))
    mask = (top if key_t.is_signed else 0) ^ flip
    bits = okey ^ _ones(key_t, mask) if mask else okey
    return bits if key_t in (U, DataType.U64) else Expr.bitcast(key_t, bits)


def _digit(key_t: DataType, okey: Expr) -> Expr:
    """Bits ``SHIFT .. SHIFT + 7`` of the order bits ``okey`` (u32)."""
    if key_t.bits == 64:
        return Expr.cast(U, okey >> Expr.cast(DataType.U64, SHIFT)) & (BUCKETS - 1)
    return (okey >> SHIFT) & (BUCKETS - 1)


def _prm(binding: int) -> BufferDecl:
    return BufferDecl.read("prm", binding, U, 8)


@functools.cache
def count_program(key_t: DataType, wg: int, unroll: int, descending: bool = False) -> Program:
    """``counts[d * GROUPS + w]`` = the elements of chunk ``w`` (``CHUNK`` elements from
    ``w * CHUNK``, read in ``ROUNDS`` rounds of ``unroll``) whose digit is ``d``."""
    def fold(items: list[Expr]) -> list[Node]:
        # past the end: bin BUCKETS, never read
        return [Node.expr(Expr.atomic(AtomicOp.ADD, "hist", d, Expr.u32(1))) for d in items]

    def digit(i: Expr) -> Expr:
        return _digit(key_t, _order(key_t, Expr.load("keys", i), descending))

    body = [*rounds(WGID * CHUNK + LID, wg, ROUNDS, unroll, digit, Expr.u32(BUCKETS), fold),
            Node.barrier()]
    for q in range(-(-BUCKETS // wg)):
        d = LID + q * wg
        body.append(Node.if_(d.lt(BUCKETS), [Node.store("counts", d * GROUPS + WGID, Expr.load("hist", d))]))
    return Program.wrapped([BufferDecl.read("keys", 0, key_t), _prm(1), BufferDecl.output("counts", 2, U),
                            BufferDecl.workgroup("hist", BUCKETS + 1, U)], wg, body)


@functools.cache
def serial_count_program(key_t: DataType, wg: int, descending: bool = False) -> Program:
    """``counts[d * GROUPS + r]`` = the elements of run ``r`` = gid (``CHUNK`` consecutive
    elements from ``r * CHUNK``) whose digit is ``d``: private counters, plain adds."""
    v = Expr.var
    r0, e = v("r0"), v("e")
    take = [Node.let_bind("e", r0 + v("j")),
            Node.if_(e.lt(N), [Node.let_bind("d", _digit(key_t, _order(key_t, Expr.load("keys", e), descending))),
                               Node.store("hist", v("d"), Expr.load("hist", v("d")) + 1)])]
    body = [Node.let_bind("r0", GID * CHUNK), Node.loop("j", Expr.u32(0), CHUNK, take),
            Node.loop("d", Expr.u32(0), Expr.u32(BUCKETS), [
                Node.store("counts", v("d") * GROUPS + GID, Expr.load("hist", v("d")))])]
    return Program.wrapped([BufferDecl.read("keys", 0, key_t), _prm(1), BufferDecl.output("counts", 2, U),
                            BufferDecl.local("hist", BUCKETS, U)], wg, body)


@functools.cache
def serial_scatter_program(key_t: DataType, value_t: DataType | None, wg: int, descending: bool = False) -> Program:
    """Run ``r`` = gid moves its elements in order, each to ``place[digit]``, which starts at
    ``offs[digit * GROUPS + r]`` and grows by one per element of that digit: stable."""
    kv = value_t is not None
    v = Expr.var
    e, place = v("e"), v("place")
    move = [Node.store("out_keys", place, v("k"))] + ([Node.store("out_values", place, Expr.load("values", e))]
                                                      if kv else [])
    take = [Node.let_bind("e", v("r0") + v("j")),
            Node.if_(e.lt(N), [Node.let_bind("k", Expr.load("keys", e)),
                               Node.let_bind("d", _digit(key_t, _order(key_t, v("k"), descending))),
                               Node.let_bind("place", Expr.load("next", v("d"))),
                               Node.store("next", v("d"), place + 1), *move])]
    body = [Node.loop("d", Expr.u32(0), Expr.u32(BUCKETS), [
                Node.store("next", v("d"), Expr.load("offs", v("d") * GROUPS + GID))]),
            Node.let_bind("r0", GID * CHUNK), Node.loop("j", Expr.u32(0), CHUNK, take)]
    bufs = [BufferDecl.read("keys", 0, key_t)] + ([BufferDecl.read("values", 1, value_t)] if kv else [])
    nb = len(bufs)
    bufs += [BufferDecl.read("offs", nb, U), _prm(nb + 1), BufferDecl.output("out_keys", nb + 2, key_t)]
    if kv:
        bufs.append(BufferDecl.output("out_values", nb + 3, value_t))
    return Program.wrapped([*bufs, BufferDecl.local("next", BUCKETS, U)], wg, body)


def _cidx(q: Expr) -> Expr:
    """Counter ``q = nibble * wg + lid`` in workgroup memory: one spare word after every 16,
    so that an invocation scanning 16 consecutive counters hits 16 different banks."""
    return q + (q >> 4)


def _counter(nibble: Expr | int, wg: int) -> Expr:
    """``_cidx(nibble * wg + lid)``; when ``wg`` is a multiple of 16, ``nibble * (wg + wg / 16)
    + lid_c`` (one multiply-add, or an address offset for a constant nibble)."""
    if wg % 16:
        return _cidx(Expr.u32(nibble) * wg + LID if isinstance(nibble, int) else nibble * wg + LID)
    return Expr.var("lid_c") + (nibble * (wg + wg // 16))


def tile_shape_bytes(wg: int, items: int, key_t: DataType, value_t: DataType | None) -> int:
    """Workgroup memory of `scatter_program`."""
    words = wg * items + (wg * items >> 5)
    return (words * (key_t.size + (value_t.size if value_t is not None else 0))
            + 4 * (17 * wg + 2 * wg + 3 * BUCKETS))


@functools.cache
def scatter_program(key_t: DataType, value_t: DataType | None, wg: int, items: int,
                    descending: bool = False) -> Program:
    """Workgroup ``w`` moves its ``PER`` tiles (``wg * items`` elements each, from tile
    ``w * PER``) in order: each tile sorted by the digit in workgroup memory (two stable 4-bit
    rounds), then each element to ``run[digit]`` + its place among the tile's elements of
    that digit, where ``run`` starts at ``offs[digit * GROUPS + w]`` and grows by each tile's
    count. An invocation's elements live in private arrays indexed by loop counters with
    literal bounds (a GPU compiler unrolls them into registers; CPU compilers get a small
    program)."""
    B = wg * items
    kv = value_t is not None
    # the tile holds order bits: all ones past the end (the last digit in every pass)
    fill = _ones(key_t, (1 << key_t.bits) - 1)
    v = Expr.var

    def digit(okey: Expr) -> Expr:
        return _digit(key_t, okey)

    def each(var: str, count: int, body: list[Node]) -> Node:
        return Node.loop(var, Expr.u32(0), Expr.u32(count), body)

    def mine(k: Expr) -> Expr:      # pad32(lid * items + k)
        return v("own_p") + k if 32 % items == 0 else pad32(LID * items + k)

    def counter(nib: Expr) -> Expr:  # _cidx(nib * wg + lid)
        return v("lid_c") + nib * (wg + wg // 16) if wg % 16 == 0 else _cidx(nib * wg + LID)

    def both(op: Any) -> list[Node]:
        """``op(tile, private)`` for the keys, and for the values when there are any."""
        return [op("tk", "ka")] + ([op("tv", "va")] if kv else [])

    j, k, q, i = v("j"), v("k"), v("q"), v("i")
    e = v("base") + j * wg + LID
    tile: list[Node] = [
        Node.let_bind("base", (WGID * PER + v("t")) * B),
        # coalesced loads (independent: in flight together), into the padded tile
        each("j", items, [Node.store("tk", pad32(j * wg + LID), Expr.select(e.lt(N), _order(key_t, Expr.load("keys", e), descending), fill)),
                          *([Node.store("tv", pad32(j * wg + LID), Expr.load("values", e))] if kv else [])]),
        Node.barrier(),
        each("k", items, both(lambda t, a: Node.store(a, k, Expr.load(t, mine(k))))),
    ]
    E = -(-BUCKETS // wg)                      # digit counts each invocation scans
    h = LID * E + v("e")
    for rnd in range(2):
        nib = (digit(Expr.load("ka", k)) >> (4 * rnd)) & (NIBBLES - 1)
        rank = [Node.let_bind("g", digit(Expr.load("ka", k))),
                Node.let_bind("c", counter((v("g") >> (4 * rnd)) & (NIBBLES - 1))),
                Node.let_bind("r", Expr.load("cnt", v("c"))),
                Node.store("rk", k, v("r")), Node.store("cnt", v("c"), v("r") + 1)]
        if rnd == 0:   # the tile's digit counts
            rank.append(Node.expr(Expr.atomic(AtomicOp.ADD, "hist", v("g"), Expr.u32(1))))
        tile += [each("q", NIBBLES, [Node.store("cnt", counter(q), Expr.u32(0))]),
                 # each element's rank among this invocation's earlier elements of its nibble
                 each("k", items, rank), Node.barrier(),
                 # exclusive scan of the counters in (nibble, invocation) order, 16 consecutive
                 # each (_cidx(16 * lid + i) = 17 * lid + i); the second round's scan carries
                 # the digit counts in the upper 16 bits (both sums stay below 2**16)
                 Node.let_bind(f"ts{rnd}", Expr.u32(0)),
                 each("i", NIBBLES, [Node.assign(f"ts{rnd}", v(f"ts{rnd}") + Expr.load("cnt", v("lid17") + i))])]
        packed = v(f"ts{rnd}")
        if rnd == 1:
            tile += [Node.let_bind("hsum", Expr.u32(0)),
                     each("e", E, [Node.if_(h.lt(BUCKETS), [Node.assign("hsum", v("hsum") + Expr.load("hist", h))])])]
            packed = packed | (v("hsum") << 16)
        scan, incl, _ = ping_pong_scan("hs", wg, U)
        tile += [Node.store("hs", LID, packed), *scan,
                 Node.let_bind(f"ex{rnd}", (incl & 0xFFFF) - v(f"ts{rnd}")),
                 each("i", NIBBLES, [Node.let_bind("ci", Expr.load("cnt", v("lid17") + i)),
                                     Node.store("cnt", v("lid17") + i, v(f"ex{rnd}")),
                                     Node.assign(f"ex{rnd}", v(f"ex{rnd}") + v("ci"))])]
        if rnd == 1:
            tile += [Node.let_bind("hx", (incl >> 16) - v("hsum")),
                     each("e", E, [Node.if_(h.lt(BUCKETS), [Node.let_bind("he", Expr.load("hist", h)),
                                                            Node.store("start", h, v("hx")),
                                                            Node.assign("hx", v("hx") + v("he"))])])]
        tile += [Node.barrier(),
                 # every element to its place in the tile (sorted by the nibble, stably)
                 each("k", items, [Node.let_bind("p", pad32(Expr.load("cnt", counter(nib)) + Expr.load("rk", k))),
                                   *both(lambda t, a: Node.store(t, v("p"), Expr.load(a, k)))]),
                 Node.barrier()]
        if rnd == 0:
            tile.append(each("k", items, both(lambda t, a: Node.store(a, k, Expr.load(t, mine(k))))))
    # the tile is sorted by the digit; digit d's run starts at start[d]
    p = j * wg + LID
    move = [Node.store("out_keys", v("pos"), _key(key_t, v("kk"), descending))]
    if kv:
        move.append(Node.store("out_values", v("pos"), Expr.load("tv", pad32(p))))
    tile += [each("j", items, [Node.let_bind("kk", Expr.load("tk", pad32(p))),
                               Node.let_bind("d", digit(v("kk"))),
                               Node.let_bind("pos", Expr.load("run", v("d")) + p - Expr.load("start", v("d"))),
                               Node.if_(v("pos").lt(N), move)]),
             Node.barrier()]
    d = LID + q * wg
    tile += [each("q", E, [Node.if_(d.lt(BUCKETS), [Node.store("run", d, Expr.load("run", d) + Expr.load("hist", d)),
                                                    Node.store("hist", d, Expr.u32(0))])]),
             Node.barrier()]
    body: list[Node] = [*lane_words(wg, items), Node.let_bind("lid_c", LID + (LID >> 4)),
                        Node.let_bind("lid17", LID * 17),
                        each("q", E, [Node.if_(d.lt(BUCKETS), [
                            Node.store("run", d, Expr.load("offs", d * GROUPS + WGID))])]),
                        Node.loop("t", Expr.u32(0), PER, tile)]
    words = B + (B >> 5)
    bufs = [BufferDecl.read("keys", 0, key_t)]
    if kv:
        bufs.append(BufferDecl.read("values", 1, value_t))
    nb = len(bufs)
    bufs += [BufferDecl.read("offs", nb, U), _prm(nb + 1), BufferDecl.output("out_keys", nb + 2, key_t)]
    if kv:
        bufs.append(BufferDecl.output("out_values", nb + 3, value_t))
    bufs += [BufferDecl.workgroup("tk", words, _held(key_t)), BufferDecl.local("ka", items, _held(key_t)),
             BufferDecl.local("rk", items, U)]
    if kv:
        bufs += [BufferDecl.workgroup("tv", words, value_t), BufferDecl.local("va", items, value_t)]
    bufs += [BufferDecl.workgroup("cnt", 17 * wg, U), BufferDecl.workgroup("hs", 2 * wg, U),
             BufferDecl.workgroup("run", BUCKETS, U), BufferDecl.workgroup("start", BUCKETS, U),
             BufferDecl.workgroup("hist", BUCKETS, U)]
    return Program.wrapped(bufs, wg, body)


def _shape(r: Runner, key_t: DataType, value_t: DataType | None) -> tuple[int, int]:
    """(workgroup size, elements per invocation) of a tile that fits workgroup memory: 16
    elements each (the per-tile scans cost the same for fewer), halving the workgroup down
    to 64 first."""
    wg, items = r.wg, 16
    while tile_shape_bytes(wg, items, key_t, value_t) > r.shared_bytes:
        if wg > 64:
            wg //= 2
        elif items > 1:
            items //= 2
        elif wg > 1:
            wg //= 2
        else:
            break
    return wg, items


def _serial_sort(r: Runner, keys: Any, values: Any, n: int, key_t: DataType, value_t: DataType | None,
                 keep_last: bool, descending: bool) -> tuple[Any, Any]:
    """`_sort` on serial backends: one run per invocation (at most `Runner.max_groups` runs
    unless the caller's workgroup is larger, at least 256 elements each)."""
    wg = r.serial_wg
    g = max(1, min(-(-n // (wg * 256)), -(-r.max_groups // wg)))
    T = g * wg
    C = -(-n // T)
    r.span(n, T * C, "vyre.lib.sort")
    passes = key_t.bits // RADIX_BITS
    for p in range(passes):
        prm = params(n, C, 0, T, p * RADIX_BITS, 0)
        counts = r.run(serial_count_program(key_t, wg, descending), [keys, prm], g, BUCKETS * T)[0]
        offs = _int_scan(r, counts, BUCKETS * T, U, False, True)
        ins = [keys] + ([values] if value_t is not None else []) + [offs, prm]
        last = p == passes - 1
        outs = r.run(serial_scatter_program(key_t, value_t, wg, descending), ins, g, n, keep=keep_last or not last)
        keys = outs[0]
        values = outs[1] if value_t is not None else None
    return keys, values


def _sort(r: Runner, keys: Any, values: Any, n: int, key_t: DataType, value_t: DataType | None,
          keep_last: bool, descending: bool = False) -> tuple[Any, Any]:
    if r.serial:
        return _serial_sort(r, keys, values, n, key_t, value_t, keep_last, descending)
    wg, items = _shape(r, key_t, value_t)
    B = wg * items
    tiles = -(-n // B)
    per = -(-tiles // min(tiles, _GROUPS.get(r.id, r.chunk_groups)))   # tiles per workgroup
    g = -(-tiles // per)
    C = per * B
    r.span(n, g * C, "vyre.lib.sort")
    unroll = COUNT_UNROLL if items % COUNT_UNROLL == 0 else 1
    passes = key_t.bits // RADIX_BITS
    for p in range(passes):
        prm = params(n, C, C // (wg * unroll), g, p * RADIX_BITS, per)
        counts = r.run(count_program(key_t, wg, unroll, descending), [keys, prm], g, BUCKETS * g)[0]
        offs = _int_scan(r, counts, BUCKETS * g, U, False, True)
        ins = [keys] + ([values] if value_t is not None else []) + [offs, prm]
        last = p == passes - 1
        outs = r.run(scatter_program(key_t, value_t, wg, items, descending), ins, g, n, keep=keep_last or not last)
        keys = outs[0]
        values = outs[1] if value_t is not None else None
    return keys, values


def _data(a: Arr) -> Any:
    return a.data


def sort_keys(r: Runner, k: Arr) -> tuple[Any, DataType]:
    """What the passes sort, and its type: the caller's keys, or for 16-bit floats their u32
    totalOrder keys (`vyre.lib.halfkeys`)."""
    if k.dtype in HALF_KEYS:
        return r.run(order_program(k.dtype, r.wg), [k.source(), params(k.n)], -(-k.n // r.wg), k.n)[0], U
    return k.data, k.dtype


def key_result(r: Runner, ks: Any, k: Arr, count: int) -> Any:
    """The first ``count`` sorted keys as the caller's kind and type (`sort_keys` undone)."""
    if k.dtype in HALF_KEYS:
        ks = r.run(bits_program(r.wg), [ks, params(count)], -(-count // r.wg), count, keep=k.on_device)[0]
    return result(ks, k, k.dtype, count)


def sort(keys: Any, values: Any = None, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The keys in ascending order (stable; f32 keys in IEEE totalOrder); with ``values``,
    ``(sorted_keys, values_in_that_order)``."""
    k = as_arr(keys, "keys")
    require(k, KEY_TYPES + HALF_KEYS, "vyre.lib.sort")
    v = None
    if values is not None:
        v = as_arr(values, "values")
        require(v, VALUE_TYPES, "vyre.lib.sort's values")
        if v.n != k.n:
            raise LibError("L002", f"vyre.lib.sort: {k.n} keys but {v.n} values.", "pass one value per key.")
    if k.n == 0:
        empty = to_kind(np.zeros(0, host_dtype(k.dtype)), k, k.dtype)
        return empty if v is None else (empty, to_kind(np.zeros(0, v.dtype.host), v, v.dtype))
    r = Runner(backend, workgroup_size)
    data, key_t = sort_keys(r, k)
    ks, vs = _sort(r, data, _data(v) if v is not None else None, k.n, key_t,
                   v.dtype if v is not None else None, k.on_device or key_t is not k.dtype)
    sk = key_result(r, ks, k, k.n)
    if v is None:
        return sk
    # the last pass kept its outputs on the device for the keys' sake (device keys, or 16-bit
    # float keys mapped back by one more pass): host values come back to the host
    return sk, result(vs if v.on_device else r.to_host(vs, v.dtype), v, v.dtype, k.n)


def argsort(keys: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The u32 indices that sort ``keys`` stably (f32 in IEEE totalOrder)."""
    k = as_arr(keys, "keys")
    require(k, KEY_TYPES + HALF_KEYS, "vyre.lib.argsort")
    if k.n >= 2**32:
        raise LibError("L002", "vyre.lib.argsort: more than 2**32-1 keys.", "sort fewer keys per call.")
    if k.n == 0:
        return to_kind(np.zeros(0, np.uint32), k, U)
    idx: Any = np.arange(k.n, dtype=np.uint32)
    if k.on_device and k.kind == "cupy":
        import cupy

        idx = cupy.arange(k.n, dtype=cupy.uint32)
    r = Runner(backend, workgroup_size)
    data, key_t = sort_keys(r, k)
    _, vs = _sort(r, data, idx, k.n, key_t, U, k.on_device)
    return result(vs, k, U, k.n)


__all__ = ["argsort", "count_program", "key_result", "scatter_program", "serial_count_program", "serial_scatter_program", "sort", "sort_keys"]
