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
    ``jax-sevennet:7net-mf-0:PBE@float32``, ``nequix:PATH.nqx@float32``; :func:`jaxcert.models.from_spec`),
    ``module:attr`` (a Model or a
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
        model = _load_user_model(spec)
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


def _load_user_model(spec: str) -> Model:
    """``module:attr``: a :class:`Model` or a zero-argument factory returning one.  The current folder is
    searched first, as ``python -m`` does.  Whatever the user's code does while importing or building the
    model (raise, ``sys.exit``, return something else) is reported as an input error naming ``--model``."""
    import os
    import sys

    mod, _, attr = spec.partition(":")
    if not mod.strip() or not attr.strip() or not all(p.isidentifier() for p in mod.split(".")) \
            or not all(p.isidentifier() for p in attr.split(".")):
        raise inputs.InputError(f"--model: got {spec!r}; allowed: a registered name (jaxcert models), a registry "
                                "spec, or module:attr naming your jaxcert.Model or a zero-argument factory")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(mod)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ModuleNotFoundError as err:
        raise inputs.InputError(f"--model {spec!r}: no module named {err.name!r} (searched the current folder "
                                f"{os.getcwd()!r} and the installed packages; run from the folder that holds "
                                f"{mod.split('.')[0]}.py or install it)") from None
    except AttributeError:
        raise inputs.InputError(f"--model {spec!r}: module {mod!r} has no attribute {attr!r}") from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's module failed while importing
        raise inputs.InputError(f"--model {spec!r}: importing {mod!r} raised {type(err).__name__}: "
                                f"{str(err).strip()[:200]}") from None
    if isinstance(obj, Model):
        return obj
    if not callable(obj):
        raise inputs.InputError(f"--model {spec!r} is a {type(obj).__name__}, not a jaxcert.Model or a "
                                "zero-argument factory returning one")
    try:
        model = obj()
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's factory failed
        raise inputs.InputError(f"--model {spec!r}: calling {attr}() raised {type(err).__name__}: "
                                f"{str(err).strip()[:200]} (the factory must take no argument)") from None
    if not isinstance(model, Model):
        raise inputs.InputError(f"--model {spec!r}: {attr}() returned a {type(model).__name__}, not a "
                                "jaxcert.Model")
    return model


def model_args(q: argparse.ArgumentParser) -> None:
    """--model, --defect, --dtype, --json: shared by certify, lambda and attack."""
    q.add_argument("--model", required=True, help="registered name or spec (see `jaxcert models`; e.g. "
                   "jax-sevennet:7net-0, nequix:PATH.nqx@float32), module:attr, or a bridged model (chgnet, "
                   "sevennet:7net-0, ase:module:attr)")
    q.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH",
                   help="wrap the model in a defect (repeatable), e.g. curl=0.3")
    q.add_argument("--dtype", default="float64", help="float64 (default) or float32")
    q.add_argument("--max-batch", metavar="N", help="evaluate at most N geometries at once (a memory budget; "
                   "larger batches run in chunks); 'none' lifts the model's own limit (jax-sevennet: 32)")
    q.add_argument("--json", help="write the JSON report here")
