"""Two buggy models a user could write by hand, each with one fault, for the gate-profile tests (tests/test_gates.py).

* :data:`double_counted`: a weakly bound Morse pair potential (Cu geometry, well depth scaled to 0.034 eV)
  with a smooth cosine cutoff whose hand-written ``forces_fn`` sums every pair from both ends without the ½
  of the pair sum: forces twice −∇E.  Its conservativeness defect (≈ 0.08 eV/Å) is below the reference
  gate (0.25 eV/Å), which tolerates finite-difference noise: only the exact profile catches it.
* :data:`hard_cutoff`: the same Morse energy cut at 4 Å with no switching function: E(r) jumps at 4 Å.

Both are clean in every other respect. Importable as ``tests._buggy_models:double_counted`` from the
command line (``jaxcert certify --model ...`` with the repository root on ``sys.path``).
"""

from __future__ import annotations

import jax.numpy as jnp

import jaxcert

CUTOFF = 5.0
D, A, R0 = 0.3429, 1.3588, 2.866  # Morse Cu (Girifalco & Weizer 1959), eV, 1/Å, Å


def _phi(r):
    e = jnp.exp(-A * (r - R0))
    return D * (e * e - 2.0 * e)


def _dphi(r):
    e = jnp.exp(-A * (r - R0))
    return -2.0 * A * D * (e * e - e)


def _switch(r):
    return 0.5 * (1.0 + jnp.cos(jnp.pi * r / CUTOFF)), -0.5 * jnp.pi / CUTOFF * jnp.sin(jnp.pi * r / CUTOFF)


def _energy(params, s):
    p = jaxcert.neighbors.pairs(s, cutoff=CUTOFF)
    inside = p.mask & (p.r < CUTOFF)
    fc, _ = _switch(p.r)
    return 0.5 * params["scale"] * jnp.sum(jnp.where(inside, _phi(p.r) * fc, 0.0))


def _forces_counted_twice(params, s):
    """F_i = Σ_j dφ̃/dr · (r_j − r_i)/r, with φ̃ = φ·f_c; correct up to the bug: the pair sum is taken from both
    ends (i, j) and (j, i) and each end is credited the full pair force, so every force is doubled."""
    p = jaxcert.neighbors.pairs(s, cutoff=CUTOFF)
    inside = p.mask & (p.r < CUTOFF)
    fc, dfc = _switch(p.r)
    dphi = jnp.where(inside, _dphi(p.r) * fc + _phi(p.r) * dfc, 0.0) / p.r
    one_end = jnp.stack([jnp.sum(dphi * d, axis=-1) for d in p.d], axis=-1)
    return 2.0 * params["scale"] * one_end  # the bug: 2 × the force of one end


def _energy_hard(params, s):
    p = jaxcert.neighbors.pairs(s, cutoff=CUTOFF)
    inside = p.mask & (p.r < 4.0)  # the bug: a hard cut at 4 Å, no switching
    return 0.5 * params["scale"] * jnp.sum(jnp.where(inside, _phi(p.r), 0.0))


double_counted = jaxcert.Model(_energy, params={"scale": jnp.asarray(0.1)}, name="morse-double-counted",
                               cutoff=CUTOFF, forces_fn=_forces_counted_twice)
hard_cutoff = jaxcert.Model(_energy_hard, params={"scale": jnp.asarray(1.0)}, name="morse-hard-cutoff", cutoff=CUTOFF)
#: the same model as :data:`double_counted` with its force head right, to show the gate passes a correct head
clean = jaxcert.Model(_energy, params={"scale": jnp.asarray(0.1)}, name="morse-clean", cutoff=CUTOFF,
                      forces_fn=lambda params, s: 0.5 * _forces_counted_twice(params, s))
