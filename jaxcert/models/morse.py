r"""Morse pair potential with ASE's smooth quintic cutoff.

.. math::  E = \tfrac12 \sum_{i \ne j} \varepsilon\, e^{\rho_0(1 - r/r_0)}\,(e^{\rho_0(1 - r/r_0)} - 2)\, f_c(r),

f_c the C² quintic smoothstep between ``rcut1·r0`` and ``rcut2·r0`` (ASE
``ase.calculators.morse``; matches ``MorsePotential`` term for term).  With
``element`` given, r₀ = d_nn(el) (reference-crystal NN) and ε = E_coh/8.610 eV,
the same composition rule as the reference LJ; otherwise ASE's defaults
(ε = 1 eV, ρ₀ = 6, r₀ = 1 Å, rcut1 = 1.9, rcut2 = 2.7).  Any element.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxcert.core.elements import cohesive_energy, d_nn
from jaxcert.core.model import Model
from jaxcert.core.neighbors import pairs
from jaxcert.models._common import pair_sum


def quintic_cutoff(r, r1, r2):
    """ASE/JuLIP C² smoothstep: 1 for r ≤ r1, 0 for r ≥ r2."""
    s = 1.0 - (r - r1) / (r2 - r1)
    poly = 6.0 * s**5 - 15.0 * s**4 + 10.0 * s**3
    return jnp.where(s >= 1.0, 1.0, jnp.where(s > 0.0, poly, 0.0))


def morse(
    element: str | int | None = None,
    epsilon: float | None = None,
    rho0: float = 6.0,
    r0: float | None = None,
    rcut1: float = 1.9,
    rcut2: float = 2.7,
    name: str = "morse",
) -> Model:
    """Morse model; parameters in eV and Å (``rcut1``, ``rcut2`` in units of r0).

    With ``element`` the well sits at the element's nearest-neighbour distance d_nn and its depth is the
    cohesive energy / 8.61 (an fcc crystal's twelve bonds, less the relaxation).  Without an element or an
    explicit ``r0`` the parameters are ASE's placeholders (r0 = 1 Å, ε = 1 eV), which describe no material: the
    model's ``info["warning"]`` says so, and ``jaxcert certify`` prints it before the table, because on a real
    element's structures most pairs then sit beyond the 2.7 Å cutoff and the probes fail for that reason.
    """
    placeholder = element is None and r0 is None
    if element is not None:
        r0 = d_nn(element) if r0 is None else r0
        epsilon = cohesive_energy(element) / 8.610 if epsilon is None else epsilon
    epsilon = 1.0 if epsilon is None else float(epsilon)
    r0 = 1.0 if r0 is None else float(r0)
    rc = rcut2 * r0

    def energy(params, s):
        eps_, rho_, r0_ = params
        p = pairs(s, rc)
        expf = jnp.exp(rho_ * (1.0 - p.r / r0_))
        phi = eps_ * expf * (expf - 2.0) * quintic_cutoff(p.r, rcut1 * r0_, rcut2 * r0_)
        return pair_sum(phi, p)

    return Model(
        energy_fn=energy,
        params=(jnp.asarray(epsilon), jnp.asarray(float(rho0)), jnp.asarray(r0)),
        name=name,
        cutoff=rc,
        info=(("source", "ASE MorsePotential"), ("units", "eV, Å"))
        + ((("warning", f"morse without an element: r0 = {r0:g} Å, ε = {epsilon:g} eV and the cutoff {rc:g} Å are "
             "placeholders, not a material's; most pairs of a real element's structures lie beyond the cutoff, "
             "so zero_modes and others fail for that reason (build it with jaxcert.models.get('morse', "
             "element='Cu') or give r0)"),) if placeholder else ()),
    )
