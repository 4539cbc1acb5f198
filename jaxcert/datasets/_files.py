"""Locate a data file inside an installed package without importing the package (``docs/datasets.md``)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from jaxcert.datasets import DatasetUnavailable

__all__ = ["package_roots", "package_file", "read_json"]


def package_roots(package: str) -> list[Path]:
    """The directories of an installed top-level ``package`` (several for a namespace package); [] if absent.

    ``importlib.util.find_spec`` finds the package without executing it, so locating pymatgen's data files
    costs no pymatgen import.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    if spec.origin:
        return [Path(spec.origin).parent]
    return []


def package_file(package: str, relpath: str, pip: str | None = None) -> Path:
    """The path of ``relpath`` inside the installed ``package``.

    Raises :class:`~jaxcert.datasets.DatasetUnavailable`, naming ``pip install <pip>``, when the package is not
    installed or this version of it does not ship the file.
    """
    pip = pip or package
    roots = package_roots(package)
    if not roots:
        raise DatasetUnavailable(f"this data set ships with {package!r}, which is not installed: pip install {pip}")
    for root in roots:
        path = root / relpath
        if path.is_file():
            return path
    where = ", ".join(os.fspath(r) for r in roots)
    raise DatasetUnavailable(
        f"the installed {package!r} ({where}) does not ship {relpath!r}; "
        f"install a version that does: pip install -U {pip}"
    )


def read_json(path: Path) -> Any:
    """Parse a ``.json`` or ``.json.gz`` file (NaN literals allowed, as pymatgen writes them)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)
