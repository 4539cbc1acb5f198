r"""Certification as a pytest assertion, for model repositories (docs/board.md, "In your own tests and CI").

::

    from jaxcert.testing import assert_certified

    def test_my_potential_is_certified():
        assert_certified(my_model(), ["Si", "C"], probes=["conservativeness", "equivariance", "betti"])

:func:`assert_certified` runs :func:`jaxcert.certify` and raises :class:`AssertionError` when a gate
failed or a probe crashed.  The message has one entry per failed (probe, element): the probe, the
element, the defect, the threshold the gate compares it with (the probe config's ``gate*`` fields),
the score, and the one-sentence meaning of the probe (:mod:`jaxcert.report.explain`)::

    jaxcert: model 'lj+curl' failed 2 gates (seed 0, float64):
      conservativeness on Si: defect 1.07 (target 0), threshold gate_threshold = 0.25, score 0.0312
        Along a bond stretch the force output equals minus the slope of the energy, F_j·û = −dE/ds; a failure
        means forces and energy disagree, ...

The statistical probes have no gate (docs/probes.md §3) and never fail this assertion.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from jaxcert.core.inputs import InputError
from jaxcert.probes.base import NOT_RUN, PROBES
from jaxcert.probes.suite import certify, resolve_probes
from jaxcert.report.explain import explain

__all__ = ["assert_certified", "gate_thresholds", "failures"]


def gate_thresholds(config: Any) -> dict[str, float]:
    """The thresholds a probe's gate compares with: the config fields whose name starts with ``gate``."""
    if not dataclasses.is_dataclass(config):
        return {}
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name.startswith("gate")}


def _num(x: Any) -> str:
    return "nan" if x is None else f"{float(x):.3g}"


def failures(report: Any, gates: Sequence[str] | None = None, configs: Mapping[str, Any] | None = None
             ) -> list[str]:
    """One entry per (probe, element) of ``report`` whose gate failed or that crashed (module docstring);
    ``gates`` limits the check to these probes (default: every gated probe of the report)."""
    configs = dict(configs or {})
    out = []
    for o in report.outcomes:
        if gates is not None and o.name not in gates:
            continue
        cfg = configs.get(o.name, PROBES[o.name].config())
        thr = ", ".join(f"{k} = {v:g}" for k, v in gate_thresholds(cfg).items()) or "none recorded"
        why = "\n".join(textwrap.wrap(explain(o.name), width=100, initial_indent="    ", subsequent_indent="    "))
        for k, el in enumerate(o.elements):
            st = o.status[k]
            if st in NOT_RUN:
                continue
            if st == "error":
                msg = (o.details[k].get("error") if isinstance(o.details[k], dict) else None) or o.message
                out.append(f"  {o.name} on {el}: crashed: {msg}\n{why}")
            elif o.gated and not bool(o.gate[k]):
                out.append(f"  {o.name} on {el}: defect {_num(o.defect[k])} (target {o.target:g}), threshold {thr}, "
                           f"score {_num(o.score[k])}" + (" (non-finite output)" if st == "non-finite" else "")
                           + f"\n{why}")
    return out


def assert_certified(model: Any, elements: str | Sequence[str], probes: str | Sequence[str] | None = None,
                     gates: Sequence[str] | Mapping[str, Mapping[str, float]] | None = None, seed: int = 0,
                     dtype: Any = None, skip_unsupported: bool = False) -> Any:
    """Certify ``model`` on ``elements`` and raise :class:`AssertionError` naming every failed gate.

    Args:
      model: a :class:`jaxcert.Model`, or a model spec (``"lj"``, ``"nequix:PATH.nqx"``; docs/cli.md).
      elements: element symbols (list or comma-separated).
      probes: the probes to run (names, or ``"all"``); default: the probes named by ``gates``, or all.
      gates: which gates must pass: ``None`` every gated probe that ran; a list of probe names; or a mapping
        probe → threshold overrides, e.g. ``{"conservativeness": {"gate_threshold": 0.05}}`` (the keys are
        the probe config's ``gate*`` fields; see :func:`gate_thresholds`).
      seed, dtype, skip_unsupported: as :func:`jaxcert.certify`.

    Returns:
      The :class:`~jaxcert.report.certification.Report` (to assert more on it).

    Raises:
      AssertionError: a gate failed or a probe crashed (the message: module docstring).
      InputError: a bad model spec, element, probe, gate name or threshold.
    """
    if isinstance(model, str):
        from jaxcert.specs import load_model

        model = load_model(model)
    configs: dict[str, Any] = {}
    checked: list[str] | None = None
    if gates is not None:
        checked = resolve_probes(list(gates), "gates")
        for name in checked:
            if not PROBES[name].gated:
                raise InputError(f"gates: probe {name!r} has no gate (scored only; docs/probes.md §3)")
        if isinstance(gates, Mapping):
            for name, over in gates.items():
                cfg = PROBES[name].config()
                known = gate_thresholds(cfg)
                bad = [k for k in over if k not in known]
                if bad:
                    raise InputError(f"gates[{name!r}]: unknown threshold {bad[0]!r}; allowed: {', '.join(known)}")
                configs[name] = dataclasses.replace(cfg, **{k: float(v) for k, v in over.items()})
    names = resolve_probes(probes if probes is not None else (checked or "all"), "probes")
    missing = [n for n in (checked or []) if n not in names]
    if missing:
        raise InputError(f"gates: {', '.join(missing)} not among the probes run ({', '.join(names)})")
    report = certify(model, elements, probes=names, seed=seed, dtype=dtype, configs=configs,
                     skip_unsupported=skip_unsupported)
    found = failures(report, checked, configs)
    if found:
        n = len(found)
        raise AssertionError(f"jaxcert: model {report.model['name']!r} failed {n} gate{'s' * (n != 1)} "
                             f"(seed {seed}, {report.dtype}):\n" + "\n".join(found))
    return report
