"""Batch mode at full scale (issue 14): the full HBB with sampling (773,500 requests) through the
simulator's OpenAI batch endpoints.

1. A clean run into a fresh store: wall time to submit, to complete and collect, to score; peak
   memory of the pytest process.
2. A run killed with SIGKILL mid-collection (some batches collected, others not), then the same
   command again on its store: requests submitted by the second run that the first had submitted
   already (target 0), requests lost or duplicated (target 0), peak memory.

    python bench/batch_hbb.py [--suite suites/hbb-full] [--skip-clean]

The simulator runs as its own process for the whole measurement (``biascheck sim serve``), as a
provider would: a batch outlives the run that submitted it. About 15 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from biascheck.sim.process import spawn_sim_server  # noqa: E402

MODEL = "sim/stereotyped?p=0.2&seed=5"


def command(suite: str, url: str, store: Path, report: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--biascheck", suite,
        "--biascheck-model", MODEL, "--biascheck-api-base", url, "--biascheck-estimator", "sampling",
        "--biascheck-batch", "--biascheck-batch-poll", "2", "--biascheck-cache", str(store), "--biascheck-report", str(report),
    ]  # fmt: skip


def states(store: Path) -> dict[str, int]:
    if not store.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            return dict(db.execute("SELECT state, count(*) FROM batches GROUP BY state").fetchall())
    except sqlite3.Error:
        return {}


def run(args: list[str], log: Path, kill_when=None) -> tuple[float, float, int, bool]:
    """(wall s, peak RSS MB, exit status, killed) of one pytest process."""
    start = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        killed = False
        while kill_when is not None and process.poll() is None:
            if kill_when():
                os.killpg(process.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.2)
        _, status, usage = os.wait4(process.pid, 0)
    return time.monotonic() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), killed


def phases(store: Path, started: float) -> str:
    with sqlite3.connect(store) as db:
        first, last_submit, last_update = db.execute("SELECT min(submitted_at), max(submitted_at), max(updated_at) FROM batches").fetchone()
    return f"submit {last_submit - started:.1f} s (first batch at {first - started:.1f} s), complete and collect {last_update - last_submit:.1f} s"


def answered(store: Path) -> int:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT count(*) FROM responses").fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="suites/hbb-full")
    parser.add_argument("--skip-clean", action="store_true", help="only the kill-and-resume measurement")
    args = parser.parse_args()
    data = os.environ.setdefault("BIASCHECK_DATA_DIR", str(ROOT.parent / "shared" / "datasets"))
    os.environ["BIASCHECK_OFFLINE"] = "1"
    out = Path(tempfile.mkdtemp(prefix="batch-hbb-"))
    print(f"work folder {out}")

    if not args.skip_clean:
        with spawn_sim_server([ROOT / args.suite], data) as sim:
            store = out / "clean.sqlite"
            wall_start = time.time()
            wall, rss, status, _ = run(command(args.suite, sim.base_url, store, out / "clean"), out / "clean.log")
            document = json.loads((out / "clean" / "results.json").read_text())["run"]
            stats = sim.stats()
            print(
                f"clean run: exit {status}, {wall:.1f} s wall ({phases(store, wall_start)}), peak RSS {rss:.0f} MB; "
                f"{document['calls']:,} requests in {stats['batches_created']} batches, {answered(store):,} answers stored, "
                f"{document['errors']} errors, simulator saw {stats['batched_requests']:,} batched requests"
            )

    with spawn_sim_server([ROOT / args.suite], data) as sim:
        store = out / "killed.sqlite"

        def mid_collection() -> bool:
            seen = states(store)
            return seen.get("collected", 0) >= 1 and seen.get("running", 0) >= 1 and not seen.get("submitting")

        wall, rss, status, killed = run(command(args.suite, sim.base_url, store, out / "killed"), out / "killed.log", mid_collection)
        at_kill, stored_at_kill, sent_before = states(store), answered(store), sim.stats()["batched_requests"]
        print(f"killed run: SIGKILL={killed} after {wall:.1f} s, batches {at_kill}, {stored_at_kill:,} answers stored, peak RSS {rss:.0f} MB")
        wall, rss, status, _ = run(command(args.suite, sim.base_url, store, out / "resumed"), out / "resumed.log")
        document = json.loads((out / "resumed" / "results.json").read_text())["run"]
        stats = sim.stats()
        total = document["requests"]
        print(f"resumed run: exit {status}, {wall:.1f} s, peak RSS {rss:.0f} MB, {document['calls']:,} requests submitted, batches {states(store)}")
        print(
            f"requests {total:,}; submitted to the simulator over both runs {stats['batched_requests']:,} "
            f"(duplicates {stats['batched_requests'] - total:,}); resubmitted by the resumed run "
            f"{max(0, document['calls'] - (total - sent_before)):,}; answers stored {answered(store):,} (lost {total - answered(store):,}); "
            f"errors {document['errors']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
