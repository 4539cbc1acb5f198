"""``jaxcert models`` and ``jaxcert substrates``."""

from __future__ import annotations

import argparse

from jaxcert import models
from jaxcert.core import inputs
from jaxcert.models import defects
from jaxcert.probes import substrates
from jaxcert.specs import BRIDGED

__all__ = ["cmd_models", "cmd_substrates", "register"]


def cmd_models(a: argparse.Namespace) -> int:
    """The registered models, the spec heads, the bridged heads and the defects."""
    for name, desc in models.describe().items():
        print(f"{name:<13} {desc}")
    print("\nmodel specs (--model HEAD:ARGS[@OPTIONS]):")
    for head, desc in models.describe_specs().items():
        print(f"{head:<13} {desc}")
    print(f"\nbridged models (jaxcert-bridges): {', '.join(BRIDGED)} (e.g. torch-sevennet:7net-0, chgnet@float64)")
    print("\ndefects (--defect name=strength):", ", ".join(sorted(defects.DEFECTS)))
    return 0


def cmd_substrates(a: argparse.Namespace) -> int:
    """Write one element's probe substrates as extxyz files into ``--out``."""
    symbols = inputs.elements("--element", a.element)
    if len(symbols) != 1:
        raise inputs.InputError(f"--element: got {a.element!r}; allowed: one element symbol, e.g. Si")
    (element,) = symbols
    out = inputs.output_dir("--out", a.out)
    for p in substrates.write_substrates(element, out):
        print(p)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the ``jaxcert`` parser."""
    m = sub.add_parser("models", help="list the analytic models and defects")
    m.set_defaults(fn=cmd_models)

    s = sub.add_parser("substrates", help="write an element's probe substrates as extxyz")
    s.add_argument("--element", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_substrates)
