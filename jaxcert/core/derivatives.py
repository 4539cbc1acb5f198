r"""Derivatives of a model's outputs: exact (autodiff) and finite-difference engines.

Both engines implement the same methods, so every probe runs on either:

=========================  ==========================================  ======================
method                     quantity                                    shape
=========================  ==========================================  ======================
``force_jvp(m, s, v)``     J·v, J = ∂F/∂R of the *force output*        (n, 3) eV/Å²·Å
``hvp(m, s, v)``           H·v = −J·v                                  (n, 3)
``force_jacobian(m, s)``   J                                           (n, 3, n, 3) eV/Å²
``hessian(m, s)``          H = −J                                      (n, 3, n, 3)
``hutchinson_trace``       E_z[zᵀHz], Rademacher z                     () eV/Å²
``stress_position(m, s)``  V ∂σ_m/∂R (Voigt m)                          (6, n, 3) eV/Å
``force_strain(m, s)``     ∂F/∂γ_m, engineering Voigt strain γ         (n, 3, 6) eV/Å
``stress_strain(m, s)``    B = ∂σ_m/∂γ_n                               (6, 6) eV/Å³
``energy_strain(m, s)``    (1/V) ∂E/∂γ  (stress from the energy)       (6,) eV/Å³
``bond_scan(m, s, i, j,``  E, −dE/ds and F_j·û along the bond i→j,     (k,) each
``offsets)``               atom j moved by s û
=========================  ==========================================  ======================

Strain convention (docs/probes.md §1.2): γ ↦ ε = [[γ₁, γ₆/2, γ₅/2], [γ₆/2, γ₂, γ₄/2],
[γ₅/2, γ₄/2, γ₃]], 𝔽 = I + ε, cell h' = h𝔽ᵀ, positions r' = 𝔽r, so that
∂E/∂γ_m = Vσ_m for all six components.

As docs/probes.md §1.4 requires, Jacobians are taken of the *force output* (a direct
force head is differentiated as it is) and of the *stress output*; the energy is
differentiated only for the energy-vs-force and energy-vs-stress comparisons.

The finite-difference engine uses central differences of order 2 or 4 with the
dtype-aware step of docs/probes.md §1.5: ``fd_step = max(1e-3, (10 ε_mach)^{1/(o+a)})``
(exactly 1e-3 Å in float64).  A directional derivative along v takes a physical
step of exactly ``step`` Å along v/‖v‖ and rescales by ‖v‖.  Its ``bond_scan`` takes
``on_grid=True`` for the reference recipe of the conservativeness probe: the 5-point
stencil on the energies of the (uniform) scan grid itself, one evaluation per point.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import batching
from jaxcert.core.cache import register_storable
from jaxcert.core.geometry import det3
from jaxcert.core.model import Model, strain, voigt
from jaxcert.core.structure import Structure

__all__ = [
    "Engine", "Exact", "FiniteDifference", "EXACT", "fd_step", "voigt_strain",
    "force_jvp", "hvp", "force_jacobian", "hessian", "hutchinson_trace",
    "stress_position", "force_strain", "stress_strain", "energy_strain", "bond_scan", "derivative_on_grid",
]

FD_MIN_STEP = 1e-3
FD_NOISE_AMPLIFICATION = 10.0


def fd_step(order: int, accuracy: int, dtype: Any = jnp.float64, scale: float = 1.0) -> float:
    """Precision-aware FD step (docs/probes.md §1.5): max(1e-3·scale, scale·(10 ε_mach)^(1/(order+accuracy)))."""
    eps = float(np.finfo(np.dtype(dtype)).eps)
    return max(FD_MIN_STEP * scale, scale * (FD_NOISE_AMPLIFICATION * eps) ** (1.0 / (order + accuracy)))


def voigt_strain(gamma: jax.Array) -> jax.Array:
    """Engineering Voigt strain (6,) → symmetric strain tensor (3, 3) (docs/probes.md §1.2)."""
    g1, g2, g3, g4, g5, g6 = (gamma[k] for k in range(6))
    return jnp.stack([
        jnp.stack([g1, g6 / 2, g5 / 2]),
        jnp.stack([g6 / 2, g2, g4 / 2]),
        jnp.stack([g5 / 2, g4 / 2, g3]),
    ])


def _strained(s: Structure, gamma: jax.Array) -> Structure:
    return strain(s, voigt_strain(gamma))


def _stress_voigt(model: Model, params: Any, s: Structure) -> jax.Array:
    return voigt(model.stress_of(params, s))


def _unit(s: Structure, i: int, j: int) -> jax.Array:
    d = s.positions[j] - s.positions[i]
    return d / jnp.linalg.norm(d)


def _rademacher(key: jax.Array, s: Structure, n: int) -> jax.Array:
    z = jax.random.rademacher(key, (n, *s.positions.shape), dtype=s.positions.dtype)
    return z * s.mask[None, :, None].astype(z.dtype)


def _jitted(method):
    """Jit an engine method (engine static); ``model.prepare`` runs outside the trace.

    Eager op-by-op execution compiles every primitive separately (slow on CPU);
    one compiled program per (engine, model, shapes) is reused across calls.
    """
    static = tuple(a for a in ("n_samples", "on_grid") if a in inspect.signature(method).parameters)
    compiled = jax.jit(method, static_argnums=(0,), static_argnames=static)

    @functools.wraps(method)
    def wrapper(self, model: Model, s: Structure, *args: Any, **kw: Any):
        if "n_samples" in static and len(args) >= 2:  # n_samples given positionally: pass by name (static)
            args, kw = args[:1], {**kw, "n_samples": args[1]}
        return compiled(self, model, model.prepare(s), *args, **kw)

    return wrapper


@runtime_checkable
class Engine(Protocol):
    """What a derivative engine provides (implemented by :class:`Exact` and :class:`FiniteDifference`).

    Besides the derivative methods of the module table, an engine answers two questions about itself,
    as a diffrax solver answers ``order()``: what a derivative costs in model evaluations
    (:meth:`cost`, for the probes' ``n_evals`` accounting) and which finite-difference step it takes
    on a structure (:meth:`step`, 0.0 for autodiff; recorded in the probes' details).
    """

    name: str

    @property
    def exact(self) -> bool:
        """True for autodiff (no truncation error, no step)."""
        ...

    def cost(self, columns: int = 1, *, exact_cost: int | None = None) -> int:
        """Model-evaluation equivalents of ``columns`` directional-derivative columns.

        Autodiff: one evaluation per column (a jvp), or ``exact_cost`` when one reverse pass gives all
        columns at once (a gradient); central differences: ``order`` evaluations per column.
        """
        ...

    def step(self, s: Structure) -> float:
        """The finite-difference step on ``s`` in Å (or strain units); 0.0 for autodiff."""
        ...

    def force_jvp(self, model: Model, s: Structure, v: jax.Array) -> jax.Array: ...
    def hvp(self, model: Model, s: Structure, v: jax.Array) -> jax.Array: ...
    def force_jacobian(self, model: Model, s: Structure) -> jax.Array: ...
    def hessian(self, model: Model, s: Structure) -> jax.Array: ...
    def hutchinson_trace(self, model: Model, s: Structure, key: jax.Array, n_samples: int = 4) -> jax.Array: ...
    def stress_position(self, model: Model, s: Structure) -> jax.Array: ...
    def force_strain(self, model: Model, s: Structure) -> jax.Array: ...
    def stress_strain(self, model: Model, s: Structure) -> jax.Array: ...
    def energy_strain(self, model: Model, s: Structure) -> jax.Array: ...
    def bond_scan(self, model: Model, s: Structure, i: int, j: int, offsets: jax.Array): ...


@dataclasses.dataclass(frozen=True)
class Exact:
    """Autodiff engine: jvp for J·v, jacfwd for dense Jacobians, grad w.r.t. strain."""

    name: str = "exact"

    @property
    def exact(self) -> bool:
        return True

    def cost(self, columns: int = 1, *, exact_cost: int | None = None) -> int:
        """One evaluation per jvp column, or ``exact_cost`` for a single reverse pass (see :class:`Engine`)."""
        return int(columns if exact_cost is None else exact_cost)

    def step(self, s: Structure) -> float:
        """0.0: autodiff takes no step."""
        return 0.0

    @_jitted
    def force_jvp(self, model: Model, s: Structure, v: jax.Array) -> jax.Array:
        s = model.prepare(s)
        f = lambda R: model.forces_of(model.params, s.replace(positions=R))  # noqa: E731
        return jax.jvp(f, (s.positions,), (v.astype(s.positions.dtype),))[1]

    @_jitted
    def hvp(self, model: Model, s: Structure, v: jax.Array) -> jax.Array:
        return -self.force_jvp(model, s, v)

    @_jitted
    def force_jacobian(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        forces = lambda R: model.forces_of(model.params, s.replace(positions=R))  # noqa: E731
        return batching.jacfwd(forces, model.max_batch)(s.positions)

    @_jitted
    def hessian(self, model: Model, s: Structure) -> jax.Array:
        return -self.force_jacobian(model, s)

    @_jitted
    def hutchinson_trace(self, model: Model, s: Structure, key: jax.Array, n_samples: int = 4) -> jax.Array:
        z = _rademacher(key, s, n_samples)
        hz = batching.vmap(lambda zi: self.hvp(model, s, zi), model.max_batch)(z)
        return jnp.mean(jnp.sum(z * hz, axis=(1, 2)))

    @_jitted
    def stress_position(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        V = jnp.abs(det3(s.cell))
        jac = batching.jacfwd(lambda R: _stress_voigt(model, model.params, s.replace(positions=R)),
                              model.max_batch)(s.positions)
        return V * jac

    @_jitted
    def force_strain(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        zero = jnp.zeros(6, s.positions.dtype)
        return batching.jacfwd(lambda g: model.forces_of(model.params, _strained(s, g)), model.max_batch)(zero)

    @_jitted
    def stress_strain(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        zero = jnp.zeros(6, s.positions.dtype)
        return batching.jacfwd(lambda g: _stress_voigt(model, model.params, _strained(s, g)), model.max_batch)(zero)

    @_jitted
    def energy_strain(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        zero = jnp.zeros(6, s.positions.dtype)
        g = jax.grad(lambda g: model.energy_of(model.params, _strained(s, g)))(zero)
        return g / jnp.abs(det3(s.cell))

    @_jitted
    def bond_scan(self, model: Model, s: Structure, i: int, j: int, offsets: jax.Array):
        """Returns (E_k eV, −dE/ds_k eV/Å, F_j·û eV/Å) at atom j displaced by s_k û."""
        s = model.prepare(s)
        u = _unit(s, i, j)
        tangent = jnp.zeros_like(s.positions).at[j].set(u)

        def one(off):
            R = s.positions.at[j].add(off * u)
            e = lambda R: model.energy_of(model.params, s.replace(positions=R))  # noqa: E731
            E, dE = jax.jvp(e, (R,), (tangent,))
            F = model.forces_of(model.params, s.replace(positions=R))
            return E, -dE, F[j] @ u

        return batching.vmap(one, model.max_batch)(jnp.asarray(offsets, s.positions.dtype))


def _central(f, x0: jax.Array, direction: jax.Array, h: float, order: int) -> Any:
    """Central difference of f (array- or pytree-valued) along ``direction`` (unit step h)."""
    def at(t):
        return f(x0 + t * direction)

    if order == 2:
        return jax.tree.map(lambda a, b: (a - b) / (2 * h), at(h), at(-h))
    if order == 4:
        return jax.tree.map(lambda a, b, c, d: (-a + 8 * b - 8 * c + d) / (12 * h),
                            at(2 * h), at(h), at(-h), at(-2 * h))
    raise ValueError(f"finite-difference order must be 2 or 4, got {order}")


@dataclasses.dataclass(frozen=True)
class FiniteDifference:
    """Central finite differences of the model's outputs (bridges, cross-checks).

    Attributes:
      order: 2 or 4 (truncation error O(h²) or O(h⁴)).
      step_size: Å (or dimensionless strain); ``None`` = :func:`fd_step` for the dtype.
    """

    order: int = 2
    step_size: float | None = None
    name: str = "fd"

    def __post_init__(self) -> None:
        if self.order not in (2, 4):
            raise ValueError(f"FiniteDifference.order must be 2 or 4, got {self.order!r}")
        if self.step_size is not None and not (np.isfinite(self.step_size) and self.step_size > 0):
            raise ValueError(f"FiniteDifference.step_size must be a positive finite number, got {self.step_size!r}")

    @property
    def exact(self) -> bool:
        return False

    def cost(self, columns: int = 1, *, exact_cost: int | None = None) -> int:
        """``order`` evaluations per column (central stencil; see :class:`Engine`)."""
        return int(columns) * int(self.order)

    def step(self, s: Structure) -> float:
        """The step in Å on ``s``: ``step_size``, or :func:`fd_step` for its dtype."""
        return float(self.h(s))

    def h(self, s: Structure) -> float:
        return self.step_size if self.step_size is not None else fd_step(1, 2, s.positions.dtype)

    @_jitted
    def force_jvp(self, model: Model, s: Structure, v: jax.Array) -> jax.Array:
        s = model.prepare(s)
        v = v.astype(s.positions.dtype)
        nv = jnp.linalg.norm(v)
        u = v / jnp.where(nv > 0, nv, 1.0)
        f = lambda R: model.forces_of(model.params, s.replace(positions=R))  # noqa: E731
        return nv * _central(f, s.positions, u, self.h(s), self.order)

    @_jitted
    def hvp(self, model: Model, s: Structure, v: jax.Array) -> jax.Array:
        return -self.force_jvp(model, s, v)

    @_jitted
    def force_jacobian(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        n = s.n_atoms
        basis = jnp.eye(3 * n, dtype=s.positions.dtype).reshape(3 * n, n, 3)
        cols = jax.lax.map(lambda e: self.force_jvp(model, s, e), basis)  # (3n, n, 3)
        return jnp.moveaxis(cols.reshape(n, 3, n, 3), (0, 1), (2, 3))

    @_jitted
    def hessian(self, model: Model, s: Structure) -> jax.Array:
        return -self.force_jacobian(model, s)

    @_jitted
    def hutchinson_trace(self, model: Model, s: Structure, key: jax.Array, n_samples: int = 4) -> jax.Array:
        z = _rademacher(key, s, n_samples)
        hz = jax.lax.map(lambda zi: self.hvp(model, s, zi), z)
        return jnp.mean(jnp.sum(z * hz, axis=(1, 2)))

    @_jitted
    def stress_position(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        n = s.n_atoms
        V = jnp.abs(det3(s.cell))
        basis = jnp.eye(3 * n, dtype=s.positions.dtype).reshape(3 * n, n, 3)
        f = lambda R: _stress_voigt(model, model.params, s.replace(positions=R))  # noqa: E731
        cols = jax.lax.map(lambda e: _central(f, s.positions, e, self.h(s), self.order), basis)  # (3n, 6)
        return V * cols.T.reshape(6, n, 3)

    def _strain_columns(self, s: Structure, f) -> jax.Array:
        basis = jnp.eye(6, dtype=s.positions.dtype)
        zero = jnp.zeros(6, s.positions.dtype)
        return jax.lax.map(lambda e: _central(f, zero, e, self.h(s), self.order), basis)

    @_jitted
    def force_strain(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        cols = self._strain_columns(s, lambda g: model.forces_of(model.params, _strained(s, g)))
        return jnp.moveaxis(cols, 0, -1)

    @_jitted
    def stress_strain(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        cols = self._strain_columns(s, lambda g: _stress_voigt(model, model.params, _strained(s, g)))
        return cols.T

    @_jitted
    def energy_strain(self, model: Model, s: Structure) -> jax.Array:
        s = model.prepare(s)
        cols = self._strain_columns(s, lambda g: model.energy_of(model.params, _strained(s, g)))
        return cols / jnp.abs(det3(s.cell))

    @_jitted
    def bond_scan(self, model: Model, s: Structure, i: int, j: int, offsets: jax.Array, *, on_grid: bool = False):
        """As :meth:`Exact.bond_scan`, with −dE/ds from a central difference of E.

        By default a stencil of ``order`` points and step ``h`` around each offset.  With ``on_grid`` (static)
        the reference recipe of the conservativeness probe (docs/probes.md §4.6): ``offsets`` is a uniform grid
        of at least 5 points, E and F_j·û are evaluated once per point (chunked by ``model.max_batch``) and
        −dE/ds is the 4th-order 5-point stencil on the grid's own energies (step = the grid spacing, whatever
        ``order``), NaN at the two points at each end.
        """
        s = model.prepare(s)
        u = _unit(s, i, j)
        if on_grid:
            return _bond_scan_on_grid(model, s, j, u, jnp.asarray(offsets, s.positions.dtype))
        h = self.h(s)
        e = lambda off: model.energy_of(model.params, s.replace(positions=s.positions.at[j].add(off * u)))  # noqa: E731

        def one(off):
            E = e(off)
            dE = _central(e, off, jnp.ones((), off.dtype), h, self.order)
            F = model.forces_of(model.params, s.replace(positions=s.positions.at[j].add(off * u)))
            return E, -dE, F[j] @ u

        return jax.lax.map(one, jnp.asarray(offsets, s.positions.dtype))


def derivative_on_grid(y: jax.Array, h: Any) -> jax.Array:
    """dy/ds of samples ``y`` (M ≥ 5) on a uniform grid of spacing ``h``: the 4th-order 5-point stencil
    (y_{k−2} − 8y_{k−1} + 8y_{k+1} − y_{k+2})/(12h) at the M − 4 interior points, NaN at the two points at
    each end.  The one on-grid stencil of jaxcert: it reuses the grid's own samples, so it costs no evaluation
    beyond them (the reference recipe of the conservativeness probe, docs/probes.md §4.6)."""
    d_in = (y[:-4] - 8 * y[1:-3] + 8 * y[3:-1] - y[4:]) / (12 * h)
    nan2 = jnp.full((2,), jnp.nan, y.dtype)
    return jnp.concatenate([nan2, d_in, nan2])


def _bond_scan_on_grid(model: Model, s: Structure, j: Any, u: jax.Array, grid: jax.Array):
    """(E, −dE/ds, F_j·û) on a uniform grid, −dE/ds by :func:`derivative_on_grid` (NaN at the ends)."""
    h = grid[1] - grid[0]

    def one(off):
        st = s.replace(positions=s.positions.at[j].add(off * u))
        E, F = model.energy_of(model.params, st), model.forces_of(model.params, st)
        return E, F[j] @ u

    E, p = batching.vmap(one, model.max_batch)(grid)
    return E, -derivative_on_grid(E, h), p


EXACT = Exact()
# engines travel as static data of stored programs' requests (jaxcert/core/cache.py)
register_storable(Exact, value=True)
register_storable(FiniteDifference, value=True)

force_jvp = EXACT.force_jvp
hvp = EXACT.hvp
force_jacobian = EXACT.force_jacobian
hessian = EXACT.hessian
hutchinson_trace = EXACT.hutchinson_trace
stress_position = EXACT.stress_position
force_strain = EXACT.force_strain
stress_strain = EXACT.stress_strain
energy_strain = EXACT.energy_strain
bond_scan = EXACT.bond_scan
