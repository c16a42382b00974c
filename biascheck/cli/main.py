"""The ``biascheck`` command's parser: a subcommand per module of this package, each run with the
library's errors naming its options as the command spells them (:mod:`biascheck.core.spelling`),
and every error printed as its one line with the exit status of :mod:`biascheck.core.exits`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from biascheck.cli import compare, diff, history, init, judge, log, qualify_judge, run, serve_local, store, suites
from biascheck.core import exits
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import spelled_as
from biascheck.options import COMMAND

# In the order `biascheck --help` lists them.
COMMANDS = (diff, run, log, compare, history, qualify_judge, serve_local, suites, init, store, judge)


def parser() -> argparse.ArgumentParser:
    import biascheck
    from biascheck.execution.providers import add_simulator_subcommands

    main_parser = argparse.ArgumentParser(prog="biascheck", description="Continuous bias-regression testing for language models.")
    main_parser.add_argument("--version", action="version", version=f"biascheck {biascheck.__version__}")
    commands = main_parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(commands)
    sim = commands.add_parser("sim", help="the simulated model server (a calibration instrument)")
    add_simulator_subcommands(sim)
    return main_parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)  # a bounded option's type raises BiascheckError
        with spelled_as(getattr(args, "spelling", COMMAND)):
            return args.func(args)
    except BiascheckError as error:
        print(f"biascheck: {error}", file=sys.stderr)
        return exits.USAGE
    except OSError as exc:  # a path the system refuses (too long, under a file, no permission) where no check named it
        refused = BiascheckError(exc.filename or "a file", None, exc.strerror or str(exc), "check the path and its permissions")
        print(f"biascheck: {refused}", file=sys.stderr)
        return exits.USAGE
    except KeyboardInterrupt as interrupt:  # a RunInterrupted says what the store kept
        print(f"biascheck: {interrupt or 'interrupted'}", file=sys.stderr)
        return exits.INTERRUPTED
