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


SWEEP_TOML = """
model = "sw"
structures = ["si_rattled.extxyz"]   # a file next to this TOML file
attacks = [{name = "fgsm"}]
epsilons = [0.02]
seeds = [42]
chunk = 1
db = "out/sweep.sqlite"              # relative to this TOML file
export = "out/runs.csv"
plots = "out/figs"
json = "out/sweep.json"

[config]
max_steps = 60
"""


def test_sweep_from_toml_then_flags_override(tmp_path, capsys):
    import ase.io
    from ase.build import bulk

    a = bulk("Si", cubic=True)
    a.rattle(0.05, seed=1)
    ase.io.write(tmp_path / "si_rattled.extxyz", a)
    (tmp_path / "out").mkdir()
    toml = tmp_path / "sweep.toml"
    toml.write_text(SWEEP_TOML)
    assert main(["sweep", str(toml)]) == 0
    cap = capsys.readouterr()
    assert "1/1 runs (100%)" in cap.err  # the progress bar, on stderr
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert doc["counts"] == {"requested": 1, "already_done": 0, "computed": 1, "remaining": 0}
    assert doc["config"]["max_steps"] == 60 and doc["structures"] == ["si_rattled.extxyz"]
    (run,) = doc["runs"]
    assert run["attack"] == "fgsm" and run["epsilon"] == 0.02 and run["dtype"] == "float64"
    assert len((tmp_path / "out" / "runs.csv").read_text().splitlines()) == 2
    assert (tmp_path / "out" / "figs" / "post_relaxation.max_displacement.png").exists()
    assert len(list((tmp_path / "out" / "sweep.sqlite.arrays").iterdir())) == 1
    # a flag wins over the TOML value: two ε requested, the stored one is skipped, nothing computed
    assert main(["sweep", str(toml), "--eps", "0.02,0.05", "--max-chunks", "0", "--quiet"]) == 0
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert doc["counts"] == {"requested": 2, "already_done": 1, "computed": 0, "remaining": 1}
    assert capsys.readouterr().err == ""  # --quiet: no progress bar
    # plot-sweep on the same store
    assert main(["plot-sweep", str(tmp_path / "out" / "sweep.sqlite"), "--out", str(tmp_path / "figs2"),
                 "--metrics", "steps_after,immediate.rdf_l1"]) == 0
    assert sorted(p.name for p in (tmp_path / "figs2").iterdir()) == ["bands.json", "immediate.rdf_l1.png",
                                                                      "steps_after.png"]


def test_sweep_settings_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "lj"\ndb = "x.sqlite"\nepsilon = [0.1]\n')
    with pytest.raises(SystemExit, match=r"unknown key\(s\) \['epsilon'\]"):
        main(["sweep", str(bad)])
    bad.write_text('model = "lj"\ndb = "x.sqlite"\n[config]\nfmax_ev = 0.1\n')
    with pytest.raises(SystemExit, match="unknown \\[config\\] key"):
        main(["sweep", str(bad)])
    with pytest.raises(SystemExit, match="no model"):
        main(["sweep", "--db", str(tmp_path / "x.sqlite")])
    with pytest.raises(SystemExit, match="no store"):
        main(["sweep", "--model", "lj"])
    with pytest.raises(SystemExit, match="no such TOML"):
        main(["sweep", str(tmp_path / "missing.toml")])
    with pytest.raises(SystemExit, match="no such store"):
        main(["plot-sweep", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path)])
