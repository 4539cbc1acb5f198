import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# The CLI enables a persistent compilation cache in ~/.cache; tests stay hermetic without it (a per-session
# cache was measured to save nothing here: the suite's programs differ).
os.environ["JAXCERT_CACHE_DIR"] = "off"

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

#: Per-dtype tolerances used across the tests (round-off floors measured in the suite).
TOL = {jnp.float32: 2e-4, jnp.float64: 1e-10}


@pytest.fixture(params=[jnp.float32, jnp.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param


def pytest_collection_modifyitems(config, items):
    """Run the torch-bridge tests last: the core suite runs in a process that has not loaded torch."""
    items.sort(key=lambda item: "tests/bridges/" in str(item.fspath).replace("\\", "/"))
