"""The README works as written: its model example certifies from the current folder as the console script
runs it (no current folder on ``sys.path``), and every command line it shows parses."""

import json
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from jaxcert.cli import build_parser

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _blocks(lang: str) -> list[str]:
    """The fenced blocks of the README whose info string is ``lang`` ("" for a bare fence)."""
    blocks, current, info = [], None, ""
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                if info == lang:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_the_readme_model_certifies_from_its_own_folder(tmp_path):
    """``mine.py`` and ``jaxcert certify --model mine:model`` as the README shows them, in a fresh process whose
    ``sys.path`` lacks the current folder (``python -I``: what the installed ``jaxcert`` script sees)."""
    source = _blocks("python")[0]
    assert "model = jaxcert.Model(" in source
    (tmp_path / "mine.py").write_text(source)
    shown = next(line for line in _blocks("bash")[1].splitlines() if "--model mine:model" in line)
    args = shlex.split(shown)[1:] + ["--probes", "conservativeness,representation,parity", "--json", "r.json",
                                     "--quiet"]
    code = f"import sys; from jaxcert.cli import main; sys.exit(main({args!r}))"
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["aggregate"]["gates_passed"] == report["aggregate"]["gates_total"] == 3  # the example is clean
    assert (tmp_path / "mine.html").exists()


def test_a_missing_module_says_where_it_looked(tmp_path):
    code = "import sys; from jaxcert.cli import main; sys.exit(main(['certify', '--model', 'nothere:model']))"
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 2
    assert "no module named 'nothere'" in out.stderr and str(tmp_path) in out.stderr


def _commands() -> list[str]:
    lines = []
    for block in _blocks("bash") + _blocks(""):
        for line in block.splitlines():
            line = line.split("#")[0].strip()
            if line.startswith("pip install") and "&&" in line:
                line = line.split("&&", 1)[1].strip()
            if line.startswith("jaxcert ") and "..." not in line:
                lines += [part.strip() for part in line.split("|")]
    return lines


@pytest.mark.parametrize("line", _commands())
def test_every_command_the_readme_shows_parses(line):
    words = shlex.split(re.sub(r"\[([^\]]*)\]", r"\1", line))[1:]  # optional flags shown in [...] included
    build_parser().parse_args(words)
