"""The SEI stand-in set (Li–C–O–H–P–F), the set mechanism and supercells (host only: no compilation)."""

import numpy as np
import pytest
import spglib
from ase.build import bulk
from ase.formula import Formula
from ase.neighborlist import neighbor_list

from jaxcert.attacks import crystals
from jaxcert.attacks.sei import SEI

S3, S2 = 3**0.5, 2**0.5


def _a(label):
    return SEI[label].cellpar[0]


#: Expected shortest distance (Å) per element pair and its tolerance: geometric identities of the lattice where the
#: structure fixes them, otherwise textbook bond lengths (C–O in carbonate 1.28, P–O in phosphate 1.54, peroxide
#: O–O 1.55, C≡C 1.20–1.23, black-P P–P 2.22 ...).
NEIGHBOURS = {
    "li_bcc": {("Li", "Li"): (_a("li_bcc") * S3 / 2, 1e-9)},
    "li_fcc": {("Li", "Li"): (_a("li_fcc") / S2, 1e-9)},
    "graphite": {("C", "C"): (1.42, 0.01)},
    "graphite_3r": {("C", "C"): (_a("graphite_3r") / S3, 1e-9)},
    "lic6": {("C", "C"): (1.42, 0.03), ("C", "Li"): (2.33, 0.03)},
    "lic12": {("C", "C"): (1.42, 0.03), ("C", "Li"): (2.33, 0.03)},
    "li2c2": {("C", "C"): (1.226, 1e-3), ("C", "Li"): (2.05, 0.15)},
    "li2o": {("Li", "O"): (_a("li2o") * S3 / 4, 1e-9)},
    "li2o2": {("O", "O"): (1.55, 0.03), ("Li", "O"): (2.0, 0.1)},
    "lioh": {("H", "O"): (0.95, 0.05), ("Li", "O"): (1.96, 0.03)},
    "lif": {("F", "Li"): (_a("lif") / 2, 1e-9)},
    "lih": {("H", "Li"): (_a("lih") / 2, 1e-9)},
    "li2co3": {("C", "O"): (1.28, 0.02), ("Li", "O"): (1.93, 0.06)},
    "li3po4": {("O", "P"): (1.54, 0.03), ("Li", "O"): (1.95, 0.06)},
    "li3p": {("Li", "P"): (2.5, 0.06)},
    "lipf6": {("F", "P"): (1.60, 2e-3), ("F", "Li"): (2.02, 2e-3)},
    "diamond": {("C", "C"): (_a("diamond") * S3 / 4, 1e-9)},
    "co2": {("C", "O"): (1.16, 0.01)},
    "c2h2": {("C", "C"): (1.20, 1e-9), ("C", "H"): (1.06, 1e-9)},
    "black_p": {("P", "P"): (2.22, 0.01)},
}


def test_twenty_li_c_o_h_p_f_crystals():
    labels = crystals.names("sei")
    assert len(labels) == 20 == len(set(labels)) and set(labels) == set(NEIGHBOURS)
    for c in SEI.values():
        assert set(Formula(c.formula).count()) <= {"Li", "C", "O", "H", "P", "F"}, c.label
        assert c.source and len(c.cellpar) == 6
    # every element of the chemistry appears somewhere in the set
    elements = set().union(*(Formula(c.formula).count() for c in SEI.values()))
    assert elements == {"Li", "C", "O", "H", "P", "F"}


@pytest.mark.parametrize("label", list(NEIGHBOURS))
def test_sei_crystal(label):
    c = SEI[label]
    a = crystals.build(label)
    assert len(a) == c.reference_atoms
    assert Formula(a.get_chemical_formula()).reduce()[0] == Formula(c.formula).reduce()[0]
    ds = spglib.get_symmetry_dataset((a.cell[:], a.get_scaled_positions(), a.numbers), symprec=1e-3)
    assert ds.number == c.spacegroup
    i, j, d = neighbor_list("ijd", a, 4.0)
    assert d.min() > 0.7  # no overlapping atoms
    sym = np.array(a.get_chemical_symbols())
    pair = np.array(["-".join(sorted(p)) for p in zip(sym[i], sym[j], strict=True)])
    for (x, y), (expected, tol) in NEIGHBOURS[label].items():
        got = d[pair == f"{x}-{y}"].min()
        assert got == pytest.approx(expected, abs=tol), (label, x, y, got)
    assert "sei" in a.info["set"] and "not downloaded" in a.info["provenance"] and a.info["source"] == c.source


def test_sets_reach_both_tables():
    assert crystals.names() == crystals.names("mp2d") and len(crystals.names("mp2d")) == 20
    every = crystals.names("all")
    assert len(every) == 39 and every.count("graphite") == 1  # graphite belongs to both sets
    assert crystals.build("graphite").info["set"] == "mp2d,sei"
    assert crystals.build("srtio3").info["set"] == "mp2d"
    assert crystals.resolve("sei, li2o ,Si,srtio3") == [*crystals.names("sei"), "Si", "srtio3"]
    with pytest.raises(KeyError, match="unknown structure set"):
        crystals.names("licohpf")
    with pytest.raises(KeyError, match="unknown crystal"):
        crystals.build("li4c3")


def test_supercell():
    a = crystals.build("lif")
    s = crystals.supercell(a, 2)
    assert len(s) == 8 * len(a) and s.info["supercell"] == (2, 2, 2) and s.info["label"] == "lif"
    np.testing.assert_allclose(s.cell.lengths(), 2 * a.cell.lengths())
    assert crystals.supercell(a, (1, 2, 3)).info["supercell"] == (1, 2, 3)
    # min_length acts on plane spacings: graphite's in-plane spacing is a·√3/2, not a
    g = crystals.build("graphite")
    m = crystals.supercell(g, min_length=10.0).info["supercell"]
    a_g, c_g = g.cell.lengths()[0], g.cell.lengths()[2]
    assert m == (int(np.ceil(10 / (a_g * S3 / 2))), int(np.ceil(10 / (a_g * S3 / 2))), int(np.ceil(10 / c_g)))
    assert m[0] * a_g * S3 / 2 >= 10 > (m[0] - 1) * a_g * S3 / 2
    si = bulk("Si", cubic=True)
    assert crystals.supercell(si, min_length=si.cell[0, 0]).info["supercell"] == (1, 1, 1)  # exactly equal: no repeat
    assert len(crystals.SUPERCELL_REPEATS) == 8
    with pytest.raises(ValueError, match="exactly one"):
        crystals.supercell(a)
    with pytest.raises(ValueError, match=">= 1"):
        crystals.supercell(a, (1, 0, 1))
