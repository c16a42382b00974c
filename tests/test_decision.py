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

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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

    def results(model: str) -> dict:
        config = RunConfig(model=ModelConfig(model), store_path=folder / "store.sqlite", data_dir=data_dir)
        (document,) = build_results(run([(suite, suite.cases)], config))
        return document

    baseline, candidate = results(BASELINE_MODEL), results(CANDIDATE_MODEL)
    comparison = compare(baselines.from_results(baseline), candidate, settings_from(candidate, []), baseline_path="baselines/kobbq/release.json")
    verdicts = {r["verdict"] for r in comparison["results"]}
    assert {"regressed", "inconclusive"} <= verdicts and not candidate["passed"], "the scenario must regress, stay unresolved and fail thresholds"
    return {"candidate": candidate, "comparison": comparison, "folder": folder}


def written(gate: dict, name: str) -> dict[str, str]:
    """The report folder write_reports makes of the gate's run and comparison: file name -> text."""
    from biascheck.reporting.write import write_reports

    folder = gate["folder"] / name
    write_reports([copy.deepcopy(gate["candidate"])], folder, {"kobbq": copy.deepcopy(gate["comparison"])})
    return {p.name: p.read_text("utf-8") for p in folder.iterdir() if p.is_file()}


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

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=randomized(gate))
    def check(data):
        document, comparison = data
        expected = expected_failures(document, comparison)
        reread = json.loads(json.dumps(comparison))  # comparison.json, as written and read back
        views = {
            "decision": {check.key for check in decide(document, reread).failed},
            "terminal": terminal_failures(render_decision_terminal([decide(document, comparison)], color=False, width=300)),
            "report.md": markdown_failures(render_markdown(document, comparison)),
            "report.html": html_failures(render_html(document, comparison)),
            "job summary": markdown_failures(step_summary([document], {"kobbq": comparison})),
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
