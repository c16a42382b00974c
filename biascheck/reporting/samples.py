"""Which answers report.html shows: the sample of biased answers and the sample browser's cases,
chosen from results.json's case records alone (so the run, which keeps their prompts, and the page,
which shows them, choose the same ones), and bounded whatever the suite's size.

Prompts are not part of results.json. :func:`biascheck.reporting.results.build_results` gives the
prompts of the sampled cases beside the run's records (carried to a pytest-xdist controller with
them), and :func:`biascheck.reporting.write.write_reports` passes them to the page alone. A page
rendered from a results.json file alone shows the options and replies of the same cases, without
their prompts.
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Iterable, Sequence

from biascheck.records.run import CaseRecord

# The sample of biased answers: the first by case id in each category.
BIASED_PER_CATEGORY = 5
# The sample browser: this many cases of each (category, outcome, context) group, picked by a hash
# of their ids (so prompts and choice orders vary). KoBBQ's 34,200 cases make 60 groups: 300 cases
# shown, a page of 0.56 MB.
PER_GROUP = 5

Group = tuple[str, str, str]


def _fields(case: CaseRecord) -> tuple[str, str, str, str]:
    """(case id, category, outcome, context type or "") of a case."""
    return case.case_id, case.category, case.outcome, case.context_type or ""


def _is_biased_answer(case: CaseRecord) -> bool:
    # In a biased disambiguated context the stereotyped option is also the correct one: not a biased answer.
    _, _, outcome, context = _fields(case)
    return outcome == "biased" and context != "dis-biased"


def _case_id(case: CaseRecord) -> str:
    return _fields(case)[0]


def biased_sample(cases: Iterable[CaseRecord]) -> dict[str, tuple[list[CaseRecord], int]]:
    """Category -> (up to :data:`BIASED_PER_CATEGORY` answers that chose the stereotyped option
    where it was not the correct one, the first by case id; how many there are), categories in
    code point order."""
    by_category: dict[str, list[CaseRecord]] = {}
    for case in cases:
        if _is_biased_answer(case):
            by_category.setdefault(_fields(case)[1], []).append(case)
    return {
        category: (heapq.nsmallest(BIASED_PER_CATEGORY, by_category[category], key=_case_id), len(by_category[category]))
        for category in sorted(by_category)
    }


def group_of(case: CaseRecord) -> Group:
    _, category, outcome, context = _fields(case)
    return category, outcome, context


def _spread(case: CaseRecord) -> tuple[int, str]:
    case_id = _case_id(case)
    return zlib.crc32(case_id.encode("utf-8")), case_id


def browser_sample(cases: Iterable[CaseRecord]) -> tuple[list[CaseRecord], dict[Group, int]]:
    """The sample browser's cases (groups in order, each group's in case id order) and the size of
    every group: at most :data:`PER_GROUP` per group, those of the smallest CRC-32 of their case
    id. The same cases whatever the order of results.json's cases, spread over the group (prompts
    and choice orders vary), chosen without sorting a full HBB's 773,500 ids."""
    groups: dict[Group, list[CaseRecord]] = {}
    for case in cases:
        groups.setdefault(group_of(case), []).append(case)
    shown: list[CaseRecord] = []
    for key in sorted(groups):
        picked = heapq.nsmallest(PER_GROUP, groups[key], key=_spread)
        shown += sorted(picked, key=_case_id)
    return shown, {key: len(members) for key, members in groups.items()}


def sampled_ids(cases: Sequence[CaseRecord]) -> set[str]:
    """The ids of every case report.html shows: those whose prompts the run keeps for it."""
    ids = {_case_id(c) for shown, _ in biased_sample(cases).values() for c in shown}
    return ids | {_case_id(c) for c in browser_sample(cases)[0]}
