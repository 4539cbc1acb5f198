r"""Outcome metrics of docs/attacks.md §3, on the host (numpy, matscipy, ASE, spglib).

Stages: the **immediate** stage compares R_adv with R_ref, the **post-relaxation**
stage compares R_fin with R_ref.  Every function takes the reference first.
Structures are ``ase.Atoms`` (or :class:`~jaxcert.Structure`, converted with padding
dropped); both stages share the cell (attacks and relaxations never change it).

Continuous metrics
------------------
* **Displacement** d_i = ‖mic(r_i,stage − r_i,ref)‖₂ (Å) with the minimum image
  (ASE ``find_mic`` on the Minkowski-reduced cell, exact for any skew), so a lattice translation of an atom is not a
  displacement.  Also the L∞ coordinate displacement max_ik |mic(Δr)_ik| (the
  quantity the attack bounds by ε), and the reference's raw unwrapped versions
  (``*_raw``, no minimum image; docs/attacks.md §3 notes the reference is inconsistent).
* **ΔF** ΔF_i = ‖F_i,stage − F_i,ref‖₂ (eV/Å): median, mean, max over atoms.
* **Force angle** θ_i = arccos(clip(F̂_ref·F̂_stage, −1, 1)) in degrees.  Reference
  version: atoms with ‖F_ref‖‖F_stage‖ ≤ 1e-12 dropped, median.  Because F_ref is a
  residual force (‖F_ref‖ < fmax) whose direction is noise, the proposed version
  ``force_angle_median_robust`` also drops atoms with ‖F_ref‖ < fmax (NaN when none
  remain; docs/attacks.md §3, proposed).
* **Energy**: E_stage, ΔE = E_stage − E_ref (eV) and ΔE/N (eV/atom).

Discrete metrics
----------------
* **Bonds** (first coordination shell, :func:`bonds`): per-atom shell radii from the reference's first gap
  in its neighbour distances (ratio > 1.1, at most 1.3 × the nearest distance), applied to both structures;
  bonds broken, formed and their Jaccard distance (docs/attacks.md §3: why not covalent radii).
* **Neighbour edges** (the reference implementation's graph): i ≠ j bonded when some periodic image has
  d_ij < r_cov,i + r_cov,j (ASE ``natural_cutoffs``, Cordero 2008 covalent radii,
  multiplier 1); all images of a pair collapse into one unordered index edge.
  Counts before/after/added/removed, change = added + removed, the **Jaccard
  distance** d_J = 1 − |E_ref ∩ E_stage| / |E_ref ∪ E_stage| (0 when both are empty),
  and the **coordination change** Δz_i = |z_i,stage − z_i,ref| with z_i the number of
  distinct neighbours (mean and max).  Edge sets are sorted integer keys i·N + j, compared
  with ``np.intersect1d``; z_i by ``np.bincount``.
* **RDF L1** d = Σ_k |g_stage(r_k) − g_ref(r_k)| Δr (Å), r_max = 6 Å, 60 bins, with
  ASE's total g(r): ordered pair counts in bin k = ⌈d/Δr⌉ over
  N ρ 4πΔr (r_k² + Δr²/12), r_k = (k − ½)Δr.  The reference repeats the cell until
  every plane spacing is ≥ 2 r_max and calls ``ase.geometry.rdf.get_rdf``; per-atom
  neighbour counts are the same in the repeated and the original cell, so counting
  all periodic images of the original cell gives the same g(r) without the
  repeat (tested against ``get_rdf``).  Method tag ``ase_total_rdf_l1_v1``.

  Both neighbour searches use matscipy's C ``neighbour_list`` (ASE's numpy
  ``primitive_neighbor_list`` only where matscipy cannot run: a singular cell); same pairs,
  20–600× faster (``benchmarks/metrics.py``).
* **Symmetry** (spglib ``get_symmetry_dataset`` on the wrapped cell, symprec ∈
  {1e-2, 1e-3, 1e-4}; symprecs where spglib fails on either structure are skipped):

  - space-group change: fraction of symprecs where the space-group numbers differ;
  - operation retention, reference version: median of min(n_ops,stage, n_ops,ref)/n_ops,ref
    (a count ratio, only an upper bound);
  - operation retention, documented version (``_doc``): median of |S_ref ∩ S_stage|/|S_ref|,
    S the operation sets of the two spglib datasets at that symprec, compared as sets: a
    reference operation (W, w) is kept when the stage's set has (W, w′) with the same integer
    rotation and ‖mic((w − w′)h)‖ ≤ symprec Å, i.e. when it maps the stage onto itself up to
    spglib's tolerance (:func:`_ops_retained`: sorted integer keys and ``searchsorted``, no
    per-operation loop; equal to the per-operation test on the tests' cases, which place
    atoms either on or well off every symmetry position);
  - unique-site change: median of n_u,stage − n_u,ref (signed, reference) and of its
    absolute value (``_doc``), n_u = number of distinct ``equivalent_atoms``.

  spglib searches a low-symmetry supercell in O(|W| N²) (36 s for 4096 Si atoms in P1), so
  a structure is first screened (:func:`_screen_p1`): when no candidate operation maps it
  onto itself within 2 × symprec it is P1 and gets spglib's P1 dataset (the identity, every
  atom its own orbit) without the call; a P1 proof at a looser symprec carries over to the
  tighter ones.  Anything else goes to spglib; a sample of candidates that maps a spread of
  atoms sends a symmetric structure there without the full screen.

Cost per structure (N atoms, K = n_ops): displacement, ΔF, angles O(N); covalent graph and RDF
O(N) at fixed density (cell-list pairs within the cutoff, then ``np.unique``/``np.bincount``);
operation-set comparison O(K log K); the P1 screen O(|W| N log N).  spglib's dataset of a
symmetric supercell is O(N²) by definition: K grows as N (every pure translation is an
operation) and each operation is checked on every atom (Si, 4096 atoms, 98,304 operations:
≈ 1–2 s per symprec; 8000 atoms: ≈ 6 s).  No Python loop runs over atoms, pairs or operations.

Per-structure results (edge keys, RDF counts, spglib datasets) are memoised by content
(:func:`clear_cache`), so a reference shared by many runs is analysed once.

Across runs
-----------
* **float32/float64 agreement** (:func:`dtype_agreement` on rows matched by :func:`run_key`,
  :func:`grid_agreement` on two grids): squared Pearson r², max/median |Δ|, median relative
  difference, agreement of discrete verdicts, and the fraction of attack sign components that agree.
* **Cross-seed spread** (:func:`seed_spread` per structure, :func:`seed_bands` as the
  reference's median-over-materials-then-quartiles-over-seeds band).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.attacks.attacks import grad_tolerance

__all__ = [
    "SYMPRECS", "RDF_METHOD", "min_image", "displacement", "delta_force", "force_angle", "energy",
    "edges", "topology", "rdf", "rdf_l1", "symmetry_data", "symmetry", "compare", "run_metrics", "run_warnings",
    "nan_reason", "clear_cache",
    "AGREEMENT_METRICS", "VERDICTS", "SPREAD_METRICS", "value", "run_key", "dtype_agreement", "grid_agreement",
    "seed_spread", "seed_bands",
]

SYMPRECS = (1e-2, 1e-3, 1e-4)
RDF_METHOD = "ase_total_rdf_l1_v1"
_ANGLE_FLOOR = 1e-12


def _atoms(x: Any):
    """ase.Atoms from Atoms or an unbatched Structure (padding dropped)."""
    if hasattr(x, "to_ase"):
        return x.to_ase()
    return x


def _finite(*atoms: Any) -> bool:
    """Every position and cell entry finite: only then may a structure reach ASE's neighbour list or spglib (native
    code that can crash on NaN; docs/attacks.md §8).  A model that returns NaN makes the relaxed positions NaN."""
    return all(np.isfinite(a.get_positions()).all() and np.isfinite(a.get_cell().array).all() for a in atoms)


# ------------------------------------------------------------ continuous metrics
def min_image(dR: np.ndarray, cell: np.ndarray, pbc: Sequence[bool]) -> np.ndarray:
    """Shortest periodic image of each displacement vector (…, 3) in Å: ASE ``find_mic`` (Minkowski-reduced
    cell, exact for any skew)."""
    from ase.geometry import find_mic

    dR = np.asarray(dR, np.float64)
    if not np.asarray(pbc, bool).any():
        return dR.copy()
    v, _ = find_mic(dR.reshape(-1, 3), np.asarray(cell, np.float64), pbc)
    return v.reshape(dR.shape)


def displacement(ref: Any, stage: Any) -> dict[str, float]:
    """Per-atom displacement statistics (Å), minimum image and raw (see module docstring)."""
    a, b = _atoms(ref), _atoms(stage)
    raw = b.get_positions() - a.get_positions()
    mic = min_image(raw, a.get_cell().array, a.get_pbc()) if _finite(a, b) else raw
    d = np.linalg.norm(mic, axis=1)
    d_raw = np.linalg.norm(raw, axis=1)
    return {
        "median_displacement": float(np.median(d)),
        "mean_displacement": float(np.mean(d)),
        "max_displacement": float(np.max(d)),
        "linf_displacement": float(np.max(np.abs(mic))),
        "median_displacement_raw": float(np.median(d_raw)),
        "max_displacement_raw": float(np.max(d_raw)),
        "linf_displacement_raw": float(np.max(np.abs(raw))),
    }


def delta_force(F_ref: Any, F_stage: Any) -> dict[str, float]:
    """ΔF_i = ‖F_stage,i − F_ref,i‖ (eV/Å): median, mean, max."""
    d = np.linalg.norm(np.asarray(F_stage, np.float64) - np.asarray(F_ref, np.float64), axis=1)
    return {"median_delta_force": float(np.median(d)), "mean_delta_force": float(np.mean(d)),
            "max_delta_force": float(np.max(d))}


def force_angle(F_ref: Any, F_stage: Any, fmax: float = 0.01) -> dict[str, float]:
    """Median force angle (degrees): reference version and the proposed ‖F_ref‖ ≥ fmax version."""
    A = np.asarray(F_ref, np.float64)
    B = np.asarray(F_stage, np.float64)
    na, nb = np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=1)
    prod = na * nb
    keep = prod > _ANGLE_FLOOR
    cos = np.sum(A * B, axis=1) / np.where(keep, prod, 1.0)
    theta = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    robust = keep & (na >= fmax)
    return {
        "force_angle_median": float(np.median(theta[keep])) if keep.any() else math.nan,
        "force_angle_median_robust": float(np.median(theta[robust])) if robust.any() else math.nan,
        "force_angle_atoms_used": int(keep.sum()),
        "force_angle_atoms_used_robust": int(robust.sum()),
    }


def energy(E_ref: float, E_stage: float, n_atoms: int) -> dict[str, float]:
    """E_stage, ΔE = E_stage − E_ref (eV) and ΔE per atom (eV/atom)."""
    dE = float(E_stage) - float(E_ref)
    return {"energy": float(E_stage), "delta_energy": dE, "delta_energy_per_atom": dE / n_atoms}


# -------------------------------------------------------------- per-structure cache
_CACHE: OrderedDict[tuple, Any] = OrderedDict()
_CACHE_SIZE = 32
_CACHE_LOCK = threading.Lock()


def _digest(atoms) -> bytes:
    """Content hash of what the discrete metrics read: cell, pbc, atomic numbers and positions."""
    h = hashlib.blake2b(digest_size=20)
    for x in (np.asarray(atoms.get_cell().array, np.float64), np.asarray(atoms.get_pbc(), bool),
              np.asarray(atoms.get_atomic_numbers(), np.int64), np.asarray(atoms.get_positions(), np.float64)):
        h.update(str(x.shape).encode())
        h.update(np.ascontiguousarray(x).tobytes())
    return h.digest()


def _cache_get(key: tuple, default: Any = None) -> Any:
    with _CACHE_LOCK:
        if key not in _CACHE:
            return default
        _CACHE.move_to_end(key)
        return _CACHE[key]


def _cache_put(key: tuple, val: Any) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = val
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def _cached(key: tuple, compute):
    """LRU memo of per-structure results keyed on content (:func:`_digest`).  Every run of a grid compares its two
    stages with the same reference, whose edges, RDF counts and spglib datasets are then computed once."""
    missing = object()
    val = _cache_get(key, missing)
    if val is missing:
        val = compute()
        _cache_put(key, val)
    return val


def clear_cache() -> None:
    """Forget the memoised per-structure results (benchmarks time a first run with it)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _readonly(x: np.ndarray) -> np.ndarray:
    x.setflags(write=False)
    return x


# -------------------------------------------------------------- neighbour lists
def _pairs(atoms, quantities: str, cutoff: Any, pbc: Any = None) -> tuple[np.ndarray, ...]:
    """Neighbour list ``quantities`` ("i", "j", "d", "D") within ``cutoff`` (Å: a float, or per-atom radii whose sum
    is the pair cutoff): pairs with d < cutoff over every periodic image on the periodic axes (``atoms.pbc`` unless
    ``pbc`` is given), both orders.  matscipy's C neighbour list; ASE's numpy ``primitive_neighbor_list`` where
    matscipy cannot run (a singular cell, e.g. a molecule given without one).  The same pairs (tested)."""
    cell = np.asarray(atoms.get_cell().array, np.float64)
    pos = np.asarray(atoms.get_positions(), np.float64)
    pbc = np.broadcast_to(np.asarray(atoms.get_pbc() if pbc is None else pbc, bool), (3,)).copy()
    cut = float(cutoff) if np.ndim(cutoff) == 0 else np.asarray(cutoff, np.float64)
    if abs(np.linalg.det(cell)) > 1e-10:
        from matscipy.neighbours import neighbour_list

        try:
            out = neighbour_list(quantities, positions=pos, cell=cell, pbc=pbc, cutoff=cut,
                                 numbers=np.asarray(atoms.get_atomic_numbers(), np.int32))
            return out if isinstance(out, tuple) else (out,)
        except Exception:  # noqa: BLE001 - fall through to ASE, whose failure the callers handle
            pass
    from ase.neighborlist import primitive_neighbor_list

    out = primitive_neighbor_list(quantities, pbc, cell, pos, cut, numbers=atoms.get_atomic_numbers())
    return out if isinstance(out, tuple) else (out,)


# -------------------------------------------------------------- topology
def _edge_keys(atoms) -> np.ndarray:
    """Sorted unique edge keys i·n + j (i < j) of the covalent-radius graph (read-only, memoised)."""
    def compute():
        from ase.data import covalent_radii

        n = len(atoms)
        try:  # ASE natural_cutoffs(atoms, mult=1): covalent_radii[Z] (its per-atom Python loop, vectorised)
            i, j = _pairs(atoms, "ij", np.asarray(covalent_radii[atoms.get_atomic_numbers()], np.float64))
        except Exception:  # noqa: BLE001 - the reference takes an empty edge set when the neighbour list fails
            return _readonly(np.empty(0, np.int64))
        keep = i != j
        i, j = i[keep].astype(np.int64), j[keep].astype(np.int64)
        return _readonly(np.unique(np.minimum(i, j) * n + np.maximum(i, j)))

    return _cached(("edges", _digest(atoms)), compute)


def edges(atoms: Any) -> set[tuple[int, int]]:
    """Unordered index edges {i, j}, i ≠ j, bonded by covalent radii (ASE natural_cutoffs, mult 1)."""
    atoms = _atoms(atoms)
    k = _edge_keys(atoms)
    n = len(atoms)
    return set(zip((k // n).tolist(), (k % n).tolist(), strict=True))


def _coordination(keys: np.ndarray, n: int) -> np.ndarray:
    """z_i: number of distinct neighbours of each atom in the edge set (keys i·n + j)."""
    return np.bincount(np.concatenate([keys // n, keys % n]), minlength=n)


def topology(ref: Any, stage: Any) -> dict[str, float]:
    """Edge counts, Jaccard distance and coordination change (module docstring)."""
    a, b = _atoms(ref), _atoms(stage)
    if not _finite(a, b):
        nan = math.nan
        return {"edges_before": nan, "edges_after": nan, "edges_added": nan, "edges_removed": nan,
                "edge_change_count": nan, "jaccard_distance": nan, "coordination_change_mean": nan,
                "coordination_change_max": nan}
    Ea, Eb = _edge_keys(a), _edge_keys(b)
    common = int(np.intersect1d(Ea, Eb, assume_unique=True).size)
    union = len(Ea) + len(Eb) - common
    jac = 0.0 if not union else 1.0 - common / union
    dz = np.abs(_coordination(Eb, len(b)) - _coordination(Ea, len(a)))
    added, removed = len(Eb) - common, len(Ea) - common
    return {
        "edges_before": len(Ea), "edges_after": len(Eb), "edges_added": added, "edges_removed": removed,
        "edge_change_count": added + removed, "jaccard_distance": jac,
        "coordination_change_mean": float(dz.mean()), "coordination_change_max": int(dz.max()),
    }


#: first-shell bonds: a gap between successive neighbour distances of more than this ratio ends an atom's shell
SHELL_GAP = 1.1
#: ... and the shell never reaches beyond this multiple of the atom's nearest-neighbour distance
SHELL_CAP = 1.3


def shell_cutoffs(atoms: Any, gap: float = SHELL_GAP, cap: float = SHELL_CAP) -> np.ndarray:
    """Per-atom first-coordination-shell radius (Å) of a reference structure (docs/attacks.md §3, "Bonds").

    For atom i with neighbour distances d₁ ≤ d₂ ≤ … (all periodic images), the shell ends at the first k with
    d_{k+1}/d_k > ``gap``, and the cutoff is the geometric midpoint √(d_k d_{k+1}); when no such gap occurs
    below ``cap``·d₁ the cutoff is ``cap``·d₁.  NaN for an atom without neighbours within 6 Å or 2× its
    covalent diameter.  This finds the bonds of diamond Si (4), fcc Cu (12), rocksalt NaCl (6), bcc Fe (8) and
    2H-MoS₂ (Mo 6, S 3), where the sum of covalent radii misses Si–Si (2.35 Å > 2.22 Å)."""
    from ase.data import covalent_radii

    a = _atoms(atoms)
    n = len(a)
    r_search = max(6.0, 2.0 * 2.0 * float(np.max(covalent_radii[a.get_atomic_numbers()]))) if n else 6.0
    i, d = _pairs(a, "id", r_search)
    keep = d > 1e-8
    i, d = i[keep].astype(np.int64), d[keep]
    out = np.full(n, np.nan)
    if not len(d):
        return out
    order = np.lexsort((d, i))
    i, d = i[order], d[order]
    start = np.searchsorted(i, np.arange(n))
    first = np.full(n, np.nan)
    has = np.bincount(i, minlength=n) > 0
    first[has] = d[start[has]]
    nxt = np.r_[d[1:], np.inf]
    same = np.r_[i[1:] == i[:-1], False]
    within = d <= cap * first[i]
    ends = same & within & (nxt / d > gap)  # a gap after this distance, inside the atom's cap
    cut = np.where(ends, np.sqrt(d * nxt), np.inf)
    best = np.full(n, np.inf)
    np.minimum.at(best, i, cut)
    out[has] = np.minimum(best[has], cap * first[has])
    return out


def bonds(ref: Any, stage: Any) -> dict[str, float]:
    """First-shell bonds before and after (docs/attacks.md §3, "Bonds"): i–j is bonded when d_ij is below
    max(c_i, c_j), the two atoms' first-shell radii of the *reference* (:func:`shell_cutoffs`), in both
    structures; so a bond breaks when its length grows past the gap that separated it from the next shell.
    Counts of bonds before/after, broken and formed, and their Jaccard distance (0 when both are empty)."""
    a, b = _atoms(ref), _atoms(stage)
    nan = math.nan
    empty = {"bonds_before": nan, "bonds_after": nan, "bonds_broken": nan, "bonds_formed": nan,
             "bond_jaccard_distance": nan}
    if not _finite(a, b) or len(a) != len(b):
        return empty
    c = shell_cutoffs(a)
    if not np.isfinite(c).any():
        return {**empty, "bonds_before": 0, "bonds_after": 0, "bonds_broken": 0, "bonds_formed": 0,
                "bond_jaccard_distance": 0.0}
    c = np.where(np.isfinite(c), c, 0.0)

    def keys(x) -> np.ndarray:
        """One row (i, j, S) per bond, i ≤ j, S the periodic image shift of j (each bond once, images kept)."""
        i, j, d, S = _pairs(x, "ijdS", float(c.max()) * 1.0000001)
        ok = ((i != j) | (np.abs(S).sum(axis=1) > 0)) & (d < np.maximum(c[i], c[j]))
        i, j, S = i[ok].astype(np.int64), j[ok].astype(np.int64), S[ok].astype(np.int64)
        # (j, i, −S) is the same bond as (i, j, S): keep i < j, and for i = j the shift whose first nonzero is > 0
        first = np.take_along_axis(S, np.argmax(S != 0, axis=1)[:, None], axis=1)[:, 0]  # first nonzero component
        flip = (i > j) | ((i == j) & (first < 0))
        rows = np.column_stack([np.where(flip, j, i), np.where(flip, i, j), np.where(flip[:, None], -S, S)])
        rows = np.unique(rows, axis=0)
        return np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * 5))).ravel()

    # the stage's atoms at their images nearest the reference's, so an atom moved across a cell face keeps the
    # image labels (S) of its bonds
    b = b.copy()
    pbc = np.asarray(a.get_pbc(), bool)
    b.set_positions(a.get_positions() + min_image(b.get_positions() - a.get_positions(),
                                                  np.asarray(a.get_cell().array, np.float64), pbc))
    Ka, Kb = keys(a), keys(b)
    common = int(np.intersect1d(Ka, Kb).size)
    union = len(Ka) + len(Kb) - common
    return {"bonds_before": len(Ka), "bonds_after": len(Kb), "bonds_broken": len(Ka) - common,
            "bonds_formed": len(Kb) - common, "bond_jaccard_distance": 0.0 if not union else 1.0 - common / union}


def _rdf_counts(atoms, r_max: float, n_bins: int) -> np.ndarray:
    """Ordered pair counts in bins k = ⌈d/Δr⌉, k = 1…n_bins, over every periodic image (read-only, memoised)."""
    def compute():
        (d,) = _pairs(atoms, "d", float(r_max))
        d = d[d < r_max]
        k = np.ceil(d / (r_max / n_bins)).astype(np.int64)
        return _readonly(np.bincount(k, minlength=n_bins + 1)[1 : n_bins + 1])

    return _cached(("rdf", float(r_max), int(n_bins), _digest(atoms)), compute)


def rdf(atoms: Any, r_max: float = 6.0, n_bins: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """ASE's total g(r) (bin centres r_k in Å, g_k), counting every periodic image (module docstring)."""
    atoms = _atoms(atoms)
    n = len(atoms)
    dr = r_max / n_bins
    vol = abs(np.linalg.det(atoms.get_cell().array))
    r = (np.arange(1, n_bins + 1) - 0.5) * dr
    if vol < 1e-10 or not _finite(atoms):
        return r, np.full(n_bins, np.nan)
    counts = _rdf_counts(atoms, r_max, n_bins)
    rho = n / vol
    g = counts / (n * rho * 4.0 * np.pi * dr * (r * r + dr * dr / 12.0))
    return r, g


def rdf_l1(ref: Any, stage: Any, r_max: float = 6.0, n_bins: int = 60) -> dict[str, Any]:
    """d_RDF = Σ_k |g_stage − g_ref| Δr (Å)."""
    _, ga = rdf(ref, r_max, n_bins)
    _, gb = rdf(stage, r_max, n_bins)
    return {"rdf_l1": float(np.sum(np.abs(gb - ga)) * (r_max / n_bins)), "rdf_method": RDF_METHOD}


# -------------------------------------------------------------- symmetry
#: Tolerance factor of the P1 pre-screen: a structure is declared P1 without spglib only when no candidate
#: operation maps it onto itself within SCREEN_MARGIN × symprec (spglib accepts an operation within symprec).
SCREEN_MARGIN = 2.0
#: Candidates of the screen's first probe and the atoms each must map: a structure where one of them survives is
#: handed to spglib at once (symmetric structures keep a large share of their candidates, so a sample finds one).
SCREEN_SAMPLE, SCREEN_PROBE_ATOMS = 32, 16


def _cell_tuple(atoms):
    frac = atoms.get_scaled_positions(wrap=True)
    return (atoms.get_cell().array, frac, atoms.get_atomic_numbers())


def _wrap01(f: np.ndarray) -> np.ndarray:
    """Fractional coordinates folded into [0, 1) (cKDTree's periodic box)."""
    f = np.mod(f, 1.0)
    f[f >= 1.0] = 0.0
    return f


def _ghost_tree(f: np.ndarray, r: float):
    """k-d tree of fractional points f ∈ [0, 1)³ plus their periodic copies within r of the unit cube (a query
    point in [0, 1)³ then finds every periodic image within r; faster than cKDTree's periodic box)."""
    from scipy.spatial import cKDTree

    lo, hi = f < r, f >= 1.0 - r
    edge = np.flatnonzero((lo | hi).any(axis=1))
    if not len(edge):
        return cKDTree(f)
    s = _SHIFTS[None]  # (1, 26, 3)
    ok = np.all(np.where(s > 0, lo[edge, None], True) & np.where(s < 0, hi[edge, None], True), axis=2)
    ghosts = (f[edge, None] + s)[ok]
    return cKDTree(np.concatenate([f, ghosts]))


_SHIFTS = np.array([s for s in itertools.product((-1, 0, 1), repeat=3) if any(s)], np.float64)


def _lattice_rotations(cell: np.ndarray, symprec: float) -> np.ndarray | None:
    """Rotations (input basis) of the lattice's point group at ``symprec``: spglib on a one-atom cell (memoised per
    cell; every rotation of a crystal without pure translations is one of them)."""
    import spglib

    def compute():
        try:
            sym = spglib.get_symmetry((cell, [[0.0, 0.0, 0.0]], [1]), symprec=symprec, angle_tolerance=-1)
        except Exception:  # noqa: BLE001
            return None
        return None if sym is None else _readonly(np.asarray(sym["rotations"], np.float64))

    h = hashlib.blake2b(np.ascontiguousarray(cell, np.float64).tobytes(), digest_size=20).digest()
    return _cached(("lattice", float(symprec), h), compute)


def _screen_p1(atoms, symprec: float) -> bool:
    """True when the structure provably has no symmetry operation but the identity at ``symprec``, so that
    spglib's dataset is P1 (number 1, the identity, every atom its own orbit); False means "ask spglib".

    spglib's candidate operations are (W, w) with W in the lattice's point group and w taking an anchor atom a₀ (of
    the rarest species) onto an atom j of its species; one is accepted when every atom has a same-species partner
    within symprec (minimum image).  Here every candidate but the identity is tested at once, at the looser
    tolerance τ = SCREEN_MARGIN × symprec (so the test only lets more candidates through):

    0. a fixed sample of SCREEN_SAMPLE candidates (half of them pure translations) against SCREEN_PROBE_ATOMS atoms
       spread over the cell: one that maps them all sends the structure to spglib at once (a symmetric structure
       keeps a large share of its candidates, so this spares it steps 1 and 2; "ask spglib" is always safe);
    1. against a₀'s nearest atom t, Δ = f_t − f_a₀ (one image): (W, j) survives only if j has a neighbour of t's
       species at the Cartesian vector (WΔ)h within τ, matched against the neighbour list;
    2. the survivors against a growing set of further atoms, each image W f + w looked up in a k-d tree of the
       fractional coordinates with their periodic copies near the cell faces (a fractional ball that contains the
       Cartesian τ-ball).

    A low-symmetry structure loses every candidate in step 1 or after a few atoms; a symmetric one keeps its
    operations and goes to spglib.  Also False for a singular cell or atoms within τ of each other (where spglib
    may fail).  Cost O(|W| N log N), against spglib's O(|W| N²) search of a low-symmetry supercell.
    """
    from scipy.spatial import cKDTree

    cell = np.asarray(atoms.get_cell().array, np.float64)
    n = len(atoms)
    if n < 2 or abs(np.linalg.det(cell)) < 1e-10:
        return False
    tol = SCREEN_MARGIN * symprec
    W = _lattice_rotations(cell, tol)
    if W is None:
        return False
    f = _wrap01(np.asarray(atoms.get_scaled_positions(wrap=False), np.float64))
    r_frac = tol / np.linalg.svd(cell, compute_uv=False).min() * (1.0 + 1e-9)
    if cKDTree(f, boxsize=1.0).query_pairs(r_frac, output_type="ndarray").size:
        return False  # two atoms within the tolerance (spglib may fail there): spglib decides
    Z = np.asarray(atoms.get_atomic_numbers())
    species, counts = np.unique(Z, return_counts=True)
    s0 = species[np.argmin(counts)]
    a0 = int(np.flatnonzero(Z == s0)[0])
    identity = np.all(np.abs(W - np.eye(3)) < 0.5, axis=(1, 2))
    trees = {z: _ghost_tree(f[Z == z], r_frac) for z in species}
    spread = np.argsort(np.arange(n) * 0.6180339887498949 % 1.0)  # atoms spread over the cell
    # step 0: a sample of candidates, half of them pure translations (the symmetry of a supercell)
    rng = np.random.default_rng(0)
    k_s = rng.integers(len(W), size=SCREEN_SAMPLE)
    k_s[: SCREEN_SAMPLE // 2] = int(np.flatnonzero(identity)[0])
    j_s = rng.choice(np.flatnonzero(Z == s0), size=SCREEN_SAMPLE)
    use = ~(identity[k_s] & (j_s == a0))
    k_s, j_s = k_s[use], j_s[use]
    w_s = f[j_s] - np.einsum("kij,j->ki", W[k_s], f[a0])
    if len(k_s) and _images_found(W[k_s], w_s, f, Z, spread[:SCREEN_PROBE_ATOMS], trees, r_frac).all(axis=1).any():
        return False  # a candidate maps a spread of atoms onto atoms: symmetric (or nearly so), spglib decides
    # step 1: the pair (a0, t)
    v = f - f[a0]
    v -= np.round(v)
    dist = np.linalg.norm(v @ cell, axis=1)
    dist[a0] = np.inf
    t = int(np.argmin(dist))
    u = (W @ v[t]) @ cell  # (|W|, 3) Cartesian images of Δ
    reach = float(np.linalg.norm(u, axis=1).max()) + tol
    try:
        i_nl, j_nl, D = _pairs(atoms, "ijD", max(reach, 1.0) * (1.0 + 1e-9), pbc=True)  # spglib: all periodic
    except Exception:  # noqa: BLE001
        return False
    sel = (Z[i_nl] == s0) & (Z[j_nl] == Z[t]) & (np.linalg.norm(D, axis=1) <= reach * (1.0 + 1e-9))
    i_nl, D = i_nl[sel].astype(np.int64), D[sel]
    cand = []
    for c in range(0, len(D), 1 << 15):  # (pairs, |W|) in chunks
        p_idx, k_idx = np.nonzero(np.linalg.norm(D[c:c + (1 << 15), None, :] - u[None], axis=-1) <= tol)
        cand.append(k_idx.astype(np.int64) * n + i_nl[c + p_idx])
    cand = np.unique(np.concatenate(cand)) if cand else np.empty(0, np.int64)
    k_idx, j = cand // n, cand % n
    keep = ~(identity[k_idx] & (j == a0))
    k_idx, j = k_idx[keep], j[keep]
    if not len(k_idx):
        return True
    w = f[j] - np.einsum("kij,j->ki", W[k_idx], f[a0])
    # step 2: further atoms in doubling batches, while the candidates keep dying
    rest = np.setdiff1d(np.arange(n), [a0, t])
    order = rest[np.argsort(np.arange(len(rest)) * 0.6180339887498949 % 1.0)]  # spread over the cell
    done, budget = 0, 16 * len(W) * n
    batch = int(np.clip(4096 // len(k_idx), 2, 256))
    while len(k_idx):
        atoms_t = order[done:done + batch]
        if not len(atoms_t):
            return False  # every atom passed: a symmetry operation within the tolerance
        ok = _images_found(W[k_idx], w, f, Z, atoms_t, trees, r_frac)
        keep = ok.all(axis=1)
        budget -= ok.size
        if (keep.all() and len(atoms_t) >= 2) or budget < 0:
            return False  # candidates that keep passing: symmetric (or nearly so), spglib decides
        k_idx, w = k_idx[keep], w[keep]
        done += len(atoms_t)
        batch = 2 * len(atoms_t)
    return True


def _images_found(W: np.ndarray, w: np.ndarray, f: np.ndarray, Z: np.ndarray, atoms_t: np.ndarray, trees: dict,
                  r_frac: float) -> np.ndarray:
    """(K, B) bool: the image W_k f_a + w_k of atom a (fractional, folded into [0, 1)) has an atom of a's species
    within the fractional radius ``r_frac`` (k-d trees of :func:`_ghost_tree` per species)."""
    img = _wrap01(np.einsum("kij,aj->kai", W, f[atoms_t]) + w[:, None, :])  # (K, B, 3)
    ok = np.empty(img.shape[:2], bool)
    for z in np.unique(Z[atoms_t]):
        cols = Z[atoms_t] == z
        d, _ = trees[z].query(img[:, cols].reshape(-1, 3), k=1, distance_upper_bound=r_frac)
        ok[:, cols] = np.isfinite(d).reshape(len(W), -1)
    return ok


def _rotation_set(W: np.ndarray) -> set[bytes]:
    return {w.tobytes() for w in np.rint(W).astype(np.int8)}


def _p1_implied(atoms, digest: bytes, symprec: float) -> bool:
    """P1 already proven at a looser symprec q ≥ symprec whose lattice rotations contain those at symprec: the
    screen at symprec tests a subset of the candidates at a smaller tolerance, so it would prove P1 again."""
    proven = [q for q in _cache_get(("p1", digest), ()) if q >= symprec]
    if not proven:
        return False
    cell = np.asarray(atoms.get_cell().array, np.float64)
    W = _lattice_rotations(cell, SCREEN_MARGIN * symprec)
    if W is None:
        return False
    need = _rotation_set(W)
    for q in proven:
        Wq = _lattice_rotations(cell, SCREEN_MARGIN * q)
        if Wq is not None and need <= _rotation_set(Wq):
            return True
    return False


def _dataset(atoms, symprec: float, screen: bool = True) -> dict[str, Any] | None:
    """Memoised :func:`symmetry_data` (read-only arrays).  ``screen=False`` skips the P1 screen (a speed hint for a
    structure expected to be symmetric; the result is the same)."""
    import spglib

    digest = _digest(atoms)

    def compute():
        if not _finite(atoms):
            return None
        if _p1_implied(atoms, digest, symprec) or (screen and _screen_p1(atoms, symprec)):
            _cache_put(("p1", digest), tuple(sorted({*_cache_get(("p1", digest), ()), float(symprec)})))
            return {"number": 1, "rotations": _readonly(np.eye(3, dtype=np.int32)[None]),
                    "translations": _readonly(np.zeros((1, 3))), "n_ops": 1, "n_unique": len(atoms)}
        try:
            ds = spglib.get_symmetry_dataset(_cell_tuple(atoms), symprec=symprec, angle_tolerance=-1)
        except Exception:  # noqa: BLE001
            return None
        if ds is None:
            return None
        return {"number": int(ds.number), "rotations": _readonly(np.asarray(ds.rotations)),
                "translations": _readonly(np.asarray(ds.translations)), "n_ops": len(ds.rotations),
                "n_unique": len(np.unique(ds.equivalent_atoms))}

    return _cached(("spglib", float(symprec), digest), compute)


def symmetry_data(atoms: Any, symprec: float) -> dict[str, Any] | None:
    """spglib dataset summary (number, rotations, translations, n_ops, n_unique) or None on failure.

    A structure that :func:`_screen_p1` proves to be P1 gets spglib's P1 answer without the call (the identity,
    translation 0, n_unique = N)."""
    ds = _dataset(_atoms(atoms), symprec)
    if ds is None:
        return None
    return {**ds, "rotations": ds["rotations"].copy(), "translations": ds["translations"].copy()}


def _ops_retained(da: dict[str, Any], db: dict[str, Any], cell: np.ndarray, tol: float) -> int:
    """|S_ref ∩ S_stage|: reference operations (W, w) for which the stage's dataset holds an operation (W, w′) with
    the same integer rotation and ‖mic((w − w′) h)‖ ≤ tol Å (translations compared modulo lattice vectors).

    As sets, in C (numpy): for K_ref·K_stage ≤ 2^18 (e.g. a P1 stage) every pair at once; otherwise each operation
    becomes an integer key (rotation id, translation bin per axis, bins of width ≥ 64 δ_k where δ_k = tol‖(h⁻¹)_{:,k}‖
    bounds |Δw_k| for a Cartesian |Δw h| ≤ tol), the stage's keys are sorted, and every reference operation looks up
    its own bin and, within δ_k of a bin edge, the neighbouring one (``searchsorted``); equal keys mean the same
    rotation, and the candidate pairs' translations are then checked in Cartesian.  O(K log K).  Rounding the
    fractional difference is the exact minimum image for tol below half the smallest plane spacing."""
    Ra = np.rint(np.asarray(da["rotations"])).astype(np.int64).reshape(-1, 9)
    Rb = np.rint(np.asarray(db["rotations"])).astype(np.int64).reshape(-1, 9)
    ta, tb = np.asarray(da["translations"], np.float64), np.asarray(db["translations"], np.float64)
    if not len(Ra) or not len(Rb):
        return 0
    cell = np.asarray(cell, np.float64)

    def close(df):
        return np.linalg.norm((df - np.round(df)) @ cell, axis=-1) <= tol

    if len(Ra) * len(Rb) <= 1 << 18:  # e.g. a P1 stage: every pair at once
        ok = np.all(Ra[:, None] == Rb[None], axis=2) & close(ta[:, None] - tb[None])
        return int(ok.any(axis=1).sum())
    R = np.concatenate([Ra, Rb])
    lo, base = int(R.min()), int(R.max() - R.min()) + 1
    if base ** 9 < 1 << 62:  # one integer per matrix
        code = (R - lo) @ (base ** np.arange(8, -1, -1, dtype=np.int64))
        ids = np.unique(code, return_inverse=True)[1].reshape(-1).astype(np.int64)
    else:
        ids = np.unique(R, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    ia, ib = ids[:len(Ra)], ids[len(Ra):]
    delta = tol * np.linalg.norm(np.linalg.inv(cell), axis=0) * (1.0 + 1e-9)
    n_ids = int(ids.max()) + 1
    M = np.clip(np.floor(1.0 / (64.0 * delta)), 1, 1 << 20).astype(np.int64)
    while n_ids * int(np.prod(M)) >= 1 << 62:  # keep the packed key in int64
        M = np.maximum(M // 2, 1)
    off = np.array([0.1234567, 0.2345678, 0.3456789])  # any offset: keeps the usual rational translations off edges

    def key(i, q):
        return ((i * M[0] + q[:, 0]) * M[1] + q[:, 1]) * M[2] + q[:, 2]

    kb = key(ib, np.floor(_wrap01(tb + off) * M).astype(np.int64) % M)
    order = np.argsort(kb, kind="stable")
    kb = kb[order]
    xa = _wrap01(ta + off) * M
    qa = np.floor(xa).astype(np.int64)
    r = xa - qa
    lo, hi = r < delta * M, 1.0 - r < delta * M  # within δ of the lower / upper edge of the bin
    edge = np.flatnonzero((lo | hi).any(axis=1))
    ref_idx, pos = [], []
    for s in itertools.product((-1, 0, 1), repeat=3):  # the bin, and its neighbours where an edge is near
        if any(s):
            s = np.asarray(s)
            use = edge[np.all(np.where(s < 0, lo[edge], True) & np.where(s > 0, hi[edge], True), axis=1)]
            if not len(use):
                continue
        else:
            use = np.arange(len(Ra))
        k = key(ia[use], (qa[use] + s) % M)
        left, right = np.searchsorted(kb, k, "left"), np.searchsorted(kb, k, "right")
        n = right - left
        ref_idx.append(np.repeat(use, n))
        pos.append(np.repeat(left - np.cumsum(n) + n, n) + np.arange(int(n.sum())))
    i = np.concatenate(ref_idx)
    j = order[np.concatenate(pos)]
    hit = np.zeros(len(Ra), bool)  # equal keys: the same rotation id and translation bin
    hit[i[close(ta[i] - tb[j])]] = True
    return int(hit.sum())


def _spread(a, b) -> float:
    """max_i ‖Δr_i − mean Δr‖ (Å), Δr the displacement rounded to the nearest image in fractional coordinates."""
    df = b.get_scaled_positions(wrap=False) - a.get_scaled_positions(wrap=False)
    d = (df - np.round(df)) @ np.asarray(a.get_cell().array, np.float64)
    return float(np.max(np.linalg.norm(d - d.mean(axis=0), axis=1))) if len(d) else 0.0


def symmetry(ref: Any, stage: Any, symprecs: Sequence[float] = SYMPRECS) -> dict[str, float]:
    """Space-group change, operation retention (count ratio and set based), unique-site change."""
    a, b = _atoms(ref), _atoms(stage)
    cell = np.asarray(b.get_cell().array, np.float64)
    changed, count_ratio, set_ratio, du = [], [], [], []
    # loosest symprec first (a P1 proof there carries over); a stage within symprec of a symmetric reference
    # (rigid shift removed) is likely symmetric too and goes straight to spglib
    shift = _spread(a, b) if _finite(a, b) and len(a) == len(b) else math.inf
    data = {}
    for p in sorted(set(symprecs), reverse=True):
        da = _dataset(a, p)
        data[p] = (da, _dataset(b, p, screen=not (da is not None and da["n_ops"] > 1 and shift <= p)))
    per: dict[str, float | None] = {}
    for p in symprecs:
        da, db = data[p]
        per[f"{p:g}"] = None
        if da is None or db is None:
            continue
        changed.append(float(da["number"] != db["number"]))
        count_ratio.append(min(db["n_ops"], da["n_ops"]) / da["n_ops"])
        set_ratio.append(_ops_retained(da, db, cell, p) / da["n_ops"])
        per[f"{p:g}"] = set_ratio[-1]
        du.append(db["n_unique"] - da["n_unique"])
    if not changed:
        nan = math.nan
        return {"space_group_change": nan, "symmetry_op_retention": nan, "symmetry_op_retention_doc": nan,
                "unique_site_change": nan, "unique_site_change_doc": nan, "symprecs_used": 0,
                "symmetry_op_retention_by_symprec": per}
    return {
        "space_group_change": float(np.mean(changed)),
        "symmetry_op_retention": float(np.median(count_ratio)),
        "symmetry_op_retention_doc": float(np.median(set_ratio)),
        "unique_site_change": float(np.median(du)),
        "unique_site_change_doc": float(np.median(np.abs(du))),
        "symprecs_used": len(changed),
        "symmetry_op_retention_by_symprec": per,  # the set-based retention at each symprec (None: spglib failed)
    }


# -------------------------------------------------------------- all together
def compare(ref: Any, stage: Any, F_ref: Any = None, F_stage: Any = None, E_ref: Any = None, E_stage: Any = None,
            fmax: float = 0.01, symprecs: Sequence[float] = SYMPRECS) -> dict[str, Any]:
    """Every §3 metric of ``stage`` against ``ref`` (force/energy metrics only when given)."""
    a, b = _atoms(ref), _atoms(stage)
    out: dict[str, Any] = {}
    out.update(displacement(a, b))
    if F_ref is not None and F_stage is not None:
        out.update(delta_force(F_ref, F_stage))
        out.update(force_angle(F_ref, F_stage, fmax))
    if E_ref is not None and E_stage is not None:
        out.update(energy(E_ref, E_stage, len(a)))
    out.update(topology(a, b))
    out.update(bonds(a, b))
    out.update(rdf_l1(a, b))
    out.update(symmetry(a, b, symprecs))
    return out


def _take(tree: Any, idx: tuple):
    import jax

    return jax.tree_util.tree_map(lambda x: np.asarray(x)[idx], tree)


def run_metrics(grid: Any, i_s: int, i_a: int, i_e: int, i_k: int) -> dict[str, Any]:
    """Row of one run of a :class:`~jaxcert.attacks.GridResult`: configuration, relaxation and both stages."""
    ref = _take(grid.reference, (i_s,))
    run = _take(grid.runs, (i_s, i_a, i_e, i_k))
    m = np.asarray(ref.structure.mask)
    spec = grid.attacks[i_a]
    cfg = grid.config
    a = ref.structure.to_ase()
    # ε% is relative to a lattice period, which only a periodic axis has: a molecule or cluster (no periodic axis)
    # gets null ε% (NaN here, null in JSON), a slab the smallest length among its periodic axes (docs/attacks.md §1.7)
    pbc = np.asarray(a.get_pbc(), bool)
    lengths = np.linalg.norm(a.get_cell().array, axis=1)
    L = float(np.min(lengths[pbc])) if pbc.any() else math.nan
    eps = float(run.epsilon)
    dtype = np.asarray(ref.structure.positions).dtype
    row: dict[str, Any] = {
        "structure": i_s, "formula": a.get_chemical_formula(), "n_atoms": len(a),
        "dtype": str(np.asarray(ref.structure.positions).dtype),
        "attack": spec.name, "attack_label": spec.label, "n_steps": spec.n_steps, "alpha_ratio": float(spec.alpha),
        "epsilon": float(grid.epsilons[i_e]), "epsilon_A": eps, "alpha_A": float(run.alpha),
        "epsilon_percent_min": 100.0 * eps / L if L > 0 else math.nan,
        "epsilon_percent_abc": [100.0 * eps / x if (p and x > 0) else math.nan for x, p in zip(lengths, pbc,
                                                                                                 strict=True)],
        "seed": int(grid.seeds[i_k]), "loss": cfg.loss, "optimizer": cfg.optimizer, "fmax": cfg.fmax,
        "max_steps": cfg.max_steps,
        "random_start": spec.start, "random_start_fraction": {"uniform": 1.0, "sign": spec.sign_start}.get(
            spec.start, 0.0),
        "small_grad_fraction": float(run.small_grad_fraction),
        "grad_max_reference": float(run.grad_max), "grad_tolerance": grad_tolerance(dtype),
        "steps_before": int(np.asarray(grid.ref_steps)[i_s]),
        "converged_before": bool(np.asarray(grid.ref_converged)[i_s]),
        "fmax_before": float(np.asarray(grid.ref_fmax)[i_s]),
        "steps_after": int(run.steps), "converged_after": bool(run.converged), "fmax_after": float(run.fmax),
        "reference_energy": float(ref.energy),
    }
    F_ref = np.asarray(ref.forces)[m]
    stages = {"immediate": run.adversarial, "post_relaxation": run.final}
    for name, st in stages.items():
        row[name] = compare(a, st.structure.to_ase(), F_ref, np.asarray(st.forces)[m], ref.energy, st.energy,
                            fmax=cfg.fmax)
    row.update(run_warnings(row, periodic=any(a.get_pbc()), min_lattice=L))
    return row


def run_warnings(row: dict[str, Any], *, periodic: bool, min_lattice: float) -> dict[str, Any]:
    """Flags and warning texts of one run (docs/attacks.md §6): a stationary start and ε > L/2.

    * ``stationary_start``: every movable component of the attack gradient at R_ref is below ``grad_tolerance``
      (``small_grad_fraction == 1``), e.g. a relaxed high-symmetry minimum; without a random start sign(g) = 0, so
      FGSM and I-FGSM move nothing (or follow round-off);
    * ``epsilon_exceeds_half_cell``: ε (Å) > L/2 with L the smallest lattice-vector length (periodic cells), so
      the perturbation can carry an atom across the cell and onto periodic images of its neighbours.

    Returns ``{"stationary_start", "half_min_lattice_A", "epsilon_exceeds_half_cell", "nonfinite", "warnings"}``.
    """
    warnings = []
    stationary = row["small_grad_fraction"] >= 1.0
    if stationary:
        moved = row["immediate"].get("linf_displacement", math.nan)
        how = ("so the PGD direction came from its random start" if row["random_start"] == "uniform" else
               "so the direction came from the seeded random sign start" if row["random_start"] == "sign" else
               f"so sign(g) carries no direction and {row['attack_label']} "
               + ("moved nothing" if moved == 0 else f"moved by round-off only (L-inf {moved:.3g} Å)")
               + "; use a random start (--random-start, AttackSpec(random_start=True))")
        unit = " eV/Å" if row.get("loss", "energy") == "energy" else ""
        warnings.append(f"stationary point: every |dJ/dR| at the reference is below {row['grad_tolerance']:g}{unit} "
                        f"(max {row['grad_max_reference']:.3g}{unit}), {how}")
    half = 0.5 * min_lattice if (periodic and min_lattice > 0) else math.nan
    big = bool(math.isfinite(half) and row["epsilon_A"] > half)
    if big:
        warnings.append(f"eps = {row['epsilon_A']:.4g} Å exceeds half the smallest lattice vector ({half:.4g} Å): "
                        "the perturbation can move atoms across the cell and into each other's periodic images")
    bad = [st for st in ("immediate", "post_relaxation") if not math.isfinite(row[st].get("energy", 0.0))
           or not math.isfinite(row[st].get("max_displacement", 0.0))]
    if bad:
        warnings.append(f"non-finite energy or positions at the {' and '.join(bad)} stage (the model returned NaN "
                        "or inf); discrete metrics of that stage are NaN")
    return {"stationary_start": bool(stationary), "half_min_lattice_A": half, "epsilon_exceeds_half_cell": big,
            "nonfinite": bool(bad), "warnings": warnings}


def _nan(x: Any) -> bool:
    """None (a stored NaN read back, a failed symprec) or a non-finite number."""
    try:
        return x is None or not math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


_SYMMETRY_METRICS = ("space_group_change", "symmetry_op_retention", "symmetry_op_retention_doc", "unique_site_change",
                     "unique_site_change_doc")


def nan_reason(metric: str, stage: Mapping[str, Any], row: Mapping[str, Any] | None = None) -> str:
    """Why ``stage[metric]`` is NaN, in words, from what the stage (a :func:`compare` dict) and its run ``row``
    record; ``"symmetry_op_retention@SYMPREC"`` names the retention at one symprec.  The metric stays NaN (null in
    JSON); the tables of ``jaxcert attack`` and ``jaxcert sweep`` print this under them (docs/attacks.md §3)."""
    if ("energy" in stage and _nan(stage["energy"])) or _nan(stage.get("max_displacement", 0.0)):
        return ("the model returned NaN or inf at this stage (non-finite energy or positions), so it is not compared "
                "with the reference")
    name, _, symprec = metric.partition("@")
    if name == "force_angle_median_robust" and not stage.get("force_angle_atoms_used_robust", 1):
        fmax = (row or {}).get("fmax")
        return (f"no atom's reference force reaches fmax{f' ({fmax:g} eV/Å)' if fmax is not None else ''}: a relaxed "
                "reference has only residual forces, whose direction is noise")
    if name.startswith("force_angle_median") and not stage.get("force_angle_atoms_used", 1):
        return (f"the relaxed reference (or this stage) is force-free, |F_ref|·|F| <= {_ANGLE_FLOOR:g} eV²/Å² on "
                "every atom, so no force angle is defined")
    if name == "rdf_l1":
        return "the cell has zero volume (no periodic box), so g(r) has no number density to normalise by"
    if name in _SYMMETRY_METRICS:
        where = (f"at symprec {symprec} Å" if symprec else
                 "at any symprec (" + ", ".join(f"{p:g}" for p in SYMPRECS) + " Å)")
        return f"spglib gave no symmetry dataset for the reference or this stage {where}"
    return "not defined for this run (docs/attacks.md §3)"


# -------------------------------------------------------------- float32/float64 agreement, cross-seed spread
#: Run-level metrics the reference compares between dtypes (docs/attacks.md §3), plus ΔE of both stages.
AGREEMENT_METRICS = ("post_relaxation.max_displacement", "immediate.max_delta_force", "post_relaxation.energy",
                     "immediate.delta_energy", "post_relaxation.delta_energy", "steps_before", "steps_after")
#: Discrete verdicts whose agreement is reported as a fraction of matched runs.
VERDICTS = ("immediate.space_group_change", "post_relaxation.space_group_change", "converged_before",
            "converged_after")
#: Metrics of the reference's cross-seed figures (docs/attacks.md §3), at both stages.
SPREAD_METRICS = tuple(f"{st}.{m}" for st in ("immediate", "post_relaxation")
                       for m in ("median_displacement", "median_delta_force", "jaccard_distance", "rdf_l1",
                                 "coordination_change_max")) + ("steps_after",)


def value(row: dict[str, Any], name: str) -> float:
    """A row's metric by dotted path (``"post_relaxation.max_displacement"``, ``"steps_after"``); NaN if absent."""
    x: Any = row
    for part in name.split("."):
        if not isinstance(x, dict) or part not in x:
            return math.nan
        x = x[part]
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def run_key(row: dict[str, Any]) -> tuple:
    """Identity of a run apart from its dtype: (structure, attack, n, α/ε, ε, seed), ε and α/ε to 6 significant
    digits so that float32 and float64 rows of the same request match (docs/attacks.md §3 matches on material, run
    folder, attack, ε, n, α)."""
    ratio = row.get("alpha_ratio")
    if ratio is None:
        ratio = row["alpha_A"] / row["epsilon_A"] if row.get("epsilon_A") else math.nan
    return (str(row["structure"]), row["attack"], int(row["n_steps"]), float(f"{float(ratio):.6g}"),
            float(f"{float(row['epsilon']):.6g}"), int(row["seed"]))


def _r2(x: np.ndarray, y: np.ndarray) -> float:
    """Squared Pearson correlation (the reference's "R²", docs/attacks.md §3); NaN below 2 points or no variance."""
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1] ** 2)


def dtype_agreement(rows: Sequence[dict[str, Any]], reference_rows: Sequence[dict[str, Any]],
                    metrics: Sequence[str] = AGREEMENT_METRICS,
                    verdicts: Sequence[str] = VERDICTS) -> dict[str, Any]:
    r"""Agreement of matched runs in two dtypes, e.g. ``rows`` in float32 against ``reference_rows`` in float64.

    Runs are matched on :func:`run_key`.  For each metric m over the P matched pairs (pairs where either value is
    NaN are skipped), with x the reference value and y the compared one:

    * ``r2``: squared Pearson correlation of (x, y), the reference's reported coefficient;
    * ``max_abs_diff``, ``median_abs_diff``: max and median of |y − x| (the metric's unit: Å, eV/Å, eV, steps);
    * ``median_rel_diff``: median of |y − x| / |x| over pairs with x ≠ 0 (docs/attacks.md §3, proposed).

    For each discrete verdict v: ``verdict_agreement[v]`` = fraction of pairs with equal values (e.g. whether the
    space group changed, whether a relaxation converged).

    Returns:
      ``{"n_pairs", "unmatched", "unmatched_reference", "metrics": {m: {...}}, "verdict_agreement": {v: ...}}``.
    """
    ref = {run_key(r): r for r in reference_rows}
    cmp = {run_key(r): r for r in rows}
    keys = [k for k in ref if k in cmp]
    out: dict[str, Any] = {"n_pairs": len(keys), "unmatched": len(set(cmp) - set(ref)),
                           "unmatched_reference": len(set(ref) - set(cmp)), "metrics": {}, "verdict_agreement": {}}
    for m in metrics:
        x = np.array([value(ref[k], m) for k in keys])
        y = np.array([value(cmp[k], m) for k in keys])
        ok = np.isfinite(x) & np.isfinite(y)
        x, y = x[ok], y[ok]
        d = np.abs(y - x)
        nz = x != 0
        out["metrics"][m] = {
            "n": int(ok.sum()), "r2": _r2(x, y),
            "max_abs_diff": float(d.max()) if d.size else math.nan,
            "median_abs_diff": float(np.median(d)) if d.size else math.nan,
            "median_rel_diff": float(np.median(d[nz] / np.abs(x[nz]))) if nz.any() else math.nan,
        }
    for v in verdicts:
        pairs = [(value(ref[k], v), value(cmp[k], v)) for k in keys]
        pairs = [(a, b) for a, b in pairs if math.isfinite(a) and math.isfinite(b)]
        out["verdict_agreement"][v] = float(np.mean([a == b for a, b in pairs])) if pairs else math.nan
    return out


def grid_agreement(grid: Any, reference: Any) -> dict[str, Any]:
    r"""Per-run agreement of two :class:`~jaxcert.attacks.GridResult` of the same grid in two dtypes.

    For every run (s, a, e, k), over the real (unpadded) atoms, with the reference grid's values as x:

    * ``max_abs_dR_adversarial``, ``max_abs_dR_final``: max_ik |R_ik − R^x_ik| of the attacked and of the relaxed
      positions (Å);
    * ``abs_dE_adversarial``, ``abs_dE_final``: |E − E^x| at both stages (eV);
    * ``sign_agreement``: fraction of coordinates where sign(R_adv − R_ref) equals the reference's (for FGSM this is
      the fraction of gradient sign components that agree between dtypes, docs/attacks.md §1.8 item 7 and §3, proposed).

    ``reference_abs_dE`` (S,) compares the first relaxations.  Returns arrays with leading axes (S, A, E, K) and
    ``summary`` maxima/medians over all runs.
    """
    m = np.asarray(reference.reference.structure.mask)  # (S, N)
    if np.asarray(grid.runs.steps).shape != np.asarray(reference.runs.steps).shape:
        raise ValueError("grid_agreement: the two grids have different (S, A, E, K) shapes")
    mm = m[:, None, None, None, :, None]

    def pos(g, stage):
        return np.asarray(getattr(g.runs, stage).structure.positions, np.float64)

    def energy_of(g, stage):
        return np.asarray(getattr(g.runs, stage).energy, np.float64)

    def max_abs(d):
        return np.max(np.where(mm, np.abs(d), 0.0), axis=(-1, -2))

    R_ref = [np.asarray(g.reference.structure.positions, np.float64)[:, None, None, None] for g in (grid, reference)]
    s_a, s_b = np.sign(pos(grid, "adversarial") - R_ref[0]), np.sign(pos(reference, "adversarial") - R_ref[1])
    n_coord = 3 * m.sum(axis=1)[:, None, None, None]
    out = {
        "max_abs_dR_adversarial": max_abs(pos(grid, "adversarial") - pos(reference, "adversarial")),
        "max_abs_dR_final": max_abs(pos(grid, "final") - pos(reference, "final")),
        "abs_dE_adversarial": np.abs(energy_of(grid, "adversarial") - energy_of(reference, "adversarial")),
        "abs_dE_final": np.abs(energy_of(grid, "final") - energy_of(reference, "final")),
        "sign_agreement": np.sum(np.where(mm, s_a == s_b, False), axis=(-1, -2)) / n_coord,
        "reference_abs_dE": np.abs(np.asarray(grid.reference.energy, np.float64)
                                   - np.asarray(reference.reference.energy, np.float64)),
    }
    out["summary"] = {
        "max_abs_dR_final": float(out["max_abs_dR_final"].max()),
        "median_abs_dR_final": float(np.median(out["max_abs_dR_final"])),
        "max_abs_dE_final": float(out["abs_dE_final"].max()),
        "min_sign_agreement": float(out["sign_agreement"].min()),
        "mean_sign_agreement": float(out["sign_agreement"].mean()),
    }
    return out


def _quartiles(v: np.ndarray) -> dict[str, float]:
    """Median, Q25, Q75 (linear interpolation, the numpy/pandas default), IQR, mean, std (ddof 0), min, max."""
    if v.size == 0:
        nan = math.nan
        return {"median": nan, "q25": nan, "q75": nan, "iqr": nan, "mean": nan, "std": nan, "min": nan, "max": nan}
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "iqr": float(q75 - q25),
            "mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()), "max": float(v.max())}


def _group_key(row: dict[str, Any]) -> tuple:
    k = run_key(row)
    return (row.get("attack_label", row["attack"]), k[2], k[3], k[4])  # label, n, α/ε, ε


def seed_spread(rows: Sequence[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    r"""Spread across seeds of one metric for every (structure, attack, n, α/ε, ε).

    Per group: the values v_k of the seeds (NaN dropped), ``n_seeds``, and their median, Q25, Q75, IQR, mean,
    std (population, ddof 0), min, max.  FGSM and I-FGSM are deterministic, so their spread measures backend
    non-determinism only; PGD's includes its random start (docs/attacks.md §3).
    """
    groups: dict[tuple, list[tuple[int, float]]] = {}
    for r in rows:
        groups.setdefault((str(r["structure"]), *_group_key(r)), []).append((int(r["seed"]), value(r, metric)))
    out = []
    for key, sv in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        sv = sorted((s, v) for s, v in sv if math.isfinite(v))
        v = np.array([x for _, x in sv])
        out.append({"structure": key[0], "attack_label": key[1], "n_steps": key[2], "alpha_ratio": key[3],
                    "epsilon": key[4], "metric": metric, "seeds": [s for s, _ in sv], "values": v.tolist(),
                    "n_seeds": len(sv), **_quartiles(v)})
    return out


def seed_bands(rows: Sequence[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    r"""The reference's cross-seed summary (docs/attacks.md §3) for every (attack, n, α/ε, ε).

    1. for each seed, the median over structures of the run-level metric (NaN dropped): m_k;
    2. across the seeds: median, Q25, Q75 (the shaded band), IQR, std, and ``seed_count``; ``per_seed`` maps each
       seed to m_k (the thin lines).
    """
    groups: dict[tuple, dict[int, list[float]]] = {}
    for r in rows:
        v = value(r, metric)
        if math.isfinite(v):
            groups.setdefault(_group_key(r), {}).setdefault(int(r["seed"]), []).append(v)
    out = []
    for key, by_seed in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        per_seed = {s: float(np.median(v)) for s, v in sorted(by_seed.items())}
        q = _quartiles(np.array(list(per_seed.values())))
        out.append({"attack_label": key[0], "n_steps": key[1], "alpha_ratio": key[2], "epsilon": key[3],
                    "metric": metric, "per_seed": per_seed, "seed_count": len(per_seed), **q})
    return out
