"""Formation energies, elemental references, Rung-0 re-referencing and the DFT-vs-DFT noise floor.

See docs/controls.md, "Formation energies, Rung-0 and the floor". Seed 001: Methods B (formation energies
from the model's own elemental references; the S0/S1/S2 reference screen), Methods C (the single-point
control), Methods E (the floor and its per-element offset test), Methods F (Rung-0: one energy constant
per element, fit by least absolute deviation on 70 % of the chemical systems and scored on the rest) and
Supplementary Notes 5 and 7.

Everything is host-side numpy float64. Energies are eV/atom; ``fractions`` is the ``(n, n_el)`` matrix of
atomic fractions (rows sum to one), its columns in the caller's element order, and every per-element
array (references, Rung-0 constants) is aligned with those columns.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert.controls import _robust
from jaxcert.controls._result import ControlResult
from jaxcert.controls._robust import (
    BootstrapResult,
    TrimmedMAE,
    cluster_bootstrap,
    system_kfold,
    system_split,
    trimmed_mae,
)

__all__ = [
    "ElementalReferences", "Rung0Fit", "Rung0Minimality", "Rung0Report", "NoiseFloor", "AboveFloor",
    "SinglePointControl",
    "formation_energy", "elemental_references", "rung0_fit", "rung0_objective", "rung0_minimality",
    "rung0_report", "noise_floor", "above_floor", "single_point_control",
]

#: Seed 001 Methods D: the trim (eV/atom) shared by model errors and the floor.
TRIM_CUTOFF = 1.0
#: Seed 001 Methods B, screen S1: a low-energy group more than this far (eV/atom) below the rest ...
S1_GAP = 0.5
#: ... and holding at most this fraction of the element's structures is rejected.
S1_MAX_FRACTION = 0.2
#: Seed 001 Methods B, screen S2: relaxed volume off AFLOW's by more than this fraction (space group kept).
S2_MAX_VOLUME_CHANGE = 0.25
#: Seed 001 Methods F: ridge strength (see :func:`rung0_fit` for the scale we give it).
RIDGE = 1e-3
#: The energy unit (eV/atom) in which the Rung-0 objective and its ridge are expressed: meV/atom.
RIDGE_UNIT = 1e-3
#: Seed 001 Methods F: only rows with |error| below this (eV/atom) enter the fit.
FIT_CUT = 0.5
#: Seed 001 Methods F: the IRLS floor eps on |r| is lowered from 1 to 1e-4 meV/atom (here in eV/atom).
EPS_SCHEDULE = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
#: Seed 001 Supplementary Note 7: Huber threshold delta = 1.345 sigma_MAD.
HUBER_K = 1.345
#: Consistency constant of the MAD for a normal distribution.
MAD_SCALE = 1.4826
#: Seed 001 Methods F: the minimality check moves each constant by +-0.01 and +-0.1 meV/atom (in eV/atom).
MINIMALITY_STEPS = (1e-5, 1e-4)
#: Seed 001 Methods F: the held-out split keeps 70 % of the chemical systems for the fit.
TRAIN_FRACTION = 0.7
_LOSSES = ("lad", "ls", "huber")


# ============================================================================ validation
def _vec(x: Any, name: str, n: int | None = None) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a 1-D array of numbers: {err}") from None
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{name} must have length {n}, got {a.shape[0]}")
    return a


def _mask(x: Any, name: str, n: int, default: bool | None = None) -> np.ndarray:
    if x is None:
        if default is None:
            raise ValueError(f"{name} is required")
        return np.full(n, default)
    a = np.asarray(x)
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D boolean array of length {n}, got shape {a.shape}")
    if a.dtype != bool:
        if a.dtype.kind not in "iu" or not np.isin(a, (0, 1)).all():
            raise ValueError(f"{name} must be boolean (True/False or 0/1)")
        a = a.astype(bool)
    return a


def _fractions(x: Any, n: int, name: str = "fractions", atol: float = 1e-6) -> np.ndarray:
    """``(n, n_el)`` finite, non-negative atomic fractions whose rows sum to one (within ``atol``)."""
    try:
        f = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an (n, n_el) array of numbers: {err}") from None
    if f.ndim != 2 or f.shape[0] != n or f.shape[1] < 1:
        raise ValueError(f"{name} must have shape ({n}, n_el) with n_el >= 1, got {f.shape}")
    if not np.all(np.isfinite(f)) or np.any(f < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    bad = np.abs(f.sum(axis=1) - 1.0) > atol
    if bad.any():
        raise ValueError(f"{name} rows must sum to 1 (atomic fractions); row {int(np.argmax(bad))} does not")
    return f


def _loss_name(loss: Any) -> str:
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    return str(loss)


def _positive(x: Any, name: str, *, allow_zero: bool = False, allow_none: bool = False) -> float | None:
    if x is None and allow_none:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not (v >= 0.0 if allow_zero else v > 0.0) or math.isnan(v):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {x!r}")
    return v


# ============================================================================ formation energies
def formation_energy(e_per_atom: Any, fractions: Any, refs: Any) -> np.ndarray:
    r"""Formation energy per atom :math:`E_f = E/N - \sum_k x_k\,\mu_k` (seed 001 Methods B).

    ``e_per_atom``: ``(n,)`` total energies per atom (eV/atom); ``fractions``: ``(n, n_el)`` atomic fractions
    (rows sum to one); ``refs``: ``(n_el,)`` elemental reference energies :math:`\mu_k` (eV/atom), aligned with
    the columns. An element that is absent (``x_k = 0``) contributes nothing even where its reference is NaN
    (no converged reference); a structure that contains such an element gets NaN, so it drops out of every
    comparison, as the paper drops it for that model. See docs/controls.md, "Formation energies, Rung-0 and
    the floor".
    """
    e = _vec(e_per_atom, "e_per_atom")
    f = _fractions(fractions, e.shape[0])
    mu = _vec(refs, "refs", f.shape[1])
    contrib = np.where(f > 0, f * np.where(np.isfinite(mu), mu, np.nan)[None, :], 0.0)
    return e - contrib.sum(axis=1)


@dataclasses.dataclass(frozen=True)
class ElementalReferences(ControlResult):
    """Screened elemental references (seed 001 Methods B).

    ``elements`` (the column order), ``refs`` (eV/atom; NaN where no candidate survives), ``chosen`` (index of
    the candidate that sets each reference, -1 if none), ``refs_unscreened`` / ``chosen_unscreened`` (the
    plain minimum over the finite candidates), ``shift`` = refs - refs_unscreened; per-candidate masks ``s0``,
    ``s1``, ``s2`` (what each clause rejected) and ``kept``; per element ``n_candidates``, ``n_kept`` and
    ``removed`` = {element: {"S0": [indices], "S1": [...], "S2": [...]}}; ``screens`` = the clauses applied.
    """

    elements: tuple
    refs: np.ndarray
    chosen: np.ndarray
    refs_unscreened: np.ndarray
    chosen_unscreened: np.ndarray
    shift: np.ndarray
    s0: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    kept: np.ndarray
    n_candidates: np.ndarray
    n_kept: np.ndarray
    removed: dict
    screens: tuple
    s1_gap: float
    s1_max_fraction: float
    s2_max_volume_change: float
    s1_scope: str


def _segment_argmin(codes: np.ndarray, energy: np.ndarray, ok: np.ndarray, n_el: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per element, the minimum energy over rows with ``ok`` and its row index (NaN/-1 if none)."""
    idx = np.flatnonzero(ok)
    refs = np.full(n_el, np.nan)
    chosen = np.full(n_el, -1, np.int64)
    if idx.size:
        order = idx[np.lexsort((idx, energy[idx], codes[idx]))]  # by element, energy, then index
        c = codes[order]
        first = np.concatenate([[True], c[1:] != c[:-1]])
        refs[c[first]] = energy[order[first]]
        chosen[c[first]] = order[first]
    return refs, chosen


def _s1_mask(codes: np.ndarray, energy: np.ndarray, ok: np.ndarray, n_el: int, gap: float, max_fraction: float
             ) -> np.ndarray:
    """Screen S1, vectorised over elements: reject each element's lowest-energy group that sits more than
    ``gap`` below the rest and holds at most ``max_fraction`` of the element's evaluated structures.

    Within an element the evaluated energies are sorted; a split after the ``j``-th lowest (``j`` = 1, 2, ...)
    qualifies when the next energy is more than ``gap`` above it and ``j <= max_fraction * m`` (``m`` evaluated
    structures of that element). The union of all qualifying groups, i.e. the one below the highest qualifying
    split, is rejected.
    """
    out = np.zeros(codes.shape[0], bool)
    idx = np.flatnonzero(ok)
    if idx.size < 2:
        return out
    order = idx[np.lexsort((idx, energy[idx], codes[idx]))]
    c = codes[order]
    e = energy[order]
    m = np.bincount(c, minlength=n_el)
    start = np.concatenate([[0], np.cumsum(m)[:-1]])
    rank = np.arange(order.size) - start[c]                 # 0-based position within the element
    same = c[1:] == c[:-1]
    j = rank[:-1] + 1                                       # group size below the split after position i
    qualifies = same & (e[1:] - e[:-1] > gap) & (j <= max_fraction * m[c[:-1]])
    best = np.zeros(n_el, np.int64)
    np.maximum.at(best, c[:-1][qualifies], j[qualifies])
    out[order[rank < best[c]]] = True
    return out


def elemental_references(
    element: Any,
    energy: Any,
    *,
    elements: Sequence[Any] | None = None,
    n_atoms: Any = None,
    has_spacegroup: Any = None,
    volume: Any = None,
    volume_ref: Any = None,
    sg_retained: Any = None,
    screen: bool = True,
    s1_gap: float = S1_GAP,
    s1_max_fraction: float = S1_MAX_FRACTION,
    s2_max_volume_change: float = S2_MAX_VOLUME_CHANGE,
    s1_scope: str = "survivors",
) -> ElementalReferences:
    """Per element, the reference energy: the minimum relaxed energy per atom over the candidate elemental
    (unary) structures that pass the screen S0/S1/S2 of seed 001 Methods B, one model at a time.

    Args:
      element: ``(m,)`` element label of each candidate (strings or ints).
      energy: ``(m,)`` the model's relaxed energy per atom (eV/atom); NaN = failed, never a candidate.
      elements: output column order (e.g. the columns of ``fractions``); default the sorted distinct labels.
        An element with no candidate gets a NaN reference.
      n_atoms, has_spacegroup: ``(m,)`` atoms in the cell and whether AFLOW assigns it a space group. S0
        rejects a one-atom cell without a space group (AFLOW's isolated atom in a 15 A box). S0 is applied
        only when both are given.
      volume, volume_ref: ``(m,)`` relaxed and AFLOW volume per atom (A^3); sg_retained: ``(m,)`` whether the
        relaxation kept the space group. S2 rejects ``|volume/volume_ref - 1| > s2_max_volume_change`` (0.25)
        with the space group retained; without ``sg_retained`` every candidate counts as retained, so S2
        becomes a volume-only clause. S2 is applied only when both volumes are given.
      s1_gap, s1_max_fraction: S1 rejects a lowest-energy group more than ``s1_gap`` (0.5 eV/atom) below the
        rest of the element's structures that holds at most ``s1_max_fraction`` (20 %) of them (strict ``>``
        on the gap, ``<=`` on the share, as the paper words it).
      s1_scope: the paper does not say on which set S1 is evaluated. ``"survivors"`` (default): on the
        candidates that pass S0 and S2, so isolated atoms and collapsed cells neither form nor hide a group;
        ``"all"``: on every finite candidate (a structure both S1 and S0/S2 reject then shows in both masks).
        The paper's count (S1 rejects nothing beyond S0 and S2) is consistent with either.
      screen: False gives the unscreened minimum (the masks are still computed and reported).

    See docs/controls.md, "Formation energies, Rung-0 and the floor".
    """
    lab = np.asarray(element)
    if lab.ndim != 1 or lab.shape[0] == 0:
        raise ValueError(f"element must be a non-empty 1-D array of labels, got shape {lab.shape}")
    m = lab.shape[0]
    e = _vec(energy, "energy", m)
    if s1_scope not in ("survivors", "all"):
        raise ValueError(f"s1_scope must be 'survivors' or 'all', got {s1_scope!r}")
    gap = _positive(s1_gap, "s1_gap")
    frac = _positive(s1_max_fraction, "s1_max_fraction")
    dv = _positive(s2_max_volume_change, "s2_max_volume_change")
    if elements is None:
        cols = np.unique(lab)
    else:
        cols = np.asarray(list(elements))
        if cols.ndim != 1 or cols.shape[0] == 0 or np.unique(cols).shape[0] != cols.shape[0]:
            raise ValueError("elements must be a non-empty sequence of distinct labels")
    lookup = {v: i for i, v in enumerate(cols.tolist())}
    try:
        codes = np.array([lookup[v] for v in lab.tolist()], np.int64)
    except KeyError as err:
        raise ValueError(f"element label {err.args[0]!r} is not in elements") from None
    n_el = cols.shape[0]
    finite = np.isfinite(e)
    screens = []

    s0 = np.zeros(m, bool)
    if (n_atoms is None) != (has_spacegroup is None):
        raise ValueError("S0 needs both n_atoms and has_spacegroup (or neither)")
    if n_atoms is not None:
        na = _vec(n_atoms, "n_atoms", m)
        if np.any(~np.isfinite(na)) or np.any(na < 1):
            raise ValueError("n_atoms must be finite and >= 1")
        s0 = (na == 1) & ~_mask(has_spacegroup, "has_spacegroup", m)
        screens.append("S0")

    s2 = np.zeros(m, bool)
    if (volume is None) != (volume_ref is None):
        raise ValueError("S2 needs both volume and volume_ref (or neither)")
    if volume is not None:
        v = _vec(volume, "volume", m)
        v0 = _vec(volume_ref, "volume_ref", m)
        if np.any(~(v0 > 0)):
            raise ValueError("volume_ref must be > 0")
        with np.errstate(invalid="ignore"):
            s2 = (np.abs(v / v0 - 1.0) > dv) & _mask(sg_retained, "sg_retained", m, default=True)
        screens.append("S2")

    s1_pool = finite & ~s0 & ~s2 if s1_scope == "survivors" else finite
    s1 = _s1_mask(codes, e, s1_pool, n_el, gap, frac)
    screens.insert(1 if "S0" in screens else 0, "S1")

    kept = finite & ~(s0 | s1 | s2)
    refs_u, chosen_u = _segment_argmin(codes, e, finite, n_el)
    refs, chosen = _segment_argmin(codes, e, kept if screen else finite, n_el)
    removed = {}
    for k, name in enumerate(cols.tolist()):
        sel = codes == k
        removed[str(name)] = {s: np.flatnonzero(sel & msk).tolist() for s, msk in (("S0", s0), ("S1", s1), ("S2", s2))}
    return ElementalReferences(
        elements=tuple(cols.tolist()), refs=refs, chosen=chosen, refs_unscreened=refs_u,
        chosen_unscreened=chosen_u, shift=refs - refs_u, s0=s0, s1=s1, s2=s2, kept=kept,
        n_candidates=np.bincount(codes[finite], minlength=n_el), n_kept=np.bincount(codes[kept], minlength=n_el),
        removed=removed, screens=tuple(screens), s1_gap=gap, s1_max_fraction=frac, s2_max_volume_change=dv,
        s1_scope=s1_scope)


# ============================================================================ Rung-0
@dataclasses.dataclass(frozen=True)
class Rung0Fit(ControlResult):
    """One energy constant per element (seed 001 Methods F).

    ``constants``: ``(n_el,)`` eV/atom, aligned with the columns of ``fractions``; the corrected error is
    ``err - fractions @ constants`` (:meth:`correct`). ``support``: training rows containing each element (an
    element without support gets 0, the ridge minimiser). ``objective``: the minimised objective J (in
    ``ridge_unit`` energy units, see :func:`rung0_fit`); ``train_mae``: mean ``|residual|`` over the fit rows
    (eV/atom); ``n_train`` fit rows, ``n_cut`` training rows left out by ``fit_cut``; ``huber_delta`` (eV/atom,
    NaN unless Huber); ``n_iter`` IRLS iterations (plus polish sweeps); ``converged``: the last IRLS stage met
    ``tol``.
    """

    constants: np.ndarray
    loss: str
    ridge: float
    ridge_unit: float
    fit_cut: float | None
    support: np.ndarray
    n_train: int
    n_cut: int
    objective: float
    train_mae: float
    huber_delta: float
    eps_schedule: tuple
    n_iter: int
    converged: bool

    def correct(self, err: Any, fractions: Any) -> np.ndarray:
        """``err - fractions @ constants``: the re-referenced errors (eV/atom)."""
        e = _vec(err, "err")
        return e - _fractions(fractions, e.shape[0]) @ self.constants


def _rho(t: np.ndarray, loss: str, d: float) -> np.ndarray:
    """Per-row loss in scaled units: LAD |t|, LS t^2, Huber t^2 / (2d) (|t| <= d) or |t| - d/2."""
    if loss == "lad":
        return np.abs(t)
    if loss == "ls":
        return t * t
    a = np.abs(t)
    return np.where(a <= d, t * t / (2.0 * d), a - 0.5 * d)


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(a, b, rcond=None)[0]


class _Design:
    """The fit's design matrix with its weighted normal equations.

    Atomic-fraction rows hold two or three non-zeros, so when the matrix is sparse (at most a quarter of the
    cells non-zero) X^T W X and X^T W y are accumulated from the non-zeros and their within-row pairs with
    ``np.bincount`` (O(sum_i nnz_i^2) per solve instead of O(n k^2)); otherwise dense products.
    """

    def __init__(self, x: np.ndarray):
        self.x = x
        self.n, self.k = x.shape
        rows, cols = np.nonzero(x)
        self.sparse = self.k > 1 and rows.size <= 0.25 * x.size
        if self.sparse:
            vals = x[rows, cols]
            m = np.bincount(rows, minlength=self.n)
            start = np.concatenate([[0], np.cumsum(m)[:-1]])
            rep = m[rows]                                          # each non-zero pairs with its row's non-zeros
            a = np.repeat(np.arange(rows.size), rep)
            first = np.repeat(np.cumsum(rep) - rep, rep)
            b = start[rows[a]] + (np.arange(a.size) - first)
            self.rows, self.cols, self.vals = rows, cols, vals
            self.pair_row = rows[a]
            self.pair_cell = cols[a] * self.k + cols[b]
            self.pair_val = vals[a] * vals[b]

    def matvec(self, c: np.ndarray) -> np.ndarray:
        if self.sparse:
            return np.bincount(self.rows, self.vals * c[self.cols], self.n)
        return self.x @ c

    def solve(self, y: np.ndarray, w: np.ndarray | None, lam: float) -> np.ndarray:
        """argmin sum w (y - x c)^2 + lam |c|^2 (min-norm where lam = 0 and the equations are singular)."""
        if self.sparse:
            wr = np.ones(self.n) if w is None else w
            a = np.bincount(self.pair_cell, wr[self.pair_row] * self.pair_val, self.k * self.k).reshape(self.k, self.k)
            rhs = np.bincount(self.cols, wr[self.rows] * self.vals * y[self.rows], self.k)
        else:
            xw = self.x if w is None else self.x * w[:, None]
            a = xw.T @ self.x
            rhs = xw.T @ y
        if lam > 0:
            a[np.diag_indices_from(a)] += lam
            return _solve(a, rhs)
        return np.linalg.lstsq(a, rhs, rcond=None)[0]


def _lad_coordinate_polish(x: np.ndarray, y: np.ndarray, c: np.ndarray, lam: float, max_sweeps: int = 20
                           ) -> tuple[np.ndarray, int]:
    """Exact coordinate-wise minimisation of sum |y - x c| + lam |c|^2 (scaled units), started at ``c``.

    Along coordinate k the objective is sum_i x_ik |b_i - D| + lam (c_k + D)^2 with b_i = r_i / x_ik: convex,
    piecewise with breakpoints b_i. Its derivative g(D) = S(D) + 2 lam (c_k + D), S(D) = (weight of b_i < D) -
    (weight of b_i > D), is increasing; the minimiser is the breakpoint where g changes sign or, with lam > 0,
    the interior zero of g on the interval where it does. Never increases the objective; after IRLS it takes
    the last fraction of a eps to the vertex, so that the single-constant minimality check is met exactly.
    """
    c = c.copy()
    r = y - x @ c
    cols = [np.flatnonzero(x[:, k] > 0) for k in range(x.shape[1])]
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):  # noqa: B007
        moved = 0.0
        for k, rows in enumerate(cols):
            if rows.size == 0:
                continue
            xk = x[rows, k]
            b = r[rows] / xk
            o = np.argsort(b, kind="stable")
            b, w = b[o], xk[o]
            wtot = w.sum()
            s_right = 2.0 * np.cumsum(w) - wtot                  # S just right of each breakpoint
            s_left = s_right - 2.0 * w                           # S just left of each breakpoint
            g_right = s_right + 2.0 * lam * (c[k] + b)
            j = int(np.searchsorted(g_right, 0.0, side="left"))  # first breakpoint with g(b+) >= 0
            if j == b.size:                                      # only with lam > 0: beyond the last breakpoint
                d = -wtot / (2.0 * lam) - c[k]
            elif s_left[j] + 2.0 * lam * (c[k] + b[j]) <= 0.0:
                d = b[j]
            else:                                                # interior zero left of b[j] (lam > 0 here)
                d = -s_left[j] / (2.0 * lam) - c[k]
            if d != 0.0:
                f_old = np.abs(r[rows]).sum()
                r_new = r[rows] - xk * d
                f_new = np.abs(r_new).sum()
                gain = (f_old + lam * c[k] ** 2) - (f_new + lam * (c[k] + d) ** 2)
                if gain > 0.0:
                    c[k] += d
                    r[rows] = r_new
                    moved = max(moved, abs(d))
        if moved == 0.0:
            break
    return c, sweeps


def rung0_fit(
    err: Any,
    fractions: Any,
    train_mask: Any = None,
    loss: str = "lad",
    ridge: float = RIDGE,
    *,
    fit_cut: float | None = FIT_CUT,
    ridge_unit: float = RIDGE_UNIT,
    eps_schedule: Sequence[float] = EPS_SCHEDULE,
    huber_delta: float | None = None,
    max_iter: int = 1000,
    tol: float = 1e-9,
    polish: bool = True,
) -> Rung0Fit:
    r"""Rung-0: one constant per element minimising :math:`J(c)=\sum_i \rho\big((e_i - x_i\cdot c)/u\big)
    + \lambda\,\lVert c/u\rVert^2` over the training rows (seed 001 Methods F).

    Args:
      err: ``(n,)`` per-structure errors E_f(model) - E_f(reference), eV/atom (NaN rows are skipped).
      fractions: ``(n, n_el)`` atomic fractions; the constants align with its columns.
      train_mask: ``(n,)`` rows the fit may use (default all); the paper fits 70 % of the chemical systems.
      loss: ``"lad"`` (the paper's: the fit minimises the absolute error it scores), ``"ls"``, ``"huber"``.
      ridge: lambda = 1e-3 (the paper's value, "needed because the fractions sum to one").
      fit_cut: only rows with ``|err| < fit_cut`` (0.5 eV/atom, the paper's) enter the fit; None = no cut.
      ridge_unit: u, the energy unit (eV/atom) the objective is written in. The paper gives lambda without a
        scale; we read it as a plain (un-normalised) sum of per-row losses plus lambda |c|^2 with energies in
        meV/atom (u = 1e-3 eV/atom, the unit of the paper's eps schedule and its threshold comparisons). For
        "ls" u cancels and lambda is dimensionless, as in an ordinary ridge ``(X^T X + lambda I) c = X^T e``;
        for "lad" and "huber" lambda carries 1/u. With sums over thousands of rows it only fixes the
        directions the data do not determine; pass ``ridge_unit=1.0`` for the same sum in eV/atom.
      eps_schedule: LAD by iteratively reweighted least squares with weights 1/max(|r|, eps) (each step solves
        ``(X^T W X + 2 lambda I) c = X^T W e``, the stationarity condition of the eps-smoothed objective),
        eps lowered through 1, 0.1, 0.01, 1e-3, 1e-4 meV/atom (values in eV/atom); each stage but the last is
        iterated until no constant moves by more than eps/10 (a warm start for the next), the last until no
        constant moves by more than ``tol`` x max|c| (IRLS converges linearly, slowly at small eps: hence the
        large ``max_iter``). Then (``polish``) exact coordinate-wise minimisation of the unsmoothed LAD
        objective (a weighted median per constant, with the ridge), which never raises J and takes the
        solution onto the LAD vertex, so no single constant can be moved to lower J.
      huber_delta: Huber threshold in eV/atom; None (default) = 1.345 sigma_MAD with sigma_MAD = 1.4826
        median|r - median r| re-estimated from the current residuals at every iteration (as in iteratively
        rescaled M-estimation; the paper's delta = 1.345 sigma_MAD does not say of which residuals), floored
        at the last eps. Huber rho is scaled like LAD: t^2 / (2 delta) inside delta, |t| - delta / 2 outside,
        so the ridge means the same as for "lad" (the eps-smoothed LAD objective is this Huber loss with
        delta = eps, and both are solved by the same reweighting, weights 1/max(|r|, delta)).
      max_iter, tol: IRLS iterations per stage and the relative-change stop on c (Huber: to ``tol`` alone).

    Starts from the ridge least-squares solution. See docs/controls.md, "Formation energies, Rung-0 and the
    floor".
    """
    e = _vec(err, "err")
    n = e.shape[0]
    f = _fractions(fractions, n)
    loss = _loss_name(loss)
    lam = _positive(ridge, "ridge", allow_zero=True)
    u = _positive(ridge_unit, "ridge_unit")
    cut = _positive(fit_cut, "fit_cut", allow_none=True)
    hd = _positive(huber_delta, "huber_delta", allow_none=True)
    eps = tuple(float(v) for v in eps_schedule)
    if not eps or any(not v > 0 for v in eps):
        raise ValueError("eps_schedule must be a non-empty sequence of values > 0")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    train = _mask(train_mask, "train_mask", n, default=True) & np.isfinite(e)
    rows = train & (np.abs(e) < cut) if cut is not None else train
    n_train = int(rows.sum())
    if n_train == 0:
        raise ValueError("no training rows (train_mask, finite err and fit_cut leave none)")
    x_all = f[rows]
    support = (x_all > 0).sum(axis=0).astype(np.int64)
    cols = np.flatnonzero(support > 0)
    x = x_all[:, cols]
    y = e[rows] / u
    design = _Design(x)

    c = design.solve(y, None, lam)
    n_iter, converged, d_scaled = 0, True, math.nan
    if loss == "lad":
        for stage, ep in enumerate(eps):
            ept = ep / u
            last = stage == len(eps) - 1
            converged = False
            for _ in range(max_iter):
                c_new = design.solve(y, 1.0 / np.maximum(np.abs(y - design.matvec(c)), ept), 2.0 * lam)
                n_iter += 1
                step = np.max(np.abs(c_new - c))
                c = c_new
                if step <= (tol * max(1.0, np.max(np.abs(c))) if last else 0.1 * ept):
                    converged = True
                    break
        if polish:
            c, sweeps = _lad_coordinate_polish(x, y, c, lam)
            n_iter += sweeps
    elif loss == "huber":
        converged = False
        for _ in range(max_iter):
            r = y - design.matvec(c)
            d_scaled = hd / u if hd is not None else HUBER_K * MAD_SCALE * float(np.median(np.abs(r - np.median(r))))
            d_scaled = max(d_scaled, eps[-1] / u)
            c_new = design.solve(y, 1.0 / np.maximum(np.abs(r), d_scaled), 2.0 * lam)
            n_iter += 1
            step = np.max(np.abs(c_new - c))
            c = c_new
            if step <= tol * max(1.0, np.max(np.abs(c))):
                converged = True
                break
    constants = np.zeros(f.shape[1])
    constants[cols] = c * u
    r = y - design.matvec(c)
    obj = float(_rho(r, loss, d_scaled).sum() + lam * np.sum(c * c))
    return Rung0Fit(constants=constants, loss=loss, ridge=lam, ridge_unit=u, fit_cut=cut, support=support,
                    n_train=n_train, n_cut=int(train.sum()) - n_train, objective=obj,
                    train_mae=float(np.mean(np.abs(r)) * u), huber_delta=d_scaled * u if loss == "huber" else math.nan,
                    eps_schedule=eps, n_iter=n_iter, converged=bool(converged))


def _fit_rows(err: np.ndarray, train_mask: Any, fit: Rung0Fit) -> np.ndarray:
    rows = _mask(train_mask, "train_mask", err.shape[0], default=True) & np.isfinite(err)
    return rows & (np.abs(err) < fit.fit_cut) if fit.fit_cut is not None else rows


def rung0_objective(err: Any, fractions: Any, train_mask: Any, constants: Any, fit: Rung0Fit) -> float:
    """The objective J of ``fit`` (its loss, ridge, unit, fit_cut and Huber delta) at ``constants``.

    Used to compare candidate constant vectors on one footing (e.g. the least-squares or one-constant
    solution scored by the LAD objective, the paper's substitution check).
    """
    e = _vec(err, "err")
    f = _fractions(fractions, e.shape[0])
    c = _vec(constants, "constants", f.shape[1])
    rows = _fit_rows(e, train_mask, fit)
    u = fit.ridge_unit
    t = (e[rows] - f[rows] @ c) / u
    return float(_rho(t, fit.loss, fit.huber_delta / u).sum() + fit.ridge * np.sum((c / u) ** 2))


@dataclasses.dataclass(frozen=True)
class Rung0Minimality(ControlResult):
    """The single-constant minimality check (seed 001 Methods F).

    ``delta``: ``(n_el, 2 * len(steps))`` change of the objective J when constant k is moved by
    ``+steps[0], -steps[0], +steps[1], -steps[1], ...`` (eV/atom; columns in ``moves``); ``passed`` when no move
    lowers J by more than ``tol``; ``worst`` = the most negative change, at (``worst_element``, ``worst_move``).
    Elements without training support are not moved (their row is 0).
    """

    passed: bool
    delta: np.ndarray
    moves: np.ndarray
    worst: float
    worst_element: int
    worst_move: float
    tol: np.ndarray


def rung0_minimality(err: Any, fractions: Any, train_mask: Any, fit: Rung0Fit, constants: Any = None,
                     steps: Sequence[float] = MINIMALITY_STEPS) -> Rung0Minimality:
    """Check that no single constant moved by ±0.01 or ±0.1 meV/atom (``steps`` in eV/atom) lowers the
    training objective of ``fit`` (its loss and ridge, on its fit rows), at ``constants`` (default the fit's).

    The change is summed over the rows that contain the element only, so it is exact to round-off; a move
    fails when it lowers J by more than the round-off bound 64 * machine-eps * (the summed magnitude of the
    terms that change).
    """
    e = _vec(err, "err")
    f = _fractions(fractions, e.shape[0])
    c = fit.constants if constants is None else _vec(constants, "constants", f.shape[1])
    st = np.asarray([float(s) for s in steps])
    if st.size == 0 or np.any(~(st > 0)):
        raise ValueError("steps must be a non-empty sequence of values > 0")
    moves = np.stack([st, -st], axis=1).ravel()
    rows = _fit_rows(e, train_mask, fit)
    u, lam = fit.ridge_unit, fit.ridge
    d = fit.huber_delta / u
    x = f[rows]
    r = (e[rows] - x @ c) / u
    delta = np.zeros((f.shape[1], moves.size))
    tol = np.zeros_like(delta)
    mv = moves / u
    ck = c / u
    for k in range(f.shape[1]):
        sel = np.flatnonzero(x[:, k] > 0)
        if sel.size == 0:
            continue
        rk = r[sel][:, None]
        xk = x[sel, k][:, None]
        new = _rho(rk - xk * mv[None, :], fit.loss, d)
        old = _rho(rk, fit.loss, d)
        ridge_change = lam * ((ck[k] + mv) ** 2 - ck[k] ** 2)
        delta[k] = (new - old).sum(axis=0) + ridge_change
        tol[k] = 64 * np.finfo(float).eps * ((new + old).sum(axis=0) + lam * ((ck[k] + mv) ** 2 + ck[k] ** 2))
    worst = np.unravel_index(np.argmin(delta), delta.shape)
    return Rung0Minimality(passed=bool(np.all(delta >= -tol)), delta=delta, moves=moves,
                           worst=float(delta[worst]), worst_element=int(worst[0]), worst_move=float(moves[worst[1]]),
                           tol=tol)


@dataclasses.dataclass(frozen=True)
class Rung0Report(ControlResult):
    """Held-out Rung-0 (seed 001 Methods F, Table 3 "After Rung-0", Supplementary Note 7).

    ``raw`` / ``corrected``: trimmed MAE of the held-out errors before / after subtracting the constants
    (each trimmed on its own errors); ``gain`` = raw - corrected (eV/atom), an upper bound on what any change
    of elemental reference could explain (Rung-0 removes everything linear in composition, convention or not);
    ``gain_fraction`` = gain / raw. ``fit``; ``minimality``; ``alternatives``: the fit's objective at the
    least-squares, Huber and one-constant solutions (LAD fits only; ``beats_alternatives`` when none is lower);
    ``cv_raw`` / ``cv_corrected``: per-fold held-out trimmed MAEs of the system-disjoint folds (NaN arrays if
    no folds), ``cv_std`` (ddof 1) and ``cv_mean`` of the corrected ones; ``ref_corr``: Pearson r, p and n of
    the constants against a supplied per-element reference difference over the elements with at least
    ``min_support`` training rows (NaN if not supplied).
    """

    fit: Rung0Fit
    raw: TrimmedMAE
    corrected: TrimmedMAE
    gain: float
    gain_fraction: float
    n_test: int
    minimality: Rung0Minimality
    alternatives: dict
    beats_alternatives: bool
    cv_raw: np.ndarray
    cv_corrected: np.ndarray
    cv_mean: float
    cv_std: float
    ref_corr_r: float
    ref_corr_p: float
    ref_corr_n: int


def _pearson(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Pearson r and its two-sided p-value under independence (t with n - 2 dof via the incomplete beta)."""
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return math.nan, math.nan
    from scipy.special import betainc  # scipy ships with jax

    r = float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))
    dof = a.size - 2
    if abs(r) == 1.0:
        return r, 0.0
    t2 = r * r * dof / (1.0 - r * r)
    return r, float(betainc(0.5 * dof, 0.5, dof / (dof + t2)))


def rung0_report(
    err: Any,
    fractions: Any,
    train_mask: Any,
    *,
    test_mask: Any = None,
    loss: str = "lad",
    ridge: float = RIDGE,
    cutoff: float = TRIM_CUTOFF,
    folds: Any = None,
    groups: Any = None,
    n_folds: int = 5,
    salt: str = "jaxcert",
    ref_diff: Any = None,
    min_support: int = 20,
    steps: Sequence[float] = MINIMALITY_STEPS,
    compare_fits: bool = True,
    **fit_kwargs: Any,
) -> Rung0Report:
    """Rung-0 as the paper reports it: fit on ``train_mask``, score on ``test_mask`` (default ``~train_mask``).

    ``folds``: ``(n,)`` integer fold label per row (system-disjoint; a negative label leaves a row out of the
    CV); each fold is held out in turn, the fit uses every other labelled row. Alternatively ``groups`` (the
    chemical system of each row) with ``n_folds`` (5, Supplementary Note 7) and ``salt`` builds them with
    :func:`jaxcert.controls.system_kfold`.
    ``ref_diff``: ``(n_el,)`` per-element reference differences (e.g. MP - AFLOW, or published corrections) to
    correlate with the constants. ``fit_kwargs`` go to :func:`rung0_fit` for every fit. See docs/controls.md,
    "Formation energies, Rung-0 and the floor".
    """
    e = _vec(err, "err")
    n = e.shape[0]
    f = _fractions(fractions, n)
    train = _mask(train_mask, "train_mask", n)
    test = ~train if test_mask is None else _mask(test_mask, "test_mask", n)
    if np.any(train & test):
        raise ValueError("train_mask and test_mask overlap")
    fit = rung0_fit(e, f, train, loss, ridge, **fit_kwargs)
    raw = trimmed_mae(e[test], cutoff)
    cor = trimmed_mae(fit.correct(e, f)[test], cutoff)
    gain = raw.value - cor.value
    mini = rung0_minimality(e, f, train, fit, steps=steps)

    alternatives: dict[str, float] = {}
    beats = True
    if compare_fits and fit.loss == "lad":
        kw = {k: v for k, v in fit_kwargs.items() if k in ("fit_cut", "ridge_unit")}
        cand = {"ls": rung0_fit(e, f, train, "ls", ridge, **kw).constants,
                "huber": rung0_fit(e, f, train, "huber", ridge, **kw).constants}
        one = rung0_fit(e, np.ones((n, 1)), train, "lad", ridge, **kw).constants[0]
        cand["one_constant"] = np.full(f.shape[1], one)
        alternatives = {"lad": fit.objective}
        for name, cc in cand.items():
            alternatives[name] = rung0_objective(e, f, train, cc, fit)
        beats = all(alternatives["lad"] <= v * (1 + 1e-12) for k, v in alternatives.items() if k != "lad")

    if folds is None and groups is not None:
        folds = system_kfold(groups, n_folds, salt=salt)
    cv_raw = cv_cor = np.array([np.nan])
    if folds is not None:
        fl = np.asarray(folds)
        if fl.ndim != 1 or fl.shape[0] != n or fl.dtype.kind not in "iu":
            raise ValueError(f"folds must be a 1-D integer array of length {n}")
        labels = np.unique(fl[fl >= 0])
        if labels.size < 2:
            raise ValueError("folds must hold at least two distinct non-negative labels")
        cv_raw = np.empty(labels.size)
        cv_cor = np.empty(labels.size)
        for j, lab in enumerate(labels):
            held = fl == lab
            fj = rung0_fit(e, f, (fl >= 0) & ~held, loss, ridge, **fit_kwargs)
            cv_raw[j] = trimmed_mae(e[held], cutoff).value
            cv_cor[j] = trimmed_mae(fj.correct(e, f)[held], cutoff).value

    r = p = math.nan
    n_corr = 0
    if ref_diff is not None:
        rd = _vec(ref_diff, "ref_diff", f.shape[1])
        ok = np.isfinite(rd) & (fit.support >= min_support)
        n_corr = int(ok.sum())
        r, p = _pearson(fit.constants[ok], rd[ok])
    return Rung0Report(
        fit=fit, raw=raw, corrected=cor, gain=float(gain),
        gain_fraction=float(gain / raw.value) if raw.value else math.nan,
        n_test=int((test & np.isfinite(e)).sum()), minimality=mini, alternatives=alternatives,
        beats_alternatives=bool(beats), cv_raw=cv_raw, cv_corrected=cv_cor,
        cv_mean=float(np.mean(cv_cor)), cv_std=float(np.std(cv_cor, ddof=1)) if cv_cor.size > 1 else math.nan,
        ref_corr_r=r, ref_corr_p=p, ref_corr_n=n_corr)


# ============================================================================ the noise floor
@dataclasses.dataclass(frozen=True)
class NoiseFloor(ControlResult):
    """The DFT-vs-DFT floor between databases a and b (seed 001 Methods E, Table 2, Supplementary Note 5).

    ``median_abs``: median |e_a - e_b| over all finite pairs (before the trim, as the paper's floor medians);
    ``trimmed``: the trimmed MAE under the same 1 eV/atom trim as the model errors; ``n`` pairs, ``n_systems``.
    ``r2_in_sample``: R^2 of a least-squares per-element offset fit to all pairs; ``r2_held_out``: R^2 on the
    held-out systems of a fit to the training systems, both restricted to pairs with |difference| <
    ``r2_cut``; ``held_out_raw`` / ``held_out_corrected``: held-out trimmed MAE before / after subtracting that
    offset ("subtracting it does not lower the floor"); ``offsets``: the held-out fit's constants.
    """

    median_abs: float
    trimmed: TrimmedMAE
    n: int
    n_systems: int
    r2_in_sample: float
    r2_held_out: float
    held_out_raw: float
    held_out_corrected: float
    n_train: int
    n_test: int
    offsets: np.ndarray
    r2_cut: float


def _r2(d: np.ndarray, pred: np.ndarray) -> float:
    ss = np.sum((d - d.mean()) ** 2)
    return float(1.0 - np.sum((d - pred) ** 2) / ss) if d.size > 1 and ss > 0 else math.nan


def noise_floor(
    e_a: Any,
    e_b: Any,
    groups: Any,
    fractions: Any,
    train_mask: Any = None,
    *,
    cutoff: float = TRIM_CUTOFF,
    r2_cut: float = FIT_CUT,
    ridge: float = RIDGE,
    test_fraction: float = 1.0 - TRAIN_FRACTION,
    salt: str = "jaxcert",
) -> NoiseFloor:
    """Median, trimmed MAE and per-element-offset R^2 of ``e_a - e_b`` on matched pairs (seed 001 Methods E).

    ``e_a``, ``e_b``: ``(n,)`` formation energies (eV/atom) of the same crystals in two databases; ``groups``:
    the chemical system of each pair; ``fractions``: ``(n, n_el)``. ``train_mask`` selects the fit systems of
    the held-out R^2 (default: the systems that :func:`jaxcert.controls.system_split` with ``test_fraction``
    (0.3) and ``salt`` does not hold out).

    R^2 = 1 - sum (d - x.c)^2 / sum (d - mean d)^2 with a ridge least-squares offset c (``ridge``,
    dimensionless for least squares); the fractions sum to one, so the fit carries its own intercept and the
    mean-centred R^2 is the right one. In-sample: all finite pairs, as the paper's Table 2 column. Held out:
    the paper "leaves out the pairs that disagree by 500 meV/atom or more"; we leave them out of both the fit
    and the scoring, and centre the held-out R^2 on the held-out mean (it can be negative). See
    docs/controls.md, "Formation energies, Rung-0 and the floor".
    """
    a = _vec(e_a, "e_a")
    n = a.shape[0]
    b = _vec(e_b, "e_b", n)
    f = _fractions(fractions, n)
    codes, _ = _robust._labels(groups, n, "groups")
    cut = _positive(r2_cut, "r2_cut")
    d = a - b
    ok = np.isfinite(d)
    if not ok.any():
        raise ValueError("e_a - e_b has no finite pair")
    tm = trimmed_mae(d[ok], cutoff)
    full = rung0_fit(d, f, ok, "ls", ridge, fit_cut=None)
    r2_in = _r2(d[ok], f[ok] @ full.constants)
    if train_mask is None:
        train = ~system_split(groups, test_fraction, salt=salt)
    else:
        train = _mask(train_mask, "train_mask", n)
    small = ok & (np.abs(d) < cut)
    tr, te = small & train, small & ~train
    if not tr.any() or not te.any():
        raise ValueError("the held-out R^2 needs pairs with |e_a - e_b| < r2_cut on both sides of train_mask")
    ho = rung0_fit(d, f, tr, "ls", ridge, fit_cut=None)
    resid = d - f @ ho.constants
    test_all = ok & ~train
    return NoiseFloor(
        median_abs=float(np.median(np.abs(d[ok]))), trimmed=tm, n=int(ok.sum()),
        n_systems=int(np.unique(codes[ok]).size), r2_in_sample=r2_in, r2_held_out=_r2(d[te], f[te] @ ho.constants),
        held_out_raw=trimmed_mae(d[test_all], cutoff).value,
        held_out_corrected=trimmed_mae(resid[test_all], cutoff).value,
        n_train=int(tr.sum()), n_test=int(te.sum()), offsets=ho.constants, r2_cut=cut)


@dataclasses.dataclass(frozen=True)
class AboveFloor(ControlResult):
    """Trimmed MAE(model) - trimmed MAE(floor) on the same rows, with a paired system-resampled interval.

    ``estimate``, ``lo``, ``hi`` (eV/atom; negative = the model agrees with the reference more closely than the
    second database does); ``model``, ``floor`` (each trimmed on its own errors); ``bootstrap``; ``n_rows``
    (rows where both are finite).
    """

    estimate: float
    lo: float
    hi: float
    model: TrimmedMAE
    floor: TrimmedMAE
    bootstrap: BootstrapResult
    n_rows: int


def above_floor(model_err: Any, floor_diff: Any, groups: Any, n_boot: int = 2000, seed: int = 0, *,
                cutoff: float = TRIM_CUTOFF, ci: tuple[float, float] = (2.5, 97.5)) -> AboveFloor:
    """Distance of a model from the floor, seed 001 Table 3 "Above floor" and Supplementary Table 8.

    ``model_err``: ``(n,)`` model errors against the reference (after Rung-0 where the paper quotes it) on the
    structures that define the floor; ``floor_diff``: the reference-minus-second-database differences on the
    same structures. Rows where either is NaN are dropped from both, so the two trimmed MAEs share one row set;
    each is trimmed on its own values. Each bootstrap replicate resamples whole chemical systems and recomputes
    both on the same resampled rows (:func:`jaxcert.controls.cluster_bootstrap` with ``paired``). See
    docs/controls.md, "Formation energies, Rung-0 and the floor".
    """
    m = _vec(model_err, "model_err")
    fl = _vec(floor_diff, "floor_diff", m.shape[0])
    both = np.isfinite(m) & np.isfinite(fl)
    if not both.any():
        raise ValueError("model_err and floor_diff share no finite row")
    m = np.where(both, m, np.nan)
    fl = np.where(both, fl, np.nan)
    bs = cluster_bootstrap("trimmed_mae", m, groups, n_boot=n_boot, seed=seed, ci=ci, paired=fl, cutoff=cutoff)
    tm, tf = trimmed_mae(m, cutoff), trimmed_mae(fl, cutoff)
    return AboveFloor(estimate=tm.value - tf.value, lo=bs.lo, hi=bs.hi, model=tm, floor=tf, bootstrap=bs,
                      n_rows=int(both.sum()))


@dataclasses.dataclass(frozen=True)
class SinglePointControl(ControlResult):
    """The single-point control (seed 001 Methods C).

    ``err``: ``(n,)`` single-point errors E_f(model at the reference geometry) - E_f(reference), with the same
    elemental references as the relaxed errors; ``mae``: mean |err| over ``rows`` (the relaxed trim mask, no
    second trim), ``median_abs`` on the same rows, ``n``; ``n_missing``: rows of the trim mask without a
    finite single-point error (left out of both columns); ``relaxed_mae`` (on the same rows) and
    ``geometry_effect`` = relaxed_mae - mae when the relaxed errors are given (else NaN).
    """

    err: np.ndarray
    rows: np.ndarray
    mae: float
    median_abs: float
    n: int
    n_missing: int
    relaxed_mae: float
    geometry_effect: float


def single_point_control(e_sp: Any, e_ref: Any, fractions: Any, refs: Any, trim_mask: Any, *,
                         err_relaxed: Any = None) -> SinglePointControl:
    """Score the model at the reference geometry, everything else held fixed (seed 001 Methods C).

    ``e_sp``: ``(n,)`` the model's energy per atom at the reference's relaxed geometry (the energy recorded
    before the optimiser's first step); ``e_ref``: the reference formation energies; ``refs``: the SAME
    elemental references as the relaxed column (the model's screened relaxed unaries, not re-evaluated);
    ``trim_mask``: the rows the relaxed column keeps (``|relaxed error| <= 1`` eV/atom): the trim is applied to
    the relaxed error so both columns share one row set, and the difference between the columns is the
    geometry effect alone. See docs/controls.md, "Formation energies, Rung-0 and the floor".
    """
    sp = _vec(e_sp, "e_sp")
    n = sp.shape[0]
    ref = _vec(e_ref, "e_ref", n)
    keep = _mask(trim_mask, "trim_mask", n)
    err = formation_energy(sp, fractions, refs) - ref
    rows = keep & np.isfinite(err)
    rel_mae = math.nan
    if err_relaxed is not None:
        er = _vec(err_relaxed, "err_relaxed", n)
        rows &= np.isfinite(er)
        rel_mae = float(np.mean(np.abs(er[rows]))) if rows.any() else math.nan
    a = np.abs(err[rows])
    mae = float(a.mean()) if a.size else math.nan
    return SinglePointControl(err=err, rows=rows, mae=mae, median_abs=float(np.median(a)) if a.size else math.nan,
                              n=int(rows.sum()), n_missing=int((keep & ~rows).sum()), relaxed_mae=rel_mae,
                              geometry_effect=rel_mae - mae)
