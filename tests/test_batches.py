"""Batch mode (--biascheck-batch) end to end: through the OpenAI and Anthropic SDKs, unmocked, against the simulator's batch endpoints over HTTP.

Most tests run the simulator in this process (a provider that outlives one pytest run, as a real
one does) and name it as an OpenAI-compatible endpoint; batch state lives in the simulator, so a
later run can collect what an earlier one submitted.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from biascheck.execution.batches import BatchLine, split
from biascheck.sim.knowledge import SimKnowledge
from biascheck.sim.server import SimServer
from biascheck.suite import load_suite

from conftest import mirror_or_skip, write_subset_suite

PRICE = ("--biascheck-price", "1/2")
FAST_POLL = ("--biascheck-batch-poll", "0.05")
BATCH = ("--biascheck-batch", *FAST_POLL)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """KoBBQ, one template per category, prompt 1, the original order: 96 cases."""
    mirror_or_skip()
    return write_subset_suite(
        tmp_path_factory.mktemp("batches") / "kobbq-tiny",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )


@pytest.fixture(scope="module")
def sim(suite: Path):
    with SimServer(SimKnowledge.from_cases(load_suite(suite, data_dir=mirror_or_skip()).cases)) as server:
        yield server


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator as a provider, ``openai/<persona>`` or ``anthropic/<persona>`` at its URL, takes any key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batches-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-batches-0000")


@pytest.fixture
def provider(sim: SimServer):
    """The simulator's batch counters, read now."""

    def counts() -> dict:
        stats = sim.stats()
        return {k: stats[k] for k in ("files_uploaded", "batches_created", "batched_requests", "completions")}

    return counts


def run_at(run_biascheck, sim: SimServer, suite: Path, model: str, *args: str, **kwargs):
    return run_biascheck(suite, model, "--biascheck-api-base", sim.base_url, *args, **kwargs)


def batches_in(store: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT state, detail FROM batches ORDER BY submitted_at").fetchall()


def outcomes(document: dict) -> list[tuple[str, str | None, str | None]]:
    return [(case["case_id"], case["outcome"], case["answer"]) for case in document["cases"]]


def test_a_batch_run_scores_as_the_online_run_does_at_half_the_cost_and_a_rerun_calls_nothing(run_biascheck, sim, tmp_path: Path, suite: Path):
    model = "openai/stereotyped?p=0.2&seed=11"
    online = run_at(run_biascheck, sim, suite, model, *PRICE, store_path=tmp_path / "online.sqlite", report="online")
    batch = run_at(run_biascheck, sim, suite, model, *BATCH, *PRICE, store_path=tmp_path / "batch.sqlite", report="batch")
    assert batch.ret == online.ret == 1, batch.output  # the stereotyped persona fails thresholds either way
    a, b = online.results(), batch.results()
    assert outcomes(b) == outcomes(a) and len(outcomes(a)) == 96
    assert b["metrics"] == a["metrics"] and b["verdicts"] == a["verdicts"]
    assert a["run"]["calls"] == b["run"]["calls"] == 96 and b["run"]["errors"] == 0
    assert a["run"]["cost_usd"] > 0 and b["run"]["cost_usd"] == pytest.approx(a["run"]["cost_usd"] / 2, rel=1e-9)
    assert [state for state, _ in batches_in(tmp_path / "batch.sqlite")] == ["collected"]
    assert b["run"]["batches"] == {"collected": 1} and "batches" not in a["run"]
    assert "provider batches: 1 collected" in (batch.report_dir / "report.md").read_text("utf-8")

    again = run_at(run_biascheck, sim, suite, model, *BATCH, *PRICE, store_path=tmp_path / "batch.sqlite", report="again")
    c = again.results()
    assert c["run"]["calls"] == 0 and c["run"]["cache_hits"] == 96 and outcomes(c) == outcomes(a) and c["metrics"] == a["metrics"]


def test_without_waiting_the_run_exits_6_and_a_later_run_collects_without_resubmitting(run_biascheck, sim, provider, suite: Path):
    model = "openai/stereotyped?p=0.2&batch_delay=1"
    before = provider()
    submitted = run_at(run_biascheck, sim, suite, model, *BATCH, "--biascheck-batch-wait=no", "--biascheck-update-baseline")
    assert submitted.ret == 6, submitted.output
    assert "\nbiascheck: submitted, not yet scored: 96 requests in 1 batch" in submitted.output
    assert "_pytest.outcomes" not in submitted.output and "Exit:" not in submitted.output  # one line, not pytest's internals
    assert "not writing the baseline" in submitted.output  # an unscored run records nothing
    assert submitted.results()["run"]["incomplete_reason"].startswith("submitted, not yet scored")
    assert submitted.results()["run"]["batches"] == {"running": 1} and submitted.results()["verdicts"] == []
    assert provider()["batches_created"] == before["batches_created"] + 1

    collected = run_at(run_biascheck, sim, suite, model, *BATCH, report="collected")
    document = collected.results()
    assert collected.ret == 1 and document["run"]["incomplete_reason"] is None
    assert document["run"]["calls"] == 0 and document["run"]["errors"] == 0  # collected, not asked again
    assert provider()["batches_created"] == before["batches_created"] + 1
    assert "error" not in {outcome for _, outcome, _ in outcomes(document)}


def test_a_failed_batch_makes_errors_not_answers_until_its_requests_are_resent(run_biascheck, sim, provider, suite: Path, tmp_path: Path):
    model = "openai/stereotyped?p=0.2&batch_fault=failed"
    before = provider()
    failed = run_at(run_biascheck, sim, suite, model, *BATCH)
    document = failed.results()
    assert document["run"]["errors"] == 96 and {outcome for _, outcome, _ in outcomes(document)} == {"error"}
    assert "batch" in document["cases"][0]["error"] and "failed" in document["cases"][0]["error"]
    assert [state for state, _ in batches_in(tmp_path / "store.sqlite")] == ["failed"] and document["run"]["batches"] == {"failed": 1}

    still = run_at(run_biascheck, sim, suite, model, *BATCH, report="still")
    assert still.results()["run"]["errors"] == 96 and provider()["batches_created"] == before["batches_created"] + 1  # not sent again

    resent = run_at(run_biascheck, sim, suite, model, *BATCH, "--biascheck-batch-resend=online", report="resent")
    document = resent.results()
    assert document["run"]["errors"] == 0 and document["run"]["calls"] == 96
    assert provider()["completions"] - before["completions"] == 96  # answered online, once each


def test_an_expired_batch_keeps_what_it_answered_and_resending_as_a_batch_sends_only_the_rest(run_biascheck, sim, provider, suite: Path):
    before = provider()
    run = run_at(run_biascheck, sim, suite, "openai/stereotyped?p=0.2&batch_fault=expired", *BATCH, "--biascheck-batch-resend=batch")
    document = run.results()
    # Each simulated batch answers its first half: 48 of 96, then 24 of the 48 sent again.
    assert document["run"]["errors"] == 24 and document["run"]["calls"] == 96 + 48
    after = provider()
    assert after["batches_created"] - before["batches_created"] == 2 and after["batched_requests"] - before["batched_requests"] == 144
    errors = [case["error"] for case in document["cases"] if case["outcome"] == "error"]
    assert len(errors) == 24 and all("batch_expired" in error for error in errors)


def test_requests_that_fail_inside_a_batch_are_counted_errors_never_unbiased_answers(run_biascheck, sim, suite: Path):
    run = run_at(run_biascheck, sim, suite, "openai/stereotyped?p=0.2&fail_rate=0.3&faults=500,garbage&seed=3", *BATCH)
    document = run.results()
    errors = [case["error"] for case in document["cases"] if case["outcome"] == "error"]
    assert 10 < len(errors) < 60 and document["run"]["errors"] == len(errors)
    assert {("HTTP 500" in e) or ("malformed" in e) for e in errors} == {True}
    assert any("HTTP 500" in e for e in errors) and any("malformed" in e for e in errors)
    assert "the run is incomplete" in run.output  # the suite's error check fails the run


def test_uploads_are_retried_and_an_endpoint_that_never_takes_one_leaves_nothing_behind(run_biascheck, sim, suite: Path, tmp_path: Path):
    retried = run_at(run_biascheck, sim, suite, "openai/stereotyped?p=0.2&files_fail=2", *BATCH, store_path=tmp_path / "retried.sqlite")
    assert retried.results()["run"]["retries"] == 2 and retried.results()["run"]["errors"] == 0

    dead = run_at(run_biascheck, sim, suite, "openai/stereotyped?p=0.2&files_fail=99", *BATCH, "--biascheck-retries", "1", report="dead")
    document = dead.results()
    assert document["run"]["errors"] == 96
    assert "uploading the batch's requests" in document["cases"][0]["error"] and "after 2 attempts" in document["cases"][0]["error"]
    assert batches_in(tmp_path / "store.sqlite") == []  # nothing was submitted: the next run sends it


def test_the_budget_refuses_a_batch_before_anything_is_sent(run_biascheck, sim, provider, suite: Path):
    before = provider()
    model = "openai/stereotyped?p=0.2"
    bounded = run_at(
        run_biascheck,
        sim,
        suite,
        model,
        *BATCH,
        "--biascheck-price",
        "1000/1000",
        "--biascheck-max-cost",
        "0.01",
        "--biascheck-param",
        "max_tokens=16",
    )
    assert bounded.ret == 4, bounded.output
    assert "could cost up to $" in bounded.output and "batch rate" in bounded.output and "nothing was sent" in bounded.output
    assert provider()["files_uploaded"] == before["files_uploaded"]


def test_batch_options_that_cannot_work_stop_before_the_first_call(run_biascheck, sim, provider, tiny_kobbq: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-0000")
    gemini = run_biascheck(tiny_kobbq, "gemini/gemini-1.5-flash", "--biascheck-batch")
    assert gemini.ret == 4 and "biascheck has no batch API for gemini/ models" in gemini.output and "anthropic/" in gemini.output
    alone = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-batch-wait=no")
    assert alone.ret == 4 and "--biascheck-batch-wait: only applies to a batch run" in alone.output
    wrong = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-batch", "--biascheck-batch-resend=later")
    assert wrong.ret == 4 and "'later' is not a way to resend" in wrong.output
    for args, message in (
        (("--biascheck-batch-wait=maybe",), "--biascheck-batch-wait: 'maybe' is not yes or no"),
        (("--biascheck-batch-poll", "-1"), "--biascheck-batch-poll: '-1' is out of range; give a number from 0 to 86400"),
        (("--biascheck-batch-poll", "soon"), "--biascheck-batch-poll: 'soon' is not a number"),
    ):
        bad = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-batch", *args)
        assert bad.ret == 4 and message in bad.output and "Traceback" not in bad.output, bad.output
    fault = run_biascheck(tiny_kobbq, "sim/fair?batch_fault=sometimes", "--biascheck-batch")
    assert fault.ret == 4 and "batch_fault must be one of failed, expired" in fault.output
    monkeypatch.setenv("AZURE_API_KEY", "test-key-0000")
    monkeypatch.setenv("AZURE_API_BASE", sim.base_url.removesuffix("/v1"))
    monkeypatch.delenv("AZURE_API_VERSION", raising=False)
    before = provider()
    azure = run_biascheck(tiny_kobbq, "azure/gpt-4o-mini", "--biascheck-batch")
    assert azure.ret == 4 and "Azure's batch API needs AZURE_API_VERSION, which is not set" in azure.output, azure.output
    assert provider() == before  # nothing reached the provider


def test_anthropic_message_batches_through_the_sdk_score_as_the_online_openai_run(run_biascheck, sim, provider, suite: Path, tmp_path: Path):
    before = provider()
    online = run_at(run_biascheck, sim, suite, "openai/stereotyped?p=0.2", store_path=tmp_path / "online.sqlite", report="online")
    anthropic = run_at(run_biascheck, sim, suite, "anthropic/stereotyped?p=0.2", *BATCH, report="anthropic")
    a, b = online.results(), anthropic.results()
    assert outcomes(b) == outcomes(a) and b["metrics"] == a["metrics"] and b["run"]["errors"] == 0
    assert provider()["batched_requests"] - before["batched_requests"] == 96 and provider()["files_uploaded"] == before["files_uploaded"]
    again = run_at(run_biascheck, sim, suite, "anthropic/stereotyped?p=0.2", *BATCH, report="again")
    assert again.results()["run"]["calls"] == 0 and provider()["batched_requests"] - before["batched_requests"] == 96
    expired = run_at(run_biascheck, sim, suite, "anthropic/stereotyped?p=0.2&batch_fault=expired", *BATCH, report="expired").results()
    errors = [case["error"] for case in expired["cases"] if case["outcome"] == "error"]
    assert expired["run"]["errors"] == len(errors) == 48 and all(error == "batch request expired" for error in errors)


def test_split_keeps_order_and_every_batch_within_both_limits():
    from hypothesis import given
    from hypothesis import strategies as st

    @given(st.lists(st.integers(1, 50), max_size=60), st.integers(1, 7), st.integers(50, 200))
    def check(sizes: list[int], max_requests: int, max_bytes: int) -> None:
        lines = [BatchLine(str(i), b"x" * size) for i, size in enumerate(sizes)]
        chunks = list(split(iter(lines), max_requests, max_bytes))
        assert [line for chunk in chunks for line in chunk] == lines
        for chunk in chunks:
            assert 1 <= len(chunk) <= max_requests and sum(len(line.body) for line in chunk) <= max_bytes

    check()


def test_the_openai_requests_name_the_store_key_and_carry_the_request_as_planned(run_biascheck, sim, suite: Path, tmp_path: Path):
    run_at(run_biascheck, sim, suite, "openai/stereotyped?p=0.2", *BATCH, "--biascheck-param", "max_tokens=8", "-k", "age")
    upload = next(f for f in reversed(sim.app.batches.files.values()) if f.purpose == "batch")
    lines = [json.loads(line) for line in upload.content.splitlines()]
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        stored = {key: json.loads(request) for key, request in db.execute("SELECT key, request FROM responses")}
    assert {line["custom_id"] for line in lines} == set(stored)
    for line in lines:
        assert line["url"] == "/v1/chat/completions" and line["body"]["model"] == "stereotyped?p=0.2"
        assert line["body"]["messages"] == stored[line["custom_id"]]["messages"] and line["body"]["max_tokens"] == 8


def test_a_batch_the_provider_no_longer_knows_is_lost_its_requests_errors_until_resent(run_biascheck, suite: Path, data_dir: Path):
    """A simulator restarted (its batches forgotten), as a provider that deleted a batch or a key of
    another project: 404. Not a stop, not a silent resubmission: errors, until the user resends."""
    model = "sim/stereotyped?p=0.2&batch_delay=2"  # sim/: the same store keys whichever simulator answers
    cases = load_suite(suite, data_dir=data_dir).cases
    with SimServer(SimKnowledge.from_cases(cases)) as first:
        submitted = run_biascheck(suite, model, "--biascheck-api-base", first.base_url, *BATCH, "--biascheck-batch-wait=no")
        assert submitted.ret == 6, submitted.output
    with SimServer(SimKnowledge.from_cases(cases)) as second:
        lost = run_biascheck(suite, model, "--biascheck-api-base", second.base_url, *BATCH, report="lost")
        document = lost.results()
        assert lost.ret == 1 and document["run"]["errors"] == 96 and document["run"]["batches"] == {"lost": 1}, lost.output
        assert "the provider does not know it" in document["cases"][0]["error"]
        assert second.stats()["batches_created"] == 0
        again = run_biascheck(suite, model, "--biascheck-api-base", second.base_url, *BATCH, "--biascheck-batch-resend=batch", report="again")
        assert again.results()["run"]["errors"] == 0 and second.stats()["batches_created"] == 1


# Issue 23: a batch created twice after a lost reply, an online run beside an open batch, a batch
# whose status the provider does not give.


def test_a_batch_created_though_its_reply_was_lost_is_found_not_created_again(run_biascheck, sim, provider, suite: Path):
    """POST /v1/batches reaches the provider and its reply is a 502: the retry looks the batch up by
    its submission before creating another, so each request is paid for once."""
    before = provider()
    run = run_at(run_biascheck, sim, suite, "openai/stereotyped?p=0.2&create_lost=1", *BATCH, "-k", "age")
    document = run.results()
    requests = document["run"]["requests"]
    assert requests > 0 and document["run"]["errors"] == 0 and document["run"]["calls"] == requests, run.output
    after = provider()
    assert after["batches_created"] - before["batches_created"] == 1
    # Paid once each: the simulator answered each request once (it counts batched answers as completions too).
    assert after["batched_requests"] - before["batched_requests"] == after["completions"] - before["completions"] == requests


def test_an_online_run_sends_none_of_the_requests_an_open_batch_holds(run_biascheck, sim, provider, suite: Path):
    """A run without --biascheck-batch after one that submitted without waiting: it refuses in one
    line saying how to collect or cancel the batch, and sends nothing online; the batch run it
    names collects with 0 calls."""
    model = "openai/stereotyped?p=0.2&batch_delay=2"
    before = provider()
    submitted = run_at(run_biascheck, sim, suite, model, *BATCH, "--biascheck-batch-wait=no", "-k", "age")
    assert submitted.ret == 6, submitted.output
    requests = submitted.results()["run"]["requests"]
    online = run_at(run_biascheck, sim, suite, model, "-k", "age", report="online")
    assert online.ret == 4, online.output
    line = next(line for line in online.output.splitlines() if line.startswith("ERROR: "))
    assert f"{requests} of this run's requests are in 1 provider batch an earlier run submitted, not yet collected" in line, line
    assert "collect them with --biascheck-batch" in line and "--biascheck-batch-resend=online" in line, line
    assert "Traceback" not in online.output and "INTERNALERROR" not in online.output
    collected = run_at(run_biascheck, sim, suite, model, *BATCH, "-k", "age", report="collected")
    document = collected.results()
    assert document["run"]["calls"] == 0 and document["run"]["errors"] == 0 and document["run"]["cache_hits"] == 0, collected.output
    after = provider()  # each request answered once, in the batch: none online (the simulator counts both as completions)
    assert after["batched_requests"] - before["batched_requests"] == after["completions"] - before["completions"] == requests


def test_a_batch_whose_status_the_provider_does_not_give_ends_the_run_resumable_in_one_line(run_biascheck, sim, provider, suite: Path):
    """Status requests answered 503 until the retries run out: no traceback, the usual report with
    the batch still running, exit code 4 with one line; the next run collects it without a call."""
    model = "openai/stereotyped?p=0.2&status_fail=2"
    before = provider()
    stopped = run_at(run_biascheck, sim, suite, model, *BATCH, "--biascheck-retries", "1", "-k", "age")
    assert stopped.ret == 4 and "INTERNALERROR" not in stopped.output and "Traceback" not in stopped.output, stopped.output
    line = next(line for line in stopped.output.splitlines() if line.startswith("ERROR: "))
    assert "retrieving batch" in line and "(after 2 attempts)" in line and "run again with the same response store" in line, line
    document = stopped.results()
    assert document["run"]["batches"] == {"running": 1} and document["run"]["incomplete_reason"].startswith("fatal model error: retrieving batch")
    resumed = run_at(run_biascheck, sim, suite, model, *BATCH, "-k", "age", report="resumed")
    assert resumed.results()["run"]["calls"] == 0 and resumed.results()["run"]["errors"] == 0, resumed.output
    assert provider()["batches_created"] - before["batches_created"] == 1


def test_biascheck_run_without_waiting_exits_6_as_pytest_does(sim, suite: Path, tmp_path: Path, data_dir: Path, capsys):
    """The exit code of pending batches is the same in both (biascheck.core.exits, issue 34 D15)."""
    from biascheck.cli import main
    from biascheck.core import exits

    argv = ["run", str(suite), "--model", "openai/stereotyped?p=0.2&batch_delay=1", "--api-base", sim.base_url, "--data", str(data_dir)]
    argv += ["--cache", str(tmp_path / "store.sqlite"), "--batch", "--batch-poll", "0.05", "--batch-wait", "no", "--report", str(tmp_path / "r")]
    assert main(argv) == exits.BATCH_PENDING == 6
    assert "submitted, not yet scored: 96 requests in 1 batch" in capsys.readouterr().err


def test_in_a_batch_run_of_two_suites_each_counts_its_own_calls_cache_hits_and_cost(
    run_biascheck, tmp_path: Path, suite: Path, data_dir: Path, tiny_kobbq_p3: Path
):
    # Issue 35: each suite's run block showed the whole run's counters. Suite A answered alone first:
    # in the batch run of both, A is all cache hits and B holds every call and all of the cost.
    other = tiny_kobbq_p3
    cases = [*load_suite(suite, data_dir=data_dir).cases, *load_suite(other, data_dir=data_dir).cases]
    model, store = "openai/stereotyped?p=0.2&seed=11", tmp_path / "batch.sqlite"
    with SimServer(SimKnowledge.from_cases(cases)) as server:
        alone = run_at(run_biascheck, server, suite, model, *BATCH, *PRICE, store_path=store, report="alone")
        both = run_at(run_biascheck, server, suite, model, str(other), *BATCH, *PRICE, store_path=store, report="both")
    assert alone.results()["run"]["calls"] == 96, alone.output
    a, b = (json.loads((both.report_dir / name / "results.json").read_text("utf-8"))["run"] for name in ("kobbq", "kobbq-p3"))
    assert (a["requests"], a["cache_hits"], a["calls"], a["cost_usd"]) == (96, 96, 0, 0)
    assert (b["requests"], b["cache_hits"], b["calls"]) == (96, 0, 96) and b["cost_usd"] == pytest.approx(alone.results()["run"]["cost_usd"], rel=0.2)
    assert a["errors"] == b["errors"] == 0 and a["batches"] == b["batches"] == {"collected": 1}  # the run's batch: it held B's requests


def test_a_simulator_that_stops_ends_the_batches_it_was_still_answering(suite: Path, data_dir: Path):
    # A batch still in its delay when the server stopped left its task pending in a closed loop
    # ("Task was destroyed but it is pending!" at the end of the test run).
    import openai

    with SimServer(SimKnowledge.from_cases(load_suite(suite, data_dir=data_dir).cases)) as server:
        client = openai.OpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
        line = {"custom_id": "k", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "fair?batch_delay=600", "messages": []}}
        file = client.files.create(file=("b.jsonl", json.dumps(line).encode(), "application/jsonl"), purpose="batch")
        batch = client.batches.create(completion_window="24h", endpoint="/v1/chat/completions", input_file_id=file.id)
        assert client.batches.retrieve(batch.id).status == "in_progress"
        client.close()
        task = server.app.batches.batches[batch.id].task
    assert task is not None and task.done()
