"""Golden wire bytes: the encodings and fingerprints of the conformance corpus and of 400
random programs, pinned in tests/ir/golden/golden_wire.json.xz (made by make_golden.py from
the code before the IR kinds moved into one list).

Decoding each stored blob and encoding it again must give the same bytes, the same
canonical bytes and the same fingerprint; the corpus, built by today's code, must encode to
the stored bytes."""

from __future__ import annotations

import base64
import json
import lzma
from pathlib import Path

import blake3
import pytest

from vyre.conform.corpus import corpus
from vyre.ir import wire
from vyre.ir.fingerprint import fingerprint, identity

ROWS = json.loads(lzma.decompress((Path(__file__).parent / "golden" / "golden_wire.json.xz").read_bytes()))


def _b(s: str) -> bytes:
    return base64.b64decode(s)


def test_golden_file_covers_corpus_and_400_random_programs() -> None:
    names = [r["name"] for r in ROWS]
    assert len(set(names)) == len(names)
    assert sum(n.startswith("random:") for n in names) == 400
    assert {f"corpus:{e.name}" for e in corpus()} <= set(names)


@pytest.mark.parametrize("chunk", range(4))
def test_decode_then_encode_gives_the_stored_bytes_and_fingerprints(chunk: int) -> None:
    for row in ROWS[chunk::4]:
        exact, canon = _b(row["wire"]), _b(row["canonical"])
        p = wire.decode(exact)
        assert wire.encode(p) == exact, row["name"]
        assert wire.encode(p, canonical=True) == canon, row["name"]
        assert fingerprint(p).hex() == row["fingerprint"], row["name"]
        assert identity(p).hex() == row["identity"], row["name"]
        # the fingerprint is blake3 of the canonical bytes, independent of vyre's cache
        assert blake3.blake3(canon).hexdigest() == row["fingerprint"], row["name"]
        # canonical bytes decode to a program whose canonical form is itself
        assert wire.encode(wire.decode(canon), canonical=True) == canon, row["name"]


def test_corpus_built_today_encodes_to_the_stored_bytes() -> None:
    stored = {r["name"]: r for r in ROWS}
    for e in corpus():
        row = stored[f"corpus:{e.name}"]
        assert wire.encode(e.program) == _b(row["wire"]), e.name
        assert fingerprint(e.program).hex() == row["fingerprint"], e.name
