#!/bin/bash
# Whole KoBBQ from a warm response store (issue 12, part 4): one process, then -n 2 (a session of
# suites alone, which biascheck keeps in one process), then -n 2 beside an ordinary test (which
# xdist distributes). Prints the wall time of each.
#   bench/xdist_warm.sh   (from the project folder; the data mirror in BIASCHECK_DATA_DIR or ../shared/datasets)
cd "$(dirname "$0")/.."
export BIASCHECK_DATA_DIR=${BIASCHECK_DATA_DIR:-../shared/datasets} BIASCHECK_OFFLINE=1
out=$(mktemp -d)
printf 'def test_other():\n    pass\n' > "$out/test_other.py"
run() {
  local start end
  start=$(date +%s.%N)
  python -m pytest -q -p no:randomly -p no:cacheprovider --biascheck suites/kobbq --biascheck-model sim/fair \
    --biascheck-cache "$out/store.sqlite" "$@" > "$out/last.log" 2>&1
  end=$(date +%s.%N)
  python -c "import sys; print(f'{sys.argv[1]:<34} {float(sys.argv[3]) - float(sys.argv[2]):6.1f} s')" "${*:-one process}" "$start" "$end"
}
run > /dev/null  # cold: fills the store (34,200 calls, about 3 min)
echo "warm store, whole KoBBQ (34,253 items):"
run
run -n 2
run -n 2 "$out/test_other.py"
