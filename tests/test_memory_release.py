"""Programs the suite compiles ahead of time are held by the suite alone (docs/performance.md, "Networks").

JAX keeps the lowering of every program it lowers, keyed on the trace, and the compiled executable keyed on that
lowering, so an executable compiled with ``jit(f).lower(...).compile()`` stays in memory as long as its trace does,
whatever the suite's bounded program table dropped.  After the suite compiles a program it clears those two caches
(:func:`jaxcert.core.compilation.release_compiled`) and gives the C heap's free pages back
(:func:`jaxcert.core.compilation.trim_heap`); the program it keeps still runs and gives the same answer.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import pjit
from jax._src.interpreters import pxla

from jaxcert.core import compilation
from jaxcert.probes import suite


def _program(scale: float):
    return jax.jit(lambda x: jnp.sin(x) * scale + jnp.cumsum(x))


def test_a_compiled_program_leaves_no_copy_in_jax_and_still_runs():
    run, x = _program(2.5), jnp.linspace(0.0, 1.0, 7)
    exe = suite._executable(run, (x,))
    assert pjit._pjit_lower.cache_info().currsize == 0
    assert pxla._cached_compilation.cache_info().currsize == 0
    np.testing.assert_array_equal(np.asarray(exe(x)), np.asarray(_program(2.5)(x)))


def test_without_the_release_jax_keeps_the_lowering_and_the_executable(monkeypatch):
    """Negative control: the same compile with the release switched off leaves both caches holding it."""
    monkeypatch.setattr(compilation, "release_compiled", lambda: None)
    suite._executable(_program(3.5), (jnp.linspace(0.0, 1.0, 9),))
    assert pjit._pjit_lower.cache_info().currsize >= 1
    assert pxla._cached_compilation.cache_info().currsize >= 1


def test_trim_heap_finds_glibc_here_and_returns():
    compilation.trim_heap()
    assert compilation._malloc_trim() is not None  # this Linux (glibc); elsewhere trim_heap does nothing


def test_the_hessian_in_chunks_is_jacfwd():
    """The shared trajectory's Hessian is taken n_hutchinson tangents at a time (``batching.jacfwd``: a loop with
    one body, the last chunk padded): equal to ``jax.jacfwd`` for a width that divides 3N, one that does not, and
    one beyond it."""
    from jaxcert.core import batching

    x = jnp.asarray(np.random.default_rng(0).normal(size=(13, 3)))

    def f(r):
        return jnp.sin(r) * jnp.sum(r ** 2) + jnp.roll(r, 1, axis=0) ** 3

    ref = np.asarray(jax.jacfwd(f)(x))
    for width in (3, 4, 64):
        got = np.asarray(batching.jacfwd(f, width)(x))
        assert got.shape == ref.shape == (13, 3, 13, 3)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    assert np.abs(np.asarray(batching.jacfwd(lambda r: f(r) * 1.001, 4)(x)) - ref).max() > 1e-6  # it can fail
