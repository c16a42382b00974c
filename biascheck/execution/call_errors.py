"""A failed model call: :class:`CallError` (what the runner retries, stops on or leaves out), the
parameters a refusal names, the wait a Retry-After asks, and the one line, without secrets, that
reports the error."""

from __future__ import annotations

import ast
import datetime
import email.utils
import math
import re
import time
from typing import Any

from biascheck.execution.redaction import redact


class CallError(Exception):
    """One failed attempt. ``retryable``: worth another attempt; ``fatal``: stop the whole run;
    ``rejected``: the request parameters a refusal (HTTP 400/422, litellm's UnsupportedParamsError) names;
    ``unreachable``: no reply came from the endpoint at all (refused, unresolvable, timed out)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        fatal: bool = False,
        retry_after: float | None = None,
        rejected: tuple[str, ...] = (),
        unreachable: bool = False,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.fatal = fatal
        self.retry_after = retry_after
        self.rejected = rejected
        self.unreachable = unreachable


# How litellm words a connection that never got a reply (it wraps some as an "internal server error").
UNREACHABLE = re.compile(
    r"Connection error\.|Cannot connect to host|Connection refused|Connect call failed|Name or service not known|"
    r"Temporary failure in name resolution|nodename nor servname|getaddrinfo|No route to host|"
    r"Network is unreachable|ConnectError|ConnectTimeout",
    re.IGNORECASE,
)


# A reply whose status and headers came but whose body broke off (cut short of its Content-Length,
# a chunked body never ended): aiohttp's errors for it, and httpcore's words (the OpenAI SDK's own
# client). litellm words them as it words a connection that never got a reply.
_BODY_BROKEN = frozenset({"ClientPayloadError", "ContentLengthError", "TransferEncodingError"})
_BODY_BROKEN_TEXT = re.compile(r"without sending complete message body|incomplete chunked read", re.IGNORECASE)


def broken_body(exc: BaseException) -> bool:
    """Whether ``exc`` (through the exceptions it was raised from) is a reply whose body broke off:
    the endpoint answered, so this is a reply's error to retry, not an endpoint that cannot be reached."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in _BODY_BROKEN or _BODY_BROKEN_TEXT.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


# How a refusal says a parameter is not supported at all, as opposed to a value out of range or of
# the wrong type ("less_than_equal", "above maximum value"): only the former may be left out.
_UNSUPPORTED = re.compile(
    r"unrecogni[sz]ed|unsupported|not\s+supported|does\s+not\s+support|extra_forbidden|extra\s+inputs|"
    r"not\s+permitted|unknown\s+(?:parameter|argument|field)|unexpected\s+keyword",
    re.IGNORECASE,
)


def refused_params(exc: BaseException, params: dict[str, Any], *, server_error: bool = False) -> tuple[tuple[str, ...], bool]:
    """(the parameters of this request that a refusal names, whether it says they are unsupported).
    The names come from the OpenAI error body's ``param``, a
    FastAPI/pydantic ``loc``, or the name as a word of the message ("Unrecognized request argument
    supplied: seed", litellm's "does not support parameters: ['seed']"). ``server_error``: a 5xx,
    whose message may carry a traceback full of parameter names, so only a validation error's
    ``loc`` or a first line saying "NAME ... not supported" counts (llama-cpp-python's server)."""
    body = getattr(exc, "body", None)
    text = str(exc)
    named: list[str] = []
    if isinstance(body, dict):
        error: dict = body["error"] if isinstance(body.get("error"), dict) else body
        if isinstance(error.get("param"), str) and not server_error:
            named.append(error["param"])
        details = body.get("detail")
        for detail in details if isinstance(details, list) else []:
            loc = detail.get("loc") if isinstance(detail, dict) else None
            named += [part for part in loc if isinstance(part, str)] if isinstance(loc, list) else []
    # pydantic's loc as printed in a message: ('body', 'seed') or ["body", "seed"]
    named += re.findall(r"""['"]loc['"]: [\[(]['"]body['"], ['"](\w+)['"]""", text)
    unsupported = bool(_UNSUPPORTED.search(text) or _UNSUPPORTED.search(repr(body)))
    if server_error:
        first = text.strip().splitlines()[0] if text.strip() else ""
        named += [name for name in params if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]).*\bnot supported\b", first)]
    else:
        # Only the head of the message: a long one may quote the prompt, which can contain any word.
        named += [name for name in params if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text[:1000])]
    return tuple(dict.fromkeys(n for n in named if n in params)), unsupported


def retry_after_of(exc: BaseException) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms") is not None:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        if headers.get("retry-after") is not None:
            return parse_retry_after(headers["retry-after"])
    except (TypeError, ValueError):
        return None  # junk: fall back to our own backoff
    return None


def parse_retry_after(value: str, now: float | None = None) -> float | None:
    """Seconds to wait by a Retry-After header: delay-seconds or an HTTP-date (RFC 9110 10.2.3), a
    date in the past meaning 0; None if it is neither."""
    value = str(value).strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC by RFC 5322
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def refusal_line(exc: BaseException, named: tuple[str, ...]) -> str:
    """One line that names the refused parameters first: a server's own message may name them
    only further down (llama-cpp-python's validation errors)."""
    line = one_line_error(exc)
    missing = [name for name in named if name not in line]
    return f"the server refused {', '.join(missing)}: {line}" if missing else line


_TRACEBACK = "Traceback (most recent call last):"
_OBJECT_REPR = re.compile(r"<([\w.]+) object at 0x[0-9a-fA-F]+>")


# The OpenAI SDK's text for an error reply it could not read as one: "Error code: 400 - {'detail': ...}".
_STATUS_BODY = re.compile(r"(Error code: \d+)( - [\[{].*)$")


def _body_message(quoted: str) -> str:
    """What an error reply's body says, instead of its Python repr: its message, if it has one."""
    try:
        body = ast.literal_eval(quoted[len(" - ") :]) if len(quoted) < 20_000 else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        body = None
    while isinstance(body, dict):
        body = next((body[key] for key in ("error", "message", "detail", "msg") if key in body), None)
    return f" - {body}" if isinstance(body, str) and body.strip() else " (a body that gives no error message)"


def one_line_error(exc: BaseException) -> str:
    """An error as it may be reported, on one line, without secrets: its first line, or where litellm pasted a traceback into its message
    ("Invalid response object Traceback ..."), the text before it and the traceback's last line
    (the error raised); without the response litellm quotes, and object reprs shortened to their class."""
    # litellm appends the whole response it could not read: "(received_args={'response_object': ...",
    # whose text is the server's and may hold any character, line breaks included.
    text = re.sub(r"\s*\(?received_args=.*", "", str(exc), flags=re.DOTALL).strip()
    head, _, trace = text.partition(_TRACEBACK)
    lines = head.strip().splitlines()
    message = lines[0] if lines else ""
    if trace.strip():
        message = f"{message} ({trace.strip().splitlines()[-1].strip()})" if message else trace.strip().splitlines()[-1].strip()
    message = _STATUS_BODY.sub(lambda match: match[1] + _body_message(match[2]), message)
    message = _OBJECT_REPR.sub(r"\1", message or type(exc).__name__)
    # litellm repeats the class: "litellm.InternalServerError: InternalServerError: OpenAIException - ..."
    name = type(exc).__name__
    message = re.sub(rf"^(?:litellm\.{name}: )?(?:{name}: )?", "", message)
    return redact(f"{name}: {message}")[:500]
