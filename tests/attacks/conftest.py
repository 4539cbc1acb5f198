"""Shared attack-test fixtures."""

import jax.numpy as jnp
import pytest
from ase.build import bulk

import jaxcert


@pytest.fixture(scope="module")
def sw_si():
    """Stillinger–Weber on rattled diamond Si (8 atoms) padded to 10 atoms: attacks must leave padding alone."""
    model = jaxcert.models.get("sw")
    a = bulk("Si", cubic=True)
    a.rattle(0.05, seed=1)
    s = jaxcert.Structure.from_ase(a, dtype=jnp.float64)
    s = jaxcert.unstack(model.prepare(jaxcert.stack([s], n_atoms=10)))[0]  # 8 atoms + 2 padding atoms
    return model, s
