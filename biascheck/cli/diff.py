"""``biascheck diff A B``: compare a run's ``results.json`` (B) with a baseline or another run's
``results.json`` (A), through the gate's own comparison (:func:`biascheck.orchestration.compare_run`)
as ``pytest --biascheck-baseline`` does; exit 1 when a metric regressed."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biascheck.api import read_run, regression_table, run_as_baseline
from biascheck.cli.common import add_data, print_notices, spelling_of
from biascheck.core import exits
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option, option

if TYPE_CHECKING:
    from biascheck.records.baseline import BaselineRecord
    from biascheck.records.run import RunRecord

# What `biascheck diff` says instead of a fix that names what only a pytest run does (record a
# baseline, choose an answer mode: BiascheckError.unspelled), by the field the error names; DIFF_FIX for any other.
DIFF_FIXES = {
    "suite.name": "give as A a baseline or a results.json of B's suite",
    "suite.fingerprint": "give as A a baseline or a results.json of B's suite version, or pass --allow-fingerprint-mismatch to compare the cases both share",
    "model.estimator": "give as A a baseline or a results.json answered the way B was",
    "cases": "give as A a baseline or a results.json of B's suite",
}
DIFF_FIX = "give as A a valid baseline file, or the results.json of the run to compare with (or the report folder holding it)"


def add_parser(commands: Any) -> None:
    diff = commands.add_parser(
        "diff",
        help="compare a run with a baseline or with another run (exit 1 on regression)",
        description="Compare run B with A, a baseline or another run of the suite: paired statistics per metric and category, "
        "and the changed cases. Exit 0 without a regression, 1 with one, 2 on an error.",
    )
    diff.add_argument(
        "baseline",
        type=Path,
        metavar="A",
        help="what B is compared with: a baseline file (baselines/<suite>/release.json), or a run's results.json or the report folder holding it",
    )
    diff.add_argument("results", type=Path, metavar="B", help="the candidate run: its results.json, or the report folder holding it")
    diff.add_argument(
        "--compare-fail",
        action="append",
        default=[],
        metavar="METRIC:MARGIN",
        help="regression rule, e.g. diff_bias_amb:+0.02 or acc_dis:-2%% (overrides the suite's margin)",
    )
    diff.add_argument("--report", type=Path, help="write comparison.json, comparison.md and report.html into this folder")
    diff.add_argument("--allow-fingerprint-mismatch", action="store_true", help="compare on the shared cases when data, prompts or subset differ")
    diff.add_argument(
        "--on-inconclusive",
        default=None,
        metavar="pass|warn|fail",
        help="what a check that can neither show nor rule out a regression does: pass (quietly), warn (exit 0, and the "
        "summary names it with the suite size that would resolve it) or fail (exit 1, also for 'not compared'); "
        "default: the suite's [regression] on_inconclusive, else warn",
    )
    diff.add_argument("--fail-inconclusive", action="store_true", help="the same as --on-inconclusive=fail (kept as an alias)")
    diff.add_argument("--suite", type=Path, help="suite folder, to show prompt texts in the flip list (default: the manifest the results name)")
    add_data(diff, "mirror folder of the benchmark files (for the prompt texts)")
    diff.set_defaults(func=_diff, spelling=spelling_of(diff))


def _is_results(path: Path) -> bool:
    """Whether side A of a diff is a run (a report folder, or a file whose schema says so) rather
    than a baseline; a file that cannot be read is a baseline's to refuse."""
    from biascheck.reporting.results import RESULTS_SCHEMA

    if path.is_dir():
        return True
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA


@contextmanager
def _diff_fixes(fixes: dict[str, str] = DIFF_FIXES, fallback: str = DIFF_FIX) -> Iterator[None]:
    """An error raised inside whose fix names an option only a pytest run has (its
    ``unspelled`` options: recording a baseline, choosing an answer mode) gets the command's
    fix instead: ``fixes[field]``, else ``fallback``."""
    try:
        yield
    except BiascheckError as error:
        if not error.unspelled:
            raise
        raise BiascheckError(error.where, error.field, error.problem, fixes.get(error.field or "", fallback)) from None


def _reference(path: Path, candidate: tuple[Path, RunRecord], *, allow_mismatch: bool) -> tuple[str, BaselineRecord, dict[str, str | None] | None]:
    """(its path as shown, the baseline, its raw replies by case id) of side A of a diff:
    a baseline file (which keeps no replies: None), or a run's results.json (or report folder) as
    the baseline a recording of it would be."""
    from biascheck.evaluation import baseline as baselines

    if not _is_results(path):
        with _diff_fixes():
            return str(path), baselines.load(path), None
    file, results = read_run(path)
    fix = "compare runs of one suite version, or pass --allow-fingerprint-mismatch to compare the cases both share"
    baseline = run_as_baseline((str(file), results), (str(candidate[0]), candidate[1]), allow_mismatch=allow_mismatch, fix=fix, side="A")
    return str(file), baseline, {case.case_id: case.raw for case in results.cases}


def _prompts(args, results: RunRecord) -> tuple[dict[str, str] | None, str | None]:
    """Prompt texts by case id, from the suite (the results do not repeat them); None if unavailable."""
    from biascheck.suite import load_suite

    suite_dir = args.suite or Path(results.suite.manifest or "").parent
    if not (suite_dir / "suite.toml").is_file():
        return None, "prompt texts not shown: pass --suite DIR to show them in the flip list"
    try:
        with _diff_fixes({}, "pass --data DIR (the mirror of the benchmark files) to show them"):
            suite = load_suite(suite_dir, data_dir=args.data)
    except BiascheckError as exc:
        return None, f"prompt texts not shown: {exc}"
    return {case.case_id: case.messages[-1].content for case in suite.cases}, None


def _diff(args) -> int:
    from biascheck.options import check_on_inconclusive, parse_rules
    from biascheck.orchestration import BaselineOptions, Checked, compare_run, github_summary, write_report_folder, written_line
    from biascheck.reporting import github
    from biascheck.reporting.decision import decide
    from biascheck.reporting.terminal import render_comparison_terminal, render_decision_terminal

    # The options first: a usage error needs no file read.
    mode = check_on_inconclusive(args.on_inconclusive, args.fail_inconclusive, Option("on-inconclusive"), None, option("fail-inconclusive"))
    options = BaselineOptions(None, False, parse_rules(args.compare_fail), args.allow_fingerprint_mismatch, mode)
    candidate, results = read_run(args.results, "give as B the candidate run's results.json (or its report folder); a baseline goes first, as A")
    reference, baseline, replies = _reference(args.baseline, (candidate, results), allow_mismatch=args.allow_fingerprint_mismatch)
    regression, source, said = regression_table(args.suite, (reference, baseline), (candidate, results))
    if said:
        print(f"biascheck: {said}", file=sys.stderr)
    prompts, note = _prompts(args, results)
    with _diff_fixes():
        comparison = compare_run(
            baseline,
            results,
            options,
            baseline_path=reference,
            prompts=prompts,
            regression=regression,
            where=source,
            candidate=str(candidate),
            baseline_answers=replies,
        )
    color = sys.stdout.isatty()
    width = os.get_terminal_size().columns if color else 140
    sys.stdout.write(render_comparison_terminal([comparison], color=color, width=width))
    # Last, the decision: the comparison's alone, which is what the exit status says.
    sys.stdout.write(render_decision_terminal([decide(results, comparison, thresholds=False)], color=color, width=width))
    if note:
        print(note, file=sys.stderr)
    checked = Checked([results], {results.suite.name: comparison})
    if args.report:
        # The run's whole report with this comparison, replacing the folder at once like the plugin's:
        # never a comparison next to another run's results.json.
        files, problems = write_report_folder(checked, args.report)
        if problems:
            print_notices([problems[0].text])
            return exits.USAGE
        print(written_line(args.report, files, compared=[comparison.baseline["path"]]))
    if github.in_github_actions():
        for line in github.github_annotations([comparison]) + github.unresolved_annotations([comparison]):
            print(line)
        # The comparison alone: the run's own report is in the summary of the job that ran it.
        print_notices(notice.text for notice in github_summary(checked, reports=False))
    return exits.PASSED if comparison.passed else exits.FAILED
