"""wgpu backend vs the same algorithms hand-written in WGSL on plain wgpu-py, on whatever
adapter wgpu picks (lavapipe on a CPU machine, the GPU through Vulkan elsewhere):

* dispatch overhead: a tiny u32 program (upload 4 KiB, launch, read back);
* elementwise throughput: u32 ``a*3 + b``, f32 ``a*b + a`` and f32 ``a / b`` (vyre's exact
  integer division, `vyre.lower.legalize.f32_div`, against WGSL's native ``/``, which may be
  2.5 ULP off), and u64 ``a + b`` and ``a * b`` (vyre's u32-pair lowering,
  `vyre.lower.legalize.int64`, against a hand-written u32-pair WGSL kernel);
* the shared-memory tiled f32 matmul (`vyre.examples.matmul_tiled`) against its WGSL twin.

Kernel times (``*_ms``) leave host transfers out on both sides: vyre runs on resident buffers
through a bound dispatch (`bind_resident`: ``launch()`` then ``flush()``, which waits for the
queue), the hand-written kernel on buffers and a bind group made once (encode, submit, wait
for the queue through a 4-byte read, as vyre's fence does). ``*_vyre_ms``/``*_hand_ms`` are
one dispatch plus one submit-and-wait round trip (on a GPU that round trip is most of it: a
2^26-element kernel moves 768 MB in about 0.3 ms); ``*_batched_*`` are per dispatch of
``batch`` dispatches recorded into one submit and waited for once (matmul: 4 x batch), which
is what the kernels themselves cost back to back. vyre's include zeroing outputs it does not
fully write (S18). The correctness rows compare whole
dispatches' bytes. Sizes: 2^26 elements (2^24 --quick), u64 2^23 (2^21), matmul 512 (256);
on a CPU adapter (`WgpuDevice.software_adapter()`) 2^20, 2^18 and 128, recorded in the results.

The hand-written kernels are what a WGSL programmer writes (hardware float ops, no bounds or
NaN handling beyond the grid check); vyre's carry the exactness the reference defines."""

from __future__ import annotations

import numpy as np

from vyre import examples as X
from vyre.driver import DispatchConfig, acquire
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit, seconds_median

EW_U32 = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x + g.y * 65535u * 256u;
    if (i < arrayLength(&o)) { o[i] = a[i] * 3u + b[i]; }
}"""
EW_F32 = EW_U32.replace("array<u32>", "array<f32>").replace("a[i] * 3u + b[i]", "a[i] * b[i] + a[i]")
EW_FDIV = EW_U32.replace("array<u32>", "array<f32>").replace("a[i] * 3u + b[i]", "a[i] / b[i]")
EW_U64 = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> o: array<u32>;
fn umulhi(x: u32, y: u32) -> u32 {
    let xl = x & 0xFFFFu; let xh = x >> 16u; let yl = y & 0xFFFFu; let yh = y >> 16u;
    let ll = xl * yl; let lh = xl * yh; let hl = xh * yl; let hh = xh * yh;
    let mid = (ll >> 16u) + (lh & 0xFFFFu) + (hl & 0xFFFFu);
    return hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
}
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x + g.y * 65535u * 256u;
    if (i < arrayLength(&o) / 2u) {
        let al = a[2u * i]; let ah = a[2u * i + 1u]; let bl = b[2u * i]; let bh = b[2u * i + 1u];
        OP
    }
}"""
U64_ADD = "let lo = al + bl; o[2u * i] = lo; o[2u * i + 1u] = ah + bh + select(0u, 1u, lo < al);"
U64_MUL = "o[2u * i] = al * bl; o[2u * i + 1u] = umulhi(al, bl) + al * bh + ah * bl;"
MATMUL = """@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
var<workgroup> As: array<f32, 256>;
var<workgroup> Bs: array<f32, 256>;
const N: u32 = NNu;
@compute @workgroup_size(16, 16) fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) w: vec3<u32>) {
    let row = w.y * 16u + l.y;
    let col = w.x * 16u + l.x;
    var acc = 0.0;
    for (var t = 0u; t < N / 16u; t++) {
        As[l.y * 16u + l.x] = a[row * N + t * 16u + l.x];
        Bs[l.y * 16u + l.x] = b[(t * 16u + l.y) * N + col];
        workgroupBarrier();
        for (var k = 0u; k < 16u; k++) { acc = acc + As[l.y * 16u + k] * Bs[k * 16u + l.x]; }
        workgroupBarrier();
    }
    c[row * N + col] = acc;
}"""


class Hand:
    """One hand-written WGSL kernel on the wgpu backend's own device."""

    def __init__(self, dev, src: str, nbuf: int) -> None:
        import wgpu

        self.dev, self.wgpu = dev, wgpu
        self.pipe = dev.device.create_compute_pipeline(
            layout="auto", compute={"module": dev.device.create_shader_module(code=src), "entry_point": "main"})
        self.usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.nbuf = nbuf
        # waiting for the queue: a 4-byte read, as vyre's fence does (wgpu-py 0.32's
        # on_submitted_work_done fails in its FFI)
        self.probe = dev.device.create_buffer(size=4, usage=self.usage)

    def bind(self, arrays: list[np.ndarray], out_bytes: int) -> tuple:
        """Device buffers holding ``arrays``, an output buffer and their bind group."""
        d = self.dev.device
        bufs = [d.create_buffer_with_data(data=x, usage=self.usage) for x in arrays]
        out = d.create_buffer(size=out_bytes, usage=self.usage)
        bg = d.create_bind_group(layout=self.pipe.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(bufs + [out])])
        return bufs, out, bg

    def launch(self, bg, grid: tuple[int, int, int], batch: int = 1) -> None:
        """``batch`` dispatches (one pass each), submitted together."""
        d = self.dev.device
        enc = d.create_command_encoder()
        for _ in range(batch):
            cp = enc.begin_compute_pass()
            cp.set_pipeline(self.pipe)
            cp.set_bind_group(0, bg)
            cp.dispatch_workgroups(*grid)
            cp.end()
        d.queue.submit([enc.finish()])

    def kernel(self, bg, grid: tuple[int, int, int], batch: int = 1) -> None:
        """``batch`` dispatches on bound buffers, waited for (no transfers)."""
        self.launch(bg, grid, batch)
        self.dev.device.queue.read_buffer(self.probe)

    def run(self, arrays: list[np.ndarray], out_bytes: int, grid: tuple[int, int, int]) -> bytes:
        _, out, bg = self.bind(arrays, out_bytes)
        self.launch(bg, grid)
        return bytes(self.dev.device.queue.read_buffer(out))


class Resident:
    """A vyre program bound to resident buffers holding its inputs (no transfers per run)."""

    def __init__(self, backend, program: Program, arrays: list[np.ndarray], out_bytes: int,
                 config: DispatchConfig) -> None:
        self.backend = backend
        self.res = []
        for x in arrays:
            r = backend.allocate_resident(x.nbytes)
            backend.upload_resident(r, x)
            self.res.append(r)
        self.res.append(backend.allocate_resident(out_bytes))
        self.bound = backend.bind_resident(program, self.res, config)

    def kernel(self, batch: int = 1) -> None:
        """``batch`` dispatches (recorded together, one submit), waited for."""
        for _ in range(batch):
            self.bound.launch()
        self.backend.flush()

    def output(self) -> bytes:
        self.bound.run()     # raises any device error of the runs so far
        return self.backend.read_resident(self.res[-1])

    def free(self) -> None:
        self.bound.release()
        for r in self.res:
            self.backend.free_resident(r)


def kernel_ms(vyre: Resident, hand: Hand, bg, grid, reps: int, batch: int = 1) -> tuple[float, float]:
    """Median times per dispatch of both sides, measured alternately (clock ramps hit both
    alike), each sample ``batch`` dispatches in one submit and one wait."""
    import statistics
    import time

    vs, hs = [], []
    vyre.kernel(batch)
    hand.kernel(bg, grid, batch)
    for _ in range(reps):
        t = time.perf_counter()
        vyre.kernel(batch)
        vs.append((time.perf_counter() - t) / batch)
        t = time.perf_counter()
        hand.kernel(bg, grid, batch)
        hs.append((time.perf_counter() - t) / batch)
    return statistics.median(vs) * 1e3, statistics.median(hs) * 1e3


def both_ms(res: dict, name: str, vyre: Resident, hand: Hand, bg, grid, reps: int, batch: int) -> None:
    """``<name>_vyre_ms``/``_hand_ms``: one dispatch and its own wait each (the round trip's
    host cost included); ``<name>_batched_*``: ``batch`` dispatches per wait, per dispatch
    (what the kernels cost back to back, the GPU kept busy); and both ratios."""
    res[f"{name}_vyre_ms"], res[f"{name}_hand_ms"] = kernel_ms(vyre, hand, bg, grid, reps)
    res[f"ratio_{name}_vyre_vs_hand"] = res[f"{name}_vyre_ms"] / res[f"{name}_hand_ms"]
    res[f"{name}_batched_vyre_ms"], res[f"{name}_batched_hand_ms"] = kernel_ms(vyre, hand, bg, grid, reps, batch)
    res[f"ratio_{name}_batched_vyre_vs_hand"] = res[f"{name}_batched_vyre_ms"] / res[f"{name}_batched_hand_ms"]


def grid_for(n: int) -> tuple[int, int, int]:
    blocks = -(-n // 256)
    return (min(blocks, 65535), -(-blocks // 65535), 1)


def main() -> None:
    a = args(__doc__)
    b = acquire("wgpu")
    dev = b.device
    cpu = dev.software_adapter()
    res: dict[str, float | str] = {"adapter": b.device_profile().device_name,
                                   "kernel_times": "resident buffers, bound dispatch vs prebuilt bind group; "
                                                   "one dispatch + submit/wait each (*_ms), and batch dispatches per submit/wait (*_batched_*); no host transfers"}
    reps = 5 if a.quick else 15
    batch = 2 if cpu else 20   # dispatches per wait in the batched kernel times
    res["batch"] = batch
    gx = Expr.gid_x()
    # dispatch overhead (with transfers: upload, launch, read back)
    tiny = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.read("b", 1, DataType.U32),
                            BufferDecl.output("o", 2, DataType.U32)], 256,
                           [Node.store("o", gx, Expr.load("a", gx) * 3 + Expr.load("b", gx))])
    t_in = [np.arange(1024, dtype=np.uint32), np.ones(1024, np.uint32)]
    pipe = P.compile(b, tiny)
    hand_u = Hand(dev, EW_U32, 3)
    assert pipe.dispatch(t_in)[0] == hand_u.run(t_in, 4096, (4, 1, 1))
    res["tiny_vyre_us"] = seconds_median(lambda: pipe.dispatch(t_in), 50 if a.quick else 300) * 1e6
    res["tiny_hand_us"] = seconds_median(lambda: hand_u.run(t_in, 4096, (4, 1, 1)), 50 if a.quick else 300) * 1e6
    # elementwise throughput (2-D grid: 65535 workgroups per axis)
    n = 1 << (20 if cpu else 24 if a.quick else 26)
    res["ew_n"] = n
    big_u = [np.arange(n, dtype=np.uint32), np.full(n, 7, np.uint32)]
    rng = np.random.default_rng(0)
    big_f = [rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)]
    ew_u = Program.wrapped(tiny.buffers, 256, [Node.let_bind("i", gx + Expr.gid_y() * (65535 * 256)),
                                               Node.store("o", Expr.var("i"), Expr.load("a", Expr.var("i")) * 3
                                                          + Expr.load("b", Expr.var("i")))])
    fa = Expr.load("a", Expr.var("i"))
    ew_f = Program.wrapped([BufferDecl.read("a", 0, DataType.F32), BufferDecl.read("b", 1, DataType.F32),
                            BufferDecl.output("o", 2, DataType.F32)], 256,
                           [Node.let_bind("i", gx + Expr.gid_y() * (65535 * 256)),
                            Node.store("o", Expr.var("i"), fa * Expr.load("b", Expr.var("i")) + fa)])
    ew_div = Program.wrapped(ew_f.buffers, 256, [Node.let_bind("i", gx + Expr.gid_y() * (65535 * 256)),
                                                 Node.store("o", Expr.var("i"), fa / Expr.load("b", Expr.var("i")))])
    cfg = DispatchConfig(grid_override=grid_for(n))
    hand_f = Hand(dev, EW_F32, 3)
    hand_div = Hand(dev, EW_FDIV, 3)
    for name, prog, data, hand in (("u32", ew_u, big_u, hand_u), ("f32", ew_f, big_f, hand_f),
                                   ("fdiv", ew_div, big_f, hand_div)):
        pp = P.compile(b, prog)
        got = pp.dispatch(data, cfg)[0]
        want = hand.run(data, 4 * n, grid_for(n))
        res[f"ew_{name}_same_bytes"] = str(got == want)
        if name == "f32":   # numpy rounds a*b, then +a: the reference's bytes for normal data
            exact = (data[0] * data[1] + data[0]).tobytes()
            res["ew_f32_vyre_equals_numpy"] = str(got == exact)
            res["ew_f32_hand_equals_numpy"] = str(want == exact)
        if name == "fdiv":  # numpy's float32 division is correctly rounded (normal data here)
            exact = (data[0] / data[1]).tobytes()
            res["ew_fdiv_vyre_equals_numpy"] = str(got == exact)
            res["ew_fdiv_hand_equals_numpy"] = str(want == exact)
        vy = Resident(b, prog, data, 4 * n, cfg)
        _, _, bg = hand.bind(data, 4 * n)
        both_ms(res, f"ew_{name}", vy, hand, bg, grid_for(n), reps, batch)
        assert vy.output() == got, f"{name}: the resident run gave other bytes"
        vy.free()
    # u64 elementwise: vyre's u32 pairs against hand-written pairs
    n64 = 1 << (18 if cpu else 21 if a.quick else 23)
    res["ew_u64_n"] = n64
    big_64 = [rng.integers(0, 2**64, n64, dtype=np.uint64), rng.integers(0, 2**64, n64, dtype=np.uint64)]
    cfg64 = DispatchConfig(grid_override=grid_for(n64))
    for name, op, hand_op in (("u64_add", lambda x, y: x + y, U64_ADD), ("u64_mul", lambda x, y: x * y, U64_MUL)):
        i64 = Expr.var("i")
        prog = Program.wrapped([BufferDecl.read("a", 0, DataType.U64), BufferDecl.read("b", 1, DataType.U64),
                                BufferDecl.output("o", 2, DataType.U64)], 256,
                               [Node.let_bind("i", gx + Expr.gid_y() * (65535 * 256)),
                                Node.store("o", i64, op(Expr.load("a", i64), Expr.load("b", i64)))])
        pp = P.compile(b, prog)
        hand = Hand(dev, EW_U64.replace("OP", hand_op), 3)
        got = pp.dispatch(big_64, cfg64)[0]
        want = hand.run(big_64, 8 * n64, grid_for(n64))
        with np.errstate(over="ignore"):
            exact = op(big_64[0], big_64[1]).tobytes()
        res[f"ew_{name}_same_bytes"] = str(got == want == exact)
        vy = Resident(b, prog, big_64, 8 * n64, cfg64)
        _, _, bg = hand.bind(big_64, 8 * n64)
        both_ms(res, f"ew_{name}", vy, hand, bg, grid_for(n64), reps, batch)
        assert vy.output() == got, f"{name}: the resident run gave other bytes"
        vy.free()
    # tiled matmul
    m = 128 if cpu else 256 if a.quick else 512
    A, B = rng.standard_normal((2, m, m)).astype(np.float32)
    prog = X.matmul_tiled(m)
    mm = P.compile(b, prog)
    mcfg = DispatchConfig(grid_override=X.matmul_grid(m))
    hand_m = Hand(dev, MATMUL.replace("NN", str(m)), 3)
    got_b = mm.dispatch([A.ravel(), B.ravel()], mcfg)[0]
    got = np.frombuffer(got_b, np.float32)
    want = np.frombuffer(hand_m.run([A.ravel(), B.ravel()], 4 * m * m, (m // 16, m // 16, 1)), np.float32)
    res["matmul_n"] = m
    res["matmul_max_abs_diff_vs_hand"] = float(np.max(np.abs(got - want)))
    # the reference's bytes for this data (normal values): each product and each sum rounded,
    # k in order (a compiler that fused them into one rounding would differ)
    model = np.zeros((m, m), np.float32)
    for k in range(m):
        model = model + A[:, k:k + 1] * B[k:k + 1, :]
    res["matmul_vyre_equals_numpy_model"] = str(got_b == model.tobytes())
    res["matmul_hand_equals_numpy_model"] = str(want.tobytes() == model.tobytes())
    vy = Resident(b, prog, [A.ravel(), B.ravel()], 4 * m * m, mcfg)
    _, _, bg = hand_m.bind([A.ravel(), B.ravel()], 4 * m * m)
    both_ms(res, "matmul", vy, hand_m, bg, (m // 16, m // 16, 1), 2 * reps, 4 * batch)
    assert vy.output() == got_b, "matmul: the resident run gave other bytes"
    vy.free()
    emit("wgpu_kernels", res, a.json)


if __name__ == "__main__":
    main()
