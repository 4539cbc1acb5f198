"""Reports and boards without what differs between two runs by the clock (wall times, the machine's load,
measured throughput, what was compiled or loaded from the caches): what the resume, board and worker tests compare."""

from typing import Any

#: keys whose values come from the clock or the machine, not from the certification
VOLATILE = ("wall_s", "wall_time_s", "machine", "throughput", "evals_per_s", "atom_steps_per_s",
            "atom_steps_per_s_stdev", "compilation", "finished_utc", "computed_at")


def stable(doc: Any) -> Any:
    """``doc`` with every ``VOLATILE`` key removed at any depth."""
    if isinstance(doc, dict):
        return {k: stable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stable(v) for v in doc]
    return doc
