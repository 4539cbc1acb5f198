r"""One name per board row: ``family · checkpoint · precision`` (docs/board.md, "Names").

A report names its model the way the model's spec does (``nequix:nequix-mp-1-pft@float32``,
``jax-sevennet-7net-0@float32``, ``chgnet-0.3.0``, ``lj+curl(1)``), and two precisions of one model differ
only in an option.  The board, the terminal table and ``board.json`` show every row as

    family · checkpoint · precision [· gate profile, where it is not the default]

* **family**: the model's ``family`` where its metadata states one, else the head of its name (the part
  before the checkpoint, or before ``:``), written the way its authors write it (:data:`FAMILY_NAMES`:
  ``jax-sevennet`` → SevenNet, ``nequix`` → Nequix, ``chgnet`` → CHGNet, ``lj`` → LJ); a head not in
  the table is shown as written;
* **checkpoint**: the part of the name from the checkpoint the model states (``model.checkpoint`` or the
  card's) to the options, so a head selected from a multi-head checkpoint stays (``7net-mf-0-PBE``); a
  ``module:attr`` spec gives its ``attr``; an analytic model has none.  A defect wrapper (``+curl(1)``)
  is appended;
* **precision**: the precision the network computes in (:func:`jaxcert.report.gates.model_precision`):
  ``float32`` for ``@float32``, else the structures' dtype;
* the **gate profile** is added when the board is judged under another profile than ``exact``
  (``· reference gates``).

So ``nequix:nequix-mp-1-pft@float32`` reads ``Nequix · nequix-mp-1-pft · float32`` and ``lj`` on float64
structures ``LJ · float64``.  Nothing is inferred beyond the name and the metadata the report carries.

Imports no JAX.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["FAMILY_NAMES", "SEPARATOR", "Identity", "identity", "label"]

#: How each known spec head's family is written (the model authors' spelling).
FAMILY_NAMES: dict[str, str] = {
    "nequix": "Nequix", "jax-sevennet": "SevenNet", "torch-sevennet": "SevenNet", "sevennet": "SevenNet",
    "chgnet": "CHGNet", "mace": "MACE", "orb": "Orb", "fairchem": "FAIRChem", "lj": "LJ", "emt": "EMT",
    "eam": "EAM", "morse": "Morse", "sw": "SW", "tersoff": "Tersoff",
}
#: Between the parts of a label.
SEPARATOR = " · "
_DEFAULT_PROFILE = "exact"


@dataclasses.dataclass(frozen=True)
class Identity:
    """A row's name in parts: ``family``, ``checkpoint`` (``None`` for an analytic model), ``precision``."""

    family: str
    checkpoint: str | None
    precision: str

    def label(self, profile: str | None = None) -> str:
        """``family · checkpoint · precision``, plus ``· {profile} gates`` for a non-default profile."""
        return label(self.family, self.checkpoint, self.precision, profile)


def _text(x: Any) -> str | None:
    s = None if x is None else str(x).strip()
    return s if s and s != "None" else None


def identity(model: Mapping[str, Any] | str | None, card: Mapping[str, Any] | None, precision: str) -> Identity:
    """The parts of a row's name from the report's ``model`` (a dict with ``name``, or the name alone), its
    ``card`` and the network precision (module docstring)."""
    meta = model if isinstance(model, Mapping) else {"name": model}
    name = _text(meta.get("name")) or "model"
    base = name.partition("@")[0]  # the options (@float32, @max_batch=8) are said by the precision
    base, plus, rest = base.partition("+")  # a defect wrapper: lj+curl(1)
    variant = plus + rest if plus else ""
    ckpt = _text(meta.get("checkpoint")) or _text((card or {}).get("checkpoint"))
    head, shown = base, None
    if ckpt and ckpt in base:
        at = base.rindex(ckpt)
        head, shown = (base[:at].rstrip(":-_/ ") or base), base[at:]
    elif ":" in base:
        head, _, tail = base.partition(":")
        shown = os.path.basename(tail.rstrip("/")) or None
    elif ckpt:
        shown = ckpt
    family = _text(meta.get("family")) or FAMILY_NAMES.get(head.lower(), head)
    checkpoint = ((shown or "") + variant) or None
    return Identity(family=family, checkpoint=checkpoint, precision=str(precision))


def label(family: str, checkpoint: str | None, precision: str | None, profile: str | None = None) -> str:
    """``family · checkpoint · precision`` (empty parts left out), plus ``· {profile} gates`` when ``profile``
    is given and is not ``exact``."""
    parts = [p for p in (family, checkpoint, precision) if p]
    if profile and profile != _DEFAULT_PROFILE:
        parts.append(f"{profile} gates")
    return SEPARATOR.join(parts)
