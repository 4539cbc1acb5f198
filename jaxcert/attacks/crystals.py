r"""The 20 crystals of the study's "2D Materials Project" set (docs/attacks.md §5), **rebuilt, not downloaded**.

The study downloads Materials Project structures (``MPRester``; IDs in the table
of docs/attacks.md §5).  Nothing can be downloaded here, so every crystal is rebuilt
with ``ase.spacegroup.crystal`` from published crystal data: space group,
lattice parameters (Å) and Wyckoff positions, taken from the experimental
literature cited per entry (room-temperature data unless stated; cubic
perovskites of CsPbX₃ are their high-temperature cubic phases, which is what the
5-atom MP entries describe).  They are **not** the MP-relaxed (PBE) structures:
lattice parameters differ by the usual ~1–2 % DFT/experiment offset, and the
attack pipeline's first relaxation (fixed cell) takes a model to its own
minimum anyway.

Provenance caveats, stated plainly:

* Values were transcribed from the cited sources without online access to
  re-check them; each entry is checked in the tests for its atom count, spglib
  space group and first-neighbour bond lengths (chemically sane values).
* ``berlinite_alpo4``: rebuilt as α-berlinite (P3₁21, Z = 3, **18 atoms**); the
  reference table lists 12 atoms for mp-3955, so the MP entry is a different
  cell or polymorph that could not be identified offline.
* ``zn_cn2``: the ordered P-43m model of Zn(CN)₂ (head-to-tail C≡N); the lattice
  parameter is experimental, the C and N coordinates are placed on the Zn···Zn
  body diagonal with Zn–C 1.97 Å and C≡N 1.15 Å (typical bond lengths), not
  refined coordinates; the real crystal has C/N orientational disorder.
* ``beta_cristobalite_sio2``: the I-42d tetragonal description (Z = 4, 12
  atoms) with the ideal-cubic metric a = a_c/√2, c = a_c.

Structure sets: ``"mp2d"`` (these 20) and ``"sei"`` (the 20 Li–C–O(–H–P–F)
crystals of :mod:`jaxcert.attacks.sei`, standing in for the study's private
LiCOHPF frames); :func:`names`, :func:`build` and :func:`resolve` reach both
through one table.  :func:`supercell` repeats a structure along its cell
vectors (docs/attacks.md §5, "Supercells").

Element symbols (docs/attacks.md §7): :func:`element_cell` builds the conventional
cell of an element (``ase.build.bulk(sym, cubic=True)``, else ``orthorhombic=True``,
else ASE's primitive cell) repeated until every lattice vector is at least
``min_length`` Å long (default :data:`ELEMENT_MIN_LENGTH` = 8 Å), because ASE's
primitive cell of a metal has one atom, in which every perturbation is a rigid
translation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert.attacks._mp2d import CRYSTALS, Crystal
from jaxcert.attacks.sei import SEI
from jaxcert.core.inputs import InputError, split_list

__all__ = ["Crystal", "CRYSTALS", "SETS", "SUPERCELL_REPEATS", "ELEMENT_MIN_LENGTH", "build", "element_cell",
           "names", "repeats_for_length", "resolve", "supercell", "table", "MAX_SUPERCELL_ATOMS",
           "SupercellTooLarge", "check_supercell"]




#: Set names accepted by :func:`names` and :func:`resolve`.
SETS = ("mp2d", "sei")

#: The study's supercell repeats of the input structure (docs/attacks.md §5, "Supercells").
SUPERCELL_REPEATS = ((1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2), (2, 1, 1), (2, 1, 2), (2, 2, 1), (2, 2, 2))


def _set(name: str) -> dict[str, Crystal]:
    if name == "mp2d":
        return CRYSTALS
    if name == "sei":
        return SEI
    raise KeyError(f"unknown structure set {name!r}; available: {', '.join(SETS)} (or 'all')")


def table() -> dict[str, Crystal]:
    """Every crystal of every set, by label (``graphite`` is shared by both sets)."""
    out: dict[str, Crystal] = {}
    for name in SETS:
        out.update(_set(name))
    return out


def names(set: str = "mp2d") -> list[str]:
    """Labels of a set: ``"mp2d"`` (the 20 crystals of docs/attacks.md §5, in its order), ``"sei"`` or ``"all"``."""
    if set == "all":
        return list(table())
    return list(_set(set))


def resolve(spec: str | Sequence[str]) -> list[str]:
    """Labels from set names (``mp2d``, ``sei``, ``all``) and crystal labels, comma-separated or a sequence.

    Unknown items are returned unchanged (the CLI treats them as element symbols or files); duplicates are dropped,
    first occurrence kept.
    """
    out: list[str] = []
    for item in map(str, split_list("structures", spec, what="set names or crystal labels")):
        out.extend(names(item) if item in (*SETS, "all") else [item])
    return list(dict.fromkeys(out))


def build(label: str, **kw: Any):
    """``ase.Atoms`` of a crystal of either set (``ase.spacegroup.crystal``; provenance in ``atoms.info``)."""
    from ase.spacegroup import crystal

    every = table()
    if label not in every:
        raise KeyError(f"unknown crystal {label!r}; available: {', '.join(every)}")
    c = every[label]
    atoms = crystal(list(c.symbols), [tuple(map(float, b)) for b in c.basis], spacegroup=c.spacegroup,
                    cellpar=list(c.cellpar), primitive_cell=False, **kw)
    sets = [name for name in SETS if label in _set(name)]
    atoms.info.update({"label": c.label, "set": ",".join(sets), "mp_id_of_reference": c.mp_id, "source": c.source,
                       "provenance": "rebuilt from published crystal data with ase.spacegroup.crystal; "
                                     "not downloaded from the Materials Project or any database"})
    return atoms


def supercell(atoms: Any, n: int | Sequence[int] | None = None, *, min_length: float | None = None):
    """Diagonal supercell ``atoms.repeat(m)`` (ASE ``Atoms.repeat``, as the study's ``pipeline/supercell.py``).

    Args:
      atoms: ``ase.Atoms`` (periodic along the repeated axes).
      n: repeats, one integer for all three axes or three integers.
      min_length: instead of ``n``: the smallest repeats m_i such that every plane spacing of the supercell,
        m_i · V/|a_j × a_k| in Å, is at least ``min_length`` (e.g. twice a model cutoff); non-periodic axes stay 1.

    Returns:
      The supercell, with ``info["supercell"]`` = the repeats and ``info["primitive_atoms"]`` = len(atoms).
    """
    if (n is None) == (min_length is None):
        raise InputError("supercell: give exactly one of n (repeats) or min_length (A)")
    if n is not None:
        m = (int(n),) * 3 if np.ndim(n) == 0 else tuple(int(x) for x in n)
        if len(m) != 3 or min(m) < 1:
            raise InputError(f"supercell: repeats must be one or three integers >= 1, got {n!r}")
    else:
        if min_length <= 0:
            raise InputError(f"supercell: min_length must be > 0 A, got {min_length}")
        cell = np.asarray(atoms.get_cell().array, np.float64)
        vol = abs(np.linalg.det(cell))
        if vol < 1e-12:
            raise InputError("supercell: min_length needs a cell with non-zero volume")
        spacing = vol / np.linalg.norm(np.cross(cell[[1, 2, 0]], cell[[2, 0, 1]]), axis=1)
        m = tuple(int(np.ceil(min_length / h - 1e-9)) if p else 1 for h, p in zip(spacing, atoms.get_pbc(),
                                                                                  strict=True))
        m = tuple(max(1, x) for x in m)
    out = atoms.repeat(m)
    out.info.update(atoms.info)
    out.info.update({"supercell": m, "primitive_atoms": len(atoms)})
    return out


#: Default minimum lattice-vector length (Å) of the cell built for an element symbol (docs/attacks.md §7).
ELEMENT_MIN_LENGTH = 8.0

#: The largest supercell :func:`element_cell` / ``--min-length`` may build (atoms).  A relax-attack-relax run keeps
#: many (N, 3) float arrays per run (positions and forces of three stages, the optimizer's state) plus the
#: neighbour lists, so 10⁶ atoms already means GBs per run; an unbounded ``--min-length`` (1e4 Å on Si:
#: 5·10¹⁰ atoms) would first try to tile hundreds of GiB on the host.  A structure *file* of any size is taken as
#: given; only repeats are bounded.
MAX_SUPERCELL_ATOMS = 1_000_000


class SupercellTooLarge(ValueError):
    """The repeats a minimum length implies give more than ``max_atoms`` atoms (nothing was built)."""

    def __init__(self, base_atoms: int, reps: tuple[int, ...], max_atoms: int, what: str = "cell"):
        self.base_atoms, self.reps, self.max_atoms = int(base_atoms), tuple(int(m) for m in reps), int(max_atoms)
        self.n_atoms = self.base_atoms * math.prod(self.reps)
        gib = self.n_atoms * 3 * 8 / 2**30
        super().__init__(f"the {'x'.join(map(str, self.reps))} repeat of the {self.base_atoms}-atom {what} has "
                         f"{self.n_atoms:.3g} atoms (float64 positions alone {gib:.3g} GiB; a run keeps many such "
                         f"arrays); the limit is {self.max_atoms:,} atoms")


def check_supercell(atoms: Any, reps: Sequence[int], max_atoms: int | None = MAX_SUPERCELL_ATOMS,
                    what: str = "cell") -> None:
    """Raise :class:`SupercellTooLarge` when ``atoms.repeat(reps)`` would exceed ``max_atoms`` (None: no limit)."""
    if max_atoms is not None and len(atoms) * math.prod(int(m) for m in reps) > max_atoms:
        raise SupercellTooLarge(len(atoms), tuple(reps), max_atoms, what)


def repeats_for_length(atoms: Any, min_length: float) -> tuple[int, int, int]:
    """Smallest diagonal repeats m_i with every periodic |m_i a_i| ≥ ``min_length`` Å (1 on non-periodic axes and for
    ``min_length = 0``).  Lattice-vector lengths, not plane spacings: docs/attacks.md §7."""
    lengths = np.linalg.norm(np.asarray(atoms.get_cell().array, np.float64), axis=1)
    if not math.isfinite(min_length) or min_length < 0:
        raise InputError(f"repeats_for_length: min_length must be a finite number >= 0 (Å), got {min_length!r}")
    # Python floats and ints: a huge min_length gives a huge (exact) repeat count, never an overflow
    return tuple(max(1, math.ceil(float(min_length) / float(x) - 1e-9)) if (min_length > 0 and p and x > 0) else 1
                 for x, p in zip(lengths, atoms.get_pbc(), strict=True))


def element_cell(symbol: str, min_length: float = ELEMENT_MIN_LENGTH, max_atoms: int | None = None):
    """The attackable cell of an element: a conventional cell repeated to every |m_i a_i| ≥ ``min_length`` Å.

    The base cell is ``ase.build.bulk(symbol, cubic=True)``, else ``orthorhombic=True`` (hcp), else ASE's
    primitive cell; m_i = max(1, ⌈min_length / |a_i|⌉) (``min_length = 0``: no repeat).  Provenance goes to
    ``info``: ``jaxcert_source`` (the ASE call), ``supercell`` (the repeats), ``base_atoms``, ``min_length_A`` and
    ``jaxcert_key`` (what :func:`jaxcert.attacks.sweep.task_key` adds to the run key, so that a store of runs on
    another cell is not resumed as if it held these).

    Raises:
      ValueError: ``min_length`` negative or non-finite, or ASE has no crystal structure for ``symbol``;
        :class:`SupercellTooLarge` (a ValueError) when ``max_atoms`` is given and the repeat would exceed it.
    """
    from ase.build import bulk

    if not np.isfinite(min_length) or min_length < 0:
        raise InputError(f"element_cell: min_length must be a finite number >= 0 (Å), got {min_length!r}")
    base = how = None
    for kw, name in (({"cubic": True}, "cubic=True"), ({"orthorhombic": True}, "orthorhombic=True"), ({}, "")):
        try:
            base, how = bulk(symbol, **kw), name
            break
        except Exception as err:  # noqa: BLE001 - ASE raises ValueError, KeyError, RuntimeError or AssertionError
            last = err
    if base is None:
        raise InputError(f"ase.build.bulk has no crystal structure for {symbol!r} ({type(last).__name__}: "
                         f"{str(last)[:120]}); give a structure file instead")
    reps = repeats_for_length(base, min_length)
    check_supercell(base, reps, max_atoms, what=f"cell of {symbol}")
    out = base.repeat(reps)
    call = f"ase.build.bulk({symbol!r}{', ' + how if how else ''})"
    out.info.update({"jaxcert_source": f"{call}.repeat({reps})", "supercell": reps, "base_atoms": len(base),
                     "min_length_A": float(min_length), "jaxcert_key": f"bulk:{symbol}:{how or 'primitive'}:{reps}"})
    return out
