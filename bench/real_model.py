"""A real model on a real server: Gemma 3 270M on llama-cpp-python's server (the [local-model] extra).

    BIASCHECK_DATA_DIR=../shared/datasets python bench/real_model.py [--questions 10] [--categories ses]
    BIASCHECK_DATA_DIR=../shared/datasets python bench/real_model.py --kobbq-replies /tmp/real_kobbq_replies.jsonl \
        [--prompt 1] [--param temperature=1]

Default: an HBB subset (``--questions`` seeded questions of ``--categories``) under both estimators,
``logprob`` then ``sampling`` (k = 10), into one response store, through litellm's OpenAI-compatible
path, and prints how often the two estimators agree on the instances' flags (and Cohen's kappa),
each one's flagged rate, calls, wall time, refusal (out-of-choice) ratio and unscorable ratio.
``--kobbq-replies FILE``: a KoBBQ subset (one template in each of 8 categories, prompt 1, the
original choice order: 64 cases) instead; writes each case's id, choices, letters and raw reply as
JSON lines, and prints the out-of-choice ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hbb import agreement, flagged  # noqa: E402  (bench/hbb.py: the same flags and agreement as for the simulator)

KOBBQ_CATEGORIES = [
    "age",
    "disability_status",
    "gender_identity",
    "physical_appearance",
    "race_ethnicity_nationality",
    "religion",
    "ses",
    "sexual_orientation",
]


def subset_suite(folder: Path, base: str, subset: str, *, prompts: str | None = None, hbb: dict | None = None) -> Path:
    """A copy of suites/<base> with its [subset] (and [prompts] / [hbb] keys) replaced."""
    text = (ROOT / "suites" / base / "suite.toml").read_text("utf-8")
    text = re.sub(r"\n\[subset\]\n(?:[^\[\n][^\n]*\n|\n)*", "\n", text)
    if prompts is not None:
        text = re.sub(r"\n\[prompts\]\n(?:[^\[\n][^\n]*\n|\n)*", "\n", text) + "\n[prompts]\n" + prompts + "\n"
    for key, value in (hbb or {}).items():
        text, n = re.subn(rf"(?m)^{key} = .*$", f"{key} = {json.dumps(value)}", text)
        assert n == 1, key
    text += "\n[subset]\n" + subset + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.toml").write_text(text, "utf-8")
    return folder


def run_suite(suite_dir: Path, server, store: Path, *, estimator: str | None = None, max_tokens: int, params: dict | None = None):
    from biascheck.execution.llm import ModelConfig
    from biascheck.session import RunConfig, run
    from biascheck.suite import load_suite

    suite = load_suite(suite_dir, data_dir=os.environ.get("BIASCHECK_DATA_DIR"))
    # One request at a time is all the server does; a second one queued hides the HTTP round trip.
    model = ModelConfig(server.model, params={"max_tokens": max_tokens, **(params or {})}, api_base=server.api_base, timeout=600)
    config = RunConfig(model=model, store_path=store, concurrency=2, estimator=estimator)
    start = time.perf_counter()
    result = run([(suite, suite.cases)], config)
    return suite, result, time.perf_counter() - start


def metric(result, name: str) -> float:
    value = result.suites[0].metrics.to_json()["overall"].get(name, {}).get("value")
    return float("nan") if value is None else value


def hbb(args, server, tmp: Path) -> None:
    subset = f"categories = {json.dumps(args.categories)}" if args.categories else ""
    suite_dir = subset_suite(tmp / "hbb", "hbb", subset, hbb={"questions": args.questions})
    store = tmp / "store.sqlite"
    measured = {}
    for estimator in ("logprob", "sampling"):
        suite, result, seconds = run_suite(suite_dir, server, store, estimator=estimator, max_tokens=args.max_tokens)
        s = result.suites[0]
        measured[estimator] = (suite, result)
        print(
            f"{estimator:9s}: {len(suite.cases)} cases, {result.stats.calls} calls, {seconds:.0f} s; "
            f"estimator {s.estimator}{' (' + s.estimator_note + ')' if s.estimator_note else ''}; "
            f"flagged rate {metric(result, 'hbb_flagged_rate'):.3f}, refusal rate {metric(result, 'refusal_rate'):.3f}, "
            f"unscorable ratio {metric(result, 'unscorable_ratio'):.3f}"
        )
    (suite, logprob), (_, sampling) = measured["logprob"], measured["sampling"]
    by_logprob, by_sampling = flagged(suite, logprob), flagged(suite, sampling)
    observed, kappa, n = agreement(by_logprob, by_sampling)
    scored = (
        f"scorable: {sum(f is not None for f in by_logprob)} of {len(by_logprob)} instances by logprob, "
        f"{sum(f is not None for f in by_sampling)} by sampling"
    )
    if n:
        print(f"agreement on flags: {observed:.3f} (Cohen's kappa {kappa:.3f}) over the {n} instances scored by both; {scored}")
    else:
        print(f"agreement on flags: undefined, no instance was scored by both estimators; {scored}")


def kobbq(args, server, tmp: Path) -> None:
    suite_dir = subset_suite(
        tmp / "kobbq",
        "kobbq",
        f'categories = {json.dumps(KOBBQ_CATEGORIES)}\ntemplates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts=f'from_data = "prompts"\nuse = ["{args.prompt}"]',
    )
    from biascheck.config.manifest import parse_sampling_overrides

    params = parse_sampling_overrides(args.param, where="--param")
    suite, result, seconds = run_suite(suite_dir, server, tmp / "store.sqlite", max_tokens=30, params=params)
    from biascheck.reporting.results import build_results

    document = build_results(result)[0]
    letters = {case.case_id: list(case.letters) for case in suite.cases}
    with open(args.kobbq_replies, "w", encoding="utf-8") as handle:
        for case in document["cases"]:
            row = {k: case.get(k) for k in ("case_id", "choices", "letters", "raw")}
            row["letters"] = row["letters"] or letters[case["case_id"]]  # the option labels the prompt showed
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    statuses = [case["outcome"] for case in document["cases"]]
    print(
        f"kobbq: {len(statuses)} cases, {result.stats.calls} calls, {seconds:.0f} s; ooc_ratio {metric(result, 'ooc_ratio'):.3f}; "
        f"replies -> {args.kobbq_replies}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=10, help="HBB questions in the seeded subset (default 10, at least 10)")
    parser.add_argument("--categories", nargs="*", default=["ses"], help="HBB categories (default: ses; none: all)")
    parser.add_argument("--max-tokens", type=int, default=24, help="max_tokens of a sampled answer (default 24)")
    parser.add_argument("--kobbq-replies", type=Path, help="run the KoBBQ subset instead and write its raw replies here")
    parser.add_argument("--prompt", default="1", help="KoBBQ: which of the 5 prompts (default 1)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="KoBBQ: a sampling parameter over the manifest's (temperature 0, max_tokens 30)",
    )
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    # litellm's openai/ provider sends no request without a key; the local server checks none.
    os.environ.setdefault("OPENAI_API_KEY", "unused-local")
    from biascheck.execution.local_model import missing_extra, start_local_server

    reason = missing_extra()
    if reason:
        print(f"bench/real_model.py: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, start_local_server() as server:
        print(f"server: {server.api_base} ({server.model_path.name})")
        (kobbq if args.kobbq_replies else hbb)(args, server, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
