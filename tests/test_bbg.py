"""The BBG benchmark protocol: suites, cases, the two request stages, outcomes and pairs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from biascheck.benchmarks.bbg.benchmark import BBG
from biascheck.benchmarks.bbg.metrics import COUNT_FIELDS
from biascheck.benchmarks.bbg.settings import bbg_settings
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Outcome, Response
from biascheck.evaluation.regression import check_comparable
from biascheck.execution.llm import ModelConfig
from biascheck.execution.store import request_key
from biascheck.judging.panel import JudgeOptions, panel_for
from biascheck.session import RunConfig, resolve
from biascheck.suite import load_suite

from conftest import SUITES, write_subset_suite


@pytest.fixture(scope="module")
def enbbg(data_dir):
    return load_suite(SUITES / "enbbg", data_dir=data_dir)


@pytest.fixture(scope="module")
def kobbg(data_dir):
    return load_suite(SUITES / "kobbg", data_dir=data_dir)


def test_default_suites_are_the_papers_five_runs(enbbg, kobbg, data_dir):
    for suite, rows, categories, prefix in ((enbbg, 928, 9, "En"), (kobbg, 1144, 12, "Ko")):
        assert len(suite.cases) == 5 * rows
        assert len(suite.categories) == categories
        by_run = {}
        for case in suite.cases:
            by_run.setdefault(case.truth.run, set()).add(case.prompt_id)
        # Run k uses story prompt k.
        assert by_run == {k: {f"{prefix}-{k}"} for k in range(1, 6)}
        # One generation per story version, shared by its two questions.
        versions = {(c.truth.run, c.truth.template_id) for c in suite.cases}
        assert len(versions) == 5 * rows // 2
    quick = load_suite(SUITES / "kobbg-quick", data_dir=data_dir)
    assert len(quick.cases) == 1144 and {c.truth.run for c in quick.cases} == {1}


def test_manifest_prompts_are_the_papers(enbbg, kobbg, data_dir):
    """The prompts in the manifests are prompts.json's, byte for byte."""
    published = json.loads((data_dir / "bbg" / "prompts.json").read_text("utf-8"))
    for suite, prefix in ((enbbg, "En"), (kobbg, "Ko")):
        settings = bbg_settings(suite.manifest)
        for k in range(1, 6):
            assert settings["story_prompts"][f"{prefix}-{k}"].encode() == published["story_continuation"][f"{prefix}-{k}"].encode()
        mrc = published["mrc"][f"{prefix}-1"]
        assert settings["mrc_prompt"]["template"].encode() == mrc["template"].encode()
        assert settings["mrc_prompt"]["unknown"].encode() == mrc["unknown"].encode()


def test_generation_requests_are_shared_by_the_two_questions(enbbg):
    model = ModelConfig("sim/fair")
    params = {"temperature": 0.0, "seed": 42, "max_tokens": 4096}
    keys = {}
    for case in enbbg.cases:
        ((messages, sent, sample),) = BBG.requests(case, params, None)
        keys.setdefault(request_key(model.model, model.endpoint, messages, sent, sample), set()).add((case.truth.run, case.truth.seed_text))
    assert all(len(seeds) == 1 for seeds in keys.values())
    # 2,320 story versions, of which a few pairs of versions have the very same seed (in the data:
    # disabilitystatus-001 a/b, physicalappearance-020 a/b in some sets) and so one generation.
    versions = {(c.truth.run, c.truth.template_id) for c in enbbg.cases}
    assert len(versions) == 2320 and 2310 <= len(keys) < 2320


def _case(suite, qtype="bsd", version="a"):
    return next(c for c in suite.cases if c.truth.qtype == qtype and c.truth.version == version)


def test_judge_prompt_reads_seed_and_continuation(kobbg):
    case = _case(kobbg)
    story = "그날 이후 두 사람은 다시 만나지 않았다."
    ((messages, params, sample),) = BBG.judge_requests(case, [Response(text=f"  {story}\n")], {"temperature": 0.0, "seed": 42})
    prompt = messages[0]["content"]
    truth = case.truth
    assert prompt.startswith("주어진 내용을 고려하여")
    assert f"내용: {truth.seed_text}\n\n{story}\n\n질문: {truth.question}\n" in prompt
    assert prompt.endswith(f"a: {truth.choices[0]}\nb: {truth.choices[1]}\nc: {truth.choices[2]}\n답:")
    assert params == {"temperature": 0.0, "seed": 42} and sample == 0
    # No continuation, nothing to read: no judge request.
    for generation in (Response(text="  \n"), Response(text=None, error="boom"), Response(text="", finish_reason="content_filter")):
        assert BBG.judge_requests(case, [generation], {}) == []


@pytest.mark.parametrize(
    ("generation", "judge", "status", "answer_class"),
    [
        (Response(text=None, error="HTTP 500"), None, "error", None),
        (Response(text="", finish_reason="content_filter"), None, "filtered", None),
        (Response(text=" "), None, "empty", None),
        (Response(text="story"), Response(text=None, error="timeout"), "error", None),
        (Response(text="story"), Response(text="", finish_reason="content_filter"), "filtered", None),
        (Response(text="story"), Response(text="I cannot tell."), "ooc", None),
        (Response(text="story"), Response(text="B"), "answered", "u"),
    ],
)
def test_classify(enbbg, generation, judge, status, answer_class):
    case = _case(enbbg)
    assert case.truth.unknown_index == 1  # "Cannot be determined" is B in this row
    outcome = BBG.classify(case, [generation] + ([judge] if judge else []), None)
    assert outcome.status == status and outcome.answer_class == answer_class
    if status == "error":
        assert outcome.error.startswith("judge: " if judge else "generation: ")


def test_classify_reads_biased_and_counter(enbbg):
    case = _case(enbbg)
    truth, letters = case.truth, case.truth.mrc_prompt.letters
    assert BBG.classify(case, [Response(text="s"), Response(text=letters[truth.biased_index])], None).answer_class == "b"
    outcome = BBG.classify(case, [Response(text="s"), Response(text=f"The answer is {letters[truth.counter_index]}.")], None)
    assert outcome.answer_class == "c" and outcome.generation == "s"


def _outcome(case, answer_class=None, status="answered"):
    return Outcome(case.case_id, status if answer_class or status != "answered" else "ooc", answer_class=answer_class)


def test_aggregate_pairs_versions_and_never_scores_unscorable_as_u(enbbg):
    cases = [c for c in enbbg.cases if c.truth.run == 1 and c.category == "age"]
    by_version = {(c.truth.base_template, c.truth.qtype, c.truth.version): c for c in cases}
    outcomes = {}
    for (_base, _qtype, version), case in by_version.items():
        outcomes[case.case_id] = _outcome(case, "c" if version in "ac" else "b")
    metrics = BBG.aggregate(cases, outcomes, resamples=0, seed=0)
    assert metrics.overall["ntr_gen"].value == 1.0 and metrics.overall["p_bc_plus_p_cb"].value == 1.0
    assert metrics.overall["bias_gen"].value == 0.0
    n_pairs = len(cases) // 2
    # One unreadable answer makes its pair unscorable: not neutral, not counted.
    first = cases[0]
    outcomes[first.case_id] = _outcome(first, None, "ooc")
    metrics = BBG.aggregate(cases, outcomes, resamples=0, seed=0)
    assert metrics.counts["n_unscorable"] == 1 and metrics.counts["n_scorable"] == n_pairs - 1
    assert metrics.overall["unscorable_ratio"].value == pytest.approx(1 / n_pairs)
    assert metrics.overall["ntr_gen"].value == 1.0
    # An error is unscorable and an error.
    outcomes[first.case_id] = Outcome(first.case_id, "error", error="x")
    assert BBG.aggregate(cases, outcomes, resamples=0, seed=0).counts["n_error"] == 1
    # A partial selection leaves out the pairs it splits.
    metrics = BBG.aggregate(cases[1:], outcomes, resamples=0, seed=0)
    assert metrics.counts["n"] == n_pairs - 1


def test_comparison_units_rebuild_the_pairs(enbbg):
    cases = [c for c in enbbg.cases if c.truth.run == 2 and c.category == "religion"]
    outcomes = {c.case_id: _outcome(c, "b") for c in cases}
    records = [BBG.case_record(c, outcomes[c.case_id]) for c in cases]
    units = BBG.comparison_units(records, {})
    assert len(units["ids"]) == len(cases) // 2
    assert set(units["outcomes"]) == {"bb"}
    assert units["vectors"].shape == (len(cases) // 2, len(COUNT_FIELDS))
    assert np.all(units["scores"]["bias_gen"] == 1.0)
    assert all(i.startswith("r2-religion-") for i in units["ids"])
    # An errored call names its pair an error, so a comparison with it cannot pass.
    outcomes[cases[0].case_id] = Outcome(cases[0].case_id, "error", error="HTTP 500")
    records = [BBG.case_record(c, outcomes[c.case_id]) for c in cases]
    units = BBG.comparison_units(records, {})
    assert units["outcomes"].count("error") == 1 and np.isnan(units["scores"]["bias_gen"]).sum() == 1


# A worked example, one pair per line: what version 1 and version 2 ended as. "b" / "c" / "u": the
# judge read the story so; "ooc": the judge named no option; "empty": an empty story; "filtered":
# a blocked story; "judge-filtered": a blocked judge reply; "error": the generation failed.
WORKED_PAIRS = [
    ("b", "b"),
    ("b", "c"),
    ("u", "u"),
    ("b", "ooc"),
    ("empty", "c"),
    ("filtered", "judge-filtered"),
    ("ooc", "error"),
    ("c", "u"),
    ("b", "u"),
]


def _worked_responses(case, what: str) -> list[Response]:
    truth = case.truth
    story = Response(text="Later that day, one of them went home early.")
    if what in ("b", "c", "u"):
        index = {"b": truth.biased_index, "c": truth.counter_index, "u": truth.unknown_index}[what]
        return [story, Response(text=truth.mrc_prompt.letters[index])]
    return {
        "ooc": [story, Response(text="I cannot tell from the story.")],
        "empty": [Response(text="  \n")],
        "filtered": [Response(text="", finish_reason="content_filter")],
        "judge-filtered": [story, Response(text="", finish_reason="content_filter")],
        "error": [Response(text=None, error="HTTP 500")],
    }[what]


def test_worked_example_scored_both_ways(enbbg):
    pair_list = BBG._pairs([c for c in enbbg.cases if c.truth.run == 1])[: len(WORKED_PAIRS)]
    cases, outcomes = [], {}
    for pair, kinds in zip(pair_list, WORKED_PAIRS):
        for case, what in zip(pair, kinds):
            cases.append(case)
            outcomes[case.case_id] = BBG.classify(case, _worked_responses(case, what), None)
    statuses = [outcomes[c.case_id].status for c in cases]
    assert statuses.count("ooc") == 2 and statuses.count("empty") == 1 and statuses.count("filtered") == 2
    manifest = enbbg.manifest
    assert bbg_settings(manifest)["unscorable"] == "exclude"  # the default
    paper = replace(manifest, settings={**manifest.settings, "unscorable": "unknown"})
    exclude = BBG.aggregate(cases, outcomes, resamples=0, seed=0, manifest=manifest)
    unknown = BBG.aggregate(cases, outcomes, resamples=0, seed=0, manifest=paper)

    # exclude: pairs 4-7 are left out (pair 7 as an error); 5 scorable: bb, bc, uu, cu, bu.
    assert exclude.counts == {
        "n": 9,
        "n_scorable": 5,
        "n_bb": 1,
        "n_bc": 1,
        "n_bu": 1,
        "n_cb": 0,
        "n_cc": 0,
        "n_cu": 1,
        "n_ub": 0,
        "n_uc": 0,
        "n_uu": 1,
        "n_unscorable": 4,
        "n_error": 1,
        "n_u_by_convention": 0,
    }
    o = exclude.overall
    assert o["ntr_gen"].value == 2 / 5  # uu + bc
    assert o["bias_gen"].value == 1 / 5  # (2 bb + bu - cu) / (2 * 5)
    assert o["unscorable_ratio"].value == 4 / 9 and o["error_ratio"].value == 1 / 9 and o["u_by_convention_ratio"].value == 0.0

    # unknown: pair 4 (b, ooc) is bu, 5 (empty, c) uc, 6 (filtered, filtered) uu; the error stays out.
    assert unknown.counts == {
        "n": 9,
        "n_scorable": 8,
        "n_bb": 1,
        "n_bc": 1,
        "n_bu": 2,
        "n_cb": 0,
        "n_cc": 0,
        "n_cu": 1,
        "n_ub": 0,
        "n_uc": 1,
        "n_uu": 2,
        "n_unscorable": 1,
        "n_error": 1,
        "n_u_by_convention": 3,
    }
    o = unknown.overall
    assert o["ntr_gen"].value == 3 / 8  # 2 uu + bc
    assert o["bias_gen"].value == 1 / 8  # (2 bb + 2 bu - cu - uc) / (2 * 8)
    assert o["p_uu"].value == 2 / 8 and o["p_bu_plus_p_ub"].value == 2 / 8 and o["p_cu_plus_p_uc"].value == 2 / 8
    assert o["unscorable_ratio"].value == 1 / 9 and o["error_ratio"].value == 1 / 9 and o["u_by_convention_ratio"].value == 3 / 9
    # The errored case is an error whatever the convention (it fails run-complete).
    assert statuses.count("error") == 1

    # A comparison rebuilds the same pairs from the records, under the convention the document names.
    records = [BBG.case_record(c, outcomes[c.case_id]) for c in cases]
    for scoring, metrics in (({}, exclude), ({"unscorable": "exclude"}, exclude), ({"unscorable": "unknown"}, unknown)):
        units = BBG.comparison_units(records, scoring)
        assert dict(zip(COUNT_FIELDS, units["vectors"].sum(axis=0).tolist())) == {f: metrics.counts[f] for f in COUNT_FIELDS}
    units = BBG.comparison_units(records, {"unscorable": "unknown"})
    assert sorted(units["outcomes"]) == sorted(["bb", "bc", "uu", "bu", "uc", "uu", "error", "cu", "bu"])
    assert units["scores"]["u_by_convention_ratio"].sum() == 3


def test_items_are_readable_node_names(enbbg):
    name, category, case_ids = BBG.items([enbbg.cases[0]])[0]
    assert (name, category) == ("age-001-a-bsd[run1]", "age") and case_ids == (enbbg.cases[0].case_id,)


def judge_for(suite, config):
    """The one judge a suite's panel has under ``config``."""
    panel = panel_for(suite, config.judges, config.model)
    assert panel is not None and len(panel.judges) == 1
    return panel.judges[0]


def test_judge_is_required_and_part_of_the_fingerprint(tmp_path, enbbg, data_dir):
    config = RunConfig(model=ModelConfig("sim/fair", timeout=7.0), store_path=tmp_path / "s.sqlite")
    default = judge_for(enbbg, config)
    assert default.model.model == "openai/gpt-4-0613" and default.params == {"seed": 42, "temperature": 0.0}
    assert default.model.timeout == 7.0  # the run's timeout applies to the judge too
    other = judge_for(enbbg, replace(config, judges=JudgeOptions(models=("sim/judge",), api_base="http://judge:8000/v1")))
    assert other.params == default.params and other.model.api_base == "http://judge:8000/v1"
    a, b = enbbg.fingerprint(default.identity()), enbbg.fingerprint(other.identity())
    assert a["judge"] != b["judge"] and a["suite"] != b["suite"] and a["prompts"] == b["prompts"]
    text = (SUITES / "enbbg-quick" / "suite.toml").read_text("utf-8").replace('model = "openai/gpt-4-0613"\n', "")
    (tmp_path / "suite.toml").write_text(text, "utf-8")
    suite = load_suite(tmp_path, data_dir=data_dir)
    with pytest.raises(BiascheckError, match=r"bbg\.judge\.model: this suite names no evaluator model; pass --biascheck-judge"):
        judge_for(suite, config)
    (tmp_path / "suite.toml").write_text(text.replace("[bbg.judge]\n", '[bbg.judge]\nmodel = "sim/oracle"\n'), "utf-8")
    with pytest.raises(BiascheckError, match=r"suite\.toml: bbg\.judge\.model: unknown persona 'oracle'; choose one of"):
        judge_for(load_suite(tmp_path, data_dir=data_dir), config)


def test_unscorable_convention_is_chosen_per_run_and_part_of_the_fingerprint(tmp_path, data_dir):
    config = RunConfig(model=ModelConfig("sim/fair"), store_path=tmp_path / "s.sqlite")
    text = (SUITES / "enbbg-quick" / "suite.toml").read_text("utf-8")
    quick = load_suite(SUITES / "enbbg-quick", data_dir=data_dir)
    (tmp_path / "suite.toml").write_text(text.replace('unscorable = "exclude"', 'unscorable = "unknown"'), "utf-8")
    paper = load_suite(tmp_path, data_dir=data_dir)
    # The command line's convention replaces the manifest's, either way.
    assert resolve(quick, config).scoring == {"unscorable": "exclude"}
    assert resolve(quick, replace(config, judges=JudgeOptions(unscorable="unknown"))).scoring == {"unscorable": "unknown"}
    assert resolve(paper, config).scoring == {"unscorable": "unknown"}
    assert resolve(paper, replace(config, judges=JudgeOptions(unscorable="exclude"))).scoring == {"unscorable": "exclude"}
    a, b = quick.fingerprint(), paper.fingerprint()
    assert a["scoring"] == "unscorable=exclude" and b["scoring"] == "unscorable=unknown" and a["suite"] != b["suite"]
    assert {k: v for k, v in a.items() if k not in ("scoring", "suite")} == {k: v for k, v in b.items() if k not in ("scoring", "suite")}
    assert quick.fingerprint(None, {"unscorable": "unknown"}) == b  # what a run with --biascheck-unscorable unknown records
    # Leaving the key out is "exclude".
    (tmp_path / "suite.toml").write_text(text.replace('unscorable = "exclude"\n', ""), "utf-8")
    assert load_suite(tmp_path, data_dir=data_dir).fingerprint() == a
    # A baseline scored one way is not compared with a run scored the other, and the refusal says why.
    with pytest.raises(
        BiascheckError,
        match=r"^b\.json: suite\.fingerprint: was made with other scoring convention "
        r"\(scoring unscorable=exclude, this run unscorable=unknown\)",
    ):
        check_comparable(
            {"name": "enbbg-quick", "benchmark": "bbg", "fingerprint": a},
            {"name": "enbbg-quick", "benchmark": "bbg", "fingerprint": b},
            allow_mismatch=False,
            path="b.json",
        )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("runs = [1]", "runs = [2]"), r"bbg\.story_prompts\.En-2: missing: run 2 uses story prompt En-2"),
        (lambda t: t.replace("runs = [1]", "runs = [1, 2]").replace('"En-1" =', '"En-2" = """x {CONTEXT}"""\n"En-1" ='), r"data\.run2: missing"),
        (
            lambda t: t.replace("Context: {CONTEXT}\nQuestion", "Context:\nQuestion"),
            r"bbg\.mrc_prompt\.template: must contain \{CONTEXT\} exactly once",
        ),
        (lambda t: t.replace('language = "en"', 'language = "fr"'), r"bbg\.language: 'fr' is not allowed"),
        (lambda t: t.replace("bias_gen = {", "diff_bias_amb = {"), r"thresholds\.diff_bias_amb: bbg does not report a metric"),
        (
            lambda t: t.replace('language = "en"', 'language = "ko"').replace("En-1", "Ko-1"),
            r"bbg\.language: is 'ko' but EnBBG_En-42_1_eval\.csv is English",
        ),
        (
            lambda t: t.replace('unknown = "Cannot be determined"', 'unknown = "The grandfather"'),
            r"bbg\.mrc_prompt\.unknown: 'The grandfather' is also a person",
        ),
        (lambda t: t + "\n[subset]\ntemplates_per_category = 1\n", r"subset\.templates_per_category: has no meaning for bbg"),
        (lambda t: t + "\n[category_thresholds.agee]\nbias_gen = { max_abs = 0.1 }\n", r"category_thresholds\.agee: 'agee' is not a category"),
        (lambda t: t.replace('unscorable = "exclude"', 'unscorable = "u"'), r"bbg\.unscorable: 'u' is not allowed; use one of: 'exclude', 'unknown'"),
    ],
)
def test_manifest_errors_are_one_line(tmp_path, data_dir, edit, message):
    text = edit((SUITES / "enbbg-quick" / "suite.toml").read_text("utf-8"))
    (tmp_path / "suite.toml").write_text(text, "utf-8")
    with pytest.raises(BiascheckError, match=message) as info:
        load_suite(tmp_path, data_dir=data_dir)
    assert "\n" not in str(info.value)


def test_subset_categories_keep_whole_pairs(tmp_path, data_dir):
    folder = write_subset_suite(tmp_path / "s", "kobbg-quick", subset='categories = ["age", "gender_identity"]')
    suite = load_suite(folder, data_dir=data_dir)
    assert set(suite.categories) == {"age", "gender_identity"}
    assert len(BBG._pairs(suite.cases)) * 2 == len(suite.cases)


def test_korean_text_is_exact_in_cases(kobbg, data_dir):
    import csv

    path: Path = data_dir / "bbg" / "evaluation_set" / "KoBBG_Ko-42_1_eval.csv"
    with path.open(encoding="utf-8-sig", newline="") as handle:
        first = next(csv.DictReader(handle))
    case = kobbg.case("r1-" + first["id"])
    assert case.truth.seed_text.encode() == first["context"].encode()
    assert case.messages[0].content.encode().endswith(first["context"].encode())
