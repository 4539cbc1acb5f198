"""Materials Project raw GGA(+U) formation energies against experiment (``docs/datasets.md``, "mp-raw-vs-exp").

pymatgen ships the data MP2020's anion and GGA/GGA+U corrections were fitted to (Wang et al., Sci. Rep. 11,
15496 (2021); ``pymatgen.analysis.compatibility.correction_calculator.CorrectionCalculator``):

* ``pymatgen/analysis/compatibility/calc_compounds.json.gz``: 423 MP ``ComputedEntry`` objects keyed by
  reduced formula (89 elements, 334 compounds): the total VASP energy of the cell (eV), its composition,
  the run type (GGA or GGA+U, with the U values), MP's ``oxide_type`` and ``e_above_hull``. Every entry
  has ``correction = 0``: these are **raw** energies, before any MP correction.
* ``pymatgen/analysis/compatibility/exp_compounds.json.gz``: 2,135 experimental standard formation
  enthalpies (eV per formula unit as written, with an uncertainty, NaN where none was given), each with
  the MP id of the matching structure.

"Raw" formation energy here: ΔE_f = (E − Σ_el n_el μ_el) / N, with E the raw entry energy, n_el the atom
counts, N their sum and μ_el the raw energy per atom of the element's own entry in the same file (GGA
for every element, also where the compound is GGA+U): no anion correction, no GGA/GGA+U mixing
correction, no fitted elemental energies. The 334 compounds with an entry in both files (joined on the
MP id, compositions checked to agree) make the set; all are in both.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np
from ase.data import atomic_numbers

from jaxcert.datasets._files import package_file, read_json

__all__ = ["MPRawVsExp", "load_mp_raw_vs_exp", "parse_formula", "MP2020_FIT_POLYANIONS"]

#: Polyanions excluded from the MP2020 fit (CorrectionCalculator's default ``exclude_polyanions``),
#: matched as substrings of the formula, as pymatgen does.
MP2020_FIT_POLYANIONS: tuple[str, ...] = tuple(
    "SO4 SO3 CO3 NO3 NO2 OCl3 ClO3 ClO4 HO ClO SeO3 TiO3 TiO4 WO4 SiO3 SiO4 Si2O5 PO3 PO4 P2O7".split()
)

_TOKEN = re.compile(r"([A-Z][a-z]?)|(\()|(\))|(\d+(?:\.\d+)?|\.\d+)")


def parse_formula(formula: str) -> dict[str, float]:
    """Atom counts of a formula with nested parentheses, e.g. ``"Ca3(PO4)2"`` → {Ca: 3, P: 2, O: 8}.

    Raises ``ValueError`` for an unknown element symbol, unbalanced parentheses or stray characters.
    """
    if not isinstance(formula, str) or not formula.strip():
        raise ValueError(f"formula must be a non-empty string, got {formula!r}")
    text = formula.replace(" ", "")
    stack: list[dict[str, float]] = [{}]
    last: dict[str, float] | str | None = None  # what a following count multiplies
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"formula {formula!r}: cannot read {text[pos:]!r}")
        sym, opening, closing, count = m.groups()
        pos = m.end()
        if sym is not None:
            if sym not in atomic_numbers:
                raise ValueError(f"formula {formula!r}: unknown element {sym!r}")
            stack[-1][sym] = stack[-1].get(sym, 0.0) + 1.0
            last = sym
        elif opening is not None:
            stack.append({})
            last = None
        elif closing is not None:
            if len(stack) == 1:
                raise ValueError(f"formula {formula!r}: unbalanced ')'")
            group = stack.pop()
            for k, v in group.items():
                stack[-1][k] = stack[-1].get(k, 0.0) + v
            last = group
        else:
            if last is None:
                raise ValueError(f"formula {formula!r}: a count with nothing before it")
            n = float(count)
            if isinstance(last, str):
                stack[-1][last] += n - 1.0
            else:
                for k, v in last.items():
                    stack[-1][k] += v * (n - 1.0)
            last = None
    if len(stack) != 1:
        raise ValueError(f"formula {formula!r}: unbalanced '('")
    return stack[0]


@dataclasses.dataclass(frozen=True)
class MPRawVsExp:
    """Compounds with a raw MP formation energy and an experimental formation enthalpy (read-only arrays).

    Attributes:
      formulas: MP reduced formulas (the keys of ``calc_compounds``).  exp_formulas: as written in the
        experimental file (the formula unit of its enthalpy).  mpids: MP ids.
      elements: the element columns (every element in the compounds, ordered by Z).
      fractions: (n, n_elements) atomic fractions over ``elements`` (rows sum to 1).
      chemsys: chemical-system labels, elements sorted alphabetically and joined by "-" (pymatgen's
        ``chemical_system``), e.g. "Fe-O"; the groups to resample by.
      e_form_raw: raw MP formation energy, eV/atom (module docstring).
      e_form_exp: experimental standard formation enthalpy, eV/atom.
      exp_uncertainty: its uncertainty, eV/atom; NaN where the file gives none (0 in 5 entries, which
        pymatgen also treats as "not given").
      run_type: "GGA" or "GGA+U".  is_hubbard: True for GGA+U.  hubbards: U values (eV) per element.
      oxide_type: MP's label ("oxide", "peroxide", "superoxide", "hydroxide", "None").
      e_above_hull: MP's energy above hull stored with the entry, eV/atom.
      in_mp2020_fit: the compounds CorrectionCalculator's defaults keep for the MP2020 fit (relative
        experimental uncertainty ≤ 10 % (NaN passes), no polyanion of :data:`MP2020_FIT_POLYANIONS` in
        the formula, e_above_hull ≤ 0.1 eV/atom).
      elemental_energy: raw GGA energy per atom of each element's entry, eV/atom (aligned with ``elements``).
      counts: (n_exp_entries, n_calc_entries, n_elemental_entries) in the two files.
    """

    formulas: tuple[str, ...]
    exp_formulas: tuple[str, ...]
    mpids: tuple[str, ...]
    elements: tuple[str, ...]
    fractions: np.ndarray
    chemsys: tuple[str, ...]
    e_form_raw: np.ndarray
    e_form_exp: np.ndarray
    exp_uncertainty: np.ndarray
    run_type: tuple[str, ...]
    is_hubbard: np.ndarray
    hubbards: tuple[dict[str, float], ...]
    oxide_type: tuple[str, ...]
    e_above_hull: np.ndarray
    in_mp2020_fit: np.ndarray
    elemental_energy: np.ndarray
    counts: tuple[int, int, int]

    def __len__(self) -> int:
        return len(self.formulas)

    @property
    def error(self) -> np.ndarray:
        """Raw MP minus experiment, eV/atom (positive: MP under-binds)."""
        return self.e_form_raw - self.e_form_exp


def _ro(x: Any, dtype: Any = np.float64) -> np.ndarray:
    a = np.array(x, dtype=dtype)
    a.setflags(write=False)
    return a


def _proportional(a: dict[str, float], b: dict[str, float]) -> bool:
    if set(a) != set(b):
        return False
    na, nb = sum(a.values()), sum(b.values())
    return all(math.isclose(a[k] / na, b[k] / nb, rel_tol=1e-9) for k in a)


def load_mp_raw_vs_exp() -> MPRawVsExp:
    """Load the raw-MP vs experiment set (module docstring; eV/atom throughout).

    Raises:
      DatasetUnavailable: pymatgen (which ships the two files) is not installed (``pip install pymatgen``).
    """
    calc_path = package_file("pymatgen", "analysis/compatibility/calc_compounds.json.gz", pip="pymatgen")
    exp_path = package_file("pymatgen", "analysis/compatibility/exp_compounds.json.gz", pip="pymatgen")
    calc: dict[str, dict[str, Any]] = read_json(calc_path)
    exp: list[dict[str, Any]] = read_json(exp_path)

    mu: dict[str, float] = {}
    by_id: dict[str, tuple[str, dict[str, Any]]] = {}
    for key, entry in calc.items():
        comp = {k: float(v) for k, v in entry["composition"].items() if float(v) > 0}
        if len(comp) == 1:
            (el, n), = comp.items()
            mu[el] = float(entry["energy"]) / n
        by_id[str(entry["entry_id"])] = (key, entry)

    rows = []
    for rec in exp:
        hit = by_id.get(str(rec["mpid"]))
        if hit is None:
            continue
        key, entry = hit
        comp = {k: float(v) for k, v in entry["composition"].items() if float(v) > 0}
        if len(comp) < 2 or not all(el in mu for el in comp):
            continue
        counts = parse_formula(rec["formula"])
        if not _proportional(counts, comp):
            continue  # the experimental formula does not describe this entry's compound
        rows.append((key, rec, entry, comp, sum(counts.values())))

    elements = tuple(sorted({el for _, _, _, comp, _ in rows for el in comp}, key=atomic_numbers.__getitem__))
    col = {el: j for j, el in enumerate(elements)}
    n = len(rows)
    frac = np.zeros((n, len(elements)))
    e_raw, e_exp, unc, ehull = (np.empty(n) for _ in range(4))
    for i, (_, rec, entry, comp, n_formula) in enumerate(rows):
        n_cell = sum(comp.values())
        for el, c in comp.items():
            frac[i, col[el]] = c / n_cell
        e_raw[i] = (float(entry["energy"]) - sum(c * mu[el] for el, c in comp.items())) / n_cell
        e_exp[i] = float(rec["exp energy"]) / n_formula
        u = rec.get("uncertainty")
        unc[i] = math.nan if u is None else float(u) / n_formula
        ehull[i] = float(entry["data"].get("e_above_hull", math.nan))

    formulas = tuple(r[0] for r in rows)
    exp_formulas = tuple(str(r[1]["formula"]) for r in rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(unc / e_exp)
    polyanion = np.array([any(p in f or p in g for p in MP2020_FIT_POLYANIONS)
                          for f, g in zip(formulas, exp_formulas, strict=True)], bool)
    # pymatgen: "relative uncertainty > max_error" excludes, so NaN passes; likewise e_above_hull
    fit = ~(rel > 0.1) & ~polyanion & ~(ehull > 0.1)
    params = [r[2]["parameters"] for r in rows]
    return MPRawVsExp(
        formulas=formulas,
        exp_formulas=exp_formulas,
        mpids=tuple(str(r[1]["mpid"]) for r in rows),
        elements=elements,
        fractions=_ro(frac),
        chemsys=tuple("-".join(sorted(r[3])) for r in rows),
        e_form_raw=_ro(e_raw),
        e_form_exp=_ro(e_exp),
        exp_uncertainty=_ro(unc),
        run_type=tuple(str(p.get("run_type", "")) for p in params),
        is_hubbard=_ro([bool(p.get("is_hubbard", False)) for p in params], bool),
        hubbards=tuple({k: float(v) for k, v in (p.get("hubbards") or {}).items()} for p in params),
        oxide_type=tuple(str(r[2]["data"].get("oxide_type", "None")) for r in rows),
        e_above_hull=_ro(ehull),
        in_mp2020_fit=_ro(fit, bool),
        elemental_energy=_ro([mu[el] for el in elements]),
        counts=(len(exp), len(calc), len(mu)),
    )
