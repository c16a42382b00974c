"""The progress display of an execution's calls: the protocol the runner reports to, a display that
shows nothing, and :class:`RichProgress` (a live bar on a terminal, a line every interval in a log)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from biascheck.execution.stats import RunStats


class Progress(Protocol):
    # ``label`` names whose calls these are when it is not the model under test (a BBG judge).
    def start(self, total: int, stats: RunStats, label: str | None = None) -> None: ...

    def update(self, done: int, stats: RunStats) -> None: ...

    # What a batch run has to say besides requests answered: its batches and expected finish.
    def note(self, text: str) -> None: ...

    # ``interrupted``: the execution was cut short (Ctrl-C), with this many of its requests'
    # answers in the store (those it found there and those it stored); None: it ran to its end.
    def stop(self, stats: RunStats, interrupted: int | None = None) -> None: ...


class NoProgress:
    def start(self, total: int, stats: RunStats, label: str | None = None) -> None: ...

    def update(self, done: int, stats: RunStats) -> None: ...

    def note(self, text: str) -> None: ...

    def stop(self, stats: RunStats, interrupted: int | None = None) -> None: ...


class RichProgress:
    """A live bar on a terminal. Elsewhere (a CI log) a line at the start, one every ``interval``
    seconds while calls run, and one at the end: the timer is a thread, so a log shows a stalled
    endpoint as a run that is alive and answers nothing. ``label`` is rich markup: callers escape any
    user text in it (a model string may contain "["). ``clock`` is for tests."""

    def __init__(self, label: str, stream=None, *, interval: float = 30.0, clock: Callable[[], float] = time.monotonic):
        from rich.console import Console

        self.console = Console(file=stream or sys.stderr, highlight=False)
        self.label = label
        self.interval = interval
        self.clock = clock
        self._label = label
        self._progress: Any = None  # rich's Progress, imported when first shown
        self._task: Any = None
        self._ticker: threading.Thread | None = None
        self._stopped = threading.Event()
        self._total = self._done = self._done_at_start = 0
        self._started = self._shown = 0.0
        self._stats = RunStats()
        self._note = ""

    @staticmethod
    def _duration(seconds: float) -> str:
        """0:01:05: hours, minutes, seconds."""
        return str(timedelta(seconds=round(seconds)))

    def _pace(self) -> tuple[str, str]:
        """(calls per second, time left) so far. Time left is from the requests answered since the
        start: those answered from the store or by another worker before it took no time."""
        elapsed = self.clock() - self._started
        rate = f"{self._stats.calls / elapsed if elapsed > 0 else 0.0:.1f} calls/s"
        answered = self._done - self._done_at_start
        if answered <= 0:
            return rate, "ETA unknown"
        return rate, f"ETA {self._duration((self._total - self._done) * elapsed / answered)}"

    def _fields(self) -> dict[str, Any]:
        stats = self._stats
        rate, eta = self._pace()
        return {"errors": stats.errors, "retries": stats.retries, "hits": stats.cache_hits, "cost": stats.cost_usd, "rate": rate, "eta": eta}

    def tick(self) -> None:
        """One progress line: what the timer prints outside a terminal."""
        stats, (rate, eta) = self._stats, self._pace()
        self.console.print(
            f"{self._label}: {self._done} of {self._total} requests answered, {stats.calls} calls, {stats.errors} errors, "
            f"{stats.retries} retries, {stats.cache_hits} cache hits, ${stats.cost_usd:.4f}, {rate}, {eta}"
            + (f"; {self._note}" if self._note else ""),
            soft_wrap=True,  # one line per report, however narrow the log says it is
        )

    def start(self, total: int, stats: RunStats, label: str | None = None) -> None:
        self._label = label or self.label
        self._total, self._stats, self._started = total, stats, self.clock()
        # What is known before any call: answers from the store, errors another worker recorded.
        self._done = self._done_at_start = stats.cache_hits + stats.errors
        if not self.console.is_terminal:
            self.tick()
            self._stopped.clear()
            self._ticker = threading.Thread(target=self._tick_until_stopped, name="biascheck progress", daemon=True)
            self._ticker.start()
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "{task.fields[rate]}  {task.fields[eta]}  errors {task.fields[errors]}  retries {task.fields[retries]}  "
                "cache hits {task.fields[hits]}  ${task.fields[cost]:.4f}"
            ),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(self._label, total=total, **self._fields())

    def _tick_until_stopped(self) -> None:
        while not self._stopped.wait(self.interval):
            self.tick()

    def update(self, done: int, stats: RunStats) -> None:
        """Called once per answer: the bar is redrawn 10 times a second at most, its own pace, so
        thousands of answers a second do not each pay for its fields."""
        self._done, self._stats = done, stats
        if self._progress is not None:
            now = self.clock()
            if now - self._shown >= 0.1:
                self._shown = now
                self._progress.update(self._task, completed=done, **self._fields())

    def note(self, text: str) -> None:
        """A batch run's state: shown under the bar on a terminal, on each progress line in a log."""
        self._note = text
        if self._progress is not None:
            self._progress.update(self._task, description=f"{self._label}\n  {text}")

    def stop(self, stats: RunStats, interrupted: int | None = None) -> None:
        """The last line: the execution's counts, or, ``interrupted``, that it was, and how many
        of its requests have their answer in the store (what the same run started again skips).
        On a terminal the bar stays as it was, and only an interrupted run adds that line."""
        self._stats = stats
        if self._progress is not None:
            self._progress.update(self._task, completed=self._done, **self._fields())
            self._progress.stop()
            self._progress = None
            if interrupted is None:
                return
        if self._ticker is not None:
            self._stopped.set()
            self._ticker.join()
            self._ticker = None
        rate, _ = self._pace()
        took = self._duration(self.clock() - self._started)
        if interrupted is not None:
            line = (
                f"{self._label}: interrupted after {took}: {interrupted} of {stats.requests} requests have their answers stored "
                f"({stats.cache_hits} cache hits, {stats.calls} calls, {stats.retries} retries, {stats.errors} errors), ${stats.cost_usd:.4f}, {rate}"
            )
        else:
            line = (
                f"{self._label}: {stats.requests} requests, {stats.cache_hits} cache hits, {stats.calls} calls, "
                f"{stats.retries} retries, {stats.errors} errors, ${stats.cost_usd:.4f} in {took}, {rate}"
            )
        self.console.print(line + (f"; {self._note}" if self._note else ""), soft_wrap=True)
