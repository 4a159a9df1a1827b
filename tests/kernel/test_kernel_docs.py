"""docs/kernels.md runs: its Python blocks execute in order as one notebook; and `help()`
renders the documentation of every public module (``help(vyre)`` once failed on
``vyre.settings``)."""

from __future__ import annotations

import importlib
import linecache
import pkgutil
import pydoc
import re
from pathlib import Path

import vyre

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "docs/kernels.md").read_text(), re.S)


def test_every_kernels_md_block_runs(monkeypatch):
    monkeypatch.delenv("VYRE_BACKEND", raising=False)
    assert len(BLOCKS) >= 5
    ns: dict = {"__name__": "kernels_md"}
    for i, block in enumerate(BLOCKS):
        name = f"<docs/kernels.md block {i}>"
        linecache.cache[name] = (len(block), None, block.splitlines(True), name)
        exec(compile(block, name, "exec"), ns)


def test_help_renders_every_public_module():
    assert "vyre" in pydoc.render_doc(vyre, renderer=pydoc.plaintext)
    for name in vyre.__dir__():
        getattr(vyre, name)          # every lazy name resolves
    for mod in pkgutil.walk_packages(vyre.__path__, "vyre."):
        if mod.name.startswith(("vyre.drivers.", "vyre.cli.__main__")) or ".__main__" in mod.name:
            continue
        m = importlib.import_module(mod.name)
        assert pydoc.render_doc(m, renderer=pydoc.plaintext)
