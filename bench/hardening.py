"""What a broken configuration or a hostile endpoint costs a run (issue 11): calls, time, bytes.

    python bench/hardening.py --data ../shared/datasets [trickle] [missing-key] [bad-provider] [closed-port] [huge-replies]

- ``trickle``: one case, no retry, ``--biascheck-timeout 3``, against a server that sends its
  answer one byte a second (litellm's own timeout is per read: it waits for the whole body).

- ``missing-key``: 8 KoBBQ cases against openai/gpt-4o-mini with no OPENAI_API_KEY.
- ``bad-provider``: ``pytest --biascheck suites/kobbq --biascheck-model opneai/gpt-4o-mini``, the
  whole suite, timed from the command to its exit.
- ``closed-port``: 60 cases against http://127.0.0.1:9/v1, where nothing listens.
- ``huge-replies``: 8 cases against a loopback server answering each with 10 MB of text: the size
  of results.json and of the store, and the process's peak RSS (run it alone for that figure).

Each prints the calls made, the wall time and how the run ended.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from biascheck.core.errors import BiascheckError  # noqa: E402
from biascheck.execution.llm import ModelConfig, import_litellm  # noqa: E402
from biascheck.execution.policy import RetryPolicy  # noqa: E402
from biascheck.reporting.results import build_results  # noqa: E402
from biascheck.reporting.write import write_reports  # noqa: E402
from biascheck.session import RunConfig, run  # noqa: E402
from biascheck.suite import load_suite  # noqa: E402


@contextmanager
def reply_server(chars: int, byte_every_s: float = 0.0):
    """A loopback OpenAI-compatible server answering every request with ``chars`` characters,
    sent at once or one byte every ``byte_every_s`` seconds."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            reply = {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "x",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "A" + " x" * (chars // 2)}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if not byte_every_s:
                self.wfile.write(data)
                return
            try:
                for byte in data:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(byte_every_s)
            except OSError:  # the client gave up
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def measure(name: str, data: Path, cases: int, model: ModelConfig, policy: RetryPolicy = RetryPolicy()) -> None:
    suite = load_suite(ROOT / "suites" / "kobbq", data_dir=data)
    folder = Path(tempfile.mkdtemp())
    import_litellm()  # 2-4 s, not the run's
    started = time.monotonic()
    try:
        result = run([(suite, suite.cases[:cases])], RunConfig(model=model, store_path=folder / "store.sqlite", policy=policy))
    except BiascheckError as exc:
        print(f"{name}: stopped before any call in {time.monotonic() - started:.2f} s: {exc}")
        return
    elapsed = time.monotonic() - started
    runs, prompts = build_results(result)
    write_reports(runs, folder / "report", prompts=prompts)
    stats = result.stats
    store = sum(p.stat().st_size for p in folder.glob("store.sqlite*"))
    print(
        f"{name}: {cases} cases, {stats.calls} calls, {stats.retries} retries, {stats.errors} errors in {elapsed:.2f} s; "
        f"ended {'incomplete: ' + stats.incomplete if stats.incomplete else 'complete'}"
    )
    errors = sorted({o.error for o in result.suites[0].outcomes.values() if o.error and not o.error.startswith("not run")})
    if errors:
        print(f"  error: {errors[0]}")
    print(
        f"  results.json {(folder / 'report' / 'results.json').stat().st_size / 1e6:.2f} MB, store {store / 1e6:.2f} MB, "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="mirror folder of the benchmark files")
    parser.add_argument("what", nargs="*", default=["trickle", "missing-key", "bad-provider", "closed-port", "huge-replies"])
    args = parser.parse_args()
    for what in args.what:
        if what == "trickle":
            os.environ.setdefault("OPENAI_API_KEY", "sk-unused-000000")
            with reply_server(10, byte_every_s=1.0) as api_base:
                measure(what, args.data, 1, ModelConfig("openai/x", api_base=api_base, timeout=3), RetryPolicy(max_retries=0))
        elif what == "missing-key":
            os.environ.pop("OPENAI_API_KEY", None)
            measure(what, args.data, 8, ModelConfig("openai/gpt-4o-mini"))
        elif what == "bad-provider":
            env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
            started = time.monotonic()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:randomly",
                    "-q",
                    "--biascheck",
                    "suites/kobbq",
                    "--biascheck-model",
                    "opneai/gpt-4o-mini",
                    "--biascheck-data",
                    str(args.data),
                    "--biascheck-cache",
                    str(Path(tempfile.mkdtemp()) / "store.sqlite"),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            last = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-1]
            print(f"{what}: exit {done.returncode} in {time.monotonic() - started:.2f} s: {last}")
        elif what == "closed-port":
            os.environ.setdefault("OPENAI_API_KEY", "sk-unused-000000")
            measure(what, args.data, 60, ModelConfig("openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1"))
        elif what == "huge-replies":
            os.environ.setdefault("OPENAI_API_KEY", "sk-unused-000000")
            with reply_server(10_000_000) as api_base:
                measure(what, args.data, 8, ModelConfig("openai/x", api_base=api_base))
        else:
            parser.error(f"unknown measurement {what!r}")


if __name__ == "__main__":
    main()
