"""Multi-pattern literal search (`vyre.examples.literal_search`) through speculative dispatch:
the fused program and the two-stage pair find exactly what a Python ``bytes.find`` loop finds,
in the same order, on every backend, and the fused program's counters are the prefilter's
definition (computed here with Python ints). Small buffers: the benchmark has the big ones."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import get_backend
from vyre.driver import (
    AdaptiveSpeculator,
    BackendCapability,
    DispatchConfig,
    InvalidInput,
    SpeculationMode,
    acquire,
)
from vyre.driver.registry import release
from vyre.driver.speculate import DEFAULT_THRESHOLD_PCT, threshold_pct
from vyre.examples import literal_search as L

ROOT = Path(__file__).resolve().parent.parent
MODES = [pytest.param(SpeculationMode.FORCE, id="fused"), pytest.param(SpeculationMode.DISABLE, id="two-stage")]


def _adversarial() -> tuple[bytes, list[bytes]]:
    """6001 bytes of ACGT (not whole words, not whole tiles) with planted oddities."""
    rng = np.random.default_rng(27)
    hay = bytearray(rng.choice(np.frombuffer(b"ACGT", np.uint8), 6001))
    hay[0:10] = b"ACACACACAC"                       # overlapping occurrences at the very start
    hay[3000:3008] = b"\xff\xfe\x80\x00\x01\x7f\xff\xff"   # high bytes and a zero
    hay[-4:] = b"GATC"
    hay = bytes(hay)
    patterns = [
        b"ACACACAC",                                # at 0 and 2 (overlapping)
        hay[100:108], hay[100:132],                 # one pattern the prefix of another
        hay[100:108],                               # a duplicate: both indices reported
        b"\xff\xfe\x80\x00\x01\x7f\xff\xff",
        hay[-12:],                                  # ends exactly at the end
        b"GATC\0\0\0\0",                            # would match in the word padding if n were ignored
        hay[-6:] + b"AC",                           # runs past the end
        b"TTTTTTTTTTTTTTTTTTTT",                    # absent
        hay[2047:2047 + 17],                        # crosses a workgroup boundary (2048 positions each)
        bytes(hay[5000:5004]),                      # the shortest allowed: 4 bytes
    ]
    patterns += [bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), k)) for k in (8, 8, 9, 10, 12)]
    return hay, patterns


def _tile_passes(hay: bytes, patterns: list[bytes]) -> int:
    """Tiles whose prefilter passes, by the definition: some 4-byte window starting in the tile
    (and inside the haystack) hashes to a bit that some pattern's first 4 bytes set."""
    bits = {L.window_hash(int.from_bytes(p[:4], "little")) for p in patterns}
    passing = {i // L.TILE for i in range(len(hay) - 3) if L.window_hash(int.from_bytes(hay[i:i + 4], "little")) in bits}
    return len(passing)


HAY, PATTERNS = _adversarial()
EXPECTED = L.expected_matches(HAY, PATTERNS)


def test_the_python_answer_has_the_planted_cases():
    found = {tuple(x) for x in EXPECTED.tolist()}
    assert {(0, 0), (2, 0), (100, 1), (100, 2), (100, 3), (3000, 4), (len(HAY) - 12, 5)} <= found
    assert not any(j in (6, 7, 8) for _, j in found)
    assert EXPECTED.shape[0] > 8


@pytest.mark.parametrize("mode", MODES)
def test_both_paths_find_what_bytes_find_finds(backend, mode):
    assert backend.supports_speculation() and "speculation" in BackendCapability.of(backend).features
    s = L.LiteralSearch(PATTERNS)
    got = s.search(backend, HAY, DispatchConfig(speculation=mode))
    assert got.used_speculative_path is (mode is SpeculationMode.FORCE)
    assert got.matches.dtype == np.uint32 and got.matches.tobytes() == EXPECTED.tobytes()
    if mode is SpeculationMode.FORCE:
        tiles = -(-len(HAY) // L.TILE)
        assert got.report.committed_tiles == _tile_passes(HAY, PATTERNS)
        assert got.report.attempted_tiles == tiles
        assert s.speculator.samples == 1
    else:
        assert got.report is None and s.speculator.samples == 0


SIZES = [0, 1, 3, 4, 5, 7, 15, 16, 17, 31, 33, 255, 2047, 2048, 2049]


def test_every_size_matches_bytes_find(backend):
    """Sizes 4..2048 share one program (one workgroup); 2049 needs a second workgroup."""
    base = HAY[:2049]
    s = L.LiteralSearch([b"ACGT", b"ACAC", b"GATTACA!", base[1:9], base[2040:2049], base[2045:2049]])
    for n in SIZES:
        for mode in ("force", "disable"):
            got = s.search(backend, base[:n], DispatchConfig(speculation=mode))
            assert got.matches.tobytes() == L.expected_matches(base[:n], s.patterns.patterns).tobytes(), (n, mode)


@pytest.mark.parametrize("backend_id", ["reference", "opencl"])
@pytest.mark.parametrize("mode", MODES)
def test_full_workgroups_spill_and_nothing_is_dropped(backend_id, mode):
    """A run of A's in one workgroup (every position there matches twice) overflows its 4 slots
    while the other workgroups fit: only the full one is dispatched again, and the records
    come back complete and in order."""
    b = get_backend(backend_id)
    hay = HAY[:2048] + b"A" * 2048 + HAY[2048:4100]
    pats = [b"AAAAAAAA", b"AAAAAAAAAAAA", HAY[100:108], HAY[4000:4009]]
    got = L.LiteralSearch(pats, capacity=4).search(b, hay, DispatchConfig(speculation=mode))
    assert got.dispatches == 2
    assert got.matches.tobytes() == L.expected_matches(hay, pats).tobytes()


def test_capacity_is_checked():
    for bad in (0, -1, 1 << 17, 2.0, True):
        with pytest.raises(InvalidInput, match="Fix:"):
            L.LiteralSearch([b"abcd"], capacity=bad)


def test_auto_falls_back_on_a_low_commit_rate_and_stays_on_a_high_one(opencl, reference_backend):
    """2048-byte haystacks: one workgroup. The device's own threshold: 80 on an OpenCL CPU
    device (PoCL, where the fused path pays only at high rates), the seed's 15 elsewhere."""
    import pyopencl as cl

    from vyre.drivers.opencl.backend import CPU_SPECULATION_PCT

    cpu = bool(opencl.device.rt.device.type & cl.device_type.CPU)
    assert threshold_pct(opencl) == (CPU_SPECULATION_PCT if cpu else DEFAULT_THRESHOLD_PCT)
    assert threshold_pct(reference_backend) == DEFAULT_THRESHOLD_PCT
    rng = np.random.default_rng(5)
    low_hay = bytes(rng.integers(0, 256, 2048, dtype=np.uint8))
    low = L.LiteralSearch([b"\x00\x01\x02\x03zzzz"])       # one prefix: ~0.2 % of tiles pass
    paths = [low.search(opencl, low_hay).used_speculative_path for _ in range(10)]
    assert False in paths, paths
    first_fallback = paths.index(False) + 1                # dispatches count from 1
    assert first_fallback <= 8 and not any(paths[first_fallback - 1:]), paths
    dna = bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), 2048))
    high = L.LiteralSearch([dna[i:i + 12] for i in range(0, 640, 10)])   # 64 live prefixes: most tiles pass
    runs = [high.search(opencl, dna) for _ in range(10)]
    assert all(r.used_speculative_path for r in runs) and runs[0].report.commit_rate_pct > 90
    assert runs[-1].matches.tobytes() == L.expected_matches(dna, high.patterns.patterns).tobytes()


def test_auto_keeps_to_the_two_stage_pair_where_speculation_never_pays(opencl):
    """A device whose record says the fused path never pays (`speculation_threshold_pct`
    None): AUTO takes the two-stage pair from the first dispatch even at a high commit rate,
    and FORCE still runs the fused program; both give bytes.find's matches."""
    from dataclasses import replace

    class Never:   # the OpenCL backend, its record saying "never"
        caps = replace(opencl.caps, speculation_threshold_pct=None)

        def __getattr__(self, name):
            return getattr(opencl, name)

    never = Never()
    assert threshold_pct(never) is None
    rng = np.random.default_rng(5)
    dna = bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), 2048))
    search = L.LiteralSearch([dna[i:i + 12] for i in range(0, 640, 10)])
    want = L.expected_matches(dna, search.patterns.patterns).tobytes()
    auto = [search.search(never, dna) for _ in range(3)]
    assert not any(r.used_speculative_path for r in auto) and search.speculator.samples == 0
    forced = search.search(never, dna, DispatchConfig(speculation=SpeculationMode.FORCE))
    assert forced.used_speculative_path and forced.report.commit_rate_pct > 90
    assert auto[-1].matches.tobytes() == want and forced.matches.tobytes() == want


def test_a_shared_speculator_decides_across_searches(reference_backend):
    spec = AdaptiveSpeculator(50)
    a = L.LiteralSearch([b"\x00\x01\x02\x03zzzz"], speculator=spec)
    for _ in range(3):
        a.search(reference_backend, bytes(range(256)) * 8)
    assert spec.samples >= 1 and not spec.should_speculate()


@pytest.fixture(scope="module")
def dask_backend():
    pytest.importorskip("distributed")
    os.environ.setdefault("VYRE_DASK_WORKERS", "2")
    # release, not acquire alone: a dask backend another module shut down is still the
    # registry's instance (it has no public ``closed``), and acquire would hand it back
    release("dask")
    b = acquire("dask")
    yield b
    release("dask")


@pytest.mark.parametrize("mode", MODES)
def test_dask_finds_what_bytes_find_finds(dask_backend, mode):
    assert dask_backend.supports_speculation()
    got = L.LiteralSearch(PATTERNS).search(dask_backend, HAY, DispatchConfig(speculation=mode))
    assert got.matches.tobytes() == EXPECTED.tobytes()
    if mode is SpeculationMode.FORCE:
        assert got.report.committed_tiles == _tile_passes(HAY, PATTERNS)


def test_packed_words_with_a_byte_count_are_the_same_haystack(reference_backend):
    words = L.pack_bytes(HAY)
    got = L.LiteralSearch(PATTERNS).search(reference_backend, words, nbytes=len(HAY))
    assert got.matches.tobytes() == EXPECTED.tobytes()
    arr = L.LiteralSearch(PATTERNS).search(reference_backend, np.frombuffer(HAY, np.uint8))
    assert arr.matches.tobytes() == EXPECTED.tobytes()


@pytest.mark.parametrize("patterns, reason", [
    ([], "input_count"), ([b"abcd"] * (L.MAX_PATTERNS + 1), "input_count"), (b"abcdefgh", "input_count"),
    ([b"abc"], "input_size"), ([b"x" * (L.MAX_PATTERN_LEN + 1)], "input_size"), (["abcd"], "input_type"),
    ([b"abcd", None], "input_type"),
])
def test_bad_patterns_are_refused_with_a_fix(patterns, reason):
    with pytest.raises(InvalidInput, match="Fix:") as err:
        L.LiteralSearch(patterns)
    assert err.value.reason == reason and err.value.code == 1006


@pytest.mark.parametrize("haystack, nbytes, reason", [
    (b"abcdefgh", 7, "input_size"), (np.zeros(2, np.uint32), 9, "input_size"),
    (np.zeros(2, np.uint32), -1, "input_size"), ([1, 2, 3], None, "input_type"),
    (np.zeros(3, np.uint16), None, "input_type"),
])
def test_bad_haystacks_are_refused_with_a_fix(reference_backend, haystack, nbytes, reason):
    with pytest.raises(InvalidInput, match="Fix:") as err:
        L.LiteralSearch([b"abcd"]).search(reference_backend, haystack, nbytes=nbytes)
    assert err.value.reason == reason


DOC_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "speculation.md").read_text(), re.S)


@pytest.mark.parametrize("i", range(len(DOC_BLOCKS)))
def test_every_python_block_of_the_speculation_doc_runs(i, monkeypatch):
    monkeypatch.delenv("VYRE_BACKEND", raising=False)
    exec(compile(DOC_BLOCKS[i], f"<docs/speculation.md block {i}>", "exec"), {"__name__": f"spec_doc_{i}"})


def test_the_programs_compile_to_sm90_cubins_with_nvrtc():
    """CI has no GPU: NVRTC still compiles the four programs the cuda backend would run."""
    try:
        from vyre.drivers.cuda import compiler
        from vyre.drivers.cuda.codegen import generate

        compiler.nvrtc_version()
    except Exception as err:  # BackendUnavailable, or the cuda package missing
        pytest.skip(f"NVRTC unavailable: {err}")
    for program in (L.fused_program(1 << 20), L.prefilter_program(1 << 20), L.confirm_program(), L.spill_program()):
        assert compiler.compile_cubin(generate(program)[1], "sm_90")[:4] == b"\x7fELF"


@pytest.mark.parametrize("ntiles", [0, 1, 31, 32, 33, 1000, 4101])
@pytest.mark.parametrize("share", [0.0, 0.01, 0.5, 1.0])
def test_compaction_gives_the_set_bits_in_order(ntiles, share):
    bits = np.random.default_rng(ntiles).random(ntiles) < share
    packed = np.packbits(np.concatenate([bits, np.zeros(-ntiles % 32, bool)]), bitorder="little").tobytes()
    got = L.passing_tiles(packed, ntiles)
    assert got.dtype == np.uint32 and got.tolist() == np.flatnonzero(bits).tolist()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_cuda_searches_a_haystack_left_on_the_device(cuda, mode):
    """The benchmark's GPU setting: the packed haystack is a device array, read in place."""
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program

    gx = Expr.gid_x()
    copy = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                           [Node.store("o", gx, Expr.load("a", gx))])
    on_device = cuda.dispatch_device(copy, [L.pack_bytes(HAY)])[0]
    got = L.LiteralSearch(PATTERNS).search(cuda, on_device, DispatchConfig(speculation=mode), nbytes=len(HAY))
    assert got.used_speculative_path is (mode is SpeculationMode.FORCE)
    assert got.matches.tobytes() == EXPECTED.tobytes()


def test_each_program_gives_the_reference_bytes(backend):
    """Not just the same matches: every output word (counts, slots, counter tail, bitmask,
    spilled records) is the reference interpreter's (docs/semantics.md)."""
    from helpers import run_checked

    hay = HAY[:3000] + b"A" * 300
    pats = L.Patterns.of([*PATTERNS[:6], b"AAAAAAAA"])
    ins = pats.inputs(L.pack_bytes(hay), len(hay))
    n = len(hay)
    fused = run_checked(backend, L.fused_program(n, 4), ins, L.search_config(n))[0]
    bits = run_checked(backend, L.prefilter_program(n), ins, L.search_config(n))[0]
    cand = L.passing_tiles(bits, -(-n // L.TILE))
    run_checked(backend, L.confirm_program(4), [*ins, cand], L.confirm_config(cand.size, 4))
    counts = np.frombuffer(fused, "<u4")[: L._nwg(n)]
    over = np.flatnonzero(counts > 4)
    assert over.size and pats.patterns[-1] == b"AAAAAAAA"
    tiles = (over[:, None] * L.WG + np.arange(L.WG)).astype(np.uint32).ravel()
    bases = (np.cumsum(counts[over]) - counts[over]).astype(np.uint32)
    cfg = DispatchConfig(grid_override=(over.size, 1, 1), dispatch_elements=2 * int(counts[over].sum()))
    run_checked(backend, L.spill_program(), [*ins, tiles, bases], cfg)
