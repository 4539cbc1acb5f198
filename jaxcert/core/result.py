"""One status vocabulary and one result base for everything jaxcert reports (docs/architecture.md, "Results").

:class:`Status` names every outcome a probe, λ, a relaxation, an attack, a control or the detective can
report, with one sentence each; its ``value`` is the string written to JSON ("ok", "non-finite", ...).
Inside jitted programs a status travels as its integer :attr:`Status.code` (an ``int32`` array), and
:meth:`Status.of` turns it back.

:class:`Result` is the frozen base of result types: named, typed fields, immutable, and
:meth:`Result.to_dict` gives strict JSON through the one :func:`to_jsonable` (arrays to lists, NaN and
±inf to ``None``, nested results to dicts), so ``json.dumps(..., allow_nan=False)`` always succeeds.

NumPy only: the report room imports this module and imports no JAX.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

import numpy as np

__all__ = ["Status", "Result", "to_jsonable"]


class Status(enum.Enum):
    """An outcome, written to JSON as its value.

    ``code`` is the integer a jitted program carries (``OK`` 0, ``NON_FINITE`` 1, ``SKIPPED`` 2, ``ERROR`` 3,
    ``UNSUPPORTED`` 4, ``NOT_CONVERGED`` 5); ``message`` says in one sentence what it means for the number.
    """

    OK = "ok"
    NON_FINITE = "non-finite"
    SKIPPED = "skipped"
    ERROR = "error"
    UNSUPPORTED = "unsupported"
    NOT_CONVERGED = "not converged"

    @property
    def code(self) -> int:
        return _CODES[self]

    @property
    def message(self) -> str:
        return _MESSAGES[self]

    @property
    def ran(self) -> bool:
        """True when the computation ran (its numbers exist, finite or not); False for skipped/unsupported."""
        return self not in (Status.SKIPPED, Status.UNSUPPORTED)

    @classmethod
    def of(cls, x: Any) -> Status:
        """The status of an integer code (an int or a 0-d array), a value string or a Status."""
        if isinstance(x, Status):
            return x
        if isinstance(x, str):
            return cls(x)
        return _BY_CODE[int(np.asarray(x))]

    def __str__(self) -> str:
        return self.value


_CODES = {Status.OK: 0, Status.NON_FINITE: 1, Status.SKIPPED: 2, Status.ERROR: 3, Status.UNSUPPORTED: 4,
          Status.NOT_CONVERGED: 5}
_BY_CODE = {c: s for s, c in _CODES.items()}
_MESSAGES = {
    Status.OK: "computed; the number is the result",
    Status.NON_FINITE: "the model returned NaN or inf: the check fails (score 0, gate failed)",
    Status.SKIPPED: "does not apply to this structure or model (e.g. stress of a molecule); not scored",
    Status.ERROR: "the computation raised; the message says why and the run went on",
    Status.UNSUPPORTED: "the model does not support this element or structure; not scored",
    Status.NOT_CONVERGED: "an iteration stopped at its step cap before its tolerance; the number is provisional",
}


def to_jsonable(x: Any) -> Any:
    """``x`` as strict-JSON types: dicts and sequences recursively, arrays (NumPy or JAX, typed PRNG keys
    as strings) to nested lists, non-finite floats to ``None``, :class:`Status` to its value, results and
    other dataclasses to dicts; anything else to ``str``."""
    if isinstance(x, Result):
        return x.to_dict()
    if isinstance(x, Status):
        return x.value
    if isinstance(x, enum.Enum):
        return to_jsonable(x.value)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: to_jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, np.ndarray):
        try:  # jax arrays, including typed PRNG keys
            x = np.asarray(x)
        except TypeError:
            return str(x)
    if isinstance(x, np.ndarray):
        return _array_to_json(x)
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if x is None or isinstance(x, str):
        return x
    return str(x)


def _array_to_json(x: np.ndarray) -> Any:
    """A numpy array as nested lists of JSON types, without a Python call per element for numbers."""
    if x.ndim == 0:
        return to_jsonable(x.item())
    kind = x.dtype.kind
    if kind in "biu":
        return x.tolist()  # bool/int arrays: tolist gives Python bools and ints
    if kind == "f":
        finite = np.isfinite(x)
        if finite.all():
            return x.tolist()
        obj = x.astype(object)
        obj[~finite] = None
        return obj.tolist()
    return [to_jsonable(v) for v in x.tolist()]


@dataclasses.dataclass(frozen=True)
class Result:
    """Base of jaxcert's result types: frozen fields plus :meth:`to_dict` (strict-JSON ready)."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON types (see :func:`to_jsonable`)."""
        return {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
