"""A kernel file as a user writes it type-checks with mypy (issue 25: `py.typed` ships, so
annotations like ``x: In[f32]`` and ``@vyre.kernel`` must be valid to a type checker), and
mypy still catches a real mistake in one. N-D and fixed-size annotations (``In[f32, :, :]``,
``Out[u32, 32]``) type-check with the `vyre.kernel.mypy_plugin` plugin enabled, by the
configuration docs/kernels.md gives (its ``toml`` block, used as the project's pyproject.toml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the test extra")
HERE = Path(__file__).resolve().parent
DOC_CONFIG = re.findall(r"```toml\n(.*?)```", (HERE.parents[1] / "docs/kernels.md").read_text(), re.S)


USER = HERE / "typed" / "user_kernels.py"
PACKAGE = HERE.parents[1] / "src" / "vyre" / "kernel"   # vyre.kernel itself: type-clean too
MARK = "# ---- N-D and fixed-size buffers"


def _mypy(paths: list[Path], config: Path) -> tuple[str, int]:
    out, err, code = api.run(["--no-incremental", "--follow-imports=silent", "--no-error-summary",
                              "--cache-dir=/dev/null", f"--config-file={config}", *map(str, paths)])
    return out + err, code


def _errors(text: str, path: Path) -> str:
    return "".join(line for line in text.splitlines(True) if Path(line.split(":", 1)[0]).name == path.name)


def test_a_user_kernel_file_type_checks(tmp_path):
    """One mypy run with the plugin: the user file is clean; a str added to a 1-D or an N-D
    buffer's element is caught (the buffer keeps its element type); a zero axis is refused;
vyre.kernel's own modules are clean.
    One run without it: the 1-D part needs no plugin; ``In[f32, :, :]`` does."""
    plain, plugged = tmp_path / "plain.ini", tmp_path / "pyproject.toml"
    plain.write_text("[mypy]\n")
    assert len(DOC_CONFIG) == 1 and "vyre.kernel.mypy_plugin" in DOC_CONFIG[0]
    plugged.write_text(DOC_CONFIG[0])
    user = USER.read_text()
    bad, bad_nd, one_d = tmp_path / "bad_kernels.py", tmp_path / "bad_nd.py", tmp_path / "one_d_kernels.py"
    bad.write_text(user.replace("out[i] = a * x[i] + y[i]", "out[i] = a * x[i] + 'text'"))
    bad_nd.write_text(user.replace("out[y, x] = (img[y, x] + img[y, x + 1]) * 0.5",
                                   "out[y, x] = img[y, x] + 'text'")
                      .replace("tile: Out[u32, 4, 8]", "tile: Out[u32, 0, 8]"))
    one_d.write_text(user.split(MARK)[0])
    text, code = _mypy([USER, bad, bad_nd, PACKAGE], plugged)
    assert code == 1 and not _errors(text, USER), text
    assert not [line for line in text.splitlines() if "src/vyre/kernel/" in line.split(":", 1)[0]], text
    assert "Unsupported operand" in _errors(text, bad), text
    nd = _errors(text, bad_nd)
    assert "Unsupported operand" in nd and 'axes are ":" or positive integers' in nd, text
    text, code = _mypy([one_d, USER], plain)
    assert not _errors(text, one_d), text
    assert "expects 1 type argument" in _errors(text, USER), text
