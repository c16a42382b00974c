"""What one pytest session knows and does: its settings, the run made after collection, the
comparisons with the baselines, the reports and baselines written at the end. The hooks
(:mod:`biascheck.pytest_plugin.hooks`) only call into it; the items read it.
"""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from biascheck import options
from biascheck.core.errors import BiascheckError
from biascheck.options import BaselineOptions

if TYPE_CHECKING:
    from biascheck.session import RunConfig, RunResult
    from biascheck.suite import Suite


@dataclass(eq=False)  # registered as a plugin: hashed by identity
class BiascheckState:
    """What one pytest session knows: its settings, then the run's result and its JSON rendering."""

    config: pytest.Config
    run_config: RunConfig
    baseline: BaselineOptions
    report_dir: Path | None = None
    dry_run: bool = False
    one_process_note: str | None = None
    result: RunResult | None = None
    results_json: list[dict] | None = None
    baselines: dict = field(default_factory=dict)  # suite name -> (path, loaded baseline)
    comparisons: dict = field(default_factory=dict)  # suite name -> comparison document
    # suite name -> (scope, metric) of the selected regression items; None: not known (an xdist controller)
    selected_regressions: dict[str, set[tuple[str, str]]] | None = None
    # Failed reports seen by this process (the controller's under xdist): thresholds, and the rest.
    failed_thresholds: int = 0
    failed_other: int = 0
    batch_pending: bool = False  # --biascheck-batch-wait=no submitted batches: exit EXIT_BATCH_PENDING
    reports_written: Path | None = None  # the report folder, once written (the terminal summary names it)

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
        return cls(config, run_config, baseline, report_dir=report_dir, dry_run=dry_run, one_process_note=note)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """(Registered as a plugin.) A recording run forgives failed thresholds and nothing else."""
        if report.failed:
            if any(name == "biascheck_metric" for name, _ in report.user_properties):
                self.failed_thresholds += 1
            else:
                self.failed_other += 1

    def load_suite(self, manifest_path: Path) -> Suite:
        from biascheck.session import judge_for
        from biascheck.suite import load_suite

        suite = load_suite(manifest_path.parent, data_dir=self.run_config.data_dir)
        judge_for(suite, self.run_config)  # a judged suite without a judge is a collection error
        return suite

    def fingerprint(self, suite: Suite) -> dict:
        from biascheck.session import judge_for, scoring_for

        judge = judge_for(suite, self.run_config)
        return suite.fingerprint(judge.identity() if judge else None, scoring_for(suite, self.run_config))

    # --- what items read -------------------------------------------------------------------

    def _suite_result(self, suite_file):
        for result in self.result.suites:
            if result.suite is suite_file.suite:
                return result
        raise BiascheckError(suite_file.path, None, "was not run", "report this as a biascheck bug")

    def baseline_for(self, suite: Suite):
        """The baseline a suite is compared with: loaded and checked once, at collection."""
        if suite.name not in self.baselines:
            from biascheck.evaluation import baseline as baselines
            from biascheck.evaluation.regression import check_comparable

            path = baselines.baseline_path(
                self.baseline.pattern, suite=suite.name, model=self.run_config.model.model, root=self.config.invocation_params.dir
            )
            document = baselines.load(path)
            check_comparable(
                document,
                {"name": suite.name, "benchmark": suite.manifest.benchmark, "fingerprint": self.fingerprint(suite)},
                allow_mismatch=self.baseline.allow_mismatch,
                path=str(path),
            )
            self.baselines[suite.name] = (path, document)
        return self.baselines[suite.name]

    def regression_rules(self, suite: Suite) -> dict:
        from biascheck.evaluation.regression import resolve_rules

        return resolve_rules(suite.manifest.benchmark, suite.manifest.gated_metrics(None), suite.manifest.regression.rules, self.baseline.rules)

    def check(self, suite_file, scope: str, metric: str):
        comparison = self.comparisons.get(suite_file.suite.name)
        if comparison is None:
            return None
        for result in comparison["results"]:
            if result["scope"] == scope and result["metric"] == metric:
                return result
        return None

    def outcome(self, suite_file, case_id: str):
        return self._suite_result(suite_file).outcomes[case_id]

    def verdict(self, suite_file, scope: str, metric: str):
        for verdict in self._suite_result(suite_file).verdicts:
            if verdict.scope == scope and verdict.metric == metric:
                return verdict
        return None

    def case_errors(self, suite_file) -> int | None:
        """Errored cases of the suite in this run; ``None`` when none of its cases was selected."""
        if not any(r.suite is suite_file.suite for r in self.result.suites):
            return None
        return sum(o.status == "error" for o in self._suite_result(suite_file).outcomes.values())

    def incomplete_reason(self) -> str | None:
        return self.result.incomplete if self.result else None

    # --- after collection: the run ---------------------------------------------------------

    def collection_finish(self, session: pytest.Session, selection, metrics: dict[str, set[tuple[str, str]]] | None = None) -> None:
        """``selection``: (suite file, its selected cases) pairs; ``metrics``: suite name -> the
        (scope, metric) of its selected metric items. Refuses what cannot work before any call,
        then makes every call (or, for a dry run, prices them) and compares."""
        self._check_selection(session, selection)
        if self.dry_run:
            self._dry_run(session, selection)
            return
        self._run(session, selection)
        if metrics is not None and self.results_json:
            from biascheck.reporting.results import mark_deselected

            # Threshold checks whose metric items -k or node ids left out do not gate this run: the
            # results say so, rather than show a FAIL the exit status does not carry.
            mark_deselected(self.results_json, metrics)
        if self.baseline.compare and self.run_config.shard is None:
            self._compare(selection)

    def _check_selection(self, session: pytest.Session, selection) -> None:
        names: dict[str, Path] = {}
        for suite_file, _ in selection:
            other = names.setdefault(suite_file.suite.name, suite_file.path)
            if other != suite_file.path:
                raise pytest.UsageError(
                    f"{suite_file.path}: suite.name: {suite_file.suite.name!r} is also the name of {other}; give each suite a distinct name"
                )
        # Refused before any call; an xdist worker cannot raise a usage error cleanly, so there the
        # controller refuses the write at the end (baseline.refuse_reason sees the partial run).
        if self.baseline.update and len(selection) > 1 and self.baseline.pattern and "{suite}" not in self.baseline.pattern:
            raise pytest.UsageError(
                f"--biascheck-baseline {self.baseline.pattern}: {len(selection)} suites would overwrite one file; "
                "put {suite} in the path, e.g. baselines/{suite}/release.json"
            )
        if self.baseline.update and not hasattr(session.config, "workerinput"):
            partial = [(sf, len(cases)) for sf, cases in selection if len(cases) != len(sf.suite.cases)]
            if partial:
                suite_file, n = partial[0]
                raise pytest.UsageError(
                    f"{suite_file.path}: --biascheck-update-baseline: only {n} of the suite's {len(suite_file.suite.cases)} cases are selected; "
                    "a baseline must cover the whole suite: run it without -k or node ids"
                )

    def _run(self, session: pytest.Session, selection) -> None:
        from rich.markup import escape

        from biascheck import session as biassession
        from biascheck.execution.runner import RichProgress, RunInterrupted, RunStatus
        from biascheck.reporting.results import build_results

        capture = session.config.pluginmanager.getplugin("capturemanager")
        # RichProgress shows its label as rich markup: a model string such as openai/x[/] must stay text.
        label = f"biascheck {escape(self.run_config.model.model)}"
        try:
            with capture.global_and_fixture_disabled():
                self.result = biassession.run(
                    [(suite_file.suite, cases) for suite_file, cases in selection],
                    self.run_config,
                    progress=RichProgress(label),
                )
        except BiascheckError as exc:
            # Nothing could be measured (unusable store, simulated server that would not start):
            # one line and exit code 4, rather than thousands of items failing with the same message.
            raise pytest.UsageError(str(exc)) from None
        except RunInterrupted as exc:  # Ctrl-C: what was kept and how to resume, not where Python was
            pytest.exit(f"biascheck: {exc}", returncode=pytest.ExitCode.INTERRUPTED)
        self.results_json = build_results(self.result)
        status = self.result.stats.status
        if status is RunStatus.BATCH_PENDING:
            # Nothing can be scored yet: no item runs, and the exit status says so (neither pass nor fail).
            self.batch_pending = True
            pytest.exit(f"biascheck: {self.result.incomplete}", returncode=options.EXIT_BATCH_PENDING)
        if status.fatal:
            # The results say why the run stopped. pytest_sessionfinish runs after a usage error too
            # and writes them, as for any run: the report folder, the job summary, a refused baseline.
            whose = f"{self.run_config.model.model}: " if status is RunStatus.FATAL_MODEL_ERROR else ""
            raise pytest.UsageError(whose + (self.result.incomplete or ""))

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

    def _compare(self, selection) -> None:
        from biascheck.evaluation.regression import compare, settings_from

        for document, (suite_file, cases) in zip(self.results_json, selection):
            suite = suite_file.suite
            path, baseline = self.baseline_for(suite)
            settings = settings_from(
                document,
                self.baseline.rules,
                allow_fingerprint_mismatch=self.baseline.allow_mismatch,
                **({"on_inconclusive": self.baseline.on_inconclusive} if self.baseline.on_inconclusive else {}),
            )
            prompts = {case.case_id: case.messages[-1].content for case in cases}
            try:
                self.comparisons[suite.name] = compare(baseline, document, settings, baseline_path=self._shown_path(path), prompts=prompts)
            except BiascheckError as exc:
                raise pytest.UsageError(str(exc)) from None

    def _shown_path(self, path: Path) -> str:
        """Relative to the working folder when inside it (as a user typed it), else absolute."""
        try:
            return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
        except ValueError:
            return str(path)

    # --- xdist ------------------------------------------------------------------------------

    def hand_to_controller(self) -> None:
        """An xdist worker hands its results to the controller, which reports them once."""
        if self.results_json is not None:
            self.config.workeroutput["biascheck"] = json.dumps(self.results_json)
            self.config.workeroutput["biascheck_comparisons"] = json.dumps(self.comparisons)

    def merge_worker(self, workeroutput: dict) -> None:
        """The controller receives a worker's results."""
        payload = workeroutput.get("biascheck")
        if not payload:
            return
        documents = json.loads(payload)
        # Comparisons are a pure function of the outcomes, the same on every worker.
        self.comparisons.update(json.loads(workeroutput.get("biascheck_comparisons", "{}")))
        if self.results_json is None:
            self.results_json = documents
            return
        # Every worker holds the same outcomes; only the call counters differ (the worker that won the
        # store's lock made the calls, the others read them). Report the run's totals.
        merged = []
        for mine, theirs in zip(self.results_json, documents):
            base, other = (mine, theirs) if mine["run"]["calls"] >= theirs["run"]["calls"] else (theirs, mine)
            for counter in ("calls", "retries", "cost_usd", "judge_calls"):
                if counter in base["run"]:
                    base["run"][counter] += other["run"][counter]
            merged.append(base)
        self.results_json = merged

    # --- at the end: reports, baselines, the summary ----------------------------------------

    def session_finish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            self.hand_to_controller()
            return
        self._write_reports(session)
        if self.baseline.update:
            self._update_baselines(session)
        if self.batch_pending:
            session.exitstatus = options.EXIT_BATCH_PENDING

    def _say(self, session: pytest.Session, message: str, **markup) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write("\n")
            reporter.write_line(message, **markup)

    def _write_reports(self, session: pytest.Session) -> None:
        if not self.results_json:
            return
        from biascheck.reporting import github
        from biascheck.reporting.write import write_reports

        if github.in_github_actions():
            self._github_step_summary(session)
        folder = self.report_dir or options.default_report_dir(self.results_json)
        try:
            write_reports(self.results_json, folder, self.comparisons)
        except BiascheckError as exc:  # a folder that is not biascheck's to replace
            problem = str(exc)
        except OSError as exc:
            problem = f"{folder}: could not write the report ({exc.strerror or exc}); point --biascheck-report at a writable folder"
        else:
            self.reports_written = folder
            return
        # A gate whose evidence was not written must not pass.
        self._say(session, f"biascheck: {problem}", red=True)
        self.failed_other += 1
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _github_step_summary(self, session: pytest.Session) -> None:
        from biascheck.reporting import github

        problem = github.write_step_summary(self.results_json, self.comparisons)
        if problem:
            self._say(session, f"biascheck: {problem}", yellow=True)

    def _update_baselines(self, session: pytest.Session) -> None:
        """syrupy-style: a baseline changes only when asked, and only from a whole, answered run."""
        from biascheck.evaluation import baseline as baselines

        if not self.results_json:
            return  # nothing was run
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self._say(session, "biascheck: the run was interrupted; no baseline was written", red=True)
            return
        commit = baselines.git_commit(Path(session.config.invocation_params.dir))
        written = 0
        for document in self.results_json:
            name = document["suite"]["name"]
            path = baselines.baseline_path(
                self.baseline.pattern, suite=name, model=document["model"]["model"], root=session.config.invocation_params.dir
            )
            reason = baselines.refuse_reason(document)
            if reason:
                self._say(session, f"biascheck: {name}: not writing the baseline {self._shown_path(path)}: {reason}", red=True)
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                continue
            try:
                path.exists()  # raises for a name the file system refuses (too long)
                kept = baselines.replace(baselines.from_results(document, git=commit), path)
            except BiascheckError as exc:  # a history/ that cannot take one more file
                self._say(session, f"biascheck: {exc}", red=True)
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                continue
            except OSError as exc:
                self._say(session, f"biascheck: {path}: could not write the baseline ({exc.strerror or exc})", red=True)
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                continue
            written += 1
            history = f" (the one it replaced is kept as {self._shown_path(kept)})" if kept else ""
            self._say(session, f"biascheck: {name}: baseline {'replaced' if kept else 'written'}: {self._shown_path(path)}{history}", green=True)
        self._forgive_recorded_thresholds(session, every_baseline_written=written == len(self.results_json))

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
        if not self.results_json:
            return  # nothing was selected, or this is an xdist worker
        import os

        from biascheck.reporting import github
        from biascheck.reporting.terminal import render_comparison_terminal, render_terminal

        # A CI log has no edge: unless it says its width (COLUMNS, which pytest reads), it gets a wide
        # summary rather than pytest's fallback of 80 columns, which wraps every table.
        width = terminalreporter._tw.fullwidth if terminalreporter.isatty or os.environ.get("COLUMNS") else 160
        terminalreporter.write_sep("=", "biascheck summary")
        if self.one_process_note:
            terminalreporter.write_line(self.one_process_note)
        terminalreporter.write(render_terminal(self.results_json, color=terminalreporter.hasmarkup, width=width))
        comparisons = [self.comparisons[d["suite"]["name"]] for d in self.results_json if d["suite"]["name"] in self.comparisons]
        if comparisons:
            terminalreporter.write_sep("=", "biascheck comparison with the baseline")
            terminalreporter.write(render_comparison_terminal(comparisons, color=terminalreporter.hasmarkup, width=width))
        if self.reports_written is not None:
            terminalreporter.write_line(f"biascheck: reports in {self.reports_written} (report.html, report.md, results.json)", bold=True)
        if github.in_github_actions():
            failed = [(report.nodeid, report.longreprtext) for report in terminalreporter.stats.get("failed", [])]
            for line in github.failed_check_annotations(failed, self.results_json, Path(self.config.rootpath)):
                terminalreporter.write_line(line)
            # Like ::error lines, a ::warning names only checks whose items ran.
            chosen = self.selected_regressions
            selected = [
                c
                if chosen is None
                else {**c, "results": [r for r in c["results"] if (r["scope"], r["metric"]) in chosen.get(c["suite"]["name"], set())]}
                for c in comparisons
            ]
            for line in github.unresolved_annotations(selected):
                terminalreporter.write_line(line)


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
    twice, which would otherwise traverse everything). Reference counting frees what is dropped
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
        gc.freeze()
        gc.enable()


def session_state(config: pytest.Config) -> BiascheckState | None:
    """The session's state; None when biascheck is not enabled in it."""
    return config.stash.get(STATE_KEY, None)
