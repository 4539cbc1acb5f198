"""The DFT verification card: configurations, estimated cost, VASP and Quantum ESPRESSO inputs, decision table.

docs/detective.md §5.6.  Inputs are written with ASE's writers (``ase.io.write`` formats ``"vasp"`` for POSCAR
and ``"espresso-in"`` for pw.x); INCAR and KPOINTS are plain text.  Nothing is downloaded: the pseudopotential
files are *placeholders* (``POTCAR`` is not written; the pw.x inputs name ``<El>.pbe.UPF``) that the user
supplies.  The cost is a rough order of magnitude, 0.01 core-hours × N_atoms² × N_k, stated as such.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.core.files import OutputFileError, atomic_write

__all__ = ["write_card", "decision_table", "cost_core_hours", "kpoints_for"]

_BOX = 15.0  # Å, the box of non-periodic configurations


def kpoints_for(atoms: Any) -> tuple[int, int, int]:
    """Γ only along open axes; about 30 Å⁻¹ of k-point density along periodic ones."""
    pbc = atoms.get_pbc()
    lengths = atoms.cell.lengths()
    return tuple(int(max(1, math.ceil(30.0 / L))) if p and L > 0 else 1 for p, L in zip(pbc, lengths, strict=True))


def cost_core_hours(atoms: Any) -> float:
    """Order-of-magnitude cost of one spin-polarised PBE single point: 0.01 core-h × N² × N_k."""
    k = int(np.prod(kpoints_for(atoms))) if any(atoms.get_pbc()) else 1
    return 0.01 * len(atoms) ** 2 * k


def _boxed(atoms: Any) -> Any:
    a = atoms.copy()
    if not any(a.get_pbc()) or a.cell.rank < 3:
        a.set_cell([_BOX, _BOX, _BOX])
        a.center()
        a.set_pbc(True)
    else:
        a.set_pbc(True)  # slabs: the vacuum is in the cell already
    return a


_INCAR = """# PBE single point (jaxcert DFT verification card; check the settings for your system)
SYSTEM = {label}
PREC = Accurate
ENCUT = 520
ISPIN = 2
MAGMOM = {magmom}
ISMEAR = 0
SIGMA = 0.05
EDIFF = 1E-6
NELM = 200
IBRION = -1
NSW = 0
LREAL = .FALSE.
LWAVE = .FALSE.
LCHARG = .FALSE.
"""


def _real_dirs(folder: str, *parts: str) -> str:
    """``folder/parts...``, each level created if missing and refused when it is a symbolic link (the card's
    files are written in the report directory, never through a link out of it)."""
    path = ""
    for part in (folder, *parts):
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise OutputFileError(f"{path!r} is a symbolic link; jaxcert writes no file through a link")
        os.makedirs(path, exist_ok=True)
    return path


def write_card(folder: str | os.PathLike, configurations: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Write ``vasp/<label>/{POSCAR,INCAR,KPOINTS}`` and ``qe/<label>.pwi`` for each configuration.

    Returns one row per configuration: label, formula, atoms, k-points, estimated core-hours, files.
    """
    import ase.io

    folder = os.fspath(folder)
    rows = []
    for label, atoms in configurations:
        if atoms is None:
            continue
        a = _boxed(atoms)
        kp = kpoints_for(atoms) if any(atoms.get_pbc()) else (1, 1, 1)  # open axes: Γ only
        vdir = _real_dirs(folder, "vasp", label)
        poscar = io.StringIO()
        ase.io.write(poscar, a, format="vasp", direct=True, sort=True)
        atomic_write(os.path.join(vdir, "POSCAR"), poscar.getvalue())  # every file: atomic, never through a link
        n_species = len(set(a.get_chemical_symbols()))
        atomic_write(os.path.join(vdir, "INCAR"), _INCAR.format(label=label, magmom=f"{len(a)}*1.0"))
        atomic_write(os.path.join(vdir, "KPOINTS"), f"Gamma-centred mesh\n0\nGamma\n{kp[0]} {kp[1]} {kp[2]}\n0 0 0\n")
        atomic_write(os.path.join(vdir, "POTCAR.README"),
                     "POTCAR is not shipped: concatenate the PAW_PBE POTCARs of your VASP installation for the "
                     f"species in POSCAR order ({' '.join(sorted(set(a.get_chemical_symbols())))}).\n")
        qdir = _real_dirs(folder, "qe")
        pseudos = {el: f"{el}.pbe.UPF" for el in set(a.get_chemical_symbols())}
        input_data = {"control": {"calculation": "scf", "prefix": label, "pseudo_dir": "./pseudo",
                                  "tprnfor": True, "tstress": bool(all(atoms.get_pbc()))},
                      "system": {"ecutwfc": 60, "ecutrho": 480, "occupations": "smearing", "smearing": "gaussian",
                                 "degauss": 0.0037, "nspin": 2,
                                 **{f"starting_magnetization({k + 1})": 0.5 for k in range(n_species)}},
                      "electrons": {"conv_thr": 1e-8, "mixing_beta": 0.3}}
        qpath = os.path.join(qdir, f"{label}.pwi")
        pwi = io.StringIO()
        ase.io.write(pwi, a, format="espresso-in", input_data=input_data, pseudopotentials=pseudos, kpts=kp)
        atomic_write(qpath, pwi.getvalue())
        rows.append({"label": label, "formula": a.get_chemical_formula(), "atoms": len(a), "kpoints": list(kp),
                     "core_hours": cost_core_hours(atoms),
                     "files": [os.path.relpath(os.path.join(vdir, f), folder) for f in ("POSCAR", "INCAR", "KPOINTS")]
                     + [os.path.relpath(qpath, folder)]})
    return rows


def decision_table(signal_type: str, declaration: Mapping[str, Any], target_value: float, committee_median: float,
                   committee_scale: float, observable: str, unit: str) -> list[tuple[str, str]]:
    """(reference outcome, verdict) rows derived from the pre-registration (docs/detective.md §5.6)."""
    crit = declaration["criteria"]
    if signal_type == "exact-constraint violation":
        return [
            (f"reproduce.py shows the target's value above the threshold {crit['threshold']:g} again", "confirmed: "
             "an exact constraint holds for any reference method; no DFT value is needed for the verdict"),
            ("the value falls below the threshold under a tighter numerical setting (precision, step)",
             "refuted: a numerical artefact of the check"),
            ("a DFT single point on the card's configurations", "reference values only (magnitude of the "
             "violation's consequences), not the verdict"),
        ]
    unit = "" if unit == "1" else unit
    band = committee_median + 3.0 * max(committee_scale, crit["floor"])
    mid = 0.5 * (target_value + committee_median)
    extra = []
    if crit.get("limit") is not None:  # an observable with an absolute physical criterion (docs/detective.md §3.4)
        extra = [(f"the reference {observable} itself exceeds the stated limit {crit['limit']:g} {unit}",
                  "the physical criterion is wrong for this system: refuted, whatever the committee says")]
    return extra + [
        (f"the reference {observable} is <= {band:.3g} {unit} (within the committee band, median + 3 × scale) in "
         f"at least {crit['min_in_scope_fraction']:.0%} of the in-scope configurations", "confirmed: the target's "
         "anomaly is spurious"),
        (f"the reference is >= {mid:.3g} {unit} (closer to the target's {target_value:.3g} than to the committee's "
         f"{committee_median:.3g})", "refuted: the behaviour is physical and the committee misses it"),
        ("in between, or in fewer than the pre-registered share of in-scope configurations", "inconclusive: "
         "report the gap; consider a higher-level reference"),
        (f"the same outcome also for the out-of-scope configurations (pre-registered clean: "
         f"{len(declaration['expected_clean'])})", "scope refuted: the failure is broader than claimed"),
    ]
