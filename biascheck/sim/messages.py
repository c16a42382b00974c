"""How the simulator recognises a request: by its messages, whatever the client's message format."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def message_key(messages: Sequence[Mapping[str, Any]]) -> str:
    """The lookup key of a request: its messages' roles and contents, in order, as compact JSON.

    OpenAI content-part lists (``[{"type": "text", "text": ...}]``) are joined to one string, so
    a client that sends parts instead of a plain string still finds its case.
    """
    pairs = [{"role": m.get("role"), "content": _content_text(m.get("content"))} for m in messages]
    return json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))


def _content_text(content: Any) -> Any:
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(texts)
    return content
