"""The device functions a kernel may call: invocation ids, barriers, atomics, math, casts and
the arrays a kernel allocates. Each is a marker with a docstring: called from ordinary Python
it raises K017 naming the line of the call, because it only means something inside a kernel; `vyre.kernel.frontend` turns
calls to it into IR.
"""

from __future__ import annotations

from typing import Any

from .errors import called_on_host


class Intrinsic:
    """A device function: ``name`` is what the frontend lowers."""

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.__doc__ = name, doc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise called_on_host(f"vyre.kernel.{self.name}()", "call it in a @vyre.kernel or @vyre.func body; "
                             "to compute on the host use numpy.")

    def __repr__(self) -> str:
        return f"<vyre device function {self.name}>"


def _make(name: str, doc: str) -> Intrinsic:
    return Intrinsic(name, doc)


gid = _make("gid", "gid(axis=0): this invocation's global id on an axis (u32).")
lid = _make("lid", "lid(axis=0): this invocation's id within its workgroup (u32).")
wgid = _make("wgid", "wgid(axis=0): this invocation's workgroup id (u32).")
barrier = _make("barrier", "barrier(): workgroup barrier (under uniform control flow).")
grid_sync = _make("grid_sync", "grid_sync(): every invocation of the grid finishes the code before it "
                  "(top level of the kernel only).")
shared = _make("shared", "shared(dtype, count): a workgroup array, zeroed; assign it to a name at the "
               "top of the kernel: ``tile = shared(f32, 256)``.")
local = _make("local", "local(dtype, count): an array private to each invocation, zeroed: "
              "``w = local(u32, 64)``.")
select = _make("select", "select(cond, a, b): a where cond holds, else b (both evaluated).")
fma = _make("fma", "fma(a, b, c): a*b + c with one rounding.")
bitcast = _make("bitcast", "bitcast(dtype, x): x's bits as dtype (same size).")
mul_high = _make("mul_high", "mul_high(a, b): the high half of the double-width product.")
rotl = _make("rotl", "rotl(x, k): rotate left by k & (bits-1).")
rotr = _make("rotr", "rotr(x, k): rotate right by k & (bits-1).")
popcount = _make("popcount", "popcount(x): set bits.")
clz = _make("clz", "clz(x): leading zero bits.")
ctz = _make("ctz", "ctz(x): trailing zero bits.")
reverse_bits = _make("reverse_bits", "reverse_bits(x).")
byte_swap = _make("byte_swap", "byte_swap(x): reverse the bytes.")
sqrt = _make("sqrt", "sqrt(x): correctly rounded square root.")
floor = _make("floor", "floor(x).")
ceil = _make("ceil", "ceil(x).")
trunc = _make("trunc", "trunc(x).")
exp = _make("exp", "exp(x), correctly rounded like every function here (docs/semantics.md S13).")
log = _make("log", "log(x).")
exp2 = _make("exp2", "exp2(x).")
log2 = _make("log2", "log2(x).")
sin = _make("sin", "sin(x).")
cos = _make("cos", "cos(x).")
tan = _make("tan", "tan(x).")
tanh = _make("tanh", "tanh(x).")
sinh = _make("sinh", "sinh(x).")
cosh = _make("cosh", "cosh(x).")
expm1 = _make("expm1", "expm1(x).")
log1p = _make("log1p", "log1p(x).")
atan = _make("atan", "atan(x).")
asin = _make("asin", "asin(x).")
acos = _make("acos", "acos(x).")
cbrt = _make("cbrt", "cbrt(x).")
erf = _make("erf", "erf(x).")
hypot = _make("hypot", "hypot(x, y): sqrt(x*x + y*y) without overflow, correctly rounded.")
pow = _make("pow", "pow(x, y): x to the power y (also written x ** y), correctly rounded; "
            "pow(x, 0) = 1, pow(1, y) = 1, a negative x needs an integer y (docs/semantics.md S13).")
atan2 = _make("atan2", "atan2(y, x): the angle of the point (x, y), in [-pi, pi], correctly rounded.")
isnan = _make("isnan", "isnan(x).")
isinf = _make("isinf", "isinf(x).")
sat_add = _make("sat_add", "sat_add(a, b): saturating add.")
sat_sub = _make("sat_sub", "sat_sub(a, b): saturating subtract.")
atomic_add = _make("atomic_add", "atomic_add(buf, i, v): buf[i] += v atomically; the old value. On an f32, f16 "
                   "or bf16 buffer: exact, order-independent, a statement whose value is not used (S36).")
atomic_or = _make("atomic_or", "atomic_or(buf, i, v).")
atomic_and = _make("atomic_and", "atomic_and(buf, i, v).")
atomic_xor = _make("atomic_xor", "atomic_xor(buf, i, v).")
atomic_min = _make("atomic_min", "atomic_min(buf, i, v) (float buffers: S10's minimum, as atomic_add).")
atomic_max = _make("atomic_max", "atomic_max(buf, i, v) (float buffers: S10's maximum, as atomic_add).")
atomic_exchange = _make("atomic_exchange", "atomic_exchange(buf, i, v): store v, return the old value.")
atomic_cas = _make("atomic_cas", "atomic_cas(buf, i, expected, v): store v if buf[i] == expected; the old value.")

ALL = {x.name: x for x in globals().values() if isinstance(x, Intrinsic)}
