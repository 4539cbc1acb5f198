"""``jaxcert investigate`` (docs/detective.md §8): bad input exits 2 naming the argument; an end-to-end run
writes the report directory and its ``reproduce.py`` prints the same headline numbers standalone."""

import json
import os
import subprocess
import sys

import pytest

from jaxcert.cli import main

EX = "jaxcert.detective.examples"
BASE = ["investigate", "--target", f"{EX}:lj_planted_dimers", "--committee", f"lj,{EX}:lj_soft"]


@pytest.mark.parametrize("extra, flag", [
    (["--protocols", "dimers,phonons"], "--protocols"),
    (["--elements", "Sb,XX"], "--elements"),
    (["--budget", "0"], "--budget"),
    (["--checks", "gauge"], "--checks"),
    (["--adsorbates", "CH4"], "--adsorbates"),
    (["--dtype", "float16"], "--dtype"),
    (["--oracle-seconds", "-1"], "--oracle-seconds"),
])
def test_bad_input_exits_2_naming_the_argument(extra, flag, tmp_path, capsys):
    assert main([*BASE, "--out", str(tmp_path / "o"), *extra]) == 2
    assert flag in capsys.readouterr().err


def test_bad_out_and_committee(tmp_path, capsys):
    assert main([*BASE, "--out", str(tmp_path / "missing" / "o")]) == 2
    assert "--out" in capsys.readouterr().err
    args = ["investigate", "--target", "lj", "--committee", "lj", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    assert "--committee" in capsys.readouterr().err
    assert main(["investigate", "--target", "nosuchmodel", "--committee", "lj", "--out", str(tmp_path / "o")]) == 2
    assert "nosuchmodel" in capsys.readouterr().err


def test_end_to_end_and_reproduce(tmp_path, capsys):
    out = tmp_path / "inv"
    rc = main([*BASE, "--protocols", "dimers", "--elements", "Sb,Si", "--out", str(out), "--oracle-seconds", "8"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "escalated dimers:" in text
    esc = json.loads((out / "escalation.json").read_text())
    assert esc["scope"]["elements"] == ["Sb"]
    assert any("GFN2-xTB" in line for line in esc["oracle"])  # indicative only (or "skipped" without tblite)
    for name in ("report.md", "report.html", "figure.svg", "reproduce.py", "evidence.jsonl"):
        assert (out / name).is_file()
    # resumable: the same command without --resume refuses, with it it continues from the memory
    assert main([*BASE, "--protocols", "dimers", "--elements", "Sb,Si", "--out", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    # resuming with protocols that leave out the escalated one: refused before anything is appended
    before = (out / "evidence.jsonl").read_bytes()
    assert main([*BASE, "--protocols", "constraints", "--elements", "Sb,Si", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--protocols" in err and "dimers" in err
    assert (out / "evidence.jsonl").read_bytes() == before
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAXCERT_CACHE_DIR": "off"}
    run = subprocess.run([sys.executable, str(out / "reproduce.py")], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    printed = [ln for ln in run.stdout.splitlines() if ": target " in ln]
    assert printed == esc["headline"]


def test_committee_old_sevennet_spelling_warns_naming_the_flag(tmp_path, capsys):
    """``--committee sevennet:...`` is the torch bridge, respelled with one warning line naming --committee."""
    assert main(["investigate", "--target", "lj", "--committee", "sevennet:7net-0",
                 "--out", str(tmp_path / "missing" / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("jaxcert: warning: --committee sevennet:7net-0 is the torch bridge; spell it "
                             "torch-sevennet:7net-0") and err[1].startswith("jaxcert: error: --out: no such directory")
