"""SHA-256 (FIPS 180-4) of many messages of any length, written as one would write it in C:
the raw message bytes as a u8 input, the padding done on the device, the message schedule a
64-word local array, the round helpers and the byte fetch as functions, and a ``while_`` loop
over each message's blocks. One message per invocation. Checked against hashlib.

Inputs: ``data`` (u8, every message back to back), ``offsets`` and ``lengths`` (u32, one per
message). Output: ``digests`` (u32, 8 state words per message, as ``hashlib`` gives them
big-endian).
"""

from __future__ import annotations

import hashlib

import numpy as np

from vyre.ir import BufferDecl, DataType, Expr, Function, Node, Program

from .sha256 import H0, K

U, U64 = DataType.U32, DataType.U64
v = Expr.var
MAX_BLOCKS = 1 << 20   # the while loop's cap: messages up to 64 MiB


def _functions() -> list[Function]:
    x, y, z = v("x"), v("y"), v("z")
    p = [("x", U)]
    return [
        Function.define("big_s0", p, result=x.rotate_right(2) ^ x.rotate_right(13) ^ x.rotate_right(22)),
        Function.define("big_s1", p, result=x.rotate_right(6) ^ x.rotate_right(11) ^ x.rotate_right(25)),
        Function.define("small_s0", p, result=x.rotate_right(7) ^ x.rotate_right(18) ^ (x >> 3)),
        Function.define("small_s1", p, result=x.rotate_right(17) ^ x.rotate_right(19) ^ (x >> 10)),
        Function.define("ch", [("x", U), ("y", U), ("z", U)], result=(x & y) ^ (~x & z)),
        Function.define("maj", [("x", U), ("y", U), ("z", U)], result=(x & y) ^ (x & z) ^ (y & z)),
        # byte p of the padded message: the data, 0x80, zeros, then the bit length (big-endian u64)
        Function.define("padded_byte", [("off", U), ("len", U), ("total", U), ("p", U)], [
            Node.let_bind("bits", Expr.cast(U64, v("len")) << 3),
            Node.let_bind("tail", v("p") - (v("total") - 8)),
            Node.let_bind("b", Expr.select(
                v("p").lt(v("len")), Expr.load("data", v("off") + v("p")),
                Expr.select(v("p").eq(v("len")), 0x80,
                            Expr.select(v("p").ge(v("total") - 8),
                                        Expr.cast(U, (v("bits") >> ((7 - v("tail")) * 8)) & 0xFF), 0)))),
        ], result=v("b")),
        # big-endian word i of block blk
        Function.define("word", [("off", U), ("len", U), ("total", U), ("q", U)], [
            Node.let_bind("w", 0),
            Node.loop("k", 0, 4, [
                Node.assign("w", (v("w") << 8) | Expr.call("padded_byte", v("off"), v("len"),
                                                            v("total"), v("q") + v("k"))),
            ]),
        ], result=v("w")),
    ]


def sha256_bytes() -> Program:
    """``digests[8*m : 8*m+8]`` = SHA-256 of ``data[offsets[m] : offsets[m]+lengths[m]]``."""
    m = Expr.gid_x()
    names = "abcdefgh"
    a, b, c, d, e, f, g, h = (v(n) for n in names)
    call = Expr.call
    body = [
        Node.if_(m.ge(Expr.buf_len("lengths")), [Node.return_()]),
        Node.let_bind("off", Expr.load("offsets", m)),
        Node.let_bind("len", Expr.load("lengths", m)),
        Node.let_bind("nblocks", (v("len") + 9 + 63) // 64),
        Node.let_bind("total", v("nblocks") * 64),
        *[Node.let_bind(f"h{i}", Expr.u32(x)) for i, x in enumerate(H0)],
        Node.let_bind("blk", 0),
        Node.while_(v("blk").lt(v("nblocks")), [
            Node.loop("t", 0, 16, [
                Node.store("W", v("t"), call("word", v("off"), v("len"), v("total"),
                                             v("blk") * 64 + v("t") * 4)),
            ]),
            Node.loop("t", 16, 64, [
                Node.store("W", v("t"), Expr.load("W", v("t") - 16) + call("small_s0", Expr.load("W", v("t") - 15))
                           + Expr.load("W", v("t") - 7) + call("small_s1", Expr.load("W", v("t") - 2))),
            ]),
            *[Node.let_bind(n, v(f"h{i}")) for i, n in enumerate(names)],
            Node.loop("t", 0, 64, [
                Node.let_bind("t1", h + call("big_s1", e) + call("ch", e, f, g) + Expr.load("K", v("t"))
                              + Expr.load("W", v("t"))),
                Node.let_bind("t2", call("big_s0", a) + call("maj", a, b, c)),
                Node.assign("h", g), Node.assign("g", f), Node.assign("f", e),
                Node.assign("e", d + v("t1")),
                Node.assign("d", c), Node.assign("c", b), Node.assign("b", a),
                Node.assign("a", v("t1") + v("t2")),
            ]),
            *[Node.assign(f"h{i}", v(f"h{i}") + v(n)) for i, n in enumerate(names)],
            Node.assign("blk", v("blk") + 1),
        ], max_iterations=MAX_BLOCKS),
        *[Node.store("digests", m * 8 + i, v(f"h{i}")) for i in range(8)],
    ]
    buffers = [BufferDecl.read("data", 0, DataType.U8), BufferDecl.read("offsets", 1, U),
               BufferDecl.read("lengths", 2, U), BufferDecl.read("K", 3, U, 64),
               BufferDecl.output("digests", 4, U), BufferDecl.local("W", 64, U)]
    return Program.wrapped(buffers, 64, body, _functions())


def sha256_bytes_inputs(messages: list[bytes]) -> list[np.ndarray]:
    """The inputs for ``messages``: the bytes back to back, offsets, lengths, round constants."""
    lengths = np.array([len(x) for x in messages], dtype=np.uint32)
    offsets = np.zeros(len(messages), dtype=np.uint32)
    if len(messages) > 1:
        offsets[1:] = np.cumsum(lengths[:-1], dtype=np.uint64).astype(np.uint32)
    data = np.frombuffer(b"".join(messages) or b"\0", dtype=np.uint8)
    return [data, offsets, lengths, np.array(K, dtype=np.uint32)]


def sha256_bytes_config(messages: int):
    from vyre.driver import DispatchConfig

    return DispatchConfig(dispatch_elements=8 * messages, dispatch_grid=(messages, 1, 1))


def sha256_bytes_expected(messages: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(hashlib.sha256(x).digest() for x in messages), ">u4").astype(np.uint32)
