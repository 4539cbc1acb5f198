r"""Relaxation to a model's own minimum, in JAX (fixed cell, positions only).

Two optimisers, both pure, jittable and vmappable (``lax.while_loop`` with a
per-structure convergence test, so under ``vmap`` every structure reports its
own honest ``converged`` flag and step count):

* :func:`bfgs` — ASE's ``BFGS`` (dense inverse-free Hessian update, step
  ``V (Vᵀf / |ω|)`` from the eigen-decomposition, initial Hessian α·I with
  α = 70 eV/Å², longest atomic step capped at ``maxstep`` = 0.2 Å), the
  optimiser the reference probes use (docs/probes.md §1.6).  Dense: for the 13-atom
  substrates (39 DOF) the eigen-decomposition is negligible.
* :func:`fire` — FIRE (Bitzek et al., PRL 97, 170201 (2006)) with ASE's
  defaults (dt 0.1, dtmax 1.0, Nmin 5, finc 1.1, fdec 0.5, α 0.1, fα 0.99,
  maxstep 0.2 Å); O(N) memory, for larger cells and the attack pipeline.

Convergence: max_i ‖F_i‖ < ``fmax`` (eV/Å), tested before each step as in ASE.
Padding atoms have zero force and never move.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcert import linalg
from jaxcert.model import Model
from jaxcert.structure import Structure

__all__ = ["RelaxResult", "bfgs", "fire"]


class RelaxResult(NamedTuple):
    """Relaxed structure, reached max force (eV/Å), steps taken, converged flag."""

    structure: Structure
    fmax: jax.Array
    steps: jax.Array
    converged: jax.Array


def _fmax(F: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.max(jnp.sum(F * F, axis=-1)))


def bfgs(
    model: Model,
    s: Structure,
    fmax: float = 1e-3,
    max_steps: int = 300,
    maxstep: float = 0.2,
    alpha: float = 70.0,
) -> RelaxResult:
    """ASE-BFGS relaxation of positions (eV/Å, Å); see the module docstring."""
    s = model.prepare(s)
    params = model.params
    dt = s.positions.dtype
    n3 = 3 * s.n_atoms

    def forces(R):
        return model.forces_of(params, s.replace(positions=R))

    def cond(c):
        R, F, H, r0, f0, k = c
        return (_fmax(F) >= fmax) & (k < max_steps)

    def body(c):
        R, F, H, r0, f0, k = c
        r, f = R.reshape(-1), F.reshape(-1)
        dr_, df = r - r0, f - f0
        a = dr_ @ df
        dg = H @ dr_
        b = dr_ @ dg
        upd = (k > 0) & (jnp.max(jnp.abs(dr_)) >= 1e-7)
        safe_a = jnp.where(upd, a, 1.0)
        safe_b = jnp.where(upd, b, 1.0)
        H = jnp.where(upd, H - jnp.outer(df, df) / safe_a - jnp.outer(dg, dg) / safe_b, H)
        omega, V = linalg.eigh(H)
        step = (V @ ((f @ V) / jnp.abs(omega))).reshape(-1, 3)
        longest = jnp.sqrt(jnp.max(jnp.sum(step * step, -1)))
        step = step * jnp.minimum(1.0, maxstep / jnp.maximum(longest, 1e-300))
        Rn = R + step
        return Rn, forces(Rn), H, r, f, k + 1

    F0 = forces(s.positions)
    H0 = alpha * jnp.eye(n3, dtype=dt)
    init = (s.positions, F0, H0, jnp.zeros(n3, dt), jnp.zeros(n3, dt), jnp.asarray(0))
    R, F, _, _, _, k = jax.lax.while_loop(cond, body, init)
    fm = _fmax(F)
    return RelaxResult(s.replace(positions=R), fm, k, fm < fmax)


def fire(
    model: Model,
    s: Structure,
    fmax: float = 1e-3,
    max_steps: int = 300,
    dt_start: float = 0.1,
    dt_max: float = 1.0,
    maxstep: float = 0.2,
    n_min: int = 5,
    f_inc: float = 1.1,
    f_dec: float = 0.5,
    a_start: float = 0.1,
    f_a: float = 0.99,
) -> RelaxResult:
    """FIRE relaxation of positions with ASE's defaults (unit masses, ASE time units)."""
    s = model.prepare(s)
    params = model.params

    def forces(R):
        return model.forces_of(params, s.replace(positions=R))

    def cond(c):
        R, v, F, dt, a, n_pos, k = c
        return (_fmax(F) >= fmax) & (k < max_steps)

    def body(c):
        R, v, F, dt, a, n_pos, k = c
        vf = jnp.sum(F * v)
        fnorm = jnp.sqrt(jnp.sum(F * F))
        vnorm = jnp.sqrt(jnp.sum(v * v))
        first = k == 0  # ASE: no mixing and no dt/α update on the first step (velocities start at 0)
        up = vf > 0
        v_mixed = (1 - a) * v + a * F / jnp.maximum(fnorm, 1e-300) * vnorm
        grow = up & (n_pos > n_min)
        dt_new = jnp.where(up, jnp.where(grow, jnp.minimum(dt * f_inc, dt_max), dt), dt * f_dec)
        a_new = jnp.where(up, jnp.where(grow, a * f_a, a), a_start)
        dt = jnp.where(first, dt, dt_new)
        a = jnp.where(first, a, a_new)
        n_pos = jnp.where(first, n_pos, jnp.where(up, n_pos + 1, 0))
        v = jnp.where(first, v, jnp.where(up, v_mixed, jnp.zeros_like(v)))
        v = v + dt * F
        dR = dt * v
        norm = jnp.sqrt(jnp.sum(dR * dR))
        dR = dR * jnp.minimum(1.0, maxstep / jnp.maximum(norm, 1e-300))
        Rn = R + dR
        return Rn, v, forces(Rn), dt, a, n_pos, k + 1

    dt0 = s.positions.dtype
    F0 = forces(s.positions)
    init = (s.positions, jnp.zeros_like(s.positions), F0, jnp.asarray(dt_start, dt0), jnp.asarray(a_start, dt0),
            jnp.asarray(0), jnp.asarray(0))
    R, _, F, _, _, _, k = jax.lax.while_loop(cond, body, init)
    fm = _fmax(F)
    return RelaxResult(s.replace(positions=R), fm, k, fm < fmax)
