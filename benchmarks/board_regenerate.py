"""Rebuild the committed board (benchmarks/results/board/) from its reports under both gate profiles, recomputing
nothing: every verdict is judged again from the stored defects and details (jaxcert/report/gates.py).

Writes, beside the reports:

* ``board.json`` and ``index.html``: the board under the exact profile (jaxcert's default); each row also carries
  its verdict count under the reference profile (``gates_by_profile``);
* ``board_reference.json`` and ``reference.html``: the same board under the reference profile, the published
  finite-difference board's gates, for setting the two boards side by side.

Both boards carry the published finite-difference board's rows from ``published_pescert.json`` beside the
reports (``--published``; docs/board.md, "The published rows"), and their pages open sorted by the overall score.
``--profiles exact`` rewrites only ``board.json`` and ``index.html``.

A report written before bridged models stated their precision (CHGNet ``chgnet@float32``) is judged at the
precision its spec in ``benchmarks/board_models.toml`` names; the report file is not changed.

The board averages every model over the same elements.  A report that lacks some of them (EMT has parameters for
C and Al only of Li…S) is left off both boards and named in their notes: keeping it would average it over fewer
elements than the rest, and ``--skip-unsupported`` would average every model over C and Al.

    python benchmarks/board_regenerate.py [--folder benchmarks/results/board] [--published FILE] [--profiles exact]
"""

from __future__ import annotations

import argparse
import json
import os

from jaxcert.board import BOARD_HTML, BOARD_JSON, _page
from jaxcert.checkpoint import write_json
from jaxcert.core.files import atomic_write
from jaxcert.report import published as published_board
from jaxcert.report.compare import board_html, build_board, load

HERE = os.path.dirname(os.path.abspath(__file__))


def _supported(path: str) -> list[str]:
    """The elements a report has results for on every probe (none of them unsupported)."""
    doc = json.load(open(path, encoding="utf-8"))
    return [el for el in doc["elements"]
            if all(p["per_element"].get(el, {}).get("status") != "unsupported" for p in doc["probes"])]


def _spec_precisions(toml_path: str) -> dict[str, str]:
    """Report file stem -> the precision its board spec names (``@float32`` / ``@float64``)."""
    from jaxcert.board import read_models_toml

    out = {}
    if os.path.exists(toml_path):
        for e in read_models_toml(toml_path):
            opts = e.spec.partition("@")[2].split(",")
            for p in ("float32", "float64"):
                if p in opts:
                    out[e.name] = p
    return out


def _load(path: str, precisions: dict[str, str]):
    src = load(path)
    stem = os.path.basename(path)[:-len(".json")]
    model = src.data.get("model")
    if isinstance(model, dict) and not model.get("precision") and stem in precisions:
        model["precision"] = precisions[stem]  # in memory only: what the spec ran it in
    return src


def _mixed_precision_rows(folder: str, files: list[str]) -> list[str]:
    """The reports of float32 nequix networks on float64 structures finished before the network was traced in its
    own precision (no ``finished_utc``: that stamp and the fix landed together); their probes computed most of the
    network in float64 (docs/adapters.md, "Precision")."""
    out = []
    for f in files:
        doc = json.load(open(os.path.join(folder, f), encoding="utf-8"))
        name = str((doc.get("model") or {}).get("name", ""))
        if name.startswith("nequix:") and name.endswith("@float32") and doc.get("dtype") == "float64" \
                and not doc.get("finished_utc"):
            out.append(f)
    return out


PROFILES = {"exact": (BOARD_JSON, BOARD_HTML), "reference": ("board_reference.json", "reference.html")}


def regenerate(folder: str, toml_path: str = os.path.join(HERE, "board_models.toml"), published: str | None = None,
               profiles: tuple[str, ...] = tuple(PROFILES)) -> dict[str, dict]:
    """Rebuild the boards of ``profiles`` in ``folder`` (module docstring); ``published``: the published board's
    file (default: ``published_pescert.json`` in ``folder``, when it is there)."""
    old = json.load(open(os.path.join(folder, BOARD_JSON), encoding="utf-8"))
    settings = dict(old["settings"])
    elements = list(settings["elements"])
    # the board's models in the order of its TOML (board.json itself is rewritten below)
    from jaxcert.board import read_models_toml

    files = [f"{e.name}.json" for e in read_models_toml(toml_path)
             if os.path.exists(os.path.join(folder, f"{e.name}.json"))]
    precisions = _spec_precisions(toml_path)
    keep, left = [], {}
    for f in files:
        have = _supported(os.path.join(folder, f))
        if have == elements:
            keep.append(f)
        else:
            left[f] = [el for el in elements if el not in have]
    if published is None and os.path.exists(os.path.join(folder, "published_pescert.json")):
        published = os.path.join(folder, "published_pescert.json")
    pub = published_board.load(published) if published else None
    boards = {}
    for profile in profiles:
        name, page = PROFILES[profile]
        board = build_board([_load(os.path.join(folder, f), precisions) for f in keep], gates=profile)
        for row in board["rows"]:
            row["file"] = os.path.basename(row["file"])
            row["elements_in_report"] = elements
        board["averaged_elements"] = elements
        if left:
            board["notes"].append("left off this board because they lack elements every other model has (their "
                                  "reports are beside it): " + "; ".join(f"{f}: no {', '.join(els)}"
                                                                         for f, els in left.items()))
        mixed = _mixed_precision_rows(folder, keep)
        if mixed:
            board["notes"].append(
                "computed before jaxcert held a float32 nequix network to float32 under x64 (these boards run float64 "
                "structures): most of the network's arithmetic in these rows' probes ran in float64, so they are "
                "neither the float32 nor the float64 model (docs/adapters.md, \"Precision\"): " + ", ".join(mixed))
        other = "reference.html (board_reference.json)" if profile == "exact" else "index.html (board.json)"
        board["notes"].append(f"gate profile {profile}: every verdict judged from the stored defects and details "
                              f"(benchmarks/board_regenerate.py); the other profile's board is {other}")
        if pub is not None:
            published_board.add(board, pub)
        board["failed"] = old.get("failed", [])
        board["settings"] = {**settings, "gates": profile}
        write_json(board, os.path.join(folder, name))
        atomic_write(os.path.join(folder, page), _page(board, board_html(board, sort="overall")))
        boards[profile] = board
    return boards


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default=os.path.join(HERE, "results", "board"))
    ap.add_argument("--published", default=None, help="the published board's file (default: published_pescert.json "
                    "in the folder)")
    ap.add_argument("--profiles", default="exact,reference", help="which boards to rewrite: exact (board.json, "
                    "index.html), reference (board_reference.json, reference.html), or both (default)")
    a = ap.parse_args()
    profiles = tuple(p.strip() for p in a.profiles.split(","))
    bad = [p for p in profiles if p not in PROFILES]
    if bad:
        ap.error(f"--profiles: got {bad[0]!r}; allowed: exact, reference")
    boards = regenerate(a.folder, published=a.published, profiles=profiles)
    ex = boards.get("exact") or boards["reference"]
    print(f"{'model':56s} {'precision':9s} {'exact':>7s} {'reference':>9s}")
    for r in ex["rows"]:
        if r.get("origin") == "published":
            print(f"{r['label']:56s} {r['precision']:9s} {'':>7s} {r['gates_passed']:>5d}/{r['gates_total']} (its own)")
            continue
        g = r["gates_by_profile"]
        print(f"{r['label']:56s} {r['precision']:9s} {g['exact']['passed']:>3d}/{g['exact']['total']:<3d} "
              f"{g['reference']['passed']:>5d}/{g['reference']['total']}")
    if len(boards) == 2:
        assert [r["file"] for r in boards["exact"]["rows"]] == [r["file"] for r in boards["reference"]["rows"]]


if __name__ == "__main__":
    main()
