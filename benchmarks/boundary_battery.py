"""The hostile-input battery of the command line (docs/cli.md, "Exit codes"; issue 23).

Each case runs ``python -m jaxcert.cli ...`` in a fresh process, in a scratch folder, with its own cache
folder, exactly as a careless user or a careful attacker would, and is classified by what came back:

* **clean error**: the expected exit code (2) and one stderr line ``jaxcert: error: ARG ...`` naming the
  argument the case is about;
* **ran**: a case that must work (exit 0/1) did;
* **wrong exit code**: anything else, in particular 1 (the gate-failure code) or 0 for a refused input;
* **traceback**: ``Traceback`` in the output;
* **data lost**: an output problem reported only after the work (the command ran longer than
  ``--fast-s`` seconds before refusing);
* **security finding**: a planted payload executed, or a foreign file changed.

A refusal whose line is longer than 1,000 characters (a value echoed whole) is an **unclear error**; a case
that does not end within its timeout, or an interrupted run that takes more than 10 s to exit, is a **wrong
exit code**.  Interrupt cases send SIGINT once a file appears and expect 130 and the line naming what was kept.

Usage: ``python benchmarks/boundary_battery.py [--json benchmarks/results/boundary_battery.json]``.  It prints
one line per case and the counts; the exit code is 0 when every count but "cases" and "clean/ran" is zero.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = "PLANTED_PAYLOAD_RAN"


@dataclass
class Case:
    """One hostile input: argv after ``jaxcert``, the exit codes that count as right, the word the one-line
    error must contain, and an optional setup (files planted in the scratch folder) and check."""

    name: str
    argv: list[str]
    expect: tuple[int, ...] = (2,)
    names: str = ""
    setup: Any = None
    check: Any = None
    env: dict[str, str] = field(default_factory=dict)
    fast: bool = True  # a refusal must come before any work
    timeout: float = 900.0  # seconds; a case still running then (a FIFO read forever) is a wrong exit code
    limit_gib: float | None = None  # address-space limit of the process (ulimit -v), for cases that may allocate
    interrupt_when: str | None = None  # send SIGINT once this file exists in the scratch folder (Ctrl-C)
    lost: Any = None  # lost(d, stderr) -> text when what the command said it kept is not on disk (data lost)


class _Payload:
    """A pickle that, when loaded, creates the marker file: what an attacker plants in a cache."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign_db(d: Path, with_runs: bool) -> Path:
    p = d / ("other_app.sqlite" if with_runs else "empty_app.sqlite")
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, owner TEXT)" if with_runs else
                "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("INSERT INTO " + ("runs (owner)" if with_runs else "notes (body)") + " VALUES ('theirs')")
    con.commit()
    con.close()
    return p


def _unchanged(path_of):
    def setup(d: Path) -> dict[str, Any]:
        p = path_of(d)
        return {"file": p, "sha": _sha(p)}

    def check(d: Path, state: dict[str, Any]) -> str | None:
        return None if _sha(state["file"]) == state["sha"] else f"{state['file'].name} was changed"
    return setup, check


def _report(d: Path, mutate) -> Path:
    """A real certify report (LJ, Ar, parity), then ``mutate(doc)`` applied and written back."""
    src = d / "good.json"
    if not src.exists():
        subprocess.run([sys.executable, "-m", "jaxcert.cli", "certify", "--model", "lj", "--elements", "Ar",
                        "--probes", "parity", "--quiet", "--json", str(src)], cwd=d, env=_env(d), check=True,
                       capture_output=True)
    doc = json.loads(src.read_text())
    out = d / "bad.json"
    text = mutate(doc)
    out.write_text(text if isinstance(text, str) else json.dumps(doc, allow_nan=True))
    return out


def _set(path: list[Any], value: Any):
    def mutate(doc):
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return mutate


def _plant_cache(d: Path) -> dict[str, Any]:
    """Plant the payload under every file name the cache holds after a warm run (host values and
    executables), so a second, ordinary run would unpickle it if it unpickled anything."""
    cache = d / "cache"
    subprocess.run([sys.executable, "-m", "jaxcert.cli", "certify", "--model", "lj", "--elements", "Ar",
                    "--probes", "parity", "--quiet"], cwd=d, env=_env(d), capture_output=True)
    marker = d / MARKER
    blob = pickle.dumps(_Payload(str(marker)))
    planted = 0
    for sub in ("host", "exec"):
        for f in (cache / sub).rglob("*") if (cache / sub).exists() else []:
            if f.is_file():
                f.write_bytes(blob)
                planted += 1
    return {"marker": marker, "planted": planted}


def _marker_absent(d: Path, state: dict[str, Any]) -> str | None:
    if state["marker"].exists():
        return "the planted pickle executed"
    return None


def _foreign_owned(d: Path) -> dict[str, Any]:
    c = d / "cache"
    c.mkdir(exist_ok=True)
    os.chmod(c, 0o777)
    return {}


def _env(d: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXCERT_")}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT), JAXCERT_CACHE_DIR=str(d / "cache"), COLUMNS="120")
    env.update(extra or {})
    return env


EXIT_IN_MD = """
import sys
import jaxcert
base = jaxcert.models.get("lj")
def energy(params, s):
    if s.positions.shape[-2] > 60:  # only the ~100-atom cell of the throughput NVE run
        sys.exit(0)
    return base.energy_fn(params, s)
model = base.replace(energy_fn=energy, name="exit-in-md")
"""
HUGE_CUTOFF = """
import jax.numpy as jnp
import jaxcert
CUT = 1e4
def energy(params, s):
    p = jaxcert.neighbors.pairs(s, cutoff=CUT)
    inside = p.mask & (p.r < CUT)
    return 0.5 * jnp.sum(jnp.where(inside, params["eps"] * ((2.3 / p.r) ** 12 - 2 * (2.3 / p.r) ** 6), 0.0))
model = jaxcert.Model(energy, params={"eps": 0.1}, name="huge-cutoff", cutoff=CUT)
"""
INVESTIGATE = ["investigate", "--target", "jaxcert.detective.examples:lj_planted_dimers", "--committee",
               "lj,jaxcert.detective.examples:lj_soft", "--protocols", "dimers", "--elements", "Sb", "--out", "inv",
               "--oracle-seconds", "0", "--quiet"]


def _module(name: str, source: str):
    return lambda d: (d / f"{name}.py").write_text(source) and {}


def _damaged_memory(d: Path) -> Path:
    """A finished search's folder (a real run), then its evidence memory's second line (the screen) damaged."""
    subprocess.run([sys.executable, "-m", "jaxcert.cli", *INVESTIGATE], cwd=d, env=_env(d), check=True,
                   capture_output=True)
    p = d / "inv" / "evidence.jsonl"
    lines = p.read_text().split("\n")
    lines[1] = "[1, 2]"
    p.write_text("\n".join(lines))
    return p


def _fifo(d: Path) -> dict[str, Any]:
    os.mkfifo(d / "m.toml")
    return {}


def _nothing_ran(d: Path, stderr: str) -> str | None:
    return "a model was certified before the refusal" if (d / "b").exists() else None


def _board_row(d: Path, stderr: str) -> str | None:
    try:
        board = json.loads((d / "b" / "board.json").read_text())
    except (OSError, ValueError):
        return "no board.json although the model's report is complete"
    return None if board["rows"] and not board["failed"] else "the model is not on the board"


def _kept_as_said(d: Path, stderr: str) -> str | None:
    """The interrupted run's line says how many probes r.json keeps: the file must hold exactly those."""
    import re

    m = re.search(r"interrupted: (\d+) of \d+ probes kept in r\.json", stderr)
    if m is None:
        return None if not (d / "r.json").exists() else "r.json exists but the line does not say what it keeps"
    try:
        n = len(json.loads((d / "r.json").read_text())["probes"])
    except (OSError, ValueError, KeyError):
        return "the line claims kept probes but r.json cannot be read"
    return None if n == int(m.group(1)) else f"the line says {m.group(1)} probes kept, r.json holds {n}"


def cases() -> list[Case]:
    """Every case of issue 23, the numeric and element cases that already held, and the exit-code and resource
    cases of "Trust, second round" (tests/test_trust_exits.py)."""
    cert = ["certify", "--model", "lj", "--elements", "Ar", "--quiet"]
    atk = ["attack", "--model", "lj", "--structure", "Ar", "--min-length", "0"]
    sweep = ["sweep", "--model", "lj", "--structures", "Ar", "--attack", "fgsm", "--eps", "0.05"]
    foreign = _unchanged(lambda d: _foreign_db(d, True))
    empty = _unchanged(lambda d: _foreign_db(d, False))
    text = _unchanged(lambda d: (d / "notes.txt").write_text("not a database\n") and d / "notes.txt")
    memory = _unchanged(_damaged_memory)
    ar_board = ["--elements", "Ar", "--probes", "parity"]
    out = [
        # exit codes
        Case("probes-comma", [*cert, "--probes", ","], names="--probes"),
        Case("probes-empty", [*cert, "--probes", ""], names="--probes"),
        Case("model-sys-exit", [*cert[:1], "--model", "bad_exit:model", *cert[3:]], names="--model",
             setup=lambda d: (d / "bad_exit.py").write_text("import sys\nsys.exit(0)\n") and {}),
        Case("model-attr-string", [*cert[:1], "--model", "strmod:model", *cert[3:]], names="--model",
             setup=lambda d: (d / "strmod.py").write_text("model = 'lj'\n") and {}),
        Case("model-factory-raises", [*cert[:1], "--model", "facmod:model", *cert[3:]], names="--model",
             setup=lambda d: (d / "facmod.py").write_text("def model():\n    raise RuntimeError('x')\n") and {}),
        Case("model-factory-needs-arg", [*cert[:1], "--model", "argmod:model", *cert[3:]], names="--model",
             setup=lambda d: (d / "argmod.py").write_text("def model(p):\n    return p\n") and {}),
        Case("model-colon", [*cert[:1], "--model", ":", *cert[3:]], names="--model"),
        Case("model-in-cwd", [*cert[:1], "--model", "mine:model", *cert[3:], "--probes", "parity"], expect=(0,),
             setup=lambda d: (d / "mine.py").write_text("import jaxcert\nmodel = jaxcert.models.get('lj')\n")
             and {}, fast=False),
        Case("unknown-flag", [*cert, "--nope"], names="usage"),
        # work lost after computing
        Case("lambda-json-nodir", ["lambda", "--model", "lj", "--json", "nodir/l.json"], names="--json"),
        Case("attack-json-nodir", [*atk, "--json", "nodir/a.json"], names="--json"),
        Case("certify-json-dir", [*cert, "--json", "."], names="--json"),
        Case("certify-json-readonly", [*cert, "--json", "/sys/r.json"], names="--json"),
        Case("json-equals-html", [*cert, "--json", "r.json", "--html", "r.json"], names="--html"),
        Case("attack-molecule", ["attack", "--model", "lj", "--structure", "h2o.xyz", "--attack", "fgsm",
                                 "--random-start", "--max-steps", "50"], expect=(0,), fast=False,
             setup=lambda d: (d / "h2o.xyz").write_text("3\n\nO 0 0 0\nH 0.96 0 0\nH -0.24 0.93 0\n") and {}),
        # foreign files
        Case("sweep-foreign-runs-table", [*sweep, "--db", "other_app.sqlite"], names="--db",
             setup=foreign[0], check=foreign[1]),
        Case("sweep-foreign-no-runs", [*sweep, "--db", "empty_app.sqlite"], names="--db",
             setup=empty[0], check=empty[1]),
        Case("sweep-db-text-file", [*sweep, "--db", "notes.txt"], names="--db", setup=text[0], check=text[1]),
        # bounds
        Case("min-length-1e308", [*atk[:-2], "--min-length", "1e308"], names="--min-length"),
        Case("min-length-1e4", [*atk[:-2], "--min-length", "1e4"], names="--min-length"),
        Case("max-steps-huge", [*atk, "--max-steps", "99999999999999999999"], names="--max-steps"),
        Case("rattle-1e308", [*atk, "--rattle", "1e308"], names="--rattle"),
        Case("eps-nan", [*atk, "--eps", "nan"], names="--eps"),
        Case("eps-negative", [*atk, "--eps", "-0.1"], names="--eps"),
        Case("seed-huge", [*cert, "--seed", "1e30"], names="--seed"),
        Case("elements-bogus", [*cert[:3], "--elements", "Xx"], names="--elements"),
        Case("elements-case", [*cert[:3], "--elements", "si"], names="--elements"),
        Case("dtype-float16", [*cert, "--dtype", "float16"], names="--dtype"),
        Case("defect-nan", [*cert, "--defect", "curl=nan"], names="--defect"),
        Case("max-batch-zero", [*cert, "--max-batch", "0"], names="--max-batch"),
        # tampered reports
        Case("compare-n-evals-text", ["compare", "bad.json"], names="n_evals",
             setup=lambda d: (_report(d, _set(["probes", 0, "per_element", "Ar", "n_evals"], "abc")), {})[1]),
        Case("compare-overall-empty", ["compare", "bad.json"], names="overall",
             setup=lambda d: (_report(d, _set(["aggregate", "overall"], {})), {})[1]),
        Case("compare-nan-score", ["compare", "bad.json"], names="score",
             setup=lambda d: (_report(d, _set(["probes", 0, "per_element", "Ar", "score"], float("nan"))), {})[1]),
        Case("compare-deep-nesting", ["compare", "bad.json"], names="bad.json",
             setup=lambda d: (_report(d, lambda doc: "[" * 200_000 + "]" * 200_000), {})[1]),
        Case("compare-missing-element", ["compare", "bad.json"], names="Ar",
             setup=lambda d: (_report(d, lambda doc: doc["probes"][0]["per_element"].pop("Ar")), {})[1]),
        Case("resume-probes-null", [*cert, "--probes", "parity", "--json", "bad.json", "--resume"], names="probes",
             setup=lambda d: (_report(d, _set(["probes"], None)), {})[1]),
        Case("compare-width-0", ["compare", "good.json", "--width", "0"], names="--width",
             setup=lambda d: (_report(d, _set(["seed"], 0)), {})[1]),
        # messages that named nothing
        Case("substrates-unknown-element", ["substrates", "--element", "Xx", "--out", "s"], names="--element"),
        Case("substrates-deep-out", ["substrates", "--element", "Si", "--out", "a/b/c"], names="--out",
             check=lambda d, s: "created a/b" if (d / "a").exists() else None),
        # the cache
        Case("cache-planted-pickle", [*cert, "--probes", "parity"], expect=(0,), setup=_plant_cache,
             check=_marker_absent, fast=False),
        Case("cache-world-writable", [*cert, "--probes", "parity"], expect=(0,), setup=_foreign_owned,
             fast=False),
        Case("cache-dir-is-a-file", ["models"], expect=(0,),
             setup=lambda d: (d / "cachefile").write_text("x") and {},
             env={"JAXCERT_CACHE_DIR": "{d}/cachefile"}),
        Case("cache-dir-unwritable", ["models"], expect=(0,), env={"JAXCERT_CACHE_DIR": "/sys/jaxcert-cache"}),
        # exit codes and bounded resources (issue "Trust, second round"; tests/test_trust_exits.py)
        Case("board-sys-exit-in-md", ["board", "--models", "exit_in_md:model", *ar_board, "--out", "b", "--quiet"],
             expect=(0,), setup=_module("exit_in_md", EXIT_IN_MD), lost=_board_row, fast=False),
        Case("certify-throughput-sys-exit", [*cert[:1], "--model", "exit_in_md:model", *cert[3:], "--probes",
                                             "parity", "--throughput"], expect=(0,),
             setup=_module("exit_in_md", EXIT_IN_MD), fast=False),
        Case("board-workers-10000", ["board", "--models", "lj", *ar_board, "--out", "b", "--workers", "10000"],
             names="--workers", lost=_nothing_ran),
        Case("board-scheduler-malformed", ["board", "--models", "lj", *ar_board, "--out", "b", "--scheduler",
                                           "tcp://[::1"], names="--scheduler", lost=_nothing_ran),
        Case("board-scheduler-unreachable", ["board", "--models", "lj", *ar_board, "--out", "b", "--scheduler",
                                             "tcp://127.0.0.1:1"], names="--scheduler"),
        Case("compare-card-species", ["compare", "bad.json"], names="card.species",
             setup=lambda d: (_report(d, _set(["card", "species"], ["Ar", 1])), {})[1]),
        Case("investigate-resume-damaged-line", [*INVESTIGATE, "--resume"], names="evidence.jsonl: line 2",
             setup=memory[0], check=memory[1]),
        Case("board-toml-bad-defect", ["board", "--models", "m.toml", *ar_board, "--out", "b", "--no-throughput"],
             names="defects[0]", lost=_nothing_ran,
             setup=lambda d: (d / "m.toml").write_text('[[models]]\nspec = "lj"\n\n[[models]]\nspec = "lj"\n'
                                                       'name = "lj-2"\ndefects = ["curly=1"]\n') and {}),
        Case("board-models-empty-item", ["board", "--models", "lj,,emt", "--elements", "Cu", "--out", "b"],
             names="--models", lost=_nothing_ran),
        Case("board-models-fifo", ["board", "--models", "m.toml", "--elements", "Cu", "--out", "b"], names="--models",
             setup=_fifo, timeout=120),
        Case("elements-100k", [*cert[:3], "--elements", "X" * 100_000], names="--elements"),
        Case("huge-cutoff", [*cert[:1], "--model", "huge_cutoff:model", *cert[3:]], names="cutoff 10000",
             setup=_module("huge_cutoff", HUGE_CUTOFF), limit_gib=6, timeout=300),
        Case("certify-ctrl-c", [*cert[:5], "--probes", "parity,equivariance,conservativeness,smoothness,betti,trimer",
                                "--json", "r.json"], expect=(130,), names="probes kept in r.json",
             interrupt_when="r.json", lost=_kept_as_said, fast=False, timeout=300),
        # pages, terminal and files (issue "Trust, second round"; tests/test_trust_pages.py, test_trust_files.py)
        Case("compare-html-script-in-model-name", ["compare", "bad.json", "--html", "p.html"], expect=(0,),
             setup=_hostile_report(["model", "name"], "</script><script>document.title='PWNED'</script>"),
             check=_no_script, fast=False),
        Case("compare-terminal-escape-in-model-name", ["compare", "bad.json"], expect=(0,),
             setup=_hostile_report(["model", "name"], "lj\x1b]0;owned\x07\x1b[2J"), check=_no_escape, fast=False),
        Case("certify-json-is-a-link", [*cert, "--probes", "parity", "--json", "r.json"], names="--json",
             setup=_planted(("r.json", None))[0], check=_planted(("r.json", None))[1]),
        Case("board-index-is-a-link", ["board", "--models", "lj", *ar_board, "--out", "b", "--no-throughput"],
             names="index.html", setup=_planted(("b/index.html", None))[0],
             check=_planted(("b/index.html", None))[1]),
        Case("board-foreign-out", ["board", "--models", "lj", *ar_board, "--out", "b", "--no-throughput"],
             names="--out", setup=_planted(files=("b/index.html", "b/board.json"))[0],
             check=_planted(files=("b/index.html", "b/board.json"))[1],
             lost=lambda d, err: "a model report was written" if (d / "b" / "lj.json").exists() else None),
        Case("board-toml-name-board", ["board", "--models", "m.toml", *ar_board, "--out", "b", "--no-throughput"],
             names="board", lost=_nothing_ran,
             setup=lambda d: (d / "m.toml").write_text('[[models]]\nspec = "lj"\nname = "board"\n') and {}),
        Case("board-name-300-characters", ["board", "--models", "m.toml", *ar_board, "--out", "b",
                                           "--no-throughput"], names="name", lost=_nothing_ran,
             setup=lambda d: (d / "m.toml").write_text(f'[[models]]\nspec = "lj"\nname = "{"n" * 300}"\n')
             and {}),
        Case("investigate-evidence-is-a-link", [*INVESTIGATE, "--resume"], names="evidence.jsonl",
             setup=_planted(("inv/evidence.jsonl", None))[0], check=_planted(("inv/evidence.jsonl", None))[1]),
        Case("investigate-planted-report-tmp", INVESTIGATE, expect=(0, 1), fast=False,
             setup=_planted(("inv/report.md.tmp", None))[0], check=_planted(("inv/report.md.tmp", None))[1]),
        Case("investigate-readme-model", ["investigate", "--target", "mine:model", "--committee", "lj,sw",
                                          "--protocols", "dimers", "--elements", "Si", "--out", "inv",
                                          "--oracle-seconds", "0", "--quiet"], expect=(0, 1), fast=False,
             setup=_module("mine", MINE_README)),
        Case("probes-typo-did-you-mean", [*cert, "--probes", "conservativness"], names="conservativeness"),
        Case("model-dotted-hint", [*cert[:1], "--model", "mine.model", *cert[3:]], names="mine:model",
             setup=_module("mine", MINE_README)),
    ]
    return out


SENTINEL = "someone else's file\n"
MINE_README = """
import jax.numpy as jnp
import jaxcert

def energy(params, s):
    p = jaxcert.neighbors.pairs(s, cutoff=5.0)
    inside = p.mask & (p.r < 5.0)
    fc = 0.5 * (1 + jnp.cos(jnp.pi * p.r / 5.0))
    phi = params["eps"] * ((2.3 / p.r) ** 12 - 2 * (2.3 / p.r) ** 6) * fc
    return 0.5 * jnp.sum(jnp.where(inside, phi, 0.0))

model = jaxcert.Model(energy, params={"eps": 0.1}, name="mine", cutoff=5.0)
"""


def _sentinel(d: Path) -> Path:
    p = d / "sentinel.txt"
    p.write_text(SENTINEL)
    return p


def _planted(*links: tuple[str, str | None], files: tuple[str, ...] = ()):
    """Setup: a sentinel file outside the output; each (path, None) a symlink to it at ``path``; each name in
    ``files`` someone else's file; check: the sentinel and those files are unchanged (else a security finding)."""
    def setup(d: Path) -> dict[str, Any]:
        sent = _sentinel(d)
        for rel, _ in links:
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(sent, d / rel)
        for rel in files:
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(f"<p>{rel}: not jaxcert's</p>\n")
        return {"paths": [sent, *(d / f for f in files)], "shas": [_sha(sent), *(_sha(d / f) for f in files)]}

    def check(d: Path, state: dict[str, Any]) -> str | None:
        changed = [p.name for p, h in zip(state["paths"], state["shas"], strict=True) if _sha(p) != h]
        return f"written through a link or over a foreign file: {', '.join(changed)}" if changed else None
    return setup, check


def _hostile_report(field: list[Any], value: str):
    return lambda d: (_report(d, _set(field, value)), {})[1]


def _no_script(d: Path, state: dict[str, Any]) -> str | None:
    page = (d / "p.html").read_text() if (d / "p.html").exists() else ""
    return "the hostile name reached the page as markup" if "<script>document.title" in page else None


def _no_escape(d: Path, state: dict[str, Any]) -> str | None:
    return "a raw escape sequence reached the terminal" if "\x1b" in state.get("stdout", "") else None


def _run(c: Case, d: Path, env: dict[str, str]) -> tuple[int, str, str, float | None]:
    """(exit code, stdout, stderr, seconds from SIGINT to the exit or None) of the case's process; a process
    still running after ``c.timeout`` is killed and reported with exit code None."""
    cmd = [sys.executable, "-m", "jaxcert.cli", *c.argv]
    if c.limit_gib is not None:
        cmd = ["bash", "-c", f'ulimit -v {int(c.limit_gib * 2**20)} && exec "$0" "$@"', *cmd]
    p = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = None
    if c.interrupt_when is not None:
        end = time.time() + c.timeout
        while not (d / c.interrupt_when).exists() and p.poll() is None and time.time() < end:
            time.sleep(0.05)
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            stopped = time.perf_counter()
    try:
        out, err = p.communicate(timeout=c.timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out, err + f"\n(killed after {c.timeout:g} s)", None
    return p.returncode, out, err, None if stopped is None else time.perf_counter() - stopped


def run_case(c: Case, fast_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jaxcert-battery-") as tmp:
        d = Path(tmp)
        state = (c.setup(d) or {}) if c.setup else {}
        env = _env(d, {k: v.format(d=d) for k, v in c.env.items()})
        t0 = time.perf_counter()
        code, stdout, stderr, after_sigint = _run(c, d, env)
        wall = time.perf_counter() - t0
        state = {**state, "stdout": stdout}
        finding = c.check(d, state) if c.check else None
        lost = c.lost(d, stderr) if c.lost else None
    err = [ln for ln in stderr.splitlines() if ln.strip()]
    tb = "Traceback" in stderr or "Traceback" in stdout
    row = {"case": c.name, "argv": [a if len(a) <= 120 else f"{a[:60]}... ({len(a)} characters)" for a in c.argv],
           "exit": code, "expected": list(c.expect), "wall_s": round(wall, 2), "stderr": err[-1][:300] if err else ""}
    if after_sigint is not None:
        row["exit_after_sigint_s"] = round(after_sigint, 2)
    if "planted" in state:
        row["planted_files"] = state["planted"]
    if finding:
        row["class"] = "security finding"
        row["finding"] = finding
    elif tb:
        row["class"] = "traceback"
    elif code not in c.expect or (after_sigint is not None and after_sigint > 10):
        row["class"] = "wrong exit code"
    elif lost:
        row["class"] = "data lost"
        row["finding"] = lost
    elif c.expect in ((2,), (130,)):
        one = len([ln for ln in err if ln.startswith(("jaxcert: error:", "usage:", "jaxcert: interrupted"))]) >= 1
        named = c.names in stderr if c.names else True
        short = all(len(ln) <= 1000 for ln in err)  # a value echoed whole (100,000 characters) is not a clear line
        if not (one and named and short):
            row["class"] = "unclear error"
        elif c.fast and wall > fast_s:
            row["class"] = "data lost"
        else:
            row["class"] = "clean error"
    else:
        row["class"] = "ran"
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows and counts here")
    ap.add_argument("--fast-s", type=float, default=30.0, help="a refusal slower than this counts as data lost")
    ap.add_argument("--only", help="comma-separated case names")
    a = ap.parse_args(argv)
    todo = [c for c in cases() if not a.only or c.name in a.only.split(",")]
    rows = []
    for c in todo:
        row = run_case(c, a.fast_s)
        rows.append(row)
        print(f"{row['class']:<17} exit {row['exit']} ({row['wall_s']:5.1f} s) {c.name:<28} {row['stderr'][:110]}",
              flush=True)
    kinds = ("clean error", "ran", "wrong exit code", "unclear error", "traceback", "data lost", "security finding")
    counts = {"cases": len(rows), **{k: sum(r["class"] == k for r in rows) for k in kinds}}
    print(json.dumps(counts))
    if a.json:
        doc = {"counts": counts, "rows": rows,
               "machine": {"platform": platform.platform(), "processor": platform.processor(),
                           "cpus": os.cpu_count(), "python": sys.version.split()[0],
                           "load_avg": os.getloadavg()}}
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
    bad = sum(counts[k] for k in kinds[2:])
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
