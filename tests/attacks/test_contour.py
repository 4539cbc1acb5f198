"""Contour baseline (docs/attacks.md §4) on SW Si: iso-energy, step bound, seeded, endpoint relaxation."""

import numpy as np
import pytest
from ase.build import bulk

import jaxcert
from jaxcert.attacks.contour import ContourConfig, contour

CFG = ContourConfig(n_steps=15)


def test_contour_short_run():
    model = jaxcert.models.get("sw")
    a = bulk("Si", cubic=True)
    a.rattle(0.05, seed=1)
    r = contour(model, a, seed=42, beta=0.1, config=CFG)
    rows = r["rows"]
    assert [x["step"] for x in rows] == list(range(CFG.n_steps + 1))
    assert r["pre_relaxation"]["converged"] and r["post_relaxation"]["converged"]
    assert rows[0]["max_displacement"] == 0.0 and rows[-1]["max_displacement"] > 0
    # maxstep bounds the 3N step vector, so no atom leaves a ball of radius n·maxstep
    assert r["summary"]["max_displacement"] <= CFG.n_steps * CFG.maxstep
    assert max(x["step_size"] for x in rows) <= CFG.maxstep * (1 + 1e-9)
    assert r["summary"]["max_abs_energy_deviation_mev_per_atom"] < 0.1  # stays on the contour
    assert r["endpoint"]["max_displacement"] == pytest.approx(rows[-1]["max_displacement"], rel=1e-9)
    again = contour(model, a, seed=42, beta=0.1, config=CFG)
    np.testing.assert_array_equal([x["energy"] for x in rows], [x["energy"] for x in again["rows"]])
    other = contour(model, a, seed=43, beta=0.1, config=CFG)
    assert other["rows"][-1]["mean_displacement"] != rows[-1]["mean_displacement"]
