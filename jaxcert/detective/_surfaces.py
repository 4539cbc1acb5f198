r"""Surface protocols: rigid desorption scans (docs/detective.md §2.2) and the adsorption-energy grid (§2.3).

Slabs are built with :mod:`ase.build` from the metal's reference state (fcc → (111), bcc → (110),
hcp → (0001); 2×2 surface cell, 3 layers, periodic in-plane, open along z), adsorbates placed on the ``ontop``
site with :func:`ase.build.add_adsorbate`, anchor atom down, at the covalent-radius sum above the top layer.
The slab is never relaxed (its atoms are fixed in every relaxation), so E(slab) and E(adsorbate + slab) share
one slab geometry.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcert.core.structure import Structure
from jaxcert.detective._observables import WALL_HEIGHT, Observable, force_energy_mismatch
from jaxcert.detective._protocols import Cell, Protocol, Variant, _rcov, supported

__all__ = ["ADSORBATES", "SurfaceConfig", "Desorption", "Adsorption", "slab_atoms", "surface_label", "site_name",
           "adsorbate_atoms", "placed", "desorption_metrics"]

#: Adsorbates: symbols and positions (Å) with the anchor atom (index 0) at the origin, the rest above it.
ADSORBATES: dict[str, tuple[tuple[str, ...], tuple[tuple[float, float, float], ...]]] = {
    "H": (("H",), ((0.0, 0.0, 0.0),)),
    "C": (("C",), ((0.0, 0.0, 0.0),)),
    "N": (("N",), ((0.0, 0.0, 0.0),)),
    "O": (("O",), ((0.0, 0.0, 0.0),)),
    "F": (("F",), ((0.0, 0.0, 0.0),)),
    "S": (("S",), ((0.0, 0.0, 0.0),)),
    "Cl": (("Cl",), ((0.0, 0.0, 0.0),)),
    "CO": (("C", "O"), ((0.0, 0.0, 0.0), (0.0, 0.0, 1.128))),
    "NO": (("N", "O"), ((0.0, 0.0, 0.0), (0.0, 0.0, 1.151))),
    "OH": (("O", "H"), ((0.0, 0.0, 0.0), (0.0, 0.0, 0.970))),
}


@dataclasses.dataclass(frozen=True)
class SurfaceConfig:
    """Settings shared by the surface protocols (docs/detective.md §2.2–2.3).

    Attributes:
      size: surface cell repeats and layers ((2, 2, 3)).
      vacuum: vacuum in Å on each side of the slab (the z axis is open; vacuum only defines the cell).
      adsorbates: the adsorbates of the adsorption grid; ``molecules`` those of the desorption scans.
      dz_step: rigid-scan step in Å (0.1; the scope probe halves it).
      dz_below: the scan starts this far below the covalent-sum height (0.4 Å).
      dz_max: scan length above the covalent-sum height in Å (6.0), raised to the committee cutoff + 1.5 Å.
      rise_threshold: a rise above the desorption asymptote larger than this is anomalous (0.05 eV).
      rise_floor: floor of the committee scale for the desorption z (0.02 eV).
      rise_limit: absolute criterion on the rise, eV (0.1: a violation whatever the committee says; the seed
        paper's DFT reference rises 0.022 eV on CO/Cu(111) where MACE-MPA-0 rises 0.209 eV, and a rigid scan
        overestimates a relaxed path's barrier, so the limit sits well above the reference's rise).
      asymptote_threshold, asymptote_floor, asymptote_limit: the dissociation limit |E(far) − E(slab) −
        E(molecule)| in eV (0.05, 0.02, 0.05: size consistency is exact).
      mismatch_threshold, mismatch_floor, mismatch_limit: force–energy mismatch along the scan, eV/Å (0.01, 0.005,
        0.05; exact: F_z on the molecule = −dE/dΔz).
      erel_threshold: E_rel above it is flagged (0.0 eV, the paper's flag).
      erel_floor: floor of the committee scale for the adsorption z (0.1 eV).
      fmax, max_steps: FIRE settings of the adsorbate relaxation (0.05 eV/Å, 200 steps; the scope probe
        uses 0.02 eV/Å and twice the steps, from a start 0.3 Å higher).
      z_min: z cut (3).
      reference: ``"isolated"`` (E(slab) + E(isolated adsorbate), the paper's; the fragments 10 Å apart for every
        model of a cell where any committee model cannot evaluate the isolated adsorbate) or ``"far"`` (always
        the fragments 10 Å apart).
      site: the adsorption site class: ``"ontop"`` (default), ``"bridge"`` (short bridge on bcc(110)),
        ``"longbridge"`` (bcc(110) only), ``"hollow"`` (fcc on (111), hcp on (0001), the hollow of bcc(110)).
      relax_slab: each model FIRE-relaxes the slab (every layer but the bottom one) before the rigid scan, so the
        molecule approaches that model's own relaxed surface (a nuisance variant; the default slab is
        bulk-terminated).
      contact_limit: a committee member more than this (eV) above its own desorption asymptote at the
        covalent-radius contact (Δz = 0) is no reference for the cell (1.0: chemistry binds there, or at most
        weakly repels; docs/detective.md §3.5).
      max_binding: a committee member that binds the molecule by more than this along the scan (eV) is no
        reference (5.0; molecular chemisorption energies on metals are 0.1–3 eV).
    """

    size: tuple[int, int, int] = (2, 2, 3)
    vacuum: float = 10.0
    adsorbates: tuple[str, ...] = ("H", "C", "N", "O", "F", "S", "CO", "OH")
    molecules: tuple[str, ...] = ("CO", "NO")
    dz_step: float = 0.1
    dz_below: float = 0.4
    dz_max: float = 6.0
    rise_threshold: float = 0.05
    rise_floor: float = 0.02
    rise_limit: float = 0.1
    asymptote_threshold: float = 0.05
    asymptote_floor: float = 0.02
    asymptote_limit: float = 0.05
    mismatch_threshold: float = 0.01
    mismatch_floor: float = 0.005
    mismatch_limit: float = 0.05
    erel_threshold: float = 0.0
    erel_floor: float = 0.1
    fmax: float = 0.05
    max_steps: int = 200
    z_min: float = 3.0
    reference: str = "isolated"
    site: str = "ontop"
    relax_slab: bool = False
    contact_limit: float = 1.0
    max_binding: float = 5.0


#: site class -> the ASE site name on each close-packed surface (None: the surface has no such site).
_SITES = {"fcc": {"ontop": "ontop", "bridge": "bridge", "longbridge": None, "hollow": "fcc"},
          "hcp": {"ontop": "ontop", "bridge": "bridge", "longbridge": None, "hollow": "hcp"},
          "bcc": {"ontop": "ontop", "bridge": "shortbridge", "longbridge": "longbridge", "hollow": "hollow"}}


def site_name(metal: str, site: str) -> str | None:
    """The ASE site name of the site class ``site`` on ``metal``'s close-packed surface (None if it has none)."""
    from ase.data import atomic_numbers, reference_states

    sym = (reference_states[atomic_numbers[metal]] or {}).get("symmetry")
    if site not in _SITES["fcc"]:
        raise ValueError(f"site: got {site!r}; allowed: {', '.join(_SITES['fcc'])}")
    return _SITES.get(sym, {}).get(site)


def slab_atoms(metal: str, cfg: SurfaceConfig = SurfaceConfig()) -> Any | None:
    """The metal's close-packed slab as ``ase.Atoms`` (pbc T, T, F), or None without an fcc/bcc/hcp reference."""
    from ase.build import bcc110, fcc111, hcp0001
    from ase.data import atomic_numbers, reference_states

    rs = reference_states[atomic_numbers[metal]] or {}
    sym = rs.get("symmetry")
    try:
        if sym == "fcc":
            return fcc111(metal, size=cfg.size, a=rs["a"], vacuum=cfg.vacuum)
        if sym == "bcc":
            return bcc110(metal, size=cfg.size, a=rs["a"], vacuum=cfg.vacuum)
        if sym == "hcp":
            return hcp0001(metal, size=cfg.size, a=rs["a"], c=rs["c/a"] * rs["a"], vacuum=cfg.vacuum)
    except Exception:  # noqa: BLE001 - ASE lacks data for some reference states
        return None
    return None


def surface_label(metal: str) -> str:
    from ase.data import atomic_numbers, reference_states

    sym = (reference_states[atomic_numbers[metal]] or {}).get("symmetry")
    return f"{metal}({ {'fcc': '111', 'bcc': '110', 'hcp': '0001'}.get(sym, '?') })".replace(" ", "")


def adsorbate_atoms(name: str) -> Any:
    """The isolated adsorbate (``ase.Atoms``, no cell, no pbc)."""
    from ase import Atoms

    syms, pos = ADSORBATES[name]
    return Atoms(symbols=list(syms), positions=np.asarray(pos, float))


def placed(metal: str, adsorbate: str, dz: float, cfg: SurfaceConfig = SurfaceConfig(), slab: Any = None
           ) -> Any | None:
    """Slab + adsorbate on the site ``cfg.site``, anchor ``dz`` Å above the covalent-radius-sum height over the
    top layer; ``slab`` (e.g. one a model relaxed) replaces the bulk-terminated one.  None when the surface has no
    such site or no reference structure."""
    from ase.build import add_adsorbate

    site = site_name(metal, cfg.site)
    slab = slab_atoms(metal, cfg) if slab is None else slab.copy()
    if slab is None or site is None:
        return None
    mol = adsorbate_atoms(adsorbate)
    h = _rcov(metal) + _rcov(mol.get_chemical_symbols()[0]) + dz
    add_adsorbate(slab, mol, height=h, position=site, mol_index=0)
    return slab


def _regions(metals_src: Sequence[str], ads: Sequence[str], committee: Any, cfg: SurfaceConfig) -> list[dict]:
    out = []
    for m in metals_src:
        if slab_atoms(m, cfg) is None:
            continue
        for a in ads:
            syms = [m, *ADSORBATES[a][0]]
            if supported(committee.target, syms):
                out.append({"metal": m, "adsorbate": a})
    return out


def _metals(elements: Sequence[str]) -> list[str]:
    from ase.data import atomic_numbers, reference_states

    return [e for e in elements if (reference_states[atomic_numbers[e]] or {}).get("symmetry") in ("fcc", "bcc", "hcp")]


def desorption_metrics(dz: np.ndarray, E: np.ndarray, Fz: np.ndarray | None = None,
                       separated: float | None = None) -> dict[str, float]:
    """Rigid-scan metrics (docs/detective.md §2.2): ``dz`` (Å) ends with the far point, ``E`` eV.

    ``rise`` = max over Δz beyond the scan's minimum of E(Δz) − E_far (the model's own desorption asymptote; > 0
    is a barrier), ``dz_rise`` its position measured from the minimum, ``binding`` = E_far − E_min,
    ``secondary_well``: the deepest minimum beyond the maximum, relative to E_far (0 if none), ``contact_energy``
    = E(Δz = 0) − E_far (the covalent-radius contact; a committee sanity check, docs/detective.md §3.5).  With ``Fz``
    (eV/Å, the force on the molecule along +z at each point) ``force_energy_mismatch`` (eV/Å, Simpson's rule under
    1 eV above the asymptote; :func:`~jaxcert.detective._observables.force_energy_mismatch`); with ``separated``
    (E(slab) + E(molecule), eV) ``asymptote_gap`` = |E_far − separated| (size consistency of the desorbed state).
    """
    dz, E = np.asarray(dz, float), np.asarray(E, float)
    keys = ("rise", "dz_rise", "binding", "secondary_well", "dz_min", "force_energy_mismatch", "dz_mismatch",
            "asymptote_gap", "contact_energy")
    if not np.all(np.isfinite(E)):
        return {k: float("nan") for k in keys}
    e = E[:-1] - E[-1]
    k0 = int(np.argmin(e))
    tail = e[k0:]
    k1 = int(np.argmax(tail))
    rise = float(max(tail[k1], 0.0))
    after = tail[k1:]
    sec = float(min(np.min(after), 0.0)) if after.size and rise > 0 else 0.0
    out = {"rise": rise, "dz_rise": float(dz[k0 + k1] - dz[k0]), "binding": float(-e[k0]),
           "secondary_well": sec, "dz_min": float(dz[k0])}
    # the scan starts near the bond, not inside a wall: check the whole path under the cap
    out["contact_energy"] = float(np.interp(0.0, dz[:-1], e))
    out["force_energy_mismatch"], out["dz_mismatch"] = force_energy_mismatch(dz[:-1], e, Fz, 0, WALL_HEIGHT)
    gap = float(abs(E[-1] - separated)) if separated is not None and math.isfinite(separated) else float("nan")
    out["asymptote_gap"] = gap
    return out


def desorption_observables(cfg: SurfaceConfig) -> tuple[Observable, ...]:
    """The desorption protocol's observables with the thresholds of ``cfg`` (docs/detective.md §2.2)."""
    return (
        Observable("rise", "rise", "eV", "largest rise above the model's own desorption asymptote beyond the scan's "
                   "minimum (a barrier above the desorbed state)", cfg.rise_threshold, cfg.rise_floor,
                   cfg.rise_limit, exact=False, weight=1.5,
                   paper="The headline finding: CO/Cu(111) rises +0.22 eV above the desorbed state in a rigid scan "
                         "(+0.209 eV on the CI-NEB path, DFT +0.022 eV); none of the committee ever exceeds its "
                         "asymptote; Pd(100)/NO +0.117, Pd(111)/NO +0.095, Pt(111)/NO +0.031 eV."),
        Observable("asymptote", "asymptote_gap", "eV", "|E(molecule far above the slab) − E(slab) − E(molecule)|: "
                   "the desorbed state's dissociation limit", cfg.asymptote_threshold, cfg.asymptote_floor,
                   cfg.asymptote_limit, exact=True, weight=1.0,
                   paper="'The dissociation limit (size consistency at large separation)' is one of the eight "
                         "constraints; the paper asks for criteria on 'unphysical dissociation limits'."),
        Observable("force_energy_mismatch", "force_energy_mismatch", "eV/Å", "largest |ΔE + ∫F_z dΔz|/ΔΔz along "
                   "the scan (F_z on the molecule = −dE/dΔz)", cfg.mismatch_threshold, cfg.mismatch_floor,
                   cfg.mismatch_limit, exact=True, weight=1.2,
                   paper="The mechanism probe of the U-block finding found 'consistent force–energy behavior'; "
                         "'force–energy inconsistencies' are among the relational failures a protocol exposes."),
    )


class _SurfaceBase(Protocol):
    def __init__(self, config: SurfaceConfig = SurfaceConfig()) -> None:
        self.config = config
        self.z_min = config.z_min

    def key(self, region: Mapping[str, Any]) -> str:
        return f"{surface_label(region['metal'])}/{region['adsorbate']}"

    def scope_of(self, cells: Sequence[Cell]) -> dict[str, Any]:
        pairs = sorted({(c.region["metal"], c.region["adsorbate"]) for c in cells})
        return {"pairs": [list(p) for p in pairs], "metals": sorted({p[0] for p in pairs}),
                "adsorbates": sorted({p[1] for p in pairs}),
                "elements": sorted({p[0] for p in pairs} | {s for p in pairs for s in ADSORBATES[p[1]][0]})}

    def in_scope(self, region: Mapping[str, Any], scope: Mapping[str, Any]) -> bool:
        # the block hypothesis: every flagged metal with every flagged adsorbate
        return region["metal"] in scope["metals"] and region["adsorbate"] in scope["adsorbates"]


class Desorption(_SurfaceBase):
    """Rigid desorption scans of a molecule from a slab along the surface normal (docs/detective.md §2.2).

    Observable: the maximum rise above the model's own desorption asymptote beyond the scan's minimum (eV).
    """

    name = "desorption"
    kind = "disagreement"
    importance = 0.9
    observable = "maximum rise above the model's own desorption asymptote along the rigid scan"
    unit = "eV"
    application = ("desorption kinetics and temperature-programmed desorption, sticking, and every rate that "
                   "crosses the desorption path (a spurious barrier of ΔE slows them by e^(ΔE/kT))")

    def __init__(self, config: SurfaceConfig = SurfaceConfig()) -> None:
        super().__init__(config)
        self.threshold = config.rise_threshold
        self.floor = config.rise_floor
        self.observables = desorption_observables(config)

    def regions(self, elements: Sequence[str], committee: Any) -> list[dict[str, Any]]:
        return _regions(_metals(elements), self.config.molecules, committee, self.config)

    def neighbourhood(self, scope: Mapping[str, Any], elements: Sequence[str], committee: Any) -> list[dict]:
        mols = sorted(set(self.config.molecules) | set(scope["adsorbates"]))
        return _regions(_metals(elements), mols, committee, self.config)

    def _grid(self, committee: Any, region: Mapping[str, Any], variant: str) -> np.ndarray:
        cfg = self.config
        probe = placed(region["metal"], region["adsorbate"], 0.0, cfg)
        cut = committee.cutoff(Structure.from_ase(probe, dtype=committee.dtype, min_distance=None)) or 0.0
        top = max(cfg.dz_max, cut + 1.5)
        step = cfg.dz_step / 2 if variant == "fine" else cfg.dz_step
        dz = np.arange(-cfg.dz_below, top + 1e-9, step)
        far = top + (4.0 if variant == "fine" else 2.0)
        return np.append(dz, far)

    def run(self, committee: Any, regions: Sequence[dict[str, Any]], variant: str = "screen") -> list[Cell]:
        cfg = self.config
        # a site the surface does not have (a long bridge on fcc(111)) gives no cell in that variant
        regions = [r for r in regions if placed(r["metal"], r["adsorbate"], 0.0, cfg) is not None]
        if not regions:
            return []
        metals = sorted({r["metal"] for r in regions})
        mols = sorted({r["adsorbate"] for r in regions})
        grids = [self._grid(committee, reg, variant) for reg in regions]
        n_models = len(committee.names)
        slabs = [{m: slab_atoms(m, cfg) for m in metals}] * n_models
        relaxed = np.ones(n_models)
        if cfg.relax_slab:
            slabs, relaxed = self._relaxed_slabs(committee, metals)

        def build(slab_of: Mapping[str, Any]) -> tuple[list[Structure], list[tuple[int, int]]]:
            structs, spans = [], []
            for reg, dz in zip(regions, grids, strict=True):
                k0 = len(structs)
                structs.extend(Structure.from_ase(placed(reg["metal"], reg["adsorbate"], float(d), cfg,
                                                         slab=slab_of[reg["metal"]]),
                                                  dtype=committee.dtype, min_distance=None) for d in dz)
                spans.append((k0, len(structs)))
            # the separated fragments of the desorbed state: the slab alone and the molecule alone
            structs += [Structure.from_ase(slab_of[m], dtype=committee.dtype) for m in metals]
            structs += [Structure.from_ase(adsorbate_atoms(a), dtype=committee.dtype, min_distance=None)
                        for a in mols]
            return structs, spans

        lists = [build(slabs[mi]) for mi in range(n_models)] if cfg.relax_slab else [build(slabs[0])] * n_models
        spans = lists[0][1]
        n_scan = spans[-1][1]
        E, F = committee.energies_forces_each([x[0] for x in lists])
        cells = []
        for reg, dz, (k0, k1) in zip(regions, grids, spans, strict=True):
            values, metrics, ys = {}, {}, {}
            n_ads = len(ADSORBATES[reg["adsorbate"]][0])
            i_s = n_scan + metals.index(reg["metal"])
            i_m = n_scan + len(metals) + mols.index(reg["adsorbate"])
            for mi, name in enumerate(committee.names):
                e = E[mi, k0:k1]
                fz = np.array([np.sum(F[mi][k][-n_ads:, 2]) if F[mi][k] is not None else np.nan
                               for k in range(k0, k1 - 1)])
                m = desorption_metrics(dz, e, fz, float(E[mi, i_s] + E[mi, i_m]))
                if cfg.relax_slab:
                    m["slab_relaxed"] = float(relaxed[mi])
                metrics[name], values[name] = m, m["rise"]
                ys[name] = (e[:-1] - e[-1]).tolist() if np.all(np.isfinite(e)) else []
            data = {"x": dz[:-1].tolist(), "y": ys, "xlabel": "Δz from the covalent-sum height (Å)",
                    "ylabel": f"E(Δz) − E(Δz = {dz[-1]:.1f} Å) (eV)"}
            cells.append(self.make_cell(dict(reg), values, metrics, committee.target_name, data, variant))
        return cells

    def _relaxed_slabs(self, committee: Any, metals: Sequence[str]) -> tuple[list[dict[str, Any]], np.ndarray]:
        """Each model's own relaxed slab per metal (FIRE, every layer but the bottom one free; ASE tags layers from
        the top, 1 = top): ([model] -> metal -> Atoms, whether every slab of that model converged)."""
        cfg = self.config
        base = {m: slab_atoms(m, cfg) for m in metals}
        structs = [Structure.from_ase(base[m], dtype=committee.dtype) for m in metals]
        movable = [(base[m].get_tags() < cfg.size[2]).astype(float) for m in metals]
        _, P, conv = committee.relax(structs, movable, fmax=cfg.fmax, max_steps=cfg.max_steps)
        out = []
        for mi in range(len(committee.names)):
            slabs = {}
            for k, m in enumerate(metals):
                a = base[m].copy()
                if P[mi][k] is not None:
                    a.set_positions(np.asarray(P[mi][k], float))
                slabs[m] = a
            out.append(slabs)
        return out, np.all(conv, axis=1).astype(float)

    def sanity(self, metrics: Mapping[str, float]) -> str | None:
        """A committee member is a reference for a desorption cell only when its own path is physical there
        (docs/detective.md §3.5): finite, no more than ``contact_limit`` eV above its asymptote at the
        covalent-radius contact, and a binding no deeper than ``max_binding``."""
        c = self.config
        if not math.isfinite(metrics.get("rise", float("nan"))):
            return "its path is not finite (or it refuses the geometry)"
        if metrics.get("contact_energy", 0.0) > c.contact_limit:
            return (f"it is {metrics['contact_energy']:.3g} eV above its own desorbed state at the covalent-radius "
                    f"contact (> {c.contact_limit:g} eV: the molecule is repelled where chemistry binds), minimum at "
                    f"Δz = {metrics.get('dz_min', float('nan')):+.2f} Å")
        if metrics.get("binding", 0.0) > c.max_binding:
            return f"it binds the molecule by {metrics['binding']:.3g} eV (> {c.max_binding:g} eV)"
        return None

    def variants(self) -> list[Variant]:
        """Lateral cell size and layer count (convergence variables), the other sites and each model's own relaxed
        slab (alternatives; docs/detective.md §4.6)."""
        c = self.config
        nx, ny, nl = c.size
        out = [Variant(f"{nx + 1}×{ny + 1} cell", "lateral size", True, {"size": (nx + 1, ny + 1, nl)}),
               Variant(f"{nl + 1} layers", "layers", True, {"size": (nx, ny, nl + 1)})]
        out += [Variant(f"{site} site", "site", False, {"site": site})
                for site in ("bridge", "longbridge", "hollow") if site != c.site]
        if not c.relax_slab:
            out.append(Variant("relaxed slab", "slab relaxation", False, {"relax_slab": True}))
        return out

    def not_varied(self) -> list[str]:
        return ["rigid scan: the molecule's bond length and orientation are fixed along the path (no relaxation, "
                "no tilt, no NEB; a relaxed path lies lower, so a rigid barrier is an upper bound of the relaxed "
                "one)",
                "one molecule per surface cell (the coverage is set by the cell)",
                "the slab is bulk-terminated except in the relaxed-slab variant",
                "no reference calculation (DFT) was run; the verdict is a human's"]

    def image_check(self, base: Cell, lateral: Cell, target: str, signal: float) -> dict[str, str]:
        """Members whose path E(Δz) − E_far changes between the base cell and the larger-cell variant by more than
        the target's signal (image interactions larger than the signal; docs/detective.md §3.5)."""
        out = {}
        xb, xl = np.asarray(base.data.get("x", []), float), np.asarray(lateral.data.get("x", []), float)
        for m, yb in base.data.get("y", {}).items():
            yl = lateral.data.get("y", {}).get(m)
            if m == target or not yb or not yl or xb.size == 0:
                continue
            shift = np.abs(np.asarray(yb, float) - np.interp(xb, xl, np.asarray(yl, float)))
            k = int(np.nanargmax(shift))
            if shift[k] > signal:
                out[m] = (f"its path changes by {shift[k]:.3g} eV at Δz = {xb[k]:+.2f} Å between the "
                          f"{base.variant} cell and the {lateral.variant} (image interactions larger than the "
                          f"signal, {signal:.3g} eV)")
        return out

    def statement(self, scope: Mapping[str, Any], observable: str | None = None) -> str:
        ads, met = ", ".join(scope["adsorbates"]), ", ".join(scope["metals"])
        if observable == "asymptote":
            return (f"the target's desorbed state of {ads} from {met} is not the sum of the separated slab and "
                    f"molecule (|E(far) − E(slab) − E(molecule)| > {self.config.asymptote_limit:g} eV): an unphysical "
                    "dissociation limit")
        if observable == "force_energy_mismatch":
            return (f"the target's forces on {ads} above {met} are not −dE/dΔz along the desorption path (mismatch > "
                    f"{self.config.mismatch_limit:g} eV/Å)")
        return (f"the target puts a spurious barrier (> {self.threshold:g} eV above its own asymptote) on the rigid "
                f"desorption path of {ads} from {met}, where the committee rises monotonically to the asymptote")

    def configurations(self, region: Mapping[str, Any], committee: Any, cell: Cell | None = None
                       ) -> list[tuple[str, Any]]:
        dz = self._grid(committee, region, "screen")
        pick = [dz[0], dz[-1]]
        if cell is not None:
            m = cell.metrics.get(committee.target_name, {})
            if math.isfinite(m.get("dz_min", float("nan"))):
                d0 = m["dz_min"]
                pick = [d0, d0 + m.get("dz_rise", 1.0) / 2, d0 + m.get("dz_rise", 1.0), d0 + 2 * m.get("dz_rise", 1.0),
                        dz[-1]]
        key = self.key(region).replace("/", "_")
        return [(f"{key}_dz{d:+.2f}A", placed(region["metal"], region["adsorbate"], float(d), self.config))
                for d in pick]

    def mechanism(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell],
                  observable: str | None = None) -> dict[str, Any]:
        """Shape of the target's path (docs/detective.md §2.2); for the asymptote and force observables, their
        numbers per cell and whether the barrier observable agrees."""
        t = committee.target_name
        if observable not in (None, "rise"):
            o = self.observable_named(observable)
            inside = [c for c in cells if self.in_scope(c.region, scope) and c.suspicious_in(observable)]
            rows = {c.key: {"value": c.metrics[t].get(o.metric), "rise": c.metrics[t].get("rise"),
                            "force_energy_mismatch": c.metrics[t].get("force_energy_mismatch"),
                            "asymptote_gap": c.metrics[t].get("asymptote_gap")} for c in inside}
            what = ("the desorbed state's energy differs from the separated slab + molecule, so the model's "
                    "dissociation limit depends on more than the fragments (a long-range or reference-energy "
                    "term)" if observable == "asymptote" else "the forces on the molecule do not integrate to "
                    "the energy along the path (a direct force head or a broken gradient)")
            return {"summary": f"{what}: " + "; ".join(f"{k}: {v['value']:.3g} {o.unit}" for k, v in rows.items())
                    + ".", "numbers": rows,
                    "confounds": ["grid resolution and asymptote placement: excluded (the scope probe halves the "
                                  "step and moves the far reference 2 Å further out)"]}
        inside = [c for c in cells if self.in_scope(c.region, scope) and c.suspicious_in("rise")]
        parts = [f"{c.key}: +{c.metrics[t]['rise']:.3f} eV at Δz ≈ {c.metrics[t]['dz_rise']:.2f} Å past the "
                 f"minimum, secondary well {c.metrics[t]['secondary_well']:.3f} eV" for c in inside]
        return {"summary": "Shape of the target's path: " + ("; ".join(parts) or "no in-scope anomaly") + ".",
                "numbers": {c.key: c.metrics[t] for c in inside},
                "confounds": ["grid resolution and asymptote placement: excluded (the scope probe halves the step "
                              "and moves the far reference 2 Å further out)"]}

    def impact(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell],
               observable: str | None = None) -> dict[str, Any]:
        """Arrhenius factor of the spurious barrier at 300 K (docs/detective.md §2.2); for the asymptote, the error
        it puts into every desorption and adsorption energy; for the forces, what force-driven runs see."""
        from ase.units import kB

        t = committee.target_name
        if observable not in (None, "rise"):
            o = self.observable_named(observable)
            inside = [c for c in cells if self.in_scope(c.region, scope) and c.suspicious_in(observable)]
            vals = {c.key: c.metrics[t].get(o.metric) for c in inside}
            if observable == "asymptote":
                summary = ("Every desorption and adsorption energy referenced to the separated fragments inherits "
                           "the gap: " + "; ".join(f"{k}: {v:.3g} eV" for k, v in vals.items()) + ".")
                boundary = ("Where it does not matter: energy differences between bound configurations on the same "
                            "surface (diffusion barriers, site preferences) cancel it.")
            else:
                summary = ("Forces that are not −∇E along the desorption path do net work: MD of desorption and "
                           "sticking heats or cools the molecule; largest mismatch " + "; ".join(
                               f"{k}: {v:.2g} eV/Å" for k, v in vals.items()) + ".")
                boundary = ("Where it does not matter: single-point adsorption energies (energies only) are "
                            "untouched.")
            return {"summary": summary, "boundary": boundary, "numbers": {o.metric: vals}, "evals": 0}
        inside = [c for c in cells if self.in_scope(c.region, scope) and c.suspicious_in("rise")]
        kT = kB * 300.0
        rates = {c.key: math.exp(-c.metrics[t]["rise"] / kT) for c in inside}
        binding = {c.key: {n: c.metrics[n].get("binding") for n in committee.names} for c in inside}
        summary = ("At 300 K the spurious barrier slows desorption along this path by " +
                   "; ".join(f"{k}: ×{v:.2g}" for k, v in rates.items()) + " (Arrhenius factor e^(−ΔE/kT) of the "
                   "rigid-scan rise ΔE alone: no prefactor, no entropy or zero-point term, and a relaxed path lies "
                   "lower, so along it the factor is closer to 1). Binding along the rigid path, every model: " +
                   "; ".join(f"{k}: " + ", ".join(f"{n} {b:.3g} eV" for n, b in v.items() if b is not None)
                             for k, v in binding.items()) + ".")
        boundary = ("Where it does not matter: the adsorption minimum itself (the benchmark quantity) is untouched "
                    "by the rise beyond it, so single-point adsorption energies and low-coverage MD near the minimum "
                    "do not see it.")
        return {"summary": summary, "boundary": boundary, "numbers": {"rate_factor_300K": rates, "binding": binding},
                "evals": 0}


class Adsorption(_SurfaceBase):
    """E_rel = E(adsorbate + slab, relaxed) − E(slab) − E(isolated adsorbate) over a metal × adsorbate grid.

    docs/detective.md §2.3.  Flagged when E_rel > 0 (the relaxed system lies above its separated fragments).
    The adsorbate is FIRE-relaxed with the slab fixed; the isolated adsorbate is relaxed alone (no cell).  A
    cell where some model cannot evaluate the isolated adsorbate (a graph network on a single atom) references
    every model to the fragments 10 Å apart instead, so all share one reference (``far_reference`` 1).
    """

    name = "adsorption"
    kind = "disagreement"
    importance = 1.0
    observable = "E_rel = E(adsorbate+slab, relaxed) − E(slab) − E(isolated adsorbate, relaxed)"
    unit = "eV"
    application = ("heterogeneous catalysis: adsorption energies, coverage and reaction thermodynamics on the "
                   "affected surfaces")

    def __init__(self, config: SurfaceConfig = SurfaceConfig()) -> None:
        super().__init__(config)
        self.threshold = config.erel_threshold
        self.floor = config.erel_floor

    def regions(self, elements: Sequence[str], committee: Any) -> list[dict[str, Any]]:
        return _regions(_metals(elements), self.config.adsorbates, committee, self.config)

    def neighbourhood(self, scope: Mapping[str, Any], elements: Sequence[str], committee: Any) -> list[dict]:
        ads = sorted(set(self.config.adsorbates) | set(scope["adsorbates"]))
        return _regions(_metals(elements), ads, committee, self.config)

    def run(self, committee: Any, regions: Sequence[dict[str, Any]], variant: str = "screen") -> list[Cell]:
        cfg = self.config
        fine = variant == "fine"
        dz0 = 0.3 if fine else 0.0
        fmax, steps = (0.02, 2 * cfg.max_steps) if fine else (cfg.fmax, cfg.max_steps)
        metals = sorted({r["metal"] for r in regions})
        ads = sorted({r["adsorbate"] for r in regions})
        slabs = [Structure.from_ase(slab_atoms(m, cfg), dtype=committee.dtype) for m in metals]
        combined, movable = [], []
        for r in regions:
            atoms = placed(r["metal"], r["adsorbate"], dz0, cfg)
            n_ads = len(ADSORBATES[r["adsorbate"]][0])
            mov = np.zeros(len(atoms))
            mov[-n_ads:] = 1.0
            combined.append(Structure.from_ase(atoms, dtype=committee.dtype, min_distance=None))
            movable.append(mov)
        far = [Structure.from_ase(placed(r["metal"], r["adsorbate"], 10.0, cfg), dtype=committee.dtype)
               for r in regions]
        mols = [Structure.from_ase(adsorbate_atoms(a), dtype=committee.dtype, min_distance=None) for a in ads]
        E_slab = committee.energies(slabs)
        E_far = committee.energies(far)
        E_mol, _, _ = committee.relax(mols, [np.ones(s.n_atoms) for s in mols], fmax=fmax, max_steps=steps)
        E_ads, P, conv = committee.relax(combined, movable, fmax=fmax, max_steps=steps)
        cells = []
        for k, r in enumerate(regions):
            i_s, i_m = metals.index(r["metal"]), ads.index(r["adsorbate"])
            values, metrics = {}, {}
            for mi, name in enumerate(committee.names):
                erel = E_ads[mi, k] - E_slab[mi, i_s] - E_mol[mi, i_m]
                size_gap = E_far[mi, k] - E_slab[mi, i_s] - E_mol[mi, i_m]
                far_ref = cfg.reference == "far" or not np.all(np.isfinite(E_mol[:, i_m]))
                if far_ref:  # some model cannot evaluate the isolated adsorbate (a graph net on one atom): every
                    erel = E_ads[mi, k] - E_far[mi, k]  # model is referenced to the fragments 10 Å apart
                values[name] = float(erel)
                metrics[name] = {"E_rel": float(erel), "E_rel_vs_far": float(E_ads[mi, k] - E_far[mi, k]),
                                 "far_reference": float(far_ref),
                                 "size_consistency_gap": float(size_gap), "converged": float(conv[mi, k]),
                                 "anchor_height": float(P[mi][k][-len(ADSORBATES[r['adsorbate']][0]), 2]
                                                        - np.max(np.asarray(slabs[i_s].positions)[:, 2]))
                                 if P[mi][k] is not None else float("nan")}
            cells.append(self.make_cell(dict(r), values, metrics, committee.target_name, {}, variant))
        return cells

    def statement(self, scope: Mapping[str, Any]) -> str:
        return (f"the target puts relaxed {', '.join(scope['adsorbates'])} on {', '.join(scope['metals'])} above the "
                "separated fragments (E_rel > 0) where the committee binds them, and only in that block")

    def configurations(self, region: Mapping[str, Any], committee: Any, cell: Cell | None = None
                       ) -> list[tuple[str, Any]]:
        key = self.key(region).replace("/", "_").replace("(", "").replace(")", "")
        out = [(f"{key}_combined_start", placed(region["metal"], region["adsorbate"], 0.0, self.config)),
               (f"{key}_slab", slab_atoms(region["metal"], self.config))]
        mol = adsorbate_atoms(region["adsorbate"])
        mol.set_cell([15.0, 15.0, 15.0])
        mol.center()
        out.append((f"{key}_isolated_{region['adsorbate']}", mol))
        return out

    def mechanism(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, Any]:
        t = committee.target_name
        inside = [c for c in cells if self.in_scope(c.region, scope) and c.suspicious]
        gaps = [abs(c.metrics[t]["size_consistency_gap"]) for c in inside]
        worst = max(gaps, default=float("nan"))
        summary = (f"Size consistency of the reference: |E(far) − E(slab) − E(adsorbate)| <= {worst:.3g} eV on the "
                   "flagged cells, " + ("so the anomaly is in the bound state, not in the separated-fragment "
                                        "reference." if worst < 0.05 else
                                        "so part of the anomaly sits in the dissociation limit itself."))
        confounds = []
        if worst < 0.05:
            confounds.append("an inconsistent separated-fragment reference: excluded (far-separated energies match "
                             "the sum of the fragments)")
        confounds.append("an unconverged relaxation: excluded (the scope probe relaxes again from 0.3 Å higher, to "
                         "0.02 eV/Å)")
        return {"summary": summary, "numbers": {"max_size_consistency_gap": worst}, "confounds": confounds}

    def impact(self, committee: Any, scope: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, Any]:
        t = committee.target_name
        inside = [c for c in cells if self.in_scope(c.region, scope)]
        outside = [c for c in cells if not self.in_scope(c.region, scope)]
        shift_in = [c.metrics[t]["E_rel"] - c.signal.committee_median for c in inside
                    if math.isfinite(c.signal.committee_median)]
        shift_out = [c.metrics[t]["E_rel"] - c.signal.committee_median for c in outside
                     if math.isfinite(c.signal.committee_median)]
        mi = float(np.mean(shift_in)) if shift_in else float("nan")
        mo = float(np.mean(shift_out)) if shift_out else float("nan")
        return {"summary": f"Mean shift of E_rel from the committee median: {mi:+.2f} eV inside the block, "
                           f"{mo:+.2f} eV outside; every adsorption step involving these pairs inherits it.",
                "boundary": "Where it does not matter: metal–adsorbate combinations outside the block (mean shift "
                            f"{mo:+.2f} eV).",
                "numbers": {"mean_shift_in": mi, "mean_shift_out": mo}, "evals": 0}
