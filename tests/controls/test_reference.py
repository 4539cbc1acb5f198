"""Formation energies, elemental references, Rung-0 and the noise floor (docs/controls.md, "Formation energies,
Rung-0 and the floor"): jaxcert.controls._reference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxcert.controls import (
    above_floor,
    elemental_references,
    formation_energy,
    noise_floor,
    rung0_fit,
    rung0_minimality,
    rung0_objective,
    rung0_report,
    single_point_control,
    system_split,
)

MEV = 1e-3


def _alloys(rng, n, n_el, max_k=3, systems=None):
    """Random binary/ternary atomic fractions (rows sum to 1) and a chemical-system label per row."""
    f = np.zeros((n, n_el))
    labels = []
    for i in range(n):
        k = rng.choice(n_el, size=int(rng.integers(1, max_k + 1)), replace=False)
        f[i, k] = rng.dirichlet(np.ones(k.size))
        labels.append("-".join(map(str, sorted(k.tolist()))))
    return f, np.asarray(labels)


@pytest.fixture(scope="module")
def planted():
    """Errors = fractions @ c_true + Laplace(2 meV) noise; a system-disjoint 70/30 split."""
    rng = np.random.default_rng(7)
    f, groups = _alloys(rng, 1500, 6)
    c_true = np.array([-0.120, 0.045, 0.080, -0.030, 0.010, -0.060])
    err = f @ c_true + rng.laplace(0.0, 2 * MEV, f.shape[0])
    held = system_split(groups, 0.3)
    return f, groups, c_true, err, ~held


# ------------------------------------------------------------------------------------------ formation energy
def test_formation_energy_known_answer():
    # AB at x = 1/2: -2 - (0.5 * -1 + 0.5 * -2) = -0.5; A3B at x = 3/4, 1/4: -1.5 - (-0.75 - 0.5) = -0.25
    f = np.array([[0.5, 0.5, 0.0], [0.75, 0.25, 0.0], [1.0, 0.0, 0.0]])
    refs = np.array([-1.0, -2.0, np.nan])  # the third element has no converged reference
    ef = formation_energy([-2.0, -1.5, -1.0], f, refs)
    np.testing.assert_allclose(ef, [-0.5, -0.25, 0.0], atol=1e-15)
    # a structure containing the element without a reference drops out (NaN), the others are untouched
    ef2 = formation_energy([-2.0, -1.0], np.array([[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]]), refs)
    assert np.isnan(ef2[0]) and ef2[1] == 1.0


def test_formation_energy_validates():
    with pytest.raises(ValueError, match="fractions"):
        formation_energy([-1.0], [[0.5, 0.4]], [-1.0, -1.0])  # rows must sum to one
    with pytest.raises(ValueError, match="refs"):
        formation_energy([-1.0], [[0.5, 0.5]], [-1.0])
    with pytest.raises(ValueError, match="fractions"):
        formation_energy([-1.0, -2.0], [[1.0]], [-1.0])


# ------------------------------------------------------------------------------------------ elemental screen
def _candidates():
    """Unary candidates of five elements with the pathologies of seed 001 Methods B planted."""
    rows = []  # (element, energy, n_atoms, has_sg, volume, volume_ref, sg_retained)

    def sound(el, e0, k, spread):
        for j in range(k):
            rows.append((el, e0 + spread * j / max(k - 1, 1), 2, True, 20.0, 20.0, True))

    sound("Fe", -8.30, 10, 0.25)
    rows.append(("Fe", -8.30 - 0.94, 8, True, 14.0, 20.0, True))     # collapsed diamond Fe: -30 % volume (S2)
    sound("Pd", -5.20, 6, 0.10)
    rows.append(("Pd", -5.20 - 0.34, 1, False, 3375.0, 3375.0, True))  # isolated atom in a box (S0)
    rows.append(("Pd", -5.20 + 0.01, 1, True, 15.0, 15.0, True))       # a 1-atom primitive fcc cell is sound
    sound("Cs", -0.85, 9, 0.05)
    rows.append(("Cs", -0.85 - 3.6, 2, True, 160.0, 111.0, False))     # 3.6 eV below, space group lost (S1)
    sound("W", -12.95, 4, 0.0)
    rows.append(("W", -12.95 - 0.25, 2, True, 16.0, 16.0, True))       # physical polymorph gap: kept
    # Ga: a low group of 3 of 10 (30 % > 20 %) far below: not S1; one +25 % cell exactly at the bound: kept
    sound("Ga", -3.0, 7, 0.05)
    for j in range(3):
        rows.append(("Ga", -4.0 - 0.01 * j, 2, True, 20.0, 20.0, True))
    rows.append(("Ga", -2.9, 2, True, 25.0, 20.0, True))
    cols = list(zip(*rows, strict=True))
    return [np.asarray(c) for c in cols]


def test_elemental_screen_known_answer():
    el, e, na, sg, v, v0, kept_sg = _candidates()
    res = elemental_references(el, e, elements=["Cs", "Fe", "Ga", "Pd", "W", "Zr"], n_atoms=na,
                               has_spacegroup=sg, volume=v, volume_ref=v0, sg_retained=kept_sg)
    refs = dict(zip(res.elements, res.refs, strict=True))
    assert refs["Fe"] == pytest.approx(-8.30) and refs["Pd"] == pytest.approx(-5.20)
    assert refs["Cs"] == pytest.approx(-0.85) and refs["W"] == pytest.approx(-13.20)
    assert refs["Ga"] == pytest.approx(-4.02)  # the 30 % group is not an S1 group
    assert np.isnan(refs["Zr"]) and res.chosen[-1] == -1 and res.n_candidates[-1] == 0
    # which clause removed what
    idx = {k: np.flatnonzero(el == k) for k in ("Fe", "Pd", "Cs")}
    assert res.removed["Fe"] == {"S0": [], "S1": [], "S2": [int(idx["Fe"][-1])]}
    assert res.removed["Pd"] == {"S0": [int(idx["Pd"][-2])], "S1": [], "S2": []}
    assert res.removed["Cs"] == {"S0": [], "S1": [int(idx["Cs"][-1])], "S2": []}
    assert res.removed["W"] == res.removed["Ga"] == {"S0": [], "S1": [], "S2": []}
    assert res.s0.sum() == res.s1.sum() == res.s2.sum() == 1
    # the unscreened minimum is the pathological structure; the screen moves the reference up
    shift = dict(zip(res.elements, res.shift, strict=True))
    assert shift["Fe"] == pytest.approx(0.94) and shift["Pd"] == pytest.approx(0.34)
    assert shift["Cs"] == pytest.approx(3.6) and shift["W"] == shift["Ga"] == 0.0
    json.dumps(res.to_dict(), allow_nan=False)


def test_elemental_screen_off_and_scope():
    el, e, na, sg, v, v0, kept_sg = _candidates()
    kw = dict(n_atoms=na, has_spacegroup=sg, volume=v, volume_ref=v0, sg_retained=kept_sg)
    raw = elemental_references(el, e, screen=False, **kw)
    np.testing.assert_array_equal(raw.refs, raw.refs_unscreened)
    assert dict(zip(raw.elements, raw.refs, strict=True))["Fe"] == pytest.approx(-9.24)
    # S1 on every candidate also sees the collapsed Fe cell (0.94 eV/atom below, 1 of 11)
    every = elemental_references(el, e, s1_scope="all", **kw)
    fe = np.flatnonzero(el == "Fe")[-1]
    assert every.s1[fe] and every.s2[fe]
    np.testing.assert_array_equal(every.refs, elemental_references(el, e, **kw).refs)
    # without sg_retained, S2 is a volume-only clause and now rejects the expanded Cs cell too
    vol_only = elemental_references(el, e, n_atoms=na, has_spacegroup=sg, volume=v, volume_ref=v0)
    assert vol_only.s2[np.flatnonzero(el == "Cs")[-1]]


def test_elemental_screen_boundaries():
    # S1 gap exactly 0.5 (strict '>'): not a group; just above: a group (1 of 5 = 20 %, '<=')
    e_at = np.array([-1.0, -0.5, -0.5, -0.5, -0.5])
    e_above = np.array([-1.0 - 1e-9, -0.5, -0.5, -0.5, -0.5])
    el = np.array(["X"] * 5)
    assert not elemental_references(el, e_at).s1.any()
    assert elemental_references(el, e_above).s1[0]
    # 2 of 5 (40 %) is too large a share
    assert not elemental_references(el, np.array([-2.0, -2.0, -0.5, -0.5, -0.5])).s1.any()
    with pytest.raises(ValueError, match="element label"):
        elemental_references(["X", "Y"], [-1.0, -2.0], elements=["X"])
    with pytest.raises(ValueError, match="has_spacegroup"):
        elemental_references(["X"], [-1.0], n_atoms=[1])


# ------------------------------------------------------------------------------------------ Rung-0
def test_rung0_recovers_planted_offsets_exactly():
    rng = np.random.default_rng(3)
    f, _ = _alloys(rng, 400, 5)
    c = np.array([0.1, -0.05, 0.02, -0.2, 0.0])
    for loss in ("lad", "huber"):
        fit = rung0_fit(f @ c, f, None, loss)
        np.testing.assert_allclose(fit.constants, c, atol=1e-9)
    np.testing.assert_allclose(rung0_fit(f @ c, f, None, "ls", ridge=0.0).constants, c, atol=1e-12)
    # with the paper's ridge the least-squares constants shrink only by ~lambda / (X^T X) ~ 1e-5
    np.testing.assert_allclose(rung0_fit(f @ c, f, None, "ls").constants, c, atol=1e-5)


def test_rung0_lad_robust_to_outliers_ls_is_not():
    rng = np.random.default_rng(11)
    f, _ = _alloys(rng, 1200, 5)
    c = np.array([-0.08, 0.03, 0.06, -0.02, 0.01])
    err = f @ c + rng.laplace(0.0, 2 * MEV, f.shape[0])
    # a few gross (but < fit_cut) one-sided outliers, all on structures containing element 0
    with0 = np.flatnonzero(f[:, 0] > 0.3)
    bad = rng.choice(with0, size=40, replace=False)
    err[bad] += 0.45
    lad = rung0_fit(err, f, None, "lad")
    ls = rung0_fit(err, f, None, "ls")
    hub = rung0_fit(err, f, None, "huber")
    assert np.max(np.abs(lad.constants - c)) < 1.5 * MEV
    assert np.max(np.abs(hub.constants - c)) < 1.5 * MEV
    assert abs(ls.constants[0] - c[0]) > 15 * MEV  # least squares is pulled by the one-sided tail
    assert lad.converged and lad.n_train == f.shape[0]
    # the same outliers beyond the fit cut (|err| >= 0.5) are left out, and least squares recovers too
    err2 = err.copy()
    err2[bad] += 5.0
    assert np.max(np.abs(rung0_fit(err2, f, None, "ls").constants - c)) < 1.5 * MEV
    assert abs(rung0_fit(err2, f, None, "ls", fit_cut=None).constants[0] - c[0]) > 0.1


def test_rung0_unsupported_element_and_validation(planted):
    f, _, _, err, train = planted
    f7 = np.concatenate([f, np.zeros((f.shape[0], 1))], axis=1)
    fit = rung0_fit(err, f7, train)
    assert fit.support[-1] == 0 and fit.constants[-1] == 0.0
    with pytest.raises(ValueError, match="loss"):
        rung0_fit(err, f, train, "l1")
    with pytest.raises(ValueError, match="train_mask"):
        rung0_fit(err, f, train[:-1])
    with pytest.raises(ValueError, match="ridge"):
        rung0_fit(err, f, train, ridge=-1.0)


def test_rung0_minimality_passes_at_fit_fails_when_perturbed(planted):
    f, _, _, err, train = planted
    fit = rung0_fit(err, f, train, "lad")
    ok = rung0_minimality(err, f, train, fit)
    assert ok.passed and ok.delta.shape == (f.shape[1], 4)
    assert np.all(ok.delta[fit.support > 0] > 0)  # at the LAD vertex every single-constant move costs
    bumped = fit.constants.copy()
    bumped[2] += 0.1 * MEV
    bad = rung0_minimality(err, f, train, fit, constants=bumped)
    assert not bad.passed
    assert bad.worst_element == 2 and bad.worst_move < 0  # moving it back down lowers the objective
    # and the perturbed vector really has the larger LAD objective
    assert rung0_objective(err, f, train, bumped, fit) > fit.objective


def test_rung0_report_planted(planted):
    f, groups, c_true, err, train = planted
    rep = rung0_report(err, f, train, groups=groups, ref_diff=c_true)
    # held out: raw error is the planted offsets; corrected ~ E|Laplace(b)| = b = 2 meV
    assert rep.raw.value > 20 * MEV
    assert rep.corrected.value == pytest.approx(2 * MEV, rel=0.15)
    assert rep.gain == pytest.approx(rep.raw.value - rep.corrected.value)
    assert rep.minimality.passed and rep.beats_alternatives
    assert set(rep.alternatives) == {"lad", "ls", "huber", "one_constant"}
    assert rep.alternatives["one_constant"] > rep.alternatives["lad"]
    assert rep.cv_corrected.shape == (5,) and np.all(np.abs(rep.cv_corrected - 2 * MEV) < 0.5 * MEV)
    assert 0 < rep.cv_std < 0.5 * MEV
    assert rep.ref_corr_r > 0.99 and rep.ref_corr_n == 6 and rep.ref_corr_p < 1e-3
    anti = rung0_report(err, f, train, ref_diff=-c_true, min_support=10**9)
    assert anti.ref_corr_n == 0 and np.isnan(anti.ref_corr_r)  # no element has that much support
    assert rung0_report(err, f, train, ref_diff=-c_true, compare_fits=False).ref_corr_r < -0.99
    json.dumps(rep.to_dict(), allow_nan=False)


def test_rung0_report_no_per_element_part(planted):
    f, _, _, _, train = planted
    rng = np.random.default_rng(5)
    err = rng.laplace(0.0, 10 * MEV, f.shape[0])  # structure-dependent error only
    rep = rung0_report(err, f, train, compare_fits=False)
    assert abs(rep.gain) < 0.03 * rep.raw.value  # Rung-0 removes nothing that is not there
    with pytest.raises(ValueError, match="overlap"):
        rung0_report(err, f, train, test_mask=train)


# ------------------------------------------------------------------------------------------ the noise floor
def test_noise_floor_known_statistics():
    d = np.array([0.001, -0.002, 0.003, 2.0])
    f = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [0.5, 0.5]])
    res = noise_floor(d, np.zeros(4), ["A", "A-B", "B", "A-B"], f, train_mask=[True, False, True, False])
    assert res.median_abs == pytest.approx(0.0025)  # all pairs, before the trim
    assert res.trimmed.value == pytest.approx(0.002) and res.trimmed.n_removed == 1  # 2.0 > 1 eV/atom
    assert res.n == 4 and res.n_systems == 3


def test_noise_floor_offset_r2():
    rng = np.random.default_rng(2)
    f, groups = _alloys(rng, 3000, 10)
    c = rng.normal(0.0, 0.04, 10)
    off = f @ c
    noise = rng.normal(0.0, np.std(off), f.shape[0])  # half the variance is a per-element offset
    e_b = rng.uniform(-0.5, 0.0, f.shape[0])
    res = noise_floor(e_b + off + noise, e_b, groups, f)
    assert res.r2_in_sample == pytest.approx(0.5, abs=0.05)
    # held out: the R^2 the true offset itself reaches on the held-out systems (their offset spread varies)
    test = system_split(groups, 0.3)  # True = held out
    d = (off + noise)[test]
    oracle = 1 - np.sum(noise[test] ** 2) / np.sum((d - d.mean()) ** 2)
    assert res.r2_held_out == pytest.approx(oracle, abs=0.03) and res.n_test == test.sum()
    assert res.held_out_corrected < 0.85 * res.held_out_raw
    # no per-element part: R^2 ~ 0 and subtracting the offset does not lower the floor
    flat = noise_floor(e_b + noise, e_b, groups, f)
    assert abs(flat.r2_in_sample) < 0.01 and flat.r2_held_out < 0.01
    assert flat.held_out_corrected > 0.98 * flat.held_out_raw
    json.dumps(flat.to_dict(), allow_nan=False)


def test_above_floor_paired():
    rng = np.random.default_rng(4)
    n = 600
    groups = rng.integers(0, 60, n)
    floor = rng.laplace(0.0, 0.015, n)
    sign = rng.choice([-1.0, 1.0], n)
    same = above_floor(sign * floor, floor, groups, n_boot=200)
    assert same.estimate == 0.0 and same.lo == 0.0 and same.hi == 0.0  # identical |errors|: no spread
    worse = np.sign(floor) * (np.abs(floor) + 0.004)
    res = above_floor(worse, floor, groups, n_boot=200)
    assert res.estimate == pytest.approx(0.004, abs=1e-12)
    assert res.lo == pytest.approx(0.004, abs=1e-12) and res.hi == pytest.approx(0.004, abs=1e-12)
    # noisier model: the interval straddles its own estimate and excludes zero
    noisy = floor + rng.normal(0.0, 0.03, n)
    r2 = above_floor(noisy, floor, groups, n_boot=300)
    assert r2.lo < r2.estimate < r2.hi and r2.lo > 0
    # a NaN in either column takes the row out of both
    m = worse.copy()
    fl = floor.copy()
    m[0], fl[1] = np.nan, 5.0
    r3 = above_floor(m, fl, groups, n_boot=50)
    assert r3.n_rows == n - 1 and r3.floor.n_kept + r3.floor.n_removed == n - 1


def test_single_point_control_shares_the_relaxed_row_set():
    f = np.array([[0.5, 0.5], [1.0, 0.0], [0.25, 0.75], [0.5, 0.5]])
    refs = np.array([-3.0, -5.0])
    ef_ref = np.array([-0.2, 0.0, -0.1, -0.3])
    mix = f @ refs
    geom = np.array([0.01, -0.02, 1.5, 0.04])     # single-point errors: the third is beyond 1 eV/atom
    relaxed_err = np.array([0.02, -0.03, 0.01, 2.0])  # ... but its relaxed error is not; the fourth's is
    trim = np.abs(relaxed_err) <= 1.0
    res = single_point_control(ef_ref + mix + geom, ef_ref, f, refs, trim, err_relaxed=relaxed_err)
    np.testing.assert_allclose(res.err, geom, atol=1e-12)
    np.testing.assert_array_equal(res.rows, [True, True, True, False])
    assert res.n == 3 and res.mae == pytest.approx((0.01 + 0.02 + 1.5) / 3)  # not re-trimmed on its own errors
    assert res.relaxed_mae == pytest.approx(0.02) and res.geometry_effect == pytest.approx(0.02 - res.mae)
    with pytest.raises(ValueError, match="trim_mask"):
        single_point_control(ef_ref + mix, ef_ref, f, refs, trim[:3])
