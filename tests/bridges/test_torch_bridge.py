"""Torch bridge: exact derivatives by autograd, checked against ASE, finite differences and JAX's own rules."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.lj import LennardJones
from ase.cluster import Icosahedron

import jaxcert
from jaxcert.core.derivatives import EXACT, FiniteDifference

torch = pytest.importorskip("torch")
jb = pytest.importorskip("jaxcert_bridges")

from tests.bridges._torch_lj import EPS, RC, SIGMA, TorchLJ  # noqa: E402


def _atoms(kind, seed=0):
    if kind == "bulk":
        a = bulk("Ar", "fcc", a=3.9, cubic=True)
    else:
        a = Icosahedron("Ar", 2, latticeconstant=3.9)
    a.rattle(0.05, seed=seed)
    return a


@pytest.fixture(scope="module")
def model():
    return jb.from_torch(TorchLJ())


@pytest.mark.parametrize("kind", ["bulk", "cluster"])
def test_energy_forces_stress_match_ase(model, kind):
    a = _atoms(kind)
    s = jaxcert.Structure.from_ase(a)
    a.calc = LennardJones(sigma=SIGMA, epsilon=EPS, rc=RC, smooth=False)
    assert abs(float(model.energy(s)) - a.get_potential_energy()) < 1e-10
    np.testing.assert_allclose(model.forces(s), a.get_forces(), atol=1e-10)
    if kind == "bulk":
        np.testing.assert_allclose(model.stress_voigt(s), a.get_stress(), atol=1e-10)


def test_exact_hvp_converges_like_finite_differences(model):
    """FD(h) - exact shrinks as h^2 (order 2) and h^4 (order 4): the autograd J.v is the limit."""
    s = jaxcert.Structure.from_ase(_atoms("bulk"))
    v = np.random.default_rng(1).normal(size=s.positions.shape)
    exact = np.asarray(EXACT.force_jvp(model, s, v))
    for order, slope in ((2, 2.0), (4, 4.0)):
        hs = np.array([2e-2, 1e-2, 5e-3])
        errs = [np.abs(np.asarray(FiniteDifference(order=order, step_size=h).force_jvp(model, s, v)) - exact).max()
                for h in hs]
        fit = np.polyfit(np.log(hs), np.log(errs), 1)[0]
        assert abs(fit - slope) < 0.3, (order, errs)


def test_jacobian_symmetric_and_strain_blocks_exact(model):
    s = jaxcert.Structure.from_ase(_atoms("bulk"))
    n = s.n_atoms
    J = np.asarray(EXACT.force_jacobian(model, s)).reshape(3 * n, 3 * n)
    assert np.abs(J - J.T).max() < 1e-12 * np.abs(J).max()
    fd = FiniteDifference(order=4, step_size=1e-3)
    for name in ("stress_strain", "stress_position", "force_strain"):
        ex, ap = np.asarray(getattr(EXACT, name)(model, s)), np.asarray(getattr(fd, name)(model, s))
        assert np.abs(ex - ap).max() < 1e-6 * max(1.0, np.abs(ex).max()), name
    counts = jb.backend_of(model).counts
    assert counts["double_backward"] > 0 and counts["fd_gradient"] == 0


def test_float32_and_float64_floors():
    """Rotation residual of forces: round-off of the torch dtype that follows the input dtype."""
    model = jb.from_torch(TorchLJ())
    a = _atoms("cluster", seed=3)
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    rot = a.copy()
    rot.positions = a.positions @ Q.T
    res = {}
    for dt in (np.float32, np.float64):
        F = np.asarray(model.forces(jaxcert.Structure.from_ase(a, dtype=dt)), np.float64)
        Fr = np.asarray(model.forces(jaxcert.Structure.from_ase(rot, dtype=dt)), np.float64)
        assert model.forces(jaxcert.Structure.from_ase(a, dtype=dt)).dtype == dt
        res[dt] = np.abs(Fr - F @ Q.T).max() / np.abs(F).max()
    assert res[np.float64] < 1e-12
    assert 1e-9 < res[np.float32] < 1e-4  # float32 really ran in float32


def test_vmap_equals_loop_and_batches_in_one_call():
    model = jb.from_torch(TorchLJ())
    structs = [jaxcert.Structure.from_ase(_atoms("bulk", seed=k)) for k in range(3)]
    batch = model.prepare(jaxcert.stack(structs))
    backend = jb.backend_of(model)
    before = backend.counts["calls"]
    F = jax.jit(jax.vmap(lambda s: model.forces_of(None, s)))(batch)
    assert backend.counts["calls"] - before == 1  # three geometries, one host call
    for k, s in enumerate(structs):
        np.testing.assert_allclose(F[k], model.forces(s), atol=1e-12)


def test_padding_atoms_are_dropped():
    model = jb.from_torch(TorchLJ())
    small = jaxcert.Structure.from_ase(_atoms("cluster"))
    big = jaxcert.Structure.from_ase(Icosahedron("Ar", 3, latticeconstant=3.9))
    batch = model.prepare(jaxcert.stack([small, big]))
    E = jax.vmap(lambda s: model.energy_of(None, s))(batch)
    assert abs(float(E[0]) - float(model.energy(small))) < 1e-12


def test_plain_function_and_unsupported_element():
    def energy(R, cell, numbers, pbc):
        d = R[:, None, :] - R[None, :, :]
        r2 = (d * d).sum(-1) + torch.eye(len(R), dtype=R.dtype)
        return 0.5 * (torch.exp(-r2) * (1 - torch.eye(len(R), dtype=R.dtype))).sum()

    model = jb.from_torch(energy, name="gauss", elements=[18])
    s = jaxcert.Structure.from_ase(_atoms("cluster"))
    R = jnp.asarray(s.positions)
    ref = jax.grad(lambda R: 0.5 * jnp.sum(jnp.exp(-jnp.sum((R[:, None] - R[None]) ** 2, -1)) * (1 - jnp.eye(len(R)))))
    np.testing.assert_allclose(model.forces(s), -ref(R), atol=1e-12)
    with pytest.raises(jaxcert.UnsupportedElement, match="Si"):
        model.energy(jaxcert.Structure.from_ase(bulk("Si", "diamond", a=5.43)))


def test_one_element_the_model_cannot_evaluate_skips_only_that_element():
    """The batch fails for one element: the probe is rerun per element, the others keep their full-batch results."""
    clean = jaxcert.certify(jb.from_torch(TorchLJ()), ["Ar", "Ne", "Kr"], probes="equivariance,betti")
    rep = jaxcert.certify(jb.from_torch(TorchLJ(fail_numbers=(10,))), ["Ar", "Ne", "Kr"], probes="equivariance,betti")
    for name in ("equivariance", "betti"):
        o, c = (next(x for x in r.outcomes if x.name == name) for r in (rep, clean))
        assert o.elements == ["Ar", "Ne", "Kr"] and o.status == ["ok", "skipped", "ok"], o.status
        assert "could not evaluate" in str(o.details[1])
        np.testing.assert_array_equal(o.defect[[0, 2]], c.defect[[0, 2]])  # same keys per element, same numbers
        assert np.isnan(o.defect[1]) and o.gate[[0, 2]].all()


def test_model_that_cannot_evaluate_small_structures_is_a_skip():
    """A model failing on dimers/monomers: the trimer and smoothness probes skip with the reason; others run."""
    model = jb.from_torch(TorchLJ(fail_below=4))
    rep = jaxcert.certify(model, "Ar", probes="trimer,equivariance")
    trimer, equiv = rep.probe("trimer"), rep.probe("equivariance")
    assert trimer["status"] == "skipped", trimer
    assert "could not evaluate" in str(trimer["details"]) or "could not evaluate" in str(trimer)
    assert equiv["status"] == "ok" and equiv["gate"]
