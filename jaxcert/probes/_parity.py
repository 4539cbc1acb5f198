r"""parity: the improper-symmetry (inversion) rule for the stress (docs/probes.md §4.2).

Identity tested.  The stress is a polar rank-2 tensor, even under inversion, so an
O(3)-invariant model gives the same stress for a crystal and its inversion image.
The image is taken in fractional coordinates, x → (1 − x) mod 1 (inversion through
the cell centre), with the cell unchanged (every lattice is centrosymmetric):

.. math::  \sigma_P = \sigma(\text{image}), \qquad \bar\sigma = \tfrac12(\sigma + \sigma_P), \qquad
           d_P = \lVert \sigma - \bar\sigma \rVert_F / (\lVert\bar\sigma\rVert_F + 10^{-30}),

Frobenius norms of the 3×3 *stress outputs* (a direct stress head is tested as it
is).  Score exp(−d_P/λ) with λ = 1e-3 (the reference's value; the paper text does
not state it), gate d_P < 5e-3.

Read-outs (docs/probes.md §11.5).  The paper states them on the raw stress; the
reference reads them from the **parity-odd part** O = σ − σ̄.  We follow the
reference: the raw σ_xy of a Pmm2 crystal is a legitimate, parity-even response
for a model that is merely rotation-equivariant, so only the odd part isolates
the defect.  On the Pmm2 substrate σ_xz and σ_yz are odd under the proper C₂z
(zero for any rotation-equivariant model), while σ_xy is removed only by the
mirrors, so

* ``improper_channel_xy`` = |O_xy| / ‖σ̄‖ — the channel a parity-violating (E(3)
  but not O(3)) stress shows up in;
* ``proper_control_shear`` = max(|O_xz|, |O_yz|) / ‖σ̄‖ — the control.

Substrate: the 4-atom Pmm2 crystal, not relaxed.  Skipped without pbc or stress.
Cost 2 model evaluations, no randomness.  No derivative of a model output is
taken, so the ``derivatives`` field is unused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model, voigt
from jaxcert.core.neighbors import inv3
from jaxcert.core.structure import Structure
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, require_stress, resolve_substrate

__all__ = ["ParityConfig", "parity", "inversion_image"]


@dataclasses.dataclass(frozen=True)
class ParityConfig:
    """Defaults of pescert (docs/probes.md §4.2).

    Attributes:
      scale: λ of the score map (1e-3, the reference's value).
      gate: gate threshold on d_P (5e-3).
      derivatives: unused here (no derivative of a model output is taken).
    """

    scale: float = 1e-3
    gate: float = 5e-3
    derivatives: Any = EXACT


def inversion_image(s: Structure) -> Structure:
    """Fractional inversion through the cell centre, f → (1 − f) mod 1, cell unchanged.

    Only periodic axes are wrapped; padding atoms are left where they are.
    """
    pbc = jnp.asarray(s.pbc)
    frac = s.positions @ inv3(s.cell)
    img = jnp.where(pbc, jnp.mod(1.0 - frac, 1.0), 1.0 - frac)
    R = jnp.where(s.mask[:, None], img @ s.cell, s.positions)
    return s.replace(positions=R)


def parity(
    model: Model,
    key: jax.Array,
    config: ParityConfig = ParityConfig(),
    substrate: Structure | str | None = None,
) -> ProbeResult:
    """Inversion parity of the stress output; see the module docstring.

    Args:
      model: the potential (needs a stress).
      key: unused (the probe draws nothing).
      config: :class:`ParityConfig`.
      substrate: a periodic Structure (Pmm2), an element symbol, or None ("Ar").

    Returns:
      :class:`ProbeResult` with d_P, score, gate, n_evals = 2 and details lambda, d_parity,
      improper_channel_xy, proper_control_shear, stress_pred_voigt, stress_image_voigt,
      stress_sym_voigt (eV/Å³).
    """
    s = resolve_substrate(model, substrate, "p2mm")
    require_stress(model, s)
    return stages.run(model, plan, config, key, s)


def plan(cfg: ParityConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): ask for the outputs of ``s`` and of its inversion image
    (one batched ``evaluate`` request of two items); then reduce their stresses."""
    del facts

    def ask(key, s):
        del key
        R = jnp.stack([s.positions, inversion_image(s).positions])
        return stages.Ask(s, kinds.evaluate(kinds.items(s, R)))

    def reduce(s, out):
        dt = s.positions.dtype
        sigma, sigma_p = out.stress[0], out.stress[1]
        sym = 0.5 * (sigma + sigma_p)
        odd = sigma - sym
        norm_sym = jnp.linalg.norm(sym) + 1e-30
        defect = jnp.linalg.norm(odd) / norm_sym
        score = jnp.exp(-jnp.abs(defect) / cfg.scale)
        details = {
            "lambda": jnp.asarray(cfg.scale, dt),
            "d_parity": defect,
            "improper_channel_xy": jnp.abs(odd[0, 1]) / norm_sym,
            "proper_control_shear": jnp.maximum(jnp.abs(odd[0, 2]), jnp.abs(odd[1, 2])) / norm_sym,
            "stress_pred_voigt": voigt(sigma),
            "stress_image_voigt": voigt(sigma_p),
            "stress_sym_voigt": voigt(sym),
        }
        return finalize(defect, score, defect < cfg.gate, 2, details)

    return ask, reduce


register(ProbeSpec(
    name="parity", fn=parity, config=ParityConfig, substrate="p2mm",
    target=0.0, gated=True, needs_stress=True, needs_pbc=True, plan=plan,
    check=lambda model, s, cfg: require_stress(model, s),
))
