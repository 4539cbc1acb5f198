"""What a new user meets first ("Trust, second round"): the README's own model through every command, the
controls after the README's install, messages that say what was meant, and tables that explain themselves."""

import math
import subprocess
import sys
from pathlib import Path

import pytest

from jaxcert import specs
from jaxcert.attacks import metrics
from jaxcert.attacks.report import sweep_table
from jaxcert.cli import main
from jaxcert.core import batching, inputs
from tests.test_readme import _blocks

ROOT = Path(__file__).resolve().parents[1]

# a subprocess in which pymatgen is not installed, as after the README's `pip install -e .`: find_spec fails
NO_PYMATGEN = """
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pymatgen":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Absent())
from jaxcert.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def readme_model(tmp_path, monkeypatch):
    """The README's ``mine.py`` (params ``{"eps": 0.1}``, a Python float) in a fresh folder, the current one."""
    (tmp_path / "mine.py").write_text(_blocks("python")[0])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mine", None)
    yield tmp_path
    sys.modules.pop("mine", None)


# ------------------------------------------------------------------ params that are Python scalars
def test_investigate_runs_the_readme_model_with_float_params(readme_model, capsys):
    """The committee's batched evaluation (jaxcert.core.batching.compiled) keyed leaves by ``.shape``: a float
    parameter crashed ``investigate`` with exit 3 while ``certify`` took it."""
    assert isinstance(specs.load_model("mine:model").params["eps"], float)  # the path under test
    out = readme_model / "inv"
    rc = main(["investigate", "--target", "mine:model", "--committee", "lj,sw", "--protocols", "dimers",
               "--elements", "Si", "--oracle-seconds", "0", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert (out / "report.md").is_file() and (out / "escalation.json").is_file()


def test_compiled_keys_python_scalars_and_lists():
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda p, x: p["eps"] * x + sum(p["s"]))
    cache = {}
    args = ({"eps": 0.5, "s": [1.0, 2]}, jnp.ones(3))
    exe = batching.compiled(cache, f, *args)
    assert float(exe(*args)[0]) == 3.5
    assert batching.compiled(cache, f, *args) is exe  # the same key again: nothing recompiled


# ------------------------------------------------------------------ controls after the README's install
def _no_pymatgen(args, cwd):
    return subprocess.run([sys.executable, "-c", NO_PYMATGEN, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def test_controls_quick_without_pymatgen_exits_2_with_the_install_command(tmp_path):
    """The README's ``jaxcert controls --quick`` after ``pip install -e .`` (no pymatgen) ended in exit 3 after
    minutes; now it stops at once with exit 2, the extra to install, and a section that exists."""
    out = _no_pymatgen(["controls", "--quick"], tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stdout == ""  # nothing ran
    assert "--sections" in out.stderr and 'pip install -e ".[controls]"' in out.stderr, out.stderr
    assert "docs/controls.md, section 14" in out.stderr
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("pymatgen") for dep in extras["controls"])
    assert "\n## 14. The offline mini-benchmark" in (ROOT / "docs" / "controls.md").read_text()
    # what the message offers instead runs on the base install
    assert "--sections eos runs without it" in out.stderr
    out = _no_pymatgen(["controls", "--quick", "--models", "emt", "--panel", "emt", "--sections", "eos", "--quiet"],
                       tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "EOS vs WIEN2k" in out.stdout


def test_bridges_messages_point_at_a_section_that_exists():
    from jaxcert.controls.benchmark.config import INSTALL_BRIDGES

    install = (ROOT / "docs" / "install.md").read_text()
    assert "docs/install.md, section 2" in INSTALL_BRIDGES and "\n## 2. The bridges" in install
    assert "README" not in INSTALL_BRIDGES


# ------------------------------------------------------------------ hints and did-you-mean
@pytest.mark.parametrize("args, flag, hint", [
    (["certify", "--model", "lj", "--elements", "Si", "--probes", "conservativness"], "--probes",
     "did you mean 'conservativeness'?"),
    (["certify", "--model", "ljj", "--elements", "Si"], "--model", "did you mean 'lj'?"),
    (["certify", "--model", "lj", "--elements", "Sii"], "--elements", "did you mean 'Si'?"),
    (["certify", "--model", "lj", "--elements", "Si", "--defect", "curll=0.3"], "--defect", "did you mean 'curl'?"),
    (["attack", "--model", "lj", "--structure", "Si", "--attack", "pgdd"], "--attack", "did you mean 'pgd'?"),
    (["investigate", "--target", "lj", "--committee", "sw", "--protocols", "dimer", "--out", "o"], "--protocols",
     "did you mean 'dimers'?"),
    (["controls", "--sections", "eoss"], "--sections", "did you mean 'eos'?"),
    (["certify", "--model", "mine.model", "--elements", "Si"], "--model", "did you mean mine:model (module:attribute)"),
])
def test_unknown_names_get_a_suggestion(args, flag, hint, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jaxcert: error: {flag}") and hint in err, err


def test_a_python_file_as_model_says_how_to_load_it_and_loads_as_path_colon_attr(readme_model, capsys):
    sub = readme_model / "models"
    sub.mkdir()
    (readme_model / "mine.py").rename(sub / "mine.py")
    assert main(["certify", "--model", "models/mine.py", "--elements", "Si"]) == 2
    err = capsys.readouterr().err
    assert "--model" in err and "models/mine.py:model" in err and "mine:model" in err and "'models'" in err, err
    model = specs.load_model("models/mine.py:model")
    assert model.name == "mine" and model.params == {"eps": 0.1}
    with pytest.raises(inputs.InputError, match="no such file"):
        specs.load_model("models/other.py:model")


def test_did_you_mean():
    assert inputs.did_you_mean("si", ["S", "Si"]) == " (did you mean 'Si'?)"
    assert inputs.did_you_mean("bogus", ["pgd", "fgsm"]) == ""
    assert inputs.did_you_mean(["pgdd", "fgsmm", "zzz"], ["pgd", "fgsm"]) == \
        " (did you mean 'pgd' for 'pgdd', 'fgsm' for 'fgsmm'?)"


# ------------------------------------------------------------------ sweep and attack tables
def test_sweep_prints_a_results_table_and_the_store(tmp_path, capsys):
    db = tmp_path / "sweep.db"
    args = ["sweep", "--model", "emt", "--structures", "Cu", "--min-length", "0", "--attack", "pgd", "--eps", "0.05",
            "--seed", "0", "--db", str(db), "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "{'requested'" not in out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("structure"))
    assert lines[head].split()[:7] == ["structure", "attack", "eps", "eps_A", "seed", "steps", "converged"]
    assert "max_disp" in lines[head] and "max_dF" in lines[head]
    assert lines[head + 1].split()[:5] == ["Cu", "PGD", "0.05", "0.05", "0"]
    assert f"store {db}: 1 runs requested, 0 already stored, 1 computed now, 0 remaining" in out
    assert main(args) == 0  # the same grid again: nothing computed, the same table from the store
    again = capsys.readouterr().out
    assert again.splitlines()[head + 1] == lines[head + 1] and "1 already stored, 0 computed now" in again


def test_attack_nan_metrics_say_why(tmp_path, capsys):
    """The relaxed diamond Si reference is force-free, so the force angle is undefined: the table said ``nan``
    and nothing else."""
    assert main(["attack", "--model", "sw", "--structure", "Si", "--min-length", "0", "--attack", "pgd", "--eps",
                 "0.05", "--quiet"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("force_angle_median "))
    assert row.split()[1:] == ["degrees", "nan", "nan"]
    notes = [line for line in out.splitlines() if " nan (" in line]
    assert notes == ["  force_angle_median nan (immediate, post-relax): the relaxed reference (or this stage) is "
                     "force-free, |F_ref|·|F| <= 1e-12 eV²/Å² on every atom, so no force angle is defined"]


def test_every_nan_reason_names_its_cause():
    nan = math.nan
    broken = {"energy": nan, "max_displacement": nan, "rdf_l1": nan}
    assert "returned NaN or inf" in metrics.nan_reason("rdf_l1", broken)
    stage = {"energy": 1.0, "max_displacement": 0.1, "force_angle_atoms_used": 3, "force_angle_atoms_used_robust": 0}
    assert "reaches fmax (0.01 eV/Å)" in metrics.nan_reason("force_angle_median_robust", stage, {"fmax": 0.01})
    assert "zero volume" in metrics.nan_reason("rdf_l1", stage)
    assert "at symprec 0.001 Å" in metrics.nan_reason("symmetry_op_retention@0.001", stage)
    assert "at any symprec" in metrics.nan_reason("space_group_change", stage)
    ok = {"energy": 0.0, "max_displacement": 0.1, "max_delta_force": 0.2, "delta_energy_per_atom": 0.0,
          "bonds_broken": 0, "space_group_change": nan}
    rows = [{"structure": "x", "attack_label": "PGD", "epsilon": 0.1, "epsilon_A": 0.1, "seed": 0, "steps_after": 3,
             "converged_after": True, "immediate": {**ok, "max_delta_force": nan if k else 0.2, "energy": nan if k
                                                    else 0.0, "max_displacement": nan if k else 0.1},
             "post_relaxation": ok} for k in range(2)]
    text = sweep_table(rows)
    assert "max_dF nan in 1 of 2 runs: the model returned NaN or inf at this stage" in text
    assert "sg_change nan in 2 of 2 runs: spglib gave no symmetry dataset" in text
