"""The headline of the benchmark report: the few numbers of every finished part, as a dict and as text.

Read from the report's JSON alone (never from in-memory results), so a report file loaded back gives the same
headline as the run that wrote it.
"""

from __future__ import annotations

from typing import Any

from jaxcert.controls.benchmark.stats import fmt
from jaxcert.core.result import Status, to_jsonable

__all__ = ["headline", "headline_text"]

_OK = Status.OK.value


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of every finished part (each model's Δ, K/G log-r and bias, the Rung-0 gain, SG
    retention at each symprec, the consensus recall, the hull check)."""
    res = to_jsonable(result)
    sec = res.get("sections", {})
    h: dict[str, Any] = {}
    eos = sec.get("eos", {})
    if eos:
        h["eos_delta_meV_per_atom"] = {m: r.get("delta_mean_meV") for m, r in eos.get("models", {}).items()
                                       if r.get("status") == _OK}
        h["eos_delta_median_meV_per_atom"] = {m: r["delta"]["median_abs"] for m, r in eos.get("models", {}).items()
                                              if r.get("status") == _OK}
        h["eos_minus_floor_meV_per_atom"] = {m: r["on_floor_elements"]["minus_floor"].get("estimate")
                                             for m, r in eos.get("models", {}).items() if r.get("status") == _OK}
        fl = eos.get("floor", {})
        h["eos_floor_wien2k_vs_experiment_delta_meV_per_atom"] = fl.get("delta_mean_meV")
    el = sec.get("elastic", {})
    if el:
        h["elastic"] = {m: {"K_log_r": r["compare_exact"]["K"]["r"], "K_bias": r["compare_exact"]["K"]["bias"],
                            "G_log_r": r["compare_exact"]["G"]["r"], "G_bias": r["compare_exact"]["G"]["bias"],
                            "routes_max_abs_dC_GPa": r["routes"]["max_abs_dC_GPa"],
                            "routes_n_agree": f"{r['routes']['n_agree']}/{r['routes']['n']}"}
                        for m, r in el.get("models", {}).items() if r.get("status") == _OK}
    r0 = sec.get("rung0", {})
    if r0.get("fits"):
        h["rung0"] = {k: {"raw": f["raw"]["value"], "corrected": f["corrected"]["value"], "gain": f["gain"],
                          "r_vs_minus_mp2020": f["ref_corr_r"], "n_elements_correlated": f["ref_corr_n"]}
                      for k, f in r0["fits"].items()}
        h["rung0_floor_raw_vs_exp_median_eV_per_atom"] = r0.get("floor", {}).get("median_abs")
    pr = sec.get("prototypes", {})
    if pr:
        h["sg_retention"] = {m: dict(zip([str(t) for t in r["retention"]["symprec"]], r["retention"]["fraction"],
                                         strict=True))
                             for m, r in pr.get("models", {}).items() if r.get("status") == _OK}
        h["volume_drift_median"] = {m: r["volume_drift"]["median"] for m, r in pr.get("models", {}).items()
                                    if r.get("status") == _OK}
        h["prototypes_converged"] = {m: f"{r['n_converged']}/{r['n']}" for m, r in pr.get("models", {}).items()
                                     if r.get("status") == _OK}
    co = sec.get("consensus", {})
    if co.get("status") == _OK:
        h["consensus"] = {"panel_size": co["min_models"], "n_scored": co["result"]["n_scored"],
                          "n_discrepancies": co["result"]["n_discrepancies"],
                          "recall": {str(c["delta_eV_per_atom"]): c["recall"] for c in co["positive_control"]["runs"]},
                          "new_false_positives": sum(c["new_false_positives"] for c in co["positive_control"]["runs"])}
    hu = sec.get("hull", {})
    if "passed" in hu:
        h["hull_invariance_passed"] = hu["passed"]
    return h


def headline_text(result: dict[str, Any]) -> str:
    """The headline as a few readable lines."""
    h = result.get("headline") or headline(result)
    lines = [f"jaxcert controls benchmark ({'complete' if result.get('complete') else 'partial'}, "
             f"{fmt(result.get('wall_s'), '.0f')} s)"]
    for m, d in h.get("eos_delta_meV_per_atom", {}).items():
        lines.append(f"  EOS vs WIEN2k  {m:<28} Delta {fmt(d)} meV/atom (median "
                     f"{fmt(h['eos_delta_median_meV_per_atom'].get(m))}, minus floor "
                     f"{fmt(h['eos_minus_floor_meV_per_atom'].get(m))})")
    if "eos_floor_wien2k_vs_experiment_delta_meV_per_atom" in h:
        lines.append(f"  EOS floor      WIEN2k vs experiment Delta "
                     f"{fmt(h['eos_floor_wien2k_vs_experiment_delta_meV_per_atom'])} meV/atom")
    for m, d in h.get("elastic", {}).items():
        lines.append(f"  elastic vs exp {m:<28} K log-r {fmt(d['K_log_r'])} bias {fmt(d['K_bias'])}; G log-r "
                     f"{fmt(d['G_log_r'])} bias {fmt(d['G_bias'])}; routes max |dC| "
                     f"{fmt(d['routes_max_abs_dC_GPa'])} GPa, agree {d['routes_n_agree']}")
    for m, d in h.get("sg_retention", {}).items():
        lines.append(f"  SG retention   {m:<28} " + ", ".join(f"{k} Å: {fmt(v, '.3f')}" for k, v in d.items())
                     + f"; median volume drift {fmt(h['volume_drift_median'].get(m), '+.3f')}")
    for k, d in h.get("rung0", {}).items():
        lines.append(f"  Rung-0 MP raw vs exp ({k}): held-out trimmed MAE {fmt(d['raw'])} -> {fmt(d['corrected'])} "
                     f"eV/atom (gain {fmt(d['gain'])}), r(constants, -MP2020) {fmt(d['r_vs_minus_mp2020'])}")
    if "consensus" in h:
        c = h["consensus"]
        lines.append(f"  consensus      panel {c['panel_size']}, {c['n_scored']} scored, {c['n_discrepancies']} "
                     f"discrepancies; recall " + ", ".join(f"{k} eV: {fmt(v, '.2f')}" for k, v in c["recall"].items()))
    if "hull_invariance_passed" in h:
        lines.append(f"  hull invariance passed: {h['hull_invariance_passed']}")
    return "\n".join(lines)
