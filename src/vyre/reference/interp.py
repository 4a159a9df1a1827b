"""The reference interpreter: executes a Program as numpy vectors over invocations.

Execution model (docs/semantics.md, "scheduling"): workgroups run in order; inside a
workgroup every statement runs for all live invocations in lane order before the next
statement starts (lockstep), so barriers need no action and a racy plain store is won by the
highest lane. For speed, several workgroups run together as one lockstep batch. Batching is
exact whenever no workgroup touches global memory that another workgroup of the batch writes;
the interpreter records the global addresses each workgroup reads and writes, and when two
workgroups of a batch do collide it restores the snapshot taken before the batch and replays
those workgroups one at a time. Top-level grid_sync barriers split the program into phases
that each cover the whole grid.

Divergence is handled by index sets: a statement runs over the sorted array of active lanes;
`if` partitions it, `loop` shrinks it as lanes finish, `return_` removes lanes for good.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.errors import DISPATCH_ERRORS, ExecutionError, dispatch_error
from vyre.ir.kinds import UnknownKind
from vyre.ir.launch import Launch
from vyre.ir.program import Program
from vyre.ir.typecheck import bin_result, un_result
from vyre.ir.types import AtomicOp, Builtin, DataType, MemoryOrdering, SubgroupOp

from . import semantics as S

MAX_INDIRECT_AXIS = 2**31 - 1
MAX_LOOP_TRIPS = 1 << 20        # trips of one loop, per entry, for any lane
MAX_BATCH_LANES = 1 << 20       # invocations executed together in one lockstep batch
MAX_BATCH_WG_WORDS = 1 << 24    # workgroup-memory words of one batch (64 MiB): batches shrink
MAX_WORKGROUP_WORDS = 1 << 24   # workgroup memory of one workgroup the interpreter accepts
MAX_BATCH_LOCAL_BYTES = 1 << 28  # local-array memory of one batch: batches shrink
U32 = np.uint32


@dataclass
class _Access:
    """Global addresses touched by a batch, per buffer, with the touching workgroup."""

    reads: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    writes: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    commutes: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)


class Machine:
    """Executes one Program over a resolved launch, mutating ``memory`` (one array per bound
    buffer, of the buffer's `DataType.storage` dtype, ``launch`` counts long)."""

    def __init__(self, program: Program, launch: Launch, memory: dict[str, np.ndarray],
                 should_stop: Callable[[], bool] | None = None, subgroup_size: int = 32) -> None:
        self.p = program
        self.should_stop = should_stop
        self.subgroup_size = subgroup_size
        self.launch = launch
        self.memory = memory
        self.counts = dict(launch.counts)
        self.wg = program.workgroup_size
        self.inv = program.invocations_per_workgroup
        self.types: dict[str, DataType] = {}
        self.grid = launch.grid
        self.errors: set[str] = set()   # dispatch errors seen (raised when the run ends)
        self.functions = {f.name: f for f in program.functions}
        self.brk = self.cont = np.zeros(0, dtype=bool)   # the innermost loop's break/continue lanes
        self.jumps = 0
        written = _written_buffers(program)
        # float-atomic buffers (S36) are only written when the dispatch ends (`finalise`)
        floats = program.facts.float_atomic_buffers
        self.tracked = {name for name in written if self.p.buffer(name).is_bound and name not in floats}
        self.deferred: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {b: [] for b in floats}
        self.deferred_op: dict[str, AtomicOp] = {}

    # ------------------------------------------------------------------ phases, batches
    def run(self) -> None:
        phases: list[list[N.Node]] = [[]]
        for n in self.p.body:
            if isinstance(n, N.Barrier) and n.ordering is MemoryOrdering.GRID_SYNC:
                phases.append([])
            else:
                phases[-1].append(n)
        if self.inv == 0:
            return
        facts = self.p.facts
        wg_words = -(-facts.workgroup_bytes // 4)
        local_bytes = facts.local_bytes
        per_batch = max(1, min(MAX_BATCH_LANES // self.inv, MAX_BATCH_WG_WORDS // max(1, wg_words),
                               MAX_BATCH_LOCAL_BYTES // max(1, local_bytes * self.inv)))
        for phase in phases:
            self.grid = self.launch.grid
            if phase and isinstance(phase[0], N.IndirectDispatch):
                self.grid = self.indirect_grid(phase[0])
                phase = phase[1:]
            gx, gy, gz = self.grid
            total = gx * gy * gz
            body = tuple(phase)
            sequential = False
            start = 0
            while start < total:
                stop = min(total, start + (1 if sequential else per_batch))
                if stop - start == 1 or not self.tracked:
                    self._batch(body, start, stop, None)
                else:
                    snapshot = {b: self.memory[b].copy() for b in self.tracked}
                    marks = {b: len(parts) for b, parts in self.deferred.items()}
                    access = _Access()
                    self._batch(body, start, stop, access)
                    if _collides(access, self.counts):
                        self.memory.update(snapshot)
                        for b, mark in marks.items():   # the replay contributes them again
                            del self.deferred[b][mark:]
                        sequential = True
                        for w in range(start, stop):
                            self._batch(body, w, w + 1, None)
                start = stop
        self.finalise()
        for reason in DISPATCH_ERRORS:   # the first in reporting order, as on every device
            if reason in self.errors:
                raise dispatch_error(reason)

    def finalise(self) -> None:
        """S36: when the dispatch ends, each float-atomic buffer's contributed elements
        become their exact accumulation (`semantics.float_accumulate`)."""
        for name, parts in self.deferred.items():
            if not parts:
                continue
            slots = np.concatenate([a for a, _ in parts])
            values = np.concatenate([v for _, v in parts])
            t = self.p.buffer(name).dtype
            self.memory[name][...] = S.float_accumulate(self.deferred_op[name], t, self.memory[name], slots, values)

    def indirect_grid(self, n: N.IndirectDispatch) -> tuple[int, int, int]:
        """The grid an indirect_dispatch reads, when its phase starts."""
        words = self.memory[n.buffer]
        if n.offset + 3 > words.size:
            raise ExecutionError("indirect", f"indirect_dispatch reads words {n.offset}..{n.offset + 2} "
                                 f"of {n.buffer!r}, which has {words.size}.",
                                 "size the buffer to hold the three grid words.")
        grid = tuple(int(v) for v in words[n.offset:n.offset + 3])
        if any(g > MAX_INDIRECT_AXIS for g in grid) or \
                any(g * w > 0xFFFFFFFF for g, w in zip(grid, self.wg)):
            raise ExecutionError("indirect", f"indirect_dispatch grid {grid} is over 2**31-1 "
                                 "workgroups or 2**32-1 invocations on an axis.",
                                 "write a grid the device can launch (split the work otherwise).")
        return grid  # type: ignore[return-value]

    def _batch(self, body: tuple[N.Node, ...], w0: int, w1: int, access: _Access | None) -> None:
        nwg = w1 - w0
        lanes = nwg * self.inv
        self.L = lanes
        self.w0 = w0
        self.access = access
        self.vars: dict[str, np.ndarray] = {}
        self.alive = np.ones(lanes, dtype=bool)
        self.returned = 0
        self.scope_types: dict[str, DataType] = {}
        self._ids: dict[tuple[Builtin, int], np.ndarray] = {}
        self.wgmem = {b.name: np.zeros(nwg * b.count, dtype=b.dtype.storage)
                      for b in self.p.workgroup_buffers}
        self.locmem = {b.name: np.zeros(lanes * b.count, dtype=b.dtype.storage)
                       for b in self.p.local_buffers}
        self.brk = self.cont = np.zeros(lanes, dtype=bool)
        self.block(body, None)

    def ident(self, kind: Builtin, axis: int) -> np.ndarray:
        key = (kind, axis)
        arr = self._ids.get(key)
        if arr is None:
            lane = np.arange(self.L, dtype=np.int64)
            if kind is Builtin.WGID or kind is Builtin.GID:
                wlin = self.w0 + lane // self.inv
                gx, gy, _ = self.grid
                wg_axis = (wlin % gx, (wlin // gx) % gy, wlin // (gx * gy))[axis]
            if kind is Builtin.LID or kind is Builtin.GID:
                llin = lane % self.inv
                wx, wy, _ = self.wg
                lid_axis = (llin % wx, (llin // wx) % wy, llin // (wx * wy))[axis]
            if kind is Builtin.WGID:
                arr = wg_axis
            elif kind is Builtin.LID:
                arr = lid_axis
            else:
                arr = wg_axis * self.wg[axis] + lid_axis
            arr = (arr & 0xFFFFFFFF).astype(U32)
            self._ids[key] = arr
        return arr

    def wg_of(self, idx: np.ndarray | None) -> np.ndarray:
        lanes = np.arange(self.L, dtype=np.int64) if idx is None else idx.astype(np.int64)
        return lanes // self.inv

    # ------------------------------------------------------------------ statements
    def block(self, body: tuple[N.Node, ...], idx: np.ndarray | None) -> None:
        saved = dict(self.scope_types)
        for n in body:
            if self.should_stop is not None and self.should_stop():
                raise ExecutionError("limit", "execution was cancelled (timeout).",
                                     "raise the dispatch timeout or dispatch less work.")
            seen, jumped = self.returned, self.jumps
            self.stmt(n, idx)
            if self.returned != seen or self.jumps != jumped:
                keep = self.alive & ~self.brk & ~self.cont
                idx = np.flatnonzero(keep) if idx is None else idx[keep[idx]]
                if idx.size == 0:
                    break
        self.scope_types = saved

    def size(self, idx: np.ndarray | None) -> int:
        return self.L if idx is None else idx.size

    def stmt(self, n: N.Node, idx: np.ndarray | None) -> None:
        rule = _STMT.get(type(n))
        if rule is None:
            raise UnknownKind(n)   # a statement kind this interpreter does not execute
        rule(self, n, idx)

    # ---- one rule per statement kind (the table `_STMT`) --------------------------------
    def _let_assign(self, n: N.Let | N.Assign, idx: np.ndarray | None) -> None:
        val, t = self.eval(n.value, idx)
        if type(n) is N.Let:
            self.scope_types[n.name] = t
            if idx is None:
                self.vars[n.name] = _full(val, t, self.L)
                return
            self.vars[n.name] = np.zeros(self.L, dtype=t.numpy)
        if idx is None:
            self.vars[n.name] = _full(val, t, self.L)
        else:
            self.vars[n.name][idx] = val

    def _store(self, n: N.Store, idx: np.ndarray | None) -> None:
        i, _ = self.eval(n.index, idx)
        v, t = self.eval(n.value, idx)
        self.store(n.buffer, i, to_storage(self.p.buffer(n.buffer).dtype, v, t), idx)

    def _if(self, n: N.If, idx: np.ndarray | None) -> None:
        c, _ = self.eval(n.cond, idx)
        c = np.broadcast_to(c, (self.size(idx),))
        lanes = np.arange(self.L) if idx is None else idx
        if n.then:
            t_idx = lanes[c]
            if t_idx.size:
                self.block(n.then, t_idx)
        if n.otherwise:
            e_idx = lanes[~c]
            if self.returned:
                e_idx = e_idx[self.alive[e_idx]]
            if e_idx.size:
                self.block(n.otherwise, e_idx)

    def _block(self, n: N.Block | N.Region, idx: np.ndarray | None) -> None:
        self.block(n.body, idx)

    def _return(self, n: N.Return, idx: np.ndarray | None) -> None:
        if idx is None:
            self.alive[:] = False
        else:
            self.alive[idx] = False
        self.returned += 1

    def _nothing(self, n: N.Barrier | N.IndirectDispatch, idx: np.ndarray | None) -> None:
        """Barrier: lockstep execution has every earlier statement complete for all lanes.
        IndirectDispatch: read when its phase starts (`run`)."""

    def _matmul(self, n: N.MatMulAcc, idx: np.ndarray | None) -> None:
        """``d += a · bᵀ`` once for each workgroup with a lane here (every lane of a
        workgroup reaches it together: V039). Products and sums in uint64, which wraps mod
        2**64 and so is exact mod 2**32; elements enter as their values (i8 sign-extended,
        u8 zero-extended; u32/i32 as their bits, the same residue mod 2**32)."""
        groups = np.unique(self.wg_of(idx))
        m, nn, k = n.m, n.n, n.k
        d, a, b = (self.p.buffer(x) for x in (n.d, n.a, n.b))

        def tile(decl, rows: int, cols: int) -> np.ndarray:
            mem = self.wgmem[decl.name].reshape(-1, decl.count)[groups, :rows * cols]
            vals = from_storage(decl.dtype, mem).astype(np.int64).view(np.uint64)
            return vals.reshape(groups.size, rows, cols)

        with np.errstate(over="ignore"):
            prod = np.matmul(tile(a, m, k), tile(b, nn, k).transpose(0, 2, 1))
            acc = (tile(d, m, nn) + prod) & np.uint64(0xFFFFFFFF)
        mem = self.wgmem[n.d].reshape(-1, d.count)
        mem[groups, :m * nn] = acc.reshape(groups.size, m * nn).astype(np.uint32)

    def _tile(self, n: N.LoadTile, idx: np.ndarray | None) -> None:
        """``dst`` = the tile of ``src`` once for each workgroup with a lane here (every lane
        of a workgroup reaches it together, with the same offset, stride and limits: V039,
        V042). Indices in u32 arithmetic, wrapping; past the end of ``src`` they read 0 (S6),
        and so do the elements outside ``rows_in`` x ``cols_in``."""
        groups, first = np.unique(self.wg_of(idx), return_index=True)

        def value(e: E.Expr) -> np.ndarray:
            v, _ = self.eval(e, idx)
            return np.broadcast_to(np.asarray(v), (self.size(idx),))[first].astype(np.uint64)[:, None, None]

        off, stride, rows_in, cols_in = (value(e) for e in (n.offset, n.stride, n.rows_in, n.cols_in))
        r = np.arange(n.rows, dtype=np.uint64)[None, :, None]
        c = np.arange(n.cols, dtype=np.uint64)[None, None, :]
        with np.errstate(over="ignore"):
            at = ((off + r * stride + c) & np.uint64(0xFFFFFFFF)).astype(np.int64)
        valid = (r < rows_in) & (c < cols_in) & (at < self.counts[n.src])
        if n.src in self.tracked and self.access is not None:
            wg = np.broadcast_to(groups[:, None, None], at.shape)
            self.access.reads.setdefault(n.src, []).append((at[valid], wg[valid]))
        mem = self.memory[n.src]
        words = mem[np.where(valid, at, 0)] if mem.size else np.zeros(at.shape, mem.dtype)
        dst = self.p.buffer(n.dst)
        tile = np.where(valid, words, 0).astype(mem.dtype).reshape(groups.size, n.rows * n.cols)
        self.wgmem[n.dst].reshape(-1, dst.count)[groups, :n.rows * n.cols] = tile

    def _eval_stmt(self, n: N.Eval, idx: np.ndarray | None) -> None:
        self.eval(n.value, idx, discard=True)

    def _jump(self, n: N.Break | N.Continue, idx: np.ndarray | None) -> None:
        mask = self.brk if type(n) is N.Break else self.cont
        if idx is None:
            mask[:] = True
        else:
            mask[idx] = True
        self.jumps += 1

    def while_(self, n: N.While, idx: np.ndarray | None) -> None:
        saved = self.brk, self.cont
        self.brk, self.cont = np.zeros(self.L, dtype=bool), np.zeros(self.L, dtype=bool)
        active = np.arange(self.L) if idx is None else idx
        done = 0
        while True:
            active = active[self.alive[active] & ~self.brk[active]]
            if active.size == 0:
                break
            c, _ = self.eval(n.cond, active)
            active = active[np.broadcast_to(c, active.shape)]
            if active.size == 0:
                break
            if done == n.max_iterations:
                self.errors.add("loop_limit")
                break
            if done >= MAX_LOOP_TRIPS:
                raise ExecutionError(
                    "limit", f"a while loop ran {done} iterations (the reference's cap is "
                    f"{MAX_LOOP_TRIPS}).", "bound the loop by at most 2**20 iterations, or split "
                    "the work across invocations or dispatches.")
            self.cont[active] = False
            self.block(n.body, active)
            done += 1
        self.brk, self.cont = saved

    def call(self, e: E.Call, idx: np.ndarray | None) -> tuple[Any, DataType | None]:
        """Run a function for the lanes ``idx``: arguments by value, its own locals."""
        if self.should_stop is not None and self.should_stop():   # one statement may call a lot
            raise ExecutionError("limit", "execution was cancelled (timeout).",
                                 "raise the dispatch timeout or dispatch less work.")
        fn = self.functions[e.function]
        args = [self.eval(a, idx)[0] for a in e.args]
        saved = self.vars, self.scope_types, self.brk, self.cont
        self.vars, self.scope_types = {}, {}
        for (name, t), v in zip(fn.params, args):
            arr = np.zeros(self.L, dtype=t.numpy)
            if idx is None:
                arr[:] = v
            else:
                arr[idx] = v
            self.vars[name], self.scope_types[name] = arr, t
        try:
            for n in fn.body:     # no return, break or continue at a function's top level
                self.stmt(n, idx)
            return self.eval(fn.result, idx) if fn.result is not None else (None, None)
        finally:
            self.vars, self.scope_types, self.brk, self.cont = saved

    def loop(self, n: N.Loop, idx: np.ndarray | None) -> None:
        lo, t = self.eval(n.from_, idx)
        hi, _ = self.eval(n.to, idx)
        size = self.size(idx)
        lo = np.broadcast_to(lo, (size,))
        hi = np.broadcast_to(hi, (size,))
        # S21 in the bounds' own type: [from, to) of u64 is unsigned, of i64 signed. Trip
        # counts and values as 64-bit words mod 2^64 (to - from < 2^64 whenever to > from)
        wide = np.int64 if np.issubdtype(lo.dtype, np.signedinteger) else np.uint64
        lo64 = lo.astype(wide).view(np.uint64)
        span = np.where(hi > lo, hi.astype(wide).view(np.uint64) - lo64, np.uint64(0))
        trips = int(np.max(span, initial=0))
        if trips > MAX_LOOP_TRIPS:
            raise ExecutionError(
                "limit", f"loop over {n.var!r} would run {trips} trips (the reference's cap is "
                f"{MAX_LOOP_TRIPS}).", "bound the loop by at most 2**20 trips, or split the work "
                "across invocations or dispatches.")
        lanes = np.arange(self.L) if idx is None else idx
        self.vars[n.var] = np.zeros(self.L, dtype=t.numpy)
        saved = dict(self.scope_types)
        self.scope_types[n.var] = t
        saved_jumps = self.brk, self.cont
        self.brk, self.cont = np.zeros(self.L, dtype=bool), np.zeros(self.L, dtype=bool)
        for k in range(trips):
            keep = (span > np.uint64(k)) & ~self.brk[lanes]
            if self.returned:
                keep = keep & self.alive[lanes]
            cur = lanes[keep]
            if cur.size == 0:
                break
            self.cont[cur] = False
            self.vars[n.var][cur] = (lo64[keep] + np.uint64(k)).astype(t.numpy)
            self.block(n.body, cur)
        self.brk, self.cont = saved_jumps
        self.scope_types = saved

    # ------------------------------------------------------------------ memory
    def _addresses(self, buffer: str, i: np.ndarray, idx: np.ndarray | None):
        decl = self.p.buffer(buffer)
        i = np.broadcast_to(i, (self.size(idx),)).astype(np.int64)
        if decl.is_workgroup:
            valid = i < decl.count
            addr = self.wg_of(idx) * decl.count + i
            return self.wgmem[buffer], addr, valid, False
        if decl.is_local:
            valid = i < decl.count
            lanes = np.arange(self.L, dtype=np.int64) if idx is None else idx.astype(np.int64)
            return self.locmem[buffer], lanes * decl.count + i, valid, False
        count = self.counts[buffer]
        return self.memory[buffer], i, i < count, buffer in self.tracked

    def _record(self, table: dict, buffer: str, addr: np.ndarray, valid: np.ndarray,
                idx: np.ndarray | None) -> None:
        if self.access is not None:
            table.setdefault(buffer, []).append((addr[valid], self.wg_of(idx)[valid]))

    def load(self, buffer: str, i: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
        mem, addr, valid, tracked = self._addresses(buffer, i, idx)
        if tracked:
            self._record(self.access.reads if self.access else {}, buffer, addr, valid, idx)
        if mem.size == 0:
            return np.zeros(addr.size, dtype=mem.dtype)
        words = mem[np.where(valid, addr, 0)]
        return np.where(valid, words, 0).astype(mem.dtype)

    def store(self, buffer: str, i: np.ndarray, words: np.ndarray, idx: np.ndarray | None) -> None:
        mem, addr, valid, tracked = self._addresses(buffer, i, idx)
        words = np.broadcast_to(words, addr.shape)
        if tracked:
            self._record(self.access.writes if self.access else {}, buffer, addr, valid, idx)
        mem[addr[valid]] = words[valid]  # repeated addresses: the last (highest lane) wins

    def atomic(self, e: E.Atomic, idx: np.ndarray | None, discard: bool) -> tuple[np.ndarray, DataType]:
        t = self.p.buffer(e.buffer).dtype
        i, _ = self.eval(e.index, idx)
        v, _ = self.eval(e.value, idx)
        if t.is_float:   # S36: collected now, accumulated exactly when the dispatch ends
            _, addr, valid, _ = self._addresses(e.buffer, i, idx)
            bits = np.broadcast_to(np.ascontiguousarray(np.asarray(v, dtype=t.numpy)).view(t.storage),
                                   addr.shape)
            self.deferred[e.buffer].append((addr[valid], np.array(bits[valid])))
            self.deferred_op[e.buffer] = e.op
            return np.zeros(addr.size, dtype=t.numpy), t   # never read (V040)
        x = self.eval(e.expected, idx)[0] if e.expected is not None else None
        mem, addr, valid, tracked = self._addresses(e.buffer, i, idx)
        n = addr.size
        W = mem.dtype  # the buffer's unsigned storage words
        v = np.broadcast_to(np.ascontiguousarray(v).view(W) if v.ndim else
                            np.array(v, dtype=t.numpy).view(W), (n,))
        if tracked:
            commutative = discard and e.op not in (AtomicOp.EXCHANGE, AtomicOp.COMPARE_EXCHANGE)
            table = (self.access.commutes if commutative else self.access.writes) if self.access else {}
            self._record(table, e.buffer, addr, valid, idx)
        old = np.zeros(n, dtype=W)
        if valid.any():
            pos = np.flatnonzero(valid)
            order = pos[np.argsort(addr[pos], kind="stable")]
            sa = addr[order]
            sv = v[order]
            first = np.ones(sa.size, dtype=bool)
            first[1:] = sa[1:] != sa[:-1]
            starts = np.flatnonzero(first)
            seg = np.cumsum(first) - 1
            rank = np.arange(sa.size) - starts[seg]
            base = mem[sa]
            if e.op is AtomicOp.COMPARE_EXCHANGE:
                sx = np.broadcast_to(np.ascontiguousarray(x).view(W) if np.ndim(x) else
                                     np.array(x, dtype=t.numpy).view(W), (n,))[order]
                olds = np.zeros(sa.size, dtype=W)
                for r in range(int(rank.max()) + 1):
                    m = rank == r
                    cur = mem[sa[m]]
                    olds[m] = cur
                    hit = cur == sx[m]
                    mem[sa[m][hit]] = sv[m][hit]
                old[order] = olds
            elif e.op is AtomicOp.EXCHANGE:
                olds = np.where(first, base, np.roll(sv, 1))
                old[order] = olds
                last = np.append(starts[1:] - 1, sa.size - 1)
                mem[sa[last]] = sv[last]
            else:
                tv = sv.view(t.numpy)
                acc = tv.copy()
                d = 1
                longest = int(rank.max()) + 1
                while d < longest:
                    m = rank >= d
                    nxt = acc.copy()
                    nxt[m] = S.atomic_combine(e.op, t, acc[np.flatnonzero(m) - d], acc[m])
                    acc = nxt
                    d *= 2
                tb = base.view(t.numpy)
                prev = np.roll(acc, 1)
                olds = np.where(first, tb, S.atomic_combine(e.op, t, tb, prev))
                old[order] = np.ascontiguousarray(olds).view(W)
                last = np.append(starts[1:] - 1, sa.size - 1)
                mem[sa[last]] = np.ascontiguousarray(
                    S.atomic_combine(e.op, t, tb[last], acc[last])).view(W)
        return old.view(t.numpy), t

    # ------------------------------------------------------------------ expressions
    def eval(self, e: E.Expr, idx: np.ndarray | None, discard: bool = False) -> tuple[Any, DataType]:
        rule = _EVAL.get(type(e))
        if rule is None:
            raise UnknownKind(e)   # an expression kind this interpreter does not evaluate
        return rule(self, e, idx, discard)

    # ---- one rule per expression kind (the table `_EVAL`) -------------------------------
    def _literal(self, e: E.Lit | E.Spec, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        # an unspecialized constant takes its default
        if e.dtype.is_half:
            return np.asarray(e.bits, dtype=np.uint16), e.dtype
        v = E.Lit(e.dtype, e.bits).value
        return np.asarray(v, dtype=e.dtype.numpy), e.dtype

    def _var(self, e: E.Var, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        arr = self.vars[e.name]
        t = self.scope_types[e.name]
        return (arr if idx is None else arr[idx]), t

    def _load(self, e: E.Load, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        i, _ = self.eval(e.index, idx)
        t = self.p.buffer(e.buffer).dtype
        return from_storage(t, self.load(e.buffer, i, idx)), t.value_type

    def _buf_len(self, e: E.BufLen, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        decl = self.p.buffer(e.buffer)
        n = self.counts[e.buffer] if decl.is_bound else decl.count
        return np.asarray(n, dtype=U32), DataType.U32

    def _id(self, e: E.Id, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        arr = self.ident(e.kind, e.axis)
        return (arr if idx is None else arr[idx]), DataType.U32

    def _bin(self, e: E.Bin, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        a, ta = self.eval(e.left, idx)
        b, tb = self.eval(e.right, idx)
        r, bad = S.binop(e.op, ta, np.atleast_1d(a), np.atleast_1d(b))
        if bad is not None and bad.any():
            self.errors.add("division")   # the result is 0; the dispatch fails at the end
        return r, bin_result(e.op, ta, tb)

    def _un(self, e: E.Un, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        a, t = self.eval(e.operand, idx)
        return S.unop(e.op, t, np.atleast_1d(a)), un_result(e.op, t)

    def _select(self, e: E.Select, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        c, _ = self.eval(e.cond, idx)
        a, t = self.eval(e.if_true, idx)
        b, _ = self.eval(e.if_false, idx)
        return np.where(c, a, b).astype(t.numpy), t

    def _cast(self, e: E.Cast, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        a, t = self.eval(e.value, idx)
        return S.cast(e.dtype, t, np.atleast_1d(a)), e.dtype

    def _bitcast(self, e: E.Bitcast, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        a, t = self.eval(e.value, idx)
        return S.bitcast(e.dtype, np.atleast_1d(a), t), e.dtype

    def _fma(self, e: E.Fma, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        a, t = self.eval(e.a, idx)
        b, _ = self.eval(e.b, idx)
        c, _ = self.eval(e.c, idx)

        def wide(v: Any) -> np.ndarray:
            v = np.atleast_1d(v)
            return S.canon(v) if t is DataType.F32 else S.widen(t, v)

        with np.errstate(all="ignore"):
            r = S.canon(S.fma_f32(*np.broadcast_arrays(wide(a), wide(b), wide(c))))
        return (r if t is DataType.F32 else S.narrow(t, r)), t

    def _atomic(self, e: E.Atomic, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        return self.atomic(e, idx, discard)

    def _subgroup(self, e: E.Subgroup, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        return self.subgroup(e, idx)

    def _call(self, e: E.Call, idx: np.ndarray | None, discard: bool) -> tuple[Any, DataType]:
        return self.call(e, idx)  # type: ignore[return-value]

    def subgroup(self, e: E.Subgroup, idx: np.ndarray | None) -> tuple[np.ndarray, DataType]:
        """Subgroups are runs of `subgroup_size` consecutive lanes of a workgroup. Validation
        guarantees uniform control flow and no returns, so every subgroup is whole here."""
        w = self.subgroup_size
        lanes = np.arange(self.L, dtype=np.int64) if idx is None else idx.astype(np.int64)
        within = (lanes % self.inv) % w                       # lane index inside its subgroup
        if e.op is SubgroupOp.SIZE:
            return np.asarray(w, dtype=U32), DataType.U32
        if e.op is SubgroupOp.LOCAL_ID:
            return within.astype(U32), DataType.U32
        v, t = self.eval(e.value, idx)
        v = np.ascontiguousarray(np.broadcast_to(v, lanes.shape))
        starts = np.flatnonzero(within == 0)                 # lanes are sorted: groups are runs
        group = np.cumsum(within == 0) - 1
        if e.op is SubgroupOp.BALLOT:
            bits = (v.astype(np.uint64) << within.astype(np.uint64)).astype(np.uint64)
            out = np.bitwise_or.reduceat(bits, starts)
            return out[group].astype(U32), DataType.U32
        if e.op is SubgroupOp.SHUFFLE:
            src, _ = self.eval(e.lane, idx)
            src = np.broadcast_to(src, lanes.shape).astype(np.int64) % w
            return v[starts[group] + src], t
        ufunc = {SubgroupOp.REDUCE_ADD: np.add, SubgroupOp.REDUCE_MIN: np.minimum,
                 SubgroupOp.REDUCE_MAX: np.maximum, SubgroupOp.REDUCE_AND: np.bitwise_and,
                 SubgroupOp.REDUCE_OR: np.bitwise_or, SubgroupOp.REDUCE_XOR: np.bitwise_xor}[e.op]
        vals = v.view(U32) if e.op is SubgroupOp.REDUCE_ADD else v  # ADD wraps as u32 bits
        red = ufunc.reduceat(vals, starts, dtype=vals.dtype)  # wraps: no numpy upcast
        return np.ascontiguousarray(red[group]).view(t.numpy), t


M = Machine
# how each statement kind executes (tests/ir/test_kind_tables.py: every kind is here)
_STMT: dict[type, Callable[[Machine, Any, Any], None]] = {
    N.Let: M._let_assign, N.Assign: M._let_assign, N.Store: M._store, N.If: M._if, N.Loop: M.loop,
    N.Block: M._block, N.Region: M._block, N.Return: M._return, N.Barrier: M._nothing,
    N.Eval: M._eval_stmt, N.While: M.while_, N.Break: M._jump, N.Continue: M._jump,
    N.IndirectDispatch: M._nothing, N.MatMulAcc: M._matmul, N.LoadTile: M._tile,
}
# how each expression kind evaluates; a WeakLit never reaches a built Program (EVAL_EXEMPT)
_EVAL: dict[type, Callable[[Machine, Any, Any, bool], tuple[Any, DataType]]] = {
    E.Lit: M._literal, E.Spec: M._literal, E.Var: M._var, E.Load: M._load, E.BufLen: M._buf_len,
    E.Id: M._id, E.Bin: M._bin, E.Un: M._un, E.Select: M._select, E.Cast: M._cast,
    E.Bitcast: M._bitcast, E.Fma: M._fma, E.Atomic: M._atomic, E.Subgroup: M._subgroup, E.Call: M._call,
}
EVAL_EXEMPT = frozenset({E.WeakLit})


def _full(val: Any, t: DataType, lanes: int) -> np.ndarray:
    return np.array(np.broadcast_to(np.asarray(val, dtype=t.numpy), (lanes,)), copy=True)


def from_storage(t: DataType, raw: np.ndarray) -> np.ndarray:
    """Stored elements of type ``t`` as values (narrow integers widen, BOOL is non-zero)."""
    if t is DataType.BOOL:
        return raw != 0
    if t.storage_only:
        return raw.view(t.numpy).astype(t.value_type.numpy)
    return raw.view(t.numpy)


def to_storage(t: DataType, v: Any, vt: DataType) -> np.ndarray:
    """Values of type ``vt`` as stored elements of type ``t`` (narrow stores keep the low
    bits; BOOL stores 0 or 1)."""
    if vt is DataType.BOOL:
        return np.asarray(v, dtype=bool).astype(t.storage)
    arr = np.ascontiguousarray(np.asarray(v, dtype=vt.numpy))
    if t.storage_only:
        return arr.view(vt.numpy.str.replace("i", "u")).astype(t.storage)
    return arr.view(t.storage)


def _written_buffers(program: Program) -> set[str]:
    out: set[str] = set()
    for body in N.program_bodies(program):
        for n in N.walk_nodes(body):
            if isinstance(n, N.Store):
                out.add(n.buffer)
    out.update(e.buffer for e in N.program_exprs(program) if isinstance(e, E.Atomic))
    return out


def _collides(access: _Access, counts: dict[str, int]) -> bool:
    """True when some global address is written by one workgroup of the batch and read or
    written by another (commuting atomics only collide with reads and plain writes)."""
    names = set(access.writes) | set(access.commutes)
    for name in names:
        size = counts[name]
        if size == 0:
            continue
        sentinel = np.int64(-1)

        def spans(parts, size=size, sentinel=sentinel):
            lo = np.full(size, np.iinfo(np.int64).max)
            hi = np.full(size, sentinel)
            for addr, wg in parts:
                np.minimum.at(lo, addr, wg)
                np.maximum.at(hi, addr, wg)
            return lo, hi

        wlo, whi = spans(access.writes.get(name, []))
        written = whi != sentinel
        if np.any(written & (wlo != whi)):
            return True
        clo, chi = spans(access.commutes.get(name, []))
        touched = chi != sentinel
        if np.any(written & touched & ((clo != wlo) | (chi != whi) | (clo != chi))):
            return True
        for addr, wg in access.reads.get(name, []):
            w = written[addr] & ((wlo[addr] != wg) | (whi[addr] != wg))
            c = touched[addr] & ((clo[addr] != wg) | (chi[addr] != wg))
            if np.any(w | c):
                return True
    return False
