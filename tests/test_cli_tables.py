"""`vyre backends` reads well at 80 columns (long reasons are notes under the table), and
`backends --explain` validates the program first: an invalid one names no backend."""

from __future__ import annotations

from typer.testing import CliRunner

from vyre.cli.app import app
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, wire


def test_backends_table_fits_80_columns():
    got = CliRunner().invoke(app, ["backends"], env={"COLUMNS": "80"})
    assert got.exit_code == 0, got.output
    table = [line for line in got.output.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and all(len(line) <= 80 for line in table)
    words = [line for line in table if line.startswith("│")]
    assert all(len(line.split("│")[3].strip()) != 1 for line in words if line.split("│")[3].strip())


def test_explain_validates_first(tmp_path):
    bad = Program.wrapped([BufferDecl.output("o", 0, DataType.U32, 4)], 64,
                          [Node.store("o", Expr.gid(0), Expr.var("nowhere"))])
    path = tmp_path / "bad.vyre"
    path.write_bytes(wire.encode(bad))
    got = CliRunner().invoke(app, ["backends", "--explain", str(path)])
    assert got.exit_code == 2
    assert "invalid program" in got.output and "V002" in got.output
    assert "vyre backends" not in got.output


def test_conform_prints_progress_when_piped_and_leaves_the_table_on_ctrl_c(monkeypatch, tmp_path):
    import vyre.conform as C

    def fake(backend, *, progress=None, **kw):
        for k in range(60):
            progress(f"case{k}")
        raise KeyboardInterrupt

    monkeypatch.setattr(C, "run_backend", fake)
    got = CliRunner().invoke(app, ["conform", "--backend", "reference", "--cert-dir", str(tmp_path)])
    assert got.exit_code == 130
    assert "reference: " in got.output and "(case" in got.output          # progress lines in a pipe
    assert "interrupted after 60/" in got.output and "vyre conform" in got.output


def test_conform_ctrl_c_leaves_the_interrupted_backends_counts_and_a_partial_certificate(monkeypatch, tmp_path):
    """Ctrl-C inside the real run_backend (here: at its 7th case) gives the interrupted
    backend's row its counts so far and writes a certificate marked partial, which never
    verifies; the finished-run certificate name is left alone."""
    import json
    import re

    from vyre.conform import runner
    from vyre.conform.runner import CaseResult, verify_certificate

    calls = [0]

    def check(backend, name, *args, **kw):
        calls[0] += 1
        if calls[0] == 7:
            raise KeyboardInterrupt
        return CaseResult(name, "fail" if calls[0] == 6 else "pass", "differs" if calls[0] == 6 else "")

    monkeypatch.setattr(runner, "_check", check)
    got = CliRunner().invoke(app, ["conform", "--backend", "reference", "--workers", "1", "--cert-dir",
                                   str(tmp_path)], env={"COLUMNS": "200"})
    assert got.exit_code == 130, got.output
    assert re.search(r"reference\s*│\s*5\s*│\s*1\s*│\s*0\s*│\s*\d+\s*│\s*interrupted after \d+/", got.output), got.output
    assert not (tmp_path / "reference.json").exists()
    cert = json.loads((tmp_path / "reference.partial.json").read_text())
    assert cert["partial"] is True and cert["passed"] is False
    assert cert["counts"]["pass"] == 5 and cert["counts"]["fail"] == 1 and cert["counts"]["error"] == 0
    ok, why = verify_certificate(cert)
    assert not ok and "partial" in why
