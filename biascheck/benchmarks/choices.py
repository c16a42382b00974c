"""Reading a model's reply as one of the options it was shown, the way a careful reader would.

Used for every multiple-choice reply: KoBBQ and BBQ answers and the BBG judge's readings, in any
language with a pack registered in :mod:`biascheck.benchmarks.languages`: the patterns below are
compiled from the union of every registered pack's fragments (a Spanish suite's model may answer
in English), on the first reading and again after a pack is registered, and nothing here knows a
language. The examples below are English and Korean; every pack's words serve likewise ("La
respuesta es B", "答案是C", "Die Antwort ist A", "No és la C", "A或B").

A reply *declares* an option in one of two places:

- its **lead**: what its first line starts with (echoed option lists skipped): a lone letter
  (``C``, ``(C)``, ``[C]``, ``**C**``, with a pack's article: ``La C.``, ``l'A``), an option's
  text, a letter with its own text (``C) 할머니``, ``C 할머니``), or a letter or text followed by a
  separator and an explanation (``C. 맥락에 …``, ``C입니다. 왜냐하면 …``, ``할머니입니다. …``,
  ``C - The grandmother``, ``A입니다만 확실하지 않습니다``; a pack's connective separates too:
  ``Ich würde C wählen``);
- an **answer phrase** anywhere: ``the answer is C``, ``Answer: C``, ``I think it's A.``,
  ``Option C``, ``I'd go with B``, ``C is correct``, ``정답은 C입니다``, ``C가 정답입니다``,
  ``Probably B, but I am not sure``.

The reply parses as an option when every declaration names that same option. Two different
options declared (``A or B``, ``B: 할머니, C: 알 수 없음``, ``C. Actually the answer is A``), or
none, make it out of choice (``None``). What an explanation merely mentions ("…because A is not
mentioned") is no declaration, nor are options listed in a sentence that goes on to negate them
("B. Option A and C do not fit the context." is B). Everything is read after Unicode NFKC folding, case folding and
removal of markdown emphasis, so ``**Ｃ**`` is ``C``.

Where this departs from the KoBBQ reference post-processing (naver-ai/KoBBQ,
``evaluation/3_postprocess_predictions.py``), docs/metrics.md ("Answer parsing") lists each
case and why; ``tests/test_answer_parser.py`` holds both parsers' readings of every case.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from biascheck.benchmarks.languages import LANGUAGES, Language, pack_generation

__all__ = ["parse_answer"]

# Markdown and HTML emphasis carry no meaning in an answer: "**C**", "`C`", "__C__", "<b>C</b>".
_EMPHASIS = re.compile(r"\*+|_{2,}|`+|~~|</?(?:b|strong|em|i|u|code|mark)\s*>", re.IGNORECASE)
# What may enclose a whole answer: quotes, brackets, emphasis left over from a single "_C_".
_WRAPPERS = " \t\r\n'\"“”‘’「」『』【】_*"
_LETTER = re.compile(r"[(\[]?([A-Za-z])(?![A-Za-z0-9])[)\]]?")
# Markdown block marks at a line's start: headings and quotes ("### Answer", "> C").
_BLOCK_MARK = re.compile(r"^\s*(?:#{1,6}\s+|>\s*)+")


@dataclass(frozen=True, eq=False)
class _Rules:
    """The patterns of the reading rules, compiled from the fragments of every registered language
    pack (:func:`_compile`, the one table of them); a registration compiles them again."""

    generation: int  # languages.pack_generation() when compiled
    trailing: str
    listing_marks: str
    copula_end: re.Pattern[str]
    separator: re.Pattern[str]
    list_join: re.Pattern[str]
    new_item: re.Pattern[str]
    prefix_phrases: tuple[re.Pattern[str], ...]
    contrasts: re.Pattern[str]
    answer_word: re.Pattern[str]
    negation: re.Pattern[str]
    negated_belief: re.Pattern[str]
    suffix_phrase: re.Pattern[str]
    list_marker: re.Pattern[str]
    sentence_end: re.Pattern[str]
    first_sentence: re.Pattern[str]
    clause_end: re.Pattern[str]
    interjection: re.Pattern[str]
    letter_article: re.Pattern[str]
    spellings: tuple[tuple[str, str], ...]


def _compile(generation: int, languages: Sequence[Language]) -> _Rules:
    def union(field: str) -> str:
        """One alternation of a field's fragments over every pack (one that never matches when no
        pack has any)."""
        return "|".join(fragment for language in languages for fragment in getattr(language, field)) or "(?!)"

    # Punctuation some scripts write with no space after it (Chinese "。", "、"), from the packs.
    stops = "".join(dict.fromkeys("。" + "".join(language.stops for language in languages)))
    close_punctuation = stops + "".join(dict.fromkeys("".join(language.clause_marks for language in languages)))
    stops_class, close_class = re.escape(stops), re.escape(close_punctuation)  # inside [...]
    # A separator between a declared letter or text and what follows it. Korean copulas and their
    # connectives count ("C입니다만 …", "C예요."), as do brackets, colons, dashes and sentence ends.
    punctuation = re.escape(".。:：,，;/)]-–—!?！？" + close_punctuation)
    return _Rules(
        generation=generation,
        trailing=" \t\r\n.。!?！？,:;'\"“”‘’」』】_*" + close_punctuation,
        listing_marks=",/&，" + close_punctuation,
        # Copula endings, as the KoBBQ reference strips them: "B입니다", "할머니입니다", "알 수 없습니다".
        copula_end=re.compile(rf"(?:{union('copula_ends')})$"),
        separator=re.compile(
            rf"(?:{union('connectives')}|{union('closing_particles')})?\s*(?:[{punctuation}]\s*)+"
            rf"|(?:{union('connectives')})(?:\s+|$)"
        ),
        # Joins that list several options: "A or B", "할머니, 손자", "B/C", "손자 또는 할머니", "A或B".
        list_join=re.compile(rf"^(?:,|/|&|{union('list_joins')})\s*", re.IGNORECASE),
        # A line where the model starts writing a new question: the rest is not an answer to this one.
        new_item=re.compile(rf"^\s*(?:{union('new_items')})\s*[:：]", re.IGNORECASE),
        # Phrases after which the reply names its answer, one pattern per pack (each read on its own,
        # so that one language's short phrase never hides another's longer one: "es" / "es ist").
        prefix_phrases=tuple(re.compile("|".join(language.answer_phrases), re.IGNORECASE | re.MULTILINE) for language in languages),
        # Phrases that name the answer after a negation of another: "No es A, sino B", "不是A，而是B".
        contrasts=re.compile(union("contrasts"), re.IGNORECASE),
        # Answer phrases proper, after which an option's text anywhere in the sentence is the answer.
        answer_word=re.compile(union("answer_words")),
        # What makes a declaration none: "The answer is not the grandson", "I don't think it's A",
        # "정답은 할머니가 아닙니다", "A가 맞는지 모르겠습니다", "No es B", "不是A".
        negation=re.compile(union("negations")),
        # A denied belief, which takes back what its clause goes on to declare: "I don't think B is correct".
        negated_belief=re.compile(union("negated_beliefs")),
        # What, written after a letter, declares it: "C is correct", "C가 정답입니다", "C번", "C是正确的".
        suffix_phrase=re.compile(rf"\s*(?:{union('correct_suffixes')})", re.IGNORECASE),
        # A line that opens an enumeration item: "A: …", "B. …", "(c) …", "D)" or a bare "A.".
        list_marker=re.compile(rf"^\s*[-*•]?\s*[(\[]?([a-z])(?:[)\].:{close_class}]|\s*$)"),
        # Where a sentence ends: a stop and a space, or a stop written with none after it ("C。因为…").
        sentence_end=re.compile(rf"(?<=[.。!?！？])\s+|(?<=[{stops_class}])(?=\S)"),
        first_sentence=re.compile(rf"(?<=[.。!?！？])\s|(?<=[{stops_class}])|\n"),
        clause_end=re.compile(rf"[.。!?！？\n,;{close_class}]"),
        # A self-correction's or conclusion's opening word: "아니, A입니다.", "Actually, A.", "따라서 B입니다.",
        # "所以，C。" (a script written without spaces needs none after it).
        interjection=re.compile(rf"^(?:{union('interjections')})(?:\s*[,.:!]?\s+|\s*[,:{close_class}]\s*)", re.IGNORECASE),
        # An article before a letter that names an option: "la c", "l'a" (it ends at a space or its apostrophe).
        letter_article=re.compile(rf"^(?:{union('letter_articles')})(?:\s+|(?<=['’])\s*)(?=[(\[]?[a-z](?![a-z0-9]))"),
        spellings=tuple(spelling for language in languages for spelling in language.spellings),
    )


_compiled: _Rules | None = None


def _rules() -> _Rules:
    """The rules of the packs registered now: compiled on the first reading (no pack is read at
    import), and again after a registration."""
    global _compiled
    generation = pack_generation()
    if _compiled is None or _compiled.generation != generation:
        _compiled = _compile(generation, tuple(LANGUAGES.values()))
    return _compiled


@dataclass(frozen=True)
class _Options:
    keys: tuple[str, ...]  # each option's text, folded as replies are
    letters: tuple[str, ...]  # casefolded
    rules: _Rules = field(compare=False)  # what they were read with: the packs registered then

    @cached_property
    def bare_letters_are_read_as_letters(self) -> bool:
        """Whether a reply of one option letter, alone, always declares that letter's option: the
        letters are distinct ASCII letters and no option's own text is one character (an option
        "A" would make the reply "A" name it)."""
        return (
            len(set(self.letters)) == len(self.letters)
            and all(len(letter) == 1 and letter.isascii() and letter.isalpha() for letter in self.letters)
            and all(len(key) > 1 for key in self.keys)
        )

    def by_letter(self, letter: str) -> int | None:
        letter = letter.casefold()
        return self.letters.index(letter) if letter in self.letters else None


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    return " ".join(_EMPHASIS.sub("", text).split()).casefold()


def _strip(text: str, rules: _Rules) -> str:
    """A fragment without its wrappers, trailing punctuation and Korean copula ending."""
    text = text.strip(_WRAPPERS).lstrip(":：=-–— ").strip(_WRAPPERS)
    for spelling, read_as in rules.spellings:
        text = text.replace(spelling, read_as)
    previous = None
    while text != previous:
        previous = text
        text = rules.copula_end.sub("", text.rstrip(rules.trailing)).strip(_WRAPPERS)
    return text


def _options(choices: tuple[str, ...], letters: tuple[str, ...]) -> _Options:
    """A case's options as replies are read against them; the cases of one item share them."""
    return _options_read_with(choices, letters, _rules())


@lru_cache(maxsize=4096)
def _options_read_with(choices: tuple[str, ...], letters: tuple[str, ...], rules: _Rules) -> _Options:
    keys = tuple(_strip(_fold(choice), rules) for choice in choices)
    return _Options(keys, tuple(letter.casefold() for letter in letters), rules)


def _read(fragment: str, options: _Options, depth: int = 0) -> frozenset[int]:
    """The options ``fragment`` declares by what it starts with (a lead), and what the clause
    right after that declaration names in turn (a conflict when it is another option); none
    when it names several and its sentence goes on to negate them: "A and C do not fit the
    context" talks about the options, it does not answer."""
    text = _without_article(_strip(fragment, options.rules), options.rules)
    if not text or depth > 3:
        return frozenset()
    found = _lead(text, options, depth)
    return frozenset() if len(found) > 1 and _negates_what_it_names(text, options) else found


def _lead(text: str, options: _Options, depth: int) -> frozenset[int]:
    whole = _LETTER.fullmatch(text)
    if whole and (only := options.by_letter(whole.group(1))) is not None:
        return frozenset({only})
    if text in options.keys and options.keys.count(text) == 1:
        return frozenset({options.keys.index(text)})
    # An option's text before a letter: the option "A-0" is not the letter A.
    by_text = _after_text(text, options, depth)
    if by_text:
        return by_text
    letter = _LETTER.match(text)
    if letter and (index := options.by_letter(letter.group(1))) is not None:
        return _after_letter(text, letter, index, options, depth) or frozenset()
    return frozenset()


def _without_article(text: str, rules: _Rules) -> str:
    """A letter without the article it may carry: "la c" is "c", "l'a" is "a"."""
    article = rules.letter_article.match(text)
    return text[article.end() :] if article else text


def _negates_what_it_names(text: str, options: _Options) -> bool:
    """Whether the first sentence of ``text``, the options' own texts left out (an option may be
    "Not enough information"), holds a negation."""
    sentence = options.rules.first_sentence.split(text, maxsplit=1)[0]
    for key in options.keys:
        sentence = sentence.replace(key, " ") if key else sentence
    return bool(options.rules.negation.search(sentence))


def _after_letter(text: str, letter: re.Match, index: int, options: _Options, depth: int) -> frozenset[int] | None:
    rest = text[letter.end() :]
    bracketed = letter.group(0) != letter.group(1)  # "(C)", "C)", "[C]": the letter is marked
    rules = options.rules
    separator = rules.separator.match(rest)
    if separator or bracketed:
        rest = rest[separator.end() :] if separator else rest.lstrip()
        listing = separator is not None and any(mark in separator.group(0) for mark in rules.listing_marks)  # "A, B both …"
        return frozenset({index}) | _next_clause(rest, options, depth, listing=listing)
    if rules.list_join.match(rest.lstrip()):  # "A or B", "A와 B", "options: a, b or c"
        return frozenset({index}) | _next_clause(rest, options, depth)
    if rest[:1].isspace():
        # "C 할머니": a bare space needs the option's own text after it ("A woman ..." is prose).
        rest = rest.lstrip().lstrip("(\"'“‘")  # "C 할머니", "C (The grandmother)"
        own = options.keys[index]
        if rest.startswith(own) and _boundary(rest[len(own) :], rules):
            return frozenset({index}) | _next_clause(rest[len(own) :], options, depth)
    return None


def _after_text(text: str, options: _Options, depth: int) -> frozenset[int]:
    """An option's text followed by a separator or the end ("할머니입니다. …", "The grandson, …")."""
    matches = [(len(key), i) for i, key in enumerate(options.keys) if key and text.startswith(key) and _boundary(text[len(key) :], options.rules)]
    if not matches:
        return frozenset()
    length, index = max(matches)
    if sum(1 for n, _ in matches if n == length) > 1:
        return frozenset()
    return frozenset({index}) | _next_clause(text[length:], options, depth)


def _boundary(rest: str, rules: _Rules) -> bool:
    # A list word joins only where the option's text ends a word: "Torunu" is no "Torun u" (Spanish
    # "u", or), "De studenten" no "De student en" (Dutch "en", and); "손자와", "老人或" are joins.
    return not rest or bool(rules.separator.match(rest)) or (_ends_word(rest[0]) and bool(rules.list_join.match(rest.lstrip())))


def _next_clause(rest: str, options: _Options, depth: int, *, listing: bool = False) -> frozenset[int]:
    """What the text right after a declaration names: another option when it lists one ("B, C",
    "손자 또는 할머니") or restates one ("B: 할머니", "B. The grandfather."); an explanation
    ("C. 맥락에 …") names none."""
    rest = rest.lstrip(" \t")
    join = options.rules.list_join.match(rest)
    if join or listing:
        rest = rest[join.end() :] if join else rest
        listed = _list_item(rest, options)  # "A and B both seem possible", "손자와 할머니 둘 다"
        if listed:
            return listed
    return _read(rest.split("\n", 1)[0], options, depth + 1)


def _list_item(text: str, options: _Options) -> frozenset[int]:
    """The option an item of a list starts with, whatever follows it."""
    text = _without_article(text.lstrip(_WRAPPERS + "(["), options.rules)
    for index, key in enumerate(options.keys):
        if key and text.startswith(key) and (len(text) == len(key) or _ends_word(text[len(key)])):
            return frozenset({index})
    letter = _LETTER.match(text)
    if letter and (chosen := options.by_letter(letter.group(1))) is not None:
        return frozenset({chosen})
    return frozenset()


def _declarations_by_phrase(text: str, options: _Options) -> frozenset[int]:
    # Words inside an option's own text (an option "Option A") are no phrase.
    inside = [(at, at + len(key)) for key in options.keys if key for at in _find_all(text, key)]

    def quoted(at: int, until: int) -> bool:
        return any(start <= at < end and end > until for start, end in inside)

    rules = options.rules
    found: set[int] = set()
    matches = [(match, False) for phrases in rules.prefix_phrases for match in phrases.finditer(text)]
    for match, contrast in [*matches, *((match, True) for match in rules.contrasts.finditer(text))]:
        if quoted(match.start(), match.end()) or (not contrast and _negated_before(text, match.start(), rules)):
            continue
        line, _, after = text[match.end() :].partition("\n")
        if not line.strip(_WRAPPERS + ".:："):
            line = next((candidate for candidate in after.split("\n") if candidate.strip()), "")  # "Answer:\nC"
        read = _read(line, options)
        if not read and rules.answer_word.search(match.group(0)):
            read = _named_in_sentence(line, options)  # "The answer is clearly the grandson."
        found |= read
    for letter in re.finditer(r"(?<![A-Za-z'’])[(\[]?([A-Za-z])[)\]]?(?![A-Za-z'’])", text):
        index = options.by_letter(letter.group(1))
        if index is not None and not quoted(letter.start(1), letter.end(1)) and _declared_by_suffix(text, letter.start(), letter.end(), rules):
            found.add(index)
    for index, key in enumerate(options.keys):
        if key:
            for at in _find_all(text, key):
                if _declared_by_suffix(text, at, at + len(key), rules):
                    found.add(index)
    return frozenset(found)


def _negated_before(text: str, at: int, rules: _Rules) -> bool:
    """Whether the clause before an answer phrase negates it: "I don't think it's A", "Not option A"."""
    clause = rules.clause_end.split(text[:at])[-1]
    return bool(rules.negation.search(clause))


def _declared_by_suffix(text: str, start: int, at: int, rules: _Rules) -> bool:
    """Whether what follows ``at`` declares the option written from ``start`` ("C is correct", "C가
    정답입니다"), no denied belief before it in its clause takes it back ("I don't think C is
    correct"; a bare negation there does not: "A가 아니라 B가 정답입니다", "정보가 없으므로 C가 정답입니다"),
    and the rest of its sentence does not ("C가 정답이 아닙니다", "C가 맞는지 모르겠습니다")."""
    suffix = rules.suffix_phrase.match(text, at)
    if not suffix or rules.negated_belief.search(rules.clause_end.split(text[:start])[-1]):
        return False
    rest = rules.first_sentence.split(text[suffix.end() :], maxsplit=1)[0]
    return not rules.negation.search(rest)


def _named_in_sentence(text: str, options: _Options) -> frozenset[int]:
    """The options whose text the first sentence of ``text`` contains, unless it negates or hedges."""
    sentence = options.rules.first_sentence.split(text.strip(), maxsplit=1)[0]
    named = frozenset(i for i, key in enumerate(options.keys) if key and next(_find_all(sentence, key), None) is not None)
    rest = sentence
    for key in options.keys:
        rest = rest.replace(key, " ") if key else rest
    return frozenset() if options.rules.negation.search(rest) else named


def _find_all(text: str, key: str):
    """Where ``key`` occurs in ``text`` as whole words."""
    start = text.find(key)
    while start >= 0:
        end = start + len(key)
        if (start == 0 or _starts_word(text[start - 1])) and (end == len(text) or _ends_word(text[end])):
            yield start
        start = text.find(key, start + 1)


def _is_unspaced(char: str) -> bool:
    """Whether ``char`` is of a script written without spaces between words: Han ideographs
    ("答案是老人") and kana ("祖父が正解です", "マリアさんが")."""
    return "\u3400" <= char <= "\u9fff" or "\u3040" <= char <= "\u30ff"


def _starts_word(before: str) -> bool:
    """Whether a word may start after the character ``before``."""
    return not before.isalnum() or _is_unspaced(before)


def _ends_word(after: str) -> bool:
    """Whether a word may end before the character ``after``: Korean particles attach to the word
    ("할머니가 정답입니다"), and scripts written without spaces have none to end it."""
    return not after.isalnum() or "가" <= after <= "힣" or _is_unspaced(after)


def _listed_lines(lines: Sequence[str], options: _Options) -> set[int]:
    """Lines of an enumeration ("A: 손자" / "B: 할머니", "A." / "B. 눈동자" / "D. …"): two or more
    lines opening with different letter markers. Echoed options and invented lists declare nothing."""
    marked: dict[int, str] = {}
    for i, line in enumerate(lines):
        marker = options.rules.list_marker.match(line)
        if marker:
            marked[i] = marker.group(1)
    return set(marked) if len(set(marked.values())) >= 2 else set()


def parse_answer(text: str | None, choices: Sequence[str], letters: Sequence[str]) -> int | None:
    """Index of the one option the reply declares, or ``None`` (out of choice). Never raises."""
    if not isinstance(text, str) or not text.strip():
        return None
    options = _options(tuple(choices), tuple(letters))
    if options.bare_letters_are_read_as_letters:  # the commonest reply of all, "B": no need to read it
        stripped = text.strip()
        if len(stripped) == 1 and stripped.isascii() and (index := options.by_letter(stripped)) is not None:
            return index
    return _read_reply(text, options)


def _read_reply(text: str, options: _Options) -> int | None:
    lines = _fold_lines(text)
    cut = next((i for i, line in enumerate(lines) if i and options.rules.new_item.match(line)), len(lines))
    listed = _listed_lines(lines[:cut], options)
    lines = [line for i, line in enumerate(lines[:cut]) if i not in listed and line.strip()]
    if not lines:
        return None
    bare, named = _bare_options(lines, options)
    declared = _read(lines[0], options) | _declarations_by_phrase("\n".join(lines), options) | bare
    return next(iter(declared)) if len(declared) == 1 and named <= declared else None


def _fold_lines(text: str) -> list[str]:
    lines = unicodedata.normalize("NFKC", text).splitlines()
    return [" ".join(_EMPHASIS.sub("", _BLOCK_MARK.sub("", line)).split()).casefold() for line in lines]


def _bare_options(lines: Sequence[str], options: _Options) -> tuple[frozenset[int], frozenset[int]]:
    """Sentences that are nothing but an option, or a letter with an option's text: (declared,
    named). In the lead line, or opening a conclusion on a later line ("So, B.", "따라서 b입니다."),
    they declare it ("C입니다. 아니, A입니다." declares A too); elsewhere they only name it, which
    contradicts a different declared option but declares nothing ("…garbage…\n[A]" is no answer)."""
    rules = options.rules
    declared: set[int] = set()
    named: set[int] = set()
    for number, line in enumerate(lines):
        for sentence in rules.sentence_end.split(line):
            opener = rules.interjection.match(sentence.strip())
            body = _without_article(_strip(sentence.strip()[opener.end() if opener else 0 :], rules), rules)
            found = declared if number == 0 or opener else named
            letter = _LETTER.match(body)
            index = options.by_letter(letter.group(1)) if letter else None
            if body and options.keys.count(body) == 1:
                found.add(options.keys.index(body))
            elif letter is not None and index is not None:
                text = _strip(body[letter.end() :].lstrip(" :.)-–—"), rules)
                if not text or text in options.keys:  # "A", "B: 01" (a text naming another option conflicts)
                    found |= {index, *([options.keys.index(text)] if text else [])}
    return frozenset(declared), frozenset(named)
