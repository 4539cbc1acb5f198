"""Helpers shared by the analytic models: species tables and pair sums."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcert.core.elements import MAX_Z
from jaxcert.core.neighbors import Pairs

N_Z = MAX_Z + 1


def presence(numbers: jax.Array, mask: jax.Array, dtype) -> jax.Array:
    """(N_Z,) 1.0 for each species present among the real atoms."""
    return jnp.zeros(N_Z, dtype).at[numbers].max(mask.astype(dtype))


def pair_sum(phi: jax.Array, p: Pairs) -> jax.Array:
    """½ Σ_i Σ_j φ_ij over real pairs (each unordered pair once)."""
    return 0.5 * jnp.sum(jnp.where(p.mask, phi, 0.0))
