"""Does the judge correction work? BBG on the simulator, whose stories' true readings are known.

Each seed draws one BBG run exactly as the simulated server answers it (bbg_outcome: the
generator persona writes each story version, the judge reads it through the MRC prompt's message
key), once with a judge of known confusion (``sim/judge?confusion=...``) and once with the fair
judge, whose reading is each story's truth. A calibration set of ``--per-class`` stories per true
class is read by the same judge (the simulator's truth gives the labels). Per seed it scores raw
and corrected ``bias_gen`` (and ``ntr_gen``) with the run's own bootstrap over templates, paired
with resamples of each calibration class, and checks whether the corrected 95% interval covers
the true value (the fair judge's reading of the same stories).

    BIASCHECK_DATA_DIR=../shared/datasets python bench/judge_correction.py --seeds 200

The last line is ``coverage <x> raw_bias <y> corrected_bias <z>`` for ``bias_gen``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from biascheck.benchmarks.bbg.data import MRC_PROMPT_ID, build_run, evaluation_set_name, load_evaluation_set, load_prompts, pairs, story_prompt_id
from biascheck.benchmarks.bbg.judge_calibration import CLASSES, JudgeCalibration, corrected_table
from biascheck.benchmarks.bbg.metrics import BBG_METRICS, COUNT_FIELDS, pair_cell
from biascheck.metrics.core import factorize, metric_table
from biascheck.sim.personas import parse_persona
from biascheck.sim.stories import bbg_outcome, misread, shares_story, writer_rank

# 10% misreadings on average (b 5%, c 15%, u 10%), not symmetric: a story that says c or u is read
# as b more often than a b story is read as c or u, so the raw bias_gen is pushed up.
CONFUSION = "0.95,0.02,0.03,0.10,0.85,0.05,0.08,0.02,0.90"


def load_pairs(data_dir: Path, language: str, runs: list[int]):
    bbg = data_dir / "bbg"
    prompts = load_prompts(bbg / "prompts.json")
    out = []
    for run in runs:
        rows = load_evaluation_set(bbg / evaluation_set_name(language, run), language=language)
        _, questions = build_run(
            rows, run=run, language=language, story_prompt_id=story_prompt_id(language, run), mrc_prompt=prompts["mrc"][MRC_PROMPT_ID[language]]
        )
        out.extend(pairs(questions))
    return out


def draw_run(pair_list, persona: str, judge: str):
    """(judged vectors, true vectors) of every pair, drawn as the server would answer."""
    judged, true = [], []
    for first, second in pair_list:
        shared = shares_story(first, second)
        writer = min(first, second, key=writer_rank) if shared else None
        readings = [bbg_outcome(persona, q, judge, writer, shared) for q in (first, second)]
        truths = [bbg_outcome(persona, q, "judge", writer, shared) for q in (first, second)]
        judged.append(pair_cell(*readings))
        true.append(pair_cell(*truths))
    return np.array(judged), np.array(true)


def calibration_counts(judge: str, per_class: int, tag: str) -> np.ndarray:
    """``per_class`` stories of each true class read by the judge (each its own MRC prompt)."""
    persona = parse_persona(judge)
    counts = np.zeros((3, 3), dtype=np.int64)
    for i, truth in enumerate(CLASSES):
        for j in range(per_class):
            counts[i, CLASSES.index(misread(persona, truth, f"calibration/{tag}/{truth}/{j}"))] += 1
    return counts


def cluster_counts(vectors: np.ndarray, clusters: list[str]) -> np.ndarray:
    codes, names = factorize(clusters)
    out = np.zeros((len(names), len(COUNT_FIELDS)), dtype=np.int64)
    np.add.at(out, codes, vectors)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--persona", default="stereotyped?p=0.3")
    parser.add_argument("--confusion", default=CONFUSION)
    parser.add_argument("--per-class", type=int, default=200, help="calibration stories per true class")
    parser.add_argument("--language", default="en", choices=("en", "ko"))
    parser.add_argument("--runs", default="1", help="comma-separated runs of the evaluation sets (default 1: 464 EnBBG pairs)")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--data", type=Path, default=os.environ.get("BIASCHECK_DATA_DIR"))
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("set BIASCHECK_DATA_DIR or pass --data")
    started = time.monotonic()
    pair_list = load_pairs(Path(args.data), args.language, [int(r) for r in args.runs.split(",")])
    clusters = [a.base_template.removesuffix("-cd") for a, _ in pair_list]
    defs = [BBG_METRICS["ntr_gen"], BBG_METRICS["bias_gen"]]
    rows = {m: {"raw": [], "corrected": [], "true": [], "covered": [], "raw_covered": [], "width": []} for m in ("bias_gen", "ntr_gen")}
    for seed in range(args.seeds):
        persona = f"{args.persona}&seed={seed}" if "?" in args.persona else f"{args.persona}?seed={seed}"
        judge = f"judge?confusion={args.confusion}&seed={seed}"
        judged, true = draw_run(pair_list, persona, judge)
        counts = cluster_counts(judged, clusters)
        calibration = JudgeCalibration(tuple(map(tuple, calibration_counts(judge, args.per_class, str(seed)).tolist())), judge, "", args.language, "")
        raw = metric_table(counts, defs, args.resamples, seed, 0.95)
        corrected = corrected_table(counts, calibration, BBG_METRICS, args.resamples, seed, 0.95)
        truth = metric_table(cluster_counts(true, clusters), defs, 0, 0, 0.95)
        for m in rows:
            c = corrected[m + "_corrected"]
            rows[m]["raw"].append(raw[m].value)
            rows[m]["corrected"].append(c.value)
            rows[m]["true"].append(truth[m].value)
            rows[m]["covered"].append(c.ci[0] <= truth[m].value <= c.ci[1])
            rows[m]["raw_covered"].append(raw[m].ci[0] <= truth[m].value <= raw[m].ci[1])
            rows[m]["width"].append(c.ci[1] - c.ci[0])
    elapsed = time.monotonic() - started
    print(f"persona {args.persona}, judge confusion {args.confusion} (rows: true b, c, u), {args.per_class} calibration stories per class")
    print(f"{len(pair_list)} pairs ({args.language}, runs {args.runs}), {args.seeds} seeds, {args.resamples} resamples, {elapsed:.1f} s")
    print("metric    true mean  raw bias  corrected bias  raw CI coverage  corrected CI coverage  corrected CI width")
    for m, r in rows.items():
        true_v, raw_v, cor_v = (np.array(r[k]) for k in ("true", "raw", "corrected"))
        print(
            f"{m:9} {true_v.mean():+9.4f} {np.mean(raw_v - true_v):+9.4f} {np.mean(cor_v - true_v):+15.4f} "
            f"{np.mean(r['raw_covered']):16.3f} {np.mean(r['covered']):22.3f} {np.mean(r['width']):19.4f}"
        )
    r = rows["bias_gen"]
    raw_bias = float(np.mean(np.array(r["raw"]) - np.array(r["true"])))
    corrected_bias = float(np.mean(np.array(r["corrected"]) - np.array(r["true"])))
    print(f"coverage {np.mean(r['covered']):.3f} raw_bias {raw_bias:+.4f} corrected_bias {corrected_bias:+.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
