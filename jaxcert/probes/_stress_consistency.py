r"""stress_consistency: the stress output equals the strain derivative of the energy (docs/probes.md §4.8).

Identity tested: with the engineering Voigt strain γ of docs/probes.md §1.2
(𝔽 = I + ε(γ), cell h' = h₀𝔽ᵀ, atoms scaled affinely, r' = 𝔽r),

.. math::  \sigma^{pred}_m = \sigma^{E}_m \equiv \frac{1}{V_0}\,
           \frac{\partial}{\partial\gamma_m} E(\mathbb{F}R, h_0\mathbb{F}^T)\Big|_{\gamma=0},
           \qquad m = 0..5 \ (xx, yy, zz, yz, xz, xy),

where σ^pred is the model's *stress output* (a direct stress head is tested as it
is) and σ^E is taken from the *energy* by the configured engine, as the energy
components of six ``tangent`` requests (:mod:`jaxcert.probes.kinds`) along the
deformations dA_m = ε(e_m) (:func:`jaxcert.core.derivatives.voigt_strain`; a step of
δ in γ_m is a step of δ along dA_m): exact forward-mode tangents (the default)
or the reference's central difference over ±δ (``FiniteDifference()``, δ = 1e-3
in float64, the dtype-aware step of docs/probes.md §1.5 otherwise).

Defect (docs/probes.md §4.8, §11.10) in the full-tensor Frobenius norm
‖v‖_T = √(v₀² + v₁² + v₂² + 2(v₃² + v₄² + v₅²)):

.. math::  d = \lVert \sigma^{pred} - \sigma^{E} \rVert_T / (\lVert \sigma^{E} \rVert_T + 10^{-12}),

score exp(−d/0.05), gate d < 0.25.  ``abs_residual`` is reported in the plain
6-vector Euclidean norm, as pescert does.  Substrate: the bulk reference
crystal (unscaled, unrattled, not relaxed).  Skipped (:class:`ProbeSkip`) for a
non-periodic substrate or a model without a stress, with the reference's
messages.

Cost: exact, 2 model-evaluation equivalents (the stress output and the strain
derivative of the energy, counted as the one reverse-mode gradient that gives all
six components); finite differences, 1 + 12 as the reference (1 + 24 with
``order=4``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.derivatives import EXACT, voigt_strain
from jaxcert.core.geometry import det3
from jaxcert.core.model import Model, voigt
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, require_stress, resolve_substrate

__all__ = ["StressConsistencyConfig", "stress_consistency", "tensor_norm"]


def tensor_norm(v: jax.Array) -> jax.Array:
    """Frobenius norm of the symmetric tensor of a Voigt vector: √(Σ normal² + 2 Σ shear²)."""
    return jnp.sqrt(jnp.sum(v[..., :3] ** 2, -1) + 2 * jnp.sum(v[..., 3:] ** 2, -1))


@dataclasses.dataclass(frozen=True)
class StressConsistencyConfig:
    """Defaults of seed 000 / pescert (docs/probes.md §4.8).

    Attributes:
      scale: λ of the score map (0.05).
      gate: gate threshold on d (0.25).
      derivatives: engine for σ^E: ``EXACT`` (default) or ``FiniteDifference()`` (the reference's recipe).
    """

    scale: float = 0.05
    gate: float = 0.25
    derivatives: Any = EXACT


def stress_consistency(
    model: Model,
    key: jax.Array,
    config: StressConsistencyConfig = StressConsistencyConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Stress output vs (1/V₀) ∂E/∂γ; see the module docstring.

    Args:
      model: the potential (needs a stress on periodic structures).
      key: unused (the probe draws nothing).
      config: :class:`StressConsistencyConfig`.
      substrate: a periodic bulk Structure, an element symbol, or None ("Ar").

    Returns:
      :class:`ProbeResult`; details delta (engine step, 0 for exact), scale, stress_pred_voigt and
      stress_fd_voigt (σ^E, named as in pescert even when exact) in eV/Å³, abs_residual (plain
      6-norm, eV/Å³).
    """
    del key
    s = resolve_substrate(model, substrate, "bulk")
    require_stress(model, s)
    return stages.run(model, plan, config, None, s)


def _check(model: Model, s: Structure, config: StressConsistencyConfig) -> None:
    """The static skips (no pbc, no stress; :func:`~jaxcert.probes.base.require_stress`)."""
    del config
    require_stress(model, s)


def plan(cfg: StressConsistencyConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): ask for the outputs (σ^pred) and the six tangents of
    the outputs along the deformations dA_m = ε(e_m) (the engineering Voigt strain directions); the energy
    tangents over V₀ are σ^E; then reduce."""
    del facts
    engine = cfg.derivatives

    def ask(key, s):
        del key
        dA = jax.vmap(voigt_strain)(jnp.eye(6, dtype=s.positions.dtype))  # (6, 3, 3): a step h in γ_m = h along dA_m
        at = kinds.items(s, jnp.broadcast_to(s.positions, (6, *s.positions.shape)))
        return stages.Ask(s, {"out": kinds.evaluate(s), "strain": kinds.tangent(at, dA, engine, wrt="deformation")})

    def reduce(s, ans):
        dt = s.positions.dtype
        sigma_pred = voigt(ans["out"].stress)
        sigma_e = (ans["strain"].energy / jnp.abs(det3(s.cell))).astype(dt)
        diff = sigma_pred - sigma_e
        defect = tensor_norm(diff) / (tensor_norm(sigma_e) + 1e-12)
        score = jnp.exp(-jnp.abs(defect) / cfg.scale)
        details = {
            "delta": jnp.asarray(engine.step(s), dt),
            "scale": jnp.asarray(cfg.scale, dt),
            "stress_pred_voigt": sigma_pred,
            "stress_fd_voigt": sigma_e,
            "abs_residual": jnp.linalg.norm(diff),
        }
        n_evals = 1 + engine.cost(6, exact_cost=1)
        return finalize(defect, score, defect < cfg.gate, n_evals, details)

    return ask, reduce


register(ProbeSpec(
    name="stress_consistency", fn=stress_consistency, config=StressConsistencyConfig, substrate="bulk",
    target=0.0, gated=True, needs_stress=True, needs_pbc=True, plan=plan, check=_check,
))
