"""The `vyre` command end to end (typer's runner, real files)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from vyre.cli.app import app

runner = CliRunner()


def test_demo_and_inspect_round_trip(tmp_path):
    f = tmp_path / "demo.vyre"
    r = runner.invoke(app, ["demo", "--save", str(f)])
    assert r.exit_code == 0 and "fingerprint" in r.output and "out = fma" in r.output
    r = runner.invoke(app, ["inspect", str(f)])
    assert r.exit_code == 0 and "diagnostics: none" in r.output


def test_inspect_rejects_corrupt_files_with_fix(tmp_path):
    f = tmp_path / "bad.vyre"
    f.write_bytes(b"VYRE garbage")
    r = runner.invoke(app, ["inspect", str(f)])
    assert r.exit_code == 2 and "Fix:" in r.output


def test_backends_and_doctor_list_every_backend():
    for cmd in (["backends"], ["doctor"]):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 0
        for bid in ("cuda", "opencl", "reference"):
            assert bid in r.output


def test_conform_verify_and_oob_report(tmp_path):
    r = runner.invoke(app, ["conform", "--oob-report"])
    assert r.exit_code == 0 and "oob.load_store" in r.output
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"digest": "0"}))
    r = runner.invoke(app, ["conform", "--verify", str(bad)])
    assert r.exit_code == 1 and "invalid" in r.output
