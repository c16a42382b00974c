"""Provider batch APIs: the same requests as online calls, sent as files of requests that the
provider answers within a day at half the online price.

Two shapes:
- OpenAI's files and batches (``openai/``, ``azure/``, ``hosted_vllm/``, ``litellm_proxy/``, and the
  simulator), through the OpenAI SDK (one client per run, closed at its end: litellm's batch
  functions open a client per call and never close it);
- Anthropic's Message Batches (``anthropic/``), through the official ``anthropic`` SDK (litellm's
  support for them is incomplete, litellm #17265).

Each request's ``custom_id`` is its store key. This module speaks to providers; what to submit,
when to poll and what to store is :mod:`biascheck.execution.batch_runner`'s.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option, option
from biascheck.execution.call_errors import CallError, one_line_error
from biascheck.execution.llm import MAX_REPLY_CHARS, Completion, LiteLLMClient, ModelConfig, Sent
from biascheck.execution.redaction import redact

# litellm's providers whose files and batches API is OpenAI's (its OPENAI_COMPATIBLE_BATCH_AND_FILES_PROVIDERS, and Azure).
OPENAI_SHAPED = ("openai", "azure", "hosted_vllm", "litellm_proxy")
ANTHROPIC = "anthropic"
SUPPORTED = (*OPENAI_SHAPED, ANTHROPIC)
# Documented limits: OpenAI, 50,000 requests and 200 MB per input file; Anthropic, 100,000 requests
# and 256 MB per batch. A little under the byte limits: a file's multipart framing counts too.
OPENAI_LIMITS = (50_000, 190 * 2**20)
ANTHROPIC_LIMITS = (100_000, 240 * 2**20)
# Anthropic requires max_tokens; litellm's own default for Anthropic, so a batch asks what the online call would.
ANTHROPIC_DEFAULT_MAX_TOKENS = 4096
RESEND_CHOICES = ("batch", "online")
T = TypeVar("T")


@dataclass(frozen=True)
class BatchOptions:
    """``--biascheck-batch`` and its companions. ``wait``: poll until every batch has ended (else
    submit, and stop with "submitted, not yet scored"). ``resend``: what becomes of requests a
    batch ended without answering (failed, expired): sent again as a new batch, online, or (None)
    reported as errors. ``max_requests``/``max_bytes`` lower the provider's limits per batch."""

    wait: bool = True
    poll_interval: float = 30.0
    resend: str | None = None
    max_requests: int | None = None
    max_bytes: int | None = None


@dataclass(frozen=True)
class BatchStatus:
    """What the provider says of a batch. ``state``: ``running``, or how it ended: ``completed``,
    ``failed``, ``expired``, ``cancelled``, or ``lost`` (the provider does not know it). ``done``:
    requests the provider has finished so far."""

    batch_id: str
    state: str
    total: int
    done: int
    failed: int
    detail: str | None = None
    files: tuple[str, ...] = ()  # OpenAI: the output and error files, once it has ended

    @property
    def ended(self) -> bool:
        return self.state != "running"


@dataclass(frozen=True)
class BatchLine:
    """One request of a batch, as the provider receives it."""

    key: str
    body: bytes


class BatchAPI(Protocol):
    provider: str
    client: LiteLLMClient
    limits: tuple[int, int]  # (requests, bytes) one batch may hold
    # The answer length the provider assumes when a request names none (None: unbounded).
    default_max_tokens: int | None
    # Parameters the provider's request shape has no place for: left out, with why.
    dropped: dict[str, str]

    def line(self, key: str, messages: list[dict[str, str]], params: dict[str, Any], sample: int) -> BatchLine: ...

    async def submit(self, lines: Sequence[BatchLine], submission: str) -> BatchStatus: ...

    async def find(self, submission: str) -> BatchStatus | None: ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, status: BatchStatus, params_of: dict[str, dict[str, Any]]) -> list[tuple[str, Completion | str]]: ...

    async def aclose(self) -> None: ...


def batch_provider(model: ModelConfig, where: object = Option("batch")) -> str:
    """The batch API that serves ``model``, or a one-line refusal naming those that exist."""
    if model.is_sim:
        return "openai"
    prefix = model.model.split("/", 1)[0] if "/" in model.model else "openai"
    if prefix in OPENAI_SHAPED:
        return prefix
    if prefix == ANTHROPIC:
        try:
            import anthropic  # noqa: F401
        except ImportError:
            raise BiascheckError(
                where, None, "Anthropic's Message Batches need the anthropic SDK, which is not installed", "pip install 'biascheck[anthropic]'"
            ) from None
        return ANTHROPIC
    raise BiascheckError(
        where,
        None,
        f"{model.model}: biascheck has no batch API for {prefix}/ models",
        f"batch mode serves {', '.join(p + '/' for p in SUPPORTED)} models; run this one online (without {option('batch')})",
    )


def open_batch_api(client: LiteLLMClient) -> BatchAPI:
    provider = batch_provider(client.config)
    return AnthropicBatches(client) if provider == ANTHROPIC else OpenAIBatches(client, provider)


def new_submission() -> str:
    return "bc-" + uuid.uuid4().hex


def split(lines: Iterable[BatchLine], max_requests: int, max_bytes: int) -> Iterator[list[BatchLine]]:
    """Consecutive batches of at most ``max_requests`` lines and ``max_bytes`` bytes each."""
    chunk: list[BatchLine] = []
    size = 0
    for line in lines:
        if chunk and (len(chunk) >= max_requests or size + len(line.body) > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(line)
        size += len(line.body)
    if chunk:
        yield chunk


def classify(exc: BaseException, what: str) -> CallError:
    """A failed batch API call (litellm's or the SDK's exception) as a CallError: credentials or a
    missing endpoint stop the run, a refusal is not retried, the rest (429, 5xx, no reply) is."""
    if isinstance(exc, CallError):
        return exc
    status = getattr(exc, "status_code", None)
    line = f"{what}: {one_line_error(exc)}"
    if status in (401, 403, 404):
        return CallError(line, retryable=False, fatal=True)
    if status in (400, 413, 422):
        return CallError(line, retryable=False)
    return CallError(line, retryable=True, unreachable=status is None and bool(re.search(r"connect|timed? ?out", line, re.IGNORECASE)))


async def provider_call(what: str, call: Awaitable[T]) -> T:
    """Await one call of a provider's batch API; its failure as a CallError saying what was being done."""
    try:
        return await call
    except Exception as exc:
        raise classify(exc, what) from None


async def batch_or_lost(batch_id: str, what: str, call: Awaitable[T]) -> T | BatchStatus:
    """A batch as the provider reports it, or, when it answers 404, the batch as ``lost``: deleted,
    expired from its records, or made under another key or project. Its requests then become
    errors of the run rather than a stop; sending them again is the user's decision (resend)."""
    try:
        return await call
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            return BatchStatus(batch_id, "lost", 0, 0, 0, f"the provider does not know it ({one_line_error(exc)[:200]})")
        raise classify(exc, what) from None


def _api_model(client: LiteLLMClient) -> str:
    """The model name the provider knows: litellm's string without its provider prefix."""
    return client.model.split("/", 1)[1] if "/" in client.model else client.model


class OpenAIBatches:
    """OpenAI's files and batches API, through one OpenAI SDK client of biascheck's own: litellm's
    batch functions build a client per call and never close it, which leaves its sockets open."""

    limits = OPENAI_LIMITS
    default_max_tokens: int | None = None

    def __init__(self, client: LiteLLMClient, provider: str):
        self.client, self.provider = client, provider
        self.dropped: dict[str, str] = {}  # the chat completion's own shape: nothing is left out
        self._sdk = _openai_sdk(client, provider)
        self._model = _api_model(client)
        self._uploaded: dict[str, str] = {}  # submission -> its input file: a retried creation does not upload it again

    def line(self, key: str, messages: list[dict[str, str]], params: dict[str, Any], sample: int) -> BatchLine:
        body: dict[str, Any] = {"model": self._model, "messages": messages, **params}
        if self.client.config.is_sim and sample:
            body["biascheck_sample"] = sample  # as the online call's extra_body
        request = {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body}
        return BatchLine(key, json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")

    async def submit(self, lines: Sequence[BatchLine], submission: str) -> BatchStatus:
        if submission not in self._uploaded:
            content = b"".join(line.body for line in lines)
            file = await provider_call(
                "uploading the batch's requests",
                self._sdk.files.create(file=(f"{submission}.jsonl", content, "application/jsonl"), purpose="batch"),
            )
            self._uploaded[submission] = file.id
        batch = await provider_call(
            "creating the batch",
            self._sdk.batches.create(
                completion_window="24h",
                endpoint="/v1/chat/completions",
                input_file_id=self._uploaded[submission],
                metadata={"biascheck_submission": submission},
            ),
        )
        return self._status(batch)

    async def find(self, submission: str) -> BatchStatus | None:
        """The batch created for ``submission``, if the provider has it (a kill came between its
        creation and the store's record of its id)."""
        after = None
        for _ in range(50):  # the newest 5,000 batches: a submission is looked for soon after it was made
            page = await provider_call("listing the batches", self._list_batches(after))
            for batch in page.data:
                if (getattr(batch, "metadata", None) or {}).get("biascheck_submission") == submission:
                    return self._status(batch)
            if not page.data or not getattr(page, "has_more", False):
                return None
            after = page.data[-1].id
        return None

    async def _list_batches(self, after: str | None) -> Any:
        return await (self._sdk.batches.list(limit=100, after=after) if after else self._sdk.batches.list(limit=100))

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await batch_or_lost(batch_id, f"retrieving batch {batch_id}", self._sdk.batches.retrieve(batch_id))
        return batch if isinstance(batch, BatchStatus) else self._status(batch)

    @staticmethod
    def _status(batch: Any) -> BatchStatus:
        counts = batch.request_counts
        total, completed, failed = (int(getattr(counts, k, 0) or 0) for k in ("total", "completed", "failed")) if counts else (0, 0, 0)
        state = {"completed": "completed", "failed": "failed", "expired": "expired", "cancelled": "cancelled"}.get(batch.status, "running")
        detail = None
        errors = getattr(getattr(batch, "errors", None), "data", None)
        if errors:
            detail = "; ".join(redact(f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}") for e in errors[:3])[:500]
        files = tuple(f for f in (getattr(batch, "output_file_id", None), getattr(batch, "error_file_id", None)) if f)
        return BatchStatus(batch.id, state, total, completed + failed, failed, detail, files)

    async def _file(self, file_id: str) -> bytes:
        content = await provider_call(f"downloading file {file_id}", self._sdk.files.content(file_id))
        return content.content

    async def results(self, status: BatchStatus, params_of: dict[str, dict[str, Any]]) -> list[tuple[str, Completion | str]]:
        """Each answered request's completion, each failed one's error, from the batch's output and
        error files (an expired or cancelled batch has them too, for what it finished)."""
        found: list[tuple[str, Completion | str]] = []
        for file_id in status.files:
            for raw in (await self._file(file_id)).splitlines():
                if raw.strip():
                    parsed = self._result(raw, params_of)
                    if parsed is not None:
                        found.append(parsed)
        return found

    def _result(self, raw: bytes, params_of: dict[str, dict[str, Any]]) -> tuple[str, Completion | str] | None:
        try:
            line = json.loads(raw)
            key = line["custom_id"]
        except (ValueError, KeyError, TypeError):
            return None  # no key: nothing to attach it to; its request stays unanswered
        if key not in params_of:
            return None
        error, response = line.get("error"), line.get("response")
        if error:
            return key, redact(
                f"batch request failed: {error.get('code')}: {error.get('message')}" if isinstance(error, dict) else f"batch request failed: {error}"
            )[:500]
        body = response.get("body") if isinstance(response, dict) else None
        status = response.get("status_code") if isinstance(response, dict) else None
        if status != 200 or not isinstance(body, dict):
            message = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
            return key, redact(f"batch request failed: HTTP {status}: {message or 'malformed response body'}")[:500]
        try:
            choice = body["choices"][0]
            text, finish_reason = choice["message"].get("content"), choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            return key, "batch request failed: malformed response body"
        usage = body.get("usage")
        usage = {k: v for k, v in usage.items() if k in ("prompt_tokens", "completion_tokens", "total_tokens")} if isinstance(usage, dict) else {}
        logprobs = choice.get("logprobs") if params_of[key].get("logprobs") else None
        # The batch's output holds no prompt: a usage that cannot be read is charged for the reply alone.
        sent = Sent((), params_of[key])
        return key, self.client.completion_of(
            text, finish_reason, usage, logprobs, body.get("model"), body.get("system_fingerprint"), batch=True, sent=sent
        )

    async def aclose(self) -> None:
        await self._sdk.close()
        await self.client.aclose()


def _openai_sdk(client: LiteLLMClient, provider: str) -> Any:
    """The SDK client for an OpenAI-shaped batch API, with the credentials litellm's batch functions
    would read. Retries are the run's (RetryPolicy), not the SDK's hidden two; an upload of up to
    200 MB gets at least five minutes whatever --biascheck-timeout says of one call."""
    import openai

    timeout = max(client.config.timeout, 300.0)
    if provider != "azure":
        base_url = client.api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or None
        return openai.AsyncOpenAI(api_key=client.sdk_key(), base_url=base_url, max_retries=0, timeout=timeout)
    endpoint = client.api_base or os.environ.get("AZURE_API_BASE")
    version = os.environ.get("AZURE_API_VERSION")
    if not endpoint or not version:
        missing = [name for name, value in (("AZURE_API_BASE", endpoint), ("AZURE_API_VERSION", version)) if not value]
        raise BiascheckError(Option("batch"), None, f"Azure's batch API needs {' and '.join(missing)}, which is not set", f"export {missing[0]}=...")
    key = client.api_key or os.environ.get("AZURE_OPENAI_API_KEY") or os.environ.get("AZURE_API_KEY")
    return openai.AsyncAzureOpenAI(api_key=key, azure_endpoint=endpoint, api_version=version, max_retries=0, timeout=timeout)


class AnthropicBatches:
    """Anthropic's Message Batches, through the official SDK."""

    provider = ANTHROPIC
    limits = ANTHROPIC_LIMITS
    default_max_tokens: int | None = ANTHROPIC_DEFAULT_MAX_TOKENS
    # Chat-completion parameters with a Messages API counterpart (by name, or renamed).
    _RENAMED = {
        "max_tokens": "max_tokens",
        "max_completion_tokens": "max_tokens",
        "temperature": "temperature",
        "top_p": "top_p",
        "stop": "stop_sequences",
    }

    def __init__(self, client: LiteLLMClient):
        import anthropic

        self.client = client
        # The SDK adds /v1/messages/batches itself; an api_base may name the API's root, its /v1 or litellm's /v1/messages.
        base_url = re.sub(r"(/v1)?(/messages)?/*$", "", client.api_base) if client.api_base else None
        self._sdk = anthropic.AsyncAnthropic(api_key=client.api_key or None, base_url=base_url, max_retries=0, timeout=client.config.timeout)
        self._model = _api_model(client)
        self.dropped: dict[str, str] = {}

    def line(self, key: str, messages: list[dict[str, str]], params: dict[str, Any], sample: int) -> BatchLine:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        request: dict[str, Any] = {"model": self._model, "messages": [m for m in messages if m["role"] != "system"]}
        if system:
            request["system"] = system
        for name, value in params.items():
            if name in self._RENAMED:
                request[self._RENAMED[name]] = [value] if name == "stop" and isinstance(value, str) else value
            else:
                self.dropped.setdefault(name, "not a parameter of Anthropic's Messages API, not sent")
        request.setdefault("max_tokens", ANTHROPIC_DEFAULT_MAX_TOKENS)
        return BatchLine(key, json.dumps({"custom_id": key, "params": request}, ensure_ascii=False, separators=(",", ":")).encode())

    async def submit(self, lines: Sequence[BatchLine], submission: str) -> BatchStatus:
        # Anthropic's batches carry no metadata: a kill between creation and the store's record of its id
        # leaves a batch that find() cannot tell, and its requests are sent again.
        batch = await provider_call(
            "creating the message batch", self._sdk.messages.batches.create(requests=[json.loads(line.body) for line in lines])
        )
        return self._status(batch)

    async def find(self, submission: str) -> BatchStatus | None:
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await batch_or_lost(batch_id, f"retrieving message batch {batch_id}", self._sdk.messages.batches.retrieve(batch_id))
        return batch if isinstance(batch, BatchStatus) else self._status(batch)

    @staticmethod
    def _status(batch: Any) -> BatchStatus:
        counts = batch.request_counts
        finished = counts.succeeded + counts.errored + counts.canceled + counts.expired
        total = finished + counts.processing
        state = "running"
        if batch.processing_status == "ended":
            state = "expired" if counts.expired else "cancelled" if counts.canceled else "completed"
        return BatchStatus(batch.id, state, total, finished, counts.errored + counts.canceled + counts.expired)

    async def results(self, status: BatchStatus, params_of: dict[str, dict[str, Any]]) -> list[tuple[str, Completion | str]]:
        found: list[tuple[str, Completion | str]] = []
        try:
            async for entry in await self._sdk.messages.batches.results(status.batch_id):
                key = entry.custom_id
                if key in params_of:
                    found.append((key, self._result(entry.result)))
        except Exception as exc:
            raise classify(exc, f"downloading the results of message batch {status.batch_id}") from None
        return found

    def _result(self, result: Any) -> Completion | str:
        if result.type != "succeeded":
            error = getattr(getattr(result, "error", None), "error", None)
            message = getattr(error, "message", None) if error is not None else None
            return redact(f"batch request {result.type}" + (f": {message}" if message else ""))[:500]
        message = result.message
        text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")[: MAX_REPLY_CHARS + 1]
        finish = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "content_filter"}.get(
            message.stop_reason or "", message.stop_reason
        )
        usage = {"prompt_tokens": message.usage.input_tokens, "completion_tokens": message.usage.output_tokens}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return self.client.completion_of(text, finish, usage, None, message.model, None, batch=True)

    async def aclose(self) -> None:
        await self._sdk.close()
        await self.client.aclose()
