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


# Loaders: one private module each (pymatgen is never imported; its data files are located and read).
from jaxcert.datasets._aflow_prototypes import load_aflow_prototypes  # noqa: E402
from jaxcert.datasets._dcdft import load_dcdft  # noqa: E402
from jaxcert.datasets._moduli import load_experimental_moduli, load_reference_states  # noqa: E402
from jaxcert.datasets._mp2020 import load_mp2020_corrections  # noqa: E402
from jaxcert.datasets._mp_raw_vs_exp import load_mp_raw_vs_exp  # noqa: E402

register("dcdft", load_dcdft,
         "71 elemental crystals, WIEN2k PBE EOS (V0 Å3/atom, B0 GPa, B') + experiment for 58 (ASE)")
register("mp-raw-vs-exp", load_mp_raw_vs_exp,
         "334 compounds: raw MP GGA(+U) formation energy vs experimental enthalpy, eV/atom (pymatgen)")
register("mp2020-corrections", load_mp2020_corrections,
         "MP2020 anion and GGA/GGA+U mixing constants, eV per atom of the corrected species (pymatgen)")
register("aflow-prototypes", load_aflow_prototypes,
         "288 AFLOW prototype structures with an all-metal filter (pymatgen)")
register("experimental-moduli", load_experimental_moduli,
         "experimental K, G, E (GPa) and Poisson ratio per element, magnetic-3d flag (pymatgen)")
register("ase-reference-states", load_reference_states,
         "ASE's reference crystal structure and lattice constant per element (ase.data)")
