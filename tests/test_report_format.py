"""One set of formatters: one results document and one comparison rendered in the terminal,
Markdown and HTML read the same for a p-value, a threshold and a missing (NaN) value."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.core import format as fmt
from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord
from biascheck.reporting.comparison import render_comparison_markdown
from biascheck.reporting.html import render_html
from biascheck.reporting.results import render_markdown
from biascheck.reporting.terminal import render_comparison_terminal, render_terminal

# --- one set of formatters ------------------------------------------------------------------

NAN = float("nan")


def metric(value, lo, hi, n):
    return {"value": value, "ci": [lo, hi], "n": n}


def document() -> dict:
    overall = {
        "diff_bias_amb": metric(0.1234, 0.1, 0.15, 400),
        "acc_dis": metric(0.9, 0.85, 0.95, 1234),
        "ooc_ratio": {"value": None, "ci": [None, None], "n": 0, "note": "no responses"},
    }
    return {
        "schema": "biascheck.results/1",
        "tool": {"name": "biascheck", "version": "0.1.0"},
        "created_at": "2026-11-21T10:00:00+00:00",
        "suite": {
            "name": "kobbq",
            "benchmark": "kobbq",
            "description": "",
            "manifest": "suites/kobbq/suite.toml",
            "fingerprint": {"suite": "f00dfeed"},
            "prompts": ["1"],
            "skipped_categories": {},
            "cases_total": 400,
            "thresholds": {"diff_bias_amb": {"max_abs": 0.05}, "acc_dis": {"min": 0.8}},
            "regression": {"rules": [], "alpha": 0.05},
        },
        "model": {"model": "sim/stereotyped", "api_base": None, "params": {}},
        "run": {"cases": 400, "calls": 400, "cache_hits": 0, "retries": 0, "errors": 0, "cost_usd": 0.0, "unpriced_calls": 0, "complete": True},
        "metrics": {"metrics": list(overall), "overall": overall, "by_category": {}, "by_label": {}, "by_prompt": {}, "prompt_summary": {}},
        "verdicts": [
            {**metric(0.1234, 0.1, 0.15, 400), "metric": "diff_bias_amb", "scope": "overall", "threshold": {"max_abs": 0.05}, "passed": False},
            {**metric(0.9, 0.85, 0.95, 1234), "metric": "acc_dis", "scope": "overall", "threshold": {"min": 0.8}, "passed": True},
        ],
        "passed": False,
        "cases": [],
    }


def check(name, p_adjusted, baseline, candidate, verdict):
    return {
        "metric": name,
        "scope": "overall",
        "better": "zero",
        "rule": f"{name}:+0.01",
        "rule_source": "manifest",
        "margin": 0.01,
        "baseline": baseline,
        "candidate": candidate,
        "difference": None if baseline["value"] is None or candidate["value"] is None else candidate["value"] - baseline["value"],
        "difference_ci_unadjusted": [0.01, 0.05],
        "worsening": 0.02,
        "worsening_ci": [0.01, 0.05],
        "worsening_ci_unadjusted": [0.012, 0.048],
        "interval": None,
        "p_value": p_adjusted,
        "p_adjusted": p_adjusted,
        "mcnemar": None,
        "mde": 0.012,
        "cases_to_resolve": None,
        "verdict": verdict,
        "explanation": f"{name} {verdict}",
    }


def comparison() -> dict:
    return {
        "schema": "biascheck.comparison/2",
        "suite": {"name": "kobbq", "benchmark": "kobbq"},
        "baseline": {"path": "b.json", "model": "sim/fair", "params": {}, "created_at": "2026-11-20", "git_commit": None, "tool_version": "0.1.0"},
        "candidate": {"model": "sim/stereotyped", "params": {}},
        "fingerprint": {"equal": True, "differences": [], "allowed": False},
        "warnings": [],
        "cases": {"baseline": 400, "candidate": 400, "common": 400},
        "settings": {"alpha": 0.05, "power": 0.8, "n_boot": 2000, "seed": 0, "family_size": 3, "fail_inconclusive": False},
        "results": [
            check("diff_bias_amb", 5e-8, metric(0.1, 0.09, 0.11, 400), metric(0.1234, 0.1, 0.15, 400), "regressed"),
            check("acc_dis", 0.01234, metric(0.9, 0.85, 0.95, 400), metric(0.9, 0.85, 0.95, 400), "within margin"),
            check("ooc_ratio", NAN, metric(NAN, NAN, None, 0), {"value": NAN, "ci": [NAN, NAN], "n": 0}, "inconclusive"),
        ],
        "regressed": True,
        "candidate_errors": 0,
        "passed": False,
        "flips": {"total": 0, "by_transition": {}, "by_category": {}, "examples": [], "limit": 200, "shown": 0, "file": None},
    }


@pytest.fixture(scope="module")
def renderings() -> dict[str, str]:
    """The same run as terminal text, Markdown (report.md + comparison.md) and HTML, each as its reader sees it."""
    from markdown_it import MarkdownIt

    results, compared = document(), comparison()
    run, record = RunRecord.from_json(results), Comparison.from_json(compared)
    markdown = render_markdown(run) + render_comparison_markdown(record)
    as_text = re.compile(r"<[^>]+>")
    return {
        "terminal": render_terminal([run], color=False, width=250) + render_comparison_terminal([record], color=False, width=250),
        "markdown": html.unescape(as_text.sub(" ", MarkdownIt("commonmark").enable("table").render(markdown))),
        "html": html.unescape(as_text.sub(" ", render_html(RunRecord.from_json(results), Comparison.from_json(compared)))),
    }


@pytest.mark.parametrize("kind", ["terminal", "markdown", "html"])
def test_p_values_read_the_same_everywhere(renderings, kind):
    assert fmt.p_value(5e-8) == "5e-08" and fmt.p_value(0.01234) == "0.012"
    text = renderings[kind]
    assert "5e-08" in text and "0.012" in text
    assert "5.00e-08" not in text and "0.0123 " not in text.replace("0.0123 ±", "")


@pytest.mark.parametrize("kind", ["terminal", "markdown", "html"])
def test_thresholds_read_the_same_everywhere(renderings, kind):
    assert fmt.threshold({"max_abs": 0.05}) == "|x| <= 0.05" and fmt.threshold({"min": 0.8}) == "x >= 0.8"
    text = renderings[kind]
    assert "|x| <= 0.05" in text and "x >= 0.8" in text
    assert "≤" not in text and "≥" not in text


@pytest.mark.parametrize("kind", ["terminal", "markdown", "html"])
def test_missing_and_nan_values_read_n_a_everywhere(renderings, kind):
    text = renderings[kind]
    assert "n/a" in text
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)


@pytest.mark.parametrize("kind", ["terminal", "markdown", "html"])
def test_counts_read_the_same_everywhere(renderings, kind):
    assert "1,234" in renderings[kind] and not re.search(r"(?<![\d.,])1234", renderings[kind])


@pytest.mark.parametrize("allowed", [False, True])
@pytest.mark.parametrize("kind", ["terminal", "markdown", "html"])
def test_missing_data_reads_the_same_everywhere(kind, allowed):
    from markdown_it import MarkdownIt

    from biascheck.reporting.results import summary_rows

    results = document()
    results["suite"].update(
        skipped_categories={"SES": "bbq/SES.jsonl was not found: offline", "Race_x_SES": "bbq/Race_x_SES.jsonl was not found: offline"},
        missing_data_allowed=allowed,
        categories_total=11,
        benchmark="bbq",
    )
    results["verdicts"] = [v for v in results["verdicts"] if v["passed"]]
    results["passed"] = allowed
    text = {
        "terminal": lambda: render_terminal([RunRecord.from_json(results)], color=False, width=400),
        "markdown": lambda: html.unescape(re.sub(r"<[^>]+>", " ", MarkdownIt("commonmark").render(render_markdown(RunRecord.from_json(results))))),
        "html": lambda: html.unescape(re.sub(r"<[^>]+>", " ", render_html(RunRecord.from_json(results)))),
    }[kind]()
    text = re.sub(r" :", ":", " ".join(text.split()))  # a tag between a category and its colon
    assert "2 of 11 categories have no data (Race_x_SES, SES)" in text
    assert "SES: bbq/SES.jsonl was not found: offline" in text and "Race_x_SES: bbq/Race_x_SES.jsonl was not found: offline" in text
    if allowed:
        assert "left out of this run, as --biascheck-allow-missing-data accepted" in text and "MISSING DATA" not in text
    else:
        assert "MISSING DATA: 2 of 11 categories have no data (Race_x_SES, SES), so this is no complete bbq run: a failed check" in text
        assert "or pass --biascheck-allow-missing-data to run without it" in text
    # The summary across suites (terminal, job summary, index.html) calls a run without them incomplete.
    assert summary_rows([RunRecord.from_json(results)])[0][-1] == ("passed" if allowed else "INCOMPLETE")


def test_formatters():
    assert [fmt.value(x) for x in (0.12, None, NAN, float("inf"), True, "x")] == ["0.1200"] + ["n/a"] * 5
    assert fmt.ci([0.1, 0.14]) == "[0.1000, 0.1400]" and fmt.ci([0.1, NAN]) == "n/a" and fmt.ci(None) == "n/a"
    assert fmt.signed(0.02) == "+0.0200" and fmt.signed_ci([-0.01, 0.05]) == "[-0.0100, +0.0500]" and fmt.signed(NAN) == "n/a"
    assert fmt.p_value(0.5) == "0.500" and fmt.p_value(NAN) == "n/a" and fmt.p_value(None) == "n/a"
    assert fmt.count(1234) == "1,234" and fmt.count(None) == "n/a" and fmt.usd(0.0123) == "$0.0123" and fmt.percent(0.8) == "80%"
    assert fmt.md_text("|x| <= 0.05") == "\\|x\\| <= 0.05"


def test_flips_read_as_counts_then_examples_by_category_with_links_from_the_regressed_checks():
    """comparison.md and the terminal: a table of changed cases per category and direction, then
    the examples grouped by category; a regressed check points to its category's flips."""
    compared = comparison()
    compared["results"].append(check("diff_bias_amb", 1e-6, metric(0.1, 0.09, 0.11, 100), metric(0.5, 0.4, 0.6, 100), "regressed"))
    compared["results"][-1]["scope"] = "ses"
    flip = {"case_id": "ses-1", "category": "ses", "context_type": "amb", "baseline": "unknown", "candidate": "biased", "prompt": "1"}
    compared["flips"] = {
        "total": 5,
        "by_transition": {"unknown -> biased": 4, "counter -> biased": 1},
        "by_category": {"age": {"unknown -> biased": 1}, "ses": {"unknown -> biased": 3, "counter -> biased": 1}},
        "examples": [{**flip, "answer": "B", "baseline_answer": "C", "options": ["x", "y", "모름"], "prompt_text": "질문: ?"}],
        "limit": 1,
        "shown": 1,
        "file": "flips.jsonl",
    }
    markdown = render_comparison_markdown(Comparison.from_json(compared))
    assert "| category | changed | unknown -> biased | counter -> biased |" in markdown
    assert "| age | 1 | 1 | 0 |" in markdown and "| ses (**regressed**) | 4 | 3 | 1 |" in markdown and "| _all_ | 5 | 4 | 1 |" in markdown
    assert "1 of 5 shown (limit 1)" in markdown and "every flip is in flips.jsonl" in markdown
    # The overall regression points to all flips, the category's to its own examples, which are there.
    assert "**REGRESSED** ([flips](#flips))" in markdown and "**REGRESSED** ([flips](#flips-ses))" in markdown
    assert '<a id="flips"></a>' in markdown and '<a id="flips-ses"></a>' in markdown and "ses: 1 shown of 4" in markdown
    assert "baseline's answer: C" in markdown and "options: x / y / 모름" in markdown and "질문: ?" in markdown
    terminal = render_comparison_terminal([Comparison.from_json(compared)], color=False, width=250)
    rows = [re.sub(r"\s+", " ", line.strip("│ ")) for line in terminal.splitlines() if line.startswith("│")]
    assert "age │ 1 │ 1 │ 0" in rows and "ses (regressed) │ 4 │ 3 │ 1" in rows and "all │ 5 │ 4 │ 1" in rows
    assert "ses: ses-1 unknown -> biased" in terminal
    assert "diff_bias_amb regressed; changed cases in ses: unknown -> biased 3, counter -> biased 1" in terminal


# The terminal's tables: print_table skips rich's measuring when a bound on the table's width fits.
_CELL = st.lists(
    st.one_of(
        st.sampled_from(["[red]", "[/]", "[bold red]FAIL[/]", "\\[x]", "\\\\[red]", "[", "]", "\t", "\n", "연령", "0.0000", " "]),
        st.sampled_from(["가나다라마바사아자차", "disability_status", "x" * 20]),  # wide characters; long cells
        st.text(max_size=6),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=examples(150), deadline=None)
@given(
    rows=st.lists(st.lists(_CELL, min_size=3, max_size=3), min_size=1, max_size=4),
    width=st.integers(60, 120),
    escaped=st.booleans(),
    min_width=st.sampled_from([None, 30, 50]),
)
def test_a_table_prints_as_rich_measures_it_whatever_its_cells_say(rows, width, escaped, min_width):
    import io

    from rich.errors import MarkupError
    from rich.markup import escape
    from rich.table import Table

    from biascheck.reporting import terminal

    def printed(shortcut: bool) -> str:
        table = Table(title="t", title_justify="left")
        for header in ("category", "value", "verdict"):
            table.add_column(header, min_width=min_width)
        for row in rows:
            table.add_row(*(escape(cell) if escaped else cell for cell in row))
        buffer = io.StringIO()
        console = terminal._console(buffer, color=True, width=width)
        if not shortcut:  # the measured path alone
            original, terminal._width_at_most = terminal._width_at_most, lambda table: 10**9
        try:
            terminal.print_table(console, table)
        finally:
            if not shortcut:
                terminal._width_at_most = original
        return buffer.getvalue()

    try:
        measured = printed(shortcut=False)
    except MarkupError:  # unescaped text that is no markup: rich refuses it either way
        return
    assert printed(shortcut=True) == measured
