r"""betti: Maxwell–Betti reciprocity of the force response (docs/probes.md §4.7).

Identity tested: for a conservative force field F = −∇E the response matrix
H = −∂F/∂R is symmetric (Schwarz), so pushing DOF α and reading DOF β gives the
same as pushing β and reading α:

.. math::  H_{\beta\alpha} = -\frac{\partial F_\beta}{\partial R_\alpha}
           \;\overset{!}{=}\; H_{\alpha\beta} = -\frac{\partial F_\alpha}{\partial R_\beta}.

Substrate: the cluster, not relaxed.  n_pairs = 12 random DOF pairs (α, β),
α uniform over the real DOFs, β uniform over the real DOFs other than α (drawn
from ``key``; the reference's "redraw while β = α" has the same distribution).
Defect d = mean |H_{β,α} − H_{α,β}| in eV/Å²; score exp(−d/0.02), gate d < 0.1
(seed 000 / pescert).

Exact version (default): columns J e_α and J e_β of the *force output's*
Jacobian by two jvps per pair (``n_evals`` = 2 per pair), so a clean model
reaches the round-off floor instead of the FD truncation floor (≈1e-6 relative
at δ = 1e-3 Å).  ``derivatives=FiniteDifference()`` reproduces the reference's
±δ pushes (δ = fd_step(1, 2): 1e-3 Å in float64; 4 calls per pair).  Models
with a direct force head are tested for what they are (docs/probes.md §1.4).

Budget (``max_evals``): while cost(n_pairs) > max_evals and n_pairs > 2,
n_pairs −= 1, with cost = (evaluations per jvp) × 2 × n_pairs.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, precision_bits, register, resolve_substrate, score_map

__all__ = ["BettiConfig", "betti", "draw_pairs"]


@dataclasses.dataclass(frozen=True)
class BettiConfig:
    """Defaults: seed 000 / pescert (docs/probes.md §4.7).

    Attributes:
      n_pairs: number of random DOF pairs (12).
      scale: λ of exp(−d/λ), eV/Å² (0.02).
      gate_threshold: gate d < this, eV/Å² (0.1 = 5λ).
      max_evals: optional budget (pescert ``max_calls``).
      derivatives: ``EXACT`` (jvp) or ``FiniteDifference()`` (reference ±δ pushes).
    """

    n_pairs: int = 12
    scale: float = 0.02
    gate_threshold: float = 0.1
    max_evals: int | None = None
    derivatives: Any = EXACT


@functools.partial(jax.jit, static_argnames=("n_pairs",))
def draw_pairs(key: jax.Array, mask: jax.Array, n_pairs: int) -> tuple[jax.Array, jax.Array]:
    """(α, β) int32 (n_pairs,) each: flat DOF indices of real atoms, β ≠ α.

    Jitted on its own (and called outside the probe's program when the probe is
    called directly), so the PRNG kernel compiles once per process, not once per model.
    """
    dof = jnp.repeat(mask, 3)
    n_dof = jnp.sum(dof)
    rank = jnp.cumsum(dof)  # rank[p] = number of real DOFs up to and including p
    x = jax.random.uniform(key, (n_pairs, 2))
    ka = jnp.minimum(jnp.floor(x[:, 0] * n_dof), n_dof - 1).astype(jnp.int32)  # α: the ka-th real DOF
    kb = jnp.minimum(jnp.floor(x[:, 1] * (n_dof - 1)), n_dof - 2).astype(jnp.int32)
    kb = kb + (kb >= ka)  # β: uniform over the other real DOFs
    nth = jax.vmap(lambda k: jnp.argmax(rank >= k + 1))
    return nth(ka).astype(jnp.int32), nth(kb).astype(jnp.int32)


def betti(
    model: Model,
    key: jax.Array,
    config: BettiConfig = BettiConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Reciprocity H_{β,α} = H_{α,β} on random DOF pairs (see the module docstring).

    Args:
      model: the potential.
      key: PRNG key for the DOF pairs.
      config: :class:`BettiConfig`.
      substrate: a cluster Structure, an element symbol, or ``None`` (Ar).

    Returns:
      :class:`ProbeResult` with defect d (eV/Å²), score exp(−d/0.02), gate d < 0.1.
    """
    s = resolve_substrate(model, substrate, "cluster")
    return stages.run(model, plan, config, key, s)


def _pair_count(cfg: BettiConfig) -> tuple[int, bool]:
    """Static (n_pairs, budget_limited) after the budget rule."""
    cost = cfg.derivatives.cost(2)
    n_pairs = int(cfg.n_pairs)
    budget_limited = False
    if cfg.max_evals is not None:
        while cost * n_pairs > cfg.max_evals and n_pairs > 2:
            n_pairs -= 1
            budget_limited = True
    return n_pairs, budget_limited


def plan(cfg: BettiConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): draw the pairs and ask for the 2·n_pairs force-Jacobian
    columns J e_α, J e_β (``tangent`` requests); then reduce."""
    del facts
    engine = cfg.derivatives
    n_pairs, budget_limited = _pair_count(cfg)

    def ask(key, s):
        alpha, beta = draw_pairs(key, s.mask, n_pairs)
        n = s.n_atoms
        eye = jnp.eye(3 * n, dtype=s.positions.dtype)
        d = eye[jnp.concatenate([alpha, beta])].reshape(2 * n_pairs, n, 3)
        return stages.Ask((alpha, beta, s), kinds.tangent(kinds.items(s, jnp.broadcast_to(s.positions, d.shape)),
                                                          d, engine))

    def reduce(state, jv):
        alpha, beta, s = state
        dt = s.positions.dtype
        cols = -jv.forces.reshape(2, n_pairs, -1)  # H[:, α], H[:, β], flattened (3n,)
        k = jnp.arange(n_pairs)
        h_ba, h_ab = cols[0, k, beta], cols[1, k, alpha]  # H_{β,α}, H_{α,β}
        asym = jnp.abs(h_ba - h_ab)
        d = jnp.mean(asym)
        details = {
            "n_pairs": jnp.asarray(n_pairs, jnp.int32),
            "delta": jnp.asarray(engine.step(s), dt),
            "precision": jnp.asarray(precision_bits(s), jnp.int32),
            "scale": jnp.asarray(cfg.scale, dt),
            "max_asymmetry": jnp.max(asym),
            "pairs": jnp.stack([alpha.astype(dt), beta.astype(dt), h_ba, h_ab], axis=1),
            "asymmetry": asym,
            "budget_limited": jnp.asarray(budget_limited),
        }
        return finalize(d, score_map(d, cfg.scale), d < cfg.gate_threshold, engine.cost(2) * n_pairs, details)

    return ask, reduce


register(ProbeSpec("betti", betti, BettiConfig, "cluster", plan=plan))
