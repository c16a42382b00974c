"""What CBBQ's files say against themselves, per category: the table in docs/metrics.md ("CBBQ").

    BIASCHECK_DATA_DIR=../shared/datasets python bench/cbbq_findings.py

Reads every category of the data mirror whose two files are there (upstream's layout under
``cbbq/``) with biascheck's own loader, and prints the Markdown table to paste between the page's
``<!-- cbbq-findings -->`` markers; ``tests/test_cbbq.py`` checks the page's copy against the data.
"""

from __future__ import annotations

import sys

from biascheck.benchmarks.cbbq.benchmark import findings_by_category, findings_markdown
from biascheck.suite import env_data_dir


def main() -> int:
    mirror = env_data_dir()
    if mirror is None:
        print("set BIASCHECK_DATA_DIR to the data mirror (e.g. ../shared/datasets)", file=sys.stderr)
        return 2
    sys.stdout.write(findings_markdown(findings_by_category(mirror / "cbbq")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
