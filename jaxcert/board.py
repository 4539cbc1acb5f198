r"""A board of models: certify each model into ``OUT/<model>.json``, then write the comparison board (docs/board.md).

:func:`run_board` is what ``jaxcert board`` calls (the CLI only parses arguments):

* every model is certified with :func:`jaxcert.certify` into ``OUT/<name>.json``, checkpointed after every
  probe by :func:`jaxcert.checkpoint.write_report` exactly as ``jaxcert certify --json FILE --resume`` does
  (docs/cli.md, "Resuming"): a rerun keeps every finished probe, and a model whose file is complete is not
  run again (its file is left as it is, except that the training set its package states is brought up to
  date, :func:`_refresh_statements`);
* every model must support every element: before anything runs, each model is loaded and a board whose
  model lacks an element is refused (:class:`InputError` naming the model and the element, exit 2), never
  averaged over fewer elements than the others in silence.  With ``skip_unsupported`` (``--skip-unsupported``)
  such an element is recorded as unsupported in that model's report, and the board averages every model over
  the same elements, those every model supports (``board["averaged_elements"]``; the other elements'
  values stay in each model's report, ``board["dropped"]`` and a note on the page say which were left out);
* a model that fails to load, whose file belongs to another run, or that crashes, becomes an entry of
  the board's ``"failed"`` list with its reason; the other models go on;
* then ``OUT/board.json`` (:func:`jaxcert.report.compare.build_board`, whose rows carry each report's
  ``card``, ``throughput`` and rate columns, plus ``failed`` and the settings) and ``OUT/index.html``
  (:func:`jaxcert.report.compare.board_html`, which shows the rate columns, the throughput and model-card
  table and each card in its row's drill-down, plus the failed list).

``published`` (``--published FILE``) adds the published finite-difference board's rows and each twin's difference
per probe (:mod:`jaxcert.report.published`); ``rebuild`` (``--rebuild``) writes the board from the complete
reports already in ``OUT`` without loading a model or computing anything (:func:`kept_reports`).

Parallel runs (``workers`` / ``scheduler`` / ``client``): one task per model on ``dask.distributed``
(a ``LocalCluster`` of ``workers`` single-threaded processes, or an existing cluster), as the sweeps do
(:mod:`jaxcert.attacks.sweep`).  Each task loads its model in the worker, so nothing but the spec travels;
the workers write the model files themselves, so ``OUT`` must be a folder every worker sees at the same
path (one machine, or a shared file system).  The probes are deterministic given the seed, so the board
equals the serial one apart from wall times and throughput (``tests/test_board.py``).  Workers get the
caller's x64 setting and compilation cache, and the ``PYTHONPATH`` that makes them import this jaxcert.

Models are given as specs (``lj``, ``emt``, ``jax-sevennet:7net-0@float32``, ``nequix:PATH.nqx``; docs/cli.md,
"Model specs") or as a TOML file (:func:`read_models_toml`)::

    [[models]]
    spec = "jax-sevennet:7net-0@float32"
    max_batch = 8
    [[models]]
    spec = "lj"
    name = "lj-curl"          # the file stem (default: made from the spec and the defects)
    defects = ["curl=1.0"]
    [[models]]
    spec = "lj"
    name = "lj-float32"
    dtype = "float32"         # the structures' dtype for this model (default: --dtype)
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from jaxcert.core import inputs
from jaxcert.core.files import safe_file_stem
from jaxcert.core.inputs import InputError

__all__ = ["BoardEntry", "BoardResult", "parse_models", "read_models_toml", "entry_name", "certify_entry",
           "run_board", "write_board", "BOARD_JSON", "BOARD_HTML", "max_workers", "interrupted_message",
           "MAX_TOML_BYTES", "WORKERS_PER_CPU", "SCHEDULER_TIMEOUT_S", "refuse_images_that_do_not_fit",
           "kept_reports"]

BOARD_JSON, BOARD_HTML = "board.json", "index.html"
#: Largest ``--models`` TOML file read (bytes): a board of a hundred models is a few kB.
MAX_TOML_BYTES = 2**20
#: Most ``--workers`` per core: each worker is a process with its own model and open files, and ten thousand of
#: them exhaust the file descriptors before any model runs (``--workers`` <= this × the CPU count).
WORKERS_PER_CPU = 4
#: Seconds ``--scheduler`` may take to answer before the board is refused (exit 2) rather than waiting.
SCHEDULER_TIMEOUT_S = 5
_SAFE = re.compile(r"[^A-Za-z0-9._@+=-]")
_TOML_KEYS = ("spec", "name", "defects", "max_batch", "dtype")


@dataclasses.dataclass(frozen=True)
class BoardEntry:
    """One model of a board: its spec, the file stem of its report, its defects, memory budget and the
    structures' dtype when it is not the board's (``--dtype``)."""

    spec: str
    name: str
    defects: tuple[str, ...] = ()
    max_batch: str | int | None = None
    dtype: str | None = None


def entry_name(spec: str, defects: Sequence[str] = ()) -> str:
    """The default file stem of a model: the spec with each path reduced to its file name and every character
    outside ``A-Za-z0-9._@+=-`` replaced by ``_``, then ``+defect=strength`` per defect
    (``nequix:/w/nequix-mp-1.nqx@float32`` → ``nequix_nequix-mp-1.nqx@float32``)."""
    parts = [os.path.basename(p) if ("/" in p or os.sep in p) else p for p in spec.split(":")]
    stem = _SAFE.sub("_", "_".join(parts))
    for d in defects:
        stem += "+" + _SAFE.sub("_", str(d))
    return stem.strip(".") or "model"


def _check_spec(spec: str, where: str) -> str:
    """A spec whose head names no model at all is a typo, refused before anything runs (exit 2); everything
    else (a missing file, a missing package) is found when the model loads, and becomes a failed row."""
    from jaxcert import models
    from jaxcert.specs import BRIDGED, BRIDGED_ALIASES

    spec = str(spec).strip()
    head = spec.split(":", 1)[0].split("@", 1)[0]
    known = set(models.available()) | set(models.spec_heads()) | set(BRIDGED) | set(BRIDGED_ALIASES)
    if not spec or (head not in known and ":" not in spec):
        raise InputError(f"{where}: unknown model {spec!r}; registered: {', '.join(models.available())}; or a "
                         "spec (jax-sevennet:7net-0, nequix:PATH.nqx, chgnet, module:attr; see `jaxcert models`)")
    return spec


def _check_defect(text: str, where: str) -> None:
    """A ``name=strength`` (or ``name``) defect of a TOML entry, checked as ``--defect`` is when the model loads
    (:func:`jaxcert.specs.apply_defects`): a known name and a finite strength."""
    from jaxcert.models.defects import DEFECTS

    name, _, val = text.strip().partition("=")
    if name not in DEFECTS:
        raise InputError(f"{where}: unknown defect {inputs.shown(name)}{inputs.did_you_mean(name, DEFECTS)}; "
                         f"allowed: name=strength with a name from {', '.join(sorted(DEFECTS))}")
    if val.strip():
        inputs.finite(where, val.strip())


def _unique(entries: list[BoardEntry], where: str) -> list[BoardEntry]:
    seen: dict[str, str] = {}
    for e in entries:
        safe_file_stem(e.name, where)  # a name that cannot be a file, or is the board's own file: before any work
        key = e.name.casefold()  # lj.json and LJ.json are one file on a case-insensitive file system
        if key in seen:
            raise InputError(f"{where}: two models would write {e.name}.json ({seen[key]!r} and {e.spec!r}); "
                             "list each model once, or give them different names in a TOML file")
        seen[key] = e.spec
    if not entries:
        raise InputError(f"{where}: got no model; allowed: comma-separated model specs or a .toml file")
    return entries


def read_models_toml(path: str, where: str = "--models") -> list[BoardEntry]:
    """The models of a TOML file: a ``[[models]]`` table per model with ``spec`` (required), ``name``,
    ``defects`` (a list of ``name=strength``), ``max_batch`` and ``dtype`` (module docstring).  Any other key,
    a missing spec or an unreadable file is an :class:`InputError` naming ``where``, the file and the entry."""
    import tomllib

    # a FIFO, a device or a directory is refused before it is opened (opening a FIFO waits for a writer)
    inputs.regular_file(where, path, max_bytes=MAX_TOML_BYTES, what="a TOML file listing [[models]]")
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as err:
        raise InputError(f"{where}: {path}: cannot be read ({err.strerror or type(err).__name__})") from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{where}: {path}: not TOML ({err})") from None
    rows = doc.get("models")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{where}: {path}: models: got {rows!r}; allowed: one or more [[models]] tables")
    out = []
    for k, r in enumerate(rows):
        at = f"{where}: {path}: models[{k}]"
        bad = [key for key in r if key not in _TOML_KEYS]
        if bad:
            raise InputError(f"{at}: unknown key {bad[0]!r}; allowed: {', '.join(_TOML_KEYS)}")
        if not isinstance(r.get("spec"), str):
            raise InputError(f"{at}.spec: got {r.get('spec')!r}; allowed: a model spec (a string)")
        defects = r.get("defects", [])
        if not isinstance(defects, list) or not all(isinstance(d, str) for d in defects):
            raise InputError(f"{at}.defects: got {inputs.shown(defects)}; allowed: a list of \"name=strength\" "
                             "strings")
        for j, d in enumerate(defects):  # every entry is checked before any model runs, not when its turn comes
            _check_defect(d, f"{at}.defects[{j}]")
        spec = _check_spec(r["spec"], f"{at}.spec")
        name = r.get("name", entry_name(spec, defects))
        if not isinstance(name, str) or not name or _SAFE.search(name) or name.startswith("."):
            raise InputError(f"{at}.name: got {name!r}; allowed: a file stem of A-Z a-z 0-9 . _ @ + = -")
        safe_file_stem(name, f"{at}.name" if "name" in r else f"{at}.spec")  # not board/index, at most 200 bytes
        mb = r.get("max_batch")
        if mb is not None and not (isinstance(mb, int) and not isinstance(mb, bool) and mb >= 1) \
                and str(mb).lower() != "none":
            raise InputError(f"{at}.max_batch: got {mb!r}; allowed: an integer >= 1 or \"none\"")
        dt = r.get("dtype")
        if dt is not None and dt not in ("float32", "float64"):
            raise InputError(f"{at}.dtype: got {dt!r}; allowed: \"float32\" or \"float64\"")
        out.append(BoardEntry(spec=spec, name=name, defects=tuple(defects), max_batch=mb, dtype=dt))
    return _unique(out, where)


def parse_models(models: str | Sequence[str | BoardEntry], where: str = "--models") -> list[BoardEntry]:
    """``"lj,emt,..."``, a ``.toml`` file name, or a list of specs / :class:`BoardEntry` → the board's entries.

    Raises :class:`InputError` naming ``where`` for an empty list, an unknown model name, two models that
    would write the same file, or a bad TOML file."""
    if isinstance(models, str):
        text = models.strip()
        if text.endswith(".toml"):
            return read_models_toml(text, where)
        models = inputs.split_list(where, text, what="model specs or one .toml file")  # "lj,,emt": refused
    out = []
    for m in models:
        if isinstance(m, BoardEntry):
            out.append(m)
        else:
            spec = _check_spec(m, where)
            out.append(BoardEntry(spec=spec, name=entry_name(spec)))
    return _unique(out, where)


@dataclasses.dataclass
class BoardResult:
    """What :func:`run_board` did: the board (as written to ``board.json``), one status per model (in the
    order given), the paths written, and whether every gate of every certified model passed."""

    board: dict[str, Any]
    models: list[dict[str, Any]]
    json_path: str
    html_path: str

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The models that are not on the board (``board["failed"]``: name, spec, defects, stage, reason)."""
        return list(self.board["failed"])

    @property
    def gates_ok(self) -> bool:
        """Every gate of every certified model passed."""
        return all(m.get("gates_ok", True) for m in self.models if m["status"] != "failed")


# ------------------------------------------------------------------------------------------------ one model
def _fail(entry: BoardEntry, stage: str, reason: str, t0: float) -> dict[str, Any]:
    return {"name": entry.name, "spec": entry.spec, "defects": list(entry.defects), "status": "failed",
            "stage": stage, "reason": reason.strip()[:500], "computed": [], "kept": [],
            "wall_s": time.perf_counter() - t0}


def _refresh_statements(doc: dict[str, Any], model: Any, path: str) -> list[str]:
    """Bring a kept complete report's package statements (:data:`jaxcert.checkpoint.CARD_ONLY`: the training
    set) up to the model as loaded now, in its ``model`` metadata and its ``card``, and rewrite the file
    (atomically) if one changed; return the keys that changed.  Nothing the run computed or measured is
    touched: a weights file converted before the card recorded its package's statement gets the statement
    without recomputing a probe."""
    from jaxcert.checkpoint import CARD_ONLY, write_json

    info, meta, card = dict(model.info), doc.get("model"), doc.get("card")
    changed = []
    for key in CARD_ONLY:
        now = info.get(key)
        if isinstance(meta, dict) and meta.get(key) != now:
            if now is None:
                del meta[key]
            else:
                meta[key] = now
            changed.append(key)
        if isinstance(card, dict) and card.get(key) != now:
            card[key] = now
            changed.append(key)
    if changed:
        write_json(doc, path)
    return sorted(set(changed))


def certify_entry(entry: BoardEntry, settings: dict[str, Any],
                  progress: Callable[[str, list[str], list[str]], Any] | None = None,
                  model: Any = None) -> dict[str, Any]:
    """Certify one model into ``settings["out"]/<name>.json`` (resumable) and return its status:
    ``status`` ("ok", "kept": the complete file was reused, nothing recomputed, or "failed" with ``stage``
    and ``reason``), ``computed`` and ``kept`` (probe names), ``gates_ok``, ``file`` and ``wall_s``; a kept
    file whose package statements were brought up to date (:func:`_refresh_statements`) adds ``refreshed``.

    Runs in this process or on a dask worker (``settings`` is plain data; :func:`run_board` makes it).  Never
    raises for a model's own failure: loading, a file of another run and a crash are returned as "failed".
    ``progress`` (serial runs) makes the display of this model's probes: ``progress(name, probes, kept)``
    returns certify's ``progress`` callback (:func:`run_board`).  ``model``: the entry's model, already loaded
    (a serial :func:`run_board` loads each model once, to check its elements before anything runs).
    """
    t0 = time.perf_counter()
    import jax

    if settings.get("x64") is not None and bool(jax.config.jax_enable_x64) != settings["x64"]:
        jax.config.update("jax_enable_x64", settings["x64"])  # a fresh dask worker: the caller's setting
    if settings.get("cache") and not jax.config.jax_compilation_cache_dir:
        from jaxcert.core.cache import enable_compilation_cache

        enable_compilation_cache(settings["cache"])
    import jax.numpy as jnp

    from jaxcert.checkpoint import kept_md, kept_nacl, load_finished, write_report
    from jaxcert.probes.suite import certify
    from jaxcert.specs import load_model

    dtype = jnp.float64 if (entry.dtype or settings["dtype"]) == "float64" else jnp.float32
    path = os.path.join(settings["out"], f"{entry.name}.json")
    try:
        model = model if model is not None else load_model(entry.spec, list(entry.defects), entry.max_batch)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - a model that cannot load (sys.exit too) is a row
        return _fail(entry, "load", f"{type(err).__name__}: {err}" if not isinstance(err, InputError) else str(err),
                     t0)
    names = list(settings["probes"])
    try:
        finished = load_finished(path, model, settings["elements"], settings["seed"], dtype, name="--out")
    except InputError as err:
        return _fail(entry, "resume", f"{err} (remove the file or use another --out)", t0)
    from jaxcert.probes.base import PROBES

    kept = [o.name for o in finished if o.name in names and o.config == repr(PROBES[o.name].config())]
    if os.path.exists(path) and set(kept) == set(names):
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        measured = isinstance(doc.get("throughput"), dict) and "nacl" in doc["throughput"]  # the NaCl cell too
        if doc.get("complete") and (measured or not settings["throughput"]) \
                and [p["name"] for p in doc["probes"]] == names:
            refreshed = _refresh_statements(doc, model, path)
            return {"name": entry.name, "spec": entry.spec, "defects": list(entry.defects), "status": "kept",
                    "file": path, "computed": [], "kept": kept, "gates_ok": all(doc["aggregate"]["gates"].values()),
                    "wall_s": time.perf_counter() - t0, **({"refreshed": refreshed} if refreshed else {})}
    display = progress(entry.name, names, kept) if progress is not None else None
    try:
        report = certify(model, settings["elements"], probes=names, seed=settings["seed"], dtype=dtype,
                         agg=settings["agg"], skip_unsupported=bool(settings.get("skip_unsupported", True)),
                         finished=finished,
                         on_probe=lambda rep: write_report(rep, path, complete=False),
                         throughput=settings["throughput"], md_kept=kept_md(path) if kept else None,
                         nacl_kept=kept_nacl(path) if kept else None,
                         progress=display, gates=settings.get("gates", "exact"))
        write_report(report, path, complete=True)
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # noqa: BLE001 - a crash of one model (sys.exit too) is its row; the board goes on
        return _fail(entry, "certify", f"{type(err).__name__}: {str(err).strip()}", t0)
    finally:
        if display is not None and hasattr(display, "close"):
            display.close()
    gates = report.aggregate()["gates"]
    crashed = [o.name for o in report.outcomes if "error" in o.status]
    status = {"name": entry.name, "spec": entry.spec, "defects": list(entry.defects), "status": "ok", "file": path,
              "computed": [n for n in names if n not in kept], "kept": kept, "gates_ok": all(gates.values()),
              "wall_s": time.perf_counter() - t0}
    if crashed:  # the probes that crashed are run again by the next run (not in checkpoint.FINISHED)
        status["crashed_probes"] = crashed
    return status


# ------------------------------------------------------------------------------------------------ the board
def _shown(symbols: Sequence[str], at_most: int = 20) -> str:
    return ", ".join(symbols[:at_most]) + (f", ... ({len(symbols)} in all)" if len(symbols) > at_most else "")


def check_elements(entries: Sequence[BoardEntry], elements: Sequence[str], skip_unsupported: bool,
                   where: str = "--elements") -> dict[str, Any]:
    """Load every model and refuse a board on which some model lacks an element (before anything runs).

    Without ``skip_unsupported`` an element some model has no parameters for is an :class:`InputError` naming
    each such model, the elements it lacks and those it supports; with it, only a board where no element is
    supported by every model is refused.  A model that cannot load is not checked here: it becomes a failed
    row when its turn comes.  Returns the loaded models by entry name."""
    from jaxcert.specs import load_model

    loaded: dict[str, Any] = {}
    lacking: list[tuple[str, list[str], list[str]]] = []
    for e in entries:
        try:
            model = load_model(e.spec, list(e.defects), e.max_batch)
        except (Exception, SystemExit):  # noqa: BLE001 - a model that cannot load is a failed row, with its reason, later
            continue
        loaded[e.name] = model
        ok = inputs.supported_elements(model)
        bad = [] if ok is None else [el for el in elements if el not in ok]
        if bad:
            lacking.append((str(getattr(model, "name", e.name)), bad, ok or []))
    if lacking and not skip_unsupported:
        said = "; ".join(f"model {name!r} does not support {', '.join(bad)} (supports: {_shown(ok)})"
                         for name, bad, ok in lacking)
        drop = sorted({el for _, bad, _ in lacking for el in bad}, key=list(elements).index)
        raise InputError(f"{where}: {said}; drop {', '.join(drop)} or the model{'s' * (len(lacking) > 1)}, or "
                         "pass --skip-unsupported (skip_unsupported=True) to average every model over the elements "
                         "all of them support")
    common = [el for el in elements if not any(el in bad for _, bad, _ in lacking)]
    if not common:
        raise InputError(f"{where}: no element of {', '.join(elements)} is supported by every model ("
                         + "; ".join(f"{name!r} lacks {', '.join(bad)}" for name, bad, _ in lacking)
                         + "); choose elements every model supports")
    return loaded


def refuse_images_that_do_not_fit(model: Any, probes: Sequence[str], elements: Sequence[str], dtype: Any,
                                  where: str = "--model") -> None:
    """Prepare the probes' substrates (``probes`` on ``elements``) with ``model`` before anything runs, so that a
    cutoff whose periodic images cannot fit in memory (:class:`jaxcert.core.neighbors.TooManyImages`, raised by
    :meth:`jaxcert.Model.prepare` before allocating) is an input error naming ``where``, the cutoff, the image count
    and the memory (exit 2), not a crash of every probe.  Any other failure is left to the probes to report."""
    import jax.numpy as jnp

    from jaxcert.core.neighbors import TooManyImages
    from jaxcert.probes import substrates
    from jaxcert.probes.base import PROBES

    dt = {"float64": jnp.float64, "float32": jnp.float32}.get(str(dtype), dtype)
    specs = [PROBES[n] for n in probes if n in PROBES]
    batches = []
    for kind in sorted({p.substrate for p in specs if p.structures is None and p.substrate}):
        try:
            batches.append(substrates.stacked(kind, list(elements), dtype=dt)[0])
        except (Exception, SystemExit):  # noqa: BLE001 - the probe reports it (an unsupported element, ...)
            continue
    for p in specs:
        if p.structures is not None:
            try:
                batches.extend(p.structures(dt).values())
            except (Exception, SystemExit):  # noqa: BLE001
                continue
    for b in batches:
        try:
            model.prepare(b)
        except TooManyImages as err:
            raise InputError(f"{where}: {err}") from None
        except (Exception, SystemExit):  # noqa: BLE001 - a crash or a skip of the probes, reported as such
            continue


def _supported_in(source: Any, elements: Sequence[str]) -> list[str]:
    """The elements of a report that its model supports: every probe row but those recorded "unsupported"."""
    from jaxcert.report.summary import UNSUPPORTED

    rows = [p.get("per_element") or {} for p in source.data.get("probes", [])]
    return [el for el in elements if not any((r.get(el) or {}).get("status") == UNSUPPORTED for r in rows)]


def _same_elements(sources: list[Any], elements: Sequence[str]) -> tuple[list[Any], list[str], dict[str, list[str]]]:
    """Each report restricted to the elements its model supports (its data's ``elements``), so that the board,
    aligned by intersection, averages every model over the same elements: those every model supports.  Returns
    the sources, those elements, and per model label the elements it does not support."""
    import dataclasses as dc

    supported = [_supported_in(s, elements) for s in sources]
    lacking = {s.model_name: [el for el in elements if el not in ok] for s, ok in zip(sources, supported, strict=True)}
    lacking = {k: v for k, v in lacking.items() if v}
    common = [el for el in elements if all(el in ok for ok in supported)]
    if not lacking or not common:
        return sources, list(elements), lacking
    out = [dc.replace(s, data={**s.data, "elements": ok}) if ok != list(elements) else s
           for s, ok in zip(sources, supported, strict=True)]
    return out, common, lacking


def interrupted_message(folder: str | os.PathLike, entries: Sequence[BoardEntry], n_probes: int | None = None) -> str:
    """The line an interrupted board prints: each model's file in ``folder`` with the probes it keeps (every file
    is rewritten atomically after each probe, so what is on disk is what a rerun keeps), or that nothing was
    written."""
    kept = []
    for e in entries:
        path = os.path.join(os.fspath(folder), f"{e.name}.json")
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            n = len(doc.get("probes") or [])
            done = bool(doc.get("complete"))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        if n:
            of = f" of {n_probes}" if n_probes else ""
            kept.append(f"{e.name}.json ({'complete' if done else f'{n}{of} probes'})")
    if not kept:
        return f"interrupted: no model had finished a probe, nothing was kept in {os.fspath(folder)}"
    return (f"interrupted: kept in {os.fspath(folder)}: {', '.join(kept)}; rerun the same command to resume "
            "(board.json and index.html are written at the end)")


def max_workers() -> int:
    """The largest ``--workers``: :data:`WORKERS_PER_CPU` per CPU of this machine (at least one CPU)."""
    return WORKERS_PER_CPU * max(1, os.cpu_count() or 1)


def _pythonpath_with_this_jaxcert() -> str:
    """``PYTHONPATH`` with the folder holding this ``jaxcert`` first, so worker processes import the same code."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    old = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([here] + [p for p in old if os.path.abspath(p) != here])


def _run_dask(entries: list[BoardEntry], settings: dict[str, Any], workers: int | None, scheduler: str | None,
              client: Any, on_model: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """One task per model on dask.distributed; statuses in the order of ``entries``."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError("--workers/--scheduler: needs dask.distributed: pip install 'dask[distributed]'") from None
    cluster = own = None
    saved = os.environ.get("PYTHONPATH")
    try:
        if client is None:
            if scheduler:
                try:
                    client = own = Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT_S}s")
                except (OSError, TimeoutError, ValueError) as err:  # no answer, refused, or a name that resolves not
                    why = " ".join(str(err).split())[:200] or type(err).__name__
                    raise InputError(f"--scheduler: cannot reach {inputs.shown(scheduler)} within "
                                     f"{SCHEDULER_TIMEOUT_S} s ({why}); allowed: the address of a running dask "
                                     "scheduler, tcp://HOST:PORT") from None
            else:
                os.environ["PYTHONPATH"] = _pythonpath_with_this_jaxcert()  # inherited by the worker processes
                cluster = LocalCluster(n_workers=int(workers or 1), threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                client = own = Client(cluster)
        futures = {client.submit(certify_entry, e, settings, pure=False, key=f"jaxcert-board-{e.name}-{k}"): k
                   for k, e in enumerate(entries)}
        out: dict[int, dict[str, Any]] = {}
        try:
            for fut in as_completed(futures):
                k = futures[fut]
                try:
                    out[k] = fut.result()
                except (Exception, SystemExit) as err:  # noqa: BLE001 - a worker that died (memory, signal, sys.exit)
                    out[k] = _fail(entries[k], "worker", f"{type(err).__name__}: {err}", time.perf_counter())
                on_model(out[k])
        except BaseException:
            client.cancel(list(futures))
            raise
        return [out[k] for k in range(len(entries))]
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()


def run_board(models: str | Sequence[str | BoardEntry], elements: str | Sequence[str], out: str | os.PathLike,
              probes: str | Sequence[str] = "all", seed: int = 0, dtype: str = "float64", agg: str = "geometric",
              throughput: bool = True, workers: int | None = None, scheduler: str | None = None,
              client: Any = None, on_model: Callable[[dict[str, Any]], None] | None = None,
              progress: Callable[[str, list[str], list[str]], Any] | None = None,
              skip_unsupported: bool = False,
              gates: str = "exact", force: bool = False, published: str | os.PathLike | None = None,
              rebuild: bool = False) -> BoardResult:
    """Certify every model into ``out/<name>.json`` (resumable), then write ``out/board.json`` and
    ``out/index.html`` (module docstring; docs/board.md).

    Args:
      models: comma-separated specs, a ``.toml`` file, or a list of specs / :class:`BoardEntry`.
      elements: element symbols (list or comma-separated); every model is certified on all of them, and every
        model must support all of them (:func:`check_elements`, before anything runs) unless ``skip_unsupported``.
      out: the board's folder: created if missing (its parent must exist), refused when it is a link
        (:func:`jaxcert.core.files.ensure_output_folder`); marked with ``.jaxcert-output``.
      probes, seed, agg: as :func:`jaxcert.certify`.
      dtype: "float64" (enables JAX's x64 mode) or "float32".
      throughput: measure each model's throughput (:mod:`jaxcert.probes.throughput`) into its report.
      workers: run the models on a local dask cluster of this many single-threaded worker processes.
      scheduler: the address of an existing dask scheduler (``tcp://host:8786``) instead.
      client: an existing ``distributed.Client`` (overrides both; not closed here).
      on_model: called in this process with each model's status as it finishes (a progress display; an
        exception raised there stops the board, and a rerun resumes it).
      progress: in a serial run, ``progress(name, probes, kept)`` makes the display of one model's probes
        (certify's ``progress`` callback; ``jaxcert board`` passes a :class:`jaxcert.progress.StepProgress`
        factory); on Dask it is not used and only ``on_model`` reports.
      skip_unsupported: an element a model has no parameters for is recorded as unsupported in its report
        instead of refusing the board, and every model is averaged over the elements all of them support
        (``board["averaged_elements"]``).
      gates: the gate profile of the verdicts, the exit code and the page (:mod:`jaxcert.report.gates`):
        ``"exact"`` (default) or ``"reference"``; board.json carries each row's count under both.
      force: overwrite board.json and index.html in an existing folder that holds them but has no jaxcert board
        marker (``--force``); a folder this command wrote needs no force, and a link is refused even with it.
      published: a file of the published finite-difference board's scores (:mod:`jaxcert.report.published`,
        ``--published``): its models become marked rows of the board, and each of our rows with a published twin
        carries the difference per probe.  Read and checked before anything runs.
      rebuild: write the board from the complete reports already in ``out`` and nothing else (``--rebuild``): no
        model is loaded, no probe or measurement runs.  Every model's report must be there, complete, for these
        elements, probes, seed and dtype (:func:`kept_reports`), else :class:`InputError` before anything is
        written.

    Raises:
      InputError: bad models, elements, probes, seed, dtype, workers or output folder, or an element some model
        does not support without ``skip_unsupported`` (before anything runs).
    """
    import jax

    from jaxcert.core.files import check_target, ensure_output_folder
    from jaxcert.probes.suite import resolve_probes

    entries = parse_models(models)
    els = inputs.elements("--elements", elements)
    names = resolve_probes("all" if probes is None else probes, "--probes")
    seed = inputs.seed("--seed", seed)
    inputs.choice("--dtype", dtype, ("float64", "float32"))
    inputs.choice("--agg", agg, ("arithmetic", "geometric", "harmonic"))
    inputs.choice("--gates", gates, ("exact", "reference"))
    if workers is not None:  # bounded: 10,000 worker processes run out of file descriptors, not models
        workers = inputs.integer("--workers", workers, minimum=1, maximum=max_workers())
    if workers is not None and scheduler:
        raise InputError("--workers: give either --workers N (a local cluster) or --scheduler ADDRESS, not both")
    if scheduler is not None:  # its form now; whether it answers, within SCHEDULER_TIMEOUT_S, when the models run
        scheduler = inputs.scheduler_address("--scheduler", scheduler)
    # one new level at most; a link refused; a folder holding board.json or index.html jaxcert board did not write
    # (no marker) refused unless force (docs/board.md, "--out").  A model's file is judged by its content when it
    # is read (load_finished: another run's file becomes a failed row, untouched); a link there is refused now
    folder = ensure_output_folder(out, "--out", [BOARD_JSON, BOARD_HTML], force=bool(force), kind="board")
    for e in entries:
        check_target(os.path.join(folder, f"{e.name}.json"), "--out")
    if not os.access(folder, os.W_OK):
        raise InputError(f"--out: {out}: not writable")
    pub = None
    if published is not None:
        from jaxcert.report import published as published_board

        pub = published_board.load(published, "--published")
    if rebuild:  # nothing is loaded or computed: the reports on disk are the board
        settings = {"elements": els, "probes": names, "seed": seed, "dtype": dtype, "agg": agg, "out": folder,
                    "gates": gates, "throughput": bool(throughput), "skip_unsupported": bool(skip_unsupported)}
        statuses = kept_reports(entries, settings)
        for st in statuses:
            (on_model if on_model is not None else (lambda status: None))(st)
        board = write_board(folder, entries, statuses, settings, pub)
        return BoardResult(board=board, models=statuses, json_path=os.path.join(folder, BOARD_JSON),
                           html_path=os.path.join(folder, BOARD_HTML))
    if dtype == "float64" or any(e.dtype == "float64" for e in entries):
        jax.config.update("jax_enable_x64", True)
    cache = jax.config.jax_compilation_cache_dir
    settings = {"elements": els, "probes": names, "seed": seed, "dtype": dtype, "agg": agg, "out": folder,
                "gates": gates,
                "throughput": bool(throughput), "x64": bool(jax.config.jax_enable_x64),
                "cache": os.path.dirname(cache) if cache else None}
    loaded = check_elements(entries, els, bool(skip_unsupported))
    for e in entries:  # a cutoff whose periodic images cannot fit: refused now (exit 2), not a crash per probe
        if e.name in loaded:
            supported = [el for el in els if el in (inputs.supported_elements(loaded[e.name]) or els)]
            refuse_images_that_do_not_fit(loaded[e.name], names, supported, e.dtype or dtype,
                                          where=f"--models: {e.name}")
    settings["skip_unsupported"] = bool(skip_unsupported)
    report = on_model if on_model is not None else (lambda status: None)
    if workers is None and scheduler is None and client is None:
        statuses = []
        for e in entries:
            statuses.append(certify_entry(e, settings, progress, model=loaded.pop(e.name, None)))
            report(statuses[-1])
    else:
        loaded.clear()  # each worker loads its own model
        statuses = _run_dask(entries, settings, workers, scheduler, client, report)
    board = write_board(folder, entries, statuses, settings, pub)
    return BoardResult(board=board, models=statuses, json_path=os.path.join(folder, BOARD_JSON),
                       html_path=os.path.join(folder, BOARD_HTML))


def kept_reports(entries: Sequence[BoardEntry], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The status of every model for ``--rebuild``: each model's report in ``settings["out"]`` is complete and
    was written for the board's elements, probes, seed and dtype, so it is kept as it is ("kept", nothing
    computed).  Anything else (no file, a partial file, another run's file) is an :class:`InputError` naming
    ``--rebuild`` and the file, before anything is written."""
    from jaxcert.report.compare import load

    out = []
    for e in entries:
        path = os.path.join(settings["out"], f"{e.name}.json")
        if not os.path.exists(path):
            raise InputError(f"--rebuild: {path}: no report for model {e.name!r}; run the board without --rebuild "
                             "to compute it")
        try:
            doc = load(path).data
        except InputError as err:
            raise InputError(f"--rebuild: {err}") from None
        want = {"elements": list(settings["elements"]), "probes": list(settings["probes"]), "seed": settings["seed"],
                "dtype": e.dtype or settings["dtype"]}
        have = {"elements": list(doc.get("elements") or []), "probes": [p["name"] for p in doc["probes"]],
                "seed": doc.get("seed"), "dtype": doc.get("dtype")}
        for key in want:
            if have[key] != want[key]:
                raise InputError(f"--rebuild: {path}: {key} = {have[key]!r}, this board has {want[key]!r}; give the "
                                 "arguments the reports were computed with, or run without --rebuild")
        out.append({"name": e.name, "spec": e.spec, "defects": list(e.defects), "status": "kept", "file": path,
                    "computed": [], "kept": have["probes"], "gates_ok": all(doc["aggregate"]["gates"].values()),
                    "wall_s": 0.0})
    return out


def write_board(folder: str, entries: Sequence[BoardEntry], statuses: Sequence[dict[str, Any]],
                settings: dict[str, Any], published: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build the board of the models that have a complete report (in the given order), add ``failed``,
    ``settings`` and each row's ``card`` and ``throughput``, then the published rows (``published``, a file read
    by :func:`jaxcert.report.published.load`), and write ``board.json`` and ``index.html`` (its rows sorted by
    the overall score)."""
    from jaxcert.checkpoint import write_json
    from jaxcert.core.files import atomic_write
    from jaxcert.report.compare import BOARD_SCHEMA, board_html, build_board, load

    ok = [s for s in statuses if s["status"] != "failed"]
    sources = []
    failed = [{k: s[k] for k in ("name", "spec", "defects", "stage", "reason")} for s in statuses
              if s["status"] == "failed"]
    for s in ok:
        try:
            sources.append(load(s["file"]))
        except InputError as err:  # cannot happen for a file this run wrote; reported, not fatal
            failed.append({"name": s["name"], "spec": s["spec"], "defects": s["defects"], "stage": "board",
                           "reason": str(err)})
    sources, averaged, lacking = _same_elements(sources, settings["elements"])
    align = "intersection" if lacking else "strict"  # lacking: every model averaged over the common elements
    if sources:
        board = build_board(sources, align=align, gates=settings.get("gates", "exact"))
        by_file = {os.path.abspath(r["file"]): r for r in board["rows"]}
        for s in ok:  # the verdict of a kept report too is judged under this board's profile
            row = by_file.get(os.path.abspath(s["file"]))
            if row is not None:
                s["gates_ok"] = row["gates_passed"] == row["gates_total"]
    else:
        board = {"schema": BOARD_SCHEMA, "kind": "report", "align": "strict", "columns": list(settings["probes"]),
                 "elements": list(settings["elements"]), "dropped": [], "notes": [], "version_keys": [],
                 "explanations": {}, "rows": []}
    for row in board["rows"]:  # card and throughput come with each row (compare.build_board)
        row["file"] = os.path.basename(row["file"])  # the board travels with its folder
    for d in board.get("dropped", []):
        d["file"] = os.path.basename(d["file"])
    for row in board["rows"]:
        row["elements_in_report"] = list(settings["elements"])
    board["averaged_elements"] = averaged
    if lacking:
        board["notes"].append(f"every model is averaged over {', '.join(averaged)}, the elements all of them support "
                              "(--skip-unsupported); unsupported: " + "; ".join(
                                  f"{name}: {', '.join(els)}" for name, els in lacking.items()))
    if published is not None and board["rows"]:
        from jaxcert.report.published import add

        add(board, published)
    board["failed"] = failed
    board["settings"] = {k: settings.get(k, "exact") for k in ("elements", "probes", "seed", "dtype", "agg",
                                                               "throughput", "gates")}
    write_json(board, os.path.join(folder, BOARD_JSON))
    page = _page(board, board_html(board, sort="overall") if board["rows"] else None)
    atomic_write(os.path.join(folder, BOARD_HTML), page)  # exclusive temporary, fsync, rename; a link is refused
    return board


# ------------------------------------------------------------------------------------------------ the page
def _e(x: Any) -> str:
    return html.escape(str(x))


def _failed_section(board: dict[str, Any]) -> str:
    if not board["failed"]:
        return ""
    items = "".join(f"<li><b>{_e(f['name'])}</b> (<code>{_e(f['spec'])}</code>, {_e(f['stage'])}): "
                    f"{_e(f['reason'])}</li>" for f in board["failed"])
    return (f"<h2 id=failed>Models that did not run ({len(board['failed'])})</h2><ul class=failed>{items}</ul>")


def _page(board: dict[str, Any], page: str | None) -> str:
    """``board_html``'s page plus the list of models that did not run.

    It is spliced in at a stable point of the page (before the cards or per-probe sections, or before the
    script); a drill-down that cannot be found leaves its card in the cards section only."""
    extra = _failed_section(board)
    if page is None:  # no model produced a report
        return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>jaxcert board</title></head><body>"
                "<h1>jaxcert board</h1><p>No model produced a report.</p>" + extra + "</body></html>")
    for anchor in ("<h2 id=throughput>", "<h2>Per probe and element</h2>", "<h2 id=why>", "<script>"):
        at = page.find(anchor)
        if at >= 0:
            return page[:at] + extra + page[at:]
    return page.replace("</body>", extra + "</body>")


def main_progress(status: dict[str, Any], k: int, n: int, stream: Any = None) -> None:
    """One line per finished model for a terminal or a log (used by ``jaxcert board``); ``stream`` defaults
    to the ``sys.stderr`` of the moment of the call.  A name or reason from a model is printed with its control
    characters as visible escapes (:func:`jaxcert.report.summary.printable`)."""
    from jaxcert.report.summary import printable

    stream = sys.stderr if stream is None else stream
    if status["status"] == "failed":
        text = f"FAILED ({status['stage']}): {status['reason'][:200]}"
    elif status["status"] == "kept":
        text = "complete report kept (nothing recomputed)"
        if status.get("refreshed"):
            text += f"; {', '.join(status['refreshed'])} brought up to date from the model's package"
    else:
        text = (f"{len(status['computed'])} probes computed, {len(status['kept'])} kept, gates "
                f"{'passed' if status['gates_ok'] else 'FAILED'}")
    line = printable(f"{status['name']}: {text}", keep="")
    print(f"[{k}/{n}] {line} ({status['wall_s']:.1f} s)", file=stream, flush=True)
