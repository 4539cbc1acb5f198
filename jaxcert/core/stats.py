r"""Standard errors of time averages over a correlated trajectory, in pure JAX.

The statistical-mechanics probes (config_temperature, virial, equipartition) report
averages over one finite Langevin trajectory.  Successive frames are correlated, so
the i.i.d. formula s/√n understates the error by the square root of the statistical
inefficiency g = 1 + 2 Σ_{k≥1} ρ(k) (ρ the normalised autocorrelation; g = 2τ_int
in units of the frame spacing).  This module estimates errors from **blocks**:

* :func:`block_means` cuts a series of T samples into ``n_blocks`` contiguous blocks
  (sample t goes to block ⌊t·B/T⌋, so block lengths differ by at most one and no
  sample is dropped; the assignment is static, so everything jits and vmaps) and
  returns the (mask-weighted) mean of each block.
* :func:`mean_stderr` is the block standard error of the mean,

  .. math:: \widehat{\mathrm{SE}}^2(\bar x) = \frac{1}{B(B-1)} \sum_{b=1}^{B} (\bar x_b - \bar x)^2 ,

  which is unbiased once the blocks are much longer than the correlation time
  (Flyvbjerg & Petersen, J. Chem. Phys. 91, 461 (1989); :func:`blocking` gives their
  whole halving sequence, whose plateau is the answer).
* :func:`block_jackknife` estimates any smooth function θ(⟨a⟩, ⟨b⟩, …) of several
  time averages and its standard error by the **delete-one-block jackknife**
  (Quenouille 1956; Tukey 1958; for time series with blocks, Künsch, Ann. Stat. 17,
  1217 (1989)): with θ_(b) the statistic recomputed from the averages without block b,

  .. math:: \widehat{\mathrm{SE}}^2(\hat\theta) = \frac{B-1}{B} \sum_b (\theta_{(b)} - \bar\theta_{(\cdot)})^2 .

  For the plain mean with equal blocks it reduces exactly to :func:`mean_stderr`; for
  a ratio of means it is asymptotically equal to the delta method
  (:func:`ratio_stderr` offers both), and it needs no derivative of θ, so it also
  serves statistics such as a median over modes of per-mode ratios of means.

A per-sample ``mask`` (1 = use, 0 = ignore) weights the sums; a block left with no
weight is dropped from the jackknife (B is then the number of non-empty blocks).

Known limits (see ``docs/statistics.md``): the block estimate is biased low when a
block is not much longer than the correlation time (relative bias ≈ −g/L for blocks
of L frames), and with B blocks the SE itself is uncertain by ≈ 1/√(2(B − 1)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "block_index", "block_means", "mean_stderr", "naive_stderr", "block_jackknife", "Jackknife",
    "ratio_stderr", "delta_ratio_stderr", "blocking", "statistical_inefficiency", "half_drift",
]


def block_index(n_samples: int, n_blocks: int) -> np.ndarray:
    """Static block label ⌊t·B/T⌋ of each of T samples (numpy int array of shape (T,))."""
    if n_blocks < 2:
        raise ValueError(f"n_blocks must be >= 2, got {n_blocks}")
    if n_samples < n_blocks:
        raise ValueError(f"need at least n_blocks = {n_blocks} samples, got {n_samples}")
    return (np.arange(n_samples) * n_blocks) // n_samples


def _weights(n: int, mask: jax.Array | None, dtype: Any) -> jax.Array:
    if mask is None:
        return jnp.ones((n,), dtype)
    return jnp.asarray(mask).astype(dtype)


def _block_sums(x: jax.Array, w: jax.Array, n_blocks: int) -> tuple[jax.Array, jax.Array]:
    """(Σ_{t∈b} w_t x_t of shape (B, ...), Σ_{t∈b} w_t of shape (B,)); masked samples may hold NaN."""
    onehot = jnp.asarray(block_index(x.shape[0], n_blocks)[None, :] == np.arange(n_blocks)[:, None], x.dtype)
    wb = w.reshape((-1,) + (1,) * (x.ndim - 1))
    xw = jnp.where(wb > 0, x, 0.0) * wb
    return jnp.tensordot(onehot, xw, axes=(1, 0)), onehot @ w


def block_means(x: jax.Array, n_blocks: int, mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Mean of each of ``n_blocks`` contiguous blocks along axis 0, and the block weights.

    Args:
      x: samples, shape (T, ...); the leading axis is time.
      n_blocks: B (static, 2 ≤ B ≤ T).
      mask: optional (T,) weights (1 = use); masked samples may hold NaN.

    Returns:
      (means of shape (B, ...), weights of shape (B,)); an empty block has mean 0 and weight 0.
    """
    x = jnp.asarray(x)
    w = _weights(x.shape[0], mask, x.dtype)
    S, W = _block_sums(x, w, n_blocks)
    Wb = W.reshape((-1,) + (1,) * (x.ndim - 1))
    return jnp.where(Wb > 0, S / jnp.where(Wb > 0, Wb, 1.0), 0.0), W


def naive_stderr(x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """i.i.d. standard error s/√n of the mean along axis 0 (s with ddof = 1); wrong for correlated data."""
    x = jnp.asarray(x)
    w = _weights(x.shape[0], mask, x.dtype).reshape((-1,) + (1,) * (x.ndim - 1))
    n = jnp.sum(w, axis=0)
    xs = jnp.where(w > 0, x, 0.0)
    m = jnp.sum(w * xs, axis=0) / n
    var = jnp.sum(w * (xs - m) ** 2, axis=0) / (n - 1.0)
    return jnp.sqrt(var / n)


class Jackknife(NamedTuple):
    """Result of :func:`block_jackknife`.

    Attributes:
      estimate: θ of the full-sample averages (the point estimate).
      stderr: delete-one-block jackknife standard error of θ.
      bias: jackknife bias estimate (B − 1)(θ̄_(·) − θ); ``estimate − bias`` is the bias-corrected value.
      n_blocks: number of non-empty blocks used (B).
      replicates: the leave-one-block-out values θ_(b), shape (n_blocks, ...) (θ for an empty block).
    """

    estimate: jax.Array
    stderr: jax.Array
    bias: jax.Array
    n_blocks: jax.Array
    replicates: jax.Array


def block_jackknife(fn: Callable[[Any], jax.Array], series: Any, n_blocks: int,
                    mask: jax.Array | None = None) -> Jackknife:
    r"""Delete-one-block jackknife of θ = fn(time averages of ``series``); see the module docstring.

    Args:
      fn: maps a pytree of averages (the leaves of ``series`` with the time axis removed) to θ
        (a scalar or an array). It must be a pure JAX function (it is vmapped over the replicates).
      series: a pytree of arrays with the same leading time axis T.
      n_blocks: B (static).
      mask: optional (T,) sample weights.

    Returns:
      :class:`Jackknife`.
    """
    leaves, treedef = jax.tree_util.tree_flatten(series)
    leaves = [jnp.asarray(a) for a in leaves]
    T = leaves[0].shape[0]
    if any(a.shape[0] != T for a in leaves):
        raise ValueError("every series needs the same number of samples (leading axis)")
    dtype = jnp.result_type(*leaves)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.zeros(()).dtype
    w = _weights(T, mask, dtype)
    sums = [_block_sums(a.astype(dtype), w, n_blocks) for a in leaves]
    W = sums[0][1]
    Wtot = jnp.sum(W)

    def bshape(a):
        return (-1,) + (1,) * (a.ndim - 1)

    full = [jnp.sum(S, axis=0) / Wtot for S, _ in sums]
    loo = [(jnp.sum(S, axis=0)[None] - S) / (Wtot - W).reshape(bshape(S)) for S, _ in sums]
    theta = jnp.asarray(fn(jax.tree_util.tree_unflatten(treedef, full)))
    reps = jax.vmap(lambda *ls: jnp.asarray(fn(jax.tree_util.tree_unflatten(treedef, list(ls)))))(*loo)
    used = (W > 0).reshape(bshape(reps))
    reps = jnp.where(used, reps, theta[None])
    B = jnp.sum(W > 0).astype(dtype)
    mean_rep = jnp.sum(jnp.where(used, reps, 0.0), axis=0) / B
    var = (B - 1.0) / B * jnp.sum(jnp.where(used, (reps - mean_rep) ** 2, 0.0), axis=0)
    return Jackknife(theta, jnp.sqrt(var), (B - 1.0) * (mean_rep - theta), jnp.sum(W > 0), reps)


def mean_stderr(x: jax.Array, n_blocks: int, mask: jax.Array | None = None) -> jax.Array:
    """Block standard error of the mean of ``x`` along axis 0 (Flyvbjerg & Petersen 1989).

    Equal to the delete-one-block jackknife of the mean; with equal blocks it is
    √(Σ_b (x̄_b − x̄)²/(B(B − 1))).
    """
    return block_jackknife(lambda m: m, x, n_blocks, mask).stderr


def ratio_stderr(num: jax.Array, den: jax.Array, n_blocks: int, mask: jax.Array | None = None,
                 method: str = "jackknife") -> tuple[jax.Array, jax.Array]:
    r"""r = ⟨num⟩/⟨den⟩ and its standard error from blocks.

    ``method="jackknife"`` (default): delete-one-block jackknife of the ratio of means
    (:func:`block_jackknife`).  ``method="delta"``: first-order delta method with the
    block (co)variances of the two means,
    SE²(r) ≈ [Var(⟨a⟩) − 2r Cov(⟨a⟩, ⟨b⟩) + r² Var(⟨b⟩)]/⟨b⟩² (e.g. Efron & Tibshirani,
    *An Introduction to the Bootstrap*, 1993, §21.1).  Both agree to O(1/T).
    """
    if method == "jackknife":
        jk = block_jackknife(lambda m: m[0] / m[1], (num, den), n_blocks, mask)
        return jk.estimate, jk.stderr
    if method == "delta":
        return delta_ratio_stderr(num, den, n_blocks, mask)
    raise ValueError(f"method must be 'jackknife' or 'delta', got {method!r}")


def delta_ratio_stderr(num: jax.Array, den: jax.Array, n_blocks: int,
                       mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Delta-method ratio of means and its standard error from block means (see :func:`ratio_stderr`)."""
    (ma, wa), (mb, _) = block_means(num, n_blocks, mask), block_means(den, n_blocks, mask)
    W = jnp.sum(wa)
    a, b = jnp.sum(wa * ma) / W, jnp.sum(wa * mb) / W
    r = a / b
    used = wa > 0
    B = jnp.sum(used).astype(ma.dtype)
    # residual of the linearised ratio per block; its block SE is the delta-method SE
    e = jnp.where(used, (ma - r * mb) / b, 0.0)
    return r, jnp.sqrt(jnp.sum(e * e) / (B * (B - 1.0)))


def blocking(x: jax.Array, n_levels: int | None = None) -> jax.Array:
    r"""Flyvbjerg–Petersen blocking: the naive SE after 0, 1, 2, … pairwise-averaging steps.

    Level k averages pairs of the level-(k−1) series (odd tails dropped) and returns
    √(s_k²/(n_k(n_k − 1)))·√(n_k) = s_k/√n_k with s_k² the ddof-1 variance of the n_k
    level-k values.  For a correlated series the sequence rises and levels off at the
    true SE of the mean once 2^k exceeds a few correlation times (J. Chem. Phys. 91, 461
    (1989)).  Static: ``n_levels`` defaults to the largest k with n_k ≥ 2.

    Returns:
      (n_levels,) standard errors of the mean (axis 0 of a 1-D ``x``).
    """
    x = jnp.asarray(x)
    if x.ndim != 1:
        raise ValueError("blocking expects a 1-D series")
    max_levels = int(np.floor(np.log2(x.shape[0]))) if x.shape[0] >= 2 else 0
    n_levels = max_levels if n_levels is None else min(int(n_levels), max_levels)
    out = []
    y = x
    for _ in range(n_levels):
        n = y.shape[0]
        out.append(jnp.std(y, ddof=1) / jnp.sqrt(n))
        y = 0.5 * (y[0:2 * (n // 2):2] + y[1:2 * (n // 2):2])
    return jnp.stack(out) if out else jnp.zeros((0,), x.dtype)


def statistical_inefficiency(x: jax.Array, n_blocks: int, mask: jax.Array | None = None) -> jax.Array:
    """g = (block SE / naive SE)²: about how many samples make one independent one (≥ 1 when correlated)."""
    return (mean_stderr(x, n_blocks, mask) / naive_stderr(x, mask)) ** 2


class Drift(NamedTuple):
    """Result of :func:`half_drift`: θ on each half of the series and their difference in standard errors."""

    z: jax.Array
    first: jax.Array
    second: jax.Array


def half_drift(fn: Callable[[Any], jax.Array], series: Any, n_blocks: int,
               mask: jax.Array | None = None) -> Drift:
    r"""Whether θ = fn(time averages) is the same on both halves of the trajectory.

    θ₁ and θ₂ are the :func:`block_jackknife` estimates on the first and the second half of the samples
    (``n_blocks // 2`` blocks each, at least 2), and

    .. math:: z = (\hat\theta_2 - \hat\theta_1) / \sqrt{\mathrm{SE}_1^2 + \mathrm{SE}_2^2}.

    A stationary trajectory gives |z| of order 1 (a t-like variable: with 5 blocks per half, |z| > 3 has
    a chance of a few per cent).  A larger |z| says the series drifts over the run, for instance a soft
    cluster still leaving its relaxed geometry: the block error, which assumes the blocks sample one
    stationary distribution, then understates the uncertainty of θ (docs/statistics.md, "Is the
    trajectory long enough?").  Elementwise for an array θ.
    """
    leaves, treedef = jax.tree_util.tree_flatten(series)
    T = jnp.asarray(leaves[0]).shape[0]
    h = T // 2
    nb = max(2, n_blocks // 2)
    halves = []
    for sl in (slice(0, h), slice(h, T)):
        part = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a)[sl] for a in leaves])
        halves.append(block_jackknife(fn, part, nb, None if mask is None else jnp.asarray(mask)[sl]))
    a, b = halves
    z = (b.estimate - a.estimate) / jnp.sqrt(a.stderr ** 2 + b.stderr ** 2)
    return Drift(z, a.estimate, b.estimate)
