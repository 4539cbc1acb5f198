"""The machinery every defect shares (docs/probes.md §8.2): length knobs (:class:`Length`, in Å or
relative to the reference nearest-neighbour distance), the model wrapper :func:`wrap` that keeps the
force and stress heads the exact derivatives of an energy term, :func:`with_knobs`, and small
geometric helpers. The conventions are stated in :mod:`jaxcert.models.defects`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.elements import d_nn
from jaxcert.core.geometry import det3
from jaxcert.core.model import Model, strain
from jaxcert.core.neighbors import Pairs, pairs
from jaxcert.core.structure import Structure
from jaxcert.models._common import N_Z, presence

__all__ = ["Length", "wrap", "with_knobs", "pairs_within", "poly_cutoff", "atom_mask", "unit", "centroid", "fmt"]


@functools.lru_cache(maxsize=1)
def _dnn_table() -> np.ndarray:
    """(N_Z,) reference nearest-neighbour distance d_nn(Z) in Å (shared cache with the reference LJ)."""
    table = np.ones(N_Z)
    for z in range(1, N_Z):
        table[z] = d_nn(z)
    return table


class Length:
    """A length knob: ``value`` Å, or ``value``·d_nn(species) when ``relative`` (static flag)."""

    def __init__(self, value: float | None, default_rel: float, name: str):
        self.relative = value is None
        self.value = float(default_rel if value is None else value)
        self.name = name
        if self.value <= 0:
            raise ValueError(f"{name} must be positive, got {self.value}")

    def leaf(self) -> jax.Array:
        return jnp.asarray(self.value)

    def of(self, leaf: jax.Array, s: Structure) -> jax.Array:
        """The length in Å for structure ``s`` (traceable)."""
        dt = s.positions.dtype
        if not self.relative:
            return leaf.astype(dt)
        pres = presence(s.numbers, s.mask, dt)
        dnn = jnp.sum(pres * jnp.asarray(_dnn_table(), dt)) / jnp.sum(pres)
        return leaf.astype(dt) * dnn

    def numeric(self, numbers: np.ndarray) -> float:
        """The length in Å for concrete atomic numbers (sizes periodic images)."""
        if not self.relative:
            return self.value
        z = np.unique(np.asarray(numbers))
        return self.value * float(np.mean(_dnn_table()[z]))

    def cutoff(self, factor: float = 1.0) -> float | Callable[[np.ndarray], float]:
        """``factor`` × the length, as a Model cutoff (a callable of the numbers when relative)."""
        if not self.relative:
            return factor * self.value
        return lambda numbers: factor * self.numeric(numbers)


def _combine_cutoff(a: Any, b: Any) -> Any:
    """The larger of two Model cutoffs (floats, callables of the numbers, or None)."""
    if a is None:
        return b
    if b is None:
        return a
    if not callable(a) and not callable(b):
        return max(float(a), float(b))

    def cutoff(numbers: np.ndarray) -> float:
        return max(float(c(numbers)) if callable(c) else float(c) for c in (a, b))

    return cutoff


def pairs_within(s: Structure, rc: jax.Array) -> Pairs:
    # the cutoff only sizes images and checks their coverage: a constant is enough
    return pairs(s, jax.lax.stop_gradient(rc))


def poly_cutoff(p: Pairs, rc: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(x = r/r_c, (1 − x²)³ inside the cutoff else 0): a C² radial window on real pairs."""
    x = p.r / rc
    inside = p.mask & (x < 1.0)
    return x, jnp.where(inside, (1.0 - x * x) ** 3, 0.0)


def atom_mask(s: Structure) -> jax.Array:
    return s.mask.astype(s.positions.dtype)


def unit(axis: jax.Array, dt: Any) -> jax.Array:
    axis = axis.astype(dt)
    return axis / jnp.linalg.norm(axis)


def centroid(s: Structure) -> jax.Array:
    m = atom_mask(s)
    return jnp.sum(s.positions * m[:, None], axis=0) / jnp.sum(m)


def _energy_stress(fn: Callable[[Any, Structure], jax.Array], params: Any, s: Structure) -> jax.Array:
    """(1/V) ∂fn/∂ε at ε = 0 (symmetric strain), eV/Å³."""
    zero = jnp.zeros((3, 3), s.positions.dtype)
    g = jax.grad(lambda e: fn(params, strain(s, 0.5 * (e + e.T))))(zero)
    return g / jnp.abs(det3(s.cell))


def fmt(x: float) -> str:
    return f"{float(x):g}"


def wrap(
    model: Model,
    tag: str,
    knobs: dict[str, jax.Array],
    *,
    identity: str,
    energy_term: Callable[[dict, Structure], jax.Array] | None = None,
    force_term: Callable[[dict, Structure], jax.Array] | None = None,
    stress_map: Callable[[dict, Structure, jax.Array], jax.Array] | None = None,
    cutoff: Any = None,
) -> Model:
    """Build the defect model from the pieces (all callables take the full params dict)."""
    inner = model

    def energy(params: dict, s: Structure) -> jax.Array:
        E = inner.energy_fn(params["inner"], s)
        if energy_term is not None:
            E = E + energy_term(params, s)
        return E

    forces_fn = None
    if inner.forces_fn is not None or force_term is not None:

        def forces_fn(params: dict, s: Structure) -> jax.Array:
            if inner.forces_fn is None and energy_term is not None:
                F = -jax.grad(lambda R: energy(params, s.replace(positions=R)))(s.positions)
            else:
                F = inner.forces_of(params["inner"], s)
                if energy_term is not None:
                    F = F - jax.grad(lambda R: energy_term(params, s.replace(positions=R)))(s.positions)
            if force_term is not None:
                F = F + force_term(params, s)
            return F

    stress_fn = None
    if inner.stress_fn is not None or stress_map is not None:

        def stress_fn(params: dict, s: Structure) -> jax.Array:
            if inner.stress_fn is None and energy_term is not None:
                sigma = _energy_stress(energy, params, s)
            else:
                sigma = inner.stress_of(params["inner"], s)
                if energy_term is not None:
                    sigma = sigma + _energy_stress(energy_term, params, s)
            if stress_map is not None:
                sigma = stress_map(params, s, sigma)
            return sigma

    return Model(
        energy_fn=energy,
        forces_fn=forces_fn,
        stress_fn=stress_fn,
        params={"inner": inner.params, **knobs},
        name=f"{inner.name}+{tag}",
        cutoff=_combine_cutoff(inner.cutoff, cutoff),
        elements=inner.elements,
        info=(*inner.info, ("defect", tag), ("breaks", identity)),
        max_batch=inner.max_batch,
    )


def with_knobs(model: Model, **knobs: Any) -> Model:
    """The defect model with some knob leaves replaced (e.g. ``with_knobs(m, strength=0.0)``).

    Works inside ``jit``/``vmap`` (values may be traced); the static ``name`` keeps
    the construction-time value.  Unknown knob names raise ``KeyError``.
    """
    params = dict(model.params)
    for k, v in knobs.items():
        if k not in params or k == "inner":
            raise KeyError(f"{model.name!r} has no knob {k!r}; knobs: {sorted(set(params) - {'inner'})}")
        params[k] = jnp.asarray(v)
    return model.replace(params=params)
