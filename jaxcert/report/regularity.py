r"""Regularity of E(r) along the smoothness probe's bond scan: a gated check for energy and force jumps.

docs/probes.md §4.17.  The smoothness probe (§4.14) stores, per element, the displacements s_k (Å) of
atom j along the bond, the energies E_k (eV) and the projected force output p_k = F_j·û (eV/Å).  Its
score counts kinks and extra extrema and is not gated: a correct but anharmonic bond can show them.  This
module asks a narrower question with a gateable answer: *is E(s) continuous (C⁰) with a continuous
derivative (C¹) along the scan?*  A hard cutoff, an energy step or a kink in E(r) says no.  NumPy only
(the report room imports no JAX): :func:`regularity` runs on a stored report.

**The identity (work theorem).**  For forces that are the exact gradient of the energy,
p = F_j·û = −dE/ds, so on every interval E_{k+1} − E_k = −∫ p ds.  The trapezoid rule gives the integral
with the error (h³/12)·p''(ξ), ξ inside the interval, h = s_{k+1} − s_k (the classical trapezoid error
term; e.g. Press et al., *Numerical Recipes*, 3rd ed., §4.1).  The interval residual

    r_k = (E_{k+1} − E_k) + ½ (p_k + p_{k+1}) h_k

is therefore O(h³) on a smooth curve, and equals the jump when E steps by ΔE inside the interval (the
force does not see a step: autodiff differentiates it as zero).  C¹ continuity means that p itself has
no jump: a kink of E is a step of p.

**Energy jump** (eV): the largest part of the corrected residual that neither a force jump, the
neighbourhood nor round-off explains,

    c_k = r_k − (h_k³/24)(p''_k + p''_{k+1})        (the trapezoid's end correction: O(h⁵) when smooth)
    energy_jump = max_k max(0, |c_k| − a_k),
    a_k = h_k · max|g| over the intervals k−1 … k+1  +  4 · median|c| over the neighbouring intervals
          +  ENERGY_FLOOR_K · ε · max|E|,

p'' the second divided differences of p and g the jolt defined below (≈ the force jump J in the
interval where p steps, ½h³p‴ on a smooth curve).

* A force step J inside interval k leaves |c_k| ≤ J·h/2 (the trapezoid misses at most that; the end
  correction cancels, the second differences on either side being +J and −J), and h·|g_k| ≈ J·h is
  twice that: a kink alone never reads as an energy jump.  A slope change Δp' inside the interval
  leaves about h²Δp'/8, and h·max|g| is at least h²Δp'/4 there.
* The neighbouring intervals are k−4 … k+4 without k−1 … k+1 (``WINDOW``; ``ISOLATION`` = 4).  Four
  times their median absorbs a residual that varies smoothly along the scan, e.g. a force head off by a
  smooth amount (that is the conservativeness probe's defect): a jump is an isolated residual.
* The floor is the floating-point resolution of E: ε of the model's compute precision (float32
  1.19e-7, float64 2.22e-16) times max|E| of the scan times ENERGY_FLOOR_K = 50.  The clean reports
  reach at most 1.8 ε·max|E| beyond the rest of the allowance (docs/probes.md §4.17).  In float32 a
  13-atom cluster with |E| = 80 eV has a floor of 0.48 meV; in float64 the floor is negligible.

The median allowance of a clean scan is below 40 µeV, so a step of a fraction of a meV is seen nearly
everywhere; it grows where p is stiff or rough: 3 meV at the compressed end of the reference LJ of B,
0.5–0.9 meV along CHGNet's scans (its force is rough by ≈ 0.05 eV/Å per grid step), 30 meV on CHGNet's
rough compression branch of S.

**Force jump** (eV/Å): two tests that must agree; the smaller reading counts.

* *An isolated jolt.*  With δ_k = p_{k+1} − p_k, g_k = δ_k − ½(δ_{k−1} + δ_{k+1}) reads J in the
  interval where p steps by J (−J/2 in its two neighbours) and −½h³p‴ on a smooth curve.  A smooth
  but stiff compression branch has a large, slowly varying third difference, so the reading is
  |g_k| − 4·median|g| over k−4 … k+4 without k−1 … k+1 − FORCE_FLOOR_K·ε·max|p| (FORCE_FLOOR_K = 200).
  A region that is rough at every grid point has no isolated jolt; its roughness is what the
  smoothness score reports.
* *A gap between the two sides.*  Around interval k take the window of intervals k−1 … k+1; the
  parabola through the ``SIDE`` = 3 nodes left of the window and the one through the 3 nodes right of
  it are extrapolated onto the window's four nodes.  The reading is the smallest difference there, or 0
  if the difference changes sign (the two sides meet inside the window).  A step of p leaves a gap J
  across the whole window, and so do two half steps on either side of a node.  A slope change of p (a
  jump of E'' with E still C¹: Tersoff's cosine cutoff, shifted-force potentials) reads up to h·Δp'/2 in
  the jolt, 0.53 eV/Å on Tersoff C, but its two sides meet inside the window, so the gap reads 0.

force_jump = max_k max(0, min(jolt_k, gap_k)), located at the middle of interval k.  The two
outermost intervals at each end of the scan are not tested for a force jump, and the third only with a
straight line for its outer side.  Patterns that the jolt
reads low: a single grid point off by S (a feature narrower than h) reads S/2; two steps J₁, J₂ in
adjacent intervals read max(J₁ − J₂/2, J₂ − J₁/2); a kink placed exactly on a grid point, where autodiff
returns the mean of the two slopes, reads J/4 (measure zero in practice).

**Thresholds and why.**  Both hold one crossing of the defect by a pair in NVE molecular dynamics to
about 1 meV of energy error.

* ENERGY_THRESHOLD = 5e-4 eV.  The force never sees an energy step, so each time a pair crosses it the
  total energy changes by ΔE, and crossings in both directions make it random-walk by √n·ΔE.  A thousand
  atoms of a metal at 300 K make ~2·10⁷ crossings of a 4 Å pair sphere per ns, so a 1 meV step (4 % of
  k_BT) moves the total energy by ~4 eV, 4 meV/atom, per ns: visible drift.  This is why truncated pair
  potentials are shifted so that E is continuous (Allen & Tildesley, *Computer Simulation of Liquids*,
  2nd ed., OUP 2017, on truncated, shifted and shifted-force potentials; Toxvaerd & Dyre, J. Chem. Phys.
  134, 081102 (2011)).  The threshold is half of 1 meV so that a 1 meV step fails with room for the
  allowance a_k that the estimate subtracts.  A hard cutoff of a metal pair potential jumps by
  0.01–0.3 eV.
* FORCE_THRESHOLD = 0.5 eV/Å.  Velocity Verlet changes the kinetic energy over a step by
  ½(F_n + F_{n+1})·Δx, the trapezoid rule again, so a force jump J crossed in a step Δx costs up to
  J·Δx/2 of energy per crossing.  Two Si atoms at 300 K close at √(2k_BT/m) ≈ 0.004 Å/fs; at a 1 fs step
  J = 0.5 eV/Å costs 1 meV per crossing, the energy step's standard.  The planted ``kinked`` defect
  (docs/probes.md §8.2) jumps by 2 eV/Å at its default strength.  The largest reading among the
  committed clean reports is 0.17 eV/Å (CHGNet on C, where p rises by ≈ 0.4 eV/Å against its trend within
  one grid step: a real irregularity of that model, passed).

Scope: the grid is taken as given (the probe's is uniform, 81 points, h ≈ 0.01 Å); a feature narrower
than h between two grid points is seen only through its integral.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["regularity", "ENERGY_THRESHOLD", "FORCE_THRESHOLD", "ENERGY_FLOOR_K", "FORCE_FLOOR_K"]

#: eV: an energy discontinuity along the bond scan above this fails (module docstring)
ENERGY_THRESHOLD = 5e-4
#: eV/Å: a jump of the projected force (a kink of E) above this fails (module docstring)
FORCE_THRESHOLD = 0.5
#: the energy floor is ENERGY_FLOOR_K · ε · max|E|
ENERGY_FLOOR_K = 50.0
#: the force floor is FORCE_FLOOR_K · ε · max|p|
FORCE_FLOOR_K = 200.0
#: a value is isolated when it exceeds ISOLATION × the median of its neighbourhood
ISOLATION = 4.0
#: the neighbourhood: k − WINDOW … k + WINDOW without k − 1 … k + 1
WINDOW = 4
#: nodes on each side of an interval for the one-sided parabolas of the force-jump test
SIDE = 3


def _eps(precision: str) -> float:
    if str(precision) not in ("float32", "float64"):
        raise ValueError(f"precision must be 'float32' or 'float64', got {precision!r}")
    return float(np.finfo(np.float32 if precision == "float32" else np.float64).eps)


def _neighbour_median(x: np.ndarray) -> np.ndarray:
    """For each k, the median of |x| over k − WINDOW … k + WINDOW without k − 1 … k + 1 (0 if empty)."""
    a = np.abs(x)
    out = np.zeros_like(a)
    n = a.shape[0]
    for k in range(n):
        idx = [j for j in range(k - WINDOW, k + WINDOW + 1) if 0 <= j < n and abs(j - k) > 1]
        out[k] = float(np.median(a[idx])) if idx else 0.0
    return out


def _second_derivative(s: np.ndarray, p: np.ndarray) -> np.ndarray:
    """p'' at every node: second divided differences, the end nodes copying their neighbour (0 if < 3 nodes)."""
    h = np.diff(s)
    d2 = np.zeros_like(p)
    if p.shape[0] >= 3:
        slope = np.diff(p) / h
        d2[1:-1] = 2.0 * np.diff(slope) / (h[:-1] + h[1:])
        d2[0], d2[-1] = d2[1], d2[-2]
    return d2


def _jolt(p: np.ndarray) -> np.ndarray:
    """g per interval: δ_k − ½(δ_{k−1} + δ_{k+1}), δ_k = p_{k+1} − p_k; the end intervals copy their neighbour."""
    dlt = np.diff(p)
    g = np.zeros_like(dlt)
    if dlt.shape[0] >= 3:
        g[1:-1] = dlt[1:-1] - 0.5 * (dlt[:-2] + dlt[2:])
        g[0], g[-1] = g[1], g[-2]
    return g


def _isolated_jolt(p: np.ndarray, floor: float) -> np.ndarray:
    """Per interval k: |g_k| − ISOLATION · (neighbourhood median of |g|) − floor; −inf at the first and the
    last interval, where g is not defined."""
    g = _jolt(p)[1:-1]
    out = np.full(p.shape[0] - 1, -np.inf)
    out[1:-1] = np.abs(g) - ISOLATION * _neighbour_median(g) - floor
    return out


def _lagrange(xs: np.ndarray, ys: np.ndarray, x: float) -> float:
    """The polynomial through (xs, ys) at x."""
    total = 0.0
    for i in range(xs.shape[0]):
        w = 1.0
        for j in range(xs.shape[0]):
            if j != i:
                w *= (x - xs[j]) / (xs[i] - xs[j])
        total += w * ys[i]
    return total


def _two_sided_step(s: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per interval k: the step of p across the window of intervals k − 1 … k + 1 (nodes k − 1 … k + 2),
    from a parabola through the SIDE nodes left of the window and one through the SIDE nodes right of it,
    both extrapolated onto the window's nodes: the smallest |Q_R − Q_L| there, or 0 where Q_R − Q_L changes
    sign (p continuous with a change of slope: a kink of p, E still C¹).  0 where a side has < 2 nodes."""
    n = p.shape[0]
    out = np.zeros(n - 1)
    for k in range(n - 1):
        a, b = max(0, k - 1), min(n - 1, k + 2)
        left = np.arange(max(0, a - SIDE + 1), a + 1)
        right = np.arange(b, min(n, b + SIDE))
        if left.shape[0] < 2 or right.shape[0] < 2:
            continue
        gap = np.array([_lagrange(s[right], p[right], s[x]) - _lagrange(s[left], p[left], s[x])
                        for x in range(a, b + 1)])
        out[k] = 0.0 if (gap.max() > 0 > gap.min()) else float(np.min(np.abs(gap)))
    return out

def _at(s: np.ndarray, k: int) -> float:
    return float(0.5 * (s[k] + s[k + 1]))


def regularity(s_grid: Any, energies: Any, projected_force: Any, precision: str = "float64") -> dict:
    """C⁰ and C¹ continuity of E(s) along a bond scan (docs/probes.md §4.17; module docstring).

    Args:
      s_grid: the displacements s_k in Å (increasing), e.g. the smoothness probe's ``details["s_grid"]``.
      energies: E_k in eV (``details["energies"]``).
      projected_force: p_k = F_j·û in eV/Å, the model's force output (``details["projected_force"]``).
      precision: ``"float32"`` or ``"float64"``, the model's compute precision (sets the round-off floors).

    Returns:
      ``{"energy_jump": eV, "energy_jump_at": Å, "force_jump": eV/Å, "force_jump_at": Å,
      "energy_threshold": eV, "force_threshold": eV/Å, "passed": bool, "reason": str | None}``:
      the largest unexplained energy and force jumps, the s (middle of the interval) where each occurs
      (``None`` when it is 0), the thresholds, and for a failure one line naming the jump, where it is
      and the likely cause.  Also ``"energy_floor"`` (eV) and ``"force_floor"`` (eV/Å), the round-off
      floors subtracted.

    Raises:
      ValueError: arrays of different lengths, a grid that is not strictly increasing, or an unknown
        precision.
    """
    eps = _eps(precision)
    s = np.asarray(s_grid, dtype=np.float64).reshape(-1)
    E = np.asarray(energies, dtype=np.float64).reshape(-1)
    p = np.asarray(projected_force, dtype=np.float64).reshape(-1)
    if not (s.shape == E.shape == p.shape):
        raise ValueError(f"s_grid, energies and projected_force differ in length: {s.shape[0]}, {E.shape[0]}, "
                         f"{p.shape[0]}")
    out: dict[str, Any] = {
        "energy_jump": 0.0, "energy_jump_at": None, "force_jump": 0.0, "force_jump_at": None,
        "energy_threshold": ENERGY_THRESHOLD, "force_threshold": FORCE_THRESHOLD, "passed": True, "reason": None,
        "energy_floor": 0.0, "force_floor": 0.0,
    }
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(E)) and np.all(np.isfinite(p))):
        out.update(energy_jump=float("nan"), force_jump=float("nan"), passed=False,
                   reason="the bond scan has non-finite energies or forces: the model fails on it")
        return out
    if s.shape[0] < 2:
        return out
    h = np.diff(s)
    if not np.all(h > 0):
        raise ValueError("s_grid must be strictly increasing")

    # energy: the work-theorem residual of each interval, with the trapezoid's end correction, beyond what a
    # force jump inside the interval, the neighbourhood and round-off explain
    e_floor = ENERGY_FLOOR_K * eps * float(np.max(np.abs(E)))
    r = np.diff(E) + 0.5 * (p[:-1] + p[1:]) * h
    d2 = _second_derivative(s, p)
    c = r - h**3 / 24.0 * (d2[:-1] + d2[1:])
    jolt = _jolt(p)
    near = np.array([np.max(np.abs(jolt[max(0, k - 1):k + 2])) for k in range(r.shape[0])])
    allowance = h * near + ISOLATION * _neighbour_median(c) + e_floor
    e_excess = np.maximum(0.0, np.abs(c) - allowance)
    ke = int(np.argmax(e_excess))
    out["energy_floor"] = e_floor
    if e_excess[ke] > 0:
        out["energy_jump"], out["energy_jump_at"] = float(e_excess[ke]), _at(s, ke)

    # force: a step of p in interval k, seen both as an isolated jolt and as a gap between the two sides
    f_floor = FORCE_FLOOR_K * eps * float(np.max(np.abs(p)))
    out["force_floor"] = f_floor
    if p.shape[0] >= 4:
        f_excess = np.minimum(_isolated_jolt(p, f_floor), _two_sided_step(s, p))
        kf = int(np.argmax(f_excess))
        if f_excess[kf] > 0:
            out["force_jump"], out["force_jump_at"] = float(f_excess[kf]), _at(s, kf)

    e_bad = out["energy_jump"] > ENERGY_THRESHOLD
    f_bad = out["force_jump"] > FORCE_THRESHOLD
    out["passed"] = not (e_bad or f_bad)
    if e_bad:
        out["reason"] = (f"energy jumps by {out['energy_jump']:.3g} eV at s = {out['energy_jump_at']:+.3f} Å along "
                         f"the bond scan (threshold {ENERGY_THRESHOLD:g} eV): a hard cutoff or a step in E(r); "
                         "switch the energy off smoothly")
        if f_bad:
            out["reason"] += (f"; the force also jumps by {out['force_jump']:.3g} eV/Å at "
                              f"s = {out['force_jump_at']:+.3f} Å")
    elif f_bad:
        out["reason"] = (f"force jumps by {out['force_jump']:.3g} eV/Å at s = {out['force_jump_at']:+.3f} Å along "
                         f"the bond scan (threshold {FORCE_THRESHOLD:g} eV/Å): a kink in E(r) (C¹ broken), e.g. "
                         "a cutoff that switches the energy but not its slope off")
    return out
