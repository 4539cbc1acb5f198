r"""Deterministic per-element substrates (docs/probes.md §2) and the λ-benchmark structures (seed 002).

Four substrate kinds, each built from an element symbol alone, exactly as the
pescert reference builds them (docs/probes.md §2.2–§2.6):

* ``cluster`` (§2.2) — the 13 sites nearest the centre of the element's ASE
  reference crystal (diamond fallback at the covalent diameter), rattled by a
  fixed ``RandomState(0)`` draw of σ = 0.05 Å and boxed with 8 Å vacuum,
  pbc False.  Substrate of equivariance, zero_modes, conservativeness, betti,
  reversibility, config_temperature, virial, equipartition, smoothness.
* ``trimer`` (§2.3) — the equilateral A–B–C triangle with edge d_nn, apex B,
  boxed with 8 Å vacuum, pbc False; ``info["mirror_swap"] = (0, 2)``.
* ``bulk`` (§2.4) — ``ase.build.bulk(el)`` unscaled and unrattled (fcc
  fallback with a = √2·d_nn), pbc True.
* ``p2mm`` (§2.5) — the 4-atom Pmm2 (No. 25) template rescaled uniformly so its
  minimum-image NN equals d_nn(el), pbc True.  ``"pmm2"`` is accepted as an alias.

Every ``*_atoms`` builder returns an :class:`ase.Atoms` (Å, amu); the
same-named builders without the suffix return a :class:`jaxcert.Structure`.
:func:`stacked` builds one substrate kind for many elements as a single
batched Structure (one shape per kind, padding masks where the primitive bulk
cells differ in size), so a probe runs for all elements as one vmapped program
(docs/architecture.md, "Batching").  :func:`closest_pair` / :func:`bonds` give the default
bond of conservativeness and smoothness (§2.6).

:func:`lambda_structures` gives the ten structures of the λ = ‖J_anti‖/‖J‖
benchmark of seed 002 (eight ASE molecules, cubic diamond, periodic graphene).

Distances are in Å throughout; d_nn(el) is :func:`jaxcert.core.elements.d_nn`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxcert.core.cache import stored
from jaxcert.core.elements import covalent_diameter, d_nn, reference_crystal, symbol
from jaxcert.core.files import atomic_write
from jaxcert.core.inputs import InputError
from jaxcert.core.structure import Structure, stack

__all__ = [
    "VACUUM", "RATTLE_STDEV", "RATTLE_SEED", "MIRROR_SWAP", "KINDS", "P2MM_TEMPLATE_NN", "LAMBDA_MOLECULES",
    "cluster_atoms", "trimer_atoms", "bulk_atoms", "pmm2_atoms", "p2mm_atoms",
    "cluster", "trimer", "bulk", "pmm2", "p2mm",
    "closest_pair", "bonds", "make_substrate", "make_structure", "stacked",
    "lambda_atoms", "lambda_structures", "write_substrates",
]

#: Vacuum (Å) on each side of the non-periodic substrates, §2.2 step 8 and §2.3.
VACUUM = 8.0
#: Cluster rattle: standard deviation (Å) and the fixed legacy ``RandomState`` seed, §2.2 step 7.
RATTLE_STDEV = 0.05
RATTLE_SEED = 0
#: The trimer atoms exchanged by the x-mirror (A, C), §2.3.
MIRROR_SWAP = (0, 2)

#: Canonical substrate kinds (§2.6) and their accepted aliases.
KINDS = ("cluster", "trimer", "bulk", "p2mm")
_KIND_ALIASES = {"cluster": "cluster", "trimer": "trimer", "bulk": "bulk", "p2mm": "p2mm", "pmm2": "p2mm"}

#: Pmm2 template (§2.5): orthorhombic cell (Å, rows) and Cartesian positions (Å) of the four atoms on
#: Wyckoff sites 1a, 1d, 1c, 1d.  The fractional coordinates are those of the §2.5 table
#: (z = 0.10962718, 0.57321656, 0.76149240, 0.23583381); the Cartesian z values are kept at full
#: precision so that the template minimum-image NN (atoms 1–3 along z) is 2.4996554141501344 Å.
_P2MM_CELL = np.diag([4.32890106, 4.46763875, 7.40896034])
_P2MM_POSITIONS = np.array(
    [
        [0.0, 0.0, 0.8122234288060413],
        [2.16445053, 2.233819375, 4.24693875927123],
        [2.16445053, 0.0, 5.641866990811415],
        [2.16445053, 2.233819375, 1.7472833451210954],
    ]
)
#: Template minimum-image NN distance (Å) before rescaling, §2.5.
P2MM_TEMPLATE_NN = 2.4996554141501344

#: The eight ``ase.build.molecule`` names of the seed-002 λ benchmark.
LAMBDA_MOLECULES = ("H2O", "CH4", "NH3", "C2H4", "C2H2", "SO2", "CH3OH", "C6H6")


# ----------------------------------------------------------------------------- helpers
def _element(el: Any) -> str:
    """Chemical symbol of a single element (symbol or Z); a tuple or list of species is refused."""
    if isinstance(el, (tuple, list)):
        raise InputError(f"substrates are single-species: got {el!r}; pass one element symbol")
    if isinstance(el, (int, np.integer)) and not isinstance(el, bool):
        return symbol(int(el))
    if not isinstance(el, str):
        raise InputError(f"expected an element symbol, got {el!r}")
    return symbol(el)


def _to_structure(atoms: Any, dtype: Any) -> Structure:
    return Structure.from_ase(atoms, dtype=dtype)


# ----------------------------------------------------------------------------- cluster (§2.2)
def cluster_atoms(el: str | int, n_atoms: int = 13, scale: float = 1.0) -> Any:
    """The ``n_atoms``-site cluster cut from the reference crystal, docs/probes.md §2.2.

    Steps (all deterministic):

    1. lattice = ``ase.build.bulk(el)``; if ASE cannot build it, the diamond fallback
       ``bulk(el, "diamond", a=2 r_cov · 4/√3)`` (scale 1, diamond NN = covalent diameter);
    2. reps = 2, increased while ``n_cell · reps³ < 8 · n_atoms``;
    3. P = positions of ``lattice.repeat(reps)``;
    4. centre c = the site nearest the centroid of P (first index on ties);
    5. the ``n_atoms`` sites nearest c by ``np.argsort`` (index 0 is c);
    6. centroid subtracted, times ``scale``; ``Atoms(f"{el}{n}", pbc=False)``;
    7. rattle: ``+ RandomState(0).normal(scale=0.05, size=(n_atoms, 3))`` Å (= ``Atoms.rattle``);
    8. ``center(vacuum=8.0)``: orthorhombic box extent + 16 Å, minimum coordinate 8 Å per axis.

    Args:
      el: element symbol or atomic number.
      n_atoms: number of atoms (13 everywhere in the suite).
      scale: multiplies the cut geometry (Å) before the rattle.

    Returns:
      ``ase.Atoms`` with pbc False and the vacuum box as cell.
    """
    from ase import Atoms
    from ase.build import bulk as ase_bulk

    el = _element(el)
    n_atoms = int(n_atoms)
    if n_atoms < 1:
        raise InputError(f"n_atoms must be positive, got {n_atoms}")
    lattice = reference_crystal(el)
    if lattice is None:
        a_cubic = covalent_diameter(el, 1.0) * 4.0 / np.sqrt(3.0)
        lattice = ase_bulk(el, crystalstructure="diamond", a=a_cubic)
    reps = 2
    while len(lattice) * reps**3 < 8 * n_atoms:
        reps += 1
    pos = lattice.repeat(reps).get_positions()
    centre = pos[np.argmin(np.linalg.norm(pos - pos.mean(0), axis=1))]
    order = np.argsort(np.linalg.norm(pos - centre, axis=1))
    chosen = pos[order[:n_atoms]]
    chosen = (chosen - chosen.mean(0)) * scale
    chosen = chosen + np.random.RandomState(RATTLE_SEED).normal(scale=RATTLE_STDEV, size=(n_atoms, 3))
    atoms = Atoms(f"{el}{n_atoms}", positions=chosen, pbc=False)
    atoms.center(vacuum=VACUUM)
    return atoms


# ----------------------------------------------------------------------------- trimer (§2.3)
def trimer_atoms(el: str | int, scale: float = 1.0) -> Any:
    """Symmetric A–B–C trimer of one species, docs/probes.md §2.3.

    Edge d = d_nn(el, scale) (reference-crystal NN, covalent fallback), equilateral;
    apex height h = √max(d² − (d/2)², 1e-6).  Before centring A = (−d/2, 0, 0) (index 0),
    B = (0, h, 0) (index 1, apex), C = (d/2, 0, 0) (index 2); centroid subtracted, pbc False,
    ``center(vacuum=8)`` gives the box diag(d + 16, h + 16, 16) Å and A = (8, 8, 8).
    ``info["mirror_swap"] = (0, 2)``: the x-mirror exchanges A and C.

    Mixed species are refused: a tuple or list raises ``ValueError``.
    """
    from ase import Atoms

    if isinstance(el, (tuple, list)):
        raise InputError(f"trimer requires A, B and C to be the same species; got {el!r}, pass one element symbol")
    el = _element(el)
    d = d_nn(el, scale)
    half = d / 2.0
    height = float(np.sqrt(max(d**2 - half**2, 1e-6)))
    positions = np.array([[-half, 0.0, 0.0], [0.0, height, 0.0], [half, 0.0, 0.0]])
    positions -= positions.mean(0)
    atoms = Atoms(f"{el}3", positions=positions, pbc=False)
    atoms.center(vacuum=VACUUM)
    atoms.info["mirror_swap"] = MIRROR_SWAP
    return atoms


# ----------------------------------------------------------------------------- bulk (§2.4)
def bulk_atoms(el: str | int, repeat: int = 1, scale: float = 1.0) -> Any:
    """Periodic bulk for stress_consistency, docs/probes.md §2.4.

    ``ase.build.bulk(el)``: the primitive reference cell (1 or 2 atoms), **unscaled**
    (``scale`` is ignored on this path) and not rattled, pbc True.  When ASE cannot build
    it, an fcc primitive cell with a = √2 · d_nn(el, scale) (d_nn itself falls back to the
    covalent diameter), note fcc here versus diamond in the cluster.  ``repeat > 1`` tiles
    the cell ``repeat`` times along each lattice vector.
    """
    from ase.build import bulk as ase_bulk

    el = _element(el)
    atoms = reference_crystal(el)
    if atoms is None:
        atoms = ase_bulk(el, crystalstructure="fcc", a=d_nn(el, scale) * np.sqrt(2.0))
    repeat = int(repeat)
    if repeat < 1:
        raise InputError(f"repeat must be >= 1, got {repeat}")
    if repeat > 1:
        atoms = atoms.repeat(repeat)
    return atoms


# ----------------------------------------------------------------------------- p2mm (§2.5)
def pmm2_atoms(el: str | int, scale: float = 1.0) -> Any:
    """The 4-atom Pmm2 (No. 25, point group mm2) crystal, docs/probes.md §2.5.

    The template (cell diag(4.32890106, 4.46763875, 7.40896034) Å, atoms on Wyckoff
    1a, 1d, 1c, 1d) is rescaled by one uniform factor s = d_nn(el, scale) / d_tmpl, with
    d_tmpl = 2.4996554141501344 Å the template minimum-image NN (atoms 1–3 along z),
    atoms scaled with the cell.  pbc True, no rattle.  Ar: s = 1.48795776; Si: 0.94063324.
    σ_xy is the improper (parity) channel, σ_xz and σ_yz the proper controls.
    """
    from ase import Atoms

    el = _element(el)
    atoms = Atoms(f"{el}4", positions=_P2MM_POSITIONS.copy(), cell=_P2MM_CELL.copy(), pbc=True)
    dists = atoms.get_all_distances(mic=True)
    d_template = float(dists[np.triu_indices(len(atoms), 1)].min())
    s = d_nn(el, scale) / d_template
    atoms.set_cell(np.array(atoms.get_cell()) * s, scale_atoms=True)
    return atoms


#: Alias spelled as in the reference (``p2mm_crystal``).
p2mm_atoms = pmm2_atoms


# ----------------------------------------------------------------------------- Structure versions
def cluster(el: str | int, dtype: Any = None, n_atoms: int = 13, scale: float = 1.0) -> Structure:
    """:func:`cluster_atoms` as a :class:`~jaxcert.Structure` (pbc False, vacuum box as cell)."""
    return _to_structure(cluster_atoms(el, n_atoms=n_atoms, scale=scale), dtype)


def trimer(el: str | int, dtype: Any = None, scale: float = 1.0) -> Structure:
    """:func:`trimer_atoms` as a Structure; the mirror swap is :data:`MIRROR_SWAP` = (0, 2)."""
    return _to_structure(trimer_atoms(el, scale=scale), dtype)


def bulk(el: str | int, dtype: Any = None, repeat: int = 1, scale: float = 1.0) -> Structure:
    """:func:`bulk_atoms` as a Structure (pbc True)."""
    return _to_structure(bulk_atoms(el, repeat=repeat, scale=scale), dtype)


def pmm2(el: str | int, dtype: Any = None, scale: float = 1.0) -> Structure:
    """:func:`pmm2_atoms` as a Structure (pbc True)."""
    return _to_structure(pmm2_atoms(el, scale=scale), dtype)


p2mm = pmm2

_ATOMS_BUILDERS = {"cluster": cluster_atoms, "trimer": trimer_atoms, "bulk": bulk_atoms, "p2mm": pmm2_atoms}


def _canonical_kind(kind: str) -> str:
    try:
        return _KIND_ALIASES[str(kind).lower()]
    except KeyError:
        raise InputError(f"unknown substrate kind {kind!r}; expected one of {', '.join(_KIND_ALIASES)}") from None


# ----------------------------------------------------------------------------- bonds (§2.6)
def closest_pair(atoms_or_structure: Any) -> tuple[int, int]:
    """Default bond (i, j) of conservativeness and smoothness, docs/probes.md §2.6.

    The first pair (i < j) in lexicographic double-loop order with the strictly smallest
    plain (non-minimum-image) distance ``‖r_i − r_j‖``.  The second index j is the atom
    that the probes displace along (r_j − r_i)/|r_j − r_i|.  Accepts an ``ase.Atoms`` or
    an unbatched :class:`~jaxcert.Structure` (padding atoms are skipped; indices refer to
    the Structure's own atom slots).  Distances are evaluated in float64.
    """
    if isinstance(atoms_or_structure, Structure):
        s = atoms_or_structure
        if s.positions.ndim != 2:
            raise InputError("closest_pair takes an unbatched Structure; use bonds() for a batch")
        idx = np.flatnonzero(np.asarray(s.mask))
        pos = np.asarray(s.positions, np.float64)[idx]
    else:
        pos = np.asarray(atoms_or_structure.get_positions(), np.float64)
        idx = np.arange(len(pos))
    n = len(pos)
    if n < 2:
        raise InputError("need at least 2 atoms to pick a bond")
    best, best_d = (0, 1), np.inf
    for i in range(n):
        for j in range(i + 1, n):
            d = np.linalg.norm(pos[i] - pos[j])
            if d < best_d:
                best_d, best = d, (i, j)
    return int(idx[best[0]]), int(idx[best[1]])


def bonds(elements: Sequence[str | int], kind: str = "cluster", **kw: Any) -> np.ndarray:
    """Closest pair (§2.6) of each element's substrate, int32 array (n_el, 2).

    Row k is the default bond of ``elements[k]``; column 1 is the displaced atom.  The
    default ``kind="cluster"`` is the substrate of conservativeness and smoothness;
    ``kw`` are passed to the builder.
    """
    build = _ATOMS_BUILDERS[_canonical_kind(kind)]
    return np.array([closest_pair(build(el, **kw)) for el in elements], dtype=np.int32).reshape(-1, 2)


# ----------------------------------------------------------------------------- make_substrate (§2.6)
def _is_element(spec: Any) -> bool:
    from ase.data import atomic_numbers

    return isinstance(spec, str) and atomic_numbers.get(spec, 0) > 0


def make_substrate(spec: Any, kind: str) -> Any:
    """Resolve a substrate spec for a probe's kind, docs/probes.md §2.6; returns ``ase.Atoms``.

    * an ``ase.Atoms`` is returned as it is (not copied);
    * a one-element list or tuple is unwrapped (``["Si"]`` is Si); a longer one raises
      ``ValueError`` (the builders are single-species);
    * a str or PathLike that is not an element symbol must be an existing file, read with
      ``ase.io.read`` (last frame; parse errors are ASE's own), else ``ValueError``; a bare
      symbol always means the element, even when a file of that name exists;
    * an element symbol or atomic number dispatches by ``kind``: "cluster", "trimer",
      "bulk", "p2mm" (alias "pmm2").  An unknown kind raises ``ValueError`` (the reference
      silently builds a cluster).
    """
    from ase import Atoms

    if isinstance(spec, Atoms):
        return spec
    if isinstance(spec, (list, tuple)):
        if len(spec) != 1:
            raise InputError(f"substrate spec {spec!r}: a list or tuple must hold exactly one element or file")
        spec = spec[0]
        if isinstance(spec, Atoms):
            return spec
    if isinstance(spec, (str, os.PathLike)) and not _is_element(spec):
        if not os.path.isfile(spec):
            raise InputError(
                f"{os.fspath(spec)!r} is neither an element symbol nor a structure file (no such file)"
            )
        from ase.io import read

        return read(spec)
    return _ATOMS_BUILDERS[_canonical_kind(kind)](_element(spec))


def make_structure(spec: Any, kind: str, dtype: Any = None) -> Structure:
    """:func:`make_substrate` as a :class:`~jaxcert.Structure`; a Structure is returned as it is."""
    if isinstance(spec, Structure):
        return spec
    return _to_structure(make_substrate(spec, kind), dtype)


# ----------------------------------------------------------------------------- batching
@stored  # a warm process reads the batch instead of building it (jaxcert.core.cache.stored)
def stacked(kind: str, elements: Sequence[str | int], dtype: Any = None, **kw: Any) -> tuple[Structure, list[str]]:
    """One substrate kind for many elements as one batched Structure (leading axis = element).

    cluster (13 atoms), trimer (3) and p2mm (4) have one size for every element; the
    primitive bulk cells have 1 or 2 atoms (more with ``repeat``) and are padded by
    :func:`jaxcert.stack` with inert, masked atoms.  ``kw`` go to the builder (e.g.
    ``scale``, ``repeat``).  Returns ``(batch, symbols)`` with ``symbols[k]`` the element
    of batch row k.
    """
    kind = _canonical_kind(kind)
    symbols = [_element(el) for el in elements]
    if not symbols:
        raise InputError("stacked needs at least one element")
    build = _ATOMS_BUILDERS[kind]
    structures = [_to_structure(build(el, **kw), dtype) for el in symbols]
    return stack(structures), symbols


# ----------------------------------------------------------------------------- λ benchmark (seed 002)
def lambda_atoms() -> dict[str, Any]:
    """The ten structures of the seed-002 λ = ‖J_anti‖/‖J‖ benchmark as ``ase.Atoms``.

    * ``H2O, CH4, NH3, C2H4, C2H2, SO2, CH3OH, C6H6``: ``ase.build.molecule(name)`` (ASE's
      G2 geometries), centred in an orthorhombic box with 8 Å vacuum on each side;
      pbc stays False, so the box is only a cell for tools that need one.
    * ``diamond``: cubic diamond carbon, ``ase.build.bulk("C", "diamond", cubic=True)``,
      a = 3.57 Å, 8 atoms, pbc True.
    * ``graphene``: ``ase.build.graphene(vacuum=8.0)``, the 2-atom hexagonal cell with
      a = 2.46 Å, pbc (True, True, False).  Without ``vacuum`` ASE 3.29 returns a zero
      third lattice vector (singular cell); with it c = 16 Å along z and the sheet sits at
      z = 8 Å.
    """
    from ase.build import bulk as ase_bulk
    from ase.build import graphene, molecule

    out: dict[str, Any] = {}
    for name in LAMBDA_MOLECULES:
        atoms = molecule(name)
        atoms.center(vacuum=VACUUM)
        atoms.pbc = False
        out[name] = atoms
    out["diamond"] = ase_bulk("C", "diamond", cubic=True)
    sheet = graphene(vacuum=VACUUM)
    sheet.pbc = (True, True, False)
    out["graphene"] = sheet
    return out


def lambda_structures(dtype: Any = None) -> dict[str, Structure]:
    """:func:`lambda_atoms` as validated :class:`~jaxcert.Structure` objects (same keys, same order)."""
    return {name: _to_structure(atoms, dtype) for name, atoms in lambda_atoms().items()}


# ----------------------------------------------------------------------------- inspection
def write_substrates(element: str | int, out_dir: str | os.PathLike) -> list[Path]:
    """Write the cluster, trimer, bulk and p2mm of ``element`` as extxyz files for inspection.

    Files ``{el}_cluster.extxyz``, ``{el}_trimer.extxyz``, ``{el}_bulk.extxyz`` and
    ``{el}_p2mm.extxyz`` in ``out_dir`` (created if missing).  Returns their paths in that
    order.  Used by ``jaxcert substrates --element Si --out dir/``.
    """
    import ase.io

    el = _element(element)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in KINDS:
        atoms = _ATOMS_BUILDERS[kind](el)
        atoms.info["substrate"] = kind
        atoms.info["element"] = el
        path = out / f"{el}_{kind}.extxyz"
        text = io.StringIO()
        ase.io.write(text, atoms, format="extxyz")
        atomic_write(path, text.getvalue())  # atomically, never through a link (jaxcert.core.files)
        paths.append(path)
    return paths
