"""Sharded runs (``--biascheck-shard K/N``): disjoint parts of a suite's cases that together cover
it, each answered by its own job into its own store; the stores merged, a whole run on the merged
store makes no call and judges exactly what an unsharded run judges."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biascheck.core.errors import BiascheckError
from biascheck.evaluation.baseline import refuse_reason
from biascheck.execution.store import merge_stores
from biascheck.records.run import RunRecord
from biascheck.suite import Shard, load_suite

from conftest import SUITES


@pytest.mark.parametrize("text", ["0/4", "5/4", "a/b", "4", "2/", "/2", "-1/2", ""])
def test_a_shard_that_is_not_k_of_n_is_a_one_line_error(text):
    with pytest.raises(BiascheckError) as error:
        Shard.parse(text)
    assert str(error.value) == f"--biascheck-shard: {text!r} is not a shard; give K/N with 1 <= K <= N, e.g. 2/4 for the second of four"


@given(clusters=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=60), count=st.integers(1, 8))
def test_the_shards_of_a_suite_never_overlap_and_together_cover_it(clusters, count):
    cases = [SimpleNamespace(cluster=cluster) for cluster in clusters]
    owners = [[k for k in range(1, count + 1) if Shard(k, count).holds(case)] for case in cases]
    assert all(len(owner) == 1 for owner in owners)
    # One cluster, one shard: the cases of an item (an HBB instance) are never split.
    by_cluster = {}
    for case, (owner,) in zip(cases, owners):
        assert by_cluster.setdefault(case.cluster, owner) == owner
    assert str(Shard.parse(f"{count}/{count}")) == f"{count}/{count}"


def test_four_shards_of_many_clusters_are_near_even():
    # Clusters are hashed to shards (sha256): 2,000 template-like names split close to a quarter each.
    cases = [SimpleNamespace(cluster=f"{category}-{template:03d}") for category in ("age", "religion", "ses", "x") for template in range(500)]
    sizes = [sum(Shard(k, 4).holds(case) for case in cases) for k in range(1, 5)]
    assert sum(sizes) == len(cases) and all(0.2 * len(cases) < size < 0.3 * len(cases) for size in sizes), sizes


@pytest.mark.slow  # the whole KoBBQ (34,200 cases); the default run checks the same split on synthetic clusters above
def test_four_shards_of_kobbq_are_near_even(data_dir):
    suite = load_suite(SUITES / "kobbq", data_dir=data_dir)
    sizes = [sum(Shard(k, 4).holds(case) for case in suite.cases) for k in range(1, 5)]
    assert sum(sizes) == len(suite.cases) == 34_200
    assert all(0.2 * len(suite.cases) < size < 0.3 * len(suite.cases) for size in sizes), sizes


def test_four_sharded_jobs_merged_judge_what_one_unsharded_run_judges(run_biascheck, tiny_kobbq, tmp_path):
    model = "sim/stereotyped?p=0.3&seed=3"
    parts = []
    for k in range(1, 5):
        part = run_biascheck(tiny_kobbq, model, "--biascheck-shard", f"{k}/4", store_path=tmp_path / f"shard-{k}.sqlite", report=f"shard-{k}")
        assert part.ret == 0, part.output
        results = part.results()
        assert results["run"]["shard"] == f"{k}/4" and results["verdicts"] == []
        assert f"shard {k}/4: answers for a merged run, no verdicts" in (part.report_dir / "report.md").read_text("utf-8")
        assert (refuse_reason(RunRecord.from_json(results)) or "").startswith(f"it is shard {k}/4 of the suite")
        assert "metrics::" not in part.output and "deselected" in part.output
        parts.append(results)
    cases = [case["case_id"] for results in parts for case in results["cases"]]
    assert len(cases) == len(set(cases)) == parts[0]["suite"]["cases_total"]  # disjoint, and the whole suite
    assert sum(results["run"]["calls"] for results in parts) == len(cases)

    merge_stores(tmp_path / "merged.sqlite", [tmp_path / f"shard-{k}.sqlite" for k in range(1, 5)])
    merged = run_biascheck(tiny_kobbq, model, store_path=tmp_path / "merged.sqlite", report="merged")
    whole = run_biascheck(tiny_kobbq, model, store_path=tmp_path / "whole.sqlite", report="whole")
    assert merged.results()["run"]["calls"] == 0 and whole.results()["run"]["calls"] == len(cases)
    assert merged.ret == whole.ret
    for key in ("metrics", "verdicts", "cases"):
        assert json.dumps(merged.results()[key], sort_keys=True) == json.dumps(whole.results()[key], sort_keys=True), key


def test_a_shard_cannot_record_a_baseline(run_biascheck, tiny_kobbq):
    run = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-shard", "1/2", "--biascheck-update-baseline")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "--biascheck-update-baseline: a shard (1/2) is part of the suite; record from the run on the merged store" in run.output
