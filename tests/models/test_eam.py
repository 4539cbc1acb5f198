"""jaxcert.models.eam (Sutton–Chen): fcc lattice sums, a brute-force numpy alloy reference, identities."""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.data import atomic_numbers
from ase.neighborlist import neighbor_list

from jaxcert.core.model import UnsupportedElement
from jaxcert.models import get
from jaxcert.models.eam import SUTTON_CHEN_1990, sutton_chen

from ._efs import _efs, _structure
from ._manybody import eam_alloy as _alloy
from ._manybody import eam_cluster as _cluster
from ._manybody import eam_skewed as _skewed

RC, RON = 2.5, 2.0  # the model's default switch, in units of a_ij
SC_BY_Z = {atomic_numbers[k]: v for k, v in SUTTON_CHEN_1990.items()}


@pytest.fixture(scope="module")
def model():
    return sutton_chen()


def _switch(r, ron, rc):
    t = np.clip((r - ron) / (rc - ron), 0.0, 1.0)
    return 1.0 - (126 * t**5 - 420 * t**6 + 540 * t**7 - 315 * t**8 + 70 * t**9)


# --------------------------------------------------------------------------- references
def _fcc_shells(n_max: int = 12) -> np.ndarray:
    """|R|/a of every fcc lattice vector with |R| ≤ n_max/2 a (numpy, independent of jaxcert.core.neighbors)."""
    g = np.arange(-n_max, n_max + 1)
    i, j, k = np.meshgrid(g, g, g, indexing="ij")
    keep = (i + j + k) % 2 == 0
    r = np.sqrt(i[keep] ** 2 + j[keep] ** 2 + k[keep] ** 2) / 2.0
    return r[(r > 0) & (r <= n_max / 2)]


@pytest.mark.parametrize("el", list(SUTTON_CHEN_1990))
def test_fcc_energy_equals_closed_form_lattice_sum(model, el):
    """E/atom = ε[½ Σ_R S(R)(a/R)^n − c √(Σ_R S(R)(a/R)^m)] at and around the paper's a, primitive and cubic cells."""
    n, m, eps, c, a0 = SUTTON_CHEN_1990[el]
    shells = _fcc_shells()
    for a, cubic in ((a0, False), (a0, True), (0.97 * a0, False), (1.04 * a0, False)):
        atoms = bulk(el, "fcc", a=a, cubic=cubic)
        e = float(_efs(model, _structure(atoms))[0]) / len(atoms)
        r = shells * a
        sw = _switch(r, RON * a0, RC * a0)
        e_ref = eps * (0.5 * np.sum(sw * (a0 / r) ** n) - c * np.sqrt(np.sum(sw * (a0 / r) ** m)))
        assert abs(e - e_ref) < 1e-12 * max(1.0, abs(e_ref))


#: Experimental cohesive energies (eV/atom, Kittel) that the paper's ε reproduce within ~0.05 eV.
E_COH_EXPT = {"Ni": 4.44, "Cu": 3.49, "Rh": 5.75, "Pd": 3.89, "Ag": 2.95,
              "Ir": 6.94, "Pt": 5.84, "Au": 3.81, "Pb": 2.03, "Al": 3.39}


@pytest.mark.parametrize("el", list(SUTTON_CHEN_1990))
def test_parameter_table_is_the_papers_fit(el):
    """Untruncated fcc sums: equilibrium at the paper's a (c = n S_n / (m √S_m)), experimental E_coh and a.

    Catches a typo in any of n, m, c (relative mismatch measured ≤ 3e-5, the rounding of c in
    the paper), ε (E_coh within 0.06 eV of experiment) or a (ASE's tabulated lattice constant).
    """
    from ase.data import reference_states

    n, m, eps, c, a = SUTTON_CHEN_1990[el]
    r = _fcc_shells(40)
    s_n = np.sum(r ** (-n))
    s_m = np.sum(r ** (-m)) + 16 * np.pi * r.max() ** (3 - m) / (m - 3)  # continuum tail beyond 20 a
    assert abs(n * s_n / (m * np.sqrt(s_m)) / c - 1.0) < 1e-4
    assert abs(-eps * (0.5 * s_n - c * np.sqrt(s_m)) - E_COH_EXPT[el]) < 0.06
    assert abs(a - reference_states[atomic_numbers[el]]["a"]) < 0.005


def _brute_force(atoms: Atoms) -> float:
    """Numpy Sutton–Chen with the stated mixing rules, ASE neighbour list, per-pair cutoff 2.5 a_ij."""
    z = atoms.numbers
    rc_max = RC * max(SC_BY_Z[x][4] for x in set(z.tolist()))
    i, j, r = neighbor_list("ijd", atoms, rc_max)
    n_i, m_i, e_i, c_i, a_i = (np.array([SC_BY_Z[x][k] for x in z]) for k in range(5))
    a_ij = 0.5 * (a_i[i] + a_i[j])
    n_ij, m_ij = 0.5 * (n_i[i] + n_i[j]), 0.5 * (m_i[i] + m_i[j])
    eps_ij = np.sqrt(e_i[i] * e_i[j])
    sw = _switch(r, RON * a_ij, RC * a_ij)
    pair = 0.5 * np.sum(eps_ij * (a_ij / r) ** n_ij * sw)
    rho = np.bincount(i, weights=(a_ij / r) ** m_ij * sw, minlength=len(atoms))
    return pair - np.sum(e_i * c_i * np.sqrt(rho))


@pytest.mark.parametrize("make", [_alloy, _skewed, _cluster])
def test_matches_brute_force_alloy(model, make):
    atoms = make()
    e = float(_efs(model, _structure(atoms))[0])
    assert abs(e - _brute_force(atoms)) < 1e-11 * len(atoms)


def test_isolated_atoms_and_dimer_cutoff(model):
    """No neighbour within r_c: E = 0 and zero, finite forces (√ρ at ρ = 0 is guarded)."""
    for d in (RC * 3.61, RC * 3.61 + 1e-9, 20.0):
        e, f, _ = _efs(model, _structure(Atoms("Cu2", positions=[[0, 0, 0], [d, 0, 0]])))
        assert float(e) == 0.0 and np.all(np.asarray(f) == 0.0)
    e, f, _ = _efs(model, _structure(Atoms("Cu2", positions=[[0, 0, 0], [RC * 3.61 - 1e-3, 0, 0]])))
    assert np.isfinite(np.asarray(f)).all() and -1e-7 < float(e) < 0.0  # √ρ ~ (r_c − r)^{5/2}


# --------------------------------------------------------------------------- identities
# --------------------------------------------------------------------------- batching, dtype, elements
def test_unsupported_element_and_registry(model):
    with pytest.raises(UnsupportedElement, match="Fe"):
        model.energy(_structure(Atoms("CuFe", positions=[[0, 0, 0], [2.5, 0, 0]])))
    m = get("eam", elements=("Cu", "Ag"))
    with pytest.raises(UnsupportedElement, match="Au"):
        m.energy(_structure(Atoms("CuAu", positions=[[0, 0, 0], [2.5, 0, 0]])))
    assert m.cutoff_for(_structure(Atoms("CuAg", positions=[[0, 0, 0], [2.5, 0, 0]]))) == pytest.approx(RC * 4.09)
    with pytest.raises(KeyError):
        sutton_chen(elements=("Fe",))
