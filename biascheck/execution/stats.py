"""How an execution went: its counters (:class:`RunStats`: an execution's, a run's, or one suite's
own, which its results.json records) and how it ended (:class:`RunStatus`). The runner keeps them,
the progress display shows the run's, the budget reads the spend from them."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class RunStatus(enum.Enum):
    """How a run ended (a run's ``RunResult.stats.status``). An incomplete run's reason
    (``RunResult.incomplete``, results.json ``incomplete_reason``) starts with its status's prefix;
    code decides on the status, never on the text."""

    COMPLETE = ""
    BUDGET_REACHED = "budget"  # the reason is the budget's own sentence, without a prefix
    FATAL_MODEL_ERROR = "fatal model error: "
    FATAL_JUDGE_ERROR = "fatal model error: the judge "
    # The response store could not be written (disk full, read-only).
    STORE_FAILURE = "response store failure: "
    # --biascheck-batch-wait=no: the batches are submitted; a later run with the store scores them.
    BATCH_PENDING = "submitted, not yet scored: "

    @property
    def prefix(self) -> str:
        return "" if self in (RunStatus.COMPLETE, RunStatus.BUDGET_REACHED) else self.value

    @property
    def fatal(self) -> bool:
        """The run cannot measure anything: pytest stops with a usage error rather than failing items."""
        return self in (RunStatus.FATAL_MODEL_ERROR, RunStatus.FATAL_JUDGE_ERROR, RunStatus.STORE_FAILURE)

    @classmethod
    def of(cls, reason: str) -> RunStatus:
        """The status of a reason written by another process (an xdist worker's "not run" errors)."""
        for status in (cls.FATAL_JUDGE_ERROR, cls.FATAL_MODEL_ERROR, cls.STORE_FAILURE, cls.BATCH_PENDING):
            if reason.startswith(status.prefix):
                return status
        return cls.BUDGET_REACHED


@dataclass
class RunStats:
    requests: int = 0  # distinct requests the run needed
    cache_hits: int = 0
    calls: int = 0  # attempts sent to the model, retries included
    retries: int = 0
    errors: int = 0  # requests that ended without a usable response
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    not_run: int = 0  # requests never sent: budget reached or a fatal error
    incomplete: str | None = None  # why the run is incomplete, if it is
    status: RunStatus = RunStatus.COMPLETE
    # model -> parameter -> why: refused by the server and left out of that model's requests from
    # then on (and out of every stored answer of this run that was made without it)
    params_dropped: dict[str, dict[str, str]] = field(default_factory=dict)
    # model -> parameter -> why: accepted, but visibly without effect (logprobs asked, none returned)
    params_ignored: dict[str, dict[str, str]] = field(default_factory=dict)
    # --biascheck-batch: the provider batches that held this run's requests, by how they stand
    # (running, collected, failed, expired, cancelled)
    batches: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The counters as results.json records them (the status is in ``incomplete``'s prefix)."""
        counters = asdict(self)
        del counters["status"]
        return counters

    def stop(self, status: RunStatus, detail: str) -> None:
        """The run stops: no new call starts. The first reason stays."""
        if self.incomplete is None:
            self.status, self.incomplete = status, status.prefix + detail

    def blame_judge(self, model: str) -> None:
        """A fatal error of a judge's execution names the judge: it is not the model under test's."""
        if self.status is RunStatus.FATAL_MODEL_ERROR and self.incomplete is not None:
            detail = self.incomplete.removeprefix(RunStatus.FATAL_MODEL_ERROR.prefix)
            self.status, self.incomplete = RunStatus.FATAL_JUDGE_ERROR, f"{RunStatus.FATAL_JUDGE_ERROR.prefix}{model}: {detail}"

    def stop_with(self, reason: str) -> None:
        """Stop with a reason already written in full (by another worker, another execution)."""
        if self.incomplete is None:
            self.status, self.incomplete = RunStatus.of(reason), reason

    def add(self, part: RunStats) -> None:
        """Accumulate one execution's counters (a suite's, a judge's) into these."""
        for name in ("requests", "cache_hits", "calls", "retries", "errors", "unpriced_calls", "not_run"):
            setattr(self, name, getattr(self, name) + getattr(part, name))
        self.cost_usd += part.cost_usd
        for state, count in part.batches.items():
            self.batches[state] = self.batches.get(state, 0) + count
        if part.incomplete and self.incomplete is None:
            self.status, self.incomplete = part.status, part.incomplete
        self.merge_params_notes(part)

    def merge_params_notes(self, other: RunStats) -> None:
        for mine, theirs in ((self.params_dropped, other.params_dropped), (self.params_ignored, other.params_ignored)):
            for model, notes in theirs.items():
                for name, reason in notes.items():
                    mine.setdefault(model, {}).setdefault(name, reason)
