"""``jaxcert controls``: the offline mini-benchmark of the benchmark controls (docs/controls.md, section 14).

Argument definitions, the checks of :mod:`jaxcert.core.inputs`, and :func:`jaxcert.controls.run_benchmark`.
Model specs are spelled as everywhere else (:func:`jaxcert.specs.canonical_specs`: ``torch-sevennet:...`` is the
torch bridge; the old ``sevennet:...`` still is, with one warning line).
"""

from __future__ import annotations

import argparse

from jaxcert.core import inputs
from jaxcert.specs import canonical_specs

__all__ = ["cmd_controls", "register"]


def cmd_controls(a: argparse.Namespace) -> int:
    """Validate, run the benchmark (writing ``--json``/``--html`` as it goes), print the headline; exit 0."""
    from jaxcert.controls import SECTIONS, BenchmarkConfig, headline_text, run_benchmark

    sections = tuple(inputs.name_list("--sections", a.sections, SECTIONS, what="sections")) \
        if a.sections is not None else SECTIONS
    _need_pymatgen(sections, a.sections is None)
    models = canonical_specs("--models", a.models)
    panel = canonical_specs("--panel", a.panel)
    seed = inputs.seed("--seed", a.seed)
    n_boot = inputs.integer("--n-boot", a.n_boot, minimum=100)
    max_steps = inputs.integer("--max-steps", a.max_steps, minimum=1)
    p_atoms = inputs.integer("--prototype-max-atoms", a.prototype_max_atoms, minimum=1)
    b_protos = inputs.integer("--bridged-prototypes", a.bridged_prototypes, minimum=0)
    b_steps = inputs.integer("--bridged-max-steps", a.bridged_max_steps, minimum=1)
    fmax = inputs.positive("--fmax", a.fmax, "eV/Å", maximum=1.0)
    inputs.choice("--bridge-precision", a.bridge_precision, ("float32", "float64"))
    if a.resume and not a.json:
        raise inputs.InputError("--resume: needs --json FILE (the report file is the checkpoint)")
    inputs.distinct_outputs((("--json", a.json), ("--html", a.html)))
    for flag, path in (("--json", a.json), ("--html", a.html)):
        if path is not None:
            inputs.output_file(flag, path)
    try:
        cfg = BenchmarkConfig(models=models, panel=panel, sections=sections, quick=a.quick, seed=seed, n_boot=n_boot,
                              bridge_precision=a.bridge_precision, max_steps=max_steps, prototype_max_atoms=p_atoms,
                              bridged_prototypes=b_protos,
                              bridged_max_steps=b_steps, fmax=fmax)
    except ValueError as err:  # the library names its field; give the flag
        field, _, rest = str(err).partition(":")
        raise inputs.InputError(f"--{field.replace('_', '-')}:{rest}") from None
    result = run_benchmark(cfg, out_json=a.json, out_html=a.html, resume=a.resume,
                           log=None if not a.quiet else (lambda _msg: None))
    print(headline_text(result))
    for path in (a.json, a.html):
        if path:
            print(f"wrote {path}")
    return 0


def _need_pymatgen(sections: tuple[str, ...], default: bool) -> None:
    """Refuse, before anything runs, sections whose reference data ship inside pymatgen when it is not installed
    (the base install has no pymatgen: ``pip install -e ".[controls]"``)."""
    from jaxcert.controls.benchmark.config import INSTALL_PYMATGEN, PYMATGEN_SECTIONS
    from jaxcert.datasets._files import package_roots

    need = [s for s in sections if s in PYMATGEN_SECTIONS]
    if need and not package_roots("pymatgen"):
        raise inputs.InputError(f"--sections{' (default: all)' if default else ''}: {', '.join(need)} read reference "
                                f"data shipped with pymatgen, which is not installed: {INSTALL_PYMATGEN}; "
                                "--sections eos runs without it (docs/controls.md, section 14)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommand to the ``jaxcert`` parser."""
    from jaxcert.controls.benchmark import DEFAULT_MODELS, DEFAULT_PANEL, SECTIONS

    models = ",".join(canonical_specs("--models", DEFAULT_MODELS, warn=False))
    panel = ",".join(canonical_specs("--panel", DEFAULT_PANEL, warn=False))
    c = sub.add_parser(
        "controls", help="offline mini-benchmark of the benchmark controls on reference data in installed packages",
        description="Sections: eos (EOS of the dcdft set vs WIEN2k, against DFT; WIEN2k vs experiment as the floor), "
        "elastic (K, G of cubic metals, exact and finite-strain routes, against experiment), prototypes (symmetry "
        "retention vs symprec and volume drift on the all-metal AFLOW prototypes), rung0 (Rung-0 and the floor on raw "
        "MP vs experiment; known answer MP2020), consensus (a panel of shipped checkpoints vs raw MP energies, with "
        "synthetic corruptions), hull (E_hull invariance). Bridged models need jaxcert-bridges and torch "
        "(chgnet, torch-sevennet); without them the analytic parts run. See docs/controls.md, section 14.")
    c.add_argument("--models", default=models,
                   help="comma-separated models for eos, elastic, prototypes: analytic names (`jaxcert models`) or "
                   f"bridged specs such as torch-sevennet:7net-0 (default {models})")
    c.add_argument("--panel", default=panel,
                   help="comma-separated consensus panel; every member that loads is used and min_models is their "
                   f"number (default {panel})")
    c.add_argument("--sections", default=None, help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)")
    c.add_argument("--quick", action="store_true", help="a small run (3 elements, 3 metals, 3 prototypes) for tests")
    c.add_argument("--json", help="write the report here (rewritten after every section and model)")
    c.add_argument("--html", help="write a self-contained HTML page with figures")
    c.add_argument("--resume", action="store_true", help="keep what --json FILE already holds and run the rest")
    c.add_argument("--seed", default="0", help="seed of bootstraps, splits and corruptions (default 0)")
    c.add_argument("--n-boot", default="2000", help="bootstrap resamples (default 2000, the paper's)")
    c.add_argument("--bridge-precision", default="float32",
                   help="torch precision of bridged models without an @ option: float32 (default) or float64")
    c.add_argument("--max-steps", default="500", help="FIRE steps of analytic-model prototype relaxations (500)")
    c.add_argument("--prototype-max-atoms", default="8",
                   help="analytic models relax the prototypes of at most this many atoms (8: 51 of 83)")
    c.add_argument("--bridged-prototypes", default="12",
                   help="prototypes relaxed per bridged model, smallest cells first (12)")
    c.add_argument("--bridged-max-steps", default="100", help="FIRE steps of bridged-model relaxations (100)")
    c.add_argument("--fmax", default="0.02", help="relaxation force threshold in eV/Å (0.02, the paper's)")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.set_defaults(fn=cmd_controls)
