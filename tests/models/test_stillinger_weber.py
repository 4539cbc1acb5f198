"""jaxcert.models.stillinger_weber: closed form, jax-md, matscipy, a brute-force triplet sum, identities."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.neighborlist import neighbor_list

import jaxcert
from jaxcert.core.model import UnsupportedElement
from jaxcert.models import get
from jaxcert.models.stillinger_weber import SW_SI_1985, stillinger_weber

from ._efs import _efs, _structure
from ._manybody import sw_cluster as _cluster
from ._manybody import sw_si8 as _si8
from ._manybody import sw_si64 as _si64
from ._manybody import sw_skewed as _skewed

P = SW_SI_1985
RC = P["a"] * P["sigma"]


@pytest.fixture(scope="module")
def model():
    return stillinger_weber()


def _brute_force(atoms: Atoms) -> float:
    """Direct Σ_{i<j} f2 + Σ_i Σ_{j<k} h with ASE's neighbour list (numpy, float64)."""
    eps, sig, a, lam, gam, A, B = (P[k] for k in ("epsilon", "sigma", "a", "lam", "gamma", "A", "B"))
    i_idx, D = neighbor_list("iD", atoms, RC)
    e2 = e3 = 0.0
    for i in range(len(atoms)):
        vecs = D[i_idx == i] / sig
        r = np.linalg.norm(vecs, axis=1)
        e2 += 0.5 * np.sum(A * (B * r**-4 - 1.0) * np.exp(1.0 / (r - a)))
        for j, k in itertools.combinations(range(len(r)), 2):
            cos = vecs[j] @ vecs[k] / (r[j] * r[k])
            e3 += lam * np.exp(gam / (r[j] - a) + gam / (r[k] - a)) * (cos + 1.0 / 3.0) ** 2
    return eps * (e2 + e3)


# --------------------------------------------------------------------------- references
@pytest.mark.parametrize("cubic", [True, False])
def test_diamond_cohesive_energy(model, cubic):
    """Every bond at the pair minimum, every angle tetrahedral: E = −2ε = −4.3366 eV/atom."""
    atoms = bulk("Si", "diamond", a=5.431, cubic=cubic)
    e = float(_efs(model, _structure(atoms))[0]) / len(atoms)
    # closed form, independent of the model code: 2 f2(d/σ) per atom, three-body term zero
    r = 5.431 * np.sqrt(3) / 4 / P["sigma"]
    e_closed = P["epsilon"] * 2 * P["A"] * (P["B"] * r**-4 - 1.0) * np.exp(1.0 / (r - P["a"]))
    assert abs(e - e_closed) < 1e-12
    assert abs(e - (-4.3366)) < 1e-5


@pytest.mark.parametrize("make", [_si8, _skewed, _cluster])
def test_matches_brute_force_triplets(model, make):
    atoms = make()
    e = float(_efs(model, _structure(atoms))[0])
    assert abs(e - _brute_force(atoms)) < 1e-10 * len(atoms)


@pytest.mark.parametrize("make", [_si8, _si64, _skewed, _cluster])
def test_matches_matscipy(model, make):
    from matscipy.calculators.manybody import Manybody
    from matscipy.calculators.manybody.explicit_forms.stillinger_weber import (
        Stillinger_Weber_PRB_31_5262_Si,
        StillingerWeber,
    )

    atoms = make()
    ref = atoms.copy()
    if not ref.pbc.any():
        ref.center(vacuum=5.0)  # matscipy needs a cell; positions shift rigidly
    ref.calc = Manybody(**StillingerWeber(Stillinger_Weber_PRB_31_5262_Si))
    e, f, sigma = _efs(model, _structure(atoms))
    assert abs(float(e) - ref.get_potential_energy()) < 1e-10 * len(atoms)
    assert np.abs(np.asarray(f) - ref.get_forces()).max() < 1e-9
    if atoms.pbc.any():
        assert np.abs(np.asarray(jaxcert.voigt(sigma)) - ref.get_stress()).max() < 1e-10


def _unbiased_cos(a: jax.Array, b: jax.Array) -> jax.Array:
    a2, b2 = a @ a, b @ b
    ok = (a2 > 0) & (b2 > 0)
    return jnp.where(ok, jnp.dot(a, b) / jnp.sqrt(jnp.where(ok, a2 * b2, 1.0)), 0.0)


def test_matches_jax_md(model, monkeypatch):
    """jax-md 0.2.29 on the rattled 64-atom cell (minimum image needs L > 2 r_c).

    jax-md's bond-angle cosine adds 1e-7 Å to both distances; as shipped that biases
    its energy by 8.0e-7 eV here (forces 3.8e-7 eV/Å).  With that regulariser removed
    the two agree to round-off.
    """
    from jax_md import energy, quantity, space

    monkeypatch.setattr(quantity, "cosine_angle_between_two_vectors", _unbiased_cos)
    atoms = _si64()
    L = atoms.cell[0, 0]
    displacement, _ = space.periodic(L)
    e_fn = jax.jit(jax.value_and_grad(energy.stillinger_weber(displacement, epsilon=P["epsilon"])))
    e_ref, g_ref = e_fn(jnp.asarray(atoms.positions % L))
    e, f, _ = _efs(model, _structure(atoms))
    assert abs(float(e) - float(e_ref)) < 1e-10 * len(atoms)
    assert np.abs(np.asarray(f) + np.asarray(g_ref)).max() < 1e-10


# --------------------------------------------------------------------------- identities
def test_cutoff_is_smooth_and_gradients_finite(model):
    """Dimers/trimers at, beyond and just inside r_c: zero energy/force beyond, finite and tiny inside."""
    for d in (RC - 1e-9, RC, RC + 1e-9, RC + 0.5):
        e, f, _ = _efs(model, _structure(Atoms("Si3", positions=[[0, 0, 0], [d, 0, 0], [0, d, 0]])))
        assert np.isfinite(np.asarray(f)).all()
        assert abs(float(e)) < 1e-300 and np.abs(np.asarray(f)).max() < 1e-300
    e, f, _ = _efs(model, _structure(Atoms("Si3", positions=[[0, 0, 0], [RC - 0.3, 0, 0], [0, RC - 0.2, 0]])))
    assert np.isfinite(np.asarray(f)).all() and float(e) != 0.0 and np.abs(np.asarray(f)).max() > 0.0


# --------------------------------------------------------------------------- batching, dtype, elements
def test_unsupported_element_and_registry(model):
    with pytest.raises(UnsupportedElement, match="Ge"):
        model.energy(_structure(Atoms("SiGe", positions=[[0, 0, 0], [2.3, 0, 0]])))
    m = get("sw")
    assert m.elements == (14,) and abs(m.cutoff - 3.77118) < 1e-12
    with pytest.raises(KeyError):
        stillinger_weber(lamda=31.5)
    vink = stillinger_weber(lam=31.5, epsilon=1.64833)
    s = _structure(_si8())
    assert float(_efs(vink, s)[0]) != pytest.approx(float(_efs(model, s)[0]))
