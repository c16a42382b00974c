"""Throughput of biascheck's runner against the simulated model, next to a bare litellm loop.

    python bench/throughput.py --data ../shared/datasets [--cases 3000] [--concurrency 64]

Prints cases/s for (1) a bare ``litellm.acompletion`` loop under an asyncio semaphore and
(2) biascheck's runner (retries, store, progress accounting), against the same sim server in the
same process run, then (3) the cached re-run time of the whole KoBBQ suite through pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


async def bare_loop(litellm, base_url: str, cases, concurrency: int) -> float:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(case):
        async with semaphore:
            await litellm.acompletion(
                model="openai/fair",
                api_base=base_url,
                api_key="sim",
                messages=case.messages_as_dicts(),
                temperature=0,
                max_tokens=30,
                num_retries=0,
                max_retries=0,
                timeout=60,
            )

    start = time.perf_counter()
    await asyncio.gather(*(one(c) for c in cases))
    elapsed = time.perf_counter() - start
    await litellm.close_litellm_async_clients()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=os.environ.get("BIASCHECK_DATA_DIR"), required=os.environ.get("BIASCHECK_DATA_DIR") is None)
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--skip-suite", action="store_true", help="skip the full-suite cached re-run")
    args = parser.parse_args()
    args.data = Path(args.data).resolve()  # the pytest run below works in a temp folder

    from biascheck.execution.llm import ModelConfig, import_litellm
    from biascheck.session import RunConfig, run
    from biascheck.sim.process import spawn_sim_server
    from biascheck.suite import load_suite

    suite = load_suite(ROOT / "suites" / "kobbq", data_dir=args.data)
    cases = suite.cases[: args.cases]
    litellm = import_litellm()
    with spawn_sim_server([suite.manifest.directory], args.data) as server:
        bare = asyncio.run(bare_loop(litellm, server.base_url, cases, args.concurrency))
    print(f"bare litellm.acompletion loop : {len(cases)} calls in {bare:.2f} s = {len(cases) / bare:.0f} cases/s (concurrency {args.concurrency})")

    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(model=ModelConfig("sim/fair"), store_path=Path(tmp) / "store.sqlite", data_dir=args.data, concurrency=args.concurrency)
        start = time.perf_counter()
        result = run([(suite, cases)], config)
        elapsed = time.perf_counter() - start
        assert result.stats.calls == len(cases), result.stats
        print(
            f"biascheck runner (cold store) : {len(cases)} calls in {elapsed:.2f} s = {len(cases) / elapsed:.0f} cases/s "
            f"(includes starting the sim server and scoring)"
        )
        start = time.perf_counter()
        warm = run([(suite, cases)], config)
        print(f"biascheck runner (warm store) : {warm.stats.calls} calls, {time.perf_counter() - start:.2f} s")

        if args.skip_suite:
            return
        store = Path(tmp) / "suite.sqlite"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "--biascheck",
            str(ROOT / "suites" / "kobbq"),
            "--biascheck-model",
            "sim/fair",
            "--biascheck-cache",
            str(store),
            "--biascheck-data",
            str(args.data),
            "-q",
            "-p",
            "no:cacheprovider",
        ]
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=tmp)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=tmp)
        cached = time.perf_counter() - start
        print(f"full KoBBQ suite via pytest   : {len(suite.cases)} cases, cold {cold:.1f} s, cached re-run {cached:.1f} s")


if __name__ == "__main__":
    main()
