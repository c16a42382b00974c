"""HTTP requests and replies as the simulator's handlers see them (its server and batch endpoints)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class HttpRequest:
    method: str
    target: str  # the path and query as sent
    keep_alive: bool
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case


@dataclass(slots=True)
class HttpReply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


def json_reply(status: int, payload: Any, headers: dict[str, str] | None = None) -> HttpReply:
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    return HttpReply(status, body, headers or {})


def error_reply(status: int, message: str, error_type: str = "invalid_request_error", code: str | None = None) -> HttpReply:
    error = {"message": message, "type": error_type, "param": None, "code": code}
    return json_reply(status, {"error": error})
