"""Section ``prototypes`` — model vs its own start: symmetry retention and volume drift on relaxation.

The all-metal AFLOW prototypes relaxed with the cell (bridged models: their own elements and experimental
lattice; analytic models: decorated with supported metals at the Vegard volume), the guard of seed 001
Methods C applied afterwards, space groups of start and end compared at each symprec (docs/controls.md,
section 14.3).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jaxcert import datasets
from jaxcert.controls._robust import sg_retention, trimmed_mae
from jaxcert.controls.benchmark.config import V0_CUTOFF
from jaxcert.controls.benchmark.context import Context
from jaxcert.controls.benchmark.geometry import decorate, min_distance
from jaxcert.controls.benchmark.models import bridged, supports
from jaxcert.controls.benchmark.relaxation import relax_all
from jaxcert.controls.benchmark.results import ModelRun, SectionResult
from jaxcert.controls.benchmark.stats import boot, fmt, nanmedian
from jaxcert.core.result import Status

__all__ = ["NAME", "run", "SYMPREC", "DECORATION_METALS", "GUARD_VOLUME", "GUARD_DISTANCE"]

NAME = "prototypes"
SYMPREC = (0.01, 0.05, 0.1)
#: Metals used to decorate the prototypes for analytic models, in order (species k of a prototype, ordered by
#: atomic number, gets the k-th metal the model supports).
DECORATION_METALS = ("Cu", "Ni", "Pd", "Ag", "Pt", "Au", "Al", "Rh", "Ir", "Pb")
#: The relaxation guard of seed 001 Methods C: volume outside 0.3-6.0x the start, or a distance below 0.5 Å.
GUARD_VOLUME = (0.3, 6.0)
GUARD_DISTANCE = 0.5
QUICK_PROTOTYPES = 3
QUICK_MAX_STEPS = 60


def run(ctx: Context) -> SectionResult:
    """Every model's prototype relaxations; one :class:`ModelRun` per model."""
    cfg = ctx.cfg
    protos = list(datasets.get("aflow-prototypes").all_metal())
    if cfg.quick:
        protos = [p for p in protos if len(p.atoms) <= 4][:QUICK_PROTOTYPES]
    fields = {
        "protocol": "the all-metal AFLOW prototypes (seed 001's non-metal exclusion set; docs/datasets.md); "
                    "jaxcert.optim.relax.relax_cell (FIRE on ASE's FrechetCellFilter coordinates, fmax "
                    f"{cfg.fmax} eV/Å) vmapped over size buckets; guard: volume outside {GUARD_VOLUME} x start or a "
                    f"distance < {GUARD_DISTANCE} Å = failed (not scored); retention: spglib space group of start "
                    "and relaxed structure at each symprec, bootstrap over the prototypes' original chemical systems",
        "decoration": "bridged models: the prototype's own (experimental) elements and lattice, the smallest "
                      f"{cfg.bridged_prototypes} cells the model supports, <= {cfg.bridged_max_steps} FIRE steps. "
                      "Analytic models: species k (ordered by Z) -> the k-th supported metal of "
                      f"{', '.join(DECORATION_METALS)}, cell scaled isotropically to the mean of the metals' ASE "
                      f"reference volumes per atom (Vegard), the cells of <= {cfg.prototype_max_atoms} atoms, "
                      f"<= {cfg.max_steps} steps",
        "symprec": SYMPREC, "n_prototypes": len(protos)}
    ctx.begin(NAME, fields)
    return ctx.per_model(NAME, fields, lambda spec: _model(ctx, spec, protos))


def _model(ctx: Context, spec: str, protos: list[Any]) -> ModelRun:
    """One model's relaxations, guard verdicts, symmetry retention and volume drift."""
    cfg = ctx.cfg
    model, info = ctx.models.get(spec)
    if model is None:
        return ModelRun(Status.ERROR, info.reason)
    t0 = time.perf_counter()
    if bridged(model):
        cand = sorted((p for p in protos if supports(model, p.elements)), key=lambda p: (len(p.atoms), p.label))
        cand = cand[:cfg.bridged_prototypes]
        starts = [p.atoms.copy() for p in cand]
        decoration = "original elements"
        steps = min(cfg.bridged_max_steps, QUICK_MAX_STEPS) if cfg.quick else cfg.bridged_max_steps
    else:
        metals = [m for m in DECORATION_METALS if supports(model, [m])]
        cand = [p for p in protos if len(p.elements) <= len(metals) and len(p.atoms) <= cfg.prototype_max_atoms]
        starts = [decorate(p, metals) for p in cand]
        decoration = f"decorated with {', '.join(metals[:max((len(p.elements) for p in cand), default=0)])}"
        steps = min(cfg.max_steps, QUICK_MAX_STEPS) if cfg.quick else cfg.max_steps
    if not cand:
        return ModelRun(Status.SKIPPED, "no prototype the model supports")
    runs = relax_all(model, starts, cfg.fmax, steps)
    relaxed, ratio, failed_why = [], np.full(len(cand), np.nan), {}
    for k, (a0, r) in enumerate(zip(starts, runs, strict=True)):
        st = r["structure"]
        vol = abs(float(np.linalg.det(np.asarray(st.cell))))
        ratio[k] = vol / a0.get_volume()
        ok = np.isfinite(ratio[k]) and np.all(np.isfinite(np.asarray(st.positions)))
        why = None
        if not ok:
            why = "non-finite output"
        elif not GUARD_VOLUME[0] <= ratio[k] <= GUARD_VOLUME[1]:
            why = f"volume ratio {ratio[k]:.3g}"
        elif min_distance(st.to_ase()) < GUARD_DISTANCE:
            why = "interatomic distance < 0.5 Å"
        if why:
            failed_why[cand[k].label + ":" + cand[k].formula] = why
            relaxed.append(None)
        else:
            relaxed.append(st)
    conv = np.array([r["converged"] for r in runs])
    groups = np.array(["-".join(sorted(p.elements)) for p in cand])
    ret = sg_retention(starts, relaxed, SYMPREC, groups=groups, n_boot=cfg.n_boot, seed=cfg.seed)
    relaxed_conv = [x if c else None for x, c in zip(relaxed, conv, strict=True)]
    ret_conv = sg_retention(starts, relaxed_conv, SYMPREC, groups=groups, n_boot=cfg.n_boot, seed=cfg.seed)
    drift = ratio - 1.0
    scored = np.array([x is not None for x in relaxed])
    dd = np.where(scored, drift, np.nan)
    res = {
        "decoration": decoration, "max_steps": steps, "n": len(cand),
        "labels": [p.label for p in cand], "formulas": [p.formula for p in cand],
        "start_formulas": [a.get_chemical_formula("hill", empirical=True) for a in starts],
        "n_atoms": [len(a) for a in starts],
        "converged": conv, "steps": [r["steps"] for r in runs], "fmax": [r["fmax"] for r in runs],
        "smax_GPa": [r["smax_GPa"] for r in runs], "n_converged": int(conv.sum()),
        "n_failed_guard": len(failed_why), "failed": failed_why,
        "volume_ratio": ratio,
        "volume_drift": {"median": nanmedian(dd), "median_abs": nanmedian(np.abs(dd)),
                         "trimmed_abs": trimmed_mae(dd, V0_CUTOFF).to_dict(),
                         "frac_abs_above_0.1": float(np.nanmean(np.abs(dd[scored]) > 0.1)) if scored.any()
                         else None,
                         "ci_trimmed_abs": boot("trimmed_mae", np.abs(dd), groups, cfg.n_boot, cfg.seed,
                                                cutoff=V0_CUTOFF)},
        "retention": _retention_dict(ret), "retention_converged_only": _retention_dict(ret_conv),
        "wall_s": time.perf_counter() - t0,
    }
    ctx.log(f"  prototypes {spec}: {len(cand)} relaxed ({res['n_converged']} converged within {steps} steps), "
            f"retention {', '.join(fmt(x, '.2f') for x in ret.fraction)} at {SYMPREC} Å ({res['wall_s']:.0f} s)")
    return ModelRun(Status.OK, values=res)


def _retention_dict(r: Any) -> dict[str, Any]:
    """A RetentionCurve's dict with the space groups last, as arrays."""
    d = r.to_dict()
    d.pop("reference_sg", None)
    d.pop("relaxed_sg", None)
    d["reference_sg"] = np.asarray(r.reference_sg)
    d["relaxed_sg"] = np.asarray(r.relaxed_sg)
    return d
