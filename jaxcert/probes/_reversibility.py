r"""reversibility — NVE round trip of velocity-Verlet (docs/probes.md §4.10).

From the (unrelaxed) cluster with seeded Maxwell–Boltzmann velocities at 30 K
(:func:`jaxcert.optim.dynamics.maxwell_boltzmann`: p = z√(m k_B T), mean momentum
removed), integrate n = 100 velocity-Verlet steps of dt = 1 fs, set v ← −v and
integrate n more.  For forces that depend on positions only, velocity-Verlet is
exactly time-reversible, so the atoms return to R(0) up to round-off:

.. math::  d_{rt} = \sqrt{\tfrac1N \sum_i \lVert R_i(2n) - R_i(0) \rVert^2}\ \text{Å}.

Score exp(−d_rt/1e-3 Å), gate d_rt < 5e-3 Å.  Reported only: the total energy
E_pot + E_kin at step 0 and after each step of both legs (2n + 1 values) and the
slope of its least-squares line against the record index (eV/step), fitted over
*both* legs as the reference does.  ``energy_max_forward`` is the maximum over both
legs (the reference's name).  Costs 1 + 2n evaluations (the reference's cache makes
the second leg's first force free).

What it sees: roughness (forces that jump, history or noise); a smooth
non-conservative force (curl) is time-reversible and passes (documented blind spot,
docs/probes.md §8.4).  Velocities come from ``key`` (the same draw as the shared
trajectory's, as the reference's ``default_rng(seed)``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.model import Model
from jaxcert.core.structure import Structure
from jaxcert.optim.dynamics import maxwell_boltzmann
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, resolve_substrate, score_map

__all__ = ["ReversibilityConfig", "reversibility"]


@dataclasses.dataclass(frozen=True)
class ReversibilityConfig:
    """Defaults of docs/probes.md §4.10.

    Attributes:
      n_steps: steps per leg (100).
      timestep_fs: velocity-Verlet step in fs (1.0).
      temperature_k: temperature of the seeded velocities in K (30).
      scale: score scale λ in Å (1e-3).
      gate: gate threshold on d_rt in Å (5e-3).
    """

    n_steps: int = 100
    timestep_fs: float = 1.0
    temperature_k: float = 30.0
    scale: float = 1e-3
    gate: float = 5e-3


def _slope(y: jax.Array) -> jax.Array:
    """Least-squares slope of y against its index (NaN for ≤ 2 points)."""
    n = y.shape[0]
    if n <= 2:
        return jnp.asarray(jnp.nan, y.dtype)
    x = jnp.arange(n, dtype=y.dtype)
    xc = x - jnp.mean(x)
    return jnp.sum(xc * (y - jnp.mean(y))) / jnp.sum(xc * xc)


def reversibility(model: Model, key: jax.Array, config: ReversibilityConfig = ReversibilityConfig(),
                  substrate: Structure | str | None = None) -> ProbeResult:
    """Velocity-Verlet round trip; see the module docstring."""
    s = resolve_substrate(model, substrate, "cluster")
    return stages.run(model, plan, config, key, s)


def plan(cfg: ReversibilityConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): draw v0 and ask for the forward leg (``verlet``); ask for
    the backward leg from its end with v ← −v; then reduce."""
    del facts

    def forward(key, s):
        v0 = maxwell_boltzmann(key, s, cfg.temperature_k)
        return stages.Ask(s, kinds.verlet(s, v0, cfg.timestep_fs, cfg.n_steps))

    def backward(s, r1):
        req = kinds.verlet(s.replace(positions=r1.positions), -r1.velocities, cfg.timestep_fs, cfg.n_steps)
        return stages.Ask((s, r1.energies), req)

    def reduce(state, r2):
        s, e1 = state
        R_final = r2.positions
        w = s.mask.astype(s.positions.dtype)
        d2 = jnp.sum((R_final - s.positions) ** 2, axis=-1)
        d_rt = jnp.sqrt(jnp.sum(w * d2) / jnp.sum(w))
        energies = jnp.concatenate([e1, r2.energies[1:]])
        details: dict[str, Any] = {
            "n_steps": jnp.asarray(cfg.n_steps),
            "dt_fs": jnp.asarray(cfg.timestep_fs),
            "temperature_K": jnp.asarray(cfg.temperature_k),
            "scale": jnp.asarray(cfg.scale),
            "roundtrip_rms_disp": d_rt,
            "energy_drift_per_step": _slope(energies),
            "energy_first": energies[0],
            "energy_max_forward": jnp.max(energies),
            "energies": energies,
        }
        return finalize(d_rt, score_map(d_rt, cfg.scale), d_rt < cfg.gate, 1 + 2 * cfg.n_steps, details)

    return forward, backward, reduce


register(ProbeSpec(name="reversibility", fn=reversibility, config=ReversibilityConfig, substrate="cluster",
                   plan=plan))
