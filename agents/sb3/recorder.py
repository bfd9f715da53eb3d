"""``RunRecorder``: per-update rows, progress bar and checkpoints of an ``agent=sb3`` run."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from tqdm import tqdm

from rlmem.runs import NonFiniteLossError, RunLogger
from rlmem.runs.episode_stats import EpisodeLog

SB3_METRICS: dict[str, tuple[str, float]] = {
    "train/policy_gradient_loss": ("loss/policy", 1.0),
    "train/value_loss": ("loss/value", 1.0),
    "train/entropy_loss": ("loss/entropy", -1.0),  # SB3 logs minus the entropy
    "train/approx_kl": ("ppo/approx_kl", 1.0),
    "train/clip_fraction": ("ppo/clip_fraction", 1.0),
    "train/explained_variance": ("ppo/explained_variance", 1.0),
}
"""RecurrentPPO's logger key -> (our PPO's progress.csv column, sign), for keys that mean the
same. ``train/loss`` is left out: SB3 logs the last minibatch's, not the mean."""

MEMORY_PREFIXES = ("memory/", "loss/memory_aux")
"""Keys recorded by :class:`~rlmem.agents.sb3.MemoryCallback`, copied as they are."""


class RunRecorder(BaseCallback):
    """After every RecurrentPPO update: one ``progress.csv``/TensorBoard row, a checkpoint and
    a progress-bar tick, with the columns of our PPO's runs where they mean the same.

    Place it after :class:`~rlmem.agents.sb3.MemoryCallback` in the callback list: an update
    is recorded at the start of the next rollout (RecurrentPPO offers no hook after
    ``train()``), or at the end of training, once MemoryCallback has logged its diagnostics.

    Args:
        logger: the run's CSV/TensorBoard logger.
        save: ``save(frames, updates)`` writes the checkpoint.
        frames: frames done before this ``learn`` call (non-zero when resuming).
        updates: updates done before this ``learn`` call.
        total_frames: the run's frame budget (for the progress bar).
        progress_bar: show a tqdm bar.
        should_stop: asked after every step; true ends ``learn`` there (Ctrl-C). The last
            finished update is already in the checkpoint.
    """

    def __init__(self, logger: RunLogger, save: Callable[[int, int], None], frames: int,
                 updates: int, total_frames: int, progress_bar: bool,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        super().__init__()
        self.run_logger = logger
        self.save = save
        self.frames = frames
        self.updates = updates
        self.total_frames = total_frames
        self.show_bar = progress_bar
        self.should_stop = should_stop
        self.bar: tqdm | None = None
        self._rollouts = 0
        # Restarts empty on resume: return_recent then covers the episodes since the resume.
        self.episodes = EpisodeLog()
        self._returns: list[float] = []
        self._lengths: list[float] = []
        self._update_start = 0.0

    def _init_callback(self) -> None:
        if not isinstance(self.model, OnPolicyAlgorithm):
            raise TypeError(f"RunRecorder records the updates of an on-policy algorithm "
                            f"(RecurrentPPO), got {type(self.model).__name__}")
        self.frames_per_update = self.model.n_envs * self.model.n_steps

    def _on_training_start(self) -> None:
        self.bar = tqdm(total=self.total_frames, initial=min(self.frames, self.total_frames),
                        unit="frames", disable=not self.show_bar, dynamic_ncols=True)

    def _on_rollout_start(self) -> None:
        self._finish_update()
        self._update_start = time.perf_counter()
        self._returns, self._lengths = [], []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            episode = info.get("episode")  # set by SB3's Monitor when an episode ends
            if episode is not None:
                self._returns.append(float(episode["r"]))
                self._lengths.append(float(episode["l"]))
        if self.should_stop():
            self._rollouts = 0  # the interrupted rollout is not an update to record
            return False
        return True

    def _on_rollout_end(self) -> None:
        self._rollouts += 1

    def _on_training_end(self) -> None:
        self._finish_update()
        if self.bar is not None:
            self.bar.close()

    def _finish_update(self) -> None:
        """Record the update that followed the last rollout, if it has not been recorded."""
        if self._rollouts == 0:
            return
        self._rollouts = 0
        if not all(torch.isfinite(p).all() for p in self.model.policy.parameters()):
            raise NonFiniteLossError(
                f"the policy's weights became non-finite in update {self.updates + 1}; the "
                "last good checkpoint is kept")
        self.frames += self.frames_per_update
        self.updates += 1
        logged = self.model.logger.name_to_value
        row: dict[str, float] = {
            "frames": self.frames, "updates": self.updates,
            "fps": self.frames_per_update / (time.perf_counter() - self._update_start),
            **self.episodes.columns(self._returns, self._lengths),
        }
        for key, (column, sign) in SB3_METRICS.items():
            if key in logged:
                row[column] = sign * float(logged[key])
        row.update({key: float(value) for key, value in logged.items()
                    if key.startswith(MEMORY_PREFIXES)})
        self.run_logger.log(row)
        self.save(self.frames, self.updates)
        if self.bar is not None:
            self.bar.update(min(self.frames, self.total_frames) - self.bar.n)
            self.bar.set_postfix(fps=f"{row['fps']:.0f}", ret=f"{row['return_recent']:.3f}")

