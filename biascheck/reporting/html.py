"""A single-file HTML report: one suite's results document and, optionally, its comparison with a
stored baseline (``biascheck.comparison/1``).

The page is meant to be opened from disk and read by a person: one file, inline CSS and SVG, no
JavaScript, no external fonts, light and dark colour schemes. It uses only the standard library;
every piece of text from the documents (model output, prompts, category names, ...) goes through
:func:`html.escape`.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable
from html import escape
from typing import Any, NamedTuple

from biascheck.benchmarks.base import COMMON_CATEGORIES, common_categories_of, layout_of
from biascheck.core import format as fmt
from biascheck.evaluation.regression import on_inconclusive_of
from biascheck.execution.llm import MAX_REPLY_CHARS
from biascheck.reporting.comparison import unresolved_heading, unresolved_lines
from biascheck.reporting.results import (
    CORRECTION_CI_NOTE,
    CORRECTION_NOTE,
    NOT_GATED,
    calibration_heading,
    calibration_of,
    correction_rows,
    deselected_line,
    gated,
    judge_lines,
    missing_data_line,
    scope_label,
    served_warning,
    summary_rows,
)
from biascheck.reporting.results import failing as check_failing

__all__ = ["render_html", "render_index", "render_runs_html", "render_history_html"]

VERDICT_ORDER = {"regressed": 0, "inconclusive": 1, "improved": 2, "unchanged": 3, "not compared": 4}

ARROW = "\u2192"
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")

_CSS = """
:root {
  color-scheme: light dark;
  --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --border: #d1d9e0; --card: #f6f8fa;
  --bar: #2f6fb3; --base: #9aa4b1; --fail: #cf222e; --thr: #8250df; --ci: #1f2328;
  --red: #cf222e; --green: #1a7f37; --grey: #6e7781; --amber: #bf8700; --amber-fg: #1f2328;
  --warn-bg: #fff8c5; --warn-border: #d4a72c;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --border: #3d444d; --card: #151b23;
    --bar: #4493f8; --base: #768390; --fail: #f85149; --thr: #ab7df8; --ci: #e6edf3;
    --red: #da3633; --green: #238636; --grey: #656c76; --amber: #d29922; --amber-fg: #0d1117;
    --warn-bg: #272115; --warn-border: #9e6a03;
  }
}
* { box-sizing: border-box; }
html { background: var(--bg); color: var(--fg); }
body {
  margin: 0; padding: 1.5rem 1rem 3rem; line-height: 1.5; font-size: 15px;
  font-family: system-ui, -apple-system, "Segoe UI", "Apple SD Gothic Neo", "Noto Sans KR",
    "Noto Sans CJK KR", "Malgun Gothic", "맑은 고딕", Roboto, "Helvetica Neue", Arial, sans-serif;
  /* keep-all: Korean wraps at spaces, like English. break-word (unlike anywhere) splits a token only
     when it cannot fit its line at all, and does not let table columns shrink into their tokens. */
  word-break: keep-all; overflow-wrap: break-word;
}
main { max-width: 1200px; margin: 0 auto; }
h1 { font-size: 1.6rem; margin: 0 0 .5rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; padding-bottom: .2rem; border-bottom: 1px solid var(--border); }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .3rem; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "D2Coding", "Noto Sans Mono CJK KR", monospace; font-size: .9em; }
.muted { color: var(--muted); }
.small { font-size: .85em; }
.run { margin: .4rem 0; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .6rem 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
.alert { background: var(--warn-bg); border: 1px solid var(--warn-border); border-radius: 6px; padding: .5rem .8rem; margin: .6rem 0; }
.alert ul { margin: .2rem 0; padding-left: 1.2rem; }
.scroll { overflow-x: auto; max-width: 100%; }
.under { display: block; }  /* a CI under its value keeps wide tables on screen */
td.rule code { white-space: normal; }  /* a long rule wraps between words, never inside one */
nav.toc { margin: 1rem 0; padding: .4rem .8rem; border: 1px solid var(--border); border-radius: 6px; background: var(--card); }
nav.toc ol { margin: .2rem 0; padding-left: 1.4rem; columns: 2 16rem; }
table { border-collapse: collapse; margin: .4rem 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--border); padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: var(--card); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.ci, td code, th code, td.scope, .nowrap { white-space: nowrap; }
tr.fail td { background: color-mix(in srgb, var(--red) 8%, transparent); }
.badge {
  display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .8rem; font-weight: 600;
  line-height: 1.4; white-space: nowrap; color: #ffffff; background: var(--grey);
}
.badge.pass, .badge.v-improved { background: var(--green); }
.badge.fail, .badge.v-regressed { background: var(--red); }
.badge.v-unchanged { background: var(--grey); }
.badge.v-inconclusive { background: var(--amber); color: var(--amber-fg); }
.badge.v-not-compared { background: transparent; color: var(--muted); border: 1px solid var(--border); }
h1 .badge { font-size: 1rem; vertical-align: middle; }
.counts .badge { margin-right: .3rem; }
figure.chart { margin: .6rem 0 1.6rem; }
figure.chart figcaption { margin-bottom: .3rem; }
.legend { display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; font-size: .85rem; color: var(--muted); margin: .2rem 0 .4rem; }
.sw { display: inline-block; width: .9em; height: .9em; vertical-align: -.1em; margin-right: .3em; border-radius: 2px; }
.sw-bar { background: var(--bar); } .sw-base { background: var(--base); } .sw-fail { background: var(--fail); }
.sw-thr { width: 0; border-left: 2px dashed var(--thr); border-radius: 0; }
.sw-ci { width: 1.2em; height: .6em; border: 1.5px solid var(--ci); border-top: 0; border-bottom: 0; position: relative; border-radius: 0; }
svg.bars { display: block; width: 100%; height: auto; font-size: 12px; font-family: inherit; }
svg.bars text { fill: var(--fg); }
svg.bars text.tick, svg.bars text.side, svg.bars .na { fill: var(--muted); }
svg.bars text.val { font-variant-numeric: tabular-nums; }
svg.bars .grid { stroke: var(--border); stroke-width: 1; }
svg.bars .zero { stroke: var(--muted); stroke-width: 1.2; }
svg.bars rect.bar { fill: var(--bar); }
svg.bars rect.bar.base { fill: var(--base); }
svg.bars rect.bar.failing { fill: var(--fail); }
svg.bars .ci { stroke: var(--ci); stroke-width: 1.5; fill: none; }
svg.bars .threshold { stroke: var(--thr); stroke-width: 2; stroke-dasharray: 5 3; }
svg.bars circle.pt { fill: var(--bar); stroke: var(--bg); stroke-width: 1; }
svg.bars circle.pt.failing { fill: var(--fail); }
svg.bars .trend { stroke: var(--base); stroke-width: 1.2; fill: none; }
svg.bars tspan.fail, svg.bars text.v-regressed { fill: var(--red); font-weight: 600; }
svg.bars text.v-improved { fill: var(--green); font-weight: 600; }
svg.bars text.v-inconclusive { fill: var(--amber); font-weight: 600; }
svg.bars text.v-unchanged, svg.bars text.v-not-compared { fill: var(--muted); }
svg.bars rect.ival { fill: var(--bar); opacity: .35; }
svg.bars rect.ival.raw { fill: var(--base); }
svg.bars circle.pt.raw { fill: var(--base); }
svg.bars .arrow { stroke: var(--fg); stroke-width: 1.4; fill: none; }
svg.bars path.arrowhead { fill: var(--fg); stroke: none; }
.sw-raw { background: var(--base); } .sw-arrow { width: 1.4em; height: 0; border-top: 1.5px solid var(--fg); border-radius: 0; }
details.cat { border: 1px solid var(--border); border-radius: 6px; margin: .5rem 0; padding: 0 .8rem; }
details.cat > summary { cursor: pointer; padding: .45rem 0; font-weight: 600; }
details.cat[open] > summary { border-bottom: 1px solid var(--border); margin-bottom: .4rem; }
.flip { padding: .5rem 0 .7rem; border-bottom: 1px dashed var(--border); }
.flip:last-child { border-bottom: 0; }
.flip-head { display: flex; flex-wrap: wrap; gap: .2rem 1rem; align-items: baseline; }
.outcome { font-weight: 600; }
.prompt, .answer {
  white-space: pre-wrap; margin: .3rem 0; padding: .45rem .6rem; background: var(--card);
  border: 1px solid var(--border); border-radius: 6px; font-family: inherit; font-size: .92em;
}
.prompt { max-height: 22em; overflow: auto; }
/* Only free text may break anywhere: a long unbroken prompt line must not widen the page. */
.prompt, .answer, .option { overflow-wrap: anywhere; }
dl.options { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: .4rem 0; }
dl.options dt { color: var(--muted); font-size: .85em; }
dl.options dd { margin: 0; }
.sample { padding: .5rem 0 .7rem; border-bottom: 1px dashed var(--border); }
.label { color: var(--muted); font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; }
footer { margin-top: 3rem; color: var(--muted); font-size: .85rem; }
@media print { .prompt { max-height: none; } details.cat { break-inside: avoid; } }
"""


# --- small formatting helpers --------------------------------------------------------------------


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _fmt_int(value: Any) -> str:
    return _e(fmt.count(value))


def _lang(text: Any) -> str:
    """``lang="ko"`` on elements holding Korean text, so browsers pick Korean fonts and line breaking."""
    return ' lang="ko"' if isinstance(text, str) and _HANGUL.search(text) else ""


def _threshold_positions(threshold: Any) -> list[float]:
    out: list[float] = []
    for kind, limit in fmt.threshold_items(threshold):
        limit = float(limit)
        out += [-limit, limit] if kind == "max_abs" else [limit]
    return out


def _value_text(value: Any) -> str:
    """A setting as written in JSON (``false``, ``0.7``, ``null``); strings as they are."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        return str(value)


def _params(params: Any) -> str:
    if not isinstance(params, dict) or not params:
        return "(defaults)"
    return ", ".join(f"{k}={_value_text(v)}" for k, v in params.items())


def _verdict_class(verdict: Any) -> str:
    return "v-" + re.sub(r"[^a-z0-9]+", "-", str(verdict).lower()).strip("-")


def _badge(verdict: Any, title: str | None = None) -> str:
    tip = f' title="{_e(title)}"' if title else ""
    return f'<span class="badge {_verdict_class(verdict)}"{tip}>{_e(verdict)}</span>'


def _pass_badge(passed: bool) -> str:
    return '<span class="badge pass">PASSED</span>' if passed else '<span class="badge fail">FAILED</span>'


def _text_width(text: str, size: float) -> float:
    """Rough rendered width: wide (Hangul, CJK) characters ~1 em, others ~0.6 em."""
    return sum(size * (1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6) for ch in text)


def _shorten(text: str, size: float, width: float) -> str:
    """``text`` cut to fit ``width`` (whole characters, so never half a Hangul syllable) plus an ellipsis."""
    if _text_width(text, size) <= width:
        return text
    while text and _text_width(text + "\u2026", size) > width:
        text = text[:-1]
    return text + "\u2026"


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


# --- page ----------------------------------------------------------------------------------------


def render_html(results: dict, comparison: dict | None = None) -> str:
    """One self-contained HTML page for a results document (``biascheck.results/1``) and,
    optionally, its comparison with a baseline (``biascheck.comparison/1``)."""
    suite = results.get("suite") or {}
    model = results.get("model") or {}
    status = "PASSED" if results.get("passed") else "FAILED"
    title = f"biascheck: {suite.get('name', '?')} \u2014 {status}"
    if comparison is not None:
        title += " \u2014 " + ("REGRESSED" if comparison.get("regressed") else "no regression")
    sections = [
        _comparison_summary(comparison) if comparison is not None else "",
        _overall(results),
        _correction(results),
        _charts(results, comparison),
        _regressions(comparison) if comparison is not None else "",
        _flips(comparison) if comparison is not None else "",
        _biased_sample(results) if comparison is None else "",  # with a baseline, the flips say more
        _extra_tables(results),
    ]
    body = [
        _header(results),
        _toc(sections),
        *sections,
        "<footer>Generated by biascheck {} from a results document created {}{}. Model: {}.</footer>".format(
            _e(_get(results, "tool", "version") or "?"),
            _e(results.get("created_at") or "?"),
            " and a comparison with a stored baseline" if comparison is not None else "",
            _e(model.get("model") or "?"),
        ),
    ]
    return _page(title, body)


# Table of contents: a long report (hundreds of flips) needs a way to jump past what is read already.
_TOC_TITLES = {
    "comparison": "Comparison with the baseline",
    "overall": "Metrics",
    "judge-correction": "Judge correction",
    "charts": "Gated metrics by category",
    "regressions": "Regression tests against the baseline",
    "flips": "Flipped answers",
    "biased-sample": "Sample of biased answers",
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
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(part for part in body if part)
        + "\n</main>\n</body>\n</html>\n"
    )


def render_index(documents: list[dict], comparisons: dict[str, dict] | None = None) -> str:
    """``index.html`` of a run of several suites: each suite's page (``<name>/report.html``, as
    :func:`biascheck.reporting.write.write_reports` lays them out) with its verdict."""
    from urllib.parse import quote

    comparisons = comparisons or {}
    rows = []
    for document, row in zip(documents, summary_rows(documents)):
        name, benchmark, model, cases, checks, _, status = row
        badge = _pass_badge(bool(document.get("passed"))) + (
            ' <span class="badge v-inconclusive">INCOMPLETE</span>' if status == "INCOMPLETE" else ""
        )
        comparison = comparisons.get(name)
        against = (
            ""
            if comparison is None
            else ('<span class="badge fail">REGRESSED</span>' if comparison.get("regressed") else '<span class="badge pass">no regression</span>')
        )
        rows.append(
            f'<tr><td class="nowrap"><a href="{_e(quote(name))}/report.html">{_e(name)}</a></td><td>{_e(benchmark)}</td>'
            f'<td><code>{_e(model)}</code></td><td class="num">{_e(cases)}</td><td class="num">{_e(checks)}</td>'
            f"<td>{badge}</td><td>{against}</td></tr>"
        )
    failed = sum(not d.get("passed") for d in documents)
    head = (
        f"<h1>biascheck: {len(documents)} suites {_pass_badge(not failed)}</h1>"
        f"<p>{len(documents) - failed} passed, {failed} failed. Each suite's page has its metrics, charts and answers.</p>"
    )
    table = (
        '<div class="scroll"><table><thead><tr><th>suite</th><th>benchmark</th><th>model</th><th class="num">cases</th>'
        '<th class="num">checks passed</th><th>verdict</th><th>against the baseline</th></tr></thead><tbody>\n'
        + "\n".join(rows)
        + "\n</tbody></table></div>"
    )
    return _page(f"biascheck: {len(documents) - failed} of {len(documents)} suites passed", [head, table, _across_suites(documents)])


def _across_suites(documents: list[dict]) -> str:
    """The same metric, category by category, across the run's suites: a row per shared category
    name (``common_categories``, which each benchmark declares) that two or more suites have, a
    bar per suite and category with its 95% interval. The metrics are the benchmarks' own headline
    bias metrics (``report_layout.bias_metrics``) that two or more of the suites report."""
    suites: list[tuple[str, dict, dict[str, str], tuple[str, ...]]] = []  # (label, document, mapping, metrics)
    notes: list[str] = []
    for document in documents:
        suite = document.get("suite") or {}
        name, benchmark = str(suite.get("name")), str(suite.get("benchmark"))
        mapping = common_categories_of(document)
        if not mapping:
            notes.append(f"{name} is left out: its benchmark ({benchmark}) maps none of its categories to shared names")
            continue
        label = f"{name} ({suite['language']})" if suite.get("language") else name
        reported = set(_get(document, "metrics", "metrics") or [])
        suites.append((label, document, mapping, tuple(m for m in layout_of(benchmark).bias_metrics if m in reported)))
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


def _across_chart(metric: str, suites: list[tuple[str, dict, dict[str, str], tuple[str, ...]]]) -> tuple[str, list[str]]:
    """One metric's chart across suites, and notes on the categories it cannot show."""
    by_name: dict[str, list[_Side]] = {}
    having: dict[str, set[str]] = {}
    unmapped: list[str] = []
    for label, document, mapping, _ in suites:
        for category, values in (_get(document, "metrics", "by_category") or {}).items():
            shared = mapping.get(category)
            if shared is None:
                unmapped.append(f"{label}: {category}")
                continue
            side_label = label if category == shared else f"{label} \u00b7 {category}"
            by_name.setdefault(shared, []).append(_Side("suite", (values or {}).get(metric) or {}, None, side_label))
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
    svg = _bar_svg(rows, metric, side_w=side_w, mark_failing=False)
    legend = (
        '<span><span class="sw sw-bar"></span>value</span><span><span class="sw sw-ci"></span>95% CI</span>'
        "<span>hover a bar for exact numbers; thresholds and verdicts are on each suite's page</span>"
    )
    caption = f'<code>{_e(metric)}</code> <span class="muted small">{len(rows)} shared categories across {len(suites)} suites</span>'
    return (
        f'<figure class="chart" id="across-{_e(metric)}">\n<figcaption>{caption}</figcaption>\n<div class="legend">{legend}</div>\n{svg}\n</figure>',
        notes,
    )


def _header(results: dict) -> str:
    suite = results.get("suite") or {}
    model = results.get("model") or {}
    run = results.get("run") or {}
    fingerprint = suite.get("fingerprint") or {}
    out = [
        f"<header>\n<h1><span{_lang(suite.get('name'))}>biascheck: {_e(suite.get('name'))}</span> {_pass_badge(bool(results.get('passed')))}</h1>",
        '<dl class="meta">',
        f"<dt>benchmark</dt><dd>{_e(suite.get('benchmark'))}</dd>",
    ]
    if suite.get("description"):
        out.append(f"<dt>description</dt><dd{_lang(suite['description'])}>{_e(suite['description'])}</dd>")
    out.append(f"<dt>model</dt><dd><code>{_e(model.get('model'))}</code></dd>")
    out.append(f"<dt>parameters</dt><dd><code>{_e(_params(model.get('params')))}</code></dd>")
    if model.get("api_base"):
        out.append(f"<dt>API base</dt><dd><code>{_e(model['api_base'])}</code></dd>")
    if suite.get("prompts"):
        out.append(f"<dt>prompts</dt><dd>{_e(', '.join(map(str, suite['prompts'])))}</dd>")
    out.append(f"<dt>created</dt><dd>{_e(results.get('created_at'))}</dd>")
    out.append("</dl>")

    cost = fmt.number(run.get("cost_usd"))
    pieces = [
        f"{_fmt_int(run.get('cases'))} cases"
        + (
            f" (of {_fmt_int(suite['cases_total'])} in the suite)"
            if isinstance(suite.get("cases_total"), int) and suite["cases_total"] != run.get("cases")
            else ""
        ),
        f"{_fmt_int(run.get('calls'))} calls",
        f"{_fmt_int(run.get('cache_hits'))} cache hits",
        f"{_fmt_int(run.get('retries'))} retries",
        f"{_fmt_int(run.get('errors'))} errors",
    ]
    if run.get("case_errors"):
        pieces.append(f"{_fmt_int(run['case_errors'])} cases without an answer")
    if run.get("truncated"):
        pieces.append(f"{_fmt_int(run['truncated'])} cases read from a reply cut at {fmt.count(MAX_REPLY_CHARS)} characters")
    pieces.append("cost n/a" if cost is None else fmt.usd(cost))
    if run.get("estimator"):
        pieces.append(f"answered by {_e(run['estimator'])}")
    pieces.append(f"suite fingerprint <code>{_e(fingerprint.get('suite'))}</code>")
    out.append('<p class="run">Run: ' + ", ".join(pieces) + "</p>")
    if fingerprint:
        details = ", ".join(f"{_e(k)} <code>{_e(v)}</code>" for k, v in fingerprint.items() if k != "suite")
        out.append(f'<p class="muted small">Fingerprint parts: {details}</p>')
    if run.get("estimator_note"):
        out.append(f'<p class="alert">{_e(run["estimator_note"])}</p>')

    served = served_warning(results)
    for line in judge_lines(results, correction=False) + ([f"WARNING: {served}"] if served else []):
        css = "alert" if line.startswith("WARNING") else "muted small"
        out.append(f'<p class="{css}">{_e(line)}</p>')
    if run.get("unpriced_calls"):
        out.append(f'<p class="muted small">Cost unknown for {_fmt_int(run["unpriced_calls"])} calls (no price: pass --biascheck-price).</p>')
    if run.get("complete") is False or run.get("incomplete_reason"):
        out.append(
            f'<p class="alert"><strong>Incomplete run:</strong> <span{_lang(run.get("incomplete_reason"))}>'
            f"{_e(run.get('incomplete_reason') or 'reason not recorded')}</span></p>"
        )
    missing = missing_data_line(results)
    if missing:
        # Accepted or not, a run without some categories is not the suite: it is never shown small.
        out.append(f'<div class="alert"><strong>{_e(missing)}</strong><ul>')
        out += [f"<li><strong{_lang(c)}>{_e(c)}</strong>: <span{_lang(r)}>{_e(r)}</span></li>" for c, r in suite["skipped_categories"].items()]
        out.append("</ul></div>")
    out.append("</header>")
    return "\n".join(out)


def _comparison_summary(comparison: dict) -> str:
    baseline = comparison.get("baseline") or {}
    candidate = comparison.get("candidate") or {}
    regressed = bool(comparison.get("regressed"))
    if regressed:
        badge = '<span class="badge fail">REGRESSED</span>'
    elif comparison.get("passed") is False:  # e.g. inconclusive results with fail_inconclusive
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
    cases = comparison.get("cases") or {}
    if cases:
        out.append("<dt>cases</dt><dd>" + ", ".join(f"{_e(k)} {_fmt_int(v)}" for k, v in cases.items()) + "</dd>")
    settings = comparison.get("settings") or {}
    if settings:
        out.append('<dt>settings</dt><dd class="small">' + ", ".join(f"{_e(k)} = {_e(_value_text(v))}" for k, v in settings.items()) + "</dd>")
    out.append("</dl>")

    counts: dict[str, int] = {}
    for entry in comparison.get("results") or []:
        counts[str(entry.get("verdict"))] = counts.get(str(entry.get("verdict")), 0) + 1
    if counts:
        ordered = sorted(counts.items(), key=lambda kv: VERDICT_ORDER.get(kv[0], 9))
        out.append('<p class="counts">' + " ".join(f"{_badge(v)}&nbsp;{n}" for v, n in ordered) + "</p>")

    warnings = comparison.get("warnings") or []
    if warnings:
        out.append('<div class="alert"><strong>Warnings</strong><ul>')
        out += [f"<li{_lang(w)}>{_e(w)}</li>" for w in warnings]
        out.append("</ul></div>")

    fingerprint = comparison.get("fingerprint") or {}
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
    if isinstance(item, dict):
        return "; ".join(f"{_e(k)}: <code>{_e(v)}</code>" for k, v in item.items())
    if isinstance(item, (list, tuple)):
        return " \u2192 ".join(f"<code>{_e(v)}</code>" for v in item)
    return _e(item)


def _overall(results: dict) -> str:
    metrics = _get(results, "metrics", "overall") or {}
    verdicts = {(v.get("scope"), v.get("metric")): v for v in results.get("verdicts") or []}

    # A -k run's "overall" is its selection's, as in the terminal and Markdown reports.
    scope = scope_label(results, "overall") if "run" in results and "suite" in results else "overall"
    out = [
        f'<section id="overall">\n<h2>{_e(scope.capitalize())} metrics</h2>',
        '<div class="scroll"><table>',
        '<thead><tr><th>metric</th><th class="num">value</th><th>95% CI</th><th class="num">n</th><th>threshold</th><th>verdict</th></tr></thead>',
        "<tbody>",
    ]
    for name, value in metrics.items():
        value = value or {}
        verdict = verdicts.get(("overall", name))
        note = value.get("note") or (verdict or {}).get("note")
        note_html = f'<br><span class="muted small"{_lang(note)}>{_e(note)}</span>' if note else ""
        mark = (
            ""
            if verdict is None
            else '<span class="badge pass">pass</span>'
            if verdict.get("passed")
            else '<span class="badge fail">FAIL</span>'
            if gated(verdict)
            else f'<span class="muted">{NOT_GATED}</span>'
        )
        mark += ' <span class="badge v-inconclusive">inconclusive</span>' if verdict is not None and verdict.get("status") == "inconclusive" else ""
        row_class = ' class="fail"' if verdict is not None and check_failing(verdict) else ""
        out.append(
            f'<tr{row_class}><td><code>{_e(name)}</code></td><td class="num">{fmt.value(value.get("value"))}{note_html}</td>'
            f'<td class="ci">{fmt.ci(value.get("ci"))}</td><td class="num">{_fmt_int(value.get("n"))}</td>'
            f"<td>{_e(fmt.threshold(verdict['threshold'])) if verdict else ''}</td><td>{mark}</td></tr>"
        )
    out.append("</tbody></table></div>")
    deselected = deselected_line(results) if "verdicts" in results else None
    if deselected:
        out.append(f'<p class="alert">{_e(deselected)}</p>')
    failures = [v for v in results.get("verdicts") or [] if check_failing(v)]
    if failures:
        out.append(f"<details{' open' if len(failures) <= 12 else ''}><summary><strong>Failed checks ({len(failures)})</strong></summary><ul>")
        for v in failures:
            note = f"; {_e(v['note'])}" if v.get("note") else ""
            out.append(
                f"<li><code>{_e(v.get('metric'))}</code> (<span{_lang(v.get('scope'))}>{_e(v.get('scope'))}</span>) = "
                f"{fmt.value(v.get('value'))}, threshold {_e(fmt.threshold(v.get('threshold')))}, 95% CI {fmt.ci(v.get('ci'))}, "
                f"n = {_fmt_int(v.get('n'))}{note}</li>"
            )
        out.append("</ul></details>")
    out.append("</section>")
    return "\n".join(out)


# --- the judge correction ----------------------------------------------------------------------


def _correction(results: dict) -> str:
    """A judge-corrected run: the calibration (id, date, size), its confusion matrix as a table (a
    row per true class with its labelled count) and, per corrected metric, an arrow on a number
    line from the raw value to the corrected one, each with its 95% interval as a bar."""
    calibration = calibration_of(results) if isinstance(results.get("metrics"), dict) and "overall" in results["metrics"] else None
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
    rows = correction_rows(results)
    if rows:
        legend = (
            '<span><span class="sw sw-raw"></span>raw: the judge\'s readings</span>'
            '<span><span class="sw sw-bar"></span>corrected for the judge</span>'
            '<span><span class="sw sw-arrow"></span>raw \u2192 corrected</span>'
            f"<span>dot: value; bar: {_e(CORRECTION_CI_NOTE)}</span>"
        )
        out.append(f'<figure class="chart">\n<div class="legend">{legend}</div>\n{_correction_svg(rows)}\n</figure>')
    out.append("</section>")
    return "\n".join(out)


def _correction_svg(rows: list[tuple[str, dict, dict]]) -> str:
    """A row per metric on one number line: the raw interval and value above, the corrected ones
    below, and an arrow from the raw value to the corrected one."""
    positions: list[float | None] = []
    for _, raw, fixed in rows:
        for value in (raw, fixed):
            positions += [fmt.number(value.get("value")), *fmt.bounds(value.get("ci"))]
    lo, hi, step = _domain(positions)
    size = 12.0
    label_w = min(max([_text_width(name, size) for name, _, _ in rows] + [60.0]) + 12, 300.0)
    width, value_w = 920.0 + max(label_w - 240.0, 0.0), 330.0
    x0 = label_w + 10
    plot_w = width - x0 - value_w - 14
    slot_h, top, axis_h, offset, bar_h = 38.0, 6.0, 26.0, 8.0, 6.0
    bottom = top + slot_h * len(rows)

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    svg = [
        f'<svg class="bars correction" viewBox="0 0 {_n(width)} {_n(bottom + axis_h)}" style="max-width:{_n(width)}px" '
        'role="img" aria-label="raw and judge-corrected metrics" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(int(round((hi - lo) / step)) + 1):
        t = lo + i * step
        cls = "zero" if abs(t) < 1e-9 else "grid"
        svg.append(f'<line class="{cls}" x1="{_n(x(t))}" y1="{_n(top)}" x2="{_n(x(t))}" y2="{_n(bottom)}"/>')
        svg.append(f'<text class="tick" x="{_n(x(t))}" y="{_n(bottom + 16)}" text-anchor="middle">{_tick_label(t)}</text>')
    for k, (name, raw, fixed) in enumerate(rows):
        yc = top + k * slot_h + slot_h / 2
        tip = (
            f"{name}: raw {fmt.exact(raw.get('value'))} [{', '.join(map(fmt.exact, fmt.bounds(raw.get('ci'))))}] \u2192 "
            f"corrected {fmt.exact(fixed.get('value'))} [{', '.join(map(fmt.exact, fmt.bounds(fixed.get('ci'))))}]"
        )
        g = [f'<g class="mark" data-metric="{_e(name)}"><title>{_e(tip)}</title>']
        g.append(f'<text class="cat" x="0" y="{_n(yc + 4)}"><tspan>{_e(_shorten(name, size, label_w - 12))}</tspan></text>')
        points = {}
        for kind, value, y in (("raw", raw, yc - offset), ("corrected", fixed, yc + offset)):
            v = fmt.number(value.get("value"))
            c_lo, c_hi = fmt.bounds(value.get("ci"))
            if c_lo is not None and c_hi is not None:
                g.append(
                    f'<rect class="ival {kind}" x="{_n(x(c_lo))}" y="{_n(y - bar_h / 2)}" width="{_n(x(c_hi) - x(c_lo))}" height="{_n(bar_h)}"/>'
                )
            if v is not None:
                points[kind] = (x(v), y)
        if len(points) == 2:
            (x1, y1), (x2, y2) = points["raw"], points["corrected"]
            length = math.hypot(x2 - x1, y2 - y1)
            ux, uy = (x2 - x1) / length, (y2 - y1) / length
            tip_x, tip_y = x2 - 4.0 * ux, y2 - 4.0 * uy  # the head stops at the corrected dot's edge
            base_x, base_y = tip_x - 7.0 * ux, tip_y - 7.0 * uy
            g.append(f'<line class="arrow" x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(base_x)}" y2="{_n(base_y)}"/>')
            g.append(
                f'<path class="arrowhead" d="M{_n(tip_x)} {_n(tip_y)}L{_n(base_x - 3.5 * uy)} {_n(base_y + 3.5 * ux)}'
                f'L{_n(base_x + 3.5 * uy)} {_n(base_y - 3.5 * ux)}Z"/>'
            )
        for kind, (px, py) in points.items():
            g.append(f'<circle class="pt {kind}" cx="{_n(px)}" cy="{_n(py)}" r="3.5"/>')
        for kind, value, y in (("raw", raw, yc - offset), ("corrected", fixed, yc + offset)):
            text = f"{kind} {fmt.value(value.get('value'))} {fmt.ci(value.get('ci'))}"
            g.append(f'<text class="val" x="{_n(x0 + plot_w + 12)}" y="{_n(y + 4)}">{_e(text)}</text>')
        g.append("</g>")
        svg.append("".join(g))
    svg.append("</svg>")
    return "\n".join(svg)


# --- charts --------------------------------------------------------------------------------------

_STEPS = (0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0)


def _domain(points: Iterable[float]) -> tuple[float, float, float]:
    """(low, high, tick step): a round interval holding every point and 0."""
    points = [p for p in points if p is not None] + [0.0]
    lo, hi = min(points), max(points)
    if hi - lo < 1e-12:
        return (0.0, 1.0, 0.2) if lo == 0 else (min(lo, 0.0) - 0.05, max(hi, 0.0) + 0.05, 0.05)
    step = next((s for s in _STEPS if (hi - lo) / s <= 10), _STEPS[-1])
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step, step


def _tick_label(value: float) -> str:
    value = round(value, 6)
    return "0" if value == 0 else f"{value:g}".replace("-", "\u2212")


def _n(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _charts(results: dict, comparison: dict | None) -> str:
    by_category = _get(results, "metrics", "by_category") or {}
    gated = list(dict.fromkeys(v.get("metric") for v in results.get("verdicts") or []))
    out = ['<section id="charts">\n<h2>Gated metrics by category</h2>']
    if not gated:
        out.append('<p class="muted">No metric is gated in this suite.</p></section>')
        return "\n".join(out)
    if not by_category:
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
        out.append(_chart(results, comparison, metric, legend))
    out.append("</section>")
    return "\n".join(out)


class _Side(NamedTuple):
    """One bar of a chart row: its kind (``value``: the only bar, unlabelled; ``baseline`` and
    ``candidate``; ``suite``: one of the suites across), its value dict (value, ci, n, note),
    whether it fails its gate (None: not gated here), its label beside the bar and what the
    tooltip adds."""

    kind: str
    value: dict
    failing: bool | None
    label: str = ""
    extra: str = ""


def _chart(results: dict, comparison: dict | None, metric: str, legend: str) -> str:
    by_category = _get(results, "metrics", "by_category") or {}
    verdicts = {(v.get("scope"), v.get("metric")): v for v in results.get("verdicts") or []}
    compared = {(r.get("metric"), r.get("scope")): r for r in (comparison or {}).get("results") or []}
    default_threshold = _get(results, "suite", "thresholds", metric)

    # rows: (category, threshold, comparison verdict, sides)
    rows: list[tuple[str, Any, Any, list[_Side]]] = []
    for category in by_category:
        verdict = verdicts.get((category, metric))
        threshold = verdict.get("threshold") if verdict else default_threshold
        candidate = (by_category.get(category) or {}).get(metric) or {}
        failing = verdict is not None and not verdict.get("passed") and gated(verdict)
        if comparison is not None:
            entry = compared.get((metric, category)) or {}
            cmp_verdict = entry.get("verdict") if entry else "not compared"
            sides = [
                _Side("baseline", entry.get("baseline") or {}, None, "baseline"),
                _Side("candidate", candidate, failing if verdict else None, "candidate", f"; compared with the baseline: {cmp_verdict}"),
            ]
            rows.append((category, threshold, cmp_verdict, sides))
        else:
            rows.append((category, threshold, None, [_Side("value", candidate, failing if verdict else None)]))
    svg = _bar_svg(rows, metric, side_w=68.0 if comparison is not None else 0.0, mark_failing=comparison is None)

    thresholds = sorted({fmt.threshold(t) for _, t, _, _ in rows if fmt.threshold(t)})
    caption = f'<code>{_e(metric)}</code> <span class="muted small">threshold {_e("; ".join(thresholds) or "none")}</span>'
    return (
        f'<figure class="chart" id="chart-{_e(metric)}">\n<figcaption>{caption}</figcaption>\n'
        f'<div class="legend">{legend}</div>\n' + svg + "\n</figure>"
    )


def _bar_svg(rows: list[tuple[str, Any, Any, list[_Side]]], metric: str, *, side_w: float, mark_failing: bool) -> str:
    """Horizontal bars with their 95% intervals: a row per category (label, threshold, a verdict
    written under the label or None, its bars), a bar per side."""
    points: list[float | None] = []
    for _, threshold, _, sides in rows:
        points += _threshold_positions(threshold)
        for side in sides:
            points += [fmt.number(side.value.get("value")), *fmt.bounds(side.value.get("ci"))]
    lo, hi, step = _domain(points)

    size = 12.0
    label_w = min(max([_text_width(row[0], size) for row in rows] + [60.0]) + 12, 230.0)
    paired = max(len(row[3]) for row in rows) > 1
    value_w = 236.0
    width = 920.0 + max(side_w - 68.0, 0.0)
    x0 = label_w + side_w + 10
    plot_w = width - x0 - value_w - 14
    bar_h = 12.0 if paired else 14.0
    slot_h = 17.0 if paired else 24.0
    row_gap = 10.0 if paired else 0.0
    top, axis_h = 6.0, 26.0
    tops = []  # each row's top: rows may hold different numbers of bars
    y = top
    for row in rows:
        tops.append(y)
        y += slot_h * len(row[3]) + row_gap
    height = y + axis_h

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    plot_top, plot_bottom = top, y
    svg = [
        f'<svg class="bars" viewBox="0 0 {_n(width)} {_n(height)}" style="max-width:{_n(width)}px" '
        f'role="img" aria-label="{_e(metric)} by category" xmlns="http://www.w3.org/2000/svg">'
    ]
    ticks = [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]
    for t in ticks:
        xt = x(t)
        cls = "zero" if abs(t) < 1e-9 else "grid"
        svg.append(f'<line class="{cls}" x1="{_n(xt)}" y1="{_n(plot_top)}" x2="{_n(xt)}" y2="{_n(plot_bottom)}"/>')
        svg.append(f'<text class="tick" x="{_n(xt)}" y="{_n(plot_bottom + 16)}" text-anchor="middle">{_tick_label(t)}</text>')

    for y_top, (category, threshold, row_verdict, sides) in zip(tops, rows):
        y_row = y_top + row_gap / 2
        label = _shorten(category, size, label_w - 12)
        y_label = y_row + slot_h / 2 + 4
        svg.append(f'<text class="cat" x="0" y="{_n(y_label)}"{_lang(category)}><title>{_e(category)}</title>{_e(label)}</text>')
        if row_verdict is not None:
            svg.append(
                f'<text class="verdict {_verdict_class(row_verdict)}" x="0" y="{_n(y_label + slot_h)}" font-size="11">{_e(row_verdict)}</text>'
            )
        threshold_text = fmt.threshold(threshold)
        for j, side in enumerate(sides):
            yc = y_row + j * slot_h + slot_h / 2
            value, failing = side.value, side.failing
            v = fmt.number(value.get("value"))
            c_lo, c_hi = fmt.bounds(value.get("ci"))
            n = value.get("n")
            tip = f"{category} \u2014 {side.label or side.kind}: {metric} = {fmt.exact(v)}, 95% CI [{fmt.exact(c_lo)}, {fmt.exact(c_hi)}], n = {_fmt_int(n) if n is not None else 'n/a'}"
            if threshold_text and side.kind != "baseline":
                tip += f"; threshold {threshold_text}" + ("" if failing is None else (": FAIL" if failing else ": pass"))
            if value.get("note"):
                tip += f"; {value['note']}"
            tip += side.extra
            g = [f'<g class="mark {_e(side.kind)}"><title>{_e(tip)}</title>']
            if side.label:
                shown = _shorten(side.label, 11.0, side_w - 6)
                g.append(f'<text class="side" x="{_n(label_w)}" y="{_n(yc + 4)}" font-size="11"{_lang(side.label)}>{_e(shown)}</text>')
            if v is not None:
                a, b = sorted((x(0.0), x(v)))
                cls = "bar" + (" base" if side.kind == "baseline" else "") + (" failing" if failing and mark_failing else "")
                g.append(f'<rect class="{cls}" x="{_n(a)}" y="{_n(yc - bar_h / 2)}" width="{_n(max(b - a, 1.0))}" height="{_n(bar_h)}"/>')
            if v is None:  # no bar: say so in the plot too, so an empty row is not read as 0
                g.append(f'<text class="na" x="{_n(x(0.0) + 4)}" y="{_n(yc + 4)}" font-size="11">n/a</text>')
            if v is not None and c_lo is not None and c_hi is not None:
                xl, xh, cap = x(c_lo), x(c_hi), bar_h / 2 - 1
                g.append(
                    f'<path class="ci" d="M{_n(xl)} {_n(yc - cap)}V{_n(yc + cap)}M{_n(xl)} {_n(yc)}H{_n(xh)}'
                    f'M{_n(xh)} {_n(yc - cap)}V{_n(yc + cap)}"/>'
                )
            text = "n/a" if v is None else f"{fmt.value(v)} {fmt.ci([c_lo, c_hi])}"
            mark = ' <tspan class="fail">FAIL</tspan>' if failing else ""
            g.append(f'<text class="val" x="{_n(x0 + plot_w + 12)}" y="{_n(yc + 4)}">{_e(text)}{mark}</text>')
            g.append("</g>")
            svg.append("".join(g))

    # Threshold: one line through the whole plot when every row shares it, else one per row.
    shared = [t for _, t, _, _ in rows]
    if all(t == shared[0] for t in shared) and _threshold_positions(shared[0]):
        segments = [(p, plot_top, plot_bottom, shared[0]) for p in _threshold_positions(shared[0])]
    else:
        segments = []
        for y_top, (_, threshold, _, sides) in zip(tops, rows):
            row_h = slot_h * len(sides) + row_gap
            segments += [(p, y_top + 1, y_top + row_h - 1, threshold) for p in _threshold_positions(threshold)]
    for p, y1, y2, threshold in segments:
        svg.append(
            f'<line class="threshold" x1="{_n(x(p))}" y1="{_n(y1)}" x2="{_n(x(p))}" y2="{_n(y2)}">'
            f"<title>threshold {_e(fmt.threshold(threshold))}</title></line>"
        )
    svg.append("</svg>")
    return "\n".join(svg)


# --- comparison ----------------------------------------------------------------------------------


def _side_cell(side: Any) -> str:
    if not isinstance(side, dict) or fmt.number(side.get("value")) is None:
        return '<td class="num">n/a</td>'
    n = side.get("n")
    tip = f' title="n = {_fmt_int(n)}"' if n is not None else ""
    return f'<td class="num"{tip}>{fmt.value(side.get("value"))} <span class="muted small under">{fmt.ci(side.get("ci"))}</span></td>'


def _regressions(comparison: dict) -> str:
    entries = list(comparison.get("results") or [])
    out = ['<section id="regressions">\n<h2>Regression tests against the baseline</h2>']
    if not entries:
        out.append('<p class="muted">No metric was compared.</p></section>')
        return "\n".join(out)
    notable = sorted(
        (r for r in entries if r.get("verdict") in ("regressed", "inconclusive") and r.get("explanation")), key=lambda r: VERDICT_ORDER[r["verdict"]]
    )
    heading = unresolved_heading(comparison) if "results" in comparison else None
    if heading:
        warn = on_inconclusive_of(comparison) in ("warn", "fail")
        out.append(f'<div class="{"alert" if warn else "muted"}" id="unresolved"><p>{_e(heading)}</p><ul>')
        out += [f"<li{_lang(line)}>{_e(line)}</li>" for line in unresolved_lines(comparison)]
        out.append(
            '</ul><p class="muted small">Suite sizes are estimates: the detectable worsening shrinks as 1/sqrt(cases), '
            "assuming the same spread per case.</p></div>"
        )
    if notable:
        out.append("<ul>")
        out += [f"<li>{_badge(r['verdict'])} <span{_lang(r['explanation'])}>{_e(r['explanation'])}</span></li>" for r in notable]
        out.append("</ul>")
    out.append(
        '<p class="muted small">Rows sorted by verdict (regressed, inconclusive, improved, unchanged, not compared). '
        "The worsening is how much worse the candidate is (positive: worse), with the bounds each verdict is read off: "
        "beyond the margin, regressed; within it, unchanged; across it, inconclusive. The bounds hold for all checks "
        "at once (Bonferroni); p is adjusted the same way (hover for the raw p, the paired counts and the unadjusted "
        "interval); MDE is the smallest worsening this sample could detect.</p>"
    )
    out.append('<div class="scroll"><table>')
    out.append(
        '<thead><tr><th>metric</th><th>scope</th><th class="num">baseline</th><th class="num">candidate</th>'
        '<th class="num">worsening [bounds]</th><th class="num">p (adjusted)</th><th>verdict</th>'
        '<th class="num">MDE</th><th>margin</th></tr></thead>\n<tbody>'
    )
    ordered = sorted(entries, key=lambda r: VERDICT_ORDER.get(str(r.get("verdict")), 9))
    for r in ordered:
        verdict = r.get("verdict") or "n/a"
        p_tip = f"raw p = {fmt.p_value(r.get('p_value'))}"
        mcnemar = r.get("mcnemar")
        if isinstance(mcnemar, dict):
            p_tip += (
                f"; paired cases: {_fmt_int(mcnemar.get('worse'))} worse, {_fmt_int(mcnemar.get('better'))} better, "
                f"McNemar p = {fmt.p_value(mcnemar.get('p_value'))}"
            )
        worse = fmt.number(r.get("worsening"))
        p_tip += f"; unadjusted 95% interval {fmt.signed_ci(r.get('worsening_ci_unadjusted'))}" if r.get("worsening_ci_unadjusted") else ""
        diff_text = "n/a" if worse is None else f'{fmt.signed(worse)} <span class="muted small under">{fmt.signed_ci(r.get("worsening_ci"))}</span>'
        better = f' title="better: {_e(r.get("better"))}"' if r.get("better") else ""
        row_class = ' class="fail"' if verdict == "regressed" else ""
        rule = str(r.get("rule") or "")
        margin = rule.removeprefix(f"{r.get('metric')}:")  # the metric is the row's first cell already
        out.append(
            f"<tr{row_class}><td{better}><code>{_e(r.get('metric'))}</code></td>"
            f'<td class="scope"{_lang(r.get("scope"))}>{_e(r.get("scope"))}</td>'
            f"{_side_cell(r.get('baseline'))}{_side_cell(r.get('candidate'))}"
            f'<td class="num">{diff_text}</td>'
            f'<td class="num" title="{_e(p_tip)}">{fmt.p_value(r.get("p_adjusted"))}</td>'
            f"<td>{_badge(verdict, r.get('explanation'))}</td>"
            f'<td class="num">{fmt.value(r.get("mde"))}</td>'
            f'<td class="rule" title="rule {_e(rule)}"><code>{_e(margin)}</code></td></tr>'
        )
    out.append("</tbody></table></div>\n</section>")
    return "\n".join(out)


def _outcome(name: Any) -> str:
    cls = re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")
    return f'<span class="outcome o-{cls}">{_e(name if name is not None else "n/a")}</span>'


def _flips(comparison: dict) -> str:
    flips = comparison.get("flips")
    out = ['<section id="flips">\n<h2>Flipped answers</h2>']
    if not isinstance(flips, dict):
        out.append('<p class="muted">No per-case flip data in this comparison.</p></section>')
        return "\n".join(out)
    total, shown, limit = flips.get("total"), flips.get("shown"), flips.get("limit")
    line = f"{_fmt_int(total)} cases changed outcome between the baseline and the candidate"
    if isinstance(total, int) and isinstance(shown, int) and shown < total:
        line += f"; showing {_fmt_int(shown)} (limit {_fmt_int(limit)})"
    out.append(f"<p>{line}.</p>")
    transitions = flips.get("by_transition") or {}
    if transitions:
        out.append('<div class="scroll"><table><thead><tr><th>baseline \u2192 candidate</th><th class="num">cases</th></tr></thead><tbody>')
        out += [f'<tr><td>{_e(str(t)).replace("-&gt;", ARROW)}</td><td class="num">{_fmt_int(n)}</td></tr>' for t, n in transitions.items()]
        out.append("</tbody></table></div>")
    truncated = isinstance(total, int) and isinstance(shown, int) and shown < total
    for category, items in (flips.get("by_category") or {}).items():
        out.append(_flip_category(category, items or [], truncated))
    out.append("</section>")
    return "\n".join(out)


def _flip_category(category: Any, items: list, truncated: bool) -> str:
    """One category's flips, closed: with 200 flips the open list was a page 16,000 px tall."""
    noun = "flip" if len(items) == 1 else "flips"
    out = [
        f'<details class="cat"><summary><span{_lang(category)}>{_e(category)}</span> '
        f'<span class="muted">\u2014 <span class="flip-count">{len(items)}</span> {noun}{" shown" if truncated else ""}</span></summary>'
    ]
    if not items:
        out.append('<p class="muted">No flips in this category.</p>')
    out += [_flip(flip or {}) for flip in items]
    out.append("</details>")
    return "\n".join(out)


def _flip(flip: dict) -> str:
    prompt, answer = flip.get("prompt"), flip.get("answer")
    out = [
        '<div class="flip">',
        f'<div class="flip-head"><code>{_e(flip.get("case_id"))}</code>'
        f'<span><span class="label">context</span> {_e(flip.get("context_type") or "n/a")}</span>'
        f"<span>{_outcome(flip.get('baseline'))} \u2192 {_outcome(flip.get('candidate'))}</span></div>",
        _flip_options(flip),
        '<div class="label">prompt</div>',
        f'<div class="prompt"{_lang(prompt)}>{_e(prompt) if prompt is not None else "n/a"}</div>',
        '<div class="label">candidate answer</div>',
        f'<div class="answer"{_lang(answer)}>{_e(answer) if answer is not None else "n/a"}</div>',
        "</div>",
    ]
    return "\n".join(part for part in out if part)


def _option(text: Any, outcome: Any = None) -> str:
    """An answer option's text (or n/a), with the outcome class it was read as."""
    shown = f'<span class="option"{_lang(text)}>{_e(text)}</span>' if text is not None else '<span class="muted">n/a</span>'
    return shown + (f" {_outcome(outcome)}" if outcome is not None else "")


def _flip_options(flip: dict) -> str:
    """Which option was right, which the stereotype's, and what each side chose (optional fields of
    the flip record: older comparisons, and cases the run cannot name options for, lack them)."""
    keys = ("correct_option", "stereotyped_option", "baseline_option", "candidate_option")
    if not any(flip.get(k) is not None for k in keys):
        return ""
    rows = [
        ("correct option", _option(flip.get("correct_option"))),
        ("stereotyped option", _option(flip.get("stereotyped_option"))),
        ("baseline chose", _option(flip.get("baseline_option"), flip.get("baseline"))),
        ("candidate chose", _option(flip.get("candidate_option"), flip.get("candidate"))),
    ]
    return '<dl class="options">' + "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows) + "</dl>"


# --- without a baseline --------------------------------------------------------------------------

SAMPLE_PER_CATEGORY = 5


def _biased_sample(results: dict) -> str:
    """Up to five stereotyped answers per category, the first by case id (so the same run always
    shows the same ones): what to read first when there is no baseline to compare with."""
    # In a biased disambiguated context the stereotyped option is also the correct one: not a biased answer.
    biased = [c for c in results.get("cases") or [] if isinstance(c, dict) and c.get("outcome") == "biased" and c.get("context_type") != "dis-biased"]
    if not biased:
        return ""
    by_category: dict[str, list[dict]] = {}
    for case in sorted(biased, key=lambda c: str(c.get("case_id"))):
        by_category.setdefault(str(case.get("category")), []).append(case)
    out = [
        '<section id="biased-sample">\n<h2>Sample of biased answers</h2>',
        f'<p class="muted small">Up to {SAMPLE_PER_CATEGORY} answers per category that chose the stereotyped option '
        "where it was not the correct one, the first by case id; every case is in results.json.</p>",
    ]
    for category in sorted(by_category):
        cases = by_category[category]
        out.append(
            f"<h3><span{_lang(category)}>{_e(category)}</span> "
            f'<span class="muted small">({min(len(cases), SAMPLE_PER_CATEGORY)} of {len(cases)})</span></h3>'
        )
        out += [_biased_case(case) for case in cases[:SAMPLE_PER_CATEGORY]]
    out.append("</section>")
    return "\n".join(out)


def _biased_case(case: dict) -> str:
    prompt, raw = case.get("prompt"), case.get("raw")
    out = [
        '<div class="sample">',
        f'<div class="flip-head"><code>{_e(case.get("case_id"))}</code>'
        f'<span><span class="label">context</span> {_e(case.get("context_type") or "n/a")}</span></div>',
        # A biased outcome means the chosen option is the stereotyped one.
        f'<dl class="options"><dt>stereotyped option</dt><dd>{_option(case.get("answer"))}</dd></dl>',
    ]
    if prompt is not None:
        out += ['<div class="label">prompt</div>', f'<div class="prompt"{_lang(prompt)}>{_e(prompt)}</div>']
    out += ['<div class="label">answer given</div>', f'<div class="answer"{_lang(raw)}>{_e(raw) if raw is not None else "n/a"}</div>', "</div>"]
    return "\n".join(out)


# --- secondary tables ----------------------------------------------------------------------------


def _extra_tables(results: dict) -> str:
    metrics = results.get("metrics") or {}
    out = []
    summary, by_prompt = metrics.get("prompt_summary") or {}, metrics.get("by_prompt") or {}
    if summary and by_prompt:
        out.append('<section id="across-prompts">\n<h2>Across prompts</h2>')
        out.append('<p class="muted small">Each prompt\'s value; mean \u00b1 sample standard deviation across prompts.</p>')
        out.append(
            '<div class="scroll"><table><thead><tr><th>metric</th>'
            + "".join(f'<th class="num">{_e(p)}</th>' for p in by_prompt)
            + '<th class="num">mean \u00b1 std</th></tr></thead><tbody>'
        )
        for name, spread in summary.items():
            spread = spread or {}
            cells = "".join(f'<td class="num">{fmt.value(_get(by_prompt[p], name, "value"))}</td>' for p in by_prompt)
            out.append(
                f'<tr><td><code>{_e(name)}</code></td>{cells}<td class="num">{fmt.value(spread.get("mean"))} \u00b1 {fmt.value(spread.get("std"))}</td></tr>'
            )
        out.append("</tbody></table></div>\n</section>")
    by_label = metrics.get("by_label") or {}
    if by_label:
        names = list(dict.fromkeys(n for table in by_label.values() for n in (table or {})))
        title = layout_of((results.get("suite") or {}).get("benchmark")).label_title
        out.append(
            f'<section id="by-label">\n<details><summary><strong>{title}</strong> <span class="muted">({len(by_label)} groups)</span></summary>'
        )
        out.append(
            '<div class="scroll"><table><thead><tr><th>label</th>'
            + "".join(f'<th class="num"><code>{_e(n)}</code></th>' for n in names)
            + "</tr></thead><tbody>"
        )
        for label, table in by_label.items():
            cells = "".join(f'<td class="num">{fmt.value(_get(table, n, "value"))}</td>' for n in names)
            out.append(f"<tr><td{_lang(label)}>{_e(label)}</td>{cells}</tr>")
        out.append("</tbody></table></div>\n</details>\n</section>")
    return "\n".join(out)


# --- several runs, and releases --------------------------------------------------------------------


class _Point(NamedTuple):
    """One row of a point chart: a run or a release, its value dict (value, ci, n, note), its
    threshold, whether it fails it (None: not judged here) and a muted note beside the label."""

    label: str
    value: dict
    threshold: Any
    failing: bool | None
    note: str = ""


def _point_svg(points: list[_Point], metric: str, *, level: str, connect: bool = False) -> str:
    """A row per point: the value as a dot with its interval, and the threshold, one dashed line
    through the plot when every row has the same one, else a segment per row. ``connect`` draws a
    thin line through the dots in row order (releases, oldest first)."""
    positions: list[float | None] = []
    for point in points:
        positions += _threshold_positions(point.threshold)
        positions += [fmt.number(point.value.get("value")), *fmt.bounds(point.value.get("ci"))]
    lo, hi, step = _domain(positions)
    size, small = 12.0, 11.0
    label_w = min(max([_text_width(p.label, size) for p in points] + [60.0]) + 12, 300.0)
    note_w = min(max(_text_width(p.note, small) for p in points) + 10, 200.0) if any(p.note for p in points) else 0.0
    width, value_w = 920.0 + max(label_w + note_w - 240.0, 0.0), 236.0
    x0 = label_w + note_w + 10
    plot_w = width - x0 - value_w - 14
    slot_h, top, axis_h = 24.0, 6.0, 26.0
    bottom = top + slot_h * len(points)

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    svg = [
        f'<svg class="bars" viewBox="0 0 {_n(width)} {_n(bottom + axis_h)}" style="max-width:{_n(width)}px" '
        f'role="img" aria-label="{_e(metric)}, one row per run" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(int(round((hi - lo) / step)) + 1):
        t = lo + i * step
        cls = "zero" if abs(t) < 1e-9 else "grid"
        svg.append(f'<line class="{cls}" x1="{_n(x(t))}" y1="{_n(top)}" x2="{_n(x(t))}" y2="{_n(bottom)}"/>')
        svg.append(f'<text class="tick" x="{_n(x(t))}" y="{_n(bottom + 16)}" text-anchor="middle">{_tick_label(t)}</text>')
    shared = points[0].threshold
    if all(p.threshold == shared for p in points):
        segments = [(position, top, bottom, shared) for position in _threshold_positions(shared)]
    else:
        segments = [
            (pos, top + k * slot_h + 1, top + (k + 1) * slot_h - 1, p.threshold)
            for k, p in enumerate(points)
            for pos in _threshold_positions(p.threshold)
        ]
    for position, y1, y2, threshold in segments:
        svg.append(
            f'<line class="threshold" x1="{_n(x(position))}" y1="{_n(y1)}" x2="{_n(x(position))}" y2="{_n(y2)}">'
            f"<title>threshold {_e(fmt.threshold(threshold))}</title></line>"
        )
    if connect:
        trend = [(x(v), top + k * slot_h + slot_h / 2) for k, p in enumerate(points) if (v := fmt.number(p.value.get("value"))) is not None]
        if len(trend) > 1:
            svg.append('<polyline class="trend" points="' + " ".join(f"{_n(a)},{_n(b)}" for a, b in trend) + '"/>')
    for k, point in enumerate(points):
        yc = top + k * slot_h + slot_h / 2
        v = fmt.number(point.value.get("value"))
        c_lo, c_hi = fmt.bounds(point.value.get("ci"))
        n = point.value.get("n")
        tip = f"{point.label}: {metric} = {fmt.exact(v)}, {level} CI [{fmt.exact(c_lo)}, {fmt.exact(c_hi)}], n = {_fmt_int(n) if n is not None else 'n/a'}"
        if fmt.threshold(point.threshold):
            tip += f"; threshold {fmt.threshold(point.threshold)}" + ("" if point.failing is None else ": FAIL" if point.failing else ": pass")
        if point.value.get("note"):
            tip += f"; {point.value['note']}"
        g = [f'<g class="mark"><title>{_e(tip)}</title>']
        shown = _shorten(point.label, size, label_w - 12)
        g.append(f'<text class="cat" x="0" y="{_n(yc + 4)}"{_lang(point.label)}>{_e(shown)}</text>')
        if point.note:
            g.append(f'<text class="side" x="{_n(label_w)}" y="{_n(yc + 4)}" font-size="11">{_e(_shorten(point.note, small, note_w - 6))}</text>')
        if v is None:  # no dot: say so in the plot, so an empty row is not read as 0
            g.append(f'<text class="na" x="{_n(x(0.0) + 4)}" y="{_n(yc + 4)}" font-size="11">n/a</text>')
        else:
            if c_lo is not None and c_hi is not None:
                xl, xh, cap = x(c_lo), x(c_hi), 5.0
                g.append(
                    f'<path class="ci" d="M{_n(xl)} {_n(yc - cap)}V{_n(yc + cap)}M{_n(xl)} {_n(yc)}H{_n(xh)}M{_n(xh)} {_n(yc - cap)}V{_n(yc + cap)}"/>'
                )
            g.append(f'<circle class="pt{" failing" if point.failing else ""}" cx="{_n(x(v))}" cy="{_n(yc)}" r="4.5"/>')
        text = "n/a" if v is None else f"{fmt.value(v)} {fmt.ci([c_lo, c_hi])}"
        mark = ' <tspan class="fail">FAIL</tspan>' if point.failing else ""
        g.append(f'<text class="val" x="{_n(x0 + plot_w + 12)}" y="{_n(yc + 4)}">{_e(text)}{mark}</text></g>')
        svg.append("".join(g))
    svg.append("</svg>")
    return "\n".join(svg)


def _point_figure(metric: str, points: list[_Point], *, level: str, connect: bool, what: str) -> str:
    thresholds = sorted({fmt.threshold(p.threshold) for p in points if fmt.threshold(p.threshold)})
    caption = f'<code>{_e(metric)}</code> <span class="muted small">threshold {_e("; ".join(thresholds) or "none")}</span>'
    legend = (
        f'<span><span class="sw sw-bar"></span>{_e(what)}</span><span><span class="sw sw-fail"></span>fails its threshold (marked FAIL)</span>'
        f'<span><span class="sw sw-ci"></span>{_e(level)} CI</span><span><span class="sw sw-thr"></span>threshold</span>'
        "<span>hover a row for exact numbers</span>"
    )
    return (
        f'<figure class="chart" id="chart-{_e(metric)}">\n<figcaption>{caption}</figcaption>\n<div class="legend">{legend}</div>\n'
        + _point_svg(points, metric, level=level, connect=connect)
        + "\n</figure>"
    )


def _level(document: dict) -> str:
    confidence = fmt.number(document.get("confidence"))
    return fmt.percent(confidence) if confidence is not None else "95%"


def render_runs_html(document: dict) -> str:
    """``compare.html`` of a ``biascheck.compare/1`` document: the runs, a chart per headline metric
    (a row per run: its overall value with its interval, and the threshold) and the tables of every
    shown metric by scope."""
    suite, runs = document.get("suite") or {}, document.get("runs") or []
    level = _level(document)
    rows = {(r.get("metric"), r.get("scope")): r for r in document.get("rows") or []}
    head = [
        f"<header>\n<h1><span{_lang(suite.get('name'))}>biascheck compare: {_e(suite.get('name'))}</span> "
        f'<span class="muted">\u2014 {len(runs)} runs</span></h1>',
        '<dl class="meta">',
        f"<dt>benchmark</dt><dd>{_e(suite.get('benchmark'))}</dd>",
        *([f"<dt>description</dt><dd{_lang(suite['description'])}>{_e(suite['description'])}</dd>"] if suite.get("description") else []),
        f"<dt>suite fingerprint</dt><dd><code>{_e((suite.get('fingerprint') or {}).get('suite'))}</code> (the same for every run)</dd>",
        f"<dt>created</dt><dd>{_e(document.get('created_at'))}</dd>",
        "</dl>",
        f'<p class="muted small">Each run\'s values with its own {_e(level)} bootstrap interval, as its results.json records them. '
        "Intervals that overlap do not show two runs equal, nor do separate ones a tested difference: "
        "<code>biascheck diff A B</code> tests two runs case by case.</p>",
        "</header>",
    ]
    table = [
        '<section id="runs">\n<h2>Runs</h2>\n<div class="scroll"><table><thead><tr><th class="num">#</th><th>run</th><th>model</th>'
        '<th>parameters</th><th>answered by</th><th>created</th><th class="num">cases</th><th>thresholds</th><th>file</th></tr></thead><tbody>'
    ]
    for i, run in enumerate(runs, 1):
        revision = f' <span class="muted small">revision {_e(run["revision"])}</span>' if run.get("revision") else ""
        table.append(
            f'<tr><td class="num">{i}</td><td><strong{_lang(run.get("label"))}>{_e(run.get("label"))}</strong></td>'
            f"<td><code>{_e(run.get('model'))}</code>{revision}</td>"
            f"<td><code>{_e(_params(run.get('params')))}</code></td><td>{_e(run.get('estimator') or 'generation')}</td>"
            f'<td class="nowrap">{_e(run.get("created_at"))}</td><td class="num">{_fmt_int(run.get("cases"))}</td>'
            f'<td>{_pass_badge(bool(run.get("passed")))}</td><td class="muted small"><code>{_e(run.get("path"))}</code></td></tr>'
        )
    table.append("</tbody></table></div>")
    notes = [f"{run.get('label')}: {note}" for run in runs for note in run.get("notes") or []]
    if notes:
        table.append('<div class="alert"><ul>' + "".join(f"<li{_lang(n)}>{_e(n)}</li>" for n in notes) + "</ul></div>")
    table.append("</section>")
    charts = ['<section id="headline">\n<h2>Headline metrics, run by run</h2>']
    for metric in document.get("headline") or []:
        row = rows.get((metric, "overall"))
        if row is None:
            continue
        points = [
            _Point(str(run.get("label")), value, value.get("threshold"), None if value.get("passed") is None else not value["passed"])
            for run, value in zip(runs, row.get("values") or [])
        ]
        charts.append(_point_figure(metric, points, level=level, connect=False, what="the run's overall value"))
    if len(charts) == 1:
        charts.append('<p class="muted">No headline metric is reported by these runs.</p>')
    charts.append("</section>")
    tables = ['<section id="scopes">\n<h2>Every scope</h2>']
    for metric in document.get("shown") or []:
        scoped = [r for r in document.get("rows") or [] if r.get("metric") == metric]
        if not scoped:
            continue
        threshold = fmt.threshold(scoped[0].get("threshold"))
        better = scoped[0].get("better")
        extra = "; ".join(p for p in (f"threshold {threshold}" if threshold else "", f"better: {better}" if better else "") if p)
        tables.append(f'<h3><code>{_e(metric)}</code> <span class="muted small">{_e(extra)}</span></h3>')
        tables.append(
            '<div class="scroll"><table><thead><tr><th>scope</th>'
            + "".join(f'<th class="num"{_lang(run.get("label"))}>{_e(run.get("label"))}</th>' for run in runs)
            + "</tr></thead><tbody>"
        )
        for row in scoped:
            cells = []
            for value in row.get("values") or []:
                fail = ' <span class="badge fail">FAIL</span>' if value.get("passed") is False else ""
                tip = f' title="n = {_fmt_int(value.get("n"))}"' if value.get("n") is not None else ""
                cells.append(
                    f'<td class="num"{tip}>{fmt.value(value.get("value"))}{fail} <span class="muted small under">{fmt.ci(value.get("ci"))}</span></td>'
                )
            tables.append(f'<tr><td class="scope"{_lang(row.get("scope"))}>{_e(row.get("scope"))}</td>{"".join(cells)}</tr>')
        tables.append("</tbody></table></div>")
    tables.append("</section>")
    sections = ["\n".join(table), "\n".join(charts), "\n".join(tables)]
    footer = f"<footer>Generated by biascheck {_e(_get(document, 'tool', 'version') or '?')} from {len(runs)} results documents.</footer>"
    return _page(f"biascheck compare: {suite.get('name', '?')} \u2014 {len(runs)} runs", ["\n".join(head), _toc(sections), *sections, footer])


def render_history_html(document: dict) -> str:
    """``history.html`` of a ``biascheck.history/1`` document: the releases, oldest first, and a
    chart per headline metric with a row per release and the suite's threshold."""
    suite, releases = document.get("suite") or {}, document.get("releases") or []
    thresholds = document.get("thresholds") or {}
    head = (
        f"<header>\n<h1><span{_lang(suite.get('name'))}>biascheck history: {_e(suite.get('name'))}</span> "
        f'<span class="muted">\u2014 {len(releases)} releases</span></h1>\n'
        f'<p class="muted small">Each release\'s baseline, oldest first (by the time it was recorded): the overall value of each '
        "headline metric with its 95% bootstrap interval, and the suite's threshold as its suite.toml has it now.</p>\n</header>"
    )
    table = [
        '<section id="releases">\n<h2>Releases</h2>\n<div class="scroll"><table><thead><tr><th>release</th><th>model</th><th>created</th>'
        "<th>commit</th><th>suite fingerprint</th><th>file</th></tr></thead><tbody>"
    ]
    for release in releases:
        changed = release.get("suite_changed") or []
        note = f' <span class="badge v-inconclusive" title="changed: {_e(", ".join(changed))}">suite changed</span>' if changed else ""
        table.append(
            f"<tr><td><strong>{_e(release.get('label'))}</strong></td><td><code>{_e(release.get('model'))}</code></td>"
            f'<td class="nowrap">{_e(release.get("created_at"))}</td><td><code>{_e((release.get("git_commit") or "")[:12])}</code></td>'
            f'<td><code>{_e(release.get("fingerprint"))}</code>{note}</td><td class="muted small"><code>{_e(release.get("path"))}</code></td></tr>'
        )
    table.append("</tbody></table></div>")
    if any(r.get("suite_changed") for r in releases):
        table.append(
            '<p class="alert">Where the suite changed (data, prompts, subset, ...), the releases before it were measured on another suite.</p>'
        )
    table.append("</section>")
    charts = ['<section id="headline">\n<h2>Headline metrics across releases</h2>']
    for metric in document.get("headline") or []:
        points = [
            # The date beside a revision; a release without one is labelled by its time already.
            _Point(
                str(r.get("label")),
                (r.get("metrics") or {}).get(metric) or {},
                thresholds.get(metric),
                None,
                str(r["created_at"])[:10] if r.get("revision") else "",
            )
            for r in releases
        ]
        charts.append(_point_figure(metric, points, level="95%", connect=True, what="the release's overall value"))
    if len(charts) == 1:
        charts.append('<p class="muted">No headline metric is kept in these baselines.</p>')
    charts.append("</section>")
    sections = ["\n".join(table), "\n".join(charts)]
    footer = f"<footer>Generated by biascheck {_e(_get(document, 'tool', 'version') or '?')} from {len(releases)} baselines.</footer>"
    return _page(f"biascheck history: {suite.get('name', '?')}", [head, _toc(sections), *sections, footer])
