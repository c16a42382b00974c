"""What can be told about a model before a suite is even loaded, in milliseconds and without
litellm (2-4 s to import): its provider's credentials are missing, or the endpoint it names does
not listen. The plugin asks at start-up (pytest_configure), so a run that cannot make its calls
says so in one line before collecting 100,000 items; the session asks litellm itself (``check_ready``)
before the first call, for every provider.

Both are asked only when the run will make calls: the response store holds no answer of the model
(:func:`store_answers_model`). A store that does may answer the whole run, which needs neither a
key nor a server; that is known only once the cases are built, and is left to the session.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path
from urllib.parse import quote, urlsplit

from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option, option
from biascheck.execution.llm import ModelConfig
from biascheck.execution.redaction import redact_url

# A provider prefix -> (the variables the error names, any one of which satisfies it): as
# ``litellm.validate_environment`` tells for the model strings of these providers (it counts a
# variable set to anything, even empty, as set). tests/test_model_checks.py holds the two equal.
# Providers not listed here are checked by litellm before the first call.
CREDENTIALS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "openai": (("OPENAI_API_KEY",), ("OPENAI_API_KEY",)),
    "anthropic": (("ANTHROPIC_API_KEY",), ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")),
    "gemini": (("GOOGLE_API_KEY", "GEMINI_API_KEY"), ("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    "mistral": (("MISTRAL_API_KEY",), ("MISTRAL_API_KEY",)),
    "groq": (("GROQ_API_KEY",), ("GROQ_API_KEY",)),
    "cohere": (("COHERE_API_KEY",), ("COHERE_API_KEY",)),
    "together_ai": (("TOGETHERAI_API_KEY",), ("TOGETHERAI_API_KEY",)),
    "openrouter": (("OPENROUTER_API_KEY",), ("OPENROUTER_API_KEY",)),
    "deepseek": (("DEEPSEEK_API_KEY",), ("DEEPSEEK_API_KEY",)),
    "xai": (("XAI_API_KEY",), ("XAI_API_KEY",)),
    "deepinfra": (("DEEPINFRA_API_KEY",), ("DEEPINFRA_API_KEY",)),
    "cerebras": (("CEREBRAS_API_KEY",), ("CEREBRAS_API_KEY",)),
    "perplexity": (("PERPLEXITYAI_API_KEY",), ("PERPLEXITYAI_API_KEY",)),
}

# How long a start-up probe waits for a TCP connection. One that does not answer in time is not
# judged here (a slow network is not a dead server): the run's circuit breaker is.
PROBE_TIMEOUT_S = 3.0


def check_credentials(model: ModelConfig, where: object = Option("model")) -> None:
    """Refuse a model of a listed provider whose credentials are not set, in the words of
    ``check_ready``; any other model string is left to it."""
    if model.is_sim or "/" not in model.model:
        return
    named, accepted = CREDENTIALS.get(model.model.split("/", 1)[0], ((), ()))
    if not named or any(name in os.environ for name in accepted):
        return
    fix = f"export {named[0]}=..."
    if model.api_base and model.model.startswith("openai/"):
        fix += " (a local server that checks no key takes any value, e.g. unused-local)"
    raise BiascheckError(where, None, f"{model.model} needs {' or '.join(named)}, which is not set", fix)


def check_endpoint(model: ModelConfig, where: object = Option("model")) -> None:
    """Refuse a model whose endpoint (its api_base) refuses connections or names no host; one
    that does not answer within PROBE_TIMEOUT_S is left to the run."""
    if not model.api_base:
        return
    reason = unreachable(model.api_base)
    if reason:
        raise BiascheckError(
            where,
            None,
            f"cannot reach {model.model}'s endpoint {redact_url(model.api_base)} ({reason})",
            f"start the server, or point {option('api-base')} at the one that serves it",
        )


def unreachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why nothing can be reached at ``url`` (connection refused, no such host), or None when a
    connection was made or the probe could not tell."""
    parts = urlsplit(url)
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None  # a malformed port: the client's own error says it better
    if not host or parts.scheme not in ("http", "https"):
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return f"nothing listens on {host}:{port}: connection refused"
    except socket.gaierror as exc:
        return f"no such host {host!r}: {exc.strerror or exc}"
    except OSError:
        return None  # a timeout, an unreachable network: not a verdict on the server


def store_answers_model(store: Path, model: str) -> bool:
    """Whether the response store at ``store`` holds any answer of ``model`` (read-only: a missing
    store is not created). A store that cannot be read counts as holding some: the session reads
    it and says what is wrong with it."""
    if not store.exists():
        return False
    try:
        db = sqlite3.connect(f"file:{quote(str(store.resolve()))}?mode=ro", uri=True)
        try:
            return db.execute("SELECT EXISTS (SELECT 1 FROM responses WHERE model = ?)", (model,)).fetchone()[0] == 1
        finally:
            db.close()
    except sqlite3.OperationalError as exc:
        return "no such table" not in str(exc)  # an empty file, or a store never written to: no answers
    except sqlite3.Error:
        return True
