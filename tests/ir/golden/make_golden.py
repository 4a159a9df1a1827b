"""Regenerate golden_wire.json.xz: the wire bytes (exact and canonical) and fingerprints of
every conformance-corpus program and of 400 random programs (seeds 0..399).

Run only when the wire format changes on purpose:
``python tests/ir/golden/make_golden.py``. The golden test decodes the stored bytes, so
later changes to the generator do not invalidate the file. New corpus entries (the format
unchanged) are appended with ``--add-corpus``: every stored row stays as it is.
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


def add_corpus() -> None:
    rows = json.loads(lzma.decompress(PATH.read_bytes()))
    have = {r["name"] for r in rows}
    new = [record(f"corpus:{e.name}", e.program) for e in corpus() if f"corpus:{e.name}" not in have]
    PATH.write_bytes(lzma.compress(json.dumps(rows + new, indent=0).encode(), preset=9))
    print(f"{len(new)} corpus programs added, {len(rows) + len(new)} in all")


def main() -> None:
    import sys

    if "--add-corpus" in sys.argv:
        add_corpus()
        return
    rows = [record(f"corpus:{e.name}", e.program) for e in corpus()]
    rows += [record(f"random:{s}", random_program(s)[0]) for s in SEEDS]
    PATH.write_bytes(lzma.compress(json.dumps(rows, indent=0).encode(), preset=9))
    print(f"{len(rows)} programs, {PATH.stat().st_size} bytes")


if __name__ == "__main__":
    main()
