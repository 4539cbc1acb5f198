"""XLA:CPU runtime settings jaxcert applies before JAX creates its CPU backend.

``--xla_cpu_multi_thread_eigen=false``: on this project's 2-core machines a full
``jaxcert certify --model lj`` over ten elements hung for good (twice in two runs,
once with and once without compile-ahead threads) while materialising the
equipartition probe's result: every XLA worker thread parked on an idle Eigen
intra-op pool, nothing running (``gdb`` stacks, load average 0).  The same wedge of
XLA:CPU's multi-threaded Eigen pool on vmapped programs is reported upstream
(PyAutoFit issue 1528/1530: 14 hangs in 16 runs with the pool, 0 in 12 without).
With the flag the same run completed.  Eigen's intra-op threads only parallelise
single large dense ops (matrix products, convolutions); jaxcert's programs are
small batched ones, so nothing measurable is lost (docs/install.md).

The flag is added to ``$XLA_FLAGS`` unless that variable already sets
``xla_cpu_multi_thread_eigen`` or ``$JAXCERT_XLA_DEFAULTS`` is ``off``.  It takes
effect only if JAX's CPU backend has not been created yet (``import jaxcert`` before
the first JAX computation, as the CLI does).  ``import jaxcert`` applies it: this
module calls :func:`apply_xla_defaults` when it is imported, first of the package.
"""

from __future__ import annotations

import os

__all__ = ["apply_xla_defaults", "EIGEN_FLAG"]

EIGEN_FLAG = "--xla_cpu_multi_thread_eigen=false"


def apply_xla_defaults() -> bool:
    """Add :data:`EIGEN_FLAG` to ``$XLA_FLAGS`` (see the module docstring); True when it was added."""
    if os.environ.get("JAXCERT_XLA_DEFAULTS", "").strip().lower() in ("off", "0", "false", "no"):
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {EIGEN_FLAG}".strip()
    return True


apply_xla_defaults()
