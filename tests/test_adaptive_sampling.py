"""BAOAB Langevin and the statistical probes run to a precision (docs/statistics.md §3, docs/probes.md §5).

* BAOAB samples the canonical distribution: on a harmonic well its mean potential energy is (3N/2)k_BT even at a
  time step where ASE's integrator is measurably off; on the reference Lennard-Jones C cluster T_conf/T_kin = 1;
* a run to a precision equals the fixed-length run step for step, is deterministic, stops early at the target on a
  clean model with every reported error at or below it, and runs to the cap when the target is out of reach;
* a non-conservative (curl) model still fails config_temperature, and the suite shares one such trajectory and
  reports the target, the steps run and why it stopped.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcert
from jaxcert.core.stats import block_jackknife, half_drift
from jaxcert.core.units import KB_EV_PER_K
from jaxcert.models.lj import lennard_jones
from jaxcert.optim import dynamics as dyn
from jaxcert.probes import ConfigTemperatureConfig, EquipartitionConfig, VirialConfig, config_temperature, substrates
from jaxcert.probes import _statmech as sm
from jaxcert.report import compare
from jaxcert.report.html import render_report
from tests.test_dynamics import anchored_harmonic, clean_lj, cluster13, curl_model

T = 30.0


# ----------------------------------------------------------------------------- BAOAB samples the right distribution
@functools.cache
def _harmonic_runs(integrator: str, dt_fs: float, n_runs: int = 8, n_steps: int = 2000):
    """Potential-energy temperatures 2⟨U⟩/(3N k_B) of ``n_runs`` independent runs on AnchoredHarmonic(k = 40 eV/Å²,
    Ar masses: ω·10 fs ≈ 0.98), no COM constraint (all 3N coordinates free), frames every 5 steps after 100 fs of
    warm-up."""
    s = cluster13()
    model = anchored_harmonic(s.positions, 40.0)
    cfg = dyn.LangevinConfig(relax=False, com="none", integrator=integrator, timestep_fs=dt_fs,
                             warmup_steps=int(100 / dt_fs))

    def one(key):
        tr = dyn.langevin_trajectory(model, s, key, cfg, n_steps)
        U = 0.5 * 40.0 * jnp.sum((tr.positions[4::5] - s.positions) ** 2, axis=(-2, -1))
        return 2 * jnp.mean(U) / (3 * s.n_atoms * KB_EV_PER_K)

    return np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(5), n_runs)))


def test_baoab_harmonic_potential_energy_is_exact_at_a_large_step():
    """⟨U⟩ = (3N/2)k_BT for BAOAB at 10 fs (ωdt ≈ 1 on this well; BAOAB is exact for a harmonic well at any stable
    step): within 3 SE of the runs' spread (measured 30.04 ± 0.09 K).  ASE's integrator at the same step sits
    many SE off (measured 33.3 ± 0.1 K), so the check can tell a biased integrator."""
    baoab = _harmonic_runs("baoab", 10.0)
    se = np.std(baoab, ddof=1) / np.sqrt(baoab.size)
    assert 0 < se < 0.3  # K: 8 runs of 2000 steps
    assert abs(baoab.mean() - T) < 3 * se
    ase = _harmonic_runs("ase", 10.0)
    se_ase = np.std(ase, ddof=1) / np.sqrt(ase.size)
    assert abs(ase.mean() - T) > 5 * max(se, se_ase)


def test_baoab_lj_configurational_temperature_matches_kinetic():
    """Reference LJ on the C cluster (the stiffest of Li, C, Si): T_conf (exact Hessian trace) / T_kin = 1 within 3
    SE at BAOAB 2 fs (measured bias 0.0006 ± 0.0033, benchmarks/results/langevin_integrators.json)."""
    lj = lennard_jones()
    s = jax.tree.map(lambda x: x[0], lj.prepare(substrates.stacked("cluster", ["C"], dtype=jnp.float64)[0]))
    cfg = dyn.LangevinConfig(integrator="baoab", timestep_fs=2.0, warmup_steps=200)
    n = s.n_atoms

    def one(key):
        tr = dyn.langevin_trajectory(lj, s, key, cfg, 2000)
        R, F, V = tr.positions[4::5], tr.forces[4::5], tr.velocities[4::5]

        def trace_h(x):
            J = jax.jacfwd(lambda y: lj.forces_of(lj.params, tr.reference.replace(positions=y)))(x)
            return -jnp.trace(J.reshape(3 * n, 3 * n))

        t_conf = jnp.mean(jnp.sum(F * F, axis=(-2, -1))) / (KB_EV_PER_K * jnp.mean(jax.lax.map(trace_h, R)))
        t_kin = jnp.mean(dyn.kinetic_temperature(s.masses, V, 3 * n - 3))
        return t_conf / t_kin

    rho = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(9), 8)))
    se = np.std(rho, ddof=1) / np.sqrt(rho.size)
    assert 0 < se < 0.02 and abs(rho.mean() - 1.0) < 3 * se + 0.005


def test_baoab_extend_equals_one_long_run():
    """BAOAB stores the velocities after its O step; extend() restores the end-of-step ones, so a continued run is
    the long run."""
    a = cluster13()
    model = anchored_harmonic(a.positions, 3.0)
    cfg = dyn.LangevinConfig(relax=False, warmup_steps=7, integrator="baoab", timestep_fs=2.0)
    key = jax.random.key(4)
    short = dyn.langevin_trajectory(model, a, key, cfg, 20)
    longer = dyn.langevin_trajectory(model, a, key, cfg, 30)
    ext = dyn.extend(model, short, 30)
    np.testing.assert_allclose(np.asarray(ext.positions), np.asarray(longer.positions), rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.asarray(ext.velocities), np.asarray(longer.velocities), rtol=0, atol=1e-13)


def test_integrator_is_validated():
    with pytest.raises(ValueError, match="integrator"):
        dyn.LangevinConfig(integrator="verlet")
    with pytest.raises(ValueError, match="langevin_fixcm"):
        dyn.LangevinConfig(integrator="baoab", com="langevin_fixcm")


# ----------------------------------------------------------------------------- the error over a prefix
def test_prefix_jackknife_equals_the_block_jackknife():
    """Over a whole buffer the prefix jackknife is core.stats' (same blocks, same numbers); over a prefix it is the
    block jackknife of that prefix; likewise the drift."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(2.0, 1.0, 137), rng.normal(5.0, 1.0, 137)
    fn = sm.virial_statistic
    full = sm.prefix_jackknife(fn, (a, b), 0, 137, 10)
    ref = block_jackknife(fn, (a, b), 10)
    np.testing.assert_allclose(float(full.stderr), float(ref.stderr), rtol=1e-12)
    np.testing.assert_allclose(float(full.estimate), float(ref.estimate), rtol=1e-12)
    part = jax.jit(lambda n: sm.prefix_jackknife(fn, (a, b), 0, n, 10).stderr)(jnp.asarray(90))
    np.testing.assert_allclose(float(part), float(block_jackknife(fn, (a[:90], b[:90]), 10).stderr), rtol=1e-12)
    drift = jax.jit(lambda n: sm.prefix_drift(fn, (a, b), n, 10))(jnp.asarray(90))
    np.testing.assert_allclose(float(drift), float(half_drift(fn, (a[:90], b[:90]), 10).z), rtol=1e-10)


def test_sampling_is_validated():
    with pytest.raises(ValueError, match="chunk_steps"):
        sm.Sampling(chunk_steps=15)  # not a multiple of the config_temperature stride 10
    with pytest.raises(ValueError, match="min_steps"):
        sm.Sampling(min_steps=250)
    with pytest.raises(ValueError, match="watch"):
        sm.Sampling(watch=("smoothness",))
    with pytest.raises(ValueError, match="cap"):
        ConfigTemperatureConfig(n_steps=150)  # below min_steps
    # a probe's own estimator settings go into its stop rule
    assert EquipartitionConfig(align="none").sampling.align == "none"
    assert ConfigTemperatureConfig().sampling == VirialConfig().sampling == EquipartitionConfig().sampling


# ----------------------------------------------------------------------------- runs to a precision
LJ = clean_lj()
TH = ConfigTemperatureConfig().thermostat
SAMPLED = jax.jit(sm.sampled_trajectory, static_argnums=(3, 4, 5))


@functools.cache
def _clean_run(seed: int = 0):
    return SAMPLED(LJ, cluster13(), jax.random.key(seed), TH, sm.Sampling(), 1100)


def test_clean_model_stops_at_the_target_with_every_error_below_it():
    """Clean LJ on the test icosahedron: the default rule (SE ≤ 0.05 for all three probes, 300 ≤ steps ≤ 1100)
    stops before the cap, and every error it stopped on, recomputed from the stored series by core.stats, is at
    or below the target; one chunk earlier at least one was above it (the rule did not stop late)."""
    tr = _clean_run()
    sp = sm.Sampling()
    n = int(tr.n_run)
    assert bool(tr.sampled["stopped_by_target"]) and sp.min_steps <= n < 1100
    ct, vr = tr.sampled["config_temperature"], tr.sampled["virial"]
    kT = KB_EV_PER_K * T
    eq = sm.equipartition_statistic(tr.sampled["omega2"], tr.sampled["keep"], kT)

    def errors(m):
        k = m // sp.ct_every
        v = m // sp.virial_every
        return np.array([
            float(block_jackknife(sm.ct_statistic, (ct["F2"][:k], ct["t"][:k], ct["T_kin"][:k]), 10).stderr),
            float(block_jackknife(sm.virial_statistic, (vr["W"][:v], vr["K"][:v]), 10).stderr),
            float(block_jackknife(eq, tr.sampled["equipartition"]["Q2"][:m], 10).stderr)])

    at_stop = errors(n)
    np.testing.assert_allclose(at_stop, np.asarray(tr.sampled["se"]), rtol=1e-9)
    assert np.all(at_stop <= sp.se_target)
    if n > sp.min_steps:
        assert np.any(errors(n - sp.chunk_steps) > sp.se_target)
    # the rows past the stop were never run
    assert float(jnp.max(jnp.abs(tr.positions[n:]))) == 0.0 and float(jnp.max(jnp.abs(tr.positions[n - 1]))) > 0


def test_run_to_a_precision_is_the_fixed_length_run_and_deterministic():
    tr = _clean_run()
    n = int(tr.n_run)
    fixed = jax.jit(dyn.langevin_trajectory, static_argnums=(3, 4))(LJ, cluster13(), jax.random.key(0), TH, n)
    np.testing.assert_allclose(np.asarray(tr.positions[:n]), np.asarray(fixed.positions), rtol=0, atol=1e-11)
    np.testing.assert_allclose(np.asarray(tr.velocities[:n]), np.asarray(fixed.velocities), rtol=0, atol=1e-11)
    again = SAMPLED(LJ, cluster13(), jax.random.key(0), TH, sm.Sampling(), 1100)
    assert int(again.n_run) == n
    np.testing.assert_array_equal(np.asarray(again.sampled["se"]), np.asarray(tr.sampled["se"]))


def test_unreachable_target_runs_to_the_cap():
    sp = sm.Sampling(se_target=1e-6)
    tr = SAMPLED(LJ, cluster13(), jax.random.key(0), TH, sp, 400)
    assert int(tr.n_run) == 400 and not bool(tr.sampled["stopped_by_target"])
    assert np.all(np.asarray(tr.sampled["se"]) > 1e-6)
    # a target of 0.05 on a 300-step minimum: the same seed stops on it
    assert int(_clean_run().n_run) < 1100


def test_probes_report_the_target_and_the_stop():
    """Standalone probes on the clean cluster read one run each (same key, same rule): the same stop, the
    target, the steps run, and an error at or below the target."""
    s = cluster13()
    key = jax.random.key(0)
    for name, cfg in (("config_temperature", ConfigTemperatureConfig()), ("virial", VirialConfig()),
                      ("equipartition", EquipartitionConfig())):
        r = jaxcert.probes.base.PROBES[name].fn(LJ, key, cfg, s)
        d = r.details
        assert float(d["se_target"]) == 0.05 and bool(d["stopped_by_target"])
        assert int(d["n_steps_run"]) == int(_clean_run().n_run) == int(d["trajectory"]["n_steps"])
        assert float(d["defect_stderr"]) <= float(d["se_target"])
        assert int(d["sampling"]["max_steps"]) == 1100 and bool(d["sampling"]["watched"])
        assert int(r.n_evals) == int(_clean_run().n_evals) and not bool(d["trajectory"]["reused"])


def test_curl_model_still_fails_config_temperature():
    """NonConservative s = 1 (docs/probes.md §8.4): the spun-up cluster never meets the target (cap) and its ratio
    is far outside its error."""
    r = config_temperature(curl_model(clean_lj(), 1.0), jax.random.key(0), ConfigTemperatureConfig(), cluster13())
    d = r.details
    assert float(r.score) < 0.5 and float(d["T_kin"]) > 100.0
    assert abs(float(d["ratio"]) - 1.0) > 10 * float(d["defect_stderr"])


def test_suite_shares_one_run_and_reports_it(tmp_path):
    """In the suite the three probes share one run to a precision per element: virial and equipartition are free,
    the report carries the target, the steps run and the stop, and it is a report the board reads."""
    lj = jaxcert.models.get("lj")
    rep = jaxcert.certify(lj, ["Si", "C"], probes="config_temperature,equipartition,virial", seed=1,
                          dtype=jnp.float64, card=False)
    ct, eq, vr = (rep.probe(n) for n in ("config_temperature", "equipartition", "virial"))
    assert ct["n_evals"] > 0 and vr["n_evals"] == 0 and eq["n_evals"] == 0
    for el in ("Si", "C"):
        runs = {p["per_element"][el]["details"]["n_steps_run"] for p in (ct, eq, vr)}
        assert len(runs) == 1 and 300 <= runs.pop() <= 1100
        for p in (ct, eq, vr):
            d = p["per_element"][el]["details"]
            assert d["se_target"] == 0.05 and isinstance(d["stopped_by_target"], bool)
            if d["stopped_by_target"]:
                assert d["defect_stderr"] <= d["se_target"]
    path = tmp_path / "r.json"
    path.write_text(rep.to_json())
    assert compare.load(path).kind == "report"
    assert "T_conf/T_kin" in render_report(rep)  # the per-frame plot skips the frames past the stop (NaN)
    # a committed fixed-length report (no target in its details) still loads and reads as before
    old = compare.load("benchmarks/results/board/lj.json")
    ct_old = next(p for p in old.data["probes"] if p["name"] == "config_temperature")
    d_old = next(iter(ct_old["per_element"].values()))["details"]
    assert "se_target" not in d_old and d_old["trajectory"]["n_steps"] == 1100 and d_old["defect_stderr"] > 0


def test_reference_config_is_the_fixed_length_ase_run():
    c = ConfigTemperatureConfig.reference()
    assert c.sampling is None and c.thermostat == dyn.LangevinConfig() and c.thermostat.integrator == "ase"
    assert dataclasses.replace(c, n_steps=40).n_steps == 40  # any length, no chunk rule
