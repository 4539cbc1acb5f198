"""The result type shared by every control (``docs/controls.md``, "Results").

Controls are host-side statistics over many structures or compounds. Each returns a frozen dataclass
derived from :class:`ControlResult`: named, typed fields (floats, ints, numpy arrays, nested results),
immutable, and convertible to strict JSON with :meth:`ControlResult.to_dict` (numpy arrays become lists,
NaN and ±inf become ``None``, so ``json.dumps(..., allow_nan=False)`` always succeeds).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

__all__ = ["ControlResult", "to_jsonable"]


def to_jsonable(x: Any) -> Any:
    """``x`` as plain JSON types: arrays to lists, non-finite floats to ``None``, results to dicts."""
    if isinstance(x, ControlResult):
        return x.to_dict()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: to_jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if hasattr(x, "__array__") and not isinstance(x, (str, bytes)):
        a = np.asarray(x)
        return to_jsonable(a.item()) if a.ndim == 0 else [to_jsonable(v) for v in a.tolist()]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(float(x)) else None
    return x


@dataclasses.dataclass(frozen=True)
class ControlResult:
    """Base of every control's result: frozen fields plus :meth:`to_dict` (strict-JSON ready)."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON types (see :func:`to_jsonable`)."""
        return {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
