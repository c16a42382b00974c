"""``biascheck serve-local``'s server: an OpenAI-compatible HTTP API over one GGUF model, in one
process, on llama.cpp's Python bindings (``llama_cpp.Llama`` and its low-level API).

It answers what biascheck's real-model paths send (:mod:`biascheck.execution.local_model` starts
it; ``python -m biascheck.execution.local_server PARENT_PID --model FILE --alias NAME ...``):

- ``POST /v1/completions``: a completion of a text prompt; with ``echo`` the prompt's tokens come
  back with their log-probabilities (the loglikelihood answer mode), with ``logprobs: N`` each
  position's N most likely alternatives too.
- ``POST /v1/chat/completions``: a reply in the model's chat template (generation), with
  ``logprobs`` and ``top_logprobs`` at each generated position (the first-token answer mode, HBB's
  logprob estimator).
- ``GET /v1/models`` (the served alias), ``GET /health``, and ``POST /extras/tokenize``,
  ``/extras/tokenize/count`` and ``/extras/detokenize`` as llama-cpp-python's server has them.

Log-probabilities are read from the logits: a log-softmax of the logits row, in numpy, at only the
positions asked for (every prompt position for an echo with logprobs, the generated positions for
logprobs, none otherwise), and the alternatives by ``argpartition``, only when asked, never a sort
of the vocabulary. Token ``i`` of the prompt is scored by the distribution the model gives after
tokens ``0..i-1``, whether the model starts its prompts with a BOS token (Gemma: the BOS is not
echoed, and the first echoed token is scored after it) or not (SmolLM2: the first token has nothing
before it, so its log-probability is null, as OpenAI's echo gives the first token). llama.cpp's own
server sorts the 262,144-token vocabulary of Gemma at every echoed position (30-60 s a request on
2 cores) and, for a model without BOS, scores each echoed token by the distribution after it.

An echo request reuses what it can of the one before: the positions of the longest common token
prefix are not scored again, and llama.cpp's KV cache keeps that prefix up to the last multiple of
128 tokens before the first difference, so a case's second and third options (the same prompt,
another continuation) cost the tokens from there, and every row of logits is the one a fresh start
computes (decoded with the same tokens around it: the answer does not depend on earlier requests).

Sampling is llama.cpp's own sampler chain (``Llama.generate``), with llama-cpp-python's server's
defaults for what a request leaves out (temperature 0.8, top_p 0.95, top_k 40, min_p 0.05,
repeat_penalty 1.1). One model per process; requests are answered one at a time (a lock), the
health and model list at once. A bad request gets HTTP 400 with a one-line message naming the
field, in OpenAI's error shape. The process ends when the one that started it does (its stdin
pipe closes; on Linux also ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import ctypes
import json
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

# The most alternatives a position lists (OpenAI's chat maximum), and the largest request body read.
MAX_TOP_LOGPROBS = 20
MAX_BODY_BYTES = 16 << 20
# Rows of logits scored at once: a Gemma row is 262,144 floats (1 MiB), so this bounds the
# temporaries of a log-softmax to 16 MiB.
_ROWS_PER_BLOCK = 16
# Prompt tokens decoded per llama_decode call when every position's logits are kept: llama.cpp
# holds that many rows of logits (128 MiB for Gemma).
_ECHO_CHUNK = 128

# What a request leaves out, as llama-cpp-python's server fills it in (its CreateCompletionRequest
# and CreateChatCompletionRequest); max_tokens: OpenAI's 16 for completions, the context for chat.
SAMPLING_DEFAULTS: dict[str, Any] = {
    "temperature": 0.8,
    "top_p": 0.95,
    "top_k": 40,
    "min_p": 0.05,
    "typical_p": 1.0,
    "repeat_penalty": 1.1,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
}


class RequestError(Exception):
    """A request this server will not answer: its HTTP status and a one-line message."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.param = param

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.status}}


# --- request fields -------------------------------------------------------------------------------


def _number(body: dict[str, Any], name: str, low: float | None = None, high: float | None = None) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"{name} must be a number, not {json.dumps(value)[:40]}", param=name)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low:g}" if high is None else f"up to {high:g}" if low is None else f"from {low:g} to {high:g}"
        raise RequestError(f"{name} must be a number {bounds}, not {value}", param=name)
    return float(value)


def _integer(body: dict[str, Any], name: str, low: int | None = None, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, not {json.dumps(value)[:40]}", param=name)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"from {low} to {high}"
        raise RequestError(f"{name} must be an integer {bounds}, not {value}", param=name)
    return value


def _boolean(body: dict[str, Any], name: str) -> bool | None:
    value = body.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise RequestError(f"{name} must be true or false, not {json.dumps(value)[:40]}", param=name)


def _stops(body: dict[str, Any]) -> list[str]:
    value = body.get("stop")
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return [s for s in value if s]
    raise RequestError("stop must be a string or a list of strings", param="stop")


_COMMON = frozenset(
    {"model", "max_tokens", "stop", "seed", "stream", "n", "user", "mirostat_mode", "mirostat_tau", "mirostat_eta", *SAMPLING_DEFAULTS}
)
COMPLETION_FIELDS = _COMMON | {"prompt", "echo", "logprobs", "best_of", "suffix", "logit_bias"}
CHAT_FIELDS = _COMMON | {"messages", "logprobs", "top_logprobs", "max_completion_tokens", "logit_bias"}


@dataclass(frozen=True)
class Sampling:
    """How the tokens of a reply are drawn, and how many at most."""

    max_tokens: int | None  # None: until the context is full
    seed: int | None
    stops: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)  # Llama.generate's keyword arguments


def read_sampling(body: dict[str, Any], allowed: frozenset[str], max_tokens_default: int | None) -> Sampling:
    """The sampling of a request, every field checked; a :class:`RequestError` names the first
    field that is wrong, unknown or asks for what this server does not do."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        # OpenAI's words, which biascheck reads as a refused parameter (and then sends without it).
        raise RequestError(f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    if _boolean(body, "stream"):
        raise RequestError("stream is not supported by this server; send stream: false or leave it out", param="stream")
    for name in ("n", "best_of"):
        if body.get(name) not in (None, 1):
            raise RequestError(f"{name} must be 1 (this server returns one choice)", param=name)
    if body.get("logit_bias"):
        raise RequestError("logit_bias is not supported by this server", param="logit_bias")
    if body.get("suffix") is not None:
        raise RequestError("suffix is not supported by this server", param="suffix")
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise RequestError("user must be a string", param="user")
    if body.get("model") is not None and not isinstance(body["model"], str):
        raise RequestError("model must be a string", param="model")
    max_tokens = _integer(body, "max_tokens", 0)
    if "max_completion_tokens" in allowed and body.get("max_completion_tokens") is not None:
        max_tokens = _integer(body, "max_completion_tokens", 0)
    if "max_tokens" not in body and "max_completion_tokens" not in body:
        max_tokens = max_tokens_default
    seed = _integer(body, "seed")
    temperature = _number(body, "temperature", 0.0, 2.0)
    top_p = _number(body, "top_p", 0.0, 1.0)
    top_k = _integer(body, "top_k", 0)
    min_p = _number(body, "min_p", 0.0, 1.0)
    typical_p = _number(body, "typical_p", 0.0, 1.0)
    repeat_penalty = _number(body, "repeat_penalty", 0.0)
    frequency_penalty = _number(body, "frequency_penalty", -2.0, 2.0)
    presence_penalty = _number(body, "presence_penalty", -2.0, 2.0)
    mirostat_mode = _integer(body, "mirostat_mode", 0, 2)
    mirostat_tau = _number(body, "mirostat_tau", 0.0)
    mirostat_eta = _number(body, "mirostat_eta", 0.001, 1.0)
    given = {
        "temp": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "min_p": min_p,
        "typical_p": typical_p,
        "repeat_penalty": repeat_penalty,
        "frequency_penalty": frequency_penalty,
        "presence_penalty": presence_penalty,
        "mirostat_mode": mirostat_mode,
        "mirostat_tau": mirostat_tau,
        "mirostat_eta": mirostat_eta,
    }
    defaults = {"temp" if k == "temperature" else k: v for k, v in SAMPLING_DEFAULTS.items()}
    options = {k: (v if v is not None else defaults[k]) for k, v in given.items() if v is not None or k in defaults}
    return Sampling(max_tokens, seed, tuple(_stops(body)), options)


def read_messages(body: dict[str, Any]) -> list[dict[str, str]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list of {role, content} objects", param="messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise RequestError(f"messages[{i}] must be an object with role and content", param="messages")
        role, content = message.get("role"), message.get("content")
        if role not in ("system", "user", "assistant"):
            raise RequestError(f"messages[{i}].role must be system, user or assistant, not {json.dumps(role)[:40]}", param="messages")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise RequestError(f"messages[{i}].content must be a string (this server takes no content parts)", param="messages")
        extra = sorted(set(message) - {"role", "content", "name"})
        if extra:
            raise RequestError(f"messages[{i}] has a field this server does not take: {extra[0]}", param="messages")
        out.append({"role": role, "content": content})
    return out


# --- log-probabilities from logits ------------------------------------------------------------------


def score_rows(rows: np.ndarray, tokens: Sequence[int], top_n: int) -> tuple[list[float], list[list[tuple[int, float]]]]:
    """For each row of logits and the token that followed it: the token's log-probability under
    the row's softmax, and (top_n > 0) the top_n most likely tokens with theirs, best first.

    A log-softmax in numpy (max-shifted, the sum in float64), block by block; the alternatives by
    argpartition, so the vocabulary is never sorted."""
    values: list[float] = []
    tops: list[list[tuple[int, float]]] = []
    picked = np.asarray(tokens, dtype=np.int64)
    for start in range(0, rows.shape[0], _ROWS_PER_BLOCK):
        block = rows[start : start + _ROWS_PER_BLOCK]
        peak = block.max(axis=1)
        shifted = np.exp(block - peak[:, None])
        lse = peak.astype(np.float64) + np.log(shifted.sum(axis=1, dtype=np.float64))
        chosen = block[np.arange(block.shape[0]), picked[start : start + block.shape[0]]].astype(np.float64) - lse
        values.extend(float(v) for v in chosen)
        if top_n > 0:
            n = min(top_n, block.shape[1])
            if n == 1:
                best = block.argmax(axis=1)[:, None]
            else:
                best = np.argpartition(block, block.shape[1] - n, axis=1)[:, block.shape[1] - n :]
            for r in range(block.shape[0]):
                ids = best[r]
                logps = block[r, ids].astype(np.float64) - lse[r]
                order = np.argsort(-logps, kind="stable")
                tops.append([(int(ids[k]), float(logps[k])) for k in order])
        else:
            tops.extend([] for _ in range(block.shape[0]))
    return values, tops


def text_spans(pieces: Sequence[bytes], text: str, base: int = 0) -> list[tuple[int, str]]:
    """(character offset, token text) of each token whose bytes are ``pieces``, in ``text``.

    When the pieces spell ``text`` (its UTF-8 bytes, or those after one leading space an SPM
    tokenizer added), a token's offset is the character its first byte falls in, and its text the
    characters it completes: a character split over two tokens belongs to the second, and the first
    is "". Otherwise (a tokenizer that does not give its input back) each piece is read on its own,
    the offsets counted in its decoded text."""
    data = b"".join(pieces)
    encoded = text.encode("utf-8")
    shift = 0
    if data != encoded:
        if data[:1] == b" " and data[1:] == encoded:
            shift = 1
        else:
            out, offset = [], base
            for piece in pieces:
                token = piece.decode("utf-8", errors="ignore")
                out.append((offset, token))
                offset += len(token)
            return out
    starts = [0]
    for char in text:
        starts.append(starts[-1] + len(char.encode("utf-8")))

    def complete(at: int) -> int:  # the characters whose bytes all lie before byte ``at``
        return bisect.bisect_right(starts, max(0, at)) - 1

    out = []
    position = -shift
    for piece in pieces:
        first, end = complete(position), complete(position + len(piece))
        out.append((base + first, text[first:end]))
        position += len(piece)
    return out


# --- the model ------------------------------------------------------------------------------------


@dataclass
class _Scored:
    """The per-position log-probabilities of the last echoed prompt: positions[i] scores tokens[i]."""

    tokens: list[int]
    top_n: int
    positions: list[tuple[float | None, list[tuple[int, float]]]]


@dataclass
class _Generated:
    tokens: list[int]
    text: bytes
    finish_reason: str
    scored: list[tuple[float, list[tuple[int, float]]]]  # per generated token, when logprobs were asked


class ServedModel:
    """One GGUF model on llama.cpp, answering the API's requests one at a time (callers hold
    :attr:`lock`)."""

    def __init__(self, path: str, alias: str, *, chat_format: str | None, n_ctx: int, threads: int):
        import llama_cpp
        from llama_cpp import llama_chat_format

        self.lock = threading.Lock()
        self.alias = alias
        self._api = llama_cpp
        # Logits are kept for the last position of each decode only; the echo decodes the prompt
        # itself, with every position's logits. swa_full: Gemma's sliding-window layers keep every
        # position, so a kept prefix is whole when a prompt after it is decoded again.
        self.llama = llama_cpp.Llama(
            model_path=path,
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            swa_full=True,
            verbose=False,
        )
        self.n_ctx = self.llama.n_ctx()
        self.n_vocab = self.llama.n_vocab()
        self._vocab = llama_cpp.llama_model_get_vocab(self.llama.model)
        bos = llama_cpp.llama_vocab_bos(self._vocab)
        self.bos: int | None = bos if bos >= 0 and llama_cpp.llama_vocab_get_add_bos(self._vocab) else None
        self._pieces: dict[tuple[int, bool], bytes] = {}
        self._piece_buffer = ctypes.create_string_buffer(256)
        self._batch = llama_cpp.llama_batch_init(_ECHO_CHUNK, 0, 1)
        self._scored: _Scored | None = None
        self._formatter = self._chat_formatter(chat_format, llama_chat_format)

    def _chat_formatter(self, chat_format: str | None, formats: Any) -> Any:
        """The chat template llama-cpp-python would apply: a named format, or the GGUF's own."""
        if chat_format == "gemma":
            return formats.format_gemma
        if chat_format is not None:
            raise SystemExit(f"chat format {chat_format!r} is not one this server knows (gemma, or none for the GGUF's own template)")
        template = self.llama.metadata.get("tokenizer.chat_template")
        if not template:
            return None
        eos, bos = self.llama.token_eos(), self.llama.token_bos()
        return formats.Jinja2ChatFormatter(
            template=template,
            eos_token=self._piece(eos, True).decode("utf-8", "ignore") if eos >= 0 else "",
            bos_token=self._piece(bos, True).decode("utf-8", "ignore") if bos >= 0 else "",
            stop_token_ids=[eos],
        )

    def close(self) -> None:
        self._api.llama_batch_free(self._batch)
        self.llama.close()

    # --- tokens ---------------------------------------------------------------------------------

    def _piece(self, token: int, special: bool) -> bytes:
        key = (token, special)
        piece = self._pieces.get(key)
        if piece is None:
            buffer = self._piece_buffer
            n = self._api.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, special)
            if n < 0:
                buffer = ctypes.create_string_buffer(-n)
                n = self._api.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, special)
            piece = self._pieces[key] = buffer.raw[: max(n, 0)]
        return piece

    def _token_text(self, token: int) -> str:
        return self._piece(token, True).decode("utf-8", errors="ignore")

    def prompt_tokens(self, prompt: str) -> list[int]:
        """A completion prompt's tokens as llama-cpp-python makes them: the BOS token if the
        model adds one, then the text with special tokens read as such."""
        tokens = self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True) if prompt else []
        return ([self.bos] if self.bos is not None else []) + tokens

    def _check_fits(self, tokens: Sequence[int]) -> None:
        if not tokens:
            raise RequestError("the prompt is empty", param="prompt")
        if len(tokens) >= self.n_ctx:
            raise RequestError(
                f"the prompt is {len(tokens)} tokens, and the context holds {self.n_ctx} (start serve-local with a larger --n-ctx)", param="prompt"
            )

    # --- decoding -------------------------------------------------------------------------------

    def _reset(self) -> None:
        """Forget what the context holds (after a failed decode): the next request starts afresh."""
        self.llama.n_tokens = 0
        self._scored = None

    def _score_prompt(self, tokens: list[int], top_n: int) -> list[tuple[float | None, list[tuple[int, float]]]]:
        """(log-probability, alternatives) of every position of ``tokens``: position i by the
        logits after tokens[:i]; position 0 has none. The positions of the longest prefix shared
        with the last scored prompt are taken from it, and the KV cache's prefix is kept."""
        llama, api = self.llama, self._api
        n = len(tokens)
        cached = self._scored if self._scored is not None and self._scored.top_n == top_n else None
        shared = _common_prefix(cached.tokens, tokens) if cached else 0
        positions = list(cached.positions[:shared]) if cached else []
        if not positions:
            positions.append((None, []))
        first = len(positions)  # the first position still to score, by the row of position first - 1
        in_cache = _common_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens)
        # Decode from here: every row from first - 1 on, and the last. From the start of a chunk, so
        # that each row is computed by the same decode of the same tokens as in a fresh start (a
        # decode of fewer tokens takes other kernels, whose logits differ by up to 1e-2): what a
        # request is answered does not depend on the requests before it.
        start = min(in_cache, first - 1, n - 1) // _ECHO_CHUNK * _ECHO_CHUNK
        mem = api.llama_get_memory(llama.ctx)
        if not api.llama_memory_seq_rm(mem, -1, start, -1):
            start = 0
            api.llama_memory_seq_rm(mem, -1, 0, -1)
        llama.n_tokens = start
        batch = self._batch
        for chunk in range(start, n, _ECHO_CHUNK):
            end = min(n, chunk + _ECHO_CHUNK)
            batch.n_tokens = end - chunk
            for j in range(chunk, end):
                k = j - chunk
                batch.token[k] = tokens[j]
                batch.pos[k] = j
                batch.n_seq_id[k] = 1
                batch.seq_id[k][0] = 0
                batch.logits[k] = True
            code = api.llama_decode(llama.ctx, batch)
            if code != 0:
                self._reset()
                raise RequestError(f"llama_decode failed with code {code}", status=500)
            llama.input_ids[chunk:end] = tokens[chunk:end]
            llama.n_tokens = end
            rows = np.ctypeslib.as_array(api.llama_get_logits(llama.ctx), shape=(end - chunk, self.n_vocab))
            # Row j scores token j + 1: the rows of this chunk that score a position not yet scored.
            lo, hi = max(chunk, first - 1), min(end, n - 1)
            if lo < hi:
                values, tops = score_rows(rows[lo - chunk : hi - chunk], tokens[lo + 1 : hi + 1], top_n)
                positions.extend(zip(values, tops))
        self._scored = _Scored(list(tokens), top_n, positions)
        # The context's last logits are the last position's: Llama.generate samples from them as
        # they are, rather than decoding that token again on its own (other kernels, other logits).
        llama._requires_eval = False
        return positions

    def _generate(self, tokens: list[int], sampling: Sampling, top_n: int | None) -> _Generated:
        """Tokens drawn after ``tokens`` by llama.cpp's sampler, to max_tokens, an end-of-generation
        token (kept in the tokens and their log-probabilities, not in the text), or a stop string
        (the text cut before it). ``top_n`` not None: each drawn token's log-probability and
        top_n alternatives, from the logits it was drawn from."""
        api, llama = self._api, self.llama
        room = self.n_ctx - len(tokens)
        limit = room if sampling.max_tokens is None else min(sampling.max_tokens, room)
        out = _Generated([], b"", "length", [])
        if limit <= 0:
            return out
        llama.set_seed(sampling.seed if sampling.seed is not None else random.randint(0, 2**31 - 1))
        stops = [s.encode("utf-8") for s in sampling.stops]
        stream = llama.generate(tokens, **sampling.options)
        try:
            for token in stream:
                if top_n is not None:
                    row = np.ctypeslib.as_array(api.llama_get_logits_ith(llama.ctx, -1), shape=(1, self.n_vocab))
                    values, tops = score_rows(row, [token], top_n)
                    out.scored.append((values[0], tops[0]))
                out.tokens.append(token)
                if api.llama_vocab_is_eog(self._vocab, token):
                    out.finish_reason = "stop"
                    break
                out.text += self._piece(token, False)
                found = [out.text.index(s) for s in stops if s in out.text]
                if found:
                    out.text = out.text[: min(found)]
                    out.finish_reason = "stop"
                    break
                if len(out.tokens) >= limit:
                    break
        except Exception:
            self._reset()
            raise
        finally:
            stream.close()
        return out

    # --- the endpoints --------------------------------------------------------------------------

    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model is not None and model != self.alias:
            raise RequestError(f"model {model!r} is not served here; this server serves {self.alias!r}", status=404, param="model")

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        sampling = read_sampling(body, COMPLETION_FIELDS, 16)
        self._check_model(body)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise RequestError("prompt must be a string (or a list of one string)", param="prompt")
        echo = bool(_boolean(body, "echo"))
        top_n = _integer(body, "logprobs", 0, MAX_TOP_LOGPROBS)
        tokens = self.prompt_tokens(prompt)
        self._check_fits(tokens)
        scored = self._score_prompt(tokens, top_n) if echo and top_n is not None else None
        generated = self._generate(tokens, sampling, top_n)
        text = generated.text.decode("utf-8", errors="ignore")
        logprobs: dict[str, list[Any]] | None = None
        if top_n is not None:
            logprobs = {"tokens": [], "text_offset": [], "token_logprobs": [], "top_logprobs": []}
            if scored is not None:
                skip = 1 if self.bos is not None else 0  # the BOS this server added is no token of the prompt's text
                echoed = tokens[skip:]
                spans = text_spans([self._piece(t, True) for t in echoed], prompt)
                for (offset, token_text), (value, alternatives) in zip(spans, scored[skip:]):
                    self._add_position(logprobs, token_text, offset, value, alternatives)
            base = len(prompt) if echo else 0
            pieces = [b"" if self._api.llama_vocab_is_eog(self._vocab, t) else self._piece(t, False) for t in generated.tokens]
            spans = text_spans(pieces, b"".join(pieces).decode("utf-8", errors="ignore"), base)
            for token, (offset, token_text), (value, alternatives) in zip(generated.tokens, spans, generated.scored):
                self._add_position(logprobs, token_text or self._token_text(token), offset, value, alternatives)
        return {
            "id": f"cmpl-{uuid.uuid4()}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.alias,
            "choices": [{"text": prompt + text if echo else text, "index": 0, "logprobs": logprobs, "finish_reason": generated.finish_reason}],
            "usage": _usage(len(tokens), len(generated.tokens)),
        }

    def _add_position(
        self, logprobs: dict[str, list[Any]], token: str, offset: int, value: float | None, alternatives: list[tuple[int, float]]
    ) -> None:
        logprobs["tokens"].append(token)
        logprobs["text_offset"].append(offset)
        logprobs["token_logprobs"].append(value)
        if value is None:
            logprobs["top_logprobs"].append(None)
            return
        listed: dict[str, float] = {}
        for alternative, logprob in alternatives:
            listed.setdefault(self._token_text(alternative), logprob)
        listed.setdefault(token, value)  # the token's own, as OpenAI lists it beside the top N
        logprobs["top_logprobs"].append(listed)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        sampling = read_sampling(body, CHAT_FIELDS, None)
        self._check_model(body)
        messages = read_messages(body)
        wants = _boolean(body, "logprobs")
        top = _integer(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
        if top is not None and not wants:
            raise RequestError("top_logprobs needs logprobs: true", param="top_logprobs")
        if self._formatter is None:
            raise RequestError("the model carries no chat template; send a text prompt to /v1/completions", param="messages")
        try:
            formatted = self._formatter(messages=messages)
        except Exception as exc:  # a template's raise_exception (e.g. roles out of order)
            raise RequestError(f"the chat template refused the messages: {exc}", param="messages") from None
        stops = [formatted.stop] if isinstance(formatted.stop, str) else list(formatted.stop or [])
        sampling = Sampling(sampling.max_tokens, sampling.seed, (*sampling.stops, *stops), sampling.options)
        tokens = self.llama.tokenize(formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True)
        self._check_fits(tokens)
        generated = self._generate(tokens, sampling, (top or 0) if wants else None)
        logprobs = None
        if wants:
            content = []
            for token, (value, alternatives) in zip(generated.tokens, generated.scored):
                piece = self._piece(token, self._api.llama_vocab_is_eog(self._vocab, token))
                content.append(
                    {
                        "token": piece.decode("utf-8", errors="ignore"),
                        "logprob": value,
                        "bytes": list(piece),
                        "top_logprobs": [
                            {"token": self._token_text(t), "logprob": lp, "bytes": list(self._piece(t, True))} for t, lp in alternatives
                        ],
                    }
                )
            logprobs = {"content": content}
        message = {"role": "assistant", "content": generated.text.decode("utf-8", errors="ignore")}
        return {
            "id": f"chatcmpl-{uuid.uuid4()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.alias,
            "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": generated.finish_reason}],
            "usage": _usage(len(tokens), len(generated.tokens)),
        }

    def tokenize(self, body: dict[str, Any]) -> list[int]:
        text = body.get("input")
        if not isinstance(text, str):
            raise RequestError("input must be a string", param="input")
        return self.llama.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    def detokenize(self, body: dict[str, Any]) -> str:
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < self.n_vocab for t in tokens):
            raise RequestError(f"tokens must be a list of token ids from 0 to {self.n_vocab - 1}", param="tokens")
        return b"".join(self._piece(t, False) for t in tokens).decode("utf-8", errors="ignore")


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# --- HTTP -----------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ServedModel | None = None  # None while it loads


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: biascheck's client pools its connections
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # one line per request is written by _answer instead

    def do_GET(self) -> None:
        model = self.server.model
        if self.path in ("/health", "/v1/health"):
            self._send(200 if model else 503, {"status": "ok" if model else "loading"})
        elif self.path in ("/v1/models", "/models"):
            if model is None:
                self._send(503, RequestError("the model is still loading", status=503).body())
            else:
                self._send(200, {"object": "list", "data": [{"id": model.alias, "object": "model", "owned_by": "me", "permissions": []}]})
        else:
            self._send(404, RequestError(f"no such endpoint: GET {self.path}", status=404).body())

    def do_POST(self) -> None:
        started = time.perf_counter()
        routes = {
            "/v1/completions": "completion",
            "/completions": "completion",
            "/v1/chat/completions": "chat",
            "/chat/completions": "chat",
            "/extras/tokenize": "tokenize",
            "/extras/tokenize/count": "count",
            "/extras/detokenize": "detokenize",
        }
        route = routes.get(self.path)
        status, usage = 200, ""
        try:
            body = self._body()  # read first: a body left unread would be taken for the next request
            if route is None:
                raise RequestError(f"no such endpoint: POST {self.path}", status=404)
            model = self.server.model
            if model is None:
                raise RequestError("the model is still loading", status=503)
            with model.lock:
                if route == "completion":
                    answer = model.completion(body)
                elif route == "chat":
                    answer = model.chat(body)
                elif route == "tokenize":
                    answer = {"tokens": model.tokenize(body)}
                elif route == "count":
                    answer = {"count": len(model.tokenize(body))}
                else:
                    answer = {"text": model.detokenize(body)}
            if "usage" in answer:
                usage = " prompt={prompt_tokens} completion={completion_tokens}".format(**answer["usage"])
        except RequestError as exc:
            status, answer = exc.status, exc.body()
            usage = f" error: {exc}"
        except Exception as exc:
            error = RequestError(f"the server failed: {type(exc).__name__}: {' '.join(str(exc).split())}", status=500)
            status, answer = error.status, error.body()
            usage = f" error: {error}"
        self._send(status, answer)
        print(f"POST {self.path} {status} {1000 * (time.perf_counter() - started):.0f} ms{usage}", flush=True)

    def _body(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True  # the body's end is unknown: this connection can carry no other request
            raise RequestError("the request has no Content-Length", status=411)
        size = int(length)
        if size > MAX_BODY_BYTES:
            self.close_connection = True
            raise RequestError(f"the request body is over {MAX_BODY_BYTES >> 20} MiB", status=413)
        data = self.rfile.read(size)
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise RequestError(f"the request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        return body

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)


@contextlib.contextmanager
def serving(model_path: str, alias: str, *, chat_format: str | None, host: str, port: int, n_ctx: int, threads: int) -> Iterator[_Server]:
    """A bound server with its model loaded; ``serve_forever()`` it. Binds first, so a port in use
    fails at once, before the model loads."""
    server = _Server((host, port), _Handler)
    try:
        server.model = ServedModel(model_path, alias, chat_format=chat_format, n_ctx=n_ctx, threads=threads)
        yield server
    finally:
        server.server_close()
        if server.model is not None:
            server.model.close()


def _tie_to_parent(parent: int) -> None:
    """End this process when the one that started it ends, however it ends (even SIGKILL): a
    watchdog thread exits when the stdin pipe from the parent closes, and on Linux the kernel sends
    SIGTERM when the parent dies (``PR_SET_PDEATHSIG``)."""
    if sys.platform.startswith("linux"):
        import signal

        with contextlib.suppress(Exception):  # best effort; the stdin watchdog below covers the rest
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)

    def watch() -> None:
        # The parent holds the write end of our stdin: EOF means it is gone, however it ended.
        try:
            while sys.stdin.buffer.read(1):
                pass
        finally:
            os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m biascheck.execution.local_server", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("parent", type=int, help="the pid of the process this server dies with (0: none)")
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the model name the API serves")
    parser.add_argument("--chat-format", default=None, help="gemma, or none for the GGUF's own template")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.parent:
        _tie_to_parent(args.parent)
    try:
        with serving(
            args.model, args.alias, chat_format=args.chat_format, host=args.host, port=args.port, n_ctx=args.n_ctx, threads=args.threads
        ) as server:
            print(f"serving {args.model} as {args.alias} at http://{args.host}:{server.server_address[1]}/v1", flush=True)
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # "Address already in use" (read by the parent), a file llama.cpp cannot load
        print(f"local_server: {type(exc).__name__}: {' '.join(str(exc).split())}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
