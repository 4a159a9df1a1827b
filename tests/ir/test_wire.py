"""Wire form and fingerprints: round trip, canonical invariances, and a decoder that never
raises anything but WireError on damaged or hostile bytes."""

from __future__ import annotations

import struct

import blake3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vyre.conform.generator import random_program
from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program, WireError, fingerprint, wire
from vyre.ir.wire import HEADER

seeds = st.integers(min_value=0, max_value=2**32 - 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds)
def test_decode_of_encode_is_identity(seed):
    p, _ = random_program(seed)
    assert wire.decode(wire.encode(p)) == p
    assert wire.decode(wire.encode(p, canonical=True)) == wire.decode(wire.encode(p, canonical=True))


def _swap_commutative(e):
    from vyre.ir import expr as E

    if isinstance(e, E.Bin):
        left, right = _swap_commutative(e.left), _swap_commutative(e.right)
        if e.op in (BinOp.ADD, BinOp.MUL, BinOp.BITXOR, BinOp.MIN, BinOp.EQ):
            left, right = right, left
        return E.Bin(e.op, left, right)
    return e


def test_construction_order_does_not_change_the_fingerprint():
    gx = Expr.gid_x()
    a, b = Expr.load("a", gx), Expr.load("b", gx)
    p1 = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32),
                          BufferDecl.output("o", 2, DataType.U32), BufferDecl.workgroup("w1", 4, DataType.U32),
                          BufferDecl.workgroup("w2", 4, DataType.U32)], 64,
                         [Node.store("o", gx, (a + b) * (a ^ b))])
    p2 = Program.wrapped([BufferDecl.workgroup("w2", 4, DataType.U32), BufferDecl.read("a", 0, DataType.U32),
                          BufferDecl.read("b", 1, DataType.U32), BufferDecl.workgroup("w1", 4, DataType.U32),
                          BufferDecl.output("o", 2, DataType.U32)], 64,
                         [Node.block([]), Node.block([Node.store("o", gx, (b ^ a) * (b + a)), Node.block([])])])
    assert p1 != p2
    assert fingerprint(p1) == fingerprint(p2)
    assert len(fingerprint(p1)) == 32


def test_declaration_order_of_bound_buffers_is_part_of_the_fingerprint():
    """Inputs feed buffers in declaration order: swapping two inputs' declarations changes
    the meaning, so it must change the fingerprint (it once shared a pipeline: issue 11)."""
    gx = Expr.gid_x()
    body = [Node.store("o", gx, Expr.load("a", gx) - Expr.load("b", gx))]
    ab = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32),
                          BufferDecl.output("o", 2, DataType.U32)], 64, body)
    ba = Program.wrapped([BufferDecl.read("b", 1, DataType.U32), BufferDecl.read("a", 0, DataType.U32),
                          BufferDecl.output("o", 2, DataType.U32)], 64, body)
    assert fingerprint(ab) != fingerprint(ba)


@settings(max_examples=60, deadline=None)
@given(seeds)
def test_commutative_operand_order_is_invisible_to_the_fingerprint(seed):
    p, _ = random_program(seed)
    swapped = Program(p.buffers, p.workgroup_size, tuple(
        Node.store(n.buffer, n.index, _swap_commutative(n.value)) if n.__class__.__name__ == "Store" else n
        for n in p.body), p.functions)
    assert fingerprint(swapped) == fingerprint(p)


def test_any_semantic_change_changes_the_fingerprint():
    gx = Expr.gid_x()
    base = [BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)]
    variants = [
        Program.wrapped(base, 64, [Node.store("o", gx, Expr.load("a", gx) - 1)]),
        Program.wrapped(base, 64, [Node.store("o", gx, 1 - Expr.load("a", gx))]),
        Program.wrapped(base, 32, [Node.store("o", gx, Expr.load("a", gx) - 1)]),
        Program.wrapped([base[0].with_count(4), base[1]], 64, [Node.store("o", gx, Expr.load("a", gx) - 1)]),
        Program.wrapped(base, 64, [Node.store("o", gx, Expr.load("a", gx) - 2)]),
    ]
    assert len({fingerprint(p) for p in variants}) == len(variants)


def _mutations(data: bytes, rnd):
    body = bytearray(data)
    yield bytes(body[: rnd.randrange(len(body))])              # truncation
    flipped = bytearray(body)
    i = rnd.randrange(len(flipped))
    flipped[i] ^= 1 << rnd.randrange(8)
    yield bytes(flipped)                                       # bit flip (checksum catches)
    resealed = bytearray(flipped)                              # bit flip with a valid checksum
    resealed[8:HEADER] = blake3.blake3(bytes(resealed[HEADER:])).digest()
    yield bytes(resealed)
    junk = bytes(rnd.randrange(256) for _ in range(rnd.randrange(64)))
    yield data[:HEADER] + junk
    yield b"VYRE" + struct.pack("<HH", 1, 0) + blake3.blake3(junk).digest() + junk


@settings(max_examples=200, deadline=2000)
@given(seeds, st.randoms(use_true_random=False))
def test_decoder_only_ever_raises_wire_error(seed, rnd):
    p, _ = random_program(seed)
    for bad in _mutations(wire.encode(p), rnd):
        try:
            wire.decode(bad)
        except WireError as err:
            assert "Fix:" in str(err)


def test_hostile_counts_and_depth_are_bounded():
    def sealed(body: bytes) -> bytes:
        return b"VYRE" + struct.pack("<HH", 1, 0) + blake3.blake3(body).digest() + body

    huge = bytes([3, 10]) + b"\xff\xff\xff\xff\x0f"  # a section claiming 4 GiB
    with pytest.raises(WireError):
        wire.decode(sealed(huge))
    deep = bytes([1, 3, 1, 1, 1, 2, 1, 0, 3]) + b"\x80\x80\x04" + (b"\x0a\x07\x00" * 100_000)
    with pytest.raises(WireError):
        wire.decode(sealed(deep))
    with pytest.raises(WireError):
        wire.decode(b"NOPE" + bytes(100))
    with pytest.raises(WireError):
        wire.decode(12345)  # type: ignore[arg-type]


def test_decoder_fuzz_stays_within_time_and_memory_bounds(tmp_path):
    """Mutated and truncated wire bytes under a 1 GiB address-space limit and a wall-clock
    limit: only WireError, never MemoryError, a crash or a hang."""
    import subprocess
    import sys

    code = (
        "import random, resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from vyre.conform.generator import random_program\n"
        "from vyre.ir import wire, WireError\n"
        "rnd = random.Random(5)\n"
        "n = 0\n"
        "for seed in range(60):\n"
        "    data = bytearray(wire.encode(random_program(seed)[0]))\n"
        "    for _ in range(60):\n"
        "        d = bytearray(data)\n"
        "        for _ in range(rnd.randint(1, 4)):\n"
        "            d[rnd.randrange(len(d))] = rnd.randrange(256)\n"
        "        cut = bytes(d[: rnd.randrange(1, len(d) + 1)])\n"
        "        for blob in (bytes(d), cut):\n"
        "            try:\n"
        "                wire.decode(blob)\n"
        "            except WireError:\n"
        "                n += 1\n"
        "print(n)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 3000
