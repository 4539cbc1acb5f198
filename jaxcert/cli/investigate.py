"""``jaxcert investigate``: failure-mode search with a committee (docs/detective.md §8).

Argument definitions, the checks of :mod:`jaxcert.core.inputs`, the call of :func:`jaxcert.detective.investigate`
and printing.  Exit codes: 0 the search ran (escalated or not; ``escalation.json`` says which), 2 a usage or input
error naming the argument.
"""

from __future__ import annotations

import argparse
import os

from jaxcert.core import inputs
from jaxcert.core.files import ensure_output_folder
from jaxcert.specs import canonical_specs

__all__ = ["cmd_investigate", "register"]

_PROTOCOLS = ("dimers", "desorption", "adsorption", "constraints")
#: what investigate writes in --out (docs/detective.md §5); "dft/" is a folder
_OWNED = ("report.md", "report.html", "escalation.json", "reproduce.py", "figure.svg", "evidence.jsonl", "dft/")


def cmd_investigate(a: argparse.Namespace) -> int:
    """Validate every argument, load the models, run the search, print where the report is; exit 0."""
    from jaxcert.cli._common import load_model, set_dtype

    protocols = inputs.name_list("--protocols", a.protocols, _PROTOCOLS, what="protocols")
    elements = inputs.elements("--elements", a.elements)
    budget = inputs.integer("--budget", a.budget, minimum=1)
    oracle_s = inputs.non_negative("--oracle-seconds", a.oracle_seconds, "s")
    (target_spec,) = canonical_specs("--target", [a.target])
    committee_specs = list(canonical_specs("--committee", a.committee))
    if target_spec in committee_specs:
        raise inputs.InputError(f"--committee: contains the target {a.target!r}; the committee must be other models")
    out = inputs.output_dir("--out", a.out, create=False)  # created below, after every other check
    memory = os.path.join(out, "evidence.jsonl")
    if os.path.exists(memory) and not a.resume:
        raise inputs.InputError(f"--out: {a.out!r} already holds an evidence memory; pass --resume to continue it "
                                "or choose another directory")
    # a link among the report's files (evidence.jsonl included: not even read through it), or report files
    # investigate did not write (no marker): refused (--force)
    ensure_output_folder(a.out, "--out", _OWNED, force=a.force, kind="investigate", create=False)
    if a.resume and os.path.lexists(memory):  # every record checked before anything is loaded or written
        from jaxcert.detective._memory import EvidenceMemory

        EvidenceMemory(memory)
    from jaxcert.detective._constraints import CONSTRAINTS
    from jaxcert.detective._surfaces import ADSORBATES

    checks = None if a.checks is None else inputs.name_list("--checks", a.checks, CONSTRAINTS, what="checks")
    adsorbates = None if a.adsorbates is None else inputs.name_list("--adsorbates", a.adsorbates, tuple(ADSORBATES),
                                                                    what="adsorbates")
    molecules = None if a.molecules is None else inputs.name_list("--molecules", a.molecules, tuple(ADSORBATES),
                                                                  what="molecules")
    dtype = set_dtype(a.dtype)
    target = load_model(target_spec)
    members = [load_model(s) for s in committee_specs]
    for spec, m in zip([target_spec, *committee_specs], [target, *members], strict=True):
        flag = "--target" if m is target else "--committee"
        if m.elements is not None and not any(inputs.split_supported(flag, m, [e], skip_unsupported=True)[0]
                                              for e in elements):
            raise inputs.InputError(f"{flag}: model {spec!r} supports none of --elements {','.join(elements)}")

    inputs.output_dir("--out", out)  # created only now, after every other check
    ensure_output_folder(out, "--out", _OWNED, force=a.force, kind="investigate")  # marked: a rerun needs no --force
    from jaxcert.detective import Committee, investigate, make_protocol

    committee = Committee(target, members, specs=[target_spec, *committee_specs], dtype=dtype,
                          batched=not a.sequential)
    protos = []
    for p in protocols:
        cfg = {}
        if p == "adsorption" and adsorbates:
            cfg["adsorbates"] = adsorbates
        if p == "desorption" and molecules:
            cfg["molecules"] = molecules
        if p == "constraints" and checks:
            cfg["checks"] = checks
        protos.append(make_protocol(p, cfg))
    log = None if a.quiet else (lambda msg: print(msg, flush=True))
    result = investigate(committee, protos, elements=elements, budget=budget, out=out, log=log, oracle_s=oracle_s)
    if result.escalated:
        h = result.hypothesis
        print(f"escalated {h.id}: {h.statement}")
    else:
        print(f"no escalation ({result.stop_reason}); {len(result.verdicts)} hypotheses rejected, "
              f"{len(result.artefacts)} protocol artefacts labelled")
    print(f"wrote {out}/escalation.json and {out}/report.md ({result.n_evals} model evaluations)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommand to the ``jaxcert`` parser."""
    c = sub.add_parser(
        "investigate", help="failure-mode search: protocols screened by committee disagreement and exact "
        "constraints, one pre-registered hypothesis at a time, escalation report with a DFT card",
        description="Screens the target and committee on physical protocols, ranks failure hypotheses, "
        "pre-registers the selected one, probes scope, mechanism and impact, and rejects or escalates it. The "
        "evidence memory OUT/evidence.jsonl is append-only; --resume continues a run from it. See "
        "docs/detective.md.")
    c.add_argument("--target", required=True, help="the model under investigation: a registered name, module:attr, "
                   "or a bridged spec (chgnet, torch-sevennet:7net-0, ...)")
    c.add_argument("--committee", required=True, help="comma-separated committee models (same spec forms)")
    c.add_argument("--protocols", default=",".join(_PROTOCOLS), help="comma-separated subset of "
                   f"{','.join(_PROTOCOLS)} (default: all)")
    c.add_argument("--elements", default="Cu,Ni,Pt,C,O", help="element symbols to search (default Cu,Ni,Pt,C,O)")
    c.add_argument("--adsorbates", help="adsorbates of the adsorption grid (default H,C,N,O,F,S,CO,OH)")
    c.add_argument("--molecules", help="molecules of the desorption scans (default CO,NO)")
    c.add_argument("--checks", help="constraints to check (default all eight: conservative_forces, translation, "
                   "repulsive_wall, born_stability, symmetry, stress_strain, dissociation_limit, smoothness)")
    c.add_argument("--budget", default="1000000", help="model evaluations after which the search stops")
    c.add_argument("--oracle-seconds", default="60", help="time the GFN2-xTB oracle (tblite, if installed; "
                   "indicative, never decides) may spend on the report's dimers (0: off; default 60)")
    c.add_argument("--out", required=True, help="report directory (created; holds evidence.jsonl)")
    c.add_argument("--resume", action="store_true", help="continue the run whose evidence memory is in --out")
    c.add_argument("--force", action="store_true", help="write into an existing --out holding report files "
                   "(report.md, escalation.json, ...) that jaxcert investigate did not write (no .jaxcert-output "
                   "marker); they are overwritten, links are still refused")
    c.add_argument("--dtype", default="float64", help="float64 (default) or float32")
    c.add_argument("--sequential", action="store_true", help="evaluate one configuration at a time (benchmark "
                   "baseline; results are identical)")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.set_defaults(fn=cmd_investigate)
