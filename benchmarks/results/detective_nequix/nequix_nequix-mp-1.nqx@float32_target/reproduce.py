#!/usr/bin/env python3
"""Minimal reproduction of the escalated finding (jaxcert detective, docs/detective.md §5.5).

Rebuilds the target and committee from their specs, re-runs the protocol on the escalated regions with the
scope-probe settings and prints the headline numbers of report.md.  Runs in minutes on a CPU:

    python3 reproduce.py
"""
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", False)

from jaxcert.detective import Committee, headline, make_protocol  # noqa: E402
from jaxcert.specs import load_model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    with open(os.path.join(HERE, "escalation.json")) as fh:
        esc = json.load(fh)
    try:
        models = [load_model(spec) for spec in esc["specs"]]
    except Exception as err:  # a model given as a Python object has no spec: edit esc["specs"]
        print(f"cannot rebuild the models from {esc['specs']}: {err}", file=sys.stderr)
        return 2
    committee = Committee(models[0], models[1:], specs=esc["specs"])
    protocol = make_protocol(esc["protocol"], esc["protocol_config"])
    cells = protocol.run(committee, esc["reproduce"]["regions"], variant=esc["reproduce"]["variant"])
    # members the robustness probe excluded (image interactions larger than the signal), as in the report
    exclude = esc["reproduce"].get("exclude") or {}
    cells = [protocol.rejudge(c, committee.target_name, exclude[c.key]) if exclude.get(c.key) else c
             for c in cells]
    name = esc.get("observable_name")
    obs = protocol.observable_named(name) if name else None
    print(f"{esc['protocol']}: {obs.description if obs else protocol.observable}")
    for cell in cells:
        print(headline(cell, committee.names, protocol.unit, obs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
