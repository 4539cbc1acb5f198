"""Our board beside the published finite-difference board, probe by probe (issue 26; docs/board.md).

Reads the reports ``jaxcert board`` wrote into ``benchmarks/results/board/`` and the published board's scores
(``benchmarks/results/board/published_pescert.json``, transcribed from pescert-bench's ``docs/index.json``
with its commit), pairs each of our models with its published entry (:data:`PAIRS`), and writes
``benchmarks/results/board/vs_published.json``: per model and probe our score, defect and gate, the
published ones, and the difference; every difference larger than 0.05 is flagged.

``--fd SPEC`` also re-runs ``--fd-probes`` of that model with every probe's ``derivatives`` set to
``FiniteDifference()`` (the reference's recipe: central differences of the model's own outputs, δ from the
precision, docs/probes.md) on float32 structures on the board's elements, and once more with exact
derivatives the same way.  Where the published score is
a finite-difference artefact, our FD run reproduces it and our exact run does not: the numbers that say
which board to believe.  Usage::

    python benchmarks/board_published.py [--fd nequix:W/nequix-mp-1-pft.nqx@float32 --fd-probes cross_maxwell,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _record import finish  # noqa: E402

from jaxcert.board import entry_name  # noqa: E402  (the report's file stem of a spec, as jaxcert board names it)

BOARD = pathlib.Path(__file__).parent / "results" / "board"
#: our report's file stem (``jaxcert board``'s default name) -> the published board's slug
PAIRS = {
    "nequix_nequix-mp-1-pft.nqx@float32": "nequix-mp-1-pft",
    "jax-sevennet_7net-0@float32": "sevennet-0",
    "jax-sevennet_7net-l3i5@float32": "sevennet-l3i5",
    "chgnet": "chgnet",
    "chgnet@float32": "chgnet",
    "lj": "lennard-jones",
}
FLAG = 0.05


def _ours(path: pathlib.Path) -> dict:
    d = json.loads(path.read_text())
    return {p["name"]: {"score": p.get("score"), "defect": p.get("defect"), "gate": p.get("gate"),
                        "status": p.get("status"), "message": p.get("message")} for p in d["probes"]} | {
        "_overall": d["aggregate"].get("overall"), "_method": d["aggregate"].get("method"),
        "_arithmetic": _mean([p.get("score") for p in d["probes"]]), "_dtype": d.get("dtype"),
        "_complete": d.get("complete", True), "_wall_s": d.get("wall_time_s"), "_elements": d.get("elements")}


def _mean(xs: list) -> float | None:
    """The arithmetic mean of the probe scores (a crashed probe counts as 0, as in both suites), the published
    board's headline aggregate."""
    xs = [0.0 if x is None else float(x) for x in xs]
    return sum(xs) / len(xs) if xs else None


def compare() -> dict:
    pub = json.loads((BOARD / "published_pescert.json").read_text())
    out = {"source": pub["source"], "flag": FLAG, "models": {}}
    for stem, slug in PAIRS.items():
        path = BOARD / f"{stem}.json"
        if not path.exists() or slug not in pub["models"]:
            continue
        ours, theirs = _ours(path), pub["models"][slug]
        rows = {}
        for probe, score in theirs["scores"].items():
            o = ours.get(probe)
            if o is None:
                continue
            diff = None if o["score"] is None or score is None else o["score"] - score
            rows[probe] = {"ours": o, "published": {"score": score, "defect": theirs["defects"].get(probe),
                                                    "gate": theirs["gates"].get(probe)},
                           "diff": diff, "flagged": diff is not None and abs(diff) > FLAG}
        out["models"][stem] = {"slug": slug, "ours_overall": ours["_overall"], "ours_overall_method": ours["_method"],
                               "ours_arithmetic": ours["_arithmetic"],
                               "published_overall": theirs["overall"]["geometric"],
                               "published_arithmetic": theirs["overall"]["arithmetic"], "ours_dtype": ours["_dtype"],
                               "published_precision": theirs["precision"], "complete": ours["_complete"],
                               "probes": rows}
    return out


def fd_run(spec: str, probes: list[str], elements: list[str], earlier: dict | None = None,
           save=lambda res: None) -> dict:
    """``probes`` of ``spec`` with exact derivatives and with the reference's finite differences.

    Each of the two runs is handed to ``save`` as soon as it is done, and a run that ``earlier`` (this spec's
    entry from an earlier invocation) already holds for the same probes and elements is kept, not repeated:
    an invocation killed during the exact run (the kernel's out-of-memory killer, measured on 7net-l3i5
    beside three other jobs) resumes there."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jaxcert
    from jaxcert.cli._common import load_model
    from jaxcert.core.derivatives import FiniteDifference
    from jaxcert.probes import PROBES

    model = load_model(spec)
    # float32 structures: every probe's FD step then follows the reference's rule for a float32 model
    # (docs/probes.md, fd_step from the declared precision), and the exact run is made the same way
    dtype = jax.numpy.float32
    res = {"dtype": "float32", "probes": list(probes), "elements": list(elements)}
    if earlier and earlier.get("probes") == list(probes) and earlier.get("elements") == list(elements):
        res |= {k: earlier[k] for k in ("fd", "exact") if k in earlier}
    for label, configs in (("fd", {p: dataclasses.replace(PROBES[p].config(), derivatives=FiniteDifference())
                                   for p in probes}), ("exact", None)):
        if label in res:
            print(f"{spec} {label}: kept from the earlier run", flush=True)
            continue
        t = time.perf_counter()
        rep = jaxcert.certify(model, elements, probes=probes, seed=0, dtype=dtype, configs=configs, card=False)
        res[label] = {"wall_s": time.perf_counter() - t, "probes": {
            o.name: {"score": o.summary()["score"], "defect": o.summary()["defect"], "gate": o.summary()["gate"],
                     "per_element_defect": dict(zip(o.elements, o.defect.tolist(), strict=True))}
            for o in rep.outcomes}}
        save(res)
        print(f"{spec} {label}: " + ", ".join(f"{k} {v['score']:.4f} (defect {v['defect']:.3g})"
                                              for k, v in res[label]["probes"].items()
                                              if v["score"] is not None and v["defect"] is not None), flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fd", default=None, help="a model spec to re-run with finite differences")
    ap.add_argument("--fd-probes", default="cross_maxwell,stress_consistency,conservativeness")
    ap.add_argument("--elements", default="Li,Be,B,C,Na,Mg,Al,Si,P,S")
    a = ap.parse_args()
    load0 = os.getloadavg()
    out = compare()
    prev = BOARD / "vs_published.json"
    if prev.exists():  # keep FD runs measured earlier
        out["fd"] = json.loads(prev.read_text()).get("fd", {})
    if a.fd:
        fds = out.setdefault("fd", {})

        def save(res: dict) -> None:
            fds[a.fd] = res
            finish(out, load0, str(BOARD / "vs_published.json"), "only the FD runs' wall times are affected")

        fds[a.fd] = fd_run(a.fd, a.fd_probes.split(","), a.elements.split(","), fds.get(a.fd), save)
    for stem, m in out["models"].items():
        print(f"\n{stem} (ours {m['ours_dtype']}, overall geometric {m['ours_overall']:.4f}, arithmetic "
              f"{m['ours_arithmetic']:.4f}) vs {m['slug']} ({m['published_precision']}, geometric "
              f"{m['published_overall']:.4f}, arithmetic {m['published_arithmetic']:.4f})")
        for probe, r in m["probes"].items():
            o, p = r["ours"], r["published"]
            mark = "  <-- |diff| > 0.05" if r["flagged"] else ""
            os_ = "—" if o["score"] is None else f"{o['score']:.4f}"
            od = "—" if o["defect"] is None else f"{o['defect']:.3g}"
            print(f"  {probe:20s} ours {os_} (d {od}) | published {p['score']:.4f} (d {p['defect']:.3g}){mark}")
    finish(out, load0, str(BOARD / "vs_published.json"), "only the FD runs' wall times are affected")
    print("\n" + markdown(out))


def _cell(score: float | None, defect: float | None) -> str:
    return "crash" if score is None else f"{score:.3f} ({'—' if defect is None else f'{defect:.2g}'})"


def markdown(out: dict) -> str:
    """The side-by-side tables of docs/board.md: per model, each probe's score (defect) here and published,
    the difference, and the FD re-run where there is one."""
    lines = []
    for stem, m in out["models"].items():
        fd = next((v for k, v in out.get("fd", {}).items() if entry_name(k) == stem), None)
        lines += [f"**{stem}** vs published `{m['slug']}` ({m['published_precision']}): arithmetic overall "
                  f"{m['ours_arithmetic']:.3f} vs {m['published_arithmetic']:.3f}", "",
                  "| probe | jaxcert, exact | published, FD | Δ score |" + (" jaxcert FD (float32) | jaxcert exact "
                                                                           "(float32) |" if fd else ""),
                  "|---|---|---|---|" + ("---|---|" if fd else "")]
        for probe, r in m["probes"].items():
            o, p = r["ours"], r["published"]
            d = "—" if r["diff"] is None else f"{r['diff']:+.3f}" + (" **" if r["flagged"] else "")
            row = f"| {probe} | {_cell(o['score'], o['defect'])} | {_cell(p['score'], p['defect'])} | {d} |"
            if fd:
                f, e = fd["fd"]["probes"].get(probe), fd["exact"]["probes"].get(probe)
                row += f" {_cell(f['score'], f['defect']) if f else ''} |"
                row += f" {_cell(e['score'], e['defect']) if e else ''} |"
            lines.append(row)
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
