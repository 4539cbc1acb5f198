"""``jaxcert certify`` and ``jaxcert lambda``.

Argument parsing only: the work is :func:`jaxcert.certify` and :func:`jaxcert.lam`.
"""

from __future__ import annotations

import argparse
import json
import sys

from jaxcert.cli._common import load_model, model_args, set_dtype

__all__ = ["cmd_certify", "cmd_lambda", "register"]


def _progress(name: str, idx: int, total: int, last: float) -> None:
    """One status line per probe; redrawn in place on a terminal."""
    tty = sys.stderr.isatty()
    prev = f" (previous {last:.1f} s)" if idx else ""
    text = f"[{total}/{total}] done{prev}" if name == "done" else f"[{idx + 1}/{total}] {name} ...{prev}"
    if tty:
        print("\r" + text.ljust(72), end="\n" if name == "done" else "", file=sys.stderr, flush=True)
    else:
        print(text, file=sys.stderr, flush=True)


def cmd_certify(a: argparse.Namespace) -> int:
    dtype = set_dtype(a.dtype)
    from jaxcert.probes.suite import certify

    model = load_model(a.model, a.defect)
    report = certify(model, a.elements, probes=a.probes or "all", seed=a.seed, dtype=dtype, agg=a.agg,
                     progress=None if a.quiet else _progress)
    print(report.table())
    if a.json:
        report.to_json(a.json)
        print(f"wrote {a.json}")
    if a.html:
        report.to_html(a.html)
        print(f"wrote {a.html}")
    return 0


def cmd_lambda(a: argparse.Namespace) -> int:
    dtype = set_dtype(a.dtype)
    from jaxcert.lam import lam

    model = load_model(a.model, a.defect)
    res = lam(model, fd=a.fd, step=a.step, dtype=dtype)
    print(res.table())
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res.to_dict(), fh, indent=2, allow_nan=False)
        print(f"wrote {a.json}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the ``jaxcert`` parser."""
    c = sub.add_parser("certify", help="run the 14 certification probes")
    model_args(c)
    c.add_argument("--elements", default="Ar", help="comma-separated element symbols (default Ar)")
    c.add_argument("--probes", default=None, help="comma-separated probe names (default: all)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--agg", default="geometric", choices=["arithmetic", "geometric", "harmonic"])
    c.add_argument("--html", help="write a self-contained HTML report with plots")
    c.add_argument("--quiet", action="store_true", help="no progress display")
    c.set_defaults(fn=cmd_certify)

    lmb = sub.add_parser("lambda", help="conservativeness λ = ‖J_anti‖/‖J‖ on the ten seed-002 structures")
    model_args(lmb)
    lmb.add_argument("--fd", action="store_true", help="central finite differences instead of the exact Jacobian")
    lmb.add_argument("--step", type=float, default=1e-3, help="FD displacement in Å (default 1e-3)")
    lmb.set_defaults(fn=cmd_lambda)
