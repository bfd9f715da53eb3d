"""Train an agent with a memory cell on a MiniGrid env.

    python -m rlmem.train env=DoorKey-5x5 memory=relstm
    python -m rlmem.train env=MemoryS7 memory=tarnn seed=1 frames=1000000 agent.lr=5e-4
    python -m rlmem.train -m memory=lstm,relstm seed=0,1,2      # a local sweep (joblib)

The run directory (``runs/<agent>/<env>/<cell>/seed<seed>`` unless ``run_dir=...``, with the
settings that differ from the defaults after the cell, e.g.
``runs/ppo/DoorKey-5x5/relstm,grid_encoding=raw/seed0``, so that runs of other settings never
share one: :mod:`rlmem.schema.run_names`; in a sweep under ``hydra.sweep.dir``) receives
``config.yaml``, ``progress.csv``, TensorBoard events in ``tb/`` and ``checkpoint.pt``. Running
the same command again resumes from the checkpoint (``resume=false`` starts afresh).
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from rlmem.runs import reported_as_cli_errors
from rlmem.schema.command_line import CommandLine, front_door
from rlmem.schema.train import check_train_config, register_train_configs

register_train_configs()

LINE = CommandLine(
    program="rlmem.train", config_name="train", register=register_train_configs,
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
        # The run creates run_dir itself, once everything is checked; Hydra creates none.
        trainer(cfg, Path(cfg.run_dir))


def main() -> None:
    """The CLI: ``--help``, unknown keys (:func:`~rlmem.schema.command_line.front_door`),
    then Hydra."""
    front_door(LINE)
    run()


if __name__ == "__main__":
    main()
