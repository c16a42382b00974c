"""The simulated model server in a subprocess (so it runs on its own CPU core).

:func:`spawn_sim_server` starts ``python -m biascheck.sim serve`` and waits for its
listening line; :class:`SimProcess` exposes ``base_url``, ``stats()`` and ``close()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from biascheck.core.errors import BiascheckError
from biascheck.core.processes import stop_process
from biascheck.sim.cli import LISTENING_PREFIX

_STARTUP_TIMEOUT_S = 60.0
_TERMINATE_GRACE_S = 5.0
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]


class SimProcess:
    """A running ``biascheck sim serve`` subprocess; a context manager that closes it."""

    def __init__(self, process: subprocess.Popen[str], base_url: str, stderr_file: IO[str]):
        self.process = process
        self.base_url = base_url
        self._stderr_file = stderr_file

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def reset_stats(self) -> None:
        self._call("POST", "/stats/reset")

    def _call(self, method: str, path: str) -> dict[str, Any]:
        url = self.base_url.removesuffix("/v1") + path
        request = urllib.request.Request(url, data=b"" if method == "POST" else None, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def close(self) -> None:
        stop_process(self.process, _TERMINATE_GRACE_S)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr_file.close()

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def spawn_sim_server(
    suite_dirs: Iterable[Path | str],
    data_dir: Path | str | None = None,
    *,
    default_persona: str | None = None,
    startup_timeout_s: float = _STARTUP_TIMEOUT_S,
    allow_unpinned: bool = False,
) -> SimProcess:
    """Start the server for ``suite_dirs`` and return once it is listening."""
    command = [sys.executable, "-m", "biascheck.sim", "serve"]
    for suite_dir in suite_dirs:
        command += ["--suite", str(suite_dir)]
    if data_dir is not None:
        command += ["--data", str(data_dir)]
    if default_persona is not None:
        command += ["--persona", default_persona]
    if allow_unpinned:
        command.append("--allow-unpinned-data")
    env = dict(os.environ)
    # The child must import this same biascheck, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_PARENT), env.get("PYTHONPATH")]))
    # stderr goes to a file, not a pipe nobody reads, so a chatty child can never block on it.
    stderr_file = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        stdin=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        env=env,
    )
    sim = SimProcess(process, "", stderr_file)
    try:
        sim.base_url = _wait_for_listening_line(process, startup_timeout_s, stderr_file)
    except BaseException:
        sim.close()
        raise
    return sim


def _wait_for_listening_line(process: subprocess.Popen[str], timeout_s: float, stderr_file: IO[str]) -> str:
    stdout = process.stdout
    assert stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.05)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        if line.startswith(LISTENING_PREFIX):
            return line[len(LISTENING_PREFIX) :].strip()
        # EOF or an unexpected line: the child is failing; let it finish writing stderr.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=_TERMINATE_GRACE_S)
        break
    if process.poll() is None:
        process.kill()
        process.wait()
        problem = f"did not start listening within {timeout_s:g} s"
    elif process.returncode == -signal.SIGINT:
        # A terminal's Ctrl-C reaches the whole process group: this process is being interrupted
        # too, which asyncio only notes while this code blocks its loop. The interrupt, not a failure.
        raise KeyboardInterrupt
    else:
        problem = f"exited with code {process.returncode}: {_last_line(stderr_file) or 'no error output'}"
    raise BiascheckError("biascheck sim serve", None, problem, "run `python -m biascheck.sim serve --suite DIR` to see the full error")


def _last_line(stderr_file: IO[str]) -> str:
    stderr_file.flush()
    stderr_file.seek(0)
    lines = [line.strip() for line in stderr_file.read().splitlines() if line.strip()]
    return lines[-1] if lines else ""
