"""A model server that misbehaves on purpose, through biascheck's real paths (litellm's real HTTP
client, and the fast path's, against a loopback server; every test runs through both): it stalls, sends a 10 MB reply, a gzip bomb, a broken
or cut-short body, an error in a 200, or echoes the API key back. Whatever it does, each attempt ends within the deadline, the
retries stay bounded, an error is never scored (nor stored) as an answer and reads as one clean
line, a reply is kept to ``biascheck.execution.llm.MAX_REPLY_CHARS``, and the key is never kept anywhere."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import re
import secrets
import socket
import string
import time
import tracemalloc
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.choices import parse_answer
from biascheck.core.records import Response
from biascheck.execution import fast_http, llm
from biascheck.execution.llm import LiteLLMClient, ModelConfig, import_litellm
from biascheck.execution.policy import RetryPolicy
from biascheck.execution.runner import ModelRequest, execute
from biascheck.execution.stats import RunStats, RunStatus
from biascheck.execution.store import ResponseStore, StoredResponse, request_key

from loopback import bearer_token, chat_answer, loopback_server, mutate, send_bytes, send_json, stopping

POLICY = RetryPolicy(max_retries=1, base_delay=0.01, max_delay=0.02)
ATTEMPTS = POLICY.max_retries + 1
MARGIN = 3.0  # seconds of slack per attempt: CI machines are loaded
STALL_TIMEOUT = 0.5  # --biascheck-timeout of the cases that stall
TIMEOUT = 10.0  # of the others: they answer at once, a deadline must not be what ends them
MAX_REPLY_CHARS = getattr(llm, "MAX_REPLY_CHARS", 65_536)  # intended: 64 KB
MAX_REPLY_BYTES = getattr(fast_http, "MAX_REPLY_BYTES", 16 << 20)  # a body as decoded: 16 MiB
HUGE_CHARS = 10 * 2**20  # a 10 MB reply

Serve = Callable[[BaseHTTPRequestHandler, int, dict], None]


@pytest.fixture(scope="module", autouse=True)
def _litellm_warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One good call first: no deadline or wall time measured here includes importing litellm or
    its lazy set-up on a process's first call."""
    import_litellm()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-warm-up-only")
        called = call(well_behaved, tmp_path_factory.mktemp("warm"))
    assert called.responses[0].text == "A"


# The HTTP client of call(): each test runs through both (the http_client fixture sets it).
CLIENT = {"name": "fast"}


@pytest.fixture(autouse=True)
def _both_paths(http_client: str) -> None:
    CLIENT["name"] = http_client


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The only place the key is given: litellm reads it from the environment and sends it."""
    key = "sk-test-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(24))
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


@dataclass
class Called:
    responses: list[Response]
    stats: RunStats
    arrivals: list[float]  # monotonic times at which the server got each attempt
    ended: float  # monotonic time at which execute returned
    elapsed: float  # wall time of execute
    stored: dict[str, StoredResponse]  # the store's rows of the requests
    store_bytes: bytes  # every file of the store (sqlite, -wal), read while it was open and after it closed
    store_size: int  # their largest total size in bytes, while open or after closing
    request_keys: list[str]


def _store_files(path: Path) -> list[Path]:
    return [p for p in path.parent.glob(path.name + "*") if p.is_file()]


def call(
    serve: Serve, tmp_path: Path, *, requests: int = 1, timeout: float = TIMEOUT, store_path: Path | None = None, policy: RetryPolicy = POLICY
) -> Called:
    """``requests`` distinct requests through ``execute`` (retries, store) and litellm's real HTTP
    path to a loopback server answering with ``serve``."""
    store_path = store_path or tmp_path / "store.sqlite"
    with loopback_server(serve) as (api_base, arrivals):
        config = ModelConfig("openai/x", api_base=api_base, timeout=timeout, http_client=CLIENT["name"])
        planned = []
        for i in range(requests):
            messages = [{"role": "user", "content": f"Question {i}: A or B?"}]
            planned.append(ModelRequest(request_key(config.model, config.endpoint, messages, {}), messages, {}))

        @contextlib.contextmanager
        def open_client():
            yield LiteLLMClient(config)  # no api_key: litellm takes OPENAI_API_KEY

        snapshot = b""
        size = 0

        async def go():
            nonlocal snapshot, size
            with ResponseStore(store_path) as store:
                run = await execute(planned, store=store, model_name=config.model, open_client=open_client, concurrency=4, policy=policy)
                stored = store.get_many(r.key for r in planned)
                files = _store_files(store_path)  # the -wal holds the new pages until the store closes
                snapshot = b"".join(p.read_bytes() for p in files)
                size = sum(p.stat().st_size for p in files)
            return run, stored

        started = time.monotonic()
        run, stored = asyncio.run(go())
        ended = time.monotonic()
    files = _store_files(store_path)
    snapshot += b"".join(p.read_bytes() for p in files)
    size = max(size, sum(p.stat().st_size for p in files))
    return Called(
        [run.responses[r.key] for r in planned], run.stats, list(arrivals), ended, ended - started, stored, snapshot, size, [r.key for r in planned]
    )


def assert_clean_line(error: str) -> None:
    """An error as a user reads it: one line, no traceback, no object reprs, not a wall of text."""
    assert "\n" not in error and "\r" not in error, error
    assert "Traceback" not in error, error
    assert not re.search(r" object at 0x[0-9a-fA-F]+", error), error  # <Foo object at 0x7f...>
    assert not re.search(r"\b[A-Z]\w*\(\w+=", error), error  # ModelResponse(id=..., ...): a dump, not a message
    assert "{'" not in error, error  # {'response_object': {...}}: a dict dumped by repr(), not a message
    assert len(error) <= 1000, error


def assert_errored(called: Called) -> None:
    """Every request ended as an error, never as an answer, and none was stored."""
    for response in called.responses:
        assert response.errored, f"scored as an answer: {response.text!r:.200}"
        assert response.text is None
        assert_clean_line(response.error)
    assert called.stored == {}, "an error was stored as an answer"
    assert called.stats.errors == len(called.responses)


def assert_retries_bounded(called: Called) -> None:
    assert len(called.arrivals) <= ATTEMPTS * len(called.responses), called.arrivals


def well_behaved(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_json(handler, 200, chat_answer(body))


# --- stalls: each attempt ends at the deadline ----------------------------------------------


def hang(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    """Takes the request, never answers."""
    stopping(handler).wait()


def silent_after_headers(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    """Sends the status and headers of a reply, then nothing."""
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", "1000")
    handler.end_headers()
    handler.wfile.flush()
    stopping(handler).wait()


def trickle(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    """One byte a second, forever: every read arrives well within any read timeout."""
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(10**9))
    handler.end_headers()
    handler.wfile.flush()
    while not stopping(handler).wait(1.0):
        handler.wfile.write(b" ")  # JSON allows leading whitespace: the body is never wrong, just endless
        handler.wfile.flush()


@pytest.mark.parametrize("serve", [hang, silent_after_headers, trickle], ids=lambda f: f.__name__)
def test_a_stalling_server_is_an_error_within_the_deadline_of_each_attempt(tmp_path, serve):
    called = call(serve, tmp_path, timeout=STALL_TIMEOUT)

    assert_errored(called)
    error = called.responses[0].error
    assert f"exceeded the deadline of {STALL_TIMEOUT:g} s" in error and f"after {ATTEMPTS} attempts" in error, error
    # A timeout is retried, as often as the policy says and no more.
    assert called.stats.calls == ATTEMPTS and called.stats.retries == POLICY.max_retries
    assert 1 <= len(called.arrivals) <= ATTEMPTS  # (under load, an attempt may time out before it arrives)
    # Each attempt, from the server's side: held no longer than the deadline plus a margin.
    ends = called.arrivals[1:] + [called.ended]
    for start, end in zip(called.arrivals, ends):
        assert end - start < STALL_TIMEOUT + MARGIN, f"an attempt was held {end - start:.1f} s"
    assert called.elapsed < ATTEMPTS * (STALL_TIMEOUT + MARGIN)


# --- a 10 MB reply: kept to MAX_REPLY_CHARS --------------------------------------------------


@pytest.fixture(scope="module")
def huge_text() -> str:
    """10 MB of numbered words, so a cut shows where it fell: "0000000 0000001 ..."."""
    return "".join(f"{i:07d} " for i in range(HUGE_CHARS // 8 + 1))[:HUGE_CHARS]


def test_a_10_mb_reply_is_answered_but_kept_to_the_reply_limit(tmp_path, huge_text):
    data = json.dumps(chat_answer({}, text=huge_text)).encode()

    def huge(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        send_bytes(handler, 200, data)

    called = call(huge, tmp_path, requests=3)

    assert called.elapsed < 20.0, f"3 replies of 10 MB took {called.elapsed:.1f} s"
    assert len(called.arrivals) == 3 and called.stats.errors == 0
    kept = huge_text[:MAX_REPLY_CHARS]
    for response in called.responses:
        assert not response.errored, response.error
        length = len(response.text or "")
        assert length == MAX_REPLY_CHARS, f"Response.text has {length:,} characters"
        assert response.text == kept, "Response.text is not the reply's head"
        assert getattr(response, "truncated", None) is True, "Response.truncated"
    for key in called.request_keys:
        row = called.stored[key]
        length = len(row.text or "")
        assert length == MAX_REPLY_CHARS, f"the stored text has {length:,} characters"
        assert row.text == kept, "the stored text is not the reply's head"
        assert getattr(row, "truncated", None) is True, "StoredResponse.truncated"
    assert called.store_size < 1_000_000, f"the store holds {called.store_size:,} bytes for 3 replies"
    assert getattr(llm, "MAX_REPLY_CHARS", None) == 65_536, "biascheck.execution.llm.MAX_REPLY_CHARS"

    # A warm re-run (the same keys) answers from the store, still cut and still marked so.
    @contextlib.contextmanager
    def no_client():
        raise AssertionError("a warm run made a call")
        yield

    async def rerun():
        with ResponseStore(tmp_path / "store.sqlite") as store:
            again = [ModelRequest(key, [{"role": "user", "content": "?"}], {}) for key in called.request_keys]
            return await execute(again, store=store, model_name="openai/x", open_client=no_client)

    warm = asyncio.run(rerun())
    assert warm.stats.cache_hits == 3 and warm.stats.calls == 0
    for response in warm.responses.values():
        assert response.text == kept, "the stored text is not the reply's head"
        assert response.truncated is True, "Response.truncated, from the store"


# --- broken bodies: an error, one clean line ------------------------------------------------


def _completion_bytes(content: bytes) -> bytes:
    """A chat completion whose reply text is ``content``, as raw bytes (which need not be UTF-8)."""
    return json.dumps(chat_answer({}, text="@CONTENT@")).encode().replace(b"@CONTENT@", content)


def invalid_utf8_text(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_bytes(handler, 200, _completion_bytes(b"\xff\xfe\xc3\x28\xa0\xa1"))


def invalid_utf8_body(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_bytes(handler, 200, b"\xff\xfe{\x80 not json \xc3\x28")


def choices_empty(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_json(handler, 200, {**chat_answer(body), "choices": []})


def choices_null(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_json(handler, 200, {**chat_answer(body), "choices": None})


def message_null(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    completion = chat_answer(body)
    completion["choices"][0]["message"] = None
    send_json(handler, 200, completion)


def json_null(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_bytes(handler, 200, b"null")


def html_page(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_bytes(handler, 200, b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")


def empty_body(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_bytes(handler, 200, b"")


@pytest.mark.parametrize(
    "serve",
    [invalid_utf8_text, invalid_utf8_body, choices_empty, choices_null, message_null, json_null, html_page, empty_body],
    ids=lambda f: f.__name__,
)
def test_a_broken_body_is_an_error_on_one_clean_line(tmp_path, serve):
    called = call(serve, tmp_path)

    assert called.elapsed < ATTEMPTS * MARGIN
    assert_retries_bounded(called)
    response = called.responses[0]
    if serve is invalid_utf8_text and not response.errored:
        # Decoded leniently: acceptable only as text that names no option (out of choice), and
        # that can be stored and reported (no lone surrogates).
        assert parse_answer(response.text, ["yes", "no", "unknown"], ["A", "B", "C"]) is None, response.text
        response.text.encode("utf-8")
        assert called.stored[called.request_keys[0]].text == response.text
        return
    assert_errored(called)


def cut_short(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    """The first three replies: their status and headers, then 20 bytes of the body and a hang-up.
    Every later one whole."""
    data = json.dumps(chat_answer(body)).encode()
    if n >= 3:
        send_bytes(handler, 200, data)
        return
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data[:20])
    handler.wfile.flush()
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


def test_a_body_cut_short_is_a_reply_to_retry_not_an_endpoint_that_cannot_be_reached(tmp_path):
    # Issue 34 D8: three cut bodies in a row at the start tripped the circuit breaker as "cannot
    # reach", and the run stopped with no answer; the fourth attempt would have been answered.
    called = call(cut_short, tmp_path, requests=2, policy=RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.02))

    assert called.stats.status is RunStatus.COMPLETE, called.stats.status
    assert [r.text for r in called.responses] == ["A", "A"], [r.error for r in called.responses]
    assert called.stats.retries == 3 and len(called.arrivals) == 5
    assert len(called.stored) == 2


# --- a compressed bomb: refused at the reply cap, never inflated whole ---------------------------


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """A JSON body (leading blanks, which JSON allows) of 4 times the reply cap, gzipped to ~64 KB."""
    return gzip.compress(b" " * (4 * MAX_REPLY_BYTES) + json.dumps(chat_answer({})).encode(), compresslevel=9)


def test_a_gzip_bomb_is_refused_at_the_reply_cap_without_inflating_it(tmp_path, gzip_bomb, http_client):
    # Issue 34 D9: a 250 KB gzip reply inflating to 256 MiB took 6 GB of memory over 48 calls.
    if http_client == "litellm":
        pytest.skip("litellm's own client inflates a reply whole: the cap is the fast path's")

    def bomb(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        send_bytes(handler, 200, gzip_bomb, {"content-encoding": "gzip"})

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        called = call(bomb, tmp_path)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()

    assert_errored(called)
    assert f"over {MAX_REPLY_BYTES >> 20} MiB" in called.responses[0].error, called.responses[0].error
    assert len(called.arrivals) == 1, "a reply refused for its size was asked again"
    assert peak < 2 * MAX_REPLY_BYTES, f"{peak >> 20} MiB held to refuse a reply capped at {MAX_REPLY_BYTES >> 20} MiB"


# --- an error in an HTTP 200 ----------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        {"message": "The server had an error while processing your request.", "type": "server_error"},
        {"message": "The server had an error while processing your request.", "type": "server_error", "code": 500},
        "The server had an error while processing your request.",
    ],
    ids=["object", "object-with-code", "string"],
)
def test_an_error_body_in_a_200_is_an_error_not_an_answer(tmp_path, error):
    def error_in_200(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        send_json(handler, 200, {"error": error})

    called = call(error_in_200, tmp_path)

    assert called.elapsed < ATTEMPTS * MARGIN
    assert_retries_bounded(called)
    assert_errored(called)
    if isinstance(error, dict):
        assert "The server had an error" in called.responses[0].error


# --- the API key echoed back: never kept ----------------------------------------------------


def _leaks(key: str, text: str | bytes | None) -> list[str]:
    """The pieces of ``key`` (12 characters or more) found in ``text``: a cut key leaks too."""
    if text is None:
        return []
    haystack = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    pieces = {key[i : i + 12] for i in range(len(key) - 11)}
    return sorted(p for p in pieces if p.encode() in haystack)


def key_in_reply(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_json(
        handler, 200, chat_answer(body, text=f"A. (You sent Authorization: Bearer {bearer_token(handler)}; your key is {bearer_token(handler)}.)")
    )


def key_across_the_reply_limit(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    """A long reply with the key where the limit cuts it: 14 of its characters before the cut."""
    before = "x" * (MAX_REPLY_CHARS - 14)
    send_json(handler, 200, chat_answer(body, text=before + bearer_token(handler) + " y" * 1000))


def key_in_finish_reason(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    completion = chat_answer(body)
    completion["choices"][0]["finish_reason"] = bearer_token(handler)
    send_json(handler, 200, completion)


def key_in_401(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    message = f"Incorrect API key provided: {bearer_token(handler)}. You can find your API key at https://example.invalid."
    send_json(handler, 401, {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})


def key_in_400(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_json(handler, 400, {"error": {"message": f"bad request from {bearer_token(handler)}", "type": "invalid_request_error"}})


def key_in_500(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_json(handler, 500, {"error": {"message": f"crashed serving {bearer_token(handler)}", "type": "server_error"}})


def key_in_200_error(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    send_json(handler, 200, {"error": {"message": f"no quota left for {bearer_token(handler)}", "type": "server_error"}})


@pytest.mark.parametrize(
    "serve",
    [key_in_reply, key_across_the_reply_limit, key_in_finish_reason, key_in_401, key_in_400, key_in_500, key_in_200_error],
    ids=lambda f: f.__name__,
)
def test_an_echoed_api_key_is_never_kept(tmp_path, api_key, serve):
    sent: list[str] = []

    def echo(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        sent.append(bearer_token(handler))
        serve(handler, n, body)

    called = call(echo, tmp_path)

    assert sent and set(sent) == {api_key}, "litellm did not send the key from OPENAI_API_KEY: nothing was echoed"
    assert called.elapsed < ATTEMPTS * MARGIN
    assert_retries_bounded(called)
    leaked = _leaks(api_key, called.store_bytes)
    assert not leaked, "the key is in the store's bytes"
    for response in called.responses:
        for name in ("text", "error", "finish_reason"):
            leaked = _leaks(api_key, getattr(response, name))
            assert not leaked, f"the key is in Response.{name}"
        if response.errored:
            assert_clean_line(response.error)
            assert called.stored == {}


# --- end to end: a session run against a hostile server -------------------------------------

# What each prompt of the end-to-end run meets, chosen by its text (so a retry meets it again).
E2E_BEHAVIOURS = [key_in_reply, key_in_200_error, invalid_utf8_text, message_null, choices_empty, key_in_400]


# In tiny_kobbq, the category whose prompts meet every one of them.
PLUGIN_CATEGORY = "race_ethnicity_nationality"


def _behaviour_of(prompt: str) -> Serve:
    return E2E_BEHAVIOURS[zlib.crc32(prompt.encode()) % len(E2E_BEHAVIOURS)]


def _by_prompt(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    _behaviour_of(body["messages"][-1]["content"])(handler, n, body)


def test_a_session_run_against_a_hostile_server_scores_no_error_and_keeps_no_key(tmp_path, tiny_kobbq, data_dir, api_key, http_client):
    from biascheck.session import RunConfig, run
    from biascheck.suite import load_suite

    suite = load_suite(tiny_kobbq, data_dir=data_dir)
    behaviours = {case.case_id: _behaviour_of(case.messages[-1].content) for case in suite.cases}
    assert set(behaviours.values()) == set(E2E_BEHAVIOURS)  # every misbehaviour is met
    store = tmp_path / "store.sqlite"
    with loopback_server(_by_prompt) as (api_base, arrivals):
        config = RunConfig(
            model=ModelConfig("openai/x", api_base=api_base, timeout=TIMEOUT, http_client=http_client),
            store_path=store,
            data_dir=data_dir,
            concurrency=8,
            policy=POLICY,
        )
        started = time.monotonic()
        result = run([(suite, suite.cases)], config)
        elapsed = time.monotonic() - started

    assert elapsed < 20.0
    assert len(arrivals) <= ATTEMPTS * len(suite.cases)
    outcomes = result.suites[0].outcomes
    assert len(outcomes) == len(suite.cases)
    for case_id, behaviour in behaviours.items():
        outcome = outcomes[case_id]
        for name in ("raw", "error"):
            leaked = _leaks(api_key, getattr(outcome, name))
            assert not leaked, f"the key is in Outcome.{name} of {case_id} ({behaviour.__name__})"
        if behaviour is key_in_reply:  # a reply, with the key cut out of it
            assert outcome.status in ("answered", "ooc"), (behaviour.__name__, outcome)
        elif behaviour is invalid_utf8_text:  # an error, or at most text that names no option
            assert outcome.status in ("error", "ooc"), (behaviour.__name__, outcome)
        else:
            assert outcome.status == "error", (behaviour.__name__, outcome)
        if outcome.status == "error":
            assert outcome.raw is None
            assert_clean_line(outcome.error)
    leaked = _leaks(api_key, b"".join(p.read_bytes() for p in _store_files(store)))
    assert not leaked, "the key is in the store's bytes"


def test_the_plugin_against_a_hostile_server_shows_no_traceback_and_writes_no_key(
    run_biascheck, tiny_kobbq, data_dir, tmp_path, api_key, http_client
):
    # One pytest run in a subprocess (which reads the key from the environment like any run), on
    # the one category whose 8 prompts meet every misbehaviour above; then every byte it printed
    # or wrote is searched.
    with loopback_server(_by_prompt) as (api_base, arrivals):
        run = run_biascheck(
            tiny_kobbq,
            "openai/x",
            "--biascheck-api-base",
            api_base,
            "--biascheck-retries",
            "1",
            "--biascheck-timeout",
            str(TIMEOUT),
            "--biascheck-concurrency",
            "8",
            "--biascheck-http-client",
            http_client,
            "-k",
            PLUGIN_CATEGORY,
        )

    assert arrivals, run.output[-2000:]
    noise = [line for line in run.output.splitlines() if "Traceback" in line or "INTERNALERROR" in line]
    assert not noise, "\n".join(noise[:3])
    leaked = _leaks(api_key, run.output)
    assert not leaked, "the key is in pytest's output"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "results.json" for p in written), run.output
    for path in written:
        leaked = _leaks(api_key, path.read_bytes())
        assert not leaked, f"the key is in {path.relative_to(tmp_path)}"
    # No error became an answer: only the replies that echo the key (and open with "A.") can be one.
    from biascheck.suite import load_suite

    cases = [case for case in load_suite(tiny_kobbq, data_dir=data_dir).cases if case.category == PLUGIN_CATEGORY]
    behaviours = {case.case_id: _behaviour_of(case.messages[-1].content) for case in cases}
    assert set(behaviours.values()) == set(E2E_BEHAVIOURS)
    results = run.results()["cases"]
    assert {case["case_id"] for case in results} == set(behaviours)
    for case in results:
        if case["outcome"] == "answered":
            assert behaviours[case["case_id"]] is key_in_reply, case
        if case["outcome"] == "error":
            assert_clean_line(case["error"])


# --- injection (issue 34, D5): text from the provider is text in every Markdown report -----------

# A served model name, a system fingerprint, a refusal and a reply that each try to add a heading
# saying the failed run passed, an image, a script, a link; and a 400 naming a parameter, whose
# message lands in the reports' parameter warning.
FORGED_HEADING = "# biascheck: kobbq — PASSED"
HOSTILE_MODEL = f"m\n\n{FORGED_HEADING}\n\n<img src=x onerror=alert(1)>\n"
HOSTILE_FINGERPRINT = "fp\n## forged fingerprint <script>alert(2)</script>"
REFUSAL = "<img src=y onerror=alert(3)> **refused** [click](http://evil.example)"
HOSTILE_REPLY = "A\n\n## forged reply <script>alert(4)</script> ![i](http://evil.example/i.png)"


def _injecting(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
    if "temperature" in body:  # refused as unsupported: left out of the next attempts, and reported
        message = f"Unsupported parameter: 'temperature'. {REFUSAL}"
        send_json(handler, 400, {"error": {"message": message, "type": "invalid_request_error", "param": "temperature", "code": None}})
        return
    kind = zlib.crc32(body["messages"][-1]["content"].encode()) % 4
    if kind == 0:  # a refusal of this prompt: the case's error
        send_json(handler, 400, {"error": {"message": REFUSAL, "type": "invalid_request_error", "code": None}})
        return
    reply = chat_answer(body, text=HOSTILE_REPLY if kind == 3 else "A")
    reply["model"] = HOSTILE_MODEL if kind == 1 else "m"
    reply["system_fingerprint"] = HOSTILE_FINGERPRINT if kind == 2 else "fp"
    send_json(handler, 200, reply)


def forged_parts(markdown: str) -> dict[str, list[str]]:
    """What a hostile reply could have added to a Markdown report, as a GFM renderer reads it:
    headings that are not biascheck's, raw HTML that is not its folding of changed cases or the
    anchors of its flips, links and images other than to those anchors; and tags left in the text
    itself."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown)
    found: dict[str, list[str]] = {"headings": [], "html": [], "links": [], "raw tags": re.findall(r"<(?:img|script)\b[^>]*>", markdown)}
    for at, token in enumerate(tokens):
        if token.type == "heading_open" and re.search(r"PASSED|forged|<", tokens[at + 1].content):
            found["headings"].append(tokens[at + 1].content)
        if token.type == "html_block" and not re.fullmatch(r"<details><summary>[^<]*</summary>\n|</details>\n?", token.content):
            found["html"].append(token.content)
        for child in token.children or []:
            if child.type == "html_inline" and not re.fullmatch(r'<a id="flips(-[\w-]+)?">|</a>', child.content):
                found["html"].append(child.content)
            if child.type in ("link_open", "image") and not re.fullmatch(r"#flips(-[\w%-]+)?", str(child.attrs.get("href", ""))):
                found["links"].append(str(child.attrs))
    return found


def test_a_provider_cannot_forge_a_heading_tag_or_link_in_the_reports(run_biascheck, tiny_kobbq, tmp_path, monkeypatch, http_client):
    # Issue 34, D5: a `model` field with a line break added "# biascheck: ... — PASSED" and an <img>
    # to report.md, comparison.md and the job summary of a failed run; a 400's markup was shown raw.
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    baseline = tmp_path / "baseline.json"
    recorded = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(baseline), report="baseline-report")
    assert baseline.exists(), recorded.output[-2000:]
    summary.unlink()
    with loopback_server(_injecting) as (api_base, arrivals):
        run = run_biascheck(
            tiny_kobbq,
            "openai/x",
            "--biascheck-api-base",
            api_base,
            "--biascheck-retries",
            "0",
            "--biascheck-http-client",
            http_client,
            "--biascheck-baseline",
            str(baseline),
        )
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output[-2000:]
    reports = {
        "report.md": (run.report_dir / "report.md").read_text("utf-8"),
        "comparison.md": (run.report_dir / "comparison.md").read_text("utf-8"),
        "the job summary": summary.read_text("utf-8"),
    }
    for name, markdown in reports.items():
        assert forged_parts(markdown) == {"headings": [], "html": [], "links": [], "raw tags": []}, name
    # What the provider said is still there, shown as text on one line: the served models and
    # fingerprints, the refusal of the parameter; and the comparison's warning of other served models.
    shown = {name: _rendered_text(markdown) for name, markdown in reports.items()}
    for text in (HOSTILE_MODEL, HOSTILE_FINGERPRINT, REFUSAL):
        assert " ".join(text.split()) in shown["report.md"], text
        assert " ".join(text.split()) in shown["the job summary"], text
    assert " ".join(HOSTILE_MODEL.split()) in shown["comparison.md"]


def _rendered_text(markdown: str) -> str:
    """The text a GFM renderer shows of a Markdown document, its lines joined by spaces."""
    from html import unescape

    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


# --- noise: litellm's pydantic warnings stay out of the user's output ---------------------------


def test_a_reply_litellm_cannot_serialize_raises_no_pydantic_warning(tmp_path):
    # A log-probability that is a string: litellm's response types make pydantic warn
    # "Pydantic serializer warnings: PydanticSerializationUnexpectedValue(...)" into pytest's output.
    def odd_logprobs(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        answer = chat_answer(body)
        answer["choices"][0]["logprobs"] = {"content": [{"token": "A", "logprob": "bad", "bytes": None, "top_logprobs": []}]}
        send_json(handler, 200, answer)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        called = call(odd_logprobs, tmp_path, requests=2)
    assert [str(w.message) for w in caught if "pydantic" in w.filename or "Pydantic" in str(w.message)] == []
    for response in called.responses:  # answered or errored, never both
        assert response.errored == (response.text is None)


# --- fuzzing (issue 23): any reply is an answer or one clean line, within the deadline ------------

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@st.composite
def _replies(draw) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body): a well-formed answer with parts replaced or removed, or any bytes."""
    status = draw(st.sampled_from([200, 200, 200, 201, 204, 400, 401, 404, 408, 413, 422, 429, 500, 502, 503]) | st.integers(200, 599))
    headers = draw(
        st.dictionaries(
            st.sampled_from(["retry-after", "x-request-id", "openai-model"]),
            st.sampled_from(["", "abc", "-1", "1e400", "999999", "0", "Wed, 21 Oct 2015 07:28:00 GMT"]),
            max_size=2,
        )
    )
    document = chat_answer({"model": "x"})
    mutate(draw, document, _LEAVES)
    body = json.dumps(document).encode() if draw(st.integers(0, 4)) else draw(st.binary(max_size=200))
    return status, headers, body


_FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(_FUZZ, max_examples=examples(20), derandomize=True)  # the same examples every run: a default run never flakes
@given(reply=_replies())
# Found by the fuzzer: an error body not in OpenAI's shape was reported as its Python repr.
@example(reply=(400, {}, b'{"detail": "nope"}'))
@example(reply=(500, {}, b"[1, 2]"))
# Found by the slow fuzzer: litellm quotes a reply it cannot read (here, usage false) after its
# traceback, and a line break inside the quoted reply ("\r" as a key) cut the error line there.
@example(
    reply=(
        200,
        {},
        b'{"id": null, "object": "chat.completion", "created": 0, "model": "x", "choices": [{"index": 0, "message": {"role": "assistant",'
        b' "content": "A"}, "finish_reason": "stop", "logprobs": {"\\r": 0}}], "usage": false}',
    )
)
def test_fuzzed_replies_are_an_answer_or_one_clean_line(tmp_path, reply):
    _check_reply(tmp_path, reply)


@pytest.mark.slow
@settings(_FUZZ, max_examples=400)
@given(reply=_replies())
def test_many_fuzzed_replies_are_an_answer_or_one_clean_line(tmp_path, reply):
    _check_reply(tmp_path, reply)


def _check_reply(tmp_path: Path, reply: tuple[int, dict[str, str], bytes]) -> None:
    status, headers, body = reply

    def serve(handler: BaseHTTPRequestHandler, n: int, request: dict) -> None:
        send_bytes(handler, status, body, headers)

    called = call(serve, tmp_path, store_path=tmp_path / f"{secrets.token_hex(8)}.sqlite")
    (response,) = called.responses
    if response.errored:
        assert_clean_line(response.error)
        assert called.stored == {}
    else:  # an answer, possibly empty (no content: read as out of choice, never as an error)
        assert response.text is None or len(response.text) <= MAX_REPLY_CHARS
    assert called.elapsed < ATTEMPTS * (TIMEOUT + MARGIN), "never a hang"


def test_a_reply_whose_model_is_no_string_raises_no_pydantic_warning_after_the_calls(tmp_path):
    # Found by the reply fuzzer: litellm's success handler dumps the reply in a task that runs after
    # the calls, outside their warning filter, and pydantic's warning reached pytest's summary.
    from biascheck.execution.runner import run_sync

    def odd_model(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        answer = chat_answer(body)
        answer["model"] = 3.5
        send_json(handler, 200, answer)

    with warnings.catch_warnings(record=True) as caught, loopback_server(odd_model) as (api_base, _), ResponseStore(tmp_path / "s.sqlite") as store:
        warnings.simplefilter("always")
        config = ModelConfig("openai/x", api_base=api_base, timeout=TIMEOUT, http_client=CLIENT["name"])
        messages = [{"role": "user", "content": "A or B?"}]
        request = ModelRequest(request_key(config.model, config.endpoint, messages, {}), messages, {})
        client = contextlib.nullcontext(LiteLLMClient(config))
        run = run_sync(execute([request], store=store, model_name=config.model, open_client=lambda: client, policy=POLICY))
    assert run.responses[request.key].text == "A"
    assert [str(w.message) for w in caught if "pydantic" in w.filename or "Pydantic" in str(w.message)] == []
