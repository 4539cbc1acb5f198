"""float32/float64 agreement and cross-seed spread on hand-made rows and grids with known answers (host only)."""

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest

from jaxcert.attacks import metrics


def _row(structure="a", attack="pgd", n=10, eps=0.1, seed=42, dtype="float64", disp=0.0, e_fin=-1.0, sg=0.0,
         steps=5, conv=True):
    return {"structure": structure, "attack": attack, "attack_label": {"pgd": "PGD", "fgsm": "FGSM"}[attack],
            "n_steps": n, "alpha_ratio": 0.1 if attack == "pgd" else 1.0, "epsilon": eps, "epsilon_A": eps,
            "alpha_A": 0.1 * eps, "seed": seed, "dtype": dtype, "steps_before": 3, "steps_after": steps,
            "converged_before": True, "converged_after": conv,
            "immediate": {"max_delta_force": 2 * disp, "delta_energy": 1.0, "space_group_change": 1.0},
            "post_relaxation": {"max_displacement": disp, "energy": e_fin, "delta_energy": 0.0,
                                "space_group_change": sg}}


def test_value_and_run_key():
    r = _row(eps=0.1)
    assert metrics.value(r, "post_relaxation.energy") == -1.0 and metrics.value(r, "steps_after") == 5.0
    assert math.isnan(metrics.value(r, "post_relaxation.missing")) and math.isnan(metrics.value(r, "nope.x"))
    f32 = dict(r, epsilon=float(np.float32(0.1)), dtype="float32")  # ε cast to float32 still matches
    assert metrics.run_key(f32) == metrics.run_key(r)
    assert metrics.run_key(dict(r, seed=43)) != metrics.run_key(r)
    old = {k: v for k, v in r.items() if k != "alpha_ratio"}  # rows without alpha_ratio: from α/ε
    assert metrics.run_key(old) == metrics.run_key(r)


def test_dtype_agreement_known_answers():
    ref = [_row(structure=s, seed=k, disp=d, e_fin=-d) for s, d in (("a", 0.1), ("b", 0.2), ("c", 0.4))
           for k in (42, 43)]
    # float32: displacement + 0.01 Å everywhere (r² = 1), energy 1 % high in magnitude, one symmetry verdict and one
    # convergence verdict differ, one extra unmatched run
    f32 = [dict(r, dtype="float32", post_relaxation=dict(r["post_relaxation"],
                                                         max_displacement=r["post_relaxation"]["max_displacement"]
                                                         + 0.01, energy=1.01 * r["post_relaxation"]["energy"]))
           for r in ref]
    f32[0]["post_relaxation"]["space_group_change"] = 1.0
    f32[1]["converged_after"] = False
    f32.append(_row(structure="z", dtype="float32"))
    out = metrics.dtype_agreement(f32, ref)
    assert out["n_pairs"] == 6 and out["unmatched"] == 1 and out["unmatched_reference"] == 0
    d = out["metrics"]["post_relaxation.max_displacement"]
    assert d["n"] == 6 and d["r2"] == pytest.approx(1.0)
    assert d["max_abs_diff"] == pytest.approx(0.01) and d["median_abs_diff"] == pytest.approx(0.01)
    assert d["median_rel_diff"] == pytest.approx(np.median([0.1, 0.05, 0.025]))  # 0.01/x, x = 0.1, 0.2, 0.4
    e = out["metrics"]["post_relaxation.energy"]
    assert e["max_abs_diff"] == pytest.approx(0.004) and e["median_rel_diff"] == pytest.approx(0.01)
    assert math.isnan(out["metrics"]["post_relaxation.delta_energy"]["median_rel_diff"])  # all zero: no relative
    assert math.isnan(out["metrics"]["steps_after"]["r2"])  # constant: no correlation defined
    v = out["verdict_agreement"]
    assert v["post_relaxation.space_group_change"] == pytest.approx(5 / 6)
    assert v["converged_after"] == pytest.approx(5 / 6) and v["immediate.space_group_change"] == 1.0
    # an anti-correlated metric has r² = 1 too (squared Pearson), a scrambled one less
    scr = [dict(r, immediate=dict(r["immediate"], max_delta_force=[0.3, 0.1, 0.5, 0.2, 0.1, 0.3][i]))
           for i, r in enumerate(ref)]
    assert metrics.dtype_agreement(scr, ref)["metrics"]["immediate.max_delta_force"]["r2"] < 0.5


def test_seed_spread_and_bands():
    vals = {("a", 42): 1.0, ("a", 43): 2.0, ("a", 44): 4.0, ("b", 42): 10.0, ("b", 43): 30.0, ("b", 44): 20.0}
    rows = [_row(structure=s, seed=k, disp=v) for (s, k), v in vals.items()]
    rows.append(_row(structure="a", seed=45, disp=float("nan")))  # a failed metric is dropped, not counted
    rows.append(_row(structure="a", attack="fgsm", n=1, seed=42, disp=7.0))  # another group
    sp = {(x["structure"], x["attack_label"]): x for x in metrics.seed_spread(rows, "post_relaxation.max_displacement")}
    a = sp[("a", "PGD")]
    assert a["seeds"] == [42, 43, 44] and a["values"] == [1.0, 2.0, 4.0] and a["n_seeds"] == 3
    assert a["median"] == 2.0 and a["q25"] == 1.5 and a["q75"] == 3.0 and a["iqr"] == 1.5
    assert a["mean"] == pytest.approx(7 / 3) and a["std"] == pytest.approx(np.std([1, 2, 4]))
    assert sp[("b", "PGD")]["median"] == 20.0 and sp[("b", "PGD")]["iqr"] == 10.0
    assert sp[("a", "FGSM")]["n_seeds"] == 1 and sp[("a", "FGSM")]["std"] == 0.0
    bands = {x["attack_label"]: x for x in metrics.seed_bands(rows, "post_relaxation.max_displacement")}
    pgd = bands["PGD"]
    # per seed, median over structures: 42 → 5.5, 43 → 16, 44 → 12; then quartiles over seeds
    assert pgd["per_seed"] == {42: 5.5, 43: 16.0, 44: 12.0} and pgd["seed_count"] == 3
    assert pgd["median"] == 12.0 and pgd["q25"] == pytest.approx(8.75) and pgd["q75"] == pytest.approx(14.0)
    assert bands["FGSM"]["seed_count"] == 1 and bands["FGSM"]["median"] == 7.0


def _fake_grid(R_ref, R_adv, R_fin, E_adv, E_fin, mask, E_ref):
    st = lambda R, E: NS(structure=NS(positions=R, mask=mask), energy=E)
    return NS(reference=st(R_ref, E_ref), runs=NS(steps=np.zeros(E_fin.shape), adversarial=st(R_adv, E_adv),
                                                 final=st(R_fin, E_fin)))


def test_grid_agreement_known_answers():
    rng = np.random.default_rng(0)
    S, A, E, K, N = 2, 1, 2, 1, 4
    mask = np.array([[True] * 4, [True, True, True, False]])  # structure 1 has a padding atom
    R_ref = rng.normal(size=(S, N, 3))
    step = 0.05 * np.sign(rng.normal(size=(S, A, E, K, N, 3)))
    R_adv = R_ref[:, None, None, None] + step
    R_fin = R_ref[:, None, None, None] + 0.01
    E_adv, E_fin, E_ref = rng.normal(size=(S, A, E, K)), rng.normal(size=(S, A, E, K)), np.array([-1.0, -2.0])
    g64 = _fake_grid(R_ref, R_adv, R_fin, E_adv, E_fin, mask, E_ref)
    same = metrics.grid_agreement(g64, g64)
    assert same["summary"]["max_abs_dR_final"] == 0.0 and same["summary"]["min_sign_agreement"] == 1.0
    R_adv2, R_fin2 = R_adv.copy(), R_fin.copy()
    R_adv2[1, 0, 1, 0, 0, 2] *= -1  # one sign flipped (in a real atom of structure 1, run ε index 1)
    R_adv2[1, 0, 1, 0, 0, 2] += 2 * R_ref[1, 0, 2]
    R_adv2[1, 0, 0, 0, 3, :] += 5.0  # padding atom: must be ignored
    R_fin2[0, 0, 0, 0, 2, 1] += 1e-3
    E_fin2 = E_fin.copy()
    E_fin2[0, 0, 1, 0] += 2e-4
    g32 = _fake_grid(R_ref, R_adv2, R_fin2, E_adv, E_fin2, mask, E_ref + np.array([0.0, 1e-5]))
    out = metrics.grid_agreement(g32, g64)
    assert out["sign_agreement"].shape == (S, A, E, K)
    assert out["sign_agreement"][1, 0, 1, 0] == pytest.approx(1 - 1 / 9)  # 3 real atoms × 3 coordinates
    assert (np.delete(out["sign_agreement"].ravel(), 3) == 1.0).all()
    assert out["max_abs_dR_adversarial"][1, 0, 0, 0] == 0.0  # padding ignored
    assert out["max_abs_dR_final"][0, 0, 0, 0] == pytest.approx(1e-3) and out["summary"]["max_abs_dR_final"] == (
        pytest.approx(1e-3))
    assert out["abs_dE_final"][0, 0, 1, 0] == pytest.approx(2e-4) and out["summary"]["max_abs_dE_final"] == (
        pytest.approx(2e-4))
    np.testing.assert_allclose(out["reference_abs_dE"], [0.0, 1e-5], atol=1e-15)
    with pytest.raises(ValueError, match="shapes"):
        metrics.grid_agreement(g32, _fake_grid(R_ref, R_adv, R_fin, E_adv[:, :, :1], E_fin[:, :, :1], mask, E_ref))
