"""Who judges a suite: the run's judge options and the suite's panel of judges.

A judged suite names its judges in its manifest (``[<table>.judge] model = "A"``, or ``models = ["A",
"B"]``), with the sampling parameters every judge is sent, how several judges' readings are
combined (``aggregation``) and the agreement below which the run does not gate (``min_alpha``).
``--biascheck-judge`` (given once or several times) replaces the manifest's models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biascheck.benchmarks.base import JudgedBenchmark
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option, option
from biascheck.execution.llm import ModelConfig, Price, validate_model_string
from biascheck.suite import Suite

#: How several judges' readings of a case become one (:mod:`biascheck.judging.aggregate`):
#: ``majority``: the class more than half the judges read (else unscorable: a tie, a split, too
#: few readings); ``unanimous``: the class every judge read (else unscorable); ``primary``: the
#: primary judge's reading, the others only checked against it.
AGGREGATIONS = ("majority", "unanimous", "primary")
DEFAULT_AGGREGATION = "majority"


@dataclass(frozen=True)
class JudgeOptions:
    """A run's choices about the judges of its judged suites (``RunConfig.judges``): each replaces
    the suites' own when given."""

    # --biascheck-judge, given once or several times: the judges' model strings.
    models: tuple[str, ...] = ()
    # Every judge's endpoint and price (for --biascheck-max-cost); the run's timeout applies to them.
    api_base: str | None = None
    price: Price | None = None
    # The generations come from the store only (no generation call): only the judges are called.
    rejudge: bool = False
    # First qualify each judge on the QA suite its suite names (a warning on the results).
    qualify: bool = False
    # How what no judge could read is scored (a convention of the benchmark's).
    unscorable: str | None = None
    # Calibrations of the judges (their confusion matrices), each matched to the judge it was fitted for.
    calibrations: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Judge:
    """One evaluator: its model and the parameters sent with every call; ``source`` is where it
    was named (the option or the manifest field), for errors about it."""

    model: ModelConfig
    params: dict[str, Any]
    source: object = Option("judge")

    @property
    def name(self) -> str:
        """How reports and results name the judge: its model string (unique within a panel)."""
        return self.model.model

    def identity(self) -> dict[str, Any]:
        """What the suite fingerprint keeps: a run judged by another model or with other parameters
        is not comparable."""
        return {"model": self.model.model, "params": self.params}

    def to_dict(self) -> dict[str, Any]:
        return {**self.model.to_dict(), "params": self.params}


@dataclass(frozen=True)
class Panel:
    """A suite's judges and how their readings are combined. One judge: its readings are the
    outcomes, as they always were. ``primary``: the index of the primary judge (aggregation
    ``primary``); ``min_alpha``: the agreement the run needs to gate (None: no floor)."""

    judges: tuple[Judge, ...]
    aggregation: str = DEFAULT_AGGREGATION
    primary: int | None = None
    min_alpha: float | None = None

    @property
    def several(self) -> bool:
        return len(self.judges) > 1

    @property
    def primary_judge(self) -> Judge | None:
        return self.judges[self.primary] if self.primary is not None else None

    def identity(self) -> dict[str, Any]:
        """The fingerprint's judge part: one judge's identity, as before several could read; for
        several, every judge's and the aggregation (a majority of A and B is not A alone)."""
        if not self.several:
            return self.judges[0].identity()
        rule = (
            {"aggregation": self.aggregation}
            if self.primary is None
            else {"aggregation": self.aggregation, "primary": self.judges[self.primary].name}
        )
        return {"judges": [judge.identity() for judge in self.judges], **rule}


def panel_for(suite: Suite, options: JudgeOptions, model: ModelConfig) -> Panel | None:
    """The judges of a suite whose benchmark has them: ``--biascheck-judge`` or the manifest's,
    with the run's judge endpoint, price and timeout (``model``: the model under test, whose
    timeout and HTTP client they share). A panel that cannot work is refused here, before any call."""
    benchmark = suite.benchmark
    if not isinstance(benchmark, JudgedBenchmark):
        return None
    manifest = suite.manifest
    settings = benchmark.judge_settings(manifest)
    table = f"{benchmark.settings_table}.judge"
    field = f"{table}.{settings['models_field']}"
    names: Sequence[str] = options.models or settings["models"]
    if not names:
        raise BiascheckError(
            manifest.path,
            f"{table}.model",
            "this suite names no evaluator model",
            f"pass {option('judge')} MODEL (e.g. openai/gpt-4o) or set model in [{table}]",
        )
    if not options.models:
        for name in names:
            try:
                validate_model_string(name, api_base=options.api_base)
            except BiascheckError as exc:
                raise BiascheckError(manifest.path, field, exc.problem, exc.fix) from None
    where = "--biascheck-judge" if options.models else field
    twice = sorted({name for name in names if list(names).count(name) > 1})
    if twice:
        raise BiascheckError(where, None, f"names the judge {twice[0]} twice", "name each judge once")
    source = f"{option('judge')}" if options.models else f"{manifest.path}: {field}"
    params = dict(sorted(settings["sampling"].items()))
    judges = tuple(
        Judge(ModelConfig(name, api_base=options.api_base, timeout=model.timeout, price=options.price, http_client=model.http_client), params, source)
        for name in names
    )
    return Panel(judges, *_rule(manifest.path, table, settings, [judge.name for judge in judges], from_options=bool(options.models)))


def _rule(path: Path, table: str, settings: Mapping[str, Any], names: list[str], *, from_options: bool) -> tuple[str, int | None, float | None]:
    """(aggregation, primary index, min_alpha) of the manifest, checked against the run's judges."""
    aggregation, primary, min_alpha = settings["aggregation"], settings["primary"], settings["min_alpha"]
    named = f"the judges {option('judge')} names" if from_options else "its judges"
    if len(names) == 1:  # one judge's readings are the outcomes, however several would be combined
        pass
    elif aggregation == "primary":
        if primary is None:
            raise BiascheckError(
                path, f"{table}.primary", 'is missing: aggregation = "primary" needs the primary judge', "set primary to one of the judges"
            )
        if primary not in names:
            raise BiascheckError(
                path,
                f"{table}.primary",
                f"{primary!r} is not one of {named} ({', '.join(names)})",
                f"name it with {option('judge')} too, or set primary to one of them",
            )
    elif primary is not None:
        raise BiascheckError(path, f"{table}.primary", f'only applies to aggregation = "primary" (this suite\'s is {aggregation!r})', "remove it")
    if min_alpha is not None and len(names) < 2:
        raise BiascheckError(
            path,
            f"{table}.min_alpha",
            f"needs two or more judges to measure their agreement; this run has one ({names[0]})",
            f"name more judges ({option('judge')} A {option('judge')} B, or models in the manifest), or remove min_alpha",
        )
    return aggregation, names.index(primary) if aggregation == "primary" and len(names) > 1 else None, min_alpha
