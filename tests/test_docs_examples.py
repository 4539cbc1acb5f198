"""Every ``jaxcert ...`` line of a ```bash block in README.md and docs/*.md works after the README's install.

Each one parses with the real parser (:func:`jaxcert.cli.build_parser`).  These run as written, in a temporary
folder, in the order the doc gives them, each with the exit code its comment states (``# exit 1``) or 0:

* README.md: ``jaxcert certify --model lj --elements Li,Be,B,C,Na,Mg,Al,Si,P,S --json r.json --html r.html``;
* docs/compare.md: the three ``certify`` runs on Si,C (the second exits 1) and the ``compare`` of their reports;
* docs/cli.md: ``jaxcert controls --quick --models emt --panel emt --sections eos,rung0,hull`` (with pymatgen;
  without it, exit 2 with the install command the doc's comment names).

The others only parse: ``certify --model mine:model`` runs in tests/test_readme.py (three probes); the rest need
what a test machine lacks or time a test does not have (chgnet or another bridged model, a checkpoint path, a
dask scheduler, a ``models.toml``, a placeholder element list ``Li,...,S``, every controls section with the
default bridged models).  The README's bare block of "Other commands" is parsed by tests/test_readme.py.
"""

import re
import shlex
from pathlib import Path

import pytest

from jaxcert.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: the commands run as written (after the block's own variables are substituted), see the module docstring
RUN = (
    "jaxcert certify --model lj --elements Li,Be,B,C,Na,Mg,Al,Si,P,S --json r.json --html r.html",
    "jaxcert certify --model lj --elements Si,C --probes equivariance,betti,parity,stress_consistency --json lj.json",
    "jaxcert certify --model lj --defect curl=0.3 --elements Si,C --probes equivariance,betti,parity,"
    "stress_consistency --json curl.json",
    "jaxcert certify --model lj --dtype float32 --elements Si,C --probes equivariance,betti,parity,"
    "stress_consistency --json lj32.json",
    "jaxcert compare lj.json curl.json lj32.json --sort overall --html board.html --json board.json",
    "jaxcert controls --quick --models emt --panel emt --sections eos,rung0,hull",
)


def _bash_blocks() -> list[tuple[str, list[tuple[str, str]]]]:
    """``(block id, [(command, comment), ...])`` for every ```bash block with a ``jaxcert`` command: continuation
    lines joined, ``pip install ... && `` dropped, the block's ``NAME=value`` lines substituted for ``$NAME``."""
    out = []
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() != "```bash":
                i += 1
                continue
            start, env, cmds = i + 1, {}, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                line = lines[i]
                while line.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line[:-1] + " " + lines[i].strip()
                i += 1
                code, _, comment = line.partition(" #")
                code = code.strip()
                if "&&" in code:
                    code = code.split("&&")[-1].strip()
                m = re.fullmatch(r"([A-Za-z_]\w*)=(\S+)", code)
                if m:
                    env[m.group(1)] = m.group(2)
                elif code.startswith("jaxcert "):
                    code = re.sub(r"\$(\w+)", lambda g, env=env: env.get(g.group(1), g.group(0)), code)
                    cmds.append((" ".join(code.split()), comment.strip()))
            if cmds:
                out.append((f"{doc.relative_to(ROOT)}:{start}", cmds))
            i += 1
    return out


BLOCKS = _bash_blocks()
COMMANDS = [(where, cmd) for where, cmds in BLOCKS for cmd, _ in cmds]


def test_the_docs_have_commands_and_every_run_command_is_still_in_them():
    shown = {cmd for _, cmd in COMMANDS}
    assert len(COMMANDS) >= 10
    assert set(RUN) <= shown, sorted(set(RUN) - shown)


@pytest.mark.parametrize("where, line", COMMANDS, ids=[f"{w}:{c[:60]}" for w, c in COMMANDS])
def test_every_doc_command_parses(where, line):
    words = shlex.split(line)[1:]
    try:
        args = build_parser().parse_args(words)
    except SystemExit as err:  # argparse: exit 2 with its usage line on stderr
        pytest.fail(f"{where}: {line!r} does not parse (exit {err.code})")
    assert callable(getattr(args, "fn", None)), f"{where}: {line!r} names no subcommand"


def _expected(comment: str) -> int:
    m = re.search(r"\bexit (\d)\b", comment)
    return int(m.group(1)) if m else 0


@pytest.mark.parametrize("where, cmds", [(w, [c for c in cmds if c[0] in RUN]) for w, cmds in BLOCKS
                                         if any(c in RUN for c, _ in cmds)],
                         ids=[w for w, cmds in BLOCKS if any(c in RUN for c, _ in cmds)])
def test_the_fast_doc_commands_run_as_written(where, cmds, tmp_path, monkeypatch, capsys):
    from jaxcert.datasets._files import package_roots

    monkeypatch.chdir(tmp_path)
    for cmd, comment in cmds:
        words = shlex.split(cmd)[1:]
        if words[0] == "controls" and not package_roots("pymatgen"):  # the base install: the doc names the extra
            assert 'pip install -e ".[controls]"' in comment
            assert main(words) == 2
            assert 'pip install -e ".[controls]"' in capsys.readouterr().err
            continue
        rc = main(words)
        captured = capsys.readouterr()
        assert rc == _expected(comment), f"{where}: {cmd!r} exited {rc}\n{captured.err[-3000:]}"
        for flag in ("--json", "--html"):
            if flag in words:
                assert (tmp_path / words[words.index(flag) + 1]).is_file(), f"{where}: {cmd!r} wrote no {flag}"
