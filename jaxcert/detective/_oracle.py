"""An independent cheap oracle: GFN2-xTB through ``tblite`` (docs/detective.md §6).

Indicative, not DFT: reported next to the committee in the escalation report, never used to decide.  Applies to
isolated molecules and dimers of elements H–Rn; absent ``tblite`` (an optional package), every function says so
and the report states that the oracle was skipped.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["available", "energies", "MAX_Z", "LABEL"]

#: GFN2-xTB parametrises H..Rn.
MAX_Z = 86
LABEL = "GFN2-xTB (tblite; indicative, not DFT)"


def available() -> bool:
    """True when ``tblite`` (with its ASE calculator) is importable."""
    return importlib.util.find_spec("tblite") is not None


def energies(configurations: Sequence[Any], deadline: float | None = None) -> np.ndarray | None:
    """GFN2-xTB energies (eV) of non-periodic ``ase.Atoms``; NaN where it does not apply, fails, or past
    ``deadline`` (a ``time.perf_counter()`` value); None without tblite."""
    import time

    if not available():
        return None
    from tblite.ase import TBLite

    out = np.full(len(configurations), np.nan)
    for k, atoms in enumerate(configurations):
        if deadline is not None and time.perf_counter() > deadline:
            break
        if any(atoms.get_pbc()) or max(atoms.numbers) > MAX_Z:
            continue
        a = atoms.copy()
        a.calc = TBLite(method="GFN2-xTB", verbosity=0, max_iterations=120)
        try:
            out[k] = float(a.get_potential_energy())
        except Exception:  # noqa: BLE001 - an SCF failure is no value, not an error of the search
            out[k] = np.nan
    return out
