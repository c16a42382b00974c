#!/bin/bash
# A model redeployed under the same name and port (issue 12, part 1): sim "fair", then "stereotyped",
# behind hosted_vllm/my-model, KoBBQ age with prompt 1. Prints the calls and the verdict of each run:
# without a revision the second model is answered from the store; with one it is called.
#   bench/redeploy.sh   (from the project folder, the data mirror in BIASCHECK_DATA_DIR or ../shared/datasets)
cd "$(dirname "$0")/.."
export OPENAI_API_KEY=unused HOSTED_VLLM_API_KEY=unused BIASCHECK_DATA_DIR=${BIASCHECK_DATA_DIR:-../shared/datasets}
out=$(mktemp -d); store=$out/store.sqlite
serve() { python -m biascheck.cli sim serve --suite suites/kobbq --data ${BIASCHECK_DATA_DIR:-../shared/datasets} --port 18765 --persona "$1" > "$out/sim.$1.log" 2>&1 & echo $!; }
run() { python -m pytest -q -p no:randomly -p no:cacheprovider --biascheck suites/kobbq --biascheck-model hosted_vllm/my-model \
  --biascheck-api-base http://127.0.0.1:18765/v1 --biascheck-cache "$store" --biascheck-report "$out/$1" -k "age and p1" "${@:2}" > "$out/$1.log" 2>&1 || true
  python -c "import json,sys; r=json.load(open('$out/$1/results.json')); print('$1', 'calls', r['run']['calls'], 'cache hits', r['run']['cache_hits'], 'passed', r['passed'], 'served', r['model'].get('served'), 'revision', r['model'].get('revision'))"; }
ready() { until grep -q listening "$out/sim.$1.log" 2>/dev/null; do sleep 0.2; done; }
set -e
pid=$(serve fair); ready fair
run fair-norev; run fair-v1 --biascheck-model-revision v1
kill $pid; sleep 1; pid=$(serve stereotyped); ready stereotyped
run stereo-norev; run stereo-v2 --biascheck-model-revision v2
kill $pid
