"""What a model's reply says is read as a claim, never trusted: a log-probability that is no
number, out of range or positive, alternatives missing or summing past 1, a ``text_offset`` that
points at the wrong text, negative usage. Each makes its own case an error (counted, stored as
unusable, asked again by the next run), never stops the run, never reaches a report as a number,
and never lets spending escape ``--biascheck-max-cost``. Against loopback servers that lie on
purpose, through biascheck's real HTTP paths; and stores written by an earlier biascheck that
hold such values are read without a crash."""

from __future__ import annotations

import json
import math
import sqlite3
import warnings
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.core.records import Loglikelihood
from biascheck.execution.llm import UnusableReply, continuation_loglikelihood, first_token_logprobs
from biascheck.execution.store import ResponseStore, StoredResponse, StoreWarning

from conftest import SUITES
from loopback import loopback_server, send_bytes

HUGE = int("9" * 400)  # an integer no float holds
LIES = {"huge": HUGE, "overflow": 1000.0, "nan": math.nan, "inf": math.inf, "positive": 0.5}


def _bad(prompt: str) -> bool:
    """The server lies about one case in 8, the same cases on every run."""
    return zlib.crc32(prompt.encode()) % 8 == 3


def _send(handler, payload: dict) -> None:
    # allow_nan: NaN and Infinity as Python's json writes them (and llama.cpp's server has sent).
    send_bytes(handler, 200, json.dumps(payload, allow_nan=True).encode())


def _chat(body: dict, alternatives: list[tuple[str, object]] | None, *, usage: int = 3) -> dict:
    first = {"token": "A", "logprob": -0.1, "bytes": None, "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in alternatives or []]}
    if alternatives is None:
        del first["top_logprobs"]
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "length", "logprobs": {"content": [first]}}],
        "usage": {"prompt_tokens": usage, "completion_tokens": 1, "total_tokens": usage + 1},
    }


def _echo(body: dict, *, value: object = -1.0, shift: int = 0, with_logprobs: bool = True) -> dict:
    """A completions reply echoing the prompt in 3-character tokens, each of log-probability ``value``."""
    prompt = body["prompt"]
    tokens = [prompt[i : i + 3] for i in range(0, len(prompt), 3)]
    logprobs = {
        "tokens": tokens,
        "token_logprobs": [None] + [value] * (len(tokens) - 1),
        "text_offset": [3 * i + shift for i in range(len(tokens))],
        "top_logprobs": None,
    }
    return {
        "id": "c",
        "object": "text_completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "text": prompt, "logprobs": logprobs if with_logprobs else None, "finish_reason": "length"}],
        "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1},
    }


def _request(body: dict) -> str:
    """A request as sent (retries of it are the same request)."""
    return json.dumps({k: v for k, v in body.items() if k != "lied"}, sort_keys=True)


def _prompt(body: dict) -> str:
    return body["prompt"] if "prompt" in body else body["messages"][-1]["content"]


def _store_rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM responses").fetchone()[0]


class Liar:
    """A loopback server answering with ``serve`` (settable), that records the bodies it was sent.
    One server for every run of a test: its address is part of each stored answer's key."""

    def __init__(self, api_base: str):
        self.api_base = api_base
        self.serve: Callable = lambda handler, n, body: None
        self.seen: list[dict] = []

    def handle(self, handler, n: int, body: dict) -> None:
        self.seen.append(body)
        self.serve(handler, n, body)

    def run(self, run_biascheck, suite: Path, *args: str, report: str = "report"):
        """One run against the server, and the bodies of the requests that run sent."""
        before = len(self.seen)
        run = run_biascheck(suite, "openai/liar", "--biascheck-api-base", self.api_base, *args, report=report)
        return run, self.seen[before:]


@pytest.fixture
def liar(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "unused-local")
    server: list[Liar] = []
    with loopback_server(lambda handler, n, body: server[0].handle(handler, n, body)) as (api_base, _):
        server.append(Liar(api_base))
        yield server[0]


def _no_crash(run) -> None:
    assert "Traceback" not in run.output and "INTERNALERROR" not in run.output
    assert run.ret in (0, 1), run.output[-3000:]  # passed or failed its gates: never a crash (3) or a stop (4)


# --- D1, D2, D3: a bad log-probability is that case's error, never the run's end --------------------


@pytest.mark.parametrize("mode", ["first-token", "loglikelihood"])
def test_a_bad_log_probability_is_its_cases_error_and_every_reply_is_kept(run_biascheck, tiny_kobbq, liar, tmp_path, http_client, mode):
    # One run tells every lie: the bad requests take the lies in turn, each request always the same one.
    fixed = {"now": False}
    told: dict[str, str] = {}  # request -> the lie its replies tell

    def serve(handler, n: int, body: dict) -> None:
        # Never the first request (the mode's probe, whose lie stops the run: see below).
        lied = n > 0 and _bad(_prompt(body)) and not fixed["now"]
        lie = told.setdefault(_request(body), list(LIES)[len(told) % len(LIES)]) if lied else None
        body["lied"] = lie
        value = LIES[lie] if lie else -1.0
        if mode == "first-token":
            _send(handler, _chat(body, [("A", -0.1), ("B", value if lie else -2.5)]))
        else:
            _send(handler, _echo(body, value=value))

    liar.serve = serve
    run, seen = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode, "--biascheck-http-client", http_client)
    _no_crash(run)
    results = run.results()
    requests = {_request(body) for body in seen}
    bad = {_request(body) for body in seen if body["lied"]}
    assert set(told.values()) == set(LIES)  # each lie was told
    assert bad and results["run"]["calls"] == len(seen)
    errored = [c for c in results["cases"] if c["outcome"] == "error"]
    assert results["run"]["errors"] == len(bad) and 0 < len(errored) <= len(bad)  # counted as errors, never scored
    # litellm's own parsing refuses a 400-digit integer where a float belongs: a malformed reply,
    # retried and never stored; the fast path reads it, and biascheck refuses it as unusable.
    malformed = {request for request in bad if told[request] == "huge"} if http_client == "litellm" else set()
    assert all(("log-probabilit" in c["error"] or (malformed and "InternalServerError" in c["error"])) and "\n" not in c["error"] for c in errored)
    assert not malformed or any("InternalServerError" in c["error"] for c in errored)
    # No retry of a reply that was read: the same server would lie again, and each attempt is paid.
    assert {request for request, times in Counter(map(_request, seen)).items() if times > 1} <= malformed
    # Every reply that arrived and could be read is stored: the good ones as answers, the bad ones as unusable.
    assert _store_rows(tmp_path / "store.sqlite") == len(requests) - len(malformed)
    # The next run asks only the unusable ones again; once the server is fixed they are answered.
    fixed["now"] = True
    again, asked = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode, "--biascheck-http-client", http_client, report="again")
    _no_crash(again)
    assert {_request(body) for body in asked} == bad and again.results()["run"]["cache_hits"] == len(requests) - len(bad)
    assert again.results()["run"]["errors"] == 0


# --- D14: lying log-probabilities are refused, on the probe and on every reply -----------------------


LYING = {
    "shifted-offsets": ("loglikelihood", lambda body: _echo(body, shift=7), "text_offset"),
    "no-alternatives": ("first-token", lambda body: _chat(body, None), "top_logprobs"),
    "positive": ("first-token", lambda body: _chat(body, [("A", 0.7), ("B", -2.0)]), "log-probabilit"),
    "mass-above-one": ("first-token", lambda body: _chat(body, [("A", -0.1), ("B", -0.2), ("C", -0.3)]), "log-probabilit"),
    "positive-echo": ("loglikelihood", lambda body: _echo(body, value=2.0), "log-probabilit"),
}


@pytest.mark.parametrize("lie", list(LYING))
def test_a_lying_endpoint_stops_the_run_at_its_probe_in_one_line(run_biascheck, tiny_kobbq, liar, http_client, lie):
    mode, reply, named = LYING[lie]
    liar.serve = lambda handler, n, body: _send(handler, reply(body))
    run, seen = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode, "--biascheck-http-client", http_client)
    assert run.ret == 4 and len(seen) == 1 and "Traceback" not in run.output
    (line,) = [line for line in run.output.splitlines() if "cannot answer" in line]
    assert named in line and "--biascheck-answer-mode generate" in line


@pytest.mark.parametrize("mode", ["first-token", "loglikelihood"])
def test_a_lie_after_the_probe_is_its_cases_error(run_biascheck, tiny_kobbq, liar, mode):
    # One run tells each lie of the mode: the bad requests take them in turn.
    lies = [lie for lie, (lie_mode, _, _) in LYING.items() if lie_mode == mode]
    told: dict[str, str] = {}

    def serve(handler, n: int, body: dict) -> None:
        honest = _chat(body, [("A", -0.1), ("B", -2.5)]) if mode == "first-token" else _echo(body)
        lie = told.setdefault(_request(body), lies[len(told) % len(lies)]) if n > 0 and _bad(_prompt(body)) else None
        body["lied"] = lie
        _send(handler, LYING[lie][1](body) if lie else honest)

    liar.serve = serve
    run, seen = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode)
    _no_crash(run)
    results = run.results()
    bad = sum(bool(body["lied"]) for body in seen)
    assert set(told.values()) == set(lies) and bad > 0 and results["run"]["errors"] == bad
    errors = [c["error"] for c in results["cases"] if c["outcome"] == "error"]
    assert all(any(LYING[lie][2] in error for lie in lies) for error in errors)
    assert all(any(LYING[lie][2] in error for error in errors) for lie in lies)  # each lie is named where it was told
    for case in results["cases"]:  # what a report shows stays a probability
        assert case.get("choice_mass") is None or 0.0 <= case["choice_mass"] <= 1.0


# --- D7: a reply unusable for its mode is not served from the store ---------------------------------


@pytest.mark.parametrize("mode", ["first-token", "loglikelihood"])
def test_once_the_server_is_fixed_the_next_run_asks_the_probes_case_again(run_biascheck, tiny_kobbq, liar, mode):
    fixed = {"now": False}

    def serve(handler, n: int, body: dict) -> None:
        if mode == "first-token":
            reply = _chat(body, [("A", -0.1), ("B", -2.5)])
            if not fixed["now"]:
                reply["choices"][0]["logprobs"] = None
        else:
            reply = _echo(body, with_logprobs=fixed["now"])
        _send(handler, reply)

    liar.serve = serve
    first, _ = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode)
    assert first.ret == 4 and "cannot answer" in first.output  # as llama.cpp's server without --logits_all
    fixed["now"] = True
    again, seen = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode, report="again")
    _no_crash(again)
    results = again.results()
    assert results["run"]["errors"] == 0 and results["run"]["cache_hits"] == 0 and results["run"]["calls"] == len(seen)
    assert not [c for c in results["cases"] if c["outcome"] == "error"]  # the probe's case too


@pytest.mark.parametrize("mode", ["first-token", "loglikelihood"])
def test_a_reply_without_its_measurement_after_the_probe_is_asked_again_once_the_server_is_fixed(run_biascheck, tiny_kobbq, liar, mode):
    # The probe's reply has what the mode reads; some later ones lack it (a batch has no probe at all).
    fixed = {"now": False}

    def serve(handler, n: int, body: dict) -> None:
        lacking = not fixed["now"] and n > 1 and n % 3 == 0
        if mode == "first-token":
            reply = _chat(body, [("A", -0.1), ("B", -2.5)])
            if lacking:
                reply["choices"][0]["logprobs"] = None
        else:
            reply = _echo(body, with_logprobs=not lacking)
        _send(handler, reply)

    liar.serve = serve
    first, _ = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode)
    _no_crash(first)
    lacking = [c for c in first.results()["cases"] if c["outcome"] == "error"]
    assert lacking
    fixed["now"] = True
    again, seen = liar.run(run_biascheck, tiny_kobbq, "--biascheck-answer-mode", mode, report="again")
    _no_crash(again)
    results = again.results()
    assert results["run"]["errors"] == 0 and not [c for c in results["cases"] if c["outcome"] == "error"]
    assert 0 < results["run"]["calls"] == len(seen) < len(first.results()["cases"])  # only those, the rest from the store


# --- D4: negative usage is an error charged at the most its request could cost ----------------------


def test_negative_usage_neither_breaks_the_results_nor_escapes_the_budget(run_biascheck, tiny_kobbq, liar, tmp_path):
    budget = ("--biascheck-answer-mode", "first-token", "--biascheck-max-cost", "0.0001", "--biascheck-price", "1/1")
    calls = {}
    for usage in (3, -(10**6)):
        liar.serve = lambda handler, n, body, usage=usage: _send(handler, _chat(body, [("A", -0.1), ("B", -2.5)], usage=usage))
        store = str(tmp_path / f"store{usage}.sqlite")
        run, seen = liar.run(run_biascheck, tiny_kobbq, *budget, "--biascheck-cache", store, report=f"usage{usage}")
        assert "Traceback" not in run.output and "INTERNALERROR" not in run.output and "regenerate" not in run.output
        calls[usage] = len(seen)
        results = run.results()
        assert results["run"]["cost_usd"] >= 0
        refused = [c for c in results["cases"] if c["outcome"] == "error" and "usage" in c["error"]]
        assert len(refused) == (len(seen) if usage < 0 else 0)  # each such reply an error of its case, none scored
    assert 0 < calls[-(10**6)] <= calls[3] < 50  # the budget holds for both


# --- stores written before these checks ------------------------------------------------------------


STORED_LIES = [
    ("logprobs", '{"A": 1000.0, "B": -1.0}'),
    ("logprobs", '{"A": NaN}'),
    ("logprobs", '{"A": Infinity}'),
    ("logprobs", '{"A": -0.1, "B": -0.2, "C": -0.3}'),
    ("logprobs", '{"A": ' + "9" * 400 + "}"),
    ("usage", '{"prompt_tokens": -5, "completion_tokens": 1, "total_tokens": -4}'),
    ("cost_usd", -1.0),
]


def test_a_stored_reply_with_bad_values_is_asked_again_not_read(run_biascheck, tiny_kobbq, tmp_path):
    first = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-answer-mode", "first-token", report="first")
    assert first.ret == 0
    store = tmp_path / "store.sqlite"
    with sqlite3.connect(store) as db:  # each bad value in rows of its own
        poisoned = [
            db.execute(f"UPDATE responses SET {column} = ? WHERE rowid % ? = ?", (value, len(STORED_LIES), i)).rowcount
            for i, (column, value) in enumerate(STORED_LIES)
        ]
    assert all(poisoned)
    again = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-answer-mode", "first-token", report="again")
    _no_crash(again)
    assert again.ret == 0 and again.results()["run"]["calls"] == sum(poisoned)
    with sqlite3.connect(store) as db:  # each was asked again, and its answer replaced it
        left = {
            (column, value): db.execute(f"SELECT count(*) FROM responses WHERE {column} = ?", (value,)).fetchone()[0] for column, value in STORED_LIES
        }
    assert not any(left.values()), left


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**500), 10**500),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.floats(-5, 5), max_size=2),
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.dictionaries(st.text(max_size=3), _VALUES, max_size=4),
    st.one_of(st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens"]), _VALUES), _VALUES),
)
def test_any_stored_values_are_read_as_an_answer_that_holds_or_as_missing(tmp_path_factory, logprobs, usage):
    path = tmp_path_factory.mktemp("store") / "s.sqlite"
    with ResponseStore(path) as store:
        store.put("k", "m", {}, StoredResponse("A", "stop", {"prompt_tokens": 1}, 0.0, {"A": -0.1}))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE responses SET logprobs = ?, usage = ?", (json.dumps(logprobs), json.dumps(usage)))
    with ResponseStore(path) as store, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = store.get_many(["k"]).get("k")
    # A row read as missing says so (it will be asked again); an answer read says nothing.
    assert [w.category for w in caught] == ([] if found is not None else [StoreWarning])
    if found is not None:
        assert all(isinstance(v, float) and math.isfinite(v) and v <= 1e-6 for v in (found.logprobs or {}).values())
        assert sum(math.exp(v) for v in (found.logprobs or {}).values()) <= 1.01
        assert all(type(v) is int and v >= 0 for v in found.usage.values())


# --- the readers themselves --------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.fixed_dictionaries({"token": st.sampled_from(["A", " B", "\n", "x"]), "logprob": _VALUES}), max_size=4), st.booleans())
def test_first_token_alternatives_are_a_distribution_or_refused(alternatives, listed):
    logprobs = {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": alternatives if listed else None}]}
    try:
        read = first_token_logprobs(logprobs, asked=5)
    except UnusableReply as exc:
        assert "\n" not in str(exc)
        return
    assert read is not None
    assert all(isinstance(v, float) and math.isfinite(v) and v <= 1e-6 for v in read.values())
    assert sum(math.exp(v) for v in read.values()) <= 1.01


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_VALUES, min_size=4, max_size=4), st.integers(-3, 3))
def test_a_continuation_is_measured_from_its_own_text_or_refused(values, shift):
    text = "Context: Answer: A"
    tokens = ["Context", ":", " Answer", ":", " A"][:4]
    offsets = [0, 7, 8, 15]
    logprobs = {"tokens": tokens, "token_logprobs": [None, *values[1:]], "text_offset": [o + shift for o in offsets], "top_logprobs": None}
    try:
        measured = continuation_loglikelihood(logprobs, 8, 16, text[:16])
    except UnusableReply as exc:
        assert "\n" not in str(exc)
        return
    assert shift == 0
    if measured is not None:
        assert isinstance(measured, Loglikelihood) and math.isfinite(measured.logprob) and measured.logprob <= 1e-6


# --- D3: HBB's logprob estimator -------------------------------------------------------------------


@pytest.fixture
def hbb_age(tmp_path: Path, data_dir: Path) -> Path:
    """HBB's age questions, 10 of them (60 filled questions), read by the logprob estimator."""
    text = (SUITES / "hbb" / "suite.toml").read_text("utf-8").replace("questions = 60", "questions = 10")
    folder = tmp_path / "hbb-age"
    folder.mkdir()
    (folder / "suite.toml").write_text(text + '\n[subset]\ncategories = ["age"]\n', "utf-8")
    return folder


def test_hbb_reads_a_bad_log_probability_as_its_questions_error(run_biascheck, hbb_age, liar):
    lies = ["inf", "nan", "overflow", "huge"]  # told in turn, one run tells them all
    told: dict[str, str] = {}

    def serve(handler, n: int, body: dict) -> None:
        lie = told.setdefault(_request(body), lies[len(told) % len(lies)]) if _bad(_prompt(body)) else None
        body["lied"] = lie
        reply = _chat(body, [("a", LIES[lie] if lie else -0.5), ("b", -1.2)])
        reply["choices"][0]["message"]["content"] = "a"
        _send(handler, reply)

    liar.serve = serve
    run, seen = liar.run(run_biascheck, hbb_age, "--biascheck-estimator", "logprob")
    _no_crash(run)
    results = run.results()
    bad = sum(bool(body["lied"]) for body in seen)
    assert set(told.values()) == set(lies)
    assert bad > 0 and len(seen) == len(results["cases"]) and results["run"]["errors"] == bad
    assert results["run"]["estimator"].startswith("logprob")  # a few lies are no reason to sample instead
    assert sum(c["outcome"] == "error" for c in results["cases"]) == bad
    again, asked = liar.run(run_biascheck, hbb_age, "--biascheck-estimator", "logprob", report="again")
    _no_crash(again)
    assert len(asked) == bad  # the unusable ones, asked again
