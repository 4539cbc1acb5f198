"""Shared CLI plumbing: ``--dtype``, the common model arguments.

Argument parsing only; ``--model`` is resolved by :func:`jaxcert.specs.load_model` (re-exported here and as
``jaxcert.cli.load_model``), the work is done by the library (``docs/cli.md``).
"""

from __future__ import annotations

import argparse
from typing import Any

from jaxcert.core import inputs
from jaxcert.specs import load_model

__all__ = ["set_dtype", "load_model", "model_args"]


def set_dtype(name: str) -> Any:
    """``--dtype``: float64 (enables x64) or float32; anything else is an :class:`InputError`."""
    import jax

    inputs.choice("--dtype", name, ("float64", "float32"))
    if name == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return jnp.float64 if name == "float64" else jnp.float32


def model_args(q: argparse.ArgumentParser) -> None:
    """--model, --defect, --dtype, --json: shared by certify, lambda and attack."""
    q.add_argument("--model", required=True, help="registered name or spec (see `jaxcert models`; e.g. "
                   "jax-sevennet:7net-0, nequix:PATH.nqx@float32), module:attr, or a bridged model (chgnet, "
                   "torch-sevennet:7net-0, ase:module:attr)")
    q.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH",
                   help="wrap the model in a defect (repeatable), e.g. curl=0.3")
    q.add_argument("--dtype", default="float64", help="float64 (default) or float32")
    q.add_argument("--max-batch", metavar="N", help="evaluate at most N geometries at once (a memory budget; "
                   "larger batches run in chunks); 'none' lifts the model's own limit (jax-sevennet: 32)")
    q.add_argument("--json", help="write the JSON report here")
