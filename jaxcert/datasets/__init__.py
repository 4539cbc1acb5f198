"""Reference data sets read from installed packages, behind one registry: ``docs/datasets.md``.

``jaxcert.datasets.get(name)`` loads a data set by name; ``names()`` lists them. Nothing is downloaded:
each loader reads data that ships inside an installed package (ASE, pymatgen) and says which package to
install when it is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["register", "get", "names", "DatasetUnavailable"]

_REGISTRY: dict[str, tuple[Callable[[], Any], str]] = {}


class DatasetUnavailable(RuntimeError):
    """The package that ships a data set is not installed (the message names it)."""


def register(name: str, loader: Callable[[], Any], description: str) -> None:
    """Register ``loader`` (a zero-argument function) under ``name``."""
    if name in _REGISTRY:
        raise ValueError(f"dataset {name!r} is already registered")
    _REGISTRY[name] = (loader, description)


def get(name: str) -> Any:
    """Load the data set ``name`` (see :func:`names`)."""
    try:
        loader, _ = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
    return loader()


def names() -> dict[str, str]:
    """Registered data-set names with a one-line description each."""
    return {k: d for k, (_, d) in sorted(_REGISTRY.items())}
