"""One sentence per probe: the identity it tests and what a failure means for a simulation.

The sentences are shown beside every probe row of the terminal table
(:meth:`jaxcert.report.certification.Report.table`), the HTML report (``jaxcert/report/html.py``) and
the comparison board (``jaxcert/report/compare.py``, ``docs/compare.md``).  They summarise
the probe modules' docstrings (``jaxcert/probes/<name>.py``), which hold the
precise definitions.  The "Reading a report" section of ``docs/reports.md`` is
generated from this module (``python3 -m jaxcert.report.explain``) and a test keeps the
two in step.

Each entry reads "<identity>; a failure means <consequence>".
"""

from __future__ import annotations

import textwrap

__all__ = ["EXPLANATIONS", "SHORT_NAMES", "explain", "short_name", "wrapped", "markdown", "DOC_BEGIN", "DOC_END"]

#: Probe name (``"lam"`` also for ``jaxcert lambda``, the λ benchmark) → one sentence.
EXPLANATIONS: dict[str, str] = {
    "conservativeness": (
        "Along a bond stretch the force output equals minus the slope of the energy, F_j·û = −dE/ds; "
        "a failure means forces and energy disagree, so energies reported along an MD run or a reaction path "
        "do not belong to the forces that move the atoms, and relaxations stop where the energy is not minimal."
    ),
    "equivariance": (
        "Rotating the structure leaves the energy unchanged and turns the forces with it, E(QR) = E(R) and "
        "F(QR) = Q F(R); a failure means the result depends on how the system is oriented in space, so rotated "
        "copies of one structure get different energies and MD exerts a spurious net torque."
    ),
    "smoothness": (
        "Along a bond scan the energy and the force vary smoothly: no jumps or kinks in the force, no spurious "
        "sign changes, one minimum and no back-and-forth of the force; a failure means a rough or rippled "
        "potential, on which MD loses energy at every kink and optimisers stall in false minima."
    ),
    "stress_consistency": (
        "The stress output is the strain derivative of the energy, σ = (1/V) ∂E/∂ε; a failure means pressure "
        "and energy disagree, so NPT runs, cell relaxations and equations of state settle at inconsistent "
        "volumes."
    ),
    "parity": (
        "The stress of a crystal equals that of its inversion image, since stress is a polar, parity-even "
        "tensor; a failure means the model tells a structure from its mirror image in a way physics forbids, "
        "so stresses and relaxed cells of low-symmetry crystals are biased."
    ),
    "representation": (
        "Re-describing one periodic crystal (an equivalent sheared cell, a 2×2×2 supercell, a rigid shift, a "
        "relabelling of the atoms) leaves the energy per atom and the forces unchanged; a failure means the "
        "answer depends on bookkeeping, so supercell size, cell choice or atom order change the simulation."
    ),
    "cross_maxwell": (
        "The mixed second derivatives agree (the position derivative of the stress matches the strain "
        "derivative of the forces, and the strain derivative of the stress is symmetric); a failure means "
        "forces, stress and energy are not derivatives of one function, so elastic constants and internal "
        "relaxations under strain cannot be trusted."
    ),
    "betti": (
        "Maxwell–Betti reciprocity ∂F_α/∂R_β = ∂F_β/∂R_α: pushing one coordinate and reading the force on "
        "another gives the same as the reverse; a failure means the forces are not the gradient of any energy, "
        "so NVE molecular dynamics does not conserve energy."
    ),
    "zero_modes": (
        "At the model's own minimum the Hessian annihilates rigid translations (and, for a cluster, rotations) "
        "and has no negative modes, H v = 0; a failure means moving the whole system costs energy or the "
        "minimum is not one, so phonon spectra get spurious acoustic frequencies and relaxed structures drift."
    ),
    "trimer": (
        "The three-body energy ΔE₃ = E_ABC − (E_AB + E_BC + E_CA) + (E_A + E_B + E_C) dies away as one atom is "
        "pulled off, and the force Jacobian is symmetric, wᵀJu = uᵀJw; a failure means many-body terms reach "
        "unphysically far or the forces carry curl, so dissociation and long-range behaviour are wrong."
    ),
    "reversibility": (
        "Velocity-Verlet run forward and then with reversed velocities brings the atoms back to their start, "
        "R(2n) = R(0); a failure means the forces are rough, noisy or depend on history, so trajectories are "
        "not reproducible and the MD energy wanders."
    ),
    "config_temperature": (
        "On a thermostatted trajectory the configurational temperature ⟨|F|²⟩/(k_B⟨Tr H⟩) equals the kinetic "
        "temperature; a failure means the sampled states are not the Boltzmann distribution of any energy "
        "(a curl force keeps pumping in heat), so thermostatted MD samples the wrong ensemble."
    ),
    "equipartition": (
        "Every vibrational normal mode holds k_BT/2 of potential energy, ω_α²⟨Q_α²⟩ = k_BT; a failure means "
        "energy piles up in some modes, so MD averages such as heat capacities, vibrational spectra and free "
        "energies are biased."
    ),
    "virial": (
        "The Clausius virial about the minimum balances the internal kinetic energy, ⟨W⟩ = 2⟨K_int⟩ with "
        "W = −Σ_i (R_i − R_i^eq)·F_i; a failure means the forces do not hold the atoms the way a potential "
        "would, so pressures and structural averages from MD are off."
    ),
    "lam": (
        "λ = ‖J_anti‖/‖J‖, the antisymmetric share of the force Jacobian J = ∂F/∂R, is zero for forces that are "
        "the gradient of an energy; a failure means λ stands above the round-off floor because the forces carry "
        "curl, so NVE MD heats or cools without any physical cause."
    ),
}

#: Short column labels for the terminal comparison board (``jaxcert compare``).
SHORT_NAMES: dict[str, str] = {
    "conservativeness": "conserv", "equivariance": "equivar", "smoothness": "smooth", "stress_consistency": "stress",
    "parity": "parity", "representation": "repr", "cross_maxwell": "x_maxw", "betti": "betti",
    "zero_modes": "zero_m", "trimer": "trimer", "reversibility": "revers", "config_temperature": "T_conf",
    "equipartition": "equipart", "virial": "virial", "lam": "λ",
}

#: Markers around the generated section of ``docs/reports.md``.
DOC_BEGIN = "<!-- generated by python3 -m jaxcert.report.explain: begin -->"
DOC_END = "<!-- generated by python3 -m jaxcert.report.explain: end -->"


def explain(name: str) -> str | None:
    """The sentence for probe ``name``; ``None`` for a probe without one."""
    return EXPLANATIONS.get(name)


def short_name(name: str) -> str:
    """A column label of at most 8 characters (the name itself for a probe without a short label)."""
    return SHORT_NAMES.get(name, name)


def wrapped(names: list[str], width: int = 110, title: str | None = None) -> list[str]:
    """Terminal lines ``name  sentence`` for ``names``, wrapped at ``width`` with a hanging indent."""
    known = [n for n in names if n in EXPLANATIONS]
    if not known:
        return []
    w = max(len(n) for n in known) + 2
    lines = [title] if title else []
    for n in known:
        body = textwrap.wrap(EXPLANATIONS[n], width=max(width - w - 2, 30), break_on_hyphens=False)
        lines.append("  " + n.ljust(w) + body[0])
        lines.extend(" " * (w + 2) + b for b in body[1:])
    return lines


def markdown() -> str:
    """The generated "what each probe tests" list of ``docs/reports.md`` (between the markers)."""
    out = [DOC_BEGIN, "", "| probe | identity tested; what a failure means |", "|---|---|"]
    out += [f"| `{name}` | {text.replace('|', chr(92) + '|')} |" for name, text in EXPLANATIONS.items()]
    out += ["", DOC_END]
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover - regenerates the docs section
    print(markdown())
