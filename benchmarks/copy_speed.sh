#!/bin/bash
# Copy T=100 training speed, relstm at hidden 128 and batch 128 (the ReLSTM paper's setting):
# iterations/s of an older checkout against this one, alternating, in one run.
#
#   git worktree add /tmp/old e0c5646     # the code before the fast cells (issue 10)
#   OMP_NUM_THREADS=1 bash benchmarks/copy_speed.sh /tmp/old [rounds]
#
# The older checkout runs from its own source tree (PYTHONPATH), with this venv's packages.
# Each run trains 25 iterations; the rate is taken from iteration 3 on (start-up and the first
# compile excluded), from the run's progress.csv.
set -euo pipefail
OLD=$(cd "$1" && pwd)
ROUNDS=${2:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ARGS="task=copy seq_len=100 memory=relstm memory.hidden_size=128 memory.short_term=10
      memory.relevant=10 batch_size=128 iterations=25 eval_every=1000 log_every=1 figures=false
      progress_bar=false"
rate() {
  python - "$1/progress.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["time/elapsed_s"]]
first, last = rows[2], rows[-1]
iterations = float(last["iteration"]) - float(first["iteration"])
print(f"{iterations / (float(last['time/elapsed_s']) - float(first['time/elapsed_s'])):.3f}")
PY
}
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$WORK"
for round in $(seq "$ROUNDS"); do
  PYTHONPATH="$OLD" python -m rlmem.supervised $ARGS run_dir="$WORK/old$round" > /dev/null 2>&1
  python -m rlmem.supervised $ARGS run_dir="$WORK/new$round" > /dev/null 2>&1
  old=$(rate "$WORK/old$round"); new=$(rate "$WORK/new$round")
  echo "round $round: old $old it/s, this checkout $new it/s, ratio $(python -c "print(f'{$new / $old:.2f}')")"
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
