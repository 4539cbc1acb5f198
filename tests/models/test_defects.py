"""Defect wrappers: each breaks the identity it claims, checked on exact derivatives, and keeps the others.

float64 throughout (conftest enables x64).  Substrates are built here with ASE:
a rattled 13-atom Ar icosahedron at the reference nearest-neighbour distance, a
rattled 4-atom cubic fcc Ar cell, and the 4-atom Pmm2 crystal of docs/probes.md §2.5
scaled for Si.  The host model is a shifted-force Lennard-Jones for Ar written
here (half the compile time of the reference LJ); the Si tests of the
pseudoscalar use the reference LJ (``jaxcert.models.get("lj")``).  Functions are
jitted with the model as an argument and knobs are varied with ``with_knobs``,
so each defect compiles once per function.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk
from ase.cluster import Icosahedron

import jaxcert
from jaxcert.core.derivatives import EXACT
from jaxcert.core.elements import d_nn
from jaxcert.core.neighbors import pairs
from jaxcert.models import defects as D
from tests._defect_oracle import EXPECTED_PROBES, PROBE_NAMES

# ----------------------------------------------------------------------------- substrates and helpers


def _shifted_force_lj(sigma: float = 3.3136, epsilon: float = 0.0093, rc: float = 8.0) -> jaxcert.Model:
    """12-6 LJ with u(r) − u(r_c) − (r − r_c)u'(r_c) below r_c: energy and force continuous (Å, eV)."""

    def u(r, sig, eps):
        x = (sig / r) ** 6
        return 4 * eps * (x * x - x)

    def energy(params, s):
        sig, eps = params
        p = pairs(s, rc)
        du = jax.grad(u)(jnp.asarray(rc, s.dtype), sig, eps)
        phi = u(p.r, sig, eps) - u(rc, sig, eps) - (p.r - rc) * du
        return 0.5 * jnp.sum(jnp.where(p.mask & (p.r < rc), phi, 0.0))

    return jaxcert.Model(energy, params=(jnp.asarray(sigma), jnp.asarray(epsilon)), name="lj", cutoff=rc)


@pytest.fixture(scope="module")
def lj():
    return _shifted_force_lj()


@pytest.fixture(scope="module")
def ref_lj():
    return jaxcert.models.get("lj")


@pytest.fixture(scope="module")
def chiral_ref(ref_lj):
    return D.chirality(ref_lj)


@pytest.fixture(scope="module")
def zoo(lj):
    """One instance per defect (default knobs): tests vary knobs with ``with_knobs``, so nothing recompiles."""
    return {name: factory(lj) for name, factory in D.DEFECTS.items()}


def _cluster(el: str = "Ar", rattle: float = 0.05) -> jaxcert.Structure:
    a = Icosahedron("Ar", noshells=2)
    p = a.positions - a.positions.mean(0)
    d = np.linalg.norm(p[:, None] - p[None], axis=-1)
    d[d == 0] = np.inf
    p = p * d_nn(el) / d.min() + np.random.RandomState(0).normal(scale=rattle, size=p.shape)
    return jaxcert.Structure.create(p, [el] * 13)


@pytest.fixture(scope="module")
def cluster():
    return _cluster()


@pytest.fixture(scope="module")
def cell():
    at = bulk("Ar", "fcc", a=5.26, cubic=True)
    at.positions += np.random.RandomState(1).normal(scale=0.05, size=at.positions.shape)
    return jaxcert.Structure.from_ase(at)


def _pmm2(el: str = "Si") -> jaxcert.Structure:
    """docs/probes.md §2.5 template, uniformly scaled so the nearest neighbours sit at d_nn(el)."""
    h = np.diag([4.32890106, 4.46763875, 7.40896034])
    frac = np.array([[0, 0, 0.10962718], [0.5, 0.5, 0.57321656], [0.5, 0, 0.76149240], [0.5, 0.5, 0.23583381]])
    s = d_nn(el) / 2.4996554141501344
    return jaxcert.Structure.create(frac @ h * s, [el] * 4, h * s, pbc=True)


@pytest.fixture(scope="module")
def pmm2():
    return _pmm2()


def _rotation(seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _rotated(s: jaxcert.Structure, Q: np.ndarray) -> jaxcert.Structure:
    c = s.positions.mean(0)
    return s.replace(positions=(s.positions - c) @ jnp.asarray(Q).T + c)


def _ef_raw(m, s):
    return m.energy_of(m.params, s), m.forces_of(m.params, s)


_ef = jax.jit(_ef_raw)
#: (E, F) vmapped over (strength knob, structure) pairs: one compile per defect
_ef_knob = jax.jit(jax.vmap(lambda m, a, s: _ef_raw(D.with_knobs(m, strength=a), s), in_axes=(None, 0, 0)))
_ef_batch = jax.jit(jax.vmap(_ef_raw, in_axes=(None, 0)))


def _e(m, s):
    return _ef(m, s)[0]


@jax.jit
def _E(m, s):
    """Energy only (cheap to compile): for periodic structures where nothing else is needed."""
    return m.energy_of(m.params, s)


@jax.jit
def _efs(m, s):
    """(E, F, σ output in Voigt, σ from the energy in Voigt) of a periodic structure."""
    return (m.energy_of(m.params, s), m.forces_of(m.params, s), jaxcert.voigt(m.stress_of(m.params, s)),
            EXACT.energy_strain(m, s))


_jac = jax.jit(EXACT.force_jacobian)
_scan = jax.jit(EXACT.bond_scan, static_argnums=(2, 3))


def _asym(J: jax.Array) -> float:
    """‖J − Jᵀ‖ / ‖J‖ over the flattened (3n, 3n) Jacobian."""
    J = np.asarray(J).reshape(J.shape[0] * 3, -1)
    return float(np.linalg.norm(J - J.T) / np.linalg.norm(J))


# ----------------------------------------------------------------------------- tables and plumbing


def test_tables_are_consistent():
    assert set(D.DEFECTS) == set(EXPECTED_PROBES)
    for name, (trip, keep) in EXPECTED_PROBES.items():
        assert trip, name
        assert set(trip) <= set(PROBE_NAMES) and set(keep) <= set(PROBE_NAMES), name
        assert not set(trip) & set(keep), name
    # spot checks of the physics in the table
    assert "lam" in EXPECTED_PROBES["curl"][0] and "lam" in EXPECTED_PROBES["orientation"][1]
    assert EXPECTED_PROBES["chirality"][0] == ("parity",) and "equivariance" in EXPECTED_PROBES["chirality"][1]
    assert "trimer" in EXPECTED_PROBES["nonintegrable"][1]
    assert EXPECTED_PROBES["bad_stress"][0] == ("stress_consistency", "cross_maxwell")


def test_names_knobs_and_metadata(lj, zoo):
    assert zoo["curl"].name == "lj+curl(0.3)"
    assert zoo["bad_stress"].name == "lj+bad_stress(1.4)"
    assert D.ripple(lj, amplitude=0.02, wavelength=0.2).name == "lj+ripple(0.02,0.2)"
    for name, m in zoo.items():
        assert m.name.startswith(f"lj+{name}("), m.name
        assert "strength" in m.params and m.params["inner"] is lj.params
        assert all(isinstance(v, jax.Array) for k, v in m.params.items() if k != "inner")
        assert ("defect", m.name[3:]) in m.info
    with pytest.raises(KeyError):
        D.with_knobs(zoo["curl"], amplitude=1.0)
    with pytest.raises(ValueError):
        D.curl(lj, axis=(0, 0, 0))


@pytest.mark.parametrize("name", sorted(D.DEFECTS))
def test_strength_zero_is_clean_under_jit_and_vmap(name, lj, zoo, cluster):
    """vmap over (knob, structure): strength 0 reproduces the clean model, the default equals the unbatched call."""
    m = zoo[name]
    batch = jaxcert.stack([cluster, cluster])
    E, F = _ef_knob(m, jnp.stack([jnp.zeros_like(m.params["strength"]), m.params["strength"]]), batch)
    E0, F0 = _ef_batch(lj, batch)  # the clean model through the same batching: bit for bit
    np.testing.assert_array_equal(E[0], E0[0])
    np.testing.assert_array_equal(F[0], F0[0])
    if name in ("bad_stress", "parity_stress"):  # stress heads: E and F untouched at any strength
        np.testing.assert_array_equal(F[1], F0[1])
    else:
        assert abs(float(E[1] - E0[1])) + float(jnp.abs(F[1] - F0[1]).max()) > 1e-6
    if name in ("curl", "noise", "nonintegrable", "orientation", "ripple", "eggbox"):  # compiled unbatched anyway
        E1, F1 = _ef(m, cluster)
        np.testing.assert_allclose(E[1], E1, rtol=1e-13)
        np.testing.assert_allclose(F[1], F1, rtol=1e-11, atol=1e-13)
        Ez, Fz = _ef(D.with_knobs(m, strength=0.0), cluster)
        np.testing.assert_array_equal(Ez, _ef(lj, cluster)[0])
        np.testing.assert_array_equal(Fz, _ef(lj, cluster)[1])


@pytest.mark.parametrize("name", ["bad_stress", "parity_stress", "eggbox"])
def test_strength_zero_is_clean_periodic(name, lj, zoo, cell, pmm2):
    m = zoo[name]
    p = m.prepare(pmm2 if name == "parity_stress" else cell)
    clean = _efs(lj, p)
    for a, b in zip(_efs(D.with_knobs(m, strength=0.0), p), clean, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-15 * float(jnp.abs(b).max()))
    out = _efs(m, p)
    changed = [float(jnp.abs(a - b).max() / (jnp.abs(b).max() + 1e-300)) for a, b in zip(out, clean, strict=True)]
    assert max(changed) > 1e-6


def test_float32_follows_input_dtype(zoo, cluster):
    s = cluster.replace(positions=cluster.positions.astype(jnp.float32), cell=cluster.cell.astype(jnp.float32),
                        masses=cluster.masses.astype(jnp.float32))
    E, F = _ef(zoo["noise"], s)  # the bit hash reads 4-byte floats
    assert E.dtype == jnp.float32 and F.dtype == jnp.float32
    assert np.isfinite(np.asarray(F)).all()
    np.testing.assert_array_equal(_ef(zoo["noise"], s)[1], F)


# ----------------------------------------------------------------------------- non-conservative heads


def test_curl_antisymmetric_jacobian_energy_untouched(lj, zoo, cluster):
    m = zoo["curl"]  # s = 0.3 eV/Å², n̂ = ẑ
    J0, J = _jac(lj, cluster), _jac(m, cluster)
    assert _asym(J0) < 1e-13
    assert _asym(J) > 1e-2
    # J − J_clean is exactly s[n̂]× ⊗ (I − 11ᵀ/N): antisymmetric
    dJ = np.asarray(J - J0).reshape(39, 39)
    np.testing.assert_allclose(dJ, -dJ.T, atol=1e-12)
    # energy untouched and rotation-invariant; forces are not equivariant (fixed axis)
    Q = _rotation(0)
    E, F = _ef(m, cluster)
    Er, Fr = _ef(m, _rotated(cluster, Q))
    np.testing.assert_array_equal(E, _e(lj, cluster))
    np.testing.assert_allclose(Er, E, rtol=1e-12)
    assert float(jnp.abs(Fr - F @ Q.T).max()) > 1e-2
    # the head is exactly F_clean + s n̂ × (R − R̄), translation-invariant
    d = cluster.positions - cluster.positions.mean(0)
    np.testing.assert_allclose(F, _ef(lj, cluster)[1] + 0.3 * jnp.cross(jnp.array([0.0, 0, 1]), d), atol=1e-13)
    np.testing.assert_allclose(_ef(m, cluster.replace(positions=cluster.positions + 1.7))[1], F, atol=1e-10)


def test_nonintegrable_only_breaks_integrability(lj, zoo, cluster):
    m = zoo["nonintegrable"]
    F = _ef(m, cluster)[1]
    F_nc = F - _ef(lj, cluster)[1]
    R = cluster.positions
    # momentum and angular momentum conserved: no net force, no net torque; energy untouched
    assert float(jnp.abs(F_nc).max()) > 1e-2
    np.testing.assert_allclose(F_nc.sum(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(jnp.cross(R - R.mean(0), F_nc).sum(0), 0.0, atol=1e-11)
    np.testing.assert_array_equal(_e(m, cluster), _e(lj, cluster))
    # equivariant under a proper rotation and under inversion
    Q = _rotation(1)
    np.testing.assert_allclose(_ef(m, _rotated(cluster, Q))[1], F @ Q.T, atol=1e-10)
    np.testing.assert_allclose(_ef(m, _rotated(cluster, -np.eye(3)))[1], -F, atol=1e-10)
    # non-integrable: antisymmetric Jacobian on the cluster ...
    assert _asym(_jac(m, cluster)) > 1e-3
    # ... but symmetric at the equilateral trimer (group theory, see the docstring)
    d = d_nn("Ar")
    tri = jaxcert.Structure.create([[0, 0, 0], [d / 2, np.sqrt(3) / 2 * d, 0], [d, 0, 0]], ["Ar"] * 3)
    assert _asym(_jac(m, tri)) < 1e-12
    assert _asym(_jac(m, tri.replace(positions=tri.positions.at[1, 1].add(0.3)))) > 1e-3


def test_noise_is_deterministic_discontinuous_and_not_a_gradient(lj, zoo, cluster):
    m = D.with_knobs(zoo["noise"], strength=0.1)
    E, F = _ef(m, cluster)
    F_grad = -jax.grad(lambda R: _e(m, cluster.replace(positions=R)))(cluster.positions)
    np.testing.assert_allclose(F_grad, _ef(lj, cluster)[1], atol=1e-13)
    assert float(jnp.sqrt(jnp.mean((F - F_grad) ** 2))) > 0.05
    # repeated calls agree bit for bit
    np.testing.assert_array_equal(_ef(m, cluster)[1], F)
    # a one-ulp move of one coordinate redraws the noise on every atom
    R = np.asarray(cluster.positions).copy()
    R[5, 1] = np.nextafter(R[5, 1], np.inf)
    dF = _ef(m, cluster.replace(positions=jnp.asarray(R)))[1] - F
    assert float(jnp.abs(dF).min()) > 0 and float(jnp.abs(dF).max()) > 0.05
    # the exact Jacobian sees the clean (symmetric) one: the noise is piecewise constant
    np.testing.assert_allclose(_jac(m, cluster), _jac(lj, cluster), atol=1e-12)
    # not equivariant
    Q = _rotation(2)
    assert float(jnp.abs(_ef(m, _rotated(cluster, Q))[1] - F @ Q.T).max()) > 0.05


# ----------------------------------------------------------------------------- conservative energy terms


def test_orientation_breaks_invariance_keeps_conservative(lj, zoo, cluster):
    m = zoo["orientation"]  # c = 0.2 eV/Å², n̂ ∝ (1, 1, 1)
    E, F = _ef(m, cluster)
    assert abs(float(_e(m, _rotated(cluster, _rotation(0))) - E)) > 1e-2
    assert abs(float(_e(m, cluster.replace(positions=cluster.positions + 0.5)) - E)) > 1e-2
    n = jnp.ones(3) / jnp.sqrt(3.0)
    np.testing.assert_allclose(F, _ef(lj, cluster)[1] - 0.4 * (cluster.positions @ n)[:, None] * n, atol=1e-12)
    J = _jac(m, cluster)
    assert _asym(J) < 1e-13
    # the Hessian no longer annihilates a translation along n̂: H·T = 2c n̂ on every atom
    HT = -np.asarray(J).reshape(39, 39) @ np.tile(np.asarray(n), 13)
    np.testing.assert_allclose(HT, np.tile(0.4 * np.asarray(n), 13), atol=1e-10)


def test_chirality_pseudoscalar_on_cluster(ref_lj, chiral_ref):
    lj, m = ref_lj, chiral_ref
    cl = _cluster("Si")
    dE = float(_e(m, cl) - _e(lj, cl))
    assert abs(dE) > 1e-4
    for k in range(2):  # proper rotations: invariant
        r = _rotated(cl, _rotation(k))
        np.testing.assert_allclose(_e(m, r) - _e(lj, r), dE, rtol=1e-10)
    # inversion and a mirror: the defect term changes sign, the clean energy does not
    for P in (-np.eye(3), np.diag([1.0, 1.0, -1.0])):
        r = _rotated(cl, P)
        np.testing.assert_allclose(_e(lj, r), _e(lj, cl), rtol=1e-12)
        np.testing.assert_allclose(_e(m, r) - _e(lj, r), -dE, rtol=1e-10)
    # permutation-invariant, conservative
    perm = np.random.default_rng(0).permutation(13)
    np.testing.assert_allclose(_e(m, cl.replace(positions=cl.positions[perm])), _e(m, cl), rtol=1e-12)
    assert m.forces_fn is None and m.stress_fn is None  # conservative: forces and stress are derivatives of E


def test_chirality_moves_only_the_improper_shear_on_pmm2(ref_lj, chiral_ref, pmm2):
    lj, m = ref_lj, chiral_ref
    p0, p1 = lj.prepare(pmm2), m.prepare(pmm2)
    stress = jax.jit(lambda m, s: (m.energy_of(m.params, s), jaxcert.voigt(m.stress_of(m.params, s))))
    E0, s0 = stress(lj, p0)
    E1, s1 = stress(m, p1)
    scale = float(jnp.linalg.norm(s0))
    # σ_xy (Voigt 5) changes; σ_xz, σ_yz (C₂z-odd) and the diagonal keep their clean values
    assert abs(float(s1[5] - s0[5])) > 1e-2 * scale
    np.testing.assert_allclose(s1[:5], s0[:5], rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(s0[3:], 0.0, atol=1e-12 * scale)
    # the term itself vanishes by the mm2 site symmetry (a mirror maps the crystal onto itself)
    np.testing.assert_allclose(E1, E0, rtol=1e-13)
    # the parity image (fractional inversion) flips the xy shift: σ(P R) = σ(R) is broken
    f = np.mod(1.0 - np.asarray(p1.positions) @ np.linalg.inv(np.asarray(p1.cell)), 1.0)
    s_img = stress(m, p1.replace(positions=jnp.asarray(f @ np.asarray(p1.cell))))[1]
    np.testing.assert_allclose(s_img[5] - s0[5], -(s1[5] - s0[5]), rtol=1e-8)


def test_eggbox_breaks_translation_only(zoo, cell):
    m = D.with_knobs(zoo["eggbox"], strength=0.05)
    p = m.prepare(cell)
    E, _, sigma, sigma_energy = _efs(m, p)
    h = np.asarray(p.cell)
    # a non-lattice translation changes E, a lattice translation does not
    assert abs(float(_efs(m, p.replace(positions=p.positions + jnp.asarray([0.7, 0.3, 1.1])))[0] - E)) > 1e-3
    lattice_shift = p.replace(positions=p.positions + jnp.asarray(h[0] - 2 * h[2]))
    np.testing.assert_allclose(_efs(m, lattice_shift)[0], E, rtol=1e-12)
    # unimodular change of basis with the atoms rewrapped: the same crystal, the same energy
    h2 = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]]) @ h
    R2 = np.mod(np.asarray(p.positions) @ np.linalg.inv(h2), 1.0) @ h2
    g = m.prepare(jaxcert.Structure.create(R2, np.asarray(p.numbers), h2, pbc=True))
    np.testing.assert_allclose(_E(m, g), E, rtol=1e-11)
    # rigid rotation of atoms and cell together
    Q = jnp.asarray(_rotation(4))
    np.testing.assert_allclose(_efs(m, p.replace(positions=p.positions @ Q.T, cell=p.cell @ Q.T))[0], E, rtol=1e-10)
    # even under inversion through the origin: the parity-image stress is unchanged
    np.testing.assert_allclose(_efs(m, p.replace(positions=-p.positions))[2], sigma, atol=1e-14)
    # conservative and consistent
    assert m.forces_fn is None
    np.testing.assert_allclose(sigma, sigma_energy, atol=1e-14)


def test_eggbox_on_a_cluster_is_a_fixed_grid(zoo, cluster):
    m = zoo["eggbox"]
    E = float(_e(m, cluster))
    assert abs(float(_e(m, _rotated(cluster, _rotation(5)))) - E) > 1e-3
    a = d_nn("Ar")  # default period: one d_nn, a cubic grid
    shifted = cluster.replace(positions=cluster.positions + jnp.asarray([a, -2 * a, 0]))
    np.testing.assert_allclose(_e(m, shifted), E, rtol=1e-12)


def test_nonextensive_breaks_only_extensivity(zoo, cell):
    m = D.with_knobs(zoo["nonextensive"], strength=0.05)
    clean = D.with_knobs(m, strength=0.0)  # the clean model through the same compiled function
    p = m.prepare(cell)
    k = 2  # a 2×1×1 supercell
    sup = jaxcert.Structure.from_ase(cell.to_ase().repeat((2, 1, 1)))
    n = cell.n_atoms
    E = lambda model, s: float(_E(model, m.prepare(s)))  # noqa: E731
    e_clean = E(clean, cell) / n
    np.testing.assert_allclose(E(clean, sup) / (k * n), e_clean, rtol=1e-11)
    e, e_sup = E(m, cell) / n, E(m, sup) / (k * n)
    assert abs(e_sup - e) > 1e-3
    # the extra energy is intensive: the per-atom shift shrinks by the supercell factor
    np.testing.assert_allclose(e_sup - e_clean, (e - e_clean) / k, rtol=1e-9)
    # translation, rotation (with the cell) and permutation invariance
    E0 = E(m, p)
    np.testing.assert_allclose(E(m, p.replace(positions=p.positions + 0.37)), E0, rtol=1e-12)
    Q = jnp.asarray(_rotation(6))
    np.testing.assert_allclose(E(m, p.replace(positions=p.positions @ Q.T, cell=p.cell @ Q.T)), E0, rtol=1e-11)
    np.testing.assert_allclose(E(m, p.replace(positions=p.positions[jnp.array([2, 0, 3, 1])])), E0, rtol=1e-12)


def test_ripple_conservative_but_rough(lj, zoo, cluster):
    m = zoo["ripple"]
    off = jnp.linspace(-0.3, 0.3, 121)
    _, g, f = _scan(m, cluster, 0, 1, off)
    np.testing.assert_allclose(f, g, atol=1e-10)  # F_j·û = −dE/ds exactly
    _, _, f0 = _scan(lj, cluster, 0, 1, off)
    jolt = lambda y: float(jnp.abs(jnp.diff(y, 2)).max())  # noqa: E731
    assert jolt(f) > 20 * jolt(f0)
    assert float(jnp.abs(f - f0).max()) > 0.5  # force ripple amplitude 2πA/λ·f_c
    np.testing.assert_allclose(_e(m, _rotated(cluster, _rotation(7))), _e(m, cluster), rtol=1e-11)


def test_kinked_force_step_of_2A(lj, zoo, cluster):
    A = 0.5
    b = float(jnp.linalg.norm(cluster.positions[1] - cluster.positions[0]))
    d0 = b + 0.1
    m = D.with_knobs(zoo["kinked"], strength=A, d0=d0 / d_nn("Ar"))  # default d0 is relative to d_nn
    eps = 1e-7
    off = jnp.linspace(-0.3, 0.3, 121).at[60].set(0.1 - eps).at[61].set(0.1 + eps)
    E, g, f = _scan(m, cluster, 0, 1, off)
    np.testing.assert_allclose(f, g, atol=1e-12)  # conservative everywhere, the kink included
    _, _, f0 = _scan(lj, cluster, 0, 1, off)
    np.testing.assert_allclose((f[61] - f0[61]) - (f[60] - f0[60]), -2 * A, rtol=1e-4)
    assert abs(float(E[61] - E[60])) < 1e-5  # continuous energy
    assert float(jnp.abs(jnp.diff(f - f0)).max()) == pytest.approx(2 * A, rel=1e-4)  # the step is the largest jump
    assert float(zoo["kinked"].params["d0"]) == 1.05


# ----------------------------------------------------------------------------- stress heads


def test_bad_stress_scales_the_head_only(lj, zoo, cell):
    m = zoo["bad_stress"]  # factor 1.4
    E, F, sigma, from_energy = _efs(m, m.prepare(cell))
    np.testing.assert_allclose(sigma, 1.4 * from_energy, rtol=1e-12, atol=1e-16)
    assert float(jnp.abs(sigma - from_energy).max()) > 0.2 * float(jnp.abs(from_energy).max())
    E0, F0, _, _ = _efs(lj, lj.prepare(cell))
    np.testing.assert_array_equal(E, E0)
    np.testing.assert_array_equal(F, F0)


def test_parity_stress_breaks_the_improper_channel(lj, zoo, pmm2):
    a = 0.02
    m = zoo["parity_stress"]
    p = m.prepare(pmm2)
    _, F0, s0, _ = _efs(lj, p)
    _, F1, s1, s1_energy = _efs(m, p)
    z = np.asarray(p.positions) @ np.linalg.inv(np.asarray(p.cell))
    expect = a * np.sin(2 * np.pi * z[:, 2]).sum()
    assert abs(expect) > 1e-3
    np.testing.assert_allclose(s1 - s0, [0, 0, 0, 0, 0, expect], atol=1e-15)
    img = p.replace(positions=jnp.asarray(np.mod(1.0 - z, 1.0) @ np.asarray(p.cell)))
    np.testing.assert_allclose(_efs(m, img)[2][5] - s0[5], -expect, rtol=1e-10)
    np.testing.assert_array_equal(F1, F0)
    np.testing.assert_allclose(s1_energy, s0, atol=1e-15)


def test_direct_heads_of_the_inner_model_get_the_consistent_derivatives(lj, zoo, cluster, cell):
    """An energy defect on a model with direct force/stress heads adds −∇ΔE and ∂ΔE/∂ε to them."""
    base = lj.replace(
        forces_fn=lambda params, s: -jax.grad(lambda R: lj.energy_fn(params, s.replace(positions=R)))(s.positions),
        stress_fn=lambda params, s: lj.energy_stress_of(params, s),
    )
    m = D.orientation(base)
    E, F = _ef(m, cluster)
    np.testing.assert_allclose(E, _e(zoo["orientation"], cluster), rtol=1e-14)
    np.testing.assert_allclose(F, _ef(zoo["orientation"], cluster)[1], atol=1e-13)
    p = m.prepare(cell)
    sigma, sigma_energy = jax.jit(lambda m, s: (m.stress_of(m.params, s), m.energy_stress_of(m.params, s)))(m, p)
    np.testing.assert_allclose(sigma, sigma_energy, atol=1e-14)


def test_element_adaptive_lengths_follow_the_species(ref_lj, chiral_ref):
    lj, m = ref_lj, chiral_ref
    si = _cluster("Si")
    assert m.cutoff_for(si) == pytest.approx(max(lj.cutoff_for(si), 2 * d_nn("Si")))
    ar = _cluster("Ar")
    assert m.cutoff_for(ar) == pytest.approx(max(lj.cutoff_for(ar), 2 * d_nn("Ar")))
    assert float(m.params["cutoff"]) == 2.0
    fixed = D.chirality(lj, cutoff=2 * d_nn("Si"))
    assert float(fixed.params["cutoff"]) == pytest.approx(2 * d_nn("Si"))
    np.testing.assert_allclose(_e(fixed, si), _e(m, si), rtol=1e-12)
