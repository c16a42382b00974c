"""Several judges' outcomes of one case -> the case's outcome.

Each judge's reading of a case is the benchmark's outcome of that judge's reply: ``answered`` with
a class (BBG's b / c / u), or no reading (``ooc``: a reply that names no option, ``filtered``, or
``error``: the call failed). A reply that reads as nothing is unscorable for that judge and never a
vote. When no judge was asked (the model's generation errored, was filtered or is empty) every
judge's outcome is the same, and so is the case's.

- ``primary``: the primary judge's outcome, exactly as if it judged alone.
- ``majority``: the class more than half of the judges read. Without one (a tie, a three-way
  split, or too few readings) the case is ``disagreed``.
- ``unanimous``: the class every judge read; any other mix is ``disagreed``.

Under ``majority`` and ``unanimous`` a failed judge call makes the case an error (missing evidence:
the vote it would have cast is unknown), as one judge's error does; a case none of the judges
could read keeps that missing reading (the first judge's outcome), scored by the suite's
convention for what could not be read. A ``disagreed`` case is unscorable under every convention:
it is never read as undetermined.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Final, Literal

from biascheck.core.records import Outcome

DISAGREED: Final[Literal["disagreed"]] = "disagreed"


def aggregate(outcomes: Sequence[Outcome], rule: str, primary: int | None = None, names: Sequence[str] = ()) -> Outcome:
    """One case's outcome from its judges' ``outcomes`` (in panel order) under ``rule``;
    ``names``: the judges', to say which judge's call failed."""
    if len(outcomes) == 1:
        return outcomes[0]
    if rule == "primary":
        if primary is None:
            raise ValueError("aggregation primary needs the primary judge's index")
        return outcomes[primary]
    if rule not in ("majority", "unanimous"):
        raise ValueError(f"{rule!r} is no aggregation")
    for index, outcome in enumerate(outcomes):
        if outcome.status == "error":
            if len(set(outcomes)) == 1 or not names:  # the generation's error: every judge's alike
                return outcome
            return replace(outcome, error=f"{names[index]}: {outcome.error}")
    read = [outcome for outcome in outcomes if outcome.status == "answered"]
    if not read:
        return outcomes[0]
    counts = Counter(outcome.answer_class for outcome in read)
    winner, votes = counts.most_common(1)[0]
    settled = votes == len(outcomes) if rule == "unanimous" else 2 * votes > len(outcomes)
    if settled:
        return next(outcome for outcome in read if outcome.answer_class == winner)
    return Outcome(outcomes[0].case_id, DISAGREED, generation=outcomes[0].generation, truncated=any(o.truncated for o in outcomes))
