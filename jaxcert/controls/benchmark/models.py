"""The benchmark's models: loading each spec once, which elements a model supports, and total energies.

Analytic models are JAX :class:`~jaxcert.core.model.Model` s evaluated in one vmapped, jitted call per atom
count; bridged models (CHGNet, SevenNet through ``jaxcert_bridges``) are evaluated on the host in their
backend's batched torch calls.  Bridged models are optional: a spec that does not load is recorded with the
reason and the run goes on without it.
"""

from __future__ import annotations

import importlib
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from ase.data import atomic_numbers

from jaxcert import models as zoo
from jaxcert.controls.benchmark.config import BRIDGED_HEADS, INSTALL_BRIDGES, head, model_key
from jaxcert.controls.benchmark.geometry import structure
from jaxcert.controls.benchmark.results import ModelLoad
from jaxcert.core.result import Status
from jaxcert.core.structure import stack

__all__ = ["ModelLoader", "bridged", "supports", "host_energies", "energies"]

def _import_bridges(module: str = "jaxcert_bridges") -> types.ModuleType:
    """``jaxcert_bridges`` (or one of its modules), imported only when a bridged model is asked for.

    Lazy on purpose (with ``geometry._ase_bulk``, the benchmark's only lazy imports): the bridges import torch
    and the checkpoints' packages, which ``import jaxcert`` must not pull in and which may not be installed at
    all (then ``ImportError``).
    """
    return importlib.import_module(module)


class ModelLoader:
    """Loads each spec once (across sections) and records how it went (:attr:`info`, by report key)."""

    def __init__(self, precision: str, log: Callable[[str], None]):
        self.precision, self.log = precision, log
        self.cache: dict[str, Any] = {}
        self.info: dict[str, ModelLoad] = {}

    def get(self, spec: str) -> tuple[Any, ModelLoad]:
        """The model of ``spec`` (``None`` when it did not load) and its load record."""
        key = model_key(spec, self.precision)
        if key not in self.cache:
            self.cache[key], self.info[key] = self._load(key)
            i = self.info[key]
            self.log(f"model {key}: {i.status.value}" + (f" ({i.reason})" if i.reason else
                                                         f" ({i.load_s or 0:.1f} s)"))
        return self.cache[key], self.info[key]

    @staticmethod
    def _load(spec: str) -> tuple[Any, ModelLoad]:
        t0 = time.perf_counter()
        if head(spec) in BRIDGED_HEADS:
            try:
                bridges = _import_bridges()
            except ImportError as err:
                return None, ModelLoad(Status.ERROR, "bridged", reason=f"{err}; install: {INSTALL_BRIDGES}")
            try:
                model = bridges.load(spec)
            except Exception as err:  # noqa: BLE001 - a missing checkpoint or torch: recorded, the run goes on
                return None, ModelLoad(Status.ERROR, "bridged", reason=f"{type(err).__name__}: {err}")
            return model, ModelLoad(Status.OK, "bridged", name=model.name, load_s=time.perf_counter() - t0,
                                    info=dict(model.info))
        model = zoo.get(spec)
        return model, ModelLoad(Status.OK, "analytic", name=model.name, load_s=time.perf_counter() - t0,
                                info=dict(model.info))


def bridged(model: Any) -> bool:
    """Whether ``model`` is evaluated by a host backend (torch) rather than by JAX."""
    return hasattr(model.energy_fn, "backend")


def supports(model: Any, symbols: Sequence[str]) -> bool:
    """Whether ``model`` supports every element of ``symbols``."""
    return model.elements is None or all(atomic_numbers[s] in model.elements for s in symbols)


def host_energies(model: Any, atoms_list: Sequence[Any]) -> np.ndarray:
    """Total energies (eV) of ``atoms_list`` with a bridged model, batched into the backend's torch calls.

    If the batch fails (a structure the model refuses), every structure is retried alone and the ones that fail
    get NaN.
    """
    system = _import_bridges("jaxcert_bridges.backend").System
    backend = model.energy_fn.backend
    systems = [system(np.asarray(a.positions, np.float64), np.asarray(a.cell, np.float64),
                      np.asarray(a.numbers, int), (True, True, True)) for a in atoms_list]
    if not systems:
        return np.zeros(0)
    try:
        return np.asarray(backend.energies(systems, np.float64), np.float64)
    except Exception:  # noqa: BLE001 - retried one by one below
        out = np.full(len(systems), np.nan)
        for i, s in enumerate(systems):
            try:
                out[i] = float(np.asarray(backend.energies([s], np.float64))[0])
            except Exception:  # noqa: BLE001 - this structure is refused: NaN
                pass
        return out


@jax.jit
def _vmapped_energy(model: Any, batch: Any) -> Any:
    return jax.vmap(lambda s: model.energy_of(model.params, s))(batch)


def _jax_energies(model: Any, atoms_list: Sequence[Any]) -> np.ndarray:
    """Total energies (eV) with an analytic model: one vmapped, jitted call per atom count (images: the maximum)."""
    out = np.full(len(atoms_list), np.nan)
    sizes = np.array([len(a) for a in atoms_list])
    for n in np.unique(sizes):
        idx = np.flatnonzero(sizes == n)
        batch = stack([model.prepare(structure(atoms_list[i])) for i in idx])
        out[idx] = np.asarray(_vmapped_energy(model, batch), np.float64)
    return out


def energies(model: Any, atoms_list: Sequence[Any]) -> np.ndarray:
    """Total energies (eV) of ``atoms_list`` with any model (host batches for bridged ones)."""
    return host_energies(model, atoms_list) if bridged(model) else _jax_energies(model, atoms_list)
