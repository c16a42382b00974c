"""Enough of a GitHub Actions runner to run this project's workflows offline, end to end.

GitHub and its runners are out of reach here (and `act` needs Docker and the network), yet the
documented release-gate workflow must be shown to work as users run it: record the baselines, find
them as an artifact where the next job looks, open the pull request, gate a worse model. This runs
a workflow's jobs in ``needs`` order, expands matrices, evaluates ``${{ }}`` expressions and
``if:`` conditions as GitHub documents them, runs ``run:`` scripts with bash as the runner does,
and runs composite actions (this repository's ``action.yml``) step by step.

Actions other than the composite one are emulated from their documented behaviour, each by a small
function below: checkout, setup-python, cache restore/save, upload/download-artifact (immutable
names; ``pattern`` and ``merge-multiple``), and peter-evans/create-pull-request (the files under
``add-paths`` that differ from the repository, refused without write permissions). Any other
``uses:`` is an error, so a workflow cannot gain an action this emulation silently skips.

One departure, said where it happens: ``python -m pip install <the action>`` is a no-op, because
the interpreter running the tests already has the package under test installed.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

# --- expressions ---------------------------------------------------------------------------------

TOKEN = re.compile(
    r"""\s*(?:
    (?P<string>'(?:[^']|'')*')
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<op>==|!=|<=|>=|&&|\|\||[!<>(),\[\]])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*)
)""",
    re.X,
)
STATUS_FUNCTIONS = ("always", "success", "failure", "cancelled")


class ExpressionError(Exception):
    pass


def _truthy(value: Any) -> bool:
    return value not in (False, 0, "", None) and not (isinstance(value, float) and value != value)


def _number(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return float(bool(value))
    if isinstance(value, str):
        try:
            return float(value.strip() or 0)
        except ValueError:
            return float("nan")
    return float(value)


def _loose(a: Any, b: Any) -> tuple[Any, Any]:
    """GitHub's comparison: two strings case-insensitively; otherwise both as numbers (NaN when not one)."""
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold(), b.casefold()
    return _number(a), _number(b)


class Evaluator:
    """A recursive-descent evaluator of GitHub's expression syntax (the subset workflows here use:
    literals, context paths, ``! == != < > <= >= && ||``, parentheses and a few functions)."""

    def __init__(self, contexts: dict[str, Any], status: dict[str, bool]):
        self.contexts, self.status = contexts, status

    def evaluate(self, text: str) -> Any:
        self.tokens = [m for m in TOKEN.finditer(text)]
        if "".join(m.group(0) for m in self.tokens).strip() != text.strip():
            raise ExpressionError(f"cannot parse expression: {text!r}")
        self.tokens = [(m.lastgroup, m.group(m.lastgroup)) for m in self.tokens]
        self.position = 0
        value = self._or()
        if self.position != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.position][1]!r} in {text!r}")
        return value

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, op: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if token is None or (op is not None and token != ("op", op)):
            raise ExpressionError(f"expected {op or 'a value'}")
        self.position += 1
        return token

    def _or(self) -> Any:
        value = self._and()
        while self._peek() == ("op", "||"):
            self._take()
            right = self._and()
            value = value if _truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._compare()
        while self._peek() == ("op", "&&"):
            self._take()
            right = self._compare()
            value = right if _truthy(value) else value
        return value

    def _compare(self) -> Any:
        value = self._unary()
        while self._peek() in (("op", "=="), ("op", "!="), ("op", "<"), ("op", ">"), ("op", "<="), ("op", ">=")):
            op = self._take()[1]
            right = self._unary()
            a, b = _loose(value, right)
            value = {"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        return value

    def _unary(self) -> Any:
        if self._peek() == ("op", "!"):
            self._take()
            return not _truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "number":
            return float(text)
        if (kind, text) == ("op", "("):
            value = self._or()
            self._take(")")
            return value
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._peek() == ("op", "("):
            return self._call(text)
        return self._lookup(text)

    def _call(self, name: str) -> Any:
        self._take("(")
        args = []
        while self._peek() != ("op", ")"):
            args.append(self._or())
            if self._peek() == ("op", ","):
                self._take()
        self._take(")")
        if name in STATUS_FUNCTIONS:
            return self.status[name]
        if name == "contains":
            haystack, needle = args
            if isinstance(haystack, list):
                return any(_loose(item, needle)[0] == _loose(item, needle)[1] for item in haystack)
            return str(needle).casefold() in str(haystack).casefold()
        if name == "startsWith":
            return str(args[0]).casefold().startswith(str(args[1]).casefold())
        raise ExpressionError(f"function {name}() is not emulated")

    def _lookup(self, path: str) -> Any:
        parts = path.split(".")
        if parts[0] not in self.contexts:
            raise ExpressionError(f"context {parts[0]!r} is not emulated")
        value: Any = self.contexts
        for part in parts:
            value = value.get(part) if isinstance(value, dict) else None
        return value


def as_text(value: Any) -> str:
    """How GitHub pastes a value into a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


EMBEDDED = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def interpolate(value: Any, evaluator: Evaluator) -> Any:
    if isinstance(value, dict):
        return {key: interpolate(item, evaluator) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, evaluator) for item in value]
    if not isinstance(value, str):
        return value
    whole = EMBEDDED.fullmatch(value.strip())
    if whole:
        return evaluator.evaluate(whole.group(1))
    return EMBEDDED.sub(lambda m: as_text(evaluator.evaluate(m.group(1))), value)


def condition(text: Any, evaluator: Evaluator) -> bool:
    """An ``if:``: bare or in ``${{ }}``; without a status function it means ``success() && (...)``."""
    if text is None:
        return evaluator.status["success"]
    if isinstance(text, bool):
        return text and evaluator.status["success"]
    body = str(text).strip()
    whole = EMBEDDED.fullmatch(body)
    body = whole.group(1) if whole else body
    value = _truthy(evaluator.evaluate(body))
    if not any(re.search(rf"\b{name}\s*\(", body) for name in STATUS_FUNCTIONS):
        value = value and evaluator.status["success"]
    return value


# --- the runner ----------------------------------------------------------------------------------

PYTHON_SHIM = """#!/usr/bin/env bash
# `python -m pip install <the action>` is not run: this interpreter already has the package under
# test installed. Everything else is the real interpreter.
if [[ $1 == -m && $2 == pip && $3 == install ]]; then
  for arg in "$@"; do [[ $arg == "pytest-biascheck @ file://$GITHUB_ACTION_PATH" || $arg == "pytest-biascheck[anthropic] @ file://$GITHUB_ACTION_PATH" ]] && exit 0; done
  echo "github_runner: refusing to pip install anything but the action under test: $*" >&2
  exit 1
fi
exec "$REAL_PYTHON" "$@"
"""


@dataclass
class PullRequest:
    branch: str
    title: str
    body: str
    files: dict[str, bytes]


@dataclass
class JobRun:
    name: str
    result: str  # success, failure, skipped
    outputs: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    step_outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""


def load_yaml_text(text: str) -> dict:
    yaml = YAML(typ="safe", pure=True)
    return yaml.load(text)


class Runner:
    """Runs workflows of one repository (``repo``: its files) with ``action_path`` as the action
    that ``uses: ./`` and ``uses: <owner>/biascheck@...`` name."""

    def __init__(
        self,
        repo: Path,
        home: Path,
        *,
        action_path: Path,
        action_names: tuple[str, ...] = (),
        variables: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ):
        self.repo, self.home, self.action_path = repo, home, action_path
        self.action_names = action_names
        self.variables, self.secrets = dict(variables or {}), dict(secrets or {})
        self.runner_env = dict(env or {})
        self.artifacts: dict[str, dict[str, bytes]] = {}
        self.caches: dict[str, dict[str, bytes]] = {}
        self.pull_requests: list[PullRequest] = []
        self.run_count = 0
        shim = home / "bin"
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "python").write_text(PYTHON_SHIM, "utf-8")
        (shim / "python").chmod(0o755)
        self.shim = shim

    # -- workflows --
    def run(
        self, workflow: dict, *, event: str, inputs: dict[str, Any] | None = None, github: dict[str, str] | None = None
    ) -> dict[str, list[JobRun]]:
        """Run a workflow for an event; returns each job's runs (one per matrix combination)."""
        self.run_count += 1
        self.artifacts = {}  # artifacts belong to one workflow run
        dispatch_inputs = {}
        if event == "workflow_dispatch":
            declared = (workflow["on"].get("workflow_dispatch") or {}).get("inputs") or {}
            unknown = set(inputs or {}) - set(declared)
            assert not unknown, f"not inputs of the workflow: {unknown}"
            for name, spec in declared.items():
                dispatch_inputs[name] = (inputs or {}).get(name, spec.get("default", "" if spec.get("type") != "boolean" else False))
        self.github = {
            "event_name": event,
            "run_id": str(self.run_count),
            "run_attempt": "1",
            "repository": "owner/model-repo",
            "server_url": "https://github.com",
            "actor": "someone",
            "workspace": "",
            "ref": "refs/heads/main",
            "ref_name": "main",
            "ref_type": "branch",
            "sha": "a" * 40,
            **(github or {}),
        }
        results: dict[str, list[JobRun]] = {}
        jobs = workflow["jobs"]
        for job_id in self._job_order(jobs):
            results[job_id] = self._run_job(job_id, jobs[job_id], workflow, dispatch_inputs, results)
        return results

    @staticmethod
    def _job_order(jobs: dict) -> list[str]:
        order, done = [], set()
        while len(order) < len(jobs):
            ready = [j for j in jobs if j not in done and set(_as_list(jobs[j].get("needs"))) <= done]
            assert ready, "cyclic needs"
            order += ready
            done |= set(ready)
        return order

    def _run_job(self, job_id: str, job: dict, workflow: dict, inputs: dict, results: dict) -> list[JobRun]:
        needs = {}
        for need in _as_list(job.get("needs")):
            runs = results[need]
            result = "skipped" if all(r.result == "skipped" for r in runs) else "failure" if any(r.result == "failure" for r in runs) else "success"
            needs[need] = {"result": result, "outputs": {k: v for r in runs for k, v in r.outputs.items()}}
        needs_ok = all(n["result"] == "success" for n in needs.values())
        contexts = {
            "inputs": inputs,
            "vars": self.variables,
            "secrets": self.secrets,
            "github": self.github,
            "needs": needs,
            "matrix": {},
            "env": {},
            "runner": {"os": "Linux", "temp": ""},
        }
        status = {"always": True, "success": needs_ok, "failure": not needs_ok, "cancelled": False}
        if not condition(job.get("if"), Evaluator(contexts, status)):
            return [JobRun(job_id, "skipped")]
        matrix = (job.get("strategy") or {}).get("matrix") or {}
        keys = [k for k in matrix if k not in ("include", "exclude")]
        assert "include" not in matrix and "exclude" not in matrix, "matrix include/exclude are not emulated"
        combinations = [dict(zip(keys, values)) for values in itertools.product(*(matrix[k] for k in keys))] or [{}]
        return [self._run_job_instance(job_id, job, workflow, {**contexts, "matrix": combination}) for combination in combinations]

    def _run_job_instance(self, job_id: str, job: dict, workflow: dict, contexts: dict) -> JobRun:
        name = job_id + (f" ({', '.join(map(str, contexts['matrix'].values()))})" if contexts["matrix"] else "")
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)
        root = self.home / f"run{self.run_count}" / slug
        workspace, temp = root / "workspace", root / "temp"
        workspace.mkdir(parents=True)
        temp.mkdir()
        permissions = job.get("permissions", workflow.get("permissions", {}))
        run = JobRun(name, "success")
        job_env = {**self.runner_env, **{k: as_text(v) for k, v in interpolate(workflow.get("env") or {}, Evaluator(contexts, {})).items()}}
        github = {**self.github, "workspace": str(workspace), "job": job_id}
        contexts = {**contexts, "github": github, "runner": {"os": "Linux", "temp": str(temp)}, "steps": {}}
        context = _JobContext(workspace=workspace, temp=temp, permissions=permissions, env=job_env, run=run)
        failed = False
        for index, step in enumerate(job.get("steps") or []):
            status = {"always": True, "success": not failed, "failure": failed, "cancelled": False}
            evaluator = Evaluator(contexts, status)
            label = step.get("name") or step.get("id") or step.get("uses") or f"step {index}"
            if not condition(step.get("if"), evaluator):
                run.log.append(f"{label}: skipped")
                continue
            env = {**job_env, **{k: as_text(v) for k, v in interpolate(step.get("env") or {}, evaluator).items()}}
            if "run" in step:
                outcome, outputs = self._run_script(interpolate(step["run"], evaluator), env, context, label)
            else:
                outcome, outputs = self._uses(step["uses"], interpolate(step.get("with") or {}, evaluator), env, context, label)
            if "id" in step:
                contexts["steps"][step["id"]] = {"outputs": outputs, "outcome": outcome, "conclusion": outcome}
                run.step_outputs[step["id"]] = outputs
            failed = failed or outcome == "failure"
        run.result = "failure" if failed else "success"
        outputs_spec = job.get("outputs") or {}
        run.outputs = {k: as_text(v) for k, v in interpolate(outputs_spec, Evaluator(contexts, {})).items()}
        return run

    # -- steps --
    def _run_script(
        self, script: str, env: dict[str, str], context: _JobContext, label: str, extra: dict[str, str] | None = None
    ) -> tuple[str, dict[str, str]]:
        count = len(list(context.temp.glob("step-*.sh")))
        path = context.temp / f"step-{count}.sh"
        path.write_text(script, "utf-8")
        output, summary = context.temp / f"output-{count}", context.temp / f"summary-{count}"
        output.touch()
        summary.touch()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BIASCHECK_", "GITHUB_", "RUNNER_"))}
        full = {
            **base,
            **env,
            **(extra or {}),
            "PATH": f"{self.shim}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "REAL_PYTHON": sys.executable,
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_WORKSPACE": str(context.workspace),
            "RUNNER_TEMP": str(context.temp),
            "RUNNER_OS": "Linux",
            **{f"GITHUB_{k.upper()}": v for k, v in self.github.items() if k not in ("workspace",)},
        }
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
            cwd=context.workspace,
            env=full,
            capture_output=True,
            text=True,
            timeout=900,
        )
        context.run.log.append(f"--- {label}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        context.run.summary += summary.read_text("utf-8")
        return ("success" if proc.returncode == 0 else "failure"), parse_github_output(output.read_text("utf-8"))

    def _uses(self, uses: str, inputs: dict, env: dict[str, str], context: _JobContext, label: str) -> tuple[str, dict[str, str]]:
        name = uses.split("@")[0]
        if uses.rstrip("/") == "." or name in self.action_names:
            return self._composite(inputs, env, context, label)
        handler = EMULATED.get(name)
        if handler is None:
            raise NotImplementedError(f"{label}: uses {uses}, which this runner does not emulate")
        try:
            outputs = handler(self, {k: as_text(v) for k, v in inputs.items()}, context)
        except StepFailed as failure:
            context.run.log.append(f"--- {label}: failed: {failure}")
            return "failure", {}
        context.run.log.append(f"--- {label}: done")
        return "success", outputs or {}

    def _composite(self, given: dict, env: dict[str, str], context: _JobContext, label: str) -> tuple[str, dict[str, str]]:
        action = load_yaml_text((self.action_path / "action.yml").read_text("utf-8"))
        specs = action.get("inputs") or {}
        unknown = {k.lower() for k in given} - {k.lower() for k in specs}
        assert not unknown, f"{label}: inputs not declared by action.yml: {unknown}"
        inputs = {name: as_text(given.get(name, spec.get("default", ""))) for name, spec in specs.items()}
        for name, spec in specs.items():
            assert not (spec.get("required") and name not in given and "default" not in spec), f"{label}: required input {name} missing"
        contexts = {
            "inputs": inputs,
            "github": {**self.github, "workspace": str(context.workspace), "action_path": str(self.action_path)},
            "runner": {"os": "Linux", "temp": str(context.temp)},
            "steps": {},
            "env": env,
        }
        failed = False
        for index, step in enumerate(action["runs"]["steps"]):
            status = {"always": True, "success": not failed, "failure": failed, "cancelled": False}
            evaluator = Evaluator(contexts, status)
            inner = f"{label} > {step.get('name') or step.get('id') or step.get('uses') or index}"
            if not condition(step.get("if"), evaluator):
                context.run.log.append(f"{inner}: skipped")
                continue
            step_env = {**env, **{k: as_text(v) for k, v in interpolate(step.get("env") or {}, evaluator).items()}}
            if "run" in step:
                outcome, outputs = self._run_script(step["run"], step_env, context, inner, extra={"GITHUB_ACTION_PATH": str(self.action_path)})
            else:
                outcome, outputs = self._uses(step["uses"], interpolate(step.get("with") or {}, evaluator), step_env, context, inner)
            if "id" in step:
                contexts["steps"][step["id"]] = {"outputs": outputs, "outcome": outcome, "conclusion": outcome}
                context.run.step_outputs[step["id"]] = outputs
            failed = failed or outcome == "failure"
        outputs = {name: as_text(interpolate(spec.get("value", ""), Evaluator(contexts, {}))) for name, spec in (action.get("outputs") or {}).items()}
        return ("failure" if failed else "success"), outputs


@dataclass
class _JobContext:
    workspace: Path
    temp: Path
    permissions: Any
    env: dict[str, str]
    run: JobRun


class StepFailed(Exception):
    pass


def _as_list(value: Any) -> list:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in re.split(r"[\n,]", text or "") if line.strip()]


def parse_github_output(text: str) -> dict[str, str]:
    outputs, lines = {}, iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            outputs[name] = "\n".join(iter(lambda: next(lines), delimiter))
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def _files_under(folder: Path, *, hidden: bool = True) -> dict[str, bytes]:
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and (hidden or not any(part.startswith(".") for part in relative.split("/"))):
            files[relative] = path.read_bytes()
    return files


def _write_files(folder: Path, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _can_write(permissions: Any, scope: str) -> bool:
    if permissions in ("write-all",):
        return True
    return isinstance(permissions, dict) and permissions.get(scope) == "write"


# --- emulated actions ----------------------------------------------------------------------------


def _checkout(runner: Runner, inputs: dict[str, str], context: _JobContext) -> None:
    shutil.copytree(runner.repo, context.workspace, dirs_exist_ok=True)


def _setup_python(runner: Runner, inputs: dict[str, str], context: _JobContext) -> dict[str, str]:
    return {"python-version": inputs.get("python-version", "")}


def _cache_paths(inputs: dict[str, str], context: _JobContext) -> list[Path]:
    return [(context.workspace / line) for line in _lines(inputs.get("path", "").replace(",", "\n"))]


def _cache_restore(runner: Runner, inputs: dict[str, str], context: _JobContext) -> dict[str, str]:
    key = inputs["key"]
    matched = key if key in runner.caches else None
    for prefix in [line for line in inputs.get("restore-keys", "").splitlines() if line.strip()]:
        if matched is None:
            candidates = [k for k in runner.caches if k.startswith(prefix.strip())]
            matched = candidates[-1] if candidates else None
    if matched is not None:
        for relative, data in runner.caches[matched].items():
            target = context.workspace / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return {"cache-hit": as_text(matched == key), "cache-matched-key": matched or ""}


def _cache_save(runner: Runner, inputs: dict[str, str], context: _JobContext) -> None:
    if inputs["key"] in runner.caches:
        return  # caches are immutable: GitHub warns and keeps the first
    files = {}
    for path in _cache_paths(inputs, context):
        if path.is_file():
            files[path.relative_to(context.workspace).as_posix()] = path.read_bytes()
    if files:
        runner.caches[inputs["key"]] = files


def _upload_artifact(runner: Runner, inputs: dict[str, str], context: _JobContext) -> None:
    name = inputs.get("name") or "artifact"
    if name in runner.artifacts:
        raise StepFailed(f"an artifact named {name!r} already exists in this run (artifacts are immutable)")
    hidden = inputs.get("include-hidden-files", "false") == "true"
    paths = [Path(line) if Path(line).is_absolute() else context.workspace / line for line in inputs["path"].splitlines() if line.strip()]
    files: dict[str, bytes] = {}
    for path in paths:
        if path.is_dir():
            files.update(_files_under(path, hidden=hidden))
        elif path.is_file():
            files[path.name] = path.read_bytes()
    if not files:
        if inputs.get("if-no-files-found", "warn") == "error":
            raise StepFailed(f"no files found at {inputs['path']}")
        return
    runner.artifacts[name] = files


def _download_artifact(runner: Runner, inputs: dict[str, str], context: _JobContext) -> None:
    target = context.workspace / inputs.get("path", "") if inputs.get("path") else context.workspace
    if inputs.get("name"):
        if inputs["name"] not in runner.artifacts:
            raise StepFailed(f"artifact {inputs['name']!r} not found")
        _write_files(target, runner.artifacts[inputs["name"]])
        return
    names = [n for n in runner.artifacts if fnmatch.fnmatchcase(n, inputs.get("pattern") or "*")]
    if not names:
        raise StepFailed(f"no artifact matches {inputs.get('pattern')!r}")
    for name in names:
        _write_files(target if inputs.get("merge-multiple") == "true" else target / name, runner.artifacts[name])


def _create_pull_request(runner: Runner, inputs: dict[str, str], context: _JobContext) -> dict[str, str]:
    if not (_can_write(context.permissions, "contents") and _can_write(context.permissions, "pull-requests")):
        raise StepFailed("the job's token cannot push a branch and open a pull request (permissions)")
    patterns = _lines(inputs.get("add-paths", "")) or ["**"]
    before = _files_under(runner.repo)
    changed = {}
    for relative, data in _files_under(context.workspace).items():
        if any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(relative, p.replace("/**", "/*/*")) for p in patterns):
            if before.get(relative) != data:
                changed[relative] = data
    if not changed:
        return {"pull-request-operation": "none"}
    runner.pull_requests.append(
        PullRequest(inputs.get("branch", "create-pull-request/patch"), inputs.get("title", ""), inputs.get("body", ""), changed)
    )
    return {"pull-request-operation": "created", "pull-request-number": str(len(runner.pull_requests))}


EMULATED = {
    "actions/checkout": _checkout,
    "actions/setup-python": _setup_python,
    "actions/cache/restore": _cache_restore,
    "actions/cache/save": _cache_save,
    "actions/upload-artifact": _upload_artifact,
    "actions/download-artifact": _download_artifact,
    "peter-evans/create-pull-request": _create_pull_request,
}
