r"""The model card of a report: what jaxcert can know about a model without guessing (docs/board.md, "Model cards").

Every certification report carries it as ``"card"``:

* ``parameters``: the sum of the sizes of the model's parameter leaves (``Model.params``, its only pytree
  leaf); ``None`` for a bridged model, whose weights live in another framework (then
  ``parameters_stated``, where the model's metadata states a count);
* ``cutoff_A`` (Å; ``"per composition"`` when the cutoff is a function), ``species`` (the symbols of
  ``Model.elements``; ``None``: any element), ``precision`` (the network's own precision where the model
  states one, e.g. ``@float32``, else "follows the structures"), ``dtype`` (the run's);
* ``packages``: versions of jaxcert, jax, jaxlib and the model's package (nequix, sevenn, chgnet, ...),
  ``checkpoint`` (the checkpoint's name where the model states it);
* ``files``: for each file the model was loaded from (the ``checkpoint_file`` and ``weights`` of its
  metadata) the path, size and SHA-256, computed here; ``stated_sha256`` where the model's metadata carries
  the hash of a file it was converted from (SevenNet);
* ``training_data``: what the model's package states about its training set, quoted with where it says
  so (e.g. nequix's checkpoint config ``train_path``); ``None`` where the package states nothing: jaxcert
  never infers a training set from a model's name;
* ``device``: where the report was computed (:func:`jaxcert.core.device.device_name`).

The values come from :class:`~jaxcert.core.model.Model` itself and its ``info`` metadata, which the
adapters and registry models fill (``jaxcert/adapters/nequix.py``, ``jaxcert/models/sevennet.py``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import re
from typing import Any

import jax
import numpy as np
from ase.data import chemical_symbols

from jaxcert.core.device import device_name
from jaxcert.core.model import Model

__all__ = ["model_card", "file_sha256", "PACKAGES"]

#: model-name prefix → the distribution whose version the card records.
PACKAGES = {"nequix": "nequix", "jax-sevennet": "sevenn", "torch-sevennet": "sevenn", "sevennet": "sevenn",
            "chgnet": "chgnet", "mace": "mace-torch", "orb": "orb-models", "fairchem": "fairchem-core",
            "mlip": "mlip", "jax-md": "jax-md"}
_FILE_KEYS = ("checkpoint_file", "weights")
_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str) -> str:
    """SHA-256 (hex) of the file at ``path``, read in 1 MiB blocks; remembered per (path, size, mtime)."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def _symbols(zs: Any) -> list[str] | None:
    if zs is None:
        return None
    return [chemical_symbols[int(z)] if isinstance(z, (int, np.integer)) else str(z) for z in zs]


def model_card(model: Model, dtype: Any = None) -> dict[str, Any]:
    """The card of ``model`` for a run in ``dtype`` (module docstring); plain JSON types only."""
    info = dict(model.info)
    bridged = getattr(model.energy_fn, "backend", None) is not None
    leaves = [x for x in jax.tree_util.tree_leaves(model.params) if hasattr(x, "size")]
    stated = info.get("parameters")
    card: dict[str, Any] = {
        "name": model.name,
        "parameters": None if bridged else int(sum(int(np.size(x)) for x in leaves)),
        "parameters_counted_as": ("not counted: a bridged model's weights live outside JAX" if bridged else
                                  "sum of the sizes of the model's parameter leaves"),
    }
    if stated is not None and str(stated).isdigit() and (bridged or int(stated) != card["parameters"]):
        card["parameters_stated"] = int(stated)
    card["cutoff_A"] = ("per composition" if callable(model.cutoff) else
                        None if model.cutoff is None else float(model.cutoff))
    card["species"] = _symbols(model.elements)
    card["precision"] = info.get("precision") or "follows the structures"
    card["dtype"] = None if dtype is None else str(np.dtype(dtype))
    card["conservative_forces"] = bool(model.conservative_forces)
    card["stress_head"] = model.stress_fn is not None
    head = model.name.split(":", 1)[0].split("@", 1)[0]
    dists = ["jaxcert", "jax", "jaxlib"] + [d for p, d in PACKAGES.items() if head == p or head.startswith(p + "-")]
    card["packages"] = {d: _version(d) for d in dict.fromkeys(dists)}
    card["checkpoint"] = info.get("checkpoint")
    files = []
    for key in _FILE_KEYS:
        path = info.get(key)
        if path and os.path.isfile(str(path)):
            files.append({"role": key, "path": str(path), "bytes": os.path.getsize(str(path)),
                          "sha256": file_sha256(str(path))})
    card["files"] = files
    m = re.search(r"sha256 ([0-9a-f]{64})", str(info.get("source", "")))
    card["stated_sha256"] = m.group(1) if m else None
    card["source"] = info.get("source")
    card["training_data"] = info.get("training_data")
    card["device"] = device_name()
    return card
