"""Writing jaxcert's output files without trusting what already lies at the path (docs/cli.md, "Output files").

Every file jaxcert writes goes through this module:

* :func:`atomic_write`: the text or bytes go to a temporary created exclusively (``O_EXCL``, an unpredictable
  name from :func:`tempfile.mkstemp`) in the target's own folder, are flushed and fsync'ed, then renamed over the
  target with :func:`os.replace`.  A planted link at a predictable temporary name (``report.md.tmp``) has nothing
  to catch, and a run killed at any moment leaves the previous file or the next one, never a torn one.  A target
  that is a symbolic link, or exists and is not a regular file, is refused (:class:`OutputFileError`, naming the
  path): nothing is written through a link, and a link is not silently replaced either.
* :func:`append_line`: one line appended to a JSON-lines file (the detective's evidence memory), opened with
  ``O_NOFOLLOW`` so a link is refused, never followed; a file whose last byte is not a newline is refused as it
  is, unless the caller owns the file's format and asks to drop that unfinished last line.
* :func:`ensure_output_folder`: an ``--out`` folder.  Only its last level is created; a link is refused; a marker
  file (:data:`MARKER`) records that jaxcert writes there.  An existing folder without the marker that already
  holds one of the files the command would write is refused (somebody else's ``index.html``) unless ``force``.
* :func:`safe_file_stem`: a model name used as a file stem, refused before any work when it cannot be one.

Imports no JAX (the report room may import it).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable

from jaxcert.core.inputs import InputError

__all__ = ["MARKER", "OutputFileError", "atomic_write", "append_line", "ensure_output_folder", "safe_file_stem",
           "check_target", "RESERVED_STEMS", "MAX_STEM_BYTES"]

#: The marker file of a folder jaxcert writes (``--out``): one line ``jaxcert-output``, then one line per
#: command that wrote there (``command: board``).
MARKER = ".jaxcert-output"
_MAGIC = "jaxcert-output"

#: File stems a model's report may not take: the board's own files (``board.json``, ``index.html``, the
#: regenerated ``board_reference.json``) and the marker.  Compared case-insensitively (a case-insensitive file
#: system would make ``Board.json`` the board's file).
RESERVED_STEMS = ("board", "board_reference", "index")

#: The longest model file stem, in bytes of UTF-8: leaves room under the usual 255-byte name limit for the
#: extension and the temporary's prefix and random suffix.
MAX_STEM_BYTES = 200


class OutputFileError(InputError):
    """An output path jaxcert refuses to write (a symbolic link, not a regular file, someone else's file)."""


def _umask() -> int:
    """The process umask, read without changing it (``/proc/self/status`` on Linux; elsewhere set and restored,
    which other threads could observe for an instant)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_target(path: str | os.PathLike, flag: str | None = None) -> str:
    """Refuse an output path that is a symbolic link or exists and is not a regular file; return it as a string.
    The message names ``flag`` when given, and always the path."""
    p = os.fspath(path)
    who = f"{flag}: " if flag else ""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    if stat.S_ISLNK(st.st_mode):
        raise OutputFileError(f"{who}{p!r} is a symbolic link; jaxcert writes no file through a link (remove the "
                              "link or choose another path)")
    if not stat.S_ISREG(st.st_mode):
        raise OutputFileError(f"{who}{p!r} exists and is not a regular file; allowed: a regular file or a new path")
    return p


def atomic_write(path: str | os.PathLike, data: str | bytes, flag: str | None = None) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically: an exclusively created temporary in the
    same folder (``.NAME.XXXXXXXX``), fsync'ed, then :func:`os.replace`'d over ``path``.  The file gets the mode
    ``open()`` would give it (0666 less the umask).  Raises :class:`OutputFileError` (naming ``flag`` and the
    path) when ``path`` is a symbolic link or exists and is not a regular file; nothing is written then."""
    p = check_target(path, flag)
    folder, name = os.path.split(os.path.abspath(p))
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a report gets the mode open() would give it
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        check_target(p, flag)  # a link planted while we wrote is refused too (the rename would replace it)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def append_line(path: str | os.PathLike, text: str, *, drop_unfinished: bool = False) -> None:
    """Append ``text`` plus a newline to the JSON-lines file ``path`` (created if missing), flushed and fsync'ed.

    The file is opened with ``O_NOFOLLOW``: a symbolic link is refused, never followed, and so is anything but a
    regular file.  A non-empty file whose last byte is not a newline is refused as it is (nothing repaired,
    :class:`OutputFileError` says so), unless ``drop_unfinished``: the caller's format says an unfinished last
    line is a record a killed run never completed, and that fragment alone is cut, through the same open file."""
    p = os.fspath(path)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags, 0o666)
    except OSError:
        if os.path.islink(p):
            raise OutputFileError(f"{p!r} is a symbolic link; jaxcert appends to no file through a link (remove "
                                  "the link or choose another folder)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputFileError(f"{p!r} is not a regular file; jaxcert appends only to its own files")
        if st.st_size > 0:
            os.lseek(fd, st.st_size - 1, os.SEEK_SET)
            if os.read(fd, 1) != b"\n":
                if not drop_unfinished:
                    raise OutputFileError(f"{p!r} does not end with a newline; refusing to append to it (the file "
                                          "was left as it is)")
                keep, block, pos = -1, 1 << 16, st.st_size
                while pos > 0 and keep < 0:
                    start = max(0, pos - block)
                    os.lseek(fd, start, os.SEEK_SET)
                    chunk = os.read(fd, pos - start)
                    at = chunk.rfind(b"\n")
                    keep = start + at + 1 if at >= 0 else -1
                    pos = start
                os.ftruncate(fd, max(keep, 0))
        blob = (text + "\n").encode("utf-8")
        while blob:
            n = os.write(fd, blob)
            blob = blob[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _marker_kinds(folder: str) -> list[str] | None:
    """The commands a folder's marker lists, or None when there is no valid marker (a link is no marker)."""
    m = os.path.join(folder, MARKER)
    try:
        if not stat.S_ISREG(os.lstat(m).st_mode):
            return None
        with open(m, encoding="utf-8") as fh:
            lines = fh.read(4096).splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or lines[0].strip() != _MAGIC:
        return None
    return [ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.startswith("command:")]


def ensure_output_folder(path: str | os.PathLike, flag: str, owned_files: Iterable[str], force: bool = False,
                         kind: str = "output", *, create: bool = True) -> str:
    """The output folder ``path`` of a command ``kind`` (``"board"``, ``"investigate"``), checked and (with
    ``create``) created and marked; returns its absolute path.

    * Only the last level is created: its parent must exist (``--out a/b/c`` without ``a/b`` is refused).
    * A folder that is a symbolic link, or a path that is not a folder, is refused.
    * Any of ``owned_files`` (names inside the folder the command writes) that is a symbolic link, or not a
      regular file (a folder for a name ending in ``/``), is refused, ``force`` or not: nothing is written
      through a link.
    * A folder that holds one of ``owned_files`` but no :data:`MARKER` naming ``kind`` was not written by this
      command: refused unless ``force`` (then the files are overwritten, never followed).
    * With ``create``, the marker is written (``kind`` added to it), so a rerun needs no ``force``.

    Every refusal is an :class:`InputError` naming ``flag``, the path and the file (exit 2)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
        raise InputError(f"{flag}: got {path!r}; allowed: a folder path")
    given = os.fspath(path)
    p = os.path.abspath(os.path.expanduser(given))
    if os.path.islink(p):
        raise InputError(f"{flag}: {given!r} is a symbolic link; allowed: a real folder (jaxcert writes nothing "
                         "through a link)")
    if os.path.lexists(p) and not os.path.isdir(p):
        raise InputError(f"{flag}: {given!r} exists and is not a directory; allowed: a folder, existing or new")
    if not os.path.isdir(p):
        parent = os.path.dirname(p)
        if not os.path.isdir(parent):
            raise InputError(f"{flag}: no such directory {parent!r} for {given!r}; only the last folder is created "
                             "(allowed: a new folder inside an existing one)")
        if not create:
            return p
        try:
            os.mkdir(p)
        except OSError as err:
            raise InputError(f"{flag}: cannot create {given!r} ({err.strerror or err})") from None
    else:
        present = []
        for name in owned_files:
            want_dir = name.endswith("/")
            f = os.path.join(p, name.rstrip("/"))
            try:
                st = os.lstat(f)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                raise InputError(f"{flag}: {given!r} holds {name.rstrip('/')!r}, a symbolic link; jaxcert writes "
                                 "nothing through a link (remove it or choose another folder)")
            if not (stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)):
                raise InputError(f"{flag}: {given!r} holds {name.rstrip('/')!r}, which is not a regular "
                                 f"{'folder' if want_dir else 'file'}; remove it or choose another folder")
            present.append(name.rstrip("/"))
        kinds = _marker_kinds(p)
        if present and (kinds is None or kind not in kinds) and not force:
            raise InputError(f"{flag}: {given!r} already holds {present[0]!r} that jaxcert {kind} did not write (no "
                             f"{MARKER} marker); allowed: a new or empty folder, one this command wrote, or --force "
                             "to overwrite its files")
        if not create:
            return p
    kinds = _marker_kinds(p) or []
    if kind not in kinds:
        try:
            atomic_write(os.path.join(p, MARKER), "\n".join([_MAGIC, *(f"command: {k}" for k in [*kinds, kind])])
                         + "\n", f"{flag}: {MARKER}")
        except OSError as err:
            raise InputError(f"{flag}: cannot write in {given!r} ({err.strerror or err}); allowed: a folder you "
                             "can write") from None
    return p


def safe_file_stem(name: str, flag: str) -> str:
    """``name`` as the file stem of a model's report, or :class:`InputError` naming ``flag`` (before any work).

    Refused, never rewritten: a name that is empty, starts with ``.``, holds a path separator, a NUL or a control
    character, is ``.``/``..``, is longer than :data:`MAX_STEM_BYTES` bytes of UTF-8, or is one of the board's own
    files (:data:`RESERVED_STEMS`, case-insensitively).  Mapping such a name to some other stem would make two
    names collide or hide which file is whose; a refusal names the fix (a ``name`` in a TOML file)."""
    fix = "give the model a name of its own in a TOML file ([[models]] name = \"...\")"
    shown = repr(name if not isinstance(name, str) or len(name) <= 60 else name[:57] + "...")
    if not isinstance(name, str) or not name or name in (".", ".."):
        raise InputError(f"{flag}: model name {shown} cannot be a file name; {fix}")
    if "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name):
        raise InputError(f"{flag}: model name {shown} holds a path separator; {fix}")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InputError(f"{flag}: model name {shown} holds a NUL or control character; {fix}")
    if name.startswith("."):
        raise InputError(f"{flag}: model name {shown} starts with '.' (a hidden file); {fix}")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_STEM_BYTES:
        raise InputError(f"{flag}: model name {shown} is {size} bytes long; allowed: a file name of at most "
                         f"{MAX_STEM_BYTES} bytes; {fix}")
    if name.casefold() in RESERVED_STEMS:
        raise InputError(f"{flag}: model name {shown} would write {name}.json beside the board's own files "
                         f"({', '.join(s + '.*' for s in RESERVED_STEMS)}); {fix}")
    return name
