"""Parameters a server refuses or ignores, through litellm's real HTTP path to a tiny loopback
server that answers like the servers met in practice (OpenAI's 400, FastAPI's 422, llama-cpp-python's
500 validation error, litellm's own UnsupportedParamsError), and the ``serve-local`` command's
argument checks. None of these needs the real model (tests/test_real_model.py does)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from biascheck.cli import main
from biascheck.execution.llm import LiteLLMClient, ModelConfig, request_seed
from biascheck.execution.policy import RetryPolicy
from biascheck.execution.runner import ModelRequest, execute
from biascheck.execution.store import ResponseStore, request_key

from loopback import chat_answer, loopback_server, send_json

# A request body -> (status, JSON body) or None for a normal answer.
Refuse = Callable[[dict], "tuple[int, dict] | None"]


@contextmanager
def refusing_server(refuse: Refuse) -> Iterator[tuple[str, list[dict]]]:
    """(api_base, request bodies received) of a loopback server that refuses what ``refuse`` says."""
    seen: list[dict] = []

    def serve(handler, n: int, body: dict) -> None:
        seen.append(body)
        refusal = refuse(body)
        status, payload = refusal if refusal else (200, chat_answer(body, handler.path))
        send_json(handler, status, payload)

    with loopback_server(serve) as (api_base, _):
        yield api_base, seen


def _requests(config: ModelConfig, params: dict, n: int) -> list[ModelRequest]:
    out = []
    for i in range(n):
        messages = [{"role": "user", "content": f"question {i}: A or B?"}]
        out.append(ModelRequest(request_key(config.model, config.endpoint, messages, params), messages, params))
    return out


def _execute(config: ModelConfig, requests: list[ModelRequest], store_path: Path, concurrency: int = 4):
    @contextlib.contextmanager
    def open_client():
        yield LiteLLMClient(config)

    async def go():
        with ResponseStore(store_path) as store:
            return await execute(
                requests,
                store=store,
                model_name=config.model,
                open_client=open_client,
                concurrency=concurrency,
                policy=RetryPolicy(max_retries=3, base_delay=0.01),
            )

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    # The providers' clients send no request without a key; these servers check none.
    monkeypatch.setenv("OPENAI_API_KEY", "unused-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused-test")


UNRECOGNIZED_SEED = (
    400,
    {"error": {"message": "Unrecognized request argument supplied: seed", "type": "invalid_request_error", "param": None, "code": None}},
)


def test_a_parameter_refused_with_400_is_dropped_for_the_rest_of_the_run_and_recorded(tmp_path):
    params = {"max_tokens": 5, "seed": 42, "temperature": 0.0}
    with refusing_server(lambda body: UNRECOGNIZED_SEED if "seed" in body else None) as (api_base, seen):
        config = ModelConfig("openai/local-test", api_base=api_base)
        requests = _requests(config, params, 20)
        run = _execute(config, requests, tmp_path / "store.sqlite")
        with_seed = sum("seed" in body for body in seen)

        assert all(not r.errored and r.text == "A" for r in run.responses.values())
        # Each request still carried what it asked for, but seed: no retry was spent on the refusal,
        # and after the first refusals came back no request carried seed again.
        assert run.stats.retries == 0 and run.stats.errors == 0
        assert 1 <= with_seed <= 4 and run.stats.calls == 20 + with_seed
        assert all(body["max_tokens"] == 5 and body["temperature"] == 0 for body in seen)
        reason = run.stats.params_dropped["openai/local-test"]["seed"]
        assert "Unrecognized request argument supplied: seed" in reason and reason.startswith("refused by the server")
        assert run.stats.params_ignored == {}

        # A warm re-run answers everything from the store and still reports what was left out.
        warm = _execute(config, requests, tmp_path / "store.sqlite")
        assert warm.stats.calls == 0 and warm.stats.cache_hits == 20
        assert warm.stats.params_dropped == run.stats.params_dropped


def test_an_unsupported_parameter_is_dropped_but_a_value_out_of_range_is_an_error(tmp_path):
    def refuse(body):
        if "frequency_penalty" in body:
            return 422, {
                "detail": [{"type": "extra_forbidden", "loc": ["body", "frequency_penalty"], "msg": "Extra inputs are not permitted", "input": 0.6}]
            }
        if "presence_penalty" in body:
            # llama-cpp-python's server: every exception, validation included, as a 500 with a traceback
            message = (
                "1 validation error:\n  {'type': 'less_than_equal', 'loc': ('body', 'presence_penalty'), "
                "'msg': 'Input should be less than or equal to 2'}\n\n  File \"app.py\", line 376, in create_chat_completion\n"
                "    temperature=temperature, top_p=top_p, max_tokens=max_tokens\n"
            )
            return 500, {"error": {"message": message, "type": "internal_server_error"}}
        return None

    params = {"frequency_penalty": 0.6, "presence_penalty": 2.5, "temperature": 0.8, "top_p": 1.0, "max_tokens": 5}
    with refusing_server(refuse) as (api_base, seen):
        config = ModelConfig("openai/local-test", api_base=api_base)
        run = _execute(config, _requests(config, params, 6), tmp_path / "store.sqlite", concurrency=1)

    # The unsupported parameter is left out; the value the server refuses is never silently
    # replaced by the server's default: every request that carries it is an error, unretried.
    assert sorted(run.stats.params_dropped["openai/local-test"]) == ["frequency_penalty"]
    assert run.stats.retries == 0 and run.stats.errors == 6 and run.stats.calls == 1 + 6
    assert all("presence_penalty" in r.error for r in run.responses.values())
    assert all(body["presence_penalty"] == 2.5 and body["temperature"] == 0.8 for body in seen)


@pytest.mark.parametrize(
    "refusal",
    [
        # OpenAI's answer to a value out of range: it names the parameter, and the value stays an error.
        (
            400,
            {
                "error": {
                    "message": "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3.0 instead.",
                    "type": "invalid_request_error",
                    "param": "temperature",
                    "code": "decimal_above_max_value",
                }
            },
        ),
        # A refusal of the prompt that happens to contain a parameter's name is no refusal of the parameter.
        (400, {"error": {"message": "Your request was rejected: the seed of the story is unsafe.", "type": "invalid_request_error"}}),
    ],
)
def test_a_refusal_that_does_not_say_unsupported_drops_nothing(tmp_path, refusal):
    params = {"temperature": 3.0, "seed": 1, "max_tokens": 5}
    with refusing_server(lambda body: refusal) as (api_base, seen):
        config = ModelConfig("openai/local-test", api_base=api_base)
        run = _execute(config, _requests(config, params, 3), tmp_path / "store.sqlite", concurrency=1)
    assert run.stats.params_dropped == {} and run.stats.errors == 3 and run.stats.calls == 3 and run.stats.retries == 0
    # Nothing dropped: each request still carries its seed (its own, mixed from the run's: request_seed).
    assert all(body["temperature"] == 3.0 and body["seed"] == request_seed(1, body["messages"], 0) for body in seen)


def test_litellm_unsupported_params_error_is_dropped_before_anything_is_sent(tmp_path):
    # litellm itself refuses an OpenAI parameter the provider lacks (Anthropic has no frequency_penalty).
    params = {"frequency_penalty": 0.6, "max_tokens": 5}
    with refusing_server(lambda body: None) as (api_base, seen):
        config = ModelConfig("anthropic/claude-3-5-haiku-20241022", api_base=api_base.removesuffix("/v1"))
        run = _execute(config, _requests(config, params, 3), tmp_path / "store.sqlite", concurrency=1)

    assert all(r.text == "A" for r in run.responses.values()) and run.stats.retries == 0
    reason = run.stats.params_dropped[config.model]["frequency_penalty"]
    assert reason.startswith("refused by litellm for this provider, not sent") and "does not support parameters" in reason
    assert len(seen) == 3 and all("frequency_penalty" not in body for body in seen)


@pytest.mark.parametrize(
    "refusal",
    [
        (400, {"error": {"message": "max_tokens is too large: 4096", "type": "invalid_request_error", "param": "max_tokens"}}),
        # llama-cpp-python started without logits_all refuses logprobs this way
        (
            500,
            {
                "error": {
                    "message": 'logprobs is not supported for models created with logits_all=False\n  File "llama.py"',
                    "type": "internal_server_error",
                }
            },
        ),
    ],
)
def test_a_refused_parameter_the_answer_depends_on_is_an_error_without_retries(tmp_path, refusal):
    name = refusal[1]["error"]["message"].split()[0]
    params = {"logprobs": True, "top_logprobs": 5, "max_tokens": 4096, "seed": 1}
    with refusing_server(lambda body: refusal) as (api_base, seen):
        config = ModelConfig("openai/local-test", api_base=api_base)
        run = _execute(config, _requests(config, params, 3), tmp_path / "store.sqlite", concurrency=1)

    # Never dropped (an unbounded generation, or a logprob read without log-probabilities, is no
    # answer to the request), never retried; the error names it, which HBB's fallback reads.
    assert run.stats.calls == 3 and run.stats.retries == 0 and run.stats.errors == 3
    assert all(name in r.error and "after 1 attempt" in r.error for r in run.responses.values())
    assert run.stats.params_dropped == {} and all(body[name] for body in seen)


def test_log_probabilities_asked_for_and_never_returned_are_recorded_as_ignored(tmp_path):
    params = {"logprobs": True, "top_logprobs": 5, "max_tokens": 1}
    with refusing_server(lambda body: None) as (api_base, _):
        config = ModelConfig("openai/local-test", api_base=api_base)
        requests = _requests(config, params, 3)
        run = _execute(config, requests, tmp_path / "store.sqlite")
        warm = _execute(config, requests, tmp_path / "store.sqlite")
    for result in (run, warm):
        assert "none of 3 replies carried log-probabilities" in result.stats.params_ignored["openai/local-test"]["logprobs"]
        assert result.stats.params_dropped == {}


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--port", "70000"], "--port: '70000' is out of range; give a whole number from 0 to 65535"),
        (["--n-ctx", "16"], "--n-ctx: '16' is out of range"),
        (["--log", "/nonexistent-folder/server.log"], "--log: /nonexistent-folder is not a folder"),
    ],
)
def test_serve_local_bad_arguments_are_one_line_errors(capsys, args, fragment):
    assert main(["serve-local", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and len(err.splitlines()) == 1


def test_without_the_extra_the_reason_says_what_is_missing_and_how_to_install_it(monkeypatch):
    import biascheck.execution.local_model as local_model
    from biascheck.core.errors import BiascheckError

    # What a machine without the extra sees: a module of the extra that cannot be imported.
    monkeypatch.setattr(local_model, "_REQUIRED_MODULES", ("json", "biascheck_no_such_module"))
    reason = local_model.missing_extra()
    assert reason.startswith("the [local-model] extra is not installed (missing: biascheck_no_such_module)")
    assert 'pip install -e ".[local-model]"' in reason
    with pytest.raises(BiascheckError) as error:
        local_model.spawn_local_server()
    assert "missing: biascheck_no_such_module" in str(error.value) and len(str(error.value).splitlines()) == 1


def test_the_plugin_records_a_dropped_parameter_in_results_and_warns_in_the_report(run_biascheck, tiny_kobbq, monkeypatch):
    with refusing_server(lambda body: UNRECOGNIZED_SEED if "seed" in body else None) as (api_base, seen):
        args = ("--biascheck-api-base", api_base, "--biascheck-param", "seed=7", "--biascheck-concurrency", "4")
        first = run_biascheck(tiny_kobbq, "openai/local-test", *args)
        warm = run_biascheck(tiny_kobbq, "openai/local-test", *args, report="warm")
        calls = len(seen)

    for run in (first, warm):
        results = run.results()
        assert run.ret == 1, run.output[-2000:]  # every reply is "A": thresholds fail, nothing errors
        assert results["run"]["errors"] == 0 and results["model"]["params"]["seed"] == 7
        assert "Unrecognized request argument supplied: seed" in results["model"]["params_dropped"]["seed"]
        # The terminal report wraps its lines at the console's width.
        assert "WARNING: parameter seed refused by the server, not sent" in " ".join(run.output.split())
        assert "WARNING: parameter seed" in (run.report_dir / "report.md").read_text("utf-8")
    assert warm.results()["run"]["calls"] == 0
    assert calls == first.results()["run"]["calls"] and calls <= len(first.results()["cases"]) + 4
