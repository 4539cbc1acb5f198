r"""config_temperature — configurational vs kinetic temperature (docs/probes.md §4.11).

In the canonical ensemble of a conservative force field F = −∇U, integration by
parts gives the configurational temperature (Rugh; Butler et al. 1998)

.. math::  k_B T_{conf} = \frac{\langle \lVert F \rVert^2 \rangle}{\langle \mathrm{Tr}\, H \rangle},
           \qquad H = -\partial F/\partial R,

which must equal the kinetic temperature T_kin = ⟨2 KE/(n_dof k_B)⟩ of the same
Langevin trajectory.  A force that is not a gradient (curl) drives a steady
non-equilibrium state and the two disagree.

On the shared trajectory (:mod:`jaxcert.optim.dynamics`: relax, 400 warm-up, 1100 stored
steps at 30 K), every 10th step (110 frames) gives F² = Σ‖F‖² of the raw model
forces and the exact Hutchinson trace t = ¼ Σ_z zᵀHz over 4 Rademacher vectors
(Hz = −J z by a jvp of the force output; ``config.derivatives`` may be a
finite-difference engine).  T_conf = ⟨F²⟩/(k_B⟨t⟩) (NaN if ⟨t⟩ ≤ 0),
ρ = T_conf/⟨T_kin⟩, defect |ρ − 1|, score exp(−|ρ − 1|/1), no gate, target 1.

Kinetic DOF (docs/probes.md §11.4): ``kinetic_dof="auto"`` (default) uses 3N − 3 when
the thermostat holds the COM momentum at zero (FixCom, as the reference) and
3N otherwise; ``"3N"`` is the paper's convention (2.6 % lower ratio at N = 13),
``"3N-3"`` forces the other.  3N − 3 is the physically right count under FixCom:
the COM momentum is constrained to zero, so the equipartition temperature is
2 KE/((3N − 3) k_B), and for a translation-invariant model T_conf is unaffected.

Uncertainty (``docs/statistics.md``): ρ is a smooth function of three time averages,
ρ = ⟨F²⟩/(k_B⟨t⟩⟨T_kin⟩), so its standard error is the delete-one-block jackknife of
that function over ``n_blocks`` = 10 contiguous blocks of frames
(:func:`jaxcert.core.stats.block_jackknife`; Quenouille 1956, Künsch 1989; blocking as in
Flyvbjerg & Petersen, J. Chem. Phys. 91, 461 (1989)).  ``details["defect_stderr"]``
is that SE of ρ, which is also the SE of the defect |ρ − 1| (|∂|ρ − 1|/∂ρ| = 1), in the
defect's units (dimensionless); ``T_config_stderr`` and ``T_kin_stderr`` are in K.
Measured on the reference LJ (13-atom clusters of Li…S, 30 K, 12 seeds): SE ≈ 0.046 per
element at the default 1100 steps, within 10 % of the seed-to-seed spread; the SE falls
as 1/√n_steps (0.025 at 4400).  The defaults stay the reference's (1100 steps, every
10th step): the SE sits ~20× below the score scale λ = 1, and a longer default would
multiply the cost of certifying a real MLIP by ≈ 2.6 at 4400 steps (see ``docs/statistics.md``).

Random streams: the trajectory from ``key`` (as the other stat-mech probes, so a
shared trajectory equals a standalone one), the Hutchinson vectors from
``fold_in(key, 12345)`` (the reference's ``default_rng(seed + 12345)``), one split
per frame.

Pass ``trajectory=`` a :class:`jaxcert.optim.dynamics.Trajectory` made with the same
thermostat to share it (it is extended if shorter than ``n_steps``); its cost is then
not charged here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core.derivatives import EXACT, _rademacher
from jaxcert.core.model import Model
from jaxcert.core.stats import block_jackknife, half_drift
from jaxcert.core.structure import Structure
from jaxcert.core.units import KB_EV_PER_K
from jaxcert.optim.dynamics import LangevinConfig, Trajectory, frame_indices, kinetic_temperature, trajectory_details
from jaxcert.probes import _statmech, kinds, stages
from jaxcert.probes._statmech import (
    DEFAULT_SAMPLING,
    DEFAULT_THERMOSTAT,
    HUTCHINSON_STREAM,
    REFERENCE_THERMOSTAT,
    Sampling,
    kinetic_dof,
    t_conf,
)
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, require_atoms, resolve_substrate, score_map

__all__ = [
    "ConfigTemperatureConfig", "config_temperature", "HUTCHINSON_STREAM", "kinetic_dof",
]

_t_conf = t_conf


@dataclasses.dataclass(frozen=True)
class ConfigTemperatureConfig:
    """Defaults of docs/probes.md §4.11 and §5.

    Attributes:
      n_steps: stored trajectory steps read (1100).
      sample_every: frame stride in MD steps (10 → 110 frames).
      n_hutchinson: Rademacher vectors per frame (4).
      kinetic_dof: "auto" (3N − 3 under a COM-fixing thermostat, else 3N), "3N" (paper) or "3N-3".
      n_blocks: contiguous blocks of frames for the jackknife standard error (10; ``docs/statistics.md``).
      scale: score scale λ (1.0).
      thermostat: the shared trajectory's :class:`LangevinConfig` (30 K, 1 fs, 0.05/fs, 400 warm-up).
      derivatives: engine for H·z (exact autodiff by default).
      sampling: run the trajectory to a precision (:class:`jaxcert.probes._statmech.Sampling`; docs/statistics.md
        §3), with ``n_steps`` as the cap; None is the reference's fixed length of ``n_steps``.  It takes this
        config's estimator settings, and needs the exact engine (the run computes H·z itself).
    """

    n_steps: int = 1100
    sample_every: int = 10
    n_hutchinson: int = 4
    kinetic_dof: str = "auto"
    n_blocks: int = 10
    scale: float = 1.0
    thermostat: LangevinConfig = DEFAULT_THERMOSTAT
    derivatives: Any = EXACT
    sampling: Sampling | None = DEFAULT_SAMPLING

    def __post_init__(self):
        _statmech.check_sampling(self, "config_temperature", ct_every=self.sample_every,
                                 n_hutchinson=self.n_hutchinson, kinetic_dof=self.kinetic_dof, n_blocks=self.n_blocks)

    @classmethod
    def reference(cls, **changes: Any) -> ConfigTemperatureConfig:
        """The reference's fixed-length setup: ASE Langevin at 1 fs, 400 warm-up and ``n_steps`` stored steps."""
        return cls(**{"thermostat": REFERENCE_THERMOSTAT, "sampling": None, **changes})


def config_temperature(model: Model, key: jax.Array, config: ConfigTemperatureConfig = ConfigTemperatureConfig(),
                       substrate: Structure | str | None = None, *,
                       trajectory: Trajectory | None = None) -> ProbeResult:
    """T_conf/T_kin on the shared Langevin trajectory; see the module docstring."""
    s = resolve_substrate(model, substrate, "cluster")
    require_atoms(s, 2, "config_temperature", "with one atom under FixCom no kinetic degree of freedom is left")
    return _statmech.run(model, plan, config, key, s, trajectory)


def plan(cfg: ConfigTemperatureConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): ask for the shared Langevin trajectory (``langevin``);
    ask for the Hutchinson products H·z at the sampled frames (``tangent`` requests, H z = −J z); reduce."""
    del facts
    if cfg.sampling is not None:
        return _statmech.ask_trajectory(cfg), _sampled_reduce(cfg)
    engine = cfg.derivatives
    idx = frame_indices(cfg.thermostat.warmup_steps, cfg.n_steps, cfg.sample_every)

    def ask_products(key, answer):
        traj, traj_evals, reused = _statmech.charge(answer)
        ref = traj.reference
        R = traj.positions[idx]
        # the Rademacher vectors of derivatives.hutchinson_trace, one split of the stream per frame
        hkeys = jax.random.split(jax.random.fold_in(key, HUTCHINSON_STREAM), len(idx))
        z = jax.vmap(lambda k: _rademacher(k, ref, cfg.n_hutchinson))(hkeys)  # (frames, n_hutchinson, n, 3)
        at = kinds.items(ref, jnp.broadcast_to(R[:, None], z.shape))
        return stages.Ask((traj, traj_evals, reused, z), kinds.tangent(at, z, engine))

    def reduce(state, jz):
        traj, traj_evals, reused, z = state
        ref = traj.reference
        F, V = traj.forces[idx], traj.velocities[idx]
        w = ref.mask.astype(ref.positions.dtype)
        n_real = jnp.sum(w)
        n_dof = kinetic_dof(n_real, cfg.thermostat, cfg.kinetic_dof)
        hz = -jz.forces.astype(z.dtype)
        t = jnp.mean(jnp.sum(z * hz, axis=(-2, -1)), axis=-1)  # ¼ Σ_z zᵀHz per frame
        F2 = jnp.sum(F * F * w[:, None], axis=(-2, -1))
        T_kin_frame = kinetic_temperature(ref.masses, V, n_dof, ref.mask)
        mean_F2, mean_t = jnp.mean(F2), jnp.mean(t)
        T_conf = _t_conf(mean_F2, mean_t)
        T_kin = jnp.mean(T_kin_frame)
        ratio = T_conf / T_kin
        # delete-one-block jackknife of the whole ratio of means (jaxcert.core.stats, docs/statistics.md)
        jk = block_jackknife(lambda m: jnp.stack([_t_conf(m[0], m[1]) / m[2], _t_conf(m[0], m[1]), m[2]]),
                             (F2, t, T_kin_frame), cfg.n_blocks)
        ok = (t > 0) & (T_kin_frame > 0)
        series = jnp.where(ok, F2 / (KB_EV_PER_K * jnp.where(ok, t * T_kin_frame, 1.0)), jnp.nan)
        defect = jnp.abs(ratio - 1.0)
        n_evals = traj_evals + engine.cost(len(idx) * cfg.n_hutchinson)
        drift = half_drift(lambda m: _t_conf(m[0], m[1]) / m[2], (F2, t, T_kin_frame), cfg.n_blocks).z
        details = _details(cfg, traj, reused, traj_evals, engine.step(ref), (T_conf, T_kin, ratio, mean_F2, mean_t),
                           jnp.asarray(len(idx)), n_dof, series, jk, drift)
        return finalize(defect, score_map(defect, cfg.scale), True, n_evals, details)

    return _statmech.ask_trajectory(cfg, keep_key=True), ask_products, reduce


def _details(cfg: ConfigTemperatureConfig, traj, reused, traj_evals, eps, means: tuple, n_samples, n_dof, series,
             jk, drift_z) -> dict[str, Any]:
    """The report's details, the same keys for a fixed run and a run to a precision; ``means`` is (T_conf,
    T_kin, T_conf/T_kin, ⟨|F|²⟩, ⟨Tr H⟩) and ``jk`` the jackknife of (ratio, T_conf, T_kin)."""
    T_conf, T_kin, ratio, mean_F2, mean_t = means
    ref = traj.reference
    return {
        "T_config": T_conf,
        "T_kin": T_kin,
        "ratio": ratio,
        "mean_F2": mean_F2,
        "mean_TrH": mean_t,
        "n_samples": n_samples,
        "temperature_K": jnp.asarray(cfg.thermostat.temperature_k),
        "n_hutchinson": jnp.asarray(cfg.n_hutchinson),
        "n_dof": n_dof,
        "eps": jnp.asarray(eps),
        "precision": jnp.asarray(8 * jnp.dtype(ref.positions.dtype).itemsize),
        "scale": jnp.asarray(cfg.scale),
        **trajectory_details(traj, cfg, reused, traj_evals),
        "ratio_series": series,
        "defect_stderr": jk.stderr[0],
        "ratio_stderr": jk.stderr[0],
        "T_config_stderr": jk.stderr[1],
        "T_kin_stderr": jk.stderr[2],
        "n_blocks": jk.n_blocks,
        "drift_z": drift_z,
    }


def _sampled_reduce(cfg: ConfigTemperatureConfig):
    """The reduction on a trajectory run to a precision: its stored F², Hutchinson traces and T_kin (the run
    computed them at every ``sample_every``-th step, from the Hutchinson stream folded with the step)."""
    sp = cfg.sampling

    def reduce(state, answer):
        del state
        traj, traj_evals, reused = _statmech.charge(answer)
        ref = traj.reference
        ob = traj.sampled["config_temperature"]
        F2, t, T_kin_frame = ob["F2"], ob["t"], ob["T_kin"]
        n = traj.n_run // sp.ct_every
        valid = jnp.arange(F2.shape[0]) < n
        nf = jnp.maximum(n, 1).astype(F2.dtype)
        mean_F2 = jnp.sum(jnp.where(valid, F2, 0.0)) / nf
        mean_t = jnp.sum(jnp.where(valid, t, 0.0)) / nf
        T_conf = t_conf(mean_F2, mean_t)
        T_kin = jnp.sum(jnp.where(valid, T_kin_frame, 0.0)) / nf
        ratio = T_conf / T_kin
        jk = _statmech.prefix_jackknife(lambda m: jnp.stack([t_conf(m[0], m[1]) / m[2], t_conf(m[0], m[1]), m[2]]),
                                        (F2, t, T_kin_frame), 0, n, cfg.n_blocks)
        ok = valid & (t > 0) & (T_kin_frame > 0)
        series = jnp.where(ok, F2 / (KB_EV_PER_K * jnp.where(ok, t * T_kin_frame, 1.0)), jnp.nan)
        defect = jnp.abs(ratio - 1.0)
        drift = _statmech.prefix_drift(_statmech.ct_statistic, (F2, t, T_kin_frame), n, cfg.n_blocks)
        details = _details(cfg, traj, reused, traj_evals, cfg.derivatives.step(ref),
                           (T_conf, T_kin, ratio, mean_F2, mean_t), n, traj.sampled["n_dof"], series, jk, drift)
        details.update(_statmech.sampling_details(traj, sp, "config_temperature"))
        return finalize(defect, score_map(defect, cfg.scale), True, traj_evals, details)

    return reduce


register(ProbeSpec(name="config_temperature", fn=config_temperature, config=ConfigTemperatureConfig,
                   substrate="cluster", target=1.0, gated=False, plan=plan, stream="trajectory"))
