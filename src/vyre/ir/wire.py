"""Wire form: a versioned, deterministic binary encoding of a Program.

Layout: ``b"VYRE"``, u16 version, u16 flags (bit 0: canonical), 32-byte blake3 of the body,
then the body: LEB128-framed sections (tag, length, payload) for the workgroup size, the
buffers, the statement tree and (version 2, when there are any) the functions. Enum values
are encoded by their fixed position in the tables below (append-only).

Version 2 added the 64-bit, 16-bit-float and storage-only types, local arrays, functions and
calls, while/break/continue and indirect_dispatch. Statement tags 15 (matmul_acc) and 16
(load_tile) were appended within version 2: a reader older than one refuses such bytes with a `WireError` (unknown
statement tag), and every other program's bytes are unchanged. This reader reads versions 1 and 2; a
version-1 reader refuses version-2 bytes with a `WireError` that says to upgrade.

Decoding is strict and bounded: every count is checked against the bytes left, nesting depth
is capped, literals and enum codes are range-checked, and the checksum must match. Anything
else is a `WireError` with a Fix — never another exception type, a hang or unbounded memory.
``decode(encode(p)) == p`` for every Program.
"""

from __future__ import annotations

import struct

import blake3

from . import expr as E
from . import node as N
from .errors import VyreError, WireError
from .kinds import KINDS
from .limits import MAX_DEPTH, MAX_NAME_BYTES
from .program import BufferDecl, Function, Program
from .structure import literal_fault
from .types import (
    AtomicOp,
    BinOp,
    BufferAccess,
    Builtin,
    DataType,
    MemoryOrdering,
    SubgroupOp,
    UnOp,
)

MAGIC = b"VYRE"
VERSION = 2
READS = (1, 2)
FLAG_CANONICAL = 1
HEADER = 4 + 2 + 2 + 32

# Append-only code tables (position = wire code).
DTYPES = (DataType.BOOL, DataType.U32, DataType.I32, DataType.F32, DataType.U64, DataType.I64,
          DataType.U8, DataType.I8, DataType.U16, DataType.I16, DataType.F16, DataType.BF16)
ACCESS = (BufferAccess.READ, BufferAccess.READ_WRITE, BufferAccess.OUTPUT, BufferAccess.WORKGROUP,
          BufferAccess.LOCAL)
ORDERINGS = (MemoryOrdering.SEQ_CST, MemoryOrdering.GRID_SYNC)
BUILTINS = (Builtin.GID, Builtin.LID, Builtin.WGID)
BINOPS = tuple(BinOp)
UNOPS = tuple(UnOp)
ATOMICS = tuple(AtomicOp)
SUBGROUP_OPS = tuple(SubgroupOp)

S_WORKGROUP, S_BUFFERS, S_BODY, S_FUNCTIONS = 1, 2, 3, 4
# kind tags: the one list of kinds (`vyre.ir.kinds`) holds them (append-only)
_TAG = {k.cls: k.tag for k in KINDS}
(N_LET, N_ASSIGN, N_STORE, N_IF, N_LOOP, N_BLOCK, N_REGION, N_RETURN, N_BARRIER, N_EVAL,
 N_WHILE, N_BREAK, N_CONTINUE, N_INDIRECT, N_MATMUL, N_TILE) = (
    _TAG[N.Let], _TAG[N.Assign], _TAG[N.Store], _TAG[N.If], _TAG[N.Loop], _TAG[N.Block], _TAG[N.Region],
    _TAG[N.Return], _TAG[N.Barrier], _TAG[N.Eval], _TAG[N.While], _TAG[N.Break], _TAG[N.Continue],
    _TAG[N.IndirectDispatch], _TAG[N.MatMulAcc], _TAG[N.LoadTile])
(X_LIT, X_VAR, X_LOAD, X_BUFLEN, X_ID, X_BIN, X_UN, X_SELECT, X_CAST, X_BITCAST, X_FMA,
 X_ATOMIC, X_SPEC, X_SUBGROUP, X_CALL) = (
    _TAG[E.Lit], _TAG[E.Var], _TAG[E.Load], _TAG[E.BufLen], _TAG[E.Id], _TAG[E.Bin], _TAG[E.Un],
    _TAG[E.Select], _TAG[E.Cast], _TAG[E.Bitcast], _TAG[E.Fma], _TAG[E.Atomic], _TAG[E.Spec],
    _TAG[E.Subgroup], _TAG[E.Call])


# ---------------------------------------------------------------------------- encoding
def _uleb(out: bytearray, v: int) -> None:
    if 0 <= v < 0x80:
        out.append(v)
        return
    if v < 0:
        raise ValueError("negative value in wire encoding")
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _str(out: bytearray, s: str) -> None:
    raw = s.encode("utf-8")
    _uleb(out, len(raw))
    out += raw


def _code(table: tuple) -> dict:
    return {v: i for i, v in enumerate(table)}


_DT, _AC, _OR, _BI = _code(DTYPES), _code(ACCESS), _code(ORDERINGS), _code(BUILTINS)
_BO, _UO, _AO, _SO = _code(BINOPS), _code(UNOPS), _code(ATOMICS), _code(SUBGROUP_OPS)


def _e_lit(out: bytearray, e: E.Lit) -> None:
    out.append(X_LIT), out.append(_DT[e.dtype]), _uleb(out, e.bits)


def _e_var(out: bytearray, e: E.Var) -> None:
    out.append(X_VAR), _str(out, e.name)


def _e_subgroup(out: bytearray, e: E.Subgroup) -> None:
    out.append(X_SUBGROUP), out.append(_SO[e.op])
    for part in (e.value, e.lane):
        out.append(0 if part is None else 1)
        if part is not None:
            _expr(out, part)


def _e_spec(out: bytearray, e: E.Spec) -> None:
    out.append(X_SPEC), _str(out, e.name), out.append(_DT[e.dtype]), _uleb(out, e.bits)


def _e_load(out: bytearray, e: E.Load) -> None:
    out.append(X_LOAD), _str(out, e.buffer), _expr(out, e.index)


def _e_buflen(out: bytearray, e: E.BufLen) -> None:
    out.append(X_BUFLEN), _str(out, e.buffer)


def _e_id(out: bytearray, e: E.Id) -> None:
    out.append(X_ID), out.append(_BI[e.kind]), _uleb(out, e.axis)


def _bin_head(e: E.Bin) -> bytes:
    return bytes((X_BIN, _BO[e.op]))


def _un_head(e: E.Un) -> bytes:
    return bytes((X_UN, _UO[e.op]))


def _e_bin(out: bytearray, e: E.Bin) -> None:
    out += _bin_head(e)
    _expr(out, e.left), _expr(out, e.right)


def _e_un(out: bytearray, e: E.Un) -> None:
    out += _un_head(e)
    _expr(out, e.operand)


def _e_select(out: bytearray, e: E.Select) -> None:
    out.append(X_SELECT), _expr(out, e.cond), _expr(out, e.if_true), _expr(out, e.if_false)


def _e_cast(out: bytearray, e: E.Cast) -> None:
    out.append(X_CAST), out.append(_DT[e.dtype]), _expr(out, e.value)


def _e_bitcast(out: bytearray, e: E.Bitcast) -> None:
    out.append(X_BITCAST), out.append(_DT[e.dtype]), _expr(out, e.value)


def _e_fma(out: bytearray, e: E.Fma) -> None:
    out.append(X_FMA), _expr(out, e.a), _expr(out, e.b), _expr(out, e.c)


def _e_atomic(out: bytearray, e: E.Atomic) -> None:
    out.append(X_ATOMIC), out.append(_AO[e.op]), _str(out, e.buffer)
    _expr(out, e.index), _expr(out, e.value)
    out.append(0 if e.expected is None else 1)
    if e.expected is not None:
        _expr(out, e.expected)


def _e_call(out: bytearray, e: E.Call) -> None:
    out.append(X_CALL), _str(out, e.function), _uleb(out, len(e.args))
    for a in e.args:
        _expr(out, a)


_EXPR_ENCODERS = {E.Call: _e_call, E.Lit: _e_lit, E.Var: _e_var, E.Subgroup: _e_subgroup, E.Spec: _e_spec,
                  E.Load: _e_load, E.BufLen: _e_buflen, E.Id: _e_id, E.Bin: _e_bin, E.Un: _e_un,
                  E.Select: _e_select, E.Cast: _e_cast, E.Bitcast: _e_bitcast, E.Fma: _e_fma,
                  E.Atomic: _e_atomic}


def _expr(out: bytearray, e: E.Expr) -> None:
    enc = _EXPR_ENCODERS.get(type(e))
    if enc is None:
        raise TypeError(f"cannot encode {type(e).__name__}")
    enc(out, e)


def _n_let(out: bytearray, n: N.Let) -> None:
    out.append(N_LET), _str(out, n.name), _expr(out, n.value)


def _n_assign(out: bytearray, n: N.Assign) -> None:
    out.append(N_ASSIGN), _str(out, n.name), _expr(out, n.value)


def _n_store(out: bytearray, n: N.Store) -> None:
    out.append(N_STORE), _str(out, n.buffer), _expr(out, n.index), _expr(out, n.value)


def _n_if(out: bytearray, n: N.If) -> None:
    out.append(N_IF), _expr(out, n.cond), _nodes(out, n.then), _nodes(out, n.otherwise)


def _n_loop(out: bytearray, n: N.Loop) -> None:
    out.append(N_LOOP), _str(out, n.var), _expr(out, n.from_), _expr(out, n.to)
    _nodes(out, n.body)


def _n_block(out: bytearray, n: N.Block) -> None:
    out.append(N_BLOCK), _nodes(out, n.body)


def _n_region(out: bytearray, n: N.Region) -> None:
    out.append(N_REGION), _str(out, n.name), _nodes(out, n.body)


def _n_return(out: bytearray, n: N.Return) -> None:
    out.append(N_RETURN)


def _n_barrier(out: bytearray, n: N.Barrier) -> None:
    out.append(N_BARRIER), out.append(_OR[n.ordering])


def _n_eval(out: bytearray, n: N.Eval) -> None:
    out.append(N_EVAL), _expr(out, n.value)


def _n_while(out: bytearray, n: N.While) -> None:
    out.append(N_WHILE), _expr(out, n.cond), _uleb(out, n.max_iterations), _nodes(out, n.body)


def _n_break(out: bytearray, n: N.Break) -> None:
    out.append(N_BREAK)


def _n_continue(out: bytearray, n: N.Continue) -> None:
    out.append(N_CONTINUE)


def _n_indirect(out: bytearray, n: N.IndirectDispatch) -> None:
    out.append(N_INDIRECT), _str(out, n.buffer), _uleb(out, n.offset)


def _n_matmul(out: bytearray, n: N.MatMulAcc) -> None:
    out.append(N_MATMUL), _str(out, n.d), _str(out, n.a), _str(out, n.b)
    _uleb(out, n.m), _uleb(out, n.n), _uleb(out, n.k)


def _n_tile(out: bytearray, n: N.LoadTile) -> None:
    out.append(N_TILE), _str(out, n.dst), _str(out, n.src), _expr(out, n.offset), _expr(out, n.stride)
    _uleb(out, n.rows), _uleb(out, n.cols), _expr(out, n.rows_in), _expr(out, n.cols_in)


_NODE_ENCODERS = {N.Let: _n_let, N.Assign: _n_assign, N.Store: _n_store, N.If: _n_if, N.Loop: _n_loop,
                  N.Block: _n_block, N.Region: _n_region, N.Return: _n_return, N.Barrier: _n_barrier,
                  N.Eval: _n_eval, N.While: _n_while, N.Break: _n_break, N.Continue: _n_continue,
                  N.IndirectDispatch: _n_indirect, N.MatMulAcc: _n_matmul,
                  N.LoadTile: _n_tile}


def _nodes(out: bytearray, body: tuple[N.Node, ...]) -> None:
    _uleb(out, len(body))
    get = _NODE_ENCODERS.get
    for n in body:
        enc = get(type(n))
        if enc is None:
            raise TypeError(f"cannot encode {type(n).__name__}")
        enc(out, n)


def encode_expr(e: E.Expr) -> bytes:
    """The wire bytes of one expression (prefix form: a node's bytes are its header, then
    its operands' bytes in order)."""
    out = bytearray()
    _expr(out, e)
    return bytes(out)


def encode_expr_from(e: E.Expr, operands: list[bytes]) -> bytes | None:
    """`encode_expr` of a Bin or Un from its operands' encodings (None for other nodes):
    lets bottom-up passes encode each subtree once."""
    t = type(e)
    if t is E.Bin:
        return _bin_head(e) + operands[0] + operands[1]  # type: ignore[arg-type]
    if t is E.Un:
        return _un_head(e) + operands[0]  # type: ignore[arg-type]
    return None


def _section(out: bytearray, tag: int, payload: bytearray) -> None:
    _uleb(out, tag)
    _uleb(out, len(payload))
    out += payload


def encode(program: Program, canonical: bool = False) -> bytes:
    """Encode ``program`` (after canonicalisation when ``canonical``)."""
    if canonical:
        from .canonical import canonicalize

        program = canonicalize(program)
    body = bytearray()
    wg = bytearray()
    for v in program.workgroup_size:
        _uleb(wg, v)
    _section(body, S_WORKGROUP, wg)
    bufs = bytearray()
    _uleb(bufs, len(program.buffers))
    for b in program.buffers:
        _str(bufs, b.name)
        _uleb(bufs, _AC[b.access])
        _uleb(bufs, _DT[b.dtype])
        _uleb(bufs, 0 if b.binding is None else b.binding + 1)
        _uleb(bufs, b.count)
    _section(body, S_BUFFERS, bufs)
    tree = bytearray()
    _nodes(tree, program.body)
    _section(body, S_BODY, tree)
    if program.functions:
        fns = bytearray()
        _uleb(fns, len(program.functions))
        for f in program.functions:
            _str(fns, f.name)
            _uleb(fns, len(f.params))
            for pname, ptype in f.params:
                _str(fns, pname)
                _uleb(fns, _DT[ptype])
            _nodes(fns, f.body)
            fns.append(0 if f.result is None else 1)
            if f.result is not None:
                _expr(fns, f.result)
        _section(body, S_FUNCTIONS, fns)
    flags = FLAG_CANONICAL if canonical else 0
    return MAGIC + struct.pack("<HH", VERSION, flags) + blake3.blake3(bytes(body)).digest() + bytes(body)


# ---------------------------------------------------------------------------- decoding
class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def left(self) -> int:
        return self.end - self.pos

    def byte(self) -> int:
        if self.pos >= self.end:
            raise WireError(f"truncated record at byte {self.pos}.")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def uleb(self, limit: int = (1 << 64) - 1) -> int:
        v = shift = 0
        while True:
            b = self.byte()
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise WireError(f"LEB128 integer too long at byte {self.pos}.")
        if v > limit:
            raise WireError(f"value {v} exceeds its limit {limit} at byte {self.pos}.")
        return v

    def count(self) -> int:
        n = self.uleb()
        if n > self.left():
            raise WireError(f"count {n} exceeds the {self.left()} bytes left at byte {self.pos}.")
        return n

    def code(self, table: tuple) -> object:
        c = self.uleb()
        if c >= len(table):
            raise WireError(f"unknown enum code {c} at byte {self.pos}.")
        return table[c]

    def string(self) -> str:
        n = self.uleb(MAX_NAME_BYTES)
        if n > self.left():
            raise WireError(f"string of {n} bytes overruns the record at byte {self.pos}.")
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise WireError(f"string at byte {self.pos - n} is not UTF-8.") from None


def _rexpr(r: _Reader, depth: int) -> E.Expr:
    if depth > MAX_DEPTH:
        raise WireError(f"expression nesting exceeds {MAX_DEPTH}.")
    tag = r.byte()
    dec = _EXPR_DECODERS.get(tag)
    if dec is None:
        raise WireError(f"unknown expression tag {tag} at byte {r.pos - 1}.")
    return dec(r, depth + 1)


def _flag(r: _Reader, what: str) -> int:
    has = r.byte()
    if has > 1:
        raise WireError(f"bad {what} flag {has} at byte {r.pos}.")
    return has


def _d_call(r: _Reader, d: int) -> E.Call:
    name = r.string()
    n = r.count()
    return E.Call(name, tuple(_rexpr(r, d) for _ in range(n)))


def _d_subgroup(r: _Reader, d: int) -> E.Subgroup:
    op = r.code(SUBGROUP_OPS)
    parts = [_rexpr(r, d) if _flag(r, "subgroup") else None for _ in range(2)]
    return E.Subgroup(op, parts[0], parts[1])  # type: ignore[arg-type]


def _d_spec(r: _Reader, d: int) -> E.Spec:
    name = r.string()
    return E.Spec(name, *_rlit(r, "specialization default"))  # type: ignore[arg-type]


def _d_bin(r: _Reader, d: int) -> E.Bin:
    op = r.code(BINOPS)
    return E.Bin(op, _rexpr(r, d), _rexpr(r, d))  # type: ignore[arg-type]


def _d_un(r: _Reader, d: int) -> E.Un:
    op = r.code(UNOPS)
    return E.Un(op, _rexpr(r, d))  # type: ignore[arg-type]


def _d_atomic(r: _Reader, d: int) -> E.Atomic:
    op = r.code(ATOMICS)
    buf = r.string()
    idx, val = _rexpr(r, d), _rexpr(r, d)
    return E.Atomic(op, buf, idx, val, _rexpr(r, d) if _flag(r, "atomic") else None)  # type: ignore[arg-type]


_EXPR_DECODERS = {
    X_LIT: lambda r, d: E.Lit(*_rlit(r, "literal")),
    X_CALL: _d_call,
    X_VAR: lambda r, d: E.Var(r.string()),
    X_SUBGROUP: _d_subgroup,
    X_SPEC: _d_spec,
    X_LOAD: lambda r, d: E.Load(r.string(), _rexpr(r, d)),
    X_BUFLEN: lambda r, d: E.BufLen(r.string()),
    X_ID: lambda r, d: E.Id(r.code(BUILTINS), r.uleb(2)),
    X_BIN: _d_bin,
    X_UN: _d_un,
    X_SELECT: lambda r, d: E.Select(_rexpr(r, d), _rexpr(r, d), _rexpr(r, d)),
    X_CAST: lambda r, d: E.Cast(r.code(DTYPES), _rexpr(r, d)),
    X_BITCAST: lambda r, d: E.Bitcast(r.code(DTYPES), _rexpr(r, d)),
    X_FMA: lambda r, d: E.Fma(_rexpr(r, d), _rexpr(r, d), _rexpr(r, d)),
    X_ATOMIC: _d_atomic,
}


def _rlit(r: _Reader, what: str) -> tuple[DataType, int]:
    dtype = r.code(DTYPES)
    bits = r.uleb((1 << dtype.bits) - 1)  # type: ignore[attr-defined]
    fault = literal_fault(dtype, bits)
    if fault:
        raise WireError(f"invalid {what}: {fault[1]}.")
    return dtype, bits  # type: ignore[return-value]


def _rnodes(r: _Reader, depth: int) -> tuple[N.Node, ...]:
    if depth > MAX_DEPTH:
        raise WireError(f"statement nesting exceeds {MAX_DEPTH}.")
    n = r.count()
    out: list[N.Node] = []
    d = depth + 1
    get = _NODE_DECODERS.get
    for _ in range(n):
        tag = r.byte()
        dec = get(tag)
        if dec is None:
            raise WireError(f"unknown statement tag {tag} at byte {r.pos - 1}.")
        out.append(dec(r, d))
    return tuple(out)


def _d_if(r: _Reader, d: int) -> N.If:
    cond = _rexpr(r, d)
    return N.If(cond, _rnodes(r, d), _rnodes(r, d))


def _d_loop(r: _Reader, d: int) -> N.Loop:
    var = r.string()
    lo, hi = _rexpr(r, d), _rexpr(r, d)
    return N.Loop(var, lo, hi, _rnodes(r, d))


def _d_region(r: _Reader, d: int) -> N.Region:
    name = r.string()
    return N.Region(name, _rnodes(r, d))


def _d_while(r: _Reader, d: int) -> N.While:
    cond = _rexpr(r, d)
    cap = r.uleb(0xFFFFFFFF)
    return N.While(cond, _rnodes(r, d), cap)


_NODE_DECODERS = {
    N_LET: lambda r, d: N.Let(r.string(), _rexpr(r, d)),
    N_ASSIGN: lambda r, d: N.Assign(r.string(), _rexpr(r, d)),
    N_STORE: lambda r, d: N.Store(r.string(), _rexpr(r, d), _rexpr(r, d)),
    N_IF: _d_if,
    N_LOOP: _d_loop,
    N_BLOCK: lambda r, d: N.Block(_rnodes(r, d)),
    N_REGION: _d_region,
    N_RETURN: lambda r, d: N.Return(),
    N_BARRIER: lambda r, d: N.Barrier(r.code(ORDERINGS)),
    N_EVAL: lambda r, d: N.Eval(_rexpr(r, d)),
    N_WHILE: _d_while,
    N_BREAK: lambda r, d: N.Break(),
    N_CONTINUE: lambda r, d: N.Continue(),
    N_INDIRECT: lambda r, d: N.IndirectDispatch(r.string(), r.uleb(0xFFFFFFFF)),
    N_MATMUL: lambda r, d: N.MatMulAcc(r.string(), r.string(), r.string(), r.uleb(0xFFFFFFFF),
                                       r.uleb(0xFFFFFFFF), r.uleb(0xFFFFFFFF)),
    N_TILE: lambda r, d: N.LoadTile(r.string(), r.string(), _rexpr(r, d), _rexpr(r, d), r.uleb(0xFFFFFFFF),
                                    r.uleb(0xFFFFFFFF), _rexpr(r, d), _rexpr(r, d)),
}


def _sections(data: bytes) -> dict[int, tuple[int, int]]:
    r = _Reader(data, HEADER, len(data))
    found: dict[int, tuple[int, int]] = {}
    while r.left():
        tag = r.uleb()
        size = r.count()
        if tag in found:
            raise WireError(f"section {tag} appears twice.")
        found[tag] = (r.pos, r.pos + size)
        r.pos += size
    for tag in (S_WORKGROUP, S_BUFFERS, S_BODY):
        if tag not in found:
            raise WireError(f"section {tag} is missing.")
    return found


def decode(data: bytes | bytearray | memoryview) -> Program:
    """Decode wire bytes into a Program; any defect raises `WireError`."""
    try:
        data = bytes(data)
    except Exception:
        raise WireError(f"expected bytes, got {type(data).__name__}.") from None
    if len(data) < HEADER or data[:4] != MAGIC:
        raise WireError("not vyre wire bytes (missing b'VYRE' header).")
    version, _flags = struct.unpack_from("<HH", data, 4)
    if version not in READS:
        raise WireError(f"wire version {version}; this vyre reads versions "
                        f"{', '.join(map(str, READS))}.",
                        "re-encode the program with this vyre version, or upgrade vyre.")
    if blake3.blake3(data[HEADER:]).digest() != data[8:HEADER]:
        raise WireError("checksum mismatch: the bytes were altered or truncated.")
    sec = _sections(data)
    r = _Reader(data, *sec[S_WORKGROUP])
    wg = (r.uleb(0xFFFFFFFF), r.uleb(0xFFFFFFFF), r.uleb(0xFFFFFFFF))
    r = _Reader(data, *sec[S_BUFFERS])
    buffers = []
    for _ in range(r.count()):
        name = r.string()
        access = r.code(ACCESS)
        dtype = r.code(DTYPES)
        binding = r.uleb(0xFFFFFFFF)
        count = r.uleb(0xFFFFFFFF)
        buffers.append(BufferDecl(name, None if binding == 0 else binding - 1, access, dtype, count))  # type: ignore[arg-type]
    r = _Reader(data, *sec[S_BODY])
    functions: list[Function] = []
    try:
        body = _rnodes(r, 0)
        if r.left():
            raise WireError(f"{r.left()} trailing bytes after the statement tree.")
        if S_FUNCTIONS in sec:
            r = _Reader(data, *sec[S_FUNCTIONS])
            for _ in range(r.count()):
                name = r.string()
                params = tuple((r.string(), r.code(DTYPES)) for _ in range(r.count()))
                fbody = _rnodes(r, 0)
                has = r.byte()
                if has > 1:
                    raise WireError(f"bad function result flag {has} at byte {r.pos}.")
                functions.append(Function(name, params, fbody, _rexpr(r, 0) if has else None))  # type: ignore[arg-type]
            if r.left():
                raise WireError(f"{r.left()} trailing bytes after the functions.")
    except WireError:
        raise
    except VyreError as exc:  # a constructor refused a node (e.g. nesting over MAX_DEPTH)
        raise WireError(f"the encoded program is not buildable: {exc.message}") from None
    return Program(tuple(buffers), wg, body, tuple(functions))
