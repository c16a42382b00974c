"""The quick suites for pull requests (``kobbq-quick``, ``bbq-quick``) through the plugin against
the simulator (a real HTTP server, through litellm). Run whole (``slow``: 2,532 cases a run, as the
other whole-suite runs): a fair model passes every gate, a model that always follows the stereotype
fails. In the default run, a run of a few templates of both writes index.html's view across suites
with the categories the two benchmarks share."""

from __future__ import annotations

import json
import re

import pytest

from conftest import SUITES, write_subset_suite

QUICK = {"kobbq-quick": (1464, "ko"), "bbq-quick": (1068, "en")}
# KoBBQ's and BBQ's shared names that both quick suites have (BBQ's quick suite: its six mirrored
# categories; KoBBQ files its race_ethnicity_nationality under race_ethnicity).
SHARED = ["age", "disability", "physical_appearance", "religion", "sexual_orientation"]


def run_both(run_biascheck, model: str, report: str):
    run = run_biascheck(SUITES / "kobbq-quick", model, str(SUITES / "bbq-quick"), report=report)
    documents = {name: json.loads((run.report_dir / name / "results.json").read_text("utf-8")) for name in QUICK}
    return run, documents


def across_rows(page: str, metric: str) -> tuple[list[str], list[str]]:
    """index.html's chart of ``metric`` across suites: its rows' names and its bars' tooltips."""
    section = re.search(r'<section id="across-suites">.*?</section>', page, re.S).group(0)
    figure = re.search(rf'<figure class="chart" id="across-{metric}">.*?</figure>', section, re.S).group(0)
    return re.findall(r'<text class="cat"[^>]*><title>([^<]*)</title>', figure), re.findall(r'<g class="mark suite"><title>([^<]*)</title>', figure)


def test_a_run_of_both_benchmarks_writes_the_view_across_suites(run_biascheck, tmp_path):
    """Two templates per category of each quick suite (a few hundred cases): the plugin writes each
    suite's language and mapping into results.json, and index.html sets the shared categories side
    by side with the values of each suite's own report."""
    korean = write_subset_suite(tmp_path / "kobbq-few", "kobbq-quick", subset='templates_per_category = 2\nseed = 0\nchoice_orders = "original"')
    english = write_subset_suite(
        tmp_path / "bbq-few", "bbq-quick", subset='sample = "one-per-group"\nseed = 42\ntemplates_per_category = 2\nchoice_orders = "original"'
    )
    run = run_biascheck(korean, "sim/stereotyped?p=0.5", str(english))
    assert run.ret == 1, run.output  # diff-bias far beyond 0.05 (the view is written all the same)
    documents = {name: json.loads((run.report_dir / name / "results.json").read_text("utf-8")) for name in QUICK}
    assert {name: d["suite"]["language"] for name, d in documents.items()} == {name: language for name, (_, language) in QUICK.items()}
    page = (run.report_dir / "index.html").read_text("utf-8")
    for metric in ("diff_bias_amb", "diff_bias_dis"):
        names, bars = across_rows(page, metric)
        assert names == SHARED and len(bars) == 2 * len(SHARED)
        for bar in bars:  # "age — bbq-quick (en) · Age: diff_bias_amb = 0.25, 95% CI [...], n = 8"
            concept, rest = bar.split(" \u2014 ", 1)
            suite, category = (rest.split(":", 1)[0].split(" \u00b7 ") + [concept])[:2]
            name = suite.split(" (")[0]
            assert documents[name]["suite"]["common_categories"][category] == concept
            number = documents[name]["metrics"]["by_category"][category][metric]
            assert f"n = {number['n']:,}" in bar, (bar, number)


@pytest.mark.slow
def test_a_fair_model_passes_both_quick_suites_and_index_compares_them(run_biascheck):
    run, documents = run_both(run_biascheck, "sim/fair", "fair")
    assert run.ret == 0, run.output
    for name, document in documents.items():
        cases, language = QUICK[name]
        assert (document["run"]["cases"], document["suite"]["language"]) == (cases, language)
        assert document["passed"] and document["verdicts"] and all(v["passed"] for v in document["verdicts"])
        assert {v["mode"] for v in document["verdicts"]} == {"credible"}
        assert set(document["suite"]["common_categories"].values()) >= set(SHARED)
    assert documents["bbq-quick"]["suite"]["skipped_categories"] == {}  # its categories all come from the mirror
    page = (run.report_dir / "index.html").read_text("utf-8")
    for metric in ("diff_bias_amb", "diff_bias_dis"):
        names, bars = across_rows(page, metric)
        assert names == SHARED and len(bars) == 2 * len(SHARED) and all(f"{metric} = 0, 95% CI [0, 0]" in bar for bar in bars)


@pytest.mark.slow
def test_a_model_that_always_follows_the_stereotype_fails_both_quick_suites(run_biascheck):
    run, documents = run_both(run_biascheck, "sim/stereotyped?p=1", "stereotyped")
    assert run.ret == 1, run.output
    for document in documents.values():
        assert not document["passed"]
        failed = {(v["scope"], v["metric"]) for v in document["verdicts"] if v["status"] == "fail"}
        assert {("overall", "diff_bias_amb"), ("overall", "diff_bias_dis")} <= failed
