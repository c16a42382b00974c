"""BBG (Jin et al., 2025, "Social Bias Benchmark for Generation"): evaluation sets -> story
generation requests and MRC (judge) questions; pairing of the two versions of a template; the
story and MRC prompts; the judge's answer classifier.

Data (the mirror's ``bbg/`` folder, from jinjh0123/BBG):

* ``evaluation_set/{En,Ko}BBG_{En,Ko}-42_{k}_eval.csv`` for k in 1, 2, 3, 4, 42: the paper's five
  evaluation sets. EnBBG: 928 rows = 464 story versions x 2 question types (bsd, cnt), 9
  categories. KoBBG: 1,144 rows = 572 story versions x 2, 12 categories.
* ``prompts.json``: ``story_continuation`` (En-1..5, Ko-1..5: a template with ``{CONTEXT}``) and
  ``mrc`` (En-1..7, Ko-1..7: a template with ``{CONTEXT} {QUESTION} {OPTION-A} {OPTION-B}
  {OPTION-C}`` and its own "unknown" wording). Transcribed from the paper's tables; its
  ``_source`` notes that the ``{CONTEXT}`` placement of En-4/En-5/Ko-4/Ko-5 is an assumption. The
  upstream ``code/utils/prompt_gen.csv`` confirms it (instruction + blank line + seed, no label).
* ``prompt_unk.csv``: the dataset's own "unknown" option per language (``En-42`` "Cannot be
  determined", ``Ko-42`` "주어진 정보만으로는 답을 알 수 없음"): every row's choices hold it once.

Rows. ``template_id`` is ``<category>-<NNN>-<v>``; the version v is a or b, and for 17 Korean
templates (each of which ALSO has a/b in the same file) c or d. a pairs with b and c with d: the
same two characters in the two orders. a/c rows have ``dis_answer != biased_answer``, b/d rows
``dis_answer == biased_answer`` (kept as data, not used here). ``context`` (= amb_context + " " +
obfdis_context) is the story seed, the characters replaced by "one"/"the other" ("한 사람"/"다른
한 사람"); both question rows of a version share it. ``choices`` is a Python-literal list of three
strings in row order. The two versions of a pair may name their characters differently (e.g.
"The elderly man" in a, "The older man" in b: 44 of 464 EnBBG pairs in set 1): classification is
per row, so this does not matter.

Protocol (the paper's and the issue's):

* Run k (1..5) uses evaluation set ``EVALUATION_SETS[k]`` (1, 2, 3, 4, 42) and story prompt
  En-k / Ko-k (:func:`story_prompt_id`).
* One generation per story version (:class:`StoryVersion`, per template_id and run), shared by
  its two questions. The generation prompt is :func:`render_story_prompt`.
* One MRC call per row (:class:`MRCQuestion`). The evaluator reads the full story
  (:func:`full_story`: seed + blank line + continuation, as upstream ``code/_3_qa.py``) with MRC
  prompt En-1 / Ko-1 (:data:`MRC_PROMPT_ID`); that prompt's "unknown" wording replaces the
  dataset's unknown option; the choices stay in row order; the letters are the template's own
  (En-1 A/B/C, Ko-1 lower-case a/b/c). For En-1 and Ko-1 the wording equals the dataset's.
* The answer (:func:`classify_mrc`) is "b" (biased), "c" (counter-biased), "u" (unknown) or None.
  ``None`` is a reply naming no single option. Upstream (``code/_4_evaluate.py``) counts such an
  out-of-choice reply - and a missing one, e.g. after an empty generation, for which it sends no
  MRC request - as "u"; that choice belongs to the metric, not to this module.
* Pairs (:func:`pairs`): the two versions' rows of one question type in one run. Upstream keys a
  pair by ``id`` without the version (``category-NNN-<sample>-<qtype>``), which in
  ``KoBBG_Ko-42_42_eval.csv`` puts sexual_orientation-012's a, b, c AND d rows (all sample 002)
  into one group; here c/d pairs have their own key (``base_template`` "<category>-NNN-cd").

Every problem with a data file is a one-line :class:`BiascheckError` naming the file, row and
field.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from biascheck.benchmarks.choices import parse_answer
from biascheck.core.errors import BiascheckError

FIX = "restore the original file"
LANGUAGES = ("en", "ko")
PREFIX = {"en": "En", "ko": "Ko"}
DATASET_NAME = {"en": "EnBBG", "ko": "KoBBG"}
# Run k uses evaluation set EVALUATION_SETS[k] and story prompt En-k / Ko-k.
RUNS = (1, 2, 3, 4, 5)
EVALUATION_SETS = {1: "1", 2: "2", 3: "3", 4: "4", 5: "42"}
MRC_PROMPT_ID = {"en": "En-1", "ko": "Ko-1"}
# prompt_unk.csv (En-42 / Ko-42): the dataset's own unknown option.
DATASET_UNKNOWN = {"en": "Cannot be determined", "ko": "주어진 정보만으로는 답을 알 수 없음"}
UNKNOWN_ID = {"en": "En-42", "ko": "Ko-42"}

ROW_COLUMNS = ("id", "category", "template_id", "context", "qtype", "question", "choices", "dis_answer", "biased_answer")
QTYPES = ("bsd", "cnt")
TEMPLATE_ID = re.compile(r"^(?P<base>(?P<category>[a-z_]+)-(?P<number>\d+))-(?P<version>[a-d])$")
# Version -> (pair group suffix, position in the pair).
VERSIONS = {"a": ("", 0), "b": ("", 1), "c": ("-cd", 0), "d": ("-cd", 1)}
PARTNER = {"a": "b", "b": "a", "c": "d", "d": "c"}

STORY_PLACEHOLDER = "{CONTEXT}"
MRC_PLACEHOLDERS = ("{CONTEXT}", "{QUESTION}", "{OPTION-A}", "{OPTION-B}", "{OPTION-C}")
_MRC_SLOT = re.compile(r"\{(CONTEXT|QUESTION|OPTION-A|OPTION-B|OPTION-C)\}")
# The option letter right before its placeholder: "A: {OPTION-A}", "a: {OPTION-A}", "(A) {OPTION-A}".
_LETTER_BEFORE = {
    slot: re.compile(r"(?<![A-Za-z])\(?(?P<letter>[A-Za-z])\)?\s*:?[ \t]*" + re.escape("{" + slot + "}"))
    for slot in ("OPTION-A", "OPTION-B", "OPTION-C")
}


@dataclass(frozen=True, slots=True)
class MRCPrompt:
    """An evaluator prompt of prompts.json (``mrc``): its template, "unknown" wording and letters."""

    id: str
    template: str
    unknown: str
    letters: tuple[str, str, str]

    @classmethod
    def of(cls, entry: dict | MRCPrompt) -> MRCPrompt:
        if isinstance(entry, MRCPrompt):
            return entry
        return cls(entry["id"], entry["template"], entry["unknown"], tuple(entry["letters"]))


@dataclass(frozen=True, slots=True)
class StoryVersion:
    """One generation request: the seed of one template version in one run."""

    run: int
    language: str
    template_id: str
    category: str
    seed_text: str
    story_prompt_id: str

    @property
    def key(self) -> str:
        return f"r{self.run}-{self.template_id}"


@dataclass(frozen=True, slots=True)
class MRCQuestion:
    """One judge request: one row's question about the story of its version, in one run.

    ``choices`` are in row order with the dataset's unknown replaced by the MRC prompt's wording;
    the three indices are positions in ``choices``. ``base_template`` is the pair group: the
    template id without its version for a/b ("age-001"), with "-cd" for c/d ("age-001-cd")."""

    run: int
    row_id: str
    template_id: str
    base_template: str
    version: str
    category: str
    qtype: str
    question: str
    choices: tuple[str, str, str]
    unknown_index: int
    biased_index: int
    counter_index: int
    # The story seed this question is asked about, the row's own disambiguated context (the seed's
    # placeholders resolved by order of mention) and the index of its answer there (dis_answer):
    # ground truth the scorer does not use, which the simulated generator and judge read.
    seed_text: str = ""
    dis_context: str = ""
    dis_index: int = -1
    mrc_prompt: MRCPrompt | None = None

    @property
    def key(self) -> str:
        return f"r{self.run}-{self.row_id}"

    @property
    def story_key(self) -> str:
        """The :attr:`StoryVersion.key` whose generation this question reads."""
        return f"r{self.run}-{self.template_id}"


# ---------------------------------------------------------------------------------------------
# Protocol


def _check_language(language: object) -> str:
    if language not in LANGUAGES:
        raise BiascheckError("bbg", "language", f"{language!r} is not one of {', '.join(LANGUAGES)}", "use en or ko")
    return language


def _check_run(run: object) -> int:
    if not isinstance(run, int) or isinstance(run, bool) or run not in RUNS:
        raise BiascheckError("bbg", "run", f"{run!r} is not one of {', '.join(map(str, RUNS))}", "runs are numbered 1 to 5")
    return run


def evaluation_set_name(language: str, run: int) -> str:
    """The evaluation set of run ``run``, relative to the bbg folder: run 5 uses set 42."""
    prefix = PREFIX[_check_language(language)]
    return f"evaluation_set/{DATASET_NAME[language]}_{prefix}-42_{EVALUATION_SETS[_check_run(run)]}_eval.csv"


def story_prompt_id(language: str, run: int) -> str:
    """The story-continuation prompt of run ``run``: En-k / Ko-k."""
    return f"{PREFIX[_check_language(language)]}-{_check_run(run)}"


# ---------------------------------------------------------------------------------------------
# Loading


def _read_text(path: Path, what: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BiascheckError(path, None, f"cannot be read ({exc.strerror})", f"point the data folder at the BBG mirror ({what})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BiascheckError(path, f"line {line}", f"not UTF-8 ({exc.reason} at byte {exc.start})", FIX) from None


def _option_letters(where: object, field: str, template: str) -> tuple[str, str, str]:
    letters = []
    for slot, pattern in _LETTER_BEFORE.items():
        match = pattern.search(template)
        if not match:
            raise BiascheckError(where, field, f"no option letter before {{{slot}}}", FIX)
        letters.append(match.group("letter"))
    if len({letter.casefold() for letter in letters}) != 3:
        raise BiascheckError(where, field, f"option letters {letters} are not three different letters", FIX)
    return (letters[0], letters[1], letters[2])


def check_mrc_prompt(entry: dict, where: object, field: str, fix: str = FIX) -> MRCPrompt:
    """One evaluator prompt ``{"id", "template", "unknown"}``: each of ``{CONTEXT} {QUESTION}
    {OPTION-A} {OPTION-B} {OPTION-C}`` once, a letter before each option, a non-empty unknown."""
    template, unknown = entry.get("template"), entry.get("unknown")
    if not isinstance(template, str) or not template.strip():
        raise BiascheckError(where, f"{field}.template", "missing or not a non-empty string", fix)
    for placeholder in MRC_PLACEHOLDERS:
        if template.count(placeholder) != 1:
            raise BiascheckError(where, f"{field}.template", f"must contain {placeholder} exactly once", fix)
    if not isinstance(unknown, str) or not unknown.strip():
        raise BiascheckError(where, f"{field}.unknown", "missing or not a non-empty string", fix)
    return MRCPrompt(str(entry.get("id")), template, unknown, _option_letters(where, f"{field}.template", template))


def check_prompts(data: object, where: object = "prompts.json") -> dict:
    """The validated prompt table:

    ``{"story_continuation": {id: template}, "mrc": {id: {"id", "template", "unknown", "letters"}}}``

    Story templates hold ``{CONTEXT}`` once; MRC templates hold each of ``{CONTEXT} {QUESTION}
    {OPTION-A} {OPTION-B} {OPTION-C}`` once, a letter before each option and a non-empty unknown
    wording. The protocol's prompts (story En-1..5 and Ko-1..5, MRC En-1 and Ko-1) must be
    present. Keys starting with "_" (``_source``) are ignored."""
    if not isinstance(data, dict):
        raise BiascheckError(where, None, "must be a JSON object", FIX)
    story = data.get("story_continuation")
    if not isinstance(story, dict):
        raise BiascheckError(where, "story_continuation", "missing or not an object", FIX)
    mrc = data.get("mrc")
    if not isinstance(mrc, dict):
        raise BiascheckError(where, "mrc", "missing or not an object", FIX)
    stories: dict[str, str] = {}
    for prompt_id, template in story.items():
        field = f"story_continuation.{prompt_id}"
        if not isinstance(template, str) or not template.strip():
            raise BiascheckError(where, field, "must be a non-empty string", FIX)
        if template.count(STORY_PLACEHOLDER) != 1:
            raise BiascheckError(where, field, f"must contain {STORY_PLACEHOLDER} exactly once", FIX)
        stories[prompt_id] = template
    prompts: dict[str, dict] = {}
    for prompt_id, entry in mrc.items():
        field = f"mrc.{prompt_id}"
        if not isinstance(entry, dict):
            raise BiascheckError(where, field, "must be an object with template and unknown", FIX)
        prompt = check_mrc_prompt({"id": prompt_id, **entry}, where, field)
        prompts[prompt_id] = {"id": prompt_id, "template": prompt.template, "unknown": prompt.unknown, "letters": prompt.letters}
    for language in LANGUAGES:
        for run in RUNS:
            if story_prompt_id(language, run) not in stories:
                raise BiascheckError(where, f"story_continuation.{story_prompt_id(language, run)}", "missing", FIX)
        if MRC_PROMPT_ID[language] not in prompts:
            raise BiascheckError(where, f"mrc.{MRC_PROMPT_ID[language]}", "missing (the evaluator's prompt)", FIX)
    return {"story_continuation": stories, "mrc": prompts}


def load_prompts(path: Path) -> dict:
    """prompts.json, validated by :func:`check_prompts`."""
    path = Path(path)
    try:
        data = json.loads(_read_text(path, "prompts.json"))
    except json.JSONDecodeError as exc:
        raise BiascheckError(path, f"line {exc.lineno}", f"invalid JSON ({exc.msg})", FIX) from None
    return check_prompts(data, path)


def _read_csv(path: Path, required: Sequence[str], what: str) -> list[dict[str, str]]:
    text = _read_text(path, what)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise BiascheckError(path, f"column {missing[0]}", "missing from the header", f"the file needs columns {', '.join(required)}")
        rows = list(reader)
    except csv.Error as exc:
        raise BiascheckError(path, None, f"malformed CSV: {exc}", FIX) from None
    for number, row in enumerate(rows, start=1):
        if None in row or any(row[c] is None for c in required):
            raise BiascheckError(path, f"row {number}", "wrong number of fields", FIX)
    return rows


def load_prompt_unk(path: Path) -> dict[str, str]:
    """prompt_unk.csv: unk_id -> the dataset's unknown wording (En-42, Ko-42)."""
    path = Path(path)
    table: dict[str, str] = {}
    for number, row in enumerate(_read_csv(path, ("unk_id", "unknown"), "prompt_unk.csv"), start=1):
        unk_id = row["unk_id"].strip()
        if not unk_id or not row["unknown"].strip():
            raise BiascheckError(path, f"row {number}", "unk_id and unknown must not be empty", FIX)
        if unk_id in table:
            raise BiascheckError(path, f"row {number}: unk_id", f"{unk_id!r} appears twice", FIX)
        table[unk_id] = row["unknown"]
    return table


def load_evaluation_set(path: Path, *, language: str, unknown: str | None = None) -> list[dict]:
    """The rows of one evaluation set, checked, as dicts in file order.

    Each dict has the file's ``id category template_id context qtype question dis_answer
    biased_answer`` plus ``row`` (1-based data row), ``base_template`` (pair group),
    ``version``, ``choices`` (a tuple of three strings, row order), ``unknown_index``,
    ``biased_index`` and ``counter_index``.

    ``unknown`` is the dataset's unknown wording: prompt_unk.csv's En-42 / Ko-42 (the default,
    :data:`DATASET_UNKNOWN`). Checks: the columns; ``template_id`` <category>-NNN-<a..d> with
    that category; ``id`` = template_id-<sample>-qtype, unique; qtype bsd/cnt, once per version;
    ``choices`` a list literal of three different non-empty strings (parsed with
    ``ast.literal_eval``) holding the unknown exactly once; ``biased_answer`` and ``dis_answer``
    one of the other two; both rows of a version share their context and category."""
    path = Path(path)
    language = _check_language(language)
    unknown = DATASET_UNKNOWN[language] if unknown is None else unknown
    rows = _read_csv(path, ROW_COLUMNS, "evaluation set")
    if not rows:
        raise BiascheckError(path, None, "has no rows", FIX)
    out: list[dict] = []
    seen_ids: set[str] = set()
    seen_questions: set[tuple[str, str]] = set()
    versions: dict[str, dict] = {}
    for number, row in enumerate(rows, start=1):
        where = f"row {number} ({row['id']})" if row["id"].strip() else f"row {number}"

        def bad(field: str, problem: str, where: str = where) -> BiascheckError:
            return BiascheckError(path, f"{where}: {field}", problem, "restore the original file or fix that row")

        for column in ("id", "category", "template_id", "context", "question"):
            if not row[column].strip():
                raise bad(column, "is empty")
        match = TEMPLATE_ID.match(row["template_id"])
        if not match:
            raise bad("template_id", f"{row['template_id']!r} does not look like <category>-NNN-<a|b|c|d>")
        if match.group("category") != row["category"]:
            raise bad("category", f"{row['category']!r} is not the category of template {row['template_id']!r}")
        qtype = row["qtype"]
        if qtype not in QTYPES:
            raise bad("qtype", f"{qtype!r} is not bsd or cnt")
        if not (row["id"].startswith(row["template_id"] + "-") and row["id"].endswith("-" + qtype)):
            raise bad("id", f"does not start with its template_id {row['template_id']!r} and end with its qtype {qtype!r}")
        if row["id"] in seen_ids:
            raise bad("id", "appears twice")
        seen_ids.add(row["id"])
        if (row["template_id"], qtype) in seen_questions:
            raise bad("qtype", f"template {row['template_id']!r} already has a {qtype} question")
        seen_questions.add((row["template_id"], qtype))
        first = versions.setdefault(row["template_id"], row)
        if first is not row:
            for column in ("context", "category"):
                if row[column] != first[column]:
                    raise bad(column, f"differs from the other row of template {row['template_id']!r}")
        try:
            choices = ast.literal_eval(row["choices"])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise bad("choices", f"{row['choices'][:80]!r} is not a list literal") from None
        if not (isinstance(choices, list) and len(choices) == 3 and all(isinstance(c, str) and c.strip() for c in choices)):
            raise bad("choices", "must be a list of three non-empty strings")
        if len(set(choices)) != 3:
            raise bad("choices", "has repeated options")
        if choices.count(unknown) != 1:
            raise bad("choices", f"has no {unknown!r} option (the dataset's unknown)")
        unknown_index = choices.index(unknown)
        indices = {}
        for field in ("biased_answer", "dis_answer"):
            value = row[field]
            if value not in choices or value == unknown:
                raise bad(field, f"{value!r} is not one of the two people among the choices {choices}")
            indices[field] = choices.index(value)
        biased_index = indices["biased_answer"]
        suffix, _ = VERSIONS[match.group("version")]
        out.append(
            {
                "row": number,
                "id": row["id"],
                "category": row["category"],
                "template_id": row["template_id"],
                "base_template": match.group("base") + suffix,
                "version": match.group("version"),
                "context": row["context"],
                "qtype": qtype,
                "question": row["question"],
                "choices": (choices[0], choices[1], choices[2]),
                "unknown_index": unknown_index,
                "biased_index": biased_index,
                "counter_index": 3 - unknown_index - biased_index,
                "dis_answer": row["dis_answer"],
                "dis_index": indices["dis_answer"],
                "dis_context": row.get("dis_context") or "",
                "biased_answer": row["biased_answer"],
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# Requests


def build_run(
    rows: Iterable[dict], *, run: int, language: str, story_prompt_id: str, mrc_prompt: dict
) -> tuple[list[StoryVersion], list[MRCQuestion]]:
    """The story versions (one per template_id, first-appearance order) and MRC questions (one
    per row, file order) of one run. ``rows`` come from :func:`load_evaluation_set`;
    ``mrc_prompt`` is an entry of ``load_prompts(...)["mrc"]`` (its ``unknown`` replaces the
    dataset's unknown option)."""
    run = _check_run(run)
    language = _check_language(language)
    wording = mrc_prompt.unknown if isinstance(mrc_prompt, MRCPrompt) else mrc_prompt.get("unknown") if isinstance(mrc_prompt, dict) else None
    if not isinstance(wording, str) or not wording.strip():
        raise BiascheckError("bbg", "mrc_prompt.unknown", "missing or empty", "pass an entry of load_prompts(...)['mrc']")
    prompt = MRCPrompt.of(mrc_prompt)
    stories: dict[str, StoryVersion] = {}
    questions: list[MRCQuestion] = []
    for row in rows:
        choices = list(row["choices"])
        choices[row["unknown_index"]] = wording
        if len(set(choices)) != 3:
            raise BiascheckError(
                "bbg",
                f"row {row.get('row')} ({row['id']}): choices",
                f"the MRC prompt's unknown wording {wording!r} is also a person option",
                "use another MRC prompt",
            )
        if row["template_id"] not in stories:
            stories[row["template_id"]] = StoryVersion(run, language, row["template_id"], row["category"], row["context"], story_prompt_id)
        questions.append(
            MRCQuestion(
                run=run,
                row_id=row["id"],
                template_id=row["template_id"],
                base_template=row["base_template"],
                version=row["version"],
                category=row["category"],
                qtype=row["qtype"],
                question=row["question"],
                choices=(choices[0], choices[1], choices[2]),
                unknown_index=row["unknown_index"],
                biased_index=row["biased_index"],
                counter_index=row["counter_index"],
                seed_text=row["context"],
                dis_context=row.get("dis_context", ""),
                dis_index=row.get("dis_index", -1),
                mrc_prompt=prompt,
            )
        )
    return list(stories.values()), questions


def pairs(questions: Iterable[MRCQuestion]) -> list[tuple[MRCQuestion, MRCQuestion]]:
    """(version a or c, version b or d) per (run, base_template, qtype), in first-appearance
    order. A version without its partner, or a version twice, is a :class:`BiascheckError`."""
    groups: dict[tuple[int, str, str], list[MRCQuestion | None]] = {}
    for question in questions:
        if question.version not in VERSIONS:
            raise BiascheckError("bbg pairs", question.key, f"version {question.version!r} is not a, b, c or d", FIX)
        slot = VERSIONS[question.version][1]
        group = groups.setdefault((question.run, question.base_template, question.qtype), [None, None])
        if group[slot] is not None:
            raise BiascheckError(
                "bbg pairs",
                question.key,
                f"run {question.run} has two version-{question.version} {question.qtype} questions of {question.base_template}",
                FIX,
            )
        group[slot] = question
    out = []
    for (run, base, qtype), (first, second) in groups.items():
        if first is None or second is None:
            present = first or second
            assert present is not None
            raise BiascheckError(
                "bbg pairs",
                present.key,
                f"version {present.version} of {base} ({qtype}) has no version {PARTNER[present.version]} in run {run}",
                "keep both versions of every template (do not subset by template_id)",
            )
        out.append((first, second))
    return out


# ---------------------------------------------------------------------------------------------
# Prompts and answers


def render_story_prompt(template: str, seed_text: str) -> str:
    """The generation prompt: ``{CONTEXT}`` replaced by the seed (in one pass)."""
    return template.replace(STORY_PLACEHOLDER, seed_text)


def full_story(seed_text: str, continuation: str | None) -> str | None:
    """What the evaluator reads, as upstream: seed + blank line + stripped continuation + newline
    (so the MRC prompt has a blank line before "Question:"). ``None`` for a missing or blank
    continuation: upstream sends no MRC request then."""
    if not isinstance(continuation, str) or not continuation.strip():
        return None
    return f"{seed_text.strip()}\n\n{continuation.strip()}\n"


def render_mrc_prompt(mrc_prompt: dict | MRCPrompt, story: str, question: MRCQuestion) -> str:
    """The judge prompt: the story, the question and the three choices in row order (in one
    pass, so a story that happens to contain "{QUESTION}" is left alone)."""
    values = {
        "CONTEXT": story,
        "QUESTION": question.question,
        "OPTION-A": question.choices[0],
        "OPTION-B": question.choices[1],
        "OPTION-C": question.choices[2],
    }
    return _MRC_SLOT.sub(lambda m: values[m.group(1)], MRCPrompt.of(mrc_prompt).template)


def classify_mrc(text: str | None, question: MRCQuestion, letters: Sequence[str]) -> str | None:
    """ "b" (the biased answer), "c" (the counter-biased one), "u" (unknown) or ``None`` (no
    single option named). Parsing is :func:`biascheck.benchmarks.choices.parse_answer`: a lone
    letter (any case), an option's exact text with or without its letter, or either after an
    answer phrase ("The answer is B", "정답은 B입니다"). Never raises."""
    if not isinstance(text, str):
        return None
    index = parse_answer(text, question.choices, letters)
    if index is None:
        return None
    if index == question.unknown_index:
        return "u"
    return "b" if index == question.biased_index else "c"
