"""The anchor set: structures on which a repair must leave the model where it was (docs/research.md §3).

Self-distillation needs no DFT: the original model's own energies and forces on a reference set of bulk,
surface and molecular structures are the targets (:func:`jaxcert.repair.anchor_loss`).  :func:`anchor_structures`
builds the set for a list of elements; ``held_out=True`` builds a second, disjoint one (another seed, other
strains and bond lengths) that the repair never sees, on which the drift is reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp

from jaxcert.core.structure import Structure

__all__ = ["anchor_structures"]


#: Dimer bond lengths of the anchor set, in units of the pair's covalent-radius sum, and of the held-out set.
BONDS = (1.0, 1.3)
HELD_OUT_BONDS = (1.1, 1.5)


def anchor_structures(elements: Sequence[str], *, held_out: bool = False, seed: int = 0, dtype: Any = None,
                      max_atoms: int = 16, bonds: Sequence[float] = BONDS) -> tuple[list[Structure], list[str]]:
    """(structures, labels ``"class:name"``) of the anchor set for ``elements``.

    * **bulk**: each element's reference crystal (``ase.build.bulk``), repeated to at least 4 atoms, strained
      isotropically by −2 % and +2 % (held out: −1 % and +3 %) and rattled by 0.03 Å;
    * **surface**: each metal's close-packed 2×2, three-layer slab (fcc(111), bcc(110), hcp(0001)), rattled;
    * **molecule**: every pair of the elements as a dimer at ``bonds`` × the covalent-radius sum (1.0× and 1.3×;
      held out: 1.1× and 1.5×), and the small molecules of ASE's G2 set made only of the elements (rattled).
      A wall repair changes a dimer's curve inside its well; more bond lengths (``bonds=(0.9, 1.0, 1.2, 1.3,
      1.7)``) hold the curve outside it, where a smooth radial basis would otherwise carry the change
      (nequix's eight Bessel functions vary on a 0.75 Å scale at its 6 Å cutoff).  They also pin the pair at
      the distances a barrier repair may need to move (an adsorbate–metal pair near its covalent sum), so the
      default keeps two.

    Rattles use ``seed`` (held out: ``seed + 1``).  Structures above ``max_atoms`` are left out.
    """
    from ase.build import molecule
    from ase.collections import g2
    from ase.data import atomic_numbers, covalent_radii

    from jaxcert.core.elements import reference_crystal
    from jaxcert.detective._surfaces import slab_atoms, surface_label

    dtype = dtype or jnp.zeros(()).dtype
    rng_seed = seed + (1 if held_out else 0)
    strains = (-0.01, 0.03) if held_out else (-0.02, 0.02)
    if set(map(float, bonds)) & set(HELD_OUT_BONDS):
        raise ValueError(f"bonds: {tuple(bonds)} share a bond length with the held-out set {HELD_OUT_BONDS}")
    bonds = HELD_OUT_BONDS if held_out else tuple(float(b) for b in bonds)
    out: list[tuple[Any, str]] = []
    for k, el in enumerate(elements):
        atoms = reference_crystal(el)
        if atoms is not None:
            reps = 1
            while len(atoms) * reps**3 < 4:
                reps += 1
            base = atoms.repeat((reps, reps, reps))
            for j, eps in enumerate(strains):
                a = base.copy()
                a.set_cell(a.get_cell() * (1.0 + eps), scale_atoms=True)
                a.rattle(0.03, seed=rng_seed * 100 + 10 * k + j)
                out.append((a, f"bulk:{el}{'+' if eps > 0 else ''}{eps:.0%}"))
        slab = slab_atoms(el)
        if slab is not None:
            slab = slab.copy()
            slab.rattle(0.03, seed=rng_seed * 100 + 50 + k)
            out.append((slab, f"surface:{surface_label(el)}"))
    for a, b in itertools.combinations_with_replacement(elements, 2):
        rsum = covalent_radii[atomic_numbers[a]] + covalent_radii[atomic_numbers[b]]
        for f in bonds:
            from ase import Atoms

            out.append((Atoms([a, b], positions=[[0, 0, 0], [f * rsum, 0, 0]]), f"molecule:{a}{b}@{f:g}"))
    allowed = set(elements)
    for name in g2.names:
        mol = molecule(name)
        syms = set(mol.get_chemical_symbols())
        if syms <= allowed and 2 < len(mol) <= max_atoms:
            mol.rattle(0.02, seed=rng_seed * 100 + 90 + len(out))
            out.append((mol, f"molecule:{name}"))
    structs, labels = [], []
    for atoms, label in out:
        if len(atoms) > max_atoms:
            continue
        structs.append(Structure.from_ase(atoms, dtype=dtype, min_distance=None))
        labels.append(label)
    return structs, labels


