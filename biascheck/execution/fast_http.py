"""The fast path: chat and completion requests to an OpenAI-compatible endpoint, sent with one
pooled aiohttp session instead of litellm.

litellm spends about 3.5 ms of CPU on each call (its request and response types, logging and
callbacks), 25 times what the HTTP exchange itself costs: against vLLM, which answers short
multiple-choice prompts faster than that, the client was the bottleneck. Endpoints that speak
OpenAI's protocol (``openai/``, ``hosted_vllm/`` and ``litellm_proxy/`` models with an api_base,
``biascheck serve-local``, the simulator) are asked directly here, and litellm stays the judge of
everything out of the ordinary, so that both paths keep the same answers, rows and errors:

* A request is sent directly only when litellm would send that very body. The first request of
  each kind (its parameter names and values, the seed's and the simulator sample's aside, and its
  message roles) goes through litellm once against a transport that answers locally, without
  sending anything: the body litellm built is compared with the one this module builds. A
  parameter litellm refuses or rewrites (an o-series model's max_tokens), or a body it shapes
  otherwise, sends that kind through litellm for the rest of the run.
* A reply is read here only when it is plain: HTTP 200, JSON, one choice in the usual shape, a
  finish reason litellm keeps as it is, a content litellm does not split (a leading ``<think>``).
  Any other reply (an error status, a broken or odd body) is handed to litellm as it arrived,
  through the same local transport, so its exceptions, messages and parsing are litellm's own.
* A request that could not be sent at all (nothing listens, the name does not resolve) is made
  again by litellm, which then meets the failure itself and says so in its words.
* A redirect is followed here, once, as litellm's client follows it; a body is read up to
  MAX_REPLY_BYTES, after any content-encoding is undone, and refused past it.

What each path does with the result (redaction, the reply cap, retries, the deadline, the circuit
breaker, refused parameters) is :class:`biascheck.execution.llm.LiteLLMClient`'s, shared.
tests/test_fast_path.py holds the two paths to the same requests, rows and errors.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from biascheck.execution.call_errors import CallError

# The --biascheck-http-client choices: ``fast`` where it applies (litellm elsewhere), or litellm always.
HTTP_CLIENTS = ("fast", "litellm")
DEFAULT_HTTP_CLIENT = "fast"
# litellm providers whose requests the fast path sends when the model has an api_base.
FAST_PROVIDERS = frozenset({"openai", "hosted_vllm", "litellm_proxy"})

# The most bytes of a reply's body read, as decoded (a gzip body inflated), whether it came
# compressed or not: a reply's text is kept to llm.MAX_REPLY_CHARS characters, which this holds in
# any JSON escaping with room for log-probabilities, and 10 MB replies are still read (and cut).
# A 250 KB gzip body that inflates to 256 MiB is refused here instead of taking gigabytes.
MAX_REPLY_BYTES = 16 << 20

CHAT = "/chat/completions"
COMPLETIONS = "/completions"

# A reply's model as the local dry run answers it: what litellm makes of it tells its rule for the
# served model (kept as sent, or prefixed with the provider as litellm_proxy's is).
_PROBE_MODEL = "biascheck-dry-run-model"
# Finish reasons litellm keeps as they are (map_finish_reason maps the others: "eos" -> "stop").
_PLAIN_FINISH = frozenset({"stop", "length", "content_filter"})
# Keys of a plain reply: anything else (tool calls, several choices, provider extras litellm
# copies into its objects) sends the reply through litellm.
_CHAT_TOP = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier", "prompt_logprobs", "kv_transfer_params"}
)
_CHAT_CHOICE = frozenset({"index", "message", "finish_reason", "logprobs", "stop_reason"})
_CHAT_MESSAGE = frozenset({"role", "content", "refusal", "annotations", "audio", "function_call", "tool_calls", "reasoning_content"})
_TEXT_TOP = frozenset({"id", "object", "created", "model", "choices", "usage", "system_fingerprint"})
_TEXT_CHOICE = frozenset({"index", "text", "finish_reason", "logprobs", "stop_reason"})
_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens")
_USAGE_DETAILS = frozenset({"prompt_tokens_details", "completion_tokens_details"})


def fast_path_applies(model: str, api_base: str | None, http_client: str) -> bool:
    """Whether a model's requests go through the fast path: an OpenAI-compatible provider with an
    endpoint of its own (``model`` as litellm is given it: the simulator's is ``openai/...``)."""
    return http_client == "fast" and api_base is not None and model.split("/", 1)[0] in FAST_PROVIDERS and "/" in model


class Plain(NamedTuple):
    """The fields of a plain reply, as litellm's objects would give them."""

    text: str | None
    finish_reason: str | None
    usage: dict[str, int]
    logprobs: Any  # chat: the choice's logprobs (a dict); completions: the echoed prompt's
    served_model: str | None
    system_fingerprint: str | None


class _Reply(NamedTuple):
    status: int
    headers: Any  # (name, value) pairs: aiohttp's CIMultiDictProxy, or a list
    body: bytes


@dataclass(frozen=True, slots=True)
class _Route:
    """How requests of one kind go: directly, with the served model's prefix litellm adds."""

    served_prefix: str


class _Unsent(Exception):
    """The request never reached the server: litellm makes the attempt itself."""


class _Broken(Exception):
    """The exchange broke after the request was sent: ``error`` is the httpx exception litellm
    would have met, replayed to it."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


# A call of litellm for one request: (timeout, client or None) -> its response. With a client,
# litellm sends through it; the fast path gives it one whose transport answers locally.
LitellmCall = Callable[[float, Any], Awaitable[Any]]


class FastPath:
    """One endpoint's pooled session and what the dry runs learned, for one execution (one event
    loop): :meth:`aclose` before the loop ends."""

    def __init__(self, litellm: Any, model: str, api_base: str, api_key: str | None, completions_key: str, deadline: float):
        self.litellm = litellm
        self.provider, self.name = model.split("/", 1)
        self.base = api_base.rstrip("/")
        self.deadline = deadline
        # The key each endpoint gets, as litellm sends it: chat through the provider's client,
        # completions through the OpenAI client LiteLLMClient gives litellm.
        self.keys = {CHAT: self._chat_key(model, api_base, api_key), COMPLETIONS: completions_key}
        self._headers = {
            path: {"Content-Type": "application/json", "Accept": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
            for path, key in self.keys.items()
        }
        self._session: Any = None
        self._proxy: str | None = None
        self._routes: dict[tuple, _Route | None] = {}
        self._dry_runs: asyncio.Lock | None = None
        # How this run's requests went: sent and read here, read by litellm (replies out of the
        # ordinary, broken exchanges), or sent by litellm (kinds it shapes, unsent requests).
        self.counts = {"direct": 0, "replayed": 0, "litellm": 0}

    def _chat_key(self, model: str, api_base: str, api_key: str | None) -> str | None:
        """The key litellm sends with a chat request: the one given, else the provider's variable
        (HOSTED_VLLM_API_KEY, hosted_vllm's placeholder, LITELLM_PROXY_API_KEY), else OpenAI's
        (litellm's fallback for openai/ and litellm_proxy/); None: litellm refuses to send one."""
        if api_key:
            return api_key
        try:
            dynamic = self.litellm.get_llm_provider(model, api_base=api_base)[2]
        except Exception:
            dynamic = None
        if dynamic or self.provider == "hosted_vllm":
            return dynamic or None
        import os

        return self.litellm.api_key or self.litellm.openai_key or os.environ.get("OPENAI_API_KEY") or None

    # --- requests -------------------------------------------------------------------------------

    async def chat(self, messages: list[dict[str, str]], kwargs: dict[str, Any], call: LitellmCall) -> Any:
        """A chat completion: :class:`Plain`, or what litellm returned for it (or raised)."""
        roles = _roles(messages)
        if self.keys[CHAT] is None or roles is None:
            return await self._litellm(call)
        payload: dict[str, Any]
        if "extra_body" in kwargs:  # the simulator's sample index: litellm sends it in the body
            extra = kwargs["extra_body"]
            if not isinstance(extra, dict):
                return await self._litellm(call)
            payload = {"model": self.name, "messages": messages, **{k: v for k, v in kwargs.items() if k != "extra_body"}, **extra}
        else:
            payload = {"model": self.name, "messages": messages, **kwargs}
        return await self._send(CHAT, payload, (CHAT, _signature(kwargs), roles), call, _plain_chat)

    async def completion(self, prompt: str, kwargs: dict[str, Any], call: LitellmCall) -> Any:
        """A completions request with ``echo`` (a log-likelihood): :class:`Plain` (its logprobs
        those of the echoed prompt), or what litellm returned for it (or raised)."""
        if not prompt:
            return await self._litellm(call)
        payload = {"model": self.name, "prompt": prompt, "echo": True, **kwargs}
        return await self._send(COMPLETIONS, payload, (COMPLETIONS, _signature(kwargs)), call, _plain_text)

    async def _send(self, path: str, payload: dict[str, Any], signature: tuple, call: LitellmCall, read: Callable[[Any], Plain | None]) -> Any:
        route = self._routes.get(signature, _MISSING)
        if route is _MISSING:
            if self._dry_runs is None:
                self._dry_runs = asyncio.Lock()
            async with self._dry_runs:  # one dry run per kind, however many workers meet it at once
                route = self._routes.get(signature, _MISSING)
                if route is _MISSING:
                    route = self._routes[signature] = await self._dry_run(path, payload, call)
        if route is None:
            return await self._litellm(call)
        assert isinstance(route, _Route)
        try:
            reply = await self._post(path, _dumps(payload).encode())
        except _Unsent:
            return await self._litellm(call)
        except _Broken as exc:
            self.counts["replayed"] += 1
            return await self._through_litellm(call, path, exc.error)
        if reply.status == 200 and _is_json(reply.headers.get("Content-Type")):
            try:
                document = json.loads(reply.body)
            except (ValueError, RecursionError):
                document = None
            plain = read(document) if isinstance(document, dict) else None
            if plain is not None:
                self.counts["direct"] += 1
                served = plain.served_model
                return plain if not route.served_prefix or served is None else _with_served(plain, route.served_prefix + served)
        self.counts["replayed"] += 1
        return await self._through_litellm(call, path, reply)

    async def _litellm(self, call: LitellmCall) -> Any:
        self.counts["litellm"] += 1
        return await call(self.deadline, None)

    async def _dry_run(self, path: str, payload: dict[str, Any], call: LitellmCall) -> _Route | None:
        """Ask litellm for this request against a transport that answers locally: the route when
        litellm sends exactly ``payload`` to ``path``, else None (litellm sends this kind)."""
        sent: list[Any] = []
        canned = _canned_chat() if path == CHAT else _canned_text()
        reply = _Reply(200, {"content-type": "application/json"}, json.dumps(canned).encode())
        try:
            response = await self._through_litellm(call, path, reply, sent)
        except Exception:  # litellm refuses the request (an unsupported parameter): it says so itself
            return None
        if len(sent) != 1 or str(sent[0].url) != self.base + path or sent[0].headers.get("authorization") != self._headers[path].get("Authorization"):
            return None
        try:
            body = json.loads(sent[0].content)
        except ValueError:
            return None
        if body != json.loads(json.dumps(payload, ensure_ascii=False)):
            return None
        served = getattr(response, "model", None)
        if not isinstance(served, str) or not served.endswith(_PROBE_MODEL):
            return None
        return _Route(served.removesuffix(_PROBE_MODEL))

    async def _post(self, path: str, data: bytes) -> _Reply:
        import aiohttp

        if self._session is None:
            # No limit of its own: the runner's workers bound how many requests are in flight.
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
            # No trust_env: aiohttp would then read ~/.netrc in a thread for every request. The
            # proxy the environment names for this endpoint (as httpx, litellm's client, uses it)
            # is looked up once instead.
            self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
            self._proxy = _env_proxy(self.base)
        try:
            # A redirect is followed here, as litellm's client follows it (a 303, or a 301/302 of
            # a POST, as a GET): handing the 3xx to litellm would send the request a second time.
            async with self._session.post(self.base + path, data=data, headers=self._headers[path], proxy=self._proxy) as response:
                return _Reply(response.status, response.headers, await _read_body(response))
        except aiohttp.ClientConnectorError as exc:
            raise _Unsent() from exc
        except aiohttp.ServerDisconnectedError as exc:  # (litellm's own transport is aiohttp's: its words)
            raise _Broken(_httpx_error("RemoteProtocolError", str(exc) or "Server disconnected", exc)) from None
        except aiohttp.ClientPayloadError as exc:
            raise _Broken(_httpx_error("RemoteProtocolError", str(exc), exc)) from None
        except aiohttp.ClientError as exc:
            raise _Broken(_httpx_error("ReadError", str(exc) or type(exc).__name__, exc)) from None

    # --- litellm's judgement -----------------------------------------------------------------

    async def _through_litellm(self, call: LitellmCall, path: str, reply: _Reply | Exception, sent: list[Any] | None = None) -> Any:
        """litellm's call, given a client whose transport answers with ``reply`` (or raises it)
        instead of sending: the kind of client litellm uses for the provider, so it reads the reply
        as it reads one from the network. ``sent`` collects the requests litellm made."""
        import httpx

        class Replay(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                await request.aread()
                if sent is not None:
                    sent.append(request)
                if isinstance(reply, Exception):
                    raise reply
                # The body is decoded already (aiohttp undid any content-encoding).
                headers = [(k, v) for k, v in reply.headers.items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
                return httpx.Response(reply.status, headers=headers, content=reply.body, request=request)

        client: Any
        if path == CHAT and self.provider == "hosted_vllm":  # litellm's own HTTP handler, not OpenAI's SDK
            from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

            client = AsyncHTTPHandler(timeout=self.deadline, transport=Replay())
        else:
            import openai

            key = self.keys[path] or "unused-local"
            client = openai.AsyncOpenAI(api_key=key, base_url=self.base, max_retries=0, http_client=httpx.AsyncClient(transport=Replay()))
        try:
            return await call(self.deadline, client)
        finally:
            await client.close()  # no socket to close: for its own bookkeeping

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


_MISSING = object()


def _signature(kwargs: dict[str, Any]) -> tuple:
    """What decides how litellm shapes a request's parameters: their names and values (0, 0.0 and
    False told apart), but only the type of the seed (each request's own) and the keys of the
    simulator's extra body."""
    parts: list[Any] = []
    for name, value in kwargs.items():
        kind = type(value)
        if name == "seed":
            parts.append((name, kind))
        elif name == "extra_body" and kind is dict:
            parts.append((name, kind, tuple(value)))
        elif kind in _SCALARS:
            parts.append((name, kind, value))
        else:
            parts.append((name, kind, repr(value)))
    return tuple(parts)


_SCALARS = (int, float, str, bool, type(None))
# A request body's serialisation (UTF-8 kept: a third of the bytes of escaped Korean), its encoder
# made once rather than by json.dumps for every request.
_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _roles(messages: list[dict[str, str]]) -> tuple[str, ...] | None:
    """The roles of messages that are all {role, content} strings (an empty content marked, as
    litellm could treat it otherwise), else None: litellm sends anything else."""
    roles = []
    for message in messages:
        if type(message) is not dict or len(message) != 2:
            return None
        role, content = message.get("role"), message.get("content")
        if type(role) is not str or type(content) is not str:
            return None
        roles.append(role if content else role + " (empty)")
    return tuple(roles)


def _env_proxy(url: str) -> str | None:
    """The proxy HTTP_PROXY/HTTPS_PROXY/ALL_PROXY name for ``url``, unless NO_PROXY exempts it."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _is_json(content_type: str | None) -> bool:
    """A JSON body by its Content-Type, parameters (a charset) aside."""
    return content_type is not None and content_type.partition(";")[0].strip().lower() == "application/json"


def _httpx_error(name: str, message: str, cause: BaseException) -> Exception:
    """The httpx error litellm's transport raises for ``cause``, chained to it as litellm's is:
    the chain tells a body that broke off from an endpoint that never replied
    (:func:`biascheck.execution.call_errors.broken_body`)."""
    import httpx

    error = getattr(httpx, name)(message)
    error.__cause__ = cause
    return error


async def _read_body(response: Any) -> bytes:
    """A reply's body, with any content-encoding undone, refused once it passes MAX_REPLY_BYTES:
    read in pieces, so a compressed bomb is never inflated whole."""
    length = response.content_length
    if length is not None and length <= MAX_REPLY_BYTES and "Content-Encoding" not in response.headers:
        return await response.read()  # a plain body of a declared size within the cap (aiohttp reads no more): at once
    pieces: list[bytes] = []
    size = 0
    async for piece in response.content.iter_chunked(1 << 16):
        size += len(piece)
        if size > MAX_REPLY_BYTES:
            raise reply_too_large()
        pieces.append(piece)
    return b"".join(pieces)


def reply_too_large() -> CallError:
    return CallError(
        f"the reply's body is over {MAX_REPLY_BYTES >> 20} MiB (after decompression), more than a reply biascheck keeps can take: refused unread",
        retryable=False,
    )


def _with_served(plain: Plain, served: str) -> Plain:
    return plain._replace(served_model=served)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any) -> bool:
    return type(value) is float or type(value) is int


def _plain_usage(usage: Any) -> dict[str, int] | None:
    """The three counts of a usage litellm reads as they are (no details it would fold in)."""
    if type(usage) is not dict:
        return None
    prompt, completion, total = usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens")
    if type(prompt) is not int or type(completion) is not int or type(total) is not int or prompt < 0 or completion < 0 or total < 0:
        return None
    if len(usage) > 3 and any(key not in _USAGE_DETAILS or usage[key] is not None for key in usage if key not in _USAGE):
        return None
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def _plain_common(document: dict, top: frozenset[str]) -> tuple[dict, dict[str, int], str] | None:
    """(the one choice, the usage, the served model) of a reply in the usual shape, else None."""
    choices, model = document.get("choices"), document.get("model")
    if type(choices) is not list or len(choices) != 1 or type(model) is not str or not model or not document.keys() <= top:
        return None
    fingerprint, created = document.get("system_fingerprint"), document.get("created")
    if not (fingerprint is None or type(fingerprint) is str) or not (created is None or type(created) is int):
        return None
    usage = _plain_usage(document.get("usage"))
    choice = choices[0]
    if usage is None or type(choice) is not dict:
        return None
    return choice, usage, model


def _plain_chat(document: dict) -> Plain | None:
    """A chat completion in the shape litellm reads without changing what biascheck keeps."""
    common = _plain_common(document, _CHAT_TOP)
    if common is None:
        return None
    choice, usage, model = common
    message, finish = choice.get("message"), choice.get("finish_reason")
    if finish not in _PLAIN_FINISH or type(message) is not dict or not choice.keys() <= _CHAT_CHOICE or not message.keys() <= _CHAT_MESSAGE:
        return None
    content, role = message.get("content"), message.get("role")
    if type(role) is not str or not role:
        return None
    if content is not None and (type(content) is not str or content.startswith("<")):
        return None  # litellm splits a leading <think>...</think> off the content
    if len(message) > 2:  # vLLM's and OpenAI's empty extras only: litellm reads anything else its own way
        for key in ("tool_calls", "function_call", "audio", "reasoning_content"):
            if message.get(key) not in (None, []):
                return None
    logprobs = choice.get("logprobs")
    if logprobs is not None and not _plain_chat_logprobs(logprobs):
        return None
    return Plain(content, finish, usage, logprobs, model, document.get("system_fingerprint"))


def _plain_chat_logprobs(logprobs: Any) -> bool:
    """OpenAI's chat logprobs: ``content``, a list of positions each with token, logprob, bytes
    and top_logprobs (alternatives of the same shape)."""
    if type(logprobs) is not dict or not logprobs.keys() <= {"content", "refusal"} or logprobs.get("refusal") is not None:
        return False
    content = logprobs.get("content")
    if content is None:
        return True
    if type(content) is not list:
        return False
    for position in content:
        if not _plain_token(position, {"token", "logprob", "bytes", "top_logprobs"}):
            return False
        tops = position.get("top_logprobs")
        if type(tops) is not list or not all(_plain_token(alt, {"token", "logprob", "bytes"}) for alt in tops):
            return False
    return True


def _plain_token(entry: Any, keys: set[str]) -> bool:
    if type(entry) is not dict or not entry.keys() <= keys or type(entry.get("token")) is not str or not _number(entry.get("logprob")):
        return False
    data = entry.get("bytes")
    return data is None or (type(data) is list and all(type(b) is int for b in data))


def _plain_text(document: dict) -> Plain | None:
    """A completions reply (log-likelihood requests) in the shape litellm reads as it is."""
    common = _plain_common(document, _TEXT_TOP)
    if common is None:
        return None
    choice, usage, model = common
    text, finish, logprobs = choice.get("text"), choice.get("finish_reason"), choice.get("logprobs")
    if not choice.keys() <= _TEXT_CHOICE or type(text) is not str or finish not in _PLAIN_FINISH:
        return None
    if logprobs is not None and not _plain_text_logprobs(logprobs):
        return None
    return Plain(text, finish, usage, logprobs, model, document.get("system_fingerprint"))


def _plain_text_logprobs(logprobs: Any) -> bool:
    if type(logprobs) is not dict or set(logprobs) != {"tokens", "token_logprobs", "text_offset", "top_logprobs"}:
        return False
    tokens, values, offsets, tops = logprobs["tokens"], logprobs["token_logprobs"], logprobs["text_offset"], logprobs["top_logprobs"]
    if type(tokens) is not list or type(values) is not list or type(offsets) is not list:
        return False
    if not all(type(t) is str for t in tokens) or not all(v is None or _number(v) for v in values) or not all(_count(o) for o in offsets):
        return False
    if tops is None:
        return True
    if type(tops) is not list:
        return False
    for top in tops:
        if top is not None and (type(top) is not dict or not all(type(k) is str and _number(v) for k, v in top.items())):
            return False
    return True


def _canned_chat() -> dict[str, Any]:
    return {
        "id": "dry-run",
        "object": "chat.completion",
        "created": 0,
        "model": _PROBE_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _canned_text() -> dict[str, Any]:
    return {
        "id": "dry-run",
        "object": "text_completion",
        "created": 0,
        "model": _PROBE_MODEL,
        "choices": [{"index": 0, "text": "A", "finish_reason": "length", "logprobs": None}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
    }
