"""Every view tells the decision first (issue 35, parts 2 and 4): report.md (and so the job
summary), the top of report.html and the terminal's last block open with every failing check,
thresholds and regressions alike, then the inconclusive ones; the same set in every view; and the
run's last line names every file it wrote. Read as a person would: the README's gate, small."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.records.run import RunRecord

from conftest import write_subset_suite

BASELINE_MODEL = "sim/stereotyped?p=0.01"
CANDIDATE_MODEL = "sim/stereotyped?p=0.5"


@pytest.fixture(scope="module")
def gate(tmp_path_factory, data_dir) -> dict:
    """The README's release gate, small: KoBBQ with 2 templates per category (200 cases), the
    baseline ``sim/stereotyped?p=0.01``, a candidate with a higher p; real runs, a real comparison."""
    from biascheck.evaluation import baseline as baselines
    from biascheck.evaluation.regression import compare, settings_from
    from biascheck.execution.llm import ModelConfig
    from biascheck.reporting.results import build_results
    from biascheck.session import RunConfig, run
    from biascheck.suite import load_suite

    folder = tmp_path_factory.mktemp("gate")
    suite_dir = write_subset_suite(
        folder / "kobbq-quick",
        subset='templates_per_category = 2\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    suite = load_suite(suite_dir, data_dir=data_dir)

    def results(model: str) -> RunRecord:
        config = RunConfig(model=ModelConfig(model), store_path=folder / "store.sqlite", data_dir=data_dir)
        (record,), _ = build_results(run([(suite, suite.cases)], config))
        return record

    baseline, candidate = results(BASELINE_MODEL), results(CANDIDATE_MODEL)
    comparison = compare(baselines.from_results(baseline), candidate, settings_from(candidate, []), baseline_path="baselines/kobbq/release.json")
    verdicts = {c.verdict for c in comparison.checks}
    assert {"regressed", "inconclusive"} <= verdicts and not candidate.passed, "the scenario must regress, stay unresolved and fail thresholds"
    # The views' documents (results.json's, comparison.json's), and the records write_reports writes.
    return {"candidate": candidate.to_json(), "comparison": comparison.to_json(), "run": candidate, "record": comparison, "folder": folder}


def records(document: dict, comparison: dict | None = None):
    """The records the views take, of documents a test made or edited."""
    from biascheck.records.comparison import Comparison
    from biascheck.records.run import RunRecord

    return RunRecord.from_json(document), None if comparison is None else Comparison.from_json(comparison)


def written(gate: dict, name: str) -> dict[str, str]:
    """The report folder write_reports makes of the gate's run and comparison: file name -> text."""
    from biascheck.reporting.write import write_reports

    folder = gate["folder"] / name
    write_reports([gate["run"]], folder, {"kobbq": gate["record"]})
    return {p.name: p.read_text("utf-8") for p in folder.iterdir() if p.is_file()}


def test_the_views_render_the_records_read_back_from_the_files_they_wrote(gate, tmp_path):
    """Views take records (issue 35): the report.md, comparison.md, job summary and terminal text of
    the records ``load_run`` and ``load_comparison`` read from a written report are the very text
    written from the run, and each is the record's own decision (nothing re-derived from JSON)."""
    from biascheck import Comparison, load_comparison, load_run
    from biascheck.reporting.comparison import render_comparison_markdown
    from biascheck.reporting.decision import decide
    from biascheck.reporting.github import step_summary
    from biascheck.reporting.results import render_markdown
    from biascheck.reporting.terminal import render_comparison_terminal, render_terminal

    files = written(gate, "read-back")
    run, comparison = load_run(gate["folder"] / "read-back"), load_comparison(gate["folder"] / "read-back")
    assert render_markdown(run, comparison) == files["report.md"]
    assert render_comparison_markdown(comparison) == files["comparison.md"]
    assert step_summary([run], {"kobbq": comparison}) == files["report.md"] + "\n" + files["comparison.md"]
    decision = decide(run, comparison)
    assert {c.key for c in decision.failed if c.kind == "regression"} == {("regression", c.metric, c.scope) for c in comparison.regressions}
    assert {c.key for c in decision.failed if c.kind == "threshold"} == {("threshold", v.metric, v.scope) for v in run.failed_checks}
    # The terminal: the run's record made in memory renders as the one read back, and the
    # comparison.json alone as with every flip of flips.jsonl read beside it.
    live, _ = records(gate["candidate"])
    assert render_terminal([live], color=False, width=200) == render_terminal([run], color=False, width=200)
    alone = Comparison.from_json(json.loads(files["comparison.json"]))
    assert comparison.flips.every and alone.flips.every is None
    assert render_comparison_terminal([alone], color=False, width=200) == render_comparison_terminal([comparison], color=False, width=200)


def check_line(lines: list[str], metric: str, scope: str, kind: str) -> int:
    """The index of the line of report.md's decision that names this check (a row of its table)."""
    found = [i for i, line in enumerate(lines) if re.match(rf"^\| {re.escape(kind)} \| {re.escape(metric)} \| {re.escape(scope)} \|", line)]
    assert found, f"no {kind} row for {metric} ({scope})"
    return found[0]


def test_report_md_lists_every_regression_before_the_inconclusive_checks_and_any_prose(gate):
    files = written(gate, "report-md")
    lines = files["report.md"].splitlines()
    results = gate["comparison"]["results"]
    regressed = [r for r in results if r["verdict"] == "regressed"]
    unresolved = [r for r in results if r["verdict"] == "inconclusive"]
    first_unresolved = min(
        i for i, line in enumerate(lines) for r in unresolved if re.match(rf"^- {re.escape(r['metric'])} \({re.escape(r['scope'])}\)", line)
    )
    # Prose: the run line, warnings, the metric tables; all after the decision.
    prose = min(i for i, line in enumerate(lines) if "suite fingerprint" in line or line.lower().startswith(("warning", "## overall")))
    for r in regressed:
        row = check_line(lines, r["metric"], r["scope"], "regression")
        assert row < first_unresolved and row < prose, (r["metric"], r["scope"])
        # Its evidence: the flips of its scope counted by direction, and where every flip is.
        flips = r["scope"] == "overall" and gate["comparison"]["flips"]["by_transition"]
        for transition, n in (flips or {}).items():
            assert f"{transition} {n:,}" in lines[row], lines[row]
        assert "comparison.md / flips.jsonl" in lines[row]
    for v in gate["candidate"]["verdicts"]:
        if not v["passed"]:
            assert check_line(lines, v["metric"], v["scope"], "threshold") < first_unresolved
    assert lines[0].endswith("FAILED")
    # The old list at the end, which named thresholds alone, is gone: one list, the decision's.
    assert "## Failed checks" not in files["report.md"]


# --- the same failing checks in every view ----------------------------------------------------------


def terminal_failures(text: str) -> set[tuple]:
    from biascheck.reporting.decision import KINDS

    kinds = "|".join(map(re.escape, KINDS))
    return {
        (m.group(1), m.group(2), m.group(3))
        for m in re.finditer(rf"^  FAIL ({kinds}): (\S+) \(([^)]+)\)", text, re.M)  # (scopes in the gate have no parentheses)
    }


def markdown_failures(text: str) -> set[tuple]:
    from biascheck.reporting.decision import KINDS

    kinds = "|".join(map(re.escape, KINDS))
    return {(m.group(1), m.group(2), m.group(3)) for m in re.finditer(rf"^\| ({kinds}) \| ([^|]+?) \| ([^|]+?) \|", text, re.M)}


def html_failures(page: str) -> set[tuple]:
    block = re.search(r'<div id="decision".*?<header>', page, re.S)  # the decision, up to the run's details
    assert block, "no decision block"
    rows = re.finditer(r'<tr class="failed-check" data-kind="([^"]+)" data-metric="([^"]*)" data-scope="([^"]*)"', block.group(0))
    return {(m.group(1), m.group(2), m.group(3)) for m in rows}


def expected_failures(document: dict, comparison: dict) -> set[tuple]:
    """Read from the JSON the way a reviewer would: thresholds failed, checks regressed, and under
    on_inconclusive = fail every unresolved check."""
    fail_unresolved = comparison["settings"]["on_inconclusive"] == "fail"
    out = {("threshold", v["metric"], v["scope"]) for v in document["verdicts"] if not v["passed"]}
    out |= {("regression", r["metric"], r["scope"]) for r in comparison["results"] if r["verdict"] == "regressed"}
    out |= {
        ("inconclusive", r["metric"], r["scope"])
        for r in comparison["results"]
        if fail_unresolved and r["verdict"] in ("inconclusive", "not compared")
    }
    return out


@st.composite
def randomized(draw, gate: dict) -> tuple[dict, dict]:
    """The gate's documents with random verdicts per comparison check and random threshold
    failures; the summary fields (passed, regressed) set as biascheck sets them."""
    from biascheck.evaluation.regression import ON_INCONCLUSIVE, VERDICTS

    document, comparison = copy.deepcopy(gate["candidate"]), copy.deepcopy(gate["comparison"])
    for v in document["verdicts"]:
        v["passed"] = draw(st.booleans())
    for r in comparison["results"]:
        r["verdict"] = draw(st.sampled_from(VERDICTS))
    mode = draw(st.sampled_from(ON_INCONCLUSIVE))
    comparison["settings"]["on_inconclusive"] = mode
    comparison["regressed"] = any(r["verdict"] == "regressed" for r in comparison["results"])
    unresolved = any(r["verdict"] in ("inconclusive", "not compared") for r in comparison["results"])
    comparison["passed"] = not comparison["regressed"] and not (mode == "fail" and unresolved)
    document["passed"] = all(v["passed"] for v in document["verdicts"])
    return document, comparison


def test_every_view_names_the_same_failing_checks(gate):
    from biascheck.reporting.decision import decide
    from biascheck.reporting.github import step_summary
    from biascheck.reporting.html import render_html
    from biascheck.reporting.results import render_markdown
    from biascheck.reporting.terminal import render_decision_terminal

    @settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=randomized(gate))
    def check(data):
        document, comparison = data
        expected = expected_failures(document, comparison)
        reread = json.loads(json.dumps(comparison))  # comparison.json, as written and read back
        run, record = records(document, comparison)
        assert record is not None
        views = {
            "decision": {check.key for check in decide(*records(document, reread)).failed},
            "terminal": terminal_failures(render_decision_terminal([decide(run, record)], color=False, width=300)),
            "report.md": markdown_failures(render_markdown(run, record)),
            "report.html": html_failures(render_html(*records(document, reread))),
            "job summary": markdown_failures(step_summary([run], {"kobbq": record})),
        }
        for view, found in views.items():
            assert found == expected, view
        passed = document["passed"] and comparison["passed"]
        assert bool(expected) == (not passed)

    check()


# --- report.html in a real browser ---------------------------------------------------------------------

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FIRST_SCREEN = (1280, 800)


def browser_or_fail() -> str:
    """A headless Chromium; where none is, the test fails in CI (BIASCHECK_REQUIRE_DATA=1, CI) and
    says so everywhere else: a decision block never measured must not pass quietly."""
    browser = next((path for path in map(shutil.which, BROWSERS) if path), None)
    if browser is None:
        message = f"no headless browser ({', '.join(BROWSERS)}) on PATH to open report.html (Debian: apt-get install chromium)"
        if os.environ.get("BIASCHECK_REQUIRE_DATA") == "1" or os.environ.get("CI"):
            pytest.fail(message + " (CI forbids skipping)")
        pytest.skip(message)
    return browser


# Measures the decision block where the browser laid it out, into the DOM that --dump-dom prints.
MEASURE = """<script>
addEventListener("load", () => {
  const box = document.getElementById("decision").getBoundingClientRect();
  const row = document.querySelector("#decision tr.failed-check").getBoundingClientRect();
  const table = document.querySelector("#decision table").getBoundingClientRect();
  document.body.setAttribute("data-measured", JSON.stringify(
    {top: box.top, first_row_bottom: row.bottom, table_right: table.right, height: innerHeight, width: innerWidth}));
});
</script>"""


def test_report_html_shows_the_decision_in_the_first_screen(gate):
    browser = browser_or_fail()
    files = written(gate, "report-html")
    folder = gate["folder"] / "report-html"
    measured = folder / "measured.html"
    measured.write_text(files["report.html"].replace("</body>", MEASURE + "</body>"), "utf-8")
    size = f"--window-size={FIRST_SCREEN[0]},{FIRST_SCREEN[1]}"
    common = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", size]
    dom = subprocess.run([*common, "--dump-dom", measured.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r'data-measured="([^"]+)"', dom)
    assert found, "the page did not load in the browser"
    box = json.loads(found.group(1).replace("&quot;", '"'))
    assert 600 <= box["height"] <= FIRST_SCREEN[1]  # the viewport: the window less what the browser keeps
    # The decision starts on the first screen and its first failing check is read without scrolling.
    assert 0 <= box["top"] < box["height"] / 2 and box["first_row_bottom"] <= box["height"], box
    assert box["table_right"] <= box["width"], box  # read whole, evidence included, without scrolling sideways
    # A picture of that first screen, to look at (tmp folder; the test reads the DOM, not pixels).
    subprocess.run([*common, f"--screenshot={folder / 'first-screen.png'}", (folder / "report.html").as_uri()], capture_output=True, timeout=120)


# --- the run's last line names every file it wrote ------------------------------------------------------


def named_files(line: str, folder: Path) -> set[str]:
    """The files a last line names in ``folder`` (``wrote <folder>: a, b, c; ...``)."""
    found = re.search(r"wrote (\S+): ([^;]+)", line)
    assert found and Path(found.group(1)).resolve() == folder.resolve(), line
    return set(found.group(2).split(", "))


def files_in(folder: Path) -> set[str]:
    """Every file of a report folder but its marker (which says the folder is biascheck's)."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != "biascheck-run.json"}


def test_the_last_line_of_a_gate_names_every_file_it_wrote(run_biascheck, tiny_kobbq, data_dir, tmp_path, capsys, monkeypatch):
    from biascheck.cli import main

    monkeypatch.chdir(tmp_path)
    pattern = str(tmp_path / "baselines" / "{suite}.json")
    recorded = run_biascheck(tiny_kobbq, BASELINE_MODEL, "--biascheck-update-baseline", "--biascheck-baseline", pattern, report="record")
    tail = recorded.output.split("biascheck summary", 1)[1].splitlines()
    last = next(line for line in reversed(tail) if line.startswith("biascheck: wrote"))
    assert named_files(last, tmp_path / "record") == files_in(tmp_path / "record") >= {"results.json", "report.md", "report.html"}
    assert f"baseline {tmp_path / 'baselines' / 'kobbq.json'}" in last or "baseline baselines/kobbq.json" in last, last

    gated = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.9", "--biascheck-baseline", pattern, report="gate")
    assert gated.ret == 1
    summary = gated.output.split("biascheck summary", 1)[1].split("short test summary info", 1)[0]
    lines = [line for line in summary.splitlines() if line.strip() and not line.startswith("=")]
    # The decision is the last block, then the line that names the files.
    assert lines[-1].startswith("biascheck: wrote"), lines[-3:]
    decision_at = max(i for i, line in enumerate(lines) if line.startswith("biascheck decision: kobbq: FAILED"))
    assert not any(line.startswith(("biascheck", "kobbq")) for line in lines[decision_at + 1 : -1]), lines[decision_at:]
    assert named_files(lines[-1], tmp_path / "gate") == files_in(tmp_path / "gate") >= {"comparison.json", "comparison.md"}
    assert "compared with baseline" in lines[-1] and "kobbq.json" in lines[-1]

    # biascheck run and biascheck diff: the same last line, on stdout.
    common = [str(tiny_kobbq), "--model", "sim/stereotyped?p=0.9", "--data", str(data_dir), "--cache", str(tmp_path / "store.sqlite")]
    capsys.readouterr()
    assert main(["run", *common, "--report", str(tmp_path / "cli"), "--baseline", pattern]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert named_files(last, tmp_path / "cli") == files_in(tmp_path / "cli") and "compared with baseline" in last
    assert main(["diff", str(tmp_path / "record"), str(tmp_path / "cli"), "--report", str(tmp_path / "diff")]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert named_files(out[-1], tmp_path / "diff") == files_in(tmp_path / "diff") >= {"comparison.json", "report.md"}
    assert any(line.startswith("biascheck decision: kobbq: FAILED") for line in out)


# --- a regressed check's evidence, from either comparison schema -----------------------------------------


def test_a_checks_flips_are_counted_by_direction_from_either_schema():
    from biascheck.records._json import Fields
    from biascheck.records.comparison import Flips
    from biascheck.reporting.decision import flip_counts

    flip = {"case_id": "x", "category": "ses", "context_type": "amb", "prompt": None, "answer": None}
    # biascheck.comparison/2: counts per category and direction.
    second = {
        "total": 4,
        "by_transition": {"unknown -> biased": 3, "counter -> biased": 1},
        "by_category": {"ses": {"counter -> biased": 1, "unknown -> biased": 2}, "age": {"unknown -> biased": 1}},
        "examples": [],
        "limit": 0,
        "shown": 0,
        "file": None,
    }
    second = Flips.from_json(Fields(second, "comparison.json", "flips"))
    assert flip_counts(second, "ses").counts == (("unknown -> biased", 2), ("counter -> biased", 1))
    assert flip_counts(second, "overall").text("\u2192") == "unknown \u2192 biased 3, counter \u2192 biased 1"
    assert flip_counts(second, "religion").text() == "no flipped case"
    # biascheck.comparison/1: the shown flips listed per category; counted from them, said to be partial.
    first = {
        "total": 5,
        "shown": 3,
        "limit": 3,
        "by_transition": {"unknown -> biased": 5},
        "by_category": {
            "ses": [{**flip, "baseline": "unknown", "candidate": "biased"}] * 2 + [{**flip, "baseline": "counter", "candidate": "biased"}]
        },
    }
    first = Flips.from_json_1(Fields(first, "comparison.json", "flips"))
    counted = flip_counts(first, "ses")
    assert counted.counts == (("unknown -> biased", 2), ("counter -> biased", 1)) and counted.partial
    assert counted.text().endswith("(of the flips listed)")
    # A category whose flips were all left out of the list had flips: it does not say it had none.
    assert flip_counts(first, "religion").text() == "none among the flips listed"


def test_every_evidence_link_of_the_decision_reaches_its_flips(gate):
    page = written(gate, "links")["report.html"]
    block = re.search(r'<div id="decision".*?<header>', page, re.S).group(0)
    targets = re.findall(r'<a href="#([^"]+)"', block)
    assert len(targets) == sum(r["verdict"] == "regressed" for r in gate["comparison"]["results"])
    ids = set(re.findall(r' id="([^"]+)"', page))
    assert all(target in ids for target in targets), (targets, ids)


def test_a_run_that_failed_as_a_whole_says_why_in_its_decision(gate):
    """Missing data, errored cases and an incomplete run fail the gate with no check over its
    limit: each is a reason of its own, first in report.md and the page, as a check is."""
    from biascheck.records.run import RunRecord
    from biascheck.reporting.decision import decide
    from biascheck.reporting.html import render_html
    from biascheck.reporting.results import render_markdown

    document = copy.deepcopy(gate["candidate"])
    for v in document["verdicts"]:
        v["passed"] = True
    document["suite"].update(skipped_categories={"religion": "no data file"}, missing_data_allowed=False)
    document["run"].update(case_errors=3, complete=False, incomplete_reason="stopped at --biascheck-max-cost")
    document["passed"] = False
    run, _ = records(document)
    decision = decide(run)
    assert [c.kind for c in decision.failed] == ["missing data", "errored cases", "incomplete run"] and not decision.passed
    markdown = render_markdown(run)
    for reason in ("religion", "3 cases without an answer", "stopped at --biascheck-max-cost"):
        assert markdown.index(reason) < markdown.index("suite fingerprint"), reason
    page = render_html(RunRecord.from_json(document))
    block = re.search(r'<div id="decision".*?<header>', page, re.S).group(0)
    assert "stopped at --biascheck-max-cost" in block and 'data-kind="missing data"' in block
