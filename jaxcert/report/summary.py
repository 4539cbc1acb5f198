"""Host-side summaries of probe results (NumPy only): score aggregation, standard errors, formatting, strict JSON.

Shared by the report (:mod:`jaxcert.report`), its HTML page and the comparison board
(:mod:`jaxcert.report.compare`), so that none of them needs the others (``docs/reports.md``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcert.core.result import Status, to_jsonable

__all__ = ["UNSUPPORTED", "NOT_RUN", "AGGREGATIONS", "combine_scores", "to_jsonable", "format_defect", "element_stderr",
           "combined_stderr", "compilation_line", "noise_floor", "mean_noise_floor", "printable"]

#: Per-element status of an element the model has no parameters for (``certify(skip_unsupported=True)``).
UNSUPPORTED = Status.UNSUPPORTED.value
#: Per-element statuses that mean "not run": no score, no gate, excluded from aggregation.
NOT_RUN = (Status.SKIPPED.value, UNSUPPORTED)

#: Ways to combine probe scores into one overall score.
AGGREGATIONS = ("arithmetic", "geometric", "harmonic")

#: Characters a terminal may act on rather than show: C0 controls (ESC, BEL, CR, backspace, ...), DEL, C1
#: controls (U+0080-U+009F, among them the 8-bit CSI U+009B) and the bidirectional overrides and isolates
#: (U+202A-U+202E, U+2066-U+2069) that reorder what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: Any, keep: str = "\n\t") -> str:
    """``text`` made safe to print on a terminal: every control character (module constant ``_CONTROL``: C0
    but the characters in ``keep``, DEL, C1, bidirectional overrides) is replaced by a visible escape,
    ``\\x1b`` or ``\\u202e``, so an ESC, BEL or CSI sequence in data jaxcert did not write (a model's name,
    a report's message, a file name) is shown, not obeyed (docs/compare.md, "Hostile reports").

    ``keep=""`` also escapes newlines and tabs: for one-line fields such as a table cell."""
    def sub(m: re.Match) -> str:
        c = m.group()
        if c in keep:
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    return _CONTROL.sub(sub, str(text))


def combine_scores(scores: Sequence[float], method: str = "geometric") -> float:
    """Aggregate probe scores (docs/reports.md, "Scores"); non-finite scores (skips) are dropped."""
    s = np.asarray([x for x in scores if x is not None and np.isfinite(x)], float)
    if method not in ("arithmetic", "geometric", "harmonic"):
        raise ValueError(f"unknown aggregation method {method!r}; use arithmetic, geometric or harmonic")
    if s.size == 0:
        return float("nan")
    if method == "arithmetic":
        return float(s.mean())
    c = np.clip(s, 1e-12, 1.0)
    if method == "geometric":
        return float(np.exp(np.mean(np.log(c))))
    return float(c.size / np.sum(1.0 / c))


def format_defect(defect: float | None, stderr: float | None = None) -> str:
    """``1.234e-02`` or ``1.234e-02 ± 3.1e-03`` (``nan`` for a missing defect)."""
    if defect is None or not np.isfinite(defect):
        return "nan"
    text = f"{defect:.3e}"
    if stderr is not None and np.isfinite(stderr):
        text += f" ± {stderr:.1e}"
    return text


def element_stderr(details: Any) -> float | None:
    """The ``defect_stderr`` a probe recorded in one element's details (a finite scalar), else ``None``."""
    if not isinstance(details, dict) or details.get("defect_stderr") is None:
        return None
    v = np.asarray(details["defect_stderr"], float)
    if v.size != 1 or not np.isfinite(v):
        return None
    return float(v.reshape(()))


def combined_stderr(defects: Any, stderrs: list[float | None]) -> float | None:
    """Standard error of the mean of the non-NaN ``defects``: √(Σ se²)/n; ``None`` if one of them has none."""
    used = [se for d, se in zip(np.asarray(defects, float), stderrs, strict=True) if not np.isnan(d)]
    if not used or any(se is None for se in used):
        return None
    return float(np.sqrt(np.sum(np.square(used))) / len(used))

def noise_floor(stderr: float | None) -> float | None:
    """The defect |ratio − 1| an exact model shows on average when its ratio is estimated with standard error
    ``stderr``: E|X| = √(2/π)·se ≈ 0.80·se for X ~ N(0, se²) (the half-normal mean; docs/statistics.md).

    A statistical probe's defect is an absolute value, so sampling noise alone makes it positive: a defect
    near its floor is what an exact model gives at this trajectory length, one well above it is the model's."""
    if stderr is None or not np.isfinite(stderr):
        return None
    return float(np.sqrt(2.0 / np.pi) * stderr)


def mean_noise_floor(defects: Any, stderrs: list[float | None]) -> float | None:
    """The noise floor of an element-mean defect: the mean of the per-element floors over the elements that
    enter the mean (``None`` if one of them has no standard error).

    The mean of |ratio_e − 1| does not shrink with the number of elements, unlike its standard error, so a
    perfect model's element mean sits at this floor, not within one combined standard error of zero."""
    used = [se for d, se in zip(np.asarray(defects, float), stderrs, strict=True) if not np.isnan(d)]
    if not used or any(se is None for se in used):
        return None
    return float(np.mean([noise_floor(se) for se in used]))


def compilation_line(c: dict[str, Any]) -> str:
    """One line for a report's ``"compilation"`` object (jaxcert/core/compilation.py)."""
    return (f"compilation: {c.get('compiles', 0)} XLA programs compiled in {c.get('compile_s', 0):.1f} s, "
            f"{c.get('traces', 0)} traces ({c.get('trace_s', 0):.1f} s) and {c.get('lowerings', 0)} lowerings "
            f"({c.get('lower_s', 0):.1f} s); {c.get('store_loads', 0)} programs loaded from jaxcert's store, "
            f"{c.get('persistent_cache_hits', 0)} from JAX's cache (seconds summed over threads)")
