"""``jaxcert attack`` end to end (one small run)."""

import json

import pytest

from jaxcert.cli import main


def test_attack_command_writes_both_stages(tmp_path, capsys):
    out = tmp_path / "a.json"
    rc = main(["attack", "--model", "sw", "--structure", "Si", "--attack", "pgd", "--eps", "0.05", "--seed", "42",
               "--rattle", "0.02", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "immediate" in text and "post-relax" in text and "PGD eps=0.05" in text
    doc = json.loads(out.read_text())
    assert doc["schema"] == "jaxcert-attack/1" and doc["config"]["max_steps"] == 300
    (run,) = doc["runs"]
    assert run["seed"] == 42 and run["attack"] == "pgd" and run["n_steps"] == 10
    assert run["alpha_A"] == pytest.approx(0.005)
    assert 0 < run["immediate"]["linf_displacement"] <= 0.05 + 1e-12
    assert run["converged_before"] is True and run["converged_after"] is True
    assert run["post_relaxation"]["max_displacement"] < run["immediate"]["max_displacement"]
    assert "machine" in doc


def test_attack_command_rejects_alpha_unless_pgd():
    with pytest.raises(SystemExit, match="pgd only"):
        main(["attack", "--model", "sw", "--structure", "Si", "--attack", "ifgsm", "--alpha-ratio", "0.2"])
    with pytest.raises(ValueError, match="only pgd takes alpha_ratio"):
        from jaxcert.attacks import AttackSpec

        AttackSpec("ifgsm", 10, 0.2)


def test_sweep_command_counts_without_computing(tmp_path, capsys):
    db, out = tmp_path / "s.sqlite", tmp_path / "s.json"
    rc = main(["sweep", "--model", "lj", "--structures", "srtio3,graphite,Si", "--attack", "fgsm,pgd",
               "--eps", "0.01,0.1", "--seed", "42,43", "--db", str(db), "--max-chunks", "0", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["counts"] == {"requested": 24, "already_done": 0, "computed": 0, "remaining": 24}
    assert doc["runs"] == [] and db.exists()
