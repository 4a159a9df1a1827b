"""The IMMA block routines of vyre.drivers.cuda.imma, run on the host without a GPU: the
exact C++ of `imma.BLOCK` compiled with g++, each warp's 32 lanes as threads, and `vy_mma`
replaced by an emulation of ``mma.sync.m16n8k32`` that follows the fragment layout the issue
reports from the H100 probe (A register r: row g + 8(r&1), columns 4t..4t+3, +16 for r >= 2;
B register r: k = 4t..4t+3, +16 for r = 1, of column g; C/D element r: row g + 8(r>>1),
column 2t + (r&1)). Expected values: numpy int64 products reduced mod 2**32 (S37).

ldmatrix (the fragments of whole byte tiles) is emulated too: lane l gives the address of
row l&7 of matrix l>>3, register q of lane l receives bytes 4(l&3)..4(l&3)+3 of row l>>2 of
matrix q (PTX ISA, ldmatrix m8n8 .b16: element pair 2(l&3), 2(l&3)+1 of that row); each
address must be 16-byte aligned and inside the operand array.

This checks the tiling, the edges (shapes that are not multiples of the tile), the byte
planes of u32/i32 operands and the fragment addressing; the GPU tests
(tests/cuda/test_imma_gpu.py) check the real instruction with the same routines."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from vyre.drivers.cuda import imma

HARNESS_HEAD = r"""
#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
typedef unsigned int uint;
typedef unsigned char vy_u8;
struct uint2 { uint x, y; };
struct uint4 { uint x, y, z, w; };
#define __device__
#define __forceinline__ inline
static uint __byte_perm(uint x, uint y, uint s) {
    unsigned long long v = (unsigned long long)x | ((unsigned long long)y << 32);
    uint r = 0;
    for (int n = 0; n < 4; n++) r |= (uint)((v >> (8 * ((s >> (4 * n)) & 7))) & 255u) << (8 * n);
    return r;
}
struct Warp { std::barrier<>* bar; uint a[32][4]; uint b[32][2]; const vy_u8* rows[32]; };
static thread_local int tl_lane, tl_warp;
static Warp* g_warps;
static const vy_u8* g_span[2][2];   // [a, a + m*k) and [b, b + n*k) of the running case
static std::atomic<int> g_ldsm{0};
static int value(uint v, bool s) { return s ? (int)(signed char)(v & 255u) : (int)(v & 255u); }
// mma.sync.m16n8k32 for one warp: every lane publishes its fragments, then computes its own
// four D elements from the layout below
template <bool AS, bool BS>
static void vy_mma(uint* c, const uint* a, const uint* b) {
    Warp& w = g_warps[tl_warp];
    const int L = tl_lane;
    for (int r = 0; r < 4; r++) w.a[L][r] = a[r];
    for (int r = 0; r < 2; r++) w.b[L][r] = b[r];
    w.bar->arrive_and_wait();
    const int g = L >> 2, t = L & 3;
    for (int r = 0; r < 4; r++) {
        const int row = g + 8 * (r >> 1), col = 2 * t + (r & 1);
        uint sum = c[r];
        for (int k = 0; k < 32; k++) {
            const uint av = w.a[4 * (row & 7) + ((k & 15) >> 2)][(row >> 3) + 2 * (k >> 4)] >> (8 * (k & 3));
            const uint bv = w.b[4 * col + ((k & 15) >> 2)][k >> 4] >> (8 * (k & 3));
            sum += (uint)(value(av, AS) * value(bv, BS));
        }
        c[r] = sum;
    }
    w.bar->arrive_and_wait();
}
// ldmatrix.sync.aligned.m8n8.x4.shared.b16 for one warp: lane l gives the address of row l&7
// of matrix l>>3 (8 rows of 16 bytes, 16-byte aligned); register q of lane l receives bytes
// 4(l&3) .. 4(l&3)+3 of row l>>2 of matrix q, little-endian
static void vy_ldsm4(uint* r, const vy_u8* row) {
    Warp& w = g_warps[tl_warp];
    const int L = tl_lane;
    if (((unsigned long long)row) % 16 != 0) std::abort();
    bool inside = false;
    for (auto& s : g_span) inside = inside || (row >= s[0] && row + 16 <= s[1]);
    if (!inside) std::abort();
    g_ldsm++;
    w.rows[L] = row;
    w.bar->arrive_and_wait();
    for (int q = 0; q < 4; q++) {
        const vy_u8* src = w.rows[8 * q + (L >> 2)] + 4 * (L & 3);
        r[q] = (uint)src[0] | ((uint)src[1] << 8) | ((uint)src[2] << 16) | ((uint)src[3] << 24);
    }
    w.bar->arrive_and_wait();
}
// ldmatrix .x2: matrices 0 and 1, whose row addresses lanes 0-15 give (the other lanes' are
// not read); register q of lane l as in vy_ldsm4
static void vy_ldsm2(uint* r, const vy_u8* row) {
    Warp& w = g_warps[tl_warp];
    const int L = tl_lane;
    w.rows[L] = row;
    w.bar->arrive_and_wait();
    for (int q = 0; q < 2; q++) {
        const vy_u8* at = w.rows[8 * q + (L >> 2)];
        if (((unsigned long long)at) % 16 != 0) std::abort();
        bool inside = false;
        for (auto& s : g_span) inside = inside || (at >= s[0] && at + 16 <= s[1]);
        if (!inside) std::abort();
        const vy_u8* src = at + 4 * (L & 3);
        r[q] = (uint)src[0] | ((uint)src[1] << 8) | ((uint)src[2] << 16) | ((uint)src[3] << 24);
    }
    if (L == 0) g_ldsm++;
    w.bar->arrive_and_wait();
}
"""

HARNESS_RUN = r"""
template <typename E, typename F>
static void run(const char* dir, int id, int m, int n, int k, int T, F body) {
    char path[512];
    std::snprintf(path, sizeof path, "%s/in%d.bin", dir, id);
    FILE* f = std::fopen(path, "rb");
    alignas(16) static unsigned char mem[1 << 20];
    E* a = (E*)mem;
    E* b = (E*)(mem + ((m * k * sizeof(E) + 15) / 16) * 16);
    uint* d = (uint*)((unsigned char*)b + ((n * k * sizeof(E) + 15) / 16) * 16);
    if (std::fread(a, sizeof(E), m * k, f) != (size_t)(m * k) || std::fread(b, sizeof(E), n * k, f) != (size_t)(n * k)
        || std::fread(d, 4, m * n, f) != (size_t)(m * n)) std::abort();
    std::fclose(f);
    g_span[0][0] = (const vy_u8*)a; g_span[0][1] = (const vy_u8*)(a + m * k);
    g_span[1][0] = (const vy_u8*)b; g_span[1][1] = (const vy_u8*)(b + n * k);
    g_ldsm = 0;
    std::vector<Warp> warps(T / 32);
    std::vector<std::barrier<>*> bars;
    for (auto& w : warps) { w.bar = new std::barrier<>(32); bars.push_back(w.bar); }
    g_warps = warps.data();
    std::vector<std::thread> threads;
    for (int lin = 0; lin < T; lin++)
        threads.emplace_back([=] { tl_lane = lin & 31; tl_warp = lin >> 5; body(d, a, b, (uint)lin); });
    for (auto& th : threads) th.join();
    for (auto* bar : bars) delete bar;
    std::snprintf(path, sizeof path, "%s/out%d.bin", dir, id);
    f = std::fopen(path, "wb");
    std::fwrite(d, 4, m * n, f);
    const int ldsm = g_ldsm;
    std::fwrite(&ldsm, 4, 1, f);
    std::fclose(f);
}
"""

# (m, n, k, threads, a type, b type): tiles, edges in every dimension, idle warps, K % 4 != 0
CASES = [
    (16, 8, 32, 32, "i8", "i8"), (5, 7, 37, 64, "i8", "u8"), (64, 64, 128, 128, "u8", "i8"),
    (33, 17, 70, 96, "u8", "u8"), (48, 40, 96, 256, "i8", "i8"), (1, 1, 1, 32, "i8", "i8"),
    (17, 33, 4, 64, "i8", "u8"), (80, 24, 64, 64, "u8", "u8"),
    (16, 8, 32, 32, "u32", "u32"), (5, 7, 37, 64, "i32", "u32"), (33, 17, 70, 96, "u32", "i32"),
    (32, 32, 64, 128, "i32", "i32"), (20, 24, 8, 64, "u32", "u32"), (48, 40, 36, 128, "u32", "u32"),
    # vyre.lib.matmul's CUDA tiles (vyre.lib.matmul.tiles)
    (64, 64, 160, 128, "i8", "u8"), (64, 64, 32, 128, "u32", "u32"), (31, 9, 33, 32, "u8", "i8"),
    # whole tiles: fragments by ldmatrix (one warp, warp tiles over two warps, idle warps)
    (32, 16, 64, 32, "i8", "i8"), (96, 64, 256, 64, "u8", "u8"), (32, 32, 32, 256, "i8", "u8"),
    (64, 64, 256, 128, "u8", "i8"), (128, 64, 64, 256, "i8", "u8"),
    # k an odd multiple of 16: the last 16 by ldmatrix .x2 (vyre.lib.matmul's CUDA byte tile)
    (64, 64, 240, 128, "i8", "u8"), (32, 16, 48, 32, "i8", "i8"), (32, 32, 16, 64, "u8", "u8"),
    (64, 64, 176, 128, "u8", "i8"), (96, 32, 80, 64, "i8", "i8"),
    # the GPU tests' whole tiles (tests/cuda/test_imma_gpu.py WHOLE), words too
    (64, 64, 48, 128, "i8", "u8"), (64, 64, 48, 128, "i32", "u32"), (32, 32, 80, 64, "u32", "u32"),
]
# imma.WIDE_SHARED_ACCESS = False: 4-byte shared accesses (no ldmatrix, no 8-byte pairs)
NARROW = [(64, 64, 160, 128, "i8", "u8"), (32, 16, 64, 32, "u8", "u8"), (33, 17, 70, 96, "u8", "i8"),
          (64, 64, 32, 128, "u32", "u32"), (5, 7, 37, 64, "i32", "u32")]
# the resident form (accumulators in registers across a loop, `imma.resident`): the harness
# runs vy_res_get, two trips of vy_res8 / vy_res32 on the same a and b, and vy_res_put, so
# d + 2 a b^T comes out. vyre.lib.matmul's CUDA tiles, warp tiles of several slots, edges
RESIDENT = [(128, 64, 80, 128, "i8", "u8"), (128, 64, 80, 256, "u8", "i8"), (64, 64, 64, 256, "u32", "i32"),
            (64, 64, 64, 128, "u32", "u32"), (33, 17, 70, 96, "i8", "i8"), (128, 128, 48, 64, "u8", "u8"),
            (5, 7, 37, 64, "i32", "u32"), (96, 40, 36, 128, "u32", "u32"), (64, 64, 240, 128, "i8", "i8")]
# the resident form on swizzled operand arrays (what vyre.drivers.cuda.tiles' pipelines fill:
# vy_swz rows; the harness stores a and b in that layout): vyre.lib.matmul's CUDA tiles, rows
# of 32, 64 and 128 bytes
SWIZZLED = [(128, 256, 64, 256, "i8", "i8"), (64, 64, 64, 128, "u8", "i8"), (64, 64, 32, 128, "u32", "u32"),
            (32, 16, 128, 32, "i8", "u8"), (64, 32, 32, 64, "u8", "u8"), (64, 64, 8, 128, "i32", "u32")]
WIDE = [True] * len(CASES) + [False] * len(NARROW) + [True] * (len(RESIDENT) + len(SWIZZLED))
TRIPS = [1] * (len(CASES) + len(NARROW)) + [2] * (len(RESIDENT) + len(SWIZZLED))
SWZ = [False] * (len(CASES) + len(NARROW) + len(RESIDENT)) + [True] * len(SWIZZLED)
CASES = CASES + NARROW + RESIDENT + SWIZZLED
NP = {"i8": np.int8, "u8": np.uint8, "i32": np.int32, "u32": np.uint32}


def _harness() -> str:
    lines = [HARNESS_HEAD, imma.BLOCK, HARNESS_RUN, "int main(int argc, char** argv) {", "    const char* dir = argv[1];"]
    for i, (m, n, k, t, ta, tb) in enumerate(CASES):
        if TRIPS[i] > 1:
            lines.append(_resident_case(i, m, n, k, t, ta, tb))
        elif ta in ("i8", "u8"):
            flags = ", ".join(str(v).lower() for v in (ta == "i8", tb == "i8", WIDE[i]))
            fn = f"vy_imma8<{m}, {n}, {k}, {t}, {flags}>"
            lines.append(f"    run<vy_u8>(dir, {i}, {m}, {n}, {k}, {t}, [](uint* d, vy_u8* a, vy_u8* b, uint lin) "
                         f"{{ {fn}(d, a, b, lin); }});")
        else:
            fn = f"vy_imma32<{m}, {n}, {k}, {t}, {str(WIDE[i]).lower()}>"
            lines.append(f"    run<uint>(dir, {i}, {m}, {n}, {k}, {t}, [](uint* d, uint* a, uint* b, uint lin) "
                         f"{{ {fn}(d, a, b, lin); }});")
    lines += ["    return 0;", "}"]
    return "\n".join(lines)


def _resident_case(i: int, m: int, n: int, k: int, t: int, ta: str, tb: str) -> str:
    """One harness case of the resident form: load, TRIPS[i] steps, store."""
    words = ta not in ("i8", "u8")
    tm, tn, slots = imma._warp_tile(m, n, t, words)
    geo = f"{m}, {n}, {t}, {tm}, {tn}, {slots}"
    sw = ", true, true" if SWZ[i] else ""
    if words:
        acc, e, step = f"uint acc[{slots}][4][{tm}][{tn}][4];", "uint", f"vy_res32<{m}, {n}, {k}, {t}, {tm}, {tn}, {slots}{sw}>"
    else:
        flags = ", ".join(str(v).lower() for v in (ta == "i8", tb == "i8"))
        acc, e = f"uint acc[{slots}][{tm}][{tn}][4];", "vy_u8"
        step = f"vy_res8<{m}, {n}, {k}, {t}, {tm}, {tn}, {slots}, {flags}{sw}>"
    steps = " ".join([f"{step}(acc, a, b, lin);"] * TRIPS[i])
    return (f"    run<{e}>(dir, {i}, {m}, {n}, {k}, {t}, [](uint* d, {e}* a, {e}* b, uint lin) "
            f"{{ {acc} vy_res_get<{geo}>(acc, d, lin); {steps} vy_res_put<{geo}>(acc, d, lin); }});")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ is not installed")
    work = tmp_path_factory.mktemp("imma")
    src = work / "harness.cpp"
    src.write_text(_harness())
    exe = work / "harness"
    subprocess.run([cxx, "-std=c++20", "-O1", "-pthread", str(src), "-o", str(exe)], check=True,
                   capture_output=True, timeout=600)
    rng = np.random.default_rng(26)
    expected = {}
    for i, (m, n, k, _, ta, tb) in enumerate(CASES):
        a = _full_range(rng, NP[ta], (m, k))
        b = _full_range(rng, NP[tb], (n, k))
        d = _full_range(rng, np.uint32, (m, n))
        sa, sb = (_swizzle(a), _swizzle(b)) if SWZ[i] else (a, b)
        Path(work / f"in{i}.bin").write_bytes(sa.tobytes() + sb.tobytes() + d.tobytes())
        exact = TRIPS[i] * (a.astype(np.int64) @ b.astype(np.int64).T) + d.astype(np.int64)   # wraps mod 2**64
        expected[i] = (exact & 0xFFFFFFFF).astype(np.uint32)
    subprocess.run([str(exe), str(work)], check=True, timeout=600)
    out = {}
    for i, want in expected.items():
        raw = np.fromfile(work / f"out{i}.bin", np.uint32)
        out[i] = (want, raw[:-1].reshape(want.shape), int(raw[-1]))
    return out


def _swizzle(x: np.ndarray) -> np.ndarray:
    """``x`` (rows x cols) in the swizzled layout vy_swz describes: row r's 16-byte chunk c
    stored at chunk c ^ f(r), f(r) = (r // (8 // q)) % q for q chunks a row (q >= 8: r % 8)."""
    rows = x.shape[0]
    raw = np.ascontiguousarray(x).view(np.uint8).reshape(rows, -1)
    q = raw.shape[1] // 16
    per, mask = (1, 7) if q >= 8 else (8 // q, q - 1)
    out = np.empty_like(raw)
    for r in range(rows):
        for c in range(q):
            dst = c ^ ((r // per) & mask)
            out[r, 16 * dst:16 * dst + 16] = raw[r, 16 * c:16 * c + 16]
    return out


def _full_range(rng: np.random.Generator, dt, shape) -> np.ndarray:
    info = np.iinfo(dt)
    return rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=np.int64).astype(dt)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{m}x{n}x{k}-t{t}-{a}x{b}" + ("-swizzled" if SWZ[i] else "")
                                                        for i, (m, n, k, t, a, b) in enumerate(CASES)])
def test_imma_block_routine_gives_the_wrapped_int64_product(results, case: int) -> None:
    want, got, _ = results[case]
    assert np.array_equal(got, want)


def _whole_tiles(m: int, n: int, k: int, ta: str) -> bool:
    """Whether vy_imma8 reads this shape's fragments with ldmatrix: bytes, and m, n, k
    multiples of the warp tile (16 or 32 rows, 16 or 32 columns: an even number of n8 tiles)
    and of 16."""
    tm, tn = (2 if m >= 32 else 1), (4 if n >= 32 else 2 if n >= 16 else 1)
    return ta in ("i8", "u8") and m % (16 * tm) == 0 and n % (8 * tn) == 0 and k % 16 == 0 and tn % 2 == 0


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{m}x{n}x{k}-t{t}-{a}x{b}" + ("-swizzled" if SWZ[i] else "")
                                                        for i, (m, n, k, t, a, b) in enumerate(CASES)])
def test_whole_byte_tiles_read_their_fragments_with_ldmatrix(results, case: int) -> None:
    m, n, k, t, ta, _ = CASES[case]
    if TRIPS[case] > 1:
        tm, tn, _ = imma._warp_tile(m, n, t, ta not in ("i8", "u8"))
        whole = ta in ("i8", "u8") and m % (16 * tm) == 0 and n % (8 * tn) == 0 and k % 16 == 0 and tn % 2 == 0
    else:
        whole = _whole_tiles(m, n, k, ta)
    assert (results[case][2] > 0) == (WIDE[case] and whole)
