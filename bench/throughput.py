"""Client CPU per model call: a bare aiohttp loop, bare litellm, and biascheck on either HTTP client.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/throughput.py [--cases 2000] [--concurrency 64 256]

One process run, one instant loopback server and the same KoBBQ cases for every path:

(a) a bare aiohttp loop: POST each case's chat request, parse the JSON reply;
(b) a bare ``litellm.acompletion`` loop (``openai/`` with an api_base);
(c) biascheck's fast path: ``biascheck.session.run`` (planning, the runner, a cold response
    store, scoring) with ``--biascheck-http-client fast``;
(d) the same run through litellm (``--biascheck-http-client litellm``).

Each path's CPU includes what litellm's calls leave to its logging worker, run right after it.

The server is a minimal aiohttp app in a subprocess that answers every chat completion with the
same reply at once, so ``time.process_time()`` of this process is the client's CPU alone. It is
not the simulator: the simulator's speed is measured elsewhere. Each path runs at each
concurrency; CPU per call and calls/s are printed, and the ratio of each path's CPU per call to
(a)'s. The goal of issue 26: (c)/(a) at most 2.0. On a biascheck without the fast path (before it
existed) (c) is reported as not available.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench"  # the model name sent; the server answers any
REPLY = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 0,
    "model": MODEL,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop", "logprobs": None}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 1, "total_tokens": 121},
}


# --- the instant server (runs in a subprocess: `python bench/throughput.py --serve`) -------------


def serve() -> None:
    from aiohttp import web

    body = json.dumps(REPLY).encode()

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        # A backlog for 256 connections opened at once.
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"http://127.0.0.1:{port}/v1", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Server:
    def __enter__(self) -> str:
        self.process = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(10)


# --- the paths ------------------------------------------------------------------------------------


@dataclass
class Measured:
    calls: int
    cpu: float  # process_time seconds
    wall: float

    @property
    def cpu_per_call_ms(self) -> float:
        return 1000 * self.cpu / self.calls

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.wall


def measure(work: Callable[[], int]) -> Measured:
    """One run of ``work``. Every path starts alike: what the process held before (litellm's
    modules, the suite's cases) is frozen out of the collector's way, so that no path pays, or
    is spared, a full collection of it by chance."""
    gc.collect()
    gc.freeze()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        calls = work()
        wall = time.perf_counter() - wall
        finish_litellm_logging()
        return Measured(calls, time.process_time() - cpu, wall)
    finally:
        gc.unfreeze()


def finish_litellm_logging() -> None:
    """Run what litellm's calls left in its logging worker's queue (its success handlers), so that
    their CPU is counted for the path that made the calls: else the next path's event loop, which
    litellm's worker moves to, runs them ("LoggingWorker: event loop changed; carried 799 pending")."""
    if "litellm" not in sys.modules:
        return
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    asyncio.run(GLOBAL_LOGGING_WORKER.flush())


def bare_aiohttp(base_url: str, requests: list[dict], concurrency: int) -> int:
    import aiohttp

    async def go() -> int:
        semaphore = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        async with aiohttp.ClientSession(connector=connector, headers={"Authorization": "Bearer bench"}) as session:

            async def one(body: dict) -> str:
                async with (
                    semaphore,
                    session.post(base_url + "/chat/completions", data=json.dumps(body), headers={"content-type": "application/json"}) as r,
                ):
                    reply = json.loads(await r.read())
                    return reply["choices"][0]["message"]["content"]

            answers = await asyncio.gather(*(one(body) for body in requests))
        assert all(a == "A" for a in answers)
        return len(answers)

    return asyncio.run(go())


def bare_litellm(base_url: str, requests: list[dict], concurrency: int) -> int:
    from biascheck.execution.llm import import_litellm

    litellm = import_litellm()

    async def go() -> int:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(body: dict) -> str:
            async with semaphore:
                params = {k: v for k, v in body.items() if k not in ("model", "messages")}
                response = await litellm.acompletion(
                    model="openai/" + MODEL,
                    api_base=base_url,
                    api_key="bench",
                    messages=body["messages"],
                    num_retries=0,
                    max_retries=0,
                    timeout=60,
                    **params,
                )
                return response.choices[0].message.content

        try:
            answers = await asyncio.gather(*(one(body) for body in requests))
        finally:
            await litellm.close_litellm_async_clients()
        assert all(a == "A" for a in answers)
        return len(answers)

    return asyncio.run(go())


def has_fast_path() -> bool:
    import dataclasses

    from biascheck.execution.llm import ModelConfig

    return "http_client" in {f.name for f in dataclasses.fields(ModelConfig)}


def biascheck_run(base_url: str, suite, cases, concurrency: int, http_client: str, data_dir: Path) -> int:
    from biascheck.execution.llm import ModelConfig
    from biascheck.session import RunConfig, run

    extra = {"http_client": http_client} if has_fast_path() else {}
    model = ModelConfig("openai/" + MODEL, api_base=base_url, **extra)
    with tempfile.TemporaryDirectory() as tmp:  # a cold store
        config = RunConfig(model=model, store_path=Path(tmp) / "store.sqlite", data_dir=data_dir, concurrency=concurrency)
        result = run([(suite, cases)], config)
    stats = result.stats
    assert stats.errors == 0 and stats.calls == len(cases), stats
    return stats.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, default=os.environ.get("BIASCHECK_DATA_DIR"))
    parser.add_argument("--cases", type=int, default=2000, help="KoBBQ cases, one call each (default 2000)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--paths", default="abcd", help="which of the paths a, b, c, d to run (default all)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each path at each concurrency, interleaved; the least CPU counts (default 5)")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.data is None:
        parser.error("give --data or set BIASCHECK_DATA_DIR")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    warnings.simplefilter("ignore")
    data_dir = Path(args.data).resolve()

    from biascheck.execution.llm import import_litellm
    from biascheck.session import effective_params
    from biascheck.suite import load_suite

    import_litellm()  # its import (seconds) is no part of any path
    suite = load_suite(ROOT / "suites" / "kobbq", data_dir=data_dir)
    cases = suite.cases[: args.cases]
    warm = suite.cases[-50:]
    fast = has_fast_path()
    print(f"{len(cases)} KoBBQ cases, one call each; biascheck at {Path(sys.modules['biascheck'].__file__).parent.parent}")
    print(f"fast path: {'yes' if fast else 'no (this biascheck has none: (c) not available)'}")

    with Server() as base_url:
        sampling = {k: v for k, v in effective_params(suite, _model(base_url)).items()}
        requests = [{"model": MODEL, "messages": c.messages_as_dicts(), **sampling} for c in cases]
        paths: dict[str, tuple[str, Callable[[int], int]]] = {
            "a": ("bare aiohttp loop", lambda n: bare_aiohttp(base_url, requests, n)),
            "b": ("bare litellm.acompletion", lambda n: bare_litellm(base_url, requests, n)),
            "c": ("biascheck, fast path", lambda n: biascheck_run(base_url, suite, cases, n, "fast", data_dir)),
            "d": ("biascheck, litellm", lambda n: biascheck_run(base_url, suite, cases, n, "litellm", data_dir)),
        }
        # Warm-up: each path's first call in a process pays its lazy set-up (imports, clients).
        warm_requests = [{"model": MODEL, "messages": c.messages_as_dicts(), **sampling} for c in warm]
        bare_aiohttp(base_url, warm_requests, 8)
        bare_litellm(base_url, warm_requests, 8)
        biascheck_run(base_url, suite, warm, 8, "litellm", data_dir)
        if fast:
            biascheck_run(base_url, suite, warm, 8, "fast", data_dir)
        # The least CPU of the repeats: a shared machine only ever adds to a run's CPU.
        results: dict[tuple[str, int], Measured] = {}
        for concurrency in args.concurrency:
            for repeat in range(args.repeat):
                for key, (name, work) in paths.items():
                    if key not in args.paths or (key == "c" and not fast):
                        continue
                    m = measure(lambda: work(concurrency))
                    best = results.get((key, concurrency))
                    if best is None or m.cpu < best.cpu:
                        results[key, concurrency] = m
                    print(
                        f"({key}) {name:<26} concurrency {concurrency:>3}, run {repeat + 1}: {m.calls} calls, "
                        f"CPU {m.cpu_per_call_ms:6.3f} ms/call, {m.calls_per_s:7.0f} calls/s",
                        flush=True,
                    )

    print()
    print(f"CPU per call (the least of {args.repeat} runs), and its ratio to (a):")
    for concurrency in args.concurrency:
        base = results.get(("a", concurrency))
        row = []
        for key in "abcd":
            m = results.get((key, concurrency))
            if m is None:
                row.append(f"({key}) n/a")
            else:
                ratio = f" = {m.cpu / m.calls / (base.cpu / base.calls):.2f}x" if base else ""
                row.append(f"({key}) {m.cpu_per_call_ms:.3f} ms{ratio}")
        print(f"  concurrency {concurrency:>3}: " + ", ".join(row))
    print("calls/s (of the run with the least CPU):")
    for concurrency in args.concurrency:
        row = [f"({key}) {results[key, concurrency].calls_per_s:.0f}" if (key, concurrency) in results else f"({key}) n/a" for key in "abcd"]
        print(f"  concurrency {concurrency:>3}: " + ", ".join(row))


def _model(base_url: str):
    from biascheck.execution.llm import ModelConfig

    return ModelConfig("openai/" + MODEL, api_base=base_url)


if __name__ == "__main__":
    main()
