"""Protocols by name and their settings as plain data (docs/detective.md §2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jaxcert.core.inputs import InputError
from jaxcert.detective._constraints import Constraints
from jaxcert.detective._protocols import DimerConfig, Dimers, Protocol
from jaxcert.detective._surfaces import Adsorption, Desorption, SurfaceConfig

__all__ = ["PROTOCOLS", "make_protocol", "protocol_config"]

#: Protocol names in their default order.
PROTOCOLS = ("dimers", "desorption", "adsorption", "constraints")


def make_protocol(name: str, config: Mapping[str, Any] | None = None) -> Protocol:
    """A protocol by name, with its settings (a dict of the config dataclass's fields, or ``checks``)."""
    config = dict(config or {})
    if name == "dimers":
        return Dimers(DimerConfig(**config))
    if name in ("desorption", "adsorption"):
        for k in ("size", "adsorbates", "molecules"):
            if k in config:
                config[k] = tuple(config[k])
        cls = Desorption if name == "desorption" else Adsorption
        return cls(SurfaceConfig(**config))
    if name == "constraints":
        return Constraints(**config)
    raise InputError(f"protocols: unknown protocol {name!r}; allowed: {', '.join(PROTOCOLS)}")


def protocol_config(p: Protocol) -> dict[str, Any]:
    """The settings of ``p`` as a dict that :func:`make_protocol` accepts."""
    if isinstance(p, Constraints):
        return {"checks": list(p.checks)}
    cfg = getattr(p, "config", None)
    return dataclasses.asdict(cfg) if cfg is not None else {}


