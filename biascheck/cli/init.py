"""``biascheck init NAME [DEST]``: copy a packaged suite into the repository (default suites/NAME)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from biascheck.cli.common import spelling_of


def add_parser(commands: Any) -> None:
    init = commands.add_parser(
        "init",
        help="copy a packaged suite into this repository to customise it (default suites/NAME)",
        description="Copy a suite shipped with biascheck into a folder of yours, to change its subset, prompts or thresholds; "
        "then run it with pytest --biascheck DEST.",
    )
    init.add_argument("name", help="a packaged suite (biascheck suites lists them)")
    init.add_argument("dest", nargs="?", type=Path, help="the folder to create (default suites/NAME)")
    init.add_argument("--force", action="store_true", help="write the suite over an existing folder (its other files are kept)")
    init.set_defaults(func=_init, spelling=spelling_of(init))


def _init(args) -> int:
    from biascheck.benchmarks.base import JudgedBenchmark, benchmark_of
    from biascheck.config.catalog import copy_suite
    from biascheck.config.manifest import load_manifest

    dest = args.dest or Path("suites") / args.name
    copy_suite(args.name, dest, force=args.force)
    print(f"copied the packaged suite {args.name} to {dest}; edit {dest / 'suite.toml'} (subset, prompts, thresholds), then run it with:")
    print(f"  pytest --biascheck {dest} --biascheck-model MODEL")
    manifest = load_manifest(dest)
    benchmark = benchmark_of(manifest)
    if isinstance(benchmark, JudgedBenchmark):
        # A judged suite names the QA suite its judge is qualified on, relative to itself.
        qualification = benchmark.qualification_path(manifest)
        if qualification and not (dest / qualification).is_dir():
            print(
                f"note: its [{benchmark.settings_table}.judge_qualification] suite {qualification!r} is not beside it: copy that suite too "
                f"(biascheck init {Path(qualification).name} {os.path.normpath(dest / qualification)}) or change the path"
            )
    return 0
