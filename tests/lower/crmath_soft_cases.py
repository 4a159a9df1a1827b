"""Operands and independent expected results for the software float64 / 64-bit helpers of
vyre.lower.crmath.soft, and runners that evaluate a helper on u64 bit patterns through its
host-C print (gcc) and its WGSL print (wgpu). Expected values come from numpy's float64 and
integer arithmetic (the hardware's) and Python integers, never from vyre.

Every helper's operands and result travel as u64 bit patterns: float64 and 64-bit integers
as themselves, f32/u32/i32 in the low word (zero-extended), bools as 0/1."""

from __future__ import annotations

import ctypes
import pathlib
import subprocess
import tempfile

import numpy as np

from vyre.lower.crmath import c as cprint
from vyre.lower.crmath import soft
from vyre.lower.crmath import wgsl as wprint
from vyre.lower.crmath.dsl import BOOL, F32, F64, I32, I64, U32, U64, Function

M64 = (1 << 64) - 1
HEADER = r"""
#include <stdbool.h>
typedef unsigned int uint;
typedef unsigned long long vy_u64;
typedef long long vy_i64;
#define VY_FN static inline
#define VY_CLZ(x) ((x) == 0u ? 32 : __builtin_clz(x))
#define VY_CLZ64(x) ((x) == 0ull ? 64 : __builtin_clzll(x))
#define VY_UMULHI64(a, b) ((vy_u64)(((unsigned __int128)(vy_u64)(a) * (vy_u64)(b)) >> 64))
static inline uint vy_f2bits(float x) { uint u; __builtin_memcpy(&u, &x, 4); return u; }
static inline float vy_bits2f(uint u) { float x; __builtin_memcpy(&x, &u, 4); return x; }
#define VY_F2U(x) vy_f2bits(x)
#define VY_U2F(x) vy_bits2f(x)
"""
_C_IN = {F64: "VYM_L2D(a{k}[i])", U64: "a{k}[i]", I64: "(vy_i64)a{k}[i]", F32: "VY_U2F((uint)a{k}[i])",
         U32: "(uint)a{k}[i]", I32: "(int)(uint)a{k}[i]", BOOL: "(a{k}[i] != 0ull)"}
_C_OUT = {F64: "VYM_D2L(r)", U64: "r", I64: "(vy_u64)r", F32: "(vy_u64)VY_F2U(r)", U32: "(vy_u64)r",
          I32: "(vy_u64)(uint)r", BOOL: "(vy_u64)(r ? 1u : 0u)"}
_W_IN = {F64: "a{k}", U64: "a{k}", I64: "a{k}", F32: "a{k}.x", U32: "a{k}.x", I32: "bitcast<i32>(a{k}.x)",
         BOOL: "(a{k}.x != 0u)"}
_W_OUT = {F64: "{r}", U64: "{r}", I64: "{r}", F32: "vec2<u32>({r}, 0u)", U32: "vec2<u32>({r}, 0u)",
          I32: "vec2<u32>(bitcast<u32>({r}), 0u)", BOOL: "vec2<u32>(select(0u, 1u, {r}), 0u)"}


class HostC:
    """Functions of the language (every soft helper by default) compiled as host C (gcc -O2
    -ffp-contract=off), called through ctypes."""

    def __init__(self, fns: list[Function] | None = None) -> None:
        fns = soft.SOFT if fns is None else fns
        src = [HEADER, cprint.source(fns)]
        for fn in fns:
            ins = ", ".join(f"const vy_u64* a{k}" for k in range(len(fn.params)))
            args = ", ".join(_C_IN[t].format(k=k) for k, (_, t) in enumerate(fn.params))
            src.append(f"void w_{fn.name}({ins}, vy_u64* out, long n) {{ for (long i = 0; i < n; i++) "
                       f"{{ {cprint.CT[fn.result]} r = {fn.name}({args}); out[i] = {_C_OUT[fn.result]}; }} }}")
        self.dir = tempfile.mkdtemp(prefix="vyre_soft_")
        path = pathlib.Path(self.dir)
        (path / "soft.c").write_text("\n".join(src))
        subprocess.run(["gcc", "-O2", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", "-w", "-o",
                        str(path / "soft.so"), str(path / "soft.c")], check=True)
        self.lib = ctypes.CDLL(str(path / "soft.so"))

    def __call__(self, fn: Function, *args: np.ndarray) -> np.ndarray:
        arrays = [np.ascontiguousarray(a, dtype=np.uint64) for a in args]
        out = np.empty(arrays[0].size, np.uint64)
        ptr = ctypes.POINTER(ctypes.c_uint64)
        getattr(self.lib, f"w_{fn.name}")(*[a.ctypes.data_as(ptr) for a in arrays], out.ctypes.data_as(ptr),
                                         ctypes.c_long(out.size))
        return out


def wgsl(fn: Function, *args: np.ndarray) -> np.ndarray:
    """``fn`` evaluated by its WGSL print on the local wgpu adapter."""
    import wgsl_runner

    call = f"{fn.name}({', '.join(_W_IN[t].format(k=k) for k, (_, t) in enumerate(fn.params))})"
    body = _W_OUT[fn.result].format(r=call)
    src = wgsl_runner.kernel(wprint.source([fn]), body, len(args))
    words = wgsl_runner.run(src, [np.ascontiguousarray(a, dtype=np.uint64) for a in args], args[0].size)
    return words.view(np.uint64)


# ---- operands --------------------------------------------------------------------------------
def _d(bits) -> np.ndarray:
    return np.asarray(bits, np.uint64).view(np.float64)


EDGES64 = np.array([
    0, 1 << 63, 1, (1 << 63) | 1, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x0010000000000001,
    0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x7FF0000000000001,
    0x3FF0000000000000, 0x3FF0000000000001, 0x3FEFFFFFFFFFFFFF, 0xBFF0000000000000, 0x4000000000000000,
    0x3CA0000000000000, 0x3CB0000000000000, 0x7FE0000000000000, 0x0008000000000000, 0x8000000000000003,
    0x3FF8000000000000, 0x433FFFFFFFFFFFFF, 0x4340000000000000, 0x3FFFFFFFFFFFFFFF, 0x0020000000000000,
    0x001FFFFFFFFFFFFF, 0x7FDFFFFFFFFFFFFF, 0x4338000000000000,
], np.uint64)


def f64_values(n: int, rng: np.random.Generator) -> np.ndarray:
    """Bit patterns of float64 operands: raw random bits, moderate values, short significands
    (exact products and ties), subnormals and values next to the overflow threshold."""
    k = n // 5
    raw = rng.integers(0, 1 << 63, k, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, k, dtype=np.uint64)
    mod = (rng.standard_normal(k) * np.exp2(rng.integers(-40, 40, k))).view(np.uint64)
    short = (rng.integers(1, 1 << 27, k).astype(np.float64) * np.exp2(rng.integers(-60, 30, k))
             * rng.choice([-1.0, 1.0], k)).view(np.uint64)
    sub = rng.integers(0, 1 << 52, k, dtype=np.uint64) | (rng.integers(0, 2, k, dtype=np.uint64) << np.uint64(63))
    exp = rng.choice([1, 2, 3, 0x3FF, 0x7FD, 0x7FE, 0x3CB, 0x432], n - 4 * k).astype(np.uint64)
    edge = (exp << np.uint64(52)) | rng.integers(0, 1 << 52, n - 4 * k, dtype=np.uint64) \
        | (rng.integers(0, 2, n - 4 * k, dtype=np.uint64) << np.uint64(63))
    return np.concatenate([raw, mod, short, sub, edge])


def f64_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) bit patterns: every pair of `EDGES64`, random pairs, and pairs built to cancel
    (b next to -a) or to tie (b half an ulp of a)."""
    rng = np.random.default_rng(seed)
    ea, eb = np.meshgrid(EDGES64, EDGES64)
    a = f64_values(n, rng)
    b = f64_values(n, rng)
    rng.shuffle(b)
    # cancellation and ties
    m = n // 4
    near = a[:m].view(np.float64)
    with np.errstate(all="ignore"):
        b[:m // 2] = (-near[:m // 2] * (1 + rng.integers(-4, 5, m // 2) * 2.0 ** -52)).view(np.uint64)
        ulp = np.abs(np.spacing(near[m // 2:m]))
        b[m // 2:m] = (ulp * rng.choice([0.5, -0.5, 1.5, -1.5, 0.25], m - m // 2)).view(np.uint64)
    return np.concatenate([ea.ravel(), a]), np.concatenate([eb.ravel(), b])


def u64_values(n: int, rng: np.random.Generator) -> np.ndarray:
    edges = np.array([0, 1, 2, 0xFFFFFFFF, 1 << 32, (1 << 32) + 1, 1 << 63, M64, M64 - 1, 0x8000000080000000,
                      0x7FFFFFFFFFFFFFFF, 0x00000001FFFFFFFF], np.uint64)
    bits = rng.integers(0, 64, n).astype(np.uint64)
    r = rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
    r[n // 2:] >>= bits[n // 2:]                 # every magnitude
    return np.concatenate([edges, r])
