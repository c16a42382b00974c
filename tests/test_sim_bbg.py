"""The simulated model on BBG: story continuations with a known resolution, a judge that reads
them, exact pair-type expectations, and both requests through the HTTP server.

Tests that read the real evaluation sets (EnBBG and KoBBG set 1, run 1) skip without
BIASCHECK_DATA_DIR; the rest use synthetic text."""

from __future__ import annotations

import http.client
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.bbg.data import (
    MRC_PROMPT_ID,
    MRCQuestion,
    build_run,
    evaluation_set_name,
    load_evaluation_set,
    load_prompts,
    pairs,
    render_story_prompt,
    story_prompt_id,
)
from biascheck.core.records import Case, HBBTruth, Message, QATruth
from biascheck.sim.knowledge import SimKnowledge, message_key
from biascheck.sim.personas import (
    PERSONA_NAMES,
    REFUSAL_EN,
    REFUSAL_KO,
    choose_answer,
    expected_answer_distribution,
    expected_p_a,
    parse_persona,
    render_reply,
)
from biascheck.sim.server import SimServer
from biascheck.sim.stories import (
    FILLERS_EN,
    FILLERS_KO,
    PAIR_TYPES,
    bbg_outcome,
    continuation_text,
    expected_pair_distribution,
    fair_resolution,
    is_korean_text,
    judge_answer,
    mrc_messages,
    mrc_pattern,
    people,
    read_continuation,
    resolution_sentences,
    shares_story,
    story_resolution,
    swap_names,
    version_plan,
    write_continuation,
)

RUN = 1
LANGUAGES = ("en", "ko")


def bbg_case(question: MRCQuestion, story_template: str, prompt_id: str = "En-1") -> Case:
    """A case as the BBG benchmark builds it: one per row, its messages the version's generation
    prompt (shared by the version's two rows), its truth the row's question."""
    assert question.mrc_prompt is not None
    return Case(
        case_id=question.key,
        sample_id=question.row_id,
        category=question.category,
        cluster=question.base_template,
        label=question.qtype,
        prompt_id=prompt_id,
        order=0,
        messages=(Message("user", render_story_prompt(story_template, question.seed_text)),),
        choices=question.choices,
        letters=question.mrc_prompt.letters,
        truth=question,  # type: ignore[arg-type]
    )


class Language:
    """One evaluation set's run: its questions, pairs and cases."""

    def __init__(self, bbg: Path, prompts: dict, language: str):
        self.language = language
        rows = load_evaluation_set(bbg / evaluation_set_name(language, RUN), language=language)
        prompt_id = story_prompt_id(language, RUN)
        _, self.questions = build_run(rows, run=RUN, language=language, story_prompt_id=prompt_id, mrc_prompt=prompts["mrc"][MRC_PROMPT_ID[language]])
        self.pairs = pairs(self.questions)
        template = prompts["story_continuation"][prompt_id]
        self.cases = [bbg_case(q, template, prompt_id) for q in self.questions]
        self.versions: dict[str, list[MRCQuestion]] = defaultdict(list)
        for question in self.questions:
            self.versions[question.story_key].append(question)


@pytest.fixture(scope="module")
def data(data_dir: Path) -> dict[str, Language]:
    bbg = data_dir / "bbg"
    prompts = load_prompts(bbg / "prompts.json")
    return {language: Language(bbg, prompts, language) for language in LANGUAGES}


@pytest.fixture(scope="module")
def knowledge(data: dict[str, Language]) -> SimKnowledge:
    return SimKnowledge.from_cases([case for lang in data.values() for case in lang.cases])


def outcome(question: MRCQuestion, index: int | None) -> str | None:
    if index is None:
        return None
    return "u" if index == question.unknown_index else "b" if index == question.biased_index else "c"


def judged(knowledge: SimKnowledge, question: MRCQuestion, continuation: str, judge: str = "judge") -> str | None:
    """The judge's outcome for one row, found as the server finds it, from the MRC prompt alone
    (the question found may be another row rendering the identical prompt), scored with the
    row's own truth as the pipeline scores it."""
    messages = mrc_messages(question, continuation)
    found = knowledge.lookup_mrc(messages)
    assert found is not None, question.key
    asked, read = found
    assert read == continuation.strip() and mrc_messages(asked, continuation) == messages
    return outcome(question, judge_answer(judge, asked, read, message_key(messages), knowledge.writer_for(asked)))


# --- resolution sentences on the real data ---------------------------------------------------


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_version_has_a_different_swapped_sentence(data: dict[str, Language], language: str) -> None:
    methods: Counter[str] = Counter()
    for questions in data[language].versions.values():
        plan = version_plan(questions[0])
        assert all(version_plan(q) == plan for q in questions)  # the version's, not the row's
        methods[plan.method] += 1
        order, swapped = plan.order, plan.swapped
        assert swapped is not None and order == questions[0].dis_context
        assert order not in swapped and swapped not in order, questions[0].template_id
        if plan.method == "names":  # both choice texts in the sentence: exchanged, and back
            first, second = (questions[0].choices[i] for i in people(questions[0]))
            for name in (first, second):
                assert name.casefold() in swapped.casefold()
            assert swap_names(swapped, first, second) == order
        else:  # exchanged mentions: the text around them is kept
            assert len(re.findall(r"[.!?]", swapped)) == len(re.findall(r"[.!?]", order))
    # Without the seed alignment a third of the versions could not be swapped (data issue: the
    # disambiguated context words the people differently from the choices).
    assert methods["none"] == 0
    assert methods["names"] > len(data[language].versions) / 2
    assert methods["mentions"] + methods["single"] > 0


def test_swaps_of_reworded_people_read_naturally(data: dict[str, Language]) -> None:
    """Spot checks of the mention path: hyphenated ages, a lone mention, a Korean particle."""
    en, ko = ({q.template_id: resolution_sentences(q)[1] for q in data[lang].questions} for lang in LANGUAGES)
    assert en["age-001-a"] == ("The grandmother was struggling with the app and not really listening to the advice from the grandson.")
    assert en["age-006-a"].startswith("Though the 85-year-old complained")
    assert "the 28-year-old took a much more optimistic view" in en["age-006-a"]
    assert en["age-007-a"].startswith("The 65-year-old had a hard time")  # one person named
    assert "To the woman's horror" in en["physicalappearance-012-a"]
    assert ko["age-001-a"].startswith("할머니는 앱 이용에 어려움을 겪고 있으면서도 손자의 조언도")
    assert ko["age-005-a"].startswith("유감스럽게도 85세") and "29세" in ko["age-005-a"]


# --- writing and judging every version -------------------------------------------------------

EXPECTED_PAIRS = {"fair": None, "stereotyped?p=1": "bb", "counter?p=1": "cc"}
# Pairs whose two versions have the same seed, so one generation prompt and one story.
SHARED_STORIES = {"en": {"disabilitystatus-001"}, "ko": {"disability_status-003", "disability_status-008"}}


def writer_of(knowledge: SimKnowledge, case: Case) -> tuple[MRCQuestion, bool]:
    """The row whose version writes the story this case reads (the case's own, or for a shared
    story the a/c version's row with the same question type), and whether that story is both
    versions' of the pair."""
    question: MRCQuestion = case.truth  # type: ignore[assignment]
    found = knowledge.lookup(case.messages_as_dicts())
    assert found is not None and found.truth.story_key == (knowledge.writer_for(question) or question).story_key  # type: ignore[union-attr]
    return knowledge.writer_for(question) or question, knowledge.shares_prompt(message_key(case.messages_as_dicts()))


@pytest.mark.parametrize("language", LANGUAGES)
def test_extreme_writers_give_the_documented_pair_types(data: dict[str, Language], knowledge: SimKnowledge, language: str) -> None:
    lang = data[language]
    fillers = FILLERS_KO if language == "ko" else FILLERS_EN
    writers = {case.truth.key: writer_of(knowledge, case) for case in lang.cases}  # type: ignore[union-attr]
    for spec, expected in EXPECTED_PAIRS.items():
        persona = parse_persona(spec)
        continuations: dict[str, str] = {}
        for question in lang.questions:
            writer, shared = writers[question.key]
            text = write_continuation(persona, writer, shared=shared)
            # Both rows of a version read the same continuation.
            assert continuations.setdefault(question.story_key, text) == text
            order, swapped = resolution_sentences(writer)
            rest = text.replace(order, "").replace(swapped or "\0", "")
            assert sum(f in text for bank in fillers for f in bank) == 2
            for name in [question.choices[i] for i in people(question)] + list(version_plan(question).names):
                assert name.casefold() not in rest.casefold(), (question.key, name, rest)
            if language == "ko":
                assert is_korean_text(text) and not re.search("[A-Za-z]", rest)
        types: Counter[str] = Counter()
        shared_pairs = set()
        for first, second in lang.pairs:
            pair = judged(knowledge, first, continuations[first.story_key]) + judged(knowledge, second, continuations[second.story_key])  # type: ignore[operator]
            # The exact expectation is certain here, and says what happened.
            assert expected_pair_distribution(persona, first, second) == {pair: 1.0}
            if expected is None:  # fair: the pair's F decides (a shared story stays unresolved)
                shared = shares_story(first, second)
                assert pair == ("uu" if shared or fair_resolution(persona, first) == "unresolved" else "cb")
            if writers[first.key][1]:
                shared_pairs.add(first.base_template)
                continue
            types[pair] += 1
            if expected is not None:
                assert pair == expected, (spec, first.key, pair)
        assert shared_pairs == SHARED_STORIES[language]
        assert set(types) == ({"uu", "cb"} if expected is None else {expected})


@pytest.mark.parametrize("language", LANGUAGES)
def test_refuser_and_random_writers(data: dict[str, Language], knowledge: SimKnowledge, language: str) -> None:
    lang = data[language]
    refusal = REFUSAL_KO if language == "ko" else REFUSAL_EN
    resolutions: Counter[str] = Counter()
    for question in lang.questions[:200]:
        assert write_continuation("refuser", question) == refusal
        assert judged(knowledge, question, refusal) == "u"
        resolutions[story_resolution("random?seed=3", question)] += 1  # type: ignore[index]
    assert set(resolutions) == {"unresolved", "order", "swapped"}


def test_judge_personas_lean_and_refuse(data: dict[str, Language], knowledge: SimKnowledge) -> None:
    question = data["en"].questions[0]
    unresolved = continuation_text(question, "unresolved")
    assert judged(knowledge, question, unresolved, "stereotyped?p=1") == "b"
    assert judged(knowledge, question, unresolved, "counter?p=1") == "c"
    assert judged(knowledge, question, unresolved, "stereotyped?p=0") == judged(knowledge, question, unresolved) == "u"
    assert judged(knowledge, question, unresolved, "refuser") is None


# --- expectations ----------------------------------------------------------------------------


def test_documented_pair_distributions(data: dict[str, Language]) -> None:
    by_f: dict[str, tuple[MRCQuestion, MRCQuestion]] = {}
    for first, second in data["en"].pairs:
        if not shares_story(first, second):
            by_f.setdefault(fair_resolution(parse_persona("fair"), first), (first, second))
    p = 0.3
    unresolved, order = by_f["unresolved"], by_f["order"]
    close = lambda got, want: got.keys() == want.keys() and all(math.isclose(got[k], want[k]) for k in want)  # noqa: E731
    assert close(
        expected_pair_distribution(f"stereotyped?p={p}", *unresolved), {"bb": p * p, "bu": p * (1 - p), "ub": (1 - p) * p, "uu": (1 - p) ** 2}
    )
    assert close(expected_pair_distribution(f"stereotyped?p={p}", *order), {"bb": p, "cb": 1 - p})
    assert close(expected_pair_distribution(f"counter?p={p}", *unresolved), {"cc": p * p, "cu": p * (1 - p), "uc": (1 - p) * p, "uu": (1 - p) ** 2})
    assert close(expected_pair_distribution(f"counter?p={p}", *order), {"cc": p, "cb": 1 - p})
    assert expected_pair_distribution("fair", *unresolved) == {"uu": 1.0}
    assert expected_pair_distribution("judge", *order) == {"cb": 1.0}
    assert close(expected_pair_distribution("random", *order), {t: 1 / 9 for t in PAIR_TYPES})
    assert expected_pair_distribution("refuser", *order) == {"uu": 1.0}
    # Another judge: a stereotyped one turns u and c into b with probability q.
    assert close(expected_pair_distribution("fair", *unresolved, judge="stereotyped?p=0.5"), {"bb": 0.25, "bu": 0.25, "ub": 0.25, "uu": 0.25})
    with pytest.raises(ValueError, match="not the two rows of one pair"):
        expected_pair_distribution("fair", order[0], unresolved[1])
    with pytest.raises(ValueError, match="refuser"):
        expected_pair_distribution("fair", *order, judge="refuser")


@pytest.mark.parametrize("language", LANGUAGES)
def test_documented_shared_story_distributions(data: dict[str, Language], language: str) -> None:
    shared = [(a, b) for a, b in data[language].pairs if shares_story(a, b)]
    assert {a.base_template for a, _ in shared} == SHARED_STORIES[language]
    for pair in shared:
        assert expected_pair_distribution("fair", *pair) == {"uu": 1.0}
        assert expected_pair_distribution("stereotyped?p=0.25", *pair) == {"bb": 0.25, "uu": 0.75}
        assert expected_pair_distribution("counter?p=0.25", *pair) == {"cc": 0.25, "uu": 0.75}
        assert expected_pair_distribution("random", *pair) == {"bb": 1 / 3, "cc": 1 / 3, "uu": 1 / 3}


@pytest.mark.parametrize(("spec", "judge"), [("stereotyped?p=0.3", "judge"), ("counter?p=0.6&seed=2", "stereotyped?p=0.2")])
def test_empirical_pair_types_match_the_expectation(data: dict[str, Language], knowledge: SimKnowledge, spec: str, judge: str) -> None:
    """Over all pairs of EnBBG set 1, each pair type's share is within 3 sd of its expectation
    (the two question types of a pair read the same stories, so sd is taken over templates)."""
    lang = data["en"]
    writers = {case.truth.key: writer_of(knowledge, case) for case in lang.cases}  # type: ignore[union-attr]
    observed: Counter[str] = Counter()
    expected: Counter[str] = Counter()
    for first, second in lang.pairs:
        pair = (
            bbg_outcome(spec, first, judge, *writers[first.key])  # type: ignore[operator]
            + bbg_outcome(spec, second, judge, *writers[second.key])
        )
        observed[pair] += 1
        for pair_type, probability in expected_pair_distribution(spec, first, second, judge=judge).items():
            expected[pair_type] += probability
    n = len(lang.pairs)
    assert math.isclose(sum(expected.values()), n)
    for pair_type in PAIR_TYPES:
        share, want = observed[pair_type] / n, expected[pair_type] / n
        sd = math.sqrt(max(want * (1 - want), 1e-4) / (n / 2))
        assert abs(share - want) <= 3 * sd + 1e-9, (pair_type, share, want, observed, expected)


# --- knowledge and the HTTP server -----------------------------------------------------------


def test_knowledge_indexes_versions_without_conflicts(data: dict[str, Language], knowledge: SimKnowledge) -> None:
    assert knowledge.conflicts == ()
    shared = sum(len(v) for v in SHARED_STORIES.values())
    assert len(knowledge) == sum(len(lang.versions) for lang in data.values()) - shared
    assert len(knowledge.shared_stories) == shared
    assert all(a.endswith("-a") and b.endswith("-b") for a, b in knowledge.shared_stories)
    assert knowledge.bbg_question_count == sum(len(lang.questions) for lang in data.values())
    # The writer of a shared prompt does not depend on the order of the cases.
    cases = data["en"].cases
    backwards = SimKnowledge.from_cases(reversed(cases))
    for case in cases:
        assert writer_of(backwards, case)[0] is writer_of(knowledge, case)[0]
        assert backwards.lookup(case.messages_as_dicts()).truth is knowledge.lookup(case.messages_as_dicts()).truth  # type: ignore[union-attr]
    # A BBG case and a QA case with the same messages do conflict.
    qa = Case("qa", "s", "age", "t", "", "p", 0, cases[0].messages, ("x", "y", "z"), ("A", "B", "C"), QATruth("amb", 0, 1, 2, 0))
    assert SimKnowledge.from_cases([cases[0], qa]).conflicts == ((cases[0].case_id, "qa"),)


def post(server: SimServer, model: str, messages: list[dict[str, str]]) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        body = json.dumps({"model": model, "messages": messages})
        connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def text_of(reply: dict[str, Any]) -> str:
    return reply["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def sim(knowledge: SimKnowledge) -> Iterator[SimServer]:
    with SimServer(knowledge) as server:
        yield server


@pytest.mark.parametrize("language", LANGUAGES)
def test_server_writes_the_story_then_judges_it(data: dict[str, Language], sim: SimServer, language: str) -> None:
    lang = data[language]
    first, second = lang.pairs[0]
    for question in (first, second):
        case = next(c for c in lang.cases if c.truth is question)
        status, reply = post(sim, "sim/stereotyped?p=1", case.messages_as_dicts())
        assert status == 200
        continuation = text_of(reply)
        assert continuation == write_continuation("stereotyped?p=1", question)
        assert is_korean_text(continuation) == (language == "ko")
        messages = mrc_messages(question, continuation)
        status, reply = post(sim, "sim/judge", messages)
        assert status == 200
        assert text_of(reply) == question.mrc_prompt.letters[question.biased_index]  # type: ignore[union-attr]
        status, reply = post(sim, "sim/judge?style=text", messages)
        assert text_of(reply) == question.choices[question.biased_index]
        status, reply = post(sim, "refuser", messages)
        assert text_of(reply) == (REFUSAL_KO if language == "ko" else REFUSAL_EN)


@pytest.mark.parametrize("language", LANGUAGES)
def test_server_shared_story_is_one_story_read_by_both_versions(data: dict[str, Language], sim: SimServer, language: str) -> None:
    lang = data[language]
    for first, second in lang.pairs:
        if first.base_template not in SHARED_STORIES[language]:
            continue
        stories = set()
        for question in (first, second):
            case = next(c for c in lang.cases if c.truth is question)
            stories.add(text_of(post(sim, "stereotyped?p=1", case.messages_as_dicts())[1]))
            assert text_of(post(sim, "fair", case.messages_as_dicts())[1]) == continuation_text(first, "unresolved")
        (story,) = stories  # one prompt, one story: the a/c version's
        assert story == write_continuation("stereotyped?p=1", first)
        for question in (first, second):
            reply = text_of(post(sim, "judge", mrc_messages(question, story))[1])
            assert reply == question.mrc_prompt.letters[question.biased_index]  # type: ignore[union-attr]


def test_server_refuses_unknown_mrc_prompts_and_injects_faults(data: dict[str, Language], sim: SimServer) -> None:
    question = data["en"].questions[0]
    case = data["en"].cases[0]
    messages = mrc_messages(question, "Nothing happened.")
    assert post(sim, "judge", messages)[0] == 200
    for content in (
        messages[0]["content"].replace(question.question, "Who is it?"),
        messages[0]["content"].replace(question.seed_text.strip(), "A different seed."),
        messages[0]["content"] + " ",
    ):
        status, reply = post(sim, "judge", [{"role": "user", "content": content}])
        assert status == 400 and reply["error"]["code"] == "unknown_prompt"
    for request in (case.messages_as_dicts(), messages):
        status, reply = post(sim, "judge?fail_rate=1&faults=500", request)
        assert status == 500
        status, reply = post(sim, "fair?fail_rate=1&faults=filter", request)
        assert status == 200 and reply["choices"][0]["finish_reason"] == "content_filter"


# --- the judge persona is fair, everywhere ---------------------------------------------------


def test_judge_persona_is_fair_on_qa_and_hbb() -> None:
    assert "judge" in PERSONA_NAMES and parse_persona("sim/judge?seed=2").spec == "judge?seed=2"
    judge, fair = parse_persona("judge"), parse_persona("fair")
    for context, correct in (("amb", 0), ("dis", 1), ("dis", 2)):
        case = Case(
            "q",
            "s",
            "age",
            "t",
            "",
            "p",
            0,
            (Message("user", f"{context} {correct}"),),
            ("unknown", "old", "young"),
            ("A", "B", "C"),
            QATruth(context, 0, 1, 2, correct),
        )  # type: ignore[arg-type]
        key = message_key(case.messages_as_dicts())
        assert choose_answer(judge, case, key) == choose_answer(fair, case, key) == correct
        assert expected_answer_distribution(judge, case) == expected_answer_distribution(fair, case) == {correct: 1.0}
        assert render_reply(judge, case, correct, key) == render_reply(fair, case, correct, key)
    hbb = Case("h", "q1", "age", "q1", "noun", "evaluate", 0, (Message("user", "x"),), ("a1", "b1"), ("a", "b"), HBBTruth("q1", "noun", "old"))
    assert expected_p_a(judge, hbb) == expected_p_a(fair, hbb)


def test_qa_functions_refuse_a_bbg_case(data: dict[str, Language]) -> None:
    case = data["en"].cases[0]
    with pytest.raises(ValueError, match="not a QA case"):
        choose_answer(parse_persona("fair"), case, "k")


# --- pure text functions (no data) -----------------------------------------------------------

_LOWER = st.text(alphabet="abcdefghijklm", min_size=2, max_size=7)
_OTHER = st.text(alphabet="nopqrstuvwxyz", min_size=2, max_size=7)
_FILLER = st.lists(st.text(alphabet="0123456789", min_size=1, max_size=4), min_size=0, max_size=3).map(" ".join)


@settings(max_examples=examples(200), deadline=None)
@given(
    first=st.lists(_LOWER, min_size=1, max_size=3).map(" ".join),
    second=st.lists(_OTHER, min_size=1, max_size=3).map(" ".join),
    article=st.sampled_from(["", "The ", "the ", "my "]),
    slots=st.lists(st.tuples(st.booleans(), st.booleans(), _FILLER), min_size=1, max_size=5),
)
def test_swap_names_is_an_involution(first: str, second: str, article: str, slots: list) -> None:
    names = (article + first, article + second)
    parts = []
    for use_second, capital, filler in slots:
        name = names[use_second]
        parts.append((name[0].upper() + name[1:]) if capital else name)
        parts.append(f" {filler}, " if filler else " ")
    text = "".join(parts).strip() + "."
    swapped = swap_names(text, *names)
    assert swap_names(swapped, *names) == text
    if text.casefold().count(names[0].casefold()) or text.casefold().count(names[1].casefold()):
        assert swapped != text


_HANGUL_NAME = st.text(alphabet="가나다라마바사아자차카타파하각난닫랄맘밥삿앙잦찿", min_size=2, max_size=4)


@settings(max_examples=examples(200), deadline=None)
@given(
    first=_HANGUL_NAME,
    second=_HANGUL_NAME,
    particles=st.lists(st.sampled_from([("은", "는"), ("이", "가"), ("을", "를"), ("의", "의")]), min_size=2, max_size=4),
)
def test_korean_swap_fits_particles_and_is_an_involution(first: str, second: str, particles: list) -> None:
    if first in second or second in first:
        return

    def with_particle(name: str, forms: tuple[str, str]) -> str:
        final = (ord(name[-1]) - 0xAC00) % 28 != 0
        return name + (forms[0] if final else forms[1])

    names = [first, second]
    text = " ".join(with_particle(names[i % 2], forms) + " 말했습니다." for i, forms in enumerate(particles))
    swapped = swap_names(text, first, second)
    expected = " ".join(with_particle(names[(i + 1) % 2], forms) + " 말했습니다." for i, forms in enumerate(particles))
    assert swapped == expected
    assert swap_names(swapped, first, second) == text


def test_swap_names_longest_first_and_case() -> None:
    text = "The old man thanked the man. The man left."
    assert swap_names(text, "The man", "The old man") == "The man thanked the old man. The old man left."
    assert swap_names("the kidney of the kid", "The kid", "The adult") == "the kidney of the adult"
    assert swap_names("CEO의 가족은 왔고 이웃은 떠났다", "CEO의 가족", "이웃") == "이웃은 왔고 CEO의 가족은 떠났다"


def test_mrc_pattern_takes_the_story_apart_even_when_it_quotes_the_template() -> None:
    template = "Read.\n\nContext: {CONTEXT}\nQuestion: {QUESTION}\nA: {OPTION-A}\nB: {OPTION-B}\nC: {OPTION-C}\nAnswer:"
    story = "Seed.\n\nThen someone wrote\nQuestion: Who?\nA: me\n"
    prompt = (
        template.replace("{CONTEXT}", story)
        .replace("{QUESTION}", "Who won?")
        .replace("{OPTION-A}", "x")
        .replace("{OPTION-B}", "y")
        .replace("{OPTION-C}", "z")
    )
    match = mrc_pattern(template).fullmatch(prompt)
    assert match and match["context"] == story and match["question"] == "Who won?"
    assert (match["a"], match["b"], match["c"]) == ("x", "y", "z")


def test_read_continuation_needs_the_whole_sentence(data: dict[str, Language]) -> None:
    question = data["en"].questions[0]
    order, swapped = resolution_sentences(question)
    assert read_continuation(question, f"Later. {order} Fine.") == question.dis_index
    assert read_continuation(question, f"{swapped}") == 3 - question.unknown_index - question.dis_index
    assert read_continuation(question, order[:-5]) == question.unknown_index
