"""One gated run, for the pytest plugin and the ``biascheck`` command alike: the selected cases are
run (:func:`biascheck.session.run`), each suite compared with its baseline, the report folder and
GitHub's job summary written, and baselines recorded. The plugin adapts it to pytest (items,
usage errors, exit statuses); ``biascheck run`` and ``biascheck diff`` call it without pytest.

- :class:`Gate`: a run's settings (:class:`~biascheck.session.RunConfig`, :class:`BaselineOptions`,
  the report folder) and what it loaded (suites, baselines). ``gate.run(selection)`` gives a
  :class:`Checked`; ``gate.publish(checked)`` and ``gate.record_baselines(checked)`` write what it
  says and return :class:`Notice` lines for the caller to show.
- :class:`Checked`: the records of a run (``results.json``) and of its comparisons
  (``comparison.json``), and the prompts its report shows; :meth:`Checked.merged` combines those
  of two processes of one run (pytest-xdist's workers) into a new one, without changing either.

Heavy modules (the session, litellm, the statistics) are imported when first used: the plugin
imports this module at start-up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from biascheck.core.errors import BiascheckError
from biascheck.core.files import RUN_MARKER
from biascheck.core.spelling import Option, option

if TYPE_CHECKING:
    from biascheck.execution.progress import Progress
    from biascheck.loggers import LogOptions
    from biascheck.records.baseline import BaselineRecord
    from biascheck.records.comparison import Comparison
    from biascheck.records.run import RunRecord
    from biascheck.reporting.results import Prompts
    from biascheck.session import RunConfig, RunResult
    from biascheck.suite import Suite

# What each pytest-xdist worker counts for itself: the run's calls are made by the worker that won
# the response store's lock and read from the store by the others, so these add up across workers.
WORKER_COUNTERS = ("calls", "retries", "cost_usd", "judge_calls")


@dataclass(frozen=True)
class BaselineOptions:
    pattern: str | None
    update: bool
    rules: list  # command-line Rules
    allow_mismatch: bool
    on_inconclusive: str | None  # pass, warn or fail; None: each suite's manifest decides
    strict_record: bool = False

    @property
    def compare(self) -> bool:
        return self.pattern is not None and not self.update


class Level(Enum):
    OK = "ok"  # done as asked (a baseline written)
    WARNING = "warning"  # said, and the run's outcome is unchanged
    ERROR = "error"  # the run fails: its evidence or its baseline was not written


@dataclass(frozen=True)
class Notice:
    """A line for the caller to show (without the ``biascheck: `` prefix), and what it means."""

    text: str
    level: Level


@dataclass(frozen=True)
class Checked:
    """A run's records, one per suite in the selection's order, its comparisons with the baselines
    by suite name, and by suite name the prompts of the cases its report.html shows. ``result`` is
    the run itself, in the process that made it."""

    runs: list[RunRecord]
    comparisons: dict[str, Comparison] = field(default_factory=dict)
    prompts: Prompts = field(default_factory=dict)
    result: RunResult | None = None

    @property
    def passed(self) -> bool:
        """Every suite's gate: its thresholds, a complete run, and no regression."""
        return all(r.passed for r in self.runs) and all(c.passed for c in self.comparisons.values())

    def comparison(self, suite: str) -> Comparison | None:
        return self.comparisons.get(suite)

    def to_json(self) -> dict[str, str]:
        """What crosses a process boundary (an xdist worker's output): the records' serializations
        (a comparison's with every flip), and the prompts."""
        comparisons = {name: {"comparison": c.to_json(), "flips": [f.to_json() for f in c.flips.every or ()]} for name, c in self.comparisons.items()}
        return {
            "biascheck": json.dumps([r.to_json() for r in self.runs]),
            "biascheck_comparisons": json.dumps(comparisons),
            "biascheck_prompts": json.dumps(self.prompts),
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Checked | None:
        """:meth:`to_json`'s inverse; None when the payload holds no run (a worker that ran none)."""
        from biascheck.records.comparison import Comparison
        from biascheck.records.run import RunRecord

        documents = payload.get("biascheck")
        if not documents:
            return None
        where = "a pytest-xdist worker's output"
        runs = [RunRecord.from_json(d, where) for d in json.loads(documents)]
        comparisons = {
            name: Comparison.from_json(c["comparison"], where, c["flips"], where)
            for name, c in json.loads(payload.get("biascheck_comparisons", "{}")).items()
        }
        prompts = {
            suite: {case: tuple((role, content) for role, content in messages) for case, messages in by_case.items()}
            for suite, by_case in json.loads(payload.get("biascheck_prompts", "{}")).items()
        }
        return cls(runs, comparisons, prompts)

    def merged(self, other: Checked) -> Checked:
        """The run two processes of it saw (each of pytest-xdist's workers runs the whole selection
        against one store): the same outcomes, so the records of the process that made more calls,
        with the :data:`WORKER_COUNTERS` of both added. Comparisons are a function of the outcomes,
        the same in both. Neither input changes."""
        runs = [_merged_run(mine, theirs) for mine, theirs in zip(self.runs, other.runs)]
        return Checked(runs, {**self.comparisons, **other.comparisons}, {**self.prompts, **other.prompts})


def _merged_run(mine: RunRecord, theirs: RunRecord) -> RunRecord:
    base, other = (mine, theirs) if mine.run.calls >= theirs.run.calls else (theirs, mine)
    totals = {
        counter: getattr(base.run, counter) + getattr(other.run, counter) for counter in WORKER_COUNTERS if getattr(base.run, counter) is not None
    }
    return replace(base, run=replace(base.run, **totals))


def shown_path(path: Path) -> str:
    """Relative to the working folder when inside it (as a user typed it), else absolute."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


class _ModeOverride(TypedDict, total=False):
    """settings_from's override of the [regression] table's on_inconclusive: given when an option sets it."""

    on_inconclusive: str


@dataclass(eq=False)
class Gate:
    """One gated run: its settings, and the baselines it loaded (each once, by suite name).
    ``root``: where relative baseline paths start (pytest's invocation folder, the command's)."""

    config: RunConfig
    baseline: BaselineOptions
    report_dir: Path | None = None
    root: Path = field(default_factory=Path.cwd)
    # Without a report_dir, write to reporting.write.default_report_dir (the plugin) or not at all.
    default_report: bool = False
    log: LogOptions | None = None  # the trackers each suite's run is sent to, once its files are written
    written: Path | None = None  # the report folder, once written
    written_files: list[Path] = field(default_factory=list)  # its files
    recorded: list[Path] = field(default_factory=list)  # the baselines this run wrote
    # suite name -> (path, the loaded and checked baseline)
    baselines: dict[str, tuple[Path, BaselineRecord]] = field(default_factory=dict)

    # --- before the run: suites and baselines ----------------------------------------------

    def load_suite(self, folder: Path) -> Suite:
        """A suite of this run; a judged suite without a judge is refused here, before any call."""
        from biascheck.session import resolve
        from biascheck.suite import load_suite

        suite = load_suite(folder, data_dir=self.config.data_dir, allow_unpinned=self.config.allow_unpinned_data)
        resolve(suite, self.config)
        return suite

    def fingerprint(self, suite: Suite) -> dict[str, Any]:
        from biascheck.session import resolve

        return resolve(suite, self.config).fingerprint()

    def gates_judge_agreement(self, suite: Suite) -> bool:
        """Whether the suite's judges must agree to gate: several, with a min_alpha."""
        from biascheck.session import resolve

        panel = resolve(suite, self.config).panel
        return panel is not None and panel.several and panel.min_alpha is not None

    def baseline_for(self, suite: Suite) -> tuple[Path, BaselineRecord]:
        """The baseline a suite is compared with: loaded and checked once (the plugin: at collection)."""
        if suite.name not in self.baselines:
            from biascheck.evaluation import baseline as baselines
            from biascheck.evaluation.regression import check_comparable

            path = baselines.baseline_path(self.baseline.pattern, suite=suite.name, model=self.config.model.model, root=self.root)
            baseline = baselines.load(path)
            check_comparable(
                baseline.suite,
                {"name": suite.name, "benchmark": suite.manifest.benchmark, "fingerprint": self.fingerprint(suite)},
                allow_mismatch=self.baseline.allow_mismatch,
                path=str(path),
            )
            self.baselines[suite.name] = (path, baseline)
        return self.baselines[suite.name]

    def regression_rules(self, suite: Suite) -> dict:
        from biascheck.evaluation.regression import resolve_rules

        return resolve_rules(suite.manifest.benchmark, suite.manifest.gated_metrics(None), suite.manifest.regression.rules, self.baseline.rules)

    def check_selection(self, selection: Sequence[tuple[Suite, Sequence[Any]]], *, partial_allowed: bool = False) -> None:
        """What is refused before any call: two suites of one name, several suites recorded into one
        baseline file, and (unless ``partial_allowed``) a baseline recorded from part of a suite."""
        names: dict[str, Path] = {}
        for suite, _ in selection:
            other = names.setdefault(suite.name, suite.manifest.path)
            if other != suite.manifest.path:
                raise BiascheckError(
                    suite.manifest.path, "suite.name", f"{suite.name!r} is also the name of {other}", "give each suite a distinct name"
                )
        if self.baseline.update and len(selection) > 1 and self.baseline.pattern and "{suite}" not in self.baseline.pattern:
            raise BiascheckError(
                f"{option('baseline')} {self.baseline.pattern}",
                None,
                f"{len(selection)} suites would overwrite one file",
                "put {suite} in the path, e.g. baselines/{suite}/release.json",
            )
        if self.baseline.update and not partial_allowed:
            for suite, cases in selection:
                if len(cases) != len(suite.cases):
                    raise BiascheckError(
                        suite.manifest.path,
                        None,
                        f"{option('update-baseline')}: only {len(cases)} of the suite's {len(suite.cases)} cases are selected",
                        "a baseline must cover the whole suite: run it without -k or node ids",
                    )

    # --- the run and its comparisons -------------------------------------------------------

    def run(
        self,
        selection: Sequence[tuple[Suite, Sequence[Any]]],
        *,
        progress: Progress | None = None,
        selected: dict[str, set[tuple[str, str]]] | None = None,
        selected_regressions: dict[str, set[tuple[str, str]]] | None = None,
        prompts_of=None,
    ) -> Checked:
        """Run the selection and compare each suite with its baseline (when the options say so).
        ``selected``: suite name -> the (scope, metric) of the threshold checks that gate this run
        (pytest's selected metric items), ``selected_regressions`` the same of the regression checks
        (its selected regression items); the others are marked not gated. A run that stopped (a fatal
        error, batches pending) is neither marked nor compared: the caller reads its status.
        Ctrl-C raises :class:`~biascheck.execution.runner.RunInterrupted`, the one line that says what
        the store kept, whether calls were being made or not (requests planned, outcomes scored):
        never a traceback, which pytest would spend seconds formatting with every frame's arguments."""
        from biascheck.execution.runner import RunInterrupted

        try:
            return self._run(selection, progress=progress, selected=selected, selected_regressions=selected_regressions)
        except RunInterrupted:
            raise
        except KeyboardInterrupt:
            raise RunInterrupted(self.config.store_path, None) from None

    def _run(
        self,
        selection: Sequence[tuple[Suite, Sequence[Any]]],
        *,
        progress: Progress | None,
        selected: dict[str, set[tuple[str, str]]] | None,
        selected_regressions: dict[str, set[tuple[str, str]]] | None,
    ) -> Checked:
        from biascheck import session
        from biascheck.execution.progress import NoProgress
        from biascheck.execution.stats import RunStatus
        from biascheck.reporting.results import build_results, mark_deselected

        result = session.run(selection, self.config, progress=progress or NoProgress())
        runs, prompts = build_results(result)
        status = result.stats.status
        if status is RunStatus.BATCH_PENDING or status.fatal:
            return Checked(runs, prompts=prompts, result=result)
        if selected is not None and runs:
            # Threshold checks whose metric items -k or node ids left out do not gate this run: the
            # results say so, rather than show a FAIL the exit status does not carry.
            runs = mark_deselected(runs, selected)
        comparisons = self.compare(runs, selection) if self.baseline.compare and self.config.shard is None else {}
        if selected_regressions is not None:
            # Likewise the regression checks whose items were left out: the decision drops them.
            complete = {run.suite.name: run.run.complete for run in runs}
            comparisons = {name: c.deselect(selected_regressions.get(name, set()), complete=complete[name]) for name, c in comparisons.items()}
        return Checked(runs, comparisons, prompts, result)

    def compare(self, runs: Sequence[RunRecord], selection: Sequence[tuple[Suite, Sequence[Any]]]) -> dict[str, Comparison]:
        """Each suite's comparison with its baseline, by suite name."""
        comparisons = {}
        for run, (suite, cases) in zip(runs, selection):
            path, baseline = self.baseline_for(suite)
            prompts = {case.case_id: case.messages[-1].content for case in cases}
            comparisons[suite.name] = compare_run(baseline, run, self.baseline, baseline_path=shown_path(path), prompts=prompts)
        return comparisons

    # --- after the run: reports and baselines ----------------------------------------------

    def publish(self, checked: Checked, *, option: object = Option("report")) -> list[Notice]:
        """GitHub's job summary (in GitHub Actions) and the report folder (when one was asked for, or
        by default: ``default_report``)."""
        from biascheck.reporting.write import default_report_dir

        notices = github_summary(checked)
        folder = self.report_dir if self.report_dir is not None or not self.default_report else default_report_dir(checked.runs)
        if folder is not None:
            files, problems = write_report_folder(checked, folder, option=option)
            self.written, self.written_files = (None, []) if problems else (folder, files)
            notices += problems
        if self.log is not None and not _pending(checked):
            notices += log_to_trackers(checked, self.written, self.log)  # after the files: a tracker down loses nothing
        return notices

    def last_line(self, checked: Checked) -> str | None:
        """The run's last line: every file it wrote (report folder, baselines) and the baselines it
        was compared with; None when it wrote and compared nothing."""
        compared = [str(c.baseline["path"]) for c in checked.comparisons.values()]
        return written_line(self.written, self.written_files, recorded=self.recorded, compared=compared)

    def record_baselines(self, checked: Checked) -> list[Notice]:
        """syrupy-style: a baseline changes only when asked, and only from a whole, answered run.
        A notice per suite: written (OK), or why not (ERROR: the run fails)."""
        from biascheck.evaluation import baseline as baselines

        commit = baselines.git_commit(self.root)
        notices = []
        for run in checked.runs:
            name = run.suite.name
            path = baselines.baseline_path(self.baseline.pattern, suite=name, model=run.model.model, root=self.root)
            reason = baselines.refuse_reason(run)
            if reason:
                notices.append(Notice(f"{name}: not writing the baseline {shown_path(path)}: {reason}", Level.ERROR))
                continue
            try:
                path.exists()  # raises for a name the file system refuses (too long)
                kept = baselines.replace(baselines.from_results(run, git=commit), path)
            except BiascheckError as exc:  # a history/ that cannot take one more file
                notices.append(Notice(str(exc), Level.ERROR))
                continue
            except OSError as exc:
                notices.append(Notice(f"{path}: could not write the baseline ({exc.strerror or exc})", Level.ERROR))
                continue
            self.recorded.append(path)
            history = f" (the one it replaced is kept as {shown_path(kept)})" if kept else ""
            notices.append(Notice(f"{name}: baseline {'replaced' if kept else 'written'}: {shown_path(path)}{history}", Level.OK))
        return notices


def compare_run(
    baseline: BaselineRecord,
    run: RunRecord,
    options: BaselineOptions,
    *,
    baseline_path: str,
    prompts: Mapping[str, str] | None = None,
    regression: Mapping[str, Any] | None = None,
    where: str | None = None,
    candidate: str = "results.json",
    baseline_answers: Mapping[str, str | None] | None = None,
) -> Comparison:
    """A run's comparison with its baseline, as the gate tests it: the ``[regression]`` table the
    run records (the run just made), or ``regression`` read from ``where`` (``biascheck diff``: the
    baseline's or the suite's, never the candidate file's own), under the options' rules,
    fingerprint allowance and on-inconclusive mode. ``prompts`` and ``baseline_answers`` (case id ->
    the prompt, the reference's raw reply) are for the flips only."""
    from biascheck.evaluation.regression import compare, settings_from

    mode: _ModeOverride = {"on_inconclusive": options.on_inconclusive} if options.on_inconclusive else {}
    settings = settings_from(
        run, options.rules, regression=regression, where=where, candidate=candidate, allow_fingerprint_mismatch=options.allow_mismatch, **mode
    )
    return compare(baseline, run, settings, baseline_path=baseline_path, prompts=prompts, baseline_answers=baseline_answers)


def github_summary(checked: Checked, *, reports: bool = True) -> list[Notice]:
    """In GitHub Actions, the run's job summary appended to ``$GITHUB_STEP_SUMMARY``; without
    ``reports``, the comparisons alone (``biascheck diff``: the run's report is in the summary of
    the job that made it)."""
    from biascheck.reporting import github

    if not github.in_github_actions():
        return []
    problem = github.write_step_summary(checked.runs, checked.comparisons, reports=reports)
    return [Notice(problem, Level.WARNING)] if problem else []


def write_report_folder(checked: Checked, folder: Path, *, option: object = Option("report")) -> tuple[list[Path], list[Notice]]:
    """The report folder (:func:`biascheck.reporting.write.write_reports`): its files, or an ERROR
    notice when it could not be written: a gate whose evidence was not written must not pass."""
    from biascheck.reporting.write import write_reports

    try:
        return write_reports(checked.runs, folder, checked.comparisons, checked.prompts), []
    except BiascheckError as exc:  # a folder that is not biascheck's to replace
        return [], [Notice(str(exc), Level.ERROR)]
    except OSError as exc:
        return [], [Notice(f"{folder}: could not write the report ({exc.strerror or exc}); point {option} at a writable folder", Level.ERROR)]


def _pending(checked: Checked) -> bool:
    """Batches submitted, nothing scored: no run to log yet (the run that collects them logs it)."""
    from biascheck.execution.stats import RunStatus

    return checked.result is not None and checked.result.stats.status is RunStatus.BATCH_PENDING


def log_to_trackers(checked: Checked, folder: Path | None, options: LogOptions) -> list[Notice]:
    """Each suite's run sent to the trackers (:mod:`biascheck.loggers`), with its files from the
    report ``folder`` (None: none written). A line per suite and tracker: OK when sent or there
    already; a tracker that failed is a WARNING, or an ERROR (the run fails) when logging is required."""
    from biascheck import loggers

    shown = shown_path(folder) if folder is not None else None
    failed = Level.ERROR if options.required else Level.WARNING
    sent = loggers.send(checked.runs, checked.comparisons, folder, options, shown=shown)
    return [Notice(line.text, failed if line.failed else Level.OK) for line in sent]


def written_line(folder: Path | None, files: Sequence[Path], *, recorded: Sequence[Path] = (), compared: Sequence[str] = ()) -> str | None:
    """``biascheck: wrote <folder>: results.json, report.md, ...; baseline <path>; compared with
    baseline <path>``: every file a run or diff wrote, by name (the folder's marker aside: it only
    says the folder is biascheck's to replace), so that none is left to be found."""
    parts = []
    if folder is not None and files:
        names = [p.relative_to(folder).as_posix() for p in files if p.name != RUN_MARKER]
        parts.append(f"wrote {shown_path(folder)}: {', '.join(names)}")
    if recorded:
        parts.append(f"baseline {', '.join(map(shown_path, recorded))}")
    if compared:
        parts.append(f"compared with baseline {', '.join(dict.fromkeys(compared))}")
    return "biascheck: " + "; ".join(parts) if parts else None
