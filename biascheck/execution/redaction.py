"""Credentials kept out of everything biascheck writes: the secrets a run is configured with (in
environment variables, an ``api_base``, a key passed in) and whatever has a credential's shape,
removed from a reply, an error, or an endpoint before it reaches a store, report or log."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """An endpoint as it may be reported: credentials in the URL and its query are removed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    if parts.username or parts.password:
        netloc = "[redacted]@" + netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "[redacted]" if parts.query else "", ""))


_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s@]+@")
_SECRET_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})")


# Values that must never be kept, registered when a client is built (e.g. an api_base's query).
_EXTRA_SECRETS: set[str] = set()


def register_secrets_of_url(url: str | None) -> None:
    if not url:
        return
    parts = urlsplit(url)
    for value in (parts.password, parts.username, parts.query):
        if value and len(value) >= 4:
            _EXTRA_SECRETS.add(value)
    for pair in parts.query.split("&"):
        value = pair.partition("=")[2]
        if len(value) >= 4:
            _EXTRA_SECRETS.add(value)


def configured_secrets(*extra: str | None) -> tuple[str, ...]:
    """Every configured secret, longest first: the credentials in environment variables (the
    ``*_KEY``/``*_TOKEN`` ones litellm reads), in an ``api_base``, and ``extra`` (a key passed in)."""
    values = {v for v in _EXTRA_SECRETS | set(filter(None, extra)) if len(v) >= 4}
    values |= {v for name, v in os.environ.items() if v and len(v) >= 8 and _SECRET_ENV.search(name.upper())}
    return tuple(sorted(values, key=len, reverse=True))


def redact_secrets(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """``text`` without any of ``secrets`` (default: :func:`configured_secrets`). A model's reply
    goes through this before it is stored or reported: a server may echo a key."""
    for value in configured_secrets() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, "[redacted]")
    return text


def redact(text: str) -> str:
    """Remove anything that could be a credential before text reaches a store, report or log:
    configured secrets, and whatever has a credential's shape (an error may quote a header)."""
    text = _URL_CREDENTIALS.sub("[redacted]@", redact_secrets(text))
    return _SECRET_SHAPES.sub("[redacted]", text)
