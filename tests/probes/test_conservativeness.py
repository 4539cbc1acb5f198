"""conservativeness (docs/probes.md §4.6): exact floor (§8.5), non-gradient heads fire, blind spots (§8.4),
FD recipe."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core.derivatives import FiniteDifference
from jaxcert.probes import ConservativenessConfig, closest_pair, conservativeness
from jaxcert.probes.base import PROBES
from tests.test_dynamics import clean_lj, cluster13

LJ = clean_lj()
D0_KINK = 2 ** (1 / 6) + 0.28

#: exact-jvp floors measured on clean LJ / cluster13: 1.6e-15 eV/Å (f64), 1.2e-6 eV/Å (f32)
FLOOR = {jnp.float32: 2e-5, jnp.float64: 1e-12}


# ----------------------------------------------------------------------------- shared test helpers
def knob(model, **values):
    """The defect model with knob leaves replaced (same static functions: no recompilation)."""
    return model.replace(params={**model.params, **{k: jnp.asarray(v) for k, v in values.items()}})


def defect(name, model, strength, **kw):
    """A §8.2 defect wrapper from jaxcert.models.defects, or a local equivalent while it is absent.

    Local versions keep the wrapper's params layout ``{"inner", "strength", ...}``.
    """
    try:
        from jaxcert.models import defects

        return getattr(defects, name)(model, strength, **kw)
    except ImportError:
        pass
    dt_mask = lambda s: s.mask.astype(s.positions.dtype)  # noqa: E731
    if name == "curl":
        def forces(p, s):
            F = model.forces_of(p["inner"], s)
            w = dt_mask(s)[:, None]
            d = s.positions - jnp.sum(w * s.positions, 0) / jnp.sum(w)
            return F + p["strength"].astype(F.dtype) * jnp.cross(jnp.asarray([0.0, 0.0, 1.0], F.dtype), d) * w

        return jaxcert.Model(lambda p, s: model.energy_fn(p["inner"], s), forces_fn=forces,
                             params={"inner": model.params, "strength": jnp.asarray(strength)}, name="curl")
    if name == "orientation":
        def energy(p, s):
            x = s.positions @ (jnp.ones(3, s.positions.dtype) / jnp.sqrt(3.0))
            return model.energy_fn(p["inner"], s) + p["strength"].astype(x.dtype) * jnp.sum(dt_mask(s) * x * x)
    elif name == "kinked":
        d0 = kw.get("d0", D0_KINK)

        def energy(p, s):
            from jaxcert.core.neighbors import pairs

            q = pairs(s, 100.0)
            kink = 0.5 * jnp.sum(jnp.where(q.mask, jnp.abs(q.r - d0), 0.0))
            return model.energy_fn(p["inner"], s) + p["strength"].astype(q.r.dtype) * kink
    else:
        pytest.skip(f"jaxcert.models.defects.{name} is not available")
    return jaxcert.Model(energy, params={"inner": model.params, "strength": jnp.asarray(strength)}, name=name,
                         cutoff=model.cutoff)


def scaled_force_head(model, factor=1.3):
    """A direct force head that is not −∇E: F = factor·(−∇E)."""
    return jaxcert.Model(model.energy_fn, forces_fn=lambda p, s: factor * model.forces_of(p, s),
                         params=model.params, name=f"scaled_forces({factor})", cutoff=model.cutoff)


# ----------------------------------------------------------------------------- tests
def test_registered():
    spec = PROBES["conservativeness"]
    assert spec.fn is conservativeness and spec.substrate == "cluster" and spec.gated


def test_clean_lj_at_round_off(dtype):
    r = conservativeness(LJ, None, substrate=cluster13(dtype))
    d = r.details
    assert float(r.score) > 0.95 and bool(r.gate) and int(r.status) == 0  # §8.5
    assert float(r.defect) < FLOOR[dtype]
    assert r.defect.dtype == dtype and d["projected_force"].dtype == dtype
    # exact: no stencil, no thinning in float32, all 31 points compared
    assert int(d["n_points"]) == 31 and not bool(d["round_off_limited"]) and float(d["step_min_for_precision"]) == 0
    np.testing.assert_allclose(np.asarray(d["s_grid"])[[0, -1]], [-0.15, 0.15], rtol=1e-6)
    assert np.isfinite(np.asarray(d["force_from_energy"])).all()
    assert float(d["max_residual"]) < 20 * FLOOR[dtype]
    # the scan spans the bond's repulsive wall: forces of tens of eV/Å, matched to round-off
    assert float(jnp.max(jnp.abs(d["projected_force"]))) > 10.0
    assert int(r.n_evals) == 62


def test_new_values_do_not_recompile():
    from jaxcert.probes.stages import _run as compiled

    s = cluster13()
    conservativeness(LJ, None, substrate=s)
    n = compiled._cache_size()
    r = conservativeness(LJ.replace(), None, substrate=s.replace(positions=s.positions * 1.01))
    assert compiled._cache_size() == n and float(r.defect) < 1e-12


def test_fd_engine_is_the_reference_recipe():
    fd = ConservativenessConfig(derivatives=FiniteDifference())
    exact64 = conservativeness(LJ, None, substrate=cluster13())
    r64 = conservativeness(LJ, None, fd, substrate=cluster13())
    d = r64.details
    assert int(d["n_points"]) == 31 and not bool(d["round_off_limited"])
    np.testing.assert_allclose(float(d["step"]), 0.01, rtol=1e-12)
    np.testing.assert_allclose(float(d["step_min_for_precision"]), 1.17297e-3, rtol=1e-5)
    g = np.asarray(d["force_from_energy"])
    assert np.isnan(g[[0, 1, -2, -1]]).all() and np.isfinite(g[2:-2]).all()  # 27 interior stencil points
    # FD agrees with the exact derivative to its truncation error O(h^4 f^(5)) ≈ 1e-3 of the 40 eV/Å scale
    np.testing.assert_allclose(g[2:-2], np.asarray(exact64.details["force_from_energy"])[2:-2], atol=2e-3)
    assert float(r64.defect) < 1e-3 and float(exact64.defect) < 1e-12
    # float32: the grid is thinned to stay above h_min = fd_step(1, 4) = 6.5e-2 Å, range unchanged (§8.5)
    r32 = conservativeness(LJ, None, fd, substrate=cluster13(jnp.float32))
    d32 = r32.details
    assert bool(d32["round_off_limited"]) and int(d32["n_points"]) == 9
    np.testing.assert_allclose(np.asarray(d32["s_grid"])[[0, -1]], [-0.15, 0.15], rtol=1e-6)
    assert float(d32["step_min_for_precision"]) > float(d["step_min_for_precision"])


def test_fd_scan_is_the_engines_on_grid_bond_scan():
    """The probe's FD recipe is the engine's: FiniteDifference.bond_scan(on_grid=True) on the probe's grid gives
    its energies, projected forces and −dE/ds (one stencil, derivatives.derivative_on_grid); n_evals = M."""
    s = cluster13()
    fd = FiniteDifference()
    r = conservativeness(LJ, None, ConservativenessConfig(derivatives=fd), substrate=s)
    d = r.details
    i, j = (int(x) for x in np.asarray(d["bond"]))
    E, g, p = fd.bond_scan(LJ, s, i, j, d["s_grid"], on_grid=True)
    np.testing.assert_allclose(np.asarray(E), np.asarray(d["energies"]), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(p), np.asarray(d["projected_force"]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(g), np.asarray(d["force_from_energy"]), rtol=1e-9, atol=1e-9)
    assert int(r.n_evals) == int(d["n_points"])


def test_non_gradient_force_heads_fire():
    s = cluster13()
    r = conservativeness(scaled_force_head(LJ, 1.3), None, substrate=s)
    assert float(r.score) < 0.5 and not bool(r.gate)
    # right reason: the residual is exactly the 30 % excess of the head over −dE/ds
    g = np.asarray(r.details["force_from_energy"])
    np.testing.assert_allclose(float(r.defect), np.mean(np.abs(0.3 * g)), rtol=1e-10)
    pytest.importorskip("jaxcert.models.defects")
    r = conservativeness(defect("noise", LJ, 0.1), None, substrate=s)
    assert float(r.score) < 0.5  # |p − g| ≈ 0.8 s per point


@pytest.mark.parametrize(
    "name, strength, kw", [("curl", 0.4, {}), ("kinked", 0.6, {"d0": D0_KINK}), ("orientation", 1.0, {})]
)
def test_stays_clean_where_the_identity_holds(name, strength, kw):
    """§8.4: curl s = 0.4 (the documented 1-D blind spot), Kinked and SymmetryBreaking are conservative."""
    r = conservativeness(defect(name, LJ, strength, **kw), None, substrate=cluster13())
    assert float(r.score) > 0.85 and bool(r.gate)
    assert float(r.defect) < 1e-12  # exact derivatives: even the kink and the one-body term are at round-off


def test_bond_is_the_closest_pair_in_graph():
    sub = pytest.importorskip("jaxcert.probes.substrates")
    for el in ("Ar", "Cu", "Si", "Na"):
        s = sub.cluster(el)
        assert tuple(np.asarray(closest_pair(s))) == sub.closest_pair(s)


def test_explicit_bond_and_budget():
    r = conservativeness(LJ, None, ConservativenessConfig(bond=(3, 7), max_evals=24), substrate=cluster13())
    assert tuple(np.asarray(r.details["bond"])) == (3, 7)
    assert int(r.details["n_points"]) == 23 and bool(r.details["budget_limited"])  # pescert: M −= 2 while M > 24
    assert float(r.defect) < 1e-12


def test_jit_vmap_over_elements_equals_loop():
    sub = pytest.importorskip("jaxcert.probes.substrates")
    model = jaxcert.models.get("lj")
    batch, symbols = sub.stacked("cluster", ["Ar", "Cu", "Si"])
    keys = jax.random.split(jax.random.key(0), len(symbols))
    out = jax.jit(jax.vmap(partial(conservativeness, model)))(keys, substrate=batch)
    for k, el in enumerate(symbols):
        one = conservativeness(model, keys[k], substrate=sub.cluster(el))
        assert float(one.defect) < 1e-12 and bool(one.gate)
        np.testing.assert_allclose(out.defect[k], one.defect, atol=1e-13)
        np.testing.assert_array_equal(out.details["bond"][k], one.details["bond"])
        np.testing.assert_allclose(out.details["projected_force"][k], one.details["projected_force"], rtol=1e-10)
