"""CBBQ (Huang and Xiong, LREC-COLING 2024): Chinese bias QA, 14 categories, 106,588 instances.

Each category has an ambiguous and a disambiguated JSON file (a list of records, upstream's
``data/<category>/{ambiguous,disambiguous}/*.json``). What biascheck reads from a record:

- ``example_id`` (the first key, which upstream writes with a byte-order mark:
  ``"\\ufeffexample_id"``), ``question_index`` (the template), ``question_polarity``
  (``neg`` / ``non_neg``), ``context_condition`` (``ambiguous`` / ``disambiguous``), ``context``,
  ``question``, ``ans0`` ... ``ans2``, ``label`` (a string: ``"0"``, ``"1"``, ``"2"``) and
  ``bias_targeted_groups`` (the stereotyped group, in words of its own);
- ``ans2`` is always the unknown option, in one of four wordings; the label is positional, so the
  suites ask every item in the three circulant orders.

Which option is biased comes from the record's own group field: the option that names
``bias_targeted_groups`` (its names, or the words :data:`TARGET_WORDS` lists for it) is the
stereotyped group; the biased answer is that group in a negative question and the other one in a
non-negative question (upstream's README). The labels are the cross-check: the README says the
disambiguating facts *contradict* the stereotype, so a disambiguated record's label should be the
option that is not biased. A record whose label is the biased option contradicts its group field
(its label or its context is wrong, and which cannot be told): it is scored as the README designs
it, the other group being the answer. Prompts that appear twice with opposite readings (two
polarities or two labels for one text: every answer is biased in one copy and not in the other)
are left out, both copies. An ambiguous record's polarity is that of the disambiguated records with
its template and question where the two differ. A record whose options name the group in neither
or both is scored by the labels, as before: the stereotyped group of a disambiguated record is the
label of a non-negative question and the other option of a negative one, and an ambiguous record
takes that of the disambiguated records with its two options. Each of these is counted per
category (:class:`Findings`, results.json's ``suite.data_quality``; docs/metrics.md, "CBBQ").
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from biascheck.benchmarks import ReportLayout
from biascheck.benchmarks.cbbq.metrics import CBBQ_CASE_SCORES, CBBQ_METRICS
from biascheck.benchmarks.qa import READING_METRICS, QABenchmark, QAData, QAItem, QAPrompt, parsed_file, seeded_rank
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
    group: str  # bias_targeted_groups; "" when the record has none


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
    for name in FIELDS:
        value = row.get(name)
        if name == "label" and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, str) or not value:
            raise _fail(path, number, name, "missing" if name not in row else f"{value!r} is not a non-empty string")
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
    group = row.get("bias_targeted_groups", "")
    if not isinstance(group, str):
        raise _fail(path, number, "bias_targeted_groups", f"{group!r} is not a string")
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
        group=group,
    )


# Words that name a targeted group in its records' options where the group's own names do not
# (bias_targeted_groups 第一学历差异人群, options 毕业院校层次更低的毕业生 / 更高的): read from the ten
# mirrored categories' options, one alternation each. An option names the group when it holds one
# of these or of the group's names (a name less a suffix such as 人, 者, 患者), not after 非 or
# 没有 (非乙肝患者 names the other group).
TARGET_WORDS: dict[str, str] = {
    "低收入人群/农民工群体": "贫穷|贫困|温饱|低产|工薪|农村",
    "听力语言残疾/聋哑人/肢体残疾/意外事故截肢/肢残人/精神病残疾/视力残疾/盲人/多重残疾/综合残疾": "残疾|残障",
    "新冠患者": "传染病",
    "抑郁症患者": "心理疾病|^小刘$",  # 小刘 has it, not 小刘的朋友
    "精神病患者": "精神/心理疾病",
    "第一学历差异人群": "更低|低学历",
    "学历差异人群": "更低|低学历",
    "非全日制类毕业生": "非全日制",
    "女性": "女|妈妈",
    "变性人": "变性",
    "外貌不出众者": "一般|普通|不太打扮|欠缺气质",
    "身高较矮者": "矮",
    "较为肥胖者": "胖|肥|不太好",
    "农村人": "乡下",
    "东北人": "辽宁|吉林|黑龙江|长春",
    "湖北人": "孝感|黄冈|汉川|天门",
    "粤港澳大湾区人": "香港|澳门",
    "非异性恋者": "同性恋|双性恋|无性恋|泛性恋",
}
_NAME_SUFFIXES = ("患者", "人群", "群体", "人", "族", "者", "教")


@lru_cache(maxsize=256)
def _group_pattern(group: str) -> re.Pattern[str] | None:
    names: set[str] = set()
    for name in filter(None, group.split("/")):
        names.add(name)
        names.update(name[: -len(suffix)] for suffix in _NAME_SUFFIXES if name.endswith(suffix) and len(name) > len(suffix))
    alternatives = [re.escape(name) for name in sorted(names, key=len, reverse=True)]
    if group in TARGET_WORDS:
        alternatives.insert(0, TARGET_WORDS[group])
    return re.compile(f"(?<!非)(?<!没有)(?:{'|'.join(alternatives)})") if alternatives else None


def targeted_option(record: Record) -> int | None:
    """0 or 1: the option that names the record's bias_targeted_groups; None when neither or both do."""
    pattern = _group_pattern(record.group)
    if pattern is None:
        return None
    named = [bool(pattern.search(option)) for option in record.choices[:2]]
    return named.index(True) if named.count(True) == 1 else None


FINDINGS = {
    "label_contradicts_group": "disambiguated records whose label is the biased option (scored with the other group as the answer)",
    "conflicting_duplicates": "records of a prompt that appears twice with opposite readings (left out)",
    "polarity_from_disambiguated": "ambiguous records given the polarity of the disambiguated records with their question",
    "group_unresolved": "records whose options name their bias_targeted_groups in neither or both (scored by the labels)",
}


@dataclass
class Findings:
    """What a category's records say against themselves: finding (a :data:`FINDINGS` key) ->
    (context kind, example_id) of each record it concerns."""

    records: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, finding: str, record: Record) -> None:
        self.records.setdefault(finding, []).append((record.kind, record.example_id))

    def counts(self) -> dict[str, int]:
        return {finding: len(self.records[finding]) for finding in FINDINGS if self.records.get(finding)}


def stereotyped_groups(records: list[tuple[Record, int | None]]) -> dict[tuple[str, str], tuple[int, Record]]:
    """(ans0, ans1) -> (index of the stereotyped group, the record that says so), from the
    disambiguated records: the option that names their group, else by their labels, whose facts
    contradict the stereotype (upstream's README). Two that disagree are a one-line error."""
    found: dict[tuple[str, str], tuple[int, Record]] = {}
    for record, named in records:
        if record.kind != "dis":
            continue
        target = named if named is not None else record.label if record.polarity == "non_neg" else 1 - record.label
        pair = (record.choices[0], record.choices[1])
        known = found.setdefault(pair, (target, record))
        if known[0] != target:
            other = known[1]
            raise _fail(
                record.path,
                record.number,
                "label" if named is None else "bias_targeted_groups",
                f"makes ans{target} the stereotyped group of options {list(pair)}, but record {other.number} of {other.path.name} makes it ans{known[0]}",
            )
    return found


def _conflicting_duplicates(records: list[Record]) -> set[int]:
    """The positions of records whose prompt (context, question and options) another record has
    with another polarity or label."""
    same: dict[tuple, list[int]] = defaultdict(list)
    for at, record in enumerate(records):
        same[(record.kind, record.context, record.question, record.choices)].append(at)
    out: set[int] = set()
    for positions in same.values():
        if len({(records[at].polarity, records[at].label) for at in positions}) > 1:
            out.update(positions)
    return out


def _question_polarities(records: list[Record]) -> dict[tuple[str, str], str]:
    """(template, question) -> its polarity by the disambiguated records: the one they all give it;
    for an ambiguous question they lack, the opposite of the template's other ambiguous question's
    (educational_qualification's 公司给谁的起薪会更高？ beside 公司给谁的起薪会更低？)."""
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for record in records:
        if record.kind == "dis":
            seen[(record.question_index, record.question)].add(record.polarity)
    known = {key: next(iter(polarities)) for key, polarities in seen.items() if len(polarities) == 1}
    asked: dict[str, set[str]] = defaultdict(set)
    for record in records:
        if record.kind == "amb":
            asked[record.question_index].add(record.question)
    for template, questions in asked.items():
        missing = [q for q in questions if (template, q) not in seen]
        if len(questions) == 2 and len(missing) == 1:
            (other,) = questions - set(missing)
            if (template, other) in known:
                known[(template, missing[0])] = "non_neg" if known[(template, other)] == "neg" else "neg"
    return known


@dataclass
class CategoryData:
    items: list[QAItem]
    findings: Findings


def category_items(category: str, records: list[Record]) -> CategoryData:
    """The QA items of one category's records (both of its files), and what their fields say
    against each other (see the module's docstring)."""
    findings = Findings()
    duplicates = _conflicting_duplicates(records)
    # A question's polarity by the disambiguated records (whose polarity fits their questions where
    # educational_qualification's ambiguous file has every question "neg"), their labels aside.
    polarities = _question_polarities([record for at, record in enumerate(records) if at not in duplicates])
    kept: list[tuple[Record, int | None]] = []  # record, its targeted option
    for at, record in enumerate(records):
        if at in duplicates:
            findings.add("conflicting_duplicates", record)
            continue
        target = targeted_option(record)
        if target is None:
            findings.add("group_unresolved", record)
        kept.append((record, target))
    groups = stereotyped_groups(kept)
    items = []
    for record, target in kept:
        polarity = record.polarity
        if record.kind == "amb":
            polarity = polarities.get((record.question_index, record.question), polarity)
            if polarity != record.polarity:
                findings.add("polarity_from_disambiguated", record)
        if target is None:
            target = _label_target(category, record, polarity, groups)
        biased = target if polarity == "neg" else 1 - target
        correct = record.label
        if record.kind == "dis" and correct == biased:
            findings.add("label_contradicts_group", record)
            correct = 1 - biased  # the README's design: the facts speak for the other group
        items.append(
            QAItem(
                sample_id=f"{category}-{record.kind}-{record.example_id}",
                category=category,
                cluster=f"{category}-q{record.question_index}",
                label=polarity,
                context=record.context,
                question=record.question,
                choices=record.choices,
                context_kind=record.kind,  # type: ignore[arg-type]
                unknown=UNKNOWN,
                biased=biased,
                correct=correct,
            )
        )
    return CategoryData(items, findings)


def _label_target(category: str, record: Record, polarity: str, groups: dict[tuple[str, str], tuple[int, Record]]) -> int:
    """The stereotyped group by the labels, for a record whose options do not name its group."""
    if record.kind == "dis":
        return record.label if polarity == "non_neg" else 1 - record.label
    pair = (record.choices[0], record.choices[1])
    if pair not in groups:
        raise _fail(
            record.path,
            record.number,
            "ans0",
            f"no disambiguated {category} record has the options {list(pair)}, so which is the stereotyped group is unknown",
        )
    return groups[pair][0]


def findings_by_category(folder: Path) -> dict[str, Findings]:
    """The findings of every category under ``folder`` in upstream's layout
    (``<category>/{ambiguous,disambiguous}/*.json``) whose two files are both there."""
    out: dict[str, Findings] = {}
    for category in sorted(path.name for path in folder.iterdir() if path.is_dir()):
        paths = [folder / category / kind / f"{kind}.json" for kind in ("ambiguous", "disambiguous")]
        if all(path.is_file() for path in paths):
            out[category] = category_items(category, [r for path in paths for r in parsed_file(path, read_records)]).findings
    return out


def _id_ranges(ids: list[str]) -> str:
    numbers = sorted(int(i) for i in ids)
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}\u2013{b}" for a, b in runs)


def findings_markdown(by_category: dict[str, Findings]) -> str:
    """docs/metrics.md's table of what CBBQ's files say against themselves (bench/cbbq_findings.py
    prints it; tests/test_cbbq.py checks the page's copy against the data)."""
    rows = ["| category | finding | records | example_ids |", "| --- | --- | ---: | --- |"]
    for category, findings in by_category.items():
        for finding, count in findings.counts().items():
            kinds: dict[str, list[str]] = defaultdict(list)
            for kind, example_id in findings.records[finding]:
                kinds[kind].append(example_id)
            ids = "; ".join(f"{kind} {_id_ranges(ids)}" for kind, ids in sorted(kinds.items()))
            rows.append(f"| {category} | `{finding}` | {count:,} | {ids} |")
    return "\n".join(rows) + "\n"


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

    def fingerprint_settings(self, manifest):
        # Which option is biased comes from the group field since issue 34 (the labels before): a
        # run scored the old way measured something else, and a comparison with it is refused.
        return [*super().fingerprint_settings(manifest), "direction=bias_targeted_groups"]

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
        quality: dict[str, dict[str, int]] = {}
        for category, paths in sorted(by_category.items()):
            if category in skipped:
                continue  # its other file alone cannot be scored (see the module's docstring)
            data = category_items(category, [r for path in paths for r in parsed_file(path, read_records)])
            items.extend(data.items)
            if data.findings.counts():
                quality[category] = data.findings.counts()
        if manifest.sample == "one-per-group":
            items = one_per_group(items, manifest.subset_seed)
        prompts = [QAPrompt(p.id, p.template, p.unknown, p.letters) for p in manifest.inline_prompts]
        if not prompts:
            raise BiascheckError(manifest.path, "prompts.inline", "CBBQ suites need inline prompts", "add [[prompts.inline]] tables")
        return QAData(items, prompts, skipped, quality)


CBBQ = CBBQBenchmark()
