r"""equipartition — per-mode equipartition at the relaxed reference (docs/probes.md §4.13).

Curvature channel: the exact Hessian H = −∂F/∂R of the force output at the relaxed
reference R^eq (``config.derivatives``; jacfwd by default), symmetrised, mass-weighted
D = M^{−½} H M^{−½} (amu, each mass repeated 3×), eigenpairs (λ_α, e_α); keep the
modes with |λ_α| > tol_rel·max|λ| and λ_α > 0 (tol_rel = 1e-3), ω_α² = λ_α in
eV/(Å²·amu).

Dynamics channel: every frame of the shared trajectory (1100), rotated onto R^eq
(``align="auto"``, below), mass-weighted normal coordinates Q_α = e_αᵀ[√m ⊙ (R − R^eq)]
and their raw second moment ⟨Q_α²⟩ (no mean subtraction).  For a canonical harmonic
system each mode holds k_BT/2 of potential energy:

.. math::  R_\alpha = \frac{\omega_\alpha^2 \langle Q_\alpha^2 \rangle}{k_B T_{target}} = 1,

with T_target = 30 K, the thermostat set-point (not the measured T).  Defect
|median_α R_α − 1|, score exp(−defect/1), no gate, target 1.  A curl force pumps
energy into the rotation and the modes coupled to it, so R_α departs from 1.

Frame alignment (a change from the reference, ``docs/statistics.md``).  The Langevin
bath does not conserve angular momentum, so the cluster's orientation diffuses: on the
reference LJ at 30 K (Li…S, seed 0) it turns by 2–8° in 1100 fs and 5–26° in 8800 fs.
The reference projects the unaligned frames (docs/probes.md §4.13, §11.11), so the rotation
leaks into ⟨Q_α²⟩ at second order in the angle and the ratio grows with the trajectory
length (B cluster: median R 1.15 at 1100 steps over 11 seeds, 2.4 at 4400 and 4.7 at
8800 over 4 seeds, with a jackknife SE ≈ 0.1).  Aligning first rotates each frame onto
R^eq by the mass-weighted least-squares (Kabsch) rotation (:func:`align_frames`, the Eckart frame), which
removes the leak (B: 1.02, 1.02, 1.01 at the same lengths).  Alignment is right only
when rotations cost no energy, so ``align="auto"`` (default) aligns when the three
rigid-rotation displacements d = a × (R^eq − R̄) have mass-weighted curvature
dᵀHd/Σm|d|² ≤ 0.1·max|λ| (a rotation-invariant model at its minimum; not, e.g., an
anchored harmonic well, whose "rotations" are real vibrations); ``"kabsch"`` always
aligns and ``"none"`` is the reference's estimator.  ``aligned`` and
``rotation_deg_max`` (the largest rotation met) are reported.

Uncertainty: ``details["defect_stderr"]`` (= ``R_median_stderr``, dimensionless) is the
delete-one-block jackknife of the whole statistic, median over modes of
λ_α⟨Q_α²⟩/k_BT, over ``n_blocks`` = 10 contiguous blocks of frames
(:func:`jaxcert.core.stats.block_jackknife`).  The median is continuous but not smooth in the
block means, and the delete-one jackknife of such a statistic is conservative (its
variance estimate is biased upwards, Efron & Stein, Ann. Stat. 9, 586 (1981)): measured
≈ 1.5× the seed-to-seed spread on the reference LJ (SE 0.083 vs spread 0.055 per
element at 1100 steps).  The median averages: each mode's ratio alone has SE ≈ 0.25.
``n_negative_modes`` counts curvatures below −tol_rel·max|λ|: nonzero means R^eq is
not a minimum (the relaxation stopped at a saddle, e.g. P on the reference LJ) and
the ratios are not meaningful.

``R_alpha`` and ``omega2`` are reported for all 3N modes, NaN where a mode is not
kept (static shapes under jit); ``n_modes`` counts the kept ones.  Costs 3N
jvp-equivalents for the exact Hessian (6N for central differences) when the
trajectory is shared (``trajectory=``, see :mod:`jaxcert.optim.dynamics`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxcert.core import linalg
from jaxcert.core.derivatives import EXACT
from jaxcert.core.model import Model
from jaxcert.core.stats import block_jackknife, half_drift
from jaxcert.core.structure import Structure
from jaxcert.core.units import KB_EV_PER_K
from jaxcert.optim.dynamics import LangevinConfig, Trajectory, frame_indices, trajectory_details
from jaxcert.probes import _statmech, kinds, stages
from jaxcert.probes._statmech import (
    DEFAULT_SAMPLING,
    DEFAULT_THERMOSTAT,
    REFERENCE_THERMOSTAT,
    ROTATION_TOL,
    Sampling,
    align_frames,
)
from jaxcert.probes._statmech import rotation_curvature as _rotation_curvature
from jaxcert.probes.base import ProbeResult, ProbeSpec, finalize, register, require_atoms, resolve_substrate, score_map

__all__ = ["EquipartitionConfig", "equipartition", "align_frames", "ROTATION_TOL", "ALIGN_MODES"]

ALIGN_MODES = ("auto", "kabsch", "none")


@dataclasses.dataclass(frozen=True)
class EquipartitionConfig:
    """Defaults of docs/probes.md §4.13 and §5.

    Attributes:
      n_steps: stored trajectory steps read (1100).
      sample_every: frame stride (1: every stored step).
      tol_rel: modes with |λ| ≤ tol_rel·max|λ| (or λ ≤ 0) are dropped (1e-3).
      align: "auto" (rotate every frame onto R^eq by the mass-weighted Kabsch rotation, the Eckart frame,
        when the model is rotation-invariant there), "kabsch" (always) or "none" (the reference's
        unaligned projection); see the module docstring.
      n_blocks: contiguous blocks of frames for the jackknife standard error (10; ``docs/statistics.md``).
      scale: score scale λ (1.0).
      thermostat: the shared trajectory's :class:`LangevinConfig` (its temperature is T_target).
      derivatives: Hessian engine (exact autodiff by default).
      sampling: run the trajectory to a precision (:class:`jaxcert.probes._statmech.Sampling`; docs/statistics.md
        §3), with ``n_steps`` as the cap; None is the reference's fixed length of ``n_steps``.  It takes this
        config's estimator settings and needs the exact engine (the run computes the modes itself).
    """

    n_steps: int = 1100
    sample_every: int = 1
    tol_rel: float = 1e-3
    align: str = "auto"
    n_blocks: int = 10
    scale: float = 1.0
    thermostat: LangevinConfig = DEFAULT_THERMOSTAT
    derivatives: Any = EXACT
    sampling: Sampling | None = DEFAULT_SAMPLING

    def __post_init__(self):
        if self.align not in ALIGN_MODES:
            raise ValueError(f"align must be one of {ALIGN_MODES}, got {self.align!r}")
        _statmech.check_sampling(self, "equipartition", equipartition_every=self.sample_every,
                                 tol_rel=self.tol_rel, align=self.align, n_blocks=self.n_blocks)

    @classmethod
    def reference(cls, **changes: Any) -> EquipartitionConfig:
        """The reference's fixed-length setup: ASE Langevin at 1 fs, 400 warm-up and ``n_steps`` stored steps."""
        return cls(**{"thermostat": REFERENCE_THERMOSTAT, "sampling": None, **changes})


def equipartition(model: Model, key: jax.Array, config: EquipartitionConfig = EquipartitionConfig(),
                  substrate: Structure | str | None = None, *,
                  trajectory: Trajectory | None = None) -> ProbeResult:
    """Median per-mode equipartition ratio; see the module docstring."""
    s = resolve_substrate(model, substrate, "cluster")
    require_atoms(s, 2, "equipartition", "vibrational modes: one atom has only translations")
    return _statmech.run(model, plan, config, key, s, trajectory)


def plan(cfg: EquipartitionConfig, facts: stages.Facts):
    """Stages (docs/architecture.md "Kinds and stages"): ask for the shared Langevin trajectory (``langevin``);
    ask for the 3N force-Jacobian columns J e_k at its reference R^eq (``tangent`` requests, H = −J); reduce."""
    del facts
    if cfg.sampling is not None:
        return _statmech.ask_trajectory(cfg), _sampled_reduce(cfg)
    engine = cfg.derivatives
    idx = frame_indices(cfg.thermostat.warmup_steps, cfg.n_steps, cfg.sample_every)

    def ask_hessian(state, answer):
        del state
        traj, traj_evals, reused = _statmech.charge(answer)
        ref = traj.reference
        n = ref.n_atoms
        d = jnp.eye(3 * n, dtype=ref.positions.dtype).reshape(3 * n, n, 3)
        at = kinds.items(ref, jnp.broadcast_to(ref.positions, d.shape))
        return stages.Ask((traj, traj_evals, reused), kinds.tangent(at, d, engine))

    def reduce(state, je):
        traj, traj_evals, reused = state
        ref = traj.reference
        n = ref.n_atoms
        H = -je.forces.reshape(3 * n, 3 * n).T  # column k: −J e_k, i.e. H[:, k]
        H = 0.5 * (H + H.T)
        m3 = jnp.repeat(ref.masses.astype(H.dtype), 3)
        sq = jnp.sqrt(m3)
        lam, e = linalg.eigh(H / (sq[:, None] * sq[None, :]))
        keep = (jnp.abs(lam) > cfg.tol_rel * jnp.max(jnp.abs(lam))) & (lam > 0)

        wm = ref.mask.astype(H.dtype)
        aligned, angle = align_frames(traj.positions[idx], ref.positions, ref.masses.astype(H.dtype) * wm)
        if cfg.align == "auto":
            align = _rotation_curvature(H, ref.positions, ref.masses.astype(H.dtype) * wm) <= ROTATION_TOL * jnp.max(
                jnp.abs(lam))
        else:
            align = jnp.asarray(cfg.align == "kabsch")
        frames = jnp.where(align, aligned, traj.positions[idx])
        X = ((frames - ref.positions) * wm[:, None]).reshape(len(idx), 3 * n) * sq
        Q2_frame = (X @ e) ** 2
        Q2 = jnp.mean(Q2_frame, axis=0)
        kT = KB_EV_PER_K * cfg.thermostat.temperature_k

        def median_ratio(q2):
            return jnp.nanmedian(jnp.where(keep, lam * q2 / kT, jnp.nan))

        R = jnp.where(keep, lam * Q2 / kT, jnp.nan)
        R_median = jnp.nanmedian(R)
        # delete-one-block jackknife of the whole statistic (median over modes of ratios of means)
        jk = block_jackknife(median_ratio, Q2_frame, cfg.n_blocks)
        defect = jnp.abs(R_median - 1.0)
        n_evals = traj_evals + engine.cost(3 * n)
        details = _details(cfg, traj, reused, traj_evals, engine.step(ref), (lam, keep, R), jnp.asarray(len(idx)), jk,
                           half_drift(median_ratio, Q2_frame, cfg.n_blocks).z, align, jnp.max(angle))
        return finalize(defect, score_map(defect, cfg.scale), True, n_evals, details)

    return _statmech.ask_trajectory(cfg), ask_hessian, reduce


def _details(cfg: EquipartitionConfig, traj, reused, traj_evals, eps, modes: tuple, n_samples, jk, drift_z, align,
             rotation_max) -> dict[str, Any]:
    """The report's details, the same keys for a fixed run and a run to a precision; ``modes`` is (ω², kept,
    per-mode ratio R_α)."""
    lam, keep, R = modes
    ref = traj.reference
    R_median = jnp.nanmedian(R)
    return {
        "n_modes": jnp.sum(keep),
        "R_alpha": R,
        "omega2": jnp.where(keep, lam, jnp.nan),
        "R_median": R_median,
        "R_median_abs_dev": jnp.nanmedian(jnp.abs(R - 1.0)),
        "R_spread_std": jnp.nanstd(R),
        "R_percentiles_5_25_50_75_95": jnp.nanpercentile(R, jnp.asarray([5.0, 25.0, 50.0, 75.0, 95.0], R.dtype)),
        "temperature_K": jnp.asarray(cfg.thermostat.temperature_k),
        "n_samples": n_samples,
        "eps": jnp.asarray(eps),
        "precision": jnp.asarray(8 * jnp.dtype(ref.positions.dtype).itemsize),
        "scale": jnp.asarray(cfg.scale),
        **trajectory_details(traj, cfg, reused, traj_evals),
        "defect_stderr": jk.stderr,
        "R_median_stderr": jk.stderr,
        "n_blocks": jk.n_blocks,
        "drift_z": drift_z,
        "aligned": align,
        "rotation_deg_max": rotation_max,
        "n_negative_modes": jnp.sum(lam < -cfg.tol_rel * jnp.max(jnp.abs(lam))),
    }


def _sampled_reduce(cfg: EquipartitionConfig):
    """The reduction on a trajectory run to a precision: its modes (exact Hessian at R^eq) and stored Q_α²."""
    sp = cfg.sampling

    def reduce(state, answer):
        del state
        traj, traj_evals, reused = _statmech.charge(answer)
        ref = traj.reference
        sd = traj.sampled
        lam, keep, align = sd["omega2"], sd["keep"], sd["aligned"]
        Q2_frame = sd["equipartition"]["Q2"]
        n = traj.n_run // sp.equipartition_every
        valid = jnp.arange(Q2_frame.shape[0]) < n
        Q2 = jnp.sum(jnp.where(valid[:, None], Q2_frame, 0.0), axis=0) / jnp.maximum(n, 1).astype(Q2_frame.dtype)
        kT = KB_EV_PER_K * cfg.thermostat.temperature_k
        median_ratio = _statmech.equipartition_statistic(lam, keep, kT)
        R = jnp.where(keep, lam * Q2 / kT, jnp.nan)
        R_median = jnp.nanmedian(R)
        jk = _statmech.prefix_jackknife(median_ratio, Q2_frame, 0, n, cfg.n_blocks)
        defect = jnp.abs(R_median - 1.0)
        details = _details(cfg, traj, reused, traj_evals, EXACT.step(ref), (lam, keep, R), n, jk,
                           _statmech.prefix_drift(median_ratio, Q2_frame, n, cfg.n_blocks), align,
                           jnp.max(jnp.where(valid, sd["equipartition"]["rotation_deg"], 0.0)))
        details.update(_statmech.sampling_details(traj, sp, "equipartition"))
        return finalize(defect, score_map(defect, cfg.scale), True, traj_evals, details)

    return reduce


register(ProbeSpec(name="equipartition", fn=equipartition, config=EquipartitionConfig, substrate="cluster",
                   target=1.0, gated=False, plan=plan, stream="trajectory"))
