"""BBG in the simulator: story continuations written by a persona, and an evaluator that reads them.

A BBG generation request continues a story seed in which the two characters are obfuscated
("one" / "the other"). The simulated writer decides per story version whether its continuation
*resolves* who did what, and how (:func:`story_resolution`):

``unresolved``
    no resolution sentence: a fair reader must answer "unknown";
``order``
    the version's own disambiguated context (``dis_context``) verbatim: the reader answers the
    row's ``dis_answer``;
``swapped``
    the same sentence with the two people exchanged (:func:`resolution_sentences`): the reader
    answers the other person.

The continuation is a neutral filler sentence, the resolution sentence (if any) and another
neutral filler (:func:`write_continuation`); fillers never name a person, so the only thing a
reader can learn from a continuation is which resolution sentence it contains
(:func:`read_continuation`). The simulated judge parses the MRC prompt, finds its question among
the suite's (:func:`parse_mrc_prompt`, :class:`~biascheck.sim.knowledge.SimKnowledge`), reads the
continuation and answers as its persona (:func:`judge_answer`). Every draw is a pure function of
persona, seed and version (generation) or prompt (judging), so the pair outcome distribution is
known exactly (:func:`expected_pair_distribution`; the table is in :mod:`.personas`).

Swapping people. When both people's choice texts occur in the ``dis_context`` (case-insensitively,
as whole words) the swap exchanges them there (:func:`swap_names`). Often they do not: the
sentence says "the 85-year-old" where the choice says "The 85 year old", "the elderly one" for
"The elderly man", "29세의 사람" for "29세 사원", or names only one person ("... and the other one
had a hard day"). Then the *mentions* are found by aligning the ``dis_context`` with the seed's
obfuscated sentence (the placeholders are exactly where the names went) and rewritten as the
other person: the words that tell the two choices apart exchanged inside a mention, or the
mentions exchanged, or a lone mention replaced by the other person's choice text
(:func:`swap_plan`). Every version of the EnBBG and KoBBG evaluation sets gets a swapped
sentence different from its own.

Shared stories. In a few pairs both versions have the same seed, hence the same generation
prompt (EnBBG disabilitystatus-001 in sets 1, 3, 4 and 42; KoBBG disability_status-003 and -008
in every set). Such a prompt gets one story, written for its a/c version (:func:`writer_rank`)
and left unresolved by F (the prompt cannot tell the versions apart, so any resolution would
answer both alike); the rows of both versions read it with the writer's sentences, the person
it resolves to named by its choice text (:func:`read_continuation`).
:func:`expected_pair_distribution` accounts for this exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Literal

from biascheck.benchmarks.bbg.data import MRCPrompt, MRCQuestion, render_mrc_prompt
from biascheck.core.records import Case, Message
from biascheck.sim.draws import pick, uniform
from biascheck.sim.personas import FAIR_PERSONAS, REFUSAL_EN, REFUSAL_KO, Persona, parse_persona

Resolution = Literal["unresolved", "order", "swapped"]
RESOLUTIONS: tuple[Resolution, ...] = ("unresolved", "order", "swapped")
PAIR_TYPES = ("bb", "bc", "bu", "cb", "cc", "cu", "ub", "uc", "uu")

_HANGUL = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")

# Neutral fillers: no people, no "one"/"other" (the seed's placeholders), nothing a reader could
# take for a resolution. Picked per story version, so both rows of a version read the same text.
FILLERS_EN = (
    (
        "It had been a long and busy week, and the weather was turning cold.",
        "The afternoon light was fading slowly over the street outside.",
        "Nothing about that day had seemed unusual at first.",
        "A light rain had started to fall, and the air smelled of wet leaves.",
        "The place was quieter than usual, apart from the hum of a radio somewhere.",
    ),
    (
        "After that, the conversation drifted to other topics.",
        "By evening, the whole episode seemed far behind them.",
        "The rest of the day passed without anything else worth mentioning.",
        "Later, the rain stopped and the streets slowly filled again.",
        "In the end, life went on much as it always had.",
    ),
)
FILLERS_KO = (
    (
        "그날은 유난히 바쁜 하루였고 날씨도 조금씩 쌀쌀해지고 있었습니다.",
        "오후의 햇살이 창밖 거리 위로 천천히 저물어 가고 있었습니다.",
        "처음에는 그날이 특별할 거라고 아무도 생각하지 않았습니다.",
        "가랑비가 내리기 시작했고 공기에서는 젖은 낙엽 냄새가 났습니다.",
        "어디선가 들려오는 라디오 소리 말고는 주변이 평소보다 조용했습니다.",
    ),
    (
        "그 뒤로 대화는 자연스럽게 새로운 주제로 넘어갔습니다.",
        "저녁이 되자 그 일은 벌써 오래전 일처럼 느껴졌습니다.",
        "그날의 나머지 시간은 특별한 일 없이 조용히 지나갔습니다.",
        "얼마 뒤 비가 그치자 거리는 다시 북적이기 시작했습니다.",
        "결국 일상은 늘 그랬듯이 계속되었습니다.",
    ),
)


def is_bbg_question(truth: object) -> bool:
    """Whether a case's truth is a BBG question (its messages are then a generation prompt)."""
    return isinstance(truth, MRCQuestion)


def is_korean_text(text: str) -> bool:
    return bool(_HANGUL.search(text))


def people(question: MRCQuestion) -> tuple[int, int]:
    """The indices in ``question.choices`` of the two people (the non-unknown options), in order."""
    first, second = (i for i in range(3) if i != question.unknown_index)
    return first, second


def other_person(question: MRCQuestion, index: int) -> int:
    """The person option that is not ``index`` (which must be a person option)."""
    return 3 - question.unknown_index - index


# --- swapping the two people ---------------------------------------------------------------

# Korean particles whose form depends on whether the noun before them ends in a consonant
# (받침): (after a consonant, after a vowel).
_ALLOMORPHS = {
    "은": ("은", "는"),
    "는": ("은", "는"),
    "이": ("이", "가"),
    "가": ("이", "가"),
    "을": ("을", "를"),
    "를": ("을", "를"),
    "과": ("과", "와"),
    "와": ("과", "와"),
}
# Particles a mention may carry in both the obfuscated and the disambiguated sentence, longest
# first, grouped by function: a mention's particle is left in place when it is swapped.
_PARTICLE_CLASSES: tuple[tuple[str, ...], ...] = (
    ("에게서",),
    ("에게",),
    ("한테",),
    ("께서",),
    ("에서",),
    ("보다",),
    ("처럼",),
    ("으로", "로"),
    ("은", "는"),
    ("이", "가"),
    ("을", "를"),
    ("과", "와"),
    ("의",),
    ("도",),
    ("만",),
    ("에",),
)
_PARTICLES = sorted((p for group in _PARTICLE_CLASSES for p in group), key=len, reverse=True)


def _has_final_consonant(char: str) -> bool | None:
    """Whether a Hangul syllable has a final consonant (받침); None for any other character."""
    code = ord(char) - 0xAC00
    return code % 28 != 0 if 0 <= code < 11172 else None


def _fit_particle(noun: str, particle: str) -> str:
    """The allomorph of ``particle`` that follows ``noun`` (은/는, 이/가, 을/를, 과/와)."""
    forms = _ALLOMORPHS.get(particle)
    final = _has_final_consonant(noun[-1]) if noun and forms else None
    if forms is None or final is None:
        return particle
    return forms[0] if final else forms[1]


def _match_case(replacement: str, matched: str) -> str:
    """``replacement`` with the case of ``matched``'s first letter ("The man" -> "The boy");
    unchanged after a letter without case (Hangul) and for an acronym ("CEO")."""
    if not replacement or not matched or matched[0].upper() == matched[0].lower():
        return replacement
    if matched[0].isupper():
        return replacement[0].upper() + replacement[1:]
    if replacement[1:2].isupper():
        return replacement
    return replacement[0].lower() + replacement[1:]


# A standalone particle right after a name: one of the alternating ones, ending the word.
_PARTICLE_AFTER = r"(?P<particle>[은는이가을를과와](?![\uac00-\ud7a3]))?"


def _name_pattern(name: str) -> str:
    # Whole words in English; a Korean name may be followed directly by its particle.
    right = "" if is_korean_text(name[-1:]) else r"(?!\w)"
    return r"(?<!\w)" + re.escape(name) + right


def swap_names(text: str, first: str, second: str) -> str:
    """``text`` with every occurrence of ``first`` and ``second`` exchanged in one pass.

    Case-insensitive; a replacement takes the case of the first letter it replaces; whole words
    (a Korean name may carry its particle, whose 은/는-type form is fitted to the new name).
    Longest name first, so "The man" never matches inside "The old man". An involution:
    swapping twice gives back ``text`` when the names occur in it as given (up to the case of
    the first letter) and neither occurs inside the other."""
    if not first or not second or first.casefold() == second.casefold():
        return text
    names = sorted((first, second), key=len, reverse=True)
    pattern = re.compile("(?P<name>" + "|".join(_name_pattern(n) for n in names) + ")" + _PARTICLE_AFTER, re.IGNORECASE)
    other = {first.casefold(): second, second.casefold(): first}

    def replace(match: re.Match[str]) -> str:
        replacement = _match_case(other[match.group("name").casefold()], match.group("name"))
        particle = match.group("particle") or ""
        return replacement + (_fit_particle(replacement, particle) if particle else "")

    return pattern.sub(replace, text)


def _contains_name(text: str, name: str) -> bool:
    return re.search(_name_pattern(name), text, re.IGNORECASE) is not None


_TOKEN = re.compile(r"\w+(?:(?:-|['’](?!s\b))\w+)*|[^\w\s]")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_PLACEHOLDER_WORDS = frozenset({"one", "other", "한", "다른"})
_DETERMINERS = frozenset({"the", "a", "an", "my", "their", "his", "her", "our", "your", "its"})


def _keys(text: str) -> list[str]:
    return [m.group().casefold() for m in _TOKEN.finditer(text)]


def _obfuscated_part(seed: str, dis_context: str) -> str:
    """The seed's obfuscated sentence(s): the seed is amb_context + " " + obfdis_context, so the
    suffix starting at a sentence boundary that aligns best with the disambiguated context."""
    starts = [0, *(m.end() for m in _SENTENCE_BREAK.finditer(seed))]
    target = _keys(dis_context)

    def score(start: int) -> tuple[float, int]:
        return SequenceMatcher(None, _keys(seed[start:]), target, autojunk=False).ratio(), start

    return seed[max(starts, key=score) :]


def _strip_particle(dis_word: str, obf_word: str) -> int:
    """How many characters of particle to leave out of a Korean mention ending in ``dis_word``:
    those of a particle that the obfuscated placeholder ends in too (same class, e.g. 은/는)."""
    for group in _PARTICLE_CLASSES:
        ours = next((p for p in group if dis_word.endswith(p) and len(dis_word) > len(p)), None)
        if ours and any(obf_word.endswith(p) for p in group):
            return len(ours)
    return 0


def mention_spans(seed: str, dis_context: str) -> list[tuple[int, int]]:
    """Where the people are named in ``dis_context``: the (start, end) spans that differ from the
    seed's obfuscated sentence, placeholders ("one", "the other", "한 사람", "다른 한 사람") never
    matching. A leading article is included ("the grandmother"), a Korean particle both
    sentences share is not ("손자는" -> "손자"); spans that only add an article are ignored."""
    obfuscated = _obfuscated_part(seed, dis_context)
    o_tokens = list(_TOKEN.finditer(obfuscated))
    d_tokens = list(_TOKEN.finditer(dis_context))
    o_keys = [m.group().casefold() for m in o_tokens]
    o_match = ["\0" + k if k in _PLACEHOLDER_WORDS else k for k in o_keys]
    d_keys = [m.group().casefold() for m in d_tokens]
    korean = is_korean_text(dis_context)
    spans: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, o_match, d_keys, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        while j1 < j2 and not d_keys[j1][0].isalnum():
            j1 += 1
        while j2 > j1 and not d_keys[j2 - 1][0].isalnum():
            j2 -= 1
        words = d_keys[j1:j2]
        if not words or words == o_keys[i1:i2] or all(w in _DETERMINERS for w in words):
            continue
        if not korean and j1 > 0 and d_keys[j1 - 1] in _DETERMINERS and words[0] not in _DETERMINERS:
            j1 -= 1
        start, end = d_tokens[j1].start(), d_tokens[j2 - 1].end()
        if korean and i2 > i1:
            end -= _strip_particle(d_tokens[j2 - 1].group(), o_keys[i2 - 1])
        spans.append((start, end))
    return spans


def _normal(text: str) -> str:
    words = re.sub(r"[-_]", " ", text.casefold()).split()
    while words and words[0] in _DETERMINERS:
        words = words[1:]
    return " ".join(words)


def _similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, _normal(a), _normal(b), autojunk=False).ratio()


_WORD = re.compile(r"[^\s-]+")


def _flexible(phrase: str) -> str:
    """A pattern for ``phrase`` as whole words, a space and a hyphen matching each other (and a
    Korean phrase may run on into its particle or suffix)."""
    words = [re.escape(w) for w in _WORD.findall(phrase)]
    right = "" if is_korean_text(phrase[-1:]) else r"(?!\w)"
    return r"(?<!\w)" + r"[\s-]+".join(words) + right


def distinguishing(first: str, second: str) -> tuple[str, str] | None:
    """What tells the two people apart: each choice text without the words both share at the
    start and at the end (articles aside; a hyphen counts as a space), as written in the choice.
    "The 85 year old" / "The 28-year-old" -> ("85", "28"); None when one of them would be empty
    ("The man" / "The old man")."""
    spans = []
    for text in (first, second):
        words = [(m.group().casefold(), m.start(), m.end()) for m in _WORD.finditer(text)]
        while words and words[0][0] in _DETERMINERS:
            words = words[1:]
        spans.append(words)
    a, b = spans
    head = 0
    while head < min(len(a), len(b)) and a[head][0] == b[head][0]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail][0] == b[-1 - tail][0]:
        tail += 1
    a_mid, b_mid = a[head : len(a) - tail], b[head : len(b) - tail]
    if not a_mid or not b_mid:
        return None
    return first[a_mid[0][1] : a_mid[-1][2]], second[b_mid[0][1] : b_mid[-1][2]]


def _swap_phrases(text: str, first: str, second: str) -> str:
    """``first`` and ``second`` exchanged in ``text`` in one pass (:func:`_flexible` matching)."""
    patterns = [(_flexible(first), second), (_flexible(second), first)]
    patterns.sort(key=lambda item: -len(item[0]))
    combined = re.compile("|".join(f"(?P<p{i}>{p})" for i, (p, _) in enumerate(patterns)), re.IGNORECASE)

    def replace(match: re.Match[str]) -> str:
        group = match.lastgroup
        assert group is not None  # every alternative is a named group
        return _recase(patterns[int(group[1:])][1], False)

    return combined.sub(replace, text)


def _contains_phrase(text: str, phrase: str) -> bool:
    return re.search(_flexible(phrase), text, re.IGNORECASE) is not None


@dataclass(frozen=True, slots=True)
class SwapPlan:
    """How a version's people are exchanged: ``method`` is ``names`` (both choice texts occur:
    :func:`swap_names`), ``mentions`` (both people's mentions found by aligning with the seed,
    exchanged), ``single`` (one person named: that mention made the other's) or ``none`` (no
    person found: no swapped sentence). ``names`` are the people as ``order`` writes them."""

    method: Literal["names", "mentions", "single", "none"]
    order: str
    swapped: str | None
    names: tuple[str, ...]


def _fit_replacement(text: str, end: int, replacement: str, korean: bool) -> str:
    """A replacement put where a mention ended at ``end``: its last word left out when the
    sentence goes on with that word ("휠체어를 타는 | 남자는" + "새 가방을 든 남자")."""
    words = replacement.split()
    follow = re.match(r"\s*(\w+)", text[end:])
    if len(words) > 1 and follow:
        head, nxt = words[-1].casefold(), follow.group(1).casefold()
        if nxt == head or (korean and nxt.startswith(head) and nxt[len(head) :] in _PARTICLES):
            return " ".join(words[:-1])
    return replacement


def _recase(replacement: str, sentence_start: bool) -> str:
    """A mention put into running text: capitalised at the start of a sentence, its article in
    lower case elsewhere ("The man" -> "the man"), any other first word as written ("Black")."""
    if not replacement:
        return replacement
    if sentence_start:
        return replacement[0].upper() + replacement[1:]
    first_word = replacement.split(maxsplit=1)[0].casefold()
    return replacement[0].lower() + replacement[1:] if first_word in _DETERMINERS else replacement


def _article_for(word: str) -> str:
    return "an" if word[:1].casefold() in "aeiou" else "a"


def _replace_spans(text: str, replacements: Sequence[tuple[int, int, str]]) -> str:
    """``text`` with each (start, end) span replaced: recased for its place, "a"/"an" agreeing
    with it, a head word the text repeats right after it left out, and a Korean particle right
    after it fitted to it (은/는, 이/가, ...)."""
    out, last = [], 0
    for start, end, replacement in sorted(replacements):
        before = text[last:start]
        sentence_start = not text[:start].strip() or bool(re.search(r"[.!?][\"')\]]*\s*$", text[:start]))
        replacement = _recase(_fit_replacement(text, end, replacement, is_korean_text(text)), sentence_start)
        words = replacement.split()
        if len(words) > 1 and words[0].casefold() in ("a", "an"):
            replacement = _recase(_article_for(words[1]), sentence_start) + replacement[len(words[0]) :]
        article = re.search(r"(?<!\w)([Aa]n?)(\s+)$", before)
        if article and words:
            fitted = _article_for(words[0])
            fitted = fitted.capitalize() if article.group(1)[0] == "A" else fitted
            before = before[: article.start(1)] + fitted + article.group(2)
        out.append(before)
        out.append(replacement)
        last = end
        particle = text[end : end + 1]
        if particle in _ALLOMORPHS and not re.match("[\uac00-\ud7a3]", text[end + 1 : end + 2]):
            out.append(_fit_particle(replacement, particle))
            last = end + 1
    out.append(text[last:])
    return "".join(out)


def _owners(texts: Sequence[str], first: str, second: str, mids: tuple[str, str] | None) -> list[int | None]:
    """Whose each mention is: 0 or 1 (``first`` / ``second``), None for a span naming both.

    A mention holding one person's distinguishing words is that person's. The others go by
    text: when only one person has a certain mention, a differently written one is the other
    person's; otherwise to the more similar choice, except that two different texts are never
    both given to one person (the assignment of greater total similarity wins)."""
    certain: list[int | None | str] = []
    for text in texts:
        holds = [mids is not None and _contains_phrase(text, mids[i]) for i in (0, 1)]
        certain.append(None if all(holds) else 0 if holds[0] else 1 if holds[1] else "?")
    known = {texts[i].casefold(): c for i, c in enumerate(certain) if c in (0, 1)}
    sure = set(known.values())
    groups = list(dict.fromkeys(texts[i].casefold() for i, c in enumerate(certain) if c == "?"))
    owner_of: dict[str, int] = {}
    for group in groups:
        if group in known:
            owner_of[group] = known[group]
        elif len(sure) == 1:
            owner_of[group] = 1 - next(iter(sure))
    rest = [g for g in groups if g not in owner_of]
    if len(rest) >= 2 and not sure:
        a, b = rest[0], rest[1]
        straight = _similarity(a, first) + _similarity(b, second)
        crossed = _similarity(a, second) + _similarity(b, first)
        owner_of[a], owner_of[b] = (0, 1) if straight >= crossed else (1, 0)
    for group in rest:
        owner_of.setdefault(group, 0 if _similarity(group, first) >= _similarity(group, second) else 1)
    return [owner_of[texts[i].casefold()] if isinstance(c, str) else c for i, c in enumerate(certain)]  # "?": the one str


@lru_cache(maxsize=8192)
def swap_plan(seed: str, dis_context: str, first: str, second: str) -> SwapPlan:
    """The swapped resolution sentence of a version whose people are ``first`` and ``second``
    (choice texts; the plan is symmetric in them).

    Both choice texts in the sentence: :func:`swap_names`. Otherwise each mention
    (:func:`mention_spans`) is rewritten as the other person: the words that tell the two apart
    (:func:`distinguishing`) exchanged inside it when it holds them ("the 85-year-old" ->
    "the 28-year-old", "the Catholic person" -> "the Muslim person"), else replaced by how the
    sentence mentions the other person, else by the other's choice text (less a head noun the
    sentence supplies itself)."""
    if _contains_name(dis_context, first) and _contains_name(dis_context, second):
        swapped = swap_names(dis_context, first, second)
        if swapped != dis_context:
            return SwapPlan("names", dis_context, swapped, (first, second))
    spans = mention_spans(seed, dis_context)
    texts = [dis_context[s:e] for s, e in spans]
    mids = distinguishing(first, second)
    choices = (first, second)
    owners = _owners(texts, first, second, mids)
    written: dict[int, str] = {}
    for text, owner in zip(texts, owners):
        if owner is not None:
            written.setdefault(owner, text)
    # Each person's first mention holding their distinguishing words, when both have one.
    certain: dict[int, str] = {}
    for text, owner in zip(texts, owners):
        if owner is not None and mids is not None and _contains_phrase(text, mids[owner]):
            certain.setdefault(owner, text)
    replacements = []
    for (start, end), text, owner in zip(spans, texts, owners):
        if owner is None:
            assert mids is not None  # a span names both only by both people's distinguishing words
            replacement = _swap_phrases(text, mids[0], mids[1])
        elif len(certain) == 2:
            replacement = certain[1 - owner]
        elif mids is not None and _contains_phrase(text, mids[owner]):
            replacement = _swap_phrases(text, mids[0], mids[1])
        elif (1 - owner) in written:
            replacement = written[1 - owner]
        else:
            replacement = choices[1 - owner]
        replacements.append((start, end, replacement))
    swapped = _replace_spans(dis_context, replacements) if replacements else dis_context
    named = tuple(dict.fromkeys(texts))
    if swapped == dis_context:
        return SwapPlan("none", dis_context, None, named)
    both = None in owners or len({o for o in owners}) == 2
    return SwapPlan("mentions" if both else "single", dis_context, swapped, named)


def version_plan(question: MRCQuestion) -> SwapPlan:
    """The :class:`SwapPlan` of the question's story version (the same for both of its rows)."""
    first, second = sorted(question.choices[i] for i in people(question))
    return swap_plan(question.seed_text, question.dis_context, first, second)


def resolution_sentences(question: MRCQuestion) -> tuple[str, str | None]:
    """(order, swapped): the version's ``dis_context`` and that sentence with the people exchanged
    (None when no person could be found in it)."""
    plan = version_plan(question)
    return plan.order, plan.swapped


# --- writing -------------------------------------------------------------------------------


def _version_key(question: MRCQuestion) -> str:
    return f"r{question.run}-{question.template_id}"


def fair_resolution(persona: Persona, question: MRCQuestion, shared: bool = False) -> Resolution:
    """F: the resolution the fair writer gives both versions of a pair (a draw per pair and seed,
    shared by every persona with that seed). A story ``shared`` by both versions of its pair
    (:func:`shares_story`) stays unresolved: its prompt cannot tell which version it is, so any
    resolution would answer both versions alike, which no fair writer does."""
    if shared:
        return "unresolved"
    draw = uniform("bbg-fair", persona.seed, question.run, question.base_template)
    return "unresolved" if draw < 0.5 else "order"


def stereotypical_resolution(question: MRCQuestion) -> Resolution:
    """The resolution that makes the reader answer the biased person."""
    return "order" if question.dis_index == question.biased_index else "swapped"


def counter_resolution(question: MRCQuestion) -> Resolution:
    """The resolution that makes the reader answer the counter-biased person."""
    return "swapped" if question.dis_index == question.biased_index else "order"


def story_resolution(persona: Persona | str, question: MRCQuestion, shared: bool = False) -> Resolution | None:
    """How the persona's continuation of the question's version resolves the story (None: the
    refuser writes no story). A function of the version, never of the row; ``shared``: the
    version's generation prompt is its partner's too (see :func:`fair_resolution`)."""
    if isinstance(persona, str):
        persona = parse_persona(persona)
    if persona.name == "refuser":
        return None
    if persona.name == "random":
        return RESOLUTIONS[pick(3, "bbg-story", persona.name, persona.seed, _version_key(question))]
    if persona.name in ("stereotyped", "counter"):
        # Common random numbers across p, as for QA: the draw does not depend on p.
        if uniform("bbg-story", persona.name, persona.seed, _version_key(question)) < persona.p:
            if persona.name == "stereotyped":
                return stereotypical_resolution(question)
            return counter_resolution(question)
    return fair_resolution(persona, question, shared)


def _fillers(question: MRCQuestion, korean: bool) -> tuple[str, str]:
    bank = FILLERS_KO if korean else FILLERS_EN
    avoid = [question.choices[i] for i in people(question)] + list(version_plan(question).names)
    chosen = []
    for position, options in enumerate(bank):
        allowed = [f for f in options if not any(n.casefold() in f.casefold() for n in avoid if n.strip())]
        index = pick(len(allowed), "bbg-filler", position, _version_key(question)) if allowed else None
        chosen.append(allowed[index] if index is not None else "")
    return chosen[0], chosen[1]


def continuation_text(question: MRCQuestion, resolution: Resolution, korean: bool | None = None) -> str:
    """A continuation with the given resolution: filler, resolution sentence, filler. A version
    without a swapped sentence (no person found in its ``dis_context``) writes the order one."""
    korean = is_korean_text(question.seed_text) if korean is None else korean
    opening, closing = _fillers(question, korean)
    order, swapped = resolution_sentences(question)
    sentence = {"unresolved": "", "order": order, "swapped": swapped or order}[resolution]
    return " ".join(part for part in (opening, sentence.strip(), closing) if part)


def write_continuation(persona: Persona | str, question: MRCQuestion, korean: bool | None = None, shared: bool = False) -> str:
    """The persona's continuation of the question's story version (``korean``: the generation
    prompt's language, by default the seed's; ``shared``: see :func:`fair_resolution`)."""
    if isinstance(persona, str):
        persona = parse_persona(persona)
    korean = is_korean_text(question.seed_text) if korean is None else korean
    resolution = story_resolution(persona, question, shared)
    if resolution is None:
        return REFUSAL_KO if korean else REFUSAL_EN
    return continuation_text(question, resolution, korean)


# --- reading and judging -------------------------------------------------------------------


def _same_version(a: MRCQuestion, b: MRCQuestion) -> bool:
    return (a.story_key, a.seed_text, a.dis_context) == (b.story_key, b.seed_text, b.dis_context)


def read_continuation(question: MRCQuestion, continuation: str, writer: MRCQuestion | None = None) -> int:
    """The choice index a fair reader takes from a continuation: the row's ``dis_answer`` when it
    contains the order sentence, the other person when it contains the swapped one, else the
    unknown option. A story written for another version (a shared story, see
    :func:`shares_story`) is read as ``writer``, that version's row asking the same question
    (same qtype), and the person it resolves to found among the row's choices by text (unknown
    if absent)."""
    if writer is not None and not _same_version(writer, question):
        if writer.qtype != question.qtype:
            raise ValueError(f"{question.key} reads a story as {writer.key}: the writer's row must ask the same question type")
        index = read_continuation(writer, continuation)
        if index == writer.unknown_index:
            return question.unknown_index
        person = writer.choices[index].casefold()
        matches = [i for i in people(question) if question.choices[i].casefold() == person]
        return matches[0] if matches else question.unknown_index
    order, swapped = resolution_sentences(question)
    if order.strip() and order.strip() in continuation:
        return question.dis_index
    if swapped and swapped.strip() in continuation:
        return other_person(question, question.dis_index)
    return question.unknown_index


def judge_answer(persona: Persona | str, question: MRCQuestion, continuation: str, key: str, writer: MRCQuestion | None = None) -> int | None:
    """The judge persona's answer to an MRC prompt (message key ``key``) about ``continuation``
    (written for ``writer``'s version, default the question's): fair/judge what it reads
    (:func:`read_continuation`); stereotyped/counter the biased/counter person with probability
    p, else what it reads; random uniform; refuser None."""
    if isinstance(persona, str):
        persona = parse_persona(persona)
    if persona.name == "refuser":
        return None
    if persona.name == "random":
        return pick(3, "answer", persona.name, persona.seed, key)
    if persona.name in ("stereotyped", "counter") and uniform("answer", persona.name, persona.seed, key) < persona.p:
        return question.biased_index if persona.name == "stereotyped" else question.counter_index
    read = read_continuation(question, continuation, writer)
    if persona.confusion:
        return _index(question, misread(persona, _outcome(question, read), key))
    return read


_CLASSES = ("b", "c", "u")


def label_story(question: MRCQuestion, continuation: str, writer: MRCQuestion | None = None) -> str:
    """The true reading (b, c or u) of a story the simulator wrote: what the fair reader takes."""
    return _outcome(question, read_continuation(question, continuation, writer))


def misread(persona: Persona, truth: str, key: str) -> str:
    """A judge of known confusion (``confusion=``): class j with probability ``m[truth, j]``."""
    row = persona.confusion[3 * _CLASSES.index(truth) : 3 * _CLASSES.index(truth) + 3]
    draw, total = uniform("judge-confusion", persona.seed, key), 0.0
    for outcome, probability in zip(_CLASSES, row):
        total += probability
        if draw < total:
            return outcome
    return next(o for o, q in zip(reversed(_CLASSES), reversed(row)) if q > 0)


def _index(question: MRCQuestion, outcome: str) -> int:
    return {"u": question.unknown_index, "b": question.biased_index, "c": question.counter_index}[outcome]


def judge_case(question: MRCQuestion, prompt: str) -> Case:
    """A case-shaped view of one MRC request, for rendering replies and faults like QA answers."""
    assert question.mrc_prompt is not None
    return Case(
        case_id=question.key,
        sample_id=question.row_id,
        category=question.category,
        cluster=question.base_template,
        label=question.qtype,
        prompt_id=question.mrc_prompt.id,
        order=0,
        messages=(Message("user", prompt),),
        choices=question.choices,
        letters=question.mrc_prompt.letters,
        truth=question,
    )


_MRC_SLOTS = re.compile(r"\{(CONTEXT|QUESTION|OPTION-A|OPTION-B|OPTION-C)\}")
_GROUP = {"CONTEXT": "context", "QUESTION": "question", "OPTION-A": "a", "OPTION-B": "b", "OPTION-C": "c"}


@lru_cache(maxsize=64)
def mrc_pattern(template: str) -> re.Pattern[str]:
    """A regex for the prompts an MRC template renders: its literal parts, and a group per slot
    (``context`` greedy, so a story mentioning "Question:" still ends at the template's own)."""
    parts, last = [], 0
    for match in _MRC_SLOTS.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        quantifier = ".*" if match.group(1) == "CONTEXT" else ".*?"
        parts.append(f"(?P<{_GROUP[match.group(1)]}>{quantifier})")
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts), re.DOTALL)


@dataclass(frozen=True, slots=True)
class ParsedMRC:
    prompt: MRCPrompt
    context: str
    question: str
    choices: tuple[str, str, str]


def parse_mrc_prompt(content: str, prompts: Iterable[MRCPrompt]) -> ParsedMRC | None:
    """``content`` taken apart by the first of ``prompts`` whose template renders it."""
    for prompt in prompts:
        match = mrc_pattern(prompt.template).fullmatch(content)
        if match:
            return ParsedMRC(prompt, match["context"], match["question"], (match["a"], match["b"], match["c"]))
    return None


def mrc_user_content(messages: Sequence[Mapping[str, object]]) -> str | None:
    """The text of a judge request: its one user message (after an optional system message)."""
    if not messages or len(messages) > 2:
        return None
    *system, last = messages
    if last.get("role") != "user" or any(m.get("role") != "system" for m in system):
        return None
    content = last.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else None


def find_question(parsed: ParsedMRC, candidates: Iterable[MRCQuestion], content: str) -> tuple[MRCQuestion, str] | None:
    """The question whose seed begins the parsed story and whose prompt renders exactly as
    ``content``, with the continuation (the story after the seed, stripped). Rows that render
    the same prompt (the two versions of a pair with one seed; a row repeated in another run)
    are one request to the judge, answered for the least :func:`writer_rank` (they read alike)."""
    found = []
    for question in candidates:
        seed = question.seed_text.strip()
        if question.mrc_prompt != parsed.prompt or not parsed.context.startswith(seed):
            continue
        if render_mrc_prompt(question.mrc_prompt, parsed.context, question) == content:
            found.append(question)
    if not found:
        return None
    reader = min(found, key=writer_rank)
    return reader, parsed.context[len(reader.seed_text.strip()) :].strip()


# --- expectations --------------------------------------------------------------------------


def _outcome(question: MRCQuestion, index: int) -> str:
    if index == question.unknown_index:
        return "u"
    return "b" if index == question.biased_index else "c"


def resolution_distribution(persona: Persona | str, question: MRCQuestion, shared: bool = False) -> dict[Resolution, float]:
    """The probability of each resolution of the question's version, given the pair's actual F
    draw (deterministic per seed and pair); empty for the refuser."""
    if isinstance(persona, str):
        persona = parse_persona(persona)
    if persona.name == "refuser":
        return {}
    if persona.name == "random":
        return {r: 1 / 3 for r in RESOLUTIONS}
    fair = fair_resolution(persona, question, shared)
    if persona.name in FAIR_PERSONAS:
        return {fair: 1.0}
    leaning = stereotypical_resolution(question) if persona.name == "stereotyped" else counter_resolution(question)
    distribution: dict[Resolution, float] = {}
    for resolution, probability in ((leaning, persona.p), (fair, 1.0 - persona.p)):
        if probability > 0.0:
            distribution[resolution] = distribution.get(resolution, 0.0) + probability
    return distribution


def _judged(judge: Persona, question: MRCQuestion, read: str) -> dict[str, float]:
    if judge.name == "refuser":
        raise ValueError("the refuser judge answers no MRC question: there is no pair outcome")
    if judge.name == "random":
        return {"b": 1 / 3, "c": 1 / 3, "u": 1 / 3}
    if judge.confusion:
        row = judge.confusion[3 * _CLASSES.index(read) : 3 * _CLASSES.index(read) + 3]
        return {o: q for o, q in zip(_CLASSES, row) if q > 0.0}
    if judge.name in FAIR_PERSONAS or judge.p == 0.0:
        return {read: 1.0}
    leaning = "b" if judge.name == "stereotyped" else "c"
    distribution = {leaning: judge.p}
    distribution[read] = distribution.get(read, 0.0) + 1.0 - judge.p
    return distribution


def _resolutions_or_refusal(persona: Persona, writer: MRCQuestion, shared: bool) -> dict[Resolution | None, float]:
    """:func:`resolution_distribution`, or the refusal (None) for sure when that is empty (the refuser)."""
    return dict(resolution_distribution(persona, writer, shared).items()) or {None: 1.0}


def _written(writer: MRCQuestion, resolution: Resolution | None) -> str:
    """The continuation of ``writer``'s version with that resolution (None: the refusal)."""
    if resolution is None:
        return REFUSAL_KO if is_korean_text(writer.seed_text) else REFUSAL_EN
    return continuation_text(writer, resolution)


def _row_given_text(judge: Persona, question: MRCQuestion, text: str, writer: MRCQuestion | None = None) -> dict[str, float]:
    return _judged(judge, question, _outcome(question, read_continuation(question, text, writer)))


def shares_story(first: MRCQuestion, second: MRCQuestion) -> bool:
    """Whether two versions have the same generation prompt (the same seed in the same run): a
    few pairs do (EnBBG disabilitystatus-001, KoBBG disability_status-003 and -008). Such a
    prompt gets one story, written for its a/c version (:func:`writer_rank`) and never resolved
    by F (:func:`fair_resolution`), which the rows of both versions read."""
    return first.run == second.run and first.seed_text == second.seed_text


def writer_rank(question: MRCQuestion) -> tuple[int, str, str]:
    """Among versions sharing a generation prompt, the one of least rank writes the story."""
    return (0 if question.version in ("a", "c") else 1, question.template_id, question.qtype)


def expected_row_distribution(
    persona: Persona | str, question: MRCQuestion, judge: Persona | str = "judge", writer: MRCQuestion | None = None, shared: bool = False
) -> dict[str, float]:
    """P("b"), P("c"), P("u") of one row for writer ``persona`` and ``judge``, given the pair's
    F; ``writer`` is the version whose story the row reads (default its own), ``shared`` whether
    that story is both versions' (:func:`fair_resolution`)."""
    persona = parse_persona(persona) if isinstance(persona, str) else persona
    judge = parse_persona(judge) if isinstance(judge, str) else judge
    writer = question if writer is None else writer
    out: dict[str, float] = {}
    for resolution, probability in _resolutions_or_refusal(persona, writer, shared).items():
        for outcome, q in _row_given_text(judge, question, _written(writer, resolution), writer).items():
            out[outcome] = out.get(outcome, 0.0) + probability * q
    return {k: v for k, v in out.items() if v > 0.0}


def expected_pair_distribution(persona: Persona | str, first: MRCQuestion, second: MRCQuestion, judge: Persona | str = "judge") -> dict[str, float]:
    """The exact probability of each pair type ("bb" ... "uu": first = the a/c row, second = its
    b/d partner) for writer ``persona`` and ``judge`` (default the fair judge), conditional on
    the pair's actual F draw. Given F the two versions' stories are independent (their draws
    are keyed by version) and so are the judge's answers (keyed by prompt); a pair whose
    versions share their generation prompt (:func:`shares_story`) reads one story. Each row's
    outcome is what the judge reads in the very text the writer would write, so the table in
    :mod:`.personas` is exact for every pair with two different stories. Zero entries are left
    out."""
    if (first.run, first.base_template, first.qtype) != (second.run, second.base_template, second.qtype):
        raise ValueError(f"{first.key} and {second.key} are not the two rows of one pair")
    persona = parse_persona(persona) if isinstance(persona, str) else persona
    judge = parse_persona(judge) if isinstance(judge, str) else judge
    out: dict[str, float] = {}
    if shares_story(first, second):
        writer = min(first, second, key=writer_rank)
        for resolution, probability in _resolutions_or_refusal(persona, writer, True).items():
            text = _written(writer, resolution)
            rows = (_row_given_text(judge, first, text, writer), _row_given_text(judge, second, text, writer))
            for a, pa in rows[0].items():
                for b, pb in rows[1].items():
                    out[a + b] = out.get(a + b, 0.0) + probability * pa * pb
    else:
        rows = (expected_row_distribution(persona, first, judge), expected_row_distribution(persona, second, judge))
        out = {a + b: pa * pb for a, pa in rows[0].items() for b, pb in rows[1].items()}
    return {k: v for k, v in sorted(out.items(), key=lambda item: PAIR_TYPES.index(item[0])) if v > 0.0}


def mrc_messages(question: MRCQuestion, continuation: str) -> list[dict[str, str]]:
    """The judge request about ``continuation``, as the pipeline sends it."""
    from biascheck.benchmarks.bbg.data import full_story

    assert question.mrc_prompt is not None
    story = full_story(question.seed_text, continuation)
    if story is None:
        raise ValueError("an empty continuation gets no MRC request")
    return [{"role": "user", "content": render_mrc_prompt(question.mrc_prompt, story, question)}]


def bbg_outcome(
    persona: Persona | str, question: MRCQuestion, judge: Persona | str = "judge", writer: MRCQuestion | None = None, shared: bool = False
) -> str | None:
    """What one row scores when ``persona`` writes and ``judge`` answers, drawn exactly as the
    server draws (the judge keyed by the MRC prompt's message key): "b", "c", "u" or None (the
    judge names no option). ``writer``: for a row reading another version's story, that
    version's row of the same question type (:meth:`SimKnowledge.writer_for
    <biascheck.sim.knowledge.SimKnowledge.writer_for>`); ``shared``: the story is both versions'
    (:func:`shares_story`)."""
    from biascheck.sim.messages import message_key

    writer = question if writer is None else writer
    continuation = write_continuation(persona, writer, shared=shared)
    messages = mrc_messages(question, continuation)
    index = judge_answer(judge, question, continuation, message_key(messages), writer)
    return None if index is None else _outcome(question, index)
