"""The model under test and the client that calls it: its configuration (:class:`ModelConfig`,
:class:`Price`) and the checks that stop a run before its first call, what a reply is kept as
(:class:`Completion`) and the requests' helpers (seeds, log-likelihood requests), and
:class:`LiteLLMClient`. Calls go through litellm, imported lazily and with its own retries, cache
and budget off; those to an OpenAI-compatible endpoint through the fast path
(:mod:`biascheck.execution.fast_http`), which hands litellm whatever it does not read itself.

biascheck owns retries (:mod:`biascheck.execution.runner`), the response cache (:mod:`biascheck.execution.store`)
and the budget; this module makes exactly one HTTP attempt per call and classifies what went wrong
(as :class:`biascheck.execution.call_errors.CallError`), redacting secrets
(:mod:`biascheck.execution.redaction`) from what it keeps.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from biascheck.config.manifest import canonical_json
from biascheck.core.bounds import BOUNDS
from biascheck.core.errors import BiascheckError
from biascheck.core.records import (
    NO_PROMPT_LOGPROBS,
    PROMPT_LOGPROBS,
    TOKEN_LOGPROBS,
    UNUSABLE_REPLY,
    Loglikelihood,
    distribution_problem,
    logprob_value,
    shown,
)
from biascheck.core.spelling import Option, option
from biascheck.execution.call_errors import UNREACHABLE, CallError, broken_body, one_line_error, refusal_line, refused_params, retry_after_of
from biascheck.execution.fast_http import DEFAULT_HTTP_CLIENT, HTTP_CLIENTS, FastPath, Plain, fast_path_applies
from biascheck.execution.providers import SIM_PREFIX, check_simulated_model, is_simulated
from biascheck.execution.redaction import configured_secrets, redact_secrets, redact_url, register_secrets_of_url


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens, registered with litellm for models it lacks."""

    input_per_million: float
    output_per_million: float

    @classmethod
    def parse(cls, text: str, where: object = Option("price")) -> Price:
        parts = text.split("/")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        bound = BOUNDS["price"]
        if len(values) != 2 or not all(math.isfinite(v) and bound.low <= v <= bound.high for v in values):
            raise BiascheckError(
                where, None, f"{text!r} is not INPUT/OUTPUT USD per million tokens", f"each {bound.describe()}, e.g. {where} 0.15/0.60"
            )
        return cls(*values)


@dataclass(frozen=True)
class ModelConfig:
    """The model under test as the user named it, plus what is sent with every request."""

    model: str
    params: dict[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    timeout: float = 60.0
    price: Price | None = None
    # What is served under ``model`` (a release tag, a commit, a checkpoint): part of every store key.
    revision: str | None = None
    # How requests are sent (--biascheck-http-client): "fast" sends those to an OpenAI-compatible
    # endpoint with biascheck's own pooled client (execution/fast_http.py), the rest through
    # litellm; "litellm" sends every one through litellm. Not part of a key or a report: both
    # paths store and report the same.
    http_client: str = DEFAULT_HTTP_CLIENT

    @property
    def is_sim(self) -> bool:
        return is_simulated(self.model)

    def __post_init__(self) -> None:
        if self.http_client not in HTTP_CLIENTS:
            raise BiascheckError(f"{option('http-client')}", None, f"{self.http_client!r} is not an HTTP client", f"use {' or '.join(HTTP_CLIENTS)}")
        # litellm would read the provider's environment variable (OPENAI_API_BASE,
        # HOSTED_VLLM_API_BASE, ...) itself; reading it here, once, puts the server that answers
        # into the store key and the report, so two servers never share cached answers.
        if self.api_base is None and not self.is_sim:
            provider = self.model.split("/", 1)[0].upper().replace("-", "_") if "/" in self.model else "OPENAI"
            names = [f"{provider}_API_BASE", f"{provider}_BASE_URL"]
            if provider == "OPENAI":
                names.append("OPENAI_BASE_URL")
            object.__setattr__(self, "api_base", next((os.environ[n] for n in names if os.environ.get(n)), None))

    @property
    def endpoint(self) -> str:
        """The endpoint's identity in store keys: the sim's port changes every run, its answers don't."""
        return "biascheck-sim" if self.is_sim else (self.api_base or "")

    def to_dict(self) -> dict[str, Any]:
        api_base = redact_url(self.api_base) if self.api_base else None
        return {
            "model": self.model,
            "revision": self.revision,
            "api_base": api_base,
            "params": dict(sorted(self.params.items())),
            "timeout": self.timeout,
        }


def validate_model_string(model: str, where: object = Option("model"), *, api_base: str | None = None) -> None:
    """Refuse, in milliseconds and before litellm is imported (2-4 s), a model string that cannot
    work: blank, an unknown sim persona, or a provider prefix litellm does not know (``opneai/``).
    :func:`check_ready` asks litellm itself once it is imported."""
    if not model or model != model.strip() or any(c.isspace() for c in model):
        raise BiascheckError(where, None, f"{model!r} is not a model string", "e.g. openai/gpt-4o-mini or sim/fair")
    if is_simulated(model):
        check_simulated_model(model)
        return
    prefix = model.split("/", 1)[0] if "/" in model else None
    providers = known_providers()
    # With an api_base litellm may still route a model by its endpoint: litellm decides (check_ready).
    if prefix is not None and providers and prefix not in providers and api_base is None:
        raise BiascheckError(where, None, f"{prefix!r} in {model!r} is not a litellm provider", _provider_fix(model, providers))


def _provider_fix(model: str, providers: frozenset[str]) -> str:
    import difflib

    prefix, _, rest = model.partition("/")
    close = difflib.get_close_matches(prefix, sorted(providers), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}/{rest}?"
    return "start it with a provider, e.g. openai/, anthropic/, gemini/, hosted_vllm/ (https://docs.litellm.ai/docs/providers)"


@cache
def known_providers() -> frozenset[str]:
    """litellm's provider names (its ``LlmProviders`` enum), read from its source rather than by
    importing it; empty when that source cannot be read, and then only litellm decides.
    tests/test_model_checks.py holds this equal to ``litellm.provider_list``."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    try:
        source = (Path(spec.submodule_search_locations[0]) / "types" / "utils.py").read_text("utf-8")
    except OSError:
        return frozenset()
    block = re.search(r"^class LlmProviders\(str, Enum\):\n(.*?)(?=^\S)", source, re.MULTILINE | re.DOTALL)
    names = re.findall(r'^\s+[A-Z0-9_]+\s*=\s*"([^"]+)"', block.group(1), re.MULTILINE) if block else []
    return frozenset(names) if len(names) > 20 else frozenset()


# Of the variables litellm names as missing, only credentials stop a run up front: a missing base
# URL may have a default (Ollama's), and otherwise fails the first call, which stops the run.
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL")


def check_ready(config: ModelConfig, where: object = Option("model"), *, api_key: str | None = None) -> None:
    """Stop before the first call a model that cannot work: litellm cannot route it (unknown
    provider) or its provider's credentials are not set (unless ``api_key`` is given), as
    ``litellm.validate_environment`` tells. One line naming the environment variable or the fix.
    An unknown model is told by the provider's first reply (404), which stops the run."""
    if config.is_sim:
        return
    litellm = import_litellm()
    try:
        litellm.get_llm_provider(config.model, api_base=config.api_base)
    except Exception:
        providers = frozenset(getattr(p, "value", p) for p in litellm.provider_list)
        raise BiascheckError(
            where, None, f"litellm cannot tell which provider serves {config.model!r}", _provider_fix(config.model, providers)
        ) from None
    try:
        missing = litellm.validate_environment(model=config.model, api_base=config.api_base).get("missing_keys") or []
    except Exception:
        return  # litellm cannot tell for this provider: its first call will
    # litellm names every variable of a set when one is absent (Azure: key, base and version).
    missing = [name for name in missing if _CREDENTIAL_NAME.search(name) and name not in os.environ]
    if missing and not api_key:
        names = " or ".join(missing)
        fix = f"export {missing[0]}=..."
        if config.api_base and config.model.startswith("openai/"):
            fix += " (a local server that checks no key takes any value, e.g. unused-local)"
        raise BiascheckError(where, None, f"{config.model} needs {names}, which is not set", fix)


def import_litellm():
    """Import litellm with no network fetch of its price map and no .env loading."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    with warnings.catch_warnings():  # pydantic's remarks on litellm's own types, once, at import
        warnings.simplefilter("ignore")
        import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


@dataclass(frozen=True)
class Completion:
    text: str | None
    finish_reason: str | None
    usage: dict[str, int]
    cost_usd: float | None
    logprobs: dict[str, float] | None = None
    truncated: bool = False  # the reply was longer than MAX_REPLY_CHARS and was cut there
    served_model: str | None = None  # the reply's ``model``: what the provider says answered
    system_fingerprint: str | None = None
    loglikelihood: Loglikelihood | None = None  # a log-likelihood request's measurement
    # Why the reply cannot be read as what its request asked (an UNUSABLE_REPLY line), or None: it
    # is kept, paid for, and its case is an error; the store never serves it as an answer.
    refused: str | None = None


class UnusableReply(ValueError):
    """A value of a reply that cannot be what it claims (see :data:`UNUSABLE_REPLY`); the message
    is the one line that says which and why."""


@dataclass(frozen=True)
class Sent:
    """What a request sent, as far as reading its reply needs: its messages (none for a batch's
    output, which holds no prompt) and its parameters."""

    messages: Sequence[dict[str, str]]
    params: dict[str, Any]

    @property
    def alternatives(self) -> int | None:
        """How many alternatives per position the request asked for (``top_logprobs``)."""
        asked = self.params.get("top_logprobs")
        return asked if isinstance(asked, int) and not isinstance(asked, bool) else None

    def most_usage(self, text: str | None) -> dict[str, int]:
        """The most tokens the request could have cost, charged for a reply whose usage cannot be
        read: a token of the prompt per byte, with a chat template's few per message; a token of
        the reply per byte, or ``max_tokens`` when the request bounds it."""
        # Measured only here, for the rare reply whose usage cannot be read: never per call.
        prompt = sum(len(str(m.get("content", "")).encode()) for m in self.messages) + 8 * len(self.messages) + 16
        bound = self.params.get("max_tokens", self.params.get("max_completion_tokens"))
        reply = len(text.encode()) if isinstance(text, str) else 0
        completion = bound if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0 else max(1, reply)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


# The most tokens a reply may say it used: a count beyond it is no count (a lying or broken server),
# charged at the request's most (Sent.most_usage) instead of the billions it names.
MAX_TOKEN_COUNT = 10**8


def token_counts(usage: Any) -> tuple[dict[str, int], str | None]:
    """A reply's usage as whole token counts, and why it cannot be read, or None (a negative,
    fractional or absurd count, or no number: an OpenAI-compatible server that miscounts)."""
    counts: dict[str, int] = {}
    if not isinstance(usage, dict):
        return counts, None
    for name, value in usage.items():
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
            return {}, f"the reply's usage {name} = {shown(value)} is not a token count, so its cost is charged at the most the request could cost"
        counts[name] = value
    return counts, None


# The longest reply kept, stored, parsed and reported: an answer, a story or a judge's reasoning
# is far shorter; a runaway or hostile server's megabytes would swell the store and every report.
MAX_REPLY_CHARS = 65_536


# What a model may emit before its first real token: whitespace and markdown emphasis or quotes
# ("\n", " ", "**", "`"). Real tokenizers often start a reply with such a token.
_LEADING_FILLER = frozenset(" \t\r\n*_`\"'")


def first_token_logprobs(logprobs: Any, asked: int | None = None) -> dict[str, float] | None:
    """token -> log-probability of the top alternatives at the first generated position whose token
    is not only whitespace or markdown (OpenAI's ``choices[0].logprobs.content[i].top_logprobs``,
    as objects or dicts), so a reply that opens with "\\n" or "**" is read at its answer; the first
    position when every one is filler; None if absent.

    Raises :class:`UnusableReply` for what cannot be true: a log-probability that is no finite
    number at most 0, alternatives whose probabilities sum past 1, or no alternatives listed when
    ``asked`` (the request's ``top_logprobs``) asked for some, where reading the sampled token
    alone would give it all the probability."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    content = get(logprobs, "content") if logprobs is not None else None
    if not content or not isinstance(content, list | tuple):
        return None
    position = next((p for p in content if isinstance(get(p, "token"), str) and not set(get(p, "token")) <= _LEADING_FILLER), content[0])
    listed = get(position, "top_logprobs")
    listed = listed if isinstance(listed, list | tuple) else None
    if not listed and asked:
        raise UnusableReply(
            f"the reply lists no top_logprobs at its first token, though {asked} were asked: its log-probabilities would be the sampled token's alone"
        )
    alternatives = listed or [position]
    out: dict[str, float] = {}
    values: list[float] = []
    for alt in alternatives:
        token, raw = get(alt, "token"), get(alt, "logprob")
        if not isinstance(token, str):
            continue
        value = logprob_value(raw)
        if value is None:
            raise UnusableReply(f"the log-probability {shown(raw)} of the token {shown(token)} is not a number at most 0")
        values.append(value)
        out.setdefault(token, value)
    problem = distribution_problem(values)
    if problem is not None:
        raise UnusableReply(problem)
    return out or None


def request_seed(seed: int, messages: list[dict[str, str]], sample: int) -> int:
    """The seed a request is sent: the run's ``seed`` mixed with the request itself (its messages
    and sample index), a 31-bit number every provider takes. A provider seeds each request's
    sampling with what it is sent, so one seed for every request draws every case of a run from
    one random stream: the cases then move together from run to run, and a paired comparison,
    which takes them as independent, sees a change where there is only another draw (two seeds of
    SmolLM2 at temperature 0.7 on llama.cpp gave out-of-choice ratios 0.44 and 0.12 on the same 100
    cases). Mixed in, a run stays reproducible and its requests draw independently; k samples of
    one prompt (HBB) differ too, where one seed would make them identical."""
    digest = hashlib.sha256(canonical_json([seed, messages, sample]).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def params_as_sent(params: dict[str, Any], messages: list[dict[str, str]], sample: int) -> dict[str, Any]:
    """A request's parameters as they are sent (online and in batches): its ``seed``, if any, is
    :func:`request_seed`'s. The store keeps the request as planned, with the run's seed."""
    seed = params.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        return {**params, "seed": request_seed(seed, messages, sample)}
    return params


def _usage(response: Any) -> dict[str, Any]:
    """A litellm reply's token counts as it holds them: :func:`token_counts` reads them."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    return {k: getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


# --- log-likelihood requests -----------------------------------------------------------------------
#
# A request whose parameters ask for ``echo`` scores a continuation instead of asking for a reply:
# its messages are the prompt (no chat template: their contents joined, as lm-evaluation-harness's
# ``local-completions`` sends raw text) followed by one assistant message holding the continuation.
# It goes to the OpenAI-compatible ``/v1/completions`` endpoint with ``echo`` and ``logprobs``, which
# returns every prompt token with its log-probability.


def is_loglikelihood_request(params: dict[str, Any]) -> bool:
    return params.get("echo") is True


def loglikelihood_texts(messages: list[dict[str, str]]) -> tuple[str, str]:
    """(context, continuation) of a log-likelihood request's messages."""
    *prompt, last = messages
    if last.get("role") != "assistant" or not prompt:
        raise ValueError("a log-likelihood request ends with the continuation as an assistant message")
    return "\n\n".join(m["content"] for m in prompt), last["content"]


LATE_LOGPROBS = (
    "the server's prompt log-probabilities are one token late (each token scored by the distribution after it, as "
    "llama-cpp-python's echo gives them for a model without a BOS token), so log-likelihoods read from them would be wrong"
)


def echo_is_late(tokens: Sequence[Any], tops: Any) -> bool:
    """Whether an echoed prompt's alternatives describe the position after each token instead of
    the token's own: the most likely alternative listed at a position is far more often the *next*
    token than the token itself. A correct server lists at position i the distribution token i was
    drawn from, so its most likely alternative is token i whenever the model predicted it."""
    if not isinstance(tops, list) or len(tops) != len(tokens):
        return False
    own = following = 0
    for i in range(1, len(tokens) - 1):
        top, token, after = tops[i], tokens[i], tokens[i + 1]
        if not isinstance(top, dict) or not top or not token or not after or token == after:
            continue  # byte pieces decode to "", and a repeated token says nothing about the position
        values = {k: v for k, v in top.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if values:
            best = max(values, key=values.__getitem__)
            own += best == token
            following += best == after
    return following > 2 * own + 2


def continuation_loglikelihood(logprobs: Any, start: int, end: int, text: str | None = None) -> Loglikelihood | None:
    """The summed log-probability of the text between characters ``start`` and ``end`` of the
    echoed prompt, from OpenAI's completions ``logprobs`` (``tokens``, ``token_logprobs``,
    ``text_offset``, ``top_logprobs``), or None when the reply holds no prompt log-probabilities.

    The continuation's tokens are those that end after ``start`` and begin before ``end``: a token
    that straddles the boundary (the tokenizer merged the context's last characters with the
    continuation's first) counts, since the continuation's probability is in it. ``greedy``: each of
    them was the most likely token at its position (when the reply lists alternatives).

    Raises :class:`UnusableReply` for what cannot be true: a log-probability that is no finite
    number at most 0, or, given the prompt's ``text``, a continuation token whose ``text_offset``
    points at other text than the token's own (offsets shifted: the tokens read would be others)."""

    def get(name: str) -> Any:
        return logprobs.get(name) if isinstance(logprobs, dict) else getattr(logprobs, name, None)

    if logprobs is None:
        return None
    tokens, values, offsets, tops = get("tokens"), get("token_logprobs"), get("text_offset"), get("top_logprobs")
    if not (isinstance(tokens, list) and isinstance(values, list) and isinstance(offsets, list)) or not len(tokens) == len(values) == len(offsets):
        return None
    if echo_is_late(tokens, tops):
        raise CallError(LATE_LOGPROBS, retryable=False)
    total, count, greedy = 0.0, 0, True
    for i, (offset, raw) in enumerate(zip(offsets, values)):
        if not isinstance(offset, int) or isinstance(offset, bool):
            return None
        following = offsets[i + 1] if i + 1 < len(offsets) and isinstance(offsets[i + 1], int) else offset + len(str(tokens[i] or ""))
        if not (start <= offset < end or offset < start < following):
            continue
        if text is not None and not _token_at(text, offset, tokens[i]):
            raise UnusableReply(
                f"the reply's text_offset {shown(offset)} points at {shown(text[max(0, offset) : max(0, offset) + 12])}, not at its token "
                f"{shown(tokens[i])}: the continuation's prompt log-probabilities cannot be told apart from the context's"
            )
        if raw is None:
            return None  # a continuation token without its log-probability (the first token of a prompt has none)
        value = logprob_value(raw)
        if value is None:
            raise UnusableReply(f"the prompt log-probability {shown(raw)} of the token {shown(tokens[i])} is not a number at most 0")
        total += value
        count += 1
        alternatives = tops[i] if isinstance(tops, list) and i < len(tops) and isinstance(tops[i], dict) else {}
        listed = [logprob_value(v) for v in alternatives.values() if not isinstance(v, bool) and isinstance(v, int | float)]
        if None in listed:
            raise UnusableReply(f"a top_logprobs alternative of the token {shown(tokens[i])} is not a log-probability at most 0")
        best = max((v for v in listed if v is not None), default=None)
        if best is not None and value < best - 1e-9:
            greedy = False
    if not math.isfinite(total):
        raise UnusableReply("the continuation's prompt log-probabilities sum to no finite number")
    return Loglikelihood(total, count, greedy) if count else None


def _token_at(text: str, offset: int, token: Any) -> bool:
    """Whether ``token`` is the text of the prompt at ``offset``. A token whose text is not its own
    (an empty piece of a multi-byte character, U+FFFD, OpenAI's ``bytes:`` pieces) says nothing."""
    if not isinstance(token, str) or not token or "\ufffd" in token or token.startswith("bytes:"):
        return True
    return 0 <= offset and (text.startswith(token, offset) or text.startswith(token.replace("\u2581", " "), offset))


# litellm providers that speak OpenAI's completions protocol to an OpenAI-compatible server.
_COMPLETIONS_PROVIDERS = frozenset({"openai", "text-completion-openai", "hosted_vllm", "litellm_proxy"})
# OpenAI's own models that return log-probabilities of an echoed prompt: its base completion models.
_OPENAI_ECHO_MODELS = frozenset({"davinci-002", "babbage-002"})


def check_serves(config: ModelConfig, needs: str, where: str, *, batch: bool = False) -> None:
    """Stop before the first call a run whose answer mode the provider cannot serve: a chat-only
    provider asked for prompt log-probabilities, or one litellm says returns no log-probabilities.
    (What only the endpoint can tell, the run's first reply tells: see the session's probe.)"""
    if batch and needs == PROMPT_LOGPROBS:
        raise BiascheckError(where, None, "loglikelihood answers are not sent as provider batches", f"drop {option('batch')} for this run")
    if config.is_sim:
        return
    litellm = import_litellm()
    try:
        name, provider, *_ = litellm.get_llm_provider(config.model, api_base=config.api_base)
    except Exception:
        return  # check_ready names the model litellm cannot route
    if needs == PROMPT_LOGPROBS:
        if provider not in _COMPLETIONS_PROVIDERS:
            raise BiascheckError(
                where,
                None,
                f"{provider} serves no completions endpoint that returns prompt log-probabilities, which loglikelihood answers need",
                "answer by generate or first-token, or serve the model on an OpenAI-compatible server (vLLM; llama.cpp's with --logits_all true)",
            )
        if provider == "openai" and config.api_base is None and name not in _OPENAI_ECHO_MODELS:
            raise BiascheckError(
                where,
                None,
                f"OpenAI's API returns prompt log-probabilities only for {' and '.join(sorted(_OPENAI_ECHO_MODELS))}, not {name}",
                f"answer by generate or first-token, or give {option('api-base')} of an OpenAI-compatible server",
            )
    elif needs == TOKEN_LOGPROBS and provider not in _COMPLETIONS_PROVIDERS:
        try:
            supported = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider) or []
        except Exception:
            return  # litellm cannot tell: the first reply will
        if "logprobs" not in supported:
            raise BiascheckError(
                where, None, f"{provider} returns no token log-probabilities (litellm), which first-token answers need", "answer by generate"
            )


class _Deadlines:
    """The wall-clock deadline of every attempt in flight, kept by one timer set for the oldest
    attempt's instead of a timer per attempt (asyncio.timeout's schedules and cancels one each
    time: 4 us of a fast-path call's 120-250). All attempts of a client have the same deadline, so
    the oldest expires first; an expired attempt is ended by its own asyncio.Timeout, rescheduled
    to now, so that it says so as one that ran out of time."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.running: dict[asyncio.Timeout, float] = {}  # in order of start, so of deadline
        self.timer: asyncio.TimerHandle | None = None

    def start(self, attempt: asyncio.Timeout) -> None:
        loop = asyncio.get_running_loop()
        when = self.running[attempt] = loop.time() + self.seconds
        if self.timer is None:
            self.timer = loop.call_at(when, self._expire)

    def end(self, attempt: asyncio.Timeout) -> None:
        self.running.pop(attempt, None)

    def _expire(self) -> None:
        self.timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for attempt, when in list(self.running.items()):
            if when > now:
                self.timer = loop.call_at(when, self._expire)
                return
            del self.running[attempt]
            attempt.reschedule(now)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class LiteLLMClient:
    """One attempt per :meth:`complete`; ``api_base``/``api_key`` override the config (the sim)."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        require_price: bool = False,
        where: object = Option("model"),
    ):
        self.config = config
        check_ready(config, where, api_key=api_key)
        self.litellm = import_litellm()
        self._is_sim = config.is_sim  # asked on every call
        if config.is_sim:
            self.model = "openai/" + config.model.removeprefix(SIM_PREFIX)
            self.api_key: str | None = api_key or "sim"
        else:
            self.model = config.model
            self.api_key = api_key
        self.api_base = api_base or config.api_base
        self._text_client: Any = None  # see _completions_client
        register_secrets_of_url(config.api_base)
        # Read once per client, not per reply: the environment does not change during a run.
        self._secrets = configured_secrets(self.api_key)
        self._costs: dict[tuple[int, int], float | None] = {}  # see cost
        self._deadlines = _Deadlines(config.timeout)
        self._fast: FastPath | None = None
        if self.api_base is not None and fast_path_applies(self.model, self.api_base, config.http_client):
            self._fast = FastPath(self.litellm, self.model, self.api_base, self.api_key, self.sdk_key(), config.timeout)
        if config.price is not None:
            self.litellm.register_model(
                {
                    self.model: {
                        "input_cost_per_token": config.price.input_per_million / 1e6,
                        "output_cost_per_token": config.price.output_per_million / 1e6,
                        # The batch rate of every provider with a batch API: half the online price.
                        "input_cost_per_token_batches": config.price.input_per_million / 2e6,
                        "output_cost_per_token_batches": config.price.output_per_million / 2e6,
                        "litellm_provider": self.model.split("/", 1)[0] if "/" in self.model else "openai",
                        "mode": "chat",
                    }
                }
            )
        if require_price and not self.has_price():
            raise BiascheckError(
                f"{option('max-cost')}",
                None,
                f"litellm has no price for {config.model}, so spending cannot be tracked",
                f"pass {option('price')} INPUT/OUTPUT (USD per million tokens)",
            )

    def has_price(self) -> bool:
        if self.config.price is not None or self.config.is_sim:
            return True  # the simulated model is free unless given a price
        try:
            self.litellm.cost_per_token(model=self.model, prompt_tokens=1, completion_tokens=1)
            return True
        except Exception:
            return False

    def cost(self, usage: dict[str, int], *, batch: bool = False) -> float | None:
        """USD for a reply's tokens, online or at the provider's batch rate; None if unpriced."""
        if self._is_sim and self.config.price is None:
            return 0.0
        if batch:
            if not self.has_price():
                return None  # litellm's batch calculator reads an unknown model as free
            from litellm.cost_calculator import batch_cost_calculator

            tokens = {k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens")}
            prompt_cost, completion_cost = batch_cost_calculator(self.litellm.Usage(**tokens, total_tokens=sum(tokens.values())), model=self.model)
            return float(prompt_cost) + float(completion_cost)
        # Remembered by token counts: litellm's calculator costs more CPU than the rest of a call,
        # and its answer for one model and counts does not change during a run.
        counts = (usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        try:
            return self._costs[counts]
        except KeyError:
            cost = self._costs[counts] = self._online_cost(*counts)
            return cost

    def _online_cost(self, prompt_tokens: Any, completion_tokens: Any) -> float | None:
        try:
            prompt_cost, completion_cost = self.litellm.cost_per_token(
                model=self.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
        except Exception:
            return None
        return float(prompt_cost) + float(completion_cost)

    async def complete(self, messages: list[dict[str, str]], params: dict[str, Any], sample: int = 0) -> Completion:
        params = params_as_sent(params, messages, sample)
        if is_loglikelihood_request(params):
            return await self._score_continuation(messages, params)
        litellm = self.litellm
        kwargs: dict[str, Any] = dict(params)
        if self._is_sim and sample:
            # The k samples of one prompt are identical requests; a real model varies by chance, the
            # simulator by this index, so its samples are independent and reproducible.
            kwargs["extra_body"] = {"biascheck_sample": sample}

        def call(timeout: float, client: Any = None) -> Any:
            chosen = {} if client is None else {"client": client}
            return litellm.acompletion(
                model=self.model, messages=messages, timeout=timeout, num_retries=0, max_retries=0, **self._endpoint(), **kwargs, **chosen
            )

        fast = self._fast
        response = await self._attempt(params, (lambda timeout: fast.chat(messages, kwargs, call)) if fast is not None else call)
        if response is None:
            return Completion(None, "content_filter", {}, 0.0)
        sent = Sent(messages, params)
        try:
            return self._chat_completion(response, params, sent)
        except CallError:
            raise
        except Exception as exc:  # a reply this code cannot read: its case's error, never the run's end
            return self._unreadable(exc, sent)

    def _chat_completion(self, response: Any, params: dict[str, Any], sent: Sent) -> Completion:
        if isinstance(response, Plain):  # the fast path's reading of a plain reply
            logprobs = response.logprobs if params.get("logprobs") else None
            return self.completion_of(
                response.text, response.finish_reason, response.usage, logprobs, response.served_model, response.system_fingerprint, sent=sent
            )
        try:
            choice = response.choices[0]
            text = choice.message.content
            finish_reason = choice.finish_reason
        except (AttributeError, IndexError, TypeError) as exc:
            raise CallError(f"malformed response: {type(exc).__name__}: {exc}", retryable=True) from None
        return self.completion_of(
            text,
            finish_reason,
            _usage(response),
            getattr(choice, "logprobs", None) if params.get("logprobs") else None,
            getattr(response, "model", None),
            getattr(response, "system_fingerprint", None),
            sent=sent,
        )

    def _unreadable(self, exc: Exception, sent: Sent) -> Completion:
        """A reply that arrived but could not be read at all: kept as unusable, charged at the most
        its request could cost (its usage unread)."""
        usage = sent.most_usage(None)
        return Completion(
            None, None, usage, self.cost(usage), refused=f"{UNUSABLE_REPLY}biascheck could not read it: {type(exc).__name__}: {one_line_error(exc)}"
        )

    async def _score_continuation(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        """A log-likelihood request: the prompt and its continuation sent as one text to the
        completions endpoint, which echoes the prompt's tokens with their log-probabilities; the
        continuation's are summed (see :func:`continuation_loglikelihood`)."""
        litellm = self.litellm
        context, continuation = loglikelihood_texts(messages)
        kwargs = {k: v for k, v in params.items() if k != "echo"}

        def call(timeout: float, client: Any = None) -> Any:
            return litellm.atext_completion(
                model=self.completions_model,
                prompt=context + continuation,
                echo=True,
                timeout=timeout,
                num_retries=0,
                max_retries=0,
                client=client or self._completions_client(),
                **self._endpoint(),
                **kwargs,
            )

        fast = self._fast
        response = await self._attempt(params, (lambda timeout: fast.completion(context + continuation, kwargs, call)) if fast is not None else call)
        if response is None:
            return Completion(None, "content_filter", {}, 0.0)
        sent = Sent(messages, params)
        try:
            return self._text_completion(response, context, continuation, sent)
        except CallError:
            raise
        except Exception as exc:  # a reply this code cannot read: its case's error, never the run's end
            return self._unreadable(exc, sent)

    def _text_completion(self, response: Any, context: str, continuation: str, sent: Sent) -> Completion:
        if isinstance(response, Plain):
            text, finish_reason, usage, logprobs, served = (
                response.text,
                response.finish_reason,
                response.usage,
                response.logprobs,
                response.served_model,
            )
        else:
            try:
                choice = response.choices[0]
                text, finish_reason = choice.text, choice.finish_reason
                logprobs = getattr(choice, "logprobs", None)
            except (AttributeError, IndexError, TypeError) as exc:
                raise CallError(f"malformed response: {type(exc).__name__}: {exc}", retryable=True) from None
            usage, served = _usage(response), getattr(response, "model", None)
        prompt = context + continuation

        def measure() -> Loglikelihood | None:
            return continuation_loglikelihood(logprobs, len(context), len(prompt), prompt)

        return self.completion_of(text, finish_reason, usage, None, served, None, sent=sent, measure=measure)

    @property
    def completions_model(self) -> str:
        """The model string that makes litellm call the completions endpoint of an
        OpenAI-compatible server (its ``openai/`` path decides by the model's name, and
        ``hosted_vllm/`` would call the chat endpoint)."""
        return "text-completion-openai/" + self.model.split("/", 1)[1] if "/" in self.model else "text-completion-openai/" + self.model

    def _completions_client(self) -> Any:
        """One OpenAI SDK client for the run's completions calls: litellm builds a new one, with its
        own connection pool that is never closed, for every text completion not given one."""
        if self._text_client is None:
            import openai

            self._text_client = openai.AsyncOpenAI(api_key=self.sdk_key(), base_url=self.api_base or "https://api.openai.com/v1", max_retries=0)
        return self._text_client

    def sdk_key(self) -> str:
        """The API key for an OpenAI SDK client of biascheck's own (the fast path, text completions,
        batches): the one given, else the provider's as litellm finds it, else OPENAI_API_KEY."""
        key = self.api_key
        if key is None:
            try:
                key = self.litellm.get_llm_provider(self.model, api_base=self.api_base)[2]
            except Exception:
                key = None
        # A local server checks no key, and the SDK refuses to send a request without one.
        return key or os.environ.get("OPENAI_API_KEY") or "unused-local"

    def _endpoint(self) -> dict[str, Any]:
        endpoint: dict[str, Any] = {}
        if self.api_base:
            endpoint["api_base"] = self.api_base
        if self.api_key:
            endpoint["api_key"] = self.api_key
        return endpoint

    async def _attempt(self, params: dict[str, Any], call) -> Any:
        """One attempt of ``call`` (given the deadline, a litellm coroutine or the fast path's),
        bounded by the deadline; its failure as a :class:`CallError`; None when the provider's
        content filter refused the prompt. The fast path's errors are litellm's (see fast_http)."""
        litellm = self.litellm
        deadline = self.config.timeout
        try:
            # litellm's timeout bounds each read, so a server trickling its answer could hold an
            # attempt for minutes; the wall-clock deadline bounds the whole attempt.
            async with asyncio.timeout(None) as attempt:
                self._deadlines.start(attempt)
                try:
                    return await call(deadline)
                finally:
                    self._deadlines.end(attempt)
        except TimeoutError as exc:
            if not attempt.expired():  # some other timeout litellm let through
                raise CallError(one_line_error(exc), retryable=True) from None
            raise CallError(
                f"Timeout: the attempt exceeded the deadline of {deadline:g} s (--biascheck-timeout)", retryable=True, unreachable=True
            ) from None
        except litellm.ContentPolicyViolationError:
            # The provider refused the prompt: an outcome to record, not a failure to retry.
            return None
        except (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError) as exc:
            raise CallError(one_line_error(exc), retryable=False, fatal=True) from None
        except litellm.RateLimitError as exc:
            raise CallError(one_line_error(exc), retryable=True, retry_after=retry_after_of(exc)) from None
        except (litellm.BadRequestError, litellm.UnprocessableEntityError) as exc:
            # Not retried: the same request gets the same refusal. The runner leaves out a parameter
            # refused as unsupported; a value refused (out of range) stays the request's error.
            named, unsupported = refused_params(exc, params)
            raise CallError(refusal_line(exc, named), retryable=False, rejected=named if unsupported else ()) from None
        except (
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.BadGatewayError,
            litellm.APIError,
        ) as exc:
            # llama-cpp-python's server answers a parameter it refuses with a 500 (a validation error
            # naming it, or "logprobs is not supported ..."): a refusal like a 400, no retry changes it.
            named, unsupported = refused_params(exc, params, server_error=True)
            if named:
                raise CallError(refusal_line(exc, named), retryable=False, rejected=named if unsupported else ()) from None
            line = one_line_error(exc)
            if broken_body(exc):  # the endpoint replied: not one that cannot be reached
                raise CallError(f"the reply broke off mid-body: {line}", retryable=True) from None
            if isinstance(exc, litellm.Timeout) or UNREACHABLE.search(line):
                raise CallError(f"cannot reach {self._where()}: {line}", retryable=True, unreachable=True) from None
            raise CallError(line, retryable=True, retry_after=retry_after_of(exc)) from None
        except CallError:  # the fast path's own: a reply over its size cap
            raise
        except Exception as exc:  # anything else litellm lets through (e.g. a malformed body)
            raise CallError(one_line_error(exc), retryable=True) from None

    def completion_of(
        self,
        text: Any,
        finish_reason: Any,
        usage: Any,
        logprobs: Any,
        served_model: Any,
        fingerprint: Any,
        *,
        batch: bool = False,
        sent: Sent | None = None,
        measure: Callable[[], Loglikelihood | None] | None = None,
    ) -> Completion:
        """A reply as it is kept, whether it came online or in a batch's output: secrets redacted,
        cut at MAX_REPLY_CHARS, the first answer token's log-probabilities (or, with ``measure``, a
        log-likelihood request's measurement), priced. Every value is checked as it is read: one
        that cannot be true makes the reply unusable (``refused``), never raises; a usage that
        cannot be read is charged at the most the request ``sent`` could cost."""
        truncated = False
        if isinstance(text, str):
            # Redacted before it is cut: a key across the cut would otherwise leave its first half.
            text = redact_secrets(text, self._secrets)
            truncated, text = len(text) > MAX_REPLY_CHARS, text[:MAX_REPLY_CHARS]
        else:
            text = None
        finish = finish_reason if isinstance(finish_reason, str) else None
        counts, refused = token_counts(usage)
        if refused is not None:
            counts = sent.most_usage(text) if sent is not None else {}
        read: dict[str, float] | None = None
        measured: Loglikelihood | None = None
        try:
            read = first_token_logprobs(logprobs, sent.alternatives if sent is not None else None)
            if measure is not None:
                measured = measure()
                if measured is None and finish != "content_filter":
                    refused = refused or NO_PROMPT_LOGPROBS
        except UnusableReply as exc:
            read, measured, refused = None, None, str(exc)
        return Completion(
            text,
            finish,
            counts,
            self.cost(counts, batch=batch),
            read,
            truncated,
            self._served(served_model),
            self._served(fingerprint),
            measured,
            None if refused is None else UNUSABLE_REPLY + refused,
        )

    def _served(self, value: Any) -> str | None:
        """A served-model field as it may be kept: a string, short, with no secret in it."""
        return redact_secrets(value, self._secrets)[:200] if isinstance(value, str) and value else None

    def _where(self) -> str:
        """The endpoint as an error may name it: credentials removed."""
        return redact_url(self.api_base) if self.api_base else f"{self.model.split('/', 1)[0]}'s default endpoint"

    async def aclose(self) -> None:
        self._deadlines.close()
        # Without this the aiohttp/httpx sessions outlive the loop and leak sockets.
        if self._fast is not None:
            await self._fast.aclose()
        await self.litellm.close_litellm_async_clients()
        if self._text_client is not None:
            await self._text_client.close()
            self._text_client = None
