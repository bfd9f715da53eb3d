#!/usr/bin/env bash
# The CUDA checks, in one call on a machine with a GPU (the lent device machine: torch there,
# the other dependencies carried as wheels in .whl/, see docs/performance.md):
#   1. the engines' float64 equality tests on CUDA (tests/cells/test_engines.py -k cuda) and
#      the other tests that take a device;
#   2. train, evaluate, supervised and sb3 commands end to end with device=cuda;
#   3. benchmarks/cuda_check.py: PPO frames/s CPU against CUDA, host syncs, supervised
#      iterations/s against cuDNN, profiler tables.
# Logs and tables go to $OUT (default: build/cuda_check).
set -u
OUT=${OUT:-build/cuda_check}
mkdir -p "$OUT"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
    # rlmem.agents and rlmem.envs live in agents/ and envs/ (setup.py): link them in place of
    # an install
    ln -sfn ../agents rlmem/agents
    ln -sfn ../envs rlmem/envs
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
python3 -c "import torch, rlmem.agents.ppo, minigrid, sb3_contrib; print('torch', torch.__version__, torch.cuda.get_device_name())" || exit 1

step() {  # name, limit in seconds, command...
    local name=$1 limit=$2; shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "== $name: exit $? in $((SECONDS - start)) s"
    tail -4 "$OUT/$name.log"
}

# the CPU columns' compiled loops build once per machine: start it beside the tests
python3 -c "from rlmem.cells._engines.compiled import _build; _build()" >"$OUT/build.log" 2>&1 &
step tests_cuda 180 python3 -m pytest -p no:cacheprovider -o addopts= -q -n 8 \
    tests/cells/test_engines.py tests/tasks/test_cuda_graph.py -k "cuda or graph"
R=/tmp/rlmem_cuda
step train_cuda 150 python3 -m rlmem.train env=DoorKey-5x5 memory=relstm device=cuda \
    frames=8192 "run_dir=$R/ppo"
step evaluate_cuda 90 python3 -m rlmem.evaluate "run=$R/ppo" env=transfer episodes=4 device=cuda
step supervised_cuda 90 python3 -m rlmem.supervised task=copy memory=relstm device=cuda \
    iterations=40 eval_every=20 "run_dir=$R/copy"
step sb3_cuda 150 python3 -m rlmem.train agent=sb3 env=DoorKey-5x5 memory=relstm device=cuda \
    frames=2048 "run_dir=$R/sb3"
step benchmark 300 python3 benchmarks/cuda_check.py --rounds 3 --out "$OUT/cuda_check.md" \
    --profile "$OUT/profile.md"
cat "$OUT/cuda_check.md"
