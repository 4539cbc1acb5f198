r"""Equations of state and the Δ metric (``docs/controls.md``, "Equations of state and the Δ metric").

Third-order Birch–Murnaghan (BM) energy per atom, with :math:`\eta = (V_0/V)^{2/3}`,

.. math::  E(V) = E_0 + \tfrac{9}{16} V_0 B_0 \left\{ (\eta - 1)^3 B' + (\eta - 1)^2 (6 - 4\eta) \right\},

is a cubic polynomial in :math:`x = V^{-2/3}`. :func:`birch_murnaghan_fit` therefore fits
:math:`E = \sum_{k=0}^{3} c_k x^k` by *linear* least squares, as the Δ project's ``eosfit.py`` does, and
reads the parameters off the cubic's minimum :math:`x_0`: :math:`V_0 = x_0^{-3/2}`,
:math:`B_0 = \tfrac49 E_{xx} x_0^{7/2}` and :math:`B' = 4 + \tfrac23 x_0 E_{xxx}/E_{xx}` (derivatives of
the cubic at :math:`x_0`). On data that lie on a BM curve the fit is exact; on any other data it is the
least-squares BM curve (the same optimum as a non-linear BM fit of E(V), without starting values).

The Δ metric (Lejaeghere et al., Science 351, aad3000 (2016), and its supplement) compares two EOS by
the root-mean-square energy difference of their BM curves, both with the minimum at zero, over the
volume interval :math:`[0.94\,\bar V_0, 1.06\,\bar V_0]` with :math:`\bar V_0` the mean of the two
equilibrium volumes (the "symmetric" definition, the default of the project's ``calcDelta.py``):

.. math::  \Delta = \sqrt{ \frac{1}{V_f - V_i} \int_{V_i}^{V_f} [E_a(V) - E_b(V)]^2 \, dV } .

:func:`delta_gauge` integrates with 16-point Gauss–Legendre quadrature: the integrand is analytic on the
interval and its nearest singularity (V = 0) lies 1/0.06 ≈ 17 half-widths away, so the quadrature error
falls as ~33^(−2n) and is below round-off. (The closed form — the squared difference of two cubics in
:math:`x`, integrated term by term with :math:`\int x^n dV = 3 V^{(3-2n)/3}/(3-2n)` — is exact in exact
arithmetic but loses about six digits to cancellation, since its coefficients are ~10 eV and Δ ~1 meV.)
Each curve's energy is evaluated in the (η − 1) form, which has no such cancellation. A code's Δ over a
set of crystals is the mean of the per-crystal values.

:func:`eos_scan` evaluates a :class:`jaxcert.Model` on the Δ protocol's seven volumes (94 … 106 % of a
centre volume, cell scaled isotropically at fixed fractional coordinates, no relaxation) in one vmapped,
jitted call and fits the result.

Units: volumes Å³/atom, energies eV/atom, B0 GPa, Δ meV/atom.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ase.units import GPa as _GPA_IN_EV_PER_A3

from jaxcert.controls._result import ControlResult

__all__ = [
    "EosFit", "EosScan", "birch_murnaghan_energy", "birch_murnaghan_fit", "delta_gauge", "eos_scan",
    "DELTA_VOLUME_FACTORS", "EV_PER_A3_IN_GPA",
]

#: 1 eV/Å³ in GPa (ASE's CODATA-2014 units, as ``ase.eos``).
EV_PER_A3_IN_GPA: float = 1.0 / _GPA_IN_EV_PER_A3

#: The Δ protocol's volume set: 94, 96, …, 106 % of the equilibrium volume.
DELTA_VOLUME_FACTORS: np.ndarray = np.linspace(0.94, 1.06, 7)
DELTA_VOLUME_FACTORS.setflags(write=False)


def _as_array(x: Any, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric, got {type(x).__name__}") from None
    return a


def _scalar_or_array(a: np.ndarray) -> np.ndarray | float | bool:
    if a.ndim == 0:
        return a.item()
    a.setflags(write=False)
    return a


def birch_murnaghan_energy(volumes: Any, e0: Any, v0: Any, b0: Any, b1: Any) -> np.ndarray:
    """Third-order BM energy (eV/atom) at ``volumes`` (Å³/atom); ``b0`` in GPa, ``b1`` dimensionless.

    Broadcasts over all arguments (module docstring for the formula).
    """
    V = _as_array(volumes, "volumes")
    e0, v0, b0, b1 = (_as_array(a, n) for a, n in ((e0, "e0"), (v0, "v0"), (b0, "b0"), (b1, "b1")))
    if np.any(V <= 0) or np.any(v0 <= 0):
        raise ValueError("volumes and v0 must be positive (Å³/atom)")
    eta = (v0 / V) ** (2.0 / 3.0)
    b = b0 / EV_PER_A3_IN_GPA
    return e0 + 9.0 * v0 * b / 16.0 * ((eta - 1.0) ** 3 * b1 + (eta - 1.0) ** 2 * (6.0 - 4.0 * eta))


@dataclasses.dataclass(frozen=True)
class EosFit(ControlResult):
    """Birch–Murnaghan parameters of one EOS curve, or arrays over a batch of curves.

    Attributes:
      e0: minimum energy, eV/atom.  v0: equilibrium volume, Å³/atom.  b0: bulk modulus, GPa.
      b1: pressure derivative B′ (dimensionless).
      residual_rms: root-mean-square residual of the fit, eV/atom (0 for data on a BM curve).
      in_range: True where ``v0`` lies inside the sampled volumes (otherwise an extrapolation).
      n_points: volumes per curve.
      NaN parameters mark a curve whose cubic has no minimum (e.g. concave data) or NaN energies.
    """

    e0: np.ndarray | float
    v0: np.ndarray | float
    b0: np.ndarray | float
    b1: np.ndarray | float
    residual_rms: np.ndarray | float
    in_range: np.ndarray | bool
    n_points: int


def birch_murnaghan_fit(volumes: Any, energies: Any) -> EosFit:
    """Fit the third-order BM EOS by linear least squares in V^(-2/3) (module docstring).

    Args:
      volumes: (m,) or (..., m) volumes per atom, Å³ (shared by every curve, or one row per curve).
      energies: (..., m) energies per atom, eV; leading axes are a batch of curves.

    Returns:
      :class:`EosFit` with fields of the batch shape (plain floats for a single curve). A curve with a NaN
      energy, or whose fitted cubic has no minimum, gets NaN parameters (no exception), so a batch over
      many models and crystals keeps going.

    Raises:
      ValueError: fewer than 4 volumes, non-positive or non-finite volumes, all-equal volumes in a curve, or
        shapes that do not match.
    """
    E = _as_array(energies, "energies")
    V = _as_array(volumes, "volumes")
    if E.ndim == 0:
        raise ValueError("energies must have a last axis of volumes, got a scalar")
    try:
        V = np.broadcast_to(V, E.shape)
    except ValueError:
        raise ValueError(f"volumes {np.shape(volumes)} do not broadcast to energies {E.shape}") from None
    m = E.shape[-1]
    if m < 4:
        raise ValueError(f"energies: a BM fit needs at least 4 volumes per curve, got {m}")
    if not np.all(np.isfinite(V)) or np.any(V <= 0):
        raise ValueError("volumes must be finite and positive (Å³/atom)")
    vmin, vmax = V.min(axis=-1), V.max(axis=-1)
    if np.any(vmax - vmin <= 1e-12 * vmax):
        raise ValueError("volumes: every curve needs distinct volumes")

    x = V ** (-2.0 / 3.0)
    xm = x.mean(axis=-1, keepdims=True)
    xs = 0.5 * (x.max(axis=-1, keepdims=True) - x.min(axis=-1, keepdims=True))
    t = (x - xm) / xs  # in [-1, 1]: a well-conditioned cubic basis
    A = t[..., None] ** np.arange(4)  # (..., m, 4)
    c = np.einsum("...km,...m->...k", np.linalg.pinv(A), E)
    c0, c1, c2, c3 = np.moveaxis(c, -1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        disc = c2 * c2 - 3.0 * c1 * c3
        root = np.sqrt(np.where(disc >= 0, disc, np.nan))
        den = c2 + root  # the minimum's root in its cancellation-free form: t0 = -c1 / (c2 + sqrt(disc))
        t0 = np.where(den > 0, -c1 / den, np.nan)
        xs0, xm0 = xs[..., 0], xm[..., 0]
        x0 = xm0 + xs0 * t0
        x0 = np.where(x0 > 0, x0, np.nan)
        e0 = c0 + t0 * (c1 + t0 * (c2 + t0 * c3))
        exx = 2.0 * root / xs0**2  # = (2 c2 + 6 c3 t0) / s^2 at the minimum
        exxx = 6.0 * c3 / xs0**3
        v0 = x0 ** (-1.5)
        b0 = 4.0 / 9.0 * exx * x0**3.5 * EV_PER_A3_IN_GPA
        b1 = 4.0 + 2.0 / 3.0 * x0 * exxx / exx
        fitted = np.einsum("...mk,...k->...m", A, c)
        rms = np.sqrt(np.mean((fitted - E) ** 2, axis=-1))
        in_range = (v0 >= vmin) & (v0 <= vmax)
    return EosFit(
        e0=_scalar_or_array(np.asarray(e0)), v0=_scalar_or_array(np.asarray(v0)),
        b0=_scalar_or_array(np.asarray(b0)), b1=_scalar_or_array(np.asarray(b1)),
        residual_rms=_scalar_or_array(np.asarray(rms)), in_range=_scalar_or_array(np.asarray(in_range)),
        n_points=int(m),
    )


#: Gauss–Legendre nodes and weights on [-1, 1] for the Δ integral (module docstring).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


def _bm_relative(V: np.ndarray, v0: np.ndarray, b: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """E − E0 of a BM curve (b in eV/Å³), in the (η − 1) form, which keeps small energies free of cancellation."""
    g = (v0 / V) ** (2.0 / 3.0) - 1.0
    return 9.0 * v0 * b / 16.0 * g * g * (g * b1 + 2.0 - 4.0 * g)


def delta_gauge(v0_a: Any, b0_a: Any, b1_a: Any, v0_b: Any, b0_b: Any, b1_b: Any, *,
                window: float = 0.06, center: str = "mean") -> np.ndarray | float:
    """The Δ metric between EOS ``a`` and EOS ``b``, meV/atom (module docstring; Lejaeghere et al. 2016).

    Args:
      v0_a, b0_a, b1_a: first EOS: V0 (Å³/atom), B0 (GPa), B′; arrays broadcast (one Δ per crystal).
      v0_b, b0_b, b1_b: second EOS, same units.
      window: half-width of the volume interval as a fraction of the centre volume (0.06: ±6 %).
      center: "mean" (the symmetric definition: centre (V0_a + V0_b)/2; default), "a" or "b" (the
        older asymmetric definition, centred on that EOS's V0, e.g. on the reference's).

    Returns:
      Δ ≥ 0 in meV/atom, with the broadcast shape (a float for scalar inputs); NaN where an input is NaN.

    Raises:
      ValueError: a non-positive V0 or B0, a window outside (0, 1), or an unknown ``center``.
    """
    if not (0.0 < float(window) < 1.0):
        raise ValueError(f"window must be a fraction in (0, 1), got {window!r}")
    if center not in ("mean", "a", "b"):
        raise ValueError(f"center must be 'mean', 'a' or 'b', got {center!r}")
    args = [_as_array(x, n) for x, n in ((v0_a, "v0_a"), (b0_a, "b0_a"), (b1_a, "b1_a"),
                                           (v0_b, "v0_b"), (b0_b, "b0_b"), (b1_b, "b1_b"))]
    try:
        va, ba, pa, vb, bb, pb = np.broadcast_arrays(*args)
    except ValueError:
        raise ValueError("the six EOS parameter arrays do not broadcast to one shape") from None
    for arr, name in ((va, "v0_a"), (vb, "v0_b"), (ba, "b0_a"), (bb, "b0_b")):
        if np.any(arr <= 0):  # NaN compares False and propagates
            raise ValueError(f"{name} must be positive")
    vc = {"mean": 0.5 * (va + vb), "a": va, "b": vb}[center]
    V = vc[..., None] * (1.0 + window * _GL_NODES)  # (..., 16) nodes on [(1 - w) vc, (1 + w) vc]
    diff = (_bm_relative(V, va[..., None], ba[..., None] / EV_PER_A3_IN_GPA, pa[..., None])
            - _bm_relative(V, vb[..., None], bb[..., None] / EV_PER_A3_IN_GPA, pb[..., None]))
    mean_sq = 0.5 * np.sum(_GL_WEIGHTS * diff * diff, axis=-1)  # (1/(Vf - Vi)) ∫ dV = ½ ∫_{-1}^{1} du
    return _scalar_or_array(np.asarray(1000.0 * np.sqrt(mean_sq)))


@dataclasses.dataclass(frozen=True)
class EosScan(ControlResult):
    """Energies of one crystal on a volume set and their BM fit.

    Attributes:
      volume_factors: the volume set as fractions of the centre volume.
      center_volume: the centre volume, Å³/atom.
      volumes: the scanned volumes, Å³/atom.
      energies: the model's energies, eV/atom (NaN where the model returned NaN).
      fit: :class:`EosFit` of ``energies`` against ``volumes``.
      n_atoms: atoms in the cell.
    """

    volume_factors: np.ndarray
    center_volume: float
    volumes: np.ndarray
    energies: np.ndarray
    fit: EosFit
    n_atoms: int


def _scaled(s: Any, k: jax.Array) -> Any:
    return s.replace(positions=s.positions * k, cell=s.cell * k)


@jax.jit
def _energies_at_scales(model: Any, s: Any, scales: jax.Array) -> jax.Array:
    return jax.vmap(lambda k: model.energy_of(model.params, _scaled(s, k)))(scales)


def eos_scan(model: Any, structure: Any, volume_factors: Any = DELTA_VOLUME_FACTORS, *,
             v0: float | None = None) -> EosScan:
    """Energies per atom of ``structure`` on a volume set with ``model``, in one vmapped jitted call, and the BM fit.

    The cell is scaled isotropically with fixed fractional coordinates (the Δ protocol: no relaxation of
    cell shape or internal coordinates) to ``volume_factors × v0``.

    Args:
      model: a :class:`jaxcert.Model`.
      structure: a :class:`jaxcert.Structure` or an ``ase.Atoms`` (single, fully periodic).
      volume_factors: fractions of the centre volume (default the Δ set 0.94, 0.96, …, 1.06); ≥ 4 values.
      v0: the centre volume, Å³/atom (e.g. the WIEN2k V0 of the dcdft set); default the structure's own.

    Returns:
      :class:`EosScan` (volumes Å³/atom, energies eV/atom, ``fit`` with B0 in GPa).

    Raises:
      ValueError: a batched or non-periodic structure, fewer than 4 or non-positive volume factors, or a
        non-positive ``v0``.
    """
    from jaxcert.core.structure import Structure

    s = structure if isinstance(structure, Structure) else Structure.from_ase(structure)
    if s.positions.ndim != 2:
        raise ValueError("structure must be a single structure, not a batch")
    if not all(s.pbc):
        raise ValueError("structure must be periodic along all three axes for an equation of state")
    f = _as_array(volume_factors, "volume_factors").ravel()
    if f.size < 4 or not np.all(np.isfinite(f)) or np.any(f <= 0):
        raise ValueError("volume_factors must hold at least 4 finite, positive fractions")
    n_real = int(np.sum(np.asarray(s.mask)))
    own = float(abs(np.linalg.det(np.asarray(s.cell, np.float64)))) / n_real
    center = own if v0 is None else float(v0)
    if not np.isfinite(center) or center <= 0:
        raise ValueError(f"v0 must be a positive volume per atom in Å³, got {v0!r}")
    scales = (f * center / own) ** (1.0 / 3.0)
    # the static image count must cover the most compressed cell (the smallest plane spacing)
    tight = model.prepare(_scaled(s, float(scales.min())))
    base = s.replace(images=tight.images, image_cutoff=tight.image_cutoff)
    E = np.asarray(_energies_at_scales(model, base, jnp.asarray(scales, s.dtype)), np.float64) / n_real
    volumes = f * center
    E.setflags(write=False)
    volumes.setflags(write=False)
    f.setflags(write=False)
    return EosScan(volume_factors=f, center_volume=center, volumes=volumes, energies=E,
                   fit=birch_murnaghan_fit(volumes, E), n_atoms=n_real)
