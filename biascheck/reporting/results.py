"""Reports: a run's records (:func:`build_results`: a :class:`~biascheck.records.run.RunRecord`
per suite, whose serialization is ``results.json``, schema in the package), ``report.md``, and
what the other renderings (terminal, HTML) read from a run. A pytest-xdist controller receives
the records' serializations and reads them back into the same records, so it renders exactly what
a single process would. Numbers are formatted by :mod:`biascheck.core.format`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from biascheck.benchmarks.base import common_categories, document_schema, examples_of, first_document_error, layout_of, reading_shown
from biascheck.config.sources import ALLOW_UNPINNED
from biascheck.core import format as fmt
from biascheck.core.bounds import with_bounds
from biascheck.core.errors import BiascheckError
from biascheck.core.format import Markdown, md_row, md_text, strong
from biascheck.core.validation import DocumentValidator
from biascheck.core.version import VERSION
from biascheck.execution.llm import MAX_REPLY_CHARS
from biascheck.records.comparison import Comparison
from biascheck.records.run import Judging, MetricValue, PanelJudge, RunRecord, ThresholdVerdict
from biascheck.reporting.decision import FLIPS_FILES, NOT_GATED, Decision, decide, scope_label
from biascheck.reporting.samples import sampled_ids
from biascheck.suite import ALLOW_MISSING_DATA, MISSING_DATA_FIX, missing_data_summary

if TYPE_CHECKING:
    from biascheck.benchmarks.base import Benchmark
    from biascheck.core.records import Case
    from biascheck.judging.panel import Judge
    from biascheck.session import RunResult, SuiteResult

RESULTS_SCHEMA = "biascheck.results/1"


def _json_number(x: float) -> float | None:
    """JSON number: NaN becomes None (null)."""
    return None if math.isnan(x) else x


# The prompts of the cases report.html shows, by suite name: case id -> its messages as (role, content).
Prompts = dict[str, dict[str, tuple[tuple[str, str], ...]]]


def build_results(run: RunResult) -> tuple[list[RunRecord], Prompts]:
    """(the record of each suite of the run, whose serialization is its results.json; the prompts
    of the cases report.html shows, by suite name (:mod:`biascheck.reporting.samples`): not part
    of results.json, they are passed to :func:`biascheck.reporting.write.write_reports` beside it)."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    stats = run.stats.to_dict()
    records: list[RunRecord] = []
    prompts: Prompts = {}
    for result in run.suites:
        suite, manifest = result.suite, result.suite.manifest
        benchmark = suite.benchmark
        outcomes = [result.outcomes[case.case_id] for case in result.cases]
        panel = result.panel
        cases = [
            {
                **benchmark.case_record(case, outcome),
                **({"truncated": True} if outcome.truncated else {}),
                **({"readings": _readings(benchmark, case, result)} if panel is not None and panel.several else {}),
            }
            for case, outcome in zip(result.cases, outcomes)
        ]
        n_errors = sum(outcome.status == "error" for outcome in outcomes)
        judge_stats = result.judge_stats.to_dict()
        own = result.stats.to_dict()  # this suite's calls; the run's refused parameters and batches are the run's
        document = {
            "schema": RESULTS_SCHEMA,
            "tool": {"name": "biascheck", "version": VERSION},
            "created_at": created,
            "suite": {
                "name": suite.name,
                "benchmark": manifest.benchmark,
                "description": manifest.description,
                "language": manifest.language,
                # The benchmark's categories by their shared names, for the view across suites.
                "common_categories": common_categories(benchmark),
                "manifest": manifest.path.as_posix(),
                "fingerprint": suite.fingerprint(panel.identity() if panel is not None else None, result.scoring),
                "prompts": [p.id for p in suite.prompts],
                "skipped_categories": dict(suite.skipped_categories),
                "missing_data_allowed": run.config.allow_missing_data,
                "categories_total": suite.categories_total,
                "cases_total": len(suite.cases),
                **({"data_quality": suite.data_quality} if suite.data_quality else {}),
                # Files read without a checksum to verify them (--biascheck-allow-unpinned-data): key -> sha256 read.
                **({"unpinned_data": suite.unpinned_data} if suite.unpinned_data else {}),
                "thresholds": {m: t.to_dict() for m, t in manifest.thresholds.items()},
                "regression": manifest.regression.to_dict(),
            },
            "model": {
                **run.config.model.to_dict(),
                "params": result.params,
                **_params_notes(stats, run.config.model.model),
                **({"served": result.served} if result.served else {}),
                **({"judge": _judge(result.judge, stats)} if result.judge else {}),
                **({"judges": [_judge(judge, stats) for judge in panel.judges]} if panel is not None and panel.several else {}),
            },
            "run": {
                "cases": len(result.cases),
                "case_errors": n_errors,
                "calls": own["calls"],
                "cache_hits": own["cache_hits"],
                "retries": own["retries"],
                "errors": own["errors"],
                # From the outcomes, not this run's calls: a run answered from the store counts them too.
                "filtered": sum(outcome.status == "filtered" for outcome in outcomes),
                "truncated": sum(outcome.truncated for outcome in outcomes),
                "not_run": own["not_run"],
                "cost_usd": round(own["cost_usd"], 10),
                "unpriced_calls": own["unpriced_calls"],
                "requests": own["requests"],
                "complete": run.incomplete is None,
                "incomplete_reason": run.incomplete,
                **({"shard": str(run.config.shard)} if run.config.shard else {}),
                **({"batches": dict(sorted(stats["batches"].items()))} if stats.get("batches") else {}),
                "estimator": result.estimator,
                "estimator_note": result.estimator_note,
                **(
                    {"judge_calls": judge_stats["calls"], "judge_cache_hits": judge_stats["cache_hits"], "rejudge": run.config.judges.rejudge}
                    if panel is not None
                    else {}
                ),
            },
            **({"judge_qualification": result.judge_qualification.to_dict()} if result.judge_qualification else {}),
            **({"scoring": dict(result.scoring)} if result.scoring else {}),
            **({"judging": result.findings.to_json()} if result.findings is not None else {}),
            "metrics": result.metrics.to_json(),
            "verdicts": [
                {
                    "metric": v.metric,
                    "scope": v.scope,
                    "value": _json_number(v.value),
                    "ci": [_json_number(v.ci[0]), _json_number(v.ci[1])],
                    "n": v.n,
                    "threshold": v.threshold.to_dict(),
                    "passed": v.passed,
                    "note": v.note,
                    "mode": v.mode,
                    "status": v.status,
                }
                for v in result.verdicts
            ],
            # Errored cases are missing evidence: the gate passes only with every case answered,
            # and with every category's data unless the run accepted the gap.
            "passed": result.passed and run.incomplete is None and n_errors == 0 and (not suite.skipped_categories or run.config.allow_missing_data),
            "cases": cases,
        }
        record = RunRecord.from_json(document, f"the results of {suite.name}")
        records.append(record)
        shown = sampled_ids(record.cases)
        prompts[suite.name] = {case.case_id: tuple((m.role, m.content) for m in case.messages) for case in result.cases if case.case_id in shown}
    return records, prompts


def _judge(judge: Judge, stats: dict[str, Any]) -> dict[str, Any]:
    """A judge as results.json's ``model`` names it, with the parameters its endpoint dropped or ignored."""
    return {**judge.to_dict(), **_params_notes(stats, judge.name)}


def _readings(benchmark: Benchmark, case: Case, result: SuiteResult) -> list[dict[str, Any]]:
    """A case's reading by each of several judges, in panel order: the outcome and the raw reply,
    as the benchmark records a case's."""
    assert result.judged is not None and result.panel is not None
    out = []
    for judge, own in zip(result.panel.judges, result.judged.by_judge):
        record = benchmark.case_record(case, own[case.case_id])
        out.append({"judge": judge.name, "outcome": record["outcome"], "raw": record.get("raw")})
    return out


@cache
def _base_schema() -> dict[str, Any]:
    return json.loads(resources.files("biascheck.schemas").joinpath("results.schema.json").read_text("utf-8"))


_RESULTS_VALIDATORS: dict[str | None, DocumentValidator] = {}


def _results_validator(benchmark: str | None = None, where: str = "") -> DocumentValidator:
    """The results schema; with ``benchmark``, its cases checked by that benchmark's fragment: one for each, kept
    (``where``, the document read, is named in the error of a benchmark not registered)."""
    if benchmark not in _RESULTS_VALIDATORS:
        schema = _base_schema() if benchmark is None else document_schema(_base_schema(), benchmark, "results_case", where)
        _RESULTS_VALIDATORS[benchmark] = DocumentValidator(with_bounds(schema))  # the [regression] settings: suite.toml's bounds
    return _RESULTS_VALIDATORS[benchmark]


def _params_notes(stats: dict[str, Any], model: str) -> dict[str, Any]:
    """``params_dropped`` / ``params_ignored`` of this model, present only when there is one."""
    notes = {key: stats[key][model] for key in ("params_dropped", "params_ignored") if stats.get(key, {}).get(model)}
    return {key: dict(sorted(value.items())) for key, value in notes.items()}


def validate_results(document: dict[str, Any], where: str = "results.json", *, every_case: bool = True) -> None:
    """Raise the one-line error of a results document that is not valid. ``every_case=False`` (the
    writer's check of what it wrote): the schema reads one case of each kind (its outcome and
    fields) rather than all, since the cases of a run are one benchmark's records, serialized alike,
    and where jsonschema decides (:mod:`biascheck.core.validation`), reading a full KoBBQ's 34,200
    took a third of a warm re-run's CPU. The checks beyond the
    schema (each case once) read them all, and so does every reader (``biascheck.load_run``,
    ``biascheck diff``)."""
    if not every_case and isinstance(document, dict) and isinstance(document.get("cases"), list):
        _schema_check({**document, "cases": _one_of_each_kind(document["cases"])}, where)
    else:
        _schema_check(document, where)
    _check_beyond_the_schema(document, where)


def _one_of_each_kind(cases: list[Any]) -> list[Any]:
    kinds: dict[Any, Any] = {}
    for case in cases:
        kind = (case.get("outcome"), tuple(case)) if isinstance(case, dict) and isinstance(case.get("outcome"), str) else id(case)
        kinds.setdefault(kind, case)
    return list(kinds.values())


def _schema_check(document: dict[str, Any], where: str) -> None:
    error = first_document_error(document, lambda benchmark: _results_validator(benchmark, where) if benchmark else _results_validator())
    if error is not None:
        field = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise BiascheckError(where, field, error.message, "regenerate the file with biascheck")


def _check_beyond_the_schema(document: dict[str, Any], where: str) -> None:
    """Each case once, and the [regression] settings numbers (NaN passes a schema's bounds, and a
    comparison would read it)."""
    for key, value in document["suite"]["regression"].items():
        if isinstance(value, float) and math.isnan(value):
            raise BiascheckError(where, f"suite.regression.{key}", "NaN is not a number", "regenerate the file with biascheck")
    _check_unique_cases(document, where)


def _check_unique_cases(document: dict[str, Any], where: str) -> None:
    """Each case once: a case listed twice would be counted twice, as changed twice, and narrow
    every interval it is in."""
    seen: set[str] = set()
    for index, case in enumerate(document["cases"]):
        if case["case_id"] in seen:
            raise BiascheckError(where, f"cases.{index}.case_id", f"case {case['case_id']!r} appears twice", "regenerate the file with biascheck")
        seen.add(case["case_id"])


# --- formatting ---------------------------------------------------------------------------------


def mode_text(verdict: ThresholdVerdict) -> str:
    """How a gate was judged, when not on the point estimate (``[thresholds] mode``)."""
    return f" ({verdict.mode})" if (verdict.mode or "point") != "point" else ""


def verdicts_by_scope(run: RunRecord) -> dict[tuple[str, str], ThresholdVerdict]:
    """The run's threshold checks by (scope, metric)."""
    return {(v.scope, v.metric): v for v in run.verdicts}


def category_metrics(run: RunRecord) -> list[str]:
    """The metrics of the per-category tables: the benchmark's headline scores, then the gated ones."""
    overall = run.metrics.table("overall")
    headline = layout_of(run.suite.benchmark).category_headline
    return list(dict.fromkeys([m for m in headline if m in overall] + [v.metric for v in run.verdicts]))


def served_warning(run: RunRecord) -> str | None:
    """Said when the provider named more than one served model or system fingerprint in one run:
    the model behind the name changed while it ran, and the run mixes two models' answers."""
    served = run.model.served or {}
    changed = [
        f"{len(served[k])} {label} ({', '.join(served[k])})"
        for k, label in (("models", "served models"), ("system_fingerprints", "system fingerprints"))
        if len(served.get(k, {})) > 1
    ]
    return f"the provider reported {' and '.join(changed)} within this run" if changed else None


def judge_lines(run: RunRecord, *, correction: bool = True) -> list[str]:
    """Who judged the generations, and the warnings of the judges' qualification; read by several
    judges, how their readings were combined and their agreement; ``correction``: with the judge
    correction and each judge's own figures as text lines (the terminal; report.md and report.html
    show them as tables, :func:`correction_rows` and :func:`judges_markdown`)."""
    judge, info, judging = run.model.judge, run.run, run.judging
    if not judge and judging is None:
        return []
    rejudged = "; re-judged stored generations" if info.rejudge else ""
    calls = f"{info.judge_calls or 0} judge calls, {info.judge_cache_hits or 0} cache hits{rejudged}"
    if judging is None:
        assert judge is not None
        lines = [f"judged by {judge['model']} ({_params_text(judge)}): {calls}"]
    else:
        lines = panel_lines(run, calls, each_judge=correction)
    convention = (run.scoring or {}).get("unscorable")
    counts = run.metrics.rest.get("counts", {})
    what = "no judge's answer naming an option" if judging is not None else "an out-of-choice judge answer"
    if convention == "unknown":
        lines.append(
            f"unscorable = unknown (as the paper): {counts.get('n_u_by_convention', 0)} of {counts.get('n', 0)} pairs scored "
            f"with {what} or an empty or filtered story read as u; pairs with an errored call left out"
        )
    elif convention == "exclude":
        lines.append(
            f"unscorable = exclude: {counts.get('n_unscorable', 0) - counts.get('n_error', 0)} of {counts.get('n', 0)} pairs "
            f"with {what} or an empty or filtered story{', or judges who disagree,' if judging is not None else ''} left out, never read as u"
        )
    lines += correction_lines(run) if correction else []
    qualifications = [run.judge_qualification] if judging is None else [j.qualification for j in judging.judges]
    for qualification in qualifications:
        if qualification:
            lines.append(qualification["summary"])
            lines += [f"WARNING: {w}" for w in qualification["warnings"]]
    return lines


def _params_text(judge: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in judge["params"].items()) or "provider defaults"


def aggregation_text(judging: Judging) -> str:
    """How several judges' readings were combined, in words."""
    if judging.aggregation == "primary":
        return f"the primary judge's reading ({judging.primary}), the others as checks"
    return {"majority": "majority of the judges", "unanimous": "unanimous judges"}.get(judging.aggregation, judging.aggregation)


def agreement_line(judging: Judging) -> str:
    """The judges' agreement, with the suite's floor and whether the run met it."""
    agreement = judging.agreement
    line = (
        f"judge agreement: Krippendorff's alpha {fmt.value(agreement.alpha)} {fmt.ci(agreement.ci)} over "
        f"{fmt.count(agreement.units)} cases read by two or more judges ({fmt.count(agreement.stories)} stories)"
    )
    if judging.min_alpha is not None:
        verdict = {True: "met", False: "NOT met: the run does not gate on these readings", None: "not checked (no verdicts in this run)"}
        line += f"; min_alpha {fmt.value(judging.min_alpha)} {verdict[judging.agreement_passed]}"
    return line


def judge_figures(judge: PanelJudge) -> str:
    """One judge's own headline metrics, ``name value [ci]`` each."""
    return ", ".join(f"{value.metric} {fmt.value(value.value)} {fmt.ci(value.ci)}" for value in judge.metrics)


def unreadable_text(judge: PanelJudge) -> str:
    if not judge.unreadable:
        return "none read as nothing"
    return f"{fmt.count(judge.unreadable)} read as nothing (" + ", ".join(f"{status} {n:,}" for status, n in judge.unscorable.items()) + ")"


def panel_lines(run: RunRecord, calls: str, *, each_judge: bool = True) -> list[str]:
    """A run read by several judges, in text lines: the panel, their agreement, (``each_judge``)
    each judge's own figures and unreadable replies and each pair's agreement, the cases they did
    not settle."""
    judging = run.judging
    assert judging is not None
    params = {str(j["model"]): j for j in run.model.judges or ()}
    lines = [f"judged by {len(judging.judges)} judges, readings combined by {aggregation_text(judging)}: {calls}", agreement_line(judging)]
    for judge in judging.judges if each_judge else ():
        shown = f" ({_params_text(params[judge.model])})" if judge.model in params else ""
        lines.append(
            f"judge {judge.model}{shown}: {judge_figures(judge)}; read {fmt.count(judge.readings)} of {fmt.count(judge.asked)} cases, "
            f"{unreadable_text(judge)}; {fmt.count(judge.calls)} calls, {fmt.count(judge.cache_hits)} cache hits"
        )
    for pair in judging.agreement.pairs if each_judge else ():
        lines.append(f"{pair.judges[0]} and {pair.judges[1]} read {fmt.count(pair.agreed)} of the {fmt.count(pair.compared)} cases both read alike")
    if judging.disagreed:
        lines.append(f"{fmt.count(judging.disagreed)} cases the judges did not settle ({judging.aggregation}): unscorable, never read as u")
    calibrated = [judge.model for judge in judging.judges if judge.calibration]
    if calibrated and not (run.scoring or {}).get("calibration"):
        lines.append(
            f"the {judging.aggregation} of the judges is not corrected (a calibration corrects one judge's readings): "
            f"the corrected figures shown are each calibrated judge's own ({', '.join(calibrated)})"
        )
    return lines


@dataclass(frozen=True)
class Disagreement:
    """A case its judges read differently: what they were asked and read, and each one's reading."""

    case_id: str
    category: str
    question: str
    text: str
    readings: tuple[tuple[str, str, str | None], ...]  # (judge, outcome, raw reply)


def disagreements(run: RunRecord, limit: int = 6) -> list[Disagreement]:
    """Up to ``limit`` cases whose judges' readings differ, chosen round-robin across categories
    (each category's in case order): where to start reading what the judges disagree about."""
    if run.judging is None:
        return []
    shown = reading_shown(run.suite.benchmark)
    by_category: dict[str, list[Disagreement]] = {}
    for case in run.cases:
        readings = case.fields.get("readings") or ()
        if len({r.get("outcome") for r in readings}) < 2:
            continue
        question, text = shown(case.to_json())
        by_category.setdefault(case.category, []).append(
            Disagreement(
                case.case_id, case.category, question, text, tuple((str(r.get("judge")), str(r.get("outcome")), r.get("raw")) for r in readings)
            )
        )
    picked: list[Disagreement] = []
    queues = [sorted(found, key=lambda d: d.case_id) for _, found in sorted(by_category.items())]
    while len(picked) < limit and any(queues):
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return picked


EXCERPT = 240  # characters of a story a report shows beside a disagreement


def excerpt(text: str, limit: int = EXCERPT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judge_labels(judging: Judging) -> dict[str, str]:
    """Short names of several judges for the reports' tables (``J1``, ``J2``, ...), in panel order:
    a model string (``sim/judge?confusion=...``) is too wide for a column heading."""
    return {judge.model: f"J{i}" for i, judge in enumerate(judging.judges, 1)}


def judges_markdown(run: RunRecord) -> list[str]:
    """report.md's judges section, for a run read by several: each judge's figures, the agreement,
    each pair's confusion table, and a few cases they disagree on, with every judge's reading."""
    judging = run.judging
    if judging is None:
        return []
    labels = judge_labels(judging)
    out = ["## Judges", "", md_text(f"Readings combined by {aggregation_text(judging)}; {agreement_line(judging)}."), ""]
    names = [value.metric for value in judging.judges[0].metrics]
    out += [md_row(["", "judge", "calls", "cache hits", "read", "read as nothing", *names]), "|---|---|---:|---:|---:|---|" + "---:|" * len(names)]
    for judge in judging.judges:
        figures = [f"{fmt.value(v.value)} {fmt.ci(v.ci)}" if (v := judge.metric(name)) else "" for name in names]
        read = f"{fmt.count(judge.readings)} of {fmt.count(judge.asked)}"
        out.append(
            md_row([labels[judge.model], judge.model, fmt.count(judge.calls), fmt.count(judge.cache_hits), read, unreadable_text(judge), *figures])
        )
    classes = [*judging.agreement.classes, "unscorable"]
    for pair in judging.agreement.pairs:
        first, second = (labels[name] for name in pair.judges)
        out += ["", f"### {md_text(f'{first} (rows) and {second} (columns)')}", ""]
        out += [md_text(f"Read alike: {fmt.count(pair.agreed)} of the {fmt.count(pair.compared)} cases both read."), ""]
        out += [md_row([f"{first} \u2193 {second} \u2192", *classes]), "|---|" + "---:|" * len(classes)]
        out += [md_row([row, *(fmt.count(pair.table.get(row, {}).get(col, 0)) for col in classes)]) for row in classes]
    examples = disagreements(run)
    if examples:
        columns = list(labels.values())
        out += [
            "",
            "### Where the judges disagree",
            "",
            md_text("A few of the cases the judges read differently, across categories: each judge's reading, then the start of its reply."),
            "",
        ]
        out += [md_row(["case", "category", "question", "what they read (start)", *columns]), "|---|---|---|---|" + "---|" * len(columns)]
        for example in examples:
            readings = {
                labels.get(judge, judge): f"{outcome}" + (f" ({excerpt(raw, 40)})" if raw else "") for judge, outcome, raw in example.readings
            }
            out.append(md_row([example.case_id, example.category, example.question, excerpt(example.text), *(readings.get(j, "") for j in columns)]))
    return [*out, ""]


CORRECTED = "_corrected"


def calibration_of(run: RunRecord) -> dict[str, Any] | None:
    """The judge calibration a run's scoring records (``<id>:b=..;c=..;u=..;date=..``): its id,
    date, counts per true class and row-normalised confusion matrix; None without one."""
    value = (run.scoring or {}).get("calibration")
    if not value:
        return None
    ident, _, body = str(value).partition(":")
    fields = dict(part.split("=", 1) for part in body.split(";") if "=" in part)
    counts = {c: [int(x) for x in fields.get(c, "0,0,0").split(",")] for c in ("b", "c", "u")}
    matrix = {c: [x / max(sum(row), 1) for x in row] for c, row in counts.items()}
    return {"id": ident, "date": fields.get("date", "?"), "counts": counts, "matrix": matrix}


def correction_rows(run: RunRecord) -> list[tuple[str, MetricValue, MetricValue]]:
    """(metric, raw value, corrected value) of the overall metrics a judge calibration corrected,
    in report order; empty without a calibration."""
    overall = run.metrics.table("overall")
    return [(name, raw, fixed) for name, raw in overall.items() if (fixed := overall.get(name + CORRECTED)) is not None]


CORRECTION_NOTE = "the correction assumes independent judge errors on a pair's two readings"
CORRECTION_CI_NOTE = "95% intervals; the corrected ones include the calibration's uncertainty"


def calibration_heading(calibration: dict[str, Any]) -> str:
    """The calibration's id, date and size, in one sentence."""
    sizes = ", ".join(f"{c} {fmt.count(sum(row))}" for c, row in calibration["counts"].items())
    total = sum(sum(row) for row in calibration["counts"].values())
    return f"judge calibration {calibration['id']} ({calibration['date']}): {fmt.count(total)} labelled stories (true {sizes})"


def correction_lines(run: RunRecord) -> list[str]:
    """A judge-corrected run in text lines (the terminal): the calibration (size, date, M as
    rows), and raw -> corrected."""
    calibration = calibration_of(run)
    if calibration is None:
        return []
    rows = "; ".join(f"true {c}: " + " ".join(f"{j} {x:.3f}" for j, x in zip("bcu", row)) for c, row in calibration["matrix"].items())
    moved = [
        f"{name} {fmt.value(raw.value)} {fmt.ci(raw.ci)} → {fmt.value(fixed.value)} {fmt.ci(fixed.ci)}" for name, raw, fixed in correction_rows(run)
    ]
    return [
        f"{calibration_heading(calibration)}; confusion P(judge says column | true row): {rows}; {CORRECTION_NOTE}",
        f"corrected for the judge (raw → corrected, {CORRECTION_CI_NOTE}): " + "; ".join(moved),
    ]


def correction_markdown(run: RunRecord) -> list[str]:
    """report.md's judge correction: the calibration, M as a table (a row per true class with its
    labelled count, a column per judge answer) and raw beside corrected with both intervals."""
    calibration = calibration_of(run)
    if calibration is None:
        return []
    out = ["## Judge correction", "", md_text(f"{calibration_heading(calibration)}; {CORRECTION_NOTE}."), ""]
    out += [md_row(["true class", "labelled", "judge says b", "judge says c", "judge says u"]), "|---|---:|---:|---:|---:|"]
    for c, row in calibration["matrix"].items():
        out.append(md_row([c, fmt.count(sum(calibration["counts"][c])), *(f"{x:.3f}" for x in row)]))
    out += ["", md_text(f"Raw and corrected ({CORRECTION_CI_NOTE}):"), ""]
    out += [md_row(["metric", "raw", "raw 95% CI", "corrected", "corrected 95% CI"]), "|---|---:|---|---:|---|"]
    for name, raw, fixed in correction_rows(run):
        out.append(md_row([name, fmt.value(raw.value), fmt.ci(raw.ci), fmt.value(fixed.value), fmt.ci(fixed.ci)]))
    return [*out, ""]


def missing_data_line(run: RunRecord) -> str | None:
    """What every report says about the categories the run went without; None when it had them all.
    Each category's reason follows it, in each report's own layout."""
    suite = run.suite
    if not suite.skipped_categories:
        return None
    summary = missing_data_summary(suite.skipped_categories, suite.categories_total)
    if run.missing_data_failed:
        return f"MISSING DATA: {summary}, so this is no complete {suite.benchmark} run: a failed check; {MISSING_DATA_FIX}"
    accepted = f"as {ALLOW_MISSING_DATA} accepted" if suite.missing_data_allowed else "with no check (results of an older biascheck)"
    return f"{summary}: left out of this run, {accepted}"


def data_quality_lines(run: RunRecord) -> list[str]:
    """What every report says about records of the benchmark's data that are inconsistent
    (``suite.data_quality``): a heading line, then one line per category; none when there are none.
    How each kind of record is scored is in docs/metrics.md."""
    found = run.suite.data_quality or {}
    if not found:
        return []
    total = sum(sum(findings.values()) for findings in found.values())
    lines = [f"The benchmark's data holds {fmt.count(total)} inconsistent records (how each is scored: docs/metrics.md):"]
    for category, findings in found.items():
        lines.append(f"{category}: " + ", ".join(f"{fmt.count(n)} {kind.replace('_', ' ')}" for kind, n in findings.items()))
    return lines


def unpinned_line(run: RunRecord) -> str | None:
    """What every report says of data files the manifest pins by no checksum; None when every one is pinned."""
    files = run.suite.unpinned_data or {}
    if not files:
        return None
    return (
        f"{len(files)} data file{'s' if len(files) > 1 else ''} read without a checksum to verify {'them' if len(files) > 1 else 'it'} "
        f"({ALLOW_UNPINNED}: {', '.join(files)}): these numbers compare only with runs of the same bytes (sha256 in results.json)"
    )


def deselected_line(run: RunRecord) -> str | None:
    """One line on the checks whose metric items a selection left out, and how to gate them."""
    count = sum(not v.gated for v in run.verdicts)
    if not count:
        return None
    return (
        f"{count} threshold check{'s' if count > 1 else ''} not gated: -k or node ids deselected their metric items, so their "
        "verdicts do not count; run without -k, or select the metrics:: items (e.g. -k metrics), to gate them"
    )


def report_examples(run: RunRecord, limit: int = 5) -> list[tuple[str, ...]]:
    """The examples table's rows (see ``Benchmark.report_examples``), for a benchmark whose layout
    has one: it reads the cases as results.json holds them."""
    if not layout_of(run.suite.benchmark).examples_title:
        return []
    return examples_of({"suite": {"benchmark": run.suite.benchmark}, "cases": [case.to_json() for case in run.cases]}, limit)


def mark_deselected(runs: Sequence[RunRecord], selected: Mapping[str, set[tuple[str, str]]]) -> list[RunRecord]:
    """The runs with the verdicts whose metric item was not selected (``selected``: suite name ->
    the (scope, metric) of its selected metric items) not gated; a run whose only failed checks
    were deselected then passes, as the run does."""
    out = []
    for run in runs:
        keep = selected.get(run.suite.name, set())
        verdicts = tuple(v if (v.scope, v.metric) in keep else replace(v, gated=False) for v in run.verdicts)
        if all(v.gated for v in verdicts):
            out.append(run)
            continue
        passed = not any(v.failed for v in verdicts) and run.run.complete and not run.run.case_errors and not run.missing_data_failed
        out.append(replace(run, verdicts=verdicts, passed=passed))
    return out


def run_line(run: RunRecord) -> str:
    info, model = run.run, run.model
    line = (
        f"{run.suite.name} ({run.suite.benchmark}) on {model.model}: {info.cases} cases, "
        f"{info.calls} calls, {info.cache_hits} cache hits, {info.retries} retries, {info.errors} errors, "
        f"{fmt.usd(info.cost_usd)}; suite fingerprint {run.suite.fingerprint['suite']}"
    )
    if info.shard:
        line += f"; shard {info.shard}: answers for a merged run, no verdicts (biascheck store merge, then run the whole suite)"
    if info.batches:
        line += "; provider batches: " + ", ".join(f"{count} {state}" for state, count in info.batches.items())
    if info.estimator:
        line += f"; answered by {info.estimator}"
    if info.estimator_note:
        line += f" ({info.estimator_note})"
    if info.unpriced_calls:
        line += f"; cost unknown for {info.unpriced_calls} calls (no price: pass --biascheck-price)"
    if info.truncated:
        line += f"; {info.truncated} cases read from a reply cut at {fmt.count(MAX_REPLY_CHARS)} characters"
    for name, reason in (model.params_dropped or {}).items():
        line += f"; WARNING: parameter {name} {reason}"
    for name, reason in (model.params_ignored or {}).items():
        line += f"; WARNING: parameter {name} {reason}"
    served = served_warning(run)
    if served:
        line += f"; WARNING: {served}"
    if not info.complete:
        line += f"; INCOMPLETE: {info.incomplete_reason}"
    return line


# --- across suites ------------------------------------------------------------------------------

SUMMARY_HEADERS = ("suite", "benchmark", "model", "cases", "checks passed", "overall", "verdict")


def summary_rows(runs: Sequence[RunRecord]) -> list[list[str]]:
    """One row per suite of a run: what a reader of several suites wants first."""
    rows = []
    for run in runs:
        failed = len(run.failed_checks)
        overall = ", ".join(f"{v.metric} {fmt.value(v.value)}" for v in run.verdicts if v.scope == "overall")
        incomplete = not run.run.complete or run.missing_data_failed
        status = "INCOMPLETE" if incomplete else "passed" if run.passed else "FAILED"
        checks = f"{len(run.verdicts) - failed} of {len(run.verdicts)}"
        rows.append([run.suite.name, run.suite.benchmark, run.model.model, str(run.run.cases), checks, overall, status])
    return rows


def render_summary_markdown(runs: Sequence[RunRecord]) -> str:
    """The table across suites (a run of several), for the job summary and summary.md."""
    out = ["# biascheck: every suite", "", md_row(SUMMARY_HEADERS), "|---|---|---|---:|---:|---|---|"]
    out += [md_row([*row[:-1], row[-1] if row[-1] == "passed" else strong(row[-1])]) for row in summary_rows(runs)]
    return "\n".join(out) + "\n"


DECISION_HEADERS = ("kind", "metric", "scope", "baseline \u2192 candidate", "interval", "rule broken", "evidence")


def decision_markdown(decision: Decision) -> list[str]:
    """The decision and its reasons, first in report.md and the job summary: every failing check
    as a table row (regressions, then thresholds, then the run's own failures), then the
    inconclusive checks one line each."""
    out = [strong(decision.headline()), ""]
    if decision.failed:
        out += [md_row(DECISION_HEADERS), "|---" * len(DECISION_HEADERS) + "|"]
        for check in decision.failed:
            evidence = f"{check.flips.text()} (every flip: {FLIPS_FILES})" if check.flips is not None else ""
            rule = check.rule or check.reason
            out.append(md_row([check.kind, check.metric or "", check.scope_label or "", check.values_text(), check.interval_text(), rule, evidence]))
        out.append("")
    if decision.inconclusive:
        mode = f" (on_inconclusive = {decision.on_inconclusive}: they pass)" if decision.on_inconclusive else ""
        out += [md_text(f"Inconclusive ({len(decision.inconclusive)}){mode}:"), ""]
        out += [f"- {md_text(f'{c.metric} ({c.scope}): {c.text}')}" for c in decision.inconclusive]
        out.append("")
    return out


def render_markdown(run: RunRecord, comparison: Comparison | None = None) -> str:
    """report.md: the decision of the run and its ``comparison`` with a baseline first, then the run."""
    metrics = run.metrics
    verdicts = verdicts_by_scope(run)
    decision = decide(run, comparison)
    status = decision.status if not decision.passed or decision.compared else "thresholds passed"
    out = [f"# biascheck: {md_text(run.suite.name)} — {status}", "", *decision_markdown(decision), md_text(run_line(run)), ""]
    deselected = deselected_line(run)
    if deselected:
        out += [md_text(deselected), ""]
    unpinned = unpinned_line(run)
    if unpinned:
        out += [md_text(unpinned), ""]
    judged = judge_lines(run, correction=False)
    if judged:
        out += [f"- {md_text(line)}" for line in judged] + [""]
    missing = missing_data_line(run)
    if missing:
        out.append(strong(missing) if run.missing_data_failed else md_text(missing))
        out += [f"- {md_text(f'{c}: {r}')}" for c, r in run.suite.skipped_categories.items()]
        out.append("")
    data_notes = data_quality_lines(run)
    if data_notes:
        out += [md_text(data_notes[0]), *(f"- {md_text(line)}" for line in data_notes[1:]), ""]
    out += [
        f"## {md_text(scope_label(run, 'overall').capitalize())}",
        "",
        "| metric | value | 95% CI | n | threshold | verdict |",
        "|---|---:|---|---:|---|---|",
    ]
    overall = metrics.table("overall")
    for name, value in overall.items():
        verdict = verdicts.get(("overall", name))
        threshold = fmt.threshold(verdict.threshold) + mode_text(verdict) if verdict else ""
        mark = ("pass" if verdict.passed else strong("FAIL") if verdict.gated else NOT_GATED) if verdict else ""
        mark = Markdown(md_text(mark) + (" (inconclusive)" if verdict and verdict.inconclusive else ""))
        out.append(md_row([name, fmt.value(value.value), fmt.ci(value.ci), fmt.count(value.n), threshold, mark]))
    correction = correction_markdown(run)
    if correction:
        out += ["", *correction[:-1]]
    judges = judges_markdown(run)
    if judges:
        out += ["", *judges[:-1]]
    categories = metrics.scopes("category")
    if categories:
        shown = category_metrics(run)
        out += ["", "## By category", "", md_row(["category", *shown]), "|---|" + "---:|" * len(shown)]
        for category in categories:
            table = metrics.table("category", category)
            cells = []
            for name in shown:
                verdict = verdicts.get((category, name))
                text = f"{fmt.value(table[name].value)} {fmt.ci(table[name].ci)}"
                cell = text if verdict is None or verdict.passed else strong(f"{text} FAIL") if verdict.gated else f"{text} ({NOT_GATED})"
                cells.append(Markdown(md_text(cell) + (" ?" if verdict and verdict.inconclusive else "")))
            out.append(md_row([category, *cells]))
    layout = layout_of(run.suite.benchmark)
    examples = report_examples(run)
    if examples:
        title = layout.examples_title[:1].upper() + layout.examples_title[1:]
        out += ["", f"## {md_text(title)}", "", md_row(layout.examples_columns), "|---" * len(layout.examples_columns) + "|"]
        out += [md_row(example) for example in examples]
    spreads = metrics.rest.get("prompt_summary")
    if spreads:
        across, prompts = layout.spread_over, metrics.scopes("prompt")
        out += [
            "",
            f"## Across {md_text(across)} (mean ± sample std)",
            "",
            md_row(["metric", *prompts, "mean ± std"]),
            "|---|" + "---:|" * (len(prompts) + 1),
        ]
        for name in layout.headline:
            if name not in spreads:
                continue
            spread = spreads[name]
            values = [fmt.value(metrics.table("prompt", p)[name].value) for p in prompts]
            out.append(md_row([name, *values, f"{fmt.value(spread['mean'])} ± {fmt.value(spread['std'])}"]))
    labels = metrics.scopes("label")
    if labels:
        shown = [n for n in layout.headline if n in overall]
        title = layout.label_title
        out += ["", f"## {md_text(title)}", "", md_row(["label", *shown]), "|---|" + "---:|" * len(shown)]
        for label in labels:
            table = metrics.table("label", label)
            out.append(md_row([label, *(f"{fmt.value(table[n].value)} {fmt.ci(table[n].ci)}" for n in shown)]))
    return "\n".join(out) + "\n"
