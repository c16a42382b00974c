"""The record of a comparison of a run with a baseline: what ``comparison.json`` holds, schema
``biascheck.comparison/2``. ``Comparison.from_json(d).to_json()`` equals ``d`` for a /2 document.

A /1 document (biascheck before /2) reads too: its verdict "unchanged" is "within margin", and its
flips listed by category become the examples, the counts by category taken from them; when it
showed fewer flips than changed, those counts are partial (``Flips.partial``) and the record
cannot be written as /2.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from biascheck.core.errors import BiascheckError
from biascheck.records._json import EMPTY, FIX, Fields, emit, freeze, frozen_or_none, json_interval, thaw

if TYPE_CHECKING:
    import pandas as pd

COMPARISON_SCHEMA = "biascheck.comparison/2"
COMPARISON_SCHEMA_1 = "biascheck.comparison/1"
VERDICTS = ("regressed", "improved", "within margin", "inconclusive", "not compared")
# /1's words for /2's verdicts.
_VERDICTS_1 = {"unchanged": "within margin"}
# How /1's explanation of such a check said it, and how /2 says it.
_EXPLAINED_1 = (" unchanged within the margin: ", " within margin: ")
FLIPS_FILE = "flips.jsonl"
# The verdicts an on_inconclusive = fail gate fails on.
UNRESOLVED = ("inconclusive", "not compared")
Interval = tuple[float | None, float | None]


def on_inconclusive(settings: Mapping[str, Any] | None) -> str:
    """What a comparison's inconclusive checks do to the gate, from its ``settings``; a file written
    before the setting existed has ``fail_inconclusive`` (true: fail) or nothing (they passed quietly)."""
    settings = settings or {}
    if "on_inconclusive" in settings:
        return str(settings["on_inconclusive"])
    return "fail" if settings.get("fail_inconclusive") else "pass"


@dataclass(frozen=True, slots=True)
class CheckSide:
    """One side of a check: the metric's value, its 95% interval and n."""

    value: float | None
    ci: Interval
    n: int
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, f: Fields) -> CheckSide:
        return cls(f.req("value", "a number", nullable=True), f.interval("ci"), f.req("n", "an integer"), f.rest(("value", "ci", "n")), f.order())

    def to_json(self) -> dict[str, Any]:
        return emit([("value", self.value), ("ci", json_interval(self.ci)), ("n", self.n)], [], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class Check:
    """One metric of one scope, baseline against candidate: the ``verdict`` (one of
    :data:`VERDICTS`), read off the ``worsening_ci`` (the deciding, simultaneous interval of how
    much worse the candidate is) and the ``margin`` the ``rule`` allows; ``units``: the cases
    (``cases``) and templates (``templates``) compared."""

    metric: str
    scope: str
    better: str
    rule: str
    rule_source: str
    margin: float | None
    baseline: CheckSide
    candidate: CheckSide
    difference: float | None
    difference_ci_unadjusted: Interval
    worsening: float | None
    worsening_ci: Interval
    worsening_ci_unadjusted: Interval
    interval: Mapping[str, Any] | None
    p_value: float | None
    p_adjusted: float | None
    mcnemar: Mapping[str, Any] | None
    mde: float | None
    cases_to_resolve: int | None
    verdict: str
    explanation: str
    templates: int | None = None
    cases: int | None = None
    gated: bool = True
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _NUMBERS = ("margin", "difference", "worsening", "p_value", "p_adjusted", "mde")
    _INTERVALS = ("difference_ci_unadjusted", "worsening_ci", "worsening_ci_unadjusted")
    _KEYS = (
        "metric", "scope", "better", "rule", "rule_source", "margin", "baseline", "candidate", "difference",
        "difference_ci_unadjusted", "worsening", "worsening_ci", "worsening_ci_unadjusted", "interval", "p_value",
        "p_adjusted", "mcnemar", "mde", "cases_to_resolve", "verdict", "explanation", "templates", "cases", "gated",
    )  # fmt: skip

    @property
    def regressed(self) -> bool:
        return self.verdict == "regressed"

    @property
    def inconclusive(self) -> bool:
        return self.verdict == "inconclusive"

    @classmethod
    def from_json(cls, f: Fields, verdicts: Mapping[str, str] = EMPTY) -> Check:
        written = f.req("verdict", "a string")
        verdict = verdicts.get(written, written)
        if verdict not in VERDICTS:
            raise BiascheckError(f.where, f.path + ".verdict", f"{verdict!r} is not a verdict ({', '.join(VERDICTS)})", FIX)
        sides = {key: CheckSide.from_json(f.obj(key)) for key in ("baseline", "candidate")}
        measured: dict[str, Any] = {key: f.req(key, "a number", nullable=True) for key in cls._NUMBERS}
        measured.update((key, f.interval(key)) for key in cls._INTERVALS)
        return cls(
            metric=f.req("metric", "a string"),
            scope=f.req("scope", "a string"),
            better=f.req("better", "a string"),
            rule=f.req("rule", "a string"),
            rule_source=f.req("rule_source", "a string"),
            baseline=sides["baseline"],
            candidate=sides["candidate"],
            interval=f.frozen("interval", nullable=True),
            mcnemar=f.frozen("mcnemar", nullable=True),
            cases_to_resolve=f.req("cases_to_resolve", "an integer", nullable=True),
            verdict=verdict,
            explanation=_explanation(f.req("explanation", "a string"), renamed=verdict != written),
            templates=f.opt("templates", "an integer"),
            cases=f.opt("cases", "an integer"),
            gated=f.opt("gated", "a boolean") is not False,
            rest=f.rest(cls._KEYS),
            key_order=f.order(),
            **measured,
        )

    def to_json(self) -> dict[str, Any]:
        required: list[tuple[str, Any]] = []
        for key in self._KEYS[:-3]:
            value = getattr(self, key)
            if key in ("baseline", "candidate"):
                value = value.to_json()
            elif key in self._INTERVALS:
                value = json_interval(value)
            elif key in ("interval", "mcnemar"):
                value = frozen_or_none(value)
            required.append((key, value))
        optional = [("templates", self.templates, False), ("cases", self.cases, False), ("gated", None if self.gated else False, False)]
        return emit(required, optional, self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class Flip:
    """A compared unit whose outcome changed: its ``baseline`` and ``candidate`` outcome, the
    prompt id (``prompt``), the candidate's raw reply (``answer``) and the baseline's
    (``baseline_answer``, when the baseline has it), and the option texts where known."""

    case_id: str
    category: str
    context_type: str | None
    baseline: str
    candidate: str
    prompt: str | None
    answer: str | None
    baseline_answer: str | None = None
    correct_option: str | None = None
    stereotyped_option: str | None = None
    baseline_option: str | None = None
    candidate_option: str | None = None
    context: str | None = None
    question: str | None = None
    options: tuple[str, ...] | None = None
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _REQUIRED = ("case_id", "category", "context_type", "baseline", "candidate", "prompt", "answer")
    _TEXTS = ("correct_option", "stereotyped_option", "baseline_option", "candidate_option", "context", "question")

    @property
    def transition(self) -> str:
        """``"<baseline> -> <candidate>"``, as ``by_transition`` counts it."""
        return f"{self.baseline} -> {self.candidate}"

    @classmethod
    def from_json(cls, f: Fields, category: str | None = None) -> Flip:
        """A flip object; ``category``: a /1 flip's, which the object does not repeat."""
        nullable = {"context_type", "prompt", "answer"}
        given = {"category": category} if category is not None else {}
        required = {key: f.req(key, "a string", nullable=key in nullable) for key in cls._REQUIRED if key not in given}
        return cls(
            **given,
            **required,
            baseline_answer=f.opt("baseline_answer", "a string", nullable=True),
            options=f.strings("options") if "options" in f.value else None,
            rest=f.rest((*cls._REQUIRED, "baseline_answer", *cls._TEXTS, "options")),
            key_order=f.order(),
            **{key: f.opt(key, "a string") for key in cls._TEXTS},
        )

    @classmethod
    def from_json_line(cls, value: Any, where: str = FLIPS_FILE, line: int = 1) -> Flip:
        """A flip of flips.jsonl (one JSON object a line; errors name the line)."""
        return cls.from_json(Fields(value, where, f"line {line}"))

    def to_json(self) -> dict[str, Any]:
        required = [(key, getattr(self, key)) for key in self._REQUIRED]
        optional: list[tuple[str, Any, bool]] = [("baseline_answer", self.baseline_answer, True)]
        optional += [(key, getattr(self, key), False) for key in self._TEXTS]
        optional.append(("options", None if self.options is None else list(self.options), False))
        return emit(required, optional, self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class Flips:
    """The units whose outcome changed: how many (``total``), by direction (``by_transition``) and
    by category and direction (``by_category``), a few in full (``examples``: up to ``limit``), and
    the file beside comparison.json that holds every flip (``file``). ``every``: all flips, when
    that file was read (``biascheck.load_comparison``); None otherwise. ``partial``: the counts by
    category are those of the examples only (a /1 file that showed fewer flips than changed)."""

    total: int
    by_transition: Mapping[str, int]
    by_category: Mapping[str, Mapping[str, int]]
    examples: tuple[Flip, ...]
    limit: int
    shown: int
    file: str | None = None
    partial: bool = False
    every: tuple[Flip, ...] | None = None
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("total", "by_transition", "by_category", "examples", "limit", "shown", "file")

    @classmethod
    def from_json(cls, f: Fields) -> Flips:
        examples = tuple(Flip.from_json(f.child(f"examples.{i}", x)) for i, x in enumerate(f.items("examples")))
        return cls(
            total=f.req("total", "an integer"),
            by_transition=f.frozen("by_transition"),
            by_category=f.frozen("by_category"),
            examples=examples,
            limit=f.req("limit", "an integer"),
            shown=f.req("shown", "an integer"),
            file=f.req("file", "a string", nullable=True),
            rest=f.rest(cls._KEYS),
            key_order=f.order(),
        )

    @classmethod
    def from_json_1(cls, f: Fields) -> Flips:
        """/1's flips: ``by_category`` listed the shown flips of each category."""
        listed = f.obj("by_category")
        examples = []
        for category, flips in listed.value.items():
            listing = listed.child(category, {})
            if not isinstance(flips, list):
                raise BiascheckError(f.where, listing.path, "is not an array (the category's flips)", FIX)
            examples += [Flip.from_json(listing.child(str(i), x), category) for i, x in enumerate(flips)]
        counts: dict[str, dict[str, int]] = {}
        for flip in examples:
            counts.setdefault(flip.category, {}).setdefault(flip.transition, 0)
            counts[flip.category][flip.transition] += 1
        total = f.req("total", "an integer")
        by_category = {c: dict(sorted(t.items(), key=lambda kv: (-kv[1], kv[0]))) for c, t in sorted(counts.items())}
        return cls(
            total=total,
            by_transition=f.frozen("by_transition"),
            by_category=freeze(by_category),
            examples=tuple(examples),
            limit=f.req("limit", "an integer"),
            shown=f.req("shown", "an integer"),
            file=None,
            partial=total != len(examples),
            rest=f.rest((*cls._KEYS, "by_category")),
        )

    def to_json(self) -> dict[str, Any]:
        if self.partial:
            raise BiascheckError(
                "comparison",
                "flips",
                f"read from a {COMPARISON_SCHEMA_1} file that showed {len(self.examples)} of {self.total} flips, so its counts by category are partial",
                "compare the runs again (biascheck diff) to write a comparison with every flip",
            )
        required = [
            ("total", self.total),
            ("by_transition", thaw(self.by_transition)),
            ("by_category", thaw(self.by_category)),
            ("examples", [x.to_json() for x in self.examples]),
            ("limit", self.limit),
            ("shown", self.shown),
            ("file", self.file),
        ]
        return emit(required, [], self.rest, self.key_order)


@dataclass(frozen=True, slots=True)
class Comparison:
    """A run compared with a baseline: the ``checks`` (each with its verdict), the ``flips``, and
    the decision (``passed``: nothing regressed, no candidate case errored, the run complete, and
    no inconclusive check where the settings fail on one). ``suite``, ``baseline``, ``candidate``,
    ``fingerprint``, ``cases`` (counts: baseline, candidate, common) and ``settings`` as in
    comparison.json."""

    suite: Mapping[str, Any]
    baseline: Mapping[str, Any]
    candidate: Mapping[str, Any]
    fingerprint: Mapping[str, Any]
    warnings: tuple[str, ...]
    cases: Mapping[str, int]
    settings: Mapping[str, Any]
    checks: tuple[Check, ...]
    regressed: bool
    candidate_errors: int
    passed: bool
    flips: Flips
    rest: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "schema", "suite", "baseline", "candidate", "fingerprint", "warnings", "cases", "settings", "results",
        "regressed", "candidate_errors", "passed", "flips",
    )  # fmt: skip

    @property
    def regressions(self) -> tuple[Check, ...]:
        """The checks that regressed and gate the run, in report order."""
        return tuple(c for c in self.checks if c.regressed and c.gated)

    @property
    def inconclusive(self) -> tuple[Check, ...]:
        """The checks that could neither show nor rule out a worsening beyond their margin."""
        return tuple(c for c in self.checks if c.inconclusive and c.gated)

    @property
    def unresolved(self) -> tuple[Check, ...]:
        """The checks an ``on_inconclusive = fail`` gate fails on: inconclusive, or not compared."""
        return tuple(c for c in self.checks if c.verdict in UNRESOLVED and c.gated)

    @property
    def on_inconclusive(self) -> str:
        """What the inconclusive checks do to the gate: "pass", "warn" or "fail"."""
        return on_inconclusive(self.settings)

    def deselect(self, keep: Collection[tuple[str, str]], *, complete: bool) -> Comparison:
        """This comparison with its checks outside ``keep`` ((scope, metric) of the selected
        regression items) not gated: -k or node ids left their items out, so they do not gate the
        run, and its decision (``passed``, ``regressed``) is what the exit status says.
        ``complete``: whether the candidate run completed (an incomplete run never passes)."""
        checks = tuple(c if (c.scope, c.metric) in keep else replace(c, gated=False) for c in self.checks)
        if all(c.gated for c in checks):
            return self
        marked = replace(self, checks=checks)
        regressed = bool(marked.regressions)
        unresolved = marked.on_inconclusive == "fail" and bool(marked.unresolved)
        return replace(marked, regressed=regressed, passed=not regressed and not unresolved and not self.candidate_errors and complete)

    @classmethod
    def from_json(
        cls, document: Any, where: str = "comparison.json", every_flip: Iterable[Any] | None = None, flips_where: str = FLIPS_FILE
    ) -> Comparison:
        """The record of a comparison.json document, /2 or /1; ``every_flip``: the objects of the
        flips.jsonl beside it (read from ``flips_where``), when read (``Flips.every``)."""
        f = Fields(document, where)
        schema = f.req("schema", "a string")
        if schema not in (COMPARISON_SCHEMA, COMPARISON_SCHEMA_1):
            raise BiascheckError(where, "schema", f"{schema!r} is not a comparison (expected {COMPARISON_SCHEMA!r})", "give a comparison.json")
        first = schema == COMPARISON_SCHEMA_1
        flips_f = f.obj("flips")
        flips = Flips.from_json_1(flips_f) if first else Flips.from_json(flips_f)
        if every_flip is not None:
            every = tuple(Flip.from_json_line(x, flips_where, i + 1) for i, x in enumerate(every_flip))
            flips = _with_every(flips, every)
        verdicts = _VERDICTS_1 if first else EMPTY
        return cls(
            suite=f.frozen("suite"),
            baseline=f.frozen("baseline"),
            candidate=f.frozen("candidate"),
            fingerprint=f.frozen("fingerprint"),
            warnings=f.strings("warnings"),
            cases=f.frozen("cases"),
            settings=f.frozen("settings"),
            checks=tuple(Check.from_json(f.child(f"results.{i}", c), verdicts) for i, c in enumerate(f.items("results"))),
            regressed=f.req("regressed", "a boolean"),
            candidate_errors=f.req("candidate_errors", "an integer"),
            passed=f.req("passed", "a boolean"),
            flips=flips,
            rest=f.rest(cls._KEYS),
            key_order=f.order(),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``biascheck.comparison/2`` document (a record read from a /1 file with partial flip
        counts refuses: see :class:`Flips`)."""
        required = [
            ("schema", COMPARISON_SCHEMA),
            ("suite", thaw(self.suite)),
            ("baseline", thaw(self.baseline)),
            ("candidate", thaw(self.candidate)),
            ("fingerprint", thaw(self.fingerprint)),
            ("warnings", list(self.warnings)),
            ("cases", thaw(self.cases)),
            ("settings", thaw(self.settings)),
            ("results", [c.to_json() for c in self.checks]),
            ("regressed", self.regressed),
            ("candidate_errors", self.candidate_errors),
            ("passed", self.passed),
            ("flips", self.flips.to_json()),
        ]
        return emit(required, [], self.rest, self.key_order)

    def checks_df(self) -> pd.DataFrame:
        """One row per check: metric, scope, verdict, baseline and candidate values with their
        intervals, the worsening and its interval, margin, rule, p values, cases and templates."""
        from biascheck.records.frames import checks_frame

        return checks_frame(self)

    def flips_df(self) -> pd.DataFrame:
        """One row per flip: every flip when flips.jsonl was read (``flips.every``), else the
        examples comparison.json shows (``df.attrs["complete"]`` says which)."""
        from biascheck.records.frames import flips_frame

        return flips_frame(self)


def _explanation(text: str, *, renamed: bool) -> str:
    """A check's explanation, in /2's words when its verdict was renamed from /1's."""
    return text.replace(*_EXPLAINED_1) if renamed else text


def _with_every(flips: Flips, every: tuple[Flip, ...]) -> Flips:
    from dataclasses import replace

    return replace(flips, every=every)
