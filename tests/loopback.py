"""A tiny OpenAI-compatible HTTP server on loopback, for tests that drive litellm's real HTTP path
against a server that misbehaves on purpose (refuses parameters, trickles, hangs, asks to retry
later, sends huge or broken bodies)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The handler of one request: (handler, request number from 0, request body).
Serve = Callable[[BaseHTTPRequestHandler, int, dict], None]


def chat_answer(body: dict, path: str = "/v1/chat/completions", text: str = "A") -> dict:
    """A well-formed reply ``text`` to ``body``: OpenAI's chat completion, or Anthropic's message."""
    if path.endswith("/messages"):  # Anthropic's API, for litellm's anthropic/ provider
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "m"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
    send_bytes(handler, status, json.dumps(payload).encode(), headers)


def send_bytes(
    handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str] | None = None, content_type: str = "application/json"
) -> None:
    """``data`` as the body, as is (it need not be JSON, nor UTF-8)."""
    handler.send_response(status)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def stopping(handler: BaseHTTPRequestHandler) -> threading.Event:
    """Set when the server of ``handler`` shuts down: a handler that stalls on purpose (hangs,
    trickles) waits on it, so that it ends with its test instead of outliving it."""
    return handler.server.stopping  # type: ignore[attr-defined]


def bearer_token(handler: BaseHTTPRequestHandler) -> str:
    """The API key the client sent (``Authorization: Bearer KEY``), or ""."""
    value = handler.headers.get("authorization", "")
    return value[len("Bearer ") :] if value.lower().startswith("bearer ") else value


class _Server(ThreadingHTTPServer):
    # A listen backlog for hundreds of connections opened at once (socketserver's default is 5:
    # connections past it could hang unaccepted).
    request_queue_size = 512


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

    server = _Server(("127.0.0.1", 0), Handler)
    server.stopping = threading.Event()  # type: ignore[attr-defined]  # see stopping()
    # A short poll: shutdown() waits for it, and with the default 0.5 s every test would too.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", arrivals
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def json_paths(value, prefix: tuple = ()):
    """Every path into a JSON document (keys and list indexes), the document's own () first."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_paths(item, (*prefix, index))


def mutate(draw, document, leaves) -> None:
    """Replace or remove up to three parts of a JSON document, drawn with hypothesis's ``draw``;
    a replaced part becomes one of ``leaves`` (the reply fuzzers' hostile values)."""
    from hypothesis import strategies as st

    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(list(json_paths(document))[1:]))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(leaves)
