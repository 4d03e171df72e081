#!/usr/bin/env bash
# The learner studies of docs/studies/: validation-only sweeps (experiments.sweep) of static
# learner options on tuning markets (data seeds < 1000, never scored by the gate).
#   experiments/learner_study.sh OUT EPOCHS MARKET[@SEED][,...] NAME="OPTIONS" [NAME="OPTIONS" ...]
# e.g. experiments/learner_study.sh out 10 ar1:5000:1,regime:5000:4@2 taken="" all="--backup all"
# (MARKET@SEED trains that market with run seed SEED; default 0; A+B+C pools instruments:
# --data synthetic:A,synthetic:B,synthetic:C, A traded and scored; a pool needs
# --tree-forecast off --view excess among the OPTIONS.) PARALLEL=1 runs the
# settings (NAME=...) as concurrent processes on one accelerator, each over every market;
# PARALLEL=runs runs every (setting, market) as its own process, all at once (the studies of
# docs/studies/: 20 runs share one H200 in about 5 minutes), logs in OUT/<name>-<market>.log.
# With PARALLEL=runs, STAGGER=S starts each setting's first market S seconds before the rest,
# so that its compiled programs are in the persistent cache when the others ask for them (30
# runs that all compiled at once did not finish in 555 s on one H200, study 26).
# Writes OUT/<name>-<market>.json (experiments.sweep --out) and OUT/<name>-<market>.summary.json
# (per-epoch validation records and learning diagnostics); run directories go to RUNS
# (default OUT/runs).
set -euo pipefail
out=$1 epochs=$2 markets=$3
shift 3
runs=${RUNS:-$out/runs}
mkdir -p "$runs"
PY=${PYTHON:-python3}
one() {  # NAME OPTIONS MARKET[@SEED]: one sweep run
  local name=$1 opts=$2 item=$3 m seed tag
  m=${item%@*} seed=0
  [[ $item == *@* ]] && seed=${item#*@}
  tag="$name-${m%%+*}" tag="${tag//:/_}-r$seed"  # a pool of K more: -poolK
  pooled=${m//[^+]/} && [[ -n $pooled ]] && tag="$tag-pool${#pooled}"
  data="synthetic:${m//+/,synthetic:}"
  echo "=== $tag: --data $data --seed $seed --epochs $epochs $opts"
  # shellcheck disable=SC2086  # options are words
  $PY -m experiments.sweep --data "$data" --seed "$seed" --epochs "$epochs" $opts \
    --run-dir "$runs/$tag" --out "$out/$tag.json" 2>&1 | grep --line-buffered -v "^fold " || true
  cp "$runs/$tag/summary.json" "$out/$tag.summary.json" 2>/dev/null || echo "no summary: $tag"
}
setting() {  # NAME OPTIONS: every market, in turn
  local item
  for item in ${markets//,/ }; do
    one "$1" "$2" "$item"
  done
}
if [[ ${PARALLEL:-0} == runs ]]; then
  for pass in first rest; do  # each setting's first market first: its programs get cached
    for spec in "$@"; do
      i=0
      for item in ${markets//,/ }; do
        if { [[ $pass == first ]] && ((i == 0)); } || { [[ $pass == rest ]] && ((i > 0)); }; then
          one "${spec%%=*}" "${spec#*=}" "$item" > "$out/${spec%%=*}-${item//[:@+]/_}.log" 2>&1 &
        fi
        i=$((i + 1))
      done
    done
    [[ $pass == first ]] && sleep "${STAGGER:-0}"
  done
else
  for spec in "$@"; do
    if [[ ${PARALLEL:-0} == 1 ]]; then
      setting "${spec%%=*}" "${spec#*=}" > "$out/${spec%%=*}.log" 2>&1 &
    else
      setting "${spec%%=*}" "${spec#*=}"
    fi
  done
fi
wait
