"""Model-spec resolution in the library (:mod:`jaxcert.specs`) and the SevenNet spellings (docs/cli.md)."""

from __future__ import annotations

import sys
import warnings

import pytest

import jaxcert.models
from jaxcert import specs
from jaxcert.cli import main
from jaxcert.core.inputs import InputError


def test_cli_reexports_the_library_resolver():
    import jaxcert.cli
    import jaxcert.cli._common

    assert jaxcert.cli.load_model is specs.load_model is jaxcert.cli._common.load_model


def test_registered_name_defects_and_max_batch():
    m = specs.load_model("lj", ["curl=0.3"], "7")
    assert m.name.startswith("lj+curl") and m.max_batch == 7
    assert specs.load_model("lj", max_batch="none").max_batch is None


@pytest.mark.parametrize("spec, defects, max_batch, needle", [
    ("nosuch", None, None, "unknown model 'nosuch'"),
    ("lj", ["nosuch=1"], None, "unknown defect 'nosuch'"),
    ("lj", ["curl=abc"], None, "--defect"),
    ("lj", None, "0", "--max-batch"),
    ("1bad:attr", None, None, "--model: got '1bad:attr'"),
    ("no_such_module_xyz:model", None, None, "no module named 'no_such_module_xyz'"),
    ("jaxcert.models:nosuch", None, None, "has no attribute 'nosuch'"),
    ("jaxcert.models:_REGISTRY", None, None, "is a dict, not a jaxcert.Model"),
])
def test_bad_specs_are_input_errors(spec, defects, max_batch, needle):
    with pytest.raises(InputError, match=None) as err:
        specs.load_model(spec, defects, max_batch)
    assert needle in str(err.value)


def test_user_factory_is_called(tmp_path, monkeypatch):
    (tmp_path / "my_pot_spec.py").write_text("import jaxcert\ndef make():\n    return jaxcert.models.get('lj')\n"
                                             "def bad():\n    return 3\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert specs.load_model("my_pot_spec:make").name.startswith("lj")
        with pytest.raises(InputError, match=r"bad\(\) returned a int"):
            specs.load_model("my_pot_spec:bad")
    finally:
        sys.modules.pop("my_pot_spec", None)


@pytest.mark.parametrize("old, new", [("sevennet", "torch-sevennet"), ("sevennet:7net-0", "torch-sevennet:7net-0"),
                                      ("sevennet:7net-mf-0:PBE@float64", "torch-sevennet:7net-mf-0:PBE@float64")])
def test_old_sevennet_spelling_is_the_bridge_with_a_warning(old, new):
    spec, note = specs.canonical_spec(old)
    assert spec == new
    assert f"--model {old} is the torch bridge; spell it {new}" in note and "jax-sevennet" in note


@pytest.mark.parametrize("spec", ["torch-sevennet:7net-0", "jax-sevennet:7net-0", "chgnet", "lj", "my.mod:sevennet"])
def test_unambiguous_spellings_are_unchanged(spec):
    assert specs.canonical_spec(spec) == (spec, None)


def test_load_model_warns_once_for_the_old_spelling(monkeypatch):
    seen = []

    class FakeBridges:
        @staticmethod
        def load(spec):
            seen.append(spec)
            return jaxcert.models.get("lj")

    monkeypatch.setitem(sys.modules, "jaxcert_bridges", FakeBridges)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        specs.load_model("sevennet:7net-0")
        specs.load_model("torch-sevennet:7net-0")
    assert seen == ["sevennet:7net-0", "sevennet:7net-0"]  # jaxcert_bridges keeps its own spelling
    assert [x.category for x in w] == [specs.SpellingWarning]
    assert "spell it torch-sevennet:7net-0" in str(w[0].message)


def test_cli_prints_the_old_spelling_warning_as_one_line(monkeypatch, capsys):
    class FakeBridges:
        @staticmethod
        def load(spec):
            raise ValueError(f"unknown option in {spec}")

    monkeypatch.setitem(sys.modules, "jaxcert_bridges", FakeBridges)
    assert main(["lambda", "--model", "sevennet:7net-0@fd"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == ("jaxcert: warning: --model sevennet:7net-0@fd is the torch bridge; spell it "
                      "torch-sevennet:7net-0@fd (the native JAX model is jax-sevennet:7net-0)")
    assert err[1].startswith("jaxcert: error: --model 'sevennet:7net-0@fd': ") and len(err) == 2
    assert main(["lambda", "--model", "torch-sevennet:7net-0@fd"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxcert: error: --model 'torch-sevennet:7net-0@fd': ")


def test_python_registry_name_and_alias():
    assert "jax-sevennet" in jaxcert.models.available() and "sevennet" not in jaxcert.models.available()
    from jaxcert.models import sevennet as native

    assert jaxcert.models._factory("jax-sevennet") is native.sevennet
    with pytest.warns(DeprecationWarning, match="spell it 'jax-sevennet'"):
        assert jaxcert.models._factory("sevennet") is native.sevennet


def test_spec_lists_are_spelled_unambiguously():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = specs.canonical_specs("--panel", "chgnet,sevennet:7net-0,torch-sevennet:7net-l3i5")
        quiet = specs.canonical_specs("--panel", ("emt", "sevennet:7net-0"), warn=False)
    assert got == ("chgnet", "torch-sevennet:7net-0", "torch-sevennet:7net-l3i5")
    assert quiet == ("emt", "torch-sevennet:7net-0")
    assert [x.category for x in w] == [specs.SpellingWarning]
    assert str(w[0].message).startswith("--panel sevennet:7net-0 is the torch bridge; spell it torch-sevennet:7net-0")
    with pytest.raises(InputError, match="^--panel: .*an empty entry"):
        specs.canonical_specs("--panel", "chgnet,,emt")


def test_controls_cli_uses_the_new_spelling(capsys):
    from jaxcert.cli import build_parser

    a = build_parser().parse_args(["controls"])
    assert "torch-sevennet:7net-0" in a.models.split(",") and "torch-sevennet:7net-l3i5" in a.panel.split(",")
    assert not [s for s in (*a.models.split(","), *a.panel.split(",")) if s.startswith("sevennet")]
    # the old spelling still works, with one warning line naming the flag (here a bad --seed ends the run at once)
    assert main(["controls", "--models", "emt,sevennet:7net-0", "--seed", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == ("jaxcert: warning: --models sevennet:7net-0 is the torch bridge; spell it torch-sevennet:7net-0 "
                      "(the native JAX model is jax-sevennet:7net-0)")
    assert err[1].startswith("jaxcert: error: --seed: ") and len(err) == 2
