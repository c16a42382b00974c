"""Stopping the model servers biascheck starts as subprocesses (the simulator, a local model)."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace_s``: a server stuck in a request
    must not keep a test session or a CI step alive."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
