r"""conservativeness: the force output is −dE/ds along a bond (docs/probes.md §4.6).

Identity tested: for the bond (i, j) with unit vector û = (R_j − R_i)/‖R_j − R_i‖
and atom j displaced by s û,

.. math::  p(s) = F_j(R + s\,\hat u\,e_j)\cdot\hat u
           \;\overset{!}{=}\; g(s) = -\frac{d}{ds}\,E(R + s\,\hat u\,e_j).

Defect d = mean_k |p(s_k) − g(s_k)| in eV/Å over the scan grid s_k =
linspace(−ρ, ρ, M), ρ = 0.15 Å, M = 31 (seed 000 / pescert); score exp(−d/0.05),
gate d < 0.25.  Substrate: the cluster, not relaxed.  The bond is the closest pair
(first i < j in lexicographic order with the strictly smallest distance, computed
in-graph on the squared distances so that the probe jits and vmaps over
substrates) unless ``config.bond`` is given; only atom j moves.

Exact version (default, ``derivatives=EXACT`` or any non-FD engine): g is the
exact directional derivative −jvp(E)(û e_j) at *every* grid point, so no stencil
is needed, no point is lost at the ends and there is no round-off-driven
thinning of the grid: ``round_off_limited`` is False in float32 as in float64
and ``step_min_for_precision`` is reported as 0.  A clean conservative model
scores at the round-off floor.

FD version (``derivatives=FiniteDifference(...)``): the reference recipe.  E is
sampled on the grid and g is the 4th-order 5-point stencil
g_k = −(E_{k−2} − 8E_{k−1} + 8E_{k+1} − E_{k+2})/(12h) at the M − 4 interior
points (``force_from_energy`` holds NaN at the two points at each end).  The
grid is thinned (range unchanged) when its spacing 2ρ/(M − 1) is below
h_min = fd_step(1, 4) (1.17e-3 Å in float64, 6.54e-2 Å in float32; an explicit
``FiniteDifference(step_size=...)`` overrides h_min): M = max(9, odd int(2ρ/h_min) + 1),
and ``round_off_limited`` = (2ρ/(M − 1) < h_min), True in float32.

Blind spot (docs/probes.md §8.4): a 1-D scan cannot see a transverse curl.

Budget (``max_evals``): while M > max_evals and M > 5, M −= 2 (pescert's rule;
``budget_limited`` reports it).  ``n_evals``: the exact path evaluates E, its jvp
and the force at each point (counted as 2 per point: a forward pass with its
jvp, and the force); the FD path M (one call per geometry, as the reference).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.derivatives import EXACT, derivative_on_grid, fd_step
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import (
    ProbeResult,
    ProbeSpec,
    bond_of,
    finalize,
    precision_bits,
    register,
    require_atoms,
    resolve_substrate,
    score_map,
)

__all__ = ["ConservativenessConfig", "conservativeness"]


# ------------------------------------------------------------------ the probe
@dataclasses.dataclass(frozen=True)
class ConservativenessConfig:
    """Defaults: seed 000 / pescert (docs/probes.md §4.6).

    Attributes:
      scan_range_a: ρ, half-width of the bond scan in Å (0.15).
      n_points: M, grid points (31; made odd).
      scale: λ of the score exp(−d/λ), eV/Å (0.05).
      gate_threshold: gate d < this, eV/Å (0.25 = 5λ).
      bond: (i, j) or ``None`` for the closest pair; j moves.
      max_evals: optional budget (pescert ``max_calls``): shrink M by 2 while it exceeds it.
      derivatives: ``EXACT`` (jvp of the energy) or ``FiniteDifference()`` (reference stencil).
    """

    scan_range_a: float = 0.15
    n_points: int = 31
    scale: float = 0.05
    gate_threshold: float = 0.25
    bond: tuple[int, int] | None = None
    max_evals: int | None = None
    derivatives: Any = EXACT


def _grid_size(cfg: ConservativenessConfig, s: Structure) -> tuple[int, bool, float, bool]:
    """Static (M, budget_limited, h_min, round_off_limited) per the §4.6 rules."""
    m = int(cfg.n_points)
    m += 1 - m % 2
    budget_limited = False
    if cfg.max_evals is not None:
        while m > cfg.max_evals and m > 5:
            m -= 2
            budget_limited = True
    if cfg.derivatives.exact:
        return m, budget_limited, 0.0, False
    engine = cfg.derivatives
    h_min = float(engine.step_size) if engine.step_size is not None else fd_step(1, 4, s.positions.dtype)
    rho = float(cfg.scan_range_a)
    if 2 * rho / (m - 1) < h_min:
        n_fit = int(2 * rho / h_min) + 1
        n_fit -= 1 - n_fit % 2
        m = max(9, n_fit)
    return m, budget_limited, h_min, bool(2 * rho / (m - 1) < h_min)


def conservativeness(
    model: Model,
    key: jax.Array | None = None,
    config: ConservativenessConfig = ConservativenessConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Collinear bond-stretch test F_j·û = −dE/ds (see the module docstring).

    Args:
      model: the potential.
      key: unused (no randomness); accepted for the common probe signature.
      config: :class:`ConservativenessConfig`.
      substrate: a cluster Structure, an element symbol, or ``None`` (Ar).

    Returns:
      :class:`ProbeResult` with defect d (eV/Å), score exp(−d/λ), gate d < 0.25.
    """
    del key
    s = resolve_substrate(model, substrate, "cluster")
    _require_bond(s)
    return stages.run(model, plan, config, None, s)


def _require_bond(s: Structure) -> None:
    require_atoms(s, 2, "conservativeness", "a bond to stretch: with one atom every displacement is a translation")


def plan(cfg: ConservativenessConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): build the scan geometries of atom j moved by s_k û and
    ask for E, F there (``evaluate``) and, exact engine, for dE/ds (``tangent`` along û e_j); then reduce.
    The FD engine takes the 5-point stencil on the grid's own energies in the reduce stage
    (:func:`jaxcert.core.derivatives.derivative_on_grid`, the reference recipe, as
    ``FiniteDifference.bond_scan(..., on_grid=True)``)."""
    del facts
    engine = cfg.derivatives

    def ask(key, s):
        del key
        _require_bond(s)
        dt = s.positions.dtype
        m, _, _, _ = _grid_size(cfg, s)
        bond = bond_of(s, cfg.bond)
        i, j = bond[0], bond[1]
        grid = jnp.linspace(-cfg.scan_range_a, cfg.scan_range_a, m, dtype=dt)
        d_u = s.positions[j] - s.positions[i]
        u = d_u / jnp.linalg.norm(d_u)
        Rg = jax.vmap(lambda off: s.positions.at[j].add(off * u))(grid)  # (m, n, 3)
        sg = kinds.items(s, Rg)
        requests = {"outputs": kinds.evaluate(sg)}
        if engine.exact:
            dR = jnp.broadcast_to(jnp.zeros_like(s.positions).at[j].set(u), Rg.shape)
            requests["slope"] = kinds.tangent(sg, dR, engine)
        return stages.Ask((bond, u, grid, s), requests)

    def reduce(state, answers):
        bond, u, grid, s = state
        dt = s.positions.dtype
        m, budget_limited, h_min, round_off = _grid_size(cfg, s)
        j = bond[1]
        h = grid[1] - grid[0]
        out = answers["outputs"]
        E = out.energy
        p = out.forces[:, j] @ u
        if not engine.exact:  # the reference recipe: the 5-point stencil on the grid's own energies
            g = -derivative_on_grid(E, h)
            resid = jnp.abs(p[2:-2] - g[2:-2])
            n_evals = m  # E and F once per grid point; the stencil reuses those energies
        else:
            g = -answers["slope"].energy
            resid = jnp.abs(p - g)
            n_evals = m + engine.cost(m)  # E and F per point, plus the engine's jvp of E per point

        d = jnp.mean(resid)
        details = {
            "bond": bond,
            "scan_range": jnp.asarray(cfg.scan_range_a, dt),
            "n_points": jnp.asarray(m, jnp.int32),
            "step": h,
            "step_min_for_precision": jnp.asarray(h_min, dt),
            "precision": jnp.asarray(precision_bits(s), jnp.int32),
            "round_off_limited": jnp.asarray(round_off),
            "scale": jnp.asarray(cfg.scale, dt),
            "max_residual": jnp.max(resid),
            "s_grid": grid,
            "energies": E,
            "projected_force": p,
            "force_from_energy": g,
            "budget_limited": jnp.asarray(budget_limited),
            "exact": jnp.asarray(engine.exact),
        }
        return finalize(d, score_map(d, cfg.scale), d < cfg.gate_threshold, n_evals, details)

    return ask, reduce


register(ProbeSpec("conservativeness", conservativeness, ConservativenessConfig, "cluster", plan=plan))
