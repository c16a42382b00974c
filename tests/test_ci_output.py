"""Output that CI logs and GitHub can read (issue 12, part 4): Markdown tables that survive a GFM
renderer, progress lines in a log that is not a terminal, summary tables that never cut a number
or a name, help that says what each setting is, and a partial run labelled as the selection it is."""

from __future__ import annotations

import copy
import io
import re
import threading
import time
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.core import format as fmt
from biascheck.execution.progress import RichProgress
from biascheck.execution.stats import RunStats
from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord
from biascheck.reporting.comparison import render_comparison_markdown
from biascheck.reporting.results import render_markdown
from biascheck.reporting.terminal import render_comparison_terminal, render_terminal

from conftest import ROOT, SUITES, write_subset_suite

# --- results documents from real (simulated) runs ------------------------------------------------


TINY = 'templates_per_category = 1\nseed = 7\nchoice_orders = "original"'


def _documents(tmp_path_factory, data_dir, subset: str) -> dict[str, dict]:
    from biascheck.execution.llm import ModelConfig
    from biascheck.reporting.results import build_results
    from biascheck.session import RunConfig, run
    from biascheck.suite import load_suite

    folder = tmp_path_factory.mktemp("ci-output")
    suite_dir = write_subset_suite(folder / "kobbq-tiny", subset=subset, prompts='from_data = "prompts"\nuse = ["1"]')
    suite = load_suite(suite_dir, data_dir=data_dir)

    def results(model: str, cases) -> dict:
        config = RunConfig(model=ModelConfig(model), store_path=folder / "store.sqlite", data_dir=data_dir)
        (record,), _ = build_results(run([(suite, cases)], config))
        return record.to_json()

    return {
        "stereotyped": results("sim/stereotyped", suite.cases),
        "age": results("sim/stereotyped", [c for c in suite.cases if c.category == "age"]),
        "fair": results("sim/fair", suite.cases),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir) -> dict[str, dict]:
    """Results documents of the tiny KoBBQ suite (96 cases): ``stereotyped`` on the whole suite and
    on its age cases alone (a ``-k age`` run), ``fair`` on the whole suite."""
    return _documents(tmp_path_factory, data_dir, TINY)


@pytest.fixture(scope="module")
def two_category_runs(tmp_path_factory, data_dir) -> dict[str, dict]:
    """``runs`` on two of the categories, three templates each (48 cases; the stereotyped run still
    regresses against the fair one): for the properties that render every report again for each
    example, where the injected text, not the number of rows, is what is tested."""
    return _documents(tmp_path_factory, data_dir, TINY.replace("= 1", "= 3") + '\ncategories = ["age", "religion"]')


def record(document: dict) -> RunRecord:
    """The record the views take, of a results document (the tests edit documents)."""
    return RunRecord.from_json(document)


def comparison_record(document: dict) -> Comparison:
    """The record the views take, of a comparison document."""
    return Comparison.from_json(document)


def comparison_of(baseline_results: dict, candidate: dict) -> dict:
    from biascheck.evaluation import baseline as baselines
    from biascheck.evaluation.regression import compare, settings_from
    from biascheck.records.run import RunRecord

    run = RunRecord.from_json(candidate)
    comparison = compare(
        baselines.from_results(RunRecord.from_json(baseline_results)), run, settings_from(run, []), baseline_path="baselines/kobbq/x.json"
    )
    return comparison.to_json()


# --- 1. Markdown tables under a GFM renderer -------------------------------------------------------


class _Tables(HTMLParser):
    """The tables of an HTML page as lists of rows of cell texts (header row first)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def gfm_tables(markdown: str) -> list[list[dict[str, str]]]:
    """Each table as GitHub shows it: its rows as {header cell: cell text}."""
    from markdown_it import MarkdownIt

    parser = _Tables()
    parser.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    return [[dict(zip(header, row)) for row in rows] for header, *rows in parser.tables]


def table_with(markdown: str, column: str) -> list[dict[str, str]]:
    """The first table that has ``column``."""
    return next(rows for rows in gfm_tables(markdown) if rows and column in rows[0])


def test_report_md_threshold_and_verdict_cells_survive_a_gfm_renderer(runs):
    document = runs["stereotyped"]
    rows = {row["metric"]: row for row in table_with(render_markdown(record(document)), "threshold")}
    assert rows["diff_bias_amb"]["threshold"] == "|x| <= 0.05"
    assert rows["diff_bias_amb"]["verdict"] == "FAIL"
    assert rows["acc_dis"]["threshold"] == "x >= 0.8"
    for verdict in document["verdicts"]:
        if verdict["scope"] == "overall":
            assert rows[verdict["metric"]]["verdict"] == ("pass" if verdict["passed"] else "FAIL")


def test_cells_keep_pipes_backslashes_and_line_breaks_of_names(runs):
    document = copy.deepcopy(runs["stereotyped"])
    hostile = "a|b\\|c\\\nd"  # a pipe, a backslash before a pipe, a backslash before a line break
    by_category = document["metrics"]["by_category"]
    by_category[hostile] = by_category.pop("age")
    for verdict in document["verdicts"]:
        if verdict["scope"] == "age":
            verdict["scope"] = hostile
    document["metrics"]["by_prompt"] = {"p|1": document["metrics"]["by_prompt"]["1"]}
    markdown = render_markdown(record(document))
    categories = {row["category"]: row for row in table_with(markdown, "category")}
    assert "a|b\\|c\\ d" in categories  # the line break is a space: a cell is one line
    assert categories["a|b\\|c\\ d"]["diff_bias_amb"].endswith("FAIL")
    assert table_with(markdown, "p|1")[0]["metric"] == "acc_amb"


def test_comparison_md_cells_survive_a_gfm_renderer(runs):
    comparison = comparison_of(runs["fair"], runs["stereotyped"])
    result = next(r for r in comparison["results"] if r["scope"] == "age" and r["metric"] == "diff_bias_amb")
    result["scope"] = "age|young"
    rows = table_with(render_comparison_markdown(comparison_record(comparison)), "rule")
    assert len(rows) == len(comparison["results"])
    row = next(row for row in rows if row["scope"] == "age|young")
    assert (row["metric"], row["rule"], row["verdict"].lower()) == ("diff_bias_amb", result["rule"], result["verdict"])


def summary_section(output: str) -> str:
    """The biascheck summary of a pytest run's output, without GitHub annotation lines."""
    section = output.split("biascheck summary", 1)[1].split("short test summary", 1)[0]
    # Nor the line naming the report folder and its files: a path, which no width can wrap.
    return "\n".join(line for line in section.splitlines() if not line.startswith(("::", "biascheck: wrote ")))


def test_the_step_summary_and_the_terminal_summary_of_a_partial_run(run_biascheck, tiny_kobbq, tmp_path, monkeypatch):
    # A -k run in GitHub Actions (items 1, 3 and 6 end to end): its step summary survives a GFM
    # renderer and calls its "overall" the selection; its log is not a terminal, so the summary is
    # wide (160 columns) unless COLUMNS says otherwise.
    summary = tmp_path / "step-summary.md"
    summary.touch()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("COLUMNS", raising=False)
    run = run_biascheck(tiny_kobbq, "sim/stereotyped", "-k", "age")
    assert run.ret == 1, run.output
    results = run.results()
    assert (results["run"]["cases"], results["suite"]["cases_total"]) == (8, 96)
    assert {v["scope"] for v in results["verdicts"]} == {"overall", "age"}  # results.json keeps its scope key
    text = summary.read_text("utf-8")
    assert "## Selection (8 of 96 cases)" in text and "## Overall" not in text
    rows = {row["metric"]: row for row in table_with(text, "threshold")}
    # -k age leaves the overall metric items out: their rows do not say FAIL (the age items gate this run).
    assert (rows["diff_bias_amb"]["threshold"], rows["diff_bias_amb"]["verdict"]) == ("|x| <= 0.05", "not gated (deselected)")
    assert "FAIL" in {row["category"]: row for row in table_with(text, "category")}["age"]["diff_bias_amb"]
    assert "not gated: -k or node ids deselected their metric items" in text
    terminal = summary_section(run.output)
    assert "kobbq: selection (8 of 96 cases)" in terminal and "kobbq: overall" not in terminal
    # 160 columns: the run line is one line, and no line is wider.
    assert any("on sim/stereotyped: 8 cases" in line and "suite fingerprint" in line for line in terminal.splitlines())
    assert max(map(len, terminal.splitlines())) <= 160

    monkeypatch.setenv("COLUMNS", "100")
    narrow = run_biascheck(tiny_kobbq, "sim/stereotyped", "-k", "age", report="narrow")
    terminal = summary_section(narrow.output)
    assert max(map(len, terminal.splitlines())) <= 100
    assert not any("on sim/stereotyped: 8 cases" in line and "suite fingerprint" in line for line in terminal.splitlines())


def test_a_run_that_exits_0_shows_no_fail_for_the_metric_items_it_deselected(run_biascheck, tiny_kobbq, monkeypatch):
    # Only the age ooc_ratio item gates this run: the failing diff-bias checks of the selection are
    # shown, but as not gated, with the one line that says how to gate them (160 columns: unwrapped).
    monkeypatch.delenv("COLUMNS", raising=False)
    run = run_biascheck(tiny_kobbq, "sim/stereotyped", "-k", "metrics and age and ooc_ratio")
    assert run.ret == 0, run.output
    terminal = summary_section(run.output)
    assert "FAIL" not in terminal and "not gated (deselected)" in terminal, terminal
    assert "run without -k, or select the metrics:: items" in terminal
    results = run.results()
    assert results["passed"] is True
    verdicts = {(v["scope"], v["metric"]): v for v in results["verdicts"]}
    assert not verdicts[("age", "diff_bias_amb")]["passed"] and verdicts[("age", "diff_bias_amb")]["gated"] is False
    assert "gated" not in verdicts[("age", "ooc_ratio")]
    markdown = (run.report_dir / "report.md").read_text("utf-8")
    assert "not gated (deselected)" in markdown and "FAIL" not in markdown
    page = (run.report_dir / "report.html").read_text("utf-8")
    assert "not gated (deselected)" in page and 'badge fail">FAIL' not in page and "bar failing" not in page


# --- 2. Progress in a log that is not a terminal ------------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_outside_a_terminal_prints_start_periodic_and_end_lines():
    stream, clock = io.StringIO(), FakeClock()
    # A huge interval: the lines between start and end come from tick(), what the timer calls.
    progress = RichProgress("biascheck sim/x", stream=stream, interval=3600, clock=clock)
    stats = RunStats(requests=100, cache_hits=10)
    progress.start(100, stats)
    clock.now += 30
    stats.calls, stats.retries, stats.errors, stats.cost_usd = 50, 5, 2, 0.0123
    progress.update(55, stats)  # 45 answered in 30 s: 1.5 per second, 45 to go
    progress.tick()
    clock.now += 30
    stats.calls = 95
    progress.update(100, stats)
    progress.stop(stats)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "biascheck sim/x: 10 of 100 requests answered, 0 calls, 0 errors, 0 retries, 10 cache hits, $0.0000, 0.0 calls/s, ETA unknown",
        "biascheck sim/x: 55 of 100 requests answered, 50 calls, 2 errors, 5 retries, 10 cache hits, $0.0123, 1.7 calls/s, ETA 0:00:30",
        "biascheck sim/x: 100 requests, 10 cache hits, 95 calls, 5 retries, 2 errors, $0.0123 in 0:01:00, 1.6 calls/s",
    ]


def test_a_batch_runs_progress_lines_carry_its_batches_and_expected_finish():
    stream, clock = io.StringIO(), FakeClock()
    progress = RichProgress("biascheck openai/m", stream=stream, interval=3600, clock=clock)
    stats = RunStats(requests=100)
    progress.start(100, stats)
    note = "batches: 2 submitted, 1 in progress, 1 completed, 0 failed or expired; 60 of 100 requests done; expected finish 12:00:00 UTC (in 0:01:00)"
    progress.note(note)
    progress.tick()
    stats.calls = 100
    progress.stop(stats)
    lines = stream.getvalue().splitlines()
    assert lines[1].endswith("ETA unknown; " + note) and lines[-1].endswith("; " + note)
    assert not lines[0].endswith(note)  # said once it is known, not before


def test_progress_outside_a_terminal_ticks_at_its_interval_while_calls_run():
    stream = io.StringIO()
    progress = RichProgress("biascheck sim/x", stream=stream, interval=0.01)
    stats = RunStats(requests=10)
    progress.start(10, stats)
    # Waits for the timer's lines, however slowly a loaded machine schedules it.
    deadline = time.monotonic() + 60
    while stream.getvalue().count("\n") < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    progress.update(10, stats)
    progress.stop(stats)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 4
    assert all(re.fullmatch(r"biascheck sim/x: 0 of 10 requests answered, 0 calls, .*, ETA unknown", line) for line in lines[:3])
    assert lines[-1].startswith("biascheck sim/x: 10 requests, 0 cache hits, 0 calls")
    assert not any(t.name.startswith("biascheck progress") for t in threading.enumerate())  # stop() ends the timer


def test_progress_bar_on_a_terminal_shows_rate_and_eta(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the whole bar on one line

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream, clock = Terminal(), FakeClock()
    progress = RichProgress("biascheck sim/x", stream=stream, clock=clock)
    stats = RunStats(requests=100)
    progress.start(100, stats)
    clock.now += 10
    stats.calls = 40
    progress.update(40, stats)
    progress.stop(stats)
    assert "4.0 calls/s" in stream.getvalue() and "ETA 0:00:15" in stream.getvalue()


# --- 3. Summary tables at 80 columns, not a terminal ---------------------------------------------


def test_terminal_tables_never_cut_a_number_or_a_name(runs):
    document = copy.deepcopy(runs["stereotyped"])
    long_name = "race_ethnicity_nationality_and_immigration_status"
    by_category = document["metrics"]["by_category"]
    by_category[long_name] = by_category.pop("race_ethnicity_nationality")
    output = render_terminal([record(document)], color=False, width=80)
    assert "…" not in output
    words = set(output.replace("│", " ").split())
    for name in by_category:
        assert name in words
    gated = {v["metric"] for v in document["verdicts"]}
    shown = [*document["metrics"]["overall"].values(), *(table[m] for table in by_category.values() for m in gated)]
    for value in shown:
        assert fmt.value(value["value"]) in words and fmt.count(value["n"]) in words
        assert all(part in words for part in fmt.ci(value["ci"]).split())
    comparison = render_comparison_terminal([comparison_record(comparison_of(runs["fair"], runs["stereotyped"]))], color=False, width=60)
    assert "…" not in comparison


# --- 4. --help ------------------------------------------------------------------------------------


def test_help_says_what_each_setting_is(pytester):
    from biascheck.options import REPEATED
    from biascheck.pytest_plugin.hooks import FLAGS, INI_NUMBERS, OPTIONS

    result = pytester.runpytest("--help")
    text = " ".join(result.stdout.str().split())
    max_cost = text.split("--biascheck-max-cost=", 1)[1].split("--biascheck-", 1)[0]
    assert "before" in max_cost and "after" not in max_cost
    types = dict(re.findall(r"\b(biascheck_\w+) \((\w+)\):", text))
    assert types == {
        **{ini: INI_NUMBERS.get(ini, "string") for _, ini, _, _ in OPTIONS},
        **{ini: "bool" for _, ini, _ in FLAGS if ini},
        **{ini: "linelist" for _, ini, *_ in REPEATED if ini},
        "biascheck_compare_fail": "linelist",
    }
    assert {ini: types[ini] for ini in ("biascheck_concurrency", "biascheck_retries", "biascheck_max_cost", "biascheck_timeout")} == {
        "biascheck_concurrency": "int",
        "biascheck_retries": "int",
        "biascheck_max_cost": "float",
        "biascheck_timeout": "float",
    }


# --- 5. The README's demo sentence ----------------------------------------------------------------


def test_the_readme_names_every_gate_the_demo_fails(data_dir):
    """The demo (`sim/stereotyped` on suites/kobbq) fails exactly the gates whose expected value,
    from the persona's answer distribution over every case, is beyond the manifest's threshold."""
    from biascheck.sim.personas import expected_answer_distribution, parse_persona
    from biascheck.suite import load_suite

    suite = load_suite(SUITES / "kobbq", data_dir=data_dir)
    persona = parse_persona("stereotyped")
    counts: dict[str, dict[str, float]] = {}
    for case in suite.cases:
        truth = case.truth
        for scope in ("overall", case.category):
            c = counts.setdefault(scope, {})
            for index, p in expected_answer_distribution(persona, case).items():
                kind = f"{truth.context_type}:{truth.answer_class(index)}"
                c[kind] = c.get(kind, 0.0) + p
            c[truth.context_type] = c.get(truth.context_type, 0.0) + 1
    failing: dict[str, set[str]] = {}
    for scope, c in counts.items():
        expected = {
            "diff_bias_amb": (c.get("amb:biased", 0) - c.get("amb:counter", 0)) / c["amb"],
            "diff_bias_dis": c.get("dis-biased:biased", 0) / c["dis-biased"] - c.get("dis-counter:counter", 0) / c["dis-counter"],
            "acc_dis": (c.get("dis-biased:biased", 0) + c.get("dis-counter:counter", 0)) / (c["dis-biased"] + c["dis-counter"]),
            "ooc_ratio": 0.0,
        }
        for metric, threshold in suite.manifest.thresholds.items():
            if not threshold.passes(expected[metric]):
                failing.setdefault(metric, set()).add(scope)
    readme = " ".join((ROOT / "README.md").read_text("utf-8").split())
    demo = readme.split("The last command is the offline demo", 1)[1].split(". The benchmark files", 1)[0]
    assert failing, "the demo is meant to fail"
    for metric in suite.manifest.thresholds:
        assert (f"`{metric}`" in demo) == (metric in failing), (metric, demo)
    if all(scopes == set(counts) for scopes in failing.values()):
        assert "overall and in every category" in demo, demo


# --- 6. A partial run is labelled as the selection ----------------------------------------------


def test_a_partial_run_calls_its_overall_the_selection(runs):
    whole, age = runs["stereotyped"], runs["age"]
    assert (age["run"]["cases"], age["suite"]["cases_total"]) == (8, 96)
    assert {v["scope"] for v in age["verdicts"]} == {"overall", "age"}
    markdown = render_markdown(record(age))
    assert "## Selection (8 of 96 cases)" in markdown and "## Overall" not in markdown
    assert "| threshold | diff_bias_amb | selection (8 of 96 cases) | " in markdown  # the decision's failing check
    terminal = render_terminal([record(age)], color=False, width=100)
    assert "kobbq: selection (8 of 96 cases)" in terminal and "kobbq: overall" not in terminal
    # The whole suite is still "overall".
    assert "## Overall" in render_markdown(record(whole))
    assert "kobbq: overall" in render_terminal([record(whole)], color=False, width=100)
    from biascheck.records.run import RunRecord
    from biascheck.reporting.html import render_html

    page = render_html(RunRecord.from_json(age))
    assert "<h2>Selection (8 of 96 cases) metrics</h2>" in page and "<h2>Overall metrics</h2>" in render_html(RunRecord.from_json(whole))


# --- 6. A summary across suites ---------------------------------------------------------------------


def test_a_run_of_several_suites_opens_with_one_row_per_suite(runs, tmp_path):
    from biascheck.reporting.results import render_summary_markdown
    from biascheck.reporting.write import write_reports

    fair = copy.deepcopy(runs["fair"])
    fair["suite"]["name"] = "kobbq|fair"  # a pipe in a name must not split its cell
    documents = [runs["stereotyped"], fair]
    rows = table_with(render_summary_markdown([record(d) for d in documents]), "verdict")
    assert [(r["suite"], r["verdict"]) for r in rows] == [("kobbq", "FAILED"), ("kobbq|fair", "passed")]
    for row, document in zip(rows, documents):
        verdicts = document["verdicts"]
        assert row["cases"] == str(document["run"]["cases"]) == "96"
        assert row["checks passed"] == f"{sum(v['passed'] for v in verdicts)} of {len(verdicts)}"
        assert row["overall"].startswith("diff_bias_amb ") and row["model"] == document["model"]["model"]

    terminal = render_terminal([record(d) for d in documents], color=False, width=160)
    assert terminal.index("every suite") < terminal.index(documents[0]["suite"]["name"] + " (kobbq) on")
    assert "every suite" not in render_terminal([record(documents[0])], color=False, width=160)

    records = [record(d) for d in documents]
    write_reports(records, tmp_path / "report")
    assert (tmp_path / "report" / "summary.md").read_text("utf-8") == render_summary_markdown(records)
    write_reports(records[:1], tmp_path / "single")
    assert not (tmp_path / "single" / "summary.md").exists()


# --- 7. Text from outside cannot change a report's structure (issue 34, D5) -----------------------

# What a hostile provider, data file or user puts in a name, a reply or an error: line breaks,
# headings, HTML, links and images, table pipes, code fences, emphasis, list and quote markers,
# autolinks, entities, math, control and bidi characters.
HOSTILE_PIECES = [
    "\n", "\r\n", "\n\n", "\r", "\u2028", "\x85", "\x0b", "\t", "    ", "\x00", "\x1b[31m", "\u202e",
    "# ", "## x", "#", "=", "===", "---", "***", "___", "> ", "- ", "+ ", "* ", "1. ", "2) ",
    "<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "<!--", "-->", "<details>", "</details>", "</summary>",
    "<a href='x'>", "<http://e.x>", "<a@b.co>", "[x](http://e.x)", "![x](http://e.x/i.png)", "[x]: http://e.x", "[x][y]", "[^1]",
    "|", "\\|", "\\", "`", "```", "~~~", "*", "**", "_", "__", "~", "~~", "$", "$x$", "$$",
    "http://e.x", "https://e.x/p?q=1", "www.e.x", "a@b.co", "@user", "&lt;", "&#124;", "&amp", "&", "[!NOTE]",
    "PASSED", "biascheck: kobbq — PASSED", "word", " ",
]  # fmt: skip
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(HOSTILE_PIECES), st.text(max_size=4)), min_size=1, max_size=10).map("".join)
MD = settings(max_examples=examples(150), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def gfm_parser():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def md_structure(markdown: str) -> list[tuple]:
    """The structure of a Markdown text as a GFM renderer parses it: each block token's kind, and
    each inline's token kinds (text, strong, link, image, html, code ...), but not what the text says."""
    return [(t.type, t.tag, t.level, tuple((c.type, c.tag) for c in t.children or [])) for t in gfm_parser().parse(markdown)]


def inline_text(markdown: str) -> str:
    """The text a renderer shows of one line of Markdown."""
    return "".join(c.content for t in gfm_parser().parse(markdown) if t.type == "inline" for c in t.children if c.type == "text")


@MD
@given(text=HOSTILE_TEXT)
def test_md_text_is_one_line_of_plain_text_whatever_it_says(text):
    escaped = fmt.md_text(text)
    shown = fmt.one_line(text)
    assert "\n" not in escaped and "\r" not in escaped
    # No GFM autolink can start: a scheme's "://" and "www." are broken by an escape.
    assert not re.search(r"[A-Za-z]://|(?<![\w\\])www\.", escaped)
    # Raw HTML around it (a <summary>) meets no tag, comment or entity.
    assert not re.search(r"<[A-Za-z/!?]|&(?!lt;|amp;)[#A-Za-z0-9]", escaped)
    paragraph = ["paragraph_open", "inline", "paragraph_close"]
    contexts = {  # a line, a list item, a heading: each what it is, holding text alone
        "{}": paragraph,
        "- {}": ["bullet_list_open", "list_item_open", *paragraph, "list_item_close", "bullet_list_close"],
        "## {}": ["heading_open", "inline", "heading_close"],
    }
    for line, blocks in contexts.items():
        markdown = line.format(escaped)
        tokens = gfm_parser().parse(markdown)
        if shown:  # (empty: an empty list item or heading, or no paragraph)
            assert [t.type for t in tokens] == blocks, markdown
        assert {c.type for t in tokens if t.type == "inline" for c in t.children} <= {"text"}, markdown
        assert inline_text(markdown) == shown, markdown
    table = f"| a | b |\n|---|---|\n| {escaped} | {escaped} |\n| x | y |\n"
    rows = gfm_tables_of(table)
    assert rows == [{"a": shown, "b": shown}, {"a": "x", "b": "y"}], table


def gfm_tables_of(markdown: str) -> list[dict[str, str]]:
    (table,) = gfm_tables(markdown)
    return table


def test_md_text_keeps_names_readable():
    # Only what Markdown could read as syntax is escaped: a category name stays as written.
    assert fmt.md_text("race_ethnicity_nationality") == "race_ethnicity_nationality"
    assert fmt.md_text("openai/gpt-4o-mini") == "openai/gpt-4o-mini"
    assert fmt.md_text("|x| <= 0.05") == "\\|x\\| <= 0.05"
    assert fmt.md_text("a\n\n# b <img src=x>") == "a \\# b &lt;img src=x>"
    assert fmt.md_text("[x](http://e.x) 95% CI [0.1000, 0.1400]") == "[x\\](http\\://e.x) 95% CI [0.1000, 0.1400]"
    assert fmt.md_text("-0.5") == "-0.5" and fmt.md_text("- x") == "\\- x" and fmt.md_text("1. x") == "1\\. x"
    assert fmt.md_text(fmt.Markdown("**FAIL**")) == "**FAIL**"  # Markdown written by biascheck itself


def _inject(document: dict, text: str) -> dict:
    """``document`` (a results document) with ``text`` in every field whose text comes from outside
    biascheck: the model name and what the provider said it served, its refusals and errors, the
    suite, category, prompt and label names of data files, a judge's name and warnings."""
    document = copy.deepcopy(document)
    model, run, suite, metrics = document["model"], document["run"], document["suite"], document["metrics"]
    model["model"] = text
    model["revision"] = text
    model["served"] = {"models": {text: 1, "m": 2}, "system_fingerprints": {text: 1, "fp": 2}}
    model["params_dropped"] = {"temperature": f"refused by the server, not sent: BadRequestError: {text}"}
    model["params_ignored"] = {"seed": text}
    model["judge"] = {"model": text, "params": {"temperature": text}}
    document["judge_qualification"] = {"summary": text, "warnings": [text]}
    run.update(complete=False, incomplete_reason=f"fatal model error: {text}", estimator=text, estimator_note=text)
    run["batches"] = {text: 1}
    suite["name"] = text
    suite["skipped_categories"] = {text: text}
    suite["missing_data_allowed"] = False
    document["created_at"] = text
    metrics["by_category"] = {(text if name == "age" else name): table for name, table in metrics["by_category"].items()}
    for verdict in document["verdicts"]:
        verdict["scope"] = text if verdict["scope"] == "age" else verdict["scope"]
    metrics["by_prompt"] = {text: next(iter(metrics["by_prompt"].values()))}
    return document


def _inject_comparison(comparison: dict, text: str) -> dict:
    comparison = copy.deepcopy(comparison)
    comparison["suite"]["name"] = text
    for side in ("baseline", "candidate"):
        comparison[side].update(model=text, path=text, created_at=text, tool_version=text, git_commit=text)
    comparison["warnings"] = [*comparison["warnings"], text]
    for result in comparison["results"]:
        result["explanation"] = f"{result['explanation']} {text}"
        result["scope"] = text if result["scope"] == "age" else result["scope"]
    flips = comparison["flips"]
    flips["by_transition"] = {text: 1, **flips["by_transition"]}
    case = {
        "case_id": text,
        "category": text,
        "context_type": text,
        "baseline": text,
        "candidate": text,
        "prompt": text,
        "prompt_text": f"Q: {text}\n{text}",
        "answer": text,
        "baseline_answer": text,
        "options": [text, "b", "c"],
    }
    flips["by_category"] = {text: {text: 1}, **flips["by_category"]}
    flips["examples"] = [case, *flips["examples"]]
    return comparison


def _markdown_of_every_kind(runs: dict, text: str) -> dict[str, str]:

    from biascheck.evaluation import baseline as baselines
    from biascheck.records.baseline import BaselineRecord
    from biascheck.records.run import RunRecord
    from biascheck.reporting.github import step_summary
    from biascheck.reporting.results import render_summary_markdown
    from biascheck.reporting.runs import compare_runs, history_document, render_history_markdown, render_runs_markdown

    document, fair = _inject(runs["stereotyped"], text), _inject(runs["fair"], text)
    comparison = _inject_comparison(_comparison(runs), text)
    compared = compare_runs([(text, RunRecord.from_json(document)), (text + "2", RunRecord.from_json(fair))])
    releases = [(text, baselines.from_results(RunRecord.from_json(d)).to_json()) for d in (runs["fair"], runs["stereotyped"])]
    for _, release in releases:
        release["model"]["model"] = text
        release["created_at"] = text
        release["suite"]["fingerprint"]["data"] = text
    recorded = [(path, BaselineRecord.from_json(release)) for path, release in releases]
    history = history_document(recorded, suite="kobbq", thresholds=None, gated_metrics=["diff_bias_amb"])
    return {
        "report.md": render_markdown(record(document)),
        "comparison.md": render_comparison_markdown(comparison_record(comparison)),
        "summary.md": render_summary_markdown([record(document), record(fair)]),
        "step summary": step_summary([record(document), record(fair)], {text: comparison_record(comparison)}),
        "compare.md": render_runs_markdown(compared),
        "history": render_history_markdown(history),
    }


_COMPARISON: dict = {}


def _comparison(runs: dict) -> dict:
    """The comparison of the stereotyped run with the fair one, made once for each set of runs (it bootstraps)."""
    if id(runs) not in _COMPARISON:
        _COMPARISON[id(runs)] = comparison_of(runs["fair"], runs["stereotyped"])
    return _COMPARISON[id(runs)]


def test_outside_text_cannot_change_the_structure_of_any_markdown_report(two_category_runs):
    # Issue 34, D5: a served model name with a line break added a "PASSED" heading and an <img> to
    # the report of a failed run. Whatever a field from outside says, each Markdown rendering has
    # the structure it has with a plain word there: no heading, HTML, link, image or table row more.
    plain = {kind: md_structure(markdown) for kind, markdown in _markdown_of_every_kind(two_category_runs, "word").items()}

    @settings(MD, max_examples=examples(60))
    @given(text=HOSTILE_TEXT)
    def check(text):  # (inside: hypothesis would print the runs fixture with each failure)
        assume(fmt.one_line(text))  # (an empty name leaves an empty list item: no injection)
        for kind, markdown in _markdown_of_every_kind(two_category_runs, text).items():
            assert md_structure(markdown) == plain[kind], (kind, markdown)

    check()
