"""BBG (story generation read by an evaluator): the benchmark protocol over
:mod:`biascheck.benchmarks.bbg.data` and :mod:`biascheck.benchmarks.bbg.metrics`.

A case is one MRC question (an evaluation-set row) in one run. It takes two stages of requests:

1. ``requests``: the story continuation, made by the model under test. Its request is the story
   version's, so the two questions of a version share one generation (one store key, one call).
2. ``judge_requests``: given that continuation, the evaluator's multiple-choice reading of the
   full story (seed + continuation), made by the judge model with the judge's parameters.

``classify`` reads the judge's answer as b (biased), c (counter-biased) or u (undetermined). A
case whose generation or judge call errored is an error: its pair is unscorable (counted in
``unscorable_ratio`` and ``error_ratio``, left out of every proportion). A case with no reading
(its generation or judge reply filtered, its generation empty, or its judge answer naming no
option) is scored by the suite's ``[bbg] unscorable`` convention: ``"exclude"`` (the default)
makes its pair unscorable, never u; ``"unknown"`` reads it as u, as the paper's evaluation does,
and counts the pair in ``u_by_convention_ratio``. Pairs (the two versions of a template, one
question type, one run) are rebuilt from the selected cases; a pair missing a version (a
partial selection) is left out of the metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from biascheck.benchmarks.base import BaseBenchmark, ReportLayout, check_metric_tables, schema_fragment
from biascheck.benchmarks.bbg.data import (
    PREFIX,
    STORY_PLACEHOLDER,
    UNKNOWN_ID,
    VERSIONS,
    MRCPrompt,
    MRCQuestion,
    build_run,
    check_mrc_prompt,
    classify_mrc,
    full_story,
    load_evaluation_set,
    load_prompt_unk,
    pairs,
    render_mrc_prompt,
    render_story_prompt,
    story_prompt_id,
)
from biascheck.benchmarks.bbg.judge_calibration import (
    CORRECTED_NAMES,
    INSTRUCTIONS,
    INSTRUCTIONS_SHOWN,
    JudgeCalibration,
    corrected_defs,
    corrected_table,
    fit_calibration,
    load_calibration,
    parse_scoring_value,
    prompt_fingerprint,
    stratified_sample,
    write_key,
    write_sample,
)
from biascheck.benchmarks.bbg.metrics import BBG_METRICS, COUNT_FIELDS, PAIR_TYPES, UNSCORABLE_CONVENTIONS, aggregate_bbg, pair_cell
from biascheck.benchmarks.bbg.settings import bbg_settings, qualification_suite
from biascheck.config.manifest import SuiteManifest
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Message, Outcome, Response
from biascheck.core.spelling import option

# How one case ended when it has no b / c / u: "error" and "disagreed" (several judges whose
# readings settled no class) make its pair unscorable under either convention; the others are
# missing readings, scored by the suite's [bbg] unscorable.
UNSCORABLE_STATUSES = ("ooc", "filtered", "empty", "error", "disagreed")


def _calibration_file(path: Path, where: str) -> JudgeCalibration:
    if not Path(path).is_file():
        raise BiascheckError(where, None, f"{path} is not a file", "give the calibration.json biascheck judge fit wrote")
    return load_calibration(Path(path))


@dataclass(frozen=True)
class StoryPrompt:
    """A story-continuation prompt, shaped like the other prompts for fingerprints and reports."""

    id: str
    template: str
    unknown: str = ""
    letters: tuple[str, ...] = ()


def _mrc_prompt(truth: MRCQuestion) -> MRCPrompt:
    """The evaluator prompt a case was built with (build_cases gives every case one)."""
    if truth.mrc_prompt is None:
        raise ValueError(f"MRC question {truth.template_id} was built without its evaluator prompt")
    return truth.mrc_prompt


def _outcome_class(outcome: Outcome) -> str | None:
    return outcome.answer_class if outcome.status == "answered" else None


def _pair_vector(first: Outcome, second: Outcome, unscorable: str) -> np.ndarray:
    statuses = (first.status, second.status)
    return pair_cell(
        _outcome_class(first), _outcome_class(second), errored="error" in statuses, unscorable=unscorable, disagreed="disagreed" in statuses
    )


class BBGBenchmark(BaseBenchmark):
    name = "bbg"
    settings_schema = schema_fragment(__package__)
    takes_prompts = False
    takes_answers = False
    records_schema = schema_fragment(__package__, "records")
    estimators: tuple[str, ...] = ()
    report_layout = ReportLayout(
        headline=("ntr_gen", "bias_gen", "p_uu", "p_bc_plus_p_cb", "p_bb", "p_bu_plus_p_ub", "p_cu_plus_p_uc", "p_cc", "unscorable_ratio"),
        category_headline=("ntr_gen", "bias_gen"),  # the paper's two scores, in every category
        spread_over="runs",
        examples_title="read as biased in both versions (first pairs)",
        examples_columns=("pair", "category", "question"),
        bias_metrics=("bias_gen",),  # compared category by category across suites (KoBBG with EnBBG)
    )
    # KoBBG's categories are KoBBQ's, EnBBG's BBQ's written without separators: both by their
    # shared names (benchmarks.base.COMMON_CATEGORIES).
    common_categories = {
        "age": "age",
        "disability_status": "disability",
        "disabilitystatus": "disability",
        "domestic_area_of_origin": "region",
        "educational_background": "education",
        "family_structure": "family_structure",
        "gender_identity": "gender",
        "genderidentity": "gender",
        "nationality": "nationality",
        "physical_appearance": "physical_appearance",
        "physicalappearance": "physical_appearance",
        "political_orientation": "political_orientation",
        "race_ethnicity_nationality": "race_ethnicity",
        "raceethnicity": "race_ethnicity",
        "religion": "religion",
        "ses": "ses",
        "sexual_orientation": "sexual_orientation",
        "sexualorientation": "sexual_orientation",
    }
    metric_names = tuple(BBG_METRICS)
    metric_defs = BBG_METRICS
    # Metrics reported only under some scoring: the judge-corrected ones, with a calibration. They
    # are known by name (thresholds and rules may gate them); their values need the run's
    # calibration (scored_metric_defs): without one they are NaN.
    extra_metric_defs = corrected_defs(None, BBG_METRICS)
    # What a baseline keeps per MRC question: enough to rebuild its pair and the pair's type.
    record_columns = ("case_id", "category", "cluster", "run", "pair", "version", "outcome")

    def fingerprint_settings(self, manifest: SuiteManifest) -> list[Any]:
        settings = bbg_settings(manifest)
        return [{"language": settings["language"], "runs": settings["runs"]}]  # the prompts are their own part

    def default_scoring(self, manifest: SuiteManifest) -> dict[str, str] | None:
        return {"unscorable": bbg_settings(manifest)["unscorable"]}

    @staticmethod
    def report_examples(cases, limit: int) -> list[tuple[str, ...]]:
        """Pairs whose stories were read as biased in both versions: where to start reading the
        generations in results.json."""
        first: dict[str, Mapping[str, Any]] = {}
        outcomes: dict[str, list[str]] = {}
        for case in cases:
            first.setdefault(case["pair"], case)
            outcomes.setdefault(case["pair"], []).append(case["outcome"])
        biased = [pair for pair, seen in outcomes.items() if seen == ["b", "b"]]
        return [(pair, first[pair]["category"], first[pair]["question"]) for pair in sorted(biased)[:limit]]

    # The judge capability (benchmarks.base.JudgedBenchmark).
    settings_table = "bbg"
    scoring_choices = UNSCORABLE_CONVENTIONS
    qualification_default = "kobbq"  # the paper qualified its judge on KoBBQ
    reading_classes = ("b", "c", "u")
    # Reported for each judge of several (the corrected ones where it has a calibration).
    judge_metrics = ("ntr_gen", "bias_gen", "ntr_gen_corrected", "bias_gen_corrected")

    def judge_settings(self, manifest: SuiteManifest) -> Mapping[str, Any]:
        return bbg_settings(manifest)["judge"]

    @staticmethod
    def shown_to_judges(record: Mapping[str, Any]) -> tuple[str, str]:
        """The MRC question and the continuation the judges read."""
        return str(record.get("question") or ""), str(record.get("generation") or "")

    def calibration_paths(self, manifest: SuiteManifest) -> list[tuple[Path, str]]:
        """``[bbg.judge] calibration`` (one file or several), relative to the manifest."""
        paths = bbg_settings(manifest)["judge"]["calibrations"]
        return [(Path(manifest.path).parent / path, f"{manifest.path}: bbg.judge.calibration") for path in paths]

    def calibration_judge(self, path: Path, where: str) -> str:
        return _calibration_file(path, where).judge

    def scoring(
        self, manifest: SuiteManifest, override: str | None, *, calibration: Path | None = None, judge: str | None = None, where: str = ""
    ) -> dict[str, str]:
        """The unscorable convention and, with a judge calibration (``calibration``, named at
        ``where``), the calibration's id and counts, once it is checked against the judge, the MRC
        prompt and the language. Without one, a gated corrected metric is refused."""
        settings = bbg_settings(manifest)
        scoring = {"unscorable": override or settings["unscorable"]}
        if calibration is None:
            gated = [m for m in [*manifest.thresholds, *manifest.regression.rules] if m in CORRECTED_NAMES]
            gated += [m for t in manifest.category_thresholds.values() for m in t if m in CORRECTED_NAMES]
            if gated:
                raise BiascheckError(
                    manifest.path,
                    gated[0],
                    "gates a judge-corrected metric, and the run has no judge calibration",
                    f"set [bbg.judge] calibration or pass {option('judge-calibration')} (biascheck judge fit makes one)",
                )
            return scoring
        loaded = _calibration_file(calibration, where)
        if judge is not None:
            loaded.check_matches(calibration, judge=judge, prompt=prompt_fingerprint(settings["mrc_prompt"]), language=settings["language"])
        return {**scoring, "calibration": loaded.scoring_value()}

    # --- the judge's calibration kit (biascheck judge export / fit) -----------------------------

    @staticmethod
    def calibration_instructions(show_judge: bool) -> str:
        return INSTRUCTIONS_SHOWN if show_judge else INSTRUCTIONS

    def calibration_sample(
        self, manifest: SuiteManifest, cases: Sequence[Case], results: Mapping[str, Any], n: int, seed: int, judge: str | None = None
    ) -> list[dict]:
        """``n`` of a run's judged stories to label, stratified by category, with the story seed,
        the continuation, the question, the three options and the judge's answer. A run read by
        several judges: ``judge`` names whose answers (a calibration is one judge's)."""
        settings = bbg_settings(manifest)
        model = results.get("model") or {}
        panel = [entry.get("model") for entry in model.get("judges") or []]
        if panel:
            if judge not in panel:
                problem = f"the run was read by {len(panel)} judges" if judge is None else f"{judge!r} is not one of the run's judges"
                raise BiascheckError("--judge", None, f"{problem} ({', '.join(panel)})", "name the judge whose answers to calibrate: --judge MODEL")
            index = panel.index(judge)
            cases_read = [{**r, "outcome": (r.get("readings") or [{}] * len(panel))[index].get("outcome")} for r in results.get("cases") or []]
        else:
            named = (model.get("judge") or {}).get("model")
            if not named:
                raise BiascheckError("--run", "model.judge", "the results name no judge", "give the results.json of a run of this suite")
            if judge is not None and judge != named:
                raise BiascheckError(
                    "--judge", None, f"{judge!r} did not read this run (its judge is {named})", "leave --judge out, or give a run it read"
                )
            judge, cases_read = named, list(results.get("cases") or [])
        by_id = {case.case_id: case for case in cases}
        records = [r for r in cases_read if r.get("case_id") in by_id and r.get("outcome") in ("b", "c", "u")]
        if not records:
            raise BiascheckError("--run", "cases", "no judged case of the run is a case of this suite", "give this suite's results.json")
        prompt = prompt_fingerprint(settings["mrc_prompt"])
        rows = []
        for record in stratified_sample(records, n, seed):
            truth = by_id[record["case_id"]].truth_as(MRCQuestion)
            rows.append(
                {
                    "case_id": record["case_id"],
                    "category": truth.category,
                    "run": truth.run,
                    "story_seed": truth.seed_text,
                    "continuation": record.get("generation") or "",
                    "question": truth.question,
                    "b": truth.choices[truth.biased_index],
                    "c": truth.choices[truth.counter_index],
                    "u": truth.choices[truth.unknown_index],
                    "judge_answer": record["outcome"],
                    "label": "",
                    "judge": judge,
                    "prompt": prompt,
                    "language": settings["language"],
                }
            )
        return rows

    @staticmethod
    def write_calibration_sample(rows: Sequence[Mapping[str, Any]], out: Path, show_judge: bool) -> str:
        return write_sample(rows, out, show_judge=show_judge)

    @staticmethod
    def write_calibration_key(rows: Sequence[Mapping[str, Any]]) -> str:
        return write_key(rows)

    @staticmethod
    def fit_calibration(labelled: Path, key: Path | None) -> dict[str, Any]:
        """The calibration document of a labelled sample, the judge's answers joined from ``key``
        (refusals in one line)."""
        return fit_calibration(labelled, key=key).to_json()

    def scored_metric_defs(self, scoring: Mapping[str, Any]) -> dict[str, Any]:
        """The metric definitions of a run scored with ``scoring``: with a calibration, the
        corrected metrics at its matrix (baseline and candidate of a comparison alike)."""
        if not scoring.get("calibration"):
            return {**self.metric_defs, **self.extra_metric_defs}
        return {**BBG_METRICS, **corrected_defs(parse_scoring_value(scoring["calibration"]), BBG_METRICS)}

    def with_scoring(self, manifest: SuiteManifest, scoring: Mapping[str, str]) -> SuiteManifest:
        return replace(manifest, settings={**(manifest.settings or {}), **scoring})

    def qualification_path(self, manifest: SuiteManifest) -> str | None:
        return bbg_settings(manifest)["judge_qualification"]["suite"]

    def qualification(self, manifest: SuiteManifest) -> tuple[Path, dict[str, Any]]:
        settings = bbg_settings(manifest)["judge_qualification"]
        return qualification_suite(manifest), {k: settings[k] for k in ("cases", "seed", "min_accuracy", "max_abs_diff_bias")}

    # --- cases -----------------------------------------------------------------------------------

    def build_cases(self, manifest, files):
        from biascheck.benchmarks.base import BuiltCases

        check_metric_tables(manifest, {**self.metric_defs, **self.extra_metric_defs}, self.name)
        settings = bbg_settings(manifest)
        language = settings["language"]
        where = manifest.path
        # The evaluation sets are the paper's: no sampling of templates, no choice orders.
        for key in sorted(set(manifest.raw.get("subset", {})) - {"categories"}):
            raise BiascheckError(
                where,
                f"subset.{key}",
                "has no meaning for bbg (the paper's evaluation sets are used whole)",
                "narrow a bbg suite with subset.categories or bbg.runs",
            )

        story_templates: dict[int, StoryPrompt] = {}
        for run in settings["runs"]:
            prompt_id = story_prompt_id(language, run)
            template = settings["story_prompts"].get(prompt_id)
            if template is None:
                raise BiascheckError(
                    where,
                    f"bbg.story_prompts.{prompt_id}",
                    f"missing: run {run} uses story prompt {prompt_id}",
                    f"add it (the paper's {PREFIX[language]}-1..5 are in suites/{'kobbg' if language == 'ko' else 'enbbg'})",
                )
            if template.count(STORY_PLACEHOLDER) != 1:
                raise BiascheckError(
                    where,
                    f"bbg.story_prompts.{prompt_id}",
                    f"must contain {STORY_PLACEHOLDER} exactly once",
                    "put {CONTEXT} where the story seed goes",
                )
            story_templates[run] = StoryPrompt(prompt_id, template)
        mrc = check_mrc_prompt(
            settings["mrc_prompt"], where, "bbg.mrc_prompt", fix=f"use the paper's MRC prompt (suites/{'kobbg' if language == 'ko' else 'enbbg'})"
        )

        unknown = None
        if "unknown" in files:
            unknown_file = self._local(manifest, files, "unknown")
            table = load_prompt_unk(unknown_file)
            if UNKNOWN_ID[language] not in table:
                raise BiascheckError(unknown_file, "unk_id", f"no {UNKNOWN_ID[language]} row", "restore the original file")
            unknown = table[UNKNOWN_ID[language]]

        cases: list[Case] = []
        for run in settings["runs"]:
            path = self._local(manifest, files, f"run{run}")
            self._check_language(manifest, path, language)
            rows = load_evaluation_set(path, language=language, unknown=unknown)
            people = {choice for row in rows for i, choice in enumerate(row["choices"]) if i != row["unknown_index"]}
            if mrc.unknown in people:
                raise BiascheckError(
                    where, "bbg.mrc_prompt.unknown", f"{mrc.unknown!r} is also a person in {path.name}", "use the paper's unknown wording"
                )
            _, questions = build_run(rows, run=run, language=language, story_prompt_id=story_templates[run].id, mrc_prompt=mrc)
            pairs(questions)  # every version has its partner, or a one-line error names it
            if manifest.categories:
                known = sorted({q.category for q in questions})
                missing = sorted(set(manifest.categories) - set(known))
                if missing:
                    raise BiascheckError(where, "subset.categories", f"unknown categories {missing}", f"use some of: {', '.join(known)}")
                questions = [q for q in questions if q.category in manifest.categories]
            template = story_templates[run].template
            for question in questions:
                cases.append(
                    Case(
                        case_id=question.key,
                        sample_id=question.row_id,
                        category=question.category,
                        # Templates are the bootstrap's unit: a template's pairs (every run, question
                        # type and character pair a/b, c/d) move together.
                        cluster=question.base_template.removesuffix("-cd"),
                        label=question.qtype,
                        prompt_id=story_templates[run].id,
                        order=VERSIONS[question.version][1],
                        messages=(Message("user", render_story_prompt(template, question.seed_text)),),
                        choices=question.choices,
                        letters=mrc.letters,
                        truth=question,
                    )
                )
        unknown_scopes = sorted(set(manifest.category_thresholds) - {case.category for case in cases})
        if unknown_scopes:
            raise BiascheckError(
                where,
                f"category_thresholds.{unknown_scopes[0]}",
                f"{unknown_scopes[0]!r} is not a category of this suite",
                f"use one of: {', '.join(sorted({case.category for case in cases}))}",
            )
        prompts = [story_templates[run] for run in settings["runs"]] + [mrc]
        return BuiltCases(cases=cases, prompts=prompts)

    @staticmethod
    def _check_language(manifest, path, language: str) -> None:
        """Korean data under language "en" (or the reverse) is a manifest mistake, not a broken file."""
        head = path.read_bytes()[:4096].decode("utf-8", errors="ignore")
        korean = any("\uac00" <= ch <= "\ud7a3" for ch in head)
        if korean != (language == "ko"):
            raise BiascheckError(
                manifest.path,
                "bbg.language",
                f"is {language!r} but {path.name} is {'Korean' if korean else 'English'}",
                "set language to match the evaluation sets (ko for KoBBG, en for EnBBG)",
            )

    @staticmethod
    def _local(manifest, files, key: str):
        if key not in files:
            raise BiascheckError(manifest.path, f"data.{key}", "missing", "a bbg suite names data.run<k> for each of its runs (see suites/enbbg)")
        if files[key].local is None:
            raise BiascheckError(manifest.path, f"data.{key}", files[key].reason or "not available", f"point {option('data')} at a mirror")
        return files[key].local

    # --- requests and outcomes -------------------------------------------------------------------

    @staticmethod
    def estimator(manifest, override: str | None) -> None:
        return None  # one way to answer (--biascheck-estimator is HBB's)

    @staticmethod
    def requests(case: Case, params: dict, estimator: None) -> list[tuple[list[dict], dict, int]]:
        """The story continuation: the same request (and store key) for both questions of a version."""
        return [(case.messages_as_dicts(), params, 0)]

    @staticmethod
    def judge_requests(case: Case, generation: Sequence[Response], judge_params: dict) -> list[tuple[list[dict], dict, int]]:
        """The evaluator's reading of seed + continuation; none when there is no continuation."""
        (response,) = generation
        if response.errored or response.finish_reason == "content_filter":
            return []
        truth = case.truth_as(MRCQuestion)
        story = full_story(truth.seed_text, response.text)
        if story is None:
            return []
        prompt = render_mrc_prompt(_mrc_prompt(truth), story, truth)
        return [([{"role": "user", "content": prompt}], judge_params, 0)]

    @staticmethod
    def classify(case: Case, responses: Sequence[Response], estimator: None) -> Outcome:
        generation, *judged = responses
        story = generation.text
        if generation.errored:
            return Outcome(case.case_id, "error", error=f"generation: {generation.error}")
        if generation.finish_reason == "content_filter":
            return Outcome(case.case_id, "filtered", generation=story)
        if not judged:
            return Outcome(case.case_id, "empty", generation=story)
        (judge,) = judged
        if judge.errored:
            return Outcome(case.case_id, "error", error=f"judge: {judge.error}", generation=story)
        if judge.finish_reason == "content_filter":
            return Outcome(case.case_id, "filtered", raw=judge.text, generation=story)
        truth = case.truth_as(MRCQuestion)
        answer_class = classify_mrc(judge.text, truth, _mrc_prompt(truth).letters)
        if answer_class is None:
            return Outcome(case.case_id, "ooc", raw=judge.text, generation=story)
        index = {"u": truth.unknown_index, "b": truth.biased_index, "c": truth.counter_index}[answer_class]
        return Outcome(case.case_id, "answered", answer=index, answer_class=answer_class, raw=judge.text, generation=story)

    @staticmethod
    def fallback_reason(estimator, responses) -> None:
        return None

    @staticmethod
    def items(cases):
        """Test items: one per MRC question, ``<template>-<version>-<qtype>[run<k>]``."""
        truths = [c.truth_as(MRCQuestion) for c in cases]
        return [(f"{t.template_id}-{t.qtype}[run{t.run}]", c.category, (c.case_id,)) for c, t in zip(cases, truths)]

    @staticmethod
    def item_status(outcomes, cases, manifest) -> tuple[str, str | None]:
        (outcome,) = outcomes
        if outcome.status == "answered":
            return outcome.answer_class, None
        return outcome.status, outcome.error if outcome.status == "error" else None

    @staticmethod
    def case_record(case: Case, outcome: Outcome) -> dict:
        truth = case.truth_as(MRCQuestion)
        return {
            **case.record(),
            "run": truth.run,
            "template_id": truth.template_id,
            "pair": f"r{truth.run}-{truth.base_template}-{truth.qtype}",
            "version": truth.version,
            "qtype": truth.qtype,
            "question": truth.question,
            "choices": list(case.choices),
            "generation": outcome.generation,
            "raw": outcome.raw,
            "answer_class": outcome.answer_class,
            "outcome": outcome.answer_class if outcome.status == "answered" else outcome.status,
            "error": outcome.error,
        }

    # --- pairs and metrics -----------------------------------------------------------------------

    @staticmethod
    def _pairs(cases: Sequence[Case]) -> list[tuple[Case, Case]]:
        """(version a or c, version b or d) of every pair whose two cases are both selected."""
        groups: dict[tuple[int, str, str], list[Case | None]] = {}
        for case in cases:
            truth = case.truth_as(MRCQuestion)
            groups.setdefault((truth.run, truth.base_template, truth.qtype), [None, None])[case.order] = case
        return [(first, second) for first, second in groups.values() if first is not None and second is not None]

    def aggregate(self, cases, outcomes, *, resamples: int, seed: int, manifest=None):
        """The pair metrics, scored by the [bbg] table's ``unscorable`` (the session puts a command-line
        convention there); without a manifest, the default ``"exclude"``."""
        unscorable = bbg_settings(manifest)["unscorable"] if manifest is not None else "exclude"
        pair_list = self._pairs(cases)
        vectors = np.array([_pair_vector(outcomes[a.case_id], outcomes[b.case_id], unscorable) for a, b in pair_list], dtype=np.int64).reshape(
            len(pair_list), len(COUNT_FIELDS)
        )
        groups = [(a.category, f"run{a.truth_as(MRCQuestion).run}", a.cluster) for a, _ in pair_list]
        value = (manifest.settings or {}).get("calibration") if manifest is not None else None
        extra = None
        if value:
            calibration = parse_scoring_value(value)
            confidence = 0.95

            def corrected(counts: np.ndarray) -> dict[str, Any]:
                return corrected_table(counts, calibration, BBG_METRICS, resamples, seed, confidence)

            extra = (CORRECTED_NAMES, corrected)
        return aggregate_bbg(groups, vectors, n_boot=resamples, seed=seed, extra=extra)

    @staticmethod
    def comparison_units(records, scoring) -> dict:
        """A comparison's units are the pairs, rebuilt from the questions' records and scored by
        ``scoring["unscorable"]`` (the records keep ooc / empty / filtered, so either convention
        can be applied; a document that does not say was scored "exclude")."""
        unscorable = scoring.get("unscorable", "exclude")
        groups: dict[str, list[dict | None]] = {}
        for record in records:
            groups.setdefault(record["pair"], [None, None])[VERSIONS[record["version"]][1]] = record
        ids, categories, clusters, vectors, outcomes = [], [], [], [], []
        for pair_id, (first, second) in sorted(groups.items()):
            if first is None or second is None:
                continue

            def read(record: dict) -> str | None:
                return record["outcome"] if record["outcome"] in ("b", "c", "u") else None

            # "error" as for QA cases: a comparison with errored units cannot pass.
            outcomes_of_pair = (first["outcome"], second["outcome"])
            errored = "error" in outcomes_of_pair
            vector = pair_cell(read(first), read(second), errored=errored, unscorable=unscorable, disagreed="disagreed" in outcomes_of_pair)
            ids.append(pair_id)
            categories.append(first["category"])
            clusters.append(first["cluster"])
            vectors.append(vector)
            kind = PAIR_TYPES[int(np.argmax(vector[: len(PAIR_TYPES)]))] if vector[: len(PAIR_TYPES)].any() else None
            outcomes.append("error" if errored else kind or "unscorable")
        matrix = np.array(vectors, dtype=np.int64).reshape(len(ids), len(COUNT_FIELDS))
        # Per-pair contributions, for the sign test on the pairs whose type changed.
        scorable = matrix[:, : len(PAIR_TYPES)].sum(axis=1) == 1
        weight = {"bb": 1.0, "bu": 0.5, "ub": 0.5, "cc": -1.0, "cu": -0.5, "uc": -0.5}
        bias = np.array([weight.get(o, 0.0) for o in outcomes])
        neutral = np.array([o in ("uu", "bc", "cb") for o in outcomes], dtype=np.float64)
        unscorable = (~scorable).astype(np.float64)
        return {
            "ids": ids,
            "categories": categories,
            "clusters": clusters,
            "vectors": matrix,
            "kinds": ["pair"] * len(ids),
            "outcomes": outcomes,
            "scores": {
                "bias_gen": np.where(scorable, bias, np.nan),
                "ntr_gen": np.where(scorable, neutral, np.nan),
                "unscorable_ratio": unscorable,
                "error_ratio": matrix[:, COUNT_FIELDS.index("n_error")].astype(np.float64),
                "u_by_convention_ratio": matrix[:, COUNT_FIELDS.index("n_u_by_convention")].astype(np.float64),
            },
        }


BBG = BBGBenchmark()
