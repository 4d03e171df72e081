#!/usr/bin/env bash
# One device-machine session: cold/warm `make train`, the convergence gate, the benchmark.
# Usage (on the GPU machine, from the repo root): bash experiments/gpu_session.sh OUTDIR [SECTIONS]
set -u
out=${1:?output dir}; sections=${2:-peak,env,population}
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$out"
export RL_TRADER_JAX_CACHE=$(mktemp -d)
for run in cold warm; do
  /usr/bin/time -f "wall %e s, peak RSS %M kB" make train FOLDS=3 PYTHON=python3 \
    RUN_DIR=runs/$run > "$out/train_$run.log" 2>&1
  tail -n 3 "$out/train_$run.log"
done
make convergence PYTHON=python3 RUN_DIR=runs/convergence > "$out/convergence.log" 2>&1
echo "convergence exit $?"; tail -n 8 "$out/convergence.log"
python3 -m experiments.benchmark --sections "$sections" --out "$out/bench.json" \
  > "$out/bench.log" 2>&1; tail -n 20 "$out/bench.log"
tar czf "$out/runs.tgz" runs/*/summary.json runs/*/timings.json runs/*/report.html \
  runs/*/folds.json 2>/dev/null
