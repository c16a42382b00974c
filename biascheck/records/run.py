"""The record of one suite's run: what ``results.json`` holds (schema ``biascheck.results/1``,
biascheck/schemas/results.schema.json), typed and immutable. ``RunRecord.from_json(d).to_json()``
equals ``d``, keys in the same order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from biascheck.core.errors import BiascheckError
from biascheck.records._json import EMPTY, Fields, emit, frozen_or_none, json_interval, thaw

if TYPE_CHECKING:
    import pandas as pd

RESULTS_SCHEMA = "biascheck.results/1"
Interval = tuple[float | None, float | None]

# results.json's metric groups, and how a record names the scope of each.
GROUPS = {"overall": "overall", "by_category": "category", "by_label": "label", "by_prompt": "prompt"}


@dataclass(frozen=True, slots=True)
class MetricValue:
    """One metric of one scope: ``group`` "overall" (scope "overall"), "category", "label" or
    "prompt" (scope: the category, label or prompt id); ``value`` None where undefined (NaN)."""

    metric: str
    scope: str
    group: str
    value: float | None
    ci: Interval
    n: int
    note: str | None = None
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, f: Fields, metric: str, scope: str, group: str) -> MetricValue:
        return cls(
            metric,
            scope,
            group,
            f.req("value", "a number", nullable=True),
            f.interval("ci"),
            f.req("n", "an integer"),
            f.opt("note", "a string"),
            f.rest(("value", "ci", "n", "note")),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [("value", self.value), ("ci", json_interval(self.ci)), ("n", self.n)]
        return emit(required, [("note", self.note, False)], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class Metrics:
    """results.json's ``metrics``: every table's values, and what else the benchmark reports
    beside them (``rest``: bootstrap settings, counts, prompt spreads...)."""

    values: tuple[MetricValue, ...]
    # The tables the document has: results.json all of GROUPS, a baseline overall and by_category.
    groups: tuple[str, ...] = tuple(GROUPS)
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, f: Fields, groups: tuple[str, ...] = tuple(GROUPS)) -> Metrics:
        values: list[MetricValue] = []
        for key in groups:
            group = GROUPS[key]
            tables = f.obj(key)
            scoped = {"overall": tables.value} if key == "overall" else tables.value
            for scope, table in scoped.items():
                names = tables if key == "overall" else tables.child(scope, table)
                for metric, value in names.value.items():
                    values.append(MetricValue.from_json(names.child(metric, value), metric, scope, group))
        return cls(tuple(values), groups, f.rest(groups), f.order())

    def table(self, group: str, scope: str = "overall") -> dict[str, MetricValue]:
        """One scope's values by metric, e.g. ``table("category", "age")``."""
        return {v.metric: v for v in self.values if v.group == group and v.scope == scope}

    def scopes(self, group: str) -> tuple[str, ...]:
        """The scopes of a group ("category", "label", "prompt"), in the document's order."""
        return tuple(dict.fromkeys(v.scope for v in self.values if v.group == group))

    def to_json(self) -> dict[str, Any]:
        groups: dict[str, dict[str, Any]] = {key: {} for key in self.groups}
        for v in self.values:
            key = "by_" + v.group if v.group != "overall" else "overall"
            if key == "overall":
                groups[key][v.metric] = v.to_json()
            else:
                groups[key].setdefault(v.scope, {})[v.metric] = v.to_json()
        return emit(list(groups.items()), [], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class ThresholdVerdict:
    """A threshold check as the run reached it: ``passed`` (inconclusive ones pass), ``status``
    ("pass", "fail", "inconclusive"; absent in older files), and ``gated`` (False when -k or node
    ids deselected its metric item: then it does not fail the run)."""

    metric: str
    scope: str
    value: float | None
    ci: Interval
    n: int
    threshold: Mapping[str, Any]
    passed: bool
    note: str | None = None
    mode: str | None = None
    status: str | None = None
    gated: bool = True
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("metric", "scope", "value", "ci", "n", "threshold", "passed", "note", "mode", "status", "gated")

    @property
    def failed(self) -> bool:
        """Over its threshold and gating the run."""
        return not self.passed and self.gated

    @property
    def inconclusive(self) -> bool:
        return self.status == "inconclusive"

    @classmethod
    def from_json(cls, f: Fields) -> ThresholdVerdict:
        gated = f.opt("gated", "a boolean")
        return cls(
            f.req("metric", "a string"),
            f.req("scope", "a string"),
            f.req("value", "a number", nullable=True),
            f.interval("ci"),
            f.req("n", "an integer"),
            f.frozen("threshold"),
            f.req("passed", "a boolean"),
            f.opt("note", "a string", nullable=True),
            f.opt("mode", "a string"),
            f.opt("status", "a string"),
            gated is not False,
            f.rest(cls._KEYS),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [
            ("metric", self.metric),
            ("scope", self.scope),
            ("value", self.value),
            ("ci", json_interval(self.ci)),
            ("n", self.n),
            ("threshold", thaw(self.threshold)),
            ("passed", self.passed),
        ]
        optional: list[tuple[str, Any, bool]] = [("note", self.note, True), ("mode", self.mode, False), ("status", self.status, False)]
        optional.append(("gated", None if self.gated else False, False))
        return emit(required, optional, self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """One case as the run answered it: its identity and grouping (category, template ``cluster``,
    ``prompt_id``, choice ``order``), what was shown (``choices``), the ``raw`` reply, the chosen
    ``answer`` and its class or status (``outcome``: QA unknown / biased / counter, HBB answered,
    BBG b / c / u, or ooc, filtered, empty, error), and the benchmark's own fields (``fields``,
    read-only: e.g. QA's answer_index, HBB's p_a, BBG's generation)."""

    case_id: str
    sample_id: str
    category: str
    cluster: str
    prompt_id: str
    raw: str | None
    outcome: str
    error: str | None
    label: str | None = None
    order: int | None = None
    context_type: str | None = None
    choices: tuple[str, ...] | None = None
    answer: str | None = None
    truncated: bool = False
    fields: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "case_id", "sample_id", "category", "cluster", "prompt_id", "raw", "outcome", "error",
        "label", "order", "context_type", "choices", "answer", "truncated",
    )  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> CaseRecord:
        return cls(
            f.req("case_id", "a string"),
            f.req("sample_id", "a string"),
            f.req("category", "a string"),
            f.req("cluster", "a string"),
            f.req("prompt_id", "a string"),
            f.req("raw", "a string", nullable=True),
            f.req("outcome", "a string"),
            f.req("error", "a string", nullable=True),
            f.opt("label", "a string"),
            f.opt("order", "an integer"),
            f.opt("context_type", "a string"),
            f.strings("choices") if "choices" in f.value else None,
            f.opt("answer", "a string", nullable=True),
            f.opt("truncated", "a boolean") is True,
            f.rest(cls._KEYS),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [
            ("case_id", self.case_id),
            ("sample_id", self.sample_id),
            ("category", self.category),
            ("cluster", self.cluster),
            ("prompt_id", self.prompt_id),
            ("raw", self.raw),
            ("outcome", self.outcome),
            ("error", self.error),
        ]
        optional = [
            ("label", self.label, False),
            ("order", self.order, False),
            ("context_type", self.context_type, False),
            ("choices", None if self.choices is None else list(self.choices), False),
            ("answer", self.answer, True),
            ("truncated", True if self.truncated else None, False),
        ]
        return emit(required, optional, self.fields, self.key_order)


@dataclass(frozen=True, slots=True)
class SuiteInfo:
    """results.json's ``suite``: which suite, and what makes two runs of it comparable."""

    name: str
    benchmark: str
    fingerprint: Mapping[str, Any]
    prompts: tuple[str, ...]
    skipped_categories: Mapping[str, str]
    cases_total: int
    thresholds: Mapping[str, Any]
    regression: Mapping[str, Any]
    description: str | None = None
    language: str | None = None
    common_categories: Mapping[str, str] | None = None
    manifest: str | None = None
    missing_data_allowed: bool | None = None
    categories_total: int | None = None
    data_quality: Mapping[str, Mapping[str, int]] | None = None
    # Data files read without a checksum (--biascheck-allow-unpinned-data): data key -> sha256 read.
    unpinned_data: Mapping[str, str] | None = None
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "name", "benchmark", "fingerprint", "prompts", "skipped_categories", "cases_total", "thresholds", "regression",
        "description", "language", "common_categories", "manifest", "missing_data_allowed", "categories_total", "data_quality",
        "unpinned_data",
    )  # fmt: skip

    @classmethod
    def from_json(cls, f: Fields) -> SuiteInfo:
        return cls(
            f.req("name", "a string"),
            f.req("benchmark", "a string"),
            f.frozen("fingerprint"),
            f.strings("prompts"),
            f.frozen("skipped_categories"),
            f.req("cases_total", "an integer"),
            f.frozen("thresholds"),
            f.frozen("regression"),
            f.opt("description", "a string", nullable=True),
            f.opt("language", "a string"),
            f.frozen("common_categories", optional=True),
            f.opt("manifest", "a string"),
            f.opt("missing_data_allowed", "a boolean"),
            f.opt("categories_total", "an integer"),
            f.frozen("data_quality", optional=True),
            f.frozen("unpinned_data", optional=True),
            f.rest(cls._KEYS),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [
            ("name", self.name),
            ("benchmark", self.benchmark),
            ("fingerprint", thaw(self.fingerprint)),
            ("prompts", list(self.prompts)),
            ("skipped_categories", thaw(self.skipped_categories)),
            ("cases_total", self.cases_total),
            ("thresholds", thaw(self.thresholds)),
            ("regression", thaw(self.regression)),
        ]
        optional = [
            ("description", self.description, True),
            ("language", self.language, False),
            ("common_categories", frozen_or_none(self.common_categories), False),
            ("manifest", self.manifest, False),
            ("missing_data_allowed", self.missing_data_allowed, False),
            ("categories_total", self.categories_total, False),
            ("data_quality", frozen_or_none(self.data_quality), False),
            ("unpinned_data", frozen_or_none(self.unpinned_data), False),
        ]
        return emit(required, optional, self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """results.json's ``model``: the model under test as asked (string, parameters, revision), what
    the provider said answered (``served``), and the judge of a judged benchmark."""

    model: str
    params: Mapping[str, Any]
    revision: str | None = None
    api_base: str | None = None
    timeout: float | None = None
    params_dropped: Mapping[str, str] | None = None
    params_ignored: Mapping[str, str] | None = None
    served: Mapping[str, Mapping[str, int]] | None = None
    judge: Mapping[str, Any] | None = None  # the judge of a judged benchmark read by one
    judges: tuple[Mapping[str, Any], ...] | None = None  # read by several: each, in panel order
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("model", "params", "revision", "api_base", "timeout", "params_dropped", "params_ignored", "served", "judge", "judges")

    @classmethod
    def from_json(cls, f: Fields) -> ModelInfo:
        return cls(
            f.req("model", "a string"),
            f.frozen("params"),
            f.opt("revision", "a string", nullable=True),
            f.opt("api_base", "a string", nullable=True),
            f.opt("timeout", "a number", nullable=True),
            f.frozen("params_dropped", optional=True),
            f.frozen("params_ignored", optional=True),
            f.frozen("served", optional=True),
            f.frozen("judge", optional=True),
            f.frozen("judges", "an array", optional=True),
            f.rest(cls._KEYS),
            f.order(),
        )

    @property
    def judge_names(self) -> tuple[str, ...]:
        """The judges' model strings, in panel order (empty: no judge)."""
        if self.judges:
            return tuple(str(judge["model"]) for judge in self.judges)
        return (str(self.judge["model"]),) if self.judge else ()

    def to_json(self) -> dict[str, Any]:
        optional = [
            ("revision", self.revision, True),
            ("api_base", self.api_base, True),
            ("timeout", self.timeout, True),
            ("params_dropped", frozen_or_none(self.params_dropped), False),
            ("params_ignored", frozen_or_none(self.params_ignored), False),
            ("served", frozen_or_none(self.served), False),
            ("judge", frozen_or_none(self.judge), False),
            ("judges", frozen_or_none(self.judges), False),
        ]
        return emit([("model", self.model), ("params", thaw(self.params))], optional, self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class PanelJudge:
    """One judge of several, as results.json's ``judging.judges`` holds it: its calls, the cases it
    was asked about and read, its unreadable replies by status (``ooc``, ``filtered``, ``error``),
    its own headline ``metrics`` (group "judge", scope its model string), its calibration's id."""

    model: str
    calls: int
    cache_hits: int
    asked: int
    readings: int
    unscorable: Mapping[str, int]
    metrics: tuple[MetricValue, ...]
    calibration: str | None = None
    qualification: Mapping[str, Any] | None = None
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("model", "calls", "cache_hits", "asked", "readings", "unscorable", "metrics", "calibration", "qualification")

    @classmethod
    def from_json(cls, f: Fields) -> PanelJudge:
        model = f.req("model", "a string")
        metrics = f.obj("metrics")
        return cls(
            model,
            f.req("calls", "an integer"),
            f.req("cache_hits", "an integer"),
            f.req("asked", "an integer"),
            f.req("readings", "an integer"),
            f.frozen("unscorable"),
            tuple(MetricValue.from_json(metrics.child(name, value), name, model, "judge") for name, value in metrics.value.items()),
            f.opt("calibration", "a string", nullable=True),
            f.frozen("qualification", optional=True),
            f.rest(cls._KEYS),
            f.order(),
        )

    def metric(self, name: str) -> MetricValue | None:
        return next((value for value in self.metrics if value.metric == name), None)

    @property
    def unreadable(self) -> int:
        """Replies of this judge that read as nothing (never a reading)."""
        return sum(self.unscorable.values())

    def to_json(self) -> dict[str, Any]:
        required = [
            ("model", self.model),
            ("calls", self.calls),
            ("cache_hits", self.cache_hits),
            ("asked", self.asked),
            ("readings", self.readings),
            ("unscorable", thaw(self.unscorable)),
            ("metrics", {value.metric: value.to_json() for value in self.metrics}),
            ("calibration", self.calibration),
        ]
        return emit(required, [("qualification", frozen_or_none(self.qualification), False)], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class JudgePair:
    """Two judges' readings of the cases both were asked about: ``table[a][b]`` cases the first
    read as a and the second as b (classes and "unscorable"); ``agreed`` of ``compared`` (both read)."""

    judges: tuple[str, str]
    agreed: int
    compared: int
    table: Mapping[str, Mapping[str, int]]
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, f: Fields) -> JudgePair:
        names = f.strings("judges")
        if len(names) != 2:
            raise BiascheckError(f.where, f"{f.path}.judges", f"names {len(names)} judges, not 2", "regenerate the file with biascheck")
        return cls(
            (names[0], names[1]),
            f.req("agreed", "an integer"),
            f.req("compared", "an integer"),
            f.frozen("table"),
            f.rest(("judges", "agreed", "compared", "table")),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [("judges", list(self.judges)), ("agreed", self.agreed), ("compared", self.compared), ("table", thaw(self.table))]
        return emit(required, [], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class Agreement:
    """Krippendorff's alpha (nominal) over several judges' readings, its bootstrap interval over
    stories (``confidence``), the pairable ``units`` (cases two or more judges read) and the
    ``stories`` they come from, the reading ``classes``, and each pair of judges' table."""

    alpha: float | None
    ci: Interval
    confidence: float
    units: int
    stories: int
    classes: tuple[str, ...]
    pairs: tuple[JudgePair, ...]
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("alpha", "ci", "confidence", "units", "stories", "classes", "pairs")

    @classmethod
    def from_json(cls, f: Fields) -> Agreement:
        return cls(
            f.req("alpha", "a number", nullable=True),
            f.interval("ci"),
            f.req("confidence", "a number"),
            f.req("units", "an integer"),
            f.req("stories", "an integer"),
            f.strings("classes"),
            tuple(JudgePair.from_json(f.child(f"pairs.{i}", p)) for i, p in enumerate(f.items("pairs"))),
            f.rest(cls._KEYS),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [
            ("alpha", self.alpha),
            ("ci", json_interval(self.ci)),
            ("confidence", self.confidence),
            ("units", self.units),
            ("stories", self.stories),
            ("classes", list(self.classes)),
            ("pairs", [pair.to_json() for pair in self.pairs]),
        ]
        return emit(required, [], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class Judging:
    """results.json's ``judging``, present when several judges read the suite: how their readings
    were combined (``aggregation``, ``primary``), each judge (:class:`PanelJudge`), their
    :class:`Agreement`, the cases the aggregation could not settle (``disagreed``), and the suite's
    floor on alpha (``min_alpha``) with whether the run met it (``agreement_passed``: None when
    there is no floor or the run gates nothing)."""

    aggregation: str
    min_alpha: float | None
    agreement_passed: bool | None
    judges: tuple[PanelJudge, ...]
    agreement: Agreement
    disagreed: int
    primary: str | None = None
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("aggregation", "primary", "min_alpha", "agreement_passed", "judges", "agreement", "disagreed")

    @property
    def agreement_failed(self) -> bool:
        """The judges agreed below the suite's floor: the run does not gate on their readings."""
        return self.agreement_passed is False

    @classmethod
    def from_json(cls, f: Fields) -> Judging:
        return cls(
            f.req("aggregation", "a string"),
            f.req("min_alpha", "a number", nullable=True),
            f.req("agreement_passed", "a boolean", nullable=True),
            tuple(PanelJudge.from_json(f.child(f"judges.{i}", j)) for i, j in enumerate(f.items("judges"))),
            Agreement.from_json(f.obj("agreement")),
            f.req("disagreed", "an integer"),
            f.opt("primary", "a string"),
            f.rest(cls._KEYS),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [
            ("aggregation", self.aggregation),
            ("min_alpha", self.min_alpha),
            ("agreement_passed", self.agreement_passed),
            ("judges", [judge.to_json() for judge in self.judges]),
            ("agreement", self.agreement.to_json()),
            ("disagreed", self.disagreed),
        ]
        return emit(required, [("primary", self.primary, False)], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """results.json's ``run``: how the suite was answered. The counters are this suite's own;
    ``complete``, ``incomplete_reason`` and ``batches`` are the whole run's."""

    cases: int
    calls: int
    cache_hits: int
    retries: int
    errors: int
    cost_usd: float
    complete: bool
    case_errors: int | None = None
    incomplete_reason: str | None = None
    filtered: int | None = None
    truncated: int | None = None
    not_run: int | None = None
    unpriced_calls: int | None = None
    requests: int | None = None
    shard: str | None = None
    batches: Mapping[str, int] | None = None
    estimator: str | None = None
    estimator_note: str | None = None
    judge_calls: int | None = None
    judge_cache_hits: int | None = None
    rejudge: bool | None = None
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _REQUIRED = ("cases", "calls", "cache_hits", "retries", "errors", "cost_usd", "complete")
    # (key, kind, nullable) of the optional ones, in results.json's order.
    _OPTIONAL = (
        ("case_errors", "an integer", False),
        ("incomplete_reason", "a string", True),
        ("filtered", "an integer", False),
        ("truncated", "an integer", False),
        ("not_run", "an integer", False),
        ("unpriced_calls", "an integer", False),
        ("requests", "an integer", False),
        ("shard", "a string", False),
        ("batches", "an object", False),
        ("estimator", "a string", True),
        ("estimator_note", "a string", True),
        ("judge_calls", "an integer", False),
        ("judge_cache_hits", "an integer", False),
        ("rejudge", "a boolean", False),
    )

    @classmethod
    def from_json(cls, f: Fields) -> RunInfo:
        kinds = {"cost_usd": "a number", "complete": "a boolean"}
        values: dict[str, Any] = {key: f.req(key, kinds.get(key, "an integer")) for key in cls._REQUIRED}
        values.update((key, f.frozen(key, kind, optional=True, nullable=nullable)) for key, kind, nullable in cls._OPTIONAL)
        return cls(**values, rest=f.rest(values), key_order=f.order())

    def to_json(self) -> dict[str, Any]:
        required = [(key, getattr(self, key)) for key in self._REQUIRED]
        optional = [(key, frozen_or_none(getattr(self, key)), nullable) for key, _, nullable in self._OPTIONAL]
        return emit(required, optional, self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One suite's run against one model: the suite, the model, how it was answered (``run``),
    its ``cases``, ``metrics`` and threshold ``verdicts``, and the decision (``passed``: thresholds
    met, every case answered, the run complete and its data whole or the gap accepted)."""

    tool: Mapping[str, Any]
    created_at: str
    suite: SuiteInfo
    model: ModelInfo
    run: RunInfo
    metrics: Metrics
    verdicts: tuple[ThresholdVerdict, ...]
    passed: bool
    cases: tuple[CaseRecord, ...]
    judge_qualification: Mapping[str, Any] | None = None
    scoring: Mapping[str, str] | None = None
    judging: Judging | None = None  # several judges: their agreement and each one's findings
    schema: str = RESULTS_SCHEMA
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "schema", "tool", "created_at", "suite", "model", "run", "judge_qualification", "scoring", "judging",
        "metrics", "verdicts", "passed", "cases",
    )  # fmt: skip

    @classmethod
    def from_json(cls, document: Any, where: str = "results.json") -> RunRecord:
        """The record of a ``results.json`` document (a checked one: see ``biascheck.load_run``,
        which validates it against the schema first). Raises :class:`BiascheckError` naming the
        field when a field a record needs is missing or of another type."""
        f = Fields(document, where)
        schema = f.req("schema", "a string")
        if schema != RESULTS_SCHEMA:
            raise BiascheckError(where, "schema", f"{schema!r} is not a run's results (expected {RESULTS_SCHEMA!r})", "give a results.json")
        sections = {key: f.obj(key) for key in ("suite", "model", "run", "metrics")}
        return cls(
            tool=f.frozen("tool"),
            created_at=f.req("created_at", "a string"),
            suite=SuiteInfo.from_json(sections["suite"]),
            model=ModelInfo.from_json(sections["model"]),
            run=RunInfo.from_json(sections["run"]),
            metrics=Metrics.from_json(sections["metrics"]),
            verdicts=tuple(ThresholdVerdict.from_json(f.child(f"verdicts.{i}", v)) for i, v in enumerate(f.items("verdicts"))),
            passed=f.req("passed", "a boolean"),
            cases=tuple(CaseRecord.from_json(f.child(f"cases.{i}", c)) for i, c in enumerate(f.items("cases"))),
            judge_qualification=f.frozen("judge_qualification", optional=True),
            scoring=f.frozen("scoring", optional=True),
            judging=Judging.from_json(f.obj("judging")) if "judging" in f.value else None,
            schema=schema,
            rest=f.rest(cls._KEYS),
            key_order=f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``results.json`` document: equal to the one read, keys in its order."""
        required = [
            ("schema", self.schema),
            ("tool", thaw(self.tool)),
            ("created_at", self.created_at),
            ("suite", self.suite.to_json()),
            ("model", self.model.to_json()),
            ("run", self.run.to_json()),
            ("metrics", self.metrics.to_json()),
            ("verdicts", [v.to_json() for v in self.verdicts]),
            ("passed", self.passed),
            ("cases", [c.to_json() for c in self.cases]),
        ]
        optional = [
            ("judge_qualification", frozen_or_none(self.judge_qualification), False),
            ("scoring", frozen_or_none(self.scoring), False),
            ("judging", self.judging.to_json() if self.judging is not None else None, False),
        ]
        return emit(required, optional, self.rest, self.key_order)

    # --- decisions, as the run reached them ------------------------------------------------------

    @property
    def failed_checks(self) -> tuple[ThresholdVerdict, ...]:
        """The threshold checks that failed the run (over their threshold, and gated)."""
        return tuple(v for v in self.verdicts if v.failed)

    @property
    def inconclusive_checks(self) -> tuple[ThresholdVerdict, ...]:
        return tuple(v for v in self.verdicts if v.inconclusive)

    @property
    def missing_data_failed(self) -> bool:
        """Categories had no data and the run did not accept it (an older file without
        ``missing_data_allowed`` accepted the gap silently)."""
        return bool(self.suite.skipped_categories) and self.suite.missing_data_allowed is False

    # --- DataFrames ------------------------------------------------------------------------------

    def cases_df(self) -> pd.DataFrame:
        """One row per case: suite, model, case_id, category, prompt_id, order, context_type,
        answer, outcome, raw, error, and the benchmark's own fields."""
        from biascheck.records.frames import cases_frame

        return cases_frame(self)

    def judges_df(self) -> pd.DataFrame:
        """Read by several judges: one row per judge and metric (its own ntr_gen, bias_gen, ...):
        judge, calls, cache_hits, asked, readings, unreadable, calibration, metric, value, ci_low,
        ci_high, n, and the panel's alpha with its interval and aggregation. Empty for one judge."""
        from biascheck.records.frames import judges_frame

        return judges_frame(self)

    def metrics_df(self) -> pd.DataFrame:
        """One row per metric and scope: metric, group, scope, value, ci_low, ci_high, n, and the
        threshold check of that metric and scope (threshold, passed, status, gated) where there is one."""
        from biascheck.records.frames import metrics_frame

        return metrics_frame(self)
