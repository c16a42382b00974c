"""The typed records of a run, a baseline and a comparison (biascheck/records/): each file biascheck
writes reads into its record and writes back to the same bytes, on real runs of several benchmarks
against the simulator and on generated documents; a comparison.json of schema /1 reads as /2."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.core.errors import BiascheckError
from biascheck.records.baseline import BaselineRecord
from biascheck.records.comparison import VERDICTS, Comparison, Flip
from biascheck.records.run import RunRecord
from biascheck.reporting.write import results_text

from conftest import write_subset_suite

FAST = settings(max_examples=examples(60), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=12,
)


@FAST
@given(
    head=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "cases"), JSON_VALUES, max_size=4),
    cases=st.lists(st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4) | JSON_VALUES, max_size=4),
    at=st.integers(0, 4),
)
def test_results_text_is_the_document_with_a_case_per_line(head, cases, at):
    items = list(head.items())
    document = dict([*items[:at], ("cases", cases), *items[at:]])
    text = results_text(document)
    assert json.loads(text) == document and list(json.loads(text)) == list(document) and text.endswith("}\n")
    if cases:  # each case on a line of its own, and everything else as json.dumps(indent=1) lays it out
        lines = text.split("\n")
        start = lines.index(' "cases": [')
        assert [json.loads(line.strip().removesuffix(",")) for line in lines[start + 1 : start + 1 + len(cases)]] == cases
        assert lines[start + 1 + len(cases)].strip() in ("]", "],")
    without = {k: v for k, v in document.items() if k != "cases"}
    assert results_text(without) == json.dumps(without, ensure_ascii=False, indent=1) + "\n"


# --- real runs --------------------------------------------------------------------------------


SUITES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # (base suite, [subset], judges)
    "kobbq": ("kobbq-quick", 'templates_per_category = 1\nseed = 7\nchoice_orders = "original"', ()),
    "bbq": ("bbq-quick", 'sample = "one-per-group"\nseed = 42\ntemplates_per_category = 1\nchoice_orders = "original"', ()),
    "hbb": ("hbb", 'categories = ["age"]', ()),
    "bbg": ("enbbg-quick", 'categories = ["age"]', ("sim/judge",)),
    # Several judges: results.json's judging, each case's readings and the baseline's judges.
    "bbg-judges": ("enbbg-quick", 'categories = ["age"]', ("sim/judge", "sim/random")),
}


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Path]:
    """results.json of a small run of each benchmark kind (QA twice, HBB, BBG with its judge)
    through the Python API and the report writer, and a second QA run to compare with the first."""
    from biascheck import ModelConfig, RunConfig, build_results, load_suite, run, write_reports
    from biascheck.judging.panel import JudgeOptions

    tmp = tmp_path_factory.mktemp("records")
    folders = {}
    for name, (base, subset, judges) in SUITES.items():
        suite = load_suite(write_subset_suite(tmp / f"suite-{name}", base, subset=subset), data_dir=data_dir)
        for model, tag in (("sim/stereotyped?p=0.1", ""), ("sim/stereotyped?p=0.6", "-worse")):
            if tag and name != "kobbq":
                continue
            config = RunConfig(model=ModelConfig(model), store_path=tmp / "store.sqlite", data_dir=data_dir, judges=JudgeOptions(models=judges))
            result = run([(suite, suite.cases[:150])], config)
            runs, prompts = build_results(result)
            write_reports(runs, tmp / f"{name}{tag}", prompts=prompts)
            folders[name + tag] = tmp / f"{name}{tag}"
    return folders


@pytest.mark.parametrize("name", list(SUITES))
def test_a_results_json_reads_into_its_record_and_writes_back_to_the_same_bytes(real_runs, name):
    text = (real_runs[name] / "results.json").read_text("utf-8")
    document = json.loads(text)
    record = RunRecord.from_json(document)
    assert record.to_json() == document
    assert results_text(record.to_json()) == text
    # The record holds what the document says, typed.
    assert record.suite.benchmark == document["suite"]["benchmark"] and len(record.cases) == len(document["cases"])
    assert record.passed is document["passed"]
    assert [v.metric for v in record.failed_checks] == [v["metric"] for v in document["verdicts"] if not v["passed"]]
    overall = record.metrics.table("overall", "overall")
    assert {m: v.value for m, v in overall.items()} == {m: v["value"] for m, v in document["metrics"]["overall"].items()}
    assert [c.outcome for c in record.cases] == [c["outcome"] for c in document["cases"]]
    with pytest.raises(TypeError):  # read-only: what a record holds is not edited in place
        record.cases[0].fields["x"] = 1  # type: ignore[index]


@pytest.mark.parametrize("name", list(SUITES))
def test_a_baseline_reads_into_its_record_and_writes_back_to_the_same_bytes(real_runs, name):
    from biascheck.evaluation import baseline as baselines

    results = json.loads((real_runs[name] / "results.json").read_text("utf-8"))
    text = baselines.dumps(baselines.from_results(RunRecord.from_json(results), git="abc123"))
    document = json.loads(text)
    record = BaselineRecord.from_json(document)
    assert record.to_json() == document and baselines.dumps(record) == text
    assert record.suite_name == results["suite"]["name"] and len(record.rows) == len(results["cases"])
    assert record.passed is (not [v for v in results["verdicts"] if not v["passed"]])


COMPARISON_1 = Path(__file__).parent / "data" / "comparison-1-shown-7.json"


def comparison_1() -> dict[str, Any]:
    """A comparison.json of schema /1, as compare() wrote it before /2: a run of kobbq-quick's first
    150 cases by sim/stereotyped?p=0.6 against a baseline of p=0.1 (3 checks regressed, 17
    unchanged), 7 of its 36 flips shown (flip_limit 7)."""
    return json.loads(COMPARISON_1.read_text("utf-8"))


def test_a_comparison_of_schema_1_reads_as_2():
    document = comparison_1()
    assert document["schema"] == "biascheck.comparison/1"
    record = Comparison.from_json(document)
    words = {"unchanged": "within margin"}
    assert [c.verdict for c in record.checks] == [words.get(c["verdict"], c["verdict"]) for c in document["results"]]
    assert [c.verdict for c in record.checks].count("within margin") == 17 and len(record.regressions) == 3
    assert record.regressions == tuple(c for c in record.checks if c.verdict == "regressed")
    assert record.passed is document["passed"] is False
    # Its explanations say so too, as every view of a /1 file read them before the record.
    unchanged = [c["explanation"] for c in document["results"] if c["verdict"] == "unchanged"]
    assert unchanged and all(" unchanged within the margin: " in text for text in unchanged)
    explained = [c.explanation for c in record.checks if c.verdict == "within margin"]
    assert explained == [text.replace(" unchanged within the margin: ", " within margin: ") for text in unchanged]
    flips = record.flips
    shown = [(category, f["case_id"]) for category, listed in document["flips"]["by_category"].items() for f in listed]
    assert [(f.category, f.case_id) for f in flips.examples] == shown and len(shown) == 7
    # The counts by category are those of the shown flips, and said to be partial.
    assert {c: sum(t.values()) for c, t in flips.by_category.items()} == {c: len(x) for c, x in document["flips"]["by_category"].items()}
    assert flips.partial and flips.total == 36
    shown_frame = record.flips_df()
    assert len(shown_frame) == 7 and not shown_frame.attrs["complete"]  # the examples only, and said so
    assert list(record.checks_df()["verdict"]) == [c.verdict for c in record.checks]
    with pytest.raises(BiascheckError, match="partial"):
        record.to_json()


def test_a_comparison_of_schema_1_that_shows_every_flip_writes_as_2():
    document = comparison_1()
    listed = [f for flips in document["flips"]["by_category"].values() for f in flips]
    counts: dict[str, int] = {}
    for flip in listed:
        counts[f"{flip['baseline']} -> {flip['candidate']}"] = counts.get(f"{flip['baseline']} -> {flip['candidate']}", 0) + 1
    document["flips"] |= {"total": len(listed), "by_transition": counts}  # a /1 file of a run with these 7 flips
    record = Comparison.from_json(document)
    assert not record.flips.partial and len(record.flips.examples) == record.flips.total == 7
    written = record.to_json()
    assert written["schema"] == "biascheck.comparison/2"
    assert [c["verdict"] for c in written["results"]] == [c.verdict for c in record.checks]
    assert sum(sum(t.values()) for t in written["flips"]["by_category"].values()) == written["flips"]["total"]
    assert Comparison.from_json(written).to_json() == written


def test_the_comparison_compare_writes_today_reads(real_runs):
    """The comparison.json compare() writes (schema /1 before another change of this session, /2
    after it): its record has its verdicts, and a /2 one writes back unchanged."""
    from biascheck.evaluation import baseline as baselines
    from biascheck.evaluation.regression import compare, settings_from

    base = RunRecord.from_json(json.loads((real_runs["kobbq"] / "results.json").read_text("utf-8")))
    candidate = RunRecord.from_json(json.loads((real_runs["kobbq-worse"] / "results.json").read_text("utf-8")))
    document = json.loads(json.dumps(compare(baselines.from_results(base), candidate, settings_from(candidate), baseline_path="base.json").to_json()))
    record = Comparison.from_json(document)
    words = {"unchanged": "within margin"}
    assert [c.verdict for c in record.checks] == [words.get(c["verdict"], c["verdict"]) for c in document["results"]]
    assert record.regressions and record.passed is document["passed"] is False
    if document["schema"] == "biascheck.comparison/2":
        assert results_text(record.to_json()) == results_text(document)


# --- generated documents -----------------------------------------------------------------------

names = st.text(string.ascii_lowercase + "_", min_size=1, max_size=6)
extra_names = names.map(lambda s: "x_" + s)  # keys no record field holds
scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3), max_leaves=5)
numbers = st.integers(-5, 5) | st.floats(-2, 2, allow_nan=False)
text = st.text(max_size=6)
maybe_null = st.none() | text
intervals = st.lists(st.none() | numbers, min_size=2, max_size=2)


@st.composite
def objects(draw, required: dict[str, Any], optional: dict[str, Any] | None = None, extra: bool = True) -> dict[str, Any]:
    """A JSON object: every ``required`` key, some ``optional`` ones, maybe keys of no field; in any order."""
    values = draw(st.fixed_dictionaries(required, optional=optional or {}))
    if extra:
        values.update(draw(st.dictionaries(extra_names, json_values, max_size=2)))
    keys = draw(st.permutations(list(values)))
    return {key: values[key] for key in keys}


metric_value = objects({"value": st.none() | numbers, "ci": intervals, "n": st.integers(0, 99)}, {"note": text})
table = st.dictionaries(names, metric_value, min_size=1, max_size=3)
tables = st.dictionaries(names, table, max_size=3)
verdict = objects(
    {
        "metric": names,
        "scope": names,
        "value": st.none() | numbers,
        "ci": intervals,
        "n": st.integers(0, 9),
        "threshold": st.dictionaries(names, numbers, max_size=2),
        "passed": st.booleans(),
    },
    {
        "note": maybe_null,
        "mode": st.sampled_from(["point", "credible"]),
        "status": st.sampled_from(["pass", "fail", "inconclusive"]),
        "gated": st.just(False),
    },
)
case = objects(
    {
        "case_id": text,
        "sample_id": text,
        "category": names,
        "cluster": text,
        "prompt_id": text,
        "raw": maybe_null,
        "outcome": names,
        "error": maybe_null,
    },
    {
        "label": text,
        "order": st.integers(0, 5),
        "context_type": st.sampled_from(["amb", "dis-biased", "dis-counter"]),
        "choices": st.lists(text, max_size=3),
        "answer": maybe_null,
        "truncated": st.just(True),
        "p_a": st.none() | numbers,
    },
)
counts = st.integers(0, 50)
results_documents = objects(
    {
        "schema": st.just("biascheck.results/1"),
        "tool": objects({"name": st.just("biascheck"), "version": text}),
        "created_at": text,
        "suite": objects(
            {
                "name": names,
                "benchmark": names,
                "fingerprint": st.dictionaries(names, text | counts, max_size=3),
                "prompts": st.lists(text, max_size=2),
                "skipped_categories": st.dictionaries(names, text, max_size=2),
                "cases_total": counts,
                "thresholds": st.dictionaries(names, json_values, max_size=2),
                "regression": st.dictionaries(names, json_values, max_size=2),
            },  # fmt: skip
            {
                "description": maybe_null,
                "language": text,
                "common_categories": st.dictionaries(names, names, max_size=2),
                "manifest": text,
                "missing_data_allowed": st.booleans(),
                "categories_total": counts,
                "data_quality": st.dictionaries(names, st.dictionaries(names, st.integers(1, 9), max_size=2), max_size=2),
            },  # fmt: skip
        ),
        "model": objects(
            {"model": text, "params": st.dictionaries(names, json_values, max_size=2)},
            {
                "revision": maybe_null,
                "api_base": maybe_null,
                "timeout": st.none() | numbers,
                "params_dropped": st.dictionaries(names, text, max_size=2),
                "params_ignored": st.dictionaries(names, text, max_size=2),
                "served": st.dictionaries(names, st.dictionaries(names, counts, max_size=2), max_size=2),
                "judge": st.dictionaries(names, json_values, max_size=2),
            },  # fmt: skip
        ),
        "run": objects(
            {
                "cases": counts,
                "calls": counts,
                "cache_hits": counts,
                "retries": counts,
                "errors": counts,
                "cost_usd": numbers,
                "complete": st.booleans(),
            },
            {
                "case_errors": counts,
                "incomplete_reason": maybe_null,
                "filtered": counts,
                "truncated": counts,
                "not_run": counts,
                "unpriced_calls": counts,
                "requests": counts,
                "shard": text,
                "batches": st.dictionaries(names, counts, max_size=2),
                "estimator": maybe_null,
                "estimator_note": maybe_null,
                "judge_calls": counts,
                "judge_cache_hits": counts,
                "rejudge": st.booleans(),
            },  # fmt: skip
        ),
        "metrics": objects({"overall": table, "by_category": tables, "by_label": tables, "by_prompt": tables}),
        "verdicts": st.lists(verdict, max_size=3),
        "passed": st.booleans(),
        "cases": st.lists(case, max_size=3),
    },
    {"judge_qualification": st.dictionaries(names, json_values, max_size=2), "scoring": st.dictionaries(names, text, max_size=2)},
)


@FAST
@given(results_documents)
def test_every_results_document_reads_and_writes_back_unchanged(document):
    record = RunRecord.from_json(document)
    assert results_text(record.to_json()) == results_text(document)
    assert record.passed is document["passed"]
    assert len(record.failed_checks) == sum(not v["passed"] and v.get("gated", True) for v in document["verdicts"])


baseline_documents = objects(
    {
        "schema": st.just("biascheck.baseline/1"),
        "tool": objects({"name": st.just("biascheck"), "version": text}),
        "created_at": text,
        "git_commit": maybe_null,
        "suite": objects(
            {
                "name": names,
                "benchmark": names,
                "fingerprint": st.dictionaries(names, text, max_size=3),
                "skipped_categories": st.dictionaries(names, text, max_size=2),
            },
            {"missing_data_allowed": st.booleans(), "categories_total": counts},
            extra=False,
        ),
        "model": objects(
            {"model": text, "params": st.dictionaries(names, json_values, max_size=2)},
            {"revision": maybe_null, "judge": st.none() | st.dictionaries(names, json_values, max_size=2), "estimator": maybe_null},
            extra=False,
        ),
        "bootstrap": st.fixed_dictionaries({"n_boot": counts, "seed": counts, "confidence": numbers}),
        "metrics": objects({"overall": table, "by_category": tables}, extra=False),
        "cases": st.fixed_dictionaries(
            {"columns": st.lists(names, max_size=3), "rows": st.lists(st.lists(scalars, max_size=3), min_size=1, max_size=3)}
        ),
        "digest": st.just("0" * 64),
    },
    {
        "regression": st.fixed_dictionaries({"rules": st.lists(text, max_size=2), "alpha": numbers}),
        "scoring": st.dictionaries(names, text, max_size=1),
        "verdicts": st.lists(
            objects(
                {"metric": names, "scope": names, "threshold": st.dictionaries(names, numbers, max_size=2), "passed": st.booleans()},
                {"gated": st.just(False)},
                extra=False,
            ),
            max_size=3,
        ),
    },
    extra=False,
)


@FAST
@given(baseline_documents)
def test_every_baseline_document_reads_and_writes_back_unchanged(document):
    record = BaselineRecord.from_json(document)
    assert results_text(record.to_json()) == results_text(document)
    expected = None if "verdicts" not in document else all(v["passed"] or v.get("gated") is False for v in document["verdicts"])
    assert record.passed is expected


flip = objects(
    {
        "case_id": text,
        "category": names,
        "context_type": maybe_null,
        "baseline": names,
        "candidate": names,
        "prompt": maybe_null,
        "answer": maybe_null,
    },
    {
        "baseline_answer": maybe_null,
        "correct_option": text,
        "stereotyped_option": text,
        "baseline_option": text,
        "candidate_option": text,
        "context": text,
        "question": text,
        "options": st.lists(text, max_size=3),
    },  # fmt: skip
)
side = objects({"value": st.none() | numbers, "ci": intervals, "n": counts})
check = objects(
    {
        "metric": names,
        "scope": names,
        "better": st.sampled_from(["lower", "higher", "zero"]),
        "rule": text,
        "rule_source": text,
        "margin": st.none() | numbers,
        "baseline": side,
        "candidate": side,
        "difference": st.none() | numbers,
        "difference_ci_unadjusted": intervals,
        "worsening": st.none() | numbers,
        "worsening_ci": intervals,
        "worsening_ci_unadjusted": intervals,
        "interval": st.none() | st.dictionaries(names, json_values, max_size=2),
        "p_value": st.none() | numbers,
        "p_adjusted": st.none() | numbers,
        "mcnemar": st.none() | st.dictionaries(names, json_values, max_size=2),
        "mde": st.none() | numbers,
        "cases_to_resolve": st.none() | counts,
        "verdict": st.sampled_from(VERDICTS),
        "explanation": text,
    },  # fmt: skip
    {"templates": counts, "cases": counts},
)
transitions = st.dictionaries(st.tuples(names, names).map(" -> ".join), st.integers(1, 9), max_size=3)
comparison_documents = objects(
    {
        "schema": st.just("biascheck.comparison/2"),
        "suite": objects({"name": names, "benchmark": names}, extra=False),
        "baseline": st.dictionaries(names, json_values, max_size=3),
        "candidate": st.dictionaries(names, json_values, max_size=3),
        "fingerprint": st.dictionaries(names, json_values, max_size=3),
        "warnings": st.lists(text, max_size=2),
        "cases": st.fixed_dictionaries({"baseline": counts, "candidate": counts, "common": counts}),
        "settings": st.dictionaries(names, json_values, max_size=3),
        "results": st.lists(check, max_size=3),
        "regressed": st.booleans(),
        "candidate_errors": counts,
        "passed": st.booleans(),
        "flips": objects(
            {
                "total": counts,
                "by_transition": transitions,
                "by_category": st.dictionaries(names, transitions, max_size=3),
                "examples": st.lists(flip, max_size=3),
                "limit": counts,
                "shown": counts,
                "file": st.none() | st.just("flips.jsonl"),
            },  # fmt: skip
        ),
    }
)


@FAST
@given(comparison_documents)
def test_every_comparison_document_of_schema_2_reads_and_writes_back_unchanged(document):
    record = Comparison.from_json(document)
    assert results_text(record.to_json()) == results_text(document)
    assert [c.metric for c in record.regressions] == [c["metric"] for c in document["results"] if c["verdict"] == "regressed"]
    assert [c.metric for c in record.inconclusive] == [c["metric"] for c in document["results"] if c["verdict"] == "inconclusive"]


@FAST
@given(st.lists(flip, max_size=4))
def test_flips_jsonl_lines_are_flip_records(lines):
    assert [Flip.from_json_line(line).to_json() for line in lines] == lines


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*path, index))
    return out


READERS = {
    "results.json": (RunRecord.from_json, results_documents),
    "baseline": (BaselineRecord.from_json, baseline_documents),
    "comparison.json": (Comparison.from_json, comparison_documents),
}


@FAST
@given(st.data())
def test_a_damaged_document_is_a_one_line_error_naming_the_field_never_a_traceback(data):
    """Any field of a document removed or replaced by any JSON value: the record is read, or the
    error is one line naming the file (the reader's default name) and the field."""
    where = data.draw(st.sampled_from(list(READERS)))
    read, documents = READERS[where]
    document = data.draw(documents)
    path = data.draw(st.sampled_from(_paths(document)[1:]))
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(json_values)
    try:
        read(document)
    except BiascheckError as error:
        assert "\n" not in str(error) and str(error).startswith(f"{where}: ") and error.field, str(error)
