"""``biascheck history SUITE``: a suite's baselines across releases, printed as Markdown and written
as ``history.json`` and ``history.html``: into ``--out FOLDER``, by default
``.biascheck/history/<suite>`` (beside the reports, which a project ignores already), so that the
command leaves no untracked file in the working folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from biascheck.cli.common import spelling_of
from biascheck.core.errors import BiascheckError


def add_parser(commands: Any) -> None:
    history = commands.add_parser(
        "history",
        help="a suite's baselines across releases: each headline metric, release by release, each release tested against the one before, "
        "and history.json and history.html",
        description="Read a suite's baselines, DIR/<suite>/*.json and the replaced ones --biascheck-update-baseline keeps in "
        "DIR/<suite>/history/, order them by the time each was recorded and show each headline metric across them, with its "
        "interval and the suite's threshold, and mark each release that failed its thresholds or regressed against the release before "
        "(the paired test of biascheck diff): Markdown printed, history.json and history.html written (by default into "
        ".biascheck/history/<suite>).",
    )
    history.add_argument("suite", metavar="SUITE", help="a suite folder, or a suite's name (a packaged suite, or the name of its baselines folder)")
    history.add_argument(
        "--baselines", type=Path, default=Path("baselines"), metavar="DIR", help="the folder of the suites' baseline folders (default: baselines)"
    )
    history.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FOLDER",
        help="folder for history.json and history.html (default: .biascheck/history/<suite>, created if missing)",
    )
    history.set_defaults(func=_history, spelling=spelling_of(history))


def _history_suite(text: str, folder: Path):
    """(the suite's name, its manifest or None) for ``biascheck history SUITE``: a suite folder; a
    packaged suite's name (as pytest reads a bare name); else the name of a folder under ``folder``,
    whose baselines are then shown without thresholds."""
    from biascheck.config.catalog import looks_like_a_name, packaged_suite, packaged_suites
    from biascheck.config.manifest import load_manifest

    path = Path(text)
    if (path / "suite.toml").is_file():
        manifest = load_manifest(path)
        return manifest.name, manifest
    if looks_like_a_name(text) and text in packaged_suites():
        manifest = load_manifest(packaged_suite(text))
        return manifest.name, manifest
    if looks_like_a_name(text) and (folder / text).is_dir():
        return text, None
    raise BiascheckError(
        text,
        None,
        f"is neither a suite folder, nor a packaged suite, nor the name of a folder in {folder}",
        "give the suite's folder (its suite.toml has the thresholds), or its name as its baselines folder is named; --baselines DIR says where they are",
    )


def _history(args) -> int:
    from biascheck.evaluation import baseline as baselines
    from biascheck.reporting.runs import history_document, render_history_markdown
    from biascheck.reporting.write import DEFAULT_HISTORY, write_history

    name, manifest = _history_suite(args.suite, args.baselines)
    folder = args.baselines / name
    if not folder.is_dir():
        raise BiascheckError(
            folder,
            None,
            "no such folder: the suite has no baseline there",
            "record one (pytest's update-baseline option), or point --baselines at the folder holding it",
        )
    # Each baseline read once, as its record.
    releases = [(str(path), baseline) for path, baseline in baselines.releases(folder)]
    view = history_document(
        releases,
        suite=name,
        thresholds={metric: threshold.to_dict() for metric, threshold in manifest.thresholds.items()} if manifest else None,
        gated_metrics=manifest.gated_metrics(None) if manifest else [],
        # For a release whose predecessor records no [regression] table (a baseline of an older biascheck).
        regression=manifest.regression.to_dict() if manifest else None,
    )
    out = args.out if args.out is not None else DEFAULT_HISTORY / name
    try:
        if args.out is None:
            out.mkdir(parents=True, exist_ok=True)
        written = write_history(view, out)
    except OSError as exc:
        raise BiascheckError(out, None, f"could not write the history ({exc.strerror or exc})", "point --out at a writable folder") from None
    sys.stdout.write(render_history_markdown(view))
    print(f"wrote {', '.join(str(path) for path in written)}", file=sys.stderr)
    return 0
