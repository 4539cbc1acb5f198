r"""The offline mini-benchmark of issue 14 on real reference data shipped in installed packages.

docs/controls.md, "14. The offline mini-benchmark".  Six sections, each saying what it compares:

1. ``eos`` — equations of state of the dcdft set: model vs WIEN2k PBE (DFT), Δ, V0 and B0 errors, a
   bootstrap over elements; WIEN2k vs experiment on the same elements is the reference-vs-reference floor.
2. ``elastic`` — K and G of the cubic metals from the exact relaxed-ion tensor and the paper's finite-strain
   route (which must agree) vs experiment, stratified magnetic 3d vs the rest.
3. ``prototypes`` — space-group retention vs symprec (0.01, 0.05, 0.1 Å) and the volume drift when relaxing
   the all-metal AFLOW prototypes (model vs its starting structure).
4. ``rung0`` — Rung-0 and the floor statistics of raw MP vs experiment (no model); the fitted constants must
   track the published MP2020 corrections (a positive control with a known answer).
5. ``consensus`` — the consensus test with the shipped checkpoints as the panel against raw MP total energies
   (model vs model vs DFT), with labelled synthetic corruptions of the reference as the positive control.
6. ``hull`` — the hull's invariance to a self-consistent per-element shift on the MP raw compounds.

:func:`run_benchmark` runs them and returns (and writes, after every section and every model) one strict-JSON
dict; :func:`benchmark_html` renders it; :func:`headline_text` prints the headline.  Bridged (torch) models are
optional: without ``jaxcert_bridges`` they are recorded as unavailable with what to install, and the rest runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import pathlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxcert.controls._consensus import consensus_test
from jaxcert.controls._elastic import compare_moduli, elastic_tensor, finite_strain_elastic, vrh
from jaxcert.controls._eos import DELTA_VOLUME_FACTORS, birch_murnaghan_fit, delta_gauge, eos_scan
from jaxcert.controls._hull import e_above_hull, hull_invariance, stability_scores
from jaxcert.controls._reference import noise_floor, rung0_report
from jaxcert.controls._result import to_jsonable
from jaxcert.controls._robust import cluster_bootstrap, median_abs, sg_retention, system_split, trimmed_mae
from jaxcert.core.inputs import InputError

__all__ = [
    "SCHEMA", "SECTIONS", "COMPARISONS", "DEFAULT_MODELS", "DEFAULT_PANEL", "BenchmarkConfig", "run_benchmark",
    "benchmark_html", "headline_text",
]

SCHEMA = "jaxcert-controls-benchmark/1"
SECTIONS = ("eos", "elastic", "prototypes", "rung0", "consensus", "hull")
#: What each section compares against (stated in the JSON and the HTML).
COMPARISONS = {
    "eos": "against DFT: model vs WIEN2k all-electron PBE (the Delta set). The floor, WIEN2k vs experiment on the "
           "same elements with the same statistic, is DFT vs experiment; model vs experiment mixes both.",
    "elastic": "against experiment: model K and G (Voigt-Reuss-Hill) vs room-temperature polycrystalline values "
               "from pymatgen's periodic table. Exact vs finite-strain route: the model against itself.",
    "prototypes": "model vs its own starting structure (no reference energies): the AFLOW library's experimental "
                  "structure (bridged models, original elements) or a decorated, Vegard-scaled prototype "
                  "(analytic models). Space groups of both assigned alike at each symprec.",
    "rung0": "DFT vs experiment, no model: raw MP GGA/GGA+U formation energies vs experimental formation "
             "enthalpies. Known answer: MP2020's published corrections (fitted to these data).",
    "consensus": "model vs model vs DFT: a panel of shipped checkpoints against raw MP GGA(+U) total energies "
                 "per atom; labelled synthetic corruptions of the reference are the positive control.",
    "hull": "exact arithmetic on DFT data (raw MP formation energies of the 334 compounds); the stability "
            "scores compare the raw-DFT hull with the experimental one (DFT vs experiment).",
}
DEFAULT_MODELS = ("emt", "eam", "sw", "chgnet", "sevennet:7net-0")
DEFAULT_PANEL = ("chgnet", "sevennet:7net-0", "sevennet:7net-0_22may2024", "sevennet:7net-mf-0:PBE",
                 "sevennet:7net-mf-0:R2SCAN", "sevennet:7net-l3i5")
BRIDGED_HEADS = ("chgnet", "torch-sevennet", "sevennet")
INSTALL_BRIDGES = ("pip install torch==2.13.0 (the CPU build), then pip install -e 'bridges/[all]' "
                   "(jaxcert-bridges with chgnet and sevenn; README, 'Bridges')")
SYMPREC = (0.01, 0.05, 0.1)
#: Metals used to decorate the prototypes for analytic models, in order (species k of a prototype, ordered by
#: atomic number, gets the k-th metal the model supports).
DECORATION_METALS = ("Cu", "Ni", "Pd", "Ag", "Pt", "Au", "Al", "Rh", "Ir", "Pb")
#: Synthetic corruptions of the consensus reference (eV/atom) and the labelled fraction of structures.
CORRUPTIONS = (0.15, 0.5, 1.0)
CORRUPT_FRACTION = 0.2
#: Trims (a threshold-censored mean, as trimmed_mae): Δ in meV/atom, V0 and B0 as relative errors.
DELTA_CUTOFF_MEV = 1000.0
V0_CUTOFF = 0.25
B0_CUTOFF = 1.0
#: The relaxation guard of seed 001 Methods C: volume outside 0.3-6.0x the start, or a distance below 0.5 Å.
GUARD_VOLUME = (0.3, 6.0)
GUARD_DISTANCE = 0.5
#: Experimental moduli whose isotropic triple is inconsistent, 9KG/(3K+G)/E outside this range, are excluded.
MODULI_RATIO_RANGE = (0.8, 1.25)
#: Route agreement tolerance of the elastic section: |ΔK|, |ΔG| (Hill) within this (GPa) plus 3x the
#: finite-strain truncation estimate.
ROUTE_TOL_GPA = 1.0
QUICK_EOS = ("Cu", "Ag", "Al")
QUICK_ELASTIC = ("Cu", "Ag", "Ni")
QUICK_PROTOTYPES = 3
QUICK_MAX_STEPS = 60
#: Size buckets (atoms) of the padded prototype batches: one compiled relaxation per bucket.
PROTOTYPE_BUCKETS = (4, 8, 16, 32, 100_000)


# ------------------------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """What :func:`run_benchmark` runs (validated on construction; bad values raise ``ValueError`` naming the field).

    Attributes:
      models: model specs for sections 1–3: analytic names (``jaxcert.models.available()``) or bridged specs
        (``chgnet``, ``chgnet:0.3.0``, ``sevennet:7net-0``, ``sevennet:7net-mf-0:PBE``, options after ``@``).
      panel: bridged (or analytic) specs of the consensus panel (section 5); every one that loads is used and
        ``min_models`` is the number that loaded.
      sections: the sections to run, a subset of :data:`SECTIONS`.
      quick: a small run (three elements, three metals, three prototypes, 200 resamples) for tests.
      seed: seed of every bootstrap, split and synthetic corruption.
      n_boot: bootstrap resamples (the paper's 2000).
      bridge_precision: torch precision of bridged models without an ``@`` option ("float32", their training
        precision and about twice as fast on CPU, or "float64").
      max_steps: FIRE step cap of analytic-model prototype relaxations (the paper's 500).
      prototype_max_atoms: analytic models relax the prototypes with at most this many atoms (budget: 51 of the
        83 at 8; the dense periodic images make larger padded batches costly).
      bridged_prototypes: prototypes relaxed per bridged model (the smallest cells first; budget).
      bridged_max_steps: FIRE step cap of bridged-model prototype relaxations (budget; recorded).
      fmax: force threshold of the relaxations, eV/Å (the paper's 0.02).
    """

    models: tuple[str, ...] = DEFAULT_MODELS
    panel: tuple[str, ...] = DEFAULT_PANEL
    sections: tuple[str, ...] = SECTIONS
    quick: bool = False
    seed: int = 0
    n_boot: int = 2000
    bridge_precision: str = "float32"
    max_steps: int = 500
    prototype_max_atoms: int = 8
    bridged_prototypes: int = 12
    bridged_max_steps: int = 100
    fmax: float = 0.02

    def __post_init__(self) -> None:
        for name in ("models", "panel", "sections"):
            v = getattr(self, name)
            if isinstance(v, str):
                v = tuple(x.strip() for x in v.split(",") if x.strip())
            object.__setattr__(self, name, tuple(v))
        for name in ("models", "panel"):
            for spec in getattr(self, name):
                _check_spec(spec, name)
        if not self.sections:
            raise InputError(f"sections: expected one or more of {', '.join(SECTIONS)}, got none")
        for s in self.sections:
            if s not in SECTIONS:
                raise InputError(f"sections: unknown section {s!r}; known: {', '.join(SECTIONS)}")
        if "consensus" in self.sections and not self.panel:
            raise InputError("panel: the consensus section needs at least one panel model")
        if self.bridge_precision not in ("float32", "float64"):
            raise InputError(f"bridge_precision: expected 'float32' or 'float64', got {self.bridge_precision!r}")
        for name, lo in (("seed", 0), ("n_boot", 100), ("max_steps", 1), ("prototype_max_atoms", 1),
                         ("bridged_prototypes", 0),
                         ("bridged_max_steps", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise InputError(f"{name}: expected an integer >= {lo}, got {v!r}")
        if not (isinstance(self.fmax, (int, float)) and math.isfinite(self.fmax) and self.fmax > 0):
            raise InputError(f"fmax: expected a positive force threshold in eV/Å, got {self.fmax!r}")

    def key(self) -> dict[str, Any]:
        """The fields a resumed run must share with the file it resumes (everything but ``sections``)."""
        d = dataclasses.asdict(self)
        d.pop("sections")
        return to_jsonable(d)


def _head(spec: str) -> str:
    return spec.split("@", 1)[0].split(":", 1)[0]


def _check_spec(spec: Any, field: str) -> None:
    from jaxcert import models as zoo

    if not isinstance(spec, str) or not spec:
        raise InputError(f"{field}: expected model names, got {spec!r}")
    if _head(spec) in BRIDGED_HEADS or spec in zoo.available():
        return
    raise InputError(f"{field}: unknown model {spec!r}; analytic: {', '.join(zoo.available())}; bridged: "
                     "chgnet[:version], sevennet[:name[:modal]] (options after @, e.g. chgnet@float64)")


# ------------------------------------------------------------------------------------------- models
def _normalised(spec: str, precision: str) -> str:
    if _head(spec) in BRIDGED_HEADS and "@" not in spec:
        return f"{spec}@{precision}"
    return spec


class _Models:
    """Loads each spec once (across sections) and records how it went."""

    def __init__(self, precision: str, log: Callable[[str], None]):
        self.precision, self.log = precision, log
        self.cache: dict[str, Any] = {}
        self.info: dict[str, dict[str, Any]] = {}

    def get(self, spec: str) -> tuple[Any, dict[str, Any]]:
        key = _normalised(spec, self.precision)
        if key not in self.cache:
            self.cache[key], self.info[key] = self._load(key)
            i = self.info[key]
            self.log(f"model {key}: {i['status']}" + (f" ({i['reason']})" if i.get("reason") else
                                                       f" ({i.get('load_s', 0):.1f} s)"))
        return self.cache[key], self.info[key]

    @staticmethod
    def _load(spec: str) -> tuple[Any, dict[str, Any]]:
        t0 = time.perf_counter()
        if _head(spec) in BRIDGED_HEADS:
            try:
                bridges = importlib.import_module("jaxcert_bridges")
            except ImportError as err:
                return None, {"status": "unavailable", "kind": "bridged",
                              "reason": f"{err}; install: {INSTALL_BRIDGES}"}
            try:
                model = bridges.load(spec)
            except Exception as err:  # noqa: BLE001 - a missing checkpoint or torch: recorded, the run goes on
                return None, {"status": "unavailable", "kind": "bridged", "reason": f"{type(err).__name__}: {err}"}
            return model, {"status": "ok", "kind": "bridged", "name": model.name, "load_s": time.perf_counter() - t0,
                           "info": dict(model.info)}
        from jaxcert import models as zoo

        model = zoo.get(spec)
        return model, {"status": "ok", "kind": "analytic", "name": model.name, "load_s": time.perf_counter() - t0,
                       "info": dict(model.info)}


def _bridged(model: Any) -> bool:
    return hasattr(model.energy_fn, "backend")


def _supports(model: Any, symbols: Sequence[str]) -> bool:
    from ase.data import atomic_numbers

    return model.elements is None or all(atomic_numbers[s] in model.elements for s in symbols)


def _host_energies(model: Any, atoms_list: Sequence[Any]) -> np.ndarray:
    """Total energies (eV) of ``atoms_list`` with a bridged model, batched into the backend's torch calls.

    If the batch fails (a structure the model refuses), every structure is retried alone and the ones that fail
    get NaN.
    """
    from jaxcert_bridges.backend import System

    backend = model.energy_fn.backend
    systems = [System(np.asarray(a.positions, np.float64), np.asarray(a.cell, np.float64),
                      np.asarray(a.numbers, int), (True, True, True)) for a in atoms_list]
    if not systems:
        return np.zeros(0)
    try:
        return np.asarray(backend.energies(systems, np.float64), np.float64)
    except Exception:  # noqa: BLE001 - retried one by one below
        out = np.full(len(systems), np.nan)
        for i, s in enumerate(systems):
            try:
                out[i] = float(np.asarray(backend.energies([s], np.float64))[0])
            except Exception:  # noqa: BLE001 - this structure is refused: NaN
                pass
        return out


def _vmapped_energy_impl(model: Any, batch: Any) -> Any:
    import jax

    return jax.vmap(lambda s: model.energy_of(model.params, s))(batch)


_vmapped_energy: Any = None


def _jax_energies(model: Any, atoms_list: Sequence[Any]) -> np.ndarray:
    """Total energies (eV) with an analytic model: one vmapped, jitted call per atom count (images: the maximum)."""
    global _vmapped_energy
    import jax

    from jaxcert.core.structure import Structure, stack

    if _vmapped_energy is None:
        _vmapped_energy = jax.jit(_vmapped_energy_impl)
    out = np.full(len(atoms_list), np.nan)
    sizes = np.array([len(a) for a in atoms_list])
    for n in np.unique(sizes):
        idx = np.flatnonzero(sizes == n)
        batch = stack([model.prepare(Structure.from_ase(atoms_list[i], min_distance=None)) for i in idx])
        out[idx] = np.asarray(_vmapped_energy(model, batch), np.float64)
    return out


def _energies(model: Any, atoms_list: Sequence[Any]) -> np.ndarray:
    return _host_energies(model, atoms_list) if _bridged(model) else _jax_energies(model, atoms_list)


def _scaled(atoms: Any, factor: float) -> Any:
    a = atoms.copy()
    a.set_cell(np.asarray(a.cell) * factor ** (1.0 / 3.0), scale_atoms=True)
    return a


# --------------------------------------------------------------------------------------- statistics
def _boot(stat: str, x: np.ndarray, groups: np.ndarray, cfg: BenchmarkConfig, *, cutoff: float | None = None,
          paired: np.ndarray | None = None) -> dict[str, Any]:
    ok = np.isfinite(x) if paired is None else np.isfinite(x) & np.isfinite(paired)
    if ok.sum() < 2:
        return {"estimate": None, "lo": None, "hi": None, "n": int(ok.sum())}
    r = cluster_bootstrap(stat, x[ok], groups[ok], n_boot=cfg.n_boot, seed=cfg.seed, cutoff=cutoff,
                          paired=None if paired is None else paired[ok])
    d = r.to_dict()
    d.pop("replicates", None)
    d["n"] = int(ok.sum())
    return d


def _error_block(err: np.ndarray, groups: np.ndarray, cutoff: float, cfg: BenchmarkConfig) -> dict[str, Any]:
    """Median |e|, trimmed MAE (threshold-censored at ``cutoff``) and its bootstrap over ``groups``."""
    tm = trimmed_mae(err, cutoff)
    return {"median_abs": tm.median_abs, "trimmed": tm.to_dict(),
            "ci": _boot("trimmed_mae", np.abs(err), groups, cfg, cutoff=cutoff)}


def _finite_or_nan(x: Any) -> np.ndarray:
    a = np.asarray(x, np.float64)
    return np.where(np.isfinite(a), a, np.nan)


def _delta(v0a, b0a, b1a, v0b, b0b, b1b) -> np.ndarray:
    """Δ (meV/atom) elementwise, NaN where either curve is unusable (instead of raising)."""
    a = [np.asarray(v, np.float64) for v in (v0a, b0a, b1a, v0b, b0b, b1b)]
    ok = np.isfinite(np.stack(a)).all(0) & (a[0] > 0) & (a[1] > 0) & (a[3] > 0) & (a[4] > 0)
    out = np.full(a[0].shape, np.nan)
    if ok.any():
        out[ok] = delta_gauge(*(v[ok] for v in a))
    return out


# ------------------------------------------------------------------------------------------ section 1
def _section_eos(ctx: _Context) -> dict[str, Any]:
    from jaxcert import datasets

    cfg = ctx.cfg
    dc = datasets.get("dcdft")
    symbols = list(QUICK_EOS) if cfg.quick else list(dc.symbols)
    idx = np.array([dc.symbols.index(s) for s in symbols])
    sym = np.array(symbols)
    v0, b0, b1 = dc.v0[idx], dc.b0[idx], dc.b1[idx]
    ev0, eb0, eb1 = dc.exp_v0[idx], dc.exp_b0[idx], dc.exp_b1[idx]
    has_exp = np.isfinite(ev0) & np.isfinite(eb0) & np.isfinite(eb1)
    d_floor = _delta(v0, b0, b1, ev0, eb0, eb1)
    floor = {
        "what": "WIEN2k PBE vs experiment (DFT vs experiment), same statistic as the models",
        "symbols": sym[has_exp],
        "delta_meV": d_floor[has_exp],
        "delta_mean_meV": float(np.nanmean(d_floor[has_exp])) if has_exp.any() else None,
        "delta": _error_block(d_floor[has_exp], sym[has_exp], DELTA_CUTOFF_MEV, cfg),
        "v0_rel": _error_block(((v0 - ev0) / ev0)[has_exp], sym[has_exp], V0_CUTOFF, cfg),
        "b0_rel": _error_block(((b0 - eb0) / eb0)[has_exp], sym[has_exp], B0_CUTOFF, cfg),
    }
    out = ctx.section_start("eos", {
        "protocol": "7 volumes 94..106 % of the WIEN2k V0 (the Delta protocol), cell scaled at fixed fractional "
                    "coordinates, third-order Birch-Murnaghan fit; Delta symmetric (centre = mean V0), mean over "
                    "elements = the Delta gauge; bootstrap resamples elements",
        "trims": {"delta_meV": DELTA_CUTOFF_MEV, "v0_rel": V0_CUTOFF, "b0_rel": B0_CUTOFF},
        "n_elements": len(symbols), "floor": floor})
    for spec in cfg.models:
        if ctx.done("eos", spec):
            continue
        model, info = ctx.models.get(spec)
        if model is None:
            ctx.store("eos", spec, {"status": "unavailable", "reason": info["reason"]})
            continue
        t0 = time.perf_counter()
        keep = np.array([_supports(model, [s]) for s in symbols])
        if not keep.any():
            ctx.store("eos", spec, {"status": "skipped", "reason": "the model supports none of the dcdft elements"})
            continue
        ii = idx[keep]
        f = np.asarray(DELTA_VOLUME_FACTORS, np.float64)
        vols = f[None, :] * dc.v0[ii][:, None]
        if _bridged(model):
            geoms = [_scaled(dc.at_v0(dc.symbols[i]), k) for i in ii for k in f]
            n_at = np.repeat([len(dc.atoms[i]) for i in ii], len(f))
            E = (_host_energies(model, geoms) / n_at).reshape(len(ii), len(f))
            route = "host batch: every element's 7 volumes in the backend's batched torch calls"
        else:
            E = np.full((len(ii), len(f)), np.nan)
            for r, i in enumerate(ii):
                try:
                    E[r] = eos_scan(model, dc.atoms[i], f, v0=float(dc.v0[i])).energies
                except Exception as err:  # noqa: BLE001 - recorded as NaN for this element
                    ctx.log(f"  eos {spec} {dc.symbols[i]}: {type(err).__name__}: {err}")
            route = "jaxcert.controls.eos_scan (one vmapped jitted call per element)"
        fit = birch_murnaghan_fit(vols, E)
        mv0, mb0, mb1 = _finite_or_nan(fit.v0), _finite_or_nan(fit.b0), _finite_or_nan(fit.b1)
        d = _delta(mv0, mb0, mb1, v0[keep], b0[keep], b1[keep])
        v_rel, b_rel = (mv0 - v0[keep]) / v0[keep], (mb0 - b0[keep]) / b0[keep]
        s_k = sym[keep]
        he = has_exp[keep]
        d_exp = _delta(mv0, mb0, mb1, ev0[keep], eb0[keep], eb1[keep])
        fl = d_floor[keep]
        res = {
            "status": "ok", "route": route, "n_elements": int(keep.sum()),
            "unsupported": sym[~keep], "n_failed_fit": int(np.sum(~np.isfinite(d))),
            "delta_mean_meV": float(np.nanmean(d)) if np.isfinite(d).any() else None,
            "delta": _error_block(d, s_k, DELTA_CUTOFF_MEV, cfg),
            "v0_rel": _error_block(v_rel, s_k, V0_CUTOFF, cfg),
            "b0_rel": _error_block(b_rel, s_k, B0_CUTOFF, cfg),
            "on_floor_elements": {
                "what": "on the elements with experimental data: model vs WIEN2k (DFT), the floor (WIEN2k vs "
                        "experiment) and model vs experiment; minus_floor = mean Delta(model, WIEN2k) - mean "
                        "Delta(WIEN2k, experiment), paired bootstrap over elements (negative: the model is closer "
                        "to PBE than PBE is to experiment)",
                "n": int(np.sum(he & np.isfinite(d))),
                "delta_model_vs_dft_mean_meV": _nanmean(d[he]),
                "delta_floor_mean_meV": _nanmean(fl[he]),
                "delta_model_vs_experiment_mean_meV": _nanmean(d_exp[he]),
                "minus_floor": _boot("mean", d[he], s_k[he], cfg, paired=fl[he]),
            },
            "per_element": {"symbols": s_k, "v0": mv0, "b0": mb0, "b1": mb1, "e0": _finite_or_nan(fit.e0),
                            "delta_meV": d, "delta_vs_experiment_meV": d_exp, "v0_rel": v_rel, "b0_rel": b_rel,
                            "residual_rms": _finite_or_nan(fit.residual_rms), "in_range": np.asarray(fit.in_range),
                            "e_at_wien2k_v0": E[:, int(np.argmin(np.abs(f - 1.0)))]},
            "wall_s": time.perf_counter() - t0,
        }
        ctx.store("eos", spec, res)
        ctx.log(f"  eos {spec}: {res['n_elements']} elements, mean Delta {_fmt(res['delta_mean_meV'])} meV/atom "
                f"({res['wall_s']:.0f} s)")
    return out


def _nanmean(x: np.ndarray) -> float | None:
    x = np.asarray(x, np.float64)
    return float(np.nanmean(x)) if np.isfinite(x).any() else None


def _fmt(x: Any, spec: str = ".3g") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


# ------------------------------------------------------------------------------------------ section 2
_LATTICE_SG = {"fcc": 225, "bcc": 229}


def _spacegroup(atoms: Any, symprec: float = 1e-3) -> int:
    import spglib

    ds = spglib.get_symmetry_dataset((np.asarray(atoms.cell), atoms.get_scaled_positions(), atoms.numbers),
                                     symprec=symprec)
    return 0 if ds is None else int(ds.number if hasattr(ds, "number") else ds["number"])


def _primitive(symbol: str, lattice: str, v0: float) -> Any:
    from ase.build import bulk

    a = (4.0 * v0) ** (1 / 3) if lattice == "fcc" else (2.0 * v0) ** (1 / 3)
    return bulk(symbol, lattice, a=a)


def _common_images(model: Any, atoms_list: Sequence[Any], squeeze: float = 0.95) -> tuple[int, int, int] | None:
    """One static image count for every structure (its cell squeezed by ``squeeze``): one compiled program."""
    from jaxcert.core.neighbors import image_counts

    cuts = [model.cutoff_for(_structure(a)) for a in atoms_list]
    if any(c is None for c in cuts):
        return None
    rc = max(cuts)
    cells = np.stack([np.asarray(a.cell) * squeeze for a in atoms_list])
    return image_counts(cells, (True, True, True), float(rc))


def _structure(atoms: Any) -> Any:
    from jaxcert.core.structure import Structure

    return Structure.from_ase(atoms, min_distance=None)


def _section_elastic(ctx: _Context) -> dict[str, Any]:
    from ase.data import atomic_numbers, reference_states

    from jaxcert import datasets

    cfg = ctx.cfg
    mo = datasets.get("experimental-moduli")
    ratio = mo.isotropic_young_ratio()
    cubic = mo.cubic()
    rows = [i for i in range(len(mo.symbols)) if cubic[i] and (np.isfinite(mo.K[i]) or np.isfinite(mo.G[i]))]
    if cfg.quick:
        rows = [i for i in rows if mo.symbols[i] in QUICK_ELASTIC]
    lo, hi = MODULI_RATIO_RANGE
    flagged = {mo.symbols[i]: float(ratio[i]) for i in rows if np.isfinite(ratio[i]) and not lo <= ratio[i] <= hi}
    rows = [i for i in rows if mo.symbols[i] not in flagged]
    metals = [mo.symbols[i] for i in rows]
    lattice = {mo.symbols[i]: mo.reference_symmetry[i] for i in rows}
    K_exp = np.array([mo.K[i] for i in rows])
    G_exp = np.array([mo.G[i] for i in rows])
    strata = np.array(["magnetic 3d" if mo.magnetic_3d[i] else "other" for i in rows])
    out = ctx.section_start("elastic", {
        "protocol": "each metal's primitive 1-atom fcc/bcc cell at the model's EOS V0 (section eos where the dcdft "
                    "structure is that lattice, else a 7-point EOS of the primitive cell around ASE's reference "
                    "volume); exact: jaxcert.controls.elastic_tensor(relaxed_ions=True); finite strain: "
                    "finite_strain_elastic (normal +-0.5, 1 %, shear +-1, 2 %, ions relaxed with FIRE, fmax 0.02, "
                    "<= 200 steps); K, G = Hill averages; compare_moduli in log space (r, slope, median bias). A "
                    "Bravais lattice has no internal coordinates, so relaxed = clamped here (n_internal = 0).",
        "metals": metals, "lattice": lattice, "K_exp": K_exp, "G_exp": G_exp, "strata": strata,
        "excluded_inconsistent_experiment": {"ratio_range": MODULI_RATIO_RANGE, "ratio": flagged,
                                             "note": "9KG/(3K+G)/E outside the range: the tabulated triple is "
                                                     "not isotropic-consistent (docs/datasets.md)"},
        "route_tolerance_GPa": ROUTE_TOL_GPA})
    dc = datasets.get("dcdft")
    for spec in cfg.models:
        if ctx.done("elastic", spec):
            continue
        model, info = ctx.models.get(spec)
        if model is None:
            ctx.store("elastic", spec, {"status": "unavailable", "reason": info["reason"]})
            continue
        keep = np.array([_supports(model, [m]) for m in metals])
        if not keep.any():
            ctx.store("elastic", spec, {"status": "skipped", "reason": "the model supports none of the cubic metals"})
            continue
        t0 = time.perf_counter()
        mk = [m for m, k in zip(metals, keep, strict=True) if k]
        v0 = np.full(len(mk), np.nan)
        source = np.array(["own EOS"] * len(mk), dtype=object)
        b0_eos = np.full(len(mk), np.nan)
        eos_done = ctx.result["sections"].get("eos", {}).get("models", {}).get(
            _normalised(spec, cfg.bridge_precision), {})
        pe = eos_done.get("per_element") if eos_done.get("status") == "ok" else None
        for j, m in enumerate(mk):
            if pe is not None and m in list(pe["symbols"]):
                k = list(pe["symbols"]).index(m)
                if _spacegroup(dc.atoms[dc.symbols.index(m)]) == _LATTICE_SG[lattice[m]] and pe["v0"][k] is not None:
                    v0[j], b0_eos[j], source[j] = pe["v0"][k], pe["b0"][k], "section eos"
        need = [j for j in range(len(mk)) if not np.isfinite(v0[j])]
        if need:
            f = np.asarray(DELTA_VOLUME_FACTORS, np.float64)
            base = []
            for j in need:
                rs = reference_states[atomic_numbers[mk[j]]]
                base.append(_primitive(mk[j], lattice[mk[j]], _ref_volume(rs, lattice[mk[j]])))
            geoms = [_scaled(a, k) for a in base for k in f]
            E = _energies(model, geoms).reshape(len(need), len(f))
            vols = np.array([a.get_volume() for a in base])[:, None] * f[None, :]
            fit = birch_murnaghan_fit(vols, E)
            v0[need], b0_eos[need] = _finite_or_nan(fit.v0), _finite_or_nan(fit.b0)
        cells = [_primitive(m, lattice[m], v) if np.isfinite(v) else None for m, v in zip(mk, v0, strict=True)]
        ok_cells = [c for c in cells if c is not None]
        if ok_cells and callable(model.cutoff):
            # a composition-dependent cutoff sizes the images only (the energy applies its own pair cutoffs):
            # one constant, the largest, keeps every metal on one compiled program
            model = model.replace(cutoff=max(float(model.cutoff_for(_structure(c))) for c in ok_cells))
        images = _common_images(model, ok_cells) if ok_cells else None
        n = len(mk)
        Ce, Cf, Cx = (np.full((n, 6, 6), np.nan) for _ in range(3))
        T = np.full((n, 6, 6), np.nan)
        stress0, n_internal, fs_conv = np.full(n, np.nan), np.zeros(n, int), np.zeros(n, bool)
        errors: dict[str, str] = {}
        for j, c in enumerate(cells):
            if c is None:
                errors[mk[j]] = "no EOS minimum"
                continue
            s = _structure(c)
            if images is not None:
                s = s.replace(images=images, image_cutoff=float(model.cutoff_for(s)))
            try:
                et = elastic_tensor(model, s, relaxed_ions=True)
                Ce[j], stress0[j], n_internal[j] = et.C, float(np.max(np.abs(et.stress))), et.n_internal
                fs = finite_strain_elastic(model, s, relax_ions=True, fmax=cfg.fmax)
                Cf[j], Cx[j], T[j], fs_conv[j] = fs.C, fs.C_extrapolated, fs.truncation_error, fs.all_converged
            except Exception as err:  # noqa: BLE001 - recorded per metal
                errors[mk[j]] = f"{type(err).__name__}: {err}"
        ve, vf = vrh(Ce), vrh(Cf)
        Ke, Ge, Kf, Gf = (np.asarray(x, np.float64) for x in (ve.K_hill, ve.G_hill, vf.K_hill, vf.G_hill))
        with np.errstate(invalid="ignore"):
            dC = _rowmax(np.abs(Ce - Cf))
            dCx = _rowmax(np.abs(Ce - Cx))
            trunc = _rowmax(np.abs(T))
            tol = ROUTE_TOL_GPA + 3.0 * np.abs(np.nan_to_num(T, nan=0.0))
            dK, dG = np.abs(Ke - Kf), np.abs(Ge - Gf)
            valid = np.isfinite(dC) & np.isfinite(dK) & np.isfinite(dG)
            agree = np.all(np.abs(Ce - Cf) <= tol, axis=(1, 2)) & valid
        ke, ge, st = K_exp[keep], G_exp[keep], strata[keep]

        def cmp(pred: np.ndarray, ref: np.ndarray, labels: np.ndarray = st) -> dict[str, Any]:
            return compare_moduli(pred, ref, strata=labels).to_dict()

        res = {
            "status": "ok", "metals": mk, "v0_source": source, "v0": v0, "b0_eos": b0_eos,
            "C_exact": Ce, "C_finite_strain": Cf, "C_finite_strain_extrapolated": Cx,
            "K_exact": Ke, "G_exact": Ge, "K_finite_strain": Kf, "G_finite_strain": Gf,
            "K_exp": ke, "G_exp": ge, "strata": st,
            "routes": {"max_abs_dC_GPa": _nanmax(dC), "max_abs_dK_GPa": _nanmax(dK), "max_abs_dG_GPa": _nanmax(dG),
                       "max_abs_dC_extrapolated_GPa": _nanmax(dCx), "max_truncation_estimate_GPa": _nanmax(trunc),
                       "per_metal_max_abs_dC_GPa": dC, "per_metal_max_abs_dC_extrapolated_GPa": dCx,
                       "per_metal_truncation_estimate_GPa": trunc,
                       "agree": agree, "n_agree": int(np.sum(agree)), "n": int(np.sum(valid)),
                       "finite_strain_converged": fs_conv,
                       "note": "dC = C_exact - C_finite_strain per component; agree: every |dC_ij| within "
                               "route_tolerance_GPa + 3 |truncation estimate_ij| (the O(a^2) term estimated from "
                               "the two amplitudes); dC_extrapolated uses the finite-strain tensor with that term "
                               "removed. A large truncation estimate means the energy is not quadratic on the "
                               "0.5-2 % strain scale: the finite differences then measure a secant, not C"},
            "K_hill_exact_minus_eos_B0_GPa": Ke - b0_eos,
            "max_abs_reference_stress_GPa": _nanmax(stress0), "n_internal": n_internal,
            "compare_exact": {"K": cmp(Ke, ke), "G": cmp(Ge, ge)},
            "compare_finite_strain": {"K": cmp(Kf, ke), "G": cmp(Gf, ge)},
            "errors": errors, "wall_s": time.perf_counter() - t0,
        }
        ctx.store("elastic", spec, res)
        kc, gc = res["compare_exact"]["K"], res["compare_exact"]["G"]
        ctx.log(f"  elastic {spec}: {len(mk)} metals, K log-r {_fmt(kc['r'])} bias {_fmt(kc['bias'])}, G log-r "
                f"{_fmt(gc['r'])} bias {_fmt(gc['bias'])}; routes max |dC| {_fmt(res['routes']['max_abs_dC_GPa'])} "
                f"GPa ({res['wall_s']:.0f} s)")
    return out


def _rowmax(x: np.ndarray) -> np.ndarray:
    """Max over the (6, 6) block of each metal, NaN where the block is all NaN."""
    flat = x.reshape(len(x), -1)
    ok = np.isfinite(flat).any(1)
    out = np.full(len(x), np.nan)
    out[ok] = np.nanmax(flat[ok], axis=1)
    return out


def _nanmax(x: np.ndarray) -> float | None:
    x = np.asarray(x, np.float64)
    return float(np.nanmax(x)) if np.isfinite(x).any() else None


def _ref_volume(rs: dict | None, lattice: str) -> float:
    """Volume per atom (Å³) of ASE's reference state for a cubic lattice."""
    a = float(rs["a"])
    return a**3 / (4.0 if lattice == "fcc" else 2.0)


# ------------------------------------------------------------------------------------------ section 3
def _relax_impl(model: Any, batch: Any, fmax: Any, max_steps: Any) -> Any:
    from jaxcert.optim.relax import relax_batch

    return relax_batch(model, batch, optimizer="cell", fmax=fmax, max_steps=max_steps)


_relax_program: Any = None


def _relax_all(model: Any, atoms_list: Sequence[Any], fmax: float, max_steps: int) -> list[dict[str, Any]]:
    """relax_cell (FIRE on the FrechetCellFilter coordinates) vmapped over size buckets of padded structures."""
    global _relax_program
    import jax
    import jax.numpy as jnp

    from jaxcert.core.neighbors import with_images
    from jaxcert.core.structure import stack, unstack

    if _relax_program is None:
        _relax_program = jax.jit(_relax_impl)
    sizes = np.array([len(a) for a in atoms_list])
    out: list[dict[str, Any]] = [{} for _ in atoms_list]
    lo = 0
    for hi in PROTOTYPE_BUCKETS:
        idx = np.flatnonzero((sizes > lo) & (sizes <= hi))
        lo = hi
        if idx.size == 0:
            continue
        ss = []
        for i in idx:
            s = _structure(atoms_list[i])
            rc = model.cutoff_for(s)
            ss.append(with_images(s, rc, margin=0.1) if rc is not None else s)
        batch = stack(ss)
        r = _relax_program(model, batch, jnp.asarray(fmax), jnp.asarray(int(max_steps)))
        r = jax.device_get(r)
        for k, (i, st) in enumerate(zip(idx, unstack(r.structure), strict=True)):
            out[i] = {"structure": st, "converged": bool(r.converged[k]), "steps": int(r.steps[k]),
                      "fmax": float(r.fmax[k]), "smax_GPa": float(r.smax[k]) * 160.21766208}
    return out


def _decorate(p: Any, metals: Sequence[str]) -> Any:
    """The prototype with species k (by Z) replaced by ``metals[k]``, scaled to the Vegard volume of the metals."""
    from ase.build import bulk
    from ase.data import atomic_numbers

    a = p.atoms.copy()
    mapping = {atomic_numbers[e]: atomic_numbers[metals[k]] for k, e in enumerate(p.elements)}
    a.numbers = np.array([mapping[z] for z in a.numbers])
    vref = {z: bulk(m).get_volume() / len(bulk(m)) for z, m in ((atomic_numbers[m], m) for m in set(metals))}
    target = float(np.mean([vref[z] for z in a.numbers]))
    return _scaled(a, target * len(a) / a.get_volume())


def _min_distance(atoms: Any) -> float:
    from jaxcert.core.structure import _min_distance as md

    if len(atoms) < 2:
        d = np.linalg.norm(np.asarray(atoms.cell), axis=1)
        return float(d.min())
    return md(np.asarray(atoms.positions), np.asarray(atoms.cell), (True, True, True))[0]


def _section_prototypes(ctx: _Context) -> dict[str, Any]:
    from jaxcert import datasets

    cfg = ctx.cfg
    protos = list(datasets.get("aflow-prototypes").all_metal())
    if cfg.quick:
        protos = [p for p in protos if len(p.atoms) <= 4][:QUICK_PROTOTYPES]
    out = ctx.section_start("prototypes", {
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
        "symprec": SYMPREC, "n_prototypes": len(protos)})
    for spec in cfg.models:
        if ctx.done("prototypes", spec):
            continue
        model, info = ctx.models.get(spec)
        if model is None:
            ctx.store("prototypes", spec, {"status": "unavailable", "reason": info["reason"]})
            continue
        t0 = time.perf_counter()
        if _bridged(model):
            cand = sorted((p for p in protos if _supports(model, p.elements)), key=lambda p: (len(p.atoms), p.label))
            cand = cand[:cfg.bridged_prototypes]
            starts = [p.atoms.copy() for p in cand]
            decoration = "original elements"
            steps = min(cfg.bridged_max_steps, QUICK_MAX_STEPS) if cfg.quick else cfg.bridged_max_steps
        else:
            metals = [m for m in DECORATION_METALS if _supports(model, [m])]
            cand = [p for p in protos if len(p.elements) <= len(metals) and len(p.atoms) <= cfg.prototype_max_atoms]
            starts = [_decorate(p, metals) for p in cand]
            decoration = f"decorated with {', '.join(metals[:max((len(p.elements) for p in cand), default=0)])}"
            steps = min(cfg.max_steps, QUICK_MAX_STEPS) if cfg.quick else cfg.max_steps
        if not cand:
            ctx.store("prototypes", spec, {"status": "skipped", "reason": "no prototype the model supports"})
            continue
        runs = _relax_all(model, starts, cfg.fmax, steps)
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
            elif _min_distance(st.to_ase()) < GUARD_DISTANCE:
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
            "status": "ok", "decoration": decoration, "max_steps": steps, "n": len(cand),
            "labels": [p.label for p in cand], "formulas": [p.formula for p in cand],
            "start_formulas": [a.get_chemical_formula("hill", empirical=True) for a in starts],
            "n_atoms": [len(a) for a in starts],
            "converged": conv, "steps": [r["steps"] for r in runs], "fmax": [r["fmax"] for r in runs],
            "smax_GPa": [r["smax_GPa"] for r in runs], "n_converged": int(conv.sum()),
            "n_failed_guard": len(failed_why), "failed": failed_why,
            "volume_ratio": ratio,
            "volume_drift": {"median": _nanmedian(dd), "median_abs": _nanmedian(np.abs(dd)),
                             "trimmed_abs": trimmed_mae(dd, V0_CUTOFF).to_dict(),
                             "frac_abs_above_0.1": float(np.nanmean(np.abs(dd[scored]) > 0.1)) if scored.any()
                             else None,
                             "ci_trimmed_abs": _boot("trimmed_mae", np.abs(dd), groups, cfg, cutoff=V0_CUTOFF)},
            "retention": _retention_dict(ret), "retention_converged_only": _retention_dict(ret_conv),
            "wall_s": time.perf_counter() - t0,
        }
        ctx.store("prototypes", spec, res)
        ctx.log(f"  prototypes {spec}: {len(cand)} relaxed ({res['n_converged']} converged within {steps} steps), "
                f"retention {', '.join(_fmt(x, '.2f') for x in ret.fraction)} at {SYMPREC} Å ({res['wall_s']:.0f} s)")
    return out


def _nanmedian(x: np.ndarray) -> float | None:
    x = np.asarray(x, np.float64)
    return float(np.nanmedian(x)) if np.isfinite(x).any() else None


def _retention_dict(r: Any) -> dict[str, Any]:
    d = r.to_dict()
    d.pop("reference_sg", None)
    d.pop("relaxed_sg", None)
    d["reference_sg"] = np.asarray(r.reference_sg)
    d["relaxed_sg"] = np.asarray(r.relaxed_sg)
    return d


# ------------------------------------------------------------------------------------------ section 4
def _mp2020_expected(mp: Any, corr: Any) -> tuple[np.ndarray, dict[str, float]]:
    """−(published MP2020 constant) per element column: the sign a fit of raw − experiment should find.

    MP2020 adds its correction to the raw energy to reach experiment, so raw − experiment ≈ −correction · x.
    Anions: the composition corrections (O: the "oxide" value); the U metals: the GGA/GGA+U mixing values
    (which MP applies only to GGA+U oxides and fluorides, so a single per-element constant mixes them with the
    element's GGA compounds).
    """
    pub = dict(corr.anion_constants("oxide"))
    for m, v in corr.u_mixing.get("O", {}).items():
        pub.setdefault(m, v)
    return np.array([-pub.get(e, np.nan) for e in mp.elements]), pub


def _rung0_dict(r: Any, columns: Sequence[str], expected: np.ndarray) -> dict[str, Any]:
    d = r.to_dict()
    fit = d.pop("fit")
    d["constants"] = dict(zip(columns, fit["constants"], strict=True))
    d["support"] = dict(zip(columns, fit["support"], strict=True)) if fit.get("support") is not None else None
    d["fit"] = {k: v for k, v in fit.items() if k not in ("constants", "support")}
    d["expected_minus_mp2020"] = dict(zip(columns, expected, strict=True))
    return d


def _section_rung0(ctx: _Context) -> dict[str, Any]:
    from jaxcert import datasets

    cfg = ctx.cfg
    t0 = time.perf_counter()
    mp, corr = datasets.get("mp-raw-vs-exp"), datasets.get("mp2020-corrections")
    err = np.asarray(mp.e_form_raw - mp.e_form_exp)
    groups = np.asarray(mp.chemsys)
    held = system_split(groups, 0.3)
    train = ~held
    expected, pub = _mp2020_expected(mp, corr)
    min_support = 5
    fits = {}
    for name, kw, X, cols, exp_vec in (
        ("paper", {}, mp.fractions, list(mp.elements), expected),
        ("no_fit_cut", {"fit_cut": None}, mp.fractions, list(mp.elements), expected),
    ):
        r = rung0_report(err, X, train, groups=groups, ref_diff=exp_vec, min_support=min_support, **kw)
        fits[name] = _rung0_dict(r, cols, exp_vec)
    umetals = [m for m in corr.u_mixing.get("O", {}) if m in mp.elements]
    has_u = np.asarray(mp.fractions)[:, [list(mp.elements).index(m) for m in umetals]].sum(1) > 0
    n_u_gga = int(np.sum(has_u & ~np.asarray(mp.is_hubbard)))
    # the known answer itself: CorrectionCalculator's uncertainty-weighted least squares on MP2020's fit set
    species = ["oxide", "peroxide", "superoxide"] + [s for s in corr.composition if s not in
                                                     ("oxide", "peroxide", "superoxide", "ozonide")]
    species += [m for m in corr.u_mixing.get("O", {}) if m not in species]
    col = {e: j for j, e in enumerate(mp.elements)}
    ox = np.array(mp.oxide_type)
    Xs = np.stack([np.where(ox == s, mp.fractions[:, col["O"]], 0.0) if s in ("oxide", "peroxide", "superoxide")
                   else (mp.fractions[:, col[s]] if s in col else np.zeros(len(mp))) for s in species], axis=1)
    sel = np.asarray(mp.in_mp2020_fit)
    sig = np.where(mp.exp_uncertainty == 0, np.nan, mp.exp_uncertainty)[sel]
    sig = np.where(np.isnan(sig), np.nanmean(sig), sig)
    beta = np.linalg.lstsq(Xs[sel] / sig[:, None], -err[sel] / sig, rcond=None)[0]
    published = {**corr.composition, **corr.u_mixing.get("O", {})}
    refit_dev = {s: float(beta[j] - published[s]) for j, s in enumerate(species)}
    floor = noise_floor(mp.e_form_raw, mp.e_form_exp, groups, mp.fractions, train_mask=train)
    side = {}
    for c in sorted(pub, key=lambda e: list(mp.elements).index(e) if e in mp.elements else 99):
        if c not in mp.elements:
            continue
        side[c] = {"minus_mp2020": -pub[c], "paper": fits["paper"]["constants"][c],
                   "no_fit_cut": fits["no_fit_cut"]["constants"][c],
                   "n_rows": int(np.sum(np.asarray(mp.fractions)[:, list(mp.elements).index(c)] > 0))}
    out = ctx.section_start("rung0", {
        "protocol": "err = raw MP formation energy - experimental formation enthalpy (eV/atom), 334 compounds; "
                    "train/test = system_split(chemsys, 0.3) (system-disjoint 70/30); rung0_report with the LAD "
                    "loss and ridge 1e-3; ref_diff = -MP2020 constant per element (the sign derived: MP2020 adds "
                    "its correction to raw to reach experiment, so raw - experiment = -correction x fraction); "
                    f"correlations over elements with >= {min_support} training rows",
        "fits": fits,
        "variants": {"paper": "the paper's Rung-0: per-element constants, fit cut |err| < 0.5 eV/atom",
                     "no_fit_cut": "the same without the fit cut: the known-answer setting (MP2020's GGA/GGA+U "
                                   "mixing corrections reach 4.4 eV per metal atom, so the rows that carry them "
                                   "exceed the cut and the U metals go unfitted with it)"},
        "u_metal_rows": {"n": int(has_u.sum()), "n_not_gga_u": n_u_gga,
                         "note": "every compound here with a U metal (V, Cr, Mn, Fe, Co, Ni, Mo, W) is a GGA+U oxide "
                                 "or fluoride when n_not_gga_u is 0, so a per-element constant is MP2020's species "
                                 "constant for these metals"},
        "side_by_side": side,
        "mp2020_refit": {"what": "uncertainty-weighted least squares of experiment - raw on MP2020's fit set with "
                                 "CorrectionCalculator's design: reproduces the published constants (the anchor of "
                                 "the known answer)", "deviation": refit_dev,
                         "max_abs_deviation": float(max(abs(v) for v in refit_dev.values()))},
        "floor": floor.to_dict(),
        "raw_vs_exp": _error_block(err, groups, 1.0, cfg),
        "wall_s": time.perf_counter() - t0})
    out["status"] = "done"
    fp, fn = fits["paper"], fits["no_fit_cut"]
    ctx.log(f"  rung0: held-out trimmed MAE raw {fp['raw']['value']:.3f} -> {fp['corrected']['value']:.3f} eV/atom "
            f"(paper), {fn['corrected']['value']:.3f} (no fit cut); r(constants, -MP2020) "
            f"{_fmt(fp['ref_corr_r'])} / {_fmt(fn['ref_corr_r'])}")
    return out


# ------------------------------------------------------------------------------------------ section 5
def _mp_elemental_energies() -> dict[str, float]:
    """Raw MP GGA energy per atom of every elemental entry in pymatgen's calc_compounds.json.gz (89 elements)."""
    from jaxcert.datasets._files import package_file, read_json

    calc = read_json(package_file("pymatgen", "analysis/compatibility/calc_compounds.json.gz", pip="pymatgen"))
    out = {}
    for entry in calc.values():
        comp = {k: float(v) for k, v in entry["composition"].items() if float(v) > 0}
        if len(comp) == 1:
            (el, n), = comp.items()
            out[el] = float(entry["energy"]) / n
    return out


def _reduced(formula: str) -> tuple[tuple[str, int], ...]:
    from ase.formula import Formula

    return tuple(sorted(Formula(formula).reduce()[0].count().items()))


def _section_consensus(ctx: _Context) -> dict[str, Any]:
    from jaxcert import datasets

    cfg = ctx.cfg
    t0 = time.perf_counter()
    mp, dc = datasets.get("mp-raw-vs-exp"), datasets.get("dcdft")
    mu = _mp_elemental_energies()
    names, kinds, geoms, ref, syms = [], [], [], [], []
    el_list = QUICK_EOS if cfg.quick else dc.symbols
    for s in el_list:
        if s in mu:
            names.append(s)
            kinds.append("element")
            geoms.append(dc.at_v0(s))
            ref.append(mu[s])
            syms.append((s,))
    if not cfg.quick:
        by_formula = {_reduced(f): i for i, f in enumerate(mp.formulas)}
        for p in datasets.get("aflow-prototypes"):
            i = by_formula.get(_reduced(p.formula))
            if i is None or len(p.elements) < 2:
                continue
            x = np.asarray(mp.fractions[i])
            names.append(f"{p.formula} ({p.label})")
            kinds.append("compound")
            geoms.append(p.atoms.copy())
            ref.append(float(mp.e_form_raw[i] + x @ np.asarray(mp.elemental_energy)))
            syms.append(tuple(p.elements))
    ref = np.array(ref)
    n = len(names)
    panel, E, panel_info = [], [], {}
    eos_models = ctx.result["sections"].get("eos", {}).get("models", {})
    for spec in cfg.panel:
        model, info = ctx.models.get(spec)
        key = _normalised(spec, cfg.bridge_precision)
        if model is None:
            panel_info[key] = {"status": "unavailable", "reason": info["reason"]}
            continue
        tm = time.perf_counter()
        e = np.full(n, np.nan)
        sup = np.array([_supports(model, s) for s in syms])
        reuse = eos_models.get(key) or eos_models.get(spec)
        reused = 0
        if reuse and reuse.get("status") == "ok":
            pe = reuse["per_element"]
            for k in range(n):
                if kinds[k] == "element" and names[k] in list(pe["symbols"]):
                    v = pe["e_at_wien2k_v0"][list(pe["symbols"]).index(names[k])]
                    if v is not None:
                        e[k], reused = v, reused + 1
        todo = [k for k in range(n) if sup[k] and not np.isfinite(e[k])]
        if todo:
            tot = _energies(model, [geoms[k] for k in todo])
            e[todo] = tot / np.array([len(geoms[k]) for k in todo])
        panel.append(key)
        E.append(e)
        panel_info[key] = {"status": "ok", "name": model.name, "n_evaluated": len(todo), "n_reused_from_eos": reused,
                           "n_unsupported": int((~sup).sum()), "wall_s": time.perf_counter() - tm}
        ctx.log(f"  consensus panel {key}: {len(todo)} structures evaluated, {reused} reused "
                f"({time.perf_counter() - tm:.0f} s)")
    res: dict[str, Any] = {
        "protocol": "structures: the dcdft elemental crystals at the WIEN2k V0 (the elements with a raw MP "
                    "elemental entry) and the AFLOW prototypes whose reduced formula is an MP raw compound (the "
                    "library's experimental geometry; same formula, structure identity not checked), single points; "
                    "reference: raw MP GGA(+U) total energy per atom (elements: MP's elemental entry; compounds: "
                    "E_f(raw) + x . mu_MP), uncorrected, the scale MPtrj-trained models learned; consensus_test "
                    "with min_models = the panel that loaded and the paper's thresholds (S < 0.1, |gap| > 0.3 "
                    "eV/atom, z >= 5). Per-element re-referencing is not run: an elemental structure is its own "
                    "column, so the offset would absorb its whole gap.",
        "names": names, "kinds": kinds, "reference_eV_per_atom": ref, "panel": panel, "panel_info": panel_info,
        "wall_s": None,
    }
    if not panel:
        res.update({"status": "skipped", "reason": "no panel model loaded"})
        out = ctx.section_start("consensus", res)
        out["status"] = "skipped"
        return out
    Em = np.stack(E, axis=1)
    m = len(panel)
    base = consensus_test(Em, ref, min_models=m)
    with np.errstate(invalid="ignore"):
        per_model = {p: {"median_abs_vs_reference": median_abs(Em[:, j] - ref),
                         "trimmed_vs_reference": trimmed_mae(Em[:, j] - ref).to_dict(),
                         "median_abs_vs_consensus": median_abs(Em[:, j] - base.consensus)}
                     for j, p in enumerate(panel)}
    rng = np.random.default_rng(cfg.seed)
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
    disc = np.flatnonzero(np.asarray(base.discrepancy, bool))
    res.update({
        "status": "done", "min_models": m, "energies_eV_per_atom": Em,
        "result": base.to_dict(), "per_model": per_model,
        "discrepancies": [{"name": names[k], "gap": float(base.gap[k]), "spread": float(base.spread[k]),
                           "z": float(base.z[k])} for k in disc],
        "positive_control": {"fraction": CORRUPT_FRACTION, "what": "the reference is corrupted by +-delta on a "
                             "labelled random subset of the scored structures; recall = flagged corrupted / "
                             "corrupted; flagged_clean = discrepancies among the untouched rows (the baseline's "
                             "own, the test is per structure); new_false_positives must be 0", "runs": controls},
        "wall_s": time.perf_counter() - t0,
    })
    out = ctx.section_start("consensus", res)
    out["status"] = "done"
    ctx.log(f"  consensus: panel of {m}, {base.n_scored} scored, {base.n_discrepancies} discrepancies; recall "
            + ", ".join(f"{c['delta_eV_per_atom']}: {_fmt(c['recall'], '.2f')}" for c in controls))
    return out


# ------------------------------------------------------------------------------------------ section 6
def _section_hull(ctx: _Context) -> dict[str, Any]:
    from jaxcert import datasets

    cfg = ctx.cfg
    t0 = time.perf_counter()
    mp, corr = datasets.get("mp-raw-vs-exp"), datasets.get("mp2020-corrections")
    els = list(mp.elements)
    rung = ctx.result["sections"].get("rung0", {}).get("fits", {}).get("no_fit_cut")
    if rung is not None:
        c_fit = np.array([rung["constants"][e] for e in els], np.float64)
        source = "Rung-0 constants of section rung0 (no fit cut)"
    else:
        expected, _ = _mp2020_expected(mp, corr)
        c_fit = np.nan_to_num(expected, nan=0.0)
        source = "-MP2020 constants (section rung0 not run)"
    c_rand = np.random.default_rng(cfg.seed).uniform(-0.5, 0.5, len(els))
    inv_fit = hull_invariance(mp.fractions, mp.e_form_raw, c_fit, elements=els)
    inv_rand = hull_invariance(mp.fractions, mp.e_form_raw, c_rand, elements=els)
    eh_raw = e_above_hull(mp.fractions, mp.e_form_raw, els)
    eh_exp = e_above_hull(mp.fractions, mp.e_form_exp, els)
    e_cor = np.asarray(mp.e_form_raw) - np.asarray(mp.fractions) @ c_fit
    eh_cor = e_above_hull(mp.fractions, e_cor, els)
    mask = np.asarray(eh_exp.scored)
    out = ctx.section_start("hull", {
        "protocol": "hull_invariance on the 334 MP raw compounds (formation energies, corners at 0): baseline, "
                    "compounds and corners shifted by the same per-element constants (must not change E_hull) and "
                    "compounds only (must); stability: e_above_hull of raw DFT and of experiment on the hull of "
                    "these compounds alone (not MP's full phase diagram), stability_scores at 25 meV/atom on the "
                    "compounds in systems with >= 3 entries",
        "constants_source": source,
        "invariance_fitted_constants": inv_fit.to_dict(), "invariance_random_constants": inv_rand.to_dict(),
        "passed": bool(inv_fit.passed and inv_rand.passed),
        "stability_raw_vs_experiment": stability_scores(eh_raw.e_above_hull, eh_exp.e_above_hull, mask=mask).to_dict(),
        "stability_rung0_corrected_vs_experiment": stability_scores(eh_cor.e_above_hull, eh_exp.e_above_hull,
                                                                    mask=mask).to_dict(),
        "n_scored": int(mask.sum()), "wall_s": time.perf_counter() - t0})
    out["status"] = "done"
    ctx.log(f"  hull: invariance passed={out['passed']} (max change {inv_fit.max_change_invariant:.1e} invariant, "
            f"{inv_fit.max_change_compounds_only:.3f} eV/atom compounds only)")
    return out


# -------------------------------------------------------------------------------------- orchestration
class _Context:
    def __init__(self, cfg: BenchmarkConfig, result: dict[str, Any], out_json: str | None, out_html: str | None,
                 log: Callable[[str], None]):
        self.cfg, self.result, self.out_json, self.out_html, self.log = cfg, result, out_json, out_html, log
        self.models = _Models(cfg.bridge_precision, log)

    def section_start(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        sec = self.result["sections"].setdefault(name, {})
        models = sec.get("models", {})
        sec.update({"compares": COMPARISONS[name], "status": "running"})
        sec.update(fields)
        if name in ("eos", "elastic", "prototypes"):
            sec["models"] = models
        self.write()
        return sec

    def done(self, section: str, spec: str) -> bool:
        key = _normalised(spec, self.cfg.bridge_precision)
        m = self.result["sections"].get(section, {}).get("models", {}).get(key)
        return bool(m) and m.get("status") in ("ok", "skipped")

    def store(self, section: str, spec: str, res: dict[str, Any]) -> None:
        key = _normalised(spec, self.cfg.bridge_precision)
        self.result["sections"][section]["models"][key] = to_jsonable(res)
        self.write()

    def write(self) -> None:
        self.result["models"] = self.models.info
        self.result["headline"] = _headline(self.result)
        if self.out_json:
            _atomic_write(self.out_json, json.dumps(to_jsonable(self.result), indent=1, allow_nan=False))


def _atomic_write(path: str, text: str) -> None:
    p = pathlib.Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)


_RUNNERS = {"eos": _section_eos, "elastic": _section_elastic, "prototypes": _section_prototypes,
            "rung0": _section_rung0, "consensus": _section_consensus, "hull": _section_hull}


def run_benchmark(config: BenchmarkConfig | None = None, *, out_json: str | None = None, out_html: str | None = None,
                  resume: bool = False, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the offline mini-benchmark (docs/controls.md, "14. The offline mini-benchmark").

    Float64 throughout (jax x64 is enabled).  With ``out_json`` the report is rewritten atomically after every
    section and every model, with ``"complete": false`` until the end, so a run cut short loses nothing;
    ``resume=True`` keeps every finished section (and, within sections 1–3, every finished model) of that file
    when its configuration (all but ``sections``) matches, and runs the rest.

    Args:
      config: what to run (default :class:`BenchmarkConfig`: every section, the default models and panel).
      out_json: report path (strict JSON, schema :data:`SCHEMA`).
      out_html: self-contained HTML page (inline SVG figures), written at the end and after every section.
      resume: continue the run in ``out_json``.
      log: progress lines (default: stderr).

    Returns:
      The report dict (JSON types only after :func:`jaxcert.controls.to_jsonable`).

    Raises:
      ValueError: ``resume`` without ``out_json``, or a file from a different configuration.
    """
    import jax

    from jaxcert.core.device import machine
    from jaxcert.report import package_versions

    jax.config.update("jax_enable_x64", True)
    cfg = BenchmarkConfig() if config is None else config
    if log is None:
        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)
    for flag, path in (("out_json", out_json), ("out_html", out_html)):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not os.path.isdir(folder):
            raise InputError(f"{flag}: no such directory {folder!r} for {path!r}")
    result: dict[str, Any] = {"schema": SCHEMA, "complete": False, "config": dataclasses.asdict(cfg),
                              "comparisons": COMPARISONS, "sections": {}}
    if resume:
        if not out_json:
            raise InputError("resume: needs out_json (the report file is the checkpoint)")
        if os.path.exists(out_json):
            try:
                with open(out_json, encoding="utf-8") as fh:
                    prev = json.load(fh)
            except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
                raise InputError(f"resume: cannot read {out_json!r} as JSON ({type(err).__name__}); remove it or "
                                 "drop --resume") from None
            if not isinstance(prev, dict) or prev.get("schema") != SCHEMA:
                raise InputError(f"resume: {out_json!r} is not a {SCHEMA} report")
            if not isinstance(prev.get("config", {}), dict) or not isinstance(prev.get("sections", {}), dict):
                raise InputError(f"resume: {out_json!r}: 'config' and 'sections' must be objects; remove the file "
                                 "or drop --resume")
            prev_key = dict(prev.get("config", {}))
            prev_key.pop("sections", None)
            if prev_key != cfg.key():
                diff = sorted(k for k in set(prev_key) | set(cfg.key()) if prev_key.get(k) != cfg.key().get(k))
                raise InputError(f"resume: {out_json!r} was written with a different configuration ({', '.join(diff)})")
            result["sections"] = prev.get("sections", {})
            log(f"resuming {out_json}: " + ", ".join(f"{k} {v.get('status')}" for k, v in result["sections"].items()))
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    result.update({"loadavg_start": load_start, "versions": package_versions(), "machine": machine()})
    ctx = _Context(cfg, result, out_json, out_html, log)
    for name in SECTIONS:
        if name not in cfg.sections:
            continue
        if result["sections"].get(name, {}).get("status") in ("done", "skipped"):
            log(f"section {name}: kept from {out_json}")
            continue
        log(f"section {name}: {COMPARISONS[name].split(':')[0]}")
        t0 = time.perf_counter()
        sec = _RUNNERS[name](ctx)
        if sec.get("status") == "running":
            sec["status"] = "done"
        sec["section_wall_s"] = time.perf_counter() - t0
        ctx.write()
        if out_html:
            _atomic_write(out_html, benchmark_html(to_jsonable(result)))
    result["complete"] = True
    result["wall_s"] = time.perf_counter() - t_start  # this invocation (a resumed run: the rest only)
    result["loadavg"] = os.getloadavg()
    ctx.write()
    if out_html:
        _atomic_write(out_html, benchmark_html(to_jsonable(result)))
    return to_jsonable(result)


# ---------------------------------------------------------------------------------------------- headline
def _headline(result: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of every finished part (each model's Δ, K/G log-r and bias, the Rung-0 gain, SG
    retention at each symprec, the consensus recall, the hull check)."""
    res = to_jsonable(result)
    sec = res.get("sections", {})
    h: dict[str, Any] = {}
    eos = sec.get("eos", {})
    if eos:
        h["eos_delta_meV_per_atom"] = {m: r.get("delta_mean_meV") for m, r in eos.get("models", {}).items()
                                       if r.get("status") == "ok"}
        h["eos_delta_median_meV_per_atom"] = {m: r["delta"]["median_abs"] for m, r in eos.get("models", {}).items()
                                              if r.get("status") == "ok"}
        h["eos_minus_floor_meV_per_atom"] = {m: r["on_floor_elements"]["minus_floor"].get("estimate")
                                             for m, r in eos.get("models", {}).items() if r.get("status") == "ok"}
        fl = eos.get("floor", {})
        h["eos_floor_wien2k_vs_experiment_delta_meV_per_atom"] = fl.get("delta_mean_meV")
    el = sec.get("elastic", {})
    if el:
        h["elastic"] = {m: {"K_log_r": r["compare_exact"]["K"]["r"], "K_bias": r["compare_exact"]["K"]["bias"],
                            "G_log_r": r["compare_exact"]["G"]["r"], "G_bias": r["compare_exact"]["G"]["bias"],
                            "routes_max_abs_dC_GPa": r["routes"]["max_abs_dC_GPa"],
                            "routes_n_agree": f"{r['routes']['n_agree']}/{r['routes']['n']}"}
                        for m, r in el.get("models", {}).items() if r.get("status") == "ok"}
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
                             for m, r in pr.get("models", {}).items() if r.get("status") == "ok"}
        h["volume_drift_median"] = {m: r["volume_drift"]["median"] for m, r in pr.get("models", {}).items()
                                    if r.get("status") == "ok"}
        h["prototypes_converged"] = {m: f"{r['n_converged']}/{r['n']}" for m, r in pr.get("models", {}).items()
                                     if r.get("status") == "ok"}
    co = sec.get("consensus", {})
    if co.get("status") == "done":
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
    h = result.get("headline") or _headline(result)
    lines = [f"jaxcert controls benchmark ({'complete' if result.get('complete') else 'partial'}, "
             f"{_fmt(result.get('wall_s'), '.0f')} s)"]
    for m, d in h.get("eos_delta_meV_per_atom", {}).items():
        lines.append(f"  EOS vs WIEN2k  {m:<28} Delta {_fmt(d)} meV/atom (median "
                     f"{_fmt(h['eos_delta_median_meV_per_atom'].get(m))}, minus floor "
                     f"{_fmt(h['eos_minus_floor_meV_per_atom'].get(m))})")
    if "eos_floor_wien2k_vs_experiment_delta_meV_per_atom" in h:
        lines.append(f"  EOS floor      WIEN2k vs experiment Delta "
                     f"{_fmt(h['eos_floor_wien2k_vs_experiment_delta_meV_per_atom'])} meV/atom")
    for m, d in h.get("elastic", {}).items():
        lines.append(f"  elastic vs exp {m:<28} K log-r {_fmt(d['K_log_r'])} bias {_fmt(d['K_bias'])}; G log-r "
                     f"{_fmt(d['G_log_r'])} bias {_fmt(d['G_bias'])}; routes max |dC| "
                     f"{_fmt(d['routes_max_abs_dC_GPa'])} GPa, agree {d['routes_n_agree']}")
    for m, d in h.get("sg_retention", {}).items():
        lines.append(f"  SG retention   {m:<28} " + ", ".join(f"{k} Å: {_fmt(v, '.3f')}" for k, v in d.items())
                     + f"; median volume drift {_fmt(h['volume_drift_median'].get(m), '+.3f')}")
    for k, d in h.get("rung0", {}).items():
        lines.append(f"  Rung-0 MP raw vs exp ({k}): held-out trimmed MAE {_fmt(d['raw'])} -> {_fmt(d['corrected'])} "
                     f"eV/atom (gain {_fmt(d['gain'])}), r(constants, -MP2020) {_fmt(d['r_vs_minus_mp2020'])}")
    if "consensus" in h:
        c = h["consensus"]
        lines.append(f"  consensus      panel {c['panel_size']}, {c['n_scored']} scored, {c['n_discrepancies']} "
                     f"discrepancies; recall " + ", ".join(f"{k} eV: {_fmt(v, '.2f')}" for k, v in c["recall"].items()))
    if "hull_invariance_passed" in h:
        lines.append(f"  hull invariance passed: {h['hull_invariance_passed']}")
    return "\n".join(lines)


def benchmark_html(result: dict[str, Any]) -> str:
    """The report as one self-contained HTML page with inline SVG figures (:mod:`jaxcert.controls._benchmark_html`)."""
    from jaxcert.controls._benchmark_html import render

    return render(to_jsonable(result))
