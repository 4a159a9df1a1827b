"""How to install one of vyre's optional parts, in words that work where vyre runs.

`install_hint("cuda")` is the pip command every "not installed" Fix quotes: ``pip install
'vyre[cuda]'`` for an installed release, or ``pip install -e '/path/to/clone[cuda]'`` when vyre
runs from a clone (an editable install, as ``make demo`` and ``make test`` make), where the
first form would fetch a different vyre or none at all. Read once from vyre's own metadata.
"""

from __future__ import annotations

import functools
import json
from urllib.parse import unquote, urlparse


@functools.cache
def _editable_root() -> str | None:
    try:
        from importlib.metadata import distribution

        text = distribution("vyre").read_text("direct_url.json")
        info = json.loads(text) if text else {}
    except Exception:   # no metadata (vyre on sys.path only), or unreadable: a plain hint
        return None
    if not info.get("dir_info", {}).get("editable"):
        return None
    url = urlparse(info.get("url", ""))
    return unquote(url.path) if url.scheme == "file" and url.path else None


def install_hint(extra: str) -> str:
    """The pip command that adds vyre's optional ``extra`` (cuda, opencl, wgpu, dask, ...)."""
    root = _editable_root()
    return f"pip install -e '{root}[{extra}]'" if root else f"pip install 'vyre[{extra}]'"
