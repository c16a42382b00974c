"""The simulated model's ground truth: the suite's cases, indexed by their exact messages.

The server never looks for markers inside prompts; it recognises a prompt only by the exact
role+content sequence the suite would send, so a prompt the suite does not contain is refused.
The one exception is BBG's judge request, which embeds the evaluated model's story and so cannot
be known in advance: it is recognised as an MRC prompt of one of the suite's BBG questions, whose
rendering with the story it must reproduce exactly (:meth:`SimKnowledge.lookup_mrc`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from biascheck.benchmarks.bbg.data import MRCPrompt, MRCQuestion
from biascheck.benchmarks.qa.answers import CONTINUATIONS, AnswerMode, Continuations, continuations
from biascheck.core.records import Case, QATruth
from biascheck.sim.messages import message_key
from biascheck.sim.stories import find_question, mrc_user_content, parse_mrc_prompt, writer_rank


class SimKnowledge:
    """Cases indexed by :func:`message_key`, and BBG questions indexed for their judge requests.

    ``conflicts`` lists ``(kept_case_id, dropped_case_id)`` for identical prompts whose ground
    truth differs (the first case wins); identical prompts with identical truth are not conflicts.
    BBG cases are not conflicts when they share a generation prompt: the two rows of a story
    version always do (one story, two questions), and a few pairs have versions with the same
    seed. Such a prompt gets one story, written for the version of least
    :func:`~biascheck.sim.stories.writer_rank` (whatever the case order) and, when it is more
    than one version's (:meth:`shares_prompt`), never resolved by the fair writer;
    ``shared_stories`` lists the other versions as ``(writing_version, reading_version)`` story
    keys.
    """

    def __init__(
        self,
        by_key: dict[str, Case],
        conflicts: tuple[tuple[str, str], ...] = (),
        bbg_questions: Iterable[MRCQuestion] = (),
        shared_stories: tuple[tuple[str, str], ...] = (),
        shared_prompts: Iterable[str] = (),
        writers: Mapping[MRCQuestion, MRCQuestion] | None = None,
    ):
        self._by_key = by_key
        self.conflicts = conflicts
        self.shared_stories = shared_stories
        self._shared_prompts = frozenset(shared_prompts)
        self._writers = dict(writers or {})
        self._questions: dict[tuple[str, tuple[str, ...]], list[MRCQuestion]] = {}
        prompts: dict[MRCPrompt, None] = {}
        for question in bbg_questions:
            self._questions.setdefault((question.question, tuple(question.choices)), []).append(question)
            if question.mrc_prompt is not None:
                prompts.setdefault(question.mrc_prompt, None)
        self._mrc_prompts = tuple(prompts)
        # prompt + continuation -> (message key, option, continuation start): built on first use.
        self._continuations: dict[bytes, tuple[str, int, int]] | None = None
        # message key -> what its benchmark scores for each option (default: answers.continuations).
        self._scorers: dict[str, Continuations] = {}

    @classmethod
    def from_cases(cls, cases: Iterable[Case]) -> SimKnowledge:
        by_key: dict[str, Case] = {}
        conflicts: list[tuple[str, str]] = []
        questions: dict[MRCQuestion, None] = {}  # not by key: EnBBG and KoBBG share row ids
        versions: dict[str, set[str]] = {}  # generation prompt -> story keys of its versions
        for case in cases:
            key = message_key(case.messages_as_dicts())
            kept = by_key.setdefault(key, case)
            if isinstance(case.truth, MRCQuestion):
                questions.setdefault(case.truth, None)
                versions.setdefault(key, set()).add(case.truth.story_key)
            if kept is case:
                continue
            if isinstance(kept.truth, MRCQuestion) and isinstance(case.truth, MRCQuestion):
                if writer_rank(case.truth) < writer_rank(kept.truth):
                    by_key[key] = case
            elif (kept.choices, kept.letters, kept.truth) != (case.choices, case.letters, case.truth):
                conflicts.append((kept.case_id, case.case_id))
        shared = tuple(
            (by_key[key].truth_as(MRCQuestion).story_key, other)
            for key, keys in versions.items()
            if len(keys) > 1
            for other in sorted(keys - {by_key[key].truth_as(MRCQuestion).story_key})
        )
        shared_prompts = [key for key, keys in versions.items() if len(keys) > 1]
        # A row reading another version's story reads it as that version's row with its question.
        # (Story keys repeat across EnBBG and KoBBG: the seed tells them apart.)
        rows: dict[tuple[str, str, str], MRCQuestion] = {}
        for question in questions:
            rows.setdefault((question.story_key, question.seed_text, question.qtype), question)
        writers = {}
        for key in shared_prompts:
            writer = by_key[key].truth_as(MRCQuestion)
            for question in questions:
                if (question.run, question.seed_text) == (writer.run, writer.seed_text) and question.story_key != writer.story_key:
                    writers[question] = rows.get((writer.story_key, writer.seed_text, question.qtype), writer)
        return cls(by_key, tuple(conflicts), questions, shared, shared_prompts, writers)

    @classmethod
    def from_suites(cls, suites: Iterable[Any]) -> SimKnowledge:
        """The cases of these suites (loaded :class:`~biascheck.suite.Suite` s), each option scored
        by the continuations of its own suite's benchmark (a benchmark may score more than one per
        option, or other texts), as the loglikelihood answer mode sends them."""
        suites = list(suites)
        knowledge = cls.from_cases(case for suite in suites for case in suite.cases)
        for suite in suites:
            scorer = getattr(suite.benchmark, "continuations", None)
            if scorer is not None:
                for case in suite.cases:
                    knowledge._scorers.setdefault(message_key(case.messages_as_dicts()), scorer)
        return knowledge

    def lookup(self, messages: Sequence[Mapping[str, Any]]) -> Case | None:
        return self._by_key.get(message_key(messages))

    def lookup_key(self, key: str) -> Case | None:
        return self._by_key.get(key)

    def lookup_continuation(self, prompt: str) -> tuple[Case, str, int, int] | None:
        """The QA case whose prompt, followed by one of its options' continuations (as the
        loglikelihood answer mode writes them: letters or texts, by its benchmark's own
        ``continuations`` when known through :meth:`from_suites`), is ``prompt``: (case, its
        message key, the option, where the continuation starts); None for any other text."""
        if self._continuations is None:
            self._continuations = {}
            for key, case in self._by_key.items():
                if isinstance(case.truth, QATruth) and len(case.messages) == 1:
                    scored = self._scorers.get(key, continuations)
                    for kind in CONTINUATIONS:
                        for option, text in scored(case, AnswerMode("loglikelihood", continuations=kind)):
                            whole = case.messages[0].content + text
                            self._continuations.setdefault(hashlib.sha256(whole.encode()).digest(), (key, option, len(case.messages[0].content)))
        found = self._continuations.get(hashlib.sha256(prompt.encode()).digest())
        if found is None:
            return None
        key, option, start = found
        return self._by_key[key], key, option, start

    def shares_prompt(self, key: str) -> bool:
        """Whether the generation prompt with this message key is more than one version's."""
        return key in self._shared_prompts

    def writer_for(self, question: MRCQuestion) -> MRCQuestion | None:
        """The version whose story a question reads when that is not its own (a shared story)."""
        return self._writers.get(question)

    def lookup_mrc(self, messages: Sequence[Mapping[str, Any]]) -> tuple[MRCQuestion, str] | None:
        """The BBG question a judge request asks, with the continuation it embeds (the story after
        the question's seed), or None when the request is no MRC prompt of a known question."""
        if not self._mrc_prompts:
            return None
        content = mrc_user_content(messages)
        if content is None:
            return None
        parsed = parse_mrc_prompt(content, self._mrc_prompts)
        if parsed is None:
            return None
        candidates = self._questions.get((parsed.question, parsed.choices), ())
        return find_question(parsed, candidates, content)

    @property
    def bbg_question_count(self) -> int:
        return sum(len(questions) for questions in self._questions.values())

    def __len__(self) -> int:
        return len(self._by_key)
