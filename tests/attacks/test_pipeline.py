"""Relax → attack → relax: vmapped grid = Python loop, honest convergence flags, metric rows."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk

import jaxcert
from jaxcert import attacks as A
from jaxcert.attacks import metrics

EPS = (0.02, 0.5)
SEEDS = (42, 43)
SPEC = A.AttackSpec("pgd", 3)
CFG = A.PipelineConfig(max_steps=60)  # short limit: ε = 0.5 Å runs hit it, ε = 0.02 Å runs converge


@pytest.fixture(scope="module")
def grid():
    model = jaxcert.models.get("sw")
    structures = []
    for seed in (1, 2):
        a = bulk("Si", cubic=True)
        a.rattle(0.05, seed=seed)
        structures.append(jaxcert.Structure.from_ase(a))
    return model, structures, A.run_grid(model, structures, EPS, SEEDS, attacks=SPEC, config=CFG)


def test_vmapped_grid_equals_the_loop(grid):
    model, structures, g = grid
    assert g.runs.steps.shape == (2, 1, 2, 2)
    for i, s in enumerate(structures):
        for e, eps in enumerate(EPS):
            for k, seed in enumerate(SEEDS):
                ref, ref_stage, run = A.relax_attack_relax(model, s, SPEC, eps, seed, CFG)
                assert int(ref.steps) == int(g.ref_steps[i])
                np.testing.assert_allclose(ref_stage.energy, g.reference.energy[i], rtol=1e-12)
                idx = (i, 0, e, k)
                np.testing.assert_allclose(run.adversarial.structure.positions,
                                           g.runs.adversarial.structure.positions[idx], rtol=0, atol=1e-10)
                np.testing.assert_allclose(run.final.structure.positions, g.runs.final.structure.positions[idx],
                                           rtol=0, atol=1e-7)
                assert int(run.steps) == int(g.runs.steps[idx])
                assert bool(run.converged) == bool(g.runs.converged[idx])


def test_convergence_flags_are_honest(grid):
    _, _, g = grid
    r = g.runs
    conv, steps, fm = np.asarray(r.converged), np.asarray(r.steps), np.asarray(r.fmax)
    assert (conv == (fm < CFG.fmax)).all()
    assert (steps[~conv] == CFG.max_steps).all()
    assert (~conv).any() and conv.any()  # ε = 0.5 Å does not converge in 60 steps; ε = 0.02 Å does
    assert (~conv[:, :, 1]).all() and conv[:, :, 0].all()
    # the final max force is that of the returned structure
    F = np.asarray(r.final.forces)
    np.testing.assert_allclose(np.sqrt((F**2).sum(-1)).max(-1), fm, rtol=1e-10)
    assert np.asarray(g.ref_converged).all()


def test_pgd_is_seeded_and_in_the_box(grid):
    _, _, g = grid
    R_ref = np.asarray(g.reference.structure.positions)[:, None, None, None]
    R_adv = np.asarray(g.runs.adversarial.structure.positions)
    d = np.abs(R_adv - R_ref).max(axis=(-1, -2))
    assert (d <= np.asarray(EPS)[None, None, :, None] * (1 + 1e-12)).all()
    assert not np.allclose(R_adv[:, :, :, 0], R_adv[:, :, :, 1])  # seeds differ


def test_metric_rows(grid):
    _, _, g = grid
    row = metrics.run_metrics(g, 0, 0, 1, 0)
    im, post = row["immediate"], row["post_relaxation"]
    assert row["attack_label"] == "PGD" and row["epsilon_A"] == pytest.approx(0.5)
    assert row["alpha_A"] == pytest.approx(0.05)
    assert row["epsilon_percent_min"] == pytest.approx(100 * 0.5 / 5.431, rel=1e-3)
    assert im["linf_displacement"] <= 0.5 + 1e-12
    assert im["delta_energy"] > 0 and post["delta_energy"] < im["delta_energy"]
    assert row["converged_after"] is False and row["steps_after"] == CFG.max_steps
    assert post["rdf_method"] == metrics.RDF_METHOD
    small = metrics.run_metrics(g, 0, 0, 0, 0)["post_relaxation"]
    assert small["max_displacement"] < 0.1 and small["symprecs_used"] == 3


def test_float32_agrees_with_float64_to_round_off(grid):
    """The same grid in float32 (structures cast; the model follows the input dtype): float32 outputs, the same PGD
    random start (drawn in float32 for both), and agreement to float32 round-off (docs/attacks.md §3)."""
    model, structures, g64 = grid
    s32 = [jaxcert.Structure.from_ase(s.to_ase(), dtype=jnp.float32) for s in structures]
    g32 = A.run_grid(model, s32, EPS, SEEDS, attacks=SPEC, config=CFG)
    assert g32.runs.final.energy.dtype == jnp.float32 and g32.runs.final.structure.positions.dtype == jnp.float32
    agr = metrics.grid_agreement(g32, g64)["summary"]
    assert agr["min_sign_agreement"] == 1.0
    assert agr["max_abs_dR_final"] < 1e-4 and agr["max_abs_dE_final"] < 1e-4  # measured ~1e-6 Å, ~6e-6 eV
    runs = list(np.ndindex(2, 1, 2, 2))
    rows32 = [metrics.run_metrics(g32, *ix) for ix in runs]
    rows64 = [metrics.run_metrics(g64, *ix) for ix in runs]
    assert {r["dtype"] for r in rows32} == {"float32"} and {r["dtype"] for r in rows64} == {"float64"}
    out = metrics.dtype_agreement(rows32, rows64)
    assert out["n_pairs"] == 8 and out["unmatched"] == 0
    assert out["metrics"]["post_relaxation.energy"]["max_abs_diff"] < 1e-4
    assert out["metrics"]["steps_after"]["max_abs_diff"] <= 2
    assert out["verdict_agreement"]["converged_after"] == 1.0


def test_attack_report(grid, tmp_path):
    """AttackReport: one row per (structure, attack, ε, seed) in grid order, strict JSON, a table naming each run."""
    _, structures, g = grid
    rep = A.AttackReport.from_grid(g, "sw", structure={"spec": "Si"}, wall_s=1.0)
    assert len(rep.rows) == len(structures) * 1 * len(EPS) * len(SEEDS)
    assert [(r["structure"], r["epsilon"], r["seed"]) for r in rep.rows] == [
        (i, e, k) for i in range(len(structures)) for e in EPS for k in SEEDS]
    assert [f["converged"] for f in rep.first_relaxation] == [bool(c) for c in np.asarray(g.ref_converged)]
    path = tmp_path / "a.json"
    rep.write_json(str(path))
    doc = json.loads(path.read_text())  # strict: no NaN or Infinity tokens
    assert doc["schema"] == "jaxcert-attack/1" and doc["model"] == "sw" and len(doc["runs"]) == len(rep.rows)
    assert doc["config"]["max_steps"] == CFG.max_steps
    text = rep.table()
    assert text.count("PGD eps=") == len(rep.rows) and "post-relax" in text
