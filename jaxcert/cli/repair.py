"""``jaxcert repair``: fine-tune a model until its findings are gone, anchored where it was (docs/research.md §3).

Argument checks (:mod:`jaxcert.core.inputs`), the losses (:mod:`jaxcert.repair`), the call of
:func:`jaxcert.repair.repair`, the repaired parameters in the model's own format and ``repair.json``.  Exit codes:
0 every finding loss is zero, 1 the repair ran but a finding remains, 2 a usage or input error naming the
argument.
"""

from __future__ import annotations

import argparse
import json
import os

from jaxcert.core import inputs
from jaxcert.core.files import atomic_write, ensure_output_folder
from jaxcert.specs import canonical_specs

__all__ = ["cmd_repair", "register"]

#: what repair writes in --out
_OWNED = ("repair.json", "state.npz", "repaired.nqx", "params.npz")


def _walls(text: str | None) -> list[tuple[str, str]]:
    if not text:
        return []
    out = []
    for item in text.split(","):
        pair = item.strip().split("-")
        if len(pair) != 2:
            raise inputs.InputError(f"--walls: got {item!r}; allowed: element pairs like C-O,Pt-Pt")
        out.append(tuple(inputs.elements("--walls", x)[0] for x in pair))
    return out


def _desorption(text: str | None) -> list[tuple[str, str]]:
    from jaxcert.detective._surfaces import ADSORBATES

    if not text:
        return []
    out = []
    for item in text.split(","):
        parts = item.strip().split("/")
        if len(parts) != 2 or parts[1] not in ADSORBATES:
            raise inputs.InputError(f"--desorption: got {item!r}; allowed: METAL/MOLECULE like Mo/CO (molecules "
                                    f"{', '.join(ADSORBATES)})")
        (metal,) = inputs.elements("--desorption", parts[0])
        out.append((metal, parts[1]))
    return out


def cmd_repair(a: argparse.Namespace) -> int:
    """Validate every argument, build the losses, repair, write the parameters and repair.json."""
    from jaxcert.cli._common import load_model, set_dtype

    (spec,) = canonical_specs("--model", [a.model])
    steps = inputs.integer("--steps", a.steps, minimum=0)
    every = inputs.integer("--every", a.every, minimum=1)
    lr = inputs.positive("--lr", a.lr, "")
    walls, desorption = _walls(a.walls), _desorption(a.desorption)
    findings = [f.strip() for f in (a.findings or "").split(",") if f.strip()]
    for f in findings:
        if not os.path.isfile(f):
            raise inputs.InputError(f"--findings: no such file {f!r}; allowed: escalation.json files of jaxcert "
                                    "investigate")
    if not (findings or walls or desorption):
        raise inputs.InputError("--findings: nothing to repair; give --findings, --walls or --desorption")
    anchor_elements = inputs.elements("--anchor-elements", a.anchor_elements) if a.anchor_elements else None
    out = inputs.output_dir("--out", a.out, create=False)
    state = os.path.join(out, "state.npz")
    if os.path.exists(state) and not a.resume:
        raise inputs.InputError(f"--out: {a.out!r} already holds a repair state; pass --resume to continue it or "
                                "choose another directory")
    ensure_output_folder(a.out, "--out", _OWNED, force=a.force, kind="repair", create=False)
    set_dtype(a.dtype)
    model = load_model(spec)
    from jaxcert import repair as rp

    losses = []
    try:
        for f in findings:
            losses += rp.from_escalation(model, f)
    except (ValueError, KeyError, json.JSONDecodeError) as err:
        raise inputs.InputError(f"--findings: {err}") from None
    losses += [rp.wall_loss(model, x, y) for x, y in walls]
    losses += [rp.desorption_loss(model, m, mol) for m, mol in desorption]
    seen: dict[str, object] = {}
    for lo in losses:
        seen.setdefault(lo.name, lo)
    losses = list(seen.values())
    els = anchor_elements or sorted({e for lo in losses for e in (lo.info.get("pair") or
                                                                  [lo.info.get("metal"), "C", "O"]) if e})
    structs, labels = rp.anchor_structures(els)
    anchor = rp.anchor_loss(model, structs, labels=labels).with_weight(float(a.anchor_weight))
    held, held_labels = rp.anchor_structures(els, held_out=True)
    held_out = rp.anchor_loss(model, held, labels=held_labels, name="held-out anchor")
    inputs.output_dir("--out", out)
    ensure_output_folder(out, "--out", _OWNED, force=a.force, kind="repair")
    log = None if a.quiet else (lambda msg: print(msg, flush=True))
    try:
        result = rp.repair(model, losses, anchor, steps=steps, learning_rate=lr, trainable=a.trainable, every=every,
                           state=state, log=log, extra=[held_out])
    except ValueError as err:
        raise inputs.InputError(f"--trainable: {err}" if "trainable" in str(err) else f"--out: {err}") from None
    written = _write_params(model, result.params, out)
    doc = {"model": spec, "written": written, "losses": [{"name": lo.name, "kind": lo.kind, "info": lo.info}
                                                         for lo in losses],
           "anchor": {"elements": els, "structures": labels, "held_out": held_labels},
           "trainable": a.trainable, "learning_rate": lr, **result.to_dict()}
    atomic_write(os.path.join(out, "repair.json"), json.dumps(doc, indent=2, default=float) + "\n")
    for lo in losses:
        print(f"{lo.name}: {result.before[lo.name]:.4g} -> {result.after[lo.name]:.4g}")
    for name in ("anchor", "held-out anchor"):
        r = result.reports_after[name]
        print(f"{name}: energy drift <= {1000 * r['max_energy_drift_eV_per_atom']:.3g} meV/atom, force RMS <= "
              f"{1000 * r['max_force_rms_eV_per_A']:.3g} meV/Å")
    print(f"{'solved' if result.solved else 'NOT solved'} after {result.steps} steps ({result.trainable} of "
          f"{result.total} parameters trainable, {result.wall_s:.0f} s); wrote {written} and "
          f"{os.path.join(out, 'repair.json')}")
    return 0 if result.solved else 1


def _write_params(model, params, out: str) -> str:
    """The repaired parameters in the model's own format: a ``.nqx`` for a nequix checkpoint, else an ``.npz`` of
    the parameter leaves (in ``jax.tree.leaves`` order)."""
    import io

    import jax
    import numpy as np

    if dict(model.info).get("checkpoint_file", "").endswith(".nqx"):
        from jaxcert.adapters.nequix import save_nequix

        return save_nequix(model, params, os.path.join(out, "repaired.nqx"))
    buf = io.BytesIO()
    np.savez(buf, **{f"leaf{k}": np.asarray(x) for k, x in enumerate(jax.tree.leaves(params))})
    path = os.path.join(out, "params.npz")
    atomic_write(path, buf.getvalue())
    return path


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommand to the ``jaxcert`` parser."""
    c = sub.add_parser(
        "repair", help="fine-tune a model until its findings (escalation.json of jaxcert investigate, dimer walls, "
        "desorption barriers) are gone, anchored to its own energies and forces elsewhere",
        description="Builds a differentiable loss per finding and a self-distillation anchor, fine-tunes the "
        "chosen parameters with optax (Adam) until every finding loss is zero, writes the parameters in the "
        "model's own format (repaired.nqx for nequix) and repair.json (each loss before and after, the anchor "
        "drift on a held-out set). Exit 0 solved, 1 a finding remains, 2 input error. See docs/research.md §3.")
    c.add_argument("--model", required=True, help="the model to repair (a spec, as for certify)")
    c.add_argument("--findings", help="comma-separated escalation.json files of jaxcert investigate")
    c.add_argument("--walls", help="dimer walls to repair, e.g. C-O,C-C,Pt-Pt")
    c.add_argument("--desorption", help="desorption paths to clear, e.g. Mo/CO")
    c.add_argument("--anchor-elements", help="elements of the anchor set (default: those of the findings)")
    c.add_argument("--anchor-weight", default="1.0", help="weight of the anchor loss (default 1)")
    c.add_argument("--trainable", help="regular expression over parameter paths that may change (default: all)")
    c.add_argument("--steps", default="300", help="at most this many optimiser steps (default 300)")
    c.add_argument("--lr", default="1e-3", help="Adam learning rate (default 1e-3)")
    c.add_argument("--every", default="10", help="log and save the state every this many steps (default 10)")
    c.add_argument("--out", required=True, help="output directory (created; holds repair.json, state.npz and the "
                   "repaired parameters)")
    c.add_argument("--resume", action="store_true", help="continue the repair whose state.npz is in --out")
    c.add_argument("--force", action="store_true", help="write into an existing --out holding files jaxcert "
                   "repair did not write")
    c.add_argument("--dtype", default="float64", help="float64 (default) or float32")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.set_defaults(fn=cmd_repair)
