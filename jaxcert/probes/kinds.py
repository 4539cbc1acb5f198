r"""What a probe asks of a model: a small, fixed set of *kinds* of model quantities (docs/architecture.md "Kinds").

A probe never calls the model directly.  It returns :class:`Request` objects; whoever runs the probe
answers them.  Called alone (:func:`answer`), a request is evaluated inline, inside the probe's own
trace, so the probe stays one pure, jittable, differentiable JAX function.  In the suite
(:mod:`jaxcert.probes.suite`) the requests of every probe are answered by one compiled program per
(model, kind, shape class), shared by all probes; the probes' own programs then hold no model at all.

=============  =====================================================  ==============================
kind           answer (per item)                                     why it exists
=============  =====================================================  ==============================
``evaluate``   :class:`EFS` (E eV, F eV/Å, σ eV/Å³ or ``None``)        every probe reads the outputs
``tangent``    :class:`EFS` of d/dt at t = 0 of the outputs at         Hessian/force-Jacobian columns,
               positions R + t·dR (``wrt="positions"``) or at the       Hutchinson probes, strain
               deformed structure (I + t·dA) (``wrt="deformation"``;    derivatives (stress from the
               :func:`jaxcert.core.model.strain`)                           energy, the Maxwell blocks)
``relax``      :class:`jaxcert.optim.relax.RelaxResult` (ASE BFGS)           probes measured at a minimum
``langevin``   :class:`jaxcert.optim.dynamics.Trajectory`                    the statistical-mechanics probes
``verlet``     :class:`jaxcert.optim.dynamics.VerletResult`                  time reversibility
=============  =====================================================  ==============================

Stress is part of every ``evaluate``/``tangent`` answer exactly when the structure is periodic and the
model has a stress (:meth:`jaxcert.Model.has_stress`), so one program per shape class serves every
probe.  A ``tangent`` carries its derivative engine (:mod:`jaxcert.core.derivatives`): autodiff gives one
exact JVP; :class:`~jaxcert.core.derivatives.FiniteDifference` the central stencil of the outputs with the
engine's step (along dR/‖dR‖ rescaled by ‖dR‖, or a step of ``h`` along dA).  A probe module may add a
kind with :func:`register` (``cross_maxwell`` adds its position-and-cell relaxation).

Batching: every array in a request's ``args`` carries ``batch_ndim`` leading axes on top of one item's
shape; the answer carries the same leading axes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import batching
from jaxcert.core.cache import register_storable
from jaxcert.core.derivatives import _central
from jaxcert.core.geometry import det3
from jaxcert.core.model import Model, _sym, strain
from jaxcert.core.model import _guard as guard
from jaxcert.core.structure import Structure
from jaxcert.optim import dynamics, relax

__all__ = ["EFS", "Request", "KINDS", "register", "answer", "evaluate", "tangent", "relaxed", "langevin",
           "verlet", "items", "outputs", "Fresh", "CHUNKED"]


class EFS(NamedTuple):
    """Energy (eV), forces (n, 3) eV/Å and stress (3, 3) eV/Å³ (``None`` where undefined), or their tangents."""

    energy: jax.Array
    forces: jax.Array
    stress: jax.Array | None


class Fresh(NamedTuple):
    """The answer to a ``langevin`` request: the trajectory and whether this request computed it.

    ``fresh`` is True when answered alone; in the suite a trajectory that an earlier probe asked for
    with the same inputs is shared (``fresh`` False), so its evaluations are charged once."""

    value: Any
    fresh: jax.Array


@jax.tree_util.register_pytree_node_class
class Request:
    """A request for model quantities of one kind (pytree: ``args`` are the children).

    Attributes:
      kind: a key of :data:`KINDS`.
      args: the item arguments (after the model), each with ``batch_ndim`` leading batch axes.
      options: static keyword arguments of the kind, as sorted ``(name, value)`` pairs (hashable).
      batch_ndim: leading batch axes of every array in ``args``.
    """

    def __init__(self, kind: str, args: tuple, options: tuple = (), batch_ndim: int = 0):
        self.kind, self.args, self.options, self.batch_ndim = kind, tuple(args), tuple(options), int(batch_ndim)

    def tree_flatten(self):
        return self.args, (self.kind, self.options, self.batch_ndim)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(aux[0], tuple(children), aux[1], aux[2])

    def __repr__(self) -> str:
        return f"Request({self.kind!r}, options={dict(self.options)}, batch_ndim={self.batch_ndim})"


def outputs(model: Model, s: Structure) -> EFS:
    """The model's outputs on one prepared structure; stress where the model has one for ``s``.

    A conservative model without heads on a periodic structure gets E, F and σ from one reverse pass of
    E((I + ε)(R), h(I + ε)ᵀ) with respect to (R, ε) at ε = 0 (the same expressions as
    :meth:`~jaxcert.Model.forces_of` and :meth:`~jaxcert.Model.energy_stress_of`, one trace of the energy
    instead of two). Otherwise the heads are called as they are."""
    if not model.has_stress(s):
        E, F = model.energy_and_forces_of(model.params, s)
        return EFS(E, F, None)
    if model.forces_fn is not None or model.stress_fn is not None:
        E, F = model.energy_and_forces_of(model.params, s)
        return EFS(E, F, model.stress_of(model.params, s))
    zero = jnp.zeros((3, 3), s.positions.dtype)
    E, (gR, gE) = jax.value_and_grad(
        lambda R, e: model.energy_of(model.params, strain(s.replace(positions=R), _sym(e))), argnums=(0, 1)
    )(s.positions, zero)
    F = guard(s, -gR * s.mask[..., None].astype(gR.dtype))
    return EFS(E, F, guard(s, gE / jnp.abs(det3(s.cell))))


def _evaluate(model: Model, s: Structure) -> EFS:
    return outputs(model, s)


def _tangent(model: Model, s: Structure, d: jax.Array, *, wrt: str, engine: Any) -> EFS:
    dt = s.positions.dtype
    d = d.astype(dt)
    if wrt == "positions":
        f = lambda R: outputs(model, s.replace(positions=R))  # noqa: E731
        x0 = s.positions
    elif wrt == "deformation":
        f = lambda A: outputs(model, strain(s, A))  # noqa: E731
        x0 = jnp.zeros((3, 3), dt)
    else:
        raise ValueError(f"tangent: wrt must be 'positions' or 'deformation', got {wrt!r}")
    if engine.exact:
        return jax.jvp(f, (x0,), (d,))[1]
    h = engine.h(s)
    if wrt == "deformation":  # a step of h along dA (dA is a unit strain direction)
        return _central(f, x0, d, h, engine.order)
    nv = jnp.linalg.norm(d)
    u = d / jnp.where(nv > 0, nv, 1.0)  # a physical step of h Å along dR/‖dR‖, rescaled by ‖dR‖
    return jax.tree.map(lambda x: nv * x, _central(f, x0, u, h, engine.order))


def _relax(model: Model, s: Structure, fmax: jax.Array, max_steps: jax.Array) -> relax.RelaxResult:
    return relax.bfgs(model, s, fmax=fmax, max_steps=max_steps)


def _langevin(model: Model, s: Structure, key: jax.Array, *, thermostat: Any, n_steps: int) -> Fresh:
    return Fresh(dynamics.langevin_trajectory(model, s, key, thermostat, n_steps=n_steps), jnp.asarray(True))


def _verlet(model: Model, s: Structure, velocities: jax.Array, *, timestep_fs: float, n_steps: int):
    return dynamics.velocity_verlet(model, s, velocities, timestep_fs, n_steps)


#: kind -> per-item function ``fn(model, *args, **options)``
KINDS: dict[str, Callable[..., Any]] = {
    "evaluate": _evaluate, "tangent": _tangent, "relax": _relax, "langevin": _langevin, "verlet": _verlet,
}


#: kinds with many small items per request: the suite evaluates them in chunks of a fixed size (one shape class)
CHUNKED: set[str] = {"evaluate", "tangent"}


def register(kind: str, fn: Callable[..., Any], *, chunked: bool = False) -> None:
    """Add a kind: ``fn(model, *args, **options)`` computes one item (pure JAX, the model's only caller).

    ``chunked``: many cheap items per request (evaluated in fixed-size chunks); otherwise a loop whose
    items run all at once (relaxations, dynamics)."""
    KINDS[kind] = fn
    if chunked:
        CHUNKED.add(kind)


def _batch_ndim(s: Structure) -> int:
    return s.positions.ndim - 2


def evaluate(s: Structure) -> Request:
    """E, F (and σ where defined) at ``s`` (any leading batch axes)."""
    return Request("evaluate", (s,), (), _batch_ndim(s))


def tangent(s: Structure, d: jax.Array, engine: Any, wrt: str = "positions") -> Request:
    """Tangent of the outputs at ``s`` along ``d``: dR (…, n, 3) or dA (…, 3, 3); ``engine`` exact or FD.

    ``s`` and ``d`` share the leading batch axes (broadcast ``s`` with :func:`items` first)."""
    nb = _batch_ndim(s)
    return Request("tangent", (s, d), (("engine", engine), ("wrt", wrt)), nb)


def relaxed(s: Structure, fmax: Any, max_steps: Any) -> Request:
    """ASE-BFGS relaxation of the positions (:func:`jaxcert.optim.relax.bfgs`); ``fmax`` eV/Å, ``max_steps``."""
    nb = _batch_ndim(s)
    shape = s.positions.shape[:nb]
    dt = s.positions.dtype
    return Request("relax", (s, jnp.broadcast_to(jnp.asarray(fmax, dt), shape),
                             jnp.broadcast_to(jnp.asarray(max_steps, jnp.int32), shape)), (), nb)


def langevin(s: Structure, key: jax.Array, thermostat: Any, n_steps: int) -> Request:
    """The Langevin trajectory of docs/probes.md §5 (:func:`jaxcert.optim.dynamics.langevin_trajectory`)."""
    return Request("langevin", (s, key), (("n_steps", int(n_steps)), ("thermostat", thermostat)), _batch_ndim(s))


def verlet(s: Structure, velocities: jax.Array, timestep_fs: float, n_steps: int) -> Request:
    """NVE velocity Verlet (:func:`jaxcert.optim.dynamics.velocity_verlet`)."""
    return Request("verlet", (s, velocities), (("n_steps", int(n_steps)), ("timestep_fs", float(timestep_fs))),
                   _batch_ndim(s))


def items(s: Structure, positions: jax.Array | None = None, **fields: Any) -> Structure:
    """``s`` repeated over the leading axes of ``positions`` (every array leaf broadcast), with those positions.

    Other per-item fields (e.g. ``mask``) may be given with the same leading axes."""
    if positions is None:
        raise ValueError("items: positions are required")
    lead = positions.shape[: positions.ndim - 2]
    out = jax.tree.map(lambda x: jnp.broadcast_to(x, lead + jnp.shape(x)), s)
    out = out.replace(positions=positions)
    for k, v in fields.items():
        out = out.replace(**{k: jnp.broadcast_to(v, lead + jnp.shape(getattr(s, k)))})
    return out


def _is_request(x: Any) -> bool:
    return isinstance(x, Request)


def answer_one(model: Model, req: Request) -> Any:
    """The answer to one request, evaluated inline (pure JAX; vmapped over its batch axes, chunked by
    ``model.max_batch``)."""
    fn = KINDS[req.kind]
    opts = dict(req.options)

    def one(*args):
        return fn(model, *args, **opts)

    nb = req.batch_ndim
    if nb == 0:
        return one(*req.args)
    leaves = jax.tree.leaves(req.args)
    lead = leaves[0].shape[:nb]
    size = int(np.prod(lead)) if lead else 1
    flat = jax.tree.map(lambda x: x.reshape((size, *x.shape[nb:])), req.args)
    out = batching.vmap(one, model.max_batch)(*flat)
    return jax.tree.map(lambda x: x.reshape((*lead, *x.shape[1:])), out)


def answer(model: Model, requests: Any) -> Any:
    """Answer every :class:`Request` in the pytree ``requests`` inline (same structure, answers in place)."""
    return jax.tree.map(lambda r: answer_one(model, r), requests, is_leaf=_is_request)


# the executable store rebuilds the output trees of stage programs and kernels (jaxcert/core/cache.py)
for _cls in (Request, EFS, Fresh, relax.RelaxResult, dynamics.VerletResult):
    register_storable(_cls, node=True)
