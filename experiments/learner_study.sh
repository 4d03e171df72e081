#!/usr/bin/env bash
# The learner study of docs/learning.md: validation-only sweeps (experiments.sweep) of static
# learner options on tuning markets (data seeds < 1000, never scored by the gate).
#   experiments/learner_study.sh OUT EPOCHS MARKET[,MARKET...] NAME="OPTIONS" [NAME="OPTIONS" ...]
# e.g. experiments/learner_study.sh out 10 ar1:5000:1 taken="" all="--backup all"
# Writes OUT/<name>-<market>.json (experiments.sweep --out) and OUT/<name>-<market>.summary.json
# (per-epoch validation records and learning diagnostics); run directories go to RUNS
# (default OUT/runs).
set -euo pipefail
out=$1 epochs=$2 markets=$3
shift 3
runs=${RUNS:-$out/runs}
mkdir -p "$runs"
PY=${PYTHON:-python3}
for spec in "$@"; do
  name=${spec%%=*} opts=${spec#*=}
  for m in ${markets//,/ }; do
    tag="$name-${m//:/_}"
    echo "=== $tag: --data synthetic:$m --epochs $epochs $opts"
    # shellcheck disable=SC2086  # options are words
    $PY -m experiments.sweep --data "synthetic:$m" --epochs "$epochs" $opts \
      --run-dir "$runs/$tag" --out "$out/$tag.json" 2>&1 | grep -v "^fold " || true
    cp "$runs/$tag/summary.json" "$out/$tag.summary.json" 2>/dev/null || echo "no summary: $tag"
  done
done
