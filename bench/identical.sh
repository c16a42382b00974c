#!/bin/bash
# Byte-identity of what biascheck writes, before and after a refactoring (issues 13 and 28).
#
#   BIASCHECK_DATA_DIR=../shared/datasets bench/identical.sh BEFORE AFTER STORE [SUITE...]
#
# BEFORE and AFTER are source trees (a clone, a worktree, or `git archive main | tar -x -C DIR`);
# each runs with its own tree first on PYTHONPATH, so the installed biascheck's entry points resolve
# into it. STORE is a warm response store of `sim/stereotyped` (bench/fill_store.py fills one without
# HTTP), copied for each tree so neither run sees the other's writes; the runs then make no model
# call and any difference comes from the code. SUITEs default to the whole kobbq, bbq and hbb.
#
# Per suite and tree, as the README's "Baselines and regression checks" does: a run recording the
# baseline (--biascheck-update-baseline), then a run gated against it (--biascheck-baseline, which
# writes comparison.json), with --biascheck-allow-missing-data (a mirror without some of BBQ's files
# still records a baseline, which says so). Both trees run in the same working folder (OUT/work, then moved to
# OUT/before or OUT/after) with the suites copied there, so paths written into the files agree.
# Compared: each run's results.json, the baseline file and the gate's comparison.json, with `cmp`.
# A file that differs is compared again with its timestamp fields masked (created_at, recorded_at,
# started_at, finished_at: ISO times; duration_s, wall_s, elapsed_s; and a baseline's digest, its
# hash over all its other fields, created_at included), and the script says which fields differed;
# a difference elsewhere fails it. Documented changes a BEFORE tree may predate are mapped, not
# failed: a baseline's added fields `regression` and `verdicts` (said: "added field"), and
# comparison.json of schema biascheck.comparison/2 against /1 (issue 35: "unchanged" is "within
# margin"; the flips /1 listed by category must be the same cases with the same fields in /2's
# flips.jsonl, whose counts /2's by_category must be, with the same total, directions and limit).
# OUT defaults to a new temporary folder; GATE_MODEL (default sim/stereotyped, the recorded model:
# no flip) gates another persona, so that the gates' flips are compared too. JUDGE (default
# sim/judge) reads the judged suites' stories (enbbg, kobbg): their manifests name a paid judge.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n 4,5p "$0"; exit 2; }
before=$(realpath "$1"); after=$(realpath "$2"); store=$(realpath "$3"); shift 3
if (($#)); then suites=("$@"); else suites=(kobbq bbq hbb); fi
py=${PYTHON:-python}
# The gate's model: by default the recorded one (no flip); another persona makes flips to compare
# (e.g. GATE_MODEL="sim/stereotyped?p=0.9"; its answers are simulated, not in STORE).
gate_model=${GATE_MODEL:-sim/stereotyped}
judge=${JUDGE:-sim/judge}
data=$(realpath "${BIASCHECK_DATA_DIR:?set BIASCHECK_DATA_DIR to the data mirror}")
out=$(realpath -m "${OUT:-$(mktemp -d /tmp/identical.XXXXXX)}")
mkdir -p "$out"
export OPENAI_API_KEY=unused BIASCHECK_DATA_DIR=$data

for side in before after; do
  tree=${!side}
  rm -rf "$out/work" "${out:?}/$side"; mkdir -p "$out/work/suites" "$out/work/baselines"
  cp "$store" "$out/work/store.sqlite"
  for suite in "${suites[@]}"; do
    cp -r "$tree/suites/$suite" "$out/work/suites/$suite"
    for step in record gate; do
      extra=(--biascheck-baseline "$out/work/baselines/$suite.json")
      model=$gate_model
      [[ $step == record ]] && extra+=(--biascheck-update-baseline) && model=sim/stereotyped
      start=$(date +%s)
      (cd "$out/work" && PYTHONPATH=$tree "$py" -m pytest -q -p no:cacheprovider -p no:randomly \
        --biascheck "suites/$suite" --biascheck-model "$model" --biascheck-data "$data" \
        --biascheck-cache "$out/work/store.sqlite" --biascheck-allow-missing-data --biascheck-report "$out/work/$suite-$step" "${extra[@]}" \
        --biascheck-judge "$judge" \
        > "$out/work/$suite-$step.log" 2>&1) || [[ $? == 1 ]] || { echo "$side $suite $step: pytest failed (see $out/$side/$suite-$step.log)"; tail -3 "$out/work/$suite-$step.log"; mv "$out/work" "$out/$side"; exit 1; }
      echo "$side $suite $step: $(tail -1 "$out/work/$suite-$step.log" | sed 's/ in [0-9.]*s.*//; s/=//g') ($(($(date +%s) - start)) s)"
    done
  done
  rm "$out/work/store.sqlite"; mv "$out/work" "$out/$side"
done

"$py" - "$out" "${suites[@]}" <<'PY'
import json, re, sys
from pathlib import Path

out, suites = Path(sys.argv[1]), sys.argv[2:]
# The digest is a function of the other fields: when only timestamps differ besides, so does it.
TIMESTAMPS = {"created_at", "recorded_at", "started_at", "finished_at", "duration_s", "wall_s", "elapsed_s", "digest"}


def differing(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from differing(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differing(x, y, f"{path}[{i}]")
    elif a != b:
        yield path


# Documented changes a "before" tree may predate: fields a baseline gained (present after, absent
# before: "added field"), and comparison.json's schema /2 (issue 35), compared with /1 mapped onto it.
ADDED_BASELINE_FIELDS = {"regression", "verdicts"}
V1, V2 = "biascheck.comparison/1", "biascheck.comparison/2"


def masked(fields):
    return [f for f in fields if re.sub(r"\[\d+\]", "", f).rsplit(".", 1)[-1] not in TIMESTAMPS]


def as_v2_checks(document):
    """A /1 comparison without its flips, as /2 says it: "unchanged" is "within margin"."""
    results = []
    for r in document.get("results", []):
        if r.get("verdict") == "unchanged":
            r = {**r, "verdict": "within margin", "explanation": r["explanation"].replace(" unchanged within the margin: ", " within margin: ")}
        results.append(r)
    return {**document, "schema": V2, "results": results, "flips": None}


def flip_problems(v1, v2, every):
    """/1 flips against /2's: the same total, directions and limit; each flip /1 listed is the same
    case with the same fields in /2's file (its prompt text now under prompt_text, its category
    added); /2's counts are its file's, and its examples are in the file."""
    problems = [f"flips.{k}" for k in ("total", "by_transition", "limit") if v1.get(k) != v2.get(k)]
    if len(every) != v2.get("total") or len({f["case_id"] for f in every}) != len(every):
        problems.append("flips.file (not every flip once)")
    by_id = {f["case_id"]: f for f in every}
    counts = {}
    for f in every:
        key = f"{f['baseline']} -> {f['candidate']}"
        counts.setdefault(f["category"], {})[key] = counts.get(f["category"], {}).get(key, 0) + 1
    if counts != v2.get("by_category"):
        problems.append("flips.by_category (not the file's counts)")
    if any(by_id.get(f["case_id"]) != f for f in v2.get("examples", [])):
        problems.append("flips.examples (not in the file)")
    for category, shown in v1.get("by_category", {}).items():
        for old in shown:
            new = by_id.get(old["case_id"])
            if new is None or new["category"] != category or new.get("prompt_text") != old.get("prompt"):
                problems.append(f"flips.by_category.{category}[{old['case_id']}]")
                continue
            for key, value in old.items():
                if key != "prompt" and new.get(key) != value:
                    problems.append(f"flips.by_category.{category}[{old['case_id']}].{key}")
    return problems


failed = False
for suite in suites:
    files = [f"{suite}-record/results.json", f"baselines/{suite}.json", f"{suite}-gate/results.json", f"{suite}-gate/comparison.json"]
    for name in files:
        a, b = out / "before" / name, out / "after" / name
        if not a.exists() or not b.exists():
            print(f"MISSING  {name}: before {a.exists()}, after {b.exists()}")
            failed = True
            continue
        if a.read_bytes() == b.read_bytes():
            print(f"same     {name} ({a.stat().st_size:,} bytes)")
            continue
        old, new = json.loads(a.read_bytes()), json.loads(b.read_bytes())
        notes, other = [], []
        if name.startswith("baselines/"):
            added = sorted(k for k in ADDED_BASELINE_FIELDS if k in new and k not in old)
            old = {**old, **{k: new[k] for k in added}}
            notes += [f"added field {k}" for k in added]
        if name.endswith("comparison.json") and (old.get("schema"), new.get("schema")) == (V1, V2):
            every_file = b.parent / (new["flips"].get("file") or "flips.jsonl")
            every = [json.loads(line) for line in every_file.read_text("utf-8").splitlines()] if every_file.is_file() else []
            other += flip_problems(old["flips"], new["flips"], every)
            old, new = as_v2_checks(old), {**new, "flips": None}
            notes.append(f"schema /1 -> /2 (verdict words and flips mapped; {len(every):,} flips in {every_file.name})")
        fields = sorted(set(differing(old, new)))
        other += masked(fields)
        timestamps = [f for f in fields if f not in other]
        notes += ["timestamps: " + ", ".join(timestamps)] if timestamps else []
        failed |= bool(other)
        print(f"{'DIFFERS ' if other else 'same    '} {name}: {'differs in ' + ', '.join(other[:8]) if other else 'but for ' + '; '.join(notes)}")
print(f"outputs: {out}/before, {out}/after")
sys.exit(1 if failed else 0)
PY
