import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# Tests build the same models many times (new closures, identical programs): a session-wide persistent
# compilation cache turns those recompilations into loads.  A fresh directory per run keeps tests hermetic.
if os.environ.get("JAXCERT_TEST_CACHE", "1") != "0":
    import tempfile  # noqa: E402

    from jaxcert.cache import enable_compilation_cache  # noqa: E402

    os.environ["JAXCERT_CACHE_DIR"] = enable_compilation_cache(tempfile.mkdtemp(prefix="jaxcert-xla-"))

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

#: Per-dtype tolerances used across the tests (round-off floors measured in the suite).
TOL = {jnp.float32: 2e-4, jnp.float64: 1e-10}


@pytest.fixture(params=[jnp.float32, jnp.float64], ids=["f32", "f64"])
def dtype(request):
    return request.param
