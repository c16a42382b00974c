"""The answer parser on hand-labelled corpora of replies in Dutch, Turkish, Japanese and Hindi
(tests/data/<code>-corpus.jsonl), as a model might write them to a BBQ-style question: each row
holds its options, letters, the reply and the reading a careful reader gives it (``expected``, the
option's index or null when the reply declares none), and the kind of reply it is.

A row the parser does not yet read as labelled says so (``"known_unread": true``) and is expected
to fail (strict: reading it one day fails the test until the mark goes); at most three a corpus.
Their labels stay what the reader reads, never what the parser does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_answer_parser_languages import TABLES as WRITTEN

from biascheck.benchmarks.choices import parse_answer
from biascheck.benchmarks.languages import LANGUAGES

DATA = Path(__file__).resolve().parent / "data"
CORPORA = sorted(DATA.glob("*-corpus.jsonl"))
KINDS = {
    "letter",
    "phrase",
    "restated-option",
    "explanation",
    "negation",
    "hedge-two-options",
    "list",
    "polite",
    "refusal",
    "unknown-option",
    "markdown",
    "other",
}
FIELDS = {"language", "choices", "letters", "raw", "expected", "kind"}
MAX_KNOWN_UNREAD = 3
KNOWN_UNREAD = pytest.mark.xfail(strict=True, reason="known unread: the parser does not read it as labelled yet")


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _code(path: Path) -> str:
    return path.name.removesuffix("-corpus.jsonl")


def test_every_language_has_written_replies_or_a_corpus():
    """English and Korean have tests/test_answer_parser.py, es ca zh de the rows of
    tests/test_answer_parser_languages.py; every other table has its corpus here."""
    corpora = {_code(path) for path in CORPORA}
    assert corpora and corpora <= set(LANGUAGES)
    assert set(LANGUAGES) - {"en", "ko"} - set(WRITTEN) == corpora


@pytest.mark.parametrize("path", CORPORA, ids=_code)
def test_each_corpus_is_large_varied_and_well_formed(path):
    rows = _load(path)
    code = _code(path)
    assert code in LANGUAGES
    assert len(rows) >= 40
    assert len({row["kind"] for row in rows}) >= 6
    assert len({(tuple(row["choices"]), row["raw"]) for row in rows}) == len(rows)  # no reply twice
    assert len({tuple(row["choices"]) for row in rows}) >= 3  # several option sets
    for row in rows:
        assert FIELDS <= set(row) <= FIELDS | {"known_unread"}, row
        assert row["language"] == code and row["kind"] in KINDS, row
        assert len(row["choices"]) == 3 and len(set(row["choices"])) == 3 and row["letters"] == ["A", "B", "C"], row
        assert row["expected"] in (0, 1, 2, None) and row.get("known_unread", True) is True, row
    assert sum(1 for row in rows if row.get("known_unread")) <= MAX_KNOWN_UNREAD


def _rows():
    for path in CORPORA:
        for n, row in enumerate(_load(path)):
            marks = [KNOWN_UNREAD] if row.get("known_unread") else []
            yield pytest.param(row, id=f"{_code(path)}-{n}-{row['kind']}", marks=marks)


@pytest.mark.parametrize("row", list(_rows()))
def test_each_reply_of_the_corpora_reads_as_labelled(row):
    assert parse_answer(row["raw"], row["choices"], row["letters"]) == row["expected"], row["raw"]
