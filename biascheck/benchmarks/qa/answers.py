"""How a multiple-choice case is answered: the answer modes of the QA benchmarks.

- ``generate`` (the default; KoBBQ's and BBQ's papers): the model replies and the reply is
  parsed (:func:`biascheck.benchmarks.choices.parse_answer`); a reply that names no option is out
  of choice.
- ``loglikelihood`` (lm-evaluation-harness's multiple choice; EsBBQ's and CaBBQ's published
  numbers): each option's continuation is scored by the summed log-probability of its tokens after
  the prompt, through a completions endpoint that echoes the prompt's log-probabilities; the
  answer is the arg max, so no case is out of choice. The continuations are the option letters
  (``" A"``) for prompts that ask for a letter, or the option texts. Beside the raw arg max the
  length-normalised one (log-likelihood per character, lm-evaluation-harness's ``acc_norm``) is
  kept, and ``normalization`` says which one is the answer.
- ``first-token``: one chat call for the top log-probabilities of the first generated token; the
  answer is the option letter that holds the most probability there. When the letters hold less
  than :data:`MIN_CHOICE_MASS` of it, the reply is out of choice (the model wanted to say
  something else), and ``choice_mass`` reports how much they held.

Numbers of different modes are not comparable: a comparison across modes is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biascheck.config.manifest import SuiteManifest
from biascheck.core.errors import BiascheckError
from biascheck.core.records import NO_PROMPT_LOGPROBS, PROMPT_LOGPROBS, TOKEN_LOGPROBS, UNUSABLE_REPLY, Case, Outcome, QATruth, Response

ANSWER_MODES = ("generate", "loglikelihood", "first-token")
NORMALIZATIONS = ("none", "length")
CONTINUATIONS = ("letters", "options")

# first-token: the top alternatives asked for (OpenAI's maximum), read at temperature 1 so that
# every provider's convention (log-probabilities before or after temperature) gives the model's own.
FIRST_TOKEN_PARAMS = {"max_tokens": 1, "logprobs": True, "top_logprobs": 20, "temperature": 1.0}
# loglikelihood: the prompt's log-probabilities are what is read; one generated token is the least
# a server accepts, and ``logprobs: 1`` lists the most likely token at each position (for greedy).
LOGLIKELIHOOD_PARAMS = {"echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0.0}
# first-token: below this share of the first position's probability the letters are not the answer.
MIN_CHOICE_MASS = 0.5

NO_TOKEN_LOGPROBS = "the endpoint returned no log-probabilities for the first token (first-token answers need logprobs and top_logprobs)"


@dataclass(frozen=True)
class AnswerMode:
    """A QA suite's answer mode (``[answers]`` in suite.toml, or ``--biascheck-answer-mode``)."""

    kind: str
    normalization: str = "none"
    continuations: str = "letters"

    def __str__(self) -> str:
        # What results.json, baselines and reports say: two runs compare only when this is equal.
        if self.kind == "loglikelihood":
            answer = "length-normalised log-likelihood" if self.normalization == "length" else "log-likelihood"
            other = "raw" if self.normalization == "length" else "length-normalised"
            return f"loglikelihood (the option {self.continuations} scored; the answer by {answer}, acc_norm_* by the {other} one beside)"
        if self.kind == "first-token":
            return f"first-token (the option letters' probability at the first position, top {FIRST_TOKEN_PARAMS['top_logprobs']})"
        return self.kind

    def fingerprint(self) -> dict[str, str]:
        return {"mode": self.kind, "normalization": self.normalization, "continuations": self.continuations}

    @property
    def needs(self) -> str:
        """What the provider must return (:func:`biascheck.execution.llm.check_serves`)."""
        return PROMPT_LOGPROBS if self.kind == "loglikelihood" else TOKEN_LOGPROBS

    def unserved(self, response: Response) -> str | None:
        """Why the run's first reply shows that the endpoint cannot serve this mode, or None: a
        refusal of the parameters the mode is read from, or a reply without what it reads. (Any
        other error is the run's to retry and count.)"""
        if response.errored:
            error = response.error or ""
            # a refused parameter the mode is read from, or log-probabilities the server gets wrong
            refused = "log-probabilit" in error or any(
                re.search(rf"(?<![\w-]){name}(?![\w-])", error) for name in ("echo", "logprobs", "top_logprobs", "text_offset")
            )
            if not refused:
                return None
            if error.startswith(UNUSABLE_REPLY):  # it answered, with log-probabilities that cannot be true
                return f"its reply's log-probabilities cannot be read ({error.removeprefix(UNUSABLE_REPLY)})"
            return f"the endpoint refused the request {self.kind} answers need: {error}"
        if response.finish_reason == "content_filter":
            return None
        if self.kind == "loglikelihood" and response.loglikelihood is None:
            return NO_PROMPT_LOGPROBS
        if self.kind == "first-token" and response.logprobs is None:
            return NO_TOKEN_LOGPROBS
        return None


def answer_mode(manifest: SuiteManifest, override: str | None) -> AnswerMode | None:
    """The suite's answer mode with the run's override; None for ``generate`` (the papers' protocol,
    which results and baselines of earlier releases recorded without a mode)."""
    table = manifest.answers
    kind = override or table.get("mode", "generate")
    return None if kind == "generate" else AnswerMode(kind, table.get("normalization", "none"), table.get("continuations", "letters"))


Continuations = Callable[[Case, "AnswerMode"], list[tuple[int, str]]]


def continuations(case: Case, mode: AnswerMode) -> list[tuple[int, str]]:
    """(option index, continuation) for each option of a case, in option order: its letter or its
    text after the prompt, separated by a space as lm-evaluation-harness's ``target_delimiter``
    (none when the prompt ends with whitespace). A benchmark whose reference scores more than one
    continuation for an option (EsBBQ's several wordings of "unknown") gives its own list, an
    option's index repeated: the arg max over all of them names the option, as its scorer caps it."""
    prompt = case.messages[-1].content
    delimiter = "" if prompt[-1:].isspace() else " "
    texts = case.letters if mode.continuations == "letters" else case.choices
    return [(index, delimiter + text) for index, text in enumerate(texts)]


def requests(case: Case, params: dict, mode: AnswerMode | None, scored: Continuations = continuations) -> list[tuple[list[dict], dict, int]]:
    messages = case.messages_as_dicts()
    if mode is None:
        return [(messages, params, 0)]
    if mode.kind == "first-token":
        return [(messages, {**params, **FIRST_TOKEN_PARAMS}, 0)]
    # The suite's sampling parameters shape a reply, and a log-likelihood request reads none.
    return [([*messages, {"role": "assistant", "content": text}], dict(LOGLIKELIHOOD_PARAMS), 0) for _, text in scored(case, mode)]


def _letter(token: str, letters: Sequence[str]) -> int | None:
    """The option whose letter an answer token is, as tokenizers split it (``A``, `` A``, ``A:``,
    ``(a``, ``**B``); None for any other token. Case is ignored: a prompt's letters differ by more."""
    core = token.strip().strip("*_`\"'").strip("()").rstrip(".:)").casefold()
    for index, letter in enumerate(letters):
        if core == letter.casefold():
            return index
    return None


def letter_probabilities(logprobs: Mapping[str, float], letters: Sequence[str]) -> list[float]:
    """The probability each option letter holds among the first position's alternatives (the
    variants of one letter summed)."""
    mass = [0.0] * len(letters)
    for token, logprob in logprobs.items():
        index = _letter(token, letters)
        if index is not None:
            mass[index] += math.exp(logprob)
    return mass


def _argmax(values: Sequence[float]) -> int:
    """The first index of the largest value (numpy's arg max, as the reference scorers use)."""
    return max(range(len(values)), key=lambda i: (values[i], -i))


def classify(case: Case, responses: Sequence[Response], mode: AnswerMode, scored_by: Continuations = continuations) -> Outcome:
    """A case answered by log-likelihood or by its first token, read into an outcome."""
    truth = case.truth_as(QATruth)
    errors = [r.error for r in responses if r.error is not None]
    if errors:
        return Outcome(case.case_id, "error", raw=responses[0].text, error=errors[0])
    if any(r.finish_reason == "content_filter" for r in responses):
        return Outcome(case.case_id, "filtered")
    if mode.kind == "first-token":
        (response,) = responses
        if response.logprobs is None:
            return Outcome(case.case_id, "error", raw=response.text, error=NO_TOKEN_LOGPROBS)
        mass = letter_probabilities(response.logprobs, case.letters)
        # At most 1: what a reply lists is checked to sum to no more (execution.llm), within rounding.
        total = min(1.0, sum(mass))
        shown = ", ".join(f"{letter} {p:.3f}" for letter, p in zip(case.letters, mass))
        raw = f"{response.text!r}; first-token probabilities: {shown}"
        if total < MIN_CHOICE_MASS:
            return Outcome(case.case_id, "ooc", raw=raw, choice_mass=total)
        index = _argmax(mass)
        return Outcome(case.case_id, "answered", answer=index, answer_class=truth.answer_class(index), raw=raw, choice_mass=total)
    scored = scored_by(case, mode)
    measured = [r.loglikelihood for r in responses]
    if any(m is None for m in measured) or len(measured) != len(scored):
        return Outcome(case.case_id, "error", error=NO_PROMPT_LOGPROBS)
    lls = [m.logprob for m in measured]  # type: ignore[union-attr]
    # lm-evaluation-harness's acc_norm: per character of the continuation's own text (the delimiter left out).
    per_char = [ll / max(1, len(text.lstrip())) for ll, (_, text) in zip(lls, scored)]
    raw_answer, norm_answer = scored[_argmax(lls)][0], scored[_argmax(per_char)][0]
    index = norm_answer if mode.normalization == "length" else raw_answer
    raw = "log-likelihoods: " + ", ".join(f"{text.strip()!r} {ll:.4f}" for ll, (_, text) in zip(lls, scored))
    return Outcome(
        case.case_id,
        "answered",
        answer=index,
        answer_class=truth.answer_class(index),
        raw=raw,
        answer_norm=norm_answer,
        loglikelihoods=tuple(lls),
    )


def check_listed_options(manifest: SuiteManifest, mode: AnswerMode | None) -> None:
    """A prompt that lists no options (lm-evaluation-harness's, allowed by the manifest when the
    suite scores option texts) can be answered by option-text log-likelihood alone: any other mode
    the run asks for is refused before the first call, never sent without its options."""
    if mode is not None and mode.kind == "loglikelihood" and mode.continuations == "options":
        return
    used = [p for p in manifest.inline_prompts if manifest.prompt_ids is None or p.id in manifest.prompt_ids]
    bare = next((p for p in used if "{a}" not in p.template), None)
    if bare is not None:
        kind = "generate" if mode is None else f"{mode.kind} ({mode.continuations})" if mode.kind == "loglikelihood" else mode.kind
        raise BiascheckError(
            manifest.path,
            f"prompts.inline[{bare.id}]",
            f"lists no options, so it cannot be answered by {kind}",
            'use prompts that list them ([prompts] use), or answer by loglikelihood with continuations = "options"',
        )


def check_table(manifest: SuiteManifest, modes: Sequence[str]) -> None:
    """``[answers]`` names a mode of this benchmark."""
    mode = manifest.answers.get("mode")
    if mode is not None and mode not in modes:
        raise BiascheckError(manifest.path, "answers.mode", f"{mode!r} is not an answer mode", f"use one of: {', '.join(modes)}")


def case_record(outcome: Outcome) -> dict[str, Any]:
    """What results.json adds to a case read by log-likelihood or by its first token."""
    record: dict[str, Any] = {}
    if outcome.loglikelihoods is not None:
        record["loglikelihoods"] = list(outcome.loglikelihoods)
        record["answer_norm_index"] = outcome.answer_norm
    if outcome.choice_mass is not None:
        record["choice_mass"] = outcome.choice_mass
    return record
