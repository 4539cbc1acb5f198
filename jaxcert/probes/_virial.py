r"""virial — the Clausius virial theorem about the relaxed reference (docs/probes.md §4.12).

For a bound cluster sampled canonically near its minimum R^eq, the virial about the
minimum balances the internal kinetic energy:

.. math::  \langle W \rangle = 2 \langle K_{int} \rangle, \qquad
           W = -\sum_i (R_i - R_i^{eq}) \cdot F_i ,

exactly for a harmonic well (W = 2U, ⟨U⟩ = ⟨K_int⟩ = (3N − 6) k_BT/2) and to
anharmonic corrections otherwise.  K_int removes the COM velocity and the rigid
rotation: L = Σ m (r − r_cm) × (v − v_cm), I = Σ m (|r − r_cm|² 𝟙 − (r − r_cm)(r − r_cm)ᵀ),
ω = I⁻¹L (0 if I is singular), v_int = v − v_cm − ω × (r − r_cm), K_int = ½ Σ m |v_int|².
A curl force spins the cluster up and displaces it along non-restoring directions,
so ⟨W⟩ ≠ 2⟨K_int⟩.

Every 4th step of the shared trajectory (275 frames of 1100); ρ_vir = ⟨W⟩/(2⟨K_int⟩),
defect |ρ_vir − 1|, score exp(−|ρ_vir − 1|/1), no gate, target 1.  Reported:
T_int = 2⟨K_int⟩/((3N − 6) k_B) and the per-frame ``rho_series`` = W/(2 K_int).  Skips
(:class:`~jaxcert.probes.base.ProbeSkip`) for fewer than 3 atoms.

Uncertainty (``docs/statistics.md``): ``details["defect_stderr"]`` (= ``rho_vir_stderr``,
dimensionless, the SE of ρ_vir and so of |ρ_vir − 1|) is the delete-one-block jackknife of
the ratio of means ⟨W⟩/(2⟨K_int⟩) over ``n_blocks`` = 10 contiguous blocks of frames
(:func:`jaxcert.core.stats.block_jackknife`; asymptotically the delta method).  Measured on the
reference LJ (Li…S clusters, 30 K, 12 seeds, P excluded): SE ≈ 0.036 per element at 1100
steps, 15–25 % below the seed-to-seed spread (W decorrelates in ≈ 30 fs, a block is 110 fs).
The estimator is the reference's, unaligned: rotating the reference into each frame
(Kabsch) changed ρ_vir by < 0.01 there.  It assumes R^eq is a minimum: when the
relaxation stops short (``relax_converged`` False, e.g. P, whose BFGS ends near a
saddle in jaxcert and in ASE alike), W is not the virial of a bound vibration and
neither the value nor its SE mean much.  ``drift_z`` compares ρ_vir on the two halves of the frames
(:func:`jaxcert.core.stats.half_drift`): |drift_z| > 3 says the trajectory drifts and the SE understates
the uncertainty (SevenNet-0 on Na and Mg: docs/statistics.md, "Is the trajectory long enough?").

Pass ``trajectory=`` to share the trajectory (see :mod:`jaxcert.optim.dynamics`); then
this probe costs no evaluations (unless it has to extend it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.geometry import is_concrete
from jaxcert.core.model import Model
from jaxcert.core.stats import block_jackknife, half_drift
from jaxcert.core.structure import Structure
from jaxcert.core.units import KB_EV_PER_K
from jaxcert.optim.dynamics import LangevinConfig, Trajectory, frame_indices, trajectory_details
from jaxcert.probes import _statmech, stages
from jaxcert.probes._statmech import (
    DEFAULT_SAMPLING,
    DEFAULT_THERMOSTAT,
    REFERENCE_THERMOSTAT,
    Sampling,
    internal_kinetic_energy,
)
from jaxcert.probes.base import ProbeResult, ProbeSkip, ProbeSpec, finalize, register, resolve_substrate, score_map

__all__ = ["VirialConfig", "virial", "internal_kinetic_energy"]


@dataclasses.dataclass(frozen=True)
class VirialConfig:
    """Defaults of docs/probes.md §4.12 and §5.

    Attributes:
      n_steps: stored trajectory steps read (1100).
      sample_every: frame stride in MD steps (4 → 275 frames).
      n_blocks: contiguous blocks of frames for the jackknife standard error (10; ``docs/statistics.md``).
      scale: score scale λ (1.0).
      thermostat: the shared trajectory's :class:`LangevinConfig`.
      sampling: run the trajectory to a precision (:class:`jaxcert.probes._statmech.Sampling`; docs/statistics.md
        §3), with ``n_steps`` as the cap; None is the reference's fixed length of ``n_steps``.  It takes this
        config's estimator settings.
    """

    n_steps: int = 1100
    sample_every: int = 4
    n_blocks: int = 10
    scale: float = 1.0
    thermostat: LangevinConfig = DEFAULT_THERMOSTAT
    sampling: Sampling | None = DEFAULT_SAMPLING

    def __post_init__(self):
        _statmech.check_sampling(self, "virial", virial_every=self.sample_every, n_blocks=self.n_blocks)

    @classmethod
    def reference(cls, **changes: Any) -> VirialConfig:
        """The reference's fixed-length setup: ASE Langevin at 1 fs, 400 warm-up and ``n_steps`` stored steps."""
        return cls(**{"thermostat": REFERENCE_THERMOSTAT, "sampling": None, **changes})


def virial(model: Model, key: jax.Array, config: VirialConfig = VirialConfig(),
           substrate: Structure | str | None = None, *, trajectory: Trajectory | None = None) -> ProbeResult:
    """ρ_vir = ⟨W⟩/(2⟨K_int⟩) on the shared Langevin trajectory; see the module docstring."""
    s = resolve_substrate(model, substrate, "cluster")
    if s.n_atoms < 3 or (is_concrete(s.mask) and s.mask.ndim == 1 and int(np.sum(np.asarray(s.mask))) < 3):
        raise ProbeSkip("need at least 3 atoms for the internal (rotation-free) kinetic energy")
    return _statmech.run(model, plan, config, key, s, trajectory)


def plan(cfg: VirialConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): ask for the shared Langevin trajectory (``langevin``);
    then reduce its sampled frames (no further model quantity)."""
    del facts
    if cfg.sampling is not None:
        return _statmech.ask_trajectory(cfg), _sampled_reduce(cfg)

    def reduce(state, answer):
        del state
        traj, traj_evals, reused = _statmech.charge(answer)
        ref = traj.reference
        idx = frame_indices(cfg.thermostat.warmup_steps, cfg.n_steps, cfg.sample_every)
        R, F, V = traj.positions[idx], traj.forces[idx], traj.velocities[idx]
        w = ref.mask.astype(ref.positions.dtype)[:, None]
        W = -jnp.sum(w * (R - ref.positions) * F, axis=(-2, -1))
        K = jax.vmap(lambda r, v: internal_kinetic_energy(ref.masses, r, v, ref.mask))(R, V)
        mean_W, mean_K = jnp.mean(W), jnp.mean(K)
        rho = mean_W / (2.0 * mean_K)
        jk = block_jackknife(lambda m: m[0] / (2.0 * m[1]), (W, K), cfg.n_blocks)
        n_real = jnp.sum(w)
        dof = 3 * n_real - 6
        defect = jnp.abs(rho - 1.0)
        details = _details(cfg, traj, reused, traj_evals, (rho, mean_W, mean_K), dof, jnp.asarray(len(idx)),
                           W / (2.0 * K), jk, half_drift(lambda m: m[0] / (2.0 * m[1]), (W, K), cfg.n_blocks).z)
        return finalize(defect, score_map(defect, cfg.scale), True, traj_evals, details)

    return _statmech.ask_trajectory(cfg), reduce


def _details(cfg: VirialConfig, traj, reused, traj_evals, means: tuple, dof, n_samples, series, jk,
             drift_z) -> dict[str, Any]:
    """The report's details, the same keys for a fixed run and a run to a precision; ``means`` is (ρ_vir, ⟨W⟩,
    ⟨K_int⟩)."""
    rho, mean_W, mean_K = means
    return {
        "rho_vir": rho,
        "T_int_kin": 2.0 * mean_K / (dof * KB_EV_PER_K),
        "mean_virial": mean_W,
        "mean_kinetic_internal": mean_K,
        "n_samples": n_samples,
        "temperature_K": jnp.asarray(cfg.thermostat.temperature_k),
        "dof": dof,
        "scale": jnp.asarray(cfg.scale),
        **trajectory_details(traj, cfg, reused, traj_evals),
        "rho_series": series,
        "defect_stderr": jk.stderr,
        "rho_vir_stderr": jk.stderr,
        "n_blocks": jk.n_blocks,
        "drift_z": drift_z,
    }


def _sampled_reduce(cfg: VirialConfig):
    """The reduction on a trajectory run to a precision: its stored W and K_int (every ``sample_every``-th step)."""
    sp = cfg.sampling

    def reduce(state, answer):
        del state
        traj, traj_evals, reused = _statmech.charge(answer)
        ref = traj.reference
        ob = traj.sampled["virial"]
        W, K = ob["W"], ob["K"]
        n = traj.n_run // sp.virial_every
        valid = jnp.arange(W.shape[0]) < n
        nf = jnp.maximum(n, 1).astype(W.dtype)
        mean_W = jnp.sum(jnp.where(valid, W, 0.0)) / nf
        mean_K = jnp.sum(jnp.where(valid, K, 0.0)) / nf
        rho = mean_W / (2.0 * mean_K)
        jk = _statmech.prefix_jackknife(_statmech.virial_statistic, (W, K), 0, n, cfg.n_blocks)
        dof = 3 * jnp.sum(ref.mask.astype(W.dtype)) - 6
        defect = jnp.abs(rho - 1.0)
        details = _details(cfg, traj, reused, traj_evals, (rho, mean_W, mean_K), dof, n,
                           jnp.where(valid, W / (2.0 * jnp.where(valid, K, 1.0)), jnp.nan), jk,
                           _statmech.prefix_drift(_statmech.virial_statistic, (W, K), n, cfg.n_blocks))
        details.update(_statmech.sampling_details(traj, sp, "virial"))
        return finalize(defect, score_map(defect, cfg.scale), True, traj_evals, details)

    return reduce


register(ProbeSpec(name="virial", fn=virial, config=VirialConfig, substrate="cluster", target=1.0, gated=False,
                   plan=plan, stream="trajectory"))
