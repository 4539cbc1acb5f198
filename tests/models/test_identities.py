"""The identities every many-body model must satisfy, one parametrised test each over the model table
(tests/models/_manybody.py: Stillinger–Weber, Tersoff, Sutton–Chen EAM), float64.

* E(3) and permutation invariance of the energy, covariance of the forces;
* forces = −∇E against central differences of the energy (error ∝ h²);
* stress = (1/V) ∂E/∂ε against central differences in the strain, and symmetric;
* a padded, vmapped batch gives each structure's own energy and forces, and zero force on padding;
* float32 agrees with float64 within the measured round-off.

Each model's reference checks (closed forms, jax-md, matscipy, published values) stay in its own file.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert

from ._efs import _efs, _energy, _jit_efs, _strained_energy, _structure
from ._manybody import CASES, random_rotation

_MODELS: dict[str, jaxcert.Model] = {}


def _model(name: str) -> jaxcert.Model:
    """One model object per name for the whole module, so each (model, shape) compiles once."""
    if name not in _MODELS:
        _MODELS[name] = CASES[name].make_model()
    return _MODELS[name]


def _params(field: str):
    return [pytest.param(name, make, id=f"{name}-{make.__name__.split('_', 1)[1]}")
            for name, case in CASES.items() for make in getattr(case, field)]


@pytest.mark.parametrize("name, make", _params("invariance"))
def test_rotation_translation_permutation_invariance(name, make):
    model, atoms = _model(name), make()
    rng = np.random.default_rng(11)
    Q = random_rotation(rng)
    perm = rng.permutation(len(atoms))
    moved = atoms.copy()
    moved.positions = (atoms.positions @ Q.T + rng.normal(size=3) * 3.0)[perm]
    moved.numbers = atoms.numbers[perm]
    moved.set_cell(atoms.cell @ Q.T, scale_atoms=False)
    e0, f0, _ = _efs(model, _structure(atoms))
    e1, f1, _ = _efs(model, _structure(moved))
    assert abs(float(e1 - e0)) < 1e-13 * abs(float(e0))
    np.testing.assert_allclose(np.asarray(f1), (np.asarray(f0) @ Q.T)[perm], atol=CASES[name].invariance_atol)


@pytest.mark.parametrize("name, make", _params("forces_fd"))
def test_forces_are_central_differences_of_energy(name, make):
    """|FD(h) − (−F·v)| shrinks like h²: the error ratio between h and h/2 is 4."""
    model, atoms = _model(name), make()
    if CASES[name].fd_precondition is not None:
        CASES[name].fd_precondition(atoms)
    s = model.prepare(_structure(atoms))
    f = np.asarray(_efs(model, s)[1])
    v = np.random.default_rng(5).normal(size=f.shape)
    v /= np.linalg.norm(v)
    exact = -np.sum(f * v)
    errs = []
    for h in (0.02, 0.01):
        fd = (_energy(model, s, s.positions + h * v) - _energy(model, s, s.positions - h * v)) / (2 * h)
        errs.append(abs(fd - exact))
    assert errs[1] < 1e-3 * max(1.0, abs(exact))
    assert 3.5 < errs[0] / errs[1] < 4.5


@pytest.mark.parametrize("name, make", _params("stress"))
def test_stress_is_strain_derivative_of_energy(name, make):
    model = _model(name)
    s = model.prepare(_structure(make()))
    sigma = np.asarray(_efs(model, s)[2])
    V = float(s.volume)
    h = 1e-5
    fd = np.zeros((3, 3))
    for a, b in itertools.product(range(3), repeat=2):
        D = np.zeros((3, 3))
        D[a, b] += 0.5 * h
        D[b, a] += 0.5 * h
        fd[a, b] = (_strained_energy(model, s, D) - _strained_energy(model, s, -D)) / (2 * h * V)
    np.testing.assert_allclose(sigma, fd, atol=CASES[name].stress_atol)
    np.testing.assert_allclose(sigma, sigma.T, atol=1e-14)


@pytest.mark.parametrize("name", list(CASES))
def test_padded_batch_equals_unpadded(name):
    model, tol = _model(name), CASES[name].padded_atol
    ss = [_structure(make()) for make in CASES[name].padded]
    batch = model.prepare(jaxcert.stack(ss))
    e_b, f_b, _ = jax.vmap(_jit_efs, in_axes=(None, 0))(model, batch)
    for k, s in enumerate(ss):
        e, f, _ = _efs(model, s)
        assert abs(float(e_b[k] - e)) < tol
        np.testing.assert_allclose(np.asarray(f_b[k, : s.n_atoms]), np.asarray(f), atol=tol)
        assert np.all(np.asarray(f_b[k, s.n_atoms :]) == 0.0)


@pytest.mark.parametrize("name", list(CASES))
def test_float32_sanity(name):
    """float32 vs float64. Measured: SW (8-atom cell) 2.4e-8·|E| and 8.1e-6 eV/Å; Tersoff (Si/C cluster)
    6.4e-7·|E| and 6.8e-6 eV/Å; EAM (16-atom alloy) 1.9e-7·|E| and 1.5e-5 eV/Å. Tolerances: the table's
    relative energy bound (1e-6, 3e-6 for Tersoff) and 1e-4 eV/Å."""
    model, atoms = _model(name), CASES[name].float32()
    e64, f64, _ = _efs(model, _structure(atoms, jnp.float64))
    e32, f32, _ = _efs(model, _structure(atoms, jnp.float32))
    assert e32.dtype == jnp.float32 and f32.dtype == jnp.float32
    assert abs(float(e32) - float(e64)) < CASES[name].float32_rel * abs(float(e64))
    assert np.abs(np.asarray(f32, np.float64) - np.asarray(f64)).max() < 1e-4
