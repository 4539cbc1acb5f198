"""What the offline mini-benchmark runs: :class:`BenchmarkConfig`, its defaults and the constants shared by sections.

docs/controls.md, "14. The offline mini-benchmark".  A model spec names an analytic model
(``jaxcert.models.available()``) or a bridged one (``chgnet``, ``torch-sevennet:7net-0``, options after ``@``); the
spec's *key* in the report is the spec with the bridge precision made explicit (``chgnet@float32``), so a run
and its resumption name a model alike.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from jaxcert import models as zoo
from jaxcert.core.inputs import InputError, split_list
from jaxcert.core.result import to_jsonable

__all__ = [
    "SCHEMA", "SECTIONS", "PER_MODEL_SECTIONS", "COMPARISONS", "DEFAULT_MODELS", "DEFAULT_PANEL", "BRIDGED_HEADS",
    "INSTALL_BRIDGES", "PYMATGEN_SECTIONS", "INSTALL_PYMATGEN", "QUICK_EOS", "V0_CUTOFF", "BenchmarkConfig", "head",
    "check_spec", "model_key",
]

SCHEMA = "jaxcert-controls-benchmark/1"
SECTIONS = ("eos", "elastic", "prototypes", "rung0", "consensus", "hull")
#: The sections that run every model of ``models`` and keep each model's finished result on resume.
PER_MODEL_SECTIONS = ("eos", "elastic", "prototypes")
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
DEFAULT_MODELS = ("emt", "eam", "sw", "chgnet", "torch-sevennet:7net-0")
DEFAULT_PANEL = ("chgnet", "torch-sevennet:7net-0", "torch-sevennet:7net-0_22may2024", "torch-sevennet:7net-mf-0:PBE",
                 "torch-sevennet:7net-mf-0:R2SCAN", "torch-sevennet:7net-l3i5")
#: bridged model families; "sevennet" is the old spelling of "torch-sevennet" (jaxcert.specs.canonical_specs)
BRIDGED_HEADS = ("chgnet", "torch-sevennet", "sevennet")
INSTALL_BRIDGES = ("pip install torch==2.13.0 (the CPU build), then pip install -e 'bridges/[all]' "
                   "(jaxcert-bridges with chgnet and sevenn; docs/install.md, section 2 'The bridges')")
#: The sections whose reference data ship inside pymatgen (docs/datasets.md); eos reads only ASE's.
PYMATGEN_SECTIONS = ("elastic", "prototypes", "rung0", "consensus", "hull")
INSTALL_PYMATGEN = 'pip install -e ".[controls]" in the jaxcert checkout (or pip install pymatgen)'
#: The elements of a quick run's EOS and consensus sections.
QUICK_EOS = ("Cu", "Ag", "Al")
#: Trim of relative volume errors (threshold-censored mean, as trimmed_mae): EOS V0 and prototype volume drift.
V0_CUTOFF = 0.25


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """What :func:`~jaxcert.controls.run_benchmark` runs (validated on construction; bad values raise ``ValueError``
    naming the field).

    Attributes:
      models: model specs for sections 1–3: analytic names (``jaxcert.models.available()``) or bridged specs
        (``chgnet``, ``chgnet:0.3.0``, ``torch-sevennet:7net-0``, ``torch-sevennet:7net-mf-0:PBE``,
        options after ``@``).
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
                v = tuple(split_list(name, v, what="names")) if v.strip() else ()
            object.__setattr__(self, name, tuple(v))
        for name in ("models", "panel"):
            for spec in getattr(self, name):
                check_spec(spec, name)
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


def head(spec: str) -> str:
    """The model family of a spec: ``torch-sevennet:7net-0@float64`` -> ``torch-sevennet``."""
    return spec.split("@", 1)[0].split(":", 1)[0]


def check_spec(spec: Any, field: str) -> None:
    """Raise ``InputError`` naming ``field`` unless ``spec`` is an analytic model name or a bridged spec."""
    if not isinstance(spec, str) or not spec:
        raise InputError(f"{field}: expected model names, got {spec!r}")
    if head(spec) in BRIDGED_HEADS or spec in zoo.available():
        return
    raise InputError(f"{field}: unknown model {spec!r}; analytic: {', '.join(zoo.available())}; bridged: "
                     "chgnet[:version], torch-sevennet[:name[:modal]] (options after @, e.g. chgnet@float64)")


def model_key(spec: str, precision: str) -> str:
    """The report's name of a spec: bridged specs without an ``@`` option get ``@precision``."""
    if head(spec) in BRIDGED_HEADS and "@" not in spec:
        return f"{spec}@{precision}"
    return spec
