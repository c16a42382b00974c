"""BBG through pytest and the sim server: generation by the model under test, reading by the judge.

The sim's generators continue each story in a known way and the sim judge reads what they wrote,
so the expected pair types are known (``expected_pair_distribution``): ``fair`` gives only
neutral pairs, ``stereotyped?p=1`` only bb.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from rich.cells import cell_len

from biascheck.benchmarks.bbg.benchmark import BBG
from biascheck.core.errors import BiascheckError
from biascheck.evaluation.regression import check_comparable
from biascheck.execution.llm import ModelConfig
from biascheck.judging.panel import JudgeOptions
from biascheck.records.run import RunRecord
from biascheck.reporting.terminal import render_terminal
from biascheck.session import RunConfig, run
from biascheck.suite import load_suite

from conftest import SUITES, write_subset_suite

pytestmark = pytest.mark.data
HANGUL = re.compile("[\uac00-\ud7a3]")


@pytest.fixture
def enbbg_small(tmp_path: Path, data_dir: Path) -> Path:
    """EnBBG run 1, two categories: 76 MRC questions (38 story versions, 38 pairs)."""
    return write_subset_suite(tmp_path / "enbbg-small", "enbbg-quick", subset='categories = ["age", "religion"]')


@pytest.fixture
def kobbg_small(tmp_path: Path, data_dir: Path) -> Path:
    return write_subset_suite(tmp_path / "kobbg-small", "kobbg-quick", subset='categories = ["age", "gender_identity"]')


def test_fair_passes_with_neutral_pairs_and_the_report_shows_bbg_metrics(run_biascheck, enbbg_small, data_dir):
    run = run_biascheck(enbbg_small, "sim/fair", "--biascheck-judge", "sim/judge", "-vv")  # -q is given too
    assert run.ret == 0, run.output
    results = run.results()
    n_cases = len(load_suite(enbbg_small, data_dir=data_dir).cases)
    generations = len({c["template_id"] for c in results["cases"]})
    assert results["run"]["calls"] == generations + n_cases and results["run"]["judge_calls"] == n_cases
    assert results["model"]["judge"]["model"] == "sim/judge"
    assert results["model"]["judge"]["params"] == {"seed": 42, "temperature": 0.0}
    assert results["model"]["params"] == {"max_tokens": 4096, "seed": 42, "temperature": 0.0}
    assert "judge" in results["suite"]["fingerprint"]
    overall = results["metrics"]["overall"]
    assert overall["ntr_gen"]["value"] == 1.0 and overall["bias_gen"]["value"] == 0.0
    assert overall["p_uu"]["value"] + overall["p_bc_plus_p_cb"]["value"] == 1.0
    assert {c["outcome"] for c in results["cases"]} <= {"u", "b", "c"}
    # Every case item says what the judge read; the node ids name template, version and question.
    assert "cases::age::age-001-a-bsd[run1]" in run.output
    assert "U (UNDETERMINED)" in run.output or "B (BIASED)" in run.output
    report = (run.report_dir / "report.md").read_text("utf-8")
    for text in ("ntr_gen", "bias_gen", "p_uu", "p_bc_plus_p_cb", "p_bb", "## By category", "| religion |", "judged by sim/judge"):
        assert text in report
    for text in ("ntr_gen", "bias_gen", "p_bb", "by category", "judged by sim/judge"):
        assert text in run.output


def test_stereotyped_fails_the_bias_gen_threshold(run_biascheck, enbbg_small):
    run = run_biascheck(enbbg_small, "sim/stereotyped?p=1", "--biascheck-judge", "sim/judge")
    assert run.ret == 1, run.output
    overall = run.results()["metrics"]["overall"]
    assert overall["bias_gen"]["value"] == 1.0 and overall["p_bb"]["value"] == 1.0
    assert "bias_gen (overall) = 1" in run.failures and "FAILS threshold |x| <= 0.2" in run.failures


def test_rejudge_makes_only_judge_calls(run_biascheck, enbbg_small, tmp_path):
    first = run_biascheck(enbbg_small, "sim/stereotyped?p=0.5", "--biascheck-judge", "sim/judge", report="first")
    assert first.ret in (0, 1), first.output
    n_cases = len(first.results()["cases"])
    again = run_biascheck(enbbg_small, "sim/stereotyped?p=0.5", "--biascheck-judge", "sim/random", "--biascheck-rejudge", report="again")
    results = again.results()
    assert results["run"]["judge_calls"] == n_cases and results["run"]["calls"] == n_cases, again.output
    assert results["run"]["rejudge"] is True and results["model"]["judge"]["model"] == "sim/random"
    # The same stories, read by another judge.
    before = {c["case_id"]: c["generation"] for c in first.results()["cases"]}
    assert {c["case_id"]: c["generation"] for c in results["cases"]} == before


def test_rejudge_of_nothing_stored_errors_without_a_call(enbbg_small, tmp_path, data_dir):
    suite = load_suite(enbbg_small, data_dir=data_dir)
    config = RunConfig(
        model=ModelConfig("sim/fair"),
        judges=JudgeOptions(models=("sim/judge",), rejudge=True),
        store_path=tmp_path / "empty.sqlite",
        data_dir=data_dir,
    )
    result = run([(suite, suite.cases)], config)
    assert result.stats.calls == 0 and not result.passed
    errors = {o.error for o in result.suites[0].outcomes.values()}
    assert errors == {"generation: not in the response store (--biascheck-rejudge calls only the judge; run once without it)"}
    assert result.suites[0].metrics.overall["unscorable_ratio"].value == 1.0


def test_korean_is_byte_exact_through_store_results_and_reports(run_biascheck, kobbg_small, data_dir, tmp_path):
    store = tmp_path / "ko.sqlite"
    run = run_biascheck(kobbg_small, "sim/stereotyped?p=0.5", "--biascheck-judge", "sim/judge", store_path=store)
    assert run.ret in (0, 1), run.output
    suite = load_suite(kobbg_small, data_dir=data_dir)
    records = {c["case_id"]: c for c in run.results()["cases"]}
    with sqlite3.connect(store) as db:
        stored = {text for (text,) in db.execute("SELECT text FROM responses")}
        requests = [request for (request,) in db.execute("SELECT request FROM responses")]
    for case in suite.cases:
        record = records[case.case_id]
        assert record["question"].encode() == case.truth.question.encode()
        assert record["generation"] in stored and record["generation"].isascii() is False
        assert any(case.truth.seed_text in request for request in requests)
    report = (run.report_dir / "report.md").read_text("utf-8")
    examples = [line for line in report.splitlines() if line.startswith("| r1-")]
    assert examples and all(records_question_in(line, records) for line in examples)
    # The terminal table holds Korean questions and stays aligned: every line of it is as wide.
    text = render_terminal([RunRecord.from_json(run.results())], color=False, width=120)
    lines = []
    for line in text.split("read as biased in both versions (first pairs)")[1].splitlines()[1:]:
        lines.append(line)
        if line.startswith("└"):
            break
    assert any(HANGUL.search(line) for line in lines)
    assert len({cell_len(line) for line in lines}) == 1, lines


def records_question_in(line: str, records: dict) -> bool:
    return any(record["question"] in line for record in records.values())


def test_bbg_pair_types_recover_the_personas_expectation(run_biascheck, data_dir, tmp_path):
    """Over the whole quick EnBBG suite, each pair-type proportion is within its 95% interval of
    the persona's known expectation."""
    from biascheck.sim.personas import parse_persona
    from biascheck.sim.stories import expected_pair_distribution

    persona = "stereotyped?p=0.3"
    run = run_biascheck(SUITES / "enbbg-quick", f"sim/{persona}", "--biascheck-judge", "sim/judge")
    results = run.results()
    suite = load_suite(SUITES / "enbbg-quick", data_dir=data_dir)
    expected: dict[str, float] = {}
    pairs = BBG._pairs(suite.cases)
    for first, second in pairs:
        for kind, p in expected_pair_distribution(parse_persona(persona), first.truth, second.truth).items():
            expected[kind] = expected.get(kind, 0.0) + p / len(pairs)
    overall = results["metrics"]["overall"]
    for metric, kinds in (
        ("p_uu", ("uu",)),
        ("p_bc_plus_p_cb", ("bc", "cb")),
        ("p_bb", ("bb",)),
        ("p_bu_plus_p_ub", ("bu", "ub")),
        ("p_cc", ("cc",)),
    ):
        truth = sum(expected.get(k, 0.0) for k in kinds)
        lo, hi = overall[metric]["ci"]
        assert lo - 1e-12 <= truth <= hi + 1e-12, (metric, truth, overall[metric])
    assert overall["bias_gen"]["ci"][0] <= 0.3 <= overall["bias_gen"]["ci"][1]


def test_baseline_round_trip_and_a_regression_in_bias_gen(run_biascheck, enbbg_small, tmp_path):
    pattern = str(tmp_path / "baselines" / "{suite}.json")
    record = run_biascheck(
        enbbg_small,
        "sim/stereotyped?p=0.1",
        "--biascheck-judge",
        "sim/judge",
        "--biascheck-baseline",
        pattern,
        "--biascheck-update-baseline",
        report="record",
    )
    assert record.ret == 0, record.output
    baseline = json.loads((tmp_path / "baselines" / "enbbg-quick.json").read_text("utf-8"))
    assert baseline["model"]["judge"]["model"] == "sim/judge" and "judge" in baseline["suite"]["fingerprint"]
    assert baseline["cases"]["columns"] == list(BBG.record_columns)
    same = run_biascheck(enbbg_small, "sim/stereotyped?p=0.1", "--biascheck-judge", "sim/judge", "--biascheck-baseline", pattern, report="same")
    assert same.ret == 0, same.output
    worse = run_biascheck(enbbg_small, "sim/stereotyped?p=0.6", "--biascheck-judge", "sim/judge", "--biascheck-baseline", pattern, report="worse")
    assert worse.ret == 1
    assert "regression::overall::bias_gen" in worse.output and "bias_gen (overall) regressed" in " ".join(worse.output.split())
    # Another judge is another measurement: not compared unless asked to.
    fingerprint = dict(baseline["suite"]["fingerprint"], judge="0" * 16)
    with pytest.raises(BiascheckError, match="was made with other evaluator model or parameters"):
        check_comparable(baseline["suite"], {**baseline["suite"], "fingerprint": fingerprint}, allow_mismatch=False, path="b.json")


def test_unscorable_convention_reaches_results_the_fingerprint_and_the_baseline(run_biascheck, tmp_path):
    """Scored the paper's way, with a judge that now and then rambles without naming an option."""
    suite = write_subset_suite(tmp_path / "enbbg-religion", "enbbg-quick", subset='categories = ["religion"]')
    judge = "sim/judge?fail_rate=0.3&faults=freetext"
    pattern = str(tmp_path / "baselines" / "{suite}.json")
    paper = run_biascheck(
        suite,
        "sim/fair",
        "--biascheck-judge",
        judge,
        "--biascheck-unscorable",
        "unknown",
        "--biascheck-baseline",
        pattern,
        "--biascheck-update-baseline",
    )
    assert paper.ret in (0, 1), paper.output
    results = paper.results()
    assert results["scoring"] == {"unscorable": "unknown"} and results["suite"]["fingerprint"]["scoring"] == "unscorable=unknown"
    baseline = json.loads((tmp_path / "baselines" / "enbbg-quick.json").read_text("utf-8"))
    assert baseline["scoring"] == {"unscorable": "unknown"} and baseline["suite"]["fingerprint"] == results["suite"]["fingerprint"]
    # The pair counts, from the question records: an ooc reading is u, and no call errored.
    readings: dict[str, list[str]] = {}
    for case in sorted(results["cases"], key=lambda c: c["version"]):
        readings.setdefault(case["pair"], []).append("u" if case["outcome"] == "ooc" else case["outcome"])
    with_ooc = len({c["pair"] for c in results["cases"] if c["outcome"] == "ooc"})
    neutral = sum("".join(kinds) in ("uu", "bc", "cb") for kinds in readings.values())
    assert {c["outcome"] for c in results["cases"]} <= {"b", "c", "u", "ooc"} and with_ooc > 0
    counts, overall = results["metrics"]["counts"], results["metrics"]["overall"]
    assert counts["n"] == len(readings) and counts["n_unscorable"] == 0 and counts["n_u_by_convention"] == with_ooc
    assert overall["unscorable_ratio"]["value"] == 0.0 and overall["u_by_convention_ratio"]["value"] == with_ooc / len(readings)
    assert overall["ntr_gen"]["value"] == neutral / len(readings)
    report = (paper.report_dir / "report.md").read_text("utf-8")
    assert f"unscorable = unknown (as the paper): {with_ooc} of {len(readings)} pairs scored" in report
    # Scored biascheck's way (here from the ini key), the run is another measurement: refused, saying why.
    refused = run_biascheck(
        suite, "sim/fair", "--biascheck-judge", judge, "-o", "biascheck_unscorable=exclude", "--biascheck-baseline", pattern, report="refused"
    )
    assert refused.ret in (2, 4), refused.output
    assert "suite.fingerprint: was made with other scoring convention (scoring unscorable=unknown, this run unscorable=exclude)" in refused.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--biascheck-judge", "sim/oracle"), "--biascheck-judge: unknown persona 'oracle'; choose one of"),
        (("--biascheck-judge", "sim/judge", "--biascheck-judge-price", "cheap"), "--biascheck-judge-price: 'cheap' is not INPUT/OUTPUT"),
        (
            ("--biascheck-judge", "sim/judge", "--biascheck-unscorable", "paper"),
            "--biascheck-unscorable: 'paper' is not a convention; use exclude or unknown",
        ),
    ],
)
def test_bad_judge_options_are_one_line_usage_errors(run_biascheck, enbbg_small, args, message):
    run = run_biascheck(enbbg_small, "sim/fair", *args)
    assert run.ret == 4 and message in run.output and "Traceback" not in run.output
