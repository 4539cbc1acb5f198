"""Shared CLI plumbing: ``--model`` resolution, ``--dtype``, the common model arguments.

Argument parsing only; the work is done by the library (``docs/cli.md``).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from jaxcert import inputs, models
from jaxcert.model import Model
from jaxcert.models import defects as dmod

__all__ = ["BRIDGED", "set_dtype", "load_model", "model_args"]

BRIDGED = ("chgnet", "sevennet", "mace", "orb", "fairchem", "ase")


def set_dtype(name: str) -> Any:
    """``--dtype``: float64 (enables x64) or float32; anything else is an :class:`InputError`."""
    import jax

    inputs.choice("--dtype", name, ("float64", "float32"))
    if name == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return jnp.float64 if name == "float64" else jnp.float32


def load_model(spec: str, defects: list[str] | None = None, max_batch: str | None = None):
    """Resolve ``--model``: a registered name, a registry spec with arguments (``jax-sevennet:7net-0``,
    ``jax-sevennet:7net-mf-0:PBE@float32``; :func:`jaxcert.models.from_spec`), ``module:attr`` (a Model or a
    zero-argument factory returning one), or a bridged model (``chgnet``, ``sevennet:7net-0``, ``ase:module:attr``,
    options after ``@`` such as ``chgnet@float64,fd``; needs jaxcert-bridges); then apply
    ``--defect name=strength`` wrappers in order, and ``--max-batch`` (a positive integer, or "none" for no
    limit) over the model's own :attr:`~jaxcert.Model.max_batch`."""

    head = spec.split(":", 1)[0].split("@", 1)[0]
    # bridged names first: "sevennet" is the torch bridge here; the native one is "jax-sevennet:..." (a registry
    # spec) or jaxcert.models.get("sevennet", ...) from Python (issue 12 keeps the CLI name for the bridge)
    if head in BRIDGED:
        try:
            bridges = importlib.import_module("jaxcert_bridges")
        except ImportError:
            raise inputs.InputError(
                f"--model {spec!r} needs the bridges: pip install -e bridges/ (distribution jaxcert-bridges); "
                "see README 'Bridges'"
            ) from None
        try:
            model = bridges.load(spec)
        except inputs.InputError:
            raise
        except (ValueError, OSError, ImportError, AttributeError) as err:  # the spec or its file: the user's input
            raise inputs.InputError(f"--model {spec!r}: {err}") from None
    elif head in models.spec_heads():  # registry specs with arguments: jax-sevennet:7net-mf-0:PBE@float32
        try:
            model = models.from_spec(spec)
        except (ValueError, ImportError) as err:  # bad spec, or a missing optional dependency / weights
            raise inputs.InputError(f"--model {spec!r}: {err}") from None
    elif spec in models.available():
        model = models.get(spec)
    elif ":" in spec:
        mod, attr = spec.split(":", 1)
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as err:
            raise inputs.InputError(f"cannot load --model {spec!r}: {err}") from None
        model = obj if isinstance(obj, Model) else obj()
        if not isinstance(model, Model):
            raise inputs.InputError(f"--model {spec!r} did not give a jaxcert.Model (got {type(model).__name__})")
    else:
        raise inputs.InputError(f"unknown model {spec!r}; registered: {', '.join(models.available())}; "
                         "or give module:attr for your own jaxcert.Model")
    for d in defects or []:

        name, _, val = d.partition("=")
        if name not in dmod.DEFECTS:
            raise inputs.InputError(f"unknown defect {name!r}; available: {', '.join(sorted(dmod.DEFECTS))}")
        strength = inputs.finite("--defect", val) if val else None
        model = dmod.DEFECTS[name](model, strength) if val else dmod.DEFECTS[name](model)
    if max_batch is not None:
        model = model.replace(max_batch=None if str(max_batch).lower() == "none"
                              else inputs.integer("--max-batch", max_batch, minimum=1))
    return model


def model_args(q: argparse.ArgumentParser) -> None:
    """--model, --defect, --dtype, --json: shared by certify, lambda and attack."""
    q.add_argument("--model", required=True, help="registered name or spec (see `jaxcert models`; e.g. "
                   "jax-sevennet:7net-0), module:attr, or a bridged model (chgnet, sevennet:7net-0, ase:module:attr)")
    q.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH",
                   help="wrap the model in a defect (repeatable), e.g. curl=0.3")
    q.add_argument("--dtype", default="float64", help="float64 (default) or float32")
    q.add_argument("--max-batch", metavar="N", help="evaluate at most N geometries at once (a memory budget; "
                   "larger batches run in chunks); 'none' lifts the model's own limit (jax-sevennet: 32)")
    q.add_argument("--json", help="write the JSON report here")
