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
