"""A configuration that cannot work stops before the first call, and an endpoint that cannot be
reached stops the run after a few attempts: issue 11, items 2, 3 and 4.

- a provider prefix litellm does not know (``opneai/``) is refused in milliseconds, before litellm
  is imported, with a suggestion;
- missing credentials of the model under test or of a judge are named before any call;
- the circuit breaker: the first attempts all failing to reach the endpoint stop the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biascheck.cli import main as cli_main
from biascheck.core.errors import BiascheckError
from biascheck.execution.call_errors import CallError
from biascheck.execution.llm import (
    Completion,
    LiteLLMClient,
    ModelConfig,
    check_ready,
    import_litellm,
    known_providers,
    validate_model_string,
)
from biascheck.execution.policy import CircuitBreaker, RetryPolicy
from biascheck.execution.readiness import CREDENTIALS as START_UP_CREDENTIALS
from biascheck.execution.readiness import check_credentials, store_answers_model, unreachable
from biascheck.execution.runner import NOT_RUN, ModelRequest, execute
from biascheck.execution.stats import RunStatus
from biascheck.execution.store import ResponseStore

from loopback import chat_answer, loopback_server, send_json

FAST = RetryPolicy(max_retries=6, base_delay=0.01, max_delay=0.02)
CREDENTIALS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL")


@pytest.fixture
def no_keys(monkeypatch):
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)


# --- item 3: an unknown provider prefix --------------------------------------------------------


def test_the_provider_list_read_from_litellms_source_is_litellms():
    assert known_providers() == frozenset(getattr(p, "value", p) for p in import_litellm().provider_list)


@pytest.mark.parametrize(
    ("model", "suggestion"),
    [
        ("opneai/gpt-4o-mini", "did you mean openai/gpt-4o-mini?"),
        ("antropic/claude-3-5-sonnet", "did you mean anthropic/claude-3-5-sonnet?"),
        ("hosted-vllm/my-model", "did you mean hosted_vllm/my-model?"),
        ("zzqx/model", "start it with a provider"),
    ],
)
def test_a_misspelled_provider_is_refused_with_a_suggestion(model, suggestion):
    with pytest.raises(BiascheckError) as error:
        validate_model_string(model)
    assert str(error.value).startswith(f"--biascheck-model: '{model.split('/')[0]}' in '{model}' is not a litellm provider")
    assert suggestion in str(error.value)


@pytest.mark.parametrize(
    "model",
    [
        "openai/gpt-4o-mini",
        "gpt-4o-mini",
        "anthropic/claude-3-5-sonnet",
        "hosted_vllm/m",
        "openrouter/anthropic/claude-3.5-sonnet",
        "ollama/llama3",
        "sim/fair",
    ],
)
def test_known_providers_pass(model):
    validate_model_string(model)


def test_with_an_api_base_litellm_decides(no_keys):
    # litellm may route a model by its endpoint; the fast check leaves it to litellm's own.
    validate_model_string("opneai/x", api_base="http://127.0.0.1:9/v1")
    with pytest.raises(BiascheckError, match="litellm cannot tell which provider serves 'opneai/x'; did you mean openai/x"):
        check_ready(ModelConfig("opneai/x", api_base="http://127.0.0.1:9/v1"))


def test_the_provider_check_does_not_import_litellm():
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from biascheck.execution.llm import validate_model_string\n"
        "try:\n    validate_model_string('opneai/gpt-4o-mini')\nexcept Exception as e:\n    print(e)\n"
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["--biascheck-model: 'opneai' in 'opneai/gpt-4o-mini' is not a litellm provider; did you mean openai/gpt-4o-mini?", "False"]


def test_the_plugin_refuses_a_misspelled_provider_before_collecting(run_biascheck, tiny_kobbq):
    run = run_biascheck(tiny_kobbq, "opneai/gpt-4o-mini")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert _last_line(run.result.errlines) == (
        "ERROR: --biascheck-model: 'opneai' in 'opneai/gpt-4o-mini' is not a litellm provider; did you mean openai/gpt-4o-mini?"
    )
    assert "Traceback" not in run.output and "collected" not in run.output


def _last_line(lines: list[str]) -> str:
    return [line for line in lines if line.strip()][-1]


# --- item 2: missing credentials ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "named"),
    [
        ("openai/gpt-4o-mini", "OPENAI_API_KEY"),
        ("gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic/claude-3-5-sonnet", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-1.5-flash", "GEMINI_API_KEY"),
    ],
)
def test_missing_credentials_are_named(no_keys, model, named):
    with pytest.raises(BiascheckError) as error:
        check_ready(ModelConfig(model))
    message = str(error.value)
    assert message.startswith(f"--biascheck-model: {model} needs ") and named in message and "\n" not in message


@pytest.mark.parametrize("model", ["hosted_vllm/m", "ollama/llama3", "sim/fair"])
def test_providers_that_need_no_key_pass(no_keys, model):
    check_ready(ModelConfig(model, api_base=None if model.startswith(("ollama", "sim")) else "http://127.0.0.1:9/v1"))


def test_a_key_set_or_passed_satisfies_the_check(no_keys, monkeypatch):
    check_ready(ModelConfig("openai/gpt-4o-mini"), api_key="sk-passed-in-000000")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-000000")
    check_ready(ModelConfig("openai/gpt-4o-mini"))


def test_a_credential_that_is_set_is_never_named_missing(no_keys, monkeypatch):
    # litellm names Azure's key, base and version all missing when any one is.
    for name in ("AZURE_API_KEY", "AZURE_API_BASE", "AZURE_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(BiascheckError, match="needs AZURE_API_KEY, which is not set"):
        check_ready(ModelConfig("azure/gpt-4o-mini"))
    monkeypatch.setenv("AZURE_API_KEY", "test-key-0000")
    check_ready(ModelConfig("azure/gpt-4o-mini"))  # the base and version are the first call's to tell


def _tiny_selection(tiny_kobbq, data_dir, n=8):
    from biascheck.suite import load_suite

    suite = load_suite(tiny_kobbq, data_dir=data_dir)
    return [(suite, suite.cases[:n])]


def test_a_run_without_its_key_stops_before_any_request(no_keys, tiny_kobbq, data_dir, tmp_path):
    from biascheck.session import RunConfig, run

    with loopback_server(lambda handler, n, body: send_json(handler, 200, chat_answer(body))) as (api_base, arrivals):
        config = RunConfig(model=ModelConfig("openai/x", api_base=api_base), store_path=tmp_path / "store.sqlite", policy=FAST)
        started = time.monotonic()
        with pytest.raises(
            BiascheckError,
            match=r"^--biascheck-model: openai/x needs OPENAI_API_KEY, which is not set; "
            r"export OPENAI_API_KEY=\.\.\. \(a local server that checks no key",
        ):
            run(_tiny_selection(tiny_kobbq, data_dir), config)
        assert arrivals == [] and time.monotonic() - started < 30


def test_a_run_answered_from_the_store_needs_no_key(no_keys, monkeypatch, tiny_kobbq, data_dir, tmp_path, http_client):
    from biascheck.session import RunConfig, run

    with loopback_server(lambda handler, n, body: send_json(handler, 200, chat_answer(body))) as (api_base, arrivals):
        model = ModelConfig("openai/x", api_base=api_base, http_client=http_client)
        config = RunConfig(model=model, store_path=tmp_path / "store.sqlite", policy=FAST)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")
        first = run(_tiny_selection(tiny_kobbq, data_dir), config)
        monkeypatch.delenv("OPENAI_API_KEY")
        again = run(_tiny_selection(tiny_kobbq, data_dir), config)
    assert first.stats.calls == 8 and again.stats.calls == 0 and again.stats.cache_hits == 8 and again.incomplete is None


# --- before collection: what can be told without litellm ---------------------------------------


CREDENTIALS_OF_ALL = {name for named, accepted in START_UP_CREDENTIALS.values() for name in (*named, *accepted)}


@pytest.mark.parametrize("provider", sorted(START_UP_CREDENTIALS))
def test_the_start_up_credentials_table_is_litellms(monkeypatch, provider):
    # The same names missing, the same variables satisfying it, and the same line as check_ready's.
    litellm = import_litellm()
    named, accepted = START_UP_CREDENTIALS[provider]
    for name in CREDENTIALS_OF_ALL:
        monkeypatch.delenv(name, raising=False)
    model = f"{provider}/some-model"
    assert tuple(litellm.validate_environment(model=model)["missing_keys"]) == named
    with pytest.raises(BiascheckError) as early:
        check_credentials(ModelConfig(model))
    with pytest.raises(BiascheckError) as late:
        check_ready(ModelConfig(model))
    assert str(early.value) == str(late.value)
    for name in accepted:
        monkeypatch.setenv(name, "")  # set, even empty, is set: as litellm counts it
        assert litellm.validate_environment(model=model)["missing_keys"] == []
        check_credentials(ModelConfig(model))
        monkeypatch.delenv(name)


def test_the_plugin_names_a_missing_key_before_collecting(no_keys, run_biascheck, tiny_kobbq):
    run = run_biascheck(tiny_kobbq, "openai/gpt-4o-mini")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert _last_line(run.result.errlines) == (
        "ERROR: --biascheck-model: openai/gpt-4o-mini needs OPENAI_API_KEY, which is not set; export OPENAI_API_KEY=..."
    )
    assert "collected" not in run.output and "Traceback" not in run.output


def test_a_plugin_run_answered_from_the_store_needs_no_key(no_keys, monkeypatch, run_biascheck, tiny_kobbq, tmp_path):
    with loopback_server(lambda handler, n, body: send_json(handler, 200, chat_answer(body))) as (api_base, arrivals):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")
        first = run_biascheck(tiny_kobbq, "openai/x", "--biascheck-api-base", api_base, "-k", "age")
        monkeypatch.delenv("OPENAI_API_KEY")
        calls = len(arrivals)
        again = run_biascheck(tiny_kobbq, "openai/x", "--biascheck-api-base", api_base, "-k", "age")
    assert first.ret == again.ret and calls > 0 and len(arrivals) == calls, again.output


def test_whether_a_store_holds_answers_of_a_model(tmp_path):
    from biascheck.execution.store import StoredResponse

    assert not store_answers_model(tmp_path / "none.sqlite", "openai/x")
    assert not (tmp_path / "none.sqlite").exists()  # asking creates nothing
    (tmp_path / "empty.sqlite").write_bytes(b"")
    assert not store_answers_model(tmp_path / "empty.sqlite", "openai/x")
    with ResponseStore(tmp_path / "store.sqlite") as store:
        store.put("0" * 64, "openai/x", {"messages": [], "params": {}, "sample": 0}, StoredResponse("A", "stop", {}, 0.0))
    assert store_answers_model(tmp_path / "store.sqlite", "openai/x")
    assert not store_answers_model(tmp_path / "store.sqlite", "openai/y")
    (tmp_path / "other.sqlite").write_bytes(b"not a database at all, a file of the user's" * 100)
    assert store_answers_model(tmp_path / "other.sqlite", "openai/x")  # the session says what is wrong with it


def test_the_endpoint_probe_tells_refused_and_unknown_hosts_from_listening_ones():
    import socket

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert unreachable(f"http://127.0.0.1:{port}/v1") is None
    assert unreachable(f"http://127.0.0.1:{port}/v1") == f"nothing listens on 127.0.0.1:{port}: connection refused"
    assert unreachable("http://no-such-host.invalid/v1").startswith("no such host 'no-such-host.invalid'")
    assert unreachable("ftp://127.0.0.1:9/") is None and unreachable("not a url") is None


def test_a_judge_without_its_key_stops_the_run_before_the_first_generation(no_keys, run_biascheck, tmp_path, data_dir):
    from conftest import write_subset_suite

    suite = write_subset_suite(tmp_path / "kobbg", "kobbg-quick", subset='categories = ["age"]')
    run = run_biascheck(suite, "sim/fair", "--biascheck-judge", "anthropic/claude-3-5-sonnet")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert _last_line(run.result.errlines) == (
        "ERROR: --biascheck-judge: anthropic/claude-3-5-sonnet needs ANTHROPIC_API_KEY, which is not set; export ANTHROPIC_API_KEY=..."
    )
    assert not (tmp_path / "store.sqlite").exists() or ResponseStore(tmp_path / "store.sqlite").count() == 0


def test_qualify_judge_without_a_key_says_so(no_keys, tmp_path, data_dir, capsys):
    code = cli_main(["qualify-judge", "openai/gpt-4o", "--data", str(data_dir), "--cache", str(tmp_path / "s.sqlite"), "--cases", "20"])
    err = capsys.readouterr()
    assert code != 0 and "NOT qualified" not in err.out and "stereotype" not in err.out
    assert "biascheck qualify-judge MODEL: openai/gpt-4o needs OPENAI_API_KEY, which is not set" in err.err


# --- item 4: the circuit breaker ---------------------------------------------------------------


class _Unreachable:
    """A fake client whose endpoint never answers; it counts attempts."""

    def __init__(self, answer_after: int | None = None, error: str = "cannot reach http://127.0.0.1:9/v1: Connection error."):
        self.attempts = 0
        self.in_flight = self.max_in_flight = 0
        self.answer_after, self.error = answer_after, error

    async def complete(self, messages, params, sample=0):
        self.attempts += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if self.answer_after is not None and self.attempts > self.answer_after:
                return Completion("A", "stop", {}, 0.0)
            raise CallError(self.error, retryable=True, unreachable=True)
        finally:
            self.in_flight -= 1

    async def aclose(self):
        pass


def _execute(client, tmp_path, n=60, concurrency=32, **kwargs):
    requests = [ModelRequest(f"k{i}", [{"role": "user", "content": str(i)}], {}) for i in range(n)]

    @contextlib.contextmanager
    def open_client():
        yield client

    async def go():
        with ResponseStore(tmp_path / "store.sqlite") as store:
            return await execute(requests, store=store, model_name="m", open_client=open_client, concurrency=concurrency, policy=FAST, **kwargs)

    return asyncio.run(go())


def test_the_first_attempts_all_unreachable_stop_the_run(tmp_path):
    client = _Unreachable()
    run = _execute(client, tmp_path)
    assert client.attempts == CircuitBreaker.first_attempts == 3
    assert client.max_in_flight == 1  # until the endpoint has answered once, one attempt at a time
    assert run.stats.incomplete == (
        "fatal model error: cannot reach http://127.0.0.1:9/v1: Connection error. (the first 3 attempts all failed this way; stopped by the circuit breaker)"
    )
    assert run.stats.status is RunStatus.FATAL_MODEL_ERROR
    assert run.stats.not_run == 59 and run.stats.errors == 60
    # The request whose attempt tripped the breaker has its error; every other one was not run.
    assert sorted(r.error.startswith(NOT_RUN) for r in run.responses.values()) == [False] + [True] * 59


def test_an_endpoint_that_answers_after_a_blip_is_not_stopped(tmp_path):
    client = _Unreachable(answer_after=2)
    run = _execute(client, tmp_path)
    assert run.stats.incomplete is None and run.stats.errors == 0 and client.attempts == 62
    assert client.max_in_flight > 1  # once it answered, the calls go concurrently again


def test_different_errors_do_not_add_up():
    breaker = CircuitBreaker()
    assert not any(breaker.trips(error, 0.0) for error in ("refused", "timeout", "refused", "timeout"))
    assert [breaker.trips("refused", 0.0) for _ in range(3)] == [False, False, True]


@given(st.lists(st.floats(0, 1000), min_size=1, max_size=50))
def test_after_a_reply_only_an_outage_longer_than_its_limit_trips(gaps):
    breaker = CircuitBreaker(outage_s=120.0)
    breaker.reply()
    now, start, tripped = 0.0, None, False
    for gap in gaps:
        now += gap
        start = now if start is None else start  # the outage began with its first failure
        tripped = breaker.trips("refused", now)
        assert tripped == (now - start >= 120.0)
        if tripped:
            break
    breaker.reply()
    assert not breaker.trips("refused", now + 1000)


def test_nothing_listening_stops_a_run_in_seconds(tmp_path, monkeypatch, http_client):
    # Port 9 (discard) on loopback: nothing listens, every connection is refused.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")
    config = ModelConfig("openai/x", api_base="http://127.0.0.1:9/v1", timeout=10, http_client=http_client)

    @contextlib.contextmanager
    def open_client():
        yield LiteLLMClient(config)

    requests = [ModelRequest(f"k{i}", [{"role": "user", "content": str(i)}], {}) for i in range(60)]

    async def go():
        with ResponseStore(tmp_path / "store.sqlite") as store:
            return await execute(requests, store=store, model_name=config.model, open_client=open_client, policy=RetryPolicy())

    started = time.monotonic()
    run = asyncio.run(go())
    assert time.monotonic() - started < 20  # before: 7 attempts per request, 33 s for 60 cases
    assert run.stats.calls == 3 and run.stats.incomplete.startswith("fatal model error: cannot reach http://127.0.0.1:9/v1: ")
    assert "circuit breaker" in run.stats.incomplete and "object at 0x" not in run.stats.incomplete


def test_the_plugin_refuses_an_endpoint_nothing_listens_on_before_collecting(run_biascheck, tiny_kobbq, monkeypatch, http_client):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")
    run = run_biascheck(tiny_kobbq, "openai/x", "--biascheck-api-base", "http://127.0.0.1:9/v1", "--biascheck-http-client", http_client)
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert _last_line(run.result.errlines) == (
        "ERROR: --biascheck-model: cannot reach openai/x's endpoint http://127.0.0.1:9/v1 "
        "(nothing listens on 127.0.0.1:9: connection refused); start the server, or point --biascheck-api-base at the one that serves it"
    )
    assert "Traceback" not in run.output and "collected" not in run.output


def test_the_plugin_reports_an_endpoint_that_went_away_in_one_line(run_biascheck, tiny_kobbq, monkeypatch, tmp_path):
    # A store holding answers of the model may answer the whole run: the start-up probe leaves the
    # endpoint to the run, whose circuit breaker stops it after the first attempts.
    from biascheck.execution.store import StoredResponse

    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")
    store = tmp_path / "store.sqlite"
    with ResponseStore(store) as kept:
        kept.put("0" * 64, "openai/x", {"messages": [], "params": {}, "sample": 0}, StoredResponse("A", "stop", {}, 0.0))
    run = run_biascheck(tiny_kobbq, "openai/x", "--biascheck-api-base", "http://127.0.0.1:9/v1", store_path=store)
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    last = _last_line(run.result.errlines)
    assert last.startswith("ERROR: openai/x: fatal model error: cannot reach http://127.0.0.1:9/v1: ") and "circuit breaker" in last
    assert "Traceback" not in run.output


# --- error texts -------------------------------------------------------------------------------


def test_error_lines_carry_no_object_reprs_or_pasted_tracebacks():
    from biascheck.execution.call_errors import one_line_error

    ssl = Exception("Cannot connect to host localhost:11434 ssl:<ssl.SSLContext object at 0x7f9af69172f0> [Connect call failed]")
    assert one_line_error(ssl) == "Exception: Cannot connect to host localhost:11434 ssl:ssl.SSLContext [Connect call failed]"
    pasted = Exception(
        'Invalid response object Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
        "    raise KeyError('choices')\nKeyError: 'choices'\n"
    )
    assert one_line_error(pasted) == "Exception: Invalid response object (KeyError: 'choices')"
