"""Robust error statistics and resampling by chemical system (``docs/controls.md``, "Robust statistics and
resampling").

Seed 001, Methods D ("The trimmed mean and its uncertainty"): the error statistic is a threshold-censored
mean of ``|error|`` (rows with ``|error|`` above 1 eV/atom are set aside and counted, not discarded), and every
interval comes from a percentile bootstrap that resamples whole chemical systems (B = 2000, percentiles
2.5/97.5, fixed seed), so near-duplicate decorations of one system do not make the interval look narrower
than it is. Host-side numpy float64 throughout; the replicates are vectorised with numpy (one multinomial
count matrix per chunk of replicates), not ``jax.vmap``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from jaxcert.controls._result import ControlResult

__all__ = [
    "TrimmedMAE", "TrimSweep", "BootstrapResult", "PolymorphResult", "RetentionCurve", "CorrelationTest",
    "CorpusCorrelationTest", "BinnedError",
    "trimmed_mae", "trimmed_mae_sweep", "median_abs", "cluster_bootstrap", "system_split", "system_kfold",
    "polymorph_ordering", "sg_retention", "error_correlation_permutation", "corpus_correlation_test",
    "binned_error",
]

#: Seed 001 Methods D: rows with |error| above this (eV/atom) are set aside (counted, not averaged).
TRIM_CUTOFF = 1.0
#: Seed 001 Methods D: bootstrap replicates and percentile interval.
N_BOOT = 2000
CI = (2.5, 97.5)
#: Largest number of float64 cells a chunk of the bootstrap builds at once (replicates x systems or rows).
_CHUNK_CELLS = 1 << 22


# ============================================================================ input validation helpers
def _as_1d_float(x: Any, name: str, *, allow_nonfinite: bool = True) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a 1-D array of numbers: {err}") from None
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if not allow_nonfinite and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values")
    return a


def _labels(groups: Any, n: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)``: an integer code per row (0..S-1) and the distinct labels, for hashable labels."""
    if isinstance(groups, np.ndarray) and groups.ndim == 1 and groups.dtype.kind in "biuUSf":
        arr = groups
    else:
        seq = list(groups) if not isinstance(groups, np.ndarray) else list(groups.ravel())
        if seq and any(isinstance(g, (tuple, list, np.ndarray)) or g is None for g in seq):
            arr = None
        else:
            arr = np.asarray(seq)
            if arr.ndim != 1 or arr.dtype.kind not in "biuUSf":
                arr = None
        if arr is None:  # arbitrary hashables: factorise by first appearance
            if len(seq) != n:
                raise ValueError(f"{name} must have one label per row ({n}), got {len(seq)}")
            table: dict[Hashable, int] = {}
            codes = np.empty(len(seq), np.int64)
            for i, g in enumerate(seq):
                key = tuple(g) if isinstance(g, (list, np.ndarray)) else g
                try:
                    codes[i] = table.setdefault(key, len(table))
                except TypeError:
                    raise ValueError(f"{name} labels must be hashable, got {type(g).__name__}") from None
            uniques = np.empty(len(table), dtype=object)
            uniques[:] = list(table)
            return codes, uniques
    if arr.shape[0] != n:
        raise ValueError(f"{name} must have one label per row ({n}), got {arr.shape[0]}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite labels")
    uniques, codes = np.unique(arr, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), uniques


def _check_ci(ci: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(c) for c in ci)
    except (TypeError, ValueError):
        raise ValueError(f"ci must be two percentiles (lo, hi), got {ci!r}") from None
    if not (0.0 <= lo < hi <= 100.0):
        raise ValueError(f"ci must satisfy 0 <= lo < hi <= 100, got {ci!r}")
    return lo, hi


def _check_n_boot(n_boot: Any) -> int:
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    return int(n_boot)


# ============================================================================ trimmed mean
@dataclasses.dataclass(frozen=True)
class TrimmedMAE(ControlResult):
    """Threshold-censored mean absolute error (eV/atom unless the input is in other units).

    Fields: ``value`` = mean of ``|err|`` over the finite rows with ``|err| <= cutoff`` (NaN if none);
    ``n_kept``, ``n_removed`` (finite rows with ``|err| > cutoff``, set aside and reported), ``n_nonfinite``
    (NaN/inf rows, in neither count), ``median_abs`` = median ``|err|`` over all finite rows (before the trim,
    as the seed's floor medians), ``cutoff``.
    """

    value: float
    n_kept: int
    n_removed: int
    median_abs: float
    cutoff: float
    n_nonfinite: int


def trimmed_mae(err: Any, cutoff: float = TRIM_CUTOFF) -> TrimmedMAE:
    r"""Trimmed MAE: :math:`\frac{1}{|K|}\sum_{i\in K} |e_i|` with :math:`K = \{i : |e_i| \le c\}` (seed 001 Methods D).

    The paper sets aside "the structures whose |error| exceeds 1 eV/atom", so the boundary is kept:
    ``|err| == cutoff`` is averaged, ``|err| > cutoff`` is removed (counted in ``n_removed``). Non-finite
    errors (a failed relaxation, a missing energy) are neither kept nor removed: they are counted in
    ``n_nonfinite``, so ``n_kept + n_removed + n_nonfinite == len(err)``. Use a NaN to take a row out of a
    comparison (e.g. to give two columns one shared row set). ``cutoff=np.inf`` gives the untrimmed MAE.
    See docs/controls.md, "Robust statistics and resampling".
    """
    e = _as_1d_float(err, "err")
    c = float(cutoff)
    if not c > 0.0:  # also rejects NaN
        raise ValueError(f"cutoff must be > 0, got {cutoff!r}")
    a = np.abs(e)
    finite = np.isfinite(a)
    kept = finite & (a <= c)
    n_kept = int(kept.sum())
    value = float(a[kept].sum() / n_kept) if n_kept else math.nan
    med = float(np.median(a[finite])) if finite.any() else math.nan
    return TrimmedMAE(value=value, n_kept=n_kept, n_removed=int(finite.sum()) - n_kept, median_abs=med,
                      cutoff=c, n_nonfinite=int((~finite).sum()))


@dataclasses.dataclass(frozen=True)
class TrimSweep(ControlResult):
    """:func:`trimmed_mae` at each cutoff: arrays ``cutoffs``, ``value``, ``n_kept``, ``n_removed``."""

    cutoffs: np.ndarray
    value: np.ndarray
    n_kept: np.ndarray
    n_removed: np.ndarray
    median_abs: float
    n_nonfinite: int


def trimmed_mae_sweep(err: Any, cutoffs: Any) -> TrimSweep:
    """The trim-cutoff sensitivity sweep (seed 001 Supplementary Note 6): :func:`trimmed_mae` per cutoff.

    Vectorised: one sort of ``|err|`` and a cumulative sum; ``value[j]`` is the mean of the finite
    ``|err| <= cutoffs[j]`` (same boundary as :func:`trimmed_mae`). ``np.inf`` gives the untrimmed limit.
    """
    e = _as_1d_float(err, "err")
    c = _as_1d_float(cutoffs, "cutoffs")
    if c.size == 0 or np.any(np.isnan(c)) or np.any(c <= 0):
        raise ValueError("cutoffs must be a non-empty array of values > 0")
    a = np.abs(e)
    finite = np.isfinite(a)
    s = np.sort(a[finite])
    csum = np.concatenate([[0.0], np.cumsum(s)])
    n_kept = np.searchsorted(s, c, side="right")
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(n_kept > 0, csum[n_kept] / np.maximum(n_kept, 1), np.nan)
    return TrimSweep(cutoffs=c, value=value, n_kept=n_kept.astype(np.int64),
                     n_removed=(s.size - n_kept).astype(np.int64),
                     median_abs=float(np.median(s)) if s.size else math.nan, n_nonfinite=int((~finite).sum()))


def median_abs(err: Any) -> float:
    """Median ``|err|`` over the finite rows (NaN if none): the seed's untrimmed robust location."""
    a = np.abs(_as_1d_float(err, "err"))
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else math.nan


# ============================================================================ cluster bootstrap
@dataclasses.dataclass(frozen=True)
class BootstrapResult(ControlResult):
    """A statistic and its system-resampled bootstrap interval.

    ``estimate`` = the statistic on the data as given (for ``paired``: stat(data) − stat(paired));
    ``lo``, ``hi`` = the ``ci`` percentiles of the finite replicates (percentile interval); ``se`` = their
    standard deviation (ddof 1); ``n_boot`` replicates drawn, ``n_groups`` systems, ``n_invalid`` replicates
    whose statistic was not finite (left out of lo/hi/se); ``method`` "fast" (per-system sufficient
    statistics) or "generic" (the callable on resampled rows); ``replicates`` only if asked for.
    """

    estimate: float
    lo: float
    hi: float
    se: float
    n_boot: int
    n_groups: int
    ci: tuple[float, float]
    statistic: str
    method: str
    paired: bool
    n_invalid: int
    replicates: np.ndarray | None = None


_FAST = ("mean", "mae", "trimmed_mae")


def _resolve_stat(stat: Any, cutoff: float | None) -> tuple[str | None, Callable[[np.ndarray], Any] | None, float]:
    """``(fast name or None, callable, cutoff)``; recognises the built-ins by string or by identity."""
    c = TRIM_CUTOFF if cutoff is None else float(cutoff)
    if isinstance(stat, str):
        if stat not in _FAST:
            raise ValueError(f"stat must be a callable or one of {_FAST}, got {stat!r}")
        if stat != "trimmed_mae" and cutoff is not None:
            raise ValueError(f"cutoff applies only to stat='trimmed_mae', not {stat!r}")
        fn = {"mean": np.mean, "mae": lambda x: np.mean(np.abs(x)),
              "trimmed_mae": functools.partial(trimmed_mae, cutoff=c)}[stat]
        return stat, fn, c
    if not callable(stat):
        raise ValueError(f"stat must be a callable or one of {_FAST}, got {stat!r}")
    if cutoff is not None:
        raise ValueError("cutoff applies only to stat='trimmed_mae' (pass functools.partial(trimmed_mae, cutoff=c))")
    if stat is np.mean:
        return "mean", stat, c
    if stat is trimmed_mae:
        return "trimmed_mae", stat, TRIM_CUTOFF
    if isinstance(stat, functools.partial) and stat.func is trimmed_mae and not stat.args \
            and set(stat.keywords) <= {"cutoff"}:
        return "trimmed_mae", stat, float(stat.keywords.get("cutoff", TRIM_CUTOFF))
    return None, stat, c


def _scalar(v: Any) -> float:
    if isinstance(v, ControlResult) and hasattr(v, "value"):
        v = v.value
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ValueError(f"stat must return a scalar (or a result with .value), got {type(v).__name__}") from None


def _draw_chunks(n_groups: int, n_boot: int, seed: Any, width: int) -> Iterator[np.ndarray]:
    """The resampled system indices, ``(chunk, n_groups)`` ints, in chunks of replicates.

    One ``numpy.random.Generator(PCG64(seed))`` draws ``integers(0, S, (chunk, S))`` chunk after chunk, so the
    draws of replicate b do not depend on the chunking (the stream is consumed in order), and the fast and
    generic paths see identical systems.
    """
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_CELLS // max(width, 1))
    for b0 in range(0, n_boot, step):
        yield rng.integers(0, n_groups, size=(min(step, n_boot - b0), n_groups))


def _counts(draw: np.ndarray, n_groups: int) -> np.ndarray:
    """Multinomial count matrix ``(chunk, S)``: how often each system was drawn in each replicate."""
    b = draw.shape[0]
    flat = (np.arange(b)[:, None] * n_groups + draw).ravel()
    return np.bincount(flat, minlength=b * n_groups).reshape(b, n_groups).astype(np.float64)


def _sufficient(name: str, x: np.ndarray, codes: np.ndarray, n_groups: int, cutoff: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per-system ``(sum, count)`` of the built-in statistic's summand."""
    if name == "trimmed_mae":
        a = np.abs(x)
        keep = np.isfinite(a) & (a <= cutoff)
        return (np.bincount(codes, np.where(keep, a, 0.0), n_groups),
                np.bincount(codes, keep.astype(np.float64), n_groups))
    v = np.abs(x) if name == "mae" else x
    return np.bincount(codes, v, n_groups), np.bincount(codes, minlength=n_groups).astype(np.float64)


def _percentiles(reps: np.ndarray, ci: tuple[float, float]) -> tuple[float, float, float, int]:
    ok = np.isfinite(reps)
    good = reps[ok]
    n_bad = int((~ok).sum())
    if good.size == 0:
        return math.nan, math.nan, math.nan, n_bad
    lo, hi = np.percentile(good, ci)
    se = float(np.std(good, ddof=1)) if good.size > 1 else math.nan
    return float(lo), float(hi), se, n_bad


def cluster_bootstrap(
    stat: Callable[[np.ndarray], Any] | str,
    data: Any,
    groups: Any,
    n_boot: int = N_BOOT,
    seed: int = 0,
    ci: tuple[float, float] = CI,
    paired: Any = None,
    *,
    cutoff: float | None = None,
    return_replicates: bool = False,
) -> BootstrapResult:
    """Percentile bootstrap that resamples whole chemical systems with replacement (seed 001 Methods D).

    Each replicate draws ``S`` systems (``S`` = number of distinct ``groups`` labels) uniformly with
    replacement and takes every row of each drawn system (a system drawn twice contributes its rows twice);
    the statistic is recomputed on those rows. ``lo, hi`` are the ``ci`` percentiles of the replicates (the
    paper's percentile interval, not BCa or basic); ``estimate`` is the statistic on the data as given.

    Args:
      stat: a callable of the resampled data array (``np.mean``, ``np.median``, :func:`trimmed_mae`, a lambda);
        a :class:`ControlResult` return is read through ``.value``. Or one of the strings ``"mean"``,
        ``"mae"`` (mean ``|x|``), ``"trimmed_mae"`` (with ``cutoff``, default 1.0), which take the fast path;
        ``np.mean``, :func:`trimmed_mae` and ``functools.partial(trimmed_mae, cutoff=c)`` are recognised by
        identity and take it too.
      data: array with one row per structure (1-D for the built-ins; the generic path accepts ``(n, ...)``).
      groups: one hashable label per row (the chemical system).
      n_boot, seed, ci: replicates (2000), the ``numpy.random.default_rng`` seed, percentiles (2.5, 97.5).
      paired: a second array aligned row by row with ``data`` (model − model, model − floor): each replicate
        gives stat(data[rows]) − stat(paired[rows]) on the SAME resampled systems.
      cutoff: the trim for ``stat="trimmed_mae"``.
      return_replicates: keep the ``(n_boot,)`` replicate array in the result.

    Vectorisation: numpy, not ``jax.vmap``. The system draws for a chunk of replicates are one
    ``Generator.integers`` call. Fast path: per-system sums and counts (for the trimmed MAE, of the kept
    ``|x|``) combined with the ``(n_boot, S)`` multinomial count matrix in one matrix product, replicate =
    (C @ sums) / (C @ counts). Generic path: the row-index arrays of all replicates of a chunk are built at
    once (repeat/cumsum), then ``stat`` is called once per replicate. Both paths use the same draws, so they
    agree to round-off (exactly where the sums are exact). The fast built-ins "mean" and "mae" need finite
    data (a NaN would poison every replicate); "trimmed_mae" counts non-finite rows as excluded, as
    :func:`trimmed_mae` does. See docs/controls.md, "Robust statistics and resampling".
    """
    n_boot = _check_n_boot(n_boot)
    ci = _check_ci(ci)
    name, fn, c = _resolve_stat(stat, cutoff)
    x = np.asarray(data, dtype=np.float64)
    if x.ndim == 0 or x.shape[0] == 0:
        raise ValueError("data must have at least one row")
    y = None
    if paired is not None:
        y = np.asarray(paired, dtype=np.float64)
        if y.shape != x.shape:
            raise ValueError(f"paired must have the shape of data {x.shape}, got {y.shape}")
    codes, uniq = _labels(groups, x.shape[0], "groups")
    n_groups = len(uniq)
    if name is not None:
        if x.ndim != 1:
            raise ValueError(f"data must be 1-D for stat={name!r}, got shape {x.shape}")
        if name in ("mean", "mae"):
            for arr, nm in ((x, "data"), (y, "paired")):
                if arr is not None and not np.all(np.isfinite(arr)):
                    raise ValueError(f"{nm} contains non-finite values (stat={name!r} needs finite data; "
                                     "use stat='trimmed_mae', which excludes them)")

    def full(arr: np.ndarray) -> float:
        return _scalar(fn(arr))

    estimate = full(x) - (full(y) if y is not None else 0.0)
    reps = np.empty(n_boot)
    if name is not None:
        sx, nx = _sufficient(name, x, codes, n_groups, c)
        sy, ny = _sufficient(name, y, codes, n_groups, c) if y is not None else (None, None)
        b0 = 0
        with np.errstate(invalid="ignore", divide="ignore"):
            for draw in _draw_chunks(n_groups, n_boot, seed, n_groups):
                cm = _counts(draw, n_groups)
                r = (cm @ sx) / (cm @ nx)
                if y is not None:
                    r = r - (cm @ sy) / (cm @ ny)
                reps[b0:b0 + len(r)] = r
                b0 += len(r)
        method = "fast"
    else:
        order = np.argsort(codes, kind="stable")
        size = np.bincount(codes, minlength=n_groups)
        start = np.concatenate([[0], np.cumsum(size)[:-1]])
        b0 = 0
        width = max(n_groups, x.shape[0])
        for draw in _draw_chunks(n_groups, n_boot, seed, width):
            sz = size[draw]                                   # (chunk, S) rows contributed by each draw
            flat_sz = sz.ravel()
            total = int(flat_sz.sum())
            first = np.repeat(np.cumsum(flat_sz) - flat_sz, flat_sz)
            rows = order[np.repeat(start[draw].ravel(), flat_sz) + (np.arange(total) - first)]
            bounds = np.cumsum(sz.sum(axis=1))[:-1]
            for k, idx in enumerate(np.split(rows, bounds)):
                v = full(x[idx])
                if y is not None:
                    v -= full(y[idx])
                reps[b0 + k] = v
            b0 += draw.shape[0]
        method = "generic"
    lo, hi, se, n_bad = _percentiles(reps, ci)
    label = name if name is not None else getattr(stat, "__name__", type(stat).__name__)
    return BootstrapResult(estimate=float(estimate), lo=lo, hi=hi, se=se, n_boot=n_boot, n_groups=n_groups,
                           ci=ci, statistic=str(label), method=method, paired=y is not None, n_invalid=n_bad,
                           replicates=reps if return_replicates else None)


def _ratio_bootstrap(num: np.ndarray, den: np.ndarray, n_boot: int, seed: Any, ci: tuple[float, float]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Percentile CI of ``sum(num)/sum(den)`` per column under system resampling.

    ``num``, ``den``: ``(S, T)`` per-system sums for T statistics that share the draws. Returns
    ``(lo, hi, se, n_invalid)`` arrays of length T.
    """
    n_groups = num.shape[0]
    reps = np.empty((n_boot, num.shape[1]))
    b0 = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for draw in _draw_chunks(n_groups, n_boot, seed, n_groups):
            cm = _counts(draw, n_groups)
            reps[b0:b0 + len(cm)] = (cm @ num) / (cm @ den)
            b0 += len(cm)
    bad = ~np.isfinite(reps)
    reps[bad] = np.nan
    n_good = (~bad).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN, as wanted
        lo, hi = np.nanpercentile(reps, ci, axis=0)
        se = np.where(n_good > 1, np.nanstd(reps, axis=0, ddof=1), np.nan)
    return lo, hi, se, bad.sum(0).astype(np.int64)


# ============================================================================ system-disjoint splits
def _label_text(label: Any) -> str:
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, bytes):
        label = label.decode("utf-8", "surrogateescape")
    return str(label)


def _hash_unit(uniq: np.ndarray, salt: str) -> np.ndarray:
    """A platform-independent uniform number in [0, 1) per label: the first 8 bytes of
    ``sha256(salt + "\\x00" + str(label))`` as a big-endian integer / 2**64 (no Python ``hash()``)."""
    if not isinstance(salt, str):
        raise ValueError(f"salt must be a string, got {type(salt).__name__}")
    out = np.empty(len(uniq))
    for i, lab in enumerate(uniq):  # hashlib has no vectorised form; one call per distinct system
        h = hashlib.sha256((salt + "\x00" + _label_text(lab)).encode("utf-8", "surrogateescape")).digest()
        out[i] = int.from_bytes(h[:8], "big") / 2.0**64
    return out


def _hash_rank(uniq: np.ndarray, salt: str) -> np.ndarray:
    """Rank 0..S-1 of each label in hash order (ties, which need a 64-bit collision, broken by the text)."""
    u = _hash_unit(uniq, salt)
    text = np.array([_label_text(x) for x in uniq], dtype=object)
    order = sorted(range(len(uniq)), key=lambda i: (u[i], text[i]))
    rank = np.empty(len(uniq), np.int64)
    rank[np.asarray(order, np.int64)] = np.arange(len(uniq))
    return rank


def system_split(groups: Any, fraction: float = 0.3, salt: str = "jaxcert", method: str = "threshold"
                 ) -> np.ndarray:
    """Held-out mask of a hash-based, system-disjoint split (seed 001 Methods F: fit on 70 %, score on 30 %).

    Every row of a system gets the same value, so no system is in both halves. Each system is hashed with
    SHA-256 (stable across runs, processes and platforms, unlike Python's salted ``hash()``).

    Args:
      groups: one hashable label per row (the chemical system).
      fraction: target held-out fraction of the *systems* (0 < fraction < 1; default 0.3, the paper's).
      salt: prefix of the hashed text; a different salt gives an independent split.
      method: ``"threshold"`` (default): a system is held out when its hash, as a number in [0, 1), is below
        ``fraction``; its assignment depends on nothing else, so adding systems never moves one, but the
        held-out share is ``fraction`` only on average (binomial scatter). ``"rank"``: the
        ``round(fraction * S)`` systems first in hash order are held out (exact count, but adding systems
        can move others).
    Returns: boolean ``(n,)`` array, True = held out.
    """
    f = float(fraction)
    if not 0.0 < f < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    n = len(groups) if not isinstance(groups, np.ndarray) else groups.shape[0]
    codes, uniq = _labels(groups, n, "groups")
    if method == "threshold":
        held = _hash_unit(uniq, salt) < f
    elif method == "rank":
        held = _hash_rank(uniq, salt) < int(round(f * len(uniq)))
    else:
        raise ValueError(f"method must be 'threshold' or 'rank', got {method!r}")
    return held[codes]


def system_kfold(groups: Any, k: int = 5, salt: str = "jaxcert", method: str = "rank") -> np.ndarray:
    """Fold index 0..k-1 per row of a hash-based, system-disjoint k-fold (seed 001 Supplementary Note 7: 5 folds).

    ``method="rank"`` (default): systems in SHA-256 hash order are cut into k contiguous blocks (fold =
    ``rank * k // S``), so every fold holds ``S/k`` systems to within one and none is empty (needs S >= k).
    ``method="threshold"``: fold = ``floor(u * k)`` with ``u`` the hash in [0, 1), each system independent of
    the rest (fold sizes then scatter). Same hash as :func:`system_split`.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise ValueError(f"k must be an integer >= 2, got {k!r}")
    n = len(groups) if not isinstance(groups, np.ndarray) else groups.shape[0]
    codes, uniq = _labels(groups, n, "groups")
    if method == "rank":
        if len(uniq) < k:
            raise ValueError(f"groups has {len(uniq)} systems, fewer than k = {k}")
        fold = _hash_rank(uniq, salt) * int(k) // len(uniq)
    elif method == "threshold":
        fold = np.minimum(np.floor(_hash_unit(uniq, salt) * k).astype(np.int64), k - 1)
    else:
        raise ValueError(f"method must be 'rank' or 'threshold', got {method!r}")
    return fold[codes].astype(np.int64)


# ============================================================================ grouped ranks
def _group_ranks(codes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values`` within each group, ties given their average rank (as Spearman's rho needs)."""
    n = values.size
    if n == 0:
        return np.empty(0)
    order = np.lexsort((values, codes))
    sc, sv = codes[order], values[order]
    pos = np.arange(n)
    new_group = np.r_[True, sc[1:] != sc[:-1]]
    within = pos - np.maximum.accumulate(np.where(new_group, pos, 0))
    new_run = new_group | np.r_[True, sv[1:] != sv[:-1]]
    run_start = np.flatnonzero(new_run)
    run_id = np.cumsum(new_run) - 1
    lo = within[run_start]
    hi = np.maximum.reduceat(within, run_start)
    ranks = np.empty(n)
    ranks[order] = ((lo + hi) / 2.0 + 1.0)[run_id]
    return ranks


def _group_pearson(codes: np.ndarray, x: np.ndarray, y: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-group Pearson r and a flag for groups where either variable is constant (r set to 0 there)."""
    cnt = np.bincount(codes, minlength=n_groups).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.bincount(codes, x, n_groups) / cnt
        my = np.bincount(codes, y, n_groups) / cnt
        dx, dy = x - mx[codes], y - my[codes]
        sxy = np.bincount(codes, dx * dy, n_groups)
        sxx = np.bincount(codes, dx * dx, n_groups)
        syy = np.bincount(codes, dy * dy, n_groups)
        const = (sxx <= 0) | (syy <= 0)
        r = np.where(const, 0.0, sxy / np.sqrt(sxx * syy))
    return np.clip(r, -1.0, 1.0), const


# ============================================================================ polymorph ordering
@dataclasses.dataclass(frozen=True)
class PolymorphResult(ControlResult):
    """Polymorph energy ordering at fixed composition (seed 001 Methods G, "Polymorph energy ordering").

    Scalars over the qualifying compositions: ``median_rho``, ``mean_rho`` (Spearman rho), ``hit_rate``
    (ground-state hits, tie-aware), ``chance`` (the hit rate of a uniform random pick), ``n_compositions``.
    Per-composition arrays: ``compositions`` (labels), ``n_members``, ``spread`` (reference max − min, eV/atom),
    ``rho``, ``hit``, ``chance_per``, ``model_constant`` (rho set to 0). ``n_dropped``: rows with a
    non-finite energy. ``rho_ci`` / ``hit_ci``: system-resampled intervals of the median rho and the hit rate
    (only with ``groups``).
    """

    median_rho: float
    mean_rho: float
    hit_rate: float
    chance: float
    n_compositions: int
    compositions: np.ndarray
    n_members: np.ndarray
    spread: np.ndarray
    rho: np.ndarray
    hit: np.ndarray
    chance_per: np.ndarray
    model_constant: np.ndarray
    n_dropped: int
    min_n: int
    min_spread: float
    tie_tol: float
    rho_ci: BootstrapResult | None = None
    hit_ci: BootstrapResult | None = None


def polymorph_ordering(
    e_model: Any,
    e_ref: Any,
    composition: Any,
    min_n: int = 3,
    min_spread: float = 0.025,
    *,
    tie_tol: float = 0.0,
    groups: Any = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    ci: tuple[float, float] = CI,
) -> PolymorphResult:
    r"""Spearman rho and ground-state hit rate of a model's polymorph ordering (seed 001 Methods G).

    A composition qualifies when it has ``>= min_n`` rows (the caller passes distinct structures) and its
    reference energies span ``max - min >= min_spread`` (eV/atom; "span at least 25 meV/atom"). Per
    composition, rho is Spearman's correlation of model and reference energies (average ranks for ties,
    computed for all compositions at once); if the model gives every member the same energy rho is
    undefined and is set to 0 (flagged in ``model_constant``) rather than dropped, which would flatter it.

    Ground-state hit, tie-aware: with :math:`R` the members within ``tie_tol`` of the reference minimum and
    :math:`M` those within ``tie_tol`` of the model minimum, ``hit = |M ∩ R| / |M|``. A tie for the reference
    minimum counts as a hit (the paper: "ties count as hits"); a tie at the model's minimum is broken
    uniformly at random in expectation, so a model that predicts one energy for everything scores chance, not
    100 %. ``chance_per = |R| / n`` (= 1/n without reference ties); ``chance`` is its mean over compositions
    (the paper's "8 %" for sets of median size 25 is this mean, not 1/median).

    Energies may be per-atom formation energies or totals per atom: a per-element shift of a composition
    changes neither statistic (the paper's point). Rows with a non-finite energy are dropped first. With
    ``groups`` (a chemical system per row, constant within a composition) the median rho and the hit rate
    get system-resampled percentile intervals. See docs/controls.md, "Robust statistics and resampling".
    """
    em = _as_1d_float(e_model, "e_model")
    er = _as_1d_float(e_ref, "e_ref")
    if em.shape != er.shape:
        raise ValueError(f"e_model and e_ref must have the same length, got {em.size} and {er.size}")
    if isinstance(min_n, bool) or not isinstance(min_n, (int, np.integer)) or min_n < 2:
        raise ValueError(f"min_n must be an integer >= 2, got {min_n!r}")
    if not float(min_spread) >= 0.0:
        raise ValueError(f"min_spread must be >= 0, got {min_spread!r}")
    if not float(tie_tol) >= 0.0:
        raise ValueError(f"tie_tol must be >= 0, got {tie_tol!r}")
    codes_all, uniq = _labels(composition, em.size, "composition")
    sys_codes_all = None
    if groups is not None:
        sys_codes_all, _ = _labels(groups, em.size, "groups")
    ok = np.isfinite(em) & np.isfinite(er)
    n_dropped = int((~ok).sum())
    codes, em, er = codes_all[ok], em[ok], er[ok]
    n_c = len(uniq)
    cnt = np.bincount(codes, minlength=n_c)
    rmin = np.full(n_c, np.inf)
    rmax = np.full(n_c, -np.inf)
    mmin = np.full(n_c, np.inf)
    np.minimum.at(rmin, codes, er)
    np.maximum.at(rmax, codes, er)
    np.minimum.at(mmin, codes, em)
    spread = rmax - rmin
    qual = (cnt >= min_n) & (spread >= float(min_spread))
    rows = qual[codes]
    # compact codes over the qualifying compositions
    new = np.cumsum(qual) - 1
    c = new[codes[rows]]
    emq, erq = em[rows], er[rows]
    n_q = int(qual.sum())
    rho, const = _group_pearson(c, _group_ranks(c, emq), _group_ranks(c, erq), n_q)
    in_r = erq <= rmin[qual][c] + tie_tol
    in_m = emq <= mmin[qual][c] + tie_tol
    with np.errstate(invalid="ignore", divide="ignore"):
        hit = np.bincount(c, (in_m & in_r).astype(np.float64), n_q) / np.bincount(c, in_m.astype(np.float64), n_q)
        chance_per = np.bincount(c, in_r.astype(np.float64), n_q) / cnt[qual]
    rho_ci = hit_ci = None
    if sys_codes_all is not None and n_q:
        sys_rows = sys_codes_all[ok][rows]
        comp_sys = np.full(n_q, -1)
        comp_sys[c] = sys_rows
        if np.any(comp_sys[c] != sys_rows):
            raise ValueError("groups must be constant within each composition")
        rho_ci = cluster_bootstrap(np.median, rho, comp_sys, n_boot=n_boot, seed=seed, ci=ci)
        hit_ci = cluster_bootstrap("mean", hit, comp_sys, n_boot=n_boot, seed=seed, ci=ci)
    nan = math.nan
    return PolymorphResult(
        median_rho=float(np.median(rho)) if n_q else nan, mean_rho=float(np.mean(rho)) if n_q else nan,
        hit_rate=float(np.mean(hit)) if n_q else nan, chance=float(np.mean(chance_per)) if n_q else nan,
        n_compositions=n_q, compositions=uniq[qual], n_members=cnt[qual].astype(np.int64), spread=spread[qual],
        rho=rho, hit=hit, chance_per=chance_per, model_constant=const, n_dropped=n_dropped, min_n=int(min_n),
        min_spread=float(min_spread), tie_tol=float(tie_tol), rho_ci=rho_ci, hit_ci=hit_ci)


# ============================================================================ space-group retention
@dataclasses.dataclass(frozen=True)
class RetentionCurve(ControlResult):
    """Space-group retention as a function of symprec (seed 001 Methods G; never a single number).

    Arrays over ``symprec`` (Å): ``fraction`` retained, its system-resampled percentile interval ``lo``/``hi``,
    ``n_scored`` (the denominator), ``n_retained``, ``n_spglib_failed`` (structures where spglib gave no space
    group for the reference or the relaxed structure). ``n_unrelaxed``: ``relaxed`` entries that were
    ``None`` (failed relaxations, never scored). ``reference_sg`` / ``relaxed_sg``: ``(n, T)`` space-group
    numbers, 0 where none was assigned.
    """

    symprec: np.ndarray
    fraction: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n_scored: np.ndarray
    n_retained: np.ndarray
    n_spglib_failed: np.ndarray
    n_unrelaxed: int
    n_structures: int
    n_groups: int
    on_failure: str
    reference_sg: np.ndarray
    relaxed_sg: np.ndarray


def _spglib_cell(obj: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lattice rows, fractional positions, numbers)`` from an ase.Atoms, a jaxcert Structure or a triple."""
    if hasattr(obj, "get_scaled_positions") and hasattr(obj, "cell"):  # ase.Atoms
        lat = np.asarray(obj.cell[:], np.float64)
        pos = np.asarray(obj.get_positions(), np.float64)
        num = np.asarray(obj.numbers, np.int64)
    elif hasattr(obj, "positions") and hasattr(obj, "cell") and hasattr(obj, "numbers"):  # jaxcert Structure
        lat = np.asarray(obj.cell, np.float64)
        pos = np.asarray(obj.positions, np.float64)
        num = np.asarray(obj.numbers, np.int64)
        if hasattr(obj, "mask"):
            m = np.asarray(obj.mask, bool)
            pos, num = pos[m], num[m]
    elif isinstance(obj, (tuple, list)) and len(obj) == 3:  # spglib's own (lattice, fractional, numbers)
        lat, frac, num = (np.asarray(obj[0], np.float64), np.asarray(obj[1], np.float64),
                          np.asarray(obj[2], np.int64))
        if lat.shape != (3, 3) or frac.ndim != 2 or frac.shape[1:] != (3,) or num.shape != (frac.shape[0],):
            raise ValueError(f"{name} must be (lattice (3,3), fractional (n,3), numbers (n,))")
        return lat, frac, num
    else:
        raise ValueError(f"{name} must be an ase.Atoms, a jaxcert Structure or a spglib (lattice, frac, numbers) "
                         f"triple, got {type(obj).__name__}")
    if lat.shape != (3, 3) or abs(np.linalg.det(lat)) < 1e-12:
        raise ValueError(f"{name} has no (non-singular) cell; space groups need a periodic cell")
    frac = np.linalg.solve(lat.T, pos.T).T
    return lat, frac, num


def _space_group(cell: tuple[np.ndarray, np.ndarray, np.ndarray], symprec: float, angle_tolerance: float) -> int:
    """spglib space-group number at ``symprec`` (Å), or 0 when spglib finds none or fails."""
    import spglib

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = spglib.get_symmetry_dataset(cell, symprec=symprec, angle_tolerance=angle_tolerance)
    except Exception:  # newer spglib raises SpglibError where older ones returned None
        return 0
    if ds is None:
        return 0
    num = getattr(ds, "number", None)
    if num is None:
        num = ds["number"]
    return int(num)


def sg_retention(
    reference: Sequence[Any],
    relaxed: Sequence[Any],
    symprec: Any = (0.01, 0.05, 0.1),
    groups: Any = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    ci: tuple[float, float] = CI,
    *,
    on_failure: str = "exclude",
    angle_tolerance: float = -1.0,
) -> RetentionCurve:
    """Space-group retention after relaxation at each symprec τ, with system-resampled intervals (seed 001 Methods G).

    A structure is retained at τ when spglib's space-group number of the relaxed structure at τ equals that of
    the reference structure at the same τ: both are assigned "alike with spglib at the swept tolerance", as
    the paper does (not the reference fixed at one tolerance), so a looser τ can give both a different, higher
    group and retention can dip slightly as τ loosens. Always a curve over ``symprec`` (default 0.01, 0.05,
    0.1 Å).

    Args:
      reference, relaxed: equal-length sequences of ``ase.Atoms``, jaxcert ``Structure`` (positions, cell,
        numbers; masked atoms dropped) or spglib ``(lattice, fractional, numbers)`` triples. A ``None`` in
        ``relaxed`` is a failed relaxation: never scored (the paper scores a structure "when its relaxation
        succeeded"), counted in ``n_unrelaxed``.
      groups: the chemical system per structure (default: each structure its own group).
      on_failure: where spglib assigns no group to either structure at τ: ``"exclude"`` (default, the paper:
        a structure enters the rate when "both space groups exist") drops it from the denominator at that τ;
        ``"not_retained"`` counts it as not retained. Either way it is counted in ``n_spglib_failed``.
      angle_tolerance: passed to spglib (-1 = spglib's default).
    See docs/controls.md, "Robust statistics and resampling".
    """
    if on_failure not in ("exclude", "not_retained"):
        raise ValueError(f"on_failure must be 'exclude' or 'not_retained', got {on_failure!r}")
    reference, relaxed = list(reference), list(relaxed)
    if len(reference) != len(relaxed):
        raise ValueError(f"reference and relaxed must have the same length, got {len(reference)} and {len(relaxed)}")
    n = len(reference)
    if n == 0:
        raise ValueError("reference must hold at least one structure")
    tau = _as_1d_float(symprec, "symprec")
    if tau.size == 0 or not np.all(np.isfinite(tau)) or np.any(tau <= 0):
        raise ValueError(f"symprec must be positive tolerances (Å), got {symprec!r}")
    codes, uniq = _labels(np.arange(n) if groups is None else groups, n, "groups")
    n_t = tau.size
    ref_sg = np.zeros((n, n_t), np.int64)
    rel_sg = np.zeros((n, n_t), np.int64)
    relaxed_ok = np.array([r is not None for r in relaxed])
    for i in range(n):  # spglib is one C call per structure and tolerance
        ref_cell = _spglib_cell(reference[i], f"reference[{i}]")
        rel_cell = _spglib_cell(relaxed[i], f"relaxed[{i}]") if relaxed_ok[i] else None
        for t in range(n_t):
            ref_sg[i, t] = _space_group(ref_cell, tau[t], angle_tolerance)
            if rel_cell is not None:
                rel_sg[i, t] = _space_group(rel_cell, tau[t], angle_tolerance)
    both = (ref_sg > 0) & (rel_sg > 0) & relaxed_ok[:, None]
    failed = relaxed_ok[:, None] & ~both
    retained = both & (ref_sg == rel_sg)
    den = both if on_failure == "exclude" else np.broadcast_to(relaxed_ok[:, None], both.shape)
    n_groups = len(uniq)
    num_s = np.stack([np.bincount(codes, retained[:, t].astype(np.float64), n_groups) for t in range(n_t)], 1)
    den_s = np.stack([np.bincount(codes, den[:, t].astype(np.float64), n_groups) for t in range(n_t)], 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = num_s.sum(0) / den_s.sum(0)
    lo, hi, _, _ = _ratio_bootstrap(num_s, den_s, _check_n_boot(n_boot), seed, _check_ci(ci))
    return RetentionCurve(symprec=tau, fraction=frac, lo=lo, hi=hi, n_scored=den.sum(0).astype(np.int64),
                          n_retained=retained.sum(0).astype(np.int64), n_spglib_failed=failed.sum(0).astype(np.int64),
                          n_unrelaxed=int((~relaxed_ok).sum()), n_structures=n, n_groups=n_groups,
                          on_failure=on_failure, reference_sg=ref_sg, relaxed_sg=rel_sg)


# ============================================================================ error correlation
@dataclasses.dataclass(frozen=True)
class CorrelationTest(ControlResult):
    """Correlation of two models' per-structure errors with a permutation p-value.

    ``r`` (Pearson or Spearman, per ``method``), ``p_value`` ((1 + #extreme) / (n_perm + 1), so never 0),
    ``null_mean`` / ``null_sd`` of the permutation distribution, ``n`` rows used, ``n_dropped`` non-finite rows,
    ``within_groups`` (permuted within systems or across all rows).
    """

    r: float
    p_value: float
    null_mean: float
    null_sd: float
    n: int
    n_dropped: int
    n_perm: int
    method: str
    alternative: str
    within_groups: bool


def _standardise(v: np.ndarray) -> np.ndarray:
    d = v - v.mean()
    nrm = np.sqrt(np.dot(d, d))
    return d / nrm if nrm > 0 else np.zeros_like(d)


def _p_value(null: np.ndarray, obs: float, alternative: str) -> float:
    tol = 1e-12 * max(1.0, abs(obs))  # an exact tie of the observed value counts as extreme
    if alternative == "two-sided":
        k = np.count_nonzero(np.abs(null) >= abs(obs) - tol)
    elif alternative == "greater":
        k = np.count_nonzero(null >= obs - tol)
    else:
        k = np.count_nonzero(null <= obs + tol)
    return float((1.0 + k) / (null.size + 1.0))


_ALTERNATIVES = ("two-sided", "greater", "less")


def error_correlation_permutation(
    err_a: Any,
    err_b: Any,
    n_perm: int = 10000,
    seed: int = 0,
    groups: Any = None,
    *,
    method: str = "spearman",
    alternative: str = "two-sided",
) -> CorrelationTest:
    r"""Correlation of two error vectors on the same structures, with a Monte-Carlo permutation p-value.

    ``r`` = Pearson correlation of the errors (``method="pearson"``) or of their average ranks (Spearman,
    default, the seed's choice for error correlations). The null distribution permutes ``err_b`` against
    ``err_a``: across all rows (``groups=None``; the null "the two errors are independent"), or only within
    each chemical system (``groups`` given; a restricted permutation that keeps every system-level effect,
    so it tests the correlation beyond what shared per-system offsets produce). Ranks are computed once on
    all rows; the permuted correlations are ``n_perm`` dot products, vectorised in chunks. ``p`` =
    (1 + number of permuted r as or more extreme) / (n_perm + 1). For the seed's corpus-correlation test
    proper (an exact permutation of corpus labels over a model panel) see :func:`corpus_correlation_test`.
    Rows where either error is non-finite are dropped.
    """
    a = _as_1d_float(err_a, "err_a")
    b = _as_1d_float(err_b, "err_b")
    if a.shape != b.shape:
        raise ValueError(f"err_a and err_b must have the same length, got {a.size} and {b.size}")
    if method not in ("spearman", "pearson"):
        raise ValueError(f"method must be 'spearman' or 'pearson', got {method!r}")
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")
    if isinstance(n_perm, bool) or not isinstance(n_perm, (int, np.integer)) or n_perm < 1:
        raise ValueError(f"n_perm must be a positive integer, got {n_perm!r}")
    codes = None
    if groups is not None:
        codes, _ = _labels(groups, a.size, "groups")
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 3:
        raise ValueError(f"need at least 3 rows with finite errors, got {a.size}")
    codes = np.zeros(a.size, np.int64) if codes is None else codes[ok]
    if method == "spearman":
        zero = np.zeros(a.size, np.int64)
        a, b = _group_ranks(zero, a), _group_ranks(zero, b)
    za, zb = _standardise(a), _standardise(b)
    r_obs = float(np.dot(za, zb))
    base = np.argsort(codes, kind="stable")  # slot j belongs to group codes[base[j]]
    za_s, zb_s = za[base], zb[base]
    rng = np.random.default_rng(seed)
    null = np.empty(int(n_perm))
    step = max(1, _CHUNK_CELLS // a.size)
    code_s = codes[base]
    for p0 in range(0, int(n_perm), step):
        m = min(step, int(n_perm) - p0)
        if groups is None:
            perm = rng.permuted(np.broadcast_to(np.arange(a.size), (m, a.size)), axis=1)
        else:  # sorting group code + U[0, 1) keeps every slot in its group's block, in a uniformly random order
            perm = np.argsort(rng.random((m, a.size)) + code_s, axis=1)
        null[p0:p0 + m] = (zb_s[perm] * za_s).sum(axis=1)
    return CorrelationTest(r=r_obs, p_value=_p_value(null, r_obs, alternative), null_mean=float(null.mean()),
                           null_sd=float(null.std(ddof=1)) if null.size > 1 else math.nan, n=int(a.size),
                           n_dropped=int((~ok).sum()), n_perm=int(n_perm), method=method, alternative=alternative,
                           within_groups=groups is not None)


@dataclasses.dataclass(frozen=True)
class CorpusCorrelationTest(ControlResult):
    """The seed's corpus-correlation test (Methods I): same-corpus vs cross-corpus error correlation.

    ``statistic`` = ``mean_same − mean_cross`` (mean pairwise correlation of the models' per-structure errors
    over same-corpus and over cross-corpus pairs), ``p_value`` over ``n_labelings`` corpus labelings
    (``exact``: all of them; smallest attainable p = ``min_p``), ``rho`` the ``(m, m)`` correlation matrix,
    ``n_structures`` used and ``n_excluded`` (non-finite or beyond ``max_abs`` for some model).
    """

    statistic: float
    mean_same: float
    mean_cross: float
    p_value: float
    min_p: float
    n_labelings: int
    exact: bool
    n_same_pairs: int
    n_cross_pairs: int
    n_structures: int
    n_excluded: int
    rho: np.ndarray
    method: str
    alternative: str


def _labelings(codes: np.ndarray) -> np.ndarray:
    """Every distinct assignment of the multiset ``codes`` to the positions, ``(L, m)`` ints."""
    m = codes.size
    sizes = np.bincount(codes)
    out = [np.full(m, -1, np.int64)]
    for lab, k in enumerate(sizes[:-1]):
        nxt = []
        for partial in out:
            free = np.flatnonzero(partial < 0)
            for combo in itertools.combinations(free, int(k)):
                q = partial.copy()
                q[list(combo)] = lab
                nxt.append(q)
        out = nxt
    arr = np.stack(out)
    arr[arr < 0] = len(sizes) - 1
    return arr


def corpus_correlation_test(
    errors: Any,
    corpus: Any,
    *,
    method: str = "spearman",
    max_abs: float = 5.0,
    alternative: str = "greater",
    max_exact: int = 200_000,
    n_perm: int = 10000,
    seed: int = 0,
) -> CorpusCorrelationTest:
    """Are errors of models trained on the same corpus more alike? (seed 001 Methods I, "Corpus correlation").

    ``errors``: ``(m, n)`` per-structure errors of m models on the same n structures; ``corpus``: a label per
    model (e.g. "OMat"/"MP"). Structures on which any model's error is non-finite or exceeds ``max_abs``
    (5 eV/atom, the paper's exclusion) are left out. The statistic is the mean Spearman rho (``method``) of
    the errors over same-corpus model pairs minus that over cross-corpus pairs. The p-value permutes the
    corpus labels over the models: exactly, over every distinct labeling with the same corpus sizes (the
    paper: 6 + 4 models give C(10, 4) = 210 labelings, smallest p = 1/210), when there are at most
    ``max_exact``; otherwise over ``n_perm`` random labelings plus the observed one. ``alternative="greater"``
    (default) is the paper's one-sided question (same-corpus more correlated).
    """
    e = np.asarray(errors, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] < 3:
        raise ValueError(f"errors must be (n_models >= 3, n_structures), got shape {e.shape}")
    if method not in ("spearman", "pearson"):
        raise ValueError(f"method must be 'spearman' or 'pearson', got {method!r}")
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")
    m = e.shape[0]
    codes, uniq = _labels(corpus, m, "corpus")
    if len(uniq) < 2 or np.all(np.bincount(codes) < 2):
        raise ValueError("corpus must have at least two labels and one label shared by two models")
    keep = np.all(np.isfinite(e), axis=0) & np.all(np.abs(e) <= float(max_abs), axis=0)
    x = e[:, keep]
    if x.shape[1] < 3:
        raise ValueError(f"fewer than 3 structures left after the max_abs = {max_abs} exclusion")
    if method == "spearman":
        x = _group_ranks(np.repeat(np.arange(m), x.shape[1]), x.ravel()).reshape(m, -1)
    z = np.stack([_standardise(row) for row in x])
    rho = np.clip(z @ z.T, -1.0, 1.0)
    iu = np.triu_indices(m, 1)
    rho_pairs = rho[iu]

    def stat(lab: np.ndarray) -> np.ndarray:  # lab (L, m) -> (L,)
        same = lab[:, iu[0]] == lab[:, iu[1]]
        ns = same.sum(1)
        return (same @ rho_pairs) / ns - ((~same) @ rho_pairs) / (rho_pairs.size - ns)

    obs = float(stat(codes[None])[0])
    sizes = np.bincount(codes)
    n_lab = math.factorial(m) // math.prod(math.factorial(int(k)) for k in sizes)
    if n_lab <= max_exact:
        null = stat(_labelings(codes))
        exact = True
        tol = 1e-12
        if alternative == "greater":
            k = np.count_nonzero(null >= obs - tol)
        elif alternative == "less":
            k = np.count_nonzero(null <= obs + tol)
        else:
            k = np.count_nonzero(np.abs(null - null.mean()) >= abs(obs - null.mean()) - tol)
        p = k / n_lab
        min_p = 1.0 / n_lab
        n_used = n_lab
    else:
        rng = np.random.default_rng(seed)
        labs = np.stack([rng.permutation(codes) for _ in range(int(n_perm))])
        null = stat(labs)
        exact = False
        if alternative == "two-sided":
            null, obs_c = null - null.mean(), obs - null.mean()
            p = _p_value(null, obs_c, "two-sided")
        else:
            p = _p_value(null, obs, alternative)
        min_p = 1.0 / (n_perm + 1)
        n_used = int(n_perm)
    same = codes[iu[0]] == codes[iu[1]]
    return CorpusCorrelationTest(
        statistic=obs, mean_same=float(rho_pairs[same].mean()), mean_cross=float(rho_pairs[~same].mean()),
        p_value=float(p), min_p=float(min_p), n_labelings=int(n_used), exact=exact, n_same_pairs=int(same.sum()),
        n_cross_pairs=int((~same).sum()), n_structures=int(keep.sum()), n_excluded=int((~keep).sum()), rho=rho,
        method=method, alternative=alternative)


# ============================================================================ binned error
@dataclasses.dataclass(frozen=True)
class BinnedError(ControlResult):
    """Error statistic per bin of a covariate (seed 001 Supplementary Notes: errors vs E_f, E_hull, force).

    Arrays over bins: ``edges`` (n_bins + 1), ``centers``, ``n`` (rows with a finite error), ``value`` (the
    ``statistic``; NaN where ``n < min_count``), ``median_abs``, ``n_removed`` (beyond the trim), ``lo``/``hi``
    (system-resampled percentile interval, NaN without ``groups``). ``trend_spearman``: Spearman rho between
    per-bin value and bin center over the bins with a value (the seed's monotonic-rise measure).
    ``n_outside``: rows whose covariate is non-finite or outside the edges.
    """

    edges: np.ndarray
    centers: np.ndarray
    n: np.ndarray
    value: np.ndarray
    median_abs: np.ndarray
    n_removed: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    statistic: str
    cutoff: float
    trend_spearman: float
    n_outside: int


def _grouped_median(codes: np.ndarray, v: np.ndarray, n_groups: int) -> np.ndarray:
    order = np.lexsort((v, codes))
    sv = v[order]
    cnt = np.bincount(codes, minlength=n_groups)
    start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    out = np.full(n_groups, np.nan)
    has = cnt > 0
    lo = start[has] + (cnt[has] - 1) // 2
    hi = start[has] + cnt[has] // 2
    out[has] = 0.5 * (sv[lo] + sv[hi])
    return out


def binned_error(
    x: Any,
    err: Any,
    bins: Any,
    groups: Any = None,
    *,
    statistic: str = "trimmed_mae",
    cutoff: float = TRIM_CUTOFF,
    min_count: int = 1,
    n_boot: int = N_BOOT,
    seed: int = 0,
    ci: tuple[float, float] = CI,
) -> BinnedError:
    """Per-bin error of ``err`` against a covariate ``x`` (e.g. reference E_f in 50 meV/atom slices).

    ``bins``: an int (equal-width bins over the finite range of ``x``) or increasing edges; bin j holds
    ``edges[j] <= x < edges[j+1]``, the last bin closed on the right (numpy's histogram convention).
    ``statistic``: ``"trimmed_mae"`` (default; :func:`trimmed_mae` with ``cutoff`` per bin), ``"mae"``
    (mean |e|) or ``"median"`` (median |e|, the seed's Fig. 9 form). Non-finite errors are left out.
    With ``groups`` every bin gets a system-resampled percentile interval: for the two means from one
    ``(n_boot, S)`` count matrix shared by all bins (per-(system, bin) sums, one matrix product); for the
    median from :func:`cluster_bootstrap` on each bin's rows. ``min_count``: bins with fewer rows get NaN
    (the seed uses 100).
    """
    xv = _as_1d_float(x, "x")
    ev = _as_1d_float(err, "err")
    if xv.shape != ev.shape:
        raise ValueError(f"x and err must have the same length, got {xv.size} and {ev.size}")
    if statistic not in ("trimmed_mae", "mae", "median"):
        raise ValueError(f"statistic must be 'trimmed_mae', 'mae' or 'median', got {statistic!r}")
    c = float(cutoff)
    if not c > 0:
        raise ValueError(f"cutoff must be > 0, got {cutoff!r}")
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        fx = xv[np.isfinite(xv)]
        if bins < 1 or fx.size == 0:
            raise ValueError("bins must be >= 1 and x must have finite values")
        edges = np.histogram_bin_edges(fx, bins=int(bins))
    else:
        edges = _as_1d_float(bins, "bins")
        if edges.size < 2 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
            raise ValueError("bins must be an int or at least two strictly increasing finite edges")
    nb = edges.size - 1
    inside = np.isfinite(xv) & (xv >= edges[0]) & (xv <= edges[-1])
    b = np.clip(np.searchsorted(edges, xv, side="right") - 1, 0, nb - 1)
    codes_sys = None
    if groups is not None:
        codes_sys, uniq = _labels(groups, xv.size, "groups")
    use = inside & np.isfinite(ev)
    a = np.abs(ev[use])
    bu = b[use]
    n = np.bincount(bu, minlength=nb)
    kept = a <= c
    n_removed = n - np.bincount(bu, kept.astype(np.int64), nb)
    med = _grouped_median(bu, a, nb)
    if statistic == "median":
        summand, weight = None, None
        value = med.copy()
    else:
        weight = kept if statistic == "trimmed_mae" else np.ones(a.size, bool)
        summand = np.where(weight, a, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.bincount(bu, summand, nb) / np.bincount(bu, weight.astype(np.float64), nb)
    small = n < min_count
    value[small] = np.nan
    lo = np.full(nb, np.nan)
    hi = np.full(nb, np.nan)
    if codes_sys is not None:
        su = codes_sys[use]
        n_groups = len(uniq)
        if summand is not None:
            flat = su * nb + bu
            num = np.bincount(flat, summand, n_groups * nb).reshape(n_groups, nb)
            den = np.bincount(flat, weight.astype(np.float64), n_groups * nb).reshape(n_groups, nb)
            lo, hi, _, _ = _ratio_bootstrap(num, den, _check_n_boot(n_boot), seed, _check_ci(ci))
        else:
            for j in np.flatnonzero(n > 0):  # a median has no sufficient statistic: one bootstrap per bin
                sel = bu == j
                r = cluster_bootstrap(np.median, a[sel], su[sel], n_boot=n_boot, seed=seed, ci=ci)
                lo[j], hi[j] = r.lo, r.hi
        lo[small] = np.nan
        hi[small] = np.nan
    centers = 0.5 * (edges[:-1] + edges[1:])
    good = np.isfinite(value)
    trend = math.nan
    if good.sum() >= 3:
        zero = np.zeros(int(good.sum()), np.int64)
        r, const = _group_pearson(zero, _group_ranks(zero, value[good]), _group_ranks(zero, centers[good]), 1)
        trend = math.nan if const[0] else float(r[0])
    return BinnedError(edges=edges, centers=centers, n=n.astype(np.int64), value=value, median_abs=med,
                       n_removed=n_removed.astype(np.int64), lo=lo, hi=hi, statistic=statistic, cutoff=c,
                       trend_spearman=trend, n_outside=int((~inside).sum()))
