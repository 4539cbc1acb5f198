"""``jaxcert attack``, ``jaxcert sweep`` and ``jaxcert plot-sweep`` (relax → attack → relax; docs/attacks.md).

Argument definitions, calls into :mod:`jaxcert.attacks` and printing.  Every argument is checked by the library
before any computation (:func:`jaxcert.attacks.config.prepare_attack`, :func:`~jaxcert.attacks.config.
load_sweep_config` and :func:`~jaxcert.attacks.config.prepare_sweep`, :func:`~jaxcert.attacks.config.stored_rows`),
and a bad one ends the command with one line naming the argument, the value and what is allowed (exit 2;
docs/attacks.md §8).
"""

from __future__ import annotations

import argparse
import sys
import time

from jaxcert.attacks import plots, run_grid
from jaxcert.attacks.config import (
    SWEEP_CONFIG,
    SWEEP_DEFAULTS,
    load_sweep_config,
    plot_metrics,
    prepare_attack,
    prepare_sweep,
    read_contour,
    refuse_stationary_sign_attacks,
    stored_rows,
)
from jaxcert.attacks.pipeline import OPTIMIZERS
from jaxcert.attacks.report import AttackReport, sweep_table, sweep_warnings, write_sweep_json
from jaxcert.attacks.sweep import Store, SweepProgress, grid_rows, sweep
from jaxcert.cli._common import load_model, model_args, set_dtype
from jaxcert.core import inputs
from jaxcert.core.inputs import InputError
from jaxcert.core.structure import Structure
from jaxcert.progress import StepProgress

__all__ = ["cmd_attack", "cmd_sweep", "cmd_plot_sweep", "register"]


def _warn(lines: list[str] | tuple[str, ...]) -> None:
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def cmd_attack(a: argparse.Namespace) -> int:
    """``jaxcert attack``: relax → attack → relax one structure, both stages' metrics (docs/attacks.md §2)."""
    job = prepare_attack(a)
    dtype = set_dtype(a.dtype)
    model = load_model(a.model, a.defect, a.max_batch)
    s = Structure.from_ase(job.atoms, dtype=dtype)
    refuse_stationary_sign_attacks(model, s, job.specs)
    # progress per phase (stderr; a rich bar on a terminal, one line per phase otherwise): the attacks and the
    # second relaxations are one compiled program, so they are one phase
    progress = None if a.quiet else StepProgress(["relax", "attack + relax", "metrics"],
                                                 {"relax": 1.0, "attack + relax": 2.0, "metrics": 1.0},
                                                 label=f"attack {len(job.atoms)} atoms")
    phase = None if progress is None else (lambda name: progress(name, 0, 0, 0.0))
    t0 = time.perf_counter()
    try:
        g = run_grid(model, [s], job.eps, job.seeds, attacks=job.specs, config=job.pipeline, progress=phase)
        wall = time.perf_counter() - t0
        if phase is not None:
            phase("metrics")
        report = AttackReport.from_grid(g, model.name, structure=job.structure_info, wall_s=wall,
                                        extra_config=job.extra_config)
        if phase is not None:
            phase("done")
    finally:
        if progress is not None:
            progress.close()
    first, info = report.first_relaxation[0], job.structure_info
    print(f"{model.name} on {info['formula']} ({info['n_atoms']} atoms, {info['source']}); first relaxation: "
          f"{first['steps']} steps, converged={first['converged']}")
    print(report.table())
    if a.json:
        report.write_json(a.json)
        print(f"wrote {a.json}")
    return 0


def cmd_sweep(a: argparse.Namespace) -> int:
    """``jaxcert sweep [sweep.toml] [flags]``: resumable sweep into an SQLite store (+ NPZ arrays, export, plots)."""
    conf = load_sweep_config(a.config, vars(a))
    st = conf.settings
    dtype = set_dtype(st["dtype"])
    job = prepare_sweep(conf, dtype)
    model = load_model(st["model"], st["defect"],
                       getattr(a, "max_batch", None))  # a memory budget only: not part of the run keys
    _warn(job.warnings)
    store = Store(st["db"], name=conf.names["db"])
    progress = None if st["quiet"] else SweepProgress()
    try:
        # ase.Atoms, so that the rows record how each structure was built and an element cell's tag enters the keys
        counts = sweep(model, job.atoms, st["epsilons"], st["seeds"], attacks=job.specs, config=job.pipeline,
                       store=store, chunk=st["chunk"], max_chunks=st["max_chunks"], dry_run=st["dry_run"],
                       progress=progress, dtype=dtype, executor=st["executor"], scheduler=st["scheduler"])
    except ImportError as err:
        raise InputError(f"jaxcert sweep: {err}") from None
    finally:
        if progress is not None:
            progress.close()
    rows = grid_rows(store, model.name, job.atoms, st["epsilons"], st["seeds"], job.specs, job.pipeline, st["dtype"])
    print(sweep_table(rows))
    more = " (a dry run: nothing computed)" if st["dry_run"] else " (rerun the same command to continue)"
    print(f"store {st['db']}: {counts['requested']} runs requested, {counts['already_done']} already stored, "
          f"{counts['computed']} computed now, {counts['remaining']} remaining" + (more if counts["remaining"] else ""))
    _warn(sweep_warnings([r for r in store.rows(model=model.name, dtype=st["dtype"]) if r["structure"] in job.atoms]))
    if st["export"]:
        try:
            n = store.export(st["export"])
        except ImportError as err:
            raise InputError(f"jaxcert sweep: {err}") from None
        print(f"wrote {n} rows to {st['export']}")
    if st["plots"]:
        files = plots.write_plots(store.rows(), st["plots"], metrics=plots.PLOT_METRICS, contour=job.contour)
        print(f"wrote {len(files)} files to {st['plots']}")
    if st["json"]:
        write_sweep_json(st["json"], counts, job.pipeline, job.atoms, store.rows())
        print(f"wrote {st['json']}")
    return 0


def cmd_plot_sweep(a: argparse.Namespace) -> int:
    """``jaxcert plot-sweep DB --out DIR``: metric-vs-ε figures of a sweep store (opened only if it is a jaxcert
    store; never created)."""
    contour = read_contour("--contour", a.contour)
    rows = stored_rows(a.db, model=a.model, dtype=a.dtype)
    chosen = plot_metrics("--metrics", a.metrics, rows)
    inputs.output_dir("--out", a.out)
    files = plots.write_plots(rows, a.out, metrics=chosen, contour=contour)
    print(f"wrote {len(files)} files to {a.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the ``jaxcert`` parser (numbers are taken as text and checked by
    :mod:`jaxcert.core.inputs`, so a bad one gets one line naming it; docs/attacks.md §8)."""
    at = sub.add_parser("attack", help="relax -> adversarial attack -> relax, immediate and post-relaxation metrics")
    model_args(at)
    at.add_argument("--structure", required=True, help="a structure file, or an element symbol: its conventional "
                    "cell (ase.build.bulk cubic=True where possible) repeated to --min-length")
    at.add_argument("--min-length", default=None, metavar="A", help="repeat the cell until every lattice vector is at "
                    "least this long in A (default 8 for an element symbol; a file is repeated only when given; "
                    "0 = no repeat)")
    at.add_argument("--attack", default="pgd", help="fgsm, ifgsm, pgd or a comma-separated list (default pgd)")
    at.add_argument("--random-start", action="store_true", help="fgsm/ifgsm: R+FGSM random start (a random +-eps/2 "
                    "sign step seeded by --seed, then eps/2 along the gradient sign); pgd always starts at random")
    at.add_argument("--eps", default="0.05", help="epsilon in A, > 0 (comma-separated list allowed; default 0.05)")
    at.add_argument("--relative", action="store_true", help="--eps is a fraction of the minimum lattice length")
    at.add_argument("--seed", default="42", help="seed(s) of the random starts, integers in [0, 2^31-1], "
                    "comma-separated (default 42)")
    at.add_argument("--n-steps", default="10", help="attack steps for ifgsm/pgd, an integer >= 1 (default 10)")
    at.add_argument("--alpha-ratio", default=None, help="pgd step alpha/eps, > 0 (default 0.1)")
    at.add_argument("--loss", default="energy", choices=["energy", "force_norm"], help="objective ascended")
    at.add_argument("--fmax", default="0.01", help="relaxation threshold in eV/A, > 0 (default 0.01)")
    at.add_argument("--max-steps", default="300", help="relaxation step limit, an integer >= 1 (default 300)")
    at.add_argument("--optimizer", default="fire", choices=list(OPTIMIZERS))
    at.add_argument("--rattle", default="0", help="Gaussian rattle of the input in A, >= 0 (default 0)")
    at.add_argument("--rattle-seed", default="0", help="seed of --rattle, an integer in [0, 2^31-1] (default 0)")
    at.add_argument("--quiet", action="store_true", help="no progress display (phases on stderr)")
    at.set_defaults(fn=cmd_attack)
    sw = sub.add_parser("sweep", help="resumable relax-attack-relax sweep into an SQLite store",
                        description="Settings come from the flags, else from the optional TOML file (keys: "
                        + ", ".join(sorted(SWEEP_DEFAULTS)) + "; a [config] table with " + ", ".join(SWEEP_CONFIG)
                        + "), else from the defaults shown.")
    sw.add_argument("config", nargs="?", help="optional sweep.toml describing the grid (see description)")
    sw.add_argument("--model", help="registered name (see `jaxcert models`), module:attr, or a bridged model")
    sw.add_argument("--defect", action="append", default=[], metavar="NAME=STRENGTH", help="wrap the model in a defect")
    sw.add_argument("--dtype", help="float64 (default) or float32")
    sw.add_argument("--max-batch", metavar="N", help="evaluate at most N geometries at once (a memory budget; "
                    "results are unchanged, so it is not part of the run keys); 'none' lifts the model's own limit")
    sw.add_argument("--json", help="write the JSON report here")
    sw.add_argument("--structures", help="comma-separated set names (mp2d: the 20 rebuilt crystals of the study's 2D "
                    "set; sei: the 20 Li-C-O-H-P-F stand-ins; all: both), crystal labels, element symbols or files "
                    "(default mp2d)")
    sw.add_argument("--attack", help="comma-separated fgsm, ifgsm, pgd (default all three)")
    sw.add_argument("--eps", help="epsilon grid in A, each > 0 (default: the experiment's 21 values)")
    sw.add_argument("--relative", action="store_true", default=None,
                    help="--eps are fractions of the minimum lattice length")
    sw.add_argument("--seed", help="comma-separated seeds, integers in [0, 2^31-1] (default 42,43,44,45,46)")
    sw.add_argument("--n-steps", help="attack steps for ifgsm/pgd, an integer >= 1 (default 10)")
    sw.add_argument("--alpha-ratio", help="pgd step alpha/eps, > 0 (default 0.1)")
    sw.add_argument("--random-start", action="store_true", default=None, help="fgsm/ifgsm: R+FGSM random start "
                    "(+-eps/2 random sign step, then eps/2 along the gradient sign; seeded by each run's seed)")
    sw.add_argument("--min-length", metavar="A", help="repeat element cells (default 8 A) and, when given, files "
                    "until every lattice vector is at least this long")
    sw.add_argument("--fmax", help="relaxation threshold in eV/A, > 0 (default 0.01)")
    sw.add_argument("--max-steps", help="relaxation step limit, an integer >= 1 (default 300)")
    sw.add_argument("--optimizer", choices=list(OPTIMIZERS), help="relaxation optimizer (default fire)")
    sw.add_argument("--db", help="SQLite file (created or resumed); per-atom arrays go to <db>.arrays/")
    sw.add_argument("--chunk", help="structures per vmapped program / dask task, an integer >= 1 (default 4)")
    sw.add_argument("--max-chunks", help="stop after this many chunks, an integer >= 1 (rerun to resume)")
    sw.add_argument("--dry-run", action="store_true", default=None, help="count requested, stored and pending runs; "
                    "compute nothing")
    sw.add_argument("--executor", choices=["local", "dask"], help="local (default) or dask (dask.distributed: a "
                    "LocalCluster, or --scheduler)")
    sw.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler address, e.g. tcp://host:8786")
    sw.add_argument("--export", metavar="PATH", help="export all rows to PATH (.csv, or .parquet with pyarrow)")
    sw.add_argument("--plots", metavar="DIR", help="write metric-vs-epsilon figures (median, IQR) to DIR")
    sw.add_argument("--contour", metavar="JSON", help="contour results (jaxcert.attacks.contour output, a list) for "
                    "the baseline band in --plots")
    sw.add_argument("--quiet", action="store_true", default=None, help="no progress bar")
    sw.set_defaults(fn=cmd_sweep)
    ps = sub.add_parser("plot-sweep", help="metric-vs-epsilon figures (median, IQR, contour band) of a sweep store")
    ps.add_argument("db", help="the sweep's SQLite file")
    ps.add_argument("--out", required=True, help="output directory")
    ps.add_argument("--model", help="only rows of this model")
    ps.add_argument("--dtype", help="only rows of this dtype (float32 or float64)")
    ps.add_argument("--contour", metavar="JSON", help="contour results (a JSON list of jaxcert.attacks.contour "
                    "outputs) for the baseline band")
    ps.add_argument("--metrics", help="comma-separated metrics, e.g. post_relaxation.max_displacement,steps_after "
                    "(default: jaxcert.attacks.plots.PLOT_METRICS)")
    ps.set_defaults(fn=cmd_plot_sweep)
