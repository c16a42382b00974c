#!/bin/bash
# Sharding (issue 14): the whole KoBBQ in 4 shards, each into its own store, merged with
# `biascheck store merge`, then the whole suite on the merged store, against one unsharded run.
# Prints each stage's calls and wall time, and whether results.json's metrics, verdicts and cases
# are identical.   bench/shards.sh [MODEL]   (from the project folder; about 7 minutes with sim/)
# shellcheck source=bench/kobbq_runs.sh
. "$(dirname "$0")/kobbq_runs.sh"
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
