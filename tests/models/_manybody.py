"""The structures of the many-body model tests (SW, Tersoff, EAM) and the table the shared identity tests
run over (tests/models/test_identities.py). The model-specific reference checks (closed forms, jax-md,
matscipy, brute-force sums, published values) stay in each model's own test file and use the same
builders from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from ase import Atoms
from ase.build import bulk
from ase.cluster import Icosahedron
from ase.neighborlist import neighbor_list

import jaxcert
from jaxcert.models.eam import sutton_chen
from jaxcert.models.stillinger_weber import stillinger_weber
from jaxcert.models.tersoff import TERSOFF_SI_C_1989, tersoff


def rattled(atoms: Atoms, stdev: float, seed: int) -> Atoms:
    atoms = atoms.copy()
    atoms.positions += np.random.default_rng(seed).normal(0.0, stdev, atoms.positions.shape)
    return atoms


def random_rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


# --------------------------------------------------------------------------- Stillinger–Weber (Si)
def sw_si8() -> Atoms:
    return rattled(bulk("Si", "diamond", a=5.431, cubic=True), 0.12, 1)


def sw_si64() -> Atoms:
    return rattled(bulk("Si", "diamond", a=5.431, cubic=True).repeat(2), 0.1, 2)


def sw_skewed() -> Atoms:
    a = bulk("Si", "diamond", a=5.3)  # 2-atom primitive cell, made triclinic and compressed
    rng = np.random.default_rng(3)
    a.set_cell(a.cell @ (np.eye(3) + 0.06 * rng.normal(size=(3, 3))), scale_atoms=True)
    return rattled(a, 0.08, 3)


def sw_cluster() -> Atoms:
    a = bulk("Si", "diamond", a=5.431, cubic=True).repeat(2)
    centre = a.positions[13]
    keep = np.linalg.norm(a.positions - centre, axis=1) < 4.0  # atom + 4 + 12 shells: a 17-atom cluster
    c = Atoms("Si" * int(keep.sum()), positions=a.positions[keep])
    return rattled(c, 0.1, 4)


# --------------------------------------------------------------------------- Tersoff (Si, C, Si–C)
def tersoff_si8() -> Atoms:
    return rattled(bulk("Si", "diamond", a=5.432, cubic=True), 0.1, 1)


def tersoff_c8() -> Atoms:
    return rattled(bulk("C", "diamond", a=3.566, cubic=True), 0.06, 2)


def tersoff_sic16() -> Atoms:
    """Random Si/C occupation of a 16-site zincblende cell; some Si–Si pairs sit in the f_c switch."""
    a = bulk("SiC", "zincblende", a=4.32, cubic=True).repeat((2, 1, 1))
    a.numbers = np.random.default_rng(3).choice([6, 14], len(a))
    return rattled(a, 0.1, 3)


def tersoff_skewed() -> Atoms:
    a = bulk("Si", "diamond", a=5.2)  # compressed triclinic primitive cell: second shell inside the cutoff
    rng = np.random.default_rng(4)
    a.set_cell(a.cell @ (np.eye(3) + 0.05 * rng.normal(size=(3, 3))), scale_atoms=True)
    return rattled(a, 0.05, 4)


def tersoff_cluster() -> Atoms:
    """Mixed Si/C cluster (non-periodic), 17 atoms."""
    a = bulk("SiC", "zincblende", a=4.32, cubic=True).repeat(2)
    keep = np.linalg.norm(a.positions - a.positions[13], axis=1) < 3.3
    c = Atoms(numbers=a.numbers[keep], positions=a.positions[keep])
    return rattled(c, 0.08, 5)


def tersoff_trimer() -> Atoms:
    return Atoms("SiC2", positions=[[0, 0, 0], [1.9, 0, 0], [-0.6, 1.7, 0.2]])


def tersoff_min_gap_to_switch_edges(atoms: Atoms) -> float:
    """Smallest |r − R_ij| or |r − S_ij| over all pairs (Tersoff's f_c has a curvature jump there)."""
    sym = {6: "C", 14: "Si"}
    P = TERSOFF_SI_C_1989
    i, j, d = neighbor_list("ijd", atoms, 3.5)
    gaps = [np.inf]
    for a, b, r in zip(i, j, d, strict=True):
        pa, pb = P[sym[atoms.numbers[a]]], P[sym[atoms.numbers[b]]]
        gaps += [abs(r - np.sqrt(pa["R"] * pb["R"])), abs(r - np.sqrt(pa["S"] * pb["S"]))]
    return float(min(gaps))


def _tersoff_stencil_clear(atoms: Atoms) -> None:
    assert tersoff_min_gap_to_switch_edges(atoms) > 0.05  # precondition: the stencil never crosses R or S


# --------------------------------------------------------------------------- Sutton–Chen EAM (fcc metals)
def eam_alloy() -> Atoms:
    """Random Ni/Cu/Pd/Ag/Pt/Au/Al/Pb occupation of a skewed 16-atom fcc cell."""
    a = bulk("Cu", "fcc", a=3.9, cubic=True).repeat((2, 2, 1))
    rng = np.random.default_rng(1)
    a.numbers = rng.choice([28, 29, 46, 47, 78, 79, 13, 82], len(a))
    a.set_cell(a.cell @ (np.eye(3) + 0.04 * rng.normal(size=(3, 3))), scale_atoms=True)
    return rattled(a, 0.1, 1)


def eam_skewed() -> Atoms:
    a = bulk("Ir", "fcc", a=3.84)  # one-atom triclinic primitive cell
    rng = np.random.default_rng(2)
    a.set_cell(a.cell @ (np.eye(3) + 0.06 * rng.normal(size=(3, 3))), scale_atoms=True)
    return a


def eam_cluster() -> Atoms:
    c = Icosahedron("Au", 2)  # 13 atoms
    c.numbers = np.random.default_rng(3).choice([79, 46, 45], len(c))
    return rattled(c, 0.1, 3)


def eam_dimer() -> Atoms:
    return Atoms("PtPd", positions=[[0, 0, 0], [2.7, 0.1, 0]])


# --------------------------------------------------------------------------- the table
@dataclasses.dataclass(frozen=True)
class Case:
    """One model of the shared identity tests: which structures each identity runs on, and its tolerances.

    The structures and tolerances are the ones each model's own file used before the merge.
    """

    make_model: Callable[[], jaxcert.Model]
    invariance: tuple[Callable[[], Atoms], ...]  # E(3) + permutation invariance
    invariance_atol: float  # on the rotated, permuted forces (eV/Å)
    forces_fd: tuple[Callable[[], Atoms], ...]  # F = −∇E against central differences (h² convergence)
    stress: tuple[Callable[[], Atoms], ...]  # σ = (1/V) ∂E/∂ε against central differences
    stress_atol: float
    padded: tuple[Callable[[], Atoms], ...]  # a padded, vmapped batch equals each structure alone
    padded_atol: float
    float32: Callable[[], Atoms]  # float32 against float64
    float32_rel: float  # |ΔE| / |E|
    fd_precondition: Callable[[Atoms], None] | None = None


CASES: dict[str, Case] = {
    "sw": Case(stillinger_weber, (sw_si8, sw_skewed, sw_cluster), 1e-11, (sw_si8, sw_cluster),
               (sw_si8, sw_skewed), 1e-8, (sw_si8, sw_skewed), 1e-11, sw_si8, 1e-6),
    "tersoff": Case(tersoff, (tersoff_sic16, tersoff_skewed, tersoff_cluster), 1e-11, (tersoff_si8, tersoff_cluster),
                    (tersoff_sic16, tersoff_skewed), 1e-8, (tersoff_cluster, tersoff_trimer), 1e-11, tersoff_cluster,
                    3e-6, fd_precondition=_tersoff_stencil_clear),
    # EAM stress: measured 2.9e-10 (alloy), 4.4e-10 (1-atom cell)
    "eam": Case(sutton_chen, (eam_alloy, eam_cluster), 1e-12, (eam_alloy, eam_cluster), (eam_alloy, eam_skewed), 5e-9,
                (eam_cluster, eam_dimer), 1e-12, eam_alloy, 1e-6),
}
