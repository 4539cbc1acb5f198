import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

#: Per-dtype tolerances used across the tests (round-off floors measured in the suite).
TOL = {jnp.float32: 2e-4, jnp.float64: 1e-10}


@pytest.fixture(params=[jnp.float32, jnp.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param
