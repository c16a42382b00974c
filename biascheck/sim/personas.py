"""Personas: simulated models whose bias is known exactly.

A persona spec is the request's ``model`` field: ``name?param=value&param=value`` (a leading
``sim/`` is accepted), e.g. ``stereotyped?p=0.3&seed=1``.  For a QA case the persona picks a
choice index (pure function of persona and prompt) and renders it in a reply style.

Analytic expectations, with ``fair(case)`` = ``truth.unknown`` in ambiguous contexts and
``truth.correct`` in disambiguated ones (see :func:`expected_answer_distribution`):

``fair``
    Always ``fair(case)``: amb -> unknown with probability 1; dis -> correct with probability 1.
``stereotyped?p=P`` (default P=0.5)
    ``truth.biased`` with probability P, otherwise ``fair(case)``.
    amb: P(biased)=P, P(unknown)=1-P.  dis-biased (correct == biased): always correct.
    dis-counter: correct with probability 1-P, biased with probability P.
``counter?p=P`` (default P=0.5)
    The mirror image: ``truth.counter`` with probability P, otherwise ``fair(case)``.
    amb: P(counter)=P, P(unknown)=1-P.  dis-counter: always correct.
    dis-biased: correct with probability 1-P, counter with probability P.
``random``
    Uniform over all choices: 1/len(choices) each, whatever the context.
``refuser``
    Never names a choice: always a refusal text (out-of-choice); the distribution is empty.
``judge``
    Exactly ``fair``, everywhere (QA, HBB, BBG): the name to give a simulated BBG evaluator,
    ``sim/judge``. With ``confusion=m_bb,m_bc,m_bu,m_cb,...,m_uu`` (rows: what the story says,
    b, c, u; columns: what the judge reads) a BBG judge of known error: it reads what the story
    says, then answers class j with probability ``m_ij`` (a draw on the MRC prompt's message
    key, so the two readings of a pair err independently).

The answer draw depends on (persona name, seed, message key) but deliberately *not* on ``p``:
the same seed gives common random numbers across p, so ``stereotyped?p=0.3`` answers biased on
a superset of the prompts where ``p=0.2`` does, and a bias regression between two p values shows
up without sampling noise.

HBB cases (``case.truth`` an :class:`~biascheck.core.records.HBBTruth`: one filled question, options
``a``/``b``) are answered by sampling instead: every persona has a true probability P_a of option
a per filled question (:func:`expected_p_a`), built on the base question's
``p0 = 0.2 + 0.6 * uniform("hbb-base", question_id)`` - the same for every identity, descriptor
type and persona.  Per category one identity is *marked* (:data:`MARKED_IDENTITIES`: age ``old``,
gender ``female``, race ``black``, ses ``poor``, religion ``Muslim``) and one *favoured*
(:data:`FAVOURED_IDENTITIES`: ``young``, ``male``, ``white``, ``rich``, ``Christian``): the
stereotyped persona pushes the marked toward option a and the favoured away from it.

=========================  =====================  =====================  ==============
persona                    marked identity        favoured identity      any other
=========================  =====================  =====================  ==============
``fair``                   p0                     p0                     p0
``stereotyped?p=P`` (0.5)  p0 + P * (1 - p0)      p0 * (1 - P)           p0
``counter?p=P`` (0.5)      p0 * (1 - P)           p0 + P * (1 - p0)      p0
``random``                 0.5                    0.5                    0.5
``refuser``                None (always refuses)  None                   None
=========================  =====================  =====================  ==============

So every HBB instance score is known exactly, ``|P_a(first) - P_a(second)| * 100``: for
``stereotyped`` ``P * (1 - p0) * 100`` (marked vs other), ``P * p0 * 100`` (favoured vs other),
``P * 100`` (marked vs favoured), and 0 between two others.  Sample ``s`` of a prompt (the
request's ``biascheck_sample``, 0 when absent) answers a iff
``uniform("hbb-answer", name, seed, message key, s) < P_a``: independent across samples,
reproducible, and common random numbers across ``p`` as for QA.  Replies follow the prompt's
format: ``"a) <option a>"`` for styles ``letter`` and ``text``, ``"Final Answer: a) <option a>"``
for ``phrase`` (``mixed`` picks one per request).  Asked for log-probabilities, the reply is the
single token ``a`` or ``b`` with OpenAI ``logprobs`` whose top alternatives are exactly
ln P_a and ln(1 - P_a), P_a clipped into [1e-6, 1 - 1e-6] (:func:`answer_logprobs`).

Temperature. The table's P_a is the persona's distribution at temperature 1, its "model". A
request at temperature T (absent: 1, as OpenAI) answers from the distribution a softmax at T
gives, p_i ∝ p_i^(1/T) (:func:`at_temperature`): T < 1 sharpens it toward the likelier option,
T > 1 flattens it, T = 0 is the argmax (the limit: a tie stays 0.5), and P_a 0 or 1 stays.
:func:`expected_p_a`, :func:`choose_answer`, :func:`expected_answer_distribution` and
:func:`answer_logprobs` all take the request's temperature, so sampling at the paper's 0.8 and
reading log-probabilities at 1 differ as they do for a real model. The returned log-probabilities
are those of the distribution at the request's temperature, the one the returned token is drawn
from, so a token's reported probability and its frequency over samples agree. Providers differ
here (vLLM's default reports log-probabilities before temperature, its processed modes and its
older engine after; OpenAI documents neither), which is why biascheck's logprob estimator asks at
temperature 1, where every convention gives the same numbers. Temperature applies to HBB only: a
QA or BBG persona's behaviour is defined at whatever the suite sends (KoBBQ's 0 included), one
draw per prompt, not a distribution the benchmark estimates.

BBG cases (``case.truth`` a :class:`~biascheck.benchmarks.bbg.data.MRCQuestion`; the case's
messages are the *generation* prompt of its story version) are written and judged by
:mod:`biascheck.sim.stories`. Per story version the writer's continuation is neutral filler
plus at most one *resolution* sentence: ``order`` (the version's ``dis_context``), ``swapped``
(the same with the two people exchanged) or none (``unresolved``). A fair judge answers the
row's ``dis_answer`` after ``order``, the other person after ``swapped``, unknown otherwise; as
a/c rows have ``dis_answer != biased_answer`` and b/d rows ``dis_answer == biased_answer``,
``order`` scores the pair (c, b), ``swapped`` (b, c). Per pair (run, base template) and seed,
``F = unresolved if uniform("bbg-fair", seed, run, base_template) < 0.5 else order`` - the same
F for every persona with that seed; the leaning personas draw per version
(``uniform("bbg-story", name, seed, version)``, not depending on p: common random numbers).
Exact pair-type probabilities with the fair judge, given the pair's F
(:func:`~biascheck.sim.stories.expected_pair_distribution`; first letter the a/c row):

=========================  ==========================================  ====================
writer                     F = unresolved                              F = order
=========================  ==========================================  ====================
``fair`` / ``judge``       uu 1                                        cb 1
``stereotyped?p=P``        bb P², bu P(1-P), ub (1-P)P, uu (1-P)²      bb P, cb 1-P
``counter?p=P``            cc P², cu P(1-P), uc (1-P)P, uu (1-P)²      cc P, cb 1-P
``random``                 each of the nine types 1/9 (F unused)       1/9 each
``refuser``                uu 1 (the refusal resolves nothing)         uu 1
=========================  ==========================================  ====================

Both rows of a version read the same continuation. In a few pairs both versions have the same
seed, hence one generation prompt and one story (written for the a/c version; the b/d rows read
it with the a/c version's sentences and name the person it resolves to): there F is
``unresolved``, as the prompt cannot tell the versions apart, so with the fair judge such a
pair is ``uu`` for ``fair``, bb P / uu 1-P for ``stereotyped``, cc P / uu 1-P for ``counter``,
and uu, bb, cc 1/3 each for ``random``.

As judges the personas answer an MRC prompt as for QA, with "what the continuation says" in
place of ``fair(case)``: stereotyped the biased person with probability p (a draw on the MRC
prompt's message key), counter the counter-biased one, random uniformly, refuser not at all.

Common parameters: ``seed`` (int, default 0), ``style`` (``letter`` default: exactly
``case.letters[i]``; ``text``: exactly ``case.choices[i]``; ``phrase``: the answer sentence of the
pack of the case's language (:mod:`biascheck.benchmarks.languages`; a suite's own pack once the
suite is loaded): "The answer is B.", "정답은 B입니다.", "La respuesta es B.", "答案是B。"; a case of a
language with no pack is Korean when its prompt contains Hangul, else English; ``mixed``: one of
the three per request),
``logprobs`` (1 default: return log-probabilities when a request asks for them on an HBB case;
0: never, as a provider without log-probabilities, so the request is answered as a plain one),
and the fault-injection parameters documented in :mod:`biascheck.sim.faults`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from biascheck.benchmarks.languages import LANGUAGES, Language, language_for
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, HBBTruth, QATruth
from biascheck.sim.draws import pick, uniform
from biascheck.sim.faults import DEFAULT_FAULTS, FAULT_KINDS

PERSONA_NAMES = ("fair", "stereotyped", "counter", "random", "refuser", "judge")
# Personas that answer as ``fair`` does (``judge`` is its name as a BBG evaluator).
FAIR_PERSONAS = frozenset({"fair", "judge"})
STYLES = ("letter", "text", "phrase", "mixed")
CONCRETE_STYLES = ("letter", "text", "phrase")

# REFUSAL_EN and REFUSAL_KO, the English and Korean packs' refusals, are read from the packs when
# first used (module __getattr__ below): importing the simulator, as collecting a sim/ run does,
# reads no pack.
_REFUSALS = {"REFUSAL_EN": "en", "REFUSAL_KO": "ko"}


def __getattr__(name: str) -> str:
    if name in _REFUSALS:
        return LANGUAGES[_REFUSALS[name]].refusal
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# HBB: the one identity per category whose P_a the leaning personas move (hbb_data's names).
MARKED_IDENTITIES: dict[str, str] = {
    "age": "old",
    "gender": "female",
    "race": "black",
    "ses": "poor",
    "religion": "Muslim",
}
FAVOURED_IDENTITIES: dict[str, str] = {
    "age": "young",
    "gender": "male",
    "race": "white",
    "ses": "rich",
    "religion": "Christian",
}
_MARKED = frozenset(MARKED_IDENTITIES.values())
_FAVOURED = frozenset(FAVOURED_IDENTITIES.values())
BATCH_FAULTS = ("failed", "expired")
P_CLIP = 1e-6  # P_a is clipped into [P_CLIP, 1 - P_CLIP] before taking logs

_HANGUL = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")


@dataclass(frozen=True, slots=True)
class Persona:
    """A parsed persona spec; ``spec`` is its canonical form (name plus non-default params)."""

    name: str
    p: float = 0.5  # stereotyped/counter: the share of answers that lean
    seed: int = 0
    style: str = "letter"
    fail_rate: float = 0.0
    faults: tuple[str, ...] = DEFAULT_FAULTS
    retry_after_ms: int = 20
    delay: float = 30.0
    logprobs: int = 1  # 0: never return log-probabilities, even when asked
    # How a batch whose first request names this persona behaves (biascheck.sim.batches).
    batch_delay: float = 0.0
    batch_fault: str = ""  # "", "failed" or "expired"
    files_fail: int = 0
    create_lost: int = 0
    status_fail: int = 0
    # A BBG judge's known confusion matrix, row-major over (b, c, u): P(judge reads j | story says
    # i); empty: the persona's own reading (biascheck.sim.stories.judge_answer).
    confusion: tuple[float, ...] = ()
    spec: str = field(default="", compare=False)


# --- parsing ---------------------------------------------------------------------------------


def _parse_probability(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:  # also rejects nan
        raise ValueError
    return value


def _parse_nonnegative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError
    return value


def _parse_nonnegative_float(raw: str) -> float:
    value = float(raw)
    if not (value >= 0.0 and math.isfinite(value)):
        raise ValueError
    return value


def _parse_flag(raw: str) -> int:
    if raw not in ("0", "1"):
        raise ValueError
    return int(raw)


def _parse_style(raw: str) -> str:
    if raw not in STYLES:
        raise ValueError
    return raw


def _parse_batch_fault(raw: str) -> str:
    if raw not in BATCH_FAULTS:
        raise ValueError
    return raw


def _parse_faults(raw: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in raw.split(","))
    if not kinds or any(k not in FAULT_KINDS for k in kinds) or len(set(kinds)) != len(kinds):
        raise ValueError
    return kinds


def _parse_confusion(raw: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in raw.split(","))
    if len(values) != 9 or not all(0.0 <= v <= 1.0 for v in values):
        raise ValueError
    if any(abs(sum(values[i : i + 3]) - 1.0) > 1e-9 for i in (0, 3, 6)):
        raise ValueError
    return values


@dataclass(frozen=True, slots=True)
class _Param:
    parse: Callable[[str], Any]
    valid: str  # shown to the user when a value does not parse


_COMMON_PARAMS: dict[str, _Param] = {
    "seed": _Param(int, "an integer"),
    "style": _Param(_parse_style, "one of " + ", ".join(STYLES)),
    "fail_rate": _Param(_parse_probability, "a number in [0, 1]"),
    "faults": _Param(_parse_faults, "a comma-separated subset of " + ",".join(FAULT_KINDS)),
    "retry_after_ms": _Param(_parse_nonnegative_int, "a non-negative integer"),
    "delay": _Param(_parse_nonnegative_float, "a non-negative number of seconds"),
    "logprobs": _Param(_parse_flag, "0 or 1"),
    "batch_delay": _Param(_parse_nonnegative_float, "a non-negative number of seconds"),
    "batch_fault": _Param(_parse_batch_fault, "one of " + ", ".join(BATCH_FAULTS)),
    "files_fail": _Param(_parse_nonnegative_int, "a non-negative integer"),
    "create_lost": _Param(_parse_nonnegative_int, "a non-negative integer"),
    "status_fail": _Param(_parse_nonnegative_int, "a non-negative integer"),
}
_P_PARAM = {"p": _Param(_parse_probability, "a number in [0, 1]")}
_PARAMS_BY_PERSONA: dict[str, dict[str, _Param]] = {
    "fair": _COMMON_PARAMS,
    "stereotyped": {**_P_PARAM, **_COMMON_PARAMS},
    "counter": {**_P_PARAM, **_COMMON_PARAMS},
    "random": _COMMON_PARAMS,
    "refuser": _COMMON_PARAMS,
    "judge": {
        **_COMMON_PARAMS,
        "confusion": _Param(_parse_confusion, "9 comma-separated probabilities, rows (true b, c, u) of P(read b, c, u) each summing to 1"),
    },
}


def persona_name(spec: str) -> str:
    """The persona name a spec asks for (``sim/`` and the query stripped), known or not."""
    return spec.removeprefix("sim/").split("?", 1)[0].strip()


def is_persona_spec(spec: str) -> bool:
    """Whether ``spec`` names a known persona (its parameters may still be invalid)."""
    return persona_name(spec) in PERSONA_NAMES


@lru_cache(maxsize=1024)
def parse_persona(spec: str) -> Persona:
    """Parse ``name?k=v&k=v``; raise :class:`BiascheckError` naming the model and valid choices."""
    where = f"model {spec!r}"
    name = persona_name(spec)
    if name not in PERSONA_NAMES:
        raise BiascheckError(where, "persona", f"unknown persona {name!r}", "choose one of " + ", ".join(PERSONA_NAMES))
    allowed = _PARAMS_BY_PERSONA[name]
    query = spec.removeprefix("sim/").split("?", 1)[1] if "?" in spec else ""
    values: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if key not in allowed:
            raise BiascheckError(
                where,
                key,
                f"unknown parameter for persona {name!r}",
                "valid parameters: " + ", ".join(allowed),
            )
        if key in values:
            raise BiascheckError(where, key, "given more than once", "give each parameter once")
        try:
            if not sep:
                raise ValueError
            values[key] = allowed[key].parse(raw.strip())
        except ValueError:
            raise BiascheckError(where, key, f"bad value {raw!r}", f"{key} must be {allowed[key].valid}") from None
    return Persona(name=name, spec=_canonical_spec(name, values), **values)


def _format_value(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(_format_value(v) for v in value)
    if isinstance(value, float):
        return format(value, ".15g")  # 1.0 -> "1", 0.3 -> "0.3"
    return str(value)


def _canonical_spec(name: str, values: dict[str, Any]) -> str:
    defaults = Persona(name=name)
    shown = []
    for key in _PARAMS_BY_PERSONA[name]:
        if key in values and values[key] != getattr(defaults, key):
            shown.append(f"{key}={_format_value(values[key])}")
    return name + ("?" + "&".join(shown) if shown else "")


# --- answering -------------------------------------------------------------------------------


def _qa_truth(case: Case) -> QATruth:
    if not isinstance(case.truth, QATruth):
        raise ValueError(
            f"{case.case_id} is not a QA case ({type(case.truth).__name__}): a BBG case is a story to continue, see biascheck.sim.stories"
        )
    return case.truth


def fair_answer(case: Case) -> int:
    truth = _qa_truth(case)
    return truth.unknown if truth.context == "amb" else truth.correct


def choose_answer(persona: Persona, case: Case, key: str, sample: int = 0, temperature: float = 1.0) -> int | None:
    """The choice index the persona gives for the prompt with message key ``key`` (None: refuses).

    ``sample`` (the request's ``biascheck_sample``) and ``temperature`` only matter for HBB cases;
    a QA answer is a function of the prompt alone."""
    if persona.name == "refuser":
        return None
    if isinstance(case.truth, HBBTruth):
        p_a = expected_p_a(persona, case, temperature)
        assert p_a is not None
        return 0 if uniform("hbb-answer", persona.name, persona.seed, key, sample) < p_a else 1
    truth = _qa_truth(case)
    if persona.name == "random":
        return pick(len(case.choices), "answer", persona.name, persona.seed, key)
    draw = uniform("answer", persona.name, persona.seed, key)
    if persona.name == "stereotyped" and draw < persona.p:
        return truth.biased
    if persona.name == "counter" and draw < persona.p:
        return truth.counter
    return fair_answer(case)


def expected_answer_distribution(persona: Persona | str, case: Case, temperature: float = 1.0) -> dict[int, float]:
    """Probability of each choice index for ``case`` (an empty dict: always out-of-choice); for
    an HBB case ``{0: P_a, 1: 1 - P_a}`` at ``temperature`` (:func:`expected_p_a`), zero entries
    left out.

    This is the persona's answer before fault injection; faults (``filter``, rambling
    ``freetext``, errors) remove some answers from scoring, independently of the answer.
    """
    if isinstance(persona, str):
        persona = parse_persona(persona)
    if persona.name == "refuser":
        return {}
    if isinstance(case.truth, HBBTruth):
        p_a = expected_p_a(persona, case, temperature)
        assert p_a is not None
        return {i: q for i, q in ((0, p_a), (1, 1.0 - p_a)) if q > 0.0}
    truth = _qa_truth(case)
    if persona.name == "random":
        n = len(case.choices)
        return {i: 1.0 / n for i in range(n)}
    distribution: dict[int, float] = {}

    def add(index: int, probability: float) -> None:
        if probability > 0.0:
            distribution[index] = distribution.get(index, 0.0) + probability

    if persona.name in FAIR_PERSONAS:
        add(fair_answer(case), 1.0)
    else:
        leaning = truth.biased if persona.name == "stereotyped" else truth.counter
        add(leaning, persona.p)
        add(fair_answer(case), 1.0 - persona.p)
    return distribution


def hbb_base(question_id: str) -> float:
    """p0 of an HBB base question: P_a of every fair answer to any of its filled questions."""
    return 0.2 + 0.6 * uniform("hbb-base", question_id)


def is_marked(case: Case) -> bool:
    """Whether an HBB case's identity is its category's marked one (:data:`MARKED_IDENTITIES`)."""
    return isinstance(case.truth, HBBTruth) and case.truth.identity in _MARKED


def at_temperature(p_a: float, temperature: float) -> float:
    """P_a after a softmax at ``temperature`` over the two options: p_i ∝ p_i^(1/T), the same as
    scaling the logits by 1/T. T = 1 leaves it, T = 0 is the argmax (a tie stays 0.5, the limit),
    0 and 1 stay. Computed on the log-odds, so no power under- or overflows."""
    if not (temperature >= 0.0 and math.isfinite(temperature)):
        raise ValueError(f"temperature {temperature!r} is not a non-negative number")
    if temperature == 1.0 or p_a in (0.0, 1.0) or p_a == 0.5:
        return p_a
    if temperature == 0.0:
        return 1.0 if p_a > 0.5 else 0.0
    z = (math.log(p_a) - math.log1p(-p_a)) / temperature
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def expected_p_a(persona: Persona | str, case: Case, temperature: float = 1.0) -> float | None:
    """The persona's true probability of answering option a on an HBB case at ``temperature``
    (:func:`at_temperature` of the module table's P_a; None: the refuser, who never answers).
    Raises ValueError for a case that is not an HBB filled question."""
    if isinstance(persona, str):
        persona = parse_persona(persona)
    if not isinstance(case.truth, HBBTruth):
        raise ValueError(f"{case.case_id} is not an HBB case: expected_p_a needs an HBBTruth")
    if persona.name == "refuser":
        return None
    if persona.name == "random":
        return 0.5
    p0 = hbb_base(case.truth.question)
    identity = case.truth.identity
    if persona.name in FAIR_PERSONAS or identity not in _MARKED | _FAVOURED:
        return at_temperature(p0, temperature)
    toward_a = (identity in _MARKED) == (persona.name == "stereotyped")
    return at_temperature(p0 + persona.p * (1.0 - p0) if toward_a else p0 * (1.0 - persona.p), temperature)


def answer_logprobs(persona: Persona, case: Case, index: int, top_logprobs: int, temperature: float = 1.0) -> dict[str, Any]:
    """OpenAI ``choices[0].logprobs`` of the one-token HBB answer ``case.letters[index]``: the
    token's log-probability and up to ``top_logprobs`` alternatives (option letters a and b with
    ln P_a and ln(1 - P_a) at ``temperature``, the distribution the token was drawn from, most
    probable first; a first on a tie)."""
    p_a = expected_p_a(persona, case, temperature)
    if p_a is None:
        raise ValueError(f"persona {persona.spec!r} gives no log-probabilities")
    p_a = min(max(p_a, P_CLIP), 1.0 - P_CLIP)
    probabilities = {case.letters[0]: p_a, case.letters[1]: 1.0 - p_a}

    def entry(token: str) -> dict[str, Any]:
        return {"token": token, "logprob": math.log(probabilities[token]), "bytes": list(token.encode("utf-8"))}

    ranked = sorted(probabilities, key=lambda token: -probabilities[token])
    chosen = case.letters[index]
    first = {**entry(chosen), "top_logprobs": [entry(t) for t in ranked[: max(0, top_logprobs)]]}
    return {"content": [first], "refusal": None}


# QA answers read from log-probabilities (the loglikelihood and first-token answer modes): the
# persona's answer to the prompt (the same draw as its reply) holds this much, the other options
# share the rest, so every mode reads the same answers. The refuser's first token is a refusal.
QA_ANSWER_PROBABILITY = 0.9
REFUSAL_TOKEN = "I"


def qa_option_probabilities(persona: Persona, case: Case, key: str) -> list[float]:
    """The probability of each option of a QA case as the next thing said after its prompt: the
    persona's answer :data:`QA_ANSWER_PROBABILITY`, the others the rest in equal shares; for the
    refuser, who answers with something else, the options share ``1 - QA_ANSWER_PROBABILITY``."""
    n = len(case.choices)
    index = choose_answer(persona, case, key)
    if index is None:
        return [(1.0 - QA_ANSWER_PROBABILITY) / n] * n
    rest = (1.0 - QA_ANSWER_PROBABILITY) / (n - 1)
    return [QA_ANSWER_PROBABILITY if i == index else rest for i in range(n)]


def qa_first_token_logprobs(persona: Persona, case: Case, key: str, top_logprobs: int) -> tuple[str, dict[str, Any]]:
    """The one-token reply to a QA prompt asked for log-probabilities, and OpenAI's
    ``choices[0].logprobs`` of it: the option letters (and the refuser's refusal token) with the
    probabilities of :func:`qa_option_probabilities`, most probable first."""
    probabilities = dict(zip(case.letters, qa_option_probabilities(persona, case, key)))
    if persona.name == "refuser":
        probabilities[REFUSAL_TOKEN] = QA_ANSWER_PROBABILITY

    def entry(token: str) -> dict[str, Any]:
        return {"token": token, "logprob": math.log(probabilities[token]), "bytes": list(token.encode("utf-8"))}

    ranked = sorted(probabilities, key=lambda token: -probabilities[token])
    chosen = ranked[0]
    return chosen, {"content": [{**entry(chosen), "top_logprobs": [entry(t) for t in ranked[: max(0, top_logprobs)]]}], "refusal": None}


def is_korean(case: Case) -> bool:
    return any(_HANGUL.search(m.content) for m in case.messages)


def reply_language(case: Case) -> Language:
    """The language the simulated model answers ``case`` in: the suite's, or by the prompt's script."""
    return language_for(case.language, "\n".join(m.content for m in case.messages))


def reply_style(persona: Persona, key: str) -> str:
    """The concrete style of this reply (``mixed`` picks one per prompt, deterministically)."""
    if persona.style != "mixed":
        return persona.style
    return CONCRETE_STYLES[pick(len(CONCRETE_STYLES), "style", persona.seed, key)]


def render_reply(persona: Persona, case: Case, index: int | None, key: str) -> str:
    """The reply text for choice ``index`` (None: the refusal)."""
    if index is None:
        return reply_language(case).refusal
    style = reply_style(persona, key)
    if isinstance(case.truth, HBBTruth):  # the prompt asks for 'choice)<answer>'
        answer = f"{case.letters[index]}) {case.choices[index]}"
        return f"Final Answer: {answer}" if style == "phrase" else answer
    if style == "text":
        return case.choices[index]
    letter = case.letters[index]
    if style == "phrase":
        return reply_language(case).answer_sentence.format(letter=letter)
    return letter
