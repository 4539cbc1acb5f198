"""``jaxcert board``: certify a list of models and write their comparison board (docs/board.md).

Argument parsing only: the work is :func:`jaxcert.board.run_board`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from jaxcert.board import interrupted_message, main_progress, parse_models, run_board
from jaxcert.cli._common import set_dtype
from jaxcert.progress import PROBE_WEIGHTS, StepProgress
from jaxcert.report.compare import MIN_WIDTH, board_table
from jaxcert.report.summary import printable

__all__ = ["cmd_board", "register"]


def cmd_board(a: argparse.Namespace) -> int:
    """Run the board; exit 0 (every gate of every model passed, or ``--no-fail-on-gate``), 1 (a gate failed,
    or a model failed to load or crashed, or a probe crashed on a model: its reason is on the board), 2 (bad
    input, before anything runs: also a model that does not support an element, without ``--skip-unsupported``)."""
    set_dtype(a.dtype)
    entries = parse_models(a.models, "--models")
    n = len(entries)
    done = [0]

    def show(status):
        done[0] += 1
        main_progress(status, done[0], n)

    # a serial run: each model's probes as they run (docs/board.md)
    def display(name: str, probes: list[str], kept: list[str]) -> StepProgress:
        return StepProgress(probes, PROBE_WEIGHTS, label=printable(name, keep=""), done=kept)

    try:
        res = run_board(entries, a.elements, a.out, probes="all" if a.probes is None else a.probes, seed=a.seed,
                        dtype=a.dtype, agg=a.agg, throughput=not a.no_throughput, workers=a.workers,
                        scheduler=a.scheduler, on_model=show, skip_unsupported=a.skip_unsupported,
                        progress=None if a.quiet else display, gates=a.gates, force=a.force,
                        published=a.published, rebuild=a.rebuild)
    except KeyboardInterrupt:  # Ctrl-C: what each model's file keeps (the CLI prints it and exits 130)
        from jaxcert.probes.suite import resolve_probes

        try:
            total = len(resolve_probes("all" if a.probes is None else a.probes, "--probes"))
        except ValueError:
            total = None
        raise KeyboardInterrupt(interrupted_message(os.path.abspath(a.out), entries, total)) from None
    width = max(shutil.get_terminal_size((110, 24)).columns, MIN_WIDTH)
    if res.board["rows"]:
        print(board_table(res.board, width=width))
    for f in res.failed:
        # a spec, reason or name can hold any text (a model's exception): control characters as visible escapes
        print(printable(f"failed: {f['name']} ({f['spec']}, {f['stage']}): {f['reason']}", keep=""))
    print(f"wrote {res.json_path}")
    print(f"wrote {res.html_path}")
    code = 0
    if res.failed:
        print(f"models that did not run: {', '.join(f['name'] for f in res.failed)} (exit 1)", file=sys.stderr)
        code = 1
    crashed = [f"{m['name']} ({', '.join(m['crashed_probes'])})" for m in res.models if m.get("crashed_probes")]
    if crashed:  # a probe that crashed on a model is a failure, as for certify (docs/cli.md)
        print(f"probes crashed: {'; '.join(crashed)} (exit 1; the reasons are in the model reports)",
              file=sys.stderr)
        code = 1
    if not res.gates_ok:
        bad = [m["name"] for m in res.models if m["status"] != "failed" and not m.get("gates_ok", True)]
        print(f"gates failed: {', '.join(bad)}" + (" (exit 0: --no-fail-on-gate)" if a.no_fail_on_gate and not code
                                                   else " (exit 1)"), file=sys.stderr)
        code = code or (0 if a.no_fail_on_gate else 1)
    return code


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommand to the ``jaxcert`` parser."""
    c = sub.add_parser("board", help="certify several models and write their comparison board (docs/board.md)",
                       description="Certify each model into OUT/<model>.json (resumable per model and per probe), "
                       "then write OUT/board.json and OUT/index.html. See docs/board.md.")
    c.add_argument("--models", required=True, help="comma-separated model specs (lj,emt,jax-sevennet:7net-0@float32,"
                   "nequix:PATH.nqx) or a .toml file listing them with options (docs/board.md)")
    c.add_argument("--elements", required=True, help="comma-separated element symbols, the same for every model; "
                   "every model must support each of them (exit 2 naming the model otherwise) unless "
                   "--skip-unsupported")
    c.add_argument("--skip-unsupported", action="store_true",
                   help="record an element a model has no parameters for as unsupported in its report, and average "
                   "every model over the elements all of them support (board.json: averaged_elements)")
    c.add_argument("--out", required=True, help="the board's folder (created; rerunning resumes it)")
    c.add_argument("--force", action="store_true", help="write into an existing --out holding a board.json or "
                   "index.html that jaxcert board did not write (no .jaxcert-output marker); they are overwritten, "
                   "links are still refused")
    c.add_argument("--probes", default=None, help="comma-separated probe names (default: all 14)")
    c.add_argument("--seed", default="0", help="run seed, an integer in [0, 2^31-1] (default 0)")
    c.add_argument("--dtype", default="float64", help="float64 (default) or float32")
    c.add_argument("--agg", default="geometric", choices=["arithmetic", "geometric", "harmonic"])
    c.add_argument("--gates", default="exact", choices=["exact", "reference"],
                   help="gate profile of the verdicts and the exit code: exact (default; thresholds at each "
                   "model's floating-point floor) or reference (the published finite-difference board's gates); "
                   "board.json carries both counts (docs/probes.md §3.1)")
    c.add_argument("--workers", metavar="N", default=None,
                   help="certify N models at once on a local dask cluster (one model per worker process)")
    c.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run the models on an existing dask cluster (tcp://host:8786); OUT must be a folder "
                   "every worker sees at the same path")
    c.add_argument("--published", metavar="FILE", default=None,
                   help="add the published finite-difference board's rows from FILE (its scores, transcribed with "
                   "the commit they come from, e.g. benchmarks/results/board/published_pescert.json), marked as "
                   "such, and show each of our rows' difference from its published twin per probe (docs/board.md)")
    c.add_argument("--rebuild", action="store_true",
                   help="write board.json and index.html from the complete reports already in --out: no model is "
                   "loaded and nothing is computed (exit 2 if a model's report is missing, partial or of another run)")
    c.add_argument("--no-throughput", action="store_true",
                   help="do not measure throughput (the short NVE run per model; docs/board.md)")
    c.add_argument("--quiet", action="store_true", help="no per-probe progress (serial runs show each model's "
                   "probes as they run; the one line per finished model stays)")
    c.add_argument("--no-fail-on-gate", action="store_true", help="exit 0 even when a gate fails (a model that "
                   "failed to run still exits 1)")
    c.set_defaults(fn=cmd_board)
