"""A tiny OpenAI-compatible HTTP server on loopback, for tests that drive litellm's real HTTP path
against a server that misbehaves on purpose (refuses parameters, trickles, asks to retry later)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The handler of one request: (handler, request number from 0, request body).
Serve = Callable[[BaseHTTPRequestHandler, int, dict], None]


def chat_answer(body: dict, path: str = "/v1/chat/completions") -> dict:
    """A well-formed reply "A" to ``body``: OpenAI's chat completion, or Anthropic's message."""
    if path.endswith("/messages"):  # Anthropic's API, for litellm's anthropic/ provider
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model", "m"),
                "content": [{"type": "text", "text": "A"}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": 1}}
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


@contextlib.contextmanager
def loopback_server(serve: Serve) -> Iterator[tuple[str, list[float]]]:
    """(api_base, monotonic times at which requests arrived) of a loopback server answering with ``serve``."""
    arrivals: list[float] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with lock:
                arrivals.append(time.monotonic())
                n = len(arrivals) - 1
            with contextlib.suppress(OSError):  # the client hung up
                serve(self, n, body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", arrivals
    finally:
        server.shutdown()
        server.server_close()
