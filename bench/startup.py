"""Everything around the model calls (issue 26, parts 2 and 3): how long biascheck takes before,
between and after them. Each figure is one pytest (or server) process, measured from outside.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/startup.py                  # all but --demo and --sim
    BIASCHECK_DATA_DIR=../shared/datasets python bench/startup.py --demo --sim     # everything
    python bench/startup.py --only collect --suites kobbq,hbb-full                 # a part
    python bench/startup.py --project /tmp/old-checkout                            # another source tree

Figures:

- ``collect``: ``pytest --biascheck SUITE --collect-only -q`` of each shipped suite (suites/*): CPU
  (user + system) and peak resident memory of the process, and whether it imported litellm;
- ``first-call``: a 240-case ``-k`` selection of KoBBQ against ``sim/stereotyped?p=1``, cold store:
  seconds from the process start to the first answer stored (the store's ``created_at``), and in
  all; the same selection again from the warm store;
- ``missing-key``: ``openai/gpt-4o-mini`` without OPENAI_API_KEY on KoBBQ and on hbb-full: seconds
  to the error, and its line;
- ``demo`` (``--demo``): the README's offline demo (the whole KoBBQ, 34,200 calls, cold) and then
  the warm re-run of the whole suite from its store (0 calls);
- ``sim`` (``--sim``): the simulator's QA replies per second, served to a bare aiohttp loop in this
  process (64 connections) with the server in its own: calls/s, and calls per CPU second of the
  server process (its one core).

``--project DIR`` measures the biascheck in DIR (its ``biascheck`` package first on PYTHONPATH,
subprocesses started there), e.g. a copy of an earlier commit (``git archive REV | tar -x -C DIR``)
for before/after figures from one machine. The load average is printed with each figure: on a
shared machine read the figures beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SELECTION = "age-001 or age-002"  # KoBBQ templates age-001a/b and age-002a/b: 4 templates x 60 cases


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def environment(project: Path, **extra: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project), env.get("PYTHONPATH")]))
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("LITELLM_MODE", "PRODUCTION")
    env.setdefault("BIASCHECK_OFFLINE", "1")
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def measure(command: list[str], *, cwd: Path, env: dict[str, str]) -> dict:
    """Run ``command``; its wall time, CPU (user + system, children included) and peak RSS."""
    with tempfile.TemporaryFile() as out:
        started = time.time()
        t0 = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return {
        "started": started,
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "rc": process.returncode,
        "output": text,
    }


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def collect(project: Path, suites: list[str]) -> None:
    print(f"collect-only ({load()}): pytest --biascheck SUITE --biascheck-model sim/fair --collect-only -q")
    print(f"  {'suite':<16} {'items':>8} {'CPU s':>7} {'wall s':>7} {'peak MB':>8}  litellm imported")
    probe = Path(tempfile.mkdtemp()) / "probe.py"
    # A plugin that says, at the end of the session, whether litellm was imported.
    probe.write_text("import sys\ndef pytest_unconfigure(config):\n    print('litellm imported:', 'litellm' in sys.modules)\n")
    env = environment(project, PYTHONPATH=os.pathsep.join([str(project), str(probe.parent)]))
    for name in suites:
        run = measure(
            pytest_command("-p", "probe", "--biascheck", f"suites/{name}", "--biascheck-model", "sim/fair", "--collect-only", "-q"),
            cwd=project,
            env=env,
        )
        items = next((line.split()[0] for line in run["output"].splitlines() if " collected in " in line or "tests collected" in line), "?")
        imported = next((line.split(":")[1].strip() for line in run["output"].splitlines() if line.startswith("litellm imported:")), "?")
        if run["rc"] != 0:
            items = f"rc {run['rc']}"
        print(f"  {name:<16} {items:>8} {run['cpu']:7.2f} {run['wall']:7.2f} {run['rss_mb']:8.0f}  {imported}", flush=True)


def first_answer(store: Path) -> float | None:
    if not store.exists():
        return None
    with sqlite3.connect(store) as db:
        return db.execute("SELECT min(created_at) FROM responses").fetchone()[0]


def first_call(project: Path, workdir: Path) -> None:
    store = workdir / "selection.sqlite"
    command = pytest_command(
        "--biascheck", "suites/kobbq", "--biascheck-model", "sim/stereotyped?p=1", "-k", SELECTION, "--biascheck-cache", str(store)
    )
    run = measure(command, cwd=project, env=environment(project))
    first = first_answer(store)
    summary = run["output"].strip().splitlines()[-1] if run["output"].strip() else ""
    print(f"240-case selection, cold ({load()}): pytest --biascheck suites/kobbq --biascheck-model 'sim/stereotyped?p=1' -k '{SELECTION}'")
    print(f"  first answer stored after {first - run['started']:.2f} s" if first else "  no answer stored")
    print(f"  total {run['wall']:.2f} s wall, {run['cpu']:.2f} s CPU (children included), peak {run['rss_mb']:.0f} MB; rc {run['rc']}: {summary}")
    again = measure(command, cwd=project, env=environment(project))
    print(f"  again from the warm store: {again['wall']:.2f} s wall, {again['cpu']:.2f} s CPU; rc {again['rc']}", flush=True)


def missing_key(project: Path, workdir: Path) -> None:
    print(f"missing key ({load()}): pytest --biascheck SUITE --biascheck-model openai/gpt-4o-mini, OPENAI_API_KEY unset, empty store")
    env = environment(project, OPENAI_API_KEY=None, OPENAI_API_BASE=None, OPENAI_BASE_URL=None)
    for name in ("kobbq", "hbb-full"):
        store = workdir / f"nokey-{name}.sqlite"
        run = measure(
            pytest_command("--biascheck", f"suites/{name}", "--biascheck-model", "openai/gpt-4o-mini", "--biascheck-cache", str(store)),
            cwd=project,
            env=env,
        )
        line = next((line for line in run["output"].splitlines() if "OPENAI_API_KEY" in line), "(no line names OPENAI_API_KEY)")
        print(f"  {name:<9} {run['wall']:6.2f} s to exit {run['rc']}: {line.strip()}", flush=True)


def demo(project: Path, workdir: Path) -> None:
    store = workdir / "demo.sqlite"
    data = os.environ.get("BIASCHECK_DATA_DIR", str(ROOT.parent / "shared" / "datasets"))
    command = pytest_command(
        "--biascheck", "suites/kobbq", "--biascheck-model", "sim/stereotyped", "--biascheck-data", data, "--biascheck-cache", str(store)
    )
    print(f"offline demo ({load()}): pytest --biascheck suites/kobbq --biascheck-model sim/stereotyped --biascheck-data {data}")
    cold = measure(command, cwd=project, env=environment(project))
    tail = cold["output"].strip().splitlines()[-1] if cold["output"].strip() else ""
    print(
        f"  cold (34,200 calls): {cold['wall']:.1f} s wall, {cold['cpu']:.1f} s CPU (simulator included), peak {cold['rss_mb']:.0f} MB; rc {cold['rc']}: {tail}"
    )
    warm = measure(command, cwd=project, env=environment(project))
    tail = warm["output"].strip().splitlines()[-1] if warm["output"].strip() else ""
    print(
        f"  warm re-run (0 calls, {load()}): {warm['wall']:.1f} s wall, {warm['cpu']:.1f} s CPU, peak {warm['rss_mb']:.0f} MB; rc {warm['rc']}: {tail}"
    )


SIM_CLIENT = r"""
import asyncio, json, os, sys, time
import aiohttp
from biascheck.execution.llm import ModelConfig
from biascheck.session import RunConfig, answer_mode, effective_params
from biascheck.sim.process import spawn_sim_server
from biascheck.suite import load_suite

suite_dir, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
suite = load_suite(suite_dir)
model = ModelConfig("sim/stereotyped")
params = effective_params(suite, model)
mode = answer_mode(suite, RunConfig(model, store_path="unused.sqlite"))
bodies = []
for case in suite.cases:
    for messages, request_params, sample in suite.benchmark.requests(case, params, mode):
        bodies.append(json.dumps({"model": "stereotyped", "messages": messages, **request_params}).encode())
    if len(bodies) >= n:
        break
sim = spawn_sim_server([suite_dir], os.environ.get("BIASCHECK_DATA_DIR"))

def server_cpu():
    fields = open(f"/proc/{sim.process.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

async def main():
    url = sim.base_url + "/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        failed = 0
        async def worker(queue):
            nonlocal failed
            for body in queue:
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as reply:
                    await reply.read()
                    failed += reply.status != 200
        await asyncio.gather(*(worker(iter(bodies[:concurrency * 4])) for _ in range(1)))  # warm-up
        queue = iter(bodies)
        cpu, start = server_cpu(), time.perf_counter()
        await asyncio.gather(*(worker(queue) for _ in range(concurrency)))
        wall, cpu = time.perf_counter() - start, server_cpu() - cpu
        print(f"  {len(bodies):,} QA replies in {wall:.2f} s: {len(bodies) / wall:,.0f} calls/s; "
              f"server {cpu:.2f} CPU s: {len(bodies) / cpu if cpu else float('inf'):,.0f} calls per server CPU second; {failed} not 200")

try:
    asyncio.run(main())
finally:
    sim.close()
"""


def sim(project: Path, workdir: Path) -> None:
    print(f"simulator ({load()}): bare aiohttp loop, 64 connections, KoBBQ chat requests; server in its own process")
    script = workdir / "sim_client.py"
    script.write_text(SIM_CLIENT)
    run = subprocess.run(
        [sys.executable, str(script), "suites/kobbq", "20000", "64"], cwd=project, env=environment(project), capture_output=True, text=True
    )
    print(run.stdout.rstrip() or run.stderr.strip().splitlines()[-1], flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=ROOT, help="the biascheck source tree to measure (default: this one)")
    parser.add_argument("--only", default="collect,first-call,missing-key", help="comma-separated: collect, first-call, missing-key, demo, sim")
    parser.add_argument("--demo", action="store_true", help="also the cold demo and the warm re-run of KoBBQ (minutes)")
    parser.add_argument("--sim", action="store_true", help="also the simulator's replies per second")
    parser.add_argument("--suites", default=None, help="comma-separated suite names for collect (default: every suites/*)")
    args = parser.parse_args()
    project = args.project.resolve()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    parts += [p for p, wanted in (("demo", args.demo), ("sim", args.sim)) if wanted and p not in parts]
    suites = args.suites.split(",") if args.suites else sorted(p.parent.name for p in (project / "suites").glob("*/suite.toml"))
    commit = subprocess.run(["git", "-C", str(project), "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip()
    print(f"biascheck at {project} ({commit or 'not a git checkout'}); {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    print(
        json.dumps({"PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"), "BIASCHECK_DATA_DIR": os.environ.get("BIASCHECK_DATA_DIR")})
    )
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        for part in parts:
            {"collect": lambda: collect(project, suites), "first-call": lambda: first_call(project, workdir),
             "missing-key": lambda: missing_key(project, workdir), "demo": lambda: demo(project, workdir),
             "sim": lambda: sim(project, workdir)}[part]()  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
