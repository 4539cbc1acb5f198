r"""equipartition — per-mode equipartition at the relaxed reference (PROBES.md §4.13).

Curvature channel: the exact Hessian H = −∂F/∂R of the force output at the relaxed
reference R^eq (``config.derivatives``; jacfwd by default), symmetrised, mass-weighted
D = M^{−½} H M^{−½} (amu, each mass repeated 3×), eigenpairs (λ_α, e_α); keep the
modes with |λ_α| > tol_rel·max|λ| and λ_α > 0 (tol_rel = 1e-3), ω_α² = λ_α in
eV/(Å²·amu).

Dynamics channel: every frame of the shared trajectory (1100), mass-weighted normal
coordinates Q_α = e_αᵀ[√m ⊙ (R − R^eq)] and their raw second moment ⟨Q_α²⟩ (no mean
subtraction).  For a canonical harmonic system each mode holds k_BT/2 of potential
energy:

.. math::  R_\alpha = \frac{\omega_\alpha^2 \langle Q_\alpha^2 \rangle}{k_B T_{target}} = 1,

with T_target = 30 K, the thermostat set-point (not the measured T).  Defect
|median_α R_α − 1|, score exp(−defect/1), no gate, target 1.  A curl force pumps
energy into the rotation and the modes coupled to it, so R_α departs from 1.  The frames
are not realigned (as the reference), so rigid rotation during MD leaks into the modes.

``R_alpha`` and ``omega2`` are reported for all 3N modes, NaN where a mode is not
kept (static shapes under jit); ``n_modes`` counts the kept ones.  Costs 3N
jvp-equivalents for the exact Hessian (6N for central differences) when the
trajectory is shared (``trajectory=``, see :mod:`jaxcert.dynamics`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.derivatives import EXACT
from jaxcert.dynamics import LangevinConfig, Trajectory, frame_indices, get_trajectory
from jaxcert.model import Model
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, resolve_substrate, score_map
from jaxcert.probes.config_temperature import fd_step_of, jvp_cost
from jaxcert.structure import Structure
from jaxcert.units import KB_EV_PER_K

__all__ = ["EquipartitionConfig", "equipartition"]


@dataclasses.dataclass(frozen=True)
class EquipartitionConfig:
    """Defaults of PROBES.md §4.13 and §5.

    Attributes:
      n_steps: stored trajectory steps read (1100).
      sample_every: frame stride (1: every stored step).
      tol_rel: modes with |λ| ≤ tol_rel·max|λ| (or λ ≤ 0) are dropped (1e-3).
      scale: score scale λ (1.0).
      thermostat: the shared trajectory's :class:`LangevinConfig` (its temperature is T_target).
      derivatives: Hessian engine (exact autodiff by default).
    """

    n_steps: int = 1100
    sample_every: int = 1
    tol_rel: float = 1e-3
    scale: float = 1.0
    thermostat: LangevinConfig = LangevinConfig()
    derivatives: Any = EXACT


def equipartition(model: Model, key: jax.Array, config: EquipartitionConfig = EquipartitionConfig(),
                  substrate: Structure | str | None = None, *,
                  trajectory: Trajectory | None = None) -> ProbeResult:
    """Median per-mode equipartition ratio; see the module docstring."""
    s = resolve_substrate(model, substrate, "cluster")
    traj, traj_evals, reused = get_trajectory(model, s, key, config.thermostat, config.n_steps, trajectory)
    ref = traj.reference
    n = ref.n_atoms
    H = config.derivatives.hessian(model, ref).reshape(3 * n, 3 * n)
    H = 0.5 * (H + H.T)
    m3 = jnp.repeat(ref.masses.astype(H.dtype), 3)
    sq = jnp.sqrt(m3)
    lam, e = jnp.linalg.eigh(H / (sq[:, None] * sq[None, :]))
    keep = (jnp.abs(lam) > config.tol_rel * jnp.max(jnp.abs(lam))) & (lam > 0)

    idx = frame_indices(config.thermostat.warmup_steps, config.n_steps, config.sample_every)
    w = ref.mask.astype(H.dtype)[:, None]
    X = ((traj.positions[idx] - ref.positions) * w).reshape(len(idx), 3 * n) * sq
    Q2 = jnp.mean((X @ e) ** 2, axis=0)
    kT = KB_EV_PER_K * config.thermostat.temperature_k
    R = jnp.where(keep, lam * Q2 / kT, jnp.nan)
    R_median = jnp.nanmedian(R)
    defect = jnp.abs(R_median - 1.0)
    n_evals = traj_evals + 3 * n * jvp_cost(config.derivatives)
    details: dict[str, Any] = {
        "n_modes": jnp.sum(keep),
        "R_alpha": R,
        "omega2": jnp.where(keep, lam, jnp.nan),
        "R_median": R_median,
        "R_median_abs_dev": jnp.nanmedian(jnp.abs(R - 1.0)),
        "R_spread_std": jnp.nanstd(R),
        "R_percentiles_5_25_50_75_95": jnp.nanpercentile(R, jnp.asarray([5.0, 25.0, 50.0, 75.0, 95.0], R.dtype)),
        "temperature_K": jnp.asarray(config.thermostat.temperature_k),
        "n_samples": jnp.asarray(len(idx)),
        "eps": jnp.asarray(fd_step_of(config.derivatives, ref)),
        "precision": jnp.asarray(8 * jnp.dtype(ref.positions.dtype).itemsize),
        "scale": jnp.asarray(config.scale),
        "relax_fmax_reached": traj.relax_fmax,
        "trajectory": {
            "reused": reused,
            "n_steps": jnp.asarray(config.n_steps),
            "sample_every": jnp.asarray(config.sample_every),
            "md_evals": traj_evals,
        },
    }
    return finalize(defect, score_map(defect, config.scale), True, n_evals, details)


register(ProbeSpec(name="equipartition", fn=equipartition, config=EquipartitionConfig, substrate="cluster",
                   target=1.0, gated=False))
