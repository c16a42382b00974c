"""Log-likelihood requests per second: ``biascheck serve-local``'s server against llama_cpp.server, on the same requests.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/loglikelihood_rps.py [--cases 20] [--llama-cases 1] [--model gemma-3-270m]

The requests are those biascheck's loglikelihood answer mode sends for the KoBBQ subset of
bench/real_model.py (one template of each of 8 categories, prompt 1, the original order): per case,
its prompt followed by " A", " B" and " C", each to ``/v1/completions`` with ``echo``, ``logprobs``
1, ``max_tokens`` 1 and ``temperature`` 0, one at a time, in case order (as biascheck's workers
send them). ``--cases`` cases to serve-local, the first ``--llama-cases`` of them to
llama_cpp.server (``--logits_all true``, as biascheck started it before; 30-60 s a request for
Gemma), both on this machine, one after the other, with every core.

Prints, per server: requests, wall seconds, requests per second, the server process's CPU seconds
(user + sys, from /proc) and requests per CPU second (the figure to read when the machine is
busy), the load average before and after; for serve-local also the mean seconds of a case's first
request (the whole prompt decoded) and of its other two (the shared prefix kept); and, on the
requests both servers answered, the largest difference of their prompt log-probabilities (for a
model with a BOS token, such as Gemma, llama_cpp.server's are right; for SmolLM2 they are one
token late). Needs the [local-model] extra, and llama-cpp-python[server] for the comparison.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_model import KOBBQ_SUBSET, subset_suite  # noqa: E402  (the KoBBQ subset bench/real_model.py reads)


def loglikelihood_bodies(alias: str, cases: int) -> list[tuple[str, int, dict]]:
    """(case id, option, request body) of the first ``cases`` cases' log-likelihood requests."""
    from biascheck.benchmarks.qa.answers import AnswerMode, requests
    from biascheck.execution.llm import loglikelihood_texts
    from biascheck.suite import load_suite

    with tempfile.TemporaryDirectory() as tmp:
        folder = subset_suite(Path(tmp) / "kobbq", "kobbq", KOBBQ_SUBSET, prompts='from_data = "prompts"\nuse = ["1"]')
        suite = load_suite(folder, data_dir=os.environ.get("BIASCHECK_DATA_DIR"))
    out = []
    for case in sorted(suite.cases, key=lambda c: c.case_id)[:cases]:
        for option, (messages, params, _) in enumerate(requests(case, {}, AnswerMode("loglikelihood"))):
            context, continuation = loglikelihood_texts(messages)
            body = {"model": alias, "prompt": context + continuation, **{k: v for k, v in params.items() if k != "echo"}, "echo": True}
            out.append((case.case_id, option, body))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def post(api_base: str, body: dict, timeout: float = 900) -> dict:
    request = urllib.request.Request(api_base + "/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def measure(name: str, api_base: str, pid: int, bodies: list[tuple[str, int, dict]]) -> dict:
    load_before = os.getloadavg()[0]
    cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
    replies, seconds = [], []
    for case_id, option, body in bodies:
        start = time.perf_counter()
        replies.append(post(api_base, body))
        seconds.append(time.perf_counter() - start)
        print(f"{name}: {case_id} option {option}: {seconds[-1]:.2f} s", flush=True)
    wall, cpu = time.perf_counter() - wall0, cpu_seconds(pid) - cpu0
    return {
        "name": name,
        "requests": len(bodies),
        "wall": wall,
        "cpu": cpu,
        "seconds": seconds,
        "options": [option for _, option, _ in bodies],
        "replies": replies,
        "load": (load_before, os.getloadavg()[0]),
    }


def start_llama_cpp_server(model_path: Path, alias: str, chat_format: str | None, threads: int) -> tuple[subprocess.Popen, str]:
    from biascheck.execution.local_model import free_port

    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", alias, "--logits_all", "true"]
    command += [*(["--chat_format", chat_format] if chat_format else []), "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024"]
    command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    api_base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(api_base + "/models", timeout=2):
                return process, api_base
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"llama_cpp.server did not start (exit code {process.poll()})")


def largest_difference(ours: list[dict], theirs: list[dict]) -> tuple[float, int, int]:
    """(largest |difference| of the prompt log-probabilities, positions compared, replies whose tokens differ)."""
    worst, compared, differ = 0.0, 0, 0
    for a, b in zip(ours, theirs):
        la, lb = a["choices"][0]["logprobs"], b["choices"][0]["logprobs"]
        if la["tokens"][:-1] != lb["tokens"][:-1]:  # the generated token aside
            differ += 1
            continue
        for x, y in zip(la["token_logprobs"][:-1], lb["token_logprobs"][:-1]):
            if x is not None and y is not None:
                worst, compared = max(worst, abs(x - y)), compared + 1
    return worst, compared, differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20, help="KoBBQ cases sent to serve-local (3 requests each; default 20)")
    parser.add_argument("--llama-cases", type=int, default=1, help="of them, sent to llama_cpp.server too (default 1; 0: none)")
    parser.add_argument("--model", default="gemma-3-270m", help="gemma-3-270m (default) or smollm2-135m-instruct")
    args = parser.parse_args()
    from biascheck.execution.local_model import local_model, missing_extra, start_local_server

    reason = missing_extra()
    if reason:
        print(f"bench/loglikelihood_rps.py: {reason}", file=sys.stderr)
        return 2
    served = local_model(args.model)
    bodies = loglikelihood_bodies(served.name, args.cases)
    threads = os.cpu_count() or 1
    results = []
    with start_local_server(model=served.name) as server:
        print(f"serve-local: {server.model_path.name} at {server.api_base}", flush=True)
        results.append(measure("serve-local", server.api_base, server.process.pid, bodies))
        model_path = server.model_path
    if args.llama_cases > 0:
        if importlib.util.find_spec("uvicorn") is None:
            print("llama_cpp.server: not installed (pip install 'llama-cpp-python[server]==0.3.36'); skipped", flush=True)
        else:
            process, api_base = start_llama_cpp_server(model_path, served.name, served.chat_format, threads)
            try:
                results.append(measure("llama_cpp.server", api_base, process.pid, bodies[: 3 * args.llama_cases]))
            finally:
                process.kill()
                process.wait()
    print(f"\n{served.description}, {len(bodies) // 3} KoBBQ cases ({len(bodies)} log-likelihood requests), {threads} cores")
    print(f"{'server':<18} {'requests':>8} {'wall s':>8} {'req/s':>8} {'CPU s':>8} {'req/CPU s':>10}  load (1 min) before, after")
    for r in results:
        print(
            f"{r['name']:<18} {r['requests']:>8} {r['wall']:>8.1f} {r['requests'] / r['wall']:>8.3f} {r['cpu']:>8.1f} "
            f"{r['requests'] / r['cpu']:>10.3f}  {r['load'][0]:.1f}, {r['load'][1]:.1f}"
        )
    ours = results[0]
    firsts = [s for s, o in zip(ours["seconds"], ours["options"]) if o == 0]
    others = [s for s, o in zip(ours["seconds"], ours["options"]) if o != 0]
    print(f"serve-local: a case's first request {sum(firsts) / len(firsts):.2f} s on average, its others {sum(others) / max(1, len(others)):.3f} s")
    if len(results) > 1:
        worst, compared, differ = largest_difference(ours["replies"], results[1]["replies"])
        theirs = results[1]
        speedup = (ours["requests"] / ours["wall"]) / (theirs["requests"] / theirs["wall"])
        print(
            f"requests per second, serve-local / llama_cpp.server: {speedup:.0f}x (per CPU second: {(ours['requests'] / ours['cpu']) / (theirs['requests'] / theirs['cpu']):.0f}x)"
        )
        print(f"prompt log-probabilities of the two: largest difference {worst:.2e} over {compared} positions; {differ} replies tokenized otherwise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
