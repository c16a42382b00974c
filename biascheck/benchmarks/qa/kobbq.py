"""KoBBQ (Jin et al., 2024): Korean bias QA, the official test samples and the five Korean prompts.

Protocol of the paper's evaluation code (naver-ai/KoBBQ, evaluation/1_preprocess.py):
the prompt is the instruction, a blank line, then labelled context, question, options A-C and
the answer cue; each prompt's own "unknown" wording replaces the dataset's "알 수 없음"; every
sample is asked in the three circulant orders of its choices.
"""

from __future__ import annotations

import ast
import csv
import io
import re
from pathlib import Path

from biascheck.benchmarks.qa.benchmark import QABenchmark, QAData, QAItem, QAPrompt, read_utf8
from biascheck.config.sources import parsed_file
from biascheck.core.errors import BiascheckError

DATASET_UNKNOWN = "알 수 없음"
SAMPLE_COLUMNS = ("sample_id", "label_annotation", "context", "question", "choices", "biased_answer", "answer")
PROMPT_COLUMNS = ("prompt_id", "instruction", "context", "question", "a", "b", "c", "answer", "unknown")
# category-{template number}{version a-d}-{sample}-{amb|dis}-{bsd|cnt}
SAMPLE_ID = re.compile(r"^(?P<category>[a-z_]+)-(?P<template>\d+)(?P<version>[a-d])-(?P<sample>\d+)-(?P<context>amb|dis)-(?P<question>bsd|cnt)$")
LETTER_IN_LABEL = re.compile(r"([A-Za-z])\)?\s*:?\s*$")


def read_tsv(path: Path, required: tuple[str, ...], what: str) -> list[dict[str, str]]:
    text = read_utf8(path)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t")
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise BiascheckError(path, f"column {missing[0]}", f"missing from the {what} header", f"the file needs columns {', '.join(required)}")
        rows = list(reader)
    except csv.Error as exc:
        raise BiascheckError(path, None, f"malformed TSV: {exc}", "restore the original file") from None
    for number, row in enumerate(rows, start=2):
        if None in row or any(row[c] is None for c in required):
            raise BiascheckError(path, f"line {number}", "wrong number of fields", "restore the original file")
    return rows


def load_prompts(path: Path) -> list[QAPrompt]:
    prompts: list[QAPrompt] = []
    for number, row in enumerate(read_tsv(path, PROMPT_COLUMNS, "prompt"), start=2):
        letters: list[str] = []
        for column in ("a", "b", "c"):
            match = LETTER_IN_LABEL.search(row[column])
            if not match:
                raise BiascheckError(path, f"line {number}: column {column}", f"no option letter in {row[column]!r}", "restore the original file")
            letters.append(match.group(1))
        # Built from the label columns exactly as upstream does (its `prompt` column has typos).
        template = (
            row["instruction"]
            + "\n\n"
            + row["context"]
            + "{context}\n"
            + row["question"]
            + "{question}\n"
            + row["a"]
            + "{a}\n"
            + row["b"]
            + "{b}\n"
            + row["c"]
            + "{c}\n"
            + row["answer"]
        )
        prompt_id = row["prompt_id"].strip()
        if any(p.id == prompt_id for p in prompts):
            # Two prompts with one id would give two cases the same case id.
            raise BiascheckError(path, f"line {number}: prompt_id", f"{prompt_id!r} appears twice", "restore the original file")
        prompts.append(QAPrompt(id=prompt_id, template=template, unknown=row["unknown"], letters=(letters[0], letters[1], letters[2])))
    return prompts


def load_items(path: Path) -> list[QAItem]:
    items = []
    seen: set[str] = set()
    for number, row in enumerate(read_tsv(path, SAMPLE_COLUMNS, "sample"), start=2):
        where = f"line {number} ({row['sample_id']})"

        def bad(field: str, problem: str) -> BiascheckError:
            return BiascheckError(path, f"{where}: {field}", problem, "restore the original file or fix that row")

        match = SAMPLE_ID.match(row["sample_id"])
        if not match:
            raise bad("sample_id", "does not look like category-NNNv-NNN-amb|dis-bsd|cnt")
        if row["sample_id"] in seen:
            raise bad("sample_id", "appears twice")
        seen.add(row["sample_id"])
        try:
            choices = ast.literal_eval(row["choices"])
        except (ValueError, SyntaxError):
            raise bad("choices", f"{row['choices']!r} is not a list literal") from None
        if not (isinstance(choices, list) and len(choices) == 3 and all(isinstance(c, str) and c for c in choices)):
            raise bad("choices", "must be a list of three non-empty strings")
        if len(set(choices)) != 3:
            raise bad("choices", "has repeated options")
        for field in ("biased_answer", "answer"):
            if row[field] not in choices:
                raise bad(field, f"{row[field]!r} is not one of the choices {choices}")
        if DATASET_UNKNOWN not in choices:
            raise bad("choices", f"has no {DATASET_UNKNOWN!r} option")
        unknown = choices.index(DATASET_UNKNOWN)
        biased = choices.index(row["biased_answer"])
        correct = choices.index(row["answer"])
        if biased == unknown:
            raise bad("biased_answer", "is the unknown option")
        context = match.group("context")
        if context == "amb" and correct != unknown:
            raise bad("answer", "an ambiguous context must have the unknown answer")
        if context == "dis":
            # Versions b/d are biased contexts (answer = biased answer), a/c counter-biased.
            expect_biased = match.group("version") in "bd"
            if correct == unknown or (correct == biased) != expect_biased:
                raise bad("answer", f"inconsistent with context version {match.group('version')!r}")
        label = row["label_annotation"].strip()
        if label not in ("ST", "TM", "NC"):
            raise bad("label_annotation", f"{label!r} is not ST, TM or NC")
        items.append(
            QAItem(
                sample_id=row["sample_id"],
                category=match.group("category"),
                cluster=f"{match.group('category')}-{match.group('template')}",
                label=label,
                context=row["context"],
                question=row["question"],
                choices=(choices[0], choices[1], choices[2]),
                context_kind=context,  # type: ignore[arg-type]
                unknown=unknown,
                biased=biased,
                correct=correct,
            )
        )
    if not items:
        raise BiascheckError(path, None, "has no samples", "restore the original file")
    return items


class KoBBQBenchmark(QABenchmark):
    name = "kobbq"
    # The categories (sample_id prefixes) by their shared names (benchmarks.base.COMMON_CATEGORIES).
    # race_ethnicity_nationality is KoBBQ's merge of BBQ's Race_ethnicity and Nationality (the
    # paper's sec. 3.1): it is filed under race_ethnicity, its nationality templates included.
    common_categories = {
        "age": "age",
        "disability_status": "disability",
        "domestic_area_of_origin": "region",
        "educational_background": "education",
        "family_structure": "family_structure",
        "gender_identity": "gender",
        "physical_appearance": "physical_appearance",
        "political_orientation": "political_orientation",
        "race_ethnicity_nationality": "race_ethnicity",
        "religion": "religion",
        "ses": "ses",
        "sexual_orientation": "sexual_orientation",
    }

    def load(self, manifest, files):
        if "samples" not in files:
            raise BiascheckError(manifest.path, "data.samples", "missing", "name the KoBBQ_test_samples.tsv file as [data.samples]")
        items = parsed_file(files["samples"].local, load_items)
        prompts = load_prompts(files[manifest.prompts_from_data].local) if manifest.prompts_from_data else []
        prompts += [QAPrompt(p.id, p.template, p.unknown, p.letters) for p in manifest.inline_prompts]
        return QAData(items, prompts, {})


KOBBQ = KoBBQBenchmark()
