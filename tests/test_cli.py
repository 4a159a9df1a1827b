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


# ---------------------------------------------------------------------------- the real command
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

from vyre.ir import BufferDecl, DataType, Expr, Node, Program, wire  # noqa: E402


def vyre_cmd(*args, env=None, check_code=None):
    """Run ``python -m vyre`` as a user would (its real stdout, stderr and exit code)."""
    full_env = {**os.environ, "COLUMNS": "60", **(env or {})}
    r = subprocess.run([sys.executable, "-m", "vyre", *args], capture_output=True, text=True,
                       env=full_env, timeout=300)
    if check_code is not None:
        assert r.returncode == check_code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    return r


def test_version_and_python_m_vyre():
    r = vyre_cmd("--version", check_code=0)
    assert r.stdout.strip() == f"vyre {__import__('vyre').__version__}"


def test_markup_is_never_swallowed_and_source_is_not_wrapped(tmp_path):
    f = tmp_path / "p.vyre"
    gx = Expr.gid_x()
    p = Program.wrapped([BufferDecl.read("a_long_buffer_name_to_force_wrapping", 0, DataType.U32),
                         BufferDecl.output("out", 1, DataType.U32)], 64,
                        [Node.store("out", gx, Expr.load("a_long_buffer_name_to_force_wrapping", gx) + 1)])
    f.write_bytes(wire.encode(p))
    r = vyre_cmd("inspect", str(f), "--backend", "opencl", check_code=0)
    assert "out[gid.x] = add(a_long_buffer_name_to_force_wrapping[gid.x], 1u32)" in r.stdout
    from vyre.driver import acquire

    src = acquire("opencl").generated_source(p)
    assert src.strip() in r.stdout          # every line whole, even at 60 columns and piped
    r = vyre_cmd("backends", check_code=0, env={"COLUMNS": "400"})
    from vyre.driver.install import install_hint

    assert install_hint("cuda") in r.stdout   # the cuda Fix keeps its brackets


def test_user_errors_go_to_stderr_with_exit_2(tmp_path):
    r = vyre_cmd("inspect", str(tmp_path / "missing.vyre"), check_code=2)
    assert r.stdout == "" and "error:" in r.stderr and "Fix:" in r.stderr
    r = vyre_cmd("bench", "--backend", "bogus", check_code=2)
    assert "bogus" in r.stderr and "Fix:" in r.stderr
    r = vyre_cmd("backends", "--explain", str(tmp_path / "nope.vyre"), check_code=2)
    assert "Fix:" in r.stderr
    bad = tmp_path / "bad.vyre"
    bad.write_bytes(b"VYRE" + b"\0" * 60)
    r = vyre_cmd("backends", "--explain", str(bad), check_code=2)
    assert "Fix:" in r.stderr
    vyre_cmd("conform", "--random", "-5", check_code=2)


def test_inspect_of_an_invalid_program_exits_1(tmp_path):
    p = Program.wrapped([BufferDecl.output("o", 0, DataType.U32)], 1, [Node.store("o", 0, Expr.var("nope"))])
    f = tmp_path / "invalid.vyre"
    f.write_bytes(wire.encode(p))
    r = vyre_cmd("inspect", str(f), check_code=1)
    assert "V002" in r.stdout


def test_demo_runs_on_the_preferred_backend_and_checks_bytes():
    r = vyre_cmd("demo", check_code=0)
    assert "byte-identical to the reference" in r.stdout and "ran on " in r.stdout


def test_cache_info_and_clear(tmp_path):
    env = {"VYRE_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "cache" / "kernels").mkdir(parents=True)
    (tmp_path / "cache" / "kernels" / "k.bin").write_bytes(b"x" * 10)
    r = vyre_cmd("cache", "info", env=env, check_code=0)
    assert "1 file(s)" in r.stdout and "kernels: 1" in r.stdout
    r = vyre_cmd("cache", "clear", env=env, check_code=0)
    assert "removed 1 file(s)" in r.stdout and not (tmp_path / "cache").exists()


def test_doctor_uses_package_metadata_and_ocl_icd_vendors(tmp_path):
    (tmp_path / "fake.icd").write_text("libfake.so\n")
    r = vyre_cmd("doctor", env={"OCL_ICD_VENDORS": str(tmp_path)}, check_code=0)
    assert "fake.icd" in r.stdout and str(tmp_path) in r.stdout
    assert f"numpy              {np.__version__}" in r.stdout


def test_unknown_backend_options_get_a_did_you_mean():
    for cmd in (["conform", "--backend", "opencll"], ["bench", "--backend", "refrence", "--repeats", "1"],
                ["demo", "--backend", "wgpuu"]):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 2 and "there is no backend" in r.output, (cmd, r.output)
        assert "did you mean" in r.output and "not supported by this backend" not in r.output, (cmd, r.output)
