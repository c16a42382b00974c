"""Everything around the model calls (issue 26, parts 2 and 3): how long biascheck takes before,
between and after them. Each figure is one pytest (or server) process, measured from outside.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/startup.py                  # all but --demo and --sim
    BIASCHECK_DATA_DIR=../shared/datasets python bench/startup.py --only listing   # biascheck suites
    BIASCHECK_DATA_DIR=../shared/datasets python bench/startup.py --demo --sim     # everything
    python bench/startup.py --only collect --suites kobbq,hbb-full                 # a part
    python bench/startup.py --project /tmp/old-checkout                            # another source tree

Figures:

- ``collect``: ``pytest --biascheck SUITE --collect-only -q`` of each shipped suite (suites/*): CPU
  (user + system) and peak resident memory of the process, and whether it imported litellm;
- ``listing``: ``biascheck suites`` of every suite with the mirror (BIASCHECK_DATA_DIR), first
  with an empty download cache (what a user's first listing costs: the shipped counts, or counting)
  and then again from the cache it left: wall and CPU of each;
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
- with ``--demo``, also the cold demo through litellm's client (``--biascheck-http-client
  litellm``: the client before the fast path), and with the model client swapped for a bare
  aiohttp one (a plugin of this script's, never biascheck's: what the run costs besides a client);
- ``hbb-scoring`` (``--hbb-store PATH``): scoring and reports of the full HBB (773,500 answers) from
  a warm store, in a fresh process (``session.run``, results, report files: wall, CPU, peak
  memory), then the whole ``pytest --biascheck suites/hbb-full`` run from it. A missing store is
  filled first with bench/fill_store.py (the simulator's answers without HTTP, about 8 minutes).

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


def listing(project: Path, workdir: Path) -> None:
    mirror = os.environ.get("BIASCHECK_DATA_DIR")
    print(f"listing ({load()}): biascheck suites --data {mirror}, with an empty download cache, then from it")
    env = environment(project, BIASCHECK_CACHE_DIR=str(workdir / "listing-cache"))
    command = [sys.executable, "-m", "biascheck.cli", "suites", *(["--data", mirror] if mirror else [])]
    for label in ("first", "again"):
        run = measure(command, cwd=workdir, env=env)
        rows = [line.split() for line in run["output"].splitlines() if line.split()[1:2] in (["packaged"], ["local"])]
        counted = sum(1 for cells in rows if cells[3] != "-" and not cells[3].endswith("*"))  # "*": the rows a manifest declares
        print(f"  {label:<6} {run['wall']:6.2f} s wall {run['cpu']:6.2f} s CPU; rc {run['rc']}; {counted} suites with counts ({load()})", flush=True)


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


BARE_CLIENT = r"""
# A bench plugin: the run's model client swapped for a bare aiohttp loop against the simulator.
import contextlib

import aiohttp

import biascheck.session as session
from biascheck.execution.llm import Completion
from biascheck.execution.providers import simulator


class BareClient:
    def __init__(self, base_url, persona):
        self.url, self.persona, self.http = base_url + "/chat/completions", persona, None

    async def complete(self, messages, params, sample=0):
        if self.http is None:
            self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        body = {"model": self.persona, "messages": messages, **params}
        if sample:
            body["biascheck_sample"] = sample
        async with self.http.post(self.url, json=body) as reply:
            data = await reply.json()
        choice, usage = data["choices"][0], data["usage"]
        counts = {k: int(usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        return Completion(choice["message"]["content"], choice["finish_reason"], counts, 0.0, None, False, data.get("model"), None)

    async def aclose(self):
        if self.http is not None:
            await self.http.close()


@contextlib.contextmanager
def bare_open(self, model, *, require_price, where="--biascheck-model"):
    if self._sim_url is None:
        self._sim_url = self._stack.enter_context(simulator([s.manifest.directory for s in self._suites], self._data_dir))
    yield BareClient(self._sim_url, model.model.removeprefix("sim/"))


session._Clients.open = bare_open
"""


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
    # A tree from before the fast path has only litellm's client, which its cold figure above measured.
    option = ["--biascheck-http-client", "litellm"] if "biascheck-http-client" in (project / "biascheck" / "options.py").read_text() else []
    through_litellm = measure([*command[:-1], str(workdir / "demo-litellm.sqlite"), *option], cwd=project, env=environment(project))
    tail = through_litellm["output"].strip().splitlines()[-1] if through_litellm["output"].strip() else ""
    print(
        f"  cold through litellm's client (--biascheck-http-client litellm, {load()}): {through_litellm['wall']:.1f} s wall, "
        f"{through_litellm['cpu']:.1f} s CPU, peak {through_litellm['rss_mb']:.0f} MB; rc {through_litellm['rc']}: {tail}"
    )
    (workdir / "bare_client.py").write_text(BARE_CLIENT)
    bare_store = workdir / "demo-bare.sqlite"
    bare = measure(
        [*command[:-1], str(bare_store), "-p", "bare_client"],
        cwd=project,
        env=environment(project, PYTHONPATH=os.pathsep.join([str(project), str(workdir)])),
    )
    tail = bare["output"].strip().splitlines()[-1] if bare["output"].strip() else ""
    print(
        f"  cold with a bare aiohttp client instead of litellm's ({load()}): {bare['wall']:.1f} s wall, "
        f"{bare['cpu']:.1f} s CPU (simulator included), peak {bare['rss_mb']:.0f} MB; rc {bare['rc']}: {tail}",
        flush=True,
    )


SCORING = r"""
import resource, sys, time
from pathlib import Path

start = time.perf_counter()
from biascheck.execution.llm import ModelConfig
from biascheck.reporting.results import build_results
from biascheck.reporting.write import write_reports
from biascheck.session import RunConfig, run
from biascheck.suite import load_suite

suite = load_suite("suites/hbb-full")
loaded = time.perf_counter()
result = run([(suite, suite.cases)], RunConfig(model=ModelConfig("sim/stereotyped"), store_path=Path(sys.argv[1])))
scored = time.perf_counter()
runs, prompts = build_results(result)
write_reports(runs, Path(sys.argv[2]), {}, prompts)
done = time.perf_counter()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(f"  {result.stats.cache_hits:,} answers from the store, {result.stats.calls} calls: load {loaded - start:.1f} s, "
      f"score {scored - loaded:.1f} s, results and reports {done - scored:.1f} s; {done - start:.1f} s wall, "
      f"{usage.ru_utime + usage.ru_stime:.1f} s CPU, peak {usage.ru_maxrss / 1024:.0f} MB")
"""


def hbb_scoring(project: Path, workdir: Path, store: Path) -> None:
    if not store.exists():
        print(f"filling {store} with the simulator's 773,500 answers (bench/fill_store.py)...", flush=True)
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "fill_store.py"), "suites/hbb-full", str(store), "--estimator", "sampling"],
            cwd=project,
            env=environment(project),
            check=True,
        )
    print(f"full HBB from a warm store ({load()}): session.run, results.json and report files, in a fresh process")
    script = workdir / "scoring.py"
    script.write_text(SCORING)
    run = measure([sys.executable, str(script), str(store), str(workdir / "hbb-report")], cwd=project, env=environment(project))
    print(run["output"].rstrip() or f"  rc {run['rc']}", flush=True)
    print(f"  (the process: {run['wall']:.1f} s wall, {run['cpu']:.1f} s CPU, peak {run['rss_mb']:.0f} MB)")
    command = pytest_command(
        "--biascheck", "suites/hbb-full", "--biascheck-model", "sim/stereotyped", "--biascheck-cache", str(store),
        "--biascheck-report", str(workdir / "hbb-pytest-report"),
    )  # fmt: skip
    whole = measure(command, cwd=project, env=environment(project))
    tail = whole["output"].strip().splitlines()[-1] if whole["output"].strip() else ""
    print(
        f"  pytest --biascheck suites/hbb-full, the same store ({load()}): {whole['wall']:.1f} s wall, {whole['cpu']:.1f} s CPU, "
        f"peak {whole['rss_mb']:.0f} MB; rc {whole['rc']}: {tail}",
        flush=True,
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
    parser.add_argument(
        "--only",
        default="listing,collect,first-call,missing-key",
        help="comma-separated: listing, collect, first-call, missing-key, demo, sim, hbb-scoring",
    )
    parser.add_argument("--demo", action="store_true", help="also the cold demo and the warm re-run of KoBBQ (minutes)")
    parser.add_argument("--sim", action="store_true", help="also the simulator's replies per second")
    parser.add_argument("--suites", default=None, help="comma-separated suite names for collect (default: every suites/*)")
    parser.add_argument("--hbb-store", type=Path, default=None, help="also the full HBB's scoring from this warm store (filled if missing)")
    args = parser.parse_args()
    project = args.project.resolve()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    parts += [p for p, wanted in (("demo", args.demo), ("sim", args.sim), ("hbb-scoring", args.hbb_store)) if wanted and p not in parts]
    suites = args.suites.split(",") if args.suites else sorted(p.parent.name for p in (project / "suites").glob("*/suite.toml"))
    commit = subprocess.run(["git", "-C", str(project), "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip()
    print(f"biascheck at {project} ({commit or 'not a git checkout'}); {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    print(
        json.dumps({"PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"), "BIASCHECK_DATA_DIR": os.environ.get("BIASCHECK_DATA_DIR")})
    )
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        for part in parts:
            {"listing": lambda: listing(project, workdir), "collect": lambda: collect(project, suites), "first-call": lambda: first_call(project, workdir),
             "missing-key": lambda: missing_key(project, workdir), "demo": lambda: demo(project, workdir),
             "sim": lambda: sim(project, workdir),
             "hbb-scoring": lambda: hbb_scoring(project, workdir, (args.hbb_store or workdir / "hbb.sqlite").resolve())}[part]()  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
