#!/usr/bin/env bash
# The CUDA checks, in one call on a machine with a GPU (the lent device machine: torch there,
# the other dependencies carried as wheels in .whl/, see docs/performance.md):
#   bash benchmarks/cuda_check.sh [parts...]      parts: tests commands tasks suite benchmark
#                                                 (default: tests commands benchmark)
#   tests      the engines' float64 equality tests, the CUDA-graph tests and fused Adam on CUDA;
#   commands   train, evaluate, supervised (copy, denoise, adding), sb3, MemLSTM's full
#              attention on DoorKey-16x16 and POPGym's generic preset end to end with
#              device=cuda;
#   tasks      the supervised commands alone;
#   suite      the default test suite with CUDA visible (device=auto picks it), less the checks
#              that need the docs tools, a Slurm launcher or pip's network;
#   benchmark  benchmarks/cuda_check.py: PPO frames/s CPU against CUDA, host syncs, supervised
#              iterations/s against cuDNN, profiler tables ($BENCH_ARGS, default
#              "--rounds 3 --profile $OUT/profile.md", are passed on);
#   kernels    the engines' float64 equality tests on CUDA (Triton kernels and Python loops);
#   cells      benchmarks/gpu_cells.py: every cell against cuDNN, kernels on and off
#              ($CELLS_ARGS passed on, default "--budget 240");
#   envs       the tensor envs' frames/s on CUDA (MiniGrid and POPGym);
#   ppo        our PPO with the tensor envs on CUDA at the fast preset (lstm, relstm), frames/s;
#   ppo_scale  issue 59's GPU rows: DoorKey-5x5 lstm and relstm at 4,096 envs (XLand-MiniGrid's
#              single-task shape: rollouts of 16, one epoch, 16 minibatches), frames/s; and
#              MemoryS7 lstm on the fast preset to stop_return=0.9, its wall time;
#   scaling    benchmarks/scaling.py on that machine's CPU cores (16 on the lent ones: the
#              only machine of more than 2 cores this project has), $SCALING_ARGS passed on;
#   processes  benchmarks/processes.py on that machine's CPU cores: our PPO's frames/s with
#              agent.processes 1, 2, 4 and 8 (the fast preset, 256 tensor envs split).
# Logs and tables go to $OUT (default: build/cuda_check).
set -u
OUT=${OUT:-build/cuda_check}
PARTS=${*:-tests commands benchmark}
mkdir -p "$OUT"
# shellcheck source=benchmarks/device_python.sh
. benchmarks/device_python.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
python3 -c "import torch, rlmem.agents.ppo, minigrid, sb3_contrib; print('torch', torch.__version__, torch.cuda.get_device_name())" || exit 1
# the CPU columns' compiled loops build once per machine: start it beside the first part
python3 -c "from rlmem.cells._engines.compiled import _build; _build()" >"$OUT/build.log" 2>&1 &

step() {  # name, limit in seconds, command...
    local name=$1 limit=$2; shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "== $name: exit $? in $((SECONDS - start)) s"
    tail -4 "$OUT/$name.log"
}

R=/tmp/rlmem_cuda
supervised_tasks() {
    for task in copy denoise adding; do
        step "supervised_${task}_cuda" 90 python3 -m rlmem.supervised "task=$task" \
            memory=relstm device=cuda iterations=40 eval_every=20 "run_dir=$R/$task"
    done
}
for part in $PARTS; do
    case $part in
    tests)
        step tests_cuda 180 python3 -m pytest -p no:cacheprovider -o addopts= -q -n 8 \
            tests/cells/test_engines.py tests/tasks/test_cuda_graph.py \
            tests/agents/test_fused_adam.py -k "cuda or graph" ;;
    commands)
        step train_cuda 150 python3 -m rlmem.train env=DoorKey-5x5 memory=relstm device=cuda \
            frames=8192 "run_dir=$R/ppo"
        step evaluate_cuda 90 python3 -m rlmem.evaluate "run=$R/ppo" env=transfer episodes=4 \
            device=cuda
        supervised_tasks
        step sb3_cuda 150 python3 -m rlmem.train agent=sb3 env=DoorKey-5x5 memory=relstm \
            device=cuda frames=2048 "run_dir=$R/sb3"
        # MemLSTM's full attention over a DoorKey-16x16 episode (2560 steps), as the transfer
        # suite evaluates it: evaluate raises its capacity to the episode's step limit
        step train_memlstm_cuda 150 python3 -m rlmem.train env=DoorKey-5x5 memory=memlstm \
            device=cuda frames=4096 "run_dir=$R/memlstm"
        step evaluate_memlstm_16x16_cuda 200 python3 -m rlmem.evaluate "run=$R/memlstm" \
            env=DoorKey-16x16 episodes=16 device=cuda
        # the generic preset (memory 256, no entropy bonus) on a POPGym env
        step popgym_cuda 150 python3 -m rlmem.train env=RepeatPreviousEasy memory=lstm \
            device=cuda frames=8192 "run_dir=$R/popgym" ;;
    tasks) supervised_tasks ;;
    suite)
        # -v: each result on its own line, so a run cut by its limit still names its failures
        step suite_cuda "${SUITE_LIMIT:-300}" python3 -m pytest -p no:cacheprovider -o addopts= -v -n 16 \
            --dist loadfile \
            -m "not slow" --ignore=tests/docs --ignore=tests/test_sweep_submitit.py \
            --ignore=tests/test_packaging.py --ignore=tests/cells/test_plugin_cell.py \
            --ignore=tests/cells/test_plugin_messages.py ;;
    benchmark)
        # shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
        step benchmark 300 python3 benchmarks/cuda_check.py --out "$OUT/cuda_check.md" \
            ${BENCH_ARGS:---rounds 3 --profile $OUT/profile.md}
        cat "$OUT/cuda_check.md" ;;
    kernels)
        step kernels_cuda 150 python3 -m pytest -p no:cacheprovider -o addopts= -q -n 8 \
            tests/cells/test_engines.py -k cuda ;;
    cells)
        # shellcheck disable=SC2086  # CELLS_ARGS is a list of arguments
        step gpu_cells 330 python3 benchmarks/gpu_cells.py --out "$OUT/gpu_cells.md" \
            ${CELLS_ARGS:---budget 240}
        cat "$OUT/gpu_cells.md" ;;
    envs)
        step tensor_envs_cuda 100 python3 benchmarks/tensor_env_speed.py --device cuda \
            --num-envs 16 4096 65536 --max-reference-envs 16 --rounds 2 --block-seconds 0.5
        step tensor_popgym_cuda 100 python3 benchmarks/tensor_popgym_speed.py --device cuda \
            --sizes 16 4096 --rounds 2 --seconds 0.5 ;;
    ppo)
        for memory in lstm relstm; do
            step "ppo_tensor_${memory}_cuda" 75 python3 -m rlmem.train env=DoorKey-5x5 \
                "memory=$memory" env_backend=tensor device=cuda agent.preset=fast \
                frames=1048576 "run_dir=$R/ppo_tensor_$memory"
            tail -3 "$R/ppo_tensor_$memory/progress.csv"
        done ;;
    ppo_scale)
        for memory in lstm relstm; do
            step "ppo_4096_${memory}_cuda" 90 python3 -m rlmem.train env=DoorKey-5x5 \
                "memory=$memory" env_backend=tensor device=cuda agent.preset=fast \
                num_envs=4096 agent.frames_per_env=16 agent.epochs=1 agent.batch_size=4096 \
                frames=6291456 "run_dir=$R/ppo_4096_$memory"
            tail -3 "$R/ppo_4096_$memory/progress.csv"
        done
        step memorys7_solve_cuda 150 python3 -m rlmem.train env=MemoryS7 memory=lstm \
            env_backend=tensor device=cuda agent.preset=fast stop_return=0.9 frames=4194304 \
            "run_dir=$R/memorys7_solve"
        tail -2 "$R/memorys7_solve/progress.csv" ;;
    scaling)
        # shellcheck disable=SC2086  # SCALING_ARGS is a list of arguments
        step scaling "${SCALING_LIMIT:-400}" python3 benchmarks/scaling.py \
            --output "$OUT/scaling.md" ${SCALING_ARGS:-} ;;
    processes)
        step processes 300 python3 benchmarks/processes.py --processes 1 2 4 8 --rounds 2 \
            --frames 122880
        tail -6 "$OUT/processes.log" ;;
    *) echo "unknown part: $part"; exit 2 ;;
    esac
done
