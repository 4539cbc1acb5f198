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
  maxstep 0.2 Å); O(N) memory, for larger cells and the attack pipeline.  The step itself is
  :func:`fire_optimizer`, an ``(init, step)`` pair over a coordinate pytree, shared with :func:`relax_cell`.
* :func:`lbfgs` — ASE's ``LBFGS`` without line search (memory 100, initial
  inverse Hessian 1/α with α = 70 eV/Å², damping 1, longest atomic step capped
  at 0.2 Å): O(memory·N) memory, for large N where BFGS's dense 3N × 3N Hessian
  does not fit.  The two-loop recursion is optax's ``scale_by_lbfgs`` run on the
  scaled coordinates x = √α·R, where its unit initial inverse Hessian is ASE's 1/α
  in R (the recursion is otherwise the same), so the steps are ASE's.
  :func:`bfgs` hands over to it above :data:`BFGS_MAX_ATOMS` atom slots
  (docs/architecture.md §2.3).

Convergence: max_i ‖F_i‖ < ``fmax`` (eV/Å), tested before each step as in ASE.
Padding atoms have zero force and never move.  Every optimiser calls the
model's forces only (no energy), so direct-force models relax too.

Neighbour lists: each loop carries the structure's Verlet list in its state and
refreshes it once per step (:func:`jaxcert.core.neighbors.update`).  Called on the host
(a concrete structure, not under ``jit``/``vmap``), a relaxation whose list
overflowed is run again with a larger list (:func:`jaxcert.core.neighbors.rerun_on_overflow`,
with a :class:`~jaxcert.core.neighbors.NeighborListOverflow` warning); inside a
transformation the overflow shows as ``converged`` False, NaN ``fmax`` and
``structure.neighbor_state.ok`` False, for the caller to answer.

:func:`relax_cell` relaxes positions and cell together: FIRE (ASE's defaults) on
the degrees of freedom of ASE's ``FrechetCellFilter`` (positions in the starting
cell's frame and N·log 𝔽 of the deformation gradient, with the virial as the
cell force); see its docstring.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxcert.core import batching, linalg, neighbors
from jaxcert.core.geometry import det3, inv3, is_concrete
from jaxcert.core.model import Model, strain
from jaxcert.core.neighbors import with_images
from jaxcert.core.result import Status
from jaxcert.core.structure import Structure

__all__ = ["RelaxResult", "CellRelaxResult", "Fire", "FireState", "bfgs", "fire", "fire_optimizer", "lbfgs",
           "relax", "relax_cell", "relax_batch", "with_fixed_atoms", "status_code", "RELAXERS", "FIXED_CELL_RELAXERS",
           "BFGS_MAX_ATOMS"]

#: Atom slots above which :func:`bfgs` runs :func:`lbfgs` instead: the dense Hessian is 9N² numbers (75 MB in
#: float64 at 1,024 atoms, 4.8 GB at 8,192) and each step diagonalises it (O(N³)).
BFGS_MAX_ATOMS = 1024


def status_code(converged: Any, fmax: Any) -> jax.Array:
    """The :class:`~jaxcert.core.result.Status` code of a relaxation (int32, traced and batched alike).

    ``OK`` where it converged, ``NON_FINITE`` where the reached ``fmax`` is NaN or inf (the model, or an
    overflowed neighbour list, returned NaN), ``NOT_CONVERGED`` where it stopped at its step cap.
    """
    ok, bad, cap = (jnp.int32(s.code) for s in (Status.OK, Status.NON_FINITE, Status.NOT_CONVERGED))
    return jnp.where(converged, ok, jnp.where(jnp.isfinite(fmax), cap, bad))


class RelaxResult(NamedTuple):
    """Relaxed structure, reached max force (eV/Å), steps taken, converged flag.

    A NamedTuple, not a :class:`~jaxcert.core.result.Result`: it is the pytree the jitted, vmapped loops return.
    :attr:`status` gives the outcome in the one status vocabulary.
    """

    structure: Structure
    fmax: jax.Array
    steps: jax.Array
    converged: jax.Array

    @property
    def status(self) -> jax.Array:
        """:func:`status_code` of each run (int32 array; ``Status.of(r.status)`` for an unbatched result)."""
        return status_code(self.converged, self.fmax)


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
    """ASE-BFGS relaxation of positions (eV/Å, Å); see the module docstring.

    Above :data:`BFGS_MAX_ATOMS` atom slots this is :func:`lbfgs` with the same ``fmax``, ``max_steps``,
    ``maxstep`` and ``alpha`` (ASE's LBFGS memory of 100 steps): the dense Hessian would not fit.
    """
    if s.n_atoms > BFGS_MAX_ATOMS:
        return lbfgs(model, s, fmax=fmax, max_steps=max_steps, maxstep=maxstep, alpha=alpha)
    return _on_host(model, s, "bfgs", lambda t: _BFGS(model, t, fmax, max_steps, maxstep, alpha))


def _forces_fn(model: Model, s: Structure):
    """(R, list) ↦ (forces eV/Å, the list refreshed at R): the one force call of every relaxation loop."""
    params = model.params

    def forces(R, nbrs):
        t = neighbors.update(s.replace(positions=R, neighbor_state=nbrs))  # Verlet list: rebuilt when stale
        return model.forces_of(params, t), t.neighbor_state

    return forces


def _on_host(model: Model, s: Structure, what: str, run) -> RelaxResult:
    """``run(prepared s)``, rerun with a larger neighbour list if it overflowed (host only; see the module doc)."""
    s = model.prepare(s)
    res, _, _ = neighbors.rerun_on_overflow(lambda t: (r := run(t), neighbors.list_ok(r.structure.neighbor_state)),
                                            s, what)
    return res


def _bfgs(model: Model, s: Structure, fmax: float, max_steps: int, maxstep: float, alpha: float) -> RelaxResult:
    dt = s.positions.dtype
    n3 = 3 * s.n_atoms
    forces = _forces_fn(model, s)

    def cond(c):
        R, F, H, r0, f0, k, _ = c
        return (_fmax(F) >= fmax) & (k < max_steps)

    def body(c):
        R, F, H, r0, f0, k, nbrs = c
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
        Fn, nbrs = forces(Rn, nbrs)
        return Rn, Fn, H, r, f, k + 1, nbrs

    F0, nbrs0 = forces(s.positions, s.neighbor_state)
    H0 = alpha * jnp.eye(n3, dtype=dt)
    init = (s.positions, F0, H0, jnp.zeros(n3, dt), jnp.zeros(n3, dt), jnp.asarray(0), nbrs0)
    R, F, _, _, _, k, nbrs = jax.lax.while_loop(cond, body, init)
    fm = _fmax(F)
    return RelaxResult(s.replace(positions=R, neighbor_state=nbrs), fm, k, fm < fmax)


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
    return _on_host(model, s, "fire", lambda t: _FIRE(model, t, fmax, max_steps, dt_start, dt_max, maxstep, n_min,
                                                      f_inc, f_dec, a_start, f_a))


class FireState(NamedTuple):
    """FIRE's state beside the coordinates (a pytree; may carry batch axes).

    Attributes:
      velocity: v, the same pytree as the coordinates (ASE time units, unit masses).
      dt: the current time step.
      a: the current mixing parameter α.
      n_pos: steps since P = F·v last turned non-positive.
    """

    velocity: Any
    dt: jax.Array
    a: jax.Array
    n_pos: jax.Array


class Fire(NamedTuple):
    """An ``(init, step)`` pair of pure functions (as jax-md's minimisers and optax's transformations are).

    ``init(x) -> FireState``: zero velocity, ``dt_start``, ``a_start``.
    ``step(x, f, state, first) -> (x_new, state_new)``: one FIRE step of the coordinates ``x`` (any pytree of
    arrays) under the forces ``f`` (the same pytree); ``first`` (bool, may be traced) is ASE's first step, which
    takes no mixing and no dt/α update (velocities start at zero).
    """

    init: Callable[[Any], FireState]
    step: Callable[[Any, Any, FireState, Any], tuple[Any, FireState]]


def _tree_sum(tree: Any) -> jax.Array:
    """Σ over every element of every leaf (for one leaf exactly ``jnp.sum(leaf)``)."""
    return functools.reduce(operator.add, [jnp.sum(x) for x in jax.tree.leaves(tree)])


def fire_optimizer(dt_start: Any = 0.1, dt_max: Any = 1.0, maxstep: Any = 0.2, n_min: Any = 5, f_inc: Any = 1.1,
                   f_dec: Any = 0.5, a_start: Any = 0.1, f_a: Any = 0.99) -> Fire:
    """FIRE (Bitzek et al. 2006) with ASE's update and defaults, as an :class:`Fire` ``(init, step)`` pair.

    The one FIRE of jaxcert: :func:`fire` runs it on the positions, :func:`relax_cell` on the (N + 3, 3)
    array of ``FrechetCellFilter`` coordinates.  Sums and norms run over the whole pytree, and the step is
    capped at ``maxstep`` in the norm of the whole pytree, as ASE's FIRE does.  Parameters may be traced.
    """
    def init(x: Any) -> FireState:
        dtype = jax.tree.leaves(x)[0].dtype
        return FireState(jax.tree.map(jnp.zeros_like, x), jnp.asarray(dt_start, dtype), jnp.asarray(a_start, dtype),
                         jnp.asarray(0))

    def step(x: Any, f: Any, state: FireState, first: Any) -> tuple[Any, FireState]:
        v, dt, a, n_pos = state
        vf = _tree_sum(jax.tree.map(lambda fi, vi: fi * vi, f, v))
        fnorm = jnp.sqrt(_tree_sum(jax.tree.map(lambda fi: fi * fi, f)))
        vnorm = jnp.sqrt(_tree_sum(jax.tree.map(lambda vi: vi * vi, v)))
        up = vf > 0
        v_mixed = jax.tree.map(lambda vi, fi: (1 - a) * vi + a * fi / jnp.maximum(fnorm, 1e-300) * vnorm, v, f)
        grow = up & (n_pos > n_min)
        dt_new = jnp.where(up, jnp.where(grow, jnp.minimum(dt * f_inc, dt_max), dt), dt * f_dec)
        a_new = jnp.where(up, jnp.where(grow, a * f_a, a), a_start)
        dt = jnp.where(first, dt, dt_new)
        a = jnp.where(first, a, a_new)
        n_pos = jnp.where(first, n_pos, jnp.where(up, n_pos + 1, 0))
        v = jax.tree.map(lambda vi, vm: jnp.where(first, vi, jnp.where(up, vm, jnp.zeros_like(vi))), v, v_mixed)
        v = jax.tree.map(lambda vi, fi: vi + dt * fi, v, f)
        dx = jax.tree.map(lambda vi: dt * vi, v)
        norm = jnp.sqrt(_tree_sum(jax.tree.map(lambda d: d * d, dx)))
        cap = jnp.minimum(1.0, maxstep / jnp.maximum(norm, 1e-300))
        x = jax.tree.map(lambda xi, d: xi + d * cap, x, dx)
        return x, FireState(v, dt, a, n_pos)

    return Fire(init, step)


def _fire(model: Model, s: Structure, fmax, max_steps, dt_start, dt_max, maxstep, n_min, f_inc, f_dec, a_start,
          f_a) -> RelaxResult:
    forces = _forces_fn(model, s)
    opt = fire_optimizer(dt_start, dt_max, maxstep, n_min, f_inc, f_dec, a_start, f_a)

    def cond(c):
        R, F, state, k, _ = c
        return (_fmax(F) >= fmax) & (k < max_steps)

    def body(c):
        R, F, state, k, nbrs = c
        Rn, state = opt.step(R, F, state, k == 0)
        Fn, nbrs = forces(Rn, nbrs)
        return Rn, Fn, state, k + 1, nbrs

    F0, nbrs0 = forces(s.positions, s.neighbor_state)
    init = (s.positions, F0, opt.init(s.positions), jnp.asarray(0), nbrs0)
    R, F, _, k, nbrs = jax.lax.while_loop(cond, body, init)
    fm = _fmax(F)
    return RelaxResult(s.replace(positions=R, neighbor_state=nbrs), fm, k, fm < fmax)


def lbfgs(
    model: Model,
    s: Structure,
    fmax: float = 1e-3,
    max_steps: int = 300,
    maxstep: float = 0.2,
    memory: int = 100,
    alpha: float = 70.0,
    damping: float = 1.0,
) -> RelaxResult:
    r"""ASE-LBFGS relaxation of positions (eV/Å, Å), no line search; O(memory·N) memory.

    Step k (ASE's ``LBFGS.step``): with s_i = R_{i+1} − R_i, y_i = F_i − F_{i+1} and ρ_i = 1/(y_i·s_i) over the
    last ``memory`` steps, the two-loop recursion applies the L-BFGS inverse Hessian with initial value
    H₀ = 1/``alpha`` to the gradient g = −F; the step is −H g, scaled so that no atom moves more than
    ``maxstep``, times ``damping``.  The recursion is ``optax.scale_by_lbfgs`` (fixed initial scale) on
    x = √α·R: there s, y and ρ become √α·s, y/√α and ρ, so its H₀ = 1 is 1/α in R and each step equals
    ASE's (tests/test_relax.py compares them step for step).  Tested before each step: max_i ‖F_i‖ < ``fmax``.
    """
    return _on_host(model, s, "lbfgs", lambda t: _LBFGS(model, t, fmax, max_steps, maxstep, memory, alpha, damping))


def _lbfgs(model: Model, s: Structure, fmax, max_steps, maxstep, memory, alpha, damping) -> RelaxResult:
    forces = _forces_fn(model, s)
    scale = math.sqrt(alpha)
    # a memory beyond the step cap is never filled (ASE uses min(memory, iteration) pairs)
    tx = optax.scale_by_lbfgs(memory_size=max(1, min(int(memory), int(max_steps))), scale_init_precond=False)

    def cond(c):
        R, F, st, k, _ = c
        return (_fmax(F) >= fmax) & (k < max_steps)

    def body(c):
        R, F, st, k, nbrs = c
        z, st = tx.update(-F / scale, st, scale * R)  # H g in x = √α R
        step = -z / scale
        longest = jnp.sqrt(jnp.max(jnp.sum(step * step, -1)))
        step = step * jnp.minimum(1.0, maxstep / jnp.maximum(longest, 1e-300)) * damping
        Rn = R + step
        Fn, nbrs = forces(Rn, nbrs)
        return Rn, Fn, st, k + 1, nbrs

    F0, nbrs0 = forces(s.positions, s.neighbor_state)
    init = (s.positions, F0, tx.init(scale * s.positions), jnp.asarray(0), nbrs0)
    R, F, _, k, nbrs = jax.lax.while_loop(cond, body, init)
    fm = _fmax(F)
    return RelaxResult(s.replace(positions=R, neighbor_state=nbrs), fm, k, fm < fmax)


class CellRelaxResult(NamedTuple):
    """Result of :func:`relax_cell`.

    Attributes:
      structure: relaxed positions and cell (static fields of the input kept).
      fmax: the reached convergence measure, max over the N + 3 rows of the filter's generalised forces
        (eV/Å; ASE's ``opt.run(fmax)`` criterion on a ``FrechetCellFilter``).
      smax: max |σ_ij + p δ_ij| at the end (eV/Å³, ASE sign, p the applied pressure; 1 GPa = 6.2415e-3 eV/Å³).
      stress: the final stress (3, 3) in eV/Å³ (without the applied pressure).
      steps: FIRE steps taken.
      converged: ``fmax`` below the force threshold and, when one was given, ``smax`` below the stress
        threshold (False as well when an output turned NaN, e.g. the cell outgrew its static image count).

    A NamedTuple (the pytree the jitted loop returns); :attr:`status` gives the outcome as a
    :class:`~jaxcert.core.result.Status` code.
    """

    structure: Structure
    fmax: jax.Array
    smax: jax.Array
    stress: jax.Array
    steps: jax.Array
    converged: jax.Array

    @property
    def status(self) -> jax.Array:
        """:func:`status_code` of each run: OK, NON_FINITE (NaN fmax or stress) or NOT_CONVERGED."""
        return status_code(self.converged, self.fmax + jnp.max(jnp.abs(self.stress), axis=(-2, -1)))


#: Scaling-and-squaring parameters of :func:`_expm3`: X/2^8 is Taylor-expanded to order 12.
_EXPM_SQUARINGS = 8
_EXPM_ORDER = 12


def _expm3(X: jax.Array) -> jax.Array:
    """exp(X) of a 3×3 matrix: a fixed-order Taylor polynomial of X/2⁸, squared eight times.

    For ‖X‖ ≤ 8 (a deformation gradient up to e⁸, far beyond any cell a relaxation can reach with a
    static image count) the truncation error ‖X/256‖¹³/13! is below 10⁻²⁵, so the result equals
    ``scipy.linalg.expm`` to round-off.  A fixed polynomial (no norm-dependent branches, unlike
    ``jax.scipy.linalg.expm``) compiles to a few small matrix products and differentiates exactly.
    """
    A = X / (2.0 ** _EXPM_SQUARINGS)
    eye = jnp.eye(3, dtype=X.dtype)
    P = eye
    for k in range(_EXPM_ORDER, 0, -1):  # Horner: I + A/1 (I + A/2 (I + ...))
        P = eye + (A @ P) / k
    for _ in range(_EXPM_SQUARINGS):
        P = P @ P
    return P


def _forces_and_stress(model: Model, params, s: Structure) -> tuple[jax.Array, jax.Array]:
    """(forces eV/Å, stress eV/Å³): one reverse pass over (R, ε) for a conservative model, else the heads."""
    if model.forces_fn is not None or model.stress_fn is not None or not model.stress_available:
        return model.forces_of(params, s), model.stress_of(params, s)

    def energy(R, e):
        return model.energy_of(params, strain(s.replace(positions=R), 0.5 * (e + e.T)))

    gR, ge = jax.grad(energy, argnums=(0, 1))(s.positions, jnp.zeros((3, 3), s.positions.dtype))
    return -gR * s.mask[:, None].astype(gR.dtype), ge / jnp.abs(det3(s.cell))


# One program per (model, structure shape): jitted, so a second relaxation on the host reuses the compiled
# loop instead of tracing and compiling fresh closures (measured: a second FIRE on a cell-list structure cost
# 7.7 s of CPU eagerly). The settings are traced (a caller may pass traced values, e.g. under jit), except
# what L-BFGS needs as Python numbers: max_steps and memory (the history size) and alpha (its scale).
_BFGS = jax.jit(_bfgs)
_FIRE = jax.jit(_fire)
_LBFGS = jax.jit(_lbfgs, static_argnums=(3, 5, 6))


def relax_cell(
    model: Model,
    s: Structure,
    fmax: float = 0.02,
    smax: float | None = None,
    max_steps: int = 500,
    *,
    mask: Any = None,
    scalar_pressure: float = 0.0,
    exp_cell_factor: float | None = None,
    image_margin: float = 0.25,
    dt_start: float = 0.1,
    dt_max: float = 1.0,
    maxstep: float = 0.2,
    n_min: int = 5,
    f_inc: float = 1.1,
    f_dec: float = 0.5,
    a_start: float = 0.1,
    f_a: float = 0.99,
) -> CellRelaxResult:
    r"""Relax positions and cell together: FIRE on ASE's ``FrechetCellFilter`` coordinates (pure, jittable).

    The paper's relaxation protocol (seed 001, Methods: "ASE FIRE with a FrechetCellFilter ... maximum force
    0.02 eV/Å, capped at 500 steps"; the defaults), written in JAX so that it runs under ``jit`` and ``vmap``
    (``lax.while_loop``, a per-structure convergence test; docs/controls.md, "Elastic constants").

    Coordinates (those of ``ase.filters.FrechetCellFilter``; E. B. Tadmor et al., PRB 59, 235 (1999) for
    the unit-cell filter, the matrix-logarithm cell variable after JuLIP's ``expcell``): with the starting
    cell h₀ (rows = lattice vectors) and the deformation gradient 𝔽 (cell h = h₀𝔽ᵀ, positions r = x𝔽ᵀ),
    the degrees of freedom are the N atom rows x (positions in the starting frame) and the three rows of
    X = c·log 𝔽, c = ``exp_cell_factor`` (default: the number of real atoms N, ASE's default).  Their
    generalised forces are

    .. math::  f_x = f\,𝔽, \qquad
               f_X = \frac1c\, D\exp_{\log 𝔽}^{*}\!\big[W 𝔽^{-T}\big], \quad W = -V(\sigma + p I),

    with f the model's force output (eV/Å), σ its stress output (ASE sign: negative under compression),
    p = ``scalar_pressure`` (eV/Å³) and D exp* the adjoint of the Fréchet derivative of the matrix
    exponential (a vector–Jacobian product of ``jax.scipy.linalg.expm``: ASE forms the same sum from
    ``scipy.linalg.expm_frechet`` component by component).  For a conservative model f_X = −∂E/∂X.
    FIRE (:func:`fire_optimizer`, ASE's defaults; the same step as :func:`fire`) moves the (N + 3, 3) array;
    its step is capped at ``maxstep`` in the norm of the whole array, as ASE's FIRE does.

    Convergence, tested before each step as in ASE: the largest row norm of the (N + 3, 3) generalised
    forces is below ``fmax`` (ASE's criterion on the filter; a cell row of size ≈ |σ|·V/N, so
    ``fmax`` = 0.02 eV/Å bounds the stress at about 0.02/(V/N) eV/Å³, ≈ 0.27 GPa for Cu), and, if
    ``smax`` (eV/Å³) is given, max |σ_ij + p δ_ij| below ``smax`` as well (an explicit stress criterion,
    which ASE does not have; use it before computing elastic constants).

    Args:
      model: the potential (forces and stress outputs are used as they are, direct heads included).
      s: a structure periodic along all three axes; unbatched (use ``jax.vmap`` over a stacked batch).
      fmax: force threshold in eV/Å on the filter's generalised forces.
      smax: optional stress threshold in eV/Å³.
      max_steps: step cap (the paper's 500).
      mask: which Voigt components (xx yy zz yz xz xy) of the cell deformation relax, (6,) bools or 0/1
        (may be traced); ``None`` = all.  Masked components of the cell force and of log 𝔽 stay zero.  All
        False gives a fixed-cell FIRE of the positions, step for step :func:`fire`, that also returns the
        stress.  (ASE masks the virial and 𝔽 − I instead of log 𝔽; the two agree for masks that are all
        True or all False and for diagonal cells with diagonal masks.)
      scalar_pressure: applied pressure p in eV/Å³ (enthalpy E + pV; ASE's ``scalar_pressure``).
      exp_cell_factor: c above; ``None`` = the number of real atoms.
      image_margin: relative margin of the static periodic image count over the cutoff, set on a concrete
        input before the loop so that a cell that shrinks while it relaxes keeps every neighbour (outputs
        turn NaN, and ``converged`` False, if it shrinks beyond it).
      dt_start, dt_max, maxstep, n_min, f_inc, f_dec, a_start, f_a: FIRE parameters (ASE's defaults).

    Returns:
      :class:`CellRelaxResult`.
    """
    if s.positions.ndim == 2 and not all(s.pbc):
        raise ValueError(f"s: relax_cell needs a cell periodic along all three axes, got pbc={s.pbc}")
    if is_concrete(s.cell) and is_concrete(s.numbers):
        rc = model.cutoff_for(s)
        if rc is not None:
            s = with_images(s, rc, margin=image_margin)
    s = model.prepare(s)
    params = model.params
    h0 = s.cell
    dtype = s.positions.dtype
    n = s.n_atoms
    real = s.mask.astype(dtype)
    c = jnp.sum(real) if exp_cell_factor is None else jnp.asarray(exp_cell_factor, dtype)
    eye = jnp.eye(3, dtype=dtype)
    if mask is None:
        m3 = jnp.ones((3, 3), dtype)
    else:
        mv = jnp.asarray(mask).astype(dtype).reshape(6)
        m3 = jnp.stack([jnp.stack([mv[0], mv[5], mv[4]]), jnp.stack([mv[5], mv[1], mv[3]]),
                        jnp.stack([mv[4], mv[3], mv[2]])])

    def geometry(x, X):
        Fd = _expm3(X / c)
        return s.replace(positions=x @ Fd.T, cell=h0 @ Fd.T), Fd

    def generalised_forces(x, X):
        st, Fd = geometry(x, X)
        f, sigma = _forces_and_stress(model, params, st)
        W = -jnp.abs(det3(st.cell)) * (sigma + scalar_pressure * eye)
        U = (W * m3) @ inv3(Fd.T)
        _, pullback = jax.vjp(_expm3, X / c)
        gX = pullback(U)[0] * m3 / c
        return jnp.concatenate([(f @ Fd) * real[:, None], gX]), sigma

    def measure(G, sigma):
        fm = _fmax(G)
        sm = jnp.max(jnp.abs(sigma + scalar_pressure * eye))
        ok = fm < fmax
        if smax is not None:
            ok = ok & (sm < smax)
        return fm, sm, ok

    opt = fire_optimizer(dt_start, dt_max, maxstep, n_min, f_inc, f_dec, a_start, f_a)

    def cond(c_):
        y, G, sigma, state, k = c_
        go = ~measure(G, sigma)[2] & (k < max_steps) & jnp.all(jnp.isfinite(G))
        return (k < 0) | go

    def body(c_):
        # Iteration k = -1 only evaluates the starting point (G = 0 there, so the step is zero): one copy of
        # the model in the compiled loop instead of two (a start-up evaluation outside it).
        y, G, sigma, state, k = c_
        y, state = opt.step(y, G, state, k <= 0)  # k <= 0: ASE's first step (no mixing, no dt/α update)
        G, sigma = generalised_forces(y[:n], y[n:])
        return y, G, sigma, state, k + 1

    y0 = jnp.concatenate([s.positions, jnp.zeros((3, 3), dtype)])
    init = (y0, jnp.zeros_like(y0), jnp.zeros((3, 3), dtype), opt.init(y0), jnp.asarray(-1))
    y, G, sigma, _, k = jax.lax.while_loop(cond, body, init)
    fm, sm, ok = measure(G, sigma)
    st, _ = geometry(y[:n], y[n:])
    return CellRelaxResult(st, fm, sm, sigma, k, ok)


def with_fixed_atoms(model: Model, movable: jax.Array) -> Model:
    """``model`` with its forces zeroed on atoms where ``movable`` (N,) is 0: relaxing it keeps those atoms fixed
    (e.g. a slab's bottom layers).  Energy-only calls see the model unchanged; no stress output."""

    def forces_fn(params: dict, s: Structure) -> jax.Array:
        return model.forces_of(params["inner"], s) * params["movable"][:, None].astype(s.positions.dtype)

    return Model(energy_fn=lambda p, s: model.energy_fn(p["inner"], s), forces_fn=forces_fn,
                 params={"inner": model.params, "movable": movable}, name=model.name, cutoff=model.cutoff,
                 elements=model.elements, stress_available=False)


#: The fixed-cell relaxations by name (each ``f(model, s, fmax=, max_steps=, **options)``); the attack pipeline's
#: ``PipelineConfig.optimizer`` chooses among them.
FIXED_CELL_RELAXERS = {"fire": fire, "lbfgs": lbfgs, "bfgs": bfgs}
#: The relaxations of :func:`relax` and :func:`relax_batch`, by name: the fixed-cell ones and ``"cell"``
#: (:func:`relax_cell`, positions and cell).
RELAXERS = {**FIXED_CELL_RELAXERS, "cell": relax_cell}


def relax(model: Model, s: Structure, *, fmax: Any, max_steps: Any, optimizer: str = "fire",
          **options: Any) -> RelaxResult | CellRelaxResult:
    """Relax one structure with the named relaxer of :data:`RELAXERS` (``options``: its further keywords)."""
    return RELAXERS[optimizer](model, s, fmax=fmax, max_steps=max_steps, **options)


def relax_batch(model: Model, batch: Structure, *, fmax: Any, max_steps: Any, optimizer: str = "fire",
                movable: Any = None, max_batch: int | None = None, **options: Any) -> RelaxResult | CellRelaxResult:
    """Relax every structure of a stacked batch in one vmapped program: the one batched driver of jaxcert
    (the attack pipeline, the detective's committee and the controls' cell relaxations all call it).

    Args:
      model: the potential.
      batch: a stacked :class:`Structure` (leading batch axis).
      fmax, max_steps: the relaxer's convergence threshold (eV/Å) and step cap; may be traced (except
        ``max_steps`` for ``"lbfgs"``, whose history length it sets).
      optimizer: a key of :data:`RELAXERS`: ``"fire"``, ``"lbfgs"``, ``"bfgs"`` (fixed cell) or ``"cell"``
        (:func:`relax_cell`, positions and cell).
      movable: optional (B, N) 0/1 per structure and atom: atoms at 0 are held fixed (:func:`with_fixed_atoms`).
      max_batch: chunk the batch to at most this many structures at once (:func:`jaxcert.core.batching.vmap`;
        ``None`` = one plain ``jax.vmap``).
      options: further keywords of the relaxer (e.g. ``smax`` of :func:`relax_cell`).

    Returns:
      The relaxer's result (:class:`RelaxResult` or :class:`CellRelaxResult`) with the batch axis leading.
      Pure and jittable; on the host, wrap it in :func:`jaxcert.core.neighbors.rerun_on_overflow` to answer an
      overflowed neighbour list (as :func:`jaxcert.attacks.pipeline.relax_batch` does).
    """
    if optimizer not in RELAXERS:
        raise ValueError(f"optimizer: got {optimizer!r}; allowed: {', '.join(RELAXERS)}")
    kw = dict(fmax=fmax, max_steps=max_steps, optimizer=optimizer, **options)
    if movable is None:
        return batching.vmap(lambda s: relax(model, s, **kw), max_batch)(batch)
    return batching.vmap(lambda mov, s: relax(with_fixed_atoms(model, mov), s, **kw), max_batch)(movable, batch)
