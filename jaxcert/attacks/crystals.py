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

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Crystal", "CRYSTALS", "SETS", "SUPERCELL_REPEATS", "ELEMENT_MIN_LENGTH", "build", "element_cell",
           "names", "repeats_for_length", "resolve", "supercell", "table"]


@dataclasses.dataclass(frozen=True)
class Crystal:
    """Published crystal data for one structure (Å, degrees, fractional Wyckoff representatives)."""

    label: str
    category: str
    formula: str
    mp_id: str
    reference_atoms: int
    spacegroup: int
    cellpar: tuple[float, float, float, float, float, float]
    symbols: tuple[str, ...]
    basis: tuple[tuple[float, float, float], ...]
    source: str


def _cubic(a):
    return (a, a, a, 90.0, 90.0, 90.0)


def _hex(a, c):
    return (a, a, c, 90.0, 90.0, 120.0)


def _perovskite(label, A, B, X, a, mp, source, category="incipient_ferroelectric"):
    return Crystal(label, category, f"{A}{B}{X}3", mp, 5, 221, _cubic(a), (B, A, X),
                   ((0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0, 0)), source)


def _tmd_2h(label, M, X, a, c, z, mp, source):
    return Crystal(label, "layered_vdw", f"{M}{X}2", mp, 6, 194, _hex(a, c), (M, X),
                   ((1 / 3, 2 / 3, 0.25), (1 / 3, 2 / 3, z)), source)


def _cdi2(label, M, X, a, c, z, mp, source):
    return Crystal(label, "layered_vdw", f"{M}{X}2", mp, 3, 164, _hex(a, c), (M, X),
                   ((0, 0, 0), (1 / 3, 2 / 3, z)), source)


_ZN_CN2_A = 5.9002
_C = 1.97 / (_ZN_CN2_A * 3**0.5)  # Zn–C 1.97 Å along [111]
_N = (1.97 + 1.15) / (_ZN_CN2_A * 3**0.5)

CRYSTALS: dict[str, Crystal] = {c.label: c for c in [
    Crystal("beta_cristobalite_sio2", "framework_cage", "SiO2", "mp-546794", 12, 122, (5.047, 5.047, 7.138, 90, 90, 90),
            ("Si", "O"), ((0, 0, 0), (0.0794, 0.25, 0.125)),
            "beta-cristobalite, I-42d: Wright & Leadbetter, Philos. Mag. 31, 1391 (1975); a_c = 7.138 A "
            "(Wyckoff, Crystal Structures vol. 1)"),
    Crystal("beta_quartz_sio2", "framework_cage", "SiO2", "mp-6922", 9, 180, _hex(4.9977, 5.4601), ("Si", "O"),
            ((0.5, 0, 0), (0.2072, 0.4144, 0.5)),
            "beta-quartz P6_222 at 848 K: Wright & Lehmann, J. Solid State Chem. 36, 371 (1981)"),
    Crystal("berlinite_alpo4", "framework_cage", "AlPO4", "mp-3955", 12, 152, _hex(4.9429, 10.9476),
            ("Al", "P", "O", "O"),
            ((0.4664, 0, 1 / 3), (0.4669, 0, 5 / 6), (0.4163, 0.2922, 0.3977), (0.4156, 0.2576, 0.8837)),
            "alpha-berlinite P3_121: Thong & Schwarzenbach, Acta Cryst. A35, 658 (1979) (18 atoms; see module note)"),
    Crystal("zn_cn2", "framework_cage", "Zn(CN)2", "mp-5245", 10, 215, _cubic(_ZN_CN2_A), ("Zn", "Zn", "C", "N"),
            ((0, 0, 0), (0.5, 0.5, 0.5), (_C, _C, _C), (_N, _N, _N)),
            "Zn(CN)2 ordered P-43m model, a = 5.9002 A: Williams, Partin, Lundberg & Kirkpatrick, Phys. Chem. Miner. "
            "(1997) / Goodwin et al., Phys. Rev. B 71, 140301 (2005); C, N from typical bond lengths (module note)"),
    Crystal("scf3", "framework_cage", "ScF3", "mp-10694", 4, 221, _cubic(4.0262), ("Sc", "F"),
            ((0, 0, 0), (0.5, 0, 0)), "ScF3 ReO3-type: Greve et al., J. Am. Chem. Soc. 132, 15496 (2010), 300 K"),
    Crystal("reo3", "framework_cage", "ReO3", "mp-190", 4, 221, _cubic(3.7477), ("Re", "O"),
            ((0, 0, 0), (0.5, 0, 0)), "ReO3: Jorgensen, Jorgensen, Batlogg et al., Phys. Rev. B 33, 4793 (1986)"),
    Crystal("graphite", "layered_vdw", "C", "mp-48", 4, 194, _hex(2.4612, 6.7079), ("C", "C"),
            ((0, 0, 0.25), (1 / 3, 2 / 3, 0.25)), "Bernal graphite: Trucano & Chen, Nature 258, 136 (1975)"),
    Crystal("h_bn", "layered_vdw", "BN", "mp-984", 4, 194, _hex(2.504, 6.661), ("B", "N"),
            ((1 / 3, 2 / 3, 0.25), (1 / 3, 2 / 3, 0.75)), "h-BN: Pease, Acta Cryst. 5, 356 (1952)"),
    _tmd_2h("mos2_2h", "Mo", "S", 3.1604, 12.295, 0.621, "mp-2815",
            "2H-MoS2: Schoenfeld, Huang & Moss, Acta Cryst. B39, 404 (1983)"),
    _tmd_2h("ws2_2h", "W", "S", 3.153, 12.323, 0.622, "mp-224",
            "2H-WS2: Schutte, de Boer & Jellinek, J. Solid State Chem. 70, 207 (1987)"),
    _tmd_2h("mose2_2h", "Mo", "Se", 3.289, 12.927, 0.621, "mp-1634",
            "2H-MoSe2: Bronsema, de Boer & Jellinek, Z. Anorg. Allg. Chem. 540, 15 (1986)"),
    _tmd_2h("wse2_2h", "W", "Se", 3.282, 12.960, 0.621, "mp-1821",
            "2H-WSe2: Schutte, de Boer & Jellinek, J. Solid State Chem. 70, 207 (1987)"),
    _cdi2("sns2", "Sn", "S", 3.6486, 5.8992, 0.25, "mp-1170", "SnS2 (CdI2 type, 2H): Hazen & Finger, Am. Mineral. "
          "63, 289 (1978)"),
    _cdi2("zrs2", "Zr", "S", 3.662, 5.813, 0.25, "mp-1186", "ZrS2 (CdI2 type): McTaggart & Wadsley, Aust. J. Chem. "
          "11, 445 (1958)"),
    _perovskite("srtio3", "Sr", "Ti", "O", 3.905, "mp-5229", "SrTiO3 cubic, room temperature (e.g. Abramov et al., "
                "Acta Cryst. B51, 942 (1995))"),
    _perovskite("ktao3", "K", "Ta", "O", 3.9885, "mp-3614", "KTaO3 cubic: Zhurova et al., Acta Cryst. B56, 594 (2000)"),
    _perovskite("bazro3", "Ba", "Zr", "O", 4.193, "mp-3834", "BaZrO3 cubic: Akbarzadeh et al., Phys. Rev. B 72, "
                "205104 (2005)"),
    _perovskite("bahfo3", "Ba", "Hf", "O", 4.1712, "mp-998552", "BaHfO3 cubic: Maekawa, Kurosaki & Yamanaka, "
                "J. Alloys Compd. 407, 44 (2006)"),
    _perovskite("cspbbr3", "Cs", "Pb", "Br", 5.874, "mp-600089", "alpha-CsPbBr3 (cubic, above 403 K): Moller, "
                "Nature 182, 1436 (1958)", "molecular_orientational"),
    _perovskite("cspbi3", "Cs", "Pb", "I", 6.2894, "mp-1069538", "alpha-CsPbI3 (cubic, 634 K): Trots & Myagkota, "
                "J. Phys. Chem. Solids 69, 2520 (2008)", "molecular_orientational"),
]}


#: Set names accepted by :func:`names` and :func:`resolve`.
SETS = ("mp2d", "sei")

#: The study's supercell repeats of the input structure (docs/attacks.md §5, "Supercells").
SUPERCELL_REPEATS = ((1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2), (2, 1, 1), (2, 1, 2), (2, 2, 1), (2, 2, 2))


def _set(name: str) -> dict[str, Crystal]:
    if name == "mp2d":
        return CRYSTALS
    if name == "sei":
        from jaxcert.attacks.sei import SEI

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


def resolve(spec: str) -> list[str]:
    """Labels from a comma-separated spec of set names (``mp2d``, ``sei``, ``all``) and crystal labels.

    Unknown items are returned unchanged (the CLI treats them as element symbols or files); duplicates are dropped,
    first occurrence kept.
    """
    out: list[str] = []
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
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
        raise ValueError("supercell: give exactly one of n (repeats) or min_length (A)")
    if n is not None:
        m = (int(n),) * 3 if np.ndim(n) == 0 else tuple(int(x) for x in n)
        if len(m) != 3 or min(m) < 1:
            raise ValueError(f"supercell: repeats must be one or three integers >= 1, got {n!r}")
    else:
        if min_length <= 0:
            raise ValueError(f"supercell: min_length must be > 0 A, got {min_length}")
        cell = np.asarray(atoms.get_cell().array, np.float64)
        vol = abs(np.linalg.det(cell))
        if vol < 1e-12:
            raise ValueError("supercell: min_length needs a cell with non-zero volume")
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


def repeats_for_length(atoms: Any, min_length: float) -> tuple[int, int, int]:
    """Smallest diagonal repeats m_i with every periodic |m_i a_i| ≥ ``min_length`` Å (1 on non-periodic axes and for
    ``min_length = 0``).  Lattice-vector lengths, not plane spacings: docs/attacks.md §7."""
    lengths = np.linalg.norm(np.asarray(atoms.get_cell().array, np.float64), axis=1)
    return tuple(max(1, int(np.ceil(min_length / x - 1e-9))) if (min_length > 0 and p and x > 0) else 1
                 for x, p in zip(lengths, atoms.get_pbc(), strict=True))


def element_cell(symbol: str, min_length: float = ELEMENT_MIN_LENGTH):
    """The attackable cell of an element: a conventional cell repeated to every |m_i a_i| ≥ ``min_length`` Å.

    The base cell is ``ase.build.bulk(symbol, cubic=True)``, else ``orthorhombic=True`` (hcp), else ASE's
    primitive cell; m_i = max(1, ⌈min_length / |a_i|⌉) (``min_length = 0``: no repeat).  Provenance goes to
    ``info``: ``jaxcert_source`` (the ASE call), ``supercell`` (the repeats), ``base_atoms``, ``min_length_A`` and
    ``jaxcert_key`` (what :func:`jaxcert.attacks.sweep.task_key` adds to the run key, so that a store of runs on
    another cell is not resumed as if it held these).

    Raises:
      ValueError: ``min_length`` negative or non-finite, or ASE has no crystal structure for ``symbol``.
    """
    from ase.build import bulk

    if not np.isfinite(min_length) or min_length < 0:
        raise ValueError(f"element_cell: min_length must be a finite number >= 0 (Å), got {min_length!r}")
    base = how = None
    for kw, name in (({"cubic": True}, "cubic=True"), ({"orthorhombic": True}, "orthorhombic=True"), ({}, "")):
        try:
            base, how = bulk(symbol, **kw), name
            break
        except Exception as err:  # noqa: BLE001 - ASE raises ValueError, KeyError, RuntimeError or AssertionError
            last = err
    if base is None:
        raise ValueError(f"ase.build.bulk has no crystal structure for {symbol!r} ({type(last).__name__}: "
                         f"{str(last)[:120]}); give a structure file instead")
    reps = repeats_for_length(base, min_length)
    out = base.repeat(reps)
    call = f"ase.build.bulk({symbol!r}{', ' + how if how else ''})"
    out.info.update({"jaxcert_source": f"{call}.repeat({reps})", "supercell": reps, "base_atoms": len(base),
                     "min_length_A": float(min_length), "jaxcert_key": f"bulk:{symbol}:{how or 'primitive'}:{reps}"})
    return out
