r"""trimer: three-body decay and transverse Jacobian symmetry (docs/probes.md §4.5).

Substrate: the symmetric A–B–C trimer (atoms 0, 1 = apex B, 2; §2.3).

**(i) Three-body decay.**  With B moved away from the A–C base by o_k along the
unit vector from the A–C midpoint to B (exactly ŷ for the §2.3 trimer, as the
reference's ``B₀ + o_k ŷ``), o_k = linspace(0, 12 Å, 16),

.. math::  \Delta E_3(o_k) = E_{ABC} - (E_{AB} + E_{BC} + E_{CA}) + (E_A + E_B + E_C),

which is ≡ 0 for a pair potential and must decay with o for a physical many-body
model.  The pair and monomer energies are the same structure with atoms switched
off through ``mask`` (static shapes; masked atoms are exactly inert in jaxcert
models), pbc False and the cell kept; a monomer sits at the cell centre (the
reference's ``center()`` without vacuum), so a one-body term that depends on
absolute position shows up in ΔE₃.  Noise floor
η = η_rel·max(1, max_k |E_ABC|, max_k (|E_AB| + |E_BC| + |E_CA|)); peak p = max|ΔE₃|;
if p < η the model is pairwise ("vanishing") and d₃ = 0, else
d₃ = |ΔE₃(o_last)|/p + max(0, TV/span − 1) (the last term only if span > η), with
TV = Σ|ΔE₃(k+1) − ΔE₃(k)| and span = |ΔE₃(0) − ΔE₃(last)|.  The reference's
η_rel = 1e-8 is a float64 value: the seven-term difference carries a rounding
error ≈ several ε_mach·|E|, which in float32 (≈ 1e-6 relative) would exceed it and
make every pair potential look many-body.  The default η_rel = max(1e-8,
100 ε_mach) is therefore dtype-aware: exactly the reference's 1e-8 in float64 and
1.2e-5 in float32 (``noise_floor_rel`` overrides it).

**(ii) Transverse symmetry.**  For n_pairs random unit vectors u, w ∈ ℝ^{3N}
(from ``key``), a = |wᵀ(Ju) − uᵀ(Jw)| with J = ∂F/∂R of the force output
(exact jvp by default; ``FiniteDifference()`` gives the reference's central
differences with ε = fd_step(1, 2)); d_⊥ = mean a in eV/Å² (0 for J = Jᵀ, i.e. a
conservative force field).  n_pairs: the paper states 8, pescert uses 16 (§11.1).
We default to **16**: the published reference numbers come from 16 draws, the
estimate of the mean has half the variance, and with exact jvps the extra
pairs cost only 16 evaluations more; ``n_pairs=8`` gives the paper's setting.
pescert's optional ``eps_sweep`` (an FD-step study) has no meaning for exact
derivatives and is not implemented.

**Scores.**  s₃ = exp(−d₃/0.2) (the paper's and the reference's scale, §11.8),
s_⊥ = exp(−d_⊥/0.05), score = √(s₃ s_⊥); gate d_⊥ < 0.25 (transverse only).
``defect`` is the reference's raw_defect d₃ + d_⊥/0.05 (kept for JSON
comparability even though it is not the score's argument, §11.8; the score's
own argument is d₃/0.2 + d_⊥/0.05 = −2 ln score).

**Fragment refusal.**  If the isolated-atom or pair energies are non-finite while
the full trimer is finite, the reference skips the probe; here ``status`` is
SKIPPED, ``score`` NaN and ``gate`` False, with the transverse channel still in
the details (``sub_defects.three_body_vanishing`` NaN).

``n_evals``: 3 monomers + 1 (E_CA) + 3 × 16 scan energies + 2·n_pairs jvps
(×2 or ×4 for FD) — 84 by default (the reference: ≈114–116).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import batching
from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import (
    SKIPPED,
    ProbeResult,
    ProbeSkip,
    ProbeSpec,
    finalize,
    precision_bits,
    register,
    resolve_substrate,
    score_map,
)

__all__ = ["TrimerConfig", "trimer", "three_body_decay", "transverse_asymmetry", "unit_pairs"]


@dataclasses.dataclass(frozen=True)
class TrimerConfig:
    """Defaults: seed 000 / pescert (docs/probes.md §4.5).

    Attributes:
      n_offsets: scan points for ΔE₃ (16).
      max_offset_a: largest displacement of B in Å (12.0).
      noise_floor_rel: η_rel, or ``None`` for max(1e-8, 100 ε_mach) (1e-8 in float64).
      n_pairs: transverse (u, w) pairs (16 as pescert; the paper says 8, §11.1).
      scale_three_body: λ₃ (0.2).
      scale_transverse: λ_⊥ in eV/Å² (0.05).
      gate_threshold: gate d_⊥ < this (0.25 = 5 λ_⊥).
      derivatives: ``EXACT`` or ``FiniteDifference()``.
    """

    n_offsets: int = 16
    max_offset_a: float = 12.0
    noise_floor_rel: float | None = None
    n_pairs: int = 16
    scale_three_body: float = 0.2
    scale_transverse: float = 0.05
    gate_threshold: float = 0.25
    derivatives: Any = EXACT


def _noise_rel(cfg: TrimerConfig, dtype: Any) -> float:
    if cfg.noise_floor_rel is not None:
        return float(cfg.noise_floor_rel)
    return max(1e-8, 100.0 * float(np.finfo(np.dtype(dtype)).eps))


def _decay_geometries(s: Structure, offsets: jax.Array) -> tuple[jax.Array, np.ndarray]:
    """One batch of geometries: 3 monomers, CA, then (ABC, AB, BC) at each offset: positions (4 + 3k, 3, 3)
    and the static masks (4 + 3k, 3)."""
    R = s.positions
    k = offsets.shape[0]
    centre = 0.5 * jnp.sum(s.cell, axis=0)
    mid = 0.5 * (R[0] + R[2])
    y = (R[1] - mid) / jnp.linalg.norm(R[1] - mid)
    mono = jnp.stack([R.at[a].set(centre) for a in range(3)])
    scan = R[None] + (offsets[:, None] * (jnp.arange(3) == 1)[None, :])[:, :, None] * y  # (k, 3, 3)
    Rb = jnp.concatenate([mono, R[None], jnp.repeat(scan, 3, axis=0)])
    masks = np.concatenate([
        np.eye(3, dtype=bool), [[True, False, True]],
        np.tile([[True, True, True], [True, True, False], [False, True, True]], (k, 1)),
    ])
    return Rb, masks


def _decay_terms(e: jax.Array, offsets: jax.Array, noise_rel: float, dt: Any) -> dict:
    """The d₃ penalty terms from the energies ``e`` of the :func:`_decay_geometries` batch."""
    e_mono, e_ca = e[:3], e[3]
    e_abc, e_ab, e_bc = e[4::3], e[5::3], e[6::3]
    d3 = e_abc - (e_ab + e_bc + e_ca) + jnp.sum(e_mono)
    eta = noise_rel * jnp.maximum(
        1.0, jnp.maximum(jnp.max(jnp.abs(e_abc)), jnp.max(jnp.abs(e_ab) + jnp.abs(e_bc) + jnp.abs(e_ca)))
    )
    peak = jnp.max(jnp.abs(d3))
    vanishing = peak < eta
    r = jnp.abs(d3[-1]) / jnp.where(vanishing, 1.0, peak)
    tv = jnp.sum(jnp.abs(jnp.diff(d3)))
    span = jnp.abs(d3[0] - d3[-1])
    penalty = jnp.where(span > eta, jnp.maximum(0.0, tv / jnp.where(span > eta, span, 1.0) - 1.0), 0.0)
    defect = jnp.where(vanishing, 0.0, r + penalty)
    fragments_finite = jnp.all(jnp.isfinite(e_mono)) & jnp.isfinite(e_ca) & jnp.all(jnp.isfinite(e_ab + e_bc))
    return {
        "defect": defect.astype(dt),
        "separations": offsets,
        "delta_e3": d3,
        "residual_at_max_sep": jnp.abs(d3[-1]),
        "residual_relative": jnp.where(vanishing, 0.0, r),
        "smoothness_penalty": jnp.where(vanishing, 0.0, penalty),
        "vanishing": vanishing,
        "noise_floor": eta,
        "peak": peak,
        "fragments_finite": fragments_finite,
        "trimer_finite": jnp.all(jnp.isfinite(e_abc)),
    }


def three_body_decay(model: Model, s: Structure, offsets: jax.Array, noise_rel: float) -> dict:
    """ΔE₃ along the B-recession scan and the d₃ penalty terms (arrays; jittable)."""
    Rb, masks = _decay_geometries(s, offsets)
    e = batching.vmap(lambda R_, m: model.energy_of(model.params, s.replace(positions=R_, mask=m)),
                      model.max_batch)(Rb, jnp.asarray(masks))
    return _decay_terms(e, offsets, noise_rel, s.positions.dtype)


@functools.partial(jax.jit, static_argnames=("n_pairs", "dtype"))
def unit_pairs(key: jax.Array, mask: jax.Array, n_pairs: int, dtype: Any) -> jax.Array:
    """(n_pairs, 2, n, 3): per pair u then w, standard normal on the real DOFs, each normalised.

    Jitted on its own (and called outside the probe's program when the probe is
    called directly), so the PRNG kernel compiles once per process, not once per model.
    """
    m = mask[:, None].astype(dtype)
    uw = jax.random.normal(key, (n_pairs, 2, mask.shape[0], 3), dtype) * m
    return uw / jnp.linalg.norm(uw, axis=(2, 3), keepdims=True)


def transverse_asymmetry(model: Model, s: Structure, uw: jax.Array, engine: Any = EXACT) -> jax.Array:
    """a_k = |w_kᵀ(J u_k) − u_kᵀ(J w_k)| in eV/Å² for the pairs ``uw`` (n_pairs, 2, n, 3) of :func:`unit_pairs`."""
    n_pairs = uw.shape[0]
    j = batching.vmap(lambda v: engine.force_jvp(model, s, v), model.max_batch)(
        uw.reshape(2 * n_pairs, *s.positions.shape))
    return _asymmetry(uw, j.reshape(uw.shape))


def _asymmetry(uw: jax.Array, j: jax.Array) -> jax.Array:
    """a_k from the pairs ``uw`` and their force-Jacobian columns ``j`` (both (n_pairs, 2, n, 3))."""
    u, w, ju, jw = uw[:, 0], uw[:, 1], j[:, 0], j[:, 1]
    return jnp.abs(jnp.sum(w * ju, axis=(1, 2)) - jnp.sum(u * jw, axis=(1, 2)))


def trimer(
    model: Model,
    key: jax.Array,
    config: TrimerConfig = TrimerConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Three-body decay + transverse Jacobian symmetry (see the module docstring).

    Args:
      model: the potential.
      key: PRNG key for the transverse (u, w) draws.
      config: :class:`TrimerConfig`.
      substrate: a 3-atom trimer Structure (A, apex B, C), an element symbol, or ``None`` (Ar).

    Returns:
      :class:`ProbeResult`: defect d₃ + d_⊥/0.05, score √(s₃ s_⊥), gate d_⊥ < 0.25.
    """
    s = resolve_substrate(model, substrate, "trimer")
    _require_trimer(s)
    return stages.run(model, plan, config, key, s)


def _require_trimer(s: Structure) -> None:
    if s.n_atoms != 3:
        raise ProbeSkip(f"the trimer probe needs a 3-atom A–B–C substrate, got {s.n_atoms} atoms")


def plan(cfg: TrimerConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): ask for the energies of the masked three-body batch
    (``evaluate`` over (positions, mask)) and the 2·n_pairs force-Jacobian columns J u, J w (``tangent``);
    then reduce."""
    del facts
    engine = cfg.derivatives

    def ask(key, s):
        _require_trimer(s)
        dt = s.positions.dtype
        uw = unit_pairs(key, s.mask, cfg.n_pairs, dt)
        offsets = jnp.linspace(0.0, cfg.max_offset_a, cfg.n_offsets, dtype=dt)
        Rb, masks = _decay_geometries(s, offsets)
        v = uw.reshape(2 * cfg.n_pairs, *s.positions.shape)
        requests = {
            "decay": kinds.evaluate(kinds.items(s, Rb, mask=jnp.asarray(masks))),
            "columns": kinds.tangent(kinds.items(s, jnp.broadcast_to(s.positions, v.shape)), v, engine),
        }
        return stages.Ask((uw, offsets, s), requests)

    def reduce(state, answers):
        uw, offsets, s = state
        dt = s.positions.dtype
        tb = _decay_terms(answers["decay"].energy, offsets, _noise_rel(cfg, dt), dt)
        d3 = tb.pop("defect")
        a = _asymmetry(uw, answers["columns"].forces.reshape(uw.shape))
        d_perp = jnp.mean(a)
        s3 = score_map(d3, cfg.scale_three_body)
        s_perp = score_map(d_perp, cfg.scale_transverse)
        raw = d3 + d_perp / cfg.scale_transverse
        refused = ~tb.pop("fragments_finite") & tb.pop("trimer_finite")
        d3_rep = jnp.where(refused, jnp.nan, d3)
        details = {
            "sub_scores": {"three_body_vanishing": jnp.where(refused, jnp.nan, s3), "transverse": s_perp},
            "sub_defects": {"three_body_vanishing": d3_rep, "transverse": d_perp},
            "three_body_vanishing": tb,
            "transverse": {
                "n_pairs": jnp.asarray(cfg.n_pairs, jnp.int32),
                "eps": jnp.asarray(engine.step(s), dt),
                "mean_abs_antisymmetry": d_perp,
                "precision": jnp.asarray(precision_bits(s), jnp.int32),
                "scale": jnp.asarray(cfg.scale_transverse, dt),
                "antisymmetry": a,
            },
            "fragment_refused": refused,
        }
        n_evals = 3 + 1 + 3 * cfg.n_offsets + engine.cost(2 * cfg.n_pairs)
        res = finalize(raw, jnp.sqrt(s3 * s_perp), d_perp < cfg.gate_threshold, n_evals, details)
        return res._replace(
            score=jnp.where(refused, jnp.nan, res.score),
            gate=res.gate & ~refused,
            status=jnp.where(refused, SKIPPED, res.status).astype(jnp.int32),
        )

    return ask, reduce


register(ProbeSpec("trimer", trimer, TrimerConfig, "trimer", plan=plan))
