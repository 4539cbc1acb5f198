"""jaxcert.models.tersoff: published cohesive energies, matscipy (Si, C, Si–C), jax-md (Si, C), identities."""

from __future__ import annotations

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk

import jaxcert
from jaxcert.core.model import UnsupportedElement
from jaxcert.models import get
from jaxcert.models.tersoff import CHI_SIC, TERSOFF_SI_C_1989, tersoff

from ._efs import _efs, _structure
from ._manybody import rattled as _rattled
from ._manybody import tersoff_c8 as _c8
from ._manybody import tersoff_cluster as _cluster
from ._manybody import tersoff_si8 as _si8
from ._manybody import tersoff_sic16 as _sic16
from ._manybody import tersoff_skewed as _skewed

P = TERSOFF_SI_C_1989


@pytest.fixture(scope="module")
def model():
    return tersoff()


def _matscipy(atoms: Atoms):
    from matscipy.calculators.manybody import Manybody
    from matscipy.calculators.manybody.explicit_forms.tersoff_brenner import (
        Tersoff_PRB_39_5566_Si_C,
        TersoffBrenner,
    )

    ref = atoms.copy()
    if not ref.pbc.any():
        ref.center(vacuum=5.0)  # matscipy needs a cell; a rigid shift
    ref.calc = Manybody(**TersoffBrenner(Tersoff_PRB_39_5566_Si_C))
    with np.errstate(all="ignore"):
        e, f = ref.get_potential_energy(), ref.get_forces()
        st = ref.get_stress() if atoms.pbc.any() else None
    return e, f, st


# --------------------------------------------------------------------------- references
def _closed_form_diamond(el: str, a: float) -> float:
    """Per-atom energy of diamond: 4 bonds at a√3/4, ζ = 3 g(cos θ = −1/3), nothing else in range."""
    p = P[el]
    d = a * np.sqrt(3) / 4
    g = 1 + p["c"] ** 2 / p["d"] ** 2 - p["c"] ** 2 / (p["d"] ** 2 + (p["h"] + 1 / 3) ** 2)
    b = (1 + (p["beta"] * 3 * g) ** p["n"]) ** (-1 / (2 * p["n"]))
    return 2 * (p["A"] * np.exp(-p["lam"] * d) - b * p["B"] * np.exp(-p["mu"] * d))


@pytest.mark.parametrize("el, a, published", [("Si", 5.432, -4.63), ("C", 3.566, -7.37)])
def test_diamond_cohesive_energy(model, el, a, published):
    atoms = bulk(el, "diamond", a=a, cubic=True)
    e = float(_efs(model, _structure(atoms))[0]) / len(atoms)
    assert abs(e - _closed_form_diamond(el, a)) < 1e-12
    assert abs(e - published) < 5e-3


def test_zincblende_sic_cohesive_energy(model):
    """Tersoff 1989: SiC (zincblende, a = 4.32 Å) −6.165 eV/atom; closed form with χ and the mixed cutoff."""
    atoms = bulk("SiC", "zincblende", a=4.32)
    e = float(_efs(model, _structure(atoms))[0]) / len(atoms)
    d = 4.32 * np.sqrt(3) / 4
    A = np.sqrt(P["Si"]["A"] * P["C"]["A"])
    B = np.sqrt(P["Si"]["B"] * P["C"]["B"])
    lam = 0.5 * (P["Si"]["lam"] + P["C"]["lam"])
    mu = 0.5 * (P["Si"]["mu"] + P["C"]["mu"])
    e_closed = 0.0
    for el in ("Si", "C"):  # bond energy ½ V_ij seen from each end, 4 bonds per atom
        p = P[el]
        g = 1 + p["c"] ** 2 / p["d"] ** 2 - p["c"] ** 2 / (p["d"] ** 2 + (p["h"] + 1 / 3) ** 2)
        b = CHI_SIC * (1 + (p["beta"] * 3 * g) ** p["n"]) ** (-1 / (2 * p["n"]))
        e_closed += 0.5 * 4 * (A * np.exp(-lam * d) - b * B * np.exp(-mu * d)) / 2
    assert abs(e - e_closed) < 1e-12
    assert abs(e - (-6.165)) < 1e-3


@pytest.mark.parametrize("make", [_si8, _c8, _sic16, _skewed, _cluster])
def test_matches_matscipy(model, make):
    atoms = make()
    e_ref, f_ref, s_ref = _matscipy(atoms)
    e, f, sigma = _efs(model, _structure(atoms))
    assert abs(float(e) - e_ref) < 1e-10 * len(atoms)
    assert np.abs(np.asarray(f) - f_ref).max() < 1e-9
    if s_ref is not None:
        assert np.abs(np.asarray(jaxcert.voigt(sigma)) - s_ref).max() < 1e-10


def _lammps_file(el: str) -> io.StringIO:
    p = P[el]
    R, D = 0.5 * (p["R"] + p["S"]), 0.5 * (p["S"] - p["R"])
    vals = [3.0, 1.0, 0.0, p["c"], p["d"], p["h"], p["n"], p["beta"], p["mu"], p["B"], R, D, p["lam"], p["A"]]
    # two lines: jax-md's reader only accepts entries that continue on a second line
    text = " ".join(repr(float(v)) for v in vals[:7]) + "\n" + " ".join(repr(float(v)) for v in vals[7:])
    return io.StringIO(f"{el} {el} {el} {text}\n")


def _unbiased_cos(a: jax.Array, b: jax.Array) -> jax.Array:
    a2, b2 = a @ a, b @ b
    ok = (a2 > 0) & (b2 > 0)
    return jnp.where(ok, jnp.dot(a, b) / jnp.sqrt(jnp.where(ok, a2 * b2, 1.0)), 0.0)


@pytest.mark.parametrize("el, a", [("Si", 5.432)])
def test_matches_jax_md(model, el, a, monkeypatch):
    """jax-md 0.2.29 (single species, minimum image: a 64-atom cell wider than 2 S).

    jax-md's bond-angle cosine adds 1e-7 Å to both distances; as shipped that biases
    its energy by 6.7e-6 eV (Si) and 3.6e-5 eV (C, same construction) on these cells
    (forces 1.2e-7, 1.9e-6 eV/Å).  With that regulariser removed the two agree to
    round-off (measured 9e-12 eV, 2e-13 eV/Å for both; C runs with ("C", 3.566)).
    """
    from jax_md import energy, quantity, space

    monkeypatch.setattr(quantity, "cosine_angle_between_two_vectors", _unbiased_cos)
    atoms = _rattled(bulk(el, "diamond", a=a, cubic=True).repeat(2), 0.05, 6)
    L = atoms.cell[0, 0]
    displacement, _ = space.periodic(L)
    params = energy.load_lammps_tersoff_parameters(_lammps_file(el))
    e_fn = jax.jit(jax.value_and_grad(energy.tersoff(displacement, params)))
    e_ref, g_ref = e_fn(jnp.asarray(atoms.positions % L))
    e, f, _ = _efs(model, _structure(atoms))
    assert abs(float(e) - float(e_ref)) < 1e-10 * len(atoms)
    assert np.abs(np.asarray(f) + np.asarray(g_ref)).max() < 1e-10


def test_dimer_is_bare_pair(model):
    """A bond (third atom 10 Å away): ζ = 0, b = χ, E = f_c(r)(A e^{−λr} − χ B e^{−μr}).

    Forces stay finite although (βζ)^n has an infinite slope at ζ = 0.
    """
    for sym, r in (("Si2", 2.3), ("C2", 1.4), ("SiC", 1.9), ("Si2", 2.85)):
        atoms = Atoms(sym + "Si", positions=[[0, 0, 0], [r, 0, 0], [0, 10.0, 0]])
        e, f, _ = _efs(model, _structure(atoms))
        z = atoms.numbers[:2]
        p1, p2 = (P["Si" if x == 14 else "C"] for x in z)
        A, B = np.sqrt(p1["A"] * p2["A"]), np.sqrt(p1["B"] * p2["B"])
        lam, mu = 0.5 * (p1["lam"] + p2["lam"]), 0.5 * (p1["mu"] + p2["mu"])
        R, S = np.sqrt(p1["R"] * p2["R"]), np.sqrt(p1["S"] * p2["S"])
        fc = 1.0 if r < R else 0.5 + 0.5 * np.cos(np.pi * (r - R) / (S - R))
        chi = CHI_SIC if z[0] != z[1] else 1.0
        assert abs(float(e) - fc * (A * np.exp(-lam * r) - chi * B * np.exp(-mu * r))) < 1e-12
        assert np.isfinite(np.asarray(f)).all()


def test_third_atom_entering_cutoff_keeps_gradients_finite(model):
    """A third Si at, just inside and beyond S = 3.0 Å of the centre: finite forces, continuous energy.

    ΔE ∝ f_c^n ∝ (S − r)^{2n} with 2n = 1.57 (the published form is C¹ here, not C²).
    """
    es = []
    for d in (3.0 + 1e-3, 3.0, 3.0 - 1e-12, 3.0 - 1e-6):
        atoms = Atoms("Si3", positions=[[0, 0, 0], [2.35, 0, 0], [-d * 0.5, d * np.sqrt(3) / 2, 0]])
        e, f, _ = _efs(model, _structure(atoms))
        assert np.isfinite(np.asarray(f)).all()
        es.append(float(e))
    assert es[0] == es[1]
    assert abs(es[2] - es[1]) < 1e-12 and abs(es[3] - es[1]) < 1e-6


def test_capacity_overflow_is_nan_not_wrong(model):
    """A Si atom with 4 neighbours inside S: capacity 3 overflows (NaN; the default's results are tested above)."""
    tetra = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) * 2.35 / np.sqrt(3)
    s = _structure(Atoms("Si5", positions=np.vstack([[0, 0, 0], tetra])))
    assert np.isnan(float(_efs(tersoff(capacity=3), s)[0]))


# --------------------------------------------------------------------------- identities
# --------------------------------------------------------------------------- batching, dtype, elements
def test_unsupported_element_and_registry(model):
    with pytest.raises(UnsupportedElement, match="Ge"):
        model.energy(_structure(Atoms("SiGe", positions=[[0, 0, 0], [2.3, 0, 0]])))
    m = get("tersoff")
    assert m.elements == (6, 14)
    assert m.cutoff_for(_structure(Atoms("C2", positions=[[0, 0, 0], [1.4, 0, 0]]))) == 2.1
    assert m.cutoff_for(_structure(Atoms("SiC", positions=[[0, 0, 0], [1.9, 0, 0]]))) == 3.0
