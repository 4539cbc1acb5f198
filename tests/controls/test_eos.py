"""Equations of state and the Δ metric (docs/controls.md, "Equations of state and the Δ metric")."""

import numpy as np
import pytest
from ase.eos import EquationOfState, birchmurnaghan
from ase.units import GPa
from ase.utils.deltacodesdft import delta as ase_delta
from scipy.integrate import quad

from jaxcert.controls import (
    DELTA_VOLUME_FACTORS,
    birch_murnaghan_energy,
    birch_murnaghan_fit,
    delta_gauge,
    eos_scan,
)

RNG = np.random.default_rng(14)


def _vinet(V, e0, v0, b0_gpa, b1):
    """Vinet EOS energy (a different functional form from BM, for the negative controls)."""
    b = b0_gpa * GPa
    eta = (V / v0) ** (1 / 3)
    decay = np.exp(-1.5 * (b1 - 1) * (eta - 1))
    return e0 + 2 * b * v0 / (b1 - 1) ** 2 * (2 - (5 + 3 * b1 * (eta - 1) - 3 * eta) * decay)


# ------------------------------------------------------------------------------------------ BM fit
def test_bm_energy_is_ase_birch_murnaghan():
    V = np.linspace(9.0, 14.0, 11)
    np.testing.assert_allclose(birch_murnaghan_energy(V, -1.5, 11.7, 140.0, 4.8),
                               birchmurnaghan(V, -1.5, 140.0 * GPa, 4.8, 11.7), rtol=0, atol=1e-13)


def test_bm_fit_recovers_planted_parameters_exactly_batched():
    n = 6
    e0 = RNG.uniform(-8, -1, n)
    v0 = RNG.uniform(8, 40, n)
    b0 = RNG.uniform(5, 300, n)
    b1 = RNG.uniform(3, 7, n)
    V = DELTA_VOLUME_FACTORS[None, :] * v0[:, None] * RNG.uniform(0.97, 1.03, (n, 1))  # V0 off-centre
    E = birch_murnaghan_energy(V, e0[:, None], v0[:, None], b0[:, None], b1[:, None])
    fit = birch_murnaghan_fit(V, E)
    np.testing.assert_allclose(fit.e0, e0, rtol=1e-12)
    np.testing.assert_allclose(fit.v0, v0, rtol=1e-10)
    np.testing.assert_allclose(fit.b0, b0, rtol=1e-8)
    np.testing.assert_allclose(fit.b1, b1, rtol=1e-7)
    assert np.all(fit.residual_rms < 1e-12) and fit.in_range.all() and fit.n_points == 7
    # the same check on Vinet data (a different EOS) fails: the fit is exact only for BM curves
    Ev = _vinet(V, e0[:, None], v0[:, None], b0[:, None], b1[:, None])
    fv = birch_murnaghan_fit(V, Ev)
    assert np.all(fv.residual_rms > 1e-8)
    assert np.max(np.abs(fv.b1 / b1 - 1)) > 1e-3


def test_bm_fit_is_the_least_squares_bm_curve_as_ase_nonlinear_fit():
    """On non-BM noisy data the linear fit lands on the same optimum as ASE's non-linear BM fit."""
    V = np.linspace(0.92, 1.08, 9) * 16.5
    E = _vinet(V, -3.7, 16.5, 78.0, 4.6) + RNG.normal(0, 2e-4, V.size)
    fit = birch_murnaghan_fit(V, E)
    eos = EquationOfState(V, E, eos="birchmurnaghan")
    v0, e0, B = eos.fit()
    assert fit.v0 == pytest.approx(v0, rel=1e-6) and fit.e0 == pytest.approx(e0, abs=1e-8)
    assert fit.b0 == pytest.approx(B / GPa, rel=1e-5) and fit.b1 == pytest.approx(eos.eos_parameters[2], rel=1e-4)
    assert not fit.in_range or fit.residual_rms > 0


def test_bm_fit_concave_or_nan_curves_give_nan_rows_only():
    V = np.linspace(10.0, 12.0, 7)
    good = birch_murnaghan_energy(V, -2.0, 11.0, 100.0, 4.5)
    E = np.stack([good, -good, np.where(np.arange(7) == 3, np.nan, good)])
    fit = birch_murnaghan_fit(V, E)
    assert fit.v0[0] == pytest.approx(11.0, rel=1e-10)
    assert np.isnan(fit.v0[1]) and np.isnan(fit.b0[1]) and np.isnan(fit.v0[2])
    far = birch_murnaghan_fit(V, birch_murnaghan_energy(V, 0.0, 13.0, 100.0, 4.5))
    assert far.v0 == pytest.approx(13.0, rel=1e-8) and far.in_range is False  # extrapolated minimum flagged
    assert isinstance(far.b0, float) and far.to_dict()["in_range"] is False


@pytest.mark.parametrize("V,E,match", [
    (np.arange(3.0) + 10, np.zeros(3), "at least 4"),
    (np.array([-1.0, 1, 2, 3]), np.zeros(4), "positive"),
    (np.full(5, 10.0), np.zeros(5), "distinct"),
    (np.arange(5.0) + 10, np.zeros(4), "broadcast"),
    (np.arange(5.0) + 10, 1.0, "scalar"),
])
def test_bm_fit_validates_input(V, E, match):
    with pytest.raises(ValueError, match=match):
        birch_murnaghan_fit(V, E)


# ------------------------------------------------------------------------------------------ Δ
def _delta_by_quadrature(a, b, center):
    va, vb = a[0], b[0]
    vc = {"mean": 0.5 * (va + vb), "a": va, "b": vb}[center]
    lo, hi = 0.94 * vc, 1.06 * vc
    f = lambda V: (birchmurnaghan(V, 0.0, a[1] * GPa, a[2], a[0]) - birchmurnaghan(V, 0.0, b[1] * GPa, b[2], b[0])) ** 2
    val, _ = quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=200)
    return 1000.0 * np.sqrt(val / (hi - lo))


def test_delta_is_zero_for_a_curve_with_itself_and_symmetric():
    assert delta_gauge(11.95, 141.3, 4.86, 11.95, 141.3, 4.86) == 0.0
    a, b = (11.95, 141.3, 4.86), (11.65, 144.3, 4.88)
    assert delta_gauge(*a, *b) == pytest.approx(delta_gauge(*b, *a), rel=1e-12)
    assert delta_gauge(*a, *b) > 1.0
    # only the centre definition breaks the symmetry
    assert delta_gauge(*a, *b, center="a") != pytest.approx(delta_gauge(*a, *b, center="b"), rel=1e-6)


@pytest.mark.parametrize("center", ["mean", "a", "b"])
def test_delta_matches_independent_quadrature_of_ase_bm_curves(center):
    for _ in range(4):
        v = RNG.uniform(10, 30)
        a = (v, RNG.uniform(20, 250), RNG.uniform(3.5, 6))
        b = (v * RNG.uniform(0.97, 1.03), a[1] * RNG.uniform(0.8, 1.2), a[2] + RNG.uniform(-1, 1))
        assert delta_gauge(*a, *b, center=center) == pytest.approx(_delta_by_quadrature(a, b, center), rel=1e-11)


def test_delta_small_volume_shift_closed_form_limit():
    """A V0 shift δ alone: ΔE ≈ −B0 (V − V0) δ / V0 (harmonic), so Δ → B0 |δ| w / √3, up to O(w) ≈ 6 %."""
    v0, b0, b1, w = 12.0, 140.0, 4.8, 0.06
    for rel_shift in (1e-7, 1e-4):
        d = delta_gauge(v0, b0, b1, v0 * (1 + rel_shift), b0, b1, window=w)
        limit = 1000.0 * (b0 * GPa) * v0 * rel_shift * w / np.sqrt(3.0)
        assert d == pytest.approx(limit, rel=0.05)
    # Δ over the wrong window (±3 %) misses the ±6 % limit by the ratio of the windows
    assert delta_gauge(v0, b0, b1, v0 * (1 + 1e-4), b0, b1, window=0.03) == pytest.approx(limit / 2, rel=0.05)


def test_delta_vectorised_over_dcdft_matches_ase_delta_wien2k_vs_experiment():
    """WIEN2k vs experiment on the 58 elements, vectorised, against ASE's midpoint-rule delta (100 points)."""
    import jaxcert.datasets as ds

    d = ds.get("dcdft")
    m = d.has_exp
    got = delta_gauge(d.v0[m], d.b0[m], d.b1[m], d.exp_v0[m], d.exp_b0[m], d.exp_b1[m])
    assert got.shape == (58,)
    ref = np.array([ase_delta(d.v0[i], d.b0[i] * GPa, d.b1[i], d.exp_v0[i], d.exp_b0[i] * GPa, d.exp_b1[i])
                    for i in np.flatnonzero(m)]) * 1000.0
    np.testing.assert_allclose(got, ref, rtol=2e-4)  # the midpoint rule's error, not ours
    asym = delta_gauge(d.v0[m], d.b0[m], d.b1[m], d.exp_v0[m], d.exp_b0[m], d.exp_b1[m], center="b")
    ref_asym = np.array([ase_delta(d.v0[i], d.b0[i] * GPa, d.b1[i], d.exp_v0[i], d.exp_b0[i] * GPa, d.exp_b1[i],
                                   symmetric=False) for i in np.flatnonzero(m)]) * 1000.0
    np.testing.assert_allclose(asym, ref_asym, rtol=2e-4)
    assert np.max(np.abs(asym / got - 1)) > 1e-3  # the two definitions differ measurably on real data


def test_delta_validates_and_propagates_nan():
    assert np.isnan(delta_gauge(np.nan, 100, 4, 10, 100, 4))
    with pytest.raises(ValueError, match="v0_b"):
        delta_gauge(10, 100, 4, -10, 100, 4)
    with pytest.raises(ValueError, match="b0_a"):
        delta_gauge(10, 0.0, 4, 10, 100, 4)
    with pytest.raises(ValueError, match="window"):
        delta_gauge(10, 100, 4, 10, 100, 4, window=1.5)
    with pytest.raises(ValueError, match="center"):
        delta_gauge(10, 100, 4, 10, 100, 4, center="both")
    with pytest.raises(ValueError, match="broadcast"):
        delta_gauge(np.ones(3) * 10, 100, 4, np.ones(2) * 10, 100, 4)


# ------------------------------------------------------------------------------------------ eos_scan
@pytest.fixture(scope="module")
def emt():
    from jaxcert.models import get

    return get("emt")


def test_eos_scan_emt_cu_matches_ase_emt_and_ase_eos_fit(emt):
    """Energies equal ASE's EMT at every volume (1e-10 eV/atom) and the fit equals ase.eos's BM fit
    (V0, B0 to 1e-6 relative, B' to 1e-4: curve_fit's convergence)."""
    from ase.build import bulk
    from ase.calculators.emt import EMT

    atoms = bulk("Cu", "fcc", a=3.6)
    r = eos_scan(emt, atoms)
    np.testing.assert_allclose(r.volumes, DELTA_VOLUME_FACTORS * atoms.get_volume(), rtol=1e-14)
    ref = []
    for v in r.volumes:
        a = atoms.copy()
        a.set_cell(atoms.get_cell() * (v / atoms.get_volume()) ** (1 / 3), scale_atoms=True)
        a.calc = EMT()
        ref.append(a.get_potential_energy() / len(a))
    np.testing.assert_allclose(r.energies, ref, rtol=0, atol=1e-10)
    eos = EquationOfState(r.volumes, np.array(ref), eos="birchmurnaghan")
    v0, e0, B = eos.fit()
    assert r.fit.v0 == pytest.approx(v0, rel=1e-6) and r.fit.b0 == pytest.approx(B / GPa, rel=1e-6)
    assert r.fit.b1 == pytest.approx(eos.eos_parameters[2], rel=1e-4)
    assert 100.0 < r.fit.b0 < 160.0 and r.fit.in_range  # EMT Cu: B0 ≈ 134 GPa (near experiment's 140)
    assert r.to_dict()["fit"]["b0"] == pytest.approx(r.fit.b0)


def test_eos_scan_is_per_atom_and_centred_on_v0(emt):
    """The 4-atom conventional dcdft Cu cell and the 1-atom primitive cell give the same curve per atom."""
    from ase.build import bulk

    import jaxcert.datasets as ds

    d = ds.get("dcdft")
    v0 = float(d["Cu"].v0)
    conv = eos_scan(emt, d["Cu"].atoms, v0=v0)
    prim = eos_scan(emt, bulk("Cu", "fcc", a=3.6), v0=v0)
    assert conv.n_atoms == 4 and prim.n_atoms == 1
    np.testing.assert_allclose(conv.volumes, DELTA_VOLUME_FACTORS * v0, rtol=1e-14)
    np.testing.assert_allclose(conv.energies, prim.energies, rtol=0, atol=1e-10)
    # a scan that forgot the per-atom normalisation would be 4x off
    assert np.max(np.abs(conv.energies * conv.n_atoms - prim.energies)) > 1e-3


def test_eos_scan_validates(emt):
    from ase import Atoms
    from ase.build import bulk

    with pytest.raises(ValueError, match="periodic"):
        eos_scan(emt, Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.5]]))
    with pytest.raises(ValueError, match="volume_factors"):
        eos_scan(emt, bulk("Cu"), volume_factors=[0.98, 1.0, 1.02])
    with pytest.raises(ValueError, match="v0"):
        eos_scan(emt, bulk("Cu"), v0=-3.0)
