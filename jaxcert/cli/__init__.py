"""Command line: ``jaxcert certify | lambda | attack | sweep | plot-sweep | compare | board | controls | investigate |
repair | models | substrates``.

Examples::

    jaxcert certify --model lj --elements Li,Be,B,C,Na,Mg,Al,Si,P,S --json r.json --html r.html
    jaxcert certify --model emt --elements Cu
    jaxcert certify --model mypkg.potential:model --elements Si       # your own jaxcert.Model
    jaxcert certify --model lj --defect curl=1.0 --elements Si        # a deliberately broken model
    jaxcert lambda --model lj --json l.json [--fd]
    jaxcert attack --model sw --structure Si --attack pgd --eps 0.05
    jaxcert models
    jaxcert substrates --element Si --out substrates/
    jaxcert controls --quick --models emt --panel emt --json c.json   # the controls mini-benchmark

Exit codes (``docs/cli.md``): 0 success (every gate passed), 1 a gate failed (certify,
lambda; ``--no-fail-on-gate`` returns 0 instead), 2 a usage or input error, reported as one
line naming the argument, 3 an internal error (one line and the path of the saved traceback), 130 interrupted
(Ctrl-C; the line says what was kept).
One module per subcommand; each parses arguments and calls the
library.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from jaxcert.cli import attack, board, certify, compare, controls, investigate, misc, repair
from jaxcert.cli._common import load_model
from jaxcert.core.cache import enable_compilation_cache
from jaxcert.core.inputs import InputError, clip_line
from jaxcert.specs import SpellingWarning

__all__ = ["main", "build_parser", "load_model", "EXIT_OK", "EXIT_GATE_FAILED", "EXIT_USAGE", "EXIT_INTERNAL",
           "EXIT_INTERRUPTED"]

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
#: Ctrl-C (SIGINT): 128 + 2, as a shell reports a process its signal ended (docs/cli.md, "Exit codes")
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxcert", description="Exact, batched certification of ML interatomic "
                                "potentials (eV, Å, eV/Å, eV/Å³). Exit codes: 0 ok, 1 a gate failed, 2 usage or "
                                "input error, 3 internal error.")
    sub = p.add_subparsers(dest="cmd", required=True)
    for module in (certify, misc, attack, compare, controls, investigate, board, repair):
        module.register(sub)
    return p


def _save_traceback(exc: BaseException) -> str | None:
    """Write the traceback of an internal error to a fresh file in the temporary folder; its path, or None."""
    import tempfile
    import traceback

    try:
        fd, path = tempfile.mkstemp(prefix="jaxcert-traceback-", suffix=".txt")
        with os.fdopen(fd, "w") as fh:
            fh.write(f"jaxcert {' '.join(sys.argv[1:])}\n\n")
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=fh)
        return path
    except OSError:
        return None


def _one_line_spelling_warnings() -> None:
    """Inside ``warnings.catch_warnings()``: an old spelling (:class:`jaxcert.specs.SpellingWarning`) is printed
    once per message as one ``jaxcert: warning:`` line on stderr; every other warning as Python shows it."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SpellingWarning):
            print(f"jaxcert: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.simplefilter("once", SpellingWarning)
    warnings.showwarning = show


def _exit_now(code: int) -> None:
    """End the process now, after flushing stdout and stderr: worker threads still compiling programs ahead of
    their probe (:mod:`jaxcert.probes.suite`) would otherwise hold an interrupted run for a minute at exit.  What
    was kept is already on disk (reports are written atomically after every probe)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns the exit code (``docs/cli.md``): 0 every gate passed, 1 a gate failed,
    2 a usage or input error (one line naming the argument), 3 an internal error (one line and the path of
    the saved traceback)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # argparse: --help (0) or a usage error (2, its own message already printed)
        return int(stop.code or 0) if isinstance(stop.code, int) or stop.code is None else EXIT_USAGE
    # compiled programs are reused by the next run ($JAXCERT_CACHE_DIR=off: never); an unfit cache folder is
    # reported in one warning line and the command runs without it (jaxcert.core.cache.cache_dir_problem)
    enable_compilation_cache()
    try:
        with warnings.catch_warnings():
            _one_line_spelling_warnings()
            code = args.fn(args)
    except InputError as err:  # one line; a user value echoed whole (100,000 characters) is cut (inputs.shown)
        print(f"jaxcert: error: {clip_line(str(err))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `jaxcert compare ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt as stop:
        # the command says what it kept (certify, board: KeyboardInterrupt("interrupted: 5 of 14 probes kept in
        # r.json; ...")); nothing is claimed for a command that did not say
        print(f"jaxcert: {stop}" if str(stop) else "jaxcert: interrupted", file=sys.stderr)
        if argv is None:  # the program itself (not a call from Python): do not wait for background compilations
            _exit_now(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except MemoryError:
        print("jaxcert: error: out of memory; try a smaller input or --max-batch N", file=sys.stderr)
        return EXIT_INTERNAL
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the one place every other failure is reported
        path = _save_traceback(err)
        where = f"; traceback saved to {path}" if path else ""
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        print(f"jaxcert: internal error: {type(err).__name__}: {first}{where} (please report it)", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_OK if code is None else int(code)


if __name__ == "__main__":
    sys.exit(main())
