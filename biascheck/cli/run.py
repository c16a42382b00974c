"""``biascheck run SUITE... --model M``: the run ``pytest --biascheck`` makes, without pytest (for
scripts and notebooks): the plugin's options without their ``--biascheck-`` prefix (one table:
:func:`biascheck.options.add_command_options`), the same gate (:class:`biascheck.orchestration.Gate`),
results, reports and baselines; exit 0 pass, 1 gate failed, 4 the run stopped (the codes:
:mod:`biascheck.core.exits`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from biascheck.cli.common import listed_suites, print_notices, spelling_of
from biascheck.core import exits
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option


def add_parser(commands: Any) -> None:
    from biascheck.options import add_command_options

    run = commands.add_parser(
        "run",
        help="run suites against a model without pytest: the same run, reports and baselines as pytest --biascheck (exit 1 when a gate fails)",
        description="Run whole suites against a model, as pytest --biascheck does, for scripts and notebooks: the same "
        "options without their --biascheck- prefix (--model, --data, --cache, --report, --baseline, --update-baseline ...), "
        "the same response store, results.json, reports, comparisons and baselines. The summary is printed. Exit 0 when every "
        "gate passes (a recording: when every baseline was written), 1 when one fails, 2 on a usage error, 4 when the run "
        "stopped (the endpoint cannot be reached, a fatal model error, a store that cannot be written), 6 when --batch-wait=no "
        "left batches pending, 130 when interrupted (the exit codes: docs/usage.md).",
    )
    run.add_argument("suites", nargs="+", metavar="SUITE", help="a suite folder, a folder of them, or a packaged suite's name")
    add_command_options(run)
    # Every option of the table is the command's: an error names each as --key.
    run.set_defaults(func=_run, spelling=spelling_of(run))


def _run(args) -> int:
    """``biascheck run``: the plugin's run, comparison, reports and baselines, through the same gate."""
    from biascheck import options
    from biascheck.orchestration import Gate, Level

    settings = options.command_settings(args)
    config = options.run_config(settings)
    baseline = options.baseline_options(settings)
    report_dir = options.report_dir(settings)
    log = options.log_options(settings)
    if config.shard and baseline.update:
        raise BiascheckError(
            Option("update-baseline"), None, f"a shard ({config.shard}) is part of the suite", "record from the run on the merged store"
        )
    dry_run = options.flag(settings, "--biascheck-dry-run")
    if not dry_run:
        from biascheck.session import check_before_collection

        check_before_collection(config)
    gate = Gate(config, baseline, report_dir=report_dir, log=log)
    # Absolute, as pytest collects them: results.json names the manifest by this path.
    suites = [gate.load_suite(Path(os.path.abspath(path))) for _, _, path in listed_suites(args.suites)]
    for suite in suites:
        if baseline.compare:
            gate.baseline_for(suite)
            gate.regression_rules(suite)
    selection = [(suite, [case for case in suite.cases if config.shard is None or config.shard.holds(case)]) for suite in suites]
    gate.check_selection(selection)
    if dry_run:
        from biascheck.dryrun import estimate, render

        estimates = estimate(selection, config, store=config.store_path)
        sys.stdout.write(render(estimates) if estimates else "no case selected: no model call would be made\n")
        return exits.PASSED
    try:
        checked = _run_gate(gate, selection)
    except BiascheckError as error:  # during the run (a store that cannot be used, a simulator that will not start): as pytest's 4
        print(f"biascheck: {error}", file=sys.stderr)
        return exits.RUN_STOPPED
    from biascheck.execution.stats import RunStatus

    result = checked.result
    assert result is not None
    status = result.stats.status
    if checked.runs and not status.fatal and status is not RunStatus.BATCH_PENDING:
        _print_summary(checked)
    notices = gate.publish(checked)
    if baseline.update and checked.runs:
        notices += gate.record_baselines(checked)
    print_notices(notice.text for notice in notices)
    last = gate.last_line(checked)
    if last:
        print(last)
    if status is RunStatus.BATCH_PENDING:
        print(f"biascheck: {result.incomplete}", file=sys.stderr)
        return exits.BATCH_PENDING
    if status.fatal:  # not a usage error: the command was right, the run could not go on
        whose = f"{config.model.model}: " if status is RunStatus.FATAL_MODEL_ERROR else ""
        print(f"biascheck: {whose}{result.incomplete or ''}", file=sys.stderr)
        return exits.RUN_STOPPED
    if any(notice.level is Level.ERROR for notice in notices):
        return exits.FAILED
    if baseline.update:  # a recording's job is the baseline; its failed thresholds are reported above
        return exits.FAILED if baseline.strict_record and not all(r.passed for r in checked.runs) else exits.PASSED
    return exits.PASSED if checked.passed else exits.FAILED


def _run_gate(gate, selection):
    from rich.markup import escape

    from biascheck.execution.progress import RichProgress

    # RichProgress shows its label as rich markup: a model string such as openai/x[/] must stay text.
    return gate.run(selection, progress=RichProgress(f"biascheck {escape(gate.config.model.model)}"))


def _print_summary(checked) -> None:
    from biascheck.reporting import github
    from biascheck.reporting.decision import decisions
    from biascheck.reporting.terminal import render_comparison_terminal, render_decision_terminal, render_terminal

    color = sys.stdout.isatty()
    width = os.get_terminal_size().columns if color else 160
    runs, records = checked.runs, checked.comparisons
    sys.stdout.write(render_terminal(runs, color=color, width=width))
    comparisons = [records[run.suite.name] for run in runs if run.suite.name in records]
    if comparisons:
        sys.stdout.write(render_comparison_terminal(comparisons, color=color, width=width))
        if github.in_github_actions():
            for line in github.github_annotations(comparisons) + github.unresolved_annotations(comparisons):
                print(line)
    # Last, the decision and its reasons.
    sys.stdout.write(render_decision_terminal(decisions(runs, records), color=color, width=width))
