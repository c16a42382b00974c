"""The documents' validator (biascheck/core/validation.py): jsonschema-rs's fast check, with
jsonschema deciding where it says no, holds a results.json or a baseline exactly where jsonschema
does, on real documents of each benchmark kind and on any damage of them."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.core.validation import DocumentValidator

from conftest import write_subset_suite

SUITES = {
    "kobbq": ("kobbq-quick", 'templates_per_category = 1\nseed = 7\nchoice_orders = "original"', ()),
    "hbb": ("hbb", 'categories = ["age"]', ()),
    "bbg": ("enbbg-quick", 'categories = ["age"]', ("sim/judge", "sim/random")),
}


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """A results.json and the baseline made from it, of a small run of each benchmark kind, each
    kept to its first cases (every case is read by the same fragment)."""
    from biascheck import ModelConfig, RunConfig, build_results, load_suite, run, write_reports
    from biascheck.evaluation import baseline as baselines
    from biascheck.judging.panel import JudgeOptions
    from biascheck.records.run import RunRecord

    tmp = tmp_path_factory.mktemp("validation")
    out = {}
    for name, (base, subset, judges) in SUITES.items():
        suite = load_suite(write_subset_suite(tmp / f"suite-{name}", base, subset=subset), data_dir=data_dir)
        config = RunConfig(
            model=ModelConfig("sim/stereotyped?p=0.3"), store_path=tmp / "store.sqlite", data_dir=data_dir, judges=JudgeOptions(models=judges)
        )
        runs, prompts = build_results(run([(suite, suite.cases[:40])], config))
        write_reports(runs, tmp / name, prompts=prompts)
        results = json.loads((tmp / name / "results.json").read_text("utf-8"))
        baseline = json.loads(baselines.dumps(baselines.from_results(RunRecord.from_json(results), git="abc123")))
        results["cases"], baseline["cases"]["rows"] = results["cases"][:4], baseline["cases"]["rows"][:4]
        out["results", name], out["baseline", name] = results, baseline
    return out


def validator(kind: str, benchmark: str | None) -> DocumentValidator:
    from biascheck.evaluation.baseline import _validator
    from biascheck.reporting.results import _results_validator

    return (_results_validator if kind == "results" else _validator)(benchmark)


# What a parsed file can hold, the values where the two engines differ among them: NaN and
# infinity (Python's json reads them), integers past 64 bits, lone surrogates ("\ud800" in JSON),
# text ending in a newline (jsonschema's "$" matches before it), other scripts' digits.
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**64 + 1, -(2**70), 0, 1, -1])
    | st.floats()
    | st.sampled_from([math.nan, math.inf, 1.0, 0.5])
    | st.text(max_size=6)
    | st.sampled_from(["age\n", "\ud800", "٣", "0" * 64 + "\n", "1/2\n", "kobbq", "a" * 64])
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


def twins(value: Any) -> st.SearchStrategy[Any]:
    """Values of the same JSON type as ``value`` where the engines part: the damage that tells them
    apart (any value at all mostly makes a document that neither holds)."""
    if isinstance(value, bool) or value is None:
        return st.sampled_from([0, 1, 1.0, None, True, False])
    if isinstance(value, (int, float)):
        return st.sampled_from([math.nan, math.inf, -math.inf, float(value), int(value) if math.isfinite(value) else 0, 2**64 + 1, -(2**70)])
    if isinstance(value, str):
        return st.sampled_from([value + "\n", value + "\ud800", value.replace("0", "٣").replace("1", "١"), "\n" + value])
    if isinstance(value, list):
        return st.just([*value, *value[:1]])  # an item twice (uniqueItems)
    return st.just({**value, 1: 2}) if value else st.just({1: 2})  # a key that is not a string


def paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += paths(item, (*path, index))
    return out


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_document_holds_exactly_where_jsonschema_says_it_holds(documents, data):
    kind, name = data.draw(st.sampled_from(sorted(documents)))
    document = copy.deepcopy(documents[kind, name])
    for _ in range(data.draw(st.integers(0, 3))):
        path = data.draw(st.sampled_from(paths(document)[1:]))
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        how = data.draw(st.sampled_from(["twin", "twin", "delete", "any"]))
        if how == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(twins(parent[path[-1]]) if how == "twin" else values)
    for benchmark in (None, documents[kind, name]["suite"]["benchmark"]):
        fast = validator(kind, benchmark)
        assert fast.is_valid(document) is jsonschema.Draft202012Validator(fast.schema).is_valid(document)


def test_the_documents_damaged_above_hold_undamaged(documents):
    for (kind, _), document in documents.items():
        fast = validator(kind, document["suite"]["benchmark"])
        assert fast.is_valid(document) and jsonschema.Draft202012Validator(fast.schema).is_valid(document)


@pytest.mark.parametrize(
    ("schema", "instance", "holds"),
    [
        ({"type": "number", "minimum": 0}, math.nan, True),  # jsonschema-rs: no
        ({"type": "number"}, math.inf, True),  # jsonschema-rs: no
        ({"type": "string", "pattern": "^[a-z]+$"}, "age\n", True),  # jsonschema-rs: no
        ({"type": "string", "pattern": "^[0-9]$"}, "٣", False),
        ({"type": "string", "pattern": "^\\d$"}, "٣", True),  # jsonschema-rs: no
        ({"type": "string", "maxLength": 1}, "\ud800", True),  # jsonschema-rs cannot read it
        ({"type": "object"}, {1: 2}, True),  # jsonschema-rs cannot read it
        ({"type": "integer", "maximum": 5}, 2**70, False),
        ({"type": "integer"}, 1.0, True),
        ({"type": "integer"}, True, False),
        ({"type": "array"}, [1], True),
        ({"type": "array"}, (1,), True),  # the one departure: jsonschema says no; json writes it as [1]
    ],
)
def test_each_value_where_the_engines_differ_is_decided_as_documented(schema, instance, holds):
    assert DocumentValidator(schema).is_valid(instance) is holds
