"""Several judges: the judge stage reads every story with each judge, combines their readings
(majority, unanimous, primary), measures their agreement (Krippendorff's alpha) and gates on a
floor; one judge is what it always was.

The simulator's judges have known behaviour: ``sim/judge`` (any seed) reads what the story says,
``sim/random`` answers uniformly, ``sim/refuser`` names no option, and ``sim/judge?confusion=...``
misreads with a known confusion, its errors drawn per seed (two seeds err independently).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.bbg.judge_calibration import JudgeCalibration, prompt_fingerprint
from biascheck.benchmarks.bbg.metrics import COUNT_FIELDS, pair_cell
from biascheck.benchmarks.bbg.settings import bbg_settings
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Outcome
from biascheck.execution.llm import ModelConfig
from biascheck.judging.aggregate import DISAGREED, aggregate
from biascheck.judging.panel import JudgeOptions, panel_for
from biascheck.metrics.agreement import UNSCORABLE, alpha_with_interval, krippendorff_alpha, pair_table
from biascheck.records.run import RunRecord
from biascheck.reporting.decision import JUDGE_AGREEMENT, decide
from biascheck.reporting.results import build_results, validate_results
from biascheck.session import RunConfig, run
from biascheck.suite import load_suite

from conftest import SUITES, write_subset_suite

# A judge that misreads one story in five, its errors spread over the other two classes.
NOISY = "0.8,0.1,0.1,0.1,0.8,0.1,0.1,0.1,0.8"
# One that reads b and c right and every undetermined story as biased: it disagrees on one class.
U_AS_B = "1,0,0,0,1,0,1,0,0"


# --- Krippendorff's alpha -------------------------------------------------------------------------


def test_alpha_matches_krippendorffs_own_example():
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four
    observers, twelve units, missing values; nominal alpha 0.743."""
    n = None
    observers = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    units = [list(unit) for unit in zip(*observers)]
    assert round(krippendorff_alpha(units), 3) == 0.743
    assert krippendorff_alpha(units) == pytest.approx(0.743421052631579, abs=1e-15)


def test_alpha_of_a_small_table_by_hand():
    # Two judges, four stories: (b, b), (b, c), (c, c), (u, u). Coincidences: o_bb 2, o_bc = o_cb 1,
    # o_cc 2, o_uu 2; n_b 3, n_c 3, n_u 2, n 8. alpha = 1 - (n - 1) * 2 / (64 - 9 - 9 - 4) = 1 - 14/42.
    assert krippendorff_alpha([["b", "b"], ["b", "c"], ["c", "c"], ["u", "u"]], "bcu") == pytest.approx(2 / 3, abs=1e-15)
    # A unit one judge could not read is unpairable and left out, never a value.
    assert krippendorff_alpha([["b", "b"], ["b", "c"], ["c", "c"], ["u", "u"], ["b", None]], "bcu") == pytest.approx(2 / 3, abs=1e-15)
    # Always disagreeing, two classes: 1 - 3 * 4 / 8.
    assert krippendorff_alpha([["b", "c"], ["c", "b"]], "bc") == pytest.approx(-0.5)
    assert math.isnan(krippendorff_alpha([["b", None], [None, "c"]], "bcu"))  # nothing pairable: no number
    assert krippendorff_alpha([["u", "u"], ["u", "u"]], "bcu") == 1.0  # one class, all agreeing: agreement


readings = st.lists(st.lists(st.sampled_from(["b", "c", "u", None]), min_size=2, max_size=4), min_size=1, max_size=40)


@settings(max_examples=examples(300), deadline=None)
@given(readings)
def test_alpha_lies_in_minus_one_to_one_and_matches_an_independent_implementation(units):
    import krippendorff

    width = max(len(unit) for unit in units)
    units = [unit + [None] * (width - len(unit)) for unit in units]
    alpha = krippendorff_alpha(units, "bcu")
    pairable = [unit for unit in units if sum(v is not None for v in unit) >= 2]
    values = {v for unit in pairable for v in unit if v is not None}
    if not pairable:
        assert math.isnan(alpha)
        return
    assert -1.0 <= alpha <= 1.0
    if len(values) > 1:  # the package refuses a single value (biascheck calls it agreement, 1)
        code = {"b": 1.0, "c": 2.0, "u": 3.0}
        matrix = np.array([[code[v] if v is not None else np.nan for v in unit] for unit in pairable]).T
        assert alpha == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"), abs=1e-9)
    else:
        assert alpha == 1.0


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from("bcu"), min_size=2, max_size=60), st.integers(2, 4), st.randoms(use_true_random=False))
def test_alpha_is_one_for_identical_readings_and_blind_to_order_and_names(classes, judges, rng):
    units = [[c] * judges for c in classes]
    assert krippendorff_alpha(units, "bcu") == 1.0
    noisy = [[rng.choice("bcu") for _ in range(judges)] for _ in classes]
    alpha = krippendorff_alpha(noisy, "bcu")
    shuffled = rng.sample(noisy, len(noisy))
    assert krippendorff_alpha(shuffled, "bcu") == pytest.approx(alpha, abs=1e-12)  # units in any order
    assert krippendorff_alpha([list(reversed(u)) for u in noisy], "bcu") == pytest.approx(alpha, abs=1e-12)  # judges in any order
    renamed = [[{"b": "c", "c": "u", "u": "b"}[v] for v in u] for u in noisy]
    assert krippendorff_alpha(renamed, "bcu") == pytest.approx(alpha, abs=1e-12)  # nominal: names do not matter


def test_alpha_interval_resamples_stories_and_holds_the_estimate_for_one_story():
    units = [["b", "b"], ["b", "c"], ["c", "c"], ["u", "u"]] * 10
    alpha, (lo, hi), pairable = alpha_with_interval(units, [str(i // 2) for i in range(len(units))], "bcu", n_boot=500, seed=1)
    assert pairable == 40 and lo <= alpha <= hi and -1 <= lo and hi <= 1
    assert alpha_with_interval(units, ["one"] * len(units), "bcu", n_boot=200)[1] == pytest.approx((alpha, alpha))
    assert all(math.isnan(x) for x in alpha_with_interval(units, ["x"] * len(units), "bcu", n_boot=0)[1])


def test_a_pair_table_counts_what_each_judge_read():
    table = pair_table(["b", "b", None, "u"], ["b", "c", "u", None], "bcu")
    assert table["b"] == {"b": 1, "c": 1, "u": 0, UNSCORABLE: 0}
    assert table[UNSCORABLE]["u"] == 1 and table["u"][UNSCORABLE] == 1
    assert sum(sum(row.values()) for row in table.values()) == 4


# --- combining readings ---------------------------------------------------------------------------


def reading(cls: str | None, status: str = "answered") -> Outcome:
    if cls is None:
        return Outcome("case", status, raw="no option", error="judge: HTTP 500" if status == "error" else None)  # type: ignore[arg-type]
    return Outcome("case", "answered", answer={"b": 0, "c": 1, "u": 2}[cls], answer_class=cls, raw=cls.upper())


def test_majority_unanimous_and_primary_combine_readings():
    b, c, u, ooc = reading("b"), reading("c"), reading("u"), reading(None, "ooc")
    assert aggregate([b, b, c], "majority").answer_class == "b"
    assert aggregate([b, c], "majority").status == DISAGREED  # a tie
    assert aggregate([b, c, u], "majority").status == DISAGREED  # a split
    assert aggregate([b, ooc, ooc], "majority").status == DISAGREED  # one reading is no majority of three judges
    assert aggregate([b, b, ooc], "majority").answer_class == "b"  # an unreadable reply casts no vote
    assert aggregate([ooc, ooc], "majority").status == "ooc"  # none could read: the missing reading, scored by convention
    assert aggregate([b, b], "unanimous").answer_class == "b"
    assert aggregate([b, b, c], "unanimous").status == DISAGREED
    assert aggregate([b, ooc], "unanimous").status == DISAGREED
    assert aggregate([c, b, u], "primary", primary=1) == b
    failed = aggregate([b, reading(None, "error")], "majority", names=["A", "B"])
    assert failed.status == "error" and failed.error == "B: judge: HTTP 500"  # missing evidence, named
    assert aggregate([reading(None, "error"), b], "primary", primary=1) == b  # a check judge's failure does not erase the primary's


outcomes = st.lists(st.sampled_from(["b", "c", "u", None]), min_size=2, max_size=5)


@settings(max_examples=examples(300), deadline=None)
@given(outcomes, st.sampled_from(["majority", "unanimous"]), st.randoms(use_true_random=False))
def test_a_combined_reading_is_one_enough_judges_gave_and_blind_to_their_order(classes, rule, rng):
    judged = [reading(c) if c is not None else reading(None, "ooc") for c in classes]
    combined = aggregate(judged, rule)
    votes = [c for c in classes if c is not None]
    if combined.status == "answered":
        n = votes.count(combined.answer_class)
        assert n == len(classes) if rule == "unanimous" else 2 * n > len(classes)
    elif combined.status == "ooc":
        assert not votes
    else:
        assert combined.status == DISAGREED and votes
    shuffled = aggregate(rng.sample(judged, len(judged)), rule)
    assert (shuffled.status, shuffled.answer_class) == (combined.status, combined.answer_class)


def test_a_pair_the_judges_did_not_settle_is_unscorable_under_every_convention_and_no_error():
    for convention in ("exclude", "unknown"):
        vector = dict(zip(COUNT_FIELDS, pair_cell("b", None, unscorable=convention, disagreed=True).tolist()))
        assert vector["n_unscorable"] == 1 and vector["n_error"] == 0 and vector["n_u_by_convention"] == 0
        assert sum(vector[f"n_{t}"] for t in ("bb", "bc", "bu", "cb", "cc", "cu", "ub", "uc", "uu")) == 0


# --- the panel a run configures -------------------------------------------------------------------


def manifest_with(tmp_path: Path, judge_table: str, source: Path = SUITES / "enbbg-quick") -> Path:
    """A copy of the suite at ``source`` with its [bbg.judge] table replaced."""
    text = (source / "suite.toml").read_text("utf-8")
    start = text.index("[bbg.judge]\n")
    end = text.index("\n[", start + 1)
    folder = tmp_path / "suite"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.toml").write_text(text[:start] + "[bbg.judge]\n" + judge_table + "\n" + text[end:], "utf-8")
    return folder


@pytest.mark.data
def test_a_panel_that_cannot_work_is_refused_before_any_call(tmp_path, data_dir):
    model = ModelConfig("sim/fair")

    def panel(table: str, *models: str):
        return panel_for(load_suite(manifest_with(tmp_path, table), data_dir=data_dir), JudgeOptions(models=models), model)

    two = 'models = ["sim/judge", "sim/random"]\nsampling = { temperature = 0 }'
    found = panel(two + '\naggregation = "unanimous"\nmin_alpha = 0.6')
    assert [j.name for j in found.judges] == ["sim/judge", "sim/random"] and found.aggregation == "unanimous" and found.min_alpha == 0.6
    assert found.identity() == {
        "judges": [{"model": "sim/judge", "params": {"temperature": 0.0}}, {"model": "sim/random", "params": {"temperature": 0.0}}],
        "aggregation": "unanimous",
    }
    assert panel(two + '\naggregation = "primary"\nprimary = "sim/random"').primary == 1
    refusals = [
        (two + '\naggregation = "primary"', r"bbg\.judge\.primary: is missing: aggregation = \"primary\" needs the primary judge"),
        (
            two + '\naggregation = "primary"\nprimary = "sim/counter"',
            r"bbg\.judge\.primary: 'sim/counter' is not one of its judges \(sim/judge, sim/random\)",
        ),
        (two + '\nprimary = "sim/judge"', r"bbg\.judge\.primary: only applies to aggregation = \"primary\""),
        (
            'model = "sim/judge"\nmin_alpha = 0.6',
            r"bbg\.judge\.min_alpha: needs two or more judges to measure their agreement; this run has one \(sim/judge\)",
        ),
        (
            'model = "sim/judge"\nmodels = ["sim/random", "sim/judge"]',
            r"bbg\.judge\.models: is given beside model; name one judge in model or several in models",
        ),
        ('models = ["sim/judge", "sim/oracle"]', r"bbg\.judge\.models: unknown persona 'oracle'"),
        ("models = []", r"bbg\.judge\.models: empty; name at least one, or leave the key out"),
        ('models = ["sim/judge"]\nmin_alpha = 1.5', r"bbg\.judge\.min_alpha: 1\.5 is greater than the maximum of 1"),
        (
            'models = ["sim/judge"]\naggregation = "vote"',
            r"bbg\.judge\.aggregation: 'vote' is not allowed; use one of: 'majority', 'unanimous', 'primary'",
        ),
    ]
    for table, message in refusals:
        with pytest.raises(BiascheckError, match=message):
            panel(table)
    with pytest.raises(BiascheckError, match=r"--biascheck-judge: names the judge sim/judge twice; name each judge once"):
        panel(two, "sim/judge", "sim/judge")
    # One judge named on the command line: a suite's primary no longer applies; its floor still needs two.
    assert len(panel(two + '\naggregation = "primary"\nprimary = "sim/random"', "sim/judge").judges) == 1
    with pytest.raises(BiascheckError, match=r"min_alpha: needs two or more judges"):
        panel(two + "\nmin_alpha = 0.5", "sim/judge")


def test_judges_are_given_several_times_on_the_command_line_in_the_environment_or_the_ini_file(monkeypatch, tmp_path):
    import argparse

    from biascheck.options import add_command_options, command_settings, judge_options

    parser = argparse.ArgumentParser()
    add_command_options(parser)
    given = judge_options(command_settings(parser.parse_args(["--judge", "sim/judge", "--judge", f"sim/judge?confusion={NOISY}"])))
    assert given.models == ("sim/judge", f"sim/judge?confusion={NOISY}")
    monkeypatch.setenv("BIASCHECK_JUDGE", "sim/judge  sim/random\n")
    assert judge_options(command_settings(parser.parse_args([]))).models == ("sim/judge", "sim/random")
    assert judge_options(command_settings(parser.parse_args(["--judge", "sim/counter"]))).models == ("sim/counter",)  # the command line wins
    monkeypatch.setenv("BIASCHECK_JUDGE", "sim/judge sim/oracle")
    with pytest.raises(BiascheckError, match=r"^BIASCHECK_JUDGE: unknown persona 'oracle'"):
        judge_options(command_settings(parser.parse_args([])))
    monkeypatch.setenv("BIASCHECK_JUDGE", "sim/judge sim/judge")
    with pytest.raises(BiascheckError, match=r"^BIASCHECK_JUDGE: names the judge sim/judge twice"):
        judge_options(command_settings(parser.parse_args([])))


# --- runs through the simulator -------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path, data_dir: Path) -> Path:
    """EnBBG run 1, three categories: 108 MRC questions, 54 stories."""
    return write_subset_suite(tmp_path / "enbbg-small", "enbbg-quick", subset='categories = ["age", "religion", "ses"]')


def judged(suite_dir: Path, data_dir: Path, store: Path, *judges: str, model: str = "sim/stereotyped?p=0.3", **options) -> RunRecord:
    suite = load_suite(suite_dir, data_dir=data_dir)
    config = RunConfig(ModelConfig(model), store_path=store, data_dir=data_dir, judges=JudgeOptions(models=judges, **options))
    result = run([(suite, suite.cases)], config)
    (record,), _ = build_results(result)
    validate_results(record.to_json())
    assert RunRecord.from_json(json.loads(json.dumps(record.to_json()))) == record  # the file edge, both ways
    return record


@pytest.mark.data
def test_two_judges_that_agree_read_as_one_and_alpha_is_one(small, data_dir, tmp_path):
    store = tmp_path / "s.sqlite"
    one = judged(small, data_dir, store, "sim/judge")
    two = judged(small, data_dir, store, "sim/judge", "sim/judge?seed=7")
    assert one.judging is None and one.model.judges is None and all("readings" not in c.fields for c in one.cases)
    judging = two.judging
    assert judging is not None and judging.agreement.alpha == 1.0 and judging.agreement.ci == (1.0, 1.0) and judging.disagreed == 0
    assert judging.agreement.units == len(two.cases) and judging.agreement.stories == len({c.fields["template_id"] for c in two.cases})
    assert two.model.judge is None and [j["model"] for j in two.model.judges or ()] == ["sim/judge", "sim/judge?seed=7"]
    overall = {name: v.value for name, v in two.metrics.table("overall").items()}
    assert overall == {name: v.value for name, v in one.metrics.table("overall").items()}  # agreeing judges change nothing
    for judge in judging.judges:
        assert judge.metric("bias_gen").value == overall["bias_gen"] and judge.metric("ntr_gen").value == overall["ntr_gen"]
        assert judge.readings == judge.asked == len(two.cases) and judge.unreadable == 0
    assert judging.judges[0].calls == 0 and judging.judges[0].cache_hits > 0  # the first judge's readings were stored
    (pair,) = judging.agreement.pairs
    assert pair.agreed == pair.compared == len(two.cases) and sum(pair.table[c][c] for c in "bcu") == len(two.cases)
    frame = two.judges_df()
    assert list(frame["judge"].unique()) == ["sim/judge", "sim/judge?seed=7"] and set(frame["metric"]) == {"ntr_gen", "bias_gen"}
    assert (frame["alpha"] == 1.0).all() and one.judges_df().empty
    case = two.cases[0]
    assert [r["judge"] for r in case.fields["readings"]] == ["sim/judge", "sim/judge?seed=7"] and {r["outcome"] for r in case.fields["readings"]} == {
        case.outcome
    }
    # Another panel is another measurement: the fingerprints differ.
    assert one.suite.fingerprint["judge"] != two.suite.fingerprint["judge"] and one.suite.fingerprint["suite"] != two.suite.fingerprint["suite"]


@pytest.mark.data
def test_a_third_judge_added_to_a_recorded_run_is_the_only_one_called(small, data_dir, tmp_path):
    store = tmp_path / "s.sqlite"
    first = judged(small, data_dir, store, "sim/judge", f"sim/judge?confusion={NOISY}&seed=1")
    assert first.run.calls > first.run.judge_calls > 0
    again = judged(small, data_dir, store, "sim/judge", f"sim/judge?confusion={NOISY}&seed=1", f"sim/judge?confusion={NOISY}&seed=2")
    assert again.judging is not None
    calls = [judge.calls for judge in again.judging.judges]
    assert calls[:2] == [0, 0] and calls[2] > 0 and again.run.calls == again.run.judge_calls == calls[2]
    assert [j.metric("bias_gen") for j in again.judging.judges[:2]] == [j.metric("bias_gen") for j in (first.judging.judges if first.judging else ())]
    # Three judges err independently: some cases settle by majority that two could not.
    assert 0 < again.judging.disagreed < first.judging.disagreed if first.judging else False


@pytest.mark.data
def test_a_random_judge_brings_alpha_near_zero_and_a_floor_fails_the_run_with_its_reason(tmp_path, data_dir):
    suite_dir = manifest_with(tmp_path, 'models = ["sim/judge", "sim/random"]\nsampling = { temperature = 0, seed = 42 }\nmin_alpha = 0.6')
    record = judged(suite_dir, data_dir, tmp_path / "s.sqlite", model="sim/fair")
    judging = record.judging
    assert judging is not None and judging.min_alpha == 0.6 and judging.agreement_passed is False
    alpha = judging.agreement.alpha
    assert alpha is not None and abs(alpha) < 0.1 and judging.agreement.ci[0] <= alpha <= judging.agreement.ci[1]
    assert not record.passed and all(v.passed for v in record.verdicts if v.metric == "bias_gen" and v.scope == "overall")
    decision = decide(record)
    (failure,) = [check for check in decision.failed if check.kind == JUDGE_AGREEMENT]
    assert failure.reason.startswith(f"the judges disagree too much to gate on: Krippendorff's alpha {alpha:.4f}")
    assert "below min_alpha 0.6000" in failure.reason and decision.headline().startswith("FAILED:") and "judge agreement" in decision.headline()
    # The same judges with a floor they meet pass it.
    lenient = manifest_with(tmp_path / "lenient", 'models = ["sim/judge", "sim/random"]\nsampling = { temperature = 0, seed = 42 }\nmin_alpha = -0.5')
    assert judged(lenient, data_dir, tmp_path / "s.sqlite", model="sim/fair").judging.agreement_passed is True  # type: ignore[union-attr]


@pytest.mark.data
def test_judges_that_disagree_on_one_class_show_it_in_their_table(small, data_dir, tmp_path):
    record = judged(small, data_dir, tmp_path / "s.sqlite", "sim/judge", f"sim/judge?confusion={U_AS_B}", "sim/judge?seed=3")
    judging = record.judging
    assert judging is not None
    first, faithful, _ = judging.agreement.pairs  # (0, 1), (0, 2), (1, 2)
    assert first.judges == ("sim/judge", f"sim/judge?confusion={U_AS_B}")
    assert first.table["u"]["b"] > 0 and first.table["u"]["u"] == 0 and first.table["b"]["b"] > 0 and first.table["c"]["c"] > 0
    assert sum(first.table[a][b] for a in "bcu" for b in "bcu" if a != b) == first.table["u"]["b"]  # only the one class
    assert faithful.judges == ("sim/judge", "sim/judge?seed=3") and faithful.agreed == faithful.compared  # the two faithful judges agree
    # Majority of three: the faithful pair outvotes the misreading one everywhere.
    assert judging.disagreed == 0 and record.metrics.table("overall")["bias_gen"].value == judging.judges[0].metric("bias_gen").value
    assert judging.judges[1].metric("bias_gen").value > judging.judges[0].metric("bias_gen").value
    assert 0 < (judging.agreement.alpha or 0) < 1


@pytest.mark.data
def test_a_judge_that_reads_nothing_never_counts_as_a_reading(small, data_dir, tmp_path):
    record = judged(small, data_dir, tmp_path / "s.sqlite", "sim/judge", "sim/refuser")
    judging = record.judging
    assert judging is not None
    judge, refuser = judging.judges
    assert refuser.readings == 0 and refuser.unscorable == {"ooc": refuser.asked} and judge.unreadable == 0
    assert refuser.metric("bias_gen").value is None  # no scorable pair: no number, never "unbiased"
    assert judging.agreement.units == 0 and judging.agreement.alpha is None
    # Majority of two: one reading is no majority, so every case is unsettled, none read as u.
    assert judging.disagreed == len(record.cases) and record.metrics.table("overall")["unscorable_ratio"].value == 1.0
    # With the faithful judge as primary, the refuser is a check only: the metrics are its alone.
    table = 'models = ["sim/judge", "sim/refuser"]\nsampling = { temperature = 0, seed = 42 }\naggregation = "primary"\nprimary = "sim/judge"'
    primary = judged(manifest_with(tmp_path / "primary", table, small), data_dir, tmp_path / "s.sqlite")
    alone = judged(small, data_dir, tmp_path / "s.sqlite", "sim/judge")
    assert primary.judging is not None and primary.judging.primary == "sim/judge" and primary.judging.disagreed == 0
    assert primary.run.calls == 0 and alone.judging is None  # every reading was stored by the first run
    assert {n: v.value for n, v in primary.metrics.table("overall").items()} == {n: v.value for n, v in alone.metrics.table("overall").items()}


def calibration_file(path: Path, judge: str, suite_dir: Path, counts=((80, 12, 8), (10, 85, 5), (9, 6, 85))) -> Path:
    from biascheck.config.manifest import load_manifest

    settings = bbg_settings(load_manifest(suite_dir / "suite.toml"))
    calibration = JudgeCalibration(counts, judge, prompt_fingerprint(settings["mrc_prompt"]), "en", "2026-12-01")
    path.write_text(json.dumps(calibration.to_json()), "utf-8")
    return path


@pytest.mark.data
def test_each_judge_is_corrected_with_its_own_calibration_and_a_majority_is_not(small, data_dir, tmp_path):
    noisy = f"sim/judge?confusion={NOISY}&seed=1"
    first, second = (
        calibration_file(tmp_path / "a.json", "sim/judge", small),
        calibration_file(tmp_path / "b.json", noisy, small, ((90, 5, 5), (5, 90, 5), (5, 5, 90))),
    )
    record = judged(small, data_dir, tmp_path / "s.sqlite", "sim/judge", noisy, calibrations=(second, first))  # any order: matched by judge
    judging = record.judging
    assert judging is not None and [j.calibration is not None for j in judging.judges] == [True, True]
    assert judging.judges[0].calibration != judging.judges[1].calibration
    assert judging.judges[0].metric("bias_gen_corrected") is not None and "calibration" not in (record.scoring or {})
    assert "bias_gen_corrected" not in record.metrics.table("overall")  # a majority of judges has no confusion matrix
    # The same judge alone, with the same calibration, gives the same corrected figure.
    alone = judged(small, data_dir, tmp_path / "s.sqlite", "sim/judge", calibrations=(first,))
    assert alone.metrics.table("overall")["bias_gen_corrected"].value == judging.judges[0].metric("bias_gen_corrected").value
    with pytest.raises(BiascheckError, match=r"is a calibration for judge model 'sim/random', not one of this run's judges"):
        judged(small, data_dir, tmp_path / "s.sqlite", "sim/judge", noisy, calibrations=(calibration_file(tmp_path / "c.json", "sim/random", small),))
    with pytest.raises(BiascheckError, match=r"gives two calibrations for the judge sim/judge"):
        judged(
            small,
            data_dir,
            tmp_path / "s.sqlite",
            "sim/judge",
            noisy,
            calibrations=(first, calibration_file(tmp_path / "d.json", "sim/judge", small)),
        )


# --- through pytest -------------------------------------------------------------------------------


@pytest.mark.data
def test_pytest_with_two_judges_reports_each_judge_the_aggregate_and_alpha(run_biascheck, small, tmp_path):
    args = ("--biascheck-judge", "sim/judge", "--biascheck-judge", f"sim/judge?confusion={NOISY}&seed=1")
    result = run_biascheck(small, "sim/stereotyped?p=0.3", *args)
    assert result.ret == 1, result.output  # the suite's bias_gen threshold
    document = result.results()
    judging = document["judging"]
    alpha = judging["agreement"]["alpha"]
    assert 0.3 < alpha < 0.95 and [j["model"] for j in judging["judges"]] == ["sim/judge", f"sim/judge?confusion={NOISY}&seed=1"]
    terminal = " ".join(result.output.split())
    assert f"judge agreement: Krippendorff's alpha {alpha:.4f}" in terminal
    for judge in judging["judges"]:
        assert f"judge {judge['model']} (seed=42, temperature=0.0): ntr_gen {judge['metrics']['ntr_gen']['value']:.4f}" in terminal
    assert f"{judging['disagreed']} cases the judges did not settle (majority)" in terminal
    report = (result.report_dir / "report.md").read_text("utf-8")
    assert "## Judges" in report and f"Krippendorff's alpha {alpha:.4f}" in report and "### Where the judges disagree" in report
    assert "| judge | calls | cache hits | read | read as nothing | ntr_gen | bias_gen |" in report
    page = (result.report_dir / "report.html").read_text("utf-8")
    assert '<section id="judges">' in page and "Where the judges disagree" in page and f"{alpha:.4f}" in page
    # The item of a case the judges did not settle says so.
    assert "JUDGES DISAGREE" in result.output or "disagreed" in result.output


@pytest.mark.data
def test_disagreement_examples_cover_the_categories(small, data_dir, tmp_path):
    from biascheck.reporting.results import disagreements

    record = judged(small, data_dir, tmp_path / "s.sqlite", "sim/judge", "sim/random")
    shown = disagreements(record, limit=6)
    assert len(shown) == 6 and {d.category for d in shown} == {"age", "religion", "ses"}
    assert [d.category for d in shown[:3]] == ["age", "religion", "ses"]  # round robin, not the first category's six
    for example in shown:
        assert example.question and example.text and len({outcome for _, outcome, _ in example.readings}) == 2
    assert disagreements(replace(record, judging=None)) == []


@pytest.mark.data
def test_the_judge_agreement_item_fails_below_the_floor_and_passes_above_it(run_biascheck, small, tmp_path):
    table = 'models = ["sim/judge", "sim/random"]\nsampling = { temperature = 0, seed = 42 }\nmin_alpha = '
    strict = manifest_with(tmp_path / "strict", table + "0.6", small)
    result = run_biascheck(strict, "sim/fair", report="strict-report")
    assert result.ret == 1 and "FAILED" in result.output and "suite.toml::judge-agreement" in result.output, result.output
    assert "the judges disagree too much to gate on: Krippendorff's alpha" in result.failures
    report = (result.report_dir / "report.md").read_text("utf-8")
    decision = report.split("## ", 1)[0]
    assert "| judge agreement |" in decision and decision.index("judge agreement") < decision.index("| threshold |")
    lenient = run_biascheck(manifest_with(tmp_path / "lenient", table + "-0.9", small), "sim/fair", "-rA", report="lenient-report")
    assert "PASSED" in lenient.output and "suite.toml::judge-agreement" in lenient.output, lenient.output
    # Without a floor there is no such item.
    plain = run_biascheck(small, "sim/fair", "--biascheck-judge", "sim/judge", "--biascheck-judge", "sim/random", "--co", report="plain")
    assert "judge-agreement" not in plain.output and "run-complete" in plain.output


@pytest.mark.data
def test_a_run_of_several_judges_is_exported_for_labelling_one_judge_at_a_time(run_biascheck, small, tmp_path, data_dir, capsys):
    from biascheck.cli import main

    noisy = f"sim/judge?confusion={NOISY}&seed=1"
    result = run_biascheck(small, "sim/stereotyped?p=0.3", "--biascheck-judge", "sim/judge", "--biascheck-judge", noisy, report="run")
    assert result.ret in (0, 1), result.output
    capsys.readouterr()
    common = ["judge", "export", str(small), "--run", str(result.report_dir), "--data", str(data_dir), "--n", "60"]
    assert main([*common, "--out", str(tmp_path / "a.csv")]) == 2
    assert "--judge: the run was read by 2 judges (sim/judge, " in capsys.readouterr().err
    assert main([*common, "--out", str(tmp_path / "a.csv"), "--judge", "sim/random"]) == 2
    assert "--judge: 'sim/random' is not one of the run's judges" in capsys.readouterr().err
    assert main([*common, "--out", str(tmp_path / "b.csv"), "--judge", noisy]) == 0
    key = [json.loads(line) for line in (tmp_path / "b.csv.key.jsonl").read_text("utf-8").splitlines()]
    readings = {c["case_id"]: next(r["outcome"] for r in c["readings"] if r["judge"] == noisy) for c in result.results()["cases"]}
    assert key and all(row["judge_answer"] == readings[row["case_id"]] for row in key)  # that judge's answers, not the combined ones
    assert noisy in (tmp_path / "b.csv").read_text("utf-8")  # the judge column names whose readings these are


@pytest.mark.data
def test_the_dry_run_prices_each_judge(small, data_dir, tmp_path):
    from biascheck.dryrun import estimate

    suite = load_suite(small, data_dir=data_dir)
    config = RunConfig(
        ModelConfig("sim/fair"), store_path=tmp_path / "none.sqlite", data_dir=data_dir, judges=JudgeOptions(models=("sim/judge", "sim/random"))
    )
    (estimate_of_suite,) = estimate([(suite, suite.cases)], config, store=None, price=False)
    model, *judges = estimate_of_suite.shares
    assert [share.role for share in judges] == ["judge", "judge"] and [share.model.model for share in judges] == ["sim/judge", "sim/random"]
    assert judges[0].calls == judges[1].calls == len(suite.cases)


@pytest.mark.data
def test_a_baseline_of_two_judges_gates_a_run_of_the_same_two_and_refuses_one_judge(run_biascheck, small, tmp_path):
    judges = ("--biascheck-judge", "sim/judge", "--biascheck-judge", f"sim/judge?confusion={NOISY}&seed=1")
    pattern = str(tmp_path / "baselines" / "{suite}.json")
    recorded = run_biascheck(small, "sim/stereotyped?p=0.1", *judges, "--biascheck-update-baseline", "--biascheck-baseline", pattern, report="record")
    assert recorded.ret in (0, 1), recorded.output
    baseline = json.loads(next((tmp_path / "baselines").glob("*.json")).read_text("utf-8"))
    assert baseline["model"]["judge"] is None and [j["model"] for j in baseline["model"]["judges"]] == [
        "sim/judge",
        f"sim/judge?confusion={NOISY}&seed=1",
    ]
    worse = run_biascheck(small, "sim/stereotyped?p=0.7", *judges, "--biascheck-baseline", pattern, report="worse")
    comparison = json.loads((worse.report_dir / "comparison.json").read_text("utf-8"))
    assert worse.ret == 1 and any(c["verdict"] == "regressed" and c["metric"] == "bias_gen" for c in comparison["results"]), worse.output
    refused = run_biascheck(small, "sim/stereotyped?p=0.7", "--biascheck-judge", "sim/judge", "--biascheck-baseline", pattern, report="refused")
    assert refused.ret != 0 and "suite.fingerprint: was made with other evaluator model or parameters" in refused.output, refused.output


@pytest.mark.data
def test_rejudging_with_two_judges_calls_only_the_judges_and_qualifies_each(run_biascheck, small, tmp_path):
    first = run_biascheck(small, "sim/stereotyped?p=0.3", "--biascheck-judge", "sim/judge", report="first")
    assert first.ret in (0, 1), first.output
    folder = small.parent / "qualified"
    text = (small / "suite.toml").read_text("utf-8").replace('suite = "../bbq"', f'suite = "{(SUITES / "bbq").as_posix()}"\ncases = 40')
    folder.mkdir()
    (folder / "suite.toml").write_text(text, "utf-8")
    again = run_biascheck(
        folder, "sim/stereotyped?p=0.3", "--biascheck-judge", "sim/judge", "--biascheck-judge", "sim/stereotyped?p=0.3",
        "--biascheck-rejudge", "--biascheck-qualify-judge", report="again",
    )  # fmt: skip
    document = again.results()
    judging = document["judging"]
    # No generation is made: the calls are the judges' (each one's qualification counted in its own).
    assert document["run"]["rejudge"] is True and document["run"]["calls"] == document["run"]["judge_calls"] > 0
    assert judging["judges"][1]["calls"] > judging["judges"][0]["calls"] > 0  # the stored readings of sim/judge are not asked again
    qualified = [judge["qualification"]["qualified"] for judge in judging["judges"]]
    assert qualified == [True, False] and "judge_qualification" not in document
    terminal = " ".join(again.output.split())
    assert "WARNING: judge sim/stereotyped?p=0.3 reads disambiguated contexts with accuracy" in terminal
