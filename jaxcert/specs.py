"""Model specs: the text a user gives for a model (``--model``, ``--target``, ``--committee``) → a :class:`Model`.

One resolver for every command (docs/cli.md, "Model specs"):

* a registered name (``jaxcert.models.available()``: ``lj``, ``emt``, ``jax-sevennet``, ...);
* a registry spec with arguments (``jax-sevennet:7net-mf-0:PBE@float32``, ``nequix:PATH.nqx``;
  :func:`jaxcert.models.from_spec`);
* a bridged model (needs jaxcert-bridges): ``chgnet[:VERSION]``, ``torch-sevennet[:CHECKPOINT[:MODAL]]``,
  ``mace:PATH``, ``orb:PATH``, ``fairchem:PATH``, ``ase:module:attr``, with options after ``@``
  (``chgnet@float64,fd``);
* ``module:attr``: your own :class:`Model`, or a zero-argument factory returning one.

SevenNet has two implementations, so its spellings name the implementation: ``jax-sevennet`` is the native JAX
model (:mod:`jaxcert.models.sevennet`), ``torch-sevennet`` the torch bridge.  The old spelling ``sevennet[:...]``
still means the torch bridge and emits one :class:`SpellingWarning` (``jaxcert`` prints it as one
``jaxcert: warning:`` line).

Every failure that comes from the spec or the files it names is an :class:`~jaxcert.core.inputs.InputError` naming
``--model``.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import Any

from jaxcert import models
from jaxcert.core import inputs
from jaxcert.core.model import Model

__all__ = ["BRIDGED", "SpellingWarning", "canonical_spec", "canonical_specs", "load_model", "load_user_model",
           "apply_defects", "apply_max_batch"]

#: Heads of the bridged specs (the torch / ASE models of jaxcert-bridges), as this resolver spells them.
BRIDGED = ("chgnet", "torch-sevennet", "mace", "orb", "fairchem", "ase")
#: Old spellings of bridged heads → the head they mean (accepted with one :class:`SpellingWarning`).
BRIDGED_ALIASES = {"sevennet": "torch-sevennet"}
#: How each bridged head is spelled for :func:`jaxcert_bridges.load`.
_BRIDGES_HEAD = {"torch-sevennet": "sevennet"}


class SpellingWarning(DeprecationWarning):
    """An old, ambiguous spelling was resolved; the message gives the unambiguous one."""


def _head(spec: str) -> str:
    return spec.split(":", 1)[0].split("@", 1)[0]


def canonical_spec(spec: str, name: str = "--model") -> tuple[str, str | None]:
    """``(spec in its unambiguous spelling, warning or None)``: ``sevennet:7net-0`` →
    ``("torch-sevennet:7net-0", "--model sevennet:7net-0 is the torch bridge; spell it torch-sevennet:7net-0 ...")``
    (the warning names the argument ``name``); every other spec is returned unchanged with no warning."""
    head = _head(spec)
    if head not in BRIDGED_ALIASES:
        return spec, None
    new = BRIDGED_ALIASES[head] + spec[len(head):]
    native = "jax-sevennet" + spec[len(head):].partition("@")[0]
    return new, (f"{name} {spec} is the torch bridge; spell it {new} (the native JAX model is {native})")


def canonical_specs(name: str, values: Any, *, warn: bool = True) -> tuple[str, ...]:
    """A list of model specs (``--models``, ``--panel``, ``--committee``; through
    :func:`jaxcert.core.inputs.name_list`) in their unambiguous spellings; each old spelling emits one
    :class:`SpellingWarning` naming ``name`` unless ``warn`` is False (a library default spelled the old way)."""
    out = []
    for spec in inputs.name_list(name, values, what="models"):
        new, note = canonical_spec(spec, name)
        if note is not None and warn:
            warnings.warn(note, SpellingWarning, stacklevel=2)
        out.append(new)
    return tuple(out)


def load_model(spec: str, defects: list[str] | None = None, max_batch: str | int | None = None) -> Model:
    """Resolve a model spec (module docstring), then apply ``defects`` (``name=strength`` wrappers, in order,
    :func:`apply_defects`) and ``max_batch`` (a positive integer, or ``"none"`` for no limit, over the model's
    own :attr:`~jaxcert.Model.max_batch`; :func:`apply_max_batch`).

    Raises:
      InputError: the spec, a defect or ``max_batch`` is not valid, or loading what the spec names failed.
    """
    given = spec
    spec, note = canonical_spec(spec)
    if note is not None:
        warnings.warn(note, SpellingWarning, stacklevel=2)
    head = _head(spec)
    if head in BRIDGED:
        model = _load_bridged(spec, head, given)
    elif head in models.spec_heads():  # registry specs with arguments: jax-sevennet:7net-mf-0:PBE@float32
        try:
            model = models.from_spec(spec)
        except (ValueError, ImportError) as err:  # bad spec, or a missing optional dependency / weights
            raise inputs.InputError(f"--model {spec!r}: {err}") from None
    elif spec in models.available():
        model = models.get(spec)
    elif ":" in spec:
        model = load_user_model(spec)
    else:
        raise inputs.InputError(_unknown_model(spec))
    model = apply_defects(model, defects)
    return apply_max_batch(model, max_batch)


def _unknown_model(spec: str) -> str:
    """The message for a spec that names nothing, with what the user probably meant: ``mine.model`` →
    ``mine:model``, a ``.py`` path → ``PATH.py:model``, a misspelt name → the closest registered one."""
    known = f"registered: {', '.join(models.available())}; or give module:attr for your own jaxcert.Model"
    if len(spec) > inputs.SHOWN_CHARS:  # named by its start and length (inputs.shown), no guess
        return f"--model: unknown model {inputs.shown(spec)}; {known}"
    if spec.endswith(".py"):
        folder, base = os.path.split(spec)
        where = f" run from {folder!r}" if folder else ""
        return (f"--model: unknown model {spec!r}: a Python file needs the attribute that holds your jaxcert.Model "
                f"(or a factory): did you mean {spec}:model (file:attribute), or {base[:-3]}:model (module:attribute)"
                f"{where}?")
    mod, dot, attr = spec.rpartition(".")
    if dot and all(p.isidentifier() for p in spec.split(".")):
        return f"--model: unknown model {spec!r}; did you mean {mod}:{attr} (module:attribute)? {known}"
    names = [*models.available(), *models.spec_heads(), *BRIDGED]
    return f"--model: unknown model {spec!r}{inputs.did_you_mean(spec, names)}; {known}"


def _load_bridged(spec: str, head: str, given: str) -> Model:
    """``spec`` (canonical spelling) through :func:`jaxcert_bridges.load`; messages name ``given`` (as typed)."""
    try:
        bridges = importlib.import_module("jaxcert_bridges")
    except ImportError:
        raise inputs.InputError(
            f"--model {given!r} needs the bridges: pip install -e bridges/ (distribution jaxcert-bridges); "
            "see docs/install.md, section 2 'The bridges (PyTorch models)'"
        ) from None
    theirs = _BRIDGES_HEAD.get(head, head) + spec[len(head):]
    try:
        return bridges.load(theirs)
    except inputs.InputError:
        raise
    except (ValueError, OSError, ImportError, AttributeError) as err:  # the spec or its file: the user's input
        raise inputs.InputError(f"--model {given!r}: {err}") from None


def apply_defects(model: Model, defects: list[str] | None) -> Model:
    """Wrap ``model`` in each ``name=strength`` (or ``name``: the default strength) defect of
    :data:`jaxcert.models.defects.DEFECTS`, in order; a bad one is an InputError naming ``--defect``."""
    from jaxcert.models import defects as dmod

    for d in defects or []:
        name, _, val = str(d).partition("=")
        if name not in dmod.DEFECTS:
            raise inputs.InputError(f"--defect: unknown defect {name!r}{inputs.did_you_mean(name, dmod.DEFECTS)}; "
                                    f"available: {', '.join(sorted(dmod.DEFECTS))}")
        model = dmod.DEFECTS[name](model, inputs.finite("--defect", val)) if val else dmod.DEFECTS[name](model)
    return model


def apply_max_batch(model: Model, max_batch: str | int | None) -> Model:
    """``max_batch``: None keeps the model's own limit, ``"none"`` lifts it, else an integer >= 1
    (InputError naming ``--max-batch``)."""
    if max_batch is None:
        return model
    return model.replace(max_batch=None if str(max_batch).lower() == "none"
                         else inputs.integer("--max-batch", max_batch, minimum=1))


def _import_file(spec: str, path: str) -> str:
    """Import the Python file ``path`` (``--model PATH.py:attr``) as the module named by its stem, with its folder
    first on ``sys.path`` (so it imports its neighbours as ``python PATH.py`` would); returns that name.  A stem that
    is not an identifier, or a module of that name already imported from another file, is an input error."""
    import importlib.util

    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise inputs.InputError(f"--model {spec!r}: no such file {path!r}; allowed: PATH.py:attr naming an existing "
                                "file, or module:attr")
    name = os.path.basename(full)[:-3]
    if not name.isidentifier():
        raise inputs.InputError(f"--model {spec!r}: {os.path.basename(full)!r} is not a module name; rename the file "
                                "(letters, digits, underscores)")
    loaded = sys.modules.get(name)
    if loaded is not None:
        if os.path.abspath(getattr(loaded, "__file__", "") or "") != full:
            raise inputs.InputError(f"--model {spec!r}: a module named {name!r} is already imported from "
                                    f"{getattr(loaded, '__file__', None)!r}; rename {path!r}")
        return name
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, full))
    sys.modules[name] = module
    try:
        module.__spec__.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's file failed while importing
        del sys.modules[name]
        raise inputs.InputError(f"--model {spec!r}: importing {path!r} raised {type(err).__name__}: "
                                f"{str(err).strip()[:200]}") from None
    return name


def load_user_model(spec: str) -> Model:
    """``module:attr`` (or ``PATH.py:attr``, the file itself): a :class:`Model` or a zero-argument factory returning
    one.  The current folder is searched first, as ``python -m`` does.  Whatever the user's code does while importing
    or building the model (raise, ``sys.exit``, return something else) is reported as an input error naming
    ``--model``."""
    mod, _, attr = spec.rpartition(":") if spec.rpartition(":")[0].endswith(".py") else spec.partition(":")
    if mod.endswith(".py") and attr.strip() and all(p.isidentifier() for p in attr.split(".")):
        mod = _import_file(spec, mod)  # PATH.py:attr: the file itself, imported under its stem's module name
    if not mod.strip() or not attr.strip() or not all(p.isidentifier() for p in mod.split(".")) \
            or not all(p.isidentifier() for p in attr.split(".")):
        raise inputs.InputError(f"--model: got {spec!r}; allowed: a registered name (jaxcert models), a registry "
                                "spec, or module:attr naming your jaxcert.Model or a zero-argument factory")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(mod)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ModuleNotFoundError as err:
        raise inputs.InputError(f"--model {spec!r}: no module named {err.name!r} (searched the current folder "
                                f"{os.getcwd()!r} and the installed packages; run from the folder that holds "
                                f"{mod.split('.')[0]}.py, give its path as PATH/{mod.split('.')[0]}.py:{attr}, or "
                                "install it)") from None
    except AttributeError:
        raise inputs.InputError(f"--model {spec!r}: module {mod!r} has no attribute {attr!r}") from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's module failed while importing
        raise inputs.InputError(f"--model {spec!r}: importing {mod!r} raised {type(err).__name__}: "
                                f"{str(err).strip()[:200]}") from None
    if isinstance(obj, Model):
        return obj
    if not callable(obj):
        raise inputs.InputError(f"--model {spec!r} is a {type(obj).__name__}, not a jaxcert.Model or a "
                                "zero-argument factory returning one")
    try:
        model = obj()
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's factory failed
        raise inputs.InputError(f"--model {spec!r}: calling {attr}() raised {type(err).__name__}: "
                                f"{str(err).strip()[:200]} (the factory must take no argument)") from None
    if not isinstance(model, Model):
        raise inputs.InputError(f"--model {spec!r}: {attr}() returned a {type(model).__name__}, not a "
                                "jaxcert.Model")
    return model
