r"""Outcome metrics of docs/attacks.md §3, on the host (numpy, ASE, spglib).

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

Across runs
-----------
* **float32/float64 agreement** (:func:`dtype_agreement` on rows matched by :func:`run_key`,
  :func:`grid_agreement` on two grids): squared Pearson r², max/median |Δ|, median relative
  difference, agreement of discrete verdicts, and the fraction of attack sign components that agree.
* **Cross-seed spread** (:func:`seed_spread` per structure, :func:`seed_bands` as the
  reference's median-over-materials-then-quartiles-over-seeds band).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert.attacks.attacks import grad_tolerance

__all__ = [
    "SYMPRECS", "RDF_METHOD", "min_image", "displacement", "delta_force", "force_angle", "energy",
    "edges", "topology", "rdf", "rdf_l1", "symmetry_data", "symmetry", "compare", "run_metrics", "run_warnings",
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
    if not _finite(a, b):
        nan = math.nan
        return {"edges_before": nan, "edges_after": nan, "edges_added": nan, "edges_removed": nan,
                "edge_change_count": nan, "jaccard_distance": nan, "coordination_change_mean": nan,
                "coordination_change_max": nan}
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
    if vol < 1e-10 or not _finite(atoms):
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
    if not _finite(atoms):
        return None
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
    """How many operations (W, w) map ``atoms`` onto itself (same-species partner within tol Å, min image).

    Vectorised over blocks of operations: the image of atom i under (W, w) is compared with every atom j through
    the fractional difference f − round(f) on periodic axes.  Whenever some periodic image of j lies within tol of
    the image of i and tol is below a quarter of the smallest plane spacing, that rounding picks exactly that image,
    so the verdict equals the exact minimum-image test (used instead for a larger tol)."""
    cell = np.asarray(atoms.get_cell().array, np.float64)
    pbc = np.asarray(atoms.get_pbc(), bool)
    frac = atoms.get_scaled_positions(wrap=False)
    Z = atoms.get_atomic_numbers()
    same = Z[:, None] == Z[None, :]
    n = len(frac)
    vol = abs(np.linalg.det(cell))
    spacing = vol / np.linalg.norm(np.cross(cell[[1, 2, 0]], cell[[2, 0, 1]]), axis=1) if vol > 0 else np.zeros(3)
    if pbc.any() and tol >= 0.25 * float(np.min(spacing[pbc])):
        kept = 0
        for W, w in zip(rotations, translations, strict=True):
            img = frac @ W.T + w
            d = np.linalg.norm(min_image((img[:, None, :] - frac[None, :, :]) @ cell, cell, pbc), axis=-1)
            kept += bool((np.where(same, d, np.inf).min(axis=1) <= tol).all())
        return kept
    kept = 0
    block = max(1, int(2_000_000 // max(3 * n * n, 1)))
    for k0 in range(0, len(rotations), block):
        W, w = np.asarray(rotations[k0:k0 + block], np.float64), np.asarray(translations[k0:k0 + block], np.float64)
        img = np.einsum("nj,kij->kni", frac, W) + w[:, None, :]  # (K, n, 3) images of every atom
        f = img[:, :, None, :] - frac[None, None, :, :]  # (K, n, n, 3) fractional differences
        f = np.where(pbc, f - np.round(f), f)
        d = np.linalg.norm(f @ cell, axis=-1)
        ok = np.where(same[None], d, np.inf).min(axis=2) <= tol  # (K, n)
        kept += int(ok.all(axis=1).sum())
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
    dtype = np.asarray(ref.structure.positions).dtype
    row: dict[str, Any] = {
        "structure": i_s, "formula": a.get_chemical_formula(), "n_atoms": len(a),
        "dtype": str(np.asarray(ref.structure.positions).dtype),
        "attack": spec.name, "attack_label": spec.label, "n_steps": spec.n_steps, "alpha_ratio": float(spec.alpha),
        "epsilon": float(grid.epsilons[i_e]), "epsilon_A": eps, "alpha_A": float(run.alpha),
        "epsilon_percent_min": 100.0 * eps / L,
        "epsilon_percent_abc": [100.0 * eps / x if x > 0 else math.nan for x in lengths],
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
    half = 0.5 * min_lattice if periodic else math.nan
    big = bool(periodic and row["epsilon_A"] > half)
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
