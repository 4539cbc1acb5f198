"""Convex hull and stability (docs/controls.md, "Convex hull and stability"): jaxcert.controls._hull."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxcert.controls import (
    DEFAULT_STABILITY_WINDOWS,
    e_above_hull,
    hull_invariance,
    stability_scores,
    stability_window_sweep,
)


# ------------------------------------------------------------------------------------------------ helpers
def _random_space(rng, elements, n, arities=None, e_lo=-0.6, e_hi=0.3):
    """Integer counts over ``elements`` (every row non-empty) and random formation energies."""
    k = len(elements)
    counts = rng.integers(0, 6, size=(n, k))
    if arities is not None:  # restrict some rows to sub-systems
        for i in range(n):
            a = arities[i % len(arities)]
            drop = rng.choice(k, size=k - a, replace=False)
            counts[i, drop] = 0
    empty = counts.sum(axis=1) == 0
    counts[empty, rng.integers(0, k, size=empty.sum())] = 1
    e = rng.uniform(e_lo, e_hi, size=n)
    is_el = (counts > 0).sum(axis=1) == 1
    e[is_el] = rng.uniform(0.0, 0.2, size=is_el.sum())  # elemental polymorphs above their reference
    return counts, e


def _pymatgen_e_above_hull(elements, counts, e_form):
    pd_mod = pytest.importorskip("pymatgen.analysis.phase_diagram")
    from pymatgen.core import Composition

    def formula(c):
        return "".join(f"{s}{int(m)}" for s, m in zip(elements, c, strict=True) if m)

    entries = [
        pd_mod.PDEntry(Composition(formula(c)), float(ef * c.sum())) for c, ef in zip(counts, e_form, strict=True)
    ]
    corners = [pd_mod.PDEntry(Composition(s), 0.0) for s in elements]
    pdg = pd_mod.PhaseDiagram(entries + corners)
    return np.array([pdg.get_e_above_hull(en) for en in entries])


# -------------------------------------------------------------------------------------- against pymatgen
@pytest.mark.parametrize(
    ("elements", "n", "arities"),
    [
        (("Al", "Ni"), 25, None),
        (("Cu", "Zr"), 40, None),
        (("Al", "Ni", "Ti"), 60, (1, 2, 2, 3, 3, 3)),
        (("Fe", "Co", "Mo"), 45, (2, 3)),
        (("Li", "Mg", "Si", "Ge"), 45, (2, 3, 4)),
    ],
)
def test_matches_pymatgen_phase_diagram(elements, n, arities):
    rng = np.random.default_rng(sum(map(ord, "".join(elements))))
    counts, e = _random_space(rng, elements, n, arities)
    ref = _pymatgen_e_above_hull(elements, counts, e)
    r = e_above_hull(counts, e, elements)
    np.testing.assert_allclose(r.e_above_hull, ref, rtol=0, atol=1e-12)
    assert np.all(r.e_above_hull >= 0)
    # the hull vertices are exactly zero, and every compound pymatgen puts on the hull is one
    assert np.all(r.e_above_hull[ref < 1e-12] == 0.0)
    # the LP form agrees too (exact after polishing on the support, not at the LP's 1e-7 tolerance)
    if n <= 45:
        r_lp = e_above_hull(counts, e, elements, method="lp")
        np.testing.assert_allclose(r_lp.e_above_hull, ref, rtol=0, atol=1e-12)


def test_pymatgen_broken_input_is_detected():
    """A broken case: dropping the sub-system phases (hull of the exact system only) disagrees with pymatgen."""
    rng = np.random.default_rng(7)
    elements = ("Al", "Ni", "Ti")
    counts, e = _random_space(rng, elements, 60, (2, 2, 3))
    ref = _pymatgen_e_above_hull(elements, counts, e)
    ternary = (counts > 0).sum(axis=1) == 3
    # hulls of the ternary rows alone, without the binaries of the sub-systems
    r = e_above_hull(counts[ternary], e[ternary], elements)
    assert np.max(np.abs(r.e_above_hull - ref[ternary])) > 1e-3


# ----------------------------------------------------------------------------------------- known answers
def test_binary_known_answer_and_decomposition():
    # A-B; AB at -0.2 eV/atom, A3B at -0.05: the hull at x_B = 1/4 is (0 + (-0.2))/2 = -0.1
    x = np.array([[1, 1], [3, 1], [1, 3]])
    e = np.array([-0.2, -0.05, -0.08])
    r = e_above_hull(x, e, ["A", "B"], return_decomposition=True, min_entries=0)
    np.testing.assert_allclose(r.e_above_hull, [0.0, 0.05, 0.02], atol=1e-15)
    np.testing.assert_allclose(r.hull_energy, [-0.2, -0.1, -0.1], atol=1e-15)
    assert r.e_above_hull[0] == 0.0
    d = r.decomposition
    assert d[0] == {0: 1.0}
    assert set(d[1]) == {"A", 0} and d[1]["A"] == pytest.approx(0.5, abs=1e-14)
    assert set(d[2]) == {"B", 0} and d[2][0] == pytest.approx(0.5, abs=1e-14)
    assert r.system == ("A-B", "A-B", "A-B")
    assert r.n_systems == 1


def test_ternary_measured_against_binary_subsystems():
    # ABC at -0.1; binary AB at -0.3 sits below: hull at (1/3,1/3,1/3) = 2/3 * -0.3 + 1/3 * 0 = -0.2
    x = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 1], [2, 0, 0]])
    e = np.array([-0.1, -0.3, 0.05, 0.01])
    r = e_above_hull(x, e, ["A", "B", "C"], return_decomposition=True)
    np.testing.assert_allclose(r.e_above_hull, [0.1, 0.0, 0.05, 0.01], atol=1e-15)
    assert r.decomposition[0].keys() == {1, "C"}
    assert r.decomposition[0][1] == pytest.approx(2 / 3, abs=1e-14)
    assert r.system == ("A-B-C", "A-B", "A-C", "A")
    # an unrelated system's phases do not enter: adding A-D phases changes nothing for A-B-C
    x2 = np.concatenate([np.c_[x, np.zeros(4)], [[1, 0, 0, 1], [1, 0, 0, 3]]])
    r2 = e_above_hull(x2, np.r_[e, -0.9, -0.5], ["A", "B", "C", "D"])
    np.testing.assert_array_equal(r2.e_above_hull[:4], r.e_above_hull)
    # the ternary without the binary is on its hull: the sub-system really entered
    r3 = e_above_hull(x[[0, 2, 3]], e[[0, 2, 3]], ["A", "B", "C"])
    assert r3.e_above_hull[0] == 0.0


def test_formulas_and_counts_are_equivalent_to_fractions():
    formulas = ["Al3Ni", "AlNi", "Al2NiTi", "Ti", "NiTi2", "Al"]
    e = np.array([-0.3, -0.6, -0.4, 0.02, -0.25, 0.0])
    r_f = e_above_hull(formulas, e)
    np.testing.assert_array_equal(e_above_hull(np.array(formulas), e).e_above_hull, r_f.e_above_hull)
    assert r_f.elements == ("Al", "Ti", "Ni")  # by atomic number
    counts = np.array([[3, 0, 1], [1, 0, 1], [2, 1, 1], [0, 1, 0], [0, 2, 1], [1, 0, 0]], float)
    r_c = e_above_hull(counts, e, ["Al", "Ti", "Ni"])
    r_x = e_above_hull(counts / counts.sum(1, keepdims=True), e, ["Al", "Ti", "Ni"])
    np.testing.assert_allclose(r_f.e_above_hull, r_c.e_above_hull, atol=1e-15)
    np.testing.assert_allclose(r_x.e_above_hull, r_c.e_above_hull, atol=1e-15)
    r_o = e_above_hull(formulas, e, elements=["Ni", "Ti", "Al"])  # a given column order
    np.testing.assert_allclose(r_o.e_above_hull, r_c.e_above_hull, atol=1e-15)
    assert r_o.system[0] == "Ni-Al"


def test_grouped_equals_one_system_at_a_time():
    """One hull per chemical system, shared: the batched call equals separate calls per chemical space."""
    rng = np.random.default_rng(3)
    n_el, n = 10, 400
    x = np.zeros((n, n_el))
    for i in range(n):
        k = rng.integers(1, 4)
        x[i, rng.choice(n_el, size=k, replace=False)] = rng.integers(1, 5, size=k)
    e = rng.uniform(-0.5, 0.3, n)
    r = e_above_hull(x, e)
    assert r.n_systems == len(set(r.system))
    present = x > 0
    for s in sorted(set(r.system))[:25]:
        rows = np.flatnonzero(np.array(r.system) == s)
        cols = present[rows[0]]
        space = np.flatnonzero(~present[:, ~cols].any(axis=1))
        sub = e_above_hull(x[space], e[space])
        pos = np.searchsorted(space, rows)
        np.testing.assert_allclose(r.e_above_hull[rows], sub.e_above_hull[pos], atol=1e-14)


def test_degenerate_spaces():
    # every point on the plane e = 0: qhull alone would be flat; E_hull is 0 everywhere
    x = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1], [1, 1, 1], [2, 1, 1]])
    r = e_above_hull(x, np.zeros(5), ["A", "B", "C"])
    np.testing.assert_array_equal(r.e_above_hull, 0.0)
    # compounds only on one edge of a ternary plus a ternary above the plane; duplicate compositions
    x = np.array([[1, 1, 0], [1, 1, 0], [1, 3, 0], [1, 1, 1]])
    e = np.array([-0.2, -0.15, 0.1, -0.05])
    r = e_above_hull(x, e, ["A", "B", "C"])
    # hull at B-rich 1:3 on the edge: between AB (-0.2, x_B=.5) and B (0, x_B=1): -0.1
    np.testing.assert_allclose(r.e_above_hull, [0.0, 0.05, 0.2, 2 / 3 * 0.2 - 0.05], atol=1e-15)
    r_lp = e_above_hull(x, e, ["A", "B", "C"], method="lp")
    np.testing.assert_allclose(r_lp.e_above_hull, r.e_above_hull, atol=1e-14)


def test_qhull_failure_falls_back_to_the_lp(monkeypatch):
    from scipy.spatial import QhullError

    from jaxcert.controls import _hull

    x = np.array([[1, 1, 0], [1, 1, 0], [1, 3, 0], [1, 1, 1]])
    e = np.array([-0.2, -0.15, 0.1, -0.05])
    calls = []

    def failing(coords, ceiling):
        calls.append(coords.shape)
        raise QhullError("forced")

    monkeypatch.setattr(_hull, "_lower_facets", failing)
    r = e_above_hull(x, e, ["A", "B", "C"])
    assert calls  # qhull was tried, and the LP answered
    np.testing.assert_allclose(r.e_above_hull, [0.0, 0.05, 0.2, 2 / 3 * 0.2 - 0.05], atol=1e-14)


def test_corner_policy_elemental_polymorph_below_reference():
    # an A polymorph 0.1 eV/atom below A's reference; AB at -0.04
    x = np.array([[1, 0], [2, 0], [1, 1]])
    e = np.array([-0.1, 0.03, -0.04])
    ref = e_above_hull(x, e, ["Al", "Ni"], corner_policy="reference", min_entries=0, return_decomposition=True)
    low = e_above_hull(x, e, ["Al", "Ni"], corner_policy="lowest", min_entries=0)
    # the seed: elemental rows scored against the lowest of their element, not a corner of compound hulls
    np.testing.assert_allclose(ref.e_above_hull, [0.0, 0.13, 0.0], atol=1e-15)
    assert ref.decomposition[1] == {0: 1.0}
    # pymatgen's convention: the polymorph is the corner, the hull at AB is -0.05
    np.testing.assert_allclose(low.e_above_hull, [0.0, 0.13, 0.01], atol=1e-15)
    pm = _pymatgen_e_above_hull(("Al", "Ni"), x, e)
    np.testing.assert_allclose(low.e_above_hull, pm, atol=1e-12)
    assert abs(ref.e_above_hull[2] - pm[2]) > 1e-3


def test_scored_mask_min_entries():
    x = np.array([[1, 1, 0], [1, 2, 0], [1, 1, 1], [1, 0, 0]])
    e = np.array([-0.1, -0.1, -0.1, 0.0])
    r = e_above_hull(x, e, ["A", "B", "C"])  # default 3: no system has 3 rows
    np.testing.assert_array_equal(r.n_entries, [2, 2, 1, 1])
    assert not r.scored.any()
    r2 = e_above_hull(x, e, ["A", "B", "C"], min_entries=2)
    np.testing.assert_array_equal(r2.scored, [True, True, False, False])
    r3 = e_above_hull(x, e, ["A", "B", "C"], min_entries_scope="space")
    np.testing.assert_array_equal(r3.n_entries, [3, 3, 4, 1])
    np.testing.assert_array_equal(r3.scored, [True, True, True, False])


def test_references_path_and_json():
    x = np.array([[1, 1], [3, 1], [1, 3]], float)
    e_f = np.array([-0.2, -0.05, -0.08])
    mu = np.array([-3.7, -5.5])
    e_tot = e_f + (x / x.sum(1, keepdims=True)) @ mu
    r = e_above_hull(x, e_tot, ["Al", "Ni"], references={"Al": -3.7, "Ni": -5.5}, return_decomposition=True)
    np.testing.assert_allclose(r.formation_energy, e_f, atol=1e-14)
    np.testing.assert_allclose(r.e_above_hull, [0.0, 0.05, 0.02], atol=1e-14)
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"compositions": [[1, 0], [0, 0]]}, "compositions"),
        ({"compositions": [[1, -1]]}, "compositions"),
        ({"compositions": [1, 2]}, "compositions"),
        ({"compositions": ["AlNi", "Xx2"]}, "compositions"),
        ({"compositions": "AlNi"}, "compositions"),
        ({"compositions": [[1, 1], [1]]}, "compositions"),
        ({"energies": [0.1]}, "energies"),
        ({"energies": [np.nan, 0.0]}, "energies"),
        ({"elements": ["Al"]}, "elements"),
        ({"elements": ["Al", "Al"]}, "elements"),
        ({"references": [0.0]}, "references"),
        ({"corner_policy": "corners"}, "corner_policy"),
        ({"method": "simplex"}, "method"),
        ({"min_entries": -1}, "min_entries"),
    ],
)
def test_e_above_hull_validation(kwargs, match):
    args = {"compositions": [[1, 1], [1, 2]], "energies": [-0.1, -0.2], "elements": ["Al", "Ni"]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        e_above_hull(args.pop("compositions"), args.pop("energies"), **args)


def test_formula_outside_elements_rejected():
    with pytest.raises(ValueError, match="compositions"):
        e_above_hull(["AlNi", "AlTi"], [0.0, 0.0], elements=["Al", "Ni"])


# ------------------------------------------------------------------------------------------- hull-F1
def test_stability_scores_known_confusion_matrix():
    # reference stable (<= 0.025): rows 0,1,2,3 ; model stable: rows 0,1,4
    eh_ref = np.array([0.0, 0.025, 0.01, 0.02, 0.1, 0.3, 0.026])
    eh_mod = np.array([0.0, 0.02, 0.03, 0.2, 0.025, 0.3, 0.05])
    s = stability_scores(eh_mod, eh_ref)
    assert (s.tp, s.fp, s.fn, s.tn) == (2, 1, 2, 2)
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(1 / 2)
    assert s.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert s.accuracy == pytest.approx(4 / 7)
    assert s.mae == pytest.approx(np.mean(np.abs(eh_mod - eh_ref)))
    assert (s.n, s.n_stable, s.n_predicted_stable) == (7, 4, 3)
    json.dumps(s.to_dict(), allow_nan=False)
    # a perfect model: F1 = 1, MAE = 0; a model biased by +10 meV/atom loses recall (the broken case)
    perfect = stability_scores(eh_ref, eh_ref)
    assert perfect.f1 == 1.0 and perfect.mae == 0.0
    biased = stability_scores(eh_ref + 0.01, eh_ref)  # rows 1 (0.035) and 3 (0.03) drop out
    assert (biased.tp, biased.fp, biased.fn) == (2, 0, 2)
    assert biased.precision == 1.0 and biased.recall == 0.5 and biased.f1 == pytest.approx(2 / 3)


def test_window_side_and_threshold():
    eh_ref = np.array([0.0, 0.02, 0.1])
    eh_mod = np.array([0.01, 0.0, 0.1])
    both = stability_scores(eh_mod, eh_ref, window=0.025)
    assert (both.tp, both.fp, both.fn) == (2, 0, 0)
    ref_only = stability_scores(eh_mod, eh_ref, window=0.025, window_side="reference")  # model at <= 0
    assert (ref_only.tp, ref_only.fp, ref_only.fn) == (1, 0, 1)
    model_only = stability_scores(eh_mod, eh_ref, window=0.025, window_side="model")  # reference at <= 0
    assert (model_only.tp, model_only.fp, model_only.fn) == (1, 1, 0)
    mbd = stability_scores(eh_mod, eh_ref, window=0.0)  # Matbench Discovery: on the hull or not
    assert (mbd.tp, mbd.fp, mbd.fn, mbd.tn) == (0, 1, 1, 1)
    shifted = stability_scores(eh_mod, eh_ref, window=0.0, threshold=0.1)
    assert shifted.tp == 3 and shifted.ref_cutoff == 0.1
    none = stability_scores(np.array([1.0, 1.0]), np.array([0.0, 1.0]))
    assert np.isnan(none.precision) and none.recall == 0.0 and none.f1 == 0.0
    assert json.loads(json.dumps(none.to_dict(), allow_nan=False))["precision"] is None


def test_window_sweep_matches_scores_and_mask():
    rng = np.random.default_rng(11)
    eh_ref = np.abs(rng.normal(0, 0.05, 500)) * (rng.random(500) < 0.7)
    eh_mod = np.maximum(eh_ref + rng.normal(0, 0.02, 500), 0)
    sw = stability_window_sweep(eh_mod, eh_ref)
    np.testing.assert_array_equal(sw.windows, DEFAULT_STABILITY_WINDOWS)
    for i, w in enumerate(DEFAULT_STABILITY_WINDOWS):
        s = stability_scores(eh_mod, eh_ref, window=w)
        assert (sw.tp[i], sw.fp[i], sw.fn[i], sw.tn[i]) == (s.tp, s.fp, s.fn, s.tn)
        assert sw.f1[i] == s.f1
    mask = rng.random(500) < 0.5
    sm = stability_scores(eh_mod, eh_ref, mask=mask)
    assert sm == stability_scores(eh_mod[mask], eh_ref[mask])
    json.dumps(sw.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (([0.0, 1.0], [0.0]), {}, "eh_ref"),
        (([[0.0]], [[0.0]]), {}, "eh_model"),
        (([np.nan], [0.0]), {}, "eh_model"),
        (([0.0], [np.inf]), {}, "eh_ref"),
        (([0.0], [0.0]), {"window": -0.01}, "window"),
        (([0.0], [0.0]), {"window_side": "left"}, "window_side"),
        (([0.0], [0.0]), {"mask": np.array([1])}, "mask"),
        (([0.0], [0.0]), {"mask": np.array([False])}, "eh_model"),
    ],
)
def test_stability_scores_validation(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        stability_scores(*args, **kwargs)


def test_window_sweep_validation():
    with pytest.raises(ValueError, match="windows"):
        stability_window_sweep([0.0], [0.0], windows=[])
    with pytest.raises(ValueError, match="threshold"):
        stability_window_sweep([0.0], [0.0], threshold=np.nan)


# -------------------------------------------------------------------------------------------- invariance
def _invariance_data():
    rng = np.random.default_rng(5)
    elements = ("Al", "Ni", "Ti", "Cu")
    counts, e = _random_space(rng, elements, 120, (1, 2, 2, 3, 3))
    constants = np.array([0.05, -0.08, 0.12, 0.03])  # eV/atom, one per element
    mu = np.array([-3.75, -5.57, -7.89, -4.10])  # realistic total-energy references
    e_tot = e + (counts / counts.sum(1, keepdims=True)) @ mu
    return elements, counts, e, e_tot, constants, mu


def test_hull_invariance_clean_and_compounds_only():
    elements, counts, e, e_tot, c, mu = _invariance_data()
    r = hull_invariance(counts, e_tot, c, elements, references=mu)
    assert r.max_change_invariant < 1e-12
    assert r.max_change_compounds_only > 1e-2  # a compounds-only shift moves E_hull clearly
    assert r.n_flips_invariant == 0 and r.n_flips_compounds_only > 0
    assert r.invariant and r.sensitive and r.passed
    # formation energies as input (references at zero), constants by symbol
    r0 = hull_invariance(counts, e, dict(zip(elements, c, strict=True)), elements)
    assert r0.passed and r0.max_change_invariant < 1e-12
    json.dumps(r.to_dict(), allow_nan=False)


def test_hull_invariance_detects_a_broken_pipeline():
    """The broken case: a pipeline that ignores the references (treats totals as formation energies)."""
    elements, counts, e, e_tot, c, mu = _invariance_data()

    def broken(x, energies, el, references=None, **kw):
        return e_above_hull(x, energies - energies.mean(), el, **kw)  # references dropped

    r = hull_invariance(counts, e_tot, c, elements, references=mu, hull=broken)
    assert r.max_change_invariant > 1e-3
    assert not r.invariant and not r.passed
    # a zero shift cannot be detected: the compounds-only half is then not sensitive
    z = hull_invariance(counts, e_tot, np.zeros(4), elements, references=mu)
    assert z.invariant and not z.sensitive and not z.passed


def test_hull_invariance_validation():
    elements, counts, e, e_tot, c, mu = _invariance_data()
    with pytest.raises(ValueError, match="constants"):
        hull_invariance(counts, e_tot, c[:2], elements)
    with pytest.raises(ValueError, match="constants"):
        hull_invariance(counts, e_tot, {"Al": 0.1}, elements)
    with pytest.raises(ValueError, match="references"):
        hull_invariance(counts, e_tot, c, elements, references=mu[:3])
    with pytest.raises(ValueError, match="energies"):
        hull_invariance(counts, e_tot[:3], c, elements)
    with pytest.raises(ValueError, match="hull"):
        hull_invariance(counts, e_tot, c, elements, hull=lambda *a, **k: np.zeros(3))
