"""The map of rooms (docs/architecture.md, "Rooms") and its import rules, checked on the source.

Every ``import`` of a jaxcert module counts, including those inside functions: a lazy import is still a
dependency.  Each room may import only the rooms listed for it in ``ALLOWED``; the report room imports no JAX;
at most twelve modules sit directly under ``jaxcert/``.  The checker itself is tested on a planted upward
import, so a rule that silently stopped matching would fail here.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "jaxcert"

#: room -> the rooms its modules may import (besides itself).  Rooms are the sub-packages of jaxcert and the
#: few top-level modules; "core.inputs", "core.result" and "core.files" are the modules of a room allowed on their
#: own (the report room needs the input boundary's InputError, the one Status/to_jsonable and the safe file
#: writer; none imports JAX).
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "adapters": {"core"},
    "optim": {"core"},
    "report": {"core.inputs", "core.result", "core.files"},
    "models": {"core", "adapters"},
    "datasets": set(),
    "probes": {"core", "optim", "report"},
    "attacks": {"core", "adapters", "optim", "report", "_version"},
    "controls": {"core", "datasets", "models", "optim", "report"},
    "detective": {"core", "models", "optim", "probes", "report", "controls"},
    "repair": {"core", "probes", "detective"},
    "specs": {"core", "models"},
    "checkpoint": {"core", "probes", "report"},
    "board": {"core", "models", "specs", "checkpoint", "probes", "report"},
    "testing": {"core", "probes", "report", "specs"},
    "_lam": {"core", "probes", "report"},
    "progress": set(),
    "_version": set(),
    "cli": {"*"},
    "__init__": {"*"},
}
NO_JAX = {"report", "jaxcert.core.inputs", "jaxcert.core.result", "jaxcert.core.files"}  # rooms, or single modules


def room_of(module: str) -> str:
    """``jaxcert.core.model`` -> ``core``; ``jaxcert.specs`` -> ``specs``; ``jaxcert`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``tree``; ``from jaxcert.core import x`` counts as
    ``jaxcert.core.x`` (a submodule or a name of the package: the room is the same)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, "." * node.level + (node.module or "")))
    return out


def violations(module: str, source: str) -> list[str]:
    """The import-rule violations of one module's source."""
    room = room_of(module)
    if room not in ALLOWED:
        return [f"{module}: room {room!r} has no rule in ALLOWED"]
    allowed = ALLOWED[room]
    out = []
    for line, name in imported(ast.parse(source)):
        top = name.split(".")[0]
        if name.startswith("."):
            out.append(f"{module}:{line}: relative import {name!r} (use the absolute path)")
        elif top in ("jax", "jaxlib") and (room in NO_JAX or module in NO_JAX):
            out.append(f"{module}:{line}: imports {name} (the {room} room imports no JAX)")
        elif top == "jaxcert":
            target = room_of(name)
            if name in ("jaxcert.__version__",):
                target = "_version"
            ok = ("*" in allowed or target == room or target in allowed
                  or any(name == f"jaxcert.{a}" or name.startswith(f"jaxcert.{a}.") for a in allowed if "." in a))
            if not ok:
                out.append(f"{module}:{line}: imports {name} (room {target!r}; {room!r} may import "
                           f"{sorted(allowed) or 'no other room'})")
    return out


def _modules() -> list[tuple[str, pathlib.Path]]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 2:
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


def test_every_module_follows_the_import_rules_of_its_room():
    found = [v for module, path in _modules() for v in violations(module, path.read_text())]
    assert not found, "\n".join(found)


def test_at_most_twelve_modules_directly_under_the_package():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 12, top


@pytest.mark.parametrize(("module", "source", "expect"), [
    ("jaxcert.core.model", "from jaxcert.core.structure import Structure\n", None),
    ("jaxcert.core.model", "def f():\n    from jaxcert.adapters import nequix\n", "room 'adapters'"),
    ("jaxcert.core.model", "import jaxcert.probes.suite\n", "room 'probes'"),
    ("jaxcert.report.html", "from jaxcert.core.inputs import InputError\n", None),
    ("jaxcert.report.html", "from jaxcert.core.model import Model\n", "room 'core'"),
    ("jaxcert.report.html", "def f():\n    import jax\n", "imports no JAX"),
    ("jaxcert.optim.relax", "from . import fire\n", "relative import"),
    ("jaxcert.core.result", "import jax.numpy as jnp\n", "imports no JAX"),
    ("jaxcert.core.model", "import jax.numpy as jnp\n", None),
    ("jaxcert.newroom.x", "", "has no rule"),
])
def test_the_checker_finds_a_planted_violation(module, source, expect):
    found = violations(module, source)
    if expect is None:
        assert found == []
    else:
        assert len(found) == 1 and expect in found[0], found
