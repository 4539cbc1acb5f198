r"""smoothness: regularity of the energy and force along a bond scan (docs/probes.md §4.14).

Substrate: the cluster, not relaxed.  Bond (i, j) = the closest pair (in-graph,
see :func:`jaxcert.probes.closest_pair`) unless ``config.bond``
is given, bond length b, û = (R_j − R_i)/b; only atom j moves, by s_k û on the
grid s_k = linspace(−0.2 b, +0.5 Å, M = 81) (compression relative, stretch
absolute; seed 000 / pescert).  Data: E_k and the projected force p_k = F_j·û
(the force *output*), δ_k = p_{k+1} − p_k, f_span = max p − min p + 1e-12.

Four penalties, each 0 for a smooth, single-well bond:

1. jolt: g_k = δ_k − ½(δ_{k−1} + δ_{k+1}) on the interior δ,
   ρ = max|g| / (median|δ| + 1e-9), excess = max(0, ρ − 4) (a kink or step in F);
2. flips: signs of p with |p_k| < 1e-6 (max|p| + 1e-12) dropped, sign changes
   between consecutive remaining entries, excess = max(0, flips − 1);
3. spurious minima: strict interior local minima of E, excess = max(0, n − 1)
   (no minimum at all is not penalised);
4. tortuosity: max(0, Σ|δ|/f_span − 1) (a non-monotone force).

Defect D = ¼ jolt_excess + flips_excess + spurious_minima + tortuosity (dimensionless);
score exp(−D); no gate.  Every count is a vectorised ``jnp`` reduction, so the
probe jits and vmaps over substrates.  No derivative of the model is taken
(``config.derivatives`` exists only for a uniform config interface), and
exact/FD engines give identical results: a clean analytic model scores the same
as in the reference, which has no FD floor here.  ``n_evals`` = M.

Budget (``max_evals``): while M > max_evals and M > 11, M −= 2 (pescert's rule).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSpec, bond_of, finalize, register, require_atoms, resolve_substrate

__all__ = ["SmoothnessConfig", "smoothness", "smoothness_terms"]


@dataclasses.dataclass(frozen=True)
class SmoothnessConfig:
    """Defaults: seed 000 / pescert (docs/probes.md §4.14).

    Attributes:
      n_points: M grid points (81).
      compress_frac: compression as a fraction of the bond length b (0.2 → s₀ = −0.2 b).
      stretch_a: stretch in Å (0.5).
      jolt_threshold: jolt ratio ρ tolerated before it counts (4).
      flip_rel_tol: |p| below this × max|p| has no sign (1e-6).
      scale: λ of exp(−D/λ) (1).
      bond: (i, j) or ``None`` for the closest pair; j moves.
      max_evals: optional budget (pescert ``max_calls``).
      derivatives: unused (no derivative is taken); kept for a uniform interface.
    """

    n_points: int = 81
    compress_frac: float = 0.2
    stretch_a: float = 0.5
    jolt_threshold: float = 4.0
    flip_rel_tol: float = 1e-6
    scale: float = 1.0
    bond: tuple[int, int] | None = None
    max_evals: int | None = None
    derivatives: Any = EXACT


def smoothness_terms(E: jax.Array, p: jax.Array, jolt_threshold: float = 4.0, flip_rel_tol: float = 1e-6) -> dict:
    """The four §4.14 penalties of a scan (E_k eV, p_k eV/Å), as arrays (jittable)."""
    dlt = jnp.diff(p)
    f_span = jnp.max(p) - jnp.min(p) + 1e-12
    if dlt.shape[0] >= 3:
        g = dlt[1:-1] - 0.5 * (dlt[:-2] + dlt[2:])
        rho = jnp.max(jnp.abs(g)) / (jnp.median(jnp.abs(dlt)) + 1e-9)
    else:
        rho = jnp.zeros((), p.dtype)
    jolt_excess = jnp.maximum(0.0, rho - jolt_threshold)

    # sign changes between consecutive entries that keep a sign
    thresh = flip_rel_tol * (jnp.max(jnp.abs(p)) + 1e-12)
    sgn = jnp.where(jnp.abs(p) < thresh, 0.0, jnp.sign(p))
    idx = jnp.arange(p.shape[0])
    last = jax.lax.cummax(jnp.where(sgn != 0, idx, -1))  # index of the latest signed entry up to k
    prev = jnp.concatenate([jnp.array([-1]), last[:-1]])  # ... strictly before k
    flip = (sgn != 0) & (prev >= 0) & (sgn != sgn[jnp.maximum(prev, 0)])
    flips = jnp.sum(flip).astype(jnp.int32)
    flips_excess = jnp.maximum(0, flips - 1)

    is_min = (E[1:-1] < E[:-2]) & (E[1:-1] < E[2:])
    n_min = jnp.sum(is_min).astype(jnp.int32)
    spurious = jnp.maximum(0, n_min - 1)

    tortuosity = jnp.maximum(0.0, jnp.sum(jnp.abs(dlt)) / f_span - 1.0)
    D = 0.25 * jolt_excess + flips_excess + spurious + tortuosity
    return {
        "defect": D,
        "force_jolt_ratio": rho,
        "force_jolt_excess": jolt_excess,
        "force_flips": flips,
        "force_flips_excess": flips_excess,
        "n_minima": n_min,
        "spurious_minima": spurious,
        "tortuosity": tortuosity,
    }


def smoothness(
    model: Model,
    key: jax.Array | None = None,
    config: SmoothnessConfig = SmoothnessConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Bond-scan regularity (see the module docstring).

    Args:
      model: the potential.
      key: unused (no randomness).
      config: :class:`SmoothnessConfig`.
      substrate: a cluster Structure, an element symbol, or ``None`` (Ar).

    Returns:
      :class:`ProbeResult` with defect D (dimensionless), score exp(−D), gate True (no gate).
    """
    del key
    s = resolve_substrate(model, substrate, "cluster")
    _require_bond(s)
    return stages.run(model, plan, config, None, s)


def _require_bond(s: Structure) -> None:
    require_atoms(s, 2, "smoothness", "a bond to scan: with one atom every displacement is a translation")


def _grid_size(cfg: SmoothnessConfig) -> tuple[int, bool]:
    """Static (M, budget_limited) after the budget rule."""
    m = int(cfg.n_points)
    budget_limited = False
    if cfg.max_evals is not None:
        while m > cfg.max_evals and m > 11:
            m -= 2
            budget_limited = True
    return m, budget_limited


def plan(cfg: SmoothnessConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): build the scan geometries of atom j moved by s_k û and
    ask for E, F there (``evaluate``); then reduce to the four penalties."""
    del facts
    m, budget_limited = _grid_size(cfg)

    def ask(key, s):
        del key
        _require_bond(s)
        dt = s.positions.dtype
        bond = bond_of(s, cfg.bond)
        i, j = bond[0], bond[1]
        d_u = s.positions[j] - s.positions[i]
        b = jnp.linalg.norm(d_u)
        u = d_u / b
        grid = jnp.linspace(-cfg.compress_frac * b, jnp.asarray(cfg.stretch_a, dt), m).astype(dt)
        Rg = jax.vmap(lambda off: s.positions.at[j].add(off * u))(grid)  # (m, n, 3)
        return stages.Ask((bond, b, u, grid), kinds.evaluate(kinds.items(s, Rg)))

    def reduce(state, out):
        bond, b, u, grid = state
        dt = grid.dtype
        E = out.energy
        p = out.forces[:, bond[1]] @ u
        t = smoothness_terms(E, p, cfg.jolt_threshold, cfg.flip_rel_tol)
        D = t.pop("defect")
        details = {
            "bond": bond,
            "bond_len": b,
            "compress_frac": jnp.asarray(cfg.compress_frac, dt),
            "stretch": jnp.asarray(cfg.stretch_a, dt),
            "n_points": jnp.asarray(m, jnp.int32),
            "scale": jnp.asarray(cfg.scale, dt),
            **t,
            "s_grid": grid,
            "energies": E,
            "projected_force": p,
            "budget_limited": jnp.asarray(budget_limited),
        }
        score = jnp.exp(-jnp.abs(D) / cfg.scale)
        return finalize(D, score, True, m, details)

    return ask, reduce


register(ProbeSpec("smoothness", smoothness, SmoothnessConfig, "cluster", gated=False, plan=plan))
