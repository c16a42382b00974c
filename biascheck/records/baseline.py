"""The record of a baseline file (schema ``biascheck.baseline/1``,
biascheck/schemas/baseline.schema.json): one suite's accepted run for one model, as a later run
is compared with it. ``BaselineRecord.from_json(d).to_json()`` equals ``d``, keys in order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from biascheck.core.errors import BiascheckError
from biascheck.records._json import EMPTY, FIX, Fields, emit, freeze, frozen_or_none, thaw
from biascheck.records.run import Metrics

BASELINE_SCHEMA = "biascheck.baseline/1"


@dataclass(frozen=True, slots=True)
class BaselineVerdict:
    """A threshold check as the recorded run reached it (a baseline keeps no value with it)."""

    metric: str
    scope: str
    threshold: Mapping[str, Any]
    passed: bool
    gated: bool = True
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def failed(self) -> bool:
        return not self.passed and self.gated

    @classmethod
    def from_json(cls, f: Fields) -> BaselineVerdict:
        keys = ("metric", "scope", "threshold", "passed", "gated")
        gated = f.opt("gated", "a boolean") is not False
        return cls(
            f.req("metric", "a string"),
            f.req("scope", "a string"),
            f.frozen("threshold"),
            f.req("passed", "a boolean"),
            gated,
            f.rest(keys),
            f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        required = [("metric", self.metric), ("scope", self.scope), ("threshold", thaw(self.threshold)), ("passed", self.passed)]
        return emit(required, [("gated", None if self.gated else False, False)], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class BaselineRecord:
    """A baseline: the ``suite`` and its fingerprint, the ``model``, the gated ``metrics`` (overall
    and by category), the run's threshold ``verdicts`` (None in a baseline of an older biascheck),
    the ``regression`` settings a comparison with it uses, and each unit's outcome (``rows``, one
    per case, in ``columns``: the benchmark's record columns)."""

    tool: Mapping[str, Any]
    created_at: str
    git_commit: str | None
    suite: Mapping[str, Any]
    model: Mapping[str, Any]
    bootstrap: Mapping[str, Any]
    metrics: Metrics
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    digest: str
    regression: Mapping[str, Any] | None = None
    scoring: Mapping[str, Any] | None = None
    verdicts: tuple[BaselineVerdict, ...] | None = None
    schema: str = BASELINE_SCHEMA
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    cases_order: tuple[str, ...] = field(default=(), repr=False, compare=False)  # of the keys of "cases"

    _KEYS = (
        "schema", "tool", "created_at", "git_commit", "suite", "model", "bootstrap", "regression", "scoring", "metrics",
        "verdicts", "cases", "digest",
    )  # fmt: skip

    @property
    def suite_name(self) -> str:
        return str(self.suite["name"])

    @property
    def benchmark(self) -> str:
        return str(self.suite["benchmark"])

    @property
    def model_name(self) -> str:
        return str(self.model["model"])

    @property
    def failed_checks(self) -> tuple[BaselineVerdict, ...]:
        """The threshold checks the recorded run failed (none known for an older baseline)."""
        return tuple(v for v in self.verdicts or () if v.failed)

    @property
    def passed(self) -> bool | None:
        """Whether the recorded run met its thresholds; None when the baseline does not say."""
        return None if self.verdicts is None else not self.failed_checks

    @classmethod
    def from_json(cls, document: Any, where: str = "baseline") -> BaselineRecord:
        f = Fields(document, where)
        schema = f.req("schema", "a string")
        if schema != BASELINE_SCHEMA:
            raise BiascheckError(where, "schema", f"{schema!r} is not a baseline (expected {BASELINE_SCHEMA!r})", "give a baseline file")
        suite, model, cases, metrics = f.obj("suite"), f.obj("model"), f.obj("cases"), f.obj("metrics")
        suite.req("name", "a string")
        suite.req("benchmark", "a string")
        model.req("model", "a string")
        verdicts = None
        if "verdicts" in document:
            verdicts = tuple(BaselineVerdict.from_json(f.child(f"verdicts.{i}", v)) for i, v in enumerate(f.items("verdicts")))
        rows = tuple(freeze(row) for row in _rows(cases))
        return cls(
            tool=f.frozen("tool"),
            created_at=f.req("created_at", "a string"),
            git_commit=f.req("git_commit", "a string", nullable=True),
            suite=f.frozen("suite"),
            model=f.frozen("model"),
            bootstrap=f.frozen("bootstrap"),
            metrics=Metrics.from_json(metrics, ("overall", "by_category")),
            columns=cases.strings("columns"),
            rows=rows,
            digest=f.req("digest", "a string"),
            regression=f.frozen("regression", optional=True),
            scoring=f.frozen("scoring", optional=True),
            verdicts=verdicts,
            schema=schema,
            rest=f.rest(cls._KEYS),
            key_order=f.order(),
            cases_order=cases.order(),
        )

    def to_json(self) -> dict[str, Any]:
        cases = emit([("columns", list(self.columns)), ("rows", [thaw(row) for row in self.rows])], [], EMPTY, self.cases_order)
        required = [
            ("schema", self.schema),
            ("tool", thaw(self.tool)),
            ("created_at", self.created_at),
            ("git_commit", self.git_commit),
            ("suite", thaw(self.suite)),
            ("model", thaw(self.model)),
            ("bootstrap", thaw(self.bootstrap)),
            ("metrics", self.metrics.to_json()),
            ("cases", cases),
            ("digest", self.digest),
        ]
        optional = [
            ("regression", frozen_or_none(self.regression), False),
            ("scoring", frozen_or_none(self.scoring), False),
            ("verdicts", None if self.verdicts is None else [v.to_json() for v in self.verdicts], False),
        ]
        return emit(required, optional, self.rest, self.key_order)


def _rows(cases: Fields) -> list[list[Any]]:
    rows = cases.items("rows")
    for index, row in enumerate(rows):
        if not isinstance(row, list | tuple):
            raise BiascheckError(cases.where, f"cases.rows.{index}", "is not an array (a unit's row)", FIX)
    return rows
