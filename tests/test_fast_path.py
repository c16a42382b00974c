"""The fast path (biascheck/execution/fast_http.py) against litellm, through real HTTP to loopback
servers: every request the two send is the same body to the same endpoint with the same key, every
reply is read into the same completion or the same error (message, class of error, retry hint,
refused parameters), whatever the reply, and whole runs store the same rows and write the same
results.json. litellm is never mocked: each path runs against the same server."""

from __future__ import annotations

import asyncio
import gzip
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.core.errors import BiascheckError
from biascheck.execution.call_errors import CallError
from biascheck.execution.fast_http import FAST_PROVIDERS, fast_path_applies
from biascheck.execution.llm import MAX_REPLY_CHARS, Completion, LiteLLMClient, ModelConfig

from loopback import chat_answer, loopback_server, mutate, send_bytes, stopping

# litellm's pydantic types remark on odd replies when they are dumped; the runner silences them,
# these tests call the client directly.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PATHS = ("fast", "litellm")
PROVIDERS = ("openai/x", "hosted_vllm/org/x", "litellm_proxy/x")
KEY = "sk-fastpath-test-0123456789"
QUESTION = [{"role": "system", "content": "Answer with a letter."}, {"role": "user", "content": "A or B? 질문"}]
CONTINUATION = [{"role": "user", "content": "Q: A or B?\nA:"}, {"role": "assistant", "content": " A"}]


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "HOSTED_VLLM_API_KEY", "LITELLM_PROXY_API_KEY"):
        monkeypatch.setenv(name, KEY)


# A reply: (status, headers, body, content type); or a callable that serves the request itself.
Reply = tuple[int, dict[str, str], bytes, str]


class Server:
    """A loopback server answering each request with ``self.reply``, recording what it was sent."""

    def __init__(self) -> None:
        self.reply: Reply | Callable[[BaseHTTPRequestHandler, dict], None] = (200, {}, b"{}", "application/json")
        self.seen: list[tuple[str, str | None, dict]] = []

    def __call__(self, handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        self.seen.append((handler.path, handler.headers.get("authorization"), body))
        if callable(self.reply):
            self.reply(handler, body)
        else:
            status, headers, data, content_type = self.reply
            send_bytes(handler, status, data, headers, content_type=content_type)


def outcome(result: Completion | CallError) -> Any:
    if isinstance(result, CallError):
        return ("error", str(result), result.retryable, result.fatal, result.retry_after, result.rejected, result.unreachable)
    return result


def ask_both(
    server: Server,
    api_base: str,
    model: str,
    replies: list[Any],
    *,
    messages: list[dict[str, str]] = QUESTION,
    params: dict[str, Any] | None = None,
    sample: int = 0,
    api_key: str | None = None,
    timeout: float = 10.0,
) -> dict[str, tuple[list[Any], list, dict[str, int] | None]]:
    """Each reply in turn through each path: {path: (outcomes, the requests the server saw, the
    fast path's counts)}."""
    found = {}
    for path in PATHS:
        server.seen = []
        config = ModelConfig(model, api_base=api_base, timeout=timeout, http_client=path)

        async def go() -> tuple[list[Any], dict[str, int] | None]:
            client = LiteLLMClient(config, api_key=api_key)
            results = []
            try:
                for reply in replies:
                    server.reply = reply
                    try:
                        results.append(outcome(await client.complete(messages, dict(params or {}), sample)))
                    except CallError as exc:
                        results.append(outcome(exc))
                return results, (dict(client._fast.counts) if client._fast is not None else None)
            finally:
                await client.aclose()

        results, counts = asyncio.run(go())
        found[path] = (results, list(server.seen), counts)
    return found


def assert_same(found: dict[str, tuple[list[Any], list, dict[str, int] | None]], labels: list[str]) -> None:
    fast, slow = found["fast"], found["litellm"]
    for label, a, b in zip(labels, fast[0], slow[0]):
        assert a == b, f"{label}: the fast path gives {a!r}, litellm {b!r}"
    assert fast[1] == slow[1], "the server was sent other requests"
    assert slow[2] is None


def reply_json(document: Any, status: int = 200, headers: dict[str, str] | None = None, content_type: str = "application/json") -> Reply:
    return status, headers or {}, json.dumps(document).encode(), content_type


def answer(**changes: Any) -> dict:
    """A plain chat completion with top-level fields replaced (None values removed when ``drop``)."""
    document = chat_answer({"model": "x"})
    for key, value in changes.items():
        document[key] = value
    return document


def answer_with(choice: dict | None = None, message: dict | None = None, **top: Any) -> dict:
    document = answer(**top)
    if message:
        document["choices"][0]["message"].update(message)
    document["choices"][0].update(choice or {})
    return document


def without(document: dict, *path: str) -> dict:
    target = document
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return document


LOGPROBS = {
    "content": [
        {"token": "\n", "logprob": -0.01, "bytes": [10], "top_logprobs": [{"token": "\n", "logprob": -0.01, "bytes": [10]}]},
        {
            "token": "A",
            "logprob": -0.1,
            "bytes": [65],
            "top_logprobs": [{"token": "A", "logprob": -0.1, "bytes": [65]}, {"token": "B", "logprob": -2, "bytes": None}],
        },
    ]
}
VLLM_MESSAGE = {
    "role": "assistant",
    "content": "B",
    "refusal": None,
    "annotations": None,
    "audio": None,
    "function_call": None,
    "tool_calls": [],
    "reasoning_content": None,
}

# Replies read directly on the fast path (plain), and replies it hands to litellm; both must come
# out alike. Errors are litellm's own classes and messages on either path.
CHAT_REPLIES: dict[str, Reply] = {
    "plain": reply_json(answer()),
    "served snapshot and fingerprint": reply_json(answer(model="x-2025-01-01", system_fingerprint="fp_0123")),
    "cut at max_tokens": reply_json(answer_with({"finish_reason": "length"}, {"content": ""})),
    "no content, filtered": reply_json(answer_with({"finish_reason": "content_filter"}, {"content": None})),
    "vLLM's shape": reply_json(
        answer_with({"stop_reason": None, "logprobs": None}, VLLM_MESSAGE, prompt_logprobs=None, kv_transfer_params=None)
        | {"usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10, "prompt_tokens_details": None}}
    ),
    "llama.cpp's timings": reply_json(answer(timings={"prompt_n": 3, "predicted_ms": 1.5}, id_slot=0)),
    "OpenAI's usage details": reply_json(
        answer(usage={"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10, "prompt_tokens_details": {"cached_tokens": 0}})
    ),
    "totals that do not add up": reply_json(answer(usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 99})),
    "no usage": reply_json(without(answer(), "usage")),
    "null usage": reply_json(answer(usage=None)),
    "no model": reply_json(without(answer(), "model")),
    "null model": reply_json(answer(model=None)),
    "logprobs sent unasked": reply_json(answer_with({"logprobs": LOGPROBS})),
    "odd logprobs": reply_json(answer_with({"logprobs": {"content": [{"token": "A", "logprob": "bad", "bytes": None, "top_logprobs": []}]}})),
    "think tags": reply_json(answer_with(message={"content": "<think>hmm</think>B"})),
    "reasoning beside": reply_json(answer_with(message={"content": "B", "reasoning_content": "because"})),
    "finish eos": reply_json(answer_with({"finish_reason": "eos"})),
    "finish null": reply_json(answer_with({"finish_reason": None})),
    "a tool call": reply_json(
        answer_with(
            {"finish_reason": "tool_calls"},
            {"content": None, "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        )
    ),
    "two choices": reply_json(answer(choices=[answer()["choices"][0], {**answer()["choices"][0], "index": 1}])),
    "error null beside": reply_json(answer(error=None)),
    "unicode and escapes": reply_json(answer_with(message={"content": '답: (가) \u00e9 \U0001f600 "q" \\ \n'})),
    "long reply": reply_json(answer_with(message={"content": "x" * (MAX_REPLY_CHARS + 500)})),
    "key echoed": reply_json(answer_with(message={"content": f"A (your key: {KEY})"})),
    "JSON as text/plain": reply_json(answer(), content_type="text/plain"),
    "201 created": reply_json(answer(), status=201),
    "gzip": (200, {"content-encoding": "gzip"}, gzip.compress(json.dumps(answer()).encode()), "application/json"),
    "429 with retry hints": reply_json(
        {"error": {"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"}},
        429,
        {"retry-after-ms": "20", "retry-after": "1"},
    ),
    "400 refusing seed": reply_json(
        {"error": {"message": "Unrecognized request argument supplied: seed", "type": "invalid_request_error", "param": "seed"}}, 400
    ),
    "400 context window": reply_json(
        {"error": {"message": "This model's maximum context length is 4096 tokens.", "code": "context_length_exceeded", "param": "messages"}}, 400
    ),
    "400 content filter": reply_json({"error": {"message": "filtered by content management policy", "code": "content_filter"}}, 400),
    "401": reply_json({"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}, 401),
    "403": reply_json({"error": {"message": "forbidden"}}, 403),
    "404": reply_json({"error": {"message": "The model x does not exist"}}, 404),
    "409": reply_json({"error": {"message": "conflict"}}, 409),
    "413 text": (413, {}, b"too large", "text/plain"),
    "422 pydantic": reply_json({"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted"}]}, 422),
    "500 llama.cpp logprobs": reply_json(
        {"error": {"code": 500, "message": "logprobs is not supported by this server", "type": "server_error"}}, 500
    ),
    "500 list": (500, {}, b"[1, 2]", "application/json"),
    "502 html": (502, {}, b"<html>bad gateway</html>", "text/html"),
    "503 with retry-after": reply_json({"error": {"message": "overloaded"}}, 503, {"retry-after": "2"}),
    "garbage": (200, {}, json.dumps(answer()).encode()[:40], "application/json"),
    "empty": (200, {}, b"", "application/json"),
    "html page": (200, {}, b"<html><body>502</body></html>", "text/html"),
    "null": (200, {}, b"null", "application/json"),
    "choices empty": reply_json(answer(choices=[])),
    "choices null": reply_json(answer(choices=None)),
    "message null": reply_json(answer_with({"message": None})),
    "error object in a 200": reply_json({"error": {"message": "no quota left", "type": "server_error"}}),
    "error string in a 200": reply_json({"error": "no quota left"}),
    "invalid UTF-8 body": (200, {}, b"\xff\xfe{\x80 not json", "application/json"),
    "invalid UTF-8 text": (200, {}, json.dumps(answer()).encode().replace(b'"A"', b'"\xff\xfe"'), "application/json"),
}


@pytest.mark.parametrize("model", PROVIDERS)
def test_every_reply_is_read_alike_on_both_paths(model: str) -> None:
    server = Server()
    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, model, list(CHAT_REPLIES.values()))
    assert_same(found, list(CHAT_REPLIES))
    counts = found["fast"][2]
    assert counts is not None and counts["direct"] >= 8, counts  # the plain replies were read directly
    assert counts["litellm"] == 0  # every request was sent directly, whatever came back


@pytest.mark.parametrize("model", PROVIDERS)
@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 0, "max_tokens": 30},
        {"temperature": 0.7, "top_p": 0.9, "seed": 1234, "max_tokens": 5, "stop": ["\n", "Q:"]},
        {"logprobs": True, "top_logprobs": 5, "max_tokens": 1},
        {"presence_penalty": 0.1, "frequency_penalty": 0.2, "n": 1, "logit_bias": {"32": 1}, "user": "ci", "response_format": {"type": "text"}},
        {"max_completion_tokens": 7, "seed": 0},
    ],
    ids=["greedy", "sampled", "first-token", "assorted", "completion-tokens"],
)
def test_the_same_requests_reach_the_server(model: str, params: dict) -> None:
    server = Server()
    replies = [reply_json(answer_with({"logprobs": LOGPROBS})), reply_json(answer())]
    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, model, replies, params=params)
    assert_same(found, ["first", "second"])
    assert found["fast"][1][0][1] == f"Bearer {KEY}"
    assert found["fast"][1][0][0] == "/v1/chat/completions"


def test_a_parameter_litellm_drops_or_rewrites_sends_that_kind_of_request_through_litellm() -> None:
    # litellm leaves "user" out for openai/, and rewrites an o-series model's max_tokens: the
    # dry run sees a body other than the fast path's and hands that kind of request to litellm.
    server = Server()
    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, "openai/x", [reply_json(answer())] * 2, params={"user": "ci", "temperature": 0})
        assert_same(found, ["first", "second"])
        assert found["fast"][2] == {"direct": 0, "replayed": 0, "litellm": 2}
        found = ask_both(server, api_base, "openai/o3-mini", [reply_json(answer())] * 2, params={"max_tokens": 5})
        assert_same(found, ["first", "second"])
        assert found["fast"][2] == {"direct": 0, "replayed": 0, "litellm": 2}


def test_a_parameter_litellm_refuses_is_refused_alike_without_a_request() -> None:
    server = Server()
    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, "openai/o3-mini", [reply_json(answer())], params={"logprobs": True, "top_logprobs": 2})
    assert_same(found, ["refused"])
    (error,) = found["fast"][0]
    assert error[0] == "error" and "logprobs" in error[1] and found["fast"][1] == []


def test_the_simulators_samples_go_in_the_body_as_litellm_sends_them() -> None:
    server = Server()
    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, "sim/fair", [reply_json(answer())] * 2, sample=3, params={"temperature": 1})
    assert_same(found, ["first", "second"])
    assert found["fast"][1][0][2]["biascheck_sample"] == 3 and found["fast"][1][0][1] == "Bearer sim"
    assert found["fast"][2]["direct"] == 2


@pytest.mark.parametrize("model", PROVIDERS)
def test_the_key_sent_is_the_one_litellm_sends(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server()
    with loopback_server(server) as (api_base, _):
        for env in ({}, {"OPENAI_API_KEY": "sk-openai-000000"}, {"HOSTED_VLLM_API_KEY": "sk-vllm-000000", "LITELLM_PROXY_API_KEY": "sk-proxy-0000"}):
            for name in ("OPENAI_API_KEY", "HOSTED_VLLM_API_KEY", "LITELLM_PROXY_API_KEY"):
                monkeypatch.delenv(name, raising=False)
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            for given in (None, "sk-given-000000"):
                try:
                    found = ask_both(server, api_base, model, [reply_json(answer())], api_key=given)
                except BiascheckError as exc:  # litellm's environment check: no key for openai/
                    assert "needs" in str(exc)
                    continue
                assert_same(found, [f"{env} {given}"])


# --- log-likelihood requests: /v1/completions with echo ----------------------------------------


def echo_reply(prompt: str, *, top: bool = True, late: bool = False, **changes: Any) -> dict:
    """An echo of ``prompt`` in three-character tokens with their log-probabilities."""
    tokens = [prompt[i : i + 3] for i in range(0, len(prompt), 3)]
    tops = [None] + [{(tokens[i + 1] if late and i + 1 < len(tokens) else t): -0.5, "zz": -3.0} for i, t in enumerate(tokens)][1:]
    choice = {
        "index": 0,
        "text": prompt,
        "finish_reason": "length",
        "logprobs": {
            "tokens": tokens,
            "token_logprobs": [None] + [-0.5] * (len(tokens) - 1),
            "text_offset": list(range(0, len(prompt), 3)),
            "top_logprobs": tops if top else None,
        },
    }
    document = {
        "id": "c",
        "object": "text_completion",
        "created": 1,
        "model": "x",
        "choices": [choice],
        "usage": {"prompt_tokens": len(tokens), "completion_tokens": 0, "total_tokens": len(tokens)},
    }
    document["choices"][0].update(changes)
    return document


PROMPT = "Q: A or B?\nA: A"  # CONTINUATION's context and continuation, as sent


def completion_replies() -> dict[str, Reply]:
    plain = echo_reply(PROMPT)
    return {
        "plain": reply_json(plain),
        "no alternatives": reply_json(echo_reply(PROMPT, top=False)),
        "one token late": reply_json(echo_reply(PROMPT, late=True)),
        "no logprobs": reply_json(echo_reply(PROMPT, logprobs=None)),
        "finish null": reply_json(echo_reply(PROMPT, finish_reason=None)),
        "finish eos": reply_json(echo_reply(PROMPT, finish_reason="eos")),
        "integer log-probabilities": reply_json(
            echo_reply(PROMPT)
            | {"choices": [{**plain["choices"][0], "logprobs": {**plain["choices"][0]["logprobs"], "token_logprobs": [None] + [-1] * 6}}]}
        ),
        "served snapshot": reply_json({**plain, "model": "x-snap"}),
        "no usage": reply_json(without(echo_reply(PROMPT), "usage")),
        "400 refusing echo": reply_json({"error": {"message": "echo is not supported", "param": "echo"}}, 400),
        "500 llama.cpp": reply_json({"error": {"code": 500, "message": "logprobs is not supported by this server"}}, 500),
        "429": reply_json({"error": {"message": "slow down"}}, 429, {"retry-after": "3"}),
        "garbage": (200, {}, json.dumps(plain).encode()[:50], "application/json"),
        "error in a 200": reply_json({"error": {"message": "no quota left"}}),
        "chat reply instead": reply_json(answer()),
    }


@pytest.mark.parametrize("model", PROVIDERS)
def test_log_likelihood_requests_are_sent_and_read_alike(model: str) -> None:
    server = Server()
    replies = completion_replies()
    with loopback_server(server) as (api_base, _):
        found = ask_both(
            server, api_base, model, list(replies.values()), messages=CONTINUATION, params={"echo": True, "logprobs": 1, "max_tokens": 0}
        )
    assert_same(found, list(replies))
    assert found["fast"][1][0][0] == "/v1/completions" and found["fast"][1][0][2]["prompt"] == PROMPT
    assert found["fast"][2]["direct"] >= 3
    first = found["fast"][0][0]
    assert isinstance(first, Completion) and first.loglikelihood is not None


# --- the exchange itself: stalls, refusals, broken connections -------------------------------------


def test_a_stalled_reply_ends_at_the_deadline_alike() -> None:
    server = Server()

    def hang(handler: BaseHTTPRequestHandler, body: dict) -> None:
        stopping(handler).wait()

    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, "openai/x", [hang], timeout=0.5)
    assert_same(found, ["hang"])
    assert "exceeded the deadline of 0.5 s" in found["fast"][0][0][1]


def test_a_server_that_hangs_up_is_an_error_alike() -> None:
    server = Server()

    def hang_up(handler: BaseHTTPRequestHandler, body: dict) -> None:
        handler.close_connection = True
        handler.connection.shutdown(2)

    def cut_body(handler: BaseHTTPRequestHandler, body: dict) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", "1000")
        handler.end_headers()
        handler.wfile.write(b'{"id": "c1", "choi')
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(2)

    with loopback_server(server) as (api_base, _):
        for model in PROVIDERS:
            found = ask_both(server, api_base, model, [hang_up, cut_body])
            assert_same(found, [f"{model} hang-up", f"{model} cut body"])
            assert all(error[0] == "error" and error[2] for error in found["fast"][0])  # retried


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_followed_once_alike(status: int) -> None:
    # Issue 34 D18: the fast path handed a 3xx to litellm, which sent the request again: every
    # attempt was sent twice. Each path now sends it once and follows the redirect once.
    server = Server()

    def moved(handler: BaseHTTPRequestHandler, body: dict) -> None:
        if handler.path.startswith("/v1/"):
            send_bytes(handler, status, b"", {"location": handler.path.replace("/v1/", "/v2/", 1)})
        else:
            send_bytes(handler, 200, json.dumps(answer()).encode())

    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, "openai/x", [moved, moved])
    assert_same(found, ["first", "second"])
    paths = [path for path, _, _ in found["fast"][1]]
    # (a 301/302/303 is followed as a GET, which the loopback server does not count)
    assert paths == (["/v1/chat/completions", "/v2/chat/completions"] * 2 if status in (307, 308) else ["/v1/chat/completions"] * 2), paths


def test_a_redirect_to_another_origin_is_followed_without_the_key_alike() -> None:
    elsewhere, server = Server(), Server()
    elsewhere.reply = reply_json(answer())
    with loopback_server(elsewhere) as (other_base, _), loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, "openai/x", [(307, {"location": other_base + "/chat/completions"}, b"", "application/json")])
    assert_same(found, ["redirected"])
    assert isinstance(found["fast"][0][0], Completion) and [path for path, _, _ in found["fast"][1]] == ["/v1/chat/completions"]
    # One request each path followed the redirect with (the fast path's, then litellm's), neither with the key.
    assert [key for _, key, _ in elsewhere.seen] == [None, None], "the key went to another origin"


def test_nothing_listening_is_the_same_unreachable_error() -> None:
    server = Server()
    found = ask_both(server, "http://127.0.0.1:9/v1", "openai/x", [reply_json(answer())])
    assert_same(found, ["refused"])
    error = found["fast"][0][0]
    assert error[0] == "error" and error[-1] is True and error[1].startswith("cannot reach http://127.0.0.1:9/v1: ")
    assert found["fast"][2] == {"direct": 0, "replayed": 0, "litellm": 1}


def test_the_pool_does_not_cap_concurrency() -> None:
    # aiohttp's default pool holds 100 connections: 150 requests held open at once all arrive.
    release = threading.Event()
    arrived = []

    def serve(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        arrived.append(n)
        release.wait(30)
        send_bytes(handler, 200, json.dumps(answer()).encode())

    async def go(api_base: str) -> list:
        client = LiteLLMClient(ModelConfig("openai/x", api_base=api_base, http_client="fast"))
        try:
            calls = [asyncio.ensure_future(client.complete(QUESTION, {"seed": i})) for i in range(150)]
            deadline = time.monotonic() + 30
            while len(arrived) < 150 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            in_flight = len(arrived)
            release.set()
            await asyncio.gather(*calls)
            return [in_flight, client._fast.counts["direct"] if client._fast else 0]
        finally:
            await client.aclose()

    with loopback_server(serve) as (api_base, _):
        in_flight, direct = asyncio.run(go(api_base))
    assert in_flight == 150 and direct == 150


# --- fuzzed replies: any reply, one reading ----------------------------------------------------

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "stop", "length", "eos", "content_filter", "<think>a</think>b", "A", "assistant", "x-snap"]),
    st.text(max_size=12),
    st.lists(st.integers(0, 5), max_size=2),
    st.dictionaries(st.sampled_from(["prompt_tokens", "token", "logprob", "x"]), st.integers(0, 9), max_size=2),
)


@st.composite
def fuzzed_replies(draw: st.DrawFn) -> Reply:
    """A plain reply (with logprobs) with up to three parts replaced or removed, under a status."""
    document = answer_with({"logprobs": json.loads(json.dumps(LOGPROBS))}, system_fingerprint="fp")
    mutate(draw, document, _LEAVES)
    status = draw(st.sampled_from([200, 200, 200, 200, 400, 422, 429, 500, 503]))
    return status, {}, json.dumps(document).encode(), "application/json"


@settings(max_examples=examples(20), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(replies=st.lists(fuzzed_replies(), min_size=4, max_size=4))
def test_fuzzed_replies_are_read_alike(replies: list[Reply]) -> None:
    server = Server()
    with loopback_server(server) as (api_base, _):
        found = ask_both(server, api_base, "hosted_vllm/x", replies, params={"logprobs": True, "top_logprobs": 2})
        assert_same(found, [repr(r) for r in replies])
        found = ask_both(server, api_base, "openai/x", replies, params={"logprobs": True, "top_logprobs": 2})
        assert_same(found, [repr(r) for r in replies])


# --- whole runs: the same rows, the same results.json -----------------------------------------------


def store_rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        columns = "key, model, request, text, finish_reason, usage, cost_usd, logprobs, truncated, served_model, system_fingerprint, loglikelihood"
        return db.execute(f"SELECT {columns} FROM responses ORDER BY key").fetchall()


def results_bytes(run) -> bytes:
    document = run.results()
    document["created_at"] = None
    return json.dumps(document, sort_keys=True).encode()


@pytest.mark.parametrize(
    ("model", "mode"),
    [
        ("sim/stereotyped?p=0.4&fail_rate=0.3&faults=429,500,503,garbage,filter,freetext&retry_after_ms=5&seed=3", "generate"),
        ("sim/stereotyped?p=0.4", "first-token"),
        ("sim/stereotyped?p=0.4", "loglikelihood"),
    ],
    ids=["generate-with-faults", "first-token", "loglikelihood"],
)
def test_a_run_against_the_simulator_stores_and_reports_the_same_on_both_paths(run_biascheck, tiny_kobbq, tmp_path, model, mode):
    runs = {}
    for path in PATHS:
        runs[path] = run_biascheck(
            tiny_kobbq,
            model,
            "--biascheck-http-client",
            path,
            "--biascheck-answer-mode",
            mode,
            "--biascheck-retries",
            "1",
            store_path=tmp_path / f"{path}.sqlite",
            report=path,
        )
    fast, slow = runs["fast"], runs["litellm"]
    assert fast.results()["run"]["calls"] > 0
    assert store_rows(tmp_path / "fast.sqlite") == store_rows(tmp_path / "litellm.sqlite")
    assert results_bytes(fast) == results_bytes(slow)
    assert fast.ret == slow.ret
    if mode == "generate":
        assert fast.results()["run"]["retries"] > 0 and fast.results()["run"]["errors"] > 0  # the faults were met


def test_a_run_against_a_vllm_like_server_stores_and_reports_the_same_on_both_paths(run_biascheck, tiny_kobbq, tmp_path):
    # Answers by prompt: a letter, an error now and then, a 429 on a first attempt: deterministic per request.
    attempts: dict[str, int] = {}
    lock = threading.Lock()

    def serve(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        prompt = body["messages"][-1]["content"]
        with lock:
            attempts[prompt] = attempts.get(prompt, 0) + 1
            attempt = attempts[prompt]
        pick = sum(prompt.encode()) % 7
        if pick == 0 and attempt == 1:
            send_bytes(handler, 429, b'{"error": {"message": "slow down"}}', {"retry-after-ms": "5"})
        elif pick == 1:
            send_bytes(handler, 500, b'{"object": "error", "message": "engine error", "code": 500}')
        else:
            reply = answer_with({"stop_reason": None}, {**VLLM_MESSAGE, "content": "ABC"[pick % 3]}, model=body["model"], prompt_logprobs=None)
            send_bytes(handler, 200, json.dumps(reply).encode())

    runs = {}
    with loopback_server(serve) as (api_base, _):
        for path in PATHS:
            attempts.clear()
            runs[path] = run_biascheck(
                tiny_kobbq,
                "hosted_vllm/org/model",
                "--biascheck-api-base",
                api_base,
                "--biascheck-http-client",
                path,
                "--biascheck-retries",
                "1",
                store_path=tmp_path / f"{path}.sqlite",
                report=path,
            )
    assert runs["fast"].results()["run"]["errors"] > 0 and runs["fast"].results()["run"]["retries"] > 0
    assert store_rows(tmp_path / "fast.sqlite") == store_rows(tmp_path / "litellm.sqlite")
    assert results_bytes(runs["fast"]) == results_bytes(runs["litellm"])
    assert KEY not in (tmp_path / "fast" / "results.json").read_text("utf-8")


# --- which requests take the fast path, and the option ------------------------------------------


def test_the_fast_path_applies_to_openai_compatible_endpoints_only() -> None:
    for provider in FAST_PROVIDERS:
        assert fast_path_applies(f"{provider}/m", "http://127.0.0.1:8000/v1", "fast")
        assert not fast_path_applies(f"{provider}/m", "http://127.0.0.1:8000/v1", "litellm")
        assert not fast_path_applies(f"{provider}/m", None, "fast")
    for model in ("anthropic/claude-3-5-sonnet", "gemini/gemini-2.0-flash", "ollama/llama3", "text-completion-openai/x", "gpt-4o"):
        assert not fast_path_applies(model, "http://127.0.0.1:8000/v1", "fast")
    assert LiteLLMClient(ModelConfig("sim/fair"), api_base="http://127.0.0.1:9/v1")._fast is not None
    assert LiteLLMClient(ModelConfig("sim/fair", http_client="litellm"), api_base="http://127.0.0.1:9/v1")._fast is None
    assert LiteLLMClient(ModelConfig("openai/gpt-4o-mini"))._fast is None  # OpenAI's own API: litellm


def test_an_unknown_http_client_is_one_line_naming_where_it_was_given(pytester, tiny_kobbq, monkeypatch) -> None:
    from biascheck.options import check_http_client

    with pytest.raises(BiascheckError, match=r"^--biascheck-http-client: 'httpx' is not an HTTP client; use fast .* or litellm$"):
        check_http_client("httpx", "--biascheck-http-client")
    with pytest.raises(BiascheckError, match=r"^pytest.ini: biascheck_http_client: 'curl' is not an HTTP client"):
        check_http_client("curl", "pytest.ini", "biascheck_http_client")
    with pytest.raises(BiascheckError, match="'aiohttp' is not an HTTP client"):
        ModelConfig("sim/fair", http_client="aiohttp")
    result = pytester.runpytest_inprocess("--biascheck", str(tiny_kobbq), "--biascheck-model", "sim/fair", "--biascheck-http-client", "requests")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--biascheck-http-client: 'requests' is not an HTTP client" in result.stderr.str()
    monkeypatch.setenv("BIASCHECK_HTTP_CLIENT", "nope")
    result = pytester.runpytest_inprocess("--biascheck", str(tiny_kobbq), "--biascheck-model", "sim/fair")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "BIASCHECK_HTTP_CLIENT: 'nope' is not an HTTP client" in result.stderr.str()
