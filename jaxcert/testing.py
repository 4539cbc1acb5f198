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
    ``gates`` limits the check to these probes (default: every gated probe of the report).

    The verdicts are the report's gate profile's (:meth:`Report.verdicts`), except for a probe whose
    thresholds ``configs`` overrides: that probe's own gate with the user's thresholds decides."""
    configs = dict(configs or {})
    verdicts = report.verdicts()
    out = []
    for o in report.outcomes:
        if gates is not None and o.name not in gates:
            continue
        override = o.name in configs
        thr = ", ".join(f"{k} = {v:g}" for k, v in gate_thresholds(configs[o.name]).items()) if override else ""
        why = "\n".join(textwrap.wrap(explain(o.name), width=100, initial_indent="    ", subsequent_indent="    "))
        for k, el in enumerate(o.elements):
            st = o.status[k]
            v = verdicts[o.name][k]
            if st in NOT_RUN:
                continue
            if st == "error":
                out.append(f"  {o.name} on {el}: {v.reason or 'crashed'}\n{why}")
                continue
            failed = (o.gated and not bool(o.gate[k])) if override else v.passed is False
            if failed:
                threshold = thr if override else f"{v.threshold} ({report.profile} profile, {report.precision})"
                out.append(f"  {o.name} on {el}: defect {_num(o.defect[k])} (target {o.target:g}), threshold "
                           f"{threshold}, score {_num(o.score[k])}"
                           + (f"\n    reason: {v.reason}" if v.reason and not override else "")
                           + (" (non-finite output)" if st == "non-finite" else "") + f"\n{why}")
    return out


def _check_arguments(model: Any, elements: Any, probes: Any, gates: Any, seed: Any, dtype: Any,
                     skip_unsupported: Any) -> None:
    """:func:`assert_certified`'s own arguments, before anything runs: :class:`TypeError` for a wrong type,
    :class:`~jaxcert.core.inputs.InputError` (a :class:`ValueError`) for a bad value, each naming the argument
    (``assert_certified: elements must be ...``)."""
    import math
    import numbers

    import jax.numpy as jnp

    from jaxcert.core import inputs
    from jaxcert.core.model import Model

    at = "assert_certified"

    def shown(value: Any) -> str:
        text = repr(value)
        return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"

    def strings(value: Any) -> bool:  # a str, or a list/tuple of str
        return isinstance(value, str) or (isinstance(value, Sequence) and not isinstance(value, bytes | bytearray)
                                          and all(isinstance(v, str) for v in value))

    if not isinstance(model, Model | str):
        raise TypeError(f"{at}: model must be a jaxcert.Model or a model spec str ('lj', 'nequix:PATH.nqx'); "
                        f"got {shown(model)}")
    if isinstance(model, str) and not model.strip():
        raise InputError(f"{at}: model: got {model!r}; allowed: a model spec ('lj', 'nequix:PATH.nqx', module:attr)")
    if not strings(elements):
        raise TypeError(f"{at}: elements must be element symbols, a str ('Si' or 'Si,C') or a list of str "
                        f"(['Si', 'C']); got {shown(elements)}")
    inputs.elements(f"{at}: elements", elements)
    if probes is not None:
        if not strings(probes):
            raise TypeError(f"{at}: probes must be None, 'all', a str of comma-separated probe names or a list of "
                            f"str; got {shown(probes)}")
        resolve_probes(probes, f"{at}: probes")
    if gates is not None:
        if isinstance(gates, Mapping):
            for name, over in gates.items():
                if not isinstance(name, str) or not isinstance(over, Mapping):
                    raise TypeError(f"{at}: gates must map a probe name (str) to its threshold overrides (a dict "
                                    f"such as {{'gate_threshold': 0.05}}); got {shown(name)}: {shown(over)}")
                for key, v in over.items():
                    if not isinstance(key, str) or isinstance(v, bool) or not isinstance(v, numbers.Real):
                        raise TypeError(f"{at}: gates[{name!r}] must map a threshold name (str) to a number; got "
                                        f"{shown(key)}: {shown(v)}")
                    if not (math.isfinite(float(v)) and float(v) > 0):
                        raise InputError(f"{at}: gates[{name!r}][{key!r}]: got {v!r}; allowed: a finite number > 0")
        elif isinstance(gates, str) or not strings(gates):
            hint = f" (write [{gates!r}])" if isinstance(gates, str) else ""
            raise TypeError(f"{at}: gates must be None, a list of probe names or a mapping probe -> threshold "
                            f"overrides; got {shown(gates)}{hint}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{at}: seed must be an int in [0, 2**31 - 1]; got {shown(seed)}")
    inputs.seed(f"{at}: seed", int(seed))
    if dtype is not None:
        try:
            dt = jnp.dtype(dtype)
        except TypeError:
            raise TypeError(f"{at}: dtype must be None, 'float32' or 'float64' (or the numpy/jax type); got "
                            f"{shown(dtype)}") from None
        if dt not in (jnp.dtype("float32"), jnp.dtype("float64")):
            raise InputError(f"{at}: dtype: got {dt}; allowed: float32, float64 (None: JAX's default)")
    if not isinstance(skip_unsupported, bool) and type(skip_unsupported).__name__ != "bool_":
        raise TypeError(f"{at}: skip_unsupported must be a bool; got {shown(skip_unsupported)}")


def assert_certified(model: Any, elements: str | Sequence[str], probes: str | Sequence[str] | None = None,
                     gates: Sequence[str] | Mapping[str, Mapping[str, float]] | None = None, seed: int = 0,
                     dtype: Any = None, skip_unsupported: bool = False, profile: str = "exact") -> Any:
    """Certify ``model`` on ``elements`` and raise :class:`AssertionError` naming every failed gate.

    Args:
      model: a :class:`jaxcert.Model`, or a model spec (``"lj"``, ``"nequix:PATH.nqx"``; docs/cli.md).
      elements: element symbols (list or comma-separated).
      probes: the probes to run (names, or ``"all"``); default: the probes named by ``gates``, or all.
      gates: which gates must pass: ``None`` every gated probe that ran; a list of probe names; or a mapping
        probe → threshold overrides, e.g. ``{"conservativeness": {"gate_threshold": 0.05}}`` (the keys are
        the probe config's ``gate*`` fields; see :func:`gate_thresholds`).
      seed, dtype, skip_unsupported: as :func:`jaxcert.certify`.
      profile: the gate profile (:mod:`jaxcert.report.gates`): ``"exact"`` (default: thresholds at the
        floating-point floor of the model's precision, so a force head off by a constant factor fails) or
        ``"reference"`` (the published finite-difference board's gates).

    Returns:
      The :class:`~jaxcert.report.certification.Report` (to assert more on it).

    Raises:
      AssertionError: a gate failed or a probe crashed (the message: module docstring).
      TypeError: an argument of the wrong type (the message names it).
      InputError: a bad model spec, element, probe, gate name or threshold (a ``ValueError``).
    """
    _check_arguments(model, elements, probes, gates, seed, dtype, skip_unsupported)
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
                     skip_unsupported=skip_unsupported, gates=profile)
    found = failures(report, checked, configs)
    if found:
        n = len(found)
        raise AssertionError(f"jaxcert: model {report.model['name']!r} failed {n} gate{'s' * (n != 1)} "
                             f"(seed {seed}, {report.dtype}, {report.profile} gates):\n" + "\n".join(found))
    return report
