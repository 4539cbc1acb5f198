"""Benchmark controls (seed 001) as a library: ``docs/controls.md``.

Robust error statistics resampled by chemical system, the reference-vs-reference floor, Rung-0
re-referencing, the consensus test, hull F1, polymorph ordering, symmetry retention vs symprec and exact
elastic moduli. Host-side statistics are numpy float64 and vectorised; elastic constants are exact JAX
second derivatives. Private modules, public names re-exported here.
"""

from jaxcert.controls._consensus import (  # the consensus test (docs/controls.md)
    Adjudication,
    ConsensusResult,
    ReReferencedConsensus,
    adjudicate,
    consensus_test,
    rereference_consensus,
)
from jaxcert.controls._elastic import (  # elastic constants (docs/controls.md)
    VRH,
    ElasticTensor,
    FiniteStrainElastic,
    ModuliComparison,
    compare_moduli,
    elastic_tensor,
    finite_strain_elastic,
    vrh,
)
from jaxcert.controls._eos import (  # equations of state and the Δ metric (docs/controls.md)
    DELTA_VOLUME_FACTORS,
    EV_PER_A3_IN_GPA,
    EosFit,
    EosScan,
    birch_murnaghan_energy,
    birch_murnaghan_fit,
    delta_gauge,
    eos_scan,
)
from jaxcert.controls._hull import (  # convex hull and stability (docs/controls.md)
    DEFAULT_STABILITY_WINDOWS,
    HullInvariance,
    HullResult,
    StabilityScores,
    StabilityWindowSweep,
    e_above_hull,
    hull_invariance,
    stability_scores,
    stability_window_sweep,
)
from jaxcert.controls._reference import (  # formation energies, Rung-0 and the floor
    AboveFloor,
    ElementalReferences,
    NoiseFloor,
    Rung0Fit,
    Rung0Minimality,
    Rung0Report,
    SinglePointControl,
    above_floor,
    elemental_references,
    formation_energy,
    noise_floor,
    rung0_fit,
    rung0_minimality,
    rung0_objective,
    rung0_report,
    single_point_control,
)
from jaxcert.controls._result import ControlResult, to_jsonable
from jaxcert.controls._robust import (  # robust statistics and resampling
    BinnedError,
    BootstrapResult,
    CorpusCorrelationTest,
    CorrelationTest,
    PolymorphResult,
    RetentionCurve,
    TrimmedMAE,
    TrimSweep,
    binned_error,
    cluster_bootstrap,
    corpus_correlation_test,
    error_correlation_permutation,
    median_abs,
    polymorph_ordering,
    sg_retention,
    system_kfold,
    system_split,
    trimmed_mae,
    trimmed_mae_sweep,
)
from jaxcert.controls.benchmark import (  # the offline mini-benchmark (docs/controls.md, section 14)
    COMPARISONS,
    DEFAULT_MODELS,
    DEFAULT_PANEL,
    SECTIONS,
    BenchmarkConfig,
    benchmark_html,
    headline_text,
    run_benchmark,
)

__all__ = ["ControlResult", "to_jsonable"]
__all__ += [  # convex hull and stability
    "DEFAULT_STABILITY_WINDOWS",
    "HullInvariance",
    "HullResult",
    "StabilityScores",
    "StabilityWindowSweep",
    "e_above_hull",
    "hull_invariance",
    "stability_scores",
    "stability_window_sweep",
]
__all__ += [  # robust statistics and resampling
    "BinnedError", "BootstrapResult", "CorpusCorrelationTest", "CorrelationTest", "PolymorphResult",
    "RetentionCurve", "TrimmedMAE", "TrimSweep", "binned_error", "cluster_bootstrap", "corpus_correlation_test",
    "error_correlation_permutation", "median_abs", "polymorph_ordering", "sg_retention", "system_kfold",
    "system_split", "trimmed_mae", "trimmed_mae_sweep",
]
__all__ += [  # formation energies, Rung-0 and the floor
    "AboveFloor", "ElementalReferences", "NoiseFloor", "Rung0Fit", "Rung0Minimality", "Rung0Report",
    "SinglePointControl", "above_floor", "elemental_references", "formation_energy", "noise_floor", "rung0_fit",
    "rung0_minimality", "rung0_objective", "rung0_report", "single_point_control",
]
__all__ += [  # the consensus test
    "Adjudication", "ConsensusResult", "ReReferencedConsensus", "adjudicate", "consensus_test",
    "rereference_consensus",
]
__all__ += [  # equations of state and the Δ metric
    "DELTA_VOLUME_FACTORS", "EV_PER_A3_IN_GPA", "EosFit", "EosScan", "birch_murnaghan_energy",
    "birch_murnaghan_fit", "delta_gauge", "eos_scan",
]
__all__ += [  # elastic constants
    "VRH", "ElasticTensor", "FiniteStrainElastic", "ModuliComparison", "compare_moduli", "elastic_tensor",
    "finite_strain_elastic", "vrh",
]
__all__ += [  # the offline mini-benchmark
    "COMPARISONS", "DEFAULT_MODELS", "DEFAULT_PANEL", "SECTIONS", "BenchmarkConfig", "benchmark_html", "headline_text",
    "run_benchmark",
]
