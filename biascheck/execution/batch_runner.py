"""Model requests -> responses through provider batches, resumable from the store.

A batch is recorded in the store before it is created at the provider, and its record names every
request key in it. A run that finds records of its keys polls those batches instead of sending the
keys again, so a run killed at any point, or a CI job started again, never pays twice:
- ``submitting``: created or not, depending on when the kill came; the provider is asked (by the
  batch's metadata) and only a submission it never received is sent again;
- ``running``: polled until it ends, then collected;
- ended (``collected``, ``failed``, ``expired``, ``cancelled``, or ``lost`` when the provider
  answers 404 for it): its answers are in the store and its failed requests in ``run_errors``
  under ``batch:<id>``. A request of an ended batch with
  neither (collected by a run that did not ask for it) is read again from the provider's output.

Failed requests are errored responses, counted and never scored, unless ``resend`` sends them again
as a new batch or online. Answers land in the same store rows as online answers.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from biascheck.core.errors import BiascheckError
from biascheck.core.records import Response
from biascheck.core.spelling import option
from biascheck.execution.batches import (
    BatchAPI,
    BatchLine,
    BatchOptions,
    BatchStatus,
    new_submission,
    open_batch_api,
    split,
)
from biascheck.execution.call_errors import CallError
from biascheck.execution.llm import Completion, LiteLLMClient, params_as_sent
from biascheck.execution.runner import NOT_RUN, Answering, Backend, ModelClient, ModelRequest, from_store, store_request, to_store
from biascheck.execution.stats import RunStatus
from biascheck.execution.store import BatchRecord, ResponseStore, StoredResponse, StoreWriteError, shared_values

SUBMITTING, RUNNING = "submitting", "running"
ENDED = frozenset({"collected", "failed", "expired", "cancelled", "lost"})
ERRORS_RUN_PREFIX = "batch:"  # run_errors.run_id of a batch's failed requests
_STORE_ROWS_PER_TRANSACTION = 5_000


def in_batches(options: BatchOptions) -> Backend:
    """The batch backend of ``execute``: what the store lacks goes as provider batches."""

    async def answer(
        execution: Answering,
        pending: list[ModelRequest],
        open_client: Callable[[], AbstractContextManager[ModelClient]],
        concurrency: int,
        label: str | None,
    ) -> None:
        await BatchRun(execution, options).run(pending, open_client, concurrency, label)

    return answer


def refuse_open_batches(store: ResponseStore, model: str, keys: Iterable[str]) -> None:
    """An online run sends none of the requests a batch an earlier run submitted holds and has not
    collected: the provider answers them (or did), so calling would pay for them twice. Refused in
    one line that says how to collect the batch, or to cancel it and pay again."""
    wanted = set(keys)
    held: dict[str, set[str]] = {}  # batch (the provider's id, else biascheck's) -> this run's keys in it
    for record in store.batches(model):
        if record.state in (SUBMITTING, RUNNING):
            keys_in = wanted.intersection(record.keys)
        elif record.state in ("collected", "expired", "cancelled"):  # ended: what it answered may be unread
            errors = store.run_errors(ERRORS_RUN_PREFIX + record.id)
            keys_in = {k for k in wanted.intersection(record.keys) if k not in errors}
        else:  # failed, lost: nothing to collect
            continue
        if keys_in:
            held[record.batch_id or record.id] = keys_in
    if not held:
        return
    answered = store.stored_keys(set().union(*held.values()), unusable_too=True)  # read from the batch, usable or not
    held = {batch: keys_in - answered for batch, keys_in in held.items() if keys_in - answered}
    if held:
        count = len(set().union(*held.values()))
        raise BiascheckError(
            store.path,
            None,
            f"{count:,} of this run's requests are in {len(held)} provider batch{'es' if len(held) > 1 else ''} an earlier run submitted, "
            f"not yet collected ({', '.join(list(held)[:3])}{', ...' if len(held) > 3 else ''}); sending them online would pay for them twice",
            f"collect them with {option('batch')} (add {option('batch-wait')}=no to take only what has ended, without waiting), "
            f"or cancel the batch at the provider and run with {option('batch')} {option('batch-resend')}=online to pay again online",
        )


class BatchRun:
    """One run's batches: submit what no batch holds, poll the open ones, collect the ended ones."""

    def __init__(self, execution: Answering, options: BatchOptions):
        self.execution, self.options = execution, options
        self.store, self.stats, self.model = execution.store, execution.stats, execution.model_name
        self.requests: dict[str, ModelRequest] = {}
        self.records: dict[str, BatchRecord] = {}  # this run's keys' batches, by biascheck's id
        self.progress_of: dict[str, BatchStatus] = {}  # the provider's last word on each running batch
        self.failed: dict[str, str] = {}  # key -> why its batch did not answer it
        self.rng = random.Random(0)
        self.first_poll: tuple[float, int] | None = None  # (when, requests done then): the pace's origin
        self.dropped: dict[str, str] = {}
        self.shared: dict[object, Any] = {}  # equal values of the answers, held once (store.shared_values)

    async def run(
        self, pending: list[ModelRequest], open_client: Callable[[], AbstractContextManager[ModelClient]], concurrency: int, label: str | None
    ) -> None:
        self.requests = {r.key: r for r in pending}
        self.execution.progress.start(self.execution.requested, self.stats, label)
        try:
            with open_client() as client:
                if not isinstance(client, LiteLLMClient):
                    raise BiascheckError(f"{option('batch')}", None, "batch mode needs a litellm model client", f"run without {option('batch')}")
                api = open_batch_api(client)
                try:
                    await self.answer(api)
                finally:
                    self.dropped.update(api.dropped)
                    await api.aclose()
        finally:
            self.execution.progress.stop(self.stats)
        remainder = [self.requests[k] for k in self.failed if not self.execution.has(k)]
        if remainder and self.options.resend == "online" and not self.stats.incomplete:
            for request in remainder:
                self.failed.pop(request.key)
            await self.execution.call_online(remainder, open_client, concurrency, label)
        self.settle()

    # --- the stages -------------------------------------------------------------------------------

    async def answer(self, api: BatchAPI) -> None:
        try:
            await self.stages(api)
        except CallError as exc:
            # The provider gave no word on a batch (its retries spent, or a refusal): the run stops, and
            # what it submitted stays recorded, so the next run polls and collects it.
            self.stats.stop(
                RunStatus.FATAL_MODEL_ERROR, f"{exc}; the batches submitted stay open: run again with the same response store to collect them"
            )

    async def stages(self, api: BatchAPI) -> None:
        wanted = set(self.requests)
        for record in self.store.batches(self.model):
            if wanted.intersection(record.keys):
                self.records[record.id] = record
        for record in [r for r in self.records.values() if r.state == SUBMITTING]:
            await self.reconcile(api, record)
        # Ended batches first: their answers may be in the provider's output still (see the module's doc).
        await self.reread(api)
        held = {k for r in self.records.values() for k in r.keys}
        new = [k for k in self.requests if k not in held]
        if self.options.resend == "batch":
            new += self.take_failed()
        if new:
            self.check_budget(api, new)
            await self.submit(api, new)
        await self.poll(api)
        if self.options.resend == "batch" and not self.stats.incomplete:
            again = self.take_failed()  # what failed in this run's batches: sent once more
            if again:
                await self.submit(api, again)
                await self.poll(api)

    async def reconcile(self, api: BatchAPI, record: BatchRecord) -> None:
        """A submission a kill interrupted: the batch the provider made of it, or none."""
        status = await self.attempt(api.find, record.id, keys=record.keys)
        if status is None:
            self.store.forget_batch(record.id)
            del self.records[record.id]
            return
        self.records[record.id] = self.save(replace(record, batch_id=status.batch_id, state=RUNNING))

    async def reread(self, api: BatchAPI) -> None:
        for record in [r for r in self.records.values() if r.state in ENDED]:
            known = self.store.run_errors(ERRORS_RUN_PREFIX + record.id)
            unread = [k for k in record.keys if k in self.requests and not self.execution.has(k) and k not in known]
            for key in record.keys:
                if key in self.requests and key in known and not self.execution.has(key):
                    self.failed[key] = known[key]
            if unread and record.batch_id is not None:
                await self.collect(api, record, await self.attempt(api.status, record.batch_id, keys=record.keys))

    def take_failed(self) -> list[str]:
        keys = [k for k in self.failed if not self.execution.has(k)]
        self.failed.clear()
        return keys

    def check_budget(self, api: BatchAPI, keys: list[str]) -> None:
        """Under --biascheck-max-cost, the batch's most expensive outcome is priced before anything
        is sent: its prompt tokens as litellm counts them, and max_tokens for every answer."""
        budget = self.execution.budget.max_cost_usd
        if budget is None:
            return
        client = api.client
        prompt_tokens, answer_tokens, counted = 0, 0, {}
        for key in keys:
            request = self.requests[key]
            limit = request.params.get("max_tokens") or request.params.get("max_completion_tokens") or api.default_max_tokens
            if not isinstance(limit, int):
                raise BiascheckError(
                    f"{option('max-cost')}",
                    None,
                    "the batch's cost cannot be bounded: its requests set no max_tokens",
                    f"set one ({option('param')} max_tokens=N) or run without {option('max-cost')}",
                )
            messages = request.messages
            if id(messages) not in counted:  # the k samples of a prompt share its messages
                counted[id(messages)] = client.litellm.token_counter(model=client.model, messages=messages)
            prompt_tokens += counted[id(messages)]
            answer_tokens += limit
        cost = client.cost({"prompt_tokens": prompt_tokens, "completion_tokens": answer_tokens}, batch=True)
        left = budget - self.stats.cost_usd
        if cost is None:
            raise BiascheckError(
                f"{option('max-cost')}",
                None,
                f"litellm has no price for {client.config.model}",
                f"pass {option('price')} INPUT/OUTPUT (USD per million tokens)",
            )
        if cost > left:
            raise BiascheckError(
                f"{option('max-cost')}",
                None,
                f"the batch of {len(keys):,} requests could cost up to ${cost:.4f} at {api.provider}'s batch rate "
                f"({prompt_tokens:,} prompt tokens, up to {answer_tokens:,} answer tokens), over the ${left:.4f} left of the budget; nothing was sent",
                f"raise {option('max-cost')}, lower max_tokens, or select fewer cases",
            )

    async def submit(self, api: BatchAPI, keys: list[str]) -> None:
        max_requests, max_bytes = api.limits
        max_requests = min(max_requests, self.options.max_requests or max_requests)
        max_bytes = min(max_bytes, self.options.max_bytes or max_bytes)
        for chunk in split(self.lines(api, keys), max_requests, max_bytes):
            if self.stats.incomplete:
                return
            await self.submit_one(api, chunk)

    def lines(self, api: BatchAPI, keys: Iterable[str]) -> Iterator[BatchLine]:
        """Made one at a time: the full HBB's 773,500 requests never sit in memory as JSON."""
        for key in keys:
            request = self.requests[key]
            # Sent as an online call would send it (its seed the request's own: llm.request_seed).
            yield api.line(key, request.messages, params_as_sent(request.params, request.messages, request.sample), request.sample)

    async def submit_one(self, api: BatchAPI, chunk: list[BatchLine]) -> None:
        now = time.time()
        record = BatchRecord(new_submission(), api.provider, self.model, None, tuple(line.key for line in chunk), SUBMITTING, now, now)
        try:
            self.store.add_batch(record)  # before the provider hears of it
        except StoreWriteError as exc:
            self.stats.stop(RunStatus.STORE_FAILURE, str(exc))
            return
        self.records[record.id] = record
        try:
            # A failed creation may have reached the provider (its reply lost): looked up before each retry.
            status = await self.attempt(api.submit, chunk, record.id, made=lambda: api.find(record.id), keys=record.keys)
        except CallError as exc:
            # Creation may have happened before the failure was seen: ask before letting the keys go.
            found = None
            if not exc.fatal:
                try:
                    found = await self.attempt(api.find, record.id, keys=record.keys)
                except CallError:
                    found = None
            if found is None:
                self.store.forget_batch(record.id)
                del self.records[record.id]
                if exc.fatal:
                    self.stats.stop(RunStatus.FATAL_MODEL_ERROR, str(exc))
                for line in chunk:
                    self.failed[line.key] = str(exc)
                return
            status = found
        for line in chunk:
            self.execution.count(line.key, calls=1)
        self.records[record.id] = self.save(replace(record, batch_id=status.batch_id, state=RUNNING))
        self.progress_of[record.id] = status
        self.report()

    async def poll(self, api: BatchAPI) -> None:
        while True:
            running = [r for r in self.records.values() if r.state == RUNNING]
            for record in running:
                assert record.batch_id is not None
                status = await self.attempt(api.status, record.batch_id, keys=record.keys)
                self.progress_of[record.id] = status
                if status.ended:
                    await self.collect(api, record, status)
            self.report()
            if not any(r.state == RUNNING for r in self.records.values()) or not self.options.wait or self.stats.incomplete:
                return
            await asyncio.sleep(self.options.poll_interval)

    async def collect(self, api: BatchAPI, record: BatchRecord, status: BatchStatus) -> None:
        """Store an ended batch's answers (in transactions of 5,000) and record its failed requests."""
        params_of = {k: self.requests[k].params for k in record.keys if k in self.requests}
        results = await self.attempt(api.results, status, params_of, keys=record.keys) if status.state not in ("failed", "lost") else []
        answered: set[str] = set()
        errors: dict[str, str] = {}
        rows: list[tuple[str, str, dict[str, Any], StoredResponse]] = []
        for key, got in results:
            if isinstance(got, str):
                errors[key] = got
                continue
            answered.add(key)
            request = self.requests[key]
            left_out = {k: v for k, v in self.dropped.items() if k in request.params}
            rows.append((key, self.model, store_request(request, left_out), self.stored(key, got)))
            if len(rows) >= _STORE_ROWS_PER_TRANSACTION:
                self.keep(rows)
                rows = []
        self.keep(rows)
        why = f"batch {status.batch_id} {status.state}" + (f" ({status.detail})" if status.detail else "")
        for key in params_of:
            if key not in answered and key not in errors:
                errors[key] = f"{why}: no answer for this request"
        try:
            if errors:
                self.store.record_run_errors(ERRORS_RUN_PREFIX + record.id, errors)
            ended = "collected" if status.state == "completed" else status.state
            self.records[record.id] = self.save(
                replace(
                    record,
                    state=ended,
                    detail=status.detail if ended == "lost" else f"{status.done - status.failed} answered, {status.failed} failed",
                )
            )
        except StoreWriteError as exc:
            self.stats.stop(RunStatus.STORE_FAILURE, str(exc))
        for key, error in errors.items():
            self.failed[key] = error
        self.execution.progress.update(self.execution.answered, self.stats)

    # --- helpers ------------------------------------------------------------------------------

    def stored(self, key: str, completion: Completion) -> StoredResponse:
        if completion.cost_usd is None:
            self.execution.count(key, unpriced_calls=1)
        else:
            self.execution.count(key, cost_usd=completion.cost_usd)
        return shared_values(to_store(completion), self.shared)

    def keep(self, rows: list[tuple[str, str, dict[str, Any], StoredResponse]]) -> None:
        if not rows:
            return
        try:
            self.store.put_many(rows)
        except StoreWriteError as exc:
            self.stats.stop(RunStatus.STORE_FAILURE, str(exc))
            return
        for key, _, _, stored in rows:
            self.execution.respond(key, from_store(stored))
            if stored.refused is not None:  # an unusable reply: its request's error
                self.execution.count(key, errors=1)

    def save(self, record: BatchRecord) -> BatchRecord:
        record = replace(record, updated_at=time.time())
        self.store.update_batch(record)
        return record

    async def attempt(self, call: Callable[..., Any], *args: Any, made: Callable[[], Awaitable[Any]] | None = None, keys: Sequence[str] = ()) -> Any:
        """One batch API call, retried with the run's policy (backoff with jitter, Retry-After).
        ``made``, for a call that creates something: asked before each retry whether the failed
        attempt created it after all; what it finds (not None) is the call's result. ``keys``: the
        batch's requests; a retry counts for the part (suite) of its first request of this run."""
        policy, retry = self.execution.policy, 0
        while True:
            try:
                if retry and made is not None:
                    found = await made()
                    if found is not None:
                        return found
                return await call(*args)
            except CallError as exc:
                if exc.fatal or not exc.retryable or retry >= policy.max_retries:
                    raise CallError(f"{exc} (after {retry + 1} attempt{'s' if retry else ''})", retryable=False, fatal=exc.fatal) from None
                await asyncio.sleep(policy.delay(retry, exc.retry_after, self.rng))
                retry += 1
                self.execution.count(next((k for k in keys if k in self.requests), None), retries=1)

    def report(self) -> None:
        """One line for the progress display: the batches by state, requests done, the expected finish."""
        states = [r.state for r in self.records.values()]
        running = [self.progress_of[r.id] for r in self.records.values() if r.state == RUNNING and r.id in self.progress_of]
        total = sum(len(r.keys) for r in self.records.values())
        done = (
            total
            - sum(s.total - s.done for s in running)
            - sum(len(r.keys) for r in self.records.values() if r.state == RUNNING and r.id not in self.progress_of)
        )
        now = time.monotonic()
        if self.first_poll is None:
            self.first_poll = (now, done)
        eta = "expected finish unknown"
        since, done_then = self.first_poll
        if done >= total:
            eta = "all done"
        elif done > done_then and now > since:
            left = (total - done) * (now - since) / (done - done_then)
            finish = datetime.now(UTC) + timedelta(seconds=left)
            eta = f"expected finish {finish:%H:%M:%S} UTC (in {timedelta(seconds=round(left))})"
        failed = sum(states.count(s) for s in ("failed", "expired", "cancelled", "lost"))
        self.execution.progress.note(
            f"batches: {len(states)} submitted, {states.count(RUNNING)} in progress, {states.count('collected')} completed, "
            f"{failed} failed or expired; {done:,} of {total:,} requests done; {eta}"
        )

    def settle(self) -> None:
        """Every request of the run has a response: an answer, its error, or "not run"."""
        execution, stats = self.execution, self.stats
        waiting = [
            k for r in self.records.values() if r.state in (RUNNING, SUBMITTING) for k in r.keys if k in self.requests and not execution.has(k)
        ]
        if waiting and not stats.incomplete:
            batches = len({r.id for r in self.records.values() if r.state in (RUNNING, SUBMITTING)})
            stats.stop(
                RunStatus.BATCH_PENDING,
                f"{len(waiting):,} requests in {batches} batch{'es' if batches > 1 else ''} submitted and not yet answered; "
                "run again with the same response store to collect and score them",
            )
        for key in self.requests:
            if execution.has(key):
                continue
            if key in self.failed:
                execution.respond(key, Response(text=None, error=self.failed[key]))
                execution.count(key, errors=1)
            else:
                execution.respond(key, Response(text=None, error=NOT_RUN + (stats.incomplete or "not run")))
                execution.count(key, not_run=1, errors=1)
        self.execution.keep_dropped(self.dropped)
        for record in self.records.values():
            state = RUNNING if record.state == SUBMITTING else record.state
            stats.batches[state] = stats.batches.get(state, 0) + 1
