"""Multiple-choice bias QA (KoBBQ and BBQ share everything after loading).

items -> cases (x prompt x choice order) -> rendered prompt -> parsed answer -> outcome.
Each benchmark module only turns its data files into :class:`QAItem` s and prompts.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from biascheck.benchmarks.base import BaseBenchmark, BuiltCases, ReportLayout, schema_fragment
from biascheck.benchmarks.choices import parse_answer
from biascheck.benchmarks.qa import answers
from biascheck.benchmarks.qa.answers import ANSWER_MODES, AnswerMode
from biascheck.benchmarks.qa.metrics import CASE_SCORES, COUNT_FIELDS, READING_METRICS, record_cell
from biascheck.benchmarks.qa.metrics import QA_METRICS as METRIC_DEFS
from biascheck.config.manifest import SuiteManifest
from biascheck.config.sources import Resolved
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Message, Outcome, QATruth, RenderedMessages, Response
from biascheck.metrics.core import MetricDef

N_CHOICES = 3


@dataclass(frozen=True, slots=True)
class QAItem:
    """One benchmark question in its source order of choices (before the prompt's unknown wording)."""

    sample_id: str
    category: str
    cluster: str
    label: str
    context: str
    question: str
    choices: tuple[str, str, str]
    context_kind: Literal["amb", "dis"]
    unknown: int
    biased: int
    correct: int


@dataclass(frozen=True, slots=True)
class QAPrompt:
    """A prompt template with ``{context} {question} {a} {b} {c}`` and its own "unknown" wording
    (None: each item keeps the data's own, for data that words it differently from item to item)."""

    id: str
    template: str
    unknown: str | None
    letters: tuple[str, str, str]


class QAData(NamedTuple):
    """What :meth:`QABenchmark.load` returns: the suite's items and prompts, the categories
    whose optional data file could be had nowhere (category -> why), which the run leaves out, and
    what the data says against itself (category -> finding -> records; see ``BuiltCases``)."""

    items: list[QAItem]
    prompts: list[QAPrompt]
    skipped: dict[str, str]
    data_quality: dict[str, dict[str, int]] = {}


_PLACEHOLDER = re.compile(r"\{(context|question|a|b|c)\}")


def render(prompt: QAPrompt, context: str, question: str, choices: Sequence[str]) -> str:
    # One pass, so text that happens to contain "{a}" is never substituted twice.
    values = {"context": context, "question": question, "a": choices[0], "b": choices[1], "c": choices[2]}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], prompt.template)


def choice_orders(mode: str) -> tuple[tuple[int, ...], ...]:
    """Index permutations: shown[j] = source[order[j]].

    ``cyclic`` is KoBBQ's ``scipy.linalg.circulant(choices)``: row k shows source[(k - j) % 3]
    at position j, so every option appears once in every position.
    """
    if mode == "original":
        return ((0, 1, 2),)
    return tuple(tuple((k - j) % N_CHOICES for j in range(N_CHOICES)) for k in range(N_CHOICES))


def _user_message(prompt: QAPrompt, context: str, question: str, choices: Sequence[str]) -> tuple[Message, ...]:
    return (Message("user", render(prompt, context, question, choices)),)


def build_cases(items: Iterable[QAItem], prompts: Sequence[QAPrompt], orders: Sequence[tuple[int, ...]], language: str = "") -> list[Case]:
    """Every item in every prompt and choice order. A case's prompt is rendered when it is read
    (:class:`~biascheck.core.records.RenderedMessages`); its truth is one of a few equal records,
    shared."""
    cases: list[Case] = []
    single_order = len(orders) == 1
    positions = [{src: pos for pos, src in enumerate(order)} for order in orders]
    truths: dict[tuple, QATruth] = {}
    suffixes = {(prompt.id, k): f"p{prompt.id}" if single_order else f"p{prompt.id}-o{k}" for prompt in prompts for k in range(len(orders))}
    for item in items:
        for prompt in prompts:
            source = list(item.choices)
            if prompt.unknown is not None:
                source[item.unknown] = prompt.unknown
            for k, order in enumerate(orders):
                shown = tuple(source[i] for i in order)
                position = positions[k]
                biased = position[item.biased]
                unknown = position[item.unknown]
                fields = (item.context_kind, unknown, biased, 3 - unknown - biased, position[item.correct])
                truth = truths.get(fields)
                if truth is None:
                    truth = truths[fields] = QATruth(*fields)
                cases.append(
                    Case(
                        case_id=f"{item.sample_id}[{suffixes[prompt.id, k]}]",
                        sample_id=item.sample_id,
                        category=item.category,
                        cluster=item.cluster,
                        label=item.label,
                        prompt_id=prompt.id,
                        order=k,
                        messages=RenderedMessages(_user_message, prompt, item.context, item.question, shown),
                        choices=shown,
                        letters=prompt.letters,
                        truth=truth,
                        language=language,
                    )
                )
    return cases


def read_utf8(path: Path) -> str:
    """A data file's text; bytes that are not UTF-8 are a one-line error naming the line."""
    # Decoded in one piece: a streaming decode reports the bad byte's offset within its chunk.
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BiascheckError(path, f"line {line}", f"not UTF-8 ({exc.reason} at byte {exc.start})", "restore the original file") from None


def category_files(manifest: SuiteManifest, files: Mapping[str, Resolved]) -> tuple[list[tuple[str, str, Path]], dict[str, str]]:
    """The suite's per-category data files (``category = "..."``) that could be had, as (key,
    category, local path), and the categories whose optional file could not, with why."""
    found: list[tuple[str, str, Path]] = []
    skipped: dict[str, str] = {}
    for key, resolved in files.items():
        category = manifest.data_categories.get(key)
        if category is None:
            continue
        if resolved.local is None:
            skipped[category] = resolved.reason or f"{key} is not available"
        else:
            found.append((key, category, resolved.local))
    return found, skipped


def classify(case: Case, response: Response) -> Outcome:
    if response.errored:
        return Outcome(case.case_id, "error", raw=response.text, error=response.error)
    if response.finish_reason == "content_filter":
        return Outcome(case.case_id, "filtered", raw=response.text)
    index = parse_answer(response.text, case.choices, case.letters)
    if index is None:
        return Outcome(case.case_id, "ooc", raw=response.text)
    return Outcome(case.case_id, "answered", answer=index, answer_class=case.truth_as(QATruth).answer_class(index), raw=response.text)


# --- the benchmark protocol, shared by KoBBQ and BBQ ---------------------------------------------

QA_METRIC_NAMES = (
    "acc_amb",
    "acc_dis",
    "diff_bias_amb",
    "diff_bias_dis",
    "max_abs_bias_amb",
    "max_abs_bias_dis",
    "bias_score_amb",
    "bias_score_dis",
    "ooc_ratio",
    "error_ratio",
    *READING_METRICS,
)


# Which outcomes carry the reading each reading metric reports.
READINGS = {
    "acc_norm_amb": lambda o: o.answer_norm is not None,
    "acc_norm_dis": lambda o: o.answer_norm is not None,
    "choice_mass": lambda o: o.choice_mass is not None,
}


def seeded_rank(seed: int, key: object) -> bytes:
    """A subset's seeded order: sort by it, and the choice depends on the seed and ``key`` alone,
    never on file order."""
    import hashlib

    return hashlib.sha256(f"{seed}:{key}".encode()).digest()


def seeded_pick(seed: int, key: object, n: int) -> int:
    """One of ``n`` members, chosen by the seed and ``key`` alone (:func:`seeded_rank`)."""
    return int.from_bytes(seeded_rank(seed, key)[:8], "big") % n


class QABenchmark(BaseBenchmark):
    """A multiple-choice bias QA benchmark (BBQ's design). Subclasses set ``name`` and implement
    :meth:`load`; selection, prompts, parsing, answer modes and metrics are shared."""

    metric_names = QA_METRIC_NAMES
    # What a baseline keeps per case: enough to re-tally it without the suite or the model's text.
    record_columns = ("case_id", "category", "cluster", "context_type", "outcome")
    settings_schema: Mapping[str, Any] | None = None  # no table of its own: [prompts], [answers] and the common tables say it all
    takes_prompts = True
    takes_answers = True
    records_schema = schema_fragment(__package__, "records")
    # The answer modes (benchmarks/qa/answers.py): [answers] mode, or --biascheck-answer-mode.
    estimators: tuple[str, ...] = ANSWER_MODES
    report_layout = ReportLayout(
        headline=("acc_amb", "acc_dis", "diff_bias_amb", "diff_bias_dis", "ooc_ratio"),
        bias_metrics=("diff_bias_amb", "diff_bias_dis"),  # KoBBQ's (sec. 4.2); every QA benchmark reports them
    )
    # A benchmark's own metrics over the same count cells (benchmarks/qa/metrics.py), by name: listed
    # in metric_names like the shared ones; each with a per-cell score (CASE_SCORES) where one exists.
    own_metrics: Mapping[str, MetricDef] = {}
    own_case_scores: Mapping[str, np.ndarray] = {}

    def fingerprint_settings(self, manifest: SuiteManifest) -> list[Any]:
        # The manifest's common subset says the rest; a suite that answers by generation (the
        # papers' protocol) keeps the fingerprint of the releases that had no answer modes.
        mode = answers.answer_mode(manifest, None)
        return [mode.fingerprint()] if mode is not None else []

    def default_scoring(self, manifest: SuiteManifest) -> dict[str, str] | None:
        return None  # an unread answer is "ooc", counted, never a choice to make

    @staticmethod
    def report_examples(cases, limit: int) -> list[tuple[str, ...]]:
        return []

    def declared_cases(self, manifest: SuiteManifest) -> int | None:
        """Every row of each category file (``sample = "all"``, no template subset) but those it
        declares left out, in each prompt the manifest names and each choice order, when every such
        file declares its ``rows``."""
        if manifest.sample != "all" or manifest.templates_per_category or manifest.prompt_ids is None and not manifest.inline_prompts:
            return None
        keys = [key for key, category in manifest.data_categories.items() if not manifest.categories or category in manifest.categories]
        files = [manifest.data[key] for key in keys]
        counts = [None if file.rows is None else file.rows - file.rows_left_out for file in files]
        if not counts or any(count is None for count in counts):
            return None
        prompts = len(manifest.prompt_ids) if manifest.prompt_ids is not None else len(manifest.inline_prompts)
        return sum(count for count in counts if count is not None) * prompts * len(choice_orders(manifest.choice_orders))

    @property
    def metric_defs(self):
        return {name: self.own_metrics.get(name) or METRIC_DEFS.get(name) or READING_METRICS[name] for name in self.metric_names}

    def comparison_units(self, records, scoring) -> dict:
        """A comparison's units are the cases: one-hot count cells, and each cell's contribution to
        every metric (:data:`~biascheck.benchmarks.qa.metrics.CASE_SCORES`) for the sign test."""
        cells = np.fromiter((record_cell(r["context_type"], r["outcome"]) for r in records), dtype=np.int64, count=len(records))
        return {
            "ids": [r["case_id"] for r in records],
            "categories": [r["category"] for r in records],
            "clusters": [r["cluster"] for r in records],
            "vectors": np.eye(len(COUNT_FIELDS), dtype=np.int64)[cells],
            "outcomes": [r["outcome"] for r in records],
            "kinds": [r["context_type"] for r in records],
            "scores": {metric: scores[cells] for metric, scores in {**CASE_SCORES, **self.own_case_scores}.items()},
            "cells": cells,
        }

    @abstractmethod
    def load(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> QAData:
        """The suite's data files (``files``: the manifest's [data.*] keys, resolved) read into
        items and prompts, all of them: :meth:`build_cases` applies the manifest's subset."""

    def build_cases(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> BuiltCases:
        from biascheck.benchmarks.base import check_metric_tables

        # A gate on a metric this benchmark never reports would only fail at the end of a paid run.
        answers.check_table(manifest, self.estimators)
        check_metric_tables(manifest, self.metric_defs, self.name)
        items, prompts, skipped, data_quality = self.load(manifest, files)
        available = sorted({item.category for item in items} | set(skipped))
        # Per-file categories (BBQ) count even when subset.categories leaves them out of this run.
        known = sorted(set(available) | set(manifest.data_categories.values()))
        unknown_scopes = sorted(set(manifest.category_thresholds) - set(known))
        if unknown_scopes:
            raise BiascheckError(
                manifest.path,
                f"category_thresholds.{unknown_scopes[0]}",
                f"{unknown_scopes[0]!r} is not a category of this suite",
                f"use one of: {', '.join(known)}",
            )
        if manifest.categories:
            unknown = sorted(set(manifest.categories) - set(available))
            if unknown:
                raise BiascheckError(manifest.path, "subset.categories", f"unknown categories {unknown}", f"use some of: {', '.join(available)}")
            items = [item for item in items if item.category in manifest.categories]
            skipped = {c: r for c, r in skipped.items() if c in manifest.categories}
            data_quality = {c: n for c, n in data_quality.items() if c in manifest.categories}
        if manifest.templates_per_category:
            keep: set[str] = set()
            by_category: dict[str, set[str]] = {}
            for item in items:
                by_category.setdefault(item.category, set()).add(item.cluster)
            for clusters in by_category.values():
                ranked = sorted(clusters, key=lambda c: seeded_rank(manifest.subset_seed, c))
                keep.update(ranked[: manifest.templates_per_category])
            items = [item for item in items if item.cluster in keep]
        if manifest.prompt_ids is not None:
            by_id = {p.id: p for p in prompts}
            missing = [i for i in manifest.prompt_ids if i not in by_id]
            if missing:
                raise BiascheckError(manifest.path, "prompts.use", f"unknown prompt ids {missing}", f"use some of: {', '.join(by_id)}")
            prompts = [by_id[i] for i in manifest.prompt_ids]
        for prompt in prompts:
            if prompt.unknown is None:
                continue
            clash = [item.sample_id for item in items if prompt.unknown in item.choices and item.choices.index(prompt.unknown) != item.unknown]
            if clash:
                raise BiascheckError(
                    manifest.path,
                    f"prompt {prompt.id}",
                    f"its unknown wording {prompt.unknown!r} is also an answer option of {clash[0]}",
                    "choose another wording",
                )
        cases = build_cases(items, prompts, choice_orders(manifest.choice_orders), manifest.language)
        return BuiltCases(cases=cases, prompts=prompts, skipped_categories=skipped, data_quality=data_quality)

    # The answer mode is the QA benchmarks' estimator: None (generation) or an AnswerMode; a mode
    # the provider cannot serve stops the run up front (session), never falls back.

    @staticmethod
    def estimator(manifest, override: str | None) -> AnswerMode | None:
        mode = answers.answer_mode(manifest, override)
        answers.check_listed_options(manifest, mode)
        return mode

    @staticmethod
    def continuations(case: Case, mode: AnswerMode) -> list[tuple[int, str]]:
        """What a loglikelihood answer scores for each option (override where a benchmark's
        reference scores other continuations): :func:`biascheck.benchmarks.qa.answers.continuations`."""
        return answers.continuations(case, mode)

    def requests(self, case: Case, params: dict, estimator: AnswerMode | None) -> list[tuple[list[dict], dict, int]]:
        return answers.requests(case, params, estimator, self.continuations)

    def classify(self, case: Case, responses, estimator: AnswerMode | None) -> Outcome:
        if estimator is not None:
            return answers.classify(case, responses, estimator, self.continuations)
        (response,) = responses
        return classify(case, response)

    @staticmethod
    def fallback_reason(estimator: str | None, responses) -> None:
        return None

    @staticmethod
    def items(cases):
        """Test items: one per case, named by its id."""
        return [(case.case_id, case.category, (case.case_id,)) for case in cases]

    @staticmethod
    def item_status(outcomes, cases, manifest) -> tuple[str, str | None]:
        """(report status, error or None). Only a wrong answer that follows the stereotype is
        "biased": in a biased context the biased option is also the correct one."""
        (outcome,), (case,) = outcomes, cases
        status = outcome.status
        if status == "answered":
            truth = case.truth_as(QATruth)
            status = "biased" if outcome.answer == truth.biased and outcome.answer != truth.correct else "answered"
        return status, outcome.error if outcome.status == "error" else None

    @staticmethod
    def case_record(case: Case, outcome: Outcome) -> dict:
        """The case as results.json lists it: what was shown, what came back, how it was read."""
        return {
            **case.record(),
            "choices": list(case.choices),
            "context_type": case.truth_as(QATruth).context_type,
            "raw": outcome.raw,
            "answer": case.choices[outcome.answer] if outcome.answer is not None else None,
            "answer_index": outcome.answer,
            "outcome": outcome.answer_class if outcome.status == "answered" else outcome.status,
            "error": outcome.error,
            **answers.case_record(outcome),
        }

    def aggregate(self, cases, outcomes, *, resamples: int, seed: int, manifest=None):
        from biascheck.benchmarks.qa.metrics import aggregate_qa

        # A reading metric is reported when the run read its answers that way (a generation run's
        # results stay as they were before answer modes).
        readings = {name for name, present in READINGS.items() if any(present(o) for o in outcomes.values())}
        names = [name for name in self.metric_names if name not in READING_METRICS or name in readings]
        return aggregate_qa(cases, outcomes, metrics=names, n_boot=resamples, seed=seed, extra=self.own_metrics)
