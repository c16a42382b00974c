"""The records that flow through the pipeline.

suite manifest -> :class:`Case` -> model request -> :class:`Response` -> :class:`Outcome`
-> metrics -> verdicts -> reports.

All of them are plain frozen dataclasses: cheap to build by the ten thousand, hashable, and
independent of pytest, litellm and the store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, overload

Role = Literal["system", "user", "assistant"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


class RenderedMessages(Sequence[Message]):
    """A case's messages, rendered from their parts each time they are read, never kept.

    A suite holds its prompts' parts (a template, an item's context and options: shared by the
    cases made from them), not one rendered prompt per case: KoBBQ's 34,200 prompts, HBB's
    77,350. Collecting a suite, or running part of it, renders none or only the selected ones.
    Reads as the tuple of :class:`Message` it renders (indexing, ``len``, iteration, equality
    and hash), so code that reads ``case.messages`` cannot tell."""

    __slots__ = ("_parts", "_render")

    def __init__(self, render: Callable[..., tuple[Message, ...]], *parts: Any):
        self._render = render
        self._parts = parts

    def rendered(self) -> tuple[Message, ...]:
        return self._render(*self._parts)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        return self.rendered()[index]

    def __len__(self) -> int:
        return len(self.rendered())

    def __iter__(self) -> Iterator[Message]:
        return iter(self.rendered())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RenderedMessages | tuple):
            return self.rendered() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.rendered())

    def __repr__(self) -> str:
        return repr(self.rendered())


@dataclass(frozen=True, slots=True)
class QATruth:
    """Ground truth of one multiple-choice QA case, as indexes into the choices *as shown*.

    ``context`` is ``"amb"`` (ambiguous: the correct answer is the unknown option) or ``"dis"``
    (disambiguated).  A disambiguated context is *biased* when its correct answer is the biased
    answer, *counter-biased* otherwise (KoBBQ versions b/d vs a/c; BBQ likewise).
    """

    context: Literal["amb", "dis"]
    unknown: int
    biased: int
    counter: int
    correct: int

    def __post_init__(self) -> None:
        # A loader bug here would silently corrupt every metric, so it fails where it happens.
        if self.context not in ("amb", "dis"):
            raise ValueError(f"context must be 'amb' or 'dis': {self}")
        if len({self.unknown, self.biased, self.counter}) != 3:
            raise ValueError(f"unknown, biased and counter must be three different options: {self}")
        if self.context == "amb" and self.correct != self.unknown:
            raise ValueError(f"an ambiguous context's correct answer is the unknown option: {self}")
        if self.context == "dis" and self.correct not in (self.biased, self.counter):
            raise ValueError(f"a disambiguated context's correct answer names a person: {self}")

    @property
    def context_type(self) -> Literal["amb", "dis-biased", "dis-counter"]:
        if self.context == "amb":
            return "amb"
        return "dis-biased" if self.correct == self.biased else "dis-counter"

    def answer_class(self, index: int) -> Literal["unknown", "biased", "counter"]:
        if index == self.unknown:
            return "unknown"
        if index == self.biased:
            return "biased"
        if index == self.counter:
            return "counter"
        raise ValueError(f"option {index} is not one of this case's options")


@dataclass(frozen=True, slots=True)
class HBBTruth:
    """What an HBB filled question is: the base question (the bootstrap cluster), the descriptor
    type and the identity its character was given. Option ``a`` is the question's ``s1``."""

    question: str
    descriptor_type: str
    identity: str


@dataclass(frozen=True, slots=True)
class Case:
    """One model request to make and score: benchmark item x prompt x choice order.

    ``cluster`` is the resampling unit of the bootstrap (the template the item was built from);
    ``label`` is a secondary grouping (KoBBQ's ST/TM/NC annotation; empty when the benchmark has
    none).  ``letters`` are the option labels the prompt shows, in order (e.g. ``A B C`` or
    ``a b c``), needed to parse answers and by the simulated model to answer. ``messages`` is a
    tuple, or (what the benchmarks build) :class:`RenderedMessages`, rendered when read.
    """

    case_id: str
    sample_id: str
    category: str
    cluster: str
    label: str
    prompt_id: str
    order: int
    messages: Sequence[Message]
    choices: tuple[str, ...]
    letters: tuple[str, ...]
    truth: object  # the benchmark's own record of what is right; read it with truth_as
    language: str = ""  # the prompt's language (the suite's [suite] language): how replies read

    def truth_as(self, kind: type[T]) -> T:
        """The case's truth as the type its benchmark gave it (inspect_ai's ``metadata_as``): a
        case of another benchmark is a TypeError, not a silently misread record."""
        if not isinstance(self.truth, kind):
            raise TypeError(f"case {self.case_id} has a {type(self.truth).__name__} truth, not {kind.__name__}")
        return self.truth

    def messages_as_dicts(self) -> list[dict[str, str]]:
        return [m.to_dict() for m in self.messages]

    def record(self) -> dict[str, str | int]:
        """What every benchmark's results.json case starts with: the case's identity and grouping."""
        return {
            "case_id": self.case_id,
            "sample_id": self.sample_id,
            "category": self.category,
            "cluster": self.cluster,
            "label": self.label,
            "prompt_id": self.prompt_id,
            "order": self.order,
        }


OutcomeStatus = Literal["answered", "ooc", "filtered", "empty", "error", "disagreed"]


# What an answer mode may need from a provider (execution.llm.check_serves checks it up front):
# /v1/completions with echo and logprobs (loglikelihood answers), or chat completions with logprobs
# and top_logprobs (first-token answers).
PROMPT_LOGPROBS = "prompt log-probabilities"
TOKEN_LOGPROBS = "token log-probabilities"
# A log-likelihood request's reply without them (execution.llm refuses it; qa.answers says so).
NO_PROMPT_LOGPROBS = (
    "the endpoint returned no log-probabilities for the prompt's tokens "
    "(an OpenAI-compatible /v1/completions with echo and logprobs is needed; llama.cpp's server: start it with --logits_all true)"
)


# The error of a reply that arrived but cannot be read as what it claims (a log-probability that is
# no number at most 0, alternatives whose probabilities sum past 1, a text_offset pointing at other
# text, a negative token count): its case is an error, and the reply is kept in the store as
# unusable, never served as an answer (the next run asks again). See execution.llm.
UNUSABLE_REPLY = "unusable reply: "
# How far above 0 a log-probability may be and still be read (as 0): a server's float rounding of a
# certain token. How far past 1 the probabilities of a position's listed alternatives may sum.
LOGPROB_SLACK = 1e-6
MASS_SLACK = 1e-3


def logprob_value(value: object) -> float | None:
    """``value`` as a log-probability, or None when it is none: not a finite number at most 0
    (:data:`LOGPROB_SLACK` above 0 is read as 0). A JSON integer of 400 digits is no float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    if not math.isfinite(number) or number > LOGPROB_SLACK:
        return None
    return min(number, 0.0)


def distribution_problem(values: Iterable[float]) -> str | None:
    """Why log-probabilities (valid ones, :func:`logprob_value`'s) of alternatives at one position
    cannot all be true, or None: their probabilities sum past 1."""
    total = math.fsum(math.exp(v) for v in values)
    if total > 1 + MASS_SLACK:
        return f"the log-probabilities of one position's alternatives sum to a probability of {total:.4g}, above 1"
    return None


def shown(value: object, limit: int = 24) -> str:
    """A value from a reply as an error line may quote it: short (a 400-digit integer is not)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True, slots=True)
class Loglikelihood:
    """What a log-likelihood request measured: the summed log-probability of the continuation's
    tokens after the prompt, how many tokens it took, and whether each was the model's most
    likely next token (lm-evaluation-harness's ``is_greedy``)."""

    logprob: float
    tokens: int
    greedy: bool

    def to_dict(self) -> dict[str, float | int | bool]:
        return {"logprob": self.logprob, "tokens": self.tokens, "greedy": self.greedy}


@dataclass(frozen=True, slots=True)
class Response:
    """What came back for one request: text, or an error that survived every retry.

    ``finish_reason == "content_filter"`` is a response, not an error.
    """

    text: str | None
    finish_reason: str | None = None
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    # The top alternatives of the first generated token, token -> log-probability, when asked for
    # (``logprobs`` requests) and returned by the provider; None otherwise.
    logprobs: dict[str, float] | None = None
    # The reply was longer than biascheck keeps (llm.MAX_REPLY_CHARS): ``text`` is its beginning.
    truncated: bool = False
    # What the provider said answered (its reply's ``model`` and ``system_fingerprint``), if it said.
    served_model: str | None = None
    system_fingerprint: str | None = None
    # A log-likelihood request's measurement (``echo`` requests); None otherwise, or when the
    # provider returned no prompt log-probabilities.
    loglikelihood: Loglikelihood | None = None

    @property
    def errored(self) -> bool:
        return self.error is not None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A scored response.

    ``status``: ``answered`` (``answer`` is an index into the shown choices), ``ooc`` (text that
    names no option; excluded from scoring, counted in ``ooc_ratio``), ``filtered`` (the provider's
    content filter stopped the reply; excluded like ooc and counted in it), ``error`` (no usable
    response after retries; never scored, counted in ``error_ratio``).
    ``answer_class`` is ``unknown`` / ``biased`` / ``counter`` for answered QA cases. An HBB case
    has ``p_a``, the estimated probability of option a, from ``valid`` answers (sampling; 0 when
    read from log-probabilities) with ``refused`` more excluded. A BBG case (an MRC question)
    has ``answer_class`` ``b`` / ``c`` / ``u``, ``generation`` (the continuation the judge read)
    and status ``empty`` when the model wrote no continuation (nothing to judge: unscorable).
    Read by several judges, a case is ``disagreed`` when their readings settle no class under the
    suite's aggregation (:mod:`biascheck.judging.aggregate`): unscorable under every convention.
    ``truncated``: a reply was longer than biascheck keeps and only its beginning was read.
    A QA case answered by log-likelihood also has ``answer_norm`` (the option of the highest
    length-normalised log-likelihood, lm-evaluation-harness's ``acc_norm`` reading) and
    ``loglikelihoods`` (one per continuation scored); one answered by its first token has
    ``choice_mass``, the probability the option letters held at that position.
    """

    case_id: str
    status: OutcomeStatus
    answer: int | None = None
    answer_class: str | None = None
    raw: str | None = None
    error: str | None = None
    p_a: float | None = None
    valid: int = 0
    refused: int = 0
    generation: str | None = None
    truncated: bool = False  # a reply it was read from was cut at llm.MAX_REPLY_CHARS
    answer_norm: int | None = None
    loglikelihoods: tuple[float, ...] | None = None
    choice_mass: float | None = None

    @property
    def scored(self) -> bool:
        return self.status == "answered"
