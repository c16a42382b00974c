"""The exit codes of ``pytest --biascheck`` and of the ``biascheck`` commands, in one table.

The two differ only where their host has its own convention: pytest says 4 for a usage error
(and 2 for Ctrl-C); a command, as argparse does, says 2 for a usage error (and 130, the shell's
code for SIGINT, for Ctrl-C). A run that stopped because nothing could be measured (the circuit
breaker, a fatal model error, a response store that cannot be written) is 4 in both: pytest
reports it as its usage error, and ``biascheck run`` keeps it apart from its own usage errors.
docs/usage.md shows this table, generated from it (docs/hooks.py).
"""

from __future__ import annotations

from dataclasses import dataclass

PASSED = 0
FAILED = 1  # a gate failed: a threshold, a regression (biascheck diff: regressed)
USAGE = 2  # a command's usage error: an option, a file, a suite (pytest: 4)
RUN_STOPPED = 4  # the run stopped: nothing more could be measured
BATCH_PENDING = 6  # --biascheck-batch-wait=no submitted batches: neither a pass nor a failure
INTERRUPTED = 130  # a command stopped by Ctrl-C or SIGTERM (pytest: 2)


@dataclass(frozen=True)
class ExitCode:
    pytest: int | None  # the code pytest --biascheck exits with; None: never
    command: int | None  # the code the biascheck commands exit with; None: never
    meaning: str


EXIT_CODES = (
    ExitCode(PASSED, PASSED, "every check passed (a recording: every baseline written; biascheck diff: no regression)"),
    ExitCode(FAILED, FAILED, "a check failed: a threshold, a regression, a baseline not written, a comparison with errored cases"),
    ExitCode(4, USAGE, "a usage error: an option, an ini key, a suite.toml, a baseline or results.json; one line says what and the fix"),
    ExitCode(
        RUN_STOPPED,
        RUN_STOPPED,
        "the run stopped: the endpoint cannot be reached (circuit breaker), a fatal model or judge error, the response store cannot "
        "be written (disk full, read-only); one line says why, the report says what was kept, and the next run resumes",
    ),
    ExitCode(BATCH_PENDING, BATCH_PENDING, "batches submitted with batch-wait no: nothing scored yet; a later run collects them"),
    ExitCode(2, INTERRUPTED, "interrupted (Ctrl-C, SIGTERM): one line says how many answers the store kept; the same command resumes"),
    ExitCode(3, None, "pytest's internal error: a bug in biascheck or a plugin, never an expected outcome"),
)
