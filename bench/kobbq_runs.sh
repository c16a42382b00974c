# Sourced by the KoBBQ benches (shards.sh, batch_kobbq.sh): the whole packaged KoBBQ on one model,
# each run into a store and a report folder under one temporary folder, timed.
# shellcheck shell=bash
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BIASCHECK_DATA_DIR=${BIASCHECK_DATA_DIR:-../shared/datasets} BIASCHECK_OFFLINE=1
model=${1:-sim/stereotyped?p=0.2&seed=7}
out=$(mktemp -d)

# run NAME STORE [pytest arguments...]: one line of cases, calls, cache hits, errors, cost, wall time.
run() {
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
print(f"{name:<10} {run['cases']:>6} cases {run['calls']:>6} calls {run['cache_hits']:>6} cache hits "
      f"{run['errors']:>3} errors ${run['cost_usd']:.6f} {end - start:7.1f} s")
PY
}
