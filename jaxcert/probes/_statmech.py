r"""What the statistical-mechanics plans share (config_temperature, equipartition, virial; docs/probes.md §5).

Each of the three plans asks first for the shared Langevin trajectory; the answer is a
:class:`jaxcert.probes.kinds.Fresh`.  A trajectory this request computed (``fresh`` True: alone, or the first
asker in the suite) is charged to the probe (its ``n_evals``, ``reused`` False); one shared from an
earlier identical request (``fresh`` False) costs nothing here (``reused`` True).  :func:`charge`
reads that (traced-safe: ``fresh`` is a traced bool under the suite's vmap).

Two kinds of trajectory (docs/statistics.md §3):

* fixed length (``sampling=None`` in the probe's config, the reference's): a ``langevin`` request
  (:func:`jaxcert.probes.kinds.langevin`) of ``n_steps`` stored steps;
* run to a precision (a :class:`Sampling`): a ``langevin_sampled`` request (:func:`sampled_trajectory`).  The
  trajectory runs in chunks of ``chunk_steps`` steps inside one ``lax.while_loop``; after each chunk it
  computes the estimate and the block-jackknife standard error of every watched probe (the same estimators
  and error the probes report) and stops once ``min_steps`` are stored and every watched error is at or
  below ``se_target``, or at the cap (the probe config's ``n_steps``).  It carries the per-frame observables
  the probes read (so config_temperature's Hutchinson traces and equipartition's normal modes are computed
  once, by the run).

A trajectory passed by keyword (``trajectory=``, the probes' public functions) is checked and, if fixed
length and too short, extended with the model (:func:`jaxcert.optim.dynamics.get_trajectory`) outside the plan;
the later stages then read it as a shared answer and only the extension is charged (:func:`run`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import batching, linalg, neighbors
from jaxcert.core.cache import register_storable
from jaxcert.core.derivatives import _rademacher
from jaxcert.core.geometry import det3, inv3
from jaxcert.core.model import Model
from jaxcert.core.stats import Jackknife
from jaxcert.core.structure import Structure
from jaxcert.core.units import KB_EV_PER_K
from jaxcert.optim import dynamics as dyn
from jaxcert.optim.dynamics import LangevinConfig, Trajectory, get_trajectory
from jaxcert.probes import kinds, stages
from jaxcert.probes.base import ProbeResult

__all__ = ["ask_trajectory", "charge", "run", "Sampling", "WATCHABLE", "sampled_trajectory", "prefix_jackknife",
           "prefix_drift", "sampling_details", "kinetic_dof", "internal_kinetic_energy", "align_frames",
           "ROTATION_TOL", "HUTCHINSON_STREAM", "t_conf", "DEFAULT_SAMPLING", "check_sampling",
           "DEFAULT_THERMOSTAT", "REFERENCE_THERMOSTAT"]

#: ``fold_in`` tag of the Hutchinson stream (the reference's seed + 12345).
HUTCHINSON_STREAM = 12345

#: relative curvature below which rigid rotations count as free (equipartition ``align="auto"``).  Measured: ≤ 7e-5
#: on the reference LJ clusters (Li…S) at their relaxed minima, ≤ 3.5e-3 with a curl head of s = 0.03 on them,
#: 1.1e-2 with s = 1 on the σ = 1 test icosahedron; 1 for an anchored harmonic well (its rotations are real
#: vibrations).
ROTATION_TOL = 0.1

#: the probes a :class:`Sampling` stop rule can watch, in the order of its standard errors
WATCHABLE = ("config_temperature", "virial", "equipartition")


# ----------------------------------------------------------------------------- estimators shared with the probes
def kinetic_dof(n_atoms: jax.Array, thermostat: LangevinConfig, mode: str = "auto") -> jax.Array:
    """Number of kinetic degrees of freedom for T_kin (docs/probes.md §11.4)."""
    if mode == "auto":
        mode = "3N-3" if thermostat.removes_com else "3N"
    if mode == "3N":
        return 3 * n_atoms
    if mode == "3N-3":
        return 3 * n_atoms - 3
    raise ValueError(f"kinetic_dof must be 'auto', '3N' or '3N-3', got {mode!r}")


def t_conf(mean_F2: jax.Array, mean_t: jax.Array) -> jax.Array:
    """T_conf = ⟨F²⟩/(k_B⟨Tr H⟩) in K (eV²/Å² over eV/K · eV/Å²); NaN when ⟨Tr H⟩ ≤ 0."""
    pos = mean_t > 0
    return jnp.where(pos, mean_F2 / (KB_EV_PER_K * jnp.where(pos, mean_t, 1.0)), jnp.nan)


def internal_kinetic_energy(masses: jax.Array, R: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """K_int in eV of one frame: kinetic energy without COM translation and rigid rotation."""
    m = (masses * mask.astype(masses.dtype))[:, None]
    M = jnp.sum(m)
    r = R - jnp.sum(m * R, axis=0) / M
    u = v - jnp.sum(m * v, axis=0) / M
    L = jnp.sum(m * jnp.cross(r, u), axis=0)
    r2 = jnp.sum(m * r * r)
    I = r2 * jnp.eye(3, dtype=R.dtype) - jnp.einsum("i,ij,ik->jk", m[:, 0], r, r)
    det = det3(I)
    good = jnp.abs(det) > 1e-12 * jnp.maximum(jnp.trace(I), 1e-300) ** 3
    omega = jnp.where(good, inv3(jnp.where(good, I, jnp.eye(3, dtype=R.dtype))) @ L, 0.0)
    u_int = u - jnp.cross(omega, r)
    return 0.5 * jnp.sum(m * u_int * u_int)


def rotation_curvature(H: jax.Array, R: jax.Array, weights: jax.Array) -> jax.Array:
    """Largest dᵀHd/Σ w|d|² over the rigid rotations d = a × (R − R̄_w), a = x, y, z (eV/(Å²·amu))."""
    w = weights[:, None]
    r = (R - jnp.sum(w * R, axis=0) / jnp.sum(w)) * (w > 0)
    d = jnp.cross(jnp.eye(3, dtype=R.dtype)[:, None, :], r[None])  # (3, n, 3)
    flat = d.reshape(3, -1)
    return jnp.max(jnp.einsum("ai,ij,aj->a", flat, H, flat) / jnp.sum(w[None] * d * d, axis=(1, 2)))


def align_frames(R: jax.Array, R_ref: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""Rotate each frame onto the reference about the weighted centres (least-squares / Kabsch rotation).

    For every centred frame p and the centred reference q, the proper rotation U minimising
    Σ_i w_i |U p_i − q_i|² (W. Kabsch, Acta Cryst. A32, 922 (1976)) is found with Horn's unit
    quaternion: the eigenvector of the largest eigenvalue of the symmetric 4×4 matrix built from
    S = Σ w p qᵀ (B. K. P. Horn, J. Opt. Soc. Am. A 4, 629 (1987)).  It is always a proper
    rotation (no reflection), and a 4×4 ``eigh`` compiles far faster than a batched SVD.  With
    w = masses the optimum satisfies the Eckart rotational condition Σ m q × (U p − q) = 0, the
    frame in which normal modes are defined.

    Args:
      R: frames (T, n, 3) Å.
      R_ref: reference positions (n, 3) Å.
      weights: (n,) weights (masses in amu; 0 for padding atoms).

    Returns:
      (aligned frames (T, n, 3) Å about the reference's weighted centre, rotation angle per frame (T,) in
      degrees).
    """
    w = weights[:, None]
    c_ref = jnp.sum(w * R_ref, axis=0) / jnp.sum(w)
    q = R_ref - c_ref
    p = R - jnp.sum(w * R, axis=-2, keepdims=True) / jnp.sum(w)
    S = jnp.einsum("n,tni,nj->tij", weights, p, q)  # S_ij = Σ w p_i q_j
    xx, xy, xz = S[:, 0, 0], S[:, 0, 1], S[:, 0, 2]
    yx, yy, yz = S[:, 1, 0], S[:, 1, 1], S[:, 1, 2]
    zx, zy, zz = S[:, 2, 0], S[:, 2, 1], S[:, 2, 2]
    N = jnp.stack([
        jnp.stack([xx + yy + zz, yz - zy, zx - xz, xy - yx], -1),
        jnp.stack([yz - zy, xx - yy - zz, xy + yx, zx + xz], -1),
        jnp.stack([zx - xz, xy + yx, -xx + yy - zz, yz + zy], -1),
        jnp.stack([xy - yx, zx + xz, yz + zy, -xx - yy + zz], -1),
    ], -2)
    _, vec = linalg.eigh(N)
    a, b, c, d = (vec[:, k, -1] for k in range(4))  # unit quaternion of the largest eigenvalue
    rot = jnp.stack([
        jnp.stack([a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)], -1),
        jnp.stack([2 * (b * c + a * d), a * a - b * b + c * c - d * d, 2 * (c * d - a * b)], -1),
        jnp.stack([2 * (b * d - a * c), 2 * (c * d + a * b), a * a - b * b - c * c + d * d], -1),
    ], -2)
    angle = 2.0 * jnp.degrees(jnp.arccos(jnp.clip(jnp.abs(a), 0.0, 1.0)))
    return jnp.einsum("tij,tnj->tni", rot, p) + c_ref, angle


def normal_modes(H: jax.Array, ref: Structure, tol_rel: float, align: str):
    """(λ, e, keep, aligned?) of the symmetrised mass-weighted Hessian H (3n, 3n) at R^eq (equipartition)."""
    H = 0.5 * (H + H.T)
    m3 = jnp.repeat(ref.masses.astype(H.dtype), 3)
    sq = jnp.sqrt(m3)
    lam, e = linalg.eigh(H / (sq[:, None] * sq[None, :]))
    keep = (jnp.abs(lam) > tol_rel * jnp.max(jnp.abs(lam))) & (lam > 0)
    wm = ref.masses.astype(H.dtype) * ref.mask.astype(H.dtype)
    if align == "auto":
        do_align = rotation_curvature(H, ref.positions, wm) <= ROTATION_TOL * jnp.max(jnp.abs(lam))
    else:
        do_align = jnp.asarray(align == "kabsch")
    return lam, e, keep, do_align


def mode_moments(R: jax.Array, ref: Structure, e: jax.Array, do_align: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(Q_α² per frame (T, 3n), rotation angle per frame (T,) degrees) of frames R (T, n, 3)."""
    dt = R.dtype
    wm = ref.mask.astype(dt)
    aligned, angle = align_frames(R, ref.positions, ref.masses.astype(dt) * wm)
    frames = jnp.where(do_align, aligned, R)
    sq = jnp.sqrt(jnp.repeat(ref.masses.astype(dt), 3))
    X = ((frames - ref.positions) * wm[:, None]).reshape(R.shape[0], -1) * sq
    return (X @ e) ** 2, angle


def ct_statistic(m) -> jax.Array:
    """config_temperature's ρ = T_conf/⟨T_kin⟩ of the averages (⟨F²⟩, ⟨t⟩, ⟨T_kin⟩)."""
    return t_conf(m[0], m[1]) / m[2]


def virial_statistic(m) -> jax.Array:
    """The virial's ρ_vir = ⟨W⟩/(2⟨K_int⟩)."""
    return m[0] / (2.0 * m[1])


def equipartition_statistic(lam: jax.Array, keep: jax.Array, kT: Any) -> Callable[[jax.Array], jax.Array]:
    """The median over kept modes of λ_α⟨Q_α²⟩/k_BT, as a function of ⟨Q²⟩."""
    def median_ratio(q2):
        return jnp.nanmedian(jnp.where(keep, lam * q2 / kT, jnp.nan))
    return median_ratio


# ----------------------------------------------------------------------------- errors over a stored prefix
def prefix_jackknife(fn: Callable[[Any], jax.Array], series: Any, lo: Any, hi: Any, n_blocks: int) -> Jackknife:
    r"""Delete-one-block jackknife of θ = fn(averages over samples lo ≤ t < hi) of buffers (leading axis T).

    ``lo``/``hi`` may be traced: sample t goes to block ⌊(t − lo)·B/(hi − lo)⌋, so with lo = 0 and hi = T this is
    :func:`jaxcert.core.stats.block_jackknife` (same blocks, same formulas) and a run stopped early is judged
    exactly as a fixed-length run of its length.  Samples outside [lo, hi) may hold anything (they are
    ignored)."""
    leaves, treedef = jax.tree_util.tree_flatten(series)
    leaves = [jnp.asarray(a) for a in leaves]
    T = leaves[0].shape[0]
    dtype = jnp.result_type(*leaves)
    t = jnp.arange(T)
    valid = (t >= lo) & (t < hi)
    width = jnp.maximum(hi - lo, 1)
    label = jnp.where(valid, ((t - lo) * n_blocks) // width, -1)
    onehot = (label[None, :] == jnp.arange(n_blocks)[:, None]).astype(dtype)  # (B, T)
    W = jnp.sum(onehot, axis=1)
    Wtot = jnp.sum(W)

    def bsum(a):
        a = jnp.where(valid.reshape((-1,) + (1,) * (a.ndim - 1)), a, 0.0).astype(dtype)
        return jnp.tensordot(onehot, a, axes=(1, 0))

    sums = [bsum(a) for a in leaves]

    def bshape(a):
        return (-1,) + (1,) * (a.ndim - 1)

    full = [jnp.sum(S, axis=0) / Wtot for S in sums]
    loo = [(jnp.sum(S, axis=0)[None] - S) / jnp.maximum(Wtot - W, 1.0).reshape(bshape(S)) for S in sums]
    theta = jnp.asarray(fn(jax.tree_util.tree_unflatten(treedef, full)))
    reps = jax.vmap(lambda *ls: jnp.asarray(fn(jax.tree_util.tree_unflatten(treedef, list(ls)))))(*loo)
    used = (W > 0).reshape(bshape(reps))
    reps = jnp.where(used, reps, theta[None])
    B = jnp.sum(W > 0).astype(dtype)
    mean_rep = jnp.sum(jnp.where(used, reps, 0.0), axis=0) / B
    var = (B - 1.0) / B * jnp.sum(jnp.where(used, (reps - mean_rep) ** 2, 0.0), axis=0)
    return Jackknife(theta, jnp.sqrt(var), (B - 1.0) * (mean_rep - theta), jnp.sum(W > 0), reps)


def prefix_drift(fn: Callable[[Any], jax.Array], series: Any, n: Any, n_blocks: int) -> jax.Array:
    """``drift_z`` of :func:`jaxcert.core.stats.half_drift` over the first ``n`` samples (n may be traced)."""
    h = n // 2
    nb = max(2, n_blocks // 2)
    a = prefix_jackknife(fn, series, 0, h, nb)
    b = prefix_jackknife(fn, series, h, n, nb)
    return (b.estimate - a.estimate) / jnp.sqrt(a.stderr ** 2 + b.stderr ** 2)


# ----------------------------------------------------------------------------- the stop rule
@dataclasses.dataclass(frozen=True)
class Sampling:
    """Run the shared trajectory to a precision (docs/statistics.md §3): stop when every watched probe's
    block-jackknife standard error is at or below ``se_target``, after at least ``min_steps`` and at most
    the probe config's ``n_steps`` stored steps (the cap), checked every ``chunk_steps`` steps.

    Attributes:
      se_target: the target standard error of each watched probe's ratio (dimensionless, the defect's unit).
      min_steps: stored steps always run (a multiple of ``chunk_steps``; the error of a few blocks is itself
        too uncertain to stop on).
      chunk_steps: steps between two checks (a multiple of every frame stride).
      watch: the probes whose errors must reach the target (a subset of :data:`WATCHABLE`).
      ct_every, n_hutchinson, kinetic_dof: config_temperature's frame stride, Hutchinson vectors and kinetic
        degrees of freedom.
      virial_every: the virial's frame stride.
      equipartition_every, tol_rel, align: equipartition's frame stride, mode tolerance and frame alignment.
      n_blocks: jackknife blocks (all three probes).

    The estimator settings are the probes' own: a probe config replaces them with its own fields, so a probe
    with, e.g., another frame stride gets a trajectory of its own; the three default configs carry the same
    :class:`Sampling`, so in a suite they share one trajectory.
    """

    se_target: float = 0.05
    min_steps: int = 300
    chunk_steps: int = 100
    watch: tuple[str, ...] = WATCHABLE
    ct_every: int = 10
    n_hutchinson: int = 4
    kinetic_dof: str = "auto"
    virial_every: int = 4
    equipartition_every: int = 1
    tol_rel: float = 1e-3
    align: str = "auto"
    n_blocks: int = 10

    def __post_init__(self):
        if not self.se_target >= 0:
            raise ValueError(f"Sampling.se_target must be >= 0, got {self.se_target}")
        strides = (self.ct_every, self.virial_every, self.equipartition_every)
        if self.chunk_steps < 1 or min(strides) < 1 or any(self.chunk_steps % k for k in strides):
            raise ValueError(f"Sampling.chunk_steps ({self.chunk_steps}) must be a positive multiple of every frame "
                             f"stride {strides}")
        if self.min_steps < self.chunk_steps or self.min_steps % self.chunk_steps:
            raise ValueError(f"Sampling.min_steps ({self.min_steps}) must be a positive multiple of chunk_steps "
                             f"({self.chunk_steps})")
        if self.n_blocks < 2 or self.min_steps // max(strides) < self.n_blocks:
            raise ValueError(f"Sampling.min_steps ({self.min_steps}) must give at least n_blocks ({self.n_blocks}) "
                             f"frames at every stride {strides}")
        bad = set(self.watch) - set(WATCHABLE)
        if bad or not self.watch:
            raise ValueError(f"Sampling.watch must be a non-empty subset of {WATCHABLE}, got {self.watch!r}")
        if self.align not in ("auto", "kabsch", "none"):
            raise ValueError(f"Sampling.align must be 'auto', 'kabsch' or 'none', got {self.align!r}")
        kinetic_dof(3, LangevinConfig(), self.kinetic_dof)  # validates the mode


#: the probes' default :class:`Sampling` (None: the reference's fixed length); docs/statistics.md §3
DEFAULT_SAMPLING: Sampling | None = Sampling()
#: the probes' default thermostat: BAOAB at 2 fs with the reference's 30 K, friction, FixCom and 400 fs of warm-up
#: (docs/statistics.md §3, benchmarks/results/langevin_integrators.json)
DEFAULT_THERMOSTAT = LangevinConfig(integrator="baoab", timestep_fs=2.0, warmup_steps=200)
#: the reference's thermostat (ASE Langevin, 1 fs, 400 warm-up steps): ``LangevinConfig()``
REFERENCE_THERMOSTAT = LangevinConfig()


def check_sampling(cfg: Any, probe: str, **own: Any) -> None:
    """A probe config's ``__post_init__``: its :class:`Sampling` takes the probe's own estimator settings
    (``own``), and its ``n_steps`` (the cap) must be a multiple of ``chunk_steps``, at least ``min_steps``."""
    sp = cfg.sampling
    if sp is None:
        return
    if any(getattr(sp, k) != v for k, v in own.items()):
        object.__setattr__(cfg, "sampling", dataclasses.replace(sp, **own))
        sp = cfg.sampling
    if cfg.n_steps < sp.min_steps or cfg.n_steps % sp.chunk_steps:
        raise ValueError(f"{probe}: run to a precision, n_steps ({cfg.n_steps}) is the cap and must be a multiple "
                         f"of sampling.chunk_steps ({sp.chunk_steps}) and at least sampling.min_steps "
                         f"({sp.min_steps}); pass sampling=None for a fixed-length run of n_steps")
    if not getattr(getattr(cfg, "derivatives", None), "exact", True):
        raise ValueError(f"{probe}: a run to a precision computes its derivatives exactly; pass sampling=None to use "
                         "a finite-difference engine")


def sampled_trajectory(model: Model, s: Structure, key: jax.Array, config: LangevinConfig,
                       sampling: Sampling, n_steps: int = 1100) -> Trajectory:
    """The shared trajectory run to a precision (see the module docstring; docs/statistics.md §3).

    Equal, step for step, to the fixed-length trajectory of the same key and thermostat (the noise of step s
    depends only on s), stopped where the rule says.  The arrays hold ``n_steps`` rows (the cap, static, a
    multiple of ``sampling.chunk_steps``); ``n_run`` says how many were run.  ``sampled`` holds the per-frame
    observables of the three probes, their standard errors at the stop, and whether the target stopped the run.
    Costs, in ``n_evals``: the relaxation, 1 + warm-up + ``n_run`` steps, n_hutchinson jvps per
    config_temperature frame and 3N jvps for equipartition's Hessian.
    """
    s = model.prepare(s)
    if n_steps % sampling.chunk_steps or n_steps < sampling.min_steps:
        raise ValueError(f"n_steps ({n_steps}) must be a multiple of chunk_steps ({sampling.chunk_steps}) and at "
                         f"least min_steps ({sampling.min_steps})")
    return neighbors.rerun_on_overflow(lambda t: _SAMPLED(model, t, key, config, sampling, n_steps), s,
                                       "sampled_trajectory")[0]


def _statistics(obs: dict, n_run, sp: Sampling, lam, keep, kT) -> jax.Array:
    """(SE of ρ, ρ_vir, median R) over the first ``n_run`` stored steps; NaN for an unwatched probe."""
    out = []
    if "config_temperature" in sp.watch:
        ct = obs["config_temperature"]
        out.append(prefix_jackknife(ct_statistic, (ct["F2"], ct["t"], ct["T_kin"]), 0, n_run // sp.ct_every,
                                    sp.n_blocks).stderr)
    else:
        out.append(jnp.asarray(jnp.nan, kT.dtype))
    if "virial" in sp.watch:
        vr = obs["virial"]
        out.append(prefix_jackknife(virial_statistic, (vr["W"], vr["K"]), 0, n_run // sp.virial_every,
                                    sp.n_blocks).stderr)
    else:
        out.append(jnp.asarray(jnp.nan, kT.dtype))
    if "equipartition" in sp.watch:
        out.append(prefix_jackknife(equipartition_statistic(lam, keep, kT), obs["equipartition"]["Q2"], 0,
                                    n_run // sp.equipartition_every, sp.n_blocks).stderr)
    else:
        out.append(jnp.asarray(jnp.nan, kT.dtype))
    return jnp.stack(out)


def _sampled(model: Model, s: Structure, key: jax.Array, th: LangevinConfig, sp: Sampling, cap: int):
    ref, force_fn, state, nkey, fmax_reached, relax_steps, relax_evals = dyn.start(model, s, key, th)
    nw = th.warmup_steps
    state = dyn.advance(ref, force_fn, th, state, nkey, 1, nw)
    dt = ref.positions.dtype
    n = ref.n_atoms
    K = sp.chunk_steps
    kT = jnp.asarray(KB_EV_PER_K * th.temperature_k, dt)
    params = model.params

    def forces_at(R):
        return model.forces_of(params, ref.replace(positions=R))

    # equipartition's modes at R^eq: the exact Hessian of the force output, 3N jvps taken n_hutchinson at a time
    # (the width the Hutchinson traces below take anyway).  All 3N at once made this the program's largest buffer:
    # 1.07 GB of XLA temporaries for nequix-mp-1-pft on the 13-atom cluster, against 0.13 GB four at a time.
    H = -batching.jacfwd(forces_at, sp.n_hutchinson)(ref.positions).reshape(3 * n, 3 * n)
    lam, e, keep, do_align = normal_modes(H, ref, sp.tol_rel, sp.align)
    n_dof = kinetic_dof(jnp.sum(ref.mask.astype(dt)), th, sp.kinetic_dof)
    hkey = jax.random.fold_in(key, HUTCHINSON_STREAM)
    w = ref.mask.astype(dt)

    def buf(*shape):
        return jnp.zeros(shape, dt)

    bufs = {
        "positions": buf(cap, n, 3), "forces": buf(cap, n, 3), "velocities": buf(cap, n, 3),
        "config_temperature": {"F2": buf(cap // sp.ct_every), "t": buf(cap // sp.ct_every),
                               "T_kin": buf(cap // sp.ct_every)},
        "virial": {"W": buf(cap // sp.virial_every), "K": buf(cap // sp.virial_every)},
        "equipartition": {"Q2": buf(cap // sp.equipartition_every, 3 * n),
                          "rotation_deg": buf(cap // sp.equipartition_every)},
    }

    def put(b, x, at):
        return jax.lax.dynamic_update_slice_in_dim(b, x.astype(b.dtype), at, axis=0)

    def chunk(carry):
        st, c, b, _ = carry
        first = nw + 1 + c * K
        st, (R, F, V) = dyn._run(ref, force_fn, th, st, nkey, first, K)
        b = dict(b)
        for name, x in (("positions", R), ("forces", F), ("velocities", V)):
            b[name] = put(b[name], x, c * K)

        def pick(k):  # local indices of the chunk's frames at stride k (absolute step ≡ 0 mod k)
            return (-first) % k + k * jnp.arange(K // k)

        # config_temperature: F², T_kin and the Hutchinson trace ¼ Σ_z zᵀHz (Hz = −J z) at its frames
        j = pick(sp.ct_every)
        Rc, Fc, Vc = R[j], F[j], V[j]
        z = jax.vmap(lambda st_: _rademacher(jax.random.fold_in(hkey, st_), ref, sp.n_hutchinson))(first + j)
        # one frame at a time (its n_hutchinson vectors together): a network's forward-over-reverse pass holds
        # its intermediates per vector, so all frames at once multiplied the program's memory by ct frames
        hz = -jax.lax.map(lambda xz: jax.vmap(lambda d: jax.jvp(forces_at, (xz[0],), (d,))[1])(xz[1]), (Rc, z))
        ct = {"F2": jnp.sum(Fc * Fc * w[:, None], axis=(-2, -1)),
              "t": jnp.mean(jnp.sum(z * hz, axis=(-2, -1)), axis=-1),
              "T_kin": dyn.kinetic_temperature(ref.masses, Vc, n_dof, ref.mask)}
        b["config_temperature"] = {k: put(b["config_temperature"][k], v, c * (K // sp.ct_every))
                                   for k, v in ct.items()}
        # virial: W and K_int
        j = pick(sp.virial_every)
        Rv, Fv, Vv = R[j], F[j], V[j]
        vr = {"W": -jnp.sum(w[:, None] * (Rv - ref.positions) * Fv, axis=(-2, -1)),
              "K": jax.vmap(lambda r, v: internal_kinetic_energy(ref.masses, r, v, ref.mask))(Rv, Vv)}
        b["virial"] = {k: put(b["virial"][k], v, c * (K // sp.virial_every)) for k, v in vr.items()}
        # equipartition: Q_α² of the (aligned) frames
        j = pick(sp.equipartition_every)
        q2, angle = mode_moments(R[j], ref, e, do_align)
        at = c * (K // sp.equipartition_every)
        b["equipartition"] = {"Q2": put(b["equipartition"]["Q2"], q2, at),
                              "rotation_deg": put(b["equipartition"]["rotation_deg"], angle, at)}
        se = _statistics(b, (c + 1) * K, sp, lam, keep, kT)
        return st, c + 1, b, se

    watched = np.asarray([name in sp.watch for name in WATCHABLE])

    def met(c, se):
        return (c * K >= sp.min_steps) & jnp.all(jnp.where(watched, se <= sp.se_target, True))

    def cond(carry):
        _, c, _, se = carry
        return (c * K < cap) & ~met(c, se)

    se0 = jnp.full((3,), jnp.inf, dt)
    end, c, b, se = jax.lax.while_loop(cond, chunk, (state, jnp.asarray(0, jnp.int32), bufs, se0))
    n_run = c * K
    n_ct = n_run // sp.ct_every
    n_evals = (relax_evals + 1 + nw + n_run + n_ct * sp.n_hutchinson + 3 * n).astype(jnp.int32)
    sampled = {
        "config_temperature": b["config_temperature"], "virial": b["virial"], "equipartition": b["equipartition"],
        "omega2": lam, "keep": keep, "aligned": do_align, "n_dof": n_dof,
        "se": se, "stopped_by_target": met(c, se),
    }
    steps = jnp.arange(nw + 1, nw + 1 + cap)
    traj = Trajectory(ref, b["positions"], b["forces"], b["velocities"], steps, nkey, fmax_reached, relax_steps,
                      n_evals, th, n_run, sampled)
    return traj, (neighbors.list_ok(ref.neighbor_state), neighbors.list_ok(end.neighbors))


_SAMPLED = jax.jit(_sampled, static_argnums=(3, 4, 5))


def _sampled_kind(model: Model, s: Structure, key: jax.Array, *, thermostat: Any, sampling: Sampling,
                  n_steps: int) -> kinds.Fresh:
    return kinds.Fresh(sampled_trajectory(model, s, key, thermostat, sampling, n_steps), jnp.asarray(True))


kinds.register("langevin_sampled", _sampled_kind)
register_storable(Sampling, value=True)


def sampled_request(s: Structure, key: jax.Array, thermostat: Any, sampling: Sampling, n_steps: int) -> kinds.Request:
    """The ``langevin_sampled`` request (:func:`sampled_trajectory`), any leading batch axes."""
    return kinds.Request("langevin_sampled", (s, key), (("n_steps", int(n_steps)), ("sampling", sampling),
                                                        ("thermostat", thermostat)), s.positions.ndim - 2)


def sampling_details(traj: Trajectory, sampling: Sampling, probe: str) -> dict[str, Any]:
    """What every statistical probe reports about a run to a precision (docs/statistics.md §3)."""
    se = traj.sampled["se"]
    return {
        "se_target": jnp.asarray(sampling.se_target, se.dtype),
        "n_steps_run": traj.n_run,
        "stopped_by_target": traj.sampled["stopped_by_target"],
        "sampling": {
            "min_steps": jnp.asarray(sampling.min_steps), "max_steps": jnp.asarray(traj.positions.shape[-3]),
            "chunk_steps": jnp.asarray(sampling.chunk_steps),
            "watched": jnp.asarray(probe in sampling.watch),
            "se_at_stop": {name: se[k] for k, name in enumerate(WATCHABLE)},
        },
    }


# ----------------------------------------------------------------------------- plans
def ask_trajectory(cfg: Any, keep_key: bool = False):
    """Stage 0 of a stat-mech plan: ask for the trajectory with the probe's key, thermostat and ``n_steps`` (or
    its ``sampling``); the state carried on is the key (``keep_key``, for later draws) or nothing."""
    def ask(key: jax.Array, s: Structure) -> stages.Ask:
        sp = getattr(cfg, "sampling", None)
        req = (kinds.langevin(s, key, cfg.thermostat, cfg.n_steps) if sp is None
               else sampled_request(s, key, cfg.thermostat, sp, cfg.n_steps))
        return stages.Ask(key if keep_key else None, req)

    return ask


def charge(answer: kinds.Fresh) -> tuple[Trajectory, jax.Array, jax.Array]:
    """(trajectory, evaluations charged to this probe, ``reused`` flag) of a ``langevin`` answer."""
    traj = answer.value
    fresh = jnp.asarray(answer.fresh, bool)
    return traj, jnp.where(fresh, traj.n_evals, 0).astype(jnp.int32), ~fresh


@functools.partial(jax.jit, static_argnames=("plan", "config", "facts"))
def _given(model: Model, key: jax.Array, s: Structure, traj: Trajectory, extension: jax.Array,
           plan: stages.Plan, config: Any, facts: stages.Facts) -> ProbeResult:
    """The plan with the trajectory request answered by ``traj`` (as shared), the rest inline; the
    extension's evaluations charged."""
    steps = plan(config, facts)
    out = steps[1](steps[0](key, s).state, kinds.Fresh(traj, jnp.asarray(False)))
    for stage in steps[2:]:
        out = stage(out.state, kinds.answer(model, out.requests))
    extension = jnp.asarray(extension).astype(jnp.int32)
    details = dict(out.details)
    details["trajectory"] = {**details["trajectory"], "md_evals": extension}
    return out._replace(n_evals=out.n_evals + extension, details=details)


def run(model: Model, plan: stages.Plan, config: Any, key: jax.Array, s: Structure,
        trajectory: Trajectory | None) -> ProbeResult:
    """Run a stat-mech plan alone: with its own trajectory (``trajectory=None``, :func:`stages.run`) or on a
    passed one (checked against ``config.thermostat``; a fixed-length one extended to ``config.n_steps`` if
    shorter, only the extension charged; ``reused`` is True)."""
    if trajectory is None:
        return stages.run(model, plan, config, key, s)
    sp = getattr(config, "sampling", None)
    if sp is not None or trajectory.sampled is not None:
        if sp is None or trajectory.sampled is None or trajectory.positions.shape[-3] != config.n_steps:
            raise ValueError("a trajectory run to a precision and a fixed-length probe config (or the other way "
                             "round) do not match: pass trajectory=None, or make the trajectory with "
                             "sampled_trajectory(model, s, key, config.thermostat, config.sampling, config.n_steps)")
        dyn.check_thermostat(trajectory, config.thermostat)
        return _given(model, key, s, trajectory, 0, plan, config, stages.facts_of(model))
    traj, extension, _ = get_trajectory(model, s, key, config.thermostat, config.n_steps, trajectory)
    return _given(model, key, s, traj, extension, plan, config, stages.facts_of(model))
