r"""A 20-crystal Li–C–O(–H–P–F) set, **standing in for the study's private LiCOHPF frames** (docs/attacks.md §5).

The study's second data set is 20 frames of a file ``20_licohpf.xyz`` that is
not public (drawn from the LiCOHPF database of Li et al. 2025, no selection rule
recorded).  Those frames cannot be reproduced.  This module ships a **different**
set with the same chemistry, chosen for its relevance to the solid–electrolyte
interphase (SEI) of a graphite/Li anode: Li metal, lithiated graphite and
carbides, the inorganic SEI salts (Li₂O, Li₂O₂, LiOH, LiF, LiH, Li₂CO₃,
Li₃PO₄, Li₃P), the electrolyte salt LiPF₆, and a few C/O/H/P reference
solids.  Results on this set are **not** comparable number-for-number with the
study's LiCOHPF results.

Every crystal is rebuilt with ``ase.spacegroup.crystal`` (through
:func:`jaxcert.attacks.crystals.build`, the same mechanism as the 2D set) from
published crystal data: space group, cell parameters (Å, degrees) and Wyckoff
representatives, with the source cited per entry (``Crystal.source``).

Provenance caveats, stated plainly:

* Values were **transcribed offline**, mostly from memory of the cited
  literature, without access to the original papers or a structure database to
  re-check them (β-Li₃PO₄ is the exception: its coordinates were read from the
  AMCSD record of Keffer et al. 1967).  Small transcription errors in the last
  digits are possible.  Each entry is checked in the tests for its spglib
  space group, atom count, formula and chemically sane first-neighbour distances
  (e.g. Li–F = a/2 in LiF, C–O ≈ 1.28 Å and O–C–O = 120° in Li₂CO₃).
* **Derived, not refined, coordinates** (like ``zn_cn2`` of the 2D set):

  - ``lipf6``: cell and Li/P sites are experimental; the F (18f) position is
    constructed from a regular PF₆ octahedron with P–F = 1.60 Å, rotated about c
    until Li–F = 2.02 Å (typical bond lengths, not the refined values);
  - ``li2c2``: cell experimental; C on 4i from the C≡C length 1.226 Å, Li on 4j
    at the idealised z = 1/4;
  - ``c2h2``: cubic (Pa-3) acetylene with the lattice parameter of the
    high-temperature phase; C and H on the ⟨111⟩ axes from C≡C = 1.20 Å and
    C–H = 1.06 Å;
  - ``lic12``: stage-2 LiC₁₂ with AA-stacked graphene layers 3.706 Å apart
    around the Li layer (the LiC₆ interlayer distance) in the reported cell.

* ``graphite`` is the same entry as in the 2D set (Bernal, P6₃/mmc).
* ``mp_id`` is empty for these entries (none were taken from the Materials
  Project); ``reference_atoms`` is the conventional-cell atom count built here.
"""

from __future__ import annotations

from jaxcert.attacks._mp2d import CRYSTALS, Crystal, cubic, hexagonal

__all__ = ["SEI"]

_S3 = 3**0.5

# LiPF6 (R-3, hexagonal axes): F 18f from P–F 1.60 Å (regular octahedron) and Li–F 2.02 Å (module note).
_LIPF6_F = (0.2936, 0.0724, 0.4270)
# Li2C2 (Immm): C 4i (0, 0, z), C≡C 1.226 Å along c.
_LI2C2_C = 0.5 - 1.226 / 2 / 5.434
# C2H2 (Pa-3, a = 6.14 Å): C and H on (x, x, x) from C≡C 1.20 Å and C–H 1.06 Å.
_C2H2_C = 1.20 / 2 / (_S3 * 6.14)
_C2H2_H = (1.20 / 2 + 1.06) / (_S3 * 6.14)
# LiC12 (P6/mmm): graphene layers at ±3.706/2 Å from the Li layer in c = 7.025 Å.
_LIC12_Z = 3.706 / 2 / 7.025


def _sei(label, category, formula, n, sg, cellpar, symbols, basis, source):
    return Crystal(label, category, formula, "", n, sg, cellpar, symbols, basis, source)


SEI: dict[str, Crystal] = {c.label: c for c in [
    _sei("li_bcc", "anode", "Li", 2, 229, cubic(3.5093), ("Li",), ((0, 0, 0),),
         "bcc Li at room temperature, a = 3.5093 A (Wyckoff, Crystal Structures vol. 1)"),
    _sei("li_fcc", "anode", "Li", 4, 225, cubic(4.404), ("Li",), ((0, 0, 0),),
         "fcc Li (cold-worked at 78 K), a = 4.404 A: Barrett, Acta Cryst. 9, 671 (1956)"),
    CRYSTALS["graphite"],
    _sei("graphite_3r", "anode", "C", 6, 166, hexagonal(2.456, 10.044), ("C",), ((0, 0, 1 / 6),),
         "rhombohedral (ABC) graphite, R-3m: Lipson & Stokes, Proc. R. Soc. A 181, 101 (1942)"),
    _sei("lic6", "anode", "LiC6", 7, 191, hexagonal(4.305, 3.706), ("Li", "C"), ((0, 0, 0), (1 / 3, 0, 0.5)),
         "stage-1 LiC6, P6/mmm (AaAa stacking): Guerard & Herold, Carbon 13, 337 (1975)"),
    _sei("lic12", "anode", "LiC12", 13, 191, hexagonal(4.288, 7.025), ("Li", "C"), ((0, 0, 0), (1 / 3, 0, _LIC12_Z)),
         "stage-2 LiC12, P6/mmm: cell from Billaud, Henry, Lelaurain & Willmann, J. Phys. Chem. Solids 57, 775 "
         "(1996); layer height from the LiC6 gallery (module note)"),
    _sei("li2c2", "anode", "Li2C2", 8, 71, (3.652, 4.831, 5.434, 90, 90, 90), ("Li", "C"),
         ((0.5, 0, 0.25), (0, 0, _LI2C2_C)),
         "Li2C2 (Immm): cell from Ruschewitz & Poettgen, Z. Anorg. Allg. Chem. 625, 1599 (1999); C from "
         "C-C 1.226 A, Li idealised (module note)"),
    _sei("li2o", "sei_inorganic", "Li2O", 12, 225, cubic(4.6114), ("O", "Li"), ((0, 0, 0), (0.25, 0.25, 0.25)),
         "Li2O antifluorite, 293 K: Farley, Hayes, Hull, Hutchings & Vrtis, J. Phys.: Condens. Matter 3, 4761 "
         "(1991)"),
    _sei("li2o2", "sei_inorganic", "Li2O2", 8, 194, hexagonal(3.142, 7.650), ("Li", "Li", "O"),
         ((0, 0, 0), (1 / 3, 2 / 3, 0.25), (1 / 3, 2 / 3, 0.852)),
         "Li2O2: Foeppl, Z. Anorg. Allg. Chem. 291, 12 (1957), in the P6_3/mmc symmetrisation of Cota & de la "
         "Mora, Acta Cryst. B61, 133 (2005)"),
    _sei("lioh", "sei_inorganic", "LiOH", 6, 129, (3.549, 3.549, 4.334, 90, 90, 90), ("Li", "O", "H"),
         ((0, 0, 0), (0, 0.5, 0.1941), (0, 0.5, 0.4078)),
         "LiOH, P4/nmm (origin choice 1): Dachs, Z. Kristallogr. 112, 60 (1959)"),
    _sei("lif", "sei_inorganic", "LiF", 8, 225, cubic(4.0263), ("Li", "F"), ((0, 0, 0), (0.5, 0.5, 0.5)),
         "LiF rock salt, 298 K, a = 4.0263 A (standard room-temperature value)"),
    _sei("lih", "sei_inorganic", "LiH", 8, 225, cubic(4.0834), ("Li", "H"), ((0, 0, 0), (0.5, 0.5, 0.5)),
         "LiH rock salt, room temperature, a = 4.0834 A (standard room-temperature value)"),
    _sei("li2co3", "sei_inorganic", "Li2CO3", 24, 15, (8.359, 4.973, 6.194, 90, 114.83, 90), ("Li", "C", "O", "O"),
         ((0.19719, 0.44845, 0.83632), (0, 0.06563, 0.25), (0, 0.32257, 0.25), (0.14626, -0.06361, 0.31364)),
         "Li2CO3 (zabuyelite), C2/c: Effenberger & Zemann, Z. Kristallogr. 150, 133 (1979)"),
    _sei("li3po4", "sei_inorganic", "Li3PO4", 16, 31, (6.115, 5.2394, 4.8554, 90, 90, 90),
         ("Li", "Li", "P", "O", "O", "O"),
         ((0.2481, 0.3277, 0.986), (0.5, 0.8428, 0.9893), (0, 0.8243, 0), (0.20777, 0.68676, 0.8961),
          (0, 0.1052, 0.9004), (0.5, 0.1814, 0.8172)),
         "beta-Li3PO4, Pmn2_1: Keffer, Mighell, Mauer, Swanson & Block, Inorg. Chem. 6, 119 (1967) (AMCSD 0012673)"),
    _sei("li3p", "sei_inorganic", "Li3P", 8, 194, hexagonal(4.273, 7.594), ("Li", "Li", "P"),
         ((0, 0, 0.25), (1 / 3, 2 / 3, 0.583), (1 / 3, 2 / 3, 0.25)),
         "Li3P, Na3As type (P6_3/mmc): Brauer & Zintl, Z. Phys. Chem. B37, 323 (1937); z(Li2) as in Na3As"),
    _sei("lipf6", "electrolyte_salt", "LiPF6", 24, 148, hexagonal(4.932, 12.658), ("Li", "P", "F"),
         ((0, 0, 0), (0, 0, 0.5), _LIPF6_F),
         "Li[PF6], R-3 (LiSbF6 type), a = 4.932, c = 12.658 A (Z. Naturforsch. B report of Li[PF6]/Li[AsF6] as "
         "Li[BiF6] isotypes); F constructed (module note)"),
    _sei("diamond", "reference", "C", 8, 227, cubic(3.56679), ("C",), ((0, 0, 0),),
         "diamond, 298 K: Straumanis & Aka, J. Am. Chem. Soc. 73, 5643 (1951)"),
    _sei("co2", "reference", "CO2", 12, 205, cubic(5.624), ("C", "O"), ((0, 0, 0), (0.1185, 0.1185, 0.1185)),
         "dry ice, Pa-3, 150 K: Simon & Peters, Acta Cryst. B36, 2750 (1980)"),
    _sei("c2h2", "reference", "C2H2", 16, 205, cubic(6.14), ("C", "H"),
         ((_C2H2_C,) * 3, (_C2H2_H,) * 3),
         "cubic acetylene (high-temperature phase), Pa-3, a = 6.14 A: Koski & Sandor, Acta Cryst. B31, 350 (1975); "
         "C, H from bond lengths (module note)"),
    _sei("black_p", "reference", "P", 8, 64, (3.3136, 10.478, 4.3763, 90, 90, 90), ("P",),
         ((0, 0.10168, 0.08056),), "black phosphorus, Cmce: Brown & Rundqvist, Acta Cryst. 19, 684 (1965)"),
]}
