"""Train an agent with a memory cell on a MiniGrid env.

    python -m rlmem.train env=DoorKey-5x5 memory=relstm
    python -m rlmem.train env=MemoryS7 memory=tarnn seed=1 frames=1000000 agent.lr=5e-4
    python -m rlmem.train -m memory=lstm,relstm seed=0,1,2      # a local sweep (joblib)

The run directory (``runs/<agent>/<env>/<cell>/seed<seed>`` unless ``run_dir=...``, with the
settings that differ from the defaults after the cell, e.g.
``runs/ppo/DoorKey-5x5/relstm+grid_encoding-raw/seed0``, so that runs of other settings never
share one: :mod:`rlmem.schema.run_names`; in a sweep under ``hydra.sweep.dir``) receives
``config.yaml``, ``progress.csv``, TensorBoard events in ``tb/`` and ``checkpoint.pt``. Running
the same command again resumes from the checkpoint (``resume=false`` starts afresh).
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from rlmem.agents.registry import AGENTS
from rlmem.envs import env_spec
from rlmem.runs import CHECKPOINT_NAME, reported_as_cli_errors
from rlmem.runs.episode_stats import RECENT_EPISODES
from rlmem.runs.logger import CorruptProgressError
from rlmem.runs.progress import read_progress
from rlmem.schema.command_line import CommandLine, front_door
from rlmem.schema.memory import cell_configs
from rlmem.schema.run_names import existing_run_dir
from rlmem.schema.shell_override import override
from rlmem.schema.train import TrainConfig, check_train_config, register_train_configs

register_train_configs()

LINE = CommandLine(
    program="rlmem.train", config_name="train", register=register_train_configs,
    schema=TrainConfig, sections={"memory": cell_configs, "agent": lambda: AGENTS.values()},
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
    """Check ``cfg``, then hand it to the trainer of its agent."""
    with reported_as_cli_errors("rlmem.train"):
        trainer = check_train_config(cfg).agent.trainer()
        if OmegaConf.is_interpolation(cfg, "run_dir"):  # the default: maybe an older name's
            cfg.run_dir = str(existing_run_dir(Path(cfg.run_dir)))
        # The run creates run_dir itself, once everything is checked; Hydra creates none.
        trainer(cfg, Path(cfg.run_dir))
        print(summary(cfg, Path(cfg.run_dir)), flush=True)


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
    front_door(LINE)
    run()


if __name__ == "__main__":
    main()
