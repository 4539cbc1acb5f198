"""``jaxcert attack`` at a stationary point and with a large ε (docs/attacks.md §6): the warnings, in the terminal
and in the JSON, and the seeded ``--random-start``.

Relaxed diamond Si (8 atoms, ``--min-length 0``) with Stillinger-Weber is a minimum where the energy gradient is
exactly zero by symmetry in float64.  Every command here has the same grid shape and gets the same model object,
so one compiled program serves them all.
"""

import json

import pytest

import jaxcert
from jaxcert.cli import attack as attack_cli
from jaxcert.cli import main

EPS = (0.05, 3.0)  # 3 Å > half the 5.43 Å cell
BASE = ["attack", "--model", "sw", "--structure", "Si", "--min-length", "0", "--attack", "fgsm", "--eps",
        ",".join(map(str, EPS)), "--seed", "42,43", "--max-steps", "40"]


@pytest.fixture(scope="module")
def sw():
    return jaxcert.models.get("sw")


@pytest.fixture(autouse=True)
def _one_model(monkeypatch, sw):
    # a fresh Model per command would carry new functions and recompile every program
    monkeypatch.setattr(attack_cli, "load_model", lambda spec, defects=None, max_batch=None: sw)


def _run(tmp_path, capsys, name, *extra):
    out = tmp_path / f"{name}.json"
    assert main([*BASE, *extra, "--json", str(out)]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def test_plain_fgsm_on_a_stationary_input_is_refused_with_the_reason(capsys):
    assert main(BASE) == 2  # before any relaxation or compilation of the attack
    err = capsys.readouterr().err
    assert "--attack: fgsm on a stationary point moves nothing" in err and "--random-start" in err and "pgd" in err


def test_stationary_point_is_reported_and_random_start_moves(tmp_path, capsys, sw, monkeypatch):
    # the library still runs it (and warns): the refusal is the command line's
    monkeypatch.setattr(attack_cli, "refuse_stationary_sign_attacks", lambda *a, **k: None)
    text, doc = _run(tmp_path, capsys, "plain")
    runs = doc["runs"]
    assert len(runs) == 4 and all(r["stationary_start"] and r["small_grad_fraction"] == 1.0 for r in runs)
    for r in runs:
        assert r["random_start"] == "none" and r["immediate"]["linf_displacement"] == 0.0
        assert "stationary point" in r["warnings"][0] and "moved nothing" in r["warnings"][0]
        assert r["epsilon_exceeds_half_cell"] is (r["epsilon"] > 5.431 / 2)
        assert any("half the smallest lattice vector" in w for w in r["warnings"]) is (r["epsilon"] > 2.7155)
    assert text.count("warning: stationary point") == 4 and "--random-start" in text
    assert text.count("exceeds half the smallest lattice vector") == 2
    assert any("stationary point" in w for w in doc["warnings"])

    text, rs = _run(tmp_path, capsys, "random", "--random-start")
    assert rs["config"]["random_start"] is True and "random sign start" in text
    by = {(r["attack"], r["epsilon"], r["seed"]): r for r in rs["runs"]}
    for (_attack, eps, _seed), r in by.items():
        assert r["random_start"] == "sign" and r["random_start_fraction"] == 0.5
        assert r["attack_label"] == "R+FGSM" and r["alpha_A"] == pytest.approx(eps / 2)
        assert r["stationary_start"] and "seeded random sign start" in r["warnings"][0]
        moved = r["immediate"]["linf_displacement"]
        assert 0 < moved <= eps * (1 + 1e-12)
        if eps == EPS[0]:  # (at 3 Å the minimum image folds the displacement back into the cell)
            assert r["immediate"]["delta_energy"] > 0
            assert moved == pytest.approx(eps, rel=1e-12)  # ±ε/2 then ±ε/2: some coordinate reaches ε
    a, b = by[("fgsm", EPS[0], 42)], by[("fgsm", EPS[0], 43)]  # the seed sets the random start
    assert a["immediate"]["delta_energy"] != b["immediate"]["delta_energy"]
