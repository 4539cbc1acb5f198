"""``jaxcert certify`` and ``jaxcert lambda``.

Argument parsing only: the work is :func:`jaxcert.certify` and :func:`jaxcert.lam`.
"""

from __future__ import annotations

import argparse
import json
import sys

from jaxcert._lam import LAMBDA_GATE, lam
from jaxcert.board import refuse_images_that_do_not_fit
from jaxcert.checkpoint import kept_md, kept_nacl, load_finished, write_json, write_report
from jaxcert.cli._common import load_model, model_args, set_dtype
from jaxcert.core import inputs
from jaxcert.probes.suite import certify, resolve_probes
from jaxcert.progress import PROBE_WEIGHTS, StepProgress
from jaxcert.report.gates import PROFILES
from jaxcert.report.summary import NOT_RUN, printable

__all__ = ["cmd_certify", "cmd_lambda", "register"]


def _exit_code(gates_ok: bool, a: argparse.Namespace) -> int:
    """0 when every gate passed (or ``--no-fail-on-gate``), 1 when a gate failed."""
    return 0 if gates_ok or a.no_fail_on_gate else 1


def cmd_certify(a: argparse.Namespace) -> int:
    """Validate everything, run the suite (resuming from ``--json`` with ``--resume``), report, exit 0/1.

    Exit 1 when a gate failed (0 with ``--no-fail-on-gate``) or when a probe crashed on the model (status
    "error": it raised, called ``sys.exit`` or returned a wrong shape; 1 even with ``--no-fail-on-gate``);
    exit 2 only when every probe was skipped (docs/cli.md, "Exit codes")."""
    dtype = set_dtype(a.dtype)

    seed = inputs.seed("--seed", a.seed)
    elements = inputs.elements("--elements", a.elements)
    names = resolve_probes("all" if a.probes is None else a.probes, "--probes")
    if a.resume and not a.json:
        raise inputs.InputError("--resume: needs --json FILE (the report file is the checkpoint)")
    inputs.distinct_outputs((("--json", a.json), ("--html", a.html)))
    for flag, path in (("--json", a.json), ("--html", a.html)):
        if path is not None:
            inputs.output_file(flag, path)
    model = load_model(a.model, a.defect, a.max_batch)
    if dict(model.info).get("warning"):  # a model outside its parameterisation says so before any work
        print(f"jaxcert: model warning: {printable(dict(model.info)['warning'], keep='')}", file=sys.stderr)
    supported, _ = inputs.split_supported("--elements", model, elements, skip_unsupported=a.skip_unsupported)
    if not supported:
        raise inputs.InputError(f"--elements: model {model.name!r} supports none of {', '.join(elements)}; "
                                "nothing would be certified")
    # a cutoff whose periodic images cannot fit in memory: exit 2 naming it, before any probe (docs/cli.md)
    refuse_images_that_do_not_fit(model, names, supported, dtype, where="--model")
    finished = load_finished(a.json, model, elements, seed, dtype) if a.resume else []
    kept = [o.name for o in finished if o.name in names]
    if a.resume:
        print(f"resuming {a.json}: {len(kept)} of {len(names)} probes finished"
              + (f" ({', '.join(kept)})" if kept else ""), file=sys.stderr)
    progress = None if a.quiet else StepProgress(names, PROBE_WEIGHTS, label="certify", done=kept)
    saved = {"probes": len(kept) if a.resume else 0, "done": len(kept)}  # in the --json file; finished in all

    def checkpoint(rep) -> None:
        saved["done"] = len(rep.outcomes)
        if a.json:
            saved["writing"] = True  # from here the file is this run's (written atomically)
            write_report(rep, a.json, complete=False)
            saved["probes"] = len(rep.outcomes)

    try:
        report = certify(model, elements, probes=names, seed=seed, dtype=dtype, agg=a.agg, progress=progress,
                         skip_unsupported=a.skip_unsupported, finished=finished, on_probe=checkpoint,
                         throughput=a.throughput, md_kept=kept_md(a.json) if kept else None,
                         nacl_kept=kept_nacl(a.json) if kept else None, gates=a.gates)
    except KeyboardInterrupt:  # Ctrl-C: say exactly what was kept (the CLI prints it and exits 130)
        mine = a.json if saved.get("writing") or a.resume else None  # never count a foreign file's probes
        raise KeyboardInterrupt(_interrupted(a.json, _kept_in(mine, saved["probes"]), saved["done"],
                                             len(names))) from None
    finally:
        if progress is not None:
            progress.close()
    print(report.table(explain=a.explain))
    if a.json:
        write_report(report, a.json, complete=True)
        print(f"wrote {a.json}")
    if a.html:
        report.to_html(a.html)
        print(f"wrote {a.html}")
    ran = [o.name for o in report.outcomes if any(st not in NOT_RUN for st in o.status)]
    if not ran:
        print("jaxcert: error: --probes: nothing was certified: every probe was skipped on every element (the "
              "reasons are in the table)", file=sys.stderr)
        return 2
    agg = report.aggregate()
    failed = [k for k, v in agg["gates"].items() if not v]
    crashed = [o.name for o in report.outcomes if "error" in o.status]
    if crashed:  # a model that raises is a failure, never a skip and never a pass (docs/cli.md)
        print(f"probes crashed on the model: {', '.join(crashed)} (exit 1; the reasons are under the table)",
              file=sys.stderr)
    if failed:
        print(f"gates failed: {', '.join(failed)}" + (" (exit 0: --no-fail-on-gate)" if a.no_fail_on_gate and
                                                        not crashed else " (exit 1)"), file=sys.stderr)
    return 1 if crashed else _exit_code(not failed, a)


def _kept_in(json_path: str | None, counted: int) -> int:
    """How many probes the ``--json`` file holds now: read from the file itself, since Ctrl-C can land between its
    atomic write and the count kept in memory (``counted``, used when the file cannot be read)."""
    if not json_path:
        return counted
    try:
        with open(json_path, encoding="utf-8") as fh:
            return len(json.load(fh).get("probes") or [])
    except (OSError, ValueError, AttributeError):
        return counted


def _interrupted(json_path: str | None, saved: int, done: int, total: int) -> str:
    """The line an interrupted ``certify`` prints: how many probes are kept, and where; never a report that was
    not written."""
    if json_path and saved:
        return (f"interrupted: {saved} of {total} probes kept in {json_path}; rerun the same command with --resume "
                "to run the rest")
    if json_path:
        return f"interrupted: no probe had finished, nothing was written to {json_path}"
    return (f"interrupted: {done} of {total} probes had finished and none was kept (no --json FILE; with one, "
            "every finished probe is kept and --resume runs the rest)")


def cmd_lambda(a: argparse.Namespace) -> int:
    """λ on the ten seed-002 structures; exit 1 if the largest λ exceeds ``--gate``."""
    dtype = set_dtype(a.dtype)

    step = inputs.positive("--step", a.step, "Å", maximum=0.1)
    gate = inputs.positive("--gate", a.gate, maximum=1.0)
    if a.json is not None:
        inputs.output_file("--json", a.json)
    model = load_model(a.model, a.defect, a.max_batch)
    res = lam(model, fd=a.fd, step=step, dtype=dtype, gate=gate)
    print(res.table())
    if a.json:
        write_json(res.to_dict(), a.json)
        print(f"wrote {a.json}")
    if not res.passed:
        why = (f"max λ {res.max:.3g} > {gate:g}" if any(k not in res.skipped for k in res.per_structure)
               else "no structure could be evaluated")
        print(f"λ gate failed: {why}" + (" (exit 0: --no-fail-on-gate)"
                                                                  if a.no_fail_on_gate else " (exit 1)"),
              file=sys.stderr)
    return _exit_code(res.passed, a)


def gate_profile(q: argparse.ArgumentParser) -> None:
    q.add_argument("--gates", default="exact", choices=list(PROFILES),
                   help="gate profile: exact (default; thresholds at the floating-point floor of the model's "
                   "precision and its own force scale) or reference (the published finite-difference board's "
                   "gates, for side-by-side boards); docs/probes.md §3.1")


def no_fail(q: argparse.ArgumentParser) -> None:
    q.add_argument("--no-fail-on-gate", action="store_true", help="exit 0 even when a gate fails")


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the ``jaxcert`` parser."""
    c = sub.add_parser("certify", help="run the 14 certification probes")
    model_args(c)
    c.add_argument("--elements", default="Ar", help="comma-separated element symbols (default Ar)")
    c.add_argument("--probes", default=None, help="comma-separated probe names (default: all 14; the opt-in "
                   "lam, λ on the ten seed-002 structures, runs when named)")
    c.add_argument("--seed", default="0", help="run seed, an integer in [0, 2^31-1] (default 0)")
    c.add_argument("--agg", default="geometric", choices=["arithmetic", "geometric", "harmonic"])
    c.add_argument("--html", help="write a self-contained HTML report with plots")
    c.add_argument("--explain", action="store_true",
                   help="after the table, say for each probe what it tests and what a failure means")
    c.add_argument("--quiet", action="store_true", help="no progress display")
    c.add_argument("--skip-unsupported", action="store_true",
                   help="record elements the model has no parameters for as skipped (default: exit 2)")
    c.add_argument("--resume", action="store_true",
                   help="keep the probes already finished in --json FILE and run only the rest (the file is "
                   "rewritten atomically after every probe)")
    c.add_argument("--throughput", action="store_true",
                   help="also measure throughput: evaluations/s of the suite and NVE atom·steps/s on the published "
                   "board's 100-atom NaCl cell, with the hardware and peak memory, in the report's 'throughput' "
                   "(docs/board.md; minutes for a large network on a CPU, so off unless asked; `jaxcert board` "
                   "measures it by default)")
    gate_profile(c)
    no_fail(c)
    c.set_defaults(fn=cmd_certify)

    lmb = sub.add_parser("lambda", help="conservativeness λ = ‖J_anti‖/‖J‖ on the ten seed-002 structures")
    model_args(lmb)
    lmb.add_argument("--fd", action="store_true", help="central finite differences instead of the exact Jacobian")
    lmb.add_argument("--step", default=1e-3, help="FD displacement in Å (default 1e-3)")
    lmb.add_argument("--gate", default=LAMBDA_GATE, help=f"fail (exit 1) when max λ exceeds this (default "
                     f"{LAMBDA_GATE:g}; docs/cli.md)")
    no_fail(lmb)
    lmb.set_defaults(fn=cmd_lambda)
