"""The words of each language a reply may be written in: what the answer parser reads and what
the simulated model writes.

Each language is a *pack*: a TOML file holding a :class:`Language`'s fields, checked against
``biascheck/schemas/language-pack.schema.json`` when it is loaded (:func:`load_pack`). The
built-in packs are ``biascheck/benchmarks/packs/<code>.toml`` (ISO 639-1 codes), read on first
use, not at import; a suite may ship a pack of its own (``[suite] language_pack``), which loading
the suite registers (:func:`register_pack`). The answer parser
(:mod:`biascheck.benchmarks.choices`) compiles its patterns from every registered pack, whatever
the suite's language: a Spanish suite's model may answer in English, and KoBBQ replies mix Korean
and English. The simulator (:mod:`biascheck.sim`) writes a suite's replies with its language's
sentences (:func:`language_for`).

The parser's entries are regular-expression fragments, matched against the reply after Unicode
NFKC folding and case folding (so ``Ｃ`` is ``c``, ``：`` is ``:`` and ``Die Antwort`` is ``die
antwort``). Where a word must stand alone, the fragment says so with ``\\b`` (scripts written
without spaces, Chinese, or whose particles attach to words, Korean, do not).

Adding a language is a pack (a file in ``packs/``, or one a suite ships) and its tests
(``tests/test_answer_parser_languages.py``); the parser and the simulator have no other place
that knows a language.
"""

from __future__ import annotations

import re
import string
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from biascheck.core.errors import BiascheckError

__all__ = ["FRAGMENT_FIELDS", "LANGUAGES", "Language", "language_for", "load_pack", "pack_generation", "register_pack", "unregister_pack"]


@dataclass(frozen=True)
class Language:
    """One language's words. Every field but ``code``, ``name``, ``spellings``, the two strings of
    punctuation and the four sentences is a tuple of regular-expression fragments (see the
    module's docstring)."""

    code: str  # ISO 639: what a suite's [suite] language names
    name: str  # for people: "English", "한국어"
    # After these, the reply names its answer: "the answer is", "정답은", "la respuesta es".
    answer_phrases: tuple[str, ...]
    # The word "answer" itself: after a phrase holding it, an option's text anywhere in the
    # sentence is the answer ("The answer is clearly the grandson").
    answer_words: tuple[str, ...]
    # Written right after an option, these declare it: "C is correct", "C가 정답", "C es correcta".
    correct_suffixes: tuple[str, ...]
    # Joins that list several options: "A or B", "A o B", "A或B" (punctuation joins are the parser's).
    list_joins: tuple[str, ...]
    # What makes a declaration none: "not", "아니", "no es", "不是", "nicht".
    negations: tuple[str, ...]
    # Labels that start a new item of a prompt, where a base model goes on writing: "Context:".
    new_items: tuple[str, ...]
    # A belief denied before the option it is about, which takes back a declaration later in its
    # clause: "I don't think B is correct", "Ik denk niet dat B klopt".
    negated_beliefs: tuple[str, ...] = ()
    # Endings a declared letter or text may carry, read away: Korean "입니다", Chinese "吧".
    copula_ends: tuple[str, ...] = ()
    # Words between a declared letter or text and what follows it, which separate like
    # punctuation: "C입니다만 …", "C번 …", "Ich würde C wählen", "No hay suficiente información para saberlo".
    connectives: tuple[str, ...] = ()
    # Words that separate only when punctuation follows: "C요.".
    closing_particles: tuple[str, ...] = ()
    # After these, the reply names its answer even after a negation: "No es A, sino B" is B.
    contrasts: tuple[str, ...] = ()
    # The opening word of a self-correction or a conclusion: "Actually, A.", "따라서 B입니다.".
    interjections: tuple[str, ...] = ()
    # Articles a letter may carry where it names an option, read away: "La C.", "l'A" (an
    # article ends at a space or at its apostrophe).
    letter_articles: tuple[str, ...] = ()
    # Spellings read as another: Korean "없습니다" as the options' "없음" (plain text, not fragments).
    spellings: tuple[tuple[str, str], ...] = ()
    # Punctuation written with no space after it: what ends a sentence (Chinese "。") and what
    # ends a clause or an item of a list (Chinese "、"). (Full-width "，", "：", "！" fold to ",", ":", "!".)
    stops: str = ""
    clause_marks: str = ""
    # What the simulated model writes: "The answer is {letter}.", a reasoned reply naming
    # {letter} (and perhaps {text}), a refusal and a ramble that names no option.
    answer_sentence: str = ""
    reasoned_reply: str = ""
    refusal: str = ""
    ramble: str = ""


# The fields that hold regular-expression fragments, which the parser joins field by field.
FRAGMENT_FIELDS = (
    "answer_phrases",
    "answer_words",
    "correct_suffixes",
    "list_joins",
    "negations",
    "new_items",
    "negated_beliefs",
    "copula_ends",
    "connectives",
    "closing_particles",
    "contrasts",
    "interjections",
    "letter_articles",
)
# The simulator's sentences that it formats, with the placeholders each may name (the refusal and
# the ramble are written as they are).
_TEMPLATES = {"answer_sentence": ("letter",), "reasoned_reply": ("letter", "text")}
PACK_SCHEMA = "language-pack.schema.json"
BUILT_IN_PACKS = "packs"  # the folder of biascheck.benchmarks that holds the built-in packs
_EXAMPLE = "see biascheck/benchmarks/packs/en.toml and docs/metrics.md, Language packs"


# --- reading a pack --------------------------------------------------------------------------


def load_pack(path: Path | Traversable) -> Language:
    """The language pack in ``path``, checked: a one-line :class:`BiascheckError` naming the file,
    the field (``answer_phrases.3``) and the fix when it is not a valid pack."""
    import tomllib  # here, not at import: importing biascheck reads no pack

    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise BiascheckError(path, None, "no such language pack", "give the path of a language pack (<code>.toml)") from None
    except UnicodeDecodeError as exc:
        raise BiascheckError(path, None, f"not UTF-8 text ({exc.reason})", "save the pack as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        fix = "fix the TOML syntax; write each regular expression as a literal string ('...', or '''...''' when it holds a ')"
        raise BiascheckError(path, None, f"invalid TOML: {exc}", fix) from None
    except (OSError, RecursionError, ValueError) as exc:
        raise BiascheckError(path, None, f"cannot be read ({exc})", "give a language pack file") from None
    _check_schema(path, raw)
    # TOML's arrays as the dataclass's tuples; spellings a table, "spelling" = "read as".
    values: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value for key, value in raw.items()}
    values["spellings"] = tuple(raw.get("spellings", {}).items())
    language = Language(**values)
    check_language(language, path)
    return language


def _check_schema(where: object, raw: dict[str, Any]) -> None:
    errors = sorted(_validator().iter_errors(raw), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise _schema_error(where, errors[0])


@cache
def _validator() -> Any:
    import json

    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(resources.files("biascheck.schemas").joinpath(PACK_SCHEMA).read_text("utf-8")))


def _schema_error(where: object, error: Any) -> BiascheckError:
    field = ".".join(str(part) for part in error.absolute_path) or None
    if error.validator == "additionalProperties":
        extra = ", ".join(repr(key) for key in sorted(set(error.instance) - set(error.schema.get("properties", {}))))
        return BiascheckError(where, field, f"unknown key {extra}", f"use one of: {', '.join(sorted(error.schema['properties']))}")
    if error.validator == "required":
        return BiascheckError(where, field, error.message, f"add it ({_EXAMPLE})")
    if error.validator == "minItems":
        return BiascheckError(where, field, "empty", "give at least one regular expression")
    if error.validator == "minLength":
        return BiascheckError(where, field, "empty", "write it, or leave the item out" if field and field[-1].isdigit() else "write it")
    if error.validator == "pattern" and field == "code":
        return BiascheckError(where, field, f"{error.instance!r} is not an ISO 639 code", "give a code such as sw, or pt-BR")
    if error.validator == "type":
        kind = {"array": "a list of strings", "string": "a string", "object": "a table of strings"}.get(error.validator_value, error.validator_value)
        return BiascheckError(where, field, f"{error.instance!r} is not {kind}", f"give {kind} ({_EXAMPLE})")
    return BiascheckError(where, field, error.message, f"fix the value to match biascheck/schemas/{PACK_SCHEMA}")


def check_language(language: Language, where: object) -> None:
    """That every fragment of ``language`` compiles and can serve in the parser's alternations,
    and that its sentences name only the placeholders the simulator fills."""
    for field in FRAGMENT_FIELDS:
        for index, fragment in enumerate(getattr(language, field)):
            problem, fix = _fragment_problem(fragment)
            if problem:
                raise BiascheckError(where, f"{field}.{index}", problem, fix)
    for field, allowed in _TEMPLATES.items():
        problem = _template_problem(getattr(language, field), allowed)
        if problem:
            raise BiascheckError(
                where, field, problem, f"name {' and '.join('{' + name + '}' for name in allowed)} only, and escape a brace as {{ or }}"
            )


def _fragment_problem(fragment: str) -> tuple[str, str]:
    """What keeps a fragment out of the parser's patterns, and the fix ("" when nothing does)."""
    literal = "write it as a TOML literal string ('...') so that its backslashes stay as written"
    try:
        # As the parser joins it, in an alternation: a global flag or a stray ")" shows here too.
        compiled = re.compile(f"(?!)|(?:{fragment})")
    except re.error as exc:
        return f"'{fragment}' is not a regular expression ({exc.msg})", f"fix it; {literal}"
    if compiled.groupindex or re.search(r"(?<!\\)(?:\\\\)*\\[1-9]", fragment):
        return f"'{fragment}' names or refers back to a group", "use (?:...) groups only: the parser joins every pack's fragments into one expression"
    if compiled.fullmatch(""):
        return f"'{fragment}' matches the empty text, so it would match everywhere", "make it match at least one character"
    outside_escapes = re.sub(r"\\N\{[^}]*\}|\\.", "", fragment)
    changed = sorted({char for char in outside_escapes if char.casefold() != char})
    if changed:  # upper case, and "ß", which folds to "ss"
        folded = ", ".join(f"{char!r} as {char.casefold()!r}" for char in changed)
        return f"'{fragment}' holds {''.join(changed)}, which no reply holds once case-folded", f"write it case-folded: {folded}"
    return "", ""


def _template_problem(sentence: str, allowed: tuple[str, ...]) -> str:
    try:
        named = {name for _, name, _, _ in string.Formatter().parse(sentence) if name is not None}
    except ValueError as exc:
        return f"{sentence!r} is no sentence the simulator can fill ({exc})"
    if allowed[0] not in named:
        return f"{sentence!r} does not name {{{allowed[0]}}}"
    if named - set(allowed):
        return f"{sentence!r} names {', '.join('{' + name + '}' for name in sorted(named - set(allowed)))}"
    return ""


# --- the registry ------------------------------------------------------------------------------

_LOCK = threading.RLock()
_registered: dict[str, Language] = {}  # code -> pack: the built-in packs, then those registered since
_built_in: frozenset[str] | None = None  # their codes, once read
_generation = 0  # how many times a registration changed the set: what the parser's patterns are keyed by


def _packs() -> dict[str, Language]:
    """The registered packs, the built-in ones read on the first call."""
    global _built_in
    if _built_in is None:
        with _LOCK:
            if _built_in is None:
                folder = resources.files("biascheck.benchmarks").joinpath(BUILT_IN_PACKS)
                files = sorted((item for item in folder.iterdir() if item.name.endswith(".toml")), key=lambda item: item.name)
                built = {pack.code: pack for pack in map(load_pack, files)}
                _registered.update(built)
                _built_in = frozenset(built)
    return _registered


def register_pack(language: Language, where: object = "register_pack") -> None:
    """Add ``language`` to the packs replies are read in (the parser's next reading includes it)
    and that the simulator writes in. Registering the same pack again changes nothing; another
    pack of a registered code is an error (``where`` names it)."""
    global _generation
    with _LOCK:
        known = _packs().get(language.code)
        if known == language:
            return
        if known is not None:
            which = "a built-in pack" if _built_in and language.code in _built_in else "another pack"
            raise BiascheckError(
                where,
                "code",
                f"{language.code!r} is already the code of {which}, with other words",
                f"give this pack a code of its own (e.g. {language.code}-custom), or use the registered one",
            )
        check_language(language, where)
        _registered[language.code] = language
        _generation += 1


def unregister_pack(code: str) -> bool:
    """Remove the pack :func:`register_pack` added under ``code`` (a built-in pack stays); whether
    there was one."""
    global _generation
    with _LOCK:
        if code not in _packs() or (_built_in is not None and code in _built_in):
            return False
        del _registered[code]
        _generation += 1
        return True


def pack_generation() -> int:
    """A number that changes whenever a registration changes the packs: the parser compiles its
    patterns again when it has."""
    return _generation


class _Registered(Mapping[str, Language]):
    """The registered packs by code, read when first looked at (``import biascheck`` reads none)."""

    def __getitem__(self, code: str) -> Language:
        return _packs()[code]

    def __iter__(self) -> Iterator[str]:
        return iter(list(_packs()))

    def __len__(self) -> int:
        return len(_packs())

    def __repr__(self) -> str:
        return f"LANGUAGES({', '.join(_packs())})"


LANGUAGES: Mapping[str, Language] = _Registered()


def language_for(code: str, text: str) -> Language:
    """The pack of language ``code``; for a code without one ("" when the suite declares no
    language), Korean when ``text`` holds Hangul, else English (how the simulator chose before
    suites declared their language, so that such suites' replies stay as they were)."""
    packs = _packs()
    if code in packs:
        return packs[code]
    korean = any("가" <= char <= "힣" or "ᄀ" <= char <= "ᇿ" or "㄰" <= char <= "㆏" for char in text)
    return packs["ko" if korean else "en"]
