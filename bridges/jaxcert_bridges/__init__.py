r"""jaxcert-bridges: PyTorch models and ASE calculators as :class:`jaxcert.Model` (and back).

.. code-block:: python

    import jaxcert, jaxcert_bridges as jb
    model = jb.chgnet("0.3.0")                       # exact derivatives by torch autograd
    report = jaxcert.certify(model, "Si")
    emt = jb.from_ase_calculator(ase.calculators.emt.EMT())   # finite-difference H·v
    calc = jb.to_ase_calculator(jaxcert.models.get("lj"))      # any jaxcert Model in ASE

Every bridge is one mechanism (:mod:`jaxcert_bridges._jax`): the energy
E(R, h) is a ``jax.custom_jvp`` over ``jax.pure_callback`` whose first
derivatives (∂E/∂R, ∂E/∂h) and directional second derivatives (H·t) come from
the host backend — exact for torch models, central differences for ASE
calculators.  ``import jaxcert`` never imports this package or torch; torch is
imported only when a torch bridge is used.
"""

from __future__ import annotations

from typing import Any

from jaxcert_bridges._jax import model_from_backend
from jaxcert_bridges.ase_bridge import from_ase_calculator, to_ase_calculator
from jaxcert_bridges.backend import Backend, System

__version__ = "0.1.0"

__all__ = [
    "Backend", "System", "model_from_backend", "from_ase_calculator", "to_ase_calculator", "from_torch",
    "chgnet", "sevennet", "mace", "orb", "fairchem", "load", "backend_of", "__version__",
]


def from_torch(*args: Any, **kw: Any):
    """A torch potential as a jaxcert Model; see :func:`jaxcert_bridges.torch_bridge.from_torch`."""
    from jaxcert_bridges.torch_bridge import from_torch as _from_torch

    return _from_torch(*args, **kw)


def backend_of(model) -> Backend:
    """The host backend behind a bridged model (for its evaluation ``counts``)."""
    backend = getattr(model.energy_fn, "backend", None)
    if backend is None:
        raise ValueError(f"model {model.name!r} is not a bridged model")
    return backend


def _info(pot) -> dict[str, str]:
    return {k: str(v) for k, v in pot.info().items()}


def chgnet(version: str = "0.3.0", precision: str | None = None, hvp: str = "exact", max_batch: int = 64,
           skin: float = 0.5, isolated_atoms: str = "warn"):
    """CHGNet ("0.3.0" or "r2scan", shipped in the wheel; or a checkpoint path) with exact autograd derivatives.

    ``precision``: "float32", "float64" or None (follow the JAX dtype of each call).
    ``hvp``: "exact" (double backward) or "fd" (central differences of exact forces).
    ``skin``: graph reuse between nearby geometries in Å (0: a fresh graph per evaluation; see
    :mod:`jaxcert_bridges.chgnet_potential`).
    ``isolated_atoms``: "warn" (evaluate atoms without neighbours within the cutoff, as CHGNet's ASE
    calculator does, and record its warning in the report) or "error" (refuse, the converter's default).
    """
    from jaxcert_bridges.chgnet_potential import CHGNetPotential
    from jaxcert_bridges.torch_bridge import TorchBackend

    pot = CHGNetPotential(version, skin=skin, isolated_atoms=isolated_atoms)
    return model_from_backend(TorchBackend(pot, precision=precision, hvp=hvp, max_batch=max_batch),
                              info={**_info(pot), "hvp_path": hvp, **({"precision": precision} if precision else {})})


def sevennet(model: str = "7net-0", modal: str | None = None, precision: str | None = None, hvp: str = "exact",
             max_batch: int = 64, skin: float = 0.5):
    """SevenNet ("7net-0", "7net-mf-0" with ``modal`` "PBE"/"R2SCAN", "7net-l3i5"; or a checkpoint path).

    ``skin``: graph reuse between nearby geometries in Å (0: a fresh graph per evaluation; see
    :mod:`jaxcert_bridges.sevennet_potential`).
    """
    from jaxcert_bridges.sevennet_potential import SevenNetPotential
    from jaxcert_bridges.torch_bridge import TorchBackend

    pot = SevenNetPotential(model, modal=modal, skin=skin)
    return model_from_backend(TorchBackend(pot, precision=precision, hvp=hvp, max_batch=max_batch),
                              info={**_info(pot), "hvp_path": hvp, **({"precision": precision} if precision else {})})


def mace(path: str, precision: str | None = None, device: str = "cpu"):
    """A user-supplied MACE checkpoint through MACE's ASE calculator (needs ``mace-torch``; FD second derivatives)."""
    from jaxcert_bridges.external import mace_calculator

    dtype = precision or "float64"
    return from_ase_calculator(mace_calculator(path, device=device, default_dtype=dtype), name=f"mace:{path}")


def orb(path: str, precision: str | None = None, device: str = "cpu"):
    """A user-supplied Orb checkpoint through its ASE calculator (needs ``orb-models``; FD second derivatives)."""
    from jaxcert_bridges.external import orb_calculator

    return from_ase_calculator(orb_calculator(path, device=device), precision=precision, name=f"orb:{path}")


def fairchem(path: str, precision: str | None = None, device: str = "cpu"):
    """A user-supplied FAIRChem checkpoint via its ASE calculator (needs ``fairchem-core``; FD second derivatives)."""
    from jaxcert_bridges.external import fairchem_calculator

    return from_ase_calculator(fairchem_calculator(path, device=device), precision=precision,
                               name=f"fairchem:{path}")


def load(spec: str):
    """Resolve a CLI ``--model`` spec for a bridged model.

    ``chgnet`` | ``chgnet:r2scan`` | ``torch-sevennet`` | ``torch-sevennet:7net-0`` |
    ``torch-sevennet:7net-mf-0:PBE`` (``sevennet:...`` is the same bridge; jaxcert's native SevenNet is
    ``jax-sevennet``) | ``mace:PATH`` | ``orb:PATH`` | ``fairchem:PATH`` |
    ``ase:module:attr`` (an ASE calculator instance or a zero-argument factory).
    Options may follow after ``@``: ``chgnet@float64``, ``chgnet@fd`` (comma-separated:
    ``float32``/``float64`` precision, ``exact``/``fd`` second derivatives).
    """
    import importlib

    spec, _, opts = spec.partition("@")
    kw: dict[str, Any] = {}
    for o in filter(None, (x.strip() for x in opts.split(","))):
        if o in ("float32", "float64"):
            kw["precision"] = o
        elif o in ("exact", "fd"):
            kw["hvp"] = o
        else:
            raise ValueError(f"unknown option {o!r} in model spec (float32, float64, exact, fd)")
    head, _, rest = spec.partition(":")
    if head == "chgnet":
        return chgnet(rest or "0.3.0", **kw)
    if head in ("torch-sevennet", "sevennet"):
        name, _, modal = rest.partition(":")
        return sevennet(name or "7net-0", modal=modal or None, **kw)
    if head in ("mace", "orb", "fairchem"):
        kw.pop("hvp", None)
        return {"mace": mace, "orb": orb, "fairchem": fairchem}[head](rest, **kw)
    if head == "ase":
        mod, _, attr = rest.partition(":")
        if not mod or not attr:
            raise ValueError(f"--model ase:module:attr expected, got {spec!r}")
        obj = getattr(importlib.import_module(mod), attr)
        calc = obj if hasattr(obj, "calculate") and not isinstance(obj, type) else obj()  # instance or factory
        return from_ase_calculator(calc, name=f"ase:{mod}:{attr}")
    raise ValueError(f"unknown bridged model {spec!r}; use chgnet, torch-sevennet[:name[:modal]], mace:PATH, orb:PATH, "
                     "fairchem:PATH or ase:module:attr")
