"""A single-file HTML report: one suite's run (a :class:`~biascheck.records.run.RunRecord`, what
results.json holds) and, optionally, its comparison with a stored baseline (a
:class:`~biascheck.records.comparison.Comparison`); and the index of a run of several suites.

The page is meant to be opened from disk and read by a person: one file, inline CSS and SVG, no
external assets or fonts, light and dark colour schemes. It uses only the standard library;
every piece of text from the records (model output, prompts, category names, ...) goes through
:func:`html.escape`. The style sheet is package data (``report.css``, inlined into each page); the
charts are drawn by :mod:`biascheck.reporting.charts`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote

from biascheck.benchmarks.base import COMMON_CATEGORIES, common_categories_of, layout_of
from biascheck.core import format as fmt
from biascheck.core.version import VERSION
from biascheck.execution.llm import MAX_REPLY_CHARS
from biascheck.records.comparison import Check, CheckSide, Comparison, Flip
from biascheck.records.run import CaseRecord, MetricValue, RunRecord
from biascheck.reporting.charts import Point, Side, bar_svg, correction_svg, point_svg
from biascheck.reporting.comparison import evidence_anchor, examples_note, unresolved_heading, unresolved_lines
from biascheck.reporting.decision import Decision, FailedCheck, decide
from biascheck.reporting.markup import esc as _e
from biascheck.reporting.markup import fmt_int as _fmt_int
from biascheck.reporting.markup import lang as _lang
from biascheck.reporting.markup import text_width as _text_width
from biascheck.reporting.markup import verdict_class as _verdict_class
from biascheck.reporting.results import (
    CORRECTION_CI_NOTE,
    CORRECTION_NOTE,
    NOT_GATED,
    aggregation_text,
    agreement_line,
    calibration_heading,
    calibration_of,
    correction_rows,
    data_quality_lines,
    deselected_line,
    disagreements,
    excerpt,
    judge_labels,
    judge_lines,
    missing_data_line,
    scope_label,
    served_warning,
    summary_rows,
    unpinned_line,
    unreadable_text,
)
from biascheck.reporting.runs import (
    NOT_COMPARED,
    REGRESSED,
    HistoryView,
    RegressionMark,
    RunsView,
    Scoped,
    check_text,
    failed_text,
    regression_text,
    rows_by_metric,
    scopes_text,
)
from biascheck.reporting.samples import BIASED_PER_CATEGORY, PER_GROUP, biased_sample, browser_sample

__all__ = ["render_html", "render_index", "render_runs_html", "render_history_html"]

VERDICT_ORDER = {"regressed": 0, "inconclusive": 1, "improved": 2, "within margin": 3, "not compared": 4}

ARROW = "\u2192"


@cache
def _css() -> str:
    """report.css, shipped beside this module (package data) and inlined into every page."""
    return "\n" + resources.files("biascheck.reporting").joinpath("report.css").read_text("utf-8")


# --- small formatting helpers --------------------------------------------------------------------


def _value_text(value: Any) -> str:
    """A setting as written in JSON (``false``, ``0.7``, ``null``); strings as they are."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True, default=_json_default)
    except (TypeError, ValueError):
        return str(value)


def _json_default(value: Any) -> Any:
    """A record's read-only mapping, written as the JSON object it was read from."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _params(params: Any) -> str:
    if not isinstance(params, Mapping) or not params:
        return "(defaults)"
    return ", ".join(f"{k}={_value_text(v)}" for k, v in params.items())


def _badge(verdict: str, title: str | None = None) -> str:
    tip = f' title="{_e(title)}"' if title else ""
    return f'<span class="badge {_verdict_class(verdict)}"{tip}>{_e(verdict)}</span>'


def _pass_badge(passed: bool) -> str:
    return '<span class="badge pass">PASSED</span>' if passed else '<span class="badge fail">FAILED</span>'


def _thresholds_badge(failed: Sequence[Scoped] | None, passed: bool = True) -> str:
    """A run's (compare) or a release's (history) thresholds: FAIL and the checks it failed
    (:func:`biascheck.reporting.runs.failed_checks`), PASSED, or not recorded; both pages alike."""
    if failed:
        return f'<span class="badge fail">FAIL</span> <span class="small">{_e(failed_text(failed).removeprefix("FAIL: "))}</span>'
    if failed is None:
        return f'<span class="muted small">{_e(failed_text(None))}</span>'
    return _pass_badge(passed) + ("" if passed else ' <span class="muted small">(see its notes)</span>')


def _regression_badge(mark: RegressionMark | None) -> str:
    """A run's (compare) or a release's (history) regression against the one before it
    (:func:`biascheck.reporting.runs.regression_against`): REGRESSED and its checks, not regressed,
    not compared and why, or a dash for the first; both pages alike."""
    if not mark:
        return '<span class="muted">-</span>'
    against = f'<span class="small">vs <strong{_lang(mark.against)}>{_e(mark.against)}</strong></span>'
    if mark.verdict == REGRESSED:
        checks = mark.checks
        items = "".join(f"<li>{_e(check_text(check))}</li>" for check in checks)
        n = f"{len(checks)} check{'' if len(checks) == 1 else 's'}: {scopes_text(checks)}"
        return (
            f'<span class="badge v-regressed">REGRESSED</span> {against}'
            f'<details{" open" if len(checks) <= 4 else ""}><summary class="small">{n}</summary><ul class="small">{items}</ul></details>'
        )
    if mark.verdict == NOT_COMPARED:
        return f'<span class="badge v-not-compared">not compared</span> <span class="muted small">{_e(regression_text(mark).removeprefix("not compared "))}</span>'
    return f'<span class="muted small">{_e(regression_text(mark))}</span>'


def _scopes(run: RunRecord, group: str) -> list[str]:
    """The scopes of one of the run's metric groups ("category", "label", "prompt"), in results.json's order."""
    return list(dict.fromkeys(v.scope for v in run.metrics.values if v.group == group))


# --- page ----------------------------------------------------------------------------------------


def render_html(run: RunRecord, comparison: Comparison | None = None, *, prompts: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> str:
    """One self-contained HTML page for a run's record (``results.json``) and, optionally, its
    comparison with a baseline (``comparison.json``). ``prompts``: case id -> its messages as
    (role, content) pairs, for the sampled cases (see :mod:`biascheck.reporting.samples`); without
    them the samples show options and replies."""
    prompts = prompts or {}
    suite, model = run.suite, run.model
    decision = decide(run, comparison)
    status = decision.status
    title = f"biascheck: {suite.name} \u2014 {status}"
    if comparison is not None:
        title += " \u2014 " + ("REGRESSED" if comparison.regressed else "no regression")
    sections = [
        _comparison_summary(comparison) if comparison is not None else "",
        _overall(run),
        _correction(run),
        _judges(run),
        _charts(run, comparison),
        _regressions(comparison) if comparison is not None else "",
        _flips(comparison) if comparison is not None else "",
        _biased_sample(run, prompts) if comparison is None else "",  # with a baseline, the flips say more
        _sample_browser(run, prompts),
        _extra_tables(run),
    ]
    body = [
        # The decision and its reasons on the first screen, before the run's details and warnings.
        f"<h1><span{_lang(suite.name)}>biascheck: {_e(suite.name)}</span> {_pass_badge(decision.passed)}</h1>",
        _decision(decision, comparison),
        _header(run),
        _toc(sections),
        *sections,
        "<footer>Generated by biascheck {} from a results document created {}{}. Model: {}.</footer>".format(
            _e(run.tool.get("version") or "?"),
            _e(run.created_at or "?"),
            " and a comparison with a stored baseline" if comparison is not None else "",
            _e(model.model or "?"),
        ),
    ]
    return _page(title, body)


# Table of contents: a long report (hundreds of flips) needs a way to jump past what is read already.
_TOC_TITLES = {
    "comparison": "Comparison with the baseline",
    "overall": "Metrics",
    "judge-correction": "Judge correction",
    "judges": "Judges",
    "charts": "Gated metrics by category",
    "regressions": "Regression tests against the baseline",
    "flips": "Flipped answers",
    "biased-sample": "Sample of biased answers",
    "samples": "Sample browser",
    "across-prompts": "Across prompts",
    "by-label": "By label",
    "runs": "Runs",
    "headline": "Headline metrics",
    "scopes": "Every scope",
    "releases": "Releases",
}


def _toc(sections: list[str]) -> str:
    """Links to every section the page has, in page order."""
    ids = [m for part in sections for m in re.findall(r'<section id="([^"]+)"', part)]
    links = "".join(f'<li><a href="#{_e(i)}">{_e(_TOC_TITLES.get(i, i))}</a></li>' for i in ids)
    return f'<nav class="toc" aria-label="Contents"><strong>Contents</strong><ol>{links}</ol></nav>' if ids else ""


def _page(title: str, body: list[str]) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light dark">\n'
        f"<title>{_e(title)}</title>\n<style>{_css()}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(part for part in body if part)
        + "\n</main>\n</body>\n</html>\n"
    )


def render_index(runs: Sequence[RunRecord], comparisons: Mapping[str, Comparison] | None = None) -> str:
    """``index.html`` of a run of several suites: each suite's page (``<name>/report.html``, as
    :func:`biascheck.reporting.write.write_reports` lays them out) with its verdict."""
    comparisons = comparisons or {}
    rows = []
    for run, row in zip(runs, summary_rows(runs)):
        name, benchmark, model, cases, checks, _, status = row
        badge = _pass_badge(run.passed) + (' <span class="badge v-inconclusive">INCOMPLETE</span>' if status == "INCOMPLETE" else "")
        comparison = comparisons.get(name)
        against = (
            ""
            if comparison is None
            else ('<span class="badge fail">REGRESSED</span>' if comparison.regressed else '<span class="badge pass">no regression</span>')
        )
        rows.append(
            f'<tr><td class="nowrap"><a href="{_e(quote(name))}/report.html">{_e(name)}</a></td><td>{_e(benchmark)}</td>'
            f'<td><code>{_e(model)}</code></td><td class="num">{_e(cases)}</td><td class="num">{_e(checks)}</td>'
            f"<td>{badge}</td><td>{against}</td></tr>"
        )
    failed = sum(not run.passed for run in runs)
    head = (
        f"<h1>biascheck: {len(runs)} suites {_pass_badge(not failed)}</h1>"
        f"<p>{len(runs) - failed} passed, {failed} failed. Each suite's page has its metrics, charts and answers.</p>"
    )
    table = (
        '<div class="scroll"><table><thead><tr><th>suite</th><th>benchmark</th><th>model</th><th class="num">cases</th>'
        '<th class="num">checks passed</th><th>verdict</th><th>against the baseline</th></tr></thead><tbody>\n'
        + "\n".join(rows)
        + "\n</tbody></table></div>"
    )
    return _page(f"biascheck: {len(runs) - failed} of {len(runs)} suites passed", [head, table, _across_suites(runs)])


# A suite on the chart across suites: its label, run, category -> shared name, and metrics drawn.
_Across = tuple[str, RunRecord, dict[str, str], tuple[str, ...]]


def _across_suites(runs: Sequence[RunRecord]) -> str:
    """The same metric, category by category, across the run's suites: a row per shared category
    name (``common_categories``, which each benchmark declares) that two or more suites have, a
    bar per suite and category with its 95% interval. The metrics are the benchmarks' own headline
    bias metrics (``report_layout.bias_metrics``) that two or more of the suites report."""
    suites: list[_Across] = []
    notes: list[str] = []
    for run in runs:
        name, benchmark = run.suite.name, run.suite.benchmark
        mapping = common_categories_of({"suite": run.suite.to_json()})
        if not mapping:
            notes.append(f"{name} is left out: its benchmark ({benchmark}) maps none of its categories to shared names")
            continue
        label = f"{name} ({run.suite.language})" if run.suite.language else name
        reported = set(run.metrics.rest.get("metrics") or ())
        suites.append((label, run, mapping, tuple(m for m in layout_of(benchmark).bias_metrics if m in reported)))
    metrics = list(dict.fromkeys(m for *_, names in suites for m in names))
    charts, drawn = [], []
    for metric in metrics:
        having = [s for s in suites if metric in s[3]]
        if len(having) < 2:
            notes.append(f"{metric}: only {having[0][0]} reports it")
            continue
        chart, chart_notes = _across_chart(metric, having)
        notes += chart_notes
        if chart:
            charts.append(chart)
            drawn.append(metric)
    out = ['<section id="across-suites">\n<h2>Across suites: the same metric by category</h2>']
    if charts:
        out.append(
            '<p class="muted small">Each benchmark names its categories in its own words (and language); here they are grouped '
            "by the shared name each benchmark maps them to, and a row is shown where two or more suites have it. The metrics "
            "are the benchmarks' headline bias metrics that two or more suites report ("
            + ", ".join(f"<code>{_e(m)}</code>" for m in drawn)
            + "): 0 is unbiased. Bars: each suite's value with its 95% bootstrap interval, as on its own page. The suites differ "
            "in templates, prompts and language: read a difference as a lead to follow on the suites' pages, not as a test.</p>"
        )
    else:
        out.append(
            '<p class="muted">No metric to compare: it needs two suites whose benchmarks map their categories to shared names and report the same bias metric.</p>'
        )
    out += charts
    if notes:  # each once: the metrics of one set of suites leave out the same categories
        out.append('<ul class="muted small">' + "".join(f"<li>{_e(note)}</li>" for note in dict.fromkeys(notes)) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def _across_chart(metric: str, suites: list[_Across]) -> tuple[str, list[str]]:
    """One metric's chart across suites, and notes on the categories it cannot show."""
    by_name: dict[str, list[Side]] = {}
    having: dict[str, set[str]] = {}
    unmapped: list[str] = []
    for label, run, mapping, _ in suites:
        for category in _scopes(run, "category"):
            shared = mapping.get(category)
            if shared is None:
                unmapped.append(f"{label}: {category}")
                continue
            side_label = label if category == shared else f"{label} \u00b7 {category}"
            by_name.setdefault(shared, []).append(Side("suite", run.metrics.table("category", category).get(metric), None, side_label))
            having.setdefault(shared, set()).add(label)
    order = {name: i for i, name in enumerate(COMMON_CATEGORIES)}
    names = sorted(by_name, key=lambda name: (order.get(name, len(order)), name))
    rows = [(name, None, None, by_name[name]) for name in names if len(having[name]) > 1]
    alone = [f"{name} ({', '.join(sorted(having[name]))})" for name in names if len(having[name]) == 1]
    notes = []
    if alone:
        notes.append(f"in one suite only, not shown: {'; '.join(alone)}")
    if unmapped:
        notes.append(f"categories without a shared name, not shown: {'; '.join(unmapped)}")
    if not rows:
        return "", [*notes, f"{metric}: the suites have no category in common"]
    side_w = min(max(_text_width(side.label, 11.0) for *_, sides in rows for side in sides) + 10, 300.0)
    svg = bar_svg(rows, metric, side_w=side_w, mark_failing=False)
    legend = (
        '<span><span class="sw sw-bar"></span>value</span><span><span class="sw sw-ci"></span>95% CI</span>'
        "<span>hover a bar for exact numbers; thresholds and verdicts are on each suite's page</span>"
    )
    caption = f'<code>{_e(metric)}</code> <span class="muted small">{len(rows)} shared categories across {len(suites)} suites</span>'
    return (
        f'<figure class="chart" id="across-{_e(metric)}">\n<figcaption>{caption}</figcaption>\n<div class="legend">{legend}</div>\n{svg}\n</figure>',
        notes,
    )


def _header(run: RunRecord) -> str:
    suite, model, info = run.suite, run.model, run.run
    fingerprint = suite.fingerprint
    out = [
        "<header>",
        '<dl class="meta">',
        f"<dt>benchmark</dt><dd>{_e(suite.benchmark)}</dd>",
    ]
    if suite.description:
        out.append(f"<dt>description</dt><dd{_lang(suite.description)}>{_e(suite.description)}</dd>")
    out.append(f"<dt>model</dt><dd><code>{_e(model.model)}</code></dd>")
    out.append(f"<dt>parameters</dt><dd><code>{_e(_params(model.params))}</code></dd>")
    if model.api_base:
        out.append(f"<dt>API base</dt><dd><code>{_e(model.api_base)}</code></dd>")
    if suite.prompts:
        out.append(f"<dt>prompts</dt><dd>{_e(', '.join(suite.prompts))}</dd>")
    out.append(f"<dt>created</dt><dd>{_e(run.created_at)}</dd>")
    out.append("</dl>")

    cost = fmt.number(info.cost_usd)
    pieces = [
        f"{_fmt_int(info.cases)} cases" + (f" (of {_fmt_int(suite.cases_total)} in the suite)" if suite.cases_total != info.cases else ""),
        f"{_fmt_int(info.calls)} calls",
        f"{_fmt_int(info.cache_hits)} cache hits",
        f"{_fmt_int(info.retries)} retries",
        f"{_fmt_int(info.errors)} errors",
    ]
    if info.case_errors:
        pieces.append(f"{_fmt_int(info.case_errors)} cases without an answer")
    if info.truncated:
        pieces.append(f"{_fmt_int(info.truncated)} cases read from a reply cut at {fmt.count(MAX_REPLY_CHARS)} characters")
    pieces.append("cost n/a" if cost is None else fmt.usd(cost))
    if info.estimator:
        pieces.append(f"answered by {_e(info.estimator)}")
    pieces.append(f"suite fingerprint <code>{_e(fingerprint.get('suite'))}</code>")
    out.append('<p class="run">Run: ' + ", ".join(pieces) + "</p>")
    if fingerprint:
        details = ", ".join(f"{_e(k)} <code>{_e(v)}</code>" for k, v in fingerprint.items() if k != "suite")
        out.append(f'<p class="muted small">Fingerprint parts: {details}</p>')
    if info.estimator_note:
        out.append(f'<p class="alert">{_e(info.estimator_note)}</p>')

    served = served_warning(run)
    for line in judge_lines(run, correction=False) + ([f"WARNING: {served}"] if served else []):
        css = "alert" if line.startswith("WARNING") else "muted small"
        out.append(f'<p class="{css}">{_e(line)}</p>')
    if info.unpriced_calls:
        out.append(f'<p class="muted small">Cost unknown for {_fmt_int(info.unpriced_calls)} calls (no price: pass --biascheck-price).</p>')
    if not info.complete or info.incomplete_reason:
        out.append(
            f'<p class="alert"><strong>Incomplete run:</strong> <span{_lang(info.incomplete_reason)}>'
            f"{_e(info.incomplete_reason or 'reason not recorded')}</span></p>"
        )
    missing = missing_data_line(run)
    if missing:
        # Accepted or not, a run without some categories is not the suite: it is never shown small.
        out.append(f'<div class="alert"><strong>{_e(missing)}</strong><ul>')
        out += [f"<li><strong{_lang(c)}>{_e(c)}</strong>: <span{_lang(r)}>{_e(r)}</span></li>" for c, r in suite.skipped_categories.items()]
        out.append("</ul></div>")
    unpinned = unpinned_line(run)
    if unpinned:
        out.append(f'<p class="alert">{_e(unpinned)}</p>')
    data_notes = data_quality_lines(run)
    if data_notes:
        out.append(f'<div class="muted small">{_e(data_notes[0])}<ul>')
        out += [f"<li>{_e(line)}</li>" for line in data_notes[1:]]
        out.append("</ul></div>")
    out.append("</header>")
    return "\n".join(out)


def _evidence(check: FailedCheck, comparison: Comparison | None) -> str:
    """A regressed check's flips counted by direction, linked to where the page lists them."""
    if check.flips is None or comparison is None:
        return ""
    target = evidence_anchor(comparison, check.flips.scope)
    return f'<a href="#{_e(quote(target, safe=""))}">{_e(check.flips.text(ARROW))}</a>'


def _decision(decision: Decision, comparison: Comparison | None) -> str:
    """The decision and its reasons: every failing check (regressions, thresholds, the run's own
    failures) in one table, then the inconclusive checks one line each, closed when many."""
    # A block, not a <section>: the table of contents lists the report's sections, under it.
    out = [f'<div id="decision" class="decision">\n<p class="decision-head"><strong>{_e(decision.headline())}</strong></p>']
    if decision.failed:
        out.append(
            '<div class="scroll"><table class="failed-checks"><thead><tr><th>kind</th><th>check</th>'
            '<th class="num">baseline \u2192 candidate</th><th>interval</th><th>rule broken</th><th>evidence: flips</th></tr></thead><tbody>'
        )
        for check in decision.failed:
            scope = f" (<span{_lang(check.scope_label)}>{_e(check.scope_label)}</span>)" if check.scope_label else ""
            interval = f'{_e(check.interval_text().removeprefix(check.interval_label).strip())}<br><span class="muted small">{_e(check.interval_label)}</span>'
            out.append(
                f'<tr class="failed-check" data-kind="{_e(check.kind)}" data-metric="{_e(check.metric or "")}" data-scope="{_e(check.scope or "")}">'
                f"<td>{_e(check.kind)}</td><td><code>{_e(check.metric or '')}</code>{scope}</td>"
                f'<td class="num">{_e(check.values_text())}</td><td class="ci">{interval if check.interval else ""}</td>'
                f"<td{_lang(check.reason)}>{_e(check.rule or check.reason)}</td><td>{_evidence(check, comparison)}</td></tr>"
            )
        out.append("</tbody></table></div>")
    if decision.inconclusive:
        mode = f" (on_inconclusive = {decision.on_inconclusive}: they pass)" if decision.on_inconclusive else ""
        opened = " open" if len(decision.inconclusive) <= 8 else ""
        out.append(
            f'<details class="inconclusive"{opened}><summary>Inconclusive checks ({len(decision.inconclusive)}){_e(mode)}</summary><ul class="small">'
        )
        out += [f"<li><code>{_e(c.metric)}</code> (<span{_lang(c.scope)}>{_e(c.scope)}</span>): {_e(c.text)}</li>" for c in decision.inconclusive]
        out.append("</ul></details>")
    out.append("</div>")
    return "\n".join(out)


def _comparison_summary(comparison: Comparison) -> str:
    baseline, candidate = comparison.baseline, comparison.candidate
    if comparison.regressed:
        badge = '<span class="badge fail">REGRESSED</span>'
    elif not comparison.passed:  # e.g. inconclusive results with fail_inconclusive
        badge = '<span class="badge fail">FAILED</span>'
    else:
        badge = '<span class="badge pass">no regression</span>'
    out = [f'<section id="comparison">\n<h2>Comparison with the baseline {badge}</h2>', '<dl class="meta">']
    out.append(
        f'<dt>baseline</dt><dd><code>{_e(baseline.get("model"))}</code> <span class="muted">({_e(_params(baseline.get("params")))})</span></dd>'
    )
    extra = [(k, baseline.get(k)) for k in ("path", "created_at", "git_commit", "tool_version") if baseline.get(k)]
    if extra:
        out.append('<dt>baseline file</dt><dd class="muted small">' + "; ".join(f"{_e(k)}: <code>{_e(v)}</code>" for k, v in extra) + "</dd>")
    out.append(
        f'<dt>candidate</dt><dd><code>{_e(candidate.get("model"))}</code> <span class="muted">({_e(_params(candidate.get("params")))})</span></dd>'
    )
    if comparison.cases:
        out.append("<dt>cases</dt><dd>" + ", ".join(f"{_e(k)} {_fmt_int(v)}" for k, v in comparison.cases.items()) + "</dd>")
    if comparison.settings:
        out.append(
            '<dt>settings</dt><dd class="small">' + ", ".join(f"{_e(k)} = {_e(_value_text(v))}" for k, v in comparison.settings.items()) + "</dd>"
        )
    out.append("</dl>")

    counts: dict[str, int] = {}
    for check in comparison.checks:
        counts[check.verdict] = counts.get(check.verdict, 0) + 1
    if counts:
        ordered = sorted(counts.items(), key=lambda kv: VERDICT_ORDER.get(kv[0], 9))
        out.append('<p class="counts">' + " ".join(f"{_badge(v)}&nbsp;{n}" for v, n in ordered) + "</p>")

    if comparison.warnings:
        out.append('<div class="alert"><strong>Warnings</strong><ul>')
        out += [f"<li{_lang(w)}>{_e(w)}</li>" for w in comparison.warnings]
        out.append("</ul></div>")

    fingerprint = comparison.fingerprint
    differences = fingerprint.get("differences") or []
    if fingerprint.get("equal", True) and not differences:
        out.append('<p class="muted small">Suite fingerprints are equal: both runs used the same data, prompts and subset.</p>')
    else:
        allowed = " (the difference was explicitly allowed)" if fingerprint.get("allowed") else ""
        out.append(f'<div class="alert"><strong>Suite fingerprints differ{allowed}</strong><ul>')
        out += [f"<li>{_difference(d)}</li>" for d in differences] or ["<li>no details recorded</li>"]
        out.append("</ul></div>")
    out.append("</section>")
    return "\n".join(out)


def _difference(item: Any) -> str:
    if isinstance(item, Mapping):
        return "; ".join(f"{_e(k)}: <code>{_e(v)}</code>" for k, v in item.items())
    if isinstance(item, (list, tuple)):
        return " \u2192 ".join(f"<code>{_e(v)}</code>" for v in item)
    return _e(item)


def _overall(run: RunRecord) -> str:
    verdicts = {(v.scope, v.metric): v for v in run.verdicts}
    # A -k run's "overall" is its selection's, as in the terminal and Markdown reports.
    scope = scope_label(run, "overall")
    out = [
        f'<section id="overall">\n<h2>{_e(scope.capitalize())} metrics</h2>',
        '<div class="scroll"><table>',
        '<thead><tr><th>metric</th><th class="num">value</th><th>95% CI</th><th class="num">n</th><th>threshold</th><th>verdict</th></tr></thead>',
        "<tbody>",
    ]
    for name, value in run.metrics.table("overall", "overall").items():
        verdict = verdicts.get(("overall", name))
        note = value.note or (verdict.note if verdict is not None else None)
        note_html = f'<br><span class="muted small"{_lang(note)}>{_e(note)}</span>' if note else ""
        mark = (
            ""
            if verdict is None
            else '<span class="badge pass">pass</span>'
            if verdict.passed
            else '<span class="badge fail">FAIL</span>'
            if verdict.gated
            else f'<span class="muted">{NOT_GATED}</span>'
        )
        mark += ' <span class="badge v-inconclusive">inconclusive</span>' if verdict is not None and verdict.inconclusive else ""
        row_class = ' class="fail"' if verdict is not None and verdict.failed else ""
        out.append(
            f'<tr{row_class}><td><code>{_e(name)}</code></td><td class="num">{fmt.value(value.value)}{note_html}</td>'
            f'<td class="ci">{fmt.ci(value.ci)}</td><td class="num">{_fmt_int(value.n)}</td>'
            f"<td>{_e(fmt.threshold(verdict.threshold)) if verdict else ''}</td><td>{mark}</td></tr>"
        )
    out.append("</tbody></table></div>")
    deselected = deselected_line(run)
    if deselected:
        out.append(f'<p class="alert">{_e(deselected)}</p>')
    out.append("</section>")
    return "\n".join(out)


# --- the judge correction ----------------------------------------------------------------------


def _correction(run: RunRecord) -> str:
    """A judge-corrected run: the calibration (id, date, size), its confusion matrix as a table (a
    row per true class with its labelled count) and, per corrected metric, an arrow on a number
    line from the raw value to the corrected one, each with its 95% interval as a bar."""
    calibration = calibration_of(run)
    if calibration is None:
        return ""
    out = [
        '<section id="judge-correction">\n<h2>Judge correction</h2>',
        f'<p>{_e(calibration_heading(calibration))}; <span class="muted">{_e(CORRECTION_NOTE)}</span>.</p>',
        '<div class="scroll"><table class="confusion"><caption class="muted small">'
        "P(judge says column | true row), from the labelled stories</caption>",
        '<thead><tr><th>true class</th><th class="num">labelled</th>'
        + "".join(f'<th class="num">judge says {_e(j)}</th>' for j in ("b", "c", "u"))
        + "</tr></thead><tbody>",
    ]
    for c, row in calibration["matrix"].items():
        cells = "".join(f'<td class="num">{x:.3f}</td>' for x in row)
        out.append(f'<tr><th scope="row">{_e(c)}</th><td class="num">{_fmt_int(sum(calibration["counts"][c]))}</td>{cells}</tr>')
    out.append("</tbody></table></div>")
    rows = correction_rows(run)
    if rows:
        legend = (
            '<span><span class="sw sw-raw"></span>raw: the judge\'s readings</span>'
            '<span><span class="sw sw-bar"></span>corrected for the judge</span>'
            '<span><span class="sw sw-arrow"></span>raw \u2192 corrected</span>'
            f"<span>dot: value; bar: {_e(CORRECTION_CI_NOTE)}</span>"
        )
        out.append(f'<figure class="chart">\n<div class="legend">{legend}</div>\n{correction_svg(rows)}\n</figure>')
    out.append("</section>")
    return "\n".join(out)


# --- several judges -------------------------------------------------------------------------------


def _breakable(text: str) -> str:
    """Escaped ``text`` that may break after its separators (``?``, ``&``, ``,``, ``/``, ``=``) and nowhere else."""
    return "<wbr>".join(_e(part) for part in re.split(r"(?<=[?&,/=])", text))


def _judges(run: RunRecord) -> str:
    """A run read by several judges: each judge's own figures and unreadable replies, their
    agreement against the suite's floor, each pair's confusion table, and a few cases they
    disagree on with every judge's reading. Tables name the judges J1, J2, ... (the first one says
    which model each is)."""
    judging = run.judging
    if judging is None:
        return ""
    labels = judge_labels(judging)
    css = "alert" if judging.agreement_passed is False else "muted"
    out = [
        '<section id="judges">\n<h2>Judges</h2>',
        f"<p>Readings combined by {_e(aggregation_text(judging))}.</p>",
        f'<p class="{css}">{_e(agreement_line(judging))}.</p>',
    ]
    names = [value.metric for value in judging.judges[0].metrics]
    out.append(
        '<div class="scroll"><table><thead><tr><th></th><th>judge</th><th class="num">calls</th><th class="num">cache hits</th>'
        '<th class="num">read</th><th>read as nothing</th>'
        + "".join(f'<th class="num"><code>{_e(n)}</code></th>' for n in names)
        + "</tr></thead><tbody>"
    )
    for judge in judging.judges:
        cells = "".join(
            f'<td class="num">{fmt.value(v.value)} <span class="muted small">{fmt.ci(v.ci)}</span></td>' if (v := judge.metric(n)) else "<td></td>"
            for n in names
        )
        out.append(
            f'<tr><th scope="row">{_e(labels[judge.model])}</th><td><code class="model">{_breakable(judge.model)}</code></td>'
            f'<td class="num">{_fmt_int(judge.calls)}</td><td class="num">{_fmt_int(judge.cache_hits)}</td>'
            f'<td class="num">{_fmt_int(judge.readings)} of {_fmt_int(judge.asked)}</td><td>{_e(unreadable_text(judge))}</td>{cells}</tr>'
        )
    out.append("</tbody></table></div>")
    classes = [*judging.agreement.classes, "unscorable"]
    out.append('<div class="pairs">')
    for pair in judging.agreement.pairs:
        first, second = (labels[name] for name in pair.judges)
        out.append(
            f'<div class="scroll"><table class="confusion"><caption class="muted small">Rows {_e(first)}, columns {_e(second)}: '
            f"read alike {_fmt_int(pair.agreed)} of the {_fmt_int(pair.compared)} cases both read</caption>"
            f"<thead><tr><th>{_e(first)} \u2193 {_e(second)} \u2192</th>"
            + "".join(f'<th class="num">{_e(c)}</th>' for c in classes)
            + "</tr></thead><tbody>"
        )
        for row in classes:
            cells = "".join(f'<td class="num">{_fmt_int(pair.table.get(row, {}).get(col, 0))}</td>' for col in classes)
            out.append(f'<tr><th scope="row">{_e(row)}</th>{cells}</tr>')
        out.append("</tbody></table></div>")
    out.append("</div>")
    examples = disagreements(run)
    if examples:
        columns = list(labels.values())
        out.append("<h3>Where the judges disagree</h3>")
        out.append(
            '<p class="muted small">A few of the cases the judges read differently, across categories: each judge\'s reading and, beneath it, the start of its reply.</p>'
        )
        out.append(
            '<div class="scroll"><table><thead><tr><th>case</th><th>category</th><th>question</th><th>what they read (start)</th>'
            + "".join(f"<th>{_e(j)}</th>" for j in columns)
            + "</tr></thead><tbody>"
        )
        for example in examples:
            readings = {labels.get(judge, judge): (outcome, raw) for judge, outcome, raw in example.readings}
            cells = "".join(
                f'<td><strong>{_e(readings[j][0])}</strong> <span class="muted small"{_lang(readings[j][1])}>{_e(excerpt(readings[j][1] or "", 40))}</span></td>'
                if j in readings
                else "<td></td>"
                for j in columns
            )
            out.append(
                f"<tr><td><code>{_e(example.case_id)}</code></td><td{_lang(example.category)}>{_e(example.category)}</td>"
                f'<td{_lang(example.question)}>{_e(example.question)}</td><td class="small"{_lang(example.text)}>{_e(excerpt(example.text))}</td>{cells}</tr>'
            )
        out.append("</tbody></table></div>")
    out.append("</section>")
    return "\n".join(out)


# --- charts --------------------------------------------------------------------------------------


def _charts(run: RunRecord, comparison: Comparison | None) -> str:
    gated = list(dict.fromkeys(v.metric for v in run.verdicts))
    out = ['<section id="charts">\n<h2>Gated metrics by category</h2>']
    if not gated:
        out.append('<p class="muted">No metric is gated in this suite.</p></section>')
        return "\n".join(out)
    if not _scopes(run, "category"):
        out.append('<p class="muted">No per-category metrics in this run.</p></section>')
        return "\n".join(out)
    if comparison is not None:
        legend = '<span><span class="sw sw-base"></span>baseline (upper bar)</span><span><span class="sw sw-bar"></span>candidate (lower bar)</span>'
    else:
        legend = (
            '<span><span class="sw sw-bar"></span>passes its threshold</span>'
            '<span><span class="sw sw-fail"></span>fails its threshold (marked FAIL)</span>'
        )
    legend += (
        '<span><span class="sw sw-ci"></span>95% CI</span>'
        '<span><span class="sw sw-thr"></span>threshold</span>'
        "<span>hover a bar for exact numbers</span>"
    )
    for metric in gated:
        out.append(_chart(run, comparison, metric, legend))
    out.append("</section>")
    return "\n".join(out)


def _chart(run: RunRecord, comparison: Comparison | None, metric: str, legend: str) -> str:
    verdicts = {(v.scope, v.metric): v for v in run.verdicts}
    compared: dict[tuple[str, str], Check] = {(c.metric, c.scope): c for c in comparison.checks} if comparison is not None else {}
    default_threshold = run.suite.thresholds.get(metric)

    # rows: (category, threshold, comparison verdict, sides)
    rows: list[tuple[str, Any, Any, list[Side]]] = []
    for category in _scopes(run, "category"):
        verdict = verdicts.get((category, metric))
        threshold = verdict.threshold if verdict else default_threshold
        candidate = run.metrics.table("category", category).get(metric)
        failing = verdict is not None and verdict.failed
        if comparison is not None:
            entry = compared.get((metric, category))
            cmp_verdict = entry.verdict if entry else "not compared"
            sides = [
                Side("baseline", entry.baseline if entry else None, None, "baseline"),
                Side("candidate", candidate, failing if verdict else None, "candidate", f"; compared with the baseline: {cmp_verdict}"),
            ]
            rows.append((category, threshold, cmp_verdict, sides))
        else:
            rows.append((category, threshold, None, [Side("value", candidate, failing if verdict else None)]))
    svg = bar_svg(rows, metric, side_w=68.0 if comparison is not None else 0.0, mark_failing=comparison is None)

    thresholds = sorted({fmt.threshold(t) for _, t, _, _ in rows if fmt.threshold(t)})
    caption = f'<code>{_e(metric)}</code> <span class="muted small">threshold {_e("; ".join(thresholds) or "none")}</span>'
    return (
        f'<figure class="chart" id="chart-{_e(metric)}">\n<figcaption>{caption}</figcaption>\n'
        f'<div class="legend">{legend}</div>\n' + svg + "\n</figure>"
    )


# --- comparison ----------------------------------------------------------------------------------


def _side_cell(side: CheckSide) -> str:
    if fmt.number(side.value) is None:
        return '<td class="num">n/a</td>'
    return f'<td class="num" title="n = {_fmt_int(side.n)}">{fmt.value(side.value)} <span class="muted small under">{fmt.ci(side.ci)}</span></td>'


def _regressions(comparison: Comparison) -> str:
    out = ['<section id="regressions">\n<h2>Regression tests against the baseline</h2>']
    if not comparison.checks:
        out.append('<p class="muted">No metric was compared.</p></section>')
        return "\n".join(out)
    notable = sorted((c for c in comparison.checks if (c.regressed or c.inconclusive) and c.explanation), key=lambda c: VERDICT_ORDER[c.verdict])
    heading = unresolved_heading(comparison)
    if heading:
        warn = comparison.on_inconclusive in ("warn", "fail")
        out.append(f'<div class="{"alert" if warn else "muted"}" id="unresolved"><p>{_e(heading)}</p><ul>')
        out += [f"<li{_lang(line)}>{_e(line)}</li>" for line in unresolved_lines(comparison)]
        out.append(
            '</ul><p class="muted small">Suite sizes are estimates: the detectable worsening shrinks as 1/sqrt(cases), '
            "assuming the same spread per case.</p></div>"
        )
    if notable:
        out.append("<ul>")
        out += [f"<li>{_badge(c.verdict)} <span{_lang(c.explanation)}>{_e(c.explanation)}</span></li>" for c in notable]
        out.append("</ul>")
    out.append(
        '<p class="muted small">Rows sorted by verdict (regressed, inconclusive, improved, within margin, not compared). '
        "The worsening is how much worse the candidate is (positive: worse), with the bounds each verdict is read off: "
        "beyond the margin, regressed; inside it, within margin; across it, inconclusive. The bounds hold for all checks "
        "at once (Bonferroni); p is adjusted the same way (hover for the raw p, the paired counts and the unadjusted "
        "interval); MDE is the smallest worsening this sample could detect.</p>"
    )
    out.append('<div class="scroll"><table>')
    out.append(
        '<thead><tr><th>metric</th><th>scope</th><th class="num">baseline</th><th class="num">candidate</th>'
        '<th class="num">worsening [bounds]</th><th class="num">p (adjusted)</th><th>verdict</th>'
        '<th class="num">MDE</th><th>margin</th></tr></thead>\n<tbody>'
    )
    for c in sorted(comparison.checks, key=lambda c: VERDICT_ORDER.get(c.verdict, 9)):
        p_tip = f"raw p = {fmt.p_value(c.p_value)}"
        if c.mcnemar is not None:
            p_tip += (
                f"; paired cases: {_fmt_int(c.mcnemar.get('worse'))} worse, {_fmt_int(c.mcnemar.get('better'))} better, "
                f"McNemar p = {fmt.p_value(c.mcnemar.get('p_value'))}"
            )
        worse = fmt.number(c.worsening)
        p_tip += f"; unadjusted 95% interval {fmt.signed_ci(c.worsening_ci_unadjusted)}"
        diff_text = "n/a" if worse is None else f'{fmt.signed(worse)} <span class="muted small under">{fmt.signed_ci(c.worsening_ci)}</span>'
        better = f' title="better: {_e(c.better)}"' if c.better else ""
        row_class = ' class="fail"' if c.regressed and c.gated else ""
        margin = c.rule.removeprefix(f"{c.metric}:")  # the metric is the row's first cell already
        evidence = f' <a class="small" href="#{_e(evidence_anchor(comparison, c.scope))}">flips</a>' if c.regressed else ""
        evidence += "" if c.gated else f' <span class="muted small">{NOT_GATED}</span>'
        out.append(
            f"<tr{row_class}><td{better}><code>{_e(c.metric)}</code></td>"
            f'<td class="scope"{_lang(c.scope)}>{_e(c.scope)}</td>'
            f"{_side_cell(c.baseline)}{_side_cell(c.candidate)}"
            f'<td class="num">{diff_text}</td>'
            f'<td class="num" title="{_e(p_tip)}">{fmt.p_value(c.p_adjusted)}</td>'
            f"<td>{_badge(c.verdict, c.explanation)}{evidence}</td>"
            f'<td class="num">{fmt.value(c.mde)}</td>'
            f'<td class="rule" title="rule {_e(c.rule)}"><code>{_e(margin)}</code></td></tr>'
        )
    out.append("</tbody></table></div>\n</section>")
    return "\n".join(out)


def _outcome(name: str) -> str:
    cls = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return f'<span class="outcome o-{cls}">{_e(name)}</span>'


def _flips(comparison: Comparison) -> str:
    """Counts per category and direction, then the examples by category, each category's under
    its anchor (``flips-<category>``), which a regressed check's row links to."""
    flips = comparison.flips
    out = ['<section id="flips">\n<h2>Flipped answers</h2>']
    out.append(f"<p>{_fmt_int(flips.total)} cases changed outcome between the baseline and the candidate.</p>")
    transitions = list(flips.by_transition)
    if transitions:
        evidence = {c.scope for c in comparison.regressions}
        head = "".join(f'<th class="num">{_e(t).replace("-&gt;", ARROW)}</th>' for t in transitions)
        out.append(
            f'<div class="scroll"><table class="flip-counts"><thead><tr><th>category</th><th class="num">changed</th>{head}</tr></thead><tbody>'
        )
        for category, counts in flips.by_category.items():
            mark = f" {_badge('regressed')}" if category in evidence else ""
            cells = "".join(f'<td class="num">{_fmt_int(counts.get(t, 0))}</td>' for t in transitions)
            out.append(f'<tr><td{_lang(category)}>{_e(category)}{mark}</td><td class="num">{_fmt_int(sum(counts.values()))}</td>{cells}</tr>')
        cells = "".join(f'<td class="num">{_fmt_int(n)}</td>' for n in flips.by_transition.values())
        out.append(f'<tr class="total"><td>all</td><td class="num">{_fmt_int(flips.total)}</td>{cells}</tr></tbody></table></div>')
    if flips.total:
        out.append(f'<p class="muted small">{_e(examples_note(flips))}</p>')
    grouped: dict[str, list[Flip]] = {c: [] for c in flips.by_category}
    for flip in flips.examples:
        grouped.setdefault(flip.category, []).append(flip)
    for category, items in grouped.items():
        if items:
            counted = flips.by_category.get(category)
            out.append(_flip_category(category, items, sum(counted.values()) if counted is not None else None))
    out.append("</section>")
    return "\n".join(out)


def _flip_category(category: str, items: list[Flip], counted: int | None) -> str:
    """One category's examples, closed (with 200 flips the open list was a page 16,000 px tall),
    under the anchor its regressed checks link to."""
    noun = "flip" if len(items) == 1 else "flips"
    of = f" of {_fmt_int(counted)}" if counted is not None and counted > len(items) else ""
    out = [
        f'<details class="cat" id="{_e(fmt.flips_anchor(category))}"><summary><span{_lang(category)}>{_e(category)}</span> '
        f'<span class="muted">\u2014 <span class="flip-count">{len(items)}</span> {noun} shown{of}</span></summary>'
    ]
    out += [_flip(flip) for flip in items]
    out.append("</details>")
    return "\n".join(out)


def _flip(flip: Flip) -> str:
    prompt, answer, before = flip.rest.get("prompt_text"), flip.answer, flip.baseline_answer
    prompt_id = f'<span><span class="label">prompt</span> {_e(flip.prompt)}</span>' if flip.prompt is not None else ""
    out = [
        '<div class="flip">',
        f'<div class="flip-head"><code>{_e(flip.case_id)}</code>'
        f'<span><span class="label">context</span> {_e(flip.context_type or "n/a")}</span>{prompt_id}'
        f"<span>{_outcome(flip.baseline)} \u2192 {_outcome(flip.candidate)}</span></div>",
        _flip_options(flip),
        '<div class="label">prompt</div>' if prompt is not None else "",
        f'<div class="prompt"{_lang(prompt)}>{_e(prompt)}</div>' if prompt is not None else "",
        '<div class="label">candidate answer</div>',
        f'<div class="answer"{_lang(answer)}>{_e(answer) if answer is not None else "n/a"}</div>',
        '<div class="label">baseline answer</div>' if before is not None else "",
        f'<div class="answer"{_lang(before)}>{_e(before)}</div>' if before is not None else "",
        "</div>",
    ]
    return "\n".join(part for part in out if part)


def _option(text: str | None, outcome: str | None = None) -> str:
    """An answer option's text (or n/a), with the outcome class it was read as."""
    shown = f'<span class="option"{_lang(text)}>{_e(text)}</span>' if text is not None else '<span class="muted">n/a</span>'
    return shown + (f" {_outcome(outcome)}" if outcome is not None else "")


def _flip_options(flip: Flip) -> str:
    """Which option was right, which the stereotype's, and what each side chose (optional fields of
    the flip record: older comparisons, and cases the run cannot name options for, lack them)."""
    chosen = (flip.correct_option, flip.stereotyped_option, flip.baseline_option, flip.candidate_option)
    listed = [("options shown", " / ".join(_option(text) for text in flip.options))] if flip.options else []
    if all(text is None for text in chosen):
        return '<dl class="options">' + "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in listed) + "</dl>" if listed else ""
    rows = listed + [
        ("correct option", _option(flip.correct_option)),
        ("stereotyped option", _option(flip.stereotyped_option)),
        ("baseline chose", _option(flip.baseline_option, flip.baseline)),
        ("candidate chose", _option(flip.candidate_option, flip.candidate)),
    ]
    return '<dl class="options">' + "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows) + "</dl>"


# --- without a baseline --------------------------------------------------------------------------


def _biased_sample(run: RunRecord, prompts: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    """Up to five stereotyped answers per category, the first by case id (so the same run always
    shows the same ones): what to read first when there is no baseline to compare with."""
    sample = biased_sample(run.cases)
    if not sample:
        return ""
    out = [
        '<section id="biased-sample">\n<h2>Sample of biased answers</h2>',
        f'<p class="muted small">Up to {BIASED_PER_CATEGORY} answers per category that chose the stereotyped option '
        "where it was not the correct one, the first by case id: the prompt the model read (context, question and "
        "options), the options, and its reply. Every case is in results.json.</p>",
    ]
    for category, (cases, total) in sample.items():
        out.append(f'<h3><span{_lang(category)}>{_e(category)}</span> <span class="muted small">({len(cases)} of {_fmt_int(total)})</span></h3>')
        out += [_biased_case(case, prompts.get(case.case_id)) for case in cases]
    out.append("</section>")
    return "\n".join(out)


def _biased_case(case: CaseRecord, messages: Sequence[tuple[str, str]] | None) -> str:
    out = [
        '<div class="sample">',
        f'<div class="flip-head"><code>{_e(case.case_id)}</code>'
        f'<span><span class="label">context</span> {_e(case.context_type or "n/a")}</span></div>',
        # A biased outcome means the chosen option is the stereotyped one.
        f'<dl class="options"><dt>stereotyped option</dt><dd>{_option(case.answer)}</dd></dl>',
        '<div class="pair">',
        _prompt_block(messages),
        _reply_block(case),
        "</div>",
        "</div>",
    ]
    return "\n".join(out)


def _prompt_block(messages: Sequence[tuple[str, str]] | None) -> str:
    """The prompt as the model read it (every message, its role named when there are several)."""
    if not messages:
        return '<div><div class="label">prompt</div><div class="prompt muted">not kept: this page was rendered from results.json alone</div></div>'
    parts = []
    for role, content in messages:
        head = f'<div class="label">{_e(role)}</div>' if len(messages) > 1 else '<div class="label">prompt</div>'
        parts.append(f'{head}<div class="prompt"{_lang(content)}>{_e(content)}</div>')
    return "<div>" + "".join(parts) + "</div>"


def _reply_block(case: CaseRecord) -> str:
    """The reply (a generation, when the benchmark asked for one), then the options with the one it
    was read as choosing marked."""
    generation = case.fields.get("generation")
    reply = generation if generation is not None else case.raw
    out = ['<div><div class="label">reply</div>', f'<div class="answer"{_lang(reply)}>{_e(reply) if reply is not None else "n/a"}</div>']
    if generation is not None and case.raw is not None:
        out.append(f'<div class="label">read as</div><div class="answer"{_lang(case.raw)}>{_e(case.raw)}</div>')
    if case.choices:
        chosen = case.fields.get("answer_index")
        items = "".join(
            ('<li class="chosen">' if i == chosen else "<li>")
            + f'<span class="option"{_lang(c)}>{_e(c)}</span>'
            + (' <span class="badge">chosen</span>' if i == chosen else "")
            + "</li>"
            for i, c in enumerate(case.choices)
        )
        out.append(f'<div class="label">options</div><ol class="choices">{items}</ol>')
    out.append("</div>")
    return "".join(out)


# The sample browser's filters. Static (no data of the page in it): it reads the rows' data-*
# attributes and writes only counts, as text.
SAMPLE_SCRIPT = """
(function () {
  var section = document.getElementById("samples");
  if (!section) { return; }
  var selects = Array.prototype.slice.call(section.querySelectorAll("select[data-filter]"));
  var rows = Array.prototype.slice.call(section.querySelectorAll(".sample-row"));
  var count = section.querySelector(".sample-count");
  function apply() {
    var shown = 0;
    rows.forEach(function (row) {
      var keep = selects.every(function (s) { return !s.value || row.getAttribute("data-" + s.getAttribute("data-filter")) === s.value; });
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " sampled cases shown";
  }
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  section.classList.add("scripted");
  apply();
})();
"""


def _sample_browser(run: RunRecord, prompts: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    """A bounded sample of every kind of answer (see :func:`biascheck.reporting.samples.browser_sample`)
    with filters by category, outcome and prompt, each case's prompt beside its reply."""
    shown, groups = browser_sample(run.cases)
    if not shown:
        return ""
    total = sum(groups.values())
    out = [
        '<section id="samples">\n<h2>Sample browser</h2>',
        f'<p class="muted small">{_fmt_int(len(shown))} of {_fmt_int(total)} cases: at most {PER_GROUP} for each category, outcome '
        "and context, picked by a hash of their case ids (the same ones on every run), so that the page stays small for any "
        "suite. "
        "Every case is in results.json.</p>",
        '<div class="filters">',
    ]
    filters: tuple[tuple[str, list[str]], ...] = (
        ("category", [c.category for c in shown]),
        ("outcome", [c.outcome for c in shown]),
        ("prompt", [c.prompt_id for c in shown]),
    )
    for name, found in filters:
        values = sorted(set(found))
        options = "".join(f'<option value="{_e(v)}"{_lang(v)}>{_e(v or "(none)")}</option>' for v in values)
        out.append(f'<label>{name} <select data-filter="{name}"><option value="">all ({len(values)})</option>{options}</select></label>')
    out.append('<span class="muted small sample-count"></span></div>')
    for case in shown:
        category, outcome, context, prompt_id = case.category, case.outcome, case.context_type or "", case.prompt_id
        head = [f"<code>{_e(case.case_id)}</code>", f"<span{_lang(category)}>{_e(category)}</span>", _outcome(outcome)]
        if context:
            head.append(f'<span><span class="label">context</span> {_e(context)}</span>')
        if prompt_id:
            head.append(f'<span><span class="label">prompt</span> {_e(prompt_id)}</span>')
        out.append(
            f'<div class="sample-row" data-category="{_e(category)}" data-outcome="{_e(outcome)}" data-prompt="{_e(prompt_id)}">'
            f'<div class="flip-head">{"".join(head)}</div><div class="pair">'
            + _prompt_block(prompts.get(case.case_id))
            + _reply_block(case)
            + "</div></div>"
        )
    out.append(f"<script>{SAMPLE_SCRIPT}</script>\n</section>")
    return "\n".join(out)


# --- secondary tables ----------------------------------------------------------------------------


def _extra_tables(run: RunRecord) -> str:
    metrics = run.metrics
    out = []
    summary, by_prompt = metrics.rest.get("prompt_summary") or {}, _scopes(run, "prompt")
    if summary and by_prompt:
        out.append('<section id="across-prompts">\n<h2>Across prompts</h2>')
        out.append('<p class="muted small">Each prompt\'s value; mean \u00b1 sample standard deviation across prompts.</p>')
        out.append(
            '<div class="scroll"><table><thead><tr><th>metric</th>'
            + "".join(f'<th class="num">{_e(p)}</th>' for p in by_prompt)
            + '<th class="num">mean \u00b1 std</th></tr></thead><tbody>'
        )
        tables = {p: metrics.table("prompt", p) for p in by_prompt}
        for name, spread in summary.items():
            spread = spread or {}
            cells = "".join(f'<td class="num">{fmt.value(_value(tables[p].get(name)))}</td>' for p in by_prompt)
            out.append(
                f'<tr><td><code>{_e(name)}</code></td>{cells}<td class="num">{fmt.value(spread.get("mean"))} \u00b1 {fmt.value(spread.get("std"))}</td></tr>'
            )
        out.append("</tbody></table></div>\n</section>")
    labels = _scopes(run, "label")
    if labels:
        tables = {label: metrics.table("label", label) for label in labels}
        names = list(dict.fromkeys(n for table in tables.values() for n in table))
        title = layout_of(run.suite.benchmark).label_title
        out.append(f'<section id="by-label">\n<details><summary><strong>{title}</strong> <span class="muted">({len(labels)} groups)</span></summary>')
        out.append(
            '<div class="scroll"><table><thead><tr><th>label</th>'
            + "".join(f'<th class="num"><code>{_e(n)}</code></th>' for n in names)
            + "</tr></thead><tbody>"
        )
        for label, table in tables.items():
            cells = "".join(f'<td class="num">{fmt.value(_value(table.get(n)))}</td>' for n in names)
            out.append(f"<tr><td{_lang(label)}>{_e(label)}</td>{cells}</tr>")
        out.append("</tbody></table></div>\n</details>\n</section>")
    return "\n".join(out)


def _value(value: MetricValue | None) -> float | None:
    return None if value is None else value.value


# --- several runs, and releases --------------------------------------------------------------------


def _point_figure(metric: str, points: list[Point], *, level: str, connect: bool, what: str) -> str:
    thresholds = sorted({fmt.threshold(p.threshold) for p in points if fmt.threshold(p.threshold)})
    caption = f'<code>{_e(metric)}</code> <span class="muted small">threshold {_e("; ".join(thresholds) or "none")}</span>'
    legend = (
        f'<span><span class="sw sw-bar"></span>{_e(what)}</span><span><span class="sw sw-fail"></span>fails its threshold (marked FAIL)</span>'
        f'<span><span class="sw sw-ci"></span>{_e(level)} CI</span><span><span class="sw sw-thr"></span>threshold</span>'
        "<span>hover a row for exact numbers</span>"
    )
    return (
        f'<figure class="chart" id="chart-{_e(metric)}">\n<figcaption>{caption}</figcaption>\n<div class="legend">{legend}</div>\n'
        + point_svg(points, metric, level=level, connect=connect)
        + "\n</figure>"
    )


def _level(confidence: float | None) -> str:
    confidence = fmt.number(confidence)
    return fmt.percent(confidence) if confidence is not None else "95%"


def render_runs_html(view: RunsView) -> str:
    """``compare.html`` of ``biascheck compare``'s view: the runs, a chart per headline metric (a
    row per run: its overall value with its interval, and the threshold) and the tables of every
    shown metric by scope."""
    suite, runs = view.suite, view.runs
    level = _level(view.confidence)
    rows = {(r.metric, r.scope): r for r in view.rows}
    head = [
        f'<header>\n<h1><span{_lang(suite.name)}>biascheck compare: {_e(suite.name)}</span> <span class="muted">\u2014 {len(runs)} runs</span></h1>',
        '<dl class="meta">',
        f"<dt>benchmark</dt><dd>{_e(suite.benchmark)}</dd>",
        *([f"<dt>description</dt><dd{_lang(suite.description)}>{_e(suite.description)}</dd>"] if suite.description else []),
        f"<dt>suite fingerprint</dt><dd><code>{_e(suite.fingerprint.get('suite'))}</code> (the same for every run)</dd>",
        f"<dt>created</dt><dd>{_e(view.created_at)}</dd>",
        "</dl>",
        f'<p class="muted small">Each run\'s values with its own {_e(level)} bootstrap interval, as its results.json records them. '
        "Intervals that overlap do not show two runs equal, nor do separate ones a tested difference: "
        "<code>biascheck diff A B</code> tests two runs case by case, and each run here is tested so against the run given before it: "
        "REGRESSED when it is credibly worse by more than a margin.</p>",
        "</header>",
    ]
    table = [
        # The marks beside the run's name, in the first screen: the table is wider than a page.
        '<section id="runs">\n<h2>Runs</h2>\n<div class="scroll"><table><thead><tr><th class="num">#</th><th>run</th><th>thresholds</th>'
        '<th>vs the run before</th><th>model</th><th>parameters</th><th>answered by</th><th>created</th><th class="num">cases</th>'
        "<th>file</th></tr></thead><tbody>"
    ]
    for i, run in enumerate(runs, 1):
        model = run.record.model
        revision = f' <span class="muted small">revision {_e(model.revision)}</span>' if model.revision else ""
        table.append(
            f'<tr><td class="num">{i}</td><td><strong{_lang(run.label)}>{_e(run.label)}</strong></td>'
            f"<td>{_thresholds_badge(run.marks.failed, run.record.passed)}</td><td>{_regression_badge(run.marks.regression)}</td>"
            f"<td><code>{_e(model.model)}</code>{revision}</td>"
            f"<td><code>{_e(_params(run.params))}</code></td><td>{_e(run.record.run.estimator or 'generation')}</td>"
            f'<td class="nowrap">{_e(run.record.created_at)}</td><td class="num">{_fmt_int(run.record.run.cases)}</td>'
            f'<td class="muted small"><code>{_e(run.path)}</code></td></tr>'
        )
    table.append("</tbody></table></div>")
    notes = [f"{run.label}: {note}" for run in runs for note in run.notes]
    if notes:
        table.append('<div class="alert"><ul>' + "".join(f"<li{_lang(n)}>{_e(n)}</li>" for n in notes) + "</ul></div>")
    table.append("</section>")
    charts = ['<section id="headline">\n<h2>Headline metrics, run by run</h2>']
    for metric in view.headline:
        row = rows.get((metric, "overall"))
        if row is None:
            continue
        points = [
            Point(run.label, value.value, value.threshold, None if value.passed is None else not value.passed) for run, value in zip(runs, row.values)
        ]
        charts.append(_point_figure(metric, points, level=level, connect=False, what="the run's overall value"))
    if len(charts) == 1:
        charts.append('<p class="muted">No headline metric is reported by these runs.</p>')
    charts.append("</section>")
    tables = ['<section id="scopes">\n<h2>Every scope</h2>']
    grouped = rows_by_metric(view.rows)
    for metric in view.shown:
        scoped = grouped.get(metric, [])
        if not scoped:
            continue
        threshold = fmt.threshold(scoped[0].threshold)
        better = scoped[0].better
        extra = "; ".join(p for p in (f"threshold {threshold}" if threshold else "", f"better: {better}" if better else "") if p)
        tables.append(f'<h3><code>{_e(metric)}</code> <span class="muted small">{_e(extra)}</span></h3>')
        tables.append(
            '<div class="scroll"><table><thead><tr><th>scope</th>'
            + "".join(f'<th class="num"{_lang(run.label)}>{_e(run.label)}</th>' for run in runs)
            + "</tr></thead><tbody>"
        )
        for row in scoped:
            cells = []
            for cell in row.values:
                value = cell.value
                fail = ' <span class="badge fail">FAIL</span>' if cell.passed is False else ""
                tip = f' title="n = {_fmt_int(value.n)}"' if value else ""
                shown = (
                    f'{fmt.value(value.value if value else None)}{fail} <span class="muted small under">{fmt.ci(value.ci if value else None)}</span>'
                )
                cells.append(f'<td class="num"{tip}>{shown}</td>')
            tables.append(f'<tr><td class="scope"{_lang(row.scope)}>{_e(row.scope)}</td>{"".join(cells)}</tr>')
        tables.append("</tbody></table></div>")
    tables.append("</section>")
    sections = ["\n".join(table), "\n".join(charts), "\n".join(tables)]
    footer = f"<footer>Generated by biascheck {_e(VERSION)} from {len(runs)} results documents.</footer>"
    return _page(f"biascheck compare: {suite.name} \u2014 {len(runs)} runs", ["\n".join(head), _toc(sections), *sections, footer])


def render_history_html(view: HistoryView) -> str:
    """``history.html`` of ``biascheck history``'s view: the releases, oldest first, and a chart per
    headline metric with a row per release and the suite's threshold."""
    releases = view.releases
    head = (
        f"<header>\n<h1><span{_lang(view.suite)}>biascheck history: {_e(view.suite)}</span> "
        f'<span class="muted">\u2014 {len(releases)} releases</span></h1>\n'
        f'<p class="muted small">Each release\'s baseline, oldest first (by the time it was recorded): the overall value of each '
        "headline metric with its 95% bootstrap interval, and the suite's threshold as its suite.toml has it now. FAIL: a threshold check "
        "the release failed when it was recorded (the verdict its baseline keeps). REGRESSED: the release is credibly worse than the release "
        "before it by more than a margin (the paired test of <code>biascheck diff</code>, with the suite's [regression] settings).</p>\n</header>"
    )
    table = [
        '<section id="releases">\n<h2>Releases</h2>\n<div class="scroll"><table><thead><tr><th>release</th><th>model</th><th>created</th>'
        "<th>thresholds</th><th>vs the release before</th><th>commit</th><th>suite fingerprint</th><th>file</th></tr></thead><tbody>"
    ]
    for release in releases:
        record, changed = release.record, release.suite_changed
        note = f' <span class="badge v-inconclusive" title="changed: {_e(", ".join(changed))}">suite changed</span>' if changed else ""
        table.append(
            f"<tr><td><strong>{_e(release.label)}</strong></td><td><code>{_e(record.model_name)}</code></td>"
            f'<td class="nowrap">{_e(record.created_at)}</td><td>{_thresholds_badge(release.marks.failed)}</td>'
            f"<td>{_regression_badge(release.marks.regression)}</td>"
            f"<td><code>{_e((record.git_commit or '')[:12])}</code></td>"
            f'<td><code>{_e(release.fingerprint)}</code>{note}</td><td class="muted small"><code>{_e(release.path)}</code></td></tr>'
        )
    table.append("</tbody></table></div>")
    if any(r.suite_changed for r in releases):
        table.append(
            '<p class="alert">Where the suite changed (data, prompts, subset, ...), the releases before it were measured on another suite.</p>'
        )
    table.append("</section>")
    charts = ['<section id="headline">\n<h2>Headline metrics across releases</h2>']
    for metric in view.headline:
        points = []
        for r in releases:
            value, passed = r.value(metric), r.passed(metric)
            # The verdict recorded with the release (runs.recorded_verdicts), as compare.html marks a run;
            # the date beside a revision (a release without one is labelled by its time already).
            note = r.record.created_at[:10] if r.revision else ""
            points.append(Point(r.label, value, view.thresholds.get(metric), None if passed is None else not passed, note))
        charts.append(_point_figure(metric, points, level="95%", connect=True, what="the release's overall value"))
    if len(charts) == 1:
        charts.append('<p class="muted">No headline metric is kept in these baselines.</p>')
    charts.append("</section>")
    sections = ["\n".join(table), "\n".join(charts)]
    footer = f"<footer>Generated by biascheck {_e(VERSION)} from {len(releases)} baselines.</footer>"
    return _page(f"biascheck history: {view.suite}", [head, _toc(sections), *sections, footer])
