"""Baseline files and comparisons, without pytest runs: results documents come from
:func:`biascheck.sim.calibration.simulated_results` (the sim server's answers, no HTTP), which goes
through the real outcome, metric, verdict and results code."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.config.manifest import Rule
from biascheck.core import format as fmt
from biascheck.core.errors import BiascheckError
from biascheck.evaluation import baseline as baselines
from biascheck.evaluation.regression import compare, resolve_rules, settings_from
from biascheck.records.run import RunRecord
from biascheck.sim.calibration import PreparedSuite, simulated_results
from biascheck.suite import load_suite

pytestmark = pytest.mark.data


def results_of(prepared, persona: str, **options) -> dict:
    """A simulated run's results.json document, for a test to edit before reading it as a record."""
    return simulated_results(prepared, persona, **options).to_json()


def compared(baseline, document: dict, settings=None, **options) -> tuple[dict, list[dict]]:
    """(comparison.json's document, every flip) of a results document compared with a baseline."""
    run = RunRecord.from_json(document)
    comparison = compare(baseline, run, settings or settings_from(run), baseline_path="b.json", **options)
    return comparison.to_json(), [flip.to_json() for flip in comparison.flips.every or ()]


@pytest.fixture
def prepared(small_kobbq, data_dir) -> PreparedSuite:
    return PreparedSuite.of(load_suite(small_kobbq, data_dir=data_dir))


@pytest.fixture
def baseline_file(prepared, tmp_path) -> Path:
    path = tmp_path / "baselines" / "kobbq" / "sim-stereotyped.json"
    baselines.write(baselines.from_results(simulated_results(prepared, "stereotyped?p=0.2"), git="0" * 40), path)
    return path


# --- the file -------------------------------------------------------------------------------------


def test_round_trip_keeps_everything_and_one_case_per_line(prepared, baseline_file):
    results = results_of(prepared, "stereotyped?p=0.2")
    loaded = baselines.load(baseline_file).to_json()
    assert loaded["suite"]["fingerprint"] == prepared.suite.fingerprint()
    assert loaded["model"] == {
        "model": "sim/stereotyped?p=0.2",
        "revision": None,
        "params": results["model"]["params"],
        "judge": None,
        "estimator": None,
    }
    # Every gated metric of the results, and none of those only reported (how answers were read).
    gated = {name for name, d in prepared.suite.benchmark.metric_defs.items() if d.gated}
    assert gated <= set(results["metrics"]["overall"]) and "acc_norm_amb" not in gated
    assert loaded["metrics"]["overall"] == {k: v for k, v in results["metrics"]["overall"].items() if k in gated}
    assert loaded["metrics"]["by_category"] == {c: {k: v for k, v in t.items() if k in gated} for c, t in results["metrics"]["by_category"].items()}
    rows = loaded["cases"]["rows"]
    assert len(rows) == len(prepared.suite.cases)
    by_id = {c["case_id"]: c for c in results["cases"]}
    assert all(by_id[r[0]]["outcome"] == r[4] and by_id[r[0]]["cluster"] == r[2] for r in rows)
    text = baseline_file.read_text("utf-8")
    # Reviewable: each case row is one line of the file, so a changed outcome is a one-line diff.
    assert sum(1 for line in text.splitlines() if line.strip().startswith('["')) == len(rows)
    # No model text in a baseline: the raw replies stay in results.json.
    assert '"raw"' not in text and "answer" not in text


def test_model_slug_and_paths(tmp_path):
    assert baselines.model_slug("openai/gpt-4o-mini") == "openai-gpt-4o-mini"
    assert baselines.model_slug("sim/stereotyped?p=0.3&seed=1") == "sim-stereotyped-p-0.3-seed-1"
    # By default a baseline is named for the release, not the model (which may be renamed).
    assert baselines.baseline_path(None, suite="kobbq", model="openai/gpt-4o", root=tmp_path) == tmp_path / "baselines/kobbq/release.json"
    assert baselines.baseline_path("b/{suite}/x.json", suite="bbq", model="m", root=tmp_path) == tmp_path / "b/bbq/x.json"
    assert baselines.baseline_path("{suite}-{model}.json", suite="bbq", model="a/B", root=tmp_path) == tmp_path / "bbq-a-b.json"
    assert baselines.baseline_path(tmp_path / "abs.json", suite="bbq", model="m", root=Path("/elsewhere")) == tmp_path / "abs.json"


@settings(max_examples=examples(60), deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_model_slug_is_a_safe_file_name(model):
    slug = baselines.model_slug(model)
    assert re.fullmatch(r"[a-z0-9._-]+", slug) and slug not in (".", "..") and "/" not in slug


def _error(path: Path) -> str:
    with pytest.raises(BiascheckError) as info:
        baselines.load(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


def test_a_changed_outcome_is_caught_and_names_the_metric(baseline_file):
    text = baseline_file.read_text("utf-8")
    line = next(row for row in text.splitlines() if row.strip().startswith('["') and '"unknown"]' in row and '"amb"' in row)
    baseline_file.write_text(text.replace(line, line.replace('"unknown"]', '"biased"]')), "utf-8")
    assert "metrics.overall.acc_amb.value" in _error(baseline_file)


def test_a_changed_metric_value_is_caught_and_names_the_field(baseline_file):
    document = json.loads(baseline_file.read_text("utf-8"))
    document["metrics"]["by_category"]["age"]["diff_bias_amb"]["value"] = 0.0
    baseline_file.write_text(json.dumps(document), "utf-8")
    assert "metrics.by_category.age.diff_bias_amb.value" in _error(baseline_file)


def test_any_other_edit_breaks_the_digest(baseline_file):
    document = json.loads(baseline_file.read_text("utf-8"))
    document["model"]["params"]["temperature"] = 0.7
    baseline_file.write_text(json.dumps(document), "utf-8")
    assert ": digest: " in _error(baseline_file)


def test_truncated_and_schema_invalid_files_name_the_problem(baseline_file, tmp_path):
    text = baseline_file.read_text("utf-8")
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2], "utf-8")
    assert "truncated" in _error(truncated)
    bad_context = tmp_path / "bad.json"
    bad_context.write_text(re.sub(r'"amb", "unknown"\]', '"ambiguous", "unknown"]', text, count=1), "utf-8")
    assert re.search(r"cases\.rows\[\d+\]\[3\]", _error(bad_context))
    missing = tmp_path / "missing.json"
    document = json.loads(text)
    del document["suite"]["fingerprint"]
    missing.write_text(json.dumps(document), "utf-8")
    assert "suite: 'fingerprint' is a required property" in _error(missing)
    assert "no such baseline" in _error(tmp_path / "nowhere.json")
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"schema": "biascheck.results/1"}), "utf-8")
    assert "biascheck diff" in _error(results)


def test_refuse_reason_names_partial_errored_and_incomplete_runs(prepared):
    from dataclasses import replace

    results = simulated_results(prepared, "fair", resamples=0)
    assert baselines.refuse_reason(results) is None
    partial = replace(results, run=replace(results.run, cases=10))
    assert "only 10 of the suite's" in (baselines.refuse_reason(partial) or "")
    errored = replace(results, run=replace(results.run, case_errors=3))
    assert "3 case(s) errored" in (baselines.refuse_reason(errored) or "")
    stopped = replace(results, run=replace(results.run, complete=False, incomplete_reason="budget"))
    assert "incomplete (budget)" in (baselines.refuse_reason(stopped) or "")


# --- rules ----------------------------------------------------------------------------------------


def test_rules_parse_and_point_the_way_the_metric_gets_worse():
    assert Rule.parse_option("acc_dis:-2%") == Rule("acc_dis", 0.02, True, -1, "command line")
    assert Rule.parse_option("diff_bias_amb:+0.02").absolute_margin(0.5) == 0.02
    assert Rule.parse_option("acc_dis:-2%").absolute_margin(0.9) == pytest.approx(0.018)
    rules = resolve_rules("kobbq", ["diff_bias_amb", "acc_amb"], {}, [Rule.parse_option("acc_amb:-0.05")])
    assert rules["diff_bias_amb"].margin == 0 and rules["acc_amb"].margin == 0.05
    with pytest.raises(BiascheckError, match=r"acc_dis:\+0.02 points the wrong way.*write acc_dis:-0.02"):
        resolve_rules("kobbq", [], {}, [Rule.parse_option("acc_dis:+0.02")])
    with pytest.raises(BiascheckError, match=r"diff_bias_amb:\+5%: a margin relative to a metric best at zero"):
        resolve_rules("kobbq", [], {}, [Rule.parse_option("diff_bias_amb:+5%")])
    with pytest.raises(BiascheckError, match="kobbq has no metric 'bias_gen'"):
        resolve_rules("kobbq", [], {}, [Rule.parse_option("bias_gen:+0.02")])
    for bad in ("diff_bias_amb", "diff_bias_amb:lots", "diff_bias_amb:nan", ":0.1"):
        with pytest.raises(BiascheckError):
            Rule.parse_option(bad)


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(["+", "-", ""]), st.floats(0, 10, allow_nan=False), st.booleans())
def test_rule_text_round_trips(sign, margin, percent):
    text = f"acc_dis:{sign}{margin!r}{'%' if percent else ''}"
    rule = Rule.parse_option(text)
    again = Rule.parse_option(rule.describe())
    assert (again.metric, again.relative, again.sign) == (rule.metric, rule.relative, rule.sign)
    assert again.margin == pytest.approx(rule.margin, rel=1e-5, abs=1e-12)


# --- comparisons ----------------------------------------------------------------------------------


def test_same_answers_compare_as_within_margin_with_no_flips(prepared, baseline_file):
    candidate = results_of(prepared, "stereotyped?p=0.2")
    comparison, every = compared(baselines.load(baseline_file), candidate)
    assert comparison["schema"] == "biascheck.comparison/2"
    assert comparison["flips"]["total"] == 0 and comparison["passed"] and not comparison["regressed"]
    assert comparison["flips"]["by_category"] == {} and comparison["flips"]["examples"] == [] and every == []
    verdicts = {r["verdict"] for r in comparison["results"]}
    assert verdicts <= {"within margin", "not compared"} and "within margin" in verdicts
    assert all(" within margin: " in r["explanation"] for r in comparison["results"] if r["verdict"] == "within margin")
    assert all(r["difference"] in (0, None) for r in comparison["results"])


def test_a_more_biased_model_regresses_and_the_flips_show_what_changed(prepared, baseline_file):
    candidate = results_of(prepared, "stereotyped?p=0.8")
    comparison, _ = compared(baselines.load(baseline_file), candidate, prompts={c.case_id: c.messages[-1].content for c in prepared.suite.cases})
    overall = {r["metric"]: r for r in comparison["results"] if r["scope"] == "overall"}
    assert overall["diff_bias_amb"]["verdict"] == "regressed" and comparison["regressed"] and not comparison["passed"]
    assert overall["diff_bias_amb"]["difference"] > 0.4 and overall["diff_bias_amb"]["p_adjusted"] < 0.05
    assert overall["acc_dis"]["mcnemar"]["worse"] > overall["acc_dis"]["mcnemar"]["better"]
    for r in comparison["results"]:
        if r["p_value"] is not None:
            assert r["p_value"] <= r["p_adjusted"] <= 1
    assert "regressed" in overall["diff_bias_amb"]["explanation"] and "\n" not in overall["diff_bias_amb"]["explanation"]
    # Common random numbers: p=0.8 answers biased wherever p=0.2 did, so every flip is toward the stereotype.
    flips = comparison["flips"]
    assert flips["total"] > 0 and set(flips["by_transition"]) <= {"unknown -> biased", "counter -> biased"}
    first = flips["examples"][0]
    by_id = {c["case_id"]: c for c in candidate["cases"]}
    assert first["candidate"] == "biased" and first["prompt"] == by_id[first["case_id"]]["prompt_id"] and first["answer"]
    assert first["options"] == by_id[first["case_id"]]["choices"]
    assert any("\uac00" <= ch <= "\ud7a3" for ch in first["prompt_text"])  # the Korean prompt text, as sent
    assert first["baseline_answer"] is None  # a baseline file keeps no replies


LATE = ("race_ethnicity_nationality", "ses")


def test_flips_of_the_regressed_categories_are_shown_however_they_sort(data_dir, tmp_path):
    """Issue 35's run: every category drifts a little toward the stereotype, two late in the
    alphabet a lot. The examples shown (fewer than the flips) cover every regressed category and
    direction, rather than fill up with the first categories in alphabetical order; the counts
    cover every category; every flip is in the list (and in flips.jsonl)."""
    from conftest import write_subset_suite

    # Templates enough that a category's check can resolve (two leave t with 1 df).
    folder = write_subset_suite(tmp_path / "kobbq-8", subset='templates_per_category = 8\nseed = 7\nchoice_orders = "cyclic"')
    prepared = PreparedSuite.of(load_suite(folder, data_dir=data_dir))
    baseline = baselines.from_results(simulated_results(prepared, "stereotyped?p=0.2", resamples=0))
    drift = results_of(prepared, "stereotyped?p=0.3", resamples=0)
    worse = results_of(prepared, "stereotyped?p=0.95", resamples=0)
    far = {c["case_id"]: c for c in worse["cases"] if c["category"] in LATE}
    candidate = {**drift, "cases": [far.get(c["case_id"], c) for c in drift["cases"]]}
    run = RunRecord.from_json(candidate)
    comparison, every = compared(baseline, candidate, settings_from(run, flip_limit=30, n_boot=500))
    regressed = {r["scope"] for r in comparison["results"] if r["verdict"] == "regressed"}
    assert set(LATE) <= regressed, regressed
    flips = comparison["flips"]
    assert flips["total"] > 30 and flips["shown"] == len(flips["examples"]) == 30 and flips["limit"] == 30
    # Counts: per category and direction, summing to the totals.
    assert sum(n for counts in flips["by_category"].values() for n in counts.values()) == flips["total"]
    for transition, n in flips["by_transition"].items():
        assert sum(counts.get(transition, 0) for counts in flips["by_category"].values()) == n
    assert list(flips["by_category"]) == sorted(flips["by_category"]) and set(LATE) <= set(flips["by_category"])
    # Every regressed category's directions toward the stereotype are shown.
    shown = {(f["category"], f"{f['baseline']} -> {f['candidate']}") for f in flips["examples"]}
    scopes = set(flips["by_category"]) if "overall" in regressed else regressed
    wanted = {(c, t) for c in scopes for t in flips["by_category"].get(c, {}) if t.endswith("-> biased")}
    assert wanted and wanted <= shown, wanted - shown
    # Every flip, once.
    assert len(every) == flips["total"] == len({f["case_id"] for f in every})
    assert {f["case_id"] for f in flips["examples"]} <= {f["case_id"] for f in every}


def test_rules_from_the_command_line_replace_the_manifests(prepared, baseline_file):
    candidate = results_of(prepared, "stereotyped?p=0.8")
    loose = settings_from(RunRecord.from_json(candidate), [Rule.parse_option("diff_bias_amb:+0.9")])
    comparison, _ = compared(baselines.load(baseline_file), candidate, loose)
    check = next(r for r in comparison["results"] if r["scope"] == "overall" and r["metric"] == "diff_bias_amb")
    assert check["rule"] == "diff_bias_amb:+0.9" and check["verdict"] != "regressed"


def test_fingerprint_mismatch_says_what_differs_unless_allowed(prepared, baseline_file, data_dir, tmp_path):
    from conftest import write_subset_suite

    other = write_subset_suite(
        tmp_path / "other", subset='templates_per_category = 3\nseed = 7\nchoice_orders = "cyclic"', prompts='from_data = "prompts"\nuse = ["1", "2"]'
    )
    candidate = results_of(PreparedSuite.of(load_suite(other, data_dir=data_dir)), "stereotyped?p=0.2")
    baseline = baselines.load(baseline_file)
    with pytest.raises(BiascheckError) as info:
        compared(baseline, candidate)
    message = str(info.value)
    assert message.startswith("b.json: suite.fingerprint: was made with other prompts") and "subset of cases" in message
    assert "data" not in message.split(";")[0].replace("metrics_version", "")
    assert "--biascheck-allow-fingerprint-mismatch" in message
    allowed, _ = compared(baseline, candidate, settings_from(RunRecord.from_json(candidate), allow_fingerprint_mismatch=True))
    assert allowed["fingerprint"] == {"equal": False, "differences": ["prompts", "subset"], "allowed": True}
    assert 0 < allowed["cases"]["common"] < allowed["cases"]["candidate"]
    assert any("not in the baseline" in w for w in allowed["warnings"])


def test_a_partial_candidate_is_compared_on_the_cases_it_ran(prepared, baseline_file):
    candidate = results_of(prepared, "stereotyped?p=0.2")
    candidate["cases"] = [c for c in candidate["cases"] if c["category"] == "age"]
    comparison, _ = compared(baselines.load(baseline_file), candidate)
    assert {r["scope"] for r in comparison["results"]} == {"overall", "age"}
    assert comparison["cases"]["common"] == len(candidate["cases"])
    assert any("were not run" in w for w in comparison["warnings"])


def test_another_suites_baseline_is_refused(prepared, baseline_file):
    candidate = results_of(prepared, "fair")
    candidate["suite"]["name"] = "kobbq-quick"
    with pytest.raises(BiascheckError, match="is a baseline of suite 'kobbq'"):
        compared(baselines.load(baseline_file), candidate)


# --- invariants without data ---------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=examples(150), deadline=None)
@given(document=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "digest"), json_values, max_size=6))
def test_the_baseline_layout_is_json_that_reads_back_unchanged(document):
    text = baselines.document_text(document)
    loaded = json.loads(text)
    assert loaded.pop("digest") == baselines._digest(document)
    assert loaded == document


@settings(max_examples=examples(300), deadline=None)
@given(
    worsening=st.floats(-1, 1),
    template_se=st.floats(0, 0.5) | st.just(float("nan")),
    case_se=st.floats(0, 0.5),
    templates=st.integers(1, 40),
    margin=st.floats(0, 0.2),
    family=st.integers(1, 60),
    worse=st.integers(0, 30),
    better=st.integers(0, 30),
)
def test_every_verdict_agrees_with_the_interval_printed_beside_it(worsening, template_se, case_se, templates, margin, family, worse, better):
    """Read back from the JSON a reader gets: regressed means worsening_ci lies beyond the margin,
    within margin inside it, improved below minus it, inconclusive across it; the adjusted p agrees."""
    from biascheck.evaluation.regression import CompareSettings, _Check, _check_json, _decide, _spreads
    from biascheck.metrics.paired import PairedDifference, mcnemar_p_value

    def paired(se):
        return PairedDifference(0.5, 0.5 + worsening, worsening, (math.nan, math.nan), worsening, (math.nan, math.nan), se, 2000)

    sign = {"worse": worse, "better": better, "p_value": mcnemar_p_value(worse, better), "p_value_better": mcnemar_p_value(better, worse)}
    check = _Check(
        "acc_amb",
        "overall",
        Rule("acc_amb", margin),
        "lower",
        margin,
        (0.5, (0, 1), 10),
        (0.5 + worsening, (0, 1), 10),
        paired(case_se),
        True,
        _spreads(paired(template_se), paired(case_se), templates, identical=False),
        sign,
        extra={"cases": 100},
    )
    _decide(check, CompareSettings(rules={}), family)
    shown = _check_json(check)
    lo, hi = shown["worsening_ci"]
    assert lo <= worsening <= hi
    expected = "regressed" if lo > margin else "improved" if hi < -margin else "within margin" if hi <= margin else "inconclusive"
    assert shown["verdict"] == expected
    assert (shown["verdict"] == "regressed") == (shown["p_adjusted"] < 0.05) or abs(lo - margin) < 1e-9
    digits = re.search(r"\[[+-]?\d+\.(\d+),", shown["explanation"]).group(1)
    assert f"{fmt.signed(lo, len(digits))}, {fmt.signed(hi, len(digits))}]" in shown["explanation"]  # the printed interval is this one
    if shown["verdict"] == "inconclusive":
        assert check.mde >= margin
    assert "\n" not in shown["explanation"] and shown["explanation"].startswith("acc_amb (overall) ")


def test_an_errored_or_incomplete_candidate_never_passes_a_comparison(prepared, baseline_file):
    candidate = results_of(prepared, "stereotyped?p=0.2")
    for case in candidate["cases"][::3]:
        case["outcome"] = "error"
    comparison, _ = compared(baselines.load(baseline_file), candidate)
    assert not comparison["passed"] and comparison["candidate_errors"] == len(candidate["cases"][::3])
    assert any("errored in the candidate run" in w for w in comparison["warnings"])
    stopped = results_of(prepared, "stereotyped?p=0.2")
    stopped["run"] = {**stopped["run"], "complete": False, "incomplete_reason": "budget exhausted"}
    comparison, _ = compared(baselines.load(baseline_file), stopped)
    assert not comparison["passed"] and any("incomplete (budget exhausted)" in w for w in comparison["warnings"])


def test_no_shared_case_is_an_error_not_a_pass(prepared, baseline_file):
    candidate = results_of(prepared, "fair")
    for case in candidate["cases"]:
        case["case_id"] += "-renamed"
    with pytest.raises(BiascheckError, match="cases: none of the run's .* units is in the baseline"):
        compared(baselines.load(baseline_file), candidate, settings_from(RunRecord.from_json(candidate), allow_fingerprint_mismatch=True))


def test_a_few_changed_answers_in_a_category_are_not_a_regression(prepared, baseline_file):
    """Two ambiguous answers in one category turned biased: the bootstrap alone would call it."""
    candidate = results_of(prepared, "stereotyped?p=0.2")
    base = baselines.load(baseline_file)
    moved = [c for c in candidate["cases"] if c["category"] == "age" and c["context_type"] == "amb" and c["outcome"] == "unknown"][:2]
    for case in moved:
        case["outcome"] = "biased"
    comparison, _ = compared(base, candidate)
    check = next(r for r in comparison["results"] if r["scope"] == "age" and r["metric"] == "diff_bias_amb")
    assert check["mcnemar"] == {"worse": 2, "better": 0, "p_value": 0.25, "p_value_better": 1.0}
    assert check["verdict"] != "regressed" and check["p_value"] >= 0.25


def test_non_finite_numbers_and_trailing_garbage_are_one_line_errors(baseline_file, tmp_path):
    text = baseline_file.read_text("utf-8")
    huge = tmp_path / "huge.json"
    huge.write_text(text.replace('"confidence": 0.95', '"confidence": 1e400'), "utf-8")
    assert "1e400, which is not a JSON number" in _error(huge)
    garbage = tmp_path / "garbage.json"
    garbage.write_text(text + "<<<<<<< HEAD\n", "utf-8")
    assert "is not valid JSON (Extra data" in _error(garbage)


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_case_scores_move_each_metric_the_way_they_say(data):
    """Moving one case to a cell with a higher score (same context, both in the denominator)
    never lowers the metric: so the sign test counts worse and better moves correctly."""
    import numpy as np

    from biascheck.benchmarks.qa.metrics import CASE_SCORES, COUNT_FIELDS, QA_METRICS

    name = data.draw(st.sampled_from(sorted(CASE_SCORES)))
    scores = CASE_SCORES[name]
    counts = np.array(data.draw(st.lists(st.integers(1, 20), min_size=len(COUNT_FIELDS), max_size=len(COUNT_FIELDS))), dtype=float)
    group = [-1 if k < 3 else (k - 3) // 3 for k in range(len(COUNT_FIELDS))]  # status cells fit any context
    moves = [
        (i, j)
        for i in range(len(COUNT_FIELDS))
        for j in range(len(COUNT_FIELDS))
        if not np.isnan(scores[i]) and not np.isnan(scores[j]) and scores[i] < scores[j] and (group[i] == group[j] or -1 in (group[i], group[j]))
    ]
    i, j = data.draw(st.sampled_from(moves))
    moved = counts.copy()
    moved[i] -= 1
    moved[j] += 1
    before, after = float(QA_METRICS[name].fn(counts)), float(QA_METRICS[name].fn(moved))
    assert after >= before - 1e-12


def test_a_bbg_baseline_made_before_the_scoring_part_compares_only_with_a_run_scored_as_it_was():
    from biascheck.evaluation.baseline import fingerprint_differences

    before = {"data": "d", "prompts": "p", "subset": "s", "metrics_version": 3, "judge": "j"}
    # Every BBG run then left unscorable pairs out: the same as "exclude", not as "unknown".
    assert fingerprint_differences(before, {**before, "scoring": "unscorable=exclude"}) == []
    assert fingerprint_differences(before, {**before, "scoring": "unscorable=unknown"}) == ["scoring"]
    assert fingerprint_differences({**before, "scoring": "unscorable=unknown"}, {**before, "scoring": "unscorable=exclude"}) == ["scoring"]
    assert fingerprint_differences(before, before) == []  # benchmarks with no scoring part


def test_huge_integers_and_deep_nesting_are_one_line_errors(baseline_file, prepared, tmp_path, capsys):
    # Issue 23, item 9: a 5,000-digit number raised ValueError (Python's 4,300-digit limit).
    from biascheck.cli import main

    text = baseline_file.read_text("utf-8")
    huge = tmp_path / "huge-int.json"
    huge.write_text(text.replace('"confidence": 0.95', '"confidence": 1' + "0" * 5000), "utf-8")
    message = _error(huge)
    assert "holds a number of more than 4300 digits" in message, message
    # Found by fuzzing: a schema message quotes the value whole, here 5,000 characters.
    long_value = tmp_path / "long-value.json"
    long_value.write_text(text.replace('"schema": "biascheck.baseline/1"', '"schema": "' + "a" * 5000 + '"'), "utf-8")
    assert " characters ...] " in _error(long_value) and len(_error(long_value)) < 1000
    # The results a diff reads, the same way.
    results = results_of(prepared, "stereotyped?p=0.2", resamples=0)
    for name, body in (
        ("huge.json", '{"huge": ' + "9" * 5000 + ", " + json.dumps(results)[1:]),
        ("deep.json", "[" * 100_000 + "]" * 100_000),
    ):
        (tmp_path / name).write_text(body, "utf-8")
        assert main(["diff", str(baseline_file), str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"biascheck: {tmp_path / name}: is not a results.json"), err


def test_a_diff_reads_results_without_the_optional_manifest(baseline_file, prepared, tmp_path, capsys):
    # Found by fuzzing: suite.manifest is optional in results.json, but its margins were named by it (KeyError).
    from biascheck.cli import main

    results = results_of(prepared, "stereotyped?p=0.2", resamples=0)
    del results["suite"]["manifest"]
    (tmp_path / "results.json").write_text(json.dumps(results), "utf-8")
    assert main(["diff", str(baseline_file), str(tmp_path / "results.json")]) in (0, 1), capsys.readouterr().err


def test_the_issue_25_comparison_prints_no_verdict_its_interval_contradicts(tmp_path, data_dir, capsys):
    """KoBBQ, 3 templates per category, prompt 1 (864 cases): baseline sim/fair, candidate
    sim/stereotyped?p=0.3. The gate printed 20 of 52 checks as inconclusive beside an interval wholly
    beyond the margin. Now every printed interval decides its verdict, and the run still fails."""
    from biascheck.cli import main

    from conftest import write_subset_suite

    folder = write_subset_suite(tmp_path / "kobbq-3", subset="templates_per_category = 3", prompts='from_data = "prompts"\nuse = ["1"]')
    prepared = PreparedSuite.of(load_suite(folder, data_dir=data_dir))
    assert len(prepared.suite.cases) == 864
    baseline = tmp_path / "baseline.json"
    baselines.write(baselines.from_results(simulated_results(prepared, "fair"), git="0" * 40), baseline)
    results = tmp_path / "results.json"
    results.write_text(json.dumps(results_of(prepared, "stereotyped?p=0.3")), "utf-8")

    assert main(["diff", str(baseline), str(results), "--report", str(tmp_path / "report")]) == 1
    printed = capsys.readouterr().out
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text("utf-8"))
    assert comparison["settings"]["family_size"] == len(comparison["results"]) == 52
    verdicts = {r["verdict"] for r in comparison["results"]}
    assert "regressed" in verdicts and comparison["regressed"] and not comparison["passed"]
    interval = re.compile(
        r"\[([+-]\d+\.\d+), ([+-]\d+\.\d+)\] (?:\([^)]*\) )?(lies beyond|lies below|lies within|straddles) the (?:negative of the )?margin (\d+\.\d+)"
    )
    for r in comparison["results"]:
        lo, hi = r["worsening_ci"]
        margin = r["margin"]
        expected = "regressed" if lo > margin else "improved" if hi < -margin else "within margin" if hi <= margin else "inconclusive"
        assert r["verdict"] == expected, r["explanation"]
        # The numbers in the sentence a reader sees say the same.
        lo_text, hi_text, relation, margin_text = interval.search(r["explanation"]).groups()
        lo_shown, hi_shown, margin_shown = float(lo_text), float(hi_text), float(margin_text)
        assert lo_shown <= r["worsening"] <= hi_shown, r["explanation"]
        assert {"regressed": "lies beyond", "within margin": "lies within", "inconclusive": "straddles", "improved": "lies below"}[
            r["verdict"]
        ] == relation
        holds = {
            "lies beyond": lo_shown > margin_shown,
            "lies within": hi_shown <= margin_shown,
            "straddles": lo_shown <= margin_shown < hi_shown,
            "lies below": hi_shown < -margin_shown,
        }
        assert holds[relation], r["explanation"]
    # The check the issue quoted: 5 changed cases in a category of 3 templates cannot show a worsening.
    age = next(r for r in comparison["results"] if (r["metric"], r["scope"]) == ("diff_bias_dis", "age"))
    assert age["verdict"] == "inconclusive" and age["interval"]["spread"] == "templates" and age["interval"]["df"] == 2
    assert "diff_bias_amb" in printed and "worsening [bounds]" in printed


# --- flips: counts, examples and the whole list, for any outcomes ----------------------------------

OUTCOMES = ("unknown", "biased", "counter", "ooc")


def _units(ids: list[str], categories: list[str], outcomes: list[str]):
    import numpy as np

    from biascheck.evaluation.baseline import ComparisonUnits

    n = len(ids)
    # One metric, "share of biased answers", lower is better: a unit's contribution is 1 when it answered biased.
    scores = {"biased_share": np.array([1.0 if o == "biased" else 0.0 for o in outcomes])}
    return ComparisonUnits(ids, categories, categories, np.zeros((n, 1)), outcomes, ["amb"] * n, scores)


@settings(max_examples=examples(150), deadline=None)
@given(
    rows=st.lists(st.tuples(st.sampled_from(["a", "b", "y", "z"]), st.sampled_from(OUTCOMES), st.sampled_from(OUTCOMES)), min_size=1, max_size=80),
    regressed=st.sets(st.sampled_from(["overall", "a", "b", "y", "z"])),
    limit=st.integers(0, 40),
)
def test_flip_counts_examples_and_list_agree_for_any_outcomes(rows, regressed, limit):
    from types import SimpleNamespace

    import numpy as np

    from biascheck.evaluation.regression import _flips
    from biascheck.records.run import CaseRecord

    ids = [f"case-{k}" for k in range(len(rows))]
    categories = [r[0] for r in rows]
    base, cand = _units(ids, categories, [r[1] for r in rows]), _units(ids, categories, [r[2] for r in rows])
    checks = [
        SimpleNamespace(
            metric="biased_share",
            scope=scope,
            better="lower",
            verdict="regressed" if scope in regressed else "within margin",
            paired=SimpleNamespace(candidate=0.0),
        )
        for scope in ["overall", "a", "b", "y", "z"]
    ]
    cases = [
        CaseRecord(uid, uid, category, category, "1", f"reply {uid}", outcome, None) for uid, category, (_, _, outcome) in zip(ids, categories, rows)
    ]
    index = np.arange(len(ids), dtype=np.int64)
    flips, every = _flips(base, cand, index, index, checks, cases, None, None, limit)

    changed = {uid for uid, (_, b, c) in zip(ids, rows) if b != c}
    assert all(f["answer"] == f"reply {f['case_id']}" and f["prompt"] == "1" for f in every)
    assert {f["case_id"] for f in every} == changed and len(every) == len(changed) == flips["total"]
    assert sum(n for counts in flips["by_category"].values() for n in counts.values()) == flips["total"] == sum(flips["by_transition"].values())
    for transition, n in flips["by_transition"].items():
        assert sum(counts.get(transition, 0) for counts in flips["by_category"].values()) == n
    shown = [f["case_id"] for f in flips["examples"]]
    assert len(shown) == len(set(shown)) == flips["shown"] == min(limit, len(changed)) and set(shown) <= changed
    # Every regressed (category, direction toward worse) with a flip is shown, when the limit allows one each.
    wanted = {
        (f["category"], f"{f['baseline']} -> {f['candidate']}")
        for f in every
        if f["candidate"] == "biased" and ("overall" in regressed or f["category"] in regressed)
    }
    pairs = {(f["category"], f"{f['baseline']} -> {f['candidate']}") for f in flips["examples"]}
    if limit >= len(wanted):
        assert wanted <= pairs
    else:  # all shown examples are of what regressed, before anything else
        assert pairs <= wanted
