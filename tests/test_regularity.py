"""The regularity gate of the bond scan (jaxcert/report/regularity.py, docs/probes.md §4.17).

Three layers: synthetic scans (a smooth Morse curve passes; the same curve with a 1 meV energy step or a
slope jump fails with the right reason; a C¹ curve whose curvature jumps passes), every committed clean
report of benchmarks/results/board/ (each element passes), and fresh runs of the smoothness probe: the
clean analytic models pass in float32 and float64, and the broken models fail naming the right jump — a
Morse potential cut hard at 4 Å and the planted ``step`` defect (an energy jump), the planted ``kinked``
defect and a truncated-and-shifted Morse (a force jump) — while a shifted-force Morse (continuous energy
and force, the textbook cure) passes.
"""

import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.models import defects as D
from jaxcert.report.regularity import ENERGY_THRESHOLD, FORCE_THRESHOLD, regularity
from jaxcert.specs import apply_defects

ROOT = pathlib.Path(__file__).resolve().parents[1]
KEYS = {"energy_jump", "energy_jump_at", "force_jump", "force_jump_at", "energy_threshold", "force_threshold",
        "passed", "reason"}

# ----------------------------------------------------------------------------- synthetic scans

B = 2.35  # bond length (Å) of the synthetic scan
S = np.linspace(-0.2 * B, 0.5, 81)  # the smoothness probe's grid (docs/probes.md §4.14)
H = S[1] - S[0]
S0 = S[55] + 0.37 * H  # where the planted defects sit: inside an interval, on the stretch side


def _morse(s, depth=2.0, a=1.5):
    """(E, p = −dE/ds) of a Morse bond at r = B + s with its minimum at s = 0, on a −50 eV total energy."""
    x = np.exp(-a * s)
    return -50.0 + depth * (x * x - 2 * x), -depth * (-2 * a * x * x + 2 * a * x)


def test_smooth_morse_passes():
    E, p = _morse(S)
    r = regularity(S, E, p)
    assert KEYS <= set(r)
    assert r["passed"] and r["reason"] is None
    assert r["energy_jump"] == 0.0 and r["energy_jump_at"] is None
    assert r["force_jump"] < 1e-3
    assert r["energy_threshold"] == ENERGY_THRESHOLD and r["force_threshold"] == FORCE_THRESHOLD
    # lists (as read from a JSON report) work the same
    assert regularity(S.tolist(), E.tolist(), p.tolist()) == r


def test_a_one_mev_energy_step_fails():
    E, p = _morse(S)
    r = regularity(S, E - 1e-3 * (S > S0), p)
    assert not r["passed"]
    assert r["energy_jump"] == pytest.approx(1e-3, rel=0.02)
    assert abs(r["energy_jump_at"] - S0) < H
    assert r["force_jump"] < 1e-3
    assert r["reason"].startswith("energy jumps by 0.000999 eV at s = %+.3f Å" % (0.5 * (S[55] + S[56])))
    assert "hard cutoff or a step in E(r)" in r["reason"]
    # a step well below the threshold passes
    assert regularity(S, E - 2e-4 * (S > S0), p)["passed"]


def test_a_slope_jump_fails_as_a_force_jump():
    """E += A|s − s₀|: energy continuous, the force steps by 2A = 1 eV/Å at s₀."""
    E, p = _morse(S)
    A = 0.5
    r = regularity(S, E + A * np.abs(S - S0), p - A * np.sign(S - S0))
    assert not r["passed"]
    assert r["energy_jump"] == 0.0
    assert r["force_jump"] == pytest.approx(2 * A, rel=0.05)
    assert abs(r["force_jump_at"] - S0) < H
    assert r["reason"].startswith("force jumps by ") and "kink in E(r)" in r["reason"]


def test_a_curvature_jump_is_c1_and_passes():
    """E += ½K(s − s₀)₊²: E and the force are continuous, the force's slope jumps by K = 200 eV/Å² (Tersoff's
    cosine cutoff on carbon does this).  The jolt alone reads ≈ hK/2 here; the two sides meet, so no jump."""
    E, p = _morse(S)
    K = 200.0
    ramp = np.maximum(S - S0, 0.0)
    r = regularity(S, E + 0.5 * K * ramp**2, p - K * ramp)
    assert r["passed"], r["reason"]
    assert r["energy_jump"] == 0.0 and r["force_jump"] < 0.01


def test_a_smooth_force_error_is_not_a_jump():
    """A force head 2 % off leaves a smooth residual along the scan: the conservativeness probe's defect,
    not a jump."""
    E, p = _morse(S)
    assert regularity(S, E, 1.02 * p)["passed"]


def test_float32_floor():
    """Rounded to float32 (|E| ≈ 50 eV) the clean curve passes and a 1 meV step still fails."""
    E, p = _morse(S)
    f32 = lambda x: np.asarray(x, np.float32).astype(np.float64)  # noqa: E731
    assert regularity(f32(S), f32(E), f32(p), precision="float32")["passed"]
    r = regularity(f32(S), f32(E - 1e-3 * (S > S0)), f32(p), precision="float32")
    assert not r["passed"] and r["reason"].startswith("energy jumps")
    assert r["energy_floor"] == pytest.approx(50 * np.finfo(np.float32).eps * 52.0, rel=0.05)


def test_bad_input():
    E, p = _morse(S)
    with pytest.raises(ValueError, match="differ in length"):
        regularity(S, E[:-1], p)
    with pytest.raises(ValueError, match="strictly increasing"):
        regularity(S[::-1], E, p)
    with pytest.raises(ValueError, match="precision"):
        regularity(S, E, p, precision="bfloat16")
    r = regularity(S, np.where(S > S0, np.nan, E), p)
    assert not r["passed"] and "non-finite" in r["reason"]


def test_the_module_imports_no_jax():
    """The report room imports no JAX: load the module file alone in a fresh interpreter."""
    path = ROOT / "jaxcert" / "report" / "regularity.py"
    code = (f"import importlib.util, sys; spec = importlib.util.spec_from_file_location('reg', {str(path)!r}); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "assert 'jax' not in sys.modules, 'jax imported'; print(m.regularity([0, 1, 2, 3, 4], [0] * 5, [0] * 5)"
            "['passed'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# ----------------------------------------------------------------------------- the committed clean reports


def _board_reports():
    for path in sorted((ROOT / "benchmarks" / "results" / "board").glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "probes" in data:
            yield path


@pytest.mark.parametrize("path", list(_board_reports()), ids=lambda p: p.name)
def test_committed_clean_reports_pass(path):
    """Every element of every committed report passes, with a margin (docs/probes.md §4.17 table): no energy
    jump at all, and every force reading below half the threshold (the largest, CHGNet on C, is 0.17 eV/Å)."""
    precision = "float32" if ("@float32" in path.name or "-float32" in path.name) else "float64"
    (smooth,) = [p for p in json.loads(path.read_text())["probes"] if p["name"] == "smoothness"]
    checked = 0
    for el, res in smooth["per_element"].items():
        det = res.get("details") or {}
        if "s_grid" not in det:
            assert res["status"] == "unsupported", (el, res["status"])
            continue
        r = regularity(det["s_grid"], det["energies"], det["projected_force"], precision)
        assert r["passed"], f"{path.name} {el}: {r['reason']}"
        assert r["energy_jump"] == 0.0, (el, r)
        assert r["force_jump"] < 0.5 * FORCE_THRESHOLD, (el, r)
        checked += 1
    assert checked >= 2


# ----------------------------------------------------------------------------- fresh runs of the smoothness probe


def _scans(model, elements, dtype=jnp.float64):
    """``{element: regularity(...)}`` of the smoothness probe's scans of ``model``."""
    rep = jaxcert.certify(model, elements, probes=["smoothness"], dtype=dtype)
    (out,) = rep.outcomes
    precision = "float32" if dtype == jnp.float32 else "float64"
    return {el: regularity(d["s_grid"], d["energies"], d["projected_force"], precision)
            for el, d in zip(out.elements, out.details, strict=True)}


CLEAN = [
    ("lj", {}, ["Li", "C", "Si", "Cu", "W"]),
    ("emt", {}, ["Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt"]),
    ("eam", {}, ["Ni", "Cu", "Rh", "Pd", "Ag", "Ir", "Pt", "Au", "Pb", "Al"]),
    ("sw", {}, ["Si"]),
    ("tersoff", {}, ["Si", "C"]),
    ("morse", {"element": "Cu"}, ["Cu"]),
]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,kw,elements", CLEAN, ids=[c[0] for c in CLEAN])
def test_clean_analytic_models_pass(name, kw, elements, dtype):
    for el, r in _scans(jaxcert.models.get(name, **kw), elements, dtype).items():
        assert r["passed"], f"{name} {el}: {r['reason']}"
        assert r["energy_jump"] == 0.0 and r["force_jump"] < 0.1 * FORCE_THRESHOLD, (name, el, r)


def _morse_cut(rc, mode, depth, alpha, r0):
    """A Morse pair potential cut at r_c with no switching: ``hard`` (truncated: E jumps by φ(r_c)),
    ``shift`` (φ − φ(r_c): E continuous, the force jumps by φ'(r_c)) or ``sforce`` (φ − φ(r_c) − (r − r_c)φ'(r_c):
    energy and force continuous).  Written as in README's "Your own model"."""

    def phi(r):
        x = jnp.exp(-alpha * (r - r0))
        return depth * (x * x - 2 * x)

    def energy(params, s):
        p = jaxcert.neighbors.pairs(s, cutoff=rc)
        inside = p.mask & (p.r < rc)
        v = phi(p.r)
        if mode != "hard":
            v = v - phi(rc)
        if mode == "sforce":
            v = v - (p.r - rc) * jax.grad(phi)(jnp.asarray(rc, p.r.dtype))
        return 0.5 * jnp.sum(jnp.where(inside, v, 0.0))

    return jaxcert.Model(energy, params={}, name=f"morse-{mode}", cutoff=rc)


#: Girifalco & Weizer's Cu Morse (Phys. Rev. 114, 687 (1959)): D = 0.3429 eV, α = 1.3588 /Å, r₀ = 2.866 Å
GW_CU = {"depth": 0.3429, "alpha": 1.3588, "r0": 2.866}


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["f32", "f64"])
def test_a_hard_cutoff_fails_as_an_energy_jump(dtype):
    """(a) Girifalco–Weizer Cu Morse cut hard at 4 Å on Cu: second neighbours cross 4 Å on the compression side."""
    r = _scans(_morse_cut(4.0, "hard", **GW_CU), ["Cu"], dtype)["Cu"]
    assert not r["passed"]
    assert 0.1 < r["energy_jump"] < 0.16, r
    assert r["reason"].startswith("energy jumps by 0.13 eV") and "hard cutoff" in r["reason"]


def test_the_shifted_cutoffs():
    """(d) truncated and shifted (E continuous, the force jumps) fails as a force jump; shifted force (E and F
    continuous, E'' jumps) passes.  A deep Morse (ε = 1 eV, α = 6/2.55 /Å) cut at 2.8 Å, crossed by the scanned
    bond itself (force jump φ'(2.8 Å) = 1.2 eV/Å) and by a second pair one grid step later."""
    deep = {"depth": 1.0, "alpha": 6 / 2.55, "r0": 2.55}
    r = _scans(_morse_cut(2.8, "shift", **deep), ["Cu"])["Cu"]
    assert not r["passed"]
    assert r["energy_jump"] == 0.0
    assert r["force_jump"] > 1.5 * FORCE_THRESHOLD, r
    assert r["reason"].startswith("force jumps by") and "kink in E(r)" in r["reason"]
    r = _scans(_morse_cut(2.8, "sforce", **deep), ["Cu"])["Cu"]
    assert r["passed"] and r["energy_jump"] == 0.0 and r["force_jump"] < 1e-2, r


def test_the_planted_step_and_kinked_defects_fail():
    """(b) the ``step`` defect at A = 0.01 eV (what ``--defect step=0.01`` builds) and (c) the ``kinked``
    defect at its default strength (a force step of 2 eV/Å at 1.05 d_nn), both on the reference LJ."""
    lj = jaxcert.models.get("lj")
    step = apply_defects(lj, ["step=0.01"])
    assert step.name == "lj+step(0.01)"
    for el, r in _scans(step, ["Si", "Cu"]).items():
        assert not r["passed"]
        assert r["energy_jump"] == pytest.approx(0.01 * round(r["energy_jump"] / 0.01), rel=0.02), (el, r)
        assert r["energy_jump"] > 0.009 and r["force_jump"] == 0.0, (el, r)  # 1 pair on Si, 3 at once on Cu
        assert r["reason"].startswith("energy jumps by") and "step in E(r)" in r["reason"]
    for el, r in _scans(D.kinked(lj), ["Si", "Cu"]).items():
        assert not r["passed"]
        assert r["energy_jump"] == 0.0
        assert r["force_jump"] == pytest.approx(2.0, rel=0.02), (el, r)
        assert r["reason"].startswith("force jumps by 1.99 eV/Å")
