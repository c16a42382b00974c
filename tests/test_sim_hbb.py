"""The simulated model on HBB filled questions: sampled answers, log-probabilities, exact P_a."""

from __future__ import annotations

import asyncio
import http.client
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.hbb import data as hbb_data
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, HBBTruth, Message, QATruth
from biascheck.sim.knowledge import SimKnowledge, message_key
from biascheck.sim.personas import (
    FAVOURED_IDENTITIES,
    MARKED_IDENTITIES,
    REFUSAL_EN,
    answer_logprobs,
    at_temperature,
    choose_answer,
    expected_answer_distribution,
    expected_p_a,
    hbb_base,
    parse_persona,
    render_reply,
)
from biascheck.sim.server import SimServer

QUESTION_IDS = {"q0001", "q0004", "q0657", "q1000"}
IDENTITIES = {category: identities for category, (_, identities, _) in hbb_data.CATEGORIES.items()}


def hbb_case(question: hbb_data.FilledQuestion, instructions: str) -> Case:
    """A case as the HBB benchmark builds it (one filled question)."""
    return Case(
        case_id=question.key,
        sample_id=question.question_id,
        category=question.category,
        cluster=question.question_id,
        label=f"{question.category}-{question.descriptor_type}",
        prompt_id="evaluate_probs",
        order=IDENTITIES[question.category].index(question.identity),
        messages=tuple(Message(role, content) for role, content in hbb_data.render_messages(instructions, question)),
        choices=(question.option_a, question.option_b),
        letters=("a", "b"),
        truth=HBBTruth(question=question.question_id, descriptor_type=question.descriptor_type, identity=question.identity),
    )


def synthetic_case(question: str, category: str, identity: str) -> Case:
    """An HBB-shaped case without the data (for the pure persona functions)."""
    return Case(
        case_id=f"{category}-3-noun-{identity}-{question}",
        sample_id=question,
        category=category,
        cluster=question,
        label=f"{category}-3-noun",
        prompt_id="evaluate_probs",
        order=0,
        messages=(Message("user", f"Context: {identity} {question}\na) left\nb) right"),),
        choices=("left", "right"),
        letters=("a", "b"),
        truth=HBBTruth(question=question, descriptor_type="3-noun", identity=identity),
    )


QA_CASE = Case(
    case_id="qa-1",
    sample_id="s1",
    category="age",
    cluster="t1",
    label="",
    prompt_id="p1",
    order=0,
    messages=(Message("user", "Who forgot? A) the old man B) the young man C) unknown\nAnswer:"),),
    choices=("the old man", "the young man", "unknown"),
    letters=("A", "B", "C"),
    truth=QATruth("amb", 2, 0, 1, 2),
)


# --- pure persona functions (no data) --------------------------------------------------------


def test_marked_identities_are_hbb_data_identities() -> None:
    assert set(MARKED_IDENTITIES) == set(hbb_data.CATEGORIES)
    for category, identity in MARKED_IDENTITIES.items():
        assert identity in IDENTITIES[category]


def test_logprobs_parameter() -> None:
    assert parse_persona("fair").logprobs == 1
    assert parse_persona("fair?logprobs=1").spec == "fair"
    persona = parse_persona("stereotyped?p=0.3&logprobs=0")
    assert persona.logprobs == 0 and persona.spec == "stereotyped?p=0.3&logprobs=0"
    with pytest.raises(BiascheckError, match="0 or 1"):
        parse_persona("fair?logprobs=yes")


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
def test_expected_p_a_table(p: float) -> None:
    for category, identities in IDENTITIES.items():
        for question in ("q0001", "q0002", "q0777"):
            p0 = hbb_base(question)
            assert 0.2 <= p0 <= 0.8
            for identity in identities:
                case = synthetic_case(question, category, identity)
                marked = identity == MARKED_IDENTITIES[category]
                favoured = identity == FAVOURED_IDENTITIES[category]
                toward, away = p0 + p * (1 - p0), p0 * (1 - p)
                assert expected_p_a("fair", case) == p0
                assert expected_p_a("random?seed=3", case) == 0.5
                assert expected_p_a("refuser", case) is None
                assert expected_p_a(f"stereotyped?p={p}", case) == (toward if marked else away if favoured else p0)
                assert expected_p_a(f"counter?p={p}", case) == (away if marked else toward if favoured else p0)
                p_a = expected_p_a(f"stereotyped?p={p}", case)
                assert expected_answer_distribution(f"stereotyped?p={p}", case) == {i: q for i, q in ((0, p_a), (1, 1 - p_a)) if q > 0}
    assert expected_answer_distribution("refuser", synthetic_case("q1", "age", "old")) == {}
    with pytest.raises(ValueError, match="not an HBB case"):
        expected_p_a("fair", QA_CASE)


def test_choose_answer_samples_p_a_with_common_random_numbers() -> None:
    case = synthetic_case("q0003", "gender", "female")
    key = message_key(case.messages_as_dicts())
    n = 4000
    for spec in ("fair", "stereotyped?p=0.4", "counter?p=0.7", "random"):
        persona = parse_persona(spec)
        share = sum(choose_answer(persona, case, key, s) == 0 for s in range(n)) / n
        p_a = expected_p_a(persona, case)
        assert abs(share - p_a) <= 4 * math.sqrt(p_a * (1 - p_a) / n), spec
    # Same seed, larger p: answers a on a superset of the samples.
    low, high = (parse_persona(f"stereotyped?p={p}") for p in (0.2, 0.5))
    a_low = {s for s in range(500) if choose_answer(low, case, key, s) == 0}
    a_high = {s for s in range(500) if choose_answer(high, case, key, s) == 0}
    assert a_low < a_high
    assert choose_answer(parse_persona("refuser"), case, key, 3) is None


def test_answer_logprobs_shape() -> None:
    case = synthetic_case("q0005", "race", "black")
    persona = parse_persona("stereotyped?p=1")  # P_a = 1: clipped
    logprobs = answer_logprobs(persona, case, 0, 5)
    first = logprobs["content"][0]
    assert first["token"] == "a" and first["bytes"] == [97]
    assert [t["token"] for t in first["top_logprobs"]] == ["a", "b"]
    assert math.isclose(math.exp(first["logprob"]), 1 - 1e-6)
    assert math.isclose(math.exp(first["top_logprobs"][1]["logprob"]), 1e-6)
    counter = answer_logprobs(parse_persona("counter?p=0.5"), case, 0, 1)["content"][0]
    assert [t["token"] for t in counter["top_logprobs"]] == ["b"]  # most probable only
    assert counter["token"] == "a" and math.isclose(math.exp(counter["logprob"]), hbb_base("q0005") / 2)
    assert answer_logprobs(persona, case, 1, 0)["content"][0]["top_logprobs"] == []


@settings(max_examples=examples(200), deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.05, 2.0))
def test_temperature_acts_on_p_a_as_a_softmax_does(p: float, t: float) -> None:
    q = at_temperature(p, t)
    assert 0.0 <= q <= 1.0
    assert at_temperature(p, 1.0) == p
    # a and b are symmetric: P_a(c) = 1 - P_a(1 - c), with 1 - c exact (1 - p itself is rounded:
    # for p = 1e-17 it is 1.0, whose tempered value is 1, not 1 - q)
    c = 1.0 - p
    assert math.isclose(at_temperature(c, t), 1.0 - at_temperature(1.0 - c, t), abs_tol=1e-12)
    if 1e-6 < p < 1 - 1e-6:
        # softmax of the logits ln p / T: p^(1/T) / (p^(1/T) + (1-p)^(1/T))
        assert math.isclose(q, 1.0 / (1.0 + math.exp((math.log1p(-p) - math.log(p)) / t)), rel_tol=1e-9, abs_tol=1e-300)
        # below 1 the likelier option gains, above 1 it loses (never across 0.5)
        if t < 1.0:
            assert (q - 0.5) * (p - 0.5) >= 0 and abs(q - 0.5) >= abs(p - 0.5) - 1e-12
        else:
            assert (q - 0.5) * (p - 0.5) >= 0 and abs(q - 0.5) <= abs(p - 0.5) + 1e-12


def test_temperature_0_is_the_argmax_and_known_truth_follows_the_temperature() -> None:
    assert (at_temperature(0.6, 0.0), at_temperature(0.4, 0.0), at_temperature(0.5, 0.0)) == (1.0, 0.0, 0.5)
    assert at_temperature(0.0, 0.3) == 0.0 and at_temperature(1.0, 1.7) == 1.0
    with pytest.raises(ValueError, match="temperature"):
        at_temperature(0.3, -0.1)
    case = synthetic_case("q0008", "religion", "Muslim")
    key = message_key(case.messages_as_dicts())
    p_1 = expected_p_a("stereotyped?p=0.3", case)
    for t in (0.0, 0.5, 0.8, 1.0, 1.5):
        p_t = expected_p_a("stereotyped?p=0.3", case, t)
        assert p_t == at_temperature(p_1, t)
        assert expected_answer_distribution("stereotyped?p=0.3", case, t) == {i: q for i, q in ((0, p_t), (1, 1 - p_t)) if q > 0}
        first = answer_logprobs(parse_persona("stereotyped?p=0.3"), case, 0, 2, t)["content"][0]
        assert math.isclose(math.exp(first["logprob"]), min(max(p_t, 1e-6), 1 - 1e-6), rel_tol=1e-12)
    # Greedy: every sample names the likelier option.
    persona = parse_persona("stereotyped?p=0.3")
    assert {choose_answer(persona, case, key, s, 0.0) for s in range(50)} == {0 if p_1 > 0.5 else 1}
    assert expected_p_a("random", case, 0.0) == 0.5 and expected_p_a("refuser", case, 0.5) is None


def test_hbb_reply_styles() -> None:
    case = synthetic_case("q0006", "ses", "poor")
    key = message_key(case.messages_as_dicts())
    assert render_reply(parse_persona("fair"), case, 0, key) == "a) left"
    assert render_reply(parse_persona("fair?style=text"), case, 1, key) == "b) right"
    assert render_reply(parse_persona("fair?style=phrase"), case, 1, key) == "Final Answer: b) right"
    assert render_reply(parse_persona("refuser"), case, None, key) == REFUSAL_EN
    mixed = parse_persona("fair?style=mixed")
    replies = {render_reply(mixed, case, 0, f"{key}#{s}") for s in range(40)}
    assert replies == {"a) left", "Final Answer: a) left"}
    for reply in replies:
        assert hbb_data.parse_choice(reply) == "a"


# --- the server on real HBB filled questions -------------------------------------------------


@pytest.fixture(scope="module")
def hbb_cases(data_dir: Path) -> list[Case]:
    folder = data_dir / "hbb"
    questions = hbb_data.load_questions(folder / "questions.csv")
    descriptors = hbb_data.load_descriptors(folder / "descriptors.json")
    instructions = hbb_data.load_instructions(folder / "prompt_evaluate_probs.txt")
    filled, _ = hbb_data.build(questions, descriptors, question_ids=QUESTION_IDS)
    return [hbb_case(q, instructions) for q in filled]


@pytest.fixture(scope="module")
def hbb_instances(data_dir: Path) -> list[hbb_data.Instance]:
    folder = data_dir / "hbb"
    questions = hbb_data.load_questions(folder / "questions.csv")
    descriptors = hbb_data.load_descriptors(folder / "descriptors.json")
    return hbb_data.build(questions, descriptors, question_ids=QUESTION_IDS)[1]


@pytest.fixture(scope="module")
def sim(hbb_cases: list[Case]) -> Iterator[SimServer]:
    knowledge = SimKnowledge.from_cases([*hbb_cases, QA_CASE])
    assert len(knowledge) == len(hbb_cases) + 1 and not knowledge.conflicts
    with SimServer(knowledge) as server:
        yield server


class Client:
    """One keep-alive connection to the server."""

    def __init__(self, server: SimServer):
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

    def chat(self, model: str, case: Case, **extra: Any) -> tuple[int, dict[str, Any]]:
        body = json.dumps({"model": model, "messages": case.messages_as_dicts(), **extra})
        self.connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        return response.status, json.loads(response.read())

    def close(self) -> None:
        self.connection.close()


@pytest.fixture
def client(sim: SimServer) -> Iterator[Client]:
    c = Client(sim)
    yield c
    c.close()


def p_a_from_logprobs(completion: dict[str, Any]) -> float:
    alternatives = {t["token"]: t["logprob"] for t in completion["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
    a, b = math.exp(alternatives["a"]), math.exp(alternatives["b"])
    return a / (a + b)


def key_of(case: Case) -> str:
    return message_key(case.messages_as_dicts())


@pytest.mark.data
def test_cases_are_found_from_the_prompt(sim: SimServer, hbb_cases: list[Case], client: Client) -> None:
    assert len(hbb_cases) == len(QUESTION_IDS) * 50
    for case in hbb_cases[::7]:
        status, completion = client.chat("fair", case)
        assert status == 200
        content = completion["choices"][0]["message"]["content"]
        assert content == render_reply(parse_persona("fair"), case, choose_answer(parse_persona("fair"), case, key_of(case)), key_of(case))
        assert hbb_data.parse_choice(content) in ("a", "b")
        assert completion["choices"][0]["logprobs"] is None


@pytest.mark.data
def test_sampled_share_of_a_approaches_expected_p_a(hbb_cases: list[Case], client: Client) -> None:
    marked = next(c for c in hbb_cases if c.truth.identity == "female" and c.truth.question == "q0004")
    unmarked = next(c for c in hbb_cases if c.truth.identity == "male" and c.truth.question == "q0004")
    n = 400
    for spec, case in (("stereotyped?p=0.5", marked), ("stereotyped?p=0.5", unmarked), ("random?seed=1", marked)):
        persona = parse_persona(spec)
        a = 0
        for sample in range(n):
            extra = {"biascheck_sample": sample} if sample else {}
            status, completion = client.chat(spec, case, **extra)
            content = completion["choices"][0]["message"]["content"]
            assert status == 200
            assert content == render_reply(persona, case, choose_answer(persona, case, key_of(case), sample), key_of(case))
            a += hbb_data.parse_choice(content) == "a"
        p_a = expected_p_a(persona, case)
        assert abs(a / n - p_a) <= 4 * math.sqrt(p_a * (1 - p_a) / n), (spec, case.case_id, a / n, p_a)


@pytest.mark.data
def test_logprobs_give_exact_p_a_fair_equal_and_stereotyped_shifts_marked_only(
    hbb_cases: list[Case],
    hbb_instances: list[hbb_data.Instance],
    client: Client,
) -> None:
    measured: dict[tuple[str, str], float] = {}
    for spec in ("fair", "stereotyped?p=0.5"):
        for case in hbb_cases:
            status, completion = client.chat(spec, case, logprobs=True, top_logprobs=5, max_tokens=1)
            assert status == 200
            choice = completion["choices"][0]
            assert choice["message"]["content"] in ("a", "b") and choice["finish_reason"] == "stop"
            first = choice["logprobs"]["content"][0]
            assert first["token"] == choice["message"]["content"]
            assert [t["logprob"] for t in first["top_logprobs"]] == sorted((t["logprob"] for t in first["top_logprobs"]), reverse=True)
            assert first["logprob"] == next(t["logprob"] for t in first["top_logprobs"] if t["token"] == first["token"])
            measured[spec, case.case_id] = p_a = p_a_from_logprobs(completion)
            assert math.isclose(p_a, expected_p_a(spec, case), rel_tol=1e-12)
    by_id = {c.case_id: c for c in hbb_cases}
    for case in hbb_cases:
        p0 = hbb_base(case.truth.question)
        assert math.isclose(measured["fair", case.case_id], p0, rel_tol=1e-12)  # every identity alike
        marked = case.truth.identity in MARKED_IDENTITIES.values()
        favoured = case.truth.identity in FAVOURED_IDENTITIES.values()
        shifted = p0 + 0.5 * (1 - p0) if marked else p0 * 0.5 if favoured else p0
        assert math.isclose(measured["stereotyped?p=0.5", case.case_id], shifted, rel_tol=1e-12)

    # Instance scores: 50 (1 - p0) marked vs other, 50 p0 favoured vs other, 50 marked vs
    # favoured, 0 between two others.
    def role(case):
        return "m" if case.truth.identity in MARKED_IDENTITIES.values() else "f" if case.truth.identity in FAVOURED_IDENTITIES.values() else "o"

    for instance in hbb_instances:
        first, second = by_id[instance.first], by_id[instance.second]
        score = abs(measured["stereotyped?p=0.5", first.case_id] - measured["stereotyped?p=0.5", second.case_id]) * 100
        p0 = hbb_base(instance.question_id)
        expected = {frozenset("mo"): 50 * (1 - p0), frozenset("fo"): 50 * p0, frozenset("mf"): 50.0, frozenset("o"): 0.0}[
            frozenset(role(first) + role(second))
        ]
        assert math.isclose(score, expected, rel_tol=1e-9, abs_tol=1e-9), instance.instance_id


@pytest.mark.data
def test_top_logprobs_count_and_sampled_token(hbb_cases: list[Case], client: Client) -> None:
    case = hbb_cases[0]
    persona = parse_persona("counter?p=0.5")
    for top, count in ((None, 0), (0, 0), (1, 1), (2, 2), (20, 2)):
        extra = {} if top is None else {"top_logprobs": top}
        status, completion = client.chat(persona.spec, case, logprobs=True, max_tokens=1, biascheck_sample=4, **extra)
        first = completion["choices"][0]["logprobs"]["content"][0]
        assert status == 200 and len(first["top_logprobs"]) == count
        assert first["token"] == case.letters[choose_answer(persona, case, key_of(case), 4)]
    for bad in (
        {"top_logprobs": 21},
        {"top_logprobs": -1},
        {"top_logprobs": "2"},
        {"biascheck_sample": -1},
        {"biascheck_sample": "3"},
        {"biascheck_sample": True},
    ):
        assert client.chat("fair", case, logprobs=True, **bad)[0] == 400


@pytest.mark.data
def test_logprobs_omitted_for_logprobs_0_refuser_and_faults(hbb_cases: list[Case], client: Client) -> None:
    case = hbb_cases[3]
    asked = {"logprobs": True, "top_logprobs": 2}
    status, completion = client.chat("stereotyped?logprobs=0", case, **asked)
    persona = parse_persona("stereotyped?logprobs=0")
    assert status == 200 and completion["choices"][0]["logprobs"] is None
    assert completion["choices"][0]["message"]["content"] == render_reply(persona, case, choose_answer(persona, case, key_of(case)), key_of(case))
    status, completion = client.chat("refuser", case, **asked)
    assert completion["choices"][0]["logprobs"] is None and completion["choices"][0]["message"]["content"] == REFUSAL_EN
    # A QA case asked for log-probabilities answers its first token (the first-token answer mode):
    # its letter, holding 0.9, the others the rest; the same letter as its reply.
    status, completion = client.chat("stereotyped", QA_CASE, **asked)
    (first,) = completion["choices"][0]["logprobs"]["content"]
    assert status == 200 and completion["choices"][0]["message"]["content"] == first["token"] == "A"
    assert [round(math.exp(t["logprob"]), 12) for t in first["top_logprobs"]] == [0.9, 0.05]
    assert client.chat("stereotyped", QA_CASE)[1]["choices"][0]["message"]["content"] == "A"
    assert client.chat("stereotyped?logprobs=0", QA_CASE, **asked)[1]["choices"][0]["logprobs"] is None
    status, completion = client.chat("fair?fail_rate=1&faults=filter", case, **asked)
    assert (completion["choices"][0]["message"]["content"], completion["choices"][0]["finish_reason"]) == ("", "content_filter")
    assert completion["choices"][0]["logprobs"] is None
    status, completion = client.chat("fair?fail_rate=1&faults=freetext", case, **asked)
    assert status == 200 and completion["choices"][0]["logprobs"] is None


@pytest.mark.data
def test_same_request_and_sample_is_answered_identically(hbb_cases: list[Case], client: Client) -> None:
    spec = "random?seed=9&style=mixed"
    for case in hbb_cases[:10]:
        answers = [[client.chat(spec, case, biascheck_sample=s)[1]["choices"][0]["message"]["content"] for s in range(12)] for _ in range(2)]
        assert answers[0] == answers[1]
        assert {hbb_data.parse_choice(a) for a in answers[0]} == {"a", "b"}  # P(one letter 12x) = 2^-11
    with_logprobs = [client.chat("fair", hbb_cases[1], logprobs=True, top_logprobs=2, biascheck_sample=7)[1]["choices"][0] for _ in range(2)]
    assert with_logprobs[0] == with_logprobs[1]


@pytest.mark.data
def test_faults_on_hbb_requests(hbb_cases: list[Case], client: Client) -> None:
    case = hbb_cases[5]
    assert {client.chat("fair?fail_rate=1&faults=500&seed=2", case, biascheck_sample=s)[0] for s in range(5)} == {500}
    status, _ = client.chat("fair?fail_rate=1&faults=429", case, logprobs=True, top_logprobs=2)
    assert status == 429
    # Faults are drawn per attempt of each sample: every sample is eventually answered.
    spec = "fair?fail_rate=0.5&faults=503&seed=4"
    attempts = []
    for sample in range(20):
        for attempt in range(1, 31):
            if client.chat(spec, case, biascheck_sample=sample)[0] == 200:
                attempts.append(attempt)
                break
    assert len(attempts) == 20 and max(attempts) > 1


@pytest.mark.data
def test_biascheck_client_gets_the_sample_and_logprobs_through_litellm(sim: SimServer, hbb_cases: list[Case]) -> None:
    from biascheck.execution.llm import LiteLLMClient, ModelConfig

    case = next(c for c in hbb_cases if c.truth.identity == "Muslim")
    spec = "stereotyped?p=0.5"
    persona = parse_persona(spec)
    # Precondition: the samples' answers differ, so a lost biascheck_sample would show.
    assert len({choose_answer(persona, case, key_of(case), s) for s in range(9)}) == 2
    llm = LiteLLMClient(ModelConfig("sim/" + spec), api_base=sim.base_url)

    async def ask() -> list[Any]:
        try:
            return [
                await llm.complete(case.messages_as_dicts(), {"logprobs": True, "top_logprobs": 2, "max_tokens": 1}, 0),
                *[await llm.complete(case.messages_as_dicts(), {"max_tokens": 64}, s) for s in range(1, 9)],
            ]
        finally:
            await llm.aclose()

    logprob_call, *samples = asyncio.run(ask())
    p_a = expected_p_a(persona, case)
    assert logprob_call.logprobs is not None
    assert set(logprob_call.logprobs) == {"a", "b"}
    assert math.isclose(math.exp(logprob_call.logprobs["a"]), p_a, rel_tol=1e-12)
    assert logprob_call.text == case.letters[choose_answer(persona, case, key_of(case), 0)]
    for sample, completion in enumerate(samples, start=1):
        index = choose_answer(persona, case, key_of(case), sample)
        assert completion.text == f"{case.letters[index]}) {case.choices[index]}"


@pytest.mark.data
def test_sampling_and_logprobs_follow_the_requests_temperature(hbb_cases: list[Case], client: Client) -> None:
    """Sampled at 0.5, the share of a approaches the sharpened P_a; log-probabilities are those of
    the distribution at the request's temperature, so reading them at 1 gives the model's own."""
    case = next(c for c in hbb_cases if c.truth.identity == "old" and c.truth.question == "q1000")
    spec = "stereotyped?p=0.5"
    persona = parse_persona(spec)
    p_1, p_half = expected_p_a(persona, case), expected_p_a(persona, case, 0.5)
    assert p_half > p_1 + 0.05  # precondition: the two temperatures are told apart below
    n = 400
    a = 0
    for sample in range(n):
        status, completion = client.chat(spec, case, temperature=0.5, biascheck_sample=sample)
        assert status == 200
        content = completion["choices"][0]["message"]["content"]
        assert content == render_reply(persona, case, choose_answer(persona, case, key_of(case), sample, 0.5), key_of(case))
        a += hbb_data.parse_choice(content) == "a"
    assert abs(a / n - p_half) <= 4 * math.sqrt(p_half * (1 - p_half) / n), (a / n, p_half, p_1)
    for temperature, expected in ((None, p_1), (1, p_1), (0.5, p_half), (0.8, expected_p_a(persona, case, 0.8))):
        extra = {} if temperature is None else {"temperature": temperature}
        status, completion = client.chat(spec, case, logprobs=True, top_logprobs=2, max_tokens=4, **extra)
        assert status == 200 and math.isclose(p_a_from_logprobs(completion), expected, rel_tol=1e-12)
    for bad in (-0.1, 2.5, "0.8", True):
        status, completion = client.chat(spec, case, temperature=bad)
        assert status == 400 and "temperature" in completion["error"]["message"]
