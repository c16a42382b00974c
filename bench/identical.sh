#!/bin/bash
# Byte-identity of what biascheck writes, across a refactoring (issue 13). Runs each benchmark on a
# small selection with the simulator: records a baseline with one persona, then gates another against
# it, writing results, reports, comparisons and the baseline. Run it on the old and the new commit with
# the same store; the second run makes no model call, so any difference comes from the code.
#   bench/identical.sh OUT STORE   on each commit, with the same OUT and a copy of one warm STORE;
#   keep OUT/masked of each, then diff -r them (OUT's path is in the outputs, hence the same OUT).
# Fields that differ between any two runs (times, durations, the tool's commit) are masked in OUT/masked.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "$1"); store=$(realpath -m "${2:-$out/store.sqlite}")
mkdir -p "$out"
export OPENAI_API_KEY=unused BIASCHECK_DATA_DIR=${BIASCHECK_DATA_DIR:-../shared/datasets}
run() {  # name suite persona [options...]
  local name=$1 suite=$2 persona=$3; shift 3
  python -m pytest -q -p no:randomly -p no:cacheprovider --biascheck "$suite" --biascheck-model "$persona" \
    --biascheck-cache "$store" --biascheck-report "$out/$name" "$@" > "$out/$name.log" 2>&1 || true
  tail -1 "$out/$name.log" | sed "s/ in [0-9.]*s.*//; s/^/$name: /"
}
# Small copies of the shipped suites: a baseline covers a whole suite, so the suite itself is cut.
python - "$out" <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
cuts = {"kobbq": "templates_per_category = 2", "bbq": "templates_per_category = 2", "hbb": None, "kobbg-quick": None, "enbbg-quick": None}
for name, cut in cuts.items():
    text = pathlib.Path("suites", name, "suite.toml").read_text()
    if cut:
        text = text.replace("[subset]\n", f"[subset]\n{cut}\n") if "[subset]" in text else text + f"\n[subset]\n{cut}\n"
    text = re.sub(r"^questions = \d+", "questions = 10", text, flags=re.M)
    (out / "suites" / name).mkdir(parents=True, exist_ok=True)
    (out / "suites" / name / "suite.toml").write_text(text)
PY
for spec in "kobbq kobbq" "bbq bbq" "hbb hbb" "kobbg kobbg-quick" "enbbg enbbg-quick"; do
  read -r name suite <<< "$spec"
  judge=(); [[ $name == *bbg ]] && judge=(--biascheck-judge sim/judge)
  run "$name-record" "$out/suites/$suite" "sim/fair" "${judge[@]}" --biascheck-update-baseline --biascheck-baseline "$out/baselines/$name.json"
  run "$name-gate" "$out/suites/$suite" "sim/stereotyped?p=0.3" "${judge[@]}" --biascheck-baseline "$out/baselines/$name.json"
done
rm -rf "$out/masked"; mkdir -p "$out/masked"
(cd "$out" && find . \( -path ./masked -o -path ./suites \) -prune -o -type f \( -name '*.json' -o -name '*.md' -o -name '*.html' \) -print) | while read -r f; do
  mkdir -p "$out/masked/$(dirname "$f")"
  sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})?/<time>/g;
          s/("(duration_s|wall_s|elapsed_s|seconds)": )[0-9.e-]+/\1<s>/g;
          s/("git_commit": )"[0-9a-f]*"/\1"<commit>"/g;
          s/("run_id": )"[0-9a-f]*"/\1"<run id>"/g;
          s/\b[0-9a-f]{40}\b/<commit>/g; s/at commit [0-9a-f]{12}/at commit <commit>/g;
          s/("digest": )"[0-9a-f]*"/\1"<digest of the unmasked file>"/g;
          s/sha256:[0-9a-f]{64}/sha256:<hash of the unmasked file>/g;
          s/[0-9.]+ s (wall|elapsed)/<s> \1/g' "$out/$f" > "$out/masked/$f"
done
echo "written: $out/masked ($(find "$out/masked" -type f | wc -l) files)"
