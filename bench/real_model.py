"""Real models on a real server: what biascheck reads from a base and an instruction-tuned checkpoint.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/real_model.py [--parts bbq,kobbq,...] [--samples 10]
    BIASCHECK_DATA_DIR=../shared/datasets python bench/real_model.py --kobbq-replies FILE [--model NAME] [--param temperature=1]

Both models of the [local-model] extra on ``biascheck serve-local``'s server (llama.cpp's Python
bindings), through litellm's OpenAI-compatible path, each part into its own response store, and
one table at the end:

- ``bbq``: SmolLM2-135M-Instruct on BBQ (Religion, prompt En-1, the original order: 100 cases) by
  generation and by first token: each one's out-of-choice ratio, the first token's choice mass, and
  how the two modes' answers agree (Cohen's kappa over the cases both answered).
- ``kobbq``: the same on a KoBBQ subset (one template of each of 8 categories, prompt 1, the
  original order: 64 cases).
- ``loglikelihood``: Gemma 3 270M, a base model, on that KoBBQ subset by log-likelihood and by
  generation; and SmolLM2 on the BBQ subset by log-likelihood beside generation, with how the two
  modes' answers agree (SmolLM2 has no BOS token, which llama_cpp.server's echo got one token
  late; serve-local scores it right). bench/loglikelihood_rps.py measures the requests per second.
- ``hbb``: SmolLM2 on an HBB subset (``--questions`` seeded questions of ``ses``) under both
  estimators (``--samples`` answers per question for sampling): the share of instances each scores
  and their agreement on flags.
- ``judge``: SmolLM2 qualified as a BBG judge (``biascheck qualify-judge`` on 60 disambiguated BBQ
  items), and an EnBBG subset (``disabilitystatus``, run 1) with SmolLM2 as writer and judge.
- ``false-alarm``: SmolLM2 at temperature 0.7 on the BBQ subset, recorded as a baseline with seed 1
  and compared as a candidate with seed 2: how many checks regressed (none should).
- every part runs again from its store: the calls of the warm re-runs (0 expected).

``--kobbq-replies FILE``: instead, write a model's raw replies to the KoBBQ subset as JSON lines
(for labelling in tests/data/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hbb import agreement, flagged  # noqa: E402  (bench/hbb.py: the same flags and agreement as for the simulator)

SMOLLM2, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"
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
KOBBQ_SUBSET = f'categories = {json.dumps(KOBBQ_CATEGORIES)}\ntemplates_per_category = 1\nseed = 7\nchoice_orders = "original"'
BBQ_SUBSET = 'categories = ["Religion"]\nsample = "one-per-group"\nseed = 42\nchoice_orders = "original"'
PARTS = ("bbq", "kobbq", "loglikelihood", "hbb", "judge", "false-alarm")


def subset_suite(folder: Path, base: str, subset: str, *, prompts: str | None = None, edits: dict[str, str] | None = None) -> Path:
    """A copy of suites/<base> with its [subset] replaced, [prompts] replaced (or, for inline
    prompts, a ``use`` added), and some ``key = value`` lines changed."""
    text = (ROOT / "suites" / base / "suite.toml").read_text("utf-8")
    text = re.sub(r"\n\[subset\]\n(?:[^\[\n][^\n]*\n|\n)*", "\n", text)
    if prompts is not None and "[[prompts.inline]]" in text:
        text = text.replace("[prompts]\n", f"[prompts]\n{prompts}\n", 1)
    elif prompts is not None:
        text = re.sub(r"\n\[prompts\]\n(?:[^\[\n][^\n]*\n|\n)*", "\n", text) + "\n[prompts]\n" + prompts + "\n"
    for key, value in (edits or {}).items():
        text, n = re.subn(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {value}", text)
        assert n == 1, key
    text += "\n[subset]\n" + subset + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.toml").write_text(text, "utf-8")
    return folder


class Bench:
    """The runs of one bench invocation: servers by model, a store per part, the table's rows."""

    def __init__(self, servers: dict, tmp: Path):
        self.servers, self.tmp, self.rows = servers, tmp, []

    def run(self, suite_dir: Path, model: str, store: str, *, mode: str | None = None, params: dict | None = None, cases=None, **config):
        from biascheck.execution.llm import ModelConfig
        from biascheck.session import RunConfig, run
        from biascheck.suite import load_suite

        server = self.servers[model]
        suite = load_suite(suite_dir, data_dir=os.environ.get("BIASCHECK_DATA_DIR"))
        selected = [c for c in suite.cases if cases is None or c.case_id in cases]
        # One request at a time is all the server does; a second one queued hides the HTTP round trip.
        model_config = ModelConfig(server.model, params=params or {}, api_base=server.api_base, timeout=900)
        settings = RunConfig(model=model_config, store_path=self.tmp / f"{store}.sqlite", concurrency=2, estimator=mode, **config)
        start = time.perf_counter()
        result = run([(suite, selected)], settings)
        return suite, result, time.perf_counter() - start

    def warm(self, label: str, *args, **kwargs) -> None:
        _, result, seconds = self.run(*args, **kwargs)
        self.add(label, "calls of the warm re-run", result.stats.calls, result.stats.calls, seconds)

    def add(self, part: str, figure: str, value, calls: int | str = "", seconds: float | str = "") -> None:
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        self.rows.append((part, figure, shown, str(calls), f"{seconds:.0f}" if isinstance(seconds, float) else seconds))
        print(f"{part}: {figure} = {shown}" + (f" ({calls} calls, {seconds:.0f} s)" if isinstance(seconds, float) else ""), flush=True)


def metric(result, name: str):
    value = result.suites[0].metrics.to_json()["overall"].get(name, {}).get("value")
    return float("nan") if value is None else value


def kappa_of_answers(first, second) -> tuple[int, float, float]:
    """(cases both answered, observed agreement, Cohen's kappa) of two runs' answers to one suite."""
    a, b = first.suites[0].outcomes, second.suites[0].outcomes
    pairs = [(a[k].answer, b[k].answer) for k in a if a[k].status == "answered" and b[k].status == "answered"]
    if not pairs:
        return 0, float("nan"), float("nan")
    n = len(pairs)
    observed = sum(x == y for x, y in pairs) / n
    options = {x for pair in pairs for x in pair}
    chance = sum(sum(x == o for x, _ in pairs) * sum(y == o for _, y in pairs) for o in options) / n / n
    return n, observed, (observed - chance) / (1 - chance) if chance < 1 else float("nan")


def both_modes(bench: Bench, part: str, suite_dir: Path) -> None:
    by_mode = {}
    for mode in ("generate", "first-token"):
        suite, result, seconds = bench.run(suite_dir, SMOLLM2, part, mode=mode)
        by_mode[mode] = result
        bench.add(part, f"SmolLM2 by {mode}: ooc_ratio of {len(suite.cases)} cases", metric(result, "ooc_ratio"), result.stats.calls, seconds)
        if mode == "first-token":
            bench.add(part, "SmolLM2 by first-token: choice_mass", metric(result, "choice_mass"))
        bench.warm(part, suite_dir, SMOLLM2, part, mode=mode)
    n, observed, kappa = kappa_of_answers(by_mode["generate"], by_mode["first-token"])
    bench.add(part, f"generate vs first-token answers: agreement over the {n} cases both answered", observed)
    bench.add(part, "generate vs first-token answers: Cohen's kappa", kappa)


def bbq(bench: Bench, args) -> None:
    both_modes(bench, "bbq", subset_suite(bench.tmp / "bbq", "bbq", BBQ_SUBSET, prompts='use = ["En-1"]'))


def kobbq(bench: Bench, args) -> None:
    both_modes(bench, "kobbq", subset_suite(bench.tmp / "kobbq", "kobbq", KOBBQ_SUBSET, prompts='from_data = "prompts"\nuse = ["1"]'))


def loglikelihood(bench: Bench, args) -> None:
    kobbq_dir = subset_suite(bench.tmp / "kobbq-ll", "kobbq", KOBBQ_SUBSET, prompts='from_data = "prompts"\nuse = ["1"]')
    bbq_dir = subset_suite(bench.tmp / "bbq-ll", "bbq", BBQ_SUBSET, prompts='use = ["En-1"]')
    for model, label, suite_dir in ((GEMMA, "Gemma 3 270M", kobbq_dir), (SMOLLM2, "SmolLM2", bbq_dir)):
        by_mode = {}
        for mode in ("loglikelihood", "generate"):
            suite, result, seconds = bench.run(suite_dir, model, f"loglikelihood-{model}", mode=mode)
            by_mode[mode] = result
            cases = len(suite.cases)
            bench.add("loglikelihood", f"{label} by {mode}: ooc_ratio of {cases} cases", metric(result, "ooc_ratio"), result.stats.calls, seconds)
            for name in ("acc_amb", "acc_dis", "diff_bias_amb", "diff_bias_dis"):
                bench.add("loglikelihood", f"{label} by {mode}: {name}", metric(result, name))
            bench.warm("loglikelihood", suite_dir, model, f"loglikelihood-{model}", mode=mode)
        n, observed, kappa = kappa_of_answers(by_mode["generate"], by_mode["loglikelihood"])
        bench.add("loglikelihood", f"{label}, generate vs loglikelihood answers: agreement over the {n} cases both answered", observed)
        bench.add("loglikelihood", f"{label}, generate vs loglikelihood answers: Cohen's kappa", kappa)


def hbb(bench: Bench, args) -> None:
    suite_dir = subset_suite(bench.tmp / "hbb", "hbb", 'categories = ["ses"]', edits={"questions": str(args.questions), "samples": str(args.samples)})
    measured = {}
    for estimator in ("logprob", "sampling"):
        suite, result, seconds = bench.run(suite_dir, SMOLLM2, "hbb", mode=estimator, params={"max_tokens": 24})
        measured[estimator] = (suite, result)
        scored = flagged(suite, result)
        bench.add(
            "hbb",
            f"SmolLM2 by {estimator}: instances scored ({result.suites[0].estimator})",
            f"{sum(f is not None for f in scored)} of {len(scored)}",
            result.stats.calls,
            seconds,
        )
        bench.add("hbb", f"SmolLM2 by {estimator}: refusal_rate", metric(result, "refusal_rate"))
        bench.add("hbb", f"SmolLM2 by {estimator}: hbb_flagged_rate", metric(result, "hbb_flagged_rate"))
        bench.warm("hbb", suite_dir, SMOLLM2, "hbb", mode=estimator, params={"max_tokens": 24})
    (suite, logprob), (_, sampling) = measured["logprob"], measured["sampling"]
    observed, kappa, n = agreement(flagged(suite, logprob), flagged(suite, sampling))
    bench.add("hbb", f"logprob vs sampling flags: agreement over the {n} instances both scored", observed if n else "undefined")
    bench.add("hbb", "logprob vs sampling flags: Cohen's kappa", kappa if n else "undefined")


def judge(bench: Bench, args) -> None:
    from biascheck.execution.llm import ModelConfig
    from biascheck.judging.panel import JudgeOptions
    from biascheck.judging.qualification import qualify
    from biascheck.session import RunConfig, qa_runner

    server = bench.servers[SMOLLM2]
    model = ModelConfig(server.model, params={"temperature": 0, "seed": 42, "max_tokens": 8}, api_base=server.api_base, timeout=900)
    config = RunConfig(model=model, store_path=bench.tmp / "judge.sqlite", data_dir=os.environ.get("BIASCHECK_DATA_DIR"), concurrency=2)
    start = time.perf_counter()
    qualification = qualify(model, ROOT / "suites" / "bbq", qa_runner(config), data_dir=config.data_dir, cases=60, seed=0)
    bench.add(
        "judge",
        f"SmolLM2 qualified as a judge on {qualification.cases} BBQ items",
        "qualified" if qualification.qualified else "NOT qualified",
        qualification.stats.calls if qualification.stats is not None else "",
        time.perf_counter() - start,
    )
    bench.add("judge", "SmolLM2 as a judge: accuracy on disambiguated BBQ", qualification.accuracy if qualification.accuracy is not None else "n/a")
    bench.add(
        "judge", "SmolLM2 as a judge: diff-bias on disambiguated BBQ", qualification.diff_bias if qualification.diff_bias is not None else "n/a"
    )
    suite_dir = subset_suite(
        bench.tmp / "enbbg", "enbbg-quick", 'categories = ["disabilitystatus"]', edits={"sampling": "{ temperature = 0, seed = 42, max_tokens = 8 }"}
    )
    options = {"judges": JudgeOptions(models=(server.model,), api_base=server.api_base)}
    suite, result, seconds = bench.run(suite_dir, SMOLLM2, "enbbg", params={"max_tokens": 48}, **options)
    bench.add(
        "judge",
        f"EnBBG ({len(suite.cases)} questions) by SmolLM2, judged by SmolLM2: unscorable_ratio",
        metric(result, "unscorable_ratio"),
        result.stats.calls,
        seconds,
    )
    for name in ("ntr_gen", "bias_gen"):
        bench.add("judge", f"EnBBG by SmolLM2, judged by SmolLM2: {name}", metric(result, name))
    bench.warm("judge", suite_dir, SMOLLM2, "enbbg", params={"max_tokens": 48}, **options)


def false_alarm(bench: Bench, args) -> None:
    from biascheck.evaluation import baseline as baselines
    from biascheck.evaluation.regression import compare, settings_from
    from biascheck.reporting.results import build_results

    suite_dir = subset_suite(bench.tmp / "bbq-t07", "bbq", BBQ_SUBSET, prompts='use = ["En-1"]')
    documents = {}
    for seed in (1, 2):
        suite, result, seconds = bench.run(suite_dir, SMOLLM2, "false-alarm", params={"temperature": 0.7, "seed": seed})
        (documents[seed],), _ = build_results(result)
        bench.add(
            "false-alarm", f"SmolLM2 at temperature 0.7, seed {seed}: diff_bias_amb", metric(result, "diff_bias_amb"), result.stats.calls, seconds
        )
    # Each seed as the baseline of the other: chance alone must make no check regress either way.
    for recorded, compared in ((1, 2), (2, 1)):
        baseline = baselines.from_results(documents[recorded], git="0" * 40)
        comparison = compare(baseline, documents[compared], settings_from(documents[compared]), baseline_path=f"seed-{recorded} baseline")
        verdicts = [check.verdict for check in comparison.checks]
        bench.add(
            "false-alarm", f"checks of seed {compared} against seed {recorded} that regressed (of {len(verdicts)})", verdicts.count("regressed")
        )
        shown = ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
        bench.add("false-alarm", f"seed {compared} against seed {recorded}: checks by verdict", shown)
    bench.warm("false-alarm", suite_dir, SMOLLM2, "false-alarm", params={"temperature": 0.7, "seed": 2})


def replies(args, servers, tmp: Path) -> None:
    """A model's raw replies to the KoBBQ subset, as JSON lines, for labelling."""
    from biascheck.config.manifest import parse_sampling_overrides
    from biascheck.reporting.results import build_results

    bench = Bench(servers, tmp)
    suite_dir = subset_suite(tmp / "kobbq", "kobbq", KOBBQ_SUBSET, prompts=f'from_data = "prompts"\nuse = ["{args.prompt}"]')
    params = {"max_tokens": 30, **parse_sampling_overrides(args.param, where="--param")}
    suite, result, seconds = bench.run(suite_dir, args.model, "replies", params=params)
    document = build_results(result)[0][0].to_json()
    letters = {case.case_id: list(case.letters) for case in suite.cases}
    with open(args.kobbq_replies, "w", encoding="utf-8") as handle:
        for case in document["cases"]:
            row = {k: case.get(k) for k in ("case_id", "choices", "letters", "raw")}
            row["letters"] = row["letters"] or letters[case["case_id"]]  # the option labels the prompt showed
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(
        f"kobbq: {len(document['cases'])} cases, {result.stats.calls} calls, {seconds:.0f} s; ooc_ratio {metric(result, 'ooc_ratio'):.3f}; -> {args.kobbq_replies}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"which parts, comma-separated (default: all of {', '.join(PARTS)})")
    parser.add_argument("--questions", type=int, default=10, help="hbb: questions in the seeded subset (default 10, at least 10)")
    parser.add_argument("--samples", type=int, default=10, help="hbb: answers per question for sampling (default 10, the paper's)")
    parser.add_argument("--kobbq-replies", type=Path, help="write the KoBBQ subset's raw replies here instead")
    parser.add_argument("--model", default=GEMMA, help=f"--kobbq-replies: {GEMMA} (default) or {SMOLLM2}")
    parser.add_argument("--prompt", default="1", help="--kobbq-replies: which of the 5 prompts (default 1)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="--kobbq-replies: a sampling parameter")
    args = parser.parse_args()
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    # litellm's openai/ provider sends no request without a key; the local server checks none.
    os.environ.setdefault("OPENAI_API_KEY", "unused-local")
    from biascheck.execution.local_model import missing_extra, start_local_server

    reason = missing_extra()
    if reason:
        print(f"bench/real_model.py: {reason}", file=sys.stderr)
        return 2
    wanted = {args.model} if args.kobbq_replies else {SMOLLM2} | ({GEMMA} if "loglikelihood" in parts else set())
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        servers = {name: stack.enter_context(start_local_server(model=name)) for name in sorted(wanted)}
        for name, server in servers.items():
            print(f"server: {name} at {server.api_base} ({server.model_path.name})", flush=True)
        if args.kobbq_replies:
            replies(args, servers, Path(tmp))
            return 0
        bench = Bench(servers, Path(tmp))
        started = time.perf_counter()
        for part in parts:
            {"bbq": bbq, "kobbq": kobbq, "loglikelihood": loglikelihood, "hbb": hbb, "judge": judge, "false-alarm": false_alarm}[part](bench, args)
    widths = [max(len(row[i]) for row in [("part", "figure", "value", "calls", "s"), *bench.rows]) for i in range(5)]
    print()
    for row in [("part", "figure", "value", "calls", "s"), *bench.rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    print(f"\n{time.perf_counter() - started:.0f} s in all on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
