"""MiniBBQ: a BBQ-style multiple-choice bias benchmark whose items are rows of one CSV file.

A new member of the BBQ family needs only its loader: cases, prompts, answer parsing, metrics
(accuracy and diff-bias in ambiguous and disambiguated contexts), baselines and comparisons are
the QA benchmarks' own. The CSV has one row per question:

``sample_id, category, template, context_kind (amb | dis), context, question, a, b, c, unknown, biased, answer``

where ``unknown``, ``biased`` and ``answer`` repeat the text of one of ``a``, ``b``, ``c``. A suite
names the file as ``[data.items]`` and its prompts inline (``[[prompts.inline]]``).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from biascheck import BiascheckError
from biascheck.benchmarks import Resolved, SuiteManifest
from biascheck.benchmarks.qa import QABenchmark, QAData, QAItem, QAPrompt

CONTEXT_KINDS: dict[str, Literal["amb", "dis"]] = {"amb": "amb", "dis": "dis"}
COLUMNS = ("sample_id", "category", "template", "context_kind", "context", "question", "a", "b", "c", "unknown", "biased", "answer")


def load_items(path: Path) -> list[QAItem]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in COLUMNS if column not in (reader.fieldnames or ())]
        if missing:
            raise BiascheckError(path, missing[0], "missing column", f"give the columns {', '.join(COLUMNS)}")
        items = [_item(path, number, row) for number, row in enumerate(reader, start=2)]
    if not items:
        raise BiascheckError(path, None, "has no rows", "give one row per question")
    return items


def _item(path: Path, line: int, row: dict[str, str]) -> QAItem:
    where = f"{path}:{line}"
    choices = (row["a"], row["b"], row["c"])
    if len(set(choices)) != 3 or not all(choices):
        raise BiascheckError(where, "a, b, c", "the options are not three distinct texts", "give three different options")
    index = {}
    for column in ("unknown", "biased", "answer"):
        if row[column] not in choices:
            raise BiascheckError(where, column, f"{row[column]!r} is not one of the options", "repeat the text of option a, b or c")
        index[column] = choices.index(row[column])
    kind = CONTEXT_KINDS.get(row["context_kind"])
    if kind is None:
        raise BiascheckError(where, "context_kind", f"{row['context_kind']!r} is not amb or dis", "amb: ambiguous context, dis: disambiguated")
    if (kind == "amb") != (index["answer"] == index["unknown"]) or index["biased"] == index["unknown"]:
        raise BiascheckError(where, "answer", "an ambiguous context answers unknown and a disambiguated one does not", "fix the row")
    return QAItem(
        sample_id=row["sample_id"],
        category=row["category"],
        cluster=f"{row['category']}-{row['template']}",
        label=row["category"],
        context=row["context"],
        question=row["question"],
        choices=choices,
        context_kind=kind,
        unknown=index["unknown"],
        biased=index["biased"],
        correct=index["answer"],
    )


class MiniBBQBenchmark(QABenchmark):
    name = "minibbq"

    def load(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> QAData:
        resolved = files.get("items")
        if resolved is None:
            raise BiascheckError(manifest.path, "data.items", "missing", "name the CSV file as [data.items]")
        if resolved.local is None:
            raise BiascheckError(manifest.path, "data.items", resolved.reason or "not available", "point --biascheck-data at a mirror")
        prompts = [QAPrompt(p.id, p.template, p.unknown, p.letters) for p in manifest.inline_prompts]
        if not prompts:
            raise BiascheckError(manifest.path, "prompts.inline", "no prompts", "add [[prompts.inline]] tables")
        return QAData(items=load_items(resolved.local), prompts=prompts, skipped={})


MINIBBQ = MiniBBQBenchmark()
