"""What one pytest session knows and does: its settings, the run made after collection, the
comparisons with the baselines, the reports and baselines written at the end. The hooks
(:mod:`biascheck.pytest_plugin.hooks`) only call into it; the items read it.
"""

from __future__ import annotations

import gc
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from biascheck import options
from biascheck.core import garbage
from biascheck.core.errors import BiascheckError
from biascheck.options import BaselineOptions
from biascheck.orchestration import Checked, Gate, Level

if TYPE_CHECKING:
    from biascheck.records.comparison import Comparison
    from biascheck.session import RunConfig, RunResult
    from biascheck.suite import Suite


@dataclass(eq=False)  # registered as a plugin: hashed by identity
class BiascheckState:
    """What one pytest session knows: its settings and gate (:class:`biascheck.orchestration.Gate`,
    which runs, compares, reports and records), then what the run gave (:class:`Checked`)."""

    config: pytest.Config
    gate: Gate
    dry_run: bool = False
    one_process_note: str | None = None
    checked: Checked | None = None
    # suite name -> (scope, metric) of the selected regression items; None: not known (an xdist controller)
    selected_regressions: dict[str, set[tuple[str, str]]] | None = None
    # Failed reports seen by this process (the controller's under xdist): thresholds, and the rest.
    failed_thresholds: int = 0
    failed_other: int = 0
    stopped: int | None = None  # the exit status of a session the run stopped after collection (see stop)

    @property
    def run_config(self) -> RunConfig:
        return self.gate.config

    @property
    def baseline(self) -> BaselineOptions:
        return self.gate.baseline

    @property
    def comparisons(self) -> dict[str, Comparison]:
        return self.checked.comparisons if self.checked else {}

    @classmethod
    def configure(cls, config: pytest.Config) -> BiascheckState:
        """The session's state from its options; a usage error naming the option when one is wrong."""
        try:
            options.resolve_suite_names(config)
            note = options.run_suites_in_one_process(config)
            run_config = options.run_config(config)
            dry_run = options.check_dry_run(config)
            report_dir = options.report_dir(config)
            baseline = options.baseline_options(config)
            log = options.log_options(config)  # a tracker whose client library is missing: one line, before collection
            if not (dry_run or config.option.collectonly or hasattr(config, "workerinput")):
                # Before collection: a run that cannot make its calls says so now, whatever the suite size.
                from biascheck.session import check_before_collection

                check_before_collection(run_config)
            if run_config.shard and baseline.update:
                raise BiascheckError(
                    "--biascheck-update-baseline",
                    None,
                    f"a shard ({run_config.shard}) is part of the suite",
                    "record from the run on the merged store",
                )
        except BiascheckError as exc:
            raise pytest.UsageError(str(exc)) from None
        gate = Gate(run_config, baseline, report_dir=report_dir, root=Path(config.invocation_params.dir), default_report=True, log=log)
        return cls(config, gate, dry_run=dry_run, one_process_note=note)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """(Registered as a plugin.) A recording run forgives failed thresholds and nothing else."""
        if report.failed:
            if any(name == "biascheck_metric" for name, _ in report.user_properties):
                self.failed_thresholds += 1
            else:
                self.failed_other += 1

    def load_suite(self, manifest_path: Path) -> Suite:
        return self.gate.load_suite(manifest_path.parent)  # a judged suite without a judge is a collection error

    # --- what items read -------------------------------------------------------------------

    def _run_result(self) -> RunResult:
        """The run this process made, which its items read (they run after it)."""
        if self.checked is None or self.checked.result is None:
            raise BiascheckError("biascheck", None, "an item ran before the run was made", "report this as a biascheck bug")
        return self.checked.result

    def _suite_result(self, suite_file):
        for result in self._run_result().suites:
            if result.suite is suite_file.suite:
                return result
        raise BiascheckError(suite_file.path, None, "was not run", "report this as a biascheck bug")

    def baseline_for(self, suite: Suite):
        """The baseline a suite is compared with: loaded and checked once, at collection."""
        return self.gate.baseline_for(suite)

    def regression_rules(self, suite: Suite) -> dict:
        return self.gate.regression_rules(suite)

    def check(self, suite_file, scope: str, metric: str):
        comparison = self.comparisons.get(suite_file.suite.name)
        if comparison is None:
            return None
        for check in comparison.checks:
            if check.scope == scope and check.metric == metric:
                return check
        return None

    def record(self, suite_file):
        """The suite's RunRecord, as the reports read it; None when none of its cases was selected."""
        runs = self.checked.runs if self.checked is not None else []
        return next((run for run in runs if run.suite.name == suite_file.suite.name), None)

    def outcome(self, suite_file, case_id: str):
        return self._suite_result(suite_file).outcomes[case_id]

    def verdict(self, suite_file, scope: str, metric: str):
        for verdict in self._suite_result(suite_file).verdicts:
            if verdict.scope == scope and verdict.metric == metric:
                return verdict
        return None

    def case_errors(self, suite_file) -> int | None:
        """Errored cases of the suite in this run; ``None`` when none of its cases was selected."""
        if not any(r.suite is suite_file.suite for r in self._run_result().suites):
            return None
        return sum(o.status == "error" for o in self._suite_result(suite_file).outcomes.values())

    def incomplete_reason(self) -> str | None:
        return self.checked.result.incomplete if self.checked and self.checked.result else None

    # --- after collection: the run ---------------------------------------------------------

    def collection_finish(self, session: pytest.Session, selection, metrics: dict[str, set[tuple[str, str]]] | None = None) -> None:
        """``selection``: (suite file, its selected cases) pairs; ``metrics``: suite name -> the
        (scope, metric) of its selected metric items. Refuses what cannot work before any call,
        then makes every call (or, for a dry run, prices them) and compares."""
        try:
            # An xdist worker cannot raise a usage error cleanly, so there the controller refuses a
            # partial recording at the end (baseline.refuse_reason sees the partial run).
            self.gate.check_selection([(sf.suite, cases) for sf, cases in selection], partial_allowed=hasattr(session.config, "workerinput"))
        except BiascheckError as exc:
            raise pytest.UsageError(str(exc)) from None
        if self.dry_run:
            self._dry_run(session, selection)
            return
        self._run(session, selection, metrics)

    def _run(self, session: pytest.Session, selection, metrics) -> None:
        from rich.markup import escape

        from biascheck.execution.progress import RichProgress
        from biascheck.execution.runner import RunInterrupted
        from biascheck.execution.stats import RunStatus

        capture = session.config.pluginmanager.getplugin("capturemanager")
        # RichProgress shows its label as rich markup: a model string such as openai/x[/] must stay text.
        label = f"biascheck {escape(self.run_config.model.model)}"
        try:
            with capture.global_and_fixture_disabled():
                self.checked = self.gate.run(
                    [(suite_file.suite, cases) for suite_file, cases in selection],
                    progress=RichProgress(label),
                    selected=metrics,
                    selected_regressions=self.selected_regressions,
                )
        except BiascheckError as exc:
            # Nothing could be measured (unusable store, simulated server that would not start), or
            # a baseline could not be compared with: one line and exit code 4, rather than thousands
            # of items failing with the same message.
            raise pytest.UsageError(str(exc)) from None
        except RunInterrupted as exc:  # Ctrl-C: what was kept and how to resume, not where Python was
            self.stop(session, f"biascheck: {exc}", pytest.ExitCode.INTERRUPTED)
            return
        result = self._run_result()
        status = result.stats.status
        if status is RunStatus.BATCH_PENDING:
            # Nothing can be scored yet: no item runs, and the exit status says so (neither pass nor fail).
            self.stop(session, f"biascheck: {result.incomplete}", options.EXIT_BATCH_PENDING)
            return
        if status.fatal:
            # The results say why the run stopped. pytest_sessionfinish runs after a usage error too
            # and writes them, as for any run: the report folder, the job summary, a refused baseline.
            whose = f"{self.run_config.model.model}: " if status is RunStatus.FATAL_MODEL_ERROR else ""
            raise pytest.UsageError(whose + (result.incomplete or ""))

    def stop(self, session: pytest.Session, message: str, status: int) -> None:
        """End the session after collection with ``message``, one line, and exit ``status``: no
        item runs (pytest_runtestloop), and pytest_sessionfinish sets the status. pytest.exit would
        wrap the line in the name of pytest's exception ("! ...Exit: ... !"). An xdist worker
        still exits through it: its controller reports why it stopped."""
        if hasattr(self.config, "workerinput"):
            pytest.exit(message, returncode=status)
        self.stopped = status
        self._say(session, message, red=True)

    def _dry_run(self, session: pytest.Session, selection) -> None:
        """--biascheck-dry-run: what the selected cases would send and cost, printed before any call."""
        from biascheck.dryrun import estimate, render

        try:
            estimates = estimate([(suite_file.suite, cases) for suite_file, cases in selection], self.run_config, store=self.run_config.store_path)
        except BiascheckError as exc:
            raise pytest.UsageError(str(exc)) from None
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        write = reporter.write if reporter is not None else print
        if reporter is not None:
            reporter.write_sep("=", "biascheck dry run: no model call made")
        write(render(estimates) if estimates else "no case selected: no model call would be made\n")

    # --- xdist ------------------------------------------------------------------------------

    def hand_to_controller(self) -> None:
        """An xdist worker hands its results to the controller, which reports them once."""
        if self.checked is not None and hasattr(self.config, "workeroutput"):  # set by xdist on a worker's config
            self.config.workeroutput.update(self.checked.to_json())

    def merge_worker(self, workeroutput: dict) -> None:
        """The controller receives a worker's results (see :meth:`Checked.merged`)."""
        theirs = Checked.from_json(workeroutput)
        if theirs is not None:
            self.checked = theirs if self.checked is None else self.checked.merged(theirs)

    # --- at the end: reports, baselines, the summary ----------------------------------------

    def session_finish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            self.hand_to_controller()
            return
        if self.stopped is not None:
            session.exitstatus = self.stopped
        if self.checked is not None and self.checked.runs:
            self._tell(session, self.gate.publish(self.checked))
            if self.baseline.update:
                self._update_baselines(session, self.checked)
        if self.stopped is not None:  # again: a failed notice above does not turn an interrupt or pending batches into a failure
            session.exitstatus = self.stopped

    def _say(self, session: pytest.Session, message: str, **markup) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write("\n")
            reporter.write_line(message, **markup)

    def _tell(self, session: pytest.Session, notices) -> None:
        """The gate's notices as lines; one that is an error fails the session."""
        for notice in notices:
            self._say(session, f"biascheck: {notice.text}", **{COLORS[notice.level]: True})
            if notice.level is Level.ERROR:
                self.failed_other += 1
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _update_baselines(self, session: pytest.Session, checked: Checked) -> None:
        """syrupy-style: a baseline changes only when asked, and only from a whole, answered run."""
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self._say(session, "biascheck: the run was interrupted; no baseline was written", red=True)
            return
        notices = self.gate.record_baselines(checked)
        self._tell(session, notices)
        self._forgive_recorded_thresholds(session, every_baseline_written=all(n.level is Level.OK for n in notices))

    def _forgive_recorded_thresholds(self, session: pytest.Session, *, every_baseline_written: bool) -> None:
        """A recording run's job is the baseline: when it wrote every one, failed thresholds (still
        listed above, and in the report) do not fail it, unless --biascheck-strict-record. A release
        whose bias is over a threshold is the gate's to stop; the recording keeps the evidence."""
        if (
            self.baseline.strict_record
            or not every_baseline_written
            or self.failed_other
            or not self.failed_thresholds
            or session.exitstatus != pytest.ExitCode.TESTS_FAILED
        ):
            return
        self._say(
            session,
            f"biascheck: {self.failed_thresholds} threshold check(s) failed (listed above); every baseline was recorded, "
            "so the run passes (--biascheck-strict-record makes it fail)",
            yellow=True,
        )
        session.exitstatus = pytest.ExitCode.OK

    def terminal_summary(self, terminalreporter) -> None:
        checked = self.checked
        if checked is None or not checked.runs:
            return  # nothing was selected, or this is an xdist worker
        from biascheck.reporting import github
        from biascheck.reporting.decision import decisions
        from biascheck.reporting.terminal import render_comparison_terminal, render_decision_terminal, render_terminal

        runs, records = checked.runs, checked.comparisons

        width = summary_width(terminalreporter.isatty)
        terminalreporter.write_sep("=", "biascheck summary")
        if self.one_process_note:
            terminalreporter.write_line(self.one_process_note)
        terminalreporter.write(render_terminal(runs, color=terminalreporter.hasmarkup, width=width))
        comparisons = [records[run.suite.name] for run in runs if run.suite.name in records]
        if comparisons:
            terminalreporter.write_sep("=", "biascheck comparison with the baseline")
            terminalreporter.write(render_comparison_terminal(comparisons, color=terminalreporter.hasmarkup, width=width))
        if github.in_github_actions():
            failed = [(report.nodeid, report.longreprtext) for report in terminalreporter.stats.get("failed", [])]
            for line in github.failed_check_annotations(failed, runs, Path(self.config.rootpath)):
                terminalreporter.write_line(line)
            # Like ::error lines, a ::warning names only checks whose items ran.
            chosen = self.selected_regressions
            selected = [
                c if chosen is None else replace(c, checks=tuple(r for r in c.checks if (r.scope, r.metric) in chosen.get(c.suite["name"], set())))
                for c in comparisons
            ]
            for line in github.unresolved_annotations(selected):
                terminalreporter.write_line(line)
        # Last, the decision and its reasons, then every file the run wrote.
        terminalreporter.write_sep("=", "biascheck decision")
        terminalreporter.write(render_decision_terminal(decisions(runs, records), color=terminalreporter.hasmarkup, width=width))
        last = self.gate.last_line(self.checked) if self.checked else None
        if last:
            terminalreporter.write_line(last, bold=True)


def summary_width(isatty: bool) -> int:
    """The width of biascheck's summary tables: the terminal's, as pytest measures it (COLUMNS, else
    the terminal, else 80; under 40 is 80). A CI log has no edge: unless it says its width (COLUMNS),
    it gets a wide summary rather than the fallback of 80 columns, which wraps every table."""
    if not isatty and not os.environ.get("COLUMNS"):
        return 160
    width = shutil.get_terminal_size(fallback=(80, 24)).columns
    return width if width >= 40 else 80


COLORS = {Level.OK: "green", Level.WARNING: "yellow", Level.ERROR: "red"}
STATE_KEY: pytest.StashKey[BiascheckState] = pytest.StashKey()
# Set while collection runs with the cyclic garbage collector paused.
COLLECTOR_PAUSED: pytest.StashKey[bool] = pytest.StashKey()


def pause_collector(config: pytest.Config) -> bool:
    """Collecting a suite makes hundreds of thousands of objects that all live to the end of the
    session (cases, items), which Python's cyclic garbage collector would traverse again and
    again while they are made (a quarter of collecting hbb-full) and after, through the run. It
    pauses while items are collected (pytest_collection); :func:`resume_collector` freezes what
    collection made out of its sight and resumes it before the model calls, which
    pytest_collection_finish makes inside pytest_collection (their clients make cyclic garbage).
    What is frozen goes back in its sight at the session's very end (a cleanup registered by
    pytest_configure, so run after pytest's own: its unraisable-exception check collects garbage
    twice, which would otherwise traverse everything); the model calls' own freeze nests in this
    one (biascheck.core.garbage), so it holds through them. Reference counting frees what is dropped
    meanwhile. False, and nothing done, when the collector was off already."""
    if not gc.isenabled():
        return False
    gc.disable()
    config.stash[COLLECTOR_PAUSED] = True
    return True


def resume_collector(config: pytest.Config) -> None:
    """See :func:`pause_collector`; nothing when it is not paused."""
    if config.stash.get(COLLECTOR_PAUSED, False):
        config.stash[COLLECTOR_PAUSED] = False
        garbage.freeze()
        gc.enable()


def session_state(config: pytest.Config) -> BiascheckState | None:
    """The session's state; None when biascheck is not enabled in it."""
    return config.stash.get(STATE_KEY, None)
