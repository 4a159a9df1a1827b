"""SHA-256 (FIPS 180-4) of many one-block messages, one message per invocation, written with
the scalar IR alone: the message schedule is 64 locals and the 64 rounds are unrolled (about
700 statements). Checked against hashlib."""

from __future__ import annotations

import hashlib

import numpy as np

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

U = DataType.U32
K = [0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
     0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
     0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
     0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
     0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
     0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
     0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
     0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2]
H0 = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]


def sha256_blocks() -> Program:
    """``digests[8*m : 8*m+8]`` = SHA-256 state words of message ``m``, whose one padded
    64-byte block is ``blocks[16*m : 16*m+16]`` as big-endian u32 words (`pad_messages`)."""
    gid = Expr.gid_x()
    v = Expr.var
    body: list = []
    for t in range(16):
        body.append(Node.let_bind(f"w{t}", Expr.load("blocks", gid * 16 + t)))
    for t in range(16, 64):
        w15, w2 = v(f"w{t - 15}"), v(f"w{t - 2}")
        s0 = w15.rotate_right(7) ^ w15.rotate_right(18) ^ (w15 >> 3)
        s1 = w2.rotate_right(17) ^ w2.rotate_right(19) ^ (w2 >> 10)
        body.append(Node.let_bind(f"w{t}", v(f"w{t - 16}") + s0 + v(f"w{t - 7}") + s1))
    names = "abcdefgh"
    body += [Node.let_bind(n, Expr.u32(h)) for n, h in zip(names, H0)]
    body += [Node.let_bind("t1", Expr.u32(0)), Node.let_bind("t2", Expr.u32(0))]
    a, b, c, d, e, f, g, h = (v(n) for n in names)
    for t in range(64):
        s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25)
        ch = (e & f) ^ (~e & g)
        s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22)
        maj = (a & b) ^ (a & c) ^ (b & c)
        body += [Node.assign("t1", h + s1 + ch + K[t] + v(f"w{t}")),
                 Node.assign("t2", s0 + maj),
                 Node.assign("h", g), Node.assign("g", f), Node.assign("f", e),
                 Node.assign("e", d + v("t1")),
                 Node.assign("d", c), Node.assign("c", b), Node.assign("b", a),
                 Node.assign("a", v("t1") + v("t2"))]
    body += [Node.store("digests", gid * 8 + i, v(n) + H0[i]) for i, n in enumerate(names)]
    return Program.wrapped([BufferDecl.read("blocks", 0, U), BufferDecl.output("digests", 1, U)], 64, body)


def sha256_config(messages: int):
    """The dispatch for ``messages`` messages: one invocation each, 8 output words each."""
    from vyre.driver import DispatchConfig

    return DispatchConfig(dispatch_elements=8 * messages, dispatch_grid=(messages, 1, 1))


def pad_messages(messages: list[bytes]) -> np.ndarray:
    """One padded 64-byte block per message (each at most 55 bytes) as big-endian u32 words."""
    out = np.zeros((len(messages), 64), np.uint8)
    for i, m in enumerate(messages):
        if len(m) > 55:
            raise ValueError("one-block messages are at most 55 bytes")
        out[i, :len(m)] = np.frombuffer(m, np.uint8)
        out[i, len(m)] = 0x80
        out[i, 56:] = np.frombuffer((8 * len(m)).to_bytes(8, "big"), np.uint8)
    return out.view(">u4").astype(np.uint32).ravel()


def digests_expected(messages: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(hashlib.sha256(m).digest() for m in messages), ">u4").astype(np.uint32)


def random_messages(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 56, n)
    blob = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8).tobytes()
    out, pos = [], 0
    for length in lengths:
        out.append(blob[pos:pos + int(length)])
        pos += int(length)
    return out
