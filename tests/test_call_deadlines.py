"""How long one model call may take, through each HTTP path (litellm's, the fast path's) to a tiny loopback server:
``--biascheck-timeout`` bounds each attempt by the wall clock (not each read), and ``Retry-After``
is honoured as delay-seconds or an HTTP-date, and said so when it is longer than the policy allows."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from biascheck.execution.llm import LiteLLMClient, ModelConfig
from biascheck.execution.policy import RetryPolicy
from biascheck.execution.runner import ModelRequest, execute
from biascheck.execution.store import ResponseStore, request_key

from loopback import chat_answer, loopback_server, send_json


def _run(api_base: str, policy: RetryPolicy, store_path: Path, timeout: float = 10.0, http_client: str = "fast"):
    config = ModelConfig("openai/local-test", api_base=api_base, timeout=timeout, http_client=http_client)
    messages = [{"role": "user", "content": "A or B?"}]
    request = ModelRequest(request_key(config.model, config.endpoint, messages, {}), messages, {"max_tokens": 5})

    @contextlib.contextmanager
    def open_client():
        yield LiteLLMClient(config)

    async def go():
        with ResponseStore(store_path) as store:
            return await execute([request], store=store, model_name=config.model, open_client=open_client, concurrency=1, policy=policy)

    run = asyncio.run(go())
    return run, run.responses[request.key]


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "unused-test")


def test_a_server_trickling_its_answer_is_cut_off_at_the_timeout(tmp_path, http_client):
    stop = threading.Event()

    def trickle(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        # Headers at once, then the body one byte a second: every read arrives well within the
        # timeout, so only a deadline on the whole attempt ends it. (After 15 s the rest is sent
        # at once, so that without the deadline this test fails instead of hanging for minutes.)
        data = json.dumps(chat_answer(body)).encode()
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.flush()
        for i in range(15):
            if stop.wait(1.0):
                return
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
        handler.wfile.write(data[15:])

    with loopback_server(trickle) as (api_base, arrivals):
        try:
            run, response = _run(api_base, RetryPolicy(max_retries=0), tmp_path / "store.sqlite", timeout=2.0, http_client=http_client)
        finally:
            # From the request's arrival: importing litellm is no part of the attempt.
            elapsed = time.monotonic() - arrivals[0]
            stop.set()

    assert elapsed < 2.0 + 3.0, f"one attempt was held {elapsed:.1f} s under a 2 s timeout"
    assert len(arrivals) == 1 and run.stats.calls == 1 and run.stats.errors == 1
    assert response.errored and "exceeded the deadline of 2 s" in response.error
    assert "after 1 attempt" in response.error


def _http_date(seconds_ahead: float) -> str:
    # Whole seconds, rounded up: the wait the header asks for is at least ``seconds_ahead``.
    return email.utils.formatdate(math.ceil(time.time()) + seconds_ahead, usegmt=True)


def test_retry_after_as_an_http_date_is_waited_for(tmp_path, http_client):
    def serve(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        if n == 0:
            error = {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
            send_json(handler, 429, error, {"retry-after": _http_date(3)})
        else:
            send_json(handler, 200, chat_answer(body))

    with loopback_server(serve) as (api_base, arrivals):
        run, response = _run(api_base, RetryPolicy(max_retries=3, base_delay=0.01), tmp_path / "store.sqlite", http_client=http_client)

    assert not response.errored and response.text == "A"
    assert len(arrivals) == 2 and run.stats.retries == 1
    gap = arrivals[1] - arrivals[0]
    assert gap >= 2.5, f"retried {gap:.2f} s after a 429 asking for ~3 s"


@pytest.mark.parametrize("retry_after", [lambda: _http_date(600), lambda: "600"], ids=["http-date", "delay-seconds"])
def test_a_retry_after_beyond_the_cap_is_an_error_that_says_so(tmp_path, retry_after, http_client):
    def serve(handler: BaseHTTPRequestHandler, n: int, body: dict) -> None:
        error = {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
        send_json(handler, 429, error, {"retry-after": retry_after()})

    start = time.monotonic()
    with loopback_server(serve) as (api_base, arrivals):
        run, response = _run(
            api_base, RetryPolicy(max_retries=3, base_delay=0.01, max_retry_after=30), tmp_path / "store.sqlite", http_client=http_client
        )

    # Given up at once, without hammering the server with early retries, and the error says why.
    assert time.monotonic() - start < 5.0
    assert len(arrivals) == 1 and run.stats.retries == 0 and run.stats.errors == 1
    asked = re.search(r"the server asked to wait (\d+(?:\.\d+)?) s, more than the 30 s cap", response.error)
    assert asked, response.error
    assert 590 <= float(asked.group(1)) <= 602
    assert "RateLimitError" in response.error and "after 1 attempt" in response.error


def test_a_deadline_too_short_for_any_call_ends_in_one_line_and_no_warning(tiny_kobbq, data_dir, tmp_path):
    # Issue 34 D16: --timeout 0.001 printed "coroutine ... was never awaited" and a tracemalloc
    # hint (calls litellm had begun to create, abandoned at the deadline) before the one-line error.
    import subprocess
    import sys

    command = [sys.executable, "-m", "biascheck.cli", "run", str(tiny_kobbq), "--model", "sim/fair", "--timeout", "0.001"]
    command += ["--data", str(data_dir), "--cache", str(tmp_path / "store.sqlite"), "--report", str(tmp_path / "report")]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)

    lines = [line for line in ran.stderr.splitlines() if line.strip() and not line.startswith("biascheck sim/fair: ")]
    assert "exceeded the deadline of 0.001 s" in ran.stderr, ran.stderr
    assert lines == [next(line for line in lines if line.startswith("biascheck: "))], ran.stderr
    assert "never awaited" not in ran.stderr and "tracemalloc" not in ran.stderr, ran.stderr
