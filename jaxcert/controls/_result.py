"""The result type shared by every control (``docs/controls.md``, "Results").

Controls are host-side statistics over many structures or compounds. Each returns a frozen dataclass
derived from :class:`ControlResult`: named, typed fields (floats, ints, numpy arrays, nested results),
immutable, and convertible to strict JSON with :meth:`ControlResult.to_dict` (numpy arrays become lists,
NaN and ±inf become ``None``, so ``json.dumps(..., allow_nan=False)`` always succeeds).
"""

from __future__ import annotations

import dataclasses

from jaxcert.core.result import Result, to_jsonable

__all__ = ["ControlResult", "to_jsonable"]


@dataclasses.dataclass(frozen=True)
class ControlResult(Result):
    """Base of every control's result: jaxcert's one :class:`~jaxcert.core.result.Result` (frozen fields plus
    ``to_dict``)."""
