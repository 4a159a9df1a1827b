"""docs/primitives.md is executed: every Python block runs on the preferred backend (or the
reference where none is available), and the layering rule for vyre.lib holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "primitives.md").read_text(), re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_every_block_runs(i, monkeypatch):
    from vyre.driver import BackendError, acquire_preferred_dispatch_backend

    try:
        acquire_preferred_dispatch_backend()
    except BackendError:
        monkeypatch.setenv("VYRE_BACKEND", "reference")
    exec(compile(BLOCKS[i], f"<docs/primitives.md block {i}>", "exec"), {"__name__": f"primitives_{i}"})


def test_every_public_call_is_in_the_docs():
    import vyre.lib

    text = (ROOT / "docs" / "primitives.md").read_text()
    for name in vyre.lib.__all__:
        if name not in ("CODES", "LibError"):
            assert f"`{name}(" in text, name
    for code in vyre.lib.CODES:
        assert f"| {code} |" in text, code
