"""Matrix decompositions that call LAPACK one matrix at a time on CPU (``docs/architecture.md`` §4.3).

Why: jaxlib 0.10's CPU LAPACK kernels split a *batched* decomposition (``eigh`` of a
``(B, m, m)`` array, which is what ``vmap`` over elements produces) into chunks on
XLA's intra-op thread pool and block the calling pool thread until the chunks are
done.  When the thunk executor runs as many independent batched decompositions at
once as the pool has threads (two on a 2-core machine: equipartition's Hessian
``eigh`` next to its per-frame Kabsch ``eigh``), every pool thread waits for chunks
that no thread is left to run, and the program never finishes.  jaxlib 0.11 builds
that parallel path out.

What: :func:`eigh`, :func:`eigvalsh`, :func:`svdvals` and :func:`qr` take any
leading batch dimensions and, under ``vmap`` as well, run the LAPACK routine on one
matrix per call inside a ``lax.map`` loop (``jax.custom_batching.sequential_vmap``),
so no call is batched and none waits on the pool.  Each matrix goes through the same
LAPACK routine; results agree with the batched call to round-off (bit-identical for
every probe but those that relax with BFGS first: docs/architecture.md §4.3).
:func:`eigh` and :func:`eigvalsh` carry the first-order perturbation rule as a custom
JVP written with matrix products only
(dλ_k = v_kᵀ dA v_k, dV = V (F ∘ Vᵀ dA V) with F_ij = 1/(λ_j − λ_i); the rule JAX's own
``eigh`` uses), so both forward and reverse mode work through them, as the probes that
are differentiable with a relaxation switched off need (docs/research.md).
:func:`svdvals` (dσ_k = u_kᵀ dA v_k) and :func:`qr` (JAX's QR rule, with R⁻¹ formed in the
loop) carry theirs the same way.  The matrices jaxcert decomposes are at most a few
hundred wide, so the loop costs nothing measurable next to compilation.

Where: on CPU only.  The deadlock is XLA:CPU's; on a GPU (or any platform but CPU) the four functions
are the plain batched ``jnp.linalg`` calls with JAX's own derivative rules, which cuSOLVER runs batched.
The platform is the default device's at trace time (:func:`jaxcert.core.device.on_cpu`, which documents
the limit of that choice); both forms agree to round-off, derivatives included
(tests/test_device_paths.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_batching import sequential_vmap

from jaxcert.core.device import on_cpu

__all__ = ["eigh", "eigvalsh", "svdvals", "qr"]


def _one_matrix_at_a_time(fn: Callable[[jax.Array], Any]) -> Callable[[jax.Array], Any]:
    """``fn`` of one (m, n) matrix → the same over (…, m, n), looping instead of batching."""
    one = sequential_vmap(fn)

    def apply(a: jax.Array) -> Any:
        a = jnp.asarray(a)
        batch = a.shape[:-2]
        if not batch:
            return one(a)
        out = jax.lax.map(one, a.reshape((-1,) + a.shape[-2:]))
        return jax.tree_util.tree_map(lambda y: y.reshape(batch + y.shape[1:]), out)

    return apply


def _h(x: jax.Array) -> jax.Array:
    """Conjugate transpose of the last two axes."""
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _inv_upper(r: jax.Array) -> jax.Array:
    return jax.scipy.linalg.solve_triangular(r, jnp.eye(r.shape[-1], dtype=r.dtype), lower=False)


# The one-matrix routines (lambdas: sequential_vmap passes every argument on, and jnp.linalg's keyword
# options must stay static).
_eigh_loop = _one_matrix_at_a_time(lambda a: tuple(jnp.linalg.eigh(a)))
_eigvalsh_loop = _one_matrix_at_a_time(lambda a: jnp.linalg.eigvalsh(a))
_svdvals_loop = _one_matrix_at_a_time(lambda a: jnp.linalg.svd(a, compute_uv=False))
_svd_loop = _one_matrix_at_a_time(lambda a: tuple(jnp.linalg.svd(a, full_matrices=False)))
_qr_loop = _one_matrix_at_a_time(lambda a: tuple(jnp.linalg.qr(a)))
_inv_upper_loop = _one_matrix_at_a_time(_inv_upper)


@jax.custom_jvp
def _eigh_looped(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The CPU form of :func:`eigh`."""
    return _eigh_loop(a)


@_eigh_looped.defjvp
def _eigh_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[Any, Any]:
    (a,), (da,) = primals, tangents
    w, v = _eigh_loop(a)
    da = 0.5 * (da + _h(da))  # jnp.linalg.eigh symmetrises its input
    vdv = _h(v) @ da @ v
    eye = jnp.eye(a.shape[-1], dtype=w.dtype)
    f = 1.0 / (eye + w[..., None, :] - w[..., :, None]) - eye  # F_ij = 1/(λ_j − λ_i), 0 on the diagonal
    return (w, v), (jnp.real(jnp.diagonal(vdv, axis1=-2, axis2=-1)), v @ (f * vdv))


@jax.custom_jvp
def _eigvalsh_looped(a: jax.Array) -> jax.Array:
    """The CPU form of :func:`eigvalsh`."""
    return _eigvalsh_loop(a)


@_eigvalsh_looped.defjvp
def _eigvalsh_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[Any, Any]:
    _, (dw, _) = _eigh_jvp(primals, tangents)  # dλ_k = v_kᵀ dA v_k; the vectors only for the tangent
    return _eigvalsh_loop(primals[0]), dw


@jax.custom_jvp
def _svdvals_looped(a: jax.Array) -> jax.Array:
    """The CPU form of :func:`svdvals`."""
    return _svdvals_loop(a)


@_svdvals_looped.defjvp
def _svdvals_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[Any, Any]:
    (a,), (da,) = primals, tangents
    u, _, vh = _svd_loop(a)
    ds = jnp.real(jnp.einsum("...ik,...ij,...kj->...k", jnp.conj(u), da, jnp.conj(vh)))  # u_kᴴ dA v_k
    return _svdvals_loop(a), ds


@jax.custom_jvp
def _qr_looped(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The CPU form of :func:`qr`."""
    return _qr_loop(a)


@_qr_looped.defjvp
def _qr_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[Any, Any]:
    (a,), (da,) = primals, tangents
    q, r = _qr_loop(a)
    dx_rinv = da @ _inv_upper_loop(r)
    qt_dx_rinv = _h(q) @ dx_rinv
    lower = jnp.tril(qt_dx_rinv, -1)
    do = lower - _h(lower)  # the skew-symmetric part of Qᴴ dA R⁻¹
    dq = q @ (do - qt_dx_rinv) + dx_rinv
    dr = (qt_dx_rinv - do) @ r
    return (q, r), (dq, dr)


# ------------------------------------------------------------------------------ the public functions
def eigh(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric (…, m, m); ``jnp.linalg.eigh``."""
    return _eigh_looped(a) if on_cpu() else tuple(jnp.linalg.eigh(a))


def eigvalsh(a: jax.Array) -> jax.Array:
    """Eigenvalues (ascending) of symmetric (…, m, m); ``jnp.linalg.eigvalsh``."""
    return _eigvalsh_looped(a) if on_cpu() else jnp.linalg.eigvalsh(a)


def svdvals(a: jax.Array) -> jax.Array:
    """Singular values (descending) of (…, m, n); ``jnp.linalg.svd(a, compute_uv=False)``."""
    return _svdvals_looped(a) if on_cpu() else jnp.linalg.svd(a, compute_uv=False)


def qr(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reduced QR of (…, m, n) with m ≥ n; ``jnp.linalg.qr``."""
    return _qr_looped(a) if on_cpu() else tuple(jnp.linalg.qr(a))
