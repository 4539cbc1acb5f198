"""The import graph: no cycle among jaxcert modules (imports inside functions count), and every module
imports on its own as the first jaxcert module of a process, giving a module (not a shadowing function)."""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "jaxcert"


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] == "__main__":
            continue
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """jaxcert modules imported anywhere in the file (top level or inside functions)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n and n != name:
                found.add(n)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    mods = _modules()
    # a package's __init__ is not an edge target for its own submodules' imports of siblings
    graph = {m: {d for d in _imports(m, p, set(mods)) if not m.startswith(d + ".")} for m, p in mods.items()}
    assert _cycles(graph) == []


def test_cycle_detector_finds_a_planted_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: Runs in a separate process: importing every module afresh re-registers pytree classes with JAX, which must not
#: happen in the test process (its later compilations would see two registrations of each class).
_CHILD = r"""
import importlib, json, sys, types
names = json.loads(sys.argv[1])
out = {}
import jax, numpy, ase  # third-party packages stay cached; only jaxcert modules are imported afresh
for name in names:
    for k in [k for k in sys.modules if k == "jaxcert" or k.startswith("jaxcert.")]:
        del sys.modules[k]
    try:
        mod = importlib.import_module(name)
        parent, _, leaf = name.rpartition(".")
        attr = getattr(sys.modules[parent], leaf) if parent else mod
        out[name] = "ok" if isinstance(attr, types.ModuleType) else "shadowed by " + type(attr).__name__
    except Exception as err:
        out[name] = f"{type(err).__name__}: {err}"
print(json.dumps(out))
"""


def test_every_module_imports_first_and_is_a_module():
    """Each module imported with no jaxcert module loaded yet gives a module, not a shadowing attribute."""
    import json
    import os
    import subprocess

    names = sorted(_modules())
    res = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(names)], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert {k: v for k, v in got.items() if v != "ok"} == {}
