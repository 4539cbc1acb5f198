"""The command line at its boundary (docs/cli.md, "Exit codes"): 0 every gate passed, 1 a gate failed, 2 a
usage or input error (one line naming the argument, nothing computed), 3 an internal error (one line and the
path of a saved traceback).  Outputs are checked before any work; user model code that fails is an input
error; nothing certified never exits 0.

Each case here failed on the main of issue 23 (exit 1 with a traceback, exit 0, or work lost after computing).
"""

from __future__ import annotations

import os
import stat
import sys

import pytest

from jaxcert.cli import main

LJ = ["certify", "--model", "lj", "--elements", "Ar", "--quiet"]


def _one_error_line(capsys, *words: str) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("jaxcert: error: "), err
    for w in words:
        assert w in err[0], (w, err[0])
    return err[0]


@pytest.fixture
def no_work(monkeypatch):
    """Make any probe run an internal error: a case that exits 2 through it was refused before any work."""
    import jaxcert.cli.certify as cc

    def boom(*_a, **_k):
        raise AssertionError("the suite ran although the input was refused")

    monkeypatch.setattr(cc, "certify", boom)
    monkeypatch.setattr(cc, "lam", boom)


# ----------------------------------------------------------------------------- exit 3: internal errors


@pytest.mark.parametrize("exc", [RuntimeError("deep in XLA"), ValueError("a library bug"), KeyError("C"),
                                 ZeroDivisionError("division by zero")])
def test_an_internal_error_exits_3_with_a_saved_traceback(monkeypatch, capsys, exc):
    import jaxcert.cli.certify as cc

    def crash(*_a, **_k):
        raise exc

    monkeypatch.setattr(cc, "certify", crash)
    assert main([*LJ, "--probes", "parity"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxcert: internal error: " + type(exc).__name__), err
    path = err[0].split("traceback saved to ")[1].split(" ")[0]
    try:
        text = open(path).read()
        assert "Traceback" in text and type(exc).__name__ in text
    finally:
        os.unlink(path)


def test_argparse_usage_error_and_help_are_returned_not_raised(capsys):
    assert main(["certify", "--no-such-flag"]) == 2
    assert main(["certify", "--help"]) == 0


# ----------------------------------------------------------------------------- nothing certified is never 0


@pytest.mark.parametrize("probes", [",", "", " , ", "parity,,betti"])
def test_probe_lists_that_name_nothing_exit_2(capsys, no_work, probes):
    assert main([*LJ, "--probes", probes]) == 2
    _one_error_line(capsys, "--probes")


def test_every_element_unsupported_and_skipped_exits_2(capsys, no_work):
    assert main(["certify", "--model", "sw", "--elements", "Cu,Ar", "--skip-unsupported", "--quiet"]) == 2
    _one_error_line(capsys, "--elements", "nothing would be certified")


def test_every_probe_skipped_exits_2_not_0(capsys, monkeypatch):
    # a model without a stress head and without a cell derivative is not needed: the stress probes skip a
    # non-periodic substrate, so force that by certifying a probe whose every element is recorded as skipped
    import jaxcert.cli.certify as cc
    from jaxcert.probes import suite

    real = suite.certify

    def all_skipped(model, elements, **kw):
        rep = real(model, elements, **kw)
        for o in rep.outcomes:
            o.status[:] = ["skipped"] * len(o.status)
        return rep

    monkeypatch.setattr(cc, "certify", all_skipped)
    assert main([*LJ, "--probes", "parity"]) == 2
    err = capsys.readouterr().err
    assert "nothing was certified" in err


# ----------------------------------------------------------------------------- --model: the user's code


def _module(tmp_path, monkeypatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    sys.modules.pop(name, None)
    return name


MODEL = "import jaxcert\nmodel = jaxcert.models.get('lj')\n"


@pytest.mark.parametrize("body,attr,words", [
    ("import sys\nsys.exit(0)\n", "model", ["importing", "SystemExit"]),
    ("raise RuntimeError('broken import')\n", "model", ["RuntimeError", "broken import"]),
    ("model = 'a string'\n", "model", ["str", "not a jaxcert.Model"]),
    ("def model():\n    raise ValueError('no weights')\n", "model", ["calling model()", "no weights"]),
    ("def model(path):\n    pass\n", "model", ["calling model()", "TypeError", "no argument"]),
    ("def model():\n    return 3\n", "model", ["returned a int"]),
    (MODEL, "nope", ["has no attribute 'nope'"]),
])
def test_user_model_failures_are_input_errors(tmp_path, monkeypatch, capsys, no_work, body, attr, words):
    name = _module(tmp_path, monkeypatch, f"jc_user_{abs(hash((body, attr))) % 10**8}", body)
    assert main([*LJ[:1], "--model", f"{name}:{attr}", *LJ[3:], "--probes", "parity"]) == 2
    _one_error_line(capsys, "--model", *words)


def test_user_model_in_the_current_folder_is_found(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch, "jc_user_here", MODEL)
    assert main(["certify", "--model", f"{name}:model", "--elements", "Ar", "--probes", "parity", "--quiet"]) == 0


def test_missing_module_says_where_it_looked(tmp_path, monkeypatch, capsys, no_work):
    monkeypatch.chdir(tmp_path)
    assert main([*LJ[:1], "--model", "no_such_mod_xyz:model", *LJ[3:], "--probes", "parity"]) == 2
    _one_error_line(capsys, "--model", "no_such_mod_xyz", str(tmp_path))


@pytest.mark.parametrize("spec", [":", "mod:", ":attr", "a b:c", "mod:1x"])
def test_malformed_model_spec_names_the_argument(capsys, no_work, spec):
    assert main([*LJ[:1], "--model", spec, *LJ[3:]]) == 2
    _one_error_line(capsys, "--model")


# ----------------------------------------------------------------------------- outputs before work


def test_lambda_json_in_a_missing_folder_is_refused_before_work(tmp_path, capsys, no_work):
    assert main(["lambda", "--model", "lj", "--json", str(tmp_path / "nodir" / "l.json")]) == 2
    _one_error_line(capsys, "--json", "no such directory")


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_output_that_is_a_directory_is_refused(tmp_path, capsys, no_work, flag):
    assert main([*LJ, "--probes", "parity", flag, str(tmp_path)]) == 2
    _one_error_line(capsys, flag, "is a directory")


def test_output_in_an_unwritable_folder_is_refused(capsys, no_work):
    # /sys refuses new files even to root; os.access would say yes to root
    assert main([*LJ, "--probes", "parity", "--json", "/sys/jaxcert-report.json"]) == 2
    _one_error_line(capsys, "--json", "cannot write")


def test_json_and_html_on_one_file_is_refused(tmp_path, capsys, no_work):
    p = str(tmp_path / "r.json")
    assert main([*LJ, "--probes", "parity", "--json", p, "--html", p]) == 2
    _one_error_line(capsys, "--html", "same file")
    assert not os.path.exists(p)


def test_reports_are_written_with_the_users_umask(tmp_path, capsys):
    old = os.umask(0o022)
    try:
        assert main([*LJ, "--probes", "parity", "--json", str(tmp_path / "r.json")]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "r.json").st_mode) == 0o644


def test_substrates_creates_only_the_last_folder(tmp_path, capsys):
    deep = tmp_path / "a" / "b" / "c"
    assert main(["substrates", "--element", "Si", "--out", str(deep)]) == 2
    _one_error_line(capsys, "--out", "only the last folder")
    assert not (tmp_path / "a").exists()
    assert main(["substrates", "--element", "Si", "--out", str(tmp_path / "a")]) == 0
    assert sorted(os.listdir(tmp_path / "a")) == sorted(f"Si_{k}.extxyz" for k in ("bulk", "cluster", "p2mm",
                                                                                    "trimer"))


@pytest.mark.parametrize("element", ["Xx", "si", "Si,C", ""])
def test_substrates_unknown_element_names_the_argument(tmp_path, capsys, element):
    assert main(["substrates", "--element", element, "--out", str(tmp_path / "s")]) == 2
    _one_error_line(capsys, "--element")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("argv,flag", [
    (["controls", "--sections", ","], "--sections"),
    (["controls", "--sections", ""], "--sections"),
    (["controls", "--models", ""], "--models"),
    (["controls", "--quick", "--json", "/nonexistent-dir/c.json"], "--json"),
])
def test_controls_lists_and_outputs_checked_first(capsys, argv, flag):
    assert main(argv) == 2
    _one_error_line(capsys, flag)


def test_investigate_out_with_missing_parents_is_refused(tmp_path, capsys):
    out = tmp_path / "x" / "y"
    assert main(["investigate", "--target", "lj", "--committee", "morse", "--out", str(out)]) == 2
    _one_error_line(capsys, "--out")
    assert not (tmp_path / "x").exists()
