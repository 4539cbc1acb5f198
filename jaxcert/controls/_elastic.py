r"""Elastic constants: exact (autodiff) and finite-strain, Voigt–Reuss–Hill moduli, log-space comparison.

docs/controls.md, "Elastic constants".  Seed 001 compares model bulk and shear moduli with AFLOW's AEL
tensors: each structure is relaxed, strained (normal ±0.5 %, ±1 %, shear ±1 %, ±2 %), its ions relaxed
at fixed cell (FIRE, fmax 0.02 eV/Å, ≤ 200 steps), the tensor fitted from the model's stress (ASE sign),
K and G read as Voigt–Reuss–Hill averages, and the moduli compared in log space (Pearson r, OLS
log–log slope, median multiplicative bias).

* :func:`elastic_tensor` — the tensor from exact second derivatives.  Clamped ions:
  C⁰_mn = ∂σ_m/∂γ_n (engineering Voigt strain γ, 𝔽 = I + ε(γ), docs/probes.md §1.2), the Jacobian of
  the model's stress output.  Relaxed ions: the internal coordinates u minimise the energy at each
  strain, so to second order

  .. math::  C = C^0 - \frac1V \Lambda^{T} H^{+} \Lambda, \qquad
             \Lambda_{(ia),n} = \frac{\partial F_{ia}}{\partial\gamma_n}, \quad
             H_{(ia),(jb)} = \frac{\partial^2 E}{\partial R_{ia}\partial R_{jb}},

  with H⁺ the pseudo-inverse on the complement of the three rigid translations (and of the coordinates
  of padding atoms), where H has no null vector for a stable crystal.
* :func:`finite_strain_elastic` — the paper's route (pymatgen's ``DeformedStructureSet`` and
  ``ElasticTensor.from_independent_strains``), vmapped over the deformations in JAX.
* :func:`vrh` — Voigt, Reuss and Hill bulk and shear moduli of (…, 6, 6) tensors.
* :func:`compare_moduli` — log-space Pearson r, OLS log–log slope and multiplicative bias, per stratum.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from ase.units import GPa as _EV_PER_A3_PER_GPA

from jaxcert.controls._result import ControlResult
from jaxcert.core import linalg
from jaxcert.core.derivatives import EXACT, Engine, Exact, _strained
from jaxcert.core.geometry import det3
from jaxcert.core.model import Model, voigt
from jaxcert.core.neighbors import image_counts
from jaxcert.core.structure import Structure
from jaxcert.optim.relax import _forces_and_stress, bfgs, relax_cell

__all__ = [
    "ElasticTensor", "FiniteStrainElastic", "VRH", "ModuliComparison",
    "elastic_tensor", "finite_strain_elastic", "vrh", "compare_moduli",
]

#: 1 eV/Å³ in GPa (ASE's CODATA-2014 units: 1 / ase.units.GPa ≈ 160.2177).
EV_PER_A3_TO_GPA = 1.0 / _EV_PER_A3_PER_GPA

#: Voigt index pairs, order xx yy zz yz xz xy (ASE's).
_VOIGT_PAIRS = ((0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1))


# ---------------------------------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class ElasticTensor(ControlResult):
    """Exact elastic tensor of one structure (docs/controls.md, "Elastic constants").

    Attributes:
      C: (6, 6) GPa, Voigt order xx yy zz yz xz xy, engineering shear strain; the relaxed-ion tensor when
        ``relaxed_ions`` is True, else the clamped-ion one.  C[m, n] = ∂σ_m/∂γ_n (row: stress).
      C_clamped: (6, 6) GPa, clamped-ion C⁰ = ∂σ/∂γ of the model's stress output.
      relaxation: (6, 6) GPa, the relaxed-ion correction Λᵀ H⁺ Λ / V (C = C_clamped − relaxation), or
        ``None`` when ``relaxed_ions`` is False.  Positive semi-definite for a stable internal Hessian.
      stress: (6,) GPa, the residual stress of the input (ASE sign); C is the elastic tensor of a stress-free
        reference only when it is ≈ 0.
      max_force: residual max_i ‖F_i‖ in eV/Å of the input (the relaxed-ion formula assumes 0).
      asymmetry: max |C⁰ − C⁰ᵀ| in GPa (≈ the residual stress: zero to round-off at a relaxed reference).
      hessian_min_eigenvalue: smallest eigenvalue (eV/Å²) of H on the complement of the translations;
        negative means the input is a saddle of the internal coordinates and C is not a relaxed-ion tensor.
        NaN when ``relaxed_ions`` is False.
      n_internal: number of internal modes inverted (3·n_real − 3 for a stable crystal).
      volume: cell volume in Å³.
      n_atoms: number of real (unmasked) atoms.
      relaxed_ions: whether ``C`` includes the relaxation.
      engine: name of the derivative engine.
      units: "GPa".
    """

    C: np.ndarray
    C_clamped: np.ndarray
    relaxation: np.ndarray | None
    stress: np.ndarray
    max_force: float
    asymmetry: float
    hessian_min_eigenvalue: float
    n_internal: int
    volume: float
    n_atoms: int
    relaxed_ions: bool
    engine: str
    units: str = "GPa"


@dataclasses.dataclass(frozen=True)
class FiniteStrainElastic(ControlResult):
    """Elastic tensor fitted from finite strains (docs/controls.md, "Elastic constants").

    Attributes:
      C: (6, 6) GPa, C[j, i] = slope of σ_j against the Voigt Green–Lagrange strain component i (engineering
        shear), ordinary least squares over the strains of state i and the unstrained reference.
      truncation_error: (6, 6) GPa, the leading-order bias of that slope estimated from the data: with
        σ(x) = σ₀ + Cx + bx² + dx³ + …, each amplitude a_k gives a central difference D_k = C + d a_k², d is
        fitted across the amplitudes, and the bias of the fit is d·Σx⁴/Σx² (NaN with a single amplitude).
      C_extrapolated: (6, 6) GPa, C − truncation_error (Richardson: the error drops to O(a⁴)).
      strains: (k, 6) Voigt Green–Lagrange strains applied (engineering shear), row 0 the reference.
      stresses: (k, 6) GPa, the model's stress after the ion relaxation (ASE sign), row 0 the reference.
      converged: (k,) ion relaxation converged (True everywhere when ``relax_ions`` is False).
      fmax: (k,) reached max_i ‖F_i‖ in eV/Å.
      steps: (k,) optimiser steps.
      all_converged: every relaxation converged.
      relax_ions: whether the ions were relaxed at fixed cell.
      optimizer: "fire" or "bfgs".
      units: "GPa".
    """

    C: np.ndarray
    truncation_error: np.ndarray
    C_extrapolated: np.ndarray
    strains: np.ndarray
    stresses: np.ndarray
    converged: np.ndarray
    fmax: np.ndarray
    steps: np.ndarray
    all_converged: bool
    relax_ions: bool
    optimizer: str
    units: str = "GPa"


@dataclasses.dataclass(frozen=True)
class VRH(ControlResult):
    """Voigt, Reuss and Hill bulk (K) and shear (G) moduli, in the units of C (floats or arrays over a batch).

    ``universal_anisotropy`` is A^U = 5 G_V/G_R + K_V/K_R − 6 (Ranganathan & Ostoja-Starzewski, PRL 101,
    055504 (2008)): 0 for an isotropic tensor, > 0 otherwise.  NaN where C is singular or not finite.
    """

    K_voigt: Any
    K_reuss: Any
    K_hill: Any
    G_voigt: Any
    G_reuss: Any
    G_hill: Any
    universal_anisotropy: Any


@dataclasses.dataclass(frozen=True)
class ModuliComparison(ControlResult):
    """Predicted vs reference moduli in log space (docs/controls.md, "Elastic constants").

    Attributes:
      n: pairs used (both moduli finite and positive).
      n_excluded: pairs left out (a non-positive or non-finite modulus on either side; the paper leaves
        out the non-positive predictions).
      r: Pearson correlation of log10 pred with log10 ref.
      slope, intercept: ordinary least squares of log10 pred on log10 ref (pred ≈ 10^intercept · ref^slope).
      bias: the paper's multiplicative bias, 10^median(log10 pred − log10 ref) (the median ratio).
      bias_geometric: 10^mean(log10 pred − log10 ref), the geometric mean of pred/ref.
      r_linear: Pearson r of the raw moduli on the same pairs (dominated by outliers; for contrast).
      strata: per-stratum comparisons keyed by label (``None`` without strata).
    """

    n: int
    n_excluded: int
    r: float
    slope: float
    intercept: float
    bias: float
    bias_geometric: float
    r_linear: float
    strata: dict[str, ModuliComparison] | None = None


# ------------------------------------------------------------------------------------------ validation
def _check_structure(structure: Any, name: str = "structure") -> Structure:
    if not isinstance(structure, Structure):
        raise ValueError(f"{name}: expected a jaxcert.Structure, got {type(structure).__name__}")
    if structure.positions.ndim != 2:
        raise ValueError(f"{name}: expected one (unbatched) structure, got positions of shape "
                         f"{tuple(structure.positions.shape)}")
    if not all(structure.pbc):
        raise ValueError(f"{name}: elastic constants need a cell periodic along all three axes, "
                         f"got pbc={structure.pbc}")
    return structure


def _check_model(model: Any) -> Model:
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a jaxcert.Model, got {type(model).__name__}")
    if not model.stress_available:
        raise ValueError(f"model: {model.name!r} has no stress output; elastic constants need one")
    return model


# ---------------------------------------------------------------------------------------- exact route
def _internal_pinv(H: jax.Array, mask: jax.Array, rcond: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    """H⁺ on the complement of the rigid translations and the padding coordinates, its smallest eigenvalue there.

    P = diag(m) − T Tᵀ projects onto that complement (m: 1 on the coordinates of real atoms, T: the three
    normalised translations of the real atoms).  The eigenvectors of P H P that lie in range(P) (‖P v‖² > ½)
    and whose eigenvalue exceeds ``rcond``·max|λ| in magnitude are inverted.
    """
    n3 = H.shape[0]
    dt = H.dtype
    m = jnp.repeat(mask.astype(dt), 3)
    n_real = jnp.maximum(jnp.sum(mask.astype(dt)), 1.0)
    T = (m[:, None] * jnp.tile(jnp.eye(3, dtype=dt), (n3 // 3, 1))) / jnp.sqrt(n_real)  # (3n, 3)
    P = jnp.diag(m) - T @ T.T
    Hs = P @ (0.5 * (H + H.T)) @ P
    w, V = linalg.eigh(Hs)
    inside = jnp.sum((P @ V) ** 2, axis=0) > 0.5
    scale = jnp.max(jnp.abs(w))
    keep = inside & (jnp.abs(w) > rcond * scale)
    inv = jnp.where(keep, 1.0 / jnp.where(keep, w, 1.0), 0.0)
    Hp = (V * inv) @ V.T
    wmin = jnp.min(jnp.where(inside, w, jnp.inf))
    return Hp, wmin, jnp.sum(keep)


def _fused_blocks(model: Model, s: Structure, with_ions: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(B, Λ, H) of the autodiff engine from one program: forward-mode columns of (F, σ) over (u, γ).

    The configuration c(u, γ) has cell h𝔽ᵀ and positions R𝔽ᵀ + u (𝔽 = I + ε(γ)); forces and stress come from
    one reverse pass for a conservative model (the heads otherwise).  At (0, 0): ∂σ/∂γ = B, ∂F/∂γ = Λ and
    −∂F/∂u = H, the quantities of ``Exact.stress_strain``, ``force_strain`` and ``hessian``.  Without
    ``with_ions`` only the six strain columns are formed (H is then empty).
    """
    n = s.n_atoms
    k = 3 * n if with_ions else 0
    dt = s.positions.dtype

    def outputs(z: jax.Array) -> jax.Array:
        g = z[k:]
        st = _strained(s, g)
        if with_ions:
            st = st.replace(positions=st.positions + z[:k].reshape(n, 3))
        F, sigma = _forces_and_stress(model, model.params, st)
        return jnp.concatenate([F.reshape(-1), voigt(sigma)])

    J = jax.jacfwd(outputs)(jnp.zeros(k + 6, dt))  # (3n + 6, k + 6)
    return J[3 * n:, k:], J[: 3 * n, k:], -J[: 3 * n, :k]


def _exact_impl(model: Model, s: Structure, rcond: Any, engine: Engine, relaxed_ions: bool) -> dict[str, jax.Array]:
    V = jnp.abs(det3(s.cell))
    n3 = 3 * s.n_atoms
    if isinstance(engine, Exact):
        B, lam, H = _fused_blocks(model, s, relaxed_ions)
    else:
        B = engine.stress_strain(model, s)  # (6, 6): B[m, n] = dσ_m/dγ_n
        if relaxed_ions:
            lam = engine.force_strain(model, s).reshape(n3, 6)  # ∂F/∂γ
            H = engine.hessian(model, s).reshape(n3, n3)
    F, sigma = _forces_and_stress(model, model.params, s)
    out = {"B": B, "stress": voigt(sigma), "max_force": jnp.sqrt(jnp.max(jnp.sum(F * F, axis=-1))), "volume": V}
    if relaxed_ions:
        Hp, wmin, n_keep = _internal_pinv(H, s.mask, rcond)
        corr = lam.T @ Hp @ lam / V
        out.update(relaxation=0.5 * (corr + corr.T), wmin=wmin, n_keep=n_keep)
    return out


_exact_program = jax.jit(_exact_impl, static_argnames=("engine", "relaxed_ions"))


def elastic_tensor(
    model: Model,
    structure: Structure,
    relaxed_ions: bool = True,
    engine: Engine | None = None,
    *,
    rcond: float = 1e-10,
) -> ElasticTensor:
    r"""The elastic tensor of ``structure`` under ``model`` from exact second derivatives (GPa).

    Definitions (docs/controls.md, "Elastic constants"; Voigt order xx yy zz yz xz xy):

    * strain: engineering Voigt strain γ (γ₄ = 2ε_yz, …), deformation 𝔽 = I + ε(γ) applied to cell and
      positions (docs/probes.md §1.2), so that σ_m = V⁻¹ ∂E/∂γ_m for all six components;
    * clamped ions: C⁰_mn = ∂σ_m/∂γ_n, the Jacobian of the model's stress output (a direct stress head is
      differentiated as it is), stress in ASE's sign (tensile positive), so C⁰ = V⁻¹ ∂²E/∂γ_m∂γ_n at a
      stress-free reference.  At a stressed reference the two differ by terms linear in σ,
      V⁻¹ ∂²E/∂γ_m∂γ_n = C⁰_nm + σ_n [m ≤ 3] − (σ e_n e_m)-trace terms (docs/controls.md), and neither is
      the stress-free tensor: relax the cell first (:func:`jaxcert.optim.relax.relax_cell`); ``stress`` and
      ``asymmetry`` report how far the input is from stress-free.
    * relaxed ions: C = C⁰ − Λᵀ H⁺ Λ / V, Λ = ∂F/∂γ (the strain–position block, (3n, 6)), H = −∂F/∂R
      (the Hessian), H⁺ its pseudo-inverse on the complement of the three rigid translations and of the
      coordinates of padding atoms.  The formula is the second-order minimisation of the energy over the
      internal coordinates at fixed strain; it assumes zero forces on the input (``max_force``) and a
      positive internal Hessian (``hessian_min_eigenvalue``).

    Exact and jitted (one compiled program per model, shape and engine); use float64.

    Args:
      model: the potential; needs a stress output.
      structure: one structure periodic along all three axes (padding atoms allowed).
      relaxed_ions: add the relaxation correction (needs the (3n)² Hessian).
      engine: derivative engine (default :data:`jaxcert.core.derivatives.EXACT`; a finite-difference engine
        gives the same quantities by central differences).
      rcond: eigenvalues of the internal Hessian below ``rcond``·max|λ| are treated as null.

    Returns:
      :class:`ElasticTensor`.
    """
    model = _check_model(model)
    structure = _check_structure(structure)
    engine = EXACT if engine is None else engine
    if not isinstance(engine, Engine):
        raise ValueError(f"engine: expected a jaxcert.core.derivatives engine, got {type(engine).__name__}")
    if not (np.isfinite(rcond) and 0 <= rcond < 1):
        raise ValueError(f"rcond: expected a number in [0, 1), got {rcond!r}")
    s = model.prepare(structure)
    out = jax.device_get(_exact_program(model, s, jnp.asarray(rcond, s.dtype), engine=engine,
                                        relaxed_ions=bool(relaxed_ions)))
    B = np.asarray(out["B"], np.float64) * EV_PER_A3_TO_GPA
    relaxation = None
    wmin, n_keep = float("nan"), 0
    C = B.copy()
    if relaxed_ions:
        relaxation = np.asarray(out["relaxation"], np.float64) * EV_PER_A3_TO_GPA
        C = B - relaxation
        wmin, n_keep = float(out["wmin"]), int(out["n_keep"])
    return ElasticTensor(
        C=C,
        C_clamped=B,
        relaxation=relaxation,
        stress=np.asarray(out["stress"], np.float64) * EV_PER_A3_TO_GPA,
        max_force=float(out["max_force"]),
        asymmetry=float(np.max(np.abs(B - B.T))),
        hessian_min_eigenvalue=wmin,
        n_internal=n_keep,
        volume=float(out["volume"]),
        n_atoms=int(np.sum(np.asarray(structure.mask))),
        relaxed_ions=bool(relaxed_ions),
        engine=str(getattr(engine, "name", type(engine).__name__)),
    )


# ------------------------------------------------------------------------------------- finite strains
def _amounts(x: Any, name: str) -> np.ndarray:
    a = np.atleast_1d(np.asarray(x, dtype=np.float64))
    if a.ndim != 1 or a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{name}: expected one or more positive strain amplitudes, got {x!r}")
    if len(np.unique(a)) != a.size:
        raise ValueError(f"{name}: amplitudes must be distinct, got {x!r}")
    if np.any(a >= 0.25):
        raise ValueError(f"{name}: amplitudes must be small strains (< 0.25), got {x!r}")
    return np.sort(a)


def _deformation_set(normal: np.ndarray, shear: np.ndarray, shear_kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Deformation gradients (k, 3, 3) and their Voigt Green–Lagrange strains (k, 6) (engineering shear).

    pymatgen's ``DeformedStructureSet``: for each component, a symmetric Green–Lagrange strain E with that
    one component (and its transpose) set to ±amount, realised by the upper-triangular 𝔽 with 𝔽ᵀ𝔽 = I + 2E
    (Cholesky).  Row 0 is the undeformed reference.
    """
    Fs, strains = [np.eye(3)], [np.zeros(6)]
    for comp, (i, j) in enumerate(_VOIGT_PAIRS):
        amps = normal if comp < 3 else (shear if shear_kind == "tensor" else shear / 2.0)
        for a in np.concatenate([-amps[::-1], amps]):
            E = np.zeros((3, 3))
            E[i, j] = E[j, i] = a
            Fs.append(np.linalg.cholesky(np.eye(3) + 2.0 * E).T)
            v = np.zeros(6)
            v[comp] = a if comp < 3 else 2.0 * a
            strains.append(v)
    return np.stack(Fs), np.stack(strains)


def _fs_impl(model: Model, batch: Structure, fmax: Any, max_steps: Any, optimizer: str | None):
    """Stress (Voigt, eV/Å³) of every deformed structure (vmapped), after relaxing its ions at fixed cell.

    ``optimizer=None``: clamped ions (no relaxation; a lighter program).  ``fmax`` and ``max_steps`` are
    traced, so any thresholds reuse one compiled program.
    """

    def one(st: Structure):
        if optimizer is None:
            F, sigma = _forces_and_stress(model, model.params, st)
            return voigt(sigma), jnp.sqrt(jnp.max(jnp.sum(F * F, -1))), jnp.asarray(0), jnp.asarray(True)
        if optimizer == "fire":  # FIRE at fixed cell, the stress carried along (one model pass per step)
            r = relax_cell(model, st, fmax=fmax, max_steps=max_steps, mask=jnp.zeros(6, bool))
            return voigt(r.stress), r.fmax, r.steps, r.converged
        r = bfgs(model, st, fmax=fmax, max_steps=max_steps)
        return voigt(model.stress_of(model.params, r.structure)), r.fmax, r.steps, r.converged

    return jax.vmap(one)(batch)


_fs_program = jax.jit(_fs_impl, static_argnames=("optimizer",))


def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """OLS slopes along the last-but-one axis: x (…, k), y (…, k, 6) → (…, 6)."""
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-2, keepdims=True)
    return np.einsum("...k,...kj->...j", xc, yc) / np.sum(xc * xc, -1)[..., None]


def finite_strain_elastic(
    model: Model,
    structure: Structure,
    normal: Sequence[float] = (0.005, 0.01),
    shear: Sequence[float] = (0.01, 0.02),
    relax_ions: bool = True,
    fmax: float = 0.02,
    max_steps: int = 200,
    *,
    shear_kind: Literal["tensor", "engineering"] = "tensor",
    optimizer: Literal["fire", "bfgs"] = "fire",
) -> FiniteStrainElastic:
    r"""The paper's finite-strain elastic tensor (GPa), its ion relaxations vmapped in JAX.

    Seed 001, Methods ("Elastic response"): apply normal strains of ±0.5 % and ±1 % and shear strains of
    ±1 % and ±2 %, relax the ions at fixed cell (FIRE, fmax 0.02 eV/Å, at most 200 steps), and fit the
    tensor from the model's stress in the ASE sign convention (pymatgen's ``DeformedStructureSet`` and
    ``ElasticTensor.from_independent_strains``).  Here, as there:

    * each amplitude a is applied with both signs to one Voigt component of the *Green–Lagrange* strain
      E = ½(𝔽ᵀ𝔽 − I), realised by the upper-triangular 𝔽 (Cholesky of I + 2E), cell h → h𝔽ᵀ and positions
      r → r𝔽ᵀ (fractional coordinates kept);
    * ``shear`` amplitudes are tensor components E_ij (pymatgen's ``Strain.from_index_amount``), so the
      paper's "±1 %, ±2 %" shear is an engineering shear γ = 2E_ij of ±2 %, ±4 %
      (``shear_kind="engineering"`` reads them as γ instead; the paper is silent on this point, pymatgen's
      convention is the one its scripts used);
    * C[j, i] is the ordinary-least-squares slope of the Cauchy stress σ_j (ASE sign, no sign flip) against
      the Voigt strain component i (engineering shear), over that component's strains and the unstrained
      reference (whose stress, relaxed the same way, enters every fit, as pymatgen's ``eq_stress``).

    The input should be relaxed (cell and ions, e.g. :func:`jaxcert.optim.relax.relax_cell`): the fit measures
    the tangent at the given reference, and it is the elastic tensor only at a stress-free one; row 0 of
    ``stresses`` is the reference stress.  The result agrees with :func:`elastic_tensor` (relaxed ions when
    ``relax_ions``, clamped otherwise) within the truncation error O(a²), which ``truncation_error``
    estimates from the data (docs/controls.md, "Elastic constants"), plus the error of the ion relaxations
    (set by ``fmax``).

    Args:
      model: the potential; needs a stress output.
      structure: one relaxed structure periodic along all three axes.
      normal: positive normal amplitudes (each applied with both signs).
      shear: positive shear amplitudes (each applied with both signs), see ``shear_kind``.
      relax_ions: relax the ions at fixed cell for each deformation (relaxed-ion tensor); False gives the
        clamped-ion tensor.
      fmax: force threshold of the ion relaxations in eV/Å (the paper's 0.02).
      max_steps: step cap of the ion relaxations (the paper's 200).
      shear_kind: "tensor" (pymatgen, default) or "engineering".
      optimizer: "fire" (the paper's: :func:`jaxcert.optim.relax.fire`'s steps, run as
        :func:`jaxcert.optim.relax.relax_cell`
        with every cell component masked, which carries the stress along) or "bfgs" (:func:`jaxcert.optim.relax.bfgs`).

    Returns:
      :class:`FiniteStrainElastic`.
    """
    model = _check_model(model)
    structure = _check_structure(structure)
    normal_a = _amounts(normal, "normal")
    shear_a = _amounts(shear, "shear")
    if shear_kind not in ("tensor", "engineering"):
        raise ValueError(f"shear_kind: expected 'tensor' or 'engineering', got {shear_kind!r}")
    if optimizer not in ("fire", "bfgs"):
        raise ValueError(f"optimizer: expected 'fire' or 'bfgs', got {optimizer!r}")
    if not (np.isfinite(fmax) and fmax > 0):
        raise ValueError(f"fmax: expected a positive force threshold in eV/Å, got {fmax!r}")
    if int(max_steps) != max_steps or max_steps < 0:
        raise ValueError(f"max_steps: expected a non-negative integer, got {max_steps!r}")

    Fs, strains = _deformation_set(normal_a, shear_a, shear_kind)
    k = len(Fs)
    R = np.asarray(structure.positions, np.float64)
    h = np.asarray(structure.cell, np.float64)
    cells = h @ np.transpose(Fs, (0, 2, 1))
    positions = R @ np.transpose(Fs, (0, 2, 1))
    dt = structure.dtype
    batch = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (k, *x.shape)), structure)
    batch = batch.replace(positions=jnp.asarray(positions, dt), cell=jnp.asarray(cells, dt))
    rc = model.cutoff_for(structure)
    if rc is not None:
        need = image_counts(cells, structure.pbc, rc)
        if structure.images is not None:
            need = tuple(max(a, b) for a, b in zip(need, structure.images, strict=True))
        batch = batch.replace(images=need, image_cutoff=float(rc))
    batch = model.prepare(batch)

    sig, fm, steps, conv = jax.device_get(_fs_program(
        model, batch, jnp.asarray(fmax, dt), jnp.asarray(int(max_steps)),
        optimizer=optimizer if relax_ions else None))
    stresses = np.asarray(sig, np.float64) * EV_PER_A3_TO_GPA

    # group: reference (row 0) + the 2·n_amp rows of each component
    n_norm, n_shear = 2 * len(normal_a), 2 * len(shear_a)
    C = np.empty((6, 6))
    trunc = np.full((6, 6), np.nan)
    row = 1
    for comp in range(6):  # six strain states, each with its own amplitude set (not a loop over data)
        m = n_norm if comp < 3 else n_shear
        idx = np.r_[0, row:row + m]
        row += m
        x = strains[idx, comp]
        y = stresses[idx]
        C[:, comp] = _slopes(x, y)
        half = m // 2
        amps = x[1 + half:]  # positive amplitudes, ascending (the negatives mirror them)
        if len(amps) >= 2:
            D = (y[1 + half:] - y[half:0:-1]) / (2.0 * amps[:, None])  # (n_amp, 6) central differences
            a2 = amps**2
            d = _slopes(a2, D)  # D_k = C + d a_k²
            trunc[:, comp] = d * np.sum(x**4) / np.sum(x**2)
    return FiniteStrainElastic(
        C=C,
        truncation_error=trunc,
        C_extrapolated=C - trunc,
        strains=strains,
        stresses=stresses,
        converged=np.asarray(conv, bool),
        fmax=np.asarray(fm, np.float64),
        steps=np.asarray(steps, np.int64),
        all_converged=bool(np.all(conv)),
        relax_ions=bool(relax_ions),
        optimizer=optimizer,
    )


# ------------------------------------------------------------------------------------------------- VRH
def vrh(C: Any) -> VRH:
    r"""Voigt–Reuss–Hill bulk and shear moduli of (…, 6, 6) Voigt tensors (Hill, Proc. Phys. Soc. A 65, 349 (1952)).

    With S = C⁻¹ (the compliance; engineering shear, so S₄₄ = 1/C₄₄ for a cubic crystal),

    .. math::
       9K_V = (C_{11}+C_{22}+C_{33}) + 2(C_{12}+C_{23}+C_{13}), \qquad
       15G_V = (C_{11}+C_{22}+C_{33}) - (C_{12}+C_{23}+C_{13}) + 3(C_{44}+C_{55}+C_{66}),

       1/K_R = (S_{11}+S_{22}+S_{33}) + 2(S_{12}+S_{23}+S_{13}), \qquad
       15/G_R = 4(S_{11}+S_{22}+S_{33}) - 4(S_{12}+S_{23}+S_{13}) + 3(S_{44}+S_{55}+S_{66}),

    K_H = (K_V + K_R)/2, G_H = (G_V + G_R)/2.  The tensor is symmetrised, ½(C + Cᵀ), first.  Units: those of
    C.  Singular (cond > 10¹²) or non-finite tensors give NaN for the Reuss and Hill values (Voigt values
    are still given for finite C).  Vectorised over leading axes; a single tensor gives floats.
    """
    C = np.asarray(C, dtype=np.float64)
    if C.ndim < 2 or C.shape[-2:] != (6, 6):
        raise ValueError(f"C: expected a (..., 6, 6) Voigt tensor, got shape {C.shape}")
    C = 0.5 * (C + np.swapaxes(C, -1, -2))
    finite = np.all(np.isfinite(C), axis=(-1, -2))
    safe = np.where(finite[..., None, None], C, np.eye(6))
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(safe)
        ok = finite & np.isfinite(cond) & (cond < 1e12)
        S = np.linalg.inv(np.where(ok[..., None, None], safe, np.eye(6)))

    def parts(M: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = M[..., 0, 0] + M[..., 1, 1] + M[..., 2, 2]
        b = M[..., 0, 1] + M[..., 1, 2] + M[..., 0, 2]
        c = M[..., 3, 3] + M[..., 4, 4] + M[..., 5, 5]
        return a, b, c

    a, b, c = parts(C)
    Kv = np.where(finite, (a + 2 * b) / 9.0, np.nan)
    Gv = np.where(finite, (a - b + 3 * c) / 15.0, np.nan)
    sa, sb, sc = parts(S)
    with np.errstate(all="ignore"):
        Kr = np.where(ok, 1.0 / (sa + 2 * sb), np.nan)
        Gr = np.where(ok, 15.0 / (4 * sa - 4 * sb + 3 * sc), np.nan)
        AU = 5 * Gv / Gr + Kv / Kr - 6

    def out(x: np.ndarray) -> Any:
        return float(x) if np.ndim(x) == 0 else x

    return VRH(K_voigt=out(Kv), K_reuss=out(Kr), K_hill=out(0.5 * (Kv + Kr)), G_voigt=out(Gv),
               G_reuss=out(Gr), G_hill=out(0.5 * (Gv + Gr)), universal_anisotropy=out(AU))


# ------------------------------------------------------------------------------------- compare moduli
def _group_stats(lx: np.ndarray, ly: np.ndarray, x: np.ndarray, y: np.ndarray, g: np.ndarray, n_g: int) -> dict:
    """Per-group log-space statistics by sums (vectorised over groups); x = ref, y = pred."""
    n = np.bincount(g, minlength=n_g).astype(np.float64)

    def mean(v: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.bincount(g, weights=v, minlength=n_g) / n

    def corr_slope(u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mu, mw = mean(u), mean(w)
        du, dw = u - mu[g], w - mw[g]
        suu = np.bincount(g, weights=du * du, minlength=n_g)
        sww = np.bincount(g, weights=dw * dw, minlength=n_g)
        suw = np.bincount(g, weights=du * dw, minlength=n_g)
        with np.errstate(all="ignore"):
            r = np.where((n >= 2) & (suu > 0) & (sww > 0), suw / np.sqrt(suu * sww), np.nan)
            slope = np.where((n >= 2) & (suu > 0), suw / suu, np.nan)
        return r, slope, mw - slope * mu

    r, slope, intercept = corr_slope(lx, ly)
    r_lin, _, _ = corr_slope(x, y)
    d = ly - lx
    mean_d = mean(d)
    # per-group median of d: sort by (group, d) and take the middle element(s) of each block
    order = np.lexsort((d, g))
    ds = d[order]
    start = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    cnt = n.astype(np.int64)
    lo = start + np.maximum(cnt - 1, 0) // 2
    hi = start + cnt // 2
    med = np.full(n_g, np.nan)
    has = cnt > 0
    med[has] = 0.5 * (ds[lo[has]] + ds[hi[has]])
    return {"n": cnt, "r": r, "slope": slope, "intercept": intercept, "bias": 10.0**med,
            "bias_geometric": 10.0**mean_d, "r_linear": r_lin}


def compare_moduli(pred: Any, ref: Any, strata: Any = None) -> ModuliComparison:
    r"""Log-space agreement of predicted with reference moduli, as the paper reports it.

    docs/controls.md, "Elastic constants".

    Seed 001, Methods: correlations in log space (log10 predicted against log10 AFLOW), leaving out the
    structures predicted with a non-positive modulus; the log–log slope by ordinary least squares (log10 pred
    regressed on log10 ref, so a constant-factor error gives slope 1); the median multiplicative bias
    10^median(log10 pred − log10 ref).  Also reported: the geometric-mean bias 10^mean(…), and the linear
    Pearson r on the same pairs (the paper's contrast: one wild prediction sets it).  Pairs with a
    non-positive or non-finite modulus on either side are left out and counted.

    Args:
      pred: (n,) predicted moduli (GPa).
      ref: (n,) reference moduli (GPa).
      strata: optional (n,) labels (e.g. "+U" / "no +U"); each stratum gets its own comparison, keyed by
        ``str(label)``.

    Returns:
      :class:`ModuliComparison` (the pooled comparison, with ``strata`` filled when labels are given).
    """
    y = np.asarray(pred, dtype=np.float64)
    x = np.asarray(ref, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"pred: expected a 1-D array of moduli, got shape {y.shape}")
    if x.shape != y.shape:
        raise ValueError(f"ref: expected shape {y.shape} (as pred), got {x.shape}")
    labels = None
    if strata is not None:
        labels = np.asarray(strata)
        if labels.shape != y.shape:
            raise ValueError(f"strata: expected one label per modulus, shape {y.shape}, got {labels.shape}")
    with np.errstate(invalid="ignore"):
        keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log10(x[keep]), np.log10(y[keep])

    def build(stats: dict, i: int, excluded: int) -> ModuliComparison:
        return ModuliComparison(n=int(stats["n"][i]), n_excluded=int(excluded), r=float(stats["r"][i]),
                                slope=float(stats["slope"][i]), intercept=float(stats["intercept"][i]),
                                bias=float(stats["bias"][i]), bias_geometric=float(stats["bias_geometric"][i]),
                                r_linear=float(stats["r_linear"][i]))

    pooled = _group_stats(lx, ly, x[keep], y[keep], np.zeros(lx.size, np.int64), 1)
    result = build(pooled, 0, int((~keep).sum()))
    if labels is None:
        return result
    names, inv = np.unique(labels.astype(str), return_inverse=True)
    per = _group_stats(lx, ly, x[keep], y[keep], inv[keep], len(names))
    excluded = np.bincount(inv[~keep], minlength=len(names))
    return dataclasses.replace(result, strata={str(nm): build(per, i, excluded[i]) for i, nm in enumerate(names)})
