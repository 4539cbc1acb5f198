"""``jaxcert attack`` end to end (one small run)."""

import json
import re

import pytest

from jaxcert.cli import main


def test_attack_command_writes_both_stages(tmp_path, capsys):
    out = tmp_path / "a.json"
    rc = main(["attack", "--model", "sw", "--structure", "Si", "--min-length", "0", "--attack", "pgd", "--eps",
               "0.05", "--seed", "42", "--rattle", "0.02", "--json", str(out)])
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
    # what was built is recorded: the conventional 8-atom cell, not repeated (--min-length 0), rattled
    info = doc["structure_info"]
    assert info["n_atoms"] == 8 and info["repeats"] == [1, 1, 1] and "cubic=True" in info["source"]
    assert info["rattle_A"] == 0.02 and run["random_start"] == "uniform" and run["warnings"] == []


def test_attack_command_rejects_alpha_unless_pgd(capsys):
    assert main(["attack", "--model", "sw", "--structure", "Si", "--attack", "ifgsm", "--alpha-ratio", "0.2"]) == 2
    assert "pgd only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="only pgd takes alpha_ratio"):
        from jaxcert.attacks import AttackSpec

        AttackSpec("ifgsm", 10, 0.2)


def test_sweep_command_counts_without_computing(tmp_path, capsys):
    db, out = tmp_path / "s.sqlite", tmp_path / "s.json"
    rc = main(["sweep", "--model", "lj", "--structures", "srtio3,graphite,Si", "--attack", "fgsm,pgd",
               "--eps", "0.01,0.1", "--seed", "42,43", "--db", str(db), "--dry-run", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["counts"] == {"requested": 24, "already_done": 0, "computed": 0, "remaining": 24}
    assert doc["runs"] == [] and db.exists()
    # the element symbol became the conventional cell repeated to every lattice vector >= 8 Å (2x2x2, 64 atoms)
    si = doc["structure_info"]["Si"]
    assert si["n_atoms"] == 64 and si["repeats"] == [2, 2, 2] and "bulk('Si', cubic=True)" in si["source"]
    assert doc["structure_info"]["srtio3"]["n_atoms"] == 5  # crystal labels are built as they are


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
    # a flag wins over the TOML value: two ε requested, the stored one is skipped, nothing computed; an empty
    # --plots wins over the TOML's plots (the figures above are not drawn a second time)
    assert main(["sweep", str(toml), "--eps", "0.02,0.05", "--dry-run", "--quiet", "--plots", ""]) == 0
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert doc["counts"] == {"requested": 2, "already_done": 1, "computed": 0, "remaining": 1}
    cap = capsys.readouterr()
    assert cap.err == ""  # --quiet: no progress bar
    assert "wrote 1 rows" in cap.out and "files to" not in cap.out
    # plot-sweep on the same store
    assert main(["plot-sweep", str(tmp_path / "out" / "sweep.sqlite"), "--out", str(tmp_path / "figs2"),
                 "--metrics", "steps_after,immediate.rdf_l1"]) == 0
    assert sorted(p.name for p in (tmp_path / "figs2").iterdir()) == ["bands.json", "immediate.rdf_l1.png",
                                                                      "steps_after.png"]


def test_sweep_settings_errors(tmp_path, capsys):
    def fails(argv, pattern):
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert re.search(pattern, line), line

    bad = tmp_path / "bad.toml"
    bad.write_text('model = "lj"\ndb = "x.sqlite"\nepsilon = [0.1]\n')
    fails(["sweep", str(bad)], r"unknown key\(s\) \['epsilon'\]")
    bad.write_text('model = "lj"\ndb = "x.sqlite"\n[config]\nfmax_ev = 0.1\n')
    fails(["sweep", str(bad)], "unknown \\[config\\] key")
    fails(["sweep", "--db", str(tmp_path / "x.sqlite")], "no model")
    fails(["sweep", "--model", "lj"], "no store")
    fails(["sweep", str(tmp_path / "missing.toml")], "no such TOML")
    fails(["plot-sweep", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path)], "no such store")


#: Keys of ``jaxcert attack --json`` that may differ between two runs of one command: wall time and machine load.
VOLATILE = ("wall_s", "machine.load_average_1_5_15min")


def _drop(doc, dotted):
    *path, last = dotted.split(".")
    for p in path:
        doc = doc[p]
    del doc[last]


def test_attack_json_is_deterministic_across_processes(tmp_path):
    """The same ``jaxcert attack ... --json`` command twice, as two fresh processes, in float64 and float32: the
    JSON is byte-identical once exactly the VOLATILE keys are dropped.  The second process of each pair loads the
    programs the first compiled (the CLI's persistent compilation cache, as a user's second run would), and the
    command takes both random starts (PGD uniform, R+FGSM sign), seeded.  The two dtypes run side by side; LJ on the
    4-atom fcc Cu cell keeps the four processes cheap (SW Si: test_stationary.py)."""
    import os
    import subprocess
    import sys

    import jaxcert

    root = os.path.dirname(os.path.dirname(jaxcert.__file__))

    def start(dtype, k):
        env = dict(os.environ, JAX_PLATFORMS="cpu", JAXCERT_CACHE_DIR=str(tmp_path / f"xla-{dtype}"),
                   PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = [sys.executable, "-m", "jaxcert.cli", "attack", "--model", "lj", "--structure", "Cu", "--min-length",
               "0", "--attack", "fgsm,pgd", "--random-start", "--eps", "0.05", "--seed", "42", "--n-steps", "3",
               "--max-steps", "50", "--dtype", dtype, "--json", str(tmp_path / f"{dtype}-{k}.json")]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)

    texts = {}
    for k in (1, 2):
        procs = {dtype: start(dtype, k) for dtype in ("float64", "float32")}
        for dtype, p in procs.items():
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-3000:]
            texts[dtype, k] = out
    for dtype in ("float64", "float32"):
        raw = [(tmp_path / f"{dtype}-{k}.json").read_text() for k in (1, 2)]
        docs = [json.loads(r) for r in raw]
        for d in docs:
            for key in VOLATILE:
                _drop(d, key)
        assert json.dumps(docs[0], indent=2) == json.dumps(docs[1], indent=2), dtype
        fgsm, pgd = docs[0]["runs"]
        assert docs[0]["dtype"] == dtype and fgsm["dtype"] == dtype
        # relaxed fcc Cu is a stationary point in both dtypes (float32 round-off stays below its tolerance)
        assert fgsm["stationary_start"] and pgd["stationary_start"] and fgsm["random_start"] == "sign"
        assert 0 < fgsm["immediate"]["linf_displacement"] <= 0.05 + 2e-6  # float32 positions: ulp(5 Å) ~ 5e-7
        assert "warning: stationary point" in texts[dtype, 1]
        same = [texts[dtype, k].replace(f"{dtype}-{k}.json", "OUT") for k in (1, 2)]  # the last line names the file
        assert same[0] == same[1]
