"""BBQ (Parrish et al., 2022): English bias QA, one JSONL file per category.

The biased answer (the paper's definition): for a negative question, the option whose group is in
``additional_metadata.stereotyped_groups``; for a non-negative question, the other non-unknown
option. The default subset keeps one example, chosen with a fixed seed, per
(category, question_index, version, context_condition, question_polarity).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from biascheck.benchmarks.base import schema_fragment
from biascheck.benchmarks.qa.benchmark import QABenchmark, QAData, QAItem, QAPrompt, category_files, read_utf8, seeded_pick
from biascheck.config.manifest import SuiteManifest, canonical_json
from biascheck.config.sources import Resolved, parsed_file
from biascheck.core.errors import BiascheckError

# BBQ's field -> where a row holds it (a dotted path into nested objects). A suite's [bbq] fields
# table renames any of them for data whose names differ (docs/suites.md, "BBQ-format data").
BBQ_FIELDS: dict[str, str] = {
    "example_id": "example_id",
    "question_index": "question_index",
    "question_polarity": "question_polarity",
    "context_condition": "context_condition",
    "context": "context",
    "question": "question",
    "ans0": "ans0",
    "ans1": "ans1",
    "ans2": "ans2",
    "label": "label",
    "answer_info": "answer_info",
    "stereotyped_groups": "additional_metadata.stereotyped_groups",
    "subcategory": "additional_metadata.subcategory",
    "version": "additional_metadata.version",
}
# Fields a row may lack (a [bbq] fields table can also point the first three at fields it has).
OPTIONAL_FIELDS = ("subcategory", "version", "biased_answer", "unknown_answer")
# The values BBQ's fields take, as the data writes them.
BBQ_VALUES: dict[str, str] = {"ambig": "ambig", "disambig": "disambig", "neg": "neg", "nonneg": "nonneg", "unknown": "unknown"}
# Groups written several ways, as BBQ's analysis script (BBQ_results_metadata.R) reads them: an
# option's group or a stereotyped group that is one of the aliases is the group itself. "low SES"
# is "lowSES" there; "transgender women" and the like are "trans", which any group beginning with
# "trans" matches (TRANS_PREFIX).
BBQ_GROUP_ALIASES: dict[str, tuple[str, ...]] = {
    "m": ("man", "men", "boy", "boys"),
    "f": ("woman", "women", "girl", "girls"),
    "lowses": ("low ses",),
    "highses": ("high ses",),
    "trans": ("transgender women", "transgender men", "transgender women, transgender men", "transgender women, transgender men, trans"),
}
TRANS_PREFIX = "trans"
# results.json's suite.data_quality: rows whose stereotyped groups name no answer option, or two,
# so that no option is the biased one. BBQ's analysis script leaves them out (16 in its files).
TARGET_UNRESOLVED = "target_unresolved"


@dataclass(frozen=True)
class RowFormat:
    """How a BBQ-format file holds BBQ's fields: ``file_format`` (jsonl | csv), where each field is
    (``fields``: BBQ's name -> the data's, a dotted path for nested values), the values it writes
    for the context conditions, question polarities and the unknown option's group (``values``),
    the unknown option's texts where no group marks it (``unknown_wordings``), and groups written
    several ways (``group_aliases``). ``BBQ_ROWS`` is BBQ's own; a suite's [bbq] table gives another.

    The biased option is found as BBQ finds it, from ``answer_info`` (each option's group) and
    ``stereotyped_groups`` with the question's polarity, unless ``fields`` names ``biased_answer``:
    a field that names it outright (its index 0-2, or its text). The unknown option is the one
    whose group is ``values["unknown"]``, else whose text is one of ``unknown_wordings``, else the
    one ``fields["unknown_answer"]`` names."""

    file_format: str = "jsonl"
    fields: Mapping[str, str] = field(default_factory=lambda: dict(BBQ_FIELDS))
    values: Mapping[str, str] = field(default_factory=lambda: dict(BBQ_VALUES))
    unknown_wordings: tuple[str, ...] = ()
    group_aliases: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(BBQ_GROUP_ALIASES))

    @property
    def by_groups(self) -> bool:
        """Whether the biased option is found from the options' groups (BBQ's way)."""
        return "biased_answer" not in self.fields

    def required(self) -> tuple[str, ...]:
        """The data's names of the fields every row must have."""
        needed = ["example_id", "question_index", "context_condition", "context", "question", "ans0", "ans1", "ans2", "label"]
        if self.by_groups:
            needed += ["question_polarity", "answer_info", "stereotyped_groups"]
        else:
            needed.append("biased_answer")
            needed += ["question_polarity"] if "question_polarity" in self.fields else []
        if "unknown_answer" in self.fields:
            needed.append("unknown_answer")
        elif not self.unknown_wordings and "answer_info" not in needed:
            needed.append("answer_info")
        return tuple(self.fields[name].split(".", 1)[0] for name in dict.fromkeys(needed) if name in self.fields)

    def get(self, row: Mapping[str, Any], name: str, default: Any = None) -> Any:
        """BBQ's field ``name`` of ``row``, or ``default`` when the row or the format lacks it."""
        path = self.fields.get(name)
        if path is None:
            return default
        value: Any = row
        for part in path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return default
            value = value[part]
        return value

    def group(self, text: str) -> str:
        """A group as BBQ's analysis reads it: folded, and an alias read as its group."""
        folded = text.casefold()
        return next((group for group, aliases in self.group_aliases.items() if folded in aliases), folded)


BBQ_ROWS = RowFormat()


def load_items(path: Path, category: str, row_format: RowFormat = BBQ_ROWS) -> tuple[list[tuple[QAItem, tuple]], int]:
    """Every example of one category file, each with its sampling group key, and how many rows were
    left out because no option, or two, hold the stereotyped groups (BBQ's analysis leaves them out)."""
    rows = csv_rows(path, row_format.required()) if row_format.file_format == "csv" else jsonl_rows(path, row_format.required())
    read = [item_of_row(row, category, bad, row_format, unresolved="count") for row, bad in rows]
    items = [item for item in read if item is not None]
    if not read:
        raise BiascheckError(path, None, "has no examples", "restore the original file")
    return items, len(read) - len(items)


def jsonl_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[dict, Callable[[str, str], BiascheckError]]]:
    """Each JSON object of a JSON Lines file that has the ``required`` keys, with a maker of its
    one-line error (``bad(field, problem)``, naming the file and line); anything else is refused."""
    raw = path.read_bytes()
    try:
        # JSON Lines are separated by "\n" only; str.splitlines() would also split inside a string
        # holding U+2028, U+0085 and other Unicode line breaks, which JSON allows unescaped.
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        broken = raw.count(b"\n", 0, exc.start) + 1
        raise BiascheckError(path, f"line {broken}", f"not UTF-8 ({exc.reason} at byte {exc.start})", "restore the original file") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue

        bad = row_error(path, number)
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad("json", f"not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise bad("json", "is not an object")
        missing = [k for k in required if k not in row]
        if missing:
            raise bad(missing[0], "missing")
        yield row, bad


def csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[dict, Callable[[str, str], BiascheckError]]]:
    """Each row of a CSV file with a header (as :func:`jsonl_rows`): a cell that holds JSON (an
    object or a list, e.g. answer_info) is read as that JSON; a whole number as a number."""
    import csv
    import io

    reader = csv.DictReader(io.StringIO(read_utf8(path), newline=""))
    missing = [name for name in required if name not in (reader.fieldnames or ())]
    if missing:
        raise BiascheckError(path, missing[0], "no such column", "name the column in the suite's [bbq.fields], or add it")
    for number, row in enumerate(reader, start=2):
        bad = row_error(path, number)
        if None in row:
            raise bad("csv", "has more cells than the header")
        yield {key: _cell(value) for key, value in row.items()}, bad


def _cell(text: str | None) -> Any:
    if text is None:
        return None
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return text
    return int(stripped) if stripped.isdigit() else text


def row_error(path: Path, number: int) -> Callable[[str, str], BiascheckError]:
    """The one-line error of a file's line ``number``: ``bad(field, problem)`` (bound here, so it
    names its own line even when called after the file has been read)."""

    def bad(field: str, problem: str) -> BiascheckError:
        return BiascheckError(path, f"line {number}: {field}", problem, "restore the original file or fix that row")

    return bad


def item_of_row(
    row: dict, category: str, bad, row_format: RowFormat = BBQ_ROWS, *, unresolved: Literal["refuse", "count"] = "refuse"
) -> tuple[QAItem, tuple] | None:
    """One BBQ-format row as an item and its sampling group key; ``bad(field, problem)`` makes its
    error, naming the data's field. A row whose stereotyped groups hold no option or two is
    refused (``unresolved="refuse"``), or left out: None (``"count"``: its caller counts it)."""
    fmt = row_format
    values = fmt.values
    named = fmt.fields.get
    choices = tuple(fmt.get(row, key) for key in ("ans0", "ans1", "ans2"))
    groups = _answer_groups(row, fmt, bad) if "answer_info" in fmt.fields and (fmt.by_groups or fmt.get(row, "answer_info") is not None) else None
    unknown = _unknown_option(row, fmt, choices, groups, bad)
    others = [i for i in range(3) if i != unknown]
    polarity = fmt.get(row, "question_polarity")
    if polarity is not None or fmt.by_groups:
        if polarity not in (values["neg"], values["nonneg"]):
            raise bad(named("question_polarity", "question_polarity"), f"{polarity!r} is not {values['neg']} or {values['nonneg']}")
    if fmt.by_groups:
        assert groups is not None
        stereotyped = fmt.get(row, "stereotyped_groups")
        if isinstance(stereotyped, str):
            stereotyped = [stereotyped]
        if not (isinstance(stereotyped, list) and all(isinstance(s, str) for s in stereotyped)):
            raise bad(named("stereotyped_groups", ""), "must be a list of strings")
        targets = {fmt.group(s) for s in stereotyped}
        matched = [i for i in others if targets.intersection(groups[i]) or (TRANS_PREFIX in targets and groups[i][-1].startswith(TRANS_PREFIX))]
        if len(matched) != 1:
            if unresolved == "count":
                return None
            raise bad(named("stereotyped_groups", ""), f"{stereotyped} matches {len(matched)} answer options, need exactly 1")
        biased = matched[0] if polarity == values["neg"] else next(i for i in others if i != matched[0])
    else:
        biased = _named_option(fmt.get(row, "biased_answer"), choices, named("biased_answer", ""), bad)
        if biased == unknown:
            raise bad(named("biased_answer", ""), "names the unknown option: the biased answer is one of the two people")
    condition = fmt.get(row, "context_condition")
    if condition not in (values["ambig"], values["disambig"]):
        raise bad(named("context_condition", ""), f"{condition!r} is not {values['ambig']} or {values['disambig']}")
    label = fmt.get(row, "label")
    if isinstance(label, str) and label.strip().isdigit():
        label = int(label)
    if label not in (0, 1, 2):
        raise bad(named("label", ""), f"{label!r} is not 0, 1 or 2")
    if condition == values["ambig"] and label != unknown:
        raise bad(named("label", ""), "an ambiguous context must have the unknown answer")
    if condition == values["disambig"] and label == unknown:
        raise bad(named("label", ""), "a disambiguated context cannot have the unknown answer")
    if not all(isinstance(c, str) and c for c in choices) or len(set(choices)) != 3:
        raise bad(named("ans0", ""), "the three answers must be distinct non-empty strings")
    version = str(fmt.get(row, "version", "None"))
    subcategory = str(fmt.get(row, "subcategory", "None"))
    question_index = fmt.get(row, "question_index")
    return QAItem(
        sample_id=f"{category}-{fmt.get(row, 'example_id')}",
        category=category,
        cluster=f"{category}-q{question_index}",
        label="" if subcategory == "None" else subcategory,
        context=fmt.get(row, "context"),
        question=fmt.get(row, "question"),
        choices=choices,  # three strings, checked above
        context_kind="amb" if condition == values["ambig"] else "dis",
        unknown=unknown,
        biased=biased,
        correct=label,
    ), (str(question_index), version, condition, "" if polarity is None else polarity)


def _answer_groups(row: dict, fmt: RowFormat, bad) -> list[list[str]]:
    """Each option's names and group (``answer_info``), folded and read as BBQ's analysis reads them."""
    where = fmt.fields["answer_info"]
    info = fmt.get(row, "answer_info")
    if not isinstance(info, dict) or sorted(info) != ["ans0", "ans1", "ans2"]:
        raise bad(where, "must map ans0, ans1, ans2 to [name, group]")
    groups = []
    for key in ("ans0", "ans1", "ans2"):
        value = info[key]
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            raise bad(f"{where}.{key}", "must be a list of strings")
        # BBQ's analysis reads "M-Black" as "Black": a gender prefix on a group is no group.
        groups.append([fmt.group(v.removeprefix("M-").removeprefix("F-")) for v in value])
    return groups


def _unknown_option(row: dict, fmt: RowFormat, choices: tuple, groups: list[list[str]] | None, bad) -> int:
    """The unknown option: its group tag, else its wording, else the field that names it."""
    if groups is not None:
        unknowns = [i for i, g in enumerate(groups) if g[-1] == fmt.values["unknown"].casefold()]
        if len(unknowns) != 1:
            raise bad(fmt.fields["answer_info"], f"needs exactly one {fmt.values['unknown']!r} option, found {len(unknowns)}")
        return unknowns[0]
    if fmt.unknown_wordings:
        wordings = {w.casefold() for w in fmt.unknown_wordings}
        found = [i for i, c in enumerate(choices) if isinstance(c, str) and c.strip().casefold() in wordings]
        if len(found) != 1:
            raise bad(fmt.fields["ans0"], f"{len(found)} of the answers are an unknown wording of [bbq] unknown_wordings, need exactly 1")
        return found[0]
    return _named_option(fmt.get(row, "unknown_answer"), choices, fmt.fields.get("unknown_answer", ""), bad)


def _named_option(value: Any, choices: tuple, where: str, bad) -> int:
    """The option a field names by its index (0-2, a number or its text) or by its text."""
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1, 2):
        return value
    if isinstance(value, str) and value.strip() in ("0", "1", "2"):
        return int(value.strip())
    if isinstance(value, str) and value in choices:
        return choices.index(value)
    raise bad(where, f"{value!r} names none of the answers (give 0, 1, 2 or an answer's text)")


def one_per_group(keyed_items: list[tuple[QAItem, tuple]], seed: int) -> list[QAItem]:
    """One example per (category, question_index, version, context_condition, question_polarity).

    Disambiguated cells alternate between biased and counter-biased contexts (in question order,
    from a seeded start), so each (category, version, polarity) stratum keeps BBQ's balance of
    the two: a random pick per cell leaves them unbalanced, and then even a perfect model gets a
    non-zero ``bias_score_dis``. The choice depends only on the seed, the cell and the example
    ids, never on file order.
    """
    cells: dict[tuple, list[QAItem]] = defaultdict(list)
    for item, key in keyed_items:
        cells[(item.category, *key)].append(item)

    def question_order(key: tuple) -> tuple:
        question = key[1]
        return (int(question), question) if question.isdigit() else (10**9, question)

    strata: dict[tuple, list[tuple]] = defaultdict(list)
    for key in cells:
        category, question, version, condition, polarity = key
        strata[(category, version, condition, polarity)].append(key)

    chosen = []
    for stratum in sorted(strata):
        keys = sorted(strata[stratum], key=question_order)
        start = seeded_pick(seed, stratum, 2)
        for position, key in enumerate(keys):
            members = sorted(cells[key], key=lambda it: int(it.sample_id.rsplit("-", 1)[1]))
            if stratum[2] == "disambig":
                want_biased = (position + start) % 2 == 0
                matching = [it for it in members if (it.correct == it.biased) == want_biased]
                members = matching or members
            chosen.append(members[seeded_pick(seed, key, len(members))])
    return chosen


class BBQBenchmark(QABenchmark):
    """BBQ's files, one category each (several files may share one); a benchmark translated from
    BBQ subclasses it and overrides :meth:`load_file` alone."""

    name = "bbq"
    # The categories (the files' category names) by their shared names
    # (benchmarks.base.COMMON_CATEGORIES). The intersectional Race_x_SES and Race_x_gender have no
    # counterpart in another benchmark and are left out of the view across suites.
    common_categories = {
        "Age": "age",
        "Disability_status": "disability",
        "Gender_identity": "gender",
        "Nationality": "nationality",
        "Physical_appearance": "physical_appearance",
        "Race_ethnicity": "race_ethnicity",
        "Religion": "religion",
        "SES": "ses",
        "Sexual_orientation": "sexual_orientation",
    }

    # An optional [bbq] table: how a BBQ-format dataset's files hold BBQ's fields, where they
    # differ from BBQ's own (row_format_of); a suite without one reads BBQ's layout.
    settings_schema: Mapping[str, Any] | None = schema_fragment(__package__, "bbq-settings")
    settings_required = False

    def fingerprint_settings(self, manifest: SuiteManifest) -> list[Any]:
        # A [bbq] table changes what is read from the same files; a suite without one keeps the
        # fingerprint it had before the table existed.
        table = [canonical_json(manifest.settings)] if manifest.settings else []
        return [*super().fingerprint_settings(manifest), *table]

    def load_file(self, path: Path, category: str, row_format: RowFormat = BBQ_ROWS) -> tuple[list[tuple[QAItem, tuple]], int]:
        """One data file's examples, each with its sampling group key (see :func:`one_per_group`),
        and how many rows were left out (no option holds the stereotyped groups, or two do)."""
        return parsed_file(path, load_items, category, row_format)

    def row_format(self, manifest: SuiteManifest) -> RowFormat:
        """How the suite's files hold BBQ's fields: its [bbq] table's, else BBQ's own layout."""
        return row_format_of(manifest)

    def load(self, manifest, files):
        data = self.load_items_of(manifest, files)
        prompts = [QAPrompt(p.id, p.template, p.unknown, p.letters) for p in manifest.inline_prompts]
        if not prompts:
            raise BiascheckError(manifest.path, "prompts.inline", "BBQ suites need inline prompts", "add [[prompts.inline]] tables")
        return data._replace(prompts=prompts)

    def load_items_of(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> QAData:
        """The suite's items from its category files (prompts empty: :meth:`load` adds them)."""
        found, skipped = category_files(manifest, files)
        row_format = self.row_format(manifest)
        keyed: list[tuple[QAItem, tuple]] = []
        data_quality: dict[str, dict[str, int]] = {}
        for _, category, path in found:
            read, unresolved = self.load_file(path, category, row_format)
            keyed += read
            if unresolved:
                counts = data_quality.setdefault(category, {})
                counts[TARGET_UNRESOLVED] = counts.get(TARGET_UNRESOLVED, 0) + unresolved
        if not keyed and not skipped:
            raise BiascheckError(manifest.path, "data", "no category files", 'give each BBQ file a category = "..."')
        if manifest.sample == "one-per-group":
            items = one_per_group(keyed, manifest.subset_seed)
        else:
            items = [item for item, _ in keyed]
        return QAData(items, [], skipped, data_quality)


def row_format_of(manifest: SuiteManifest) -> RowFormat:
    """The suite's [bbq] table as a :class:`RowFormat` (BBQ's own without one)."""
    table = manifest.settings or {}
    if not table:
        return BBQ_ROWS
    fields = {**BBQ_FIELDS, **table.get("fields", {})}
    if "biased_answer" in table.get("fields", {}):
        for name in ("answer_info", "stereotyped_groups"):
            if name not in table.get("fields", {}):
                fields.pop(name)
    aliases = {**BBQ_GROUP_ALIASES, **{group.casefold(): tuple(a.casefold() for a in names) for group, names in table.get("groups", {}).items()}}
    return RowFormat(
        file_format=table.get("format", "jsonl"),
        fields=fields,
        values={**BBQ_VALUES, **table.get("values", {})},
        unknown_wordings=tuple(table.get("unknown_wordings", ())),
        group_aliases=aliases,
    )


BBQ = BBQBenchmark()
