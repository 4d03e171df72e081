#!/usr/bin/env bash
# Wall-clock of a new user's first runs (issue 14's table): `make train FOLDS=3` with an empty
# compilation cache, the same warm, then a file of another length in the same shape bucket
# (the embedded S&P 500 without its first 600 bars), warm; and how many compiled programs
# each run added to the persistent cache (both caches empty at the start unless given); then
# the two big programs' compile, pass by pass, and the epoch's two halves alone
# (`experiments.program_size --passes --call --parts --serialized`), and the Q-network's parts
# compiled alone (`experiments.compile_parts --passes`).
#   experiments/first_runs.sh OUT        (PYTHON=python3 by default; extra options in ARGS)
set -euo pipefail
out=$1
mkdir -p "$out"
PY=${PYTHON:-python3}
export RL_TRADER_JAX_CACHE=${RL_TRADER_JAX_CACHE:-$(mktemp -d)/jax}
export RL_TRADER_TREE_CACHE=${RL_TRADER_TREE_CACHE:-$(mktemp -d)/trees}
runs=$(mktemp -d)
$PY - "$runs/short.csv" <<'PYEOF'
import gzip, sys
from importlib import resources
rows = gzip.decompress((resources.files("rl_trader.data") / "sp500.csv.gz").read_bytes())
lines = rows.decode().splitlines()
open(sys.argv[1], "w").write("\n".join([lines[0]] + lines[601:]) + "\n")
PYEOF
entries() { { find "$RL_TRADER_JAX_CACHE" -type f -printf '%f\n' 2>/dev/null || true; } | sort; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
start=$(date +%s.%N)
$PY -c "import rl_trader, jax; jax.devices()"
echo "startup (import rl_trader + jax, device init): $(since "$start") s" \
  | tee "$out/first_runs.txt"
for name in cold warm other_length; do
  data=()
  [[ $name == other_length ]] && data=(--data "$runs/short.csv")
  entries > "$runs/before"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  $PY -m rl_trader.cli.train --folds 3 "${data[@]}" --run-dir "$runs/$name" ${ARGS:-} \
    > "$out/$name.log" 2>&1
  wall=$(since "$start")
  new=$(entries | comm -13 "$runs/before" -)
  echo "$name: ${wall} s wall, $(grep -c . <<< "$new" || true) new cache entries," \
       "$(grep -o 'stitched test Sharpe [+-][0-9.]*' "$out/$name.log")" | tee -a "$out/first_runs.txt"
  [[ $name == cold || -z $new ]] || echo "$new" | sed 's/^/  new: /' | tee -a "$out/first_runs.txt"
  cp "$runs/$name/timings.json" "$out/$name.timings.json"
  cp "$runs/$name/summary.json" "$out/$name.summary.json"
done
$PY -m experiments.program_size --passes --call --parts --serialized --out "$out/program_size.json" \
  > "$out/program_size.log" 2>&1
$PY -m experiments.compile_parts --passes --out "$out/compile_parts.json" \
  > "$out/compile_parts.log" 2>&1
