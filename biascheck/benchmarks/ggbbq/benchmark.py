"""GG-BBQ (Satheesh et al., GeBNLP 2025): BBQ's gender-identity templates in German.

Two subsets, each in an ambiguous and a disambiguated file: Subset-I names the people by group
terms ("die Frau", "der Transmann"), Subset-II by first names. The rows carry BBQ's information
under other field names (``choice_info``, ``known_stereotyped_groups``, ``question_type``,
``context_type``; no ``question_index``); each is read into BBQ's shape and checked by BBQ's own
row reader, so the biased option is derived exactly as for BBQ (:mod:`biascheck.benchmarks.qa.bbq`).

Two rules the data force:

- The trans templates' ``known_stereotyped_groups`` keep BBQ's English groups ("transgender
  women", "trans"), but ``choice_info`` labels the trans person ``non_binary`` (the other person
  ``F`` or ``M``): a list naming ``trans`` also names ``non_binary``. In the published files every
  such row has exactly one ``non_binary`` option and no other row has one; as for BBQ, a row whose
  stereotyped groups match no option or two is refused in one line.
- There is no template index: a template is the pair of questions (negative and non-negative)
  that share contexts, found from the file itself; the bootstrap resamples these.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from biascheck.benchmarks.qa import BBQ_ROWS, BBQBenchmark, QAItem, RowFormat, item_of_row, jsonl_rows, parsed_file
from biascheck.core.errors import BiascheckError

REQUIRED = (
    "index",
    "context",
    "question",
    "label",
    "choice_0",
    "choice_1",
    "choice_2",
    "question_type",
    "context_type",
    "known_stereotyped_groups",
    "choice_info",
)
POLARITY = {"negative": "neg", "non_negative": "nonneg"}
CONDITION = {"ambiguous_context": ("ambig", "amb"), "disambiguous_context": ("disambig", "dis")}
# BBQ's field -> GG-BBQ's, for the errors BBQ's row reader raises.
FIELDS = {
    "answer_info": "choice_info",
    "additional_metadata.stereotyped_groups": "known_stereotyped_groups",
    "ans0": "choice_0",
    "label": "label",
}
TRANS, TRANS_LABEL = "trans", "non_binary"


def templates(rows: list[dict]) -> dict[str, str]:
    """Question -> its template's id: the questions asked about one context belong to one
    template (union-find over the file). The id hashes the template's sorted questions, so the
    ambiguous and the disambiguated file of a subset give one template the same id."""
    parent: dict[str, str] = {}

    def root(question: str) -> str:
        while parent.setdefault(question, question) != question:
            question = parent[question]
        return question

    first: dict[str, str] = {}
    for row in rows:
        other = first.setdefault(row["context"], row["question"])
        parent[root(row["question"])] = root(other)
    members: dict[str, list[str]] = {}
    for question in parent:
        members.setdefault(root(question), []).append(question)
    ids = {}
    for questions in members.values():
        digest = hashlib.sha256("\n".join(sorted(questions)).encode("utf-8")).hexdigest()[:8]
        ids.update(dict.fromkeys(questions, digest))
    return ids


def load_items(path: Path, category: str) -> list[tuple[QAItem, tuple]]:
    """Every row of one GG-BBQ file, read as BBQ reads its rows, each with its sampling group key."""
    rows = list(jsonl_rows(path, REQUIRED))
    if not rows:
        raise BiascheckError(path, None, "has no examples", "restore the original file")
    for row, bad in rows:
        if not isinstance(row["question"], str) or not isinstance(row["context"], str):
            raise bad("question", "question and context must be strings")
    template = templates([row for row, _ in rows])
    items, seen = [], set()
    for row, bad in rows:
        item = item_of_row(bbq_row(row, template[row["question"]], bad), category, renamed(bad))
        assert item is not None  # refused, not left out: GG-BBQ's files have no such row
        if item[0].sample_id in seen:
            raise bad("index", f"{row['index']!r} is repeated in this file")
        seen.add(item[0].sample_id)
        items.append(item)
    return items


def renamed(bad):
    """``bad`` for BBQ's row reader: its errors name GG-BBQ's fields."""

    def rename(field: str, problem: str) -> BiascheckError:
        head, dot, rest = field.partition(".")
        return bad(FIELDS.get(field) or FIELDS.get(head, head) + dot + rest, problem)

    return rename


def bbq_row(row: dict, template: str, bad) -> dict:
    """The row in BBQ's layout, its GG-BBQ-only fields checked first (one-line errors naming them)."""
    polarity = POLARITY.get(row["question_type"]) if isinstance(row["question_type"], str) else None
    if polarity is None:
        raise bad("question_type", f"{row['question_type']!r} is not {' or '.join(POLARITY)}")
    condition = CONDITION.get(row["context_type"]) if isinstance(row["context_type"], str) else None
    if condition is None:
        raise bad("context_type", f"{row['context_type']!r} is not {' or '.join(CONDITION)}")
    index = row["index"]
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise bad("index", f"{index!r} is not a non-negative integer")
    try:
        info = ast.literal_eval(row["choice_info"]) if isinstance(row["choice_info"], str) else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        info = None
    if not (isinstance(info, dict) and sorted(info, key=str) == [0, 1, 2]):
        raise bad("choice_info", "must be a dict literal mapping 0, 1, 2 to [name, group]")
    for key, value in info.items():
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
            raise bad(f"choice_info.{key}", "must be a list [name, group] of two strings")
        if value[0] != row[f"choice_{key}"]:
            raise bad(f"choice_info.{key}", f"names {value[0]!r}, but choice_{key} is {row[f'choice_{key}']!r}")
    try:
        stereotyped = json.loads(row["known_stereotyped_groups"]) if isinstance(row["known_stereotyped_groups"], str) else None
    except json.JSONDecodeError:
        stereotyped = None
    if not (isinstance(stereotyped, list) and stereotyped and all(isinstance(s, str) for s in stereotyped)):
        raise bad("known_stereotyped_groups", "must be a JSON list of strings")
    if TRANS in {s.casefold() for s in stereotyped}:
        stereotyped = [*stereotyped, TRANS_LABEL]
    return {
        "example_id": f"{condition[1]}-{index}",
        "question_index": template,
        "question_polarity": polarity,
        "context_condition": condition[0],
        "answer_info": {f"ans{k}": info[k] for k in range(3)},
        "additional_metadata": {"stereotyped_groups": stereotyped},
        "context": row["context"],
        "question": row["question"],
        "ans0": row["choice_0"],
        "ans1": row["choice_1"],
        "ans2": row["choice_2"],
        "label": row["label"],
    }


class GGBBQBenchmark(BBQBenchmark):
    name = "gg-bbq"
    # Both subsets measure gender identity: the view across suites shows each beside the others.
    common_categories = {"group_terms": "gender", "proper_names": "gender"}

    settings_schema = None  # GG-BBQ's fields are its own, read by bbq_row: no [gg-bbq] table
    settings_required = True

    def load_file(self, path: Path, category: str, row_format: RowFormat = BBQ_ROWS) -> tuple[list[tuple[QAItem, tuple]], int]:
        return parsed_file(path, load_items, category), 0


GG_BBQ = GGBBQBenchmark()
