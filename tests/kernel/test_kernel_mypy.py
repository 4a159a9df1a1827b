"""A kernel file as a user writes it type-checks with mypy (issue 25: `py.typed` ships, so
annotations like ``x: In[f32]`` and ``@vyre.kernel`` must be valid to a type checker), and
mypy still catches a real mistake in one."""

from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the test extra")
HERE = Path(__file__).resolve().parent


def _mypy(path: Path) -> tuple[str, int]:
    out, err, code = api.run(["--no-incremental", "--follow-imports=silent", "--no-error-summary",
                              "--cache-dir=/dev/null", str(path)])
    return out + err, code


def test_a_user_kernel_file_type_checks(tmp_path):
    text, code = _mypy(HERE / "typed" / "user_kernels.py")
    assert code == 0, text
    bad = tmp_path / "bad_kernels.py"
    bad.write_text((HERE / "typed" / "user_kernels.py").read_text().replace(
        "out[i] = a * x[i] + y[i]", "out[i] = a * x[i] + 'text'"))
    text, code = _mypy(bad)
    assert code == 1 and "Unsupported operand" in text, text
