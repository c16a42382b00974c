"""Model requests -> responses: every call of a run, up front, concurrently, through the store.

Owns what litellm does not do reliably: bounded concurrency (a queue, never rejection), retries
with exponential backoff and full jitter that honour Retry-After, a cost budget, and resumption
from the store. A call that still fails becomes an errored response: counted, never scored.
The retry policy, circuit breaker and budget it applies are in :mod:`biascheck.execution.policy`,
the progress display it reports to in :mod:`biascheck.execution.progress`, the counters it keeps
in :mod:`biascheck.execution.stats`.
"""

from __future__ import annotations

import asyncio
import math
import random
import signal
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from biascheck.core import garbage
from biascheck.core.records import UNUSABLE_REPLY, Response
from biascheck.execution.call_errors import CallError, one_line_error
from biascheck.execution.llm import Completion
from biascheck.execution.policy import Budget, CircuitBreaker, RetryPolicy
from biascheck.execution.progress import NoProgress, Progress
from biascheck.execution.stats import RunStats, RunStatus
from biascheck.execution.store import ResponseStore, StoredResponse, StoreWriteError

T = TypeVar("T")
# A request's key -> the part of the run it counts for besides the whole (a suite's own counters),
# or None: the whole run's alone.
PartOf = Callable[[str], RunStats | None]
# The error of a request never sent because the run had stopped; the run's reason follows.
NOT_RUN = "not run: "


# Parameters the answer is read from or bounded by: a refusal of one of them is the request's
# error (HBB then falls back to sampling; a max_tokens the server refuses must not become unbounded;
# a log-likelihood request without echo would measure nothing).
KEPT_PARAMS = frozenset({"logprobs", "top_logprobs", "max_tokens", "max_completion_tokens", "echo"})


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run's calls, with what the store kept: the answers made so far are committed
    as they arrive, so the same run started again asks only for the rest."""

    def __init__(self, store: object, kept: int | None, requests: int | None = None):
        what = "no call was being made; the answers already stored are" if kept is None else f"{kept:,} of the run's {requests:,} answers are"
        super().__init__(f"interrupted: {what} kept in {store}; run the same command again to resume (stored answers are not asked again)")


@dataclass(frozen=True, slots=True)
class ModelRequest:
    key: str
    messages: list[dict[str, str]]
    params: dict[str, Any]
    sample: int = 0


class ModelClient(Protocol):
    async def complete(self, messages: list[dict[str, str]], params: dict[str, Any], sample: int = 0) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass(repr=False)
class Execution:
    responses: dict[str, Response] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)

    def __repr__(self) -> str:
        # asyncio formats the result of the task that returns it: the full HBB's 773,500 responses
        # made that a 1.3 GB string (the run's peak memory doubled) before it was cut to 50 characters.
        return f"Execution({len(self.responses)} responses, {self.stats.calls} calls)"


def store_request(request: ModelRequest, left_out: dict[str, str]) -> dict[str, Any]:
    """A request as its stored answer records it: as planned (the key's), and the parameters left
    out of what was sent, with why."""
    row: dict[str, Any] = {"messages": request.messages, "params": request.params, "sample": request.sample}
    if left_out:
        row["params_dropped"] = left_out
    return row


def to_store(completion: Completion) -> StoredResponse:
    """A completion as the store keeps it, online or from a batch."""
    return StoredResponse(
        completion.text,
        completion.finish_reason,
        completion.usage,
        completion.cost_usd,
        completion.logprobs,
        completion.truncated,
        completion.served_model,
        completion.system_fingerprint,
        completion.loglikelihood,
        completion.refused,
    )


def from_store(stored: StoredResponse) -> Response:
    """A stored answer as the run reads it: an error when the reply was unusable (only the run
    that received it reads it so; the store serves no such reply to a later run)."""
    return Response(
        text=stored.text,
        error=stored.refused,
        finish_reason=stored.finish_reason,
        usage=stored.usage,
        cost_usd=stored.cost_usd or 0.0,
        logprobs=stored.logprobs,
        truncated=stored.truncated,
        served_model=stored.served_model,
        system_fingerprint=stored.system_fingerprint,
        loglikelihood=stored.loglikelihood,
    )


def run_sync(execution: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(execute(...))``, quiet about what a cancelled attempt leaves behind: Ctrl-C
    or the deadline (--biascheck-timeout) cancels calls litellm had begun to create (in a thread,
    before any request was sent), and Python then reports their coroutines as never awaited. Quiet
    too about pydantic's remarks on an odd reply made by litellm's success handlers, tasks that may
    run after the calls and their own filter (Executor.call)."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            return asyncio.run(execution)
    finally:
        caught = [w for w in caught if not (issubclass(w.category, RuntimeWarning) and "was never awaited" in str(w.message))]
        caught = [w for w in caught if not (issubclass(w.category, UserWarning) and "pydantic" in Path(w.filename).parts)]
        for w in caught:  # every other warning, as if never caught
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


@contextmanager
def interrupted_at_once() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt at once in the block, code that blocks the event loop it runs
    in (opening a client: the simulator starts, litellm is imported, 3.5 s of CPU). asyncio.run's
    handler of SIGINT only cancels its task, which takes effect at the task's next await: a Ctrl-C
    during the import waited for all of it (10 s on a loaded machine). While the loop is blocked no
    other task runs, so the interrupt is as safe there as outside a loop. A SIGINT ignored, or not
    asyncio.run's to handle, is left as it is."""
    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not _is_asyncio_runners(handler):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


def _is_asyncio_runners(handler: object) -> bool:
    """Whether a SIGINT handler is asyncio.run's (``Runner._on_sigint``, bound in a partial)."""
    func = getattr(handler, "func", None)
    return getattr(func, "__qualname__", None) == "Runner._on_sigint"


async def execute(
    requests: Sequence[ModelRequest],
    *,
    store: ResponseStore,
    model_name: str,
    open_client: Callable[[], AbstractContextManager[ModelClient]],
    concurrency: int = 32,
    policy: RetryPolicy = RetryPolicy(),
    budget: Budget | None = None,
    progress: Progress = NoProgress(),
    shared_errors: dict[str, str] | None = None,
    offline: str | None = None,
    label: str | None = None,
    breaker: CircuitBreaker | None = None,
    backend: Backend | None = None,
    part_of: PartOf | None = None,
) -> Execution:
    """Answer every request: from the store, from ``shared_errors`` (another xdist worker's), or by
    calling; with ``offline`` (why no call may be made) a request missing from the store is that error.
    ``backend`` answers what the store lacks another way than online calls (provider batches).
    ``part_of`` names the counters (a suite's) that a request's counts go to besides the execution's."""
    executor = Executor(
        store, model_name, policy=policy, budget=budget or Budget(None), breaker=breaker or CircuitBreaker(), progress=progress, part_of=part_of
    )
    pending = executor.answer_without_calling(requests, shared_errors or {}, offline)
    if pending:
        if backend is None:
            await executor.call(pending, open_client, concurrency, label)
        else:
            await backend(executor, pending, open_client, concurrency, label)
    return executor.finish()


class Answering(Protocol):
    """What a backend (provider batches: execution/batch_runner.py) may use of the execution it
    answers for: its settings, its counters and progress display, and its responses through these
    methods alone. :class:`Executor` is the implementation."""

    store: ResponseStore
    model_name: str
    stats: RunStats
    policy: RetryPolicy
    budget: Budget
    progress: Progress

    @property
    def requested(self) -> int:
        """The execution's distinct requests."""
        ...

    @property
    def answered(self) -> int:
        """How many of them have a response (an answer or an error)."""
        ...

    def count(self, key: str | None, **counts: float) -> None:
        """Add to the execution's counters and to those of the part ``key`` counts for (None: no part)."""
        ...

    def has(self, key: str) -> bool: ...

    def respond(self, key: str, response: Response) -> None:
        """The response of a request, final: stored answers are put in the store by the backend."""
        ...

    def keep_dropped(self, dropped: dict[str, str]) -> None:
        """Parameters the provider refused (name -> why), recorded with the execution's answers."""
        ...

    async def call_online(
        self, pending: list[ModelRequest], open_client: Callable[[], AbstractContextManager[ModelClient]], concurrency: int, label: str | None
    ) -> None:
        """Answer ``pending`` by online calls, as an execution without a backend does."""
        ...


# How the requests the store lacks are answered: Executor.call (online, the default) or another
# backend given the execution (through :class:`Answering`), the requests, the client factory, the
# concurrency and the progress label.
Backend = Callable[[Answering, list[ModelRequest], Callable[[], AbstractContextManager[ModelClient]], int, str | None], Awaitable[None]]


class Executor:
    """One execution: the store's answers first, then the missing ones called concurrently.

    Workers take requests from a queue, so concurrency is a bound, never a rejection. A call starts
    only when the budget and the circuit breaker allow it; both change only when a call returns,
    so a worker that must wait sleeps on ``turn``, which every returning call notifies."""

    def __init__(
        self,
        store: ResponseStore,
        model_name: str,
        *,
        policy: RetryPolicy,
        budget: Budget,
        breaker: CircuitBreaker,
        progress: Progress,
        part_of: PartOf | None = None,
    ):
        self.store, self.model_name, self.policy, self.budget, self.breaker, self.progress = store, model_name, policy, budget, breaker, progress
        self.run = Execution()
        self.stats = self.run.stats
        self.part_of = part_of
        self.unique: list[ModelRequest] = []
        # A parameter the server refused is left out from then on; the row records what was left out.
        self.dropped: dict[str, str] = {}
        self.dropped_before: dict[str, str] = {}
        self.rng = random.Random(0)
        self.turn: asyncio.Condition | None = None  # made inside the event loop that runs the calls
        self.done = 0
        self.waiting = 0  # workers sleeping on ``turn``
        self._unwritten: _Rows | None = None  # see keep
        self.kept = 0  # answers this execution stored

    def answer_without_calling(self, requests: Sequence[ModelRequest], shared_errors: dict[str, str], offline: str | None) -> list[ModelRequest]:
        """Answers from the store and from other workers' errors; what is left to call (nothing offline)."""
        run, stats = self.run, self.stats
        self.unique = list({r.key: r for r in requests}.values())
        self.count_each([r.key for r in self.unique], "requests")
        for key, stored in self.store.get_many(r.key for r in self.unique).items():
            run.responses[key] = from_store(stored)
        self.count_each(list(run.responses), "cache_hits")
        wanted = {r.key for r in self.unique}
        for key, error in shared_errors.items():
            if key in wanted and key not in run.responses:
                run.responses[key] = Response(text=None, error=error)
                if error.startswith(NOT_RUN):
                    self.count(key, errors=1, not_run=1)
                    stats.stop_with(error[len(NOT_RUN) :])
                else:
                    self.count(key, errors=1)
        # Answers made without a refused parameter say so in the store: a warm run reports it too.
        # What stored answers were made without is reported again; new requests try every parameter,
        # so a server that has since accepted one (or a refusal that was a one-off) is not held against it.
        self.dropped_before = self.store.dropped_params(k for k in run.responses) if run.responses else {}
        pending = [r for r in self.unique if r.key not in run.responses]
        if offline is not None:
            for request in pending:
                run.responses[request.key] = Response(text=None, error=offline)
            self.count_each([r.key for r in pending], "errors")
            return []
        return pending

    # --- Answering: what a backend uses (see the protocol) --------------------------------------

    @property
    def requested(self) -> int:
        return len(self.unique)

    @property
    def answered(self) -> int:
        return len(self.run.responses)

    def count(self, key: str | None, **counts: float) -> None:
        # Counted as they happen, in both: the execution's counters feed the budget and the progress display.
        part = self.part_of(key) if self.part_of is not None and key is not None else None
        for stats in (self.stats, part) if part is not None else (self.stats,):
            for name, n in counts.items():
                setattr(stats, name, getattr(stats, name) + n)

    def count_each(self, keys: list[str], name: str) -> None:
        """One more of ``name`` for each key: :meth:`count` for many (a warm run's every request)."""
        setattr(self.stats, name, getattr(self.stats, name) + len(keys))
        if self.part_of is not None:
            for key in keys:
                part = self.part_of(key)
                if part is not None:
                    setattr(part, name, getattr(part, name) + 1)

    def has(self, key: str) -> bool:
        return key in self.run.responses

    def respond(self, key: str, response: Response) -> None:
        self.run.responses[key] = response

    def keep_dropped(self, dropped: dict[str, str]) -> None:
        self.dropped.update(dropped)

    async def call_online(
        self, pending: list[ModelRequest], open_client: Callable[[], AbstractContextManager[ModelClient]], concurrency: int, label: str | None
    ) -> None:
        await self.call(pending, open_client, concurrency, label)

    async def call(
        self, pending: list[ModelRequest], open_client: Callable[[], AbstractContextManager[ModelClient]], concurrency: int, label: str | None
    ) -> None:
        self.progress.start(len(self.unique), self.stats, label)
        self.done = len(self.run.responses)
        self.turn = asyncio.Condition()
        queue: asyncio.Queue[ModelRequest] = asyncio.Queue()
        for request in pending:
            queue.put_nowait(request)
        frozen = interrupted = False
        try:
            with ExitStack() as opened:
                with interrupted_at_once():  # opening it blocks the event loop: see interrupted_at_once
                    client = opened.enter_context(open_client())
                opened.enter_context(warnings.catch_warnings())
                # While the calls run, the collector leaves alone what the process held before them
                # (the suites' cases, litellm's modules, which opening the client may have imported:
                # hundreds of thousands of objects). Each full collection walked all of them, set off by
                # the calls' short-lived objects: a third of the CPU of a call on the fast path. (Thawed
                # after the calls; a freeze that holds around them, the pytest plugin's, keeps the heap
                # frozen: see biascheck.core.garbage.)
                garbage.freeze()
                frozen = True
                # pydantic's remarks on litellm's response types (serializer warnings on an odd reply,
                # schema notes on first use) are litellm's business, not the user's.
                warnings.filterwarnings("ignore", category=UserWarning, module=r"pydantic\.")
                try:
                    await asyncio.gather(*(self.worker(client, queue) for _ in range(min(concurrency, len(pending)))))
                finally:
                    await client.aclose()
        except (asyncio.CancelledError, KeyboardInterrupt):  # Ctrl-C: asyncio.run cancels the execution
            interrupted = True
            raise
        finally:
            self._write()  # answers whose workers were cancelled (Ctrl-C) before their rows were written
            if frozen:
                garbage.thaw()
            # Interrupted, the last line counts the answers in the store: those found there and those stored.
            self.progress.stop(self.stats, self.stats.cache_hits + self.kept if interrupted else None)

    def finish(self) -> Execution:
        _note_params(self.run, self.unique, {**self.dropped_before, **self.dropped}, self.model_name)
        return self.run

    async def worker(self, client: ModelClient, queue: asyncio.Queue[ModelRequest]) -> None:
        while True:
            try:
                request = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            response = await self.answer(client, request)
            self.run.responses[request.key] = response
            if response.errored:
                self.count(request.key, errors=1)
            self.done += 1
            self.progress.update(self.done, self.stats)

    def may_start(self) -> bool:
        return not (self.budget.must_wait() or self.breaker.must_wait(self.budget.in_flight))

    async def my_turn(self) -> None:
        """Wait until the budget and the breaker let a call start (only a budget or an endpoint
        that has not replied yet can hold it: the caller asks only then)."""
        assert self.turn is not None
        async with self.turn:
            self.waiting += 1
            try:
                await self.turn.wait_for(self.may_start)
            finally:
                self.waiting -= 1

    def returned(self) -> bool:
        """A call came back: True when a worker sleeps on ``turn``, which must then be woken (:meth:`wake`):
        the budget and the breaker may now let it start."""
        self.budget.in_flight -= 1
        return self.waiting > 0

    async def wake(self) -> None:
        assert self.turn is not None
        async with self.turn:
            self.turn.notify_all()

    async def answer(self, client: ModelClient, request: ModelRequest) -> Response:
        """One request's response: a completion, or the error it ended with after its retries."""
        stats, budget, breaker, policy = self.stats, self.budget, self.breaker, self.policy
        retry = 0
        while True:
            # The store key keeps the request as planned, so a re-run finds this answer.
            params = {k: v for k, v in request.params.items() if k not in self.dropped} if self.dropped else request.params
            if budget.max_cost_usd is not None or not breaker.replied:
                await self.my_turn()
            if stats.incomplete:
                self.count(request.key, not_run=1)
                return Response(text=None, error=NOT_RUN + stats.incomplete)
            if budget.exhausted(stats):
                stats.stop(RunStatus.BUDGET_REACHED, f"budget of ${budget.max_cost_usd:g} reached")
                continue
            budget.in_flight += 1
            try:
                completion = await client.complete(request.messages, params, request.sample)
            except CallError as exc:
                self.count(request.key, calls=1)  # counted as it returns: an attempt cut off by Ctrl-C answered nothing
                if self.returned():
                    await self.wake()
                if not exc.unreachable:
                    breaker.reply()
                elif breaker.trips(str(exc), time.monotonic()):
                    stats.stop(RunStatus.FATAL_MODEL_ERROR, breaker.reason(str(exc)))
                    return Response(text=None, error=str(exc))
                droppable = [p for p in exc.rejected if p in params and p not in KEPT_PARAMS]
                if droppable:
                    # Not a retry: the next attempt is another request, without what was refused.
                    who = "litellm for this provider" if "UnsupportedParamsError" in str(exc) else "the server"
                    for name in droppable:
                        self.dropped.setdefault(name, f"refused by {who}, not sent: {exc}")
                    continue
                if exc.fatal:
                    stats.stop(RunStatus.FATAL_MODEL_ERROR, str(exc))
                    return Response(text=None, error=str(exc))
                too_long = exc.retry_after is not None and exc.retry_after > policy.max_retry_after
                if not exc.retryable or retry >= policy.max_retries or too_long:
                    attempts = retry + 1
                    why = ""
                    if too_long and exc.retryable and retry < policy.max_retries:
                        # Given up at once: retrying early would only meet the same refusal.
                        asked = math.ceil((exc.retry_after or 0.0) * 10) / 10  # too_long: not None
                        why = f"the server asked to wait {asked:g} s, more than the {policy.max_retry_after:g} s cap; "
                    return Response(text=None, error=f"{exc} ({why}after {attempts} attempt{'s' if attempts > 1 else ''})")
                await asyncio.sleep(policy.delay(retry, exc.retry_after, self.rng))
                retry += 1
                self.count(request.key, retries=1)
                continue
            except Exception as exc:
                # A client that failed to read what came back (a bug, not a reply's fault: replies
                # are checked as they are read): this request's error. Raised on, it would end the
                # run and lose the replies in flight of every other worker.
                self.count(request.key, calls=1, unpriced_calls=1)
                if self.returned():
                    await self.wake()
                breaker.reply()
                return Response(text=None, error=f"{UNUSABLE_REPLY}{type(exc).__name__}: {one_line_error(exc)}")
            breaker.reply()
            if completion.cost_usd is None:
                self.count(request.key, calls=1, unpriced_calls=1)
            else:
                self.count(request.key, calls=1, cost_usd=completion.cost_usd)
                budget.priced_calls += 1
            if self.returned():  # after the price is counted: the budget's estimate needs it
                await self.wake()
            return await self.keep(request, params, completion)

    async def keep(self, request: ModelRequest, params: dict[str, Any], completion: Completion) -> Response:
        """Store a completion as it arrives; the response the run reads is the stored one.

        The answers that arrive in one turn of the event loop are committed together, in one
        transaction, before any of their workers goes on (a commit per answer cost more CPU than
        the rest of a call): an answer is returned only once it is stored, and a kill loses at most
        the answers of the turn in progress, as it loses the calls in flight."""
        stored = to_store(completion)
        left_out = {k: self.dropped[k] for k in request.params if k not in params} if self.dropped else {}
        loop = asyncio.get_running_loop()
        rows = self._unwritten
        if rows is None:
            rows = self._unwritten = _Rows([], [], {})
            loop.call_soon(self._write)
        rows.rows.append((request.key, self.model_name, store_request(request, left_out), stored))
        written = loop.create_future()
        rows.written.append(written)
        await written
        error = rows.failed.get(request.key)
        if error is not None:
            # What is stored stays; this answer is asked again when the run resumes.
            self.stats.stop(RunStatus.STORE_FAILURE, error)
            return Response(text=None, error=error)
        return from_store(stored)

    def _write(self) -> None:
        """Commit the answers kept since the last commit: in one transaction, or, when that fails
        (a full disk), one by one, so that what fits is kept and each answer that is not says why."""
        rows, self._unwritten = self._unwritten, None
        if rows is None:
            return
        try:
            self.store.put_many(rows.rows)
            self.kept += len(rows.rows)
        except StoreWriteError:
            for row in rows.rows:
                try:
                    self.store.put(*row)
                    self.kept += 1
                except StoreWriteError as exc:
                    rows.failed[row[0]] = str(exc)
        for written in rows.written:
            if not written.done():  # (a worker cancelled meanwhile: Ctrl-C)
                written.set_result(None)


@dataclass(slots=True)
class _Rows:
    """Answers kept in one turn of the event loop, and when they are written (see Executor.keep)."""

    rows: list[tuple[str, str, dict[str, Any], StoredResponse]]
    written: list[asyncio.Future[None]]  # one per worker waiting for its row
    failed: dict[str, str]  # key -> why its row could not be written


def _note_params(run: Execution, requests: Sequence[ModelRequest], dropped: dict[str, str], model_name: str) -> None:
    """Record the run's refused parameters, and those a provider visibly ignored."""
    used = {name for r in requests for name in r.params}
    notes = {name: reason for name, reason in dropped.items() if name in used}
    if notes:
        run.stats.params_dropped[model_name] = notes
    ignored: dict[str, str] = {}
    for name, kept, what in (("echo", "loglikelihood", "prompt log-probabilities"), ("logprobs", "logprobs", "log-probabilities")):
        asked = [
            run.responses[r.key] for r in requests if r.params.get(name) and name not in dropped and (name == "echo" or not r.params.get("echo"))
        ]
        answered = [r for r in asked if not r.errored and r.finish_reason != "content_filter"]
        if answered and all(getattr(r, kept) is None for r in answered):
            ignored[name] = f"accepted, but none of {len(answered)} replies carried {what}"
    if ignored:
        run.stats.params_ignored[model_name] = ignored
