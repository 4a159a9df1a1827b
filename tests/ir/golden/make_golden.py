"""Regenerate golden_wire.json.xz: the wire bytes (exact and canonical) and fingerprints of
every conformance-corpus program and of 400 random programs (seeds 0..399).

Run only when the wire format changes on purpose:
``python tests/ir/golden/make_golden.py`` (``--append``: only add the corpus entries the file
lacks, as for matmul_acc's). The golden test decodes the stored bytes, so
later changes to the generator do not invalidate the file.
"""

from __future__ import annotations

import base64
import json
import lzma
from pathlib import Path

from vyre.conform.corpus import corpus
from vyre.conform.generator import random_program
from vyre.ir import wire
from vyre.ir.fingerprint import fingerprint, identity

PATH = Path(__file__).with_name("golden_wire.json.xz")
SEEDS = range(400)


def record(name: str, program) -> dict:
    return {"name": name,
            "wire": base64.b64encode(wire.encode(program)).decode(),
            "canonical": base64.b64encode(wire.encode(program, canonical=True)).decode(),
            "fingerprint": fingerprint(program).hex(),
            "identity": identity(program).hex()}


def main(append: bool = False) -> None:
    """``append`` (``--append``): keep every stored row and add the corpus entries the file
    lacks (a new IR kind's entries), so the bytes pinned before stay pinned."""
    if append:
        rows = json.loads(lzma.decompress(PATH.read_bytes()))
        have = {r["name"] for r in rows}
        rows += [record(f"corpus:{e.name}", e.program) for e in corpus() if f"corpus:{e.name}" not in have]
        PATH.write_bytes(lzma.compress(json.dumps(rows, indent=0).encode(), preset=9))
        print(f"{len(rows)} programs, {PATH.stat().st_size} bytes")
        return
    rows = [record(f"corpus:{e.name}", e.program) for e in corpus()]
    rows += [record(f"random:{s}", random_program(s)[0]) for s in SEEDS]
    PATH.write_bytes(lzma.compress(json.dumps(rows, indent=0).encode(), preset=9))
    print(f"{len(rows)} programs, {PATH.stat().st_size} bytes")


if __name__ == "__main__":
    import sys

    main(append="--append" in sys.argv[1:])
