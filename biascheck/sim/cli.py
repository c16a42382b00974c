"""``biascheck sim serve``: the simulated model server as a command.

Mount with :func:`add_sim_subcommands` on the ``sim`` command's subparsers, or run
``python -m biascheck.sim serve --suite DIR``.  Prints exactly one line,
``biascheck-sim listening on http://127.0.0.1:PORT/v1``, then serves until SIGTERM/SIGINT.
A port it cannot listen on (in use, privileged) is a one-line error naming it, exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from biascheck.core.bounds import argument
from biascheck.core.errors import BiascheckError
from biascheck.sim.knowledge import SimKnowledge
from biascheck.sim.personas import parse_persona
from biascheck.sim.server import SimApp, SimHttpServer

LISTENING_PREFIX = "biascheck-sim listening on "


def add_sim_subcommands(subparsers: Any) -> None:
    """Add ``serve`` to ``subparsers`` (an ``argparse`` subparsers action); sets ``func``."""
    serve = subparsers.add_parser(
        "serve",
        help="run the simulated OpenAI-compatible model server for a suite",
        description="Serve personas with known bias over the suite's prompts (OpenAI API).",
    )
    serve.add_argument("--suite", dest="suites", action="append", type=Path, required=True, metavar="DIR", help="suite directory (repeatable)")
    serve.add_argument("--data", type=Path, default=None, metavar="DIR", help="benchmark data directory")
    serve.add_argument(
        "--allow-unpinned-data", action="store_true", help="read the suites' data files pinned by no checksum (as --biascheck-allow-unpinned-data)"
    )
    serve.add_argument("--host", default="127.0.0.1", help=argparse.SUPPRESS)
    serve.add_argument("--port", type=argument("port", "--port"), default=0, help="port (default 0: any free port)")
    serve.add_argument("--persona", default=None, metavar="SPEC", help="persona for requests whose model names none, e.g. fair")
    serve.set_defaults(func=run_serve)
    label = subparsers.add_parser(
        "label",
        help="fill in the label column of a judge calibration sample with the simulator's truth",
        description="Label an exported judge calibration sample of a simulated run (sim/ generator) as a fair reader "
        "reads each story: the reading the simulator knows to be true.",
    )
    label.add_argument("sample", type=Path, metavar="SAMPLE", help="the sample biascheck judge export wrote")
    label.add_argument("--suite", required=True, metavar="SUITE", help="the suite the run ran: its folder or a packaged suite's name")
    label.add_argument("--data", type=Path, default=None, metavar="DIR", help="benchmark data directory")
    label.add_argument("--out", type=Path, required=True, metavar="FILE", help="the labelled sample to write")
    label.set_defaults(func=run_label)


def run_label(args: argparse.Namespace) -> int:
    """Each row's label: what the fair reader takes from its continuation (sim.stories)."""
    from biascheck.benchmarks.bbg.data import MRCQuestion
    from biascheck.benchmarks.bbg.judge_calibration import read_sample, write_sample
    from biascheck.config.catalog import suite_folder
    from biascheck.core.files import atomic_write_text
    from biascheck.sim.stories import label_story
    from biascheck.suite import load_suite

    suite = load_suite(suite_folder(args.suite, "biascheck sim label --suite"), data_dir=args.data)
    knowledge = SimKnowledge.from_suites([suite])
    by_id = {case.case_id: case for case in suite.cases}
    # As judge fit reads it: a CSV cell the export marked as text (a leading ') is read without the mark.
    rows = read_sample(args.sample)
    for number, row in enumerate(rows, 1):
        case_id = row.get("case_id")
        case = by_id.get(case_id) if isinstance(case_id, str) else None  # a JSONL row may hold any JSON value
        if case is None or not isinstance(case.truth, MRCQuestion):
            raise BiascheckError(
                args.sample, f"row {number}: case_id", f"{case_id!r} is no BBG case of {args.suite}", "give the BBG suite the run ran"
            )
        question = case.truth
        row["label"] = label_story(question, row.get("continuation") or "", knowledge.writer_for(question))
    # A sample exported with --show-judge keeps its judge_answer column (the fit reads it as unblinded).
    atomic_write_text(args.out, write_sample(rows, args.out, show_judge=any("judge_answer" in row for row in rows)))
    print(f"labelled {len(rows)} stories in {args.out}")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    if args.persona is not None:
        parse_persona(args.persona)  # fail before loading anything
    _check_listenable(args.host, args.port)  # a busy port fails at once, not after loading the suite
    from biascheck.suite import load_suite  # lazy: the suite loader is heavier than the server

    suites = [load_suite(suite_dir, data_dir=args.data, allow_unpinned=args.allow_unpinned_data) for suite_dir in args.suites]
    app = SimApp(SimKnowledge.from_suites(suites), default_persona=args.persona)
    asyncio.run(_serve_until_signalled(app, args.host, args.port))
    return 0


def _listen_error(host: str, port: int, exc: OSError) -> BiascheckError:
    """Why the server cannot listen on ``host:port``, on one line with the fix."""
    address = f"{host}:{port}"
    fix = "pick another --port, or --port 0 for any free one"
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return BiascheckError(
            "--host", None, f"cannot listen on {address}, {host} is not an address of this machine ({exc.strerror or exc})", "e.g. --host 127.0.0.1"
        )
    if exc.errno == errno.EADDRINUSE:
        problem = f"{address} is already in use"
    elif exc.errno == errno.EACCES:
        problem, fix = f"no permission to listen on {address}", "pick a --port above 1023, or --port 0 for any free one"
    else:
        problem = f"cannot listen on {address} ({exc.strerror or exc})"
    return BiascheckError("--port", None, problem, fix)


def _check_listenable(host: str, port: int) -> None:
    """Bind ``host:port`` as asyncio will (SO_REUSEADDR) and let go; any free port (0) always works.
    Only a fast path: the server's own bind is checked too, the port may be taken in between."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        raise _listen_error(host, port, exc) from None


async def _serve_until_signalled(app: SimApp, host: str, port: int) -> None:
    http = SimHttpServer(app, host, port)
    try:
        await http.start()
    except OSError as exc:
        raise _listen_error(host, port, exc) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in _stopping_signals():
        loop.add_signal_handler(signum, stop.set)
    print(LISTENING_PREFIX + http.base_url, flush=True)
    watcher = asyncio.create_task(_stop_when_orphaned(stop))
    await stop.wait()
    watcher.cancel()
    await http.close()


def _stopping_signals() -> tuple[signal.Signals, ...]:
    """SIGTERM, and SIGINT unless this process was started ignoring it. A run started in the
    background (``pytest --biascheck ... &`` from a script, a job runner) ignores SIGINT, as the
    simulator it starts inherits: a Ctrl-C in its terminal is not meant for it. Handled anyway, that
    Ctrl-C stopped the simulator alone, and the run it served went on calling a dead endpoint."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return (signal.SIGTERM,)
    return (signal.SIGTERM, signal.SIGINT)


async def _stop_when_orphaned(stop: asyncio.Event) -> None:
    """Exit when the process that started us is gone (e.g. a SIGKILLed pytest): no stray servers."""
    parent = os.getppid()
    while not stop.is_set():
        await asyncio.sleep(0.5)
        if os.getppid() != parent:
            stop.set()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m biascheck.sim")
    add_sim_subcommands(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(argv)  # a bounded option's type raises BiascheckError
        return args.func(args)
    except BiascheckError as error:
        print(str(error), file=sys.stderr)
        return 2
