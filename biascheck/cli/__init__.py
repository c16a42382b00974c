"""The ``biascheck`` command: what works without pytest. A module per command, each with its
``add_parser`` and the function it runs; :mod:`biascheck.cli.main` builds the parser;
:mod:`biascheck.cli.common` holds the options and checks several share. The commands call the
library (:mod:`biascheck.orchestration`, :mod:`biascheck.options`, :mod:`biascheck.api`), never
pytest's config model.

- ``biascheck run SUITE... --model M``: the run ``pytest --biascheck`` makes, without pytest (for
  scripts and notebooks): the plugin's options without their ``--biascheck-`` prefix, the same
  gate (:mod:`biascheck.orchestration`), results, reports and baselines; exit 0 pass, 1 gate failed,
  4 the run stopped (the codes: :mod:`biascheck.core.exits`). (:mod:`biascheck.cli.run`)
- ``biascheck diff A B``: compare a run's ``results.json`` (B) with a baseline or another run's
  ``results.json`` (A), exactly as ``pytest --biascheck-baseline`` does; exit 1 when a metric
  regressed. (:mod:`biascheck.cli.diff`)
- ``biascheck log RESULTS --to mlflow``: send a run made already (its report folder or results.json)
  to experiment trackers, as ``--biascheck-log`` does; a run a tracker holds already is skipped.
  (:mod:`biascheck.cli.log`)
- ``biascheck compare RUN...``: several runs of one suite side by side (``compare.md``,
  ``compare.json``, ``compare.html``). (:mod:`biascheck.cli.compare`)
- ``biascheck history SUITE``: a suite's baselines across releases (``history.json`` and
  ``history.html``, by default in ``.biascheck/history/<suite>``). (:mod:`biascheck.cli.history`)
- ``biascheck qualify-judge MODEL --suite DIR``: is an evaluator fit to read BBG stories? Its
  accuracy and diff-bias on a QA suite's disambiguated items; exit 1 when it falls short.
  (:mod:`biascheck.cli.qualify_judge`)
- ``biascheck suites [SUITE ...]``: the packaged suites and local ones, with their cases and model
  calls; with ``--model M``, the calls the response store does not answer and their cost in USD.
  (:mod:`biascheck.cli.suites`)
- ``biascheck init NAME [DEST]``: copy a packaged suite into the repository (default suites/NAME).
  (:mod:`biascheck.cli.init`)
- ``biascheck store merge OUT IN...``: merge the response stores of sharded runs. (:mod:`biascheck.cli.store`)
- ``biascheck judge export`` / ``judge fit``: a judged benchmark's calibration set and the
  calibration it gives. (:mod:`biascheck.cli.judge`)
- ``biascheck sim serve --suite DIR --persona SPEC``: the simulated model server, standalone.
- ``biascheck serve-local``: a real model (Gemma 3 270M) on an OpenAI-compatible server over
  llama.cpp's Python bindings (:mod:`biascheck.execution.local_server`) on a free loopback port,
  until Ctrl-C (needs the ``[local-model]`` extra).
  (:mod:`biascheck.cli.serve_local`)
"""

from __future__ import annotations

from biascheck.cli.main import main as main

# The command is no Python API: `main` is its entry point (pyproject's [project.scripts]).
__all__: list[str] = []
