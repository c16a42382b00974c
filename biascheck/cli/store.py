"""``biascheck store merge OUT IN...``: merge the response stores of sharded runs into one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biascheck.cli.common import spelling_of


def add_parser(commands: Any) -> None:
    store = commands.add_parser("store", help="response stores: merge the stores of sharded runs")
    store_commands = store.add_subparsers(dest="store_command", required=True)
    merge = store_commands.add_parser(
        "merge",
        help="merge response stores into OUT (atomic, idempotent; different answers to one request are an error)",
        description="Merge the response stores of sharded runs (--biascheck-shard K/N) into one, which a full run then reads "
        "without a model call. OUT may exist: its answers are kept. Stores of another schema are refused.",
    )
    merge.add_argument("out", type=Path, help="the merged store (created, or extended)")
    merge.add_argument("inputs", type=Path, nargs="+", metavar="IN", help="the stores to merge")
    merge.set_defaults(func=_store_merge, spelling=spelling_of(merge))


def _store_merge(args) -> int:
    from biascheck.execution.store import merge_stores

    result = merge_stores(args.out, args.inputs)
    for source, added in result.added.items():
        print(f"{source}: {added:,} answers added, {result.present[source]:,} already there")
    print(f"{args.out}: {result.total:,} answers")
    return 0
