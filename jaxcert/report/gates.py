r"""Gate profiles: the pass/fail verdict of each probe, recomputed from its stored defect and details.

A gate answers one question: *is this identity broken by more than the arithmetic can explain?*  Two
profiles answer it with different thresholds (docs/probes.md §3.1 has the table and the calibration):

* ``exact`` (the default of ``certify``, ``assert_certified``, ``board`` and CI).  jaxcert's derivatives are
  exact, so a correct model sits at the floating-point floor of its own arithmetic.  The threshold of a
  derivative or symmetry identity is ``K · ε · S``: ε the machine epsilon of the model's compute precision
  (float32 1.19e-7, float64 2.22e-16), S the scale of the compared quantity, taken from the probe's own
  details where it records one (the largest force along the conservativeness scan, the largest Hessian
  entry betti read, the Λ-block entries of cross_maxwell, ‖H‖_F of the relaxed cluster) and otherwise a
  stated physical scale, and K a safety factor ≥ 24 times the largest clean value measured over every
  clean model we have (analytic models, the SevenNet and nequix families, CHGNet through the bridge, in
  float32 and float64).  A threshold is never looser than the reference's: ``min(reference, K ε S)``.
  The smoothness probe gets a gate here: the regularity of E(r) along its bond scan
  (:mod:`jaxcert.report.regularity`), which a hard cutoff, an energy step or a kink fails.
* ``reference`` — the published finite-difference board's gates (Reference-free certification of
  machine-learning interatomic potentials, its public implementation): five score lengths, e.g.
  conservativeness d < 0.25 eV/Å, chosen to tolerate central-difference truncation noise.  Use it to set
  jaxcert beside that board; it passes a force head off by a factor of two.

The statistical probes (config_temperature, virial, equipartition) have no gate in either profile: their
defect is not zero for a correct model (docs/probes.md §3).

Every verdict carries its threshold in words and, when it fails or does not apply, a one-line reason a
user can act on (the probe, what was measured, the limit, and the likely cause).

NumPy only (the report room imports no JAX); the reference thresholds are the probe configs' defaults,
which a test checks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from jaxcert.report.regularity import regularity

__all__ = ["PROFILES", "DEFAULT_PROFILE", "REFERENCE", "EXACT_K", "Verdict", "judge", "machine_epsilon",
           "model_precision", "precision_of_probe", "check_profile", "gated"]

#: the gate profiles, the default first
PROFILES = ("exact", "reference")
DEFAULT_PROFILE = "exact"

#: the reference (published finite-difference board) thresholds: the probe configs' ``gate*`` defaults
REFERENCE: dict[str, dict[str, float]] = {
    "conservativeness": {"d": 0.25},
    "equivariance": {"energy": 5e-3, "force": 5e-3},
    "parity": {"d": 5e-3},
    "representation": {"d": 1.0},
    "zero_modes": {"d": 1e-3},
    "trimer": {"transverse": 0.25},
    "betti": {"d": 0.1},
    "stress_consistency": {"d": 0.25},
    "cross_maxwell": {"Lambda": 0.25, "B": 0.25},
    "reversibility": {"d": 5e-3},
    "lam": {"d": 1e-4},
}

#: zero_modes' relaxation target is 1e-3 eV/Å; the exact gate's floors scale with the residual force it reached, a
#: linear-response correction that holds for a small residual only.  A relaxation that stopped above this
#: (eV/Å, ten times the target) reached no stationary point, where alone the identity holds: the exact gate fails
#: it (a non-conservative force never relaxes), instead of widening every tolerance with the residual force.
ZERO_MODES_FMAX_JUDGED = 1e-2

#: the safety factor K of each exact threshold K·ε·S (docs/probes.md §3.1 gives the largest clean value in ε·S)
EXACT_K: dict[str, float] = {
    "conservativeness": 1e4, "betti": 1e4, "trimer": 1e4, "equivariance": 1e4, "parity": 1e4,
    "cross_maxwell": 1e4, "zero_modes": 1e4,
    # sums of many terms with cancellation (a 32-atom supercell, a stress of 4.5 eV/Å³), or a chaotic
    # 200-step round trip: measured up to 3e3 ε·S
    "stress_consistency": 1e5, "reversibility": 1e5, "representation": 1e5,
    # λ over a whole molecular Jacobian: conservative models sit up to ~5e5 ε (docs/probes.md §4.16)
    "lam": 1e7,
}

#: the physical scales S where a probe records none of its own (docs/probes.md §3.1)
SCALE = {
    "force": 1.0,            # eV/Å: the floor of a force scale (a scan with vanishing forces)
    "hessian": 1.0,          # eV/Å²: the floor of a Hessian scale
    "trimer_hessian": 10.0,  # eV/Å²: the trimer records no Jacobian entries
    "cluster_energy": 100.0,  # eV: a 13-atom cluster's energy magnitude (equivariance's ē)
    "cluster_force": 10.0,   # eV/Å: a Frobenius force total of a 13-atom cluster (equivariance's f̄)
    "energy_per_atom": 1.0,  # eV/atom (representation's ΔE)
    "stress": 1e-2,          # eV/Å³ (1.6 GPa): the floor under ‖σ^E‖ in the relative stress residual
    "length": 1.0,           # Å (reversibility's round trip)
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The gate of one probe on one element under one profile.

    ``passed``: True/False, or ``None`` when the probe is not gated under the profile or did not run
    (then ``reason`` says why it did not run).  ``threshold``: the limit in words and units.
    ``reason``: one line for a failure or a skip, ``None`` for a pass."""

    passed: bool | None
    threshold: str
    reason: str | None = None


def machine_epsilon(precision: str) -> float:
    """The floor ε of ``"float32"`` or ``"float64"`` (anything else counts as float64).

    With the suffix ``"+fd"`` (a bridged model whose second derivatives came from central differences of its
    exact forces, :func:`precision_of_probe`), the floor of those differences instead: the truncation h² at the
    reference's step h = max(1e-3, (10ε)^(1/3)) (docs/probes.md §1.5), 1e-6 in float64 and 1.1e-4 in float32."""
    text = str(precision)
    eps = float(np.finfo(np.float32 if text.startswith("float32") else np.float64).eps)
    if text.endswith("+fd"):
        h = max(1e-3, (10.0 * eps) ** (1.0 / 3.0))
        return max(eps, h * h)
    return eps


def precision_of_probe(precision: str, host_evaluations: Mapping[str, Any] | None) -> str:
    """``precision``, or ``precision + "+fd"`` when the probe's host-side model evaluations include
    finite-difference gradients (a bridged model with ``hvp="fd"`` or an ASE calculator): its second derivatives
    then carry the central-difference floor, not the machine's (:func:`machine_epsilon`)."""
    fd = (host_evaluations or {}).get("fd_gradient") if isinstance(host_evaluations, Mapping) else None
    return f"{precision}+fd" if fd else precision


def model_precision(model: Mapping[str, Any] | None, card: Mapping[str, Any] | None, dtype: str) -> str:
    """The precision the model computes in: its own (``model.precision`` or the card's) when it states
    float32 or float64, else the structures' dtype (a model that follows its inputs)."""
    for src in (model or {}, card or {}):
        p = str(src.get("precision") or "")
        if p in ("float32", "float64"):
            return p
    return "float32" if "32" in str(dtype) else "float64"


def check_profile(profile: str, name: str = "gates") -> str:
    """``profile`` if it is a known profile, else :class:`ValueError` naming ``name`` and the choices."""
    if profile not in PROFILES:
        raise ValueError(f"{name}: unknown gate profile {profile!r}; use one of {', '.join(PROFILES)}")
    return profile


def _f(x: Any) -> float:
    try:
        v = float(np.asarray(x, float).reshape(()))
    except (TypeError, ValueError):
        return float("nan")
    return v


def _g(x: float) -> str:
    return f"{x:.3g}"


def _first_line(text: Any, limit: int = 300) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line[:limit]


def _bound(profile: str, probe: str, ref: float, eps: float, scale: float) -> float:
    """The threshold: the reference's, or min(reference, K·ε·S) under ``exact``."""
    if profile == "reference":
        return ref
    return min(ref, EXACT_K[probe] * eps * scale)


def _limit_text(profile: str, probe: str, value: float, ref: float, eps: float, scale: float, unit: str) -> str:
    if profile == "reference" or value >= ref:
        return f"< {_g(ref)}{unit} (reference)"
    return f"< {_g(value)}{unit} (K·ε·S = {EXACT_K[probe]:.0e}·{eps:.2g}·{_g(scale)})"


# ----------------------------------------------------------------------------------------------- per probe
# Each judge takes (defect, details, profile, eps) and returns (passed, threshold text, reason or None).

Judge = Callable[[float, Mapping[str, Any], str, float], tuple[bool, str, str | None]]


def _single(probe: str, unit: str, what: str, cause: str, scale_of: Callable[[Mapping[str, Any]], float],
            value_of: Callable[[float, Mapping[str, Any], str], float] | None = None) -> Judge:
    """A gate ``value < threshold`` on one number (the defect unless ``value_of`` says otherwise)."""
    def judge_one(defect: float, det: Mapping[str, Any], profile: str, eps: float):
        ref = REFERENCE[probe]["d"]
        scale = scale_of(det)
        limit = _bound(profile, probe, ref, eps, scale)
        value = defect if value_of is None or profile == "reference" else value_of(defect, det, profile)
        text = _limit_text(profile, probe, limit, ref, eps, scale, unit)
        ok = bool(np.isfinite(value) and value < limit)
        reason = None if ok else f"{what} {_g(value)}{unit} ≥ {_g(limit)}{unit}: {cause}"
        return ok, text, reason
    return judge_one


def _max_abs(det: Mapping[str, Any], key: str, floor: float) -> float:
    arr = np.abs(np.asarray(det.get(key, []), float))
    arr = arr[np.isfinite(arr)]
    return max(float(arr.max()) if arr.size else 0.0, floor)


def _betti_scale(det: Mapping[str, Any]) -> float:
    pairs = np.asarray(det.get("pairs", []), float)
    if pairs.ndim != 2 or pairs.shape[1] < 4:
        return SCALE["hessian"]
    return max(float(np.nanmax(np.abs(pairs[:, 2:4]))), SCALE["hessian"])


def _stress_relative(defect: float, det: Mapping[str, Any], profile: str) -> float:
    """‖σ^pred − σ^E‖_T / (‖σ^E‖_T + 1e-2 eV/Å³): the relative residual with a floor under a near-zero stress."""
    a = np.asarray(det.get("stress_pred_voigt", []), float)
    b = np.asarray(det.get("stress_fd_voigt", []), float)
    if a.shape != (6,) or b.shape != (6,):
        return defect
    w = np.array([1, 1, 1, 2, 2, 2], float)
    return float(np.sqrt(np.sum(w * (a - b) ** 2)) / (np.sqrt(np.sum(w * b * b)) + SCALE["stress"]))


def _equivariance(defect, det, profile, eps):
    ref = REFERENCE["equivariance"]
    e_bar, f_bar = _f(det.get("energy_residual")), _f(det.get("force_residual"))
    le = _bound(profile, "equivariance", ref["energy"], eps, SCALE["cluster_energy"])
    lf = _bound(profile, "equivariance", ref["force"], eps, SCALE["cluster_force"])
    text = (f"ē {_limit_text(profile, 'equivariance', le, ref['energy'], eps, SCALE['cluster_energy'], ' eV')} and "
            f"f̄ {_limit_text(profile, 'equivariance', lf, ref['force'], eps, SCALE['cluster_force'], ' eV/Å')}")
    bad = []
    if not (np.isfinite(e_bar) and e_bar < le):
        bad.append(f"the energy changes by {_g(e_bar)} eV under rotation (limit {_g(le)} eV)")
    if not (np.isfinite(f_bar) and f_bar < lf):
        bad.append(f"the forces miss rotating with the structure by {_g(f_bar)} eV/Å (limit {_g(lf)} eV/Å)")
    return not bad, text, ("; ".join(bad) + ": the model is not rotation-equivariant") if bad else None


def _zero_modes(defect, det, profile, eps):
    ref = REFERENCE["zero_modes"]["d"]
    expected = det.get("expected_modes")
    lam = np.asarray(det.get("eigenvalues", []), float)
    lam = lam[np.isfinite(lam)]
    if profile == "reference" or lam.size == 0 or expected is None:
        limit = ref
        count = int(_f(det.get("mode_count_error", 0)) or 0)
        neg = int(_f(det.get("n_negative_modes", 0)) or 0)
        near = det.get("n_near_zero")
        tol = _f(det.get("tol"))
        text = (f"d₀ < {_g(ref)} (reference), exactly {expected} modes below {_g(tol)} eV/Å² (1 % of the "
                "stiffest), none negative")
        soft = ""
    else:
        h_norm = float(np.sqrt(np.sum(lam ** 2)))
        fmax = _f(det.get("relax_fmax_reached"))
        fmax = fmax if np.isfinite(fmax) else 0.0
        # rigid rotations are annihilated only at F = 0: the relaxation's residual force sets their floor, an
        # eigenvalue of about 0.1·fmax per Å on every clean model; a mode is zero when it is below fmax/(1 Å)
        # or the round-off of the spectrum, and soft-but-resolved modes are not zero modes
        floor = 10.0 * fmax / h_norm if h_norm > 0 else 0.0
        limit = min(ref, max(EXACT_K["zero_modes"] * eps, floor))
        tol = max(100.0 * eps * float(np.max(np.abs(lam))), fmax / 1.0)
        near = int(np.sum(np.abs(lam) < tol))
        count = abs(near - int(_f(expected)))
        neg = int(np.sum(lam < -tol))
        text = (f"d₀ < {_g(limit)} (max(K·ε, 10·fmax/‖H‖_F)), at least {expected} modes below {_g(tol)} eV/Å² "
                "(fmax/1 Å, or 100·ε·max|λ|), none below minus that")
        n_soft = int(np.sum((np.abs(lam) >= tol) & (np.abs(lam) < _f(det.get("tol", 0.0)))))
        extra = near - int(_f(expected))
        # the count is a property of the model on this cluster, not an identity: a model without dihedral
        # terms inside its cutoff has true torsional zero modes on a 13-atom diamond cut (Stillinger–Weber),
        # and a soft cluster has soft modes; both are reported, not gated
        soft = "".join([
            f"; {extra} extra zero mode{'s' if extra > 1 else ''} reported, not gated (torsions or atoms the cutoff"
            " leaves free on this cluster)" if extra > 0 else "",
            f"; {n_soft} soft mode{'s' if n_soft > 1 else ''} below 1 % of the stiffest, resolved as non-zero"
            if n_soft else ""])
        count = max(0, -extra)  # fewer zero modes than rigid motions: the rigid motions are not annihilated
    bad = []
    if not (np.isfinite(defect) and defect < limit):
        bad.append(f"the Hessian does not annihilate rigid motions: d₀ = {_g(defect)} ≥ {_g(limit)}")
    if count:
        if profile == "exact":
            why = ": fewer zero modes than rigid motions, so the energy is not invariant under them"
        elif det.get("relax_converged") is False:
            why = "; the relaxation did not converge"
        else:
            why = ": soft or extra zero modes at the relaxed geometry (an atom outside the cutoff, or a floppy cluster)"
        bad.append(f"{near if near is not None else '?'} zero modes where {expected} are expected (count error "
                   f"{count}){why}")
    if neg:
        bad.append(f"{neg} negative mode{'s' if neg > 1 else ''}: the relaxation stopped at a saddle, not a minimum")
    if profile == "exact":
        fmax = _f(det.get("relax_fmax_reached"))
        stopped = det.get("relax_converged") is not None and not bool(det.get("relax_converged"))
        if stopped and not (np.isfinite(fmax) and fmax <= ZERO_MODES_FMAX_JUDGED):
            text += f"; the relaxation reached fmax ≤ {_g(ZERO_MODES_FMAX_JUDGED)} eV/Å"
            bad.append(f"the relaxation stopped at fmax = {_g(fmax)} eV/Å, not at a stationary point, where alone "
                       "rigid motions are zero modes (a force that is not a gradient never relaxes)")
    return not bad, text + soft, "; ".join(bad) if bad else None


def _trimer(defect, det, profile, eps):
    ref = REFERENCE["trimer"]["transverse"]
    sub = det.get("sub_defects") or {}
    d_perp = _f(sub.get("transverse", (det.get("transverse") or {}).get("mean_abs_antisymmetry")))
    limit = _bound(profile, "trimer", ref, eps, SCALE["trimer_hessian"])
    text = "d_⊥ " + _limit_text(profile, "trimer", limit, ref, eps, SCALE["trimer_hessian"], " eV/Å²")
    ok = bool(np.isfinite(d_perp) and d_perp < limit)
    return ok, text, None if ok else (
        f"transverse Jacobian asymmetry d_⊥ = {_g(d_perp)} eV/Å² ≥ {_g(limit)} eV/Å²: the forces carry curl"
        " (they are not the gradient of an energy)")


def _cross_maxwell(defect, det, profile, eps):
    ref = REFERENCE["cross_maxwell"]
    d_b = _f(det.get("d_B"))
    if profile == "reference":
        d_l, ll, lb = _f(det.get("d_Lambda")), ref["Lambda"], ref["B"]
        text = f"d_Λ < {_g(ll)} and d_B < {_g(lb)} (reference)"
    else:
        # the Λ residuals |lhs + rhs'| relative to the block's scale (entry-wise ratios blow up on the
        # symmetry-zero entries a random pair often samples)
        pairs = np.asarray(det.get("pairs", []), float)
        corr = np.asarray(det.get("prestress_force_term", []), float)
        if pairs.ndim == 2 and pairs.shape[1] >= 4 and corr.shape == pairs[:, 3].shape:
            lhs, rhs = pairs[:, 2], pairs[:, 3] + corr
            scale = max(float(np.nanmax(np.abs(np.concatenate([lhs, rhs])))), _f(det.get("max_force")),
                        SCALE["force"])
            d_l = float(np.mean(np.abs(lhs + rhs)) / scale)
        else:
            d_l = _f(det.get("d_Lambda"))
        ll = _bound(profile, "cross_maxwell", ref["Lambda"], eps, 1.0)
        lb = _bound(profile, "cross_maxwell", ref["B"], eps, 1.0)
        text = f"block-scaled d_Λ < {_g(ll)} and d_B < {_g(lb)} (K·ε)"
    bad = []
    if not (np.isfinite(d_l) and d_l < ll):
        bad.append(f"d_Λ = {_g(d_l)} ≥ {_g(ll)}: the force's strain derivative and the stress's position "
                   "derivative disagree (forces and stress are not derivatives of one energy)")
    if not (np.isfinite(d_b) and d_b < lb):
        bad.append(f"d_B = {_g(d_b)} ≥ {_g(lb)}: the stress's strain derivative is not symmetric")
    return not bad, text, "; ".join(bad) if bad else None


def _smoothness(defect, det, profile, eps):
    s, e, p = det.get("s_grid"), det.get("energies"), det.get("projected_force")
    if s is None or e is None or p is None:
        return True, "no bond scan recorded", None
    r = regularity(s, e, p, precision="float32" if eps > 1e-10 else "float64")
    text = (f"energy jump < {_g(r['energy_threshold'])} eV and force jump < {_g(r['force_threshold'])} eV/Å "
            "along the bond scan")
    return bool(r["passed"]), text, r.get("reason")


_JUDGES: dict[str, Judge] = {
    "conservativeness": _single(
        "conservativeness", " eV/Å", "along the bond scan the force and −dE/ds differ by",
        "forces and energy disagree (a force head that is not −∇E, e.g. a wrong factor)",
        lambda det: _max_abs(det, "force_from_energy", 0.1)),
    "betti": _single(
        "betti", " eV/Å²", "the force Jacobian is asymmetric by",
        "the forces are not the gradient of any energy (curl)", _betti_scale),
    "parity": _single(
        "parity", "", "the stress of the mirror image differs by (relative)",
        "the model tells a structure from its mirror image", lambda det: 1.0),
    "representation": _single(
        "representation", "", "the re-described crystal differs by d_rep",
        "cell choice, supercell, translation or atom order change the result", lambda det: 1e3),
    "stress_consistency": _single(
        "stress_consistency", "", "the stress output and (1/V)∂E/∂ε differ by (relative)",
        "stress and energy disagree", lambda det: 1.0, _stress_relative),
    "reversibility": _single(
        "reversibility", " Å", "the NVE round trip misses its start by",
        "forces are rough, noisy or history-dependent", lambda det: SCALE["length"]),
    "lam": _single("lam", "", "λ = ‖J_anti‖/‖J‖ is", "the forces carry curl", lambda det: 1.0),
    "equivariance": _equivariance,
    "zero_modes": _zero_modes,
    "trimer": _trimer,
    "cross_maxwell": _cross_maxwell,
}

#: probes gated only under ``exact`` (ungated in the reference)
_EXACT_ONLY: dict[str, Judge] = {"smoothness": _smoothness}


def gated(name: str, profile: str) -> bool:
    """Whether probe ``name`` has a gate under ``profile``."""
    return name in _JUDGES or (profile == "exact" and name in _EXACT_ONLY)


def judge(name: str, defect: Any, details: Mapping[str, Any] | None, status: str, profile: str = DEFAULT_PROFILE,
          precision: str = "float64", message: str | None = None) -> Verdict:
    """The verdict of probe ``name`` on one element (or structure) under ``profile``.

    Args:
      name: the probe.
      defect: its stored defect.
      details: its stored details (JSON types, as in a report).
      status: ``"ok"``, ``"non-finite"``, ``"error"``, ``"skipped"`` or ``"unsupported"``.
      profile: ``"exact"`` or ``"reference"``.
      precision: the model's compute precision, ``"float32"`` or ``"float64"`` (:func:`model_precision`).
      message: the probe's message (a skip reason or an error), used when the details carry none.

    A crash (status ``error``) and a non-finite output fail every gated probe with the reason; a skip or an
    unsupported element is not gated (``passed`` None) and says why.
    """
    check_profile(profile, "profile")
    det = details if isinstance(details, Mapping) else {}
    is_gated = gated(name, profile)
    if status in ("skipped", "unsupported"):
        why = det.get("skipped") or message or ("the model does not support this element" if status == "unsupported"
                                                else "does not apply")
        return Verdict(None, "", f"not run: {_first_line(why)}")
    if status == "error":
        why = det.get("error") or message or "the model raised"
        return Verdict(False if is_gated else None, "", f"crashed: {_first_line(why)}")
    d = _f(defect)
    if status == "non-finite" or (d is not None and math.isnan(d) and is_gated):
        return Verdict(False if is_gated else None, "", "the model returned NaN or inf")
    if not is_gated:
        return Verdict(None, "")
    fn = _JUDGES.get(name) or _EXACT_ONLY[name]
    # the regularity gate reads energies and forces, which central differences never touch
    floor = machine_epsilon(str(precision).split("+")[0] if name == "smoothness" else precision)
    ok, text, reason = fn(d, det, profile, floor)
    return Verdict(bool(ok), text, None if ok else reason)
