"""The batch runner with a fake provider API, no HTTP: what it submits, resumes and records when a
run is killed at any point (before a batch exists, after it exists but before its id was stored,
mid-collection)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from biascheck.core.errors import BiascheckError
from biascheck.execution.batch_runner import BatchRun, in_batches, refuse_open_batches
from biascheck.execution.batches import BatchLine, BatchOptions, BatchStatus
from biascheck.execution.call_errors import CallError
from biascheck.execution.llm import Completion
from biascheck.execution.policy import Budget, CircuitBreaker, RetryPolicy
from biascheck.execution.progress import NoProgress
from biascheck.execution.runner import Executor, ModelRequest, execute
from biascheck.execution.stats import RunStatus
from biascheck.execution.store import BatchRecord, ResponseStore, StoredResponse

MODEL = "openai/fake"


class FakeBatches:
    """A provider that answers every request "A" as soon as asked, and remembers what it was sent."""

    provider = "openai"
    limits = (3, 10_000)
    default_max_tokens = None

    def __init__(self, *, ended: str = "completed") -> None:
        self.batches: dict[str, tuple[str, list[str]]] = {}  # batch id -> (submission, keys)
        self.submitted: list[str] = []
        self.ended = ended
        self.client: Any = None
        self.dropped: dict[str, str] = {}

    def line(self, key: str, messages: list[dict[str, str]], params: dict[str, Any], sample: int) -> BatchLine:
        return BatchLine(key, key.encode() + b"\n")

    async def submit(self, lines, submission: str) -> BatchStatus:
        batch_id = f"b{len(self.batches)}"
        self.batches[batch_id] = (submission, [line.key for line in lines])
        self.submitted += [line.key for line in lines]
        return BatchStatus(batch_id, "running", len(lines), 0, 0)

    async def find(self, submission: str) -> BatchStatus | None:
        for batch_id, (made_for, keys) in self.batches.items():
            if made_for == submission:
                return BatchStatus(batch_id, "running", len(keys), 0, 0)
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        keys = self.batches[batch_id][1]
        return BatchStatus(batch_id, self.ended, len(keys), len(keys), 0 if self.ended == "completed" else len(keys))

    async def results(self, status: BatchStatus, params_of: dict[str, dict[str, Any]]):
        if status.state != "completed":
            return [(key, "batch request failed: simulated") for key in self.batches[status.batch_id][1] if key in params_of]
        return [
            (key, Completion("A", "stop", {"prompt_tokens": 3, "completion_tokens": 1}, 0.5))
            for key in self.batches[status.batch_id][1]
            if key in params_of
        ]

    async def aclose(self) -> None: ...


def requests(n: int) -> list[ModelRequest]:
    return [ModelRequest(f"k{i:02d}", [{"role": "user", "content": f"q{i}"}], {"max_tokens": 4}) for i in range(n)]


def run_with(api: FakeBatches, store: ResponseStore, todo: list[ModelRequest], options: BatchOptions = BatchOptions(poll_interval=0), progress=None):
    executor = Executor(
        store, MODEL, policy=RetryPolicy(max_retries=0), budget=Budget(None), breaker=CircuitBreaker(), progress=progress or NoProgress()
    )
    pending = executor.answer_without_calling(todo, {}, None)
    batch_run = BatchRun(executor, options)
    batch_run.requests = {r.key: r for r in pending}
    asyncio.run(batch_run.answer(api))
    batch_run.settle()
    return executor.finish()


@pytest.fixture
def store(tmp_path: Path):
    with ResponseStore(tmp_path / "store.sqlite") as opened:
        yield opened


def test_requests_are_split_within_the_limit_and_answered_once(store: ResponseStore):
    api = FakeBatches()
    execution = run_with(api, store, requests(7))
    assert [len(keys) for _, keys in api.batches.values()] == [3, 3, 1]
    assert sorted(api.submitted) == [r.key for r in requests(7)]
    assert {r.text for r in execution.responses.values()} == {"A"} and execution.stats.calls == 7
    assert execution.stats.cost_usd == pytest.approx(3.5)
    assert [b.state for b in store.batches(MODEL)] == ["collected"] * 3
    again = run_with(api, store, requests(7))
    assert again.stats.cache_hits == 7 and len(api.submitted) == 7


def test_a_batch_created_just_before_a_kill_is_found_by_its_submission_and_not_sent_again(store: ResponseStore):
    api = FakeBatches()
    todo = requests(3)
    # The kill came after the provider made the batch and before the store heard its id.
    submission = "bc-killed"
    asyncio.run(api.submit([BatchLine(r.key, b"") for r in todo], submission))
    now = time.time()
    store.add_batch(BatchRecord(submission, "openai", MODEL, None, tuple(r.key for r in todo), "submitting", now, now))
    execution = run_with(api, store, todo)
    assert len(api.submitted) == 3 and execution.stats.calls == 0 and execution.stats.errors == 0
    assert [(b.id, b.state) for b in store.batches(MODEL)] == [(submission, "collected")]


def test_a_submission_the_provider_never_received_is_sent(store: ResponseStore):
    api = FakeBatches()
    todo = requests(2)
    now = time.time()
    store.add_batch(BatchRecord("bc-never-sent", "openai", MODEL, None, tuple(r.key for r in todo), "submitting", now, now))
    execution = run_with(api, store, todo)
    assert len(api.submitted) == 2 and execution.stats.errors == 0
    assert [b.id for b in store.batches(MODEL)] != ["bc-never-sent"]


def test_a_kill_mid_collection_resumes_by_collecting_not_submitting(store: ResponseStore):
    api = FakeBatches()
    todo = requests(6)
    run_with(api, store, todo, BatchOptions(wait=False, poll_interval=0))  # the fake ends at once: collected
    # Undo the collection of the second batch, as a kill before its answers were stored would.
    second = store.batches(MODEL)[1]
    store.update_batch(
        BatchRecord(second.id, second.provider, second.model, second.batch_id, second.keys, "running", second.submitted_at, time.time())
    )
    with sqlite3.connect(store.path) as db:
        db.execute(f"DELETE FROM responses WHERE key IN ({','.join('?' * len(second.keys))})", second.keys)
    execution = run_with(api, store, todo)
    assert len(api.submitted) == 6 and execution.stats.calls == 0 and execution.stats.cache_hits == 3
    assert {r.text for r in execution.responses.values()} == {"A"}


def test_failed_requests_are_errors_in_every_later_run_until_resent(store: ResponseStore):
    failing = FakeBatches(ended="failed")
    first = run_with(failing, store, requests(2))
    assert first.stats.errors == 2 and all(r.errored for r in first.responses.values())
    later = run_with(failing, store, requests(2))
    assert later.stats.errors == 2 and len(failing.submitted) == 2
    healthy = FakeBatches()
    resent = run_with(healthy, store, requests(2), BatchOptions(poll_interval=0, resend="batch"))
    assert resent.stats.errors == 0 and len(healthy.submitted) == 2


def test_not_waiting_leaves_the_run_pending_with_every_request_not_run(store: ResponseStore):
    class Slow(FakeBatches):
        async def status(self, batch_id: str) -> BatchStatus:
            keys = self.batches[batch_id][1]
            return BatchStatus(batch_id, "running", len(keys), 0, 0)

    execution = run_with(Slow(), store, requests(4), BatchOptions(wait=False, poll_interval=0))
    assert execution.stats.status is RunStatus.BATCH_PENDING and execution.stats.not_run == 4
    assert execution.stats.incomplete.startswith("submitted, not yet scored: 4 requests in 2 batches")


def test_an_unboundable_batch_under_a_budget_is_refused_before_anything_is_sent(store: ResponseStore):
    api = FakeBatches()
    executor = Executor(store, MODEL, policy=RetryPolicy(), budget=Budget(1.0), breaker=CircuitBreaker(), progress=NoProgress())
    batch_run = BatchRun(executor, BatchOptions())
    batch_run.requests = {r.key: r for r in [ModelRequest("k", [{"role": "user", "content": "q"}], {})]}
    with pytest.raises(BiascheckError, match="set no max_tokens"):
        batch_run.check_budget(api, ["k"])  # type: ignore[arg-type]
    assert api.submitted == []


def test_the_batch_backend_answers_from_the_store_first(store: ResponseStore):
    api = FakeBatches()
    run_with(api, store, requests(2))

    @contextmanager
    def never_opened():
        raise AssertionError("no client is opened when the store answers everything")
        yield

    execution = asyncio.run(execute(requests(2), store=store, model_name=MODEL, open_client=never_opened, backend=in_batches(BatchOptions())))
    assert execution.stats.cache_hits == 2 and execution.stats.calls == 0


def test_the_progress_note_counts_batches_by_state_and_requests_done(store: ResponseStore):
    class Notes(NoProgress):
        def __init__(self) -> None:
            self.notes: list[str] = []

        def note(self, text: str) -> None:
            self.notes.append(text)

    notes = Notes()
    run_with(FakeBatches(), store, requests(7), progress=notes)
    assert notes.notes[0].startswith("batches: 1 submitted, 1 in progress, 0 completed, 0 failed or expired; 0 of 3 requests done")
    assert notes.notes[-1] == "batches: 3 submitted, 0 in progress, 3 completed, 0 failed or expired; 7 of 7 requests done; all done"


class Unavailable(FakeBatches):
    """A provider whose named batch API calls answer 503, whatever the retries."""

    def __init__(self, *failing: str) -> None:
        super().__init__()
        self.failing = failing

    async def _fail_if(self, name: str) -> None:
        if name in self.failing:
            raise CallError(f"{name}: HTTP 503: overloaded (simulated)", retryable=True)

    async def find(self, submission: str) -> BatchStatus | None:
        await self._fail_if("find")
        return await super().find(submission)

    async def status(self, batch_id: str) -> BatchStatus:
        await self._fail_if("status")
        return await super().status(batch_id)

    async def results(self, status: BatchStatus, params_of: dict[str, dict[str, Any]]):
        await self._fail_if("results")
        return await super().results(status, params_of)


@pytest.mark.parametrize(
    ("stage", "failing"),
    [("reconcile", ("find",)), ("poll", ("status",)), ("reread", ("status",)), ("collect", ("results",))],
)
def test_a_batch_api_that_stays_unavailable_stops_the_run_resumable_never_with_a_traceback(
    store: ResponseStore, stage: str, failing: tuple[str, ...]
):
    """Issue 23, item 4: every path that asks the provider about a batch (reconcile a submission a
    kill interrupted, poll, re-read an ended batch, collect) ends the run in one line that says the
    batches stay open, and the next run resumes."""
    todo = requests(2)
    api = Unavailable()
    now = time.time()
    if stage == "reconcile":
        asyncio.run(api.submit([BatchLine(r.key, b"") for r in todo], "bc-killed"))
        store.add_batch(BatchRecord("bc-killed", "openai", MODEL, None, tuple(r.key for r in todo), "submitting", now, now))
    elif stage == "reread":  # ended, collected by a run that did not ask for these requests
        asyncio.run(api.submit([BatchLine(r.key, b"") for r in todo], "bc-other-run"))
        store.add_batch(BatchRecord("bc-other-run", "openai", MODEL, "b0", tuple(r.key for r in todo), "collected", now, now))
    api.failing = failing
    execution = run_with(api, store, todo)
    stats = execution.stats
    assert stats.status is RunStatus.FATAL_MODEL_ERROR and "\n" not in stats.incomplete
    assert "HTTP 503" in stats.incomplete and "run again with the same response store" in stats.incomplete, stats.incomplete
    assert all(r.errored for r in execution.responses.values()) and store.count() == 0
    api.failing = ()
    resumed = run_with(api, store, todo)
    assert resumed.stats.errors == 0 and {r.text for r in resumed.responses.values()} == {"A"}
    assert len(api.submitted) == 2  # each request sent once


def test_an_online_run_refuses_the_requests_a_batch_holds_until_it_is_collected(store: ResponseStore):
    """Issue 23, item 3: held are the requests of an open batch, and those of an ended one that
    neither answered nor recorded an error for them (collected by a run that did not ask for them);
    not those of a batch that failed, nor those answered or errored already."""
    now = time.time()
    keys = [r.key for r in requests(8)]
    refuse_open_batches(store, MODEL, keys)  # no batch: nothing refused
    store.add_batch(BatchRecord("bc-failed", "openai", MODEL, "b-failed", tuple(keys[:2]), "failed", now, now))
    store.add_batch(BatchRecord("bc-read", "openai", MODEL, "b-read", tuple(keys[2:4]), "collected", now, now))
    store.put(keys[2], MODEL, {"messages": []}, StoredResponse("A", "stop", {}, None))
    store.record_run_errors("batch:bc-read", {keys[3]: "batch request failed"})
    refuse_open_batches(store, MODEL, keys)  # all of it answered, errored, or failed: free to send
    store.add_batch(BatchRecord("bc-unread", "openai", MODEL, "b-unread", tuple(keys[4:6]), "collected", now, now))
    store.add_batch(BatchRecord("bc-open", "openai", MODEL, None, tuple(keys[6:]), "submitting", now, now))
    with pytest.raises(BiascheckError) as refused:
        refuse_open_batches(store, MODEL, keys)
    message = str(refused.value)
    assert message.startswith(
        f"{store.path}: 4 of this run's requests are in 2 provider batches an earlier run submitted, not yet collected (bc-open, b-unread)"
    )
    assert "\n" not in message
