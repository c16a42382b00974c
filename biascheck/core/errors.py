"""The one error type users see.

Every problem with user input (manifest, data file, checksum, baseline, option value) is raised
as a :class:`BiascheckError` whose message is a single line naming where, what and the fix. The
pytest plugin and the CLI print that line and exit non-zero instead of showing a traceback.

An error about an option is raised with ``Option(key)`` as its where, and names options in its
texts with ``option(key)`` (:mod:`biascheck.core.spelling`): each is spelled as the front end that
runs the code spells it (``--biascheck-model`` under pytest, ``--model`` in ``biascheck run``), and
the error keeps the key (:attr:`BiascheckError.option`).
"""

from __future__ import annotations

from biascheck.core.spelling import Option, take_unspelled


class BiascheckError(Exception):
    """A user-facing error: ``<where>: <field>: <problem>; <fix>`` on one line."""

    def __init__(self, where: object, field: str | None, problem: object, fix: object | None = None):
        # The key of the option the error is about, when its where is one.
        self.option = where.key if isinstance(where, Option) else None
        self.where = str(where)
        self.field = field
        self.problem = str(problem)  # a Spelled text is spelled here, once
        self.fix = None if fix is None else str(fix)
        # The options its texts name that the running front end does not have (spelled pytest's way):
        # ``biascheck diff`` then gives its own fix rather than one it cannot follow.
        self.unspelled = take_unspelled()
        parts = [_shortened(self.where)]
        if field:
            parts.append(field)
        # One line, always: newlines in a problem (e.g. a quoted bad value) are flattened, and a
        # quoted value of thousands of characters (a schema message repeats it) is cut in the middle.
        message = ": ".join(parts) + ": " + _shortened(" ".join(self.problem.split()))
        if self.fix:
            message += "; " + self.fix
        super().__init__(" ".join(message.split()))


def _shortened(text: str, longest: int = 600) -> str:
    return text if len(text) <= longest else f"{text[:400]} [... {len(text) - 550:,} characters ...] {text[-150:]}"
