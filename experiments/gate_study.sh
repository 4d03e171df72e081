#!/usr/bin/env bash
# The release gate for several designs side by side, one process per (design, market), all at
# once on one machine (the gate's runs are independent), then each design judged over all of
# its runs with `experiments.convergence --rescore`.
#   experiments/gate_study.sh OUT RUNS MARKETS NAME="OPTIONS" [NAME="OPTIONS" ...]
# e.g. experiments/gate_study.sh out 3 cubic,slow_drift,random_walk generic="" model="--q-head model"
# MARKETS: comma-separated (or "all": the gate's family). Runs go to OUT/NAME/MARKET-run<k>,
# logs to OUT/NAME-MARKET.log, each design's goals to OUT/NAME.gate.json and OUT/NAME.txt.
# Every process shares the device; set XLA_PYTHON_CLIENT_PREALLOCATE=false on a GPU. FIRST=K
# starts at run K (runs K … RUNS−1 are trained; all of 0 … RUNS−1 are judged). STAGGER=S
# starts each design's first market S seconds before the rest, so that its compiled programs
# are in the persistent cache when the others ask for them. Each process gets its share of the
# cores for its tree fits (OMP_NUM_THREADS = cores / processes, at least 1): 26 processes
# with every core each fitted no tree in 545 s on 16 cores (one H100, 2026-12-07).
set -euo pipefail
out=$1 runs=$2 markets=$3 first=${FIRST:-0}
shift 3
PY=${PYTHON:-python3}
if [[ $markets == all ]]; then
  markets=$($PY -c "from experiments.convergence import FAMILY; print(','.join(FAMILY))")
fi
mkdir -p "$out"
n_markets=$(tr ',' '\n' <<< "$markets" | grep -c .)
threads=$(( $(nproc) / (n_markets * $#) )); (( threads > 0 )) || threads=1
one() {  # NAME OPTIONS MARKET
  # shellcheck disable=SC2086  # options are words
  OMP_NUM_THREADS=$threads $PY -m experiments.convergence --first-run "$first" --runs $((runs - first)) --markets "$3" \
    --run-dir "$out/$1" --out "$out/$1-$3-$first.gate.json" $2 > "$out/$1-$3-$first.log" 2>&1 &
}
for pass in first rest; do
  for spec in "$@"; do
    i=0
    for m in ${markets//,/ }; do
      if { [[ $pass == first ]] && ((i == 0)); } || { [[ $pass == rest ]] && ((i > 0)); }; then
        one "${spec%%=*}" "${spec#*=}" "$m"
      fi
      i=$((i + 1))
    done
  done
  [[ $pass == first ]] && sleep "${STAGGER:-0}"
done
wait
for spec in "$@"; do
  name=${spec%%=*} opts=${spec#*=}
  # shellcheck disable=SC2086
  $PY -m experiments.convergence --runs "$runs" --markets "$markets" --run-dir "$out/$name" \
    --out "$out/$name.gate.json" --rescore $opts > "$out/$name.txt" 2>&1 || true
  grep -E "^(PASS|FAIL|n/a|not run):" "$out/$name.txt" | sed "s/^/$name /"
done
