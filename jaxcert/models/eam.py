r"""Sutton–Chen embedded-atom (long-range Finnis–Sinclair) potential for fcc metals.

.. math::
   E = \sum_i \Big[\tfrac12 \sum_{j \ne i} \varepsilon_{ij} \Big(\frac{a_{ij}}{r_{ij}}\Big)^{n_{ij}} S_{ij}(r_{ij})
       - \varepsilon_i c_i \sqrt{\rho_i}\Big], \qquad
   \rho_i = \sum_{j \ne i} \Big(\frac{a_{ij}}{r_{ij}}\Big)^{m_{ij}} S_{ij}(r_{ij}).

Parameters (n, m, ε eV, c, a Å) from A. P. Sutton and J. Chen, Phil. Mag. Lett.
61, 139 (1990), Table 1, for Ni, Cu, Rh, Pd, Ag, Ir, Pt, Au, Pb, Al; a is the fcc
lattice constant, c makes the (untruncated) fcc crystal stable at that a.

Combination rules for unlike pairs (as used for Sutton–Chen alloys, e.g. by
Çağın and co-workers): ε_ij = √(ε_i ε_j) (geometric), a_ij = (a_i + a_j)/2,
n_ij = (n_i + n_j)/2, m_ij = (m_i + m_j)/2 (arithmetic); the embedding term of
atom i keeps its own ε_i c_i.  A pure element recovers the paper exactly.

Cutoff (our choice; the paper sums to infinity): every pair function is
multiplied by the C⁴ smoothstep S(r) = 1 − (126t⁵ − 420t⁶ + 540t⁷ − 315t⁸ + 70t⁹),
t = (r − r_on)/(r_c − r_on) clipped to [0, 1], with r_c = 2.5 a_ij and
r_on = 2.0 a_ij by default.  S vanishes like (r_c − r)⁵, so even √ρ of an atom
losing its last neighbour is C² (a C² switch would leave a (r_c − r)^{-1/2}
curvature there).  The truncation shifts the fcc cohesive energy at the paper's
a by +0.0025 (Au) to +0.056 (Ir) eV/atom relative to the infinite lattice sums.
Units: eV, Å.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.model import Model
from jaxcert.core.neighbors import pairs
from jaxcert.core.structure import Structure
from jaxcert.models._common import N_Z
from jaxcert.models.tersoff import table_cutoff

__all__ = ["sutton_chen", "SUTTON_CHEN_1990", "smoothstep_c4"]

#: Sutton & Chen (1990), Table 1: symbol -> (n, m, ε eV, c, a Å).
SUTTON_CHEN_1990: dict[str, tuple[int, int, float, float, float]] = {
    "Ni": (9, 6, 1.5707e-2, 39.432, 3.52),
    "Cu": (9, 6, 1.2382e-2, 39.432, 3.61),
    "Rh": (12, 6, 4.9371e-3, 144.41, 3.80),
    "Pd": (12, 7, 4.1790e-3, 108.27, 3.89),
    "Ag": (12, 6, 2.5415e-3, 144.41, 4.09),
    "Ir": (14, 6, 2.4489e-3, 334.94, 3.84),
    "Pt": (10, 8, 1.9833e-2, 34.408, 3.92),
    "Au": (10, 8, 1.2793e-2, 34.408, 4.08),
    "Pb": (10, 7, 5.5765e-3, 45.778, 4.95),
    "Al": (7, 6, 3.3147e-2, 16.399, 4.05),
}


def smoothstep_c4(r: jax.Array, r_on: jax.Array, r_c: jax.Array) -> jax.Array:
    """1 below r_on, 0 beyond r_c, the degree-9 C⁴ polynomial in between."""
    t = jnp.clip((r - r_on) / (r_c - r_on), 0.0, 1.0)
    poly = t**5 * (126.0 + t * (-420.0 + t * (540.0 + t * (-315.0 + 70.0 * t))))
    return 1.0 - poly


def _eam_energy(params: dict[str, jax.Array], s: Structure, species_index: np.ndarray, rc_elem: np.ndarray,
                rc_over_a: float, ron_over_a: float) -> jax.Array:
    dt = s.positions.dtype
    prm = {k: jnp.asarray(v, dt) for k, v in params.items()}
    sp = jnp.asarray(species_index)[s.numbers]
    # pair cutoffs are arithmetic means, so the largest one is the largest per-element cutoff present
    p = pairs(s, table_cutoff(s, species_index, rc_elem))
    # pair tables over species pairs (ns², tiny), one shared gather index per neighbour slot
    ns = prm["a"].shape[0]
    a, eps = prm["a"], prm["eps"]
    a_ij = 0.5 * (a[:, None] + a[None, :])
    tables = {
        "log_a": jnp.log(a_ij),
        "n": 0.5 * (prm["n"][:, None] + prm["n"][None, :]),
        "m": 0.5 * (prm["m"][:, None] + prm["m"][None, :]),
        "eps": jnp.sqrt(eps[:, None] * eps[None, :]),
        "r_on": ron_over_a * a_ij,
        "r_c": rc_over_a * a_ij,
    }
    q = (sp[:, None] * ns + jnp.take(sp, p.j, mode="clip")).astype(jnp.int32)
    t_ = {k: jnp.take(v.reshape(-1), q, mode="clip") for k, v in tables.items()}
    sw = smoothstep_c4(p.r, t_["r_on"], t_["r_c"])
    live = p.mask & (p.r < t_["r_c"])
    log_x = t_["log_a"] - jnp.log(p.r)  # log(a_ij / r); r = 1 on masked slots, so finite everywhere
    # (a/r)^n as exp(n log(a/r)): one log per slot for both powers, and no pow in either derivative
    pair = jnp.where(live, t_["eps"] * jnp.exp(t_["n"] * log_x) * sw, 0.0)
    rho = jnp.sum(jnp.where(live, jnp.exp(t_["m"] * log_x) * sw, 0.0), axis=-1)
    has = s.mask & (rho > 0.0)
    sqrt_rho = jnp.where(has, jnp.sqrt(jnp.where(has, rho, 1.0)), 0.0)  # double where: √ has infinite slope at 0
    embed = eps[sp] * prm["c"][sp] * sqrt_rho
    return 0.5 * jnp.sum(pair) - jnp.sum(embed)


def sutton_chen(
    elements: tuple[str, ...] | None = None,
    rc_over_a: float = 2.5,
    ron_over_a: float = 2.0,
    name: str = "eam",
) -> Model:
    """Sutton–Chen EAM (eV, Å) for the fcc metals of the 1990 paper (all ten by default).

    Args:
      elements: restrict to these symbols (others then raise ``UnsupportedElement``).
      rc_over_a: cutoff r_c of a pair in units of its mixed lattice constant a_ij.
      ron_over_a: start of the smooth switch, same units (< rc_over_a).
    """
    from ase.data import atomic_numbers

    syms = tuple(SUTTON_CHEN_1990) if elements is None else tuple(elements)
    bad = [e for e in syms if e not in SUTTON_CHEN_1990]
    if bad:
        raise KeyError(f"no Sutton-Chen parameters for {bad}; available: {', '.join(SUTTON_CHEN_1990)}")
    if not 0.0 < ron_over_a < rc_over_a:
        raise ValueError(f"need 0 < ron_over_a < rc_over_a, got {ron_over_a}, {rc_over_a}")
    zs = tuple(atomic_numbers[e] for e in syms)
    table = np.array([SUTTON_CHEN_1990[e] for e in syms], np.float64)
    species_index = np.zeros(N_Z, np.int32)
    species_index[list(zs)] = np.arange(len(zs))
    rc_elem = rc_over_a * table[:, 4]
    rc_by_z = dict(zip(zs, rc_elem.tolist(), strict=True))

    def cutoff_of(numbers: np.ndarray) -> float:
        present = set(np.asarray(numbers).ravel().tolist()) & set(zs)
        return max((rc_by_z[z] for z in present), default=float(rc_elem.max()))

    def energy(params: dict[str, jax.Array], s: Structure) -> jax.Array:
        return _eam_energy(params, s, species_index, rc_elem, rc_over_a, ron_over_a)

    params = {k: jnp.asarray(table[:, col]) for col, k in enumerate(("n", "m", "eps", "c", "a"))}
    return Model(
        energy_fn=energy,
        params=params,
        name=name,
        cutoff=cutoff_of,
        elements=zs,
        info=(
            ("source", "A. P. Sutton and J. Chen, Phil. Mag. Lett. 61, 139 (1990)"),
            ("units", "eV, Å"),
            ("mixing", "eps geometric; a, n, m arithmetic"),
            ("cutoff", f"C4 switch from {ron_over_a} a_ij to {rc_over_a} a_ij"),
        ),
    )
