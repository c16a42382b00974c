"""The one error type users see.

Every problem with user input (manifest, data file, checksum, baseline, option value) is raised
as a :class:`BiascheckError` whose message is a single line naming where, what and the fix. The
pytest plugin and the CLI print that line and exit non-zero instead of showing a traceback.
"""

from __future__ import annotations


class BiascheckError(Exception):
    """A user-facing error: ``<where>: <field>: <problem>; <fix>`` on one line."""

    def __init__(self, where: object, field: str | None, problem: str, fix: str | None = None):
        self.where = str(where)
        self.field = field
        self.problem = problem
        self.fix = fix
        parts = [_shortened(self.where)]
        if field:
            parts.append(field)
        # One line, always: newlines in a problem (e.g. a quoted bad value) are flattened, and a
        # quoted value of thousands of characters (a schema message repeats it) is cut in the middle.
        message = ": ".join(parts) + ": " + _shortened(" ".join(problem.split()))
        if fix:
            message += "; " + fix
        super().__init__(" ".join(message.split()))


def _shortened(text: str, longest: int = 600) -> str:
    return text if len(text) <= longest else f"{text[:400]} [... {len(text) - 550:,} characters ...] {text[-150:]}"
