"""Convex-hull stability: energy above the hull, hull-F1 and the reference-invariance check.

``docs/controls.md``, section "Convex hull and stability". Seed 001, Methods G ("Convex-hull stability")
and the reference-free section ("Stability on the convex hull"; "Reference-free metrics").

* :func:`e_above_hull` -- the distance of each compound's formation energy above the lower convex hull of
  its own chemical space (every supplied compound whose elements are a subset of its own, element corners
  at 0 eV/atom). One hull per chemical system, shared by all its compounds.
* :func:`stability_scores` / :func:`stability_window_sweep` -- hull-F1 (Matbench-Discovery-style stability
  classification: precision, recall, F1, accuracy) and the MAE of the energy above the hull.
* :func:`hull_invariance` -- shifting compounds *and* element corners by the same per-element constants
  leaves the energy above the hull unchanged; shifting the compounds alone does not.

Host-side numpy/scipy float64 throughout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from jaxcert.controls._result import ControlResult

__all__ = [
    "DEFAULT_STABILITY_WINDOWS",
    "HullInvariance",
    "HullResult",
    "StabilityScores",
    "StabilityWindowSweep",
    "e_above_hull",
    "hull_invariance",
    "stability_scores",
    "stability_window_sweep",
]

#: The stability windows of the seed's threshold sweep (Supplementary Table 13), eV/atom.
DEFAULT_STABILITY_WINDOWS: tuple[float, ...] = (0.010, 0.015, 0.020, 0.025, 0.030, 0.040, 0.050)

CornerPolicy = Literal["reference", "lowest"]
WindowSide = Literal["both", "reference", "model"]

_COND_MAX = 1e12  # barycentric systems of a facet worse conditioned than this are degenerate (dropped)
_LAMBDA_TOL = 1e-9  # how far outside its facet (in barycentric units) a composition may be found


# ----------------------------------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class HullResult(ControlResult):
    """Energy above the hull per compound (``docs/controls.md``, "Convex hull and stability").

    Fields: ``e_above_hull`` (n,) eV/atom, >= 0, exactly 0 for hull vertices; ``hull_energy`` (n,) the hull's
    formation energy at each compound's composition (eV/atom); ``formation_energy`` (n,) the formation
    energies the hull was built from (equal to the input unless ``references`` were given); ``system`` (n,)
    the chemical-system label of each compound (elements joined by "-", in column order); ``n_entries`` (n,)
    the entry count used by the ``min_entries`` rule; ``scored`` (n,) bool, ``n_entries >= min_entries``;
    ``elements`` the column symbols; ``n_systems`` the number of distinct chemical systems (hulls built);
    ``decomposition`` (only with ``return_decomposition=True``) one ``{phase: fraction}`` per compound, a
    phase being a row index (int) of a supplied compound or an element symbol (str) for a corner.
    """

    e_above_hull: np.ndarray
    hull_energy: np.ndarray
    formation_energy: np.ndarray
    system: tuple[str, ...]
    n_entries: np.ndarray
    scored: np.ndarray
    elements: tuple[str, ...]
    n_systems: int
    corner_policy: str
    min_entries: int
    method: str
    decomposition: tuple[dict[int | str, float], ...] | None = None


@dataclasses.dataclass(frozen=True)
class StabilityScores(ControlResult):
    """Hull-F1 at one window (``docs/controls.md``, "Convex hull and stability").

    ``precision = tp / (tp + fp)``, ``recall = tp / (tp + fn)``, ``f1 = 2 tp / (2 tp + fp + fn)`` (NaN when a
    denominator is 0), ``accuracy = (tp + tn) / n``, ``mae`` = mean |E_hull(model) - E_hull(ref)| (eV/atom).
    ``n_stable`` counts the reference-stable compounds, ``n_predicted_stable`` the model-stable ones;
    ``ref_cutoff`` / ``model_cutoff`` are the E_hull cut-offs (eV/atom) each side was classified with.
    """

    precision: float
    recall: float
    f1: float
    accuracy: float
    mae: float
    n: int
    n_stable: int
    n_predicted_stable: int
    tp: int
    fp: int
    fn: int
    tn: int
    window: float
    threshold: float
    window_side: str
    ref_cutoff: float
    model_cutoff: float


@dataclasses.dataclass(frozen=True)
class StabilityWindowSweep(ControlResult):
    """Hull-F1 over a sweep of windows: every field of :class:`StabilityScores` as an array over ``windows``
    (``mae`` and ``n`` do not depend on the window and stay scalars)."""

    windows: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    accuracy: np.ndarray
    n_stable: np.ndarray
    n_predicted_stable: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray
    mae: float
    n: int
    threshold: float
    window_side: str


@dataclasses.dataclass(frozen=True)
class HullInvariance(ControlResult):
    """The hull's reference-invariance check (``docs/controls.md``, "Convex hull and stability").

    ``max_change_invariant``: max |ΔE_hull| (eV/atom) when compounds and element references are shifted by
    the same per-element constants (should be round-off); ``max_change_compounds_only``: the same when only
    the compounds are shifted (non-zero in general); ``n_flips_compounds_only``: stability labels (at
    ``window``) that the compounds-only shift flips (``n_flips_invariant`` likewise for the invariant one);
    ``invariant``: ``max_change_invariant <= atol``; ``sensitive``: ``max_change_compounds_only > atol``;
    ``passed``: both.
    """

    max_change_invariant: float
    max_change_compounds_only: float
    n_flips_invariant: int
    n_flips_compounds_only: int
    invariant: bool
    sensitive: bool
    passed: bool
    atol: float
    window: float
    n: int


# ------------------------------------------------------------------------------------------- input parsing
def _parse_compositions(compositions: Any, elements: Sequence[str] | None) -> tuple[np.ndarray, tuple[str, ...]]:
    """``(fractions (n, n_el) float64, element symbols)`` from an array of fractions/counts or formula strings."""
    if isinstance(compositions, str):
        raise ValueError("compositions: expected a sequence of formulas or an (n, n_el) array, got one string")
    is_num_array = isinstance(compositions, np.ndarray) and compositions.dtype.kind not in "USO"
    items = None if is_num_array else list(compositions)
    if items is not None and len(items) > 0 and all(isinstance(c, str) for c in items):
        from ase.data import atomic_numbers
        from ase.formula import Formula

        counts: list[dict[str, int]] = []
        for s in items:
            try:
                c = {k: v for k, v in Formula(s).count().items() if v != 0}
            except Exception as exc:  # ase raises ValueError/KeyError on malformed strings
                raise ValueError(f"compositions: cannot parse formula {s!r} ({exc})") from exc
            bad = [k for k in c if k not in atomic_numbers or k == "X"]
            if bad or not c:
                raise ValueError(f"compositions: formula {s!r} has no elements or unknown symbols {bad}")
            counts.append(c)
        if elements is None:
            present = {k for c in counts for k in c}
            elements = sorted(present, key=lambda k: atomic_numbers[k])
        el = tuple(str(e) for e in elements)
        if len(set(el)) != len(el):
            raise ValueError(f"elements: duplicate symbols in {el}")
        col = {e: i for i, e in enumerate(el)}
        arr = np.zeros((len(counts), len(el)))
        for i, c in enumerate(counts):
            for k, v in c.items():
                if k not in col:
                    raise ValueError(f"compositions: formula {items[i]!r} has {k}, which is not in elements")
                arr[i, col[k]] = v
    else:
        if items is not None and any(isinstance(c, str) for c in items):
            raise ValueError("compositions: mix of formula strings and numbers")
        try:
            arr = np.asarray(compositions, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"compositions: not a numeric (n, n_el) array ({exc})") from exc
        if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
            raise ValueError(f"compositions: expected an (n, n_el) array with n, n_el >= 1, got shape {arr.shape}")
        if elements is None:
            el = tuple(f"X{i}" for i in range(arr.shape[1]))
        else:
            el = tuple(str(e) for e in elements)
            if len(el) != arr.shape[1]:
                raise ValueError(f"elements: {len(el)} symbols for {arr.shape[1]} composition columns")
            if len(set(el)) != len(el):
                raise ValueError(f"elements: duplicate symbols in {el}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("compositions: entries must be finite and >= 0")
    tot = arr.sum(axis=1)
    if np.any(tot <= 0):
        raise ValueError(f"compositions: row(s) {np.flatnonzero(tot <= 0)[:5].tolist()} contain no atoms")
    return arr / tot[:, None], el


def _as_vector(x: Any, n: int, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: entries must be finite")
    return a


# ------------------------------------------------------------------------------------------------ the hull
def _lower_facets(coords: np.ndarray, ceiling: int) -> np.ndarray:
    """Vertex indices (f, k) of the lower facets of the hull of ``coords`` (m, k): (k-1 fractions, energy)."""
    from scipy.spatial import ConvexHull

    hull = ConvexHull(coords)  # scipy always adds "Qt" (triangulated facets)
    lower = hull.equations[:, -2] < -1e-12  # outward normal points down the energy axis
    simp = hull.simplices[lower]
    return simp[~np.any(simp == ceiling, axis=1)]


def _hull_qhull(
    x_pts: np.ndarray, e_pts: np.ndarray, x_q: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hull energies at ``x_q`` (q, k) over points ``x_pts`` (m, k) with energies ``e_pts`` (m,).

    Returns ``(hull_energy (q,), facet vertex indices (q, k), barycentric weights (q, k), hull vertex ids)``.
    The points must include the k corners. Exact in the sense of pymatgen's PhaseDiagram: qhull finds the
    lower facets; the energy is the barycentric interpolation of the containing facet's vertices, solved
    here in float64 from the input data.
    """
    m, k = x_pts.shape
    ceiling_x = np.full(k, 1.0 / k)
    ceiling_e = max(float(e_pts.max()), 0.0) + 1.0  # lifts the point set to full dimension
    coords = np.concatenate([np.c_[x_pts[:, :-1], e_pts], np.r_[ceiling_x[:-1], ceiling_e][None]])
    simp = _lower_facets(coords, ceiling=m)
    a = np.swapaxes(x_pts[simp], 1, 2)  # (f, k elements, k vertices): a @ lambda = x
    good = np.linalg.cond(a) < _COND_MAX
    simp, a = simp[good], a[good]
    if simp.shape[0] == 0:
        raise RuntimeError("e_above_hull: no non-degenerate lower facet found")
    inv = np.linalg.inv(a)
    q = x_q.shape[0]
    best_f = np.empty(q, dtype=np.intp)
    chunk = max(1, int(4e6 // (simp.shape[0] * k)))
    for s in range(0, q, chunk):
        xs = x_q[s : s + chunk]
        score = np.einsum("fij,qj->qfi", inv, xs).min(axis=2)  # (qs, f): the least barycentric weight
        f = np.argmax(score, axis=1)
        if np.any(score[np.arange(xs.shape[0]), f] < -_LAMBDA_TOL):
            raise RuntimeError("e_above_hull: a composition lies in no lower facet (numerical failure)")
        best_f[s : s + chunk] = f
    best_lam = np.linalg.solve(a[best_f], x_q[..., None])[..., 0]  # re-solved on the chosen facet
    verts = simp[best_f]
    return np.einsum("qk,qk->q", best_lam, e_pts[verts]), verts, best_lam, np.unique(simp)


def _hull_lp(
    x_pts: np.ndarray, e_pts: np.ndarray, x_q: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The same as :func:`_hull_qhull` by linear programming, one LP per composition (slow; a cross-check).

    E_hull(x) = min_w  w . e  s.t.  sum_j w_j x_j = x, w >= 0 (HiGHS), then polished: the weights are re-solved
    by least squares on the LP's support, so the energy is the exact facet interpolation (not the LP's 1e-7
    feasibility tolerance).
    """
    from scipy.optimize import linprog

    q, k = x_q.shape
    verts = np.zeros((q, k), dtype=np.intp)
    lam = np.zeros((q, k))
    energy = np.empty(q)
    on_hull: list[np.ndarray] = []
    for i in range(q):
        res = linprog(e_pts, A_eq=x_pts.T, b_eq=x_q[i], bounds=(0, None), method="highs")
        if res.status != 0:
            raise RuntimeError(f"e_above_hull: LP failed ({res.message})")
        w = res.x
        supp = np.flatnonzero(w > 1e-9 * max(1.0, w.max()))
        supp = supp[np.argsort(-w[supp], kind="stable")[:k]]  # a basic solution has <= k non-zeros
        ws, *_ = np.linalg.lstsq(x_pts[supp].T, x_q[i], rcond=None)
        energy[i] = ws @ e_pts[supp]
        verts[i, : supp.size], lam[i, : supp.size] = supp, ws
        on_hull.append(supp)
    return energy, verts, lam, np.unique(np.concatenate(on_hull))


def e_above_hull(
    compositions: np.ndarray | Sequence[str] | Sequence[Sequence[float]],
    energies: np.ndarray | Sequence[float],
    elements: Sequence[str] | None = None,
    *,
    references: np.ndarray | Sequence[float] | Mapping[str, float] | None = None,
    corner_policy: CornerPolicy = "reference",
    min_entries: int = 3,
    min_entries_scope: Literal["system", "space"] = "system",
    method: Literal["qhull", "lp"] = "qhull",
    return_decomposition: bool = False,
) -> HullResult:
    """Energy above the lower convex hull of each compound's chemical space (eV/atom).

    Definition (seed 001, Methods G): for a compound of chemical system S (its set of elements) with
    formation energy e and composition x, ``E_hull = e - H_S(x)`` where ``H_S`` is the lower convex envelope
    of the points (x_j, e_j) of every supplied compound j whose elements are a subset of S, together with
    the element corners of S at 0 eV/atom: ``H_S(x) = min sum_j w_j e_j`` over ``w >= 0`` with
    ``sum_j w_j x_j = x``. A ternary is therefore measured against the binaries of its sub-systems too.
    One hull is built per distinct chemical system and shared by all of its compounds.

    Parameters
    ----------
    compositions
        (n, n_el) atomic fractions or counts (rows are normalised) over the columns ``elements``, or n
        formula strings (parsed with :class:`ase.formula.Formula`; columns ordered by ``elements`` or, if
        absent, by atomic number).
    energies
        (n,) formation energies per atom (eV/atom), or total energies per atom when ``references`` is given.
    elements
        Column symbols (labels only for arrays; the column order for formulas).
    references
        Per-element reference energies per atom (array aligned with the columns, or {symbol: energy}); when
        given, ``formation = energies - fractions @ references`` is computed first (the code path that
        :func:`hull_invariance` checks).
    corner_policy
        ``"reference"`` (default, the seed's): corners are fixed at 0 eV/atom; elemental rows never enter
        compound hulls, and an elemental row is scored against ``min(0, lowest row of its element)``.
        ``"lowest"``: elemental rows are ordinary hull points, so a corner sits at ``min(0, lowest row of its
        element)`` for the compounds as well (pymatgen's PhaseDiagram convention).
    min_entries, min_entries_scope
        The seed scores a structure "only in a system with at least three entries": ``scored`` is
        ``n_entries >= min_entries``, counting the rows of the compound's exact chemical system
        (``"system"``, default) or of its whole chemical space including sub-systems (``"space"``). Corners
        are not entries. Only the ``scored`` mask depends on this; every E_hull is computed.
    method
        ``"qhull"`` (default): :class:`scipy.spatial.ConvexHull` per chemical system on (fractions[:-1],
        energy), with the corners and one lifted point so that every space, degenerate or not, is full
        dimensional; the energy is the barycentric interpolation on the containing lower facet.
        ``"lp"``: the linear program above, one per compound (HiGHS, support re-solved by least squares); slow,
        for cross-checks.
    return_decomposition
        Also return each compound's decomposition into hull phases.

    Returns
    -------
    HullResult
        See the class. E_hull >= 0 (round-off negatives clipped) and exactly 0 on hull vertices.

    Raises
    ------
    ValueError
        On malformed input, naming the argument.
    """
    if corner_policy not in ("reference", "lowest"):
        raise ValueError(f"corner_policy: expected 'reference' or 'lowest', got {corner_policy!r}")
    if method not in ("qhull", "lp"):
        raise ValueError(f"method: expected 'qhull' or 'lp', got {method!r}")
    if min_entries_scope not in ("system", "space"):
        raise ValueError(f"min_entries_scope: expected 'system' or 'space', got {min_entries_scope!r}")
    if isinstance(min_entries, bool) or not isinstance(min_entries, (int, np.integer)) or min_entries < 0:
        raise ValueError(f"min_entries: expected an integer >= 0, got {min_entries!r}")
    x, el = _parse_compositions(compositions, elements)
    n, n_el = x.shape
    e_in = _as_vector(energies, n, "energies")
    if references is None:
        e_f = e_in.copy()
    else:
        if isinstance(references, Mapping):
            missing = [s for s in el if s not in references]
            if missing:
                raise ValueError(f"references: no energy for {missing}")
            ref = np.array([float(references[s]) for s in el])
        else:
            ref = np.asarray(references, dtype=np.float64)
        if ref.shape != (n_el,) or not np.all(np.isfinite(ref)):
            raise ValueError(f"references: expected {n_el} finite energies aligned with the columns, got {ref.shape}")
        e_f = e_in - x @ ref

    present = x > 0
    packed = np.packbits(present, axis=1)
    sys_bits, sys_of = np.unique(packed, axis=0, return_inverse=True)
    sys_of = sys_of.reshape(-1)
    arity = present.sum(axis=1)
    is_el = arity == 1
    n_sys = sys_bits.shape[0]
    sys_cols = [np.flatnonzero(np.unpackbits(b, count=n_el)) for b in sys_bits]
    sys_label = ["-".join(el[c] for c in cols) for cols in sys_cols]

    hull_e = np.empty(n)
    vertex = np.zeros(n, dtype=bool)
    n_entries = np.empty(n, dtype=np.int64)
    decomp: list[dict[int | str, float] | None] = [None] * n

    # elemental rows (1-d spaces): scored against min(0, the lowest row of the same element), both policies
    el_col = np.argmax(present, axis=1)
    low = np.zeros(n_el)
    np.minimum.at(low, el_col[is_el], e_f[is_el])
    hull_e[is_el] = low[el_col[is_el]]
    if return_decomposition:
        lowest_row = {}
        for i in np.flatnonzero(is_el):
            c = el_col[i]
            if e_f[i] < 0 and (c not in lowest_row or e_f[i] < e_f[lowest_row[c]]):
                lowest_row[c] = i
        for i in np.flatnonzero(is_el):
            c = el_col[i]
            decomp[i] = {int(lowest_row[c]): 1.0} if c in lowest_row else {el[c]: 1.0}

    from scipy.spatial import QhullError

    solver = _hull_qhull if method == "qhull" else _hull_lp
    for s in range(n_sys):
        cols = sys_cols[s]
        members = np.flatnonzero(((packed & ~sys_bits[s]) == 0).all(axis=1))  # rows in the space (subsets)
        rows = np.flatnonzero(sys_of == s)
        n_entries[rows] = rows.size if min_entries_scope == "system" else members.size
        k = cols.size
        if k == 1:
            continue
        pts = members if corner_policy == "lowest" else members[~is_el[members]]
        x_pts = np.concatenate([np.eye(k), x[np.ix_(pts, cols)]])
        e_pts = np.concatenate([np.zeros(k), e_f[pts]])
        x_q = x[np.ix_(rows, cols)]
        try:
            h, verts, lam, on_hull = solver(x_pts, e_pts, x_q)
        except (QhullError, RuntimeError):
            if method == "lp":
                raise
            h, verts, lam, on_hull = _hull_lp(x_pts, e_pts, x_q)  # qhull precision failure: the exact LP
        hull_e[rows] = h
        hull_rows = pts[on_hull[on_hull >= k] - k]
        vertex[hull_rows] = True
        if return_decomposition:
            for r, v, w in zip(rows, verts, lam, strict=True):
                d: dict[int | str, float] = {}
                for vi, wi in zip(v, w, strict=True):
                    if wi > 1e-12:
                        key: int | str = el[cols[vi]] if vi < k else int(pts[vi - k])
                        d[key] = d.get(key, 0.0) + float(wi)
                decomp[r] = d

    eh = np.maximum(e_f - hull_e, 0.0)
    vertex_cmp = vertex & ~is_el
    eh[vertex_cmp] = 0.0  # a vertex of its own lower hull lies on it by definition (no round-off residue)
    if return_decomposition:
        for i in np.flatnonzero(vertex_cmp):
            decomp[i] = {int(i): 1.0}
    return HullResult(
        e_above_hull=eh,
        hull_energy=hull_e,
        formation_energy=e_f,
        system=tuple(sys_label[s] for s in sys_of),
        n_entries=n_entries,
        scored=n_entries >= min_entries,
        elements=el,
        n_systems=int(n_sys),
        corner_policy=corner_policy,
        min_entries=int(min_entries),
        method=method,
        decomposition=tuple(decomp) if return_decomposition else None,  # type: ignore[arg-type]
    )


# ----------------------------------------------------------------------------------------- classification
def _cutoffs(window: float, threshold: float, window_side: str) -> tuple[float, float]:
    if window_side not in ("both", "reference", "model"):
        raise ValueError(f"window_side: expected 'both', 'reference' or 'model', got {window_side!r}")
    ref_cut = threshold + (window if window_side in ("both", "reference") else 0.0)
    model_cut = threshold + (window if window_side in ("both", "model") else 0.0)
    return ref_cut, model_cut


def _pair(eh_model: Any, eh_ref: Any, mask: Any) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(eh_model, dtype=np.float64)
    b = np.asarray(eh_ref, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"eh_model: expected a 1-d array, got shape {a.shape}")
    if b.shape != a.shape:
        raise ValueError(f"eh_ref: expected shape {a.shape} (as eh_model), got {b.shape}")
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != a.shape or m.dtype != bool:
            raise ValueError(f"mask: expected a boolean array of shape {a.shape}")
        a, b = a[m], b[m]
    if a.size == 0:
        raise ValueError("eh_model: no compounds to score")
    if not (np.all(np.isfinite(a))):
        raise ValueError("eh_model: entries must be finite (drop unscored compounds with mask=)")
    if not (np.all(np.isfinite(b))):
        raise ValueError("eh_ref: entries must be finite (drop unscored compounds with mask=)")
    return a, b


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _check_window(w: Any, name: str) -> np.ndarray:
    a = np.asarray(w, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name}: must be finite and >= 0 (eV/atom), got {w!r}")
    return a


def stability_window_sweep(
    eh_model: np.ndarray | Sequence[float],
    eh_ref: np.ndarray | Sequence[float],
    windows: np.ndarray | Sequence[float] = DEFAULT_STABILITY_WINDOWS,
    threshold: float = 0.0,
    *,
    window_side: WindowSide = "both",
    mask: np.ndarray | None = None,
) -> StabilityWindowSweep:
    """Hull-F1 at every window in ``windows`` (eV/atom), vectorised over windows and compounds.

    Definitions as :func:`stability_scores`; default windows are the seed's sweep, 10 to 50 meV/atom
    (Supplementary Table 13). ``docs/controls.md``, "Convex hull and stability".
    """
    a, b = _pair(eh_model, eh_ref, mask)
    w = _check_window(windows, "windows")
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"windows: expected a non-empty 1-d sequence, got shape {w.shape}")
    if not np.isfinite(threshold):
        raise ValueError(f"threshold: must be finite, got {threshold!r}")
    cuts = [_cutoffs(float(wi), float(threshold), window_side) for wi in w]
    ref_cut = np.array([c[0] for c in cuts])[:, None]
    model_cut = np.array([c[1] for c in cuts])[:, None]
    true = b[None, :] <= ref_cut
    pred = a[None, :] <= model_cut
    tp = np.sum(true & pred, axis=1)
    fp = np.sum(~true & pred, axis=1)
    fn = np.sum(true & ~pred, axis=1)
    tn = np.sum(~true & ~pred, axis=1)
    return StabilityWindowSweep(
        windows=w,
        precision=_ratio(tp, tp + fp),
        recall=_ratio(tp, tp + fn),
        f1=_ratio(2 * tp, 2 * tp + fp + fn),
        accuracy=(tp + tn) / a.size,
        n_stable=tp + fn,
        n_predicted_stable=tp + fp,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        mae=float(np.mean(np.abs(a - b))),
        n=int(a.size),
        threshold=float(threshold),
        window_side=window_side,
    )


def stability_scores(
    eh_model: np.ndarray | Sequence[float],
    eh_ref: np.ndarray | Sequence[float],
    window: float = 0.025,
    threshold: float = 0.0,
    *,
    window_side: WindowSide = "both",
    mask: np.ndarray | None = None,
) -> StabilityScores:
    """Hull-F1: stability classification of the model's hull against the reference's (seed 001, Methods G).

    A compound is *stable* on a hull if ``E_hull <= threshold + window`` (inclusive: "lies within 25 meV/atom
    of the hull"). The seed builds the hull twice, from the reference's energies and from the model's, and
    applies the same 25 meV/atom window to both, so ``window_side="both"`` is the default; ``"reference"`` or
    ``"model"`` applies the window to one side only (the other uses ``threshold`` alone).
    ``window=0, threshold=0`` is the Matbench Discovery convention (stable iff on or below the hull).
    Positives are the reference-stable compounds: ``precision = tp/(tp+fp)``, ``recall = tp/(tp+fn)``,
    ``F1 = 2 tp/(2 tp + fp + fn)`` (their harmonic mean; NaN when undefined), ``accuracy = (tp+tn)/n`` and
    ``mae = mean |eh_model - eh_ref|`` (eV/atom). ``mask`` selects the compounds to score (e.g.
    ``HullResult.scored``). ``docs/controls.md``, "Convex hull and stability".
    """
    w = float(_check_window(window, "window"))
    sw = stability_window_sweep(eh_model, eh_ref, [w], threshold, window_side=window_side, mask=mask)
    ref_cut, model_cut = _cutoffs(w, float(threshold), window_side)
    return StabilityScores(
        precision=float(sw.precision[0]),
        recall=float(sw.recall[0]),
        f1=float(sw.f1[0]),
        accuracy=float(sw.accuracy[0]),
        mae=sw.mae,
        n=sw.n,
        n_stable=int(sw.n_stable[0]),
        n_predicted_stable=int(sw.n_predicted_stable[0]),
        tp=int(sw.tp[0]),
        fp=int(sw.fp[0]),
        fn=int(sw.fn[0]),
        tn=int(sw.tn[0]),
        window=w,
        threshold=float(threshold),
        window_side=window_side,
        ref_cutoff=ref_cut,
        model_cutoff=model_cut,
    )


# ------------------------------------------------------------------------------------------ invariance
def hull_invariance(
    compositions: np.ndarray | Sequence[str] | Sequence[Sequence[float]],
    energies: np.ndarray | Sequence[float],
    constants: np.ndarray | Sequence[float] | Mapping[str, float],
    elements: Sequence[str] | None = None,
    *,
    references: np.ndarray | Sequence[float] | Mapping[str, float] | None = None,
    window: float = 0.025,
    atol: float = 1e-9,
    hull: Callable[..., Any] = e_above_hull,
    **hull_kwargs: Any,
) -> HullInvariance:
    """Check that E_hull is invariant to a self-consistent per-element shift, and only to that.

    Seed 001, "Reference-free metrics": "a per-element shift cancels ... as long as the elemental endpoints
    shift with the compounds. A shift applied to the compounds alone does not cancel." With per-element
    constants ``c`` (eV/atom, aligned with the columns or {symbol: c}), total energies per atom
    ``E = e_f + x @ mu`` (``mu`` = ``references``, zeros if absent, in which case ``energies`` are formation
    energies; otherwise ``energies`` are total energies per atom) go through the full path total energies ->
    formation energies -> hull, three times:

    * baseline: ``hull(x, E, references=mu)``;
    * invariant: compounds and corners shifted, ``hull(x, E + x @ c, references=mu + c)``;
    * compounds only: ``hull(x, E + x @ c, references=mu)``.

    ``hull`` is any function with :func:`e_above_hull`'s signature returning a result with ``e_above_hull``
    or the array itself, so a pipeline other than this module's can be checked. ``docs/controls.md``,
    "Convex hull and stability".
    """
    x, el = _parse_compositions(compositions, elements)
    n, n_el = x.shape
    e = _as_vector(energies, n, "energies")

    def _vec(v: Any, name: str) -> np.ndarray:
        if isinstance(v, Mapping):
            missing = [s for s in el if s not in v]
            if missing:
                raise ValueError(f"{name}: no value for {missing}")
            v = [float(v[s]) for s in el]
        a = np.asarray(v, dtype=np.float64)
        if a.shape != (n_el,) or not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: expected {n_el} finite values aligned with the columns, got shape {a.shape}")
        return a

    c = _vec(constants, "constants")
    mu = np.zeros(n_el) if references is None else _vec(references, "references")
    w = float(_check_window(window, "window"))
    if not (np.isfinite(atol) and atol >= 0):
        raise ValueError(f"atol: must be finite and >= 0, got {atol!r}")

    def _eh(energy: np.ndarray, ref: np.ndarray) -> np.ndarray:
        r = hull(x, energy, el, references=ref, **hull_kwargs)
        out = np.asarray(getattr(r, "e_above_hull", r), dtype=np.float64)
        if out.shape != (n,):
            raise ValueError(f"hull: returned shape {out.shape}, expected ({n},)")
        return out

    shift = x @ c
    base = _eh(e, mu)
    inv = _eh(e + shift, mu + c)
    cmp_only = _eh(e + shift, mu)
    d_inv = float(np.max(np.abs(inv - base)))
    d_cmp = float(np.max(np.abs(cmp_only - base)))
    stable = base <= w
    return HullInvariance(
        max_change_invariant=d_inv,
        max_change_compounds_only=d_cmp,
        n_flips_invariant=int(np.sum((inv <= w) != stable)),
        n_flips_compounds_only=int(np.sum((cmp_only <= w) != stable)),
        invariant=d_inv <= atol,
        sensitive=d_cmp > atol,
        passed=(d_inv <= atol) and (d_cmp > atol),
        atol=float(atol),
        window=w,
        n=n,
    )
