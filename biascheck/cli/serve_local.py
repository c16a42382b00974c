"""``biascheck serve-local``: a real model (Gemma 3 270M) on an OpenAI-compatible server over
llama.cpp's Python bindings (:mod:`biascheck.execution.local_server`) on a free loopback port,
until Ctrl-C (needs the ``[local-model]`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biascheck.cli.common import in_a_folder, spelling_of
from biascheck.core.bounds import argument
from biascheck.core.errors import BiascheckError


def add_parser(commands: Any) -> None:
    local = commands.add_parser(
        "serve-local",
        help="serve a real small model (Gemma 3 270M or SmolLM2-135M-Instruct) on loopback until Ctrl-C; needs the [local-model] extra",
        description="Start an OpenAI-compatible server on llama.cpp's Python bindings with a small model the [local-model] extra ships "
        "(gemma-3-270m: a base model, whose replies are mostly not answers; smollm2-135m-instruct: an instruction-tuned one) "
        "on 127.0.0.1, with the chat template the model carries, and print the options that point a biascheck run at it.",
    )
    local.add_argument("--model", default="gemma-3-270m", help="gemma-3-270m (default) or smollm2-135m-instruct")
    local.add_argument("--port", type=argument("port", "--port"), default=None, help="port to listen on (default or 0: a free one)")
    local.add_argument("--model-file", type=Path, default=None, help="another GGUF file to serve under --model's name and chat format")
    local.add_argument("--n-ctx", type=argument("context_tokens", "--n-ctx"), default=4096, help="context size in tokens (default 4096)")
    local.add_argument(
        "--startup-timeout",
        type=argument("timeout", "--startup-timeout"),
        default=180.0,
        help="seconds to wait for the server to answer (default 180)",
    )
    local.add_argument("--log", type=Path, default=None, help="write the server's log to this file")
    local.set_defaults(func=_serve_local, spelling=spelling_of(local))


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _serve_local(args) -> int:
    import signal

    from biascheck.execution.local_model import local_model

    local_model(args.model)
    if args.log is not None:
        in_a_folder("--log", args.log)
    # SIGTERM (e.g. from a CI step's timeout) stops the server like Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _serve_until_stopped(args)
    except KeyboardInterrupt:  # stopped while the model was still loading
        return 0


def _serve_until_stopped(args) -> int:
    import time

    from biascheck.execution.local_model import API_KEY_ENV, start_local_server

    with start_local_server(
        args.model_file,
        model=args.model,
        port=args.port or None,
        n_ctx=args.n_ctx,
        startup_timeout_s=args.startup_timeout,
        log_path=args.log,
    ) as server:
        print(f"serving {server.model_path.name} as {server.served.name} at {server.api_base}", flush=True)
        print("point biascheck at it with (litellm's openai/ provider wants a key; this server checks none):")
        print(f"  export {API_KEY_ENV}=unused-local")
        print(f"  pytest --biascheck SUITE --biascheck-model {server.model} --biascheck-api-base {server.api_base} \\")
        print("         --biascheck-concurrency 2 --biascheck-timeout 600 --biascheck-param max_tokens=30")
        print(
            '(--biascheck-answer-mode first-token or loglikelihood reads log-probabilities instead of replies; see docs/metrics.md, "Answer modes".)'
        )
        print("(SUITE: a suite folder, or a packaged suite's name from biascheck suites.)")
        print("It answers one request at a time (about 1.5 s for a short answer on 2 cores). Ctrl-C stops it.", flush=True)
        try:
            while server.process.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            return 0
        raise BiascheckError(
            "biascheck serve-local", None, f"the server exited with code {server.process.returncode}", "run it again with --log FILE to see why"
        )
