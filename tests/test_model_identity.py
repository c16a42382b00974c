"""Which model a run tested (issue 12, part 1): the revision the user names is part of every store
key, and what the provider says it served (its reply's ``model`` and ``system_fingerprint``) is
recorded in the store, the results and the baseline, with a warning when it changes within a run or
differs from the baseline's."""

from __future__ import annotations

import pytest

from biascheck.evaluation.regression import compare, settings_from
from biascheck.execution.llm import ModelConfig
from biascheck.execution.store import ResponseStore, request_key
from biascheck.records.run import RunRecord
from biascheck.reporting.results import build_results, render_markdown, served_warning
from biascheck.session import RunConfig, run, served_by

from loopback import chat_answer, loopback_server, send_json


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")


def _server(served: list[str], fingerprint: str | None = "fp_1"):
    """A loopback server answering "A"; request n says it was served by served[n % len(served)]."""

    def serve(handler, n, body):
        answer = chat_answer(body)
        answer["model"] = served[n % len(served)]
        if fingerprint:
            answer["system_fingerprint"] = fingerprint
        send_json(handler, 200, answer)

    return loopback_server(serve)


def _selection(tiny_kobbq, data_dir, n: int | None = 6):
    """The first ``n`` cases of the tiny suite (all with None: a baseline covers the whole suite)."""
    from biascheck.suite import load_suite

    suite = load_suite(tiny_kobbq, data_dir=data_dir)
    return [(suite, suite.cases[:n])]


def test_a_revision_is_part_of_every_key_and_absent_keeps_the_old_keys():
    messages = [{"role": "user", "content": "Q?"}]
    unnamed = request_key("hosted_vllm/m", "http://h/v1", messages, {})
    assert request_key("hosted_vllm/m", "http://h/v1", messages, {}, 0, None) == unnamed  # stores of earlier runs still answer
    assert (
        len(
            {
                unnamed,
                request_key("hosted_vllm/m", "http://h/v1", messages, {}, 0, "v1"),
                request_key("hosted_vllm/m", "http://h/v1", messages, {}, 0, "v2"),
            }
        )
        == 3
    )


def test_a_redeployed_model_under_a_new_revision_is_called_again(tiny_kobbq, data_dir, tmp_path):
    # The repro: one name, one port, another model behind it. Without a revision the second
    # run is answered from the store; with one it calls the model that is served now.
    store = tmp_path / "store.sqlite"
    with _server(["fair-2024-01-01"]) as (api_base, arrivals):

        def once(revision):
            model = ModelConfig("hosted_vllm/my-model", api_base=api_base, revision=revision)
            return run(_selection(tiny_kobbq, data_dir), RunConfig(model=model, store_path=store))

        first, same_name, new_revision = once("v1"), once("v1"), once("v2")
    assert (first.stats.calls, same_name.stats.calls, new_revision.stats.calls) == (6, 0, 6)
    assert len(arrivals) == 12


def test_what_the_provider_served_is_stored_and_recorded(tiny_kobbq, data_dir, tmp_path):
    with _server(["snap-2024-07-18"], "fp_abc") as (api_base, _):
        model = ModelConfig("openai/my-model", api_base=api_base, revision="release-7")
        result = run(_selection(tiny_kobbq, data_dir), RunConfig(model=model, store_path=tmp_path / "store.sqlite"))
    document = build_results(result)[0][0].to_json()
    assert document["model"]["revision"] == "release-7"
    assert document["model"]["served"] == {"models": {"snap-2024-07-18": 6}, "system_fingerprints": {"fp_abc": 6}}
    assert served_warning(RunRecord.from_json(document)) is None
    with ResponseStore(tmp_path / "store.sqlite") as store:
        stored = store.get_many(_keys(result))
    assert {(s.served_model, s.system_fingerprint) for s in stored.values()} == {("snap-2024-07-18", "fp_abc")}
    # A re-run from the store reports the same: what was served is kept with each answer.
    again = run(_selection(tiny_kobbq, data_dir), RunConfig(model=model, store_path=tmp_path / "store.sqlite"))
    assert again.stats.calls == 0 and build_results(again)[0][0].to_json()["model"]["served"] == document["model"]["served"]


def _keys(result):
    from biascheck.session import effective_params

    suite_result = result.suites[0]
    model = result.config.model
    params = effective_params(suite_result.suite, model)
    return [
        request_key(model.model, model.endpoint, messages, request_params, sample, model.revision)
        for case in suite_result.cases
        for messages, request_params, sample in suite_result.suite.benchmark.requests(case, params, None)
    ]


def test_a_model_that_changes_within_a_run_is_warned_about(tiny_kobbq, data_dir, tmp_path):
    with _server(["snap-a", "snap-b"]) as (api_base, _):
        model = ModelConfig("openai/my-model", api_base=api_base)
        result = run(_selection(tiny_kobbq, data_dir), RunConfig(model=model, store_path=tmp_path / "store.sqlite", concurrency=1))
    document = build_results(result)[0][0].to_json()
    assert document["model"]["served"]["models"] == {"snap-a": 3, "snap-b": 3}
    warning = "the provider reported 2 served models (snap-a, snap-b) within this run"
    record = RunRecord.from_json(document)
    assert served_warning(record) == warning
    assert f"WARNING: {warning}" in render_markdown(record)


def test_served_by_counts_only_what_was_said():
    from biascheck.core.records import Response

    responses = [
        Response("A", served_model="m1", system_fingerprint="f"),
        Response("A", served_model="m1"),
        Response(None, error="boom"),
        Response("B"),
    ]
    assert served_by(responses) == {"models": {"m1": 2}, "system_fingerprints": {"f": 1}}
    assert served_by([Response("A")]) == {}


def test_a_comparison_warns_when_the_served_model_differs_or_the_revision_is_the_same(tiny_kobbq, data_dir, tmp_path):
    from biascheck.evaluation import baseline as baselines

    documents = []
    for served, revision in ((["snap-old"], "v1"), (["snap-new"], "v1")):
        with _server(served) as (api_base, _):
            model = ModelConfig("openai/my-model", api_base=api_base, revision=revision)
            result = run(_selection(tiny_kobbq, data_dir, n=None), RunConfig(model=model, store_path=tmp_path / f"{served[0]}.sqlite"))
        documents.append(build_results(result)[0][0])
    baseline = baselines.from_results(documents[0])
    assert baseline.model["revision"] == "v1" and baseline.model["served"]["models"] == {"snap-old": 96}
    comparison = compare(baseline, documents[1], settings_from(documents[1], []), baseline_path="baselines/kobbq/release.json")
    assert "the baseline and this run both test revision v1: is this the release it should be?" in comparison.warnings
    assert "the provider reported other served models than for the baseline: snap-old -> snap-new" in comparison.warnings


def test_the_plugin_takes_the_revision_from_its_option_or_environment(run_biascheck, tiny_kobbq, monkeypatch):
    first = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-model-revision", "v7", "-k", "age")
    assert first.results()["model"]["revision"] == "v7" and first.results()["run"]["calls"] > 0
    monkeypatch.setenv("BIASCHECK_MODEL_REVISION", "v8")
    second = run_biascheck(tiny_kobbq, "sim/fair", "-k", "age", report="r2")
    assert second.results()["model"]["revision"] == "v8"
    assert second.results()["run"]["calls"] == first.results()["run"]["calls"]  # a new revision is asked again
    third = run_biascheck(tiny_kobbq, "sim/fair", "-k", "age", report="r3")
    assert third.results()["run"]["calls"] == 0  # the same revision: answered from the store
