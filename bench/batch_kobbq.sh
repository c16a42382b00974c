#!/bin/bash
# Batch mode against online calls (issue 14): the whole KoBBQ (34,200 requests), priced, once online
# and once through the simulator's OpenAI batch endpoints, then the batch run again on its store.
# Prints each run's calls, cost and wall time; whether the batch run's outcomes, metrics and verdicts
# are identical to the online run's; and the cost ratio (batch / online).
#   bench/batch_kobbq.sh [MODEL]   (from the project folder; about 8 minutes with sim/)
# shellcheck source=bench/kobbq_runs.sh
. "$(dirname "$0")/kobbq_runs.sh"
price=(--biascheck-price 0.15/0.60)
run online "$out/online.sqlite" "${price[@]}"
run batch "$out/batch.sqlite" "${price[@]}" --biascheck-batch --biascheck-batch-poll 1
run rerun "$out/batch.sqlite" "${price[@]}" --biascheck-batch --biascheck-batch-poll 1
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
