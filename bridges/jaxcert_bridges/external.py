r"""User-supplied checkpoints of MACE, Orb and FAIRChem models, through their own ASE calculators.

No weights of these families ship in a wheel, so nothing here downloads: each
loader takes a local checkpoint path.  They enter through
:func:`jaxcert_bridges.from_ase_calculator` (energy, forces and stress from the
package's calculator; H·v by central differences of forces), because none of
these packages can be installed and exercised on the machines this project is
tested on: ``mace-torch`` pins ``e3nn==0.4.4`` while SevenNet needs e3nn 0.6,
and Orb / FAIRChem weights are not available offline.  Each loader raises an
``ImportError`` naming the package to install.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["mace_calculator", "orb_calculator", "fairchem_calculator"]


def _need(path: str) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path!r} not found (nothing is downloaded: give a local file)")


def mace_calculator(path: str, device: str = "cpu", default_dtype: str = "float64") -> Any:
    """MACE's ``MACECalculator`` for a local checkpoint (needs ``pip install mace-torch``)."""
    _need(path)
    try:
        from mace.calculators import MACECalculator
    except ImportError as err:
        raise ImportError("mace:PATH needs mace-torch (pip install mace-torch; it pins e3nn==0.4.4, "
                          "which conflicts with sevenn: use a separate environment)") from err
    return MACECalculator(model_paths=path, device=device, default_dtype=default_dtype)


def orb_calculator(path: str, device: str = "cpu") -> Any:
    """Orb's ASE calculator for a local checkpoint (needs ``pip install orb-models``)."""
    _need(path)
    try:
        from orb_models.forcefield import pretrained
        from orb_models.forcefield.calculator import ORBCalculator
    except ImportError as err:
        raise ImportError("orb:PATH needs orb-models (pip install orb-models)") from err
    model = pretrained.orb_v3_conservative_inf_omat(weights_path=path, device=device)
    return ORBCalculator(model, device=device)


def fairchem_calculator(path: str, device: str = "cpu") -> Any:
    """FAIRChem's ASE calculator for a local checkpoint (needs ``pip install fairchem-core``)."""
    _need(path)
    try:
        from fairchem.core import FAIRChemCalculator, pretrained_mlip
    except ImportError as err:
        raise ImportError("fairchem:PATH needs fairchem-core (pip install fairchem-core)") from err
    predictor = pretrained_mlip.load_predict_unit(path, device=device)
    return FAIRChemCalculator(predictor, task_name="omat")
