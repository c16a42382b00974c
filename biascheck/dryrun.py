"""The dry run: what a run would send, and cost, before any call.

For each suite: the distinct requests a run sends the model under test (and each of a judged
benchmark's judges), less those the response store already answers; their prompt tokens (litellm's token
counter), their output tokens bounded by each request's ``max_tokens``, and the price (litellm's
price map, or ``--biascheck-price``). ``pytest --biascheck-dry-run`` and ``biascheck suites
--model M`` print it. Nothing here calls a model or starts the simulator; litellm is imported
only to count and price the tokens of a model that is not free.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biascheck.core.errors import BiascheckError
from biascheck.core.garbage import collector_paused
from biascheck.core.records import Case, Response
from biascheck.core.spelling import Option, option
from biascheck.execution.llm import ModelConfig, check_serves, import_litellm
from biascheck.execution.runner import from_store
from biascheck.execution.store import ResponseStore, request_key
from biascheck.judging.panel import Judge
from biascheck.session import RunConfig, answer_mode, effective_params, resolve
from biascheck.suite import Suite

# Prompts whose tokens are counted one by one; more are estimated from a seeded sample of this many
# (litellm's counter takes 0.1-0.4 ms a prompt: 14 s for KoBBQ's 34,200 with gpt-4o's tokenizer).
TOKEN_SAMPLE = 2_000
# Stands for a story not yet generated in the judge's prompt; the story adds at most the
# generation's max_tokens, which are counted on top.
_STORY_TO_COME = "..."


@dataclass(slots=True)
class Request:
    """One request as the dry run sees it (see :class:`_Keys` for its key)."""

    key: Hashable
    messages: list[dict[str, str]]
    params: dict[str, Any]


class _Keys:
    """Requests to one model, keyed exactly as the run keys them (store.request_key) when a store
    is read; else by a cheaper identity (store keys for HBB-full's 773,500 requests take 14 s),
    whose parts shared by the k samples of one question are built once, by object: the requests
    hold those objects, so no id is reused while this lives."""

    def __init__(self, model: ModelConfig, *, keyed: bool):
        self.model, self.keyed = model, keyed
        self._parts: dict[int, tuple] = {}

    def __call__(self, messages: list[dict[str, str]], params: dict[str, Any], sample: int) -> Request:
        model = self.model
        if self.keyed:
            return Request(request_key(model.model, model.endpoint, messages, params, sample, model.revision), messages, params)
        return Request(
            (
                self._part(messages, lambda: tuple(tuple(m.items()) for m in messages)),
                self._part(params, lambda: tuple(sorted(params.items()))),
                sample,
            ),
            messages,
            params,
        )

    def _part(self, value: object, build) -> tuple:
        if id(value) not in self._parts:
            self._parts[id(value)] = build()
        return self._parts[id(value)]


@dataclass
class Share:
    """What one model, the model under test or a suite's judge, would be sent."""

    role: str  # "model" or "judge"
    model: ModelConfig
    requests: list[Request]  # distinct, not answered by the store
    stored: int = 0  # distinct requests the store answers
    # Of ``requests``, judge readings of stories not yet generated: made only for a story that is
    # not empty, and their prompts are longer by the story (``story_tokens`` in all; None: unbounded).
    uncertain: int = 0
    story_tokens: int | None = 0
    prompt_tokens: int | None = None
    sampled: bool = False  # prompt_tokens estimated from a sample of TOKEN_SAMPLE prompts
    output_tokens: int | None = None  # at most: each request's max_tokens
    usd: float | None = None
    notes: list[str] = field(default_factory=list)
    batch: bool = False  # priced at the provider's batch rate (--biascheck-batch)

    @property
    def calls(self) -> int:
        return len(self.requests)


@dataclass
class SuiteEstimate:
    name: str
    benchmark: str
    cases: int
    shares: list[Share]
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(share.calls for share in self.shares)

    @property
    def usd(self) -> float | None:
        return _total_usd([share.usd for share in self.shares])


def _total_usd(costs: list[float | None]) -> float | None:
    """The sum of ``costs``; None when one of them is unknown."""
    known = [cost for cost in costs if cost is not None]
    return sum(known) if len(known) == len(costs) else None


def estimate(
    selection: Sequence[tuple[Suite, Sequence[Case]]],
    config: RunConfig,
    *,
    store: Path | None = None,
    price: bool = True,
    price_options: tuple[object, object] = (Option("price"), Option("judge-price")),
) -> list[SuiteEstimate]:
    """The calls (and with ``price``, tokens and USD) of a run of ``selection`` under ``config``,
    less the answers of the response store at ``store`` (if it exists); ``price_options`` are
    named when a model has no known price."""
    with _open_store(store) as opened, collector_paused():  # a request per case, or eleven: see biascheck.core.garbage
        estimates = [_estimate_suite(suite, list(cases), config, opened) for suite, cases in selection]
    if price:
        for suite_estimate in estimates:
            for share in suite_estimate.shares:
                share.batch = config.batch is not None
                _price(share, price_options[share.role == "judge"])
    return estimates


def existing_store(path: Path | None) -> Path | None:
    """The response store's file at ``path``, or None when there is none yet (a dry run creates
    none). Anything else there (a folder) is refused, never read as an empty store."""
    if path is None or not Path(path).exists():
        return None
    if not Path(path).is_file():
        kind = "a folder" if Path(path).is_dir() else "not a regular file"
        raise BiascheckError(path, None, f"is {kind}, not a response store", f"name the store's file (the {option('cache')} of a run)")
    return Path(path)


@contextmanager
def _open_store(path: Path | None) -> Iterator[ResponseStore | None]:
    """The response store, if there is one: a dry run creates none."""
    found = existing_store(path)
    if found is None:
        yield None
        return
    with ResponseStore(found) as store:
        yield store


def _estimate_suite(suite: Suite, cases: list[Case], config: RunConfig, store: ResponseStore | None) -> SuiteEstimate:
    model = config.model
    params = effective_params(suite, model)
    benchmark = suite.benchmark
    estimator = answer_mode(suite, config)
    keys = _Keys(model, keyed=store is not None)
    per_case = [[keys(*r) for r in benchmark.requests(case, params, estimator)] for case in cases]
    distinct = {r.key: r for requests in per_case for r in requests}
    # With a store the requests are keyed as the run keys them (str): the others are never looked up.
    stored = store.stored_keys(key for key in distinct if isinstance(key, str)) if store else set()
    notes = []
    needs = getattr(estimator, "needs", None)  # an answer mode read from log-probabilities
    rejudge = config.judges.rejudge
    if needs is not None and not rejudge:
        try:
            check_serves(model, needs, f"{option('answer-mode')}", batch=config.batch is not None)
        except BiascheckError as exc:
            notes.append(f"the run would stop before its first call: {exc.problem}")
    if rejudge:  # the generations come from the store only: a missing one is an error, not a call
        missing = len(distinct) - len(stored)
        notes.append(f"{option('rejudge')}: generations are read from the store ({missing:,} missing: errors, not calls)")
    generation = Share("model", model, [] if rejudge else [r for k, r in distinct.items() if k not in stored], len(stored))
    shares = [generation]
    panel = resolve(suite, config).panel
    if panel is not None:
        shares += [_judge_share(suite, cases, per_case, judge, params, config, store, stored) for judge in panel.judges]
        if config.judges.qualify:
            notes.append(f"not counted: the judges' qualification runs ({option('qualify-judge')})")
    return SuiteEstimate(suite.name, suite.manifest.benchmark, len(cases), shares, notes)


def _judge_share(
    suite: Suite,
    cases: list[Case],
    per_case: list[list[Request]],
    judge: Judge,
    params: dict[str, Any],
    config: RunConfig,
    store: ResponseStore | None,
    stored: set[str],
) -> Share:
    """The judge reads each story: for a stored generation, exactly the request the run makes (none
    for an empty story); for one still to be made, one reading at most, its story at most max_tokens."""
    read = suite.benchmark.judge_requests
    answers: dict[Hashable, Response] = {key: from_store(answer) for key, answer in store.get_many(stored).items()} if store and stored else {}
    story_bound = params.get("max_tokens")
    requests: dict[Hashable, Request] = {}
    uncertain: set[Hashable] = set()
    keys = _Keys(judge.model, keyed=store is not None)
    for case, generation in zip(cases, per_case):
        if all(r.key in answers for r in generation):
            for messages, request_params, sample in read(case, [answers[r.key] for r in generation], judge.params):
                request = keys(messages, request_params, sample)
                requests[request.key] = request
        elif not config.judges.rejudge:  # (re-judging: no generation, no reading)
            to_come = [Response(text=_STORY_TO_COME) for _ in generation]
            for index, (messages, request_params, _) in enumerate(read(case, to_come, judge.params)):
                # Its own key: the stories to come differ, so two readings never share an answer.
                key = (_STORY_TO_COME, case.case_id, index)
                requests[key] = Request(key, messages, request_params)
                uncertain.add(key)
    judged = store.stored_keys(k for k in requests if k not in uncertain and isinstance(k, str)) if store else set()
    story_tokens = None if story_bound is None else story_bound * len(uncertain)
    return Share("judge", judge.model, [r for k, r in requests.items() if k not in judged], len(judged), len(uncertain), story_tokens)


# --- tokens and price ------------------------------------------------------------------------


def _price(share: Share, price_option: object) -> None:
    """Fill in the share's tokens and USD, or say in a note why the cost is unknown."""
    model = share.model
    share.output_tokens = _output_tokens(share.requests)
    if model.is_sim and model.price is None:
        share.usd = 0.0  # the simulator is free: nothing to count
        return
    if not share.requests:
        share.prompt_tokens, share.usd = 0, 0.0
        return
    counted = _prompt_tokens(model, share.requests)
    if counted is None:
        share.notes.append(f"cost unknown: litellm cannot count tokens for {model.model}")
        return
    tokens, share.sampled = counted
    if share.story_tokens is None:
        share.notes.append(f"cost unknown: no max_tokens bounds the stories the judge reads ({option('param')} max_tokens=N)")
        return
    share.prompt_tokens = tokens + share.story_tokens
    rates = _rates(model, batch=share.batch)
    if rates is None:
        share.notes.append(f"cost unknown: pass {price_option} IN/OUT (USD per million tokens); litellm has no price for {model.model}")
    elif share.output_tokens is None:
        where = f"{option('param')} max_tokens=N" if share.role == "model" else "max_tokens in the judge's sampling table of suite.toml"
        share.notes.append(f"cost unknown: no max_tokens bounds the replies ({where}); the prompts alone: {_usd(share.prompt_tokens * rates[0])} USD")
    else:
        share.usd = share.prompt_tokens * rates[0] + share.output_tokens * rates[1]


def _output_tokens(requests: Iterable[Request]) -> int | None:
    """At most each request's max_tokens; None when one has no bound."""
    total = 0
    for request in requests:
        bound = request.params.get("max_tokens")
        if bound is None:
            return None
        total += int(bound)
    return total


def _prompt_tokens(model: ModelConfig, requests: list[Request]) -> tuple[int, bool] | None:
    """Prompt tokens by litellm's counter for the model, and whether they were estimated: more
    than TOKEN_SAMPLE prompts are, from a seeded sample (its mean times their number)."""
    litellm = import_litellm()
    sample = random.Random(0).sample(requests, TOKEN_SAMPLE) if len(requests) > TOKEN_SAMPLE else requests
    counts: dict[int, int] = {}  # by id(messages): k samples of one HBB question share their messages
    try:
        for request in sample:
            if id(request.messages) not in counts:
                counts[id(request.messages)] = litellm.token_counter(model=model.model, messages=request.messages)
    except Exception:  # whatever litellm's tokenizer for this model raises: the cost is then unknown
        return None
    total = sum(counts[id(request.messages)] for request in sample)
    if sample is requests:
        return total, False
    return round(total / len(sample) * len(requests)), True


def _rates(model: ModelConfig, *, batch: bool = False) -> tuple[float, float] | None:
    """USD per input and per output token: the user's price, else litellm's; None if neither. With
    ``batch``, the provider's batch rate: litellm's batch prices, half the user's price."""
    if model.price is not None:
        share = 0.5 if batch else 1.0
        return share * model.price.input_per_million / 1e6, share * model.price.output_per_million / 1e6
    litellm = import_litellm()
    try:
        # Asked for one call of typical size: a price tiered by context length (e.g. above 128k
        # tokens) must not be applied to the sum of a run's calls.
        prompt, completion = litellm.cost_per_token(model=model.model, prompt_tokens=1_000, completion_tokens=1_000)
        if batch:
            from litellm.cost_calculator import batch_cost_calculator

            usage = litellm.Usage(prompt_tokens=1_000, completion_tokens=1_000, total_tokens=2_000)
            prompt, completion = batch_cost_calculator(usage, model=model.model)
    except Exception:  # litellm raises several types for a model it has no price for
        return None
    return float(prompt) / 1_000, float(completion) / 1_000


# --- rendering -------------------------------------------------------------------------------


def render(estimates: Sequence[SuiteEstimate]) -> str:
    """The estimate as a table, its footnotes and notes below it, and the totals."""
    rows = [["suite", "model", "cases", "calls", "stored", "prompt tokens", "output tokens", "USD"]]
    notes = []
    for item in estimates:
        for index, share in enumerate(item.shares):
            first = index == 0
            model = share.model.model if share.role == "model" else f"judge {share.model.model}"
            calls = ("≤" if share.uncertain else "") + f"{share.calls:,}"
            tokens = [_number(share.prompt_tokens, "~" if share.sampled else ""), _number(share.output_tokens, "≤" if share.output_tokens else "")]
            rows.append([item.name if first else "", model, f"{item.cases:,}" if first else "", calls, f"{share.stored:,}", *tokens, _usd(share.usd)])
            notes += [f"{item.name}: {note}" for note in share.notes]
        notes += [f"{item.name}: {note}" for note in item.notes]
    shares = [share for item in estimates for share in item.shares]
    footnotes = []
    if any(share.uncertain for share in shares):
        footnotes.append(
            "≤ judge calls: a story not yet generated is read only if it is not empty; its prompt is counted with the longest story (max_tokens)"
        )
    if any(share.sampled for share in shares):
        footnotes.append(f"~ prompt tokens: estimated from a seeded sample of {TOKEN_SAMPLE:,} prompts")
    if any(share.output_tokens for share in shares):
        footnotes.append("≤ output tokens: each request's max_tokens, so the cost is an upper bound")
    if any(share.batch for share in shares):
        footnotes.append("USD at the provider's batch rate (--biascheck-batch)")
    usd = _total_usd([item.usd for item in estimates])
    total = f"total: {'at most ' if any(share.uncertain for share in shares) else ''}{sum(item.calls for item in estimates):,} model calls, "
    total += "cost unknown" if usd is None else f"at most {_usd(usd)} USD"
    lines = table(rows, right=range(2, 8)) + [f"  {line}" for line in footnotes + notes] + [total]
    return "\n".join(lines) + "\n"


def _number(value: int | None, prefix: str = "") -> str:
    return "-" if value is None else f"{prefix}{value:,}"


def _usd(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:,.2f}" if value >= 0.01 or value == 0 else f"{value:.4f}"


def table(rows: list[list[str]], right: Iterable[int] = ()) -> list[str]:
    """Rows as aligned text columns (``right``: the columns aligned right, numbers)."""
    right = set(right)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
