"""The mp2d structure set: published crystal data of the study's 20 rebuilt crystals (docs/attacks.md §5).

Data only (no jaxcert imports): :class:`Crystal` and the cell helpers are shared with
:mod:`jaxcert.attacks.sei`; :mod:`jaxcert.attacks.crystals` builds and resolves them.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Crystal", "CRYSTALS", "cubic", "hexagonal"]


@dataclasses.dataclass(frozen=True)
class Crystal:
    """Published crystal data for one structure (Å, degrees, fractional Wyckoff representatives)."""

    label: str
    category: str
    formula: str
    mp_id: str
    reference_atoms: int
    spacegroup: int
    cellpar: tuple[float, float, float, float, float, float]
    symbols: tuple[str, ...]
    basis: tuple[tuple[float, float, float], ...]
    source: str


def cubic(a: float) -> tuple[float, ...]:
    """Cell parameters of a cubic cell of edge a (Å)."""
    return (a, a, a, 90.0, 90.0, 90.0)


def hexagonal(a: float, c: float) -> tuple[float, ...]:
    """Cell parameters of a hexagonal cell (a, c in Å)."""
    return (a, a, c, 90.0, 90.0, 120.0)


def _perovskite(label, A, B, X, a, mp, source, category="incipient_ferroelectric"):
    return Crystal(label, category, f"{A}{B}{X}3", mp, 5, 221, cubic(a), (B, A, X),
                   ((0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0, 0)), source)


def _tmd_2h(label, M, X, a, c, z, mp, source):
    return Crystal(label, "layered_vdw", f"{M}{X}2", mp, 6, 194, hexagonal(a, c), (M, X),
                   ((1 / 3, 2 / 3, 0.25), (1 / 3, 2 / 3, z)), source)


def _cdi2(label, M, X, a, c, z, mp, source):
    return Crystal(label, "layered_vdw", f"{M}{X}2", mp, 3, 164, hexagonal(a, c), (M, X),
                   ((0, 0, 0), (1 / 3, 2 / 3, z)), source)


_ZN_CN2_A = 5.9002
_C = 1.97 / (_ZN_CN2_A * 3**0.5)  # Zn–C 1.97 Å along [111]
_N = (1.97 + 1.15) / (_ZN_CN2_A * 3**0.5)

CRYSTALS: dict[str, Crystal] = {c.label: c for c in [
    Crystal("beta_cristobalite_sio2", "framework_cage", "SiO2", "mp-546794", 12, 122, (5.047, 5.047, 7.138, 90, 90, 90),
            ("Si", "O"), ((0, 0, 0), (0.0794, 0.25, 0.125)),
            "beta-cristobalite, I-42d: Wright & Leadbetter, Philos. Mag. 31, 1391 (1975); a_c = 7.138 A "
            "(Wyckoff, Crystal Structures vol. 1)"),
    Crystal("beta_quartz_sio2", "framework_cage", "SiO2", "mp-6922", 9, 180, hexagonal(4.9977, 5.4601), ("Si", "O"),
            ((0.5, 0, 0), (0.2072, 0.4144, 0.5)),
            "beta-quartz P6_222 at 848 K: Wright & Lehmann, J. Solid State Chem. 36, 371 (1981)"),
    Crystal("berlinite_alpo4", "framework_cage", "AlPO4", "mp-3955", 12, 152, hexagonal(4.9429, 10.9476),
            ("Al", "P", "O", "O"),
            ((0.4664, 0, 1 / 3), (0.4669, 0, 5 / 6), (0.4163, 0.2922, 0.3977), (0.4156, 0.2576, 0.8837)),
            "alpha-berlinite P3_121: Thong & Schwarzenbach, Acta Cryst. A35, 658 (1979) (18 atoms; see module note)"),
    Crystal("zn_cn2", "framework_cage", "Zn(CN)2", "mp-5245", 10, 215, cubic(_ZN_CN2_A), ("Zn", "Zn", "C", "N"),
            ((0, 0, 0), (0.5, 0.5, 0.5), (_C, _C, _C), (_N, _N, _N)),
            "Zn(CN)2 ordered P-43m model, a = 5.9002 A: Williams, Partin, Lundberg & Kirkpatrick, Phys. Chem. Miner. "
            "(1997) / Goodwin et al., Phys. Rev. B 71, 140301 (2005); C, N from typical bond lengths (module note)"),
    Crystal("scf3", "framework_cage", "ScF3", "mp-10694", 4, 221, cubic(4.0262), ("Sc", "F"),
            ((0, 0, 0), (0.5, 0, 0)), "ScF3 ReO3-type: Greve et al., J. Am. Chem. Soc. 132, 15496 (2010), 300 K"),
    Crystal("reo3", "framework_cage", "ReO3", "mp-190", 4, 221, cubic(3.7477), ("Re", "O"),
            ((0, 0, 0), (0.5, 0, 0)), "ReO3: Jorgensen, Jorgensen, Batlogg et al., Phys. Rev. B 33, 4793 (1986)"),
    Crystal("graphite", "layered_vdw", "C", "mp-48", 4, 194, hexagonal(2.4612, 6.7079), ("C", "C"),
            ((0, 0, 0.25), (1 / 3, 2 / 3, 0.25)), "Bernal graphite: Trucano & Chen, Nature 258, 136 (1975)"),
    Crystal("h_bn", "layered_vdw", "BN", "mp-984", 4, 194, hexagonal(2.504, 6.661), ("B", "N"),
            ((1 / 3, 2 / 3, 0.25), (1 / 3, 2 / 3, 0.75)), "h-BN: Pease, Acta Cryst. 5, 356 (1952)"),
    _tmd_2h("mos2_2h", "Mo", "S", 3.1604, 12.295, 0.621, "mp-2815",
            "2H-MoS2: Schoenfeld, Huang & Moss, Acta Cryst. B39, 404 (1983)"),
    _tmd_2h("ws2_2h", "W", "S", 3.153, 12.323, 0.622, "mp-224",
            "2H-WS2: Schutte, de Boer & Jellinek, J. Solid State Chem. 70, 207 (1987)"),
    _tmd_2h("mose2_2h", "Mo", "Se", 3.289, 12.927, 0.621, "mp-1634",
            "2H-MoSe2: Bronsema, de Boer & Jellinek, Z. Anorg. Allg. Chem. 540, 15 (1986)"),
    _tmd_2h("wse2_2h", "W", "Se", 3.282, 12.960, 0.621, "mp-1821",
            "2H-WSe2: Schutte, de Boer & Jellinek, J. Solid State Chem. 70, 207 (1987)"),
    _cdi2("sns2", "Sn", "S", 3.6486, 5.8992, 0.25, "mp-1170", "SnS2 (CdI2 type, 2H): Hazen & Finger, Am. Mineral. "
          "63, 289 (1978)"),
    _cdi2("zrs2", "Zr", "S", 3.662, 5.813, 0.25, "mp-1186", "ZrS2 (CdI2 type): McTaggart & Wadsley, Aust. J. Chem. "
          "11, 445 (1958)"),
    _perovskite("srtio3", "Sr", "Ti", "O", 3.905, "mp-5229", "SrTiO3 cubic, room temperature (e.g. Abramov et al., "
                "Acta Cryst. B51, 942 (1995))"),
    _perovskite("ktao3", "K", "Ta", "O", 3.9885, "mp-3614", "KTaO3 cubic: Zhurova et al., Acta Cryst. B56, 594 (2000)"),
    _perovskite("bazro3", "Ba", "Zr", "O", 4.193, "mp-3834", "BaZrO3 cubic: Akbarzadeh et al., Phys. Rev. B 72, "
                "205104 (2005)"),
    _perovskite("bahfo3", "Ba", "Hf", "O", 4.1712, "mp-998552", "BaHfO3 cubic: Maekawa, Kurosaki & Yamanaka, "
                "J. Alloys Compd. 407, 44 (2006)"),
    _perovskite("cspbbr3", "Cs", "Pb", "Br", 5.874, "mp-600089", "alpha-CsPbBr3 (cubic, above 403 K): Moller, "
                "Nature 182, 1436 (1958)", "molecular_orientational"),
    _perovskite("cspbi3", "Cs", "Pb", "I", 6.2894, "mp-1069538", "alpha-CsPbI3 (cubic, 634 K): Trots & Myagkota, "
                "J. Phys. Chem. Solids 69, 2520 (2008)", "molecular_orientational"),
]}
