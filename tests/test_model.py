import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxcert
from jaxcert import Model, StressUnavailable, UnsupportedElement
from jaxcert.core.derivatives import FiniteDifference

from ._cases import build_model, cluster, crystal, model_names

TOL_E = {jnp.float64: 1e-10, jnp.float32: 2e-4}  # relative energy tolerance at round-off
TOL_F = {jnp.float64: 1e-9, jnp.float32: 1e-3}  # eV/Å


def test_import_does_not_pull_torch():
    code = "import jaxcert, jaxcert.models, jaxcert.core.derivatives, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _rotate(s, Q, t):
    c = s.positions.mean(0)
    return s.replace(positions=(s.positions - c) @ Q.T + c + t, cell=s.cell @ Q.T)


@pytest.mark.parametrize("name", model_names())
@pytest.mark.parametrize("kind", ["crystal", "cluster"])
def test_invariance_at_round_off(name, kind, dtype):
    m = build_model(name)
    s = (crystal if kind == "crystal" else cluster)(name, dtype=dtype)
    E, F = m.energy_and_forces(s)
    scale = abs(float(E)) + 1.0
    Q = jnp.asarray(Rotation.random(random_state=7).as_matrix(), dtype)
    t = jnp.asarray([0.3, -1.1, 0.7], dtype)
    Er, Fr = m.energy_and_forces(_rotate(s, Q, t))
    perm = np.random.default_rng(0).permutation(s.n_atoms)
    sp = s.replace(positions=s.positions[perm], numbers=s.numbers[perm], masses=s.masses[perm])
    Ep, Fp = m.energy_and_forces(sp)
    fs = float(jnp.abs(F).max()) + 1.0
    assert abs(float(Er - E)) / scale < TOL_E[dtype]
    assert float(jnp.abs(Fr - F @ Q.T).max()) / fs < TOL_F[dtype]
    assert abs(float(Ep - E)) / scale < TOL_E[dtype]
    assert float(jnp.abs(Fp - F[perm]).max()) / fs < TOL_F[dtype]
    if s.periodic:  # stress rotates as a tensor
        S, Sr = m.stress(s), m.stress(_rotate(s, Q, t))
        assert float(jnp.abs(Sr - Q @ S @ Q.T).max()) < 10 * TOL_F[dtype]


@pytest.mark.parametrize("name", model_names())
def test_stress_is_the_strain_derivative_of_energy(name):
    m = build_model(name)
    s = crystal(name)
    exact = jaxcert.voigt(m.stress(s))
    fd = FiniteDifference(order=4, step_size=1e-4).energy_strain(m, s)
    np.testing.assert_allclose(exact, fd, atol=1e-8, rtol=1e-6)


def test_stress_sign_matches_ase():
    from ase.build import bulk
    from ase.calculators.lj import LennardJones

    m = jaxcert.models.get("lj")
    sig, eps = jaxcert.models.lj.reference_parameters("Ar")
    at = bulk("Ar", "fcc", a=5.0)  # compressed: ASE stress negative
    at.calc = LennardJones(sigma=sig, epsilon=eps, rc=3 * sig, ro=0.66 * 3 * sig, smooth=True)
    s = jaxcert.Structure.from_ase(at)
    np.testing.assert_allclose(m.stress_voigt(s), at.get_stress(), atol=1e-12)
    assert float(m.stress_voigt(s)[0]) < 0


def test_stress_unavailable_without_pbc():
    m = jaxcert.models.get("lj")
    with pytest.raises(StressUnavailable, match="non-periodic"):
        m.stress(cluster("lj"))


def test_unsupported_element_message():
    def energy(params, s):
        return jnp.sum(s.positions**2)

    m = Model(energy, name="toy", elements=(29,))
    with pytest.raises(UnsupportedElement, match=r"no parameters for Si \(Z=14\); it supports Cu"):
        m.energy(cluster("lj"))


def test_direct_heads_are_used():
    base = jaxcert.models.get("lj")
    m = base.replace(forces_fn=lambda p, s: 2.0 * base.forces_of(p, s), stress_fn=lambda p, s: jnp.eye(3))
    s = crystal("lj")
    np.testing.assert_allclose(m.forces(s), 2 * base.forces(s))
    np.testing.assert_allclose(m.stress(s), np.eye(3))
    assert not m.conservative_forces and base.conservative_forces


def test_padding_is_exactly_inert():
    m = jaxcert.models.get("lj")
    a, b = cluster("lj"), cluster("lj", seed=3)
    small = a.replace(positions=a.positions[:7], numbers=a.numbers[:7], masses=a.masses[:7], mask=a.mask[:7])
    batch = jaxcert.stack([small, b])
    padded = jaxcert.unstack(batch)[0]
    assert float(m.energy(padded)) == pytest.approx(float(m.energy(small)), abs=1e-13)
    F = m.forces(padded)
    np.testing.assert_allclose(F[:7], m.forces(small), atol=1e-13)
    assert np.all(np.asarray(F[7:]) == 0.0)
    H = jaxcert.core.derivatives.hessian(m, padded)
    assert np.all(np.isfinite(np.asarray(H)))
    assert np.all(np.asarray(H)[7:] == 0.0)


def test_vmap_equals_loop_and_no_recompile():
    m = jaxcert.models.get("lj")
    structs = [crystal("lj", seed=k) for k in range(3)]
    batch = m.prepare(jaxcert.stack(structs))
    traces = []

    @jax.jit
    def ef(s):
        traces.append(1)
        return jax.vmap(lambda x: m.energy_and_forces(x))(s)

    E, F = ef(batch)
    for k, s in enumerate(structs):
        e, f = m.energy_and_forces(s)
        assert float(E[k]) == pytest.approx(float(e), abs=1e-12)
        np.testing.assert_allclose(F[k], f, atol=1e-12)
    noise = 0.01 * np.random.default_rng(1).normal(size=batch.positions.shape)
    batch2 = batch.replace(positions=batch.positions + noise)
    E2, _ = ef(batch2)
    assert len(traces) == 1
    assert not np.allclose(E2, E)


def test_stress_under_jit_with_prepared_structure():
    m = jaxcert.models.get("lj")
    s = m.prepare(crystal("lj"))
    np.testing.assert_allclose(jax.jit(m.stress_of)(m.params, s), m.stress(s), atol=1e-13)
    # an unprepared periodic structure under jit fails with an actionable message
    raw = crystal("lj")
    with pytest.raises(Exception, match="prepare"):
        jax.jit(m.energy_of)(m.params, raw)
