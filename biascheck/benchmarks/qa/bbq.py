"""BBQ (Parrish et al., 2022): English bias QA, one JSONL file per category.

The biased answer (the paper's definition): for a negative question, the option whose group is in
``additional_metadata.stereotyped_groups``; for a non-negative question, the other non-unknown
option. The default subset keeps one example, chosen with a fixed seed, per
(category, question_index, version, context_condition, question_polarity).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from biascheck.benchmarks.qa.benchmark import QABenchmark, QAData, QAItem, QAPrompt, category_files, seeded_pick
from biascheck.core.errors import BiascheckError

REQUIRED = (
    "example_id",
    "question_index",
    "question_polarity",
    "context_condition",
    "category",
    "answer_info",
    "additional_metadata",
    "context",
    "question",
    "ans0",
    "ans1",
    "ans2",
    "label",
)


def load_items(path: Path, category: str) -> list[tuple[QAItem, tuple]]:
    """Every example of one category file, each with its sampling group key."""
    items = [item_of_row(row, category, bad) for row, bad in jsonl_rows(path, REQUIRED)]
    if not items:
        raise BiascheckError(path, None, "has no examples", "restore the original file")
    return items


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


def row_error(path: Path, number: int) -> Callable[[str, str], BiascheckError]:
    """The one-line error of a file's line ``number``: ``bad(field, problem)`` (bound here, so it
    names its own line even when called after the file has been read)."""

    def bad(field: str, problem: str) -> BiascheckError:
        return BiascheckError(path, f"line {number}: {field}", problem, "restore the original file or fix that row")

    return bad


def item_of_row(row: dict, category: str, bad) -> tuple[QAItem, tuple]:
    """One BBQ row as an item and its sampling group key; ``bad(field, problem)`` makes its error."""
    info = row["answer_info"]
    if not isinstance(info, dict) or sorted(info) != ["ans0", "ans1", "ans2"]:
        raise bad("answer_info", "must map ans0, ans1, ans2 to [name, group]")
    groups = []
    for key in ("ans0", "ans1", "ans2"):
        value = info[key]
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            raise bad(f"answer_info.{key}", "must be a list of strings")
        groups.append([v.casefold() for v in value])
    unknowns = [i for i, g in enumerate(groups) if g[-1] == "unknown"]
    if len(unknowns) != 1:
        raise bad("answer_info", f"needs exactly one 'unknown' option, found {len(unknowns)}")
    unknown = unknowns[0]
    others = [i for i in range(3) if i != unknown]
    metadata = row["additional_metadata"]
    stereotyped = metadata.get("stereotyped_groups") if isinstance(metadata, dict) else None
    if not (isinstance(stereotyped, list) and all(isinstance(s, str) for s in stereotyped)):
        raise bad("additional_metadata.stereotyped_groups", "must be a list of strings")
    targets = {s.casefold() for s in stereotyped}
    matched = [i for i in others if targets.intersection(groups[i])]
    if len(matched) != 1:
        raise bad("additional_metadata.stereotyped_groups", f"{stereotyped} matches {len(matched)} answer options, need exactly 1")
    polarity = row["question_polarity"]
    if polarity not in ("neg", "nonneg"):
        raise bad("question_polarity", f"{polarity!r} is not neg or nonneg")
    biased = matched[0] if polarity == "neg" else next(i for i in others if i != matched[0])
    condition = row["context_condition"]
    if condition not in ("ambig", "disambig"):
        raise bad("context_condition", f"{condition!r} is not ambig or disambig")
    label = row["label"]
    if label not in (0, 1, 2):
        raise bad("label", f"{label!r} is not 0, 1 or 2")
    if condition == "ambig" and label != unknown:
        raise bad("label", "an ambiguous context must have the unknown answer")
    if condition == "disambig" and label == unknown:
        raise bad("label", "a disambiguated context cannot have the unknown answer")
    choices = (row["ans0"], row["ans1"], row["ans2"])
    if not all(isinstance(c, str) and c for c in choices) or len(set(choices)) != 3:
        raise bad("ans0", "the three answers must be distinct non-empty strings")
    version = str(metadata.get("version", "None"))
    subcategory = str(metadata.get("subcategory", "None"))
    return QAItem(
        sample_id=f"{category}-{row['example_id']}",
        category=category,
        cluster=f"{category}-q{row['question_index']}",
        label="" if subcategory == "None" else subcategory,
        context=row["context"],
        question=row["question"],
        choices=choices,
        context_kind="amb" if condition == "ambig" else "dis",
        unknown=unknown,
        biased=biased,
        correct=label,
    ), (str(row["question_index"]), version, condition, polarity)


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

    def load_file(self, path: Path, category: str) -> list[tuple[QAItem, tuple]]:
        """One data file's examples, each with its sampling group key (see :func:`one_per_group`)."""
        return load_items(path, category)

    def load(self, manifest, files):
        found, skipped = category_files(manifest, files)
        keyed: list[tuple[QAItem, tuple]] = [keyed_item for _, category, path in found for keyed_item in self.load_file(path, category)]
        if not keyed and not skipped:
            raise BiascheckError(manifest.path, "data", "no category files", 'give each BBQ file a category = "..."')
        if manifest.sample == "one-per-group":
            items = one_per_group(keyed, manifest.subset_seed)
        else:
            items = [item for item, _ in keyed]
        prompts = [QAPrompt(p.id, p.template, p.unknown, p.letters) for p in manifest.inline_prompts]
        if not prompts:
            raise BiascheckError(manifest.path, "prompts.inline", "BBQ suites need inline prompts", "add [[prompts.inline]] tables")
        return QAData(items, prompts, skipped)


BBQ = BBQBenchmark()
