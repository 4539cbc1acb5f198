"""jaxcert.core.inputs: every check accepts the clean value and refuses a bad one naming the argument."""

import io
import math

import pytest

from jaxcert.core import inputs
from jaxcert.core.inputs import InputError
from jaxcert.progress import StepProgress, format_seconds


@pytest.mark.parametrize("value", ["nan", float("nan"), "inf", float("-inf"), "abc", None, True])
def test_finite_refuses_non_numbers(value):
    with pytest.raises(InputError, match=r"^--x: got .*allowed: a finite number"):
        inputs.finite("--x", value)


def test_positive_and_ranges():
    assert inputs.positive("--eps", "0.05") == 0.05
    for bad in ("0", "-1", "nan", "1e400"):
        with pytest.raises(InputError, match="--eps: got"):
            inputs.positive("--eps", bad, "Å")
    with pytest.raises(InputError, match="<= 0.1"):
        inputs.positive("--step", 0.5, maximum=0.1)
    assert inputs.non_negative("--rattle", 0) == 0.0
    with pytest.raises(InputError, match="--rattle"):
        inputs.non_negative("--rattle", -0.1)


def test_integers_and_seeds():
    assert inputs.integer("--n", "10") == 10 and inputs.integer("--n", 3.0) == 3
    for bad in ("2.5", 2.5, "x", "0", float("nan"), True):
        with pytest.raises(InputError, match="--n: got"):
            inputs.integer("--n", bad)
    assert inputs.seed("--seed", 0) == 0 and inputs.seed("--seed", 2**31 - 1) == 2**31 - 1
    for bad in (-1, 2**31, "1.5"):
        with pytest.raises(InputError, match="--seed"):
            inputs.seed("--seed", bad)
    assert inputs.integer_list("--seed", "1,2", seeds=True) == [1, 2]
    with pytest.raises(InputError, match="more than once"):
        inputs.integer_list("--seed", "1,1", seeds=True)
    assert inputs.number_list("--eps", "0.1, 0.2") == [0.1, 0.2]
    with pytest.raises(InputError, match="--eps"):
        inputs.number_list("--eps", "0.1,nan")
    with pytest.raises(InputError, match="non-empty"):
        inputs.number_list("--eps", " , ")


def test_one_list_parser_refuses_empty_entries_naming_the_argument():
    assert inputs.split_list("--x", " a , b ") == ["a", "b"]
    assert inputs.split_list("--x", ["a ", 2, {"name": "pgd"}]) == ["a", 2, {"name": "pgd"}]
    assert inputs.split_list("--x", {"name": "pgd"}) == [{"name": "pgd"}] and inputs.split_list("--x", 0.5) == [0.5]
    assert inputs.split_list("--x", "Si C, Cu", spaces=True) == ["Si", "C", "Cu"]
    for bad in ("", ",", "a,,b", "a,", [], ["a", " "]):
        with pytest.raises(InputError, match=r"^--x: got .*; allowed: a non-empty comma-separated list"):
            inputs.split_list("--x", bad)
    # every list argument goes through it: a stray comma is refused, never dropped
    for parse, value in ((inputs.number_list, "0.1,"), (inputs.integer_list, "1,,2"), (inputs.elements, "Si,,C"),
                         (inputs.name_list, "a,,b")):
        with pytest.raises(InputError, match="^--arg: .*an empty entry names nothing"):
            parse("--arg", value)


def test_elements():
    assert inputs.elements("--elements", "Si, C,Cu") == ["Si", "C", "Cu"]
    with pytest.raises(InputError, match=r"'Xx'"):
        inputs.elements("--elements", "Si,Xx")
    with pytest.raises(InputError, match=r"did you mean 'Si'"):
        inputs.elements("--elements", "si")
    with pytest.raises(InputError, match="more than once"):
        inputs.elements("--elements", ["Cu", "Cu"])
    with pytest.raises(InputError, match="non-empty"):
        inputs.elements("--elements", ",")


def test_unknown_name_is_also_a_key_error():
    err = inputs.UnknownName("probes: unknown probe(s) ['x']")
    assert isinstance(err, KeyError) and isinstance(err, ValueError) and str(err).startswith("probes:")


def test_structure_files(tmp_path):
    """Zero atoms, partial occupancies and vacancies are refused with one line; a clean file reads."""
    from ase.build import bulk
    from ase.io import write

    ok = tmp_path / "si.extxyz"
    write(ok, bulk("Si", cubic=True))
    assert len(inputs.read_atoms("--structure", ok)) == 8
    empty = tmp_path / "empty.xyz"
    empty.write_text("0\n\n")
    with pytest.raises(InputError, match="zero atoms|cannot read|is empty"):
        inputs.read_atoms("--structure", empty)
    (tmp_path / "blank.cif").write_text("")
    with pytest.raises(InputError, match="is empty"):
        inputs.read_atoms("--structure", tmp_path / "blank.cif")
    with pytest.raises(InputError, match="no such file"):
        inputs.read_atoms("--structure", tmp_path / "missing.cif")
    cif = tmp_path / "alloy.cif"
    cif.write_text(PARTIAL_CIF)
    with pytest.raises(InputError, match="partial occupancies"):
        inputs.read_atoms("--structure", cif)


PARTIAL_CIF = """data_CuAu
_cell_length_a 3.8
_cell_length_b 3.8
_cell_length_c 3.8
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
_symmetry_space_group_name_H-M 'P 1'
loop_
_atom_site_label
_atom_site_type_symbol
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
_atom_site_occupancy
Cu1 Cu 0 0 0 0.5
Au1 Au 0 0 0 0.5
Cu2 Cu 0.5 0.5 0 1.0
"""


def test_progress_plain_lines_carry_elapsed_and_estimate():
    """Off a terminal: one line per step with the elapsed time, an estimate once a step has finished."""
    out = io.StringIO()
    p = StepProgress(["a", "b", "c"], {"a": 1.0, "b": 1.0, "c": 2.0}, label="certify", stream=out)
    p("a", 0, 3, 0.0)
    p("b", 1, 3, 0.1)
    p("c", 2, 3, 0.1)
    p("done", 3, 3, 0.1)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/3] certify a · elapsed") and "left" not in lines[0]
    assert "left" in lines[1] and lines[2].startswith("[3/3] certify c")
    assert lines[-1].startswith("done · 3/3")
    assert p.remaining_s() is None or math.isfinite(p.remaining_s())
    resumed = StepProgress(["a", "b"], stream=io.StringIO(), done=["a"])
    assert resumed.finished == {"a"}


def test_progress_on_a_terminal_uses_rich():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    p = StepProgress(["a", "b"], label="certify", stream=out)
    assert p._rich is not None
    p("a", 0, 2, 0.0)
    p("b", 1, 2, 0.0)
    p("done", 2, 2, 0.0)
    assert "certify" in out.getvalue() and p._rich is None


def test_format_seconds():
    assert format_seconds(4.2) == "4 s" and format_seconds(185) == "3 min 05 s"
    assert format_seconds(3720) == "1 h 02 min"


def test_progress_estimate_counts_down_within_a_step_and_shows_the_phase(monkeypatch):
    """The estimate comes from what remains: it falls while a step runs (never frozen), stays known once
    known, and the plain display names the compiling phase (jaxcert/progress.py)."""
    import jaxcert.progress as progress_module

    clock = [100.0]
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: clock[0])
    out = io.StringIO()
    p = StepProgress(["a", "b", "c"], {"a": 1.0, "b": 1.0, "c": 2.0}, label="certify", stream=out)
    p("a", 0, 3, 0.0)
    clock[0] += 10.0  # step a took 10 s for weight 1: 10 s per unit
    p("b", 1, 3, 10.0)
    assert p.remaining_s() == 30.0  # b (1 unit) + c (2 units)
    clock[0] += 4.0
    assert p.remaining_s() == 26.0  # counting down inside b
    clock[0] += 20.0  # b overruns its share: the estimate stays at c's share, it does not go negative
    assert p.remaining_s() == 20.0
    p("c", 2, 3, 24.0)
    p.phase("compiling")
    assert "compiling c" in out.getvalue().splitlines()[-1]
    assert p.remaining_s() is not None and p.remaining_s() > 0


def test_output_dir_can_check_without_creating(tmp_path):
    new = tmp_path / "new"
    assert inputs.output_dir("--out", str(new), create=False) == str(new) and not new.exists()
    with pytest.raises(InputError, match="^--out: no such directory"):
        inputs.output_dir("--out", str(tmp_path / "a" / "b"), create=False)
    assert inputs.output_dir("--out", str(new)) == str(new) and new.is_dir()
