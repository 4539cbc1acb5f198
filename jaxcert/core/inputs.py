"""The input boundary: every user-supplied value is checked here before any computation.

Each check raises :class:`InputError` (a ``ValueError``) whose message names the
argument, the value given and what is allowed, e.g.::

    --eps: got nan; allowed: a finite number > 0 (Å)

The CLI turns an :class:`InputError` into one line on stderr and exit code 2
(``docs/cli.md``); the Python API raises it unchanged.  Nothing non-finite or
out of range reaches JAX or native code (ASE's neighbour list segfaults on a NaN
cell, for example).

The argument name is whatever the caller passes (``"--eps"`` from the CLI,
``"eps"`` from the API), so one set of checks serves both boundaries.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "InputError", "UnknownName", "split_list", "finite", "positive", "non_negative", "integer", "seed",
    "number_list", "integer_list", "choice", "elements", "supported_elements", "split_supported", "read_atoms",
    "check_atoms", "output_file", "output_dir", "distinct_outputs", "name_list",
]


class InputError(ValueError):
    """A user input is invalid; the message names the argument, the value and what is allowed."""


class UnknownName(InputError, KeyError):  # noqa: N818 - an InputError that is also a failed lookup
    """A name (probe, defect, option) that is not in its registry; also a ``KeyError``."""

    __str__ = BaseException.__str__  # the message, not KeyError's quoted repr


def _fail(name: str, value: Any, allowed: str) -> InputError:
    return InputError(f"{name}: got {value!r}; allowed: {allowed}")


def _as_float(name: str, value: Any, allowed: str) -> float:
    if isinstance(value, bool):
        raise _fail(name, value, allowed)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _fail(name, value, allowed) from None
    if not math.isfinite(x):
        raise _fail(name, value if isinstance(value, str) else x, allowed)
    return x


def finite(name: str, value: Any, unit: str = "") -> float:
    """A finite real number."""
    return _as_float(name, value, "a finite number" + (f" ({unit})" if unit else ""))


def positive(name: str, value: Any, unit: str = "", *, maximum: float | None = None) -> float:
    """A finite number > 0 (and ≤ ``maximum`` when given)."""
    allowed = "a finite number > 0" + (f" and <= {maximum:g}" if maximum is not None else "") + (
        f" ({unit})" if unit else "")
    x = _as_float(name, value, allowed)
    if x <= 0 or (maximum is not None and x > maximum):
        raise _fail(name, value, allowed)
    return x


def non_negative(name: str, value: Any, unit: str = "") -> float:
    """A finite number ≥ 0."""
    allowed = "a finite number >= 0" + (f" ({unit})" if unit else "")
    x = _as_float(name, value, allowed)
    if x < 0:
        raise _fail(name, value, allowed)
    return x


def integer(name: str, value: Any, minimum: int | None = 1, maximum: int | None = None) -> int:
    """An integer in [minimum, maximum] (a float with an integral value is accepted, ``2.5`` is not)."""
    lo = "" if minimum is None else f" >= {minimum}"
    hi = "" if maximum is None else f" <= {maximum}"
    allowed = "an integer" + lo + ("," if lo and hi else "") + hi
    if isinstance(value, bool):
        raise _fail(name, value, allowed)
    try:
        if isinstance(value, str):
            k = int(value.strip())
        else:
            f = float(value)
            if not math.isfinite(f) or f != int(f):
                raise ValueError
            k = int(f)
    except (TypeError, ValueError, OverflowError):
        raise _fail(name, value, allowed) from None
    if (minimum is not None and k < minimum) or (maximum is not None and k > maximum):
        raise _fail(name, value, allowed)
    return k


def seed(name: str, value: Any) -> int:
    """A PRNG seed: an integer in [0, 2**31 − 1] (what ``jax.random.key`` and NumPy both accept)."""
    return integer(name, value, minimum=0, maximum=2**31 - 1)


def split_list(name: str, value: Any, *, what: str = "values", spaces: bool = False) -> list[Any]:
    """The one parser of list arguments (``--eps``, ``--elements``, ``--probes``, a TOML list, ...).

    A string is split at commas (and at runs of whitespace with ``spaces=True``) and each item stripped; a
    sequence gives its items (strings stripped, anything else, such as a TOML table, kept as it is); any other
    value is one item.  An empty list or an empty item (``""``, ``","``, ``"a,,b"``) names nothing and is an
    :class:`InputError` naming ``name``, so a stray comma never changes what runs.  Each caller checks the
    items themselves (numbers, symbols, names).
    """
    allowed = f"a non-empty comma-separated list of {what}"
    if isinstance(value, str):
        items: list[Any] = [v.strip() for v in value.split(",")]
        if spaces:
            items = [w for v in items for w in (v.split() or [""])]
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        items = [v.strip() if isinstance(v, str) else v for v in value]
    else:
        items = [value]
    if not items:
        raise _fail(name, value, allowed)
    if any(isinstance(v, str) and not v for v in items):
        raise _fail(name, value, allowed + " (an empty entry names nothing)")
    return items


def number_list(name: str, value: Any, *, positive_only: bool = True, unit: str = "") -> list[float]:
    """A non-empty comma-separated string or sequence of finite (positive) numbers."""
    items = split_list(name, value, what="numbers")
    check = positive if positive_only else finite
    return [check(name, v, unit) for v in items]


def integer_list(name: str, value: Any, *, seeds: bool = False, minimum: int | None = 1) -> list[int]:
    """A non-empty comma-separated string or sequence of integers (PRNG seeds with ``seeds=True``)."""
    items = split_list(name, value, what="integers")
    if seeds:
        out = [seed(name, v) for v in items]
    else:
        out = [integer(name, v, minimum=minimum) for v in items]
    dup = sorted({v for v in out if out.count(v) > 1})
    if dup:
        raise InputError(f"{name}: {dup} given more than once; each value must appear once")
    return out


def choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    """One of ``allowed`` (exact match)."""
    if value not in allowed:
        raise _fail(name, value, ", ".join(allowed))
    return str(value)


def elements(name: str, value: str | Sequence[str]) -> list[str]:
    """Element symbols: a comma/space-separated string or a sequence.

    Symbols must be spelled as in the periodic table (``Si``, not ``si`` or ``SI``: a
    wrong case is refused with the right spelling, since ``Co`` and ``CO`` mean
    different things elsewhere), each may appear once, and the list is non-empty.
    """
    from ase.data import atomic_numbers, chemical_symbols

    items = [str(v) for v in split_list(name, value, what="element symbols, e.g. Si,C", spaces=True)]
    bad = []
    for sym in items:
        if sym in atomic_numbers and sym != "X":
            continue
        fixed = sym[:1].upper() + sym[1:].lower()
        hint = f" (did you mean {fixed!r}?)" if fixed in atomic_numbers and fixed != "X" else ""
        bad.append(f"{sym!r}{hint}")
    if bad:
        raise InputError(f"{name}: unknown element symbol(s) {', '.join(bad)}; allowed: symbols H..Og "
                         f"({chemical_symbols[1]}, {chemical_symbols[2]}, ... {chemical_symbols[118]})")
    _refuse_repeats(name, items, "each element must appear once")
    return items


def supported_elements(model: Any) -> list[str] | None:
    """The symbols a model supports (``model.elements``), or ``None`` for any element."""
    from ase.data import chemical_symbols

    z = getattr(model, "elements", None)
    return None if z is None else [chemical_symbols[int(k)] for k in sorted(z)]


def split_supported(name: str, model: Any, symbols: Sequence[str], *, skip_unsupported: bool
                    ) -> tuple[list[str], dict[str, str]]:
    """(supported symbols, {unsupported symbol: reason}).

    Without ``skip_unsupported`` an unsupported symbol raises :class:`InputError` listing the
    model's supported set; with it, each unsupported symbol comes back with its reason, to be
    recorded as a skip.
    """
    ok = supported_elements(model)
    if ok is None:
        return list(symbols), {}
    bad = [s for s in symbols if s not in ok]
    if bad and not skip_unsupported:
        raise InputError(f"{name}: model {getattr(model, 'name', model)!r} has no parameters for "
                         f"{', '.join(bad)}; it supports {', '.join(ok)} (or pass --skip-unsupported / "
                         f"skip_unsupported=True to record a skip for each)")
    reason = f"model {getattr(model, 'name', model)!r} has no parameters for this element"
    return [s for s in symbols if s in ok], {s: reason for s in bad}


def check_atoms(name: str, atoms: Any) -> Any:
    """Refuse what ASE may read but no model can take: no atoms, partial occupancies, non-finite or
    vacancy sites, a singular periodic cell.  Returns ``atoms`` unchanged."""
    import numpy as np

    n = len(atoms)
    if n == 0:
        raise InputError(f"{name}: the structure has zero atoms; allowed: a structure with at least one atom")
    occ = atoms.info.get("occupancy") if hasattr(atoms, "info") else None
    if occ:
        partial = {site: o for site, o in occ.items() if any(abs(float(v) - 1.0) > 1e-6 for v in o.values())}
        if partial:
            site, o = next(iter(partial.items()))
            raise InputError(f"{name}: partial occupancies ({len(partial)} site(s), e.g. site {site}: {o}); "
                             "allowed: an ordered structure (every site fully occupied by one element); order "
                             "it first, e.g. with pymatgen's OrderDisorderedStructureTransformation")
    z = atoms.get_atomic_numbers()
    if (z <= 0).any():
        raise InputError(f"{name}: {int((z <= 0).sum())} site(s) with no element (X / vacancy); allowed: real "
                         "elements H..Og")
    pos = atoms.get_positions()
    if not np.isfinite(pos).all():
        raise InputError(f"{name}: non-finite (NaN or inf) atomic positions; allowed: finite coordinates (Å)")
    cell = np.asarray(atoms.get_cell())
    if not np.isfinite(cell).all():
        raise InputError(f"{name}: non-finite cell; allowed: a finite cell (Å)")
    if any(atoms.get_pbc()) and abs(np.linalg.det(cell)) < 1e-10:
        raise InputError(f"{name}: periodic (pbc={atoms.get_pbc().tolist()}) but the cell has zero volume; "
                         "allowed: a cell of full rank for a periodic structure, or pbc=False")
    return atoms


def read_atoms(name: str, path: str | os.PathLike, index: Any = -1) -> Any:
    """Read a structure file with ASE and :func:`check_atoms` it; a clear error for every failure."""
    import ase.io

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise InputError(f"{name}: no such file {p!r}")
    if os.path.getsize(p) == 0:
        raise InputError(f"{name}: {p!r} is empty; allowed: a structure file ASE can read (cif, extxyz, POSCAR, ...)")
    try:
        atoms = ase.io.read(p, index=index)
    except Exception as err:  # noqa: BLE001 - any reader failure is the user's file, reported as such
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"{name}: ASE cannot read {p!r} ({type(err).__name__}: {msg[:200]})") from None
    return check_atoms(name, atoms)


def _probe_writable(name: str, folder: str, what: str) -> None:
    """Create and remove a temporary file in ``folder``: the only test that holds for root, read-only mounts
    and ACLs alike (``os.access`` says yes to root on a read-only file system)."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=".jaxcert-probe-", dir=folder)
    except OSError as err:
        raise InputError(f"{name}: cannot write in {folder!r} ({err.strerror or err}); allowed: {what} in a "
                         "folder you can write") from None
    os.close(fd)
    os.unlink(tmp)


def output_file(name: str, path: Any) -> str:
    """An output file path, checked before any work: a non-empty path that is not a directory, whose folder
    exists (it is never created) and is writable, and which, if it exists, is a regular file.  Returns the
    absolute path.  An existing file is replaced atomically when written (:func:`jaxcert.checkpoint.write_json`)."""
    allowed = "a file path in an existing, writable folder"
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
        raise _fail(name, path, allowed)
    p = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if os.path.isdir(p) or os.fspath(path).endswith(os.sep):
        raise InputError(f"{name}: {os.fspath(path)!r} is a directory; allowed: {allowed}")
    if os.path.lexists(p) and not os.path.isfile(p):
        raise InputError(f"{name}: {os.fspath(path)!r} exists and is not a regular file; allowed: {allowed}")
    folder = os.path.dirname(p)
    if not os.path.isdir(folder):
        raise InputError(f"{name}: no such directory {folder!r} for {os.fspath(path)!r}; create it first "
                         f"(allowed: {allowed})")
    _probe_writable(name, folder, "a file")
    if os.path.isfile(p) and not os.access(p, os.W_OK):
        raise InputError(f"{name}: {os.fspath(path)!r} exists and is read-only; allowed: {allowed}")
    return p


def output_dir(name: str, path: Any, *, create: bool = True) -> str:
    """An output folder, checked before any work: an existing writable directory, or a new one whose parent
    exists (only the last component is created, never a chain of folders above an existing one).  The folder
    is created here unless ``create`` is False (a command that checks its other arguments first, then calls
    again to create it).  Returns the absolute path."""
    allowed = "a directory, existing or new inside an existing, writable folder"
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
        raise _fail(name, path, allowed)
    p = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if os.path.lexists(p) and not os.path.isdir(p):
        raise InputError(f"{name}: {os.fspath(path)!r} exists and is not a directory; allowed: {allowed}")
    if not os.path.isdir(p):
        parent = os.path.dirname(p)
        if not os.path.isdir(parent):
            raise InputError(f"{name}: no such directory {parent!r} for {os.fspath(path)!r}; only the last folder "
                             f"is created (allowed: {allowed})")
        _probe_writable(name, parent, "a new folder")
        if not create:
            return p
        try:
            os.mkdir(p)
        except OSError as err:
            raise InputError(f"{name}: cannot create {os.fspath(path)!r} ({err.strerror or err})") from None
    _probe_writable(name, p, "files")
    return p


def distinct_outputs(pairs: Iterable[tuple[str, Any]]) -> None:
    """Refuse two output arguments that name the same file (``--json X --html X`` would overwrite the
    checkpoint with the page).  ``pairs`` holds (argument name, path or None)."""
    seen: dict[str, str] = {}
    for name, path in pairs:
        if path is None:
            continue
        key = os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path))))
        if key in seen:
            raise InputError(f"{name}: {os.fspath(path)!r} is the same file as {seen[key]}; allowed: a separate "
                             "file for each output")
        seen[key] = f"{name} ({os.fspath(path)!r})"


def name_list(name: str, value: Any, allowed: Sequence[str] | None = None, *, what: str = "names") -> list[str]:
    """A list of names (``--probes``, ``--attack``, ``--sections``, ...) through :func:`split_list`: non-empty
    names, each once, each in ``allowed`` when given.  ``","`` and ``""`` are refused (they name nothing), never
    read as "all"."""
    desc = what + (f" from {', '.join(allowed)}" if allowed else "")
    items = [str(v) for v in split_list(name, value, what=desc)]
    if allowed is not None:
        bad = [v for v in items if v not in allowed]
        if bad:
            raise UnknownName(f"{name}: unknown {what[:-1] if what.endswith('s') else what}(s) {bad}; "
                              f"allowed: {', '.join(allowed)}")
    _refuse_repeats(name, items, "each must appear once")
    return items


def _refuse_repeats(name: str, items: Sequence[str], rule: str) -> None:
    """InputError naming the entries of ``items`` that appear more than once."""
    dup = sorted({v for v in items if items.count(v) > 1})
    if dup:
        raise InputError(f"{name}: {', '.join(dup)} given more than once; {rule}")
