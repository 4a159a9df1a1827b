"""Multi-pattern literal search over a byte buffer, written for speculative dispatch.

The haystack is cut into tiles of `TILE` consecutive start positions, one tile per invocation.

* **Prefilter** (cheap, necessary): each window of 4 bytes is hashed (`window_hash`) and
  looked up in a bitmap of `TABLE_BITS` bits held in workgroup memory, with one bit set per
  pattern prefix. A tile passes when any of its windows hits.
* **Confirmer** (expensive, exact): every start position of the tile is checked against every
  pattern: the pattern's first 4 bytes (a word per pattern, also in workgroup memory), then
  the rest byte by byte. It does not consult the prefilter's table.

Written twice, as vyre Programs built here:

* `fused_program` (speculative): every tile runs the prefilter *and* the confirmer; a tile's
  records are committed only when its prefilter passed (a real match always passes, so the
  gate never changes the answer) and the two counters (tiles committed, tiles rolled back)
  are added to the tail of the output.
* `prefilter_program` + `confirm_program` (two-stage): the prefilter writes one bit per tile;
  the host compacts the passing tiles into a candidate list; the confirmer runs on those
  tiles only.

Records never land in atomic-return order: each workgroup scans its invocations' match counts
in workgroup memory and writes its records at the scanned offsets into its own region of
`capacity` slots, so the output is ordered by (workgroup, invocation, position, pattern) —
the order of (position, pattern index). Output layout, u32 words: ``counts[nwg]`` (records
per workgroup), ``records[nwg][capacity][2]`` (position, pattern index), then, in the fused
program only, the counter tail ``[committed, rolled_back]``. A workgroup with more matches
than ``capacity`` still reports its exact count; `LiteralSearch.search` then dispatches
`spill_program` on those workgroups' tiles alone, writing their records back to back at
offsets from the counts, so nothing is ever dropped and the memory follows the matches.

`LiteralSearch.search` routes each call through `vyre.driver.dispatch_prefilter_confirm`, and
`expected_matches` is the independent answer: a Python ``bytes.find`` loop.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver import (
    AdaptiveSpeculator,
    DispatchConfig,
    InvalidInput,
    LimitExceeded,
    SpeculationReport,
    SpeculativeDispatchPlan,
    dispatch_prefilter_confirm,
)
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Function, Node, Program

U = DataType.U32
v = Expr.var

WG = 128                      # invocations per workgroup
TILE = 16                     # start positions per invocation (one tile)
TABLE_BITS = 13               # prefilter bitmap: 8192 bits = 256 words of workgroup memory
TABLE_WORDS = 1 << (TABLE_BITS - 5)
HASH_MUL = 0x9E3779B1         # Fibonacci hashing of the 4-byte window
MIN_PATTERN_LEN = 4           # the prefilter window
MAX_PATTERN_LEN = 256
MAX_PATTERNS = 256
DEFAULT_CAPACITY = 32         # record slots per workgroup before a re-dispatch
_FIELD = 24                   # scan word: match count in bits 0..23 (a workgroup finds at most
                              # WG*TILE*MAX_PATTERNS = 2^19), committed tiles (<= WG) above

# ``hay`` and ``pat`` hold bytes packed little-endian into u32 words (every backend binds u32
# storage; wgpu has no 8-bit storage). ``meta`` (u32 words): the prefilter bitmap, then per
# pattern its first word, length and offset into ``pat``, then the pattern count and the
# haystack's length in bytes.
M_FIRST = TABLE_WORDS
M_LENS = M_FIRST + MAX_PATTERNS
M_OFFS = M_LENS + MAX_PATTERNS
M_NPAT = M_OFFS + MAX_PATTERNS
M_N = M_NPAT + 1              # the haystack's length in bytes
META_WORDS = M_N + 1


def window_hash(words: Any) -> Any:
    """Bitmap index of little-endian 4-byte windows (ints or a u32 numpy array)."""
    if isinstance(words, np.ndarray):
        return ((words.astype(np.uint64) * HASH_MUL) & 0xFFFFFFFF) >> (32 - TABLE_BITS)
    return ((int(words) * HASH_MUL) & 0xFFFFFFFF) >> (32 - TABLE_BITS)


# ------------------------------------------------------------------------------- the programs
def _byte(buffer: str, i: Expr) -> Expr:
    """Byte ``i`` of a buffer of packed little-endian words."""
    return (Expr.load(buffer, i >> 2) >> ((i & 3) << 3)) & 0xFF


def _n() -> Expr:
    return Expr.load("meta", Expr.u32(M_N))


def _functions() -> list[Function]:
    """``full_match(p, j)``: 1 when pattern ``j`` occurs at ``p`` (its first word already
    compared equal), else 0."""
    p, j = v("p"), v("j")
    return [Function.define("full_match", [("p", U), ("j", U)], [
        Node.let_bind("len", Expr.load("meta", j + M_LENS)),
        Node.let_bind("off", Expr.load("meta", j + M_OFFS)),
        Node.let_bind("ok", Expr.select((_n() - p).ge(v("len")), Expr.u32(1), Expr.u32(0))),
        Node.let_bind("k", Expr.u32(MIN_PATTERN_LEN)),
        Node.while_(v("ok").ne(0).and_(v("k").lt(v("len"))), [
            Node.if_(_byte("hay", p + v("k")).ne(_byte("pat", v("off") + v("k"))),
                     [Node.assign("ok", Expr.u32(0))]),
            Node.assign("k", v("k") + 1),
        ], max_iterations=MAX_PATTERN_LEN),
    ], result=v("ok"))]


def _positions(base: Expr, body: Any, sfx: str = "") -> list[Node]:
    """Loop over the tile's start positions ``p`` with the window ``w`` = bytes p..p+3
    (little-endian, slid one byte per step); ``body(p, w)`` runs where a full window fits.
    ``sfx`` keeps the variable names of a second loop apart from the first's."""
    n, p, w = _n(), v("p" + sfx), v("w" + sfx)
    hay = functools.partial(_byte, "hay")
    return [Node.block([   # a scope of its own: nothing in it outlives the loop (or meets a barrier)
        Node.let_bind(w.name, (hay(base) << 8) | (hay(base + 1) << 16) | (hay(base + 2) << 24)),
        Node.loop("q" + sfx, Expr.u32(0), Expr.u32(TILE), [
            Node.let_bind(p.name, base + v("q" + sfx)),
            Node.assign(w.name, (w >> 8) | (hay(p + 3) << 24)),
            Node.if_(v("valid").ne(0).and_(p.lt(n)).and_((n - p).ge(MIN_PATTERN_LEN)), body(p, w)),
        ]),
    ])]


def _confirm(p: Expr, w: Expr, on_match: Any, sfx: str = "") -> Node:
    """For every pattern ``j`` whose first word equals ``w`` and that matches in full at ``p``:
    ``on_match(j)``."""
    j = v("j" + sfx)
    return Node.loop(j.name, Expr.u32(0), Expr.load("meta", Expr.u32(M_NPAT)), [
        Node.if_(Expr.load("s_first", j).eq(w), [
            Node.if_(Expr.call("full_match", p, j).ne(0), on_match(p, j)),
        ]),
    ])


def _prefilter_hit(w: Expr) -> Node:
    h = v("h")
    return Node.block([
        Node.let_bind("h", (w * HASH_MUL) >> (32 - TABLE_BITS)),
        Node.assign("pass", v("pass") | ((Expr.load("s_table", h >> 5) >> (h & 31)) & 1)),
    ])


def _scan(value: Expr) -> list[Node]:
    """Inclusive Hillis-Steele scan of ``value`` over the workgroup into ``s_scan``."""
    lid = Expr.lid_x()
    body = [Node.store("s_scan", lid, value), Node.barrier()]
    off = 1
    while off < WG:
        body += [Node.let_bind(f"t{off}", Expr.select(lid.ge(off), Expr.load("s_scan", lid - off), Expr.u32(0))),
                 Node.barrier(),
                 Node.store("s_scan", lid, Expr.load("s_scan", lid) + v(f"t{off}")),
                 Node.barrier()]
        off *= 2
    return body


def _opaque(name: str) -> list[Node]:
    """``name`` passed through workgroup memory (``s_scan``, free until the scan): the speculative
    confirmer then cannot be specialised on the prefilter's verdict. PoCL's compiler otherwise
    makes the fused kernel twice as slow as the confirmer alone (measured: 80 vs 37 ms device
    time on 1 MiB; with this, 44)."""
    lid = Expr.lid_x()
    return [Node.store("s_scan", lid, v(name)), Node.barrier(),
            Node.assign(name, Expr.load("s_scan", lid)), Node.barrier()]


def _ntiles() -> Expr:
    n = _n()
    return n // TILE + Expr.select((n % TILE).ne(0), Expr.u32(1), Expr.u32(0))


def _buffers(kind: str, out_count: int) -> list[BufferDecl]:
    bufs = [BufferDecl.read("hay", 0, U), BufferDecl.read("pat", 1, U),
            BufferDecl.read("meta", 2, U, META_WORDS)]
    if kind in ("confirm", "spill"):
        bufs.append(BufferDecl.read("cand", 3, U))
    if kind == "spill":
        bufs.append(BufferDecl.read("bases", 4, U))
    bufs.append(BufferDecl.output("out", len(bufs), U, out_count))
    bufs.append(BufferDecl.workgroup("s_table", TABLE_WORDS, U))
    if kind != "prefilter":
        bufs += [BufferDecl.workgroup("s_first", MAX_PATTERNS, U), BufferDecl.workgroup("s_scan", WG, U)]
    return bufs


def _load_shared(kind: str) -> list[Node]:
    lid = Expr.lid_x()
    body = [Node.loop("k", Expr.u32(0), Expr.u32(TABLE_WORDS // WG), [
        Node.store("s_table", lid + v("k") * WG, Expr.load("meta", lid + v("k") * WG))])]
    if kind != "prefilter":
        body.append(Node.loop("k", Expr.u32(0), Expr.u32(MAX_PATTERNS // WG), [
            Node.store("s_first", lid + v("k") * WG, Expr.load("meta", lid + v("k") * WG + M_FIRST))]))
    return body + [Node.barrier()]


def _search(kind: str, capacity: int, tail_words: int) -> list[Node]:
    """The fused (``kind == "fused"``) or the confirm-only body (``"confirm"``; ``"spill"``
    writes at the workgroup's ``bases`` entry instead of into ``capacity`` slots): count, scan,
    write."""
    lid, wg = Expr.lid_x(), Expr.wgid_x()
    tile = v("tile")
    if kind != "fused":
        g = Expr.gid_x()
        head = [Node.let_bind("tile", Expr.load("cand", g)),
                Node.let_bind("valid", Expr.select(g.lt(Expr.buf_len("cand")).and_(tile.lt(_ntiles())),
                                                   Expr.u32(1), Expr.u32(0))),
                Node.let_bind("pass", v("valid"))]
        prefilter = False
    else:
        head = [Node.let_bind("tile", Expr.gid_x()),
                Node.let_bind("valid", Expr.select(tile.lt(_ntiles()), Expr.u32(1), Expr.u32(0))),
                Node.let_bind("pass", Expr.u32(0))]
        prefilter = True
    base = tile * TILE

    def count(p: Expr, w: Expr) -> list[Node]:
        return [_confirm(p, w, lambda p, j: [Node.assign("cnt", v("cnt") + 1)])]

    if kind == "spill":
        record = Expr.load("bases", wg) + v("slot")
        room, slot_at = record.lt(Expr.buf_len("out") >> 1), record * 2
    else:
        nwg = (Expr.buf_len("out") - tail_words) // (1 + 2 * capacity)
        room, slot_at = v("slot").lt(capacity), nwg + (wg * capacity + v("slot")) * 2

    def write(p: Expr, j: Expr) -> list[Node]:
        return [Node.if_(room, [Node.store("out", slot_at, p), Node.store("out", slot_at + 1, j)]),
                Node.assign("slot", v("slot") + 1)]

    body = [
        *head,
        Node.let_bind("cnt", Expr.u32(0)),
        *(_positions(base, lambda p, w: [_prefilter_hit(w)], "0") + _opaque("pass") if prefilter else []),
        *_positions(base, count),
        # the commit gate: a tile whose prefilter failed keeps nothing (and, the prefilter
        # being necessary, never had anything to keep)
        Node.assign("cnt", Expr.select(v("pass").ne(0), v("cnt"), Expr.u32(0))),
        Node.let_bind("mine", v("cnt") + ((v("pass") & v("valid")) << _FIELD)),
        *_scan(v("mine")),
        Node.let_bind("total", Expr.load("s_scan", Expr.u32(WG - 1))),
        Node.if_(v("cnt").ne(0), [
            Node.let_bind("slot", (Expr.load("s_scan", lid) - v("mine")) & ((1 << _FIELD) - 1)),
            *_positions(base, lambda p, w: [_confirm(p, w, write, "2")], "2"),
        ]),
    ]
    if kind != "spill":
        body.append(Node.if_(lid.eq(0), [Node.store("out", wg, v("total") & ((1 << _FIELD) - 1))]))
    if kind == "fused":
        ntiles = _ntiles()
        first_tile = wg * WG
        in_wg = Expr.select(first_tile.lt(ntiles), (ntiles - first_tile).min(WG), Expr.u32(0))
        tail = Expr.buf_len("out") - 2
        body.append(Node.if_(lid.eq(0), [
            Node.let_bind("committed", v("total") >> _FIELD),
            Node.expr(Expr.atomic(AtomicOp.ADD, "out", tail, v("committed"))),
            Node.expr(Expr.atomic(AtomicOp.ADD, "out", tail + 1, in_wg - v("committed"))),
        ]))
    return body


def _nwg(nbytes: int) -> int:
    tiles = -(-nbytes // TILE)
    return -(-tiles // WG)


@functools.lru_cache(maxsize=64)
def fused_program(nbytes: int, capacity: int = DEFAULT_CAPACITY) -> Program:
    """The speculative program for a haystack of ``nbytes`` bytes: prefilter and confirmer in
    every invocation, records commit-gated, counters in the last two words of ``out``."""
    nwg = _nwg(nbytes)
    body = _load_shared("fused") + _search("fused", capacity, 2)
    return Program.wrapped(_buffers("fused", nwg * (1 + 2 * capacity) + 2), WG, body, _functions())


@functools.lru_cache(maxsize=64)
def prefilter_program(nbytes: int) -> Program:
    """Stage one: ``out`` bit t (little-endian words) is set when tile t's prefilter passed."""
    nwg = _nwg(nbytes)
    tile = Expr.gid_x()
    body = [*_load_shared("prefilter"),
            Node.let_bind("tile", tile),
            Node.let_bind("valid", Expr.select(tile.lt(_ntiles()), Expr.u32(1), Expr.u32(0))),
            Node.let_bind("pass", Expr.u32(0)),
            *_positions(tile * TILE, lambda p, w: [_prefilter_hit(w)]),
            Node.if_(v("pass").ne(0), [
                Node.expr(Expr.atomic(AtomicOp.OR, "out", tile >> 5, Expr.u32(1) << (tile & 31)))])]
    return Program.wrapped(_buffers("prefilter", nwg * WG // 32), WG, body)


@functools.lru_cache(maxsize=64)
def confirm_program(capacity: int = DEFAULT_CAPACITY) -> Program:
    """Stage two: the confirmer on the candidate tiles ``cand`` (ascending), one per
    invocation; ``out`` sized by ``dispatch_elements`` (`confirm_config`)."""
    body = _load_shared("confirm") + _search("confirm", capacity, 0)
    return Program.wrapped(_buffers("confirm", 0), WG, body, _functions())


@functools.lru_cache(maxsize=1)
def spill_program() -> Program:
    """The confirmer for workgroups that overflowed their slots: invocation k of workgroup w
    confirms tile ``cand[w*WG + k]`` and the workgroup writes its records, in order, from
    record ``bases[w]`` on; ``out`` holds exactly the records (``dispatch_elements``)."""
    body = _load_shared("spill") + _search("spill", 1, 0)
    return Program.wrapped(_buffers("spill", 0), WG, body, _functions())


def search_config(nbytes: int, config: DispatchConfig | None = None) -> DispatchConfig:
    """The config of the fused and the prefilter program (one workgroup per `WG` tiles),
    keeping ``config``'s other fields (timeout, label, speculation, ...)."""
    return (config or DispatchConfig()).with_(grid_override=(_nwg(nbytes), 1, 1), dispatch_grid=None,
                                              dispatch_elements=None)


def confirm_config(candidates: int, capacity: int, config: DispatchConfig | None = None) -> DispatchConfig:
    nwg = -(-candidates // WG)
    return (config or DispatchConfig()).with_(grid_override=(nwg, 1, 1), dispatch_grid=None,
                                              dispatch_elements=nwg * (1 + 2 * capacity))


# --------------------------------------------------------------------------------- host side
@dataclass(frozen=True)
class Patterns:
    """The device form of a pattern list: the bytes back to back (``pat``) and ``meta``."""

    patterns: tuple[bytes, ...]
    pat: np.ndarray
    meta: np.ndarray

    @staticmethod
    def of(patterns: Sequence[bytes]) -> Patterns:
        if isinstance(patterns, bytes | bytearray | str):
            raise InvalidInput("input_count", f"patterns is one {type(patterns).__name__} value, not a "
                               "list of patterns.", "pass a list: [pattern] for a single pattern.")
        items = tuple(patterns)
        if not items or len(items) > MAX_PATTERNS:
            raise InvalidInput("input_count", f"{len(items)} patterns given; "
                               f"literal search takes 1..{MAX_PATTERNS}.",
                               f"pass a list of 1 to {MAX_PATTERNS} bytes patterns (split larger sets "
                               "into several searches).")
        for i, x in enumerate(items):
            if not isinstance(x, bytes | bytearray | memoryview):
                raise InvalidInput("input_type", f"pattern {i} is a {type(x).__name__}, not bytes.",
                                   "pass each pattern as bytes (s.encode() for a str).")
            if not MIN_PATTERN_LEN <= len(x) <= MAX_PATTERN_LEN:
                raise InvalidInput("input_size", f"pattern {i} has {len(x)} bytes; literal search "
                                   f"takes {MIN_PATTERN_LEN}..{MAX_PATTERN_LEN}.",
                                   f"search patterns shorter than {MIN_PATTERN_LEN} bytes with "
                                   "bytes.find, and split longer ones.")
        items = tuple(bytes(x) for x in items)
        lens = np.array([len(x) for x in items], np.uint32)
        offs = np.zeros(len(items), np.uint32)
        offs[1:] = np.cumsum(lens[:-1])
        first = np.array([int.from_bytes(x[:4], "little") for x in items], np.uint32)
        table = np.zeros(TABLE_WORDS, np.uint32)
        for h in window_hash(first).tolist():
            table[h >> 5] |= np.uint32(1 << (h & 31))
        meta = np.zeros(META_WORDS, np.uint32)
        meta[:TABLE_WORDS] = table
        for at, values in ((M_FIRST, first), (M_LENS, lens), (M_OFFS, offs)):
            meta[at:at + len(items)] = values
        meta[M_NPAT] = len(items)
        return Patterns(items, pack_bytes(b"".join(items)), meta)

    def inputs(self, words: Any, nbytes: int) -> list[Any]:
        """The inputs of the fused and the prefilter program (and, plus ``cand``, of the
        confirmer): the haystack's packed words, the pattern words, meta (with ``nbytes``)."""
        meta = self.meta.copy()
        meta[M_N] = nbytes
        return [words, self.pat, meta]


def pack_bytes(data: Any) -> np.ndarray:
    """``data`` (bytes-like or a u8 array) as little-endian u32 words, zero-padded to a whole
    word (no copy when it already is whole words)."""
    raw = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
    if raw.size % 4:
        raw = np.concatenate([raw, np.zeros(4 - raw.size % 4, np.uint8)])
    return raw.view("<u4")


def _haystack(haystack: Any, nbytes: int | None) -> tuple[Any, int]:
    """The haystack's packed words and its length in bytes: bytes-like values and u8 arrays
    are packed here; a u32 array (host or device) is taken as packed words holding ``nbytes``
    bytes (default: all of them)."""
    if isinstance(haystack, bytes | bytearray | memoryview) or \
            (isinstance(haystack, np.ndarray) and haystack.dtype == np.uint8):
        size = len(memoryview(haystack).cast("B")) if not isinstance(haystack, np.ndarray) else haystack.size
        if nbytes is not None and nbytes != size:
            raise InvalidInput("input_size", f"nbytes={nbytes} but the haystack has {size} bytes.",
                               "leave nbytes out for a bytes haystack.")
        return pack_bytes(haystack), size
    have = int(getattr(haystack, "nbytes", -1))
    if have < 0 or have % 4:
        raise InvalidInput("input_type", f"the haystack is a {type(haystack).__name__}, not bytes, a "
                           "u8 array or a u32 word array.", "pass bytes, np.uint8 data, or packed "
                           "little-endian u32 words (with nbytes=).")
    if nbytes is None:
        nbytes = have
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 <= nbytes <= have:
        raise InvalidInput("input_size", f"nbytes={nbytes!r} for a haystack of {have} bytes of words.",
                           f"pass nbytes in 0..{have} (the bytes the words hold).")
    return haystack, nbytes


def passing_tiles(bitmask: bytes, ntiles: int) -> np.ndarray:
    """The compaction between the two stages: indices of the set bits (ascending, u32) of the
    prefilter's little-endian bitmask. Only the non-zero words are expanded, so the cost
    follows the number of candidates rather than the haystack's length."""
    words = np.frombuffer(bitmask, "<u4")
    nonzero = np.flatnonzero(words).astype(np.uint32)
    lanes = np.arange(32, dtype=np.uint32)
    hit = ((words[nonzero][:, None] >> lanes) & 1).astype(bool)
    tiles = (nonzero[:, None] * np.uint32(32) + lanes)[hit]
    return tiles[tiles < ntiles]


def _regions(out: bytes, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-workgroup counts and the ``[nwg, capacity, 2]`` record slots of a tail-less
    output."""
    words = np.frombuffer(out, "<u4")
    nwg = words.size // (1 + 2 * capacity)
    if words.size != nwg * (1 + 2 * capacity):
        raise InvalidInput("input_size", f"a literal-search output of {words.size} words does not "
                           f"fit capacity {capacity}.", "decode with the capacity the program was "
                           "built with.")
    return words[:nwg], words[nwg:].reshape(nwg, capacity, 2)


def decode(out: bytes, capacity: int, spilled: np.ndarray | None = None) -> np.ndarray:
    """The (position, pattern) records of a tail-less output, in order. The records of the
    workgroups that found more than ``capacity`` come from ``spilled`` (theirs back to back,
    in workgroup order: `spill_program`'s output)."""
    counts, slots = _regions(out, capacity)
    kept = slots[np.arange(capacity) < np.minimum(counts, capacity)[:, None]]
    over = counts > capacity
    if not over.any():
        return kept.astype(np.uint32).reshape(-1, 2)
    owner = np.repeat(np.arange(counts.size), counts.astype(np.int64))
    spilled_rows = over[owner]
    records = np.empty((owner.size, 2), np.uint32)
    records[~spilled_rows] = kept[~over[np.repeat(np.arange(counts.size), np.minimum(counts, capacity))]]
    records[spilled_rows] = np.asarray(spilled, np.uint32).reshape(-1, 2)
    return records


@dataclass(frozen=True)
class SearchResult:
    """``matches``: (position, pattern index) rows, u32, ordered by position then pattern;
    ``report``: the fused dispatch's counters (None on the two-stage path); ``dispatches``: 1,
    or 2 when workgroups that overflowed their slots were dispatched again (`spill_program`)."""

    matches: np.ndarray
    report: SpeculationReport | None
    used_speculative_path: bool
    dispatches: int


class LiteralSearch:
    """Finds every occurrence of every pattern (overlapping ones too), routed through
    `dispatch_prefilter_confirm` with its own `AdaptiveSpeculator`."""

    def __init__(self, patterns: Sequence[bytes], speculator: AdaptiveSpeculator | None = None,
                 capacity: int = DEFAULT_CAPACITY) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or not 1 <= capacity <= 1 << 16:
            raise InvalidInput("input_size", f"capacity={capacity!r} record slots per workgroup.",
                               f"pass capacity as an int in 1..{1 << 16} (default {DEFAULT_CAPACITY}).")
        self.patterns = Patterns.of(patterns)
        # None: made at the first search, with that backend's threshold (`for_backend`)
        self.speculator = speculator
        self.capacity = capacity

    def plan(self, nbytes: int) -> SpeculativeDispatchPlan:
        """The fused/prefilter pair for a haystack of ``nbytes`` bytes."""
        return SpeculativeDispatchPlan(fused_program(nbytes, self.capacity), prefilter_program(nbytes), 0, True)

    def search(self, backend: Any, haystack: Any, config: DispatchConfig | None = None,
               nbytes: int | None = None) -> SearchResult:
        """All matches in ``haystack``: bytes, a u8 array, or packed little-endian u32 words
        (host, or a device array on backends that read them) holding ``nbytes`` bytes."""
        if self.speculator is None:
            self.speculator = AdaptiveSpeculator.for_backend(backend)
        hay, nbytes = _haystack(haystack, nbytes)
        if nbytes < MIN_PATTERN_LEN:
            return SearchResult(np.zeros((0, 2), np.uint32), None, False, 0)
        inputs = self.patterns.inputs(hay, nbytes)
        cap, ntiles = self.capacity, -(-nbytes // TILE)
        confirmed: list[np.ndarray] = []

        def confirm(prefiltered: list[bytes]) -> list[bytes]:
            cand = passing_tiles(prefiltered[0], ntiles)
            confirmed.append(cand)
            if cand.size == 0:
                return [b""]
            return backend.dispatch_borrowed(confirm_program(cap), [*inputs, cand],
                                             confirm_config(cand.size, cap, config))

        outcome = dispatch_prefilter_confirm(backend, self.speculator, self.plan(nbytes), inputs,
                                             search_config(nbytes, config), confirm)
        out = outcome.outputs[0]
        counts, _ = _regions(out, cap)
        over = np.flatnonzero(counts > cap)
        spilled = None
        if over.size:   # those workgroups again, each with exactly the room it needs
            if outcome.used_speculative_path:
                tiles = over[:, None].astype(np.uint32) * WG + np.arange(WG, dtype=np.uint32)
            else:
                cand = confirmed[0]
                padded = np.full(-(-cand.size // WG) * WG, 0xFFFFFFFF, np.uint32)
                padded[:cand.size] = cand
                tiles = padded.reshape(-1, WG)[over]
            sizes = counts[over].astype(np.int64)
            total = int(sizes.sum())
            if total >= 1 << 31:
                raise LimitExceeded("output_bytes", f"the search found {total} matches: more than one "
                                    "dispatch returns.", "search fewer or longer patterns, or the "
                                    "haystack in parts.")
            bases = (np.cumsum(sizes) - sizes).astype(np.uint32)
            cfg = (config or DispatchConfig()).with_(grid_override=(over.size, 1, 1), dispatch_grid=None,
                                                     dispatch_elements=2 * total)
            spilled = np.frombuffer(backend.dispatch_borrowed(
                spill_program(), [*inputs, tiles.ravel(), bases], cfg)[0], "<u4")
        return SearchResult(decode(out, cap, spilled), outcome.report, outcome.used_speculative_path,
                            1 + bool(over.size))


def expected_matches(haystack: bytes, patterns: Sequence[bytes]) -> np.ndarray:
    """The answer by a Python ``bytes.find`` loop: every (position, pattern index), overlapping
    occurrences included, ordered by position then pattern index."""
    found = []
    for j, pattern in enumerate(patterns):
        at = haystack.find(pattern)
        while at != -1:
            found.append((at, j))
            at = haystack.find(pattern, at + 1)
    found.sort()
    return np.array(found, np.uint32).reshape(-1, 2)
