"""The input boundary of ``jaxcert attack`` / ``jaxcert sweep`` and of the API (docs/attacks.md §7, §8).

Every check here runs before any JAX work (a bad value is refused while the arguments are read), so the whole
module takes about a second; only the segmentation-fault regression starts a subprocess.
"""

import math
import os
import subprocess
import sys

import ase
import ase.io
import numpy as np
import pytest
from ase.build import bulk

import jaxcert
from jaxcert.attacks import AttackSpec, PipelineConfig, crystals, run_grid
from jaxcert.attacks.config import load_structure as _load_structure
from jaxcert.attacks.sweep import sweep
from jaxcert.cli import main
from jaxcert.core.inputs import InputError

#: (flag, value, what the message must quote): each must be refused by both subcommands.
SHARED_BAD = [
    ("--eps", "nan", "nan"), ("--eps", "inf", "inf"), ("--eps", "-1", "-1"), ("--eps", "0", "0"),
    ("--eps", "0.1,-0.2", "-0.2"), ("--eps", "abc", "abc"),
    ("--n-steps", "0", "0"), ("--n-steps", "-1", "-1"), ("--n-steps", "2.5", "2.5"), ("--n-steps", "nan", "nan"),
    ("--max-steps", "0", "0"), ("--max-steps", "1.5", "1.5"), ("--max-steps", "inf", "inf"),
    ("--fmax", "0", "0"), ("--fmax", "-0.01", "-0.01"), ("--fmax", "nan", "nan"), ("--fmax", "inf", "inf"),
    ("--alpha-ratio", "0", "0"), ("--alpha-ratio", "-0.1", "-0.1"), ("--alpha-ratio", "nan", "nan"),
    ("--seed", "-1", "-1"), ("--seed", "2147483648", "2147483648"), ("--seed", "1.5", "1.5"),
    ("--seed", "nan", "nan"), ("--min-length", "-1", "-1"), ("--min-length", "nan", "nan"),
]
ATTACK_BAD = SHARED_BAD + [
    ("--rattle", "-0.1", "-0.1"), ("--rattle", "nan", "nan"), ("--rattle", "inf", "inf"),
    ("--rattle-seed", "-1", "-1"), ("--rattle-seed", "0.5", "0.5"), ("--rattle-seed", "2147483648", "2147483648"),
]
SWEEP_BAD = SHARED_BAD + [
    ("--chunk", "0", "0"), ("--chunk", "1.5", "1.5"), ("--chunk", "-2", "-2"),
    ("--max-chunks", "0", "0"), ("--max-chunks", "-1", "-1"), ("--max-chunks", "nan", "nan"),
]


def _one_line_error(capsys, flag: str, shown: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"jaxcert: error: {flag}") and repr(shown) in line and "allowed" in line, line
    return line


@pytest.mark.parametrize(("flag", "value", "shown"), ATTACK_BAD, ids=[f"{f}={v}" for f, v, _ in ATTACK_BAD])
def test_attack_refuses_bad_numbers(flag, value, shown, capsys):
    assert main(["attack", "--model", "sw", "--structure", "Si", "--attack", "pgd", flag, value]) == 2
    _one_line_error(capsys, flag, shown)


@pytest.mark.parametrize(("flag", "value", "shown"), SWEEP_BAD, ids=[f"{f}={v}" for f, v, _ in SWEEP_BAD])
def test_sweep_refuses_bad_numbers(flag, value, shown, tmp_path, capsys):
    db = tmp_path / "s.sqlite"
    argv = ["sweep", "--model", "sw", "--structures", "Si", "--attack", "pgd", "--eps", "0.01", "--seed", "42",
            "--db", str(db), flag, value]
    assert main(argv) == 2
    _one_line_error(capsys, flag, shown)
    assert not db.exists()  # refused before the store was opened


#: (TOML line(s), the name the message must start with): the same checks for values from a sweep.toml.
TOML_BAD = [
    ("epsilons = [nan]", "sweep.toml: epsilons"), ("epsilons = [inf]", "sweep.toml: epsilons"),
    ("epsilons = [0.1, -1.0]", "sweep.toml: epsilons"), ("seeds = [-1]", "sweep.toml: seeds"),
    ("seeds = [1.5]", "sweep.toml: seeds"), ("n_steps = 0", "sweep.toml: n_steps"),
    ("n_steps = 2.5", "sweep.toml: n_steps"), ("chunk = 0", "sweep.toml: chunk"),
    ("max_chunks = 0", "sweep.toml: max_chunks"), ("alpha_ratio = nan", "sweep.toml: alpha_ratio"),
    ("min_length = -1.0", "sweep.toml: min_length"), ("quiet = 'yes'", "sweep.toml: quiet"),
    ("random_start = 1", "sweep.toml: random_start"),
    ('attacks = [{name = "ifgsm", n_steps = 0}]', "sweep.toml: attacks: ifgsm.n_steps"),
    ('attacks = [{name = "pgd", alpha_ratio = -0.1}]', "sweep.toml: attacks: pgd.alpha_ratio"),
    ("[config]\nfmax = nan", "sweep.toml: [config] fmax"),
    ("[config]\nmax_steps = 0", "sweep.toml: [config] max_steps"),
    ("[config]\nrelative = 1", "sweep.toml: [config] relative"),
]


@pytest.mark.parametrize(("line", "name"), TOML_BAD, ids=[t.replace("\n", " ") for t, _ in TOML_BAD])
def test_sweep_refuses_bad_toml_values(line, name, tmp_path, capsys):
    toml = tmp_path / "sweep.toml"
    toml.write_text(f'model = "sw"\nstructures = ["Si"]\ndb = "s.sqlite"\n{line}\n')
    assert main(["sweep", str(toml)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"jaxcert: error: {name}: got") and "allowed" in lines[0]
    assert not (tmp_path / "s.sqlite").exists()


def test_eps_nan_no_longer_crashes_in_native_code(tmp_path):
    """``--eps nan`` used to reach ASE's neighbour list and die with SIGSEGV (exit 139); now exit 2, one line."""
    root = os.path.dirname(os.path.dirname(jaxcert.__file__))
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXCERT_CACHE_DIR="off",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "jaxcert.cli", "attack", "--model", "sw", "--structure", "Si",
                        "--eps", "nan"], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == ["jaxcert: error: --eps: got 'nan'; allowed: a finite number > 0 "
                                             "(Å, or a fraction of the smallest lattice vector with --relative)"]


# ------------------------------------------------------------------------------------------------ structures
from tests.test_inputs import PARTIAL_CIF  # noqa: E402  (one disordered CuAu fixture for both boundaries)


def _structure_files(tmp_path):
    (tmp_path / "partial.cif").write_text(PARTIAL_CIF)
    ase.io.write(tmp_path / "empty.extxyz", ase.Atoms(cell=[3.0, 3.0, 3.0], pbc=True))
    ase.io.write(tmp_path / "one.extxyz", bulk("Cu"))  # ASE's primitive fcc cell: one atom
    bad = bulk("Cu", cubic=True)
    bad.positions[1, 0] = np.nan
    ase.io.write(tmp_path / "nan.extxyz", bad)
    vac = bulk("Cu", cubic=True)
    vac.numbers[2] = 0  # an X (vacancy) site
    ase.io.write(tmp_path / "vacancy.extxyz", vac)


STRUCTURE_BAD = [
    ("partial.cif", "partial occupancies"), ("empty.extxyz", "zero atoms"), ("nan.extxyz", "non-finite"),
    ("vacancy.extxyz", "vacancy"), ("one.extxyz", "every perturbation is a rigid translation"),
]


@pytest.mark.parametrize(("name", "why"), STRUCTURE_BAD, ids=[n for n, _ in STRUCTURE_BAD])
def test_bad_structure_files_are_refused_in_one_line(name, why, tmp_path, capsys):
    _structure_files(tmp_path)
    path = str(tmp_path / name)
    assert main(["attack", "--model", "emt", "--structure", path]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("jaxcert: error: --structure") and why in line
    assert main(["sweep", "--model", "emt", "--structures", path, "--db", str(tmp_path / "s.sqlite")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"jaxcert: error: --structures {path!r}") and why in line


def test_one_atom_cell_message_says_why_and_what_to_do(tmp_path, capsys):
    assert main(["attack", "--model", "emt", "--structure", "Po", "--min-length", "0"]) == 2  # simple cubic: 1 atom
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "1 atom" in line and "rigid translation" in line and "--min-length" in line and "supercell" in line
    # the same one-atom cell from a file is accepted once repeated with --min-length
    _structure_files(tmp_path)
    atoms = _load_structure("--structure", str(tmp_path / "one.extxyz"), 8.0)
    m = [math.ceil(8.0 / x) for x in bulk("Cu").cell.lengths()]
    assert atoms.info["supercell"] == tuple(m) and len(atoms) == int(np.prod(m))
    assert np.all(atoms.cell.lengths() >= 8.0) and atoms.info["jaxcert_key"] == f"repeat:{tuple(m)}"


def test_element_symbols_build_repeated_conventional_cells():
    cu = crystals.element_cell("Cu")  # fcc, a = 3.61 Å: 4-atom cubic cell, 3x3x3 to reach 8 Å
    assert len(cu) == 108 and cu.info["supercell"] == (3, 3, 3) and cu.info["base_atoms"] == 4
    assert np.all(np.linalg.norm(cu.get_cell().array, axis=1) >= crystals.ELEMENT_MIN_LENGTH)
    assert cu.info["jaxcert_source"] == "ase.build.bulk('Cu', cubic=True).repeat((3, 3, 3))"
    mg = crystals.element_cell("Mg", min_length=5.0)  # hcp: no cubic cell, the orthorhombic one
    assert "orthorhombic=True" in mg.info["jaxcert_source"] and np.all(mg.cell.lengths() >= 5.0)
    assert len(crystals.element_cell("Cu", min_length=0)) == 4
    assert crystals.element_cell("Cu", 4.0).info["jaxcert_key"] != cu.info["jaxcert_key"]
    with pytest.raises(ValueError, match="no crystal structure"):
        crystals.element_cell("H")


# ------------------------------------------------------------------------------------------------ the API boundary
@pytest.mark.parametrize(("kw", "name"), [
    ({"fmax": math.nan}, "PipelineConfig.fmax"), ({"fmax": 0.0}, "PipelineConfig.fmax"),
    ({"fmax": -1.0}, "PipelineConfig.fmax"), ({"fmax": math.inf}, "PipelineConfig.fmax"),
    ({"max_steps": 0}, "PipelineConfig.max_steps"), ({"max_steps": 2.5}, "PipelineConfig.max_steps"),
    ({"optimizer": "adam"}, "PipelineConfig.optimizer"), ({"loss": "forces"}, "PipelineConfig.loss"),
    ({"relative": "yes"}, "PipelineConfig.relative"),
])
def test_pipeline_config_refuses(kw, name):
    with pytest.raises(InputError, match=f"^{name}: got"):
        PipelineConfig(**kw)


def test_pipeline_config_normalises_equal_settings():
    assert PipelineConfig(fmax=1, max_steps=300.0) == PipelineConfig(fmax=1.0, max_steps=300)


@pytest.mark.parametrize(("args", "name"), [
    (("ifgsm", 0), "AttackSpec.n_steps"), (("ifgsm", 2.5), "AttackSpec.n_steps"), (("fgsm", 3), "AttackSpec.n_steps"),
    (("pgd", 10, math.nan), "AttackSpec.alpha_ratio"), (("pgd", 10, -0.1), "AttackSpec.alpha_ratio"),
    (("pgd", 10, None, False), "AttackSpec.random_start"), (("fgsm", 1, None, "yes"), "AttackSpec.random_start"),
    (("bim", 10), "AttackSpec.name"),
])
def test_attack_spec_refuses(args, name):
    with pytest.raises(InputError, match=f"^{name}"):
        AttackSpec(*args)


def _si():
    return jaxcert.Structure.from_ase(bulk("Si", cubic=True))


@pytest.mark.parametrize(("kw", "name"), [
    ({"epsilons": [math.nan]}, "epsilons"), ({"epsilons": [0.1, math.inf]}, "epsilons"),
    ({"epsilons": [-0.1]}, "epsilons"), ({"epsilons": 0.0}, "epsilons"),
    ({"epsilons": [0.1], "seeds": [-1]}, "seeds"), ({"epsilons": [0.1], "seeds": [2**31]}, "seeds"),
    ({"epsilons": [0.1], "seeds": [4.5]}, "seeds"), ({"epsilons": [0.1], "seeds": [1, 1]}, "seeds"),
])
def test_run_grid_and_sweep_refuse_before_computing(kw, name):
    """``model=None``: anything past the checks would fail with an AttributeError, not an InputError."""
    with pytest.raises(InputError, match=f"^{name}"):
        run_grid(None, [_si()], **kw)
    with pytest.raises(InputError, match=f"^{name}"):
        sweep(None, {"si": bulk("Si", cubic=True)}, **kw)


@pytest.mark.parametrize(("kw", "name"), [({"chunk": 0}, "chunk"), ({"chunk": 1.5}, "chunk"),
                                          ({"max_chunks": 0}, "max_chunks"), ({"executor": "ray"}, "executor")])
def test_sweep_refuses_bad_chunking(kw, name):
    with pytest.raises(InputError, match=f"^{name}"):
        sweep(None, {"si": bulk("Si", cubic=True)}, [0.1], **kw)


def test_one_atom_structures_are_refused_by_the_api():
    one = bulk("Cu")
    with pytest.raises(InputError, match="rigid translation"):
        run_grid(None, [jaxcert.Structure.from_ase(one)], [0.1])
    with pytest.raises(InputError, match=r"^structures\['cu'\].*rigid translation"):
        sweep(None, {"cu": one}, [0.1])


# ------------------------------------------------------------------------------------------------ issue 23 (2, 4, 5)
def _fails(capsys, argv, flag, *needles):
    """``main(argv)`` exits 2 with one stderr line naming ``flag`` first and containing every needle."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"jaxcert: error: {flag}"), lines[0]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_attack_json_output_is_checked_before_any_work(tmp_path, capsys, monkeypatch):
    """``--json nodir/a.json`` used to fail only after the whole run; a directory or a read-only folder too."""
    import jaxcert.cli.attack as cli_attack

    def no_work(*a, **k):
        raise AssertionError("the model was loaded before the outputs were checked")

    monkeypatch.setattr(cli_attack, "load_model", no_work)
    base = ["attack", "--model", "sw", "--structure", "Si", "--min-length", "0", "--json"]
    _fails(capsys, base + [str(tmp_path / "nodir" / "a.json")], "--json", "no such directory")
    _fails(capsys, base + [str(tmp_path)], "--json", "is a directory")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores the mode; the probe still sees a writable folder
            pytest.skip("running as root: a read-only folder is writable")
        _fails(capsys, base + [str(ro / "a.json")], "--json", "cannot write")
    finally:
        ro.chmod(0o700)
    assert not (tmp_path / "nodir").exists()


def test_sweep_outputs_are_checked_before_any_work(tmp_path, capsys):
    base = ["sweep", "--model", "sw", "--structures", "Si", "--attack", "fgsm", "--eps", "0.01", "--seed", "42"]
    db = str(tmp_path / "s.sqlite")
    _fails(capsys, base + ["--db", str(tmp_path / "no" / "s.sqlite")], "--db", "no such directory")
    _fails(capsys, base + ["--db", str(tmp_path)], "--db", "is a directory")
    _fails(capsys, base + ["--db", db, "--json", str(tmp_path / "no" / "s.json")], "--json", "no such directory")
    _fails(capsys, base + ["--db", db, "--export", str(tmp_path / "no" / "r.csv")], "--export", "no such directory")
    _fails(capsys, base + ["--db", db, "--json", db], "--json", "same file")
    # --plots may create its last folder only, never a chain above an existing one
    _fails(capsys, base + ["--db", db, "--plots", str(tmp_path / "a" / "b" / "figs")], "--plots", "no such directory")
    assert not (tmp_path / "a").exists()
    # the store's arrays folder must be a folder
    (tmp_path / "s.sqlite.arrays").write_text("not a folder")
    _fails(capsys, base + ["--db", db], "--db", "arrays folder")
    # a bad --contour file is an input error, not a crash after the sweep
    (tmp_path / "s.sqlite.arrays").unlink()
    bad = tmp_path / "c.json"
    bad.write_text("{not json")
    _fails(capsys, base + ["--db", db, "--contour", str(bad), "--dry-run"], "--contour", "cannot read")
    assert not os.path.exists(db)


def test_plot_sweep_out_is_checked(tmp_path, capsys):
    from jaxcert.attacks.sweep import Store

    db = str(tmp_path / "s.sqlite")
    Store(db).put([{"key": "k", "model": "sw", "structure": "si", "attack": "fgsm", "n_steps": 1, "alpha_ratio": 1.0,
                    "epsilon": 0.1, "seed": 42, "config_hash": "h", "version": "0", "dtype": "float64",
                    "row": '{"attack": "fgsm", "n_steps": 1, "epsilon": 0.1, "steps_after": 3}'}])
    _fails(capsys, ["plot-sweep", db, "--out", str(tmp_path / "a" / "b" / "figs")], "--out", "no such directory")
    assert not (tmp_path / "a").exists()
    _fails(capsys, ["plot-sweep", db, "--out", str(tmp_path / "f"), "--metrics", ","], "--metrics")
    _fails(capsys, ["plot-sweep", db, "--out", str(tmp_path / "f"), "--metrics", "../../evil"], "--metrics")
    _fails(capsys, ["plot-sweep", db, "--out", str(tmp_path / "f"), "--metrics", "no_such_metric"], "--metrics")


def _sha(path) -> str:
    import hashlib

    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _sqlite(path, *statements):
    """An SQLite file at ``path`` made by running ``statements`` (another application's database)."""
    import sqlite3

    db = sqlite3.connect(path)
    for st in statements:
        db.execute(st)
    db.commit()
    db.close()
    return path


def _foreign_files(tmp_path) -> dict:
    out = {}
    # another application's 'runs' table: the old code ran ALTER TABLE on it
    out["other runs table"] = (_sqlite(tmp_path / "other_app.sqlite", "CREATE TABLE runs (id INTEGER PRIMARY KEY, "
                                       "name TEXT)", "INSERT INTO runs VALUES (1, 'theirs')"), "other columns")
    # an SQLite file without a 'runs' table: the old code added one
    out["no runs table"] = (_sqlite(tmp_path / "notes.sqlite", "CREATE TABLE notes (t TEXT)"), "no 'runs' table")
    # another application that identifies itself
    out["other application id"] = (_sqlite(tmp_path / "stamped.sqlite", "PRAGMA application_id = 1234",
                                           "CREATE TABLE runs (key TEXT)"), "another application")
    p = tmp_path / "text.sqlite"
    p.write_text("this is not a database\n" * 10)
    out["not sqlite"] = (p, "not an SQLite file")
    return out


@pytest.mark.parametrize("kind", ["other runs table", "no runs table", "other application id", "not sqlite"])
def test_sweep_refuses_foreign_files_and_leaves_them_unchanged(kind, tmp_path, capsys):
    path, why = _foreign_files(tmp_path)[kind]
    before = _sha(path)
    _fails(capsys, ["sweep", "--model", "sw", "--structures", "Si", "--attack", "fgsm", "--eps", "0.01", "--seed",
                    "42", "--db", str(path), "--dry-run"], "--db", why)
    assert _sha(path) == before
    _fails(capsys, ["plot-sweep", str(path), "--out", str(tmp_path / "figs")], "DB", why)
    assert _sha(path) == before and not (tmp_path / "figs").exists()


def test_store_is_stamped_and_old_stores_are_migrated(tmp_path):
    import sqlite3

    from jaxcert.attacks.sweep import APPLICATION_ID, SCHEMA_VERSION, Store, check_store

    path = tmp_path / "new.sqlite"
    Store(str(path)).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x4A584353
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()
    # a store made before the id existed (jaxcert's 'runs' columns, no id) is recognised, migrated and stamped
    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)
    db.execute("CREATE TABLE runs (key TEXT PRIMARY KEY, model TEXT NOT NULL, structure TEXT NOT NULL, attack TEXT "
               "NOT NULL, n_steps INTEGER NOT NULL, alpha_ratio REAL NOT NULL, epsilon REAL NOT NULL, seed INTEGER "
               "NOT NULL, config_hash TEXT NOT NULL, version TEXT NOT NULL, row TEXT NOT NULL)")
    db.commit()
    db.close()
    assert check_store(str(old)) == "legacy"
    Store(str(old)).close()
    assert check_store(str(old)) == "jaxcert"
    # a store of a newer schema is refused
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(InputError, match="^--db: .*newer"):
        Store(str(path), name="--db")


def _molecule_file(tmp_path):
    from ase.cluster import Icosahedron

    path = tmp_path / "cu13.xyz"  # a 13-atom Cu cluster: pbc False, zero cell
    ase.io.write(path, Icosahedron("Cu", 2))
    return path


def test_attack_on_a_molecule_runs_and_reports_null_relative_eps(tmp_path, capsys):
    """A non-periodic structure used to die in metrics.py with ZeroDivisionError (ε/L, L = 0) after computing."""
    import json

    mol = _molecule_file(tmp_path)
    out = tmp_path / "m.json"
    rc = main(["attack", "--model", "emt", "--structure", str(mol), "--attack", "fgsm", "--eps", "0.05",
               "--max-steps", "40", "--quiet", "--json", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "no periodic axis" in cap.out and cap.err == ""  # --quiet: no progress
    doc = json.loads(out.read_text())
    (run,) = doc["runs"]
    assert run["epsilon_percent_min"] is None and run["epsilon_percent_abc"] == [None, None, None]
    assert run["half_min_lattice_A"] is None and run["epsilon_exceeds_half_cell"] is False
    assert 0 < run["immediate"]["linf_displacement"] <= 0.05 + 1e-12
    assert doc["structure_info"]["pbc"] == [False, False, False]
    # --relative has no lattice length to refer to: refused before any work, naming --relative
    _fails(capsys, ["attack", "--model", "emt", "--structure", str(mol), "--relative", "--eps", "0.01"],
           "--relative", "pbc=[False, False, False]")


def test_relative_eps_needs_a_periodic_structure_in_the_api():
    from ase.cluster import Icosahedron

    mol = jaxcert.Structure.from_ase(Icosahedron("Cu", 2))
    with pytest.raises(InputError, match="^PipelineConfig.relative"):
        run_grid(jaxcert.models.get("emt"), [mol], [0.01], config=PipelineConfig(relative=True))


#: (flag, value, what the message must contain): unbounded values that used to overflow, allocate hundreds of GiB or
#: crash with a message naming nothing.
UNBOUNDED = [
    ("--min-length", "1e308", "1e+06"),  # OverflowError before
    ("--min-length", "1e4", "atoms"),  # tried to allocate 373 GiB before
    ("--max-steps", "99999999999999999999", "2147483647"),  # JAX OverflowError before
    ("--n-steps", "99999999999999999999", "2147483647"),
    ("--rattle", "1e308", "<= 1"),  # a message naming nothing before
    ("--eps", "1e300", "<= 100"),
    ("--alpha-ratio", "1e308", "<= 2"),
]


@pytest.mark.parametrize(("flag", "value", "needle"), UNBOUNDED, ids=[f"{f}={v}" for f, v, _ in UNBOUNDED])
def test_attack_refuses_unbounded_values(flag, value, needle, capsys):
    _fails(capsys, ["attack", "--model", "sw", "--structure", "Si", "--attack", "pgd", flag, value], flag, needle)


def test_min_length_message_gives_atoms_memory_and_limit(tmp_path, capsys):
    line = _fails(capsys, ["attack", "--model", "sw", "--structure", "Si", "--min-length", "1e4"], "--min-length",
                  "GiB", "1,000,000 atoms")
    assert "8-atom" in line
    # the same bound for a file repeated with --min-length, and for the sweep (flag and TOML)
    ase.io.write(tmp_path / "si.extxyz", bulk("Si", cubic=True))
    _fails(capsys, ["attack", "--model", "sw", "--structure", str(tmp_path / "si.extxyz"), "--min-length", "1e4"],
           "--min-length", "atoms")
    _fails(capsys, ["sweep", "--model", "sw", "--structures", "Si", "--min-length", "1e4", "--db",
                    str(tmp_path / "s.sqlite"), "--dry-run"], "--min-length", "atoms")
    toml = tmp_path / "sweep.toml"
    toml.write_text('model = "sw"\nstructures = ["Si"]\ndb = "s.sqlite"\nmin_length = 1e4\n')
    _fails(capsys, ["sweep", str(toml), "--dry-run"], "sweep.toml: min_length", "atoms")
    assert not (tmp_path / "s.sqlite").exists()


SWEEP_UNBOUNDED = [
    ("--max-steps", "99999999999999999999"), ("--n-steps", "99999999999999999999"), ("--min-length", "1e308"),
    ("--eps", "1e300"), ("--alpha-ratio", "1e308"),
]


@pytest.mark.parametrize(("flag", "value"), SWEEP_UNBOUNDED, ids=[f"{f}={v}" for f, v in SWEEP_UNBOUNDED])
def test_sweep_refuses_unbounded_values(flag, value, tmp_path, capsys):
    db = tmp_path / "s.sqlite"
    _fails(capsys, ["sweep", "--model", "sw", "--structures", "Si", "--attack", "pgd", "--db", str(db), flag, value],
           flag, "allowed")
    assert not db.exists()


@pytest.mark.parametrize("line", ["n_steps = 99999999999999999999", "[config]\nmax_steps = 99999999999999999999",
                                  'attacks = [{name = "pgd", alpha_ratio = 1e308}]', "epsilons = [1e300]"])
def test_sweep_toml_refuses_unbounded_values(line, tmp_path, capsys):
    toml = tmp_path / "sweep.toml"
    toml.write_text(f'model = "sw"\nstructures = ["Si"]\ndb = "s.sqlite"\n{line}\n')
    _fails(capsys, ["sweep", str(toml)], "sweep.toml: ", "allowed")
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("value", [",", "", "pgd,", "pgd,pgd", "bim"])
def test_attack_lists_use_the_one_name_parser(value, tmp_path, capsys):
    _fails(capsys, ["attack", "--model", "sw", "--structure", "Si", "--attack", value], "--attack")
    _fails(capsys, ["sweep", "--model", "sw", "--structures", "Si", "--attack", value, "--db",
                    str(tmp_path / "s.sqlite")], "--attack")
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("value", [",", "Si,", "Si,,Cu", "Si,Si"])
def test_sweep_structures_use_the_one_name_parser(value, tmp_path, capsys):
    _fails(capsys, ["sweep", "--model", "sw", "--structures", value, "--db", str(tmp_path / "s.sqlite")],
           "--structures")


def test_attack_shows_progress_per_phase(capsys):
    """A long single-structure attack used to show nothing until the end: now one line per phase on stderr (a rich
    bar on a terminal), and nothing with --quiet."""
    assert main(["attack", "--model", "lj", "--structure", "Cu", "--min-length", "0", "--attack", "pgd",
                 "--n-steps", "2", "--max-steps", "20"]) == 0
    err = capsys.readouterr().err
    for phase in ("relax", "attack + relax", "metrics"):
        assert f"attack 4 atoms {phase} · elapsed" in err, err
    assert err.strip().splitlines()[-1].startswith("done · 3/3")
