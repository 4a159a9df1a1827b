"""Every Python block of every page under docs/ runs in CI: the pages with their own test
(kernels, primitives, speculation) are named here with it, and the others run here, each page
as one notebook. A new page with Python blocks and no test fails `test_every_page_is_covered`."""

from __future__ import annotations

import linecache
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# pages whose blocks another test executes
COVERED_ELSEWHERE = {
    "kernels.md": "tests/kernel/test_kernel_docs.py",
    "primitives.md": "tests/lib/test_lib_docs_primitives.py",
    "speculation.md": "tests/test_literal_search.py",
}
RUN_HERE = ("cluster.md", "wgpu.md")


def _blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)


def test_every_page_is_covered():
    with_blocks = {p.name for p in DOCS.glob("*.md") if _blocks(p.name)}
    assert with_blocks == set(COVERED_ELSEWHERE) | set(RUN_HERE)
    for page, test in COVERED_ELSEWHERE.items():
        assert f"docs/{page}" in (ROOT / test).read_text() or page in (ROOT / test).read_text()


@pytest.mark.parametrize("page", RUN_HERE)
def test_every_python_block_of_the_page_runs(page, monkeypatch):
    if page == "cluster.md":
        pytest.importorskip("distributed")
        monkeypatch.setenv("VYRE_DASK_WORKERS", "1")   # the page's cluster, kept small for CI
    monkeypatch.delenv("VYRE_BACKEND", raising=False)
    blocks = _blocks(page)
    assert blocks
    ns: dict = {"__name__": "__main__"}                # the pages guard their cluster start
    for i, block in enumerate(blocks):
        name = f"<docs/{page} block {i}>"
        linecache.cache[name] = (len(block), None, block.splitlines(True), name)
        exec(compile(block, name, "exec"), ns)
