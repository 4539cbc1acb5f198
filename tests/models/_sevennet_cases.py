"""Structures for the native-SevenNet agreement tests (ASE only, no torch): seven families, 52 structures.

Every structure is small (≤ 13 atoms) so that a family pads to one shape and is evaluated in one
vmapped, compiled call.  Elements are drawn from SevenNet-0's 89; random positions keep every
pair (minimum image) at least 0.9 × the sum of the covalent radii apart, so that the structures are
compressed at most mildly and float32 round-off stays at its usual level (a 13-atom Np cluster at
2.1 Å spacing has forces of 560 eV/Å, where SevenNet's own float32 and float64 differ by 1e-2).
"""

from __future__ import annotations

import numpy as np
from ase import Atoms
from ase.build import bulk, fcc111, molecule
from ase.data import covalent_radii

#: SevenNet-0's 89 elements (its checkpoint's type map).
SEVENNET_ELEMENTS = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
    29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54,
    55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80,
    81, 82, 83, 89, 90, 91, 92, 93, 94,
)


def _min_image_ok(pos: np.ndarray, cell: np.ndarray | None, pbc, numbers, scale: float) -> bool:
    """Every pair (minimum image) at least ``scale`` × the sum of the two covalent radii apart."""
    a = Atoms(numbers=numbers, positions=pos, cell=cell if cell is not None else np.zeros((3, 3)), pbc=pbc)
    d = a.get_all_distances(mic=bool(np.any(pbc)))
    r = covalent_radii[np.asarray(numbers)]
    lim = scale * (r[:, None] + r[None, :])
    np.fill_diagonal(d, np.inf)
    return bool(np.all(d >= lim))


def _random_cell_atoms(rng: np.random.Generator, n: int, species: list[int], cell_fn, pbc=True,
                       scale: float = 0.9) -> Atoms:
    """Random sequential addition in ``cell_fn(volume)``, sized at 1.6 × the atoms' covalent volume,
    each atom at least ``scale`` × (r_i + r_j) from the others (covalent radii)."""
    nums = [species[k % len(species)] for k in range(n)]
    rng.shuffle(nums)
    vol = 1.6 * sum(4 / 3 * np.pi * (1.25 * covalent_radii[z]) ** 3 for z in nums)
    cell = cell_fn(vol)
    pos: list[np.ndarray] = []
    for _ in range(20000):
        trial = rng.random(3) @ cell
        if not pos or _min_image_ok(np.array([*pos, trial]), cell, pbc, nums[:len(pos) + 1], scale):
            pos.append(trial)
            if len(pos) == n:
                return Atoms(numbers=nums, positions=np.array(pos), cell=cell, pbc=pbc)
    raise RuntimeError("could not place atoms")


def _cubic(rng: np.random.Generator, vol: float) -> np.ndarray:
    L = vol ** (1 / 3)
    return np.diag(L * (1 + 0.08 * (rng.random(3) - 0.5)))


def _skewed(rng: np.random.Generator, vol: float) -> np.ndarray:
    """A triclinic cell with angles between 60 and 120 degrees."""
    from ase.geometry import cellpar_to_cell

    ang = rng.uniform(65, 115, 3)
    c = cellpar_to_cell([1, 1.1, 0.9, *ang])
    return c * (vol / abs(np.linalg.det(c))) ** (1 / 3)


def binary_bulk(seed: int = 0, count: int = 10) -> list[Atoms]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        sp = [int(z) for z in rng.choice(SEVENNET_ELEMENTS, 2, replace=False)]
        n = int(rng.integers(2, 7))
        out.append(_random_cell_atoms(rng, n, sp, lambda v: _cubic(rng, v)))
    return out


def ternary_bulk(seed: int = 1, count: int = 8) -> list[Atoms]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        sp = [int(z) for z in rng.choice(SEVENNET_ELEMENTS, 3, replace=False)]
        n = int(rng.integers(3, 9))
        out.append(_random_cell_atoms(rng, n, sp, lambda v: _cubic(rng, v)))
    return out


def skewed_cells(seed: int = 2, count: int = 8) -> list[Atoms]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        sp = [int(z) for z in rng.choice(SEVENNET_ELEMENTS, int(rng.integers(1, 4)), replace=False)]
        n = int(rng.integers(2, 7))
        out.append(_random_cell_atoms(rng, n, sp, lambda v: _skewed(rng, v)))
    return out


def small_cells(seed: int = 3) -> list[Atoms]:
    """Cells whose plane spacings are below the 5 Å cutoff, most below half of it (many images)."""
    rng = np.random.default_rng(seed)
    out = [bulk("Cu", "fcc", a=3.61), bulk("Si", "diamond", a=5.43), bulk("Li", "bcc", a=3.44),
           bulk("NaCl", "rocksalt", a=5.64)]
    for a in out:
        a.rattle(0.03, seed=int(rng.integers(1000)))
    return out


def slabs(seed: int = 4) -> list[Atoms]:
    rng = np.random.default_rng(seed)
    out = []
    for el, a0 in (("Cu", 3.61), ("Pt", 3.92), ("Al", 4.05), ("Au", 4.08), ("Ni", 3.52), ("Ag", 4.09)):
        s = fcc111(el, size=(2, 2, 3), a=a0, vacuum=6.0)
        s.pbc = (True, True, False)
        s.rattle(0.05, seed=int(rng.integers(1000)))
        out.append(s)
    return out


def molecules(seed: int = 5) -> list[Atoms]:
    rng = np.random.default_rng(seed)
    out = []
    for name in ("H2O", "CH4", "NH3", "CO2", "C2H6", "C6H6", "CH3OH", "HCN"):
        m = molecule(name)
        m.rattle(0.02, seed=int(rng.integers(1000)))
        out.append(m)
    return out


def clusters(seed: int = 6, count: int = 8) -> list[Atoms]:
    """13-atom clusters (random species, one to three elements), pairs at least 0.9 (r_i + r_j) apart."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        sp = [int(z) for z in rng.choice(SEVENNET_ELEMENTS, int(rng.integers(1, 4)), replace=False)]
        nums = [sp[k % len(sp)] for k in range(13)]
        r = float(np.mean(covalent_radii[nums]))
        pos: list[np.ndarray] = []
        while len(pos) < 13:
            trial = rng.normal(size=3) * 1.6 * r
            if not pos or _min_image_ok(np.array([*pos, trial]), None, False, nums[:len(pos) + 1], 0.9):
                pos.append(trial)
        out.append(Atoms(numbers=nums, positions=np.array(pos), pbc=False))
    return out


def families() -> dict[str, list[Atoms]]:
    """name -> structures (52 in all)."""
    return {"binary_bulk": binary_bulk(), "ternary_bulk": ternary_bulk(), "skewed": skewed_cells(),
            "small_cells": small_cells(), "slabs": slabs(), "molecules": molecules(), "clusters": clusters()}
