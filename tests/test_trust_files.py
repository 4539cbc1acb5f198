"""Output files under a hostile folder (jaxcert/core/files.py; docs/cli.md, "Output files").

Every test plants something in or around an output path (a link at a predictable temporary name, a link in place
of a report, somebody else's files in ``--out``, a model name that cannot be a file) and checks, with a sentinel
file outside the output folder whose hash must not change, that nothing is written through a link, no foreign
file is overwritten without ``--force``, and a bad name is refused before any probe runs.  The CLI runs
in-process (``jaxcert.cli.main``) on the cheapest settings: lj on one element and one probe for certify and
board, the planted-dimer committee on Sb for investigate (tests/detective/test_cli.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat

import pytest

from jaxcert.cli import main
from jaxcert.core import files
from jaxcert.core.inputs import InputError

BOARD = ["--elements", "Si", "--probes", "conservativeness", "--no-throughput", "--quiet"]
EX = "jaxcert.detective.examples"
INVESTIGATE = ["investigate", "--target", f"{EX}:lj_planted_dimers", "--committee", f"lj,{EX}:lj_soft",
               "--protocols", "dimers", "--elements", "Sb", "--oracle-seconds", "0", "--quiet"]
CERTIFY = ["certify", "--model", "lj", "--elements", "Si", "--probes", "parity", "--quiet"]


def _sentinel(tmp_path, text="somebody else's file\nits last line has no newline"):
    """A file outside every output folder; returns (path, hash)."""
    folder = tmp_path / "outside"
    folder.mkdir(exist_ok=True)
    path = folder / f"sentinel-{len(os.listdir(folder))}.txt"
    path.write_text(text)
    return path, _hash(path)


def _hash(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _err(capsys):
    err = capsys.readouterr().err
    return err


# ------------------------------------------------------------------------------------------------ the module
def test_atomic_write_refuses_a_link_or_a_non_file_and_leaves_no_temporary(tmp_path):
    sentinel, h = _sentinel(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.json").symlink_to(sentinel)
    with pytest.raises(files.OutputFileError, match="r.json.*symbolic link"):
        files.atomic_write(out / "r.json", "{}")
    (out / "d").mkdir()
    with pytest.raises(files.OutputFileError, match="not a regular file"):
        files.atomic_write(out / "d", b"x")
    assert _hash(sentinel) == h and os.path.islink(out / "r.json")
    files.atomic_write(out / "ok.txt", "é")
    assert (out / "ok.txt").read_text(encoding="utf-8") == "é"
    assert sorted(os.listdir(out)) == ["d", "ok.txt", "r.json"]  # the temporary was renamed, none left


def test_write_json_refuses_a_linked_checkpoint(tmp_path):
    """The certify --json checkpoint and every report go through checkpoint.write_json: a link is refused."""
    from jaxcert.checkpoint import write_json

    sentinel, h = _sentinel(tmp_path)
    (tmp_path / "r.json").symlink_to(sentinel)
    with pytest.raises(InputError, match="symbolic link"):
        write_json({"a": 1}, tmp_path / "r.json")
    assert _hash(sentinel) == h and os.path.islink(tmp_path / "r.json")


def test_append_line_refuses_a_link_and_a_cut_last_line(tmp_path):
    sentinel, h = _sentinel(tmp_path)
    link = tmp_path / "evidence.jsonl"
    link.symlink_to(sentinel)
    with pytest.raises(files.OutputFileError, match="symbolic link"):
        files.append_line(link, '{"type": "run"}')
    with pytest.raises(files.OutputFileError, match="symbolic link"):
        files.append_line(link, '{"type": "run"}', drop_unfinished=True)
    assert _hash(sentinel) == h
    mine = tmp_path / "mine.jsonl"
    mine.write_bytes(b'{"a": 1}\n{"b": ')
    with pytest.raises(files.OutputFileError, match="does not end with a newline"):
        files.append_line(mine, '{"c": 3}')
    assert mine.read_bytes() == b'{"a": 1}\n{"b": '  # nothing repaired
    files.append_line(mine, '{"c": 3}', drop_unfinished=True)  # the evidence memory's own rule: cut the fragment
    assert mine.read_bytes() == b'{"a": 1}\n{"c": 3}\n'


def test_evidence_memory_never_appends_through_a_link(tmp_path):
    from jaxcert.detective._memory import EvidenceMemory

    # somebody else's memory: valid records, the last one not yet terminated (their run is still writing it)
    sentinel, h = _sentinel(tmp_path, '{"type": "run", "t": 0}\n{"type": "stop", "t": 1}')
    (tmp_path / "evidence.jsonl").symlink_to(sentinel)
    memory = EvidenceMemory(tmp_path / "evidence.jsonl")
    with pytest.raises(InputError, match="symbolic link"):
        memory.append("run", target="x")
    assert _hash(sentinel) == h  # neither appended to nor cut


def test_ensure_output_folder_one_level_links_and_the_marker(tmp_path):
    with pytest.raises(InputError, match="--out: no such directory .*only the last folder"):
        files.ensure_output_folder(tmp_path / "a" / "b" / "c", "--out", [], kind="board")
    assert not (tmp_path / "a").exists()
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(InputError, match="--out: .*symbolic link"):
        files.ensure_output_folder(tmp_path / "link", "--out", [], kind="board")
    out = files.ensure_output_folder(tmp_path / "new", "--out", ["board.json"], kind="board")
    assert (tmp_path / "new" / files.MARKER).read_text() == "jaxcert-output\ncommand: board\n"
    (tmp_path / "new" / "board.json").write_text("{}")
    assert files.ensure_output_folder(out, "--out", ["board.json"], kind="board") == out  # ours: no force needed
    with pytest.raises(InputError, match="'board.json' that jaxcert investigate did not write"):
        files.ensure_output_folder(out, "--out", ["board.json"], kind="investigate")


@pytest.mark.parametrize("name, said", [
    ("board", "beside the board's own files"), ("Index", "beside the board's own files"),
    ("a" * 300, "300 bytes long"), ("é" * 101, "202 bytes long"), ("a/b", "path separator"), ("..", "cannot be"),
    (".hidden", "starts with '.'"), ("a\x00b", "NUL"), ("", "cannot be"),
])
def test_safe_file_stem_refuses_names_that_cannot_be_a_report_file(name, said):
    with pytest.raises(InputError, match="^--models: model name") as err:
        files.safe_file_stem(name, "--models")
    assert said in str(err.value)
    assert files.safe_file_stem("lj+curl=1.0", "--models") == "lj+curl=1.0"
    assert files.safe_file_stem("é" * 100, "--models") == "é" * 100  # 200 bytes: the limit


# ------------------------------------------------------------------------------------------------ certify
def test_certify_json_and_html_links_are_refused_before_any_work(tmp_path, capsys):
    sentinel, h = _sentinel(tmp_path)
    for flag in ("--json", "--html"):
        link = tmp_path / f"r{flag[2:]}.link"
        link.symlink_to(sentinel)
        assert main([*CERTIFY, flag, str(link)]) == 2
        err = _err(capsys)
        assert err.startswith(f"jaxcert: error: {flag}: ") and "symbolic link" in err
        assert os.path.islink(link) and _hash(sentinel) == h
    # compare's outputs take the same check
    assert main([*CERTIFY, "--json", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    for flag in ("--json", "--html"):
        assert main(["compare", str(tmp_path / "r.json"), flag, str(tmp_path / f"r{flag[2:]}.link")]) == 2
        assert "symbolic link" in _err(capsys)
    assert _hash(sentinel) == h


# ------------------------------------------------------------------------------------------------ board
def test_board_planted_index_temporary_link_is_not_followed(tmp_path, capsys):
    """The old writer used ``.index.html.tmp<pid>``: a link planted there received the page."""
    sentinel, h = _sentinel(tmp_path)
    out = tmp_path / "b"
    out.mkdir()
    (out / f".index.html.tmp{os.getpid()}").symlink_to(sentinel)
    (out / "index.html.tmp").symlink_to(sentinel)
    assert main(["board", "--models", "lj", *BOARD, "--out", str(out)]) == 0
    assert _hash(sentinel) == h
    assert stat.S_ISREG(os.lstat(out / "index.html").st_mode) and "<html" in (out / "index.html").read_text()
    assert os.path.islink(out / f".index.html.tmp{os.getpid()}")  # left alone, not used


def test_board_refuses_a_linked_board_json_and_reruns_without_force(tmp_path, capsys):
    sentinel, h = _sentinel(tmp_path)
    out = tmp_path / "b"
    argv = ["board", "--models", "lj", *BOARD, "--out", str(out)]
    assert main(argv) == 0
    assert (out / files.MARKER).is_file()
    assert main(argv) == 0  # a folder jaxcert board wrote: no --force needed
    capsys.readouterr()
    for name in ("board.json", "index.html", "lj.json"):
        keep = out / f"{name}.saved"
        os.replace(out / name, keep)
        (out / name).symlink_to(sentinel)
        assert main(argv) == 2
        err = _err(capsys)
        assert "--out:" in err and f"{name}'" in err and "symbolic link" in err
        assert main([*argv, "--force"]) == 2  # --force never writes through a link
        assert os.path.islink(out / name) and _hash(sentinel) == h
        os.unlink(out / name)
        os.replace(keep, out / name)


def test_board_refuses_somebody_elses_files_unless_force(tmp_path, capsys):
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("<p>my home page</p>")
    (out / "board.json").write_text('{"mine": true}')
    argv = ["board", "--models", "lj", *BOARD, "--out", str(out)]
    assert main(argv) == 2
    err = _err(capsys)
    assert err.startswith("jaxcert: error: --out: ") and "'board.json'" in err and "--force" in err
    assert (out / "index.html").read_text() == "<p>my home page</p>" and not (out / "lj.json").exists()
    assert main([*argv, "--force"]) == 0
    assert json.loads((out / "board.json").read_text())["rows"][0]["file"] == "lj.json"
    assert main(argv) == 0  # now marked as a board folder


def test_board_out_creates_one_level_only(tmp_path, capsys):
    assert main(["board", "--models", "lj", *BOARD, "--out", str(tmp_path / "a" / "b" / "c")]) == 2
    assert "--out: no such directory" in _err(capsys)
    assert not (tmp_path / "a").exists()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    assert main(["board", "--models", "lj", *BOARD, "--out", str(tmp_path / "linked")]) == 2
    assert "symbolic link" in _err(capsys) and os.listdir(tmp_path / "elsewhere") == []


@pytest.mark.parametrize("name", ["board", "index", "a" * 300])
def test_board_model_name_that_cannot_be_its_file_is_refused_before_any_probe(tmp_path, capsys, name):
    toml = tmp_path / "m.toml"
    toml.write_text(f'[[models]]\nspec = "lj"\nname = "{name}"\n')
    out = tmp_path / "b"
    assert main(["board", "--models", str(toml), *BOARD, "--out", str(out)]) == 2
    err = _err(capsys)
    assert err.startswith(f"jaxcert: error: --models: {toml}: models[0].name: model name") and "TOML" in err
    assert not out.exists()  # nothing ran, nothing written


def test_board_spec_whose_default_name_is_too_long_is_refused(tmp_path, capsys):
    out = tmp_path / "b"
    assert main(["board", "--models", "tests._buggy_models:" + "x" * 300, *BOARD, "--out", str(out)]) == 2
    err = _err(capsys)
    assert err.startswith("jaxcert: error: --models: model name") and "bytes long" in err
    assert not out.exists()


# ------------------------------------------------------------------------------------------------ investigate
@pytest.fixture(scope="module")
def investigated(tmp_path_factory):
    """One finished investigation (the planted-dimer committee on Sb); tests work on copies of it."""
    out = tmp_path_factory.mktemp("inv") / "inv"
    assert main([*INVESTIGATE, "--out", str(out)]) == 0
    return out


def _copy(investigated, tmp_path):
    out = tmp_path / "inv"
    shutil.copytree(investigated, out, symlinks=True)
    return out


def test_investigate_planted_report_temporary_link_is_not_followed(investigated, tmp_path, capsys):
    """The old writer used ``report.md.tmp`` (and ``escalation.json.tmp``): a link planted there got the report."""
    sentinel, h = _sentinel(tmp_path)
    out = _copy(investigated, tmp_path)
    for name in ("report.md.tmp", "report.html.tmp", "escalation.json.tmp"):
        (out / name).symlink_to(sentinel)
    assert main([*INVESTIGATE, "--out", str(out), "--resume"]) == 0
    assert _hash(sentinel) == h
    assert all(stat.S_ISREG(os.lstat(out / n).st_mode) for n in ("report.md", "report.html", "escalation.json"))


@pytest.mark.parametrize("name", ["report.md", "escalation.json"])
def test_investigate_refuses_a_linked_report_file(investigated, tmp_path, capsys, name):
    sentinel, h = _sentinel(tmp_path)
    out = _copy(investigated, tmp_path)
    os.unlink(out / name)
    (out / name).symlink_to(sentinel)
    assert main([*INVESTIGATE, "--out", str(out), "--resume"]) == 2
    err = _err(capsys)
    assert "--out:" in err and repr(name) in err and "symbolic link" in err
    assert os.path.islink(out / name) and _hash(sentinel) == h


def test_investigate_resume_refuses_a_linked_evidence_memory(investigated, tmp_path, capsys):
    """--resume used to read, cut the last line of, and append to whatever evidence.jsonl pointed at: here
    another investigation's memory, its last record not yet terminated."""
    theirs = (investigated / "evidence.jsonl").read_text().rstrip("\n")
    sentinel, h = _sentinel(tmp_path, theirs)
    out = _copy(investigated, tmp_path)
    os.unlink(out / "evidence.jsonl")
    (out / "evidence.jsonl").symlink_to(sentinel)
    assert main([*INVESTIGATE, "--out", str(out), "--resume"]) == 2
    err = _err(capsys)
    assert "--out:" in err and "'evidence.jsonl'" in err and "symbolic link" in err
    assert _hash(sentinel) == h


def test_investigate_refuses_somebody_elses_report_unless_force(investigated, tmp_path, capsys):
    out = _copy(investigated, tmp_path)
    (out / files.MARKER).unlink(missing_ok=True)  # a folder jaxcert investigate did not mark
    (out / "report.md").write_text("# my notes\n")
    assert main([*INVESTIGATE, "--out", str(out), "--resume"]) == 2
    err = _err(capsys)
    assert err.startswith("jaxcert: error: --out: ") and "'report.md'" in err and "--force" in err
    assert (out / "report.md").read_text() == "# my notes\n"
    assert main([*INVESTIGATE, "--out", str(out), "--resume", "--force"]) == 0
    assert (out / "report.md").read_text().startswith("# ") and "my notes" not in (out / "report.md").read_text()
    assert "command: investigate" in (out / files.MARKER).read_text()
    assert main([*INVESTIGATE, "--out", str(out), "--resume"]) == 0  # marked now: no --force needed


# ------------------------------------------------------------------------------------------------ sweep store
def test_sweep_store_refuses_a_linked_database(tmp_path):
    from jaxcert.attacks.sweep import Store

    target = tmp_path / "outside" / "theirs.db"
    target.parent.mkdir()
    (tmp_path / "s.db").symlink_to(target)  # dangling: sqlite would create the file it points at
    with pytest.raises(InputError, match="--db: .*symbolic link"):
        Store(str(tmp_path / "s.db"), name="--db")
    assert not target.exists()
