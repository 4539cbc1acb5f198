"""Known-answer tests of the robust statistics and resampling controls (docs/controls.md, "Robust statistics and
resampling"). Each check pairs a clean case with a deliberately broken one that must fail for the right reason."""

import functools
import hashlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats as ss

import jaxcert.controls as controls
from jaxcert.controls import _robust
from jaxcert.controls._robust import (
    cluster_bootstrap,
    corpus_correlation_test,
    error_correlation_permutation,
    median_abs,
    polymorph_ordering,
    sg_retention,
    system_kfold,
    system_split,
    trimmed_mae,
    trimmed_mae_sweep,
)


def _strict_json(result):
    return json.dumps(result.to_dict(), allow_nan=False)


def _clustered(rng, n_sys, m, sigma_b=1.0, sigma_w=1.0, mu=0.0):
    g = np.repeat(np.arange(n_sys), m)
    x = mu + rng.normal(0.0, sigma_b, n_sys)[g] + rng.normal(0.0, sigma_w, g.size)
    return x, g


# ============================================================================ trimmed MAE
def test_trimmed_mae_hand_computed_boundary_and_nonfinite():
    err = [0.1, -0.2, 1.0, -1.5, np.nan, 3.0, np.inf]
    r = trimmed_mae(err, cutoff=1.0)
    assert r.value == pytest.approx((0.1 + 0.2 + 1.0) / 3, abs=1e-15)  # |err| == cutoff is kept
    assert (r.n_kept, r.n_removed, r.n_nonfinite) == (3, 2, 2)
    assert r.n_kept + r.n_removed + r.n_nonfinite == len(err)
    assert r.median_abs == 1.0  # median of the finite |err| {0.1, 0.2, 1.0, 1.5, 3.0}, before the trim
    assert median_abs(err) == 1.0
    assert math.isnan(trimmed_mae([5.0, np.nan]).value)
    _strict_json(trimmed_mae([np.nan]))
    with pytest.raises(ValueError, match="cutoff"):
        trimmed_mae([0.1], cutoff=0.0)
    with pytest.raises(ValueError, match="err"):
        trimmed_mae(np.zeros((2, 2)))


def test_trimmed_mae_resists_a_corrupted_row_and_the_plain_mean_does_not():
    rng = np.random.default_rng(3)
    clean = rng.normal(0.0, 0.03, 1000)
    corrupted = clean.copy()
    corrupted[17] = 4.0e4  # one blown-up energy, as SevenNet-0's 4e7 meV/atom rows
    assert trimmed_mae(corrupted).value == pytest.approx(np.mean(np.abs(np.delete(clean, 17))), rel=1e-12)
    assert trimmed_mae(corrupted).n_removed == 1
    untrimmed = trimmed_mae(corrupted, cutoff=np.inf).value  # the untrimmed limit is dominated by the one row
    assert untrimmed > 1000 * trimmed_mae(clean).value


def test_trim_sweep_equals_pointwise():
    rng = np.random.default_rng(0)
    err = np.concatenate([rng.standard_t(2, 500) * 0.2, [np.nan, 7.0, -7.0]])
    cuts = np.array([0.05, 0.25, 0.5, 1.0, 2.0, np.inf])
    sw = trimmed_mae_sweep(err, cuts)
    for j, c in enumerate(cuts):
        r = trimmed_mae(err, c)
        assert sw.value[j] == pytest.approx(r.value, rel=1e-13)
        assert (sw.n_kept[j], sw.n_removed[j]) == (r.n_kept, r.n_removed)
    assert sw.n_nonfinite == 1 and np.all(np.diff(sw.n_kept) >= 0)
    _strict_json(sw)
    with pytest.raises(ValueError, match="cutoffs"):
        trimmed_mae_sweep(err, [0.5, -1.0])


# ============================================================================ cluster bootstrap
def _dyadic_data(rng, n_sys=23):
    size = rng.integers(1, 7, n_sys)
    g = np.repeat(np.arange(n_sys) * 7 + 3, size)  # non-contiguous labels
    x = rng.integers(-16, 17, g.size) / 8.0  # sums of these are exact in float64
    perm = rng.permutation(g.size)  # rows not sorted by system
    return x[perm], g[perm]


@pytest.mark.parametrize("fast,generic", [
    ("mean", lambda a: np.mean(a)),
    (np.mean, lambda a: float(np.sum(a) / a.size)),
    ("mae", lambda a: np.mean(np.abs(a))),
    ("trimmed_mae", lambda a: trimmed_mae(a)),               # a result: read through .value
    (functools.partial(trimmed_mae, cutoff=0.75), lambda a: trimmed_mae(a, 0.75).value),
])
def test_fast_path_equals_generic_path_exactly_on_the_same_draws(fast, generic):
    rng = np.random.default_rng(11)
    x, g = _dyadic_data(rng)
    if fast in ("trimmed_mae",):
        x[::9] = np.nan  # excluded by the trim on both paths
    rf = cluster_bootstrap(fast, x, g, n_boot=300, seed=5, return_replicates=True)
    rg = cluster_bootstrap(generic, x, g, n_boot=300, seed=5, return_replicates=True)
    assert (rf.method, rg.method) == ("fast", "generic")
    np.testing.assert_array_equal(rf.replicates, rg.replicates)  # bit-identical: same draws, exact sums
    assert (rf.lo, rf.hi, rf.estimate) == (rg.lo, rg.hi, rg.estimate)
    # a different seed gives different draws (the comparison above is not trivially true)
    other = cluster_bootstrap(fast, x, g, n_boot=300, seed=6, return_replicates=True)
    assert not np.array_equal(other.replicates, rf.replicates)


def test_fast_equals_generic_on_real_valued_paired_data():
    rng = np.random.default_rng(2)
    x, g = _clustered(rng, 40, 5)
    y = 0.8 * x + rng.normal(0, 0.3, x.size)
    names = np.array([f"sys-{k}" for k in g])  # string labels
    rf = cluster_bootstrap("trimmed_mae", x, names, n_boot=200, paired=y, cutoff=1.5, return_replicates=True)
    rg = cluster_bootstrap(lambda a: trimmed_mae(a, 1.5), x, names, n_boot=200, paired=y, return_replicates=True)
    np.testing.assert_allclose(rf.replicates, rg.replicates, rtol=1e-13, atol=1e-15)
    assert rf.paired and rf.estimate == pytest.approx(trimmed_mae(x, 1.5).value - trimmed_mae(y, 1.5).value)


def test_paired_uses_the_same_systems_in_each_replicate():
    rng = np.random.default_rng(4)
    a, g = _clustered(rng, 30, 4)
    b = a + 0.25  # same structures, shifted: stat(a) - stat(b) = -0.25 in every replicate
    r = cluster_bootstrap("mean", a, g, paired=b, n_boot=400)
    assert r.lo == pytest.approx(-0.25, abs=1e-12) and r.hi == pytest.approx(-0.25, abs=1e-12)
    # the paired replicates are the difference of the unpaired ones drawn with the same seed
    ra = cluster_bootstrap("mean", a, g, n_boot=400, seed=9, return_replicates=True).replicates
    b2 = a + rng.normal(0, 0.5, a.size)
    rb = cluster_bootstrap("mean", b2, g, n_boot=400, seed=9, return_replicates=True).replicates
    rp = cluster_bootstrap("mean", a, g, paired=b2, n_boot=400, seed=9, return_replicates=True).replicates
    np.testing.assert_allclose(rp, ra - rb, atol=1e-13)
    # unpaired intervals on correlated data are much wider than the paired one
    unpaired_width = np.percentile(ra, 97.5) - np.percentile(ra, 2.5)
    assert np.percentile(rp, 97.5) - np.percentile(rp, 2.5) < 0.5 * unpaired_width


def test_draws_do_not_depend_on_chunking(monkeypatch):
    rng = np.random.default_rng(8)
    x, g = _clustered(rng, 50, 3)
    whole = cluster_bootstrap("mean", x, g, n_boot=257, return_replicates=True).replicates
    monkeypatch.setattr(_robust, "_CHUNK_CELLS", 50 * 7)  # 7 replicates per chunk
    fast = cluster_bootstrap("mean", x, g, n_boot=257, return_replicates=True).replicates
    generic = cluster_bootstrap(lambda a: np.mean(a), x, g, n_boot=257, return_replicates=True).replicates
    np.testing.assert_allclose(fast, whole, rtol=1e-13)  # BLAS may sum in another order per chunk shape
    np.testing.assert_allclose(generic, whole, rtol=1e-13)
    chunked = np.concatenate(list(_robust._draw_chunks(50, 257, 0, 50)))
    monkeypatch.undo()
    np.testing.assert_array_equal(chunked, np.concatenate(list(_robust._draw_chunks(50, 257, 0, 50))))


def test_resamples_whole_systems():
    # each system holds one repeated value: every replicate mean is a mean of S drawn system values
    vals = np.array([0.0, 1.0, 10.0, 100.0])
    g = np.repeat(np.arange(4), [1, 2, 3, 4])
    x = vals[g]
    captured = []
    cluster_bootstrap(lambda a: captured.append(a.copy()) or 0.0, x, g, n_boot=50, seed=1)
    for a in captured:
        counts = {v: int(np.sum(a == v)) for v in vals}
        for k, v in enumerate(vals):  # a system is taken whole: its row count is a multiple of its size
            assert counts[v] % (k + 1) == 0
        assert sum(counts[v] // (k + 1) for k, v in enumerate(vals)) == 4  # S systems per replicate


def _coverage(rng, n_rep, n_sys, m, iid):
    hits = 0
    for _ in range(n_rep):
        x, g = _clustered(rng, n_sys, m, mu=0.3)
        r = cluster_bootstrap("mean", x, np.arange(x.size) if iid else g, n_boot=500, seed=int(rng.integers(2**31)))
        hits += r.lo <= 0.3 <= r.hi
    return hits / n_rep


def test_cluster_bootstrap_covers_nominally_and_the_iid_bootstrap_undercovers():
    """95 % interval of the mean of clustered data (30 systems x 8 rows, intra-class correlation 0.5).

    200 repetitions: the binomial s.d. of the coverage at 0.95 is 0.0154. The cluster bootstrap must lie within
    3 s.d. of nominal, after an allowance of 0.02 below for the percentile interval's known small-sample
    under-coverage with 30 clusters (it behaves like z instead of t(29), with a (S-1)/S variance: ~0.936), i.e.
    in [0.884, 0.996]. The i.i.d. bootstrap resamples rows as if independent; with a design effect of
    1 + 7 * 0.5 = 4.5 its interval is ~2.1x too narrow, coverage P(|Z| < 1.96/2.12) ~ 0.64, so it must fall
    below 0.80: the reason the control resamples systems.
    """
    cov_cluster = _coverage(np.random.default_rng(2024), 200, 30, 8, iid=False)
    cov_iid = _coverage(np.random.default_rng(2024), 100, 30, 8, iid=True)  # s.d. 0.048 at 0.64
    assert 0.95 - 0.02 - 3 * 0.0154 <= cov_cluster <= 0.95 + 3 * 0.0154
    assert cov_iid < 0.80


def test_bootstrap_validation_and_json():
    x, g = np.arange(6.0), np.array([0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="groups"):
        cluster_bootstrap("mean", x, g[:5])
    with pytest.raises(ValueError, match="paired"):
        cluster_bootstrap("mean", x, g, paired=x[:5])
    with pytest.raises(ValueError, match="stat"):
        cluster_bootstrap("median", x, g)
    with pytest.raises(ValueError, match="ci"):
        cluster_bootstrap("mean", x, g, ci=(97.5, 2.5))
    with pytest.raises(ValueError, match="n_boot"):
        cluster_bootstrap("mean", x, g, n_boot=0)
    with pytest.raises(ValueError, match="data contains non-finite"):
        cluster_bootstrap("mean", np.r_[x[:5], np.nan], g)
    with pytest.raises(ValueError, match="cutoff"):
        cluster_bootstrap("mean", x, g, cutoff=0.5)
    r = cluster_bootstrap(np.median, x, [("Fe", "Ni")] * 2 + [("Cu",)] * 2 + [("Al", "Fe")] * 2, n_boot=20)
    assert r.n_groups == 3 and r.method == "generic"
    d = json.loads(_strict_json(r))
    assert set(d) >= {"estimate", "lo", "hi", "se", "n_boot", "n_groups"} and d["replicates"] is None


# ============================================================================ splits
def test_system_split_is_disjoint_near_fraction_and_salted():
    groups = np.array([f"{a}-{b}" for a in range(60) for b in range(40)])  # 2,400 systems
    rows = np.repeat(groups, 3)
    held = system_split(rows, 0.3)
    assert np.all(held.reshape(-1, 3) == held.reshape(-1, 3)[:, :1])  # no system on both sides
    frac = held[::3].mean()
    assert abs(frac - 0.3) < 4 * math.sqrt(0.3 * 0.7 / groups.size)
    other = system_split(rows, 0.3, salt="another")
    assert 0.2 < np.mean(held != other) < 0.6  # an independent split, not the same one
    exact = system_split(groups, 0.3, method="rank")
    assert exact.sum() == round(0.3 * groups.size)
    # threshold assignments do not move when systems are added
    more = system_split(np.r_[groups, [f"new-{k}" for k in range(500)]], 0.3)
    np.testing.assert_array_equal(more[: groups.size], held[::3])
    with pytest.raises(ValueError, match="fraction"):
        system_split(groups, 1.0)


def test_system_split_follows_the_documented_sha256_recipe():
    labels = ["Fe-Ni", "Al-Cu-Zr", "Mo", 17]
    expect = [int.from_bytes(hashlib.sha256(("jaxcert\x00" + str(s)).encode()).digest()[:8], "big") / 2**64 < 0.5
              for s in labels]
    np.testing.assert_array_equal(system_split(np.array(labels, dtype=object), 0.5), expect)


# the module is loaded without running the package __init__s (no jax import: a fast subprocess)
_SPLIT_SCRIPT = (
    "import sys, types; d = sys.argv[1]\n"
    "for n, p in (('jaxcert', d), ('jaxcert.controls', d + '/controls')):\n"
    "    m = types.ModuleType(n); m.__path__ = [p]; sys.modules[n] = m\n"
    "from jaxcert.controls._robust import system_split, system_kfold;"
    "g=[f's{k}' for k in range(300)];"
    "print(''.join('1' if h else '0' for h in system_split(g)), ''.join(map(str, system_kfold(g))));"
    "print(''.join('1' if hash(s) % 10 < 3 else '0' for s in g))"  # what a split on Python's hash() gives
)


def _in_process(script, hashseed):
    env = dict(os.environ, PYTHONHASHSEED=str(hashseed), JAX_PLATFORMS="cpu")
    pkg = os.path.dirname(os.path.dirname(_robust.__file__))
    return subprocess.run([sys.executable, "-c", script, pkg], env=env, capture_output=True, text=True,
                          check=True).stdout


def test_split_is_stable_across_processes_where_python_hash_is_not():
    (split1, hash1), (split2, hash2) = (_in_process(_SPLIT_SCRIPT, seed).splitlines() for seed in (1, 2))
    assert split1 == split2
    assert hash1 != hash2  # what the check guards against: Python's str hash is salted per process


def test_system_kfold_disjoint_balanced_and_consistent():
    rng = np.random.default_rng(0)
    g = rng.integers(0, 103, 2000)
    fold = system_kfold(g, k=5)
    for s in np.unique(g):
        assert np.unique(fold[g == s]).size == 1
    per_fold = np.bincount([fold[g == s][0] for s in np.unique(g)], minlength=5)
    assert per_fold.max() - per_fold.min() <= 1 and per_fold.sum() == np.unique(g).size
    thr = system_kfold(g, k=5, method="threshold")
    assert set(np.unique(thr)) <= set(range(5))
    with pytest.raises(ValueError, match="fewer than k"):
        system_kfold([1, 2, 3], k=5)
    with pytest.raises(ValueError, match="k must"):
        system_kfold(g, k=1)


# ============================================================================ polymorph ordering
def test_polymorph_rho_matches_scipy_and_is_shift_invariant():
    rng = np.random.default_rng(1)
    sizes = rng.integers(2, 9, 120)
    comp = np.repeat(np.arange(120), sizes)
    e_ref = np.round(rng.normal(0, 0.08, comp.size), 2)  # rounding makes reference ties
    e_mod = e_ref + rng.normal(0, 0.04, comp.size)
    perm = rng.permutation(comp.size)
    comp, e_ref, e_mod = comp[perm], e_ref[perm], e_mod[perm]
    r = polymorph_ordering(e_mod, e_ref, comp)
    assert r.n_compositions > 50 and np.all(r.n_members >= 3) and np.all(r.spread >= 0.025)
    for k, c in enumerate(r.compositions):
        sel = comp == c
        if np.ptp(e_mod[sel]) > 0:
            assert r.rho[k] == pytest.approx(ss.spearmanr(e_mod[sel], e_ref[sel])[0], abs=1e-12)
    expected_q = [c for c in range(120) if (comp == c).sum() >= 3 and np.ptp(e_ref[comp == c]) >= 0.025]
    np.testing.assert_array_equal(r.compositions, expected_q)
    # a per-composition constant (what a per-element reference shift adds at fixed composition) changes nothing
    shift = rng.normal(0, 1.0, 120)[comp]
    r2 = polymorph_ordering(e_mod + shift, e_ref, comp)
    np.testing.assert_allclose(r2.rho, r.rho, atol=1e-12)
    # a broken case: shuffling the model's energies across structures destroys the ordering
    bad = polymorph_ordering(rng.permutation(e_mod), e_ref, comp)
    assert r.median_rho > 0.6 and abs(bad.median_rho) < 0.3


def test_polymorph_hit_rate_ties_and_chance():
    comp = ["A"] * 4 + ["B"] * 3 + ["C"] * 5
    e_ref = np.array([0.00, 0.00, 0.05, 0.10,   0.0, 0.1, 0.2,   0.0, 0.03, 0.06, 0.09, 0.12])
    e_mod = np.array([0.01, 0.00, 0.03, 0.09,   0.2, 0.1, 0.0,   0.1, 0.1, 0.0, 0.2, 0.3])
    r = polymorph_ordering(e_mod, e_ref, comp)
    # A: model minimum is row 1, tied for the reference minimum -> a hit; B: reversed -> miss, rho = -1;
    # C: model picks row 9 (reference 0.06) -> miss
    np.testing.assert_array_equal(r.hit, [1.0, 0.0, 0.0])
    assert r.rho[1] == pytest.approx(-1.0)
    np.testing.assert_allclose(r.chance_per, [2 / 4, 1 / 3, 1 / 5])  # tie-aware chance
    assert r.chance == pytest.approx((0.5 + 1 / 3 + 0.2) / 3)
    # a model that predicts one energy for everything scores chance, not 100 %
    flat = polymorph_ordering(np.zeros(12), e_ref, comp)
    np.testing.assert_allclose(flat.hit, flat.chance_per)
    assert np.all(flat.model_constant) and np.all(flat.rho == 0.0)
    # the filters: 'B' spans 0.2 but has 3 members; min_n=4 drops it; min_spread=0.15 keeps only B
    assert list(polymorph_ordering(e_mod, e_ref, comp, min_n=4).compositions) == ["A", "C"]
    assert list(polymorph_ordering(e_mod, e_ref, comp, min_spread=0.15).compositions) == ["B"]
    _strict_json(r)


def test_polymorph_bootstrap_and_validation():
    rng = np.random.default_rng(5)
    comp = np.repeat(np.arange(60), 5)
    e_ref = rng.normal(0, 0.1, comp.size)
    e_mod = e_ref + rng.normal(0, 0.05, comp.size)
    r = polymorph_ordering(e_mod, e_ref, comp, groups=comp // 3, n_boot=200)
    assert r.rho_ci.lo <= r.median_rho <= r.rho_ci.hi and r.hit_ci.lo <= r.hit_rate <= r.hit_ci.hi
    with pytest.raises(ValueError, match="constant within each composition"):
        polymorph_ordering(e_mod, e_ref, comp, groups=np.arange(comp.size), n_boot=10)
    with pytest.raises(ValueError, match="min_n"):
        polymorph_ordering(e_mod, e_ref, comp, min_n=1)
    with pytest.raises(ValueError, match="same length"):
        polymorph_ordering(e_mod[:-1], e_ref, comp)


# ============================================================================ symmetry retention
def test_sg_retention_curve_known_answer():
    from ase import Atoms

    from jaxcert.core.structure import Structure

    cu = Atoms("Cu4", scaled_positions=[[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]],
               cell=np.eye(3) * 3.61, pbc=True)            # conventional fcc cell, Fm-3m (225)
    moved = cu.copy()
    moved.positions[0] += [0.02, 0.0, 0.0]                 # breaks 225 at 0.01 Å, not at 0.05 Å
    broken = cu.copy()
    broken.positions[0] += [0.3, 0.0, 0.0]                 # a real distortion: lost at every tolerance
    overlap = (np.eye(3) * 3.0, [[0, 0, 0], [0, 0, 0]], [29, 29])  # spglib cannot assign a group
    ref = [cu, cu, cu, cu, cu]
    rel = [Structure.from_ase(cu), moved, broken, overlap, None]
    r = sg_retention(ref, rel, groups=["Cu", "Cu", "Cu", "X", "Y"], n_boot=200)
    assert np.all(r.reference_sg == 225)
    np.testing.assert_array_equal(r.n_scored, [3, 3, 3])    # the spglib failure and the failed relaxation left out
    np.testing.assert_allclose(r.fraction, [1 / 3, 2 / 3, 2 / 3])
    np.testing.assert_array_equal(r.n_spglib_failed, [1, 1, 1])
    assert r.n_unrelaxed == 1 and r.n_groups == 3
    assert np.all(r.lo <= r.fraction) and np.all(r.fraction <= r.hi)
    # the other failure policy: a structure spglib cannot assign counts as not retained
    policy = [sg_retention([cu, cu], [cu, overlap], n_boot=20, on_failure=p).fraction
              for p in ("exclude", "not_retained")]
    np.testing.assert_allclose(policy, [[1.0] * 3, [0.5] * 3])
    _strict_json(r)
    with pytest.raises(ValueError, match="same length"):
        sg_retention(ref, rel[:-1])
    with pytest.raises(ValueError, match="symprec"):
        sg_retention(ref, rel, symprec=[0.0])
    with pytest.raises(ValueError, match=r"relaxed\[0\]"):
        sg_retention([cu], ["not a structure"])


# ============================================================================ error correlation
def test_error_correlation_permutation_known_answers():
    rng = np.random.default_rng(7)
    a = rng.normal(size=400)
    b_corr = 0.5 * a + rng.normal(size=400)
    b_ind = rng.normal(size=400)
    r = error_correlation_permutation(a, b_corr, n_perm=999)
    assert r.r == pytest.approx(ss.spearmanr(a, b_corr)[0], abs=1e-12)
    assert r.p_value == pytest.approx(1 / 1000)             # nothing in the null is as extreme
    assert error_correlation_permutation(a, b_ind, n_perm=999).p_value > 0.05
    assert abs(r.null_mean) < 0.02
    p = error_correlation_permutation(a, b_corr, n_perm=200, method="pearson")
    assert p.r == pytest.approx(np.corrcoef(a, b_corr)[0, 1], abs=1e-12)
    with_nan = error_correlation_permutation(np.r_[a, np.nan], np.r_[b_corr, 1.0], n_perm=50)
    assert with_nan.n_dropped == 1 and with_nan.r == pytest.approx(r.r)
    _strict_json(r)


def test_within_system_permutation_removes_shared_system_offsets():
    # the two models' errors share only a per-system offset; within a system they are independent
    rng = np.random.default_rng(9)
    g = np.repeat(np.arange(40), 10)
    off = rng.normal(0, 1.0, 40)[g]
    a, b = off + rng.normal(0, 0.5, g.size), off + rng.normal(0, 0.5, g.size)
    across = error_correlation_permutation(a, b, n_perm=500)
    within = error_correlation_permutation(a, b, n_perm=500, groups=g)
    assert across.p_value < 0.01 and within.p_value > 0.05
    assert within.null_mean > 0.5  # the restricted null keeps the system-level correlation
    # within-system correlation that is real is still found
    b2 = off + 0.8 * (a - off) + rng.normal(0, 0.3, g.size)
    assert error_correlation_permutation(a, b2, n_perm=500, groups=g).p_value < 0.01


def test_corpus_correlation_exact_permutation():
    rng = np.random.default_rng(10)
    n = 400
    corpus = np.array(["OMat"] * 6 + ["MP"] * 4)
    shared = {"OMat": rng.normal(size=n), "MP": rng.normal(size=n)}
    e = np.stack([0.05 * (shared[c] + rng.normal(size=n)) for c in corpus])
    e[3, 5] = 9.0  # one blown-up prediction: the structure is excluded (> 5 eV/atom)
    r = corpus_correlation_test(e, corpus)
    assert (r.n_labelings, r.n_same_pairs, r.n_cross_pairs, r.exact) == (210, 21, 24, True)
    assert r.p_value == pytest.approx(1 / 210) and r.min_p == pytest.approx(1 / 210)
    assert r.n_excluded == 1 and r.n_structures == n - 1
    assert r.mean_same > r.mean_cross
    # broken case: no corpus-shared error component -> no evidence
    e0 = 0.05 * rng.normal(size=(10, n))
    assert corpus_correlation_test(e0, corpus).p_value > 0.05
    # the labeling enumeration is exact: the stat over all 210 labelings, checked by brute force
    labs = _robust._labelings(np.array([0] * 6 + [1] * 4))
    assert labs.shape == (210, 10) and np.unique(labs, axis=0).shape[0] == 210
    _strict_json(r)
    with pytest.raises(ValueError, match="corpus"):
        corpus_correlation_test(e, ["a"] * 10)


# ============================================================================ binned error
def test_binned_error_known_answer_and_intervals():
    x = np.array([-0.9, -0.6, -0.2, 0.1, 0.4, 0.49, 0.5, 1.0, 7.0, np.nan])
    e = np.array([0.01, -0.03, 0.02, 2.0, 0.05, -0.07, 0.1, np.nan, 0.2, 0.3])
    r = controls.binned_error(x, e, bins=[-1.0, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(r.n, [3, 3, 1])            # x=1.0 falls in the closed last bin, its err is NaN
    np.testing.assert_allclose(r.value, [0.02, 0.06, 0.1])   # bin 2 trims the 2.0 error
    np.testing.assert_array_equal(r.n_removed, [0, 1, 0])
    np.testing.assert_allclose(r.median_abs, [0.02, 0.07, 0.1])
    assert r.n_outside == 2 and np.all(np.isnan(r.lo))
    med = controls.binned_error(x, e, bins=[-1.0, 0.0, 0.5, 1.0], statistic="median")
    np.testing.assert_allclose(med.value, med.median_abs)
    rng = np.random.default_rng(12)
    xs = rng.uniform(0, 1, 3000)
    g = rng.integers(0, 150, 3000)
    es = rng.normal(0, 0.01 + 0.1 * xs)  # error grows with x
    rb = controls.binned_error(xs, es, 6, groups=g, n_boot=300)
    assert rb.trend_spearman == pytest.approx(1.0)
    assert np.all(rb.lo <= rb.value) and np.all(rb.value <= rb.hi)
    # every bin shares one set of system draws: bin j's interval is the cluster bootstrap of the trimmed MAE
    # over ALL systems with the rows outside bin j masked out (NaN), on the same seed
    for j in (0, 3):
        sel = (xs >= rb.edges[j]) & (xs < rb.edges[j + 1])
        one = cluster_bootstrap("trimmed_mae", np.where(sel, es, np.nan), g, n_boot=300)
        assert (one.lo, one.hi, one.estimate) == pytest.approx((rb.lo[j], rb.hi[j], rb.value[j]), rel=1e-12)
    flat = controls.binned_error(xs, rng.normal(0, 0.05, 3000), 6)
    assert abs(flat.trend_spearman) < 1.0
    _strict_json(rb)
    with pytest.raises(ValueError, match="bins"):
        controls.binned_error(xs, es, [1.0, 0.0])


def test_public_names_exported():
    for name in _robust.__all__:
        assert getattr(controls, name) is getattr(_robust, name)
        assert name in controls.__all__
