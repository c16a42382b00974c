"""What a run is configured with: the option table (:data:`OPTIONS`, :data:`FLAGS`,
:data:`REPEATED`), its ini keys and environment variables, mapped to a
:class:`biascheck.session.RunConfig` and the baseline options, in one place.

The table names each option by its key (``model``, ``update-baseline``), which each front end
spells its own way (:mod:`biascheck.core.spelling`): pytest ``--biascheck-model``
(:func:`add_options`), the ``biascheck`` command ``--model`` (:func:`add_command_options`).
The settings are read from a :class:`Settings`, which either front end fills: pytest's config
(:func:`pytest_settings`), the command's parsed arguments (:func:`command_settings`). The
``biascheck`` command builds its other runs with the same defaults and checks
(:func:`model_config`, :func:`parse_rules`).

pytest is imported only where a pytest object is read: ``biascheck`` (the command) imports this
module without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from biascheck.core import exits
from biascheck.core.bounds import BOUNDS
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import PYTEST_PREFIX, Option, Spelling, option
from biascheck.orchestration import BaselineOptions

if TYPE_CHECKING:
    import pytest

    from biascheck.execution.llm import ModelConfig
    from biascheck.judging.panel import JudgeOptions
    from biascheck.loggers import LogOptions
    from biascheck.session import RunConfig


# The defaults of a run, shared by the plugin and the ``biascheck`` command.
DEFAULT_STORE = Path(".biascheck") / "responses.sqlite"
DEFAULT_CONCURRENCY = 32
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 6


OPTIONS = (
    # (option, ini key, env var, help)
    ("--biascheck-model", "biascheck_model", "BIASCHECK_MODEL", "litellm model string, or sim/<persona> for the simulated model"),
    (
        "--biascheck-model-revision",
        "biascheck_model_revision",
        "BIASCHECK_MODEL_REVISION",
        "what is served under the model string (a release tag, a commit, a checkpoint): part of every stored answer's key, "
        "so a model redeployed under the same name is asked again",
    ),
    ("--biascheck-data", "biascheck_data", "BIASCHECK_DATA_DIR", "mirror folder holding the benchmark files (else cache, then download)"),
    ("--biascheck-cache", "biascheck_cache", "BIASCHECK_CACHE", "response store (SQLite); default .biascheck/responses.sqlite"),
    ("--biascheck-concurrency", "biascheck_concurrency", None, "concurrent model calls, a whole number (default 32)"),
    (
        "--biascheck-report",
        "biascheck_report",
        None,
        "folder for results.json, report.md, report.html (replaced whole by each run); default .biascheck/reports/<suite>",
    ),
    (
        "--biascheck-max-cost",
        "biascheck_max_cost",
        None,
        "stop issuing calls before this many USD would be spent, a number (calls in flight count at the mean cost per call); "
        "the run then fails as incomplete",
    ),
    ("--biascheck-api-base", "biascheck_api_base", None, "API base URL (vLLM, Ollama, a proxy)"),
    ("--biascheck-timeout", "biascheck_timeout", None, "seconds per model call attempt, a number (default 60)"),
    ("--biascheck-price", "biascheck_price", None, "INPUT/OUTPUT USD per million tokens, for models litellm has no price for"),
    ("--biascheck-retries", "biascheck_retries", None, "retries per call after 429/5xx/timeouts, a whole number (default 6)"),
    (
        "--biascheck-http-client",
        "biascheck_http_client",
        "BIASCHECK_HTTP_CLIENT",
        "how model requests are sent: 'fast' (default) sends those to an OpenAI-compatible endpoint (openai/, hosted_vllm/ "
        "or litellm_proxy/ with an API base, biascheck serve-local, the simulator) with biascheck's own pooled HTTP client "
        "and every other through litellm; 'litellm' sends every request through litellm. Both store and report the same",
    ),
    (
        "--biascheck-answer-mode",
        "biascheck_answer_mode",
        "BIASCHECK_ANSWER_MODE",
        "how the cases of suites whose benchmark has several ways to answer are answered: 'generate', 'loglikelihood' or "
        "'first-token' for multiple-choice QA, 'sampling' or 'logprob' for the hidden-bias P(a) (an estimator; "
        "--biascheck-estimator is the same option); applies to the suites whose benchmark has the mode, default: each manifest's",
    ),
    ("--biascheck-judge-api-base", "biascheck_judge_api_base", None, "judged suites: the judges' API base URL (else each one's provider's variable)"),
    (
        "--biascheck-judge-price",
        "biascheck_judge_price",
        None,
        "judged suites: INPUT/OUTPUT USD per million tokens for the judges litellm has no price for",
    ),
    (
        "--biascheck-unscorable",
        "biascheck_unscorable",
        None,
        "judged suites: how what the judge could not read (an out-of-choice answer, an empty or filtered response) is scored, "
        "e.g. left out ('exclude') or read as unknown as a paper does ('unknown'); errored calls never are; default: the suite's",
    ),
    (
        "--biascheck-shard",
        "biascheck_shard",
        "BIASCHECK_SHARD",
        "K/N: answer only part K of N of each suite (by a stable hash of each case's template or question), for a job of a "
        "sharded run; no verdict is judged: merge the parts' stores (biascheck store merge) and run the whole suite",
    ),
    (
        "--biascheck-batch-wait",
        "biascheck_batch_wait",
        "BIASCHECK_BATCH_WAIT",
        "with --biascheck-batch: 'yes' (default) polls until every batch has ended, then scores; 'no' submits, then exits "
        "with status 6 (submitted, not yet scored): a later run with the same response store collects and scores",
    ),
    (
        "--biascheck-batch-resend",
        "biascheck_batch_resend",
        None,
        "with --biascheck-batch: send the requests a batch failed or expired on again, as a new 'batch' or 'online'; "
        "default: they are errors of this run",
    ),
    ("--biascheck-batch-poll", "biascheck_batch_poll", None, "with --biascheck-batch: seconds between polls of the open batches (default 30)"),
    (
        "--biascheck-on-inconclusive",
        "biascheck_on_inconclusive",
        None,
        "what a regression check that can neither show nor rule out a worsening beyond its margin does: 'pass' (quietly), "
        "'warn' (passes, and the summaries name it with the suite size that would resolve it) or 'fail' (it and any "
        "'not compared' check fail); default: each suite's [regression] on_inconclusive, else warn",
    ),
    (
        "--biascheck-log-experiment",
        "biascheck_log_experiment",
        "BIASCHECK_LOG_EXPERIMENT",
        "with --biascheck-log: the MLflow experiment or W&B project the runs go to (default: MLFLOW_EXPERIMENT_NAME or "
        "WANDB_PROJECT, else biascheck)",
    ),
    (
        "--biascheck-log-run-name",
        "biascheck_log_run_name",
        "BIASCHECK_LOG_RUN_NAME",
        "with --biascheck-log: the tracker run's name, a template of {suite} {model} {revision} {answer_mode} {benchmark} "
        "{created_at} {run_id} (default {suite}-{model})",
    ),
    (
        "--biascheck-baseline",
        "biascheck_baseline",
        "BIASCHECK_BASELINE",
        "baseline file to compare with ({suite}: the suite name, {model}: the model slug); with --biascheck-update-baseline, "
        "where to write it (default baselines/{suite}/release.json)",
    ),
)
FLAGS = (
    # (option, ini key, help)
    (
        "--biascheck-update-baseline",
        None,
        "write or replace the baseline from this run (default path baselines/{suite}/release.json); refused for partial or errored "
        "runs. Failed thresholds are reported, but a run that wrote every baseline passes (see --biascheck-strict-record)",
    ),
    (
        "--biascheck-strict-record",
        "biascheck_strict_record",
        "with --biascheck-update-baseline: a failed threshold fails the run even though the baseline was written",
    ),
    ("--biascheck-allow-fingerprint-mismatch", None, "compare with a baseline made from other data, prompts or subset, on the cases both share"),
    (
        "--biascheck-allow-missing-data",
        "biascheck_allow_missing_data",
        "run a suite without the categories whose data file is in neither the mirror nor the download cache and cannot be "
        "downloaded: the results list them and say the gap was accepted (without it, each is a failed check)",
    ),
    (
        "--biascheck-allow-unpinned-data",
        "biascheck_allow_unpinned_data",
        "read data files the suite manifest pins by no checksum (a dataset of your own, in the suite's data folder or the "
        "mirror): the results list them with their sha256, and their numbers compare with no run of other bytes",
    ),
    (
        "--biascheck-fail-inconclusive",
        "biascheck_fail_inconclusive",
        "the same as --biascheck-on-inconclusive=fail (kept as an alias): fail regression checks that can neither show "
        "nor rule out a worsening beyond the margin",
    ),
    (
        "--biascheck-log-required",
        "biascheck_log_required",
        "with --biascheck-log: a run that could not be logged fails (exit 1); without it, the failure is one line and the exit code is the gate's",
    ),
    ("--biascheck-rejudge", None, "judged suites: judge the stored responses again (e.g. with another --biascheck-judge): no model call is made"),
    (
        "--biascheck-qualify-judge",
        "biascheck_qualify_judge",
        "judged suites: first run the judge on the QA suite the suite names for its qualification, and warn when it falls short",
    ),
    (
        "--biascheck-batch",
        "biascheck_batch",
        "send the calls the response store lacks as provider batches (OpenAI-shaped and Anthropic; half the online price, "
        "answers within 24 hours) instead of online calls; an interrupted run resumes the batches it submitted",
    ),
    (
        "--biascheck-dry-run",
        None,
        "print the calls the selected cases would make (the response store's answers subtracted) and their cost in USD, "
        "then stop: no model call, no test run",
    ),
)

REPEATED = (
    # (option, ini key or None, env var or None, metavar, help): given several times on the command
    # line, one per line under the ini key, separated by whitespace in the environment variable.
    # Given on the command line they replace the environment's, which replace the ini file's.
    (
        "--biascheck-judge",
        "biascheck_judge",
        "BIASCHECK_JUDGE",
        "MODEL",
        "judged suites: an evaluator model that reads the responses (litellm string or sim/<persona>); give it several "
        "times for several judges, whose readings the suite's aggregation combines and whose agreement is reported; "
        "default: the suite's judges",
    ),
    (
        "--biascheck-log",
        "biascheck_log",
        "BIASCHECK_LOG",
        "TRACKER",
        "send each suite's run, after its report folder is written, to an experiment tracker: 'mlflow' (MLflow's client, "
        "MLFLOW_TRACKING_URI; the [mlflow] extra) or 'wandb' (Weights & Biases; the [wandb] extra); give it twice for both. "
        "A tracker that cannot be reached is one line, and the exit code stays the gate's (see --biascheck-log-required)",
    ),
    (
        "--biascheck-judge-calibration",
        "biascheck_judge_calibration",
        None,
        "FILE",
        "judged suites: a calibration of a judge (biascheck judge fit), applied to the judge it was fitted for; give one "
        "per calibrated judge. The results add the metrics corrected for its confusion matrix beside the raw ones; "
        "default: the suite's",
    ),
)

# Other spellings of an option: HBB's estimator is its answer mode.
ALIASES = {"--biascheck-answer-mode": ("--biascheck-estimator",)}
# The number settings, by ini key: each takes its bound (biascheck.core.bounds) wherever it is given,
# and its ini key is typed, so that `pytest --help` says what it takes.
BOUNDED = {
    "biascheck_concurrency": "concurrency",
    "biascheck_retries": "retries",
    "biascheck_max_cost": "max_cost",
    "biascheck_timeout": "timeout",
    "biascheck_batch_poll": "batch_poll",
}
INI_NUMBERS: dict[str, Literal["int", "float"]] = {ini: "int" if BOUNDS[bound].whole else "float" for ini, bound in BOUNDED.items()}
# pytest's exit status of a --biascheck-batch-wait=no run that submitted batches: not a pass, not a failure.
EXIT_BATCH_PENDING = exits.BATCH_PENDING
DEFAULT_BATCH_POLL = 30.0


# The two repeated options without an environment variable: --biascheck-param, --biascheck-compare-fail.
PARAM_HELP = "override a sampling parameter of the manifests (temperature, seed, max_tokens, ...)"
COMPARE_FAIL_HELP = "regression rule, e.g. diff_bias_amb:+0.02 or acc_dis:-2%% (overrides the manifest's margin)"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("biascheck", "bias regression testing")
    group.addoption(
        "--biascheck",
        action="store_true",
        help="collect suite folders (suite.toml) as bias tests; a bare name that is no folder here is the packaged suite of that name",
    )
    group.addoption(
        "--biascheck-suite",
        action="append",
        default=[],
        metavar="NAME",
        help="run a suite shipped with biascheck, by name (implies --biascheck); see `biascheck suites`",
    )
    for name, ini, env, text in OPTIONS:
        group.addoption(name, *ALIASES.get(name, ()), default=None, help=text + (f" [env {env}]" if env else ""))
        parser.addini(ini, text, type=INI_NUMBERS.get(ini, "string"), default=None)
    for name, flag_ini, text in FLAGS:
        group.addoption(name, action="store_true", default=False, help=text)
        if flag_ini:
            parser.addini(flag_ini, text, type="bool", default=False)
    for name, ini, env, metavar, text in REPEATED:
        group.addoption(name, action="append", default=[], metavar=metavar, help=text + (f" [env {env}]" if env else ""))
        if ini:
            parser.addini(ini, text + " (one per line)", type="linelist", default=[])
    group.addoption(
        "--biascheck-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=PARAM_HELP,
    )
    group.addoption(
        "--biascheck-compare-fail",
        action="append",
        default=[],
        metavar="METRIC:MARGIN",
        help=COMPARE_FAIL_HELP,
    )
    parser.addini("biascheck_compare_fail", "regression rules, one METRIC:MARGIN per line", type="linelist", default=[])


def resolve_suite_names(config: pytest.Config) -> None:
    """Packaged suites named on the command line become the paths pytest collects: each
    ``--biascheck-suite NAME``, and a bare argument (``kobbq``) that is no file or folder here.
    Given only ``--biascheck-suite``, they replace pytest's default arguments (testpaths or the
    working folder): the named suites alone run. (xdist workers repeat this from the same command line.)"""
    import pytest

    from biascheck.config.catalog import looks_like_a_name, packaged_suite

    here = Path(config.invocation_params.dir)
    given = config.args_source == pytest.Config.ArgsSource.ARGS
    args = list(config.args) if given else []
    for index, arg in enumerate(args):
        if looks_like_a_name(arg) and not (here / arg).exists():
            try:
                args[index] = str(packaged_suite(arg))
            except BiascheckError as exc:
                raise BiascheckError(arg, None, "no such file or folder, nor a packaged suite", f"{exc.fix}; or give a suite folder's path") from None
    for name in config.getoption("biascheck_suite"):
        path = str(packaged_suite(name))
        if path not in args:
            args.append(path)
    if args:
        config.args = args


def run_suites_in_one_process(config: pytest.Config) -> str | None:
    """pytest-xdist gives a session of bias suites alone nothing: the model calls are concurrent in
    one process already, while every worker would collect every item and read every answer again
    and the controller relay three reports per item (a warm KoBBQ took 2.6 times as long under -n 2).
    Such a session runs in this process; mixed with other tests, it is distributed as asked.
    Returns the note that says so."""
    import pytest

    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no" or not getattr(config.option, "tx", None):
        return None
    if config.args_source != pytest.Config.ArgsSource.ARGS or not all(map(_names_a_suite, config.args)):
        return None
    workers = len(config.option.tx)
    config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0
    return (
        f"biascheck: bias suites only, so one process instead of {workers} xdist workers "
        "(calls are concurrent already; workers would repeat the collection and the run)"
    )


def _names_a_suite(arg: str) -> bool:
    path = Path(arg.split("::", 1)[0])
    return path.name == "suite.toml" or (path / "suite.toml").is_file()


def check_dry_run(config: pytest.Config) -> bool:
    """--biascheck-dry-run, refused with -n."""
    dry_run = config.getoption("biascheck_dry_run")
    if dry_run and getattr(config.option, "numprocesses", None):
        raise BiascheckError("--biascheck-dry-run", None, "cannot be combined with -n (pytest-xdist)", "drop -n: a dry run makes no call to share")
    return dry_run


def enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("biascheck") or config.getoption("biascheck_suite"))


# --- what the settings are read from -------------------------------------------------------------


def key(option: str) -> str:
    """An option's key in the table: its pytest name without ``--biascheck-`` (``model``)."""
    return option.removeprefix(PYTEST_PREFIX)


def _no_ini(name: str) -> Any:
    return None


@dataclass(frozen=True)
class Settings:
    """What a run's settings are read from, whichever front end parsed them: ``given(key)``, an
    option's command-line value by its key (None, False or [] when not given); ``ini(name)``, an
    ini key's value (None or [] when unset; the command reads no ini file) and ``inipath`` the file
    it came from; ``folder``, where the run was started (a relative store path starts there); and,
    under pytest-xdist, the id its workers share."""

    given: Callable[[str], Any]
    ini: Callable[[str], Any] = _no_ini
    inipath: Path | None = None
    folder: Path = Path(".")
    shared_run_id: str | None = None


def pytest_settings(config: pytest.Config) -> Settings:
    """pytest's options and ini file as :class:`Settings`."""
    import pytest

    def ini(name: str) -> Any:
        try:
            return config.getini(name)
        except (ValueError, TypeError, pytest.UsageError):  # pytest's message names neither the file nor the key
            if name not in BOUNDED:
                raise
            bound = BOUNDS[BOUNDED[name]]
            kind = "a whole number" if bound.whole else "a number"
            raise BiascheckError(
                config.inipath or "ini file", name, f"is not {kind}", f"give {bound.describe()}, e.g. {name} = {bound.example}"
            ) from None

    return Settings(
        given=lambda name: config.getoption(_dest(PYTEST_PREFIX + name)),
        ini=ini,
        inipath=config.inipath,
        folder=Path(config.invocation_params.dir),
        shared_run_id=getattr(config, "workerinput", {}).get("testrunuid"),
    )


def command_settings(args: Any, folder: Path | None = None) -> Settings:
    """The ``biascheck`` command's parsed arguments (:func:`add_command_options`) as :class:`Settings`:
    no ini file; the environment variables apply as for the plugin."""
    return Settings(given=lambda name: getattr(args, _command_dest(name)), folder=folder or Path.cwd())


def _settings(source: Settings | pytest.Config) -> Settings:
    return source if isinstance(source, Settings) else pytest_settings(source)


def _given(config: Settings, option: str, ini: str, env: str | None) -> tuple[str | None, object, str | None]:
    """An option's text and where it was given (where, field): the command line, else its
    environment variable, else the ini file and key."""
    value = config.given(key(option))
    if value is not None:
        return value, Option(key(option)), None
    if env and os.environ.get(env):
        return os.environ[env], env, None
    value = config.ini(ini)
    return (None if value in (None, "") else str(value)), str(config.inipath or "ini file"), ini


def setting(config: Settings, option: str) -> str | None:
    """An option's text: the command line, else its environment variable, else the ini file."""
    for name, ini, env, _ in OPTIONS:
        if name == option:
            return _given(config, name, ini, env)[0]
    raise KeyError(option)


def repeated(config: Settings, option: str) -> tuple[list[str], object]:
    """A repeated option's values and where they were given: the command line, else its environment
    variable (whitespace-separated), else the ini file's lines; empty when not given."""
    for name, ini, env, _, _ in REPEATED:
        if name == option:
            given = list(config.given(key(name)) or [])
            if given:
                return given, Option(key(option))
            if env and os.environ.get(env, "").strip():
                return os.environ[env].split(), env
            lines = [line.strip() for line in (config.ini(ini) or []) if line.strip()] if ini else []
            return lines, f"{config.inipath or 'ini file'}: {ini}"
    raise KeyError(option)


def flag(config: Settings, option: str) -> bool:
    """A flag: the command line, or (for those that have one) its ini key."""
    for name, ini, _ in FLAGS:
        if name == option:
            return bool(config.given(key(name)) or (ini and config.ini(ini)))
    raise KeyError(option)


def model_config(
    model: str,
    *,
    params: list[str],
    api_base: str | None = None,
    price: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    revision: str | None = None,
    http_client: str | None = None,
) -> ModelConfig:
    """The model under test, checked: its model string, sampling overrides and price.
    ``http_client`` as checked by :func:`check_http_client`; None: BIASCHECK_HTTP_CLIENT, else fast."""
    from biascheck.config.manifest import parse_sampling_overrides
    from biascheck.execution.llm import ModelConfig, Price, validate_model_string

    validate_model_string(model, Option("model"), api_base=api_base)
    if http_client is None:
        http_client = check_http_client(os.environ.get("BIASCHECK_HTTP_CLIENT") or None, "BIASCHECK_HTTP_CLIENT")
    return ModelConfig(
        model=model,
        params=parse_sampling_overrides(params, where=Option("param")),
        api_base=api_base,
        timeout=timeout,
        price=Price.parse(price, where=Option("price")) if price else None,
        revision=revision or None,
        http_client=http_client,
    )


def check_http_client(text: str | None, where: object, field: str | None = None) -> str:
    """--biascheck-http-client's value (the default when not given), or one line naming where it was given."""
    from biascheck.execution.fast_http import DEFAULT_HTTP_CLIENT, HTTP_CLIENTS

    if text is None:
        return DEFAULT_HTTP_CLIENT
    if text not in HTTP_CLIENTS:
        raise BiascheckError(
            where,
            field,
            f"{text!r} is not an HTTP client",
            "use fast (biascheck's own client for OpenAI-compatible endpoints, litellm for the rest) or litellm",
        )
    return text


def parse_price(text: str | None, where: object):
    from biascheck.execution.llm import Price

    return Price.parse(text, where=where) if text else None


def parse_rules(texts: list[str], where: object = Option("compare-fail")) -> list:
    """Regression rules given on a command line (``METRIC:MARGIN``)."""
    from biascheck.config.manifest import Rule

    return [Rule.parse_option(text, where=where) for text in texts]


def _number(config: Settings, option: str, default):
    """A number setting within its bound, from wherever it was given; ``default`` when not given."""
    for name, ini, env, _ in OPTIONS:
        if name == option:
            text, where, field = _given(config, name, ini, env)
            return default if text is None else BOUNDS[BOUNDED[ini]].parse(text, where, field)
    raise KeyError(option)


def run_config(source: Settings | pytest.Config) -> RunConfig:
    """The run the options describe; a :class:`BiascheckError` naming the option when one is wrong."""
    from biascheck.execution.llm import validate_model_string
    from biascheck.execution.policy import RetryPolicy
    from biascheck.session import RunConfig
    from biascheck.suite import Shard

    config = _settings(source)
    model = setting(config, "--biascheck-model")
    if not model:
        raise BiascheckError(Option("model"), None, "no model named", f"pass {option('model')} MODEL (e.g. sim/fair or openai/gpt-4o-mini)")
    api_base = setting(config, "--biascheck-api-base")
    validate_model_string(model, api_base=api_base)
    data = setting(config, "--biascheck-data")
    # Relative to where pytest was started, not its rootdir: the rootdir is the common ancestor of
    # every path-like argument (a data mirror elsewhere makes it /), which no user expects.
    cache = setting(config, "--biascheck-cache") or str(config.folder / DEFAULT_STORE)
    model_settings = model_config(
        model,
        params=config.given("param"),
        api_base=api_base,
        timeout=_number(config, "--biascheck-timeout", DEFAULT_TIMEOUT),
        price=setting(config, "--biascheck-price"),
        revision=setting(config, "--biascheck-model-revision"),
        http_client=check_http_client(*_given(config, "--biascheck-http-client", "biascheck_http_client", "BIASCHECK_HTTP_CLIENT")),
    )
    max_cost = _number(config, "--biascheck-max-cost", None)
    estimator = answer_mode_option(setting(config, "--biascheck-answer-mode"))
    shard = setting(config, "--biascheck-shard")
    return RunConfig(
        batch=batch_options(config),
        model=model_settings,
        judges=judge_options(config),
        store_path=Path(cache),
        data_dir=Path(data) if data else None,
        concurrency=_number(config, "--biascheck-concurrency", DEFAULT_CONCURRENCY),
        max_cost_usd=max_cost,
        policy=RetryPolicy(max_retries=_number(config, "--biascheck-retries", DEFAULT_RETRIES)),
        shared_run_id=config.shared_run_id,
        estimator=estimator,
        shard=Shard.parse(shard, Option("shard")) if shard else None,
        allow_missing_data=flag(config, "--biascheck-allow-missing-data"),
        allow_unpinned_data=flag(config, "--biascheck-allow-unpinned-data"),
    )


def judge_options(source: Settings | pytest.Config) -> JudgeOptions:
    """The run's judge options (``RunConfig.judges``): each judge's model string checked, named as given."""
    from biascheck.benchmarks.base import judged_benchmarks
    from biascheck.execution.llm import validate_model_string
    from biascheck.judging.panel import JudgeOptions

    config = _settings(source)
    models, where = repeated(config, "--biascheck-judge")
    api_base = setting(config, "--biascheck-judge-api-base")
    for model in models:
        try:
            validate_model_string(model, where, api_base=api_base)
        except BiascheckError as exc:
            raise BiascheckError(where, None, exc.problem, exc.fix) from None
    twice = sorted({model for model in models if models.count(model) > 1})
    if twice:
        raise BiascheckError(where, None, f"names the judge {twice[0]} twice", "name each judge once")
    unscorable = setting(config, "--biascheck-unscorable")
    if unscorable is not None:  # the conventions are the judged benchmarks': only then are they all loaded
        conventions = list(dict.fromkeys(choice for judged in judged_benchmarks().values() for choice in judged.scoring_choices))
        if unscorable not in conventions:
            raise BiascheckError(Option("unscorable"), None, f"{unscorable!r} is not a convention", f"use {' or '.join(conventions)}")
    calibrations, _ = repeated(config, "--biascheck-judge-calibration")
    return JudgeOptions(
        models=tuple(models),
        api_base=api_base,
        price=parse_price(setting(config, "--biascheck-judge-price"), Option("judge-price")),
        rejudge=bool(config.given("rejudge")),
        qualify=flag(config, "--biascheck-qualify-judge"),
        unscorable=unscorable,
        calibrations=tuple(Path(path) for path in calibrations),
    )


def answer_mode_option(mode: str | None, where: object = Option("answer-mode")) -> str | None:
    """An answer mode some registered benchmark has (each suite takes it when its benchmark does)."""
    from biascheck.benchmarks.base import get_benchmark, registered_benchmarks

    if mode is None:  # each suite's own: no benchmark needs loading to say so
        return None
    modes = {name: get_benchmark(name).estimators for name in sorted(registered_benchmarks())}
    known = list(dict.fromkeys(mode for kinds in modes.values() for mode in kinds))
    if mode not in (None, *known):
        by_benchmark = "; ".join(f"{name}: {', '.join(kinds)}" for name, kinds in modes.items() if kinds)
        raise BiascheckError(where, None, f"{mode!r} is not an answer mode", f"use one of them ({by_benchmark})")
    return mode


def batch_options(config: Settings):
    """--biascheck-batch and its companions; None for an online run (the companions are then refused)."""
    from biascheck.execution.batches import RESEND_CHOICES, BatchOptions

    wait = setting(config, "--biascheck-batch-wait")
    resend = setting(config, "--biascheck-batch-resend")
    poll = _number(config, "--biascheck-batch-poll", DEFAULT_BATCH_POLL)
    if not flag(config, "--biascheck-batch"):
        given = [name for name, value in (("batch-wait", wait), ("batch-resend", resend)) if value is not None]
        if given:
            raise BiascheckError(Option(given[0]), None, "only applies to a batch run", f"add {option('batch')}, or drop it")
        return None
    if wait not in (None, "yes", "no"):
        raise BiascheckError(Option("batch-wait"), None, f"{wait!r} is not yes or no", f"e.g. {option('batch-wait')}=no")
    if resend not in (None, *RESEND_CHOICES):
        raise BiascheckError(Option("batch-resend"), None, f"{resend!r} is not a way to resend", f"use {' or '.join(RESEND_CHOICES)}")
    return BatchOptions(wait=wait != "no", poll_interval=poll, resend=resend)


def baseline_options(source: Settings | pytest.Config) -> BaselineOptions:
    config = _settings(source)
    texts = list(config.ini("biascheck_compare_fail") or []) + list(config.given("compare-fail"))
    return BaselineOptions(
        pattern=setting(config, "--biascheck-baseline"),
        update=bool(config.given("update-baseline")),
        rules=parse_rules(texts),
        allow_mismatch=bool(config.given("allow-fingerprint-mismatch")),
        on_inconclusive=on_inconclusive(config),
        strict_record=flag(config, "--biascheck-strict-record"),
    )


def check_on_inconclusive(value: str | None, alias: bool, where: object, field: str | None, alias_name: str) -> str | None:
    """An on-inconclusive setting and its fail-inconclusive alias, given at one place: checked, and
    refused when they disagree. None when neither was given."""
    from biascheck.evaluation.regression import ON_INCONCLUSIVE

    if value is not None and value not in ON_INCONCLUSIVE:
        raise BiascheckError(where, field, f"{value!r} is not allowed", f"use one of: {', '.join(ON_INCONCLUSIVE)}")
    if alias and value not in (None, "fail"):
        raise BiascheckError(
            where, field, f"{value!r} contradicts {alias_name} (an alias of fail)", f"give one of them: {alias_name} or the value {value!r}"
        )
    return value or ("fail" if alias else None)


def on_inconclusive(config: Settings) -> str | None:
    """--biascheck-on-inconclusive (or its alias --biascheck-fail-inconclusive), else the ini keys
    biascheck_on_inconclusive / biascheck_fail_inconclusive; None when none was given (the suite's
    manifest decides). The command line wins over the ini file; two that disagree in one place are
    a usage error."""
    given = check_on_inconclusive(
        config.given("on-inconclusive"), bool(config.given("fail-inconclusive")), Option("on-inconclusive"), None, option("fail-inconclusive")
    )
    if given is not None:
        return given
    ini = config.ini("biascheck_on_inconclusive")
    return check_on_inconclusive(
        ini or None,
        bool(config.ini("biascheck_fail_inconclusive")),
        str(config.inipath or "ini file"),
        "biascheck_on_inconclusive",
        "biascheck_fail_inconclusive = true",
    )


def log_options(source: Settings | pytest.Config) -> LogOptions | None:
    """--biascheck-log and its companions, checked before collection (a tracker that is unknown or
    whose client library is missing, a run name template with a field no run has); None when no
    tracker is named (the companions are then refused)."""
    from biascheck.loggers import log_options as checked_log_options

    config = _settings(source)
    trackers, where = repeated(config, "--biascheck-log")
    experiment = setting(config, "--biascheck-log-experiment")
    run_name = _given(config, "--biascheck-log-run-name", "biascheck_log_run_name", "BIASCHECK_LOG_RUN_NAME")
    required = flag(config, "--biascheck-log-required")
    if not trackers:
        given = [name for name, value in (("log-experiment", experiment), ("log-run-name", run_name[0]), ("log-required", required)) if value]
        if given:
            raise BiascheckError(
                Option(given[0]), None, "only applies to a run that logs to a tracker", f"add {option('log')} mlflow (or wandb), or drop it"
            )
        return None
    name_where = run_name[1] if run_name[2] is None else f"{run_name[1]}: {run_name[2]}"
    return checked_log_options(trackers, where, required=required, experiment=experiment, run_name=run_name[0], name_where=name_where)


def report_dir(source: Settings | pytest.Config) -> Path | None:
    """--biascheck-report: a folder (created if missing), never a file; None when not given (the
    plugin writes to :func:`biascheck.reporting.write.default_report_dir`)."""
    report = setting(_settings(source), "--biascheck-report")
    if report and Path(report).exists() and not Path(report).is_dir():
        raise BiascheckError(Option("report"), None, f"{report} is a file", "give a folder (it is created if missing)")
    return Path(report) if report else None


# --- the same table for the ``biascheck`` command ------------------------------------------------

# The command's spelling of every option: the key, as ``--key``.
COMMAND = Spelling("--")


def add_command_options(parser: Any) -> None:
    """The plugin's options (:data:`OPTIONS`, :data:`FLAGS`, the repeated ones) on an argparse
    parser, each spelled ``--key`` and stored under the key, so that :func:`command_settings`
    reads them as :func:`pytest_settings` reads pytest's."""
    for name, _, env, text in OPTIONS:
        names = [COMMAND(key(spelling)) for spelling in (name, *ALIASES.get(name, ()))]
        parser.add_argument(*names, dest=_command_dest(key(name)), default=None, help=text.replace("%", "%%") + (f" [env {env}]" if env else ""))
    for name, _, text in FLAGS:
        parser.add_argument(COMMAND(key(name)), dest=_command_dest(key(name)), action="store_true", default=False, help=text.replace("%", "%%"))
    for name, _, env, metavar, text in REPEATED:
        parser.add_argument(
            COMMAND(key(name)),
            dest=_command_dest(key(name)),
            action="append",
            default=[],
            metavar=metavar,
            help=text.replace("%", "%%") + (f" [env {env}]" if env else ""),
        )
    parser.add_argument(COMMAND("param"), dest="param", action="append", default=[], metavar="NAME=VALUE", help=PARAM_HELP)
    parser.add_argument(COMMAND("compare-fail"), dest="compare_fail", action="append", default=[], metavar="METRIC:MARGIN", help=COMPARE_FAIL_HELP)


def _dest(option: str) -> str:
    """Where pytest stores an option: ``--biascheck-model`` in ``biascheck_model``."""
    return option.lstrip("-").replace("-", "_")


def _command_dest(name: str) -> str:
    """Where the command stores an option: ``update-baseline`` in ``update_baseline``."""
    return name.replace("-", "_")
