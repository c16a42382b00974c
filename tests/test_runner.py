"""The runner without HTTP: a scripted fake client drives ``runner.execute`` through retries,
backoff, Retry-After, the budget, fatal errors, refused parameters and resumption from the store.
(The same paths over real HTTP, through litellm and the simulator, are in the plugin tests.)"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biascheck.execution.call_errors import CallError
from biascheck.execution.llm import Completion
from biascheck.execution.policy import Budget, RetryPolicy
from biascheck.execution.runner import NOT_RUN, ModelRequest, execute
from biascheck.execution.stats import RunStatus
from biascheck.execution.store import ResponseStore

FAST = RetryPolicy(max_retries=3, base_delay=0.001, max_delay=0.004, max_retry_after=1.0)


class ScriptedClient:
    """Answers each request by its content: a list of steps per content, consumed one per attempt
    (an exception is raised, a string is the reply); once a script is used up, "A". Records every
    attempt's parameters."""

    def __init__(self, scripts: dict[str, list] | None = None, cost: float | None = 0.01):
        self.scripts = {content: list(steps) for content, steps in (scripts or {}).items()}
        self.cost = cost
        self.attempts: Counter[str] = Counter()
        self.sent_params: list[dict] = []
        self.closed = False

    async def complete(self, messages, params, sample=0):
        content = messages[-1]["content"]
        self.attempts[content] += 1
        self.sent_params.append(dict(params))
        await asyncio.sleep(0)
        steps = self.scripts.get(content) or []
        step = steps.pop(0) if steps else "A"
        if isinstance(step, BaseException):
            raise step
        return Completion(step, "stop", {"prompt_tokens": 3, "completion_tokens": 1}, self.cost)

    async def aclose(self):
        self.closed = True


def requests_for(*contents: str, params: dict | None = None) -> list[ModelRequest]:
    return [ModelRequest(f"key-{content}", [{"role": "user", "content": content}], dict(params or {})) for content in contents]


def run(client: ScriptedClient, requests: list[ModelRequest], store_path: Path, **kwargs):
    @contextlib.contextmanager
    def open_client():
        yield client

    async def go():
        with ResponseStore(store_path) as store:
            return await execute(requests, store=store, model_name="m", open_client=open_client, policy=kwargs.pop("policy", FAST), **kwargs)

    return asyncio.run(go())


def busy(retry_after: float | None = None) -> CallError:
    return CallError("RateLimitError: 429", retryable=True, retry_after=retry_after)


def test_retries_until_an_answer_and_counts_every_attempt(tmp_path):
    client = ScriptedClient({"q1": [busy(), busy(), "B"]})
    execution = run(client, requests_for("q1", "q2"), tmp_path / "s.sqlite")
    assert execution.responses["key-q1"].text == "B" and execution.responses["key-q2"].text == "A"
    assert (execution.stats.calls, execution.stats.retries, execution.stats.errors) == (4, 2, 0)
    assert execution.stats.cost_usd == pytest.approx(0.02) and client.closed


def test_a_request_that_keeps_failing_errors_after_its_retries_and_the_run_goes_on(tmp_path):
    client = ScriptedClient({"q1": [busy()] * 10})
    execution = run(client, requests_for("q1", "q2"), tmp_path / "s.sqlite")
    assert client.attempts["q1"] == FAST.max_retries + 1
    assert execution.responses["key-q1"].error == f"RateLimitError: 429 (after {FAST.max_retries + 1} attempts)"
    assert execution.responses["key-q2"].text == "A"
    assert (execution.stats.errors, execution.stats.incomplete) == (1, None)


def test_a_refusal_that_is_not_retryable_is_one_attempt(tmp_path):
    client = ScriptedClient({"q1": [CallError("BadRequestError: context too long", retryable=False)]})
    execution = run(client, requests_for("q1"), tmp_path / "s.sqlite")
    assert client.attempts["q1"] == 1 and execution.stats.retries == 0
    assert execution.responses["key-q1"].error == "BadRequestError: context too long (after 1 attempt)"


def test_a_retry_after_beyond_the_cap_is_given_up_at_once_and_says_why(tmp_path):
    client = ScriptedClient({"q1": [busy(retry_after=30.04)]})
    execution = run(client, requests_for("q1"), tmp_path / "s.sqlite")
    assert client.attempts["q1"] == 1
    assert execution.responses["key-q1"].error == ("RateLimitError: 429 (the server asked to wait 30.1 s, more than the 1 s cap; after 1 attempt)")


def test_a_retry_after_within_the_cap_is_waited_for(tmp_path):
    client = ScriptedClient({"q1": [busy(retry_after=0.2), "B"]})
    start = time.monotonic()
    execution = run(client, requests_for("q1"), tmp_path / "s.sqlite")
    assert time.monotonic() - start >= 0.2  # not FAST's 4 ms backoff
    assert execution.responses["key-q1"].text == "B" and execution.stats.retries == 1


@given(retry=st.integers(0, 30), retry_after=st.none() | st.floats(0, 300), seed=st.integers(0, 2**32 - 1))
def test_backoff_is_jittered_within_its_cap_and_never_shorter_than_retry_after(retry, retry_after, seed):
    policy = RetryPolicy()
    delay = policy.delay(retry, retry_after, random.Random(seed))
    cap = min(policy.max_delay, policy.base_delay * 2**retry)
    if retry_after is None:
        assert 0 <= delay <= cap
    else:
        assert retry_after <= delay <= max(retry_after, cap)


def test_jitter_spreads_the_delays_of_one_retry():
    delays = {round(RetryPolicy().delay(3, None, random.Random(seed)), 6) for seed in range(50)}
    assert len(delays) == 50 and max(delays) <= 2.0


def test_a_fatal_error_stops_the_run_and_the_rest_is_not_run(tmp_path):
    client = ScriptedClient({"q0": [CallError("AuthenticationError: invalid key", retryable=False, fatal=True)]})
    execution = run(client, requests_for(*(f"q{i}" for i in range(20))), tmp_path / "s.sqlite", concurrency=1)
    stats = execution.stats
    assert stats.incomplete == "fatal model error: AuthenticationError: invalid key"
    assert stats.status is RunStatus.FATAL_MODEL_ERROR
    assert stats.calls == 1 and stats.not_run == 19 and stats.errors == 20
    assert all(execution.responses[f"key-q{i}"].error.startswith(NOT_RUN) for i in range(1, 20))


def test_the_budget_stops_new_calls_before_the_limit(tmp_path):
    client = ScriptedClient(cost=0.01)
    execution = run(client, requests_for(*(f"q{i}" for i in range(50))), tmp_path / "s.sqlite", concurrency=8, budget=Budget(0.105))
    stats = execution.stats
    assert stats.incomplete == "budget of $0.105 reached" and stats.status is RunStatus.BUDGET_REACHED
    assert stats.cost_usd <= 0.105 + 0.01 + 1e-9  # at most about one call's cost over
    assert stats.calls == sum(client.attempts.values()) and 0 < stats.calls <= 11
    assert stats.not_run == 50 - stats.calls


def test_an_interrupted_run_resumes_from_the_store_without_asking_again(tmp_path):
    store = tmp_path / "s.sqlite"
    first = run(ScriptedClient(cost=0.01), requests_for(*(f"q{i}" for i in range(30))), store, budget=Budget(0.05), concurrency=1)
    answered = {key for key, response in first.responses.items() if not response.errored}
    assert 0 < len(answered) < 30
    client = ScriptedClient()
    second = run(client, requests_for(*(f"q{i}" for i in range(30))), store)
    assert second.stats.cache_hits == len(answered) and second.stats.calls == 30 - len(answered)
    assert {m for m in client.attempts} == {f"q{i}" for i in range(30)} - {key.removeprefix("key-") for key in answered}
    assert not any(response.errored for response in second.responses.values())
    third_client = ScriptedClient()
    third = run(third_client, requests_for(*(f"q{i}" for i in range(30))), store)
    assert third.stats.calls == 0 and not third_client.attempts and third.stats.cache_hits == 30


def test_a_refused_parameter_is_left_out_for_the_rest_of_the_run_without_a_retry(tmp_path):
    refusal = CallError("BadRequestError: Unrecognized request argument supplied: seed", retryable=False, rejected=("seed",))
    client = ScriptedClient({"q0": [refusal]})
    execution = run(client, requests_for("q0", "q1", "q2", params={"seed": 7, "temperature": 0}), tmp_path / "s.sqlite", concurrency=1)
    assert execution.stats.retries == 0 and execution.stats.errors == 0
    assert client.sent_params[0] == {"seed": 7, "temperature": 0}
    assert client.sent_params[1:] == [{"temperature": 0}] * 3
    assert "seed" in execution.stats.params_dropped["m"]


def test_duplicate_requests_are_one_call(tmp_path):
    client = ScriptedClient()
    execution = run(client, requests_for("q1", "q1", "q2"), tmp_path / "s.sqlite")
    assert execution.stats.requests == 2 and execution.stats.calls == 2 and client.attempts == Counter({"q1": 1, "q2": 1})


class GatedClient(ScriptedClient):
    """Holds every call until released, and records how many were in flight at most."""

    def __init__(self, cost: float | None = 0.01):
        super().__init__(cost=cost)
        self.release = asyncio.Event()
        self.in_flight = self.max_in_flight = 0

    async def complete(self, messages, params, sample=0):
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await self.release.wait()
        self.in_flight -= 1
        return await super().complete(messages, params, sample)


def test_under_a_budget_the_first_call_goes_alone_and_the_others_sleep_until_it_returns(tmp_path):
    from biascheck.execution.policy import CircuitBreaker
    from biascheck.execution.progress import NoProgress
    from biascheck.execution.runner import Executor

    client = GatedClient()
    checks = Counter()

    class CountingExecutor(Executor):
        def may_start(self) -> bool:
            checks["may_start"] += 1
            return super().may_start()

    @contextlib.contextmanager
    def open_client():
        yield client

    async def go():
        with ResponseStore(tmp_path / "s.sqlite") as store:
            executor = CountingExecutor(store, "m", policy=FAST, budget=Budget(1.0), breaker=CircuitBreaker(replied=True), progress=NoProgress())
            pending = executor.answer_without_calling(requests_for(*(f"q{i}" for i in range(8))), {}, None)
            calling = asyncio.ensure_future(executor.call(pending, open_client, 8, None))
            for _ in range(200):  # let the loop run: waiting workers must not wake up by themselves
                await asyncio.sleep(0)
            waited = checks["may_start"]
            assert client.in_flight == 1  # no price known yet: nothing else starts
            client.release.set()
            await calling
            return executor.finish(), waited

    execution, waited = asyncio.run(go())
    # Each of the 8 workers asked once before sleeping; polling would have asked hundreds of times.
    assert waited == 8
    assert not any(r.errored for r in execution.responses.values())
    assert execution.stats.calls == 8 and execution.stats.status is RunStatus.COMPLETE


def test_an_answer_is_stored_before_the_run_counts_it(tmp_path):
    # The answers that arrive together are committed in one transaction, but none is counted done
    # (nor read by the run) before its row is in the store another process reads.
    import sqlite3

    store_path = tmp_path / "s.sqlite"
    seen: list[tuple[int, int]] = []

    class Watching:
        def start(self, total, stats, label=None): ...

        def note(self, text): ...

        def stop(self, stats, interrupted=None): ...

        def update(self, done, stats):
            with sqlite3.connect(store_path) as reader:
                seen.append((done, reader.execute("SELECT count(*) FROM responses").fetchone()[0]))

    client = GatedClient()
    client.release.set()
    execution = run(client, requests_for(*(f"q{i}" for i in range(40))), store_path, concurrency=8, progress=Watching())
    assert execution.stats.calls == 40 and len(seen) == 40
    assert all(stored >= done for done, stored in seen), seen


def test_what_the_process_held_is_frozen_out_of_the_collector_only_while_the_calls_run(tmp_path):
    import gc

    frozen_during: list[bool] = []

    class Looking(ScriptedClient):
        async def complete(self, messages, params, sample=0):
            frozen_during.append(gc.get_freeze_count() > 0)
            return await super().complete(messages, params, sample)

    execution = run(Looking(), requests_for("q1", "q2"), tmp_path / "s.sqlite")
    assert execution.stats.calls == 2 and frozen_during == [True, True]
    assert gc.get_freeze_count() == 0


def test_a_client_that_fails_to_read_one_reply_loses_no_other_reply(tmp_path):
    """D1: whatever is raised reading one reply is that request's error; the replies of every other
    request, in flight beside it, are stored, and the next run asks only the failed one again."""
    client = ScriptedClient({"q3": [OverflowError("int too large to convert to float")]})
    requests = requests_for(*(f"q{i}" for i in range(12)))
    execution = run(client, requests, tmp_path / "s.sqlite", concurrency=4)
    assert execution.stats.errors == 1 and execution.stats.calls == 12
    error = execution.responses["key-q3"].error
    assert error is not None and error.startswith("unusable reply: OverflowError") and "\n" not in error
    again = ScriptedClient()
    resumed = run(again, requests, tmp_path / "s.sqlite")
    assert again.attempts == {"q3": 1} and resumed.stats.cache_hits == 11 and resumed.stats.errors == 0


def test_an_unusable_reply_is_stored_and_paid_for_but_never_served(tmp_path):
    class Refusing(ScriptedClient):
        async def complete(self, messages, params, sample=0):
            completion = await super().complete(messages, params, sample)
            if messages[-1]["content"] == "q1":
                return Completion("A", "stop", {"prompt_tokens": 9}, 0.5, refused="unusable reply: a lie")
            return completion

    requests = requests_for("q1", "q2")
    execution = run(Refusing(), requests, tmp_path / "s.sqlite")
    assert execution.responses["key-q1"].error == "unusable reply: a lie" and execution.stats.errors == 1
    assert execution.stats.cost_usd == pytest.approx(0.51)  # what it cost is counted
    with ResponseStore(tmp_path / "s.sqlite") as store:
        assert store.count() == 2 and set(store.get_many(["key-q1", "key-q2"])) == {"key-q2"}
        assert store.stored_keys(["key-q1", "key-q2"]) == {"key-q2"}
    again = ScriptedClient()
    assert run(again, requests, tmp_path / "s.sqlite").responses["key-q1"].text == "A" and again.attempts == {"q1": 1}
