"""IR passes on the SHA-256 examples (vyre.examples.sha256: ~700 unrolled statements;
sha256_bytes: the same with functions): build, validate, fingerprint (canonical form + wire
encoding + blake3), wire encode and decode, inline. Minimum CPU milliseconds over repeats,
each on freshly built programs (validation results and fingerprints are cached per Program).
Alongside: hashing the wire bytes with hashlib.sha256, the floor any fingerprint pays.
Compare two checkouts by running this once with each on the path (`PYTHONPATH=src`)."""

from __future__ import annotations

import hashlib
import time

from vyre.examples.sha256 import sha256_blocks
from vyre.examples.sha256_bytes import sha256_bytes
from vyre.ir import fingerprint, validate, wire
from vyre.ir.canonical import canonicalize
from vyre.ir.inline import inline

from _common import args, emit


def best_ms(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best * 1000


def main() -> None:
    a_ = args(__doc__)
    reps = 5 if a_.quick else 20
    build = lambda: (sha256_blocks(), sha256_bytes())  # noqa: E731
    a, b = build()
    data = wire.encode(a)
    res = {
        "build_ms": best_ms(build, reps),
        "build_validate_ms": best_ms(lambda: [validate(p) for p in build()], reps),
        "build_fingerprint_ms": best_ms(lambda: [fingerprint(p) for p in build()], reps),
        "canonicalize_ms": best_ms(lambda: (canonicalize(a), canonicalize(b)), reps),
        "wire_encode_ms": best_ms(lambda: (wire.encode(a), wire.encode(b)), reps),
        "wire_decode_ms": best_ms(lambda: wire.decode(data), reps),
        "inline_ms": best_ms(lambda: inline(b), reps),
        "hashlib_sha256_of_wire_ms": best_ms(lambda: hashlib.sha256(data).digest(), reps),
        "wire_bytes": len(data),
    }
    emit("ir_passes", res, a_.json)


if __name__ == "__main__":
    main()
