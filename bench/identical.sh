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
# a difference elsewhere fails it. OUT defaults to a new temporary folder.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n 4,5p "$0"; exit 2; }
before=$(realpath "$1"); after=$(realpath "$2"); store=$(realpath "$3"); shift 3
if (($#)); then suites=("$@"); else suites=(kobbq bbq hbb); fi
py=${PYTHON:-python}
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
      [[ $step == record ]] && extra+=(--biascheck-update-baseline)
      start=$(date +%s)
      (cd "$out/work" && PYTHONPATH=$tree "$py" -m pytest -q -p no:cacheprovider -p no:randomly \
        --biascheck "suites/$suite" --biascheck-model sim/stereotyped --biascheck-data "$data" \
        --biascheck-cache "$out/work/store.sqlite" --biascheck-allow-missing-data --biascheck-report "$out/work/$suite-$step" "${extra[@]}" \
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
        fields = sorted(set(differing(json.loads(a.read_bytes()), json.loads(b.read_bytes()))))
        other = [f for f in fields if re.sub(r"\[\d+\]", "", f).rsplit(".", 1)[-1] not in TIMESTAMPS]
        failed |= bool(other)
        print(f"{'DIFFERS ' if other else 'same    '} {name}: {'differs in ' + ', '.join(other[:8]) if other else 'but for timestamps: ' + ', '.join(fields)}")
print(f"outputs: {out}/before, {out}/after")
sys.exit(1 if failed else 0)
PY
