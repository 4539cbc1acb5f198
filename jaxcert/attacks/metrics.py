r"""Outcome metrics of ATTACKS.md §3, on the host (numpy, ASE, spglib).

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
  (``*_raw``, no minimum image; ATTACKS.md §3 notes the reference is inconsistent).
* **ΔF** ΔF_i = ‖F_i,stage − F_i,ref‖₂ (eV/Å): median, mean, max over atoms.
* **Force angle** θ_i = arccos(clip(F̂_ref·F̂_stage, −1, 1)) in degrees.  Reference
  version: atoms with ‖F_ref‖‖F_stage‖ ≤ 1e-12 dropped, median.  Because F_ref is a
  residual force (‖F_ref‖ < fmax) whose direction is noise, the proposed version
  ``force_angle_median_robust`` also drops atoms with ‖F_ref‖ < fmax (NaN when none
  remain; ATTACKS.md §3, proposed).
* **Energy**: E_stage, ΔE = E_stage − E_ref (eV) and ΔE/N (eV/atom).

Discrete metrics
----------------
* **Neighbour edges**: i ≠ j bonded when some periodic image has
  d_ij < r_cov,i + r_cov,j (ASE ``natural_cutoffs``, Cordero 2008 covalent radii,
  multiplier 1); all images of a pair collapse into one unordered index edge.
  Counts before/after/added/removed, change = added + removed, the **Jaccard
  distance** d_J = 1 − |E_ref ∩ E_stage| / |E_ref ∪ E_stage| (0 when both are empty),
  and the **coordination change** Δz_i = |z_i,stage − z_i,ref| with z_i the number of
  distinct neighbours (mean and max).
* **RDF L1** d = Σ_k |g_stage(r_k) − g_ref(r_k)| Δr (Å), r_max = 6 Å, 60 bins, with
  ASE's total g(r): ordered pair counts in bin k = ⌈d/Δr⌉ over
  N ρ 4πΔr (r_k² + Δr²/12), r_k = (k − ½)Δr.  The reference repeats the cell until
  every plane spacing is ≥ 2 r_max and calls ``ase.geometry.rdf.get_rdf``; per-atom
  neighbour counts are the same in the repeated and the original cell, so counting
  all periodic images of the original cell gives the same g(r) without the
  repeat (tested against ``get_rdf``).  Method tag ``ase_total_rdf_l1_v1``.
* **Symmetry** (spglib ``get_symmetry_dataset`` on the wrapped cell, symprec ∈
  {1e-2, 1e-3, 1e-4}; symprecs where spglib fails on either structure are skipped):

  - space-group change: fraction of symprecs where the space-group numbers differ;
  - operation retention, reference version: median of min(n_ops,stage, n_ops,ref)/n_ops,ref
    (a count ratio, only an upper bound);
  - operation retention, documented version (``_doc``): median of |S_ref ∩ S_stage|/|S_ref|,
    where a reference operation (W, w) is kept when it maps the stage structure onto
    itself: every atom has a same-species partner within τ = symprec Å (minimum image);
  - unique-site change: median of n_u,stage − n_u,ref (signed, reference) and of its
    absolute value (``_doc``), n_u = number of distinct ``equivalent_atoms``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "SYMPRECS", "RDF_METHOD", "min_image", "displacement", "delta_force", "force_angle", "energy",
    "edges", "topology", "rdf", "rdf_l1", "symmetry_data", "symmetry", "compare", "run_metrics",
]

SYMPRECS = (1e-2, 1e-3, 1e-4)
RDF_METHOD = "ase_total_rdf_l1_v1"
_ANGLE_FLOOR = 1e-12


def _atoms(x: Any):
    """ase.Atoms from Atoms or an unbatched Structure (padding dropped)."""
    if hasattr(x, "to_ase"):
        return x.to_ase()
    return x


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
    mic = min_image(raw, a.get_cell().array, a.get_pbc())
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


# -------------------------------------------------------------- topology
def edges(atoms: Any) -> set[tuple[int, int]]:
    """Unordered index edges {i, j}, i ≠ j, bonded by covalent radii (ASE natural_cutoffs, mult 1)."""
    from ase.neighborlist import natural_cutoffs, neighbor_list

    atoms = _atoms(atoms)
    try:
        i, j = neighbor_list("ij", atoms, natural_cutoffs(atoms, mult=1.0))
    except Exception:  # the reference takes an empty edge set when the neighbour list fails
        return set()
    keep = i != j
    return {(int(min(p, q)), int(max(p, q))) for p, q in zip(i[keep], j[keep], strict=True)}


def _coordination(E: set[tuple[int, int]], n: int) -> np.ndarray:
    z = np.zeros(n, int)
    for i, j in E:
        z[i] += 1
        z[j] += 1
    return z


def topology(ref: Any, stage: Any) -> dict[str, float]:
    """Edge counts, Jaccard distance and coordination change (module docstring)."""
    a, b = _atoms(ref), _atoms(stage)
    Ea, Eb = edges(a), edges(b)
    union = Ea | Eb
    jac = 0.0 if not union else 1.0 - len(Ea & Eb) / len(union)
    dz = np.abs(_coordination(Eb, len(b)) - _coordination(Ea, len(a)))
    added, removed = len(Eb - Ea), len(Ea - Eb)
    return {
        "edges_before": len(Ea), "edges_after": len(Eb), "edges_added": added, "edges_removed": removed,
        "edge_change_count": added + removed, "jaccard_distance": jac,
        "coordination_change_mean": float(dz.mean()), "coordination_change_max": int(dz.max()),
    }


def rdf(atoms: Any, r_max: float = 6.0, n_bins: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """ASE's total g(r) (bin centres r_k in Å, g_k), counting every periodic image (module docstring)."""
    from ase.neighborlist import neighbor_list

    atoms = _atoms(atoms)
    n = len(atoms)
    dr = r_max / n_bins
    vol = abs(np.linalg.det(atoms.get_cell().array))
    r = (np.arange(1, n_bins + 1) - 0.5) * dr
    if vol < 1e-10:
        return r, np.full(n_bins, np.nan)
    d = neighbor_list("d", atoms, r_max)
    k = np.ceil(d / dr).astype(int)
    counts = np.bincount(k, minlength=n_bins + 1)[1 : n_bins + 1]
    rho = n / vol
    g = counts / (n * rho * 4.0 * np.pi * dr * (r * r + dr * dr / 12.0))
    return r, g


def rdf_l1(ref: Any, stage: Any, r_max: float = 6.0, n_bins: int = 60) -> dict[str, Any]:
    """d_RDF = Σ_k |g_stage − g_ref| Δr (Å)."""
    _, ga = rdf(ref, r_max, n_bins)
    _, gb = rdf(stage, r_max, n_bins)
    return {"rdf_l1": float(np.sum(np.abs(gb - ga)) * (r_max / n_bins)), "rdf_method": RDF_METHOD}


# -------------------------------------------------------------- symmetry
def _cell_tuple(atoms):
    frac = atoms.get_scaled_positions(wrap=True)
    return (atoms.get_cell().array, frac, atoms.get_atomic_numbers())


def symmetry_data(atoms: Any, symprec: float) -> dict[str, Any] | None:
    """spglib dataset summary (number, rotations, translations, n_ops, n_unique) or None on failure."""
    import spglib

    atoms = _atoms(atoms)
    try:
        ds = spglib.get_symmetry_dataset(_cell_tuple(atoms), symprec=symprec, angle_tolerance=-1)
    except Exception:
        return None
    if ds is None:
        return None
    return {"number": int(ds.number), "rotations": np.asarray(ds.rotations),
            "translations": np.asarray(ds.translations), "n_ops": len(ds.rotations),
            "n_unique": len(np.unique(ds.equivalent_atoms))}


def _ops_kept(atoms, rotations: np.ndarray, translations: np.ndarray, tol: float) -> int:
    """How many operations (W, w) map ``atoms`` onto itself (same-species partner within tol Å, min image)."""
    cell = atoms.get_cell().array
    pbc = atoms.get_pbc()
    frac = atoms.get_scaled_positions(wrap=False)
    Z = atoms.get_atomic_numbers()
    same = Z[:, None] == Z[None, :]
    kept = 0
    for W, w in zip(rotations, translations, strict=True):
        img = frac @ W.T + w  # (n, 3) images of every atom
        diff = (img[:, None, :] - frac[None, :, :]) @ cell  # (n, n, 3)
        d = np.linalg.norm(min_image(diff, cell, pbc), axis=-1)
        ok = np.where(same, d, np.inf).min(axis=1) <= tol
        kept += bool(ok.all())
    return kept


def symmetry(ref: Any, stage: Any, symprecs: Sequence[float] = SYMPRECS) -> dict[str, float]:
    """Space-group change, operation retention (count ratio and set based), unique-site change."""
    a, b = _atoms(ref), _atoms(stage)
    changed, count_ratio, set_ratio, du = [], [], [], []
    for p in symprecs:
        da, db = symmetry_data(a, p), symmetry_data(b, p)
        if da is None or db is None:
            continue
        changed.append(float(da["number"] != db["number"]))
        count_ratio.append(min(db["n_ops"], da["n_ops"]) / da["n_ops"])
        set_ratio.append(_ops_kept(b, da["rotations"], da["translations"], p) / da["n_ops"])
        du.append(db["n_unique"] - da["n_unique"])
    if not changed:
        nan = math.nan
        return {"space_group_change": nan, "symmetry_op_retention": nan, "symmetry_op_retention_doc": nan,
                "unique_site_change": nan, "unique_site_change_doc": nan, "symprecs_used": 0}
    return {
        "space_group_change": float(np.mean(changed)),
        "symmetry_op_retention": float(np.median(count_ratio)),
        "symmetry_op_retention_doc": float(np.median(set_ratio)),
        "unique_site_change": float(np.median(du)),
        "unique_site_change_doc": float(np.median(np.abs(du))),
        "symprecs_used": len(changed),
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
    L = float(np.min(np.linalg.norm(a.get_cell().array, axis=1)))
    lengths = np.linalg.norm(a.get_cell().array, axis=1)
    eps = float(run.epsilon)
    row: dict[str, Any] = {
        "structure": i_s, "formula": a.get_chemical_formula(), "n_atoms": len(a),
        "attack": spec.name, "attack_label": spec.label, "n_steps": spec.n_steps,
        "epsilon": float(grid.epsilons[i_e]), "epsilon_A": eps, "alpha_A": float(run.alpha),
        "epsilon_percent_min": 100.0 * eps / L,
        "epsilon_percent_abc": [100.0 * eps / x if x > 0 else math.nan for x in lengths],
        "seed": int(grid.seeds[i_k]), "loss": cfg.loss, "optimizer": cfg.optimizer, "fmax": cfg.fmax,
        "max_steps": cfg.max_steps,
        "small_grad_fraction": float(run.small_grad_fraction),
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
    return row
