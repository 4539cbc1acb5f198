"""The analytic JAX model zoo: ``jaxcert.models.get(name, **kw)``; ``available()`` lists them."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from jaxcert.core.inputs import split_list
from jaxcert.core.model import Model

__all__ = ["get", "available", "register", "describe", "from_spec", "spec_heads", "describe_specs"]

# name -> ("module:factory", one-line description)
_REGISTRY: dict[str, tuple[str, str]] = {
    "lj": ("jaxcert.models.lj:lennard_jones", "per-element reference Lennard-Jones (docs/probes.md §7), any element"),
    "emt": ("jaxcert.models.emt:emt", "pure-JAX port of ASE's EMT (Al Cu Ag Au Ni Pd Pt, H C N O); matches ASE"),
    "morse": ("jaxcert.models.morse:morse", "Morse pair potential, ASE form, smooth quintic cutoff"),
    "sw": ("jaxcert.models.stillinger_weber:stillinger_weber", "Stillinger-Weber Si (PRB 31, 5262 (1985))"),
    "tersoff": ("jaxcert.models.tersoff:tersoff", "Tersoff Si, C and Si-C (PRB 38, 9902; PRB 39, 5566), chi = 0.9776"),
    "eam": ("jaxcert.models.eam:sutton_chen", "Sutton-Chen EAM, 10 fcc metals + alloys (PML 61, 139 (1990))"),
    "jax-sevennet": ("jaxcert.models.sevennet:sevennet",
                     "SevenNet-0 / -MF-0 / -l3i5 natively in JAX (e3nn-jax; weights converted, docs/sevennet.md)"),
}

# deprecated registry names -> the name they resolve to; get() accepts them with a DeprecationWarning ("sevennet":
# the native model, ambiguous next to the command line's bridged "sevennet:..."; docs/sevennet.md)
_ALIASES: dict[str, str] = {"sevennet": "jax-sevennet"}


# CLI spec heads, ``head:ARG[:ARG...][@OPTION,...]`` -> ("module:parser", one-line description); the parser
# takes (args after the head, options after "@") and returns a Model, raising ValueError on a bad spec
_SPECS: dict[str, tuple[str, str]] = {
    "jax-sevennet": ("jaxcert.models.sevennet:from_spec",
                     "jax-sevennet:CHECKPOINT[:MODAL][@float32|@float64]: native SevenNet (7net-0, 7net-mf-0:PBE, "
                     "7net-mf-0:R2SCAN, 7net-l3i5, ...; docs/sevennet.md)"),
    "nequix": ("jaxcert.models.nequix:from_spec",
               "nequix:PATH.nqx[@float32|@float64][,capacity=N]: a Nequix checkpoint (nequix-mp-1, nequix-oam-1, "
               "...) on jaxcert's graph; needs nequix installed (docs/adapters.md §4)"),
}


def register(name: str, target: str | Callable[..., Model], description: str = "") -> None:
    """Register a factory (``"module:attr"`` or a callable) under ``name``."""
    _REGISTRY[name] = (target, description)  # type: ignore[assignment]


def _factory(name: str) -> Callable[..., Model]:
    if name in _ALIASES and name not in _REGISTRY:
        import warnings

        new = _ALIASES[name]
        warnings.warn(f"jaxcert.models.get({name!r}) is the native JAX model; spell it {new!r} (the torch bridge "
                      f"is jaxcert_bridges.sevennet)", DeprecationWarning, stacklevel=3)
        name = new
    if name not in _REGISTRY:
        raise KeyError(f"unknown model {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    target = _REGISTRY[name][0]
    if callable(target):
        return target
    mod, attr = target.split(":")
    return getattr(importlib.import_module(mod), attr)


def get(name: str, **kw) -> Model:
    """Build a registered model, e.g. ``get("lj")``, ``get("emt")``, ``get("morse", element="Cu")``,
    ``get("jax-sevennet", checkpoint="7net-0")`` (the old name ``"sevennet"`` still works, with a
    DeprecationWarning)."""
    return _factory(name)(**kw)


def available() -> list[str]:
    """Names of the registered models."""
    return sorted(_REGISTRY)


def describe() -> dict[str, str]:
    """name -> one-line description."""
    return {k: v[1] for k, v in sorted(_REGISTRY.items())}


def spec_heads() -> list[str]:
    """Heads of the CLI model specs this registry resolves (``jax-sevennet``, ...)."""
    return sorted(_SPECS)


def describe_specs() -> dict[str, str]:
    """head -> one-line description with the spec's form."""
    return {k: v[1] for k, v in sorted(_SPECS.items())}


def from_spec(spec: str) -> Model:
    """A model from a CLI spec ``head:ARG[:ARG...][@OPTION,...]``, e.g. ``jax-sevennet:7net-mf-0:PBE@float64``.

    Raises:
      KeyError: the head is not a registered spec head.
      ValueError: the arguments or options are not valid for that head (the message lists the valid ones).
    """
    body, _, opts = spec.partition("@")
    head, _, args = body.partition(":")
    if head not in _SPECS:
        raise KeyError(f"unknown model spec head {head!r}; spec heads: {', '.join(spec_heads())}")
    mod, attr = _SPECS[head][0].split(":")
    options = [str(o) for o in split_list("options after '@'", opts, what="options")] if "@" in spec else []
    return getattr(importlib.import_module(mod), attr)(args, options)
