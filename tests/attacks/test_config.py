"""The sweep configuration in the library (:mod:`jaxcert.attacks.config`): TOML → SweepConfig, each bad key or value
named, flags over the file over the defaults."""

from __future__ import annotations

import os

import pytest

from jaxcert.attacks.config import SWEEP_DEFAULTS, SweepConfig, load_sweep_config
from jaxcert.core.inputs import InputError

GOOD = '''model = "sw"
db = "s.sqlite"
structures = ["Si", "C"]
attacks = "fgsm,pgd"
epsilons = [0.01, 0.02]
seeds = "1,2"
n_steps = 5
[config]
fmax = 0.05
relative = false
'''


def _write(tmp_path, text, name="sweep.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_valid_toml_gives_a_checked_frozen_config(tmp_path):
    conf = load_sweep_config(_write(tmp_path, GOOD))
    assert conf["model"] == "sw" and conf["epsilons"] == [0.01, 0.02] and conf["seeds"] == [1, 2]
    assert conf["structures"] == ["Si", "C"] and conf["n_steps"] == 5 and conf["defect"] == []
    assert conf["db"] == os.path.join(str(tmp_path), "s.sqlite")  # relative to the TOML file
    assert dict(conf.pipeline) == {"fmax": 0.05, "relative": False}
    assert conf.names["epsilons"] == "sweep.toml: epsilons" and conf.names["seeds"] == "sweep.toml: seeds"
    assert conf.names["chunk"] == "--chunk" and conf["chunk"] == SWEEP_DEFAULTS["chunk"]
    with pytest.raises(TypeError):
        conf.settings["model"] = "lj"
    with pytest.raises(AttributeError):
        conf.names = {}


def test_flags_override_the_toml_file(tmp_path):
    conf = load_sweep_config(_write(tmp_path, GOOD), {"eps": "0.5", "seed": None, "fmax": "0.2", "defect": []})
    assert conf["epsilons"] == [0.5] and conf.names["epsilons"] == "--eps"
    assert conf["seeds"] == [1, 2] and conf.names["seeds"] == "sweep.toml: seeds"
    assert conf.pipeline["fmax"] == 0.2 and conf.names["config.fmax"] == "--fmax"


def test_from_mapping_without_a_file():
    conf = SweepConfig.from_mapping(None, {"model": "lj", "db": "x.sqlite", "attack": "pgd", "defect": ["curl=0.1"]})
    assert conf["attacks"] == "pgd" and conf["defect"] == ["curl=0.1"] and conf["dtype"] == "float64"


@pytest.mark.parametrize("extra, needle", [
    ("bogus = 1\n", "unknown key(s) ['bogus']"),
    ("epsilons = [0.01, -1]\n", "sweep.toml: epsilons"),
    ("epsilons = [0.01, 0.01]\n", "sweep.toml: epsilons: [0.01] given more than once"),
    ("epsilons = [500.0]\n", "sweep.toml: epsilons: got 500"),
    ("seeds = -3\n", "sweep.toml: seeds"),
    ("n_steps = 0\n", "sweep.toml: n_steps"),
    ("chunk = 'x'\n", "sweep.toml: chunk"),
    ("dtype = 'float16'\n", "sweep.toml: dtype"),
    ("executor = 'ray'\n", "sweep.toml: executor"),
    ("dry_run = 'yes'\n", "sweep.toml: dry_run: got 'yes'; allowed: true or false"),
    ("export = 3\n", "sweep.toml: export: got 3; allowed: a string"),
    ("structures = [1, 2]\n", "sweep.toml: structures"),
    ("min_length = 1e9\n", "sweep.toml: min_length"),
    ("alpha_ratio = 3\n", "sweep.toml: alpha_ratio"),
    ("defect = 3\n", "sweep.toml: defect"),
])
def test_each_bad_toml_value_is_named(tmp_path, extra, needle):
    body = GOOD.replace("epsilons = [0.01, 0.02]\n", "").replace("seeds = \"1,2\"\n", "").replace("n_steps = 5\n", "")
    body = body.replace('structures = ["Si", "C"]\n', "")
    top, _, table = body.partition("[config]")
    with pytest.raises(InputError) as err:
        load_sweep_config(_write(tmp_path, top + extra + "[config]" + table))
    assert needle in str(err.value)


@pytest.mark.parametrize("config, needle", [
    ("fmax = -1\n", "sweep.toml: [config] fmax"),
    ("optimizer = 'adam'\n", "sweep.toml: [config] optimizer"),
    ("relative = 1\n", "sweep.toml: [config] relative"),
    ("nope = 1\n", "unknown [config] key(s) ['nope']"),
])
def test_each_bad_config_value_is_named(tmp_path, config, needle):
    with pytest.raises(InputError) as err:
        load_sweep_config(_write(tmp_path, GOOD.split("[config]")[0] + "[config]\n" + config))
    assert needle in str(err.value)


def test_flag_values_are_named_by_flag(tmp_path):
    with pytest.raises(InputError, match="^--eps: "):
        load_sweep_config(_write(tmp_path, GOOD), {"eps": "abc"})
    with pytest.raises(InputError, match="^--attack: "):
        load_sweep_config(_write(tmp_path, GOOD), {"attack": ","})
    with pytest.raises(InputError, match="^--max-steps: "):
        load_sweep_config(_write(tmp_path, GOOD), {"max_steps": "0"})


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such TOML file"):
        load_sweep_config(str(tmp_path / "none.toml"))
    with pytest.raises(InputError, match="invalid TOML"):
        load_sweep_config(_write(tmp_path, "model = \n"))
    with pytest.raises(InputError, match="a \\[config\\] table"):
        load_sweep_config(_write(tmp_path, "model = 'sw'\ndb = 'x'\nconfig = 3\n"))
    with pytest.raises(InputError, match="no model"):
        load_sweep_config(_write(tmp_path, "db = 'x'\n"))
    with pytest.raises(InputError, match="no store"):
        load_sweep_config(_write(tmp_path, "model = 'sw'\n"))


# ------------------------------------------------------------------------- what the commands run, built here
def _attack_args(**kw):
    import argparse

    base = {"attack": "fgsm,pgd", "eps": "0.05", "seed": "42", "n_steps": "3", "alpha_ratio": None, "fmax": "0.01",
            "max_steps": "50", "rattle": "0", "rattle_seed": "0", "min_length": "5", "relative": False,
            "structure": "Si", "dtype": "float64", "json": None, "optimizer": "fire", "loss": "energy",
            "random_start": True}
    return argparse.Namespace(**(base | kw))


def test_prepare_attack_builds_specs_structure_and_report_info():
    from jaxcert.attacks.config import prepare_attack

    job = prepare_attack(_attack_args())
    assert [(s.name, s.n_steps, s.random_start) for s in job.specs] == [("fgsm", 1, True), ("pgd", 3, None)]
    assert job.eps == [0.05] and job.seeds == [42] and job.pipeline.max_steps == 50
    assert job.structure_info["formula"] == job.atoms.get_chemical_formula() and job.structure_info["spec"] == "Si"
    assert min(job.structure_info["cell_lengths_A"]) >= 5 and job.extra_config["random_start"] is True


@pytest.mark.parametrize("kw, needle", [({"optimizer": "adam"}, "^--optimizer: "), ({"loss": "x"}, "^--loss: "),
                                        ({"dtype": "float16"}, "^--dtype: "), ({"structure": "si"}, "^--structure: "),
                                        ({"eps": "0.05,"}, "^--eps: ")])
def test_prepare_attack_names_the_bad_argument(kw, needle):
    from jaxcert.attacks.config import prepare_attack

    with pytest.raises(InputError, match=needle):
        prepare_attack(_attack_args(**kw))


def test_prepare_sweep_checks_structures_and_outputs_and_warns_of_large_eps(tmp_path):
    import numpy as np

    from jaxcert.attacks.config import prepare_sweep

    conf = SweepConfig.from_mapping(None, {"model": "sw", "db": str(tmp_path / "s.sqlite"), "structures": "Si",
                                           "attack": "pgd", "eps": "0.01,3", "min_length": "5"})
    job = prepare_sweep(conf, np.float64)
    assert list(job.atoms) == ["Si"] and [s.name for s in job.specs] == ["pgd"] and job.contour is None
    assert len(job.warnings) == 1 and "epsilon_exceeds_half_cell" in job.warnings[0]
    assert os.path.isdir(str(tmp_path / "s.sqlite.arrays"))
    small = SweepConfig.from_mapping(None, {"model": "sw", "db": str(tmp_path / "t.sqlite"), "structures": "Si",
                                            "eps": "0.01", "min_length": "5", "dry_run": True})
    assert prepare_sweep(small, np.float64).warnings == ()
    assert not os.path.exists(str(tmp_path / "t.sqlite.arrays"))  # a dry run computes nothing, creates nothing


def test_stored_rows_refuses_a_missing_or_empty_store(tmp_path):
    from jaxcert.attacks.config import stored_rows
    from jaxcert.attacks.sweep import Store

    with pytest.raises(InputError, match="^DB: no such store"):
        stored_rows(str(tmp_path / "none.sqlite"))
    Store(str(tmp_path / "e.sqlite"))
    with pytest.raises(InputError, match="^DB: .* has no finished runs for {'model': 'lj'}"):
        stored_rows(str(tmp_path / "e.sqlite"), model="lj")
    with pytest.raises(InputError, match="^--dtype: "):
        stored_rows(str(tmp_path / "e.sqlite"), dtype="float16")


def test_sweep_warnings_one_line_per_kind():
    from jaxcert.attacks.report import sweep_warnings

    rows = [{"structure": "Si", "stationary_start": True, "random_start": "none"},
            {"structure": "C", "epsilon_exceeds_half_cell": True, "nonfinite": True}, {"structure": "Cu"}]
    out = sweep_warnings(rows)
    assert len(out) == 3 and out[0].startswith("1 of 3 runs started at a stationary point")
    assert "epsilon_exceeds_half_cell" in out[1] and "nonfinite" in out[2] and sweep_warnings([]) == []
