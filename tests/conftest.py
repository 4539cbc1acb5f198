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


def pytest_ignore_collect(collection_path, config):
    """The torch-bridge tests run in their own process (tests/test_bridges.py), never beside the core suite.

    Two full runs with torch loaded in the same process as the core suite's hundreds of XLA compilations
    ended in a segmentation fault inside XLA's compiler (never reproduced in a short process); the bridges
    get a fresh process, and the core suite never imports torch.
    """
    path = str(collection_path).replace("\\", "/")
    if "/tests/bridges" in path and os.environ.get("JAXCERT_BRIDGE_PROCESS") != "1":
        return True
    return None
