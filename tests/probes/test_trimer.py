"""trimer (docs/probes.md §4.5): clean pass (§8.5), curl fires via transverse, orientation via ΔE₃ (§8.4)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core.derivatives import FiniteDifference
from jaxcert.probes import TrimerConfig, trimer, unit_pairs
from jaxcert.probes.base import OK, PROBES, SKIPPED
from tests.probes.test_conservativeness import defect, knob
from tests.test_dynamics import clean_lj

LJ = clean_lj()
CURL = defect("curl", LJ, 1.0)

#: transverse floors measured on clean LJ / trimer3 (keys 0, 7): ≈ 5e-15 eV/Å² (f64), ≈ 2e-6 eV/Å² (f32)
FLOOR = {jnp.float32: 2e-5, jnp.float64: 1e-13}


def trimer3(dtype=jnp.float64):
    """§8.3 trimer3: trimer("Ar") (§2.3 geometry, built here) rescaled about the origin to edge 2^{1/6}."""
    d = 3.7193816690412396  # d_nn(Ar), §2.1
    h = np.sqrt(d**2 - (d / 2) ** 2)
    R = np.array([[8.0, 8.0, 8.0], [8.0 + d / 2, 8.0 + h, 8.0], [8.0 + d, 8.0, 8.0]])
    f = 2 ** (1 / 6) / d
    return jaxcert.Structure.create(R * f, ["Ar"] * 3, cell=np.diag([d + 16, h + 16, 16.0]) * f, dtype=dtype)


def three_body(model, decay=0.0, const=0.0, refuse=0.0):
    """LJ + m_A m_B m_C (decay·exp(−(r_AB + r_BC + r_CA)) + const); ``refuse`` > 0 makes fragments NaN."""

    def energy(p, s):
        R, m = s.positions, s.mask.astype(s.positions.dtype)
        r = lambda i, j: jnp.linalg.norm(R[i] - R[j])  # noqa: E731
        e3 = m[0] * m[1] * m[2] * (p["decay"] * jnp.exp(-(r(0, 1) + r(1, 2) + r(0, 2))) + p["const"])
        bad = jnp.where(p["refuse"] > 0, jnp.log(jnp.sum(m) - 2.5), 0.0)  # NaN for fewer than 3 atoms
        return model.energy_fn(p["inner"], s) + e3 + bad

    params = {"inner": model.params, "decay": jnp.asarray(decay), "const": jnp.asarray(const),
              "refuse": jnp.asarray(refuse)}
    return jaxcert.Model(energy, params=params, name="three_body", cutoff=model.cutoff)


#: one model (one compiled program) for every three-body knob setting
THREE_BODY = three_body(LJ)


def test_registered():
    spec = PROBES["trimer"]
    assert spec.fn is trimer and spec.substrate == "trimer" and spec.gated


def test_fixture_matches_the_builder():
    sub = pytest.importorskip("jaxcert.probes.substrates")
    s = sub.trimer("Ar")
    np.testing.assert_allclose(np.asarray(s.positions) * 2 ** (1 / 6) / 3.7193816690412396,
                               np.asarray(trimer3().positions), atol=1e-9)


@pytest.mark.parametrize("seed", [0, 7])
def test_clean_lj_passes(dtype, seed):
    r = trimer(LJ, jax.random.key(seed), substrate=trimer3(dtype))
    d = r.details
    tb, tr = d["three_body_vanishing"], d["transverse"]
    assert float(r.score) > 0.99 and bool(r.gate) and int(r.status) == OK  # §8.5
    assert float(d["sub_scores"]["three_body_vanishing"]) > 0.99
    # pairwise: ΔE₃ under the (dtype-aware) noise floor, so d₃ = 0 exactly
    assert bool(tb["vanishing"]) and float(d["sub_defects"]["three_body_vanishing"]) == 0.0
    assert float(jnp.max(jnp.abs(tb["delta_e3"]))) < float(tb["noise_floor"])
    assert float(tr["mean_abs_antisymmetry"]) < FLOOR[dtype] and float(tr["eps"]) == 0.0
    assert tb["separations"].shape == tb["delta_e3"].shape == (16,) and tb["delta_e3"].dtype == dtype
    np.testing.assert_allclose(np.asarray(tb["separations"])[[0, -1]], [0.0, 12.0])
    assert int(tr["n_pairs"]) == 16 and int(r.n_evals) == 3 + 1 + 48 + 32
    np.testing.assert_allclose(float(r.defect), float(tr["mean_abs_antisymmetry"]) / 0.05, rtol=1e-12)


def test_curl_fires_via_transverse():
    """NonConservative s = 1 → trimer < 0.5 through the transverse channel (§8.4); ΔE₃ stays 0."""
    r = trimer(CURL, jax.random.key(0), substrate=trimer3())
    d = r.details
    assert float(r.score) < 0.5 and not bool(r.gate)
    assert float(d["sub_defects"]["transverse"]) > 0.25
    assert float(d["sub_scores"]["three_body_vanishing"]) == 1.0 and bool(d["three_body_vanishing"]["vanishing"])


def test_orientation_fires_via_three_body():
    """SymmetryBreaking c = 1 → trimer < 0.5 via ΔE₃ = −c Σ(R·n̂)² + 3c(R_centre·n̂)² (§8.4), transverse clean."""
    c = 1.0
    s = trimer3()
    r = trimer(defect("orientation", LJ, c), jax.random.key(0), substrate=s)
    d = r.details
    assert float(r.score) < 0.5 and bool(r.gate)  # the gate reads the transverse channel only
    assert float(d["sub_defects"]["transverse"]) < 1e-12
    tb = d["three_body_vanishing"]
    assert not bool(tb["vanishing"]) and float(tb["residual_relative"]) > 0.9
    # right reason: the exact one-body residue, B receding along ŷ (apex direction)
    R = np.asarray(s.positions)
    n = np.ones(3) / np.sqrt(3)
    centre = 0.5 * np.asarray(s.cell).sum(0)
    o = np.linspace(0, 12, 16)
    sq = lambda x: c * (x @ n) ** 2  # noqa: E731
    want = -(sq(R[0]) + sq(R[2]) + sq(R[1][None] + o[:, None] * np.array([0, 1.0, 0]))) + 3 * sq(centre)
    np.testing.assert_allclose(np.asarray(tb["delta_e3"]), want, rtol=1e-9, atol=1e-9)


def test_genuine_three_body_terms():
    """A decaying three-body term passes with d₃ ≈ 0; one that never decays (or rises) fires."""
    base = THREE_BODY
    s = trimer3()
    dec = trimer(knob(base, decay=1.0), jax.random.key(0), substrate=s).details
    tb = dec["three_body_vanishing"]
    assert not bool(tb["vanishing"]) and float(dec["sub_defects"]["three_body_vanishing"]) < 1e-9
    assert float(tb["smoothness_penalty"]) == 0.0  # monotone decay: TV = span
    const = trimer(knob(base, const=0.01), jax.random.key(0), substrate=s).details
    np.testing.assert_allclose(float(const["sub_defects"]["three_body_vanishing"]), 1.0, rtol=1e-9)  # r = 1
    assert float(const["sub_scores"]["three_body_vanishing"]) < 0.01


def test_fragment_refusal_is_a_skip():
    r = trimer(knob(THREE_BODY, refuse=1.0), jax.random.key(0), substrate=trimer3())
    assert int(r.status) == SKIPPED and np.isnan(float(r.score)) and not bool(r.gate)
    assert bool(r.details["fragment_refused"])
    assert np.isnan(float(r.details["sub_defects"]["three_body_vanishing"]))
    assert float(r.details["sub_defects"]["transverse"]) < 1e-13  # still computed and reported


def test_fd_engine_agrees_with_exact():
    s = trimer3()
    fd = trimer(CURL, jax.random.key(0), TrimerConfig(derivatives=FiniteDifference()), substrate=s)
    ex = trimer(CURL, jax.random.key(0), substrate=s)
    assert int(fd.n_evals) == 52 + 16 * 4 and float(fd.details["transverse"]["eps"]) == 1e-3
    # same (u, w) draws: FD = exact up to its O(ε²) truncation of the LJ part (the curl is linear)
    np.testing.assert_allclose(np.asarray(fd.details["transverse"]["antisymmetry"]),
                               np.asarray(ex.details["transverse"]["antisymmetry"]), atol=5e-3)
    np.testing.assert_array_equal(fd.details["three_body_vanishing"]["delta_e3"],
                                  ex.details["three_body_vanishing"]["delta_e3"])  # energies only: engine-free


def test_not_a_trimer_is_skipped():
    from jaxcert.probes.base import ProbeSkip

    four = jaxcert.Structure.create(np.eye(4, 3) * 2.0, ["Ar"] * 4)
    with pytest.raises(ProbeSkip, match="3-atom"):
        trimer(LJ, jax.random.key(0), substrate=four)


def test_paper_pair_count():
    uw = unit_pairs(jax.random.key(0), jnp.ones(3, bool), 8, jnp.float64)
    assert uw.shape == (8, 2, 3, 3)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(uw).reshape(8, 2, 9), axis=-1), 1.0, rtol=1e-12)


def test_jit_vmap_over_elements_equals_loop():
    sub = pytest.importorskip("jaxcert.probes.substrates")
    model = jaxcert.models.get("lj")
    batch, symbols = sub.stacked("trimer", ["Ar", "Cu", "Si"])
    keys = jax.random.split(jax.random.key(0), len(symbols))
    out = jax.jit(jax.vmap(partial(trimer, model)))(keys, substrate=batch)
    for k, el in enumerate(symbols):
        one = trimer(model, keys[k], substrate=sub.trimer(el))
        assert bool(one.gate) and float(one.score) > 0.99
        assert bool(out.details["three_body_vanishing"]["vanishing"][k])
        np.testing.assert_allclose(out.details["three_body_vanishing"]["delta_e3"][k],
                                   one.details["three_body_vanishing"]["delta_e3"], atol=1e-14)
        np.testing.assert_allclose(out.details["transverse"]["antisymmetry"][k],
                                   one.details["transverse"]["antisymmetry"], atol=1e-14)
        np.testing.assert_allclose(out.score[k], one.score, rtol=1e-12)
