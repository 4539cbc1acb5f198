import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# The CLI enables a persistent compilation cache in ~/.cache; tests stay hermetic without it (a per-session
# cache was measured to save nothing here: the suite's programs differ).
os.environ["JAXCERT_CACHE_DIR"] = "off"

import gc  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

#: Per-dtype tolerances used across the tests (round-off floors measured in the suite).
TOL = {jnp.float32: 2e-4, jnp.float64: 1e-10}


@pytest.fixture(params=[jnp.float32, jnp.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop every compiled XLA program after each test module.

    Each CPU executable holds a few memory mappings; one process running the whole suite accumulated about
    2,500 per minute and crossed Linux's ``vm.max_map_count`` (65,530) about 27 minutes in, where the next
    compilation segfaulted inside XLA (two CI runs, exit 139). Clearing the caches returns the mappings
    (measured: 1,401 -> 517 after 300 programs), at the price of recompiling what a later module shares.
    """
    yield
    jax.clear_caches()
    gc.collect()


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
