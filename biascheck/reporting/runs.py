"""Several runs of one suite side by side (``biascheck compare``), and a suite's baselines across
releases (``biascheck history``): the documents (``compare.json``, ``history.json``) and their
Markdown. The HTML pages are :func:`biascheck.reporting.html.render_runs_html` and
``render_history_html``.

Each run shows its own metric values with the intervals its ``results.json`` records. Both views
mark a run (release) from :func:`run_marks` alone: the threshold checks it recorded as failed, and
whether it regressed against the one before it by the paired test ``biascheck diff A B`` runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from biascheck.benchmarks.base import get_benchmark, layout_of
from biascheck.core import format as fmt
from biascheck.core.errors import BiascheckError
from biascheck.core.format import md_row, md_text, strong
from biascheck.core.version import VERSION
from biascheck.evaluation import baseline as baselines
from biascheck.evaluation.baseline import fingerprint_differences
from biascheck.evaluation.regression import compare, settings_from
from biascheck.records.baseline import BaselineRecord
from biascheck.records.run import RunRecord
from biascheck.reporting.results import failing, gated, verdict_index
from biascheck.suite import missing_data_summary

# /2: each run (release) carries its regression against the one before it (run_marks).
COMPARE_SCHEMA = "biascheck.compare/2"
HISTORY_SCHEMA = "biascheck.history/2"
OVERALL = "overall"
# A run's (release's) regression mark against its predecessor: its "verdict".
REGRESSED, NOT_REGRESSED, NOT_COMPARED = "regressed", "not regressed", "not compared"
# The fix of a refused run when no option allows the difference (biascheck compare).
SAME_SUITE_FIX = "compare runs of one suite version: run the other models again on this suite, or compare each group of runs on its own"


def _answer_mode(document: Mapping[str, Any]) -> str:
    """How a run's answers were read: a results.json's ``run.estimator``, a baseline's ``model.estimator``."""
    mode = document["model"].get("estimator") if _is_baseline(document) else (document.get("run") or {}).get("estimator")
    return str(mode or "generation (the default)")


def check_same_suite(
    reference: tuple[str, Mapping[str, Any]],
    run: tuple[str, Mapping[str, Any]],
    *,
    allow_fingerprint_mismatch: bool = False,
    fix: str = SAME_SUITE_FIX,
) -> list[str]:
    """Refuse to set ``run`` (path, results document) beside ``reference``: another suite, another
    suite fingerprint (data, prompts, subset, ...; see :func:`fingerprint_differences`) unless
    allowed, or another answer mode (``run.estimator``: a parsed reply, a log-likelihood and a
    first-token reading of one model differ by construction). The one-line error names ``run``'s
    file and field, and ``fix`` (for a fingerprint). Returns the fingerprint parts that differ."""
    where, document = run
    other, first = reference
    mine, theirs = document["suite"], first["suite"]
    if (mine["name"], mine["benchmark"]) != (theirs["name"], theirs["benchmark"]):
        raise BiascheckError(
            where,
            "suite.name",
            f"is a run of suite {mine['name']!r} ({mine['benchmark']}), and {other} of {theirs['name']!r} ({theirs['benchmark']})",
            "compare runs of one suite",
        )
    differences = fingerprint_differences(theirs["fingerprint"], mine["fingerprint"])
    if differences and not allow_fingerprint_mismatch:
        shown = ", ".join(
            f"{part} {mine['fingerprint'].get(part) or 'none'} here, {theirs['fingerprint'].get(part) or 'none'} in {other}" for part in differences
        )
        raise BiascheckError(where, "suite.fingerprint", f"differs from that of {other} ({shown})", fix)
    if _answer_mode(document) != _answer_mode(first):
        raise BiascheckError(
            where,
            "run.estimator",
            f"was answered by {_answer_mode(document)}, and {other} by {_answer_mode(first)}: answers read in different ways are not comparable",
            "compare runs answered the same way (pytest's answer-mode option chooses it)",
        )
    return differences


def recorded_verdicts(document: Mapping[str, Any]) -> dict[tuple[str, str], bool | None] | None:
    """The threshold verdicts a results.json or a baseline records, by (scope, metric): True
    passed, False failed the run, None did not gate it (-k deselected its metric item). None when
    the document records none (a baseline of an older biascheck). ``compare`` and ``history`` mark
    a run from this alone: neither judges a value against a threshold again."""
    verdicts = document.get("verdicts")
    if verdicts is None:
        return None
    return {(v["scope"], v["metric"]): (not failing(v) if gated(v) else None) for v in verdicts}


def failed_checks(document: Mapping[str, Any]) -> list[dict[str, str]] | None:
    """The recorded threshold checks that failed the run, each ``{"metric", "scope"}``; None when
    the document records no verdicts."""
    verdicts = recorded_verdicts(document)
    if verdicts is None:
        return None
    return [{"metric": metric, "scope": scope} for (scope, metric), passed in verdicts.items() if passed is False]


def scopes_text(checks: Sequence[Mapping[str, Any]]) -> str:
    """Checks by metric, their scopes counted: ``diff_bias_amb (overall and 2 categories), acc_dis (1 category)``."""
    scopes: dict[str, list[str]] = {}
    for check in checks:
        scopes.setdefault(check["metric"], []).append(check["scope"])
    parts = []
    for metric, where in scopes.items():
        categories = sum(scope != OVERALL for scope in where)
        named = [OVERALL] if OVERALL in where else []
        named += [f"{categories} categor{'y' if categories == 1 else 'ies'}"] if categories else []
        parts.append(f"{metric} ({' and '.join(named)})")
    return ", ".join(parts)


def failed_text(failed: Sequence[Mapping[str, str]] | None) -> str:
    """A run's (compare) or a release's (history) thresholds in words, the same in both views:
    ``FAIL: diff_bias_amb (overall and 2 categories), acc_dis (1 category)``, passed, or not recorded."""
    if failed is None:
        return "not recorded (a baseline of an older biascheck)"
    if not failed:
        return "passed"
    return "FAIL: " + scopes_text(failed)


# --- against the run before -----------------------------------------------------------------------


def run_marks(runs: Sequence[tuple[str, str, Mapping[str, Any]]], *, regression: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """What ``compare`` and ``history`` mark on each run (path, label, a results.json or a baseline
    document), in the order given: ``failed``, the threshold checks it recorded as failed
    (:func:`failed_checks`), and ``regression``, its paired comparison with the run before it
    (:func:`regression_against`; None for the first). Both views mark from this alone, so they
    cannot disagree. ``regression``: the ``[regression]`` table to test with when the run before
    records none (the suite's, where known)."""
    return [
        {"failed": failed_checks(run[2]), "regression": None if k == 0 else regression_against(runs[k - 1], run, fallback=regression)}
        for k, run in enumerate(runs)
    ]


def regression_against(
    previous: tuple[str, str, Mapping[str, Any]], run: tuple[str, str, Mapping[str, Any]], *, fallback: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``run`` compared with ``previous`` (each path, label, document) as ``biascheck diff previous
    run`` compares them: :func:`biascheck.evaluation.regression.compare` with the ``[regression]``
    table ``previous`` records (else ``fallback``). ``{"against": previous's label, "verdict":
    regressed | not regressed | not compared, "checks": the regressed checks (metric, scope,
    worsening_ci, margin), "reason": why not compared, or None}``. Runs that cannot be compared are
    marked so with the reason, never an error: a history spans suite versions and old baselines."""
    (previous_path, label, before), (path, _, after) = previous, run
    reason = _not_comparable(before, after)
    table = before.get("regression") if _is_baseline(before) else before["suite"].get("regression")
    table = table if table is not None else fallback
    if reason is None and table is None:
        reason = f"{label} records no regression settings (a baseline of an older biascheck)"
    if reason is None:
        # view on dicts until the views take records: each side a release (a baseline) or a run, read as its record.
        candidate = BaselineRecord.from_json(after, path) if _is_baseline(after) else RunRecord.from_json(after, path)
        earlier = BaselineRecord.from_json(before, previous_path) if _is_baseline(before) else RunRecord.from_json(before, previous_path)
        try:
            settings = settings_from(candidate, regression=table, where=previous_path, candidate=path)
            as_baseline = earlier if isinstance(earlier, BaselineRecord) else replace(baselines.from_results(earlier), created_at=earlier.created_at)
            comparison = compare(as_baseline, candidate, settings, baseline_path=previous_path)
        except BiascheckError as exc:  # e.g. no case in common
            reason = exc.problem
    if reason is not None:
        return {"against": label, "verdict": NOT_COMPARED, "checks": [], "reason": reason}
    # The verdict alone is read: what the gate calls a regression is a regression here.
    checks = [{"metric": c.metric, "scope": c.scope, "worsening_ci": list(c.worsening_ci), "margin": c.margin} for c in comparison.regressions]
    return {"against": label, "verdict": REGRESSED if checks else NOT_REGRESSED, "checks": checks, "reason": None}


def _is_baseline(document: Mapping[str, Any]) -> bool:
    return isinstance(document.get("cases"), dict)  # a baseline's cases are columns + rows


def _not_comparable(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """Why ``after`` cannot be tested against ``before`` (each a results.json or a baseline), in the
    words of ``biascheck diff``'s refusals; None when it can."""
    run = before.get("run") or {}
    if run.get("complete") is False:
        return f"the run before is incomplete ({run.get('incomplete_reason')})"
    if run.get("case_errors"):
        return f"{run['case_errors']} case(s) of the run before errored"
    changed = fingerprint_differences(before["suite"]["fingerprint"], after["suite"]["fingerprint"])
    if changed:
        return f"the suite changed ({', '.join(changed)})"
    if _answer_mode(before) != _answer_mode(after):
        return f"answered by {_answer_mode(after)}, the one before by {_answer_mode(before)}"
    if after.get("verdicts") is None:
        return "it records no verdicts, so not which metrics it gates (a baseline of an older biascheck)"
    return None


def regression_text(mark: Mapping[str, Any] | None) -> str:
    """A run's regression mark in a few words, the same in both views: ``regressed vs v1.1:
    diff_bias_amb (overall), acc_dis (2 categories)``, ``not regressed vs v1.1``, ``not compared:
    <reason>``, or ``-`` for the first run."""
    if mark is None:
        return "-"
    if mark["verdict"] == NOT_COMPARED:
        return f"not compared with {mark['against']}: {mark['reason']}"
    if mark["verdict"] == REGRESSED:
        return f"regressed vs {mark['against']}: {scopes_text(mark['checks'])}"
    return f"{NOT_REGRESSED} vs {mark['against']}"


def check_text(check: Mapping[str, Any]) -> str:
    """A regressed check in a line: metric, scope, the worsening's interval and the margin it exceeds."""
    return f"{check['metric']} ({check['scope']}): worsened by {fmt.signed_ci(check['worsening_ci'])}, beyond its margin {fmt.value(check['margin'])}"


def _confidence(document: Mapping[str, Any]) -> float | None:
    return fmt.number(((document.get("metrics") or {}).get("bootstrap") or {}).get("confidence"))


def run_labels(documents: Sequence[Mapping[str, Any]], paths: Sequence[str]) -> list[str]:
    """A short, distinct name per run: the model (with its revision), then its creation time where
    two runs share one, then its path where they still do."""
    labels = [d["model"]["model"] + (f"@{d['model']['revision']}" if d["model"].get("revision") else "") for d in documents]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({d['created_at']})" if labels.count(label) > 1 else label for label, d in zip(labels, documents)]
    if len(set(labels)) < len(labels):
        labels = [path if labels.count(label) > 1 else label for label, path in zip(labels, paths)]
    return labels


def headline_metrics(benchmark: str, gated_metrics: Sequence[str], reported: Sequence[str]) -> list[str]:
    """The metrics charted one per chart: the gated ones (in gate order), then the benchmark's own
    headline bias metrics (``report_layout.bias_metrics``), those reported only."""
    return [m for m in dict.fromkeys([*gated_metrics, *layout_of(benchmark).bias_metrics]) if m in reported]


def compare_runs(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The ``biascheck.compare/2`` document of several runs (path as shown, results document) of
    one suite: a row per metric and scope, each run's value, interval, n and threshold verdict in
    it, and each run's marks (:func:`run_marks`): its predecessor is the run given before it.
    Raises :class:`BiascheckError` naming the first run that cannot stand beside the first."""
    paths, documents = [p for p, _ in runs], [d for _, d in runs]
    if len(runs) < 2:
        raise BiascheckError("biascheck compare", None, f"got {len(runs)} run", "give two runs or more (results.json files or report folders)")
    for run in runs[1:]:
        check_same_suite(runs[0], run)
        if _confidence(run[1]) != _confidence(documents[0]):
            raise BiascheckError(
                run[0],
                "metrics.bootstrap.confidence",
                f"is {_confidence(run[1])}, and {paths[0]}'s {_confidence(documents[0])}: intervals of different levels are not side by side",
                "give the suites the same [bootstrap] confidence and run them again",
            )
    suite = documents[0]["suite"]
    defs = get_benchmark(suite["benchmark"]).metric_defs
    metrics = list(dict.fromkeys(m for d in documents for m in d["metrics"]["overall"]))
    scopes = list(dict.fromkeys([OVERALL, *(c for d in documents for c in d["metrics"]["by_category"])]))
    verdicts = [verdict_index(d) for d in documents]
    recorded = [recorded_verdicts(d) or {} for d in documents]
    rows = []
    for metric in metrics:
        for scope in scopes:
            values = [
                _cell(d, index.get((scope, metric)), mark.get((scope, metric)), scope, metric)
                for d, index, mark in zip(documents, verdicts, recorded)
            ]
            if all(v["value"] is None and v["n"] is None for v in values):
                continue  # no run reports it here
            thresholds = {json.dumps(v["threshold"], sort_keys=True) for v in values}
            rows.append(
                {
                    "metric": metric,
                    "scope": scope,
                    "better": defs[metric].better if metric in defs else None,
                    # One threshold for the row when every run has the same (suites may be edited between runs).
                    "threshold": values[0]["threshold"] if len(thresholds) == 1 else None,
                    "values": values,
                }
            )
    gated_overall = [v["metric"] for d in documents for v in d["verdicts"] if v["scope"] == OVERALL]
    layout = layout_of(suite["benchmark"])
    headline = headline_metrics(suite["benchmark"], gated_overall, metrics)
    labels = run_labels(documents, paths)
    marks = run_marks(list(zip(paths, labels, documents)))
    return {
        "schema": COMPARE_SCHEMA,
        "tool": {"name": "biascheck", "version": VERSION},
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "suite": {k: suite[k] for k in ("name", "benchmark", "fingerprint", "language", "description") if k in suite},
        "confidence": _confidence(documents[0]),
        "runs": [_run(label, path, d, mark) for label, path, d, mark in zip(labels, paths, documents, marks)],
        "headline": headline,
        # The metrics of the Markdown and HTML tables (compare.json has every one).
        "shown": [m for m in dict.fromkeys([*headline, *layout.headline, *layout.category_headline, *gated_overall]) if m in metrics],
        "rows": rows,
    }


def _cell(document: Mapping[str, Any], verdict: Mapping[str, Any] | None, passed: bool | None, scope: str, metric: str) -> dict[str, Any]:
    metrics = document["metrics"]
    table = metrics["overall"] if scope == OVERALL else metrics["by_category"].get(scope) or {}
    value = table.get(metric) or {}
    return {
        "value": value.get("value"),
        "ci": value.get("ci") or [None, None],
        "n": value.get("n"),
        "threshold": verdict["threshold"] if verdict else None,
        # None: not gated here; False: failed the run (a -k run's deselected check did not): recorded_verdicts.
        "passed": passed,
        **({"note": value["note"]} if value.get("note") else {}),
    }


def _run(label: str, path: str, document: Mapping[str, Any], mark: Mapping[str, Any]) -> dict[str, Any]:
    run, suite = document["run"], document["suite"]
    notes = []
    if not run["complete"]:
        notes.append(f"incomplete: {run['incomplete_reason']}")
    if run["case_errors"]:
        notes.append(f"{run['case_errors']} cases errored")
    if suite.get("cases_total") is not None and run["cases"] != suite["cases_total"]:
        notes.append(f"a selection of {run['cases']} of the suite's {suite['cases_total']} cases: its overall is the selection's")
    if suite.get("skipped_categories"):
        notes.append(missing_data_summary(suite["skipped_categories"], suite.get("categories_total")))
    return {
        "label": label,
        "path": path,
        "model": document["model"]["model"],
        "revision": document["model"].get("revision"),
        "params": document["model"]["params"],
        "estimator": run.get("estimator"),
        "created_at": document["created_at"],
        "cases": run["cases"],
        "passed": document["passed"],
        # Its marks (run_marks), as history has a release's: the recorded threshold checks that
        # failed it, and its regression against the run before it.
        **mark,
        "notes": notes,
    }


# --- Markdown -----------------------------------------------------------------------------------


def _value_cell(value: Mapping[str, Any]) -> str:
    text = f"{fmt.value(value['value'])} {fmt.ci(value['ci'])}" if fmt.number(value["value"]) is not None else fmt.NA
    return strong(f"{text} FAIL") if value["passed"] is False else text


def _regression_cell(mark: Mapping[str, Any] | None) -> str:
    text = regression_text(mark)
    return strong(text) if mark and mark["verdict"] == REGRESSED else text  # md_row escapes it


def _regression_lines(items: Sequence[Mapping[str, Any]], what: str) -> list[str]:
    """Below a runs' (releases') table: each regressed check of each run, in the order given."""
    out = []
    for item in items:
        mark = item["regression"]
        if mark and mark["verdict"] == REGRESSED:
            out += [f"- {strong(item['label'])} " + md_text(f"regressed vs {mark['against']}:")]
            out += [f"  - {md_text(check_text(check))}" for check in mark["checks"]]
    if not out:
        return []
    return ["", f"Regressed against the {what} before (the paired test of `biascheck diff`, with the suite's [regression] settings):", "", *out]


def _by_metric(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["metric"], []).append(row)
    return grouped


def render_runs_markdown(document: Mapping[str, Any]) -> str:
    """``compare.md`` (and what ``biascheck compare`` prints): the runs, then a table per metric
    with a row per scope and a column per run."""
    suite, runs = document["suite"], document["runs"]
    level = fmt.percent(document["confidence"]) if document.get("confidence") is not None else "the recorded"
    out = [
        f"# biascheck compare: {md_text(suite['name'])} — {len(runs)} runs",
        "",
        md_text(f"Suite {suite['name']} ({suite['benchmark']}), fingerprint {suite['fingerprint'].get('suite')}.") + " Each cell is a run's value "
        f"with its own {level} bootstrap interval, as its results.json records it; **FAIL**: a threshold check the run failed (its recorded verdict). Intervals that "
        "overlap do not show two runs equal, nor do separate ones a tested difference: `biascheck diff A B` tests two runs case by case, "
        "and each run here is tested so against the run given before it (**regressed**).",
        "",
        md_row(["#", "run", "model", "revision", "created", "cases", "thresholds", "vs the run before"]),
        "|---:|---|---|---|---|---:|---|---|",
    ]
    for i, run in enumerate(runs, 1):
        status = failed_text(run["failed"]) if run["failed"] or run["passed"] else "FAILED (see its notes)"
        status = status if run["passed"] else strong(status)
        cells = [i, run["label"], run["model"], run["revision"] or "-", run["created_at"], fmt.count(run["cases"]), status]
        out.append(md_row([*cells, _regression_cell(run["regression"])]))
    out += _regression_lines(runs, "run")
    notes = ["- " + md_text(f"{run['label']}: {note}") for run in runs for note in run["notes"]]
    if notes:
        out += ["", *notes]
    grouped = _by_metric(document["rows"])
    for metric in document["shown"]:
        rows = grouped.get(metric, [])
        if not rows:
            continue
        better = rows[0]["better"]
        threshold = fmt.threshold(rows[0]["threshold"])
        extra = "; ".join(part for part in (f"threshold {threshold}" if threshold else "", f"better: {better}" if better else "") if part)
        out += ["", "## " + md_text(f"{metric}" + (f" ({extra})" if extra else "")), ""]
        out += [md_row(["scope", *(run["label"] for run in runs)]), "|---|" + "---:|" * len(runs)]
        out += [md_row([row["scope"], *(_value_cell(v) for v in row["values"])]) for row in rows]
    hidden = sorted(set(grouped) - set(document["shown"]))
    if hidden:
        out += ["", md_text(f"Not shown here: {', '.join(hidden)} (in compare.json).")]
    return "\n".join(out) + "\n"


# --- across releases ----------------------------------------------------------------------------


def history_document(
    releases: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    suite: str,
    thresholds: Mapping[str, Any] | None,
    gated_metrics: Sequence[str],
    regression: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``biascheck.history/2`` document of a suite's baselines (path as shown, loaded
    baseline), in the order given (oldest first): each release's overall value of each headline
    metric with its interval, and its marks (:func:`run_marks`), its predecessor the release before.
    ``thresholds``: the suite's (from its manifest), None when unknown; ``regression``: its
    ``[regression]`` table, for a release whose predecessor records none."""
    if not releases:
        raise BiascheckError(suite, None, "has no baseline", "record one with pytest's update-baseline option")
    for path, document in releases:
        if document["suite"]["name"] != suite:
            raise BiascheckError(
                path, "suite.name", f"is a baseline of suite {document['suite']['name']!r}, among those of {suite!r}", "move it to its suite's folder"
            )
    benchmark = releases[0][1]["suite"]["benchmark"]
    reported = list(dict.fromkeys(m for _, d in releases for m in d["metrics"]["overall"]))
    headline = headline_metrics(benchmark, gated_metrics, reported)
    labels = [document["model"].get("revision") or document["created_at"] for _, document in releases]
    marks = run_marks([(path, label, document) for (path, document), label in zip(releases, labels)], regression=regression)
    entries = []
    previous = None
    for (path, document), label, mark in zip(releases, labels, marks):
        fingerprint = document["suite"]["fingerprint"]
        changed: list[str] = [] if previous is None else fingerprint_differences(previous, fingerprint)
        previous = fingerprint
        model = document["model"]
        recorded = recorded_verdicts(document) or {}
        entries.append(
            {
                "label": label,
                "path": path,
                "model": model["model"],
                "revision": model.get("revision"),
                "created_at": document["created_at"],
                "git_commit": document.get("git_commit"),
                "fingerprint": fingerprint.get("suite"),
                # What of the suite changed since the release before: values across it measure another suite.
                "suite_changed": changed,
                "metrics": {m: document["metrics"]["overall"].get(m) for m in headline},
                # Its marks (run_marks), as compare has a run's: the recorded threshold checks that
                # failed it (None: none recorded) and its regression against the release before;
                # and each headline metric's overall verdict.
                **mark,
                "passed": {m: recorded.get((OVERALL, m)) for m in headline},
            }
        )
    return {
        "schema": HISTORY_SCHEMA,
        "tool": {"name": "biascheck", "version": VERSION},
        "suite": {"name": suite, "benchmark": benchmark},
        "thresholds": {m: (thresholds or {}).get(m) for m in headline},
        "headline": headline,
        "releases": entries,
    }


def render_history_markdown(document: Mapping[str, Any]) -> str:
    """What ``biascheck history`` prints: a row per release, oldest first, a column per headline metric."""
    headline, releases = document["headline"], document["releases"]
    out = [
        f"# biascheck history: {md_text(document['suite']['name'])} — {len(releases)} releases",
        "",
        "Each release's baseline, oldest first: the overall value of each headline metric with its 95% bootstrap interval; "
        "**FAIL**: a threshold check the release failed when it was recorded (its verdict, not today's thresholds); "
        "**regressed**: the release is credibly worse than the release before it by more than a margin (the paired test of `biascheck diff`).",
        "",
        md_row(
            [
                "release",
                "model",
                "created",
                "thresholds",
                "vs the release before",
                *(f"{m} ({fmt.threshold(document['thresholds'].get(m))})" if document["thresholds"].get(m) else m for m in headline),
            ]
        ),
        "|---|---|---|---|---|" + "---:|" * len(headline),
    ]
    for release in releases:
        cells = [
            _value_cell({"value": v.get("value"), "ci": v.get("ci"), "passed": release["passed"].get(m)}) if v else fmt.NA
            for m, v in ((m, release["metrics"][m]) for m in headline)
        ]
        status = failed_text(release["failed"])
        status = strong(status) if release["failed"] else status
        out.append(md_row([release["label"], release["model"], release["created_at"], status, _regression_cell(release["regression"]), *cells]))
    out += _regression_lines(releases, "release")
    changes = [
        "- " + md_text(f"{r['label']}: the suite changed ({', '.join(r['suite_changed'])}): values before it measure another suite")
        for r in releases
        if r["suite_changed"]
    ]
    if changes:
        out += ["", *changes]
    return "\n".join(out) + "\n"
