"""Coverage-guided fuzz targets (atheris) for everything that reads untrusted bytes: the wire
decoder, the files the CLI reads (repro files, certificates, disk-cache entries, tuner and
routing tables) and the kernel frontend (Python kernel source text). Run one as
``python atheris_targets.py TARGET -max_total_time=N``.

Invariant: a target either accepts the bytes or raises `VyreError` (with a Fix); any other
exception, a crash or a hang is a finding. The kernel frontend, given any Python module text
that defines functions, builds each into a valid `Program` or raises `KernelError`.
"""

from __future__ import annotations
import __future__

import json
import linecache
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["vyre"]):
    import vyre.kernel as vk
    from vyre.conform import load_repro, verify_certificate
    from vyre.driver.pipeline import disk as D
    from vyre.driver.routing import Router
    from vyre.driver.tuner import TuningCache
    from vyre.ir import Program, VyreError, validate, wire

SCRATCH = Path(tempfile.mkdtemp(prefix="vyre-fuzz-"))
os.environ.setdefault("VYRE_KEY_DIR", str(SCRATCH / "keys"))
SEED_PROGRAM = None


def _seed() -> bytes:
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program

    gx = Expr.gid_x()
    p = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                        [Node.let_bind("x", Expr.load("a", gx)),
                         Node.if_(Expr.var("x").lt(5), [Node.store("o", gx, Expr.var("x") * 3)])])
    return wire.encode(p)


def wire_decode(data: bytes) -> None:
    try:
        p = wire.decode(data)
    except VyreError:
        return
    wire.encode(p)  # whatever decodes must encode again


def wire_mutated(data: bytes) -> None:
    """Mutations of a valid program, checksum fixed up so the decoder's structure is reached."""
    import struct

    import blake3

    base = bytearray(SEED)
    if len(data) < 2:
        return
    for i in range(0, len(data) - 1, 2):
        pos = wire.HEADER + data[i] % (len(base) - wire.HEADER)
        base[pos] = data[i + 1]
    body = bytes(base[wire.HEADER:])
    blob = base[:4] + struct.pack("<HH", wire.VERSION, 0) + blake3.blake3(body).digest() + body
    wire_decode(bytes(blob))


def repro_file(data: bytes) -> None:
    path = SCRATCH / "repro.json"
    path.write_bytes(data)
    try:
        load_repro(path)
    except VyreError:
        pass


def certificate(data: bytes) -> None:
    try:
        cert = json.loads(data)
    except (ValueError, RecursionError):
        return
    if isinstance(cert, dict):
        ok, why = verify_certificate(cert)
        assert isinstance(ok, bool) and isinstance(why, str)


def cache_entry(data: bytes) -> None:
    cache = D.DiskCache("fuzz", root=SCRATCH)
    path = cache._path(b"key")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    assert cache.get(b"key") is None or isinstance(cache.get(b"key"), bytes)


def tables(data: bytes) -> None:
    path = SCRATCH / "table.json"
    path.write_bytes(data)
    Router(path)._load([])
    cache = TuningCache(b"\0" * 32, root=SCRATCH)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_bytes(data)
    cache._load()


# ---- the kernel frontend ---------------------------------------------------------------------
KERNEL_FILE = "<vyre-fuzz-kernel>"   # one linecache entry, rewritten for each input
KERNEL_SEEDS = (
    "def k(a: In[u32], b: In[f32], o: Out[u32], n: Scalar[u32]):\n"
    "    i = gid()\n"
    "    x = a[i] * 3 + n\n"
    "    if x > 7 and i < n:\n"
    "        x = x ^ (x >> 2)\n"
    "    else:\n"
    "        x = u32(b[i] * 0.5)\n"
    "    for j in range(0, 4, 2):\n"
    "        x += a[j]\n"
    "    o[i] = x\n",
    "def k(a: In[i32], o: Out[i32], n: Scalar[i32]):\n"
    "    t = local(i32, 64)\n"
    "    t[lid()] = a[gid()]\n"
    "    barrier()\n"
    "    s = 0\n"
    "    while s < n:\n"
    "        s = s + t[0] % 7\n"
    "        if s == 5:\n"
    "            break\n"
    "    a2, b2 = s, -s\n"
    "    o[gid()] = max(a2, b2) // 2\n",
)
KERNEL_WORDS = (
    "a", "b", "o", "n", "i", "j", "x", "s", "t", "k", "gid()", "lid()", "wgid()", "u32", "i32", "f32", "f16",
    "u64", "i64", "u8", "bool_", "In", "Out", "InOut", "Scalar", "local", "barrier()", "range", "min", "max",
    "abs", "sqrt", "select", "atomic_add", "popcount", "if", "else", "elif", "for", "while", "in", "break",
    "continue", "return", "pass", "and", "or", "not", "is", "lambda", "def", "yield", "global", "del",
    "with", "assert", "None", "True", "0", "1", "-1", "2", "7", "64", "2**31", "2**64", "10**400", "1e300",
    "0.5", "'a'", "[]", "()", "[0]", "(1, 2)", ":", ",", ".", "=", "+=", "-", "+", "*", "/", "//", "%", "**",
    "&", "|", "^", "~", "<<", ">>", "<", "<=", "==", "!=", ">", "[", "]", "(", ")", "\n", "\n    ",
    "\n        ", " ",
)
_TOKEN = re.compile(r"\s+|\w+|\*\*|//|<<|>>|[<>=!+\-*/%&|^]=|.")
_FUTURE = __future__.annotations.compiler_flag   # annotations are read by the frontend, not by def
warnings.filterwarnings("ignore", category=SyntaxWarning)   # mutated literals ("1if", ...)


def _kernel_text(data: bytes) -> str:
    """Module text from ``data``: byte 0 picks a seed (even) or a raw body (odd). A seed's
    body tokens are then replaced, inserted or deleted, two bytes per edit; a raw body is the
    rest of the bytes as text under a valid header. The signature line stays as written: its
    annotations are Python the frontend evaluates (``In[2**64**2**64]`` would only time
    Python's own arithmetic)."""
    if not data:
        return KERNEL_SEEDS[0]
    if data[0] & 1:
        body = data[1:].decode("utf-8", errors="replace")
        return "def k(a: In[u32], o: Out[u32], n: Scalar[u32]):\n    i = gid()\n" + \
            "".join(f"    {line}\n" for line in body.splitlines()) + "    o[i] = a[i]\n"
    header, body = KERNEL_SEEDS[(data[0] >> 1) % len(KERNEL_SEEDS)].split("\n", 1)
    tokens = _TOKEN.findall(body)
    for pos in range(1, len(data) - 1, 2):
        if not tokens:
            break
        where, what = data[pos] % len(tokens), data[pos + 1]
        word = KERNEL_WORDS[(what >> 2) % len(KERNEL_WORDS)]
        if what & 3 == 0:
            del tokens[where]
        elif what & 3 == 1:
            tokens.insert(where, word)
        else:
            tokens[where] = word
    return header + "\n" + "".join(tokens)


def kernel_source(data: bytes) -> None:
    """Every function a kernel text defines builds into a valid Program or raises KernelError."""
    text = _kernel_text(data)
    try:
        code = compile(text, KERNEL_FILE, "exec", flags=_FUTURE, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return   # not Python: the frontend never sees it
    linecache.cache[KERNEL_FILE] = (len(text), None, text.splitlines(True), KERNEL_FILE)
    ns = {k: getattr(vk, k) for k in vk.__all__}
    try:
        exec(code, ns)   # only defines functions (annotations stay strings)
    except Exception:
        return   # Python itself refused the module (a default argument raised, ...)
    for fn in [v for v in ns.values() if getattr(v, "__code__", None) is not None
               and v.__code__.co_filename == KERNEL_FILE]:
        try:
            program = vk.kernel(fn).program
        except vk.KernelError as err:
            assert "Fix:" in str(err) and err.code in vk.CODES, err
            continue
        assert isinstance(program, Program) and validate(program) == [], text


TARGETS = {f.__name__: f for f in (wire_decode, wire_mutated, repro_file, certificate, cache_entry, tables,
                                   kernel_source)}
SEED = _seed()
_NAMES = list(TARGETS)


def every(data: bytes) -> None:
    """All targets in one coverage-guided process: the first byte picks the target."""
    if data:
        TARGETS[_NAMES[data[0] % len(_NAMES)]](data[1:])


TARGETS_AND_ALL = {**TARGETS, "all": every}

if __name__ == "__main__":
    atheris.Setup([sys.argv[0], *sys.argv[2:]], TARGETS_AND_ALL[sys.argv[1]])
    atheris.Fuzz()
