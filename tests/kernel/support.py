"""Helpers for the kernel-language tests: compile a kernel from source text (registered with
linecache, so errors name its lines), and run a kernel on a backend fixture, where a backend
that refuses it must refuse with the kernel-words refusal (K024)."""

from __future__ import annotations

import linecache
import textwrap
from typing import Any

import pytest

import vyre
import vyre.kernel as vk

_N = [0]


def compile_source(src: str, extra: dict[str, Any] | None = None) -> Any:
    """Exec ``src`` (a module text defining kernels/funcs) under a fake file name that
    linecache knows; returns the namespace."""
    _N[0] += 1
    name = f"<kernel-src-{_N[0]}>"
    text = textwrap.dedent(src)
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    ns: dict[str, Any] = {"vyre": vyre, **{k: getattr(vk, k) for k in vk.__all__ if k != "log"}}
    ns["log"] = vk.log
    ns.update(extra or {})
    exec(compile(text, name, "exec"), ns)
    return ns


def run(kernel: Any, backend: Any, *args: Any, refused_on: tuple[str, ...] = (), **kw: Any) -> Any:
    """``kernel(*args, backend=backend)``; on a backend listed in ``refused_on`` the call must
    be refused with K024 instead (returns None then)."""
    if backend.id() in refused_on:
        from vyre.kernel.launch import KernelRefused

        with pytest.raises(KernelRefused) as err:
            kernel(*args, backend=backend, **kw)
        assert err.value.kernel_code == "K024" and err.value.code == 1002
        assert "vyre." not in err.value.message, err.value.message   # no op ids
        return None
    return kernel(*args, backend=backend, **kw)
