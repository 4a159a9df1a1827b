"""The documentation is executed and checked: every Python block of the README runs, the
settings table is the one `vyre.driver.settings` defines, and no module reads a ``VYRE_*``
variable behind its back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vyre.driver import settings

ROOT = Path(__file__).resolve().parent.parent
README_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_the_readme_has_python_blocks():
    assert len(README_BLOCKS) >= 2


@pytest.mark.parametrize("i", range(len(README_BLOCKS)))
def test_every_readme_python_block_runs(i, monkeypatch):
    import linecache

    monkeypatch.delenv("VYRE_BACKEND", raising=False)
    name = f"<README.md block {i}>"    # registered like a notebook cell, so kernels see their source
    linecache.cache[name] = (len(README_BLOCKS[i]), None, README_BLOCKS[i].splitlines(True), name)
    exec(compile(README_BLOCKS[i], name, "exec"), {"__name__": f"readme_{i}"})


def test_settings_table_is_documented_and_complete():
    assert settings.table_markdown() in (ROOT / "docs" / "settings.md").read_text()
    read = set()
    for path in (ROOT / "src" / "vyre").rglob("*.py"):
        read |= set(re.findall(r"\"(VYRE_[A-Z_]+)\"", path.read_text()))
    documented = {s.name for s in settings.SETTINGS}
    assert read <= documented, read - documented
    offenders = [str(p) for p in (ROOT / "src" / "vyre").rglob("*.py")
                 if p.name != "settings.py" and re.search(r"environ[^\n]*VYRE_", p.read_text())]
    assert not offenders


def test_the_user_facing_api_is_documented():
    """Every public method of the classes users build programs and backends with has a
    docstring (inherited ones count: `inspect.getdoc`)."""
    import inspect

    import vyre.kernel
    from vyre.driver import CompiledPipeline, DispatchConfig, VyreBackend
    from vyre.ir import BufferDecl, Expr, Function, Node, Program

    missing = []
    for cls in (VyreBackend, CompiledPipeline, DispatchConfig, Expr, Node, Program, BufferDecl, Function):
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                continue
            if not inspect.getdoc(member):
                missing.append(f"{cls.__name__}.{name}")
    for name in vyre.kernel.__all__:
        if not inspect.getdoc(getattr(vyre.kernel, name)):
            missing.append(f"vyre.kernel.{name}")
    assert not missing, missing
