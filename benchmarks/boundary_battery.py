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


def cases() -> list[Case]:
    """Every case of issue 23 and the numeric and element cases that already held."""
    cert = ["certify", "--model", "lj", "--elements", "Ar", "--quiet"]
    atk = ["attack", "--model", "lj", "--structure", "Ar", "--min-length", "0"]
    sweep = ["sweep", "--model", "lj", "--structures", "Ar", "--attack", "fgsm", "--eps", "0.05"]
    foreign = _unchanged(lambda d: _foreign_db(d, True))
    empty = _unchanged(lambda d: _foreign_db(d, False))
    text = _unchanged(lambda d: (d / "notes.txt").write_text("not a database\n") and d / "notes.txt")
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
    ]
    return out


def run_case(c: Case, fast_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jaxcert-battery-") as tmp:
        d = Path(tmp)
        state = (c.setup(d) or {}) if c.setup else {}
        env = _env(d, {k: v.format(d=d) for k, v in c.env.items()})
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "jaxcert.cli", *c.argv], cwd=d, env=env, capture_output=True,
                           text=True, timeout=900)
        wall = time.perf_counter() - t0
        finding = c.check(d, state) if c.check else None
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    tb = "Traceback" in p.stderr or "Traceback" in p.stdout
    row = {"case": c.name, "argv": c.argv, "exit": p.returncode, "expected": list(c.expect), "wall_s": round(wall, 2),
           "stderr": err[-1][:300] if err else ""}
    if "planted" in state:
        row["planted_files"] = state["planted"]
    if finding:
        row["class"] = "security finding"
        row["finding"] = finding
    elif tb:
        row["class"] = "traceback"
    elif p.returncode not in c.expect:
        row["class"] = "wrong exit code"
    elif c.expect == (2,):
        one = len([ln for ln in err if ln.startswith("jaxcert: error:") or ln.startswith("usage:")]) >= 1
        named = c.names in p.stderr if c.names else True
        if not (one and named):
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
