"""The second half of the pipeline carries typed records (issue 35, part 1): a run's results, its
comparison with a baseline, the baseline and the pytest-xdist payload are records in memory, and
JSON only at the edges (results.json, comparison.json, flips.jsonl, a baseline file, a worker's
output), each the record's serialization."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from property_examples import examples

from biascheck.evaluation import baseline as baselines
from biascheck.evaluation.regression import compare, settings_from
from biascheck.orchestration import Checked
from biascheck.records.baseline import BaselineRecord
from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path):
    """A tiny KoBBQ answered by a nearly fair model and by a stereotyped one, as the RunResults of
    :func:`biascheck.run` (real runs through the simulator)."""
    from biascheck import ModelConfig, RunConfig, load_suite, run

    from conftest import write_subset_suite

    tmp = tmp_path_factory.mktemp("pipeline")
    folder = write_subset_suite(tmp / "kobbq-tiny", subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"')
    suite = load_suite(folder, data_dir=data_dir)
    store = tmp / "store.sqlite"
    before = run([(suite, suite.cases)], RunConfig(model=ModelConfig("sim/stereotyped?p=0.01"), store_path=store, data_dir=data_dir))
    after = run([(suite, suite.cases)], RunConfig(model=ModelConfig("sim/stereotyped?p=0.6"), store_path=store, data_dir=data_dir))
    return before, after


def test_build_results_gives_records_and_the_report_prompts_beside_them(two_runs):
    from biascheck.reporting.results import build_results, validate_results

    runs, prompts = build_results(two_runs[0])
    (run,) = runs
    assert isinstance(run, RunRecord) and run.suite.name == "kobbq"
    document = run.to_json()
    validate_results(document)  # its serialization is a valid results.json, with no prompt in it
    assert "report_prompts" not in document and set(prompts) == {"kobbq"}
    shown = prompts["kobbq"]
    assert shown and set(shown) <= {case.case_id for case in run.cases}
    assert all(role in ("system", "user", "assistant") and content for messages in shown.values() for role, content in messages)


def test_mark_deselected_returns_new_records_and_leaves_the_run_it_was_given(two_runs):
    from biascheck.reporting.results import build_results, mark_deselected

    (run,), _ = build_results(two_runs[1])
    assert run.failed_checks and not run.passed
    keep = {(v.scope, v.metric) for v in run.verdicts if not v.failed}
    (marked,) = mark_deselected([run], {"kobbq": keep})
    # The run given is unchanged: records are immutable, and the marked one is a new record.
    assert run.failed_checks and all(v.gated for v in run.verdicts) and not run.passed
    assert marked is not run and not marked.failed_checks and marked.passed is (run.run.complete and not run.run.case_errors)
    assert [v.gated for v in marked.verdicts] == [(v.scope, v.metric) in keep for v in run.verdicts]
    assert marked.to_json()["verdicts"][0].get("gated", True) is ((run.verdicts[0].scope, run.verdicts[0].metric) in keep)
    (same,) = mark_deselected([run], {"kobbq": {(v.scope, v.metric) for v in run.verdicts}})
    assert same == run  # every check selected: nothing to mark


def test_compare_takes_records_and_gives_a_comparison_with_every_flip(two_runs, tmp_path):
    from biascheck.reporting.results import build_results

    ((before,), _), ((after,), _) = build_results(two_runs[0]), build_results(two_runs[1])
    baseline = baselines.from_results(before, git="0" * 40)
    assert isinstance(baseline, BaselineRecord) and len(baseline.rows) == len(before.cases)
    comparison = compare(baseline, after, settings_from(after, flip_limit=5), baseline_path="b.json")
    assert isinstance(comparison, Comparison) and comparison.regressions and not comparison.passed
    flips = comparison.flips
    assert flips.every is not None and len(flips.every) == flips.total > flips.shown == len(flips.examples) == 5
    assert {f.case_id for f in flips.examples} <= {f.case_id for f in flips.every} and flips.file is None
    # A baseline file is the record's serialization, and loads back as the same record.
    path = tmp_path / "release.json"
    baselines.write(baseline, path)
    loaded = baselines.load(path)
    assert isinstance(loaded, BaselineRecord) and loaded.rows == baseline.rows and loaded.metrics == baseline.metrics
    assert baselines.dumps(loaded) == path.read_text("utf-8")
    assert compare(loaded, after, settings_from(after, flip_limit=5), baseline_path="b.json") == comparison


def test_the_report_folder_is_the_records_serialization(two_runs, tmp_path):
    from biascheck.reporting.results import build_results
    from biascheck.reporting.write import write_reports

    ((before,), _), ((after,), prompts) = build_results(two_runs[0]), build_results(two_runs[1])
    comparison = compare(baselines.from_results(before), after, settings_from(after, flip_limit=5), baseline_path="b.json")
    write_reports([after], tmp_path, {"kobbq": comparison}, prompts)
    assert json.loads((tmp_path / "results.json").read_text("utf-8")) == after.to_json()
    written = json.loads((tmp_path / "comparison.json").read_text("utf-8"))
    assert written == replace(comparison, flips=replace(comparison.flips, file="flips.jsonl")).to_json()
    lines = (tmp_path / "flips.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [flip.to_json() for flip in comparison.flips.every or ()]
    # The page shows the prompts it was given; results.json keeps none of them.
    some_prompt = next(content for messages in prompts["kobbq"].values() for role, content in messages if role == "user")
    assert some_prompt.split("\n")[0][:20] in (tmp_path / "report.html").read_text("utf-8")


def test_the_xdist_payload_carries_the_records_prompts_and_every_flip(two_runs):
    from biascheck.reporting.results import build_results

    ((before,), _), ((after,), prompts) = build_results(two_runs[0]), build_results(two_runs[1])
    comparison = compare(baselines.from_results(before), after, settings_from(after), baseline_path="b.json")
    checked = Checked([after], {"kobbq": comparison}, prompts)
    payload = json.loads(json.dumps(checked.to_json()))  # what crosses the process boundary is JSON
    received = Checked.from_json(payload)
    assert received is not None
    assert received.runs == checked.runs and received.comparisons == checked.comparisons and received.prompts == checked.prompts
    assert [r.to_json() for r in received.runs] == [after.to_json()]
    assert Checked.from_json({}) is None  # a worker that ran nothing
    # Two workers' views of one run: the one that made more calls, with both counters added; neither changes.
    other = Checked([replace(after, run=replace(after.run, calls=1, retries=2))], {"kobbq": comparison}, prompts)
    merged = checked.merged(other)
    assert merged.runs[0].run.calls == after.run.calls + 1 and merged.runs[0].run.retries == after.run.retries + 2
    assert checked.runs == [after] and other.runs[0].run.calls == 1


def _flip_lines():
    from hypothesis import strategies as st
    from test_records import flip

    return st.lists(flip, max_size=4)


@pytest.mark.usefixtures("data_dir")
def test_any_comparison_crosses_the_xdist_boundary_unchanged(two_runs):
    """For any comparison (test_records' documents of schema /2) and any flips beside it, the
    worker's payload reads back into the same records, every flip included."""
    from hypothesis import HealthCheck, given, settings
    from test_records import comparison_documents

    from biascheck.reporting.results import build_results

    (run,), prompts = build_results(two_runs[0])

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(comparison_documents, _flip_lines())
    def crosses(document, lines):
        comparison = Comparison.from_json(document, every_flip=lines)
        checked = Checked([run], {"kobbq": comparison}, prompts)
        received = Checked.from_json(json.loads(json.dumps(checked.to_json())))
        assert received is not None and received.comparisons == checked.comparisons
        assert [f.to_json() for f in received.comparisons["kobbq"].flips.every or ()] == lines

    crosses()
