"""Command line: ``jaxcert certify | lambda | models | substrates``.

Examples::

    jaxcert certify --model lj --elements Li,Be,B,C,Na,Mg,Al,Si,P,S --json r.json --html r.html
    jaxcert certify --model emt --elements Cu
    jaxcert certify --model mypkg.potential:model --elements Si       # your own jaxcert.Model
    jaxcert certify --model lj --defect curl=1.0 --elements Si        # a deliberately broken model
    jaxcert lambda --model lj --json l.json [--fd]
    jaxcert models
    jaxcert substrates --element Si --out substrates/
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

__all__ = ["main", "load_model"]

BRIDGED = ("chgnet", "sevennet", "mace", "orb", "fairchem", "ase")


def _set_dtype(name: str) -> Any:
    import jax

    if name not in ("float32", "float64"):
        raise SystemExit(f"--dtype must be float32 or float64, got {name!r}")
    if name == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return jnp.float64 if name == "float64" else jnp.float32


def load_model(spec: str, defects: list[str] | None = None):
    """Resolve ``--model``: a registered name, ``module:attr`` (a Model or a zero-argument
    factory returning one), or a bridged model (``chgnet``, ``sevennet:7net-0``, ``ase:module:attr``, needs
    jaxcert-bridges); then apply ``--defect name=strength`` wrappers in order."""
    from jaxcert import models
    from jaxcert.model import Model

    head = spec.split(":", 1)[0]
    if spec in models.available():
        model = models.get(spec)
    elif head in BRIDGED:
        try:
            bridges = importlib.import_module("jaxcert_bridges")
        except ImportError:
            raise SystemExit(
                f"--model {spec!r} needs the bridges: pip install -e bridges/ (distribution jaxcert-bridges); "
                "see README 'Bridges'"
            ) from None
        model = bridges.load(spec)
    elif ":" in spec:
        mod, attr = spec.split(":", 1)
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as err:
            raise SystemExit(f"cannot load --model {spec!r}: {err}") from None
        model = obj if isinstance(obj, Model) else obj()
        if not isinstance(model, Model):
            raise SystemExit(f"--model {spec!r} did not give a jaxcert.Model (got {type(model).__name__})")
    else:
        raise SystemExit(f"unknown model {spec!r}; registered: {', '.join(models.available())}; "
                         "or give module:attr for your own jaxcert.Model")
    for d in defects or []:
        from jaxcert.models import defects as dmod

        name, _, val = d.partition("=")
        if name not in dmod.DEFECTS:
            raise SystemExit(f"unknown defect {name!r}; available: {', '.join(sorted(dmod.DEFECTS))}")
        model = dmod.DEFECTS[name](model, float(val)) if val else dmod.DEFECTS[name](model)
    return model


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
    dtype = _set_dtype(a.dtype)
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
    dtype = _set_dtype(a.dtype)
    from jaxcert.lam import lam

    model = load_model(a.model, a.defect)
    res = lam(model, fd=a.fd, step=a.step, dtype=dtype)
    print(res.table())
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res.to_dict(), fh, indent=2, allow_nan=False)
        print(f"wrote {a.json}")
    return 0


def cmd_models(a: argparse.Namespace) -> int:
    from jaxcert import models

    for name, desc in models.describe().items():
        print(f"{name:<10} {desc}")
    try:
        from jaxcert.models import defects

        print("\ndefects (--defect name=strength):", ", ".join(sorted(defects.DEFECTS)))
    except ImportError:
        pass
    return 0


def cmd_substrates(a: argparse.Namespace) -> int:
    from jaxcert import substrates

    for p in substrates.write_substrates(a.element, a.out):
        print(p)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxcert", description="Exact, batched certification of ML interatomic "
                                "potentials (eV, Å, eV/Å, eV/Å³).")
    sub = p.add_subparsers(dest="cmd", required=True)

    def model_args(q):
        q.add_argument("--model", required=True, help="registered name (see `jaxcert models`), module:attr, "
                       "or a bridged model (chgnet, sevennet:7net-0, ase:module:attr)")
        q.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH",
                       help="wrap the model in a defect (repeatable), e.g. curl=0.3")
        q.add_argument("--dtype", default="float64", help="float64 (default) or float32")
        q.add_argument("--json", help="write the JSON report here")

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

    m = sub.add_parser("models", help="list the analytic models and defects")
    m.set_defaults(fn=cmd_models)

    s = sub.add_parser("substrates", help="write an element's probe substrates as extxyz")
    s.add_argument("--element", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_substrates)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (KeyError, ValueError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"jaxcert: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
