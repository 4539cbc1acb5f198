r"""Molecular dynamics in JAX: velocity-Verlet, ASE's Langevin + FixCom, and the shared trajectory.

Everything here is pure JAX (``lax.scan`` over steps), jit- and vmap-able over
(key, substrate); randomness comes from the ``key`` only.  Units are ASE's: Å, eV,
amu, K, with time steps given in fs (``timestep_fs``) and converted with
:data:`jaxcert.core.units.FS`; velocities are in Å per ASE time unit, kinetic energy
½ Σ m v² in eV.  Padding atoms (``mask == False``) get zero velocity and noise and
never move.

Integrators (docs/probes.md §4.10 and §5):

* :func:`velocity_verlet` — ASE's ``VelocityVerlet``:
  p += ½dt F; r += dt p/m; F ← F(r); p += ½dt F.  Time-reversible for any
  position-dependent force field (conservative or not).
* :func:`langevin_step` — ASE's ``Langevin`` (Vanden-Eijnden–Ciccotti) with
  T = k_B·T_K, γ the friction, σ_i = √(2Tγ/m_i)::

      c1 = dt/2 − dt²γ/8        c2 = dtγ/2 − dt²γ²/8
      c3 = √dt σ/2 − dt^{3/2}γσ/8      c5 = dt^{3/2}σ/(2√3)      c4 = γ c5/2
      ξ, η ~ N(0, 1)^{N×3}
      v += c1 F/m − c2 v + (c3 ξ − c4 η)
      r' = constrain(r + dt v + c5 η);   v = (r' − r − c5 η)/dt
      F = constrain(F(r'));   v += c1 F/m − c2 v + (c3 ξ − c4 η);   p = constrain(m v)

  COM handling (``LangevinConfig.com``):

  - ``"fixcom"`` (default; pescert newest, ASE ≥ 3.23 ``FixCom``): positions
    are shifted so the mass-weighted COM keeps its value, momenta lose the COM
    velocity, and the forces used by the integrator have λ m_i subtracted with
    λ = Σ m F / Σ m² (Langevin's own ``fixcm`` off);
  - ``"langevin_fixcm"`` (pescert's earlier version): no constraint; the random
    position and velocity kicks have their (mass-weighted) sums removed and are
    rescaled by √(N/(N−1)) as in ASE 3.29's ``Langevin(fixcm=True)``;
  - ``"none"``: plain Langevin.

The shared trajectory (docs/probes.md §5), :func:`langevin_trajectory`:

1. relax the substrate with :func:`jaxcert.optim.relax.bfgs` (fmax 1e-3 eV/Å, 300 steps);
   the relaxed structure is the reference R^eq of virial and equipartition;
2. draw seeded Maxwell–Boltzmann velocities at 30 K on it (:func:`maxwell_boltzmann`);
3. run 400 warm-up Langevin steps (dt 1 fs, γ 0.05 fs⁻¹, 30 K, FixCom), not kept (they run in the
   same ``lax.scan`` as the stored steps, so the step compiles once, and are sliced off);
4. run ``n_steps`` (1100) more, storing positions, the **raw model force output**
   (no constraint adjustment) and velocities after every step, with absolute step
   indices 401, 402, …

How the three stat-mech probes share one trajectory: each of
``config_temperature``, ``virial`` and ``equipartition`` takes a keyword
``trajectory=None``.  Standalone, a probe computes its own with
``langevin_trajectory(model, s, key, config.thermostat, config.n_steps)``.  A
suite computes it once with the same key and passes it to all three; since the
probes derive the trajectory from the key in the same way, shared and standalone
results are identical (bit-for-bit on one machine).  A probe that needs more steps
than are stored continues the same dynamics with :func:`extend` (noise for step s
is drawn from ``fold_in(noise_key, s)``, so an extended trajectory equals one long
run); one that needs fewer reads a prefix (:func:`frame_indices`).  A trajectory
made with a different thermostat is refused (:func:`check_thermostat`).

Random streams (JAX PRNG, statistically equivalent to the reference's numpy
streams, not bit-equal): velocities from ``key`` itself (the same draw as
reversibility's, as the reference uses ``default_rng(seed)`` for both); Langevin
noise for step s from ``fold_in(fold_in(key, 1), s)``, ξ then η.  The reference's
noise generator is a second ``default_rng(seed)``, so its first ξ equals its
velocity draw; that correlation is an artefact and is not reproduced.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import neighbors
from jaxcert.core.cache import register_storable
from jaxcert.core.model import Model
from jaxcert.core.neighbors import NeighborState
from jaxcert.core.structure import Structure
from jaxcert.core.units import FS, KB_EV_PER_K
from jaxcert.optim.relax import bfgs

__all__ = [
    "LangevinConfig", "Trajectory", "VerletResult", "COM_MODES",
    "maxwell_boltzmann", "kinetic_energy", "kinetic_temperature", "center_of_mass",
    "velocity_verlet", "verlet_program", "langevin_coefficients", "langevin_step", "baoab_step", "step_function",
    "INTEGRATORS", "langevin_trajectory", "extend", "trajectory_details",
    "frame_indices", "frames", "check_thermostat", "noise_key", "TRAJECTORY_NOISE_STREAM", "start", "advance",
]

COM_MODES = ("fixcom", "langevin_fixcm", "none")
#: Langevin integrators: ASE's ``Langevin`` (Vanden-Eijnden–Ciccotti) and BAOAB (Leimkuhler & Matthews 2013).
INTEGRATORS = ("ase", "baoab")
#: ``fold_in`` tag of the Langevin noise stream derived from the run key.
TRAJECTORY_NOISE_STREAM = 1


# ----------------------------------------------------------------------------- helpers
def _w(s: Structure) -> jax.Array:
    """(n, 1) float mask."""
    return s.mask[:, None].astype(s.positions.dtype)


def _masses(s: Structure) -> jax.Array:
    """(n, 1) masses in amu."""
    return s.masses[:, None].astype(s.positions.dtype)


def kinetic_energy(masses: jax.Array, velocities: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """½ Σ m v² in eV (masses (n,) amu, velocities (..., n, 3) Å/ASE-time)."""
    m = masses[:, None] if mask is None else (masses * mask)[:, None]
    return 0.5 * jnp.sum(m * velocities * velocities, axis=(-2, -1))


def kinetic_temperature(masses: jax.Array, velocities: jax.Array, n_dof: jax.Array | int,
                        mask: jax.Array | None = None) -> jax.Array:
    """2 KE/(n_dof k_B) in K."""
    return 2.0 * kinetic_energy(masses, velocities, mask) / (n_dof * KB_EV_PER_K)


def center_of_mass(s: Structure, positions: jax.Array | None = None) -> jax.Array:
    """Mass-weighted centre of the real atoms (3,) Å."""
    R = s.positions if positions is None else positions
    m = _masses(s) * _w(s)
    return jnp.sum(m * R, axis=-2) / jnp.sum(m)


def maxwell_boltzmann(key: jax.Array, s: Structure, temperature_k: float | jax.Array = 30.0) -> jax.Array:
    r"""Seeded velocities (n, 3) in Å/ASE-time, docs/probes.md §4.10.

    p = z √(m k_B T) with z ~ N(0, 1)^{N×3}; p ← p − mean_i p_i (zero total momentum);
    v = p/m.  No rescaling to exactly T and no angular-momentum removal (as pescert).
    """
    dt = s.positions.dtype
    w = _w(s)
    m = _masses(s)
    z = jax.random.normal(key, s.positions.shape, dt)
    p = z * jnp.sqrt(m * KB_EV_PER_K * jnp.asarray(temperature_k, dt)) * w
    p = (p - jnp.sum(p, axis=0) / jnp.sum(w)) * w
    return p / m


def _at(s: Structure, R: jax.Array, nbrs: NeighborState | None) -> Structure:
    """``s`` at positions R with the carried Verlet list ``nbrs``, refreshed (rebuilt only when stale)."""
    return neighbors.update(s.replace(positions=R, neighbor_state=nbrs))


def _energy_forces_fn(model: Model, s: Structure):
    """(R, list) ↦ (E eV, F eV/Å, the list refreshed at R) of the model output (one backward pass when
    conservative)."""
    params = model.params

    if model.forces_fn is None:
        def ef(R, nbrs):
            t = _at(s, R, nbrs)
            E, g = jax.value_and_grad(lambda R: model.energy_of(params, t.replace(positions=R)))(R)
            return E, -g * s.mask[:, None].astype(g.dtype), t.neighbor_state
    else:
        def ef(R, nbrs):
            t = _at(s, R, nbrs)
            return model.energy_of(params, t), model.forces_of(params, t), t.neighbor_state
    return ef


def _forces_fn(model: Model, s: Structure):
    """(R, list) ↦ (raw force output eV/Å, the list refreshed at R)."""
    params = model.params

    def f(R, nbrs):
        t = _at(s, R, nbrs)
        return model.forces_of(params, t), t.neighbor_state
    return f


# ----------------------------------------------------------------------------- velocity Verlet
class VerletResult(NamedTuple):
    """End state and per-step records of a velocity-Verlet run.

    Attributes:
      positions: final positions (n, 3) Å.
      velocities: final velocities (n, 3) Å/ASE-time.
      forces: final forces (n, 3) eV/Å.
      energies: total energy E_pot + E_kin at step 0 and after every step (n_steps + 1,) eV.
      trajectory: positions after every step (n_steps, n, 3) Å.
      neighbor_state: the Verlet list the run carried, at its end (None on the dense path); ``ok`` False if
        any build of the run overflowed, ``builds`` counts the builds.
    """

    positions: jax.Array
    velocities: jax.Array
    forces: jax.Array
    energies: jax.Array
    trajectory: jax.Array
    neighbor_state: NeighborState | None = None


def velocity_verlet(model: Model, s: Structure, velocities: jax.Array, timestep_fs: float = 1.0,
                    n_steps: int = 100) -> VerletResult:
    """ASE ``VelocityVerlet`` for ``n_steps`` steps from ``s`` with ``velocities`` (n_steps + 1 model evaluations).

    Works on momenta as ASE: p += ½dt F; r += dt p/m; F ← F(r); p += ½dt F.  The structure's Verlet list (large
    cells) is carried through the steps and rebuilt only when stale; on the host an overflowed list is enlarged
    and the run repeated (:func:`jaxcert.core.neighbors.rerun_on_overflow`).
    """
    s = model.prepare(s)
    return neighbors.rerun_on_overflow(lambda t: (r := _VERLET(model, t, velocities, timestep_fs, n_steps),
                                                  neighbors.list_ok(r.neighbor_state)), s, "velocity_verlet")[0]


def verlet_program(model: Model, s: Structure, velocities: jax.Array, timestep_fs: float, n_steps: int) -> Any:
    """The compiled ``n_steps`` program of :func:`velocity_verlet` for structures shaped as ``s`` (compiled now,
    ahead of time), called as ``program(model, s, velocities, timestep_fs) -> VerletResult``.

    Unlike :func:`velocity_verlet` it does not answer a neighbour-list overflow: the caller reads
    :func:`jaxcert.core.neighbors.list_ok` of the result's ``neighbor_state``.  For timing a run without its
    compilation (:func:`jaxcert.probes.throughput.nacl_rate`).
    """
    return _VERLET.lower(model, model.prepare(s), velocities, timestep_fs, n_steps).compile()


def _verlet(model: Model, s: Structure, velocities: jax.Array, timestep_fs: float, n_steps: int) -> VerletResult:
    dt = timestep_fs * FS
    m = _masses(s)
    ef = _energy_forces_fn(model, s)

    def total(E, p):
        return E + 0.5 * jnp.sum(_w(s) * p * p / m)

    def step(c, _):
        R, p, F, nbrs = c
        p = p + 0.5 * dt * F
        R = R + dt * p / m
        E, F, nbrs = ef(R, nbrs)
        p = p + 0.5 * dt * F
        return (R, p, F, nbrs), (total(E, p), R)

    R0 = s.positions
    p0 = m * velocities.astype(R0.dtype) * _w(s)
    E0, F0, nbrs0 = ef(R0, s.neighbor_state)
    (R, p, F, nbrs), (Es, Rs) = jax.lax.scan(step, (R0, p0, F0, nbrs0), None, length=n_steps)
    return VerletResult(R, p / m, F, jnp.concatenate([total(E0, p0)[None], Es]), Rs, nbrs)


# ----------------------------------------------------------------------------- Langevin
@dataclasses.dataclass(frozen=True)
class LangevinConfig:
    """Thermostat of the shared trajectory (docs/probes.md §5; the reference's frozen ``Thermostat`` key).

    Attributes:
      temperature_k: set-point in K (30).
      timestep_fs: time step in fs (1.0).
      friction_per_fs: γ in fs⁻¹ (0.05).
      warmup_steps: unstored steps before recording (400).
      relax: relax the substrate first (True); the relaxed structure is R^eq.
      relax_fmax: BFGS convergence in eV/Å (1e-3).
      relax_steps: BFGS step cap (300, the reference's relax default).
      com: "fixcom" (default, ASE FixCom constraint as pescert's newest version),
        "langevin_fixcm" (pescert's earlier version) or "none"; see the module docstring.
      integrator: "ase" (ASE's ``Langevin``, the reference's) or "baoab" (Leimkuhler & Matthews 2013,
        :func:`baoab_step`); see the module docstring and docs/statistics.md.
    """

    temperature_k: float = 30.0
    timestep_fs: float = 1.0
    friction_per_fs: float = 0.05
    warmup_steps: int = 400
    relax: bool = True
    relax_fmax: float = 1e-3
    relax_steps: int = 300
    com: str = "fixcom"
    integrator: str = "ase"

    def __post_init__(self):
        if self.com not in COM_MODES:
            raise ValueError(f"LangevinConfig.com must be one of {COM_MODES}, got {self.com!r}")
        if self.integrator not in INTEGRATORS:
            raise ValueError(f"LangevinConfig.integrator must be one of {INTEGRATORS}, got {self.integrator!r}")
        if self.integrator == "baoab" and self.com == "langevin_fixcm":
            raise ValueError("com='langevin_fixcm' is ASE Langevin's own option; use 'fixcom' or 'none' with BAOAB")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if not (self.timestep_fs > 0 and self.temperature_k >= 0 and self.friction_per_fs >= 0):
            raise ValueError("timestep_fs must be > 0, temperature_k and friction_per_fs >= 0")

    @property
    def removes_com(self) -> bool:
        """True when the dynamics keeps the COM momentum at zero (3 kinetic DOF removed)."""
        return self.com != "none"


def langevin_coefficients(s: Structure, config: LangevinConfig) -> tuple[jax.Array, ...]:
    """ASE Langevin (c1, c2, c3, c4, c5); c3..c5 are (n, 1) per atom (ASE time units, Å, amu, eV)."""
    dtype = s.positions.dtype
    dt = config.timestep_fs * FS
    fr = config.friction_per_fs / FS
    T = KB_EV_PER_K * config.temperature_k
    sigma = jnp.sqrt(2 * T * fr / _masses(s))
    c1 = jnp.asarray(dt / 2.0 - dt * dt * fr / 8.0, dtype)
    c2 = jnp.asarray(dt * fr / 2 - dt * dt * fr * fr / 8.0, dtype)
    c3 = math.sqrt(dt) * sigma / 2.0 - dt**1.5 * fr * sigma / 8.0
    c5 = dt**1.5 * sigma / (2 * math.sqrt(3))
    c4 = fr / 2.0 * c5
    return c1, c2, c3, c4, c5


def _fixcom_positions(s: Structure, old: jax.Array, new: jax.Array) -> jax.Array:
    return new + (center_of_mass(s, old) - center_of_mass(s, new)) * _w(s)


def _fixcom_momenta(s: Structure, p: jax.Array) -> jax.Array:
    mw = _masses(s) * _w(s)
    return p - mw * (jnp.sum(p * _w(s), axis=0) / jnp.sum(mw))


def _fixcom_forces(s: Structure, F: jax.Array) -> jax.Array:
    mw = _masses(s) * _w(s)
    lam = jnp.sum(mw * F, axis=0) / jnp.sum(mw * mw)
    return F - mw * lam


class _LState(NamedTuple):
    positions: jax.Array
    velocities: jax.Array
    forces: jax.Array  # as used by the integrator (constraint-adjusted under FixCom)
    raw_forces: jax.Array  # the model's output
    neighbors: NeighborState | None = None  # the carried Verlet list (None on the dense path)
    sampled_velocities: jax.Array | None = None  # BAOAB: the velocities the trajectory stores (after O)


def langevin_step(s: Structure, force_fn, config: LangevinConfig, state: _LState, key: jax.Array) -> _LState:
    """One ASE Langevin step (see the module docstring).

    ``force_fn(R, list) -> (raw force output, list refreshed at R)`` (:func:`_forces_fn`); the Verlet list is
    carried in ``state.neighbors``.
    """
    dtype = s.positions.dtype
    dt = config.timestep_fs * FS
    w = _w(s)
    m = _masses(s)
    c1, c2, c3, c4, c5 = langevin_coefficients(s, config)
    xi, eta = jax.random.normal(key, (2, *s.positions.shape), dtype) * w
    rnd_pos = c5 * eta
    rnd_vel = c3 * xi - c4 * eta
    if config.com == "langevin_fixcm":
        n = jnp.sum(w)
        factor = jnp.sqrt(n / (n - 1.0))
        rnd_pos = (rnd_pos - jnp.sum(rnd_pos, axis=0) / n) * w * factor
        rnd_vel = (rnd_vel - jnp.sum(rnd_vel * m, axis=0) / (m * n)) * w * factor
    fixcom = config.com == "fixcom"
    v = state.velocities
    v = v + (c1 * state.forces / m - c2 * v + rnd_vel)
    x = state.positions
    new = x + dt * v + rnd_pos
    if fixcom:
        new = _fixcom_positions(s, x, new)
    v = (new - x - rnd_pos) / dt
    raw, nbrs = force_fn(new, state.neighbors)
    F = _fixcom_forces(s, raw) if fixcom else raw
    v = v + (c1 * F / m - c2 * v + rnd_vel)
    if fixcom:
        v = _fixcom_momenta(s, v * m) / m
    return _LState(new, v, F, raw, nbrs)


def baoab_step(s: Structure, force_fn, config: LangevinConfig, state: _LState, key: jax.Array) -> _LState:
    r"""One BAOAB Langevin step (B. Leimkuhler and C. Matthews, Appl. Math. Res. Express 2013, 34).

    With c = exp(−γ dt) and ξ ~ N(0, 1)^{N×3} drawn from ``key``::

        B: v += ½dt F/m        A: r += ½dt v
        O: v = c v + √((1 − c²) k_BT/m) ξ
        A: r += ½dt v          F ← F(r)          B: v += ½dt F/m

    The O step solves the Ornstein–Uhlenbeck part exactly; the splitting samples the configurational
    (position) distribution with an error that is exact for a harmonic well at any stable step and second
    order otherwise, much smaller in practice than splittings that end with the friction (docs/statistics.md
    measures it against :func:`langevin_step`).  Under ``com="fixcom"`` the integrator uses the FixCom forces,
    every position update keeps the mass-weighted COM and every velocity update drops the COM momentum, as in
    :func:`langevin_step`.  One force evaluation per step.
    """
    dtype = s.positions.dtype
    dt = config.timestep_fs * FS
    fr = config.friction_per_fs / FS
    T = KB_EV_PER_K * config.temperature_k
    w = _w(s)
    m = _masses(s)
    fixcom = config.com == "fixcom"
    c = math.exp(-fr * dt)
    sig = jnp.sqrt((1.0 - c * c) * T / m).astype(dtype)
    xi = jax.random.normal(key, s.positions.shape, dtype) * w

    def keep_p(v):
        return _fixcom_momenta(s, v * m) / m if fixcom else v

    def move(x, v):
        new = x + 0.5 * dt * v * w
        return _fixcom_positions(s, x, new) if fixcom else new

    v = keep_p(state.velocities + 0.5 * dt * state.forces / m * w)
    x = move(state.positions, v)
    v = keep_p(c * v + sig * xi)
    mid = v
    x = move(x, v)
    raw, nbrs = force_fn(x, state.neighbors)
    F = _fixcom_forces(s, raw) if fixcom else raw
    return _LState(x, _baoab_last_kick(s, config, mid, F), F, raw, nbrs, mid)


def _baoab_last_kick(s: Structure, config: LangevinConfig, mid: jax.Array, F: jax.Array) -> jax.Array:
    """BAOAB's last B: the end-of-step velocities from the velocities after O and the (integrator's) forces."""
    v = mid + 0.5 * config.timestep_fs * FS * F / _masses(s) * _w(s)
    return _fixcom_momenta(s, v * _masses(s)) / _masses(s) if config.com == "fixcom" else v


def step_function(config: LangevinConfig):
    """The one-step function of ``config.integrator``: :func:`langevin_step` ("ase") or :func:`baoab_step`."""
    return baoab_step if config.integrator == "baoab" else langevin_step


# ----------------------------------------------------------------------------- trajectory
@dataclasses.dataclass(frozen=True)
class Trajectory:
    """The shared Langevin trajectory (pytree; docs/probes.md §5).

    Attributes:
      reference: the relaxed structure R^eq (Structure).
      positions: (n_steps, n, 3) Å after every stored step.
      forces: (n_steps, n, 3) eV/Å, the raw model force output at those positions.
      velocities: (n_steps, n, 3) Å/ASE-time.
      steps: (n_steps,) absolute MD step index (warmup + 1, …).
      noise_key: key of the Langevin noise stream (step s uses ``fold_in(noise_key, s)``).
      relax_fmax: max force (eV/Å) reached by the relaxation.
      relax_steps: BFGS steps taken.
      n_evals: model evaluations spent to produce it (relaxation + 1 + warm-up + stored steps).
      thermostat: the :class:`LangevinConfig` (static).
      n_run: a trajectory run to a precision (:mod:`jaxcert.probes._statmech`, ``Sampling``): the stored steps
        actually run (the arrays hold ``max_steps`` rows, the rows past ``n_run`` are zero); None for a
        fixed-length trajectory, whose every row is a step.
      sampled: a run to a precision: what its stop rule measured (observable series, standard errors, why it
        stopped; :mod:`jaxcert.probes._statmech`); None for a fixed-length trajectory.
    """

    reference: Structure
    positions: jax.Array
    forces: jax.Array
    velocities: jax.Array
    steps: jax.Array
    noise_key: jax.Array
    relax_fmax: jax.Array
    relax_steps: jax.Array
    n_evals: jax.Array
    thermostat: LangevinConfig = LangevinConfig()
    n_run: jax.Array | None = None
    sampled: Any = None

    @property
    def n_stored(self) -> int:
        """Number of stored steps (static)."""
        return self.positions.shape[-3]


jax.tree_util.register_dataclass(
    Trajectory,
    data_fields=["reference", "positions", "forces", "velocities", "steps", "noise_key", "relax_fmax",
                 "relax_steps", "n_evals", "n_run", "sampled"],
    meta_fields=["thermostat"],
)


def noise_key(key: jax.Array) -> jax.Array:
    """The Langevin noise key derived from a run key."""
    return jax.random.fold_in(key, TRAJECTORY_NOISE_STREAM)


def _run(s: Structure, force_fn, config: LangevinConfig, state: _LState, nkey: jax.Array, first_step, n: int):
    one = step_function(config)

    def body(c, step):
        c = one(s, force_fn, config, c, jax.random.fold_in(nkey, step))
        v = c.velocities if c.sampled_velocities is None else c.sampled_velocities
        return c, (c.positions, c.raw_forces, v)

    steps = first_step + jnp.arange(n)
    return jax.lax.scan(body, state, steps)


def langevin_trajectory(model: Model, s: Structure, key: jax.Array, config: LangevinConfig = LangevinConfig(),
                        n_steps: int = 1100) -> Trajectory:
    """Relax, thermalise and record the shared trajectory of docs/probes.md §5 (see the module docstring).

    Args:
      model: the potential.
      s: the substrate (cluster); relaxed first unless ``config.relax`` is False.
      key: run key; velocities use ``key``, the noise ``noise_key(key)``.
      config: thermostat settings.
      n_steps: stored steps (1100); static.

    The Verlet list of a large cell is carried through the steps (rebuilt only when stale); on the host an
    overflowed list is enlarged and the whole trajectory recomputed (:func:`jaxcert.core.neighbors.rerun_on_overflow`).
    """
    s = model.prepare(s)
    return neighbors.rerun_on_overflow(lambda t: _TRAJECTORY(model, t, key, config, n_steps), s,
                                       "langevin_trajectory")[0]


def _trajectory(model: Model, s: Structure, key: jax.Array, config: LangevinConfig,
                n_steps: int) -> tuple[Trajectory, jax.Array]:
    """The trajectory and the overflow status (``ok``) of every list it used."""
    ref, force_fn, state, nkey, fmax_reached, relax_steps, relax_evals = start(model, s, key, config)
    # one scan over warm-up + stored steps (one compiled step body), warm-up frames dropped
    nw = config.warmup_steps
    end, (R, F, V) = _run(ref, force_fn, config, state, nkey, 1, nw + n_steps)
    R, F, V = R[nw:], F[nw:], V[nw:]
    steps = jnp.arange(config.warmup_steps + 1, config.warmup_steps + 1 + n_steps)
    n_evals = relax_evals + 1 + config.warmup_steps + n_steps
    traj = Trajectory(ref, R, F, V, steps, nkey, fmax_reached, relax_steps, jnp.asarray(n_evals, jnp.int32), config)
    return traj, (neighbors.list_ok(ref.neighbor_state), neighbors.list_ok(end.neighbors))


def start(model: Model, s: Structure, key: jax.Array, config: LangevinConfig):
    """Steps 1–2 of the trajectory (relaxation, seeded velocities, first forces).

    Returns ``(reference, force_fn, state, noise key, relax fmax reached, relax steps, relax evaluations)``;
    the state is the Langevin state at step 0 (advance it with :func:`advance` or :func:`_run`)."""
    if config.relax:
        rr = bfgs(model, s, fmax=config.relax_fmax, max_steps=config.relax_steps)
        ref, fmax_reached, relax_steps = rr.structure, rr.fmax, rr.steps
        relax_evals = rr.steps + 1
    else:
        ref = s
        F0 = model.forces_of(model.params, s)
        fmax_reached = jnp.sqrt(jnp.max(jnp.sum(F0 * F0, -1)))
        relax_steps = jnp.asarray(0)
        relax_evals = jnp.asarray(0)
    force_fn = _forces_fn(model, ref)
    v0 = maxwell_boltzmann(key, ref, config.temperature_k)
    if config.com == "fixcom":  # ASE set_velocities applies FixCom.adjust_momenta
        v0 = _fixcom_momenta(ref, v0 * _masses(ref)) / _masses(ref)
    raw0, nbrs0 = force_fn(ref.positions, ref.neighbor_state)
    F0 = _fixcom_forces(ref, raw0) if config.com == "fixcom" else raw0
    state = _LState(ref.positions, v0, F0, raw0, nbrs0, v0 if config.integrator == "baoab" else None)
    return ref, force_fn, state, noise_key(key), fmax_reached, relax_steps, relax_evals


def advance(s: Structure, force_fn, config: LangevinConfig, state: _LState, nkey: jax.Array, first_step,
            n: int) -> _LState:
    """``n`` (static) steps from absolute step ``first_step`` (may be traced) without storing them."""
    one = step_function(config)

    def body(c, step):
        return one(s, force_fn, config, c, jax.random.fold_in(nkey, step)), None

    return jax.lax.scan(body, state, first_step + jnp.arange(n))[0]


def extend(model: Model, traj: Trajectory, n_steps: int) -> Trajectory:
    """Continue the same dynamics until ``n_steps`` steps are stored (no-op if already there).

    Equals one long run of ``n_steps`` (the noise of step s depends only on s).  Costs
    ``n_steps − stored`` evaluations (added to ``traj.n_evals``).
    """
    have = traj.n_stored
    if n_steps <= have:
        return traj
    config = traj.thermostat
    ref = traj.reference
    force_fn = _forces_fn(model, ref)
    raw = traj.forces[-1]
    F = _fixcom_forces(ref, raw) if config.com == "fixcom" else raw
    # the reference's list, refreshed at the first step if stale, then carried
    v = traj.velocities[-1]
    if config.integrator == "baoab":  # BAOAB stores the velocities after O: redo the last kick
        state = _LState(traj.positions[-1], _baoab_last_kick(ref, config, v, F), F, raw, ref.neighbor_state, v)
    else:
        state = _LState(traj.positions[-1], v, F, raw, ref.neighbor_state)
    first = config.warmup_steps + have + 1
    _, (R, Fs, V) = _run(ref, force_fn, config, state, traj.noise_key, first, n_steps - have)
    steps = jnp.arange(config.warmup_steps + 1, config.warmup_steps + 1 + n_steps)
    return dataclasses.replace(
        traj,
        positions=jnp.concatenate([traj.positions, R]),
        forces=jnp.concatenate([traj.forces, Fs]),
        velocities=jnp.concatenate([traj.velocities, V]),
        steps=steps,
        n_evals=traj.n_evals + (n_steps - have),
    )


def frame_indices(warmup_steps: int, n_steps: int, sample_every: int) -> np.ndarray:
    """Static indices into the stored steps: steps s ≤ warmup + n_steps with s mod sample_every = 0.

    Their count is ⌊(warmup + n)/k⌋ − ⌊warmup/k⌋ (docs/probes.md §5).
    """
    if sample_every < 1 or n_steps < 1:
        raise ValueError(f"sample_every and n_steps must be >= 1, got {sample_every}, {n_steps}")
    s = np.arange(warmup_steps + 1, warmup_steps + n_steps + 1)
    return np.flatnonzero(s % sample_every == 0)


def frames(traj: Trajectory, sample_every: int, n_steps: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(positions, raw forces, velocities) of the sampled frames; requires ``n_steps ≤ stored``."""
    if n_steps > traj.n_stored:
        raise ValueError(f"trajectory stores {traj.n_stored} steps, {n_steps} requested; call extend() first")
    idx = frame_indices(traj.thermostat.warmup_steps, n_steps, sample_every)
    return traj.positions[idx], traj.forces[idx], traj.velocities[idx]


def check_thermostat(traj: Trajectory, config: LangevinConfig) -> None:
    """Raise ValueError if a shared trajectory was made with another thermostat than ``config``."""
    if traj.thermostat != config:
        raise ValueError(
            f"the trajectory was made with {traj.thermostat}, the probe asks for {config}; "
            "a different thermostat needs its own trajectory (pass trajectory=None)"
        )


def get_trajectory(model: Model, s: Structure, key: jax.Array, config: LangevinConfig, n_steps: int,
                   trajectory: Trajectory | None) -> tuple[Trajectory, jax.Array, jax.Array]:
    """Used by the probes: (trajectory with ≥ n_steps stored, evals charged to this probe, reused flag).

    A passed trajectory is checked against ``config`` and extended if too short; only the
    extension is charged.  Otherwise the probe computes (and is charged for) its own.
    """
    if trajectory is None:
        traj = langevin_trajectory(model, s, key, config, n_steps)
        return traj, traj.n_evals, jnp.asarray(False)
    check_thermostat(trajectory, config)
    traj = extend(model, trajectory, n_steps)
    return traj, traj.n_evals - trajectory.n_evals, jnp.asarray(True)


__all__ += ["get_trajectory"]


def trajectory_details(traj: Trajectory, config, reused, traj_evals) -> dict:
    """The details every stat-mech probe reports about the trajectory it read (docs/probes.md §5).

    ``config`` is the probe's config (``n_steps``, ``sample_every`` and ``thermostat.relax_fmax``).
    """
    return {
        "relax_fmax_reached": traj.relax_fmax,
        "relax_converged": traj.relax_fmax < config.thermostat.relax_fmax,
        "trajectory": {
            "reused": reused,
            "n_steps": jnp.asarray(config.n_steps) if traj.n_run is None else traj.n_run,
            "sample_every": jnp.asarray(config.sample_every),
            "md_evals": traj_evals,
        },
    }


# Jitted (step counts and configs static), so a second host call reuses the compiled loop instead of tracing
# fresh closures (the same fix as jaxcert.optim.relax's host drivers).
_VERLET = jax.jit(_verlet, static_argnums=(4,))
_TRAJECTORY = jax.jit(_trajectory, static_argnums=(3, 4))

# the executable store and stored host values may rebuild these types (jaxcert/core/cache.py)
register_storable(LangevinConfig, value=True)
register_storable(Trajectory, node=True)
