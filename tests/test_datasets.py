"""Offline reference data sets (docs/datasets.md): each loader against an independent reader of the same
files (ASE's Collection, pymatgen's own classes), published constants, and known-answer refits."""

import gzip
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import jaxcert.datasets as ds
from jaxcert.datasets import DatasetUnavailable, _files
from jaxcert.datasets._mp_raw_vs_exp import parse_formula
from jaxcert.datasets._units import parse_pressure

NAMES = {"dcdft", "mp-raw-vs-exp", "mp2020-corrections", "aflow-prototypes", "experimental-moduli",
         "ase-reference-states"}


# ------------------------------------------------------------------------------------------ registry
def test_registry_lists_every_loader_and_rejects_unknown_names():
    assert NAMES <= set(ds.names())
    assert all(ds.names()[n] for n in NAMES)
    with pytest.raises(KeyError, match="unknown dataset 'nope'"):
        ds.get("nope")


_NO_PYMATGEN = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pymatgen" or name.startswith("pymatgen."):
            raise ImportError("pymatgen blocked")
sys.meta_path.insert(0, Block())
import jaxcert.datasets as ds, jaxcert.controls
assert not any(k == "pymatgen" or k.startswith("pymatgen.") for k in sys.modules)
try:
    ds.get("mp-raw-vs-exp")
except ds.DatasetUnavailable as err:
    print("unavailable:", err)
"""


def test_imports_without_pymatgen_and_names_it_when_needed():
    res = subprocess.run([sys.executable, "-c", _NO_PYMATGEN], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "unavailable:" in res.stdout and "pip install pymatgen" in res.stdout


@pytest.mark.parametrize("name,pip", [("dcdft", "pip install ase"), ("mp-raw-vs-exp", "pip install pymatgen"),
                                      ("mp2020-corrections", "pip install pymatgen"),
                                      ("aflow-prototypes", "pip install pymatgen"),
                                      ("experimental-moduli", "pip install pymatgen")])
def test_missing_package_raises_dataset_unavailable_naming_it(monkeypatch, name, pip):
    monkeypatch.setattr(_files, "package_roots", lambda package: [])
    with pytest.raises(DatasetUnavailable, match=pip):
        ds.get(name)


def test_missing_file_in_an_installed_package_is_unavailable_not_a_crash():
    with pytest.raises(DatasetUnavailable, match="does not ship"):
        _files.package_file("ase", "collections/no_such_collection.json")
    assert _files.package_file("ase", "collections/dcdft.json").is_file()


# ------------------------------------------------------------------------------------------ dcdft
def test_dcdft_matches_ase_collection_and_published_wien2k_values():
    from ase.collections import dcdft as coll

    d = ds.get("dcdft")
    assert len(d) == 71 and len(set(d.symbols)) == 71
    assert int(d.has_exp.sum()) == 58
    assert list(d.symbols) == coll.names
    for i, sym in enumerate(d.symbols):  # every value as ASE's own Collection reader gives it
        ref = coll.data[sym]
        assert (d.v0[i], d.b0[i], d.b1[i]) == (ref["wien2k_volume"], ref["wien2k_B"], ref["wien2k_Bp"])
        assert d.has_exp[i] == ("exp_volume" in ref)
        if d.has_exp[i]:
            assert (d.exp_v0[i], d.exp_b0[i], d.exp_b1[i]) == (ref["exp_volume"], ref["exp_B"], ref["exp_Bp"])
        else:
            assert np.isnan([d.exp_v0[i], d.exp_b0[i], d.exp_b1[i]]).all()
        atoms = coll[sym]
        np.testing.assert_array_equal(d.atoms[i].get_positions(), atoms.get_positions())
        np.testing.assert_array_equal(d.atoms[i].get_initial_magnetic_moments(), atoms.get_initial_magnetic_moments())
    # units: the Δ project's published WIEN2k Cu (11.951 Å³/atom, 141.3 GPa) and Al (16.480, 78.1 GPa)
    cu, al = d["Cu"], d["Al"]
    assert cu.v0 == pytest.approx(11.951, abs=1e-3) and cu.b0 == pytest.approx(141.3, abs=0.1)
    assert al.v0 == pytest.approx(16.480, abs=1e-3) and al.b0 == pytest.approx(78.1, abs=0.1)
    assert cu.has_exp and not d["O"].has_exp
    # spin set-up of the protocol: Fe ferromagnetic, Cr antiferromagnetic
    assert (d["Fe"].atoms.get_initial_magnetic_moments() > 0).all()
    assert d["Cr"].atoms.get_initial_magnetic_moments().sum() == 0
    with pytest.raises(ValueError):
        d.v0[0] = 1.0  # read-only arrays


def test_dcdft_at_v0_scales_volume_not_shape():
    d = ds.get("dcdft")
    a = d.at_v0("Zn")
    assert a.get_volume() / len(a) == pytest.approx(d["Zn"].v0, rel=1e-12)
    np.testing.assert_allclose(a.get_scaled_positions(), d.atoms[d.index("Zn")].get_scaled_positions(), atol=1e-12)
    c0, c1 = d.atoms[d.index("Zn")].cell.cellpar(), a.cell.cellpar()
    assert c1[2] / c1[0] == pytest.approx(c0[2] / c0[0], rel=1e-12)  # c/a kept
    with pytest.raises(ValueError, match="v0"):
        d.at_v0("Zn", v0=-1.0)
    with pytest.raises(KeyError, match="Fr"):
        d["Fr"]


# ------------------------------------------------------------------------------------------ formulas
def test_parse_formula_known_answers_and_errors():
    assert parse_formula("Ca3(PO4)2") == {"Ca": 3, "P": 2, "O": 8}
    assert parse_formula("K4(Fe(CN)6)") == {"K": 4, "Fe": 1, "C": 6, "N": 6}
    assert parse_formula("Fe2.5O") == {"Fe": 2.5, "O": 1}
    assert parse_formula("CaMg(CO3)2") == {"Ca": 1, "Mg": 1, "C": 2, "O": 6}
    for bad in ("Xx2", "Fe(O", "FeO)", "2Fe", "Fe-O", ""):
        with pytest.raises(ValueError, match="formula"):
            parse_formula(bad)


def test_parse_formula_agrees_with_pymatgen_on_every_experimental_formula():
    Composition = pytest.importorskip("pymatgen.core").Composition
    path = _files.package_file("pymatgen", "analysis/compatibility/exp_compounds.json.gz")
    formulas = [r["formula"] for r in _files.read_json(path)]
    assert len(formulas) == 2135
    for f in formulas:
        ref = {str(k): float(v) for k, v in Composition(f).items()}
        assert parse_formula(f) == pytest.approx(ref), f


# ------------------------------------------------------------------------------------------ MP raw vs exp
def _mp2020_design(m):
    """CorrectionCalculator's design: one column per species, atomic fractions (oxide types split by MP's label)."""
    species = "oxide peroxide superoxide S F Cl Br I N Se Si Sb Te V Cr Mn Fe Co Ni W Mo H".split()
    col = {e: j for j, e in enumerate(m.elements)}
    ox = np.array(m.oxide_type)
    X = np.stack([np.where(ox == s, m.fractions[:, col["O"]], 0.0) if s in ("oxide", "peroxide", "superoxide")
                  else m.fractions[:, col[s]] for s in species], axis=1)
    return species, X


def test_mp_raw_vs_exp_refit_reproduces_published_mp2020_constants():
    """Weighted least squares of exp − raw on the MP2020 fit set recovers every constant of
    MP2020Compatibility.yaml to its 3-decimal rounding; the unweighted fit (a broken protocol) does not."""
    m, c = ds.get("mp-raw-vs-exp"), ds.get("mp2020-corrections")
    species, X = _mp2020_design(m)
    sel = m.in_mp2020_fit
    y = (m.e_form_exp - m.e_form_raw)[sel]
    sig = np.where(m.exp_uncertainty == 0, np.nan, m.exp_uncertainty)[sel]
    sig = np.where(np.isnan(sig), np.nanmean(sig), sig)  # pymatgen: missing uncertainty -> the mean
    beta = np.linalg.lstsq(X[sel] / sig[:, None], y / sig, rcond=None)[0]
    published = {**c.composition, **c.u_mixing["O"]}
    dev = np.array([beta[j] - published[s] for j, s in enumerate(species)])
    assert np.max(np.abs(dev)) <= 5e-4 + 1e-9
    unweighted = np.linalg.lstsq(X[sel], y, rcond=None)[0]
    assert np.max(np.abs(unweighted - [published[s] for s in species])) > 0.05


def test_mp_raw_vs_exp_structure_and_units():
    m = ds.get("mp-raw-vs-exp")
    assert m.counts == (2135, 423, 89)
    assert len(m) == 334 and len(set(m.mpids)) == 334
    np.testing.assert_allclose(m.fractions.sum(axis=1), 1.0, atol=1e-12)
    assert m.fractions.shape == (334, len(m.elements)) and (m.fractions.sum(axis=0) > 0).all()
    for f, sysl, row in zip(m.formulas, m.chemsys, m.fractions, strict=True):
        present = [e for e, x in zip(m.elements, row, strict=True) if x > 0]
        assert sysl == "-".join(sorted(present)) and set(parse_formula(f)) == set(present)
    i = m.formulas.index("Al2O3")
    raw = {r["mpid"]: r for r in _files.read_json(
        _files.package_file("pymatgen", "analysis/compatibility/exp_compounds.json.gz"))}
    assert m.e_form_exp[i] == raw[m.mpids[i]]["exp energy"] / 5  # eV per formula unit -> eV/atom
    # and near the handbook value, ΔHf(Al2O3, 298 K) = -1675.7 kJ/mol (NIST-JANAF; the file has -1668):
    # a per-formula-unit vs per-atom slip would be 5x off
    assert m.e_form_exp[i] == pytest.approx(-1675.7 / 96.485 / 5, rel=0.01)
    assert m.run_type[i] == "GGA" and m.oxide_type[i] == "oxide"
    j = m.formulas.index("Fe2O3")
    assert m.is_hubbard[j] and m.run_type[j] == "GGA+U" and m.hubbards[j]["Fe"] == pytest.approx(5.3)
    # raw GGA binds oxides too weakly: raw - exp > 0 on average for plain-GGA oxides (MP2020's O correction < 0)
    gga_ox = (np.array(m.oxide_type) == "oxide") & ~m.is_hubbard
    assert np.median(m.error[gga_ox]) > 0.3


def test_mp_raw_formation_energy_definition_on_raw_entries():
    """ΔE_f = (E − Σ n_el μ_el)/N with μ the raw energy per atom of each element's own entry (no corrections)."""
    m = ds.get("mp-raw-vs-exp")
    calc = _files.read_json(_files.package_file("pymatgen", "analysis/compatibility/calc_compounds.json.gz"))
    assert all(e["correction"] == 0 for e in calc.values())  # raw: nothing applied
    for f, refs in (("Al2O3", {"Al": "Al", "O": "O2"}), ("Fe2O3", {"Fe": "Fe", "O": "O2"}),
                    ("NaCl", {"Na": "Na", "Cl": "Cl2"})):
        e = calc[f]
        mu = {el: calc[k]["energy"] / sum(calc[k]["composition"].values()) for el, k in refs.items()}
        n = e["composition"]
        want = (e["energy"] - sum(n[el] * mu[el] for el in n)) / sum(n.values())
        assert m.e_form_raw[m.formulas.index(f)] == pytest.approx(want, abs=1e-12)


def test_mp2020_corrections_published_values_and_units():
    c = ds.get("mp2020-corrections")
    assert c.name == "MP2020"
    # Wang et al., Sci. Rep. 11, 15496 (2021), Table: oxide -0.687, Fe (GGA+U, oxides) -2.256 eV per atom
    assert c.composition["oxide"] == pytest.approx(-0.687) and c.u_mixing["O"]["Fe"] == pytest.approx(-2.256)
    assert c.u_mixing["O"] == c.u_mixing["F"] and set(c.u_mixing["O"]) == {"V", "Cr", "Mn", "Fe", "Co", "Ni", "W", "Mo"}
    assert set(c.composition) == set(c.composition_uncertainty)
    assert c.anion_constants()["O"] == c.composition["oxide"]
    assert c.anion_constants("peroxide")["O"] == c.composition["peroxide"]
    assert c.element_of("superoxide") == "O" and c.element_of("Cl") == "Cl"
    with pytest.raises(ValueError, match="oxide_type"):
        c.anion_constants("S")


# ------------------------------------------------------------------------------------------ AFLOW prototypes
def test_aflow_prototypes_match_pymatgen_structures():
    pytest.importorskip("pymatgen.core")
    from pymatgen.core import Structure

    p = ds.get("aflow-prototypes")
    raw = _files.read_json(_files.package_file("pymatgen", "analysis/prototypes/aflow_prototypes.json.gz"))
    assert len(p) == len(raw) == 288
    for proto, rec in zip(p, raw, strict=True):
        s = Structure.from_dict(rec["snl"])
        np.testing.assert_allclose(np.asarray(proto.atoms.get_cell()), s.lattice.matrix, atol=1e-12)
        np.testing.assert_allclose(proto.atoms.get_positions(), s.cart_coords, atol=1e-9)
        assert proto.atoms.get_chemical_symbols() == [sp.symbol for sp in s.species]
        assert proto.label == rec["tags"]["aflow"]


def test_aflow_all_metal_filter():
    Element = pytest.importorskip("pymatgen.core").Element

    from jaxcert.datasets._aflow_prototypes import SEED_NONMETALS

    p = ds.get("aflow-prototypes")
    metal = p.all_metal()
    kept = set(id(x) for x in metal)
    for proto in p:  # exactly the prototypes free of the seed's non-metals
        assert (id(proto) in kept) == (not SEED_NONMETALS.intersection(proto.elements))
    assert 0 < len(metal) < len(p)
    assert {"Cu"} in [set(x.elements) for x in metal] and "Sb" not in SEED_NONMETALS
    elems = {e for proto in p for e in proto.elements}
    strict = p.all_metal(nonmetals={e for e in elems if not Element(e).is_metal})
    assert all(all(Element(e).is_metal for e in x.elements) for x in strict)
    assert len(strict) < len(metal)  # pymatgen also counts Sb as a non-metal
    with pytest.raises(ValueError, match="Qq"):
        p.all_metal(nonmetals={"Qq"})


# ------------------------------------------------------------------------------------------ moduli
@pytest.mark.parametrize("value,unit,expected,note", [
    (170, "GPa", 170.0, ""), (170.0, "MPa", 0.17, ""), ("170 GPa", None, 170.0, ""), ("170GPa", None, 170.0, ""),
    ("1.7e2 GPa", None, 170.0, ""), ("1.7 x 10^2 GPa", None, 170.0, ""), ("1.7×10<sup>2</sup> GPa", None, 170.0, ""),
    ("(liquid)25 GPa", None, 25.0, "liquid"), ("ca. 30 GPa", None, 30.0, "approx"), ("2 Mbar", None, 200.0, ""),
    ("17 kbar", None, 1.7, ""), ("\u22125 GPa", None, -5.0, ""), ("45", "GPa", 45.0, ""), ("45 gpa", None, 45.0, ""),
])
def test_parse_pressure_reads_the_table_forms(value, unit, expected, note):
    q = parse_pressure(value, unit)
    assert q.value == pytest.approx(expected, rel=1e-12) and q.note == note


@pytest.mark.parametrize("value", [None, float("nan"), "no data GPa", "no data", "", "None", "N/A"])
def test_parse_pressure_missing_is_nan(value):
    assert math.isnan(parse_pressure(value, "GPa").value)


@pytest.mark.parametrize("value,unit,match", [("170 furlongs", None, "unknown pressure unit"), (170, None, "unit"),
                                              ("about GPa", None, "cannot read"), ("170", None, "no unit"),
                                              (True, "GPa", "boolean"), ([1], "GPa", "number or a string")])
def test_parse_pressure_rejects_what_it_cannot_read(value, unit, match):
    with pytest.raises(ValueError, match=match):
        parse_pressure(value, unit, what="X: field")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_experimental_moduli_match_pymatgen_element_api():
    pytest.importorskip("pymatgen.core")
    from pymatgen.core import Element

    mo = ds.get("experimental-moduli")
    for i, sym in enumerate(mo.symbols):
        el = Element(sym)
        for got, ref in ((mo.K[i], el.bulk_modulus), (mo.G[i], el.rigidity_modulus), (mo.E[i], el.youngs_modulus)):
            if ref is None:
                assert math.isnan(got)
            else:
                assert got == pytest.approx(float(ref), rel=1e-12), sym
    assert {s for s, f in zip(mo.symbols, mo.magnetic_3d, strict=True) if f} == {"V", "Cr", "Mn", "Fe", "Co", "Ni"}
    i = mo.symbols.index("Cu")
    assert mo.reference_symmetry[i] == "fcc" and mo.cubic()[i]


def test_experimental_moduli_isotropic_consistency_flags_suspect_entries():
    """E = 9KG/(3K+G) for an isotropic solid: the table is consistent (units read alike) except flagged entries."""
    mo = ds.get("experimental-moduli")
    r = mo.isotropic_young_ratio()
    ok = r[np.isfinite(r)]
    assert ok.size > 40 and abs(np.median(ok) - 1.0) < 0.02
    assert r[mo.symbols.index("Mo")] < 0.3  # tabulated G(Mo) = 20 GPa, about a sixth of the real value


def test_experimental_moduli_from_an_old_style_string_table(monkeypatch, tmp_path):
    from jaxcert.datasets import _moduli

    table = {"Fe": {"Atomic no": 26, "Bulk modulus": "170 GPa", "Rigidity modulus": "82 GPa",
                    "Youngs modulus": "211 GPa", "Poissons ratio": 0.29},
             "Hg": {"Atomic no": 80, "Bulk modulus": "(liquid)25 GPa", "Rigidity modulus": "no data GPa"},
             "Os": {"Atomic no": 76, "Bulk modulus": "no data GPa", "Shear modulus": "222 GPa"},
             "He": {"Atomic no": 2, "Bulk modulus": "no data GPa"}}
    path = tmp_path / "periodic_table.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(table, fh)
    monkeypatch.setattr(_moduli, "package_file", lambda *a, **k: path)
    mo = _moduli.load_experimental_moduli()
    assert mo.symbols == ("Fe", "Os", "Hg")
    assert (mo.K[0], mo.G[0], mo.E[0], mo.nu[0]) == (170.0, 82.0, 211.0, 0.29)
    assert math.isnan(mo.K[1]) and mo.G[1] == 222.0
    assert mo.K[2] == 25.0 and math.isnan(mo.G[2]) and "liquid" in mo.notes["Hg"]
    table["Fe"]["Bulk modulus"] = "170 parsecs"
    with gzip.open(path, "wt") as fh:
        json.dump(table, fh)
    with pytest.raises(ValueError, match="Fe: Bulk modulus"):
        _moduli.load_experimental_moduli()


def test_reference_states():
    from ase.data import reference_states

    rs = {r.symbol: r for r in ds.get("ase-reference-states")}
    assert rs["Cu"].symmetry == "fcc" and rs["Cu"].a == reference_states[29]["a"]
    assert rs["Fe"].magmom == reference_states[26]["magmom_per_atom"]
    cu = rs["Cu"].build()
    assert cu.get_volume() == pytest.approx(rs["Cu"].a ** 3 / 4)
    with pytest.raises(ValueError, match="diatom"):
        rs["H"].build()
