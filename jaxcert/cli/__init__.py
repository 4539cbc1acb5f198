"""Command line: ``jaxcert certify | lambda | attack | sweep | plot-sweep | compare | controls | investigate | models |
substrates``.

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
lambda; ``--no-fail-on-gate`` always returns 0), 2 a usage or input error, reported as one
line naming the argument.  One module per subcommand; each parses arguments and calls the
library.
"""

from __future__ import annotations

import argparse
import os
import sys

from jaxcert.cache import enable_compilation_cache
from jaxcert.cli import attack, certify, compare, controls, investigate, misc
from jaxcert.cli._common import load_model
from jaxcert.inputs import InputError

__all__ = ["main", "build_parser", "load_model", "EXIT_OK", "EXIT_GATE_FAILED", "EXIT_USAGE"]

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxcert", description="Exact, batched certification of ML interatomic "
                                "potentials (eV, Å, eV/Å, eV/Å³). Exit codes: 0 ok, 1 a gate failed, 2 usage or "
                                "input error.")
    sub = p.add_subparsers(dest="cmd", required=True)
    for module in (certify, misc, attack, compare, controls, investigate):
        module.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    enable_compilation_cache()  # compiled probe programs are reused by the next run ($JAXCERT_CACHE_DIR=off: never)
    try:
        return args.fn(args)
    except (InputError, KeyError, ValueError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"jaxcert: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `jaxcert compare ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("jaxcert: interrupted (a --json report keeps every finished probe: rerun with --resume)",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
