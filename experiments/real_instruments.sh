#!/usr/bin/env bash
# The README's table of real instruments: the default preset's `make train FOLDS=3` on each
# instrument for each run seed, every run its own process, all at once on one machine.
#   experiments/real_instruments.sh OUT "SEEDS" NAME="OPTIONS" [NAME="OPTIONS" ...]
# e.g. experiments/real_instruments.sh out "0 1 2" default="" shrink="--forecast-shrink validation"
# Runs go to OUT/NAME/INSTRUMENT-seed<s> (INSTRUMENT: sp500, the embedded default data, or a
# `--data` name), logs beside them; every run's stitched Sharpes are printed at the end.
# INSTRUMENTS overrides the list. `nasdaq` needs the `arch` package and `stock:*`
# `bokeh-sampledata` (rl_trader.data.instruments says which is missing); on a GPU set
# XLA_PYTHON_CLIENT_PREALLOCATE=false so the processes share its memory.
set -euo pipefail
out=$1 seeds=$2
shift 2
PY=${PYTHON:-python3}
instruments=${INSTRUMENTS:-"sp500 nasdaq stock:AAPL stock:IBM stock:MSFT stock:GOOG"}
for spec in "$@"; do
  name=${spec%%=*} opts=${spec#*=}
  mkdir -p "$out/$name"
  for inst in $instruments; do
    data=()
    [[ $inst != sp500 ]] && data=(--data "$inst")
    for s in $seeds; do
      dir="$out/$name/${inst/:/-}-seed$s"
      # shellcheck disable=SC2086  # options are words
      $PY -m rl_trader.cli.train --folds 3 "${data[@]}" --seed "$s" --no-report \
        --run-dir "$dir" $opts > "$dir.log" 2>&1 &
    done
  done
done
wait
$PY - "$out" <<'PYEOF'
import json, sys
from pathlib import Path
for summary in sorted(Path(sys.argv[1]).glob("*/*/summary.json")):
    s = json.loads(summary.read_text())
    sharpe = {name: perf["sharpe"] for name, perf in s["stitched"].items()}
    spa = s["headline"]["spa"] or {}
    print(f"{summary.parent.parent.name:10s} {summary.parent.name:20s} agent "
          f"{sharpe['agent']:+.2f}  buy & hold {sharpe['buy_and_hold']:+.2f}  vol_target "
          f"{sharpe['vol_target']:+.2f}  DSR {s['headline']['dsr']:.3f}  SPA p "
          f"{spa.get('p_agent_beats_all', float('nan')):.2f} / "
          f"{spa.get('p_some_baseline_beats_agent', float('nan')):.2f}")
PYEOF
