r"""The certification suite: every probe, every element, programs shared by every probe.

``certify(model, elements)`` builds each substrate kind once for all elements
(:func:`jaxcert.probes.substrates.stacked`, padded to one shape) and runs each probe on the batch.

A probe declared as a plan (:mod:`jaxcert.probes.stages`, docs/architecture.md "Kinds and stages")
runs stage by stage: each stage is one ``jax.jit(jax.vmap(stage))`` program over the elements that
holds no model, and every model quantity a stage asks for (:mod:`jaxcert.probes.kinds`) is computed by the
one compiled program of its (model, kind, shape class), shared by every probe: fixed chunks of
:data:`CHUNK` items for ``evaluate``/``tangent``, all items at once for the loops (relaxations,
dynamics).  So a model is traced and compiled a handful of times per run, not once per probe and
derivative, and the stage programs, being model-free, are shared by every model in the executable
store.  A probe without a plan runs as one ``jax.jit(jax.vmap(probe))`` program.

Sharing is declared by the probes, not named here: probes with the same ``stream`` get the same
keys, and identical requests of a loop kind (the Langevin trajectory of the statistical-mechanics
probes, docs/probes.md §5) are answered once per run; the probe that asks first is charged.

Order: the reference's (docs/probes.md §6.1), :data:`DEFAULT_ORDER`.

Randomness: probe keys are ``fold_in(key(seed), crc32(name))`` split over the
elements, so a probe's draws do not depend on which other probes run.

Failure handling (§6.2, docs/architecture.md "Errors"): a :class:`ProbeSkip` (a model
that declares no stress, a non-periodic substrate, ...) or a structure the model refuses is
recorded with its reason (score NaN, excluded from aggregation); any other exception, a
``SystemExit`` included (a model calling ``sys.exit``), is a failed probe: status "error",
score 0, gate False, its one-line reason (:func:`failure_reason`) recorded, and the suite goes
on (only ``KeyboardInterrupt`` stops it); a non-finite defect (a model returning NaN) scores 0
with status "non-finite".

Aggregation (§6.3–6.4): per probe, the arithmetic mean of the per-element
scores (NaN dropped), mean defect, summed evaluations, gate = all elements;
overall = ``arithmetic`` | ``geometric`` (default) | ``harmonic`` over the
probe scores (clipped at 1e-12 for the latter two).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import hashlib
import os
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcert.core import _model_key, batching, cache, compilation, device, inputs
from jaxcert.core.model import Model, UnsupportedElement, is_unsupported_structure, model_free
from jaxcert.core.structure import Structure, stack
from jaxcert.probes import kinds, stages, substrates
from jaxcert.probes.base import NOT_RUN, PROBES, STATUS_NAMES, UNSUPPORTED, ProbeSkip
from jaxcert.probes.card import model_card
from jaxcert.probes.throughput import throughput as measure_throughput
from jaxcert.report import Report
from jaxcert.report import gates as gate_profiles
from jaxcert.report.summary import combine_scores, to_jsonable

_model_key.register()  # the store keys a user's model by what it computes (cache.register_traced)

__all__ = ["DEFAULT_ORDER", "UNSUPPORTED", "NOT_RUN", "certify", "combine_scores", "probe_key",
           "ProbeOutcome", "resolve_probes", "run_on_structures"]

DEFAULT_ORDER = (
    "conservativeness", "equivariance", "smoothness", "stress_consistency", "parity", "representation",
    "cross_maxwell", "betti", "zero_modes", "trimer", "reversibility", "config_temperature",
    "equipartition", "virial",
)


def probe_key(seed: int, name: str) -> jax.Array:
    """The probe's key: independent of which other probes run."""
    return jax.random.fold_in(jax.random.key(seed), zlib.crc32(name.encode()) & 0x7FFFFFFF)


@functools.partial(jax.jit, static_argnums=2)
def _split_probe_key(seed: jax.Array, crc: jax.Array, n: int) -> jax.Array:
    return jax.random.split(jax.random.fold_in(jax.random.key(seed), crc), n)


def probe_keys(seed: int, name: str, n: int) -> jax.Array:
    """``jax.random.split(probe_key(seed, name), n)``, the same keys from one small jitted program.

    Eagerly, the three random operations are three programs per probe that a warm process must
    trace and look up in the cache (docs/architecture.md §4.3); jitted they are one per ``n``.
    """
    seed_dtype = jnp.int64 if jax.config.jax_enable_x64 else jnp.int32
    crc = np.uint32(zlib.crc32(name.encode()) & 0x7FFFFFFF)
    return _split_probe_key(np.asarray(seed, seed_dtype), crc, int(n))


@dataclasses.dataclass
class ProbeOutcome:
    """One probe over all elements (numpy, ready for the report).

    Mutable on purpose, unlike :class:`jaxcert.core.result.Result`: the suite attaches the shared trajectory's
    cost and the model's notes after the probe finished (docs/architecture.md, "Results"); ``status`` holds
    :class:`~jaxcert.core.result.Status` values."""

    name: str
    target: float
    gated: bool
    elements: list[str]
    defect: np.ndarray  # (n_el,)
    score: np.ndarray
    gate: np.ndarray  # bool
    n_evals: np.ndarray
    status: list[str]
    details: list[dict[str, Any]]  # per element
    message: str | None = None  # skip reason or error
    wall_s: float = 0.0
    host_evals: dict[str, int] | None = None  # host-side model calls of a bridged model during this probe
    config: str | None = None  # repr of the probe's config: a resumed probe must have been run with the same
    #: the details as JSON types, made once (the CLI rewrites the partial report after every probe)
    _details_json: list[Any] | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def details_json(self) -> list[Any]:
        """``details`` converted by :func:`jaxcert.report.summary.to_jsonable`, once per outcome.

        The details of a finished outcome are not changed afterwards; the suite attaches the
        trajectory's evaluations and the model's notes before the first report is written."""
        if self._details_json is None or len(self._details_json) != len(self.details):
            self._details_json = [to_jsonable(d) for d in self.details]
        return self._details_json

    def summary(self) -> dict[str, Any]:
        sc = self.score[np.isfinite(self.score)]
        dfc = self.defect[~np.isnan(self.defect)]
        gates = [bool(g) for g, st in zip(self.gate, self.status, strict=True) if st not in NOT_RUN]
        return {
            "score": float(sc.mean()) if sc.size else float("nan"),
            "defect": float(dfc.mean()) if dfc.size else float("nan"),
            "n_evals": int(np.sum(self.n_evals)),
            "gate": (all(gates) if gates else None) if self.gated else None,
            "status": _overall_status(self.status),
        }


def _overall_status(statuses: list[str]) -> str:
    for s in ("error", "non-finite"):
        if s in statuses:
            return s
    if all(s in NOT_RUN for s in statuses):
        return "skipped"
    return "ok"


def _skipped(name, spec, elements, message, status="skipped") -> ProbeOutcome:
    n = len(elements)
    is_err = status == "error"
    return ProbeOutcome(
        name=name, target=spec.target, gated=spec.gated, elements=list(elements),
        defect=np.full(n, np.inf if is_err else np.nan), score=np.full(n, 0.0 if is_err else np.nan),
        gate=np.zeros(n, bool), n_evals=np.zeros(n, int), status=[status] * n,
        details=[{"error" if is_err else "skipped": message} for _ in range(n)], message=message,
    )


def failure_reason(err: BaseException) -> str:
    """The one-line reason a probe failed: ``TypeName: message`` (the message's first line), at most 300
    characters; a ``SystemExit`` reads "model called sys.exit(CODE)".

    An error JAX raises for a host callback that failed at run time (a bridged model) starts its message with
    the callback's traceback; its last line, the callback's own exception, replaces that traceback."""
    if isinstance(err, SystemExit):
        return f"model called sys.exit({err.code!r})"[:300]
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    if not lines:
        return type(err).__name__
    first = lines[0]
    at = first.find("Traceback (most recent call last)")
    if at >= 0 and len(lines) > 1:
        first = f"{first[:at].rstrip()} {lines[-1]}"
    return f"{type(err).__name__}: {first}"[:300]


def _to_numpy(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda x: np.asarray(x), tree)


def _split_details(details: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Batched details dict → one dict per element."""
    def pick(x, k):
        if isinstance(x, dict):
            return {key: pick(v, k) for key, v in x.items()}
        x = np.asarray(x)
        return x[k] if x.ndim >= 1 and x.shape[0] == n else x

    return [pick(details, k) for k in range(n)]


def resolve_probes(names: str | Sequence[str], name: str = "probes") -> list[str]:
    """Probe names in run order; unknown names raise :class:`UnknownName`.

    ``"all"``: the default order, then any other registered probe with ``default=True``; an opt-in probe
    (``ProbeSpec.default`` False, e.g. ``lam``) runs only when named."""
    if names == "all" or names is None:
        wanted = [n for n in DEFAULT_ORDER if n in PROBES] + sorted(
            n for n in set(PROBES) - set(DEFAULT_ORDER) if PROBES[n].default)
    else:
        wanted = inputs.name_list(name, names, sorted(PROBES), what="probes")
    return wanted


def certify(
    model: Model,
    elements: str | Sequence[str],
    probes: str | Sequence[str] = "all",
    seed: int = 0,
    dtype: Any = None,
    agg: str = "geometric",
    configs: dict[str, Any] | None = None,
    share_trajectory: bool = True,
    progress: Callable[[str, int, int, float], None] | None = None,
    skip_unsupported: bool = False,
    finished: Sequence[ProbeOutcome] = (),
    on_probe: Callable[[Any], None] | None = None,
    compile_workers: int | None = None,
    throughput: bool = False,
    md_kept: dict[str, Any] | None = None,
    card: bool = True,
    nacl_kept: dict[str, Any] | None = None,
    gates: str = "exact",
):
    """Run the certification suite and return a :class:`jaxcert.report.certification.Report`.

    Args:
      model: the potential.
      elements: symbols, as a list or a comma-separated string.
      probes: "all" or names (list or comma-separated).
      seed: run seed (every probe key derives from it).
      dtype: float dtype of the substrates (default: float64 if x64 is enabled, else float32).
      agg: aggregation of probe scores into ``overall``.
      configs: probe name → config instance overriding the defaults.
      share_trajectory: one Langevin trajectory for the three stat-mech probes.
      progress: callback ``(probe_name, index, total, seconds_of_previous)`` for displays.
      skip_unsupported: elements outside ``model.elements`` are recorded per element with status
        ``"unsupported"`` (excluded from scores and gates) instead of raising :class:`InputError`.
      finished: outcomes of probes already run with the same model, elements, seed, dtype and
        configs (from :func:`jaxcert.checkpoint.load_finished`); they are kept, not recomputed, and the
        report's ``wall_time_s`` counts their recorded ``wall_s`` with this run's time (the computation's
        wall time over all its runs, less what earlier runs spent outside the probes).
      on_probe: called with the partial :class:`~jaxcert.report.certification.Report` after every probe (the CLI
        writes it atomically, so a killed run loses nothing finished; ``docs/cli.md``).
      compile_workers: threads that trace and compile the probes' programs ahead of their turn
        (default: ``$JAXCERT_COMPILE_WORKERS``, else the CPU count, at most 4; 0 = compile each
        program when its probe runs). XLA compiles outside the GIL, so on a cold start the
        programs of later probes compile while earlier ones run; results are identical
        (the same programs), only ``wall_s`` per probe then excludes the overlapped compile.
      throughput: after the probes, measure the model's throughput into the report's ``"throughput"``
        (:mod:`jaxcert.probes.throughput`: evaluations/s of the suite, atom·steps/s of NVE runs on the published
        board's 100-atom NaCl cell, hardware and peak memory; docs/board.md).  Off by default, to keep library calls and
        tests to the probes; the CLI's ``certify`` and ``board`` turn it on.
      md_kept: with ``throughput``, an NVE measurement of this model on this device kept from an earlier run
        of the same report (:func:`jaxcert.checkpoint.kept_md`), used instead of measuring it again; a resumed
        run that recomputes one probe does not spend minutes re-running the MD of a large network.
      nacl_kept: with ``throughput``, the measurement on the published board's NaCl cell kept from an earlier run
        (:func:`jaxcert.checkpoint.kept_nacl`), as ``md_kept``.
      card: put the model card (:func:`jaxcert.probes.card.model_card`) in the report's ``"card"``.
      gates: the gate profile of the report's verdicts (:mod:`jaxcert.report.gates`): ``"exact"`` (thresholds at
        the floating-point floor of the model's precision, the default) or ``"reference"`` (the published
        finite-difference board's). Nothing else changes: :meth:`Report.with_profile` judges again.

    The report's ``"compilation"`` counts what this call traced, lowered and compiled, and what it loaded from
    the caches instead (:mod:`jaxcert.core.compilation`): a cold and a warm run differ there.

    Raises:
      InputError: unknown, misspelt or duplicate element symbols, elements the model does not
        support (without ``skip_unsupported``), a bad seed, aggregation, dtype or probe name.
    """
    t_start = time.perf_counter()
    memory_reset = device.reset_peak_memory() if throughput else False  # the peak the throughput reports: this run's
    compiled_before = compilation.snapshot()
    inputs.choice("gates", gates, gate_profiles.PROFILES)
    all_elements = inputs.elements("elements", elements)
    elements, unsupported = inputs.split_supported("elements", model, all_elements,
                                                   skip_unsupported=skip_unsupported)
    if not elements:
        raise inputs.InputError(f"elements: model {model.name!r} supports none of {', '.join(all_elements)}; "
                                f"it supports {', '.join(inputs.supported_elements(model) or [])}")
    seed = inputs.seed("seed", seed)
    inputs.choice("agg", agg, ("arithmetic", "geometric", "harmonic"))
    if dtype is None:
        dtype = jnp.zeros(()).dtype
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise inputs.InputError("dtype: float64 needs x64: call jax.config.update('jax_enable_x64', True) first")
    names = resolve_probes(probes)
    configs = dict(configs or {})
    kept = {o.name: o for o in finished if o.name in names}
    for o in kept.values():
        if list(o.elements) != all_elements and PROBES[o.name].structures is None:
            raise inputs.InputError(f"finished: probe {o.name!r} was run on {o.elements}, this run has {all_elements}")

    batches: dict[Any, Any] = {}

    def batch_for(kind: str, els: tuple[str, ...] | None = None):
        els = tuple(elements) if els is None else els
        if (kind, els) not in batches:
            b, _ = substrates.stacked(kind, list(els), dtype=dtype)
            batches[kind, els] = model.prepare(b)
        return batches[kind, els]

    memo: dict[Any, Any] = {}  # answers of loop kinds (trajectories, relaxations), shared by identical requests
    reused = {n for n in names if n in kept and kept[n].config == repr(configs.get(n, PROBES[n].config()))}
    todo = [n for n in names if n not in reused]
    ahead = _compile_ahead(model, todo, configs, batch_for, elements, seed, share_trajectory, compile_workers)
    outcomes: list[ProbeOutcome] = []
    # a bridged (host) model counts its evaluations and keeps its package's notes: record them per probe
    counter = getattr(getattr(model.energy_fn, "backend", None), "counts", None)
    notes = getattr(getattr(model.energy_fn, "backend", None), "notes", None)
    last = 0.0

    # a resumed report's wall time is the whole computation's: this run's plus the kept probes' own wall time
    earlier_s = sum(float(kept[n].wall_s or 0.0) for n in reused)
    machine = device.machine()
    try:  # the card describes the model; it never stops a certification
        the_card = model_card(model, dtype) if card else None
    except Exception as err:  # noqa: BLE001 - e.g. a model attribute of a type the card does not expect
        the_card = {"name": model.name, "error": f"{type(err).__name__}: {err}"[:300]}

    def partial_report(rates: dict[str, Any] | None = None):
        return Report.from_outcomes(model=model, elements=all_elements, seed=seed, dtype=str(dtype), agg=agg,
                                    outcomes=outcomes, wall_s=time.perf_counter() - t_start + earlier_s,
                                    machine=machine, card=the_card, throughput=rates,
                                    compilation=compilation.since(compiled_before), profile=gates)

    def evaluate(name: str, spec, cfg, els: tuple[str, ...]) -> ProbeOutcome:
        """The probe on the elements ``els`` in one batch; element k keeps its key whatever the batch."""
        batch = batch_for(spec.substrate, els)
        all_keys = probe_keys(seed, _stream(spec, share_trajectory), len(elements))
        keys = all_keys[np.asarray([elements.index(e) for e in els])] if els != tuple(elements) else all_keys
        res = _to_numpy(_run_probe(model, spec, cfg, keys, batch, memo if share_trajectory else {}))
        return ProbeOutcome(
            name=name, target=spec.target, gated=spec.gated, elements=list(els),
            defect=np.asarray(res.defect, float), score=np.asarray(res.score, float),
            gate=np.asarray(res.gate, bool), n_evals=np.asarray(res.n_evals, int),
            status=[STATUS_NAMES[int(c)] for c in np.atleast_1d(res.status)],
            details=_split_details(res.details, len(els)),
        )

    def unsupported_outcome(name: str, spec, els, err: BaseException) -> ProbeOutcome:
        msg = str(err)
        return _skipped(name, spec, els, msg[max(msg.find("UnsupportedStructure"), 0):][:500])

    for idx, name in enumerate(names):
        spec = PROBES[name]
        cfg = configs.get(name, spec.config())
        if name in kept and kept[name].config == repr(cfg):  # finished in an earlier run: kept as it was
            outcomes.append(kept[name])
            continue
        if progress is not None:
            progress(name, idx, len(names), last)
        t0 = time.perf_counter()
        before = dict(counter) if counter is not None else {}
        notes_before = {k: dict(v) for k, v in notes.items()} if notes is not None else {}
        try:
            phase = getattr(progress, "phase", None)  # an optional display hook (jaxcert.progress.StepProgress)
            if phase is not None and ahead.pending(name):
                phase("compiling")
            ahead.wait(name)  # its program was traced and compiled ahead (or failed there: then again here)
            if phase is not None:
                phase("running")
            try:
                if spec.structures is not None:  # named structures, not one substrate per element
                    outcome = run_on_structures(model, name, spec.structures(dtype), seed=seed, config=cfg)
                else:
                    outcome = evaluate(name, spec, cfg, tuple(elements))
            except Exception as err:  # noqa: BLE001 - one element the model cannot evaluate: retry each alone
                if not (is_unsupported_structure(err) and len(elements) > 1):
                    raise
                parts = []
                for el in elements:
                    try:
                        parts.append(evaluate(name, spec, cfg, (el,)))
                    except Exception as one_err:  # noqa: BLE001
                        if not is_unsupported_structure(one_err):
                            raise
                        parts.append(unsupported_outcome(name, spec, [el], one_err))
                outcome = _concat(parts)
        except ProbeSkip as err:
            outcome = _skipped(name, spec, elements, str(err))
        except KeyboardInterrupt:  # the user pressed Ctrl-C: stop (the CLI exits 130)
            raise
        except BaseException as err:  # noqa: BLE001 - any failure of the model, sys.exit too: the suite goes on (§6.2)
            if is_unsupported_structure(err):  # the model cannot evaluate the substrate: a skip, with why
                outcome = unsupported_outcome(name, spec, elements, err)
            else:
                outcome = _skipped(name, spec, elements, failure_reason(err), status="error")
                outcome.details[0]["traceback"] = traceback.format_exc()[-2000:]
        compilation.trim_heap()  # the probe's temporary buffers (a trajectory's, say) back to the system
        outcome.wall_s = time.perf_counter() - t0
        if counter is not None:
            outcome.host_evals = {k: int(v - before.get(k, 0)) for k, v in counter.items() if v - before.get(k, 0)}
        if notes:
            _attach_notes(outcome, notes_before, notes)
        last = outcome.wall_s
        outcome.config = repr(cfg)
        outcomes.append(outcome if spec.structures is not None else
                        _with_unsupported(outcome, all_elements, unsupported))
        if on_probe is not None:
            on_probe(partial_report())
    ahead.close()
    rates = None
    if throughput:
        if progress is not None and getattr(progress, "phase", None) is not None:
            progress.phase("throughput")
        rates = measure_throughput(model, elements, outcomes, dtype, md=md_kept if md_kept else True,
                                   nacl=nacl_kept if nacl_kept else True, memory_since_reset=memory_reset)
    if progress is not None:
        progress("done", len(names), len(names), last)
    return partial_report(rates)


def run_on_structures(model: Model, name: str, structures: dict[str, Structure], seed: int = 0,
                      config: Any = None) -> ProbeOutcome:
    """The probe ``name`` on named structures: one outcome row per structure, in the given order.

    The structures are grouped by (periodicity, dtype) and each group runs padded and vmapped, as the suite
    runs a probe (:func:`_run_probe`). A structure the model does not
    support (``model.prepare`` raises) is recorded as skipped with the reason; when a group fails, its
    structures are retried one at a time, so one structure the model cannot evaluate does not sink the
    others (an unsupported structure is then a skip, any other failure an error, each with its
    message). Row k has key ``split(probe_key(seed, name), len(structures))[k]``.
    """
    spec = PROBES[name]
    cfg = spec.config() if config is None else config
    labels = list(structures)
    if not labels:
        raise inputs.InputError(f"{name}: no structures to run on")
    keys = probe_keys(seed, name, len(labels))
    rows: dict[str, ProbeOutcome] = {}
    ready: dict[str, Structure] = {}
    for label, s in structures.items():
        try:
            ready[label] = model.prepare(s)
        except (UnsupportedElement, ValueError) as err:
            rows[label] = _skipped(name, spec, [label], str(err))
    groups: dict[Any, list[str]] = {}
    for label, s in ready.items():
        groups.setdefault((s.pbc, s.dtype), []).append(label)

    def one_batch(group: list[str]) -> ProbeOutcome:
        batch = model.prepare(stack([ready[k] for k in group]))
        ks = keys[np.asarray([labels.index(k) for k in group])]
        res = _to_numpy(_run_probe(model, spec, cfg, ks, batch, {}))
        return ProbeOutcome(
            name=name, target=spec.target, gated=spec.gated, elements=list(group),
            defect=np.asarray(res.defect, float), score=np.asarray(res.score, float),
            gate=np.asarray(res.gate, bool), n_evals=np.asarray(res.n_evals, int),
            status=[STATUS_NAMES[int(c)] for c in np.atleast_1d(res.status)],
            details=_split_details(res.details, len(group)))

    for group in groups.values():
        try:
            rows.update(zip(group, _split_rows(one_batch(group)), strict=True))
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - retry each structure alone, so one failure sinks only itself
            for label in group:
                try:
                    rows[label] = one_batch([label])
                except KeyboardInterrupt:
                    raise
                except BaseException as err:  # noqa: BLE001 - recorded with its reason (sys.exit too), the others go on
                    msg = str(err)
                    if is_unsupported_structure(err):
                        msg = msg[max(msg.find("UnsupportedStructure"), 0):][:500]
                        rows[label] = _skipped(name, spec, [label], msg)
                    else:
                        rows[label] = _skipped(name, spec, [label], failure_reason(err), status="error")
    return _concat([rows[k] for k in labels])


def _split_rows(o: ProbeOutcome) -> list[ProbeOutcome]:
    """One outcome per row of ``o`` (the inverse of :func:`_concat`)."""
    return [dataclasses.replace(o, elements=[el], defect=o.defect[k:k + 1], score=o.score[k:k + 1],
                                gate=o.gate[k:k + 1], n_evals=o.n_evals[k:k + 1], status=[o.status[k]],
                                details=[o.details[k]]) for k, el in enumerate(o.elements)]


def _attach_notes(outcome: ProbeOutcome, before: dict[str, dict[str, int]], after: dict[str, Any]) -> None:
    """Per element, the model-package notes this probe caused: ``details["model_notes"]`` ("text (n geometries)").

    A bridged model's backend keeps text → geometries per element symbol (``jaxcert_bridges.backend.note``,
    docs/architecture.md "Bridges"): e.g. CHGNet's warning for the isolated atoms of the trimer probe.
    """
    for k, el in enumerate(outcome.elements):
        lines = []
        for text, per_el in after.items():
            n = int(per_el.get(el, 0)) - int(before.get(text, {}).get(el, 0))
            if n > 0:
                lines.append(f"{text} ({n} geometr{'y' if n == 1 else 'ies'})")
        if lines and isinstance(outcome.details[k], dict):
            outcome.details[k]["model_notes"] = lines


def _concat(parts: list[ProbeOutcome]) -> ProbeOutcome:
    """One outcome from per-element outcomes of the same probe (in the given order)."""
    first = parts[0]
    messages = sorted({p.message for p in parts if p.message})
    return dataclasses.replace(
        first, elements=[e for p in parts for e in p.elements],
        defect=np.concatenate([p.defect for p in parts]), score=np.concatenate([p.score for p in parts]),
        gate=np.concatenate([p.gate for p in parts]), n_evals=np.concatenate([p.n_evals for p in parts]),
        status=[st for p in parts for st in p.status], details=[d for p in parts for d in p.details],
        message="; ".join(messages) or None,
    )


def _with_unsupported(o: ProbeOutcome, all_elements: list[str], unsupported: dict[str, str]) -> ProbeOutcome:
    """Insert the elements the model does not support, each with status ``"unsupported"`` and its reason."""
    if not unsupported:
        return o
    pos = {el: k for k, el in enumerate(o.elements)}

    def full(arr, fill):
        arr = np.asarray(arr)
        out = np.full(len(all_elements), fill, dtype=arr.dtype if arr.dtype != bool else bool)
        for j, el in enumerate(all_elements):
            if el in pos:
                out[j] = arr[pos[el]]
        return out

    return dataclasses.replace(
        o, elements=list(all_elements), defect=full(o.defect, np.nan), score=full(o.score, np.nan),
        gate=full(o.gate, False), n_evals=full(o.n_evals, 0),
        status=[o.status[pos[el]] if el in pos else UNSUPPORTED for el in all_elements],
        details=[o.details[pos[el]] if el in pos else {"skipped": unsupported[el]} for el in all_elements],
    )


#: (model id, program, config, ...) -> (model, jitted program); the model is held so its id stays unique.
_COMPILED: dict[Any, Any] = {}
#: id(jitted program) -> what it computes, for the executable store (:mod:`jaxcert.core.cache`)
_IDENTITY: dict[int, tuple] = {}


def _compiled(model: Model, spec, cfg, extra_names: tuple[str, ...]):
    key = (id(model), spec.name, cfg, extra_names)
    if key not in _COMPILED:

        def one(k, s, *extra):
            return spec.fn(model, k, config=cfg, substrate=s, **dict(zip(extra_names, extra, strict=True)))

        run = jax.jit(batching.vmap(one, model.max_batch))
        _remember(key, model, run, ("probe", spec.name, cfg, extra_names, model))
    return _COMPILED[key][1]


def _remember(key: Any, model: Model | None, run: Any, identity: tuple) -> None:
    if len(_COMPILED) > 256:
        _COMPILED.clear()
        _IDENTITY.clear()
    _COMPILED[key] = (model, run)
    _IDENTITY[id(run)] = identity


def _stream(spec, share: bool = True) -> str:
    """The name the probe's keys derive from: its declared ``stream`` (shared with other probes) or its name."""
    return (spec.stream or spec.name) if share else spec.name


def _run_probe(model: Model, spec, cfg, keys: jax.Array, batch: Structure, memo: dict[Any, Any]):
    """The probe on a batch of substrates: its plan's stages and shared kernels, or its one program.

    A probe with a plan (:mod:`jaxcert.probes.stages`) runs stage by stage: each stage is a vmapped program
    without the model (:func:`_stage_program`), each request is answered by the one program of its (model,
    kind, shape class) (:func:`_answer`). A probe without a plan runs as one vmapped program of its function.
    """
    if spec.plan is None:
        return _call(_compiled(model, spec, cfg, ()), (keys, batch))
    if spec.check is not None:
        spec.check(model, jax.tree.map(lambda x: _host(x)[0], batch), cfg)
    facts = stages.facts_of(model)
    fns = spec.plan(cfg, facts)
    out = jax.tree.map(_host, _call(_stage_program(spec, cfg, facts, 0, fns), (keys, batch)))
    for k in range(1, len(fns)):
        answers = _answer(model, out.requests, memo)
        out = jax.tree.map(_host, _call(_stage_program(spec, cfg, facts, k, fns), (out.state, answers)))
    return out


def _stage_program(spec, cfg, facts, k: int, fns: tuple):
    """Stage ``k`` of the probe's plan, jitted and vmapped over the substrates; it holds no model, so the
    executable store keys it without one (every model shares it)."""
    key = ("stage", spec.name, spec.plan, cfg, facts, k)
    if key not in _COMPILED:
        stage = fns[k]

        def guarded(*args):  # runs while JAX traces the stage: a reach for any model raises ModelInStage
            with model_free():
                return stage(*args)

        run = jax.jit(jax.vmap(guarded))
        _remember(key, None, run, ("stage", spec.plan, k, cfg, facts))
    return _COMPILED[key][1]


#: items of a chunked kind (``evaluate``, ``tangent``) evaluated by one call of its program
CHUNK = 64


def _kernel(model: Model, kind: str, options: tuple):
    """The one program of (model, kind, options): the kind's item function vmapped over a chunk of items."""
    key = (id(model), "kernel", kind, options)
    if key not in _COMPILED:
        fn = kinds.KINDS[kind]
        opts = dict(options)
        run = jax.jit(jax.vmap(lambda *args: fn(model, *args, **opts)))
        _remember(key, model, run, ("kernel", fn, options, model))
    return _COMPILED[key][1]


def _chunk(model: Model, kind: str, n_items: int) -> int:
    """Items per call, at most ``model.max_batch``.

    A chunked kind takes :data:`CHUNK` items per call, or the next power of two above a smaller request: a
    few shape classes per kind (1, 2, 4, …, 64), and padding never more than doubles the work. A loop kind runs all
    its items (the elements) at once."""
    size = min(CHUNK, 1 << max(0, int(n_items) - 1).bit_length()) if kind in kinds.CHUNKED else n_items
    return max(1, min(size, model.max_batch) if model.max_batch else size)


def _is_key(x: Any) -> bool:
    return jnp.issubdtype(getattr(x, "dtype", np.float64), jax.dtypes.prng_key)


def _host(x: Any) -> Any:
    """A program's output as a host (numpy) array, so reshaping, padding and slicing between programs compile
    nothing (eager jnp ops would each compile a small program per shape); PRNG keys stay JAX arrays."""
    return x if _is_key(x) else np.asarray(x)


def _flatten_items(req) -> tuple[tuple[int, ...], int, tuple]:
    lead_nd = 1 + req.batch_ndim  # the substrates' axis, then the request's own batch axes
    lead = tuple(jax.tree.leaves(req.args)[0].shape[:lead_nd])
    n = int(np.prod(lead))
    flat = jax.tree.map(lambda x: _host(x).reshape((n, *x.shape[lead_nd:])), req.args)
    return lead, n, flat


def _padded_chunk(flat: tuple, n: int, lo: int, width: int) -> tuple:
    """Items ``lo .. lo + width`` of the ``n`` items of ``flat``, padded past the end by repeating the last
    item (every chunk of a width has one shape: one compiled program)."""
    if lo == 0 and width == n:
        return flat
    idx = np.minimum(np.arange(lo, lo + width), n - 1)
    return jax.tree.map(lambda x: x[idx], flat)


def _memo_key(req) -> tuple:
    leaves, treedef = jax.tree_util.tree_flatten(req.args)
    h = hashlib.sha256()
    for x in leaves:
        a = np.asarray(jax.random.key_data(x) if _is_key(x) else x)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return (req.kind, req.options, req.batch_ndim, str(treedef), h.hexdigest())


def _answer(model: Model, requests: Any, memo: dict[Any, Any]) -> Any:
    """Answer every request of a batched stage output with the kernels, chunk by chunk.

    Requests of a loop kind (relaxations, trajectories) with identical inputs are answered once per run
    (``memo``); a shared :class:`~jaxcert.probes.kinds.Fresh` answer is returned with ``fresh`` False, so its
    evaluations are charged to the probe that asked first (docs/probes.md §5).  A call that does not fit in
    the memory available is retried with half as many items (:func:`jaxcert.core.batching.check_fits`;
    docs/architecture.md "Memory").
    """
    def one(req):
        lead, n, flat = _flatten_items(req)
        mkey = _memo_key(req) if req.kind not in kinds.CHUNKED else None
        if mkey is not None and mkey in memo:
            out = jax.tree.map(lambda f: f._replace(fresh=np.zeros_like(f.fresh)) if isinstance(f, kinds.Fresh)
                               else f, memo[mkey], is_leaf=lambda x: isinstance(x, kinds.Fresh))
        else:
            run = _kernel(model, req.kind, req.options)
            parts, _ = batching.in_chunks(n, _chunk(model, req.kind, n), lambda lo, hi, width: jax.tree.map(
                _host, _call(run, _padded_chunk(flat, n, lo, width))))
            out = parts[0] if len(parts) == 1 else jax.tree.map(lambda *xs: np.concatenate(xs), *parts)
            out = jax.tree.map(lambda x: x[:n], out)
            if mkey is not None:
                memo[mkey] = out
        return jax.tree.map(lambda x: x.reshape((*lead, *x.shape[1:])), out)

    return jax.tree.map(one, requests, is_leaf=lambda x: isinstance(x, kinds.Request))


#: (program, input signature) -> compiled executable, least recently used first; filled by the compile-ahead
#: threads and on demand.
_EXECUTABLES: collections.OrderedDict[Any, Any] = collections.OrderedDict()
_EXECUTABLES_LOCK = threading.Lock()
#: keys of :data:`_EXECUTABLES` whose executable the store holds too (loaded from it or saved to it)
_STORED: set[Any] = set()
#: How many executables the store can give back are kept in memory; the least recently used beyond are dropped
#: and loaded again when next needed.  A loaded executable holds far more memory than its stored bytes (about
#: 55 MB for a program of nequix-mp-1-pft against 5-10 MB on disk): keeping every program of a run resident
#: held 3-4 GB of a network's certification (docs/performance.md "Networks").
RESIDENT_STORED = 12


def _keep_executable(key: Any, exe: Any, stored: bool) -> Any:
    """Keep ``exe`` under ``key`` (the first one kept wins) and drop the least recently used stored ones beyond
    :data:`RESIDENT_STORED`."""
    with _EXECUTABLES_LOCK:
        if len(_EXECUTABLES) > 256:
            _EXECUTABLES.clear()
            _STORED.clear()
        exe = _EXECUTABLES.setdefault(key, exe)
        _EXECUTABLES.move_to_end(key)
        if stored:
            _STORED.add(key)
        _STORED.intersection_update(_EXECUTABLES)  # keys of entries cleared elsewhere (tests, the size cap)
        resident = [k for k in _EXECUTABLES if k in _STORED]
        for k in resident[: max(0, len(resident) - RESIDENT_STORED)]:
            del _EXECUTABLES[k]
            _STORED.discard(k)
    return exe


def _signature(args: tuple) -> tuple:
    leaves, treedef = jax.tree_util.tree_flatten(args)
    return treedef, tuple((tuple(x.shape), str(x.dtype)) for x in leaves)


def _executable(run, args: tuple):
    """The compiled executable of jitted ``run`` for the shapes and dtypes of ``args`` (compiled once).

    With the executable store on (:func:`jaxcert.core.cache.enable_compilation_cache`, as the CLI does), a
    program stored by an earlier process is loaded without tracing, and a new one is stored. A program
    that will be stored is compiled past JAX's persistent cache (:func:`jaxcert.core.cache.persistent_cache_bypassed`):
    jaxlib 0.10 cannot serialise again an executable it loaded from that cache (its kernels are missing at
    run time).
    """
    key = (run, _signature(args))
    with _EXECUTABLES_LOCK:
        exe = _EXECUTABLES.get(key)
        if exe is not None:
            _EXECUTABLES.move_to_end(key)
    if exe is None:
        store = cache.executable_store()
        identity = _IDENTITY.get(id(run))
        skey = store.key(identity, args) if store is not None and identity is not None else None
        exe = store.load(skey, args) if skey is not None else None
        loaded = exe is not None
        stored = loaded
        if loaded:
            _FROM_STORE[key] = skey
        elif skey is not None:
            with cache.persistent_cache_bypassed() as fresh:
                exe = run.lower(*args).compile()
            stored = bool(fresh.storable and store.save(skey, exe))
        else:
            exe = run.lower(*args).compile()
        exe = _keep_executable(key, exe, stored)
        if not loaded:  # compiled here: JAX's own copies go, and the compiler's freed heap back to the system
            compilation.release_compiled()
            compilation.trim_heap()
    return exe


#: (program, signature) -> store key, for executables that were loaded from the store
_FROM_STORE: dict[Any, str] = {}


def _call(run, args: tuple):
    """Run the executable of ``run`` on ``args``; a stored executable that fails to run is dropped and recompiled."""
    exe = _executable(run, args)
    batching.check_fits(exe)
    try:  # wait for the result here: a missing kernel is reported when the computation runs, not when dispatched
        return jax.block_until_ready(exe(*args))
    except Exception as err:
        key = (run, _signature(args))
        skey = _FROM_STORE.pop(key, None)
        if skey is None or batching.out_of_memory(err):
            raise
        cache.executable_store().discard(skey)
        with _EXECUTABLES_LOCK:
            _EXECUTABLES.pop(key, None)
            _STORED.discard(key)
        return _executable(run, args)(*args)


def _out_shape(run, args: tuple):
    """Output shapes and dtypes of ``run`` on ``args``: from a stored executable if there is one, else traced."""
    if _in_store(run, args):
        info = _executable(run, args).out_info
        return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), info)
    return jax.eval_shape(run, *args)


class _Ahead:
    """Futures of the programs compiled ahead of their probe's turn (:func:`_compile_ahead`)."""

    def __init__(self, pool: concurrent.futures.ThreadPoolExecutor | None):
        self.pool = pool
        self.futures: dict[str, concurrent.futures.Future] = {}

    def pending(self, name: str) -> bool:
        """True while the probe's programs are still being compiled ahead."""
        fut = self.futures.get(name)
        return fut is not None and not fut.done()

    def wait(self, name: str) -> None:
        fut = self.futures.pop(name, None)
        if fut is not None:
            fut.exception()  # a failure ahead is raised again, the same way, by the on-demand path

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def compile_workers_default() -> int:
    """``$JAXCERT_COMPILE_WORKERS`` if set, else the CPU count capped at 4."""
    env = os.environ.get("JAXCERT_COMPILE_WORKERS")
    if env is not None:
        return inputs.integer("JAXCERT_COMPILE_WORKERS", env, minimum=0)
    return min(4, os.cpu_count() or 1)


def _compile_ahead(model: Model, names: list[str], configs: dict[str, Any], batch_for, elements, seed: int,
                   share_trajectory: bool, workers: int | None) -> _Ahead:
    """Trace and compile the programs of this run in worker threads, in run order.

    Inputs are built here (in the calling thread). For a probe with a plan, each task walks its stages on
    abstract values (:func:`jax.eval_shape`): stage 0 on the keys and substrates, then the kernels of its
    requests on the chunk shapes they will get, then the next stage on the answers' shapes, and compiles each
    program into :data:`_EXECUTABLES` (a kernel shared with an earlier probe is found there). A probe without
    a plan compiles its one program. The run stays sequential and looks executables up by signature, so a
    prediction that does not match only means that program compiles on demand.
    """
    workers = compile_workers_default() if workers is None else inputs.integer("compile_workers", workers,
                                                                              minimum=0)
    if workers == 0 or not names:
        return _Ahead(None)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jaxcert-compile")
    ahead = _Ahead(pool)
    for name in names:
        spec = PROBES[name]
        cfg = configs.get(name, spec.config())
        if spec.structures is not None:  # named structures: compiled per group when the probe runs
            continue
        try:
            batch = batch_for(spec.substrate)
        except (Exception, SystemExit):  # noqa: BLE001 - the run reports it when the probe's turn comes
            continue
        keys = probe_keys(seed, _stream(spec, share_trajectory), len(elements))
        if spec.plan is None:
            run = _compiled(model, spec, cfg, ())
            if not _in_store(run, (keys, batch)):
                ahead.futures[name] = pool.submit(_executable, run, (keys, batch))
        else:
            ahead.futures[name] = pool.submit(_walk_abstract, model, spec, cfg, keys, batch)
    return ahead


def _in_store(run, args: tuple) -> bool:
    """True if the executable store holds ``run`` for ``args`` (nothing loaded, nothing compiled)."""
    store = cache.executable_store()
    identity = _IDENTITY.get(id(run))
    if store is None or identity is None:
        return False
    skey = store.key(identity, args)
    return skey is not None and store.has(skey)


def _abstract(tree: Any) -> Any:
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), tree)


def _walk_abstract(model: Model, spec, cfg, keys: jax.Array, batch: Structure) -> None:
    """Compile every program of the probe's plan on abstract inputs (see :func:`_compile_ahead`)."""
    facts = stages.facts_of(model)
    fns = spec.plan(cfg, facts)
    args: tuple = (keys, batch)
    for k in range(len(fns)):
        run = _stage_program(spec, cfg, facts, k, fns)
        if k == 0 and _in_store(run, args):
            # a warm run: the probe's programs are stored; loading them all ahead would keep every program of the
            # run resident at once (RESIDENT_STORED) and load most twice, so they load on demand, in run order
            return
        _executable(run, args)
        if k == len(fns) - 1:
            return
        out = _abstract(_out_shape(run, args))  # as the run passes them: host arrays, never weakly typed
        args = (out.state, jax.tree.map(lambda r: _abstract_answer(model, r), out.requests,
                                        is_leaf=lambda x: isinstance(x, kinds.Request)))


def _abstract_answer(model: Model, req) -> Any:
    """Compile the request's kernel for the chunk shape it will get and return its answer's abstract shape."""
    lead_nd = 1 + req.batch_ndim
    lead = tuple(jax.tree.leaves(req.args)[0].shape[:lead_nd])
    n = int(np.prod(lead))
    size = _chunk(model, req.kind, n)
    chunk = jax.tree.map(lambda x: jax.ShapeDtypeStruct((size, *x.shape[lead_nd:]), x.dtype), req.args)
    run = _kernel(model, req.kind, req.options)
    _executable(run, chunk)
    out = _out_shape(run, chunk)
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct((*lead, *x.shape[1:]), x.dtype), out)
