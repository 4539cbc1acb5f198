"""benchmarks/scaling.py --quick: runs (64 and 216 atoms, jaxcert only; about 40 s on 2 cores) and writes the JSON
fields the full run reports; the external codes are recorded as skipped."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_scaling_quick_writes_every_field(tmp_path):
    out = tmp_path / "scaling.json"
    # --rar-warm-max-s: the warm repeat always runs (by default it is skipped when the cold run took over 90 s,
    # which a loaded machine reaches); no timing is compared here, only that every field is written
    cp = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--quick", "--rar-warm-max-s", "1e9",
                         "--out", str(out)],
                        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["mode"] == "quick"
    for key in ("machine", "loadavg_start", "loadavg", "machine_loaded", "load_note", "settings", "memory_measure",
                "ratios", "goals", "exponent"):
        assert key in doc, key
    for model, sizes in (("sw", [64, 216]), ("eam", [108, 256])):
        rows = doc["energy_forces"][model]
        assert [r["n_atoms"] for r in rows] == sizes
        for r in rows:
            assert "error" not in r, r
            assert r["path"] == "dense"  # below 256 atoms and two search radii: the dense path
            assert r["auto"]["best_ms"] > 0 and r["auto"]["median_ms"] >= r["auto"]["best_ms"]
            assert r["maxrss_MiB"] > 0 and r["auto"]["xla_temp_MiB"] >= 0
            assert math.isfinite(r["energy_per_atom_eV"])
        fit = doc["exponent"][model]["auto"]
        assert fit["points"] == 2 and math.isfinite(fit["exponent"])
        assert doc["ratios"][f"{model}_energy_forces_exponent"] == fit["exponent"]
    # rattled (0.05 Å) diamond: a little above SW's minimum of -2 epsilon = -4.3366 eV per atom
    assert -4.3366 < doc["energy_forces"]["sw"][0]["energy_per_atom_eV"] < -4.25
    (rar,) = doc["relax_attack_relax"]["sw"]
    assert rar["n_atoms"] == 64 and "error" not in rar, rar
    assert rar["first_relaxation"]["converged"] and rar["second_relaxation"]["converged"] in (True, False)
    assert rar["cold"]["total_s"] > 0 and rar["warm"]["total_s"] > 0
    assert 0 <= rar["cold"]["metrics_fraction"] <= 1
    assert doc["ratios"]["sw_relax_attack_relax_64_atoms_cold_s"] == rar["cold"]["total_s"]
    assert "skipped" in doc["lammps"] and "skipped" in doc["torchsim"]
