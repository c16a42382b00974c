"""Fill a response store with the simulator's answers to a suite, without HTTP: for measuring what
a run does from a warm store (scoring, reports, items) at sizes whose calls would take hours.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/fill_store.py suites/hbb-full STORE [--persona stereotyped]

Each of the suite's requests (as the run plans them: its key, messages, parameters and sample) is
answered by the simulator's own reply code (``SimApp``, in this process) and stored as an online
call through litellm stores it (text, finish reason, usage, no cost, the served model). A run of
the suite against ``sim/PERSONA`` with this store then makes no call. What differs from a store a
real run fills: the stored ``created_at`` times, and any field litellm adds that the simulator
does not send (none for these replies).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path


def fill(suite_dir: str, store_path: Path, persona: str = "stereotyped", estimator: str | None = None, chunk: int = 5000) -> int:
    from biascheck.execution.llm import ModelConfig, first_token_logprobs
    from biascheck.execution.planning import plan_requests
    from biascheck.execution.runner import store_request
    from biascheck.execution.store import ResponseStore, StoredResponse
    from biascheck.session import RunConfig, answer_mode, effective_params
    from biascheck.sim.knowledge import SimKnowledge
    from biascheck.sim.server import SimApp
    from biascheck.suite import load_suite

    suite = load_suite(suite_dir)
    model = ModelConfig(f"sim/{persona}")
    config = RunConfig(model, store_path=store_path, estimator=estimator)
    mode = answer_mode(suite, config)
    _, requests = plan_requests(suite.benchmark.requests, suite.cases, model, effective_params(suite, model), mode)
    app = SimApp(SimKnowledge.from_suites([suite]))
    served = persona  # the model a reply names: what litellm sends for openai/<persona>

    async def answer(request) -> StoredResponse:
        body = {"model": served, "messages": request.messages, **request.params}
        if request.sample:
            body["biascheck_sample"] = request.sample
        status, reply = await app.answer(body, batched=False)
        if status != 200:
            raise SystemExit(f"the simulator answered {status}: {reply}")
        choice = reply["choices"][0]
        usage = {k: int(reply["usage"].get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        logprobs = first_token_logprobs(choice.get("logprobs")) if request.params.get("logprobs") else None
        return StoredResponse(choice["message"]["content"], choice["finish_reason"], usage, 0.0, logprobs, False, reply.get("model"), None)

    async def main() -> int:
        unique = list({r.key: r for r in requests}.values())
        with ResponseStore(store_path) as store:
            for start in range(0, len(unique), chunk):
                part = unique[start : start + chunk]
                rows = [(r.key, model.model, store_request(r, {}), await answer(r)) for r in part]
                store.put_many(rows)
        return len(unique)

    return asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite")
    parser.add_argument("store", type=Path)
    parser.add_argument("--persona", default="stereotyped")
    parser.add_argument("--estimator", default=None, help="an answer mode or HBB estimator (default: the manifest's)")
    args = parser.parse_args()
    start = time.perf_counter()
    n = fill(args.suite, args.store, args.persona, args.estimator)
    print(f"{n:,} answers stored in {args.store} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
