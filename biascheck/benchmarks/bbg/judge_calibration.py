"""BBG's judge, measured and corrected: the calibration file, its kit, and the corrected metrics.

A calibration is a labelled sample of (story, question, judge's answer) with a person's reading
(``label``, b / c / u): its counts ``[true, judged]`` give the judge's confusion matrix ``M``.
The pair types a run reports are judge readings; if the judge errs independently on the two
readings of a pair (``M kron M``), the true pair-type shares are ``pi = ((M kron M)^T)^-1 p``,
projected onto the simplex (:mod:`biascheck.metrics.misclassification`), and ``ntr_gen`` and
``bias_gen`` follow from ``pi`` as from observed shares. The intervals pair each bootstrap
resample of templates with a resample of each calibration class (:func:`corrected_table`,
:func:`calibration_draws`); a comparison applies the same draw to baseline and candidate in each
resample (``MetricDef.resampled``).

A calibration belongs to one judge model, one MRC prompt (its fingerprint) and one language: a
run with another is refused, with the reason. It is recorded in a run's ``scoring`` as
``calibration = "<id>:b=..;c=..;u=.."`` (its id and counts), so it is part of the suite
fingerprint (runs with different calibrations are not compared) and a comparison can rebuild
the correction from the results alone.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from biascheck.benchmarks.bbg.metrics import COUNT_FIELDS, PAIR_TYPES
from biascheck.config.manifest import canonical_json, sha256_text
from biascheck.core.errors import BiascheckError
from biascheck.metrics.bootstrap import bootstrap_sums, percentile_interval
from biascheck.metrics.core import MetricDef, MetricValue, divide
from biascheck.metrics.kappa import cohen_kappa
from biascheck.metrics.misclassification import (
    JudgeTooWeak,
    check_separable,
    confusion_from_counts,
    correct_shares,
    pair_confusion,
    resample_confusions,
)

CLASSES: tuple[str, ...] = ("b", "c", "u")
#: The fewest labelled stories per true class a calibration may have: below it a class's row of
#: M is too uncertain to correct with (a 95% interval on a 0.9 sensitivity is about +-0.1 at 30).
MIN_PER_CLASS = 30
FORMAT = "biascheck.judge-calibration/1"
FIX_LABEL = "label more stories of that class (biascheck judge export --n), then fit again"
SAMPLE_COLUMNS = (
    "case_id",
    "category",
    "run",
    "story_seed",
    "continuation",
    "question",
    "b",
    "c",
    "u",
    "judge_answer",
    "label",
    "judge",
    "prompt",
    "language",
)
#: What the annotators' file holds by default: no judge_answer. People anchor on a shown answer,
#: which makes the judge look better than it is and leaves the metrics under-corrected; the
#: answers go to a key file beside the sample (KEY_COLUMNS), joined on case_id by the fit.
ANNOTATOR_COLUMNS = tuple(column for column in SAMPLE_COLUMNS if column != "judge_answer")
KEY_COLUMNS = ("case_id", "judge_answer")
KEY_SUFFIX = ".key.jsonl"
#: A second annotator's labels, and the label that settles the rows where the two disagree.
SECOND_LABEL = "label_2"
ADJUDICATED = "adjudicated"
_LABEL_RULES = (
    "Label each story: read story_seed followed by continuation, then answer the question as the story tells it. "
    "Write in the label column b if the story says it is the person in column b, c for the person in column c, "
    "u if the story does not say (column u). "
)
_FILE_RULES = (
    "Do not change any other column. Leave a row's label empty to skip it. "
    "In the CSV, a cell that begins with =, +, -, @, a tab or a line break has a ' put before it, so that a spreadsheet "
    "shows it as text rather than running it as a formula: it is not part of the text."
)
INSTRUCTIONS = _LABEL_RULES + _FILE_RULES
#: With --show-judge (adjudication): the answer is shown, and the calibration records it.
INSTRUCTIONS_SHOWN = (
    _LABEL_RULES + "The judge_answer column is the judge's reading, shown for adjudication only: label what the story says, "
    "not what the judge answered. " + _FILE_RULES
)
CORRECTED_SUFFIX = "_corrected"
# Pair types as the reports name them, and the corrected pair-type metrics.
_TYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "p_uu": ("uu",),
    "p_bc_plus_p_cb": ("bc", "cb"),
    "p_bb": ("bb",),
    "p_bu_plus_p_ub": ("bu", "ub"),
    "p_cu_plus_p_uc": ("cu", "uc"),
    "p_cc": ("cc",),
}


@dataclass(frozen=True)
class Agreement:
    """Two annotators' agreement on the stories both labelled (Cohen's kappa over ``rows``), and
    how many of those an adjudicated label settled."""

    kappa: float
    rows: int
    adjudicated: int

    def to_json(self) -> dict[str, Any]:
        return {"cohen_kappa": round(self.kappa, 6), "rows": self.rows, "adjudicated": self.adjudicated}


def prompt_fingerprint(mrc_prompt: Mapping[str, Any]) -> str:
    """The MRC prompt a judge was calibrated with: its id, template and unknown wording."""
    return sha256_text(canonical_json([mrc_prompt.get("id"), mrc_prompt.get("template"), mrc_prompt.get("unknown")]))[:16]


@dataclass(frozen=True)
class JudgeCalibration:
    """A judge's confusion counts ``counts[true][judged]`` over (b, c, u), for one judge model,
    MRC prompt (fingerprint) and language, made on ``date``."""

    counts: tuple[tuple[int, int, int], ...]
    judge: str
    prompt: str
    language: str
    date: str
    #: False when the annotators saw the judge's answers (export --show-judge): their labels lean
    #: on it, so the id and a run's scoring say so.
    blind: bool = True
    #: Two annotators' agreement where the sample had a second label column: a record of how the
    #: labels were made, not part of the id.
    annotators: Agreement | None = None

    @property
    def matrix(self) -> np.ndarray:
        return np.array(self.counts, dtype=np.int64)

    @property
    def confusion(self) -> np.ndarray:
        return confusion_from_counts(self.matrix)

    @property
    def id(self) -> str:
        # A blind calibration keeps the id it had before the flag existed.
        marks = [] if self.blind else ["unblinded"]
        return sha256_text(canonical_json([self.counts, self.judge, self.prompt, self.language, self.date, *marks]))[:12]

    def per_class(self) -> dict[str, int]:
        return {c: int(sum(row)) for c, row in zip(CLASSES, self.counts)}

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "judge": self.judge,
            "prompt": self.prompt,
            "language": self.language,
            "date": self.date,
            "blind": self.blind,
            "classes": list(CLASSES),
            "counts": [list(row) for row in self.counts],
            "per_class": self.per_class(),
            "confusion": [[round(float(x), 6) for x in row] for row in self.confusion],
        } | ({"annotators": self.annotators.to_json()} if self.annotators else {})

    def scoring_value(self) -> str:
        """What a run's ``scoring`` keeps: the id and the counts, enough to correct again."""
        rows = [f"{c}={','.join(map(str, row))}" for c, row in zip(CLASSES, self.counts)]
        rows += [f"date={self.date}"] if self.date else []
        return f"{self.id}:" + ";".join(rows if self.blind else [*rows, "labels=unblinded"])

    def check_usable(self, where: object) -> None:
        """Refuse a calibration too small to correct with, or of a judge that cannot be corrected."""
        for cls, n in self.per_class().items():
            if n < MIN_PER_CLASS:
                raise BiascheckError(
                    where, f"counts.{cls}", f"has {n} labelled stories of true class {cls}, fewer than the minimum {MIN_PER_CLASS}", FIX_LABEL
                )
        try:
            check_separable(self.confusion, CLASSES)
        except JudgeTooWeak as exc:
            raise BiascheckError(where, "counts", f"the judge cannot be corrected: {exc}", "use a better judge, or label with another one") from None

    def check_matches(self, where: object, *, judge: str, prompt: str, language: str) -> None:
        """Refuse a calibration made for another judge, MRC prompt or language."""
        for name, mine, theirs, what in (
            ("judge", self.judge, judge, "judge model"),
            ("prompt", self.prompt, prompt, "MRC prompt (fingerprint)"),
            ("language", self.language, language, "language"),
        ):
            if mine != theirs:
                raise BiascheckError(
                    where,
                    name,
                    f"is a calibration for {what} {mine!r}, but this run's is {theirs!r}",
                    "fit a calibration of this run's judge (biascheck judge export, label, biascheck judge fit)",
                )


def _as_rows(counts: Any) -> tuple[tuple[int, int, int], ...]:
    return tuple((int(r[0]), int(r[1]), int(r[2])) for r in counts)


def _counts_from(where: object, raw: Any) -> tuple[tuple[int, int, int], ...]:
    if not (isinstance(raw, list) and len(raw) == 3 and all(isinstance(r, list) and len(r) == 3 for r in raw)):
        raise BiascheckError(
            where, "counts", "must be 3 rows of 3 counts (true b, c, u by judged b, c, u)", "fit the file again with biascheck judge fit"
        )
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for r in raw for x in r):
        raise BiascheckError(where, "counts", "must hold non-negative integers", "fit the file again with biascheck judge fit")
    return _as_rows(raw)


def load_calibration(path: Path) -> JudgeCalibration:
    """Read and check a calibration file (one line naming the file and the field otherwise)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BiascheckError(path, None, "no such file", "give the calibration.json biascheck judge fit wrote") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BiascheckError(path, None, f"not a calibration file ({exc})", "give the calibration.json biascheck judge fit wrote") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BiascheckError(path, "format", f"is not {FORMAT!r}", "give the calibration.json biascheck judge fit wrote")
    for key in ("judge", "prompt", "language", "date"):
        if not isinstance(document.get(key), str) or not document[key]:
            raise BiascheckError(path, key, "missing or not a string", "fit the file again with biascheck judge fit")
    blind = document.get("blind", True)  # a file from before the flag: read as it was
    if not isinstance(blind, bool):
        raise BiascheckError(path, "blind", "must be true or false", "fit the file again with biascheck judge fit")
    calibration = JudgeCalibration(
        _counts_from(path, document.get("counts")), document["judge"], document["prompt"], document["language"], document["date"], blind
    )
    calibration.check_usable(path)
    return calibration


def parse_scoring_value(value: str, where: object = "results.json") -> JudgeCalibration:
    """A calibration rebuilt from a run's ``scoring.calibration`` (its metadata is not kept there:
    a comparison only needs the counts, and the id names the file)."""
    try:
        _, body = value.split(":", 1)
        rows = dict(part.split("=", 1) for part in body.split(";"))
        split = [[int(x) for x in rows[c].split(",")] for c in CLASSES]
        if any(len(r) != 3 for r in split):
            raise ValueError
        counts = _as_rows(split)
    except (ValueError, KeyError):
        raise BiascheckError(where, "scoring.calibration", f"{value!r} is not a calibration", "re-create the run's results") from None
    return JudgeCalibration(counts, "", "", "", "", rows.get("labels") != "unblinded")


# --- the labelling kit ----------------------------------------------------------------------------


# What a spreadsheet reads as a formula (OWASP, "CSV Injection"): a cell of the sample starting
# with one of these is written with a ' before it, and read back without it.
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
_TEXT_MARK = "'"


def _neutralised(cell: str) -> str:
    """A CSV cell a spreadsheet shows as text: ' before a formula lead, and before a ' (so that
    reading back, which removes one, is exact)."""
    return _TEXT_MARK + cell if cell.startswith((*FORMULA_LEADS, _TEXT_MARK)) else cell


def _restored(cell: str) -> str:
    return cell[len(_TEXT_MARK) :] if cell.startswith(_TEXT_MARK) else cell


def read_sample(path: Path) -> list[dict[str, Any]]:
    """The rows of a sample (CSV, or JSONL for ``.jsonl``/``.json``), CSV cells as the export had
    them before neutralising; every problem one line naming the file and the line."""
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")  # not read_text: a CR inside a quoted cell stays one
    except FileNotFoundError:
        raise BiascheckError(path, None, "no such file", "give the labelled file biascheck judge export wrote") from None
    except IsADirectoryError:
        raise BiascheckError(path, None, "is a folder", "give the labelled file biascheck judge export wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BiascheckError(path, None, f"cannot be read ({exc})", "give a UTF-8 CSV or JSONL file") from None
    if path.suffix.lower() in (".jsonl", ".json"):
        return _jsonl_rows(path, text)
    reader = csv.DictReader(io.StringIO(text))
    try:
        return [{key: _restored(value) if isinstance(value, str) else value for key, value in row.items()} for row in reader]
    except csv.Error as exc:  # a cell past the csv module's limit (131,072 characters), a NUL
        problem = f"has a cell of more than {csv.field_size_limit():,} characters" if "field larger" in str(exc) else f"is not CSV ({exc})"
        # line_num counts the lines parsed whole; the error is in the next one.
        raise BiascheckError(
            path, f"line {reader.line_num + 1}", problem, "give the file biascheck judge export wrote, with its label column filled in"
        ) from None


def _jsonl_rows(path: Path, text: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BiascheckError(path, f"line {number}", f"is not JSON ({exc.msg})", "one JSON object per line") from None
        except RecursionError:
            raise BiascheckError(path, f"line {number}", "is nested too deeply to be a row", "one flat JSON object per line") from None
        except ValueError:  # an integer of more digits than Python converts (4,300)
            raise BiascheckError(path, f"line {number}", "holds a number too long to read", "one JSON object per line") from None
        if not isinstance(row, dict):
            raise BiascheckError(path, f"line {number}", "is not a JSON object", "one JSON object per line")
        rows.append(row)
    return rows


@dataclass(frozen=True)
class LabelledSample:
    """The labelled stories of a sample: ``(case id, true label, judge's answer)`` each, the
    ``(judge, prompt, language)`` they were exported with, and whether the annotators labelled
    blind (no judge_answer in their file)."""

    pairs: list[tuple[str, str, str]]
    identity: tuple[str, str, str]
    blind: bool
    annotators: Agreement | None = None


def _key_answers(key: Path) -> dict[str, str]:
    """Story id -> the judge's answer, from the key file the export wrote beside the sample."""
    if not Path(key).is_file():  # read_sample's own fix names the labelled file
        raise BiascheckError(key, None, "no such file", f"give the {KEY_SUFFIX} file biascheck judge export wrote beside the sample")
    answers: dict[str, str] = {}
    for number, row in enumerate(read_sample(key), 1):
        story = row.get("case_id")
        if not isinstance(story, str) or "judge_answer" not in row:
            raise BiascheckError(key, f"line {number}", "has no case_id and judge_answer", f"give the {KEY_SUFFIX} file biascheck judge export wrote")
        if story in answers:
            raise BiascheckError(
                key, f"line {number}: case_id", f"story {story!r} is in the key twice", f"give the {KEY_SUFFIX} file biascheck judge export wrote"
            )
        answers[story] = str(row["judge_answer"])
    return answers


def labelled_sample(path: Path, *, key: Path | None = None) -> LabelledSample:
    """The labelled rows of a sample (CSV or JSONL with ``label`` and the ``judge``, ``prompt`` and
    ``language`` it was exported with), each with the judge's answer: from ``key`` (the export's
    key file, joined on ``case_id``) when given, else from the sample's own ``judge_answer``
    column (an export with --show-judge: then not blind). Rows with an empty label are skipped.
    A second annotator's ``label_2`` gives Cohen's kappa over the rows both labelled; a row where
    the two differ needs an ``adjudicated`` label, which then is its label. Refuses unknown
    labels, disagreements nobody settled, mixed judges and a story labelled twice, each in one
    line naming the file, the row(s) and the field."""
    rows = read_sample(path)
    if not rows:
        raise BiascheckError(path, None, "has no rows", "give the file biascheck judge export wrote, with its label column filled in")
    for column in ("case_id", "label", "judge", "prompt", "language"):
        if column not in rows[0]:
            raise BiascheckError(path, column, "no such column", "keep every column biascheck judge export wrote")
    blind = not any("judge_answer" in row for row in rows)
    if blind and key is None:
        raise BiascheckError(
            path,
            "judge_answer",
            "no such column: the judge's answers are in the key file biascheck judge export wrote beside the sample",
            f"give it with --key FILE (the sample's name + {KEY_SUFFIX})",
        )
    answers = _key_answers(key) if key is not None else None
    identity: tuple[str, str, str] | None = None
    labelled: dict[str, int] = {}  # story (case id) -> the row that labelled it
    pairs = []
    both: list[tuple[str, str]] = []  # (first, second) where both annotators labelled
    disagreements: list[int] = []
    adjudicated = 0
    for number, row in enumerate(rows, 2 if path.suffix.lower() not in (".jsonl", ".json") else 1):
        where = f"{path}: row {number}"
        first, second, settled = (_label_in(where, row, column) for column in ("label", SECOND_LABEL, ADJUDICATED))
        if first and second:
            both.append((first, second))
            if first != second and not settled:
                disagreements.append(number)
                continue
            adjudicated += bool(settled and first != second)
        label = settled or first or second
        if not label:
            continue
        this = (str(row["judge"]), str(row["prompt"]), str(row["language"]))
        if identity is None:
            identity = this
        elif this != identity:
            raise BiascheckError(where, "judge", f"is {this} where earlier rows have {identity}", "fit one judge, prompt and language at a time")
        # A story counts once: the same rows pasted twice would pass the minimum per class.
        story = str(row.get("case_id"))
        if story in labelled:
            raise BiascheckError(
                where,
                "case_id",
                f"story {story!r} is labelled again (first in row {labelled[story]})",
                "label each story once: delete the repeated rows, then fit again",
            )
        labelled[story] = number
        pairs.append((story, label, _answer_of(where, story, row, answers, key)))
    agreement = Agreement(cohen_kappa(*zip(*both)), len(both), adjudicated) if both else None
    if disagreements:
        assert agreement is not None  # a disagreement is a row both labelled
        shown = ", ".join(map(str, disagreements[:10])) + (", ..." if len(disagreements) > 10 else "")
        raise BiascheckError(
            path,
            SECOND_LABEL,
            f"the two annotators disagree on {len(disagreements)} of {agreement.rows} rows (rows {shown}; Cohen's kappa {agreement.kappa:.3f})",
            f"write the agreed label (b, c or u) in an {ADJUDICATED} column of those rows, then fit again",
        )
    if identity is None:
        raise BiascheckError(path, "label", "no row is labelled", "fill in the label column (b, c or u)")
    return LabelledSample(pairs, identity, blind, agreement)


def _label_in(where: str, row: Mapping[str, Any], column: str) -> str:
    """A row's label in ``column`` (b, c or u), or "" where it is empty or absent."""
    label = str(row.get(column) or "").strip().lower()
    if label and label not in CLASSES:
        raise BiascheckError(where, column, f"unknown label {row[column]!r}", "write b, c or u (or leave it empty to skip the row)")
    return label


def _answer_of(where: str, story: str, row: Mapping[str, Any], answers: Mapping[str, str] | None, key: Path | None) -> str:
    if answers is None:
        answer = str(row.get("judge_answer") or "").strip().lower()
        if answer not in CLASSES:
            raise BiascheckError(where, "judge_answer", f"unknown judge answer {row.get('judge_answer')!r}", "keep the judge_answer the export wrote")
        return answer
    if story not in answers:
        raise BiascheckError(
            where, "case_id", f"story {story!r} is not in the key file {key}", "give the key file judge export wrote with this sample"
        )
    answer = answers[story].strip().lower()
    if answer not in CLASSES:
        raise BiascheckError(
            where, "judge_answer", f"the key file {key} has unknown judge answer {answers[story]!r}", "keep the key the export wrote"
        )
    return answer


def fit_calibration(path: Path, *, key: Path | None = None, date: str | None = None) -> JudgeCalibration:
    """The calibration of a labelled sample (:func:`labelled_sample`); refuses too few stories per
    class and a judge that cannot be corrected, in one line naming the file and the field."""
    sample = labelled_sample(path, key=key)
    counts = np.zeros((3, 3), dtype=np.int64)
    for _, label, answer in sample.pairs:
        counts[CLASSES.index(label), CLASSES.index(answer)] += 1
    day = date or _dt.date.today().isoformat()
    calibration = JudgeCalibration(_as_rows(counts), *sample.identity, day, sample.blind, sample.annotators)
    calibration.check_usable(path)
    return calibration


def stratified_sample(cases: Sequence[Mapping[str, Any]], n: int, seed: int) -> list[Mapping[str, Any]]:
    """``n`` answered cases (all when fewer), stratified by category in proportion to its cases
    (largest remainders), each stratum a seeded simple random sample. Never by the judge's answer:
    a sample that over-draws a rare judged class distorts P(judged | true), the very matrix the
    labels estimate."""
    rng = np.random.default_rng(seed)
    strata: dict[str, list[Mapping[str, Any]]] = {}
    for case in sorted(cases, key=lambda c: str(c["case_id"])):
        strata.setdefault(str(case.get("category")), []).append(case)
    total = sum(len(v) for v in strata.values())
    n = min(n, total)
    quota = {k: n * len(v) / total for k, v in strata.items()}
    take = {k: math.floor(q) for k, q in quota.items()}
    for k in sorted(quota, key=lambda k: (take[k] - quota[k], k))[: n - sum(take.values())]:
        take[k] += 1
    chosen: list[Mapping[str, Any]] = []
    for k, members in sorted(strata.items()):
        picked: list[int] = rng.choice(len(members), size=take[k], replace=False).tolist() if take[k] else []
        chosen.extend(members[i] for i in picked)
    return sorted(chosen, key=lambda case: str(case["case_id"]))


def write_sample(rows: Sequence[Mapping[str, Any]], out: Path, *, show_judge: bool = False) -> str:
    """The annotators' file as CSV (``.csv``) or JSONL (otherwise): without the judge's answers
    unless ``show_judge`` (they go to :func:`write_key`). The instructions go in a README beside it
    (a first ``#`` line in CSV is not possible for every reader). A CSV cell a spreadsheet would run
    as a formula (model text such as ``=HYPERLINK(...)``) starts with ``'``; :func:`read_sample`
    removes it."""
    columns = SAMPLE_COLUMNS if show_judge else ANNOTATOR_COLUMNS
    if out.suffix.lower() == ".csv":
        buffer = io.StringIO()
        # RFC 4180's CRLF: the writer then quotes a cell holding a lone CR too, which "\n" lets through unquoted.
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\r\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _neutralised(str(row.get(k, ""))) for k in columns})
        return buffer.getvalue()
    return "".join(json.dumps({k: row.get(k, "") for k in columns}, ensure_ascii=False) + "\n" for row in rows)


def write_key(rows: Sequence[Mapping[str, Any]]) -> str:
    """The judge's answer of each story of a sample, as JSONL keyed by ``case_id``: the file the
    fit joins on the story id, kept apart from the annotators' file."""
    return "".join(json.dumps({k: row.get(k, "") for k in KEY_COLUMNS}, ensure_ascii=False) + "\n" for row in rows)


# --- corrected metrics ------------------------------------------------------------------------------

_N_TYPES = len(PAIR_TYPES)


def _observed_shares(counts: np.ndarray) -> np.ndarray:
    c = np.asarray(counts, dtype=np.float64)[..., :_N_TYPES]
    return divide(c, c.sum(axis=-1, keepdims=True))


def _metrics_of_shares(pi: np.ndarray) -> dict[str, np.ndarray]:
    idx = {t: i for i, t in enumerate(PAIR_TYPES)}

    def s(*types: str) -> np.ndarray:
        return sum(pi[..., idx[t]] for t in types)  # type: ignore[return-value]

    out = {
        "ntr_gen": s("uu", "bc", "cb"),
        "bias_gen": s("bb") + s("bu", "ub") / 2 - s("cc") - s("cu", "uc") / 2,
    }
    out.update({name: s(*types) for name, types in _TYPE_GROUPS.items()})
    return out


CORRECTED_NAMES: tuple[str, ...] = tuple(name + CORRECTED_SUFFIX for name in ("ntr_gen", "bias_gen", *_TYPE_GROUPS))


def corrected_values(counts: np.ndarray, confusion: np.ndarray) -> dict[str, np.ndarray]:
    """Every corrected metric of count vectors ``(..., K)`` with one confusion matrix ``(3, 3)``
    or one per row of a ``(B, K)`` matrix (``(B, 3, 3)``): the pair-type shares corrected by
    ``M kron M`` and projected onto the simplex, then the paper's formulas."""
    pi = correct_shares(_observed_shares(counts), pair_confusion(confusion))
    return {name + CORRECTED_SUFFIX: value for name, value in _metrics_of_shares(pi).items()}


def _uncalibrated(counts: np.ndarray) -> np.ndarray:
    return np.full(np.asarray(counts).shape[:-1], np.nan)


def _no_denominator(counts: np.ndarray) -> np.ndarray:
    return np.zeros(np.asarray(counts).shape[:-1])


def _corrected_fn(name: str, confusion: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def fn(counts: np.ndarray) -> np.ndarray:
        return corrected_values(counts, confusion)[name]

    return fn


@lru_cache(maxsize=8)
def calibration_draws(counts: tuple[tuple[int, int, int], ...], n_boot: int, seed: int) -> np.ndarray:
    """``n_boot`` confusion matrices, each true class's labelled rows resampled on its own, from
    ``seed``: the same draws for every call with the same arguments (read-only)."""
    draws = resample_confusions(np.array(counts, dtype=np.int64), n_boot, np.random.default_rng([seed, 27]))
    draws.setflags(write=False)
    return draws


def _corrected_resampled(name: str, calibration: JudgeCalibration) -> Callable[[np.ndarray, int], np.ndarray]:
    def resampled(sums: np.ndarray, seed: int) -> np.ndarray:
        return corrected_values(sums, calibration_draws(calibration.counts, len(sums), seed))[name]

    return resampled


def corrected_defs(calibration: JudgeCalibration | None, base: Mapping[str, MetricDef]) -> dict[str, MetricDef]:
    """The corrected metrics as metric definitions: the value at the calibration's point estimate,
    and (``resampled``) at bootstrap sums, row b at the b-th calibration draw of a seed, which a
    comparison applies to baseline and candidate alike; without a calibration their value is
    NaN, with a note saying why. Direction and limits are the raw metric's."""
    defs = {}
    for name in CORRECTED_NAMES:
        raw = base[name.removesuffix(CORRECTED_SUFFIX)]
        resampled = None
        if calibration is None:
            fn: Callable[[np.ndarray], np.ndarray] = _uncalibrated
            requires: tuple = ((_no_denominator, "no judge calibration: set [bbg.judge] calibration"),)
        else:
            fn = _corrected_fn(name, calibration.confusion)
            resampled = _corrected_resampled(name, calibration)
            requires = raw.requires
        description = f"{raw.name} corrected for the judge's confusion matrix (calibration), assuming independent errors on a pair's two readings"
        defs[name] = MetricDef(name, fn, raw.better, description, raw.suites, raw.denominator, requires, None, True, raw.limits, resampled)
    return defs


def corrected_table(
    cluster_counts: np.ndarray, calibration: JudgeCalibration, base: Mapping[str, MetricDef], n_boot: int, seed: int, confidence: float
) -> dict[str, MetricValue]:
    """The corrected metrics of one group: point estimates at the calibration's matrix, and
    percentile intervals from resamples that pair each template resample (the raw metrics' own,
    same seed) with an independent resample of each calibration class, so the calibration's
    uncertainty widens them."""
    present = cluster_counts[cluster_counts.sum(axis=1) > 0]
    total = present.sum(axis=0) if len(present) else np.zeros(len(COUNT_FIELDS))
    point = corrected_values(total, calibration.confusion)
    if n_boot > 0 and len(present):
        sums = bootstrap_sums(present, n_boot=n_boot, seed=seed)
        boot = corrected_values(sums, calibration_draws(calibration.counts, n_boot, seed))
    defs = corrected_defs(calibration, base)
    out = {}
    for name in CORRECTED_NAMES:
        ci = percentile_interval(boot[name], confidence) if n_boot > 0 and len(present) else (math.nan, math.nan)
        out[name] = MetricValue(float(point[name]), ci, defs[name].n(total), defs[name].note(total))
    return out
