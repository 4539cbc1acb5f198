"""Small geometry helpers shared by structure, neighbors, model and derivatives (``docs/architecture.md``).

Everything here is a leaf: it imports only JAX and NumPy, so every other module can use it
without an import cycle.

* :func:`det3`, :func:`inv3` — determinant and inverse of (…, 3, 3) matrices by cross
  products (no LAPACK call: cheap to compile and differentiable everywhere the cell is regular).
* :func:`plane_spacings` — the distances between lattice planes, V/|b×c| etc. (host side).
* :func:`is_concrete` — True for a concrete array, False for a tracer (static decisions
  such as image counts can only be taken on concrete values).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["det3", "inv3", "plane_spacings", "is_concrete"]


def det3(h: jax.Array) -> jax.Array:
    """Determinant of (…, 3, 3) by the triple product a·(b×c) (no LAPACK call; cheap to compile)."""
    return jnp.sum(h[..., 0, :] * jnp.cross(h[..., 1, :], h[..., 2, :]), axis=-1)


def inv3(h: jax.Array) -> jax.Array:
    """Inverse of (…, 3, 3) from cross products: columns b×c, c×a, a×b over det."""
    a, b, c = h[..., 0, :], h[..., 1, :], h[..., 2, :]
    adj = jnp.stack([jnp.cross(b, c), jnp.cross(c, a), jnp.cross(a, b)], axis=-1)
    return adj / det3(h)[..., None, None]


def plane_spacings(cell: np.ndarray) -> np.ndarray:
    """Spacing of the lattice planes normal to each reciprocal axis, d_a = V/|b×c| (Å), host side."""
    cell = np.asarray(cell, float)
    vol = abs(np.linalg.det(cell))
    out = np.empty(3)
    for a in range(3):
        b, c = cell[(a + 1) % 3], cell[(a + 2) % 3]
        out[a] = vol / max(np.linalg.norm(np.cross(b, c)), 1e-300)
    return out


def is_concrete(x: Any) -> bool:
    """True unless ``x`` is a JAX tracer (inside jit/vmap/grad its value is unknown)."""
    return not isinstance(x, jax.core.Tracer)
