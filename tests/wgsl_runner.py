"""Run a hand-written WGSL compute shader on the local wgpu adapter (lavapipe in CI): for
tests that check WGSL helper functions directly, below vyre's IR (the software float64 of
vyre.lower.crmath). Inputs and outputs are arrays of u32 words."""

from __future__ import annotations

import numpy as np
import pytest

_DEVICE: list = []


def device():
    """The wgpu device (skips the test where wgpu or an adapter is missing)."""
    if not _DEVICE:
        wgpu = pytest.importorskip("wgpu")
        from vyre.drivers.wgpu.backend import _runtime_dir

        _runtime_dir()
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            pytest.skip("no wgpu adapter")
        lim = adapter.limits
        want = {k: lim[k] for k in ("max-storage-buffer-binding-size", "max-buffer-size",
                                    "max-compute-workgroups-per-dimension") if k in lim}
        _DEVICE.append((wgpu, adapter.request_device_sync(required_limits=want)))
    return _DEVICE[0]


def kernel(helpers: str, body: str, n_in: int, in_words: int = 2, out_words: int = 2) -> str:
    """A module of ``helpers`` plus a kernel: invocation ``i`` binds ``a0..a{n_in-1}`` (each
    ``in_words`` u32 words: ``u32`` or ``vec2<u32>``) and stores ``body`` (an expression of
    that type or ``u32``/``vec2<u32>`` per ``out_words``)."""
    tin = "u32" if in_words == 1 else "vec2<u32>"
    tout = "u32" if out_words == 1 else "vec2<u32>"
    decl = "\n".join(f"@group(0) @binding({k}) var<storage, read> in{k}: array<{tin}>;" for k in range(n_in))
    loads = " ".join(f"let a{k} = in{k}[i];" for k in range(n_in))
    return f"""{helpers}
{decl}
@group(0) @binding({n_in}) var<storage, read_write> out: array<{tout}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {{
    let i = g.x + g.y * nw.x * 64u;
    if (i >= arrayLength(&out)) {{ return; }}
    {loads}
    out[i] = {body};
}}
"""


def run(source: str, inputs: list[np.ndarray], n: int, out_words: int = 2) -> np.ndarray:
    """Dispatch ``source``'s ``main`` over ``n`` invocations; the outputs as u32 words."""
    wgpu, dev = device()
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    bufs = [dev.create_buffer_with_data(data=np.ascontiguousarray(a).view(np.uint32), usage=usage) for a in inputs]
    out = dev.create_buffer(size=4 * out_words * n, usage=usage)
    module = dev.create_shader_module(code=source)
    pipe = dev.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0),
                                  entries=[{"binding": k, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                                           for k, b in enumerate([*bufs, out])])
    enc = dev.create_command_encoder()
    pass_ = enc.begin_compute_pass()
    pass_.set_pipeline(pipe)
    pass_.set_bind_group(0, group)
    groups = (n + 63) // 64
    gx = min(groups, 65535)
    pass_.dispatch_workgroups(gx, (groups + gx - 1) // gx, 1)
    pass_.end()
    dev.queue.submit([enc.finish()])
    return np.frombuffer(dev.queue.read_buffer(out), np.uint32).copy()
