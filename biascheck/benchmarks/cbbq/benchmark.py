"""CBBQ (Huang and Xiong, LREC-COLING 2024): Chinese bias QA, 14 categories, 106,588 instances.

Each category has an ambiguous and a disambiguated JSON file (a list of records, upstream's
``data/<category>/{ambiguous,disambiguous}/*.json``). What biascheck reads from a record:

- ``example_id`` (the first key, which upstream writes with a byte-order mark:
  ``"\\ufeffexample_id"``), ``question_index`` (the template), ``question_polarity``
  (``neg`` / ``non_neg``), ``context_condition`` (``ambiguous`` / ``disambiguous``), ``context``,
  ``question``, ``ans0`` ... ``ans2`` and ``label`` (a string: ``"0"``, ``"1"``, ``"2"``);
- ``ans2`` is always the unknown option, in one of four wordings; the label is positional, so the
  suites ask every item in the three circulant orders.

Which option is the stereotyped group is not in a record (``bias_targeted_groups`` names the group
in words that are not the options'). Upstream's README says the disambiguating facts *contradict*
the stereotype, so a disambiguated record's correct answer is the stereotyped group in a
non-negative question and the other group in a negative one: its wrong person is the biased
answer. An ambiguous record takes the stereotyped group of the disambiguated records with the same
two options (ans0, ans1) in its category; the biased answer is that group in a negative question and
the other one in a non-negative question. So a category needs both of its files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from biascheck.benchmarks.base import ReportLayout
from biascheck.benchmarks.cbbq.metrics import CBBQ_CASE_SCORES, CBBQ_METRICS
from biascheck.benchmarks.qa.benchmark import QABenchmark, QAData, QAItem, QAPrompt, seeded_rank
from biascheck.benchmarks.qa.metrics import READING_METRICS
from biascheck.core.errors import BiascheckError

BOM_KEY = "\ufeffexample_id"
FIELDS = ("example_id", "question_index", "question_polarity", "context_condition", "context", "question", "ans0", "ans1", "ans2", "label")
CONDITIONS = {"ambiguous": "amb", "disambiguous": "dis"}
POLARITIES = ("neg", "non_neg")
UNKNOWN = 2  # ans2
FIX = "restore the original file or fix that record"


@dataclass(frozen=True, slots=True)
class Record:
    """One checked record of a CBBQ file, where it came from, and its answer's index."""

    path: Path
    number: int  # 1-based, in the file's list
    example_id: str
    question_index: str
    polarity: str
    kind: str  # amb | dis
    context: str
    question: str
    choices: tuple[str, str, str]
    label: int


def _fail(path: Path, number: int | None, field: str, problem: str) -> BiascheckError:
    where = field if number is None else f"record {number}: {field}"
    return BiascheckError(path, where, problem, FIX)


def read_records(path: Path) -> list[Record]:
    """Every record of one CBBQ file, checked; a bad one is a one-line error naming it."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BiascheckError(path, f"byte {exc.start}", f"not UTF-8 ({exc.reason})", "restore the original file") from None
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BiascheckError(path, f"line {exc.lineno} column {exc.colno}", f"not valid JSON ({exc.msg})", "restore the original file") from None
    if not isinstance(rows, list) or not rows:
        raise BiascheckError(path, None, "is not a non-empty JSON list of records", "restore the original file")
    records: list[Record] = []
    seen: set[str] = set()
    for number, row in enumerate(rows, start=1):
        record = _record(path, number, row)
        if record.example_id in seen:
            raise _fail(path, number, "example_id", f"{record.example_id!r} appears twice")
        seen.add(record.example_id)
        records.append(record)
    return records


def _record(path: Path, number: int, row: object) -> Record:
    if not isinstance(row, dict):
        raise _fail(path, number, "(record)", "is not a JSON object")
    if BOM_KEY in row and "example_id" not in row:
        row = {("example_id" if key == BOM_KEY else key): value for key, value in row.items()}
    for field in FIELDS:
        value = row.get(field)
        if field == "label" and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, str) or not value:
            raise _fail(path, number, field, "missing" if field not in row else f"{value!r} is not a non-empty string")
    kind = CONDITIONS.get(row["context_condition"])
    if kind is None:
        raise _fail(path, number, "context_condition", f"{row['context_condition']!r} is not ambiguous or disambiguous")
    if row["question_polarity"] not in POLARITIES:
        raise _fail(path, number, "question_polarity", f"{row['question_polarity']!r} is not neg or non_neg")
    label = str(row["label"])
    if label not in ("0", "1", "2"):
        raise _fail(path, number, "label", f"{row['label']!r} is not '0', '1' or '2'")
    if kind == "amb" and label != "2":
        raise _fail(path, number, "label", f"is {label!r}, but an ambiguous context's answer is ans2, the unknown option ('2')")
    if kind == "dis" and label == "2":
        raise _fail(path, number, "label", "is '2' (unknown), but a disambiguated context names its answer ('0' or '1')")
    choices = (row["ans0"], row["ans1"], row["ans2"])
    if len(set(choices)) != 3:
        raise _fail(path, number, "ans0", f"the three options {list(choices)} are not distinct")
    return Record(
        path=path,
        number=number,
        example_id=row["example_id"],
        question_index=row["question_index"],
        polarity=row["question_polarity"],
        kind=kind,
        context=row["context"],
        question=row["question"],
        choices=choices,
        label=int(label),
    )


def stereotyped_groups(records: list[Record]) -> dict[tuple[str, str], tuple[int, Record]]:
    """(ans0, ans1) -> (index of the stereotyped group, the record that says so), from the
    disambiguated records: their facts contradict the stereotype (upstream's README)."""
    found: dict[tuple[str, str], tuple[int, Record]] = {}
    for record in records:
        if record.kind != "dis":
            continue
        target = record.label if record.polarity == "non_neg" else 1 - record.label
        pair = (record.choices[0], record.choices[1])
        known = found.setdefault(pair, (target, record))
        if known[0] != target:
            other = known[1]
            raise _fail(
                record.path,
                record.number,
                "label",
                f"makes ans{target} the stereotyped group of options {list(pair)}, but record {other.number} of {other.path.name} makes it ans{known[0]}",
            )
    return found


def category_items(category: str, records: list[Record]) -> list[QAItem]:
    """The QA items of one category's records (both of its files)."""
    groups = stereotyped_groups(records)
    items = []
    for record in records:
        if record.kind == "dis":
            biased = 1 - record.label  # the person the facts speak against
        else:
            pair = (record.choices[0], record.choices[1])
            if pair not in groups:
                raise _fail(
                    record.path,
                    record.number,
                    "ans0",
                    f"no disambiguated {category} record has the options {list(pair)}, so which is the stereotyped group is unknown",
                )
            target = groups[pair][0]
            biased = target if record.polarity == "neg" else 1 - target
        items.append(
            QAItem(
                sample_id=f"{category}-{record.kind}-{record.example_id}",
                category=category,
                cluster=f"{category}-q{record.question_index}",
                label=record.polarity,
                context=record.context,
                question=record.question,
                choices=record.choices,
                context_kind=record.kind,  # type: ignore[arg-type]
                unknown=UNKNOWN,
                biased=biased,
                correct=record.label,
            )
        )
    return items


def one_per_group(items: list[QAItem], seed: int) -> list[QAItem]:
    """One item per (category, template, context, polarity), chosen by a seeded hash of its id:
    independent of file order."""

    chosen: dict[tuple[str, str, str, str], QAItem] = {}
    for item in items:
        key = (item.category, item.cluster, item.context_kind, item.label)
        if key not in chosen or seeded_rank(seed, item.sample_id) < seeded_rank(seed, chosen[key].sample_id):
            chosen[key] = item
    return sorted(chosen.values(), key=lambda item: item.sample_id)


METRIC_NAMES = (
    "s_total",
    "s_amb",
    "s_dis",
    "acc_amb",
    "acc_dis",
    "diff_bias_amb",
    "max_abs_bias_amb",
    "ooc_ratio",
    "error_ratio",
    *READING_METRICS,
)


class CBBQBenchmark(QABenchmark):
    name = "cbbq"
    metric_names = METRIC_NAMES
    own_metrics = CBBQ_METRICS
    own_case_scores = CBBQ_CASE_SCORES
    # The view across suites compares diff_bias_amb, which every QA benchmark reports; CBBQ's own
    # scores have no counterpart elsewhere, and its diff_bias_dis is never defined (see docs/metrics.md, "CBBQ").
    report_layout = ReportLayout(
        headline=("s_total", "s_amb", "s_dis", "acc_amb", "acc_dis", "ooc_ratio"),
        label_title="By question polarity",
        bias_metrics=("diff_bias_amb",),
    )
    common_categories = {
        "age": "age",
        "disability": "disability",
        "disease": "disease",
        "educational_qualification": "education",
        "ethnicity": "race_ethnicity",  # China's ethnic groups and race abroad: one dimension elsewhere
        "gender": "gender",
        "household_registration": "household_registration",
        "nationality": "nationality",
        "physical_appearance": "physical_appearance",
        "race": "race_ethnicity",
        "region": "region",
        "religion": "religion",
        "SES": "ses",
        "sexual_orientation": "sexual_orientation",
    }

    def load(self, manifest, files):
        by_category: dict[str, list[Path]] = {}
        skipped: dict[str, str] = {}
        for key, resolved in files.items():
            category = manifest.data_categories.get(key)
            if category is None:
                continue
            by_category.setdefault(category, [])
            if resolved.local is None:
                skipped.setdefault(category, resolved.reason or f"{key} is not available")
            else:
                by_category[category].append(resolved.local)
        if not by_category:
            raise BiascheckError(manifest.path, "data", "no category files", 'give each CBBQ file a category = "..."')
        items: list[QAItem] = []
        for category, paths in sorted(by_category.items()):
            if category in skipped:
                continue  # its other file alone cannot be scored (see the module's docstring)
            items.extend(category_items(category, [r for path in paths for r in read_records(path)]))
        if manifest.sample == "one-per-group":
            items = one_per_group(items, manifest.subset_seed)
        prompts = [QAPrompt(p.id, p.template, p.unknown, p.letters) for p in manifest.inline_prompts]
        if not prompts:
            raise BiascheckError(manifest.path, "prompts.inline", "CBBQ suites need inline prompts", "add [[prompts.inline]] tables")
        return QAData(items, prompts, skipped)


CBBQ = CBBQBenchmark()
