"""``biascheck compare RUN...``: several runs of one suite side by side (``compare.md``,
``compare.json``, ``compare.html``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from biascheck.api import read_run
from biascheck.cli.common import spelling_of
from biascheck.core.errors import BiascheckError


def add_parser(commands: Any) -> None:
    compare = commands.add_parser(
        "compare",
        help="several runs of one suite side by side: a table per metric and scope with intervals, and compare.html",
        description="Set runs of one suite side by side (several candidate models, or one model over releases): each metric "
        "by scope, each run's value with the interval its results.json records, in compare.md, compare.json and compare.html "
        "(a chart per headline metric: a row per run, its interval and the threshold). The Markdown is printed too. Runs of "
        "another suite, suite fingerprint or answer mode are refused. Each run is tested against the run given before it, as "
        "biascheck diff tests two, and marked when it regressed.",
    )
    compare.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="a run's results.json, or the report folder holding it (two or more)")
    compare.add_argument(
        "--out", type=Path, default=Path("."), metavar="FOLDER", help="folder for compare.md, compare.json and compare.html (default: here)"
    )
    compare.set_defaults(func=_compare, spelling=spelling_of(compare))


def _compare(args) -> int:
    from biascheck.reporting.runs import compare_runs, render_runs_markdown
    from biascheck.reporting.write import write_compare

    fix = "give runs: results.json files or report folders (a suite's baselines across releases: biascheck history SUITE)"
    # Each run read once, as its record.
    runs = [(str(file), run) for file, run in (read_run(path, fix) for path in args.runs)]
    view = compare_runs(runs)
    try:
        written = write_compare(view, args.out)
    except OSError as exc:
        raise BiascheckError(args.out, None, f"could not write the comparison ({exc.strerror or exc})", "point --out at a writable folder") from None
    sys.stdout.write(render_runs_markdown(view))
    print(f"wrote {', '.join(str(path) for path in written)}", file=sys.stderr)
    return 0
