#!/usr/bin/env bash
# The README's table of real instruments: the default preset's `make train FOLDS=3` on each
# instrument for each run seed, every run its own process: every instrument's first seed at once,
# then the other seeds at once (they read the trees the first wave fitted from the cache).
#   experiments/real_instruments.sh OUT "SEEDS" NAME="OPTIONS" [NAME="OPTIONS" ...]
# e.g. experiments/real_instruments.sh out "0 1 2" default="" lambda="--risk-aversion 0.025"
# Runs go to OUT/NAME/INSTRUMENT-seed<s> (INSTRUMENT: sp500, the embedded default data, or a
# `--data` name), logs beside them; every run's stitched Sharpes are printed at the end, and a
# run that failed is named (exit status 1). Run from the repository root with a PYTHON that
# has the package's dependencies (default python3).
# INSTRUMENTS overrides the list. `nasdaq` needs the `arch` package and `stock:*`
# `bokeh-sampledata` (rl_trader.data.instruments says which is missing); on a GPU set
# XLA_PYTHON_CLIENT_PREALLOCATE=false so the processes share its memory.
set -euo pipefail
out=$1 seeds=$2
shift 2
PY=${PYTHON:-python3}
instruments=${INSTRUMENTS:-"sp500 nasdaq stock:AAPL stock:IBM stock:MSFT stock:GOOG"}
# Two waves: every instrument's first seed, then the other seeds. The trees a run fits depend
# on the data and the fold, not on the seed, so the second wave reads them from the tree cache
# the first filled. Each process gets its share of the cores for its fits (OMP_NUM_THREADS):
# 15 runs fitting at once with every core each stalled for 500 s on 16 cores (2026-12-05).
first=${seeds%% *} rest=${seeds#"$first"}
pids=() dirs=() failed=0
wave() {  # wave SEEDS: start every (design, instrument, seed) run, then wait for them all
  local n=0 start=${#pids[@]}
  for spec in "${specs[@]}"; do for inst in $instruments; do for s in $1; do n=$((n + 1)); done; done; done
  local threads=$(( $(nproc) / (n > 0 ? n : 1) )); (( threads > 0 )) || threads=1
  for spec in "${specs[@]}"; do
    name=${spec%%=*} opts=${spec#*=}
    mkdir -p "$out/$name"
    for inst in $instruments; do
      data=()
      [[ $inst != sp500 ]] && data=(--data "$inst")
      for s in $1; do
        dir="$out/$name/${inst/:/-}-seed$s"
        # shellcheck disable=SC2086  # options are words
        OMP_NUM_THREADS=$threads $PY -m rl_trader.cli.train --folds 3 \
          ${data[@]+"${data[@]}"} --seed "$s" --no-report --run-dir "$dir" $opts \
          > "$dir.log" 2>&1 &
        pids+=($!) dirs+=("$dir")
      done
    done
  done
  for ((i = start; i < ${#pids[@]}; i++)); do
    wait "${pids[$i]}" || { echo "FAILED: ${dirs[$i]} (see ${dirs[$i]}.log)"; failed=1; }
  done
}
specs=("$@")
for spec in "${specs[@]}"; do
  [[ $spec == *=* ]] || { echo "expected NAME=\"OPTIONS\", got '$spec'" >&2; exit 2; }
done
wave "$first"
[[ -n ${rest// /} ]] && wave "$rest"
$PY - "${dirs[@]}" <<'PYEOF'
import sys
from pathlib import Path
from rl_trader.report.writer import load_summary
for run in map(Path, sys.argv[1:]):
    s = load_summary(run) if (run / "summary.json").is_file() else None
    if s is None or not s.stitched:
        print(f"{run.parent.name:10s} {run.name:20s} no stitched test figures")
        continue
    sharpe = {name: perf.sharpe for name, perf in s.stitched.items()}
    spa, nan = s.headline.spa, float("nan")
    print(f"{run.parent.name:10s} {run.name:20s} agent "
          f"{sharpe['agent']:+.2f}  buy & hold {sharpe['buy_and_hold']:+.2f}  vol_target "
          f"{sharpe['vol_target']:+.2f}  DSR {s.headline.dsr:.3f}  SPA p "
          f"{spa.p_agent_beats_all if spa else nan:.2f} / "
          f"{spa.p_some_baseline_beats_agent if spa else nan:.2f}")
PYEOF
exit $failed
