"""The report room: what a run's results look like to a person or a program; NumPy only, no JAX.

``certification`` (the certify :class:`Report`: strict JSON, terminal table, HTML page), ``schema`` (reading
report files back), ``summary`` (score aggregation, standard errors, formatting, :func:`to_jsonable`),
``html``, ``explain`` (one sentence per probe) and ``compare`` (the comparison board).  See docs/reports.md.

Rule (checked by ``tests/test_architecture.py``): imports no JAX, and of jaxcert only this room and
:mod:`jaxcert.core.inputs` (the input boundary's :class:`InputError`).
"""

from jaxcert.report.certification import (
    SCHEMA,
    Report,
    combined_stderr,
    format_defect,
    package_versions,
    probe_stderr,
    to_jsonable,
)

__all__ = ["Report", "to_jsonable", "SCHEMA", "package_versions", "format_defect", "combined_stderr",
           "probe_stderr"]
