"""Section ``consensus`` — model vs model vs DFT: a panel of checkpoints against raw MP total energies.

Single points of the dcdft crystals and the AFLOW prototypes matching an MP raw compound; ``consensus_test``
with min_models = the panel that loaded; labelled synthetic corruptions of the reference are the positive
control (docs/controls.md, section 14.5).  Skipped when no panel member loads.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jaxcert import datasets
from jaxcert.controls._consensus import consensus_test
from jaxcert.controls._robust import median_abs, trimmed_mae
from jaxcert.controls.benchmark.config import QUICK_EOS
from jaxcert.controls.benchmark.context import Context
from jaxcert.controls.benchmark.geometry import reduced
from jaxcert.controls.benchmark.models import energies, supports
from jaxcert.controls.benchmark.results import ModelRun, SectionResult
from jaxcert.controls.benchmark.stats import fmt
from jaxcert.core.result import Status
from jaxcert.datasets._files import package_file, read_json

__all__ = ["NAME", "run", "CORRUPTIONS", "CORRUPT_FRACTION"]

NAME = "consensus"
#: Synthetic corruptions of the consensus reference (eV/atom) and the labelled fraction of structures.
CORRUPTIONS = (0.15, 0.5, 1.0)
CORRUPT_FRACTION = 0.2
_PROTOCOL = (
    "structures: the dcdft elemental crystals at the WIEN2k V0 (the elements with a raw MP "
    "elemental entry) and the AFLOW prototypes whose reduced formula is an MP raw compound (the "
    "library's experimental geometry; same formula, structure identity not checked), single points; "
    "reference: raw MP GGA(+U) total energy per atom (elements: MP's elemental entry; compounds: "
    "E_f(raw) + x . mu_MP), uncorrected, the scale MPtrj-trained models learned; consensus_test "
    "with min_models = the panel that loaded and the paper's thresholds (S < 0.1, |gap| > 0.3 "
    "eV/atom, z >= 5). Per-element re-referencing is not run: an elemental structure is its own "
    "column, so the offset would absorb its whole gap.")


def mp_elemental_energies() -> dict[str, float]:
    """Raw MP GGA energy per atom of every elemental entry in pymatgen's calc_compounds.json.gz (89 elements)."""
    calc = read_json(package_file("pymatgen", "analysis/compatibility/calc_compounds.json.gz", pip="pymatgen"))
    out = {}
    for entry in calc.values():
        comp = {k: float(v) for k, v in entry["composition"].items() if float(v) > 0}
        if len(comp) == 1:
            (el, n), = comp.items()
            out[el] = float(entry["energy"]) / n
    return out


def _structures(quick: bool) -> tuple[list[str], list[str], list[Any], np.ndarray, list[tuple[str, ...]]]:
    """Names, kinds ("element"/"compound"), geometries, reference energies (eV/atom) and element sets."""
    mp, dc = datasets.get("mp-raw-vs-exp"), datasets.get("dcdft")
    mu = mp_elemental_energies()
    names, kinds, geoms, ref, syms = [], [], [], [], []
    for s in (QUICK_EOS if quick else dc.symbols):
        if s in mu:
            names.append(s)
            kinds.append("element")
            geoms.append(dc.at_v0(s))
            ref.append(mu[s])
            syms.append((s,))
    if not quick:
        by_formula = {reduced(f): i for i, f in enumerate(mp.formulas)}
        for p in datasets.get("aflow-prototypes"):
            i = by_formula.get(reduced(p.formula))
            if i is None or len(p.elements) < 2:
                continue
            x = np.asarray(mp.fractions[i])
            names.append(f"{p.formula} ({p.label})")
            kinds.append("compound")
            geoms.append(p.atoms.copy())
            ref.append(float(mp.e_form_raw[i] + x @ np.asarray(mp.elemental_energy)))
            syms.append(tuple(p.elements))
    return names, kinds, geoms, np.array(ref), syms


def run(ctx: Context) -> SectionResult:
    """The panel's energies (reusing section ``eos`` where it has them), the test and its positive control."""
    cfg = ctx.cfg
    t0 = time.perf_counter()
    names, kinds, geoms, ref, syms = _structures(cfg.quick)
    n = len(names)
    panel, E, panel_info = [], [], {}
    eos_models = ctx.earlier("eos").get("models", {})
    for spec in cfg.panel:
        model, info = ctx.models.get(spec)
        key = ctx.key(spec)
        if model is None:
            panel_info[key] = ModelRun(Status.ERROR, info.reason)
            continue
        tm = time.perf_counter()
        e = np.full(n, np.nan)
        sup = np.array([supports(model, s) for s in syms])
        reuse = eos_models.get(key) or eos_models.get(spec)
        reused = 0
        if reuse and reuse.get("status") == Status.OK.value:
            pe = reuse["per_element"]
            for k in range(n):
                if kinds[k] == "element" and names[k] in list(pe["symbols"]):
                    v = pe["e_at_wien2k_v0"][list(pe["symbols"]).index(names[k])]
                    if v is not None:
                        e[k], reused = v, reused + 1
        todo = [k for k in range(n) if sup[k] and not np.isfinite(e[k])]
        if todo:
            tot = energies(model, [geoms[k] for k in todo])
            e[todo] = tot / np.array([len(geoms[k]) for k in todo])
        panel.append(key)
        E.append(e)
        panel_info[key] = ModelRun(Status.OK, values={
            "name": model.name, "n_evaluated": len(todo), "n_reused_from_eos": reused,
            "n_unsupported": int((~sup).sum()), "wall_s": time.perf_counter() - tm})
        ctx.log(f"  consensus panel {key}: {len(todo)} structures evaluated, {reused} reused "
                f"({time.perf_counter() - tm:.0f} s)")
    res: dict[str, Any] = {
        "protocol": _PROTOCOL, "names": names, "kinds": kinds, "reference_eV_per_atom": ref, "panel": panel,
        "panel_info": panel_info, "wall_s": None,
    }
    if not panel:
        res["reason"] = "no panel model loaded"
        return SectionResult(NAME, Status.SKIPPED, res)
    Em = np.stack(E, axis=1)
    m = len(panel)
    base = consensus_test(Em, ref, min_models=m)
    with np.errstate(invalid="ignore"):
        per_model = {p: {"median_abs_vs_reference": median_abs(Em[:, j] - ref),
                         "trimmed_vs_reference": trimmed_mae(Em[:, j] - ref).to_dict(),
                         "median_abs_vs_consensus": median_abs(Em[:, j] - base.consensus)}
                     for j, p in enumerate(panel)}
    controls = _positive_control(Em, ref, base, m, cfg.seed)
    disc = np.flatnonzero(np.asarray(base.discrepancy, bool))
    res.update({
        "min_models": m, "energies_eV_per_atom": Em,
        "result": base.to_dict(), "per_model": per_model,
        "discrepancies": [{"name": names[k], "gap": float(base.gap[k]), "spread": float(base.spread[k]),
                           "z": float(base.z[k])} for k in disc],
        "positive_control": {"fraction": CORRUPT_FRACTION, "what": "the reference is corrupted by +-delta on a "
                             "labelled random subset of the scored structures; recall = flagged corrupted / "
                             "corrupted; flagged_clean = discrepancies among the untouched rows (the baseline's "
                             "own, the test is per structure); new_false_positives must be 0", "runs": controls},
        "wall_s": time.perf_counter() - t0,
    })
    ctx.log(f"  consensus: panel of {m}, {base.n_scored} scored, {base.n_discrepancies} discrepancies; recall "
            + ", ".join(f"{c['delta_eV_per_atom']}: {fmt(c['recall'], '.2f')}" for c in controls))
    return SectionResult(NAME, Status.OK, res)


def _positive_control(Em: np.ndarray, ref: np.ndarray, base: Any, m: int, seed: int) -> list[dict[str, Any]]:
    """For each corruption size, shift the reference of a labelled random subset and measure the recall."""
    n = len(ref)
    rng = np.random.default_rng(seed)
    scored = np.asarray(base.scored, bool)
    controls = []
    for delta in CORRUPTIONS:
        lab = scored & (rng.random(n) < CORRUPT_FRACTION)
        sign = rng.choice([-1.0, 1.0], n)
        r = consensus_test(Em, ref + np.where(lab, sign * delta, 0.0), min_models=m)
        flag = np.asarray(r.discrepancy, bool)
        testable = lab & (np.asarray(base.spread) < base.s_max)
        controls.append({
            "delta_eV_per_atom": delta, "n_corrupted": int(lab.sum()), "n_testable": int(testable.sum()),
            "recall": float(np.sum(flag & lab) / lab.sum()) if lab.any() else None,
            "recall_testable": float(np.sum(flag & testable) / testable.sum()) if testable.any() else None,
            "flagged_clean": int(np.sum(flag & ~lab)),
            "new_false_positives": int(np.sum(flag & ~lab & ~np.asarray(base.discrepancy, bool))),
            "expected": "recall ~ 0 (below d_min = 0.3 eV/atom: not the test's target)" if delta < base.d_min
                        else "recall ~ 1 where the panel agrees (S < s_max)",
            "corrupted": np.flatnonzero(lab), "flagged": np.flatnonzero(flag),
        })
    return controls
