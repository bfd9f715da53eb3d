#!/usr/bin/env bash
# Suite runs on the lent GPU machine (16 CPU cores, one GPU), for one device-tool call whose
# limit is 10 minutes: the supervised runs that gain from the GPU (device=cuda, CUDA graphs)
# side by side, and POPGym runs of our PPO (CPU, as here) on the other cores. At $DEADLINE
# seconds every run it started (and no other process) is sent Ctrl-C's signal, so it stops at
# a checkpoint, and what the runs wrote since the start is packed into $OUT, to be unpacked
# into a run copy of main here and resumed by the same suites. Torch is the machine's; the
# other packages travel as wheels in .whl/ (benchmarks/device_python.sh).
#   DEADLINE=450 ADDING_SEEDS="3 4" DENOISE_SEEDS="1 2 3 4" bash experiments/device_batch.sh
# ADDING_SEEDS and DENOISE_SEEDS name the seeds of TARNN's adding preset at T = 750 and of the
# denoise curriculum (both stages) to train on the GPU (none by default), POPGYM_JOBS (0: no
# POPGym runs) and POPGYM_AGENTS the POPGym runs (default: the suite's own list; it skips
# finished runs). A supervised run resumes only on the kind of device it started on (its data
# generator's state is that device's): name no seed whose run started on a CPU, and a run this
# starts can be finished only on a GPU.
set -u
OUT=${OUT:-build/device_batch}
DEADLINE=${DEADLINE:-470}
DEVICE=${DEVICE:-cuda}
POPGYM_JOBS=${POPGYM_JOBS:-9}
POPGYM_AGENTS=${POPGYM_AGENTS-}
ADDING_SEEDS=${ADDING_SEEDS-}
DENOISE_SEEDS=${DENOISE_SEEDS-}
LOGS=/tmp/device_batch_logs
mkdir -p "$OUT" "$LOGS"
touch /tmp/device_batch_start
# shellcheck source=benchmarks/device_python.sh
. benchmarks/device_python.sh
PY=${PY:-python3}
nproc
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    # MPS lets the small kernels of several processes share the GPU instead of taking turns;
    # without it (or if it breaks CUDA) the runs take turns
    if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
        if timeout 60 $PY -c "import torch; torch.zeros(1, device='cuda').sum().item()"; then
            echo "MPS on"
        else
            echo quit | nvidia-cuda-mps-control; echo "MPS off (CUDA failed under it)"
        fi
    else
        echo "MPS off"
    fi
    nvidia-smi dmon -s u -d 10 > "$LOGS/gpu_use.log" 2>&1 &
fi
S="$PY -m experiments.supervised.suite"
SUITES=()  # the suites this script started: only their runs are stopped at the deadline
for seed in $ADDING_SEEDS; do
    $S --presets kag2021_grid_lr1e-3_adding_tarnn_T750 --seeds "$seed" -- device="$DEVICE" \
        > "$LOGS/adding_$seed.log" 2>&1 &
    SUITES+=($!)
done
for seed in $DENOISE_SEEDS; do
    $S --presets kerg2020_table2_denoise_relstm_curriculum_T20 \
        kerg2020_table2_denoise_relstm_curriculum --seeds "$seed" -- device="$DEVICE" \
        > "$LOGS/denoise_$seed.log" 2>&1 &
    SUITES+=($!)
done
if [ "$POPGYM_JOBS" -gt 0 ]; then
    # the compiled CPU loops, built once before the POPGym runs load them
    $PY -c "from rlmem.cells._engines.compiled import _build; print('compiled loops:', _build())"
    # shellcheck disable=SC2086
    $PY -m experiments.popgym.suite ${POPGYM_AGENTS:+--agents $POPGYM_AGENTS} \
        --jobs "$POPGYM_JOBS" \
        > "$LOGS/popgym.log" 2>&1 &
    SUITES+=($!)
fi
while [ "$SECONDS" -lt "$DEADLINE" ]; do sleep 5; done
echo "deadline at $SECONDS s: stopping the runs at their checkpoints"
for suite in "${SUITES[@]}"; do
    pkill -INT -P "$suite"  # its run, as Ctrl-C would: it stops at its next checkpoint
    kill -INT "$suite" 2>/dev/null
done
for _ in $(seq 1 60); do
    alive=0
    for suite in "${SUITES[@]}"; do kill -0 "$suite" 2>/dev/null && alive=$((alive + 1)); done
    [ "$alive" -eq 0 ] && break
    sleep 1
done
echo "stopped at $SECONDS s; suites still running: $alive"
# What comes back: every file the runs wrote, but a POPGym checkpoint only where its run is
# unfinished (a finished run is read from its progress.csv), and those of the least advanced
# runs dropped, whole run with it, where they would pass RETURN_MIB; split in PART_MIB parts.
# The device tool returns at most 64 MiB, in files of 16 MiB at most (its README): RETURN_MIB
# leaves 12 MiB of it to the files kept whatever their size (supervised runs, logs) and to the
# archive's overhead.
RETURN_MIB=52
PART_MIB=15
$PY - "$LOGS" "$RETURN_MIB" <<'PACK' > /tmp/changed
import sys
from pathlib import Path
from experiments.popgym.suite import FRAMES
start = Path("/tmp/device_batch_start").stat().st_mtime
budget = int(sys.argv[2]) * 2**20
files = [p for root in ("experiments/supervised/runs", "experiments/popgym/runs")
         for p in Path(root).rglob("*")
         if p.is_file() and p.stat().st_mtime > start and p.name != ".lock"]
def frames(run: Path) -> float:
    rows = (run / "progress.csv").read_text().strip().splitlines()
    return float(rows[-1].split(",")[0]) if len(rows) > 1 else 0.0
popgym_checkpoints = [p for p in files if p.parts[1] == "popgym" and p.name == "checkpoint.pt"]
finished = {p for p in popgym_checkpoints if frames(p.parent) >= FRAMES}
partial = sorted(set(popgym_checkpoints) - finished, key=lambda p: -frames(p.parent))
kept = [p for p in files if p not in popgym_checkpoints]
used = sum(p.stat().st_size for p in kept)
dropped = []
for checkpoint in partial:
    if used + checkpoint.stat().st_size > budget:
        dropped.append(checkpoint.parent)
        continue
    kept.append(checkpoint)
    used += checkpoint.stat().st_size
kept = [p for p in kept if not any(run in p.parents for run in dropped)]
for run in dropped:
    print(f"dropped (unfinished, over the size budget): {run}", file=sys.stderr)
kept += sorted(Path(sys.argv[1]).iterdir())
print("\n".join(map(str, kept)))
PACK
tar czf /tmp/runs.tgz -T /tmp/changed
split -b "${PART_MIB}m" /tmp/runs.tgz "$OUT/runs.tgz.part_"
ls -l "$OUT"
shopt -s nullglob
for log in "$LOGS"/adding_*.log "$LOGS"/denoise_*.log; do echo "== $log"; tail -3 "$log"; done
if [ -f "$LOGS/popgym.log" ]; then tail -5 "$LOGS/popgym.log"; fi
