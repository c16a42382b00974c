#!/bin/bash
# Sharding (issue 14): the whole KoBBQ in 4 shards, each into its own store, merged with
# `biascheck store merge`, then the whole suite on the merged store, against one unsharded run.
# Prints each stage's calls and wall time, and whether results.json's metrics, verdicts and cases
# are identical.   bench/shards.sh [MODEL]   (from the project folder; about 7 minutes with sim/)
set -euo pipefail
cd "$(dirname "$0")/.."
export BIASCHECK_DATA_DIR=${BIASCHECK_DATA_DIR:-../shared/datasets} BIASCHECK_OFFLINE=1
model=${1:-sim/stereotyped?p=0.2&seed=7}
out=$(mktemp -d)
run() {  # name, store, extra pytest arguments...
  local name=$1 store=$2 start end
  shift 2
  start=$(date +%s.%N)
  python -m pytest -q -p no:cacheprovider --biascheck suites/kobbq --biascheck-model "$model" \
    --biascheck-cache "$store" --biascheck-report "$out/$name" "$@" > "$out/$name.log" 2>&1 || true
  end=$(date +%s.%N)
  python - "$name" "$start" "$end" "$out/$name/results.json" <<'PY'
import json, sys
name, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
run = json.load(open(path))["run"]
print(f"{name:<10} {run['cases']:>6} cases {run['calls']:>6} calls {run['cache_hits']:>6} cache hits {end - start:7.1f} s")
PY
}
for k in 1 2 3 4; do run "shard-$k" "$out/shard-$k.sqlite" --biascheck-shard "$k/4"; done
start=$(date +%s.%N)
python -m biascheck.cli store merge "$out/merged.sqlite" "$out"/shard-{1,2,3,4}.sqlite | tail -1
echo "merge: $(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f} s')" "$start" "$(date +%s.%N)")"
run merged "$out/merged.sqlite"
run whole "$out/whole.sqlite"
python - "$out" <<'PY'
import json, sys
out = sys.argv[1]
merged, whole = (json.load(open(f"{out}/{name}/results.json")) for name in ("merged", "whole"))
shards = [json.load(open(f"{out}/shard-{k}/results.json")) for k in range(1, 5)]
ids = [case["case_id"] for doc in shards for case in doc["cases"]]
print(f"shards: {len(ids)} cases, {len(set(ids))} distinct, suite {whole['suite']['cases_total']}")
for key in ("metrics", "verdicts", "cases"):
    same = json.dumps(merged[key], sort_keys=True) == json.dumps(whole[key], sort_keys=True)
    print(f"merged vs unsharded {key}: {'identical' if same else 'DIFFERENT'}")
PY
