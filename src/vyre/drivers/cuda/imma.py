"""matmul_acc on the tensor cores: integer ``mma.sync.aligned.m16n8k32`` (IMMA, sm_80 and newer).

Owns the CUDA form of `vyre.ir.node.MatMulAcc` (``d += a · bᵀ`` on workgroup arrays, S37) and
when it is used (`claims`); every other matmul_acc is printed as the scalar loops of
`vyre.lower.legalize.matmul`, with the same bytes.

Integer MMA is exact: s8/u8 products are exact in s32 and, without ``.satfinite``, the s32
accumulation wraps mod 2**32, which is S37's rule. u32/i32 operands go through byte planes:
with ``a = sum_i a_i 2**(8i)`` and ``b = sum_j b_j 2**(8j)`` (bytes ``a_i, b_j`` unsigned),
``a*b mod 2**32 = sum_{i+j<=3} a_i b_j 2**(8(i+j)) mod 2**32``: ten u8 x u8 products, summed
per shift ``s = i+j`` in four accumulators and combined as ``acc0 + acc1<<8 + acc2<<16 +
acc3<<24`` (each accumulator is right mod 2**32, and so is its shift).

The block's warps share the m x n output in warp tiles of TM x TN mma tiles (16 x 8 each);
each warp loads its accumulators from ``d``, runs k in steps of 32 with fragments read from
the workgroup arrays, and writes ``d`` back (`vy_imma8`, `vy_imma32`, built from the warp-tile
pieces ``vy_tile_*``). A matmul_acc that is the only user of ``d`` in its loop and runs on
every trip (`resident`, found once per kernel) keeps them in registers instead, for the whole
loop: the kernel's prologue declares the register array, the first trip loads it from ``d``,
every trip only accumulates (`vy_res8`, `vy_res32`), the last trip writes ``d``; each warp owns
fixed warp tiles (``slots`` of them) for the whole loop. Rows, columns and k past the shape (a shape
that is not a multiple of the tile) read as zero and are not written: the template's
``C*`` flags, known when the kernel is compiled, leave the checks out where the shape is a
multiple of the tile. The fragment layout (lane ``4g + t``), as probed on the H100:

* A register r: row ``g + 8(r&1)``, columns ``4t .. 4t+3`` (+16 for r >= 2), byte j = column 4t+j;
* B register r: k = ``4t .. 4t+3`` (+16 for r = 1) of column (n index) ``g``;
* C/D element r: row ``g + 8(r>>1)``, column ``2t + (r&1)``.

Shared-memory traffic (wavefronts) weighs more than the tensor cores here, so the wide form
(`WIDE_SHARED_ACCESS`) moves it in wide accesses:

* whole byte tiles (no edge checks, k a multiple of 16) read fragments with ``ldmatrix``: row
  r of an 8 x 8 matrix of 16-bit elements is 16 bytes, and lane ``4g + t`` receives bytes
  ``4t .. 4t+3`` of row g, exactly the A/B register layout above (A: four matrices = rows
  0-7 / 8-15 x k 0-15 / 16-31; B: k 0-15 / 16-31 of two n8 tiles). Where k is an odd multiple
  of 16 (so that the 8 rows of a matrix fall on different banks) the last 16 k go through
  ``ldmatrix .x2`` with the k 16-31 halves of the fragments zero;
* the accumulators move as 8-byte pairs (C/D elements 2h, 2h+1 are adjacent), and where d's
  rows are a multiple of 32 words apart lane g takes the n8 tiles in an order rotated by
  ``g mod TN``, so a half-warp's 4 rows land on 4 different runs of 8 banks.

tests/cuda/test_imma_emulated.py runs `BLOCK` on the host against an emulated mma and an
emulated ldmatrix with these layouts, every form (the resident one over two trips); the GPU
tests run it on the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.kinds import BINDS, BUFFER, DECLARES, LOCAL, kind_of
from vyre.ir.program import Program
from vyre.ir.types import DataType

if TYPE_CHECKING:
    from vyre.lower.printer import Printer

_PTX = {DataType.I8: "s8", DataType.U8: "u8"}


def _mma_case(a: str, b: str) -> str:
    return (f'asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.{a}.{b}.s32 '
            '{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n"\n'
            '                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])\n'
            '                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));')


# one m16n8k32 MMA, c += a * b (s32 accumulators, wrapping), A and B signed (s8) or not (u8)
MMA = r"""
// ---- matmul_acc on the tensor cores (vyre.drivers.cuda.imma) ----
template <bool AS, bool BS>
static __device__ __forceinline__ void vy_mma(uint* c, const uint* a, const uint* b) {
    if constexpr (AS && BS) {
        %SS%
    } else if constexpr (AS) {
        %SU%
    } else if constexpr (BS) {
        %US%
    } else {
        %UU%
    }
}

// ldmatrix .x4: four 8x8 matrices of 16-bit elements, that is 8 rows of 16 bytes each. Lane l
// gives the (16-byte aligned) address of row l&7 of matrix l>>3; register q of lane l receives
// bytes 4(l&3) .. 4(l&3)+3 of row l>>2 of matrix q, the lowest byte in the lowest bits.
static __device__ __forceinline__ void vy_ldsm4(uint* r, const vy_u8* row) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// ldmatrix .x2: matrices 0 and 1 (lanes 0-15 give the row addresses), as vy_ldsm4
static __device__ __forceinline__ void vy_ldsm2(uint* r, const vy_u8* row) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}
""".replace("%SS%", _mma_case("s8", "s8")).replace("%SU%", _mma_case("s8", "u8")) \
   .replace("%US%", _mma_case("u8", "s8")).replace("%UU%", _mma_case("u8", "u8"))

# the layout of the operand arrays a pipeline fills (vyre.drivers.cuda.tiles): guarded, as the
# tile prelude holds it too
SWIZZLE = r"""
#ifndef VY_SWZ
#define VY_SWZ
// The byte offset of byte b of row r of a swizzled workgroup array whose rows are P bytes
// (P / 16 = Q a power of two): the row's 16-byte chunk b >> 4 is stored at chunk
// (b >> 4) ^ f(r), f(r) = (r / (8 / Q)) mod Q (Q >= 8: r mod 8). The 8 rows of an ldmatrix,
// or 8 consecutive rows read 16 bytes at a time at one column, then fall on 8 different runs
// of 4 banks instead of sharing a few (rows 64 bytes apart: 4-way bank conflicts).
template <uint P>
static __device__ __forceinline__ uint vy_swz(uint r, uint b) {
    constexpr uint Q = P >= 16u ? P / 16u : 1u, RPL = Q >= 8u ? 1u : 8u / Q, MK = (Q >= 8u ? 8u : Q) - 1u;
    return r * P + (((b >> 4) ^ ((r / RPL) & MK)) << 4) + (b & 15u);
}
#endif
"""

# the block-level routines (target-neutral C++ apart from vy_mma, vy_ldsm4/2, __byte_perm, uint2/uint4)
BLOCK = r"""
%SWIZZLE%
// 4 consecutive bytes (columns col..col+3, col a multiple of 4) of row `row` of an R x K byte
// array, lowest column in the lowest byte; zero outside the array
template <int R, int K, bool CR, bool CK, bool SW = false>
static __device__ __forceinline__ uint vy_frag8(const vy_u8* p, uint row, uint col) {
    if (CR && row >= (uint)R) return 0u;
    if constexpr (K % 4 == 0) {
        if (CK && col >= (uint)K) return 0u;
        if constexpr (SW) return *(const uint*)(p + vy_swz<(uint)K>(row, col));
        return *(const uint*)(p + row * (uint)K + col);
    } else {
        uint v = 0u;
        #pragma unroll
        for (uint j = 0u; j < 4u; j++)
            if (col + j < (uint)K) v |= (uint)p[row * (uint)K + col + j] << (8u * j);
        return v;
    }
}

// the four byte planes of 4 consecutive words (columns col..col+3) of row `row` of an R x K
// word array: planes[i] holds byte i of each word, the word of column col in the lowest byte
template <int R, int K, bool CR, bool CK, bool SW = false>
static __device__ __forceinline__ void vy_frag32(const uint* p, uint row, uint col, uint* planes) {
    uint w0 = 0u, w1 = 0u, w2 = 0u, w3 = 0u;
    if (!CR || row < (uint)R) {
        const uint* q = SW ? p + vy_swz<4u * (uint)K>(row, 4u * col) / 4u : p + row * (uint)K + col;
        if constexpr (K % 4 == 0) {
            if (!CK || col < (uint)K) {
                const uint4 v = *(const uint4*)q;
                w0 = v.x; w1 = v.y; w2 = v.z; w3 = v.w;
            }
        } else {
            if (col < (uint)K) w0 = q[0];
            if (col + 1u < (uint)K) w1 = q[1];
            if (col + 2u < (uint)K) w2 = q[2];
            if (col + 3u < (uint)K) w3 = q[3];
        }
    }
    const uint t0 = __byte_perm(w0, w1, 0x5140u), t1 = __byte_perm(w0, w1, 0x7362u);
    const uint t2 = __byte_perm(w2, w3, 0x5140u), t3 = __byte_perm(w2, w3, 0x7362u);
    planes[0] = __byte_perm(t0, t2, 0x5410u);
    planes[1] = __byte_perm(t0, t2, 0x7632u);
    planes[2] = __byte_perm(t1, t3, 0x5410u);
    planes[3] = __byte_perm(t1, t3, 0x7632u);
}

// the accumulator pair (row, col), (row, col + 1) of the M x N word array d (col even) that
// an mma C/D fragment holds: with W, one 8-byte access where N is even (the pair is then
// aligned, and inside d or outside it together), else two; zero / not written outside d. An 8-byte access
// costs half the shared-memory wavefronts of two 4-byte ones (the rows of d are a multiple
// of 32 words apart, so the 8 rows g of a warp's access share banks).
template <int M, int N, bool CM, bool CN, bool W>
static __device__ __forceinline__ void vy_get2(const uint* d, uint row, uint col, uint& x, uint& y) {
    const bool in = !CM || row < (uint)M;
    if constexpr (W && N % 2 == 0) {
        x = y = 0u;
        if (in && (!CN || col < (uint)N)) {
            const uint2 v = *(const uint2*)(d + row * (uint)N + col);
            x = v.x; y = v.y;
        }
    } else {
        x = (in && col < (uint)N) ? d[row * (uint)N + col] : 0u;
        y = (in && col + 1u < (uint)N) ? d[row * (uint)N + col + 1u] : 0u;
    }
}

template <int M, int N, bool CM, bool CN, bool W>
static __device__ __forceinline__ void vy_put2(uint* d, uint row, uint col, uint x, uint y) {
    if (CM && row >= (uint)M) return;
    if constexpr (W && N % 2 == 0) {
        if (!CN || col < (uint)N) *(uint2*)(d + row * (uint)N + col) = uint2{x, y};
    } else {
        if (col < (uint)N) d[row * (uint)N + col] = x;
        if (col + 1u < (uint)N) d[row * (uint)N + col + 1u] = y;
    }
}

// v[j] = v[(j + DIR * r) mod TN] for the TN values of v (TN a power of two), r = 0 .. TN-1
// known only at run time: one select per value and bit of r, no register indexed at run time
template <int TN, int DIR>
static __device__ __forceinline__ void vy_rotate(uint* v, uint r) {
    #pragma unroll
    for (int b = 1; b < TN; b *= 2) {
        uint w[TN];
        #pragma unroll
        for (int j = 0; j < TN; j++) w[j] = v[(j + DIR * b + TN) % TN];
        const bool on = (r & (uint)b) != 0u;
        #pragma unroll
        for (int j = 0; j < TN; j++) v[j] = on ? w[j] : v[j];
    }
}

// the accumulator pairs (row, n0 + 8j + 2t), (row, n0 + 8j + 2t + 1) of the TN mma tiles j
// of a warp row into x[j], y[j] (g, t: the lane's group and thread in group). Where d's rows
// are a multiple of 32 words apart (W), lane g reads tile (s + g) mod TN at step s, so the 4
// rows of a half-warp's 8-byte access fall on 4 different 8-bank runs instead of one
template <int M, int N, int TN, bool CM, bool CN, bool W>
static __device__ __forceinline__ void vy_get_pairs(const uint* d, uint row, uint n0, uint g, uint t, uint* x, uint* y) {
    if constexpr (W && N % 32 == 0 && (TN == 2 || TN == 4 || TN == 8)) {
        const uint r = g & (uint)(TN - 1);
        #pragma unroll
        for (int s = 0; s < TN; s++)
            vy_get2<M, N, CM, CN, W>(d, row, n0 + 8u * (((uint)s + r) & (uint)(TN - 1)) + 2u * t, x[s], y[s]);
        vy_rotate<TN, -1>(x, r);   // x[j] = (read at step (j - g) mod TN)
        vy_rotate<TN, -1>(y, r);
    } else {
        #pragma unroll
        for (int j = 0; j < TN; j++)
            vy_get2<M, N, CM, CN, W>(d, row, n0 + 8u * j + 2u * t, x[j], y[j]);
    }
}

// vy_get_pairs's inverse: writes x[j], y[j] to the pairs of tile j (in the same order)
template <int M, int N, int TN, bool CM, bool CN, bool W>
static __device__ __forceinline__ void vy_put_pairs(uint* d, uint row, uint n0, uint g, uint t, const uint* x, const uint* y) {
    if constexpr (W && N % 32 == 0 && (TN == 2 || TN == 4 || TN == 8)) {
        const uint r = g & (uint)(TN - 1);
        uint vx[TN], vy[TN];
        #pragma unroll
        for (int j = 0; j < TN; j++) { vx[j] = x[j]; vy[j] = y[j]; }
        vy_rotate<TN, 1>(vx, r);   // vx[s] = x[(s + g) mod TN]
        vy_rotate<TN, 1>(vy, r);
        #pragma unroll
        for (int s = 0; s < TN; s++)
            vy_put2<M, N, CM, CN, W>(d, row, n0 + 8u * (((uint)s + r) & (uint)(TN - 1)) + 2u * t, vx[s], vy[s]);
    } else {
        #pragma unroll
        for (int j = 0; j < TN; j++)
            vy_put2<M, N, CM, CN, W>(d, row, n0 + 8u * j + 2u * t, x[j], y[j]);
    }
}

// acc[i][j] += af[i] * bf[j] for the TM x TN mma tiles of a warp
template <int TM, int TN, bool AS, bool BS>
static __device__ __forceinline__ void vy_mma_tiles(uint (&acc)[TM][TN][4], const uint (&af)[TM][4], const uint (&bf)[TN][2]) {
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++)
            vy_mma<AS, BS>(acc[i][j], af[i], bf[j]);
}

// ---- one warp tile: TM x TN mma tiles (16 x 8 each) of the M x N output at (m0, n0) ----
// (g, t: the lane's group and thread in group; rows and columns past the shape are zero /
// not written, the checks left out where M, N are multiples of the warp tile)

// acc = the warp tile's accumulators in d (M x N words); W: 8-byte accumulator pairs
template <int M, int N, int TM, int TN, bool W>
static __device__ __forceinline__ void vy_tile_get(uint (&acc)[TM][TN][4], const uint* d, uint m0, uint n0, uint g, uint t) {
    constexpr bool CM = M % (16 * TM) != 0, CN = N % (8 * TN) != 0;
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            uint x[TN], y[TN];
            vy_get_pairs<M, N, TN, CM, CN, W>(d, m0 + 16u * i + g + 8u * h, n0, g, t, x, y);
            #pragma unroll
            for (int j = 0; j < TN; j++) { acc[i][j][2 * h] = x[j]; acc[i][j][2 * h + 1] = y[j]; }
        }
}

// vy_tile_get's inverse: writes the warp tile's accumulators to d
template <int M, int N, int TM, int TN, bool W>
static __device__ __forceinline__ void vy_tile_put(const uint (&acc)[TM][TN][4], uint* d, uint m0, uint n0, uint g, uint t) {
    constexpr bool CM = M % (16 * TM) != 0, CN = N % (8 * TN) != 0;
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            uint x[TN], y[TN];
            #pragma unroll
            for (int j = 0; j < TN; j++) { x[j] = acc[i][j][2 * h]; y[j] = acc[i][j][2 * h + 1]; }
            vy_put_pairs<M, N, TN, CM, CN, W>(d, m0 + 16u * i + g + 8u * h, n0, g, t, x, y);
        }
}

// acc += a (M x K bytes, rows m0 on) * b (N x K bytes, rows n0 on)^T over all of k; AS/BS:
// a/b are signed bytes; W: whole tiles read their fragments with ldmatrix
template <int M, int N, int K, int TM, int TN, bool AS, bool BS, bool W, bool SA = false, bool SB = false>
static __device__ __forceinline__ void vy_tile_k8(uint (&acc)[TM][TN][4], const vy_u8* a, const vy_u8* b, uint m0, uint n0, uint lane) {
    constexpr bool CM = M % (16 * TM) != 0, CN = N % (8 * TN) != 0, CK = K % 32 != 0;
    constexpr bool LDSM = W && !CM && !CN && K % 16 == 0 && TN % 2 == 0;
    const uint g = lane >> 2, t = lane & 3u;
    if constexpr (LDSM && (SA || SB)) {
        // as below, on swizzled arrays (vy_swz): each row address through the swizzle
        const auto at_a = [&](uint row, uint col) { return a + (SA ? vy_swz<(uint)K>(row, col) : row * (uint)K + col); };
        const auto at_b = [&](uint row, uint col) { return b + (SB ? vy_swz<(uint)K>(row, col) : row * (uint)K + col); };
        // the fragments of step k0 + 32 are loaded before the mma of step k0 (two register
        // sets): ldmatrix and mma are asm volatile, so the compiler keeps them in this order,
        // and the loads' latency is spent on the tensor cores' work
        const auto load = [&](uint k0, uint (&af)[TM][4], uint (&bf)[TN][2]) {
            #pragma unroll
            for (int i = 0; i < TM; i++)
                vy_ldsm4(af[i], at_a(m0 + 16u * (uint)i + (lane & 15u), k0 + 16u * (lane >> 4)));
            #pragma unroll
            for (int j = 0; j < TN; j += 2) {
                uint q[4];
                vy_ldsm4(q, at_b(n0 + 8u * (uint)j + 8u * (lane >> 4) + (lane & 7u), k0 + 16u * ((lane >> 3) & 1u)));
                bf[j][0] = q[0]; bf[j][1] = q[1]; bf[j + 1][0] = q[2]; bf[j + 1][1] = q[3];
            }
        };
        constexpr uint STEPS = (uint)K / 32u;
        if constexpr (STEPS > 0u) {
            uint af[2][TM][4], bf[2][TN][2];
            load(0u, af[0], bf[0]);
            #pragma unroll
            for (uint s = 0u; s < STEPS; s++) {
                if (s + 1u < STEPS) load(32u * (s + 1u), af[(s + 1u) & 1u], bf[(s + 1u) & 1u]);
                vy_mma_tiles<TM, TN, AS, BS>(acc, af[s & 1u], bf[s & 1u]);
            }
        }
        if constexpr (K % 32 == 16) {
            const uint k0 = (uint)K - 16u;
            uint af[TM][4], bf[TN][2];
            #pragma unroll
            for (int i = 0; i < TM; i++) {
                vy_ldsm2(af[i], at_a(m0 + 16u * (uint)i + (lane & 15u), k0));
                af[i][2] = af[i][3] = 0u;
            }
            #pragma unroll
            for (int j = 0; j < TN; j += 2) {
                uint q[2];
                vy_ldsm2(q, at_b(n0 + 8u * (uint)j + (lane & 15u), k0));
                bf[j][0] = q[0]; bf[j + 1][0] = q[1]; bf[j][1] = bf[j + 1][1] = 0u;
            }
            vy_mma_tiles<TM, TN, AS, BS>(acc, af, bf);
        }
    } else if constexpr (LDSM) {
        // whole tiles (no edge checks, rows 16-byte aligned): fragments by ldmatrix, one
        // instruction for the 4 registers of an A tile or the 2 + 2 of two B tiles. Lane l
        // addresses A row l&15, bytes 16(l>>4) on (matrix q = register q of the A layout:
        // rows 8(q&1) on, k 16(q>>1) on), and B row (n) 8(l>>4) + (l&7), bytes
        // 16((l>>3)&1) on (matrix q = register q&1 of B tile q>>1).
        const vy_u8* arow = a + (m0 + (lane & 15u)) * (uint)K + 16u * (lane >> 4);
        const vy_u8* brow = b + (n0 + 8u * (lane >> 4) + (lane & 7u)) * (uint)K + 16u * ((lane >> 3) & 1u);
        #pragma unroll
        for (uint k0 = 0u; k0 + 32u <= (uint)K; k0 += 32u) {
            uint af[TM][4], bf[TN][2];
            #pragma unroll
            for (int i = 0; i < TM; i++)
                vy_ldsm4(af[i], arow + 16u * (uint)i * (uint)K + k0);
            #pragma unroll
            for (int j = 0; j < TN; j += 2) {
                uint q[4];
                vy_ldsm4(q, brow + 8u * (uint)j * (uint)K + k0);
                bf[j][0] = q[0]; bf[j][1] = q[1]; bf[j + 1][0] = q[2]; bf[j + 1][1] = q[3];
            }
            vy_mma_tiles<TM, TN, AS, BS>(acc, af, bf);
        }
        if constexpr (K % 32 == 16) {
            // the last 16 k (K an odd multiple of 16 bytes, so that the 8 rows of an
            // ldmatrix fall on different banks): the k 16..31 halves of the fragments are
            // zero; ldmatrix .x2 (lanes 0-15 give the addresses) loads the A registers 0, 1
            // (rows l&15) and register 0 of two B tiles (rows (n) l&15)
            const uint k0 = (uint)K - 16u;
            uint af[TM][4], bf[TN][2];
            #pragma unroll
            for (int i = 0; i < TM; i++) {
                vy_ldsm2(af[i], a + (m0 + 16u * (uint)i + (lane & 15u)) * (uint)K + k0);
                af[i][2] = af[i][3] = 0u;
            }
            #pragma unroll
            for (int j = 0; j < TN; j += 2) {
                uint q[2];
                vy_ldsm2(q, b + (n0 + 8u * (uint)j + (lane & 15u)) * (uint)K + k0);
                bf[j][0] = q[0]; bf[j + 1][0] = q[1]; bf[j][1] = bf[j + 1][1] = 0u;
            }
            vy_mma_tiles<TM, TN, AS, BS>(acc, af, bf);
        }
    } else {
        for (uint k0 = 0u; k0 < (uint)K; k0 += 32u) {
            uint af[TM][4], bf[TN][2];
            #pragma unroll
            for (int i = 0; i < TM; i++)
                #pragma unroll
                for (int r = 0; r < 4; r++)
                    af[i][r] = vy_frag8<M, K, CM, CK, SA>(a, m0 + 16u * i + g + 8u * (r & 1), k0 + 4u * t + 16u * (r >> 1));
            #pragma unroll
            for (int j = 0; j < TN; j++)
                #pragma unroll
                for (int r = 0; r < 2; r++)
                    bf[j][r] = vy_frag8<N, K, CN, CK, SB>(b, n0 + 8u * j + g, k0 + 4u * t + 16u * r);
            vy_mma_tiles<TM, TN, AS, BS>(acc, af, bf);
        }
    }
}

// words through byte planes: acc[s] is the accumulator of shift s (products of planes i + j
// = s); vy_tile_get32 puts d in acc[0] and zeros in the others, vy_tile_put32 writes
// acc0 + acc1<<8 + acc2<<16 + acc3<<24
template <int M, int N, int TM, int TN, bool W>
static __device__ __forceinline__ void vy_tile_get32(uint (&acc)[4][TM][TN][4], const uint* d, uint m0, uint n0, uint g, uint t) {
    vy_tile_get<M, N, TM, TN, W>(acc[0], d, m0, n0, g, t);
    #pragma unroll
    for (int s = 1; s < 4; s++)
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int j = 0; j < TN; j++)
                #pragma unroll
                for (int r = 0; r < 4; r++) acc[s][i][j][r] = 0u;
}

template <int M, int N, int TM, int TN, bool W>
static __device__ __forceinline__ void vy_tile_put32(const uint (&acc)[4][TM][TN][4], uint* d, uint m0, uint n0, uint g, uint t) {
    uint v[TM][TN][4];
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++)
            #pragma unroll
            for (int r = 0; r < 4; r++)
                v[i][j][r] = acc[0][i][j][r] + (acc[1][i][j][r] << 8) + (acc[2][i][j][r] << 16) + (acc[3][i][j][r] << 24);
    vy_tile_put<M, N, TM, TN, W>(v, d, m0, n0, g, t);
}

// acc += a (M x K words) * b (N x K words)^T: the ten u8 x u8 products of planes i, j with
// i + j <= 3, accumulated per shift s = i + j
template <int M, int N, int K, int TM, int TN, bool SA = false, bool SB = false>
static __device__ __forceinline__ void vy_tile_k32(uint (&acc)[4][TM][TN][4], const uint* a, const uint* b, uint m0, uint n0, uint lane) {
    constexpr bool CM = M % (16 * TM) != 0, CN = N % (8 * TN) != 0, CK = K % 32 != 0;
    const uint g = lane >> 2, t = lane & 3u;
    for (uint k0 = 0u; k0 < (uint)K; k0 += 32u) {
        uint af[TM][4][4], bf[TN][4][2], planes[4];
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int r = 0; r < 4; r++) {
                vy_frag32<M, K, CM, CK, SA>(a, m0 + 16u * i + g + 8u * (r & 1), k0 + 4u * t + 16u * (r >> 1), planes);
                #pragma unroll
                for (int pl = 0; pl < 4; pl++) af[i][pl][r] = planes[pl];
            }
        #pragma unroll
        for (int j = 0; j < TN; j++)
            #pragma unroll
            for (int r = 0; r < 2; r++) {
                vy_frag32<N, K, CN, CK, SB>(b, n0 + 8u * j + g, k0 + 4u * t + 16u * r, planes);
                #pragma unroll
                for (int pl = 0; pl < 4; pl++) bf[j][pl][r] = planes[pl];
            }
        #pragma unroll
        for (int s = 0; s < 4; s++)
            #pragma unroll
            for (int pa = 0; pa <= s; pa++)
                #pragma unroll
                for (int i = 0; i < TM; i++)
                    #pragma unroll
                    for (int j = 0; j < TN; j++)
                        vy_mma<false, false>(acc[s][i][j], af[i][pa], bf[j][s - pa]);
    }
}

// ---- a matmul_acc by the whole block: each warp takes warp tiles in turn, and loads and stores
// their accumulators in d around the k loop ----

// d (M x N words) += a (M x K bytes) * b (N x K bytes)^T, by the T threads of the block
// (T a multiple of 32; lin the thread's linear index); AS/BS: a/b are signed bytes; W: whole
// tiles read their fragments with ldmatrix, accumulator pairs are 8-byte accesses
template <int M, int N, int K, int T, bool AS, bool BS, bool W, bool SA = false, bool SB = false>
static __device__ __forceinline__ void vy_imma8(uint* d, const vy_u8* a, const vy_u8* b, uint lin) {
    constexpr int TM = M >= 32 ? 2 : 1, TN = N >= 32 ? 4 : (N >= 16 ? 2 : 1);
    constexpr int GM = (M + 16 * TM - 1) / (16 * TM), GN = (N + 8 * TN - 1) / (8 * TN);
    const uint lane = lin & 31u;
    for (uint w = lin >> 5; w < (uint)(GM * GN); w += (uint)(T / 32)) {
        const uint m0 = (w / (uint)GN) * (16u * TM), n0 = (w % (uint)GN) * (8u * TN);
        uint acc[TM][TN][4];
        vy_tile_get<M, N, TM, TN, W>(acc, d, m0, n0, lane >> 2, lane & 3u);
        vy_tile_k8<M, N, K, TM, TN, AS, BS, W, SA, SB>(acc, a, b, m0, n0, lane);
        vy_tile_put<M, N, TM, TN, W>(acc, d, m0, n0, lane >> 2, lane & 3u);
    }
}

// d (M x N words) += a (M x K words) * b (N x K words)^T mod 2^32 through byte planes; W:
// accumulator pairs are 8-byte accesses
template <int M, int N, int K, int T, bool W, bool SA = false, bool SB = false>
static __device__ __forceinline__ void vy_imma32(uint* d, const uint* a, const uint* b, uint lin) {
    constexpr int TM = M >= 32 ? 2 : 1, TN = N >= 16 ? 2 : 1;
    constexpr int GM = (M + 16 * TM - 1) / (16 * TM), GN = (N + 8 * TN - 1) / (8 * TN);
    const uint lane = lin & 31u;
    for (uint w = lin >> 5; w < (uint)(GM * GN); w += (uint)(T / 32)) {
        const uint m0 = (w / (uint)GN) * (16u * TM), n0 = (w % (uint)GN) * (8u * TN);
        uint acc[4][TM][TN][4];
        vy_tile_get32<M, N, TM, TN, W>(acc, d, m0, n0, lane >> 2, lane & 3u);
        vy_tile_k32<M, N, K, TM, TN, SA, SB>(acc, a, b, m0, n0, lane);
        vy_tile_put32<M, N, TM, TN, W>(acc, d, m0, n0, lane >> 2, lane & 3u);
    }
}

// ---- the resident form: a matmul_acc whose accumulators stay in registers across the trips of
// its loop (vyre.drivers.cuda.imma.resident). Warp lin >> 5 owns the S warp tiles
// w = (lin >> 5) + s * (T / 32) below GM * GN (TM x TN mma tiles each) for the whole loop:
// vy_res_get on the first trip, vy_res8 / vy_res32 on every trip, vy_res_put on the last ----

// the warp tile of slot s of this lane's warp: whether there is one, and its origin
template <int M, int N, int T, int TM, int TN, int S>
static __device__ __forceinline__ bool vy_res_tile(uint lin, int s, uint& m0, uint& n0) {
    constexpr int GM = (M + 16 * TM - 1) / (16 * TM), GN = (N + 8 * TN - 1) / (8 * TN);
    static_assert(S * (T / 32) >= GM * GN, "every warp tile has a slot");
    const uint w = (lin >> 5) + (uint)s * (uint)(T / 32);
    m0 = (w / (uint)GN) * (16u * TM);
    n0 = (w % (uint)GN) * (8u * TN);
    return w < (uint)(GM * GN);
}

// acc = d (bytes: acc[S][TM][TN][4]; words: acc[S][4][TM][TN][4], d in shift 0)
template <int M, int N, int T, int TM, int TN, int S>
static __device__ __forceinline__ void vy_res_get(uint (&acc)[S][TM][TN][4], const uint* d, uint lin) {
    #pragma unroll
    for (int s = 0; s < S; s++) {
        uint m0, n0;
        if (vy_res_tile<M, N, T, TM, TN, S>(lin, s, m0, n0))
            vy_tile_get<M, N, TM, TN, true>(acc[s], d, m0, n0, (lin & 31u) >> 2, lin & 3u);
    }
}

template <int M, int N, int T, int TM, int TN, int S>
static __device__ __forceinline__ void vy_res_get(uint (&acc)[S][4][TM][TN][4], const uint* d, uint lin) {
    #pragma unroll
    for (int s = 0; s < S; s++) {
        uint m0, n0;
        if (vy_res_tile<M, N, T, TM, TN, S>(lin, s, m0, n0))
            vy_tile_get32<M, N, TM, TN, true>(acc[s], d, m0, n0, (lin & 31u) >> 2, lin & 3u);
    }
}

// d = acc
template <int M, int N, int T, int TM, int TN, int S>
static __device__ __forceinline__ void vy_res_put(const uint (&acc)[S][TM][TN][4], uint* d, uint lin) {
    #pragma unroll
    for (int s = 0; s < S; s++) {
        uint m0, n0;
        if (vy_res_tile<M, N, T, TM, TN, S>(lin, s, m0, n0))
            vy_tile_put<M, N, TM, TN, true>(acc[s], d, m0, n0, (lin & 31u) >> 2, lin & 3u);
    }
}

template <int M, int N, int T, int TM, int TN, int S>
static __device__ __forceinline__ void vy_res_put(const uint (&acc)[S][4][TM][TN][4], uint* d, uint lin) {
    #pragma unroll
    for (int s = 0; s < S; s++) {
        uint m0, n0;
        if (vy_res_tile<M, N, T, TM, TN, S>(lin, s, m0, n0))
            vy_tile_put32<M, N, TM, TN, true>(acc[s], d, m0, n0, (lin & 31u) >> 2, lin & 3u);
    }
}

// acc += a (M x K bytes) * b (N x K bytes)^T
template <int M, int N, int K, int T, int TM, int TN, int S, bool AS, bool BS, bool SA = false, bool SB = false>
static __device__ __forceinline__ void vy_res8(uint (&acc)[S][TM][TN][4], const vy_u8* a, const vy_u8* b, uint lin) {
    #pragma unroll
    for (int s = 0; s < S; s++) {
        uint m0, n0;
        if (vy_res_tile<M, N, T, TM, TN, S>(lin, s, m0, n0))
            vy_tile_k8<M, N, K, TM, TN, AS, BS, true, SA, SB>(acc[s], a, b, m0, n0, lin & 31u);
    }
}

// acc += a (M x K words) * b (N x K words)^T, per shift
template <int M, int N, int K, int T, int TM, int TN, int S, bool SA = false, bool SB = false>
static __device__ __forceinline__ void vy_res32(uint (&acc)[S][4][TM][TN][4], const uint* a, const uint* b, uint lin) {
    #pragma unroll
    for (int s = 0; s < S; s++) {
        uint m0, n0;
        if (vy_res_tile<M, N, T, TM, TN, S>(lin, s, m0, n0))
            vy_tile_k32<M, N, K, TM, TN, SA, SB>(acc[s], a, b, m0, n0, lin & 31u);
    }
}
""".replace("%SWIZZLE%", SWIZZLE)

PRELUDE = MMA + BLOCK


# whole byte tiles read their fragments with ldmatrix and the accumulators move in 8-byte
# pairs; False: 4-byte shared accesses throughout, the earlier form (benchmarks/cuda_imma.py
# --form narrow sets it in its own process, with its own kernel cache, to time both forms)
WIDE_SHARED_ACCESS = True


# matmul_acc statements that qualify (`resident`) keep their accumulators in registers across
# their loop; False: every matmul_acc loads and stores d (the form before; benchmarks/cuda_imma.py
# --form shared-d sets it in its own process to time both)
RESIDENT_ACCUMULATORS = True


def operands(s: N.Node) -> tuple[str, str, str] | None:
    """(d, a, b) of a matmul_acc statement; None for any other statement."""
    return (s.d, s.a, s.b) if isinstance(s, N.MatMulAcc) else None


def threads(program: Program) -> int:
    wx, wy, wz = program.workgroup_size
    return wx * wy * wz


def claims(program: Program, n: N.MatMulAcc) -> bool:
    """Whether this matmul_acc runs on the tensor cores: its block is whole warps (an
    mma.sync needs all 32 lanes). Otherwise it is printed as scalar loops."""
    t = threads(program)
    return t % 32 == 0 and t > 0


@dataclass(frozen=True)
class Resident:
    """A matmul_acc whose accumulators stay in registers for all the trips of its loop: the
    register array ``name`` (declared in the kernel's prologue, `declarations`) holds d's
    warp tiles, ``slots`` of ``tm`` x ``tn`` mma tiles per warp."""

    loop: N.Node   # a counted loop (`_loop_of`)
    name: str
    tm: int
    tn: int
    slots: int
    words: bool

    def declaration(self) -> str:
        planes = "[4]" if self.words else ""
        return f"uint {self.name}[{self.slots}]{planes}[{self.tm}][{self.tn}][4];"


# the warp tiles (TM x TN mma tiles) the resident form tries, largest first: the first whose
# tiles keep every warp busy, else the smallest that fits the shape
_WARP_TILES = {False: ((4, 8), (4, 4), (2, 4), (2, 2), (1, 2), (1, 1)), True: ((2, 2), (1, 2), (1, 1))}


def _warp_tile(m: int, n: int, t: int, words: bool) -> tuple[int, int, int]:
    """(TM, TN, slots per warp) of the resident form of an m x n matmul_acc by t threads."""
    warps = t // 32
    fits = [(tm, tn) for tm, tn in _WARP_TILES[words] if m >= 16 * tm and n >= 8 * tn] or [(1, 1)]
    busy = [(tm, tn) for tm, tn in fits if -(-m // (16 * tm)) * -(-n // (8 * tn)) >= warps]
    tm, tn = busy[0] if busy else fits[-1]
    tiles = -(-m // (16 * tm)) * -(-n // (8 * tn))
    return tm, tn, -(-tiles // warps)


def _names(e: E.Expr) -> set[str]:
    """The locals ``e`` reads."""
    return {getattr(x, f) for x in E.walk(e) for f in kind_of(x).roles(LOCAL)}


def buffers_named(s: N.Node) -> set[str]:
    """The buffers statement ``s`` and its own expressions name (also `tiles`' pipeline test)."""
    return {getattr(s, f) for f in kind_of(s).roles(BUFFER)} \
        | {getattr(x, f) for root in N.node_exprs(s) for x in E.walk(root) for f in kind_of(x).roles(BUFFER)}


def _loop_of(body: tuple[N.Node, ...], n: N.MatMulAcc) -> N.Node | None:
    """The counted loop (a loop kind that binds its variable: ``var``, ``from_``, ``to``)
    whose body holds ``n`` as one of its own statements (not nested deeper)."""
    for s in N.walk_nodes(body):
        k = kind_of(s)
        if k.loop and k.roles(BINDS) and any(x is n for x in s.body):
            return s
    return None


def _keeps_registers(loop: N.Node, n: N.MatMulAcc, returns: bool = False) -> bool:
    """Whether ``n`` may keep d in registers across ``loop``: n runs on every trip (a statement
    of the loop's own body, no break or continue in it, and no return in the program:
    ``returns``, its `ProgramFacts.returns`); nothing
    else in the loop names d (no load, store, atomic or other matmul_acc of it), so d in
    memory is needed only before the first trip and after the last; and the bounds can be read
    again on any trip (they name no buffer; no name they use is bound or assigned in the
    loop). Read from the kinds' rows and field roles, so it holds for any kind."""
    inner = list(N.walk_nodes(loop.body))
    if returns or any(kind_of(s).jump for s in inner):
        return False
    if any(n.d in buffers_named(s) for s in inner if s is not n):
        return False
    bound = {loop.var} | {getattr(s, f) for s in inner for f in kind_of(s).roles(DECLARES, BINDS, LOCAL)}
    bounds = (loop.from_, loop.to)
    return not any(kind_of(x).roles(BUFFER) for e in bounds for x in E.walk(e)) \
        and not (bound & (_names(loop.from_) | _names(loop.to)))


def resident(program: Program, body: tuple[N.Node, ...]) -> dict[int, Resident]:
    """The matmul_acc statements of a kernel body that keep their accumulators in registers
    (`_keeps_registers`), by ``id`` of the statement; computed once per kernel (the prologue
    declares their arrays, each statement's lines look itself up)."""
    key = id(body)
    got = _RESIDENT.get(key)
    if got is not None and got[0] is body:
        return got[1]
    out: dict[int, Resident] = {}
    if WIDE_SHARED_ACCESS and RESIDENT_ACCUMULATORS:
        for s in N.walk_nodes(body):
            if isinstance(s, N.MatMulAcc):
                loop = _loop_of(body, s)
                if loop is not None and _keeps_registers(loop, s, program.facts.returns):
                    words = program.buffer(s.a).dtype not in _PTX
                    tm, tn, slots = _warp_tile(s.m, s.n, threads(program), words)
                    out[id(s)] = Resident(loop, f"vy_racc{len(out)}", tm, tn, slots, words)
    if len(_RESIDENT) > 64:
        _RESIDENT.clear()
    _RESIDENT[key] = (body, out)
    return out


_RESIDENT: dict[int, tuple[tuple[N.Node, ...], dict[int, Resident]]] = {}


def declarations(p: Printer, index: int) -> list[str]:
    """The register arrays of kernel ``index``'s resident matmul_acc statements (its prologue)."""
    return [r.declaration() for r in resident(p.program, p.plan.phases[index]).values()]


def _found(p: Printer, n: N.MatMulAcc) -> Resident | None:
    for body in p.plan.phases:
        r = resident(p.program, body).get(id(n))
        if r is not None:
            return r
    return None


def call(p: Printer, n: N.MatMulAcc) -> list[str]:
    """The lines of one matmul_acc: barrier, the block routine, barrier. A resident one
    (`resident`) loads its registers from d on the loop's first trip, accumulates, and writes
    them to d on the last trip."""
    prog = p.program
    a, b = prog.buffer(n.a), prog.buffer(n.b)
    from . import tiles

    ptrs = f"{tiles.operand(p, n.a)}, {tiles.operand(p, n.b)}, {p.lin()}"   # (a pipeline's stage)
    r = _found(p, n)
    swa, swb = tiles.swizzled(p, n.a), tiles.swizzled(p, n.b)
    sw = f", {str(swa).lower()}, {str(swb).lower()}" if swa or swb else ""
    # a pipeline's tiles end with a barrier right before their matmul_acc, and only its loop's
    # last trip needs the closing one (`tiles.fed`)
    last = tiles.fed(p, n)
    head = [] if last else ["__syncthreads();"]
    tail = f"if ({last}) __syncthreads();" if last else "__syncthreads();"
    if r is not None:
        v = f"v_{r.loop.var}"
        first, _, _ = p.expr(r.loop.from_)
        end, _, _ = p.expr(r.loop.to)
        geo = f"{n.m}, {n.n}, {threads(prog)}, {r.tm}, {r.tn}, {r.slots}"
        if r.words:
            step = f"vy_res32<{n.m}, {n.n}, {n.k}, {threads(prog)}, {r.tm}, {r.tn}, {r.slots}{sw}>"
        else:
            signed = ", ".join("true" if t.dtype is DataType.I8 else "false" for t in (a, b))
            step = f"vy_res8<{n.m}, {n.n}, {n.k}, {threads(prog)}, {r.tm}, {r.tn}, {r.slots}, {signed}{sw}>"
        return [*head,
                f"if ({v} == {first}) vy_res_get<{geo}>({r.name}, {p.ptr(n.d)}, {p.lin()});",
                f"{step}({r.name}, {ptrs});",
                f"if ({v} + 1 == {end}) vy_res_put<{geo}>({r.name}, {p.ptr(n.d)}, {p.lin()});",
                tail]
    shape = f"{n.m}, {n.n}, {n.k}, {threads(prog)}"
    wide = "true" if WIDE_SHARED_ACCESS else "false"
    if a.dtype in _PTX:
        signed = ", ".join("true" if t.dtype is DataType.I8 else "false" for t in (a, b))
        fn = f"vy_imma8<{shape}, {signed}, {wide}{sw}>"
    else:
        fn = f"vy_imma32<{shape}, {wide}{sw}>"
    return [*head, f"{fn}({p.ptr(n.d)}, {ptrs});", tail]
