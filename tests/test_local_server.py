"""``biascheck serve-local``'s server without a model: the log-softmax and alternatives it reads
from logits, the character offsets of tokens in a prompt, the checks of a request's fields, and
its HTTP (one-line errors, keep-alive) while no model is loaded. tests/test_real_model.py checks
its log-probabilities against a direct computation on both real models."""

from __future__ import annotations

import http.client
import json
import threading

import numpy as np
import pytest

from biascheck.execution.local_server import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    RequestError,
    _Handler,
    _Server,
    read_messages,
    read_sampling,
    score_rows,
    text_spans,
)


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    return rows - np.log(np.exp(rows - rows.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)) - rows.max(axis=1, keepdims=True)


@pytest.mark.parametrize("top_n", [0, 1, 5])
def test_scored_rows_are_the_log_softmax_and_the_best_alternatives_in_order(top_n):
    rng = np.random.default_rng(0)
    rows = (rng.standard_normal((40, 5000)) * 4).astype(np.float32)  # more rows than one block
    tokens = rng.integers(0, 5000, 40).tolist()
    values, tops = score_rows(rows, tokens, top_n)
    expected = _log_softmax(rows)
    assert np.allclose(values, expected[np.arange(40), tokens], atol=1e-5)
    assert len(tops) == 40
    for r, top in enumerate(tops):
        assert [t for t, _ in top] == np.argsort(-expected[r], kind="stable")[:top_n].tolist()
        assert np.allclose([v for _, v in top], np.sort(expected[r])[::-1][:top_n], atol=1e-5)


def test_a_row_of_large_logits_gives_finite_log_probabilities_at_most_zero():
    rows = np.array([[1e4, 1e4 - 1, -1e4]], dtype=np.float32)
    values, tops = score_rows(rows, [0], 3)
    assert values[0] <= 0 and np.isfinite(values[0]) and tops[0][0][0] == 0
    assert abs(sum(np.exp(v) for _, v in tops[0]) - 1) < 1e-6


def test_offsets_of_tokens_that_spell_the_prompt():
    text = "Answer: A"
    assert text_spans([b"Answer", b":", b" A"], text) == [(0, "Answer"), (6, ":"), (7, " A")]
    assert text_spans([b"Answer", b":", b" A"], text, base=5) == [(5, "Answer"), (11, ":"), (12, " A")]


def test_a_korean_character_split_over_two_tokens_belongs_to_the_second():
    text = "가나"  # two characters of 3 bytes each
    data = text.encode("utf-8")
    spans = text_spans([data[:1], data[1:3], data[3:]], text)
    # The first byte completes nothing (""); the second token completes 가 and starts where it does.
    assert spans == [(0, ""), (0, "가"), (1, "나")]
    for offset, token in spans:
        assert text.startswith(token, offset)


def test_a_leading_space_the_tokenizer_added_is_not_counted():
    assert text_spans([b" Hello", b" world"], "Hello world") == [(0, "Hello"), (5, " world")]


def test_pieces_that_do_not_spell_the_prompt_are_read_on_their_own():
    assert text_spans([b"ab", b"\xff", b"c"], "xyz") == [(0, "ab"), (2, ""), (2, "c")]


def test_sampling_defaults_are_llama_cpp_servers():
    sampling = read_sampling({"model": "m", "prompt": "x"}, COMPLETION_FIELDS, 16)
    assert sampling.max_tokens == 16 and sampling.seed is None and sampling.stops == ()
    assert sampling.options == {
        "temp": 0.8,
        "top_p": 0.95,
        "top_k": 40,
        "min_p": 0.05,
        "typical_p": 1.0,
        "repeat_penalty": 1.1,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
    }
    given = read_sampling({"temperature": 0, "seed": 42, "max_tokens": 1, "stop": "\n", "presence_penalty": 0.5}, COMPLETION_FIELDS, 16)
    assert given.max_tokens == 1 and given.seed == 42 and given.stops == ("\n",)
    assert given.options["temp"] == 0.0 and given.options["presence_penalty"] == 0.5
    assert read_sampling({"max_completion_tokens": 3}, CHAT_FIELDS, None).max_tokens == 3
    assert read_sampling({}, CHAT_FIELDS, None).max_tokens is None


@pytest.mark.parametrize(
    ("body", "fields", "fragment", "param"),
    [
        ({"prompt": "x", "frobnicate": 1}, COMPLETION_FIELDS, "Unrecognized request argument supplied: frobnicate", "frobnicate"),
        ({"messages": [], "echo": True}, CHAT_FIELDS, "Unrecognized request argument supplied: echo", "echo"),
        ({"temperature": 3}, COMPLETION_FIELDS, "temperature must be a number from 0 to 2, not 3", "temperature"),
        ({"temperature": "hot"}, COMPLETION_FIELDS, 'temperature must be a number, not "hot"', "temperature"),
        ({"max_tokens": -1}, COMPLETION_FIELDS, "max_tokens must be an integer at least 0, not -1", "max_tokens"),
        ({"seed": 1.5}, COMPLETION_FIELDS, "seed must be an integer, not 1.5", "seed"),
        ({"stream": True}, CHAT_FIELDS, "stream is not supported", "stream"),
        ({"n": 2}, CHAT_FIELDS, "n must be 1", "n"),
        ({"logit_bias": {"1": 5}}, CHAT_FIELDS, "logit_bias is not supported", "logit_bias"),
        ({"stop": [1]}, CHAT_FIELDS, "stop must be a string or a list of strings", "stop"),
    ],
)
def test_a_bad_field_is_a_one_line_error_naming_it(body, fields, fragment, param):
    with pytest.raises(RequestError) as error:
        read_sampling(body, fields, None)
    assert fragment in str(error.value) and "\n" not in str(error.value)
    assert error.value.status == 400 and error.value.param == param
    assert error.value.body()["error"]["message"] == str(error.value)


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        (None, "messages must be a non-empty list"),
        ([{"role": "tool", "content": "x"}], 'messages[0].role must be system, user or assistant, not "tool"'),
        ([{"role": "user", "content": [{"type": "text", "text": "x"}]}], "messages[0].content must be a string"),
        ([{"role": "user", "content": "x", "tool_calls": []}], "messages[0] has a field this server does not take: tool_calls"),
    ],
)
def test_bad_messages_are_one_line_errors(messages, fragment):
    with pytest.raises(RequestError, match=None) as error:
        read_messages({"messages": messages})
    assert fragment in str(error.value)


def test_messages_keep_their_roles_and_contents():
    assert read_messages({"messages": [{"role": "system", "content": None}, {"role": "user", "content": "Hi"}]}) == [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Hi"},
    ]


@pytest.fixture
def loading_server():
    """The HTTP server as it is while its model loads (no model)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _ask(connection: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
    connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_while_loading_it_says_so_and_bad_requests_get_one_line_errors_on_one_connection(loading_server):
    connection = http.client.HTTPConnection("127.0.0.1", loading_server, timeout=10)
    try:
        assert _ask(connection, "GET", "/health") == (503, {"status": "loading"})
        status, body = _ask(connection, "GET", "/v1/models")
        assert status == 503 and body["error"]["message"] == "the model is still loading"
        status, body = _ask(connection, "POST", "/v1/completions", b"{not json")
        assert status == 400 and body["error"]["message"].startswith("the request body is not JSON: ")
        assert "\n" not in body["error"]["message"] and body["error"]["type"] == "invalid_request_error"
        status, body = _ask(connection, "POST", "/v1/completions", b"[1, 2]")
        assert status == 400 and body["error"]["message"] == "the request body must be a JSON object"
        status, body = _ask(connection, "POST", "/v1/embeddings", b"{}")
        assert status == 404 and body["error"]["message"] == "no such endpoint: POST /v1/embeddings"
        status, body = _ask(connection, "POST", "/v1/completions", json.dumps({"prompt": "x"}).encode())
        assert status == 503 and body["error"]["message"] == "the model is still loading"
    finally:
        connection.close()
