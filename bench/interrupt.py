"""Ctrl-C during a run (issue 38): seconds from the signal to the end of the process, for the
README's offline demo (``pytest --biascheck suites/kobbq --biascheck-model sim/stereotyped``), the
same with ``-n 2`` (pytest-xdist) and ``biascheck run``; each from a cold store, interrupted once
``--after`` answers are stored (or ``--seconds`` after its start: during collection, or while
the simulator starts).

    BIASCHECK_DATA_DIR=../shared/datasets python bench/interrupt.py                 # all three
    python bench/interrupt.py --only demo,xdist --after 3000 --repeat 3
    python bench/interrupt.py --project /tmp/old-checkout                           # another source tree

The signal goes to the run's whole process group, as a terminal's Ctrl-C does (the simulator and
xdist's workers get it too); ``--to main`` sends it to the main process alone. Printed for each:
the seconds to the main process's exit and to the last process of its group, its exit code, the
answers in the store against the count its last progress line gives, and that line.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def stored(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=0.1)) as db:
            return db.execute("SELECT count(*) FROM responses").fetchone()[0]
    except sqlite3.Error:  # not created yet, or locked for a moment
        return 0


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie member still counts for killpg: read the states.
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def sigint_as_in_a_terminal() -> None:
    """The measured run's SIGINT handled by default, as a command's in a terminal: run in the
    background (``python bench/interrupt.py &`` from a script), this process ignores SIGINT, and so
    would the run it starts, which would then never see the signal it is sent."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def commands(data: str, store: Path, report: Path) -> dict[str, list[str]]:
    demo = ["--biascheck", "suites/kobbq", "--biascheck-model", "sim/stereotyped", "--biascheck-data", data, "--biascheck-cache", str(store)]
    return {
        "demo": [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *demo],
        "xdist": [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", *demo],
        "run": [sys.executable, "-m", "biascheck.cli", "run", "suites/kobbq", "--model", "sim/stereotyped", "--data", data,
                "--cache", str(store), "--report", str(report)],
    }  # fmt: skip


def interrupt(project: Path, name: str, command: list[str], store: Path, after: int, to: str, seconds: float | None = None) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project), env.get("PYTHONPATH")]))
    env.setdefault("BIASCHECK_OFFLINE", "1")
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(
            command, cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=sigint_as_in_a_terminal,
        )  # fmt: skip
        started = time.monotonic()
        deadline = started + (seconds if seconds is not None else 600)
        while (seconds is not None or stored(store) < after) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if process.poll() is not None:
            out.seek(0)
            print(f"  {name}: ended (rc {process.returncode}) before the signal: {out.read().decode()[-400:]}")
            return
        at = stored(store)
        signalled = time.monotonic()
        if to == "group":
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
            print(f"  {name}: still running 120 s after SIGINT: killed")
        exited = time.monotonic() - signalled
        while group_alive(process.pid) and time.monotonic() - signalled < 120:
            time.sleep(0.02)
        emptied = time.monotonic() - signalled
        if group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if re.match(r"biascheck \S+: ", line)]
    last = lines[-1] if lines else "(no progress line)"
    said = [line for line in text.splitlines() if "interrupted" in line and not line.startswith("biascheck sim")]
    rows = stored(store)
    print(
        f"  {name}: exit {exited:.2f} s after SIGINT (group empty after {emptied:.2f} s), rc {code}; {at} stored at the signal, "
        f"{rows} after ({load()})\n    last progress line: {last}\n    {said[-1] if said else '(no line says interrupted)'}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, default=ROOT, help="the biascheck source tree to measure (default: this one)")
    parser.add_argument("--only", default="demo,xdist,run", help="comma-separated: demo, xdist, run")
    parser.add_argument("--after", type=int, default=5000, help="answers stored before the signal (default 5000)")
    parser.add_argument("--seconds", type=float, default=None, help="instead: the signal this many seconds after the start (e.g. mid-collection)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (default 1)")
    parser.add_argument("--to", choices=("group", "main"), default="group", help="the process group (a terminal's Ctrl-C) or the main process")
    args = parser.parse_args()
    project = args.project.resolve()
    data = os.environ.get("BIASCHECK_DATA_DIR", str(ROOT.parent / "shared" / "datasets"))
    commit = subprocess.run(["git", "-C", str(project), "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip()
    when = f"{args.seconds:g} s" if args.seconds is not None else f"{args.after} answers"
    print(f"biascheck at {project} ({commit or 'not a git checkout'}); {os.cpu_count()} CPUs; SIGINT to the {args.to} after {when}")
    with tempfile.TemporaryDirectory() as scratch:
        for name in [part.strip() for part in args.only.split(",") if part.strip()]:
            for attempt in range(args.repeat):
                store = Path(scratch) / f"{name}-{attempt}.sqlite"
                command = commands(data, store, Path(scratch) / f"report-{name}-{attempt}")[name]
                interrupt(project, name, command, store, args.after, args.to, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
