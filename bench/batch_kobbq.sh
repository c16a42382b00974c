#!/bin/bash
# Batch mode against online calls (issue 14): the whole KoBBQ (34,200 requests), priced, once online
# and once through the simulator's OpenAI batch endpoints, then the batch run again on its store.
# Prints each run's calls, cost and wall time; whether the batch run's outcomes, metrics and verdicts
# are identical to the online run's; and the cost ratio (batch / online).
#   bench/batch_kobbq.sh [MODEL]   (from the project folder; about 8 minutes with sim/)
set -euo pipefail
cd "$(dirname "$0")/.."
export BIASCHECK_DATA_DIR=${BIASCHECK_DATA_DIR:-../shared/datasets} BIASCHECK_OFFLINE=1
model=${1:-sim/stereotyped?p=0.2&seed=7}
out=$(mktemp -d)
run() {  # name, store, extra pytest arguments...
  local name=$1 store=$2 start end
  shift 2
  start=$(date +%s.%N)
  python -m pytest -q -p no:cacheprovider --biascheck suites/kobbq --biascheck-model "$model" --biascheck-price 0.15/0.60 \
    --biascheck-cache "$store" --biascheck-report "$out/$name" "$@" > "$out/$name.log" 2>&1 || true
  end=$(date +%s.%N)
  python - "$name" "$start" "$end" "$out/$name/results.json" <<'PY'
import json, sys
name, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
run = json.load(open(path))["run"]
print(f"{name:<8} {run['cases']:>6} cases {run['calls']:>6} calls {run['cache_hits']:>6} cache hits "
      f"{run['errors']:>3} errors ${run['cost_usd']:.6f} {end - start:7.1f} s")
PY
}
run online "$out/online.sqlite"
run batch "$out/batch.sqlite" --biascheck-batch --biascheck-batch-poll 1
run rerun "$out/batch.sqlite" --biascheck-batch --biascheck-batch-poll 1
python - "$out" <<'PY'
import json, sys
out = sys.argv[1]
online, batch, rerun = (json.load(open(f"{out}/{name}/results.json")) for name in ("online", "batch", "rerun"))
for key in ("cases", "metrics", "verdicts"):
    same = json.dumps(online[key], sort_keys=True) == json.dumps(batch[key], sort_keys=True)
    again = json.dumps(batch[key], sort_keys=True) == json.dumps(rerun[key], sort_keys=True)
    print(f"batch vs online {key}: {'identical' if same else 'DIFFERENT'}; rerun vs batch: {'identical' if again else 'DIFFERENT'}")
print(f"cost: batch ${batch['run']['cost_usd']:.6f} / online ${online['run']['cost_usd']:.6f} = {batch['run']['cost_usd'] / online['run']['cost_usd']:.6f}")
PY
