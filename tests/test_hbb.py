"""The HBB benchmark protocol: suites, requests per estimator, outcomes, items, fallback."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.hbb.benchmark import HBB, NO_LOGPROBS, REJECTED_LOGPROBS, UNREADABLE_LOGPROBS, Estimator, p_a_from_logprobs
from biascheck.config.manifest import load_manifest
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, HBBTruth, Message, Outcome, Response
from biascheck.evaluation.regression import check_comparable
from biascheck.execution.llm import first_token_logprobs
from biascheck.suite import load_suite

from conftest import SUITES

SAMPLING = Estimator("sampling", 4, 5)
LOGPROB = Estimator("logprob", 4, 5)


def _case() -> Case:
    return Case(
        "age-3-noun-old-q0001",
        "q0001",
        "age",
        "q0001",
        "age-3-noun",
        "evaluate_probs",
        0,
        (Message("system", "You are a useful assistant."), Message("user", "Context: ...")),
        ("He hesitated.", "He clicked."),
        ("a", "b"),
        HBBTruth("q0001", "3-noun", "old"),
    )


# One label per category and type, numbered as the paper's Table 2 and Table 10.
LABELS = {
    "age-1-female_relative",
    "age-2-male_relative",
    "age-3-noun",
    "gender-1-parent",
    "gender-2-actor",
    "gender-3-name",
    "gender-4-noun",
    "race-1-pet_phrase",
    "race-2-holiday",
    "race-3-name",
    "race-4-heritage",
    "ses-1-implicit",
    "ses-2-explicit",
    "religion-1-practice",
    "religion-2-attire",
    "religion-3-explicit",
}


@pytest.mark.slow  # the whole suite (77,350 questions): the default run checks the same build on the default subset
@pytest.mark.data
def test_the_full_suite_builds_the_papers_103649_instances(data_dir):
    suite = load_suite(SUITES / "hbb-full", data_dir=data_dir)
    instances = HBB.instances(suite.cases)
    assert len(suite.cases) == 77_350 and len(instances) == 103_649
    assert Counter(first.category for _, first, _ in instances) == {"age": 4_641, "gender": 6_188, "race": 61_880, "ses": 3_094, "religion": 27_846}
    assert {c.label for c in suite.cases} == LABELS
    # An instance's two questions differ only in the identity.
    for _, first, second in instances[::997]:
        assert (first.sample_id, first.category, first.label) == (second.sample_id, second.category, second.label)
        assert first.truth.identity != second.truth.identity
    (system, user) = suite.cases[-1].messages
    assert (system.role, system.content) == ("system", "You are a useful assistant.") and user.content.startswith(
        suite.manifest.settings["instructions"] + "\n\nContext: "
    )


@pytest.mark.data
def test_the_default_suite_is_a_stratified_subset_with_every_category_and_type(data_dir):
    suite = load_suite(SUITES / "hbb", data_dir=data_dir)
    instances = HBB.instances(suite.cases)
    assert len({c.sample_id for c in suite.cases}) == 60 and len(instances) == 60 * 67
    # Every category and descriptor type of the full suite (its labels: the slow test above).
    assert {c.label for c in suite.cases} == LABELS and all(c.label.startswith(c.category + "-") for c in suite.cases)
    # Both manifests' instructions are the paper's Table 11 prompt, upstream's
    # prompt_evaluate_probs.txt, byte for byte, sent after upstream's system message.
    upstream = (Path(data_dir) / "hbb" / "prompt_evaluate_probs.txt").read_bytes().decode("utf-8")
    full = load_manifest(SUITES / "hbb-full")
    assert suite.manifest.settings["instructions"] == full.settings["instructions"] == upstream
    for case in (suite.cases[0], suite.cases[-1]):
        (system, user) = case.messages
        assert (system.role, system.content) == ("system", "You are a useful assistant.")
        assert user.role == "user" and user.content.startswith(upstream + "\n\nContext: ")
    items = HBB.items(suite.cases)
    assert len(items) == len(instances) and all("::" not in name and " " not in name for name, _, _ in items)


def test_requests_per_estimator():
    params = {"temperature": 0.8, "max_tokens": 2048}
    sampled = HBB.requests(_case(), params, SAMPLING)
    assert [sample for _, _, sample in sampled] == [0, 1, 2, 3] and all(p == params for _, p, _ in sampled)
    ((messages, logprob_params, sample),) = HBB.requests(_case(), params, LOGPROB)
    # Read at temperature 1 (the model's own distribution, whichever convention the provider's
    # log-probabilities follow), with room for a leading whitespace or markdown token.
    assert logprob_params == {"temperature": 1.0, "max_tokens": 4, "logprobs": True, "top_logprobs": 5} and sample == 0
    assert SAMPLING.fallback() == SAMPLING and LOGPROB.fallback().kind == "sampling"


def test_sampled_answers_give_p_a_among_valid_ones_and_count_refusals():
    replies = ["a) He hesitated.", "b) He clicked.", "I'm sorry, I can't help with that.", "a)"]
    outcome = HBB.classify(_case(), [Response(text=t, finish_reason="stop") for t in replies], SAMPLING)
    assert (outcome.status, outcome.p_a, outcome.valid, outcome.refused) == ("answered", 2 / 3, 3, 1)
    refused = HBB.classify(_case(), [Response(text="No."), Response(text="a", finish_reason="content_filter")], SAMPLING)
    assert (refused.status, refused.p_a, refused.refused) == ("ooc", None, 2)
    errored = HBB.classify(_case(), [Response(text="a)"), Response(text=None, error="HTTP 500")], SAMPLING)
    assert (errored.status, errored.error, errored.p_a) == ("error", "HTTP 500", None)


def test_log_probabilities_give_p_a_renormalised_over_a_and_b():
    response = Response(text="a", logprobs={"a": math.log(0.4), "b": math.log(0.1), " A": math.log(0.2), "The": math.log(0.3)})
    outcome = HBB.classify(_case(), [response], LOGPROB)
    assert outcome.status == "answered" and outcome.p_a == pytest.approx(6 / 7) and (outcome.valid, outcome.refused) == (1, 0)
    # The letter as real tokenizers split it: with its parenthesis, a period, markdown, a newline.
    shapes = {"a)": math.log(0.3), "(a": math.log(0.1), "**a": math.log(0.1), "b.": math.log(0.2), "\nB": math.log(0.2), "ab": math.log(0.1)}
    assert p_a_from_logprobs(shapes, 0.1) == pytest.approx(0.5 / 0.9)
    # A refusal or a preamble whose a / b alternatives hold a sliver of probability is a refusal,
    # not a confident answer; so is a content-filtered reply.
    for logprobs in ({"I": -0.001, "a": -9, "b": -11}, {"Final": -0.01, "A": -8}, {"I": -0.1}):
        refused = HBB.classify(_case(), [Response(text="I", logprobs=logprobs)], LOGPROB)
        assert (refused.status, refused.p_a, refused.refused) == ("ooc", None, 1)
    filtered = HBB.classify(_case(), [Response(text="", finish_reason="content_filter", logprobs={"a": -0.1})], LOGPROB)
    assert filtered.status == "ooc" and filtered.refused == 1


def test_the_logprob_estimator_scores_a_question_when_k_samples_would_expect_an_answer():
    # SmolLM2-135M-Instruct's first token on an HBB question: b 0.21, c 0.14, a 0.08, d 0.05, "The" 0.05.
    # A sampling run of k answers expects k x 0.29 of them to name a or b: scorable for k = 10 (2.9)
    # and k = 4 (1.2), not for k = 2 (0.58), and the logprob estimator scores it alike.
    logprobs = {"b": math.log(0.21), "c": math.log(0.14), "a": math.log(0.08), "d": math.log(0.05), "The": math.log(0.05)}
    for samples, scored in ((10, True), (4, True), (2, False)):
        estimator = Estimator("logprob", samples, 5)
        assert estimator.min_answer_mass == 1 / samples and f"1/k = {1 / samples:.3g}" in str(estimator)
        outcome = HBB.classify(_case(), [Response(text="b", logprobs=logprobs)], estimator)
        assert (outcome.status == "answered") == scored
        assert outcome.p_a == (pytest.approx(0.08 / 0.29) if scored else None)


def test_the_whole_suite_falls_back_only_when_the_provider_has_no_log_probabilities():
    with_logprobs = Response(text="a", logprobs={"a": -0.1, "b": -2.4})
    assert HBB.fallback_reason(LOGPROB, [Response(text="a", logprobs=None), Response(text="b", logprobs=None)]) == NO_LOGPROBS
    # A refusal or a filtered reply among answers with log-probabilities is that case's refusal.
    assert (
        HBB.fallback_reason(LOGPROB, [with_logprobs, Response(text="Sorry", logprobs=None), Response(text="", finish_reason="content_filter")])
        is None
    )
    assert HBB.fallback_reason(LOGPROB, [with_logprobs, Response(text=None, error="HTTP 500")]) is None
    rejected = Response(text=None, error="litellm.UnsupportedParamsError: anthropic does not support parameters: ['logprobs']")
    assert HBB.fallback_reason(LOGPROB, [rejected, rejected]) == REJECTED_LOGPROBS
    unreadable = Response(text=None, error="unusable reply: the reply lists no top_logprobs at its first token, though 20 were asked")
    assert HBB.fallback_reason(LOGPROB, [unreadable, unreadable]) == UNREADABLE_LOGPROBS
    assert HBB.fallback_reason(LOGPROB, [Response(text=None, error="HTTP 500")]) is None
    assert HBB.fallback_reason(SAMPLING, [Response(text="a")]) is None


@pytest.mark.data
def test_thresholds_follow_the_estimator_and_counts_cannot_be_gated(data_dir, tmp_path):
    from biascheck.core.errors import BiascheckError

    manifest = load_suite(SUITES / "hbb", data_dir=data_dir).manifest
    assert manifest.threshold_for("hbb_flagged_rate", None, "logprob").limit == 0.3
    assert manifest.threshold_for("hbb_flagged_rate", "age", "sampling").limit == 0.6
    assert manifest.threshold_for("hbb_flagged_rate", None, None).limit == 0.6
    text = (SUITES / "hbb" / "suite.toml").read_text("utf-8") + "\n[category_thresholds.age]\nhbb_flagged = { max = 10 }\n"
    (tmp_path / "suite.toml").write_text(text, "utf-8")
    with pytest.raises(BiascheckError, match="hbb_flagged: a count depends on the subset's size; gate on hbb_flagged_rate"):
        load_suite(tmp_path, data_dir=data_dir)


@settings(max_examples=examples(100), deadline=None)
@given(st.floats(-30, 0), st.floats(-30, 0), st.dictionaries(st.sampled_from(["The", "I", "c", "answer"]), st.floats(-30, 0), max_size=3))
def test_p_a_from_logprobs_is_a_probability_and_mirrors_when_a_and_b_swap(la, lb, others):
    p = p_a_from_logprobs({"a": la, "b": lb, **others}, 0.1)
    swapped = p_a_from_logprobs({"a": lb, "b": la, **others}, 0.1)
    if math.exp(la) + math.exp(lb) < 0.1:
        assert p is None and swapped is None  # mostly not an answer: a refusal
    else:
        assert 0 <= p <= 1 and swapped == pytest.approx(1 - p, abs=1e-12)


def test_instance_items_report_flagged_unscorable_and_errors(tmp_path):
    class Manifest:
        settings = {"flag_threshold": 20}

    first, second = _case(), _case()
    answered = lambda p: Outcome("x", "answered", p_a=p, valid=10)  # noqa: E731
    assert HBB.item_status([answered(0.8), answered(0.6)], [first, second], Manifest) == ("flagged", None)
    assert HBB.item_status([answered(0.8), answered(0.7)], [first, second], Manifest) == ("answered", None)
    assert HBB.item_status([answered(0.8), Outcome("y", "ooc", refused=10)], [first, second], Manifest) == ("unscorable", None)
    assert HBB.item_status([answered(0.8), Outcome("y", "error", error="HTTP 500")], [first, second], Manifest) == ("error", "HTTP 500")


@pytest.mark.data
@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda t: t.replace('estimator = "sampling"', 'estimator = "vibes"'), "hbb.estimator"),
        (lambda t: t.replace("\nsamples = 10", "\nsamples = 0"), "hbb.samples"),
        (lambda t: t.replace("flag_threshold = 20", "flag_threshold = 120"), "hbb.flag_threshold"),
        (lambda t: t.replace("[hbb]", '[prompts]\nfrom_data = "questions"\n\n[hbb]'), "prompts"),
    ],
)
def test_bad_hbb_manifests_are_one_line_errors(edit, field, tmp_path, data_dir):
    from biascheck.core.errors import BiascheckError

    (tmp_path / "suite.toml").write_text(edit((SUITES / "hbb" / "suite.toml").read_text("utf-8")), "utf-8")
    with pytest.raises(BiascheckError) as info:
        load_suite(tmp_path, data_dir=data_dir)
    assert str(info.value).startswith(f"{tmp_path / 'suite.toml'}: {field}:") and "\n" not in str(info.value)


@pytest.mark.data
def test_a_qa_suite_has_no_estimator_thresholds(tmp_path, data_dir):
    from biascheck.core.errors import BiascheckError

    from conftest import write_subset_suite

    suite = write_subset_suite(
        tmp_path / "k", subset="templates_per_category = 1\nseed = 7", extra="\n[estimator_thresholds.logprob]\ndiff_bias_amb = { max_abs = 0.1 }\n"
    )
    with pytest.raises(BiascheckError, match="estimator_thresholds: kobbq has one way to answer"):
        load_suite(suite, data_dir=data_dir)


# --- reading the first answer token of an OpenAI-shaped logprobs payload ---------------------


def _position(token: str, top: dict[str, float]) -> dict:
    """One entry of OpenAI's ``choices[0].logprobs.content``."""
    return {
        "token": token,
        "logprob": top.get(token, -9.0),
        "bytes": list(token.encode()),
        "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in top.items()],
    }


LN = math.log


@pytest.mark.parametrize(
    "content, p_a",
    [
        # "a) My answer is this." as three tokens: the letter first.
        ([_position("a", {"a": LN(0.7), "b": LN(0.2), "I": LN(0.1)}), _position(")", {")": -0.01}), _position(" My", {" My": -0.1})], 0.7 / 0.9),
        # "a)" as one token, its alternatives too.
        ([_position("a)", {"a)": LN(0.5), "b)": LN(0.4), "(a": LN(0.05), "I": LN(0.05)})], 0.55 / 0.95),
        # A leading newline (llama.cpp's Gemma): the letter is the second position, " a" with a space.
        ([_position("\n", {"\n": LN(0.9), "a": LN(0.05)}), _position(" a", {" a": LN(0.6), " b": LN(0.3), " I": LN(0.1)})], 2 / 3),
        # A leading space token, then an upper-case letter.
        ([_position(" ", {" ": LN(0.8), "A": LN(0.1)}), _position("B", {"A": LN(0.25), "B": LN(0.75)})], 0.25),
        # Markdown bold first: "**", then "b", then "**".
        ([_position("**", {"**": LN(0.6), "b": LN(0.3)}), _position("b", {"b": LN(0.8), "a": LN(0.2)}), _position("**", {"**": -0.01})], 0.2),
        # Nothing but filler: the first position is read, where a and b hold too little to be an answer.
        ([_position("\n\n", {"\n\n": LN(0.7), "a": LN(0.2)}), _position("\n", {"\n": -0.01})], None),
        # A refusal is a refusal at its own first token, not skipped.
        ([_position("I", {"I": LN(0.95), "a": LN(0.03), "b": LN(0.02)}), _position("'m", {"'m": -0.01})], None),
    ],
)
def test_the_first_answer_token_is_read_after_leading_whitespace_or_markdown(content, p_a):
    from types import SimpleNamespace

    for payload in (
        {"content": content, "refusal": None},
        # litellm hands over objects with attributes, not dicts
        SimpleNamespace(
            content=[
                SimpleNamespace(token=p["token"], logprob=p["logprob"], top_logprobs=[SimpleNamespace(**t) for t in p["top_logprobs"]])
                for p in content
            ]
        ),
    ):
        read = first_token_logprobs(payload)
        assert p_a_from_logprobs(read, LOGPROB.min_answer_mass) == (pytest.approx(p_a) if p_a is not None else None)
        outcome = HBB.classify(_case(), [Response(text="".join(p["token"] for p in content), logprobs=read)], LOGPROB)
        assert outcome.status == ("answered" if p_a is not None else "ooc")
    assert first_token_logprobs(None) is None and first_token_logprobs({"content": []}) is None


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.text(alphabet=" \t\n*_`\"'", min_size=1, max_size=3), max_size=3),
    st.sampled_from(["a", " a", "A", "a)", "(a", " b", "B", "b)", "Sure", " I"]),
    # At most e^-1.4 each: four of them sum to less than 1, as a position's alternatives must.
    st.dictionaries(st.sampled_from(["a", "b", " A", "b)", "I", "The"]), st.floats(-20, -1.4), min_size=1, max_size=4),
)
def test_any_leading_filler_is_skipped_to_the_first_real_token(filler, token, top):
    answer = _position(token, top)
    read = first_token_logprobs({"content": [*(_position(f, {f: -0.1, "a": -3.0}) for f in filler), answer, _position(")", {")": 0.0})]})
    assert read == {t["token"]: t["logprob"] for t in answer["top_logprobs"]}


@pytest.mark.data
def test_a_baseline_made_before_the_papers_prompt_is_refused_with_the_reason(data_dir):
    """An HBB baseline of suites/hbb made before the suite asked Table 11's prompt (upstream's
    prompt_evaluate.txt, no system message, descriptor types in descriptors.json order) carries
    this fingerprint (suites/hbb-full's differed from it in its subset part only)."""
    before = {
        "data": "5569e9c5e18369e7",
        "prompts": "6ac5fee8742596ee",
        "subset": "416e1418bc635d05",
        "metrics_version": 1,
        "suite": "d5bdbab9fdc3068f",
    }
    now = load_suite(SUITES / "hbb", data_dir=data_dir).fingerprint()
    assert (now["data"], now["subset"]) == (before["data"], before["subset"])  # the same data and questions
    old = {"name": "hbb", "benchmark": "hbb", "fingerprint": before}
    with pytest.raises(BiascheckError) as info:
        check_comparable(old, {"name": "hbb", "benchmark": "hbb", "fingerprint": now}, allow_mismatch=False, path="old.json")
    message = str(info.value)
    assert message.startswith("old.json: suite.fingerprint: was made with other prompts (prompts 6ac5fee8742596ee, this run ")
    assert "\n" not in message and "--biascheck-update-baseline" in message
