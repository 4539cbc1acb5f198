"""The ``nequix:PATH[@float32|@float64][,capacity=N]`` model spec of the command line (docs/adapters.md §4).

Kept apart from :mod:`jaxcert.adapters.nequix` (the adapter room, which the models room may import) so that
the spec parser stays with the other model specs.
"""

from __future__ import annotations

from typing import Any

from jaxcert.adapters.nequix import CACHE_DIR, DEFAULT_CAPACITY, NequixUnavailable
from jaxcert.core.inputs import InputError
from jaxcert.core.model import Model

__all__ = ["from_spec"]


def from_spec(args: str, options: list[str]) -> Any:
    """The CLI spec ``nequix:PATH[@float32|@float64][,capacity=N]`` (:func:`jaxcert.models.from_spec`).

    ``args`` is the checkpoint path (``~`` expanded); ``options`` the words after ``@``: "float32" or
    "float64" (the network's precision, see :func:`nequix_energy`) and ``capacity=N``.

    Raises:
      ValueError: no path, a missing file, an unknown option, or nequix not installed (the message says how).
    """
    if not args.strip():
        raise InputError("nequix:PATH needs the path of a .nqx checkpoint (nequix keeps downloaded ones in "
                         f"{CACHE_DIR})")
    dtype: str | None = None
    capacity: int | None = DEFAULT_CAPACITY
    for o in options:
        key, eq, val = o.partition("=")
        if o in ("float32", "float64"):
            if dtype is not None and o != dtype:
                raise InputError(f"conflicting options {dtype!r} and {o!r}")
            dtype = o
        elif key == "capacity" and eq:
            if val.lower() == "none":
                capacity = None
            elif val.isdigit() and int(val) > 0:
                capacity = int(val)
            else:
                raise InputError(f"capacity must be a positive integer or 'none', got {val!r}")
        else:
            raise InputError(f"unknown option {o!r} for nequix (float32, float64, capacity=N)")
    try:
        return Model.from_nequix(args, dtype=dtype, capacity=capacity)
    except (OSError, NequixUnavailable) as err:
        raise InputError(str(err)) from None
