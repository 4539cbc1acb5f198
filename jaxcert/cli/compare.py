"""``jaxcert compare``: a comparison board of several report JSON files (``docs/compare.md``).

Argument parsing only: the work is :func:`jaxcert.report.compare.build_board`,
:func:`~jaxcert.report.compare.board_table` and :func:`~jaxcert.report.compare.board_html`.
"""

from __future__ import annotations

import argparse
import shutil

from jaxcert.core import inputs
from jaxcert.core.files import atomic_write
from jaxcert.report.compare import (
    ALIGN_MODES,
    LAYOUTS,
    MIN_WIDTH,
    board_html,
    board_json,
    board_table,
    build_board,
    sort_rows,
)

__all__ = ["cmd_compare", "register"]


def cmd_compare(a: argparse.Namespace) -> int:
    """Build the board, print it, write ``--json`` / ``--html``; exit 0 (2 for any input error).

    Everything is checked before any report is read: ``--width``, the output files (writable, not the same
    file twice, none of them one of the reports compared)."""
    width = (max(shutil.get_terminal_size((110, 24)).columns, MIN_WIDTH) if a.width is None
             else inputs.integer("--width", a.width, minimum=MIN_WIDTH))
    outputs = (("--json", a.json), ("--html", a.html))
    inputs.distinct_outputs(outputs)
    for flag, path in outputs:
        if path is not None:
            inputs.output_file(flag, path)
            for report in a.reports:  # the board must not overwrite a report it reads
                inputs.distinct_outputs((("REPORT.json", report), (flag, path)))
    board = build_board(a.reports, align=a.align, allow_version_mismatch=a.allow_version_mismatch, gates=a.gates)
    sort_rows(board, a.sort, a.reverse)  # validates --sort before anything is written
    print(board_table(board, sort=a.sort, reverse=a.reverse, width=width, layout=a.layout))
    if a.json:  # atomically, never through a link (jaxcert.core.files.atomic_write)
        atomic_write(a.json, board_json(board) + "\n", "--json")
        print(f"wrote {a.json}")
    if a.html:
        atomic_write(a.html, board_html(board, sort=a.sort, reverse=a.reverse), "--html")
        print(f"wrote {a.html}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommand to the ``jaxcert`` parser."""
    c = sub.add_parser("compare", help="compare report JSON files on one board (terminal, --html, --json)",
                       description="Models x probes board of jaxcert certify --json reports (or models x "
                       "structures of jaxcert lambda --json reports). See docs/compare.md.")
    c.add_argument("reports", nargs="+", metavar="REPORT.json", help="report files (all certify or all lambda)")
    c.add_argument("--html", help="write the board as a self-contained HTML page")
    c.add_argument("--gates", default="exact", choices=["exact", "reference"],
                   help="gate profile every cell is judged under, from the stored defects: exact (default) or "
                   "reference (the published finite-difference board's gates); docs/probes.md §3.1")
    c.add_argument("--json", help="write the board as strict JSON (schema jaxcert-board/1)")
    c.add_argument("--align", default="strict", choices=ALIGN_MODES,
                   help="strict (default): refuse different element/probe/structure sets; intersection: keep "
                   "the common ones and say what was dropped")
    c.add_argument("--sort", default=None, metavar="COLUMN",
                   help="order rows by model, overall, gates, evals, wall, dtype, evals_per_s, atom_steps_per_s, "
                   "a probe name (lambda: mean, max, gate or a structure); scores and rates highest first, costs "
                   "and lambda lowest first")
    c.add_argument("--reverse", action="store_true", help="reverse the --sort order")
    c.add_argument("--layout", default="auto", choices=LAYOUTS,
                   help="terminal table: models as rows, probes as rows (models as columns), or auto (models "
                   "as rows when it fits in --width)")
    c.add_argument("--width", type=int, default=None, metavar="N",
                   help=f"characters per line for --layout auto and the wrapped explanations, at least {MIN_WIDTH} "
                   "(default: the terminal's width, 110 when not on a terminal)")
    c.add_argument("--allow-version-mismatch", action="store_true",
                   help="compare reports written by different jaxcert versions")
    c.set_defaults(fn=cmd_compare)
