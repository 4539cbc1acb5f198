"""``jaxcert repair`` (docs/research.md §3): bad input exits 2 naming the argument; a repair cut short resumes
from its state file and finishes; the repaired parameters and repair.json are written."""

import json

import numpy as np
import pytest

from jaxcert.cli import main

EX = "jaxcert.detective.examples"
BASE = ["repair", "--model", f"{EX}:lj_planted_collapse", "--trainable", "strength", "--anchor-elements", "Mo",
        "--quiet"]


@pytest.mark.parametrize("extra, flag", [
    ([], "--findings"),
    (["--walls", "Mo"], "--walls"),
    (["--walls", "Mo-Xx"], "--walls"),
    (["--desorption", "Mo/H2O"], "--desorption"),
    (["--findings", "no-such-escalation.json"], "--findings"),
    (["--walls", "Mo-Mo", "--steps", "-1"], "--steps"),
    (["--walls", "Mo-Mo", "--lr", "0"], "--lr"),
    (["--walls", "Mo-Mo", "--anchor-elements", "Qq"], "--anchor-elements"),
])
def test_bad_input_exits_2_naming_the_argument(extra, flag, tmp_path, capsys):
    assert main([*BASE, "--out", str(tmp_path / "o"), *extra]) == 2
    assert flag in capsys.readouterr().err


def test_an_escalated_collapse_is_repaired_cut_short_resumed_and_checked(tmp_path, capsys):
    """investigate finds the planted Mo–Mo collapse; jaxcert repair, given its escalation.json, is cut short (exit
    1), refuses to overwrite its state without --resume (exit 2), resumes and solves it (exit 0); the repaired
    parameters pass the detective's own dimer check and the anchor drift stays within 2 meV/atom, 30 meV/Å."""
    import jax

    from jaxcert import models
    from jaxcert.detective import Committee, DimerConfig, Dimers, investigate
    from jaxcert.detective import examples as ex

    target = ex.lj_planted_collapse()
    com = [models.get("lj"), ex.lj_soft(), ex.lj_stiff()]
    res = investigate(Committee(target, com), [Dimers(DimerConfig(step=0.1))], elements=["Mo", "Cu"],
                      out=tmp_path / "inv", log=None, oracle_s=0)
    assert res.escalated and res.hypothesis.observable == "collapse"
    out = tmp_path / "o"
    args = [*BASE, "--findings", str(tmp_path / "inv" / "escalation.json"), "--lr", "20", "--every", "5",
            "--out", str(out)]
    assert main([*args, "--steps", "10"]) == 1  # cut short: the wall still collapses
    first = json.loads((out / "repair.json").read_text())
    assert first["steps"] == 10 and not first["solved"] and (out / "state.npz").is_file()
    assert [lo["name"] for lo in first["losses"]] == ["wall Mo-Mo"]
    assert main([*args, "--steps", "200"]) == 2  # a state is there: --resume or another folder
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--steps", "200", "--resume"]) == 0
    done = json.loads((out / "repair.json").read_text())
    assert done["solved"] and 10 < done["steps"] < 200 and done["history"][0]["step"] == 5  # continued, not redone
    wall = done["reports_after"]["wall Mo-Mo"]
    assert wall["monotonic"] and wall["above_floor"] and not done["reports_before"]["wall Mo-Mo"]["monotonic"]
    for name in ("anchor", "held-out anchor"):
        drift = done["reports_after"][name]
        assert drift["max_energy_drift_eV_per_atom"] <= 2e-3 and drift["max_force_rms_eV_per_A"] <= 0.03
    assert done["trainable"] == 1 and done["total"] > 1  # only the planted term's strength moved
    assert "solved after" in capsys.readouterr().out
    with np.load(out / "params.npz") as z:
        leaves = [z[f"leaf{k}"] for k in range(len(z.files))]
    repaired = target.replace(params=jax.tree.unflatten(jax.tree.structure(target.params), leaves))
    cell = Dimers(DimerConfig(step=0.1)).run(Committee(repaired, com), [{"elements": ["Mo", "Mo"]}])[0]
    assert not cell.suspicious_in("collapse")  # the detective's own check agrees
