"""Suite manifests: ``suites/<name>/suite.toml``, validated against ``schemas/suite.schema.json``.

A manifest says which benchmark to run, which data files (by pinned URL and checksum: sha256, git blob id or both), which prompts,
which subset, with which sampling parameters, and which thresholds gate the release.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from biascheck.config.sources import FIX_PIN, DataFile
from biascheck.core.bounds import with_bounds
from biascheck.core.errors import BiascheckError
from biascheck.core.format import THRESHOLD_WORDS
from biascheck.core.spelling import Option, option

MANIFEST_NAME = "suite.toml"
# Keys of [thresholds] that say how gates are judged (see verdicts.judge); every other key names a gated metric.
THRESHOLD_SETTINGS = ("mode", "min_n")
# How to fix a list the schema wants non-empty (minItems 1), by field: an empty list never means "all".
EMPTY_LIST_FIXES = {
    "subset.categories": "leave the key out for every category, or name some",
    "prompts.use": "leave the key out for every prompt, or name some",
}

# Sampling parameters a manifest or the command line may set, with their types.
SAMPLING_PARAMS: dict[str, type] = {
    "temperature": float,
    "top_p": float,
    "max_tokens": int,
    "seed": int,
    "frequency_penalty": float,
    "presence_penalty": float,
}

# Where a user sees a complete suite.toml (messages never name one benchmark: each has its own).
EXAMPLE_FIX = "a packaged suite shows one: biascheck init NAME copies it"


@dataclass(frozen=True)
class Threshold:
    """A gate on one metric: ``max_abs`` (|value| <= limit), ``max`` or ``min``."""

    kind: str
    limit: float

    def passes(self, value: float) -> bool:
        if value != value:  # NaN: an unmeasurable metric never passes a gate
            return False
        if self.kind == "max_abs":
            return abs(value) <= self.limit
        if self.kind == "max":
            return value <= self.limit
        return value >= self.limit

    def passes_within(self, lo: float, hi: float) -> bool:
        """Whether some value in [lo, hi] passes: every gate's passing set is an interval, so this
        is whether the two intervals meet (False: the whole of [lo, hi] lies beyond the limit)."""
        if self.kind == "max_abs":
            return lo <= self.limit and hi >= -self.limit
        if self.kind == "max":
            return lo <= self.limit
        return hi >= self.limit

    def describe(self) -> str:
        return THRESHOLD_WORDS[self.kind].format(self.limit)

    def to_dict(self) -> dict[str, float]:
        return {self.kind: self.limit}


# The largest margins: absolute, the widest metric's span (HBB's scores, 0 to 100); relative, ten times the baseline.
MAX_MARGIN = 100.0
MAX_RELATIVE_MARGIN = 10.0
_RULE = re.compile(r"^\s*(?P<sign>[+-]?)\s*(?P<number>(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)\s*(?P<percent>%?)\s*$")


@dataclass(frozen=True)
class Rule:
    """A regression rule, ``diff_bias_amb:+0.02`` or ``acc_dis:-2%``: the candidate fails when the
    metric got credibly worse than the baseline by more than ``margin`` (absolute, or relative to
    the baseline value when ``relative``). ``sign`` is the direction as written (+1, -1, or 0 when
    unsigned); which direction is worse is known per metric, so a written sign is only checked."""

    metric: str
    margin: float
    relative: bool = False
    sign: int = 0
    source: str = "default"

    @classmethod
    def parse(cls, metric: str, text: str | float | int, *, where: object, field: str, source: str) -> Rule:
        match = _RULE.match(str(text)) if not isinstance(text, bool) else None
        if not metric or match is None or not math.isfinite(float(match["number"])):
            raise BiascheckError(
                where,
                field,
                f"{text!r} is not a margin",
                "write METRIC:MARGIN with MARGIN like +0.02 (absolute) or -2% (relative to the baseline)",
            )
        sign = {"+": 1, "-": -1, "": 0}[match["sign"]]
        margin = float(match["number"]) / (100 if match["percent"] else 1)
        if margin > (MAX_RELATIVE_MARGIN if match["percent"] else MAX_MARGIN):
            raise BiascheckError(
                where,
                field,
                f"{text!r} is out of range",
                f"give an absolute margin of at most {MAX_MARGIN:g} or a relative one of at most {MAX_RELATIVE_MARGIN * 100:g}%",
            )
        return cls(metric, margin, bool(match["percent"]), sign, source)

    @classmethod
    def parse_option(cls, text: str, where: object = Option("compare-fail")) -> Rule:
        metric, sep, margin = text.partition(":")
        if not sep or not metric.strip():
            raise BiascheckError(where, text, "expected METRIC:MARGIN", "e.g. diff_bias_amb:+0.02 or acc_dis:-2%")
        return cls.parse(metric.strip(), margin, where=where, field=text, source="command line")

    def check_direction(self, better: str, *, where: object, field: str) -> None:
        """A written sign must point the way this metric gets worse (``better``: higher/lower/zero)."""
        if self.relative and better == "zero":
            raise BiascheckError(
                where,
                field,
                f"{self.describe()}: a margin relative to a metric best at zero shrinks to nothing as the baseline improves",
                f"give an absolute margin, e.g. {self.metric}:+0.01",
            )
        worse = -1 if better == "higher" else 1
        if self.sign and self.sign != worse:
            change = "a decrease" if worse < 0 else ("an increase of |x|" if better == "zero" else "an increase")
            fixed = Rule(self.metric, self.margin, self.relative, worse, self.source).describe()
            raise BiascheckError(where, field, f"{self.describe()} points the wrong way: for {self.metric} a worsening is {change}", f"write {fixed}")

    def describe(self) -> str:
        sign = {1: "+", -1: "-", 0: ""}[self.sign]
        return f"{self.metric}:{sign}{self.margin * 100:g}%" if self.relative else f"{self.metric}:{sign}{self.margin:g}"

    def absolute_margin(self, baseline_value: float) -> float:
        return self.margin * abs(baseline_value) if self.relative else self.margin


@dataclass(frozen=True)
class RegressionSettings:
    """The manifest's ``[regression]`` table: margins per metric and the test's settings."""

    rules: dict[str, Rule] = field(default_factory=dict)
    alpha: float = 0.05
    power: float = 0.8
    resamples: int = 2000
    seed: int = 0
    flip_limit: int = 200
    on_inconclusive: str = "warn"  # what an inconclusive check does to the gate: pass, warn or fail

    def to_dict(self) -> dict[str, Any]:
        return {
            "on_inconclusive": self.on_inconclusive,
            "rules": [r.describe() for r in self.rules.values()],
            "alpha": self.alpha,
            "power": self.power,
            "resamples": self.resamples,
            "seed": self.seed,
            "flip_limit": self.flip_limit,
        }


@dataclass(frozen=True)
class InlinePrompt:
    id: str
    template: str
    unknown: str | None  # None: each item keeps its own wording of the unknown option
    letters: tuple[str, str, str]  # the schema holds exactly three


@dataclass(frozen=True)
class SuiteManifest:
    path: Path
    name: str
    benchmark: str
    description: str
    language: str  # ISO 639 code of the prompts' language; "" when the suite does not say
    data: dict[str, DataFile]
    data_categories: dict[str, str]  # data key -> category, for per-category files
    prompts_from_data: str | None
    prompt_ids: tuple[str, ...] | None
    inline_prompts: tuple[InlinePrompt, ...]
    categories: tuple[str, ...]
    choice_orders: str
    sample: str
    subset_seed: int
    templates_per_category: int | None
    sampling: dict[str, Any]
    bootstrap_resamples: int
    bootstrap_seed: int
    thresholds: dict[str, Threshold]
    category_thresholds: dict[str, dict[str, Threshold]]
    threshold_mode: str = "point"  # [thresholds] mode: "point" or "credible"
    threshold_min_n: int | None = None  # [thresholds] min_n: category checks on fewer cases are not judged
    regression: RegressionSettings = field(default_factory=RegressionSettings)
    estimator_thresholds: dict[str, dict[str, Threshold]] = field(default_factory=dict)
    # The benchmark's own table ([<benchmark>] in suite.toml) as written, None when there is none:
    # the benchmark checks it against the schema fragment it ships and reads it with its defaults.
    settings: dict[str, Any] | None = None
    # [answers] as written: how a case is answered, for benchmarks with answer modes (QA).
    answers: dict[str, Any] = field(default_factory=dict)
    # [suite] language_pack: the language pack the suite ships, relative to the manifest ("" for none).
    language_pack: str = ""
    # [suite] data: the suite's own folder of data files (a dataset of the user's own), resolved
    # against the manifest; None: the mirror the run names (--biascheck-data), else the cache.
    data_folder: Path | None = None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def directory(self) -> Path:
        return self.path.parent

    def gated_metrics(self, category: str | None) -> list[str]:
        """Metrics gated overall (``None``) or in one category: the thresholds plus its overrides."""
        extra = [m for m in self.category_thresholds.get(category, {}) if m not in self.thresholds] if category else []
        return list(self.thresholds) + extra

    def threshold_for(self, metric: str, category: str | None, estimator: str | None = None) -> Threshold | None:
        """The gate on a metric: a category's own, else the estimator's (HBB), else the suite's."""
        if category is not None and metric in self.category_thresholds.get(category, {}):
            return self.category_thresholds[category][metric]
        if metric in self.estimator_thresholds.get(estimator or "", {}):
            return self.estimator_thresholds[estimator or ""][metric]
        return self.thresholds.get(metric)


@cache
def suite_validator():
    import jsonschema

    schema = json.loads(resources.files("biascheck.schemas").joinpath("suite.schema.json").read_text("utf-8"))
    return jsonschema.Draft202012Validator(with_bounds(schema))


def check_table(path: Path, name: str, table: Any, schema: dict[str, Any]) -> None:
    """Validate a suite.toml table against a schema fragment (a benchmark's own table), with the
    suite schema's one-line errors and field paths (``name.key...``)."""
    import jsonschema
    from referencing import Registry, Resource

    suite_schema = suite_validator().schema  # a fragment may refer to its parts by the suite schema's $id
    registry = Registry().with_resource(suite_schema["$id"], Resource.from_contents(suite_schema))
    validator = jsonschema.Draft202012Validator({"type": "object", "properties": {name: schema}}, registry=registry)
    _raise_first(path, validator.iter_errors({name: table}))


def _raise_first(path: Path, errors) -> None:
    ordered = sorted(errors, key=lambda e: list(map(str, e.absolute_path)))
    if ordered:
        raise _schema_error(path, ordered[0])


def _field_path(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


# A gate's field: thresholds.<metric>, category_thresholds.<category>.<metric>, estimator_thresholds.<kind>.<metric>.
_THRESHOLD_FIELD = re.compile(r"^(thresholds|(category|estimator)_thresholds\.[^.]+)\.[^.]+$")


def _schema_error(path: Path, error) -> BiascheckError:
    where = _field_path(error)
    validator = error.validator
    if validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "(see the schema)"
        return BiascheckError(path, where, f"unknown key {', '.join(map(repr, extra))}", f"use one of: {allowed}")
    if validator == "required":
        return BiascheckError(path, where, error.message, f"add it ({EXAMPLE_FIX})")
    if validator == "enum":
        choices = ", ".join(map(repr, error.validator_value))
        return BiascheckError(path, where, f"{error.instance!r} is not allowed", f"use one of: {choices}")
    if validator == "pattern" and where.endswith("sha256"):
        return BiascheckError(path, where, f"{error.instance!r} is not a sha256", "give 64 lowercase hex digits")
    if validator == "pattern" and where == "suite.language_pack":
        return BiascheckError(
            path, where, f"{error.instance!r} is not a .toml file", 'name the pack\'s file, beside the manifest: language_pack = "sw.toml"'
        )
    if validator == "pattern" and where.endswith("git_blob_sha1"):
        return BiascheckError(path, where, f"{error.instance!r} is not a git blob id", "give 40 lowercase hex digits")
    if validator == "anyOf" and where.startswith("data."):  # the one anyOf: a data file's checksum
        return BiascheckError(path, where, "has no checksum (neither sha256 nor git_blob_sha1)", FIX_PIN)
    if validator == "minItems" and error.instance == [] and error.validator_value == 1:
        fix = EMPTY_LIST_FIXES.get(where, "name at least one, or leave the key out")
        return BiascheckError(path, where, "empty", fix)
    if where == "thresholds.min_n":
        return BiascheckError(path, where, error.message, "give a whole number of cases, at least 1, e.g. min_n = 30")
    if validator == "type" and error.validator_value == "object" and _THRESHOLD_FIELD.match(where):
        return BiascheckError(
            path,
            where,
            error.message,
            'a gate is a table, e.g. diff_bias_amb = { max_abs = 0.05 }; only [thresholds] also takes mode = "point" | "credible" and min_n = N',
        )
    if validator == "maxLength" and isinstance(error.instance, str):  # the message would repeat the whole text
        return BiascheckError(path, where, f"is {len(error.instance)} characters long", f"give at most {error.validator_value} characters")
    if validator in ("minimum", "maximum") and "minimum" in error.schema and "maximum" in error.schema:
        low, high = error.schema["minimum"], error.schema["maximum"]
        return BiascheckError(path, where, error.message, f"give a value from {low} to {high}")
    return BiascheckError(path, where, error.message, "fix the value to match the suite schema")


def _numbers(value: Any, where: str = ""):
    """Every float in a parsed TOML document, with its dotted field path."""
    if isinstance(value, float):
        yield where or "(top level)", value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{where}[{index}]")


# Tables and arrays inside each other: a suite.toml needs five (prompts.inline[0].letters[0]).
MAX_DEPTH = 32


def _depth_over(value: Any, limit: int) -> bool:
    """Whether tables and arrays nest more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _too_deep(path: Path) -> BiascheckError:
    return BiascheckError(path, None, f"tables or arrays are nested too deeply (more than {MAX_DEPTH} levels)", EXAMPLE_FIX)


OPTION_PLACEHOLDERS = ("{a}", "{b}", "{c}")


def lists_no_options(raw: Mapping[str, Any], template: str) -> bool:
    """A prompt may leave its options unlisted (lm-evaluation-harness's prompts, whose options are
    scored as continuations) only when it lists none and the suite answers by the option texts'
    log-likelihood; the QA benchmarks refuse any other answer mode for it before the first call."""
    answers = raw.get("answers") or {}
    scored = answers.get("mode") == "loglikelihood" and answers.get("continuations") == "options"
    return scored and not any(p in template for p in OPTION_PLACEHOLDERS)


def load_manifest(suite: Path | str) -> SuiteManifest:
    """Read and validate a manifest; ``suite`` is the suite folder or its ``suite.toml``."""
    path = Path(suite)
    if path.is_dir():
        path = path / MANIFEST_NAME
    if not path.is_file():
        raise BiascheckError(path, None, "no such suite manifest", f"give a suite folder that holds {MANIFEST_NAME}")
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except UnicodeDecodeError as exc:
        raise BiascheckError(path, None, f"not UTF-8 text ({exc.reason})", "save the manifest as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise BiascheckError(path, None, f"invalid TOML: {exc}", "fix the TOML syntax") from None
    except RecursionError:  # tomllib parses arrays and inline tables recursively
        raise _too_deep(path) from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise BiascheckError(
            path, None, f"holds a number of more than {sys.get_int_max_str_digits()} digits", "give a number a suite can use"
        ) from None
    if _depth_over(raw, MAX_DEPTH):  # before anything below walks it recursively
        raise _too_deep(path)

    # TOML has nan and inf; the schema's bounds let them through and no hash can serialise nan.
    for where, value in _numbers(raw):
        if not math.isfinite(value):
            raise BiascheckError(path, where, f"{value!r} is not a finite number", "give a finite number")
    # The benchmark's own table is its to check (check_table); every other key is the suite schema's.
    benchmark = raw.get("suite", {}).get("benchmark") if isinstance(raw.get("suite"), dict) else None
    own_table = benchmark if isinstance(benchmark, str) and benchmark not in suite_validator().schema["properties"] else None
    _raise_first(path, suite_validator().iter_errors({key: value for key, value in raw.items() if key != own_table}))

    data = {key: DataFile.from_manifest(key, table, path) for key, table in raw["data"].items()}
    prompts = raw.get("prompts", {"inline": []})  # a benchmark may take its prompts from its own table
    if ("from_data" in prompts) == ("inline" in prompts):
        raise BiascheckError(path, "prompts", "give exactly one of prompts.from_data or prompts.inline", EXAMPLE_FIX)
    if "from_data" in prompts and prompts["from_data"] not in data:
        raise BiascheckError(path, "prompts.from_data", f"{prompts['from_data']!r} is not a key of [data]", f"use one of: {', '.join(data)}")
    inline = tuple(
        InlinePrompt(p["id"], p["template"], p.get("unknown"), (p["letters"][0], p["letters"][1], p["letters"][2])) for p in prompts.get("inline", ())
    )
    for prompt in inline:
        for placeholder in ("{context}", "{question}", "{a}", "{b}", "{c}"):
            if placeholder not in prompt.template and not (placeholder in OPTION_PLACEHOLDERS and lists_no_options(raw, prompt.template)):
                raise BiascheckError(
                    path,
                    f"prompts.inline[{prompt.id}].template",
                    f"missing placeholder {placeholder}",
                    "templates need {context}, {question}, {a}, {b} and {c}",
                )
    ids = [p.id for p in inline]
    if len(set(ids)) != len(ids):
        raise BiascheckError(path, "prompts.inline", "prompt ids repeat", "give every prompt a distinct id")
    if inline and "use" in prompts:
        unknown = sorted(set(prompts["use"]) - set(ids))
        if unknown:
            raise BiascheckError(path, "prompts.use", f"unknown prompt ids {unknown}", f"use ids from: {', '.join(ids)}")

    gates = {m: _threshold(t) for m, t in raw["thresholds"].items() if m not in THRESHOLD_SETTINGS}
    if not gates:
        raise BiascheckError(
            path, "thresholds", "no gated metric (mode and min_n only say how gates are judged)", "add one, e.g. diff_bias_amb = { max_abs = 0.05 }"
        )

    subset = raw.get("subset", {})
    bootstrap = raw.get("bootstrap", {})
    regression = raw.get("regression", {})
    rules = {
        metric: Rule.parse(metric, text, where=str(path), field=f"regression.margins.{metric}", source="manifest")
        for metric, text in regression.get("margins", {}).items()
    }
    return SuiteManifest(
        path=path,
        name=raw["suite"]["name"],
        benchmark=raw["suite"]["benchmark"],
        description=raw["suite"].get("description", ""),
        language=raw["suite"].get("language", ""),
        data=data,
        data_categories=_data_categories(path, raw),
        prompts_from_data=prompts.get("from_data"),
        prompt_ids=tuple(prompts["use"]) if "use" in prompts else None,
        inline_prompts=inline,
        categories=tuple(subset.get("categories", ())),
        choice_orders=subset.get("choice_orders", "cyclic"),
        sample=subset.get("sample", "all"),
        subset_seed=subset.get("seed", 0),
        templates_per_category=subset.get("templates_per_category"),
        # Typed as on the command line, so `temperature = 0` here and `temperature=0` there are one key.
        sampling={name: SAMPLING_PARAMS[name](value) for name, value in raw.get("sampling", {}).items()},
        bootstrap_resamples=bootstrap.get("resamples", 1000),
        bootstrap_seed=bootstrap.get("seed", 0),
        thresholds=gates,
        threshold_mode=raw["thresholds"].get("mode", "point"),
        threshold_min_n=int(raw["thresholds"]["min_n"]) if "min_n" in raw["thresholds"] else None,  # TOML 30.0 is a valid integer too
        category_thresholds={c: {m: _threshold(t) for m, t in table.items()} for c, table in raw.get("category_thresholds", {}).items()},
        estimator_thresholds={kind: {m: _threshold(t) for m, t in table.items()} for kind, table in raw.get("estimator_thresholds", {}).items()},
        settings=raw.get(own_table) if own_table else None,
        answers=dict(raw.get("answers", {})),
        language_pack=raw["suite"].get("language_pack", ""),
        data_folder=path.parent / raw["suite"]["data"] if "data" in raw["suite"] else None,
        regression=RegressionSettings(
            rules=rules,
            **{key: regression[key] for key in ("alpha", "power", "resamples", "seed", "flip_limit", "on_inconclusive") if key in regression},
        ),
        raw=raw,
    )


def _data_categories(path: Path, raw: dict[str, Any]) -> dict[str, str]:
    """Data key -> the category its file holds: its table's ``category``, else its file name read
    by ``[suite] category_from`` (``"{category}_nl.jsonl"``); files that hold no one category have none."""
    pattern = raw["suite"].get("category_from")
    regex = re.compile(re.escape(pattern).replace(re.escape("{category}"), "(?P<category>.+)")) if pattern else None
    found = {}
    for key, table in raw["data"].items():
        if "category" in table:
            found[key] = table["category"]
        elif regex is not None:
            name = PurePosixPath(table["path"]).name
            match = regex.fullmatch(name)
            if match is None:
                raise BiascheckError(
                    path,
                    f"data.{key}.path",
                    f"the file name {name!r} is not {pattern!r} ([suite] category_from)",
                    'give the table a category = "..."',
                )
            found[key] = match.group("category")
    return found


def _threshold(table: dict[str, float]) -> Threshold:
    ((kind, limit),) = table.items()
    return Threshold(kind, float(limit))


def parse_sampling_overrides(pairs: list[str], where: object = Option("param")) -> dict[str, Any]:
    """``["temperature=0.7", "seed=1"]`` -> typed dict; bad names or values are one-line errors."""
    result: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or name not in SAMPLING_PARAMS:
            raise BiascheckError(
                where,
                name or pair,
                f"expected NAME=VALUE with NAME one of {', '.join(SAMPLING_PARAMS)}, got {pair!r}",
                f"e.g. {option('param')} temperature=0",
            )
        try:
            typed = SAMPLING_PARAMS[name](value.strip())
        except ValueError:
            raise BiascheckError(where, name, f"{value!r} is not a valid {SAMPLING_PARAMS[name].__name__}", "give a number") from None
        # The same bounds as a manifest's [sampling] (e.g. temperature >= 0), and never nan/inf.
        bounds = suite_validator().schema["properties"]["sampling"]["properties"][name]
        problem = None if math.isfinite(typed) else "is not a finite number"
        for key, test in (("minimum", lambda b: typed >= b), ("exclusiveMinimum", lambda b: typed > b), ("maximum", lambda b: typed <= b)):
            if problem is None and key in bounds and not test(bounds[key]):
                problem = f"is out of range ({key} {bounds[key]})"
        if problem:
            raise BiascheckError(where, name, f"{value.strip()!r} {problem}", f"give a finite value in range, e.g. {option('param')} temperature=0")
        result[name] = typed
    return result


def canonical_json(value: Any) -> str:
    """The one serialisation used for every hash in biascheck (keys sorted, UTF-8 kept)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
