"""Provider batch APIs, simulated: OpenAI's files and batches, and Anthropic's message batches.

Each request of a batch is answered exactly as the same request sent online
(:meth:`SimApp.answer`), so a batch run and an online run of the same requests agree; its attempt
and fault draws are the online first attempt's. The persona named by a batch's first request sets
how the batch behaves:

``batch_delay=S``    seconds from creation before the batch ends (default 0)
``batch_fault=K``    ``failed`` (the batch fails: no output), ``expired`` (it expires: the first half
                     of its requests are answered, the rest end as expired)
``files_fail=N``     the first N upload attempts of each file get an HTTP 500
``create_lost=N``    the first N creations of a batch from each file's content make the batch, then
                     answer 502, as a gateway that lost the provider's reply
``status_fail=N``    the first N status requests of each batch get an HTTP 503

Requests whose online attempt would meet a fault (``fail_rate``) end as that request's error
line, so a batch completes with some failed requests. State is in memory: a restarted
simulator knows no batch, as a provider that lost one would not.

OpenAI endpoints: ``POST /v1/files`` (multipart), ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches`` (with ``after`` and
``limit``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``. Anthropic:
``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
``GET /v1/messages/batches/{id}/results``.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from biascheck.core.errors import BiascheckError
from biascheck.sim.personas import Persona, is_persona_spec, parse_persona
from biascheck.sim.replies import HttpReply, HttpRequest, error_reply, json_reply


class Answering(Protocol):
    """What the batch endpoints need of the simulator: its answer to one request, as sent online."""

    default_persona: Persona | None

    def count_fault(self, kind: str) -> None: ...

    def count(self, **increments: int) -> None: ...

    async def answer(self, request: dict[str, Any], *, batched: bool) -> tuple[int, Any]: ...


# What an OpenAI batch input file may hold, as documented.
MAX_FILE_REQUESTS = 50_000
MAX_FILE_BYTES = 200 << 20
# Anthropic's documented limits on one message batch.
MAX_MESSAGE_BATCH_REQUESTS = 100_000
_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}
_YIELD_EVERY = 500  # requests answered between yields to the server's other connections


@dataclass
class _File:
    id: str
    content: bytes
    purpose: str
    created: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created,
            "filename": f"{self.id}.jsonl",
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class _Batch:
    id: str
    shape: str  # "openai" | "anthropic"
    persona: Persona
    requests: list[tuple[str, dict[str, Any]]]  # (custom_id, body as sent)
    created: float
    metadata: dict[str, str] | None = None
    input_file_id: str | None = None
    status: str = "validating"
    total: int = 0  # requests in it (``requests`` is emptied once they are answered, to spare memory)
    results: list[dict[str, Any]] = field(default_factory=list)  # one line per request, once ended
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, str | None]] | None = None  # OpenAI's batch errors: code, message, param, line
    ended: float | None = None
    task: asyncio.Task | None = None


def _iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat().replace("+00:00", "Z")


def _multipart(content_type: str, body: bytes) -> dict[str, bytes]:
    """The fields of a multipart/form-data body (name -> content)."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if match is None:
        raise ValueError("no multipart boundary")
    fields: dict[str, bytes] = {}
    for part in body.split(b"--" + match.group(1).encode("latin-1"))[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        if name is not None:
            fields[name.group(1).decode()] = content.removesuffix(b"\r\n")
    return fields


class SimBatches:
    """The batch endpoints of one :class:`SimApp`."""

    def __init__(self, app: Answering):
        self.app = app
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self.upload_attempts: Counter[str] = Counter()
        self.create_attempts: Counter[str] = Counter()  # by the input file's content
        self.status_requests: Counter[str] = Counter()  # by batch id
        self._ids = 0

    def routes(self) -> list[tuple[str, re.Pattern[str], Callable[..., Awaitable[HttpReply]]]]:
        return [
            ("POST", re.compile(r"/v1/files"), self.create_file),
            ("GET", re.compile(r"/v1/files/([\w-]+)"), self.retrieve_file),
            ("GET", re.compile(r"/v1/files/([\w-]+)/content"), self.file_content),
            ("POST", re.compile(r"/v1/batches"), self.create_batch),
            ("GET", re.compile(r"/v1/batches"), self.list_batches),
            ("GET", re.compile(r"/v1/batches/([\w-]+)"), self.retrieve_batch),
            ("POST", re.compile(r"/v1/batches/([\w-]+)/cancel"), self.cancel_batch),
            ("POST", re.compile(r"/v1/messages/batches"), self.create_message_batch),
            ("GET", re.compile(r"/v1/messages/batches/([\w-]+)"), self.retrieve_message_batch),
            ("GET", re.compile(r"/v1/messages/batches/([\w-]+)/results"), self.message_batch_results),
        ]

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}_sim{self._ids:06d}"

    # --- OpenAI: files ------------------------------------------------------------------------

    async def create_file(self, request: HttpRequest) -> HttpReply:
        try:
            fields = _multipart(request.headers.get("content-type", ""), request.body)
            content, purpose = fields["file"], fields.get("purpose", b"").decode()
        except (ValueError, KeyError, UnicodeDecodeError):
            return error_reply(400, "a file upload is multipart/form-data with the fields 'file' and 'purpose'")
        if purpose != "batch":
            return error_reply(400, f"purpose {purpose!r}: the simulator keeps batch input files only")
        if len(content) > MAX_FILE_BYTES:
            return error_reply(400, f"the file is {len(content)} bytes, over the {MAX_FILE_BYTES} bytes a batch input file may hold")
        lines = content.splitlines()
        persona = self._persona_of(lines[0] if lines else b"", "body")
        digest = hashlib.sha256(content).hexdigest()
        self.upload_attempts[digest] += 1
        if persona is not None and self.upload_attempts[digest] <= persona.files_fail:
            self.app.count_fault("files500")
            return error_reply(500, "The server had an error while processing your request (simulated).", "server_error")
        file = _File(self._new_id("file"), content, purpose, int(time.time()))
        self.files[file.id] = file
        self.app.count(files_uploaded=1)
        return json_reply(200, file.to_dict())

    async def retrieve_file(self, request: HttpRequest, file_id: str) -> HttpReply:
        file = self.files.get(file_id)
        return json_reply(200, file.to_dict()) if file else error_reply(404, f"no such file: {file_id}", code="not_found")

    async def file_content(self, request: HttpRequest, file_id: str) -> HttpReply:
        file = self.files.get(file_id)
        if file is None:
            return error_reply(404, f"no such file: {file_id}", code="not_found")
        return HttpReply(200, file.content, content_type="application/octet-stream")

    # --- OpenAI: batches ----------------------------------------------------------------------

    def _persona_of(self, line: bytes | dict[str, Any], body_field: str) -> Persona | None:
        """The persona a request line names (the first line sets the batch's behaviour)."""
        try:
            request = json.loads(line) if isinstance(line, bytes) else line
            model = request[body_field]["model"]
        except (ValueError, KeyError, TypeError):
            return None
        if not is_persona_spec(model) and self.app.default_persona is not None:
            return self.app.default_persona
        try:
            return parse_persona(model)
        except BiascheckError:
            return None

    async def create_batch(self, request: HttpRequest) -> HttpReply:
        try:
            body = json.loads(request.body)
            file = self.files[body["input_file_id"]]
            if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
                raise ValueError
        except KeyError:
            return error_reply(400, "'input_file_id' must name an uploaded file")
        except (ValueError, TypeError):
            return error_reply(400, "a batch needs endpoint '/v1/chat/completions' and completion_window '24h'")
        try:
            lines = [json.loads(line) for line in file.content.splitlines() if line.strip()]
            requests = [(line["custom_id"], line["body"]) for line in lines]
            if any(line.get("url") != "/v1/chat/completions" for line in lines) or not requests:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return error_reply(400, "each line of the input file must be a JSON request with custom_id, method, url and body")
        persona = self._persona_of(lines[0], "body")
        batch = self._admit("openai", requests, MAX_FILE_REQUESTS, persona)
        if isinstance(batch, HttpReply):
            return batch
        batch.metadata, batch.input_file_id = body.get("metadata"), file.id
        digest = hashlib.sha256(file.content).hexdigest()
        self.create_attempts[digest] += 1
        if persona is not None and self.create_attempts[digest] <= persona.create_lost:
            self.app.count_fault("create502")  # made, and paid for: only the reply is lost
            return error_reply(502, "Bad gateway (simulated): the batch was created, its reply lost.", "server_error")
        return json_reply(200, self._openai_view(batch))

    async def retrieve_batch(self, request: HttpRequest, batch_id: str) -> HttpReply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.shape != "openai":
            return error_reply(404, f"no such batch: {batch_id}", code="not_found")
        if self._status_fails(batch):
            return error_reply(503, "The engine is currently overloaded, please try again later (simulated).", "server_error")
        return json_reply(200, self._openai_view(batch))

    def _status_fails(self, batch: _Batch) -> bool:
        """Whether this status request of ``batch`` meets its persona's ``status_fail``."""
        self.status_requests[batch.id] += 1
        if self.status_requests[batch.id] > batch.persona.status_fail:
            return False
        self.app.count_fault("status503")
        return True

    async def list_batches(self, request: HttpRequest) -> HttpReply:
        from urllib.parse import parse_qs

        query = parse_qs(request.target.partition("?")[2])
        limit = int(query.get("limit", ["20"])[0])
        after = query.get("after", [None])[0]
        listed = [b for b in reversed(self.batches.values()) if b.shape == "openai"]  # newest first, as OpenAI
        if after is not None:
            ids = [b.id for b in listed]
            listed = listed[ids.index(after) + 1 :] if after in ids else []
        page = listed[:limit]
        data = [self._openai_view(b) for b in page]
        return json_reply(
            200,
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": len(listed) > limit,
            },
        )

    async def cancel_batch(self, request: HttpRequest, batch_id: str) -> HttpReply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.shape != "openai":
            return error_reply(404, f"no such batch: {batch_id}", code="not_found")
        if batch.ended is None and batch.task is not None:
            batch.task.cancel()
            batch.status, batch.ended = "cancelled", time.time()
        return json_reply(200, self._openai_view(batch))

    def _openai_view(self, batch: _Batch) -> dict[str, Any]:
        failed = sum(1 for line in batch.results if line.get("error") or line["response"]["status_code"] != 200)
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created),
            "in_progress_at": int(batch.created),
            "expires_at": int(batch.created) + 86_400,
            "completed_at": int(batch.ended) if batch.ended and batch.status == "completed" else None,
            "failed_at": int(batch.ended) if batch.ended and batch.status == "failed" else None,
            "expired_at": int(batch.ended) if batch.ended and batch.status == "expired" else None,
            "cancelled_at": int(batch.ended) if batch.ended and batch.status == "cancelled" else None,
            "request_counts": {"total": batch.total, "completed": len(batch.results) - failed, "failed": failed},
            "metadata": batch.metadata,
        }

    # --- Anthropic: message batches -----------------------------------------------------------

    async def create_message_batch(self, request: HttpRequest) -> HttpReply:
        try:
            requests = [(r["custom_id"], r["params"]) for r in json.loads(request.body)["requests"]]
            if not requests or not all(isinstance(c, str) and re.fullmatch(r"[\w-]{1,64}", c) for c, _ in requests):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return error_reply(400, "'requests' must be a non-empty list of {custom_id (1-64 of [A-Za-z0-9_-]), params}")
        batch = self._admit("anthropic", requests, MAX_MESSAGE_BATCH_REQUESTS, self._persona_of({"params": requests[0][1]}, "params"))
        if isinstance(batch, HttpReply):
            return batch
        return json_reply(200, self._anthropic_view(batch, request))

    async def retrieve_message_batch(self, request: HttpRequest, batch_id: str) -> HttpReply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.shape != "anthropic":
            return _anthropic_error(404, "not_found_error", f"no such message batch: {batch_id}")
        if self._status_fails(batch):
            return _anthropic_error(503, "overloaded_error", "Overloaded (simulated).")
        return json_reply(200, self._anthropic_view(batch, request))

    async def message_batch_results(self, request: HttpRequest, batch_id: str) -> HttpReply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.shape != "anthropic":
            return _anthropic_error(404, "not_found_error", f"no such message batch: {batch_id}")
        if batch.ended is None:
            return _anthropic_error(400, "invalid_request_error", "the batch is still processing")
        body = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in batch.results)
        return HttpReply(200, body, content_type="application/binary")

    def _anthropic_view(self, batch: _Batch, request: HttpRequest) -> dict[str, Any]:
        counts = Counter(line["result"]["type"] for line in batch.results)
        host = request.headers.get("host", "127.0.0.1")
        ended = batch.ended is not None
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": batch.total - len(batch.results),
                "succeeded": counts["succeeded"],
                "errored": counts["errored"],
                "canceled": counts["canceled"],
                "expired": counts["expired"],
            },
            "created_at": _iso(batch.created),
            "expires_at": _iso(batch.created + 86_400),
            "ended_at": _iso(batch.ended) if ended and batch.ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"http://{host}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    # --- processing ---------------------------------------------------------------------------

    def _admit(self, shape: str, requests: list[tuple[str, dict[str, Any]]], limit: int, persona: Persona | None) -> _Batch | HttpReply:
        """A new batch of these requests, started; or why it is refused (too many, custom_ids that repeat)."""
        if len(requests) > limit:
            return error_reply(400, f"{len(requests)} requests, over the {limit} a batch may hold")
        if len({custom_id for custom_id, _ in requests}) != len(requests):
            return error_reply(400, "custom_id values must be unique within a batch")
        batch = _Batch(self._new_id("batch" if shape == "openai" else "msgbatch"), shape, persona or parse_persona("fair"), requests, time.time())
        self._start(batch)
        return batch

    async def aclose(self) -> None:
        """End the batches still being answered: a server that stops leaves no task pending."""
        tasks = [batch.task for batch in self.batches.values() if batch.task is not None and not batch.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _start(self, batch: _Batch) -> None:
        batch.total = len(batch.requests)
        self.app.count(batches_created=1, batched_requests=len(batch.requests))
        self.batches[batch.id] = batch
        batch.task = asyncio.get_running_loop().create_task(self._process(batch))

    async def _process(self, batch: _Batch) -> None:
        """Answer the batch's requests, then end it once its delay has passed."""
        persona = batch.persona
        batch.status = "in_progress"
        if persona.batch_fault == "failed":
            await asyncio.sleep(persona.batch_delay)
            if batch.shape == "anthropic":  # a message batch never fails whole: each request errors
                error = {"type": "error", "error": {"type": "api_error", "message": "The batch failed (simulated)."}}
                batch.results = [{"custom_id": c, "result": {"type": "errored", "error": error}} for c, _ in batch.requests]
            else:
                batch.errors = [{"code": "simulated_failure", "message": "The batch failed (simulated).", "param": None, "line": None}]
            batch.status, batch.ended = "failed", time.time()
            return
        answered = len(batch.requests) // 2 if persona.batch_fault == "expired" else len(batch.requests)
        results = []
        for index, (custom_id, body) in enumerate(batch.requests):
            if index % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if index >= answered:
                results.append(self._expired_line(batch.shape, custom_id))
            elif batch.shape == "openai":
                results.append(await self._openai_line(custom_id, body))
            else:
                results.append(await self._anthropic_line(custom_id, body))
        remaining = batch.created + persona.batch_delay - time.time()
        if remaining > 0:
            await asyncio.sleep(remaining)
        batch.results, batch.requests = results, []
        batch.status, batch.ended = ("expired" if persona.batch_fault == "expired" else "completed"), time.time()
        if batch.shape == "openai":
            succeeded: list[dict[str, Any]] = []
            failed: list[dict[str, Any]] = []
            for line in results:
                (succeeded if line.get("error") is None and line["response"]["status_code"] == 200 else failed).append(line)
            batch.output_file_id = self._output_file(succeeded)
            batch.error_file_id = self._output_file(failed)

    def _output_file(self, lines: list[dict[str, Any]]) -> str | None:
        if not lines:
            return None
        file = _File(
            self._new_id("file"), b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines), "batch_output", int(time.time())
        )
        self.files[file.id] = file
        return file.id

    @staticmethod
    def _expired_line(shape: str, custom_id: str) -> dict[str, Any]:
        if shape == "anthropic":
            return {"custom_id": custom_id, "result": {"type": "expired"}}
        error = {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
        return {"id": f"batch_req_{custom_id[:16]}", "custom_id": custom_id, "response": None, "error": error}

    async def _openai_line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        status, payload = await self.app.answer(body, batched=True)
        return {
            "id": f"batch_req_{custom_id[:16]}",
            "custom_id": custom_id,
            "response": {"status_code": status, "request_id": f"req_{custom_id[:16]}", "body": payload},
            "error": None,
        }

    async def _anthropic_line(self, custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
        messages = list(params.get("messages") or [])
        for message in messages:
            content = message.get("content")
            if isinstance(content, list):  # content blocks: their text, as one string
                message["content"] = "".join(block.get("text", "") for block in content if isinstance(block, dict))
        system = params.get("system")
        if isinstance(system, list):
            system = "".join(block.get("text", "") for block in system if isinstance(block, dict))
        body: dict[str, Any] = {"model": params.get("model"), "messages": ([{"role": "system", "content": system}] if system else []) + messages}
        for name in ("max_tokens", "temperature"):
            if name in params:
                body[name] = params[name]
        status, payload = await self.app.answer(body, batched=True)
        if status != 200:
            message = (payload.get("error") or {}).get("message", "error") if isinstance(payload, dict) else "malformed reply"
            error = {"type": "error", "error": {"type": "api_error" if status >= 500 else "invalid_request_error", "message": message}}
            return {"custom_id": custom_id, "result": {"type": "errored", "error": error}}
        choice = payload["choices"][0]
        message = {
            "id": f"msg_{custom_id[:20]}",
            "type": "message",
            "role": "assistant",
            "model": payload["model"],
            "content": [{"type": "text", "text": choice["message"]["content"]}],
            "stop_reason": _ANTHROPIC_STOP.get(choice["finish_reason"], "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": payload["usage"]["prompt_tokens"], "output_tokens": payload["usage"]["completion_tokens"]},
        }
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}


def _anthropic_error(status: int, kind: str, message: str) -> HttpReply:
    return json_reply(status, {"type": "error", "error": {"type": kind, "message": message}})
