"""An OpenAI-compatible HTTP server for the simulated personas (stdlib only).

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /stats``,
``POST /stats/reset``.  HTTP/1.1 with keep-alive, ``Content-Length`` or chunked request bodies.

Request fields read besides ``model`` and ``messages``: ``max_tokens`` /
``max_completion_tokens`` (truncates the reply, ``finish_reason: length``), ``biascheck_sample``
(a non-negative int, absent = 0: the index of one of k otherwise identical samples; an HBB answer
is drawn per sample, and attempts, faults and the ``mixed`` style are counted and drawn per
(prompt, sample)), ``logprobs`` (true: on an HBB case, unless the persona has ``logprobs=0``, the
reply is the one token ``a``/``b`` and ``choices[0].logprobs`` is OpenAI's
``{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}``) and
``top_logprobs`` (0..20, default 0: how many alternatives ``top_logprobs`` lists) and
``temperature`` (0..2, absent = 1, as OpenAI: an HBB answer is drawn from the persona's
distribution at that temperature, and its log-probabilities are that distribution's; see
:mod:`.personas`).
``choices[0].logprobs`` stays null for QA cases (their answers are a function of the prompt, so
there is no distribution to report), refusals, and ``filter``/``freetext`` faults.

BBG (:mod:`.stories`): a request whose messages are a BBG case's generation prompt gets the
persona's continuation of that story version; a request that is no case's prompt but an MRC
prompt of one of the suite's BBG questions (the judge's) gets the persona's answer to it, read
off the continuation it embeds and rendered like a QA answer. Anything else is a 400
``unknown_prompt``. Faults apply to both kinds as to any request.

:class:`SimApp` turns a request into a reply (all simulator logic), :class:`SimHttpServer`
speaks HTTP on an asyncio loop, :class:`SimServer` runs that loop in a background thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import threading
import time
from collections import Counter
from http import HTTPStatus
from typing import Any

import biascheck.sim.faults as faults
from biascheck.benchmarks.bbg.data import MRCQuestion
from biascheck.core.errors import BiascheckError
from biascheck.core.records import HBBTruth, QATruth
from biascheck.sim.batches import SimBatches
from biascheck.sim.knowledge import SimKnowledge, message_key
from biascheck.sim.personas import (
    PERSONA_NAMES,
    QA_ANSWER_PROBABILITY,
    Persona,
    answer_logprobs,
    choose_answer,
    is_korean,
    is_persona_spec,
    parse_persona,
    qa_first_token_logprobs,
    qa_option_probabilities,
    render_reply,
    reply_language,
)
from biascheck.sim.replies import HttpReply, HttpRequest, error_reply, json_reply
from biascheck.sim.stories import (
    is_bbg_question,
    judge_answer,
    judge_case,
    mrc_user_content,
    write_continuation,
)

_MAX_HEAD_BYTES = 1 << 20
_MAX_BODY_BYTES = 256 << 20  # a batch input file may be 200 MB
_MAX_TOP_LOGPROBS = 20  # as OpenAI
_MAX_TEMPERATURE = 2.0  # as OpenAI


def _approx_tokens(chars: int) -> int:
    return max(1, -(-chars // 4))


class SimStats:
    """Request counters (thread-safe: read from the caller's thread, written on the loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.total_requests = 0
            self.per_persona: Counter[str] = Counter()
            self.faults: Counter[str] = Counter()
            self.unknown_prompts = 0
            self.bad_requests = 0
            self.completions = 0
            self.connections = 0
            self.files_uploaded = 0
            self.batches_created = 0
            self.batched_requests = 0

    def count(self, **increments: int) -> None:
        with self._lock:
            for name, amount in increments.items():
                setattr(self, name, getattr(self, name) + amount)

    def count_persona(self, spec: str) -> None:
        with self._lock:
            self.per_persona[spec] += 1

    def count_fault(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "total_requests": self.total_requests,
                "per_persona": dict(self.per_persona),
                "faults": dict(self.faults),
                "unknown_prompts": self.unknown_prompts,
                "bad_requests": self.bad_requests,
                "completions": self.completions,
                "connections": self.connections,
                "files_uploaded": self.files_uploaded,
                "batches_created": self.batches_created,
                "batched_requests": self.batched_requests,
            }


class SimApp:
    """The simulator proper: routes a request to a reply.

    ``default_persona`` answers requests whose ``model`` names no known persona (e.g. a real
    model name); a known persona with bad parameters is always a 400, never silently replaced.
    Attempts are counted per (persona, prompt, sample) so each retry gets a fresh fault draw;
    ``POST /stats/reset`` clears them with the stats, so a rerun replays the same faults.
    """

    def __init__(self, knowledge: SimKnowledge, default_persona: str | None = None):
        self.knowledge = knowledge
        self.default_persona = parse_persona(default_persona) if default_persona else None
        self.stats = SimStats()
        self._attempts: Counter[tuple[str, str]] = Counter()
        self._completion_ids = 0
        self._routes = {
            ("POST", "/v1/chat/completions"): self._chat_completions,
            ("POST", "/chat/completions"): self._chat_completions,
            ("POST", "/v1/completions"): self._text_completions,
            ("POST", "/completions"): self._text_completions,
            ("GET", "/v1/models"): self._models,
            ("GET", "/stats"): self._stats,
            ("POST", "/stats/reset"): self._reset,
        }
        self.batches = SimBatches(self)
        self._patterns = self.batches.routes()

    def reset(self) -> None:
        self.stats.reset()
        self._attempts.clear()

    async def handle(self, request: HttpRequest) -> HttpReply:
        method = request.method
        path = request.target.split("?", 1)[0].rstrip("/") or "/"
        route = self._routes.get((method, path))
        if route is not None:
            return await route(request.body)
        for verb, pattern, handler in self._patterns:
            match = pattern.fullmatch(path)
            if match is not None and verb == method:
                return await handler(request, *match.groups())
        if any(p == path for _, p in self._routes) or any(pattern.fullmatch(path) for _, pattern, _ in self._patterns):
            return error_reply(405, f"method {method} not allowed on {path}")
        return error_reply(404, f"no such endpoint: {path}", code="not_found")

    async def _models(self, body: bytes) -> HttpReply:
        created = int(time.time())
        data = [{"id": n, "object": "model", "created": created, "owned_by": "biascheck-sim"} for n in PERSONA_NAMES]
        return json_reply(200, {"object": "list", "data": data})

    async def _stats(self, body: bytes) -> HttpReply:
        return json_reply(200, self.stats.snapshot())

    async def _reset(self, body: bytes) -> HttpReply:
        self.reset()
        return json_reply(200, {"reset": True})

    def _persona_for(self, model: str) -> Persona:
        if not is_persona_spec(model) and self.default_persona is not None:
            return self.default_persona
        return parse_persona(model)

    def count_fault(self, kind: str) -> None:
        self.stats.count_fault(kind)

    def count(self, **increments: int) -> None:
        self.stats.count(**increments)

    async def answer(self, request: dict[str, Any], *, batched: bool) -> tuple[int, Any]:
        """One request of a batch, answered as its first attempt online: (status, body as JSON, or
        the text of a body that is not JSON)."""
        reply = await self._answer(request, batched=batched)
        try:
            return reply.status, json.loads(reply.body)
        except ValueError:
            return reply.status, reply.body.decode("utf-8", "replace")

    async def _chat_completions(self, body: bytes) -> HttpReply:
        return await self._answer(_json_or_none(body), batched=False)

    async def _text_completions(self, body: bytes) -> HttpReply:
        return await self._answer(_json_or_none(body), batched=False, text=True)

    async def _answer(self, request: Any, *, batched: bool, text: bool = False) -> HttpReply:
        """A chat completion, or (``text``) a completion of a prompt: a QA case's prompt followed by
        one of its options' continuations, scored (``echo`` with ``logprobs``: the loglikelihood
        answer mode), or a case's prompt alone, continued by the persona's reply."""
        self.stats.count(total_requests=1)
        try:
            model = request["model"]
            if text:
                prompt = request["prompt"]
                if not isinstance(model, str) or not isinstance(prompt, str):
                    raise TypeError
                scored = self.knowledge.lookup_continuation(prompt)
                messages = [{"role": "user", "content": prompt if scored is None else prompt[: scored[3]]}]
            else:
                messages = request["messages"]
                if not isinstance(model, str) or not isinstance(messages, list):
                    raise TypeError
                scored = None
            key = message_key(messages)
        except (ValueError, KeyError, TypeError, AttributeError):
            self.stats.count(bad_requests=1)
            what = "a string 'prompt'" if text else "a list 'messages' of {role, content}"
            return error_reply(400, f"request body must be JSON with a string 'model' and {what}")
        sample = request.get("biascheck_sample")
        sample = 0 if sample is None else sample
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            self.stats.count(bad_requests=1)
            return error_reply(400, "'biascheck_sample' must be a non-negative integer")
        want_logprobs = bool(request.get("logprobs"))
        # Chat: logprobs true and top_logprobs 0..20; completions: logprobs itself is the number of alternatives.
        alternatives = "logprobs" if text else "top_logprobs"
        top_logprobs = request.get(alternatives)
        top_logprobs = 0 if top_logprobs is None else top_logprobs
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or not 0 <= top_logprobs <= _MAX_TOP_LOGPROBS:
            self.stats.count(bad_requests=1)
            return error_reply(400, f"'{alternatives}' must be an integer from 0 to {_MAX_TOP_LOGPROBS}")
        temperature = request.get("temperature")
        temperature = 1.0 if temperature is None else temperature
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0.0 <= temperature <= _MAX_TEMPERATURE:
            self.stats.count(bad_requests=1)
            return error_reply(400, f"'temperature' must be a number from 0 to {_MAX_TEMPERATURE:g}", code="invalid_temperature")
        temperature = float(temperature)
        try:
            persona = self._persona_for(model)
        except BiascheckError as error:
            self.stats.count(bad_requests=1)
            return error_reply(400, str(error), code="invalid_model")
        self.stats.count_persona(persona.spec)

        case = self.knowledge.lookup_key(key)
        judged = self.knowledge.lookup_mrc(messages) if case is None and not text else None
        if case is None and judged is None:
            self.stats.count(unknown_prompts=1)
            return error_reply(
                400, "the prompt is not in the simulated model's suite (biascheck-sim only answers the suite's cases)", code="unknown_prompt"
            )

        # Sample 0 draws exactly as a request without a sample index always has; a scored
        # continuation is a request of its own.
        draw_key = key if sample == 0 else f"{key}#sample={sample}"
        if scored is not None:
            draw_key = f"{draw_key}#option={scored[2]}"
        self._attempts[(persona.spec, draw_key)] += 1
        attempt = self._attempts[(persona.spec, draw_key)]
        fault = faults.choose_fault(persona, draw_key, attempt)
        if fault is not None:
            self.stats.count_fault(fault)
        if fault is not None and faults.is_http_error(fault):
            status, headers, payload = faults.http_error(fault, persona)
            return json_reply(status, payload, headers)
        if fault == "timeout":
            if batched:  # a batch has no client to give up: the request ends with the provider's timeout
                return error_reply(504, "The request timed out (simulated).", "server_error", "timeout")
            await asyncio.sleep(persona.delay)  # the client is expected to give up first

        if text:
            payload = self._text_completion(model, persona, request, case, key, scored, want_logprobs, top_logprobs, fault)
        else:
            payload = self._chat_reply(model, persona, request, messages, case, key, judged, sample, temperature, want_logprobs, top_logprobs, fault)
        if fault == "garbage":
            return HttpReply(200, faults.garbage_body(payload))
        self.stats.count(completions=1)
        return json_reply(200, payload)

    def _chat_reply(
        self, model, persona, request, messages, case, key, judged, sample, temperature, want_logprobs, top_logprobs, fault
    ) -> dict[str, Any]:
        finish_reason = "stop"
        logprobs = None
        writes_story = judged is None and is_bbg_question(case.truth)
        if judged is not None:  # a BBG judge request: answered like a QA case
            question, continuation = judged
            case = judge_case(question, mrc_user_content(messages) or "")
            index = judge_answer(persona, question, continuation, key, self.knowledge.writer_for(question))
        elif writes_story:  # a BBG generation request: a story, not an answer
            index = None
        else:
            index = choose_answer(persona, case, key, sample, temperature)
        draw_key = key if sample == 0 else f"{key}#sample={sample}"
        attempt = self._attempts[(persona.spec, draw_key)]
        if fault == "filter":
            content, finish_reason = "", "content_filter"
        elif fault == "freetext":
            # A story rambles (it resolves nothing); an answer names its choice, or rambles.
            content = faults.freetext_reply(persona, case, index, draw_key, attempt, reply_language(case))
        elif writes_story:
            content = write_continuation(
                persona,
                case.truth_as(MRCQuestion),
                korean=is_korean(case),
                shared=self.knowledge.shares_prompt(key),
            )
        elif want_logprobs and persona.logprobs and index is not None and isinstance(case.truth, HBBTruth):
            content = case.letters[index]
            logprobs = answer_logprobs(persona, case, index, top_logprobs, temperature)
        elif want_logprobs and persona.logprobs and isinstance(case.truth, QATruth) and judged is None:
            content, logprobs = qa_first_token_logprobs(persona, case, key, top_logprobs)
        else:
            content = render_reply(persona, case, index, draw_key)
        content, finish_reason = _cut(content, finish_reason, request)
        return self._completion(model, messages, content, finish_reason, logprobs)

    def _text_completion(self, model, persona, request, case, key, scored, want_logprobs, top_logprobs, fault) -> dict[str, Any]:
        """OpenAI's legacy completion object. A scored continuation with ``echo``: the prompt's
        tokens (the context split at spaces, the continuation one token, the first without a
        log-probability, as real servers give it) and one generated token; the continuation's
        log-probability is its option's (:func:`qa_option_probabilities`). ``logprobs`` null for a
        persona with ``logprobs=0`` (a server that returns no prompt log-probabilities)."""
        prompt = request["prompt"]
        finish_reason = "length"
        if fault == "filter":
            generated, finish_reason = "", "content_filter"
        elif scored is None:
            generated, finish_reason = _cut(render_reply(persona, case, choose_answer(persona, case, key), key), "stop", request)
        else:
            generated = "\n"
        tokens: list[str] = []
        values: list[float | None] = []
        if request.get("echo") and scored is not None:
            start = scored[3]
            tokens = re.findall(r"\s*\S+|\s+", prompt[:start]) + [prompt[start:]]
            option_logprob = math.log(qa_option_probabilities(persona, case, key)[scored[2]])
            values = [None, *([-1.0] * (len(tokens) - 2)), option_logprob]
        elif request.get("echo"):
            tokens = re.findall(r"\s*\S+|\s+", prompt)
            values = [None, *([-1.0] * (len(tokens) - 1))]
        text = (prompt if request.get("echo") else "") + generated
        tokens.append(generated)
        values.append(-0.1)
        offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
        logprobs = None
        if want_logprobs and persona.logprobs and fault != "filter":
            # A top alternative is the token itself when it is the likelier one (greedy), else a better one.
            tops = [None if v is None else {t: max(v, math.log(QA_ANSWER_PROBABILITY))} for t, v in zip(tokens, values)] if top_logprobs else None
            logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
        self._completion_ids += 1
        prompt_tokens, completion_tokens = _approx_tokens(len(prompt)), _approx_tokens(len(generated))
        return {
            "id": f"cmpl-sim-{self._completion_ids}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
        }

    def _completion(
        self, model: str, messages: list[Any], content: str, finish_reason: str, logprobs: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self._completion_ids += 1
        prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
        prompt_tokens = _approx_tokens(prompt_chars)
        completion_tokens = _approx_tokens(len(content))
        return {
            "id": f"chatcmpl-sim-{self._completion_ids}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": logprobs,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _cut(content: str, finish_reason: str, request: dict[str, Any]) -> tuple[str, str]:
    """A reply cut to the request's ``max_tokens`` (about four characters a token)."""
    max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
    if isinstance(max_tokens, int) and max_tokens > 0 and len(content) > max_tokens * 4:
        return content[: max_tokens * 4], "length"
    return content, finish_reason


# --- HTTP ------------------------------------------------------------------------------------


class _BadHttp(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    """One request off the connection, or None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if error.partial.strip():
            raise _BadHttp(400, "incomplete request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadHttp(431, "request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise _BadHttp(400, "malformed request line") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise _BadHttp(400, "bad Content-Length") from None
        if not 0 <= length <= _MAX_BODY_BYTES:
            raise _BadHttp(413, "request body too large")
        body = await reader.readexactly(length)
    return HttpRequest(method, target, keep_alive, body, headers)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadHttp(400, "bad chunk size") from None
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # skip trailers
                pass
            return b"".join(chunks)
        total += size
        if total > _MAX_BODY_BYTES:
            raise _BadHttp(413, "request body too large")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _encode_response(reply: HttpReply, keep_alive: bool) -> bytes:
    reason = HTTPStatus(reply.status).phrase
    lines = [
        f"HTTP/1.1 {reply.status} {reason}",
        f"Content-Type: {reply.content_type}",
        f"Content-Length: {len(reply.body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
        *(f"{name}: {value}" for name, value in reply.headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body


class SimHttpServer:
    """Serves a :class:`SimApp` over HTTP on the running event loop."""

    def __init__(self, app: SimApp, host: str = "127.0.0.1", port: int = 0):
        self.app = app
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve_connection, self.host, self.port, limit=_MAX_HEAD_BYTES, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and end every connection, including handlers sleeping in a timeout."""
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self.app.batches.aclose()
        await self._server.wait_closed()
        self._server = None

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.app.stats.count(connections=1)
        try:
            while True:
                try:
                    request = await _read_request(reader)
                except _BadHttp as error:
                    writer.write(_encode_response(error_reply(error.status, str(error)), False))
                    await writer.drain()
                    return
                if request is None:
                    return
                reply = await self.app.handle(request)
                writer.write(_encode_response(reply, request.keep_alive))
                await writer.drain()
                if not request.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (e.g. gave up on a timeout fault)
        except asyncio.CancelledError:
            # Shutdown: end quietly (asyncio <3.12 logs a traceback for a cancelled handler task).
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class SimServer:
    """A :class:`SimHttpServer` running in a background thread with its own event loop.

    Use as a context manager: ``with SimServer(knowledge) as sim: ... sim.base_url``.
    """

    def __init__(self, knowledge: SimKnowledge, host: str = "127.0.0.1", port: int = 0, default_persona: str | None = None):
        self.app = SimApp(knowledge, default_persona)
        self._http = SimHttpServer(self.app, host, port)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._startup_error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return self._http.base_url

    @property
    def port(self) -> int:
        return self._http.port

    def stats(self) -> dict[str, Any]:
        return self.app.stats.snapshot()

    def reset_stats(self) -> None:
        """Clear stats and attempt counters (only between runs: not synchronised with requests)."""
        self.app.reset()

    def start(self) -> SimServer:
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="biascheck-sim", daemon=True)
        self._thread.start()
        started.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise self._startup_error
        return self

    def close(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()
        self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(started))
        finally:
            loop.close()

    async def _main(self, started: threading.Event) -> None:
        self._stop = asyncio.Event()
        try:
            await self._http.start()
        except BaseException as error:  # e.g. port in use: re-raised in start()
            self._startup_error = error
            started.set()
            return
        started.set()
        await self._stop.wait()
        await self._http.close()
