# Sourced by the scripts run on the lent GPU machine (benchmarks/cuda_check.sh,
# experiments/device_batch.sh): torch is that machine's, and the other packages travel as
# wheels in .whl/ (docs/performance.md); they are installed into /tmp/site, which goes on
# PYTHONPATH with the repository. Without .whl/ (an installed rlmem), nothing is done.
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
