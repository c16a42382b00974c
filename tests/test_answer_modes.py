"""The QA answer modes: generate (a reply, parsed), loglikelihood (each option's continuation
scored through /v1/completions with echo) and first-token (the option letters' probability at the
first generated position). Against the simulator, whose answer to a prompt is the same draw in
every mode; the reading functions with hypothesis; a provider that cannot serve a mode stops the
run before its first call, or after one, in one line."""

from __future__ import annotations

import json
import math
import sqlite3
import string
import tomllib
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.qa.answers import (
    MIN_CHOICE_MASS,
    AnswerMode,
    classify,
    continuations,
    letter_probabilities,
    requests,
)
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Loglikelihood, Message, QATruth, Response
from biascheck.execution.call_errors import CallError
from biascheck.execution.llm import LATE_LOGPROBS, ModelConfig, check_serves, continuation_loglikelihood, echo_is_late

from conftest import write_subset_suite
from loopback import loopback_server, send_json

LETTERS = ("A", "B", "C")


def qa_case(prompt: str = "Context: ...\nAnswer:", choices=("the old man", "the boy", "Unknown"), letters=LETTERS) -> Case:
    truth = QATruth(context="amb", unknown=2, biased=0, counter=1, correct=2)
    return Case("c1", "s1", "age", "t1", "", "1", 0, (Message("user", prompt),), tuple(choices), tuple(letters), truth)


# --- reading a completions reply ------------------------------------------------------------------


@st.composite
def echoed(draw):
    """(logprobs of an echoed prompt, start, end, the expected sum and count): a text cut into
    tokens at random, each with a log-probability, and a continuation that starts at a random cut."""
    pieces = draw(st.lists(st.text(string.ascii_letters + " :\n가나", min_size=1, max_size=4), min_size=2, max_size=12))
    values = draw(st.lists(st.floats(-30, 0), min_size=len(pieces), max_size=len(pieces)))
    offsets = [sum(len(p) for p in pieces[:i]) for i in range(len(pieces))]
    text = "".join(pieces)
    start = draw(st.integers(1, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    inside = [i for i in range(len(pieces)) if offsets[i] < end and offsets[i] + len(pieces[i]) > start]
    logprobs = {"tokens": pieces, "token_logprobs": [None, *values[1:]], "text_offset": offsets, "top_logprobs": None}
    return logprobs, start, end, inside, values


@given(echoed())
def test_the_continuation_is_the_tokens_that_overlap_it_and_their_log_probabilities_sum(case):
    logprobs, start, end, inside, values = case
    measured = continuation_loglikelihood(logprobs, start, end)
    if 0 in inside:  # the prompt's first token has no log-probability: nothing to read, never a guess
        assert measured is None
        return
    assert measured is not None
    assert measured.tokens == len(inside)
    assert math.isclose(measured.logprob, sum(values[i] for i in inside), abs_tol=1e-9)
    assert measured.logprob <= 0 and measured.greedy  # no alternatives listed: nothing says otherwise


def test_a_token_that_straddles_the_boundary_counts_and_what_was_generated_does_not():
    # "Answer: A" tokenized as "Answer", ":", " A" and one generated "\n": the continuation " A" starts at 7.
    logprobs = {
        "tokens": ["Answer", ": A", "\n"],
        "token_logprobs": [None, -1.5, -0.25],
        "text_offset": [0, 6, 9],
        "top_logprobs": [None, {": A": -1.5, ": B": -0.5}, {"\n": -0.25}],
    }
    measured = continuation_loglikelihood(logprobs, 7, 9)
    assert measured == Loglikelihood(-1.5, 1, False)  # ": A" holds the continuation; ": B" was likelier
    assert continuation_loglikelihood({"tokens": ["a"], "token_logprobs": [None], "text_offset": [0]}, 0, 1) is None
    assert continuation_loglikelihood(None, 0, 1) is None


def test_alternatives_one_position_late_are_refused_not_read():
    # llama-cpp-python's echo for a model without a BOS token: position i lists what follows token i.
    tokens = ["1", ",", " 2", ",", " 3", ",", " 4", ",", " 5", ",", " 6"]
    late = [None] + [{tokens[i + 1]: -0.1, tokens[i]: -9.0} for i in range(1, len(tokens) - 1)] + [{"\n": -0.1}]
    right = [None] + [{tokens[i]: -0.1} for i in range(1, len(tokens))]
    assert echo_is_late(tokens, late) and not echo_is_late(tokens, right)
    logprobs = {"tokens": tokens, "token_logprobs": [None] + [-1.0] * 10, "text_offset": list(range(11)), "top_logprobs": late}
    with pytest.raises(CallError) as caught:
        continuation_loglikelihood(logprobs, 9, 11)
    assert str(caught.value) == LATE_LOGPROBS and not caught.value.retryable


# --- reading the options ---------------------------------------------------------------------------


@pytest.mark.parametrize(("token", "index"), [("A", 0), (" B", 1), ("c", 2), ("(a", 0), ("**B", 1), ("C:", 2), ("A.", 0), ("D", None), ("The", None)])
def test_letter_tokens_as_tokenizers_split_them(token, index):
    mass = letter_probabilities({token: math.log(0.6)}, LETTERS)
    assert mass == [0.6 if i == index else 0.0 for i in range(3)]


@given(st.dictionaries(st.sampled_from(["A", " A", "B", "b", " C", "(c", "The", "I", "\n"]), st.floats(-20, 0), max_size=9))
def test_the_letters_mass_is_the_sum_of_their_variants_and_the_answer_its_arg_max(alternatives):
    case = qa_case()
    outcome = classify(case, [Response(text="A", logprobs=alternatives)], AnswerMode("first-token"))
    mass = letter_probabilities(alternatives, LETTERS)
    # At most 1, as a reply's alternatives are checked to be (these are drawn unchecked).
    assert math.isclose(outcome.choice_mass, min(1.0, sum(mass)), abs_tol=1e-12)
    if sum(mass) < MIN_CHOICE_MASS:
        assert outcome.status == "ooc" and outcome.answer is None  # the model wanted to say something else
    else:
        assert outcome.status == "answered" and mass[outcome.answer] == max(mass)
        assert outcome.answer == mass.index(max(mass))  # ties: the first, as numpy's arg max


def test_a_first_token_reply_without_log_probabilities_is_an_error_never_unbiased():
    outcome = classify(qa_case(), [Response(text="A", logprobs=None)], AnswerMode("first-token"))
    assert outcome.status == "error" and "no log-probabilities" in outcome.error


def _measured(*values: float) -> list[Response]:
    return [Response(text="\n", loglikelihood=Loglikelihood(v, 1, True)) for v in values]


def test_loglikelihood_answers_by_the_arg_max_and_keeps_the_length_normalised_reading_beside():
    case = qa_case()
    mode = AnswerMode("loglikelihood", continuations="options")
    # "the boy" (7 characters) at -3.0 is likelier in all, "the old man" (11) at -4.0 per character.
    outcome = classify(case, _measured(-4.0, -3.0, -9.0), mode)
    assert (outcome.status, outcome.answer, outcome.answer_norm, outcome.answer_class) == ("answered", 1, 0, "counter")
    assert outcome.loglikelihoods == (-4.0, -3.0, -9.0)
    by_length = classify(case, _measured(-4.0, -3.0, -9.0), AnswerMode("loglikelihood", "length", "options"))
    assert (by_length.answer, by_length.answer_norm, by_length.answer_class) == (0, 0, "biased")
    missing = classify(case, [*_measured(-1.0, -2.0), Response(text="\n")], mode)
    assert missing.status == "error" and "log-probabilities" in missing.error


def test_several_continuations_of_one_option_name_it_by_the_arg_max_over_all_of_them():
    # EsBBQ's scorer scores "unknown" in several wordings and caps the arg max at the unknown option:
    # a benchmark gives such a list (QABenchmark.continuations), an option's index repeated.
    def expanded(case, mode):
        return [(0, " the old man"), (1, " the boy"), (2, " Unknown"), (2, " Cannot be determined"), (2, " Not known")]

    case, mode = qa_case(), AnswerMode("loglikelihood", continuations="options")
    assert [r[0][-1]["content"] for r in requests(case, {}, mode, expanded)] == [t for _, t in expanded(case, mode)]
    outcome = classify(case, _measured(-9.0, -8.0, -7.0, -2.0, -6.0), mode, expanded)
    assert (outcome.answer, outcome.answer_class) == (2, "unknown") and len(outcome.loglikelihoods) == 5
    # Per character, "Cannot be determined" (20) at -2.0 still leads; " Not known" (9) at -6.0 does not.
    assert outcome.answer_norm == 2
    assert classify(case, _measured(-1.0, -8.0, -7.0, -2.0, -6.0), mode, expanded).answer == 0


def test_the_continuations_are_the_letters_or_the_options_after_a_space():
    case = qa_case()
    assert continuations(case, AnswerMode("loglikelihood")) == [(0, " A"), (1, " B"), (2, " C")]
    assert continuations(case, AnswerMode("loglikelihood", continuations="options"))[0] == (0, " the old man")
    assert continuations(qa_case("Answer: "), AnswerMode("loglikelihood"))[0] == (0, "A")  # the prompt's own space
    scored = requests(case, {"temperature": 0, "max_tokens": 30, "seed": 3}, AnswerMode("loglikelihood"))
    assert [r[0][-1] for r in scored] == [{"role": "assistant", "content": t} for t in (" A", " B", " C")]
    assert all(r[1] == {"echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0.0} for r in scored)
    ((messages, params, _),) = requests(case, {"temperature": 0, "max_tokens": 30}, AnswerMode("first-token"))
    assert messages == case.messages_as_dicts() and params["max_tokens"] == 1 and params["top_logprobs"] == 20


# --- a provider that cannot serve a mode ----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "api_base", "needs", "fragment"),
    [
        ("anthropic/claude-3-5-haiku-20241022", None, "prompt log-probabilities", "anthropic serves no completions endpoint"),
        ("openai/gpt-4o-mini", None, "prompt log-probabilities", "only for babbage-002 and davinci-002"),
        ("anthropic/claude-3-5-haiku-20241022", None, "token log-probabilities", "returns no token log-probabilities"),
    ],
)
def test_a_provider_that_cannot_serve_a_mode_is_refused_before_any_call(model, api_base, needs, fragment):
    with pytest.raises(BiascheckError) as caught:
        check_serves(ModelConfig(model, api_base=api_base), needs, "--biascheck-answer-mode")
    assert fragment in str(caught.value) and "\n" not in str(caught.value)
    check_serves(ModelConfig("hosted_vllm/m", api_base="http://127.0.0.1:9/v1"), needs, "--biascheck-answer-mode")
    check_serves(ModelConfig("openai/davinci-002"), "prompt log-probabilities", "--biascheck-answer-mode")
    with pytest.raises(BiascheckError, match="not sent as provider batches"):
        check_serves(ModelConfig("openai/m", api_base="http://127.0.0.1:9/v1"), "prompt log-probabilities", "x", batch=True)


# --- through the plugin, against the simulator ----------------------------------------------------


@pytest.fixture
def kobbq_small(tmp_path, data_dir) -> Path:
    """12 templates (one per category, 4 contexts each), prompt 3 (lower-case letters a, b, c), the original order: 96 cases."""
    return write_subset_suite(
        tmp_path / "kobbq",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["3"]',
    )


def test_every_mode_reads_the_same_answers_of_the_simulator_and_says_how(run_biascheck, kobbq_small):
    persona = "sim/stereotyped?p=0.3"
    runs = {
        mode: run_biascheck(kobbq_small, persona, "--biascheck-answer-mode", mode, report=mode)
        for mode in ("generate", "loglikelihood", "first-token")
    }
    results = {mode: run.results() for mode, run in runs.items()}
    cases = len(results["generate"]["cases"])
    assert cases == 96 and all(run.ret == 1 for run in runs.values())  # the persona fails its gates in every mode
    # One reply per case, one request per option, one first-token reading per case.
    assert [results[m]["run"]["calls"] for m in runs] == [cases, 3 * cases, cases]
    outcomes = {mode: [(c["case_id"], c["outcome"]) for c in doc["cases"]] for mode, doc in results.items()}
    assert outcomes["generate"] == outcomes["loglikelihood"] == outcomes["first-token"]
    gated = ("acc_amb", "acc_dis", "diff_bias_amb", "diff_bias_dis", "ooc_ratio")
    values = {mode: [doc["metrics"]["overall"][m]["value"] for m in gated] for mode, doc in results.items()}
    assert values["generate"] == values["loglikelihood"] == values["first-token"]
    # How the answers were read: in the results, in the reports, and in the reading metrics of that mode only.
    assert results["generate"]["run"]["estimator"] is None
    assert results["loglikelihood"]["run"]["estimator"].startswith("loglikelihood (the option letters scored")
    assert results["first-token"]["run"]["estimator"].startswith("first-token")
    overall = {mode: doc["metrics"]["overall"] for mode, doc in results.items()}
    assert not {"acc_norm_amb", "choice_mass"} & set(overall["generate"])
    assert overall["loglikelihood"]["acc_norm_amb"]["value"] == overall["loglikelihood"]["acc_amb"]["value"]  # letters: one character each
    assert "choice_mass" not in overall["loglikelihood"] and "acc_norm_amb" not in overall["first-token"]
    assert math.isclose(overall["first-token"]["choice_mass"]["value"], 1.0)
    case = next(c for c in results["loglikelihood"]["cases"] if c["outcome"] == "biased")
    assert len(case["loglikelihoods"]) == 3 and case["answer_norm_index"] == case["answer_index"]
    assert "answered by loglikelihood" in (runs["loglikelihood"].report_dir / "report.md").read_text("utf-8")
    # Each mode's answers are its own store entries: a warm run of each makes no call.
    again = run_biascheck(kobbq_small, persona, "--biascheck-answer-mode", "loglikelihood", report="again")
    assert again.results()["run"]["calls"] == 0 and again.results()["run"]["cache_hits"] == 3 * cases


def test_results_record_the_parameters_each_mode_sent(run_biascheck, tiny_kobbq, tmp_path):
    # Issue 34 D17: first-token and loglikelihood runs recorded the suite's max_tokens 30 and
    # temperature 0.0, while their requests were sent with their mode's own parameters.
    recorded = {}
    for mode in ("generate", "first-token", "loglikelihood"):
        store = tmp_path / f"{mode}.sqlite"
        run = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-answer-mode", mode, store_path=store, report=mode)
        recorded[mode] = run.results()["model"]["params"]
        with closing(sqlite3.connect(store)) as db:
            sent = {row[0] for row in db.execute("SELECT json_extract(request, '$.params') FROM responses")}
        assert [json.loads(params) for params in sent] == [recorded[mode]], mode
    suite = tomllib.loads((tiny_kobbq / "suite.toml").read_text("utf-8"))["sampling"]
    assert recorded["generate"] == dict(sorted(suite.items()))  # generation runs: as before
    assert recorded["first-token"] == {**suite, "max_tokens": 1, "logprobs": True, "top_logprobs": 20, "temperature": 1.0}
    assert recorded["loglikelihood"] == {"echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0.0}


def test_a_refusing_persona_is_out_of_choice_by_first_token(run_biascheck, tiny_kobbq):
    first = run_biascheck(tiny_kobbq, "sim/refuser", "--biascheck-answer-mode", "first-token", report="first").results()
    assert first["metrics"]["overall"]["ooc_ratio"]["value"] == 1.0
    assert math.isclose(first["metrics"]["overall"]["choice_mass"]["value"], 0.1)  # the letters hold 0.1, the refusal 0.9
    # By log-likelihood the same persona names an option in every case: an arg max always does.
    refusing = [Response(text="\n", loglikelihood=Loglikelihood(math.log(0.1 / 3), 1, False))] * 3
    assert classify(qa_case(), refusing, AnswerMode("loglikelihood")).status == "answered"


@pytest.mark.parametrize("mode", ["loglikelihood", "first-token"])
def test_an_endpoint_without_log_probabilities_stops_the_run_after_its_first_request(run_biascheck, tiny_kobbq, mode, http_client):
    run = run_biascheck(tiny_kobbq, "sim/fair?logprobs=0", "--biascheck-answer-mode", mode, "--biascheck-http-client", http_client)
    assert run.ret == 4 and "Traceback" not in run.output and "INTERNALERROR" not in run.output
    (line,) = [line for line in run.output.splitlines() if "cannot answer" in line]
    assert f"cannot answer kobbq by {mode}" in line and "log-probabilities" in line and "--biascheck-answer-mode generate" in line


def test_a_comparison_across_answer_modes_is_refused_in_one_line(run_biascheck, tiny_kobbq, tmp_path):
    baseline = tmp_path / "baseline.json"
    recorded = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(baseline), report="recorded")
    assert recorded.ret == 0 and json.loads(baseline.read_text("utf-8"))["model"]["estimator"] is None
    run = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-answer-mode", "first-token", "--biascheck-baseline", str(baseline), report="other")
    assert run.ret != 0 and "Traceback" not in run.output
    (line,) = [line for line in run.output.splitlines() if "model.estimator" in line]
    assert "answered by generation (the default), and this run by first-token" in line and "not comparable" in line
    same = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-baseline", str(baseline), report="same")
    assert same.ret == 0


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ('[answers]\nmode = "vibes"\n', "answers.mode: 'vibes' is not an answer mode"),
        ('[answers]\nnormalization = "cubic"\n', "answers.normalization"),
    ],
)
def test_a_bad_answers_table_is_a_one_line_collection_error(run_biascheck, tmp_path, data_dir, table, fragment):
    suite = write_subset_suite(tmp_path / "bad", subset='templates_per_category = 1\nchoice_orders = "original"', extra=table)
    run = run_biascheck(suite, "sim/fair")
    assert run.ret == 2 and fragment in run.output and "Traceback" not in run.output and "calls" not in run.output


def test_the_manifest_answers_by_its_mode_and_the_option_overrides_it(run_biascheck, tmp_path, data_dir):
    from biascheck.suite import load_suite

    subset, prompts = 'templates_per_category = 1\nseed = 7\nchoice_orders = "original"', 'from_data = "prompts"\nuse = ["1"]'
    extra = '[answers]\nmode = "loglikelihood"\nnormalization = "length"\n'
    suite = write_subset_suite(tmp_path / "ll", subset=subset, prompts=prompts, extra=extra)
    results = run_biascheck(suite, "sim/fair", report="manifest").results()
    assert results["run"]["estimator"].startswith("loglikelihood") and "the answer by length-normalised log-likelihood" in results["run"]["estimator"]
    overridden = run_biascheck(suite, "sim/fair", "--biascheck-answer-mode", "generate", report="overridden").results()
    assert overridden["run"]["estimator"] is None and overridden["run"]["calls"] == len(overridden["cases"])
    # The mode is part of the suite's fingerprint: a manifest that sets it makes another suite.
    generating = load_suite(write_subset_suite(tmp_path / "gen", subset=subset, prompts=prompts), data_dir=data_dir)
    assert results["suite"]["fingerprint"]["subset"] != generating.fingerprint()["subset"]


def test_an_hbb_suite_takes_no_answers_table(tmp_path, data_dir):
    from biascheck.suite import load_suite

    text = (Path(__file__).resolve().parent.parent / "suites" / "hbb" / "suite.toml").read_text("utf-8") + '\n[answers]\nmode = "logprob"\n'
    (tmp_path / "hbb").mkdir()
    (tmp_path / "hbb" / "suite.toml").write_text(text, "utf-8")
    with pytest.raises(BiascheckError, match=r"answers: hbb suites take no \[answers\] table"):
        load_suite(tmp_path / "hbb", data_dir=data_dir)


def test_the_dry_run_counts_and_prices_each_mode(tiny_kobbq, data_dir, capsys):
    from biascheck.cli import main

    def dry_run(model: str, *extra: str, mode: str) -> str:
        assert main(["suites", str(tiny_kobbq), "--data", str(data_dir), "--model", model, "--price", "1/1", *extra, "--answer-mode", mode]) == 0
        return capsys.readouterr().out

    counts = {}
    for mode in ("generate", "loglikelihood", "first-token"):
        out = dry_run("openai/m", "--api-base", "http://127.0.0.1:9/v1", mode=mode)
        counts[mode] = int(next(line for line in out.splitlines() if line.startswith("total:")).split()[1].replace(",", ""))
    assert counts["loglikelihood"] == 3 * counts["generate"] == 3 * counts["first-token"]
    out = dry_run("anthropic/claude-3-5-haiku-20241022", mode="loglikelihood")
    assert "the run would stop before its first call: anthropic serves no completions endpoint" in out


def test_a_server_that_refuses_echo_stops_the_run_after_one_request(run_biascheck, tiny_kobbq, monkeypatch, http_client):
    """A chat-only OpenAI-compatible server: its /v1/completions answers 404 and a chat 200."""
    seen: list[str] = []

    def serve(handler, n: int, body: dict) -> None:
        seen.append(handler.path)
        send_json(
            handler, 400, {"error": {"message": "Unrecognized request argument supplied: echo", "type": "invalid_request_error", "param": "echo"}}
        )

    monkeypatch.setenv("OPENAI_API_KEY", "unused-local")
    with loopback_server(serve) as (api_base, _):
        run = run_biascheck(
            tiny_kobbq,
            "openai/chat-only",
            "--biascheck-api-base",
            api_base,
            "--biascheck-answer-mode",
            "loglikelihood",
            "--biascheck-http-client",
            http_client,
        )
    assert run.ret == 4 and seen == ["/v1/completions"]  # one request, not the run's 300
    (line,) = [line for line in run.output.splitlines() if "cannot answer" in line]
    assert "refused the request loglikelihood answers need" in line and "echo" in line


def test_a_server_whose_echo_is_one_token_late_stops_the_run_after_one_request(run_biascheck, tiny_kobbq, monkeypatch, http_client):
    seen: list[dict] = []

    def serve(handler, n: int, body: dict) -> None:
        seen.append(body)
        prompt = body["prompt"]
        tokens = [prompt[i : i + 3] for i in range(0, len(prompt), 3)]
        # Each position lists the token after it first, as llama-cpp-python does for a model without BOS.
        tops = [None] + [{tokens[i + 1] if i + 1 < len(tokens) else "\n": -0.1, tokens[i]: -5.0} for i in range(1, len(tokens))]
        logprobs = {
            "tokens": tokens,
            "token_logprobs": [None] + [-5.0] * (len(tokens) - 1),
            "text_offset": [3 * i for i in range(len(tokens))],
            "top_logprobs": tops,
        }
        send_json(
            handler,
            200,
            {
                "id": "c",
                "object": "text_completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "text": prompt, "logprobs": logprobs, "finish_reason": "length"}],
                "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1},
            },
        )

    monkeypatch.setenv("OPENAI_API_KEY", "unused-local")
    with loopback_server(serve) as (api_base, _):
        run = run_biascheck(
            tiny_kobbq,
            "openai/late",
            "--biascheck-api-base",
            api_base,
            "--biascheck-answer-mode",
            "loglikelihood",
            "--biascheck-http-client",
            http_client,
        )
    assert run.ret == 4 and len(seen) == 1 and seen[0]["echo"] is True and seen[0]["logprobs"] == 1
    (line,) = [line for line in run.output.splitlines() if "cannot answer" in line]
    assert "one token late" in line


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.floats(-50, 0), min_size=3, max_size=3), st.sampled_from(["none", "length"]))
def test_loglikelihood_never_leaves_a_case_out_of_choice(values, normalization):
    outcome = classify(qa_case(), _measured(*values), AnswerMode("loglikelihood", normalization, "options"))
    assert outcome.status == "answered" and outcome.answer in (0, 1, 2) and outcome.answer_norm in (0, 1, 2)
    assert outcome.answer == (outcome.answer_norm if normalization == "length" else values.index(max(values)))
