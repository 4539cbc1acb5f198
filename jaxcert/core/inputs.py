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
    "check_atoms", "output_file", "output_dir", "distinct_outputs", "name_list", "did_you_mean", "shown",
    "clip_line", "SHOWN_CHARS", "regular_file", "scheduler_address",
]

#: The most characters of one user value an error message echoes (:func:`shown`): a 100,000-character
#: ``--elements`` is named by its first characters and its length, never printed whole.
SHOWN_CHARS = 200


class InputError(ValueError):
    """A user input is invalid; the message names the argument, the value and what is allowed."""


class UnknownName(InputError, KeyError):  # noqa: N818 - an InputError that is also a failed lookup
    """A name (probe, defect, option) that is not in its registry; also a ``KeyError``."""

    __str__ = BaseException.__str__  # the message, not KeyError's quoted repr


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, at most about ``limit`` characters: a longer one is cut and the
    length of the whole given (``'XXXX...'... (100002 characters)``).  Every message that echoes a user value
    uses it (docs/cli.md, "Inputs are checked before anything is computed")."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, (str, bytes, list, tuple, dict)) else len(text)
    return f"{text[:limit]}... ({size} {'characters' if isinstance(value, (str, bytes)) else 'items'})"


def clip_line(text: str, limit: int = SHOWN_CHARS) -> str:
    """One message line: every run of more than ``limit`` non-blank characters cut to ``limit`` (the CLI's last
    guard for a value some message echoed without :func:`shown`), the whole at most ``10 * limit`` characters."""
    import re

    one = " ".join(str(text).splitlines())
    out = re.sub(rf"\S{{{limit + 1},}}", lambda m: f"{m.group(0)[:limit]}... ({len(m.group(0))} characters)", one)
    return out if len(out) <= 10 * limit else f"{out[:10 * limit]}... ({len(out)} characters)"


def _fail(name: str, value: Any, allowed: str) -> InputError:
    return InputError(f"{name}: got {shown(value)}; allowed: {allowed}")


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
    from collections import Counter

    dup = sorted(v for v, k in Counter(out).items() if k > 1)
    if dup:
        raise InputError(f"{name}: {shown(dup)} given more than once; each value must appear once")
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
        if len(bad) < 10:  # the first ten are named (with a hint), the rest counted
            bad.append(f"{shown(sym)}{did_you_mean(sym, chemical_symbols[1:]) if len(sym) <= 8 else ''}")
        else:
            bad.append(sym)
    if bad:
        more = f", ... ({len(bad)} in all)" if len(bad) > 10 else ""
        raise InputError(f"{name}: unknown element symbol(s) {', '.join(bad[:10])}{more}; allowed: symbols H..Og "
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
    if os.path.islink(p):  # jaxcert writes nothing through a link (jaxcert.core.files.atomic_write)
        raise InputError(f"{name}: {os.fspath(path)!r} is a symbolic link; allowed: {allowed}, not a link")
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
            raise UnknownName(f"{name}: unknown {what[:-1] if what.endswith('s') else what}(s) {shown(bad)}"
                              f"{did_you_mean(bad[:10], allowed)}; allowed: {', '.join(allowed)}")
    _refuse_repeats(name, items, "each must appear once")
    return items


def did_you_mean(value: Any, choices: Iterable[str], *, cutoff: float = 0.7) -> str:
    """The hint an "unknown name" message appends: ``" (did you mean 'conservativeness'?)"`` for the choice closest
    to ``value`` (the same name in another case first, ``si`` → ``Si``; then :func:`difflib.get_close_matches`),
    or ``""`` when none is close.  For a list of values: ``" (did you mean 'a' for 'x', 'b' for 'y'?)"`` over those
    with a close choice.  Used for probes, models, defects, elements, attacks, protocols and sections."""
    import difflib

    options = [str(c) for c in choices]
    values = [str(value)] if isinstance(value, str) or not isinstance(value, Iterable) else [str(v) for v in value]
    found = []
    for v in values:
        same = [c for c in options if c.lower() == v.lower() and c != v]
        close = same[:1] or difflib.get_close_matches(v, options, n=1, cutoff=cutoff)
        if close:
            found.append((v, close[0]))
    if not found:
        return ""
    if len(values) == 1:
        return f" (did you mean {found[0][1]!r}?)"
    return " (did you mean " + ", ".join(f"{c!r} for {v!r}" for v, c in found) + "?)"


def _refuse_repeats(name: str, items: Sequence[str], rule: str) -> None:
    """InputError naming the entries of ``items`` that appear more than once."""
    from collections import Counter

    dup = sorted(v for v, k in Counter(items).items() if k > 1)  # Counter: a list of 30,000 names stays linear
    if dup:
        text = ", ".join(dup)
        raise InputError(f"{name}: {text if len(text) <= SHOWN_CHARS else shown(text)} given more than once; {rule}")


def regular_file(name: str, path: Any, *, max_bytes: int | None = None, what: str = "a file") -> str:
    """An input file that is a regular file (a link to one is followed), checked before it is opened: a FIFO, a
    device, a socket or a directory is refused, never opened (opening a FIFO blocks until someone writes to it),
    and so is a file larger than ``max_bytes``.  Returns the path."""
    import stat

    allowed = f"{what} (a regular file)"
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
        raise _fail(name, path, allowed)
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError as err:
        raise InputError(f"{name}: {shown(p)}: {err.strerror or type(err).__name__}; allowed: {allowed}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise InputError(f"{name}: {shown(p)} is {kind}; allowed: {allowed}")
    if max_bytes is not None and st.st_size > max_bytes:
        raise InputError(f"{name}: {shown(p)} has {st.st_size} bytes; allowed: {allowed} of at most {max_bytes} bytes")
    return p


def scheduler_address(name: str, value: Any) -> str:
    """A dask scheduler address ``tcp://HOST:PORT`` (or ``tls://``): a host name, an IPv4 address or an IPv6
    address in brackets, and a port in 1..65535.  Checked before any work; whether it answers is the caller's."""
    import re

    allowed = "tcp://HOST:PORT (or tls://HOST:PORT), e.g. tcp://head:8786, with a port in 1..65535"
    text = value.strip() if isinstance(value, str) else value
    m = re.fullmatch(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?):([0-9]{1,5})",
                     text) if isinstance(text, str) else None
    if m is None or not 1 <= int(m.group(4)) <= 65535:
        raise _fail(name, value, allowed)
    return text
