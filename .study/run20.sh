#!/usr/bin/env bash
# study 20 on the device: markets $1 (comma list), runs 6-8, designs M1 and MV; results to $OUT
set -u
export XLA_PYTHON_CLIENT_PREALLOCATE=false OMP_NUM_THREADS=2 STAGGER=45 PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi -L; date
start=$(date +%s)
for r in 6 7 8; do
  FIRST=$r timeout ${LIMIT:-540} bash experiments/gate_study.sh gs $((r + 1)) "$1" \
    M1="--no-report" MV="--no-report --tree-forecast validation" > "gs-$r.out" 2>&1 &
done
wait
echo "wall $(( $(date +%s) - start )) s"
tar czf "$OUT/gs-$2.tgz" gs/*/*/summary.json gs/*.log gs-*.out 2>/dev/null
ls gs/M1 gs/MV | head -40
