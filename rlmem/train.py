"""Train an agent with a memory cell on a MiniGrid env.

    python -m rlmem.train env=DoorKey-5x5 memory=relstm
    python -m rlmem.train env=MemoryS7 memory=tarnn seed=1 frames=1000000 agent.lr=5e-4
    python -m rlmem.train -m memory=lstm,relstm seed=0,1,2      # a local sweep (joblib)

The run directory (``runs/<agent>/<env>/<cell>/seed<seed>`` unless ``run_dir=...``, with the
settings that differ from the defaults after the cell, e.g.
``runs/ppo/DoorKey-5x5/relstm+grid_encoding-raw/seed0``, so that runs of other settings never
share one: :mod:`rlmem.schema.run_names`; in a sweep under ``hydra.sweep.dir``; Hydra's
``hydra.run.dir`` and ``hydra.sweep.subdir`` name it too, :mod:`rlmem.schema.hydra_keys`)
receives ``config.yaml``, ``progress.csv``, TensorBoard events in ``tb/`` and
``checkpoint.pt``. Running the same command again resumes from the checkpoint (``resume=false``
starts afresh).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from rlmem.agents.registry import AGENTS
from rlmem.agents.run import RULES, resumed_config
from rlmem.envs import env_spec
from rlmem.runs import CHECKPOINT_NAME, open_run, reported_as_cli_errors
from rlmem.runs.episode_stats import RECENT_EPISODES
from rlmem.runs.logger import CorruptProgressError
from rlmem.runs.progress import read_progress
from rlmem.schema.command_line import CommandLine, freeze_imported_objects, front_door
from rlmem.schema.memory import cell_configs
from rlmem.schema.run_names import existing_run_dir
from rlmem.schema.shell_override import override
from rlmem.schema.train import TrainConfig, register_train_configs, resolve

register_train_configs()

LINE = CommandLine(
    program="rlmem.train", config_name="train", register=register_train_configs,
    schema=TrainConfig, sections={"memory": cell_configs,
                                     "agent": lambda: (agent.config for agent in AGENTS.values())},
    purpose=("Train an agent with a memory cell on an env (MiniGrid short names, or any "
             "gymnasium id). The run directory (run_dir) receives config.yaml, progress.csv, "
             "TensorBoard events in tb/ and checkpoint.pt; the same command again resumes it. "
             "Evaluate it afterwards with python -m rlmem.evaluate run=<run_dir>."),
    examples=("env=DoorKey-5x5 memory=relstm",
              "env=MemoryS7 memory=tarnn seed=1 frames=1000000 agent.lr=5e-4",
              "+recipe=memory_transfer memory=relstm",
              "-m memory=lstm,relstm seed=0,1,2"),
    groups=("memory", "agent", "+recipe"), shows_envs=True)
"""What ``python -m rlmem.train --help`` says."""


@hydra.main(config_path="conf", config_name="train", version_base="1.3")
def run(cfg: DictConfig) -> None:
    """Train the run of ``cfg``, then say where it is and what to do next."""
    with reported_as_cli_errors("rlmem.train"):
        if OmegaConf.is_interpolation(cfg, "run_dir"):  # the default: maybe an older name's
            cfg.run_dir = str(existing_run_dir(Path(cfg.run_dir)))
        train(cfg, Path(cfg.run_dir))
        print(summary(cfg, Path(cfg.run_dir)), flush=True)


def train(cfg: DictConfig, run_dir: Path) -> None:
    """Resolve ``cfg`` into the run's config, once (:func:`~rlmem.schema.train.resolve`: every
    check, before the run directory is touched), open the run in ``run_dir`` (which creates
    it; Hydra creates none) and hand both to the trainer of its agent, unless the run has
    already reached its frames.

    Raises:
        ValueError: a value of ``cfg`` is out of range (naming the key).
        rlmem.runs.CheckpointMismatchError: ``run_dir`` holds a checkpoint of another config.
        rlmem.runs.NonFiniteLossError: the training diverged; the last good checkpoint is kept.
    """
    # The checkpoint's decisions (our PPO's presets) are kept: read before resolving.
    config = resolve(cfg, resumed_config(run_dir) if cfg.resume else None)
    with open_run(run_dir, config.recorded(), RULES, program="rlmem.train") as session:
        if not session.finished:
            AGENTS[config.agent.name].train(config, session)


def summary(cfg: DictConfig, run_dir: Path) -> str:
    """What a run says at its end: how far it trained and its recent return (from its
    ``progress.csv``), where its files are, and the command that evaluates it."""
    try:
        rows = read_progress(run_dir / "progress.csv")
    except CorruptProgressError:
        rows = []
    last = rows[-1] if rows else None
    frames = int(last.number("frames", 0.0)) if last is not None else 0
    recent = last.finite("return_recent") if last is not None else None
    result = f"Trained {frames} frames" + (
        f"; the mean return of the last {RECENT_EPISODES} episodes is {recent:.3f}"
        if recent is not None else "")
    run = override("run", str(run_dir))
    target = cfg.transfer_env or env_spec(str(cfg.env)).transfer
    evaluate = (f"python -m rlmem.evaluate {run} env=transfer episodes=100` (on {target})"
                if target else f"python -m rlmem.evaluate {run} episodes=100` (on {cfg.env})")
    return (f"{result}. The run is in {run_dir}: {CHECKPOINT_NAME}, config.yaml, progress.csv "
            "and TensorBoard events in tb/. Next: evaluate it "
            f"with `{evaluate}, or train it further by running the same command with a larger "
            f"frames= (it resumes).")


def main() -> None:
    """The CLI: ``--help``, unknown keys (:func:`~rlmem.schema.command_line.front_door`),
    then Hydra."""
    sys.argv[1:] = front_door(LINE)  # Hydra reads its command line from sys.argv
    freeze_imported_objects()
    run()


if __name__ == "__main__":
    main()
