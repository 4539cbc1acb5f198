"""The consensus test, its re-referencing and third-database adjudication (docs/controls.md, "The consensus
test"): jaxcert.controls._consensus."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxcert.controls import ConsensusResult, adjudicate, consensus_test, rereference_consensus


def _panel(rng, n=1500, m=8, noise=0.01):
    """True formation energies, a reference equal to them, and a model panel scattered tightly around them."""
    truth = rng.uniform(-0.8, 0.2, n)
    E = truth[:, None] + rng.normal(0.0, noise, (n, m))
    return truth, truth.copy(), E


def test_labelled_corruptions_are_found_and_clean_data_gives_none():
    rng = np.random.default_rng(0)
    _, ref, E = _panel(rng)
    clean = consensus_test(E, ref)
    assert clean.n_scored == ref.size and clean.n_discrepancies == 0
    bad = rng.choice(ref.size, 40, replace=False)
    ref2 = ref.copy()
    ref2[bad] += rng.choice([-1.0, 1.0], bad.size) * rng.uniform(0.5, 2.0, bad.size)
    res = consensus_test(E, ref2)
    np.testing.assert_array_equal(np.flatnonzero(res.discrepancy), np.sort(bad))
    assert res.n_discrepancies == 40
    json.dumps(res.to_dict(), allow_nan=False)


def test_model_side_failures_are_not_discrepancies():
    rng = np.random.default_rng(1)
    _, ref, E = _panel(rng, n=300)
    E2 = E.copy()
    E2[:100, 0] += 3.0                       # one model wrong by 3 eV/atom: the median ignores it
    E2[100:200] += np.linspace(-0.6, 0.6, E.shape[1]) + 1.0  # models far off but in wide disagreement
    res = consensus_test(E2, ref)
    assert not res.discrepancy[:100].any()
    assert not res.discrepancy[100:200].any() and np.all(res.spread[100:200] > 0.1)


def test_spread_and_z_known_answer():
    E = np.array([[0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]])
    res = consensus_test(E, [-0.5])
    # median 0.045; |deviations| 0.035 0.025 0.015 0.005 0.005 0.015 0.025 0.035 -> median 0.02
    assert res.consensus[0] == pytest.approx(0.045)
    assert res.spread[0] == pytest.approx(1.4826 * 0.02)
    assert res.gap[0] == pytest.approx(0.545) and res.z[0] == pytest.approx(0.545 / (1.4826 * 0.02))
    # a spread below the floor: z uses 0.02 eV/atom, the spread itself is reported unfloored
    tight = consensus_test(np.full((1, 6), 0.5), [0.0])
    assert tight.spread[0] == 0.0 and tight.z[0] == pytest.approx(0.5 / 0.02)


def test_gross_discard_and_min_models():
    ref = np.zeros(3)
    E = np.full((3, 8), 0.6)
    E[0, :2] = 80.0           # two numerical failures: 6 models left, still scored
    E[1, :3] = -120.0         # three: 5 left, not scored
    E[2, :3] = np.nan         # three missing models: 5 left, not scored (not a gross loss)
    res = consensus_test(E, ref)
    np.testing.assert_array_equal(res.n_models, [6, 5, 5])
    np.testing.assert_array_equal(res.scored, [True, False, False])
    assert res.n_gross == 5 and res.n_lost_to_gross == 1
    assert res.discrepancy[0] and res.consensus[0] == pytest.approx(0.6)  # the failures did not enter C
    assert np.isnan(res.consensus[1]) and not res.discrepancy[1]
    # the cut is "more than" gross: exactly 50 eV/atom away is kept
    E3 = np.full((1, 6), 0.6)
    E3[0, 0] = 50.0
    assert consensus_test(E3, [0.0]).n_gross == 0
    assert consensus_test(E3, [0.0], min_models=7).n_scored == 0


@pytest.mark.parametrize("strict, z_hit, d_hit, s_hit", [("mixed", True, False, False),
                                                         ("all", False, False, False),
                                                         ("none", True, True, True)])
def test_strictness_boundaries(strict, z_hit, d_hit, s_hit):
    # z exactly z_min (20): spread 0 -> floor 20 meV; gap 400 meV -> z = 20
    assert consensus_test(np.full((1, 6), 0.4), [0.0], z_min=20, strict=strict).discrepancy[0] == z_hit
    # gap exactly d_min (300 meV); z = 15 >= 5
    assert consensus_test(np.full((1, 6), 0.3), [0.0], strict=strict).discrepancy[0] == d_hit
    # spread exactly s_max: take s_max from the measured spread of a row
    row = np.array([[1.0, 1.0, 1.0, 1.05, 1.1, 1.15, 1.2]])
    s = consensus_test(row, [0.0]).spread[0]
    assert 0.05 < s < 0.2
    assert consensus_test(row, [0.0], s_max=s, strict=strict).discrepancy[0] == s_hit
    # just inside every bound, every reading flags it
    assert consensus_test(row, [0.0], s_max=s * (1 + 1e-9), strict=strict).discrepancy[0]


def test_rereferencing_removes_a_per_element_offset():
    rng = np.random.default_rng(3)
    n = 1200
    # two elements (Mn-like column 0, and column 1); x_Mn in {0, .25, .5, .75, 1}
    x0 = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], n)
    f = np.stack([x0, 1 - x0], axis=1)
    truth = rng.uniform(-0.6, 0.0, n)
    offset = -0.45 * x0                      # the models' convention for column 0 differs from the reference's
    E = (truth + offset)[:, None] + rng.normal(0.0, 0.005, (n, 8))
    ref = truth.copy()
    corrupt = rng.choice(np.flatnonzero(x0 < 0.5), 30, replace=False)
    ref[corrupt] -= 1.2                      # genuinely bad references (gap +1.2 eV/atom)
    rr = rereference_consensus(E, ref, f)
    before = rr.before.discrepancy
    # before: the corrupted ones plus every structure the offset alone carries beyond 0.3 eV/atom
    expected_before = np.zeros(n, bool)
    expected_before[corrupt] = True
    expected_before |= x0 >= 0.75
    np.testing.assert_array_equal(before, expected_before)
    # the fit (|gap| < 0.5 only, so the corrupted rows do not enter) recovers the offset
    np.testing.assert_allclose(rr.fit.constants, [-0.45, 0.0], atol=2e-3)
    np.testing.assert_array_equal(np.flatnonzero(rr.after.discrepancy), np.sort(corrupt))
    assert rr.n_dropped == int((x0 >= 0.75).sum()) - int((x0[corrupt] >= 0.75).sum()) and rr.n_added == 0
    np.testing.assert_array_equal(rr.after.spread, rr.before.spread)
    # without the 0.5 eV/atom cut the corrupted rows pull the least-squares offset
    loose = rereference_consensus(E, ref, f, fit_cut=None)
    assert np.max(np.abs(loose.fit.constants - [-0.45, 0.0])) > 0.01
    json.dumps(rr.to_dict(), allow_nan=False)


def test_adjudicate_rule():
    c = np.zeros(6)
    ref = np.ones(6)
    third = np.array([0.1, 0.9, 0.5, np.nan, np.nan, 0.2])
    res = adjudicate(third, c, ref, discrepancy=[True, True, True, True, False, True])
    np.testing.assert_array_equal(res.verdict, ["bad_reference", "model_error", "model_error", "unsettled", "",
                                                "bad_reference"])  # a tie (0.5) sides with the reference
    assert (res.n_adjudicated, res.n_covered, res.n_bad_reference, res.n_model_error, res.n_unsettled) == \
        (5, 4, 2, 2, 1)
    assert res.frac_sides_with_models == 0.5
    assert res.median_gap_to_models == pytest.approx(np.median([0.1, 0.9, 0.5, 0.2]))
    # several databases: X is the lowest same-crystal entry
    two = adjudicate(np.array([[0.9, 0.1], [np.nan, 0.8]]), np.zeros(2), np.ones(2))
    np.testing.assert_array_equal(two.verdict, ["bad_reference", "model_error"])
    np.testing.assert_allclose(two.third, [0.1, 0.8])
    json.dumps(res.to_dict(), allow_nan=False)


def test_adjudicate_from_consensus_result():
    rng = np.random.default_rng(4)
    truth, ref, E = _panel(rng, n=200)
    bad = np.arange(10)
    ref[bad] += 0.8
    res = consensus_test(E, ref)
    assert isinstance(res, ConsensusResult) and res.n_discrepancies == 10
    third = np.full(200, np.nan)
    third[:6] = truth[:6] + 0.01             # a second database agrees with the models ...
    third[6:8] = ref[6:8] - 0.01             # ... or with the reference
    adj = adjudicate(third, res, ref)
    assert (adj.n_adjudicated, adj.n_bad_reference, adj.n_model_error, adj.n_unsettled) == (10, 6, 2, 2)


def test_validation():
    with pytest.raises(ValueError, match="E must"):
        consensus_test(np.zeros(5), np.zeros(5))
    with pytest.raises(ValueError, match="ref"):
        consensus_test(np.zeros((5, 6)), np.zeros(4))
    with pytest.raises(ValueError, match="strict"):
        consensus_test(np.zeros((5, 6)), np.zeros(5), strict="maybe")
    with pytest.raises(ValueError, match="min_models"):
        consensus_test(np.zeros((5, 6)), np.zeros(5), min_models=0)
    with pytest.raises(ValueError, match="third"):
        adjudicate(np.zeros(3), np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="fractions"):
        rereference_consensus(np.zeros((5, 6)), np.zeros(5), np.ones((5, 2)))
