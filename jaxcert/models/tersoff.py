r"""Tersoff bond-order potential for Si, C and Si–C.

.. math::
   E = \tfrac12 \sum_i \sum_{j \ne i} f_c(r_{ij})\,\big[A_{ij} e^{-\lambda_{ij} r_{ij}}
       - b_{ij} B_{ij} e^{-\mu_{ij} r_{ij}}\big],

   b_{ij} = \chi_{ij}\,\big(1 + (\beta_i \zeta_{ij})^{n_i}\big)^{-1/(2 n_i)}, \qquad
   \zeta_{ij} = \sum_{k \ne i, j} f_c(r_{ik})\, g_i(\theta_{ijk}),

   g_i(\theta) = 1 + \frac{c_i^2}{d_i^2} - \frac{c_i^2}{d_i^2 + (h_i - \cos\theta)^2}, \qquad
   f_c(r) = \begin{cases} 1 & r < R \\ \tfrac12 + \tfrac12\cos\frac{\pi (r - R)}{S - R} & R \le r < S \\
            0 & r \ge S \end{cases}

(θ_ijk the angle at i between the bonds to j and k; the cutoff of f_c(r_ik) is
that of the i–k pair; ω_ik = 1 and λ₃ = 0 as in the 1989 paper).  Mixed pairs:
A_ij = √(A_i A_j), B_ij = √(B_i B_j), λ_ij = (λ_i + λ_j)/2, μ_ij = (μ_i + μ_j)/2,
R_ij = √(R_i R_j), S_ij = √(S_i S_j); χ_SiC = 0.9776, χ_ii = 1.  g is evaluated
as 1 + (c²/d²)·δ²/(d² + δ²), δ = h − cos θ, which is the same function without the
cancellation of two ~10⁷ terms (matters in float32).

Parameters: Si from J. Tersoff, Phys. Rev. B 38, 9902 (1988) ("Si(C)"), C and the
Si–C mixing from J. Tersoff, Phys. Rev. B 39, 5566 (1989).  Elements: C, Si.
Cutoff: S = 3.0 Å (Si), 2.1 Å (C), √6.3 Å (Si–C); the model's static cutoff is the
largest S among the species present.  f_c is C¹ at R and S (its second derivative
jumps, as published).  Published fits: diamond Si −4.63 eV/atom at a = 5.432 Å,
diamond C −7.37 eV/atom at a = 3.566 Å, zincblende SiC −6.165 eV/atom at 4.32 Å.

Three-body sums run over a capacity-limited neighbour table
(:func:`jaxcert.core.neighbors.neighbor_table`): more than ``capacity`` neighbours
inside the cutoff turns the energy into NaN, never a silently wrong value.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core.model import Model
from jaxcert.core.neighbors import neighbor_table
from jaxcert.core.structure import Structure
from jaxcert.models._common import N_Z

__all__ = ["tersoff", "TERSOFF_SI_C_1989", "SPECIES"]

#: Species order of the parameter tables.
SPECIES: tuple[int, ...] = (6, 14)

#: Per-element parameters (eV, Å): PRB 39, 5566 (1989) for C, PRB 38, 9902 (1988) for Si.
TERSOFF_SI_C_1989: dict[str, dict[str, float]] = {
    "C": {
        "A": 1.3936e3, "B": 3.4674e2, "lam": 3.4879, "mu": 2.2119, "beta": 1.5724e-7, "n": 7.2751e-1,
        "c": 3.8049e4, "d": 4.3484, "h": -5.7058e-1, "R": 1.8, "S": 2.1,
    },
    "Si": {
        "A": 1.8308e3, "B": 4.7118e2, "lam": 2.4799, "mu": 1.7322, "beta": 1.1000e-6, "n": 7.8734e-1,
        "c": 1.0039e5, "d": 1.6217e1, "h": -5.9825e-1, "R": 2.7, "S": 3.0,
    },
}
#: Si–C bond-strength correction χ (PRB 39, 5566).
CHI_SIC = 0.9776

_SYMBOLS = {6: "C", 14: "Si"}
_PAIR_GEOMETRIC = ("A", "B", "R", "S")
_PAIR_ARITHMETIC = ("lam", "mu")
_SITE = ("beta", "n", "c", "d", "h")


def _tables(elements: dict[str, dict[str, float]], chi: float) -> dict[str, np.ndarray]:
    per = [elements[_SYMBOLS[z]] for z in SPECIES]
    out: dict[str, np.ndarray] = {k: np.array([p[k] for p in per]) for k in _SITE}
    for k in _PAIR_GEOMETRIC:
        v = np.array([p[k] for p in per])
        out[k] = np.sqrt(np.outer(v, v))
    for k in _PAIR_ARITHMETIC:
        v = np.array([p[k] for p in per])
        out[k] = 0.5 * (v[:, None] + v[None, :])
    out["chi"] = np.array([[1.0, chi], [chi, 1.0]])
    return out


def _species_index() -> np.ndarray:
    idx = np.zeros(N_Z, np.int32)
    for a, z in enumerate(SPECIES):
        idx[z] = a
    return idx


def cutoff_function(r: jax.Array, R: jax.Array, S: jax.Array) -> jax.Array:
    """Tersoff's f_c: 1 below R, ½ + ½cos(π(r − R)/(S − R)) on [R, S), 0 beyond S (C¹)."""
    mid = 0.5 + 0.5 * jnp.cos(jnp.pi * (r - R) / (S - R))
    return jnp.where(r < R, 1.0, jnp.where(r < S, mid, 0.0))


def table_cutoff(s: Structure, species_index: np.ndarray, rc_species: np.ndarray) -> float | jax.Array:
    """Largest per-species cutoff (Å) among the real atoms of ``s``.

    A Python float whenever the atomic numbers are concrete (also inside ``jit``
    over positions only), so the neighbour search never needs a traced cutoff on
    a concrete cell; traced otherwise (numbers batched or traced).
    """
    if not isinstance(s.numbers, jax.core.Tracer) and not isinstance(s.mask, jax.core.Tracer):
        sp = species_index[np.asarray(s.numbers)[np.asarray(s.mask)]]
        return float(np.max(rc_species[sp]))
    sp = jnp.asarray(species_index)[s.numbers]
    present = jnp.zeros(len(rc_species), jnp.int32).at[sp].max(s.mask.astype(jnp.int32)) > 0
    return jnp.max(jnp.where(present, jnp.asarray(rc_species, s.positions.dtype), 0.0))


def _tersoff_energy(params: dict[str, jax.Array], s: Structure, capacity: int, s_diag: np.ndarray) -> jax.Array:
    dt = s.positions.dtype
    prm = {k: jnp.asarray(v, dt) for k, v in params.items()}
    sp = jnp.asarray(_species_index())[s.numbers]  # (n,)
    rc = table_cutoff(s, _species_index(), s_diag)
    p = neighbor_table(s, rc, capacity)  # (n, c) slots
    spj = sp[p.j]
    spi = jnp.broadcast_to(sp[:, None], spj.shape)
    pair = {k: prm[k][spi, spj] for k in (*_PAIR_GEOMETRIC, *_PAIR_ARITHMETIC, "chi")}
    site = {k: prm[k][sp][:, None] for k in _SITE}  # (n, 1), central atom i

    fc = jnp.where(p.mask, cutoff_function(p.r, pair["R"], pair["S"]), 0.0)  # (n, c)
    u = [x / p.r for x in p.d]  # unit bond vectors per component (r = 1 on masked slots)
    cos = sum(x[:, :, None] * x[:, None, :] for x in u)  # cos θ_ijk for slots j, k
    c2d2 = (site["c"] / site["d"]) ** 2
    d2 = site["d"] ** 2
    delta2 = (site["h"][..., None] - cos) ** 2
    g = 1.0 + c2d2[..., None] * delta2 / (d2[..., None] + delta2)
    off = ~jnp.eye(p.r.shape[-1], dtype=bool)
    zeta = jnp.einsum("nk,njk->nj", fc, jnp.where(off, g, 0.0))  # ζ_ij

    beta, n_exp = site["beta"], site["n"]
    pos = zeta > 0.0
    bz = beta * jnp.where(pos, zeta, 1.0)  # double where: (βζ)^n is singular in slope at ζ = 0
    bzn = jnp.where(pos, bz**n_exp, 0.0)
    b = pair["chi"] * (1.0 + bzn) ** (-0.5 / n_exp)

    v = fc * (pair["A"] * jnp.exp(-pair["lam"] * p.r) - b * pair["B"] * jnp.exp(-pair["mu"] * p.r))
    return 0.5 * jnp.sum(jnp.where(p.mask, v, 0.0))


def tersoff(
    parameters: dict[str, dict[str, float]] | None = None,
    chi: float = CHI_SIC,
    capacity: int = 32,
    name: str = "tersoff",
) -> Model:
    """Tersoff Si/C/Si–C model (eV, Å).

    Args:
      parameters: per-element tables in the layout of :data:`TERSOFF_SI_C_1989`.
      chi: Si–C χ (1.0 disables the correction).
      capacity: neighbour slots per atom for the three-body sums (static); an
        atom with more neighbours inside the cutoff yields NaN.
    """
    prm = _tables(TERSOFF_SI_C_1989 if parameters is None else parameters, float(chi))
    s_diag = {z: float(prm["S"][a, a]) for a, z in enumerate(SPECIES)}

    def cutoff_of(numbers: np.ndarray) -> float:
        zs = set(np.asarray(numbers).ravel().tolist()) & set(SPECIES)
        return max((s_diag[z] for z in zs), default=max(s_diag.values()))

    def energy(params: dict[str, jax.Array], s: Structure) -> jax.Array:
        return _tersoff_energy(params, s, capacity, np.diagonal(prm["S"]))

    return Model(
        energy_fn=energy,
        params={k: jnp.asarray(v) for k, v in prm.items()},
        name=name,
        cutoff=cutoff_of,
        elements=SPECIES,
        info=(
            ("source", "J. Tersoff, PRB 38, 9902 (1988) [Si]; PRB 39, 5566 (1989) [C, Si-C, chi]"),
            ("units", "eV, Å"),
            ("cutoff", f"S = {s_diag[14]} Å (Si), {s_diag[6]} Å (C), {math.sqrt(s_diag[6] * s_diag[14]):.4f} Å (Si-C)"),
        ),
    )
