"""Fault injection: provider failures on demand, decided per attempt.

Parameters on any persona spec:

``fail_rate=F``      probability that one *attempt* fails (default 0)
``faults=K,K,...``   kinds, chosen uniformly among those listed (default ``429,500,503,timeout,
                     garbage``; ``filter`` and ``freetext`` only when asked for)
``retry_after_ms=N`` retry hint on 429 and 503 (default 20)
``delay=S``          seconds the ``timeout`` kind sleeps before answering (default 30)

Kinds: ``429`` (rate limit with ``retry-after-ms`` / ``retry-after`` headers), ``500``, ``503``
(OpenAI-style error bodies; 503 also sends the retry hints), ``timeout`` (answer after ``delay``
seconds), ``garbage`` (HTTP 200, truncated JSON), ``filter`` (HTTP 200, empty content with
``finish_reason: content_filter``), ``freetext`` (HTTP 200, a chatty reply naming the persona's
choice with an explicit phrase, or, for a deterministic ~1/3 of them, rambling naming no option).

The server counts attempts per (persona, prompt); the decision is a pure function of (seed,
message key, attempt number), so a retry is a fresh draw and a rerun replays the same faults.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from biascheck.sim.draws import pick, uniform

if TYPE_CHECKING:
    from biascheck.benchmarks.languages import Language
    from biascheck.core.records import Case


class FaultSpec(Protocol):
    """What faults read of a persona (:class:`~biascheck.sim.personas.Persona` is one). A protocol
    rather than the class: personas import this module's fault kinds, and a cycle would follow."""

    @property
    def fail_rate(self) -> float: ...

    @property
    def faults(self) -> Sequence[str]: ...

    @property
    def seed(self) -> int: ...

    @property
    def retry_after_ms(self) -> int: ...


FAULT_KINDS = ("429", "500", "503", "timeout", "garbage", "filter", "freetext")
DEFAULT_FAULTS = ("429", "500", "503", "timeout", "garbage")

# Error kinds answered with an HTTP error status and an OpenAI-style error body.
_HTTP_ERRORS: dict[str, tuple[int, str, str, str]] = {
    "429": (429, "Rate limit reached (simulated).", "requests", "rate_limit_exceeded"),
    "500": (500, "The server had an error while processing your request (simulated).", "server_error", "internal_error"),
    "503": (503, "The engine is currently overloaded, please try again later (simulated).", "server_error", "service_unavailable"),
}

FREETEXT_RAMBLE_SHARE = 1 / 3


def choose_fault(persona: FaultSpec, key: str, attempt: int) -> str | None:
    """The fault injected into this attempt (``attempt`` counts from 1), or None."""
    if persona.fail_rate <= 0.0 or uniform("fault", persona.seed, key, attempt) >= persona.fail_rate:
        return None
    return persona.faults[pick(len(persona.faults), "fault-kind", persona.seed, key, attempt)]


def is_http_error(kind: str) -> bool:
    return kind in _HTTP_ERRORS


def http_error(kind: str, persona: FaultSpec) -> tuple[int, dict[str, str], dict[str, object]]:
    """Status, extra headers and JSON body of an HTTP error fault (``429``, ``500``, ``503``)."""
    status, message, error_type, code = _HTTP_ERRORS[kind]
    headers: dict[str, str] = {}
    if kind in ("429", "503"):
        headers["retry-after-ms"] = str(persona.retry_after_ms)
        headers["retry-after"] = str(math.ceil(persona.retry_after_ms / 1000))
    body: dict[str, object] = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return status, headers, body


def garbage_body(valid_body: dict[str, object]) -> bytes:
    """A completion body cut in half: starts like JSON, never parses."""
    encoded = json.dumps(valid_body, ensure_ascii=False).encode("utf-8")
    return encoded[: max(1, len(encoded) // 2)]


def freetext_reply(persona: FaultSpec, case: Case, index: int | None, key: str, attempt: int, language: Language) -> str:
    """A chatty reply in ``language`` that names choice ``index`` explicitly, or (~1/3, or
    refusers) rambles naming no option."""
    if index is None or uniform("ramble", persona.seed, key, attempt) < FREETEXT_RAMBLE_SHARE:
        return language.ramble
    return language.reasoned_reply.format(letter=case.letters[index], text=case.choices[index])
