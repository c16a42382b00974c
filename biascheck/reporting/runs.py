"""Several runs of one suite side by side (``biascheck compare``), and a suite's baselines across
releases (``biascheck history``): the documents (``compare.json``) and their Markdown. The HTML
pages are :func:`biascheck.reporting.html.render_runs_html` and ``render_history_html``.

Nothing here tests a difference: each run shows its own metric values with the intervals its
``results.json`` records. ``biascheck diff A B`` is the paired test of two of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from biascheck.benchmarks.base import get_benchmark, layout_of
from biascheck.core import format as fmt
from biascheck.core.errors import BiascheckError
from biascheck.core.format import md_row, md_text, strong
from biascheck.core.version import VERSION
from biascheck.evaluation.baseline import fingerprint_differences
from biascheck.reporting.results import failing, gated, verdict_index
from biascheck.suite import missing_data_summary

COMPARE_SCHEMA = "biascheck.compare/1"
HISTORY_SCHEMA = "biascheck.history/1"
OVERALL = "overall"
# The fix of a refused run when no option allows the difference (biascheck compare).
SAME_SUITE_FIX = "compare runs of one suite version: run the other models again on this suite, or compare each group of runs on its own"


def _answer_mode(document: Mapping[str, Any]) -> str:
    return str((document.get("run") or {}).get("estimator") or "generation (the default)")


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


def failed_text(failed: Sequence[Mapping[str, str]] | None) -> str:
    """A run's (compare) or a release's (history) thresholds in words, the same in both views:
    ``FAIL: diff_bias_amb (overall and 2 categories), acc_dis (1 category)``, passed, or not recorded."""
    if failed is None:
        return "not recorded (a baseline of an older biascheck)"
    if not failed:
        return "passed"
    scopes: dict[str, list[str]] = {}
    for check in failed:
        scopes.setdefault(check["metric"], []).append(check["scope"])
    parts = []
    for metric, where in scopes.items():
        categories = sum(scope != OVERALL for scope in where)
        named = [OVERALL] if OVERALL in where else []
        named += [f"{categories} categor{'y' if categories == 1 else 'ies'}"] if categories else []
        parts.append(f"{metric} ({' and '.join(named)})")
    return "FAIL: " + ", ".join(parts)


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
    """The ``biascheck.compare/1`` document of several runs (path as shown, results document) of
    one suite: a row per metric and scope, each run's value, interval, n and threshold verdict in
    it. Raises :class:`BiascheckError` naming the first run that cannot stand beside the first."""
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
    marks = [recorded_verdicts(d) or {} for d in documents]
    rows = []
    for metric in metrics:
        for scope in scopes:
            values = [
                _cell(d, index.get((scope, metric)), mark.get((scope, metric)), scope, metric) for d, index, mark in zip(documents, verdicts, marks)
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
    return {
        "schema": COMPARE_SCHEMA,
        "tool": {"name": "biascheck", "version": VERSION},
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "suite": {k: suite[k] for k in ("name", "benchmark", "fingerprint", "language", "description") if k in suite},
        "confidence": _confidence(documents[0]),
        "runs": [_run(label, path, d) for label, path, d in zip(run_labels(documents, paths), paths, documents)],
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


def _run(label: str, path: str, document: Mapping[str, Any]) -> dict[str, Any]:
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
        # The recorded threshold checks that failed it (failed_checks), as history lists a release's.
        "failed": failed_checks(document),
        "notes": notes,
    }


# --- Markdown -----------------------------------------------------------------------------------


def _value_cell(value: Mapping[str, Any]) -> str:
    text = f"{fmt.value(value['value'])} {fmt.ci(value['ci'])}" if fmt.number(value["value"]) is not None else fmt.NA
    return strong(f"{text} FAIL") if value["passed"] is False else text


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
        "overlap do not show two runs equal, nor do separate ones a tested difference: `biascheck diff A B` tests two runs case by case.",
        "",
        md_row(["#", "run", "model", "revision", "created", "cases", "thresholds"]),
        "|---:|---|---|---|---|---:|---|",
    ]
    for i, run in enumerate(runs, 1):
        status = failed_text(run["failed"]) if run["failed"] or run["passed"] else "FAILED (see its notes)"
        status = status if run["passed"] else strong(status)
        out.append(md_row([i, run["label"], run["model"], run["revision"] or "-", run["created_at"], fmt.count(run["cases"]), status]))
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
    releases: Sequence[tuple[str, Mapping[str, Any]]], *, suite: str, thresholds: Mapping[str, Any] | None, gated_metrics: Sequence[str]
) -> dict[str, Any]:
    """The ``biascheck.history/1`` document of a suite's baselines (path as shown, loaded
    baseline), in the order given (oldest first): each release's overall value of each headline
    metric with its interval. ``thresholds``: the suite's (from its manifest), None when unknown."""
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
    entries = []
    previous = None
    for path, document in releases:
        fingerprint = document["suite"]["fingerprint"]
        changed: list[str] = [] if previous is None else fingerprint_differences(previous, fingerprint)
        previous = fingerprint
        model = document["model"]
        recorded = recorded_verdicts(document) or {}
        entries.append(
            {
                "label": model.get("revision") or document["created_at"],
                "path": path,
                "model": model["model"],
                "revision": model.get("revision"),
                "created_at": document["created_at"],
                "git_commit": document.get("git_commit"),
                "fingerprint": fingerprint.get("suite"),
                # What of the suite changed since the release before: values across it measure another suite.
                "suite_changed": changed,
                "metrics": {m: document["metrics"]["overall"].get(m) for m in headline},
                # The recorded threshold checks that failed it (failed_checks; None: none recorded),
                # and each headline metric's overall verdict, as compare has a run's.
                "failed": failed_checks(document),
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
        "**FAIL**: a threshold check the release failed when it was recorded (its verdict, not today's thresholds).",
        "",
        md_row(
            [
                "release",
                "model",
                "created",
                "thresholds",
                *(f"{m} ({fmt.threshold(document['thresholds'].get(m))})" if document["thresholds"].get(m) else m for m in headline),
            ]
        ),
        "|---|---|---|---|" + "---:|" * len(headline),
    ]
    for release in releases:
        cells = [
            _value_cell({"value": v.get("value"), "ci": v.get("ci"), "passed": release["passed"].get(m)}) if v else fmt.NA
            for m, v in ((m, release["metrics"][m]) for m in headline)
        ]
        status = failed_text(release["failed"])
        out.append(md_row([release["label"], release["model"], release["created_at"], strong(status) if release["failed"] else status, *cells]))
    changes = [
        "- " + md_text(f"{r['label']}: the suite changed ({', '.join(r['suite_changed'])}): values before it measure another suite")
        for r in releases
        if r["suite_changed"]
    ]
    if changes:
        out += ["", *changes]
    return "\n".join(out) + "\n"
